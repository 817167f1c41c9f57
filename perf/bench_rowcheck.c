// SPDX-License-Identifier: MIT
/*
 * rdps bench rowcheck: what validating a one-sided read of a row costs the
 * reader and the writer, per validation scheme and row width.
 *
 * Schemes (a row layout and its write and read rules):
 *   relaxed   no validation: the writer updates, the reader copies (the floor)
 *   seqlock   the previous layout: ver_begin at 0, ver_end after the data; the
 *             writer stores ver_end, fences, updates, stores ver_begin; the
 *             reader compares the two (sound only if a READ places the row in
 *             address order)
 *   checksum  the layout of rdps/kvstore.h: the writer bumps the version,
 *             updates, stores rdps_row_checksum; the reader calls
 *             rdps_row_valid (sound in any placement order)
 *   farm      FaRM's per-cache-line versions: each 64-byte line holds a u32
 *             version and 15 floats; the writer stores each line's version
 *             with its data, the reader compares every line's version and
 *             gathers the pieces (sound if the NIC reads each line atomically
 *             and the CPU's stores to a line reach it together)
 *
 * Reader cost: per row of a batch of row images in a bounce buffer (as the
 * verbs client has them when its READs complete), the check and the copy of
 * the data to a dense output. Writer cost: per row update (SGD, row-wise
 * Adagrad) with the scheme's stores, written as update_row in kvstore/shard.c
 * (the seqlock and farm writers exist only here). Every figure is the median
 * of --rounds rounds; in a round each measurement runs for --slice-us, in an
 * order rotated per round, so drift of the machine hits all alike.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf/bench.h"

#define MAX_DIMS 8
#define MAX_ROUNDS 101
#define FARM_FLOATS 15 /* per 64-byte line, after its u32 version */
#define BENCH_TABLE_KEY 0x0123456789abcdefull /* rows' tags: row i of any one table */

enum scheme { S_RELAXED, S_SEQLOCK, S_CHECKSUM, S_FARM, S_COUNT };
static const char *const scheme_names[S_COUNT] = { "relaxed", "seqlock", "checksum", "farm" };

/* What one measurement does: read rows, or update them with an optimizer. */
enum side { SIDE_READ, SIDE_SGD, SIDE_ADAGRAD_ROW, SIDE_COUNT };
static const char *const side_names[SIDE_COUNT] = { "read", "write", "write" };
static const int side_opt[SIDE_COUNT] = { -1, RDPS_OPT_SGD, RDPS_OPT_ADAGRAD_ROW };

struct rowcheck_opts {
	uint64_t dims[MAX_DIMS];
	int ndims;
	uint64_t rows, rounds, slice_us;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench rowcheck [options]\n"
"\n"
"Cost of validating one-sided row reads, per scheme: relaxed (none), seqlock\n"
"(the previous layout), checksum (XXH3 of version and data, the current\n"
"layout) and farm (a version in every cache line). Reader: check + copy of\n"
"each row of a batch of row images, as the verbs client does from its bounce\n"
"buffer. Writer: one SGD or row-wise Adagrad update of a row with the\n"
"scheme's stores. Single thread, no transport.\n"
"Output: JSON lines (bench \"rowcheck\") on stdout, a table on stderr.\n"
"\n"
"  --dims LIST          floats per row (default 16,100,400,1000)\n"
"  --rows N             rows per batch (default 256)\n"
"  --rounds N           rounds; figures are their medians (default 15)\n"
"  --slice-us N         time of one measurement in a round (default 2000)\n"
"  -h, --help           this text\n");
}

/* ---------------------------------------------------------------------- */
/* Layouts                                                                 */

static size_t seqlock_end(uint32_t dim)
{
	return (RDPS_ROW_DATA_OFFSET + (size_t)dim * 4 + 7) & ~(size_t)7;
}

static size_t scheme_stride(enum scheme s, uint32_t dim)
{
	switch (s) {
	case S_SEQLOCK:
		return (seqlock_end(dim) + 8 + 63) & ~(size_t)63;
	case S_FARM:
		return (size_t)((dim + FARM_FLOATS - 1) / FARM_FLOATS) * 64;
	default: /* relaxed reads the current layout and ignores its checksum */
		return rdps_row_stride(dim);
	}
}

