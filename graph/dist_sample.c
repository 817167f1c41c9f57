// SPDX-License-Identifier: MIT
/*
 * DistGraph's neighbour sampling (rdps/graph.h): a call is items, one per
 * (seed, etype) slot with a fanout. Items with a choice go to the servers
 * holding their slots (RPC: every server at once, grouped by etype) or are
 * picked here from the rows read (READ: the slots' rows, then the picked
 * edges; RDMA READs where the transport has them). Fanout -1 (all) and
 * weighted out-edges are read either way. Both ways pick with
 * rdps_sample_pick, so one seed gives one result.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dist_internal.h"
#include "kvstore/client_internal.h"
#include "rdps/common.h"

/* Excluded edges a request carries, at most (8 bytes each, within the
 * wire's 64 MiB frames with the slots). */
#define MAX_EXCLUDE (4u << 20)

struct call {
	const struct rdps_sample_spec *sp;
	const uint64_t *seeds;
	size_t n, m;          /* seeds, items */
	uint64_t nx;          /* distinct excluded edges (sorted, g->excl) */
	bool out;
	uint32_t cols;        /* of an edge row: 4 (in) or 3 (out) */
	const struct rdps_table_info *ptr, *edges;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int check_spec(struct rdps_graph *g, struct call *k)
{
	const struct rdps_sample_spec *sp = k->sp;
	int ret;

	if (!sp->fanouts)
		return rdps_client_fail(g->c, -EINVAL, "sample: no fanouts");
	if (sp->way != RDPS_SAMPLE_RPC && sp->way != RDPS_SAMPLE_READ)
		return rdps_client_fail(g->c, -EINVAL, "unknown sampling way %d", sp->way);
	if (k->n > UINT32_MAX)
		return rdps_client_fail(g->c, -EINVAL, "%zu seeds in one call", k->n);
	for (uint32_t e = 0; e < g->s.R; e++) {
		int32_t f = sp->fanouts[e];

		g->prob_id[e] = RDPS_SAMPLE_NO_PROB;
		if (f < -1 || f > (int32_t)RDPS_SAMPLE_MAX_FANOUT)
			return rdps_client_fail(g->c, -EINVAL, "fanout %d of etype '%s' (want -1 "
						"for all, 0 for none, or up to %u)", f,
						g->s.et[e].canonical, RDPS_SAMPLE_MAX_FANOUT);
		if (sp->prob && f) {
			const struct gs_type *t = &g->s.et[e];
			const struct gs_data *d = NULL;
			struct rdps_table_info info;

			for (uint32_t i = 0; i < t->ndata; i++)
				if (!strcmp(t->data[i].name, sp->prob))
					d = &t->data[i];
			if (!d || d->row_elems != 1 ||
			    (strcmp(d->dtype, "float32") && strcmp(d->dtype, "float64")))
				return rdps_client_fail(g->c, -EINVAL, "prob '%s': etype '%s' has no "
							"edge data of that name holding one float32 "
							"or float64 per edge", sp->prob,
							t->canonical);
			if ((ret = rdps_client_table(g->c, d->table, &info)))
				return rdps_client_fail(g->c, ret, "prob '%s' of etype '%s': the "
							"servers have no table '%s'", sp->prob,
							t->canonical, d->table);
			g->prob_id[e] = info.id;
			g->prob_dtype[e] = info.dtype;
		}
	}
	if ((ret = rdps_dg_check_nodes(g, k->seeds, k->n, "seed")))
		return ret;
	if ((ret = rdps_dg_grow(&g->excl, &g->excl_cap, sp->num_exclude, sizeof(uint64_t))))
		return ret;
	for (size_t i = 0; i < sp->num_exclude; i++) {
		if (sp->exclude[i] >= g->s.E)
			return rdps_client_fail(g->c, -ERANGE, "excluded edge %zu: id %llu is not in "
						"the graph (%llu edges)", i,
						(unsigned long long)sp->exclude[i],
						(unsigned long long)g->s.E);
		g->excl[i] = sp->exclude[i];
	}
	qsort(g->excl, sp->num_exclude, sizeof(uint64_t), cmp_u64);
	k->nx = 0;
	for (size_t i = 0; i < sp->num_exclude; i++)
		if (!k->nx || g->excl[k->nx - 1] != g->excl[i])
			g->excl[k->nx++] = g->excl[i];
	return 0;
}

/* The call's items, seed after seed, each seed's etypes in order. */
static int make_items(struct rdps_graph *g, struct call *k)
{
	size_t m = 0;
	int ret;

	for (size_t i = 0; i < k->n; i++) {
		uint32_t p, t = rdps_gschema_node_type(&g->s, k->seeds[i], &p);

		m += k->out ? g->s.nt[t].nout : g->s.nt[t].nin;
	}
	if ((ret = rdps_dg_grow(&g->items, &g->items_cap, m, sizeof(struct item))))
		return ret;
	k->m = 0;
	for (size_t i = 0; i < k->n; i++) {
		uint64_t v = k->seeds[i];
		uint32_t p, t = rdps_gschema_node_type(&g->s, v, &p);
		const struct gs_type *nt = &g->s.nt[t];
		uint32_t per = k->out ? nt->nout : nt->nin;
		const uint32_t *list = k->out ? nt->out : nt->in;
		uint64_t base = (k->out ? nt->out_base[p] : nt->in_base[p]) + (v - nt->lo[p]) * per;

		for (uint32_t j = 0; j < per; j++) {
			uint32_t e = list[j];
			int32_t f = k->sp->fanouts[e];
			struct item *it = &g->items[k->m];

			if (!f)
				continue;
			*it = (struct item){ .slot = base + j, .seed = (uint32_t)i, .etype = e,
					     .server = p, .cap = f > 0 ? (uint32_t)f : 0 };
			it->how = f < 0 || k->sp->way == RDPS_SAMPLE_READ ||
					  (k->out && k->sp->prob) ? ITEM_READ : ITEM_RPC;
			it->full = it->how == ITEM_READ &&
				   (f < 0 || (k->out && (k->nx || k->sp->prob)));
			k->m++;
		}
	}
	return 0;
}

/* ---- the read way ---- */

/* Sorted excluded positions of an in-slot [begin, end) into pos. */
static uint64_t in_exclusions(const struct rdps_graph *g, const struct call *k, uint64_t begin,
			      uint64_t end, uint64_t *pos)
{
	uint64_t lo = 0, hi = k->nx, n = 0;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (g->excl[mid] < begin)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < k->nx && g->excl[lo] < end; lo++)
		pos[n++] = g->excl[lo] - begin;
	return n;
}

