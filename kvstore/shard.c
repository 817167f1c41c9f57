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
	float lr, eps;
	float *state;          /* Adagrad: a float per row part, or dim floats per row */
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
	float *acc;            /* summed gradient of one id */
	size_t acc_bytes;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
	struct apply_scratch *sc = p;

	free(sc->slots);
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

int rdps_shard_create(const struct rdps_shard_params *p, struct rdps_shard **out)
{
	struct rdps_shard *s;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), nrows, state_len = 0;
	int ret;

	*out = NULL;
	if (!p->name || !p->name[0] || strlen(p->name) >= RDPS_TABLE_NAME_MAX ||
	    p->dim == 0 || p->dim > RDPS_MAX_DIM || p->lo > p->hi ||
	    p->hi > p->num_rows || p->optimizer < RDPS_OPT_SGD ||
	    p->optimizer > RDPS_OPT_ADAGRAD || !(p->lr >= 0.0f) ||
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
	s->optimizer = p->optimizer;
	s->lr = p->lr;
	s->eps = p->eps > 0 ? p->eps : 1e-10f;
	s->nparts = p->num_parts > 1 ? p->num_parts : 1;
	for (uint32_t k = 0, end = 0; k < s->nparts; k++) {
		end += s->nparts == 1 ? p->dim : p->parts[k].cols;
		s->part_end[k] = end;
	}
	nrows = (size_t)(p->hi - p->lo);
	/* Keep at least one page so an empty shard still has a region. */
	s->len = nrows ? RDPS_ALIGN_UP(nrows * s->stride, page) : page;
	ret = posix_memalign((void **)&s->base, page, s->len);
	if (ret) {
		ret = -ret;
		goto err_free_shard;
	}
	memset(s->base, 0, s->len);
	for (size_t i = 0; i < nrows; i++) {
		if (p->init == RDPS_INIT_UNIFORM)
			init_row(row_data(row_ptr(s, i)), p, s->nparts, p->lo + i);
		/* Version 0 is sealed too: readers may come before any push. */
		row_seal(row_ptr(s, i), row_data(row_ptr(s, i)), s->dim, 0);
	}
	if (s->optimizer == RDPS_OPT_ADAGRAD_ROW)
		state_len = nrows * s->nparts;
	else if (s->optimizer == RDPS_OPT_ADAGRAD)
		state_len = nrows * s->dim;
	if (state_len) {
		s->state = calloc(state_len, sizeof(float));
		if (!s->state) {
			ret = -ENOMEM;
			goto err_free_base;
		}
	}
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
err_free_base:
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

void rdps_shard_read(const struct rdps_shard *s, const uint64_t *ids,
		     uint32_t n, float *out)
{
	size_t bytes = (size_t)s->dim * sizeof(float);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t local = ids[i] - s->lo;
		const char *row = row_ptr(s, local);
		float *o = out + (size_t)i * s->dim;
		int tries = 0;

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

static int slot_cmp(const void *a, const void *b)
{
	const struct id_slot *x = a, *y = b;

	if (x->row != y->row)
		return x->row < y->row ? -1 : 1;
	return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* The update of one row, specialised per optimizer by constant folding. */
static inline void update_row(struct rdps_shard *s, uint64_t local,
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
			float sq = 0.0f, stdv;

			for (uint32_t j = j0; j < end; j++)
				sq += g[j] * g[j];
			st[k] += sq / (float)(end - j0);
			stdv = sqrtf(st[k]) + eps;
			for (uint32_t j = j0; j < end; j++)
				w[j] -= lr * g[j] / stdv;
			j0 = end;
		}
	} else {
		float *restrict st = s->state + local * dim;

		for (uint32_t j = 0; j < dim; j++) {
			st[j] += g[j] * g[j];
			w[j] -= lr * g[j] / (sqrtf(st[j]) + eps);
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

static inline int apply_all(struct rdps_shard *s, const uint64_t *ids, const float *grads,
			    const uint32_t *index, uint32_t n, int opt)
{
	const uint32_t dim = s->dim;
	struct apply_scratch *sc = thread_scratch();
	pthread_mutex_t *held = NULL;
	struct id_slot *sl;
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
	}
	/* Sorting groups duplicates (summed in push order, so results are
	 * deterministic) and walks rows in address order, a stripe at a time. */
	qsort(sl, n, sizeof(*sl), slot_cmp);
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

int rdps_shard_apply_gather(struct rdps_shard *s, const uint64_t *ids, const float *grads,
			    const uint32_t *index, uint32_t n)
{
	switch (s->optimizer) {
	case RDPS_OPT_SGD:
		return apply_all(s, ids, grads, index, n, RDPS_OPT_SGD);
	case RDPS_OPT_ADAGRAD_ROW:
		return apply_all(s, ids, grads, index, n, RDPS_OPT_ADAGRAD_ROW);
	default:
		return apply_all(s, ids, grads, index, n, RDPS_OPT_ADAGRAD);
	}
}

int rdps_shard_apply(struct rdps_shard *s, const uint64_t *ids,
		     const float *grads, uint32_t n)
{
	return rdps_shard_apply_gather(s, ids, grads, NULL, n);
}

uint64_t rdps_shard_state_floats(const struct rdps_shard *s)
{
	uint64_t rows = s->hi - s->lo;

	if (s->optimizer == RDPS_OPT_ADAGRAD_ROW)
		return rows * s->nparts;
	if (s->optimizer == RDPS_OPT_ADAGRAD)
		return rows * s->dim;
	return 0;
}

/* Row-state floats per row of the optimizer (see rdps_shard_state_floats). */
static uint64_t state_per_row(const struct rdps_shard *s)
{
	return s->optimizer == RDPS_OPT_ADAGRAD_ROW ? s->nparts
	       : s->optimizer == RDPS_OPT_ADAGRAD  ? s->dim
						    : 0;
}

/* Each stripe is copied under its lock: every row (with its optimizer
 * state) as of one moment, while pushes go on to the other stripes. */
void rdps_shard_export(const struct rdps_shard *s, float *rows, float *state)
{
	uint64_t n = s->hi - s->lo, spr = state && s->state ? state_per_row(s) : 0;

	for (uint64_t k = 0; k < s->nstripes && n; k++) {
		uint64_t first = k << s->stripe_shift, end = (k + 1) << s->stripe_shift;

		if (end > n)
			end = n;
		pthread_mutex_lock(&s->locks[k]);
		for (uint64_t i = first; i < end; i++)
			memcpy(rows + i * s->dim, row_data(row_ptr(s, i)), (size_t)s->dim * 4);
		if (spr)
			memcpy(state + first * spr, s->state + first * spr,
			       (end - first) * spr * sizeof(float));
		pthread_mutex_unlock(&s->locks[k]);
	}
}

void rdps_shard_import(struct rdps_shard *s, const float *rows, const float *state)
{
	uint64_t n = s->hi - s->lo, spr = state && s->state ? state_per_row(s) : 0;

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
