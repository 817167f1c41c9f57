// SPDX-License-Identifier: MIT
/*
 * verbs backend, client side: one connection to one server.
 *
 * Pulls are one-sided: the welcome of the handshake carries each region's
 * address and rkey; a client reads rows with RDMA READs into a registered
 * bounce buffer used as a ring (consecutive ids coalesced into one READ,
 * posted in lists), then checks each row's checksum (validated mode: a row
 * the NIC placed while the server updated it, in whatever order, fails it
 * and is read again) and copies it out. The send queue stays full across a
 * pull: as completions come, the READs they cover are checked and copied,
 * their bounce space freed and more READs posted. The server's CPU does
 * nothing for a pull.
 *
 * Pushes are SENDs into the server's shared receive slots. A client sends
 * only while it holds a credit; the server grants them (in the connection
 * reply, then as SEND_WITH_IMM) and never more than it has slots posted.
 * Gradients are gathered from the caller's rows straight into a registered
 * push buffer (one copy), and the SENDs of a push go out as post lists.
 * A flush is a SEND processed in order after the client's pushes; its
 * acknowledgement (an immediate) says how many push messages the server
 * refused since the last flush.
 *
 * Selective signaling (verbs.h VERBS_SIGNAL_EVERY): a work request is
 * signaled if its sequence number is a multiple of signal_every, if it is
 * the last of a READ list, or if it is a flush or a re-read; every other
 * one is known done when a later signaled one completes.
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

static bool seq_done(struct verbs_conn *vc)
{
	return vc->sq_done >= vc->wait_seq;
}

/* Entries of the send queue free now (posted and not known done). */
static inline uint32_t sq_room(const struct verbs_conn *vc)
{
	return vc->sq_depth - (uint32_t)(vc->sq_posted - vc->sq_done);
}

static bool sq_has_room(struct verbs_conn *vc)
{
	return sq_room(vc) > 0;
}

/* Whether the work request that will get sequence number seq is signaled. */
static inline unsigned sq_signal(const struct verbs_conn *vc, uint64_t seq)
{
	return seq % vc->signal_every == 0 ? IBV_SEND_SIGNALED : 0;
}

/* Posts a list of nwr work requests, chained, with one doorbell. */
static int sq_post(struct verbs_conn *vc, struct ibv_send_wr *wrs, uint32_t nwr, const char *what)
{
	struct ibv_send_wr *bad;
	int ret;

	wrs[nwr - 1].next = NULL;
	ret = ibv_post_send(vc->id->qp, wrs, &bad);
	if (ret)
		return vc_fail(vc, -ret, what, strerror(ret));
	vc->sq_posted += nwr;
	return 0;
}

static bool rows_to_post(const struct verbs_conn *vc)
{
	return vc->pcur < vc->npend;
}

/*
 * Posts READs for pending pulls as far as the send queue, the read ring
 * and the bounce buffer have room, in one list whose last request is
 * signaled (so the oldest READ in flight always has a signaled one at or
 * after it to wait for).
 */
