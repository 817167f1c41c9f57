/* SPDX-License-Identifier: MIT */
/*
 * Internal: uniform neighbour sampling without replacement over a CSR of
 * in-edges held as two tables (RDPS_GRAPH_INDPTR, RDPS_GRAPH_EDGES in
 * rdps/graph.h). The choice is shared by the server (RDPS_REQ_SAMPLE) and
 * the client that reads the same rows one-sidedly, so both pick the very
 * same edges for the same (seed, node): their results are identical, not
 * only alike in distribution.
 */
#ifndef RDPS_KVSTORE_GRAPH_SAMPLE_H
#define RDPS_KVSTORE_GRAPH_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "rdps/kvstore.h"

/* Positions (0 .. deg-1, increasing) of the in-edges of node to keep:
 * all of them if deg <= fanout, else fanout of them, every subset of that
 * size equally likely (Floyd's algorithm), drawn from a stream that
 * depends on (seed, node) only. pos holds fanout entries (fanout <=
 * RDPS_SAMPLE_MAX_FANOUT). Returns how many. */
uint32_t rdps_sample_choose(uint64_t seed, uint64_t node, uint64_t deg, uint32_t fanout,
			    uint64_t *pos);

/*
 * Serves a sample request (struct rdps_sample_req and its seeds, checked by
 * rdps_wire_check_sample) from the server's shards of the two tables,
 * writing the reply (as transport.h describes it) into reply (reply_cap
 * bytes, at least rdps_sample_reply_bound()). Returns 0 with *reply_len
 * set, or -errno with a reason in err: -EINVAL if the tables are not a
 * graph's, -ERANGE for a seed outside this server's nodes (naming it),
 * -EIO for a row whose edges are outside this server's (a corrupt part).
 */
int rdps_sample_serve(const struct rdps_shard_info *indptr, const struct rdps_shard_info *edges,
		      const void *req, size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len, char *err, size_t errlen);

#endif
