/* SPDX-License-Identifier: MIT */
/*
 * TransE (DGL-KE's TransE_l1 and TransE_l2): score gamma - ||h + r - t||_p.
 * Query form: q = h + r scores tails as gamma - ||q - t||, q = t - r scores
 * heads as gamma - ||q - h|| (the L1 and L2 pair forms).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "model_kernels.h"

static double transe_score(const struct rdps_model *m, const float *h, const float *r,
			   const float *t, bool l1)
{
	uint32_t D = m->ent_dim;
	double s = 0;

	for (uint32_t k = 0; k < D; k++) {
		double d = (double)h[k] + r[k] - t[k];
		s += l1 ? fabs(d) : d * d;
	}
	return m->p.gamma - (l1 ? s : sqrt(s));
}

static double transe_l1_score(const struct rdps_model *m, const float *h, const float *r,
			      const float *t)
{
	return transe_score(m, h, r, t, true);
}

static double transe_l2_score(const struct rdps_model *m, const float *h, const float *r,
			      const float *t)
{
	return transe_score(m, h, r, t, false);
}

static void transe_l1_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			      uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
}

static void transe_l2_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			      uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
	need->dist = (size_t)C * N; /* distances, 0 where clamped */
}

/* q from x (head on the tail side, tail on the head side) and r. */
RDPS_AI void transe_query(uint32_t n, int head_side, const float *restrict x,
			  const float *restrict r, float *restrict q)
{
	if (head_side)
		for (uint32_t k = 0; k < n; k++)
			q[k] = x[k] - r[k];
	else
		for (uint32_t k = 0; k < n; k++)
			q[k] = x[k] + r[k];
}

/* Adds dL/dx and dL/dr given gq = dL/dq (q = x + r, or x - r on the head
 * side: neither row's value enters). */
RDPS_AI void transe_query_backward(uint32_t n, int head_side, const float *restrict x,
				   const float *restrict r, const float *restrict gq,
				   float *restrict gx, float *restrict gr)
{
	for (uint32_t k = 0; k < n; k++)
		gx[k] += gq[k];
	if (head_side)
		for (uint32_t k = 0; k < n; k++)
			gr[k] -= gq[k];
	else
		for (uint32_t k = 0; k < n; k++)
			gr[k] += gq[k];
}

RDPS_KGE_CLONES
static void transe_l1_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	kge_query_step(FORM_L1, false, transe_query, transe_query_backward, A, pos_sum, neg_sum);
}

RDPS_KGE_CLONES
static void transe_l2_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	kge_query_step(FORM_L2, false, transe_query, transe_query_backward, A, pos_sum, neg_sum);
}

static void transe_eval_query(const struct rdps_model *m, int head_side, const float *x,
			      const float *r, float *q, float *tmp)
{
	transe_query(m->ent_dim, head_side, x, r, q);
}

RDPS_KGE_CLONES
static void transe_l1_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			   const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_L1, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

RDPS_KGE_CLONES
static void transe_l2_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			   const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_L2, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_transe_l1_ops = {
	.kind = RDPS_MODEL_TRANSE_L1,
	.name = "TransE_l1",
	.dims = rdps_kge_dims_same,
	.score = transe_l1_score,
	.scratch = transe_l1_scratch,
	.step = transe_l1_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = transe_eval_query,
	.score_tile = transe_l1_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};

const struct rdps_model_ops rdps_kge_transe_l2_ops = {
	.kind = RDPS_MODEL_TRANSE_L2,
	.name = "TransE_l2",
	.dims = rdps_kge_dims_same,
	.score = transe_l2_score,
	.scratch = transe_l2_scratch,
	.step = transe_l2_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = transe_eval_query,
	.score_tile = transe_l2_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
