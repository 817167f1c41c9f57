/* SPDX-License-Identifier: MIT */
/*
 * rdps trainer: the compute kernels of knowledge-graph-embedding training,
 * independent of networking.
 *
 *  - KGE models (TransE_l1, TransE_l2, DistMult, ComplEx, RotatE, RESCAL,
 *    TransR, SimplE) with DGL-KE's score functions, log-sigmoid loss,
 *    self-adversarial negative weighting (-adv), Lp regularization and
 *    chunked negative sampling; one call computes the loss of a batch and the gradient of
 *    every row it uses.
 *  - Filtered ranking evaluation (MRR, MR, Hits@1/3/10) that consumes the
 *    candidate entities in chunks and whose partial state reduces across
 *    processes.
 *  - NumPy .npy (v1.0, float32, C order) writer and reader.
 *
 * Rows are dense float32 arrays: row i of a table of width w starts at
 * rows + i * w. Tables are addressed by row index; the caller maps its own
 * entity/relation ids to rows (e.g. the deduplicated rows of a pull).
 *
 * Thread rules: a struct rdps_model is immutable after creation and may be
 * shared by any number of threads; rdps_model_step() is a pure function of
 * its inputs (each thread brings its own scratch and gradient buffers).
 * An rdps_eval is used by one thread at a time (it runs its own workers).
 */
#ifndef RDPS_TRAINER_H
#define RDPS_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

enum rdps_model_kind {
	RDPS_MODEL_TRANSE_L1, /* gamma - ||h + r - t||_1 */
	RDPS_MODEL_TRANSE_L2, /* gamma - ||h + r - t||_2 ("TransE" is an alias) */
	RDPS_MODEL_DISTMULT,  /* sum(h * r * t) */
	RDPS_MODEL_COMPLEX,   /* Re(<h, r, conj(t)>) */
	RDPS_MODEL_ROTATE,    /* gamma - sum_k |h_k * e^{i phase_k} - t_k| */
	RDPS_MODEL_RESCAL,    /* h^T M_r t */
	RDPS_MODEL_TRANSR,    /* gamma - ||h P_r + r - t P_r||_1 */
	RDPS_MODEL_SIMPLE,    /* clamp((<h_i, r, t_j> + <t_i, r_inv, h_j>) / 2, +-20) */
};

/*
 * How hidden_dim (D) and DGL-KE's -de/--double_ent, -dr/--double_rel map to
 * row widths (entity_dim / relation_dim), as DGL-KE lays out its tables (so
 * saved .npy files load in DGL-KE tools). With -de an entity vector is 2D
 * wide, with -dr a relation vector; E and R below are those widths.
 *
 *   TransE_l1, TransE_l2, DistMult: entity E, relation R; E == R (-de and
 *             -dr together or not at all: DGL-KE's h + r - t and h * r * t
 *             need equal widths).
 *   ComplEx:  entity E, relation R, E == R, even. A row is E/2 real parts
 *             followed by E/2 imaginary parts: D/2 + D/2 by default, D + D
 *             with -de -dr (then D may be odd).
 *   RotatE:   entity 2D (D real parts then D imaginary parts), relation D
 *             phases. DGL-KE requires -de for RotatE; rdps implies it, so
 *             RotatE is accepted with and without -de (same widths). -dr is
 *             refused (D phases rotate D complex components). The angle of
 *             component k is r_k / (emb_init / pi), emb_init = (gamma + 2) / D.
 *   RESCAL:   entity E, relation E*E (E == R): a row-major E x E matrix M
 *             with score = sum_a h_a sum_c M[a][c] t_c.
 *   TransR:   entity E, relation R + E*R: the relation vector r (R floats)
 *             followed by the projection P_r, a row-major E x R matrix
 *             (DGL-KE's projection_emb row reshaped to (entity_dim,
 *             relation_dim)): h P_r is R wide. E and R are independent.
 *             The relation row holds both so that the parameter server
 *             keeps two tables; rdps_model_relation_parts() tells how DGL-KE
 *             saves and initialises them apart.
 *   SimplE:   entity E = (h_i, h_j), relation R = (r, r_inv), halves of E/2;
 *             E == R, even. Score clamped to [-20, 20] as DGL-KE's (no
 *             gradient where the clamp bites).
 */