static bool excluded(const struct rdps_graph *g, const struct call *k, uint64_t eid)
{
	const uint64_t *f = bsearch(&eid, g->excl, k->nx, sizeof(uint64_t), cmp_u64);

	return f != NULL;
}

/* The slots' offsets; caps of the read items. */
static int read_slots(struct rdps_graph *g, struct call *k)
{
	size_t r = 0;
	int ret;

	if ((ret = rdps_dg_grow(&g->ids, &g->ids_cap, k->m, sizeof(uint64_t))))
		return ret;
	for (size_t i = 0; i < k->m; i++)
		if (g->items[i].how == ITEM_READ)
			g->ids[r++] = g->items[i].slot;
	if ((ret = rdps_dg_read_rows(g, k->ptr, g->ids, r, 2)))
		return ret;
	r = 0;
	for (size_t i = 0; i < k->m; i++) {
		struct item *it = &g->items[i];
		const struct gs_type *et = &g->s.et[it->etype];
		uint64_t lo = k->out ? g->s.out_edge_ranges[it->server] : et->lo[it->server];
		uint64_t hi = k->out ? g->s.out_edge_ranges[it->server + 1]
				     : et->lo[it->server] + et->cnt[it->server];
		int64_t b, e;

		if (it->how != ITEM_READ)
			continue;
		b = g->rows[2 * r];
		e = g->rows[2 * r + 1];
		r++;
		if (b < (int64_t)lo || e < b || e > (int64_t)hi)
			return rdps_client_fail(g->c, -EIO, "node %llu, etype '%s': slot %llu's "
						"edges [%lld, %lld) read from '%s' are not its "
						"part's [%llu, %llu)",
						(unsigned long long)k->seeds[it->seed],
						et->canonical, (unsigned long long)it->slot,
						(long long)b, (long long)e, k->ptr->name,
						(unsigned long long)lo, (unsigned long long)hi);
		it->begin = (uint64_t)b;
		it->end = (uint64_t)e;
		if (it->full || k->sp->fanouts[it->etype] < 0)
			it->cap = (uint32_t)(e - b);
		else if (!k->sp->replace && (uint64_t)(e - b) < it->cap)
			it->cap = (uint32_t)(e - b);
		if ((uint64_t)(e - b) > UINT32_MAX)
			return rdps_client_fail(g->c, -EINVAL, "node %llu has %lld edges of etype "
						"'%s' in one slot", (unsigned long long)
						k->seeds[it->seed], (long long)(e - b),
						et->canonical);
	}
	return 0;
}

