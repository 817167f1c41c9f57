/* SPDX-License-Identifier: MIT */
/*
 * Internal: neighbour sampling over a graph's slot tables (rdps/graph.h).
 * The choice is shared by the server (RDPS_REQ_SAMPLE) and the client that
 * reads the same rows one-sidedly, so both pick the very same edges for
 * the same (seed, slot, direction): their results are identical, not only
 * alike in distribution.
 */
#ifndef RDPS_KVSTORE_GRAPH_SAMPLE_H
#define RDPS_KVSTORE_GRAPH_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/kvstore.h"

/* Positions (0 .. deg-1, increasing) of the edges of a slot to keep: all
 * of them if deg <= fanout, else fanout of them, every subset of that size
 * equally likely (Floyd's algorithm), drawn from a stream that depends on
 * (seed, node) only. pos holds fanout entries (fanout <=
 * RDPS_SAMPLE_MAX_FANOUT). Returns how many. */
uint32_t rdps_sample_choose(uint64_t seed, uint64_t node, uint64_t deg, uint32_t fanout,
			    uint64_t *pos);

/* Growable scratch of a picker (weights and exclusions of big slots). */
struct rdps_sample_scratch {
	void *buf;
	size_t cap;
};
void rdps_sample_scratch_free(struct rdps_sample_scratch *s);

/*
 * The general pick of one slot of deg edges: positions (increasing, with
 * repeats under replace) written to pos (fanout entries), their number
 * returned (-ENOMEM: scratch). excl: sorted distinct positions never
 * picked (nexcl of them); w: a weight per position (>= 0, finite; NULL:
 * uniform). Without weights, replace or exclusions it is
 * rdps_sample_choose(seed ^ dir, slot, ...). Weighted without replacement:
 * Efraimidis-Spirakis keys u^(1/w) from a uniform per (stream, position);
 * with: fanout draws by the cumulative weights; zero weights never picked.
 */
int rdps_sample_pick(uint64_t seed, uint64_t slot, bool out, uint64_t deg, uint32_t fanout,
		     bool replace, const double *w, const uint64_t *excl, uint64_t nexcl,
		     uint64_t *pos, struct rdps_sample_scratch *sc);

/* The table ids a sample request reads (ptr, edges, then each distinct
 * prob table) into ids (max of them): their count. The request was checked
 * by rdps_wire_check_sample. */
uint32_t rdps_sample_req_tables(const void *req, uint32_t *ids, uint32_t max);

/*
 * Serves a sample request from the server's shards of the tables
 * rdps_sample_req_tables listed (tabs[i] for ids[i]), writing the reply
 * (as transport.h describes it) into reply (reply_cap bytes, at least
 * rdps_sample_reply_bound()). Returns 0 with *reply_len set, or -errno with
 * a reason in err: -EINVAL if the tables are not a graph's, -ERANGE for a
 * slot outside this server's (naming it), -EIO for a slot whose edges or
 * weights are outside this server's (a corrupt part).
 */
int rdps_sample_serve(const struct rdps_shard_info *tabs, uint32_t ntabs, const void *req,
		      size_t req_len, void *reply, size_t reply_cap, size_t *reply_len, char *err,
		      size_t errlen);

#endif