struct rdps_model_params {
	const char *name;    /* DGL-KE model name, see rdps_model_names() */
	uint32_t hidden_dim; /* --hidden_dim (D above) */
	float gamma;         /* --gamma: margin of TransE / RotatE / TransR */
	bool adv;            /* -adv: self-adversarial negative weighting */
	float adv_temp;      /* --adversarial_temperature (-a) */
	float reg_coef;      /* --regularization_coef (-rc); 0 disables */
	float reg_norm;      /* --regularization_norm (-rn), the p of sum|x|^p */
	bool double_ent;     /* -de, --double_ent: entity vectors 2 hidden_dim */
	bool double_rel;     /* -dr, --double_rel: relation vectors 2 hidden_dim */
};

/* Fills DGL-KE's defaults: TransE_l2, hidden_dim 400, gamma 12, no -adv,
 * adversarial_temperature 1, regularization_coef 2e-6, norm 3, no -de, no
 * -dr. */
void rdps_model_params_init(struct rdps_model_params *p);

/* Comma-separated list of the accepted model names, for error messages. */
const char *rdps_model_names(void);

/* Maps a model name to its kind: 0, or -EINVAL for an unknown name. */
int rdps_model_lookup(const char *name, enum rdps_model_kind *kind);

/* Row widths of the model p describes (name, hidden_dim, double_ent,
 * double_rel; the rest is not looked at), without creating it (to size a
 * table before training). 0, or -EINVAL (unknown name, zero hidden_dim,
 * odd halves for ComplEx / SimplE, -de without -dr or the reverse where
 * the model needs equal widths, -dr for RotatE, widths beyond 2^31). */
int rdps_model_params_dims(const struct rdps_model_params *p, uint32_t *entity_dim,
			   uint32_t *relation_dim);

/* rdps_model_params_dims() for a name and hidden_dim without -de / -dr. */
int rdps_model_dims(const char *name, uint32_t hidden_dim,
		    uint32_t *entity_dim, uint32_t *relation_dim);

struct rdps_model;

/* Validates p and creates an immutable model. Returns 0 and *out, or
 * -EINVAL (unknown name: rdps_model_names() lists the known ones; bad
 * dimension; gamma/temperature/coefficients not finite; reg_norm <= 0 while
 * reg_coef > 0) or -ENOMEM. The name string is copied. */
int rdps_model_create(struct rdps_model **out,
		      const struct rdps_model_params *p);

/* Frees the model; NULL is fine. */
void rdps_model_destroy(struct rdps_model *m);

/* What m was made with: its family, canonical name, parameters, and the
 * floats of its entity and relation rows. */
enum rdps_model_kind rdps_model_kind(const struct rdps_model *m);
const char *rdps_model_name(const struct rdps_model *m); /* canonical */
const struct rdps_model_params *rdps_model_params(const struct rdps_model *m);
uint32_t rdps_model_entity_dim(const struct rdps_model *m);
uint32_t rdps_model_relation_dim(const struct rdps_model *m);

/* DGL-KE's initialisation range: rows are drawn uniform(-x, x) with
 * x = (gamma + 2) / hidden_dim, for entities and relation vectors alike
 * (TransR's projection: see rdps_model_relation_parts()). */
float rdps_model_emb_init(const struct rdps_model *m);

