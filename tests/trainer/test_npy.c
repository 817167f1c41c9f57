/* SPDX-License-Identifier: MIT */
/*
 * .npy writer/reader: header bytes exactly as numpy 1.24 writes them
 * (checked against np.save output), round trips, atomic replacement.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdps/trainer.h"

/* numpy 1.24: magic, version 1.0, u16 header length, the dict, 21 - len(R)
 * growth spaces, padding spaces and '\n' up to a multiple of 64. For every
 * shape below numpy writes 128 header bytes. */
static void expect_header(uint64_t rows, uint64_t cols, const char *dict)
{
	char want[128], got[256];
	size_t dl = strlen(dict);
	int n = rdps_npy_header_f32(got, sizeof(got), rows, cols);

	memcpy(want, "\x93NUMPY\x01\x00\x76\x00", 10); /* 0x76 = 118 */
	memcpy(want + 10, dict, dl);
	memset(want + 10 + dl, ' ', 128 - 11 - dl);
	want[127] = '\n';
	cr_assert_eq(n, 128, "header length %d", n);
	cr_assert(memcmp(got, want, 128) == 0, "header of (%llu, %llu) differs",
		  (unsigned long long)rows, (unsigned long long)cols);
}

Test(npy, header_bytes_as_numpy)
{
	char small[64];

	expect_header(3, 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
	expect_header(40943, 512,
		      "{'descr': '<f4', 'fortran_order': False, 'shape': (40943, 512), }");
	expect_header(0, 7, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }");
	expect_header(12345678901ull, 2,
		      "{'descr': '<f4', 'fortran_order': False, 'shape': (12345678901, 2), }");
	cr_assert_eq(rdps_npy_header_f32(small, sizeof(small), 3, 4), -ENOSPC);
}

static char *tmpdir_path(const char *name)
{
	static char dir[64];
	char *p = malloc(128);

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/rdps-npy-XXXXXX");
		cr_assert_not_null(mkdtemp(dir));
	}
	snprintf(p, 128, "%s/%s", dir, name);
	return p;
}

Test(npy, round_trip)
{
	char *path = tmpdir_path("emb.npy");
	float data[5 * 3], *back = NULL;
	uint64_t r = 0, c = 0;
	struct stat st;

	for (int i = 0; i < 15; i++)
		data[i] = (float)i * 0.25f - 1.0f;
	cr_assert_eq(rdps_npy_write_f32(path, data, 5, 3), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 128 + 15 * 4);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), 0);
	cr_assert(r == 5 && c == 3);
	cr_assert(memcmp(back, data, sizeof(data)) == 0);
	free(back);

	/* replacing an existing file, and an empty array */
	cr_assert_eq(rdps_npy_write_f32(path, data, 0, 3), 0);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), 0);
	cr_assert(r == 0 && c == 3);
	free(back);
	/* no temporary left behind */
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	cr_assert_neq(access(tmp, F_OK), 0);
	unlink(path);
	free(path);
}

Test(npy, rejects_other_arrays)
{
	char *path = tmpdir_path("bad.npy");
	float *back = NULL;
	uint64_t r, c;
	FILE *f;
	char hdr[256];
	int n;

	/* float64 */
	n = rdps_npy_header_f32(hdr, sizeof(hdr), 1, 1);
	hdr[n] = '\0'; /* the dict starts after the binary prefix */
	memcpy(strstr(hdr + 10, "<f4"), "<f8", 3);
	f = fopen(path, "wb");
	fwrite(hdr, 1, (size_t)n, f);
	fwrite("\0\0\0\0\0\0\0\0", 1, 8, f);
	fclose(f);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), -EINVAL);
	/* truncated data */
	n = rdps_npy_header_f32(hdr, sizeof(hdr), 2, 2);
	f = fopen(path, "wb");
	fwrite(hdr, 1, (size_t)n, f);
	fwrite("\0\0\0\0", 1, 4, f);
	fclose(f);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), -EINVAL);
	/* not npy */
	f = fopen(path, "wb");
	fputs("hello world, not numpy", f);
	fclose(f);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), -EINVAL);
	cr_assert_null(back);
	unlink(path);
	cr_assert_eq(rdps_npy_read_f32(path, &back, &r, &c), -ENOENT);
	cr_assert_eq(rdps_npy_write_f32("/nonexistent-dir/x.npy", &(float){ 1 }, 1, 1),
		     -ENOENT);
	free(path);
}
