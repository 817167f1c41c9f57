// SPDX-License-Identifier: MIT
/* Blob writer and io_uring / pread loader. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
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

/* Open descriptors of this process (entries of /proc/self/fd, less the
 * directory stream's own). */
static int open_fds(void)
{
	return th_count_entries("/proc/self/fd") - 1;
}

/*
 * A disk that refuses the write (here a file size limit: EFBIG, as a full
 * disk gives ENOSPC): every failed checkpoint blob must give back its
 * descriptor and remove its temporary file, else a full disk stays full
 * (the unlinked file's blocks) until the process exits.
 */
Test(loader, failed_blob_writes_close_and_remove_their_files)
{
	struct rlimit lim, old;
	size_t n = (4u << 20) / 16; /* 4 MiB of 16-byte records: over the limit */
	char *big = calloc(n, 16), *p = th_path(dir, "ck.rows");
	uint64_t sum;
	int before, ret;

	cr_assert(big);
	signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead */
	cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = (struct rlimit){ 256 << 10, old.rlim_max }; /* the soft limit: undone below */
	before = open_fds();
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	for (int i = 0; i < 8; i++) {
		err[0] = '\0';
		ret = rdps_loader_write_blob(p, RDPS_BLOB_CKPT_ROWS, 16, 0, big, n, &sum, err,
					     sizeof(err));
		/* Control: the write really failed, and said why. */
		cr_assert_eq(ret, -EFBIG, "write %d: got %d (%s)", i, ret, err);
		cr_assert(strstr(err, "ck.rows: writing failed"), "%s", err);
	}
	cr_assert_eq(open_fds(), before, "%d descriptor(s) leaked by 8 failed writes",
		     open_fds() - before);
	cr_assert_eq(th_count_entries(dir), 0, "a partial or temporary file was left");
	/* A blob under the limit is still written. */
	cr_assert_eq(rdps_loader_write_blob(p, RDPS_BLOB_CKPT_ROWS, 16, 0, big, 1000, &sum, err,
					    sizeof(err)), 0, "%s", err);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	cr_assert_eq(open_fds(), before);
	cr_assert_eq(th_count_entries(dir), 1);
	free(p);
	free(big);
}

/* Fault injection for the streaming writer's commit: while set, fsync()
 * of this process fails with EIO, as on a disk that lost the write (this
 * definition takes the place of libc's for the whole test binary). */
static volatile int fsync_fails;

int fsync(int fd)
{
	if (fsync_fails) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_fsync, fd);
}

Test(loader, failed_commit_closes_and_removes_its_file)
{
	struct rdps_blob_writer *w;
	char *p = th_path(dir, "part.trp");
	uint32_t rec[3] = { 1, 2, 3 };
	int before = open_fds();

	for (int i = 0; i < 8; i++) {
		cr_assert_eq(rdps_loader_writer_create(p, RDPS_BLOB_TRIPLES, 12, 4, 0, 0, &w), 0);
		cr_assert_eq(rdps_loader_writer_append(w, rec, 1), 0);
		fsync_fails = 1;
		/* Control: the commit really failed. */
		cr_assert_eq(rdps_loader_writer_commit(w, NULL), -EIO);
		fsync_fails = 0;
		rdps_loader_writer_destroy(w);
	}
	cr_assert_eq(open_fds(), before, "%d descriptor(s) leaked by 8 failed commits",
		     open_fds() - before);
	cr_assert_eq(th_count_entries(dir), 0, "a partial or temporary file was left");
	free(p);
}
