// SPDX-License-Identifier: MIT
/*
 * verbs backend, server side: the listener, one session (RC queue pair) per
 * client connection, the completion queue they share, async events, and the
 * teardown that gives every receive slot back.
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
 * when it closes; when the queue pair fails first, the control connection is
 * closed. Teardown moves the QP to the error state, waits for
 * IBV_EVENT_QP_LAST_WQE_REACHED (after it the QP consumes no more slots of
 * the shared queue and all its completions are in the CQ; providers that
 * never raise it get VERBS_DRAIN_MS), drains the CQ, and only then destroys
 * the QP: mlx5 removes a destroyed QP's completions from the CQ, and slots
 * whose completions vanish would be lost to the pool for good.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "tcp.h"
#include "verbs.h"
#include "wire.h"

static inline struct verbs_server *to_verbs_server(struct rdps_tserver *s)
{
	return container_of(s, struct verbs_server, base);
}

static struct verbs_session *session_by_token(struct verbs_server *vs, uint64_t token)
{
	for (uint32_t i = 0; i < vs->hw; i++)
		if (vs->sessions[i] && vs->sessions[i]->token == token)
			return vs->sessions[i];
	return NULL;
}

static void update_stats(struct verbs_server *vs)
{
	struct rdps_server_stats *st = vs->base.stats;

	if (!st)
		return;
	st->recv_slots = vs->pool.nslots;
	st->recv_posted = vs->pool.posted;
	st->rdma_sessions = vs->live;
}

/* ---------------------------------------------------------------------- */
/* Teardown                                                               */

/* Starts the teardown of a session; its control connection is closed too
 * unless it is the reason. Safe to call more than once. */
void verbs_session_close(struct verbs_server *vs, struct verbs_session *ss, const char *why,
			 bool close_control)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

	if (ss->state == SS_CLOSING)
		return;
	vs->live--;
	vs->closing++;
	ss->state = SS_CLOSING;
	rdps_info("server %u: client %s: RDMA session closes: %s", vs->p.server_id, ss->peer, why);
	/* In the error state the QP takes no more slots and flushes what it
	 * holds; rdma_disconnect also tells a live peer. */
	if (ss->id->qp)
		ibv_modify_qp(ss->id->qp, &qa, IBV_QP_STATE);
	rdma_disconnect(ss->id);
	ss->drain_deadline = rdps_now_ns() + VERBS_DRAIN_MS * 1000000ull;
	if (close_control)
		rdps_tcp_session_close(vs->tcp, ss->token);
}

/* The last step: every completion of the QP has been handled. */
static void session_free(struct verbs_server *vs, struct verbs_session *ss)
{
	if (ss->state == SS_CLOSING)
		vs->closing--;
	else
		vs->live--;
	if (ss->id) {
		if (ss->id->qp)
			rdma_destroy_qp(ss->id);
		rdma_destroy_id(ss->id);
	}
	verbs_pool_release(&vs->pool, &ss->cr);
	vs->sessions[ss->index] = NULL;
	vs->gens[ss->index]++;
	while (vs->hw && !vs->sessions[vs->hw - 1])
		vs->hw--;
	free(ss);
}

/* The control connection of a session closed (tcp.c's hook). */
static void control_closed(void *ctx, uint64_t token)
{
	struct verbs_server *vs = ctx;
	struct verbs_session *ss = session_by_token(vs, token);

	if (ss)
		verbs_session_close(vs, ss, "its control connection closed", false);
}

/* Frees the sessions whose completions are all handled. Call right after a
 * verbs_srv_drain_cq() that started after their drain_ready was set. */
static void reap(struct verbs_server *vs, bool *ready)
{
	for (uint32_t i = 0; i < vs->hw; i++) {
		struct verbs_session *ss = vs->sessions[i];

		if (ss && ss->state == SS_CLOSING && ready[i])
			session_free(vs, ss);
	}
}

/* ---------------------------------------------------------------------- */
/* Async events                                                           */

