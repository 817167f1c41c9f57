// SPDX-License-Identifier: MIT
/*
 * The server core: request semantics on top of any transport.
 *
 * Threads (--num_server_threads): the transport serves its connections from
 * num_threads threads (each with its own connections), and the core's
 * handler runs in all of them. Pulls and pushes touch only the shards (safe
 * from any thread: rdps_shard_apply locks row stripes) and atomic counters;
 * the job's state (hello, barrier, allreduce, shutdown) is behind one lock,
 * taken only by those rare requests. A checkpoint runs in its own thread,
 * copying each stripe of rows under its lock: pushes never wait for it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "graph_sample.h"
#include "rdps/common.h"
#include "rdps/graph.h"
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

static void job_reset(struct rdps_server *s)
{
	free(s->client_state);
	free(s->barrier_tokens);
	free(s->coll_vec);
	s->client_state = NULL;
	s->barrier_tokens = NULL;
	s->coll_vec = NULL;
	s->num_clients = s->connected = s->departed = s->barrier_arrived = 0;
}

/* Push counts for a job of n clients, all zero (the counts of another job
 * size belong to other clients). The arrays have room for the largest job:
 * pushes add to them from every thread without a lock, so they never move. */
static int rows_resize(struct rdps_server *s, uint32_t n)
{
	memset(s->rows_applied, 0, (size_t)n * sizeof(uint64_t));
	memset(s->rows_met, 0, n);
	s->rows_clients = n;
	s->rows_unknown = false;
	return 0;
}

/*
 * A client's hello says how many rows it pushed to this server; the tables
 * hold rows_applied of them. The difference on its first hello to this
 * process is what the restart rolled back (restored from a checkpoint: the
 * rows pushed after it; started without one: all); on a later hello, what
 * its lost connection carried. Answered in the welcome, so the client
 * reports the same number.
 */
static void rows_hello(struct rdps_server *s, struct rdps_request *req)
{
	uint32_t c = req->client_id;
	uint64_t said = req->pushed_rows, held, lost;
	bool first = !s->rows_met[c];

	s->rows_met[c] = 1;
	if (first && s->rows_unknown)
		s->rows_applied[c] = said; /* nothing to compare with: take its word */
	held = s->rows_applied[c];
	req->welcome.rows_held = held;
	lost = said > held ? said - held : 0;
	if (!first) {
		if (lost)
			rdps_warn("server %u: client %u reconnected: %llu rows it pushed on its "
				  "previous connection were never applied", s->server_id, c,
				  (unsigned long long)lost);
	} else if (s->restored_seq) {
		RDPS_STAT_ADD(s->stats.rolled_back_rows, lost);
		s->restore_rolled += lost;
		if (lost)
			rdps_warn("server %u: client %u reconnected after a restore: %llu of its "
				  "pushed rows were rolled back", s->server_id, c,
				  (unsigned long long)lost);
		else if (said)
			rdps_info("server %u: client %u reconnected after a restore: none of its "
				  "pushed rows were rolled back", s->server_id, c);
		if (s->restore_waiting && !--s->restore_waiting)
			rdps_info("server %u: every client of the job is back after the restore "
				  "from checkpoint %llu: %llu pushed rows in all were rolled back",
				  s->server_id, (unsigned long long)s->restored_seq,
				  (unsigned long long)s->restore_rolled);
	} else if (lost) {
		RDPS_STAT_ADD(s->stats.rolled_back_rows, lost);
		rdps_warn("server %u: client %u reconnected to this server, started without a "
			  "checkpoint: the %llu rows it pushed to the one before were lost",
			  s->server_id, c, (unsigned long long)lost);
	}
}

static void barrier_fail_all(struct rdps_server *s, int status, const char *why)
{
	for (uint32_t i = 0; i < s->num_clients; i++) {
		if (!(s->client_state[i] & CLIENT_IN_BARRIER))
			continue;
		s->client_state[i] &= (uint8_t)~CLIENT_IN_BARRIER;
		s->ops->reply(s->ts, s->barrier_tokens[i], s->coll_type, status, why, strlen(why));
	}
	s->barrier_arrived = 0;
}

static int handle_hello(struct rdps_server *s, struct rdps_request *req)
{
	if (!req->num_clients || req->client_id >= req->num_clients) {
		snprintf(req->errmsg, req->errlen, "client id %u is not below the job's %u clients",
			 req->client_id, req->num_clients);
		return -EINVAL;
	}
	if (req->num_clients > RDPS_MAX_CLIENTS) {
		snprintf(req->errmsg, req->errlen, "a job of %u clients is over the limit of %d",
			 req->num_clients, RDPS_MAX_CLIENTS);
		return -EINVAL;
	}
	if (!s->num_clients) {
		s->client_state = calloc(req->num_clients, 1);
		s->barrier_tokens = calloc(req->num_clients, sizeof(uint64_t));
		if (!s->client_state || !s->barrier_tokens ||
		    (s->rows_clients != req->num_clients && rows_resize(s, req->num_clients))) {
			job_reset(s);
			return -ENOMEM;
		}
		s->num_clients = req->num_clients;
		if (s->restore_job_open) {
			s->restore_job_open = false;
			s->restore_waiting = s->num_clients;
		}
		rdps_info("server %u: job of %u clients started", s->server_id, s->num_clients);
	} else if (req->num_clients != s->num_clients) {
		snprintf(req->errmsg, req->errlen,
			 "client %u says the job has %u clients, but connected clients said %u",
			 req->client_id, req->num_clients, s->num_clients);
		return -EINVAL;
	}
	if (s->client_state[req->client_id] & CLIENT_CONNECTED) {
		snprintf(req->errmsg, req->errlen, "client id %u is already connected",
			 req->client_id);
		return -EADDRINUSE;
	}
	if (s->client_state[req->client_id] & CLIENT_LEFT)
		s->departed--; /* it came back */
	s->client_state[req->client_id] = CLIENT_CONNECTED;
	s->connected++;
	rows_hello(s, req);
	return 0;
}

static void handle_bye(struct rdps_server *s, struct rdps_request *req)
{
	char why[160];

	if (!s->num_clients || req->client_id >= s->num_clients ||
	    !(s->client_state[req->client_id] & CLIENT_CONNECTED))
		return;
	if (s->client_state[req->client_id] & CLIENT_IN_BARRIER)
		s->barrier_arrived--;
	s->client_state[req->client_id] = CLIENT_LEFT;
	s->connected--;
	s->departed++;
	if (!s->connected) {
		rdps_info("server %u: every client of the job disconnected", s->server_id);
		job_reset(s);
		return;
	}
	/* Waiting for a client that is gone would only end in a timeout. */
	if (s->barrier_arrived) {
		snprintf(why, sizeof(why), "client %u left the job before reaching the barrier",
			 req->client_id);
		barrier_fail_all(s, -ECONNABORTED, why);
	}
}

