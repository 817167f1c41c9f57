// SPDX-License-Identifier: MIT
/* Shards: rows of one table on one server, and the optimizers that update
 * them. Any thread may apply pushes: rows are split into stripes, each
 * behind a lock, so a row has one writer at any time (what the checksum
 * needs: writes to a row never overlap); readers (RDMA READs, or threads
 * sharing the memory) check the rows' checksums (see the row layout in
 * rdps/kvstore.h). A push is applied by the thread that received it, with
 * no hand-off: its rows are sorted, so it takes each stripe's lock once. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/kvstore.h"

struct id_slot {
	uint64_t row; /* local row */
	uint32_t idx; /* position in the push, to sum in a fixed order */
	uint32_t pad;
};

struct rdps_shard {
	char name[RDPS_TABLE_NAME_MAX];
	uint32_t table_id, dim;
	uint64_t num_rows, lo, hi;
	size_t stride, len;
	char *base;            /* page-aligned rows */
	int optimizer;
	float lr, eps, beta1, beta2;
	float *state;          /* see rdps_shard_state_floats */
	size_t state_len;      /* its bytes as allocated */
	/* Applies hold it to read, rdps_shard_set_optimizer to write: the
	 * optimizer and its state never change under an apply. */
	pthread_rwlock_t opt_lock;
	uint32_t nparts;       /* row parts (1: the whole row) */
	uint32_t part_end[RDPS_ROW_PARTS_MAX]; /* first column after each part */
	pthread_mutex_t *locks; /* one per stripe of 1 << stripe_shift rows */
	uint32_t stripe_shift;
	uint64_t nstripes;
	bool concurrent;       /* other threads may write while one reads */
	uint64_t lock_waits;   /* applies that found a stripe locked by another */
};

/* Scratch of the applying thread; grows to the largest push, then stays
 * until the thread exits. */
struct apply_scratch {
	struct id_slot *slots;
	size_t slots_bytes;
	struct id_slot *sorted;  /* the radix sort's other buffer */
	size_t sorted_bytes;
	float *acc;            /* summed gradient of one id */
	size_t acc_bytes;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
	struct apply_scratch *sc = p;

	free(sc->slots);
	free(sc->sorted);
	free(sc->acc);
	free(sc);
}

static void scratch_init(void)
{
	if (pthread_key_create(&scratch_key, scratch_free))
		abort();
}

static struct apply_scratch *thread_scratch(void)
{
	struct apply_scratch *sc;

