// SPDX-License-Identifier: MIT
/*
 * verbs backend, server side: the listener, one session (RC queue pair) per
 * client connection given to the least busy worker (verbs_worker.c), async
 * events, the control connections, and thread 0's share of the work.
 *
 * Shards are registered remote-read-only and read by clients without this
 * CPU. Pushes arrive in the receive slots of verbs_recv_pool.c; a session may
 * fill only the slots its credits promise it.
 *
 * Completions are classified by wr_id alone (receive slot, or a session's
 * send), never by opcode: a failed completion's opcode is undefined
 * (ibv_poll_cq(3); mlx5 does not write it).
 *
 * A session lives exactly as long as its control connection (tcp.c): the
 * queue pair is created with that connection's one-use token and torn down
 * (verbs_worker.c) when it closes; when the queue pair fails first, the
 * control connection is closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "tcp.h"
#include "verbs.h"
#include "wire.h"

static inline struct verbs_server *to_verbs_server(struct rdps_tserver *s)
{
	return container_of(s, struct verbs_server, base);
}

static void retired_reap(struct verbs_server *vs);

/* Closes the control connections that workers asked to close
 * (verbs_session_close), those of sessions still in a table and those of
 * reaped ones, and destroys the reaped sessions' queue pairs and ids. */
static void thread0_chores(struct verbs_server *vs)
{
	bool closes = __atomic_exchange_n(&vs->ctl_close_pending, 0, __ATOMIC_ACQ_REL);
	uint64_t kicks;

	if (vs->kick_fd >= 0 && read(vs->kick_fd, &kicks, sizeof(kicks)) < 0)
		(void)0; /* EAGAIN: no kick */
	for (uint32_t k = 0; k < vs->nworkers; k++) {
		struct verbs_worker *w = &vs->workers[k];
		struct verbs_session *dead;

		pthread_mutex_lock(&w->lock);
		for (uint32_t i = 0; closes && i < w->hw; i++) {
			struct verbs_session *ss = w->sessions[i];

			if (ss && ss->close_control) {
				ss->close_control = false;
				rdps_tcp_session_close(vs->tcp, ss->token);
			}
		}
		dead = w->dead;
		w->dead = NULL;
		pthread_mutex_unlock(&w->lock);
		/* Only this thread destroys ids: rdma_destroy_id waits until
		 * the listener's events of the id are acknowledged, here. */
		while (dead) {
			struct verbs_session *ss = dead;

			dead = ss->next_dead;
			if (ss->close_control)
				rdps_tcp_session_close(vs->tcp, ss->token);
			verbs_session_destroy(ss);
		}
	}
}

/* The control connection of a session closed (tcp.c's hook, thread 0). */
static void control_closed(void *ctx, uint64_t token)
{
	struct verbs_server *vs = ctx;

	for (uint32_t k = 0; k < vs->nworkers; k++) {
		struct verbs_worker *w = &vs->workers[k];
		bool found = false;

		pthread_mutex_lock(&w->lock);
		for (uint32_t i = 0; i < w->hw && !found; i++) {
			struct verbs_session *ss = w->sessions[i];

			if (ss && ss->token == token) {
				verbs_session_close(w, ss, "its control connection closed", false);
				found = true;
			}
		}
		pthread_mutex_unlock(&w->lock);
		if (found)
			return;
	}
}

/* ---------------------------------------------------------------------- */
/* Async events                                                           */

/* A queue pair's event: its session's teardown, under its worker's lock. */
static void on_qp_event(struct verbs_server *vs, const struct ibv_async_event *ev)
{
	char why[128];

	for (uint32_t k = 0; k < vs->nworkers; k++) {
		struct verbs_worker *w = &vs->workers[k];
		struct verbs_session *ss = NULL;

		pthread_mutex_lock(&w->lock);
		ss = verbs_qp_hash_get(w, ev->element.qp->qp_num);
		if (ss && (!ss->id || ss->id->qp != ev->element.qp))
			ss = NULL;
		if (ss && ev->event_type == IBV_EVENT_QP_LAST_WQE_REACHED) {
			/* Raised once the QP is in the error state, which we
			 * put it in, or a failure did. */
			verbs_session_close(w, ss, "its queue pair failed", true);
			ss->drain_ready = true;
		} else if (ss) {
			snprintf(why, sizeof(why), "queue pair error: %s",
				 ibv_event_type_str(ev->event_type));
			verbs_session_close(w, ss, why, true);
		}
		pthread_mutex_unlock(&w->lock);
		if (ss)
			return;
	}
	/* else another queue pair of this process */
}

