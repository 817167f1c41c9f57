/* SPDX-License-Identifier: MIT */
/*
 * KGE model kernels: scores against hand-computed values, batch losses
 * against hand-computed values, and every model's gradients against central
 * finite differences of an independent double-precision reference of
 * DGL-KE's loss (chunked negatives, head and tail corruption, with and
 * without -adv, with L2/L3 regularization, with -de / -dr); row widths and
 * relation parts of every model; evaluation query forms against a brute
 * force of the reference scores.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/trainer.h"

static struct rdps_model *make_model_de(const char *name, uint32_t dim, float gamma,
					bool adv, float temp, float coef, float p, bool de,
					bool dr)
{
	struct rdps_model_params mp;
	struct rdps_model *m = NULL;

	rdps_model_params_init(&mp);
	mp.name = name;
	mp.hidden_dim = dim;
	mp.gamma = gamma;
	mp.adv = adv;
	mp.adv_temp = temp;
	mp.reg_coef = coef;
	mp.reg_norm = p;
	mp.double_ent = de;
	mp.double_rel = dr;
	cr_assert_eq(rdps_model_create(&m, &mp), 0, "create %s de=%d dr=%d", name, de, dr);
	return m;
}

static struct rdps_model *make_model(const char *name, uint32_t dim, float gamma,
				     bool adv, float temp, float coef, float p)
{
	return make_model_de(name, dim, gamma, adv, temp, coef, p, false, false);
}

/* ---------------------------------------------------------------------- */
/* Independent reference (double)                                          */
/* ---------------------------------------------------------------------- */

struct refcase {
	const char *name;
	uint32_t D;      /* hidden_dim */
	uint32_t ed, rd; /* row widths */
	uint32_t rv;     /* relation vector (TransR: R; others rd) */
	double gamma, temp, coef, p;
	bool adv;
	uint32_t B, chunk, N, nent, nrel;
	int neg_head;
	const uint32_t *h, *r, *t, *neg;
};

/* DGL-KE edge_func in double, written from its definitions (rows of width
 * ed / rd as DGL-KE lays them out with -de / -dr); the RotatE phase uses
 * emb_init. */
static double ref_score(const struct refcase *c, const double *h, const double *r,
			const double *t)
{
	const char *name = c->name;
	uint32_t n = c->ed;
	double gamma = c->gamma, s = 0;

	if (!strcmp(name, "TransE_l1") || !strcmp(name, "TransE_l2")) {
		bool l1 = !strcmp(name, "TransE_l1");
		for (uint32_t k = 0; k < n; k++) {
			double d = h[k] + r[k] - t[k];
			s += l1 ? fabs(d) : d * d;
		}
		return gamma - (l1 ? s : sqrt(s));
	}
	if (!strcmp(name, "DistMult")) {
		for (uint32_t k = 0; k < n; k++)
			s += h[k] * r[k] * t[k];
		return s;
	}
	if (!strcmp(name, "ComplEx")) {
		uint32_t K = n / 2;
		for (uint32_t k = 0; k < K; k++)
			s += h[k] * t[k] * r[k] + h[K + k] * t[K + k] * r[k] +
			     h[k] * t[K + k] * r[K + k] - h[K + k] * t[k] * r[K + k];
		return s;
	}
	if (!strcmp(name, "RotatE")) {
		uint32_t D = c->D;
		double emb_init = (gamma + 2.0) / D;
		for (uint32_t k = 0; k < D; k++) {
			double ph = r[k] / (emb_init / M_PI);
			double re = h[k] * cos(ph) - h[D + k] * sin(ph) - t[k];
			double im = h[k] * sin(ph) + h[D + k] * cos(ph) - t[D + k];
			s += sqrt(re * re + im * im);
		}
		return gamma - s;
	}
	if (!strcmp(name, "TransR")) {
		/* r: R floats, then the E x R projection P; ||h P + r - t P||_1 */
		uint32_t E = c->ed, R = c->rv;
		const double *P = r + R;
		for (uint32_t k = 0; k < R; k++) {
			double d = r[k];
			for (uint32_t a = 0; a < E; a++)
				d += (h[a] - t[a]) * P[a * R + k];
			s += fabs(d);
		}
		return gamma - s;
	}
	if (!strcmp(name, "SimplE")) {
		/* halves (h_i, h_j), (t_i, t_j), (r, r_inv) */
		uint32_t K = n / 2;
		for (uint32_t k = 0; k < K; k++)
			s += h[k] * r[k] * t[K + k] + t[k] * r[K + k] * h[K + k];
		s /= 2;
		return s < -20 ? -20 : s > 20 ? 20 : s;
	}
	/* RESCAL: h^T M t, M row-major n x n */
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t k = 0; k < n; k++)
			s += h[a] * r[a * n + k] * t[k];
	return s;
}

static double ref_logsig(double x)
{
	return x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x));
}

/* Loss of DGL-KE's forward(); w (B x N) are the detached adversarial
 * weights: computed when compute_w, else taken as given. */
static double ref_loss(const struct refcase *c, const double *ent,
		       const double *rel, double *w, bool compute_w)
{
	double pos = 0, negl = 0, reg = 0;
	double *s = calloc(c->N, sizeof(double));

	for (uint32_t i = 0; i < c->B; i++) {
		const double *h = ent + c->h[i] * c->ed, *r = rel + c->r[i] * c->rd;
		const double *t = ent + c->t[i] * c->ed;
		const uint32_t *ng = c->neg + (i / c->chunk) * c->N;
		double sum = 0;
		pos += -ref_logsig(ref_score(c, h, r, t));
		for (uint32_t j = 0; j < c->N; j++) {
			const double *e = ent + ng[j] * c->ed;
			s[j] = c->neg_head ? ref_score(c, e, r, t) : ref_score(c, h, r, e);
		}
		if (compute_w) {
			double mx = -INFINITY, z = 0;
			for (uint32_t j = 0; j < c->N; j++)
				mx = fmax(mx, s[j] * c->temp);
			for (uint32_t j = 0; j < c->N; j++)
				z += exp(s[j] * c->temp - mx);
			for (uint32_t j = 0; j < c->N; j++)
				w[i * c->N + j] = c->adv ? exp(s[j] * c->temp - mx) / z
							 : 1.0 / c->N;
		}
		for (uint32_t j = 0; j < c->N; j++)
			sum += -w[i * c->N + j] * ref_logsig(-s[j]);
		negl += sum;
	}
	free(s);
	if (c->coef > 0) {
		/* distinct positive entities once, negative slots each,
		 * relations once per triple */
		uint32_t nch = (c->B + c->chunk - 1) / c->chunk;
		for (uint32_t e = 0; e < c->nent; e++) {
			double mult = 0, s3 = 0;
			for (uint32_t i = 0; i < c->B; i++)
				if (c->h[i] == e || c->t[i] == e) {
					mult = 1;
					break;
				}
			for (uint32_t j = 0; j < nch * c->N; j++)
				mult += c->neg[j] == e;
			for (uint32_t k = 0; k < c->ed; k++)
				s3 += pow(fabs(ent[e * c->ed + k]), c->p);
			reg += mult * s3;
		}
		for (uint32_t r = 0; r < c->nrel; r++) {
			double mult = 0, s3 = 0;
			for (uint32_t i = 0; i < c->B; i++)
				mult += c->r[i] == r;
			/* the relation vector only (not TransR's projection) */
			for (uint32_t k = 0; k < c->rv; k++)
				s3 += pow(fabs(rel[r * c->rd + k]), c->p);
			reg += mult * s3;
		}
		reg *= c->coef;
	}
	return (pos / c->B + negl / c->B) / 2 + reg;
}

