/* SPDX-License-Identifier: MIT */
/*
 * rdps server: one parameter server of a job. It owns one shard per table,
 * serves pulls (over transports that need its CPU), applies pushes with the
 * table's optimizer, and coordinates the job's barriers (server 0).
 */
#ifndef RDPS_SERVER_H
#define RDPS_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rdps/ipconfig.h"
#include "rdps/kvstore.h"
#include "rdps/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Clients in one job, at most (bounds what a hello can make a server
 * allocate). */
#define RDPS_MAX_CLIENTS 65536

struct rdps_server_table_config {
	char name[RDPS_TABLE_NAME_MAX];
	uint64_t num_rows;        /* rows of the whole table */
	uint32_t dim;             /* floats per row */
	const uint64_t *offsets;  /* num_servers+1 range offsets, NULL: even split */
	int init;                 /* enum rdps_init */
	float init_range;         /* r of U[-r, r] */
	int optimizer;            /* enum rdps_optimizer */
	float lr;
	uint32_t num_parts;       /* row parts (rdps_shard_params); 0: one */
	struct rdps_row_part parts[RDPS_ROW_PARTS_MAX];
	/* Tables of data (a graph's, rdps/graph.h): */
	int dtype;                /* enum rdps_dtype; not float32: elems set, dim unused */
	uint32_t elems;           /* elements per row (0: dim floats) */
	const void *rows;         /* this server's rows (hi - lo, packed elems each) to
				   * start from instead of init, or NULL */
	bool read_only;           /* refuse pushes and sets; not checkpointed (the rows
				   * come from their files at every start) */
};

struct rdps_server_config {
	const char *transport;              /* backend name ("tcp", "inproc", ...) */
	const struct rdps_ipconfig *ipc;    /* the job's servers */
	uint32_t server_id;                 /* this server's global index */
	uint32_t num_tables;
	struct rdps_server_table_config tables[RDPS_MAX_TABLES];
	uint64_t seed;                      /* initialisation seed */
	const struct rdps_secret *secret;   /* clients must prove it; NULL: none */
	bool allow_unauthenticated;         /* without a secret, serve clients beyond
					     * this machine too (protected mode off) */
	const char *checkpoint_dir;         /* where checkpoints go; NULL: none */
	int checkpoint_interval_ms;         /* also every this often (0: on request) */
	bool resume;                        /* start from the newest valid checkpoint */
	int job_timeout_ms;                 /* exit after this long with no client of
					     * the job connected (0: never) */
	bool keep_alive;                    /* outlive jobs: a job's own shutdown
					     * request is ignored (an observer's,
					     * e.g. rdps shutdown, still stops it) */
	float eps;                          /* Adagrad epsilon, 0: 1e-10 */
	/* Transport limits, passed to struct rdps_listen_params (0: default). */
	uint32_t max_connections;           /* open connections at once */
	int handshake_timeout_ms;           /* to finish the hello/authentication */
	size_t max_reply_buffer;            /* bytes of replies queued for all clients */
	int reply_stall_ms;                 /* replies unread this long while others
					     * wait for room: the connection closes */
	size_t max_request_buffer;          /* bytes of requests being received, all
					     * clients together */
	uint32_t num_threads;               /* threads serving requests (0: 1); pushes
					     * to different rows apply in parallel */
	/* Memory all tables may take (rows, optimizer state, locks: what
	 * rdps_shard_footprint counts), the config's and those clients make:
	 * a table request that would go past it is refused before anything is
	 * allocated. 0: rdps_server_default_table_budget(); the config's own
	 * tables are held to it at create only when it is given. */
	uint64_t max_table_memory;
	int nonfinite;                      /* enum rdps_nonfinite */
};

/* The default of max_table_memory for a server on this transport: half of
 * the machine's memory and, where the transport pins every table (RDMA
 * backends register them) and the process may not lock past its limit (no
 * CAP_IPC_LOCK), at most the locked-memory limit (ulimit -l) less what the
 * transport pins besides. why (may be NULL) gets which of them it is. */
uint64_t rdps_server_default_table_budget(const char *transport, char *why, size_t whylen);

/* What a server does with pushed gradients that hold a NaN or an infinity
 * (counted per table in the stats either way). */
enum rdps_nonfinite {
	RDPS_NONFINITE_REFUSE = 0, /* refuse the whole push, naming table and row */
	RDPS_NONFINITE_ACCEPT = 1, /* apply it (the rows become non-finite) */
};

struct rdps_server; /* opaque */

/* Allocates and initialises the shards and listens on the ip_config's
 * address for server_id. Returns 0 or -errno with a reason in err. */
int rdps_server_create(const struct rdps_server_config *cfg,
		       struct rdps_server **out, char *err, size_t errlen);

/* Serves until rdps_server_stop() or a shutdown request. Returns 0, or
 * -errno on a fatal transport error. */
int rdps_server_run(struct rdps_server *s);

/* Serves for up to timeout_ms (for callers with their own loop). */
int rdps_server_poll(struct rdps_server *s, int timeout_ms);

/* Asks run() to return; async-signal-safe. */
void rdps_server_stop(struct rdps_server *s);

/* True once stopped or asked to shut down by a client. */
bool rdps_server_done(const struct rdps_server *s);

/* Copies the server's counters (what rdps stats prints) into out. */
void rdps_server_get_stats(const struct rdps_server *s, struct rdps_server_stats *out);

/* Writes a checkpoint now (from the server's own thread: between requests,
 * so it is one point in time). 0 or -errno with a reason. */
int rdps_server_checkpoint(struct rdps_server *s, char *err, size_t errlen);

/* One summary line per server ("solved message count"), as on exit. */
void rdps_server_print_stats(const struct rdps_server_stats *st, uint32_t server_id,
			     FILE *f);

/* The shard of table t (for checkpoints, tests, standalone readers). */
struct rdps_shard *rdps_server_shard(struct rdps_server *s, uint32_t t);

/* Sends queued replies (up to 2 s), closes connections, frees. Accepts NULL. */
void rdps_server_destroy(struct rdps_server *s);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_SERVER_H */