/* Every row of the full items' slots into g->full. */
static int read_full(struct rdps_graph *g, struct call *k)
{
	size_t r = 0;
	int ret;

	for (size_t i = 0; i < k->m; i++) {
		struct item *it = &g->items[i];

		if (it->how == ITEM_READ && it->full) {
			it->full_at = r;
			r += it->end - it->begin;
		}
	}
	if ((ret = rdps_dg_grow(&g->ids, &g->ids_cap, r, sizeof(uint64_t))))
		return ret;
	r = 0;
	for (size_t i = 0; i < k->m; i++) {
		struct item *it = &g->items[i];

		if (it->how == ITEM_READ && it->full)
			for (uint64_t q = it->begin; q < it->end; q++)
				g->ids[r++] = q;
	}
	if ((ret = rdps_dg_read_rows(g, k->edges, g->ids, r, k->cols)))
		return ret;
	if ((ret = rdps_dg_grow(&g->full, &g->full_cap, r * k->cols, sizeof(int64_t))))
		return ret;
	memcpy(g->full, g->rows, r * k->cols * sizeof(int64_t));
	return 0;
}

/* An edge's row in its etype's data (per-etype id). */
static uint64_t per_etype(const struct rdps_graph *g, uint32_t e, uint64_t eid)
{
	uint32_t p;

	rdps_gschema_edge_type(&g->s, eid, &p);
	return eid - g->s.et[e].lo[p] + g->s.et[e].cum[p];
}

/* The weights of the read items' candidate edges into g->w (item after
 * item, its positions in order). */
static int read_weights(struct rdps_graph *g, struct call *k)
{
	size_t r = 0, at;
	int ret;

	for (size_t i = 0; i < k->m; i++)
		if (g->items[i].how == ITEM_READ)
			r += g->items[i].end - g->items[i].begin;
	if ((ret = rdps_dg_grow(&g->w, &g->w_cap, r, sizeof(double))) ||
	    (ret = rdps_dg_grow(&g->ids, &g->ids_cap, r, sizeof(uint64_t))))
		return ret;
	/* one pull per etype's table, in item order */
	for (uint32_t e = 0; e < g->s.R; e++) {
		size_t c = 0;

		if (g->prob_id[e] == RDPS_SAMPLE_NO_PROB)
			continue;
		for (size_t i = 0; i < k->m; i++) {
			const struct item *it = &g->items[i];

			if (it->how != ITEM_READ || it->etype != e)
				continue;
			for (uint64_t q = it->begin; q < it->end; q++) {
				uint64_t eid = k->out ? (uint64_t)g->full[(it->full_at + q -
									   it->begin) * 3 + 1]
						      : q;

				g->ids[c++] = per_etype(g, e, eid);
			}
		}
		if ((ret = rdps_dg_grow(&g->rows, &g->rows_cap, c, sizeof(int64_t))))
			return ret;
		if (c && (ret = rdps_client_get(g->c, g->prob_id[e], g->ids, c, g->rows)))
			return ret;
		c = 0;
		at = 0;
		for (size_t i = 0; i < k->m; i++) {
			const struct item *it = &g->items[i];

			if (it->how != ITEM_READ)
				continue;
			for (uint64_t q = it->begin; q < it->end; q++, at++) {
				double v;

				if (it->etype != e)
					continue;
				if (g->prob_dtype[e] == RDPS_DTYPE_F32) {
					float f;

					memcpy(&f, (const char *)g->rows + 4 * c, sizeof(f));
					v = f;
				} else {
					memcpy(&v, (const char *)g->rows + 8 * c, sizeof(v));
				}
				c++;
				if (!(v >= 0) || v > 1e300)
					return rdps_client_fail(g->c, -EINVAL, "prob '%s': edge "
								"%llu's weight %g is not a finite "
								"non-negative number", k->sp->prob,
								(unsigned long long)(k->out ? 0 : q),
								v);
				g->w[at] = v;
			}
		}
	}
	return 0;
}

