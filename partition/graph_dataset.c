// SPDX-License-Identifier: MIT
/*
 * A graph dataset directory (rdps/partition.h) read into a struct
 * rdps_graph_input: the typed layout of graph.json "ntypes"/"etypes"
 * (`rdps dataset wordnet-hetero`), or the homogeneous one of `rdps dataset
 * wordnet-nodes` (one node type "_N", one edge type "_E" whose per-edge
 * types are etypes.npy).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "graph_build.h"
#include "rdps/partition.h"

struct dsl {
	struct rdps_gb_dataset *ds;
	const char *dir;
	char *err;
	size_t errlen;
	uint32_t cap_arrays, cap_bufs, cap_strings;
};

static char *keep_str(struct dsl *l, const char *s)
{
	char *c = strdup(s), **n;

	if (!c)
		return NULL;
	if (l->ds->num_strings == l->cap_strings) {
		l->cap_strings = l->cap_strings ? 2 * l->cap_strings : 16;
		n = realloc(l->ds->strings, l->cap_strings * sizeof(*n));
		if (!n) {
			free(c);
			return NULL;
		}
		l->ds->strings = n;
	}
	l->ds->strings[l->ds->num_strings++] = c;
	return c;
}

static int keep_buf(struct dsl *l, void *b)
{
	void **n;

	if (l->ds->num_bufs == l->cap_bufs) {
		l->cap_bufs = l->cap_bufs ? 2 * l->cap_bufs : 16;
		n = realloc(l->ds->bufs, l->cap_bufs * sizeof(*n));
		if (!n) {
			free(b);
			return -ENOMEM;
		}
		l->ds->bufs = n;
	}
	l->ds->bufs[l->ds->num_bufs++] = b;
	return 0;
}

/* dir/file read and parsed; its buffer kept. */
static int read_npy(struct dsl *l, const char *file, struct rdps_npy *a)
{
	char path[4096];
	void *buf = NULL;
	size_t len = 0;
	int ret;

	if (strchr(file, '/') || !strcmp(file, "..") || !file[0])
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: file '%s' is not "
				    "a file name of the directory", l->dir, file);
	snprintf(path, sizeof(path), "%s/%s", l->dir, file);
	ret = rdps_loader_read_file(path, NULL, &buf, &len, NULL, l->err, l->errlen);
	if (ret)
		return ret;
	if ((ret = keep_buf(l, buf)))
		return ret;
	return rdps_npy_parse(buf, len, path, a, l->err, l->errlen);
}

static int new_array(struct dsl *l, struct rdps_graph_array **out)
{
	if (l->ds->num_arrays == l->cap_arrays)
		return -ENOSPC;
	*out = &l->ds->arrays[l->ds->num_arrays++];
	memset(*out, 0, sizeof(**out));
	return 0;
}

/* data {NAME: FILE} or {NAME: {"file": FILE, "dtype": D}} of a type. */
static int read_data(struct dsl *l, json_t *data, const char *where, uint32_t *num,
		     const struct rdps_graph_array **first)
{
	const char *name;
	json_t *v;
	int ret;

	*num = 0;
	*first = l->ds->arrays + l->ds->num_arrays;
	if (!data)
		return 0;
	if (!json_is_object(data))
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: %s: \"data\" is "
				    "not an object of name: file", l->dir, where);
	json_object_foreach(data, name, v) {
		const char *file = json_is_string(v) ? json_string_value(v)
				 : json_string_value(json_object_get(v, "file"));
		const char *dtype = json_string_value(json_object_get(v, "dtype"));
		struct rdps_graph_array *a;
		struct rdps_npy n;

		if (!file)
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: %s: data "
					    "'%s' names no file", l->dir, where, name);
		if ((ret = read_npy(l, file, &n)) || (ret = new_array(l, &a)))
			return ret;
		a->name = keep_str(l, name);
		a->dtype = dtype ? keep_str(l, dtype) : rdps_npy_descr_dtype(n.descr);
		if (!a->name || !a->dtype)
			return -ENOMEM;
		if (dtype && rdps_npy_dtype_size(dtype) != n.elem_size)
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/%s: holds %s, not "
					    "elements of %s", l->dir, file, n.descr, dtype);
		a->ndim = n.ndim;
		memcpy(a->shape, n.shape, sizeof(a->shape));
		a->data = n.data;
		(*num)++;
	}
	return 0;
}

