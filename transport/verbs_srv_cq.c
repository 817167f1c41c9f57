// SPDX-License-Identifier: MIT
/*
 * verbs backend, server side: completions and what they make the server
 * send. Every completion is classified by its wr_id alone (a receive slot,
 * or a session's send), never by opcode: on a failed completion only
 * wr_id, status, qp_num and vendor_err are defined (ibv_poll_cq(3)), and
 * mlx5 leaves the opcode as it was. A receive slot goes back to the shared
 * queue exactly once per completion; a session's credit comes back with it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "verbs.h"
#include "wire.h"

/* ---------------------------------------------------------------------- */
/* Sessions by QP number                                                  */

static inline uint32_t qp_slot(const struct verbs_worker *w, uint32_t qp_num)
{
	/* QP numbers of one device are often consecutive: a multiplicative
	 * hash spreads them. */
	return (qp_num * 2654435761u) & w->qp_hash_mask;
}

int verbs_qp_hash_init(struct verbs_worker *w, uint32_t max_sessions)
{
	uint32_t cap = 16;

	/* At most half full: a lookup probes ~1.5 slots. */
	while (cap < 2 * max_sessions)
		cap <<= 1;
	w->qp_hash = calloc(cap, sizeof(*w->qp_hash));
	if (!w->qp_hash)
		return -ENOMEM;
	w->qp_hash_mask = cap - 1;
	return 0;
}

void verbs_qp_hash_put(struct verbs_worker *w, struct verbs_session *ss)
{
	uint32_t i = qp_slot(w, ss->qp_num);

	while (w->qp_hash[i])
		i = (i + 1) & w->qp_hash_mask;
	w->qp_hash[i] = ss;
}

struct verbs_session *verbs_qp_hash_get(struct verbs_worker *w, uint32_t qp_num)
{
	uint32_t i = qp_slot(w, qp_num);

	w->qp_lookups++;
	for (struct verbs_session *ss; (ss = w->qp_hash[i]); i = (i + 1) & w->qp_hash_mask) {
		w->qp_probes++;
		if (ss->qp_num == qp_num)
			return ss;
	}
	return NULL;
}

void verbs_qp_hash_del(struct verbs_worker *w, struct verbs_session *ss)
{
	uint32_t i = qp_slot(w, ss->qp_num), j;

	while (w->qp_hash[i] && w->qp_hash[i] != ss)
		i = (i + 1) & w->qp_hash_mask;
	if (!w->qp_hash[i])
		return;
	/* Backward shift: the entries after it move up where their probe
	 * may start, so no lookup stops at the hole. */
	w->qp_hash[i] = NULL;
	for (j = (i + 1) & w->qp_hash_mask; w->qp_hash[j]; j = (j + 1) & w->qp_hash_mask) {
		uint32_t home = qp_slot(w, w->qp_hash[j]->qp_num);

		/* Move j's entry to the hole at i if its home is not in
		 * (i, j] (cyclically). */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			w->qp_hash[i] = w->qp_hash[j];
			w->qp_hash[j] = NULL;
			i = j;
		}
	}
}

/* ---------------------------------------------------------------------- */
/* The regrant's queues                                                   */

static void q_push(struct verbs_worker *w, int k, struct verbs_session *ss)
{
	struct verbs_squeue *q = &w->q[k];

	if (ss->queued[k])
		return;
	ss->queued[k] = true;
	ss->q_next[k] = NULL;
	ss->q_prev[k] = q->tail;
	if (q->tail)
		q->tail->q_next[k] = ss;
	else
		q->head = ss;
	q->tail = ss;
	q->len++;
}

static void q_push_front(struct verbs_worker *w, int k, struct verbs_session *ss)
{
	struct verbs_squeue *q = &w->q[k];

	if (ss->queued[k])
		return;
	ss->queued[k] = true;
	ss->q_prev[k] = NULL;
	ss->q_next[k] = q->head;
	if (q->head)
		q->head->q_prev[k] = ss;
	else
		q->tail = ss;
	q->head = ss;
	q->len++;
}

static void q_del(struct verbs_worker *w, int k, struct verbs_session *ss)
{
	struct verbs_squeue *q = &w->q[k];

	if (!ss->queued[k])
		return;
	if (ss->q_prev[k])
		ss->q_prev[k]->q_next[k] = ss->q_next[k];
	else
		q->head = ss->q_next[k];
	if (ss->q_next[k])
		ss->q_next[k]->q_prev[k] = ss->q_prev[k];
	else
		q->tail = ss->q_prev[k];
	ss->queued[k] = false;
	q->len--;
}

void verbs_srv_unqueue(struct verbs_worker *w, struct verbs_session *ss)
{
	q_del(w, VERBS_Q_GRANT, ss);
	q_del(w, VERBS_Q_SEND, ss);
}

