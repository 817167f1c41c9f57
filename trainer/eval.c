/* SPDX-License-Identifier: MIT */
/*
 * Filtered ranking evaluation over candidate chunks, and the triple set
 * used as its filter.
 *
 * At create, every query gets the sorted list of candidate ids to skip: the
 * true entity plus every e with (h, r, e) (tail queries) or (e, r, t) (head
 * queries) in the filter. add_candidates() then scores query blocks
 * against candidate tiles and walks each query's skip list with a cursor as
 * ids increase, so the filter costs one comparison per pair and no hash
 * lookups in the hot loop.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "rdps/trainer.h"
#include "kge_internal.h"

/* ------------------------------------------------------------------------ */
/* Hashing                                                                   */
/* ------------------------------------------------------------------------ */

/* splitmix64's finalizer: a bijective 64-bit mix. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t triple_hash(uint32_t h, uint32_t r, uint32_t t)
{
	return mix64((((uint64_t)h << 32) | r) ^ mix64(t + 0x9e3779b97f4a7c15ull));
}

static size_t pow2_at_least(size_t n)
{
	size_t c = 16;
	while (c < n)
		c <<= 1;
	return c;
}

/* ------------------------------------------------------------------------ */
/* Triple set                                                                */
/* ------------------------------------------------------------------------ */

struct rdps_triple_set {
	struct rdps_triple *items; /* distinct triples, insertion order */
	size_t count;              /* items used */
	size_t cap;                /* items allocated */
	uint32_t *slots;           /* item index + 1; 0 = empty */
	size_t mask;               /* slot count - 1 (power of two) */
};

static int set_rehash(struct rdps_triple_set *s, size_t nslots)
{
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->count; i++) {
		const struct rdps_triple *x = &s->items[i];
		size_t p = triple_hash(x->h, x->r, x->t) & (nslots - 1);
		while (slots[p])
			p = (p + 1) & (nslots - 1);
		slots[p] = (uint32_t)(i + 1);
	}
	free(s->slots);
	s->slots = slots;
	s->mask = nslots - 1;
	return 0;
}

int rdps_triple_set_create(struct rdps_triple_set **out, size_t expected)
{
	struct rdps_triple_set *s;

	if (!out)
		return -EINVAL;
	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (set_rehash(s, pow2_at_least(2 * expected + 1))) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void rdps_triple_set_destroy(struct rdps_triple_set *s)
{
	if (!s)
		return;
	free(s->slots);
	free(s->items);
	free(s);
}

static size_t set_find(const struct rdps_triple_set *s, uint32_t h, uint32_t r,
		       uint32_t t, bool *found)
{
	size_t p = triple_hash(h, r, t) & s->mask;

	for (;;) {
		uint32_t v = s->slots[p];
		if (!v) {
			*found = false;
			return p;
		}
		const struct rdps_triple *x = &s->items[v - 1];
		if (x->h == h && x->r == r && x->t == t) {
			*found = true;
			return p;
		}
		p = (p + 1) & s->mask;
	}
}

long rdps_triple_set_add(struct rdps_triple_set *s, const struct rdps_triple *t,
			 size_t n)
{
	size_t added = 0;

	if (!s || (n && !t))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		bool found;
		size_t p;

		if ((s->count + 1) * 2 > s->mask + 1 &&
		    set_rehash(s, (s->mask + 1) * 2))
			return -ENOMEM;
		p = set_find(s, t[i].h, t[i].r, t[i].t, &found);
		if (found)
			continue;
		if (s->count == UINT32_MAX - 1)
			return -ENOMEM;
		if (s->count == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 1024;
			struct rdps_triple *it = realloc(s->items, cap * sizeof(*it));
			if (!it)
				return -ENOMEM;
			s->items = it;
			s->cap = cap;
		}
		s->items[s->count] = t[i];
		s->slots[p] = (uint32_t)(++s->count);
		added++;
	}
	return added > INT32_MAX ? INT32_MAX : (long)added;
}

