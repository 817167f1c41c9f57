/* SPDX-License-Identifier: MIT */
/*
 * Internal: the vector kernels the KGE model families share, all static
 * inline so that each family's step and tile functions inline them with
 * their pair form as a constant ("specialise hot variants": one body,
 * constant flags, thin wrappers chosen before the loop).
 *
 * Every model is written in "query form": for a positive (h, r, t) whose
 * tail (resp. head) is corrupted, a query vector q = query(h, r) (resp.
 * query(t, r)) is built once, and the positive and all negatives of its chunk
 * are pair scores s(q, e) against entity rows e (TransR: projected rows).
 * Four pair forms cover the models:
 *
 *   DOT  s = q . e                        DistMult, ComplEx, RESCAL, SimplE
 *   L2   s = gamma - ||q - e||_2          TransE_l2
 *   L1   s = gamma - ||q - e||_1          TransE_l1, TransR
 *   ROT  s = gamma - sum_k |q_k - e_k|    RotatE (complex modulus)
 *
 * For DOT and L2 the chunk x N negative scores are one matrix product
 * S = Q E^T (L2 through |q|^2 + |e|^2 - 2 q.e, clamped at 1e-30 before the
 * square root as DGL-KE's batched_l2_dist), and the backward pass is two
 * more products (G E and G^T Q). L1 and ROT are pairwise kernels (RotatE's
 * own blocked kernels are in model_rotate.c). Positives use the same pair
 * forms, with DGL-KE's plain norm (no clamp). SimplE clamps its DOT scores
 * to [-20, 20] as DGL-KE does (no gradient outside).
 *
 * Speed: the hot functions are compiled twice (x86-64-v3 with AVX2 + FMA,
 * and the baseline) and picked at load time by ifunc (target_clones); the
 * inner loops use 8-float GCC vector types with several independent
 * accumulators, so float reductions vectorise without -ffast-math. Files
 * including this header allow FMA contraction (fp-contract=fast) from here
 * on: include it after the system headers.
 */
#ifndef RDPS_TRAINER_MODEL_KERNELS_H
#define RDPS_TRAINER_MODEL_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "model_ops.h"

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

/* SimplE's clamp of a score to [-20, 20] (DGL-KE's th.clamp), and whether it
 * let s through: torch's clamp has gradient 1 on [-20, 20] (bounds
 * included) and 0 outside. */
RDPS_AI float kge_clamp20(float s)
{
	return s < -20.0f ? -20.0f : s > 20.0f ? 20.0f : s;
}

RDPS_AI bool kge_in20(float s)
{
	return s >= -20.0f && s <= 20.0f;
}

/* ------------------------------------------------------------------------ */
/* Evaluation tile                                                           */
/* ------------------------------------------------------------------------ */

#define TILE_PTRS 64

/* out[a * nc + b] = score(q_a, c_b), rows of n floats: pair_matrix on tiles
 * of 64 x 64 row pointers. clamp: SimplE's [-20, 20]. */