/* ---------------------------------------------------------------------- */
/* Readers: check and copy n row images; return how many failed the check. */

static __attribute__((noinline)) uint32_t read_relaxed(const char *b, size_t stride,
							uint32_t n, uint32_t dim, float *out)
{
	for (uint32_t i = 0; i < n; i++)
		memcpy(out + (size_t)i * dim, b + i * stride + RDPS_ROW_DATA_OFFSET,
		       (size_t)dim * 4);
	return 0;
}

static __attribute__((noinline)) uint32_t read_seqlock(const char *b, size_t stride,
							uint32_t n, uint32_t dim, float *out)
{
	size_t end = seqlock_end(dim);
	uint32_t bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		const char *row = b + i * stride;
		uint64_t vb, ve;

		memcpy(&vb, row, 8);
		memcpy(&ve, row + end, 8);
		bad += vb != ve;
		memcpy(out + (size_t)i * dim, row + RDPS_ROW_DATA_OFFSET, (size_t)dim * 4);
	}
	return bad;
}

static __attribute__((noinline)) uint32_t read_checksum(const char *b, size_t stride,
							 uint32_t n, uint32_t dim, float *out)
{
	uint32_t bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		const char *row = b + i * stride;

		bad += !rdps_row_valid(row, dim, rdps_row_tag(BENCH_TABLE_KEY, i));
		memcpy(out + (size_t)i * dim, row + RDPS_ROW_DATA_OFFSET, (size_t)dim * 4);
	}
	return bad;
}

static __attribute__((noinline)) uint32_t read_farm(const char *b, size_t stride,
						     uint32_t n, uint32_t dim, float *out)
{
	uint32_t bad = 0, full = dim / FARM_FLOATS, tail = dim % FARM_FLOATS;

	for (uint32_t i = 0; i < n; i++) {
		const char *row = b + i * stride;
		float *o = out + (size_t)i * dim;
		uint32_t v0, v, l;

		memcpy(&v0, row, 4);
		for (l = 0; l < full; l++) {
			memcpy(&v, row + l * 64, 4);
			bad += v != v0;
			memcpy(o + l * FARM_FLOATS, row + l * 64 + 4, FARM_FLOATS * 4);
		}
		if (tail) {
			memcpy(&v, row + l * 64, 4);
			bad += v != v0;
			memcpy(o + l * FARM_FLOATS, row + l * 64 + 4, (size_t)tail * 4);
		}
	}
	return bad;
}

static uint32_t read_rows(enum scheme s, const char *b, size_t stride, uint32_t n,
			  uint32_t dim, float *out)
{
	switch (s) {
	case S_RELAXED: return read_relaxed(b, stride, n, dim, out);
	case S_SEQLOCK: return read_seqlock(b, stride, n, dim, out);
	case S_CHECKSUM: return read_checksum(b, stride, n, dim, out);
	default: return read_farm(b, stride, n, dim, out);
	}
}

/* ---------------------------------------------------------------------- */
/* Writers: one update of each of n rows, as update_row in kvstore/shard.c. */

struct wparams {
	int opt;        /* RDPS_OPT_SGD or RDPS_OPT_ADAGRAD_ROW */
	float lr, eps;
	float *state;   /* row-wise Adagrad: n floats */
};

/* Row-wise Adagrad's divisor for this row (after updating its state). */
static inline float adagrad_row_stdv(const struct wparams *p, uint32_t i, const float *g,
				     uint32_t dim)
{
	float sq = 0.0f;

	for (uint32_t j = 0; j < dim; j++)
		sq += g[j] * g[j];
	p->state[i] += sq / (float)dim;
	return sqrtf(p->state[i]) + p->eps;
}

static inline void update_piece(float *restrict w, const float *restrict g, uint32_t len,
				int opt, float lr, float stdv)
{
	if (opt == RDPS_OPT_SGD) {
		for (uint32_t j = 0; j < len; j++)
			w[j] -= lr * g[j];
	} else {
		for (uint32_t j = 0; j < len; j++)
			w[j] -= lr * g[j] / stdv;
	}
}

