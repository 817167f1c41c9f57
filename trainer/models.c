/* SPDX-License-Identifier: MIT */
/*
 * KGE models: the names, parameters and row layouts of DGL-KE's models, and
 * the step driver they share: batch checks, the scratch, the loss sums and
 * the regularization. Each model family (score, step, evaluation query
 * form) is a file of its own behind a const ops table (model_ops.h), picked
 * once when the model is created:
 *
 *   model_transe.c    TransE_l1, TransE_l2
 *   model_distmult.c  DistMult
 *   model_complex.c   ComplEx
 *   model_rotate.c    RotatE
 *   model_rescal.c    RESCAL
 *   model_transr.c    TransR
 *   model_simple.c    SimplE
 *
 * The loss of the negatives (log-sigmoid with DGL-KE's -adv weights) and
 * the pair kernels are inline in model_kernels.h, so each family's step
 * compiles them with its pair form as a constant.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "rdps/trainer.h"
#include "kge_internal.h"
#include "model_kernels.h"

static const struct rdps_model_ops *const model_ops[] = {
	[RDPS_MODEL_TRANSE_L1] = &rdps_kge_transe_l1_ops,
	[RDPS_MODEL_TRANSE_L2] = &rdps_kge_transe_l2_ops,
	[RDPS_MODEL_DISTMULT] = &rdps_kge_distmult_ops,
	[RDPS_MODEL_COMPLEX] = &rdps_kge_complex_ops,
	[RDPS_MODEL_ROTATE] = &rdps_kge_rotate_ops,
	[RDPS_MODEL_RESCAL] = &rdps_kge_rescal_ops,
	[RDPS_MODEL_TRANSR] = &rdps_kge_transr_ops,
	[RDPS_MODEL_SIMPLE] = &rdps_kge_simple_ops,
};

static const struct {
	const char *name;
	enum rdps_model_kind kind;
} model_table[] = {
	{ "TransE_l1", RDPS_MODEL_TRANSE_L1 },
	{ "TransE_l2", RDPS_MODEL_TRANSE_L2 },
	{ "TransE", RDPS_MODEL_TRANSE_L2 },
	{ "DistMult", RDPS_MODEL_DISTMULT },
	{ "ComplEx", RDPS_MODEL_COMPLEX },
	{ "RotatE", RDPS_MODEL_ROTATE },
	{ "RESCAL", RDPS_MODEL_RESCAL },
	{ "TransR", RDPS_MODEL_TRANSR },
	{ "SimplE", RDPS_MODEL_SIMPLE },
};

const char *rdps_model_names(void)
{
	return "TransE_l1, TransE_l2 (alias TransE), DistMult, ComplEx, RotatE, RESCAL, "
	       "TransR, SimplE";
}

int rdps_model_lookup(const char *name, enum rdps_model_kind *kind)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(model_table); i++) {
		if (strcmp(name, model_table[i].name) == 0) {
			if (kind)
				*kind = model_table[i].kind;
			return 0;
		}
	}
	return -EINVAL;
}

/* Widths of p's model, checked against 32 bits. */
static int model_dims(const struct rdps_model_params *p, const struct rdps_model_ops **ops,
		      uint32_t *ed, uint32_t *rd, uint32_t *rv)
{
	enum rdps_model_kind kind;
	uint64_t e, r, v;
	int ret;

	if (!p)
		return -EINVAL;
	ret = rdps_model_lookup(p->name, &kind);
	if (ret)
		return ret;
	if (p->hidden_dim == 0)
		return -EINVAL;
	ret = model_ops[kind]->dims(p, &e, &r, &v);
	if (ret)
		return ret;
	if (e > UINT32_MAX / 2 || r > UINT32_MAX / 2)
		return -EINVAL;
	if (ops)
		*ops = model_ops[kind];
	if (ed)
		*ed = (uint32_t)e;
	if (rd)
		*rd = (uint32_t)r;
	if (rv)
		*rv = (uint32_t)v;
	return 0;
}

int rdps_model_params_dims(const struct rdps_model_params *p, uint32_t *entity_dim,
			   uint32_t *relation_dim)
{
	return model_dims(p, NULL, entity_dim, relation_dim, NULL);
}

int rdps_model_dims(const char *name, uint32_t hidden_dim,
		    uint32_t *entity_dim, uint32_t *relation_dim)
{
	struct rdps_model_params p;

	rdps_model_params_init(&p);
	p.name = name;
	p.hidden_dim = hidden_dim;
	return rdps_model_params_dims(&p, entity_dim, relation_dim);
}

