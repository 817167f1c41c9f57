// SPDX-License-Identifier: MIT
/*
 * verbs backend, client side: one connection to one server.
 *
 * Pulls are one-sided: the welcome of the handshake carries each region's
 * address and rkey; a client reads rows with RDMA READs into a registered
 * bounce buffer (consecutive ids coalesced into one READ, a batch posted as
 * one list, only every VERBS_SIGNAL_EVERY-th and the last work request
 * signaled), then checks each row's checksum (validated mode: a row the NIC
 * placed while the server updated it, in whatever order, fails it and is
 * read again) and copies it out. The server's CPU does nothing for a pull.
 *
 * Pushes are SENDs into the server's shared receive slots. A client sends
 * only while it holds a credit; the server grants them (in the connection
 * reply, then as SEND_WITH_IMM) and never more than it has slots posted. A
 * flush is a SEND processed in order after the client's pushes; its
 * acknowledgement (an immediate) says how many push messages the server
 * refused since the last flush.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdps/common.h"
#include "tcp.h"
#include "verbs.h"
#include "wire.h"

struct verbs_read {        /* one posted READ */
	uint32_t pull;         /* index in pend[] */
	uint32_t row;          /* first row of the run in that pull */
	uint32_t nrows;
	uint32_t boff;         /* offset in the bounce buffer */
};

struct verbs_pull {
	uint32_t table, n, next; /* rows [0, next) are posted or done */
	const uint64_t *ids;
	float *out;
};

struct verbs_conn {
	struct rdps_conn base;
	struct rdps_conn *ctl;        /* tcp connection: handshake and control */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	char *bounce;
	struct ibv_mr *bounce_mr;
	char *sendbuf;
	struct ibv_mr *send_mr;
	uint32_t max_inline;
	int timeout_ms;
	int consistency;
	bool broken;
	/* send queue accounting: sequence numbers of posted work requests */
	uint64_t sq_posted, sq_done;
	uint64_t slot_seq[VERBS_SEND_SLOTS]; /* SEND occupying each slot */
	uint64_t sends;                      /* SENDs posted (slot = sends % SLOTS) */
	uint32_t credits;
	uint64_t flush_acks;         /* flush acknowledgements received */
	uint64_t flush_want;         /* ... expected once the last flush is done */
	uint32_t flush_failed;       /* push messages the server refused */
	/* pulls */
	struct verbs_pull pend[RDPS_TRANSPORT_POST_DEPTH];
	uint32_t npend;
	struct verbs_read reads[VERBS_READS_PER_POST];
	uint32_t nreads;            /* READs of the posted batch */
	uint64_t batch_last_seq;    /* signaled READ that ends the batch */
	bool batch_inflight;
	struct ibv_send_wr wrs[VERBS_READS_PER_POST];
	struct ibv_sge sges[VERBS_READS_PER_POST];
};

static inline struct verbs_conn *to_verbs_conn(struct rdps_conn *c)
{
	return container_of(c, struct verbs_conn, base);
}

static int vc_fail(struct verbs_conn *vc, int ret, const char *fmt, const char *detail)
{
	char what[400];

	vc->broken = true;
	snprintf(what, sizeof(what), fmt, detail);
	snprintf(vc->base.errmsg, sizeof(vc->base.errmsg), "%s: %s", vc->base.peer, what);
	return ret;
}

static int post_recv(struct verbs_conn *vc, uint64_t seq)
{
	struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_RECV, seq) }, *bad;

	return -ibv_post_recv(vc->id->qp, &wr, &bad);
}

