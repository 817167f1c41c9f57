/* SPDX-License-Identifier: MIT */
/* Internal: the graph partition builder's state (graph.c assigns and
 * orders, graph_write.c writes, graph_dataset.c reads dataset dirs). */
#ifndef RDPS_PARTITION_GRAPH_BUILD_H
#define RDPS_PARTITION_GRAPH_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "rdps/kvstore.h"
#include "rdps/partition.h"

struct gb_data {
	const struct rdps_graph_array *a;
	bool edge;
	uint32_t type, index;       /* its type, and its index among the type's data */
	uint32_t row_elems, row_bytes;
	int table_dtype;
	uint32_t table_elems;
	char table[RDPS_TABLE_NAME_MAX];
};

struct gb {
	const struct rdps_graph_input *in;
	const struct rdps_graph_partition_opts *o;
	char *err;
	size_t errlen;
	uint32_t T, R;              /* node types, canonical edge types */
	uint64_t N, E;
	uint64_t *node_off, *edge_off; /* T + 1, R + 1: input homo ids per type */
	uint32_t *src_t, *dst_t;    /* R */
	struct gb_data *data;       /* node data (num_ndata), then edge data */
	uint32_t ndata, num_ndata;
	/* trainer ids (trainers_per_part > 1): the input homo ids', and the
	 * arrays of the "trainer_id" data made of them */
	int64_t *trainer;
	struct rdps_graph_array *made;
	int64_t **made_rows;
	uint32_t num_made;
	/* assignment and relabeling */
	uint32_t *part;             /* N: part of each input homo id */
	uint64_t *old2new, *new2old;
	uint16_t *ntype;            /* N: type of each new id */
	uint64_t *node_ranges, *edge_ranges; /* k + 1 */
	uint64_t *tcount, *tlo;     /* k x T: nodes of type t in part p, first new id */
	uint64_t *ecount, *elo;     /* k x R: edges of etype e in part p, first new id */
	/* slots */
	uint32_t *nin, *nout;       /* T: etypes into / out of each type */
	uint32_t *in_pos, *out_pos; /* R: position among them */
	uint64_t *in_slot, *out_slot; /* N + 1: first slot of each new id */
	/* edges: by input homo id x, then the order */
	uint32_t *e_type;
	uint64_t *e_src, *e_dst;    /* new ids */
	uint64_t *order;            /* new edge id -> x */
	int64_t *inptr;             /* in-slots x 2: [begin, end) edge ids */
	int64_t *outptr;            /* out-slots x 2: positions */
	uint64_t *outlist;          /* position -> edge id */
};

/* A graph dataset directory read into an input (owning its arrays). */
struct rdps_gb_dataset {
	struct rdps_graph_input in;
	struct rdps_graph_ntype_input *ntypes;
	struct rdps_graph_etype_input *etypes;
	struct rdps_graph_array *arrays;
	uint32_t num_arrays;
	void **bufs;
	uint32_t num_bufs;
	char *meta_json;
	char **strings;
	uint32_t num_strings;
};

int rdps_gb_dataset_load(const char *dir, struct rdps_gb_dataset *ds, char *err,
			 size_t errlen);
void rdps_gb_dataset_free(struct rdps_gb_dataset *ds);

int rdps_gb_write(struct gb *g, struct rdps_graph_partition_result *res);
void rdps_gb_free(struct gb *g);
bool rdps_gb_mask_set(const struct rdps_graph_array *m, uint64_t i);
int rdps_gb_table_dtype(const char *dtype, uint32_t row_elems, uint32_t row_bytes, int *tdtype,
			uint32_t *telems);

#endif
