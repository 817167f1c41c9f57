// SPDX-License-Identifier: MIT
// ctest-timeout: 120
/*
 * Validated one-sided reads when the NIC places a row's bytes in any order.
 *
 * A writer thread updates one row continuously (rdps_shard_apply, or
 * rdps_shard_import) such that every whole row has all elements equal: rows
 * start at zero, the gradient is -1 everywhere and SGD's lr is 1, so each
 * update adds 1 to every element. A reader thread plays the NIC: it copies
 * the row's 64-byte lines into a bounce buffer in a random order, pausing
 * between lines to widen the window, then checks the image as the verbs
 * client does (rdps_row_valid). No accepted image may be torn.
 *
 * Controls, so that a pass means something: the validated runs must also
 * reject images (the race happened); relaxed reads, which accept every image,
 * must see torn rows (the test can see a torn row); and the previous
 * seqlock rule, kept here with its writer only as the demonstrated-failing
 * control, accepts torn rows under the same shuffled placement.
 *
 * Each run is bounded (a count of reads it needs, and RUN_NS at most).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdps/kvstore.h"

#define LINE 64
#define MAX_LINES 64                  /* rows of up to 4 KiB */
#define RUN_NS 1500000000ull          /* bound of a run (which stops once it has its counts) */

enum writer_kind { WRITE_APPLY, WRITE_IMPORT, WRITE_OLD_SEQLOCK };
enum check_kind { CHECK_VALIDATED, CHECK_RELAXED, CHECK_OLD_SEQLOCK };

struct race {
	enum writer_kind writer;
	uint32_t dim;
	size_t stride;
	char *row;                    /* the row the writer updates and the reader reads */
	uint64_t tag;                 /* its checksum's tag (row 0 of the shard) */
	struct rdps_shard *shard;     /* WRITE_APPLY, WRITE_IMPORT */
	float *import_rows;           /* WRITE_IMPORT: dim floats */
	int stop;                     /* atomic: the reader is done */
	uint64_t writes;              /* updates the writer made */
	int write_err;                /* first error of rdps_shard_apply */
};