static int issue_reads(struct verbs_conn *vc)
{
	uint32_t nwr = 0, max = sq_room(vc);

	if (vc->rd_head == vc->rd_tail)
		vc->b_head = vc->b_tail = 0; /* empty: start at the buffer's start */
	if (max > VERBS_READS_PER_POST)
		max = VERBS_READS_PER_POST;
	if (max > VERBS_READ_RING - (vc->rd_tail - vc->rd_head))
		max = (uint32_t)(VERBS_READ_RING - (vc->rd_tail - vc->rd_head));
	while (nwr < max && rows_to_post(vc)) {
		struct verbs_pull *pl = &vc->pend[vc->pcur];
		const struct rdps_table_desc *t = &vc->base.tables[pl->table];
		uint64_t stride = t->stride, pos = vc->b_tail, seq = vc->sq_posted + nwr + 1;
		uint32_t i = pl->next, run = 1, off;

		if (pl->next == pl->n) {
			vc->pcur++;
			continue;
		}
		/* Rows of a READ are contiguous: skip the ring's tail if short. */
		if (pos % VERBS_BOUNCE + stride > VERBS_BOUNCE)
			pos += VERBS_BOUNCE - pos % VERBS_BOUNCE;
		if (pos + stride - vc->b_head > VERBS_BOUNCE)
			break; /* the bounce buffer is full: wait for completions */
		off = (uint32_t)(pos % VERBS_BOUNCE);
		while (i + run < pl->n && run < VERBS_MAX_RUN_ROWS &&
		       pl->ids[i + run] == pl->ids[i + run - 1] + 1 &&
		       off + (run + 1) * stride <= VERBS_BOUNCE &&
		       pos + (run + 1) * stride - vc->b_head <= VERBS_BOUNCE)
			run++;
		vc->sges[nwr] = (struct ibv_sge){
			.addr = (uintptr_t)(vc->bounce + off),
			.length = (uint32_t)(run * stride),
			.lkey = vc->bounce_mr->lkey,
		};
		vc->wrs[nwr] = (struct ibv_send_wr){
			.wr_id = WR_ID(WR_READ, seq),
			.next = &vc->wrs[nwr + 1],
			.sg_list = &vc->sges[nwr],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_READ,
			.send_flags = sq_signal(vc, seq),
			.wr.rdma.remote_addr = t->remote_addr + (pl->ids[i] - t->lo) * stride,
			.wr.rdma.rkey = t->rkey,
		};
		vc->reads[vc->rd_tail % VERBS_READ_RING] =
			(struct verbs_read){ seq, pos + run * stride, vc->pcur, i, run, off };
		vc->rd_tail++;
		vc->b_tail = pos + run * stride;
		pl->next += run;
		nwr++;
	}
	if (!nwr)
		return 0;
	vc->wrs[nwr - 1].send_flags = IBV_SEND_SIGNALED;
	return sq_post(vc, vc->wrs, nwr, "posting RDMA READs failed: %s");
}

/* Reads one row again, synchronously, into the bounce buffer at boff (its
 * READ's space, not yet freed). */
static int reread_row(struct verbs_conn *vc, const struct rdps_table_desc *t,
		      uint64_t id, uint32_t boff)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(vc->bounce + boff), .length = t->stride,
			       .lkey = vc->bounce_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED };
	int ret;

	if (!sq_has_room(vc) &&
	    (ret = poll_until(vc, sq_has_room, "room in the send queue for a re-read")))
		return ret;
	wr.wr_id = WR_ID(WR_READ, vc->sq_posted + 1);
	wr.wr.rdma.remote_addr = t->remote_addr + (id - t->lo) * t->stride;
	wr.wr.rdma.rkey = t->rkey;
	if ((ret = sq_post(vc, &wr, 1, "posting an RDMA READ failed: %s")))
		return ret;
	vc->wait_seq = vc->sq_posted;
	return poll_until(vc, seq_done, "a re-read row");
}

/* Validates and copies out the rows of the READs known done, oldest first,
 * and frees their bounce space. */
