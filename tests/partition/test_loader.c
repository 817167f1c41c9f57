// SPDX-License-Identifier: MIT
/* Blob writer and io_uring / pread loader. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "helpers.h"
#include "rdps/partition.h"

static char *dir;
static char err[512];

static void setup(void)
{
	th_quiet();
	if (!dir) /* parameterized tests may run init twice */
		dir = th_mkdtemp();
	err[0] = '\0';
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

/* Writes n records of 12 bytes (i, i*3, ~i) to dir/name; returns checksum. */
static uint64_t write_blob(const char *name, uint64_t n, size_t bufsz)
{
	struct rdps_blob_writer *w;
	char *p = th_path(dir, name);
	uint64_t sum = 0;

	cr_assert_eq(rdps_loader_writer_create(p, RDPS_BLOB_TRIPLES, 12, 4, 3, bufsz, &w), 0);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t rec[3] = { (uint32_t)i, (uint32_t)(i * 3), (uint32_t)~i };

		cr_assert_eq(rdps_loader_writer_append(w, rec, 1), 0);
	}
	cr_assert_eq(rdps_loader_writer_count(w), n);
	cr_assert_not(th_exists(dir, name), "final name must appear only on commit");
	cr_assert_eq(rdps_loader_writer_commit(w, &sum), 0);
	rdps_loader_writer_destroy(w);
	free(p);
	return sum;
}

struct lcase {
	size_t chunk;
	unsigned qd;
	int force_pread;
	uint64_t n;
};

static struct lcase cases[] = {
	{ 0, 0, 0, 1000000 },          /* defaults: 2 MiB chunks, qd 16 */
	{ 4096, 4, 0, 300001 },        /* many small chunks, short queue */
	{ 4096, 32, 0, 1 },            /* one record, one partial chunk */
	{ 65536, 8, 1, 300001 },       /* pread fallback path */
	{ 0, 0, 0, 0 },                /* empty payload */
};

