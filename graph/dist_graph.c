// SPDX-License-Identifier: MIT
/*
 * DistGraph's client side: the graph's shape from its tables' books, and
 * neighbour sampling by request (RDPS_REQ_SAMPLE to each server holding
 * seeds) or by reading the CSR rows (one-sided where pulls are). Scratch
 * grows to the largest call seen and is reused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/client_internal.h"
#include "kvstore/graph_sample.h"
#include "rdps/common.h"
#include "rdps/graph.h"

struct rdps_graph {
	struct rdps_client *c;
	struct rdps_table_info indptr, edges;
	uint32_t num_parts;
	uint64_t *node_off;          /* num_parts + 1 */
	/* read way */
	int64_t *ptr; size_t ptr_cap;         /* 2 per seed */
	uint64_t *eids; size_t eids_cap;      /* picked edges */
	uint32_t *cnt; size_t cnt_cap;        /* per seed */
	int64_t *erows; size_t erows_cap;     /* 4 per picked edge */
	/* rpc way */
	uint32_t *order; size_t order_cap;    /* seeds grouped by server: input index */
	size_t *start;                        /* num_parts + 1 */
	size_t *at;                           /* per server: its next seed in order */
	/* per server: its request and reply buffers, and a round's calls */
	void **req, **rep;
	size_t *req_cap, *rep_cap, *req_len, *rep_len;
	uint32_t *round;                      /* servers asked in a round */
	void **round_req, **round_rep;        /* ... their buffers */
	size_t *round_cap;
};

int rdps_sample_way_parse(const char *name)
{
	if (!name || !strcmp(name, "rpc"))
		return RDPS_SAMPLE_RPC;
	if (!strcmp(name, "read") || !strcmp(name, "one-sided"))
		return RDPS_SAMPLE_READ;
	return -EINVAL;
}

static int grow(void *p, size_t *cap, size_t n, size_t size)
{
	size_t bytes = *cap * size;
	int ret;

	if (n <= *cap)
		return 0;
	ret = rdps_reserve((void **)p, &bytes, n * size);
	if (!ret)
		*cap = bytes / size;
	return ret;
}

int rdps_graph_open(struct rdps_client *c, struct rdps_graph **out)
{
	struct rdps_graph *g = calloc(1, sizeof(*g));
	int ret;

	if (!g)
		return -ENOMEM;
	g->c = c;
	if ((ret = rdps_client_table(c, RDPS_GRAPH_INDPTR, &g->indptr)) ||
	    (ret = rdps_client_table(c, RDPS_GRAPH_EDGES, &g->edges))) {
		rdps_client_fail(c, ret, "the servers hold no graph (tables '%s' and '%s'): "
				 "start them with rdps server --graph DIR", RDPS_GRAPH_INDPTR,
				 RDPS_GRAPH_EDGES);
		goto fail;
	}
	if (g->indptr.dtype != RDPS_DTYPE_I64 || g->indptr.elems != 2 ||
	    g->edges.dtype != RDPS_DTYPE_I64 || g->edges.elems != 4) {
		ret = rdps_client_fail(c, -EPROTO, "tables '%s' and '%s' are not a graph's "
				       "(want 2 and 4 int64 per row)", RDPS_GRAPH_INDPTR,
				       RDPS_GRAPH_EDGES);
		goto fail;
	}
	g->num_parts = rdps_client_num_servers(c);
	g->node_off = calloc((size_t)g->num_parts + 1, sizeof(*g->node_off));
	g->start = calloc((size_t)g->num_parts + 1, sizeof(*g->start));
	g->at = calloc(g->num_parts, sizeof(*g->at));
	g->req = calloc(g->num_parts, sizeof(*g->req));
	g->rep = calloc(g->num_parts, sizeof(*g->rep));
	g->req_cap = calloc(g->num_parts, sizeof(*g->req_cap));
	g->rep_cap = calloc(g->num_parts, sizeof(*g->rep_cap));
	g->req_len = calloc(g->num_parts, sizeof(*g->req_len));
	g->rep_len = calloc(g->num_parts, sizeof(*g->rep_len));
	g->round = calloc(g->num_parts, sizeof(*g->round));
	g->round_req = calloc(g->num_parts, sizeof(*g->round_req));
	g->round_rep = calloc(g->num_parts, sizeof(*g->round_rep));
	g->round_cap = calloc(g->num_parts, sizeof(*g->round_cap));
	if (!g->round_req || !g->round_rep || !g->round_cap ||
	    !g->node_off || !g->start || !g->at || !g->req || !g->rep || !g->req_cap ||
	    !g->rep_cap || !g->req_len || !g->rep_len || !g->round) {
		ret = -ENOMEM;
		goto fail;
	}
	if ((ret = rdps_client_table_offsets(c, g->indptr.id, g->node_off)))
		goto fail;
	*out = g;
	return 0;
fail:
	rdps_graph_close(g);
	return ret;
}

