// SPDX-License-Identifier: MIT
/*
 * rdps_graph_partition_build_input: a graph of any node and edge types (see
 * rdps/partition.h) -> a graph partition directory (rdps/graph.h): checked
 * whole before any work, parts assigned by METIS (a constraint per balance
 * class, and in-edges) or at random, ids relabeled part after part and type
 * after type, edges and out-edge lists ordered so each (node, etype) slot
 * is one range. graph_write.c writes the files.
 */
#include <errno.h>
#include <metis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/npy.h"
#include "graph_build.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/kvstore.h"
#include "rdps/transport.h"

#define MAX_CLASSES 128

static int fail_oom(struct gb *g)
{
	return rdps_pt_fail(g->err, g->errlen, -ENOMEM, "graph partition: out of memory");
}

/* The table dtype and elements of a row of data, or -EINVAL. */
int rdps_gb_table_dtype(const char *dtype, uint32_t row_elems, uint32_t row_bytes, int *tdtype,
			uint32_t *telems)
{
	if (!strcmp(dtype, "float32"))
		*tdtype = RDPS_DTYPE_F32;
	else if (!strcmp(dtype, "float64"))
		*tdtype = RDPS_DTYPE_F64;
	else if (!strcmp(dtype, "int64"))
		*tdtype = RDPS_DTYPE_I64;
	else
		*tdtype = RDPS_DTYPE_U8;
	*telems = *tdtype == RDPS_DTYPE_U8 ? row_bytes : row_elems;
	/* the words the row takes (rdps_dtype_row_words, which lives above
	 * this module) */
	return ((uint64_t)row_bytes + 3) / 4 <= RDPS_MAX_DIM ? 0 : -EINVAL;
}

/* One data array of a type: its row and table. */
static int check_array(struct gb *g, const struct rdps_graph_array *a, const char *kind,
		       const char *type, uint32_t ti, uint32_t i, uint64_t count,
		       struct gb_data *d)
{
	size_t esize = a->dtype ? rdps_npy_dtype_size(a->dtype) : 0;
	uint64_t elems = 1;
	int fits;

	if (!a->name || !a->name[0])
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data %u has no "
				    "name", kind, type, i);
	if (!esize)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data '%s' has "
				    "dtype '%s', not one of float32, float64, float16, bfloat16, "
				    "int64, int32, int16, int8, uint8, uint16, uint32, uint64, bool",
				    kind, type, a->name, a->dtype ? a->dtype : "(none)");
	if (a->ndim < 1 || a->ndim > RDPS_GRAPH_INPUT_MAX_NDIM || a->shape[0] != count)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data '%s' has %u "
				    "dimensions and %llu rows, want 1..%d and the type's %llu",
				    kind, type, a->name, a->ndim,
				    (unsigned long long)(a->ndim ? a->shape[0] : 0),
				    RDPS_GRAPH_INPUT_MAX_NDIM, (unsigned long long)count);
	for (uint32_t k = 1; k < a->ndim; k++) {
		if (!a->shape[k] || elems > UINT32_MAX / a->shape[k])
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data '%s': "
					    "dimension %u is %llu (a row must hold 1..2^32 "
					    "elements)", kind, type, a->name, k,
					    (unsigned long long)a->shape[k]);
		elems *= a->shape[k];
	}
	if (count && !a->data)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data '%s' has no "
				    "array", kind, type, a->name);
	memset(d, 0, sizeof(*d));
	d->a = a;
	d->type = ti;
	d->row_elems = (uint32_t)elems;
	fits = elems * esize <= (uint64_t)RDPS_MAX_DIM * 4;
	d->row_bytes = fits ? (uint32_t)(elems * esize) : 0;
	if (!fits || rdps_gb_table_dtype(a->dtype, d->row_elems, d->row_bytes, &d->table_dtype,
					 &d->table_elems))
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s type '%s': data '%s': a row "
				    "of %llu x %s is more than a table row holds (%d bytes)",
				    kind, type, a->name, (unsigned long long)elems, a->dtype,
				    RDPS_MAX_DIM * 4);
	return 0;
}

static int name_tables(struct gb *g)
{
	bool one = g->T == 1 && g->R == 1;

	for (uint32_t i = 0; i < g->ndata; i++) {
		struct gb_data *d = &g->data[i];
		const char *pre = d->edge ? RDPS_GRAPH_EDATA_PREFIX : RDPS_GRAPH_NDATA_PREFIX;
		int n;

		if (one)
			n = snprintf(d->table, sizeof(d->table), "%s%s", pre, d->a->name);
		else
			n = snprintf(d->table, sizeof(d->table), "%s%u:%s", pre, d->type,
				     d->a->name);
		if (n < 0 || (size_t)n >= sizeof(d->table)) {
			if (one)
				snprintf(d->table, sizeof(d->table), "%s#%u", pre, d->index);
			else
				snprintf(d->table, sizeof(d->table), "%s%u:#%u", pre, d->type,
					 d->index);
		}
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(g->data[j].table, d->table))
				return rdps_pt_fail(g->err, g->errlen, -EINVAL, "data '%s' and "
						    "'%s' would both be table '%s': rename one",
						    g->data[j].a->name, d->a->name, d->table);
	}
	return 0;
}

