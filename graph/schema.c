// SPDX-License-Identifier: MIT
/* A graph partition's JSON, parsed and checked (schema.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "rdps/kvstore.h"
#include "rdps/transport.h"
#include "schema.h"

int rdps_gs_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

static int get_u64(json_t *o, const char *key, uint64_t *v, const char *where, char *err,
		   size_t errlen)
{
	json_t *x = json_object_get(o, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: \"%s\" missing or not a non-negative "
			     "integer", where, key);
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

/* k + 1 non-decreasing integers from 0 to total. */
static int ranges(json_t *root, const char *key, uint32_t k, uint64_t total, uint64_t **out,
		  const char *where, char *err, size_t errlen)
{
	json_t *a = json_object_get(root, key);
	uint64_t *r;

	if (!json_is_array(a) || json_array_size(a) != (size_t)k + 1)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: \"%s\" is not an array of k + 1 = %u "
			     "offsets", where, key, k + 1);
	r = calloc((size_t)k + 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	*out = r;
	for (uint32_t i = 0; i <= k; i++) {
		json_t *v = json_array_get(a, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    (i && (uint64_t)json_integer_value(v) < r[i - 1]))
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: \"%s\"[%u] is not a non-negative "
				     "integer at least the one before", where, key, i);
		r[i] = (uint64_t)json_integer_value(v);
	}
	if (r[0] || (total != UINT64_MAX && r[k] != total))
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: \"%s\" runs from %llu to %llu, not from "
			     "0 to %llu", where, key, (unsigned long long)r[0],
			     (unsigned long long)r[k], (unsigned long long)total);
	return 0;
}

static int old_version(json_t *root, const char *where, uint64_t version, char *err,
		       size_t errlen)
{
	json_t *k = json_object_get(root, "k"), *m = json_object_get(root, "method");
	json_t *s = json_object_get(root, "seed");

	if (version == 1)
		return rdps_gs_fail(err, errlen, -EPROTONOSUPPORT, "%s: a graph partition of "
			     "format_version 1, written by an rdps before typed graphs and file "
			     "checksums; partition the graph again: rdps partition --data "
			     "GRAPHDIR -k %lld --method %s --seed %lld%s%s --out DIR (or "
			     "rdps.distributed.partition_graph)", where,
			     json_is_integer(k) ? (long long)json_integer_value(k) : 0,
			     json_is_string(m) ? json_string_value(m) : "metis",
			     json_is_integer(s) ? (long long)json_integer_value(s) : 0,
			     json_is_true(json_object_get(root, "balance_train"))
				     ? " --balance_train" : "",
			     json_is_true(json_object_get(root, "balance_edges"))
				     ? " --balance_edges" : "");
	return rdps_gs_fail(err, errlen, -EPROTONOSUPPORT, "%s: format_version %llu; this rdps reads "
		     "graph partitions of version %d", where, (unsigned long long)version,
		     RDPS_GRAPH_FORMAT_VERSION);
}

