// SPDX-License-Identifier: MIT
/*
 * A server's part of a graph partition (partition/graph*.c write them):
 * every file checked against the size and XXH3 partition.json records
 * (read with the io_uring loader, hashed as it reads), then every array's
 * shape, slot and edge against the schema, and laid out as the tables
 * rdps/graph.h describes.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "schema.h"

void rdps_graph_part_free(struct rdps_graph_part *p)
{
	if (!p)
		return;
	free(p->node_ranges);
	free(p->edge_ranges);
	free(p->in_slot_ranges);
	free(p->out_slot_ranges);
	free(p->out_edge_ranges);
	for (uint32_t i = 0; p->data && i < p->num_data; i++)
		free(p->data[i].offsets);
	free(p->data);
	free(p->meta);
	free(p->meta_offsets);
	for (uint32_t i = 0; i < p->num_bufs; i++)
		free(p->bufs[i]);
	free(p->bufs);
	free(p);
}

struct pl {
	struct rdps_graph_part *p;
	const char *dir;
	json_t *files;
	struct gschema s;
	char *err;
	size_t errlen;
};

/* dir/name, checked against partition.json's size and XXH3, parsed. */
static int load_file(struct pl *l, const char *name, struct rdps_npy *a)
{
	json_t *f = json_object_get(l->files, name);
	const char *want_hex = json_string_value(json_object_get(f, "xxh3"));
	json_t *want_bytes = json_object_get(f, "bytes");
	char path[4096];
	uint64_t sum = 0, want;
	void *buf = NULL, **bufs;
	size_t len = 0;
	char *end;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", l->dir, name);
	if (!want_hex || !json_is_integer(want_bytes))
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/partition.json: \"files\" records no "
			     "size and XXH3 of %s", l->dir, name);
	want = strtoull(want_hex, &end, 16);
	if (*end || strlen(want_hex) != 16)
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/partition.json: files.%s.xxh3: want "
			     "16 hex digits", l->dir, name);
	ret = rdps_loader_read_file(path, NULL, &buf, &len, &sum, l->err, l->errlen);
	if (ret)
		return ret;
	bufs = realloc(l->p->bufs, (l->p->num_bufs + 1) * sizeof(*bufs));
	if (!bufs) {
		free(buf);
		return -ENOMEM;
	}
	l->p->bufs = bufs;
	bufs[l->p->num_bufs++] = buf;
	if ((uint64_t)len != (uint64_t)json_integer_value(want_bytes))
		return rdps_gs_fail(l->err, l->errlen, -EBADMSG, "%s: %zu bytes, partition.json recorded "
			     "%lld: the file was cut short or replaced (restore it, or partition "
			     "again)", path, len, (long long)json_integer_value(want_bytes));
	if (sum != want)
		return rdps_gs_fail(l->err, l->errlen, -EBADMSG, "%s: damaged: its XXH3 is %016" PRIx64
			     ", partition.json recorded %016" PRIx64 " (restore the file, or "
			     "partition again)", path, sum, want);
	return rdps_npy_parse(buf, len, path, a, l->err, l->errlen);
}

/* A part's array of int64 rows x cols. */
static int load_i64(struct pl *l, const char *what, uint64_t rows, uint64_t cols, int64_t **out)
{
	char name[64];
	struct rdps_npy a;
	int ret;

	snprintf(name, sizeof(name), "part-%u-%s.npy", l->p->part, what);
	if ((ret = load_file(l, name, &a)))
		return ret;
	if (strcmp(a.descr, "<i8") || a.ndim != 2 || a.shape[0] != rows || a.shape[1] != cols)
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/%s: %s of shape (%llu, %llu), want "
			     "int64 (%llu, %llu) as partition.json says", l->dir, name, a.descr,
			     (unsigned long long)a.shape[0],
			     (unsigned long long)(a.ndim > 1 ? a.shape[1] : 0),
			     (unsigned long long)rows, (unsigned long long)cols);
	*out = (int64_t *)a.data;
	return 0;
}

/* In-slots and edges: each edge in exactly its destination's slot of its
 * etype, ids in range. */
