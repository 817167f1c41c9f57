// SPDX-License-Identifier: MIT
/*
 * The graph partition's files (rdps/graph.h): per part its in-slots, edges,
 * out-slots, out-edges and data, then idmap.npy and partition.json, which
 * records every file's size and XXH3.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "graph_build.h"
#include "rdps/common.h"
#include "rdps/graph.h"

struct gw {
	struct gb *g;
	struct rdps_pt_outdir od;
	json_t *files;
};

static int write_npy(struct gw *w, const char *name, const char *descr, const void *data,
		     uint64_t rows, uint64_t cols)
{
	char *path = rdps_pt_outdir_path(&w->od, name), hex[24];
	uint64_t bytes = 0, sum = 0;
	json_t *f;
	int ret;

	if (!path)
		return -ENOMEM;
	ret = rdps_npy_write_sum(path, descr, data, rows, cols, &bytes, &sum, w->g->err,
				 w->g->errlen);
	free(path);
	if (ret)
		return ret;
	snprintf(hex, sizeof(hex), "%016" PRIx64, sum);
	f = json_pack("{s:I, s:s}", "bytes", (json_int_t)bytes, "xxh3", hex);
	if (!f || json_object_set_new(w->files, name, f))
		return -ENOMEM;
	return 0;
}

/* A data array's rows of one part: rows[i] = the input's row src[i]. */
static int write_data(struct gw *w, uint32_t p, const struct gb_data *d, const uint64_t *src,
		      uint64_t n)
{
	char name[64];
	char *buf = malloc(n * d->row_bytes + 1);
	int ret;

	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		memcpy(buf + i * d->row_bytes,
		       (const char *)d->a->data + src[i] * d->row_bytes, d->row_bytes);
	snprintf(name, sizeof(name), "part-%u-%s-%u-%u.npy", p, d->edge ? "ed" : "nd", d->type,
		 d->index);
	ret = write_npy(w, name, rdps_npy_dtype_descr(d->a->dtype), buf, n,
			d->a->ndim > 1 ? d->row_elems : 0);
	free(buf);
	return ret;
}

/* The first out-edge position of out-slot s (slots are numbered in node
 * order and their edges laid out in slot order). */
static uint64_t out_pos(const struct gb *g, uint64_t s)
{
	return s < g->out_slot[g->N] ? (uint64_t)g->outptr[2 * s] : g->E;
}

