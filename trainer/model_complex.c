/* SPDX-License-Identifier: MIT */
/*
 * ComplEx: score Re(<h, r, conj(t)>). A row of width n is n/2 real parts
 * followed by n/2 imaginary parts (DGL-KE's th.chunk(emb, 2)): n is
 * hidden_dim, or 2 hidden_dim with -de -dr. Query form: q = h * r scores
 * tails as q . t, q = t * conj(r) scores heads as q . h (the DOT form, on
 * the rows as they are).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "model_kernels.h"

static int complex_dims(const struct rdps_model_params *p, uint64_t *ed, uint64_t *rd,
			uint64_t *rv)
{
	int ret = rdps_kge_dims_same(p, ed, rd, rv);

	if (ret)
		return ret;
	return *ed % 2 ? -EINVAL : 0; /* real and imaginary halves */
}

static double complex_score(const struct rdps_model *m, const float *h, const float *r,
			    const float *t)
{
	uint32_t K = m->ent_dim / 2;
	double s = 0;

	for (uint32_t k = 0; k < K; k++) {
		double hr = h[k], hi = h[K + k], tr = t[k], ti = t[K + k];
		double rr = r[k], ri = r[K + k];
		s += hr * tr * rr + hi * ti * rr + hr * ti * ri - hi * tr * ri;
	}
	return s;
}

static void complex_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			    uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
}

RDPS_AI void complex_query(uint32_t n, int head_side, const float *restrict x,
			   const float *restrict r, float *restrict q)
{
	uint32_t K = n / 2;

	if (head_side) {
		for (uint32_t k = 0; k < K; k++) {
			q[k] = x[k] * r[k] + x[K + k] * r[K + k];
			q[K + k] = x[K + k] * r[k] - x[k] * r[K + k];
		}
	} else {
		for (uint32_t k = 0; k < K; k++) {
			q[k] = x[k] * r[k] - x[K + k] * r[K + k];
			q[K + k] = x[k] * r[K + k] + x[K + k] * r[k];
		}
	}
}

/* Adds dL/dx and dL/dr given gq = dL/dq. */
RDPS_AI void complex_query_backward(uint32_t n, int head_side, const float *restrict x,
				    const float *restrict r, const float *restrict gq,
				    float *restrict gx, float *restrict gr)
{
	uint32_t K = n / 2;
	const float *gqr = gq, *gqi = gq + K;

	if (head_side) {
		/* qr = xr rr + xi ri ; qi = xi rr - xr ri */
		for (uint32_t k = 0; k < K; k++) {
			float xr = x[k], xi = x[K + k], rr = r[k], ri = r[K + k];
			gx[k] += gqr[k] * rr - gqi[k] * ri;
			gx[K + k] += gqr[k] * ri + gqi[k] * rr;
			gr[k] += gqr[k] * xr + gqi[k] * xi;
			gr[K + k] += gqr[k] * xi - gqi[k] * xr;
		}
	} else {
		/* qr = xr rr - xi ri ; qi = xr ri + xi rr */
		for (uint32_t k = 0; k < K; k++) {
			float xr = x[k], xi = x[K + k], rr = r[k], ri = r[K + k];
			gx[k] += gqr[k] * rr + gqi[k] * ri;
			gx[K + k] += gqi[k] * rr - gqr[k] * ri;
			gr[k] += gqr[k] * xr + gqi[k] * xi;
			gr[K + k] += gqi[k] * xr - gqr[k] * xi;
		}
	}
}

RDPS_KGE_CLONES
static void complex_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	kge_query_step(FORM_DOT, false, complex_query, complex_query_backward, A, pos_sum, neg_sum);
}

static void complex_eval_query(const struct rdps_model *m, int head_side, const float *x,
			       const float *r, float *q, float *tmp)
{
	complex_query(m->ent_dim, head_side, x, r, q);
}

RDPS_KGE_CLONES
static void complex_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			 const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_DOT, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_complex_ops = {
	.kind = RDPS_MODEL_COMPLEX,
	.name = "ComplEx",
	.dims = complex_dims,
	.score = complex_score,
	.scratch = complex_scratch,
	.step = complex_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = complex_eval_query,
	.score_tile = complex_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
