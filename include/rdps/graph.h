/* SPDX-License-Identifier: MIT */
/*
 * rdps graph: a graph held by the servers (DGL's DistGraph), homogeneous or
 * heterogeneous, one part per server, and neighbour sampling two ways.
 *
 * Ids, as DGL's RangePartitionBook has them. Node types are numbered in the
 * order of the partition's "ntypes", canonical edge types (src type, name,
 * dst type) in the order of its "etypes". A node's homogeneous id ("homo
 * id") is what the graph-wide tables are indexed by: part p holds homo ids
 * node_ranges[p] .. node_ranges[p+1], and inside a part the nodes come type
 * after type, so type t of part p is the range node_map[t][p] = [lo, hi). A
 * node's per-type id counts the nodes of its type part after part: homo id
 * h in node_map[t][p] is per-type id h - lo + (nodes of type t in parts
 * before p). Edges alike (edge_ranges, edge_map, per-etype ids). A graph of
 * one node type and one edge type ("_N", "_N:_E:_N") has homo id = per-type
 * id. Each edge lives in the part of its destination.
 *
 * Tables (server p holds the rows of part p; all read-only):
 *
 *   RDPS_GRAPH_META      uint8 rows of RDPS_GRAPH_META_ROW bytes, all on
 *                        server 0: the partition's JSON (below, without its
 *                        "files"), NUL-padded. A client reads it at open.
 *   RDPS_GRAPH_INDPTR    int64 x 2 per in-slot: the edge ids [begin, end) of
 *                        one (node, in-etype) pair. Node v of type t has one
 *                        in-slot per etype whose dst type is t (in etype
 *                        order, "in_etypes" of the type), nodes in homo id
 *                        order: slot(v, e) = in_slot_base[p][t] + (v - lo) *
 *                        |in_etypes(t)| + (position of e in in_etypes(t)).
 *                        Homogeneous: one slot per node, slot = node.
 *   RDPS_GRAPH_EDGES     int64 x 4 per edge id: src, dst (homo ids), type,
 *                        original id. A part's edges come etype after etype,
 *                        each etype's by destination, so one slot's edges are
 *                        contiguous. type: the canonical etype id; for a
 *                        graph of one etype, the input's per-edge type if it
 *                        had one (DGL's ETYPE of to_homogeneous, the etypes
 *                        of `rdps dataset wordnet-nodes`), else 0. original
 *                        id: the edge's per-etype id in the input graph.
 *   RDPS_GRAPH_OUTPTR    int64 x 2 per out-slot (as in-slots, with the
 *                        etypes whose src type is the node's: "out_etypes"):
 *                        positions [begin, end) in RDPS_GRAPH_OUTEDGES.
 *   RDPS_GRAPH_OUTEDGES  int64 x 3 per out-edge: dst, edge id, type; held by
 *                        the source's part, a slot's edges by edge id.
 *   node data            a table per (node type, name): row = per-type id,
 *                        the data's dtype when the kvstore has it (float32,
 *                        float64, int64, uint8), else uint8 rows of the row's
 *                        bytes (int32, float16, bfloat16, bool, ...); any
 *                        feature shape, flattened into the row. Named
 *                        "ndata:NAME" in a graph of one node type, else
 *                        "ndata:T:NAME" (T the type's index), "ndata:T:#I" if
 *                        that is too long; the JSON maps names to tables.
 *   edge data            alike per canonical etype: "edata:NAME",
 *                        "edata:E:NAME", row = per-etype id.
 *
 * Partition directory (format_version 2; rdps_graph_partition_build writes
 * it, rdps_graph_part_load reads it): partition.json and, per part p,
 *   part-p-inptr.npy     int64 (in-slots of p) x 2, as RDPS_GRAPH_INDPTR
 *   part-p-edges.npy     int64 (edges of p) x 4, as RDPS_GRAPH_EDGES
 *   part-p-outptr.npy    int64 (out-slots of p) x 2
 *   part-p-outedges.npy  int64 (out-edges of p) x 3
 *   part-p-nd-T-I.npy    node data I of type T, p's rows in per-type order
 *   part-p-ed-E-I.npy    edge data I of etype E
 * and idmap.npy (int64: homo id -> the node's per-type id in the input).
 * partition.json: format, format_version, graph_name, k, method, seed,
 * num_nodes, num_edges, node_ranges, edge_ranges, in_slot_ranges,
 * out_slot_ranges, out_edge_ranges (k + 1 each), typed_edges (false: column
 * "type" holds the input's per-edge types), ntypes [{name, num_nodes,
 * node_map [[lo, hi] per part], in_etypes, out_etypes, data [{name, dtype,
 * shape (a row's), table, file}]}], etypes [{src, name, dst, num_edges,
 * edge_map, data}], train_nodes (per part, of "train_mask"s),
 * local_edge_fraction, dataset (the input's own JSON), and files {NAME:
 * {"bytes", "xxh3"}}: XXH3-64 of every file, checked on load (a damaged
 * file is refused, named). Version 1 partitions (before types and
 * checksums) are refused with the command that rewrites them.
 *
 * Neighbour sampling, per seed and per chosen etype (fanout[e] per etype:
 * -1 all, 0 none), over in-edges or out-edges: up to fanout edges of the
 * slot uniformly without replacement (all if it has no more), or exactly
 * fanout with replacement, or weighted by an edge data of the etype
 * ("prob", float32/float64, >= 0; zero never picked; without replacement
 * by Efraimidis-Spirakis keys), never picking excluded edge ids, either
 *
 *   RDPS_SAMPLE_RPC   asked of the servers holding the seeds' slots (one
 *                     request per server, all at once), or
 *   RDPS_SAMPLE_READ  by reading the slots' rows and then the picked rows as
 *                     a pull reads rows: RDMA READs over verbs and ofi, no
 *                     server CPU (tcp serves the reads).
 *
 * Both pick with the same stream of (seed, slot, direction): the same seed
 * gives the same edges either way. Fanout -1 needs no choice and is read
 * either way; out-edges weighted by prob are picked by the client (their
 * weights sit with the edges' destinations).
 */