/* Barrier and allreduce: answered once every client of the job entered. */
static int handle_collective(struct rdps_server *s, struct rdps_request *req)
{
	uint8_t *st = &s->client_state[req->client_id];
	uint32_t len = (uint32_t)(req->payload_len / sizeof(double));
	double sum[RDPS_ALLREDUCE_MAX];

	if (*st & CLIENT_IN_BARRIER) {
		snprintf(req->errmsg, req->errlen, "client %u entered a %s twice", req->client_id,
			 rdps_req_name((int)s->coll_type));
		return -EINVAL;
	}
	if (s->departed) {
		snprintf(req->errmsg, req->errlen,
			 "%u client(s) left the job; the %s cannot complete", s->departed,
			 rdps_req_name((int)req->type));
		return -ECONNABORTED;
	}
	if (s->barrier_arrived && (req->type != s->coll_type ||
				   (req->type == RDPS_REQ_ALLREDUCE && len != s->coll_len))) {
		snprintf(req->errmsg, req->errlen,
			 "client %u entered a %s of %u values while others are in a %s of %u",
			 req->client_id, rdps_req_name((int)req->type), len,
			 rdps_req_name((int)s->coll_type), s->coll_len);
		return -EINVAL;
	}
	if (len && !s->coll_vec) {
		/* Only jobs that reduce pay for the vectors. */
		s->coll_vec = calloc((size_t)s->num_clients * RDPS_ALLREDUCE_MAX, sizeof(double));
		if (!s->coll_vec)
			return -ENOMEM;
	}
	if (!s->barrier_arrived) {
		s->coll_type = req->type;
		s->coll_len = len;
	}
	if (len)
		memcpy(s->coll_vec + (size_t)req->client_id * RDPS_ALLREDUCE_MAX, req->payload,
		       len * sizeof(double));
	*st |= CLIENT_IN_BARRIER;
	s->barrier_tokens[req->client_id] = req->token;
	if (++s->barrier_arrived < s->num_clients)
		return RDPS_REPLY_DEFERRED;
	/* Summed in client order: every client gets the same bits. */
	memset(sum, 0, sizeof(sum));
	for (uint32_t i = 0; i < s->num_clients; i++)
		for (uint32_t j = 0; j < s->coll_len; j++)
			sum[j] += s->coll_vec[(size_t)i * RDPS_ALLREDUCE_MAX + j];
	for (uint32_t i = 0; i < s->num_clients; i++) {
		s->client_state[i] &= (uint8_t)~CLIENT_IN_BARRIER;
		s->ops->reply(s->ts, s->barrier_tokens[i], s->coll_type, 0, sum,
			      s->coll_len * sizeof(double));
	}
	s->barrier_arrived = 0;
	return RDPS_REPLY_DEFERRED;
}

/* The shard of table t with a reference held, or NULL (no such table). */
static struct rdps_shard *shard_get(struct rdps_server *s, uint32_t t)
{
	struct rdps_shard *sh;

	if (t >= __atomic_load_n(&s->num_tables, __ATOMIC_ACQUIRE))
		return NULL;
	__atomic_fetch_add(&s->refs[t], 1, __ATOMIC_ACQ_REL);
	sh = __atomic_load_n(&s->shards[t], __ATOMIC_ACQUIRE);
	if (!sh)
		__atomic_fetch_sub(&s->refs[t], 1, __ATOMIC_RELEASE);
	return sh;
}

static void shard_put(struct rdps_server *s, uint32_t t)
{
	__atomic_fetch_sub(&s->refs[t], 1, __ATOMIC_RELEASE);
}

/* The request's table (with a reference) if its ids are all this
 * server's; else NULL with a reason and *ret. */
static struct rdps_shard *check_rows(struct rdps_server *s, struct rdps_request *req, int *ret)
{
	struct rdps_shard *sh = shard_get(s, req->table);
	struct rdps_shard_info info;
	uint64_t bad;

	if (!sh) {
		snprintf(req->errmsg, req->errlen, "unknown table %u on server %u", req->table,
			 s->server_id);
		*ret = -ENOENT;
		return NULL;
	}
	if (rdps_shard_check_ids(sh, req->ids, req->n, &bad)) {
		rdps_shard_info(sh, &info);
		snprintf(req->errmsg, req->errlen,
			 "id %llu of table '%s' is outside this server's rows [%llu, %llu)",
			 (unsigned long long)bad, info.name, (unsigned long long)info.lo,
			 (unsigned long long)info.hi);
		shard_put(s, req->table);
		*ret = -ERANGE;
		return NULL;
	}
	return sh;
}

/* check_rows for a push or a set: not of a read-only table. */
static struct rdps_shard *check_writable(struct rdps_server *s, struct rdps_request *req,
					 int *ret)
{
	if (req->table < RDPS_MAX_TABLES && s->read_only[req->table]) {
		snprintf(req->errmsg, req->errlen, "table '%s' is read-only (loaded from its "
			 "files by the server: a graph's)", s->client_tables[req->table].name);
		*ret = -EPERM;
		return NULL;
	}
	return check_rows(s, req, ret);
}

/* A push's gradients: rows holding a NaN or an infinity are counted for
 * the table and, unless the server accepts them, refuse the whole push
 * before any row changes (a diverging trainer stops at the step it
 * diverged, not after training poisoned its rows for good). */
static int check_finite(struct rdps_server *s, struct rdps_request *req,
			const struct rdps_shard_info *info)
{
	uint32_t first = 0, bad = rdps_rows_nonfinite(req->grads, req->grad_index, req->n,
						      info->dim, &first);

	if (!bad)
		return 0;
	RDPS_STAT_ADD(s->stats.nonfinite_rows[req->table], bad);
	if (s->nonfinite == RDPS_NONFINITE_ACCEPT)
		return 0;
	RDPS_STAT_ADD(s->stats.nonfinite_pushes, 1);
	snprintf(req->errmsg, req->errlen, "push to table '%s' refused: the gradient of row "
		 "%llu (and of %u other row(s) of the push) holds a NaN or an infinity (the "
		 "server refuses non-finite gradients; --nonfinite accept applies them)",
		 info->name, (unsigned long long)req->ids[first], bad - 1);
	return -EDOM;
}

/* RDPS_REQ_SAMPLE: picks among the in-edges of seeds this server holds. */
static int handle_sample(struct rdps_server *s, struct rdps_request *req)
{
	struct rdps_sample_req r;
	struct rdps_shard_info ii, ei;
	struct rdps_shard *ip, *ep;
	int ret;

	memcpy(&r, req->payload, sizeof(r));
	ip = shard_get(s, r.indptr_table);
	ep = ip ? shard_get(s, r.edges_table) : NULL;
	if (!ip || !ep) {
		if (ip)
			shard_put(s, r.indptr_table);
		snprintf(req->errmsg, req->errlen, "sample over unknown tables %u and %u on "
			 "server %u", r.indptr_table, r.edges_table, s->server_id);
		return -ENOENT;
	}
	rdps_shard_info(ip, &ii);
	rdps_shard_info(ep, &ei);
	if (!s->read_only[r.indptr_table] || !s->read_only[r.edges_table] ||
	    strcmp(ii.name, RDPS_GRAPH_INDPTR) || strcmp(ei.name, RDPS_GRAPH_EDGES)) {
		snprintf(req->errmsg, req->errlen, "tables '%s' and '%s' are not a graph's "
			 "'%s' and '%s'", ii.name, ei.name, RDPS_GRAPH_INDPTR, RDPS_GRAPH_EDGES);
		ret = -EINVAL;
	} else {
		ret = rdps_sample_serve(&ii, &ei, req->payload, req->payload_len, req->reply,
					req->reply_cap, &req->reply_len, req->errmsg, req->errlen);
	}
	shard_put(s, r.edges_table);
	shard_put(s, r.indptr_table);
	if (!ret) {
		RDPS_STAT_ADD(s->stats.bytes_in, req->payload_len);
		RDPS_STAT_ADD(s->stats.bytes_out, req->reply_len);
	}
	return ret;
}

/* The config's tables a checkpoint holds (not the read-only ones). */
static uint32_t ckpt_shards(const struct rdps_server *s, struct rdps_shard **out)
{
	uint32_t n = 0;

	for (uint32_t t = 0; t < s->num_config_tables; t++)
		if (!s->read_only[t])
			out[n++] = s->shards[t];
	return n;
}

/* A consistent-enough copy of counters other threads add to (each field
 * whole; fields taken one after the other). */
static void stats_copy(const struct rdps_server_stats *from, struct rdps_server_stats *to)
{
	const uint64_t *f = (const uint64_t *)from;
	uint64_t *t = (uint64_t *)to;

	_Static_assert(sizeof(*from) % sizeof(uint64_t) == 0, "counters only");
	for (size_t i = 0; i < sizeof(*from) / sizeof(uint64_t); i++)
		t[i] = __atomic_load_n(&f[i], __ATOMIC_RELAXED);
}

static void *checkpoint_main(void *arg);

/* Starts the checkpoint thread (s->lock held, none active): one that ended
 * is joined first (it is only returning). */
static int checkpoint_spawn(struct rdps_server *s)
{
	if (s->ckpt_running) {
		pthread_join(s->ckpt_thread, NULL);
		s->ckpt_running = false;
	}
	if (pthread_create(&s->ckpt_thread, NULL, checkpoint_main, s))
		return -EAGAIN;
	s->ckpt_running = s->ckpt_active = true;
	return 0;
}