/* Picks of the read items into g->posx (positions), then their rows into
 * the staging arrays. */
static int read_pick(struct rdps_graph *g, struct call *k)
{
	size_t wat = 0, r = 0, total = 0;
	uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];
	int ret;

	for (size_t i = 0; i < k->m; i++)
		if (g->items[i].how == ITEM_READ)
			total += g->items[i].end - g->items[i].begin;
	if ((ret = rdps_dg_grow(&g->posx, &g->posx_cap, total, sizeof(uint64_t))))
		return ret;
	for (size_t i = 0; i < k->m; i++) {
		struct item *it = &g->items[i];
		uint64_t deg = it->end - it->begin, nexcl = 0, *ex = g->posx + wat;
		const double *w = g->prob_id[it->etype] != RDPS_SAMPLE_NO_PROB ? g->w + wat : NULL;
		int got;

		if (it->how != ITEM_READ)
			continue;
		/* excluded positions, then the pick */
		if (k->nx && !k->out)
			nexcl = in_exclusions(g, k, it->begin, it->end, ex);
		else if (k->nx)
			for (uint64_t q = 0; q < deg; q++)
				if (excluded(g, k, (uint64_t)g->full[(it->full_at + q) * 3 + 1]))
					ex[nexcl++] = q;
		if (k->sp->fanouts[it->etype] < 0) {
			uint64_t j = 0;

			got = 0;
			for (uint64_t q = 0; q < deg; q++) {
				if (j < nexcl && ex[j] == q) {
					j++;
					continue;
				}
				g->st_other[it->at + (uint64_t)got++] = q; /* positions for now */
			}
		} else {
			got = rdps_sample_pick(k->sp->seed, it->slot, k->out, deg,
					       (uint32_t)k->sp->fanouts[it->etype], k->sp->replace,
					       w, ex, nexcl, pos, &g->sc);
			if (got < 0)
				return got;
			for (int j = 0; j < got; j++)
				g->st_other[it->at + (uint64_t)j] = pos[j];
		}
		it->got = (uint32_t)got;
		wat += deg;
		if (!it->full)
			r += (size_t)got;
	}
	/* rows of the picks not read whole */
	if ((ret = rdps_dg_grow(&g->ids, &g->ids_cap, r, sizeof(uint64_t))))
		return ret;
	r = 0;
	for (size_t i = 0; i < k->m; i++) {
		const struct item *it = &g->items[i];

		if (it->how == ITEM_READ && !it->full)
			for (uint32_t j = 0; j < it->got; j++)
				g->ids[r++] = it->begin + g->st_other[it->at + j];
	}
	if ((ret = rdps_dg_read_rows(g, k->edges, g->ids, r, k->cols)))
		return ret;
	r = 0;
	for (size_t i = 0; i < k->m; i++) {
		const struct item *it = &g->items[i];

		if (it->how != ITEM_READ)
			continue;
		for (uint32_t j = 0; j < it->got; j++) {
			uint64_t q = g->st_other[it->at + j];
			const int64_t *row = it->full ? g->full + (it->full_at + q) * k->cols
						      : g->rows + (r++) * k->cols;

			g->st_other[it->at + j] = (uint64_t)row[0];
			g->st_eid[it->at + j] = k->out ? (uint64_t)row[1] : it->begin + q;
			g->st_type[it->at + j] = row[2];
		}
	}
	return 0;
}

/* ---- the rpc way ---- */

static size_t excl_for(const struct rdps_graph *g, const struct call *k, uint32_t s,
		       const uint64_t **first)
{
	uint64_t lo = 0, hi;

	*first = g->excl;
	if (k->out)
		return k->nx; /* an out-edge of any id may sit on any server */
	for (hi = k->nx; lo < hi;) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (g->excl[mid] < g->s.edge_ranges[s])
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = g->excl + lo;
	for (hi = lo; hi < k->nx && g->excl[hi] < g->s.edge_ranges[s + 1]; hi++)
		;
	return hi - lo;
}

