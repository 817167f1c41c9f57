/* SPDX-License-Identifier: MIT */
/*
 * rdps graph: a graph held by the servers (DGL's DistGraph), one part per
 * server, and neighbour sampling two ways.
 *
 * A graph partition (rdps partition of a graph dataset, rdps/partition.h)
 * is served as tables: server p loads part p (rdps server --graph DIR) and
 * holds, for its nodes node_ranges[p] .. node_ranges[p+1] (new ids),
 *
 *   RDPS_GRAPH_INDPTR  int64 x 2 per node: its in-edges are the edges
 *                      [begin, end) (edge ids are the in-edges' positions,
 *                      part after part, so a part's edges are contiguous)
 *   RDPS_GRAPH_EDGES   int64 x 4 per edge: source, destination, edge type,
 *                      the edge's index in the dataset's edges.npy
 *   "ndata:feat"       float32 x F, "ndata:label" int64,
 *   "ndata:train_mask", "ndata:val_mask", "ndata:test_mask" uint8
 *
 * all read-only. Neighbour sampling picks up to fanout in-edges of each
 * seed uniformly without replacement (all if it has no more), either
 *
 *   RDPS_SAMPLE_RPC    asked of the server that holds the seed (its CPU
 *                      reads its CSR: one request per server holding seeds),
 *   RDPS_SAMPLE_READ   by reading the seeds' rows of RDPS_GRAPH_INDPTR and
 *                      then the picked rows of RDPS_GRAPH_EDGES as a pull
 *                      reads rows: with RDMA READs, no server CPU at all
 *                      (over verbs and ofi; tcp serves the reads).
 *
 * Both pick with rdps_sample_choose()'s stream of (seed, node): the same
 * seed gives the same edges either way.
 */
#ifndef RDPS_GRAPH_H
#define RDPS_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "rdps/client.h"
#include "rdps/server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_GRAPH_INDPTR "graph:indptr"
#define RDPS_GRAPH_EDGES "graph:edges"
#define RDPS_GRAPH_NDATA_PREFIX "ndata:"

/* ---------------------------------------------------------------------- */
/* Server side: a part of a graph partition directory, as tables           */

struct rdps_graph_part {
	uint32_t part, num_parts;
	uint64_t num_nodes, num_edges;   /* of the whole graph */
	uint64_t feat_dim;
	uint32_t num_classes, num_etypes; /* as the dataset states them (0: unstated) */
	uint64_t *node_ranges;           /* num_parts + 1 */
	uint64_t *edge_ranges;           /* num_parts + 1 */
	int64_t *indptr_rows;            /* this part's nodes x 2: in-edges [begin, end) */
	int64_t *edge_rows;              /* this part's edges x 4: src, dst, type, original */
	float *feat;                     /* nodes x feat_dim */
	int64_t *labels;                 /* nodes */
	uint8_t *mask[3];                /* train, val, test: nodes each */
};

/* Reads part `part` of the graph partition directory dir (partition.json
 * and the part's .npy files), checking every array's shape and every edge
 * (its source a node of the graph, its type and label below the dataset's
 * num_etypes and num_classes, where graph.json states them). 0, or -errno with the file and what is wrong in
 * err. */
int rdps_graph_part_load(const char *dir, uint32_t part, struct rdps_graph_part **out,
			 char *err, size_t errlen);
void rdps_graph_part_free(struct rdps_graph_part *p);

/* Fills tables[0 .. n) (n returned, at most max) with the part's tables as
 * the header describes them, their rows pointing into p (which must
 * outlive rdps_server_create), read-only. -ENOSPC if max is too small. */
int rdps_graph_part_tables(const struct rdps_graph_part *p,
			   struct rdps_server_table_config *tables, uint32_t max);

/* Appends the part's tables (rdps_graph_part_tables) to cfg->tables after
 * its cfg->num_tables: a server of a graph job (rdps server --graph, the
 * Python package's standalone DistGraph). 0, or -ENOSPC. */
int rdps_graph_part_add_tables(const struct rdps_graph_part *p, struct rdps_server_config *cfg);

/* ---------------------------------------------------------------------- */
/* Client side: DistGraph                                                  */

struct rdps_graph; /* opaque */

/* Finds the graph's tables on the client's servers. -ENOENT (with a
 * reason in rdps_client_errmsg) if they serve none. The graph uses c and
 * must be closed before it. Not thread-safe, as a client is not. */
int rdps_graph_open(struct rdps_client *c, struct rdps_graph **out);
void rdps_graph_close(struct rdps_graph *g);

/* The graph's nodes and edges (all parts), and its parts. */
uint64_t rdps_graph_num_nodes(const struct rdps_graph *g);
uint64_t rdps_graph_num_edges(const struct rdps_graph *g);
uint32_t rdps_graph_num_parts(const struct rdps_graph *g);

/* Nodes [*lo, *hi) are part p's (node_split hands each trainer its part's
 * training nodes). */
void rdps_graph_part_nodes(const struct rdps_graph *g, uint32_t part, uint64_t *lo,
			   uint64_t *hi);

/* In-degrees of nodes[0..n). -ERANGE for a node >= num_nodes. */
int rdps_graph_in_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			  uint64_t *deg);

/* Endpoints (and, if etype is not NULL, types) of edges eids[0..n). */
int rdps_graph_find_edges(struct rdps_graph *g, const uint64_t *eids, size_t n,
			  uint64_t *src, uint64_t *dst, int64_t *etype);

enum rdps_sample_way {
	RDPS_SAMPLE_RPC = 0,  /* the seeds' servers pick */
	RDPS_SAMPLE_READ = 1, /* the client reads the rows and picks */
};

/* "rpc", "read" (and "one-sided" for read): the way, or -EINVAL. */
int rdps_sample_way_parse(const char *name);

/* Where sampled edges go: arrays of at least n * fanout entries for n
 * seeds (eid and etype may be NULL). Edges come seed after seed, each
 * seed's in increasing edge id. */
struct rdps_sampled {
	uint64_t *src, *dst, *eid;
	int64_t *etype;
	size_t num_edges;     /* set: edges written */
};

/* Samples up to fanout in-edges of each of seeds[0..n) (see the top of the
 * file), with random choices drawn from seed. 0 or -errno (-ERANGE for a
 * seed >= num_nodes, -EINVAL for fanout 0 or above
 * RDPS_SAMPLE_MAX_FANOUT). */
int rdps_graph_sample_neighbors(struct rdps_graph *g, const uint64_t *seeds, size_t n,
				uint32_t fanout, int way, uint64_t seed, struct rdps_sampled *out);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_GRAPH_H */
