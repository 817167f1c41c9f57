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
 * the last of a READ list, or if it is a flush; every other one is known
 * done when a later signaled one completes.
 *
 * A torn row does not stop the harvest: it is queued and read again by a
 * READ of its own in the same ring; one that stays torn
 * VERBS_REREAD_FALLBACK times is read two-sided over the control
 * connection (the server reads it under its lock). A row of a dropped
 * table (the server retired its region: RDPS_ROW_RETIRED) fails that pull,
 * not the connection.
 *
 * The connections of one client share their protection domain and
 * completion queue (verbs_group.c), and their READ targets and push buffers
 * are each connection's share of the client's budget (VERBS_BOUNCE,
 * VERBS_SEND_BUDGET): what a client pins no longer grows by 9 MiB a server.
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
#include "spin.h"
#include "tcp.h"
#include "verbs.h"
#include "wire.h"

static inline struct verbs_conn *to_verbs_conn(struct rdps_conn *c)
{
	return container_of(c, struct verbs_conn, base);
}

#define vc_fail verbs_conn_fail

static int post_recv(struct verbs_conn *vc, uint64_t seq)
{
	struct ibv_recv_wr wr = { .wr_id = WR_CID(WR_RECV, vc->index, seq) }, *bad;

	return -ibv_post_recv(vc->id->qp, &wr, &bad);
}

/* A pull fails (its table was dropped, the server refused a row): the
 * others and the connection go on; pull_wait returns the first error. */
static void pull_fail(struct verbs_conn *vc, struct verbs_pull *pl, int err, const char *why)
{
	if (pl->err)
		return;
	pl->err = err;
	snprintf(vc->base.errmsg, sizeof(vc->base.errmsg), "%s: %s", vc->base.peer, why);
}

/* Handles one completion of the connection (the group hands it over).
 * Returns 0 or -errno (connection broken). */
int verbs_conn_wc(struct verbs_conn *vc, const struct ibv_wc *wc)
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
	case WR_SEND: {
		/* The sequence number's low 40 bits: it is at most sq_posted. */
		uint64_t seq = vc->sq_posted - ((vc->sq_posted - WR_CSEQ(wc->wr_id)) &
						((1ull << 40) - 1));

		/* RC completes in order: everything up to this one is done. */
		if (seq > vc->sq_done)
			vc->sq_done = seq;
		break;
	}
	case WR_RECV: {
		uint32_t imm = ntohl(wc->imm_data);

		if (!(wc->wc_flags & IBV_WC_WITH_IMM))
			return vc_fail(vc, -EPROTO, "%s", "message without immediate data");
		vc->credits += IMM_CREDITS(imm);
		if (IMM_KIND(imm) == IMM_FLUSH_ACK) {
			vc->flush_acks++;
			vc->flush_failed += IMM_FAILED(imm);
		}
		if (post_recv(vc, WR_CSEQ(wc->wr_id)))
			return vc_fail(vc, -EIO, "%s", "cannot re-post a receive");
		break;
	}
	default:
		return vc_fail(vc, -EPROTO, "%s", "completion of an unknown work request");
	}
	return 0;
}

static int ctl_closed_fail(struct verbs_conn *vc, const char *what)
{
	char why[160];

	snprintf(why, sizeof(why),
		 "the server closed its control connection (it died?) while waiting for %s", what);
	return vc_fail(vc, -ECONNRESET, "%s", why);
}

/* Polls completions until done(vc) or the timeout; what names the wait.
 * Spins while completions come and for a while after the last (latency),
 * then sleeps on the CQ's completion channel: threads that spin for good
 * starve whatever shares their cores, servers included. */