/* Handles one completion. Returns 0 or -errno (connection broken). */
static int handle_wc(struct verbs_conn *vc, const struct ibv_wc *wc)
{
	int kind = WR_KIND(wc->wr_id);

	if (wc->status != IBV_WC_SUCCESS) {
		char what[256];

		/* Only wr_id, status, qp_num and vendor_err are valid here. */
		snprintf(what, sizeof(what), "%s failed: %s (verbs status %d, vendor error 0x%x)%s",
			 kind == WR_READ ? "RDMA READ" : kind == WR_SEND ? "SEND" : "receive",
			 ibv_wc_status_str(wc->status), wc->status, wc->vendor_err,
			 wc->status == IBV_WC_RNR_RETRY_EXC_ERR
				 ? ": the server had no receive buffer posted for a push, which its "
				   "credits promise (a peer broke the credit protocol?)"
				 : "");
		return vc_fail(vc, -EIO, "%s", what);
	}
	switch (kind) {
	case WR_READ:
	case WR_SEND:
		/* RC completes in order: everything up to this one is done. */
		if (WR_SEQ(wc->wr_id) > vc->sq_done)
			vc->sq_done = WR_SEQ(wc->wr_id);
		break;
	case WR_RECV: {
		uint32_t imm = ntohl(wc->imm_data);

		if (!(wc->wc_flags & IBV_WC_WITH_IMM))
			return vc_fail(vc, -EPROTO, "%s", "message without immediate data");
		vc->credits += IMM_CREDITS(imm);
		if (IMM_KIND(imm) == IMM_FLUSH_ACK) {
			vc->flush_acks++;
			vc->flush_failed += IMM_FAILED(imm);
		}
		if (post_recv(vc, WR_SEQ(wc->wr_id)))
			return vc_fail(vc, -EIO, "%s", "cannot re-post a receive");
		break;
	}
	default:
		return vc_fail(vc, -EPROTO, "%s", "completion of an unknown work request");
	}
	return 0;
}

/* Polls completions until done(vc) or the timeout; what names the wait. */
static int poll_until(struct verbs_conn *vc, bool (*done)(struct verbs_conn *),
		      const char *what)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)vc->timeout_ms * 1000000ull;
	struct ibv_wc wc[32];
	unsigned idle = 0;

	while (!done(vc)) {
		int n = ibv_poll_cq(vc->cq, 32, wc);

		if (n < 0)
			return vc_fail(vc, -EIO, "%s", "polling the completion queue failed");
		for (int i = 0; i < n; i++) {
			int ret = handle_wc(vc, &wc[i]);

			if (ret)
				return ret;
		}
		if (n)
			continue;
		/* Spin for latency; look at the clock only now and then. */
		if (++idle % 4096 == 0) {
			/* Outside a control call the server never writes to the
			 * control connection: readable means closed, i.e. dead. */
			struct pollfd pfd = { .fd = rdps_tcp_conn_fd(vc->ctl), .events = POLLIN };

			if (poll(&pfd, 1, 0) > 0) {
				char why[160];

				snprintf(why, sizeof(why),
					 "the server closed its control connection (it died?) while waiting for %s",
					 what);
				return vc_fail(vc, -ECONNRESET, "%s", why);
			}
			if (rdps_now_ns() >= deadline) {
				char why[160];

				snprintf(why, sizeof(why), "timed out after %d ms waiting for %s",
					 vc->timeout_ms, what);
				return vc_fail(vc, -ETIMEDOUT, "%s", why);
			}
			sched_yield();
		}
	}
	return 0;
}

static bool batch_done(struct verbs_conn *vc)
{
	return vc->sq_done >= vc->batch_last_seq;
}

/* Posts READs for pending pulls, as many as the bounce buffer and one post
 * list hold. */