/* A checkpoint request: answered when the checkpoint thread is done, so the
 * connection's thread (and its pushes) goes on meanwhile. Called locked. */
static int checkpoint_async(struct rdps_server *s, struct rdps_request *req)
{
	if (!s->ckpt_dir) {
		snprintf(req->errmsg, req->errlen,
			 "server %u was started without a checkpoint directory", s->server_id);
		return -EOPNOTSUPP;
	}
	if (s->ckpt_nwaiters == RDPS_ARRAY_SIZE(s->ckpt_waiters)) {
		snprintf(req->errmsg, req->errlen, "%u checkpoint requests are waiting already",
			 s->ckpt_nwaiters);
		return -EBUSY;
	}
	s->ckpt_waiters[s->ckpt_nwaiters++] = req->token;
	if (!s->ckpt_active && checkpoint_spawn(s)) {
		s->ckpt_nwaiters--;
		snprintf(req->errmsg, req->errlen, "no thread for the checkpoint");
		return -EAGAIN;
	}
	return RDPS_REPLY_DEFERRED;
}

/* The job's requests: rare, and serialised by s->lock. */
static int handle_control(struct rdps_server *s, struct rdps_request *req)
{
	int ret = 0;

	switch (req->type) {
	case RDPS_REQ_HELLO:
		req->welcome.instance = s->instance;
		req->welcome.ckpt_seq = s->restored_seq;
		req->welcome.ckpt_age_ms = s->restored_age_ms;
		ret = req->observer ? 0 : handle_hello(s, req);
		break;
	case RDPS_REQ_BYE:
		if (!req->observer)
			handle_bye(s, req);
		return 0;
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_ALLREDUCE:
		ret = handle_collective(s, req);
		break;
	case RDPS_REQ_CHECKPOINT:
		if (req->observer && !req->admin) {
			snprintf(req->errmsg, req->errlen, "a checkpoint is asked for by the job's "
				 "clients, or by an observer holding the secret or on server %u's "
				 "machine", s->server_id);
			return -EACCES;
		}
		ret = checkpoint_async(s, req);
		break;
	case RDPS_REQ_SHUTDOWN:
		if (req->observer && !req->admin) {
			snprintf(req->errmsg, req->errlen, "server %u is shut down by the job's "
				 "clients, or by an observer holding the secret or on its machine",
				 s->server_id);
			return -EACCES;
		}
		if (s->keep_alive && !req->observer) {
			/* The tables stay for the next job to attach to. */
			rdps_info("server %u: keep-alive: the job's shutdown request from client %u "
				  "is ignored (rdps shutdown stops this server)", s->server_id,
				  req->client_id);
			break;
		}
		rdps_info("server %u: shutdown requested by client %u (%s)", s->server_id,
			  req->client_id, req->peer);
		s->stop = 1;
		break;
	default:
		snprintf(req->errmsg, req->errlen, "unknown request type %u", req->type);
		return -EOPNOTSUPP;
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Tables clients make (DGL's DistTensor): RDPS_REQ_TABLE, under s->lock.   */

/* "1000 rows x 16 float32" */
static const char *shape_str(char *buf, size_t len, uint64_t rows, uint32_t elems, int dtype)
{
	snprintf(buf, len, "%llu rows x %u %s", (unsigned long long)rows, elems,
		 rdps_dtype_name(dtype) ? rdps_dtype_name(dtype) : "?");
	return buf;
}

/* The slot of the table called name, or -1. */
static int table_by_name(const struct rdps_server *s, const char *name)
{
	for (uint32_t t = 0; t < s->num_tables; t++) {
		struct rdps_shard_info info;

		if (!s->shards[t])
			continue;
		rdps_shard_info(s->shards[t], &info);
		if (!strcmp(info.name, name))
			return (int)t;
	}
	return -1;
}

/* The desc of slot t as this server exposes it (RDMA keys included). */
static void table_desc(const struct rdps_server *s, uint32_t t, struct rdps_table_desc *d)
{
	if (t >= s->num_config_tables) {
		*d = s->client_tables[t];
		return;
	}
	/* A config table: float32 rows as its shard holds them. */
	{
		struct rdps_shard_info info;

		rdps_shard_info(s->shards[t], &info);
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", info.name);
		d->table_id = t;
		d->dim = d->elems = info.dim;
		d->num_rows = info.num_rows;
		d->lo = info.lo;
		d->hi = info.hi;
		d->stride = (uint32_t)info.stride;
		d->optimizer = (uint32_t)info.optimizer;
		d->dtype = (uint32_t)s->config_dtype[t];
		d->elems = s->config_elems[t] ? s->config_elems[t] : info.dim;
	}
}

/* Whether a table (or a change of one) of need more bytes fits the table
 * budget; if not, a reason naming the budget in req. */
static bool table_fits(struct rdps_server *s, struct rdps_request *req, const char *what,
		       uint64_t need)
{
	char a[32], b[32], c[32];

	if (s->table_bytes <= s->table_budget && need <= s->table_budget - s->table_bytes)
		return true;
	snprintf(req->errmsg, req->errlen, "%s needs %s on server %u, but its tables may take "
		 "%s (--max-table-memory) and hold %s already", what,
		 rdps_bytes_str(need, a, sizeof(a)), s->server_id,
		 rdps_bytes_str(s->table_budget, b, sizeof(b)),
		 rdps_bytes_str(s->table_bytes, c, sizeof(c)));
	return false;
}

/* The first control byte of a table name from the wire, or -1: such names
 * are refused, so none reaches a log, a file name or a terminal. */
static int name_control_byte(const char *name)
{
	for (int i = 0; name[i]; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return i;
	return -1;
}

static int table_create(struct rdps_server *s, const struct rdps_table_req *tr,
			struct rdps_request *req, uint32_t *id)
{
	uint64_t words64 = rdps_dtype_row_words((int)tr->dtype, tr->elems);
	uint32_t words = words64 <= RDPS_MAX_DIM ? (uint32_t)words64 : 0;
	uint64_t off[2], need;
	struct rdps_shard_params sp = {
		.name = tr->name, .dim = words, .num_rows = tr->num_rows,
		.init = (int)tr->init, .init_range = tr->init_range, .seed = tr->seed,
		.optimizer = (int)tr->optimizer, .lr = tr->lr, .eps = tr->eps,
		.beta1 = tr->beta1, .beta2 = tr->beta2,
	};
	struct rdps_region r = { 0 };
	struct rdps_shard_info info;
	struct rdps_shard *sh;
	char a[96], b[96];
	int t = table_by_name(s, tr->name), ret;

	if (name_control_byte(tr->name) >= 0) {
		snprintf(req->errmsg, req->errlen, "table name has a control byte (0x%02x) at "
			 "offset %d", (unsigned char)tr->name[name_control_byte(tr->name)],
			 name_control_byte(tr->name));
		return -EINVAL;
	}
	if (!tr->name[0] || tr->dtype >= RDPS_DTYPE_COUNT || !tr->elems || !tr->num_rows ||
	    !words || (tr->init != RDPS_INIT_ZEROS && tr->init != RDPS_INIT_UNIFORM) ||
	    (tr->dtype != RDPS_DTYPE_F32 && (tr->init != RDPS_INIT_ZEROS ||
					     tr->optimizer != RDPS_OPT_NONE))) {
		snprintf(req->errmsg, req->errlen, "table '%s': bad shape %s (rows and elements "
			 "above 0, rows of at most %d 32-bit words: this is %llu), or an init or "
			 "optimizer its dtype cannot have (only float32 tables start uniform "
			 "or take gradients)", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
			 RDPS_MAX_DIM, (unsigned long long)words64);
		return -EINVAL;
	}
	if (t >= 0) {
		struct rdps_table_desc d;

		/* Made already (by another client of the job, most likely):
		 * the same shape is the same table; another is an error. */
		table_desc(s, (uint32_t)t, &d);
		if (d.num_rows != tr->num_rows || (d.elems ? d.elems : d.dim) != tr->elems ||
		    d.dtype != tr->dtype ||
		    (tr->table_id != RDPS_TABLE_ANY_ID && tr->table_id != (uint32_t)t)) {
			snprintf(req->errmsg, req->errlen, "table '%s' exists on server %u as %s "
				 "(table %d); this asks for %s%s", tr->name, s->server_id,
				 shape_str(a, sizeof(a), d.num_rows, d.elems ? d.elems : d.dim,
					   (int)d.dtype),
				 t, shape_str(b, sizeof(b), tr->num_rows, tr->elems, (int)tr->dtype),
				 tr->table_id != RDPS_TABLE_ANY_ID && tr->table_id != (uint32_t)t
					 ? " in another slot" : "");
			return -EEXIST;
		}
		*id = (uint32_t)t;
		return 0;
	}
	if (tr->table_id == RDPS_TABLE_ANY_ID) {
		if (s->server_id != 0) {
			snprintf(req->errmsg, req->errlen, "tables are made on server 0 first");
			return -EINVAL;
		}
		/* The lowest free slot after the config's tables. */
		for (t = (int)s->num_config_tables; t < RDPS_MAX_TABLES && s->shards[t]; t++)
			;
		if (t == RDPS_MAX_TABLES) {
			snprintf(req->errmsg, req->errlen, "server %u holds %d tables already, the "
				 "most it can", s->server_id, RDPS_MAX_TABLES);
			return -ENOSPC;
		}
	} else {
		t = (int)tr->table_id;
		if (t < (int)s->num_config_tables || t >= RDPS_MAX_TABLES || s->shards[t]) {
			snprintf(req->errmsg, req->errlen, "table '%s' cannot go into slot %d of "
				 "server %u (another table is there)", tr->name, t, s->server_id);
			return -EEXIST;
		}
	}
	/* Rows split evenly over the servers, as --table's are (the first
	 * num_rows % servers get one more: rdps_book_even). */
	{
		uint64_t q = tr->num_rows / s->num_servers, extra = tr->num_rows % s->num_servers;
		uint64_t i = s->server_id;

		off[0] = i * q + (i < extra ? i : extra);
		off[1] = off[0] + q + (i < extra ? 1 : 0);
	}
	sp.table_id = (uint32_t)t;
	sp.lo = off[0];
	sp.hi = off[1];
	/* Held against the budget before anything is allocated: a 96-byte
	 * request must not make the server zero gigabytes (or wrap a size). */
	if (rdps_shard_footprint(&sp, &need)) {
		snprintf(req->errmsg, req->errlen, "table '%s' (%s): rows [%llu, %llu) of %u "
			 "words on server %u do not fit in 64-bit sizes", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
			 (unsigned long long)off[0], (unsigned long long)off[1], words,
			 s->server_id);
		return -EOVERFLOW;
	}
	snprintf(b, sizeof(b), "table '%s' (%s)", tr->name,
		 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype));
	if (!table_fits(s, req, b, need))
		return -ENOSPC;
	ret = rdps_shard_create(&sp, &sh);
	if (ret) {
		snprintf(req->errmsg, req->errlen, "table '%s' (%s) on server %u: %s", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype), s->server_id,
			 ret == -EINVAL ? "invalid optimizer settings" : rdps_strerror(ret));
		return ret;
	}
	rdps_shard_set_concurrent(sh, true); /* clients write while others read */
	rdps_shard_info(sh, &info);
	snprintf(r.desc.name, sizeof(r.desc.name), "%s", tr->name);
	r.desc.table_id = (uint32_t)t;
	r.desc.dim = words;
	r.desc.num_rows = tr->num_rows;
	r.desc.lo = info.lo;
	r.desc.hi = info.hi;
	r.desc.stride = (uint32_t)info.stride;
	r.desc.optimizer = tr->optimizer;
	r.desc.dtype = tr->dtype;
	r.desc.elems = tr->elems;
	r.base = info.base;
	r.len = info.len;
	ret = s->ops->add_region(s->ts, &r);
	if (ret) {
		snprintf(req->errmsg, req->errlen, "table '%s': the %s transport cannot expose "
			 "it: %s", tr->name, s->ops->name, rdps_strerror(ret));
		rdps_shard_destroy(sh);
		return ret;
	}
	s->client_tables[t] = r.desc;
	s->footprint[t] = need;
	s->table_bytes += need;
	__atomic_store_n(&s->shards[t], sh, __ATOMIC_RELEASE);
	if ((uint32_t)t >= s->num_tables)
		__atomic_store_n(&s->num_tables, (uint32_t)t + 1, __ATOMIC_RELEASE);
	rdps_info("server %u: table '%s' (%s, optimizer %s) made by client %u in slot %d: "
		  "rows [%llu, %llu) here", s->server_id, tr->name,
		  shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
		  rdps_optimizer_name((int)tr->optimizer), req->client_id, t,
		  (unsigned long long)info.lo, (unsigned long long)info.hi);
	*id = (uint32_t)t;
	return 0;
}

/* Drops a table clients made, once no request uses it. */
static int table_drop(struct rdps_server *s, uint32_t t, struct rdps_request *req)
{
	struct rdps_shard *sh = s->shards[t];

	if (t < s->num_config_tables) {
		snprintf(req->errmsg, req->errlen, "table '%s' is the server's own (--table or "
			 "--partition): clients cannot drop it", s->client_tables[t].name);
		return -EPERM;
	}
	__atomic_store_n(&s->shards[t], NULL, __ATOMIC_RELEASE);
	s->ops->remove_region(s->ts, t);
	/* Requests that took the shard before finish first (they are short). */
	while (__atomic_load_n(&s->refs[t], __ATOMIC_ACQUIRE))
		sched_yield();
	rdps_info("server %u: table '%s' dropped by client %u", s->server_id,
		  s->client_tables[t].name, req->client_id);
	memset(&s->client_tables[t], 0, sizeof(s->client_tables[t]));
	rdps_shard_destroy(sh);
	s->table_bytes -= s->footprint[t];
	s->footprint[t] = 0;
	return 0;
}

static int table_request(struct rdps_server *s, struct rdps_request *req)
{
	struct rdps_table_req tr;
	struct rdps_table_desc *d = req->reply;
	struct rdps_shard_info si;
	uint32_t id = 0;
	int t, ret;

	if (req->payload_len != sizeof(tr) || req->reply_cap < sizeof(*d))
		return -EINVAL;
	memcpy(&tr, req->payload, sizeof(tr));
	tr.name[RDPS_TABLE_NAME_MAX - 1] = '\0';
	switch (tr.op) {
	case RDPS_TABLE_CREATE:
		ret = table_create(s, &tr, req, &id);
		break;
	case RDPS_TABLE_LOOKUP:
	case RDPS_TABLE_DROP:
	case RDPS_TABLE_SET_OPTIMIZER:
		t = table_by_name(s, tr.name);
		if (t < 0) {
			snprintf(req->errmsg, req->errlen, "no table '%s' on server %u", tr.name,
				 s->server_id);
			return -ENOENT;
		}
		id = (uint32_t)t;
		ret = 0;
		if (tr.op == RDPS_TABLE_DROP) {
			table_desc(s, id, d);
			req->reply_len = sizeof(*d);
			return table_drop(s, id, req);
		}
		if (tr.op == RDPS_TABLE_SET_OPTIMIZER) {
			struct rdps_table_desc cur;

			table_desc(s, id, &cur);
			if (s->read_only[id] && tr.optimizer != RDPS_OPT_NONE) {
				snprintf(req->errmsg, req->errlen, "table '%s' is read-only (loaded "
					 "from its files by the server): it takes no gradients",
					 tr.name);
				return -EPERM;
			}
			if (cur.dtype != RDPS_DTYPE_F32 && tr.optimizer != RDPS_OPT_NONE) {
				snprintf(req->errmsg, req->errlen, "table '%s' holds %s: only float32 "
					 "tables take gradients", tr.name, rdps_dtype_name((int)cur.dtype));
				return -EINVAL;
			}
			/* Every client may ask for it: the same settings are no
			 * change (its state, which training built, stays). */
			rdps_shard_info(s->shards[id], &si);
			{
				float eps = tr.eps > 0 ? tr.eps
					    : tr.optimizer == RDPS_OPT_ADAM ? RDPS_ADAM_EPS
									   : RDPS_ADAGRAD_EPS;

				if (si.optimizer == (int)tr.optimizer && si.lr == tr.lr && si.eps == eps &&
				    si.beta1 == (tr.beta1 > 0 ? tr.beta1 : RDPS_ADAM_BETA1) &&
				    si.beta2 == (tr.beta2 > 0 ? tr.beta2 : RDPS_ADAM_BETA2))
					break;
			}
			{
				/* The new optimizer's state is allocated before the
				 * old one is freed: both count against the budget. */
				struct rdps_shard_params fp = {
					.dim = si.dim, .lo = si.lo, .hi = si.hi,
					.optimizer = (int)tr.optimizer,
				};
				uint64_t fresh, rows_only;
				char what[96];

				fp.optimizer = RDPS_OPT_NONE;
				if (rdps_shard_footprint(&fp, &rows_only))
					return -EOVERFLOW;
				fp.optimizer = (int)tr.optimizer;
				if (rdps_shard_footprint(&fp, &fresh)) {
					snprintf(req->errmsg, req->errlen, "table '%s': the state of "
						 "optimizer %u does not fit in 64-bit sizes", tr.name,
						 tr.optimizer);
					return -EOVERFLOW;
				}
				snprintf(what, sizeof(what), "optimizer %s for table '%s'",
					 rdps_optimizer_name((int)tr.optimizer), tr.name);
				if (!table_fits(s, req, what, fresh - rows_only))
					return -ENOSPC;
				ret = rdps_shard_set_optimizer(s->shards[id], (int)tr.optimizer, tr.lr,
							       tr.eps, tr.beta1, tr.beta2);
				if (!ret) {
					s->table_bytes = s->table_bytes - s->footprint[id] + fresh;
					s->footprint[id] = fresh;
				}
			}
			if (ret) {
				snprintf(req->errmsg, req->errlen, "table '%s': optimizer %u with lr "
					 "%g, eps %g, betas %g, %g: %s", tr.name, tr.optimizer, tr.lr,
					 tr.eps, tr.beta1, tr.beta2, ret == -EINVAL ? "invalid"
									 : rdps_strerror(ret));
				return ret;
			}
			if (id >= s->num_config_tables)
				s->client_tables[id].optimizer = tr.optimizer;
		}
		break;
	default:
		snprintf(req->errmsg, req->errlen, "unknown table operation %u", tr.op);
		return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	table_desc(s, id, d);
	req->reply_len = sizeof(*d);
	return 0;
}

static int handle(void *ctx, struct rdps_request *req)
{
	struct rdps_server *s = ctx;
	struct rdps_shard_info info;
	struct rdps_shard *sh;
	int ret = 0;

	if (req->observer && req->type != RDPS_REQ_HELLO && req->type != RDPS_REQ_BYE &&
	    req->type != RDPS_REQ_STATS && req->type != RDPS_REQ_SHUTDOWN &&
	    req->type != RDPS_REQ_CHECKPOINT) {
		snprintf(req->errmsg, req->errlen,
			 "an observer connection may only ask for stats, checkpoint or shutdown");
		return -EPERM;
	}
	/* num_clients changes only when no client of the job is connected. */
	if (!req->observer && req->type != RDPS_REQ_HELLO && req->type != RDPS_REQ_BYE &&
	    req->client_id >= __atomic_load_n(&s->num_clients, __ATOMIC_RELAXED)) {
		snprintf(req->errmsg, req->errlen, "request from a client outside the job");
		return -EPROTO;
	}
	switch (req->type) {
	case RDPS_REQ_PULL:
		if (!(sh = check_rows(s, req, &ret)))
			break;
		rdps_shard_read(sh, req->ids, req->n, req->rows_out);
		rdps_shard_info(sh, &info);
		shard_put(s, req->table);
		RDPS_STAT_ADD(s->stats.rows_pulled, req->n);
		RDPS_STAT_ADD(s->stats.bytes_in, 8 + (uint64_t)req->n * 8);
		RDPS_STAT_ADD(s->stats.bytes_out, (uint64_t)req->n * info.dim * 4);
		break;
	case RDPS_REQ_PUSH:
		if (!(sh = check_writable(s, req, &ret)))
			break;
		rdps_shard_info(sh, &info);
		if ((ret = check_finite(s, req, &info)) < 0) {
			shard_put(s, req->table);
			break;
		}
		ret = rdps_shard_apply_gather(sh, req->ids, req->grads, req->grad_index, req->n);
		shard_put(s, req->table);
		if (ret == -EPERM)
			snprintf(req->errmsg, req->errlen, "table '%s' has no optimizer: write its "
				 "rows (set), or give it one", info.name);
		if (ret)
			break;
		RDPS_STAT_ADD(s->stats.rows_pushed, req->n);
		/* client_id < num_clients == rows_clients (handle_hello) */
		RDPS_STAT_ADD(s->rows_applied[req->client_id], req->n);
		RDPS_STAT_ADD(s->stats.bytes_in, 8 + (uint64_t)req->n * (8 + info.dim * 4));
		break;
	case RDPS_REQ_SET:
		/* The rows travel where a push's gradients do. */
		if (!(sh = check_writable(s, req, &ret)))
			break;
		rdps_shard_set(sh, req->ids, req->grads, req->n);
		rdps_shard_info(sh, &info);
		shard_put(s, req->table);
		RDPS_STAT_ADD(s->stats.bytes_in, 8 + (uint64_t)req->n * (8 + info.dim * 4));
		break;
	case RDPS_REQ_SAMPLE:
		/* Read-only tables: no lock. */
		ret = handle_sample(s, req);
		break;
	case RDPS_REQ_TABLE:
		pthread_mutex_lock(&s->lock);
		ret = table_request(s, req);
		pthread_mutex_unlock(&s->lock);
		break;
	case RDPS_REQ_FLUSH:
		/* Requests of a connection are handled in order, by one thread:
		 * every earlier push is applied by now. */
		break;
	case RDPS_REQ_STATS:
		if (req->reply_cap < sizeof(s->stats))
			return -EINVAL;
		RDPS_STAT_ADD(s->stats.requests[RDPS_REQ_STATS], 1);
		stats_copy(&s->stats, req->reply);
		req->reply_len = sizeof(s->stats);
		return 0;
	default:
		pthread_mutex_lock(&s->lock);
		ret = handle_control(s, req);
		pthread_mutex_unlock(&s->lock);
		break;
	}
	if (ret >= 0 && req->type < 16)
		RDPS_STAT_ADD(s->stats.requests[req->type], 1);
	return ret;
}

/* --resume: the newest valid checkpoint, with the push counts it holds. */
static int restore(struct rdps_server *s, char *err, size_t errlen)
{
	struct rdps_ckpt_info info;
	struct timespec now;
	uint64_t now_ms;
	int ret;

	struct rdps_shard *ck[RDPS_MAX_TABLES];
	uint32_t nck = ckpt_shards(s, ck);

	ret = rdps_ckpt_restore(s->ckpt_dir, s->server_id, ck, nck, &info, err, errlen);
	if (ret)
		return ret;
	clock_gettime(CLOCK_REALTIME, &now);
	now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	/* ckpt_seq stays the newest present: after a fallback past a damaged
	 * one, the next is numbered after the damaged one. */
	s->ckpt_good = s->restored_seq = info.seq;
	s->restored_age_ms = now_ms > info.time_unix_ms ? now_ms - info.time_unix_ms : 0;
	s->restore_job_open = true;
	s->rows_clients = info.job.num_clients <= RDPS_MAX_CLIENTS ? info.job.num_clients : 0;
	if (info.job.pushed_rows)
		memcpy(s->rows_applied, info.job.pushed_rows,
		       (size_t)s->rows_clients * sizeof(uint64_t));
	free(info.job.pushed_rows);
	memset(s->rows_met, 0, RDPS_MAX_CLIENTS);
	s->rows_unknown = !info.job_known;
	rdps_info("server %u: restored checkpoint %llu of %s/server-%u, written %.1f s before: "
		  "rows pushed to this server since then are rolled back%s", s->server_id,
		  (unsigned long long)info.seq, s->ckpt_dir, s->server_id,
		  s->restored_age_ms / 1e3,
		  info.job_known ? " (each client's count is logged as it reconnects)"
				 : " (the checkpoint predates push counts: how many is unknown)");
	return 0;
}

/* A config table's rows from memory (packed elems each; rows
 * [lo, hi) of the shard), written whole-word padded, in chunks. */
static int load_rows(struct rdps_shard *sh, const struct rdps_server_table_config *tc)
{
	enum { CHUNK = 4096 };
	struct rdps_shard_info info;
	size_t bytes, words;
	uint64_t *ids;
	char *buf;

	rdps_shard_info(sh, &info);
	bytes = tc->elems ? rdps_dtype_size(tc->dtype) * tc->elems : (size_t)info.dim * 4;
	words = (size_t)info.dim * 4;
	ids = malloc(CHUNK * sizeof(*ids));
	buf = calloc(CHUNK, words);
	if (!ids || !buf) {
		free(ids);
		free(buf);
		return -ENOMEM;
	}
	for (uint64_t at = info.lo; at < info.hi;) {
		uint32_t n = info.hi - at < CHUNK ? (uint32_t)(info.hi - at) : CHUNK;

		for (uint32_t i = 0; i < n; i++) {
			ids[i] = at + i;
			memcpy(buf + i * words, (const char *)tc->rows + (at - info.lo + i) * bytes,
			       bytes);
		}
		rdps_shard_set(sh, ids, buf, n);
		at += n;
	}
	free(ids);
	free(buf);
	return 0;
}

/* Whether this process may lock memory past RLIMIT_MEMLOCK (CAP_IPC_LOCK,
 * root's by default): then the limit does not bound registrations. */
static bool may_lock_any(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long caps = 0;
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &caps) == 1;
	fclose(f);
	return found && (caps >> 14 & 1); /* CAP_IPC_LOCK */
}

uint64_t rdps_server_default_table_budget(const char *transport, char *why, size_t whylen)
{
	const struct rdps_transport_ops *ops = rdps_transport_find(transport ? transport : "tcp");
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	uint64_t budget = ram / 2;
	struct rdps_transport_info ti = { 0 };
	struct rlimit rl;
	char a[32], b[32];

	if (why && whylen)
		snprintf(why, whylen, "half of the machine's %s of memory",
			 rdps_bytes_str(ram, a, sizeof(a)));
	if (ops && ops->query)
		ops->query(1, 1, &ti);
	if (ti.pins_tables && !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    !may_lock_any()) {
		uint64_t lock = (uint64_t)rl.rlim_cur > ti.server_pinned_bytes
					? (uint64_t)rl.rlim_cur - ti.server_pinned_bytes : 0;

		if (lock < budget) {
			budget = lock;
			if (why && whylen)
				snprintf(why, whylen, "the locked-memory limit (ulimit -l) of %s less "
					 "the %s the %s transport pins besides tables",
					 rdps_bytes_str((uint64_t)rl.rlim_cur, a, sizeof(a)),
					 rdps_bytes_str(ti.server_pinned_bytes, b, sizeof(b)),
					 ops->name);
		}
	}
	return budget;
}

int rdps_server_create(const struct rdps_server_config *cfg,
		       struct rdps_server **out, char *err, size_t errlen)
{
	struct rdps_region regions[RDPS_MAX_TABLES];
	const struct rdps_endpoint *ep;
	struct rdps_listen_params lp;
	struct rdps_server *s;
	uint64_t even[RDPS_MAX_SERVERS + 1];
	int ret;

	*out = NULL;
	if (!cfg->ipc || cfg->server_id >= cfg->ipc->num_servers) {
		snprintf(err, errlen, "server id %u is not in the ip_config (%u servers)",
			 cfg->server_id, cfg->ipc ? cfg->ipc->num_servers : 0);
		return -EINVAL;
	}
	/* No table is fine: clients make theirs (rdps_client_table_create). */
	if (cfg->num_tables > RDPS_MAX_TABLES) {
		snprintf(err, errlen, "at most %d tables, got %u", RDPS_MAX_TABLES,
			 cfg->num_tables);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->ckpt_lock, NULL);
	/* Sized for the largest job: pushes count into them without a lock. */
	s->rows_applied = calloc(RDPS_MAX_CLIENTS, sizeof(uint64_t));
	s->rows_met = calloc(RDPS_MAX_CLIENTS, 1);
	s->ops = rdps_transport_find(cfg->transport);
	if (!s->rows_applied || !s->rows_met) {
		ret = -ENOMEM;
		goto err_free;
	}
	if (!s->ops) {
		snprintf(err, errlen, "unknown transport '%s' (known: %s)", cfg->transport,
			 rdps_transport_names());
		ret = -EINVAL;
		goto err_free;
	}
	s->server_id = cfg->server_id;
	ret = rdps_random_bytes(&s->instance, sizeof(s->instance));
	if (ret) {
		snprintf(err, errlen, "no random bytes for the server's instance id: %s",
			 rdps_strerror(ret));
		goto err_free;
	}
	s->table_budget = cfg->max_table_memory ? cfg->max_table_memory
			  : rdps_server_default_table_budget(s->ops->name, NULL, 0);
	s->keep_alive = cfg->keep_alive;
	s->nonfinite = cfg->nonfinite;
	s->job_timeout_ns = (uint64_t)cfg->job_timeout_ms * 1000000ull;
	s->last_client_ns = rdps_now_ns();
	s->num_servers = cfg->ipc->num_servers;
	s->num_tables = s->num_config_tables = cfg->num_tables;
	for (uint32_t t = 0; t < cfg->num_tables; t++) {
		const struct rdps_server_table_config *tc = &cfg->tables[t];
		const uint64_t *off = tc->offsets;
		uint64_t words = tc->elems ? rdps_dtype_row_words(tc->dtype, tc->elems) : tc->dim;
		uint32_t dim = words <= RDPS_MAX_DIM ? (uint32_t)words : 0; /* 0: refused below */
		struct rdps_shard_params sp = {
			.name = tc->name, .table_id = t, .dim = dim,
			.num_rows = tc->num_rows, .init = tc->init,
			.init_range = tc->init_range, .seed = cfg->seed, .num_parts = tc->num_parts,
			.optimizer = tc->optimizer, .lr = tc->lr, .eps = cfg->eps,
		};
		struct rdps_shard_info info;

		memcpy(sp.parts, tc->parts, sizeof(sp.parts));
		if (tc->dtype < 0 || tc->dtype >= RDPS_DTYPE_COUNT || !dim ||
		    (tc->dtype != RDPS_DTYPE_F32 &&
		     (tc->init != RDPS_INIT_ZEROS || tc->optimizer != RDPS_OPT_NONE))) {
			snprintf(err, errlen, "table '%s': %llu rows, dtype %d with %u elements "
				 "(%llu words a row, at most %d), init %d, optimizer %s (only "
				 "float32 tables start uniform or take gradients)", tc->name,
				 (unsigned long long)tc->num_rows, tc->dtype, tc->elems,
				 (unsigned long long)words, RDPS_MAX_DIM, tc->init,
				 rdps_optimizer_name(tc->optimizer));
			ret = -EINVAL;
			goto err_destroy_shards;
		}
		if (!off) {
			rdps_book_even(tc->num_rows, s->num_servers, even);
			off = even;
		} else {
			struct rdps_book b = { s->num_servers, off };

			if (rdps_book_check(&b) || off[s->num_servers] != tc->num_rows) {
				snprintf(err, errlen,
					 "table '%s': range offsets are not a partition of its %llu rows",
					 tc->name, (unsigned long long)tc->num_rows);
				ret = -EINVAL;
				goto err_destroy_shards;
			}
		}
		sp.lo = off[s->server_id];
		sp.hi = off[s->server_id + 1];
		if (rdps_shard_footprint(&sp, &s->footprint[t])) {
			snprintf(err, errlen, "table '%s': %llu rows of %u words do not fit in "
				 "64-bit sizes", tc->name, (unsigned long long)(sp.hi - sp.lo), dim);
			ret = -EOVERFLOW;
			goto err_destroy_shards;
		}
		s->table_bytes += s->footprint[t];
		if (cfg->max_table_memory && s->table_bytes > cfg->max_table_memory) {
			char a[32], b[32];

			snprintf(err, errlen, "the server's own tables need %s with table '%s', "
				 "more than --max-table-memory (%s)",
				 rdps_bytes_str(s->table_bytes, a, sizeof(a)), tc->name,
				 rdps_bytes_str(cfg->max_table_memory, b, sizeof(b)));
			ret = -ENOSPC;
			goto err_destroy_shards;
		}
		ret = rdps_shard_create(&sp, &s->shards[t]);
		if (ret) {
			snprintf(err, errlen, "table '%s' (%llu rows x %u): %s", tc->name,
				 (unsigned long long)tc->num_rows, tc->dim,
				 ret == -EINVAL ? "invalid shape or optimizer" : rdps_strerror(ret));
			goto err_destroy_shards;
		}
		rdps_shard_info(s->shards[t], &info);
		if (tc->rows && (ret = load_rows(s->shards[t], tc))) {
			snprintf(err, errlen, "table '%s': %s", tc->name, rdps_strerror(ret));
			goto err_destroy_shards;
		}
		s->config_dtype[t] = tc->dtype;
		s->config_elems[t] = tc->elems;
		s->read_only[t] = tc->read_only;
		snprintf(s->client_tables[t].name, sizeof(s->client_tables[t].name), "%s", tc->name);
		memset(&regions[t], 0, sizeof(regions[t]));
		snprintf(regions[t].desc.name, sizeof(regions[t].desc.name), "%s", tc->name);
		regions[t].desc.table_id = t;
		regions[t].desc.dim = dim;
		regions[t].desc.dtype = (uint32_t)tc->dtype;
		regions[t].desc.elems = tc->elems ? tc->elems : dim;
		regions[t].desc.num_rows = tc->num_rows;
		regions[t].desc.lo = info.lo;
		regions[t].desc.hi = info.hi;
		regions[t].desc.stride = (uint32_t)info.stride;
		regions[t].desc.optimizer = (uint32_t)tc->optimizer;
		regions[t].base = info.base;
		regions[t].len = info.len;
	}
	if (cfg->checkpoint_dir) {
		s->ckpt_dir = strdup(cfg->checkpoint_dir);
		if (!s->ckpt_dir) {
			ret = -ENOMEM;
			goto err_destroy_shards;
		}
		s->ckpt_interval_ns = (uint64_t)cfg->checkpoint_interval_ms * 1000000ull;
		ret = rdps_ckpt_remove_stale(cfg->checkpoint_dir, s->server_id, err, errlen);
		if (ret < 0)
			goto err_destroy_shards;
		s->ckpt_seq = rdps_ckpt_last_seq(cfg->checkpoint_dir, s->server_id);
		s->ckpt_last_ns = rdps_now_ns();
	}
	if (cfg->resume) {
		if (!cfg->checkpoint_dir) {
			snprintf(err, errlen, "resuming needs a checkpoint directory");
			ret = -EINVAL;
			goto err_destroy_shards;
		}
		ret = restore(s, err, errlen);
		if (ret)
			goto err_destroy_shards;
	}
	ep = &cfg->ipc->servers[cfg->server_id];
	lp = (struct rdps_listen_params){
		.host = ep->host, .port = ep->port, .server_id = s->server_id,
		.num_servers = s->num_servers, .regions = regions,
		.num_regions = s->num_tables, .handle = handle, .ctx = s,
		.secret = cfg->secret, .allow_unauthenticated = cfg->allow_unauthenticated,
		.max_connections = cfg->max_connections,
		.handshake_timeout_ms = cfg->handshake_timeout_ms,
		.max_reply_buffer = cfg->max_reply_buffer,
		.max_request_buffer = cfg->max_request_buffer,
		.reply_stall_ms = cfg->reply_stall_ms,
		.num_threads = cfg->num_threads ? cfg->num_threads : 1,
	};
	ret = s->ops->listen(&lp, &s->ts, err, errlen);
	if (ret)
		goto err_destroy_shards;
	s->ts->stats = &s->stats;
	s->num_threads = s->ts->num_threads ? s->ts->num_threads : 1;
	if (s->num_threads < lp.num_threads)
		rdps_warn("server %u: the %s transport serves with %u thread(s), not the %u asked for",
			  s->server_id, s->ops->name, s->num_threads, lp.num_threads);
	/* Several threads apply pushes at once: reads must check rows whole. */
	for (uint32_t t = 0; t < s->num_tables; t++)
		rdps_shard_set_concurrent(s->shards[t], s->num_threads > 1);
	*out = s;
	return 0;

err_destroy_shards:
	for (uint32_t t = 0; t < cfg->num_tables; t++)
		rdps_shard_destroy(s->shards[t]);
	free(s->ckpt_dir);
err_free:
	free(s->rows_applied);
	free(s->rows_met);
	pthread_mutex_destroy(&s->ckpt_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return ret;
}

int rdps_server_poll(struct rdps_server *s, int timeout_ms)
{
	return s->ops->progress(s->ts, 0, timeout_ms);
}

int rdps_server_checkpoint(struct rdps_server *s, char *err, size_t errlen)
{
	struct rdps_shard *ck[RDPS_MAX_TABLES];
	struct rdps_ckpt_job job;
	uint64_t t0 = rdps_now_ns(), bytes = 0, seq, good, pushed0, during;
	uint64_t *counts = NULL;
	int ret;

	if (!s->ckpt_dir) {
		snprintf(err, errlen, "server %u was started without a checkpoint directory",
			 s->server_id);
		return -EOPNOTSUPP;
	}
	pthread_mutex_lock(&s->ckpt_lock);
	/* The push counts as they are now: pushes go on while rows are copied,
	 * so a row may hold a few more than its client's count says. */
	pthread_mutex_lock(&s->lock);
	job.num_clients = s->rows_clients;
	seq = s->ckpt_seq + 1;
	good = s->ckpt_good;
	pthread_mutex_unlock(&s->lock);
	counts = calloc(job.num_clients ? job.num_clients : 1, sizeof(uint64_t));
	if (!counts) {
		pthread_mutex_unlock(&s->ckpt_lock);
		return -ENOMEM;
	}
	for (uint32_t c = 0; c < job.num_clients; c++)
		counts[c] = __atomic_load_n(&s->rows_applied[c], __ATOMIC_RELAXED);
	job.pushed_rows = counts;
	pushed0 = __atomic_load_n(&s->stats.rows_pushed, __ATOMIC_RELAXED);
	ret = rdps_ckpt_write(s->ckpt_dir, s->server_id, ck, ckpt_shards(s, ck), &job, seq,
			      good, &bytes, err, errlen);
	during = __atomic_load_n(&s->stats.rows_pushed, __ATOMIC_RELAXED) - pushed0;
	__atomic_store_n(&s->stats.ckpt_rows_during, during, __ATOMIC_RELAXED);
	free(counts);
	pthread_mutex_lock(&s->lock);
	s->ckpt_last_ns = rdps_now_ns();
	if (!ret)
		s->ckpt_good = s->ckpt_seq = seq;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->ckpt_lock);
	if (ret) {
		rdps_err("server %u: checkpoint failed: %s", s->server_id, err);
		return ret;
	}
	rdps_info("server %u: checkpoint %llu written (%.1f MB in %.0f ms; %llu rows pushed "
		  "meanwhile)", s->server_id, (unsigned long long)seq, bytes / 1e6,
		  (rdps_now_ns() - t0) / 1e6, (unsigned long long)during);
	return 0;
}

/* The checkpoint thread: writes one, answers the requests that wait for it,
 * and writes another if more came meanwhile. */
static void *checkpoint_main(void *arg)
{
	struct rdps_server *s = arg;

	for (;;) {
		uint64_t tokens[RDPS_ARRAY_SIZE(s->ckpt_waiters)];
		uint32_t n;
		char err[512] = "";
		int ret;

		pthread_mutex_lock(&s->lock);
		n = s->ckpt_nwaiters;
		memcpy(tokens, s->ckpt_waiters, n * sizeof(tokens[0]));
		s->ckpt_nwaiters = 0;
		pthread_mutex_unlock(&s->lock);
		ret = n || !s->stop ? rdps_server_checkpoint(s, err, sizeof(err)) : 0;
		for (uint32_t i = 0; i < n; i++)
			s->ops->reply(s->ts, tokens[i], RDPS_REQ_CHECKPOINT, ret, ret ? err : NULL,
				      ret ? strlen(err) : 0);
		pthread_mutex_lock(&s->lock);
		if (!s->ckpt_nwaiters) {
			/* Requests from now on start another thread. */
			s->ckpt_active = false;
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		pthread_mutex_unlock(&s->lock);
	}
}

/* Starts a checkpoint without a request to answer (the interval's), unless
 * one is being written. */
static void checkpoint_start(struct rdps_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->ckpt_last_ns = rdps_now_ns(); /* not again before this one ends */
	if (!s->ckpt_active && checkpoint_spawn(s))
		rdps_warn("server %u: no thread for the interval's checkpoint; trying again "
			  "at the next interval", s->server_id);
	pthread_mutex_unlock(&s->lock);
}

/* Joins the checkpoint thread: one that ended, or (wait) once it ends. */
static void checkpoint_reap(struct rdps_server *s, bool wait)
{
	bool join;

	pthread_mutex_lock(&s->lock);
	join = s->ckpt_running && (wait || !s->ckpt_active);
	pthread_mutex_unlock(&s->lock);
	if (!join)
		return;
	/* With wait, no progress thread runs any more: no new waiter comes. */
	pthread_join(s->ckpt_thread, NULL);
	pthread_mutex_lock(&s->lock);
	s->ckpt_running = s->ckpt_active = false;
	pthread_mutex_unlock(&s->lock);
}

struct worker_arg {
	struct rdps_server *s;
	uint32_t thread;
};

/* Progress threads 1..: serve their own connections until the server stops. */
static void *worker_main(void *arg)
{
	struct worker_arg a = *(struct worker_arg *)arg;
	struct rdps_server *s = a.s;

	free(arg);
	while (!s->stop) {
		int ret = s->ops->progress(s->ts, a.thread, 100);

		if (ret < 0) {
			rdps_err("server %u: transport thread %u failed: %s", s->server_id, a.thread,
				 rdps_strerror(ret));
			__atomic_store_n(&s->worker_ret, ret, __ATOMIC_RELAXED);
			s->stop = 1;
		}
	}
	return NULL;
}

static void workers_join(struct rdps_server *s)
{
	s->stop = 1;
	for (uint32_t i = 0; i < s->num_workers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	s->workers = NULL;
	s->num_workers = 0;
}

static int workers_start(struct rdps_server *s)
{
	uint32_t n = s->ts->progress_threads > 1 ? s->ts->progress_threads - 1 : 0;

	if (!n)
		return 0;
	s->workers = calloc(n, sizeof(*s->workers));
	if (!s->workers)
		return -ENOMEM;
	while (s->num_workers < n) {
		struct worker_arg *a = malloc(sizeof(*a));

		if (a) {
			a->s = s;
			a->thread = s->num_workers + 1;
		}
		if (!a || pthread_create(&s->workers[s->num_workers], NULL, worker_main, a)) {
			free(a);
			workers_join(s);
			return -EAGAIN;
		}
		s->num_workers++;
	}
	return 0;
}

int rdps_server_run(struct rdps_server *s)
{
	int ret = workers_start(s);

	if (ret) {
		rdps_err("server %u: cannot start %u transport threads: %s", s->server_id,
			 s->ts->progress_threads - 1, rdps_strerror(ret));
		return ret;
	}
	while (!s->stop) {
		/* A short timeout bounds how long a stop request waits. */
		ret = s->ops->progress(s->ts, 0, 100);
		if (ret < 0) {
			rdps_err("server %u: transport failed: %s", s->server_id,
				 rdps_strerror(ret));
			break;
		}
		ret = 0;
		if (__atomic_load_n(&s->connected, __ATOMIC_RELAXED))
			s->last_client_ns = rdps_now_ns();
		else if (s->job_timeout_ns && rdps_now_ns() - s->last_client_ns >= s->job_timeout_ns) {
			/* The job is gone (or never came): do not linger. */
			rdps_warn("server %u: no client of the job for %.1f s; exiting", s->server_id,
				  s->job_timeout_ns / 1e9);
			break;
		}
		/* Written by its own thread: pushes go on meanwhile. */
		if (s->ckpt_interval_ns && rdps_now_ns() - s->ckpt_last_ns >= s->ckpt_interval_ns)
			checkpoint_start(s);
		checkpoint_reap(s, false);
	}
	workers_join(s);
	checkpoint_reap(s, true);
	return ret ? ret : __atomic_load_n(&s->worker_ret, __ATOMIC_RELAXED);
}

void rdps_server_stop(struct rdps_server *s)
{
	s->stop = 1;
}

bool rdps_server_done(const struct rdps_server *s)
{
	return s->stop != 0;
}

void rdps_server_get_stats(const struct rdps_server *s, struct rdps_server_stats *out)
{
	*out = s->stats;
}

struct rdps_shard *rdps_server_shard(struct rdps_server *s, uint32_t t)
{
	return t < s->num_tables ? s->shards[t] : NULL;
}

void rdps_server_print_stats(const struct rdps_server_stats *st, uint32_t server_id,
			     FILE *f)
{
	uint64_t errors = 0;

	for (int i = 0; i < 16; i++)
		errors += st->errors[i];
	fprintf(f,
		"server %u: solved message count: pull %llu (%llu rows), push %llu (%llu rows), "
		"flush %llu, barrier %llu, stats %llu, shutdown %llu; refused %llu, "
		"bad frames %llu; bytes in %.1f MB, out %.1f MB; connections %llu\n",
		server_id, (unsigned long long)st->requests[RDPS_REQ_PULL],
		(unsigned long long)st->rows_pulled,
		(unsigned long long)st->requests[RDPS_REQ_PUSH],
		(unsigned long long)st->rows_pushed,
		(unsigned long long)st->requests[RDPS_REQ_FLUSH],
		(unsigned long long)st->requests[RDPS_REQ_BARRIER],
		(unsigned long long)st->requests[RDPS_REQ_STATS],
		(unsigned long long)st->requests[RDPS_REQ_SHUTDOWN],
		(unsigned long long)errors, (unsigned long long)st->bad_frames,
		st->bytes_in / 1e6, st->bytes_out / 1e6,
		(unsigned long long)st->connections);
	if (st->conns_refused || st->handshake_timeouts || st->auth_failures)
		fprintf(f, "server %u: connections refused %llu (over the cap or out of descriptors), "
			"handshakes timed out %llu, authentication failures %llu\n", server_id,
			(unsigned long long)st->conns_refused,
			(unsigned long long)st->handshake_timeouts,
			(unsigned long long)st->auth_failures);
	{
		uint64_t rows = 0;

		for (int t = 0; t < RDPS_MAX_TABLES; t++)
			rows += st->nonfinite_rows[t];
		if (rows)
			fprintf(f, "server %u: non-finite gradients: %llu row(s) pushed, %llu "
				"push(es) refused\n", server_id, (unsigned long long)rows,
				(unsigned long long)st->nonfinite_pushes);
	}
	/* RDMA backends: the shared receive pool (all posted when idle). */
	if (st->recv_slots)
		fprintf(f, "server %u: RDMA sessions %llu; receive buffers posted %llu of %llu; "
			"pulls %s%s\n", server_id, (unsigned long long)st->rdma_sessions,
			(unsigned long long)st->recv_posted, (unsigned long long)st->recv_slots,
			st->pulls_two_sided ? "two-sided: " : "one-sided",
			st->pulls_two_sided ? rdps_two_sided_why_str(st->pulls_two_sided) : "");
}

void rdps_server_destroy(struct rdps_server *s)
{
	if (!s)
		return;
	workers_join(s);
	checkpoint_reap(s, true);
	if (s->ts)
		s->ops->destroy(s->ts, 2000);
	for (uint32_t t = 0; t < s->num_tables; t++)
		rdps_shard_destroy(s->shards[t]);
	job_reset(s);
	free(s->rows_applied);
	free(s->rows_met);
	free(s->ckpt_dir);
	pthread_mutex_destroy(&s->ckpt_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
