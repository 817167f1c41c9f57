/* SPDX-License-Identifier: MIT */
/*
 * KGE models: DGL-KE's score functions, log-sigmoid loss with chunked
 * negative sampling, and hand-written gradients.
 *
 * Every model is written in "query form": for a positive (h, r, t) whose
 * tail (resp. head) is corrupted, a query vector q = query(h, r) (resp.
 * query(t, r)) is built once, and the positive and all negatives of its chunk
 * are pair scores s(q, e) against entity rows e. Four pair forms cover the
 * models:
 *
 *   DOT  s = q . e                        DistMult, ComplEx, RESCAL
 *   L2   s = gamma - ||q - e||_2          TransE_l2
 *   L1   s = gamma - ||q - e||_1          TransE_l1
 *   ROT  s = gamma - sum_k |q_k - e_k|    RotatE (complex modulus)
 *
 * For DOT and L2 the chunk x N negative scores are one matrix product
 * S = Q E^T (L2 through |q|^2 + |e|^2 - 2 q.e, clamped at 1e-30 before the
 * square root as DGL-KE's batched_l2_dist), and the backward pass is two
 * more products (G E and G^T Q). L1 and ROT are pairwise kernels (ROT keeps
 * its moduli from the forward for the backward: rot_fwd_rows). Positives
 * use the same pair forms, with DGL-KE's plain norm (no clamp). RESCAL's
 * queries and their backward are products per relation (rescal_groups).
 *
 * Speed: the hot functions are compiled twice (x86-64-v3 with AVX2 + FMA,
 * and the baseline) and picked at load time by ifunc (target_clones); the
 * inner loops use 8-float GCC vector types with several independent
 * accumulators, so float reductions vectorise without -ffast-math. The file
 * allows FMA contraction (fp-contract=fast).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "rdps/trainer.h"
#include "kge_internal.h"

#pragma GCC optimize("fp-contract=fast")

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define RDPS_KGE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RDPS_KGE_CLONES
#endif
#define RDPS_AI static inline __attribute__((always_inline))

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef float v8fu __attribute__((vector_size(32), aligned(4), may_alias));
#define LD(p) (*(const v8fu *)(const void *)(p))
#define ST(p, v) (*(v8fu *)(void *)(p) = (v))

enum pair_form {
	FORM_DOT,
	FORM_L2,
	FORM_L1,
	FORM_ROT,
};

struct rdps_model {
	struct rdps_model_params p; /* p.name points to name below */
	enum rdps_model_kind kind;
	enum pair_form form;  /* pair form of the model */
	uint32_t ent_dim;     /* floats per entity row */
	uint32_t rel_dim;     /* floats per relation row */
	float emb_init;       /* (gamma + 2) / hidden_dim */
	float phase_scale;    /* RotatE: pi / emb_init */
	char name[16];        /* canonical name */
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
};

static const char *const canonical_name[] = {
	[RDPS_MODEL_TRANSE_L1] = "TransE_l1", [RDPS_MODEL_TRANSE_L2] = "TransE_l2",
	[RDPS_MODEL_DISTMULT] = "DistMult",   [RDPS_MODEL_COMPLEX] = "ComplEx",
	[RDPS_MODEL_ROTATE] = "RotatE",       [RDPS_MODEL_RESCAL] = "RESCAL",
};