static uint32_t share_now(const struct verbs_worker *w)
{
	return verbs_pool_share(&w->pool, w->sharers);
}

/* The session a send completion belongs to, if it still exists. */
static struct verbs_session *session_by_send(struct verbs_worker *w, uint64_t wr_id,
					     uint64_t *seq)
{
	uint64_t v = WR_SEQ(wr_id);
	uint32_t idx = (uint32_t)(v >> 24) & 0xffffu;
	uint16_t gen = (uint16_t)(v >> 40);
	struct verbs_session *ss = idx < w->hw ? w->sessions[idx] : NULL;

	if (!ss || ss->gen != gen)
		return NULL;
	/* 24 bits of sequence: the send queue is far shorter. */
	*seq = ss->sq_posted - ((ss->sq_posted - (v & 0xffffffu)) & 0xffffffu);
	return ss;
}

uint32_t verbs_srv_job_part(const struct verbs_worker *w, uint32_t num_clients)
{
	uint32_t nw = w->vs && w->vs->nworkers ? w->vs->nworkers : 1;

	/* The listener gives each new session to the worker with the fewest:
	 * while the job's sessions are all live, none has more than this. */
	return (num_clients + nw - 1) / nw;
}

uint32_t verbs_srv_sharers(const struct verbs_worker *w)
{
	return w->sharers > w->live ? w->sharers : w->live;
}

void verbs_srv_sharers_update(struct verbs_worker *w)
{
	uint32_t old = w->sharers, n = w->live;

	for (uint32_t i = 0; i < w->hw; i++) {
		const struct verbs_session *ss = w->sessions[i];
		uint32_t part;

		if (!ss || ss->state >= SS_CLOSING)
			continue;
		part = verbs_srv_job_part(w, ss->num_clients);
		if (part > n)
			n = part;
	}
	w->sharers = n;
	/* Fewer sharers, a larger share: every live session may take more. */
	if (n < old)
		for (uint32_t i = 0; i < w->hw; i++) {
			struct verbs_session *ss = w->sessions[i];

			if (ss && ss->state < SS_CLOSING && ss->cr.promised < share_now(w))
				q_push(w, VERBS_Q_GRANT, ss);
		}
}

uint32_t verbs_srv_admit(struct verbs_worker *w, struct verbs_session *ss)
{
	uint32_t credits;

	w->sessions[ss->index] = ss;
	if (ss->index >= w->hw)
		w->hw = ss->index + 1;
	w->live++;
	if (w->qp_hash)
		verbs_qp_hash_put(w, ss);
	verbs_srv_sharers_update(w);
	credits = verbs_pool_grant(&w->pool, &ss->cr, share_now(w));
	ss->cr.owed = 0; /* they travel in the connection reply */
	if (ss->cr.promised < share_now(w))
		q_push(w, VERBS_Q_GRANT, ss);
	return credits;
}

/* ---------------------------------------------------------------------- */
/* Sends to a client: credits and flush acknowledgements                  */

static int post_imm(struct verbs_session *ss, uint32_t imm)
{
	uint64_t seq = ss->sq_posted + 1;
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(WR_SRV_SEND, ((uint64_t)ss->gen << 40) |
						    ((uint64_t)ss->index << 24) | (seq & 0xffffffu)),
		.opcode = IBV_WR_SEND_WITH_IMM, .imm_data = htonl(imm),
	}, *bad;
	int ret;

	/* Signal every few so the send queue's slots come back. */
	if (seq % VERBS_SRV_SIGNAL_EVERY == 0)
		wr.send_flags = IBV_SEND_SIGNALED;
	ret = ibv_post_send(ss->id->qp, &wr, &bad);
	if (ret)
		return -ret;
	ss->sq_posted = seq;
	return 0;
}

/* Sends what the session is owed: flush acknowledgements at once, credits
 * once they are worth a message or the client has none left. */
static void session_send(struct verbs_worker *w, struct verbs_session *ss, uint32_t share)
{
	uint32_t batch = share / 2 ? share / 2 : 1;

	while (ss->state < SS_CLOSING) {
		/* The client holds no credit and has no message on the way
		 * exactly when all it was promised is still owed. */
		bool starving = ss->cr.owed && ss->cr.owed == ss->cr.promised;
		uint32_t credits = ss->cr.owed > 0x3fff ? 0x3fff : ss->cr.owed;
		uint32_t imm;
		int ret;

		if (!ss->acks_owed && ss->cr.owed < batch && !starving)
			return;
		if (ss->sq_posted - ss->sq_done >= VERBS_SRV_SQ_DEPTH - 1)
			return; /* sent when send completions free room */
		imm = ss->acks_owed ? IMM_MAKE(IMM_FLUSH_ACK, credits, ss->failed)
				    : IMM_MAKE(IMM_CREDIT, credits, 0);
		ret = post_imm(ss, imm);
		if (ret) {
			char why[128];

			snprintf(why, sizeof(why), "cannot send to it: %s", strerror(-ret));
			verbs_session_close(w, ss, why, true);
			return;
		}
		ss->cr.owed -= credits;
		if (ss->acks_owed) {
			ss->acks_owed--;
			ss->failed = 0;
		}
	}
}

