/* SPDX-License-Identifier: MIT */
/*
 * Internal: what layers built on the client (the graph's sampling,
 * graph/) need of it beyond the public API.
 */
#ifndef RDPS_KVSTORE_CLIENT_INTERNAL_H
#define RDPS_KVSTORE_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rdps/client.h"
#include "rdps/kvstore.h"
#include "rdps/transport.h"

/* Rows per request: keeps frames well under every backend's limit. */
#define CLIENT_MAX_REQ_BYTES (16u << 20)
#define CLIENT_MAX_REQ_ROWS 65536u
/* Requests posted per server before waiting. */
#define CLIENT_POST_DEPTH RDPS_TRANSPORT_POST_DEPTH

/* The client's state, shared by its files: client.c (connections,
 * reconnects, errors), client_tables.c (the tables and their range books),
 * client_rows.c (routing, pulls, pushes, rows of any dtype, optimizer
 * state), client_calls.c (collectives, stats, two-sided calls). */
struct rdps_client {
	const struct rdps_transport_ops *ops;
	uint32_t num_servers, num_tables;
	struct rdps_conn **conns;
	struct rdps_table_desc tables[RDPS_MAX_TABLES]; /* lo/hi unused */
	uint64_t *offsets[RDPS_MAX_TABLES];             /* num_servers + 1 each */
	struct rdps_book books[RDPS_MAX_TABLES];
	int barrier_timeout_ms;               /* bound on the collectives now */
	int barrier_timeout_default_ms;       /* from the params */
	bool observer;
	int reconnect_ms;
	struct rdps_conn_params cp;           /* for reconnecting */
	struct rdps_endpoint *eps;            /* num_servers */
	int64_t failed_server;                /* of the last conn_fail, or -1 */
	uint64_t reconnects;
	/* Per server: rows pushed to it, counted as it counts them (set to
	 * what its welcome says it holds at each connection), and the server
	 * process of the last welcome: a reconnect to another is a restart,
	 * whose rollback the difference measures. */
	uint64_t *pushed;
	uint64_t *instance;
	uint64_t rolled_back;                 /* rows server restarts rolled back */
	char lost_note[256];                  /* what the last reconnect lost */
	char errmsg[640];
	struct rdps_ipconfig owned_ipc;
	/* Scratch, grown as needed. */
	uint32_t *srv_of; size_t srv_of_cap;  /* server of each id */
	size_t *start;                        /* num_servers + 1 segment starts */
	size_t *cursor;                       /* num_servers: next row to send */
	uint64_t *ids_sorted; size_t ids_cap;
	uint32_t *perm; size_t perm_cap;      /* sorted position -> input position */
	void *xbuf; size_t xcap;              /* get/set rows repacked */
	bool unflushed;                       /* pushes since the last flush */
	struct rdps_pull_batch *busy;         /* the batch with pulls in flight, or NULL */
	struct rdps_pull_batch *own;          /* rdps_client_pull()'s, made at its first call */
};

/* Where route() leaves one request's per-server segments. */
struct route_buf {
	size_t *start;                        /* num_servers + 1 segment starts */
	size_t *cursor;                       /* num_servers: next row to send */
	uint64_t *ids_sorted; size_t ids_cap; /* ids grouped by server (if not already) */
	uint32_t *perm; size_t perm_cap;      /* sorted position -> input position */
};

/* One pull of a batch. */
struct pull_part {
	uint32_t table, dim;
	size_t n;
	float *out;                           /* the caller's rows (input order) */
	const uint64_t *src;                  /* ids in server order */
	float *dst;                           /* rows in server order: out, or rows */
	int grouped;                          /* dst is rows: scatter into out at the end */
	struct route_buf rb;
	float *rows; size_t rows_cap;         /* grouped rows, grown as needed */
};

/* Pulls posted together and completed together (client.h). Its buffers grow
 * to the largest batch seen and are reused. */
struct rdps_pull_batch {
	struct rdps_client *c;
	uint32_t nparts;
	struct pull_part parts[RDPS_PULL_BATCH_MAX];
	uint32_t *posted;                     /* num_servers: posted since the last wait */
	int err;                              /* first transport failure, for finish */
};

/* One request to server s that may be sent again (it changes nothing on
 * the server): after a lost connection, with reconnect_ms, the server is
 * reconnected and asked again. *reply_len gets the reply's bytes. 0, or
 * -errno with the reason in rdps_client_errmsg(). */
int rdps_client_call_idempotent(struct rdps_client *c, uint32_t s, uint32_t type,
				const void *req, size_t req_len, void *reply, size_t reply_cap,
				size_t *reply_len);

/* As rdps_client_call_idempotent, to servers[0..n) at once (request i to
 * servers[i], distinct servers): every request is sent before any reply is
 * awaited where the transport splits its calls (call_send/call_recv), one
 * after the other where it does not; the replies are awaited against one
 * deadline (the client's timeout), not one per server. reply_lens[i] gets
 * reply i's bytes. */
int rdps_client_call_many(struct rdps_client *c, uint32_t type, uint32_t n,
			  const uint32_t *servers, void *const *reqs, const size_t *req_lens,
			  void *const *replies, const size_t *reply_caps, size_t *reply_lens);

/* Sets the reason rdps_client_errmsg() gives; returns ret. */
int rdps_client_fail(struct rdps_client *c, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- client.c: connections and errors, shared by the client's files ---- */

/* Sets c->errmsg to fmt (with detail as its one %s) and returns ret. */
int rdps_cl_fail(struct rdps_client *c, int ret, const char *fmt, const char *detail);
/* A transport failure on server s's connection: its reason kept, the
 * server remembered for a reconnect. Returns ret. */
int rdps_cl_conn_fail(struct rdps_client *c, int ret, uint32_t s);
/* Whether ret means the connection is gone (worth reconnecting). */
bool rdps_cl_conn_lost(int ret);
/* Connects to server s again (reconnect_ms), accounting for what a restart
 * rolled back. 0 or -errno. */
int rdps_cl_reconnect(struct rdps_client *c, uint32_t s);
/* Every connection usable (reconnecting those lost, with reconnect_ms). */
int rdps_cl_ensure_conns(struct rdps_client *c);
/* After a failed call: reconnects the failed server if ret says the
 * connection was lost and the client may; the call's error otherwise. */
int rdps_cl_recover(struct rdps_client *c, int ret);

/* ---- client_tables.c ---- */

/* The welcomes' tables agree (shapes, ranges over the servers): the books
 * built. 0 or -EPROTO with a reason. */
int rdps_cl_check_tables(struct rdps_client *c, char *err, size_t errlen);

#endif