static void on_srq_limit(struct verbs_server *vs, const struct ibv_async_event *ev)
{
	for (uint32_t k = 0; k < vs->nworkers; k++) {
		struct verbs_worker *w = &vs->workers[k];

		if (w->pool.srq != ev->element.srq)
			continue;
		pthread_mutex_lock(&w->lock);
		/* Pushes arrive faster than this thread applies them: clients
		 * wait for credits. Informative; logged at most every 10 s. */
		if (rdps_now_ns() - w->srq_low_logged_ns > 10000000000ull) {
			w->srq_low_logged_ns = rdps_now_ns();
			rdps_info("server %u: receive buffers ran low on thread %u (%u of %u posted): "
				  "pushes arrive faster than it applies them", vs->p.server_id, k,
				  w->pool.posted, w->pool.nslots);
		}
		/* Disarmed by the event: armed again once the pool recovered
		 * (verbs_srq_limit_rearm), not now, while it is low. */
		w->srq_armed = false;
		pthread_mutex_unlock(&w->lock);
		return;
	}
}

static void on_async(struct verbs_server *vs, const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_QP_LAST_WQE_REACHED:
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		on_qp_event(vs, ev);
		return;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		on_srq_limit(vs, ev);
		return;
	case IBV_EVENT_PORT_ERR:
		rdps_warn("server %u: port %d of RDMA device %s is down: clients over RDMA cannot reach "
			  "this server until it is back", vs->p.server_id, ev->element.port_num,
			  ibv_get_device_name(vs->ctx->device));
		return;
	case IBV_EVENT_PORT_ACTIVE:
		rdps_info("server %u: port %d of RDMA device %s is up", vs->p.server_id,
			  ev->element.port_num, ibv_get_device_name(vs->ctx->device));
		return;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_DEVICE_FATAL:
		rdps_err("server %u: RDMA device %s: %s; the server cannot go on", vs->p.server_id,
			 ibv_get_device_name(vs->ctx->device), ibv_event_type_str(ev->event_type));
		__atomic_store_n(&vs->fatal, -EIO, __ATOMIC_RELAXED);
		return;
	default:
		rdps_dbg("server %u: RDMA device %s: %s", vs->p.server_id,
			 ibv_get_device_name(vs->ctx->device), ibv_event_type_str(ev->event_type));
	}
}

static void handle_async(struct verbs_server *vs)
{
	struct ibv_async_event ev;

	/* The descriptor is nonblocking: this returns -1 (EAGAIN) when none. */
	while (!ibv_get_async_event(vs->ctx, &ev)) {
		on_async(vs, &ev);
		ibv_ack_async_event(&ev);
	}
}

/* ---------------------------------------------------------------------- */
/* Connection requests                                                    */

/* Constant time, as rdps_auth_equal, for the truncated MAC. */
static bool mac_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	for (int i = 0; i < VERBS_QP_MAC_LEN; i++)
		d |= a[i] ^ b[i];
	return !d;
}

/* Refuses a connection request, telling the client why. */
static void reject(struct verbs_server *vs, struct rdma_cm_id *id, const char *host, int reason,
		   const char *what)
{
	struct verbs_cm_rep rep = { VERBS_CM_MAGIC, (uint32_t)reason };

	rdps_warn("server %u: RDMA connection from %s refused: %s", vs->p.server_id, host, what);
	rdma_reject(id, &rep, sizeof(rep));
}

static int session_index(const struct verbs_worker *w)
{
	for (uint32_t i = 0; i < w->max_sessions; i++)
		if (!w->sessions[i])
			return (int)i;
	return -1;
}

/* The worker with the fewest live sessions (the first of them). */
static struct verbs_worker *least_busy(struct verbs_server *vs)
{
	struct verbs_worker *best = &vs->workers[0];
	uint32_t fewest = __atomic_load_n(&best->pub_live, __ATOMIC_RELAXED);

	for (uint32_t k = 1; k < vs->nworkers; k++) {
		uint32_t live = __atomic_load_n(&vs->workers[k].pub_live, __ATOMIC_RELAXED);

		if (live < fewest) {
			fewest = live;
			best = &vs->workers[k];
		}
	}
	return best;
}

