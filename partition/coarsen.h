/* SPDX-License-Identifier: MIT */
/* Internal: coarsening a graph before METIS (coarsen.c). */
#ifndef RDPS_PARTITION_COARSEN_H
#define RDPS_PARTITION_COARSEN_H

#include <metis.h>
#include <stdint.h>

/* A METIS graph: CSR, symmetric, no self-loops; two weights per vertex
 * (entities, train triples headed by it). */
struct rdps_pt_graph {
	uint32_t n;
	uint64_t entries;     /* adjacency entries */
	uint32_t max_degree;
	idx_t *xadj;          /* n + 1 */
	idx_t *adjncy;        /* entries */
	idx_t *adjwgt;        /* entries: triples on the edge */
	idx_t *vwgt;          /* 2 n */
};

struct rdps_pt_cluster_opts {
	uint32_t rounds;        /* label propagation sweeps (at most) */
	uint32_t max_entities;  /* cluster weight bounds */
	uint64_t max_heads;
	uint64_t seed;
	/* Called after each sweep with the vertices it moved (may be NULL). */
	void (*progress)(void *ctx, uint32_t round, uint64_t moved);
	void *progress_ctx;
};

/* Size-constrained label propagation: label[v] in 0..*nclusters-1, in
 * order of clusters' first vertices. 0 or -ENOMEM. */
int rdps_pt_cluster(const struct rdps_pt_graph *g, const struct rdps_pt_cluster_opts *o,
		    uint32_t *label, uint32_t *nclusters);

/* The graph of the clusters: vertex weights summed, edges between clusters
 * merged (their weights summed), edges inside a cluster dropped. 0,
 * -ENOMEM, or -EOVERFLOW (more adjacency entries than idx_t holds). */
int rdps_pt_contract(const struct rdps_pt_graph *g, const uint32_t *label, uint32_t nc,
		     struct rdps_pt_graph *out);

struct rdps_pt_refine_opts {
	uint32_t rounds;          /* sweeps (at most) */
	uint64_t max_entities;    /* a part's bounds (METIS's balance) */
	uint64_t max_heads;
	uint64_t seed;
	void (*progress)(void *ctx, uint32_t round, uint64_t moved);
	void *progress_ctx;
};

/* Greedy refinement of a k-way partition of g: in a few sweeps each
 * vertex moves to the part its edges weigh most into when that cuts
 * fewer edges and keeps the part within the bounds. A vertex scans k
 * parts: for the small k of parameter servers. 0 or -ENOMEM. */
int rdps_pt_refine(const struct rdps_pt_graph *g, uint32_t k, uint32_t *part,
		   const struct rdps_pt_refine_opts *o, uint64_t *moved);

/* Frees the arrays of g (accepts a zeroed graph). */
void rdps_pt_graph_free(struct rdps_pt_graph *g);

#endif
