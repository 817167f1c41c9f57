/* SPDX-License-Identifier: MIT */
/*
 * KGE model kernels: scores against hand-computed values, batch losses
 * against hand-computed values, and every model's gradients against central
 * finite differences of an independent double-precision reference of
 * DGL-KE's loss (chunked negatives, head and tail corruption, with and
 * without -adv, with L2/L3 regularization).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/trainer.h"

static struct rdps_model *make_model(const char *name, uint32_t dim, float gamma,
				     bool adv, float temp, float coef, float p)
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
	cr_assert_eq(rdps_model_create(&m, &mp), 0, "create %s", name);
	return m;
}

/* ---------------------------------------------------------------------- */
/* Independent reference (double)                                          */
/* ---------------------------------------------------------------------- */

/* DGL-KE edge_func in double; the RotatE phase uses emb_init. */
static double ref_score(const char *name, uint32_t D, double gamma,
			const double *h, const double *r, const double *t)
{
	double s = 0;

	if (!strcmp(name, "TransE_l1") || !strcmp(name, "TransE_l2")) {
		bool l1 = !strcmp(name, "TransE_l1");
		for (uint32_t k = 0; k < D; k++) {
			double d = h[k] + r[k] - t[k];
			s += l1 ? fabs(d) : d * d;
		}
		return gamma - (l1 ? s : sqrt(s));
	}
	if (!strcmp(name, "DistMult")) {
		for (uint32_t k = 0; k < D; k++)
			s += h[k] * r[k] * t[k];
		return s;
	}
	if (!strcmp(name, "ComplEx")) {
		uint32_t K = D / 2;
		for (uint32_t k = 0; k < K; k++)
			s += h[k] * t[k] * r[k] + h[K + k] * t[K + k] * r[k] +
			     h[k] * t[K + k] * r[K + k] - h[K + k] * t[k] * r[K + k];
		return s;
	}
	if (!strcmp(name, "RotatE")) {
		double emb_init = (gamma + 2.0) / D;
		for (uint32_t k = 0; k < D; k++) {
			double ph = r[k] / (emb_init / M_PI);
			double re = h[k] * cos(ph) - h[D + k] * sin(ph) - t[k];
			double im = h[k] * sin(ph) + h[D + k] * cos(ph) - t[D + k];
			s += sqrt(re * re + im * im);
		}
		return gamma - s;
	}
	/* RESCAL: h^T M t, M row-major D x D */
	for (uint32_t a = 0; a < D; a++)
		for (uint32_t c = 0; c < D; c++)
			s += h[a] * r[a * D + c] * t[c];
	return s;
}

static double ref_logsig(double x)
{
	return x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x));
}

struct refcase {
	const char *name;
	uint32_t D, ed, rd;
	double gamma, temp, coef, p;
	bool adv;
	uint32_t B, chunk, N, nent, nrel;
	int neg_head;
	const uint32_t *h, *r, *t, *neg;
};

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
		pos += -ref_logsig(ref_score(c->name, c->D, c->gamma, h, r, t));
		for (uint32_t j = 0; j < c->N; j++) {
			const double *e = ent + ng[j] * c->ed;
			s[j] = c->neg_head ? ref_score(c->name, c->D, c->gamma, e, r, t)
					   : ref_score(c->name, c->D, c->gamma, h, r, e);
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
			for (uint32_t k = 0; k < c->rd; k++)
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

/* Runs rdps_model_step on a random batch and compares loss and every
 * gradient entry with the reference and its central differences. */
static void check_gradients(const char *name, uint32_t D, float gamma, bool adv,
			    float coef, float p, int neg_head)
{
	struct rdps_model *m = make_model(name, D, gamma, adv, 0.7f, coef, p);
	const uint32_t B = 5, chunk = 2, N = 3, nent = 7, nrel = 3;
	uint32_t h[5], r[5], t[5], neg[9]; /* 3 chunks x 3 */
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	size_t ne = (size_t)nent * ed, nr = (size_t)nrel * rd;
	float *ent = malloc(ne * 4), *rel = malloc(nr * 4);
	float *eg = calloc(ne, 4), *rg = calloc(nr, 4);
	double *entd = malloc(ne * 8), *reld = malloc(nr * 8), *w = malloc(B * N * 8);
	double scale = !strcmp(name, "RotatE") ? 1.0 : 0.6;
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

	c = (struct refcase){ .name = name, .D = D, .ed = ed, .rd = rd, .gamma = gamma,
			      .temp = 0.7, .coef = coef, .p = p, .adv = adv, .B = B,
			      .chunk = chunk, .N = N, .nent = nent, .nrel = nrel,
			      .neg_head = neg_head, .h = h, .r = r, .t = t, .neg = neg };
	double L = ref_loss(&c, entd, reld, w, true);
	cr_assert(fabs(res.loss - L) <= 1e-5 * (1 + fabs(L)),
		  "%s head=%d adv=%d: loss %.9g vs reference %.9g", name, neg_head,
		  adv, res.loss, L);
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
				  "%s head=%d adv=%d coef=%g p=%g: d/d%s[%zu] = %.8g, "
				  "finite difference %.8g", name, neg_head, adv, coef,
				  p, which ? "rel" : "ent", k, g[k], fd);
		}
	}
	free(ent), free(rel), free(eg), free(rg), free(entd), free(reld), free(w);
	free(scratch);
	rdps_model_destroy(m);
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
				     .gamma = 4.0, .temp = 1.0, .coef = 1e-3, .p = 3,
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
	static const char *names[] = { "TransE_l1", "TransE_l2", "DistMult",
				       "ComplEx", "RotatE", "RESCAL" };
	for (size_t i = 0; i < 6; i++)
		check_big_chunk(names[i], 24, 4);
}

/* RESCAL's blocked relation kernels take groups of 4 or more positives of
 * one relation: all 11 in one relation, then in 2. */
Test(models, gradients_rescal_groups)
{
	check_big_chunk("RESCAL", 18, 1);
	check_big_chunk("RESCAL", 24, 2);
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

	rdps_model_params_init(&p);
	p.name = "TransH";
	cr_assert_eq(rdps_model_create(&m, &p), -EINVAL);
	cr_assert_null(m);
	cr_assert_not_null(strstr(rdps_model_names(), "RotatE"));
	cr_assert_not_null(strstr(rdps_model_names(), "TransE_l2"));
	p.name = "TransE";
	cr_assert_eq(rdps_model_create(&m, &p), 0);
	cr_assert_str_eq(rdps_model_name(m), "TransE_l2");
	cr_assert_eq(rdps_model_kind(m), RDPS_MODEL_TRANSE_L2);
	rdps_model_destroy(m);
	rdps_model_destroy(NULL);
	p.reg_norm = 0;
	cr_assert_eq(rdps_model_create(&m, &p), -EINVAL);
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
