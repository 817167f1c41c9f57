// SPDX-License-Identifier: MIT
/* Shared helpers of the partition module: name index, line reader, atomic
 * output directories, small file utilities. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"
#include "rdps/common.h"

int rdps_pt_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* ---------------------------------------------------------------------- */

int rdps_pt_names_init(struct rdps_pt_names *t, uint32_t expect)
{
	uint64_t nslots = 1024;

	memset(t, 0, sizeof(*t));
	while (nslots < (uint64_t)expect * 2)
		nslots *= 2;
	t->slots = calloc(nslots, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->mask = nslots - 1;
	return 0;
}

void rdps_pt_names_free(struct rdps_pt_names *t)
{
	if (!t)
		return;
	free(t->arena);
	free(t->off);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static int names_grow(struct rdps_pt_names *t)
{
	uint64_t nslots = (t->mask + 1) * 2, *slots;

	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint64_t i = 0; i <= t->mask; i++) {
		uint64_t s = t->slots[i], j;

		if (!s)
			continue;
		/* The stored 32 hash bits are the low half of the full hash,
		 * which is also what the probe start uses. */
		for (j = (s >> 32) & (nslots - 1); slots[j]; j = (j + 1) & (nslots - 1))
			;
		slots[j] = s;
	}
	free(t->slots);
	t->slots = slots;
	t->mask = nslots - 1;
	return 0;
}

static inline int names_eq(const struct rdps_pt_names *t, uint32_t id,
			   const char *name, size_t len)
{
	const char *s = t->arena + t->off[id];

	return !memcmp(s, name, len) && s[len] == '\0';
}

int rdps_pt_names_find(const struct rdps_pt_names *t, const char *name,
		       size_t len, uint32_t *id)
{
	uint32_t h = (uint32_t)XXH3_64bits(name, len);

	if (!t->slots)
		return -ENOENT;
	for (uint64_t j = h & t->mask;; j = (j + 1) & t->mask) {
		uint64_t s = t->slots[j];

		if (!s)
			return -ENOENT;
		if ((uint32_t)(s >> 32) == h &&
		    names_eq(t, (uint32_t)s - 1, name, len)) {
			*id = (uint32_t)s - 1;
			return 0;
		}
	}
}

int rdps_pt_names_add(struct rdps_pt_names *t, const char *name, size_t len,
		      uint32_t *id)
{
	uint32_t h = (uint32_t)XXH3_64bits(name, len);
	uint64_t j;
	int ret;

	for (j = h & t->mask;; j = (j + 1) & t->mask) {
		uint64_t s = t->slots[j];

		if (!s)
			break;
		if ((uint32_t)(s >> 32) == h &&
		    names_eq(t, (uint32_t)s - 1, name, len)) {
			*id = (uint32_t)s - 1;
			return 0;
		}
	}
	if (t->n >= UINT32_MAX - 1)
		return -EOVERFLOW;
	if (t->n == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 1024;
		uint64_t *off;

		if (ncap < t->cap)
			ncap = UINT32_MAX;
		off = realloc(t->off, (size_t)ncap * sizeof(*off));
		if (!off)
			return -ENOMEM;
		t->off = off;
		t->cap = ncap;
	}
	ret = rdps_reserve((void **)&t->arena, &t->arena_cap, t->arena_len + len + 1);
	if (ret)
		return ret;
	memcpy(t->arena + t->arena_len, name, len);
	t->arena[t->arena_len + len] = '\0';
	t->off[t->n] = t->arena_len;
	t->arena_len += len + 1;
	t->slots[j] = ((uint64_t)h << 32) | ((uint64_t)t->n + 1);
	*id = t->n++;
	if ((uint64_t)t->n * 2 > t->mask + 1) {
		ret = names_grow(t);
		if (ret)
			return ret;
	}
	return 1;
}

/* ---------------------------------------------------------------------- */

int rdps_pt_lines_open(struct rdps_pt_lines *lr, const char *path, char *err,
		       size_t errlen)
{
	memset(lr, 0, sizeof(*lr));
	lr->path = path;
	lr->f = fopen(path, "r");
	if (!lr->f)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	setvbuf(lr->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

long rdps_pt_lines_next(struct rdps_pt_lines *lr)
{
	for (;;) {
		ssize_t n = getline(&lr->line, &lr->cap, lr->f);
		ssize_t i;

		if (n < 0)
			return ferror(lr->f) ? -EIO : -1;
		lr->lineno++;
		while (n > 0 && (lr->line[n - 1] == '\n' || lr->line[n - 1] == '\r'))
			lr->line[--n] = '\0';
		for (i = 0; i < n; i++)
			if (lr->line[i] != ' ' && lr->line[i] != '\t')
				break;
		if (i < n)
			return (long)n;
	}
}

void rdps_pt_lines_close(struct rdps_pt_lines *lr)
{
	if (lr->f)
		fclose(lr->f);
	free(lr->line);
	lr->f = NULL;
	lr->line = NULL;
}

int rdps_pt_split_fields(const struct rdps_pt_lines *lr, char *line, long len,
			 int n, char **field, size_t *flen,
			 const char *const *names, char *err, size_t errlen)
{
	char *p = line, *end = line + len;
	int i = 0;

	/* A NUL would cut a name short and make two names one. */
	if (memchr(line, '\0', (size_t)len))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s:%llu: contains a NUL byte",
				    lr->path, (unsigned long long)lr->lineno);
	for (;;) {
		char *tab = memchr(p, '\t', (size_t)(end - p));
		char *stop = tab ? tab : end;

		if (i < n) {
			field[i] = p;
			flen[i] = (size_t)(stop - p);
		}
		i++;
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	if (i != n)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s:%llu: expected %d tab-separated fields, found %d",
				    lr->path, (unsigned long long)lr->lineno, n, i);
	for (i = 0; i < n; i++)
		if (!flen[i])
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s:%llu: empty %s (field %d)", lr->path,
					    (unsigned long long)lr->lineno, names[i], i + 1);
	return 0;
}

/* ---------------------------------------------------------------------- */

char *rdps_pt_join(const char *a, const char *b)
{
	char *s;

	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		return rmdir(path) && errno != ENOENT ? -1 : 0;
	return unlink(path) && errno != ENOENT ? -1 : 0;
}

int rdps_pt_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) ? -errno : 0;
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? -errno : 0;
}

