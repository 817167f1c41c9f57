/* SPDX-License-Identifier: MIT */
/*
 * TransR, as DGL-KE's TransRScore: score gamma - ||h M_r + r - t M_r||_1,
 * entity rows of E floats (hidden_dim, 2 hidden_dim with -de), relation
 * vectors of R floats (2 hidden_dim with -dr), and per relation a projection
 * M_r, an E x R row-major matrix (DGL-KE's projection_emb row reshaped to
 * (entity_dim, relation_dim)). rdps keeps M_r in the relation row after the
 * vector: a relation row is R + E * R floats (rdps_model_relation_parts()
 * says how to save and initialise the two parts as DGL-KE does).
 *
 * Query form, in the projected space: q = h M + r scores tails as
 * gamma - ||q - t M||_1, q = t M - r heads as gamma - ||q - h M||_1 (the L1
 * pair form on R floats); candidates are projected per relation.
 *
 * A chunk's positives are grouped by relation: per group, the known
 * entities, the true entities and the chunk's negatives are projected by
 * one product with M (rows_axpy), scored and differentiated in the L1 form,
 * and their gradients go back through M by two more products
 * (dot_rows_acc for the rows, outer_rows_acc for M), each reading M once.
 * DGL-KE projects every negative for every positive of the chunk; grouping
 * gives the same values with fewer products when relations repeat.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model_kernels.h"

static int transr_dims(const struct rdps_model_params *p, uint64_t *ed, uint64_t *rd,
		       uint64_t *rv)
{
	uint64_t E = (p->double_ent ? 2 : 1) * (uint64_t)p->hidden_dim;
	uint64_t R = (p->double_rel ? 2 : 1) * (uint64_t)p->hidden_dim;

	if (E > UINT32_MAX / 2 || R > UINT32_MAX / 2)
		return -EINVAL;
	*ed = E;
	*rv = R;
	*rd = R + E * R;
	return 0;
}

static double transr_score(const struct rdps_model *m, const float *h, const float *r,
			   const float *t)
{
	uint32_t E = m->ent_dim, R = m->rvec_dim;
	const float *M = r + R;
	double s = 0;

	for (uint32_t c = 0; c < R; c++) {
		double ph = 0, pt = 0;
		for (uint32_t a = 0; a < E; a++) {
			ph += (double)h[a] * M[(size_t)a * R + c];
			pt += (double)t[a] * M[(size_t)a * R + c];
		}
		s += fabs(ph + r[c] - pt);
	}
	return m->p.gamma - s;
}

/* Per group of g positives: 2 g + N rows projected (known entities, true
 * entities, negatives). */
static void transr_scratch(const struct rdps_model *m, uint32_t C, uint32_t N,
			   uint32_t n_rel, struct kge_scratch_need *need)
{
	size_t rows = 2 * (size_t)C + N;

	need->q_rows = rows;
	need->q_width = m->rvec_dim;
	need->groups = rows;
	need->mrows = m->ent_dim;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The g positives of relation r (their indices from i0 in the low halves of
 * key[]) against the chunk's negatives neg. */
RDPS_AI void transr_group(const struct step_args *A, uint32_t i0, const uint64_t *key,
			  uint32_t g, uint32_t r, const uint32_t *neg, double *pos_sum,
			  double *neg_sum)
{
	const struct rdps_model *m = A->m;
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t E = m->ent_dim, R = m->rvec_dim, N = b->neg, rows = 2 * g + N;
	const float *rv = A->rel + (size_t)r * m->rel_dim, *M = rv + R;
	float *grv = A->rg + (size_t)r * m->rel_dim, *GM = grv + R;
	int hs = b->neg_head != 0;

	for (uint32_t a = 0; a < E; a++) {
		sc->mrow[a] = M + (size_t)a * R;
		sc->gmrow[a] = GM + (size_t)a * R;
	}
	/* rows to project: known entities, true entities, negatives */
	for (uint32_t j = 0; j < g; j++) {
		uint32_t p = i0 + (uint32_t)key[j];
		uint32_t x = hs ? b->tail[p] : b->head[p], y = hs ? b->head[p] : b->tail[p];
		sc->qx[j] = A->ent + (size_t)x * E;
		sc->gqx[j] = A->eg + (size_t)x * E;
		sc->qx[g + j] = A->ent + (size_t)y * E;
		sc->gqx[g + j] = A->eg + (size_t)y * E;
	}
	for (uint32_t j = 0; j < N; j++) {
		sc->qx[2 * g + j] = A->ent + (size_t)neg[j] * E;
		sc->gqx[2 * g + j] = A->eg + (size_t)neg[j] * E;
	}
	for (uint32_t j = 0; j < rows; j++) {
		sc->qrow[j] = sc->Q + (size_t)j * R;
		sc->gqrow[j] = sc->GQ + (size_t)j * R;
	}
	memset(sc->Q, 0, (size_t)rows * R * sizeof(float));
	memset(sc->GQ, 0, (size_t)rows * R * sizeof(float));
	rows_axpy(sc->qrow, sc->qx, rows, sc->mrow, E, R);

	/* queries x M + r (tails) or x M - r (heads), in place */
	for (uint32_t j = 0; j < g; j++) {
		float *q = sc->Q + (size_t)j * R;
		if (hs)
			for (uint32_t k = 0; k < R; k++)
				q[k] -= rv[k];
		else
			for (uint32_t k = 0; k < R; k++)
				q[k] += rv[k];
		sc->qp[j] = q;
		sc->gqp[j] = sc->GQ + (size_t)j * R;
		sc->xp[j] = sc->Q + (size_t)(g + j) * R;
		sc->gxp[j] = sc->GQ + (size_t)(g + j) * R;
	}
	for (uint32_t j = 0; j < N; j++) {
		sc->ep[j] = sc->Q + (size_t)(2 * g + j) * R;
		sc->gep[j] = sc->GQ + (size_t)(2 * g + j) * R;
	}
	kge_chunk_pairs(FORM_L1, false, A, g, R, pos_sum, neg_sum);

	/* dL/dr = +- sum of dL/dq; dL/dq is also dL/d(x M) */
	for (uint32_t j = 0; j < g; j++) {
		const float *gq = sc->GQ + (size_t)j * R;
		if (hs)
			for (uint32_t k = 0; k < R; k++)
				grv[k] -= gq[k];
		else
			for (uint32_t k = 0; k < R; k++)
				grv[k] += gq[k];
	}
	/* through the projection: dx_j += G_j M^T, dM += sum_j x_j^T G_j */
	dot_rows_acc(sc->gqx, sc->mrow, (const float *const *)(void *)sc->gqrow, rows, E, R);
	outer_rows_acc(sc->gmrow, sc->qx, (const float *const *)(void *)sc->gqrow, rows, E, R);
}

RDPS_KGE_CLONES
static void transr_step(const struct step_args *A, double *pos_sum, double *neg_sum)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, N = b->neg, j1;

	for (uint32_t c = 0, i0 = 0; i0 < B; c++, i0 += chunk) {
		uint32_t C = B - i0 < chunk ? B - i0 : chunk;
		/* the chunk's positives in relation order (ties in batch order) */
		for (uint32_t i = 0; i < C; i++)
			sc->rkey[i] = (uint64_t)b->rel[i0 + i] << 32 | i;
		qsort(sc->rkey, C, sizeof(*sc->rkey), cmp_u64);
		for (uint32_t j0 = 0; j0 < C; j0 = j1) {
			uint32_t r = (uint32_t)(sc->rkey[j0] >> 32);
			for (j1 = j0 + 1; j1 < C && (uint32_t)(sc->rkey[j1] >> 32) == r; j1++)
				;
			transr_group(A, i0, sc->rkey + j0, j1 - j0, r, b->neg_ent + (size_t)c * N,
				     pos_sum, neg_sum);
		}
	}
}