bool rdps_triple_set_contains(const struct rdps_triple_set *s, uint32_t h,
			      uint32_t r, uint32_t t)
{
	bool found;

	set_find(s, h, r, t, &found);
	return found;
}

size_t rdps_triple_set_count(const struct rdps_triple_set *s)
{
	return s->count;
}

const struct rdps_triple *rdps_triple_set_items(const struct rdps_triple_set *s)
{
	return s->items;
}

/* ------------------------------------------------------------------------ */
/* Query key index (pair of ids -> chain of queries), for building filters */
/* ------------------------------------------------------------------------ */

struct key_index {
	uint64_t *keys;  /* slot keys */
	uint32_t *first; /* slot -> first query, UINT32_MAX = empty */
	uint32_t *next;  /* query -> next query with the same key */
	size_t mask;
};

static int key_index_init(struct key_index *ki, size_t nq)
{
	size_t n = pow2_at_least(2 * nq + 1);

	ki->keys = malloc(n * sizeof(*ki->keys));
	ki->first = malloc(n * sizeof(*ki->first));
	ki->next = malloc((nq ? nq : 1) * sizeof(*ki->next));
	ki->mask = n - 1;
	if (!ki->keys || !ki->first || !ki->next)
		return -ENOMEM;
	memset(ki->first, 0xff, n * sizeof(*ki->first));
	return 0;
}

static void key_index_free(struct key_index *ki)
{
	free(ki->keys);
	free(ki->first);
	free(ki->next);
}

static void key_index_add(struct key_index *ki, uint64_t key, uint32_t q)
{
	size_t p = mix64(key) & ki->mask;

	while (ki->first[p] != UINT32_MAX && ki->keys[p] != key)
		p = (p + 1) & ki->mask;
	ki->next[q] = ki->first[p]; /* UINT32_MAX ends the chain */
	ki->keys[p] = key;
	ki->first[p] = q;
}

static uint32_t key_index_get(const struct key_index *ki, uint64_t key)
{
	size_t p = mix64(key) & ki->mask;

	while (ki->first[p] != UINT32_MAX) {
		if (ki->keys[p] == key)
			return ki->first[p];
		p = (p + 1) & ki->mask;
	}
	return UINT32_MAX;
}

/* ------------------------------------------------------------------------ */
/* Evaluator                                                                 */
/* ------------------------------------------------------------------------ */

/* Candidate rows per macro block (kept in cache while a thread's queries
 * pass), queries per tile, candidates per tile. */
#define EVAL_CAND_BLOCK 2048u
#define EVAL_QTILE 16u
#define EVAL_CTILE 64u

struct rdps_eval {
	const struct rdps_model *m;
	struct rdps_triple *test;  /* n_test copied triples */
	size_t n_test;
	uint32_t n_entities;
	unsigned threads;
	enum rdps_eval_ties ties;
	unsigned sides;
	size_t nq;                 /* queries */
	uint32_t dim;              /* entity_dim */
	uint32_t qdim;             /* floats of a query (rdps_kge_query_dim) */
	float *q;                  /* nq x qdim query vectors, in rank order */
	float *pos;                /* nq true-entity scores */
	uint32_t *gt;              /* nq: candidates scoring higher */
	uint32_t *eq;              /* nq: candidates scoring equal */
	size_t *ex_off;            /* nq + 1: skip list offsets into ex */
	uint32_t *ex;              /* sorted, distinct skip ids per query */
	size_t *cur;               /* nq: skip cursors during a call */
	uint64_t rel_bound;        /* 1 + largest test relation id, 0 if none */
	bool rows_set;             /* set_rows() done */
	/* Models whose candidates depend on the relation (TransR): queries are
	 * ranked in relation order, a block of candidates is brought into
	 * query space once per relation (rdps_kge_cand_rows). */
	size_t ctx_size;           /* rdps_kge_cand_ctx_size; 0: none of this */
	uint32_t *order;           /* nq: query of each rank, by relation */
	uint32_t *slot;            /* nq: relation slot of each rank */
	uint32_t *slot_test;       /* n_slots: a test triple of the relation */
	uint32_t n_slots;          /* distinct test relations */
	float *ctx;                /* n_slots x ctx_size, from set_rows() */
	float *cand;               /* threads x EVAL_CAND_BLOCK x qdim */
};

