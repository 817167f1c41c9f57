// SPDX-License-Identifier: MIT
/*
 * Neighbour sampling over the CSR tables of a graph (graph_sample.h): the
 * choice both ways share, and the server's side of RDPS_REQ_SAMPLE.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_sample.h"
#include "rdps/transport.h"

/* splitmix64: a full-period stream from any state, cheap to seed per node. */
static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, bound) (Lemire's multiply-shift; its bias, bound / 2^64,
 * is far below anything a test or a model could see). */
static inline uint64_t below(uint64_t *s, uint64_t bound)
{
	return (uint64_t)(((unsigned __int128)splitmix(s) * bound) >> 64);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Floyd's membership test: a scan for small fanouts, else an open-address
 * set of positions (at most half full). */
#define SET_BITS 11
_Static_assert((1u << SET_BITS) >= 2 * RDPS_SAMPLE_MAX_FANOUT, "set size");

static inline bool set_add(uint64_t *set, uint64_t v)
{
	uint32_t mask = (1u << SET_BITS) - 1;
	uint32_t h = (uint32_t)((v * 0x9e3779b97f4a7c15ull) >> (64 - SET_BITS));

	for (;; h = (h + 1) & mask) {
		if (set[h] == UINT64_MAX) {
			set[h] = v;
			return true;
		}
		if (set[h] == v)
			return false;
	}
}

uint32_t rdps_sample_choose(uint64_t seed, uint64_t node, uint64_t deg, uint32_t fanout,
			    uint64_t *pos)
{
	uint64_t s = seed ^ (node * 0xd1b54a32d192ed03ull);
	uint32_t k = 0;

	if (deg <= fanout) {
		for (uint64_t j = 0; j < deg; j++)
			pos[j] = j;
		return (uint32_t)deg;
	}
	splitmix(&s); /* decorrelate nearby nodes' streams */
	/* Floyd: for j = deg-fanout .. deg-1 draw t in [0, j]; take t, or j
	 * if t is taken already. Each fanout-subset comes out with probability
	 * 1 / C(deg, fanout). */
	if (fanout <= 64) {
		for (uint64_t j = deg - fanout; j < deg; j++) {
			uint64_t t = below(&s, j + 1);
			bool seen = false;

			for (uint32_t i = 0; i < k; i++)
				seen |= pos[i] == t;
			pos[k++] = seen ? j : t;
		}
		/* Insertion sort: at most 64 entries. */
		for (uint32_t i = 1; i < k; i++) {
			uint64_t v = pos[i];
			uint32_t m = i;

			for (; m && pos[m - 1] > v; m--)
				pos[m] = pos[m - 1];
			pos[m] = v;
		}
		return k;
	}
	{
		uint64_t set[1u << SET_BITS];

		memset(set, 0xff, sizeof(set));
		for (uint64_t j = deg - fanout; j < deg; j++) {
			uint64_t t = below(&s, j + 1);

			if (!set_add(set, t)) {
				set_add(set, j); /* j is new: every t so far was < j */
				t = j;
			}
			pos[k++] = t;
		}
	}
	qsort(pos, k, sizeof(*pos), cmp_u64);
	return k;
}

static inline const int64_t *row_of(const struct rdps_shard_info *t, uint64_t id)
{
	return (const int64_t *)((const char *)t->base + (id - t->lo) * t->stride +
				 RDPS_ROW_DATA_OFFSET);
}

#define OUT_STREAM 0x8cb92ba72f3d8dd7ull /* out-slots draw from another stream */

void rdps_sample_scratch_free(struct rdps_sample_scratch *s)
{
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

static void *scratch(struct rdps_sample_scratch *s, size_t bytes)
{
	if (bytes > s->cap) {
		void *b = realloc(s->buf, bytes);

		if (!b)
			return NULL;
		s->buf = b;
		s->cap = bytes;
	}
	return s->buf;
}

/* Ranks among the deg - nexcl kept positions (increasing) -> positions. */
static void skip_excluded(uint64_t *pos, uint32_t k, const uint64_t *excl, uint64_t nexcl)
{
	uint64_t j = 0;

	for (uint32_t i = 0; i < k; i++) {
		uint64_t r = pos[i], p = r + j;

		while (j < nexcl && excl[j] <= p)
			p = r + ++j;
		pos[i] = p;
	}
}

/* A uniform in (0, 1] per (stream, position). */
static inline double unit(uint64_t s, uint64_t i)
{
	uint64_t x = s ^ (i * 0x9e3779b97f4a7c15ull);

	return (double)((splitmix(&x) >> 11) + 1) * 0x1.0p-53;
}

struct keyed {
	double key;
	uint64_t pos;
};

static int cmp_key_desc(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

int rdps_sample_pick(uint64_t seed, uint64_t slot, bool out, uint64_t deg, uint32_t fanout,
		     bool replace, const double *w, const uint64_t *excl, uint64_t nexcl,
		     uint64_t *pos, struct rdps_sample_scratch *sc)
{
	uint64_t base = seed ^ (out ? OUT_STREAM : 0), s = base ^ (slot * 0xd1b54a32d192ed03ull);
	uint64_t kept = deg - nexcl;
	uint32_t k = 0;

	if (!w && !replace) {
		k = rdps_sample_choose(base, slot, kept, fanout, pos);
		skip_excluded(pos, k, excl, nexcl);
		return (int)k;
	}
	splitmix(&s);
	if (!w) {
		if (!kept)
			return 0;
		for (k = 0; k < fanout; k++)
			pos[k] = below(&s, kept);
		qsort(pos, k, sizeof(*pos), cmp_u64);
		skip_excluded(pos, k, excl, nexcl);
		return (int)k;
	}
	if (replace) {
		double *cum = scratch(sc, (deg + 1) * sizeof(double)), total = 0;
		uint64_t j = 0;

		if (!cum)
			return -ENOMEM;
		for (uint64_t i = 0; i < deg; i++) {
			bool gone = j < nexcl && excl[j] == i;

			j += gone;
			total += gone ? 0 : w[i];
			cum[i] = total;
		}
		if (!(total > 0))
			return 0;
		for (k = 0; k < fanout; k++) {
			double u = (double)(splitmix(&s) >> 11) * 0x1.0p-53 * total;
			uint64_t lo = 0, hi = deg - 1;

			/* the first position whose cumulative weight exceeds u */
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2;

				if (cum[mid] > u)
					hi = mid;
				else
					lo = mid + 1;
			}
			pos[k] = lo;
		}
		qsort(pos, k, sizeof(*pos), cmp_u64);
		return (int)k;
	}
	{
		struct keyed *ks = scratch(sc, (deg + 1) * sizeof(*ks));
		uint64_t n = 0, j = 0;

		if (!ks)
			return -ENOMEM;
		for (uint64_t i = 0; i < deg; i++) {
			bool gone = j < nexcl && excl[j] == i;

			j += gone;
			if (gone || !(w[i] > 0))
				continue;
			/* log(u) / w orders as u^(1/w) does */
			ks[n++] = (struct keyed){ .key = log(unit(s, i)) / w[i], .pos = i };
		}
		qsort(ks, n, sizeof(*ks), cmp_key_desc);
		for (k = 0; k < fanout && k < n; k++)
			pos[k] = ks[k].pos;
		qsort(pos, k, sizeof(*pos), cmp_u64);
		return (int)k;
	}
}

uint32_t rdps_sample_req_tables(const void *req, uint32_t *ids, uint32_t max)
{
	struct rdps_sample_req r;
	uint32_t n = 0;

	memcpy(&r, req, sizeof(r));
	if (max < 2)
		return 0;
	ids[n++] = r.indptr_table;
	ids[n++] = r.edges_table;
	for (uint32_t i = 0; i < r.num_groups; i++) {
		struct rdps_sample_group gr;
		bool seen = false;

		memcpy(&gr, (const char *)req + sizeof(r) + (size_t)i * sizeof(gr), sizeof(gr));
		if (gr.prob_table == RDPS_SAMPLE_NO_PROB)
			continue;
		for (uint32_t j = 0; j < n; j++)
			seen |= ids[j] == gr.prob_table;
		if (!seen && n < max)
			ids[n++] = gr.prob_table;
	}
	return n;
}

static const struct rdps_shard_info *tab_of(const struct rdps_shard_info *tabs, uint32_t ntabs,
					    uint32_t id)
{
	for (uint32_t i = 0; i < ntabs; i++)
		if (tabs[i].table_id == id)
			return &tabs[i];
	return NULL;
}

static const uint64_t *lower_bound(const uint64_t *a, uint64_t n, uint64_t v)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return a + lo;
}

struct serve_ctx {
	struct rdps_sample_req r;
	const struct rdps_shard_info *ptr, *edges;
	const uint64_t *excl;
	struct rdps_sample_scratch sc_excl, sc_w, sc_pick;
	char *err;
	size_t errlen;
};

/* The excluded positions of a slot [begin, end) into *out (scratch). */
static int slot_exclusions(struct serve_ctx *x, uint64_t begin, uint64_t end, bool out,
			   const uint64_t **res, uint64_t *n)
{
	uint64_t *p;

	*n = 0;
	*res = NULL;
	if (!x->r.num_exclude)
		return 0;
	if (!out) {
		const uint64_t *a = lower_bound(x->excl, x->r.num_exclude, begin);
		const uint64_t *b = lower_bound(x->excl, x->r.num_exclude, end);

		p = scratch(&x->sc_excl, (size_t)(b - a + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		for (const uint64_t *e = a; e < b; e++)
			if (e == a || e[-1] != *e)
				p[(*n)++] = *e - begin;
	} else {
		p = scratch(&x->sc_excl, (end - begin + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		for (uint64_t q = begin; q < end; q++) {
			uint64_t eid = (uint64_t)row_of(x->edges, q)[1];
			const uint64_t *f = lower_bound(x->excl, x->r.num_exclude, eid);

			if (f < x->excl + x->r.num_exclude && *f == eid)
				p[(*n)++] = q - begin;
		}
	}
	*res = p;
	return 0;
}

/* The weights of in-edges [begin, end) from the group's prob table. */
static int slot_weights(struct serve_ctx *x, const struct rdps_shard_info *prob,
			const struct rdps_sample_group *gr, uint64_t begin, uint64_t end,
			const double **res)
{
	double *w = scratch(&x->sc_w, (end - begin + 1) * sizeof(double));

	if (!w)
		return -ENOMEM;
	for (uint64_t e = begin; e < end; e++) {
		uint64_t row = e - (uint64_t)gr->prob_shift;
		const char *p;
		double v;

		if (row < prob->lo || row >= prob->hi) {
			snprintf(x->err, x->errlen, "edge %llu: its weight (row %llu of '%s') is "
				 "not on this server (rows [%llu, %llu))", (unsigned long long)e,
				 (unsigned long long)row, prob->name,
				 (unsigned long long)prob->lo, (unsigned long long)prob->hi);
			return -EIO;
		}
		p = (const char *)prob->base + (row - prob->lo) * prob->stride +
		    RDPS_ROW_DATA_OFFSET;
		if (gr->prob_dtype == RDPS_DTYPE_F32) {
			float f;

			memcpy(&f, p, sizeof(f));
			v = f;
		} else {
			memcpy(&v, p, sizeof(v));
		}
		if (!(v >= 0) || v > 1e300) {
			snprintf(x->err, x->errlen, "edge %llu: weight %g in '%s' is not a finite "
				 "non-negative number", (unsigned long long)e, v, prob->name);
			return -EINVAL;
		}
		w[e - begin] = v;
	}
	*res = w;
	return 0;
}

int rdps_sample_serve(const struct rdps_shard_info *tabs, uint32_t ntabs, const void *req,
		      size_t req_len, void *reply, size_t reply_cap, size_t *reply_len, char *err,
		      size_t errlen)
{
	struct serve_ctx x = { .err = err, .errlen = errlen };
	const struct rdps_sample_group *groups;
	const uint64_t *slots;
	uint32_t *count = reply, at = 0;
	bool out;
	size_t head, need;
	char *o;
	uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];
	int ret = 0;

	if (req_len < sizeof(x.r))
		return -EPROTO;
	memcpy(&x.r, req, sizeof(x.r));
	out = x.r.flags & RDPS_SAMPLE_F_OUT;
	groups = (const struct rdps_sample_group *)((const char *)req + sizeof(x.r));
	slots = (const uint64_t *)(groups + x.r.num_groups);
	x.excl = slots + x.r.n;
	x.ptr = tab_of(tabs, ntabs, x.r.indptr_table);
	x.edges = tab_of(tabs, ntabs, x.r.edges_table);
	if (!x.ptr || !x.edges || x.ptr->dim != 4 || x.edges->dim != (out ? 6u : 8u) ||
	    strcmp(x.ptr->name, out ? "graph:outptr" : "graph:indptr") ||
	    strcmp(x.edges->name, out ? "graph:outedges" : "graph:edges")) {
		snprintf(err, errlen, "tables %u and %u are not a graph's %s slots and edges",
			 x.r.indptr_table, x.r.edges_table, out ? "out-" : "in-");
		return -EINVAL;
	}
	for (uint64_t i = 1; i < x.r.num_exclude; i++)
		if (x.excl[i] < x.excl[i - 1]) {
			snprintf(err, errlen, "excluded edge ids are not in increasing order (%llu "
				 "after %llu)", (unsigned long long)x.excl[i],
				 (unsigned long long)x.excl[i - 1]);
			return -EINVAL;
		}
	need = rdps_sample_reply_bound(x.r.n, x.r.fanout);
	if (reply_cap < need)
		return -EINVAL;
	head = ((size_t)x.r.n * 4 + 7) & ~(size_t)7;
	memset((char *)reply + (size_t)x.r.n * 4, 0, head - (size_t)x.r.n * 4);
	o = (char *)reply + head;
	for (uint32_t g = 0; g < x.r.num_groups && !ret; g++) {
		struct rdps_sample_group gr;
		const struct rdps_shard_info *prob = NULL;

		memcpy(&gr, &groups[g], sizeof(gr));
		if (gr.prob_table != RDPS_SAMPLE_NO_PROB) {
			prob = tab_of(tabs, ntabs, gr.prob_table);
			if (!prob || strncmp(prob->name, "edata:", 6) ||
			    prob->dim != (gr.prob_dtype == RDPS_DTYPE_F32 ? 1u : 2u)) {
				snprintf(err, errlen, "group %u: table %u is not an edge data of one "
					 "%s per edge", g, gr.prob_table,
					 gr.prob_dtype == RDPS_DTYPE_F32 ? "float32" : "float64");
				ret = -EINVAL;
				break;
			}
		}
		for (uint32_t i = 0; i < gr.count; i++, at++) {
			uint64_t slot = slots[at], begin, end, nexcl;
			const uint64_t *excl;
			const double *w = NULL;
			const int64_t *p;
			int k;

			if (slot < x.ptr->lo || slot >= x.ptr->hi) {
				snprintf(err, errlen, "slot %u: %llu is not on this server (it holds "
					 "[%llu, %llu) of '%s')", at, (unsigned long long)slot,
					 (unsigned long long)x.ptr->lo,
					 (unsigned long long)x.ptr->hi, x.ptr->name);
				ret = -ERANGE;
				break;
			}
			p = row_of(x.ptr, slot);
			begin = (uint64_t)p[0];
			end = (uint64_t)p[1];
			if (begin > end || begin < x.edges->lo || end > x.edges->hi) {
				snprintf(err, errlen, "slot %llu: its edges [%llu, %llu) are not all "
					 "on this server (edges [%llu, %llu)): a corrupt graph part",
					 (unsigned long long)slot, (unsigned long long)begin,
					 (unsigned long long)end, (unsigned long long)x.edges->lo,
					 (unsigned long long)x.edges->hi);
				ret = -EIO;
				break;
			}
			if ((ret = slot_exclusions(&x, begin, end, out, &excl, &nexcl)) ||
			    (prob && (ret = slot_weights(&x, prob, &gr, begin, end, &w))))
				break;
			k = rdps_sample_pick(x.r.seed, slot, out, end - begin, gr.fanout,
					     x.r.flags & RDPS_SAMPLE_F_REPLACE, w, excl, nexcl, pos,
					     &x.sc_pick);
			if (k < 0) {
				ret = k;
				break;
			}
			count[at] = (uint32_t)k;
			for (int j = 0; j < k; j++) {
				const int64_t *e = row_of(x.edges, begin + pos[j]);
				int64_t v[3] = { e[0], out ? e[1] : (int64_t)(begin + pos[j]),
						 e[2] };

				memcpy(o, v, sizeof(v));
				o += sizeof(v);
			}
		}
	}
	rdps_sample_scratch_free(&x.sc_excl);
	rdps_sample_scratch_free(&x.sc_w);
	rdps_sample_scratch_free(&x.sc_pick);
	if (ret)
		return ret;
	*reply_len = (size_t)(o - (char *)reply);
	return 0;
}
