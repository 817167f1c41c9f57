/* SPDX-License-Identifier: MIT */
/*
 * RotatE: score gamma - sum_k |h_k e^{i phase_k} - t_k| over K = hidden_dim
 * complex components; phase_k = r_k / (emb_init / pi). Entity rows are 2K
 * floats (K real parts, then K imaginary parts: DGL-KE's -de, which RotatE
 * requires there and which rdps implies); relation rows are K phases (-dr
 * is refused: DGL-KE's shapes would not match). Query form: q = h e^{i ph}
 * scores tails, q = t e^{-i ph} heads, as gamma - sum_k |q_k - e_k| (the ROT
 * pair form).
 *
 * The negatives keep their moduli between forward and backward: see
 * rot_fwd_block.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/common.h"
#include "model_kernels.h"

static int rotate_dims(const struct rdps_model_params *p, uint64_t *ed, uint64_t *rd,
		       uint64_t *rv)
{
	if (p->double_rel)
		return -EINVAL;
	*ed = 2 * (uint64_t)p->hidden_dim;
	*rd = *rv = p->hidden_dim;
	return 0;
}

static double rotate_score(const struct rdps_model *m, const float *h, const float *r,
			   const float *t)
{
	uint32_t D = m->p.hidden_dim;
	double scale = M_PI / ((m->p.gamma + 2.0) / D), s = 0;

	for (uint32_t k = 0; k < D; k++) {
		double ph = r[k] * scale, c = cos(ph), sn = sin(ph);
		double re = h[k] * c - h[D + k] * sn - t[k];
		double im = h[k] * sn + h[D + k] * c - t[D + k];
		s += sqrt(re * re + im * im);
	}
	return m->p.gamma - s;
}

static void rotate_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			   uint32_t n_rel, struct kge_scratch_need *need)
{
	need->q_rows = C;
	need->q_width = m->ent_dim;
	need->cs = (size_t)n_rel * 2 * m->rel_dim;
	need->Y = (size_t)4 * N * RDPS_ALIGN_UP(m->ent_dim / 2, 8);
}

/* cs: cos (first D) and sin (next D) of the relation's phases. */
static void rotate_cs(const struct rdps_model *m, const float *r, float *cs)
{
	uint32_t D = m->rel_dim;
	for (uint32_t k = 0; k < D; k++) {
		float ph = r[k] * m->phase_scale;
		cs[k] = cosf(ph);
		cs[D + k] = sinf(ph);
	}
}

/* q from x (head on the tail side, tail on the head side) and the cos, sin
 * of r. */
RDPS_AI void rotate_query(uint32_t n, int head_side, const float *restrict x,
			  const float *restrict cs, float *restrict q)
{
	uint32_t K = n / 2;
	const float *c = cs, *s = cs + K;

	if (head_side) {
		for (uint32_t k = 0; k < K; k++) {
			q[k] = x[k] * c[k] + x[K + k] * s[k];
			q[K + k] = x[K + k] * c[k] - x[k] * s[k];
		}
	} else {
		for (uint32_t k = 0; k < K; k++) {
			q[k] = x[k] * c[k] - x[K + k] * s[k];
			q[K + k] = x[k] * s[k] + x[K + k] * c[k];
		}
	}
}

