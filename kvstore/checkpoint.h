/* SPDX-License-Identifier: MIT */
/* Internal: checkpoints of a server's shards.
 *
 * Layout: DIR/server-N/ckpt-SEQ/{manifest.json, TABLE.rows, TABLE.state}.
 * Rows and optimizer state are checksummed blobs (partition/loader);
 * manifest.json names each table's shape and the blobs' checksums. A
 * checkpoint is written into a temporary directory (every file fsynced),
 * renamed to ckpt-SEQ and the parent fsynced: ckpt-SEQ is complete or
 * absent. One previous checkpoint is kept, the others removed. */
#ifndef RDPS_KVSTORE_CHECKPOINT_H
#define RDPS_KVSTORE_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "rdps/kvstore.h"

/* The pushes a checkpoint's tables hold, per client of the job: what a
 * restore rolls back is what clients pushed beyond these. */
struct rdps_ckpt_job {
	uint32_t num_clients;  /* the job's size (0: no client yet) */
	uint64_t *pushed_rows; /* num_clients: rows of each client's pushes applied */
};

/* What a restore found. */
struct rdps_ckpt_info {
	uint64_t seq;          /* the checkpoint restored */
	uint64_t time_unix_ms; /* when it was written (wall clock) */
	bool job_known;        /* the manifest has push counts (older ones have not) */
	struct rdps_ckpt_job job; /* pushed_rows malloc'd: free() it */
};

/* Writes checkpoint seq of shards[0..n) and job's push counts (NULL: none
 * yet), seq above every present one (rdps_ckpt_last_seq() + 1), then
 * removes every other checkpoint but keep, the previous one known good
 * (written or restored; 0: the newest older one). 0 or -errno with a
 * reason. */
int rdps_ckpt_write(const char *dir, uint32_t server_id, struct rdps_shard **shards,
		    uint32_t n, const struct rdps_ckpt_job *job, uint64_t seq, uint64_t keep,
		    uint64_t *bytes, char *err, size_t errlen);

/* Restores the newest valid checkpoint into the shards (which must have the
 * checkpointed shapes), logging each damaged one it skips (not the one
 * restored: the caller knows what to say about it). Returns 0 and
 * what it restored in *info (info may be NULL), -ENOENT if there is none,
 * -EBADMSG if none is usable. */
int rdps_ckpt_restore(const char *dir, uint32_t server_id, struct rdps_shard **shards,
		      uint32_t n, struct rdps_ckpt_info *info, char *err, size_t errlen);

/* Removes the temporary directories (ckpt-SEQ.tmp-PID) that checkpoints of
 * processes no longer running left behind (killed while writing), logging
 * each; one of a process that still runs is left, with a warning. Returns
 * how many it removed, or -errno with a reason. */
int rdps_ckpt_remove_stale(const char *dir, uint32_t server_id, char *err, size_t errlen);

/* The highest checkpoint sequence number present, damaged or not (0 if
 * none). */
uint64_t rdps_ckpt_last_seq(const char *dir, uint32_t server_id);

#endif