int rdps_kge_dims_same(const struct rdps_model_params *p, uint64_t *ent_dim,
		       uint64_t *rel_dim, uint64_t *rvec_dim)
{
	uint64_t E = (p->double_ent ? 2 : 1) * (uint64_t)p->hidden_dim;

	if (p->double_ent != p->double_rel || E > UINT32_MAX / 2)
		return -EINVAL;
	*ent_dim = *rel_dim = *rvec_dim = E;
	return 0;
}

void rdps_model_params_init(struct rdps_model_params *p)
{
	memset(p, 0, sizeof(*p));
	p->name = "TransE_l2";
	p->hidden_dim = 400;
	p->gamma = 12.0f;
	p->adv = false;
	p->adv_temp = 1.0f;
	p->reg_coef = 2e-6f;
	p->reg_norm = 3.0f;
	p->double_ent = false;
	p->double_rel = false;
}

int rdps_model_create(struct rdps_model **out, const struct rdps_model_params *p)
{
	const struct rdps_model_ops *ops;
	struct rdps_model *m;
	uint32_t ed, rd, rv;
	int ret;

	if (!out || !p)
		return -EINVAL;
	*out = NULL;
	ret = model_dims(p, &ops, &ed, &rd, &rv);
	if (ret)
		return ret;
	if (!isfinite(p->gamma) || !isfinite(p->adv_temp) ||
	    !isfinite(p->reg_coef) || !isfinite(p->reg_norm) || p->reg_coef < 0 ||
	    (p->reg_coef > 0 && p->reg_norm <= 0))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->p = *p;
	m->ops = ops;
	snprintf(m->name, sizeof(m->name), "%s", ops->name);
	m->p.name = m->name;
	m->ent_dim = ed;
	m->rel_dim = rd;
	m->rvec_dim = rv;
	m->qdim = ops->query_dim(m);
	m->emb_init = (p->gamma + 2.0f) / (float)p->hidden_dim;
	m->phase_scale = (float)M_PI / m->emb_init;
	*out = m;
	return 0;
}

void rdps_model_destroy(struct rdps_model *m)
{
	free(m);
}

enum rdps_model_kind rdps_model_kind(const struct rdps_model *m)
{
	return m->ops->kind;
}

const char *rdps_model_name(const struct rdps_model *m)
{
	return m->name;
}

const struct rdps_model_params *rdps_model_params(const struct rdps_model *m)
{
	return &m->p;
}

uint32_t rdps_model_entity_dim(const struct rdps_model *m)
{
	return m->ent_dim;
}

uint32_t rdps_model_relation_dim(const struct rdps_model *m)
{
	return m->rel_dim;
}

float rdps_model_emb_init(const struct rdps_model *m)
{
	return m->emb_init;
}

unsigned rdps_model_relation_parts(const struct rdps_model *m,
				   struct rdps_model_rel_part *parts)
{
	parts[0] = (struct rdps_model_rel_part){ .suffix = "_relation", .offset = 0,
						 .width = m->rvec_dim,
						 .init_range = m->emb_init,
						 .regularized = true };
	if (m->rvec_dim == m->rel_dim)
		return 1;
	/* TransR: DGL-KE's projection_emb, saved by TransRScore.save() as
	 * <dataset>_TransRprojection.npy and initialised by init(1.0) */
	parts[1] = (struct rdps_model_rel_part){ .suffix = "projection",
						 .offset = m->rvec_dim,
						 .width = m->rel_dim - m->rvec_dim,
						 .init_range = 1.0f, .regularized = false };
	return 2;
}

double rdps_model_score(const struct rdps_model *m, const float *h,
			const float *r, const float *t)
{
	return m->ops->score(m, h, r, t);
}

/* ------------------------------------------------------------------------ */
/* Defaults for the families' tables                                         */
/* ------------------------------------------------------------------------ */

uint32_t rdps_kge_ent_query(const struct rdps_model *m)
{
	return m->ent_dim;
}

size_t rdps_kge_no_tmp(const struct rdps_model *m)
{
	return 0;
}

size_t rdps_kge_no_ctx(const struct rdps_model *m)
{
	return 0;
}

void rdps_kge_copy_rows(const struct rdps_model *m, const float *ctx, const float *rows,
			uint32_t count, float *out)
{
	memcpy(out, rows, (size_t)count * m->ent_dim * sizeof(float));
}

/* ------------------------------------------------------------------------ */
/* Evaluation (internal API)                                                 */
/* ------------------------------------------------------------------------ */

uint32_t rdps_kge_query_dim(const struct rdps_model *m)
{
	return m->qdim;
}

size_t rdps_kge_query_tmp(const struct rdps_model *m)
{
	return m->ops->query_tmp(m);
}