/* mkdir -p of the directory that holds path (as given: relative ones from
 * the working directory). 0, or -errno naming the component. */
static int make_parents(const char *path, size_t len, char *err, size_t errlen)
{
	char *dir = strndup(path, len);
	int ret = 0;

	if (!dir)
		return rdps_pt_fail(err, errlen, -ENOMEM, "out of memory");
	for (char *p = dir + 1; *p && !ret; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST)
			ret = rdps_pt_fail(err, errlen, -errno, "%s: cannot create: %s", dir,
					   strerror(errno));
		*p = '/';
	}
	free(dir);
	return ret;
}

int rdps_pt_outdir_begin(struct rdps_pt_outdir *d, const char *final, int force,
			 char *err, size_t errlen)
{
	struct stat st;
	size_t len = strlen(final);
	int ret;

	memset(d, 0, sizeof(*d));
	while (len > 1 && final[len - 1] == '/')
		len--;
	if (!len)
		return rdps_pt_fail(err, errlen, -EINVAL, "empty output path");
	if (!stat(final, &st) && !force)
		return rdps_pt_fail(err, errlen, -EEXIST,
				    "%s: already exists (use --force to replace it)", final);
	/* data/wn18 in a fresh checkout: data/ is made, as mkdir -p would. */
	ret = make_parents(final, len, err, errlen);
	if (ret)
		return ret;
	d->final = strndup(final, len);
	if (!d->final || asprintf(&d->tmp, "%s.tmp-XXXXXX", d->final) < 0) {
		free(d->final);
		memset(d, 0, sizeof(*d));
		return -ENOMEM;
	}
	if (!mkdtemp(d->tmp)) {
		ret = -errno;

		rdps_pt_fail(err, errlen, ret, "%s: cannot create: %s", d->tmp,
			     strerror(-ret));
		free(d->tmp);
		free(d->final);
		memset(d, 0, sizeof(*d));
		return ret;
	}
	/* mkdtemp makes it 0700; the result is an ordinary directory. */
	chmod(d->tmp, 0755);
	d->force = force;
	return 0;
}

char *rdps_pt_outdir_path(const struct rdps_pt_outdir *d, const char *name)
{
	return rdps_pt_join(d->tmp, name);
}