/* Adds dL/dx and dL/dr given gq = dL/dq. */
RDPS_AI void rotate_query_backward(uint32_t n, float ps, int head_side,
				   const float *restrict cs, const float *restrict q,
				   const float *restrict gq, float *restrict gx,
				   float *restrict gr)
{
	uint32_t K = n / 2;
	const float *c = cs, *s = cs + K, *gqr = gq, *gqi = gq + K;

	if (head_side) {
		/* q = x * conj(e^{i ph}); dq/dph = -i q */
		for (uint32_t k = 0; k < K; k++) {
			gx[k] += gqr[k] * c[k] - gqi[k] * s[k];
			gx[K + k] += gqr[k] * s[k] + gqi[k] * c[k];
			gr[k] += (gqr[k] * q[K + k] - gqi[k] * q[k]) * ps;
		}
	} else {
		/* q = x * e^{i ph}; dq/dph = i q */
		for (uint32_t k = 0; k < K; k++) {
			gx[k] += gqr[k] * c[k] + gqi[k] * s[k];
			gx[K + k] += gqi[k] * c[k] - gqr[k] * s[k];
			gr[k] += (gqi[k] * q[k] - gqr[k] * q[K + k]) * ps;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Negatives with their moduli kept                                          */
/* ------------------------------------------------------------------------ */

/*
 * RotatE negatives with the moduli kept: the forward keeps y = 1/|q_k - e_k|
 * (the refined rsqrt) of every (query, negative, component) of a block of
 * mb queries in Y, and the backward reads it back instead of recomputing
 * the differences' moduli (most of the pairwise backward's work). Y is laid
 * out in the backward's reading order, [ceil(K/8)][N][mb][8] floats (1.3 MB
 * for mb = 4, K = 400, N = 200). It holds 2 y (vrsqrt2_w, one multiplication
 * less in the forward) and the backward takes g / 2: every score and
 * gradient is that of pair_block and recomputed moduli, bit for bit.
 */

/* Raw ROT sums of the mb queries q_a against one negative e (as pair_block),
 * storing 2 y at Y + c * yk + a * 8 for component chunk c (the tail's lanes
 * in the last). One negative at a time, so that each row of E is read once
 * per block of queries (less L2 / L3 traffic than 2 x 2 blocks). */
RDPS_AI void rot_fwd_block(int wide, int mb, const float *const *q,
			   const float *e, uint32_t n, float *Y, size_t yk,
			   float out[4])
{
	uint32_t K = n / 2, K8 = K & ~7u;
	v8f acc[4];
	float tail[4];

	for (int a = 0; a < mb; a++) {
		acc[a] = (v8f){ 0 };
		tail[a] = 0;
	}
	for (uint32_t k = 0; k < K8; k += 8) {
		float *y8 = Y + (size_t)(k / 8) * yk;
		v8f er = LD(e + k), ei = LD(e + K + k);
		for (int a = 0; a < mb; a++) {
			v8f dr = LD(q[a] + k) - er, di = LD(q[a] + K + k) - ei, x, y;
			x = dr * dr + di * di;
			vrsqrt2_w(wide, &x, &y);
			acc[a] += x * y;
			ST(y8 + a * 8, y);
		}
	}
	for (uint32_t k = K8; k < K; k++) {
		float *y1 = Y + (size_t)(K8 / 8) * yk + (k - K8);
		for (int a = 0; a < mb; a++) {
			float dr = q[a][k] - e[k];
			float di = q[a][K + k] - e[K + k];
			float x = dr * dr + di * di, y = srsqrt(x);
			tail[a] += x * y;
			y1[a * 8] = 2.0f * y;
		}
	}
	for (int a = 0; a < mb; a++)
		out[a] = 0.5f * hsum8(&acc[a]) + tail[a];
}

/* S[a * lds + b] = raw ROT sum of (q_a, e_b) for a < mb (4 or 1, a
 * compile-time constant), all ne negatives; fills Y. */
RDPS_AI void rot_fwd_rows(int wide, int mb, const float *const *qp,
			  const float *const *ep, uint32_t ne, uint32_t n, float *S,
			  uint32_t lds, float *Y)
{
	size_t yb = (size_t)mb * 8;
	float o[4];

	for (uint32_t b = 0; b < ne; b++) {
		rot_fwd_block(wide, mb, qp, ep[b], n, Y + b * yb, yb * ne, o);
		for (int a = 0; a < mb; a++)
			S[(size_t)a * lds + b] = o[a];
	}
}

/* Y[k] = 1 / |q_k - e_k| for the K = n / 2 complex components of one pair:
 * rot_bwd_rows's Y for a single query and row (then G holds g itself). */
RDPS_AI void rot_moduli(const float *q, const float *e, uint32_t n, float *Y)
{
	uint32_t K = n / 2, K8 = K & ~7u, k;

	for (k = 0; k < K8; k += 8) {
		v8f dr = LD(q + k) - LD(e + k), di = LD(q + K + k) - LD(e + K + k), x, y;
		x = dr * dr + di * di;
		vrsqrt(&x, &y);
		ST(Y + k, y);
	}
	for (; k < K; k++) {
		float dr = q[k] - e[k], di = q[K + k] - e[K + k];
		Y[k] = srsqrt(dr * dr + di * di);
	}
}

/* The RotatE backward for mb queries against nb rows with coefficients G:
 * GQ[a] += g ds/dq, GE[b] -= the same, ds/dq_k = -(q_k - e_k) / |q_k - e_k|,
 * y = 1 / |q_k - e_k| read from Y (stored by rot_fwd_rows as 2 y, with G
 * holding g / 2; or by rot_moduli). */
RDPS_AI void rot_bwd_rows(int mb, const float *const *Q, float *const *GQ,
			  const float *G, uint32_t ldg, const float *const *E,
			  float *const *GE, uint32_t nb, uint32_t n, const float *Y)
{
	uint32_t K = n / 2, K8 = K & ~7u, k;
	size_t yb = (size_t)mb * 8, yk_stride = yb * nb;

	for (k = 0; k < K8; k += 8) {
		const float *yk = Y + (size_t)(k / 8) * yk_stride;
		v8f gr[4], gi[4];
		for (int a = 0; a < mb; a++)
			gr[a] = gi[a] = (v8f){ 0 };
		for (uint32_t b = 0; b < nb; b++, yk += yb) {
			v8f er = LD(E[b] + k), ei = LD(E[b] + K + k);
			v8f ger = (v8f){ 0 }, gei = (v8f){ 0 };
			for (int a = 0; a < mb; a++) {
				float g = G[(size_t)a * ldg + b];
				v8f dr = LD(Q[a] + k) - er, di = LD(Q[a] + K + k) - ei;
				v8f y = LD(yk + a * 8) * g;
				gr[a] -= dr * y;
				gi[a] -= di * y;
				ger += dr * y;
				gei += di * y;
			}
			ST(GE[b] + k, LD(GE[b] + k) + ger);
			ST(GE[b] + K + k, LD(GE[b] + K + k) + gei);
		}
		for (int a = 0; a < mb; a++) {
			ST(GQ[a] + k, LD(GQ[a] + k) + gr[a]);
			ST(GQ[a] + K + k, LD(GQ[a] + K + k) + gi[a]);
		}
	}
	for (; k < K; k++) {
		const float *yk = Y + (size_t)(K8 / 8) * yk_stride + (k - K8);
		for (int a = 0; a < mb; a++)
			for (uint32_t b = 0; b < nb; b++) {
				float g = G[(size_t)a * ldg + b];
				float dr = Q[a][k] - E[b][k];
				float di = Q[a][K + k] - E[b][K + k];
				float y = yk[b * yb + a * 8] * g;
				GQ[a][k] -= dr * y;
				GQ[a][K + k] -= di * y;
				GE[b][k] += dr * y;
				GE[b][K + k] += di * y;
			}
	}
}

/* RotatE: scores, loss rows and backward of the negatives of the mb queries
 * from i (mb = 4, or 1: the blocks of the pairwise backward). */
RDPS_AI void rot_neg_rows(const struct rdps_model *m, struct step_scratch *sc,
			  int wide, int mb, uint32_t i, uint32_t N, float k,
			  double *neg_sum)
{
	uint32_t n = m->ent_dim;
	float *S = sc->S + (size_t)i * N, gamma = m->p.gamma;

	rot_fwd_rows(wide, mb, sc->qp + i, sc->ep, N, n, S, N, sc->Y);
	for (size_t x = 0; x < (size_t)mb * N; x++)
		S[x] = gamma - S[x];
	for (int a = 0; a < mb; a++)
		*neg_sum += neg_row_loss(m, S + (size_t)a * N, sc->wbuf, N, k);
	/* Y holds 2 y: (g / 2)(2 y) = g y exactly */
	for (size_t x = 0; x < (size_t)mb * N; x++)
		S[x] *= 0.5f;
	rot_bwd_rows(mb, sc->qp + i, sc->gqp + i, S, N, sc->ep, sc->gep, N, n,
		     sc->Y);
}

/* All negatives of a RotatE chunk of C queries, by blocks of 4 queries
 * (then single ones, as the pairwise backward). */
RDPS_KGE_CLONES
static void rot_negatives(const struct rdps_model *m, struct step_scratch *sc,
			  int wide, uint32_t C, uint32_t N, float k,
			  double *neg_sum)
{
	uint32_t i = 0;

	if (wide) {
		for (; i + 4 <= C; i += 4)
			rot_neg_rows(m, sc, 1, 4, i, N, k, neg_sum);
		for (; i < C; i++)
			rot_neg_rows(m, sc, 1, 1, i, N, k, neg_sum);
	} else {
		for (; i + 4 <= C; i += 4)
			rot_neg_rows(m, sc, 0, 4, i, N, k, neg_sum);
		for (; i < C; i++)
			rot_neg_rows(m, sc, 0, 1, i, N, k, neg_sum);
	}
}


/* RotatE's forward takes the 8-lane rsqrt estimate where the x86-64-v3
 * clone of the step runs (AVX2 and FMA), which inlines it. Same values as
 * the SSE halves: results do not depend on it. */
static int rot_wide(void)
{
#if defined(__x86_64__)
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return 0;
#endif
}

RDPS_KGE_CLONES
static void rotate_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	const struct rdps_model *m = A->m;
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, N = b->neg, n = m->ent_dim, rd = m->rel_dim;
	int hs = b->neg_head != 0, wide = rot_wide();
	float gamma = m->p.gamma, k = 0.5f / (float)B;

	for (uint32_t r = 0; r < b->n_rel_rows; r++)
		rotate_cs(m, A->rel + (size_t)r * rd, sc->cs + (size_t)r * 2 * rd);
	for (uint32_t c = 0, i0 = 0; i0 < B; c++, i0 += chunk) {
		uint32_t C = B - i0 < chunk ? B - i0 : chunk;
		kge_chunk_rows(A, i0, C, b->neg_ent + (size_t)c * N);
		for (uint32_t i = 0; i < C; i++) {
			uint32_t x = hs ? b->tail[i0 + i] : b->head[i0 + i];
			rotate_query(n, hs, A->ent + (size_t)x * n,
				     sc->cs + (size_t)b->rel[i0 + i] * 2 * rd,
				     sc->Q + (size_t)i * n);
		}
		/* positives: p = s(q, y); dL/dp = -k * sigmoid(-p); one (query,
		 * positive) pair at a time through the negatives' backward, its
		 * moduli in Y (free until then) */
		for (uint32_t i = 0; i < C; i++) {
			float o[4][2], p, ls, sg;
			pair_block(FORM_ROT, 1, 1, sc->qp + i, sc->xp + i, n, o);
			p = finish_score(FORM_ROT, gamma, o[0][0]);
			logsig(p, &ls, &sg);
			*pos_sum -= ls;
			sc->pos[i] = -k * sg;
		}
		for (uint32_t i = 0; i < C; i++) {
			rot_moduli(sc->qp[i], sc->xp[i], n, sc->Y);
			rot_bwd_rows(1, sc->qp + i, sc->gqp + i, sc->pos + i, 1, sc->xp + i,
				     sc->gxp + i, 1, n, sc->Y);
		}
		rot_negatives(m, sc, wide, C, N, k, neg_sum);
		for (uint32_t i = 0; i < C; i++) {
			uint32_t x = hs ? b->tail[i0 + i] : b->head[i0 + i], r = b->rel[i0 + i];
			rotate_query_backward(n, m->phase_scale, hs, sc->cs + (size_t)r * 2 * rd,
					      sc->qp[i], sc->gqp[i], A->eg + (size_t)x * n,
					      A->rg + (size_t)r * rd);
		}
	}
}

static size_t rotate_query_tmp(const struct rdps_model *m)
{
	return 2 * (size_t)m->rel_dim;
}

static void rotate_eval_query(const struct rdps_model *m, int head_side, const float *x,
			      const float *r, float *q, float *tmp)
{
	rotate_cs(m, r, tmp);
	rotate_query(m->ent_dim, head_side, x, tmp, q);
}

RDPS_KGE_CLONES
static void rotate_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_ROT, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_rotate_ops = {
	.kind = RDPS_MODEL_ROTATE,
	.name = "RotatE",
	.dims = rotate_dims,
	.score = rotate_score,
	.scratch = rotate_scratch,
	.step = rotate_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rotate_query_tmp,
	.query = rotate_eval_query,
	.score_tile = rotate_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
