/* SPDX-License-Identifier: MIT */
/*
 * SimplE, as DGL-KE's SimplEScore: an entity row is two halves (h_i, h_j),
 * a relation row the relation and its inverse (r, r_inv), each half n/2
 * floats (n = hidden_dim, or 2 hidden_dim with -de -dr; even). The score
 *
 *   clamp(1/2 sum_k (h_i r t_j + t_i r_inv h_j)_k, -20, 20)
 *
 * has no gradient where the clamp bites (torch's clamp). Query form, DOT
 * with the clamp: tails are scored by q = (r_inv h_j, h_i r) / 2, heads by
 * q = (r t_j, r_inv t_i) / 2 (halving is exact in floating point).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "model_kernels.h"

static int simple_dims(const struct rdps_model_params *p, uint64_t *ed, uint64_t *rd,
		       uint64_t *rv)
{
	int ret = rdps_kge_dims_same(p, ed, rd, rv);

	if (ret)
		return ret;
	return *ed % 2 ? -EINVAL : 0; /* two halves */
}

static double simple_score(const struct rdps_model *m, const float *h, const float *r,
			   const float *t)
{
	uint32_t K = m->ent_dim / 2;
	double s = 0;

	for (uint32_t k = 0; k < K; k++)
		s += (double)h[k] * r[k] * t[K + k] + (double)t[k] * r[K + k] * h[K + k];
	s *= 0.5;
	return s < -20 ? -20 : s > 20 ? 20 : s;
}

static void simple_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			   uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
	need->dist = (size_t)C * N; /* raw negative scores */
}

RDPS_AI void simple_query(uint32_t n, int head_side, const float *restrict x,
			  const float *restrict r, float *restrict q)
{
	uint32_t K = n / 2;

	if (head_side) {
		/* q pairs with (h_i, h_j): (r t_j, r_inv t_i) / 2 */
		for (uint32_t k = 0; k < K; k++) {
			q[k] = 0.5f * x[K + k] * r[k];
			q[K + k] = 0.5f * x[k] * r[K + k];
		}
	} else {
		/* q pairs with (t_i, t_j): (r_inv h_j, h_i r) / 2 */
		for (uint32_t k = 0; k < K; k++) {
			q[k] = 0.5f * x[K + k] * r[K + k];
			q[K + k] = 0.5f * x[k] * r[k];
		}
	}
}

/* Adds dL/dx and dL/dr given gq = dL/dq. */
RDPS_AI void simple_query_backward(uint32_t n, int head_side, const float *restrict x,
				   const float *restrict r, const float *restrict gq,
				   float *restrict gx, float *restrict gr)
{
	uint32_t K = n / 2;

	if (head_side) {
		for (uint32_t k = 0; k < K; k++) {
			float g0 = 0.5f * gq[k], g1 = 0.5f * gq[K + k];
			gx[K + k] += g0 * r[k];
			gr[k] += g0 * x[K + k];
			gx[k] += g1 * r[K + k];
			gr[K + k] += g1 * x[k];
		}
	} else {
		for (uint32_t k = 0; k < K; k++) {
			float g0 = 0.5f * gq[k], g1 = 0.5f * gq[K + k];
			gx[K + k] += g0 * r[K + k];
			gr[K + k] += g0 * x[K + k];
			gx[k] += g1 * r[k];
			gr[k] += g1 * x[k];
		}
	}
}

RDPS_KGE_CLONES
static void simple_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	kge_query_step(FORM_DOT, true, simple_query, simple_query_backward, A, pos_sum, neg_sum);
}

static void simple_eval_query(const struct rdps_model *m, int head_side, const float *x,
			      const float *r, float *q, float *tmp)
{
	simple_query(m->ent_dim, head_side, x, r, q);
}

RDPS_KGE_CLONES
static void simple_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_DOT, true, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_simple_ops = {
	.kind = RDPS_MODEL_SIMPLE,
	.name = "SimplE",
	.dims = simple_dims,
	.score = simple_score,
	.scratch = simple_scratch,
	.step = simple_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = simple_eval_query,
	.score_tile = simple_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