static int poll_until(struct verbs_conn *vc, bool (*done)(struct verbs_conn *),
		      const char *what)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)vc->timeout_ms * 1000000ull;
	uint64_t spin = rdps_client_spin_ns(), idle_since = 0;
	unsigned idle = 0;

	while (!done(vc)) {
		int n = verbs_group_poll(vc), ctl;
		uint64_t now;
		bool readable;

		if (n < 0)
			return n;
		if (n) {
			idle = 0;
			continue;
		}
		/* Look at the clock only now and then. */
		if (++idle % 64)
			continue;
		now = rdps_now_ns();
		if (idle == 64)
			idle_since = now;
		ctl = rdps_tcp_conn_fd(vc->ctl);
		if (now >= deadline) {
			char why[160];

			snprintf(why, sizeof(why), "timed out after %d ms waiting for %s",
				 vc->timeout_ms, what);
			return vc_fail(vc, -ETIMEDOUT, "%s", why);
		}
		if (now - idle_since >= spin) {
			uint64_t left_ms = (deadline - now) / 1000000ull + 1;
			int ms = left_ms < RDPS_CLIENT_SLEEP_MS ? (int)left_ms : RDPS_CLIENT_SLEEP_MS;

			/* Outside a control call the server never writes to the
			 * control connection: readable means closed, i.e. dead. */
			n = verbs_group_sleep(vc, ctl, ms, &readable);
			if (n < 0)
				return n;
			if (readable)
				return ctl_closed_fail(vc, what);
			if (n)
				idle = 0;
		} else if (idle % 4096 == 0) {
			struct pollfd pfd = { .fd = ctl, .events = POLLIN };

			if (poll(&pfd, 1, 0) > 0)
				return ctl_closed_fail(vc, what);
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

/* Room in the bounce ring for a READ of len bytes: its position, or
 * UINT64_MAX. */
static uint64_t bounce_take(struct verbs_conn *vc, uint64_t len)
{
	uint64_t pos = vc->b_tail;

	/* Rows of a READ are contiguous: skip the ring's tail if short. */
	if (pos % vc->bounce_size + len > vc->bounce_size)
		pos += vc->bounce_size - pos % vc->bounce_size;
	if (pos + len - vc->b_head > vc->bounce_size)
		return UINT64_MAX;
	return pos;
}

/* Work request nwr of the list: a READ of rows [row, row + nrows) of pull p
 * into the bounce ring at pos, and its ring entry. */
static void read_prepare(struct verbs_conn *vc, uint32_t nwr, uint32_t p, uint32_t row,
			 uint32_t nrows, uint64_t pos, uint16_t tries)
{
	const struct verbs_pull *pl = &vc->pend[p];
	const struct rdps_table_desc *t = &vc->base.tables[pl->table];
	uint64_t seq = vc->sq_posted + nwr + 1;
	uint32_t off = (uint32_t)(pos % vc->bounce_size);

	vc->sges[nwr] = (struct ibv_sge){
		.addr = (uintptr_t)(vc->bounce + off),
		.length = (uint32_t)(nrows * t->stride),
		.lkey = vc->bounce_mr->lkey,
	};
	vc->wrs[nwr] = (struct ibv_send_wr){
		.wr_id = WR_CID(WR_READ, vc->index, seq),
		.next = &vc->wrs[nwr + 1],
		.sg_list = &vc->sges[nwr],
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = sq_signal(vc, seq),
		.wr.rdma.remote_addr = t->remote_addr + (pl->ids[row] - t->lo) * t->stride,
		.wr.rdma.rkey = (uint32_t)t->rkey,
	};
	vc->reads[vc->rd_tail % VERBS_READ_RING] = (struct verbs_read){
		.seq = seq, .bend = pos + (uint64_t)nrows * t->stride, .pull = p, .row = row,
		.nrows = nrows, .boff = off, .tries = tries };
	vc->rd_tail++;
	vc->b_tail = pos + (uint64_t)nrows * t->stride;
}

/*
 * Posts READs as far as the send queue, the read ring and the bounce buffer
 * have room, in one list whose last request is signaled (so the oldest READ
 * in flight always has a signaled one at or after it to wait for): first
 * the torn rows waiting to be read again, then the pending pulls' rows.
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
	while (nwr < max && vc->rq_head != vc->rq_tail) {
		const struct verbs_reread *q = &vc->rq[vc->rq_head % VERBS_REREAD_QUEUE];
		const struct verbs_pull *pl = &vc->pend[q->pull];
		uint64_t pos;

		if (pl->err) {
			vc->rq_head++; /* its pull failed already */
			continue;
		}
		pos = bounce_take(vc, vc->base.tables[pl->table].stride);
		if (pos == UINT64_MAX)
			break;
		read_prepare(vc, nwr++, q->pull, q->row, 1, pos, q->tries);
		vc->rq_head++;
	}
	while (nwr < max && rows_to_post(vc)) {
		struct verbs_pull *pl = &vc->pend[vc->pcur];
		uint64_t stride = vc->base.tables[pl->table].stride, pos;
		uint32_t i = pl->next, run = 1, off;

		if (pl->next == pl->n) {
			vc->pcur++;
			continue;
		}
		if (pl->err) {
			pl->next = pl->n; /* failed: its other rows are not read */
			continue;
		}
		pos = bounce_take(vc, stride);
		if (pos == UINT64_MAX)
			break; /* the bounce buffer is full: wait for completions */
		off = (uint32_t)(pos % vc->bounce_size);
		while (i + run < pl->n && run < VERBS_MAX_RUN_ROWS &&
		       pl->ids[i + run] == pl->ids[i + run - 1] + 1 &&
		       off + (run + 1) * stride <= vc->bounce_size &&
		       pos + (run + 1) * stride - vc->b_head <= vc->bounce_size)
			run++;
		read_prepare(vc, nwr++, vc->pcur, i, run, pos, 0);
		pl->next += run;
	}
	if (!nwr)
		return 0;
	vc->wrs[nwr - 1].send_flags = IBV_SEND_SIGNALED;
	return sq_post(vc, vc->wrs, nwr, "posting RDMA READs failed: %s");
}

