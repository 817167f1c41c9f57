// SPDX-License-Identifier: MIT
/*
 * ofi backend, server side: completions and what they make the server
 * send. Every completion is classified by its context alone (ofi.h): a
 * receive slot, a control send, or a slot answering a two-sided pull. A
 * message says whose it is (session index, generation, cookie); one of no
 * live session is dropped, its slot posted again. A slot goes back to the
 * receive queue exactly once per completion; the sender's credit comes
 * back with it.
 *
 * Flushes are counted, not ordered: the messages of a session may arrive
 * in any order (SRD), so a flush carries the number of push messages its
 * client sent before it, and is acknowledged once the session has handled
 * that many (ofi_flush_arrived / ofi_push_handled).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "ofi.h"
#include "wire.h"

/* ---------------------------------------------------------------------- */
/* Flushes                                                                */

static void flush_check(struct ofi_session *ss)
{
	if (!ss->flush_pending || ss->pushes_handled < ss->flush_pushes)
		return;
	/* Every push message the client sent before the flush is handled. */
	ss->flush_pending = false;
	ss->acks_owed = 1;
	ss->ack_tag = ss->flush_tag;
	ss->ack_failed += ss->failed;
	ss->failed = 0;
}

void ofi_flush_arrived(struct ofi_session *ss, uint64_t tag, uint64_t pushes)
{
	/* A client waits for each flush before the next: a newer one (after a
	 * lost wait) supersedes the one pending, and covers its pushes. */
	if (ss->flush_pending && tag < ss->flush_tag)
		return;
	ss->flush_pending = true;
	ss->flush_tag = tag;
	ss->flush_pushes = pushes;
	flush_check(ss);
}

void ofi_push_handled(struct ofi_session *ss, bool refused)
{
	ss->pushes_handled++;
	ss->failed += refused;
	flush_check(ss);
}

/* ---------------------------------------------------------------------- */
/* Sessions                                                               */

uint32_t ofi_srv_sharers(const struct ofi_server *os)
{
	uint32_t n = os->live;

	/* Every client of the job will come: divide by the job's size. */
	for (uint32_t i = 0; i < os->hw; i++) {
		const struct ofi_session *ss = os->sessions[i];

		if (ss && ss->state == OS_LIVE && ss->num_clients > n)
			n = ss->num_clients;
	}
	return n;
}

struct ofi_session *ofi_srv_session(struct ofi_server *os, const struct ofi_msg_hdr *h)
{
	struct ofi_session *ss = h->session < os->hw ? os->sessions[h->session] : NULL;

	if (!ss || ss->gen != h->gen || ss->cookie != h->cookie)
		return NULL;
	return ss;
}

/* The session a context's (session index, generation) names, if it lives. */
static struct ofi_session *session_of(struct ofi_server *os, uint64_t v)
{
	uint32_t idx = (uint32_t)(v >> 16) & 0xffffffu;
	struct ofi_session *ss = idx < os->hw ? os->sessions[idx] : NULL;

	return ss && (ss->gen & 0xffffu) == (uint32_t)(v >> 40) ? ss : NULL;
}

static uint64_t ctx_val(const struct ofi_session *ss, uint32_t low16)
{
	return ((uint64_t)(ss->gen & 0xffffu) << 40) | ((uint64_t)ss->index << 16) | low16;
}

/* ---------------------------------------------------------------------- */
/* Sends to a client: credits, flush acknowledgements, rows               */

static int ctl_take(struct ofi_server *os)
{
	for (uint32_t k = 0; k < OFI_CTL_SLOTS; k++) {
		uint32_t i = (os->ctl_next + k) % OFI_CTL_SLOTS;

		if (!os->ctl[i].busy) {
			os->ctl[i].busy = true;
			os->ctl_busy++;
			os->ctl_next = (i + 1) % OFI_CTL_SLOTS;
			return (int)i;
		}
	}
	return -1;
}

static void ctl_free(struct ofi_server *os, uint32_t i)
{
	os->ctl[i].busy = false;
	os->ctl_busy--;
}

/* Sends what the session is owed: flush acknowledgements at once, credits
 * once they are worth a message or the client has none left. */