/*
 * A relation row as DGL-KE keeps it: one part per array it saves. Every
 * model has one part, the whole row, saved as
 * <dataset>_<model>_relation.npy (num_relations x relation_dim). TransR has
 * two, which tile the row:
 *
 *   "_relation"  offset 0, width R:     <dataset>_TransR_relation.npy,
 *                                       num_relations x R, init emb_init
 *   "projection" offset R, width E*R:   <dataset>_TransRprojection.npy,
 *                                       num_relations x (E*R) (DGL-KE's
 *                                       name: no underscore), each row the
 *                                       row-major E x R matrix, init
 *                                       uniform(-1, 1), not regularized
 *
 * Saving: for each part, write rows[r * relation_dim + offset .. + width)
 * for every relation r into <save_path>/<dataset>_<model><suffix>.npy.
 * DGL-KE also keeps a separate Adagrad state per row of each array; a
 * store with one row-wise state per relation row mixes the two parts.
 */
struct rdps_model_rel_part {
	const char *suffix; /* file name: <dataset>_<model name><suffix>.npy */
	uint32_t offset;    /* first float of the part in a relation row */
	uint32_t width;     /* floats per relation (columns of the file) */
	float init_range;   /* DGL-KE draws the part uniform(-x, x) */
	bool regularized;   /* counted by -rc (TransR's projection is not) */
};

#define RDPS_MODEL_REL_PARTS_MAX 2

/* Fills parts[0 .. n) in row order and returns n (1, or 2 for TransR);
 * parts has room for RDPS_MODEL_REL_PARTS_MAX entries. */
unsigned rdps_model_relation_parts(const struct rdps_model *m,
				   struct rdps_model_rel_part *parts);

/* Score of one triple by the direct formula of DGL-KE's edge_func
 * (reference implementation in double precision, for tests and tools). */
double rdps_model_score(const struct rdps_model *m, const float *h,
			const float *r, const float *t);

/*
 * One training batch with chunked negative sampling (DGL-KE's
 * neg_chunk_size): positive i belongs to chunk i / chunk; every positive of
 * a chunk is scored against the same `neg` negative entities, which replace
 * its head (neg_head) or its tail. The last chunk may be shorter.
 */
struct rdps_batch {
	uint32_t size;            /* B: number of positive triples, >= 1 */
	uint32_t chunk;           /* positives sharing one set of negatives */
	uint32_t neg;             /* N: negatives per chunk, >= 1 */
	int neg_head;             /* 1: corrupt heads; 0: corrupt tails */
	const uint32_t *head;     /* B entity row indices */
	const uint32_t *rel;      /* B relation row indices */
	const uint32_t *tail;     /* B entity row indices */
	const uint32_t *neg_ent;  /* ceil(B / chunk) * N entity row indices */
	uint32_t n_ent_rows;      /* rows in the entity arrays (bounds, reg) */
	uint32_t n_rel_rows;      /* rows in the relation arrays */
};

/* Loss of a batch, as DGL-KE's forward() defines it:
 *   pos_loss = mean_i -logsigmoid(pos_score_i)
 *   neg_loss = mean_i sum_j w_ij * -logsigmoid(-neg_score_ij), with
 *              w_ij = 1/N, or softmax_j(neg_score_ij * adv_temp) under -adv
 *              (the weights are constants for the gradient, as DGL-KE's
 *              .detach())
 *   loss     = (pos_loss + neg_loss) / 2 + reg
 *   reg      = reg_coef * sum |x|^p over the rows the batch uses, counted
 *              as DGL-KE's trace counts them: each distinct positive entity
 *              row once, each negative slot once (a row sampled twice counts
 *              twice; a positive entity also drawn as negative counts for
 *              both), each relation once per triple using it (its vector:
 *              the regularized parts of rdps_model_relation_parts()).
 * DGL-KE's printed "loss" is loss - reg. */
struct rdps_step_result {
	double loss;     /* total, the function the gradients belong to */
	double pos_loss; /* see above */
	double neg_loss;
	double reg;      /* 0 when reg_coef == 0 */
};

