// SPDX-License-Identifier: MIT
/*
 * verbs backend, server side: a worker (one progress thread) with its own
 * completion queue, completion channel and shared receive queue, the
 * sessions the listener gave it, and their teardown (verbs.h says who does
 * what across threads).
 *
 * Teardown moves the QP to the error state, waits for
 * IBV_EVENT_QP_LAST_WQE_REACHED (after it the QP consumes no more slots of
 * the shared queue and all its completions are in the CQ; providers that
 * never raise it get VERBS_DRAIN_MS), drains the CQ, and only then lets
 * the QP be destroyed: mlx5 removes a destroyed QP's completions from the
 * CQ, and slots whose completions vanish would be lost to the pool for good.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdps/common.h"
#include "tcp.h"
#include "verbs.h"

/* ---------------------------------------------------------------------- */
/* Teardown                                                               */

void verbs_session_close(struct verbs_worker *w, struct verbs_session *ss, const char *why,
			 bool close_control)
{
	struct verbs_server *vs = w->vs;
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

	if (ss->state >= SS_CLOSING)
		return;
	w->live--;
	w->closing++;
	ss->state = SS_CLOSING;
	verbs_srv_sharers_update(w);
	rdps_info("server %u: client %s: RDMA session closes: %s", vs->p.server_id, ss->peer, why);
	/* In the error state the QP takes no more slots and flushes what it
	 * holds; rdma_disconnect also tells a live peer. */
	if (ss->id && ss->id->qp)
		ibv_modify_qp(ss->id->qp, &qa, IBV_QP_STATE);
	if (ss->id)
		rdma_disconnect(ss->id);
	ss->drain_deadline = rdps_now_ns() + VERBS_DRAIN_MS * 1000000ull;
	if (close_control) {
		/* tcp.c's connections are thread 0's: it closes this one. */
		ss->close_control = true;
		__atomic_store_n(&vs->ctl_close_pending, 1, __ATOMIC_RELEASE);
		if (vs->kick_fd >= 0) {
			uint64_t one = 1;

			if (write(vs->kick_fd, &one, sizeof(one)) < 0)
				(void)0; /* the counter is full: a wakeup is pending */
		}
	}
}

void verbs_session_reap(struct verbs_worker *w, struct verbs_session *ss)
{
	if (ss->state == SS_CLOSING)
		w->closing--;
	else
		w->live--;
	verbs_pool_release(&w->pool, &ss->cr);
	verbs_srv_unqueue(w, ss);
	if (w->qp_hash)
		verbs_qp_hash_del(w, ss);
	w->sessions[ss->index] = NULL;
	w->gens[ss->index]++;
	while (w->hw && !w->sessions[w->hw - 1])
		w->hw--;
	ss->state = SS_DEAD;
	ss->next_dead = w->dead;
	w->dead = ss;
	verbs_srv_sharers_update(w);
}

void verbs_session_destroy(struct verbs_session *ss)
{
	if (ss->id) {
		if (ss->id->qp)
			rdma_destroy_qp(ss->id);
		rdma_destroy_id(ss->id);
	}
	free(ss);
}

/* ---------------------------------------------------------------------- */
/* Queues                                                                 */