#ifndef RDPS_GRAPH_H
#define RDPS_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/client.h"
#include "rdps/server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_GRAPH_META "graph:meta"
#define RDPS_GRAPH_INDPTR "graph:indptr"
#define RDPS_GRAPH_EDGES "graph:edges"
#define RDPS_GRAPH_OUTPTR "graph:outptr"
#define RDPS_GRAPH_OUTEDGES "graph:outedges"
#define RDPS_GRAPH_NDATA_PREFIX "ndata:"
#define RDPS_GRAPH_EDATA_PREFIX "edata:"
#define RDPS_GRAPH_META_ROW 1024u
#define RDPS_GRAPH_FORMAT_VERSION 2
/* Tables a graph may take of a server's RDPS_MAX_TABLES (the rest are left
 * to tables clients make: DistTensor, DistEmbedding). */
#define RDPS_GRAPH_MAX_TABLES 48
#define RDPS_GRAPH_MAX_NDIM 8

/* ---------------------------------------------------------------------- */
/* Server side: a part of a graph partition directory, as tables           */

/* One node or edge data of a part as loaded (rows in per-type order). */
struct rdps_graph_part_data {
	char name[256];
	char table[RDPS_TABLE_NAME_MAX];
	char dtype[16];               /* "float32", "bfloat16", "bool", ... */
	uint32_t ndim;                /* of a row: the data's shape[1:] */
	uint64_t shape[RDPS_GRAPH_MAX_NDIM];
	uint32_t row_bytes;
	int table_dtype;              /* enum rdps_dtype the table holds */
	uint32_t table_elems;
	uint64_t num_rows;            /* of the whole type */
	uint64_t *offsets;            /* num_parts + 1: per-type ids of each part */
	void *rows;                   /* this part's */
};

