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

RDPS_KGE_CLONES
static void distmult_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, n = A->m->ent_dim, rd = A->m->rel_dim;
	int hs = b->neg_head != 0;

	for (uint32_t c = 0, i0 = 0; i0 < B; c++, i0 += chunk) {
		uint32_t C = B - i0 < chunk ? B - i0 : chunk;
		kge_chunk_rows(A, i0, C, b->neg_ent + (size_t)c * b->neg);
		for (uint32_t i = 0; i < C; i++) {
			uint32_t x = hs ? b->tail[i0 + i] : b->head[i0 + i];
			distmult_query(n, A->ent + (size_t)x * n,
				       A->rel + (size_t)b->rel[i0 + i] * rd, sc->Q + (size_t)i * n);
		}
		kge_chunk_pairs(FORM_DOT, false, A, C, n, pos_sum, neg_sum);
		/* through the queries: dL/dx = gq * r, dL/dr = gq * x */
		for (uint32_t i = 0; i < C; i++) {
			uint32_t x = hs ? b->tail[i0 + i] : b->head[i0 + i];
			const float *restrict xr = A->ent + (size_t)x * n;
			const float *restrict rr = A->rel + (size_t)b->rel[i0 + i] * rd;
			const float *restrict gq = sc->gqp[i];
			float *restrict gx = A->eg + (size_t)x * n;
			float *restrict gr = A->rg + (size_t)b->rel[i0 + i] * rd;
			for (uint32_t k = 0; k < n; k++) {
				gx[k] += gq[k] * rr[k];
				gr[k] += gq[k] * xr[k];
			}
		}
	}
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
