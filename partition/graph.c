// SPDX-License-Identifier: MIT
/*
 * rdps_graph_partition_build: a node-classification graph (graph.json,
 * edges.npy, etypes.npy, features.npy, labels.npy, *_mask.npy, as `rdps
 * dataset wordnet-nodes` writes it) -> a graph partition directory (see
 * rdps/partition.h): METIS balanced on nodes and, as asked, on in-edges and
 * training nodes (one constraint each, as DGL's --balance_edges and
 * --balance_train), node ids relabeled so each part is one contiguous range,
 * each part holding its nodes' in-edges (CSR) and their data.
 */
#include <errno.h>
#include <jansson.h>
#include <metis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/npy.h"
#include "internal.h"
#include "rdps/common.h"
#include "rdps/partition.h"

struct gbuild {
	const struct rdps_graph_partition_opts *o;
	char *err;
	size_t errlen;
	uint64_t n, e, feat_dim;
	int64_t *edges;      /* e x 2: src, dst (original ids) */
	int64_t *etypes;     /* e */
	float *feat;         /* n x feat_dim */
	int64_t *labels;     /* n */
	uint8_t *mask[3];    /* train, val, test */
	uint32_t *part;      /* n: part of each original node */
	uint64_t *ranges;    /* k + 1 */
	int64_t *old2new, *new2old;
	json_t *meta;        /* graph.json */
	struct rdps_pt_outdir od;
};

static const char *const mask_names[3] = { "train_mask", "val_mask", "test_mask" };

static int load(struct gbuild *g)
{
	char path[4096];
	uint64_t rows, cols;
	json_error_t je;
	int ret;

	snprintf(path, sizeof(path), "%s/graph.json", g->o->data_dir);
	g->meta = json_load_file(path, 0, &je);
	if (!g->meta)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s:%d: %s (a graph dataset: rdps "
				    "dataset wordnet-nodes)", path, je.line, je.text);
	snprintf(path, sizeof(path), "%s/edges.npy", g->o->data_dir);
	ret = rdps_npy_read(path, "<i8", (void **)&g->edges, &g->e, &cols, g->err, g->errlen);
	if (ret)
		return ret;
	if (cols != 2)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s: want E x 2 (src, dst)", path);
	snprintf(path, sizeof(path), "%s/etypes.npy", g->o->data_dir);
	ret = rdps_npy_read(path, "<i8", (void **)&g->etypes, &rows, &cols, g->err, g->errlen);
	if (ret)
		return ret;
	if (rows != g->e || cols)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s: %llu types for %llu edges", path,
				    (unsigned long long)rows, (unsigned long long)g->e);
	snprintf(path, sizeof(path), "%s/features.npy", g->o->data_dir);
	ret = rdps_npy_read(path, "<f4", (void **)&g->feat, &g->n, &g->feat_dim, g->err, g->errlen);
	if (ret)
		return ret;
	if (!g->n || !g->feat_dim)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s: want N x F features", path);
	snprintf(path, sizeof(path), "%s/labels.npy", g->o->data_dir);
	ret = rdps_npy_read(path, "<i8", (void **)&g->labels, &rows, &cols, g->err, g->errlen);
	if (ret)
		return ret;
	if (rows != g->n || cols)
		return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s: %llu labels for %llu nodes",
				    path, (unsigned long long)rows, (unsigned long long)g->n);
	for (int m = 0; m < 3; m++) {
		snprintf(path, sizeof(path), "%s/%s.npy", g->o->data_dir, mask_names[m]);
		ret = rdps_npy_read(path, "|u1", (void **)&g->mask[m], &rows, &cols, g->err,
				    g->errlen);
		if (ret)
			return ret;
		if (rows != g->n || cols)
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s: %llu entries for %llu "
					    "nodes", path, (unsigned long long)rows,
					    (unsigned long long)g->n);
	}
	for (uint64_t i = 0; i < g->e; i++) {
		int64_t s = g->edges[2 * i], d = g->edges[2 * i + 1];

		if (s < 0 || d < 0 || (uint64_t)s >= g->n || (uint64_t)d >= g->n ||
		    g->etypes[i] < 0 || g->etypes[i] >= (1ll << 23))
			return rdps_pt_fail(g->err, g->errlen, -EINVAL, "%s/edges.npy: edge %llu "
					    "(%lld -> %lld, type %lld) is outside the %llu nodes or "
					    "2^23 types", g->o->data_dir, (unsigned long long)i,
					    (long long)s, (long long)d, (long long)g->etypes[i],
					    (unsigned long long)g->n);
	}
	if (g->n > INT32_MAX || 2 * g->e > INT32_MAX)
		return rdps_pt_fail(g->err, g->errlen, -EOVERFLOW, "%llu nodes and %llu edges: "
				    "more than METIS' 32-bit indices hold",
				    (unsigned long long)g->n, (unsigned long long)g->e);
	return 0;
}