/* out_i = rows_i M (count rows of E floats, out rows of R floats), through
 * tiles of row pointers: every output float sums its E terms in the order
 * of a whatever count and the row's position (rows_axpy), so a candidate
 * projected alone equals itself projected in a block, bit for bit. */
RDPS_KGE_CLONES
static void transr_project(const float *M, uint32_t E, uint32_t R, const float *rows,
			   uint32_t count, float *out)
{
	const float *mp[TILE_PTRS], *wp[TILE_PTRS];
	float *yp[TILE_PTRS];

	memset(out, 0, (size_t)count * R * sizeof(float));
	for (uint32_t i0 = 0; i0 < count; i0 += TILE_PTRS) {
		uint32_t ni = count - i0 < TILE_PTRS ? count - i0 : TILE_PTRS;
		/* blocks of rows of M: a multiple of 4, as rows_axpy's */
		for (uint32_t a0 = 0; a0 < E; a0 += TILE_PTRS) {
			uint32_t na = E - a0 < TILE_PTRS ? E - a0 : TILE_PTRS;
			for (uint32_t a = 0; a < na; a++)
				mp[a] = M + (size_t)(a0 + a) * R;
			for (uint32_t i = 0; i < ni; i++) {
				wp[i] = rows + (size_t)(i0 + i) * E + a0;
				yp[i] = out + (size_t)(i0 + i) * R;
			}
			rows_axpy(yp, wp, ni, mp, na, R);
		}
	}
}

/* Queries and candidates live in the projected space. */
static uint32_t transr_query_dim(const struct rdps_model *m)
{
	return m->rvec_dim;
}

static void transr_eval_query(const struct rdps_model *m, int head_side, const float *x,
			      const float *r, float *q, float *tmp)
{
	uint32_t R = m->rvec_dim;

	transr_project(r + R, m->ent_dim, R, x, 1, q);
	if (head_side)
		for (uint32_t k = 0; k < R; k++)
			q[k] -= r[k];
	else
		for (uint32_t k = 0; k < R; k++)
			q[k] += r[k];
}

RDPS_KGE_CLONES
static void transr_tile(const struct rdps_model *m, const float *q, uint32_t nq,
			const float *c, uint32_t nc, float *out)
{
	kge_score_tile(FORM_L1, false, m->p.gamma, m->rvec_dim, q, nq, c, nc, out);
}

/* Candidates are projected by the relation's matrix: eval keeps the whole
 * relation row of each test relation. */
static size_t transr_cand_ctx_size(const struct rdps_model *m)
{
	return m->rel_dim;
}

static void transr_cand_rows(const struct rdps_model *m, const float *ctx, const float *rows,
			     uint32_t count, float *out)
{
	transr_project(ctx + m->rvec_dim, m->ent_dim, m->rvec_dim, rows, count, out);
}

const struct rdps_model_ops rdps_kge_transr_ops = {
	.kind = RDPS_MODEL_TRANSR,
	.name = "TransR",
	.dims = transr_dims,
	.score = transr_score,
	.scratch = transr_scratch,
	.step = transr_step,
	.query_dim = transr_query_dim,
	.query_tmp = rdps_kge_no_tmp,
	.query = transr_eval_query,
	.score_tile = transr_tile,
	.cand_ctx_size = transr_cand_ctx_size,
	.cand_rows = transr_cand_rows,
};