static int parse_data(json_t *list, bool edge, uint32_t type, struct gs_type *t,
		      const char *where, char *err, size_t errlen)
{
	size_t i;
	json_t *v;

	if (!list)
		return 0;
	if (!json_is_array(list))
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: %s type '%s': \"data\" is not an array",
			     where, edge ? "edge" : "node", t->name);
	t->ndata = (uint32_t)json_array_size(list);
	t->data = calloc(t->ndata + 1, sizeof(*t->data));
	if (!t->data)
		return -ENOMEM;
	json_array_foreach(list, i, v) {
		struct gs_data *d = &t->data[i];
		json_t *shape = json_object_get(v, "shape");
		const char *pre = edge ? RDPS_GRAPH_EDATA_PREFIX : RDPS_GRAPH_NDATA_PREFIX;
		uint64_t elems = 1, esize;
		size_t j;
		json_t *x;

		d->name = json_string_value(json_object_get(v, "name"));
		d->dtype = json_string_value(json_object_get(v, "dtype"));
		d->table = json_string_value(json_object_get(v, "table"));
		d->file = json_string_value(json_object_get(v, "file"));
		esize = d->dtype ? rdps_npy_dtype_size(d->dtype) : 0;
		if (!d->name || !esize || !d->table || !d->file || !json_is_array(shape) ||
		    json_array_size(shape) >= RDPS_GRAPH_MAX_NDIM ||
		    strncmp(d->table, pre, strlen(pre)) ||
		    strlen(d->table) >= RDPS_TABLE_NAME_MAX)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: %s type '%s': data[%zu] wants a "
				     "name, a known dtype, a shape of < %d dimensions, a table "
				     "'%s...' and a file", where, edge ? "edge" : "node", t->name,
				     i, RDPS_GRAPH_MAX_NDIM, pre);
		json_array_foreach(shape, j, x) {
			if (!json_is_integer(x) || json_integer_value(x) <= 0 ||
			    elems * (uint64_t)json_integer_value(x) > RDPS_MAX_DIM * 4ull)
				return rdps_gs_fail(err, errlen, -EINVAL, "%s: data '%s': shape[%zu] is not "
					     "a dimension of a row that fits a table", where,
					     d->name, j);
			elems *= (uint64_t)json_integer_value(x);
			d->shape[d->ndim++] = (uint64_t)json_integer_value(x);
		}
		if (elems * esize > RDPS_MAX_DIM * 4ull)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: data '%s': rows of %llu bytes",
				     where, d->name, (unsigned long long)(elems * esize));
		d->row_elems = (uint32_t)elems;
		d->row_bytes = (uint32_t)(elems * esize);
		if (!strcmp(d->dtype, "float32"))
			d->table_dtype = RDPS_DTYPE_F32;
		else if (!strcmp(d->dtype, "float64"))
			d->table_dtype = RDPS_DTYPE_F64;
		else if (!strcmp(d->dtype, "int64"))
			d->table_dtype = RDPS_DTYPE_I64;
		else
			d->table_dtype = RDPS_DTYPE_U8;
		d->table_elems = d->table_dtype == RDPS_DTYPE_U8 ? d->row_bytes : d->row_elems;
		if (rdps_dtype_row_words(d->table_dtype, d->table_elems) > RDPS_MAX_DIM)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: data '%s' does not fit a table row",
				     where, d->name);
		(void)type;
	}
	return 0;
}

/* "node_map"/"edge_map" of type t: [[lo, hi] per part], each inside its
 * part's range; per-type offsets. */
static int type_map(json_t *m, const char *key, struct gs_type *t, uint32_t k,
		    const uint64_t *part_ranges, const char *where, char *err, size_t errlen)
{
	t->lo = calloc(k, sizeof(uint64_t));
	t->cnt = calloc(k, sizeof(uint64_t));
	t->cum = calloc((size_t)k + 1, sizeof(uint64_t));
	if (!t->lo || !t->cnt || !t->cum)
		return -ENOMEM;
	if (!json_is_array(m) || json_array_size(m) != k)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: type '%s': \"%s\" is not [lo, hi] per part",
			     where, t->name, key);
	for (uint32_t p = 0; p < k; p++) {
		json_t *r = json_array_get(m, p);
		json_t *a = json_array_get(r, 0), *b = json_array_get(r, 1);
		int64_t lo = json_integer_value(a), hi = json_integer_value(b);

		if (!json_is_integer(a) || !json_is_integer(b) || lo < 0 || hi < lo ||
		    (uint64_t)lo < part_ranges[p] || (uint64_t)hi > part_ranges[p + 1])
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: type '%s': \"%s\"[%u] is not a "
				     "range inside part %u's [%llu, %llu)", where, t->name, key, p,
				     p, (unsigned long long)part_ranges[p],
				     (unsigned long long)part_ranges[p + 1]);
		t->lo[p] = (uint64_t)lo;
		t->cnt[p] = (uint64_t)(hi - lo);
		t->cum[p + 1] = t->cum[p] + t->cnt[p];
	}
	if (t->cum[k] != t->num)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: type '%s': \"%s\" holds %llu, not its "
			     "%llu", where, t->name, key, (unsigned long long)t->cum[k],
			     (unsigned long long)t->num);
	return 0;
}

