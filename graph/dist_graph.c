// SPDX-License-Identifier: MIT
/*
 * DistGraph's client side: the graph's schema and type maps from
 * RDPS_GRAPH_META, degrees and edges from the slot tables, and neighbour
 * sampling by request (RDPS_REQ_SAMPLE to each server holding slots, all at
 * once) or by reading the rows (one-sided where pulls are). Scratch grows
 * to the largest call seen and is reused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/client_internal.h"
#include "kvstore/graph_sample.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "dist_internal.h"

int rdps_sample_way_parse(const char *name)
{
	if (!name || !strcmp(name, "rpc"))
		return RDPS_SAMPLE_RPC;
	if (!strcmp(name, "read") || !strcmp(name, "one-sided"))
		return RDPS_SAMPLE_READ;
	return -EINVAL;
}

int rdps_dg_grow(void *p, size_t *cap, size_t n, size_t size)
{
	size_t bytes = *cap * size;
	int ret;

	if (n <= *cap && *(void **)p)
		return 0;
	ret = rdps_reserve((void **)p, &bytes, (n ? n : 1) * size);
	if (!ret)
		*cap = bytes / size;
	return ret;
}

static int find_table(struct rdps_graph *g, const char *name, struct rdps_table_info *t,
		      int dtype, uint32_t elems)
{
	int ret = rdps_client_table(g->c, name, t);

	if (ret)
		return rdps_client_fail(g->c, ret, "the servers hold no graph (no table '%s'): "
					"start them with rdps server --graph DIR (a partition of "
					"this rdps: rdps partition, rdps.distributed.partition_graph)",
					name);
	if (t->dtype != dtype || t->elems != elems)
		return rdps_client_fail(g->c, -EPROTO, "table '%s' is not a graph's (want %u of "
					"dtype %d per row)", name, elems, dtype);
	return 0;
}

static int read_schema(struct rdps_graph *g)
{
	char *buf, err[512] = "";
	uint64_t *ids, *off;
	uint32_t k = rdps_client_num_servers(g->c);
	json_error_t je;
	json_t *root;
	int ret;

	buf = calloc(g->meta.num_rows + 1, RDPS_GRAPH_META_ROW);
	ids = calloc(g->meta.num_rows + 1, sizeof(uint64_t));
	off = calloc((size_t)k + 1, sizeof(uint64_t));
	if (!buf || !ids || !off) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < g->meta.num_rows; i++)
		ids[i] = i;
	if ((ret = rdps_client_get(g->c, g->meta.id, ids, g->meta.num_rows, buf)))
		goto out;
	root = json_loadb(buf, strnlen(buf, g->meta.num_rows * RDPS_GRAPH_META_ROW), 0, &je);
	if (!root) {
		ret = rdps_client_fail(g->c, -EPROTO, "table '%s': the graph's schema is not JSON "
				       "(%s)", RDPS_GRAPH_META, je.text);
		goto out;
	}
	ret = rdps_gschema_parse(root, RDPS_GRAPH_META, &g->s, err, sizeof(err));
	json_decref(root);
	if (ret) {
		rdps_client_fail(g->c, ret, "%s", err);
		goto out;
	}
	if (g->s.k != k) {
		ret = rdps_client_fail(g->c, -EPROTO, "the graph has %u parts but the job %u "
				       "servers (one server per part)", g->s.k, k);
		goto out;
	}
	/* the tables' books must be the schema's */
	if ((ret = rdps_client_table_offsets(g->c, g->indptr.id, off)))
		goto out;
	if (memcmp(off, g->s.in_slot_ranges, ((size_t)k + 1) * sizeof(uint64_t)) ||
	    g->edges.num_rows != g->s.E) {
		ret = rdps_client_fail(g->c, -EPROTO, "the servers' graph tables disagree with "
				       "the graph's schema (servers of different partitions?)");
		goto out;
	}
	g->schema_text = strndup(buf, g->meta.num_rows * RDPS_GRAPH_META_ROW);
	if (!g->schema_text)
		ret = -ENOMEM;
