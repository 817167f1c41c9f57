/* SPDX-License-Identifier: MIT */
/*
 * rdps client API: what a trainer uses to reach the parameter servers.
 *
 *   struct rdps_client_params p = { .ip_config = "ip_config.txt",
 *                                   .client_id = 0, .num_clients = 2 };
 *   rdps_client_create(&p, &c, err, sizeof(err));
 *   rdps_client_table(c, "entity", &ent);
 *   rdps_client_pull(c, ent.id, ids, n, rows);      // rows: n * ent.dim floats
 *   rdps_client_push(c, ent.id, ids, grads, n);     // asynchronous
 *   rdps_client_flush(c);                           // every push applied
 *   rdps_client_barrier(c);                         // every client got here
 *   rdps_client_destroy(c);
 *
 * A client holds one connection per server. It is not thread-safe: use one
 * client per thread (each with its own client_id). Ids are global row ids
 * of a table; the client routes each to the server whose range holds it.
 * All functions return 0 on success or a negative errno; after a failure
 * rdps_client_errmsg() says what failed, naming the server.
 *
 * With reconnect_ms, a lost server (died, restarted from its checkpoint)
 * is reconnected with backoff: a pull is then retried (it is idempotent);
 * a push or flush returns -ECONNRESET once, saying how many pushed rows
 * were lost, and the client goes on. A server restarted from a checkpoint
 * has rolled back every row pushed to it since: the client logs a warning
 * with the checkpoint, its age and the count (exact: client and server
 * count this client's pushed rows), see rdps_client_rolled_back_rows(). The first
 * connection is retried the same way when a server drops it mid-handshake
 * or refuses the RDMA connection (it is being restarted).
 */
#ifndef RDPS_CLIENT_H
#define RDPS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/auth.h"
#include "rdps/ipconfig.h"
#include "rdps/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rdps_client_params {
	const char *ip_config;             /* path of the ip_config file, or */
	const struct rdps_ipconfig *servers; /* a parsed one (takes precedence) */
	const char *transport;             /* "auto" (NULL), "tcp", "verbs", "inproc" */
	uint32_t client_id;                /* 0 .. num_clients-1, unique in the job */
	uint32_t num_clients;              /* clients of the job (barrier size) */
	int timeout_ms;                    /* bound on each wait; 0: 60 s */
	int barrier_timeout_ms;            /* bound on a barrier; 0: 10 min */
	size_t max_inflight_bytes;         /* unacknowledged push bytes per server; 0: 64 MiB */
	int read_consistency;              /* enum rdps_read_consistency */
	bool quiet;                        /* do not log the transport choice */
	const struct rdps_secret *secret;  /* the job's shared secret (rdps/auth.h) */
	int reconnect_ms;                  /* after losing a server, reconnect with
					    * backoff for up to this long (0: don't) */
	bool observer;                     /* admin client (stats, shutdown): not
					    * part of the job, no barrier */
};

struct rdps_table_info {
	const char *name;
	uint32_t id;       /* table index for pull/push */
	uint32_t dim;      /* 32-bit words per row (floats of a float32 table) */
	uint64_t num_rows; /* rows of the whole table */
	int dtype;         /* enum rdps_dtype */
	uint32_t elems;    /* elements per row (dim for float32) */
	int optimizer;     /* enum rdps_optimizer, as the table was made or found */
};

struct rdps_client; /* opaque */

/* Connects to every server of the ip_config (waiting up to timeout_ms for
 * servers still starting), checks that their ranges of every table tile
 * the table, and builds the partition book. Returns 0 or -errno with a
 * reason in err. */
int rdps_client_create(const struct rdps_client_params *p,
		       struct rdps_client **out, char *err, size_t errlen);

/* Bounds the barriers and allreduces from now on (how long the job's
 * other clients may take to arrive); 0 restores barrier_timeout_ms. */
void rdps_client_set_barrier_timeout(struct rdps_client *c, int timeout_ms);

/* Closes every connection (pushes not flushed may be lost). Accepts NULL. */
void rdps_client_destroy(struct rdps_client *c);

/* Table by name; one a client made since this client connected is asked
 * of the servers. -ENOENT if they have no such table. */
int rdps_client_table(struct rdps_client *c, const char *name, struct rdps_table_info *info);

/* Table by index (0 .. rdps_client_num_tables()-1). */
int rdps_client_table_info(const struct rdps_client *c, uint32_t id,
			   struct rdps_table_info *info);

/* Tables this client knows (the servers' and those made so far), and the
 * job's servers. */
uint32_t rdps_client_num_tables(const struct rdps_client *c);
uint32_t rdps_client_num_servers(const struct rdps_client *c);