/* d loss / d x[k] by central difference (x is one of ent, rel). */
static double fd_grad(const struct refcase *c, double *ent, double *rel, double *w, double *x,
		      size_t k)
{
	const double eps = 1e-6, x0 = x[k];
	double lp, lm;

	x[k] = x0 + eps;
	lp = ref_loss(c, ent, rel, w, false);
	x[k] = x0 - eps;
	lm = ref_loss(c, ent, rel, w, false);
	x[k] = x0;
	return (lp - lm) / (2 * eps);
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* The relation vector's width: TransR's R (its projection follows), else
 * the whole row. */
static uint32_t rvec_width(const char *name, uint32_t D, bool dr, uint32_t rd)
{
	return !strcmp(name, "TransR") ? (dr ? 2 * D : D) : rd;
}

struct gopts {
	bool de, dr;      /* -de, -dr */
	double scale;     /* rows uniform(-scale, scale); 0: the default */
	bool clamp_check; /* SimplE: the batch must have clamped scores */
};

/* Runs rdps_model_step on a random batch and compares loss and every
 * gradient entry with the reference and its central differences. */
static void check_gradients_o(const char *name, uint32_t D, float gamma, bool adv,
			      float coef, float p, int neg_head, const struct gopts *o)
{
	struct rdps_model *m = make_model_de(name, D, gamma, adv, 0.7f, coef, p, o->de, o->dr);
	const uint32_t B = 5, chunk = 2, N = 3, nent = 7, nrel = 3;
	uint32_t h[5], r[5], t[5], neg[9]; /* 3 chunks x 3 */
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	size_t ne = (size_t)nent * ed, nr = (size_t)nrel * rd;
	float *ent = malloc(ne * 4), *rel = malloc(nr * 4);
	float *eg = calloc(ne, 4), *rg = calloc(nr, 4);
	double *entd = malloc(ne * 8), *reld = malloc(nr * 8), *w = malloc(B * N * 8);
	double scale = o->scale ? o->scale : !strcmp(name, "RotatE") ? 1.0 : 0.6;
	size_t ss = rdps_model_scratch_size(m, chunk, N, nent, nrel);
	void *scratch = malloc(ss);
	struct rdps_step_result res;
	struct refcase c;

	for (uint32_t i = 0; i < B; i++) {
		h[i] = (uint32_t)(urand() * nent);
		r[i] = (uint32_t)(urand() * nrel);
		t[i] = (uint32_t)(urand() * nent);
	}
	t[1] = h[1]; /* a self-loop */
	for (uint32_t j = 0; j < 9; j++)
		neg[j] = (uint32_t)(urand() * nent);
	neg[1] = neg[0]; /* a negative drawn twice in one chunk */
	neg[3] = h[2];   /* a positive entity drawn as negative */
	for (size_t k = 0; k < ne; k++)
		entd[k] = ent[k] = (float)((urand() * 2 - 1) * scale);
	for (size_t k = 0; k < nr; k++)
		reld[k] = rel[k] = (float)((urand() * 2 - 1) * scale);

	struct rdps_batch b = { .size = B, .chunk = chunk, .neg = N,
				.neg_head = neg_head, .head = h, .rel = r, .tail = t,
				.neg_ent = neg, .n_ent_rows = nent, .n_rel_rows = nrel };
	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, &res), 0);

	c = (struct refcase){ .name = name, .D = D, .ed = ed, .rd = rd,
			      .rv = rvec_width(name, D, o->dr, rd), .gamma = gamma,
			      .temp = 0.7, .coef = coef, .p = p, .adv = adv, .B = B,
			      .chunk = chunk, .N = N, .nent = nent, .nrel = nrel,
			      .neg_head = neg_head, .h = h, .r = r, .t = t, .neg = neg };
	double L = ref_loss(&c, entd, reld, w, true);
	cr_assert(fabs(res.loss - L) <= 1e-5 * (1 + fabs(L)),
		  "%s head=%d adv=%d de=%d dr=%d: loss %.9g vs reference %.9g", name,
		  neg_head, adv, o->de, o->dr, res.loss, L);
	if (o->clamp_check) {
		/* control: some scores of the batch are clamped, some not */
		unsigned clamped = 0, free_ = 0;
		for (uint32_t i = 0; i < B; i++) {
			const double *rr = reld + (size_t)r[i] * rd;
			double sp = ref_score(&c, entd + (size_t)h[i] * ed, rr,
					      entd + (size_t)t[i] * ed);
			fabs(sp) == 20 ? clamped++ : free_++;
			for (uint32_t j = 0; j < N; j++) {
				const double *e = entd + (size_t)neg[(i / chunk) * N + j] * ed;
				const double *hh = entd + (size_t)h[i] * ed;
				const double *tt = entd + (size_t)t[i] * ed;
				double sn = neg_head ? ref_score(&c, e, rr, tt)
						     : ref_score(&c, hh, rr, e);
				fabs(sn) == 20 ? clamped++ : free_++;
			}
		}
		cr_assert(clamped > 0 && free_ > 0, "%s: %u clamped and %u free scores", name,
			  clamped, free_);
	}
	cr_assert(fabs(res.loss - ((res.pos_loss + res.neg_loss) / 2 + res.reg)) < 1e-9);

	double gmax = 1e-3;
	for (size_t k = 0; k < ne; k++)
		gmax = fmax(gmax, fabs(eg[k]));
	for (size_t k = 0; k < nr; k++)
		gmax = fmax(gmax, fabs(rg[k]));
	for (int which = 0; which < 2; which++) {
		double *x = which ? reld : entd;
		float *g = which ? rg : eg;
		size_t n = which ? nr : ne;
		for (size_t k = 0; k < n; k++) {
			double fd = fd_grad(&c, entd, reld, w, x, k);
			cr_assert(fabs(fd - g[k]) <= 2e-4 * gmax + 2e-3 * fabs(fd),
				  "%s head=%d adv=%d coef=%g p=%g de=%d dr=%d: d/d%s[%zu] = "
				  "%.8g, finite difference %.8g", name, neg_head, adv, coef,
				  p, o->de, o->dr, which ? "rel" : "ent", k, g[k], fd);
		}
	}
	free(ent), free(rel), free(eg), free(rg), free(entd), free(reld), free(w);
	free(scratch);
	rdps_model_destroy(m);
}