static int cmp_idx(const void *a, const void *b)
{
	idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;

	return (x > y) - (x < y);
}

/* METIS on the undirected graph of the edges (parallel ones merged, their
 * count the weight), constraints: nodes, [in-edges], [training nodes]. */
static int part_metis(struct gbuild *g)
{
	idx_t nv = (idx_t)g->n, ncon = 1, nparts = (idx_t)g->o->k, objval = 0;
	idx_t options[METIS_NOPTIONS], *xadj, *adj, *wgt, *vwgt, *part, *pos;
	real_t ubvec[3] = { 1.05f, 1.05f, 1.05f };
	uint64_t *deg = calloc(g->n + 1, sizeof(uint64_t)), w = 0;
	int ret = 0, r, c_edges = -1, c_train = -1;

	if (g->o->balance_edges)
		c_edges = ncon++;
	if (g->o->balance_train)
		c_train = ncon++;
	xadj = malloc((g->n + 1) * sizeof(idx_t));
	pos = malloc((g->n + 1) * sizeof(idx_t));
	adj = malloc((2 * g->e + 1) * sizeof(idx_t));
	wgt = malloc((2 * g->e + 1) * sizeof(idx_t));
	vwgt = calloc(g->n * (size_t)ncon, sizeof(idx_t));
	part = malloc(g->n * sizeof(idx_t));
	if (!deg || !xadj || !pos || !adj || !wgt || !vwgt || !part) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < g->e; i++) {
		deg[g->edges[2 * i]]++;
		deg[g->edges[2 * i + 1]]++;
	}
	xadj[0] = 0;
	for (uint64_t v = 0; v < g->n; v++)
		xadj[v + 1] = xadj[v] + (idx_t)deg[v];
	memcpy(pos, xadj, (g->n + 1) * sizeof(idx_t));
	for (uint64_t i = 0; i < g->e; i++) {
		idx_t s = (idx_t)g->edges[2 * i], d = (idx_t)g->edges[2 * i + 1];

		adj[pos[s]++] = d;
		adj[pos[d]++] = s;
	}
	/* sorted, self-loops dropped, repeats merged into a weight */
	for (uint64_t v = 0; v < g->n; v++) {
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
	xadj[g->n] = (idx_t)w;
	for (uint64_t i = 0; i < g->e; i++)
		if (c_edges >= 0)
			vwgt[(size_t)g->edges[2 * i + 1] * ncon + c_edges]++;
	for (uint64_t v = 0; v < g->n; v++) {
		vwgt[v * ncon] = 1;
		if (c_train >= 0)
			vwgt[v * ncon + c_train] = g->mask[0][v] ? 1 : 0;
	}
	METIS_SetDefaultOptions(options);
	options[METIS_OPTION_SEED] = (idx_t)(g->o->seed & 0x7fffffff);
	options[METIS_OPTION_NUMBERING] = 0;
	rdps_info("graph partition: METIS_PartGraphKway k=%u on %llu nodes, %llu distinct "
		  "undirected edges, %d constraint(s): nodes%s%s", g->o->k,
		  (unsigned long long)g->n, (unsigned long long)w / 2, (int)ncon,
		  c_edges >= 0 ? ", in-edges" : "", c_train >= 0 ? ", training nodes" : "");
	r = METIS_PartGraphKway(&nv, &ncon, xadj, adj, vwgt, NULL, wgt, &nparts, NULL, ubvec,
				options, &objval, part);
	if (r != METIS_OK) {
		ret = rdps_pt_fail(g->err, g->errlen, r == METIS_ERROR_MEMORY ? -ENOMEM : -EIO,
				   "METIS failed (%d)", r);
		goto out;
	}
	for (uint64_t v = 0; v < g->n; v++)
		g->part[v] = (uint32_t)part[v];
out:
	free(deg);
	free(xadj);
	free(pos);
	free(adj);
	free(wgt);
	free(vwgt);
	free(part);
	return ret;
}

