/* SPDX-License-Identifier: MIT */
/* Small file helpers shared by the partition suites (header-only). */
#ifndef RDPS_TESTS_PARTITION_HELPERS_H
#define RDPS_TESTS_PARTITION_HELPERS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdps/common.h"

static inline char *th_mkdtemp(void)
{
	char *d = strdup("/tmp/rdps-part-test-XXXXXX");

	cr_assert(d && mkdtemp(d), "mkdtemp");
	return d;
}

static inline int th_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static inline void th_rmtree(char *dir)
{
	if (dir)
		nftw(dir, th_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static inline char *th_path(const char *dir, const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static inline void th_write(const char *dir, const char *name, const char *text)
{
	char *p = th_path(dir, name);
	FILE *f = fopen(p, "w");

	cr_assert(f, "open %s", p);
	fputs(text, f);
	fclose(f);
	free(p);
}

static inline int th_exists(const char *dir, const char *name)
{
	char *p = th_path(dir, name);
	struct stat st;
	int r = stat(p, &st) == 0;

	free(p);
	return r;
}

/* Entries in dir other than . and .. */
static inline int th_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert(d, "opendir %s", dir);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Flips one bit at byte offset off of dir/name. */
static inline void th_flip_bit(const char *dir, const char *name, long off)
{
	char *p = th_path(dir, name);
	FILE *f = fopen(p, "r+b");
	int c;

	cr_assert(f);
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0x10, f);
	fclose(f);
	free(p);
}

static inline void th_truncate(const char *dir, const char *name, long drop)
{
	char *p = th_path(dir, name);
	struct stat st;

	cr_assert(!stat(p, &st));
	cr_assert(!truncate(p, st.st_size - drop));
	free(p);
}

/* A small valid dataset: 6 entities, 2 relations. */
static inline void th_tiny_dataset(const char *dir)
{
	th_write(dir, "entities.dict", "0\ta\n1\tb\n2\tc\n3\td\n4\te\n5\tf\n");
	th_write(dir, "relations.dict", "0\tlikes\n1\tknows\n");
	th_write(dir, "train.txt",
		 "a\tlikes\tb\nb\tlikes\tc\nc\tknows\ta\nd\tknows\te\ne\tlikes\tf\n"
		 "f\tknows\td\na\tknows\td\n");
	th_write(dir, "valid.txt", "a\tlikes\tc\n");
	th_write(dir, "test.txt", "d\tlikes\tf\r\n\n");
}

static inline void th_quiet(void)
{
	rdps_log_threshold = RDPS_LOG_ERROR;
}

#endif