static void check_gradients(const char *name, uint32_t D, float gamma, bool adv,
			    float coef, float p, int neg_head)
{
	const struct gopts o = { 0 };
	check_gradients_o(name, D, gamma, adv, coef, p, neg_head, &o);
}

static void check_model(const char *name, uint32_t D, float gamma)
{
	for (int head = 0; head < 2; head++) {
		check_gradients(name, D, gamma, false, 0, 3, head);
		check_gradients(name, D, gamma, true, 0, 3, head);
		check_gradients(name, D, gamma, true, 1e-2f, 3, head);
		check_gradients(name, D, gamma, false, 1e-2f, 2, head);
	}
}

/* D = 8 exercises the vector loops, the other size their scalar tails. */
Test(models, gradients_transe_l1) { check_model("TransE_l1", 8, 2.0f); check_model("TransE_l1", 13, 3.0f); }
Test(models, gradients_transe_l2) { check_model("TransE_l2", 8, 2.0f); check_model("TransE_l2", 13, 3.0f); }
Test(models, gradients_distmult) { check_model("DistMult", 8, 2.0f); check_model("DistMult", 21, 2.0f); }
Test(models, gradients_complex) { check_model("ComplEx", 16, 2.0f); check_model("ComplEx", 10, 2.0f); }
Test(models, gradients_rotate) { check_model("RotatE", 8, 2.0f); check_model("RotatE", 11, 3.0f); }
/* RESCAL: 18 also takes the strips of 16 and the blocks of 4 rows, with
 * remainders, of its relation-matrix kernels. */
Test(models, gradients_rescal) { check_model("RESCAL", 8, 2.0f); check_model("RESCAL", 5, 2.0f); check_model("RESCAL", 18, 2.0f); }
/* TransR: 8 and 16 take the projection kernels' strips of 16 and blocks of
 * 4 rows (16 without remainder), 5 their scalar paths. */
Test(models, gradients_transr)
{
	check_model("TransR", 8, 2.0f);
	check_model("TransR", 5, 3.0f);
	check_model("TransR", 16, 2.0f);
}

Test(models, gradients_simple)
{
	check_model("SimplE", 8, 2.0f);
	check_model("SimplE", 10, 2.0f);
}

/* SimplE's clamp: rows large enough that some scores pass +-20 (checked by
 * the control in check_gradients_o): there the gradient is zero, as the
 * finite differences of the clamped reference. */
Test(models, gradients_simple_clamped)
{
	const struct gopts o = { .scale = 5.0, .clamp_check = true };
	for (int head = 0; head < 2; head++) {
		check_gradients_o("SimplE", 8, 2.0f, false, 0, 3, head, &o);
		check_gradients_o("SimplE", 8, 2.0f, true, 1e-3f, 3, head, &o);
	}
}

/* DGL-KE's -de / -dr: every model with the widths they give (odd D where
 * the doubled rows still split in halves). */
static void check_model_de(const char *name, uint32_t D, float gamma, bool de, bool dr)
{
	const struct gopts o = { .de = de, .dr = dr };
	for (int head = 0; head < 2; head++) {
		check_gradients_o(name, D, gamma, false, 0, 3, head, &o);
		check_gradients_o(name, D, gamma, true, 1e-2f, 3, head, &o);
	}
}

Test(models, gradients_double_ent_rel)
{
	static const char *same[] = { "TransE_l1", "TransE_l2", "DistMult", "ComplEx",
				      "RESCAL", "SimplE" };
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		check_model_de(same[i], 5, 2.0f, true, true);
	check_model_de("RotatE", 5, 2.0f, true, false);
	check_model_de("TransR", 5, 2.0f, true, false);
	check_model_de("TransR", 5, 2.0f, false, true);
	check_model_de("TransR", 4, 2.0f, true, true);
}

/* Larger chunks (11 positives, 2 chunks): the 4 x 2 blocked matrix kernels
 * with remainders. */