static int check_in(struct pl *l)
{
	struct rdps_graph_part *p = l->p;
	const struct gschema *s = &l->s;
	uint32_t q = p->part;
	uint64_t elo = s->edge_ranges[q], ehi = s->edge_ranges[q + 1], covered = 0;
	char where[4200];

	snprintf(where, sizeof(where), "%s/part-%u-edges.npy", l->dir, q);
	for (uint64_t y = elo; y < ehi; y++) {
		const int64_t *r = p->edge_rows + 4 * (y - elo);
		uint32_t e = rdps_gschema_edge_type(s, y, NULL), dp, st;

		if (r[0] < 0 || (uint64_t)r[0] >= s->N || r[1] < 0 || (uint64_t)r[1] >= s->N ||
		    r[3] < 0 || (uint64_t)r[3] >= s->et[e].num ||
		    (s->typed ? r[2] != (int64_t)e : r[2] < 0))
			return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: edge %llu (%lld -> %lld, type "
				     "%lld, original %lld): an id out of range or a type not its "
				     "etype %u's", where, (unsigned long long)y, (long long)r[0],
				     (long long)r[1], (long long)r[2], (long long)r[3], e);
		st = rdps_gschema_node_type(s, (uint64_t)r[0], NULL);
		if (rdps_gschema_node_type(s, (uint64_t)r[1], &dp) != s->et[e].dst || dp != q ||
		    st != s->et[e].src)
			return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: edge %llu (%lld -> %lld) of "
				     "etype '%s': its endpoints are not of the etype's node types "
				     "or its destination is not in part %u", where,
				     (unsigned long long)y, (long long)r[0], (long long)r[1],
				     s->et[e].canonical, q);
	}
	snprintf(where, sizeof(where), "%s/part-%u-inptr.npy", l->dir, q);
	for (uint32_t t = 0; t < s->T; t++) {
		const struct gs_type *nt = &s->nt[t];

		for (uint64_t v = nt->lo[q]; v < nt->lo[q] + nt->cnt[q]; v++)
			for (uint32_t j = 0; j < nt->nin; j++) {
				uint64_t slot = nt->in_base[q] + (v - nt->lo[q]) * nt->nin + j;
				const int64_t *r = p->indptr_rows + 2 * (slot - s->in_slot_ranges[q]);

				if (r[0] < (int64_t)elo || r[1] < r[0] || r[1] > (int64_t)ehi)
					return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: slot %llu "
						     "[%lld, %lld) is not a range of part %u's "
						     "edges [%llu, %llu)", where,
						     (unsigned long long)slot, (long long)r[0],
						     (long long)r[1], q, (unsigned long long)elo,
						     (unsigned long long)ehi);
				for (int64_t y = r[0]; y < r[1]; y++) {
					const int64_t *er = p->edge_rows + 4 * ((uint64_t)y - elo);

					if ((uint64_t)er[1] != v ||
					    rdps_gschema_edge_type(s, (uint64_t)y, NULL) != nt->in[j])
						return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: slot "
							     "%llu (node %llu, etype %u) holds edge "
							     "%lld of node %lld", where,
							     (unsigned long long)slot,
							     (unsigned long long)v, nt->in[j],
							     (long long)y, (long long)er[1]);
				}
				covered += (uint64_t)(r[1] - r[0]);
			}
	}
	if (covered != ehi - elo)
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: the slots hold %llu edges, the part "
			     "has %llu", where, (unsigned long long)covered,
			     (unsigned long long)(ehi - elo));
	return 0;
}

/* Out-slots and out-edges: each out-edge of its slot's etype, into a node
 * of the etype's destination type; the slots tile the part's positions. */