/* Query q -> (head side?, test index). */
static inline void query_of(const struct rdps_eval *ev, size_t q, int *head_side,
			    size_t *i)
{
	if ((ev->sides & RDPS_EVAL_TAIL) && q < ev->n_test) {
		*head_side = 0;
		*i = q;
	} else {
		*head_side = 1;
		*i = (ev->sides & RDPS_EVAL_TAIL) ? q - ev->n_test : q;
	}
}

/* Query ranked k-th (queries are ranked in id order but with ctx_size). */
static inline size_t query_at(const struct rdps_eval *ev, size_t k)
{
	return ev->order ? ev->order[k] : k;
}

static uint32_t query_truth(const struct rdps_eval *ev, size_t q)
{
	int hs;
	size_t i;

	query_of(ev, q, &hs, &i);
	return hs ? ev->test[i].h : ev->test[i].t;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Two passes over the filter: count, then fill; then sort and dedupe. */
static int build_skip_lists(struct rdps_eval *ev,
			    const struct rdps_triple_set *filter)
{
	struct key_index tail_ix = { 0 }, head_ix = { 0 };
	size_t nf = filter ? rdps_triple_set_count(filter) : 0;
	const struct rdps_triple *f = filter ? rdps_triple_set_items(filter) : NULL;
	size_t *fill = NULL;
	int ret = -ENOMEM;

	if (key_index_init(&tail_ix, ev->nq) || key_index_init(&head_ix, ev->nq))
		goto err_free_index;
	for (size_t q = 0; q < ev->nq; q++) {
		int hs;
		size_t i;
		query_of(ev, q, &hs, &i);
		if (hs)
			key_index_add(&head_ix, ((uint64_t)ev->test[i].r << 32) | ev->test[i].t,
				      (uint32_t)q);
		else
			key_index_add(&tail_ix, ((uint64_t)ev->test[i].h << 32) | ev->test[i].r,
				      (uint32_t)q);
	}
	ev->ex_off = calloc(ev->nq + 1, sizeof(*ev->ex_off));
	fill = calloc(ev->nq + 1, sizeof(*fill));
	if (!ev->ex_off || !fill)
		goto err_free_index;
	for (int pass = 0; pass < 2; pass++) {
		size_t *cnt = pass ? fill : ev->ex_off + 1;
		for (size_t q = 0; q < ev->nq; q++) {
			if (pass)
				ev->ex[ev->ex_off[q] + cnt[q]] = query_truth(ev, q);
			cnt[q]++;
		}
		for (size_t k = 0; k < nf; k++) {
			uint32_t q = key_index_get(&tail_ix, ((uint64_t)f[k].h << 32) | f[k].r);
			for (; q != UINT32_MAX; q = tail_ix.next[q]) {
				if (pass)
					ev->ex[ev->ex_off[q] + cnt[q]] = f[k].t;
				cnt[q]++;
			}
			q = key_index_get(&head_ix, ((uint64_t)f[k].r << 32) | f[k].t);
			for (; q != UINT32_MAX; q = head_ix.next[q]) {
				if (pass)
					ev->ex[ev->ex_off[q] + cnt[q]] = f[k].h;
				cnt[q]++;
			}
		}
		if (!pass) {
			for (size_t q = 0; q < ev->nq; q++)
				ev->ex_off[q + 1] += ev->ex_off[q];
			ev->ex = malloc((ev->ex_off[ev->nq] ? ev->ex_off[ev->nq] : 1) *
					sizeof(*ev->ex));
			if (!ev->ex)
				goto err_free_index;
		}
	}
	/* sort, dedupe, compact in place */
	size_t w = 0;
	for (size_t q = 0; q < ev->nq; q++) {
		size_t b = ev->ex_off[q], e = ev->ex_off[q + 1];
		qsort(ev->ex + b, e - b, sizeof(uint32_t), cmp_u32);
		ev->ex_off[q] = w;
		for (size_t k = b; k < e; k++)
			if (k == b || ev->ex[k] != ev->ex[k - 1])
				ev->ex[w++] = ev->ex[k];
	}
	ev->ex_off[ev->nq] = w;
	ret = 0;
err_free_index:
	free(fill);
	key_index_free(&head_ix);
	key_index_free(&tail_ix);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* For models with candidate contexts: the rank order by relation (then
 * query id), the slots of the distinct relations and the buffers. */
static int build_relation_order(struct rdps_eval *ev)
{
	uint64_t *key;

	ev->ctx_size = rdps_kge_cand_ctx_size(ev->m);
	if (!ev->ctx_size || !ev->nq)
		return 0;
	key = malloc(ev->nq * sizeof(*key));
	ev->order = malloc(ev->nq * sizeof(*ev->order));
	ev->slot = malloc(ev->nq * sizeof(*ev->slot));
	ev->slot_test = malloc(ev->nq * sizeof(*ev->slot_test));
	/* a block per worker of add_candidates (at most 64) */
	ev->cand = malloc((size_t)(ev->threads < 64 ? ev->threads : 64) * EVAL_CAND_BLOCK *
			  ev->qdim * sizeof(float));
	if (!key || !ev->order || !ev->slot || !ev->slot_test || !ev->cand) {
		free(key);
		return -ENOMEM;
	}
	for (size_t q = 0; q < ev->nq; q++) {
		int hs;
		size_t i;
		query_of(ev, q, &hs, &i);
		key[q] = (uint64_t)ev->test[i].r << 32 | q;
	}
	qsort(key, ev->nq, sizeof(*key), cmp_u64);
	for (size_t k = 0; k < ev->nq; k++) {
		int hs;
		size_t i;
		ev->order[k] = (uint32_t)key[k];
		query_of(ev, ev->order[k], &hs, &i);
		if (k == 0 || key[k] >> 32 != key[k - 1] >> 32)
			ev->slot_test[ev->n_slots++] = (uint32_t)i;
		ev->slot[k] = ev->n_slots - 1;
	}
	free(key);
	ev->ctx = malloc((size_t)ev->n_slots * ev->ctx_size * sizeof(float));
	return ev->ctx ? 0 : -ENOMEM;
}

void rdps_eval_destroy(struct rdps_eval *ev)
{
	if (!ev)
		return;
	free(ev->cand);
	free(ev->ctx);
	free(ev->slot_test);
	free(ev->slot);
	free(ev->order);
	free(ev->cur);
	free(ev->ex);
	free(ev->ex_off);
	free(ev->eq);
	free(ev->gt);
	free(ev->pos);
	free(ev->q);
	free(ev->test);
	free(ev);
}

int rdps_eval_create(struct rdps_eval **out, const struct rdps_eval_params *p)
{
	struct rdps_eval *ev;
	unsigned sides;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!p || !p->model || (p->n_test && !p->test) || p->n_entities == 0 ||
	    (unsigned)p->ties > RDPS_EVAL_TIES_MEAN || (p->sides & ~3u))
		return -EINVAL;
	sides = p->sides ? p->sides : RDPS_EVAL_BOTH;
	for (size_t i = 0; i < p->n_test; i++)
		if (p->test[i].h >= p->n_entities || p->test[i].t >= p->n_entities)
			return -EINVAL;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_test; i++)
		if (p->test[i].r >= ev->rel_bound)
			ev->rel_bound = (uint64_t)p->test[i].r + 1;
	ev->m = p->model;
	ev->n_test = p->n_test;
	ev->n_entities = p->n_entities;
	ev->threads = p->num_threads ? p->num_threads : 1;
	ev->ties = p->ties;
	ev->sides = sides;
	ev->nq = p->n_test * (sides == RDPS_EVAL_BOTH ? 2 : 1);
	ev->dim = rdps_model_entity_dim(p->model);
	ev->qdim = rdps_kge_query_dim(p->model);
	ret = -EINVAL;
	if (ev->nq >= UINT32_MAX)
		goto err_destroy;
	ret = -ENOMEM;
	ev->test = malloc((p->n_test ? p->n_test : 1) * sizeof(*ev->test));
	ev->q = malloc((ev->nq ? ev->nq : 1) * ev->qdim * sizeof(float));
	ev->pos = malloc((ev->nq ? ev->nq : 1) * sizeof(float));
	ev->gt = calloc(ev->nq ? ev->nq : 1, sizeof(uint32_t));
	ev->eq = calloc(ev->nq ? ev->nq : 1, sizeof(uint32_t));
	ev->cur = malloc((ev->nq ? ev->nq : 1) * sizeof(size_t));
	if (!ev->test || !ev->q || !ev->pos || !ev->gt || !ev->eq || !ev->cur)
		goto err_destroy;
	if (p->n_test)
		memcpy(ev->test, p->test, p->n_test * sizeof(*ev->test));
	ret = build_skip_lists(ev, p->filter);
	if (!ret)
		ret = build_relation_order(ev);
	if (ret)
		goto err_destroy;
	*out = ev;
	return 0;
err_destroy:
	rdps_eval_destroy(ev);
	return ret;
}

