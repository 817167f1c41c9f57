// SPDX-License-Identifier: MIT
/*
 * ofi backend, client side: one connection to one server (ofi.h has the
 * design).
 *
 * One-sided pulls: FI_RMA reads of the server's registered shards into a
 * registered bounce buffer used as a ring (consecutive ids coalesced into
 * one READ, posted back to back with FI_MORE), as the verbs client does;
 * then each row's checksum is checked (validated mode: a row read while the
 * server updated it fails, and is read again) and the row copied out. READs
 * complete in any order: each ring entry is marked done by its own
 * completion, and the ring is harvested in order as far as the entries are
 * done, so its bounce space is freed in order.
 *
 * Two-sided pulls (the provider or device has no READ): the ids go to the
 * server in credited requests of as many rows as one answer holds, up to
 * OFI_PULL_WINDOW in flight; each answer names its request.
 *
 * Pushes: messages of whole rows (as many as fit the smaller of this side's
 * and the server's message size), gathered from the caller's rows into
 * registered push buffers, each sent while a credit is held. A push buffer
 * is free again when its own send completes.
 *
 * Flush: a message saying how many push messages came before it; the
 * server acknowledges it once it handled that many (in whatever order they
 * arrived), with the number it refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdps/common.h"
#include "ofi.h"
#include "tcp.h"
#include "wire.h"

static inline struct ofi_conn *to_ofi_conn(struct rdps_conn *c)
{
	return container_of(c, struct ofi_conn, base);
}

bool ofi_conn_one_sided(const struct rdps_conn *c)
{
	return container_of(c, const struct ofi_conn, base)->one_sided;
}

static int oc_fail(struct ofi_conn *oc, int ret, const char *fmt, const char *detail)
{
	char what[400];

	oc->broken = true;
	snprintf(what, sizeof(what), fmt, detail);
	snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: %s", oc->base.peer, what);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Completions                                                            */

static int post_recv(struct ofi_conn *oc, uint32_t i)
{
	ssize_t ret = fi_recv(oc->e.ep, oc->recvbuf + (size_t)i * oc->recv_size, oc->recv_size,
			      ofi_desc(oc->recv_mr), FI_ADDR_UNSPEC, OFI_CTX(OFI_OP_RECV, i));

	return (int)ret;
}

/* Rows of a two-sided pull request arrived. */
static int rows_answer(struct ofi_conn *oc, const struct ofi_srv_hdr *h, const char *payload,
		       size_t plen)
{
	struct ofi_pull_req *rq = &oc->reqs[(h->tag & 0xff) % OFI_PULL_WINDOW];
	struct ofi_pull *pl;
	uint32_t dim;

	if (!rq->active || rq->tag != h->tag)
		return oc_fail(oc, -EPROTO, "%s", "rows for no pull request of ours");
	pl = &oc->pend[rq->pull];
	dim = oc->base.tables[pl->table].dim;
	rq->active = false;
	oc->nreqs--;
	if (h->status < 0) {
		char why[RDPS_WIRE_ERRMSG_MAX];

		snprintf(why, sizeof(why), "%.*s", (int)plen, payload);
		if (!oc->pull_err) {
			oc->pull_err = h->status;
			snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: pull refused: %s",
				 oc->base.peer, why[0] ? why : rdps_strerror(h->status));
		}
		return 0;
	}
	if (h->count != rq->nrows || plen != (size_t)h->count * dim * 4)
		return oc_fail(oc, -EPROTO, "%s", "an answer of the wrong size to a pull request");
	memcpy(pl->out + (size_t)rq->row * dim, payload, plen);
	return 0;
}

/* One message from the server, in receive buffer i. */
static int server_msg(struct ofi_conn *oc, const char *buf, size_t len)
{
	struct ofi_srv_hdr h;

	if (len < sizeof(h))
		return oc_fail(oc, -EPROTO, "%s", "a message shorter than its header");
	memcpy(&h, buf, sizeof(h));
	oc->credits += h.credits;
	switch (h.kind) {
	case OFI_S_CREDIT:
		return 0;
	case OFI_S_FLUSH_ACK:
		if (h.tag > oc->flushes)
			return oc_fail(oc, -EPROTO, "%s", "an acknowledgement of a flush never sent");
		if (h.tag > oc->flush_acked)
			oc->flush_acked = h.tag;
		oc->flush_failed += h.count;
		return 0;
	case OFI_S_ROWS:
		return rows_answer(oc, &h, buf + sizeof(h), len - sizeof(h));
	default:
		return oc_fail(oc, -EPROTO, "%s", "a message of an unknown kind");
	}
}

