/* SPDX-License-Identifier: MIT */
/*
 * RESCAL: score h^T M_r t with M_r a row-major n x n matrix, the relation
 * row (n = hidden_dim, or 2 hidden_dim with -de -dr: DGL-KE's relation_dim
 * x entity_dim, which must be equal). Query form: q = M^T h scores tails,
 * q = M t heads, in the DOT pair form.
 *
 * The positives of several whole chunks take rows of Q and GQ in relation
 * order, so that each relation's positives are a group of consecutive rows.
 * Per group, the query build and its backward are matrix products that read
 * the relation matrix M (n x n) once, in blocks of rows, instead of once per
 * positive, and M's gradient takes one blocked update per group instead of
 * a rank-1 update per positive. The chunks' negatives run in between. Ties
 * in relation are kept in batch order: deterministic.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model_kernels.h"

static double rescal_score(const struct rdps_model *m, const float *h, const float *r,
			   const float *t)
{
	uint32_t D = m->ent_dim;
	double s = 0;

	for (uint32_t a = 0; a < D; a++) {
		double mt = 0;
		for (uint32_t c = 0; c < D; c++)
			mt += (double)r[(size_t)a * D + c] * t[c];
		s += h[a] * mt;
	}
	return s;
}

static int rescal_dims(const struct rdps_model_params *p, uint64_t *ed, uint64_t *rd,
		       uint64_t *rv)
{
	int ret = rdps_kge_dims_same(p, ed, rd, rv);

	if (ret)
		return ret;
	*rd = *rv = *ed * *ed;
	return 0;
}

/*
 * Positives processed together: at most max(C, T) of them, T = 2 MiB of
 * query rows (at most 4096), so that a batch of 1024 at hidden_dim 400 is
 * one group of chunks. Grows with C, as rdps_model_scratch_size() promises.
 */
static size_t rescal_rows_max(uint32_t C, uint32_t n)
{
	size_t T = ((size_t)1 << 19) / n;
	T = T < 1 ? 1 : T > 4096 ? 4096 : T;
	return C > T ? C : T;
}

static void rescal_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			   uint32_t n_rel, struct kge_scratch_need *need)
{
	size_t R = rescal_rows_max(C, m->ent_dim);

	need->q_rows = R;
	need->q_width = m->ent_dim;
	need->groups = R;
	need->mrows = m->ent_dim;
}

/* q from x (head on the tail side, tail on the head side) and M, one
 * positive at a time. */
RDPS_AI void rescal_query(uint32_t n, int head_side, const float *restrict x,
			  const float *restrict r, float *restrict q)
{
	if (head_side) {
		/* q_a = sum_c M[a][c] t_c */
		const float *const rows[1] = { x };
		for (uint32_t a = 0; a < n; a++) {
			const float *mp[1] = { r + (size_t)a * n };
			float o[4][2];
			pair_block(FORM_DOT, 1, 1, mp, rows, n, o);
			q[a] = o[0][0];
		}
	} else {
		/* q_c = sum_a h_a M[a][c] */
		memset(q, 0, n * sizeof(float));
		for (uint32_t a = 0; a < n; a++) {
			const float *mr = r + (size_t)a * n;
			float ha = x[a];
			for (uint32_t k = 0; k < n; k++)
				q[k] += ha * mr[k];
		}
	}
}