static void check_big_chunk(const char *name, uint32_t D, uint32_t nrel)
{
	struct rdps_model *m = make_model(name, D, 4.0f, true, 1.0f,
					  1e-3f, 3);
	const uint32_t B = 11, chunk = 6, N = 7, nent = 20;
	uint32_t h[11], r[11], t[11], neg[14];
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	size_t ne = (size_t)nent * ed, nr = (size_t)nrel * rd;
	float *ent = malloc(ne * 4), *rel = malloc(nr * 4);
	float *eg = calloc(ne, 4), *rg = calloc(nr, 4);
	double *entd = malloc(ne * 8), *reld = malloc(nr * 8), *w = malloc(B * N * 8);
	size_t ss = rdps_model_scratch_size(m, chunk, N, nent, nrel);
	void *scratch = malloc(ss);
	struct rdps_step_result res;

	for (uint32_t k = 0; k < B; k++) {
		h[k] = (uint32_t)(urand() * nent);
		r[k] = (uint32_t)(urand() * nrel);
		t[k] = (uint32_t)(urand() * nent);
	}
	for (uint32_t k = 0; k < 14; k++)
		neg[k] = (uint32_t)(urand() * nent);
	for (size_t k = 0; k < ne; k++)
		entd[k] = ent[k] = (float)(urand() * 2 - 1) * 0.5f;
	for (size_t k = 0; k < nr; k++)
		reld[k] = rel[k] = (float)(urand() * 2 - 1) * 0.5f;
	for (int head = 0; head < 2; head++) {
		struct rdps_batch b = { .size = B, .chunk = chunk, .neg = N,
					.neg_head = head, .head = h, .rel = r,
					.tail = t, .neg_ent = neg, .n_ent_rows = nent,
					.n_rel_rows = nrel };
		struct refcase c = { .name = name, .D = D, .ed = ed, .rd = rd,
				     .rv = rvec_width(name, D, false, rd), .gamma = 4.0, .temp = 1.0, .coef = 1e-3, .p = 3,
				     .adv = true, .B = B, .chunk = chunk, .N = N,
				     .nent = nent, .nrel = nrel, .neg_head = head,
				     .h = h, .r = r, .t = t, .neg = neg };
		memset(eg, 0, ne * 4);
		memset(rg, 0, nr * 4);
		cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, &res), 0);
		double L = ref_loss(&c, entd, reld, w, true);
		cr_assert(fabs(res.loss - L) < 1e-5 * (1 + fabs(L)), "%s", name);
		double gmax = 1e-3;
		for (size_t k = 0; k < ne; k++)
			gmax = fmax(gmax, fabs(eg[k]));
		for (size_t k = 0; k < ne; k += 3) {
			double fd = fd_grad(&c, entd, reld, w, entd, k);
			cr_assert(fabs(fd - eg[k]) <= 2e-4 * gmax + 2e-3 * fabs(fd),
				  "%s head=%d ent[%zu]: %.8g vs fd %.8g", name,
				  head, k, eg[k], fd);
		}
		for (size_t k = 0; k < nr; k++) {
			double fd = fd_grad(&c, entd, reld, w, reld, k);
			cr_assert(fabs(fd - rg[k]) <= 2e-4 * gmax + 2e-3 * fabs(fd),
				  "%s head=%d rel[%zu]: %.8g vs fd %.8g", name,
				  head, k, rg[k], fd);
		}
	}
	free(ent), free(rel), free(eg), free(rg), free(entd), free(reld), free(w);
	free(scratch);
	rdps_model_destroy(m);
}

Test(models, gradients_big_chunk)
{
	static const char *names[] = { "TransE_l1", "TransE_l2", "DistMult", "ComplEx",
				       "RotatE", "RESCAL", "TransR", "SimplE" };
	for (size_t i = 0; i < 8; i++)
		check_big_chunk(names[i], 24, 4);
}

/* RESCAL's blocked relation kernels take groups of 4 or more positives of
 * one relation: all 11 in one relation, then in 2. */
Test(models, gradients_rescal_groups)
{
	check_big_chunk("RESCAL", 18, 1);
	check_big_chunk("RESCAL", 24, 2);
}

/* TransR groups a chunk's positives by relation: all in one relation, then
 * groups of several sizes (2 and 4 relations). */
Test(models, gradients_transr_groups)
{
	check_big_chunk("TransR", 18, 1);
	check_big_chunk("TransR", 12, 2);
}

/* ---------------------------------------------------------------------- */
/* Hand-computed values                                                    */
/* ---------------------------------------------------------------------- */

Test(models, scores_by_hand)
{
	struct rdps_model *m;

	/* TransE_l1: |1 + 0.5 - 0| + |2 - 1 - 0| = 2.5; gamma 4 -> 1.5 */
	m = make_model("TransE_l1", 2, 4.0f, false, 1, 0, 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 0.5f, -1 },
					    (float[]){ 0, 0 }), 1.5, 1e-9);
	rdps_model_destroy(m);
	/* TransE_l2: ||(3,4)|| = 5; gamma 6 -> 1 */
	m = make_model("TransE_l2", 2, 6.0f, false, 1, 0, 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 1 }, (float[]){ 2, 3 },
					    (float[]){ 0, 0 }), 1.0, 1e-9);
	rdps_model_destroy(m);
	/* DistMult: 1*1*0.5 + 2*1*0.25 = 1 */
	m = make_model("DistMult", 2, 6.0f, false, 1, 0, 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 1, 1 },
					    (float[]){ 0.5f, 0.25f }), 1.0, 1e-9);
	rdps_model_destroy(m);
	/* ComplEx, one complex dimension: Re((1+2i)(3+4i)(5-6i)) = 35 */
	m = make_model("ComplEx", 2, 6.0f, false, 1, 0, 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 3, 4 },
					    (float[]){ 5, 6 }), 35.0, 1e-9);
	rdps_model_destroy(m);
	/* RotatE, D = 1, gamma 1: emb_init = 3, r = 1.5 -> phase pi/2, so
	 * h = 1 rotates to i; t = i gives distance 0, t = 0 distance 1 */
	m = make_model("RotatE", 1, 1.0f, false, 1, 0, 3);
	cr_assert_eq(rdps_model_entity_dim(m), 2);
	cr_assert_eq(rdps_model_relation_dim(m), 1);
	cr_assert_float_eq(rdps_model_emb_init(m), 3.0f, 1e-7);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 0 }, (float[]){ 1.5f },
					    (float[]){ 0, 1 }), 1.0, 1e-6);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 0 }, (float[]){ 1.5f },
					    (float[]){ 0, 0 }), 0.0, 1e-6);
	rdps_model_destroy(m);
	/* RESCAL: M t = (1*1 + 2*1, 3*1 + 4*1) = (3, 7); h . (3, 7) = 17 */
	m = make_model("RESCAL", 2, 6.0f, false, 1, 0, 3);
	cr_assert_eq(rdps_model_relation_dim(m), 4);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 1, 2, 3, 4 },
					    (float[]){ 1, 1 }), 17.0, 1e-9);
	rdps_model_destroy(m);
}