out:
	free(buf);
	free(ids);
	free(off);
	return ret;
}

int rdps_graph_open(struct rdps_client *c, struct rdps_graph **out)
{
	struct rdps_graph *g = calloc(1, sizeof(*g));
	uint32_t k = rdps_client_num_servers(c);
	int ret;

	if (!g)
		return -ENOMEM;
	g->c = c;
	g->nserv = k;
	if ((ret = find_table(g, RDPS_GRAPH_META, &g->meta, RDPS_DTYPE_U8, RDPS_GRAPH_META_ROW)) ||
	    (ret = find_table(g, RDPS_GRAPH_INDPTR, &g->indptr, RDPS_DTYPE_I64, 2)) ||
	    (ret = find_table(g, RDPS_GRAPH_EDGES, &g->edges, RDPS_DTYPE_I64, 4)) ||
	    (ret = find_table(g, RDPS_GRAPH_OUTPTR, &g->outptr, RDPS_DTYPE_I64, 2)) ||
	    (ret = find_table(g, RDPS_GRAPH_OUTEDGES, &g->outedges, RDPS_DTYPE_I64, 3)) ||
	    (ret = read_schema(g)))
		goto fail;
	g->prob_id = calloc(g->s.R, sizeof(uint32_t));
	g->prob_dtype = calloc(g->s.R, sizeof(int));
	g->req = calloc(k, sizeof(*g->req));
	g->rep = calloc(k, sizeof(*g->rep));
	g->req_cap = calloc(k, sizeof(size_t));
	g->rep_cap = calloc(k, sizeof(size_t));
	g->req_len = calloc(k, sizeof(size_t));
	g->rep_len = calloc(k, sizeof(size_t));
	g->round_cap = calloc(k, sizeof(size_t));
	g->round = calloc(k, sizeof(uint32_t));
	g->round_req = calloc(k, sizeof(void *));
	g->round_rep = calloc(k, sizeof(void *));
	g->cursor = calloc(k, sizeof(uint64_t));
	g->run_lo = calloc(k, sizeof(uint64_t));
	g->run_hi = calloc(k, sizeof(uint64_t));
	g->req_items = calloc(k, sizeof(uint32_t *));
	g->req_items_cap = calloc(k, sizeof(size_t));
	if (!g->prob_id || !g->prob_dtype || !g->req || !g->rep || !g->req_cap || !g->rep_cap ||
	    !g->req_len || !g->rep_len || !g->round_cap || !g->round || !g->round_req ||
	    !g->round_rep || !g->cursor || !g->run_lo || !g->run_hi || !g->req_items ||
	    !g->req_items_cap) {
		ret = -ENOMEM;
		goto fail;
	}
	*out = g;
	return 0;
fail:
	rdps_graph_close(g);
	return ret;
}

void rdps_graph_close(struct rdps_graph *g)
{
	uint32_t k;

	if (!g)
		return;
	k = g->nserv; /* (the client may be gone: the graph frees only its own) */
	for (uint32_t s = 0; s < k; s++) {
		if (g->req)
			free(g->req[s]);
		if (g->rep)
			free(g->rep[s]);
		if (g->req_items)
			free(g->req_items[s]);
	}
	free(g->req);
	free(g->rep);
	free(g->req_cap);
	free(g->rep_cap);
	free(g->req_len);
	free(g->rep_len);
	free(g->round_cap);
	free(g->round);
	free(g->round_req);
	free(g->round_rep);
	free(g->cursor);
	free(g->run_lo);
	free(g->run_hi);
	free(g->req_items);
	free(g->req_items_cap);
	free(g->prob_id);
	free(g->prob_dtype);
	free(g->items);
	free(g->ids);
	free(g->rows);
	free(g->excl);
	free(g->full);
	free(g->posx);
	free(g->w);
	free(g->st_other);
	free(g->st_eid);
	free(g->st_type);
	free(g->sortkey);
	rdps_sample_scratch_free(&g->sc);
	free(g->r_src);
	free(g->r_dst);
	free(g->r_eid);
	free(g->r_etype);
	free(g->r_type);
	free(g->r_seed);
	free(g->schema_text);
	rdps_gschema_free(&g->s);
	free(g);
}