size_t rdps_eval_num_queries(const struct rdps_eval *ev)
{
	return ev->nq;
}

int rdps_eval_set_rows(struct rdps_eval *ev, const float *head_rows,
		       const float *rel_rows, const float *tail_rows)
{
	uint32_t rd;
	float *tmp;

	if (!ev || (ev->n_test && (!head_rows || !rel_rows || !tail_rows)))
		return -EINVAL;
	rd = rdps_model_relation_dim(ev->m);
	tmp = malloc((rdps_kge_query_tmp(ev->m) + ev->qdim + 1) * sizeof(float));
	if (!tmp)
		return -ENOMEM;
	for (uint32_t s = 0; s < ev->n_slots; s++)
		memcpy(ev->ctx + (size_t)s * ev->ctx_size, rel_rows + (size_t)ev->slot_test[s] * rd,
		       ev->ctx_size * sizeof(float));
	for (size_t k = 0; k < ev->nq; k++) {
		int hs;
		size_t i, q = query_at(ev, k);
		const float *x, *y;
		float *qv = ev->q + k * ev->qdim;

		query_of(ev, q, &hs, &i);
		x = (hs ? tail_rows : head_rows) + i * ev->dim;
		y = (hs ? head_rows : tail_rows) + i * ev->dim;
		rdps_kge_query(ev->m, hs, x, rel_rows + i * rd, qv, tmp);
		if (ev->ctx_size) {
			float *yq = tmp + rdps_kge_query_tmp(ev->m);
			rdps_kge_cand_rows(ev->m, ev->ctx + (size_t)ev->slot[k] * ev->ctx_size,
					   y, 1, yq);
			y = yq;
		}
		/* the true entity through the candidates' own kernel */
		rdps_kge_score_tile(ev->m, qv, 1, y, 1, &ev->pos[q]);
	}
	free(tmp);
	memset(ev->gt, 0, ev->nq * sizeof(uint32_t));
	memset(ev->eq, 0, ev->nq * sizeof(uint32_t));
	ev->rows_set = true;
	return 0;
}