struct tally {
	uint64_t reads;               /* images copied */
	uint64_t rejected;            /* images the check refused (re-read) */
	uint64_t accepted;
	uint64_t torn_accepted;       /* accepted images whose elements differ */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* A short random pause; now and then a yield, so that the other thread runs
 * in between even when both share one core. */
static void pause_a_little(uint64_t *rng)
{
	uint64_t r = rng_next(rng);

	if (r % 8 == 0) {
		sched_yield();
		return;
	}
	for (unsigned i = 0, n = (unsigned)(r >> 32) % 64; i < n; i++)
		__asm__ __volatile__("" ::: "memory");
}

/* The NIC: copies the row line by line in a random permutation. */
static void nic_read(char *dst, const char *src, size_t stride, uint64_t *rng)
{
	unsigned nl = (unsigned)(stride / LINE), perm[MAX_LINES];

	for (unsigned i = 0; i < nl; i++)
		perm[i] = i;
	for (unsigned i = nl - 1; i > 0; i--) {
		unsigned j = (unsigned)(rng_next(rng) % (i + 1)), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (unsigned i = 0; i < nl; i++) {
		memcpy(dst + (size_t)perm[i] * LINE, src + (size_t)perm[i] * LINE, LINE);
		pause_a_little(rng);
	}
}

static bool torn(const char *img, uint32_t dim)
{
	const float *d = (const float *)(img + RDPS_ROW_DATA_OFFSET);

	for (uint32_t j = 1; j < dim; j++)
		if (d[j] != d[0])
			return true;
	return false;
}

/* The previous layout and protocol (a seqlock: ver_begin at offset 0,
 * ver_end after the data), kept only as the control that shows its rule
 * accepting torn rows when lines arrive out of order. */
static size_t old_ver_end_offset(uint32_t dim)
{
	return (RDPS_ROW_DATA_OFFSET + (size_t)dim * 4 + 7) & ~(size_t)7;
}

static size_t old_stride(uint32_t dim)
{
	return (old_ver_end_offset(dim) + 8 + 63) & ~(size_t)63;
}

static void old_seqlock_write(char *row, uint32_t dim)
{
	uint64_t *ver_begin = (uint64_t *)row;
	uint64_t *ver_end = (uint64_t *)(row + old_ver_end_offset(dim));
	float *w = (float *)(row + RDPS_ROW_DATA_OFFSET);
	uint64_t v = __atomic_load_n(ver_begin, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(ver_end, v, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (uint32_t j = 0; j < dim; j++)
		w[j] += 1.0f;
	__atomic_store_n(ver_begin, v, __ATOMIC_RELEASE);
}

static bool old_seqlock_whole(const char *img, uint32_t dim)
{
	uint64_t b, e;

	memcpy(&b, img, 8);
	memcpy(&e, img + old_ver_end_offset(dim), 8);
	return b == e;
}

static void *writer_main(void *arg)
{
	struct race *r = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull, id = 0;
	float g[MAX_LINES * LINE / 4];

	for (uint32_t j = 0; j < r->dim; j++)
		g[j] = -1.0f;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		switch (r->writer) {
		case WRITE_APPLY:
			/* Asserted by the reader's thread, after the join. */
			r->write_err = rdps_shard_apply(r->shard, &id, g, 1);
			if (r->write_err)
				return NULL;
			break;
		case WRITE_IMPORT:
			for (uint32_t j = 0; j < r->dim; j++)
				r->import_rows[j] = (float)(r->writes + 1);
			rdps_shard_import(r->shard, r->import_rows, NULL);
			break;
		case WRITE_OLD_SEQLOCK:
			old_seqlock_write(r->row, r->dim);
			break;
		}
		r->writes++;
		pause_a_little(&rng);
	}
	return NULL;
}

static void race_init(struct race *r, enum writer_kind writer, uint32_t dim)
{
	memset(r, 0, sizeof(*r));
	r->writer = writer;
	r->dim = dim;
	if (writer == WRITE_OLD_SEQLOCK) {
		r->stride = old_stride(dim);
		r->row = aligned_alloc(LINE, r->stride);
		cr_assert(r->row);
		memset(r->row, 0, r->stride);
	} else {
		struct rdps_shard_params p = {
			.name = "entity", .dim = dim, .num_rows = 1, .lo = 0, .hi = 1,
			.init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD, .lr = 1.0f,
		};
		struct rdps_shard_info info;

		cr_assert_eq(rdps_shard_create(&p, &r->shard), 0);
		rdps_shard_info(r->shard, &info);
		r->stride = info.stride;
		r->row = info.base;
		r->tag = rdps_row_tag(rdps_row_table_key(info.table_id, info.name), 0);
		r->import_rows = calloc(dim, sizeof(float));
		cr_assert(r->import_rows);
	}
	cr_assert_leq(r->stride / LINE, MAX_LINES);
}

static void race_fini(struct race *r)
{
	if (r->shard)
		rdps_shard_destroy(r->shard);
	else
		free(r->row);
	free(r->import_rows);
}

/* Reads the row as the NIC would until the tally has what done_enough wants
 * (or RUN_NS passed), with the writer running all along. */
static void race_run(struct race *r, enum check_kind check,
		     bool (*done_enough)(const struct tally *), struct tally *t)
{
	char *img = aligned_alloc(LINE, r->stride);
	uint64_t rng = 0xd1b54a32d192ed03ull, deadline = now_ns() + RUN_NS;
	pthread_t th;

	cr_assert(img);
	memset(t, 0, sizeof(*t));
	cr_assert_eq(pthread_create(&th, NULL, writer_main, r), 0);
	while (!done_enough(t) && now_ns() < deadline) {
		bool ok;

		nic_read(img, r->row, r->stride, &rng);
		t->reads++;
		ok = check == CHECK_VALIDATED ? rdps_row_valid(img, r->dim, r->tag) :
		     check == CHECK_OLD_SEQLOCK ? old_seqlock_whole(img, r->dim) : true;
		if (!ok) {
			t->rejected++; /* the verbs client reads it again */
			continue;
		}
		t->accepted++;
		t->torn_accepted += torn(img, r->dim);
	}
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	free(img);
	cr_assert_eq(r->write_err, 0);
	cr_assert_gt(r->writes, 0);
	cr_log_info("reads %llu, rejected %llu, accepted %llu, torn accepted %llu, writes %llu",
		    (unsigned long long)t->reads, (unsigned long long)t->rejected,
		    (unsigned long long)t->accepted, (unsigned long long)t->torn_accepted,
		    (unsigned long long)r->writes);
}

/* Validated: many accepted images, and enough rejections to know the race
 * was on. A torn acceptance ends the run at once (it has failed). */
static bool validated_enough(const struct tally *t)
{
	return t->torn_accepted || (t->accepted >= 20000 && t->rejected >= 200);
}

/* Controls: enough torn acceptances that it is no accident. */
static bool torn_enough(const struct tally *t)
{
	return t->torn_accepted >= 20 && t->reads >= 2000;
}

static void check_validated(enum writer_kind writer, uint32_t dim)
{
	struct race r;
	struct tally t;

	race_init(&r, writer, dim);
	race_run(&r, CHECK_VALIDATED, validated_enough, &t);
	race_fini(&r);
	cr_assert_eq(t.torn_accepted, 0, "%llu torn rows accepted in %llu validated reads",
		     (unsigned long long)t.torn_accepted, (unsigned long long)t.accepted);
	cr_assert_geq(t.accepted, 5000, "only %llu rows accepted", (unsigned long long)t.accepted);
	/* The control: without rejections the race never happened. */
	cr_assert_gt(t.rejected, 0, "no torn image in %llu reads: the race did not happen",
		     (unsigned long long)t.reads);
}

Test(rowcheck, validated_reads_accept_no_torn_row_dim100)
{
	check_validated(WRITE_APPLY, 100); /* 7 lines */
}

Test(rowcheck, validated_reads_accept_no_torn_row_dim16)
{
	/* 2 lines, the checksum in the first. (The old layout had a version
	 * in each of its 2 lines here, so its seqlock held at this size.) */
	check_validated(WRITE_APPLY, 16);
}

Test(rowcheck, validated_reads_accept_no_torn_row_while_importing)
{
	check_validated(WRITE_IMPORT, 100);
}

Test(rowcheck, control_relaxed_reads_see_torn_rows)
{
	struct race r;
	struct tally t;

	race_init(&r, WRITE_APPLY, 100);
	race_run(&r, CHECK_RELAXED, torn_enough, &t);
	race_fini(&r);
	cr_assert_gt(t.torn_accepted, 0, "no torn row in %llu relaxed reads: the test cannot fail",
		     (unsigned long long)t.reads);
}

Test(rowcheck, control_old_seqlock_accepts_torn_rows_placed_out_of_order)
{
	struct race r;
	struct tally t;

	race_init(&r, WRITE_OLD_SEQLOCK, 100);
	race_run(&r, CHECK_OLD_SEQLOCK, torn_enough, &t);
	race_fini(&r);
	cr_assert_gt(t.torn_accepted, 0, "the seqlock accepted no torn row in %llu reads",
		     (unsigned long long)t.reads);
}

/*
 * The checksum is built twice (common/rowcheck.c for any x86-64, with
 * XXH3's AVX2 kernel in rowcheck_avx2.c) and picked per CPU, so a server
 * and a client on different CPUs must agree: both builds give the hash of
 * the system's libxxhash (the one rdps linked before), for every row width
 * up to 1000 floats and every offset of the data within a cache line.
 */
#include <xxhash.h> /* the shared library's XXH3, not the inlined copies */

#include "common/rowcheck.h"

Test(rowcheck, every_build_of_the_checksum_is_xxh3)
{
	static float buf[1000 + 16];
	uint64_t x = 0x12345;
	bool avx2;

	__builtin_cpu_init();
	avx2 = __builtin_cpu_supports("avx2");
	for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		buf[i] = (float)(int32_t)(x >> 32) / 65536.0f;
	}
	for (uint32_t dim = 1; dim <= 1000; dim++) {
		const float *d = buf + dim % 16;
		uint64_t v = dim * 7919ull, tag = rdps_row_tag(0x1234567890abcdefull, dim * 31ull);
		uint64_t want = XXH3_64bits(d, (size_t)dim * 4) ^ (v * RDPS_ROW_VERSION_MIX) ^
				rdps_row_tag_mix(tag);

		cr_assert_eq(rdps_row_checksum_generic(tag, v, d, dim), want, "generic build, dim %u",
			     dim);
		if (avx2)
			cr_assert_eq(rdps_row_checksum_avx2(tag, v, d, dim), want, "AVX2 build, dim %u",
				     dim);
		cr_assert_eq(rdps_row_checksum(tag, v, d, dim), want, "the build picked, dim %u", dim);
	}
	cr_log_info("checked dims 1..1000 (%s)", avx2 ? "generic and AVX2 builds" : "generic build");
}