void rdps_graph_close(struct rdps_graph *g)
{
	if (!g)
		return;
	free(g->node_off);
	free(g->start);
	free(g->ptr);
	free(g->eids);
	free(g->cnt);
	free(g->erows);
	free(g->order);
	for (uint32_t s = 0; s < g->num_parts && g->req && g->rep; s++) {
		free(g->req[s]);
		free(g->rep[s]);
	}
	free(g->req);
	free(g->rep);
	free(g->req_cap);
	free(g->rep_cap);
	free(g->req_len);
	free(g->rep_len);
	free(g->round);
	free(g->round_req);
	free(g->round_rep);
	free(g->round_cap);
	free(g->at);
	free(g);
}

uint64_t rdps_graph_num_nodes(const struct rdps_graph *g)
{
	return g->indptr.num_rows;
}

uint64_t rdps_graph_num_edges(const struct rdps_graph *g)
{
	return g->edges.num_rows;
}

uint32_t rdps_graph_num_parts(const struct rdps_graph *g)
{
	return g->num_parts;
}

void rdps_graph_part_nodes(const struct rdps_graph *g, uint32_t part, uint64_t *lo,
			   uint64_t *hi)
{
	if (part >= g->num_parts) {
		*lo = *hi = g->indptr.num_rows;
		return;
	}
	*lo = g->node_off[part];
	*hi = g->node_off[part + 1];
}

static int check_nodes(struct rdps_graph *g, const uint64_t *nodes, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (nodes[i] >= g->indptr.num_rows)
			return rdps_client_fail(g->c, -ERANGE, "%s %zu: node %llu is not in the "
						"graph (%llu nodes)", what, i,
						(unsigned long long)nodes[i],
						(unsigned long long)g->indptr.num_rows);
	return 0;
}

/* The in-edge ranges of nodes[0..n) into g->ptr. */
static int read_ptr(struct rdps_graph *g, const uint64_t *nodes, size_t n)
{
	int ret;

	if ((ret = grow(&g->ptr, &g->ptr_cap, 2 * (n ? n : 1), sizeof(*g->ptr))))
		return ret;
	return rdps_client_get(g->c, g->indptr.id, nodes, n, g->ptr);
}

int rdps_graph_in_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			  uint64_t *deg)
{
	int ret;

	if ((ret = check_nodes(g, nodes, n, "node")) || (ret = read_ptr(g, nodes, n)))
		return ret;
	for (size_t i = 0; i < n; i++)
		deg[i] = (uint64_t)(g->ptr[2 * i + 1] - g->ptr[2 * i]);
	return 0;
}

int rdps_graph_find_edges(struct rdps_graph *g, const uint64_t *eids, size_t n,
			  uint64_t *src, uint64_t *dst, int64_t *etype)
{
	int ret;

	for (size_t i = 0; i < n; i++)
		if (eids[i] >= g->edges.num_rows)
			return rdps_client_fail(g->c, -ERANGE, "edge %zu: id %llu is not in the "
						"graph (%llu edges)", i,
						(unsigned long long)eids[i],
						(unsigned long long)g->edges.num_rows);
	if ((ret = grow(&g->erows, &g->erows_cap, 4 * (n ? n : 1), sizeof(*g->erows))))
		return ret;
	if ((ret = rdps_client_get(g->c, g->edges.id, eids, n, g->erows)))
		return ret;
	for (size_t i = 0; i < n; i++) {
		src[i] = (uint64_t)g->erows[4 * i];
		dst[i] = (uint64_t)g->erows[4 * i + 1];
		if (etype)
			etype[i] = g->erows[4 * i + 2];
	}
	return 0;
}

