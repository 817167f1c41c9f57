/* SPDX-License-Identifier: MIT */
/*
 * rdps partition: splitting a dataset (see rdps/dataset.h) into k parts with
 * METIS or at random, the partition directory it writes, and the loader
 * (io_uring, checksummed) that servers and trainers read it with.
 *
 * Partition directory (format_version 1), written to a temporary sibling and
 * renamed into place only when complete:
 *
 *   partition.json   format_version, dataset {name, path, train_bytes,
 *                    valid_bytes, test_bytes}, num_entities,
 *                    num_relations, num_train/num_valid/num_test, k, method,
 *                    seed, ranges (k+1 entity offsets), edge_cut,
 *                    local_triple_fraction, partitions[] {index, file,
 *                    num_entities, num_triples, local_triples, checksum},
 *                    files {idmap, valid, test, entities, relations}
 *   part-P.trp       train triples whose head is in part P (blob, kind
 *                    TRIPLES, relabeled entity ids; relations keep their ids)
 *   valid.trp        valid triples, relabeled (blob, kind TRIPLES, part ~0)
 *   test.trp         test triples, relabeled
 *   idmap.bin        new id -> original (entities.dict) id (blob, kind IDMAP)
 *   entities.dict    copied from the dataset, original ids
 *   relations.dict   copied from the dataset
 *
 * Relabeled ids: the entities of part P are [ranges[P], ranges[P+1]), in
 * their original id order. A triple belongs to its head's part (as DGL-KE);
 * it is local if its tail is in the same part.
 *
 * Blob file (all fields little-endian; the payload follows the header):
 *
 *   0  char magic[8]       "RDPSBLOB"
 *   8  u32 version         RDPS_BLOB_VERSION
 *  12  u32 kind            RDPS_BLOB_TRIPLES, RDPS_BLOB_IDMAP, or a user kind
 *  16  u64 count           number of records
 *  24  u32 record_size     bytes per record (12 for u32 triples)
 *  28  u32 id_width        bytes per id (4)
 *  32  u32 part            partition index, RDPS_BLOB_NO_PART if none
 *  36  u32 flags           0
 *  40  u64 payload_bytes   count * record_size
 *  48  u64 payload_xxh3    XXH3-64 (seed 0) of the payload
 *  56  u64 header_xxh3     XXH3-64 of bytes 0..55
 */
#ifndef RDPS_PARTITION_H
#define RDPS_PARTITION_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdps/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_PARTITION_FORMAT_VERSION 1
#define RDPS_BLOB_MAGIC "RDPSBLOB"
#define RDPS_BLOB_VERSION 1
#define RDPS_BLOB_NO_PART 0xffffffffu

enum rdps_blob_kind {
	RDPS_BLOB_TRIPLES = 1, /* records of 3 ids: head, relation, tail */
	RDPS_BLOB_IDMAP = 2,   /* records of 1 id: original id of new id i */
	RDPS_BLOB_CKPT_ROWS = 3,  /* checkpoint: rows of a shard, dim floats each */
	RDPS_BLOB_CKPT_STATE = 4, /* checkpoint: optimizer state of a shard */
	RDPS_BLOB_USER = 256,  /* first kind free for other modules */
};

struct rdps_blob_header {
	char magic[8];          /* RDPS_BLOB_MAGIC, no NUL */
	uint32_t version;       /* RDPS_BLOB_VERSION */
	uint32_t kind;          /* enum rdps_blob_kind or >= RDPS_BLOB_USER */
	uint64_t count;         /* records */
	uint32_t record_size;   /* bytes per record */
	uint32_t id_width;      /* bytes per id, 0 if not id records */
	uint32_t part;          /* partition index or RDPS_BLOB_NO_PART */
	uint32_t flags;         /* 0 */
	uint64_t payload_bytes; /* count * record_size */
	uint64_t payload_xxh3;  /* XXH3-64 of the payload */
	uint64_t header_xxh3;   /* XXH3-64 of the 56 bytes above */
};
_Static_assert(sizeof(struct rdps_blob_header) == 64, "blob header is 64 bytes");

/* ---------------------------------------------------------------------- */
/* Loader.                                                                 */