static int harvest_reads(struct verbs_conn *vc)
{
	for (; vc->rd_head < vc->rd_tail; vc->rd_head++) {
		const struct verbs_read *rd = &vc->reads[vc->rd_head % VERBS_READ_RING];
		struct verbs_pull *pl = &vc->pend[rd->pull];
		const struct rdps_table_desc *t = &vc->base.tables[pl->table];

		if (rd->seq > vc->sq_done)
			break;
		for (uint32_t k = 0; k < rd->nrows; k++) {
			uint32_t boff = rd->boff + k * t->stride;
			const char *row = vc->bounce + boff;
			uint64_t tag = rdps_row_tag(pl->row_key, pl->ids[rd->row + k]);
			uint32_t tries = 0;

			while (vc->consistency == RDPS_READ_VALIDATED &&
			       !rdps_row_valid(row, t->dim, tag)) {
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
		vc->b_head = rd->bend;
	}
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
	vc->pend[vc->npend++] = (struct verbs_pull){
		table, n, 0, ids, out, rdps_row_table_key(table, c->tables[table].name) };
	/* Start now, so reads to several servers overlap. */
	return issue_reads(vc);
}

int verbs_pull_wait(struct rdps_conn *c)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret = 0;

	while (!ret) {
		ret = harvest_reads(vc);
		if (!ret && rows_to_post(vc)) {
			/* Nothing in flight of ours: wait for room (a push's
			 * unsignaled SENDs may hold it; a signaled one follows). */
			if (vc->rd_head == vc->rd_tail && !sq_has_room(vc))
				ret = poll_until(vc, sq_has_room, "room in the send queue");
			if (!ret)
				ret = issue_reads(vc);
		}
		if (ret || vc->rd_head == vc->rd_tail)
			break;
		/* The oldest READ in flight: a signaled one follows it. */
		vc->wait_seq = vc->reads[vc->rd_head % VERBS_READ_RING].seq;
		ret = poll_until(vc, seq_done, "RDMA READ completions");
	}
	if (!ret && rows_to_post(vc))
		ret = vc_fail(vc, -EPROTO, "%s", "pull rows left unposted (a bug)");
	vc->npend = vc->pcur = 0;
	return ret;
}

static bool have_credit_and_slot(struct verbs_conn *vc)
{
	return vc->credits > 0 &&
	       vc->slot_seq[vc->sends % VERBS_SEND_SLOTS] <= vc->sq_done;
}

static bool can_send(struct verbs_conn *vc)
{
	return have_credit_and_slot(vc) && sq_has_room(vc);
}

/*
 * Takes a credit and the next push buffer for a SEND of len bytes, the
 * nwr-th of a list being built, flags or'ed into its send flags; returns
 * the buffer to fill. The caller checked can_send() for it.
 */
static char *send_prepare(struct verbs_conn *vc, uint32_t nwr, uint32_t len, unsigned flags)
{
	uint32_t slot = vc->sends % VERBS_SEND_SLOTS;
	uint64_t seq = vc->sq_posted + nwr + 1;
	char *buf = vc->sendbuf + (size_t)slot * VERBS_MSG_SIZE;

	vc->ssges[nwr] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = len,
					   .lkey = vc->send_mr->lkey };
	vc->swrs[nwr] = (struct ibv_send_wr){
		.wr_id = WR_ID(WR_SEND, seq), .next = &vc->swrs[nwr + 1],
		.sg_list = &vc->ssges[nwr], .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = sq_signal(vc, seq) | flags |
			      (len <= vc->max_inline ? IBV_SEND_INLINE : 0) };
	vc->slot_seq[slot] = seq;
	vc->sends++;
	vc->credits--;
	return buf;
}

/* Gathers one push message: header, rows header, m ids, m gradient rows. */
static uint32_t build_push(char *buf, uint32_t table, uint32_t dim, const uint64_t *ids,
			   const float *grads, const uint32_t *index, uint32_t m)
{
	size_t row = (size_t)dim * 4;
	struct rdps_wire_rows rows = { .table = table, .n = m };
	struct verbs_msg_hdr h = { .type = RDPS_REQ_PUSH,
				   .len = (uint32_t)(sizeof(rows) + (size_t)m * (8 + row)) };
	char *p = buf;

	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, &rows, sizeof(rows));
	p += sizeof(rows);
	memcpy(p, ids, (size_t)m * 8);
	p += (size_t)m * 8;
	if (!index) {
		memcpy(p, grads, m * row);
	} else {
		for (uint32_t i = 0; i < m; i++, p += row)
			memcpy(p, grads + (size_t)index[i] * dim, row);
	}
	return (uint32_t)sizeof(h) + h.len;
}

int verbs_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		      const float *grads, const uint32_t *index, uint32_t n)
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
		uint32_t nwr = 0;
		int ret;

		if (!can_send(vc) &&
		    (ret = poll_until(vc, can_send, "server credits and a free push buffer")))
			return ret;
		/* As many messages as credits, buffers and queue room allow,
		 * in one list. */
		while (pos < n && nwr < VERBS_SEND_SLOTS && nwr < sq_room(vc) &&
		       have_credit_and_slot(vc)) {
			uint32_t m = n - pos < per_msg ? n - pos : per_msg;
			uint32_t len = sizeof(struct verbs_msg_hdr) + sizeof(struct rdps_wire_rows) +
				       m * (8 + dim * 4);
			char *buf = send_prepare(vc, nwr, len, 0);

			build_push(buf, table, dim, ids + pos, index ? grads : grads + (size_t)pos * dim,
				   index ? index + pos : NULL, m);
			pos += m;
			nwr++;
		}
		if ((ret = sq_post(vc, vc->swrs, nwr, "posting SENDs failed: %s")))
			return ret;
	}
	return 0;
}