static void part_random(struct gbuild *g)
{
	uint64_t s = g->o->seed;

	/* a seeded shuffle, cut into k equal ranges */
	for (uint64_t i = 0; i < g->n; i++)
		g->new2old[i] = (int64_t)i;
	for (uint64_t i = g->n; i > 1; i--) {
		uint64_t j = rdps_pt_below(rdps_pt_splitmix(&s), i);
		int64_t t = g->new2old[i - 1];

		g->new2old[i - 1] = g->new2old[j];
		g->new2old[j] = t;
	}
	for (uint64_t i = 0; i < g->n; i++)
		g->part[g->new2old[i]] = (uint32_t)(i * g->o->k / g->n);
}

static void relabel(struct gbuild *g)
{
	uint64_t *next = calloc(g->o->k, sizeof(uint64_t));

	memset(g->ranges, 0, ((size_t)g->o->k + 1) * sizeof(uint64_t));
	for (uint64_t v = 0; v < g->n; v++)
		g->ranges[g->part[v] + 1]++;
	for (uint32_t p = 0; p < g->o->k; p++)
		g->ranges[p + 1] += g->ranges[p];
	for (uint32_t p = 0; p < g->o->k; p++)
		next[p] = g->ranges[p];
	/* within a part, in original order */
	for (uint64_t v = 0; v < g->n; v++) {
		uint64_t nid = next[g->part[v]]++;

		g->old2new[v] = (int64_t)nid;
		g->new2old[nid] = (int64_t)v;
	}
	free(next);
}

static int write_npy(struct gbuild *g, const char *name, const char *descr, const void *data,
		     uint64_t rows, uint64_t cols)
{
	char *path = rdps_pt_outdir_path(&g->od, name);
	int ret;

	if (!path)
		return -ENOMEM;
	ret = rdps_npy_write(path, descr, data, rows, cols, g->err, g->errlen);
	free(path);
	return ret;
}

/* Part p: its nodes' in-edges as CSR (sources by new id), their data. */
static int write_part(struct gbuild *g, uint32_t p, const uint64_t *in_off, const uint64_t *in_edge,
		      uint64_t *part_edges, uint64_t *local_edges)
{
	uint64_t lo = g->ranges[p], np = g->ranges[p + 1] - lo, ne = 0, local = 0;
	int64_t *indptr, *indices, *et, *eid, *lab;
	float *feat;
	uint8_t *mask[3];
	char name[64];
	int ret = -ENOMEM;

	for (uint64_t i = 0; i < np; i++) {
		uint64_t old = (uint64_t)g->new2old[lo + i];

		ne += in_off[old + 1] - in_off[old];
	}
	indptr = malloc((np + 1) * sizeof(int64_t));
	indices = malloc((ne + 1) * sizeof(int64_t));
	et = malloc((ne + 1) * sizeof(int64_t));
	eid = malloc((ne + 1) * sizeof(int64_t));
	lab = malloc((np + 1) * sizeof(int64_t));
	feat = malloc((np + 1) * g->feat_dim * sizeof(float));
	for (int m = 0; m < 3; m++)
		mask[m] = malloc(np + 1);
	if (!indptr || !indices || !et || !eid || !lab || !feat || !mask[0] || !mask[1] || !mask[2])
		goto out;
	indptr[0] = 0;
	ne = 0;
	for (uint64_t i = 0; i < np; i++) {
		uint64_t old = (uint64_t)g->new2old[lo + i];

		for (uint64_t k = in_off[old]; k < in_off[old + 1]; k++) {
			uint64_t x = in_edge[k];
			int64_t src = g->old2new[g->edges[2 * x]];

			indices[ne] = src;
			et[ne] = g->etypes[x];
			eid[ne] = (int64_t)x;
			local += (uint64_t)src >= lo && (uint64_t)src < g->ranges[p + 1];
			ne++;
		}
		indptr[i + 1] = (int64_t)ne;
		lab[i] = g->labels[old];
		memcpy(feat + i * g->feat_dim, g->feat + old * g->feat_dim, g->feat_dim * sizeof(float));
		for (int m = 0; m < 3; m++)
			mask[m][i] = g->mask[m][old] ? 1 : 0;
	}
#define PART_NPY(file, descr, data, rows, cols)                                 \
	do {                                                                    \
		snprintf(name, sizeof(name), "part-%u-%s.npy", p, file);          \
		if ((ret = write_npy(g, name, descr, data, rows, cols)))          \
			goto out;                                               \
	} while (0)
	PART_NPY("indptr", "<i8", indptr, np + 1, 0);
	PART_NPY("indices", "<i8", indices, ne, 0);
	PART_NPY("etypes", "<i8", et, ne, 0);
	PART_NPY("eids", "<i8", eid, ne, 0);
	PART_NPY("features", "<f4", feat, np, g->feat_dim);
	PART_NPY("labels", "<i8", lab, np, 0);
	for (int m = 0; m < 3; m++)
		PART_NPY(mask_names[m], "|u1", mask[m], np, 0);
#undef PART_NPY
	*part_edges = ne;
	*local_edges = local;
	ret = 0;
out:
	free(indptr);
	free(indices);
	free(et);
	free(eid);
	free(lab);
	free(feat);
	for (int m = 0; m < 3; m++)
		free(mask[m]);
	return ret;
}

