// SPDX-License-Identifier: MIT
/* The server's checkpoints: written by a thread of their own (requests wait
 * for it, pushes do not), at an interval or on request, and the restore at
 * start (kvstore/checkpoint.c writes and reads the files). */
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

/* The config's tables a checkpoint holds (not the read-only ones). */
static uint32_t ckpt_shards(const struct rdps_server *s, struct rdps_shard **out)
{
	uint32_t n = 0;

	for (uint32_t t = 0; t < s->num_config_tables; t++)
		if (!s->read_only[t])
			out[n++] = s->shards[t];
	return n;
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
int rdps_sv_ckpt_request(struct rdps_server *s, struct rdps_request *req)
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

/* --resume: the newest valid checkpoint, with the push counts it holds. */
int rdps_sv_restore(struct rdps_server *s, char *err, size_t errlen)
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
void rdps_sv_ckpt_start(struct rdps_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->ckpt_last_ns = rdps_now_ns(); /* not again before this one ends */
	if (!s->ckpt_active && checkpoint_spawn(s))
		rdps_warn("server %u: no thread for the interval's checkpoint; trying again "
			  "at the next interval", s->server_id);
	pthread_mutex_unlock(&s->lock);
}

/* Joins the checkpoint thread: one that ended, or (wait) once it ends. */
void rdps_sv_ckpt_reap(struct rdps_server *s, bool wait)
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