/* Bytes of scratch rdps_model_step() needs for batches whose chunk, neg,
 * n_ent_rows and n_rel_rows do not exceed these (the size grows with each,
 * so size once for the largest shape). Includes 64 bytes of alignment
 * slack: any pointer may be passed. */
size_t rdps_model_scratch_size(const struct rdps_model *m, uint32_t chunk,
			       uint32_t neg, uint32_t n_ent_rows,
			       uint32_t n_rel_rows);

/*
 * Computes the loss of batch b and ADDS its gradient to ent_grad / rel_grad
 * (same shapes as ent_rows / rel_rows: n_ent_rows x entity_dim and
 * n_rel_rows x relation_dim; the caller zeroes them, or not, to accumulate
 * several batches). Gradient buffers must not overlap the row arrays or the
 * scratch. Allocates nothing, takes no locks, logs nothing.
 *
 * Returns 0, -EINVAL (bad shape, an index out of its table, NULL pointer)
 * or -ENOBUFS (scratch_size smaller than rdps_model_scratch_size()). On
 * error nothing has been written to the gradients. res may be NULL.
 */
int rdps_model_step(const struct rdps_model *m, const struct rdps_batch *b,
		    const float *ent_rows, const float *rel_rows,
		    float *ent_grad, float *rel_grad, void *scratch,
		    size_t scratch_size, struct rdps_step_result *res);

/* ------------------------------------------------------------------------ */
/* Triple set (the evaluation filter)                                        */
/* ------------------------------------------------------------------------ */

struct rdps_triple {
	uint32_t h; /* head entity id */
	uint32_t r; /* relation id */
	uint32_t t; /* tail entity id */
};

struct rdps_triple_set;

/* Open-addressing hash set of (h, r, t). expected sizes the first table
 * (it grows). 0 or -ENOMEM. */
int rdps_triple_set_create(struct rdps_triple_set **out, size_t expected);
void rdps_triple_set_destroy(struct rdps_triple_set *s);

/* Inserts n triples; duplicates are ignored. Returns the number newly
 * inserted (clamped to INT32_MAX in the return value) or -ENOMEM. */
long rdps_triple_set_add(struct rdps_triple_set *s, const struct rdps_triple *t,
			 size_t n);
bool rdps_triple_set_contains(const struct rdps_triple_set *s, uint32_t h,
			      uint32_t r, uint32_t t);
size_t rdps_triple_set_count(const struct rdps_triple_set *s);

/* The distinct triples in insertion order; valid until the next add. */
const struct rdps_triple *rdps_triple_set_items(const struct rdps_triple_set *s);

/* ------------------------------------------------------------------------ */
/* Filtered ranking evaluation                                               */
/* ------------------------------------------------------------------------ */

/*
 * For a test triple (h, r, t) the tail query ranks t among all entities c
 * by score(h, r, c) and the head query ranks h by score(c, r, t). Candidates
 * c with (h, r, c) (resp. (c, r, t)) in the filter set are skipped, as is
 * the true entity itself (also without a filter: "raw" ranking). With
 * gt = #candidates scoring strictly higher and eq = #candidates scoring
 * exactly equal to the true entity:
 *
 *   PESSIMISTIC: rank = 1 + gt + eq   (DGL-KE: sum(neg >= pos) + 1)
 *   OPTIMISTIC:  rank = 1 + gt
 *   MEAN:        rank = 1 + gt + eq / 2
 *
 * Scores are computed in the query form (TransE: gamma - ||(h + r) - c||,
 * head side gamma - ||c - (t - r)||, ...), the same arithmetic for the true
 * entity and every candidate, so equal rows give equal scores.
 */
enum rdps_eval_ties {
	RDPS_EVAL_TIES_PESSIMISTIC = 0,
	RDPS_EVAL_TIES_OPTIMISTIC = 1,
	RDPS_EVAL_TIES_MEAN = 2,
};