/* ---------------------------------------------------------------------- */
/* Shape, types, maps                                                      */

uint64_t rdps_graph_num_nodes(const struct rdps_graph *g)
{
	return g->s.N;
}

uint64_t rdps_graph_num_edges(const struct rdps_graph *g)
{
	return g->s.E;
}

uint32_t rdps_graph_num_parts(const struct rdps_graph *g)
{
	return g->s.k;
}

const char *rdps_graph_schema(const struct rdps_graph *g)
{
	return g->schema_text;
}

uint32_t rdps_graph_num_ntypes(const struct rdps_graph *g)
{
	return g->s.T;
}

uint32_t rdps_graph_num_etypes(const struct rdps_graph *g)
{
	return g->s.R;
}

const char *rdps_graph_ntype_name(const struct rdps_graph *g, uint32_t ntype)
{
	return ntype < g->s.T ? g->s.nt[ntype].name : NULL;
}

const char *rdps_graph_etype_name(const struct rdps_graph *g, uint32_t etype,
				  uint32_t *src_ntype, uint32_t *dst_ntype)
{
	if (etype >= g->s.R)
		return NULL;
	if (src_ntype)
		*src_ntype = g->s.et[etype].src;
	if (dst_ntype)
		*dst_ntype = g->s.et[etype].dst;
	return g->s.et[etype].name;
}

int rdps_graph_ntype_id(const struct rdps_graph *g, const char *name)
{
	for (uint32_t t = 0; name && t < g->s.T; t++)
		if (!strcmp(g->s.nt[t].name, name))
			return (int)t;
	return -ENOENT;
}

int rdps_graph_etype_id(const struct rdps_graph *g, const char *name)
{
	int found = -ENOENT;

	for (uint32_t e = 0; name && e < g->s.R; e++) {
		if (!strcmp(g->s.et[e].canonical, name))
			return (int)e;
		if (!strcmp(g->s.et[e].name, name))
			found = found == -ENOENT ? (int)e : -EINVAL;
	}
	return found == -EINVAL ? -ENOENT : found;
}

uint64_t rdps_graph_num_nodes_of(const struct rdps_graph *g, uint32_t ntype)
{
	return ntype < g->s.T ? g->s.nt[ntype].num : 0;
}

uint64_t rdps_graph_num_edges_of(const struct rdps_graph *g, uint32_t etype)
{
	return etype < g->s.R ? g->s.et[etype].num : 0;
}

void rdps_graph_part_nodes(const struct rdps_graph *g, uint32_t part, uint64_t *lo,
			   uint64_t *hi)
{
	if (part >= g->s.k) {
		*lo = *hi = g->s.N;
		return;
	}
	*lo = g->s.node_ranges[part];
	*hi = g->s.node_ranges[part + 1];
}

static void type_range(const struct gs_type *t, uint32_t n, uint32_t k, uint32_t type,
		       uint32_t part, uint64_t *lo, uint64_t *hi)
{
	if (type >= n || part >= k) {
		*lo = *hi = 0;
		return;
	}
	*lo = t[type].lo[part];
	*hi = *lo + t[type].cnt[part];
}

void rdps_graph_ntype_range(const struct rdps_graph *g, uint32_t ntype, uint32_t part,
			    uint64_t *lo, uint64_t *hi)
{
	type_range(g->s.nt, g->s.T, g->s.k, ntype, part, lo, hi);
}

void rdps_graph_etype_range(const struct rdps_graph *g, uint32_t etype, uint32_t part,
			    uint64_t *lo, uint64_t *hi)
{
	type_range(g->s.et, g->s.R, g->s.k, etype, part, lo, hi);
}