/* Types tile each part's range in type order. */
static int tiles(const struct gs_type *types, uint32_t n, uint32_t k, const uint64_t *ranges,
		 const char *what, const char *where, char *err, size_t errlen)
{
	for (uint32_t p = 0; p < k; p++) {
		uint64_t at = ranges[p];

		for (uint32_t t = 0; t < n; t++) {
			if (types[t].lo[p] != at)
				return rdps_gs_fail(err, errlen, -EINVAL, "%s: %s type '%s' of part %u "
					     "starts at %llu, not %llu (the types must tile the "
					     "part in order)", where, what, types[t].name, p,
					     (unsigned long long)types[t].lo[p],
					     (unsigned long long)at);
			at += types[t].cnt[p];
		}
		if (at != ranges[p + 1])
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: the %s types of part %u end at "
				     "%llu, not %llu", where, what, p, (unsigned long long)at,
				     (unsigned long long)ranges[p + 1]);
	}
	return 0;
}

static int u32_list(json_t *a, uint32_t max, uint32_t **out, uint32_t *n)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a))
		return -EINVAL;
	*n = (uint32_t)json_array_size(a);
	*out = calloc(*n + 1, sizeof(uint32_t));
	if (!*out)
		return -ENOMEM;
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= max)
			return -EINVAL;
		(*out)[i] = (uint32_t)json_integer_value(v);
	}
	return 0;
}