/* A row torn VERBS_REREAD_FALLBACK times (a row updated all the time):
 * read two-sided over the control connection, where the server reads it
 * under its lock. A refusal (the table is gone) fails the pull. */
static int read_two_sided(struct verbs_conn *vc, struct verbs_pull *pl, uint32_t r)
{
	struct rdps_conn *ctl = vc->ctl;
	int ret;

	vc->fallbacks++;
	ctl->tables[pl->table] = vc->base.tables[pl->table];
	if (pl->table >= ctl->num_tables)
		ctl->num_tables = pl->table + 1;
	ret = ctl->ops->pull_post(ctl, pl->table, pl->ids + r, 1,
				  pl->out + (size_t)r * vc->base.tables[pl->table].dim);
	if (!ret)
		ret = ctl->ops->pull_wait(ctl);
	if (!ret)
		return 0;
	if (ret == -ECONNRESET || ret == -ETIMEDOUT || ret == -ENOTCONN || ret == -EPIPE)
		return vc_fail(vc, ret, "%s", ctl->errmsg);
	pull_fail(vc, pl, ret, ctl->errmsg);
	return 0;
}

/* Checks and copies out the rows of the READs known done, oldest first,
 * and frees their bounce space; a torn row is queued to be read again (if
 * the queue is full, the harvest stops at it until the queue drains). */
static int harvest_reads(struct verbs_conn *vc)
{
	for (; vc->rd_head < vc->rd_tail; vc->rd_head++) {
		struct verbs_read *rd = &vc->reads[vc->rd_head % VERBS_READ_RING];
		struct verbs_pull *pl = &vc->pend[rd->pull];
		const struct rdps_table_desc *t = &vc->base.tables[pl->table];

		if (rd->seq > vc->sq_done)
			break;
		for (; rd->checked < rd->nrows; rd->checked++) {
			uint32_t r = rd->row + rd->checked;
			const char *row = vc->bounce + rd->boff + (size_t)rd->checked * t->stride;

			if (pl->err)
				break;
			if (rdps_row_retired(row)) {
				char why[160];

				snprintf(why, sizeof(why), "table '%s' was dropped (its rows are "
					 "retired)", t->name);
				pull_fail(vc, pl, -ENOENT, why);
				break;
			}
			if (vc->consistency == RDPS_READ_VALIDATED &&
			    !rdps_row_valid(row, t->dim, rdps_row_tag(pl->row_key, pl->ids[r]))) {
				int ret;

				vc->base.rereads++;
				if (rd->tries + 1 >= VERBS_REREAD_FALLBACK) {
					if ((ret = read_two_sided(vc, pl, r)))
						return ret;
					continue;
				}
				if (vc->rq_tail - vc->rq_head == VERBS_REREAD_QUEUE)
					return 0; /* resumed at this row */
				vc->rq[vc->rq_tail++ % VERBS_REREAD_QUEUE] =
					(struct verbs_reread){ rd->pull, r, (uint16_t)(rd->tries + 1) };
				continue;
			}
			memcpy(pl->out + (size_t)r * t->dim, row + RDPS_ROW_DATA_OFFSET,
			       (size_t)t->dim * 4);
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
	if (!vc->g)
		return -EPERM; /* an observer: control requests only */
	if (table >= c->num_tables || !c->tables[table].dim)
		return -ENOENT;
	if (vc->npend == RDPS_ARRAY_SIZE(vc->pend))
		return -EBUSY;
	if (c->tables[table].stride > vc->bounce_size) {
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: table '%s' rows of dim %u are too wide "
			 "for verbs", c->peer, c->tables[table].name, c->tables[table].dim);
		return -EMSGSIZE;
	}
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] < c->tables[table].lo || ids[i] >= c->tables[table].hi) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: id %llu is outside the server's rows of table '%s'", c->peer,
				 (unsigned long long)ids[i], c->tables[table].name);
			return -ERANGE;
		}
	vc->pend[vc->npend++] = (struct verbs_pull){
		table, n, 0, ids, out, rdps_row_table_key(table, c->tables[table].name), 0 };
	/* Start now, so reads to several servers overlap. */
	return issue_reads(vc);
}

