// SPDX-License-Identifier: MIT
/* Shards: rows of one table on one server, and the optimizers that update
 * them. One writer per shard (the server's progress thread); readers (RDMA
 * READs, or threads sharing the memory) check the rows' checksums (see the
 * row layout in rdps/kvstore.h). */
#include <errno.h>
#include <math.h>
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
	/* Scratch for rdps_shard_apply; grows to the largest push, then stays. */
	struct id_slot *slots;
	size_t slots_cap;
	float *acc;            /* dim floats: summed gradient of one id */
};

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
	/* One writer per shard: no one else moves the version. */
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
	s->acc = aligned_alloc(64, RDPS_ALIGN_UP((size_t)s->dim * sizeof(float), 64));
	if (!s->acc) {
		ret = -ENOMEM;
		goto err_free_state;
	}
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
	free(s->acc);
	free(s->slots);
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

void rdps_shard_read(const struct rdps_shard *s, const uint64_t *ids,
		     uint32_t n, float *out)
{
	size_t bytes = (size_t)s->dim * sizeof(float);

	/* The only writer is the caller's own thread (TCP/in-process servers
	 * apply pushes on the thread that serves pulls), so no validation. */
	for (uint32_t i = 0; i < n; i++)
		memcpy(out + (size_t)i * s->dim,
		       row_data(row_ptr(s, ids[i] - s->lo)), bytes);
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

static inline int apply_all(struct rdps_shard *s, const uint64_t *ids,
			    const float *grads, uint32_t n, int opt)
{
	const uint32_t dim = s->dim;
	struct id_slot *sl;
	size_t cap_bytes = s->slots_cap * sizeof(*s->slots);
	int ret;

	ret = rdps_reserve((void **)&s->slots, &cap_bytes, (size_t)n * sizeof(*sl));
	if (ret)
		return ret;
	s->slots_cap = cap_bytes / sizeof(*s->slots);
	sl = s->slots;
	for (uint32_t i = 0; i < n; i++) {
		sl[i].row = ids[i] - s->lo;
		sl[i].idx = i;
	}
	/* Sorting groups duplicates (summed in push order, so results are
	 * deterministic) and walks rows in address order. */
	qsort(sl, n, sizeof(*sl), slot_cmp);
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i + 1;

		while (j < n && sl[j].row == sl[i].row)
			j++;
		if (j - i == 1) {
			update_row(s, sl[i].row, grads + (size_t)sl[i].idx * dim, opt);
		} else {
			memcpy(s->acc, grads + (size_t)sl[i].idx * dim, dim * sizeof(float));
			for (uint32_t k = i + 1; k < j; k++) {
				const float *g = grads + (size_t)sl[k].idx * dim;

				for (uint32_t d = 0; d < dim; d++)
					s->acc[d] += g[d];
			}
			update_row(s, sl[i].row, s->acc, opt);
		}
		i = j;
	}
	return 0;
}

int rdps_shard_apply(struct rdps_shard *s, const uint64_t *ids,
		     const float *grads, uint32_t n)
{
	switch (s->optimizer) {
	case RDPS_OPT_SGD:
		return apply_all(s, ids, grads, n, RDPS_OPT_SGD);
	case RDPS_OPT_ADAGRAD_ROW:
		return apply_all(s, ids, grads, n, RDPS_OPT_ADAGRAD_ROW);
	default:
		return apply_all(s, ids, grads, n, RDPS_OPT_ADAGRAD);
	}
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

void rdps_shard_export(const struct rdps_shard *s, float *rows, float *state)
{
	uint64_t n = s->hi - s->lo;

	for (uint64_t i = 0; i < n; i++)
		memcpy(rows + i * s->dim, row_data(row_ptr(s, i)), (size_t)s->dim * 4);
	if (state && s->state)
		memcpy(state, s->state, rdps_shard_state_floats(s) * sizeof(float));
}

void rdps_shard_import(struct rdps_shard *s, const float *rows, const float *state)
{
	uint64_t n = s->hi - s->lo;

	for (uint64_t i = 0; i < n; i++) {
		char *row = row_ptr(s, i);
		uint64_t v = row_begin(row);

		/* The same protocol as an update (see update_row). */
		memcpy(row_data(row), rows + i * s->dim, (size_t)s->dim * 4);
		row_seal(row, row_data(row), s->dim, v);
	}
	if (state && s->state)
		memcpy(s->state, state, rdps_shard_state_floats(s) * sizeof(float));
}
