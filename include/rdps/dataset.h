/* SPDX-License-Identifier: MIT */
/*
 * rdps datasets: the on-disk knowledge-graph layout, its reader, and the
 * generators that write it (WordNet, synthetic, import of DGL-KE layouts).
 *
 * A dataset directory is DGL-KE's raw layout:
 *
 *   entities.dict    "id\tname" per line, ids 0..N-1 (any order, each once)
 *   relations.dict   "id\tname" per line, ids 0..R-1
 *   train.txt        "head\trelation\ttail" per line, names from the dicts
 *   valid.txt        same; every entity and relation also occurs in train
 *   test.txt         same
 *
 * Lines end in "\n" (a trailing "\r" is accepted); blank lines are skipped;
 * fields are separated by exactly one tab and may contain spaces. Entity and
 * relation ids are 32-bit in this version.
 *
 * Errors: functions return 0 (or a count) on success and a negative errno on
 * failure; when err is non-NULL they also write one line naming the file and
 * line or field ("DIR/train.txt:12: unknown entity 'x'") into err[errlen].
 * Library code never prints except progress lines through rdps_info().
 * Generators write into a temporary sibling directory and rename it to OUT
 * only when complete, so a failure leaves no OUT and no partial files.
 */
#ifndef RDPS_DATASET_H
#define RDPS_DATASET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rdps_split {
	RDPS_SPLIT_TRAIN = 0,
	RDPS_SPLIT_VALID = 1,
	RDPS_SPLIT_TEST = 2,
	RDPS_SPLIT_COUNT = 3,
};

/* "train", "valid", "test" (static strings), NULL for other values. */
const char *rdps_dataset_split_name(enum rdps_split split);

/* A triple array: ids[3*i] head, ids[3*i+1] relation, ids[3*i+2] tail. The
 * buffer is malloc'd (possibly 4 KiB aligned); the holder frees it with
 * rdps_dataset_triples_free(). */
struct rdps_triples {
	uint32_t *ids;   /* 3 * count ids, owned */
	uint64_t count;  /* number of triples */
};

/* Frees t->ids and zeroes *t. Accepts NULL and an already freed struct. */
void rdps_dataset_triples_free(struct rdps_triples *t);

/* ---------------------------------------------------------------------- */
/* Reader of the raw layout.                                               */

struct rdps_dataset; /* opaque: the two dicts and a name index */

/* Opens the dataset in dir: reads and checks entities.dict and
 * relations.dict (field count, ids 0..n-1 each once, non-empty unique names).
 * Triple files are read later by scan/load. On success *out owns the handle
 * (free with rdps_dataset_close). */
int rdps_dataset_open(const char *dir, struct rdps_dataset **out, char *err,
		      size_t errlen);

/* rdps_dataset_open with other dict files: entities and relations are
 * paths (relative to dir, or absolute); the split files are dir's. */
int rdps_dataset_open_dicts(const char *dir, const char *entities, const char *relations,
			    struct rdps_dataset **out, char *err, size_t errlen);

/* Frees the handle; accepts NULL. */
void rdps_dataset_close(struct rdps_dataset *ds);

/* The directory given to rdps_dataset_open (owned by ds). */
const char *rdps_dataset_dir(const struct rdps_dataset *ds);
uint32_t rdps_dataset_num_entities(const struct rdps_dataset *ds);
uint32_t rdps_dataset_num_relations(const struct rdps_dataset *ds);

/* Name of entity/relation id (owned by ds), NULL if id is out of range. */
const char *rdps_dataset_entity_name(const struct rdps_dataset *ds, uint32_t id);
const char *rdps_dataset_relation_name(const struct rdps_dataset *ds, uint32_t id);

/* Id of a name: 0 and *id set, or -ENOENT. */
int rdps_dataset_entity_id(const struct rdps_dataset *ds, const char *name,
			   uint32_t *id);
int rdps_dataset_relation_id(const struct rdps_dataset *ds, const char *name,
			     uint32_t *id);

/* Receives up to a few thousand triples (3*n ids) per call; the array is only
 * valid during the call. A non-zero return stops the scan and is returned by
 * rdps_dataset_scan (use a negative errno). */
typedef int (*rdps_triple_fn)(void *ctx, const uint32_t *ids, size_t n);