static int handle_cqe(struct ofi_conn *oc, void *ctx, size_t len)
{
	uint64_t v = OFI_CTX_VAL(ctx);

	switch (OFI_CTX_KIND(ctx)) {
	case OFI_OP_READ: {
		struct ofi_read *rd = &oc->reads[v % OFI_READ_RING];

		if (v < oc->rd_head || v >= oc->rd_tail || rd->seq != v || rd->done)
			return oc_fail(oc, -EPROTO, "%s", "completion of a READ not in flight");
		rd->done = true;
		oc->tx_out--;
		return 0;
	}
	case OFI_OP_REREAD:
		oc->reread_done = true;
		oc->tx_out--;
		return 0;
	case OFI_OP_SEND:
		if (v >= OFI_SEND_SLOTS || !oc->slot_busy[v])
			return oc_fail(oc, -EPROTO, "%s", "completion of a send not in flight");
		oc->slot_busy[v] = false;
		oc->slots_busy--;
		oc->tx_out--;
		return 0;
	case OFI_OP_RECV: {
		int ret;

		if (v >= OFI_CLIENT_RECVS)
			return oc_fail(oc, -EPROTO, "%s", "completion of an unknown receive");
		ret = server_msg(oc, oc->recvbuf + v * oc->recv_size, len);
		if (ret)
			return ret;
		ret = post_recv(oc, (uint32_t)v);
		if (ret)
			return oc_fail(oc, -EIO, "cannot post a receive again: %s", ofi_strerror(ret));
		return 0;
	}
	default:
		return oc_fail(oc, -EPROTO, "%s", "completion of an unknown operation");
	}
}

/* Reads what the CQ holds; returns completions handled or -errno. */
static int poll_cq(struct ofi_conn *oc)
{
	struct fi_cq_msg_entry ev[32];
	ssize_t n = fi_cq_read(oc->e.cq, ev, 32);

	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		char what[320], text[256];
		int kind;

		if (fi_cq_readerr(oc->e.cq, &err, 0) < 0)
			return oc_fail(oc, -EIO, "%s", "reading a failed completion failed");
		kind = OFI_CTX_KIND(err.op_context);
		ofi_cq_errtext(oc->e.cq, &err, text, sizeof(text));
		snprintf(what, sizeof(what), "%s failed: %s",
			 kind == OFI_OP_READ || kind == OFI_OP_REREAD ? "an RMA READ"
			 : kind == OFI_OP_SEND ? "a send" : "a receive", text);
		return oc_fail(oc, -EIO, "%s", what);
	}
	if (n < 0)
		return oc_fail(oc, -EIO, "polling the completion queue failed: %s",
			       ofi_strerror((int)n));
	for (ssize_t i = 0; i < n; i++) {
		int ret = handle_cqe(oc, ev[i].op_context, ev[i].len);

		if (ret)
			return ret;
	}
	return (int)n;
}

/* Polls completions until done(oc) or the timeout; what names the wait. */
static int poll_until(struct ofi_conn *oc, bool (*done)(struct ofi_conn *), const char *what)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)oc->timeout_ms * 1000000ull;
	unsigned idle = 0;

	while (!done(oc)) {
		struct pollfd pfd[2] = { { .fd = rdps_tcp_conn_fd(oc->ctl), .events = POLLIN },
					 { .fd = oc->e.cq_fd, .events = POLLIN } };
		int n = poll_cq(oc), nfds = 1, ms = 0;

		if (n < 0)
			return n;
		if (n) {
			idle = 0;
			continue;
		}
		/* Spin for latency; look at the clock and the control
		 * connection only now and then. */
		if (++idle % 1024)
			continue;
		/* Long idle: sleep on the CQ's descriptor where there is one. */
		if (idle >= 16384 && oc->e.cq_fd >= 0) {
			struct fid *f = &oc->e.cq->fid;

			if (fi_trywait(oc->e.fabric, &f, 1) == FI_SUCCESS) {
				nfds = 2;
				ms = 5;
			}
		}
		/* Outside a control call the server never writes to the
		 * control connection: readable means closed, i.e. dead. */
		if (poll(pfd, nfds, ms) > 0 && pfd[0].revents) {
			char why[200];

			snprintf(why, sizeof(why),
				 "the server closed its control connection (it died?) while waiting for %s",
				 what);
			return oc_fail(oc, -ECONNRESET, "%s", why);
		}
		if (rdps_now_ns() >= deadline) {
			char why[200];

			snprintf(why, sizeof(why), "timed out after %d ms waiting for %s",
				 oc->timeout_ms, what);
			return oc_fail(oc, -ETIMEDOUT, "%s", why);
		}
		if (nfds == 1)
			sched_yield();
	}
	return 0;
}

static bool tx_has_room(struct ofi_conn *oc)
{
	return oc->tx_out < oc->e.tx_size;
}

/* The server died: outside a control call it never writes to the control
 * connection, so readable means closed. */
static int ctl_closed(struct ofi_conn *oc, const char *what)
{
	struct pollfd pfd = { .fd = rdps_tcp_conn_fd(oc->ctl), .events = POLLIN };
	char why[200];

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	snprintf(why, sizeof(why),
		 "the server closed its control connection (it died?) while waiting for %s", what);
	return oc_fail(oc, -ECONNRESET, "%s", why);
}