struct eval_job {
	struct rdps_eval *ev;
	uint32_t first_id;  /* id of rows[0] */
	const float *rows;  /* count x dim */
	uint32_t count;
	size_t q0, q1;      /* ranks of this worker's queries */
	float *cand;        /* ctx_size: EVAL_CAND_BLOCK x qdim candidates */
};

/* The end of the worker's ranks from g0 that share *cand: those of one
 * relation with ctx_size (candidates C0 .. C1 brought into its query space
 * in j->cand), else all of them (the rows as given). */
static size_t rank_group(struct eval_job *j, size_t g0, uint32_t C0, uint32_t C1,
			 const float **cand)
{
	struct rdps_eval *ev = j->ev;
	size_t g1 = j->q1;

	*cand = j->rows + (size_t)C0 * ev->dim;
	if (ev->ctx_size) {
		for (g1 = g0 + 1; g1 < j->q1 && ev->slot[g1] == ev->slot[g0]; g1++)
			;
		rdps_kge_cand_rows(ev->m, ev->ctx + (size_t)ev->slot[g0] * ev->ctx_size, *cand,
				   C1 - C0, j->cand);
		*cand = j->cand;
	}
	return g1;
}

static void *eval_worker(void *arg)
{
	struct eval_job *j = arg;
	struct rdps_eval *ev = j->ev;
	float out[EVAL_QTILE * EVAL_CTILE];

	for (size_t k = j->q0; k < j->q1; k++) {
		/* first skip id >= first_id */
		size_t q = query_at(ev, k), lo = ev->ex_off[q], hi = ev->ex_off[q + 1];
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (ev->ex[mid] < j->first_id)
				lo = mid + 1;
			else
				hi = mid;
		}
		ev->cur[q] = lo;
	}
	for (uint32_t C0 = 0; C0 < j->count; C0 += EVAL_CAND_BLOCK) {
		uint32_t C1 = j->count - C0 < EVAL_CAND_BLOCK ? j->count : C0 + EVAL_CAND_BLOCK;
		const float *cand = NULL;
		for (size_t qa = j->q0, g1 = j->q0, nq; qa < j->q1; qa += nq) {
			if (qa == g1)
				g1 = rank_group(j, qa, C0, C1, &cand);
			nq = g1 - qa < EVAL_QTILE ? g1 - qa : EVAL_QTILE;
			for (uint32_t c0 = C0; c0 < C1; c0 += EVAL_CTILE) {
				uint32_t nc = C1 - c0 < EVAL_CTILE ? C1 - c0 : EVAL_CTILE;
				rdps_kge_score_tile(ev->m, ev->q + qa * ev->qdim, (uint32_t)nq,
						    cand + (size_t)(c0 - C0) * ev->qdim, nc, out);
				for (uint32_t a = 0; a < nq; a++) {
					size_t q = query_at(ev, qa + a), cur = ev->cur[q];
					size_t end = ev->ex_off[q + 1];
					float p = ev->pos[q];
					uint32_t gt = 0, eq = 0, id = j->first_id + c0;
					const float *o = out + (size_t)a * nc;
					for (uint32_t b = 0; b < nc; b++, id++) {
						if (cur < end && ev->ex[cur] == id) {
							cur++;
							continue;
						}
						gt += o[b] > p;
						eq += o[b] == p;
					}
					ev->cur[q] = cur;
					ev->gt[q] += gt;
					ev->eq[q] += eq;
				}
			}
		}
	}
	return NULL;
}

