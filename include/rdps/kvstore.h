/* SPDX-License-Identifier: MIT */
/*
 * rdps kvstore: embedding tables split into contiguous row ranges (shards),
 * the range partition book that maps a global id to its server, the row
 * layout shared with the RDMA path, and the server-side optimizers.
 *
 * Row layout (little-endian, fixed stride per table, 64-byte aligned rows):
 *
 *   offset 0    u64 version   updates of the row so far
 *   offset 8    u64 check     rdps_row_checksum(version, data), written last
 *   offset 16   f32 data[dim] 16-byte aligned for SIMD
 *   ... padding up to stride (multiple of 64)
 *
 * An update bumps the version, updates the data in place and stores the
 * checksum of (version, data) last. A reader (an RDMA READ into a bounce
 * buffer, or a thread sharing the memory) accepts a row image iff its
 * checksum matches its version and data (rdps_row_valid): an image that
 * mixes bytes of two updates, in any placement order, fails with
 * probability 1 - 2^-64. This is what the "validated" read mode checks;
 * "relaxed" accepts rows as read.
 *
 * Why a checksum. Neither InfiniBand nor PCIe promises that one READ places
 * a row in address order, and on Arm a release fence does not order stores
 * as a device sees them, so the previous seqlock (ver_begin first, ver_end
 * after the data, equal when whole) accepted torn rows whenever both version
 * words were read before or after an update that some data line straddled
 * (tests/kvstore/test_rowcheck.c shows it). FaRM's answer, a version in every
 * cache line, still assumes a NIC reads each 64-byte line atomically and
 * that the CPU's stores to a line reach it together, and it splits the data
 * into 60-byte pieces that every reader gathers and every optimizer loop
 * walks line by line. A checksum (Pilaf's answer; XXH3, already a
 * dependency) assumes nothing about placement, atomicity or store order and
 * keeps the data contiguous. Its cost is one XXH3 pass over the data per
 * update and per read: `rdps bench rowcheck` measures it against relaxed
 * reads, the old seqlock and FaRM's layout (table "Row validation" in
 * perf/report.md): at dim 400 a validated read costs 3.7x a plain copy of
 * the row (122 ns), a row-wise Adagrad update 1.26x; FaRM's reads 1.2x,
 * but its SGD writes 2.4x and its soundness rests on the above.
 */
#ifndef RDPS_KVSTORE_H
#define RDPS_KVSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_TABLE_NAME_MAX 32
#define RDPS_MAX_TABLES 64
#define RDPS_ROW_DATA_OFFSET 16
#define RDPS_MAX_DIM 65536

#define RDPS_ROW_CHECK_OFFSET 8

/* Bytes per row: the header and the data, rounded up to a cache line. */
static inline size_t rdps_row_stride(uint32_t dim)
{
	return (RDPS_ROW_DATA_OFFSET + (size_t)dim * 4 + 63) & ~(size_t)63;
}

/* The checksum a row of this version and data carries: XXH3-64 of the
 * data, xor an odd multiple of the version (a bijection: every version
 * gives another mask), so data and version need not be adjacent (a reader
 * may copy the data straight to its output and check it there). Unseeded
 * XXH3 runs about twice as fast as a seeded one on rows of 100-400 floats
 * (the seed derives a new secret per call). Implemented in common/, where
 * both the writers (kvstore) and the one-sided readers (transport) link. */
uint64_t rdps_row_checksum(uint64_t version, const float *data, uint32_t dim);

/* True if a row image that no one writes any more (an RDMA READ's bounce
 * buffer, a copy) is whole: its checksum matches its version and data. A
 * torn image is false with probability 1 - 2^-64; so is an image of a row
 * never written by a shard (all zeros). For rows a writer may be updating,
 * use rdps_row_read_validated. */
bool rdps_row_valid(const void *row, uint32_t dim);

/* ---------------------------------------------------------------------- */
/* Range partition book: server s holds global ids [off[s], off[s+1]).     */

struct rdps_book {
	uint32_t num_parts;   /* k */
	const uint64_t *off;  /* k+1 non-decreasing offsets, off[0] == 0 */
};

/* Part holding id (O(log k)); id must be < off[k]. Empty parts are skipped. */
static inline uint32_t rdps_book_part(const struct rdps_book *b, uint64_t id)
{
	uint32_t lo = 0, hi = b->num_parts; /* invariant: off[lo] <= id < off[hi] */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b->off[mid] <= id)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Checks offsets: off[0] == 0, non-decreasing. Returns 0 or -EINVAL. */
int rdps_book_check(const struct rdps_book *b);

/* Even split of n rows over k parts (first n % k parts get one more). off
 * must hold k+1 entries. */
void rdps_book_even(uint64_t n, uint32_t k, uint64_t *off);

/* ---------------------------------------------------------------------- */
/* Optimizers, applied by the server that owns a row.                      */