struct post_wait {
	uint64_t deadline;            /* 0: not waited yet */
	unsigned spins;
};

/*
 * After a post returned r: 0 (taken), 1 (-FI_EAGAIN: the provider's queue
 * is full or, over rxm, the connection is still being made; the CQ was
 * progressed: post again) or -errno (failed, the server died, or the queue
 * stayed full past the timeout).
 */
static int posted(struct ofi_conn *oc, ssize_t r, struct post_wait *pw, const char *what)
{
	int ret;

	if (!r)
		return 0;
	if (r != -FI_EAGAIN)
		return oc_fail(oc, -EIO, what, ofi_strerror((int)r));
	if (!pw->deadline)
		pw->deadline = rdps_now_ns() + (uint64_t)oc->timeout_ms * 1000000ull;
	ret = poll_cq(oc);
	if (ret < 0)
		return ret;
	if (ret || ++pw->spins % 1024)
		return 1;
	if ((ret = ctl_closed(oc, "room in the provider's queue")))
		return ret;
	if (rdps_now_ns() >= pw->deadline)
		return oc_fail(oc, -ETIMEDOUT, what, "the provider's queue stayed full");
	sched_yield();
	return 1;
}

/* ---------------------------------------------------------------------- */
/* One-sided pulls                                                        */

static bool rows_to_post(const struct ofi_conn *oc)
{
	return oc->pcur < oc->npend;
}

static int post_read(struct ofi_conn *oc, void *buf, size_t len, uint64_t raddr, uint64_t key,
		     void *ctx, uint64_t flags)
{
	void *desc = ofi_desc(oc->bounce_mr);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = raddr, .len = len, .key = key };
	struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				  .addr = oc->srv, .rma_iov = &rma, .rma_iov_count = 1,
				  .context = ctx };
	struct post_wait pw = { 0 };
	int ret;

	while ((ret = posted(oc, fi_readmsg(oc->e.ep, &msg, flags), &pw,
			     "posting an RMA READ failed: %s")) > 0)
		flags &= ~FI_MORE; /* what came before goes out now */
	if (!ret)
		oc->tx_out++;
	return ret;
}

/*
 * Posts READs for pending pulls as far as the provider's queue, the read
 * ring and the bounce buffer have room, back to back: every READ but the
 * last with FI_MORE (the provider may ring its doorbell once).
 */
static int issue_reads(struct ofi_conn *oc)
{
	struct { uint64_t raddr, key; uint32_t len; } run[OFI_READS_PER_POST];
	uint32_t nrd = 0, max = (uint32_t)(oc->e.tx_size - oc->tx_out);

	if (oc->tx_out >= oc->e.tx_size)
		return 0;
	if (oc->rd_head == oc->rd_tail)
		oc->b_head = oc->b_tail = 0; /* empty: start at the buffer's start */
	if (max > OFI_READS_PER_POST)
		max = OFI_READS_PER_POST;
	if (max > OFI_READ_RING - (oc->rd_tail - oc->rd_head))
		max = (uint32_t)(OFI_READ_RING - (oc->rd_tail - oc->rd_head));
	while (nrd < max && rows_to_post(oc)) {
		struct ofi_pull *pl = &oc->pend[oc->pcur];
		const struct rdps_table_desc *t = &oc->base.tables[pl->table];
		uint64_t stride = t->stride, pos = oc->b_tail;
		uint32_t i = pl->next, nrun = 1, off;

		if (pl->next == pl->n) {
			oc->pcur++;
			continue;
		}
		/* Rows of a READ are contiguous: skip the ring's tail if short. */
		if (pos % OFI_BOUNCE + stride > OFI_BOUNCE)
			pos += OFI_BOUNCE - pos % OFI_BOUNCE;
		if (pos + stride - oc->b_head > OFI_BOUNCE)
			break; /* the bounce buffer is full: wait for completions */
		off = (uint32_t)(pos % OFI_BOUNCE);
		while (i + nrun < pl->n && nrun < OFI_MAX_RUN_ROWS &&
		       pl->ids[i + nrun] == pl->ids[i + nrun - 1] + 1 &&
		       (nrun + 1) * stride <= oc->e.max_rma &&
		       off + (nrun + 1) * stride <= OFI_BOUNCE &&
		       pos + (nrun + 1) * stride - oc->b_head <= OFI_BOUNCE)
			nrun++;
		oc->reads[oc->rd_tail % OFI_READ_RING] = (struct ofi_read){
			oc->rd_tail, pos + nrun * stride, oc->pcur, i, nrun, off, false };
		run[nrd].raddr = t->remote_addr + (pl->ids[i] - t->lo) * stride;
		run[nrd].key = t->rkey;
		run[nrd].len = (uint32_t)(nrun * stride);
		oc->rd_tail++;
		oc->b_tail = pos + nrun * stride;
		pl->next += nrun;
		nrd++;
	}
	for (uint32_t k = 0; k < nrd; k++) {
		uint64_t seq = oc->rd_tail - nrd + k;
		const struct ofi_read *rd = &oc->reads[seq % OFI_READ_RING];
		int ret = post_read(oc, oc->bounce + rd->boff, run[k].len, run[k].raddr, run[k].key,
				    OFI_CTX(OFI_OP_READ, seq), k + 1 < nrd ? FI_MORE : 0);

		if (ret)
			return ret;
	}
	return 0;
}

