// SPDX-License-Identifier: MIT
/*
 * Coarsening before METIS, for graphs whose METIS run would not fit in
 * memory: METIS_PartGraphKway needs several times the input graph (its
 * coarsening levels, refinement state and work space: 6.7x the CSR graph of
 * a 10M-triple graph was measured), so a Freebase-sized graph (86M
 * vertices, ~600M adjacency entries) would need tens of GiB.
 *
 * Size-constrained label propagation (Meyerhenke, Sanders and Schulz's
 * SCLaP, as KaHIP coarsens social networks): every vertex starts in a
 * cluster of its own, and in a few sweeps each vertex moves to the cluster
 * its edges weigh most into, unless that would take the cluster over a
 * weight bound (in both of METIS's constraints: entities and triples), so
 * the coarse graph stays balanceable. Clusters become the vertices of a
 * coarse graph (weights summed, parallel edges merged), METIS partitions
 * that, and each vertex takes its cluster's part. Memory: the fine graph
 * plus a few n-sized arrays while clustering and contracting, then only
 * the coarse graph when METIS runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coarsen.h"
#include "internal.h"

/* A bijection of [0, n): visiting order of a sweep (no stored permutation). */
static inline uint64_t visit(uint64_t i, uint64_t n, uint64_t a, uint64_t b)
{
	return (i * a + b) % n;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

int rdps_pt_cluster(const struct rdps_pt_graph *g, const struct rdps_pt_cluster_opts *o,
		    uint32_t *label, uint32_t *nclusters)
{
	uint32_t n = g->n, *size = NULL, *heads = NULL, *touched = NULL;
	uint32_t *acc = NULL; /* a vertex's triples per cluster: < 2^32 */
	uint64_t s = o->seed | 1;
	int ret = -ENOMEM;

	size = malloc((size_t)n * sizeof(uint32_t));
	heads = malloc((size_t)n * sizeof(uint32_t));
	acc = calloc(n, sizeof(uint32_t));
	touched = malloc(((size_t)g->max_degree + 1) * sizeof(uint32_t));
	if (!size || !heads || !acc || !touched)
		goto out;
	/* A cluster's weights: entities and triples (a vertex of a coarse
	 * graph is a cluster already). */
	for (uint32_t v = 0; v < n; v++) {
		label[v] = v;
		size[v] = (uint32_t)g->vwgt[2 * v];
		heads[v] = (uint32_t)g->vwgt[2 * v + 1];
	}
	for (uint32_t round = 0; round < o->rounds && n > 1; round++) {
		/* A fresh stride coprime with n each sweep. */
		uint64_t a = rdps_pt_splitmix(&s) % n, b = rdps_pt_splitmix(&s) % n, moved = 0;

		while (gcd(a, n) != 1)
			a = (a + 1) % n;
		for (uint64_t i = 0; i < n; i++) {
			uint32_t v = (uint32_t)visit(i, n, a, b), cur = label[v], best = cur, nt = 0;
			uint32_t vents = (uint32_t)g->vwgt[2 * v], vheads = (uint32_t)g->vwgt[2 * v + 1];
			uint64_t best_w = 0;

			for (idx_t e = g->xadj[v]; e < g->xadj[v + 1]; e++) {
				uint32_t c = label[g->adjncy[e]];

				if (!acc[c])
					touched[nt++] = c;
				acc[c] += (uint32_t)g->adjwgt[e];
			}
			/* Staying counts its own weight; a move must beat it. */
			best_w = acc[cur];
			for (uint32_t k = 0; k < nt; k++) {
				uint32_t c = touched[k];
				uint64_t w = acc[c];

				acc[c] = 0;
				/* Heavier, or as heavy and larger: on sparse graphs
				 * (most edges of weight 1) ties are the rule, and
				 * joining the larger cluster lets clusters grow
				 * instead of pairing off. */
				if (c == cur || w < best_w ||
				    (w == best_w && size[c] <= size[best]))
					continue;
				if ((uint64_t)size[c] + vents > o->max_entities ||
				    (uint64_t)heads[c] + vheads > o->max_heads)
					continue;
				best = c;
				best_w = w;
			}
			if (best != cur) {
				size[cur] -= vents;
				heads[cur] -= vheads;
				size[best] += vents;
				heads[best] += vheads;
				label[v] = best;
				moved++;
			}
		}
		if (o->progress)
			o->progress(o->progress_ctx, round + 1, moved);
		if (!moved)
			break;
	}
	/* Clusters numbered 0..C-1 in order of their first vertex. */
	{
		uint32_t c = 0;

		for (uint32_t v = 0; v < n; v++)
			size[v] = UINT32_MAX;
		for (uint32_t v = 0; v < n; v++) {
			if (size[label[v]] == UINT32_MAX)
				size[label[v]] = c++;
			label[v] = size[label[v]];
		}
		*nclusters = c;
	}
	ret = 0;
out:
	free(size);
	free(heads);
	free(acc);
	free(touched);
	return ret;
}

/* The coarse vertices' edges into adjncy/adjwgt (or only counted if NULL):
 * returns the number of adjacency entries. */
static uint64_t contract_edges(const struct rdps_pt_graph *g, const uint32_t *label,
			       const uint32_t *order, const uint32_t *first, uint32_t nc,
			       uint64_t *acc, uint32_t *touched, idx_t *xadj, idx_t *adjncy,
			       idx_t *adjwgt)
{
	uint64_t w = 0;

	for (uint32_t c = 0; c < nc; c++) {
		uint32_t nt = 0;

		if (xadj)
			xadj[c] = (idx_t)w;
		for (uint32_t i = first[c]; i < first[c + 1]; i++) {
			uint32_t v = order[i];

			for (idx_t e = g->xadj[v]; e < g->xadj[v + 1]; e++) {
				uint32_t d = label[g->adjncy[e]];

				if (d == c)
					continue; /* inside the cluster: no coarse edge */
				if (!acc[d])
					touched[nt++] = d;
				acc[d] += (uint64_t)g->adjwgt[e];
			}
		}
		for (uint32_t k = 0; k < nt; k++) {
			if (adjncy) {
				adjncy[w] = (idx_t)touched[k];
				adjwgt[w] = (idx_t)acc[touched[k]];
			}
			acc[touched[k]] = 0;
			w++;
		}
	}
	if (xadj)
		xadj[nc] = (idx_t)w;
	return w;
}

int rdps_pt_contract(const struct rdps_pt_graph *g, const uint32_t *label, uint32_t nc,
		     struct rdps_pt_graph *out)
{
	uint32_t n = g->n, *order = NULL, *first = NULL, *touched = NULL;
	uint64_t *acc = NULL, entries;
	int ret = -ENOMEM;

	memset(out, 0, sizeof(*out));
	order = malloc(((size_t)n ? n : 1) * sizeof(uint32_t));
	first = calloc((size_t)nc + 1, sizeof(uint32_t));
	acc = calloc(nc ? nc : 1, sizeof(uint64_t));
	touched = malloc(((size_t)nc ? nc : 1) * sizeof(uint32_t));
	out->vwgt = calloc(2 * ((size_t)nc ? nc : 1), sizeof(idx_t));
	out->xadj = malloc(((size_t)nc + 1) * sizeof(idx_t));
	if (!order || !first || !acc || !touched || !out->vwgt || !out->xadj)
		goto err;
	/* Vertices grouped by cluster (a counting sort). */
	for (uint32_t v = 0; v < n; v++)
		first[label[v] + 1]++;
	for (uint32_t c = 0; c < nc; c++)
		first[c + 1] += first[c];
	for (uint32_t v = 0; v < n; v++) {
		uint32_t c = label[v];

		out->vwgt[2 * c] += g->vwgt[2 * v];
		out->vwgt[2 * c + 1] += g->vwgt[2 * v + 1];
	}
	{
		uint32_t *pos = touched; /* free until the edges are built */

		memcpy(pos, first, (size_t)nc * sizeof(uint32_t));
		for (uint32_t v = 0; v < n; v++)
			order[pos[label[v]]++] = v;
	}
	/* Counted first, then filled: the coarse graph takes exactly what it
	 * needs next to the fine one. */
	entries = contract_edges(g, label, order, first, nc, acc, touched, NULL, NULL, NULL);
	if (entries > INT32_MAX) {
		ret = -EOVERFLOW;
		goto err;
	}
	out->adjncy = malloc((entries ? entries : 1) * sizeof(idx_t));
	out->adjwgt = malloc((entries ? entries : 1) * sizeof(idx_t));
	if (!out->adjncy || !out->adjwgt)
		goto err;
	contract_edges(g, label, order, first, nc, acc, touched, out->xadj, out->adjncy,
		       out->adjwgt);
	out->n = nc;
	out->entries = entries;
	for (uint32_t c = 0; c < nc; c++) {
		uint32_t d = (uint32_t)(out->xadj[c + 1] - out->xadj[c]);

		if (d > out->max_degree)
			out->max_degree = d;
	}
	ret = 0;
	goto out;
err:
	rdps_pt_graph_free(out);
out:
	free(order);
	free(first);
	free(acc);
	free(touched);
	return ret;
}

void rdps_pt_graph_free(struct rdps_pt_graph *g)
{
	free(g->xadj);
	free(g->adjncy);
	free(g->adjwgt);
	free(g->vwgt);
	memset(g, 0, sizeof(*g));
}

int rdps_pt_refine(const struct rdps_pt_graph *g, uint32_t k, uint32_t *part,
		   const struct rdps_pt_refine_opts *o, uint64_t *moved_total)
{
	uint64_t *acc = calloc(k, sizeof(uint64_t)), *ents = calloc(k, sizeof(uint64_t));
	uint64_t *heads = calloc(k, sizeof(uint64_t)), s = o->seed | 1;
	uint32_t n = g->n;

	*moved_total = 0;
	if (!acc || !ents || !heads) {
		free(acc);
		free(ents);
		free(heads);
		return -ENOMEM;
	}
	for (uint32_t v = 0; v < n; v++) {
		ents[part[v]] += (uint64_t)g->vwgt[2 * v];
		heads[part[v]] += (uint64_t)g->vwgt[2 * v + 1];
	}
	for (uint32_t round = 0; round < o->rounds && n > 1 && k > 1; round++) {
		uint64_t a = rdps_pt_splitmix(&s) % n, b = rdps_pt_splitmix(&s) % n, moved = 0;

		while (gcd(a, n) != 1)
			a = (a + 1) % n;
		for (uint64_t i = 0; i < n; i++) {
			uint32_t v = (uint32_t)visit(i, n, a, b), cur = part[v], best = cur;
			uint64_t ve = (uint64_t)g->vwgt[2 * v], vh = (uint64_t)g->vwgt[2 * v + 1];
			uint64_t best_w;

			for (idx_t e = g->xadj[v]; e < g->xadj[v + 1]; e++)
				acc[part[g->adjncy[e]]] += (uint64_t)g->adjwgt[e];
			best_w = acc[cur];
			for (uint32_t p = 0; p < k; p++) {
				if (p != cur && acc[p] > best_w && ents[p] + ve <= o->max_entities &&
				    heads[p] + vh <= o->max_heads) {
					best = p;
					best_w = acc[p];
				}
				acc[p] = 0;
			}
			if (best != cur) {
				ents[cur] -= ve;
				heads[cur] -= vh;
				ents[best] += ve;
				heads[best] += vh;
				part[v] = best;
				moved++;
			}
		}
		*moved_total += moved;
		if (o->progress)
			o->progress(o->progress_ctx, round + 1, moved);
		if (!moved)
			break;
	}
	free(acc);
	free(ents);
	free(heads);
	return 0;
}
