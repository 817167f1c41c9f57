// SPDX-License-Identifier: MIT
/*
 * Neighbour sampling over the CSR tables of a graph (graph_sample.h): the
 * choice both ways share, and the server's side of RDPS_REQ_SAMPLE.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_sample.h"
#include "rdps/transport.h"

/* splitmix64: a full-period stream from any state, cheap to seed per node. */
static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, bound) (Lemire's multiply-shift; its bias, bound / 2^64,
 * is far below anything a test or a model could see). */
static inline uint64_t below(uint64_t *s, uint64_t bound)
{
	return (uint64_t)(((unsigned __int128)splitmix(s) * bound) >> 64);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Floyd's membership test: a scan for small fanouts, else an open-address
 * set of positions (at most half full). */
#define SET_BITS 11
_Static_assert((1u << SET_BITS) >= 2 * RDPS_SAMPLE_MAX_FANOUT, "set size");

static inline bool set_add(uint64_t *set, uint64_t v)
{
	uint32_t mask = (1u << SET_BITS) - 1;
	uint32_t h = (uint32_t)((v * 0x9e3779b97f4a7c15ull) >> (64 - SET_BITS));

	for (;; h = (h + 1) & mask) {
		if (set[h] == UINT64_MAX) {
			set[h] = v;
			return true;
		}
		if (set[h] == v)
			return false;
	}
}

uint32_t rdps_sample_choose(uint64_t seed, uint64_t node, uint64_t deg, uint32_t fanout,
			    uint64_t *pos)
{
	uint64_t s = seed ^ (node * 0xd1b54a32d192ed03ull);
	uint32_t k = 0;

	if (deg <= fanout) {
		for (uint64_t j = 0; j < deg; j++)
			pos[j] = j;
		return (uint32_t)deg;
	}
	splitmix(&s); /* decorrelate nearby nodes' streams */
	/* Floyd: for j = deg-fanout .. deg-1 draw t in [0, j]; take t, or j
	 * if t is taken already. Each fanout-subset comes out with probability
	 * 1 / C(deg, fanout). */
	if (fanout <= 64) {
		for (uint64_t j = deg - fanout; j < deg; j++) {
			uint64_t t = below(&s, j + 1);
			bool seen = false;

			for (uint32_t i = 0; i < k; i++)
				seen |= pos[i] == t;
			pos[k++] = seen ? j : t;
		}
		/* Insertion sort: at most 64 entries. */
		for (uint32_t i = 1; i < k; i++) {
			uint64_t v = pos[i];
			uint32_t m = i;

			for (; m && pos[m - 1] > v; m--)
				pos[m] = pos[m - 1];
			pos[m] = v;
		}
		return k;
	}
	{
		uint64_t set[1u << SET_BITS];

		memset(set, 0xff, sizeof(set));
		for (uint64_t j = deg - fanout; j < deg; j++) {
			uint64_t t = below(&s, j + 1);

			if (!set_add(set, t)) {
				set_add(set, j); /* j is new: every t so far was < j */
				t = j;
			}
			pos[k++] = t;
		}
	}
	qsort(pos, k, sizeof(*pos), cmp_u64);
	return k;
}

static inline const int64_t *row_of(const struct rdps_shard_info *t, uint64_t id)
{
	return (const int64_t *)((const char *)t->base + (id - t->lo) * t->stride +
				 RDPS_ROW_DATA_OFFSET);
}

int rdps_sample_serve(const struct rdps_shard_info *indptr, const struct rdps_shard_info *edges,
		      const void *req, size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len, char *err, size_t errlen)
{
	struct rdps_sample_req r;
	const uint64_t *seeds;
	uint32_t *count = reply;
	size_t head, need;
	char *out;
	uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];

	if (req_len < sizeof(r))
		return -EPROTO;
	memcpy(&r, req, sizeof(r));
	seeds = (const uint64_t *)((const char *)req + sizeof(r));
	if (indptr->dim != 4 || edges->dim != 8) {
		snprintf(err, errlen, "tables '%s' and '%s' are not a graph's in-edge offsets "
			 "(2 x int64) and edges (4 x int64)", indptr->name, edges->name);
		return -EINVAL;
	}
	need = rdps_sample_reply_bound(r.n, r.fanout);
	if (reply_cap < need || r.fanout > RDPS_SAMPLE_MAX_FANOUT)
		return -EINVAL;
	head = ((size_t)r.n * 4 + 7) & ~(size_t)7;
	memset((char *)reply + (size_t)r.n * 4, 0, head - (size_t)r.n * 4);
	out = (char *)reply + head;
	for (uint32_t i = 0; i < r.n; i++) {
		uint64_t node = seeds[i], begin, end;
		const int64_t *p;
		uint32_t k;

		if (node < indptr->lo || node >= indptr->hi) {
			snprintf(err, errlen, "seed %u: node %llu is not on this server (it holds "
				 "nodes [%llu, %llu) of '%s')", i, (unsigned long long)node,
				 (unsigned long long)indptr->lo, (unsigned long long)indptr->hi,
				 indptr->name);
			return -ERANGE;
		}
		p = row_of(indptr, node);
		begin = (uint64_t)p[0];
		end = (uint64_t)p[1];
		if (begin > end || begin < edges->lo || end > edges->hi) {
			snprintf(err, errlen, "node %llu: its in-edges [%llu, %llu) are not all on "
				 "this server (edges [%llu, %llu)): a corrupt graph part",
				 (unsigned long long)node, (unsigned long long)begin,
				 (unsigned long long)end, (unsigned long long)edges->lo,
				 (unsigned long long)edges->hi);
			return -EIO;
		}
		k = rdps_sample_choose(r.seed, node, end - begin, r.fanout, pos);
		count[i] = k;
		for (uint32_t j = 0; j < k; j++) {
			uint64_t eid = begin + pos[j];
			const int64_t *e = row_of(edges, eid);
			int64_t v[3] = { e[0], (int64_t)eid, e[2] };

			memcpy(out, v, sizeof(v));
			out += sizeof(v);
		}
	}
	*reply_len = (size_t)(out - (char *)reply);
	return 0;
}