enum rdps_eval_side {
	RDPS_EVAL_TAIL = 1, /* rank t for (h, r, ?) */
	RDPS_EVAL_HEAD = 2, /* rank h for (?, r, t) */
	RDPS_EVAL_BOTH = 3,
};

struct rdps_eval_params {
	const struct rdps_model *model;      /* scores; must outlive the eval */
	const struct rdps_triple *test;      /* triples to rank (copied) */
	size_t n_test;
	const struct rdps_triple_set *filter; /* NULL: raw ranking; read at
					       * create only */
	uint32_t n_entities;   /* candidate ids are < n_entities */
	unsigned num_threads;  /* workers for add_candidates; 0 means 1 */
	enum rdps_eval_ties ties;
	unsigned sides;        /* enum rdps_eval_side mask; 0 means BOTH */
};

struct rdps_eval;

/* Copies the test triples and builds, per query, the sorted list of
 * filtered candidate ids. 0, -EINVAL (bad params, test ids out of range) or
 * -ENOMEM. */
int rdps_eval_create(struct rdps_eval **out, const struct rdps_eval_params *p);
void rdps_eval_destroy(struct rdps_eval *ev); /* NULL is fine */

/* Number of queries: n_test per side. Query q < n_test is the tail query of
 * test q when RDPS_EVAL_TAIL is set; head queries follow (or come alone). */
size_t rdps_eval_num_queries(const struct rdps_eval *ev);

/* Gives the embeddings of the test triples: head_rows, tail_rows (n_test x
 * entity_dim) and rel_rows (n_test x relation_dim), row i for test i. Builds
 * the query vectors and the true entities' scores; resets the counts. Must
 * be called before rdps_eval_add_candidates(). 0 or -EINVAL. */
int rdps_eval_set_rows(struct rdps_eval *ev, const float *head_rows,
		       const float *rel_rows, const float *tail_rows);

/* Ranks every query against candidates first_id .. first_id + count - 1,
 * whose rows (count x entity_dim) are given; accumulates gt/eq counts. Any
 * chunking of the entity range, in any order, gives the same counts as one
 * call over all entities, as long as each id is given once. Runs
 * num_threads workers (threads are started per call: pass large chunks;
 * if a thread cannot start, its share runs in the calling thread). Rows
 * must stay valid during the call only. 0, or -EINVAL (range beyond
 * n_entities, rows not set). */
int rdps_eval_add_candidates(struct rdps_eval *ev, uint32_t first_id,
			     const float *rows, uint32_t count);

/* Ranks queries q0 .. q0 + nq - 1 against the candidates ids[0..count) only
 * (ascending, distinct, each < n_entities) whose rows (count x entity_dim)
 * are given: DGL-KE's sampled evaluation (--neg_sample_size_eval), where a
 * batch of queries shares a drawn set of candidates. The filter and the
 * true entity skip candidates as in add_candidates; counts accumulate. Runs
 * in the calling thread. 0, or -EINVAL (ids not ascending or out of range,
 * the query range beyond rdps_eval_num_queries(), rows not set). */
int rdps_eval_add_sampled(struct rdps_eval *ev, size_t q0, size_t nq, const uint32_t *ids,
			  const float *rows, uint32_t count);

/* Per-query partial state, for reduction across processes that rank
 * disjoint candidate ranges of the same tests: copy out (arrays of
 * rdps_eval_num_queries() entries), and add another process's counts. */
void rdps_eval_get_counts(const struct rdps_eval *ev, uint32_t *gt,
			  uint32_t *eq);
int rdps_eval_add_counts(struct rdps_eval *ev, const uint32_t *gt,
			 const uint32_t *eq);

/* Reducible metric sums, for processes that rank disjoint test triples
 * against all entities: add them and convert once. */