static int issue_reads(struct verbs_conn *vc)
{
	uint32_t boff = 0, nwr = 0;
	struct ibv_send_wr *bad;
	int ret;

	for (uint32_t p = 0; p < vc->npend && nwr < VERBS_READS_PER_POST; p++) {
		struct verbs_pull *pl = &vc->pend[p];
		const struct rdps_table_desc *t = &vc->base.tables[pl->table];
		uint32_t stride = t->stride;

		while (pl->next < pl->n && nwr < VERBS_READS_PER_POST) {
			uint32_t i = pl->next, run = 1;

			if (boff + stride > VERBS_BOUNCE)
				goto post;
			while (i + run < pl->n && run < VERBS_MAX_RUN_ROWS &&
			       pl->ids[i + run] == pl->ids[i + run - 1] + 1 &&
			       boff + (uint64_t)(run + 1) * stride <= VERBS_BOUNCE)
				run++;
			vc->sges[nwr] = (struct ibv_sge){
				.addr = (uintptr_t)(vc->bounce + boff),
				.length = run * stride,
				.lkey = vc->bounce_mr->lkey,
			};
			vc->wrs[nwr] = (struct ibv_send_wr){
				.wr_id = WR_ID(WR_READ, vc->sq_posted + nwr + 1),
				.next = NULL,
				.sg_list = &vc->sges[nwr],
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_READ,
				.wr.rdma.remote_addr = t->remote_addr + (pl->ids[i] - t->lo) * stride,
				.wr.rdma.rkey = t->rkey,
			};
			if (nwr)
				vc->wrs[nwr - 1].next = &vc->wrs[nwr];
			/* Bound the unsignaled run so the send queue drains. */
			if ((nwr + 1) % VERBS_SIGNAL_EVERY == 0)
				vc->wrs[nwr].send_flags = IBV_SEND_SIGNALED;
			vc->reads[nwr] = (struct verbs_read){ p, i, run, boff };
			boff += run * stride;
			pl->next += run;
			nwr++;
		}
	}
post:
	vc->nreads = nwr;
	if (!nwr)
		return 0;
	vc->wrs[nwr - 1].send_flags = IBV_SEND_SIGNALED;
	/* One doorbell for the whole list. */
	ret = ibv_post_send(vc->id->qp, vc->wrs, &bad);
	if (ret)
		return vc_fail(vc, -ret, "posting RDMA READs failed: %s", strerror(ret));
	vc->sq_posted += nwr;
	vc->batch_last_seq = vc->sq_posted;
	vc->batch_inflight = true;
	return 0;
}

/* Reads one row again, synchronously, into the bounce buffer at boff. */
static int reread_row(struct verbs_conn *vc, const struct rdps_table_desc *t,
		      uint64_t id, uint32_t boff)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(vc->bounce + boff), .length = t->stride,
			       .lkey = vc->bounce_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = WR_ID(WR_READ, vc->sq_posted + 1), .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int ret;

	wr.wr.rdma.remote_addr = t->remote_addr + (id - t->lo) * t->stride;
	wr.wr.rdma.rkey = t->rkey;
	ret = ibv_post_send(vc->id->qp, &wr, &bad);
	if (ret)
		return vc_fail(vc, -ret, "posting an RDMA READ failed: %s", strerror(ret));
	vc->sq_posted++;
	vc->batch_last_seq = vc->sq_posted;
	return poll_until(vc, batch_done, "a re-read row");
}

/* Validates and copies the rows of the completed batch. */
static int complete_batch(struct verbs_conn *vc)
{
	for (uint32_t r = 0; r < vc->nreads; r++) {
		const struct verbs_read *rd = &vc->reads[r];
		struct verbs_pull *pl = &vc->pend[rd->pull];
		const struct rdps_table_desc *t = &vc->base.tables[pl->table];

		for (uint32_t k = 0; k < rd->nrows; k++) {
			uint32_t boff = rd->boff + k * t->stride;
			const char *row = vc->bounce + boff;
			uint32_t tries = 0;

			while (vc->consistency == RDPS_READ_VALIDATED && !rdps_row_valid(row, t->dim)) {
				int ret;

				if (++tries > VERBS_MAX_REREADS)
					return vc_fail(vc, -EAGAIN,
						       "a row stayed torn after %s re-reads", "10000");
				vc->base.rereads++;
				ret = reread_row(vc, t, pl->ids[rd->row + k], boff);
				if (ret)
					return ret;
			}
			memcpy(pl->out + (size_t)(rd->row + k) * t->dim,
			       row + RDPS_ROW_DATA_OFFSET, (size_t)t->dim * 4);
		}
	}
	vc->nreads = 0;
	vc->batch_inflight = false;
	return 0;
}

int verbs_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
			   uint32_t n, float *out)
{
	struct verbs_conn *vc = to_verbs_conn(c);

	if (vc->broken)
		return -ENOTCONN;
	if (table >= c->num_tables)
		return -ENOENT;
	if (vc->npend == RDPS_ARRAY_SIZE(vc->pend))
		return -EBUSY;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] < c->tables[table].lo || ids[i] >= c->tables[table].hi) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: id %llu is outside the server's rows of table '%s'", c->peer,
				 (unsigned long long)ids[i], c->tables[table].name);
			return -ERANGE;
		}
	vc->pend[vc->npend++] = (struct verbs_pull){ table, n, 0, ids, out };
	/* Start now, so reads to several servers overlap. */
	if (!vc->batch_inflight)
		return issue_reads(vc);
	return 0;
}