static bool reread_done(struct ofi_conn *oc)
{
	return oc->reread_done;
}

/* Reads one row again, synchronously, into the bounce buffer at boff (its
 * READ's space, not yet freed). */
static int reread_row(struct ofi_conn *oc, const struct rdps_table_desc *t, uint64_t id,
		      uint32_t boff)
{
	int ret;

	if (!tx_has_room(oc) && (ret = poll_until(oc, tx_has_room, "room for a re-read")))
		return ret;
	oc->reread_done = false;
	ret = post_read(oc, oc->bounce + boff, t->stride, t->remote_addr + (id - t->lo) * t->stride,
			t->rkey, OFI_CTX(OFI_OP_REREAD, 0), 0);
	if (ret)
		return ret;
	return poll_until(oc, reread_done, "a re-read row");
}

/* Validates and copies out the rows of the done READs at the ring's head,
 * in order, and frees their bounce space. */
static int harvest_reads(struct ofi_conn *oc)
{
	for (; oc->rd_head < oc->rd_tail; oc->rd_head++) {
		const struct ofi_read *rd = &oc->reads[oc->rd_head % OFI_READ_RING];
		struct ofi_pull *pl = &oc->pend[rd->pull];
		const struct rdps_table_desc *t = &oc->base.tables[pl->table];

		if (!rd->done)
			break;
		for (uint32_t k = 0; k < rd->nrows; k++) {
			uint32_t boff = rd->boff + k * t->stride;
			const char *row = oc->bounce + boff;
			uint64_t tag = rdps_row_tag(pl->row_key, pl->ids[rd->row + k]);
			uint32_t tries = 0;

			while (oc->consistency == RDPS_READ_VALIDATED &&
			       !rdps_row_valid(row, t->dim, tag)) {
				int ret;

				if (++tries > OFI_MAX_REREADS)
					return oc_fail(oc, -EAGAIN,
						       "a row stayed torn after %s re-reads", "10000");
				oc->base.rereads++;
				ret = reread_row(oc, t, pl->ids[rd->row + k], boff);
				if (ret)
					return ret;
			}
			memcpy(pl->out + (size_t)(rd->row + k) * t->dim, row + RDPS_ROW_DATA_OFFSET,
			       (size_t)t->dim * 4);
		}
		oc->b_head = rd->bend;
	}
	return 0;
}

static bool head_read_done(struct ofi_conn *oc)
{
	return oc->reads[oc->rd_head % OFI_READ_RING].done;
}