enum rdps_optimizer {
	RDPS_OPT_SGD = 0,         /* w -= lr * g */
	RDPS_OPT_ADAGRAD_ROW = 1, /* DGL-KE: s += mean(g^2); w -= lr*g/(sqrt(s)+eps) */
	RDPS_OPT_ADAGRAD = 2,     /* element-wise: s_j += g_j^2; w_j -= lr*g_j/(sqrt(s_j)+eps) */
	RDPS_OPT_ADAM = 3,        /* DGL's SparseAdam: per row a step count t, per element
				   * m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2;
				   * w -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) */
	RDPS_OPT_NONE = 4,        /* no optimizer: rows are only written (set) and read */
};

/* Defaults of the optimizers' constants (DGL's). */
#define RDPS_ADAGRAD_EPS 1e-10f
#define RDPS_ADAM_EPS 1e-8f
#define RDPS_ADAM_BETA1 0.9f
#define RDPS_ADAM_BETA2 0.999f

/* Parses "sgd", "adagrad_row" (alias "row_adagrad"), "adagrad", "adam",
 * "none". Returns the enum value or -EINVAL. */
int rdps_optimizer_parse(const char *name);
const char *rdps_optimizer_name(int opt);

enum rdps_init {
	RDPS_INIT_UNIFORM = 0, /* U[-r, r], r = (gamma + 2) / dim, as DGL-KE */
	RDPS_INIT_ZEROS = 1,
};

/* ---------------------------------------------------------------------- */
/* Shard: one table's rows [lo, hi) on one server.                         */

/* A row may be made of parts that the model treats as separate arrays
 * (TransR's relation vector and projection matrix): each part starts
 * uniform in its own range and keeps its own row-wise Adagrad state, as
 * two tables would. Parts tile the row in order. */
#define RDPS_ROW_PARTS_MAX 4

struct rdps_row_part {
	uint32_t cols;          /* floats of the part */
	float init_range;       /* r of its U[-r, r] start */
};

struct rdps_shard_params {
	const char *name;       /* table name, < RDPS_TABLE_NAME_MAX */
	uint32_t table_id;      /* index of the table in the job */
	uint32_t dim;           /* floats per row, 1..RDPS_MAX_DIM */
	uint64_t num_rows;      /* rows of the whole table (all servers) */
	uint64_t lo, hi;        /* this shard's global id range */
	int init;               /* enum rdps_init */
	float init_range;       /* r for RDPS_INIT_UNIFORM */
	uint64_t seed;          /* init seed; values depend on (seed, table, id) only */
	int optimizer;          /* enum rdps_optimizer */
	float lr;               /* learning rate */
	float eps;              /* epsilon (0: RDPS_ADAGRAD_EPS, Adam RDPS_ADAM_EPS) */
	float beta1, beta2;     /* Adam (0: RDPS_ADAM_BETA1/2) */
	uint32_t num_parts;     /* 0 (or 1): the row is one part of init_range */
	struct rdps_row_part parts[RDPS_ROW_PARTS_MAX]; /* cols add up to dim */
};

struct rdps_shard; /* opaque */

/* Allocates one page-aligned region of (hi-lo)*stride bytes and the
 * optimizer state, initialises rows (version 0, checksum stored, so they
 * read as valid before any push). The region never moves, so a transport
 * may register it. Returns 0 or -errno (-EINVAL for bad params). */
int rdps_shard_create(const struct rdps_shard_params *p, struct rdps_shard **out);
void rdps_shard_destroy(struct rdps_shard *s);

/* The bytes rdps_shard_create(p) would allocate for rows [p->lo, p->hi):
 * the row region (page-rounded), the optimizer state and the stripe
 * locks, so a caller can hold a table against a memory budget before it
 * exists. 0, -EINVAL (dim out of range, lo > hi) or -EOVERFLOW (the size
 * does not fit 64 bits: rdps_shard_create refuses it too). */
int rdps_shard_footprint(const struct rdps_shard_params *p, uint64_t *bytes);

/* The shard's memory region and its shape. */
struct rdps_shard_info {
	const char *name;
	uint32_t table_id, dim;
	uint64_t num_rows, lo, hi;
	size_t stride;
	void *base;       /* row (id) at base + (id - lo) * stride */
	size_t len;       /* bytes of the region (page multiple) */
	int optimizer;
	float lr, eps, beta1, beta2; /* the optimizer's settings (defaults filled in) */
};
/* Fills info with the shard's region and shape. */
void rdps_shard_info(const struct rdps_shard *s, struct rdps_shard_info *info);

/* Copies rows of global ids[0..n) (each in [lo, hi)) densely into out
 * (n * dim floats); callers check ids first with rdps_shard_check_ids when
 * they come from the wire. With rdps_shard_set_concurrent(true) each row is
 * whole even while other threads apply pushes (checked by its checksum,
 * read under its lock if writes keep overlapping); without, the caller must
 * be the only writer. */
