/* SPDX-License-Identifier: MIT */
/* Internal helpers of the partition module (not installed). */
#ifndef RDPS_PARTITION_INTERNAL_H
#define RDPS_PARTITION_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "binary formats are little-endian and read in place");

/* Writes a message into err[errlen] (if err) and returns ret. */
int rdps_pt_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The header checksum of a blob (loader.c; blob_writer.c writes it). */
struct rdps_blob_header;
uint64_t rdps_blob_header_hash(const struct rdps_blob_header *h);

/* ---- name index: arena of NUL-terminated names, id = insertion order ---- */
struct rdps_pt_names {
	char *arena;       /* names, each NUL-terminated */
	size_t arena_len;
	size_t arena_cap;
	uint64_t *off;     /* off[id]: offset of name id in arena */
	uint32_t n;        /* names */
	uint32_t cap;      /* capacity of off */
	uint64_t *slots;   /* (hash32 << 32) | (id + 1), 0 = empty */
	uint64_t mask;     /* slots - 1 (power of two) */
};

int rdps_pt_names_init(struct rdps_pt_names *t, uint32_t expect);
void rdps_pt_names_free(struct rdps_pt_names *t);
/* Adds name[0..len) if absent: 1 (new, *id set), 0 (existed, *id set),
 * -ENOMEM, -EOVERFLOW (more than 2^32-2 names). */
int rdps_pt_names_add(struct rdps_pt_names *t, const char *name, size_t len,
		      uint32_t *id);
/* 0 and *id, or -ENOENT. */
int rdps_pt_names_find(const struct rdps_pt_names *t, const char *name,
		       size_t len, uint32_t *id);

static inline const char *rdps_pt_names_get(const struct rdps_pt_names *t,
					    uint32_t id)
{
	return id < t->n ? t->arena + t->off[id] : NULL;
}

/* ---- line reader ---- */
struct rdps_pt_lines {
	FILE *f;
	const char *path;
	char *line;
	size_t cap;
	uint64_t lineno;
};

/* Opens path for reading: 0 or -errno with err "PATH: reason". */
int rdps_pt_lines_open(struct rdps_pt_lines *lr, const char *path, char *err,
		       size_t errlen);
/* Next non-blank line with "\n"/"\r\n" removed: length (>= 0), -1 at end,
 * -EIO on read error. */
long rdps_pt_lines_next(struct rdps_pt_lines *lr);
void rdps_pt_lines_close(struct rdps_pt_lines *lr);

/* Splits line into exactly n tab-separated non-empty fields (in place).
 * Returns 0, or -EINVAL with err "PATH:LINE: ..." naming what is wrong;
 * names[] labels the fields for the message. */
int rdps_pt_split_fields(const struct rdps_pt_lines *lr, char *line, long len,
			 int n, char **field, size_t *flen,
			 const char *const *names, char *err, size_t errlen);

/* ---- output directory written atomically ---- */
struct rdps_pt_outdir {
	char *final;  /* requested path */
	char *tmp;    /* sibling "final.tmp-XXXXXX" */
	int force;
};

/* Fails with -EEXIST if final exists and !force; creates the temp dir
 * (and final's missing parent directories, as mkdir -p). */
int rdps_pt_outdir_begin(struct rdps_pt_outdir *d, const char *final, int force,
			 char *err, size_t errlen);
/* Path of name inside the temp dir (malloc'd) or NULL. */
char *rdps_pt_outdir_path(const struct rdps_pt_outdir *d, const char *name);
/* fopen(name, "w") inside the temp dir with a 1 MiB buffer. */
FILE *rdps_pt_outdir_fopen(const struct rdps_pt_outdir *d, const char *name,
			   char *err, size_t errlen);
/* fsyncs the temp dir and renames it to final (replacing it if force). */
int rdps_pt_outdir_commit(struct rdps_pt_outdir *d, char *err, size_t errlen);
/* Removes the temp dir if not committed and frees; accepts a zeroed d. */
void rdps_pt_outdir_end(struct rdps_pt_outdir *d);

/* Closes f, reporting write errors: 0 or -errno (err names path). */
int rdps_pt_fclose(FILE *f, const char *path, char *err, size_t errlen);
/* rm -rf path (ignores ENOENT). */
int rdps_pt_rmtree(const char *path);
/* Copies src to dst: 0 or -errno. */
int rdps_pt_copy_file(const char *src, const char *dst, char *err, size_t errlen);
/* malloc'd "a/b". */
char *rdps_pt_join(const char *a, const char *b);

/* Where two text files first differ, line by line (blank lines count). */
struct rdps_pt_linediff {
	uint64_t line;  /* first differing line, 1-based; 0: the files are the same */
	int ended;      /* 1: a has no such line (it is shorter), 2: b has none, 0: both do */
	char a[80];     /* that line of a, cut, tabs shown as "\\t" ("" if none) */
	char b[80];     /* that line of b */
};

/* Compares text files a and b: 0 with d filled (d->line 0 if the same), or
 * -errno with err naming the file that cannot be read. */
int rdps_pt_diff_lines(const char *a, const char *b, struct rdps_pt_linediff *d, char *err,
		       size_t errlen);

/* Shape of a text file. */
struct rdps_pt_textinfo {
	uint64_t bytes;
	uint64_t lines;         /* a last line without "\n" counts */
	bool ends_in_newline;   /* false: the last line was cut (or the file is empty: true) */
};

/* Reads path once: 0 with ti filled, or -errno with err naming it. */
int rdps_pt_text_info(const char *path, struct rdps_pt_textinfo *ti, char *err, size_t errlen);

/* Writes a dict file ("id\tname" for ids 0..n-1). */
int rdps_pt_write_dict(const struct rdps_pt_outdir *d, const char *name,
		       const struct rdps_pt_names *t, char *err, size_t errlen);

/* ---- WN18's entities (wn18_synsets.c, generated by gen_wn18_synsets.py) ---- */
/* Synsets per data file (noun, verb, adj, adv) of the WordNet 3.0 the bits index. */
extern const uint32_t rdps_wn18_synsets_per_file[4];
extern const uint32_t rdps_wn18_num_entities;
/* Bit i set: the i-th synset, counting through the four files in order, is in WN18. */
extern const uint64_t rdps_wn18_synset_bits[];

/* ---- deterministic random numbers ---- */
static inline uint64_t rdps_pt_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Stateless hash of (a, b) to 64 bits. */
static inline uint64_t rdps_pt_mix(uint64_t a, uint64_t b)
{
	uint64_t s = a * 0xd1342543de82ef95ull + b;

	return rdps_pt_splitmix(&s);
}

/* Uniform in [0, n) (n > 0), Lemire's multiply-shift (bias < n / 2^64). */
static inline uint64_t rdps_pt_below(uint64_t r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)r * n) >> 64);
}

/* Fast decimal formatting: writes v at p, returns the end. */
static inline char *rdps_pt_utoa(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

#endif