static int map_to_per(struct rdps_graph *g, bool edge, const uint64_t *homo, size_t n,
		      int32_t *type, uint64_t *per)
{
	uint64_t total = edge ? g->s.E : g->s.N;

	for (size_t i = 0; i < n; i++) {
		uint32_t p, t;
		const struct gs_type *ty;

		if (homo[i] >= total)
			return rdps_client_fail(g->c, -ERANGE, "%s %zu: id %llu is not in the graph "
						"(%llu %s)", edge ? "edge" : "node", i,
						(unsigned long long)homo[i],
						(unsigned long long)total, edge ? "edges" : "nodes");
		t = edge ? rdps_gschema_edge_type(&g->s, homo[i], &p)
			 : rdps_gschema_node_type(&g->s, homo[i], &p);
		ty = edge ? &g->s.et[t] : &g->s.nt[t];
		if (type)
			type[i] = (int32_t)t;
		per[i] = homo[i] - ty->lo[p] + ty->cum[p];
	}
	return 0;
}

static uint32_t cum_part(const struct gs_type *t, uint32_t k, uint64_t id)
{
	uint32_t lo = 0, hi = k; /* cum[lo] <= id < cum[hi] */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->cum[mid] <= id)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int map_to_homo(struct rdps_graph *g, bool edge, uint32_t type, const uint64_t *per,
		       size_t n, uint64_t *homo)
{
	const struct gs_type *t;

	if (type >= (edge ? g->s.R : g->s.T))
		return rdps_client_fail(g->c, -ENOENT, "no %s type %u", edge ? "edge" : "node",
					type);
	t = edge ? &g->s.et[type] : &g->s.nt[type];
	for (size_t i = 0; i < n; i++) {
		uint32_t p;

		if (per[i] >= t->num)
			return rdps_client_fail(g->c, -ERANGE, "%s type '%s': id %llu (entry %zu) "
						"is not one of its %llu", edge ? "edge" : "node",
						edge ? t->canonical : t->name,
						(unsigned long long)per[i], i,
						(unsigned long long)t->num);
		p = cum_part(t, g->s.k, per[i]);
		homo[i] = t->lo[p] + per[i] - t->cum[p];
	}
	return 0;
}

int rdps_graph_map_to_per_ntype(struct rdps_graph *g, const uint64_t *homo, size_t n,
				int32_t *ntype, uint64_t *per_type)
{
	return map_to_per(g, false, homo, n, ntype, per_type);
}

int rdps_graph_map_to_homo_nid(struct rdps_graph *g, uint32_t ntype, const uint64_t *per_type,
			       size_t n, uint64_t *homo)
{
	return map_to_homo(g, false, ntype, per_type, n, homo);
}

int rdps_graph_map_to_per_etype(struct rdps_graph *g, const uint64_t *homo, size_t n,
				int32_t *etype, uint64_t *per_type)
{
	return map_to_per(g, true, homo, n, etype, per_type);
}

int rdps_graph_map_to_homo_eid(struct rdps_graph *g, uint32_t etype, const uint64_t *per_type,
			       size_t n, uint64_t *homo)
{
	return map_to_homo(g, true, etype, per_type, n, homo);
}

static int to_part(struct rdps_graph *g, bool edge, const uint64_t *homo, size_t n,
		   uint32_t *part)
{
	uint64_t total = edge ? g->s.E : g->s.N;

	for (size_t i = 0; i < n; i++) {
		if (homo[i] >= total)
			return rdps_client_fail(g->c, -ERANGE, "%s %zu: id %llu is not in the graph "
						"(%llu %s)", edge ? "edge" : "node", i,
						(unsigned long long)homo[i],
						(unsigned long long)total, edge ? "edges" : "nodes");
		if (edge)
			rdps_gschema_edge_type(&g->s, homo[i], &part[i]);
		else
			rdps_gschema_node_type(&g->s, homo[i], &part[i]);
	}
	return 0;
}

int rdps_graph_nid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part)
{
	return to_part(g, false, homo, n, part);
}

int rdps_graph_eid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part)
{
	return to_part(g, true, homo, n, part);
}

int rdps_graph_data(const struct rdps_graph *g, int edge, uint32_t type, uint32_t i,
		    struct rdps_graph_data_info *info)
{
	const struct gs_type *t;
	const struct gs_data *d;

