/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between the KGE models (models.c and the families'
 * model_*.c, through their ops tables) and the evaluator (eval.c). Not
 * installed, not part of the public API.
 */
#ifndef RDPS_TRAINER_KGE_INTERNAL_H
#define RDPS_TRAINER_KGE_INTERNAL_H

#include <stdint.h>

#include "rdps/trainer.h"

#include <stddef.h>

/*
 * Query form of a model: every score is score(q, c) where q is built from
 * the two known parts of a triple and c is the candidate entity row (in
 * query space, see rdps_kge_cand_rows):
 *   tail side (h, r, ?): q = query(h, r); head side (?, r, t): q = query(t, r).
 * q has rdps_kge_query_dim(m) floats (entity_dim but for TransR); tmp has
 * rdps_kge_query_tmp(m) floats (may be NULL when that is 0).
 */
uint32_t rdps_kge_query_dim(const struct rdps_model *m);
size_t rdps_kge_query_tmp(const struct rdps_model *m);
void rdps_kge_query(const struct rdps_model *m, int head_side, const float *x,
		    const float *r, float *q, float *tmp);

/*
 * Candidates in query space. Models whose candidates depend on the relation
 * (TransR: c P_r) need ctx, rdps_kge_cand_ctx_size(m) floats per relation
 * (0 for the others: then candidates are scored as they are and ctx may be
 * NULL): a copy of the relation row's first ctx_size floats. out (count x
 * query_dim) from rows (count x entity_dim); a row's result does not depend
 * on count or its position. Pure; callable from any thread.
 */
size_t rdps_kge_cand_ctx_size(const struct rdps_model *m);
void rdps_kge_cand_rows(const struct rdps_model *m, const float *ctx, const float *rows,
			uint32_t count, float *out);

/*
 * Scores nq queries (rows of q, stride query_dim) against nc candidates
 * (rows of c in query space, stride query_dim) into out[i * nc + j]. Every
 * pair is computed with the same arithmetic whatever nq, nc and its
 * position, so a score computed alone equals the same pair's score inside a
 * tile, bit for bit. Pure; callable from any thread.
 */
void rdps_kge_score_tile(const struct rdps_model *m, const float *q,
			 uint32_t nq, const float *c, uint32_t nc, float *out);

#endif /* RDPS_TRAINER_KGE_INTERNAL_H */
