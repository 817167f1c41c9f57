/* SPDX-License-Identifier: MIT */
/*
 * Internal: the KGE model families behind one const ops table each, and the
 * state the shared step driver (models.c) hands to a family's step.
 *
 * models.c owns the names, the parameters, the scratch layout, the batch
 * checks and the regularization; a family file (model_<family>.c) owns its
 * score, its step (queries, pair scores, loss rows, gradients: the hot
 * loops) and its evaluation query form. The table is picked once, at
 * rdps_model_create(). Not installed, not part of the public API.
 */
#ifndef RDPS_TRAINER_MODEL_OPS_H
#define RDPS_TRAINER_MODEL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/trainer.h"

struct rdps_model_ops;

struct rdps_model {
	struct rdps_model_params p;        /* p.name points to name below */
	const struct rdps_model_ops *ops;  /* the family's table */
	uint32_t ent_dim;                  /* floats per entity row */
	uint32_t rel_dim;                  /* floats per relation row */
	uint32_t rvec_dim;                 /* the relation vector: the first rvec_dim
					    * floats of a relation row (TransR: R, its
					    * projection follows; others: rel_dim) */
	uint32_t qdim;                     /* floats of an evaluation query */
	float emb_init;                    /* (gamma + 2) / hidden_dim */
	float phase_scale;                 /* RotatE: pi / emb_init */
	char name[16];                     /* canonical name */
};

#define SCRATCH_ALIGN 64

/* The step's scratch, carved by models.c from what the family asks for
 * (struct kge_scratch_need); unused fields have no room. */
struct step_scratch {
	float *Q;           /* q_rows x q_width: query vectors */
	float *GQ;          /* q_rows x q_width: dL/dq */
	float *S;           /* chunk x N: scores, then dL/ds */
	float *DIST;        /* chunk x N: L2 distances (0 where clamped), SimplE
			     * raw scores */
	float *rowc;        /* chunk: L2 row coefficients */
	float *colc;        /* N: L2 column coefficients */
	float *qn;          /* chunk: |q|^2 */
	float *en;          /* N: |e|^2 */
	float *wbuf;        /* N: -adv weights of one row */
	float *pos;         /* chunk: positive scores, then dL/dp */
	float *cs;          /* n_rel_rows x 2 rel_dim (RotatE): cos, sin */
	float *Y;           /* 4 x N x K (RotatE): 2 / moduli */
	const float **qp;   /* chunk: query rows */
	float **gqp;        /* chunk: their gradient rows */
	const float **ep;   /* N: negative rows */
	float **gep;        /* N: negative gradient rows */
	const float **xp;   /* chunk: positive rows (true entity) */
	float **gxp;        /* chunk: their gradient rows */
	/* grouped products with a relation matrix (RESCAL, TransR): up to
	 * `groups` rows in relation order */
	const float **qx;   /* input rows of the products */
	float **gqx;        /* their gradient rows */
	float **qrow;       /* output rows (rows of Q) */
	float **gqrow;      /* their gradient rows (rows of GQ) */
	uint32_t *ord;      /* positive (from the first) of each row */
	uint32_t *rowof;    /* row of each positive */
	uint64_t *rkey;     /* sort keys */
	const float **mrow; /* mrows: rows of a relation matrix */
	float **gmrow;      /* mrows: rows of its gradient */
	uint32_t *ent_w;    /* n_ent_rows: regularization multiplicity */
	uint32_t *rel_w;    /* n_rel_rows */
};

/* What a family's step needs in the scratch, for chunks of at most C
 * positives, N negatives and n_rel relation rows. */
struct kge_scratch_need {
	size_t q_rows;  /* rows of Q and GQ */
	size_t q_width; /* floats per row of Q and GQ */
	size_t dist;    /* floats of DIST */
	size_t cs;      /* floats of cs */
	size_t Y;       /* floats of Y */
	size_t groups;  /* entries of qx .. rkey */
	size_t mrows;   /* entries of mrow, gmrow */
};