static int write_part(struct gw *w, uint32_t p, uint64_t *local)
{
	struct gb *g = w->g;
	uint64_t nlo = g->node_ranges[p], nhi = g->node_ranges[p + 1];
	uint64_t elo = g->edge_ranges[p], ehi = g->edge_ranges[p + 1];
	uint64_t slo = g->in_slot[nlo], shi = g->in_slot[nhi];
	uint64_t olo = g->out_slot[nlo], ohi = g->out_slot[nhi];
	uint64_t plo = out_pos(g, olo), phi = out_pos(g, ohi);
	uint64_t ne = ehi - elo, *src = NULL;
	int64_t *edges = NULL, *outedges = NULL;
	bool typed = g->R > 1 || !g->in->etypes[0].types;
	char name[64];
	int ret = -ENOMEM;

	edges = malloc((ne + 1) * 4 * sizeof(int64_t));
	outedges = malloc((phi - plo + 1) * 3 * sizeof(int64_t));
	src = malloc((nhi - nlo > ne ? nhi - nlo : ne) * sizeof(uint64_t) + 8);
	if (!edges || !outedges || !src)
		goto out;
	for (uint64_t y = elo; y < ehi; y++) {
		uint64_t x = g->order[y];
		uint32_t e = g->e_type[x];
		int64_t *r = edges + 4 * (y - elo);

		r[0] = (int64_t)g->e_src[x];
		r[1] = (int64_t)g->e_dst[x];
		r[2] = typed ? (int64_t)e : g->in->etypes[0].types[x];
		r[3] = (int64_t)(x - g->edge_off[e]);
		*local += g->e_src[x] >= nlo && g->e_src[x] < nhi;
	}
	for (uint64_t q = plo; q < phi; q++) {
		uint64_t y = g->outlist[q], x = g->order[y];
		int64_t *r = outedges + 3 * (q - plo);

		r[0] = (int64_t)g->e_dst[x];
		r[1] = (int64_t)y;
		r[2] = typed ? (int64_t)g->e_type[x] : g->in->etypes[0].types[x];
	}
#define PART_NPY(file, data, rows, cols)                                        \
	do {                                                                    \
		snprintf(name, sizeof(name), "part-%u-%s.npy", p, file);          \
		if ((ret = write_npy(w, name, "<i8", data, rows, cols)))         \
			goto out;                                               \
	} while (0)
	PART_NPY("inptr", g->inptr + 2 * slo, shi - slo, 2);
	PART_NPY("edges", edges, ne, 4);
	PART_NPY("outptr", g->outptr + 2 * olo, ohi - olo, 2);
	PART_NPY("outedges", outedges, phi - plo, 3);
#undef PART_NPY
	for (uint32_t i = 0; i < g->ndata; i++) {
		const struct gb_data *d = &g->data[i];
		uint64_t n = 0;

		if (!d->edge) {
			uint64_t lo = g->tlo[(size_t)p * g->T + d->type];

			n = g->tcount[(size_t)p * g->T + d->type];
			for (uint64_t j = 0; j < n; j++)
				src[j] = g->new2old[lo + j] - g->node_off[d->type];
		} else {
			uint64_t lo = g->elo[(size_t)p * g->R + d->type];

			n = g->ecount[(size_t)p * g->R + d->type];
			for (uint64_t j = 0; j < n; j++)
				src[j] = g->order[lo + j] - g->edge_off[d->type];
		}
		if ((ret = write_data(w, p, d, src, n)))
			goto out;
	}
	ret = 0;
out:
	if (ret == -ENOMEM)
		rdps_pt_fail(g->err, g->errlen, ret, "graph partition: out of memory");
	free(edges);
	free(outedges);
	free(src);
	return ret;
}

static json_t *u64_array(const uint64_t *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)v[i]));
	return a;
}

/* [[lo, hi] per part] of type t's rows in new ids (lo[p * stride + t]). */
static json_t *type_map(const uint64_t *lo, const uint64_t *cnt, uint32_t k, uint32_t stride,
			uint32_t t)
{
	json_t *a = json_array();

	for (uint32_t p = 0; a && p < k; p++) {
		uint64_t l = lo[(size_t)p * stride + t];

		json_array_append_new(a, json_pack("[I, I]", (json_int_t)l,
						   (json_int_t)(l + cnt[(size_t)p * stride + t])));
	}
	return a;
}

static json_t *data_list(const struct gb *g, bool edge, uint32_t type)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < g->ndata; i++) {
		const struct gb_data *d = &g->data[i];
		json_t *shape;
		char file[32];

		if (d->edge != edge || d->type != type)
			continue;
		shape = json_array();
		for (uint32_t k = 1; k < d->a->ndim; k++)
			json_array_append_new(shape, json_integer((json_int_t)d->a->shape[k]));
		snprintf(file, sizeof(file), "%s-%u-%u", edge ? "ed" : "nd", d->type, d->index);
		json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:s, s:s}", "name", d->a->name,
						   "dtype", d->a->dtype, "shape", shape,
						   "table", d->table, "file", file));
	}
	return a;
}

static uint64_t feat_dim(const struct gb *g)
{
	for (uint32_t i = 0; g->T == 1 && i < g->num_ndata; i++)
		if (!strcmp(g->data[i].a->name, "feat") && !strcmp(g->data[i].a->dtype, "float32"))
			return g->data[i].row_elems;
	return 0;
}