/* One body for the schemes that keep the data contiguous at offset 16,
 * specialised by constant s (as update_row by optimizer). */
static inline void write_contiguous(enum scheme s, char *b, size_t stride, uint32_t n,
				    uint32_t dim, const float *grads, const struct wparams *p)
{
	for (uint32_t i = 0; i < n; i++) {
		char *row = b + i * stride;
		float *restrict w = (float *)(row + RDPS_ROW_DATA_OFFSET);
		const float *g = grads + (size_t)i * dim;
		uint64_t *ver = (uint64_t *)row, v = *ver + 1;
		float stdv = p->opt == RDPS_OPT_SGD ? 1.0f : adagrad_row_stdv(p, i, g, dim);

		if (s == S_SEQLOCK) {
			__atomic_store_n((uint64_t *)(row + seqlock_end(dim)), v, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_RELEASE);
		} else if (s == S_CHECKSUM) {
			__atomic_store_n(ver, v, __ATOMIC_RELAXED);
		}
		update_piece(w, g, dim, p->opt, p->lr, stdv);
		if (s == S_SEQLOCK)
			__atomic_store_n(ver, v, __ATOMIC_RELEASE);
		else if (s == S_CHECKSUM)
			__atomic_store_n((uint64_t *)(row + RDPS_ROW_CHECK_OFFSET),
					 rdps_row_checksum(rdps_row_tag(BENCH_TABLE_KEY, i), v, w, dim),
					 __ATOMIC_RELAXED);
	}
}

static __attribute__((noinline)) void write_relaxed(char *b, size_t stride, uint32_t n,
						    uint32_t dim, const float *grads,
						    const struct wparams *p)
{
	write_contiguous(S_RELAXED, b, stride, n, dim, grads, p);
}

static __attribute__((noinline)) void write_seqlock(char *b, size_t stride, uint32_t n,
						    uint32_t dim, const float *grads,
						    const struct wparams *p)
{
	write_contiguous(S_SEQLOCK, b, stride, n, dim, grads, p);
}

static __attribute__((noinline)) void write_checksum(char *b, size_t stride, uint32_t n,
						     uint32_t dim, const float *grads,
						     const struct wparams *p)
{
	write_contiguous(S_CHECKSUM, b, stride, n, dim, grads, p);
}

static __attribute__((noinline)) void write_farm(char *b, size_t stride, uint32_t n,
						 uint32_t dim, const float *grads,
						 const struct wparams *p)
{
	for (uint32_t i = 0; i < n; i++) {
		char *row = b + i * stride;
		const float *g = grads + (size_t)i * dim;
		uint32_t v, j, l;
		float stdv = p->opt == RDPS_OPT_SGD ? 1.0f : adagrad_row_stdv(p, i, g, dim);

		memcpy(&v, row, 4);
		v++;
		for (l = 0, j = 0; j < dim; l++, j += FARM_FLOATS) {
			char *line = row + l * 64;
			uint32_t len = dim - j < FARM_FLOATS ? dim - j : FARM_FLOATS;

			__atomic_store_n((uint32_t *)line, v, __ATOMIC_RELAXED);
			update_piece((float *)(line + 4), g + j, len, p->opt, p->lr, stdv);
		}
	}
}

static void write_rows(enum scheme s, char *b, size_t stride, uint32_t n, uint32_t dim,
		       const float *grads, const struct wparams *p)
{
	switch (s) {
	case S_RELAXED: write_relaxed(b, stride, n, dim, grads, p); break;
	case S_SEQLOCK: write_seqlock(b, stride, n, dim, grads, p); break;
	case S_CHECKSUM: write_checksum(b, stride, n, dim, grads, p); break;
	default: write_farm(b, stride, n, dim, grads, p); break;
	}
}

/* ---------------------------------------------------------------------- */
/* Measurement                                                             */

struct dim_bufs {
	uint32_t dim, n;
	size_t stride[S_COUNT];
	char *bounce[S_COUNT]; /* row images the reader checks */
	char *rows[S_COUNT];   /* rows the writer updates */
	float *state[S_COUNT]; /* row-wise Adagrad state of rows[] */
	float *grads;          /* n * dim */
	float *out;            /* n * dim */
};