/* Loader tuning; pass NULL for the defaults. */
struct rdps_loader_opts {
	size_t chunk_bytes;   /* bytes per read, default 512 KiB (>= 4 KiB) */
	unsigned queue_depth; /* reads in flight, default 8 (1..256) */
	int force_pread;      /* 1: skip io_uring (benchmarks, tests) */
};

/*
 * Reads the whole file at path into a new 4 KiB-aligned buffer (*buf, owned
 * by the caller, free()), with up to queue_depth chunk reads in flight via
 * io_uring, computing XXH3-64 of the bytes in order while later chunks are
 * still being read (*xxh3, may be NULL). If io_uring cannot be set up it
 * uses pread, and logs that once per process. *len gets the size. Returns 0
 * or a negative errno (err names the file). Thread-safe.
 */
int rdps_loader_read_file(const char *path, const struct rdps_loader_opts *o,
			  void **buf, size_t *len, uint64_t *xxh3, char *err,
			  size_t errlen);

/* A loaded blob: header plus payload (payload_bytes bytes, 4 KiB aligned,
 * owned; free with rdps_loader_blob_free or take it and free()). */
struct rdps_blob {
	struct rdps_blob_header hdr;
	void *data;
	int used_uring; /* 1 if io_uring did the reads */
};

/*
 * Loads a blob file: checks magic, version, header checksum, kind (unless
 * kind is 0), payload_bytes == count * record_size, the file size (a short
 * file is reported as truncated, a longer one as trailing data), and the
 * payload checksum, which is computed while the reads are in flight.
 * Returns 0 or -EINVAL (bad header or kind), -EBADMSG (checksum mismatch),
 * -EIO/-errno (read errors); err names the file and the field.
 */
int rdps_loader_load(const char *path, uint32_t kind,
		     const struct rdps_loader_opts *o, struct rdps_blob *out,
		     char *err, size_t errlen);

/* Frees b->data and zeroes *b; accepts NULL. */
void rdps_loader_blob_free(struct rdps_blob *b);

/* Streaming blob writer: writes path.tmp-XXXXXX and renames it to path on
 * commit, so path never holds a partial file. Filled buffers are written by
 * io_uring (pwrite without it) while the next one fills: its memory is 4
 * buffers whatever the blob's size. */
struct rdps_blob_writer;

/* Creates the temporary file; part may be RDPS_BLOB_NO_PART. buffer_bytes
 * is the size of each of its 4 write buffers (0 = 1 MiB). */
int rdps_loader_writer_create(const char *path, uint32_t kind,
			      uint32_t record_size, uint32_t id_width,
			      uint32_t part, size_t buffer_bytes,
			      struct rdps_blob_writer **out);

/* Appends n whole records (n * record_size bytes). */
int rdps_loader_writer_append(struct rdps_blob_writer *w, const void *records,
			      uint64_t n);

/* Writing records in place (no copy through the caller's memory): the
 * whole records that fit in the writer's buffer now, at least min (the
 * buffer is handed to the disk first if fewer fit), at *at; 0 after a
 * failed write, or if min records are more than a buffer holds. Then
 * advance() by the n of them the caller wrote there. */
uint64_t rdps_loader_writer_space(struct rdps_blob_writer *w, uint64_t min, void **at);
int rdps_loader_writer_advance(struct rdps_blob_writer *w, uint64_t n);

/* Records appended so far. */
uint64_t rdps_loader_writer_count(const struct rdps_blob_writer *w);

/* Writes the header, fsyncs, renames to path. *xxh3 (may be NULL) gets the
 * payload checksum. The writer stays allocated; destroy it afterwards. */
int rdps_loader_writer_commit(struct rdps_blob_writer *w, uint64_t *xxh3);

/* Writes a whole blob (header, then count records of payload) with
 * io_uring (pwrite if io_uring is unavailable) to a temporary file in the
 * same directory, fsyncs it and renames it to path: path holds the old file
 * or the complete new one, never a partial one. *xxh3 (may be NULL) gets
 * the payload checksum. 0 or -errno with a reason naming path. */
int rdps_loader_write_blob(const char *path, uint32_t kind, uint32_t record_size,
			   uint32_t id_width, const void *payload, uint64_t count,
			   uint64_t *xxh3, char *err, size_t errlen);