int rdps_eval_add_candidates(struct rdps_eval *ev, uint32_t first_id,
			     const float *rows, uint32_t count)
{
	struct eval_job jobs[64];
	pthread_t tids[64];
	unsigned nt, started = 0;

	if (!ev || !ev->rows_set || (count && !rows) || first_id > ev->n_entities ||
	    count > ev->n_entities - first_id)
		return -EINVAL;
	if (count == 0 || ev->nq == 0)
		return 0;
	nt = ev->threads < 64 ? ev->threads : 64;
	if (nt > ev->nq)
		nt = (unsigned)ev->nq;
	for (unsigned t = 0; t < nt; t++)
		jobs[t] = (struct eval_job){ .ev = ev, .first_id = first_id,
					     .rows = rows, .count = count,
					     .q0 = ev->nq * t / nt,
					     .q1 = ev->nq * (t + 1) / nt,
					     .cand = ev->cand ? ev->cand + (size_t)t *
								       EVAL_CAND_BLOCK * ev->qdim
							      : NULL };
	for (unsigned t = 1; t < nt; t++) {
		if (pthread_create(&tids[t], NULL, eval_worker, &jobs[t])) {
			/* no thread: run the rest here, results stay complete */
			for (unsigned u = t; u < nt; u++)
				eval_worker(&jobs[u]);
			break;
		}
		started = t;
	}
	eval_worker(&jobs[0]);
	for (unsigned t = 1; t <= started; t++)
		pthread_join(tids[t], NULL);
	return 0;
}

