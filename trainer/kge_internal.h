/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between the KGE model kernels (models.c) and the
 * evaluator (eval.c). Not installed, not part of the public API.
 */
#ifndef RDPS_TRAINER_KGE_INTERNAL_H
#define RDPS_TRAINER_KGE_INTERNAL_H

#include <stdint.h>

#include "rdps/trainer.h"

#include <stddef.h>

/*
 * Query form of a model: every score is score(q, c) where q is built from
 * the two known parts of a triple and c is the candidate entity row:
 *   tail side (h, r, ?): q = query(h, r); head side (?, r, t): q = query(t, r).
 * q has entity_dim floats; tmp has rdps_kge_query_tmp(m) floats (may be
 * NULL when that is 0).
 */
size_t rdps_kge_query_tmp(const struct rdps_model *m);
void rdps_kge_query(const struct rdps_model *m, int head_side, const float *x,
		    const float *r, float *q, float *tmp);

/*
 * Scores nq queries (rows of q, stride entity_dim) against nc candidates
 * (rows of c, stride entity_dim) into out[i * nc + j]. Every pair is
 * computed with the same arithmetic whatever nq, nc and its position, so a
 * score computed alone equals the same pair's score inside a tile, bit for
 * bit. Pure; callable from any thread.
 */
void rdps_kge_score_tile(const struct rdps_model *m, const float *q,
			 uint32_t nq, const float *c, uint32_t nc, float *out);

#endif /* RDPS_TRAINER_KGE_INTERNAL_H */