/* Frees the writer; if it was not committed, removes the temporary file.
 * Accepts NULL. */
void rdps_loader_writer_destroy(struct rdps_blob_writer *w);

/* ---------------------------------------------------------------------- */
/* Building a partition directory.                                         */

enum rdps_partition_method {
	RDPS_PARTITION_METIS = 0,  /* METIS_PartGraphKway, 2 constraints */
	RDPS_PARTITION_RANDOM = 1, /* seeded shuffle cut into k equal ranges */
};

/* "metis" / "random"; NULL for other values. */
const char *rdps_partition_method_name(enum rdps_partition_method m);
/* Parses a method name: 0 or -EINVAL. */
int rdps_partition_method_parse(const char *name, enum rdps_partition_method *m);

/* Coarsening before METIS (label propagation into clusters, METIS on the
 * graph of the clusters): METIS alone needs several times the graph's
 * memory, too much for graphs of Freebase's size. */
enum rdps_coarsen {
	RDPS_COARSEN_AUTO = 0, /* when the graph has more adjacency entries than below */
	RDPS_COARSEN_ON = 1,
	RDPS_COARSEN_OFF = 2,
};
#define RDPS_COARSEN_AUTO_ENTRIES (1ull << 22) /* ~2M distinct edges */

/* "auto", "on", "off" for a coarsening mode; parse sets *c from one of
 * them and returns 0, or -EINVAL. */
const char *rdps_coarsen_name(enum rdps_coarsen c);
int rdps_coarsen_parse(const char *name, enum rdps_coarsen *c);

struct rdps_partition_opts {
	const char *data_dir;  /* dataset in the raw layout */
	const char *out_dir;   /* partition directory to create */
	uint32_t k;            /* parts, 1..num_entities */
	enum rdps_partition_method method;
	uint64_t seed;         /* METIS seed / shuffle seed */
	int force;             /* replace an existing out_dir */
	enum rdps_coarsen coarsen; /* METIS only */
};

struct rdps_partition_result {
	uint64_t num_entities;
	uint64_t num_train;
	uint64_t local_triples;       /* train triples with tail in head's part */
	double local_triple_fraction; /* local_triples / num_train */
	uint64_t edge_cut;            /* train triples crossing parts */
	uint64_t max_part_triples;    /* largest part's train triples */
	uint64_t max_part_entities;   /* largest part's entities */
	double seconds;               /* wall time of the build */
	long peak_rss_kib;            /* getrusage ru_maxrss after the build */
	long pre_metis_rss_kib;       /* ru_maxrss just before METIS ran (0:
				       * random); the rest is METIS's own */
	uint32_t clusters;            /* vertices METIS partitioned if the graph
				       * was coarsened first (0: not) */
};

/*
 * Reads the dataset streaming (train once as text into a temporary binary
 * file in the new directory, then passes over that), builds the undirected
 * entity graph in CSR (parallel edges merged into edge weights, self-loops
 * dropped), partitions it with vertex weights (1, triples headed by the
 * entity) so parts balance on entities and on triples, relabels, and writes
 * the partition directory described above. The name index is freed before
 * METIS runs; our own peak is about 16 bytes per train triple (adjacency and
 * edge weights) plus 24 bytes per entity, to which METIS adds its working
 * copy and coarsening levels (in total about 7x the CSR size at 10M triples).
 * seed must be below 2^63 (it is stored in partition.json).
 * Errors: -EINVAL with a "FILE:LINE" or field message for bad input and for
 * k == 0 or k > num_entities; -EEXIST if out_dir exists and !force.
 * Progress lines go to rdps_info().
 */
int rdps_partition_build(const struct rdps_partition_opts *o,
			 struct rdps_partition_result *res, char *err,
			 size_t errlen);

/* ---------------------------------------------------------------------- */
/* Graph partitions (node classification: DGL's DistGraph)                 */

/*
 * A graph to partition, homogeneous or heterogeneous, as arrays in memory
 * (what a DGL graph is: Python's rdps.distributed.partition_graph fills it
 * from one) or read from a graph dataset directory. Ids are per type.
 */
#define RDPS_GRAPH_INPUT_MAX_NDIM 8