int rdps_eval_add_sampled(struct rdps_eval *ev, size_t q0, size_t nq, const uint32_t *ids,
			  const float *rows, uint32_t count)
{
	float out[EVAL_QTILE * EVAL_CTILE];

	if (!ev || !ev->rows_set || q0 > ev->nq || nq > ev->nq - q0 || (count && (!ids || !rows)))
		return -EINVAL;
	for (uint32_t b = 0; b < count; b++)
		if (ids[b] >= ev->n_entities || (b && ids[b] <= ids[b - 1]))
			return -EINVAL;
	for (size_t qa = q0; qa < q0 + nq; qa += EVAL_QTILE) {
		uint32_t n = (uint32_t)(q0 + nq - qa < EVAL_QTILE ? q0 + nq - qa : EVAL_QTILE);

		for (uint32_t c0 = 0; c0 < count; c0 += EVAL_CTILE) {
			uint32_t nc = count - c0 < EVAL_CTILE ? count - c0 : EVAL_CTILE;

			rdps_kge_score_tile(ev->m, ev->q + qa * ev->dim, n,
					    rows + (size_t)c0 * ev->dim, nc, out);
			for (uint32_t a = 0; a < n; a++) {
				size_t q = qa + a, lo = ev->ex_off[q], hi = ev->ex_off[q + 1];
				float p = ev->pos[q];

				/* the skip list and the ids ascend: merge them */
				for (uint32_t k = 0; k < nc; k++) {
					uint32_t id = ids[c0 + k];

					while (lo < hi && ev->ex[lo] < id)
						lo++;
					if (lo < hi && ev->ex[lo] == id)
						continue;
					ev->gt[q] += out[(size_t)a * nc + k] > p;
					ev->eq[q] += out[(size_t)a * nc + k] == p;
				}
			}
		}
	}
	return 0;
}

void rdps_eval_get_counts(const struct rdps_eval *ev, uint32_t *gt, uint32_t *eq)
{
	memcpy(gt, ev->gt, ev->nq * sizeof(uint32_t));
	memcpy(eq, ev->eq, ev->nq * sizeof(uint32_t));
}

int rdps_eval_add_counts(struct rdps_eval *ev, const uint32_t *gt,
			 const uint32_t *eq)
{
	if (!ev || (ev->nq && (!gt || !eq)))
		return -EINVAL;
	for (size_t q = 0; q < ev->nq; q++) {
		ev->gt[q] += gt[q];
		ev->eq[q] += eq[q];
	}
	return 0;
}

/* Rank of query q from its current counts, under the tie policy. */
static inline double query_rank(const struct rdps_eval *ev, size_t q)
{
	double rank = 1.0 + ev->gt[q];

	if (ev->ties == RDPS_EVAL_TIES_PESSIMISTIC)
		rank += ev->eq[q];
	else if (ev->ties == RDPS_EVAL_TIES_MEAN)
		rank += ev->eq[q] / 2.0;
	return rank;
}

static inline void sums_add_rank(struct rdps_eval_sums *s, double rank)
{
	s->sum_rr += 1.0 / rank;
	s->sum_rank += rank;
	s->hits1 += rank <= 1.0;
	s->hits3 += rank <= 3.0;
	s->hits10 += rank <= 10.0;
	s->count++;
}

void rdps_eval_get_sums(const struct rdps_eval *ev, struct rdps_eval_sums *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t q = 0; q < ev->nq; q++)
		sums_add_rank(s, query_rank(ev, q));
}