int verbs_pull_wait(struct rdps_conn *c)
{
	struct verbs_conn *vc = to_verbs_conn(c);
	int ret = 0;

	while (!ret) {
		ret = harvest_reads(vc);
		if (!ret && (rows_to_post(vc) || vc->rq_head != vc->rq_tail)) {
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
	if (!ret && (rows_to_post(vc) || vc->rq_head != vc->rq_tail))
		ret = vc_fail(vc, -EPROTO, "%s", "pull rows left unposted (a bug)");
	/* A pull that failed on its own (a dropped table) says so; the
	 * connection lives on. */
	for (uint32_t i = 0; !ret && i < vc->npend; i++)
		if (vc->pend[i].err)
			ret = vc->pend[i].err;
	vc->npend = vc->pcur = 0;
	vc->rq_head = vc->rq_tail = 0;
	return ret;
}

static bool have_credit_and_slot(struct verbs_conn *vc)
{
	return vc->credits > 0 && vc->slot_seq[vc->sends % vc->nslots] <= vc->sq_done;
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
	uint32_t slot = vc->sends % vc->nslots;
	uint64_t seq = vc->sq_posted + nwr + 1;
	char *buf = vc->sendbuf + (size_t)slot * VERBS_MSG_SIZE;

	vc->ssges[nwr] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = len,
					   .lkey = vc->send_mr->lkey };
	vc->swrs[nwr] = (struct ibv_send_wr){
		.wr_id = WR_CID(WR_SEND, vc->index, seq), .next = &vc->swrs[nwr + 1],
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
	if (!vc->g)
		return -EPERM; /* an observer: control requests only */
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
		while (pos < n && nwr < vc->nslots && nwr < sq_room(vc) &&
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

	if (!vc->g)
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

	if (!vc->g)
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
	/* The QP first: after it, no READ lands in the buffers. */
	if (vc->id && vc->id->qp) {
		rdma_disconnect(vc->id);
		rdma_destroy_qp(vc->id);
	}
	verbs_group_leave(vc);
	if (vc->send_mr)
		ibv_dereg_mr(vc->send_mr);
	if (vc->bounce_mr)
		ibv_dereg_mr(vc->bounce_mr);
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

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The connection's registered buffers, its share of the client's budget
 * for all its servers: READ targets and push buffers. */
static int conn_buffers(struct verbs_conn *vc, char *err, size_t errlen)
{
	uint32_t servers = vc->ctl->num_servers ? vc->ctl->num_servers : 1;
	int ret;

	vc->bounce_size = RDPS_ALIGN_UP(clamp_size(VERBS_BOUNCE / servers, VERBS_BOUNCE_MIN,
						   VERBS_BOUNCE), 4096);
	vc->nslots = (uint32_t)clamp_size(VERBS_SEND_BUDGET / servers, VERBS_SEND_SLOTS_MIN,
					  VERBS_SEND_SLOTS);
	/* A push buffer is wanted again after nslots SENDs: one of them
	 * must be signaled. */
	if (vc->signal_every > vc->nslots)
		vc->signal_every = vc->nslots;
	ret = verbs_alloc_registered(vc->g->pd, vc->bounce_size, IBV_ACCESS_LOCAL_WRITE,
				     &vc->bounce, &vc->bounce_mr, err, errlen, "pull buffer");
	if (!ret)
		ret = verbs_alloc_registered(vc->g->pd, (size_t)vc->nslots * VERBS_MSG_SIZE, 0,
					     &vc->sendbuf, &vc->send_mr, err, errlen,
					     "push buffers");
	return ret;
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
		.cap = { .max_recv_wr = VERBS_CLIENT_RECVS, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 256 },
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
	/* The client's PD and CQ on this device (its share of the CQ sizes
	 * the send queue). */
	ret = verbs_group_join(vc, p, err, errlen);
	if (ret)
		return ret;
	qa.cap.max_send_wr = vc->sq_depth;
	qa.send_cq = qa.recv_cq = vc->g->cq;
	if (rdma_create_qp(vc->id, vc->g->pd, &qa)) {
		/* Some devices cannot inline: retry without. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(vc->id, vc->g->pd, &qa)) {
			ret = -errno;
			snprintf(err, errlen, "%s: creating the queue pair failed: %s", vc->base.peer,
				 strerror(-ret));
			return ret;
		}
	}
	vc->qp_num = vc->id->qp->qp_num;
	vc->max_inline = qa.cap.max_inline_data;
	ret = conn_buffers(vc, err, errlen);
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
	verbs_fork_init();
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
		if (d->stride > VERBS_BOUNCE_MIN || (size_t)d->dim * 4 + 8 + 16 > VERBS_MSG_SIZE) {
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
