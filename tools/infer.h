/* SPDX-License-Identifier: MIT */
/* Shared by rdps predict and rdps emb_sim (and eval's argument lists):
 * DGL-KE's multi-valued flags, a top-K selection and Python's float repr. */
#ifndef RDPS_TOOLS_INFER_H
#define RDPS_TOOLS_INFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define INFER_MAX_FILES 8

/* DGL-KE's nargs='+' (--data_files a b c): inside a getopt loop whose
 * optstring starts with "+", takes optarg and every following argument
 * that does not start with '-', advancing optind. Returns the count, or -1
 * (message printed, prefixed by cmd) for more than INFER_MAX_FILES. */
int infer_nargs(const char *cmd, int argc, char **argv, const char **files);

/* The best k of a stream of (score, index): higher scores first, equal
 * scores by lower index (DGL-KE's argsort leaves that order open). NaN
 * scores are never kept. */
struct infer_topk {
	struct infer_item {
		double score;
		uint64_t idx;
	} *items;
	size_t n; /* kept so far */
	size_t k;
};

int infer_topk_init(struct infer_topk *t, size_t k); /* 0 or -ENOMEM */
void infer_topk_push(struct infer_topk *t, double score, uint64_t idx);
/* Sorts the kept items best first; returns their count. Push again only
 * after infer_topk_reset(). */
size_t infer_topk_sort(struct infer_topk *t);
void infer_topk_reset(struct infer_topk *t);
void infer_topk_free(struct infer_topk *t);

/* What Python prints for a float32 score DGL-KE writes (its .tolist()
 * makes it a double): repr((double)(float)v), the shortest digits that
 * read back, fixed notation for exponents -4..15. */
void infer_repr_f32(double v, char *buf, size_t len);

/* The --output file of rdps CMD, its header line written; NULL after
 * printing why. */
FILE *infer_output_open(const char *cmd, const char *path, const char *header);

/* Flushes and closes it (f may be NULL): 0, or -1 after printing why. */
int infer_output_close(const char *cmd, const char *path, FILE *f);

/* Writes "Inference Done" and where the result went, as DGL-KE does. */
void infer_done(const char *output);

#endif
