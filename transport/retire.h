/* SPDX-License-Identifier: MIT */
/*
 * Internal: a dropped table's region, retired rather than deregistered at
 * once (verbs, ofi). Clients connected before the drop may still hold its
 * address and key and read it one-sidedly; deregistered, such a READ fails
 * with a remote access error that tears down the client's whole
 * connection (every table's pulls with it). Retired, the region stays
 * registered, and every row says RDPS_ROW_RETIRED: the client's pull of it
 * fails with a clean per-table error (and a row the shard's freed memory
 * has changed since fails its checksum, which names the table and row, and
 * its two-sided fallback gets the server's "no such table"). A retired
 * region is deregistered once every session that began before the drop is
 * gone (their clients are the only ones that may know its key).
 */
#ifndef RDPS_TRANSPORT_RETIRE_H
#define RDPS_TRANSPORT_RETIRE_H

#include <stdint.h>

#include "rdps/transport.h"

/* Writes RDPS_ROW_RETIRED into every row of the region (version word; the
 * check word zeroed), while its memory is still the shard's: the caller
 * makes sure no push is being applied to it. */
void rdps_region_retire_rows(const struct rdps_region *r);

struct rdps_retired {
	void *mr;                 /* the backend's registration */
	uint64_t seq;             /* sessions numbered below this began before the drop */
};

struct rdps_retire_list {
	struct rdps_retired *v;
	uint32_t n, cap;
};

/* Keeps mr until every session numbered below seq is gone. 0 or -ENOMEM
 * (then the caller deregisters at once). */
int rdps_retire_add(struct rdps_retire_list *l, void *mr, uint64_t seq);
/* Deregisters (dereg(mr)) the regions retired before min_live_seq, the
 * number of the oldest session still there (UINT64_MAX: none); returns
 * how many. */
uint32_t rdps_retire_reap(struct rdps_retire_list *l, uint64_t min_live_seq,
			  void (*dereg)(void *mr));
/* Deregisters every one and frees the list. */
void rdps_retire_free(struct rdps_retire_list *l, void (*dereg)(void *mr));

#endif