int verbs_pull_wait(struct rdps_conn *c)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret = 0;

	while (!ret && vc->batch_inflight) {
		ret = poll_until(vc, batch_done, "RDMA READ completions");
		if (!ret)
			ret = complete_batch(vc);
		if (!ret)
			ret = issue_reads(vc);
	}
	vc->npend = 0;
	vc->batch_inflight = false;
	return ret;
}

static bool have_credit_and_slot(struct verbs_conn *vc)
{
	return vc->credits > 0 &&
	       vc->slot_seq[vc->sends % VERBS_SEND_SLOTS] <= vc->sq_done;
}

/* Sends one message of hdr + body (body may be NULL) using a credit. */
static int send_msg(struct verbs_conn *vc, uint32_t type, const void *rows_hdr,
		    size_t rows_hdr_len, const void *a, size_t alen, const void *b, size_t blen)
{
	struct verbs_msg_hdr h = { .type = type,
				   .len = (uint32_t)(rows_hdr_len + alen + blen) };
	uint32_t slot = vc->sends % VERBS_SEND_SLOTS;
	char *buf = vc->sendbuf + (size_t)slot * VERBS_MSG_SIZE, *p = buf;
	size_t len = sizeof(h) + h.len;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int ret;

	if (!have_credit_and_slot(vc)) {
		ret = poll_until(vc, have_credit_and_slot, "server credits for a push");
		if (ret)
			return ret;
	}
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	if (rows_hdr_len)
		memcpy(p, rows_hdr, rows_hdr_len);
	p += rows_hdr_len;
	if (alen)
		memcpy(p, a, alen);
	p += alen;
	if (blen)
		memcpy(p, b, blen);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = (uint32_t)len,
				.lkey = vc->send_mr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = WR_ID(WR_SEND, vc->sq_posted + 1), .sg_list = &sge,
				   .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED |
						 (len <= vc->max_inline ? IBV_SEND_INLINE : 0) };
	ret = ibv_post_send(vc->id->qp, &wr, &bad);
	if (ret)
		return vc_fail(vc, -ret, "posting a SEND failed: %s", strerror(ret));
	vc->sq_posted++;
	vc->slot_seq[slot] = vc->sq_posted;
	vc->sends++;
	vc->credits--;
	return 0;
}

int verbs_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		      const float *grads, uint32_t n)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	uint32_t dim, per_msg;

	if (vc->broken)
		return -ENOTCONN;
	if (table >= c->num_tables)
		return -ENOENT;
	if (vc->npend)
		return -EBUSY;
	dim = c->tables[table].dim;
	per_msg = (uint32_t)((VERBS_MSG_SIZE - sizeof(struct verbs_msg_hdr) -
			      sizeof(struct rdps_wire_rows)) / (8 + (size_t)dim * 4));
	for (uint32_t pos = 0; pos < n;) {
		uint32_t m = n - pos < per_msg ? n - pos : per_msg;
		struct rdps_wire_rows rows = { .table = table, .n = m };
		int ret = send_msg(vc, RDPS_REQ_PUSH, &rows, sizeof(rows), ids + pos,
				   (size_t)m * 8, grads + (size_t)pos * dim,
				   (size_t)m * dim * 4);

		if (ret)
			return ret;
		pos += m;
	}
	return 0;
}

static bool flush_acked(struct verbs_conn *vc)
{
	return vc->flush_acks >= vc->flush_want;
}