/* Creates the session's QP on w's queues, admits it and accepts the
 * request, under w's lock. Returns true if the id was rejected. */
static bool session_admit(struct verbs_server *vs, struct verbs_worker *w,
			  struct rdma_cm_event *ev, struct verbs_session *ss, const char *host,
			  struct rdma_conn_param *cp, struct verbs_cm_rep *rep)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC, .srq = w->pool.srq, .send_cq = w->cq, .recv_cq = w->cq,
		.cap = { .max_send_wr = VERBS_SRV_SQ_DEPTH, .max_send_sge = 1 },
	};
	uint32_t sharers, want, part = verbs_srv_job_part(w, ss->num_clients);
	char why[160];
	int idx, ret;

	/* Every client of the job needs one credit at least, for good. */
	if (part > w->pool.max_slots) {
		snprintf(why, sizeof(why), "client %u: a job of %u clients needs a receive buffer "
			 "each, and the RDMA device's shared receive queues hold %u for each of "
			 "%u server threads", ss->client_id, ss->num_clients, w->pool.max_slots,
			 vs->nworkers);
		reject(vs, ev->id, host, EUSERS, why);
		return true;
	}
	idx = session_index(w);
	if (idx < 0) {
		snprintf(why, sizeof(why), "client %u: all %u RDMA sessions of server thread %u "
			 "are in use", ss->client_id, w->max_sessions, w->index);
		reject(vs, ev->id, host, EUSERS, why);
		return true;
	}
	ss->w = w;
	ss->index = (uint32_t)idx;
	ss->gen = w->gens[idx];
	if (rdma_create_qp(ev->id, vs->pd, &qa)) {
		snprintf(why, sizeof(why), "client %u: cannot create a queue pair: %s",
			 ss->client_id, strerror(errno));
		reject(vs, ev->id, host, ENOMEM, why);
		return true;
	}
	ss->id = ev->id;
	ss->qp_num = ev->id->qp->qp_num;
	ev->id->context = ss;
	/* Keep VERBS_SHARE_TARGET credits for every session this worker will
	 * serve while its pool may grow; and whatever the others hold, a new
	 * session gets its share at once: closing sessions keep theirs until
	 * each is drained (up to VERBS_DRAIN_MS where the provider never says
	 * LAST_WQE_REACHED, as rxe does not for a peer that died), and sessions
	 * idle at a barrier keep theirs, while the newcomer may have to push
	 * before it can get there. */
	sharers = verbs_srv_sharers(w);
	if (sharers < w->live + 1)
		sharers = w->live + 1;
	if (sharers < part)
		sharers = part;
	want = sharers * VERBS_SHARE_TARGET;
	for (int step = 0; step < 2; step++) {
		if (w->pool.nslots < want) {
			ret = verbs_pool_grow(&w->pool, want, why, sizeof(why));
			if (ret && !w->grow_failed_logged) {
				w->grow_failed_logged = true;
				rdps_warn("server %u: the receive pool of thread %u stays at %u buffers "
					  "for %u clients: %s", vs->p.server_id, w->index,
					  w->pool.nslots, sharers, why);
			}
		}
		/* Then one chunk more (more than any share) if the free ones
		 * fall short of the newcomer's share. */
		if (w->pool.free_credits >= verbs_pool_share(&w->pool, sharers))
			break;
		want = w->pool.nslots + 1;
	}
	/* What the fair share allows now; the rest follows as credit messages
	 * once other sessions return theirs. */
	rep->credits = verbs_srv_admit(w, ss);
	if (rdma_accept(ev->id, cp)) {
		rdps_warn("server %u: client %s: accept failed: %s", vs->p.server_id, ss->peer,
			  strerror(errno));
		/* The caller destroys the id after the ack; nothing was
		 * received on the QP. */
		rdma_destroy_qp(ev->id);
		ev->id->context = NULL;
		ss->id = NULL;
		verbs_session_reap(w, ss); /* thread 0 frees it */
		return true;
	}
	verbs_worker_publish(w);
	return false;
}

/* Returns true if the event's id was rejected and must be destroyed once
 * the event is acknowledged. */