	pthread_once(&scratch_once, scratch_init);
	sc = pthread_getspecific(scratch_key);
	if (!sc && (sc = calloc(1, sizeof(*sc))) && pthread_setspecific(scratch_key, sc)) {
		free(sc);
		sc = NULL;
	}
	return sc;
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Row values depend on (seed, table, global id) only, so any partitioning
 * and any transport give the same initial model. */
static void init_row(float *row, const struct rdps_shard_params *p, uint32_t nparts,
		     uint64_t id)
{
	uint64_t st = p->seed ^ (0xd1b54a32d192ed03ull * (p->table_id + 1));
	uint32_t j = 0;

	st ^= splitmix64(&st) + id * 0x2545f4914f6cdd1dull;
	for (uint32_t k = 0; k < nparts; k++) {
		uint32_t end = nparts == 1 ? p->dim : j + p->parts[k].cols;
		float r = nparts == 1 ? p->init_range : p->parts[k].init_range;

		for (; j < end; j++) {
			/* 24 random bits -> [0, 1) exactly representable in float */
			float u = (float)(splitmix64(&st) >> 40) * (1.0f / 16777216.0f);

			row[j] = r * (2.0f * u - 1.0f);
		}
	}
}

#define HUGE_PAGE (2u << 20)

/*
 * Zeroed memory for rows or optimizer state, *len rounded up to a page
 * (size_t page) and, from a huge page on, backed by huge pages where the
 * kernel has them (transparent huge pages, "madvise" mode included):
 * pushed rows are random rows of a table far larger than the TLB covers,
 * and with 4 KiB pages each of them cost a page walk besides its miss
 * (measured: a push of 1000 random rows of dim 400 into 100k rows spent
 * most of its time in those two stalls). An RDMA device maps fewer pages
 * too. Freed with free().
 */
static void *table_alloc(size_t *len, size_t page)
{
	size_t align = *len >= HUGE_PAGE ? HUGE_PAGE : page;
	void *p;

	*len = RDPS_ALIGN_UP(*len, align);
	if (posix_memalign(&p, align, *len))
		return NULL;
	if (align == HUGE_PAGE)
		madvise(p, *len, MADV_HUGEPAGE); /* advice: no huge pages is fine */
	memset(p, 0, *len);
	return p;
}

static inline char *row_ptr(const struct rdps_shard *s, uint64_t local)
{
	return s->base + local * s->stride;
}

static inline float *row_data(char *row)
{
	return (float *)(row + RDPS_ROW_DATA_OFFSET);
}

static inline uint64_t *row_version(char *row)
{
	return (uint64_t *)row;
}

/* Starts a write of a row: returns its new version, stored already. */
static inline uint64_t row_begin(char *row)
{
	/* The caller holds the row's stripe lock: no one else moves the version. */
	uint64_t v = *row_version(row) + 1;

	/* Atomic stores only keep each word whole; no fence anywhere in a
	 * write, because a reader trusts no order: it accepts an image only if
	 * the checksum matches, whichever of these stores it saw. */
	__atomic_store_n(row_version(row), v, __ATOMIC_RELAXED);
	return v;
}

/* Ends a write of a row of version v: stores the checksum of its data
 * (passed as the pointer the write went through, for restrict's sake). */
static inline void row_seal(char *row, const float *data, uint32_t dim, uint64_t v)
{
	__atomic_store_n((uint64_t *)(row + RDPS_ROW_CHECK_OFFSET),
			 rdps_row_checksum(v, data, dim), __ATOMIC_RELAXED);
}

/* Optimizer state floats per row (see rdps_shard_state_floats). */
static uint64_t state_floats_per_row(uint32_t dim, uint32_t nparts, int opt)
{
	switch (opt) {
	case RDPS_OPT_ADAGRAD_ROW:
		return nparts;
	case RDPS_OPT_ADAGRAD:
		return dim;
	case RDPS_OPT_ADAM:
		return 2 * (uint64_t)dim + 1;
	default:
		return 0;
	}
}

static uint64_t state_per_row(const struct rdps_shard *s, int opt)
{
	return state_floats_per_row(s->dim, s->nparts, opt);
}

/* Bytes of optimizer state for rows of dim floats in nparts parts, or
 * -EOVERFLOW. */
static int state_bytes(uint64_t rows, uint32_t dim, uint32_t nparts, int opt, uint64_t *out)
{
	if (__builtin_mul_overflow(rows, state_floats_per_row(dim, nparts, opt), out) ||
	    __builtin_mul_overflow(*out, (uint64_t)sizeof(float), out))
		return -EOVERFLOW;
	return 0;
}

/* Bytes of the row region of rows rows of stride bytes, page-rounded as
 * table_alloc rounds it (at least a page), or -EOVERFLOW. */
static int region_bytes(uint64_t rows, size_t stride, size_t page, uint64_t *out)
{
	uint64_t align;

	if (__builtin_mul_overflow(rows, (uint64_t)stride, out))
		return -EOVERFLOW;
	if (!*out)
		*out = page;
	align = *out >= HUGE_PAGE ? HUGE_PAGE : page;
	if (*out > UINT64_MAX - align || *out > (uint64_t)SIZE_MAX - align)
		return -EOVERFLOW;
	*out = RDPS_ALIGN_UP(*out, align);
	return 0;
}

int rdps_shard_footprint(const struct rdps_shard_params *p, uint64_t *bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint32_t nparts = p->num_parts > 1 ? p->num_parts : 1;
	uint64_t rows, region, state, stripes;
	uint32_t shift = 0;

	*bytes = 0;
	if (p->lo > p->hi || p->dim == 0 || p->dim > RDPS_MAX_DIM)
		return -EINVAL;
	rows = p->hi - p->lo;
	if (region_bytes(rows, rdps_row_stride(p->dim), page, &region) ||
	    state_bytes(rows, p->dim, nparts, p->optimizer, &state))
		return -EOVERFLOW;
	while ((rows >> shift) > 65536)
		shift++;
	stripes = rows ? ((rows - 1) >> shift) + 1 : 1;
	if (__builtin_add_overflow(region, state, bytes) ||
	    __builtin_add_overflow(*bytes, stripes * sizeof(pthread_mutex_t), bytes))
		return -EOVERFLOW;
	return 0;
}

int rdps_shard_set_optimizer(struct rdps_shard *s, int optimizer, float lr, float eps,
			     float beta1, float beta2)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes;
	uint64_t want;
	float *state = NULL;