int verbs_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		      void *reply, size_t reply_len, int timeout_ms)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret;

	if (vc->broken)
		return -ENOTCONN;
	if (type != RDPS_REQ_FLUSH) {
		/* Barrier, stats, shutdown: over the control connection. */
		ret = vc->ctl->ops->call(vc->ctl, type, req, req_len, reply, reply_len, timeout_ms);
		if (ret)
			snprintf(c->errmsg, sizeof(c->errmsg), "%s", vc->ctl->errmsg);
		return ret;
	}
	/* A flush travels behind the pushes on the same queue pair. */
	ret = send_msg(vc, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, NULL, 0);
	if (ret)
		return ret;
	vc->flush_want++;
	ret = poll_until(vc, flush_acked, "the flush acknowledgement");
	if (ret)
		return ret;
	if (vc->flush_failed) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server refused %u push message(s) since the last flush (see its log)",
			 vc->flush_failed);
		vc->flush_failed = 0;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", c->peer, why);
		return -EIO;
	}
	return 0;
}

void verbs_close(struct rdps_conn *c)
{
	struct verbs_conn *vc;

	if (!c)
		return;
	vc = to_verbs_conn(c);
	if (vc->id) {
		if (vc->id->qp) {
			rdma_disconnect(vc->id);
			rdma_destroy_qp(vc->id);
		}
	}
	if (vc->send_mr)
		ibv_dereg_mr(vc->send_mr);
	if (vc->bounce_mr)
		ibv_dereg_mr(vc->bounce_mr);
	if (vc->cq)
		ibv_destroy_cq(vc->cq);
	if (vc->pd)
		ibv_dealloc_pd(vc->pd);
	if (vc->id)
		rdma_destroy_id(vc->id);
	if (vc->ch)
		rdma_destroy_event_channel(vc->ch);
	free(vc->bounce);
	free(vc->sendbuf);
	if (vc->ctl)
		vc->ctl->ops->close(vc->ctl);
	free(vc);
}

/* Creates the QP and connects it with rdma_cm. */
static int qp_connect(struct verbs_conn *vc, const struct rdps_conn_params *p,
		      char *err, size_t errlen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)vc->timeout_ms * 1000000ull;
	struct verbs_cm_req req = { VERBS_CM_MAGIC, p->client_id, p->num_clients, p->server_id,
				    vc->ctl->session, { 0 } };
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = VERBS_SQ_DEPTH, .max_recv_wr = VERBS_CLIENT_RECVS,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 256 },
	};
	struct rdma_conn_param cp = {
		.private_data = &req, .private_data_len = sizeof(req),
		.initiator_depth = VERBS_INITIATOR_DEPTH, .responder_resources = 0,
		.retry_count = VERBS_RETRY, .rnr_retry_count = VERBS_RNR_RETRY,
	};
	struct rdma_cm_event *ev;
	struct ibv_device_attr da;
	int ret;

	verbs_qp_mac(p->secret, req.session, req.mac);
	vc->ch = rdma_create_event_channel();
	if (!vc->ch)
		return -errno;
	if ((ret = verbs_set_nonblock(vc->ch->fd)))
		return ret;
	if (rdma_create_id(vc->ch, &vc->id, vc, RDMA_PS_TCP))
		return -errno;
	ret = verbs_cm_resolve(vc->id, vc->ch, p->host, p->port, vc->timeout_ms, err, errlen);
	if (ret)
		return ret;
	if (!ibv_query_device(vc->id->verbs, &da) && da.max_qp_init_rd_atom > 0 &&
	    cp.initiator_depth > da.max_qp_init_rd_atom)
		cp.initiator_depth = (uint8_t)da.max_qp_init_rd_atom;
	vc->pd = ibv_alloc_pd(vc->id->verbs);
	if (!vc->pd)
		return -errno;
	vc->cq = ibv_create_cq(vc->id->verbs, VERBS_SQ_DEPTH + VERBS_CLIENT_RECVS, NULL, NULL, 0);
	if (!vc->cq)
		return -errno;
	qa.send_cq = qa.recv_cq = vc->cq;
	if (rdma_create_qp(vc->id, vc->pd, &qa)) {
		/* Some devices cannot inline: retry without. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(vc->id, vc->pd, &qa)) {
			ret = -errno;
			snprintf(err, errlen, "%s: creating the queue pair failed: %s", vc->base.peer,
				 strerror(-ret));
			return ret;
		}
	}
	vc->max_inline = qa.cap.max_inline_data;
	ret = verbs_alloc_registered(vc->pd, VERBS_BOUNCE, IBV_ACCESS_LOCAL_WRITE, &vc->bounce,
			       &vc->bounce_mr, err, errlen, "pull buffer");
	if (!ret)
		ret = verbs_alloc_registered(vc->pd, (size_t)VERBS_SEND_SLOTS * VERBS_MSG_SIZE, 0,
				       &vc->sendbuf, &vc->send_mr, err, errlen, "push buffers");
	if (ret)
		return ret;
	for (uint32_t i = 0; i < VERBS_CLIENT_RECVS; i++)
		if ((ret = post_recv(vc, i)))
			return ret;
	if (rdma_connect(vc->id, &cp))
		return -errno;
	ret = verbs_cm_wait(vc->ch, deadline, &ev);
	if (ret) {
		snprintf(err, errlen, "%s: no answer to the RDMA connection request within %d ms",
			 vc->base.peer, vc->timeout_ms);
		return ret;
	}
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		struct verbs_cm_rep rep = { 0, 0 };

		/* A refusal by the server says why (verbs_server.c reject()). */
		if (ev->event == RDMA_CM_EVENT_REJECTED &&
		    ev->param.conn.private_data_len >= sizeof(rep))
			memcpy(&rep, ev->param.conn.private_data, sizeof(rep));
		if (rep.magic == VERBS_CM_MAGIC && rep.credits)
			snprintf(err, errlen, "%s: the server refused the RDMA connection: %s",
				 vc->base.peer, verbs_reject_reason((int)rep.credits));
		else
			snprintf(err, errlen, "%s: RDMA connection failed: %s (status %d)",
				 vc->base.peer, rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -ECONNREFUSED;
	}
	if (ev->param.conn.private_data_len >= sizeof(struct verbs_cm_rep)) {
		struct verbs_cm_rep rep;

		memcpy(&rep, ev->param.conn.private_data, sizeof(rep));
		if (rep.magic == VERBS_CM_MAGIC)
			vc->credits = rep.credits;
	}
	rdma_ack_cm_event(ev);
	/* No credits yet is fine: the server sends them once it has some. */
	return 0;
}