static bool session_accept(struct verbs_server *vs, struct rdma_cm_event *ev)
{
	struct verbs_cm_req req;
	struct verbs_cm_rep rep = { VERBS_CM_MAGIC, 0 };
	/* In a connect request the remote's values arrive swapped:
	 * responder_resources here is the client's initiator depth, the number
	 * of READs it wants in flight against us. Zero would stall every READ. */
	struct rdma_conn_param cp = { .private_data = &rep, .private_data_len = sizeof(rep),
				      .responder_resources = ev->param.conn.responder_resources,
				      .retry_count = VERBS_RETRY, .rnr_retry_count = VERBS_RNR_RETRY };
	struct sockaddr *sa = rdma_get_peer_addr(ev->id);
	uint8_t mac[VERBS_QP_MAC_LEN];
	struct ibv_device_attr da;
	struct verbs_session *ss;
	struct verbs_worker *w;
	char host[64] = "?", why[160];
	uint32_t num_clients;
	bool rejected;
	int ret;

	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
	if (ev->param.conn.private_data_len < sizeof(req)) {
		reject(vs, ev->id, host, EPROTO, "no rdps connection request");
		return true;
	}
	memcpy(&req, ev->param.conn.private_data, sizeof(req));
	if (req.magic != VERBS_CM_MAGIC || req.server_id != vs->p.server_id ||
	    !req.num_clients || req.client_id >= req.num_clients) {
		reject(vs, ev->id, host, EPROTO, "malformed request (another rdps version?)");
		return true;
	}
	/* With a secret, a token seen on the wire is not enough. */
	verbs_qp_mac(vs->p.secret, req.session, mac);
	if (vs->p.secret && vs->p.secret->len && !mac_equal(mac, req.mac)) {
		if (vs->base.stats)
			RDPS_STAT_ADD(vs->base.stats->auth_failures, 1);
		snprintf(why, sizeof(why), "client %u's proof of the shared secret is wrong",
			 req.client_id);
		reject(vs, ev->id, host, EACCES, why);
		return true;
	}
	/* A queue pair belongs to a live control connection that passed the
	 * handshake (and authentication), and each connection gets one. */
	ret = rdps_tcp_session_claim(vs->tcp, req.session, req.client_id, &num_clients);
	if (ret) {
		if (vs->base.stats)
			RDPS_STAT_ADD(vs->base.stats->auth_failures, 1);
		snprintf(why, sizeof(why), "client %u: %s", req.client_id,
			 verbs_reject_reason(-ret));
		reject(vs, ev->id, host, -ret, why);
		return true;
	}
	if (!cp.responder_resources)
		cp.responder_resources = VERBS_INITIATOR_DEPTH;
	if (!ibv_query_device(ev->id->verbs, &da) && da.max_qp_rd_atom > 0 &&
	    cp.responder_resources > da.max_qp_rd_atom)
		cp.responder_resources = (uint8_t)da.max_qp_rd_atom;
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		reject(vs, ev->id, host, ENOMEM, "out of memory");
		rdps_tcp_session_close(vs->tcp, req.session);
		return true;
	}
	ss->client_id = req.client_id;
	ss->num_clients = num_clients;
	ss->token = req.session;
	ss->seq = vs->next_seq++;
	snprintf(ss->peer, sizeof(ss->peer), "%s (client %u, verbs)", host, req.client_id);
	w = least_busy(vs);
	pthread_mutex_lock(&w->lock);
	rejected = session_admit(vs, w, ev, ss, host, &cp, &rep);
	if (!rejected)
		rdps_dbg("server %u: client %s: RDMA session on thread %u, %u credits (pool %u)",
			 vs->p.server_id, ss->peer, w->index, rep.credits, w->pool.nslots);
	pthread_mutex_unlock(&w->lock);
	if (rejected) {
		rdps_tcp_session_close(vs->tcp, req.session);
		if (!ss->w)
			free(ss); /* else on the worker's dead list */
	}
	return rejected;
}

