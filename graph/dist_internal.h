/* SPDX-License-Identifier: MIT */
/* Internal: DistGraph's client state, shared by dist_graph.c (schema,
 * maps, degrees) and dist_sample.c (sampling). */
#ifndef RDPS_GRAPH_DIST_INTERNAL_H
#define RDPS_GRAPH_DIST_INTERNAL_H

#include "kvstore/graph_sample.h"
#include "rdps/graph.h"
#include "schema.h"

/* One (seed, etype) of a call: its slot and where its picks go. */
struct item {
	uint64_t slot;
	uint32_t seed, etype;
	uint32_t server;
	uint32_t cap;          /* picks it may get */
	uint64_t at;           /* its first pick in the staging arrays */
	uint32_t got;
	uint8_t how;           /* ITEM_RPC or ITEM_READ */
	bool full;             /* read: every row of the slot is read */
	uint64_t begin, end;   /* read: the slot's edges (positions) */
	uint64_t full_at;      /* read, full: its first row in g->full */
};

enum { ITEM_RPC = 0, ITEM_READ = 1 };

struct rdps_graph {
	struct rdps_client *c;
	uint32_t nserv;        /* the client's servers (per-server arrays) */
	struct gschema s;
	char *schema_text;
	struct rdps_table_info meta, indptr, edges, outptr, outedges;
	/* per etype: the prob table of the last call */
	uint32_t *prob_id;
	int *prob_dtype;
	/* scratch */
	struct item *items; size_t items_cap;
	uint64_t *ids; size_t ids_cap;
	int64_t *rows; size_t rows_cap;
	uint64_t *excl; size_t excl_cap;
	uint64_t *posx; size_t posx_cap;
	double *w; size_t w_cap;
	uint64_t *st_other, *st_eid; int64_t *st_type; size_t st_cap, st_eid_cap, st_type_cap;
	struct rdps_sample_scratch sc;
	int64_t *full; size_t full_cap;     /* whole slots' rows (4 or 3 int64 each) */
	uint64_t *sortkey; size_t sortkey_cap;
	/* rpc */
	void **req, **rep;
	size_t *req_cap, *rep_cap, *req_len, *rep_len, *round_cap;
	uint32_t *round;
	void **round_req, **round_rep;
	uint64_t *cursor;      /* per server: next item in its sorted run */
	uint64_t *run_lo, *run_hi;
	uint32_t **req_items;  /* per server: the items of its request */
	size_t *req_items_cap;
	/* results */
	uint64_t *r_src, *r_dst, *r_eid; int32_t *r_etype; int64_t *r_type;
	uint32_t *r_seed; size_t r_cap, r_dst_cap, r_eid_cap, r_etype_cap, r_type_cap, r_seed_cap;
	struct rdps_sample_result res;
};

/* Grows *p (of *cap elements of size) to at least n (1 if 0). */
int rdps_dg_grow(void *p, size_t *cap, size_t n, size_t size);
/* -ERANGE naming the first node >= N. */
int rdps_dg_check_nodes(struct rdps_graph *g, const uint64_t *nodes, size_t n, const char *what);
/* Rows ids[0..n) of table t into g->rows (cols int64 each). */
int rdps_dg_read_rows(struct rdps_graph *g, const struct rdps_table_info *t, const uint64_t *ids,
		      size_t n, uint32_t cols);

#endif
