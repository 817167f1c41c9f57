// SPDX-License-Identifier: MIT
/* The server core: request semantics on top of any transport. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "rdps/common.h"
#include "rdps/server.h"

struct rdps_server {
	const struct rdps_transport_ops *ops;
	struct rdps_tserver *ts;
	uint32_t server_id, num_servers, num_tables;
	struct rdps_shard *shards[RDPS_MAX_TABLES];
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
 * size belong to other clients). */
static int rows_resize(struct rdps_server *s, uint32_t n)
{
	uint64_t *applied = calloc(n, sizeof(uint64_t));
	uint8_t *met = calloc(n, 1);

	if (!applied || !met) {
		free(applied);
		free(met);
		return -ENOMEM;
	}
	free(s->rows_applied);
	free(s->rows_met);
	s->rows_applied = applied;
	s->rows_met = met;
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
		s->stats.rolled_back_rows += lost;
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
		s->stats.rolled_back_rows += lost;
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

static int check_rows(struct rdps_server *s, struct rdps_request *req)
{
	uint64_t bad;
	struct rdps_shard_info info;

	if (req->table >= s->num_tables) {
		snprintf(req->errmsg, req->errlen, "unknown table %u (server has %u)",
			 req->table, s->num_tables);
		return -ENOENT;
	}
	if (rdps_shard_check_ids(s->shards[req->table], req->ids, req->n, &bad)) {
		rdps_shard_info(s->shards[req->table], &info);
		snprintf(req->errmsg, req->errlen,
			 "id %llu of table '%s' is outside this server's rows [%llu, %llu)",
			 (unsigned long long)bad, info.name, (unsigned long long)info.lo,
			 (unsigned long long)info.hi);
		return -ERANGE;
	}
	return 0;
}

static int handle(void *ctx, struct rdps_request *req)
{
	struct rdps_server *s = ctx;
	struct rdps_shard_info info;
	int ret = 0;

	if (req->observer && req->type != RDPS_REQ_HELLO && req->type != RDPS_REQ_BYE &&
	    req->type != RDPS_REQ_STATS && req->type != RDPS_REQ_SHUTDOWN &&
	    req->type != RDPS_REQ_CHECKPOINT) {
		snprintf(req->errmsg, req->errlen,
			 "an observer connection may only ask for stats, checkpoint or shutdown");
		return -EPERM;
	}
	if (!req->observer && req->type != RDPS_REQ_HELLO && req->type != RDPS_REQ_BYE &&
	    (!s->num_clients || req->client_id >= s->num_clients)) {
		snprintf(req->errmsg, req->errlen, "request from a client outside the job");
		return -EPROTO;
	}
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
	case RDPS_REQ_PULL:
		ret = check_rows(s, req);
		if (ret)
			break;
		rdps_shard_read(s->shards[req->table], req->ids, req->n, req->rows_out);
		rdps_shard_info(s->shards[req->table], &info);
		s->stats.rows_pulled += req->n;
		s->stats.bytes_in += 8 + (uint64_t)req->n * 8;
		s->stats.bytes_out += (uint64_t)req->n * info.dim * 4;
		break;
	case RDPS_REQ_PUSH:
		ret = check_rows(s, req);
		if (ret)
			break;
		ret = rdps_shard_apply(s->shards[req->table], req->ids, req->grads, req->n);
		if (ret)
			break;
		rdps_shard_info(s->shards[req->table], &info);
		s->stats.rows_pushed += req->n;
		/* client_id < num_clients == rows_clients (handle_hello) */
		s->rows_applied[req->client_id] += req->n;
		s->stats.bytes_in += 8 + (uint64_t)req->n * (8 + info.dim * 4);
		break;
	case RDPS_REQ_FLUSH:
		/* Requests of a connection are handled in order: every earlier
		 * push is applied by now. */
		break;
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_ALLREDUCE:
		ret = handle_collective(s, req);
		break;
	case RDPS_REQ_STATS:
		if (req->reply_cap < sizeof(s->stats))
			return -EINVAL;
		s->stats.requests[RDPS_REQ_STATS]++;
		memcpy(req->reply, &s->stats, sizeof(s->stats));
		req->reply_len = sizeof(s->stats);
		return 0;
	case RDPS_REQ_CHECKPOINT:
		ret = rdps_server_checkpoint(s, req->errmsg, req->errlen);
		break;
	case RDPS_REQ_SHUTDOWN:
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
	if (ret >= 0 && req->type < 16)
		s->stats.requests[req->type]++;
	return ret;
}

/* --resume: the newest valid checkpoint, with the push counts it holds. */
static int restore(struct rdps_server *s, char *err, size_t errlen)
{
	struct rdps_ckpt_info info;
	struct timespec now;
	uint64_t now_ms;
	int ret;

	ret = rdps_ckpt_restore(s->ckpt_dir, s->server_id, s->shards, s->num_tables, &info, err,
				errlen);
	if (ret)
		return ret;
	clock_gettime(CLOCK_REALTIME, &now);
	now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	/* ckpt_seq stays the newest present: after a fallback past a damaged
	 * one, the next is numbered after the damaged one. */
	s->ckpt_good = s->restored_seq = info.seq;
	s->restored_age_ms = now_ms > info.time_unix_ms ? now_ms - info.time_unix_ms : 0;
	s->restore_job_open = true;
	free(s->rows_applied);
	free(s->rows_met);
	s->rows_applied = info.job.pushed_rows;
	s->rows_clients = info.job.num_clients;
	s->rows_met = calloc(s->rows_clients ? s->rows_clients : 1, 1);
	s->rows_unknown = !info.job_known;
	if (!s->rows_met)
		return -ENOMEM;
	rdps_info("server %u: restored checkpoint %llu of %s/server-%u, written %.1f s before: "
		  "rows pushed to this server since then are rolled back%s", s->server_id,
		  (unsigned long long)info.seq, s->ckpt_dir, s->server_id,
		  s->restored_age_ms / 1e3,
		  info.job_known ? " (each client's count is logged as it reconnects)"
				 : " (the checkpoint predates push counts: how many is unknown)");
	return 0;
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
	if (!cfg->num_tables || cfg->num_tables > RDPS_MAX_TABLES) {
		snprintf(err, errlen, "need 1..%d tables, got %u", RDPS_MAX_TABLES,
			 cfg->num_tables);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ops = rdps_transport_find(cfg->transport);
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
	s->keep_alive = cfg->keep_alive;
	s->job_timeout_ns = (uint64_t)cfg->job_timeout_ms * 1000000ull;
	s->last_client_ns = rdps_now_ns();
	s->num_servers = cfg->ipc->num_servers;
	s->num_tables = cfg->num_tables;
	for (uint32_t t = 0; t < cfg->num_tables; t++) {
		const struct rdps_server_table_config *tc = &cfg->tables[t];
		const uint64_t *off = tc->offsets;
		struct rdps_shard_params sp = {
			.name = tc->name, .table_id = t, .dim = tc->dim,
			.num_rows = tc->num_rows, .init = tc->init,
			.init_range = tc->init_range, .seed = cfg->seed, .num_parts = tc->num_parts,
			.optimizer = tc->optimizer, .lr = tc->lr, .eps = cfg->eps,
		};
		struct rdps_shard_info info;

		memcpy(sp.parts, tc->parts, sizeof(sp.parts));
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
		ret = rdps_shard_create(&sp, &s->shards[t]);
		if (ret) {
			snprintf(err, errlen, "table '%s' (%llu rows x %u): %s", tc->name,
				 (unsigned long long)tc->num_rows, tc->dim,
				 ret == -EINVAL ? "invalid shape or optimizer" : rdps_strerror(ret));
			goto err_destroy_shards;
		}
		rdps_shard_info(s->shards[t], &info);
		memset(&regions[t], 0, sizeof(regions[t]));
		snprintf(regions[t].desc.name, sizeof(regions[t].desc.name), "%s", tc->name);
		regions[t].desc.table_id = t;
		regions[t].desc.dim = tc->dim;
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
		.secret = cfg->secret, .max_connections = cfg->max_connections,
		.handshake_timeout_ms = cfg->handshake_timeout_ms,
		.max_reply_buffer = cfg->max_reply_buffer,
	};
	ret = s->ops->listen(&lp, &s->ts, err, errlen);
	if (ret)
		goto err_destroy_shards;
	s->ts->stats = &s->stats;
	*out = s;
	return 0;

err_destroy_shards:
	for (uint32_t t = 0; t < cfg->num_tables; t++)
		rdps_shard_destroy(s->shards[t]);
	free(s->rows_applied);
	free(s->rows_met);
	free(s->ckpt_dir);
err_free:
	free(s);
	return ret;
}

int rdps_server_poll(struct rdps_server *s, int timeout_ms)
{
	return s->ops->progress(s->ts, timeout_ms);
}

int rdps_server_checkpoint(struct rdps_server *s, char *err, size_t errlen)
{
	struct rdps_ckpt_job job = { s->rows_clients, s->rows_applied };
	uint64_t t0 = rdps_now_ns(), bytes = 0;
	int ret;

	if (!s->ckpt_dir) {
		snprintf(err, errlen, "server %u was started without a checkpoint directory",
			 s->server_id);
		return -EOPNOTSUPP;
	}
	ret = rdps_ckpt_write(s->ckpt_dir, s->server_id, s->shards, s->num_tables, &job,
			      s->ckpt_seq + 1, s->ckpt_good, &bytes, err, errlen);
	s->ckpt_last_ns = rdps_now_ns();
	if (ret) {
		rdps_err("server %u: checkpoint failed: %s", s->server_id, err);
		return ret;
	}
	s->ckpt_good = ++s->ckpt_seq;
	rdps_info("server %u: checkpoint %llu written (%.1f MB in %.0f ms)", s->server_id,
		  (unsigned long long)s->ckpt_seq, bytes / 1e6, (s->ckpt_last_ns - t0) / 1e6);
	return 0;
}

int rdps_server_run(struct rdps_server *s)
{
	while (!s->stop) {
		/* A short timeout bounds how long a stop request waits. */
		int ret = s->ops->progress(s->ts, 100);

		if (ret < 0) {
			rdps_err("server %u: transport failed: %s", s->server_id,
				 rdps_strerror(ret));
			return ret;
		}
		if (s->connected)
			s->last_client_ns = rdps_now_ns();
		else if (s->job_timeout_ns && rdps_now_ns() - s->last_client_ns >= s->job_timeout_ns) {
			/* The job is gone (or never came): do not linger. */
			rdps_warn("server %u: no client of the job for %.1f s; exiting", s->server_id,
				  s->job_timeout_ns / 1e9);
			s->stop = 1;
			break;
		}
		if (s->ckpt_interval_ns && rdps_now_ns() - s->ckpt_last_ns >= s->ckpt_interval_ns) {
			char err[512];

			rdps_server_checkpoint(s, err, sizeof(err));
		}
	}
	return 0;
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
	/* RDMA backends: the shared receive pool (all posted when idle). */
	if (st->recv_slots)
		fprintf(f, "server %u: RDMA sessions %llu; receive buffers posted %llu of %llu\n",
			server_id, (unsigned long long)st->rdma_sessions,
			(unsigned long long)st->recv_posted, (unsigned long long)st->recv_slots);
}

void rdps_server_destroy(struct rdps_server *s)
{
	if (!s)
		return;
	if (s->ts)
		s->ops->destroy(s->ts, 2000);
	for (uint32_t t = 0; t < s->num_tables; t++)
		rdps_shard_destroy(s->shards[t]);
	job_reset(s);
	free(s->rows_applied);
	free(s->rows_met);
	free(s->ckpt_dir);
	free(s);
}
