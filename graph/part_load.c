// SPDX-License-Identifier: MIT
/*
 * A server's part of a graph partition (partition/graph.c writes them):
 * read, checked, and laid out as the tables rdps/graph.h describes.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "rdps/graph.h"

static int failf(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int failf(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

void rdps_graph_part_free(struct rdps_graph_part *p)
{
	if (!p)
		return;
	free(p->node_ranges);
	free(p->edge_ranges);
	free(p->indptr_rows);
	free(p->edge_rows);
	free(p->feat);
	free(p->labels);
	for (int m = 0; m < 3; m++)
		free(p->mask[m]);
	free(p);
}

/* A json array of k + 1 non-decreasing integers from 0 to total. */
static int ranges(json_t *root, const char *key, uint32_t k, uint64_t total, uint64_t **out,
		  const char *path, char *err, size_t errlen)
{
	json_t *a = json_object_get(root, key);
	uint64_t *r;

	if (!json_is_array(a) || json_array_size(a) != (size_t)k + 1)
		return failf(err, errlen, -EINVAL, "%s: \"%s\" is not an array of k + 1 = %u "
			     "offsets", path, key, k + 1);
	r = calloc((size_t)k + 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (uint32_t i = 0; i <= k; i++) {
		json_t *v = json_array_get(a, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    (i && (uint64_t)json_integer_value(v) < r[i - 1])) {
			free(r);
			return failf(err, errlen, -EINVAL, "%s: \"%s\"[%u] is not a non-negative "
				     "integer at least the one before", path, key, i);
		}
		r[i] = (uint64_t)json_integer_value(v);
	}
	if (r[0] || r[k] != total) {
		uint64_t first = r[0], last = r[k];

		free(r);
		return failf(err, errlen, -EINVAL, "%s: \"%s\" runs from %llu to %llu, not from "
			     "0 to %llu", path, key, (unsigned long long)first,
			     (unsigned long long)last, (unsigned long long)total);
	}
	*out = r;
	return 0;
}

static int json_u64(json_t *o, const char *key, uint64_t *v, const char *path, char *err,
		    size_t errlen)
{
	json_t *x = json_object_get(o, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return failf(err, errlen, -EINVAL, "%s: \"%s\" missing or not a non-negative "
			     "integer", path, key);
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

/* Reads dir/part-P-name.npy of descr, want_rows x want_cols (cols 0: 1-D). */
static int part_array(const char *dir, uint32_t part, const char *name, const char *descr,
		      uint64_t want_rows, uint64_t want_cols, void **data, char *err,
		      size_t errlen)
{
	char path[4096];
	uint64_t rows, cols;
	int ret;

	snprintf(path, sizeof(path), "%s/part-%u-%s.npy", dir, part, name);
	ret = rdps_npy_read(path, descr, data, &rows, &cols, err, errlen);
	if (ret)
		return ret;
	if (rows != want_rows || cols != want_cols) {
		free(*data);
		*data = NULL;
		return failf(err, errlen, -EINVAL, "%s: shape (%llu, %llu), want (%llu, %llu) "
			     "as partition.json says", path, (unsigned long long)rows,
			     (unsigned long long)cols, (unsigned long long)want_rows,
			     (unsigned long long)want_cols);
	}
	return 0;
}

static const char *const mask_names[3] = { "train_mask", "val_mask", "test_mask" };

int rdps_graph_part_load(const char *dir, uint32_t part, struct rdps_graph_part **out,
			 char *err, size_t errlen)
{
	struct rdps_graph_part *p = calloc(1, sizeof(*p));
	int64_t *indptr = NULL, *indices = NULL, *etypes = NULL, *eids = NULL;
	char path[4096];
	json_error_t je;
	json_t *root, *ds, *fmt;
	uint64_t k = 0, n_p, e_p, lo, elo, classes = 0, ntypes = 0;
	int ret;

	if (!p)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/partition.json", dir);
	root = json_load_file(path, 0, &je);
	if (!root) {
		free(p);
		return failf(err, errlen, -ENOENT, "%s:%d: %s", path, je.line, je.text);
	}
	fmt = json_object_get(root, "format");
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "rdps-graph-partition")) {
		ret = failf(err, errlen, -EINVAL, "%s: not a graph partition (format \"%s\"; "
			    "make one with rdps partition --data of a graph dataset)", path,
			    json_is_string(fmt) ? json_string_value(fmt) : "?");
		goto out;
	}
	if ((ret = json_u64(root, "k", &k, path, err, errlen)) ||
	    (ret = json_u64(root, "num_nodes", &p->num_nodes, path, err, errlen)) ||
	    (ret = json_u64(root, "num_edges", &p->num_edges, path, err, errlen)) ||
	    (ret = json_u64(root, "feat_dim", &p->feat_dim, path, err, errlen)))
		goto out;
	/* The dataset's class and type counts bound the labels and types
	 * when it states them. */
	ds = json_object_get(root, "dataset");
	classes = json_is_integer(json_object_get(ds, "num_classes"))
			  ? (uint64_t)json_integer_value(json_object_get(ds, "num_classes"))
			  : UINT64_MAX;
	ntypes = json_is_integer(json_object_get(ds, "num_etypes"))
			 ? (uint64_t)json_integer_value(json_object_get(ds, "num_etypes"))
			 : UINT64_MAX;
	if (p->feat_dim > RDPS_MAX_DIM) {
		ret = failf(err, errlen, -EINVAL, "%s: feat_dim %llu is above the %d a table row "
			    "holds", path, (unsigned long long)p->feat_dim, RDPS_MAX_DIM);
		goto out;
	}
	if (!k || k > UINT32_MAX || part >= k) {
		ret = failf(err, errlen, -EINVAL, "%s: part %u asked of a partition into %llu "
			    "parts (one server per part: as many servers as parts)", path, part,
			    (unsigned long long)k);
		goto out;
	}
	p->part = part;
	p->num_parts = (uint32_t)k;
	p->num_classes = classes == UINT64_MAX ? 0 : (uint32_t)classes;
	p->num_etypes = ntypes == UINT64_MAX ? 0 : (uint32_t)ntypes;
	if ((ret = ranges(root, "node_ranges", p->num_parts, p->num_nodes, &p->node_ranges, path,
			  err, errlen)) ||
	    (ret = ranges(root, "edge_ranges", p->num_parts, p->num_edges, &p->edge_ranges, path,
			  err, errlen)))
		goto out;
	lo = p->node_ranges[part];
	n_p = p->node_ranges[part + 1] - lo;
	elo = p->edge_ranges[part];
	e_p = p->edge_ranges[part + 1] - elo;
	if ((ret = part_array(dir, part, "indptr", "<i8", n_p + 1, 0, (void **)&indptr, err,
			      errlen)) ||
	    (ret = part_array(dir, part, "indices", "<i8", e_p, 0, (void **)&indices, err,
			      errlen)) ||
	    (ret = part_array(dir, part, "etypes", "<i8", e_p, 0, (void **)&etypes, err,
			      errlen)) ||
	    (ret = part_array(dir, part, "eids", "<i8", e_p, 0, (void **)&eids, err, errlen)) ||
	    (ret = part_array(dir, part, "features", "<f4", n_p, p->feat_dim, (void **)&p->feat,
			      err, errlen)) ||
	    (ret = part_array(dir, part, "labels", "<i8", n_p, 0, (void **)&p->labels, err,
			      errlen)))
		goto out;
	for (int m = 0; m < 3; m++)
		if ((ret = part_array(dir, part, mask_names[m], "|u1", n_p, 0, (void **)&p->mask[m],
				      err, errlen)))
			goto out;
	p->indptr_rows = malloc((n_p ? n_p : 1) * 2 * sizeof(int64_t));
	p->edge_rows = malloc((e_p ? e_p : 1) * 4 * sizeof(int64_t));
	if (!p->indptr_rows || !p->edge_rows) {
		ret = -ENOMEM;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/part-%u-indptr.npy", dir, part);
	if (indptr[0] != 0 || (uint64_t)indptr[n_p] != e_p) {
		ret = failf(err, errlen, -EINVAL, "%s: offsets run from %lld to %lld, not from 0 "
			    "to the part's %llu edges", path, (long long)indptr[0],
			    (long long)indptr[n_p], (unsigned long long)e_p);
		goto out;
	}
	for (uint64_t i = 0; i < n_p; i++) {
		/* Past the part's edges too: the node's edges are read next,
		 * before any later offset is checked. */
		if (indptr[i + 1] < indptr[i] || (uint64_t)indptr[i + 1] > e_p) {
			ret = failf(err, errlen, -EINVAL, "%s: offset %llu (%lld) is below the one "
				    "before (%lld) or past the part's %llu edges", path,
				    (unsigned long long)i + 1, (long long)indptr[i + 1],
				    (long long)indptr[i], (unsigned long long)e_p);
			goto out;
		}
		p->indptr_rows[2 * i] = (int64_t)elo + indptr[i];
		p->indptr_rows[2 * i + 1] = (int64_t)elo + indptr[i + 1];
		for (int64_t j = indptr[i]; j < indptr[i + 1]; j++) {
			int64_t *e = p->edge_rows + 4 * j;

			if (indices[j] < 0 || (uint64_t)indices[j] >= p->num_nodes ||
			    etypes[j] < 0 || (uint64_t)etypes[j] >= ntypes ||
			    eids[j] < 0 || (uint64_t)eids[j] >= p->num_edges) {
				ret = failf(err, errlen, -EINVAL, "%s/part-%u-*.npy: edge %lld: "
					    "source %lld, type %lld or original id %lld out of "
					    "range (%llu nodes, %llu types, %llu edges)", dir,
					    part, (long long)j, (long long)indices[j],
					    (long long)etypes[j], (long long)eids[j],
					    (unsigned long long)p->num_nodes,
					    (unsigned long long)ntypes,
					    (unsigned long long)p->num_edges);
				goto out;
			}
			e[0] = indices[j];
			e[1] = (int64_t)(lo + i);
			e[2] = etypes[j];
			e[3] = eids[j];
		}
	}
	for (uint64_t i = 0; i < n_p; i++) {
		if (p->labels[i] < 0 || (uint64_t)p->labels[i] >= classes) {
			ret = failf(err, errlen, -EINVAL, "%s/part-%u-labels.npy: node %llu has label "
				    "%lld, not one of the %llu classes", dir, part,
				    (unsigned long long)(lo + i), (long long)p->labels[i],
				    (unsigned long long)classes);
			goto out;
		}
	}
	ret = 0;
out:
	free(indptr);
	free(indices);
	free(etypes);
	free(eids);
	json_decref(root);
	if (ret) {
		rdps_graph_part_free(p);
		return ret;
	}
	*out = p;
	return 0;
}

static void table(struct rdps_server_table_config *t, const char *name, uint64_t rows,
		  const uint64_t *off, int dtype, uint32_t elems, const void *data)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->num_rows = rows;
	t->offsets = off;
	t->dtype = dtype;
	t->elems = elems;
	t->dim = rdps_dtype_row_words(dtype, elems);
	t->init = RDPS_INIT_ZEROS;
	t->optimizer = RDPS_OPT_NONE;
	t->rows = data;
	t->read_only = true;
}

int rdps_graph_part_tables(const struct rdps_graph_part *p,
			   struct rdps_server_table_config *tables, uint32_t max)
{
	if (max < 7)
		return -ENOSPC;
	table(&tables[0], RDPS_GRAPH_INDPTR, p->num_nodes, p->node_ranges, RDPS_DTYPE_I64, 2,
	      p->indptr_rows);
	table(&tables[1], RDPS_GRAPH_EDGES, p->num_edges, p->edge_ranges, RDPS_DTYPE_I64, 4,
	      p->edge_rows);
	table(&tables[2], RDPS_GRAPH_NDATA_PREFIX "feat", p->num_nodes, p->node_ranges,
	      RDPS_DTYPE_F32, (uint32_t)p->feat_dim, p->feat);
	table(&tables[3], RDPS_GRAPH_NDATA_PREFIX "label", p->num_nodes, p->node_ranges,
	      RDPS_DTYPE_I64, 1, p->labels);
	for (int m = 0; m < 3; m++)
		table(&tables[4 + m], m == 0 ? RDPS_GRAPH_NDATA_PREFIX "train_mask"
				      : m == 1 ? RDPS_GRAPH_NDATA_PREFIX "val_mask"
					       : RDPS_GRAPH_NDATA_PREFIX "test_mask",
		      p->num_nodes, p->node_ranges, RDPS_DTYPE_U8, 1, p->mask[m]);
	return 7;
}

int rdps_graph_part_add_tables(const struct rdps_graph_part *p, struct rdps_server_config *cfg)
{
	int n;

	if (cfg->num_tables > RDPS_MAX_TABLES)
		return -EINVAL;
	n = rdps_graph_part_tables(p, cfg->tables + cfg->num_tables,
				   RDPS_MAX_TABLES - cfg->num_tables);
	if (n < 0)
		return n;
	cfg->num_tables += (uint32_t)n;
	return 0;
}