static void bufs_free(struct dim_bufs *d)
{
	for (int s = 0; s < S_COUNT; s++) {
		free(d->bounce[s]);
		free(d->rows[s]);
		free(d->state[s]);
	}
	free(d->grads);
	free(d->out);
}

/* Allocates the buffers and fills every row of every scheme with random
 * data through the scheme's own writer (w = 0 - (-1) * g), so each image is
 * whole by that scheme's rule. */
static int bufs_init(struct dim_bufs *d, uint32_t dim, uint32_t n, uint64_t *seed)
{
	struct wparams fill = { .opt = RDPS_OPT_SGD, .lr = -1.0f };

	memset(d, 0, sizeof(*d));
	d->dim = dim;
	d->n = n;
	d->grads = bench_alloc((size_t)n * dim * sizeof(float));
	d->out = bench_alloc((size_t)n * dim * sizeof(float));
	if (!d->grads || !d->out)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)n * dim; i++)
		d->grads[i] = (float)(bench_rand(seed) >> 40) / 16777216.0f * 2.0f - 1.0f;
	for (int s = 0; s < S_COUNT; s++) {
		d->stride[s] = scheme_stride(s, dim);
		d->bounce[s] = bench_alloc(n * d->stride[s]);
		d->rows[s] = bench_alloc(n * d->stride[s]);
		d->state[s] = bench_alloc((size_t)n * sizeof(float));
		if (!d->bounce[s] || !d->rows[s] || !d->state[s])
			return -ENOMEM;
		write_rows(s, d->bounce[s], d->stride[s], n, dim, d->grads, &fill);
		write_rows(s, d->rows[s], d->stride[s], n, dim, d->grads, &fill);
	}
	return 0;
}

/* Runs one measurement for slice_ns at least; returns ns per row, or -1 if
 * a reader refused an image its scheme's writer made (a bug). */
static double measure(struct dim_bufs *d, enum side side, enum scheme s, uint64_t slice_ns)
{
	struct wparams p = { .opt = side_opt[side], .lr = 0.001f, .eps = 1e-10f,
			     .state = d->state[s] };
	uint64_t t0 = rdps_now_ns(), t, rows = 0;
	uint32_t bad = 0;

	do {
		if (side == SIDE_READ)
			bad += read_rows(s, d->bounce[s], d->stride[s], d->n, d->dim, d->out);
		else
			write_rows(s, d->rows[s], d->stride[s], d->n, d->dim, d->grads, &p);
		rows += d->n;
		t = rdps_now_ns();
	} while (t - t0 < slice_ns);
	if (bad)
		return -1;
	return (double)(t - t0) / (double)rows;
}

static void emit(const struct rowcheck_opts *o, const struct dim_bufs *d, enum side side,
		 const double *med)
{
	bench_table_row("%-5s %-12s %5u %9.1f %9.1f %9.1f %9.1f %9.2fx %9.2fx %9.2fx",
			side_names[side], side == SIDE_READ ? "-" : rdps_optimizer_name(side_opt[side]),
			d->dim, med[S_RELAXED], med[S_SEQLOCK], med[S_CHECKSUM], med[S_FARM],
			med[S_CHECKSUM] / med[S_RELAXED], med[S_CHECKSUM] / med[S_SEQLOCK],
			med[S_FARM] / med[S_RELAXED]);
	for (int s = 0; s < S_COUNT; s++) {
		struct bench_json j;

		bench_json_begin(&j, "rowcheck");
		bench_json_str(&j, "side", side_names[side]);
		if (side != SIDE_READ)
			bench_json_str(&j, "optimizer", rdps_optimizer_name(side_opt[side]));
		bench_json_str(&j, "scheme", scheme_names[s]);
		bench_json_int(&j, "dim", d->dim);
		bench_json_int(&j, "rows", d->n);
		bench_json_int(&j, "stride", d->stride[s]);
		bench_json_int(&j, "rounds", o->rounds);
		bench_json_num(&j, "ns_per_row", med[s]);
		bench_json_num(&j, "vs_relaxed", bench_ratio(med[s], med[S_RELAXED]));
		bench_json_num(&j, "vs_seqlock", bench_ratio(med[s], med[S_SEQLOCK]));
		bench_json_end(&j);
	}
}

