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

/* Sessions are few (one per client): a scan costs less than applying one
 * push message. */
static struct verbs_session *session_by_qp_num(struct verbs_worker *w, uint32_t qp_num)
{
	for (uint32_t i = 0; i < w->hw; i++)
		if (w->sessions[i] && w->sessions[i]->qp_num == qp_num)
			return w->sessions[i];
	return NULL;
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
	uint32_t n = w->live;

	for (uint32_t i = 0; i < w->hw; i++) {
		const struct verbs_session *ss = w->sessions[i];
		uint32_t part;

		if (!ss || ss->state >= SS_CLOSING)
			continue;
		part = verbs_srv_job_part(w, ss->num_clients);
		if (part > n)
			n = part;
	}
	return n;
}

uint32_t verbs_srv_admit(struct verbs_worker *w, struct verbs_session *ss)
{
	uint32_t credits;

	w->sessions[ss->index] = ss;
	if (ss->index >= w->hw)
		w->hw = ss->index + 1;
	w->live++;
	credits = verbs_pool_grant(&w->pool, &ss->cr,
				   verbs_pool_share(&w->pool, verbs_srv_sharers(w)));
	ss->cr.owed = 0; /* they travel in the connection reply */
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

/* Gives free credits to sessions below their share, round robin. */
void verbs_srv_regrant(struct verbs_worker *w)
{
	uint32_t share = verbs_pool_share(&w->pool, verbs_srv_sharers(w));
	bool ran_out = false;

	for (uint32_t k = 0; k < w->hw; k++) {
		uint32_t i = (w->regrant_from + k) % w->hw;
		struct verbs_session *ss = w->sessions[i];

		if (!ss || ss->state >= SS_CLOSING)
			continue;
		verbs_pool_grant(&w->pool, &ss->cr, share);
		/* Acknowledgements go out even when no credit is left. */
		session_send(w, ss, share);
		if (!w->pool.free_credits && !ran_out) {
			ran_out = true;
			w->regrant_from = i + 1; /* next time, the others first */
		}
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
	struct verbs_session *ss = session_by_qp_num(w, wc->qp_num);
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
}

static void on_send(struct verbs_worker *w, const struct ibv_wc *wc)
{
	uint64_t seq;
	struct verbs_session *ss = session_by_send(w, wc->wr_id, &seq);

	if (!ss)
		return; /* of a session freed meanwhile */
	if (seq > ss->sq_done)
		ss->sq_done = seq; /* RC completes a QP's sends in order */
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