void rdps_kge_query(const struct rdps_model *m, int head_side, const float *x,
		    const float *r, float *q, float *tmp)
{
	m->ops->query(m, head_side, x, r, q, tmp);
}

void rdps_kge_score_tile(const struct rdps_model *m, const float *q,
			 uint32_t nq, const float *c, uint32_t nc, float *out)
{
	m->ops->score_tile(m, q, nq, c, nc, out);
}

size_t rdps_kge_cand_ctx_size(const struct rdps_model *m)
{
	return m->ops->cand_ctx_size(m);
}

void rdps_kge_cand_rows(const struct rdps_model *m, const float *ctx, const float *rows,
			uint32_t count, float *out)
{
	m->ops->cand_rows(m, ctx, rows, count, out);
}

/* ------------------------------------------------------------------------ */
/* Regularization                                                            */
/* ------------------------------------------------------------------------ */

/* Adds w * coef * |x|^p to the returned sum and its gradient to g. */
RDPS_AI double reg_row(const float *restrict x, float *restrict g, uint32_t n,
		       float coef, float p, float w)
{
	float cw = coef * w;
	double s = 0;

	if (p == 3.0f) {
		v8f acc = { 0 };
		uint32_t n8 = n & ~7u, k;
		for (k = 0; k < n8; k += 8) {
			v8f v = LD(x + k), a = v;
			vabs(&a);
			acc += v * v * a;
			ST(g + k, LD(g + k) + (3.0f * cw) * v * a);
		}
		s = hsum8(&acc);
		for (; k < n; k++) {
			float v = x[k], a = fabsf(v);
			s += v * v * a;
			g[k] += 3.0f * cw * v * a;
		}
	} else if (p == 2.0f) {
		v8f acc = { 0 };
		uint32_t n8 = n & ~7u, k;
		for (k = 0; k < n8; k += 8) {
			v8f v = LD(x + k);
			acc += v * v;
			ST(g + k, LD(g + k) + (2.0f * cw) * v);
		}
		s = hsum8(&acc);
		for (; k < n; k++) {
			s += x[k] * x[k];
			g[k] += 2.0f * cw * x[k];
		}
	} else {
		for (uint32_t k = 0; k < n; k++) {
			float v = x[k], a = fabsf(v);
			float pw = powf(a, p - 1.0f);
			s += a * pw;
			if (a > 0)
				g[k] += cw * p * pw * (v > 0 ? 1.0f : -1.0f);
		}
	}
	return s * cw;
}

/* Adds DGL-KE's regularization term of the batch (rdps_model_step's reg)
 * to the gradients and returns it. Relations count their vector only
 * (TransR: not the projection, as DGL-KE's norm(relation_emb)). */
RDPS_KGE_CLONES
static double regularize(const struct step_args *A)
{
	const struct rdps_model *m = A->m;
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, N = b->neg;
	uint32_t nch = (B + chunk - 1) / chunk;
	const uint32_t flag = 1u << 31;
	double reg = 0;

	memset(sc->ent_w, 0, (size_t)b->n_ent_rows * sizeof(uint32_t));
	memset(sc->rel_w, 0, (size_t)b->n_rel_rows * sizeof(uint32_t));
	for (uint32_t i = 0; i < B; i++) {
		sc->ent_w[b->head[i]] |= flag;
		sc->ent_w[b->tail[i]] |= flag;
		sc->rel_w[b->rel[i]]++;
	}
	for (size_t j = 0; j < (size_t)nch * N; j++)
		sc->ent_w[b->neg_ent[j]]++;
	for (uint32_t e = 0; e < b->n_ent_rows; e++) {
		uint32_t w = sc->ent_w[e];
		w = (w & ~flag) + (w >> 31);
		if (w)
			reg += reg_row(A->ent + (size_t)e * m->ent_dim,
				       A->eg + (size_t)e * m->ent_dim,
				       m->ent_dim, m->p.reg_coef,
				       m->p.reg_norm, (float)w);
	}
	for (uint32_t r = 0; r < b->n_rel_rows; r++)
		if (sc->rel_w[r])
			reg += reg_row(A->rel + (size_t)r * m->rel_dim,
				       A->rg + (size_t)r * m->rel_dim,
				       m->rvec_dim, m->p.reg_coef,
				       m->p.reg_norm, (float)sc->rel_w[r]);
	return reg;
}

/* ------------------------------------------------------------------------ */
/* The step                                                                  */
/* ------------------------------------------------------------------------ */

/* Lays out (or, with base == NULL, measures) the scratch. */
static size_t scratch_layout(const struct rdps_model *m, uint32_t C, uint32_t N,
			     uint32_t n_ent, uint32_t n_rel, char *base,
			     struct step_scratch *sc)
{
	struct kge_scratch_need need = { 0 };
	size_t off = 0;
	bool reg = m->p.reg_coef > 0;