RDPS_AI void kge_score_tile(enum pair_form form, bool clamp, float gamma, uint32_t n,
			    const float *q, uint32_t nq, const float *c, uint32_t nc,
			    float *out)
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
			pair_matrix(form, qp, na, cp, nb, n, o, nc);
			for (uint32_t a = 0; a < na; a++)
				for (uint32_t b = 0; b < nb; b++) {
					float s = finish_score(form, gamma, o[(size_t)a * nc + b]);
					o[(size_t)a * nc + b] = clamp ? kge_clamp20(s) : s;
				}
		}
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
 * Products with a relation matrix M (nr rows of nc floats: RESCAL's n x n,
 * TransR's E x R projection) for a group of g rows, all rows given by
 * pointers. Each reads M (or its gradient) once, in the order the hardware
 * prefetcher follows or with software prefetches of the next block of rows,
 * since with many relations M comes from L3 or memory.
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

/* Y_i += sum_a W_i[a] M[a] for i < g, a < nr. By strips of 16 columns, so that the
 * g strips of Y stay in L1 while the strips of M's rows stream by, 4 rows in
 * registers at a time; each Y_i[k] takes the terms in the order of a. */
RDPS_AI void rows_axpy(float *const *Y, const float *const *W, uint32_t g,
		       const float *const *M, uint32_t nr, uint32_t nc)
{
	uint32_t n16 = nc & ~15u, k;

	for (k = 0; k < n16; k += 16) {
		uint32_t a = 0;
		for (; a + 4 <= nr; a += 4)
			axpy_strip(4, Y, W, g, M, a, k);
		for (; a < nr; a++)
			axpy_strip(1, Y, W, g, M, a, k);
	}
	for (; k < nc; k++)
		for (uint32_t i = 0; i < g; i++) {
			float y = Y[i][k];
			for (uint32_t a = 0; a < nr; a++)
				y += W[i][a] * M[a][k];
			Y[i][k] = y;
		}
}

/* Y_i[a] += M[a] . V_i for a < nr, i < g: pair_block on 4 rows of M and 2
 * V_i at a time; the next 4 rows of M are prefetched along the way. */
RDPS_AI void dot_rows_acc(float *const *Y, const float *const *M,
			  const float *const *V, uint32_t g, uint32_t nr, uint32_t nc)
{
	uint32_t lines = (nc + 15) / 16, npf = (4 * lines + g / 2) / (g / 2 + 1) + 1;
	float o[4][2];

	for (uint32_t a0 = 0; a0 < nr; a0 += 4) {
		uint32_t i = 0, pl = 0, pn = a0 + 8 <= nr ? 4 * lines : 0;
		if (a0 + 4 > nr) {
			for (; a0 < nr; a0++)
				for (i = 0; i < g; i++) {
					pair_block(FORM_DOT, 1, 1, M + a0, V + i, nc, o);
					Y[i][a0] += o[0][0];
				}
			break;
		}
		for (; i + 2 <= g; i += 2) {
			for (uint32_t c = 0; c < npf && pl < pn; c++, pl++)
				__builtin_prefetch(M[a0 + 4 + pl / lines] + (pl % lines) * 16);
			pair_block(FORM_DOT, 4, 2, M + a0, V + i, nc, o);
			for (int x = 0; x < 4; x++) {
				Y[i][a0 + x] += o[x][0];
				Y[i + 1][a0 + x] += o[x][1];
			}
		}
		if (i < g) {
			pair_block(FORM_DOT, 4, 1, M + a0, V + i, nc, o);
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

/* Y[a] += sum_i U_i[a] V_i for a < nr (rows of nc floats): the relation
 * gradient's update. */
RDPS_AI void outer_rows_acc(float *const *Y, const float *const *U,
			    const float *const *V, uint32_t g, uint32_t nr, uint32_t nc)
{
	uint32_t a = 0;
	for (; a + 4 <= nr; a += 4)
		outer_rows_block(4, Y + a, U, a, V, g, nc,
				 a + 8 <= nr ? Y + a + 4 : NULL);
	for (; a < nr; a++)
		outer_rows_block(1, Y + a, U, a, V, g, nc, NULL);
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
/* One chunk                                                                 */
/* ------------------------------------------------------------------------ */

/* Row pointers of the chunk of positives i0 .. i0 + C - 1 for query-form
 * families: query i in row i of Q and GQ (GQ's C rows zeroed), the true
 * entity (tail, or head with neg_head) and the negatives neg. The family
 * builds the queries into sc->Q rows. */
RDPS_AI void kge_chunk_rows(const struct step_args *A, uint32_t i0, uint32_t C,
			    const uint32_t *neg)
{
	const struct rdps_batch *b = A->b;
	struct step_scratch *sc = A->sc;
	uint32_t n = A->m->ent_dim;
	int hs = b->neg_head != 0;

	for (uint32_t i = 0; i < C; i++) {
		uint32_t y = hs ? b->head[i0 + i] : b->tail[i0 + i];
		sc->qp[i] = sc->Q + (size_t)i * n;
		sc->gqp[i] = sc->GQ + (size_t)i * n;
		sc->xp[i] = A->ent + (size_t)y * n;
		sc->gxp[i] = A->eg + (size_t)y * n;
	}
	memset(sc->GQ, 0, (size_t)C * n * sizeof(float));
	for (uint32_t j = 0; j < b->neg; j++) {
		sc->ep[j] = A->ent + (size_t)neg[j] * n;
		sc->gep[j] = A->eg + (size_t)neg[j] * n;
	}
}

/*
 * The loss and pair gradients of C queries (rows sc->qp, n floats) against
 * their true entities (sc->xp) and the chunk's N negatives (sc->ep), for the
 * DOT, L2 and L1 forms: adds -logsigmoid of the positives to *pos_sum and
 * the weighted negative terms to *neg_sum, dL/dq to sc->gqp, dL/de to
 * sc->gxp and sc->gep. Then the family takes dL/dq through its query.
 * clamp (DOT): SimplE's [-20, 20], no gradient outside.
 */
RDPS_AI void kge_chunk_pairs(enum pair_form form, bool clamp, const struct step_args *A,
			     uint32_t C, uint32_t n, double *pos_sum, double *neg_sum)
{
	const struct rdps_model *m = A->m;
	struct step_scratch *sc = A->sc;
	uint32_t N = A->b->neg;
	float gamma = m->p.gamma, k = 0.5f / (float)A->b->size;

	/* positives: p = s(q, y); dL/dp = -k * sigmoid(-p) */
	for (uint32_t i = 0; i < C; i++) {
		float o[4][2], p, ls, sg;
		bool in = true;
		pair_block(form, 1, 1, sc->qp + i, sc->xp + i, n, o);
		p = finish_score(form, gamma, o[0][0]);
		if (clamp) {
			in = kge_in20(p);
			p = kge_clamp20(p);
		}
		logsig(p, &ls, &sg);
		*pos_sum -= ls;
		sc->pos[i] = in ? -k * sg : 0.0f;
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
	} else {
		for (uint32_t i = 0; i < C; i++)
			l1_backward_rows(1, sc->qp + i, sc->gqp + i, sc->pos + i, 1,
					 sc->xp + i, sc->gxp + i, 1, n);
	}

	/* negatives */
	if (form == FORM_L2 || form == FORM_DOT) {
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
					bool cl = !(d2 >= 1e-30f);
					float d = cl ? 1e-15f : sqrtf(d2);
					s[j] = gamma - d;
					dist[j] = cl ? 0.0f : d;
				}
			}
		} else if (clamp) {
			/* raw scores in DIST, for the gradient's mask */
			for (size_t x = 0; x < (size_t)C * N; x++) {
				sc->DIST[x] = sc->S[x];
				sc->S[x] = kge_clamp20(sc->S[x]);
			}
		}
	} else {
		pair_matrix(form, sc->qp, C, sc->ep, N, n, sc->S, N);
		for (size_t x = 0; x < (size_t)C * N; x++)
			sc->S[x] = gamma - sc->S[x];
	}

	/* loss rows: S becomes dL/ds */
	for (uint32_t i = 0; i < C; i++)
		*neg_sum += neg_row_loss(m, sc->S + (size_t)i * N, sc->wbuf, N, k);
	if (clamp)
		for (size_t x = 0; x < (size_t)C * N; x++)
			if (!kge_in20(sc->DIST[x]))
				sc->S[x] = 0.0f;

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
	} else {
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
}

/* A family's query q = f(x, r) and its gradient back to x and r. */
typedef void (*kge_query_fn)(uint32_t n, int head_side, const float *restrict x,
			     const float *restrict r, float *restrict q);
typedef void (*kge_query_back_fn)(uint32_t n, int head_side, const float *restrict x,
				  const float *restrict r, const float *restrict gq,
				  float *restrict gx, float *restrict gr);

/*
 * The step of the families whose pairs are (query of the kept entity and
 * the relation, a candidate entity) in one form: per chunk, its rows, the
 * queries, the pair kernel, then each query's gradient back through f.
 * Called with constant form, clamp, query and back, so each family's step
 * compiles to its own specialised loop (always inlined: no indirect calls).
 */
RDPS_AI void kge_query_step(enum pair_form form, bool clamp, kge_query_fn query,
			    kge_query_back_fn back, const struct step_args *A, double *pos_sum,
			    double *neg_sum)
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

			query(n, hs, A->ent + (size_t)x * n, A->rel + (size_t)b->rel[i0 + i] * rd,
			      sc->Q + (size_t)i * n);
		}
		kge_chunk_pairs(form, clamp, A, C, n, pos_sum, neg_sum);
		for (uint32_t i = 0; i < C; i++) {
			uint32_t x = hs ? b->tail[i0 + i] : b->head[i0 + i], r = b->rel[i0 + i];

			back(n, hs, A->ent + (size_t)x * n, A->rel + (size_t)r * rd, sc->gqp[i],
			     A->eg + (size_t)x * n, A->rg + (size_t)r * rd);
		}
	}
}

#endif /* RDPS_TRAINER_MODEL_KERNELS_H */