const char *rdps_model_names(void)
{
	return "TransE_l1, TransE_l2 (alias TransE), DistMult, ComplEx, RotatE, RESCAL";
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

int rdps_model_dims(const char *name, uint32_t hidden_dim,
		    uint32_t *entity_dim, uint32_t *relation_dim)
{
	enum rdps_model_kind kind;
	uint64_t ed = hidden_dim, rd = hidden_dim;
	int ret = rdps_model_lookup(name, &kind);

	if (ret)
		return ret;
	if (hidden_dim == 0)
		return -EINVAL;
	switch (kind) {
	case RDPS_MODEL_COMPLEX:
		if (hidden_dim % 2)
			return -EINVAL;
		break;
	case RDPS_MODEL_ROTATE:
		ed = 2 * (uint64_t)hidden_dim;
		break;
	case RDPS_MODEL_RESCAL:
		rd = (uint64_t)hidden_dim * hidden_dim;
		break;
	default:
		break;
	}
	if (ed > UINT32_MAX / 2 || rd > UINT32_MAX / 2)
		return -EINVAL;
	if (entity_dim)
		*entity_dim = (uint32_t)ed;
	if (relation_dim)
		*relation_dim = (uint32_t)rd;
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
}

int rdps_model_create(struct rdps_model **out, const struct rdps_model_params *p)
{
	struct rdps_model *m;
	enum rdps_model_kind kind;
	uint32_t ed, rd;
	int ret;

	if (!out || !p)
		return -EINVAL;
	*out = NULL;
	ret = rdps_model_lookup(p->name, &kind);
	if (ret)
		return ret;
	ret = rdps_model_dims(p->name, p->hidden_dim, &ed, &rd);
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
	m->kind = kind;
	snprintf(m->name, sizeof(m->name), "%s", canonical_name[kind]);
	m->p.name = m->name;
	m->ent_dim = ed;
	m->rel_dim = rd;
	m->emb_init = (p->gamma + 2.0f) / (float)p->hidden_dim;
	m->phase_scale = (float)M_PI / m->emb_init;
	switch (kind) {
	case RDPS_MODEL_TRANSE_L1:
		m->form = FORM_L1;
		break;
	case RDPS_MODEL_TRANSE_L2:
		m->form = FORM_L2;
		break;
	case RDPS_MODEL_ROTATE:
		m->form = FORM_ROT;
		break;
	default:
		m->form = FORM_DOT;
		break;
	}
	*out = m;
	return 0;
}

void rdps_model_destroy(struct rdps_model *m)
{
	free(m);
}

enum rdps_model_kind rdps_model_kind(const struct rdps_model *m)
{
	return m->kind;
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

/* ------------------------------------------------------------------------ */
/* Reference scores (DGL-KE edge_func, in double)                            */
/* ------------------------------------------------------------------------ */

double rdps_model_score(const struct rdps_model *m, const float *h,
			const float *r, const float *t)
{
	uint32_t D = m->p.hidden_dim;
	double s = 0;

	switch (m->kind) {
	case RDPS_MODEL_TRANSE_L1:
		for (uint32_t k = 0; k < D; k++)
			s += fabs((double)h[k] + r[k] - t[k]);
		return m->p.gamma - s;
	case RDPS_MODEL_TRANSE_L2:
		for (uint32_t k = 0; k < D; k++) {
			double d = (double)h[k] + r[k] - t[k];
			s += d * d;
		}
		return m->p.gamma - sqrt(s);
	case RDPS_MODEL_DISTMULT:
		for (uint32_t k = 0; k < D; k++)
			s += (double)h[k] * r[k] * t[k];
		return s;
	case RDPS_MODEL_COMPLEX: {
		uint32_t K = D / 2;
		for (uint32_t k = 0; k < K; k++) {
			double hr = h[k], hi = h[K + k], tr = t[k], ti = t[K + k];
			double rr = r[k], ri = r[K + k];
			s += hr * tr * rr + hi * ti * rr + hr * ti * ri - hi * tr * ri;
		}
		return s;
	}
	case RDPS_MODEL_ROTATE: {
		double scale = M_PI / ((m->p.gamma + 2.0) / D);
		for (uint32_t k = 0; k < D; k++) {
			double ph = r[k] * scale, c = cos(ph), sn = sin(ph);
			double re = h[k] * c - h[D + k] * sn - t[k];
			double im = h[k] * sn + h[D + k] * c - t[D + k];
			s += sqrt(re * re + im * im);
		}
		return m->p.gamma - s;
	}
	case RDPS_MODEL_RESCAL:
		for (uint32_t a = 0; a < D; a++) {
			double mt = 0;
			for (uint32_t c = 0; c < D; c++)
				mt += (double)r[(size_t)a * D + c] * t[c];
			s += h[a] * mt;
		}
		return s;
	}
	return NAN;
}

/* ------------------------------------------------------------------------ */
/* Vector helpers                                                            */
/* ------------------------------------------------------------------------ */

/* Fixed-order horizontal sum: the same for every pair, in every kernel. */
RDPS_AI float hsum8(const v8f *a)
{
	v8f x = *a;
	float s0 = (x[0] + x[4]) + (x[2] + x[6]);
	float s1 = (x[1] + x[5]) + (x[3] + x[7]);
	return s0 + s1;
}

RDPS_AI void vabs(v8f *x)
{
	v8i bits = (v8i)*x & 0x7fffffff;
	*x = (v8f)bits;
}

#if defined(__x86_64__)
/* rsqrtps on 8 lanes in one AVX instruction. Called only when the CPU has
 * AVX (rot_wide()); inlined where the caller is compiled for AVX. */
__attribute__((target("avx"))) static inline void rsqrt_est8(const v8f *x, v8f *y)
{
	*y = __builtin_ia32_rsqrtps256(*x);
}

/* The rsqrtps estimate (12 bits) on each SSE half (SSE is baseline x86-64,
 * so both clones may use it) or, with wide (a constant after inlining), on
 * all 8 lanes at once: the same values. */
RDPS_AI void rsqrt_est(int wide, const v8f *x, v8f *y)
{
	if (wide) {
		rsqrt_est8(x, y);
	} else {
		v4f lo = __builtin_shufflevector(*x, *x, 0, 1, 2, 3);
		v4f hi = __builtin_shufflevector(*x, *x, 4, 5, 6, 7);
		lo = __builtin_ia32_rsqrtps(lo);
		hi = __builtin_ia32_rsqrtps(hi);
		*y = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
	}
}
#endif

/* 1/sqrt(x) for x >= 0: the SSE estimate (rsqrt_est) refined by one Newton
 * step to about 22 bits. x is nudged by 1e-30 so that x == 0 gives a large
 * finite value: then x * rsqrt(x) ~ 1e-15 and d * rsqrt(x) == 0 for d == 0.
 * Other architectures use the bit-level estimate and three Newton steps. */
RDPS_AI void vrsqrt(const v8f *x, v8f *y)
{
	v8f xc = *x + 1e-30f, r;
#if defined(__x86_64__)
	rsqrt_est(0, &xc, &r);
	r = r * (1.5f - (xc * 0.5f) * r * r);
#else
	v8i i = 0x5f3759df - ((v8i)xc >> 1);
	v8f hx = xc * 0.5f;
	r = (v8f)i;
	r = r * (1.5f - hx * r * r);
	r = r * (1.5f - hx * r * r);
	r = r * (1.5f - hx * r * r);
#endif
	*y = r;
}

/* 2 vrsqrt(x), exactly (scaling by 2 commutes with rounding), one
 * multiplication shorter: r (3 - (xc r) r) for r (1.5 - (0.5 xc) r r). */
RDPS_AI void vrsqrt2_w(int wide, const v8f *x, v8f *y)
{
#if defined(__x86_64__)
	v8f xc = *x + 1e-30f, r;
	rsqrt_est(wide, &xc, &r);
	*y = r * (3.0f - (xc * r) * r);
#else
	(void)wide;
	vrsqrt(x, y);
	*y = *y * 2.0f;
#endif
}

/* Scalar counterpart for the tails (bit-level estimate, three Newton
 * steps); used for the same components of every pair. */
RDPS_AI float srsqrt(float x)
{
	union {
		float f;
		int32_t i;
	} u = { .f = x };
	float hx, r;
	u.f = x + 1e-30f;
	hx = 0.5f * u.f;
	u.i = 0x5f3759df - (u.i >> 1);
	r = u.f;
	r = r * (1.5f - hx * r * r);
	r = r * (1.5f - hx * r * r);
	r = r * (1.5f - hx * r * r);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Pair-reduction kernel: out[a][b] = reduce(q_a, e_b) for MR x NR pairs     */
/* ------------------------------------------------------------------------ */

/*
 * Raw reductions (before gamma): DOT sum q*e; L2 sum (q-e)^2; L1 sum |q-e|;
 * ROT sum_k |q_k - e_k| over complex components (n = ent_dim, halves of
 * n/2). mr <= 4, nr <= 2 are compile-time constants after inlining. Each
 * pair has its own accumulator and the same operation sequence.
 */
RDPS_AI void pair_block(enum pair_form form, int mr, int nr,
			const float *const *q, const float *const *e,
			uint32_t n, float out[4][2])
{
	v8f acc[4][2];
	float tail[4][2];

	for (int a = 0; a < mr; a++)
		for (int b = 0; b < nr; b++) {
			acc[a][b] = (v8f){ 0 };
			tail[a][b] = 0;
		}
	if (form == FORM_ROT) {
		uint32_t K = n / 2, K8 = K & ~7u;
		for (uint32_t k = 0; k < K8; k += 8) {
			v8f qr[4], qi[4];
			for (int a = 0; a < mr; a++) {
				qr[a] = LD(q[a] + k);
				qi[a] = LD(q[a] + K + k);
			}
			for (int b = 0; b < nr; b++) {
				v8f er = LD(e[b] + k), ei = LD(e[b] + K + k);
				for (int a = 0; a < mr; a++) {
					v8f dr = qr[a] - er, di = qi[a] - ei, x, y;
					x = dr * dr + di * di;
					vrsqrt(&x, &y);
					acc[a][b] += x * y;
				}
			}
		}
		for (uint32_t k = K8; k < K; k++)
			for (int a = 0; a < mr; a++)
				for (int b = 0; b < nr; b++) {
					float dr = q[a][k] - e[b][k];
					float di = q[a][K + k] - e[b][K + k];
					float x = dr * dr + di * di;
					tail[a][b] += x * srsqrt(x);
				}
	} else {
		uint32_t n8 = n & ~7u;
		for (uint32_t k = 0; k < n8; k += 8) {
			v8f qv[4];
			for (int a = 0; a < mr; a++)
				qv[a] = LD(q[a] + k);
			for (int b = 0; b < nr; b++) {
				v8f ev = LD(e[b] + k);
				for (int a = 0; a < mr; a++) {
					if (form == FORM_DOT) {
						acc[a][b] += qv[a] * ev;
					} else if (form == FORM_L2) {
						v8f d = qv[a] - ev;
						acc[a][b] += d * d;
					} else {
						v8f d = qv[a] - ev;
						vabs(&d);
						acc[a][b] += d;
					}
				}
			}
		}
		for (uint32_t k = n8; k < n; k++)
			for (int a = 0; a < mr; a++)
				for (int b = 0; b < nr; b++) {
					float qq = q[a][k], ee = e[b][k];
					if (form == FORM_DOT)
						tail[a][b] += qq * ee;
					else if (form == FORM_L2)
						tail[a][b] += (qq - ee) * (qq - ee);
					else
						tail[a][b] += fabsf(qq - ee);
				}
	}
	for (int a = 0; a < mr; a++)
		for (int b = 0; b < nr; b++)
			out[a][b] = hsum8(&acc[a][b]) + tail[a][b];
}

/* S[a * lds + b] = raw reduce(q_a, e_b) for a < nq, b < ne, in blocks of
 * mr x 2 (mr = 4, or 2 for ROT whose pairs need twice the registers). */
RDPS_AI void pair_matrix(enum pair_form form, const float *const *qp, uint32_t nq,
			 const float *const *ep, uint32_t ne, uint32_t n,
			 float *S, uint32_t lds)
{
	const int mr = form == FORM_ROT ? 2 : 4;
	float o[4][2];
	uint32_t a = 0;

	for (; a + mr <= nq; a += mr) {
		uint32_t b = 0;
		for (; b + 2 <= ne; b += 2) {
			pair_block(form, mr, 2, qp + a, ep + b, n, o);
			for (int x = 0; x < mr; x++) {
				S[(size_t)(a + x) * lds + b] = o[x][0];
				S[(size_t)(a + x) * lds + b + 1] = o[x][1];
			}
		}
		for (; b < ne; b++) {
			pair_block(form, mr, 1, qp + a, ep + b, n, o);
			for (int x = 0; x < mr; x++)
				S[(size_t)(a + x) * lds + b] = o[x][0];
		}
	}
	for (; a < nq; a++) {
		uint32_t b = 0;
		for (; b + 2 <= ne; b += 2) {
			pair_block(form, 1, 2, qp + a, ep + b, n, o);
			S[(size_t)a * lds + b] = o[0][0];
			S[(size_t)a * lds + b + 1] = o[0][1];
		}
		for (; b < ne; b++) {
			pair_block(form, 1, 1, qp + a, ep + b, n, o);
			S[(size_t)a * lds + b] = o[0][0];
		}
	}
}

/* Final score from a raw reduction. */
RDPS_AI float finish_score(enum pair_form form, float gamma, float raw)
{
	switch (form) {
	case FORM_DOT:
		return raw;
	case FORM_L2:
		return gamma - sqrtf(raw);
	default:
		return gamma - raw;
	}
}

/* ------------------------------------------------------------------------ */
/* Evaluation tile (internal API)                                            */
/* ------------------------------------------------------------------------ */

#define TILE_PTRS 64

RDPS_KGE_CLONES
static void score_tile_impl(enum pair_form form, float gamma, uint32_t n,
			    const float *q, uint32_t nq, const float *c,
			    uint32_t nc, float *out)
{
	const float *qp[TILE_PTRS], *cp[TILE_PTRS];

	for (uint32_t a0 = 0; a0 < nq; a0 += TILE_PTRS) {
		uint32_t na = nq - a0 < TILE_PTRS ? nq - a0 : TILE_PTRS;
		for (uint32_t a = 0; a < na; a++)
			qp[a] = q + (size_t)(a0 + a) * n;
		for (uint32_t b0 = 0; b0 < nc; b0 += TILE_PTRS) {
			uint32_t nb = nc - b0 < TILE_PTRS ? nc - b0 : TILE_PTRS;
			float *o = out + (size_t)a0 * nc + b0;
			for (uint32_t b = 0; b < nb; b++)
				cp[b] = c + (size_t)(b0 + b) * n;
			switch (form) {
			case FORM_DOT:
				pair_matrix(FORM_DOT, qp, na, cp, nb, n, o, nc);
				break;
			case FORM_L2:
				pair_matrix(FORM_L2, qp, na, cp, nb, n, o, nc);
				break;
			case FORM_L1:
				pair_matrix(FORM_L1, qp, na, cp, nb, n, o, nc);
				break;
			case FORM_ROT:
				pair_matrix(FORM_ROT, qp, na, cp, nb, n, o, nc);
				break;
			}
			for (uint32_t a = 0; a < na; a++)
				for (uint32_t b = 0; b < nb; b++)
					o[(size_t)a * nc + b] = finish_score(
						form, gamma, o[(size_t)a * nc + b]);
		}
	}
}

void rdps_kge_score_tile(const struct rdps_model *m, const float *q,
			 uint32_t nq, const float *c, uint32_t nc, float *out)
{
	score_tile_impl(m->form, m->p.gamma, m->ent_dim, q, nq, c, nc, out);
}

/* ------------------------------------------------------------------------ */
/* Query construction and its backward pass                                  */
/* ------------------------------------------------------------------------ */

/* cs: RotatE cos (first D) and sin (next D) of the relation's phases. */
static void rotate_cs(const struct rdps_model *m, const float *r, float *cs)
{
	uint32_t D = m->rel_dim;
	for (uint32_t k = 0; k < D; k++) {
		float ph = r[k] * m->phase_scale;
		cs[k] = cosf(ph);
		cs[D + k] = sinf(ph);
	}
}

/* q from x (head on the tail side, tail on the head side) and r. */
RDPS_AI void build_query(const struct rdps_model *m, int head_side,
			 const float *restrict x, const float *restrict r,
			 const float *restrict cs, float *restrict q)
{
	uint32_t n = m->ent_dim;

	switch (m->kind) {
	case RDPS_MODEL_TRANSE_L1:
	case RDPS_MODEL_TRANSE_L2:
		if (head_side)
			for (uint32_t k = 0; k < n; k++)
				q[k] = x[k] - r[k];
		else
			for (uint32_t k = 0; k < n; k++)
				q[k] = x[k] + r[k];
		break;
	case RDPS_MODEL_DISTMULT:
		for (uint32_t k = 0; k < n; k++)
			q[k] = x[k] * r[k];
		break;
	case RDPS_MODEL_COMPLEX: {
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
		break;
	}
	case RDPS_MODEL_ROTATE: {
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
		break;
	}
	case RDPS_MODEL_RESCAL:
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
		break;
	}
}

size_t rdps_kge_query_tmp(const struct rdps_model *m)
{
	return m->kind == RDPS_MODEL_ROTATE ? 2 * (size_t)m->rel_dim : 0;
}

void rdps_kge_query(const struct rdps_model *m, int head_side, const float *x,
		    const float *r, float *q, float *tmp)
{
	if (m->kind == RDPS_MODEL_ROTATE)
		rotate_cs(m, r, tmp);
	build_query(m, head_side, x, r, m->kind == RDPS_MODEL_ROTATE ? tmp : NULL, q);
}

/* Adds dL/dx and dL/dr given gq = dL/dq. */
RDPS_AI void query_backward(const struct rdps_model *m, int head_side,
			    const float *restrict x, const float *restrict r,
			    const float *restrict cs, const float *restrict q,
			    const float *restrict gq, float *restrict gx,
			    float *restrict gr)
{
	uint32_t n = m->ent_dim;

	switch (m->kind) {
	case RDPS_MODEL_TRANSE_L1:
	case RDPS_MODEL_TRANSE_L2:
		for (uint32_t k = 0; k < n; k++)
			gx[k] += gq[k];
		if (head_side)
			for (uint32_t k = 0; k < n; k++)
				gr[k] -= gq[k];
		else
			for (uint32_t k = 0; k < n; k++)
				gr[k] += gq[k];
		break;
	case RDPS_MODEL_DISTMULT:
		for (uint32_t k = 0; k < n; k++) {
			gx[k] += gq[k] * r[k];
			gr[k] += gq[k] * x[k];
		}
		break;
	case RDPS_MODEL_COMPLEX: {
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
		break;
	}
	case RDPS_MODEL_ROTATE: {
		uint32_t K = n / 2;
		const float *c = cs, *s = cs + K, *gqr = gq, *gqi = gq + K;
		float ps = m->phase_scale;
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
		break;
	}
	case RDPS_MODEL_RESCAL:
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
		break;
	}
}

/* ------------------------------------------------------------------------ */
/* Backward kernels for the negatives                                        */
/* ------------------------------------------------------------------------ */

/* Y[a] += alpha[a] * X[a] + sum_b W[a * ldw + b] * Z[b], for a < na rows,
 * each row n floats. X, Y and Z are row pointer arrays; Y rows are updated
 * one after another, so rows that repeat (a negative drawn twice) are
 * summed correctly. alpha may be NULL. */
RDPS_AI void gemm_acc_rows(int mr, const float *const *X, const float *alpha,
			   float *const *Y, const float *W, uint32_t ldw,
			   uint32_t wstride_b, const float *const *Z, uint32_t nb,
			   uint32_t n)
{
	uint32_t n16 = n & ~15u, n8 = n & ~7u;
	uint32_t k = 0;

	for (; k < n16; k += 16) {
		v8f acc[4][2];
		for (int a = 0; a < mr; a++)
			acc[a][0] = acc[a][1] = (v8f){ 0 };
		for (uint32_t b = 0; b < nb; b++) {
			v8f z0 = LD(Z[b] + k), z1 = LD(Z[b] + k + 8);
			const float *w = W + (size_t)b * wstride_b;
			for (int a = 0; a < mr; a++) {
				float wa = w[(size_t)a * ldw];
				acc[a][0] += wa * z0;
				acc[a][1] += wa * z1;
			}
		}
		for (int a = 0; a < mr; a++) {
			v8f y0 = LD(Y[a] + k) + acc[a][0];
			v8f y1 = LD(Y[a] + k + 8) + acc[a][1];
			if (alpha) {
				y0 += alpha[a] * LD(X[a] + k);
				y1 += alpha[a] * LD(X[a] + k + 8);
			}
			ST(Y[a] + k, y0);
			ST(Y[a] + k + 8, y1);
		}
	}
	for (; k < n8; k += 8) {
		v8f acc[4];
		for (int a = 0; a < mr; a++)
			acc[a] = (v8f){ 0 };
		for (uint32_t b = 0; b < nb; b++) {
			v8f z0 = LD(Z[b] + k);
			const float *w = W + (size_t)b * wstride_b;
			for (int a = 0; a < mr; a++)
				acc[a] += w[(size_t)a * ldw] * z0;
		}
		for (int a = 0; a < mr; a++) {
			v8f y0 = LD(Y[a] + k) + acc[a];
			if (alpha)
				y0 += alpha[a] * LD(X[a] + k);
			ST(Y[a] + k, y0);
		}
	}
	for (; k < n; k++) {
		for (int a = 0; a < mr; a++) {
			float s = 0;
			for (uint32_t b = 0; b < nb; b++)
				s += W[(size_t)b * wstride_b + (size_t)a * ldw] * Z[b][k];
			if (alpha)
				s += alpha[a] * X[a][k];
			Y[a][k] += s;
		}
	}
}

/* For all rows: blocks of 4 then singles. W row a at W + a * ldw. */
RDPS_AI void gemm_acc(const float *const *X, const float *alpha, float *const *Y,
		      uint32_t na, const float *W, uint32_t ldw, uint32_t wstride_b,
		      const float *const *Z, uint32_t nb, uint32_t n)
{
	uint32_t a = 0;
	for (; a + 4 <= na; a += 4)
		gemm_acc_rows(4, X + a, alpha ? alpha + a : NULL, Y + a,
			      W + (size_t)a * ldw, ldw, wstride_b, Z, nb, n);
	for (; a < na; a++)
		gemm_acc_rows(1, X + a, alpha ? alpha + a : NULL, Y + a,
			      W + (size_t)a * ldw, ldw, wstride_b, Z, nb, n);
}

/*
 * RESCAL's products with a relation matrix M (n rows of n floats) for a
 * group of g positives, all rows given by pointers. Each reads M (or its
 * gradient) once, in the order the hardware prefetcher follows or with
 * software prefetches of the next block of rows, since with many relations
 * M comes from L3 or memory.
 */

/* Y_i[k..k+15] += sum_x W_i[a0 + x] M[a0 + x][k..k+15], x < mr, i < g. */
RDPS_AI void axpy_strip(int mr, float *const *Y, const float *const *W,
			uint32_t g, const float *const *M, uint32_t a0, uint32_t k)
{
	v8f m0[4], m1[4];

	for (int x = 0; x < mr; x++) {
		m0[x] = LD(M[a0 + x] + k);
		m1[x] = LD(M[a0 + x] + k + 8);
	}
	for (uint32_t i = 0; i < g; i++) {
		const float *w = W[i] + a0;
		v8f y0 = LD(Y[i] + k), y1 = LD(Y[i] + k + 8);
		for (int x = 0; x < mr; x++) {
			y0 += w[x] * m0[x];
			y1 += w[x] * m1[x];
		}
		ST(Y[i] + k, y0);
		ST(Y[i] + k + 8, y1);
	}
}

/* Y_i += sum_a W_i[a] M[a] for i < g. By strips of 16 columns, so that the
 * g strips of Y stay in L1 while the strips of M's rows stream by, 4 rows in
 * registers at a time; each Y_i[k] takes the terms in the order of a. */
RDPS_AI void rows_axpy(float *const *Y, const float *const *W, uint32_t g,
		       const float *const *M, uint32_t n)
{
	uint32_t n16 = n & ~15u, k;

	for (k = 0; k < n16; k += 16) {
		uint32_t a = 0;
		for (; a + 4 <= n; a += 4)
			axpy_strip(4, Y, W, g, M, a, k);
		for (; a < n; a++)
			axpy_strip(1, Y, W, g, M, a, k);
	}
	for (; k < n; k++)
		for (uint32_t i = 0; i < g; i++) {
			float y = Y[i][k];
			for (uint32_t a = 0; a < n; a++)
				y += W[i][a] * M[a][k];
			Y[i][k] = y;
		}
}

/* Y_i[a] += M[a] . V_i for a < n, i < g: pair_block on 4 rows of M and 2
 * V_i at a time; the next 4 rows of M are prefetched along the way. */
RDPS_AI void dot_rows_acc(float *const *Y, const float *const *M,
			  const float *const *V, uint32_t g, uint32_t n)
{
	uint32_t lines = (n + 15) / 16, npf = (4 * lines + g / 2) / (g / 2 + 1) + 1;
	float o[4][2];

	for (uint32_t a0 = 0; a0 < n; a0 += 4) {
		uint32_t i = 0, pl = 0, pn = a0 + 8 <= n ? 4 * lines : 0;
		if (a0 + 4 > n) {
			for (; a0 < n; a0++)
				for (i = 0; i < g; i++) {
					pair_block(FORM_DOT, 1, 1, M + a0, V + i, n, o);
					Y[i][a0] += o[0][0];
				}
			break;
		}
		for (; i + 2 <= g; i += 2) {
			for (uint32_t c = 0; c < npf && pl < pn; c++, pl++)
				__builtin_prefetch(M[a0 + 4 + pl / lines] + (pl % lines) * 16);
			pair_block(FORM_DOT, 4, 2, M + a0, V + i, n, o);
			for (int x = 0; x < 4; x++) {
				Y[i][a0 + x] += o[x][0];
				Y[i + 1][a0 + x] += o[x][1];
			}
		}
		if (i < g) {
			pair_block(FORM_DOT, 4, 1, M + a0, V + i, n, o);
			for (int x = 0; x < 4; x++)
				Y[i][a0 + x] += o[x][0];
		}
	}
}

/* Y[x] += sum_i U_i[a0 + x] V_i for x < mr (as gemm_acc_rows: each Y row
 * once per strip, the g terms summed in registers in the order of i), with
 * the next 4 rows of Y prefetched for writing. */
RDPS_AI void outer_rows_block(int mr, float *const *Y, const float *const *U,
			      uint32_t a0, const float *const *V, uint32_t g,
			      uint32_t n, float *const *Ynext)
{
	uint32_t n16 = n & ~15u, k = 0;

	for (; k < n16; k += 16) {
		v8f acc[4][2];
		if (Ynext)
			for (int x = 0; x < 4; x++)
				__builtin_prefetch(Ynext[x] + k, 1);
		for (int x = 0; x < mr; x++)
			acc[x][0] = acc[x][1] = (v8f){ 0 };
		for (uint32_t i = 0; i < g; i++) {
			v8f v0 = LD(V[i] + k), v1 = LD(V[i] + k + 8);
			for (int x = 0; x < mr; x++) {
				float u = U[i][a0 + x];
				acc[x][0] += u * v0;
				acc[x][1] += u * v1;
			}
		}
		for (int x = 0; x < mr; x++) {
			ST(Y[x] + k, LD(Y[x] + k) + acc[x][0]);
			ST(Y[x] + k + 8, LD(Y[x] + k + 8) + acc[x][1]);
		}
	}
	for (; k < n; k++)
		for (int x = 0; x < mr; x++) {
			float acc = 0;
			for (uint32_t i = 0; i < g; i++)
				acc += U[i][a0 + x] * V[i][k];
			Y[x][k] += acc;
		}
}

/* Y[a] += sum_i U_i[a] V_i for a < n: the relation gradient's update. */
RDPS_AI void outer_rows_acc(float *const *Y, const float *const *U,
			    const float *const *V, uint32_t g, uint32_t n)
{
	uint32_t a = 0;
	for (; a + 4 <= n; a += 4)
		outer_rows_block(4, Y + a, U, a, V, g, n,
				 a + 8 <= n ? Y + a + 4 : NULL);
	for (; a < n; a++)
		outer_rows_block(1, Y + a, U, a, V, g, n, NULL);
}

/*
 * Pairwise backward for L1: for each query a and negative b with
 * coefficient g = G[a * ldg + b] = dL/ds_ab,
 *   GQ[a] += g * ds/dq,  grad[e_b] += g * ds/de = -g * ds/dq,
 * ds/dq = -sign(q - e). Queries are processed four at a time so each
 * negative's gradient row is read and written once per four queries.
 * (ROT: rot_bwd_rows, with the moduli from the forward.)
 */
RDPS_AI void l1_backward_rows(int mr, const float *const *Q, float *const *GQ,
			      const float *G, uint32_t ldg, const float *const *E,
			      float *const *GE, uint32_t nb, uint32_t n)
{
	uint32_t n8 = n & ~7u, k;
	for (k = 0; k < n8; k += 8) {
		v8f q[4], gq[4];
		for (int a = 0; a < mr; a++) {
			q[a] = LD(Q[a] + k);
			gq[a] = (v8f){ 0 };
		}
		for (uint32_t b = 0; b < nb; b++) {
			v8f e = LD(E[b] + k), ge = (v8f){ 0 };
			for (int a = 0; a < mr; a++) {
				float g = G[(size_t)a * ldg + b];
				v8f d = q[a] - e;
				v8i pos = d > 0.0f, neg = d < 0.0f;
				/* t = g * sign(d) */
				v8f gv = g + (v8f){ 0 }, ngv = -gv;
				v8f t = (v8f)(((v8i)gv & pos) | ((v8i)ngv & neg));
				gq[a] -= t;
				ge += t;
			}
			ST(GE[b] + k, LD(GE[b] + k) + ge);
		}
		for (int a = 0; a < mr; a++)
			ST(GQ[a] + k, LD(GQ[a] + k) + gq[a]);
	}
	for (; k < n; k++)
		for (int a = 0; a < mr; a++)
			for (uint32_t b = 0; b < nb; b++) {
				float g = G[(size_t)a * ldg + b];
				float d = Q[a][k] - E[b][k];
				float t = d > 0 ? g : (d < 0 ? -g : 0.0f);
				GQ[a][k] -= t;
				GE[b][k] += t;
			}
}

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

/* ------------------------------------------------------------------------ */
/* Loss                                                                      */
/* ------------------------------------------------------------------------ */

/* log(sigmoid(x)) and sigmoid(-x) = 1 - sigmoid(x), stable for any x
 * (positive scores: B per batch, libm is fine). */
RDPS_AI void logsig(float x, float *ls, float *sgm)
{
	float e = expf(-fabsf(x));
	float l = log1pf(e);
	*ls = (x < 0 ? x : 0.0f) - l;
	*sgm = x >= 0 ? e / (1.0f + e) : 1.0f / (1.0f + e);
}

/* out = mask ? a : b, lane-wise (mask from a vector comparison). */
#define VSELECT(mask, a, b, out)                                              \
	do {                                                                  \
		v8i m_ = (mask);                                              \
		*(out) = (v8f)(((v8i) * (a) & m_) | ((v8i) * (b) & ~m_));    \
	} while (0)

/* exp(x) for x <= 0 (clamped at -87, where it returns ~1e-38): Cephes'
 * range reduction and degree-6 polynomial, about 1 ulp. */
RDPS_AI void vexp_neg(const v8f *x, v8f *y)
{
	v8f lo = { -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f };
	v8f xc, fx, tf, one = lo * 0.0f + 1.0f, zero = lo * 0.0f, adj, r, p;
	v8i ti;

	VSELECT(*x < lo, &lo, x, &xc);
	fx = xc * 1.44269504088896341f + 0.5f;
	ti = __builtin_convertvector(fx, v8i);
	tf = __builtin_convertvector(ti, v8f);
	VSELECT(tf > fx, &one, &zero, &adj); /* floor for negatives */
	tf -= adj;
	ti = __builtin_convertvector(tf, v8i);
	r = xc - tf * 0.693359375f + tf * 2.12194440e-4f;
	p = 1.9875691500e-4f * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	*y = p * (v8f)((ti + 127) << 23);
}

/* log(1 + e) for 0 <= e <= 1 as 2 atanh(z), z = e / (2 + e) <= 1/3: the odd
 * series to z^17 (relative error < 1e-9 before rounding). */
RDPS_AI void vlog1p_unit(const v8f *e, v8f *y)
{
	v8f z = *e / (2.0f + *e), z2 = z * z, p;

	p = z2 * (1.0f / 17) + 1.0f / 15;
	p = p * z2 + 1.0f / 13;
	p = p * z2 + 1.0f / 11;
	p = p * z2 + 1.0f / 9;
	p = p * z2 + 1.0f / 7;
	p = p * z2 + 1.0f / 5;
	p = p * z2 + 1.0f / 3;
	p = p * z2 + 1.0f;
	*y = 2.0f * z * p;
}

/* For 8 negative scores s with weights w: adds w * -logsigmoid(-s) to
 * *loss and sets *g = k * w * sigmoid(s) (= dL/ds). */
RDPS_AI void neg_loss_block(const v8f *s, const v8f *w, float k, v8f *loss,
			    v8f *g)
{
	v8f a = *s, na, e, l, ls, num, zero = *s * 0.0f;
	vabs(&a);
	na = -a;
	vexp_neg(&na, &e);
	vlog1p_unit(&e, &l);
	/* logsigmoid(-s) = min(-s, 0) - log(1 + e^-|s|) */
	ls = -*s;
	VSELECT(ls < zero, &ls, &zero, &ls);
	ls -= l;
	*loss -= *w * ls;
	/* sigmoid(s) = 1/(1+e) for s >= 0, e/(1+e) below */
	num = zero + 1.0f;
	VSELECT(*s >= zero, &num, &e, &num);
	*g = k * *w * num / (1.0f + e);
}

/*
 * Replaces the N scores s of one positive by dL/ds and returns its
 * negative-loss term sum_j w_j * -logsigmoid(-s_j); k = 1 / (2B). wbuf has N
 * floats (the -adv weights). Lanes past N are computed on zero padding with
 * weight 0 and discarded.
 */
RDPS_AI float neg_row_loss(const struct rdps_model *m, float *s, float *wbuf,
			   uint32_t N, float k)
{
	uint32_t N8 = N & ~7u, rem = N - N8, j;
	v8f loss = { 0 }, g, w;
	float sb[8], wb[8];

	if (m->p.adv) {
		float temp = m->p.adv_temp, mx = -INFINITY, inv;
		v8f zs = { 0 }, z, vm = zs - INFINITY;
		/* max of s * temp in 8 lanes (a scalar running max can end up
		 * in memory, a store-to-load chain): the same maximum, up to
		 * the sign of a zero, which does not change s * temp - mx */
		for (j = 0; j < N8; j += 8) {
			v8f x = LD(s + j) * temp;
			VSELECT(x > vm, &x, &vm, &vm);
		}
		for (int l = 0; l < 8; l++)
			mx = vm[l] > mx ? vm[l] : mx;
		for (; j < N; j++)
			mx = s[j] * temp > mx ? s[j] * temp : mx;
		for (j = 0; j < N8; j += 8) {
			v8f x = LD(s + j) * temp - mx;
			vexp_neg(&x, &z);
			ST(wbuf + j, z);
			zs += z;
		}
		if (rem) {
			v8f x;
			memset(sb, 0, sizeof(sb));
			memcpy(sb, s + N8, rem * sizeof(float));
			x = LD(sb) * temp - mx;
			vexp_neg(&x, &z);
			for (uint32_t l = rem; l < 8; l++)
				z[l] = 0;
			memcpy(wbuf + N8, &z, rem * sizeof(float));
			zs += z;
		}
		inv = 1.0f / hsum8(&zs);
		for (j = 0; j < N8; j += 8) {
			v8f x = LD(s + j);
			w = LD(wbuf + j) * inv;
			neg_loss_block(&x, &w, k, &loss, &g);
			ST(s + j, g);
		}
		if (rem) {
			memset(wb, 0, sizeof(wb));
			for (uint32_t l = 0; l < rem; l++)
				wb[l] = wbuf[N8 + l] * inv;
		}
	} else {
		float wv = 1.0f / (float)N;
		w = (v8f){ 0 } + wv;
		for (j = 0; j < N8; j += 8) {
			v8f x = LD(s + j);
			neg_loss_block(&x, &w, k, &loss, &g);
			ST(s + j, g);
		}
		if (rem) {
			memset(wb, 0, sizeof(wb));
			for (uint32_t l = 0; l < rem; l++)
				wb[l] = wv;
		}
	}
	if (rem) {
		v8f x;
		memset(sb, 0, sizeof(sb));
		memcpy(sb, s + N8, rem * sizeof(float));
		x = LD(sb);
		w = LD(wb);
		neg_loss_block(&x, &w, k, &loss, &g);
		memcpy(s + N8, &g, rem * sizeof(float));
	}
	return hsum8(&loss);
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

/* ------------------------------------------------------------------------ */
/* The step                                                                  */
/* ------------------------------------------------------------------------ */

#define SCRATCH_ALIGN 64

struct step_scratch {
	float *Q;           /* chunk (RESCAL: R) x ent_dim: query vectors */
	float *GQ;          /* chunk (RESCAL: R) x ent_dim: dL/dq */
	float *S;           /* chunk x N: scores, then dL/ds, then weights */
	float *DIST;        /* chunk x N (L2): distances, 0 where clamped */
	float *rowc;        /* chunk: L2 row coefficients */
	float *colc;        /* N: L2 column coefficients */
	float *qn;          /* chunk: |q|^2 */
	float *en;          /* N: |e|^2 */
	float *wbuf;        /* N: -adv weights of one row */
	float *pos;         /* chunk: positive scores, then dL/dp */
	float *cs;          /* n_rel_rows x 2 rel_dim (RotatE): cos, sin */
	float *Y;           /* 4 x N x K (RotatE): 2 / moduli, see rot_fwd_rows */
	const float **qp;   /* chunk: row pointers into Q */
	float **gqp;        /* chunk: row pointers into GQ */
	const float **ep;   /* N: negative rows */
	float **gep;        /* N: negative gradient rows */
	const float **xp;   /* chunk: positive rows (true entity) */
	float **gxp;        /* chunk: their gradient rows */
	/* RESCAL (see rescal_rows_max): R rows of Q and GQ, for the positives
	 * of several chunks in relation order */
	const float **qx;   /* R: query input rows (x of build_query) */
	float **gqx;        /* R: their gradient rows */
	float **qrow;       /* R: rows of Q */
	float **gqrow;      /* R: rows of GQ */
	uint32_t *ord;      /* R: positive (from the first) of each row */
	uint32_t *rowof;    /* R: row of each positive */
	uint64_t *rkey;     /* R: sort keys */
	const float **mrow; /* ent_dim: rows of a relation matrix */
	float **gmrow;      /* ent_dim: rows of its gradient */
	uint32_t *ent_w;    /* n_ent_rows: regularization multiplicity */
	uint32_t *rel_w;    /* n_rel_rows */
};

/*
 * RESCAL processes the positives of several whole chunks together (see
 * rescal_groups): at most max(C, T) of them, T = 2 MiB of query rows (at
 * most 4096), so that a batch of 1024 at hidden_dim 400 is one group of
 * chunks. Grows with C, as rdps_model_scratch_size() promises.
 */
static size_t rescal_rows_max(uint32_t C, uint32_t n)
{
	size_t T = ((size_t)1 << 19) / n;
	T = T < 1 ? 1 : T > 4096 ? 4096 : T;
	return C > T ? C : T;
}

/* Lays out (or, with base == NULL, measures) the scratch. */
static size_t scratch_layout(const struct rdps_model *m, uint32_t C, uint32_t N,
			     uint32_t n_ent, uint32_t n_rel, char *base,
			     struct step_scratch *sc)
{
	size_t off = 0, n = m->ent_dim;
	bool l2 = m->form == FORM_L2, reg = m->p.reg_coef > 0;
	bool rescal = m->kind == RDPS_MODEL_RESCAL;
#define CARVE(field, type, count)                                             \
	do {                                                                  \
		if (base)                                                     \
			sc->field = (type *)(void *)(base + off);             \
		off += RDPS_ALIGN_UP((size_t)(count) * sizeof(type), SCRATCH_ALIGN); \
	} while (0)
	size_t R = rescal ? rescal_rows_max(C, m->ent_dim) : C;
	CARVE(Q, float, R * n);
	CARVE(GQ, float, R * n);
	CARVE(S, float, (size_t)C * N);
	CARVE(DIST, float, l2 ? (size_t)C * N : 0);
	CARVE(rowc, float, C);
	CARVE(colc, float, N);
	CARVE(qn, float, C);
	CARVE(en, float, N);
	CARVE(wbuf, float, N);
	CARVE(pos, float, C);
	CARVE(cs, float, m->kind == RDPS_MODEL_ROTATE ? (size_t)n_rel * 2 * m->rel_dim : 0);
	CARVE(Y, float, m->form == FORM_ROT ? (size_t)4 * N * RDPS_ALIGN_UP(n / 2, 8) : 0);
	CARVE(qp, const float *, C);
	CARVE(gqp, float *, C);
	CARVE(ep, const float *, N);
	CARVE(gep, float *, N);
	CARVE(xp, const float *, C);
	CARVE(gxp, float *, C);
	CARVE(qx, const float *, rescal ? R : 0);
	CARVE(gqx, float *, rescal ? R : 0);
	CARVE(qrow, float *, rescal ? R : 0);
	CARVE(gqrow, float *, rescal ? R : 0);
	CARVE(ord, uint32_t, rescal ? R : 0);
	CARVE(rowof, uint32_t, rescal ? R : 0);
	CARVE(rkey, uint64_t, rescal ? R : 0);
	CARVE(mrow, const float *, rescal ? n : 0);
	CARVE(gmrow, float *, rescal ? n : 0);
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

struct step_args {
	const struct rdps_model *m;
	const struct rdps_batch *b;
	const float *ent;
	const float *rel;
	float *eg;
	float *rg;
	struct step_scratch *sc;
	int rot_wide; /* RotatE forward: AVX rsqrt estimate (see rot_wide()) */
	uint32_t s0;  /* RESCAL: first positive of the rows in Q, GQ */
};

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

/*
 * RESCAL: the positives of several whole chunks (S from s0) take rows of Q
 * and GQ in relation order, so that each relation's positives are a group of
 * consecutive rows. Per group, the query build and its backward are matrix
 * products that read the relation matrix M (n x n) once, in blocks of rows,
 * instead of once per positive, and M's gradient takes one blocked update
 * per group instead of a rank-1 update per positive. The chunks' negatives
 * run in between (step_chunk). Ties in relation are kept in batch order:
 * deterministic.
 */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Groups smaller than this take the per-positive loops (build_query,
 * query_backward): with many relations (M in memory, a few positives each)
 * their row-by-row streams of M and its gradient are served faster than
 * the blocked kernels' passes (measured: 12% at 200 and 600 relations). */
#define RESCAL_G0 4

/* Queries (backward == 0) or their backward pass (1) of every group. This,
 * rescal_begin and rot_negatives are not inlined into step_impl: inlined,
 * they changed its register allocation and slowed the other models. */
RDPS_KGE_CLONES
static void rescal_groups(const struct step_args *A, uint32_t S, int hs,
			   int backward)
{
	const struct rdps_model *m = A->m;
	const uint32_t *rel = A->b->rel + A->s0;
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
					build_query(m, hs, x[i], M, NULL, sc->qrow[j0 + i]);
				else
					query_backward(m, hs, x[i], M, NULL, sc->qrow[j0 + i],
						       gq[i], gx[i], GM);
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
				dot_rows_acc(q, sc->mrow, x, g, n);
			else
				/* q = M^T h: q_i = sum_a h_i[a] M[a] */
				rows_axpy(q, x, g, sc->mrow, n);
		} else if (hs) {
			/* gt_i += sum_a gq_i[a] M[a]; gM[a] += sum_i gq_i[a] t_i */
			rows_axpy(gx, gq, g, sc->mrow, n);
			outer_rows_acc(sc->gmrow, gq, x, g, n);
		} else {
			/* gh_i[a] += M[a] . gq_i; gM[a] += sum_i h_i[a] gq_i */
			dot_rows_acc(gx, sc->mrow, gq, g, n);
			outer_rows_acc(sc->gmrow, x, gq, g, n);
		}
	}
}

/* Rows of the S positives from A->s0 in relation order, their queries. */
RDPS_KGE_CLONES
static void rescal_begin(const struct step_args *A, uint32_t S)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t n = A->m->ent_dim, s0 = A->s0;
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
	rescal_groups(A, S, hs, 0);
}

/* One chunk: positives i0 .. i0 + C - 1 against negatives neg. */
RDPS_AI void step_chunk(enum pair_form form, const struct step_args *A,
			uint32_t i0, uint32_t C, const uint32_t *neg,
			double *pos_sum, double *neg_sum)
{
	const struct rdps_model *m = A->m;
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t n = m->ent_dim, N = b->neg, rd = m->rel_dim;
	int hs = b->neg_head != 0;
	float gamma = m->p.gamma, k = 0.5f / (float)b->size;

	/* queries (RESCAL: built by rescal_begin), positive rows */
	bool rescal = m->kind == RDPS_MODEL_RESCAL;
	for (uint32_t i = 0; i < C; i++) {
		uint32_t h = b->head[i0 + i], r = b->rel[i0 + i], t = b->tail[i0 + i];
		uint32_t x = hs ? t : h, y = hs ? h : t;
		size_t row = rescal ? sc->rowof[i0 + i - A->s0] : i;
		float *q = sc->Q + row * n;
		if (!rescal)
			build_query(m, hs, A->ent + (size_t)x * n,
				    A->rel + (size_t)r * rd,
				    sc->cs ? sc->cs + (size_t)r * 2 * rd : NULL, q);
		sc->qp[i] = q;
		sc->gqp[i] = sc->GQ + row * n;
		sc->xp[i] = A->ent + (size_t)y * n;
		sc->gxp[i] = A->eg + (size_t)y * n;
	}
	if (!rescal)
		memset(sc->GQ, 0, (size_t)C * n * sizeof(float));
	for (uint32_t j = 0; j < N; j++) {
		sc->ep[j] = A->ent + (size_t)neg[j] * n;
		sc->gep[j] = A->eg + (size_t)neg[j] * n;
	}

	/* positives: p = s(q, y); dL/dp = -k * sigmoid(-p) */
	for (uint32_t i = 0; i < C; i++) {
		float o[4][2], p, ls, sg;
		pair_block(form, 1, 1, sc->qp + i, sc->xp + i, n, o);
		p = finish_score(form, gamma, o[0][0]);
		logsig(p, &ls, &sg);
		*pos_sum -= ls;
		sc->pos[i] = -k * sg;
		if (form == FORM_L2) {
			/* ds/dq = -(q - y) / d; DGL-KE's norm: zero at d == 0 */
			float d = sqrtf(o[0][0]);
			sc->rowc[i] = d > 0 ? -sc->pos[i] / d : 0.0f;
		}
	}
	if (form == FORM_L2 || form == FORM_DOT) {
		/* GQ_i += c_i (q_i - y_i) (L2) or g_i y_i (DOT); grad y likewise */
		for (uint32_t i = 0; i < C; i++) {
			const float *q = sc->qp[i], *y = sc->xp[i];
			float *gq = sc->gqp[i], *gy = sc->gxp[i];
			if (form == FORM_L2) {
				float c = sc->rowc[i];
				for (uint32_t x = 0; x < n; x++) {
					float d = c * (q[x] - y[x]);
					gq[x] += d;
					gy[x] -= d;
				}
			} else {
				float g = sc->pos[i];
				for (uint32_t x = 0; x < n; x++) {
					gq[x] += g * y[x];
					gy[x] += g * q[x];
				}
			}
		}
	} else if (form == FORM_L1) {
		for (uint32_t i = 0; i < C; i++)
			l1_backward_rows(1, sc->qp + i, sc->gqp + i, sc->pos + i, 1,
					 sc->xp + i, sc->gxp + i, 1, n);
	} else {
		/* ROT: one (query, positive) pair at a time through the
		 * negatives' backward, its moduli in Y (free until then) */
		for (uint32_t i = 0; i < C; i++) {
			rot_moduli(sc->qp[i], sc->xp[i], n, sc->Y);
			rot_bwd_rows(1, sc->qp + i, sc->gqp + i, sc->pos + i, 1,
				     sc->xp + i, sc->gxp + i, 1, n, sc->Y);
		}
	}

	/* negatives */
	if (form == FORM_ROT) {
		rot_negatives(m, sc, A->rot_wide, C, N, k, neg_sum);
	} else if (form == FORM_L2 || form == FORM_DOT) {
		pair_matrix(FORM_DOT, sc->qp, C, sc->ep, N, n, sc->S, N);
		if (form == FORM_L2) {
			for (uint32_t i = 0; i < C; i++)
				pair_matrix(FORM_DOT, sc->qp + i, 1, sc->qp + i, 1, n,
					    sc->qn + i, 1);
			for (uint32_t j = 0; j < N; j++)
				pair_matrix(FORM_DOT, sc->ep + j, 1, sc->ep + j, 1, n,
					    sc->en + j, 1);
			for (uint32_t i = 0; i < C; i++) {
				float *s = sc->S + (size_t)i * N;
				float *dist = sc->DIST + (size_t)i * N;
				for (uint32_t j = 0; j < N; j++) {
					float d2 = sc->qn[i] + sc->en[j] - 2.0f * s[j];
					bool clamp = !(d2 >= 1e-30f);
					float d = clamp ? 1e-15f : sqrtf(d2);
					s[j] = gamma - d;
					dist[j] = clamp ? 0.0f : d;
				}
			}
		}
	} else {
		pair_matrix(form, sc->qp, C, sc->ep, N, n, sc->S, N);
		for (size_t x = 0; x < (size_t)C * N; x++)
			sc->S[x] = gamma - sc->S[x];
	}

	/* loss rows: S becomes dL/ds */
	if (form != FORM_ROT)
		for (uint32_t i = 0; i < C; i++)
			*neg_sum += neg_row_loss(m, sc->S + (size_t)i * N, sc->wbuf, N, k);

	/* negative backward */
	if (form == FORM_L2) {
		/* ds/dq = -(q - e)/d: with W = dL/ds / d,
		 * GQ_i += -(sum_j W_ij) q_i + sum_j W_ij e_j
		 * GE_j += -(sum_i W_ij) e_j + sum_i W_ij q_i */
		for (uint32_t j = 0; j < N; j++)
			sc->colc[j] = 0;
		for (uint32_t i = 0; i < C; i++) {
			float *w = sc->S + (size_t)i * N;
			const float *dist = sc->DIST + (size_t)i * N;
			float rs = 0;
			for (uint32_t j = 0; j < N; j++) {
				w[j] = dist[j] > 0 ? w[j] / dist[j] : 0.0f;
				rs += w[j];
				sc->colc[j] -= w[j];
			}
			sc->rowc[i] = -rs;
		}
		gemm_acc(sc->qp, sc->rowc, sc->gqp, C, sc->S, N, 1, sc->ep, N, n);
		gemm_acc(sc->ep, sc->colc, sc->gep, N, sc->S, 1, N, sc->qp, C, n);
	} else if (form == FORM_DOT) {
		gemm_acc(sc->qp, NULL, sc->gqp, C, sc->S, N, 1, sc->ep, N, n);
		gemm_acc(sc->ep, NULL, sc->gep, N, sc->S, 1, N, sc->qp, C, n);
	} else if (form == FORM_L1) {
		/* four query rows per pass */
		const int mr = 4;
		uint32_t i = 0;
		for (; i + mr <= C; i += mr)
			l1_backward_rows(mr, sc->qp + i, sc->gqp + i, sc->S + (size_t)i * N, N,
					 sc->ep, sc->gep, N, n);
		for (; i < C; i++)
			l1_backward_rows(1, sc->qp + i, sc->gqp + i, sc->S + (size_t)i * N, N,
					 sc->ep, sc->gep, N, n);
	}

	/* through the queries into x and r (RESCAL: by rescal_groups) */
	if (rescal)
		return;
	for (uint32_t i = 0; i < C; i++) {
		uint32_t h = b->head[i0 + i], r = b->rel[i0 + i], t = b->tail[i0 + i];
		uint32_t x = hs ? t : h;
		query_backward(m, hs, A->ent + (size_t)x * n, A->rel + (size_t)r * rd,
			       sc->cs ? sc->cs + (size_t)r * 2 * rd : NULL,
			       sc->qp[i], sc->gqp[i], A->eg + (size_t)x * n,
			       A->rg + (size_t)r * rd);
	}
}

RDPS_KGE_CLONES
static void step_impl(const struct step_args *A, struct rdps_step_result *res)
{
	const struct rdps_model *m = A->m;
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t B = b->size, chunk = b->chunk, N = b->neg;
	double pos_sum = 0, neg_sum = 0, reg = 0;

	if (m->kind == RDPS_MODEL_ROTATE)
		for (uint32_t r = 0; r < b->n_rel_rows; r++)
			rotate_cs(m, A->rel + (size_t)r * m->rel_dim,
				  sc->cs + (size_t)r * 2 * m->rel_dim);

	/* RESCAL: spans of whole chunks share the query build and backward
	 * (rescal_begin, rescal_groups); other models: one span */
	bool rescal = m->kind == RDPS_MODEL_RESCAL;
	struct step_args As = *A;
	uint32_t span = B;
	if (rescal) {
		uint32_t C0 = chunk < B ? chunk : B;
		span = (uint32_t)(rescal_rows_max(C0, m->ent_dim) / C0) * C0;
	}
	for (uint32_t c = 0, i0 = 0; i0 < B;) {
		uint32_t S = B - i0 < span ? B - i0 : span, end = i0 + S;
		As.s0 = i0;
		if (rescal)
			rescal_begin(&As, S);
		for (; i0 < end; c++, i0 += chunk) {
			uint32_t C = end - i0 < chunk ? end - i0 : chunk;
			const uint32_t *neg = b->neg_ent + (size_t)c * N;
			switch (m->form) {
			case FORM_DOT:
				step_chunk(FORM_DOT, &As, i0, C, neg, &pos_sum, &neg_sum);
				break;
			case FORM_L2:
				step_chunk(FORM_L2, &As, i0, C, neg, &pos_sum, &neg_sum);
				break;
			case FORM_L1:
				step_chunk(FORM_L1, &As, i0, C, neg, &pos_sum, &neg_sum);
				break;
			case FORM_ROT:
				step_chunk(FORM_ROT, &As, i0, C, neg, &pos_sum, &neg_sum);
				break;
			}
		}
		if (rescal)
			rescal_groups(&As, S, b->neg_head != 0, 1);
	}

	if (m->p.reg_coef > 0) {
		uint32_t nch = (B + chunk - 1) / chunk;
		const uint32_t flag = 1u << 31;
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
					       m->rel_dim, m->p.reg_coef,
					       m->p.reg_norm, (float)sc->rel_w[r]);
	}

	if (res) {
		res->pos_loss = pos_sum / B;
		res->neg_loss = neg_sum / B;
		res->reg = reg;
		res->loss = (res->pos_loss + res->neg_loss) / 2 + reg;
	}
}

static bool indices_ok(const uint32_t *idx, size_t n, uint32_t limit)
{
	uint32_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad |= idx[i] >= limit;
	return !bad;
}

/* RotatE's forward takes the 8-lane rsqrt estimate where the x86-64-v3
 * clone of step_impl runs (AVX2 and FMA), which inlines it. Same values as
 * the SSE halves: results do not depend on it. */
static int rot_wide(void)
{
#if defined(__x86_64__)
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return 0;
#endif
}

int rdps_model_step(const struct rdps_model *m, const struct rdps_batch *b,
		    const float *ent_rows, const float *rel_rows,
		    float *ent_grad, float *rel_grad, void *scratch,
		    size_t scratch_size, struct rdps_step_result *res)
{
	struct step_scratch sc;
	struct step_args A;
	uint32_t C, nch;
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
	if (m->kind != RDPS_MODEL_ROTATE)
		sc.cs = NULL;
	A = (struct step_args){ .m = m, .b = b, .ent = ent_rows, .rel = rel_rows,
				.eg = ent_grad, .rg = rel_grad, .sc = &sc,
				.rot_wide = m->form == FORM_ROT && rot_wide() };
	step_impl(&A, res);
	return 0;
}