struct rdps_graph_array {
	const char *name;        /* unique within its type; any characters */
	const char *dtype;       /* "float32", "float64", "float16", "bfloat16", "int64",
				  * "int32", "int16", "int8", "uint8", "bool", ... */
	uint32_t ndim;           /* 1..RDPS_GRAPH_INPUT_MAX_NDIM */
	uint64_t shape[RDPS_GRAPH_INPUT_MAX_NDIM]; /* shape[0]: the type's nodes/edges */
	const void *data;        /* C order, little-endian */
};

struct rdps_graph_ntype_input {
	const char *name;
	uint64_t num_nodes;
	uint32_t num_data;
	const struct rdps_graph_array *data;
	const int64_t *balance;  /* a class per node METIS balances (DGL's
				  * balance_ntypes[ntype]), or NULL */
};

struct rdps_graph_etype_input {
	const char *src, *name, *dst; /* canonical: node type names and the etype's */
	uint64_t num_edges;
	const int64_t *src_ids, *dst_ids; /* per-type node ids */
	const int64_t *types;    /* a graph of one etype only: a type per edge
				  * (served as graph:edges' type column), or NULL */
	uint32_t num_data;
	const struct rdps_graph_array *data;
};

struct rdps_graph_input {
	const char *name;
	uint32_t num_ntypes;
	const struct rdps_graph_ntype_input *ntypes;
	uint32_t num_etypes;
	const struct rdps_graph_etype_input *etypes;
	const char *meta_json;   /* the input's own JSON object (kept in
				  * partition.json's "dataset"), or NULL */
	uint32_t num_classes;    /* labels ("label") are below it; 0: unstated */
};

/*
 * Partitions a graph into k parts and writes the partition directory that
 * rdps/graph.h describes (format_version 2, XXH3 of every file; temporary
 * directory + rename): METIS on the undirected graph of every edge
 * (parallel edges merged and counted), balanced on a constraint per class
 * (the ntypes' balance arrays; else with balance_train each type's
 * "train_mask"; else, with more than one node type, the node type, as DGL
 * does) and, with balance_edges, on in-edges; or at random. Node ids are
 * relabeled so part p holds homo ids node_ranges[p] .. [p+1], type after
 * type; each part holds its nodes' in-edges, out-edge lists and data.
 *
 * rdps_graph_partition_build reads a graph dataset directory (data_dir):
 * graph.json with "ntypes" [{name, num_nodes, data {NAME: FILE.npy}}] and
 * "etypes" [{src, name, dst, edges: FILE.npy (E x 2 int64 per-type ids),
 * data {...}}] (`rdps dataset wordnet-hetero`), or the homogeneous layout
 * of `rdps dataset wordnet-nodes` (edges.npy E x 2, etypes.npy,
 * features.npy N x F float32, labels.npy, {train,val,test}_mask.npy: node
 * data feat, label and the masks, the etypes as the type column).
 * rdps_graph_partition_build_input takes the arrays (data_dir unused).
 */
struct rdps_graph_partition_opts {
	const char *data_dir;
	const char *out_dir;
	uint32_t k;
	enum rdps_partition_method method;
	bool balance_train;     /* a constraint: training nodes per part */
	bool balance_edges;     /* a constraint: in-edges per part */
	uint64_t seed;
	int force;
	/* With METIS: partition into k x trainers_per_part parts, each node's
	 * one its "trainer_id" (node data, int64; edge data: the
	 * destination's), then part = trainer / trainers_per_part (DGL's
	 * num_trainers_per_machine). 0 or 1: no trainer ids. */
	uint32_t trainers_per_part;
	/* The part of every node (input homo ids: type after type), kept as
	 * given instead of METIS's or a shuffle's (a DGL partition converted;
	 * method only names it), or NULL. */
	const uint32_t *assignment;
};

struct rdps_graph_partition_result {
	uint64_t num_nodes, num_edges, num_train;
	uint64_t local_edges;         /* edges whose source is in the destination's part */
	double local_edge_fraction;
	uint64_t max_part_nodes, max_part_edges, max_part_train;
	double seconds;
	long peak_rss_kib;
};

/* Partitions a graph as the comment above struct rdps_graph_partition_opts
 * describes: build from o->data_dir, build_input from arrays in memory.
 * Fills res. Returns 0, or -errno with a reason in err naming the file. */