static int run_dim(const struct rowcheck_opts *o, uint32_t dim, uint64_t *seed)
{
	enum { KINDS = SIDE_COUNT * S_COUNT };
	static double ns[KINDS][MAX_ROUNDS];
	struct dim_bufs d;
	int ret = bufs_init(&d, dim, (uint32_t)o->rows, seed);

	if (ret) {
		fprintf(stderr, "rdps bench rowcheck: dim %u: %s\n", dim, rdps_strerror(ret));
		goto out;
	}
	for (uint64_t r = 0; r < o->rounds; r++) {
		for (int k0 = 0; k0 < KINDS; k0++) {
			int k = (int)((k0 + r) % KINDS);
			enum side side = (enum side)(k / S_COUNT);
			enum scheme s = (enum scheme)(k % S_COUNT);

			ns[k][r] = measure(&d, side, s, o->slice_us * 1000);
			if (ns[k][r] < 0) {
				fprintf(stderr, "rdps bench rowcheck: dim %u: the %s reader refused "
					"rows its writer made\n", dim, scheme_names[s]);
				ret = -EPROTO;
				goto out;
			}
		}
	}
	/* The writers' rows must read as whole too (each writer is correct). */
	for (int s = 0; s < S_COUNT; s++) {
		if (read_rows(s, d.rows[s], d.stride[s], d.n, dim, d.out)) {
			fprintf(stderr, "rdps bench rowcheck: dim %u: the %s writer left rows its "
				"reader refuses\n", dim, scheme_names[s]);
			ret = -EPROTO;
			goto out;
		}
	}
	for (int side = 0; side < SIDE_COUNT; side++) {
		double med[S_COUNT];

		for (int s = 0; s < S_COUNT; s++)
			med[s] = bench_median(ns[side * S_COUNT + s], o->rounds);
		emit(o, &d, side, med);
	}
out:
	bufs_free(&d);
	return ret;
}

int rdps_bench_rowcheck(int argc, char **argv)
{
	enum { O_DIMS = 256, O_ROWS, O_ROUNDS, O_SLICE };
	static const struct option lopts[] = {
		{ "dims", required_argument, NULL, O_DIMS },
		{ "rows", required_argument, NULL, O_ROWS },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "slice-us", required_argument, NULL, O_SLICE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rowcheck_opts o = { .dims = { 16, 100, 400, 1000 }, .ndims = 4, .rows = 256,
				   .rounds = 15, .slice_us = 2000 };
	uint64_t seed = 0x853c49e6748fea9bull;
	int opt, li = 0, n;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, &li)) != -1) {
		switch (opt) {
		case O_DIMS:
			n = bench_parse_list(optarg, o.dims, MAX_DIMS);
			if (n < 0)
				goto bad;
			o.ndims = n;
			for (int i = 0; i < n; i++)
				if (o.dims[i] > RDPS_MAX_DIM)
					goto bad;
			break;
		case O_ROWS: if (bench_parse_u64(optarg, 1, 1u << 20, &o.rows)) goto bad; break;
		case O_ROUNDS: if (bench_parse_u64(optarg, 1, MAX_ROUNDS, &o.rounds)) goto bad; break;
		case O_SLICE: if (bench_parse_u64(optarg, 1, 10000000, &o.slice_us)) goto bad; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench rowcheck: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	bench_table_title("Row validation: ns per row (median of %llu rounds, batches of %llu rows)",
			  (unsigned long long)o.rounds, (unsigned long long)o.rows);
	bench_table_row("%-5s %-12s %5s %9s %9s %9s %9s %10s %10s %10s", "side", "optimizer", "dim",
			"relaxed", "seqlock", "checksum", "farm", "csum/rlx", "csum/seq", "farm/rlx");
	for (int i = 0; i < o.ndims; i++)
		if (run_dim(&o, (uint32_t)o.dims[i], &seed))
			return 1;
	return 0;

bad:
	fprintf(stderr, "rdps bench rowcheck: bad value '%s' for --%s (see --help)\n", optarg,
		lopts[li].name);
	return 2;
}