static int ntype_index(const struct gb *g, const char *name)
{
	for (uint32_t t = 0; name && t < g->T; t++)
		if (!strcmp(g->in->ntypes[t].name, name))
			return (int)t;
	return -1;
}

/* Everything about the input, before any work. */
static int validate(struct gb *g)
{
	const struct rdps_graph_input *in = g->in;
	uint32_t ndata = 0;
	int ret;

	g->T = in->num_ntypes;
	g->R = in->num_etypes;
	if (!g->T || !g->R || !in->ntypes || !in->etypes)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "a graph needs at least one node "
				    "type and one edge type (%u and %u given)", g->T, g->R);
	if (g->T > 65535 || g->R > 65535)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u node types and %u edge "
				    "types: at most 65535 each", g->T, g->R);
	g->node_off = calloc((size_t)g->T + 1, sizeof(uint64_t));
	g->edge_off = calloc((size_t)g->R + 1, sizeof(uint64_t));
	g->src_t = calloc(g->R, sizeof(uint32_t));
	g->dst_t = calloc(g->R, sizeof(uint32_t));
	if (!g->node_off || !g->edge_off || !g->src_t || !g->dst_t)
		return fail_oom(g);
	for (uint32_t t = 0; t < g->T; t++) {
		const struct rdps_graph_ntype_input *nt = &in->ntypes[t];

		if (!nt->name || !nt->name[0] || strchr(nt->name, ':'))
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node type %u: name '%s' "
					    "(want a non-empty name without ':')", t,
					    nt->name ? nt->name : "");
		if (ntype_index(g, nt->name) != (int)t)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node type '%s' given "
					    "twice", nt->name);
		if (nt->num_data && !nt->data)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node type '%s': %u data "
					    "without arrays", nt->name, nt->num_data);
		g->node_off[t + 1] = g->node_off[t] + nt->num_nodes;
		ndata += nt->num_data;
	}
	g->N = g->node_off[g->T];
	for (uint32_t e = 0; e < g->R; e++) {
		const struct rdps_graph_etype_input *et = &in->etypes[e];
		int s = ntype_index(g, et->src), d = ntype_index(g, et->dst);

		if (s < 0 || d < 0 || !et->name || !et->name[0] || strchr(et->name, ':'))
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type %u (%s, %s, %s): "
					    "%s", e, et->src ? et->src : "?",
					    et->name ? et->name : "?", et->dst ? et->dst : "?",
					    s < 0 || d < 0 ? "its source or destination is not a "
					    "node type of the graph" : "want a name without ':'");
		for (uint32_t e2 = 0; e2 < e; e2++)
			if ((int)g->src_t[e2] == s && (int)g->dst_t[e2] == d &&
			    !strcmp(in->etypes[e2].name, et->name))
				return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type (%s, %s, "
						    "%s) given twice", et->src, et->name, et->dst);
		g->src_t[e] = (uint32_t)s;
		g->dst_t[e] = (uint32_t)d;
		if (et->types && g->R != 1)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type (%s, %s, %s): "
					    "per-edge types are for a graph of one edge type (the "
					    "canonical edge types are the types here)", et->src,
					    et->name, et->dst);
		if (et->num_edges && (!et->src_ids || !et->dst_ids))
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type (%s, %s, %s): "
					    "%llu edges without their endpoints", et->src, et->name,
					    et->dst, (unsigned long long)et->num_edges);
		if (et->num_data && !et->data)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type (%s, %s, %s): "
					    "%u data without arrays", et->src, et->name, et->dst,
					    et->num_data);
		for (uint64_t i = 0; i < et->num_edges; i++) {
			int64_t a = et->src_ids[i], b = et->dst_ids[i];

			if (a < 0 || b < 0 || (uint64_t)a >= in->ntypes[s].num_nodes ||
			    (uint64_t)b >= in->ntypes[d].num_nodes)
				return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type (%s, %s, "
						    "%s): edge %llu (%lld -> %lld) is outside the "
						    "%llu '%s' and %llu '%s' nodes", et->src,
						    et->name, et->dst, (unsigned long long)i,
						    (long long)a, (long long)b,
						    (unsigned long long)in->ntypes[s].num_nodes,
						    et->src,
						    (unsigned long long)in->ntypes[d].num_nodes,
						    et->dst);
		}
		g->edge_off[e + 1] = g->edge_off[e] + et->num_edges;
		ndata += et->num_data;
	}
	g->E = g->edge_off[g->R];
	if (5 + ndata > RDPS_GRAPH_MAX_TABLES)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u node and edge data make %u "
				    "tables with the graph's 5: a graph may take at most %d of a "
				    "server's %d tables", ndata, ndata + 5, RDPS_GRAPH_MAX_TABLES,
				    RDPS_MAX_TABLES);
	if (g->o->trainers_per_part > 1 && g->o->method == RDPS_PARTITION_METIS &&
	    !g->o->assignment) {
		ndata += g->T + g->R; /* "trainer_id" of every type */
		if (5 + ndata > RDPS_GRAPH_MAX_TABLES)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u node and edge data with "
					    "the trainer ids make %u tables with the graph's 5: a "
					    "graph may take at most %d", ndata, ndata + 5,
					    RDPS_GRAPH_MAX_TABLES);
	}
	g->data = calloc(ndata ? ndata : 1, sizeof(*g->data));
	if (!g->data)
		return fail_oom(g);
	for (uint32_t t = 0; t < g->T; t++)
		for (uint32_t i = 0; i < in->ntypes[t].num_data; i++) {
			struct gb_data *d = &g->data[g->ndata];

			if ((ret = check_array(g, &in->ntypes[t].data[i], "node", in->ntypes[t].name,
					       t, i, in->ntypes[t].num_nodes, d)))
				return ret;
			d->index = i;
			for (uint32_t j = 0; j < i; j++)
				if (!strcmp(in->ntypes[t].data[j].name, d->a->name))
					return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node type "
							    "'%s': data '%s' given twice",
							    in->ntypes[t].name, d->a->name);
			g->ndata++;
		}
	g->num_ndata = g->ndata;
	for (uint32_t e = 0; e < g->R; e++)
		for (uint32_t i = 0; i < in->etypes[e].num_data; i++) {
			struct gb_data *d = &g->data[g->ndata];
			char et[256];

			snprintf(et, sizeof(et), "%s:%s:%s", in->etypes[e].src, in->etypes[e].name,
				 in->etypes[e].dst);
			if ((ret = check_array(g, &in->etypes[e].data[i], "edge", et, e, i,
					       in->etypes[e].num_edges, d)))
				return ret;
			d->edge = true;
			d->index = i;
			for (uint32_t j = 0; j < i; j++)
				if (!strcmp(in->etypes[e].data[j].name, d->a->name))
					return rdps_pt_fail(g->err, g->errlen, -EINVAL, "edge type "
							    "'%s': data '%s' given twice", et,
							    d->a->name);
			g->ndata++;
		}
	if ((ret = name_tables(g)))
		return ret;
	if (!g->o->k || g->o->k > g->N)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u parts of %llu nodes", g->o->k,
				    (unsigned long long)g->N);
	if (g->o->trainers_per_part > 1 &&
	    (uint64_t)g->o->k * g->o->trainers_per_part > g->N)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u parts of %u trainers each: "
				    "more than the %llu nodes", g->o->k, g->o->trainers_per_part,
				    (unsigned long long)g->N);
	if (g->o->assignment)
		for (uint64_t v = 0; v < g->N; v++)
			if (g->o->assignment[v] >= g->o->k)
				return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node %llu is "
						    "assigned part %u of %u",
						    (unsigned long long)v, g->o->assignment[v],
						    g->o->k);
	if (g->o->method == RDPS_PARTITION_METIS && g->o->k > 1 &&
	    (g->N > INT32_MAX || 2 * g->E > INT32_MAX))
		return rdps_pt_fail(g->err, g->errlen, -EOVERFLOW, "%llu nodes and %llu edges: "
				    "more than METIS' 32-bit indices hold (use --method random)",
				    (unsigned long long)g->N, (unsigned long long)g->E);
	return 0;
}