static int pull_wait_one_sided(struct ofi_conn *oc)
{
	int ret = 0;

	while (!ret) {
		ret = harvest_reads(oc);
		if (!ret && rows_to_post(oc)) {
			/* Nothing of ours in flight, and no room: pushes hold it. */
			if (oc->rd_head == oc->rd_tail && !tx_has_room(oc))
				ret = poll_until(oc, tx_has_room, "room in the send queue");
			if (!ret)
				ret = issue_reads(oc);
		}
		if (ret || oc->rd_head == oc->rd_tail)
			break;
		ret = poll_until(oc, head_read_done, "RMA READ completions");
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Sends: push buffers and credits                                        */

static bool have_credit_and_slot(struct ofi_conn *oc)
{
	return oc->credits > 0 && oc->slots_busy < OFI_SEND_SLOTS;
}

static bool can_send(struct ofi_conn *oc)
{
	return have_credit_and_slot(oc) && tx_has_room(oc);
}

/* Takes a credit and a free push buffer; returns its index. The caller
 * checked have_credit_and_slot(). */
static uint32_t slot_take(struct ofi_conn *oc)
{
	uint32_t s = oc->slot_next;

	while (oc->slot_busy[s])
		s = (s + 1) % OFI_SEND_SLOTS;
	oc->slot_busy[s] = true;
	oc->slots_busy++;
	oc->slot_next = (s + 1) % OFI_SEND_SLOTS;
	oc->credits--;
	return s;
}

static char *slot_buf(struct ofi_conn *oc, uint32_t s)
{
	return oc->sendbuf + (size_t)s * oc->msg_size;
}

static int post_send(struct ofi_conn *oc, uint32_t s, size_t len, uint64_t flags)
{
	void *desc = ofi_desc(oc->send_mr);
	struct iovec iov = { .iov_base = slot_buf(oc, s), .iov_len = len };
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = oc->srv,
			      .context = OFI_CTX(OFI_OP_SEND, s) };
	struct post_wait pw = { 0 };
	int ret;

	while ((ret = posted(oc, fi_sendmsg(oc->e.ep, &msg, flags), &pw,
			     "posting a send failed: %s")) > 0)
		flags &= ~FI_MORE;
	if (!ret)
		oc->tx_out++;
	return ret;
}

static void hdr_init(struct ofi_conn *oc, struct ofi_msg_hdr *h, uint32_t type, uint32_t len)
{
	*h = (struct ofi_msg_hdr){ .type = type, .len = len, .session = oc->session,
				   .gen = oc->gen, .cookie = oc->cookie };
}

/* ---------------------------------------------------------------------- */
/* Two-sided pulls                                                        */

/* Rows one request asks for, at most: its answer fits the server's slot
 * and our receive buffer, its ids our message. */
static uint32_t rows_per_request(const struct ofi_conn *oc, uint32_t dim)
{
	size_t room = oc->srv_msg_size < oc->recv_size ? oc->srv_msg_size : oc->recv_size;
	size_t by_rows = (room - sizeof(struct ofi_srv_hdr)) / ((size_t)dim * 4);
	size_t by_ids = (oc->msg_size - sizeof(struct ofi_msg_hdr) - sizeof(struct rdps_wire_rows)) / 8;

	return (uint32_t)(by_rows < by_ids ? by_rows : by_ids);
}

static bool can_request(struct ofi_conn *oc)
{
	return oc->nreqs < OFI_PULL_WINDOW && can_send(oc);
}

static int issue_requests(struct ofi_conn *oc)
{
	while (rows_to_post(oc) && can_request(oc)) {
		struct ofi_pull *pl = &oc->pend[oc->pcur];
		uint32_t dim = oc->base.tables[pl->table].dim, m, s, i;
		struct ofi_pull_req *rq;
		struct rdps_wire_rows rows;
		struct ofi_msg_hdr h;
		char *p;
		int ret;

		if (pl->next == pl->n) {
			oc->pcur++;
			continue;
		}
		m = rows_per_request(oc, dim);
		if (m > pl->n - pl->next)
			m = pl->n - pl->next;
		/* A free entry (answers come in any order); its index is in
		 * the tag. */
		for (i = 0; oc->reqs[i].active; i++)
			;
		rq = &oc->reqs[i];
		*rq = (struct ofi_pull_req){ (++oc->next_tag << 8) | i, oc->pcur, pl->next, m, true };
		s = slot_take(oc);
		p = slot_buf(oc, s);
		hdr_init(oc, &h, RDPS_REQ_PULL, (uint32_t)(sizeof(rows) + (size_t)m * 8));
		h.tag = rq->tag;
		rows = (struct rdps_wire_rows){ .table = pl->table, .n = m };
		memcpy(p, &h, sizeof(h));
		memcpy(p + sizeof(h), &rows, sizeof(rows));
		memcpy(p + sizeof(h) + sizeof(rows), pl->ids + pl->next, (size_t)m * 8);
		pl->next += m;
		oc->nreqs++;
		ret = post_send(oc, s, sizeof(h) + h.len, 0);
		if (ret)
			return ret;
	}
	return 0;
}

static bool requests_answered(struct ofi_conn *oc)
{
	return !oc->nreqs;
}

static bool can_request_or_answered(struct ofi_conn *oc)
{
	return can_request(oc) || !oc->nreqs;
}

static int pull_wait_two_sided(struct ofi_conn *oc)
{
	int ret = 0;

	while (!ret && rows_to_post(oc)) {
		ret = issue_requests(oc);
		if (!ret && rows_to_post(oc))
			ret = poll_until(oc, can_request_or_answered,
					 "server credits for a pull request, or its answer");
	}
	if (!ret)
		ret = poll_until(oc, requests_answered, "the rows of pull requests");
	if (!ret && oc->pull_err) {
		ret = oc->pull_err;
		oc->pull_err = 0;
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Ops                                                                    */

/* Whether the rows of a table fit this connection's messages and buffers
 * (checked at connect for the tables then, here for any): 0, or -ENOENT /
 * -EMSGSIZE with the reason. */
static int table_fits(struct ofi_conn *oc, uint32_t table)
{
	const struct rdps_table_desc *d = &oc->base.tables[table];
	bool fits;

	if (!d->dim)
		return -ENOENT;
	fits = sizeof(struct ofi_msg_hdr) + sizeof(struct rdps_wire_rows) + 8 +
		       (size_t)d->dim * 4 <= oc->msg_size;
	if (oc->one_sided)
		fits = fits && d->stride <= OFI_BOUNCE;
	else
		fits = fits && rows_per_request(oc, d->dim);
	if (fits)
		return 0;
	snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: table '%s' rows of dim %u do not "
		 "fit the provider's messages of %zu bytes (RDPS_OFI_MSG_BYTES raises them)",
		 oc->base.peer, d->name, d->dim, oc->msg_size);
	return -EMSGSIZE;
}

int ofi_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
		  float *out)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (!oc->e.ep)
		return -EPERM; /* an observer: control requests only */
	if (table >= c->num_tables)
		return -ENOENT;
	if (oc->npend == RDPS_ARRAY_SIZE(oc->pend))
		return -EBUSY;
	if ((ret = table_fits(oc, table)))
		return ret;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] < c->tables[table].lo || ids[i] >= c->tables[table].hi) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: id %llu is outside the server's rows of table '%s'", c->peer,
				 (unsigned long long)ids[i], c->tables[table].name);
			return -ERANGE;
		}
	oc->pend[oc->npend++] = (struct ofi_pull){
		table, n, 0, ids, out, rdps_row_table_key(table, c->tables[table].name) };
	/* Start now, so reads to several servers overlap. */
	return oc->one_sided ? issue_reads(oc) : issue_requests(oc);
}

