/* SPDX-License-Identifier: MIT */
/*
 * Internal: a graph partition's JSON (rdps/graph.h) parsed and checked for
 * consistency (ranges that tile, type maps that add up, data rows that fit
 * their tables): what a server loads its part by and what a client reads
 * from RDPS_GRAPH_META, so neither trusts a field the other wrote.
 */
#ifndef RDPS_GRAPH_SCHEMA_H
#define RDPS_GRAPH_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/graph.h"

struct gs_data {
	const char *name, *dtype, *table, *file; /* into the schema's JSON */
	uint32_t ndim;
	uint64_t shape[RDPS_GRAPH_MAX_NDIM];
	uint32_t row_elems, row_bytes;
	int table_dtype;
	uint32_t table_elems;
};

struct gs_type {
	const char *name;
	uint64_t num;              /* nodes or edges of the type */
	uint64_t *lo, *cnt;        /* k: homo range [lo, lo + cnt) in part p */
	uint64_t *cum;             /* k + 1: per-type ids of part p start at cum[p] */
	/* node types */
	uint32_t nin, nout;        /* etypes into / out of it */
	uint32_t *in, *out;
	uint64_t *in_base, *out_base; /* k: first in-/out-slot of its nodes in part p */
	/* edge types */
	uint32_t src, dst;
	char *canonical;           /* "src:name:dst" */
	uint32_t ndata;
	struct gs_data *data;
};

struct gschema {
	json_t *root;              /* owns the strings */
	uint32_t k, T, R;
	uint64_t N, E;
	bool typed;                /* graph:edges' type column holds the etype */
	uint32_t num_classes;
	uint64_t *node_ranges, *edge_ranges, *in_slot_ranges, *out_slot_ranges,
		*out_edge_ranges;  /* k + 1 each */
	struct gs_type *nt, *et;
	uint32_t *in_pos, *out_pos; /* R: an etype's position among its types' */
};

/* Writes a message into err and returns ret (the graph module's). */
int rdps_gs_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Parses root (taking a reference), where naming it in messages. 0 or
 * -EINVAL (-EPROTONOSUPPORT for another format_version, with the command
 * that rewrites a version 1 partition) with the field in err. */
int rdps_gschema_parse(json_t *root, const char *where, struct gschema *s, char *err,
		       size_t errlen);
void rdps_gschema_free(struct gschema *s);

/* Type of homo node id v (< N) and its part. */
uint32_t rdps_gschema_node_type(const struct gschema *s, uint64_t v, uint32_t *part);
uint32_t rdps_gschema_edge_type(const struct gschema *s, uint64_t y, uint32_t *part);

/* The in- or out-slot of (v, etype e); e must be an etype into / out of v's
 * type (else UINT64_MAX). */
uint64_t rdps_gschema_slot(const struct gschema *s, uint64_t v, uint32_t e, bool out);

#endif