	m->ops->scratch(m, C, N, n_rel, &need);
#define CARVE(field, type, count)                                             \
	do {                                                                  \
		if (base)                                                     \
			sc->field = (type *)(void *)(base + off);             \
		off += RDPS_ALIGN_UP((size_t)(count) * sizeof(type), SCRATCH_ALIGN); \
	} while (0)
	CARVE(Q, float, need.q_rows * need.q_width);
	CARVE(GQ, float, need.q_rows * need.q_width);
	CARVE(S, float, (size_t)C * N);
	CARVE(DIST, float, need.dist);
	CARVE(rowc, float, C);
	CARVE(colc, float, N);
	CARVE(qn, float, C);
	CARVE(en, float, N);
	CARVE(wbuf, float, N);
	CARVE(pos, float, C);
	CARVE(cs, float, need.cs);
	CARVE(Y, float, need.Y);
	CARVE(qp, const float *, C);
	CARVE(gqp, float *, C);
	CARVE(ep, const float *, N);
	CARVE(gep, float *, N);
	CARVE(xp, const float *, C);
	CARVE(gxp, float *, C);
	CARVE(qx, const float *, need.groups);
	CARVE(gqx, float *, need.groups);
	CARVE(qrow, float *, need.groups);
	CARVE(gqrow, float *, need.groups);
	CARVE(ord, uint32_t, need.groups);
	CARVE(rowof, uint32_t, need.groups);
	CARVE(rkey, uint64_t, need.groups);
	CARVE(mrow, const float *, need.mrows);
	CARVE(gmrow, float *, need.mrows);
	CARVE(ent_w, uint32_t, reg ? n_ent : 0);
	CARVE(rel_w, uint32_t, reg ? n_rel : 0);
#undef CARVE
	return off;
}

size_t rdps_model_scratch_size(const struct rdps_model *m, uint32_t chunk,
			       uint32_t neg, uint32_t n_ent_rows,
			       uint32_t n_rel_rows)
{
	return scratch_layout(m, chunk, neg, n_ent_rows, n_rel_rows, NULL, NULL) +
	       SCRATCH_ALIGN;
}

static bool indices_ok(const uint32_t *idx, size_t n, uint32_t limit)
{
	uint32_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad |= idx[i] >= limit;
	return !bad;
}

int rdps_model_step(const struct rdps_model *m, const struct rdps_batch *b,
		    const float *ent_rows, const float *rel_rows,
		    float *ent_grad, float *rel_grad, void *scratch,
		    size_t scratch_size, struct rdps_step_result *res)
{
	struct step_scratch sc;
	struct step_args A;
	uint32_t C, nch;
	double pos_sum = 0, neg_sum = 0, reg = 0;
	char *base;

	if (!m || !b || !ent_rows || !rel_rows || !ent_grad || !rel_grad ||
	    !scratch || !b->head || !b->rel || !b->tail || !b->neg_ent)
		return -EINVAL;
	if (b->size == 0 || b->chunk == 0 || b->neg == 0 || b->n_ent_rows == 0 ||
	    b->n_rel_rows == 0)
		return -EINVAL;
	C = b->chunk < b->size ? b->chunk : b->size;
	nch = (b->size + b->chunk - 1) / b->chunk;
	if (scratch_size < rdps_model_scratch_size(m, C, b->neg, b->n_ent_rows,
						   b->n_rel_rows))
		return -ENOBUFS;
	if (!indices_ok(b->head, b->size, b->n_ent_rows) ||
	    !indices_ok(b->tail, b->size, b->n_ent_rows) ||
	    !indices_ok(b->rel, b->size, b->n_rel_rows) ||
	    !indices_ok(b->neg_ent, (size_t)nch * b->neg, b->n_ent_rows))
		return -EINVAL;

	base = (char *)RDPS_ALIGN_UP((uintptr_t)scratch, SCRATCH_ALIGN);
	memset(&sc, 0, sizeof(sc));
	scratch_layout(m, C, b->neg, b->n_ent_rows, b->n_rel_rows, base, &sc);
	A = (struct step_args){ .m = m, .b = b, .ent = ent_rows, .rel = rel_rows,
				.eg = ent_grad, .rg = rel_grad, .sc = &sc };
	m->ops->step(&A, &pos_sum, &neg_sum);
	if (m->p.reg_coef > 0)
		reg = regularize(&A);
	if (res) {
		res->pos_loss = pos_sum / b->size;
		res->neg_loss = neg_sum / b->size;
		res->reg = reg;
		res->loss = (res->pos_loss + res->neg_loss) / 2 + reg;
	}
	return 0;
}