struct rdps_eval_sums {
	double sum_rr;   /* sum of 1 / rank */
	double sum_rank; /* sum of rank */
	uint64_t hits1;  /* queries with rank <= 1 */
	uint64_t hits3;
	uint64_t hits10;
	uint64_t count;  /* queries */
};

struct rdps_eval_metrics {
	double mrr;
	double mr;
	double hits1;
	double hits3;
	double hits10;
	uint64_t count; /* queries averaged over */
};

/* Ranks from the current counts (call after all candidates were added). */
void rdps_eval_get_sums(const struct rdps_eval *ev, struct rdps_eval_sums *s);

/* The sums of rdps_eval_get_sums() broken down by relation: s[r], for every
 * r < num_relations, gets the sums of the queries whose test triple has
 * relation id r, restricted to the sides in the mask `sides` (enum
 * rdps_eval_side; 0 means both; a side the evaluator does not rank adds
 * nothing). Relations without queries get zero sums. The ranks are those of
 * get_sums (current counts, so after add_counts() too), hence over all
 * relations and sides the integer fields add up exactly to get_sums()' and
 * sum_rr / sum_rank up to rounding (order of summation). Like get_sums, these sums reduce across
 * processes that rank disjoint test triples: add them per relation.
 * Allocates nothing; one pass over the queries (ask once per side mask, not
 * once per relation). 0, or -EINVAL (NULL ev; NULL s with num_relations > 0;
 * bits beyond RDPS_EVAL_BOTH; a test relation id >= num_relations), in
 * which case s is untouched. */
int rdps_eval_get_relation_sums(const struct rdps_eval *ev, unsigned sides,
				uint32_t num_relations, struct rdps_eval_sums *s);
void rdps_eval_sums_add(struct rdps_eval_sums *dst,
			const struct rdps_eval_sums *src);
void rdps_eval_metrics_from_sums(const struct rdps_eval_sums *s,
				 struct rdps_eval_metrics *m);
/* get_sums + metrics_from_sums. */
void rdps_eval_finish(const struct rdps_eval *ev, struct rdps_eval_metrics *m);

/* Writes DGL-KE's result lines into buf:
 *   "<mode> average MRR : 0.5281...\n" then MR, HITS@1, HITS@3, HITS@10,
 * numbers as Python's repr prints them (shortest round-trip form). Returns
 * the length that the full text has (as snprintf; truncated if >= len). */
int rdps_eval_format(char *buf, size_t len, const char *mode,
		     const struct rdps_eval_metrics *m);

/* v as Python's repr prints it ("0.5", "2e-06", "inf"), as in those lines
 * and in DGL-KE's JSON files. Returns the length (as snprintf). */
int rdps_eval_format_number(char *buf, size_t len, double v);

/* ------------------------------------------------------------------------ */
/* NumPy .npy                                                                */
/* ------------------------------------------------------------------------ */

/* Header numpy 1.24 writes for a float32 C-order (rows, cols) array:
 * "\x93NUMPY" 1 0, little-endian u16 length, the dict
 * "{'descr': '<f4', 'fortran_order': False, 'shape': (R, C), }", numpy's
 * growth spaces, padding spaces and '\n' so data starts at a multiple of 64.
 * Returns the header length (<= 256), or -ENOSPC if len is too small. */
int rdps_npy_header_f32(char *buf, size_t len, uint64_t rows, uint64_t cols);

/* Writes rows x cols float32 (host order must be little-endian) to path
 * atomically: a temporary file in the same directory, fsync, rename, fsync
 * of the directory. 0 or -errno. */
int rdps_npy_write_f32(const char *path, const float *data, uint64_t rows,
		       uint64_t cols);

/* Reads a 2-D little-endian float32 C-order .npy (v1.0 or v2.0 header);
 * *data is malloc'd (free() it). 0, -EINVAL (not such an array) or -errno. */
int rdps_npy_read_f32(const char *path, float **data, uint64_t *rows,
		      uint64_t *cols);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_TRAINER_H */