int ofi_pull_wait(struct rdps_conn *c)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken) {
		oc->npend = oc->pcur = 0;
		return -ENOTCONN;
	}
	ret = oc->one_sided ? pull_wait_one_sided(oc) : pull_wait_two_sided(oc);
	if (!ret && rows_to_post(oc))
		ret = oc_fail(oc, -EPROTO, "%s", "pull rows left unposted (a bug)");
	oc->npend = oc->pcur = 0;
	return ret;
}

/* Gathers one push message: header, rows header, m ids, m gradient rows. */
static size_t build_push(struct ofi_conn *oc, char *buf, uint32_t table, uint32_t dim,
			 const uint64_t *ids, const float *grads, const uint32_t *index,
			 uint32_t m)
{
	size_t row = (size_t)dim * 4;
	struct rdps_wire_rows rows = { .table = table, .n = m };
	struct ofi_msg_hdr h;
	char *p = buf;

	hdr_init(oc, &h, RDPS_REQ_PUSH, (uint32_t)(sizeof(rows) + (size_t)m * (8 + row)));
	h.pushes = ++oc->pushes_sent;
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
	return sizeof(h) + h.len;
}

int ofi_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		    const float *grads, const uint32_t *index, uint32_t n)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	uint32_t dim, per_msg;
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (!oc->e.ep)
		return -EPERM; /* an observer: control requests only */
	if (table >= c->num_tables)
		return -ENOENT;
	if (oc->npend)
		return -EBUSY;
	if ((ret = table_fits(oc, table)))
		return ret;
	dim = c->tables[table].dim;
	per_msg = (uint32_t)((oc->msg_size - sizeof(struct ofi_msg_hdr) -
			      sizeof(struct rdps_wire_rows)) / (8 + (size_t)dim * 4));
	for (uint32_t pos = 0; pos < n;) {
		uint32_t k, msgs = (n - pos + per_msg - 1) / per_msg;

		if (!can_send(oc) &&
		    (ret = poll_until(oc, can_send, "server credits and a free push buffer")))
			return ret;
		/* As many messages as credits, buffers and queue room allow,
		 * back to back. */
		k = msgs;
		if (k > oc->credits)
			k = oc->credits;
		if (k > OFI_SEND_SLOTS - oc->slots_busy)
			k = OFI_SEND_SLOTS - oc->slots_busy;
		if (k > oc->e.tx_size - oc->tx_out)
			k = (uint32_t)(oc->e.tx_size - oc->tx_out);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t m = n - pos < per_msg ? n - pos : per_msg, s = slot_take(oc);
			size_t len = build_push(oc, slot_buf(oc, s), table, dim, ids + pos,
						index ? grads : grads + (size_t)pos * dim,
						index ? index + pos : NULL, m);

			pos += m;
			ret = post_send(oc, s, len, j + 1 < k ? FI_MORE : 0);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int ofi_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const float *grads,
	     uint32_t n)
{
	return ofi_push_gather(c, table, ids, grads, NULL, n);
}

static bool flush_acked(struct ofi_conn *oc)
{
	return oc->flush_acked >= oc->flushes;
}

/* Rows written over the control connection (tables' contents, rare). */
int ofi_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	    uint32_t n)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	oc->ctl->tables[table] = c->tables[table];
	if (table >= oc->ctl->num_tables)
		oc->ctl->num_tables = table + 1;
	ret = oc->ctl->ops->set(oc->ctl, table, ids, rows, n);
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", oc->ctl->errmsg);
	return ret;
}

int ofi_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len, void *reply,
	     size_t reply_len, int timeout_ms)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	struct ofi_msg_hdr h;
	uint32_t s;
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (type != RDPS_REQ_FLUSH) {
		/* Barrier, stats, shutdown, tables, samples: over the control
		 * connection. */
		ret = oc->ctl->ops->call(oc->ctl, type, req, req_len, reply, reply_len, timeout_ms);
		c->reply_len = oc->ctl->reply_len;
		if (ret)
			snprintf(c->errmsg, sizeof(c->errmsg), "%s", oc->ctl->errmsg);
		return ret;
	}
	if (oc->npend)
		return -EBUSY;
	if (!oc->e.ep)
		return 0; /* an observer pushes nothing */
	/* A flush says how many push messages came before it: the server
	 * acknowledges it once it handled that many, whatever the order. */
	if (!can_send(oc) && (ret = poll_until(oc, can_send, "server credits for a flush")))
		return ret;
	s = slot_take(oc);
	hdr_init(oc, &h, RDPS_REQ_FLUSH, 0);
	h.tag = ++oc->flushes;
	h.pushes = oc->pushes_sent;
	memcpy(slot_buf(oc, s), &h, sizeof(h));
	ret = post_send(oc, s, sizeof(h), 0);
	if (!ret)
		ret = poll_until(oc, flush_acked, "the flush acknowledgement");
	if (ret)
		return ret;
	if (oc->flush_failed) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server refused %u push message(s) since the last flush (see its log)",
			 oc->flush_failed);
		oc->flush_failed = 0;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", c->peer, why);
		return -EIO;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Set-up                                                                 */