	if (optimizer < RDPS_OPT_SGD || optimizer > RDPS_OPT_NONE || !(lr >= 0.0f) ||
	    !(eps >= 0.0f) || !(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
		return -EINVAL;
	if (state_bytes(s->hi - s->lo, s->dim, s->nparts, optimizer, &want) || want > SIZE_MAX)
		return -EOVERFLOW;
	bytes = (size_t)want;
	if (bytes && !(state = table_alloc(&bytes, page)))
		return -ENOMEM;
	pthread_rwlock_wrlock(&s->opt_lock);
	free(s->state);
	s->state = state;
	s->state_len = bytes;
	s->optimizer = optimizer;
	s->lr = lr;
	s->eps = eps > 0 ? eps : optimizer == RDPS_OPT_ADAM ? RDPS_ADAM_EPS : RDPS_ADAGRAD_EPS;
	s->beta1 = beta1 > 0 ? beta1 : RDPS_ADAM_BETA1;
	s->beta2 = beta2 > 0 ? beta2 : RDPS_ADAM_BETA2;
	pthread_rwlock_unlock(&s->opt_lock);
	return 0;
}

int rdps_shard_create(const struct rdps_shard_params *p, struct rdps_shard **out)
{
	struct rdps_shard *s;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), nrows;
	uint64_t region;
	int ret;

	*out = NULL;
	if (!p->name || !p->name[0] || strlen(p->name) >= RDPS_TABLE_NAME_MAX ||
	    p->dim == 0 || p->dim > RDPS_MAX_DIM || p->lo > p->hi ||
	    p->hi > p->num_rows || p->optimizer < RDPS_OPT_SGD ||
	    p->optimizer > RDPS_OPT_NONE || !(p->lr >= 0.0f) ||
	    (p->init != RDPS_INIT_UNIFORM && p->init != RDPS_INIT_ZEROS) ||
	    p->num_parts > RDPS_ROW_PARTS_MAX)
		return -EINVAL;
	if (p->num_parts > 1) {
		uint64_t cols = 0;

		for (uint32_t k = 0; k < p->num_parts; k++)
			cols += p->parts[k].cols ? p->parts[k].cols : UINT32_MAX;
		if (cols != p->dim)
			return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	strcpy(s->name, p->name);
	s->table_id = p->table_id;
	s->dim = p->dim;
	s->num_rows = p->num_rows;
	s->lo = p->lo;
	s->hi = p->hi;
	s->stride = rdps_row_stride(p->dim);
	s->nparts = p->num_parts > 1 ? p->num_parts : 1;
	for (uint32_t k = 0, end = 0; k < s->nparts; k++) {
		end += s->nparts == 1 ? p->dim : p->parts[k].cols;
		s->part_end[k] = end;
	}
	/* The region's size from the caller's rows can wrap (2^58 rows of a
	 * float): refuse it before anything is allocated. */
	if (region_bytes(p->hi - p->lo, s->stride, page, &region) || region > SIZE_MAX) {
		ret = -EOVERFLOW;
		goto err_free_shard;
	}
	nrows = (size_t)(p->hi - p->lo);
	/* Keep at least one page so an empty shard still has a region. */
	s->len = nrows ? nrows * s->stride : page;
	s->base = table_alloc(&s->len, page);
	if (!s->base) {
		ret = -ENOMEM;
		goto err_free_shard;
	}
	for (size_t i = 0; i < nrows; i++) {
		if (p->init == RDPS_INIT_UNIFORM)
			init_row(row_data(row_ptr(s, i)), p, s->nparts, p->lo + i);
		/* Version 0 is sealed too: readers may come before any push. */
		row_seal(row_ptr(s, i), row_data(row_ptr(s, i)), s->dim, 0);
	}
	pthread_rwlock_init(&s->opt_lock, NULL);
	ret = rdps_shard_set_optimizer(s, p->optimizer, p->lr, p->eps, p->beta1, p->beta2);
	if (ret)
		goto err_free_state;
	/* At most 64k stripes: a small table (relations) gets a lock per row,
	 * a big one's locks stay a few MB. */
	while ((nrows >> s->stripe_shift) > 65536)
		s->stripe_shift++;
	s->nstripes = nrows ? ((nrows - 1) >> s->stripe_shift) + 1 : 1;
	s->locks = malloc(s->nstripes * sizeof(*s->locks));
	if (!s->locks) {
		ret = -ENOMEM;
		goto err_free_state;
	}
	for (uint64_t k = 0; k < s->nstripes; k++)
		pthread_mutex_init(&s->locks[k], NULL);
	*out = s;
	return 0;

err_free_state:
	free(s->state);
	pthread_rwlock_destroy(&s->opt_lock);
	free(s->base);
err_free_shard:
	free(s);
	return ret;
}

void rdps_shard_destroy(struct rdps_shard *s)
{
	if (!s)
		return;
	for (uint64_t k = 0; s->locks && k < s->nstripes; k++)
		pthread_mutex_destroy(&s->locks[k]);
	free(s->locks);
	pthread_rwlock_destroy(&s->opt_lock);
	free(s->state);
	free(s->base);
	free(s);
}

void rdps_shard_info(const struct rdps_shard *s, struct rdps_shard_info *info)
{
	info->name = s->name;
	info->table_id = s->table_id;
	info->dim = s->dim;
	info->num_rows = s->num_rows;
	info->lo = s->lo;
	info->hi = s->hi;
	info->stride = s->stride;
	info->base = s->base;
	info->len = s->len;
	info->optimizer = s->optimizer;
	info->lr = s->lr;
	info->eps = s->eps;
	info->beta1 = s->beta1;
	info->beta2 = s->beta2;
}

int rdps_shard_check_ids(const struct rdps_shard *s, const uint64_t *ids,
			 uint32_t n, uint64_t *bad)
{
	for (uint32_t i = 0; i < n; i++) {
		if (rdps_unlikely(ids[i] < s->lo || ids[i] >= s->hi)) {
			if (bad)
				*bad = ids[i];
			return -ERANGE;
		}
	}
	return 0;
}

static inline pthread_mutex_t *stripe_lock(const struct rdps_shard *s, uint64_t local)
{
	return &s->locks[local >> s->stripe_shift];
}

void rdps_shard_set_concurrent(struct rdps_shard *s, bool concurrent)
{
	s->concurrent = concurrent;
}

uint64_t rdps_shard_lock_waits(const struct rdps_shard *s)
{
	return __atomic_load_n(&s->lock_waits, __ATOMIC_RELAXED);
}

/* Rows this far ahead of the one being updated are prefetched: the row's
 * lines, its stripe lock and its optimizer state, whose misses would otherwise stall each update
 * in turn (pushed rows are random rows of a table far larger than cache). */
#define APPLY_PREFETCH 4

/* Read prefetches of a row's lines (see prefetch_row on always_inline). */
static inline __attribute__((always_inline)) void prefetch_lines(const char *row, size_t len)
{
	for (size_t off = 0; off < len; off += 64)
		__builtin_prefetch(row + off, 0, 3);
}

void rdps_shard_read(const struct rdps_shard *s, const uint64_t *ids,
		     uint32_t n, float *out)
{
	size_t bytes = (size_t)s->dim * sizeof(float);

	/* Pulled rows are random rows of a table far larger than cache: each
	 * is prefetched APPLY_PREFETCH rows ahead of its copy. */
	for (uint32_t i = 0; i < n && i < APPLY_PREFETCH; i++)
		prefetch_lines(row_ptr(s, ids[i] - s->lo), s->stride);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t local = ids[i] - s->lo;
		const char *row = row_ptr(s, local);
		float *o = out + (size_t)i * s->dim;
		int tries = 0;

		if (i + APPLY_PREFETCH < n)
			prefetch_lines(row_ptr(s, ids[i + APPLY_PREFETCH] - s->lo), s->stride);
		if (!s->concurrent) {
			/* The only writer is this thread: the row is whole. */
			memcpy(o, row + RDPS_ROW_DATA_OFFSET, bytes);
			continue;
		}
		/* Lock-free while no write overlaps; a row written over and
		 * over is read under its lock, so every read ends. */
		while (rdps_row_read_validated(row, s->dim, o) && ++tries < 8)
			;
		if (tries == 8) {
			pthread_mutex_lock(stripe_lock(s, local));
			memcpy(o, row + RDPS_ROW_DATA_OFFSET, bytes);
			pthread_mutex_unlock(stripe_lock(s, local));
		}
	}
}

int rdps_row_read_validated(const void *row, uint32_t dim, float *out)
{
	const char *r = row;
	uint64_t check = __atomic_load_n((const uint64_t *)(r + RDPS_ROW_CHECK_OFFSET),
					 __ATOMIC_RELAXED);
	uint64_t version = __atomic_load_n((const uint64_t *)r, __ATOMIC_RELAXED);

	/* No ordering needed between these reads: the copy is what gets
	 * checked (not the shared row, which may have changed since), and any
	 * mix of two writes fails the check. */
	memcpy(out, r + RDPS_ROW_DATA_OFFSET, (size_t)dim * 4);
	return rdps_row_checksum(version, out, dim) == check ? 0 : -EAGAIN;
}

#define RADIX_BITS 11

/*
 * Sorts n slots by row, stably (duplicates stay in push order, so their
 * gradients are summed in a fixed order), with a least-significant-digit
 * radix sort over the bits rows below max_row need: a few passes over the
 * push, no comparisons. Returns the buffer that holds the result (a or b).
 */
static struct id_slot *sort_slots(struct id_slot *a, struct id_slot *b, uint32_t n,
				  uint64_t max_row)
{
	uint32_t count[1u << RADIX_BITS];
	uint32_t bits = max_row ? 64 - (uint32_t)__builtin_clzll(max_row) : 1;

	for (uint32_t shift = 0; shift < bits; shift += RADIX_BITS) {
		uint32_t sum = 0;

		memset(count, 0, sizeof(count));
		for (uint32_t i = 0; i < n; i++)
			count[(a[i].row >> shift) & ((1u << RADIX_BITS) - 1)]++;
		for (uint32_t d = 0; d < (1u << RADIX_BITS); d++) {
			uint32_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < n; i++)
			b[count[(a[i].row >> shift) & ((1u << RADIX_BITS) - 1)]++] = a[i];
		{
			struct id_slot *t = a;

			a = b;
			b = t;
		}
	}
	return a;
}


/*
 * The sum of x[0..n)^2 in 8 interleaved partial sums, added pairwise at the
 * end: an order fixed by this code (the same result on every build and
 * transport), in which the compiler may use vector lanes. A single running
 * sum is one dependent add per element (four cycles each: a row of 400 took
 * longer than the rest of its update).
 */
static inline __attribute__((always_inline)) float sum_squares(const float *restrict x,
							       uint32_t n)
{
	typedef float v8f __attribute__((vector_size(32)));
	v8f acc = { 0 };
	float t[8];
	uint32_t j = 0;

	/* (ISO C mode: no FMA contraction, so every build sums alike) */
	for (; j + 8 <= n; j += 8) {
		v8f v;

		memcpy(&v, x + j, sizeof(v));
		acc += v * v;
	}
	memcpy(t, &acc, sizeof(t));
	for (uint32_t l = 0; j < n; j++, l++)
		t[l] += x[j] * x[j];
	return ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
}

/* The update of one row, specialised per optimizer by constant folding. */
static inline __attribute__((always_inline)) void update_row(struct rdps_shard *s,
							    uint64_t local,
							    const float *restrict g, int opt)
{
	char *row = row_ptr(s, local);
	float *restrict w = row_data(row);
	const uint64_t v = row_begin(row);
	const float lr = s->lr, eps = s->eps;
	const uint32_t dim = s->dim;

	if (opt == RDPS_OPT_SGD) {
		for (uint32_t j = 0; j < dim; j++)
			w[j] -= lr * g[j];
	} else if (opt == RDPS_OPT_ADAGRAD_ROW) {
		float *st = s->state + local * s->nparts;

		/* DGL-KE: one state per row of each array (part). */
		for (uint32_t k = 0, j0 = 0; k < s->nparts; k++) {
			uint32_t end = s->part_end[k];
			float step;

			st[k] += sum_squares(g + j0, end - j0) / (float)(end - j0);
			/* One division per row: lr * g / std as g * (lr / std). */
			step = lr / (sqrtf(st[k]) + eps);
			for (uint32_t j = j0; j < end; j++)
				w[j] -= step * g[j];
			j0 = end;
		}
	} else if (opt == RDPS_OPT_ADAGRAD) {
		float *restrict st = s->state + local * dim;

		for (uint32_t j = 0; j < dim; j++) {
			st[j] += g[j] * g[j];
			w[j] -= lr * g[j] / (sqrtf(st[j]) + eps);
		}
	} else { /* RDPS_OPT_ADAM, as DGL's SparseAdam */
		float *restrict m = s->state + local * (2 * (uint64_t)dim + 1);
		float *restrict sq = m + dim;
		const float b1 = s->beta1, b2 = s->beta2;
		float bc1, bc2;
		uint32_t t;

		memcpy(&t, sq + dim, sizeof(t)); /* the row's step count */
		t++;
		memcpy(sq + dim, &t, sizeof(t));
		bc1 = 1.0f - powf(b1, (float)t);
		bc2 = 1.0f - powf(b2, (float)t);
		for (uint32_t j = 0; j < dim; j++) {
			m[j] = b1 * m[j] + (1.0f - b1) * g[j];
			sq[j] = b2 * sq[j] + (1.0f - b2) * g[j] * g[j];
			w[j] -= lr * (m[j] / bc1) / (sqrtf(sq[j] / bc2) + eps);
		}
	}
	row_seal(row, w, dim, v);
}

/* Gradient of the i-th id (in push order): row index[i] of grads, or i. */
static inline const float *grad_of(const float *grads, const uint32_t *index, uint32_t i,
				   uint32_t dim)
{
	return grads + (size_t)(index ? index[i] : i) * dim;
}

/* Inlined always: GCC's IPA pure-const pass takes a function that only
 * prefetches for one without side effects and deletes every call to it
 * (seen with GCC 12: not one prefetch instruction was left). */
static inline __attribute__((always_inline)) void prefetch_row(const struct rdps_shard *s,
							   uint64_t local, int opt)
{
	const char *row = row_ptr(s, local);

	for (size_t off = 0; off < s->stride; off += 64)
		__builtin_prefetch(row + off, 0, 3);
	__builtin_prefetch(&s->locks[local >> s->stripe_shift], 0, 3);
	if (opt == RDPS_OPT_ADAGRAD_ROW)
		__builtin_prefetch(s->state + local * s->nparts, 0, 3);
	else if (opt == RDPS_OPT_ADAGRAD)
		__builtin_prefetch(s->state + local * s->dim, 0, 3);
	else if (opt == RDPS_OPT_ADAM)
		__builtin_prefetch(s->state + local * (2 * (uint64_t)s->dim + 1), 0, 3);
}

/* Inlined always, into each clone of rdps_shard_apply_gather and per
 * optimizer (constant opt). */
static inline __attribute__((always_inline)) int apply_all(struct rdps_shard *s,
							   const uint64_t *ids,
							   const float *grads,
							   const uint32_t *index, uint32_t n,
							   int opt)
{
	const uint32_t dim = s->dim;
	struct apply_scratch *sc = thread_scratch();
	pthread_mutex_t *held = NULL;
	struct id_slot *sl;
	bool sorted = true;
	int ret;

	if (!sc)
		return -ENOMEM;
	ret = rdps_reserve((void **)&sc->slots, &sc->slots_bytes, (size_t)n * sizeof(*sl));
	if (!ret)
		ret = rdps_reserve((void **)&sc->acc, &sc->acc_bytes, (size_t)dim * sizeof(float));
	if (ret)
		return ret;
	sl = sc->slots;
	for (uint32_t i = 0; i < n; i++) {
		sl[i].row = ids[i] - s->lo;
		sl[i].idx = i;
		sorted &= i == 0 || sl[i].row >= sl[i - 1].row;
	}
	/* Sorted, duplicates are grouped (summed in push order, so results
	 * are deterministic) and rows are walked in address order, a stripe
	 * at a time. Trainers push sorted ids: nothing to do then. */
	if (!sorted) {
		ret = rdps_reserve((void **)&sc->sorted, &sc->sorted_bytes, (size_t)n * sizeof(*sl));
		if (ret)
			return ret;
		sl = sort_slots(sc->slots, sc->sorted, n, s->hi - s->lo - 1);
	}
	for (uint32_t i = 0; i < n && i < APPLY_PREFETCH; i++)
		prefetch_row(s, sl[i].row, opt);
	for (uint32_t i = 0; i < n;) {
		pthread_mutex_t *lock = stripe_lock(s, sl[i].row);
		uint32_t j = i + 1;

		if (lock != held) {
			if (held)
				pthread_mutex_unlock(held);
			if (pthread_mutex_trylock(lock)) {
				__atomic_fetch_add(&s->lock_waits, 1, __ATOMIC_RELAXED);
				pthread_mutex_lock(lock);
			}
			held = lock;
		}
		while (j < n && sl[j].row == sl[i].row)
			j++;
		for (uint32_t k = i + APPLY_PREFETCH; k < j + APPLY_PREFETCH && k < n; k++)
			prefetch_row(s, sl[k].row, opt);
		if (j - i == 1) {
			update_row(s, sl[i].row, grad_of(grads, index, sl[i].idx, dim), opt);
		} else {
			memcpy(sc->acc, grad_of(grads, index, sl[i].idx, dim), dim * sizeof(float));
			for (uint32_t k = i + 1; k < j; k++) {
				const float *g = grad_of(grads, index, sl[k].idx, dim);

				for (uint32_t d = 0; d < dim; d++)
					sc->acc[d] += g[d];
			}
			update_row(s, sl[i].row, sc->acc, opt);
		}
		i = j;
	}
	if (held)
		pthread_mutex_unlock(held);
	return 0;
}

/* Built twice (x86-64-v3 and the baseline), picked at load time, as the
 * model kernels are: the updates vectorise to AVX2. (Clang 14, which
 * builds the fuzz targets, has no target_clones: one build there.) */
#if defined(__x86_64__) && !defined(__clang__)
#define SHARD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SHARD_CLONES
#endif
SHARD_CLONES
int rdps_shard_apply_gather(struct rdps_shard *s, const uint64_t *ids, const float *grads,
			    const uint32_t *index, uint32_t n)
{
	int ret;

	pthread_rwlock_rdlock(&s->opt_lock);
	switch (s->optimizer) {
	case RDPS_OPT_SGD:
		ret = apply_all(s, ids, grads, index, n, RDPS_OPT_SGD);
		break;
	case RDPS_OPT_ADAGRAD_ROW:
		ret = apply_all(s, ids, grads, index, n, RDPS_OPT_ADAGRAD_ROW);
		break;
	case RDPS_OPT_ADAGRAD:
		ret = apply_all(s, ids, grads, index, n, RDPS_OPT_ADAGRAD);
		break;
	case RDPS_OPT_ADAM:
		ret = apply_all(s, ids, grads, index, n, RDPS_OPT_ADAM);
		break;
	default:
		ret = -EPERM; /* a table without an optimizer */
	}
	pthread_rwlock_unlock(&s->opt_lock);
	return ret;
}

void rdps_shard_set(struct rdps_shard *s, const uint64_t *ids, const void *rows, uint32_t n)
{
	const size_t bytes = (size_t)s->dim * 4;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t local = ids[i] - s->lo;
		pthread_mutex_t *lock = stripe_lock(s, local);
		char *row = row_ptr(s, local);
		uint64_t v;

		if (i + APPLY_PREFETCH < n)
			prefetch_lines(row_ptr(s, ids[i + APPLY_PREFETCH] - s->lo), s->stride);
		if (pthread_mutex_trylock(lock)) {
			__atomic_fetch_add(&s->lock_waits, 1, __ATOMIC_RELAXED);
			pthread_mutex_lock(lock);
		}
		/* The same protocol as an update (see update_row). */
		v = row_begin(row);
		memcpy(row_data(row), (const char *)rows + i * bytes, bytes);
		row_seal(row, row_data(row), s->dim, v);
		pthread_mutex_unlock(lock);
	}
}