int verbs_connect(const struct rdps_conn_params *p, struct rdps_conn **out,
			 char *err, size_t errlen)
{
	struct verbs_conn *vc;
	int ret;

	*out = NULL;
	err[0] = '\0';
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		return -ENOMEM;
	vc->base.ops = rdps_transport_verbs();
	vc->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 60000;
	vc->consistency = p->read_consistency;
	snprintf(vc->base.peer, sizeof(vc->base.peer), "server %u (%s:%u, verbs)", p->server_id,
		 p->host, p->port);
	ret = rdps_transport_tcp()->connect(p, &vc->ctl, err, errlen);
	if (ret)
		goto err_close;
	vc->base.server_id = vc->ctl->server_id;
	vc->base.num_servers = vc->ctl->num_servers;
	vc->base.num_tables = vc->ctl->num_tables;
	vc->base.welcome = vc->ctl->welcome;
	memcpy(vc->base.tables, vc->ctl->tables, sizeof(vc->base.tables));
	for (uint32_t t = 0; t < vc->base.num_tables; t++) {
		const struct rdps_table_desc *d = &vc->base.tables[t];

		if (!d->rkey || !d->remote_addr) {
			snprintf(err, errlen,
				 "%s exposes no RDMA region for table '%s' (is it running with --transport tcp?)",
				 vc->base.peer, d->name);
			ret = -EPROTO;
			goto err_close;
		}
		if (d->stride > VERBS_BOUNCE || (size_t)d->dim * 4 + 8 + 16 > VERBS_MSG_SIZE) {
			snprintf(err, errlen, "%s: table '%s' rows of dim %u are too wide for verbs",
				 vc->base.peer, d->name, d->dim);
			ret = -EMSGSIZE;
			goto err_close;
		}
	}
	if (p->observer) {
		/* Admin connections only need the control channel. */
		*out = &vc->base;
		return 0;
	}
	ret = qp_connect(vc, p, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "%s: RDMA set-up failed: %s", vc->base.peer,
				 rdps_strerror(ret));
		goto err_close;
	}
	*out = &vc->base;
	return 0;

err_close:
	verbs_close(&vc->base);
	return ret;
}