struct rdps_graph_part {
	uint32_t part, num_parts;
	uint64_t num_nodes, num_edges;   /* of the whole graph */
	uint32_t num_ntypes, num_etypes; /* canonical types */
	uint64_t feat_dim;               /* of "feat" of a graph of one node type (0: none) */
	uint32_t num_classes;            /* as the dataset states it (0: unstated) */
	uint64_t *node_ranges;           /* num_parts + 1 */
	uint64_t *edge_ranges;           /* num_parts + 1 */
	uint64_t *in_slot_ranges, *out_slot_ranges, *out_edge_ranges; /* num_parts + 1 */
	int64_t *indptr_rows;            /* this part's in-slots x 2 */
	int64_t *edge_rows;              /* this part's edges x 4 */
	int64_t *outptr_rows;            /* this part's out-slots x 2 */
	int64_t *outedge_rows;           /* this part's out-edges x 3 */
	uint32_t num_data;               /* node data, then edge data */
	struct rdps_graph_part_data *data;
	char *meta;                      /* RDPS_GRAPH_META's bytes (server 0's) */
	uint64_t meta_rows;
	uint64_t *meta_offsets;
	void **bufs;                     /* the files' bytes the rows point into */
	uint32_t num_bufs;
};

/* Reads part `part` of the graph partition directory dir (partition.json
 * and the part's files), checking first every file's size and XXH3 against
 * partition.json (a damaged file is refused naming it), then every array's
 * shape and every slot and edge (each edge in exactly its destination's
 * slot, every id in range, labels below num_classes where stated). 0, or
 * -errno with the file and what is wrong in err (-EBADMSG: a checksum). */
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

/* Finds the graph's tables on the client's servers and reads its schema
 * (RDPS_GRAPH_META). -ENOENT (with a reason in rdps_client_errmsg) if they
 * serve none. The graph uses c and must be closed before it. Not
 * thread-safe, as a client is not. */
int rdps_graph_open(struct rdps_client *c, struct rdps_graph **out);
void rdps_graph_close(struct rdps_graph *g);

/* The graph's nodes and edges (all parts), and its parts. */
uint64_t rdps_graph_num_nodes(const struct rdps_graph *g);
uint64_t rdps_graph_num_edges(const struct rdps_graph *g);
uint32_t rdps_graph_num_parts(const struct rdps_graph *g);

/* The partition's JSON as the servers hold it (partition.json without
 * "files"): names, data schemas, maps. Owned by g. */
const char *rdps_graph_schema(const struct rdps_graph *g);

/* Types. Names are owned by g. */
uint32_t rdps_graph_num_ntypes(const struct rdps_graph *g);
uint32_t rdps_graph_num_etypes(const struct rdps_graph *g);
const char *rdps_graph_ntype_name(const struct rdps_graph *g, uint32_t ntype);
/* Canonical etype e: its name, and its source and destination node types. */
const char *rdps_graph_etype_name(const struct rdps_graph *g, uint32_t etype,
				  uint32_t *src_ntype, uint32_t *dst_ntype);
/* -ENOENT if no such type. An etype name matches "src:name:dst" or, when
 * only one canonical etype has it, the bare name. */
int rdps_graph_ntype_id(const struct rdps_graph *g, const char *name);
int rdps_graph_etype_id(const struct rdps_graph *g, const char *name);
uint64_t rdps_graph_num_nodes_of(const struct rdps_graph *g, uint32_t ntype);
uint64_t rdps_graph_num_edges_of(const struct rdps_graph *g, uint32_t etype);

/* Nodes [*lo, *hi) (homo ids) are part p's; with rdps_graph_ntype_range,
 * those of one type (DGL's node_map[ntype][p]). Edges alike. */
void rdps_graph_part_nodes(const struct rdps_graph *g, uint32_t part, uint64_t *lo,
			   uint64_t *hi);
void rdps_graph_ntype_range(const struct rdps_graph *g, uint32_t ntype, uint32_t part,
			    uint64_t *lo, uint64_t *hi);
void rdps_graph_etype_range(const struct rdps_graph *g, uint32_t etype, uint32_t part,
			    uint64_t *lo, uint64_t *hi);

/* Type maps (DGL's map_to_per_ntype, map_to_homo_nid, and the edge
 * versions). Homo ids -> type (may be NULL) and per-type id; per-type ids
 * of one type -> homo ids. -ERANGE naming the first id out of range. */
int rdps_graph_map_to_per_ntype(struct rdps_graph *g, const uint64_t *homo, size_t n,
				int32_t *ntype, uint64_t *per_type);