static int write_json(struct gw *w, const uint64_t *train, double local_fraction)
{
	struct gb *g = w->g;
	uint32_t k = g->o->k;
	json_t *root = json_object(), *nts = json_array(), *ets = json_array(), *ds = NULL;
	uint64_t *r = calloc((size_t)k + 1, sizeof(uint64_t));
	char *path = rdps_pt_outdir_path(&w->od, "partition.json");
	int ret = -ENOMEM;

	if (!root || !nts || !ets || !r || !path)
		goto out;
	if (g->in->meta_json) {
		json_error_t je;

		ds = json_loads(g->in->meta_json, 0, &je);
		if (!ds) {
			ret = rdps_pt_fail(g->err, g->errlen, -EINVAL, "the graph's own JSON: %s",
					   je.text);
			goto out;
		}
	}
	for (uint32_t t = 0; t < g->T; t++) {
		json_t *in = json_array(), *outl = json_array();

		for (uint32_t e = 0; e < g->R; e++) {
			if (g->dst_t[e] == t)
				json_array_append_new(in, json_integer(e));
			if (g->src_t[e] == t)
				json_array_append_new(outl, json_integer(e));
		}
		json_array_append_new(nts, json_pack("{s:s, s:I, s:o, s:o, s:o, s:o}", "name",
						     g->in->ntypes[t].name, "num_nodes",
						     (json_int_t)g->in->ntypes[t].num_nodes,
						     "node_map", type_map(g->tlo, g->tcount, k, g->T, t),
						     "in_etypes", in, "out_etypes", outl,
						     "data", data_list(g, false, t)));
	}
	for (uint32_t e = 0; e < g->R; e++)
		json_array_append_new(ets, json_pack("{s:s, s:s, s:s, s:I, s:o, s:o}", "src",
						     g->in->etypes[e].src, "name",
						     g->in->etypes[e].name, "dst",
						     g->in->etypes[e].dst, "num_edges",
						     (json_int_t)g->in->etypes[e].num_edges,
						     "edge_map", type_map(g->elo, g->ecount, k, g->R, e),
						     "data", data_list(g, true, e)));
	json_object_set_new(root, "format", json_string("rdps-graph-partition"));
	json_object_set_new(root, "format_version", json_integer(RDPS_GRAPH_FORMAT_VERSION));
	json_object_set_new(root, "graph_name", json_string(g->in->name ? g->in->name : "graph"));
	json_object_set_new(root, "num_nodes", json_integer((json_int_t)g->N));
	json_object_set_new(root, "num_edges", json_integer((json_int_t)g->E));
	json_object_set_new(root, "k", json_integer(k));
	json_object_set_new(root, "method", json_string(rdps_partition_method_name(g->o->method)));
	json_object_set_new(root, "balance_train", json_boolean(g->o->balance_train));
	json_object_set_new(root, "balance_edges", json_boolean(g->o->balance_edges));
	json_object_set_new(root, "seed", json_integer((json_int_t)g->o->seed));
	json_object_set_new(root, "feat_dim", json_integer((json_int_t)feat_dim(g)));
	json_object_set_new(root, "num_classes", json_integer(g->in->num_classes));
	json_object_set_new(root, "typed_edges",
			    json_boolean(g->R > 1 || !g->in->etypes[0].types));
	json_object_set_new(root, "node_ranges", u64_array(g->node_ranges, (size_t)k + 1));
	json_object_set_new(root, "edge_ranges", u64_array(g->edge_ranges, (size_t)k + 1));
	for (uint32_t p = 0; p <= k; p++)
		r[p] = g->in_slot[g->node_ranges[p]];
	json_object_set_new(root, "in_slot_ranges", u64_array(r, (size_t)k + 1));
	for (uint32_t p = 0; p <= k; p++)
		r[p] = g->out_slot[g->node_ranges[p]];
	json_object_set_new(root, "out_slot_ranges", u64_array(r, (size_t)k + 1));
	for (uint32_t p = 0; p <= k; p++)
		r[p] = out_pos(g, r[p]);
	json_object_set_new(root, "out_edge_ranges", u64_array(r, (size_t)k + 1));
	json_object_set_new(root, "ntypes", nts);
	json_object_set_new(root, "etypes", ets);
	json_object_set_new(root, "train_nodes", u64_array(train, k));
	json_object_set_new(root, "local_edge_fraction", json_real(local_fraction));
	json_object_set_new(root, "dataset", ds ? ds : json_object());
	json_object_set_new(root, "files", w->files);
	nts = ets = ds = NULL;
	w->files = NULL;
	ret = json_dump_file(root, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	if (ret)
		rdps_pt_fail(g->err, g->errlen, ret, "%s: write failed", path);
out:
	json_decref(nts);
	json_decref(ets);
	json_decref(ds);
	json_decref(root);
	free(r);
	free(path);
	return ret;
}

int rdps_gb_write(struct gb *g, struct rdps_graph_partition_result *res)
{
	struct gw w = { .g = g };
	uint32_t k = g->o->k;
	uint64_t *train = calloc(k, sizeof(uint64_t)), local = 0;
	int64_t *idmap = malloc((g->N + 1) * sizeof(int64_t));
	int ret;

	w.files = json_object();
	if (!train || !idmap || !w.files) {
		ret = rdps_pt_fail(g->err, g->errlen, -ENOMEM, "graph partition: out of memory");
		goto out;
	}
	ret = rdps_pt_outdir_begin(&w.od, g->o->out_dir, g->o->force, g->err, g->errlen);
	if (ret)
		goto out;
	for (uint32_t p = 0; p < k; p++) {
		uint64_t n = g->node_ranges[p + 1] - g->node_ranges[p];
		uint64_t pe = g->edge_ranges[p + 1] - g->edge_ranges[p];

		if ((ret = write_part(&w, p, &local)))
			goto out;
		for (uint32_t t = 0; t < g->T; t++) {
			const struct rdps_graph_ntype_input *nt = &g->in->ntypes[t];

			for (uint32_t i = 0; i < nt->num_data; i++) {
				const struct rdps_graph_array *m = &nt->data[i];
				uint64_t lo = g->tlo[(size_t)p * g->T + t];

				if (strcmp(m->name, "train_mask") || m->ndim != 1)
					continue;
				for (uint64_t j = 0; j < g->tcount[(size_t)p * g->T + t]; j++)
					train[p] += rdps_gb_mask_set(
						m, g->new2old[lo + j] - g->node_off[t]);
			}
		}
		if (n > res->max_part_nodes)
			res->max_part_nodes = n;
		if (pe > res->max_part_edges)
			res->max_part_edges = pe;
		if (train[p] > res->max_part_train)
			res->max_part_train = train[p];
		res->num_train += train[p];
		rdps_info("graph partition: part %u of %u written: %llu nodes, %llu in-edges", p + 1,
			  k, (unsigned long long)n, (unsigned long long)pe);
	}
	for (uint64_t h = 0; h < g->N; h++)
		idmap[h] = (int64_t)(g->new2old[h] - g->node_off[g->ntype[h]]);
	if ((ret = write_npy(&w, "idmap.npy", "<i8", idmap, g->N, 0)))
		goto out;
	res->num_nodes = g->N;
	res->num_edges = g->E;
	res->local_edges = local;
	res->local_edge_fraction = g->E ? (double)local / (double)g->E : 1.0;
	if ((ret = write_json(&w, train, res->local_edge_fraction)))
		goto out;
	ret = rdps_pt_outdir_commit(&w.od, g->err, g->errlen);
out:
	rdps_pt_outdir_end(&w.od);
	json_decref(w.files);
	free(train);
	free(idmap);
	return ret;
}