static void close_mr(struct fid_mr **mr)
{
	if (*mr)
		fi_close(&(*mr)->fid);
	*mr = NULL;
}

void ofi_close(struct rdps_conn *c)
{
	struct ofi_conn *oc;

	if (!c)
		return;
	oc = to_ofi_conn(c);
	/* The endpoint first: nothing refers to the buffers any more. */
	if (oc->e.ep) {
		fi_close(&oc->e.ep->fid);
		oc->e.ep = NULL;
	}
	close_mr(&oc->bounce_mr);
	close_mr(&oc->send_mr);
	close_mr(&oc->recv_mr);
	ofi_ep_close(&oc->e);
	free(oc->bounce);
	free(oc->sendbuf);
	free(oc->recvbuf);
	if (oc->ctl)
		oc->ctl->ops->close(oc->ctl);
	free(oc);
}

/* The local address of the control connection: the interface that routes
 * to the server, for providers that bind to an IP address. */
static const char *local_node(struct ofi_conn *oc, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(rdps_tcp_conn_fd(oc->ctl), (struct sockaddr *)&ss, &sl))
		return NULL;
	if (ss.ss_family == AF_INET)
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)len);
	if (ss.ss_family == AF_INET6)
		return inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, buf,
				 (socklen_t)len);
	return NULL;
}

/* Whether the tables' rows fit this connection's messages and buffers. */
static int check_tables(struct ofi_conn *oc, char *err, size_t errlen)
{
	for (uint32_t t = 0; t < oc->base.num_tables; t++) {
		const struct rdps_table_desc *d = &oc->base.tables[t];
		size_t row = (size_t)d->dim * 4;

		if (!d->dim)
			continue; /* an empty slot */
		bool wide = sizeof(struct ofi_msg_hdr) + sizeof(struct rdps_wire_rows) + 8 + row >
			    oc->msg_size;

		if (oc->one_sided)
			wide = wide || d->stride > OFI_BOUNCE;
		else
			wide = wide || !rows_per_request(oc, d->dim);
		if (wide) {
			snprintf(err, errlen, "%s: table '%s' rows of dim %u do not fit the "
				 "provider's messages of %zu bytes (RDPS_OFI_MSG_BYTES raises them)",
				 oc->base.peer, d->name, d->dim, oc->msg_size);
			return -EMSGSIZE;
		}
	}
	return 0;
}

/* Opens the endpoint and its buffers, and binds it to the control
 * connection's session: addresses exchanged, first credits. */