static int check_out(struct pl *l)
{
	struct rdps_graph_part *p = l->p;
	const struct gschema *s = &l->s;
	uint32_t q = p->part;
	uint64_t olo = s->out_edge_ranges[q], ohi = s->out_edge_ranges[q + 1], at = olo;
	char where[4200];

	snprintf(where, sizeof(where), "%s/part-%u-outptr.npy and -outedges.npy", l->dir, q);
	for (uint32_t t = 0; t < s->T; t++) {
		const struct gs_type *nt = &s->nt[t];

		for (uint64_t v = nt->lo[q]; v < nt->lo[q] + nt->cnt[q]; v++)
			for (uint32_t j = 0; j < nt->nout; j++) {
				uint64_t slot = nt->out_base[q] + (v - nt->lo[q]) * nt->nout + j;
				const int64_t *r = p->outptr_rows + 2 * (slot - s->out_slot_ranges[q]);
				uint32_t e = nt->out[j];

				if (r[0] != (int64_t)at || r[1] < r[0] || r[1] > (int64_t)ohi)
					return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: out-slot %llu "
						     "[%lld, %lld) does not follow the one before "
						     "(at %llu) inside [%llu, %llu)", where,
						     (unsigned long long)slot, (long long)r[0],
						     (long long)r[1], (unsigned long long)at,
						     (unsigned long long)olo,
						     (unsigned long long)ohi);
				for (int64_t x = r[0]; x < r[1]; x++) {
					const int64_t *o = p->outedge_rows + 3 * ((uint64_t)x - olo);

					if (o[0] < 0 || (uint64_t)o[0] >= s->N || o[1] < 0 ||
					    (uint64_t)o[1] >= s->E ||
					    rdps_gschema_edge_type(s, (uint64_t)o[1], NULL) != e ||
					    rdps_gschema_node_type(s, (uint64_t)o[0], NULL) !=
						    s->et[e].dst ||
					    (s->typed ? o[2] != (int64_t)e : o[2] < 0) ||
					    (x > r[0] && o[1] <= o[-2]))
						return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: out-edge "
							     "%lld (-> %lld, edge %lld, type %lld) "
							     "of node %llu: not an edge of etype "
							     "'%s' into its type, or out of order",
							     where, (long long)x, (long long)o[0],
							     (long long)o[1], (long long)o[2],
							     (unsigned long long)v,
							     s->et[e].canonical);
				}
				at = (uint64_t)r[1];
			}
	}
	if (at != ohi)
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s: the out-slots end at %llu, the part's "
			     "out-edges at %llu", where, (unsigned long long)at,
			     (unsigned long long)ohi);
	return 0;
}

static int load_data(struct pl *l, bool edge, uint32_t type, const struct gs_data *d,
		     struct rdps_graph_part_data *out)
{
	const struct gs_type *t = edge ? &l->s.et[type] : &l->s.nt[type];
	uint32_t q = l->p->part;
	uint64_t rows = t->cnt[q];
	struct rdps_npy a;
	char name[300];
	int ret;

	snprintf(name, sizeof(name), "part-%u-%s.npy", q, d->file);
	if (strchr(d->file, '/'))
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/partition.json: data '%s': file '%s' "
			     "is not a name", l->dir, d->name, d->file);
	if ((ret = load_file(l, name, &a)))
		return ret;
	if (!a.ndim || a.shape[0] != rows || a.elem_size != rdps_npy_dtype_size(d->dtype) ||
	    (rows && a.data_bytes / rows != d->row_bytes))
		return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/%s: %s of %llu rows, want %llu rows "
			     "of %u bytes of %s as partition.json says", l->dir, name, a.descr,
			     (unsigned long long)a.shape[0], (unsigned long long)rows,
			     d->row_bytes, d->dtype);
	snprintf(out->name, sizeof(out->name), "%s", d->name);
	snprintf(out->table, sizeof(out->table), "%s", d->table);
	snprintf(out->dtype, sizeof(out->dtype), "%s", d->dtype);
	out->ndim = d->ndim;
	memcpy(out->shape, d->shape, sizeof(out->shape));
	out->row_bytes = d->row_bytes;
	out->table_dtype = d->table_dtype;
	out->table_elems = d->table_elems;
	out->num_rows = t->num;
	out->offsets = malloc(((size_t)l->s.k + 1) * sizeof(uint64_t));
	if (!out->offsets)
		return -ENOMEM;
	memcpy(out->offsets, t->cum, ((size_t)l->s.k + 1) * sizeof(uint64_t));
	out->rows = (void *)a.data;
	/* labels below the classes the dataset states */
	if (!edge && l->s.num_classes && !strcmp(d->name, "label") &&
	    !strcmp(d->dtype, "int64") && d->row_elems == 1)
		for (uint64_t i = 0; i < rows; i++) {
			int64_t v = ((const int64_t *)a.data)[i];

			if (v < 0 || (uint64_t)v >= l->s.num_classes)
				return rdps_gs_fail(l->err, l->errlen, -EINVAL, "%s/%s: node %llu has label "
					     "%lld, not one of the %u classes", l->dir, name,
					     (unsigned long long)(t->lo[q] + i), (long long)v,
					     l->s.num_classes);
		}
	return 0;
}