static int edges_array(struct dsl *l, const char *file, uint64_t *num, const int64_t **src,
		       const int64_t **dst)
{
	struct rdps_npy n;
	int64_t *s, *d;
	const int64_t *e;
	int ret;

	if ((ret = read_npy(l, file, &n)))
		return ret;
	if (strcmp(n.descr, "<i8") || n.ndim != 2 || n.shape[1] != 2)
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/%s: want E x 2 int64 (src, "
				    "dst), not %s of %u dimensions", l->dir, file, n.descr, n.ndim);
	*num = n.shape[0];
	s = malloc((*num + 1) * sizeof(int64_t));
	d = malloc((*num + 1) * sizeof(int64_t));
	if (!s || !d || keep_buf(l, s) || keep_buf(l, d)) {
		return -ENOMEM;
	}
	e = n.data;
	for (uint64_t i = 0; i < *num; i++) {
		s[i] = e[2 * i];
		d[i] = e[2 * i + 1];
	}
	*src = s;
	*dst = d;
	return 0;
}

static int load_typed(struct dsl *l, json_t *root)
{
	struct rdps_gb_dataset *ds = l->ds;
	json_t *nts = json_object_get(root, "ntypes"), *ets = json_object_get(root, "etypes");
	size_t i;
	json_t *v;
	int ret;

	if (!json_is_array(nts) || !json_is_array(ets) || !json_array_size(nts))
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: \"ntypes\" and "
				    "\"etypes\" must be arrays of the types", l->dir);
	ds->ntypes = calloc(json_array_size(nts), sizeof(*ds->ntypes));
	ds->etypes = calloc(json_array_size(ets) + 1, sizeof(*ds->etypes));
	if (!ds->ntypes || !ds->etypes)
		return -ENOMEM;
	json_array_foreach(nts, i, v) {
		struct rdps_graph_ntype_input *nt = &ds->ntypes[i];
		json_t *n = json_object_get(v, "num_nodes");
		char where[300];

		nt->name = json_string_value(json_object_get(v, "name"));
		if (!nt->name || !json_is_integer(n) || json_integer_value(n) < 0)
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: ntypes[%zu] "
					    "needs \"name\" and \"num_nodes\"", l->dir, i);
		nt->num_nodes = (uint64_t)json_integer_value(n);
		snprintf(where, sizeof(where), "node type '%s'", nt->name);
		if ((ret = read_data(l, json_object_get(v, "data"), where, &nt->num_data,
				     &nt->data)))
			return ret;
	}
	json_array_foreach(ets, i, v) {
		struct rdps_graph_etype_input *et = &ds->etypes[i];
		const char *file = json_string_value(json_object_get(v, "edges"));
		char where[300];

		et->src = json_string_value(json_object_get(v, "src"));
		et->name = json_string_value(json_object_get(v, "name"));
		et->dst = json_string_value(json_object_get(v, "dst"));
		if (!et->src || !et->name || !et->dst || !file)
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/graph.json: etypes[%zu] "
					    "needs \"src\", \"name\", \"dst\" and \"edges\"", l->dir,
					    i);
		if ((ret = edges_array(l, file, &et->num_edges, &et->src_ids, &et->dst_ids)))
			return ret;
		snprintf(where, sizeof(where), "edge type (%s, %s, %s)", et->src, et->name,
			 et->dst);
		if ((ret = read_data(l, json_object_get(v, "data"), where, &et->num_data,
				     &et->data)))
			return ret;
	}
	ds->in.num_ntypes = (uint32_t)json_array_size(nts);
	ds->in.num_etypes = (uint32_t)json_array_size(ets);
	return 0;
}

/* `rdps dataset wordnet-nodes`' layout. */
static int load_homogeneous(struct dsl *l)
{
	static const char *const files[5] = { "features.npy", "labels.npy", "train_mask.npy",
					       "val_mask.npy", "test_mask.npy" };
	static const char *const names[5] = { "feat", "label", "train_mask", "val_mask",
					       "test_mask" };
	static const char *const want[5] = { "<f4", "<i8", "|u1", "|u1", "|u1" };
	struct rdps_gb_dataset *ds = l->ds;
	struct rdps_graph_ntype_input *nt;
	struct rdps_graph_etype_input *et;
	struct rdps_npy types;
	uint64_t n = 0;
	int ret;

	ds->ntypes = calloc(1, sizeof(*ds->ntypes));
	ds->etypes = calloc(1, sizeof(*ds->etypes));
	if (!ds->ntypes || !ds->etypes)
		return -ENOMEM;
	nt = ds->ntypes;
	et = ds->etypes;
	nt->name = "_N";
	nt->data = ds->arrays;
	for (int i = 0; i < 5; i++) {
		struct rdps_graph_array *a;
		struct rdps_npy x;
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", l->dir, files[i]);
		if ((ret = read_npy(l, files[i], &x)) || (ret = new_array(l, &a)))
			return ret;
		if (strcmp(x.descr, want[i]) && !(i >= 2 && !strcmp(x.descr, "<u1")))
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s: holds %s, not %s",
					    path, x.descr, want[i]);
		if (i == 0)
			n = x.shape[0];
		if (x.ndim != (i ? 1u : 2u) || x.shape[0] != n || (i == 0 && !x.shape[1]))
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s: %llu entries for %llu "
					    "nodes%s", path, (unsigned long long)x.shape[0],
					    (unsigned long long)n, i ? "" : " (want N x F features)");
		a->name = names[i];
		a->dtype = i == 0 ? "float32" : i == 1 ? "int64" : "uint8";
		a->ndim = x.ndim;
		memcpy(a->shape, x.shape, sizeof(a->shape));
		a->data = x.data;
		nt->num_data++;
	}
	if (!n)
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/features.npy: want N x F "
				    "features", l->dir);
	nt->num_nodes = n;
	et->src = et->dst = "_N";
	et->name = "_E";
	if ((ret = edges_array(l, "edges.npy", &et->num_edges, &et->src_ids, &et->dst_ids)) ||
	    (ret = read_npy(l, "etypes.npy", &types)))
		return ret;
	if (strcmp(types.descr, "<i8") || types.ndim != 1 || types.shape[0] != et->num_edges)
		return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/etypes.npy: %llu int64 types "
				    "wanted for %llu edges", l->dir,
				    (unsigned long long)types.shape[0],
				    (unsigned long long)et->num_edges);
	et->types = types.data;
	for (uint64_t i = 0; i < et->num_edges; i++)
		if (et->types[i] < 0 || et->types[i] >= (1ll << 23))
			return rdps_pt_fail(l->err, l->errlen, -EINVAL, "%s/etypes.npy: edge %llu "
					    "has type %lld (want 0..2^23)", l->dir,
					    (unsigned long long)i, (long long)et->types[i]);
	ds->in.num_ntypes = ds->in.num_etypes = 1;
	return 0;
}