/* Streams one split file, mapping names to ids, calling fn per batch (fn may
 * be NULL to only validate and count). Memory is O(batch), not O(file).
 * Errors name "FILE:LINE": wrong field count, empty name, unknown entity or
 * relation, and for valid/test an entity or relation that never occurs in
 * train (the first valid/test scan therefore scans train once, without
 * calling fn, if train was not scanned yet). Returns the number of triples
 * (>= 0) or a negative errno. Not thread-safe on one handle. */
int64_t rdps_dataset_scan(struct rdps_dataset *ds, enum rdps_split split,
			  rdps_triple_fn fn, void *ctx, char *err, size_t errlen);

/* rdps_dataset_scan into a malloc'd array owned by the caller (*out). */
int rdps_dataset_load(struct rdps_dataset *ds, enum rdps_split split,
		      struct rdps_triples *out, char *err, size_t errlen);

/* ---------------------------------------------------------------------- */
/* Generators. Each writes the raw layout into out_dir atomically.         */

struct rdps_dataset_stats {
	uint64_t num_entities;
	uint64_t num_relations;
	uint64_t num_triples[RDPS_SPLIT_COUNT]; /* train, valid, test */
};

/*
 * WN18-style graph from WordNet 3.0 (Debian's wordnet-base). Entities are
 * synsets named "OFFSET.P": the 8-digit byte offset of the synset in its data
 * file and the file's part of speech (n noun, v verb, a adjective including
 * satellites, r adverb); offsets repeat across files, the suffix makes names
 * unique. Relations are WN18's 18 types, named as in WN18 ("_hypernym", ...).
 * Triples are de-duplicated, self-loops dropped, and kept when both ends are
 * in the cut:
 *  - RDPS_WORDNET_CUT_WN18 (default): WN18's own 40,943 synsets (shipped as one
 *    bit per WordNet 3.0 synset, see partition/gen_wn18_synsets.py), less any
 *    left without a triple; about 151k triples, WN18's relation mix. Needs
 *    WordNet 3.0 (-EINVAL naming the file otherwise).
 *  - RDPS_WORDNET_CUT_CORE: a dense core for any edition, found by peeling the
 *    entity of lowest degree (ties broken by a fixed hash of the name,
 *    independent of the seed) until target_entities remain, then keeping the
 *    largest connected component.
 * The split is a seeded shuffle; a triple
 * goes to valid/test only if its head, tail and relation keep at least one
 * train triple. The entity dict is ordered by (part of speech, offset).
 */
enum rdps_wordnet_cut {
	RDPS_WORDNET_CUT_WN18 = 0,
	RDPS_WORDNET_CUT_CORE,
};

struct rdps_wordnet_opts {
	const char *wordnet_dir;  /* dir with data.{noun,verb,adj,adv} */
	enum rdps_wordnet_cut cut;
	uint32_t target_entities; /* CUT_CORE: size of the core, 0 = keep all */
	uint64_t num_valid;       /* triples in valid.txt */
	uint64_t num_test;        /* triples in test.txt */
	uint64_t seed;            /* split seed */
	int force;                /* replace an existing out_dir */
};

/* Defaults: /usr/share/wordnet, the WN18 cut (core size 40943), 5000 valid,
 * 5000 test, seed 0, no force. */
void rdps_dataset_wordnet_defaults(struct rdps_wordnet_opts *o);

/* Writes the WordNet graph the comment above struct rdps_wordnet_opts
 * describes into out_dir (the raw layout,
 * through a temporary directory renamed into place). Fills st with its
 * counts. Returns 0, or -errno with a reason in err naming the file. */
int rdps_dataset_wordnet(const char *out_dir, const struct rdps_wordnet_opts *o,
			 struct rdps_dataset_stats *st, char *err, size_t errlen);

/*
 * Synthetic graph with community structure and learnable relation patterns,
 * streamed to disk in O(entities) memory (no per-triple state), so 10M
 * entities / 100M triples need well under 1 GiB.
 *
 * Internal entity x belongs to community x*C/N (contiguous blocks); the
 * entity dict id is an affine permutation of x, so communities are scattered
 * over ids (a partitioner has to find them). Triple i has head x = i mod N and
 * relation (base(x) + i/N) mod R, so (head, relation) pairs never repeat and
 * triples are unique (this needs T <= N*R). Relation r follows pattern r mod 4:
 *   0 map:       tail = rotation of head's index inside a target community
 *                (the own community, or for every other map relation a
 *                shifted one: cross-community edges);
 *   1 inverse:   exact inverse of map relation r-1;
 *   2 symmetric: tail = involution of the head's index in its community;
 *   3 hub:       tail = one of 16 hub entities of the head's community
 *                (many-to-one, like hypernym).
 * With probability noise the tail is a uniform random entity instead.
 * Triples 0..N-1 (every entity once as head, every relation once when N >= R)
 * always go to train; valid/test are an exact-size seeded selection among the
 * rest, so every valid/test entity and relation occurs in train.
 */