static int parse_types(struct gschema *s, const char *where, char *err, size_t errlen)
{
	json_t *nts = json_object_get(s->root, "ntypes"), *ets = json_object_get(s->root, "etypes");
	size_t i;
	json_t *v;
	int ret;

	if (!json_is_array(nts) || !json_is_array(ets) || !json_array_size(nts) ||
	    !json_array_size(ets) || json_array_size(nts) > 65535 || json_array_size(ets) > 65535)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: \"ntypes\" and \"etypes\" must be arrays "
			     "of 1..65535 types", where);
	s->T = (uint32_t)json_array_size(nts);
	s->R = (uint32_t)json_array_size(ets);
	s->nt = calloc(s->T, sizeof(*s->nt));
	s->et = calloc(s->R, sizeof(*s->et));
	s->in_pos = calloc(s->R, sizeof(uint32_t));
	s->out_pos = calloc(s->R, sizeof(uint32_t));
	if (!s->nt || !s->et || !s->in_pos || !s->out_pos)
		return -ENOMEM;
	json_array_foreach(ets, i, v) {
		struct gs_type *t = &s->et[i];
		const char *src = json_string_value(json_object_get(v, "src"));
		const char *dst = json_string_value(json_object_get(v, "dst"));

		t->name = json_string_value(json_object_get(v, "name"));
		t->src = t->dst = UINT32_MAX;
		for (uint32_t n = 0; n < s->T; n++) {
			const char *nn = json_string_value(json_object_get(json_array_get(nts, n),
									   "name"));

			if (nn && src && !strcmp(nn, src) && t->src == UINT32_MAX)
				t->src = n;
			if (nn && dst && !strcmp(nn, dst) && t->dst == UINT32_MAX)
				t->dst = n;
		}
		if (!t->name || t->src == UINT32_MAX || t->dst == UINT32_MAX)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: etypes[%zu] wants a name, and src "
				     "and dst among the node types", where, i);
		if (asprintf(&t->canonical, "%s:%s:%s", src, t->name, dst) < 0) {
			t->canonical = NULL;
			return -ENOMEM;
		}
		if ((ret = get_u64(v, "num_edges", &t->num, where, err, errlen)) ||
		    (ret = type_map(json_object_get(v, "edge_map"), "edge_map", t, s->k,
				    s->edge_ranges, where, err, errlen)) ||
		    (ret = parse_data(json_object_get(v, "data"), true, (uint32_t)i, t, where, err,
				      errlen)))
			return ret;
	}
	json_array_foreach(nts, i, v) {
		struct gs_type *t = &s->nt[i];
		uint32_t nin = 0, nout = 0;

		t->name = json_string_value(json_object_get(v, "name"));
		if (!t->name)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: ntypes[%zu] has no name", where, i);
		if ((ret = get_u64(v, "num_nodes", &t->num, where, err, errlen)) ||
		    (ret = type_map(json_object_get(v, "node_map"), "node_map", t, s->k,
				    s->node_ranges, where, err, errlen)) ||
		    (ret = parse_data(json_object_get(v, "data"), false, (uint32_t)i, t, where,
				      err, errlen)))
			return ret;
		if (u32_list(json_object_get(v, "in_etypes"), s->R, &t->in, &t->nin) ||
		    u32_list(json_object_get(v, "out_etypes"), s->R, &t->out, &t->nout))
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: node type '%s': \"in_etypes\" and "
				     "\"out_etypes\" must list etype ids", where, t->name);
		/* the etypes into / out of it, in order: nothing else reads right */
		for (uint32_t e = 0; e < s->R; e++) {
			if (s->et[e].dst == i) {
				if (nin >= t->nin || t->in[nin] != e)
					break;
				s->in_pos[e] = nin++;
			}
			if (s->et[e].src == i) {
				if (nout >= t->nout || t->out[nout] != e)
					break;
				s->out_pos[e] = nout++;
			}
		}
		if (nin != t->nin || nout != t->nout)
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: node type '%s': \"in_etypes\" or "
				     "\"out_etypes\" is not the etypes into / out of it in order",
				     where, t->name);
		t->in_base = calloc(s->k, sizeof(uint64_t));
		t->out_base = calloc(s->k, sizeof(uint64_t));
		if (!t->in_base || !t->out_base)
			return -ENOMEM;
	}
	if ((ret = tiles(s->nt, s->T, s->k, s->node_ranges, "node", where, err, errlen)) ||
	    (ret = tiles(s->et, s->R, s->k, s->edge_ranges, "edge", where, err, errlen)))
		return ret;
	for (uint32_t p = 0; p < s->k; p++) {
		uint64_t in = s->in_slot_ranges[p], out = s->out_slot_ranges[p];

		for (uint32_t t = 0; t < s->T; t++) {
			s->nt[t].in_base[p] = in;
			s->nt[t].out_base[p] = out;
			in += s->nt[t].cnt[p] * s->nt[t].nin;
			out += s->nt[t].cnt[p] * s->nt[t].nout;
		}
		if (in != s->in_slot_ranges[p + 1] || out != s->out_slot_ranges[p + 1])
			return rdps_gs_fail(err, errlen, -EINVAL, "%s: part %u's slot ranges disagree with "
				     "its nodes and their types' etypes", where, p);
	}
	return 0;
}

int rdps_gschema_parse(json_t *root, const char *where, struct gschema *s, char *err,
		       size_t errlen)
{
	json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "format_version");
	uint64_t k = 0, cls = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	s->root = json_incref(root);
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "rdps-graph-partition"))
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: not a graph partition (format \"%s\"; "
			     "make one with rdps partition --data GRAPHDIR or "
			     "rdps.distributed.partition_graph)", where,
			     json_is_string(fmt) ? json_string_value(fmt) : "?");
	if (!json_is_integer(ver) || json_integer_value(ver) != RDPS_GRAPH_FORMAT_VERSION)
		return old_version(root, where, json_is_integer(ver)
							? (uint64_t)json_integer_value(ver) : 1,
				   err, errlen);
	if ((ret = get_u64(root, "k", &k, where, err, errlen)) ||
	    (ret = get_u64(root, "num_nodes", &s->N, where, err, errlen)) ||
	    (ret = get_u64(root, "num_edges", &s->E, where, err, errlen)))
		return ret;
	if (!k || k > 65536)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: k = %llu parts (want 1..65536)", where,
			     (unsigned long long)k);
	s->k = (uint32_t)k;
	if (!get_u64(root, "num_classes", &cls, where, err, errlen) && cls <= UINT32_MAX)
		s->num_classes = (uint32_t)cls;
	s->typed = json_is_true(json_object_get(root, "typed_edges"));
	if ((ret = ranges(root, "node_ranges", s->k, s->N, &s->node_ranges, where, err, errlen)) ||
	    (ret = ranges(root, "edge_ranges", s->k, s->E, &s->edge_ranges, where, err, errlen)) ||
	    (ret = ranges(root, "in_slot_ranges", s->k, UINT64_MAX, &s->in_slot_ranges, where, err,
			  errlen)) ||
	    (ret = ranges(root, "out_slot_ranges", s->k, UINT64_MAX, &s->out_slot_ranges, where,
			  err, errlen)) ||
	    (ret = ranges(root, "out_edge_ranges", s->k, s->E, &s->out_edge_ranges, where, err,
			  errlen)))
		return ret;
	if ((ret = parse_types(s, where, err, errlen)))
		return ret;
	if (!s->typed && s->R != 1)
		return rdps_gs_fail(err, errlen, -EINVAL, "%s: untyped edges in a graph of %u etypes",
			     where, s->R);
	return 0;
}