static void session_send(struct ofi_server *os, struct ofi_session *ss, uint32_t share)
{
	uint32_t batch = share / 2 ? share / 2 : 1;

	while (ss->state == OS_LIVE) {
		/* The client holds no credit and has no message on the way
		 * exactly when all it was promised is still owed. */
		bool starving = ss->cr.owed && ss->cr.owed == ss->cr.promised;
		struct ofi_srv_hdr h = { .kind = ss->acks_owed ? OFI_S_FLUSH_ACK : OFI_S_CREDIT,
					 .credits = ss->cr.owed, .conn = ss->conn,
					 .session = ss->index };
		char *buf;
		ssize_t r;
		int i;

		if (!ss->acks_owed && ss->cr.owed < batch && !starving)
			return;
		i = ctl_take(os);
		if (i < 0)
			return; /* sent when a control send completes */
		if (ss->acks_owed) {
			h.tag = ss->ack_tag;
			h.count = ss->ack_failed;
		}
		buf = os->ctl_buf + (size_t)i * sizeof(h);
		memcpy(buf, &h, sizeof(h));
		r = fi_send(os->e.ep, buf, sizeof(h), ofi_desc(os->ctl_mr), ss->addr,
			    OFI_CTX(OFI_OP_SRV_CTL, ctx_val(ss, (uint32_t)i)));
		if (r == -FI_EAGAIN) {
			/* The queue is full (or rxm still connects): next round. */
			ctl_free(os, (uint32_t)i);
			return;
		}
		if (r) {
			char why[128];

			ctl_free(os, (uint32_t)i);
			snprintf(why, sizeof(why), "cannot send to it: %s", ofi_strerror((int)r));
			ofi_session_close(os, ss, why, true);
			return;
		}
		ss->cr.owed -= h.credits;
		if (ss->acks_owed) {
			ss->acks_owed = 0;
			ss->ack_failed = 0;
		}
	}
}

/* A slot's message is done with: back on the queue, and its sender's
 * credit back (ss may be NULL: a message of no live session). */
static void slot_done(struct ofi_server *os, struct ofi_session *ss, uint32_t slot)
{
	int ret = ofi_pool_post(&os->pool, slot);

	if (ret)
		rdps_err("server %u: cannot post receive slot %u again: %s", os->p.server_id, slot,
			 ofi_strerror(ret));
	if (ss && ofi_pool_return(&os->pool, &ss->cr, !ret))
		ofi_session_close(os, ss, "it sent more messages than it had credits for", true);
}

/* Sends a two-sided pull's answer, built in its slot. 0, -EAGAIN (the
 * queue is full: kept for later) or -errno. */
static int rows_send(struct ofi_server *os, struct ofi_session *ss, uint32_t slot)
{
	/* Tagged: it lands in the answer slot the client posted for it. */
	ssize_t r = fi_tsend(os->e.ep, ofi_pool_buf(&os->pool, slot), os->answer_len[slot],
			     ofi_pool_desc(&os->pool, slot), ss->addr, os->answer_tag[slot],
			     OFI_CTX(OFI_OP_SRV_ROWS, ctx_val(ss, slot)));

	if (r == -FI_EAGAIN)
		return -EAGAIN;
	return (int)r;
}

/* A two-sided answer could not be sent: its slot goes back, and the
 * session (if why) closes. */
static void rows_drop(struct ofi_server *os, struct ofi_session *ss, uint32_t slot, int ret)
{
	ss->held--;
	slot_done(os, ss, slot);
	if (ret) {
		char why[128];

		snprintf(why, sizeof(why), "cannot send rows to it: %s", ofi_strerror(ret));
		ofi_session_close(os, ss, why, true);
	}
}

static void rows_pending_retry(struct ofi_server *os)
{
	uint32_t kept = 0;

	for (uint32_t k = 0; k < os->nrows_pending; k++) {
		uint64_t v = os->rows_pending[k];
		uint32_t slot = (uint32_t)(v & 0xffffu);
		struct ofi_session *ss = session_of(os, v);
		int ret;

		if (!ss) {
			slot_done(os, NULL, slot); /* never: a session holding slots lives */
			continue;
		}
		if (ss->state != OS_LIVE) {
			rows_drop(os, ss, slot, 0); /* the client is gone */
			continue;
		}
		ret = rows_send(os, ss, slot);
		if (ret == -EAGAIN)
			os->rows_pending[kept++] = v;
		else if (ret)
			rows_drop(os, ss, slot, ret);
	}
	os->nrows_pending = kept;
}