ParameterizedTestParameters(loader, round_trip)
{
	return cr_make_param_array(struct lcase, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct lcase *c, loader, round_trip)
{
	struct rdps_loader_opts o = { .chunk_bytes = c->chunk, .queue_depth = c->qd,
				      .force_pread = c->force_pread };
	struct rdps_blob b;
	uint64_t sum = write_blob("x.trp", c->n, 4096 * 3);
	char *p = th_path(dir, "x.trp");
	const uint32_t *r;

	cr_assert_eq(rdps_loader_load(p, RDPS_BLOB_TRIPLES, &o, &b, err, sizeof(err)), 0, "%s", err);
	free(p);
	cr_assert_eq(b.hdr.count, c->n);
	cr_assert_eq(b.hdr.part, 3);
	cr_assert_eq(b.hdr.payload_xxh3, sum);
	cr_assert_eq(XXH3_64bits(b.data, b.hdr.payload_bytes), sum);
	cr_assert_eq(((uintptr_t)b.data) % 4096, 0);
	if (c->force_pread)
		cr_assert_eq(b.used_uring, 0);
	r = b.data;
	for (uint64_t i = 0; i < c->n; i++)
		cr_assert(r[3 * i] == (uint32_t)i && r[3 * i + 1] == (uint32_t)(i * 3) &&
			  r[3 * i + 2] == (uint32_t)~i, "record %llu", (unsigned long long)i);
	rdps_loader_blob_free(&b);
	rdps_loader_blob_free(&b);
	rdps_loader_blob_free(NULL);
}

TestSuite(loader, .init = setup, .fini = teardown);

Test(loader, uring_and_pread_agree)
{
	struct rdps_loader_opts up = { .chunk_bytes = 8192, .queue_depth = 8 };
	struct rdps_loader_opts pr = { .force_pread = 1 };
	char *p;
	void *a, *b;
	size_t la, lb;
	uint64_t ha, hb;

	write_blob("y.trp", 100000, 0);
	p = th_path(dir, "y.trp");
	cr_assert_eq(rdps_loader_read_file(p, &up, &a, &la, &ha, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_loader_read_file(p, &pr, &b, &lb, &hb, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(la, 64 + 100000 * 12);
	cr_assert_eq(la, lb);
	cr_assert_eq(ha, hb);
	cr_assert_eq(ha, XXH3_64bits(a, la));
	cr_assert_eq(memcmp(a, b, la), 0);
	free(a);
	free(b);
	free(p);
}

static int load(const char *name, uint32_t kind)
{
	struct rdps_blob b;
	char *p = th_path(dir, name);
	int ret = rdps_loader_load(p, kind, NULL, &b, err, sizeof(err));

	cr_assert(ret || b.data);
	cr_assert(!ret || !b.data);
	rdps_loader_blob_free(&b);
	free(p);
	return ret;
}

Test(loader, truncated_file)
{
	write_blob("t.trp", 5000, 0);
	th_truncate(dir, "t.trp", 7);
	cr_assert_eq(load("t.trp", RDPS_BLOB_TRIPLES), -EINVAL);
	cr_assert(strstr(err, "t.trp: truncated: 60057 bytes, header says 60064"), "%s", err);
	th_truncate(dir, "t.trp", 60057 - 10);
	cr_assert_eq(load("t.trp", RDPS_BLOB_TRIPLES), -EINVAL);
	cr_assert(strstr(err, "shorter than the 64-byte header"), "%s", err);
}

Test(loader, bit_flip_in_payload)
{
	write_blob("f.trp", 5000, 0);
	th_flip_bit(dir, "f.trp", 64 + 12 * 2500 + 5);
	cr_assert_eq(load("f.trp", RDPS_BLOB_TRIPLES), -EBADMSG);
	cr_assert(strstr(err, "f.trp: field payload_xxh3: checksum mismatch"), "%s", err);
	/* Same through the pread path. */
	{
		struct rdps_loader_opts o = { .force_pread = 1 };
		struct rdps_blob b;
		char *p = th_path(dir, "f.trp");

		cr_assert_eq(rdps_loader_load(p, RDPS_BLOB_TRIPLES, &o, &b, err, sizeof(err)), -EBADMSG);
		free(p);
	}
}

Test(loader, bit_flip_in_header)
{
	write_blob("h.trp", 50, 0);
	th_flip_bit(dir, "h.trp", 16); /* count */
	cr_assert_eq(load("h.trp", RDPS_BLOB_TRIPLES), -EBADMSG);
	cr_assert(strstr(err, "h.trp: field header_xxh3"), "%s", err);
	write_blob("m.trp", 50, 0);
	th_flip_bit(dir, "m.trp", 0); /* magic */
	cr_assert_eq(load("m.trp", RDPS_BLOB_TRIPLES), -EINVAL);
	cr_assert(strstr(err, "m.trp: field magic"), "%s", err);
}

Test(loader, wrong_kind_and_trailing_data)
{
	FILE *f;
	char *p;

	write_blob("k.trp", 10, 0);
	cr_assert_eq(load("k.trp", RDPS_BLOB_IDMAP), -EINVAL);
	cr_assert(strstr(err, "k.trp: field kind: 1, expected 2"), "%s", err);
	cr_assert_eq(load("k.trp", 0), 0, "%s", err);
	p = th_path(dir, "k.trp");
	f = fopen(p, "ab");
	fputs("junk", f);
	fclose(f);
	free(p);
	cr_assert_eq(load("k.trp", RDPS_BLOB_TRIPLES), -EINVAL);
	cr_assert(strstr(err, "trailing data"), "%s", err);
}

Test(loader, missing_file_and_abort)
{
	struct rdps_blob_writer *w;
	char *p = th_path(dir, "gone.trp");
	uint32_t rec[3] = { 1, 2, 3 };

	cr_assert_eq(load("nope.trp", 0), -ENOENT);
	cr_assert(strstr(err, "nope.trp: No such file"), "%s", err);
	/* A writer destroyed without commit leaves nothing behind. */
	cr_assert_eq(rdps_loader_writer_create(p, RDPS_BLOB_TRIPLES, 12, 4, RDPS_BLOB_NO_PART, 0, &w), 0);
	cr_assert_eq(rdps_loader_writer_append(w, rec, 1), 0);
	rdps_loader_writer_destroy(w);
	rdps_loader_writer_destroy(NULL);
	cr_assert_eq(th_count_entries(dir), 0);
	free(p);
}