Test(models, scores_by_hand_transr_simple)
{
	struct rdps_model *m;

	/* TransR, D = 2 (E = R = 2): relation row r = (0.5, -1) then P =
	 * [[1, 0], [2, 1]]. h = (1, 2): h P = (1 + 4, 0 + 2) = (5, 2); t = (0, 1):
	 * t P = (2, 1). h P + r - t P = (3.5, 0): L1 3.5, gamma 4 -> 0.5 */
	m = make_model("TransR", 2, 4.0f, false, 1, 0, 3);
	cr_assert_eq(rdps_model_entity_dim(m), 2);
	cr_assert_eq(rdps_model_relation_dim(m), 6);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 },
					    (float[]){ 0.5f, -1, 1, 0, 2, 1 },
					    (float[]){ 0, 1 }), 0.5, 1e-9);
	rdps_model_destroy(m);
	/* TransR -dr, D = 1: E = 1, R = 2, P = [[2, 0.5]]; h = 3, t = 1,
	 * r = (1, -1): h P = (6, 1.5), t P = (2, 0.5), h P + r - t P = (5, 0);
	 * gamma 6 -> 1 */
	m = make_model_de("TransR", 1, 6.0f, false, 1, 0, 3, false, true);
	cr_assert_eq(rdps_model_entity_dim(m), 1);
	cr_assert_eq(rdps_model_relation_dim(m), 4);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 3 }, (float[]){ 1, -1, 2, 0.5f },
					    (float[]){ 1 }), 1.0, 1e-9);
	rdps_model_destroy(m);
	/* TransR -de, D = 1: E = 2, R = 1, P = [[1], [-1]] (a column); h = (2, 1)
	 * -> 1, t = (0, 3) -> -3, r = 0.5: |1 + 0.5 + 3| = 4.5; gamma 5 -> 0.5 */
	m = make_model_de("TransR", 1, 5.0f, false, 1, 0, 3, true, false);
	cr_assert_eq(rdps_model_relation_dim(m), 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 2, 1 }, (float[]){ 0.5f, 1, -1 },
					    (float[]){ 0, 3 }), 0.5, 1e-9);
	rdps_model_destroy(m);

	/* SimplE, D = 2: h = (h_i 1, h_j 2), t = (t_i 3, t_j 4), r = (r 0.5,
	 * r_inv -1): (1 * 0.5 * 4 + 3 * -1 * 2) / 2 = (2 - 6) / 2 = -2 */
	m = make_model("SimplE", 2, 6.0f, false, 1, 0, 3);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 0.5f, -1 },
					    (float[]){ 3, 4 }), -2.0, 1e-9);
	/* clamped: (10 * 1 * 10 + 10 * 1 * 10) / 2 = 100 -> 20, and -100 -> -20 */
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 10, 10 }, (float[]){ 1, 1 },
					    (float[]){ 10, 10 }), 20.0, 1e-9);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 10, 10 }, (float[]){ -1, -1 },
					    (float[]){ 10, 10 }), -20.0, 1e-9);
	rdps_model_destroy(m);
	/* SimplE -de -dr, D = 1: the same rows as D = 2 above */
	m = make_model_de("SimplE", 1, 6.0f, false, 1, 0, 3, true, true);
	cr_assert_eq(rdps_model_entity_dim(m), 2);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 0.5f, -1 },
					    (float[]){ 3, 4 }), -2.0, 1e-9);
	rdps_model_destroy(m);
	/* ComplEx -de -dr, D = 1: a row is (real, imaginary), 2 D wide:
	 * Re((1+2i)(3+4i)(5-6i)) = 35 */
	m = make_model_de("ComplEx", 1, 6.0f, false, 1, 0, 3, true, true);
	cr_assert_eq(rdps_model_entity_dim(m), 2);
	cr_assert_eq(rdps_model_relation_dim(m), 2);
	cr_assert_float_eq(rdps_model_score(m, (float[]){ 1, 2 }, (float[]){ 3, 4 },
					    (float[]){ 5, 6 }), 35.0, 1e-9);
	rdps_model_destroy(m);
}

static struct rdps_step_result one_step(struct rdps_model *m, const float *ent,
					uint32_t nent, const float *rel,
					uint32_t nrel, const uint32_t *neg,
					uint32_t N, int neg_head)
{
	uint32_t h = 0, r = 0, t = 1;
	struct rdps_batch b = { .size = 1, .chunk = 1, .neg = N, .neg_head = neg_head,
				.head = &h, .rel = &r, .tail = &t, .neg_ent = neg,
				.n_ent_rows = nent, .n_rel_rows = nrel };
	size_t ss = rdps_model_scratch_size(m, 1, N, nent, nrel);
	void *scratch = malloc(ss);
	float *eg = calloc((size_t)nent * rdps_model_entity_dim(m), 4);
	float *rg = calloc((size_t)nrel * rdps_model_relation_dim(m), 4);
	struct rdps_step_result res;

	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, &res), 0);
	free(scratch), free(eg), free(rg);
	return res;
}

Test(models, loss_by_hand)
{
	/* TransE_l2, gamma 2. Entities: 0 = h = (1,0), 1 = t = (1,1),
	 * 2 = (1,-1); relation (0,1). Positive: ||h + r - t|| = 0, score 2,
	 * -logsigmoid(2) = log(1 + e^-2) = 0.126928011. Negative tail (1,-1):
	 * ||(1,1) - (1,-1)|| = 2, score 0, -logsigmoid(-0) = log 2 = 0.693147181.
	 * loss = (0.126928011 + 0.693147181) / 2 = 0.410037596.
	 * L3 regularization 0.01: entities |x|^3 sums 1 + 2 + 2, relation 1:
	 * reg = 0.06. */
	float ent[] = { 1, 0, 1, 1, 1, -1 }, rel[] = { 0, 1 };
	uint32_t neg = 2;
	struct rdps_model *m = make_model("TransE_l2", 2, 2.0f, false, 1, 0.01f, 3);
	struct rdps_step_result res = one_step(m, ent, 3, rel, 1, &neg, 1, 0);
	cr_assert_float_eq(res.pos_loss, 0.126928011, 1e-6);
	cr_assert_float_eq(res.neg_loss, 0.693147181, 1e-6);
	cr_assert_float_eq(res.reg, 0.06, 1e-7);
	cr_assert_float_eq(res.loss, 0.470037596, 1e-6);
	rdps_model_destroy(m);

	/* DistMult, head corruption, two negatives, -adv temperature 1.
	 * h = (1,2), t = (0.5,0.25), r = (1,1): positive score 1,
	 * -logsigmoid(1) = 0.313261688. Negative heads (0,0) -> score 0 and
	 * (2,0) -> score 1: softmax weights (1, e)/(1 + e) = 0.268941421,
	 * 0.731058579; losses log 2 = 0.693147181 and -logsigmoid(-1) =
	 * 1.313261688; neg_loss = 0.268941421 * 0.693147181 + 0.731058579 *
	 * 1.313261688 = 1.146487211. loss = (0.313261688 + 1.146487211) / 2 =
	 * 0.729874449. */
	float ent2[] = { 1, 2, 0.5f, 0.25f, 0, 0, 2, 0 }, rel2[] = { 1, 1 };
	uint32_t neg2[] = { 2, 3 };
	m = make_model("DistMult", 2, 2.0f, true, 1.0f, 0, 3);
	res = one_step(m, ent2, 4, rel2, 1, neg2, 2, 1);
	cr_assert_float_eq(res.pos_loss, 0.313261688, 1e-6);
	cr_assert_float_eq(res.neg_loss, 1.146487211, 1e-6);
	cr_assert_float_eq(res.loss, 0.729874449, 1e-6);
	cr_assert_float_eq(res.reg, 0.0, 1e-12);
	/* without -adv the weights are 1/2: (0.693147181 + 1.313261688) / 2 */
	rdps_model_destroy(m);
	m = make_model("DistMult", 2, 2.0f, false, 1.0f, 0, 3);
	res = one_step(m, ent2, 4, rel2, 1, neg2, 2, 1);
	cr_assert_float_eq(res.neg_loss, 1.003204435, 1e-6);
	rdps_model_destroy(m);
}