/* Whether session_send has something to send now: acknowledgements, or
 * credits worth a message (or all the client has). */
static bool has_sends(const struct verbs_session *ss, uint32_t share)
{
	uint32_t batch = share / 2 ? share / 2 : 1;

	return ss->acks_owed || ss->cr.owed >= batch ||
	       (ss->cr.owed && ss->cr.owed == ss->cr.promised);
}

/*
 * Gives free credits to sessions below their share, in the order their
 * credits came back (round robin), and sends what each is owed. Only the
 * sessions queued for it are visited, not every session per batch.
 */
void verbs_srv_regrant(struct verbs_worker *w)
{
	uint32_t share = share_now(w), n;
	struct verbs_session *ss;

	while (w->pool.free_credits && (ss = w->q[VERBS_Q_GRANT].head)) {
		w->regrant_visits++;
		q_del(w, VERBS_Q_GRANT, ss);
		if (ss->state >= SS_CLOSING)
			continue;
		verbs_pool_grant(&w->pool, &ss->cr, share);
		if (ss->cr.owed)
			q_push(w, VERBS_Q_SEND, ss);
		if (ss->cr.promised < share) {
			q_push_front(w, VERBS_Q_GRANT, ss); /* the free ones ran out: first next time */
			break;
		}
	}
	/* Acknowledgements go out even when no credit is left. */
	for (n = w->q[VERBS_Q_SEND].len; n && (ss = w->q[VERBS_Q_SEND].head); n--) {
		w->regrant_visits++;
		q_del(w, VERBS_Q_SEND, ss);
		if (ss->state >= SS_CLOSING)
			continue;
		session_send(w, ss, share);
		/* Left over only when its send queue is full: back when a send
		 * completion frees room (on_send). */
	}
}

/* ---------------------------------------------------------------------- */
/* Completions                                                            */

/* One received message: apply it through the core's handler. */
static void handle_msg(struct verbs_worker *w, struct verbs_session *ss, const char *buf,
		       uint32_t len)
{
	struct verbs_server *vs = w->vs;
	struct verbs_msg_hdr h;
	char why[256] = "";
	struct rdps_request req = { .client_id = ss->client_id, .num_clients = ss->num_clients,
				    .peer = ss->peer, .errmsg = why, .errlen = sizeof(why) };
	int ret;

	if (len < sizeof(h)) {
		snprintf(why, sizeof(why), "message of %u bytes", len);
		ret = -EPROTO;
		goto refused;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.len != len - sizeof(h)) {
		snprintf(why, sizeof(why), "message says %u bytes, carries %zu", h.len,
			 len - sizeof(h));
		ret = -EPROTO;
		goto refused;
	}
	if (h.type == RDPS_REQ_FLUSH) {
		/* The QP delivers in order and its receive completions come in
		 * order: every earlier message of it was handled already. */
		req.type = RDPS_REQ_FLUSH;
		vs->p.handle(vs->p.ctx, &req);
		ss->acks_owed++;
		q_push(w, VERBS_Q_SEND, ss);
		return;
	}
	if (h.type != RDPS_REQ_PUSH) {
		snprintf(why, sizeof(why), "unknown message type %u", h.type);
		ret = -EOPNOTSUPP;
		goto refused;
	}
	ret = rdps_wire_check_rows(RDPS_REQ_PUSH, buf + sizeof(h), h.len, vs->regions,
				   __atomic_load_n(&vs->p.num_regions, __ATOMIC_ACQUIRE), why,
				   sizeof(why));
	if (!ret) {
		struct rdps_wire_rows rows;

		memcpy(&rows, buf + sizeof(h), sizeof(rows));
		req.type = RDPS_REQ_PUSH;
		req.table = rows.table;
		req.n = rows.n;
		req.ids = (const uint64_t *)(buf + sizeof(h) + sizeof(rows));
		req.grads = (const float *)(buf + sizeof(h) + sizeof(rows) + (size_t)rows.n * 8);
		ret = vs->p.handle(vs->p.ctx, &req);
		if (ret >= 0)
			return;
	}
refused:
	ss->failed++;
	if (vs->base.stats)
		RDPS_STAT_ADD(vs->base.stats->errors[RDPS_REQ_PUSH], 1);
	rdps_warn("server %u: client %s: push refused: %s", vs->p.server_id, ss->peer,
		  why[0] ? why : rdps_strerror(ret));
}

