// SPDX-License-Identifier: MIT
/*
 * The server core: request semantics on top of any transport (the job:
 * server_job.c; tables clients make: server_tables.c; checkpoints:
 * server_ckpt.c; their shared state: server_internal.h).
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
#include "server_internal.h"

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

/* RDPS_REQ_STATE: the optimizer state of rows, read or written (saving or
 * loading a sparse optimizer). Not for read-only tables (they have none). */
static int handle_state(struct rdps_server *s, struct rdps_request *req)
{
	struct rdps_state_req r;
	struct rdps_shard_info info;
	struct rdps_shard *sh;
	uint32_t spr;
	int ret = 0;

	memcpy(&r, req->payload, sizeof(r)); /* length checked by the transport */
	req->table = r.table;
	req->n = r.n;
	req->ids = (const uint64_t *)((const char *)req->payload + sizeof(r));
	if (!(sh = check_rows(s, req, &ret)))
		return ret;
	rdps_shard_info(sh, &info);
	spr = rdps_shard_state_per_row(sh);
	if (!spr || spr != r.floats_per_row) {
		snprintf(req->errmsg, req->errlen, "table '%s' keeps %u float(s) of optimizer state "
			 "a row (optimizer %s); this asks for %u", info.name, spr,
			 rdps_optimizer_name(info.optimizer), r.floats_per_row);
		ret = -EINVAL;
	} else if (r.op == RDPS_STATE_WRITE) {
		if (s->read_only[r.table]) {
			ret = -EPERM;
		} else {
			rdps_shard_state_write(sh, req->ids, r.n,
					       (const float *)(req->ids + r.n));
		}
	} else if (req->reply_cap < (size_t)r.n * spr * 4) {
		ret = -EINVAL;
	} else {
		rdps_shard_state_read(sh, req->ids, r.n, req->reply);
		req->reply_len = (size_t)r.n * spr * 4;
	}
	shard_put(s, r.table);
	return ret;
}

/* RDPS_REQ_SAMPLE: picks among the edges of slots this server holds
 * (graph_sample.c checks the tables are a graph's). */
static int handle_sample(struct rdps_server *s, struct rdps_request *req)
{
	uint32_t ids[2 + RDPS_SAMPLE_MAX_GROUPS], n, got = 0;
	struct rdps_shard_info info[2 + RDPS_SAMPLE_MAX_GROUPS];
	int ret = 0;

	n = rdps_sample_req_tables(req->payload, ids, 2 + RDPS_SAMPLE_MAX_GROUPS);
	for (; got < n; got++) {
		struct rdps_shard *sh = shard_get(s, ids[got]);

		if (!sh) {
			snprintf(req->errmsg, req->errlen, "sample over unknown table %u on server "
				 "%u", ids[got], s->server_id);
			ret = -ENOENT;
			break;
		}
		rdps_shard_info(sh, &info[got]);
		if (!s->read_only[ids[got]]) {
			snprintf(req->errmsg, req->errlen, "sample over table '%s', which is not a "
				 "graph's (read-only)", info[got].name);
			ret = -EINVAL;
			got++;
			break;
		}
	}
	if (!ret)
		ret = rdps_sample_serve(info, n, req->payload, req->payload_len, req->reply,
					req->reply_cap, &req->reply_len, req->errmsg, req->errlen);
	while (got)
		shard_put(s, ids[--got]);
	if (!ret) {
		RDPS_STAT_ADD(s->stats.bytes_in, req->payload_len);
		RDPS_STAT_ADD(s->stats.bytes_out, req->reply_len);
	}
	return ret;
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

/* The job's requests: rare, and serialised by s->lock. */
static int handle_control(struct rdps_server *s, struct rdps_request *req)
{
	int ret = 0;

	switch (req->type) {
	case RDPS_REQ_HELLO:
		req->welcome.instance = s->instance;
		req->welcome.ckpt_seq = s->restored_seq;
		req->welcome.ckpt_age_ms = s->restored_age_ms;
		ret = req->observer ? 0 : rdps_sv_hello(s, req);
		break;
	case RDPS_REQ_BYE:
		if (!req->observer)
			rdps_sv_bye(s, req);
		return 0;
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_ALLREDUCE:
		ret = rdps_sv_collective(s, req);
		break;
	case RDPS_REQ_CHECKPOINT:
		if (req->observer && !req->admin) {
			snprintf(req->errmsg, req->errlen, "a checkpoint is asked for by the job's "
				 "clients, or by an observer holding the secret or on server %u's "
				 "machine", s->server_id);
			return -EACCES;
		}
		ret = rdps_sv_ckpt_request(s, req);
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
	case RDPS_REQ_STATE:
		ret = handle_state(s, req);
		break;
	case RDPS_REQ_TABLE:
		pthread_mutex_lock(&s->lock);
		ret = rdps_sv_table_request(s, req);
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
		ret = rdps_sv_restore(s, err, errlen);
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
			rdps_sv_ckpt_start(s);
		rdps_sv_ckpt_reap(s, false);
	}
	workers_join(s);
	rdps_sv_ckpt_reap(s, true);
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
		fprintf(f, "server %u: RDMA sessions %llu; receive buffers posted %llu of %llu\n",
			server_id, (unsigned long long)st->rdma_sessions,
			(unsigned long long)st->recv_posted, (unsigned long long)st->recv_slots);
}

void rdps_server_destroy(struct rdps_server *s)
{
	if (!s)
		return;
	workers_join(s);
	rdps_sv_ckpt_reap(s, true);
	if (s->ts)
		s->ops->destroy(s->ts, 2000);
	for (uint32_t t = 0; t < s->num_tables; t++)
		rdps_shard_destroy(s->shards[t]);
	rdps_sv_job_reset(s);
	free(s->rows_applied);
	free(s->rows_met);
	free(s->ckpt_dir);
	pthread_mutex_destroy(&s->ckpt_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