Test(models, dims_and_names)
{
	uint32_t ed, rd;
	struct rdps_model_params p;
	struct rdps_model *m = (struct rdps_model *)1;

	cr_assert_eq(rdps_model_dims("ComplEx", 400, &ed, &rd), 0);
	cr_assert(ed == 400 && rd == 400);
	cr_assert_eq(rdps_model_dims("RotatE", 400, &ed, &rd), 0);
	cr_assert(ed == 800 && rd == 400);
	cr_assert_eq(rdps_model_dims("RESCAL", 20, &ed, &rd), 0);
	cr_assert(ed == 20 && rd == 400);
	cr_assert_eq(rdps_model_dims("TransE", 7, &ed, &rd), 0);
	cr_assert(ed == 7 && rd == 7);
	cr_assert_eq(rdps_model_dims("ComplEx", 7, &ed, &rd), -EINVAL);
	cr_assert_eq(rdps_model_dims("DistMult", 0, &ed, &rd), -EINVAL);
	cr_assert_eq(rdps_model_dims("TransR", 20, &ed, &rd), 0);
	cr_assert(ed == 20 && rd == 20 + 400);
	cr_assert_eq(rdps_model_dims("SimplE", 20, &ed, &rd), 0);
	cr_assert(ed == 20 && rd == 20);
	cr_assert_eq(rdps_model_dims("SimplE", 7, &ed, &rd), -EINVAL);

	rdps_model_params_init(&p);
	p.name = "TransH";
	cr_assert_eq(rdps_model_create(&m, &p), -EINVAL);
	cr_assert_null(m);
	cr_assert_not_null(strstr(rdps_model_names(), "RotatE"));
	cr_assert_not_null(strstr(rdps_model_names(), "TransE_l2"));
	cr_assert_not_null(strstr(rdps_model_names(), "TransR"));
	cr_assert_not_null(strstr(rdps_model_names(), "SimplE"));
	p.name = "TransE";
	cr_assert_eq(rdps_model_create(&m, &p), 0);
	cr_assert_str_eq(rdps_model_name(m), "TransE_l2");
	cr_assert_eq(rdps_model_kind(m), RDPS_MODEL_TRANSE_L2);
	rdps_model_destroy(m);
	rdps_model_destroy(NULL);
	p.reg_norm = 0;
	cr_assert_eq(rdps_model_create(&m, &p), -EINVAL);
}

/* -de / -dr: the widths DGL-KE's KEModel gives (entity_dim = 2 D with -de,
 * relation_dim = 2 D with -dr; RESCAL relation_dim * entity_dim, TransR's
 * projection entity_dim * relation_dim after the vector), and -EINVAL where
 * DGL-KE's shapes do not match. */
Test(models, dims_double_ent_rel)
{
	static const struct {
		const char *name;
		uint32_t D;
		bool de, dr;
		int ret;
		uint32_t ed, rd;
	} c[] = {
		{ "TransE_l2", 7, false, false, 0, 7, 7 },
		{ "TransE_l2", 7, true, true, 0, 14, 14 },
		{ "TransE_l2", 7, true, false, -EINVAL, 0, 0 },
		{ "TransE_l1", 7, false, true, -EINVAL, 0, 0 },
		{ "DistMult", 6, true, true, 0, 12, 12 },
		{ "DistMult", 6, true, false, -EINVAL, 0, 0 },
		{ "ComplEx", 400, false, false, 0, 400, 400 },
		{ "ComplEx", 7, false, false, -EINVAL, 0, 0 }, /* odd halves */
		{ "ComplEx", 7, true, true, 0, 14, 14 },       /* 7 real + 7 imaginary */
		{ "ComplEx", 8, false, true, -EINVAL, 0, 0 },
		{ "RotatE", 400, false, false, 0, 800, 400 },  /* -de implied */
		{ "RotatE", 400, true, false, 0, 800, 400 },
		{ "RotatE", 400, false, true, -EINVAL, 0, 0 },
		{ "RotatE", 400, true, true, -EINVAL, 0, 0 },
		{ "RESCAL", 20, true, true, 0, 40, 1600 },
		{ "RESCAL", 20, true, false, -EINVAL, 0, 0 },
		{ "TransR", 20, false, false, 0, 20, 20 + 20 * 20 },
		{ "TransR", 20, true, false, 0, 40, 20 + 40 * 20 },
		{ "TransR", 20, false, true, 0, 20, 40 + 20 * 40 },
		{ "TransR", 20, true, true, 0, 40, 40 + 40 * 40 },
		{ "SimplE", 20, false, false, 0, 20, 20 },
		{ "SimplE", 7, true, true, 0, 14, 14 },
		{ "SimplE", 8, true, false, -EINVAL, 0, 0 },
		{ "TransR", 50000, false, false, -EINVAL, 0, 0 }, /* row beyond 2^31 */
	};
	struct rdps_model_params p;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint32_t ed = 0, rd = 0;
		struct rdps_model *m = NULL;

		rdps_model_params_init(&p);
		p.name = c[i].name;
		p.hidden_dim = c[i].D;
		p.double_ent = c[i].de;
		p.double_rel = c[i].dr;
		cr_assert_eq(rdps_model_params_dims(&p, &ed, &rd), c[i].ret, "%s D %u de %d dr %d",
			     c[i].name, c[i].D, c[i].de, c[i].dr);
		cr_assert_eq(rdps_model_create(&m, &p), c[i].ret, "%s", c[i].name);
		if (c[i].ret) {
			cr_assert_null(m);
			continue;
		}
		cr_assert(ed == c[i].ed && rd == c[i].rd, "%s D %u de %d dr %d: %u, %u",
			  c[i].name, c[i].D, c[i].de, c[i].dr, ed, rd);
		cr_assert(rdps_model_entity_dim(m) == ed && rdps_model_relation_dim(m) == rd);
		cr_assert(rdps_model_params(m)->double_ent == c[i].de &&
			  rdps_model_params(m)->double_rel == c[i].dr);
		rdps_model_destroy(m);
	}
	rdps_model_params_init(&p);
	cr_assert(!p.double_ent && !p.double_rel);
	cr_assert_eq(rdps_model_params_dims(NULL, NULL, NULL), -EINVAL);
}