/* A train_mask of type t as 0/1 per node (NULL if it has none). */
static const struct rdps_graph_array *train_mask(const struct rdps_graph_ntype_input *nt)
{
	for (uint32_t i = 0; i < nt->num_data; i++)
		if (!strcmp(nt->data[i].name, "train_mask") && nt->data[i].ndim == 1 &&
		    rdps_npy_dtype_size(nt->data[i].dtype) <= 8)
			return &nt->data[i];
	return NULL;
}

bool rdps_gb_mask_set(const struct rdps_graph_array *m, uint64_t i)
{
	size_t es = rdps_npy_dtype_size(m->dtype);
	const unsigned char *p = (const unsigned char *)m->data + i * es;

	for (size_t b = 0; b < es; b++)
		if (p[b])
			return true;
	return false;
}

/* The class of every node METIS balances (see partition.h); *ncls classes. */
static int balance_classes(struct gb *g, uint32_t **cls, uint32_t *ncls)
{
	const struct rdps_graph_input *in = g->in;
	bool any_balance = false;
	uint32_t next = 0;

	*cls = calloc(g->N ? g->N : 1, sizeof(uint32_t));
	if (!*cls)
		return fail_oom(g);
	for (uint32_t t = 0; t < g->T; t++)
		any_balance |= in->ntypes[t].balance != NULL;
	for (uint32_t t = 0; t < g->T; t++) {
		const struct rdps_graph_ntype_input *nt = &in->ntypes[t];
		const struct rdps_graph_array *m = g->o->balance_train ? train_mask(nt) : NULL;
		uint32_t *c = *cls + g->node_off[t];

		if (any_balance && nt->balance) {
			int64_t max = -1;
			uint32_t *dense;

			for (uint64_t v = 0; v < nt->num_nodes; v++) {
				if (nt->balance[v] < 0 || nt->balance[v] >= MAX_CLASSES)
					return rdps_pt_fail(g->err, g->errlen, -EINVAL, "node type "
							    "'%s': balance class %lld of node %llu "
							    "(want 0..%d)", nt->name,
							    (long long)nt->balance[v],
							    (unsigned long long)v, MAX_CLASSES - 1);
				if (nt->balance[v] > max)
					max = nt->balance[v];
			}
			dense = malloc(((size_t)max + 2) * sizeof(uint32_t));
			if (!dense)
				return fail_oom(g);
			memset(dense, 0xff, ((size_t)max + 2) * sizeof(uint32_t));
			for (uint64_t v = 0; v < nt->num_nodes; v++) {
				uint32_t *x = &dense[nt->balance[v]];

				if (*x == UINT32_MAX)
					*x = next++;
				c[v] = *x;
			}
			free(dense);
		} else if (m) {
			uint32_t base = next;

			next += 2;
			for (uint64_t v = 0; v < nt->num_nodes; v++)
				c[v] = base + (rdps_gb_mask_set(m, v) ? 1 : 0);
		} else {
			uint32_t base = next++;

			for (uint64_t v = 0; v < nt->num_nodes; v++)
				c[v] = base;
		}
		if (next > MAX_CLASSES)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%u balance classes over the "
					    "node types: at most %d", next, MAX_CLASSES);
	}
	*ncls = next ? next : 1;
	return 0;
}