int rdps_graph_map_to_homo_nid(struct rdps_graph *g, uint32_t ntype, const uint64_t *per_type,
			       size_t n, uint64_t *homo);
int rdps_graph_map_to_per_etype(struct rdps_graph *g, const uint64_t *homo, size_t n,
				int32_t *etype, uint64_t *per_type);
int rdps_graph_map_to_homo_eid(struct rdps_graph *g, uint32_t etype, const uint64_t *per_type,
			       size_t n, uint64_t *homo);
/* Parts of homo node / edge ids. */
int rdps_graph_nid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part);
int rdps_graph_eid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part);

/* Node or edge data of a type, as served. */
struct rdps_graph_data_info {
	const char *name;       /* the data's name ("feat") */
	const char *table;      /* the table serving it (rdps_client_table) */
	const char *dtype;      /* "float32", "int64", "bfloat16", "bool", ... */
	uint32_t ndim;          /* of a row */
	const uint64_t *shape;  /* a row's shape (ndim entries) */
	uint32_t row_bytes;
	uint64_t num_rows;      /* the type's nodes or edges */
};
/* Data i of node type t (edge: 0) or etype t (edge: 1). -ENOENT past the
 * last. Strings owned by g. */
int rdps_graph_data(const struct rdps_graph *g, int edge, uint32_t type, uint32_t i,
		    struct rdps_graph_data_info *info);

/* In-degrees of nodes[0..n) (homo ids; all in-etypes). -ERANGE for a node
 * >= num_nodes. */
int rdps_graph_in_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			  uint64_t *deg);
/* Out-degrees alike. */
int rdps_graph_out_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
			   uint64_t *deg);

/* Endpoints (homo ids) and, if etype is not NULL, the type column of edges
 * eids[0..n) (homo ids). */
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

/* Samples up to fanout in-edges of each of seeds[0..n) over all etypes
 * as one (a homogeneous graph's sampler; see the top of the file), with
 * random choices drawn from seed. 0 or -errno (-ERANGE for a seed >=
 * num_nodes, -EINVAL for fanout 0 or above RDPS_SAMPLE_MAX_FANOUT, or a
 * graph of more than one etype: use rdps_graph_sample). */
int rdps_graph_sample_neighbors(struct rdps_graph *g, const uint64_t *seeds, size_t n,
				uint32_t fanout, int way, uint64_t seed, struct rdps_sampled *out);

/* What rdps_graph_sample picks. */
struct rdps_sample_spec {
	const int32_t *fanouts;    /* per canonical etype: -1 all, 0 none, else up to
				    * RDPS_SAMPLE_MAX_FANOUT */
	bool out;                  /* out-edges of the seeds (DGL's edge_dir="out") */
	bool replace;              /* exactly fanout picks each, with replacement */
	const char *prob;          /* name of an edge data (float32/float64, one per
				    * edge) of each sampled etype to weight by, or NULL */
	const uint64_t *exclude;   /* edge ids (homo) never picked, or NULL */
	size_t num_exclude;
	int way;                   /* enum rdps_sample_way */
	uint64_t seed;             /* of the random choices */
};

/* The picks, owned by g until its next call: seed after seed, each seed's
 * etypes in order, each etype's in increasing edge id (out: position)
 * order. src/dst/eid are homo ids; etype is the canonical etype id;
 * type the edge's type column (= etype except in a graph of one etype with
 * per-edge types); seed_index the seed's index in the call. */
struct rdps_sample_result {
	const uint64_t *src, *dst, *eid;
	const int32_t *etype;
	const int64_t *type;
	const uint32_t *seed_index;
	size_t num_edges;
};

/* Samples the neighbours of seeds[0..n) (homo ids) as spec says (see the
 * top of the file). 0 or -errno with a reason in rdps_client_errmsg:
 * -ERANGE (a seed or excluded edge id out of range), -EINVAL (fanouts,
 * an unknown prob or one not a float of one element, more than
 * RDPS_SAMPLE_MAX_EDGES picks of one seed's etype), or the transport's. */
int rdps_graph_sample(struct rdps_graph *g, const uint64_t *seeds, size_t n,
		      const struct rdps_sample_spec *spec, const struct rdps_sample_result **out);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_GRAPH_H */
