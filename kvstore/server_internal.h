/* SPDX-License-Identifier: MIT */
/* Internal to the server core: its state, shared by server.c (dispatch,
 * lifecycle), server_job.c, server_tables.c and server_ckpt.c. */
#ifndef RDPS_KVSTORE_SERVER_INTERNAL_H
#define RDPS_KVSTORE_SERVER_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdps/server.h"

struct rdps_server {
	const struct rdps_transport_ops *ops;
	struct rdps_tserver *ts;
	uint32_t num_threads;     /* the transport's progress threads */
	pthread_mutex_t lock;     /* the job's state below, and the checkpoint's */
	pthread_mutex_t ckpt_lock; /* one checkpoint written at a time */
	pthread_t ckpt_thread;
	bool ckpt_running;        /* ckpt_thread started and not joined */
	bool ckpt_active;         /* ckpt_thread still answers new waiters */
	uint32_t ckpt_nwaiters;   /* checkpoint requests answered when it ends */
	uint64_t ckpt_waiters[64];
	pthread_t *workers;       /* progress threads 1..num_workers */
	uint32_t num_workers;
	int worker_ret;           /* the first fatal transport error of a worker */
	uint32_t server_id, num_servers;
	/* Tables 0..num_tables-1: the config's first (num_config_tables: the
	 * ones checkpoints hold), then the slots of tables clients made (see
	 * table_request). A slot's shard is NULL while it holds no table;
	 * requests hold a reference (shard_get) so that a drop frees a shard
	 * only once no request uses it. */
	uint32_t num_tables, num_config_tables;
	struct rdps_shard *shards[RDPS_MAX_TABLES];
	uint32_t refs[RDPS_MAX_TABLES];
	struct rdps_table_desc client_tables[RDPS_MAX_TABLES]; /* slots clients made */
	/* The config's tables of other dtypes and read-only ones (a graph's):
	 * neither pushed to nor set, nor checkpointed (their rows come from
	 * their files at every start). */
	int config_dtype[RDPS_MAX_TABLES];
	uint32_t config_elems[RDPS_MAX_TABLES];
	bool read_only[RDPS_MAX_TABLES];
	/* What the tables take (rdps_shard_footprint), against the budget;
	 * changed under s->lock. */
	uint64_t table_budget;    /* --max-table-memory */
	uint64_t table_bytes;     /* all tables held now */
	uint64_t footprint[RDPS_MAX_TABLES];
	int nonfinite;            /* enum rdps_nonfinite */
	struct rdps_server_stats stats;
	volatile sig_atomic_t stop;
	bool keep_alive;
	uint64_t job_timeout_ns;  /* lease: exit when no client for this long */
	uint64_t last_client_ns;  /* when a client of the job was last connected */
	char *ckpt_dir;           /* NULL: no checkpoints */
	uint64_t ckpt_interval_ns;
	uint64_t ckpt_seq;        /* the newest present (damaged or not): the next is + 1 */
	uint64_t ckpt_good;       /* the last one written or restored (0: none) */
	uint64_t ckpt_last_ns;
	uint64_t instance;        /* random: tells clients this process from an earlier one */
	/* Rows of each client's pushes the shards hold, per client id: saved
	 * with checkpoints, so a client that comes back after a restore learns
	 * how many of its rows were rolled back. Sized for one job size, kept
	 * across jobs of that size (a keep-alive server's tables outlive jobs). */
	uint32_t rows_clients;    /* entries below: the job size they count for */
	uint64_t *rows_applied;   /* per client id: rows of its pushes applied */
	uint8_t *rows_met;        /* per client id: said hello to this process */
	bool rows_unknown;        /* restored from a checkpoint without counts */
	uint64_t restored_seq;    /* the checkpoint restored at start (0: none) */
	uint64_t restored_age_ms; /* its age then */
	bool restore_job_open;    /* no job started since the restore */
	uint32_t restore_waiting; /* clients of the first job since it not back yet */
	uint64_t restore_rolled;  /* rows rolled back for those back so far */
	/* The job: clients that said hello, and the barrier in progress. */
	uint32_t num_clients;     /* 0 until the first hello of a job */
	uint32_t connected;       /* clients with an open connection */
	uint32_t departed;        /* clients that left this job */
	uint8_t *client_state;    /* per client id: CLIENT_* */
	/* The collective in progress (barrier or allreduce): every client of
	 * the job must enter it before any is answered. */
	uint64_t *barrier_tokens; /* per client id, valid if arrived */
	uint32_t barrier_arrived;
	uint32_t coll_type;       /* RDPS_REQ_BARRIER or RDPS_REQ_ALLREDUCE */
	uint32_t coll_len;        /* allreduce: doubles per vector */
	double *coll_vec;         /* allreduce: num_clients x RDPS_ALLREDUCE_MAX */
};

enum { CLIENT_NONE = 0, CLIENT_CONNECTED = 1, CLIENT_IN_BARRIER = 2, CLIENT_LEFT = 4 };

/* ---- server_job.c: the job's requests, under s->lock ---- */

/* Forgets the job (its clients, collectives): the next hello starts one. */
void rdps_sv_job_reset(struct rdps_server *s);
/* A client's hello: joins it to the job (its size fixed by the first), and
 * answers how many of its pushed rows the tables hold. 0 or -errno. */
int rdps_sv_hello(struct rdps_server *s, struct rdps_request *req);
/* A client's connection closed. */
void rdps_sv_bye(struct rdps_server *s, struct rdps_request *req);
/* A barrier or allreduce: answered (RDPS_REPLY_DEFERRED) once every client
 * of the job entered it. */
int rdps_sv_collective(struct rdps_server *s, struct rdps_request *req);

/* ---- server_tables.c: tables clients make ---- */

/* RDPS_REQ_TABLE (create, lookup, drop, optimizer), under s->lock: the
 * table's desc in req->reply, or -errno with a reason naming the limit. */
int rdps_sv_table_request(struct rdps_server *s, struct rdps_request *req);

/* ---- server_ckpt.c: checkpoints ---- */

/* A checkpoint request: answered when the checkpoint thread has written
 * it (RDPS_REPLY_DEFERRED). Under s->lock. */
int rdps_sv_ckpt_request(struct rdps_server *s, struct rdps_request *req);
/* Starts the interval's checkpoint unless one is being written. */
void rdps_sv_ckpt_start(struct rdps_server *s);
/* Joins the checkpoint thread if it ended (wait: once it ends). */
void rdps_sv_ckpt_reap(struct rdps_server *s, bool wait);
/* --resume: the newest valid checkpoint into the shards, with its push
 * counts. 0 or -errno with a reason. */
int rdps_sv_restore(struct rdps_server *s, char *err, size_t errlen);

#endif