struct rdps_synth_opts {
	uint64_t num_entities;   /* N, >= 2, < 2^32 */
	uint32_t num_relations;  /* R, 1..N */
	uint64_t num_triples;    /* T in all splits, N + valid + test <= T <= N*R */
	uint32_t num_communities;/* C, 1..N */
	uint64_t num_valid;      /* triples in valid.txt */
	uint64_t num_test;       /* triples in test.txt */
	double noise;            /* probability of a random tail, 0..1 */
	uint64_t seed;
	int force;               /* replace an existing out_dir */
};

/* Defaults: 10000 entities, 16 relations, 100000 triples, 16 communities,
 * 1000 valid, 1000 test, noise 0.02, seed 0, no force. */
void rdps_dataset_synth_defaults(struct rdps_synth_opts *o);

/* Writes the synthetic graph the comment above struct rdps_synth_opts
 * describes into out_dir (the raw layout). Fills st with its counts. Returns 0, or -errno with a reason in
 * err (-EINVAL naming the option out of range). */
int rdps_dataset_synth(const char *out_dir, const struct rdps_synth_opts *o,
		       struct rdps_dataset_stats *st, char *err, size_t errlen);

/*
 * A graph shaped like a real one, scaled by F in (0, 1] ("rdps dataset synth
 * --like freebase86m --scale F"). Freebase86m is DGL-KE's Freebase: 86,054,151
 * entities, 14,824 relations, 304,727,650 train, 16,929,318 valid and
 * 16,929,308 test triples; each count becomes round(F x count) (partition/
 * synth_freebase.c says where the figures and the fitted exponents come from).
 *
 * The model, streamed in constant memory (a write buffer per thread; no
 * per-entity or per-triple state), every triple a pure function of the seed
 * and its index:
 *  - entities have popularity ranks 0..N-1 with weight (rank+1)^-beta, so
 *    degrees follow a power law P(d) ~ d^-alpha, alpha = 1 + 1/beta = 2.15;
 *    ranks map to entity ids through a seeded Feistel permutation of
 *    [0, N) (cycle walking), so hubs are spread over the ids;
 *  - relations have ranks with Zipf weight (rank+1)^-s, s = 0.7 (ids
 *    permuted the same way);
 *  - communities: rank r is in community r mod C (C = 32 by default), so
 *    each community has hubs and a tail of its own. A triple's community is
 *    drawn by the weight of its members, both ends by weight among them (or
 *    the second, with probability `cross`, among all entities; never a
 *    self-loop), its relation by Zipf, and a coin makes one end the head;
 *  - train triple i < N has entity rank i as an end and (i < R) relation
 *    rank i, so every entity and relation occurs in train, and so do those
 *    of valid and test;
 *  - a seeded hash of (head, relation, tail) puts each distinct triple in
 *    one class, train (3/4 of them), valid or test (1/8 each); a triple is
 *    drawn again (whole, in its community) until its class is its split's,
 *    so no valid or test triple is a train triple, nor valid a test one.
 *    Exact duplicates inside a split occur where hubs meet (5.8% of train
 *    lines at F = 0.001, 2.2% at F = 0.01, fewer with more relations).
 * Discrete power laws are sampled exactly by rejection-inversion (Hörmann &
 * Derflinger 1996). Output is byte-identical for a seed, whatever the
 * number of threads, on a given platform (it uses libm's exp and log).
 */
enum rdps_synth_shape {
	RDPS_SYNTH_FREEBASE86M = 0,
};

struct rdps_synth_like_opts {
	enum rdps_synth_shape like;
	double scale;           /* F in (0, 1] */
	uint64_t communities;   /* C, 0 = 32 */
	double cross;           /* probability that a triple's second end comes
				   from the whole graph, < 0 = the shape's
				   default (0.08) */
	uint64_t seed;
	unsigned threads;       /* generating threads, 0 = the online CPUs (at
				   most 16); the output does not depend on it */
	int force;              /* replace an existing out_dir */
};