int rdps_shard_apply(struct rdps_shard *s, const uint64_t *ids,
		     const float *grads, uint32_t n)
{
	return rdps_shard_apply_gather(s, ids, grads, NULL, n);
}

uint64_t rdps_shard_state_floats(const struct rdps_shard *s)
{
	return (s->hi - s->lo) * state_per_row(s, s->optimizer);
}


/* Each stripe is copied under its lock: every row (with its optimizer
 * state) as of one moment, while pushes go on to the other stripes. */
void rdps_shard_export_range(const struct rdps_shard *s, uint64_t first, uint64_t n,
			     float *rows, float *state)
{
	uint64_t end = first + n, spr = state && s->state ? state_per_row(s, s->optimizer) : 0;

	if (end > s->hi - s->lo)
		end = s->hi - s->lo;
	/* Stripe by stripe, each under its lock: a row and its state are of
	 * one moment, and pushes to other stripes go on meanwhile. */
	for (uint64_t a = first; a < end;) {
		uint64_t k = a >> s->stripe_shift, b = (k + 1) << s->stripe_shift;

		if (b > end)
			b = end;
		pthread_mutex_lock(&s->locks[k]);
		for (uint64_t i = a; i < b; i++)
			memcpy(rows + (i - first) * s->dim, row_data(row_ptr(s, i)),
			       (size_t)s->dim * 4);
		if (spr)
			memcpy(state + (a - first) * spr, s->state + a * spr,
			       (b - a) * spr * sizeof(float));
		pthread_mutex_unlock(&s->locks[k]);
		a = b;
	}
}