FILE *rdps_pt_outdir_fopen(const struct rdps_pt_outdir *d, const char *name,
			   char *err, size_t errlen)
{
	char *p = rdps_pt_outdir_path(d, name);
	FILE *f;

	if (!p) {
		rdps_pt_fail(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	f = fopen(p, "w");
	if (!f)
		rdps_pt_fail(err, errlen, -errno, "%s: %s", p, strerror(errno));
	else
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	free(p);
	return f;
}

int rdps_pt_fclose(FILE *f, const char *path, char *err, size_t errlen)
{
	int bad = ferror(f), e = errno;

	if (fflush(f) || fsync(fileno(f)))
		bad = 1, e = errno;
	if (fclose(f))
		bad = 1, e = errno;
	if (bad)
		return rdps_pt_fail(err, errlen, e ? -e : -EIO, "%s: write failed: %s",
				    path, strerror(e ? e : EIO));
	return 0;
}

int rdps_pt_outdir_commit(struct rdps_pt_outdir *d, char *err, size_t errlen)
{
	char *old = NULL;
	int fd, ret = 0;

	fd = open(d->tmp, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	if (!rename(d->tmp, d->final))
		goto done;
	if ((errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR) || !d->force)
		return rdps_pt_fail(err, errlen, -errno, "%s: cannot rename into place: %s",
				    d->final, strerror(errno));
	/* Replace: move the old one aside first so final is never missing
	 * for longer than between two renames. */
	if (asprintf(&old, "%s.old-XXXXXX", d->final) < 0)
		return -ENOMEM;
	if (!mkdtemp(old) || rename(d->final, old)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: cannot move aside: %s",
				   d->final, strerror(errno));
		rmdir(old);
		free(old);
		return ret;
	}
	if (rename(d->tmp, d->final)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: cannot rename into place: %s",
				   d->final, strerror(errno));
		rename(old, d->final);
		free(old);
		return ret;
	}
	rdps_pt_rmtree(old);
	free(old);
done:
	free(d->tmp);
	d->tmp = NULL;
	return 0;
}

void rdps_pt_outdir_end(struct rdps_pt_outdir *d)
{
	if (d->tmp)
		rdps_pt_rmtree(d->tmp);
	free(d->tmp);
	free(d->final);
	memset(d, 0, sizeof(*d));
}

int rdps_pt_copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
	char buf[1 << 16];
	int in, out, ret = 0;
	ssize_t n;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", dst, strerror(errno));
		goto err_close_in;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		for (ssize_t w = 0; w < n;) {
			ssize_t m = write(out, buf + w, (size_t)(n - w));

			if (m < 0) {
				ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", dst,
						   strerror(errno));
				goto err_close_out;
			}
			w += m;
		}
	}
	if (n < 0)
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
	else if (fsync(out))
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", dst, strerror(errno));
err_close_out:
	close(out);
err_close_in:
	close(in);
	return ret;
}

int rdps_pt_write_dict(const struct rdps_pt_outdir *d, const char *name,
		       const struct rdps_pt_names *t, char *err, size_t errlen)
{
	char *path = rdps_pt_outdir_path(d, name);
	FILE *f;
	int ret;

	if (!path)
		return -ENOMEM;
	f = fopen(path, "w");
	if (!f) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		free(path);
		return ret;
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	for (uint32_t i = 0; i < t->n; i++)
		fprintf(f, "%u\t%s\n", i, rdps_pt_names_get(t, i));
	ret = rdps_pt_fclose(f, path, err, errlen);
	free(path);
	return ret;
}

/* ---------------------------------------------------------------------- */

/* A line for a message: at most cap-1 bytes, tabs shown as "\t" so a field
 * boundary is visible, the line end dropped. */
static void show_line(char *dst, size_t cap, const char *line, ssize_t len)
{
	size_t o = 0;

	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	for (ssize_t i = 0; i < len && o + 3 < cap; i++) {
		if (line[i] == '\t') {
			dst[o++] = '\\';
			dst[o++] = 't';
		} else {
			dst[o++] = (unsigned char)line[i] < ' ' ? '?' : line[i];
		}
	}
	dst[o] = '\0';
}

int rdps_pt_diff_lines(const char *a, const char *b, struct rdps_pt_linediff *d, char *err,
		       size_t errlen)
{
	char *la = NULL, *lb = NULL;
	size_t ca = 0, cb = 0;
	FILE *fa, *fb;
	int ret = 0;

	memset(d, 0, sizeof(*d));
	fa = fopen(a, "r");
	if (!fa)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", a, strerror(errno));
	fb = fopen(b, "r");
	if (!fb) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", b, strerror(errno));
		fclose(fa);
		return ret;
	}
	for (uint64_t line = 1;; line++) {
		ssize_t na = getline(&la, &ca, fa), nb = getline(&lb, &cb, fb);

		if (na < 0 && nb < 0)
			break;
		if (na >= 0 && nb >= 0 && na == nb && !memcmp(la, lb, (size_t)na))
			continue;
		d->line = line;
		d->ended = na < 0 ? 1 : nb < 0 ? 2 : 0;
		if (na >= 0)
			show_line(d->a, sizeof(d->a), la, na);
		if (nb >= 0)
			show_line(d->b, sizeof(d->b), lb, nb);
		break;
	}
	if (ferror(fa) || ferror(fb))
		ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", ferror(fa) ? a : b);
	free(la);
	free(lb);
	fclose(fa);
	fclose(fb);
	return ret;
}

int rdps_pt_text_info(const char *path, struct rdps_pt_textinfo *ti, char *err, size_t errlen)
{
	char buf[1 << 16];
	size_t n;
	FILE *f;
	int last = '\n';

	memset(ti, 0, sizeof(*ti));
	f = fopen(path, "rb");
	if (!f)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++)
			ti->lines++;
		ti->bytes += n;
		last = (unsigned char)buf[n - 1];
	}
	if (ferror(f)) {
		fclose(f);
		return rdps_pt_fail(err, errlen, -EIO, "%s: read error", path);
	}
	fclose(f);
	ti->ends_in_newline = last == '\n';
	if (!ti->ends_in_newline)
		ti->lines++; /* the cut last line */
	return 0;
}