/* What a set of options produces: the counts, the model's parameters and
 * the bytes the files will take (an estimate within a few percent). */
struct rdps_synth_like_plan {
	uint64_t num_entities;
	uint32_t num_relations;
	uint64_t num_triples[RDPS_SPLIT_COUNT];
	uint64_t num_communities;
	double degree_exponent;   /* alpha of P(degree = d) ~ d^-alpha */
	double relation_exponent; /* s of the relations' Zipf law */
	double cross;
	uint64_t bytes;           /* the five files together */
};

/* Defaults: freebase86m, scale 0.001, communities 0, cross -1 (default),
 * seed 0, threads 0, no force. */
void rdps_dataset_synth_like_defaults(struct rdps_synth_like_opts *o);

/* Checks the options (scale in (0, 1] and large enough for one relation,
 * cross in [0, 1], communities <= entities): 0 with *p filled, or -EINVAL
 * with err naming the option. */
int rdps_dataset_synth_like_plan(const struct rdps_synth_like_opts *o,
				 struct rdps_synth_like_plan *p, char *err, size_t errlen);

/* Writes the dataset into out_dir. Before any work it fails on bad options
 * (-EINVAL, also threads > 64), an existing out_dir without force
 * (-EEXIST), or a file system with less free space than the plan's bytes
 * and a 2% margin (-ENOSPC). Logs progress lines (elapsed time, ETA)
 * through rdps_info. */
int rdps_dataset_synth_like(const char *out_dir, const struct rdps_synth_like_opts *o,
			    struct rdps_dataset_stats *st, char *err, size_t errlen);

/*
 * Import of DGL-KE's layouts into the raw layout (normalized: "\r" removed,
 * fields reordered to head, relation, tail, dicts written in id order).
 *  raw: three files of names (DGL-KE's raw_udd_<order>); the dicts are
 *       built in order of first appearance in train, head before tail, as
 *       DGL-KE numbers them (valid/test entities must occur in train).
 *  udd: an entity and a relation dict ("id\tname" lines, DGL-KE's and its
 *       tools' layout) plus three files of numeric ids (udd_<order>).
 * order gives the column order of the input triples, DGL-KE's letters:
 * "hrt" (default), "htr", "rht", "rth", "thr" or "trh". delimiter separates
 * the triples' fields (DGL-KE's --delimiter, any string; a line is stripped
 * of white space at both ends first, as DGL-KE does, except tabs when the
 * delimiter is one); names must not contain a tab (the raw layout's
 * separator). With train_only only files[TRAIN] is read and valid.txt and
 * test.txt are written empty (DGL-KE's data_files of one train file).
 */
enum rdps_import_format {
	RDPS_IMPORT_RAW = 0,
	RDPS_IMPORT_UDD = 1,
};

struct rdps_import_opts {
	enum rdps_import_format format;
	const char *in_dir;                  /* input directory */
	const char *files[RDPS_SPLIT_COUNT]; /* names in in_dir; NULL = default:
						 "train.txt" (or "train.tsv" if
						 only that exists), ... */
	const char *order;                   /* see above; NULL = "hrt" */
	const char *delimiter;               /* NULL = tab */
	const char *entity_file;             /* udd: NULL = "entities.dict" */
	const char *relation_file;           /* udd: NULL = "relations.dict" */
	int train_only;                      /* no valid and test files */
	int force;                           /* replace an existing out_dir */
};

/* Imports the DGL-KE layout the comment above enum rdps_import_format
 * describes into out_dir (the raw layout). Fills st with its counts. Returns 0, or -errno with a reason in
 * err naming the file and line. */
int rdps_dataset_import(const char *out_dir, const struct rdps_import_opts *o,
			struct rdps_dataset_stats *st, char *err, size_t errlen);

/* ---------------------------------------------------------------------- */
/* Node-classification graphs (GNN training, DGL style).                   */