int verbs_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		      const float *grads, uint32_t n)
{
	return verbs_push_gather(c, table, ids, grads, NULL, n);
}

static bool flush_acked(struct verbs_conn *vc)
{
	return vc->flush_acks >= vc->flush_want;
}

/* Rows written over the control connection (rare: tables' contents, not
 * training's traffic). */
int verbs_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	      uint32_t n)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret;

	if (vc->broken)
		return -ENOTCONN;
	vc->ctl->tables[table] = c->tables[table];
	if (table >= vc->ctl->num_tables)
		vc->ctl->num_tables = table + 1;
	ret = vc->ctl->ops->set(vc->ctl, table, ids, rows, n);
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", vc->ctl->errmsg);
	return ret;
}

/* A flush's first half: a SEND behind the pushes on the same queue pair;
 * signaled, so the pushes' queue entries are known free after it. */
static int flush_post(struct verbs_conn *vc)
{
	struct verbs_msg_hdr h = { .type = RDPS_REQ_FLUSH, .len = 0 };
	int ret;

	if (!vc->id || !vc->id->qp)
		return 0; /* an observer pushes nothing */
	if (!can_send(vc) &&
	    (ret = poll_until(vc, can_send, "server credits for a flush")))
		return ret;
	memcpy(send_prepare(vc, 0, sizeof(h), IBV_SEND_SIGNALED), &h, sizeof(h));
	if ((ret = sq_post(vc, vc->swrs, 1, "posting a SEND failed: %s")))
		return ret;
	vc->flush_want++;
	return 0;
}

/* ... and its second: the acknowledgement, and what the server refused. */
static int flush_wait(struct verbs_conn *vc)
{
	int ret;

	if (!vc->id || !vc->id->qp)
		return 0;
	ret = poll_until(vc, flush_acked, "the flush acknowledgement");
	if (ret)
		return ret;
	if (vc->flush_failed) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server refused %u push message(s) since the last flush (see its log)",
			 vc->flush_failed);
		vc->flush_failed = 0;
		snprintf(vc->base.errmsg, sizeof(vc->base.errmsg), "%s: %s", vc->base.peer, why);
		return -EIO;
	}
	return 0;
}

int verbs_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		      void *reply, size_t reply_len, int timeout_ms)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret;

	if (vc->broken)
		return -ENOTCONN;
	if (type != RDPS_REQ_FLUSH) {
		/* Barrier, stats, shutdown, tables, samples: over the control
		 * connection. */
		ret = vc->ctl->ops->call(vc->ctl, type, req, req_len, reply, reply_len, timeout_ms);
		c->reply_len = vc->ctl->reply_len;
		if (ret)
			snprintf(c->errmsg, sizeof(c->errmsg), "%s", vc->ctl->errmsg);
		return ret;
	}
	ret = flush_post(vc);
	return ret ? ret : flush_wait(vc);
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
	vc->sq_depth = VERBS_SQ_DEPTH;
	vc->signal_every = VERBS_SIGNAL_EVERY;
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

		if (!d->dim)
			continue; /* an empty slot */
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

/* The control connection's call in two halves (a sample asked of several
 * servers at once). */
int verbs_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret;

	if (vc->broken)
		return -ENOTCONN;
	if (type == RDPS_REQ_FLUSH)
		return flush_post(vc);
	if (!vc->ctl->ops->call_send)
		return -EINVAL;
	ret = vc->ctl->ops->call_send(vc->ctl, type, req, req_len, timeout_ms);
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", vc->ctl->errmsg);
	return ret;
}

int verbs_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret;

	if (vc->broken)
		return -ENOTCONN;
	if (type == RDPS_REQ_FLUSH)
		return flush_wait(vc);
	if (!vc->ctl->ops->call_recv)
		return -EINVAL;
	ret = vc->ctl->ops->call_recv(vc->ctl, type, reply, reply_len, timeout_ms);
	c->reply_len = vc->ctl->reply_len;
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", vc->ctl->errmsg);
	return ret;
}