/* Adds dL/dx and dL/dM given gq = dL/dq, one positive at a time. */
RDPS_AI void rescal_query_backward(uint32_t n, int head_side, const float *restrict x,
				   const float *restrict r, const float *restrict gq,
				   float *restrict gx, float *restrict gr)
{
	if (head_side) {
		/* q = M t: gt += M^T gq ; gM[a][c] += gq_a t_c */
		for (uint32_t a = 0; a < n; a++) {
			const float *mr = r + (size_t)a * n;
			float *gm = gr + (size_t)a * n, ga = gq[a];
			for (uint32_t k = 0; k < n; k++) {
				gx[k] += ga * mr[k];
				gm[k] += ga * x[k];
			}
		}
	} else {
		/* q = M^T h: gh_a += M[a] . gq ; gM[a][c] += h_a gq_c */
		const float *const g1[1] = { gq };
		for (uint32_t a = 0; a < n; a++) {
			const float *mp[1] = { r + (size_t)a * n };
			float *gm = gr + (size_t)a * n, ha = x[a];
			float o[4][2];
			pair_block(FORM_DOT, 1, 1, mp, g1, n, o);
			gx[a] += o[0][0];
			for (uint32_t k = 0; k < n; k++)
				gm[k] += ha * gq[k];
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Groups smaller than this take the per-positive loops (rescal_query,
 * rescal_query_backward): with many relations (M in memory, a few
 * positives each) their row-by-row streams of M and its gradient are
 * served faster than the blocked kernels' passes (measured: 12% at 200 and
 * 600 relations). */
#define RESCAL_G0 4

/* Queries (backward == 0) or their backward pass (1) of every group of the
 * S positives from s0. This and rescal_begin are functions of their own
 * (not inlined into rescal_step): inlined, they changed the step's
 * register allocation and slowed it. */
RDPS_KGE_CLONES
static void rescal_groups(const struct step_args *A, uint32_t s0, uint32_t S, int hs,
			  int backward)
{
	const struct rdps_model *m = A->m;
	const uint32_t *rel = A->b->rel + s0;
	struct step_scratch *sc = A->sc;
	uint32_t n = m->ent_dim, j1;

	for (uint32_t j0 = 0; j0 < S; j0 = j1) {
		uint32_t r = rel[sc->ord[j0]], g;
		const float *M = A->rel + (size_t)r * m->rel_dim;
		float *GM = A->rg + (size_t)r * m->rel_dim;
		const float *const *x = sc->qx + j0;
		const float *const *gq = (const float *const *)(void *)(sc->gqrow + j0);
		float *const *gx = sc->gqx + j0;

		for (j1 = j0 + 1; j1 < S && rel[sc->ord[j1]] == r; j1++)
			;
		g = j1 - j0;
		if (g < RESCAL_G0) {
			for (uint32_t i = 0; i < g; i++) {
				if (!backward)
					rescal_query(n, hs, x[i], M, sc->qrow[j0 + i]);
				else
					rescal_query_backward(n, hs, x[i], M, gq[i], gx[i], GM);
			}
			continue;
		}
		for (uint32_t a = 0; a < n; a++) {
			sc->mrow[a] = M + (size_t)a * n;
			sc->gmrow[a] = GM + (size_t)a * n;
		}
		if (!backward) {
			float *const *q = sc->qrow + j0;
			memset(sc->Q + (size_t)j0 * n, 0, (size_t)g * n * sizeof(float));
			if (hs)
				/* q = M t: q_i[a] = M[a] . t_i */
				dot_rows_acc(q, sc->mrow, x, g, n, n);
			else
				/* q = M^T h: q_i = sum_a h_i[a] M[a] */
				rows_axpy(q, x, g, sc->mrow, n, n);
		} else if (hs) {
			/* gt_i += sum_a gq_i[a] M[a]; gM[a] += sum_i gq_i[a] t_i */
			rows_axpy(gx, gq, g, sc->mrow, n, n);
			outer_rows_acc(sc->gmrow, gq, x, g, n, n);
		} else {
			/* gh_i[a] += M[a] . gq_i; gM[a] += sum_i h_i[a] gq_i */
			dot_rows_acc(gx, sc->mrow, gq, g, n, n);
			outer_rows_acc(sc->gmrow, x, gq, g, n, n);
		}
	}
}

/* Rows of the S positives from s0 in relation order, their queries. */
RDPS_KGE_CLONES
static void rescal_begin(const struct step_args *A, uint32_t s0, uint32_t S)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t n = A->m->ent_dim;
	int hs = b->neg_head != 0;

	for (uint32_t i = 0; i < S; i++)
		sc->rkey[i] = (uint64_t)b->rel[s0 + i] << 32 | i;
	qsort(sc->rkey, S, sizeof(*sc->rkey), cmp_u64);
	for (uint32_t j = 0; j < S; j++) {
		uint32_t p = (uint32_t)sc->rkey[j];
		uint32_t x = hs ? b->tail[s0 + p] : b->head[s0 + p];
		sc->ord[j] = p;
		sc->rowof[p] = j;
		sc->qx[j] = A->ent + (size_t)x * n;
		sc->gqx[j] = A->eg + (size_t)x * n;
		sc->qrow[j] = sc->Q + (size_t)j * n;
		sc->gqrow[j] = sc->GQ + (size_t)j * n;
	}
	memset(sc->GQ, 0, (size_t)S * n * sizeof(float));
	rescal_groups(A, s0, S, hs, 0);
}

RDPS_KGE_CLONES
static void rescal_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, N = b->neg, n = A->m->ent_dim;
	uint32_t C0 = chunk < B ? chunk : B;
	uint32_t span = (uint32_t)(rescal_rows_max(C0, n) / C0) * C0;
	int hs = b->neg_head != 0;

	/* spans of whole chunks share the query build and backward */
	for (uint32_t c = 0, i0 = 0; i0 < B;) {
		uint32_t S = B - i0 < span ? B - i0 : span, end = i0 + S, s0 = i0;
		rescal_begin(A, s0, S);
		for (; i0 < end; c++, i0 += chunk) {
			uint32_t C = end - i0 < chunk ? end - i0 : chunk;
			const uint32_t *neg = b->neg_ent + (size_t)c * N;
			for (uint32_t i = 0; i < C; i++) {
				uint32_t y = hs ? b->head[i0 + i] : b->tail[i0 + i];
				size_t row = sc->rowof[i0 + i - s0];
				sc->qp[i] = sc->Q + row * n;
				sc->gqp[i] = sc->GQ + row * n;
				sc->xp[i] = A->ent + (size_t)y * n;
				sc->gxp[i] = A->eg + (size_t)y * n;
			}
			for (uint32_t j = 0; j < N; j++) {
				sc->ep[j] = A->ent + (size_t)neg[j] * n;
				sc->gep[j] = A->eg + (size_t)neg[j] * n;
			}
			kge_chunk_pairs(FORM_DOT, false, A, C, n, pos_sum, neg_sum);
		}
		rescal_groups(A, s0, S, hs, 1);
	}
}

static void rescal_eval_query(const struct rdps_model *m, int head_side, const float *x,
			      const float *r, float *q, float *tmp)
{
	rescal_query(m->ent_dim, head_side, x, r, q);
}

RDPS_KGE_CLONES
static void rescal_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_DOT, false, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

const struct rdps_model_ops rdps_kge_rescal_ops = {
	.kind = RDPS_MODEL_RESCAL,
	.name = "RESCAL",
	.dims = rescal_dims,
	.score = rescal_score,
	.scratch = rescal_scratch,
	.step = rescal_step,
	.query_dim = rdps_kge_ent_query,
	.query_tmp = rdps_kge_no_tmp,
	.query = rescal_eval_query,
	.score_tile = rescal_tile,
	.cand_ctx_size = rdps_kge_no_ctx,
	.cand_rows = rdps_kge_copy_rows,
};