static int copy_ranges(uint64_t **dst, const uint64_t *src, uint32_t k)
{
	*dst = malloc(((size_t)k + 1) * sizeof(uint64_t));
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, src, ((size_t)k + 1) * sizeof(uint64_t));
	return 0;
}

/* RDPS_GRAPH_META: the JSON without "files", NUL-padded rows on server 0. */
static int make_meta(struct pl *l, json_t *root)
{
	struct rdps_graph_part *p = l->p;
	json_t *copy = json_copy(root);
	char *text;
	size_t len;

	if (!copy)
		return -ENOMEM;
	json_object_del(copy, "files");
	text = json_dumps(copy, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(copy);
	if (!text)
		return -ENOMEM;
	len = strlen(text) + 1;
	p->meta_rows = (len + RDPS_GRAPH_META_ROW - 1) / RDPS_GRAPH_META_ROW;
	p->meta = calloc(p->meta_rows, RDPS_GRAPH_META_ROW);
	p->meta_offsets = calloc((size_t)p->num_parts + 1, sizeof(uint64_t));
	if (!p->meta || !p->meta_offsets) {
		free(text);
		return -ENOMEM;
	}
	memcpy(p->meta, text, len);
	free(text);
	for (uint32_t i = 1; i <= p->num_parts; i++)
		p->meta_offsets[i] = p->meta_rows;
	return 0;
}

int rdps_graph_part_load(const char *dir, uint32_t part, struct rdps_graph_part **out,
			 char *err, size_t errlen)
{
	struct rdps_graph_part *p = calloc(1, sizeof(*p));
	struct pl l = { .p = p, .dir = dir, .err = err, .errlen = errlen };
	const struct gschema *s = &l.s;
	char path[4096];
	json_error_t je;
	json_t *root;
	uint32_t nd = 0;
	int ret;

	if (!p)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/partition.json", dir);
	root = json_load_file(path, 0, &je);
	if (!root) {
		free(p);
		return rdps_gs_fail(err, errlen, -ENOENT, "%s:%d: %s", path, je.line, je.text);
	}
	if ((ret = rdps_gschema_parse(root, path, &l.s, err, errlen)))
		goto out;
	if (part >= s->k) {
		ret = rdps_gs_fail(err, errlen, -EINVAL, "%s: part %u asked of a partition into %u parts "
			    "(one server per part: as many servers as parts)", path, part, s->k);
		goto out;
	}
	l.files = json_object_get(root, "files");
	if (!json_is_object(l.files)) {
		ret = rdps_gs_fail(err, errlen, -EINVAL, "%s: no \"files\" (the sizes and checksums of the "
			    "partition's files)", path);
		goto out;
	}
	p->part = part;
	p->num_parts = s->k;
	p->num_nodes = s->N;
	p->num_edges = s->E;
	p->num_ntypes = s->T;
	p->num_etypes = s->R;
	p->num_classes = s->num_classes;
	if ((ret = copy_ranges(&p->node_ranges, s->node_ranges, s->k)) ||
	    (ret = copy_ranges(&p->edge_ranges, s->edge_ranges, s->k)) ||
	    (ret = copy_ranges(&p->in_slot_ranges, s->in_slot_ranges, s->k)) ||
	    (ret = copy_ranges(&p->out_slot_ranges, s->out_slot_ranges, s->k)) ||
	    (ret = copy_ranges(&p->out_edge_ranges, s->out_edge_ranges, s->k)))
		goto out;
	/* Server 0 also checks the file every part shares. */
	if (part == 0) {
		struct rdps_npy idmap;

		if ((ret = load_file(&l, "idmap.npy", &idmap)))
			goto out;
		if (strcmp(idmap.descr, "<i8") || idmap.ndim != 1 || idmap.shape[0] != s->N) {
			ret = rdps_gs_fail(err, errlen, -EINVAL, "%s/idmap.npy: want %llu int64 ids", dir,
				    (unsigned long long)s->N);
			goto out;
		}
	}
	if ((ret = load_i64(&l, "inptr", s->in_slot_ranges[part + 1] - s->in_slot_ranges[part], 2,
			    &p->indptr_rows)) ||
	    (ret = load_i64(&l, "edges", s->edge_ranges[part + 1] - s->edge_ranges[part], 4,
			    &p->edge_rows)) ||
	    (ret = load_i64(&l, "outptr", s->out_slot_ranges[part + 1] -
				  s->out_slot_ranges[part], 2, &p->outptr_rows)) ||
	    (ret = load_i64(&l, "outedges", s->out_edge_ranges[part + 1] -
				    s->out_edge_ranges[part], 3, &p->outedge_rows)))
		goto out;
	for (uint32_t t = 0; t < s->T; t++)
		nd += s->nt[t].ndata;
	for (uint32_t e = 0; e < s->R; e++)
		nd += s->et[e].ndata;
	p->data = calloc(nd + 1, sizeof(*p->data));
	if (!p->data) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t t = 0; t < s->T; t++)
		for (uint32_t i = 0; i < s->nt[t].ndata; i++)
			if ((ret = load_data(&l, false, t, &s->nt[t].data[i],
					     &p->data[p->num_data++])))
				goto out;
	for (uint32_t e = 0; e < s->R; e++)
		for (uint32_t i = 0; i < s->et[e].ndata; i++)
			if ((ret = load_data(&l, true, e, &s->et[e].data[i],
					     &p->data[p->num_data++])))
				goto out;
	if (s->T == 1)
		for (uint32_t i = 0; i < p->num_data; i++)
			if (!strcmp(p->data[i].name, "feat") && !strcmp(p->data[i].dtype, "float32"))
				p->feat_dim = p->data[i].table_elems;
	if ((ret = check_in(&l)) || (ret = check_out(&l)) || (ret = make_meta(&l, root)))
		goto out;
	if (5 + p->num_data > RDPS_GRAPH_MAX_TABLES) {
		ret = rdps_gs_fail(err, errlen, -EINVAL, "%s: %u data tables and the graph's 5: more than "
			    "the %d a graph may take", path, p->num_data, RDPS_GRAPH_MAX_TABLES);
		goto out;
	}
out:
	rdps_gschema_free(&l.s);
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
	uint32_t n = 5 + p->num_data;

	if (max < n)
		return -ENOSPC;
	table(&tables[0], RDPS_GRAPH_META, p->meta_rows, p->meta_offsets, RDPS_DTYPE_U8,
	      RDPS_GRAPH_META_ROW, p->part == 0 ? p->meta : NULL);
	table(&tables[1], RDPS_GRAPH_INDPTR, p->in_slot_ranges[p->num_parts], p->in_slot_ranges,
	      RDPS_DTYPE_I64, 2, p->indptr_rows);
	table(&tables[2], RDPS_GRAPH_EDGES, p->num_edges, p->edge_ranges, RDPS_DTYPE_I64, 4,
	      p->edge_rows);
	table(&tables[3], RDPS_GRAPH_OUTPTR, p->out_slot_ranges[p->num_parts],
	      p->out_slot_ranges, RDPS_DTYPE_I64, 2, p->outptr_rows);
	table(&tables[4], RDPS_GRAPH_OUTEDGES, p->out_edge_ranges[p->num_parts],
	      p->out_edge_ranges, RDPS_DTYPE_I64, 3, p->outedge_rows);
	for (uint32_t i = 0; i < p->num_data; i++) {
		const struct rdps_graph_part_data *d = &p->data[i];

		table(&tables[5 + i], d->table, d->num_rows, d->offsets, d->table_dtype,
		      d->table_elems, d->rows);
	}
	return (int)n;
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
