// SPDX-License-Identifier: MIT
/* .npy files of 1-D and 2-D arrays (npy.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/npy.h"

size_t rdps_npy_elem_size(const char *descr)
{
	if (!strcmp(descr, "<f4"))
		return 4;
	if (!strcmp(descr, "<i8") || !strcmp(descr, "<f8"))
		return 8;
	if (!strcmp(descr, "|u1") || !strcmp(descr, "<u1"))
		return 1;
	return 0;
}

static int fail(char *err, size_t errlen, int ret, const char *path, const char *why)
{
	snprintf(err, errlen, "%s: %s", path, why);
	return ret;
}

/* The value after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *dict, const char *key)
{
	const char *p = strstr(dict, key);

	if (!p)
		return NULL;
	p += strlen(key);
	while (*p == ' ' || *p == ':')
		p++;
	return p;
}

int rdps_npy_read(const char *path, const char *want, void **data, uint64_t *rows,
		  uint64_t *cols, char *err, size_t errlen)
{
	struct rdps_npy a;
	struct stat st;
	char *buf = NULL;
	int fd, ret = 0;

	*data = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, -errno, path, strerror(errno));
	if (fstat(fd, &st) || !(buf = malloc((size_t)st.st_size + 1))) {
		ret = fail(err, errlen, -ENOMEM, path, "cannot read");
		goto out;
	}
	for (off_t got = 0; got < st.st_size;) {
		ssize_t r = read(fd, buf + got, (size_t)(st.st_size - got));

		if (r <= 0) {
			ret = fail(err, errlen, r < 0 ? -errno : -EIO, path, "read failed");
			goto out;
		}
		got += r;
	}
	if ((ret = rdps_npy_parse(buf, (size_t)st.st_size, path, &a, err, errlen)))
		goto out;
	if (strcmp(a.descr, want) &&
	    !(rdps_npy_elem_size(want) == 1 && rdps_npy_elem_size(a.descr) == 1)) {
		snprintf(err, errlen, "%s: holds %s, not %s", path, a.descr, want);
		ret = -EINVAL;
		goto out;
	}
	if (a.ndim < 1 || a.ndim > 2) {
		ret = fail(err, errlen, -EINVAL, path, "a shape of more than 2 dimensions");
		goto out;
	}
	/* the data to the buffer's start: the caller frees what it gets */
	memmove(buf, a.data, a.data_bytes);
	*data = buf;
	buf = NULL;
	*rows = a.shape[0];
	*cols = a.ndim == 2 ? a.shape[1] : 0;
out:
	free(buf);
	close(fd);
	return ret;
}

static const struct {
	const char *dtype, *descr;
	size_t size;
} dtypes[] = {
	{ "float32", "<f4", 4 }, { "float64", "<f8", 8 }, { "float16", "<f2", 2 },
	{ "bfloat16", "<u2", 2 }, { "int64", "<i8", 8 }, { "int32", "<i4", 4 },
	{ "int16", "<i2", 2 },	  { "int8", "|i1", 1 },	  { "uint8", "|u1", 1 },
	{ "bool", "|b1", 1 },	  { "uint16", "<u2", 2 }, { "uint32", "<u4", 4 },
	{ "uint64", "<u8", 8 },
};

size_t rdps_npy_dtype_size(const char *dtype)
{
	for (size_t i = 0; dtype && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(dtype, dtypes[i].dtype))
			return dtypes[i].size;
	return 0;
}

const char *rdps_npy_dtype_descr(const char *dtype)
{
	for (size_t i = 0; dtype && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(dtype, dtypes[i].dtype))
			return dtypes[i].descr;
	return NULL;
}

const char *rdps_npy_descr_dtype(const char *descr)
{
	/* uint16 before bfloat16: a "<u2" file is uint16 unless its JSON says */
	if (!strcmp(descr, "<u2"))
		return "uint16";
	if (!strcmp(descr, "<u1"))
		return "uint8";
	if (!strcmp(descr, "<i1"))
		return "int8";
	if (!strcmp(descr, "<b1"))
		return "bool";
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(descr, dtypes[i].descr))
			return dtypes[i].dtype;
	return NULL;
}

