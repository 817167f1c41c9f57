// SPDX-License-Identifier: MIT
/* The server core's job: clients' hellos and departures (who is in the job,
 * how many rows of each client's pushes the tables hold, what a restart
 * rolled back), barriers and allreduces. Under s->lock. */
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

void rdps_sv_job_reset(struct rdps_server *s)
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

int rdps_sv_hello(struct rdps_server *s, struct rdps_request *req)
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
			rdps_sv_job_reset(s);
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

void rdps_sv_bye(struct rdps_server *s, struct rdps_request *req)
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
		rdps_sv_job_reset(s);
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
int rdps_sv_collective(struct rdps_server *s, struct rdps_request *req)
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