/*
 * WordNet 3.0 as a node-classification task ("rdps dataset wordnet-nodes"):
 * every synset of data.{noun,verb,adj,adv} a node (ids in file order: nouns,
 * verbs, adjectives with their satellites, adverbs, each by offset), every
 * pointer between two different synsets a typed edge src -> dst (src the
 * synset whose line holds it; lexical pointers between word senses become
 * edges of their synsets; no reverse edges are added, WordNet stores most
 * inverses itself; (src, dst, type) is unique), the lexicographer file
 * number (0..44, lexnames(5WN)) the label, a hashed bag of words of the
 * gloss the features, and a seeded 80/10/10 split of the nodes. It writes
 * into out_dir (temporary directory + rename): graph.json, edges.npy (int64
 * E x 2), etypes.npy (int64 E), features.npy (float32 N x feat_dim),
 * labels.npy (int64 N), train_mask.npy, val_mask.npy, test_mask.npy (uint8
 * N), nodes.tsv and etypes.tsv. Features: the gloss (the text after "| ",
 * examples included) cut into maximal runs of ASCII letters and digits,
 * lower-cased; token t adds 1 to bucket XXH3_64bits(t, len) mod feat_dim;
 * the counts are divided by their L2 norm (computed in double, stored as
 * float32; a gloss without a token gives a zero row). Split: the node ids
 * shuffled by Fisher-Yates driven by splitmix64 from the seed; the first
 * floor(0.8 N) are train, the next floor(0.1 N) val, the rest test. The
 * files are byte-identical for a seed and feat_dim.
 */
struct rdps_wordnet_nodes_opts {
	const char *wordnet_dir;  /* dir with data.{noun,verb,adj,adv} */
	uint32_t feat_dim;        /* feature buckets, 1..RDPS_WORDNET_NODES_MAX_FEAT_DIM */
	uint64_t seed;            /* split seed */
	int force;                /* replace an existing out_dir */
};

#define RDPS_WORDNET_NODES_MAX_FEAT_DIM 65536

struct rdps_graph_stats {
	uint64_t num_nodes;
	uint64_t num_edges;
	uint32_t num_classes;
	uint32_t num_etypes;      /* edge types that occur */
	uint32_t feat_dim;
	uint64_t num_split[RDPS_SPLIT_COUNT]; /* train, val, test nodes */
};

/* Defaults: /usr/share/wordnet, feat_dim 128, seed 0, no force. */
void rdps_dataset_wordnet_nodes_defaults(struct rdps_wordnet_nodes_opts *o);

/* Fails before any work on a bad feat_dim (-EINVAL), a missing data file
 * (-ENOENT, naming it and the wordnet-base package) or an existing out_dir
 * without force (-EEXIST); logs progress lines through rdps_info. */
int rdps_dataset_wordnet_nodes(const char *out_dir, const struct rdps_wordnet_nodes_opts *o,
			       struct rdps_graph_stats *st, char *err, size_t errlen);

/*
 * WordNet 3.0 as a heterogeneous graph shaped like ogbn-mag ("rdps dataset
 * wordnet-hetero"): node type "synset" with rdps_dataset_wordnet_nodes'
 * nodes, features ("feat"), labels ("label": the lexicographer file) and
 * split masks, node for node (same feat_dim and seed); node type "lemma",
 * featureless (a model gives it learnable embeddings): the synsets' words,
 * lower-cased, without data.adj's (a)/(p)/(ip) markers; edge types, all in
 * both directions: the synset pointers grouped into hypernym/hyponym,
 * holonym/meronym, domain/domain_member, related/rev_related (each pair the
 * other's reverse, every edge's reverse present), antonym, derivation and
 * similar (holding both directions), and lemma_of (lemma -> synset) with
 * its reverse has_lemma; (src, dst) unique per type. Writes out_dir
 * (temporary directory + rename) in the typed graph dataset layout that
 * rdps partition reads (rdps/partition.h): graph.json, synset-*.npy,
 * edges-TYPE.npy (int64 E x 2), synsets.tsv, lemmas.tsv.
 */
struct rdps_wordnet_hetero_opts {
	const char *wordnet_dir;  /* dir with data.{noun,verb,adj,adv} */
	uint32_t feat_dim;        /* synset feature buckets */
	uint64_t seed;            /* split seed */
	int force;                /* replace an existing out_dir */
};

struct rdps_wordnet_hetero_stats {
	uint64_t num_synsets, num_lemmas, num_senses, num_edges;
	uint32_t num_etypes, num_classes;
	uint64_t num_split[RDPS_SPLIT_COUNT];
};

/* Defaults: /usr/share/wordnet, feat_dim 128, seed 0, no force. */
void rdps_dataset_wordnet_hetero_defaults(struct rdps_wordnet_hetero_opts *o);
int rdps_dataset_wordnet_hetero(const char *out_dir, const struct rdps_wordnet_hetero_opts *o,
				struct rdps_wordnet_hetero_stats *st, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_DATASET_H */