int rdps_npy_parse(const void *buf, size_t len, const char *path, struct rdps_npy *out,
		   char *err, size_t errlen)
{
	const unsigned char *pre = buf;
	char dict[4096];
	const char *v;
	uint64_t hlen, n = 1;
	size_t pre_len;

	memset(out, 0, sizeof(*out));
	if (len < 10 || memcmp(pre, "\x93NUMPY", 6))
		return fail(err, errlen, -EINVAL, path, "not a .npy file");
	if (pre[6] == 1) {
		hlen = pre[8] | (uint64_t)pre[9] << 8;
		pre_len = 10;
	} else if ((pre[6] == 2 || pre[6] == 3) && len >= 12) {
		hlen = pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
		       (uint64_t)pre[11] << 24;
		pre_len = 12;
	} else {
		return fail(err, errlen, -EINVAL, path, "unknown .npy version");
	}
	if (hlen >= sizeof(dict) || pre_len + hlen > len)
		return fail(err, errlen, -EINVAL, path, "bad header length");
	memcpy(dict, pre + pre_len, hlen);
	dict[hlen] = '\0';
	v = dict_value(dict, "'descr'");
	if (!v || sscanf(v, "'%15[^']'", out->descr) != 1)
		return fail(err, errlen, -EINVAL, path, "no descr in the header");
	if (!rdps_npy_descr_dtype(out->descr)) {
		snprintf(err, errlen, "%s: dtype %s is not one rdps serves", path, out->descr);
		return -EINVAL;
	}
	out->elem_size = rdps_npy_dtype_size(rdps_npy_descr_dtype(out->descr));
	v = dict_value(dict, "'fortran_order'");
	if (!v || strncmp(v, "False", 5))
		return fail(err, errlen, -EINVAL, path, "Fortran order (rdps reads C order)");
	v = dict_value(dict, "'shape'");
	if (!v || *v != '(')
		return fail(err, errlen, -EINVAL, path, "no shape in the header");
	for (v++; *v && *v != ')';) {
		char *end;
		unsigned long long d;

		while (*v == ' ' || *v == ',')
			v++;
		if (*v == ')')
			break;
		errno = 0;
		d = strtoull(v, &end, 10);
		if (errno || end == v || out->ndim == RDPS_NPY_MAX_NDIM)
			return fail(err, errlen, -EINVAL, path, "a shape of more than 8 dimensions");
		if (d && n > UINT64_MAX / d)
			return fail(err, errlen, -EINVAL, path, "a shape of more elements than fit");
		out->shape[out->ndim++] = d;
		n *= d;
		v = end;
	}
	if (n > (UINT64_MAX >> 4) || len - pre_len - hlen != n * out->elem_size)
		return fail(err, errlen, -EINVAL, path, "its length disagrees with its shape");
	out->data = pre + pre_len + hlen;
	out->data_bytes = n * out->elem_size;
	return 0;
}

int rdps_npy_write(const char *path, const char *descr, const void *data, uint64_t rows,
		   uint64_t cols, char *err, size_t errlen)
{
	return rdps_npy_write_sum(path, descr, data, rows, cols, NULL, NULL, err, errlen);
}

int rdps_npy_write_sum(const char *path, const char *descr, const void *data, uint64_t rows,
		       uint64_t cols, uint64_t *bytes, uint64_t *xxh3, char *err, size_t errlen)
{
	char hdr[256], dict[200], tmp[4200];
	const char *dt = rdps_npy_descr_dtype(descr);
	size_t esize = dt ? rdps_npy_dtype_size(dt) : 0, dlen, total;
	uint64_t n = rows * (cols ? cols : 1);
	XXH3_state_t *h = NULL;
	FILE *f;
	int ret = 0;

	if (!esize)
		return fail(err, errlen, -EINVAL, path, "unsupported dtype");
	if (cols)
		snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %llu), }",
			 descr, (unsigned long long)rows, (unsigned long long)cols);
	else
		snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,), }",
			 descr, (unsigned long long)rows);
	dlen = strlen(dict);
	/* numpy pads the header with spaces and '\n' to a multiple of 64 */
	total = (10 + dlen + 1 + 63) / 64 * 64;
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (char)((total - 10) & 0xff);
	hdr[9] = (char)((total - 10) >> 8);
	memcpy(hdr + 10, dict, dlen);
	memset(hdr + 10 + dlen, ' ', total - 10 - dlen - 1);
	hdr[total - 1] = '\n';
	if (xxh3) {
		h = XXH3_createState();
		if (!h || XXH3_64bits_reset(h) == XXH_ERROR) {
			XXH3_freeState(h);
			return -ENOMEM;
		}
		XXH3_64bits_update(h, hdr, total);
		if (n)
			XXH3_64bits_update(h, data, n * esize);
		*xxh3 = XXH3_64bits_digest(h);
		XXH3_freeState(h);
	}
	if (bytes)
		*bytes = total + n * esize;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f)
		return fail(err, errlen, -errno, tmp, strerror(errno));
	if (fwrite(hdr, 1, total, f) != total || (n && fwrite(data, esize, n, f) != n))
		ret = -EIO;
	if (fflush(f) || fsync(fileno(f)))
		ret = ret ? ret : -errno;
	if (fclose(f))
		ret = ret ? ret : -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return fail(err, errlen, ret, path, "write failed");
	}
	return 0;
}