/* Server s's next request from its run of sorted items: groups by etype,
 * at most RDPS_SAMPLE_MAX_GROUPS of them and RDPS_SAMPLE_MAX_EDGES picks. */
static int build_request(struct rdps_graph *g, const struct call *k, uint32_t s)
{
	const uint64_t *ex;
	size_t nx = excl_for(g, k, s, &ex), nslots = 0, avail = g->run_hi[s] - g->cursor[s];
	uint32_t ngroups = 0, maxf = 0, cur = UINT32_MAX;
	struct rdps_sample_req *r;
	struct rdps_sample_group *gr;
	uint64_t *slots;
	size_t len;
	int ret;

	if (avail > RDPS_SAMPLE_MAX_EDGES)
		avail = RDPS_SAMPLE_MAX_EDGES;
	len = sizeof(*r) + RDPS_SAMPLE_MAX_GROUPS * sizeof(*gr) + avail * 8 + nx * 8;
	if ((ret = rdps_dg_grow(&g->req[s], &g->req_cap[s], len, 1)) ||
	    (ret = rdps_dg_grow(&g->req_items[s], &g->req_items_cap[s], avail, sizeof(uint32_t))))
		return ret;
	r = g->req[s];
	gr = (struct rdps_sample_group *)(r + 1);
	/* the groups first, into a scratch of slots, then laid out */
	slots = (uint64_t *)(gr + RDPS_SAMPLE_MAX_GROUPS);
	while (g->cursor[s] < g->run_hi[s]) {
		uint32_t idx = (uint32_t)g->sortkey[g->cursor[s]];
		const struct item *it = &g->items[idx];
		uint32_t f = it->cap, nf = f > maxf ? f : maxf;

		if ((nslots + 1) * nf > RDPS_SAMPLE_MAX_EDGES)
			break;
		if (it->etype != cur) {
			if (ngroups == RDPS_SAMPLE_MAX_GROUPS)
				break;
			cur = it->etype;
			gr[ngroups++] = (struct rdps_sample_group){
				.fanout = f, .count = 0, .prob_table = g->prob_id[cur],
				.prob_dtype = (uint32_t)g->prob_dtype[cur],
				.prob_shift = (int64_t)g->s.et[cur].lo[s] -
					      (int64_t)g->s.et[cur].cum[s],
			};
			if (g->prob_id[cur] == RDPS_SAMPLE_NO_PROB)
				gr[ngroups - 1].prob_dtype = 0;
		}
		gr[ngroups - 1].count++;
		maxf = nf;
		g->req_items[s][nslots] = idx;
		slots[nslots++] = it->slot;
		g->cursor[s]++;
	}
	/* close up the unused group entries */
	memmove(gr + ngroups, slots, nslots * 8);
	memcpy((char *)(gr + ngroups) + nslots * 8, ex, nx * 8);
	*r = (struct rdps_sample_req){ .indptr_table = k->ptr->id, .edges_table = k->edges->id,
				       .fanout = maxf, .n = (uint32_t)nslots, .seed = k->sp->seed,
				       .flags = (k->out ? RDPS_SAMPLE_F_OUT : 0) |
						(k->sp->replace ? RDPS_SAMPLE_F_REPLACE : 0),
				       .num_groups = ngroups, .num_exclude = (uint32_t)nx };
	g->req_len[s] = sizeof(*r) + ngroups * sizeof(*gr) + nslots * 8 + nx * 8;
	return rdps_dg_grow(&g->rep[s], &g->rep_cap[s],
			    rdps_sample_reply_bound((uint32_t)nslots, maxf), 1);
}