	if (type >= (edge ? g->s.R : g->s.T))
		return -ENOENT;
	t = edge ? &g->s.et[type] : &g->s.nt[type];
	if (i >= t->ndata)
		return -ENOENT;
	d = &t->data[i];
	*info = (struct rdps_graph_data_info){ .name = d->name, .table = d->table,
					       .dtype = d->dtype, .ndim = d->ndim,
					       .shape = d->shape, .row_bytes = d->row_bytes,
					       .num_rows = t->num };
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Degrees and edges                                                       */

int rdps_dg_check_nodes(struct rdps_graph *g, const uint64_t *nodes, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (nodes[i] >= g->s.N)
			return rdps_client_fail(g->c, -ERANGE, "%s %zu: node %llu is not in the "
						"graph (%llu nodes)", what, i,
						(unsigned long long)nodes[i],
						(unsigned long long)g->s.N);
	return 0;
}

/* Rows ids[0..n) of table t into g->rows (cols int64 each). */
int rdps_dg_read_rows(struct rdps_graph *g, const struct rdps_table_info *t, const uint64_t *ids,
		     size_t n, uint32_t cols)
{
	int ret;

	if ((ret = rdps_dg_grow(&g->rows, &g->rows_cap, n * cols, sizeof(int64_t))))
		return ret;
	return n ? rdps_client_get(g->c, t->id, ids, n, g->rows) : 0;
}

static int degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n, uint64_t *deg,
		   bool out)
{
	size_t m = 0;
	int ret;

	if ((ret = rdps_dg_check_nodes(g, nodes, n, "node")))
		return ret;
	for (size_t i = 0; i < n; i++) {
		uint32_t p, t = rdps_gschema_node_type(&g->s, nodes[i], &p);

		m += out ? g->s.nt[t].nout : g->s.nt[t].nin;
	}
	if ((ret = rdps_dg_grow(&g->ids, &g->ids_cap, m, sizeof(uint64_t))))
		return ret;
	m = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t p, t = rdps_gschema_node_type(&g->s, nodes[i], &p);
		const struct gs_type *nt = &g->s.nt[t];
		uint32_t per = out ? nt->nout : nt->nin;
		uint64_t base = (out ? nt->out_base[p] : nt->in_base[p]) +
				(nodes[i] - nt->lo[p]) * per;

		for (uint32_t j = 0; j < per; j++)
			g->ids[m++] = base + j;
	}
	if ((ret = rdps_dg_read_rows(g, out ? &g->outptr : &g->indptr, g->ids, m, 2)))
		return ret;
	m = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t p, t = rdps_gschema_node_type(&g->s, nodes[i], &p);
		uint32_t per = out ? g->s.nt[t].nout : g->s.nt[t].nin;

		deg[i] = 0;
		for (uint32_t j = 0; j < per; j++, m++)
			deg[i] += (uint64_t)(g->rows[2 * m + 1] - g->rows[2 * m]);
	}
	return 0;
}

int rdps_graph_in_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			  uint64_t *deg)
{
	return degrees(g, nodes, n, deg, false);
}

int rdps_graph_out_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			   uint64_t *deg)
{
	return degrees(g, nodes, n, deg, true);
}

int rdps_graph_find_edges(struct rdps_graph *g, const uint64_t *eids, size_t n,
			  uint64_t *src, uint64_t *dst, int64_t *etype)
{
	int ret;

	for (size_t i = 0; i < n; i++)
		if (eids[i] >= g->s.E)
			return rdps_client_fail(g->c, -ERANGE, "edge %zu: id %llu is not in the "
						"graph (%llu edges)", i,
						(unsigned long long)eids[i],
						(unsigned long long)g->s.E);
	if ((ret = rdps_dg_read_rows(g, &g->edges, eids, n, 4)))
		return ret;
	for (size_t i = 0; i < n; i++) {
		src[i] = (uint64_t)g->rows[4 * i];
		dst[i] = (uint64_t)g->rows[4 * i + 1];
		if (etype)
			etype[i] = g->rows[4 * i + 2];
	}
	return 0;
}