struct step_args {
	const struct rdps_model *m;
	const struct rdps_batch *b;
	const float *ent;  /* entity rows */
	const float *rel;  /* relation rows */
	float *eg;         /* entity gradient */
	float *rg;         /* relation gradient */
	struct step_scratch *sc;
};

struct rdps_model_ops {
	enum rdps_model_kind kind;
	const char *name; /* canonical DGL-KE name */

	/* Row widths for p->hidden_dim and p->double_ent / double_rel, as
	 * DGL-KE lays out its tables, and the relation vector's width (TransR:
	 * the part before the projection). -EINVAL when the family cannot
	 * take them (odd halves, -de without -dr where DGL-KE's shapes do not
	 * match). Widths are checked against 32 bits by the caller. */
	int (*dims)(const struct rdps_model_params *p, uint64_t *ent_dim,
		    uint64_t *rel_dim, uint64_t *rvec_dim);

	/* DGL-KE's edge_func in double (rdps_model_score). */
	double (*score)(const struct rdps_model *m, const float *h, const float *r,
			const float *t);

	/* Scratch of step() for chunks of at most C positives, N negatives. */
	void (*scratch)(const struct rdps_model *m, uint32_t C, uint32_t N,
			uint32_t n_rel_rows, struct kge_scratch_need *need);

	/* Every chunk of A->b: adds the chunks' -logsigmoid sums of positives
	 * and weighted negatives to *pos_sum / *neg_sum and their gradient to
	 * A->eg / A->rg. The batch is valid; the regularization is the
	 * driver's. */
	void (*step)(const struct step_args *A, double *pos_sum, double *neg_sum);

	/* Evaluation (kge_internal.h): the query form. */
	uint32_t (*query_dim)(const struct rdps_model *m);
	size_t (*query_tmp)(const struct rdps_model *m);
	void (*query)(const struct rdps_model *m, int head_side, const float *x,
		      const float *r, float *q, float *tmp);
	void (*score_tile)(const struct rdps_model *m, const float *q, uint32_t nq,
			   const float *c, uint32_t nc, float *out);
	/* Candidates in query space: out (count x qdim) from entity rows,
	 * given the relation row ctx (rdps_kge_cand_ctx_size). Families whose
	 * candidates are scored as they are copy them (qdim == ent_dim). */
	size_t (*cand_ctx_size)(const struct rdps_model *m);
	void (*cand_rows)(const struct rdps_model *m, const float *ctx,
			  const float *rows, uint32_t count, float *out);
};

extern const struct rdps_model_ops rdps_kge_transe_l1_ops;
extern const struct rdps_model_ops rdps_kge_transe_l2_ops;
extern const struct rdps_model_ops rdps_kge_distmult_ops;
extern const struct rdps_model_ops rdps_kge_complex_ops;
extern const struct rdps_model_ops rdps_kge_rotate_ops;
extern const struct rdps_model_ops rdps_kge_rescal_ops;
extern const struct rdps_model_ops rdps_kge_transr_ops;
extern const struct rdps_model_ops rdps_kge_simple_ops;

/* Defaults a family may point to (models.c). */
uint32_t rdps_kge_ent_query(const struct rdps_model *m); /* ent_dim */
size_t rdps_kge_no_tmp(const struct rdps_model *m);
size_t rdps_kge_no_ctx(const struct rdps_model *m);
void rdps_kge_copy_rows(const struct rdps_model *m, const float *ctx, const float *rows,
			uint32_t count, float *out);

/* Widths when entity and relation rows are one vector of the same size E
 * (hidden_dim, doubled by -de and -dr together); -EINVAL if only one of
 * the flags is given (DGL-KE's shapes would not match). */
int rdps_kge_dims_same(const struct rdps_model_params *p, uint64_t *ent_dim,
		       uint64_t *rel_dim, uint64_t *rvec_dim);

#endif /* RDPS_TRAINER_MODEL_OPS_H */