int verbs_worker_init(struct verbs_server *vs, struct verbs_worker *w, uint32_t index,
		      char *err, size_t errlen)
{
	struct ibv_device_attr da;
	uint32_t nw = vs->nworkers, max_slots = VERBS_POOL_MAX_SLOTS, cqe, first;
	int ret;

	w->vs = vs;
	w->index = index;
	pthread_mutex_init(&w->lock, NULL);
	if (ibv_query_device(vs->ctx, &da)) {
		ret = -errno;
		snprintf(err, errlen, "querying the RDMA device failed: %s", strerror(-ret));
		return ret;
	}
	if (da.max_srq_wr > 0 && (uint32_t)da.max_srq_wr - 1 < max_slots)
		max_slots = (uint32_t)da.max_srq_wr - 1;
	/* The server's starting pool, split; each grows with its sessions. */
	first = RDPS_ALIGN_UP(VERBS_POOL_MIN_SLOTS / nw, VERBS_POOL_CHUNK);
	if (max_slots < first) {
		snprintf(err, errlen, "the RDMA device's shared receive queues hold %d buffers, "
			 "rdps needs %u", da.max_srq_wr, first);
		return -ENOTSUP;
	}
	/* Room for every receive slot and every session's send queue: the
	 * CQ can never overrun, even when all of them flush at once. */
	w->max_sessions = (VERBS_MAX_SESSIONS + nw - 1) / nw;
	cqe = max_slots + w->max_sessions * VERBS_SRV_SQ_DEPTH;
	if (da.max_cqe > 0 && cqe > (uint32_t)da.max_cqe) {
		cqe = (uint32_t)da.max_cqe;
		w->max_sessions = (cqe - max_slots) / VERBS_SRV_SQ_DEPTH;
	}
	w->sessions = calloc(w->max_sessions, sizeof(*w->sessions));
	w->gens = calloc(w->max_sessions, sizeof(*w->gens));
	if (!w->sessions || !w->gens || verbs_qp_hash_init(w, w->max_sessions))
		return -ENOMEM;
	w->cc = ibv_create_comp_channel(vs->ctx);
	if (!w->cc || verbs_set_nonblock(w->cc->fd))
		return -errno;
	/* Each worker's completion events on a vector of its own (an
	 * interrupt of its own where the device has enough). */
	w->cq = ibv_create_cq(vs->ctx, (int)cqe, w, w->cc,
			      vs->ctx->num_comp_vectors > 0 ? (int)(index % (uint32_t)vs->ctx->num_comp_vectors)
							    : 0);
	if (!w->cq) {
		ret = -errno;
		snprintf(err, errlen, "creating the completion queue (%u entries) failed: %s", cqe,
			 strerror(-ret));
		return ret;
	}
	ret = verbs_pool_create(&w->pool, vs->pd, max_slots, err, errlen);
	if (!ret)
		ret = verbs_pool_grow(&w->pool, first, err, errlen);
	if (!ret) {
		/* SRQ_LIMIT_REACHED says the server is behind; re-armed only
		 * once the pool recovered (verbs_srq_limit_rearm). */
		w->srq_armed = false;
		verbs_srq_limit_rearm(w);
	}
	verbs_worker_publish(w);
	return ret;
}

void verbs_worker_fini(struct verbs_worker *w)
{
	/* Everything goes: no slot needs to survive, no drain is needed. */
	for (uint32_t i = 0; w->sessions && i < w->hw; i++)
		if (w->sessions[i]) {
			struct verbs_session *ss = w->sessions[i];

			if (ss->id)
				rdma_disconnect(ss->id);
			verbs_pool_release(&w->pool, &ss->cr);
			verbs_session_destroy(ss);
		}
	while (w->dead) {
		struct verbs_session *ss = w->dead;

		w->dead = ss->next_dead;
		verbs_session_destroy(ss);
	}
	verbs_pool_destroy(&w->pool);
	if (w->cq)
		ibv_destroy_cq(w->cq);
	if (w->cc)
		ibv_destroy_comp_channel(w->cc);
	free(w->sessions);
	free(w->gens);
	free(w->qp_hash);
	if (w->vs)
		pthread_mutex_destroy(&w->lock);
	memset(w, 0, sizeof(*w));
}

/* ---------------------------------------------------------------------- */
/* Progress                                                               */

void verbs_worker_publish(struct verbs_worker *w)
{
	__atomic_store_n(&w->pub_slots, w->pool.nslots, __ATOMIC_RELAXED);
	__atomic_store_n(&w->pub_posted, w->pool.posted, __ATOMIC_RELAXED);
	__atomic_store_n(&w->pub_live, w->live, __ATOMIC_RELAXED);
}