static void on_async(struct verbs_server *vs, const struct ibv_async_event *ev)
{
	struct verbs_session *ss = NULL;
	char why[128];

	switch (ev->event_type) {
	case IBV_EVENT_QP_LAST_WQE_REACHED:
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		for (uint32_t i = 0; i < vs->hw && !ss; i++)
			if (vs->sessions[i] && vs->sessions[i]->id->qp == ev->element.qp)
				ss = vs->sessions[i];
		if (!ss)
			return; /* another queue pair of this process */
		if (ev->event_type == IBV_EVENT_QP_LAST_WQE_REACHED) {
			/* Raised once the QP is in the error state, which we
			 * put it in, or a failure did. */
			verbs_session_close(vs, ss, "its queue pair failed", true);
			ss->drain_ready = true;
			return;
		}
		snprintf(why, sizeof(why), "queue pair error: %s", ibv_event_type_str(ev->event_type));
		verbs_session_close(vs, ss, why, true);
		return;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		/* Pushes arrive faster than this server applies them: clients
		 * wait for credits. Informative; logged at most every 10 s. */
		if (rdps_now_ns() - vs->srq_low_logged_ns > 10000000000ull) {
			vs->srq_low_logged_ns = rdps_now_ns();
			rdps_info("server %u: receive buffers ran low (%u of %u posted): pushes arrive "
				  "faster than this server applies them", vs->p.server_id,
				  vs->pool.posted, vs->pool.nslots);
		}
		{
			struct ibv_srq_attr a = { .srq_limit = vs->pool.nslots / 8 };

			ibv_modify_srq(vs->pool.srq, &a, IBV_SRQ_LIMIT);
		}
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
		vs->fatal = -EIO;
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

static int session_index(struct verbs_server *vs)
{
	for (uint32_t i = 0; i < vs->max_sessions; i++)
		if (!vs->sessions[i])
			return (int)i;
	return -1;
}

/* Returns true if the event's id was rejected and must be destroyed once
 * the event is acknowledged. */
static bool session_accept(struct verbs_server *vs, struct rdma_cm_event *ev)
{
	struct verbs_cm_req req;
	struct verbs_cm_rep rep = { VERBS_CM_MAGIC, 0 };
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC, .srq = vs->pool.srq, .send_cq = vs->cq, .recv_cq = vs->cq,
		.cap = { .max_send_wr = VERBS_SRV_SQ_DEPTH, .max_send_sge = 1 },
	};
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
	char host[64] = "?", why[160];
	uint32_t num_clients, sharers;
	int idx, ret;

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
	/* Every client of the job needs one credit at least, for good. */
	if (num_clients > vs->pool.max_slots) {
		snprintf(why, sizeof(why), "client %u: a job of %u clients needs a receive buffer "
			 "each, and the RDMA device's shared receive queue holds %u", req.client_id,
			 num_clients, vs->pool.max_slots);
		reject(vs, ev->id, host, EUSERS, why);
		rdps_tcp_session_close(vs->tcp, req.session);
		return true;
	}
	idx = session_index(vs);
	if (idx < 0) {
		snprintf(why, sizeof(why), "client %u: all %u RDMA sessions are in use",
			 req.client_id, vs->max_sessions);
		reject(vs, ev->id, host, EUSERS, why);
		rdps_tcp_session_close(vs->tcp, req.session);
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
	ss->index = (uint32_t)idx;
	ss->gen = vs->gens[idx];
	snprintf(ss->peer, sizeof(ss->peer), "%s (client %u, verbs)", host, req.client_id);
	if (rdma_create_qp(ev->id, vs->pd, &qa)) {
		snprintf(why, sizeof(why), "client %u: cannot create a queue pair: %s",
			 req.client_id, strerror(errno));
		reject(vs, ev->id, host, ENOMEM, why);
		rdps_tcp_session_close(vs->tcp, req.session);
		free(ss);
		return true;
	}
	ss->id = ev->id;
	ss->qp_num = ev->id->qp->qp_num;
	ev->id->context = ss;
	/* Keep VERBS_SHARE_TARGET credits for every client of the job (and
	 * every session, if more) while the pool may grow. */
	sharers = verbs_srv_sharers(vs);
	if (sharers < vs->live + 1)
		sharers = vs->live + 1;
	if (sharers < num_clients)
		sharers = num_clients;
	if (vs->pool.nslots < sharers * VERBS_SHARE_TARGET) {
		ret = verbs_pool_grow(&vs->pool, sharers * VERBS_SHARE_TARGET, why, sizeof(why));
		if (ret && !vs->grow_failed_logged) {
			vs->grow_failed_logged = true;
			rdps_warn("server %u: the receive pool stays at %u buffers for %u clients: %s",
				  vs->p.server_id, vs->pool.nslots, sharers, why);
		}
	}
	/* What the fair share allows now; the rest follows as credit messages
	 * once other sessions return theirs. */
	rep.credits = verbs_srv_admit(vs, ss);
	if (rdma_accept(ev->id, &cp)) {
		rdps_warn("server %u: client %s: accept failed: %s", vs->p.server_id, ss->peer,
			  strerror(errno));
		/* The caller destroys the id after the ack; nothing was
		 * received on the QP. */
		rdma_destroy_qp(ev->id);
		ev->id->context = NULL;
		ss->id = NULL;
		session_free(vs, ss);
		rdps_tcp_session_close(vs->tcp, req.session);
		return true;
	}
	return false;
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
		case RDMA_CM_EVENT_ESTABLISHED:
			if (ss && ss->state == SS_CONNECTING)
				ss->state = SS_LIVE;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (ss) {
				snprintf(why, sizeof(why), "rdma_cm: %s", rdma_event_str(ev->event));
				verbs_session_close(vs, ss, why, true);
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			rdps_err("server %u: the RDMA device was removed", vs->p.server_id);
			vs->fatal = -ENODEV;
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

int verbs_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms)
{
	struct verbs_server *vs = to_verbs_server(s);
	struct pollfd pfd[4] = {
		{ .fd = rdps_tcp_server_fd(vs->tcp), .events = POLLIN },
		{ .fd = vs->ch->fd, .events = POLLIN },
		{ .fd = vs->cc->fd, .events = POLLIN },
		{ .fd = vs->ctx->async_fd, .events = POLLIN },
	};
	bool ready[VERBS_MAX_SESSIONS];
	uint64_t now;
	int n = 0, ret;

	vs->tcp->stats = s->stats;
	/* A session waiting for its drain must not sleep past its deadline. */
	if (vs->closing && timeout_ms > 50)
		timeout_ms = 50;
	/* Under load completions come back to back: spin a bounded time
	 * before paying a wakeup through the completion channel. */
	if (vs->busy_poll_ns && timeout_ms) {
		ret = verbs_srv_busy_poll(vs, vs->busy_poll_ns);
		if (ret < 0)
			return ret;
		if (ret) {
			n += ret;
			timeout_ms = 0;
		}
	}
	if (poll(pfd, 4, timeout_ms) < 0 && errno != EINTR)
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
	if (pfd[2].revents) {
		struct ibv_cq *cq;
		void *ctx;

		if (!ibv_get_cq_event(vs->cc, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
		/* Re-arm before draining so no completion goes unnoticed. */
		ibv_req_notify_cq(vs->cq, 0);
	}
	/* Which closing sessions may go: decided before the drain, so every
	 * completion they had is handled by it. */
	now = rdps_now_ns();
	for (uint32_t i = 0; i < vs->hw; i++) {
		struct verbs_session *ss = vs->sessions[i];

		ready[i] = ss && ss->state == SS_CLOSING &&
			   (ss->drain_ready || now >= ss->drain_deadline);
	}
	ret = verbs_srv_drain_cq(vs);
	if (ret < 0)
		return ret;
	n += ret;
	reap(vs, ready);
	verbs_srv_regrant(vs);
	update_stats(vs);
	return vs->fatal ? vs->fatal : n;
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
	/* Everything goes: no slot needs to survive, no drain is needed. */
	for (uint32_t i = 0; vs->sessions && i < vs->hw; i++)
		if (vs->sessions[i]) {
			rdma_disconnect(vs->sessions[i]->id);
			session_free(vs, vs->sessions[i]);
		}
	verbs_pool_destroy(&vs->pool);
	for (uint32_t t = 0; t < RDPS_MAX_TABLES; t++)
		if (vs->mrs[t])
			ibv_dereg_mr(vs->mrs[t]);
	if (vs->cq)
		ibv_destroy_cq(vs->cq);
	if (vs->cc)
		ibv_destroy_comp_channel(vs->cc);
	if (vs->pd)
		ibv_dealloc_pd(vs->pd);
	if (vs->listen_id)
		rdma_destroy_id(vs->listen_id);
	if (vs->ch)
		rdma_destroy_event_channel(vs->ch);
	free(vs->sessions);
	free(vs->gens);
	free(vs);
}

/* Sizes the queues from what the device allows. */
static int create_queues(struct verbs_server *vs, char *err, size_t errlen)
{
	struct ibv_device_attr da;
	uint32_t max_slots = VERBS_POOL_MAX_SLOTS, cqe;
	int ret;

	if (ibv_query_device(vs->ctx, &da)) {
		ret = -errno;
		snprintf(err, errlen, "querying the RDMA device failed: %s", strerror(-ret));
		return ret;
	}
	if (da.max_srq_wr > 0 && (uint32_t)da.max_srq_wr - 1 < max_slots)
		max_slots = (uint32_t)da.max_srq_wr - 1;
	if (max_slots < VERBS_POOL_MIN_SLOTS) {
		snprintf(err, errlen, "the RDMA device's shared receive queues hold %d buffers, "
			 "rdps needs %d", da.max_srq_wr, VERBS_POOL_MIN_SLOTS);
		return -ENOTSUP;
	}
	/* Room for every receive slot and every session's send queue: the
	 * CQ can never overrun, even when all of them flush at once. */
	vs->max_sessions = VERBS_MAX_SESSIONS;
	cqe = max_slots + vs->max_sessions * VERBS_SRV_SQ_DEPTH;
	if (da.max_cqe > 0 && cqe > (uint32_t)da.max_cqe) {
		cqe = (uint32_t)da.max_cqe;
		vs->max_sessions = (cqe - max_slots) / VERBS_SRV_SQ_DEPTH;
	}
	vs->sessions = calloc(vs->max_sessions, sizeof(*vs->sessions));
	vs->gens = calloc(vs->max_sessions, sizeof(*vs->gens));
	if (!vs->sessions || !vs->gens)
		return -ENOMEM;
	vs->cc = ibv_create_comp_channel(vs->ctx);
	if (!vs->cc || verbs_set_nonblock(vs->cc->fd))
		return -errno;
	vs->cq = ibv_create_cq(vs->ctx, (int)cqe, NULL, vs->cc, 0);
	if (!vs->cq || ibv_req_notify_cq(vs->cq, 0)) {
		ret = -errno;
		snprintf(err, errlen, "creating the completion queue (%u entries) failed: %s", cqe,
			 strerror(-ret));
		return ret;
	}
	ret = verbs_pool_create(&vs->pool, vs->pd, max_slots, err, errlen);
	if (!ret)
		ret = verbs_pool_grow(&vs->pool, VERBS_POOL_MIN_SLOTS, err, errlen);
	if (!ret) {
		struct ibv_srq_attr a = { .srq_limit = vs->pool.nslots / 8 };

		/* Armed once; SRQ_LIMIT_REACHED says the server is behind. */
		ibv_modify_srq(vs->pool.srq, &a, IBV_SRQ_LIMIT);
	}
	return ret;
}

int verbs_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
		 size_t errlen)
{
	struct rdps_listen_params lp = *p;
	struct verbs_server *vs;
	int ret;

	*out = NULL;
	err[0] = '\0';
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle)
		return -EINVAL;
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return -ENOMEM;
	vs->base.ops = rdps_transport_verbs();
	/* One thread polls the completion queue and the control connections. */
	vs->base.num_threads = vs->base.progress_threads = 1;
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
	ret = create_queues(vs, err, errlen);
	if (ret)
		goto err_destroy;
	if (rdma_listen(vs->listen_id, 128)) {
		ret = -errno;
		goto err_destroy;
	}
	/* The handshake hands out the regions' addresses and rkeys. */
	lp.regions = vs->regions;
	lp.num_threads = 1; /* served from verbs_progress() */
	ret = rdps_tcp_listen_exposed(&lp, &vs->tcp, err, errlen);
	if (ret)
		goto err_destroy;
	rdps_tcp_set_session_hook(vs->tcp, control_closed, vs);
	update_stats(vs);
	*out = &vs->base;
	return 0;

err_destroy:
	if (!err[0])
		snprintf(err, errlen, "verbs set-up on %s:%u failed: %s", p->host, p->port,
			 rdps_strerror(ret));
	verbs_destroy(&vs->base, 0);
	return ret;
}