static int ep_bind(struct ofi_conn *oc, const struct rdps_conn_params *p, char *err,
		   size_t errlen)
{
	static int logged; /* the two-sided note, once per process */
	struct ofi_bind_req req = { .magic = OFI_BIND_MAGIC };
	struct ofi_bind_rep rep;
	char node[64];
	size_t rep_len;
	int ret;

	ret = ofi_ep_open(&oc->e, local_node(oc, node, sizeof(node)), false, err, errlen);
	if (ret)
		return ret;
	req.addrlen = (uint32_t)oc->e.addrlen;
	memcpy(req.addr, oc->e.addr, oc->e.addrlen);
	snprintf(req.prov, sizeof(req.prov), "%s", oc->e.prov);
	ret = rdps_tcp_bind(oc->ctl, &req, sizeof(req), &rep, sizeof(rep), &rep_len);
	if (ret) {
		snprintf(err, errlen, "%s", oc->ctl->errmsg);
		return ret;
	}
	if (rep_len != sizeof(rep) || rep.magic != OFI_BIND_MAGIC || rep.addrlen > OFI_ADDR_MAX ||
	    rep.msg_size < OFI_MSG_MIN) {
		snprintf(err, errlen, "%s: malformed endpoint binding (another rdps version?)",
			 oc->base.peer);
		return -EPROTO;
	}
	rep.prov[sizeof(rep.prov) - 1] = '\0';
	if (strcmp(rep.prov, oc->e.prov)) {
		snprintf(err, errlen, "%s uses libfabric provider %s, this client %s: give both the "
			 "same --ofi-provider", oc->base.peer, rep.prov, oc->e.prov);
		return -EPROTONOSUPPORT;
	}
	ret = fi_av_insert(oc->e.av, rep.addr, 1, &oc->srv, 0, NULL);
	if (ret != 1) {
		snprintf(err, errlen, "%s: its endpoint address is not usable here: %s",
			 oc->base.peer, ofi_strerror(ret < 0 ? ret : -FI_EINVAL));
		return ret < 0 ? ret : -EINVAL;
	}
	oc->session = rep.session;
	oc->gen = rep.gen;
	oc->credits = rep.credits;
	oc->cookie = ofi_cookie(p->secret, oc->ctl->session);
	oc->srv_msg_size = rep.msg_size;
	oc->msg_size = oc->e.msg_size < rep.msg_size ? oc->e.msg_size : rep.msg_size;
	oc->one_sided = oc->e.rma && (rep.flags & OFI_BIND_RMA);
	if (!oc->one_sided && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		rdps_info("ofi (%s): pulls are two-sided, served by the servers' CPUs over FI_MSG: %s",
			  oc->e.prov, oc->e.rma ? "the server exposes no region for RMA reads"
						: oc->e.why_two_sided);
	/* Credits and acknowledgements, or (two-sided) rows too. A message
	 * the server sent before these are posted waits in the provider as
	 * unexpected (RDM endpoints buffer them). */
	oc->recv_size = oc->one_sided ? OFI_CTL_RECV_SIZE : oc->msg_size;
	ret = check_tables(oc, err, errlen);
	if (ret)
		return ret;
	ret = ofi_alloc_registered(&oc->e, (size_t)OFI_CLIENT_RECVS * oc->recv_size, FI_RECV,
				   &oc->recvbuf, &oc->recv_mr, err, errlen, "receive buffers");
	for (uint32_t i = 0; !ret && i < OFI_CLIENT_RECVS; i++)
		if ((ret = post_recv(oc, i)))
			snprintf(err, errlen, "posting a receive failed: %s", ofi_strerror(ret));
	if (ret)
		return ret;
	ret = ofi_alloc_registered(&oc->e, (size_t)OFI_SEND_SLOTS * oc->msg_size, FI_SEND,
				   &oc->sendbuf, &oc->send_mr, err, errlen, "push buffers");
	if (!ret && oc->one_sided)
		ret = ofi_alloc_registered(&oc->e, OFI_BOUNCE, FI_READ, &oc->bounce,
					   &oc->bounce_mr, err, errlen, "pull buffer");
	if (ret)
		return ret;
	rdps_dbg("%s: ofi endpoint bound: provider %s (%s), session %u, %u credits, messages of "
		 "%zu bytes, %s pulls", oc->base.peer, oc->e.prov, oc->e.dev, oc->session,
		 oc->credits, oc->msg_size, oc->one_sided ? "one-sided" : "two-sided");
	return 0;
}

int ofi_connect(const struct rdps_conn_params *p, struct rdps_conn **out, char *err,
		size_t errlen)
{
	struct ofi_conn *oc;
	int ret;

	*out = NULL;
	err[0] = '\0';
	oc = calloc(1, sizeof(*oc));
	if (!oc)
		return -ENOMEM;
	oc->base.ops = rdps_transport_ofi();
	oc->e.cq_fd = -1;
	oc->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 60000;
	oc->consistency = p->read_consistency;
	snprintf(oc->base.peer, sizeof(oc->base.peer), "server %u (%s:%u, ofi)", p->server_id,
		 p->host, p->port);
	ret = rdps_transport_tcp()->connect(p, &oc->ctl, err, errlen);
	if (ret)
		goto err_close;
	oc->base.server_id = oc->ctl->server_id;
	oc->base.num_servers = oc->ctl->num_servers;
	oc->base.num_tables = oc->ctl->num_tables;
	oc->base.welcome = oc->ctl->welcome;
	oc->base.session = oc->ctl->session;
	memcpy(oc->base.tables, oc->ctl->tables, sizeof(oc->base.tables));
	if (p->observer) {
		/* Admin connections only need the control channel. */
		*out = &oc->base;
		return 0;
	}
	ret = ep_bind(oc, p, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "%s: libfabric set-up failed: %s", oc->base.peer,
				 ofi_strerror(ret));
		goto err_close;
	}
	*out = &oc->base;
	return 0;

err_close:
	ofi_close(&oc->base);
	return ret;
}

/* The control connection's call in two halves (a sample asked of several
 * servers at once). */
int ofi_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (type == RDPS_REQ_FLUSH || !oc->ctl->ops->call_send)
		return -EINVAL;
	ret = oc->ctl->ops->call_send(oc->ctl, type, req, req_len, timeout_ms);
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", oc->ctl->errmsg);
	return ret;
}

int ofi_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (type == RDPS_REQ_FLUSH || !oc->ctl->ops->call_recv)
		return -EINVAL;
	ret = oc->ctl->ops->call_recv(oc->ctl, type, reply, reply_len, timeout_ms);
	c->reply_len = oc->ctl->reply_len;
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", oc->ctl->errmsg);
	return ret;
}