static int write_json(struct gbuild *g, const uint64_t *edge_ranges, const uint64_t *train,
		      struct rdps_graph_partition_result *res)
{
	json_t *root = json_object(), *nr = json_array(), *er = json_array(), *tr = json_array();
	json_t *src = json_deep_copy(g->meta);
	char *path = rdps_pt_outdir_path(&g->od, "partition.json");
	int ret = -ENOMEM;

	if (!root || !nr || !er || !tr || !src || !path)
		goto out;
	for (uint32_t p = 0; p <= g->o->k; p++) {
		json_array_append_new(nr, json_integer((json_int_t)g->ranges[p]));
		json_array_append_new(er, json_integer((json_int_t)edge_ranges[p]));
	}
	for (uint32_t p = 0; p < g->o->k; p++)
		json_array_append_new(tr, json_integer((json_int_t)train[p]));
	json_object_set_new(root, "format", json_string("rdps-graph-partition"));
	json_object_set_new(root, "format_version", json_integer(1));
	json_object_set_new(root, "num_nodes", json_integer((json_int_t)g->n));
	json_object_set_new(root, "num_edges", json_integer((json_int_t)g->e));
	json_object_set_new(root, "feat_dim", json_integer((json_int_t)g->feat_dim));
	json_object_set_new(root, "k", json_integer(g->o->k));
	json_object_set_new(root, "method", json_string(rdps_partition_method_name(g->o->method)));
	json_object_set_new(root, "balance_train", json_boolean(g->o->balance_train));
	json_object_set_new(root, "balance_edges", json_boolean(g->o->balance_edges));
	json_object_set_new(root, "seed", json_integer((json_int_t)g->o->seed));
	json_object_set_new(root, "node_ranges", nr);
	json_object_set_new(root, "edge_ranges", er);
	json_object_set_new(root, "train_nodes", tr);
	json_object_set_new(root, "local_edge_fraction", json_real(res->local_edge_fraction));
	json_object_set_new(root, "edges_in", json_string("each part holds its nodes' in-edges "
							  "(CSR by destination, sources by new "
							  "id); node ids are relabeled so part p "
							  "holds node_ranges[p] .. [p+1]"));
	json_object_set_new(root, "dataset", src);
	nr = er = tr = src = NULL;
	ret = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	if (ret)
		rdps_pt_fail(g->err, g->errlen, ret, "%s: write failed", path);
out:
	json_decref(nr);
	json_decref(er);
	json_decref(tr);
	json_decref(src);
	json_decref(root);
	free(path);
	return ret;
}