static int cmp_idx(const void *a, const void *b)
{
	idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;

	return (x > y) - (x < y);
}

/* Input homo ids of edge x's endpoints. */
static inline void endpoints(const struct gb *g, uint32_t e, uint64_t i, uint64_t *s, uint64_t *d)
{
	*s = g->node_off[g->src_t[e]] + (uint64_t)g->in->etypes[e].src_ids[i];
	*d = g->node_off[g->dst_t[e]] + (uint64_t)g->in->etypes[e].dst_ids[i];
}

/* METIS on the undirected graph of every edge (parallel ones merged, their
 * count the weight); a constraint per class, [in-edges]. */
static int part_metis(struct gb *g)
{
	uint32_t t = g->o->trainers_per_part > 1 ? g->o->trainers_per_part : 1;
	idx_t nv = (idx_t)g->N, ncon, nparts = (idx_t)(g->o->k * t), objval = 0;
	idx_t options[METIS_NOPTIONS], *xadj = NULL, *adj = NULL, *wgt = NULL, *vwgt = NULL;
	idx_t *part = NULL, *pos = NULL;
	real_t *ubvec = NULL;
	uint64_t *deg = NULL, w = 0;
	uint32_t *cls = NULL, ncls = 0;
	int ret, r, c_edges = -1;

	if ((ret = balance_classes(g, &cls, &ncls)))
		goto out;
	ncon = (idx_t)ncls;
	if (g->o->balance_edges)
		c_edges = ncon++;
	deg = calloc(g->N + 1, sizeof(uint64_t));
	xadj = malloc((g->N + 1) * sizeof(idx_t));
	pos = malloc((g->N + 1) * sizeof(idx_t));
	adj = malloc((2 * g->E + 1) * sizeof(idx_t));
	wgt = malloc((2 * g->E + 1) * sizeof(idx_t));
	vwgt = calloc(g->N * (size_t)ncon, sizeof(idx_t));
	part = malloc(g->N * sizeof(idx_t));
	ubvec = malloc((size_t)ncon * sizeof(real_t));
	if (!deg || !xadj || !pos || !adj || !wgt || !vwgt || !part || !ubvec) {
		ret = fail_oom(g);
		goto out;
	}
	for (idx_t c = 0; c < ncon; c++)
		ubvec[c] = 1.05f;
	for (uint32_t e = 0; e < g->R; e++)
		for (uint64_t i = 0; i < g->in->etypes[e].num_edges; i++) {
			uint64_t s, d;

			endpoints(g, e, i, &s, &d);
			deg[s]++;
			deg[d]++;
		}
	xadj[0] = 0;
	for (uint64_t v = 0; v < g->N; v++)
		xadj[v + 1] = xadj[v] + (idx_t)deg[v];
	memcpy(pos, xadj, (g->N + 1) * sizeof(idx_t));
	for (uint32_t e = 0; e < g->R; e++)
		for (uint64_t i = 0; i < g->in->etypes[e].num_edges; i++) {
			uint64_t s, d;

			endpoints(g, e, i, &s, &d);
			adj[pos[s]++] = (idx_t)d;
			adj[pos[d]++] = (idx_t)s;
			if (c_edges >= 0)
				vwgt[d * (size_t)ncon + (size_t)c_edges]++;
		}
	/* sorted, self-loops dropped, repeats merged into a weight */
	for (uint64_t v = 0; v < g->N; v++) {
		idx_t s = xadj[v], e = xadj[v + 1];

		qsort(adj + s, (size_t)(e - s), sizeof(idx_t), cmp_idx);
		xadj[v] = (idx_t)w;
		for (idx_t i = s; i < e;) {
			idx_t j = i;

			while (j < e && adj[j] == adj[i])
				j++;
			if (adj[i] != (idx_t)v) {
				adj[w] = adj[i];
				wgt[w] = j - i;
				w++;
			}
			i = j;
		}
	}
	xadj[g->N] = (idx_t)w;
	for (uint64_t v = 0; v < g->N; v++)
		vwgt[v * (size_t)ncon + cls[v]] = 1;
	METIS_SetDefaultOptions(options);
	options[METIS_OPTION_SEED] = (idx_t)(g->o->seed & 0x7fffffff);
	options[METIS_OPTION_NUMBERING] = 0;
	rdps_info("graph partition: METIS_PartGraphKway k=%d on %llu nodes, %llu distinct "
		  "undirected edges, %d constraint(s): %u balance class(es)%s", (int)nparts,
		  (unsigned long long)g->N, (unsigned long long)w / 2, (int)ncon, ncls,
		  c_edges >= 0 ? ", in-edges" : "");
	r = METIS_PartGraphKway(&nv, &ncon, xadj, adj, vwgt, NULL, wgt, &nparts, NULL, ubvec,
				options, &objval, part);
	if (r != METIS_OK) {
		ret = rdps_pt_fail(g->err, g->errlen, r == METIS_ERROR_MEMORY ? -ENOMEM : -EIO,
				   "METIS failed (%d)", r);
		goto out;
	}
	for (uint64_t v = 0; v < g->N; v++) {
		g->part[v] = (uint32_t)part[v] / t;
		if (g->trainer)
			g->trainer[v] = part[v];
	}
out:
	free(cls);
	free(deg);
	free(xadj);
	free(pos);
	free(adj);
	free(wgt);
	free(vwgt);
	free(part);
	free(ubvec);
	return ret;
}