void rdps_shard_export(const struct rdps_shard *s, float *rows, float *state)
{
	rdps_shard_export_range(s, 0, s->hi - s->lo, rows, state);
}

void rdps_shard_import(struct rdps_shard *s, const float *rows, const float *state)
{
	uint64_t n = s->hi - s->lo, spr = state && s->state ? state_per_row(s, s->optimizer) : 0;

	for (uint64_t k = 0; k < s->nstripes && n; k++) {
		uint64_t first = k << s->stripe_shift, end = (k + 1) << s->stripe_shift;

		if (end > n)
			end = n;
		pthread_mutex_lock(&s->locks[k]);
		for (uint64_t i = first; i < end; i++) {
			char *row = row_ptr(s, i);
			uint64_t v = row_begin(row);

			/* The same protocol as an update (see update_row). */
			memcpy(row_data(row), rows + i * s->dim, (size_t)s->dim * 4);
			row_seal(row, row_data(row), s->dim, v);
		}
		if (spr)
			memcpy(s->state + first * spr, state + first * spr,
			       (end - first) * spr * sizeof(float));
		pthread_mutex_unlock(&s->locks[k]);
	}
}

uint32_t rdps_rows_nonfinite(const float *rows, const uint32_t *index, uint32_t n,
			     uint32_t dim, uint32_t *first)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < n; i++) {
		const uint32_t *w = (const uint32_t *)(rows + (size_t)(index ? index[i] : i) * dim);
		uint32_t bad = 0;

		/* All exponent bits set: an infinity or a NaN. Integer ORs
		 * vectorise (a float test would need a reduction in order). */
		for (uint32_t k = 0; k < dim; k++)
			bad |= (w[k] & 0x7f800000u) == 0x7f800000u;
		if (bad && !count++ && first)
			*first = i;
	}
	return count;
}