void rdps_gschema_free(struct gschema *s)
{
	for (uint32_t t = 0; s->nt && t < s->T; t++) {
		free(s->nt[t].lo);
		free(s->nt[t].cnt);
		free(s->nt[t].cum);
		free(s->nt[t].in);
		free(s->nt[t].out);
		free(s->nt[t].in_base);
		free(s->nt[t].out_base);
		free(s->nt[t].data);
	}
	for (uint32_t e = 0; s->et && e < s->R; e++) {
		free(s->et[e].lo);
		free(s->et[e].cnt);
		free(s->et[e].cum);
		free(s->et[e].canonical);
		free(s->et[e].data);
	}
	free(s->nt);
	free(s->et);
	free(s->in_pos);
	free(s->out_pos);
	free(s->node_ranges);
	free(s->edge_ranges);
	free(s->in_slot_ranges);
	free(s->out_slot_ranges);
	free(s->out_edge_ranges);
	json_decref(s->root);
	memset(s, 0, sizeof(*s));
}

static uint32_t part_of(const uint64_t *r, uint32_t k, uint64_t id)
{
	uint32_t lo = 0, hi = k; /* r[lo] <= id < r[hi] */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r[mid] <= id)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static uint32_t type_of(const struct gs_type *types, uint32_t n, uint32_t p, uint64_t id)
{
	uint32_t lo = 0, hi = n;

	/* the last type whose range in part p starts at or before id and is
	 * not empty: binary search on starts, then skip empty ones back */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (types[mid].lo[p] <= id)
			lo = mid;
		else
			hi = mid;
	}
	while (lo && types[lo].cnt[p] == 0)
		lo--;
	while (lo + 1 < n && id >= types[lo].lo[p] + types[lo].cnt[p])
		lo++;
	return lo;
}

uint32_t rdps_gschema_node_type(const struct gschema *s, uint64_t v, uint32_t *part)
{
	uint32_t p = part_of(s->node_ranges, s->k, v);

	if (part)
		*part = p;
	return s->T == 1 ? 0 : type_of(s->nt, s->T, p, v);
}

uint32_t rdps_gschema_edge_type(const struct gschema *s, uint64_t y, uint32_t *part)
{
	uint32_t p = part_of(s->edge_ranges, s->k, y);

	if (part)
		*part = p;
	return s->R == 1 ? 0 : type_of(s->et, s->R, p, y);
}

uint64_t rdps_gschema_slot(const struct gschema *s, uint64_t v, uint32_t e, bool out)
{
	uint32_t p, t = rdps_gschema_node_type(s, v, &p);
	const struct gs_type *nt = &s->nt[t];

	if (out ? s->et[e].src != t : s->et[e].dst != t)
		return UINT64_MAX;
	if (out)
		return nt->out_base[p] + (v - nt->lo[p]) * nt->nout + s->out_pos[e];
	return nt->in_base[p] + (v - nt->lo[p]) * nt->nin + s->in_pos[e];
}
