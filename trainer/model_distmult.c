/* SPDX-License-Identifier: MIT */
/*
 * DistMult: score sum_k h_k r_k t_k. Query form: q = h * r (or t * r) and
 * the DOT pair form, q . e.
 */
#include <stddef.h>
#include <stdint.h>

#include "model_kernels.h"

static double distmult_score(const struct rdps_model *m, const float *h, const float *r,
			     const float *t)
{
	double s = 0;

	for (uint32_t k = 0; k < m->ent_dim; k++)
		s += (double)h[k] * r[k] * t[k];
	return s;
}

static void distmult_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			     uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
}

RDPS_AI void distmult_query(uint32_t n, const float *restrict x, const float *restrict r,
			    float *restrict q)
{
	for (uint32_t k = 0; k < n; k++)
		q[k] = x[k] * r[k];
}

/* Adds dL/dx = gq * r and dL/dr = gq * x given gq = dL/dq. */
RDPS_AI void distmult_query_backward(uint32_t n, int head_side, const float *restrict x,
				     const float *restrict r, const float *restrict gq,
				     float *restrict gx, float *restrict gr)
{
	for (uint32_t k = 0; k < n; k++) {
		gx[k] += gq[k] * r[k];
		gr[k] += gq[k] * x[k];
	}
}

/* Symmetric: the same query on either side. */
RDPS_AI void distmult_side_query(uint32_t n, int head_side, const float *restrict x,
				 const float *restrict r, float *restrict q)
{
	distmult_query(n, x, r, q);
}

RDPS_KGE_CLONES
static void distmult_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	kge_query_step(FORM_DOT, false, distmult_side_query, distmult_query_backward, A, pos_sum,
		       neg_sum);
}

static void distmult_eval_query(const struct rdps_model *m, int head_side, const float *x,
				const float *r, float *q, float *tmp)
{
	distmult_query(m->ent_dim, x, r, q);
}

RDPS_KGE_CLONES
static void distmult_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			  const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_DOT, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_distmult_ops = {
	.kind = RDPS_MODEL_DISTMULT,
	.name = "DistMult",
	.dims = rdps_kge_dims_same,
	.score = distmult_score,
	.scratch = distmult_scratch,
	.step = distmult_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = distmult_eval_query,
	.score_tile = distmult_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