static int part_random(struct gb *g)
{
	uint64_t s = g->o->seed, *perm = malloc(g->N * sizeof(uint64_t));

	if (!perm)
		return fail_oom(g);
	/* a seeded shuffle, cut into k equal ranges */
	for (uint64_t i = 0; i < g->N; i++)
		perm[i] = i;
	for (uint64_t i = g->N; i > 1; i--) {
		uint64_t j = rdps_pt_below(rdps_pt_splitmix(&s), i), t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	for (uint64_t i = 0; i < g->N; i++)
		g->part[perm[i]] = (uint32_t)(i * g->o->k / g->N);
	free(perm);
	return 0;
}

/* New homo ids: part after part, type after type, input order inside. */
static int relabel(struct gb *g)
{
	uint32_t k = g->o->k, T = g->T;
	uint64_t *next = calloc(k, sizeof(uint64_t));

	if (!next)
		return fail_oom(g);
	for (uint32_t t = 0; t < T; t++)
		for (uint64_t v = g->node_off[t]; v < g->node_off[t + 1]; v++)
			g->tcount[(size_t)g->part[v] * T + t]++;
	for (uint32_t p = 0; p < k; p++) {
		uint64_t at = g->node_ranges[p];

		for (uint32_t t = 0; t < T; t++) {
			g->tlo[(size_t)p * T + t] = at;
			at += g->tcount[(size_t)p * T + t];
		}
		g->node_ranges[p + 1] = at;
	}
	for (uint32_t t = 0; t < T; t++) {
		memset(next, 0, k * sizeof(uint64_t));
		for (uint64_t v = g->node_off[t]; v < g->node_off[t + 1]; v++) {
			uint32_t p = g->part[v];
			uint64_t h = g->tlo[(size_t)p * T + t] + next[p]++;

			g->old2new[v] = h;
			g->new2old[h] = v;
			g->ntype[h] = (uint16_t)t;
		}
	}
	free(next);
	return 0;
}

/* Per type, the etypes into it (in) and out of it, and each etype's
 * position among them; slot bases per node. */
static int slots(struct gb *g)
{
	uint32_t T = g->T, R = g->R;

	g->nin = calloc(T, sizeof(uint32_t));
	g->nout = calloc(T, sizeof(uint32_t));
	g->in_pos = calloc(R, sizeof(uint32_t));
	g->out_pos = calloc(R, sizeof(uint32_t));
	g->in_slot = malloc((g->N + 1) * sizeof(uint64_t));
	g->out_slot = malloc((g->N + 1) * sizeof(uint64_t));
	if (!g->nin || !g->nout || !g->in_pos || !g->out_pos || !g->in_slot || !g->out_slot)
		return fail_oom(g);
	for (uint32_t e = 0; e < R; e++) {
		g->in_pos[e] = g->nin[g->dst_t[e]]++;
		g->out_pos[e] = g->nout[g->src_t[e]]++;
	}
	g->in_slot[0] = g->out_slot[0] = 0;
	for (uint64_t h = 0; h < g->N; h++) {
		g->in_slot[h + 1] = g->in_slot[h] + g->nin[g->ntype[h]];
		g->out_slot[h + 1] = g->out_slot[h] + g->nout[g->ntype[h]];
	}
	return 0;
}

/* Edge order: part (of the destination), etype, destination, input order;
 * new edge id = position. Two stable counting sorts. Then every in-slot's
 * range, and the out-edge lists by out-slot, each slot's by edge id. */
static int order_edges(struct gb *g)
{
	uint32_t k = g->o->k, R = g->R;
	uint64_t *cnt = NULL, *tmp = NULL, nb;
	int ret = 0;

	g->e_type = malloc((g->E + 1) * sizeof(uint32_t));
	g->e_src = malloc((g->E + 1) * sizeof(uint64_t));
	g->e_dst = malloc((g->E + 1) * sizeof(uint64_t));
	g->order = malloc((g->E + 1) * sizeof(uint64_t));
	tmp = malloc((g->E + 1) * sizeof(uint64_t));
	nb = g->N > (uint64_t)k * R ? g->N : (uint64_t)k * R;
	cnt = calloc(nb + 1, sizeof(uint64_t));
	g->inptr = malloc((g->in_slot[g->N] + 1) * 2 * sizeof(int64_t));
	g->outptr = malloc((g->out_slot[g->N] + 1) * 2 * sizeof(int64_t));
	g->outlist = malloc((g->E + 1) * sizeof(uint64_t));
	if (!g->e_type || !g->e_src || !g->e_dst || !g->order || !tmp || !cnt || !g->inptr ||
	    !g->outptr || !g->outlist) {
		ret = fail_oom(g);
		goto out;
	}
	for (uint32_t e = 0; e < R; e++)
		for (uint64_t i = 0; i < g->in->etypes[e].num_edges; i++) {
			uint64_t x = g->edge_off[e] + i, s, d;

			endpoints(g, e, i, &s, &d);
			g->e_type[x] = e;
			g->e_src[x] = g->old2new[s];
			g->e_dst[x] = g->old2new[d];
		}
	/* by destination */
	for (uint64_t x = 0; x < g->E; x++)
		cnt[g->e_dst[x] + 1]++;
	for (uint64_t v = 0; v < g->N; v++)
		cnt[v + 1] += cnt[v];
	for (uint64_t x = 0; x < g->E; x++)
		tmp[cnt[g->e_dst[x]]++] = x;
	/* then by (part, etype), stable */
	memset(cnt, 0, (nb + 1) * sizeof(uint64_t));
#define PE_KEY(x) ((uint64_t)g->part[g->new2old[g->e_dst[x]]] * R + g->e_type[x])
	for (uint64_t y = 0; y < g->E; y++)
		cnt[PE_KEY(tmp[y]) + 1]++;
	for (uint64_t b = 0; b < (uint64_t)k * R; b++)
		cnt[b + 1] += cnt[b];
	for (uint32_t p = 0; p < k; p++) {
		g->edge_ranges[p] = cnt[(uint64_t)p * R];
		for (uint32_t e = 0; e < R; e++) {
			g->elo[(size_t)p * R + e] = cnt[(uint64_t)p * R + e];
			g->ecount[(size_t)p * R + e] = cnt[(uint64_t)p * R + e + 1] -
						       cnt[(uint64_t)p * R + e];
		}
	}
	g->edge_ranges[k] = g->E;
	for (uint64_t y = 0; y < g->E; y++)
		g->order[cnt[PE_KEY(tmp[y])]++] = tmp[y];
#undef PE_KEY
	/* in-slots: empty ones at the start of their etype's range in the part */
	{
		uint32_t *in_list = malloc(((size_t)R + 1) * sizeof(uint32_t));
		uint32_t *in_first = calloc((size_t)g->T + 1, sizeof(uint32_t));

		if (!in_list || !in_first) {
			free(in_list);
			free(in_first);
			ret = fail_oom(g);
			goto out;
		}
		for (uint32_t e = 0; e < R; e++)
			in_first[g->dst_t[e] + 1]++;
		for (uint32_t t = 0; t < g->T; t++)
			in_first[t + 1] += in_first[t];
		for (uint32_t e = 0; e < R; e++)
			in_list[in_first[g->dst_t[e]] + g->in_pos[e]] = e;
		for (uint64_t h = 0; h < g->N; h++) {
			uint32_t p = g->part[g->new2old[h]], t = g->ntype[h];

			for (uint32_t j = 0; j < g->nin[t]; j++) {
				uint64_t s = g->in_slot[h] + j;
				uint32_t e = in_list[in_first[t] + j];

				g->inptr[2 * s] = g->inptr[2 * s + 1] = (int64_t)g->elo[(size_t)p * R + e];
			}
		}
		free(in_list);
		free(in_first);
	}
	for (uint64_t y = 0; y < g->E; y++) {
		uint64_t x = g->order[y];
		uint64_t s = g->in_slot[g->e_dst[x]] + g->in_pos[g->e_type[x]];

		if (y == 0 || g->inptr[2 * s + 1] != (int64_t)y)
			g->inptr[2 * s] = (int64_t)y;
		g->inptr[2 * s + 1] = (int64_t)y + 1;
	}
	/* out-lists: counting sort of edge ids by out-slot */
	free(cnt);
	cnt = calloc(g->out_slot[g->N] + 1, sizeof(uint64_t));
	if (!cnt) {
		ret = fail_oom(g);
		goto out;
	}
	for (uint64_t y = 0; y < g->E; y++) {
		uint64_t x = g->order[y];

		cnt[g->out_slot[g->e_src[x]] + g->out_pos[g->e_type[x]] + 1]++;
	}
	for (uint64_t s = 0; s < g->out_slot[g->N]; s++)
		cnt[s + 1] += cnt[s];
	for (uint64_t s = 0; s < g->out_slot[g->N]; s++) {
		g->outptr[2 * s] = (int64_t)cnt[s];
		g->outptr[2 * s + 1] = (int64_t)cnt[s + 1];
	}
	for (uint64_t y = 0; y < g->E; y++) {
		uint64_t x = g->order[y];

		g->outlist[cnt[g->out_slot[g->e_src[x]] + g->out_pos[g->e_type[x]]]++] = y;
	}
out:
	free(cnt);
	free(tmp);
	return ret;
}

/* "trainer_id" of every node type (its nodes' trainers) and edge type
 * (its destinations'), appended to the data. */
static int trainer_data(struct gb *g)
{
	uint32_t n = g->T + g->R;
	int ret;

	g->made = calloc(n, sizeof(*g->made));
	g->made_rows = calloc(n, sizeof(*g->made_rows));
	if (!g->made || !g->made_rows)
		return fail_oom(g);
	for (uint32_t i = 0; i < n; i++) {
		bool edge = i >= g->T;
		uint32_t ty = edge ? i - g->T : i;
		uint64_t rows = edge ? g->in->etypes[ty].num_edges : g->in->ntypes[ty].num_nodes;
		struct rdps_graph_array *a = &g->made[i];
		struct gb_data *d = &g->data[g->ndata];
		int64_t *r = malloc((rows + 1) * sizeof(int64_t));

		if (!r)
			return fail_oom(g);
		g->made_rows[g->num_made++] = r;
		for (uint64_t j = 0; j < rows; j++) {
			uint64_t s, dst;

			if (edge) {
				endpoints(g, ty, j, &s, &dst);
				r[j] = g->trainer[dst];
			} else {
				r[j] = g->trainer[g->node_off[ty] + j];
			}
		}
		*a = (struct rdps_graph_array){ .name = "trainer_id", .dtype = "int64", .ndim = 1,
						.shape = { rows }, .data = r };
		if ((ret = check_array(g, a, edge ? "edge" : "node",
				       edge ? g->in->etypes[ty].name : g->in->ntypes[ty].name, ty,
				       0, rows, d)))
			return ret;
		d->edge = edge;
		d->index = edge ? g->in->etypes[ty].num_data : g->in->ntypes[ty].num_data;
		for (uint32_t j = 0; j < (edge ? g->in->etypes[ty].num_data
					       : g->in->ntypes[ty].num_data); j++)
			if (!strcmp((edge ? g->in->etypes[ty].data : g->in->ntypes[ty].data)[j].name,
				    "trainer_id"))
				return rdps_pt_fail(g->err, g->errlen, -EINVAL, "type '%s' has a "
						    "data 'trainer_id' of its own: the trainer "
						    "ids would replace it",
						    edge ? g->in->etypes[ty].name
							 : g->in->ntypes[ty].name);
		g->ndata++;
	}
	return name_tables(g);
}

void rdps_gb_free(struct gb *g)
{
	for (uint32_t i = 0; i < g->num_made; i++)
		free(g->made_rows[i]);
	free(g->made_rows);
	free(g->made);
	free(g->trainer);
	free(g->node_off);
	free(g->edge_off);
	free(g->src_t);
	free(g->dst_t);
	free(g->data);
	free(g->part);
	free(g->old2new);
	free(g->new2old);
	free(g->ntype);
	free(g->node_ranges);
	free(g->edge_ranges);
	free(g->tcount);
	free(g->tlo);
	free(g->ecount);
	free(g->elo);
	free(g->nin);
	free(g->nout);
	free(g->in_pos);
	free(g->out_pos);
	free(g->in_slot);
	free(g->out_slot);
	free(g->e_type);
	free(g->e_src);
	free(g->e_dst);
	free(g->order);
	free(g->inptr);
	free(g->outptr);
	free(g->outlist);
}

int rdps_graph_partition_build_input(const struct rdps_graph_input *in,
				     const struct rdps_graph_partition_opts *o,
				     struct rdps_graph_partition_result *res, char *err,
				     size_t errlen)
{
	struct gb g = { .in = in, .o = o, .err = err, .errlen = errlen };
	uint64_t t0 = rdps_now_ns();
	struct rusage ru;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!in || !o || !o->out_dir || !o->k)
		return rdps_pt_fail(err, errlen, -EINVAL, "a graph, out and k are required");
	if (!rdps_partition_method_name(o->method))
		return rdps_pt_fail(err, errlen, -EINVAL, "unknown method %d", (int)o->method);
	if ((ret = validate(&g)))
		goto out;
	g.part = calloc(g.N + 1, sizeof(uint32_t));
	g.old2new = malloc((g.N + 1) * sizeof(uint64_t));
	g.new2old = malloc((g.N + 1) * sizeof(uint64_t));
	g.ntype = malloc((g.N + 1) * sizeof(uint16_t));
	g.node_ranges = calloc((size_t)o->k + 1, sizeof(uint64_t));
	g.edge_ranges = calloc((size_t)o->k + 1, sizeof(uint64_t));
	g.tcount = calloc((size_t)o->k * g.T, sizeof(uint64_t));
	g.tlo = calloc((size_t)o->k * g.T, sizeof(uint64_t));
	g.ecount = calloc((size_t)o->k * g.R, sizeof(uint64_t));
	g.elo = calloc((size_t)o->k * g.R, sizeof(uint64_t));
	if (!g.part || !g.old2new || !g.new2old || !g.ntype || !g.node_ranges ||
	    !g.edge_ranges || !g.tcount || !g.tlo || !g.ecount || !g.elo) {
		ret = fail_oom(&g);
		goto out;
	}
	if (o->assignment) {
		memcpy(g.part, o->assignment, g.N * sizeof(uint32_t));
	} else if (o->method == RDPS_PARTITION_METIS && o->trainers_per_part > 1) {
		g.trainer = calloc(g.N + 1, sizeof(int64_t));
		if (!g.trainer) {
			ret = fail_oom(&g);
			goto out;
		}
		if (!(ret = part_metis(&g)))
			ret = trainer_data(&g);
	} else if (o->method == RDPS_PARTITION_METIS && o->k > 1) {
		ret = part_metis(&g);
	} else if (o->method == RDPS_PARTITION_RANDOM) {
		ret = part_random(&g);
	}
	if (ret || (ret = relabel(&g)) || (ret = slots(&g)) || (ret = order_edges(&g)))
		goto out;
	if ((ret = rdps_gb_write(&g, res)))
		goto out;
	res->seconds = (rdps_now_ns() - t0) / 1e9;
	res->peak_rss_kib = getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_maxrss;
out:
	rdps_gb_free(&g);
	return ret;
}

int rdps_graph_partition_build(const struct rdps_graph_partition_opts *o,
			       struct rdps_graph_partition_result *res, char *err,
			       size_t errlen)
{
	struct rdps_gb_dataset ds;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!o->data_dir || !o->out_dir || !o->k)
		return rdps_pt_fail(err, errlen, -EINVAL, "data, out and k are required");
	if ((ret = rdps_gb_dataset_load(o->data_dir, &ds, err, errlen)))
		return ret;
	ret = rdps_graph_partition_build_input(&ds.in, o, res, err, errlen);
	rdps_gb_dataset_free(&ds);
	return ret;
}