int rdps_graph_partition_build(const struct rdps_graph_partition_opts *o,
			       struct rdps_graph_partition_result *res, char *err, size_t errlen)
{
	struct gbuild g = { .o = o, .err = err, .errlen = errlen };
	uint64_t *in_off = NULL, *in_edge = NULL, *edge_ranges = NULL, *train = NULL, local = 0;
	uint64_t t0 = rdps_now_ns();
	struct rusage ru;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!o->data_dir || !o->out_dir || !o->k)
		return rdps_pt_fail(err, errlen, -EINVAL, "data, out and k are required");
	if (!rdps_partition_method_name(o->method))
		return rdps_pt_fail(err, errlen, -EINVAL, "unknown method %d", (int)o->method);
	ret = load(&g);
	if (ret)
		goto out;
	if (o->k > g.n) {
		ret = rdps_pt_fail(err, errlen, -EINVAL, "%u parts of %llu nodes", o->k,
				   (unsigned long long)g.n);
		goto out;
	}
	ret = rdps_pt_outdir_begin(&g.od, o->out_dir, o->force, err, errlen);
	if (ret)
		goto out;
	g.part = malloc(g.n * sizeof(uint32_t));
	g.old2new = malloc(g.n * sizeof(int64_t));
	g.new2old = malloc(g.n * sizeof(int64_t));
	g.ranges = calloc((size_t)o->k + 1, sizeof(uint64_t));
	in_off = calloc(g.n + 1, sizeof(uint64_t));
	in_edge = malloc((g.e + 1) * sizeof(uint64_t));
	edge_ranges = calloc((size_t)o->k + 1, sizeof(uint64_t));
	train = calloc(o->k, sizeof(uint64_t));
	if (!g.part || !g.old2new || !g.new2old || !g.ranges || !in_off || !in_edge ||
	    !edge_ranges || !train) {
		ret = -ENOMEM;
		goto out;
	}
	if (o->method == RDPS_PARTITION_METIS && o->k > 1) {
		ret = part_metis(&g);
		if (ret)
			goto out;
	} else if (o->method == RDPS_PARTITION_RANDOM) {
		part_random(&g);
	} else {
		memset(g.part, 0, g.n * sizeof(uint32_t));
	}
	relabel(&g);
	/* every node's in-edges, in edge order */
	for (uint64_t i = 0; i < g.e; i++)
		in_off[g.edges[2 * i + 1] + 1]++;
	for (uint64_t v = 0; v < g.n; v++)
		in_off[v + 1] += in_off[v];
	{
		uint64_t *next = malloc((g.n + 1) * sizeof(uint64_t));

		if (!next) {
			ret = -ENOMEM;
			goto out;
		}
		memcpy(next, in_off, (g.n + 1) * sizeof(uint64_t));
		for (uint64_t i = 0; i < g.e; i++)
			in_edge[next[g.edges[2 * i + 1]]++] = i;
		free(next);
	}
	for (uint32_t p = 0; p < o->k; p++) {
		uint64_t pe = 0, pl = 0;

		ret = write_part(&g, p, in_off, in_edge, &pe, &pl);
		if (ret)
			goto out;
		edge_ranges[p + 1] = edge_ranges[p] + pe;
		local += pl;
		for (uint64_t v = g.ranges[p]; v < g.ranges[p + 1]; v++)
			train[p] += g.mask[0][g.new2old[v]] ? 1 : 0;
		if (g.ranges[p + 1] - g.ranges[p] > res->max_part_nodes)
			res->max_part_nodes = g.ranges[p + 1] - g.ranges[p];
		if (pe > res->max_part_edges)
			res->max_part_edges = pe;
		if (train[p] > res->max_part_train)
			res->max_part_train = train[p];
	}
	res->num_nodes = g.n;
	res->num_edges = g.e;
	res->local_edges = local;
	res->local_edge_fraction = g.e ? (double)local / (double)g.e : 1.0;
	for (uint32_t p = 0; p < o->k; p++)
		res->num_train += train[p];
	if ((ret = write_npy(&g, "idmap.npy", "<i8", g.new2old, g.n, 0)))
		goto out;
	if ((ret = write_json(&g, edge_ranges, train, res)))
		goto out;
	ret = rdps_pt_outdir_commit(&g.od, err, errlen);
	if (ret)
		goto out;
	res->seconds = (rdps_now_ns() - t0) / 1e9;
	res->peak_rss_kib = getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_maxrss;
out:
	rdps_pt_outdir_end(&g.od);
	json_decref(g.meta);
	free(g.edges);
	free(g.etypes);
	free(g.feat);
	free(g.labels);
	for (int m = 0; m < 3; m++)
		free(g.mask[m]);
	free(g.part);
	free(g.old2new);
	free(g.new2old);
	free(g.ranges);
	free(in_off);
	free(in_edge);
	free(edge_ranges);
	free(train);
	return ret;
}