static int handle_cm(struct verbs_server *vs)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (!rdma_get_cm_event(vs->ch, &ev)) {
		struct verbs_session *ss = ev->id && ev->id != vs->listen_id ? ev->id->context : NULL;
		char why[96];

		n++;
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			struct rdma_cm_id *id = ev->id;
			bool rejected = session_accept(vs, ev);

			rdma_ack_cm_event(ev);
			if (rejected)
				rdma_destroy_id(id);
			continue;
		}
		/* ss is valid until this thread destroys it (thread0_chores),
		 * its state is its worker's: dead once reaped. */
		case RDMA_CM_EVENT_ESTABLISHED:
			if (ss) {
				pthread_mutex_lock(&ss->w->lock);
				if (ss->state == SS_CONNECTING)
					ss->state = SS_LIVE;
				pthread_mutex_unlock(&ss->w->lock);
			}
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (ss) {
				snprintf(why, sizeof(why), "rdma_cm: %s", rdma_event_str(ev->event));
				pthread_mutex_lock(&ss->w->lock);
				verbs_session_close(ss->w, ss, why, true);
				pthread_mutex_unlock(&ss->w->lock);
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			rdps_err("server %u: the RDMA device was removed", vs->p.server_id);
			__atomic_store_n(&vs->fatal, -ENODEV, __ATOMIC_RELAXED);
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
	return n;
}

/* ---------------------------------------------------------------------- */
/* Progress                                                               */

/* Thread 0: the listener, the control connections, async events, the
 * chores workers leave it, and its own worker, all in one poll. */