/* The read way: the seeds' offsets, then the picked edges' rows. */
static int sample_read(struct rdps_graph *g, const uint64_t *seeds, size_t n, uint32_t fanout,
		       uint64_t seed, struct rdps_sampled *out)
{
	uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];
	size_t m = 0;
	int ret;

	if ((ret = read_ptr(g, seeds, n)) ||
	    (ret = grow(&g->eids, &g->eids_cap, n * fanout, sizeof(*g->eids))))
		return ret;
	for (size_t i = 0; i < n; i++) {
		int64_t begin = g->ptr[2 * i], end = g->ptr[2 * i + 1];
		uint32_t k;

		if (begin < 0 || end < begin || (uint64_t)end > g->edges.num_rows)
			return rdps_client_fail(g->c, -EIO, "node %llu: in-edges [%lld, %lld) "
						"read from '%s' are not edges of the graph",
						(unsigned long long)seeds[i], (long long)begin,
						(long long)end, RDPS_GRAPH_INDPTR);
		k = rdps_sample_choose(seed, seeds[i], (uint64_t)(end - begin), fanout, pos);
		for (uint32_t j = 0; j < k; j++) {
			g->eids[m + j] = (uint64_t)begin + pos[j];
			out->dst[m + j] = seeds[i];
		}
		m += k;
	}
	if ((ret = grow(&g->erows, &g->erows_cap, 4 * (m ? m : 1), sizeof(*g->erows))) ||
	    (ret = rdps_client_get(g->c, g->edges.id, g->eids, m, g->erows)))
		return ret;
	for (size_t j = 0; j < m; j++) {
		out->src[j] = (uint64_t)g->erows[4 * j];
		if (out->eid)
			out->eid[j] = g->eids[j];
		if (out->etype)
			out->etype[j] = g->erows[4 * j + 2];
	}
	out->num_edges = m;
	return 0;
}

/* The rpc way: seeds grouped by server, each server asked for up to
 * RDPS_SAMPLE_MAX_EDGES picks a request, every server holding seeds at once
 * (rdps_client_call_many: their picking overlaps), the replies scattered
 * back into the seeds' order. */