static size_t count_data(json_t *types)
{
	size_t i, n = 0;
	json_t *v;

	json_array_foreach(types, i, v)
		n += json_object_size(json_object_get(v, "data"));
	return n;
}

int rdps_gb_dataset_load(const char *dir, struct rdps_gb_dataset *ds, char *err, size_t errlen)
{
	struct dsl l = { .ds = ds, .dir = dir, .err = err, .errlen = errlen };
	char path[4096];
	json_error_t je;
	json_t *root, *cls;
	int ret;

	memset(ds, 0, sizeof(*ds));
	snprintf(path, sizeof(path), "%s/graph.json", dir);
	root = json_load_file(path, 0, &je);
	if (!root)
		return rdps_pt_fail(err, errlen, -EINVAL, "%s:%d: %s (a graph dataset: rdps "
				    "dataset wordnet-nodes or wordnet-hetero)", path, je.line,
				    je.text);
	l.cap_arrays = (uint32_t)(count_data(json_object_get(root, "ntypes")) +
				  count_data(json_object_get(root, "etypes")) + 8);
	ds->arrays = calloc(l.cap_arrays, sizeof(*ds->arrays));
	ds->meta_json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!ds->arrays || !ds->meta_json) {
		ret = -ENOMEM;
		goto out;
	}
	if (json_object_get(root, "ntypes"))
		ret = load_typed(&l, root);
	else
		ret = load_homogeneous(&l);
	if (ret)
		goto out;
	ds->in.name = keep_str(&l, json_string_value(json_object_get(root, "name"))
					   ? json_string_value(json_object_get(root, "name"))
					   : "graph");
	ds->in.ntypes = ds->ntypes;
	ds->in.etypes = ds->etypes;
	ds->in.meta_json = ds->meta_json;
	cls = json_object_get(root, "num_classes");
	ds->in.num_classes = json_is_integer(cls) && json_integer_value(cls) > 0 &&
					     json_integer_value(cls) <= UINT32_MAX
				     ? (uint32_t)json_integer_value(cls)
				     : 0;
	/* names point into root: keep every string the input uses */
	for (uint32_t t = 0; t < ds->in.num_ntypes; t++)
		if (!(ds->ntypes[t].name = keep_str(&l, ds->ntypes[t].name)))
			ret = -ENOMEM;
	for (uint32_t e = 0; e < ds->in.num_etypes; e++)
		if (!(ds->etypes[e].src = keep_str(&l, ds->etypes[e].src)) ||
		    !(ds->etypes[e].name = keep_str(&l, ds->etypes[e].name)) ||
		    !(ds->etypes[e].dst = keep_str(&l, ds->etypes[e].dst)))
			ret = -ENOMEM;
out:
	json_decref(root);
	if (ret)
		rdps_gb_dataset_free(ds);
	return ret;
}

void rdps_gb_dataset_free(struct rdps_gb_dataset *ds)
{
	for (uint32_t i = 0; i < ds->num_bufs; i++)
		free(ds->bufs[i]);
	for (uint32_t i = 0; i < ds->num_strings; i++)
		free(ds->strings[i]);
	free(ds->bufs);
	free(ds->strings);
	free(ds->arrays);
	free(ds->ntypes);
	free(ds->etypes);
	free(ds->meta_json);
	memset(ds, 0, sizeof(*ds));
}