static int rpc(struct rdps_graph *g, struct call *k)
{
	uint32_t P = g->s.k;
	size_t r = 0;
	int ret;

	if ((ret = rdps_dg_grow(&g->sortkey, &g->sortkey_cap, k->m, sizeof(uint64_t))))
		return ret;
	for (size_t i = 0; i < k->m; i++) {
		const struct item *it = &g->items[i];

		if (it->how == ITEM_RPC)
			g->sortkey[r++] = (uint64_t)it->server << 48 | (uint64_t)it->etype << 32 | i;
	}
	if (!r)
		return 0;
	if (k->nx > MAX_EXCLUDE)
		return rdps_client_fail(g->c, -EINVAL, "%llu excluded edges: more than a request "
					"carries", (unsigned long long)k->nx);
	qsort(g->sortkey, r, sizeof(uint64_t), cmp_u64);
	for (uint32_t s = 0; s < P; s++)
		g->run_lo[s] = g->run_hi[s] = 0;
	for (size_t i = r; i-- > 0;)
		g->run_lo[g->sortkey[i] >> 48] = i;
	for (size_t i = 0; i < r; i++)
		g->run_hi[g->sortkey[i] >> 48] = i + 1;
	for (uint32_t s = 0; s < P; s++)
		g->cursor[s] = g->run_lo[s];
	for (size_t i = 0; i < r; i++)
		g->sortkey[i] &= 0xffffffffull; /* the item index */
	for (;;) {
		uint32_t q = 0;

		for (uint32_t s = 0; s < P; s++) {
			if (g->cursor[s] >= g->run_hi[s])
				continue;
			if ((ret = build_request(g, k, s)))
				return ret;
			g->round[q] = s;
			g->round_req[q] = g->req[s];
			g->round_rep[q] = g->rep[s];
			g->round_cap[q] = g->rep_cap[s];
			g->req_len[q] = g->req_len[s];
			q++;
		}
		if (!q)
			break;
		{
			size_t lens[q ? q : 1];

			for (uint32_t j = 0; j < q; j++)
				lens[j] = g->req_len[g->round[j]];
			ret = rdps_client_call_many(g->c, RDPS_REQ_SAMPLE, q, g->round,
						    g->round_req, lens, g->round_rep, g->round_cap,
						    g->rep_len);
		}
		if (ret)
			return ret;
		for (uint32_t j = 0; j < q; j++) {
			uint32_t s = g->round[j];
			const struct rdps_sample_req *rq = g->req[s];
			size_t len = g->rep_len[j], head = ((size_t)rq->n * 4 + 7) & ~(size_t)7;
			const char *rep = g->rep[s], *e = rep + head;

			if (len < head)
				return rdps_client_fail(g->c, -EPROTO, "server %u: sample reply of %zu "
							"bytes for %u slots", s, len, rq->n);
			for (uint32_t i = 0; i < rq->n; i++) {
				struct item *it = &g->items[g->req_items[s][i]];
				uint32_t c;

				memcpy(&c, rep + 4 * (size_t)i, sizeof(c));
				if (c > it->cap || (size_t)(e - rep) + (size_t)c *
							   RDPS_SAMPLE_EDGE_BYTES > len)
					return rdps_client_fail(g->c, -EPROTO, "server %u: sample "
								"reply of %zu bytes is short or "
								"picks %u of fanout %u", s, len, c,
								it->cap);
				it->got = c;
				for (uint32_t x = 0; x < c; x++, e += RDPS_SAMPLE_EDGE_BYTES) {
					int64_t v[3];

					memcpy(v, e, sizeof(v));
					g->st_other[it->at + x] = (uint64_t)v[0];
					g->st_eid[it->at + x] = (uint64_t)v[1];
					g->st_type[it->at + x] = v[2];
				}
			}
		}
	}
	return 0;
}

/* ---- the call ---- */

static int results(struct rdps_graph *g, struct call *k)
{
	size_t total = 0, m = 0;
	int ret;

	for (size_t i = 0; i < k->m; i++)
		total += g->items[i].got;
	if ((ret = rdps_dg_grow(&g->r_src, &g->r_cap, total, sizeof(uint64_t))))
		return ret;
	if ((ret = rdps_dg_grow(&g->r_dst, &g->r_dst_cap, total, sizeof(uint64_t))) ||
	    (ret = rdps_dg_grow(&g->r_eid, &g->r_eid_cap, total, sizeof(uint64_t))) ||
	    (ret = rdps_dg_grow(&g->r_type, &g->r_type_cap, total, sizeof(int64_t))) ||
	    (ret = rdps_dg_grow(&g->r_etype, &g->r_etype_cap, total, sizeof(int32_t))) ||
	    (ret = rdps_dg_grow(&g->r_seed, &g->r_seed_cap, total, sizeof(uint32_t))))
		return ret;
	for (size_t i = 0; i < k->m; i++) {
		const struct item *it = &g->items[i];
		uint64_t seed = k->seeds[it->seed];

		for (uint32_t j = 0; j < it->got; j++, m++) {
			g->r_src[m] = k->out ? seed : g->st_other[it->at + j];
			g->r_dst[m] = k->out ? g->st_other[it->at + j] : seed;
			g->r_eid[m] = g->st_eid[it->at + j];
			g->r_type[m] = g->st_type[it->at + j];
			g->r_etype[m] = (int32_t)it->etype;
			g->r_seed[m] = it->seed;
		}
	}
	g->res = (struct rdps_sample_result){ .src = g->r_src, .dst = g->r_dst,
					      .eid = g->r_eid, .etype = g->r_etype,
					      .type = g->r_type, .seed_index = g->r_seed,
					      .num_edges = m };
	return 0;
}