static void on_recv(struct verbs_worker *w, const struct ibv_wc *wc)
{
	struct verbs_server *vs = w->vs;
	uint32_t slot = (uint32_t)WR_SEQ(wc->wr_id);
	struct verbs_session *ss = verbs_qp_hash_get(w, wc->qp_num);
	bool reposted;
	int ret;

	if (verbs_pool_taken(&w->pool, slot)) {
		/* Never post it again: it may be on the queue already. */
		rdps_err("server %u: completion of receive slot %u that is not posted (ignored)",
			 vs->p.server_id, slot);
		return;
	}
	if (wc->status == IBV_WC_SUCCESS && ss)
		handle_msg(w, ss, verbs_pool_buf(&w->pool, slot), wc->byte_len);
	else if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR)
		rdps_warn("server %u: client %s: a receive failed: %s (vendor error 0x%x)",
			  vs->p.server_id, ss ? ss->peer : "?", ibv_wc_status_str(wc->status),
			  wc->vendor_err);
	/* The slot goes back to the shared queue in every case. */
	ret = verbs_pool_post(&w->pool, slot);
	reposted = !ret;
	if (ret)
		rdps_err("server %u: cannot post receive slot %u again: %s", vs->p.server_id, slot,
			 strerror(-ret));
	if (!ss) {
		/* Of a session already released (its drain missed this): its
		 * credits, this one included, went back then, so the counts
		 * only agree again now that the slot is posted. */
		if (!w->orphans++)
			rdps_warn("server %u: receive completion of an unknown queue pair %u",
				  vs->p.server_id, wc->qp_num);
		return;
	}
	if (verbs_pool_return(&w->pool, &ss->cr, reposted))
		verbs_session_close(w, ss, "it sent more messages than it had credits for", true);
	else if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR)
		verbs_session_close(w, ss, "a receive from it failed", true);
	else if (ss->state < SS_CLOSING)
		q_push(w, VERBS_Q_GRANT, ss); /* its credit came back: below its share */
}

static void on_send(struct verbs_worker *w, const struct ibv_wc *wc)
{
	uint64_t seq;
	struct verbs_session *ss = session_by_send(w, wc->wr_id, &seq);

	if (!ss)
		return; /* of a session freed meanwhile */
	if (seq > ss->sq_done)
		ss->sq_done = seq; /* RC completes a QP's sends in order */
	/* Room in its send queue: what waited for it goes out. */
	if (ss->state < SS_CLOSING && has_sends(ss, share_now(w)))
		q_push(w, VERBS_Q_SEND, ss);
	if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR) {
		char why[160];

		snprintf(why, sizeof(why), "a send to it failed: %s (vendor error 0x%x)",
			 ibv_wc_status_str(wc->status), wc->vendor_err);
		verbs_session_close(w, ss, why, true);
	}
}

void verbs_srv_completion(struct verbs_worker *w, const struct ibv_wc *wc)
{
	switch (WR_KIND(wc->wr_id)) {
	case WR_SRV_RECV:
		on_recv(w, wc);
		break;
	case WR_SRV_SEND:
		on_send(w, wc);
		break;
	default:
		rdps_err("server %u: completion of an unknown work request 0x%llx",
			 w->vs->p.server_id, (unsigned long long)wc->wr_id);
	}
}

int verbs_srv_drain_cq(struct verbs_worker *w, int max, bool *empty)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	*empty = false;
	do {
		n = ibv_poll_cq(w->cq, 32, wc);
		if (n < 0) {
			rdps_err("server %u: polling the completion queue of thread %u failed",
				 w->vs->p.server_id, w->index);
			return -EIO;
		}
		for (int i = 0; i < n; i++)
			verbs_srv_completion(w, &wc[i]);
		total += n;
		/* Fewer than asked: the CQ was empty at that moment, so every
		 * completion that was in it before has been handled (it is a
		 * queue), even if new ones come in meanwhile. */
		*empty = n < 32;
	} while (!*empty && total < max);
	return total;
}

uint64_t verbs_srv_busy_poll_ns(void)
{
	const char *env = getenv("RDPS_VERBS_BUSY_POLL_US");
	unsigned long long us;
	char *end;

	if (!env || !*env)
		return VERBS_BUSY_POLL_US * 1000ull;
	errno = 0;
	us = strtoull(env, &end, 10);
	if (errno || *end || us > VERBS_BUSY_POLL_MAX_US) {
		rdps_warn("RDPS_VERBS_BUSY_POLL_US=%s is not a number of microseconds from 0 to %u; "
			  "using %u", env, VERBS_BUSY_POLL_MAX_US, VERBS_BUSY_POLL_US);
		return VERBS_BUSY_POLL_US * 1000ull;
	}
	return us * 1000ull;
}