static int progress_thread0(struct verbs_server *vs, int timeout_ms)
{
	struct verbs_worker *w = &vs->workers[0];
	struct pollfd pfd[5] = {
		{ .fd = rdps_tcp_server_fd(vs->tcp), .events = POLLIN },
		{ .fd = vs->ch->fd, .events = POLLIN },
		{ .fd = w->cc->fd, .events = POLLIN },
		{ .fd = vs->ctx->async_fd, .events = POLLIN },
		{ .fd = vs->kick_fd, .events = POLLIN },
	};
	int n = 0, ret;

	vs->tcp->stats = vs->base.stats;
	/* Sessions waiting for their drain must not wait past the deadline. */
	for (uint32_t k = 0; k < vs->nworkers && timeout_ms > 50; k++) {
		pthread_mutex_lock(&vs->workers[k].lock);
		if (vs->workers[k].closing || vs->workers[k].dead)
			timeout_ms = 50;
		pthread_mutex_unlock(&vs->workers[k].lock);
	}
	/* Under load completions come back to back: spin a bounded time
	 * before paying a wakeup through the completion channel. */
	if (vs->busy_poll_ns && timeout_ms) {
		ret = verbs_srv_busy_poll(w, vs->busy_poll_ns);
		if (ret < 0)
			return ret;
		if (ret) {
			n += ret;
			timeout_ms = 0;
		}
	}
	/* Its CQ is armed only to sleep on it. */
	if (timeout_ms && !verbs_worker_arm(w))
		timeout_ms = 0;
	if (poll(pfd, 5, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	if (pfd[0].revents) {
		ret = vs->tcp->ops->progress(vs->tcp, 0, 0);
		if (ret < 0)
			return ret;
		n += ret;
	}
	if (pfd[1].revents)
		n += handle_cm(vs);
	if (pfd[3].revents)
		handle_async(vs);
	ret = verbs_worker_progress(w, 0, 0, false);
	if (ret < 0)
		return ret;
	n += ret;
	thread0_chores(vs);
	retired_reap(vs);
	verbs_server_stats(vs);
	return n;
}

int verbs_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms)
{
	struct verbs_server *vs = to_verbs_server(s);
	int ret;

	if (thread >= vs->nworkers)
		return -EINVAL;
	if (thread == 0) {
		ret = progress_thread0(vs, timeout_ms);
	} else {
		ret = verbs_worker_progress(&vs->workers[thread], timeout_ms, vs->busy_poll_ns,
					    true);
		verbs_server_stats(vs);
	}
	if (ret >= 0 && (ret = __atomic_load_n(&vs->fatal, __ATOMIC_RELAXED)))
		return ret;
	return ret;
}

/* A table clients made: its shard becomes readable from afar, and the
 * control server's welcomes list it. */
int verbs_add_region(struct rdps_tserver *s, struct rdps_region *r)
{
	struct verbs_server *vs = to_verbs_server(s);
	uint32_t t = r->desc.table_id;
	struct ibv_mr *mr;
	int ret;

	if (t >= RDPS_MAX_TABLES || !r->desc.dim)
		return -EINVAL;
	mr = ibv_reg_mr(vs->pd, r->base, r->len, IBV_ACCESS_REMOTE_READ);
	if (!mr) {
		ret = -errno;
		rdps_warn("server %u: registering table '%s' (%zu MiB) failed: %s%s",
			  vs->p.server_id, r->desc.name, r->len >> 20, strerror(-ret),
			  verbs_memlock_hint(-ret));
		return ret;
	}
	r->desc.remote_addr = (uintptr_t)r->base;
	r->desc.rkey = mr->rkey;
	ret = vs->tcp->ops->add_region(vs->tcp, r);
	if (ret) {
		ibv_dereg_mr(mr);
		return ret;
	}
	/* dim last: a thread checking a message reads it first */
	__atomic_store_n(&vs->regions[t].desc.dim, 0, __ATOMIC_RELEASE);
	if (vs->mrs[t])
		ibv_dereg_mr(vs->mrs[t]);
	vs->mrs[t] = mr;
	vs->regions[t].base = r->base;
	vs->regions[t].len = r->len;
	{
		struct rdps_table_desc d = r->desc;

		d.dim = 0;
		vs->regions[t].desc = d;
	}
	__atomic_store_n(&vs->regions[t].desc.dim, r->desc.dim, __ATOMIC_RELEASE);
	if (t >= __atomic_load_n(&vs->p.num_regions, __ATOMIC_ACQUIRE))
		__atomic_store_n(&vs->p.num_regions, t + 1, __ATOMIC_RELEASE);
	return 0;
}

static void dereg_mr(void *mr)
{
	ibv_dereg_mr(mr);
}

/* The table leaves (thread 0, in a request's handling): its rows say so
 * and its region stays registered until the sessions that may know its key
 * are gone (retire.h), so a late READ fails that pull, not the client's
 * connection. */
void verbs_remove_region(struct rdps_tserver *s, uint32_t table_id)
{
	struct verbs_server *vs = to_verbs_server(s);

	if (table_id >= RDPS_MAX_TABLES)
		return;
	__atomic_store_n(&vs->regions[table_id].desc.dim, 0, __ATOMIC_RELEASE);
	vs->tcp->ops->remove_region(vs->tcp, table_id);
	if (!vs->mrs[table_id])
		return;
	/* Pushes are applied under their worker's lock: with every lock held
	 * none is half applied, and later ones find the shard gone. */
	for (uint32_t k = 0; k < vs->nworkers; k++)
		pthread_mutex_lock(&vs->workers[k].lock);
	rdps_region_retire_rows(&vs->regions[table_id]);
	for (uint32_t k = vs->nworkers; k-- > 0;)
		pthread_mutex_unlock(&vs->workers[k].lock);
	if (rdps_retire_add(&vs->retired, vs->mrs[table_id], vs->next_seq))
		ibv_dereg_mr(vs->mrs[table_id]); /* no memory: as before, reads fail */
	vs->mrs[table_id] = NULL;
}

/* Deregisters the retired regions no session that began before their drop
 * can read any more (thread 0). */
static void retired_reap(struct verbs_server *vs)
{
	uint64_t min = UINT64_MAX;
	uint32_t n;

	if (!vs->retired.n)
		return;
	for (uint32_t k = 0; k < vs->nworkers; k++) {
		struct verbs_worker *w = &vs->workers[k];

		pthread_mutex_lock(&w->lock);
		for (uint32_t i = 0; i < w->hw; i++)
			if (w->sessions[i] && w->sessions[i]->seq < min)
				min = w->sessions[i]->seq;
		pthread_mutex_unlock(&w->lock);
	}
	n = rdps_retire_reap(&vs->retired, min, dereg_mr);
	if (n)
		rdps_dbg("server %u: %u retired table region(s) deregistered", vs->p.server_id, n);
}

int verbs_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
		const void *payload, size_t len)
{
	struct verbs_server *vs = to_verbs_server(s);

	return vs->tcp->ops->reply(vs->tcp, token, type, status, payload, len);
}

void verbs_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct verbs_server *vs;

	if (!s)
		return;
	vs = to_verbs_server(s);
	if (vs->tcp) {
		rdps_tcp_set_session_hook(vs->tcp, NULL, NULL);
		vs->tcp->ops->destroy(vs->tcp, timeout_ms);
	}
	/* No progress thread runs any more. */
	for (uint32_t k = 0; vs->workers && k < vs->nworkers; k++)
		verbs_worker_fini(&vs->workers[k]);
	free(vs->workers);
	for (uint32_t t = 0; t < RDPS_MAX_TABLES; t++)
		if (vs->mrs[t])
			ibv_dereg_mr(vs->mrs[t]);
	rdps_retire_free(&vs->retired, dereg_mr);
	if (vs->kick_fd >= 0)
		close(vs->kick_fd);
	if (vs->pd)
		ibv_dealloc_pd(vs->pd);
	if (vs->listen_id)
		rdma_destroy_id(vs->listen_id);
	if (vs->ch)
		rdma_destroy_event_channel(vs->ch);
	free(vs);
}