/* The range book of table: server s holds rows [off[s], off[s+1]) (off
 * holds num_servers + 1 entries). 0, or -ENOENT for an unknown table. */
int rdps_client_table_offsets(const struct rdps_client *c, uint32_t table, uint64_t *off);

/* Server index holding row id of table (range book lookup, O(log k)). */
uint32_t rdps_client_locate(const struct rdps_client *c, uint32_t table, uint64_t id);

/* Reads rows ids[0..n) of table into out (n * dim floats, row i at
 * out + i*dim). Duplicated ids are fine. Requests to different servers
 * are all posted before any is waited on. -ERANGE if an id >= num_rows.
 * Pulls are asynchronous with other clients' pushes, as in DGL-KE: each
 * row is whole (never torn, in validated mode), but rows are read at
 * slightly different moments, so while others push, two copies of one id
 * in a pull may differ over one-sided transports. This client's own
 * flushed pushes are always visible. */
int rdps_client_pull(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     size_t n, float *out);

/*
 * Pulls in flight while the caller computes: a batch of up to
 * RDPS_PULL_BATCH_MAX pulls (e.g. one training step's entity and relation
 * rows), posted together to every server before any is waited on, and
 * completed together:
 *
 *   rdps_client_pull_batch_create(c, &b);            // once per client
 *   rdps_client_pull_start(c, b, ent, ids, n, rows);  // posted, returns
 *   rdps_client_pull_start(c, b, rel, rids, m, rrows);
 *   ... compute on other buffers ...
 *   rdps_client_pull_finish(c, b);                     // rows are in
 *
 * rdps_client_pull() is a start and a finish. Each server gets at most
 * RDPS_TRANSPORT_POST_DEPTH requests before a wait: rows beyond them are
 * posted by finish. A batch's buffers grow to the largest batch seen and
 * are reused: steady state allocates nothing.
 *
 * From the first start to finish, ids and out belong to the client (do not
 * touch or free them), and the client has only this batch in flight: a
 * second batch, rdps_client_pull() or a pull_start after RDPS_PULL_BATCH_MAX
 * pulls return -EBUSY / -ENOSPC with a reason; a push, flush or other
 * request fails with the transport's -EBUSY (pushes cannot pass posted
 * pulls on a connection). So push a step's gradients after the next step's
 * pull finished.
 *
 * start returns the errors of its arguments (-ENOENT unknown table,
 * -ERANGE id >= num_rows, -EINVAL batch of another client, -EBUSY,
 * -ENOSPC, -ENOMEM, -ENOTCONN); the pulls started before stay in flight
 * (finish them). A transport failure is returned by finish, which with
 * reconnect_ms first reconnects and reads the whole batch again (pulls are
 * idempotent). finish leaves the batch empty, whatever it returns; finish
 * of an empty batch returns 0.
 */
#define RDPS_PULL_BATCH_MAX 4

struct rdps_pull_batch; /* opaque */

/* A batch for client c (used with c only). 0 or -ENOMEM. */
int rdps_client_pull_batch_create(struct rdps_client *c, struct rdps_pull_batch **out);

/* Waits for the batch's pulls still in flight and frees it. Accepts NULL.
 * Destroy a client's batches before the client. */
void rdps_client_pull_batch_destroy(struct rdps_pull_batch *b);

/* Adds the pull of rows ids[0..n) of table into out (as rdps_client_pull())
 * to b and posts what the servers' depth allows; returns without waiting. */
int rdps_client_pull_start(struct rdps_client *c, struct rdps_pull_batch *b, uint32_t table,
			   const uint64_t *ids, size_t n, float *out);

/* Returns once every pull started in b is in its out. */
int rdps_client_pull_finish(struct rdps_client *c, struct rdps_pull_batch *b);

/* Sends gradients grads (n * dim floats) of ids to their servers, which
 * sum gradients of one id and apply the table's optimizer. Returns once
 * ids and grads may be reused; blocks only while max_inflight_bytes are
 * unacknowledged by a server. An error of an earlier push may surface here
 * or at the next flush. */
int rdps_client_push(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     const float *grads, size_t n);

/* Returns once every server applied every earlier push of this client. */
int rdps_client_flush(struct rdps_client *c);

/* Flushes, then waits until every client of the job reached its barrier
 * (coordinated by server 0), for up to barrier_timeout_ms. */
int rdps_client_barrier(struct rdps_client *c);

/* Replaces v[0..n) (n <= RDPS_ALLREDUCE_MAX) by its sum over every client
 * of the job, added in client-id order (so every client gets the same bits),
 * coordinated by server 0 like a barrier; bounded by barrier_timeout_ms.
 * Every client must call it with the same n. */
int rdps_client_allreduce(struct rdps_client *c, double *v, size_t n);

/* Asks every server to write a checkpoint now (they must have been started
 * with a checkpoint directory); returns when all are written. */