static int sample_rpc(struct rdps_graph *g, const uint64_t *seeds, size_t n, uint32_t fanout,
		      uint64_t seed, struct rdps_sampled *out)
{
	size_t max_seeds = RDPS_SAMPLE_MAX_EDGES / fanout, m = 0;
	size_t chunk = n < max_seeds ? n : max_seeds;
	uint32_t P = g->num_parts;
	int ret;

	if ((ret = grow(&g->order, &g->order_cap, n ? n : 1, sizeof(*g->order))) ||
	    (ret = grow(&g->cnt, &g->cnt_cap, n ? n : 1, sizeof(*g->cnt))))
		return ret;
	for (uint32_t s = 0; s < P; s++)
		if ((ret = grow(&g->req[s], &g->req_cap[s],
				sizeof(struct rdps_sample_req) + 8 * chunk, 1)) ||
		    (ret = grow(&g->rep[s], &g->rep_cap[s],
				rdps_sample_reply_bound((uint32_t)chunk, fanout), 1)))
			return ret;
	/* Counting sort of the seeds by server. */
	memset(g->start, 0, (P + 1) * sizeof(*g->start));
	for (size_t i = 0; i < n; i++)
		g->start[rdps_client_locate(g->c, g->indptr.id, seeds[i]) + 1]++;
	for (uint32_t s = 0; s < P; s++)
		g->start[s + 1] += g->start[s];
	memcpy(g->at, g->start, P * sizeof(*g->at));
	for (size_t i = 0; i < n; i++)
		g->order[g->at[rdps_client_locate(g->c, g->indptr.id, seeds[i])]++] = (uint32_t)i;
	memcpy(g->at, g->start, P * sizeof(*g->at));
	/* Picks land at each seed's slot i * fanout first. */
	if ((ret = grow(&g->eids, &g->eids_cap, n * fanout, sizeof(*g->eids))) ||
	    (ret = grow(&g->erows, &g->erows_cap, 2 * n * fanout, sizeof(*g->erows))))
		return ret;
	for (;;) {
		uint32_t q = 0;

		for (uint32_t s = 0; s < P; s++) {
			size_t k = g->start[s + 1] - g->at[s];
			struct rdps_sample_req *r = g->req[s];
			uint64_t *ids = (uint64_t *)(r + 1);

			if (!k)
				continue;
			if (k > max_seeds)
				k = max_seeds;
			*r = (struct rdps_sample_req){ .indptr_table = g->indptr.id,
						       .edges_table = g->edges.id, .fanout = fanout,
						       .n = (uint32_t)k, .seed = seed };
			for (size_t i = 0; i < k; i++)
				ids[i] = seeds[g->order[g->at[s] + i]];
			g->req_len[q] = sizeof(*r) + 8 * k;
			g->round[q++] = s;
		}
		if (!q)
			break;
		for (uint32_t j = 0; j < q; j++) {
			g->round_req[j] = g->req[g->round[j]];
			g->round_rep[j] = g->rep[g->round[j]];
			g->round_cap[j] = g->rep_cap[g->round[j]];
		}
		ret = rdps_client_call_many(g->c, RDPS_REQ_SAMPLE, q, g->round, g->round_req,
					    g->req_len, g->round_rep, g->round_cap, g->rep_len);
		if (ret)
			return ret;
		for (uint32_t j = 0; j < q; j++) {
			uint32_t s = g->round[j];
			const struct rdps_sample_req *r = g->req[s];
			size_t k = r->n, len = g->rep_len[j], head = (k * 4 + 7) & ~(size_t)7;
			const char *rep = g->rep[s], *e = rep + head;

			if (len < head)
				return rdps_client_fail(g->c, -EPROTO, "server %u: sample reply of %zu "
							"bytes for %zu seeds", s, len, k);
			for (size_t i = 0; i < k; i++) {
				uint32_t c = ((const uint32_t *)rep)[i], at = g->order[g->at[s] + i];
				size_t slot = (size_t)at * fanout;

				if (c > fanout || head + (size_t)c * RDPS_SAMPLE_EDGE_BYTES > len)
					return rdps_client_fail(g->c, -EPROTO, "server %u: sample "
								"reply of %zu bytes is short or "
								"picks %u of fanout %u", s, len,
								c, fanout);
				g->cnt[at] = c;
				for (uint32_t j2 = 0; j2 < c; j2++, e += RDPS_SAMPLE_EDGE_BYTES) {
					int64_t v[3];

					memcpy(v, e, sizeof(v));
					g->erows[2 * (slot + j2)] = v[0];     /* src */
					g->erows[2 * (slot + j2) + 1] = v[2]; /* type */
					g->eids[slot + j2] = (uint64_t)v[1];
				}
				head += (size_t)c * RDPS_SAMPLE_EDGE_BYTES;
			}
			g->at[s] += k;
		}
	}
	/* Compact seed after seed. */
	for (size_t i = 0; i < n; i++) {
		size_t slot = i * fanout;

		for (uint32_t j = 0; j < g->cnt[i]; j++, m++) {
			out->src[m] = (uint64_t)g->erows[2 * (slot + j)];
			out->dst[m] = seeds[i];
			if (out->eid)
				out->eid[m] = g->eids[slot + j];
			if (out->etype)
				out->etype[m] = g->erows[2 * (slot + j) + 1];
		}
	}
	out->num_edges = m;
	return 0;
}

int rdps_graph_sample_neighbors(struct rdps_graph *g, const uint64_t *seeds, size_t n,
				uint32_t fanout, int way, uint64_t seed, struct rdps_sampled *out)
{
	int ret;

	out->num_edges = 0;
	if (!fanout || fanout > RDPS_SAMPLE_MAX_FANOUT)
		return rdps_client_fail(g->c, -EINVAL, "fanout %u (want 1..%u)", fanout,
					RDPS_SAMPLE_MAX_FANOUT);
	if (n > UINT32_MAX)
		return rdps_client_fail(g->c, -EINVAL, "%zu seeds in one call", n);
	if ((ret = check_nodes(g, seeds, n, "seed")))
		return ret;
	if (!n)
		return 0;
	switch (way) {
	case RDPS_SAMPLE_RPC:
		return sample_rpc(g, seeds, n, fanout, seed, out);
	case RDPS_SAMPLE_READ:
		return sample_read(g, seeds, n, fanout, seed, out);
	default:
		return rdps_client_fail(g->c, -EINVAL, "unknown sampling way %d", way);
	}
}