/* One worker per progress thread, each with its own queues. */
static int create_workers(struct verbs_server *vs, uint32_t n, char *err, size_t errlen)
{
	vs->workers = calloc(n, sizeof(*vs->workers));
	if (!vs->workers)
		return -ENOMEM;
	vs->nworkers = n;
	for (uint32_t k = 0; k < n; k++) {
		int ret = verbs_worker_init(vs, &vs->workers[k], k, err, errlen);

		if (ret)
			return ret;
	}
	return 0;
}

int verbs_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
		 size_t errlen)
{
	struct rdps_listen_params lp = *p;
	struct verbs_server *vs;
	uint32_t nthreads;
	int ret;

	*out = NULL;
	err[0] = '\0';
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle)
		return -EINVAL;
	verbs_fork_init();
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return -ENOMEM;
	vs->base.ops = rdps_transport_verbs();
	vs->kick_fd = -1;
	/* Each thread polls its own completion queue; thread 0 also the
	 * listener and the control connections. */
	nthreads = p->num_threads ? p->num_threads : 1;
	if (nthreads > VERBS_MAX_THREADS)
		nthreads = VERBS_MAX_THREADS;
	vs->base.num_threads = vs->base.progress_threads = nthreads;
	vs->p = *p;
	vs->busy_poll_ns = verbs_srv_busy_poll_ns();
	memcpy(vs->regions, p->regions, p->num_regions * sizeof(*p->regions));
	vs->p.regions = vs->regions;
	ret = verbs_cm_bind(p->host, p->port, &vs->ch, &vs->listen_id, vs, err, errlen);
	if (ret)
		goto err_destroy;
	vs->ctx = vs->listen_id->verbs;
	if ((ret = verbs_set_nonblock(vs->ctx->async_fd)))
		goto err_destroy;
	vs->pd = ibv_alloc_pd(vs->ctx);
	if (!vs->pd) {
		ret = -errno;
		goto err_destroy;
	}
	/* Shards are readable from afar, never writable. */
	for (uint32_t t = 0; t < p->num_regions; t++) {
		vs->mrs[t] = ibv_reg_mr(vs->pd, vs->regions[t].base, vs->regions[t].len,
					IBV_ACCESS_REMOTE_READ);
		if (!vs->mrs[t]) {
			ret = -errno;
			snprintf(err, errlen, "registering table '%s' (%zu MiB) failed: %s%s",
				 vs->regions[t].desc.name, vs->regions[t].len >> 20,
				 strerror(-ret), verbs_memlock_hint(-ret));
			goto err_destroy;
		}
		vs->regions[t].desc.remote_addr = (uintptr_t)vs->regions[t].base;
		vs->regions[t].desc.rkey = vs->mrs[t]->rkey;
	}
	vs->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vs->kick_fd < 0) {
		ret = -errno;
		goto err_destroy;
	}
	ret = create_workers(vs, nthreads, err, errlen);
	if (ret)
		goto err_destroy;
	if (rdma_listen(vs->listen_id, verbs_listen_backlog())) {
		ret = -errno;
		goto err_destroy;
	}
	rdps_dbg("server %u: RDMA listener backlog %d, type of service %d", p->server_id,
		 verbs_listen_backlog(), verbs_tos());
	/* The handshake hands out the regions' addresses and rkeys. */
	lp.regions = vs->regions;
	lp.num_threads = 1; /* served from verbs_progress() */
	ret = rdps_tcp_listen_exposed(&lp, &vs->tcp, err, errlen);
	if (ret)
		goto err_destroy;
	rdps_tcp_set_session_hook(vs->tcp, control_closed, vs);
	verbs_server_stats(vs);
	*out = &vs->base;
	return 0;

err_destroy:
	if (!err[0])
		snprintf(err, errlen, "verbs set-up on %s:%u failed: %s", p->host, p->port,
			 rdps_strerror(ret));
	verbs_destroy(&vs->base, 0);
	return ret;
}