int rdps_client_checkpoint(struct rdps_client *c);

/* Counters of one server. */
int rdps_client_server_stats(struct rdps_client *c, uint32_t server,
			     struct rdps_server_stats *out);

/* Asks every server to exit (after flushing this client's pushes). */
int rdps_client_shutdown_servers(struct rdps_client *c);

/* ---------------------------------------------------------------------- */
/* Tables made by clients (DGL's DistTensor and DistEmbedding)             */

/*
 * A table of num_rows rows of elems elements of dtype, split evenly over
 * the servers (rows [i*N/S, (i+1)*N/S) roughly, as --table's are). Rows start
 * at zero, or, for float32, uniform in [-init_range, init_range] (by seed,
 * table and id: the same on any number of servers). It has no optimizer
 * until rdps_client_table_set_optimizer gives it one.
 */
struct rdps_table_spec {
	const char *name;       /* < RDPS_TABLE_NAME_MAX bytes */
	uint64_t num_rows;
	uint32_t elems;         /* elements per row */
	int dtype;              /* enum rdps_dtype */
	float init_range;       /* float32: > 0 starts uniform in [-r, r]; else zeros */
	uint64_t seed;          /* of the uniform start */
};

/* Makes the table on every server, or finds it if a client of the job made
 * it already with the same rows, elements and dtype: every client may call
 * this with the same spec, and all get the same table. Another shape under
 * the name: -EEXIST, the message naming both. Fills info. */
int rdps_client_table_create(struct rdps_client *c, const struct rdps_table_spec *spec,
			     struct rdps_table_info *info);

/* Drops a table clients made, on every server, freeing its memory. Every
 * client must be done with it (a one-sided read of a dropped table fails
 * that client's connection): barrier first. -ENOENT if unknown, -EPERM for
 * the servers' own tables (--table, --partition). */
int rdps_client_table_drop(struct rdps_client *c, const char *name);

/* What a float32 table does with gradients pushed to it. */
struct rdps_optimizer_spec {
	int optimizer;          /* enum rdps_optimizer (RDPS_OPT_NONE: refuses them) */
	float lr;
	float eps;              /* 0: RDPS_ADAGRAD_EPS, for Adam RDPS_ADAM_EPS */
	float beta1, beta2;     /* Adam; 0: RDPS_ADAM_BETA1, RDPS_ADAM_BETA2 */
};

/* Sets the table's optimizer on every server, its state zeroed; the same
 * settings as it has already leave it as it is (so every client of the job
 * may call this). -EINVAL for a table that is not float32. */
int rdps_client_table_set_optimizer(struct rdps_client *c, uint32_t table,
				    const struct rdps_optimizer_spec *o);

/* The optimizer state of rows (what saving and loading a sparse optimizer
 * needs): per_row floats a row (0 without state; Adagrad: dim, row-wise
 * Adagrad: 1, Adam: 2 dim + 1, its m, v and step count), read into out or
 * written from in (n * per_row floats, ids in any order), each row whole.
 * A write follows this client's pushes. 0 or -errno (-EINVAL: the table
 * keeps no state, or another shape of it). */
int rdps_client_state_floats(const struct rdps_client *c, uint32_t table, uint32_t *per_row);
int rdps_client_state_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  float *out);
int rdps_client_state_set(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const float *in);

/* Reads rows ids[0..n) of a table of any dtype into out: n rows of
 * elems elements each, packed (n * elems * element size bytes). As
 * rdps_client_pull otherwise (which float32 tables may use as well). */
int rdps_client_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
		    void *out);

/* Writes rows ids[0..n) of a table of any dtype from rows (packed as get's
 * out): not gradients, the rows' new values; returns once every server
 * wrote them. This client's pushes before it are applied first (it
 * flushes them). The same id twice: the later row stays. */
int rdps_client_set(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		    const void *rows, size_t n);

/* Reason of the last failure ("" if none). */
const char *rdps_client_errmsg(const struct rdps_client *c);

/* Name of the transport in use. */
const char *rdps_client_transport(const struct rdps_client *c);

/* Times a lost server was reconnected. */
uint64_t rdps_client_reconnects(const struct rdps_client *c);

/* Rows re-read after a torn one-sided read (validated mode), all servers. */
uint64_t rdps_client_rereads(const struct rdps_client *c);

/* Rows this client pushed that server restarts rolled back, all servers:
 * those pushed after the checkpoint a server was restored from (or all
 * pushed to one restarted without a checkpoint), counted at reconnection.
 * Pushes lost with a connection to a server that did not restart are not
 * in it (the push or flush reported them). */
uint64_t rdps_client_rolled_back_rows(const struct rdps_client *c);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_CLIENT_H */