int rdps_eval_get_relation_sums(const struct rdps_eval *ev, unsigned sides,
				uint32_t num_relations, struct rdps_eval_sums *s)
{
	if (!ev || (num_relations && !s) || (sides & ~(unsigned)RDPS_EVAL_BOTH) ||
	    num_relations < ev->rel_bound)
		return -EINVAL;
	if (!sides)
		sides = RDPS_EVAL_BOTH;
	if (num_relations)
		memset(s, 0, num_relations * sizeof(*s));
	for (size_t q = 0; q < ev->nq; q++) {
		int hs;
		size_t i;

		query_of(ev, q, &hs, &i);
		if (sides & (hs ? RDPS_EVAL_HEAD : RDPS_EVAL_TAIL))
			sums_add_rank(&s[ev->test[i].r], query_rank(ev, q));
	}
	return 0;
}

void rdps_eval_sums_add(struct rdps_eval_sums *dst, const struct rdps_eval_sums *src)
{
	dst->sum_rr += src->sum_rr;
	dst->sum_rank += src->sum_rank;
	dst->hits1 += src->hits1;
	dst->hits3 += src->hits3;
	dst->hits10 += src->hits10;
	dst->count += src->count;
}

void rdps_eval_metrics_from_sums(const struct rdps_eval_sums *s,
				 struct rdps_eval_metrics *m)
{
	double n = s->count ? (double)s->count : 1.0;

	m->mrr = s->sum_rr / n;
	m->mr = s->sum_rank / n;
	m->hits1 = s->hits1 / n;
	m->hits3 = s->hits3 / n;
	m->hits10 = s->hits10 / n;
	m->count = s->count;
}

void rdps_eval_finish(const struct rdps_eval *ev, struct rdps_eval_metrics *m)
{
	struct rdps_eval_sums s;

	rdps_eval_get_sums(ev, &s);
	rdps_eval_metrics_from_sums(&s, m);
}

/* Python's repr() of a float: the shortest digits that read back to v,
 * fixed notation for decimal exponents -4 .. 15, else d.ddde+XX. */
static void py_repr(double v, char *buf, size_t len)
{
	char tmp[40];
	int prec, exp10;

	if (isnan(v)) {
		snprintf(buf, len, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, len, v > 0 ? "inf" : "-inf");
		return;
	}
	if (v == 0) {
		snprintf(buf, len, signbit(v) ? "-0.0" : "0.0");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	exp10 = atoi(strchr(tmp, 'e') + 1);
	if (exp10 >= -4 && exp10 < 16) {
		int decimals = prec - 1 - exp10;
		if (decimals > 0)
			snprintf(buf, len, "%.*f", decimals, v);
		else
			snprintf(buf, len, "%.0f.0", v);
	} else {
		char mant[24];
		size_t ml = (size_t)(strchr(tmp, 'e') - tmp);
		if (ml >= sizeof(mant))
			ml = sizeof(mant) - 1;
		memcpy(mant, tmp, ml);
		mant[ml] = '\0';
		snprintf(buf, len, "%.23se%c%02d", mant, exp10 < 0 ? '-' : '+',
			 (exp10 < 0 ? -exp10 : exp10) % 1000);
	}
}

int rdps_eval_format_number(char *buf, size_t len, double v)
{
	char tmp[48];

	py_repr(v, tmp, sizeof(tmp));
	return snprintf(buf, len, "%s", tmp);
}

int rdps_eval_format(char *buf, size_t len, const char *mode,
		     const struct rdps_eval_metrics *m)
{
	char v[5][48];

	py_repr(m->mrr, v[0], sizeof(v[0]));
	py_repr(m->mr, v[1], sizeof(v[1]));
	py_repr(m->hits1, v[2], sizeof(v[2]));
	py_repr(m->hits3, v[3], sizeof(v[3]));
	py_repr(m->hits10, v[4], sizeof(v[4]));
	return snprintf(buf, len,
			"%s average MRR : %s\n%s average MR : %s\n"
			"%s average HITS@1 : %s\n%s average HITS@3 : %s\n"
			"%s average HITS@10 : %s\n",
			mode, v[0], mode, v[1], mode, v[2], mode, v[3], mode, v[4]);
}