/* How a relation row is saved: one part for every model but TransR, whose
 * projection DGL-KE keeps (and saves, initialises) apart. */
Test(models, relation_parts)
{
	struct rdps_model_rel_part parts[RDPS_MODEL_REL_PARTS_MAX];
	struct rdps_model *m = make_model_de("TransR", 3, 10.0f, false, 1, 0, 3, false, true);

	cr_assert_eq(rdps_model_relation_parts(m, parts), 2);
	cr_assert_str_eq(parts[0].suffix, "_relation");
	cr_assert(parts[0].offset == 0 && parts[0].width == 6 && parts[0].regularized);
	cr_assert_float_eq(parts[0].init_range, 4.0f, 1e-7); /* (10 + 2) / 3 */
	cr_assert_str_eq(parts[1].suffix, "projection"); /* <dataset>_TransRprojection.npy */
	cr_assert(parts[1].offset == 6 && parts[1].width == 3 * 6 && !parts[1].regularized);
	cr_assert_float_eq(parts[1].init_range, 1.0f, 1e-7);
	cr_assert_eq(parts[0].width + parts[1].width, rdps_model_relation_dim(m));
	rdps_model_destroy(m);

	m = make_model("RESCAL", 4, 2.0f, false, 1, 0, 3);
	cr_assert_eq(rdps_model_relation_parts(m, parts), 1);
	cr_assert_str_eq(parts[0].suffix, "_relation");
	cr_assert(parts[0].offset == 0 && parts[0].width == 16 && parts[0].regularized);
	cr_assert_float_eq(parts[0].init_range, rdps_model_emb_init(m), 1e-9);
	rdps_model_destroy(m);
}

/* TransR's regularization counts the relation vector, not the projection
 * (DGL-KE regularizes relation_emb only): by hand, one triple, L2. */
Test(models, transr_regularizes_the_vector_only)
{
	/* D = 1: entities h = 1, t = 2, negative 3; relation (r 0.5, P 2).
	 * reg = 0.1 * (1 + 4 + 9 + 0.25) = 1.425: P's 4 not counted, and its
	 * gradient gets no 0.1 * 2 * 2 */
	float ent[] = { 1, 2, 3 }, rel[] = { 0.5f, 2 };
	uint32_t h = 0, r = 0, t = 1, neg = 2;
	struct rdps_model *m = make_model("TransR", 1, 2.0f, false, 1, 0.1f, 2);
	struct rdps_batch b = { .size = 1, .chunk = 1, .neg = 1, .head = &h, .rel = &r,
				.tail = &t, .neg_ent = &neg, .n_ent_rows = 3, .n_rel_rows = 1 };
	size_t ss = rdps_model_scratch_size(m, 1, 1, 3, 1);
	void *scratch = malloc(ss);
	float eg[3] = { 0 }, rg[2] = { 0 }, rg0[2] = { 0 }, eg0[3] = { 0 };
	struct rdps_step_result res, res0;
	struct rdps_model *m0 = make_model("TransR", 1, 2.0f, false, 1, 0, 2);

	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, &res), 0);
	cr_assert_float_eq(res.reg, 1.425, 1e-6);
	cr_assert_eq(rdps_model_step(m0, &b, ent, rel, eg0, rg0, scratch,
				     rdps_model_scratch_size(m0, 1, 1, 3, 1), &res0), 0);
	cr_assert_float_eq(rg[0] - rg0[0], 0.1 * 2 * 0.5, 1e-6);
	cr_assert_float_eq(rg[1] - rg0[1], 0.0, 1e-7);
	free(scratch);
	rdps_model_destroy(m);
	rdps_model_destroy(m0);
}

Test(models, bad_batches)
{
	struct rdps_model *m = make_model("DistMult", 8, 2.0f, false, 1, 0, 3);
	float ent[3 * 8] = { 0 }, rel[8] = { 0 }, eg[3 * 8] = { 0 }, rg[8] = { 0 };
	uint32_t h = 0, r = 0, t = 1, neg[2] = { 2, 1 };
	struct rdps_batch b = { .size = 1, .chunk = 1, .neg = 2, .head = &h, .rel = &r,
				.tail = &t, .neg_ent = neg, .n_ent_rows = 3,
				.n_rel_rows = 1 };
	size_t ss = rdps_model_scratch_size(m, 1, 2, 3, 1);
	void *scratch = malloc(ss);

	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, NULL), 0);
	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss - 1, NULL),
		     -ENOBUFS);
	neg[1] = 3;
	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, NULL), -EINVAL);
	neg[1] = 1;
	r = 1;
	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, NULL), -EINVAL);
	r = 0;
	b.neg = 0;
	cr_assert_eq(rdps_model_step(m, &b, ent, rel, eg, rg, scratch, ss, NULL), -EINVAL);
	free(scratch);
	rdps_model_destroy(m);
}

/* ---------------------------------------------------------------------- */
/* Evaluation query forms                                                  */
/* ---------------------------------------------------------------------- */

