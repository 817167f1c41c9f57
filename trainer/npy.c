/* SPDX-License-Identifier: MIT */
/*
 * NumPy .npy files for float32 C-order 2-D arrays: the header byte for byte
 * as numpy 1.24 writes it (format 1.0), an atomic writer and a reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/trainer.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rdps .npy support assumes a little-endian host ('<f4' rows as stored)"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* numpy pads the dict so the growing axis can reach 21 digits in place */
#define NPY_GROWTH_DIGITS 21

int rdps_npy_header_f32(char *buf, size_t len, uint64_t rows, uint64_t cols)
{
	char dict[160];
	int dl, rl, pad, total;
	char rs[24];

	rl = snprintf(rs, sizeof(rs), "%llu", (unsigned long long)rows);
	dl = snprintf(dict, sizeof(dict),
		      "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }%*s",
		      (unsigned long long)rows, (unsigned long long)cols,
		      rl < NPY_GROWTH_DIGITS ? NPY_GROWTH_DIGITS - rl : 0, "");
	/* magic + version + u16 length + dict + '\n', then spaces so that
	 * the total is a multiple of 64; numpy adds a full 64 when it
	 * already is one */
	pad = NPY_ALIGN - (NPY_MAGIC_LEN + 2 + 2 + dl + 1) % NPY_ALIGN;
	total = NPY_MAGIC_LEN + 2 + 2 + dl + pad + 1;
	if ((size_t)total > len)
		return -ENOSPC;
	memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, (size_t)dl);
	memset(buf + 10 + dl, ' ', (size_t)pad);
	buf[total - 1] = '\n';
	return total;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, ret = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return -ENAMETOOLONG;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

int rdps_npy_write_f32(const char *path, const float *data, uint64_t rows,
		       uint64_t cols)
{
	char hdr[256], tmp[PATH_MAX];
	int hl, fd, ret;

	if (!path || (rows && cols && !data))
		return -EINVAL;
	if (cols && rows > SIZE_MAX / sizeof(float) / cols)
		return -EOVERFLOW;
	hl = rdps_npy_header_f32(hdr, sizeof(hdr), rows, cols);
	if (hl < 0)
		return hl;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ret = write_all(fd, hdr, (size_t)hl);
	if (!ret)
		ret = write_all(fd, data, (size_t)(rows * cols * sizeof(float)));
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		goto err_unlink;
	if (rename(tmp, path)) {
		ret = -errno;
		goto err_unlink;
	}
	return fsync_parent(path);
err_unlink:
	unlink(tmp);
	return ret;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n > (1u << 30) ? (1u << 30) : n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EINVAL; /* short file */
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Finds "'key':" in the dict and returns the text after it (spaces
 * skipped), or NULL. */
static const char *dict_value(const char *dict, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "'%s':", key);
	p = strstr(dict, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	return p;
}

static int parse_shape(const char *p, uint64_t *rows, uint64_t *cols)
{
	char *end;
	unsigned long long r, c;

	if (*p++ != '(')
		return -EINVAL;
	errno = 0;
	r = strtoull(p, &end, 10);
	if (end == p || errno)
		return -EINVAL;
	p = end;
	while (*p == ' ')
		p++;
	if (*p++ != ',')
		return -EINVAL;
	while (*p == ' ')
		p++;
	c = strtoull(p, &end, 10);
	if (end == p || errno)
		return -EINVAL;
	p = end;
	while (*p == ' ')
		p++;
	if (*p != ')')
		return -EINVAL;
	*rows = r;
	*cols = c;
	return 0;
}

int rdps_npy_read_f32(const char *path, float **data, uint64_t *rows,
		      uint64_t *cols)
{
	unsigned char pre[12];
	char *dict = NULL;
	const char *v;
	uint64_t r, c;
	size_t hlen, pre_len, nbytes;
	struct stat st;
	float *buf = NULL;
	int fd, ret;

	if (!path || !data || !rows || !cols)
		return -EINVAL;
	*data = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = read_all(fd, pre, 10);
	if (ret)
		goto err_close;
	ret = -EINVAL;
	if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN))
		goto err_close;
	if (pre[6] == 1) {
		hlen = pre[8] | (size_t)pre[9] << 8;
		pre_len = 10;
	} else if (pre[6] == 2) {
		ret = read_all(fd, pre + 10, 2);
		if (ret)
			goto err_close;
		ret = -EINVAL;
		hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
		       (size_t)pre[11] << 24;
		pre_len = 12;
		if (hlen > (1u << 20))
			goto err_close;
	} else {
		goto err_close;
	}
	dict = malloc(hlen + 1);
	if (!dict) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = read_all(fd, dict, hlen);
	if (ret)
		goto err_free_dict;
	dict[hlen] = '\0';
	ret = -EINVAL;
	v = dict_value(dict, "descr");
	if (!v || strncmp(v, "'<f4'", 5))
		goto err_free_dict;
	v = dict_value(dict, "fortran_order");
	if (!v || strncmp(v, "False", 5))
		goto err_free_dict;
	v = dict_value(dict, "shape");
	if (!v || parse_shape(v, &r, &c))
		goto err_free_dict;
	if (c && r > SIZE_MAX / sizeof(float) / c)
		goto err_free_dict;
	nbytes = (size_t)(r * c * sizeof(float));
	if (fstat(fd, &st)) {
		ret = -errno;
		goto err_free_dict;
	}
	if ((uint64_t)st.st_size != pre_len + hlen + nbytes)
		goto err_free_dict;
	buf = malloc(nbytes ? nbytes : 1);
	if (!buf) {
		ret = -ENOMEM;
		goto err_free_dict;
	}
	ret = read_all(fd, buf, nbytes);
	if (ret)
		goto err_free_buf;
	free(dict);
	close(fd);
	*data = buf;
	*rows = r;
	*cols = c;
	return 0;
err_free_buf:
	free(buf);
err_free_dict:
	free(dict);
err_close:
	close(fd);
	return ret;
}