void ofi_srv_regrant(struct ofi_server *os)
{
	uint32_t share = ofi_pool_share(&os->pool, ofi_srv_sharers(os));
	bool ran_out = false;

	if (os->nrows_pending)
		rows_pending_retry(os);
	for (uint32_t k = 0; k < os->hw; k++) {
		uint32_t i = (os->regrant_from + k) % os->hw;
		struct ofi_session *ss = os->sessions[i];

		if (!ss || ss->state != OS_LIVE)
			continue;
		ofi_pool_grant(&os->pool, &ss->cr, share);
		/* Acknowledgements go out even when no credit is left. */
		session_send(os, ss, share);
		if (!os->pool.free_credits && !ran_out) {
			ran_out = true;
			os->regrant_from = i + 1; /* next time, the others first */
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Messages                                                               */

static void refused(struct ofi_server *os, struct ofi_session *ss, int type, int ret,
		    const char *why)
{
	if (os->base.stats && type > 0 && type < 16)
		RDPS_STAT_ADD(os->base.stats->errors[type], 1);
	rdps_warn("server %u: client %s: %s refused: %s", os->p.server_id, ss->peer,
		  rdps_req_name(type), why[0] ? why : rdps_strerror(ret));
}

/* A two-sided pull: the ids are copied out, the rows (or the reason of a
 * refusal) written into the slot after an answer header, and the slot sent
 * back to the client; it returns to the queue when that send completes. */
static void handle_pull(struct ofi_server *os, struct ofi_session *ss, uint32_t slot,
			const char *payload, uint32_t len)
{
	char *buf = ofi_pool_buf(&os->pool, slot), why[256] = "";
	struct ofi_srv_hdr h = { .kind = OFI_S_ROWS, .conn = ss->conn, .session = ss->index };
	struct rdps_request req = { .type = RDPS_REQ_PULL, .client_id = ss->client_id,
				    .num_clients = ss->num_clients, .peer = ss->peer,
				    .errmsg = why, .errlen = sizeof(why) };
	struct rdps_wire_rows rows;
	int ret;

	memcpy(&h.tag, buf + offsetof(struct ofi_msg_hdr, tag), sizeof(h.tag));
	os->answer_tag[slot] = h.tag;
	ret = rdps_wire_check_rows(RDPS_REQ_PULL, payload, len, os->regions,
				   __atomic_load_n(&os->p.num_regions, __ATOMIC_ACQUIRE),
				   why, sizeof(why));
	if (!ret) {
		uint32_t dim;

		memcpy(&rows, payload, sizeof(rows));
		dim = os->regions[rows.table].desc.dim;
		if (sizeof(h) + (size_t)rows.n * dim * 4 > os->pool.slot_size) {
			snprintf(why, sizeof(why), "pull of %u rows of dim %u does not fit an answer "
				 "of %zu bytes", rows.n, dim, os->pool.slot_size);
			ret = -EMSGSIZE;
		} else {
			/* The rows overwrite the ids: copy them out first. */
			memcpy(os->pull_ids, payload + sizeof(rows), (size_t)rows.n * 8);
			req.table = rows.table;
			req.n = rows.n;
			req.ids = os->pull_ids;
			req.rows_out = (float *)(buf + sizeof(h));
			ret = os->p.handle(os->p.ctx, &req);
			h.count = rows.n;
			os->answer_len[slot] = (uint32_t)(sizeof(h) + (size_t)rows.n * dim * 4);
		}
	}
	if (ret < 0) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rdps_strerror(ret));
		refused(os, ss, RDPS_REQ_PULL, ret, why);
		h.status = ret;
		h.count = 0;
		os->answer_len[slot] = (uint32_t)(sizeof(h) + strlen(why));
		memcpy(buf + sizeof(h), why, strlen(why));
	}
	memcpy(buf, &h, sizeof(h));
	ss->held++;
	ret = rows_send(os, ss, slot);
	if (ret == -EAGAIN)
		os->rows_pending[os->nrows_pending++] = ctx_val(ss, slot);
	else if (ret)
		rows_drop(os, ss, slot, ret);
}

/* One received message in slot (len bytes). */
static void on_recv(struct ofi_server *os, uint32_t slot, size_t len)
{
	const char *buf = ofi_pool_buf(&os->pool, slot);
	struct ofi_msg_hdr h;
	struct ofi_session *ss = NULL;
	char why[256] = "";
	struct rdps_request req = { .errmsg = why, .errlen = sizeof(why) };
	int ret;

	if (len >= sizeof(h)) {
		memcpy(&h, buf, sizeof(h));
		ss = ofi_srv_session(os, &h);
	}
	if (!ss || ss->state == OS_DEAD) {
		/* An RDM endpoint takes messages from anyone: this one is of
		 * no live session (a closed one's, late, or a stranger's). */
		if (!os->orphans++)
			rdps_warn("server %u: a message of %zu bytes from no live session (dropped; "
				  "counted as orphans)", os->p.server_id, len);
		slot_done(os, NULL, slot);
		return;
	}
	req.client_id = ss->client_id;
	req.num_clients = ss->num_clients;
	req.peer = ss->peer;
	if (h.len != len - sizeof(h)) {
		snprintf(why, sizeof(why), "message says %u bytes, carries %zu", h.len,
			 len - sizeof(h));
		ret = -EPROTO;
	} else if (h.type == RDPS_REQ_FLUSH) {
		req.type = RDPS_REQ_FLUSH;
		os->p.handle(os->p.ctx, &req);
		ofi_flush_arrived(ss, h.tag, h.pushes);
		slot_done(os, ss, slot);
		return;
	} else if (h.type == RDPS_REQ_PULL) {
		handle_pull(os, ss, slot, buf + sizeof(h), h.len);
		return;
	} else if (h.type != RDPS_REQ_PUSH) {
		snprintf(why, sizeof(why), "unknown message type %u", h.type);
		ret = -EOPNOTSUPP;
	} else {
		ret = rdps_wire_check_rows(RDPS_REQ_PUSH, buf + sizeof(h), h.len, os->regions,
					   __atomic_load_n(&os->p.num_regions, __ATOMIC_ACQUIRE), why,
					   sizeof(why));
		if (!ret) {
			struct rdps_wire_rows rows;

			memcpy(&rows, buf + sizeof(h), sizeof(rows));
			req.type = RDPS_REQ_PUSH;
			req.table = rows.table;
			req.n = rows.n;
			req.ids = (const uint64_t *)(buf + sizeof(h) + sizeof(rows));
			req.grads = (const float *)(buf + sizeof(h) + sizeof(rows) +
						    (size_t)rows.n * 8);
			ret = os->p.handle(os->p.ctx, &req);
		}
	}
	if (ret < 0)
		refused(os, ss, RDPS_REQ_PUSH, ret, why);
	/* Malformed or refused, a message the client meant as a push counts:
	 * its flush must not wait for it, and reports it. */
	if (h.type == RDPS_REQ_PUSH || ret < 0)
		ofi_push_handled(ss, ret < 0);
	slot_done(os, ss, slot);
}

void ofi_srv_completion(struct ofi_server *os, void *context, size_t len,
			const struct fi_cq_err_entry *err)
{
	uint64_t v = OFI_CTX_VAL(context);
	struct ofi_session *ss;
	char text[256];

	switch (OFI_CTX_KIND(context)) {
	case OFI_OP_SRV_RECV: {
		uint32_t slot = (uint32_t)v;

		if (ofi_pool_taken(&os->pool, slot)) {
			/* Never post it again: it may be on the queue already. */
			rdps_err("server %u: completion of receive slot %u that is not posted "
				 "(ignored)", os->p.server_id, slot);
			return;
		}
		if (!err) {
			on_recv(os, slot, len);
			return;
		}
		/* Whose message failed is unknown: its credit stays promised. */
		if (err->err != FI_ECANCELED) {
			ofi_cq_errtext(os->e.cq, err, text, sizeof(text));
			rdps_warn("server %u: a receive failed: %s", os->p.server_id, text);
		}
		slot_done(os, NULL, slot);
		return;
	}
	case OFI_OP_SRV_CTL:
		ctl_free(os, (uint32_t)(v & 0xffffu));
		ss = session_of(os, v);
		if (err && ss) {
			char why[300];

			ofi_cq_errtext(os->e.cq, err, text, sizeof(text));
			snprintf(why, sizeof(why), "a send to it failed: %s", text);
			ofi_session_close(os, ss, why, true);
		}
		return;
	case OFI_OP_SRV_ROWS:
		ss = session_of(os, v);
		if (ss)
			ss->held--;
		slot_done(os, ss, (uint32_t)(v & 0xffffu));
		if (err && ss) {
			char why[300];

			ofi_cq_errtext(os->e.cq, err, text, sizeof(text));
			snprintf(why, sizeof(why), "sending rows to it failed: %s", text);
			ofi_session_close(os, ss, why, true);
		}
		return;
	default:
		rdps_err("server %u: completion of an unknown operation 0x%llx", os->p.server_id,
			 (unsigned long long)(uintptr_t)context);
	}
}

int ofi_srv_drain_cq(struct ofi_server *os, int max)
{
	struct fi_cq_msg_entry ev[32];
	int total = 0;

	while (total < max) {
		ssize_t n = fi_cq_read(os->e.cq, ev, 32);

		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			if (fi_cq_readerr(os->e.cq, &err, 0) < 0)
				return -EIO;
			ofi_srv_completion(os, err.op_context, 0, &err);
			total++;
			continue;
		}
		if (n < 0) {
			rdps_err("server %u: reading the completion queue failed: %s",
				 os->p.server_id, ofi_strerror((int)n));
			return -EIO;
		}
		for (ssize_t i = 0; i < n; i++)
			ofi_srv_completion(os, ev[i].op_context, ev[i].len, NULL);
		total += (int)n;
		if (n < 32)
			break;
	}
	return total;
}