/* Gathers the rows of the test triples and sets them. */
static void eval_set_rows(struct rdps_eval *ev, const struct rdps_model *m,
			  const struct rdps_triple *test, size_t n, const float *ent,
			  const float *rel)
{
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	float *h = malloc((n + 1) * ed * 4), *t = malloc((n + 1) * ed * 4);
	float *r = malloc((n + 1) * rd * 4);

	for (size_t i = 0; i < n; i++) {
		memcpy(h + i * ed, ent + (size_t)test[i].h * ed, ed * 4);
		memcpy(t + i * ed, ent + (size_t)test[i].t * ed, ed * 4);
		memcpy(r + i * rd, rel + (size_t)test[i].r * rd, rd * 4);
	}
	cr_assert_eq(rdps_eval_set_rows(ev, h, r, t), 0);
	free(h), free(r), free(t);
}

/*
 * The evaluator ranks with each model's query form (TransR: candidates
 * projected per relation, queries in relation order): on a random graph
 * whose entity E + k duplicates entity k, (1) the true entity's duplicate
 * ties exactly; (2) 3 threads over candidate chunks of 13 count exactly as
 * one thread over one chunk; (3) the counts agree with a brute force of
 * rdps_model_score() (DGL-KE's edge_func in double) but for candidates
 * within 1e-3 of the true score.
 */
static void eval_check(const char *name, uint32_t D, bool de, bool dr)
{
	enum { E = 61, NREL = 4, NT = 30, NTRAIN = 200 };
	struct rdps_model *m = make_model_de(name, D, 6.0f, false, 1, 0, 3, de, dr);
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	float *ent = malloc((size_t)2 * E * ed * 4), *rel = malloc((size_t)NREL * rd * 4);
	struct rdps_triple test[NT], train[NTRAIN];
	struct rdps_triple_set *f;
	struct rdps_eval *one, *many;
	uint32_t g1[2 * NT], e1[2 * NT], g2[2 * NT], e2[2 * NT];

	for (size_t k = 0; k < (size_t)E * ed; k++)
		ent[k] = (float)(urand() * 2 - 1) * 0.5f;
	memcpy(ent + (size_t)E * ed, ent, (size_t)E * ed * 4);
	for (size_t k = 0; k < (size_t)NREL * rd; k++)
		rel[k] = (float)(urand() * 2 - 1) * 0.5f;
	for (int i = 0; i < NT + NTRAIN; i++) {
		struct rdps_triple x = { (uint32_t)(urand() * E), (uint32_t)(urand() * NREL),
					 (uint32_t)(urand() * E) };
		if (i < NT)
			test[i] = x;
		else
			train[i - NT] = x;
	}
	cr_assert_eq(rdps_triple_set_create(&f, NT + NTRAIN), 0);
	cr_assert(rdps_triple_set_add(f, train, NTRAIN) >= 0);
	cr_assert(rdps_triple_set_add(f, test, NT) >= 0);

	struct rdps_eval_params p = { .model = m, .test = test, .n_test = NT, .filter = f,
				      .n_entities = 2 * E, .num_threads = 1 };
	cr_assert_eq(rdps_eval_create(&one, &p), 0);
	p.num_threads = 3;
	cr_assert_eq(rdps_eval_create(&many, &p), 0);
	eval_set_rows(one, m, test, NT, ent, rel);
	eval_set_rows(many, m, test, NT, ent, rel);
	cr_assert_eq(rdps_eval_add_candidates(one, 0, ent, 2 * E), 0);
	for (uint32_t c = 0; c < 2 * E; c += 13) {
		uint32_t n = 2 * E - c < 13 ? 2 * E - c : 13;
		cr_assert_eq(rdps_eval_add_candidates(many, c, ent + (size_t)c * ed, n), 0);
	}
	rdps_eval_get_counts(one, g1, e1);
	rdps_eval_get_counts(many, g2, e2);
	cr_assert(memcmp(g1, g2, sizeof(g1)) == 0 && memcmp(e1, e2, sizeof(e1)) == 0,
		  "%s: chunked/threaded counts differ", name);

	for (int q = 0; q < 2 * NT; q++) {
		const struct rdps_triple *x = &test[q % NT];
		int head = q >= NT;
		uint32_t truth = head ? x->h : x->t, gt = 0, eq = 0, near = 0;
		const float *r = rel + (size_t)x->r * rd;
		double sp = rdps_model_score(m, ent + (size_t)x->h * ed, r,
					     ent + (size_t)x->t * ed);

		cr_assert_geq(e1[q], 1, "%s q%d: duplicate of the true entity did not tie",
			      name, q);
		for (uint32_t c = 0; c < 2 * E; c++) {
			if (c == truth ||
			    (head ? rdps_triple_set_contains(f, c, x->r, x->t)
				  : rdps_triple_set_contains(f, x->h, x->r, c)))
				continue;
			const float *cr = ent + (size_t)c * ed;
			double sc = head ? rdps_model_score(m, cr, r, ent + (size_t)x->t * ed)
					 : rdps_model_score(m, ent + (size_t)x->h * ed, r, cr);
			if (c % E == truth % E)
				eq++;
			else if (fabs(sc - sp) < 1e-3)
				near++;
			else
				gt += sc > sp;
		}
		cr_assert(g1[q] + e1[q] >= gt + eq && g1[q] + e1[q] <= gt + eq + near,
			  "%s q%d: gt %u eq %u, brute force gt %u eq %u near %u", name, q,
			  g1[q], e1[q], gt, eq, near);
	}
	rdps_eval_destroy(one);
	rdps_eval_destroy(many);
	rdps_triple_set_destroy(f);
	free(ent), free(rel);
	rdps_model_destroy(m);
}

Test(models, eval_query_form_transr)
{
	eval_check("TransR", 7, false, false);
	eval_check("TransR", 16, false, false);
	eval_check("TransR", 5, true, false);
	eval_check("TransR", 5, false, true);
}

Test(models, eval_query_form_simple)
{
	eval_check("SimplE", 12, false, false);
	eval_check("SimplE", 9, true, true);
}

/* The other models' query forms with -de -dr (rows 2 D wide). */
Test(models, eval_query_form_double)
{
	eval_check("TransE_l1", 5, true, true);
	eval_check("TransE_l2", 5, true, true);
	eval_check("DistMult", 5, true, true);
	eval_check("ComplEx", 5, true, true);
	eval_check("RESCAL", 3, true, true);
	eval_check("RotatE", 5, true, false);
}