void rdps_shard_read(const struct rdps_shard *s, const uint64_t *ids,
		     uint32_t n, float *out);

/* Whether other threads may apply pushes while one reads (a server with
 * several threads, or clients applying in their own threads). */
void rdps_shard_set_concurrent(struct rdps_shard *s, bool concurrent);

/* How often an apply waited for a stripe another thread held (contention). */
uint64_t rdps_shard_lock_waits(const struct rdps_shard *s);

/* Returns 0 if every id is in [lo, hi), else -ERANGE and *bad = first bad id. */
int rdps_shard_check_ids(const struct rdps_shard *s, const uint64_t *ids,
			 uint32_t n, uint64_t *bad);

/* Writes rows (n * dim 32-bit words, not gradients) of global ids (in
 * range): a row's data becomes its row of rows, with the checksum
 * protocol, under its stripe's lock; the same id twice: the later row
 * stays. The optimizer state is left as it is. */
void rdps_shard_set(struct rdps_shard *s, const uint64_t *ids, const void *rows, uint32_t n);

/* Replaces the optimizer (and lr, eps, beta1, beta2 as in the params), its
 * state zeroed: while no apply runs (they wait). 0, -EINVAL or -ENOMEM
 * (then the old one stays). */
int rdps_shard_set_optimizer(struct rdps_shard *s, int optimizer, float lr, float eps,
			     float beta1, float beta2);

/* Applies gradients grads (n * dim floats) for global ids (in range):
 * gradients of the same id are summed first, then the optimizer updates
 * each distinct row once, with the checksum protocol above, holding the
 * lock of the row's stripe: any number of threads may apply at once (a row
 * has one writer at any time), readers may run concurrently. Scratch is the
 * calling thread's own. Returns 0 or -ENOMEM. */
int rdps_shard_apply(struct rdps_shard *s, const uint64_t *ids,
		     const float *grads, uint32_t n);

/* Like rdps_shard_apply, with the gradient of ids[i] at row index[i] of
 * grads (the caller's rows, not grouped; index NULL: row i). Gradients of
 * one id are summed in the order of ids. A table without an optimizer
 * (RDPS_OPT_NONE) takes no gradient: -EPERM. */
int rdps_shard_apply_gather(struct rdps_shard *s, const uint64_t *ids, const float *grads,
			    const uint32_t *index, uint32_t n);

/* How many of n rows of dim floats (row i at rows + (index ? index[i] : i)
 * * dim) hold a NaN or an infinity; the first such i in *first (may be
 * NULL). What a server checks pushed gradients with before it applies them. */
uint32_t rdps_rows_nonfinite(const float *rows, const uint32_t *index, uint32_t n,
			     uint32_t dim, uint32_t *first);

/* The optimizer state of one row, in floats (rdps_shard_state_floats / rows:
 * 0 without state), and the state of rows ids (in range) read into out or
 * written from in (n * that many floats), each row under its stripe's
 * lock: saving and loading a sparse optimizer. */
uint32_t rdps_shard_state_per_row(const struct rdps_shard *s);
void rdps_shard_state_read(struct rdps_shard *s, const uint64_t *ids, uint32_t n, float *out);
void rdps_shard_state_write(struct rdps_shard *s, const uint64_t *ids, uint32_t n,
			    const float *in);

/* Floats of optimizer state the shard keeps (0 for SGD and none, a float
 * per row part for row-wise Adagrad, dim per row for element-wise Adagrad,
 * 2 dim + 1 per row for Adam: m, v and the step count's 32 bits). */
uint64_t rdps_shard_state_floats(const struct rdps_shard *s);

/* Copies the rows [lo, hi) densely into rows ((hi-lo) * dim floats) and
 * the optimizer state into state (rdps_shard_state_floats; may be NULL if
 * 0). Safe while other threads apply: each stripe of rows is copied under
 * its lock, so every row (with its state) is as of one moment. */
void rdps_shard_export(const struct rdps_shard *s, float *rows, float *state);
/* The same for local rows [first, first + n) only (rows[0] is row first):
 * a caller streams a shard out in pieces of bounded memory. */
void rdps_shard_export_range(const struct rdps_shard *s, uint64_t first, uint64_t n,
			     float *rows, float *state);

/* Replaces every row and the optimizer state (same layout as export);
 * rows are written with the checksum protocol, so concurrent validated
 * readers never accept a torn row. */
void rdps_shard_import(struct rdps_shard *s, const float *rows, const float *state);

/* Reads one row that a writer may be updating concurrently (a thread that
 * shares the shard's memory): copies the data to out and checks the copy
 * against the version and checksum read before it. Returns 0 with a whole
 * row in out, or -EAGAIN if the copy was torn (read again). */
int rdps_row_read_validated(const void *row, uint32_t dim, float *out);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_KVSTORE_H */