void verbs_server_stats(struct verbs_server *vs)
{
	struct rdps_server_stats *st = vs->base.stats;
	uint64_t slots = 0, posted = 0, live = 0;

	if (!st)
		return;
	for (uint32_t i = 0; i < vs->nworkers; i++) {
		slots += __atomic_load_n(&vs->workers[i].pub_slots, __ATOMIC_RELAXED);
		posted += __atomic_load_n(&vs->workers[i].pub_posted, __ATOMIC_RELAXED);
		live += __atomic_load_n(&vs->workers[i].pub_live, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&st->recv_slots, slots, __ATOMIC_RELAXED);
	__atomic_store_n(&st->recv_posted, posted, __ATOMIC_RELAXED);
	__atomic_store_n(&st->rdma_sessions, live, __ATOMIC_RELAXED);
}

/*
 * Handles w's completions in batches of VERBS_DRAIN_BATCH, the lock held
 * per batch (so thread 0 waits for one batch at most), until the CQ is
 * found empty or VERBS_ROUND_BATCHES batches were handled (under load it
 * may never be empty: thread 0 has its listener and control connections to
 * serve too). After a batch that found it empty, frees the closing sessions
 * that were ready before it began (all their completions were in the CQ
 * then). Regrants after every batch.
 */
static int worker_round(struct verbs_worker *w)
{
	bool ready[VERBS_MAX_SESSIONS], empty = false;
	int n = 0;

	for (int b = 0; b < VERBS_ROUND_BATCHES && !empty; b++) {
		uint64_t now;
		int ret;

		pthread_mutex_lock(&w->lock);
		now = rdps_now_ns();
		for (uint32_t i = 0; i < w->hw; i++) {
			struct verbs_session *ss = w->sessions[i];

			ready[i] = ss && ss->state == SS_CLOSING &&
				   (ss->drain_ready || now >= ss->drain_deadline);
		}
		ret = verbs_srv_drain_cq(w, VERBS_DRAIN_BATCH, &empty);
		if (ret < 0) {
			pthread_mutex_unlock(&w->lock);
			return ret;
		}
		n += ret;
		if (empty)
			for (uint32_t i = 0; i < w->hw; i++) {
				struct verbs_session *ss = w->sessions[i];

				if (ss && ss->state == SS_CLOSING && ready[i])
					verbs_session_reap(w, ss);
			}
		verbs_srv_regrant(w);
		verbs_srq_limit_rearm(w);
		verbs_worker_publish(w);
		pthread_mutex_unlock(&w->lock);
	}
	return n;
}

void verbs_srq_limit_rearm(struct verbs_worker *w)
{
	struct ibv_srq_attr a = { .srq_limit = w->pool.nslots / 8 };

	/* The limit event fires once per arm: re-armed at each event, a
	 * server that lags would spin on firmware commands and events. */
	if (w->srq_armed || !w->pool.srq || w->pool.posted <= w->pool.nslots / 2)
		return;
	if (!ibv_modify_srq(w->pool.srq, &a, IBV_SRQ_LIMIT)) {
		w->srq_armed = true;
		w->srq_arms++;
	}
}

bool verbs_worker_arm(struct verbs_worker *w)
{
	int n;

	if (!w->cq_armed) {
		if (ibv_req_notify_cq(w->cq, 0))
			return false;
		w->cq_armed = true;
		w->cq_arms++;
	}
	/* A completion that came before the arm raises no event. */
	n = verbs_srv_busy_poll(w, 0);
	return n == 0;
}

int verbs_srv_busy_poll(struct verbs_worker *w, uint64_t budget_ns)
{
	uint64_t end = rdps_now_ns() + budget_ns;

	for (unsigned spins = 1;; spins++) {
		bool empty;
		int n;

		pthread_mutex_lock(&w->lock);
		n = verbs_srv_drain_cq(w, VERBS_DRAIN_BATCH, &empty);
		if (n > 0) {
			verbs_srv_regrant(w);
			verbs_worker_publish(w);
		}
		pthread_mutex_unlock(&w->lock);
		if (n)
			return n;
		/* An empty poll costs little next to the clock: look at it
		 * now and then. */
		if (!budget_ns || (spins % 16 == 0 && rdps_now_ns() >= end))
			return 0;
	}
}

int verbs_worker_progress(struct verbs_worker *w, int timeout_ms, uint64_t budget_ns,
			  bool sleep)
{
	int n = 0, ret;

	/* Under load completions come back to back: spin a bounded time
	 * before paying a wakeup through the completion channel. */
	if (budget_ns && timeout_ms) {
		ret = verbs_srv_busy_poll(w, budget_ns);
		if (ret < 0)
			return ret;
		if (ret) {
			n += ret;
			timeout_ms = 0;
		}
	}
	if (sleep && timeout_ms) {
		struct pollfd pfd = { .fd = w->cc->fd, .events = POLLIN };
		uint32_t closing;

		pthread_mutex_lock(&w->lock);
		closing = w->closing;
		pthread_mutex_unlock(&w->lock);
		/* A session waiting for its drain must not sleep past its
		 * deadline. */
		if (closing && timeout_ms > 50)
			timeout_ms = 50;
		/* The CQ is armed only to sleep on it, not every round (each
		 * arm is a doorbell); a completion found meanwhile ends it. */
		if (verbs_worker_arm(w) && poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
			return -errno;
	}
	{
		struct ibv_cq *cq;
		void *ctx;

		/* Non-blocking: fails with EAGAIN when no event is pending. An
		 * event disarms the CQ. */
		if (!ibv_get_cq_event(w->cc, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			w->cq_armed = false;
		}
	}
	ret = worker_round(w);
	if (ret < 0)
		return ret;
	return n + ret;
}