uint32_t rdps_shard_state_per_row(const struct rdps_shard *s)
{
	return s->state ? (uint32_t)state_per_row(s, s->optimizer) : 0;
}

/* Copies the optimizer state of rows ids (in range) to or from buf, each
 * row under its stripe's lock (so no apply is half done in it), the
 * optimizer kept as it is meanwhile. */
static void state_copy(struct rdps_shard *s, const uint64_t *ids, uint32_t n, float *buf,
		       bool write)
{
	uint64_t spr;

	pthread_rwlock_rdlock(&s->opt_lock);
	spr = s->state ? state_per_row(s, s->optimizer) : 0;
	for (uint32_t i = 0; spr && i < n; i++) {
		uint64_t local = ids[i] - s->lo;
		pthread_mutex_t *lock = stripe_lock(s, local);
		float *st = s->state + local * spr;

		pthread_mutex_lock(lock);
		if (write)
			memcpy(st, buf + (size_t)i * spr, spr * sizeof(float));
		else
			memcpy(buf + (size_t)i * spr, st, spr * sizeof(float));
		pthread_mutex_unlock(lock);
	}
	pthread_rwlock_unlock(&s->opt_lock);
}

void rdps_shard_state_read(struct rdps_shard *s, const uint64_t *ids, uint32_t n, float *out)
{
	state_copy(s, ids, n, out, false);
}

void rdps_shard_state_write(struct rdps_shard *s, const uint64_t *ids, uint32_t n,
			    const float *in)
{
	state_copy(s, ids, n, (float *)in, true);
}