int rdps_graph_partition_build(const struct rdps_graph_partition_opts *o,
			       struct rdps_graph_partition_result *res, char *err,
			       size_t errlen);
int rdps_graph_partition_build_input(const struct rdps_graph_input *in,
				     const struct rdps_graph_partition_opts *o,
				     struct rdps_graph_partition_result *res, char *err,
				     size_t errlen);

/* ---------------------------------------------------------------------- */
/* Reading a partition directory.                                          */

struct rdps_partition; /* opaque: parsed partition.json */

struct rdps_partition_part {
	const char *file;        /* file name inside the directory */
	uint64_t num_entities;
	uint64_t num_triples;
	uint64_t local_triples;
	uint64_t checksum;       /* payload XXH3-64 recorded in the json */
};

/* Everything partition.json says; owned by the handle. */
struct rdps_partition_info {
	uint32_t format_version;
	const char *dataset_name;
	const char *dataset_path;
	uint64_t dataset_bytes[RDPS_SPLIT_COUNT]; /* sizes of train/valid/test.txt */
	uint64_t num_entities;
	uint64_t num_relations;
	uint64_t num_triples[RDPS_SPLIT_COUNT];
	uint32_t k;
	enum rdps_partition_method method;
	uint64_t seed;
	const uint64_t *ranges;  /* k+1 offsets, ranges[0] = 0, [k] = N */
	uint64_t edge_cut;
	double local_triple_fraction;
	const struct rdps_partition_part *parts; /* k entries */
};

/* Opens dir/partition.json and checks it: format_version first (another
 * version is reported as such), then every field's presence, type and
 * consistency (ranges monotone and ending at num_entities, per-part counts
 * summing to num_train). */
int rdps_partition_open(const char *dir, struct rdps_partition **out,
			char *err, size_t errlen);

/* Frees the handle; accepts NULL. */
void rdps_partition_close(struct rdps_partition *p);

/* What partition.json says (owned by p). */
const struct rdps_partition_info *rdps_partition_get_info(const struct rdps_partition *p);

/* The directory given to rdps_partition_open (owned by p). */
const char *rdps_partition_dir(const struct rdps_partition *p);

/* Checks that the dataset in data_dir is the one p was built from, before
 * anything trusts the relabeled ids: its entities.dict and relations.dict
 * line by line against the copies in the partition directory, and the sizes
 * of train.txt, valid.txt and test.txt against those partition.json
 * recorded. Returns 0, or -EINVAL with err naming each file that differs and
 * how: the first differing dict line with both versions, a split file that
 * ends mid-line (cut short, with its last line's number) or has another
 * size. Differences in every split file are reported as a partition of
 * another dataset, fewer as damage or a change after partitioning. Reads
 * the dicts whole, and a split file only when its size differs. */
int rdps_partition_check_dataset(const struct rdps_partition *p, const char *data_dir,
				 char *err, size_t errlen);

/* Part owning relabeled entity id (binary search over ranges; id < N). */
uint32_t rdps_partition_owner(const struct rdps_partition_info *info,
			      uint64_t id);

/* Loads part's train triples (relabeled ids) with the io_uring loader,
 * verifying the checksum, the header against partition.json, and that every
 * id is in range and every head belongs to the part. *out is owned by the
 * caller (rdps_dataset_triples_free). */
int rdps_partition_load_train(const struct rdps_partition *p, uint32_t part,
			      const struct rdps_loader_opts *o,
			      struct rdps_triples *out, char *err, size_t errlen);

/* Loads the relabeled valid or test triples (same checks, no part check). */
int rdps_partition_load_split(const struct rdps_partition *p,
			      enum rdps_split split,
			      const struct rdps_loader_opts *o,
			      struct rdps_triples *out, char *err, size_t errlen);

/* Loads the id map: *new_to_old[new id] = original id; *old_to_new (may be
 * NULL) gets the inverse. Both malloc'd, owned by the caller; the map is
 * checked to be a permutation. */
int rdps_partition_load_idmap(const struct rdps_partition *p,
			      const struct rdps_loader_opts *o,
			      uint32_t **new_to_old, uint32_t **old_to_new,
			      char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_PARTITION_H */