int rdps_graph_sample(struct rdps_graph *g, const uint64_t *seeds, size_t n,
		      const struct rdps_sample_spec *spec, const struct rdps_sample_result **out)
{
	struct call k = { .sp = spec, .seeds = seeds, .n = n, .out = spec && spec->out };
	size_t stage = 0;
	bool any_read = false;
	int ret;

	g->res = (struct rdps_sample_result){ 0 };
	*out = &g->res;
	if (!spec)
		return rdps_client_fail(g->c, -EINVAL, "sample: no spec");
	k.cols = k.out ? 3 : 4;
	k.ptr = k.out ? &g->outptr : &g->indptr;
	k.edges = k.out ? &g->outedges : &g->edges;
	if ((ret = check_spec(g, &k)) || (ret = make_items(g, &k)))
		return ret;
	for (size_t i = 0; i < k.m; i++)
		any_read |= g->items[i].how == ITEM_READ;
	if (any_read && (ret = read_slots(g, &k)))
		return ret;
	for (size_t i = 0; i < k.m; i++) {
		g->items[i].at = stage;
		g->items[i].got = 0;
		stage += g->items[i].cap;
	}
	if ((ret = rdps_dg_grow(&g->st_other, &g->st_cap, stage, sizeof(uint64_t))) ||
	    (ret = rdps_dg_grow(&g->st_eid, &g->st_eid_cap, stage, sizeof(uint64_t))) ||
	    (ret = rdps_dg_grow(&g->st_type, &g->st_type_cap, stage, sizeof(int64_t))))
		return ret;
	if ((ret = rpc(g, &k)))
		return ret;
	if (any_read) {
		bool want_w = false;

		for (uint32_t e = 0; e < g->s.R; e++)
			want_w |= g->prob_id[e] != RDPS_SAMPLE_NO_PROB;
		if ((ret = read_full(g, &k)) || (want_w && (ret = read_weights(g, &k))) ||
		    (ret = read_pick(g, &k)))
			return ret;
	}
	return results(g, &k);
}

int rdps_graph_sample_neighbors(struct rdps_graph *g, const uint64_t *seeds, size_t n,
				uint32_t fanout, int way, uint64_t seed, struct rdps_sampled *out)
{
	struct rdps_sample_spec sp = { .way = way, .seed = seed };
	const struct rdps_sample_result *r;
	int32_t f = (int32_t)fanout;
	int ret;

	out->num_edges = 0;
	if (!fanout || fanout > RDPS_SAMPLE_MAX_FANOUT)
		return rdps_client_fail(g->c, -EINVAL, "fanout %u (want 1..%u)", fanout,
					RDPS_SAMPLE_MAX_FANOUT);
	if (g->s.R != 1)
		return rdps_client_fail(g->c, -EINVAL, "the graph has %u edge types: sample them "
					"with a fanout per etype (rdps_graph_sample)", g->s.R);
	sp.fanouts = &f;
	if ((ret = rdps_graph_sample(g, seeds, n, &sp, &r)))
		return ret;
	for (size_t m = 0; m < r->num_edges; m++) {
		out->src[m] = r->src[m];
		out->dst[m] = r->dst[m];
		if (out->eid)
			out->eid[m] = r->eid[m];
		if (out->etype)
			out->etype[m] = r->type[m];
	}
	out->num_edges = r->num_edges;
	return 0;
}
