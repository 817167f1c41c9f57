// SPDX-License-Identifier: MIT
/*
 * ofi backend, client side: one connection to one server, on its client's
 * endpoint (ofi_group.c; ofi.h has the design).
 *
 * One-sided pulls: FI_RMA reads of the server's registered shards into the
 * connection's registered bounce buffer used as a ring (consecutive ids
 * coalesced into one READ, posted back to back with FI_MORE), as the verbs
 * client does; then each row's checksum is checked (validated mode) and
 * the row copied out. READs complete in any order: each ring entry is
 * marked done by its own completion, and the ring is harvested in order as
 * far as the entries are done, so its bounce space is freed in order. A
 * torn row (read while the server updated it) does not stop the harvest:
 * it is queued and read again by a READ of its own in the same ring; one
 * that stays torn OFI_REREAD_FALLBACK times is asked for two-sided (the
 * server reads it under its lock). A row of a dropped table (the server
 * retired its region: RDPS_ROW_RETIRED) fails that pull, not the
 * connection.
 *
 * Two-sided pulls (the provider or device has no READ, or emulates it):
 * the ids go to the server in credited requests of as many rows as one
 * answer holds, up to OFI_PULL_WINDOW in flight; each answer is tagged
 * with its request's tag and lands in the answer slot posted for it.
 *
 * Pushes: messages of whole rows (as many as fit the smaller of this side's
 * and the server's message size), gathered from the caller's rows into
 * registered push buffers, each sent while a credit is held. A push buffer
 * is free again when its own send completes.
 *
 * Flush: a message saying how many push messages came before it; the
 * server acknowledges it once it handled that many (in whatever order they
 * arrived), with the number it refused. call_send posts it and call_recv
 * waits, so a client flushes all its servers at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

/* A pull fails (its table was dropped, the server refused it): the others
 * and the connection go on; pull_wait returns the first such error. */
static void pull_fail(struct ofi_conn *oc, struct ofi_pull *pl, int err, const char *why)
{
	if (pl->err)
		return;
	pl->err = err;
	snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: %s", oc->base.peer, why);
}

/* ---------------------------------------------------------------------- */
/* What the group hands over                                              */

void ofi_conn_read_done(struct ofi_conn *oc, uint64_t v)
{
	/* v: the sequence number's low 40 bits. */
	uint64_t seq = oc->rd_tail - ((oc->rd_tail - v) & ((1ull << 40) - 1));
	struct ofi_read *rd = &oc->reads[seq % OFI_READ_RING];

	if (seq < oc->rd_head || seq >= oc->rd_tail || rd->seq != seq || rd->done) {
		ofi_conn_fail(oc, -EPROTO, "%s", "completion of a READ not in flight");
		return;
	}
	rd->done = true;
	oc->events++;
}

void ofi_conn_send_done(struct ofi_conn *oc, uint32_t s)
{
	if (s >= oc->nslots || !oc->slot_busy[s]) {
		ofi_conn_fail(oc, -EPROTO, "%s", "completion of a send not in flight");
		return;
	}
	oc->slot_busy[s] = false;
	oc->slots_busy--;
	oc->events++;
}

int ofi_conn_server_msg(struct ofi_conn *oc, const struct ofi_srv_hdr *h)
{
	oc->events++;
	oc->credits += h->credits;
	switch (h->kind) {
	case OFI_S_CREDIT:
		return 0;
	case OFI_S_FLUSH_ACK:
		if (h->tag > oc->flushes)
			return ofi_conn_fail(oc, -EPROTO, "%s",
					     "an acknowledgement of a flush never sent");
		if (h->tag > oc->flush_acked)
			oc->flush_acked = h->tag;
		oc->flush_failed += h->count;
		return 0;
	default:
		return ofi_conn_fail(oc, -EPROTO, "%s", "a message of an unknown kind");
	}
}

int ofi_conn_answer(struct ofi_conn *oc, const struct ofi_answer *a, const char *buf,
		    size_t len)
{
	struct ofi_pull *pl = &oc->pend[a->pull];
	const char *payload = buf + sizeof(struct ofi_srv_hdr);
	struct ofi_srv_hdr h;
	size_t plen;
	uint32_t dim;

	if (len < sizeof(h) || a->pull >= oc->npend)
		return ofi_conn_fail(oc, -EPROTO, "%s", "an answer to no pull request of ours");
	memcpy(&h, buf, sizeof(h));
	oc->events++;
	plen = len - sizeof(h);
	dim = oc->base.tables[pl->table].dim;
	if (h.kind != OFI_S_ROWS || h.tag != a->tag)
		return ofi_conn_fail(oc, -EPROTO, "%s", "an answer to no pull request of ours");
	oc->credits += h.credits;
	if (h.status < 0) {
		char why[RDPS_WIRE_ERRMSG_MAX + 32];

		snprintf(why, sizeof(why), "pull refused: %.*s", (int)(plen < RDPS_WIRE_ERRMSG_MAX
								       ? plen : RDPS_WIRE_ERRMSG_MAX),
			 payload);
		pull_fail(oc, pl, h.status, plen ? why : rdps_strerror(h.status));
		return 0;
	}
	if (h.count != a->nrows || plen != (size_t)h.count * dim * 4)
		return ofi_conn_fail(oc, -EPROTO, "%s", "an answer of the wrong size to a pull request");
	memcpy(pl->out + (size_t)a->row * dim, payload, plen);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Sends: push buffers and credits                                        */

static bool have_credit_and_slot(struct ofi_conn *oc)
{
	return oc->credits > 0 && oc->slots_busy < oc->nslots;
}

static bool can_send(struct ofi_conn *oc)
{
	return have_credit_and_slot(oc) && ofi_tx_room(oc);
}

/* Takes a credit and a free push buffer; returns its index. The caller
 * checked have_credit_and_slot(). */
static uint32_t slot_take(struct ofi_conn *oc)
{
	uint32_t s = oc->slot_next;

	while (oc->slot_busy[s])
		s = (s + 1) % oc->nslots;
	oc->slot_busy[s] = true;
	oc->slots_busy++;
	oc->slot_next = (s + 1) % oc->nslots;
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
			      .context = OFI_CCTX(OFI_OP_SEND, oc->index & 0xffffu, s) };
	struct ofi_post_wait pw = { 0 };
	int ret;

	while ((ret = ofi_posted(oc, fi_sendmsg(oc->g->e.ep, &msg, flags), &pw,
				 "posting a send failed: %s")) > 0)
		flags &= ~FI_MORE;
	if (!ret) {
		oc->tx_out++;
		oc->g->tx_out++;
	}
	return ret;
}

static void hdr_init(struct ofi_conn *oc, struct ofi_msg_hdr *h, uint32_t type, uint32_t len)
{
	*h = (struct ofi_msg_hdr){ .type = type, .len = len, .session = oc->session,
				   .gen = oc->gen, .cookie = oc->cookie };
}

/* ---------------------------------------------------------------------- */
/* Two-sided requests: whole pulls, or torn rows                          */

/* Rows one request asks for, at most: its answer fits the server's slot
 * and the group's answer slots, its ids our message. */
static uint32_t rows_per_request(const struct ofi_conn *oc, uint32_t dim)
{
	size_t room = oc->srv_msg_size < oc->g->ans_size ? oc->srv_msg_size : oc->g->ans_size;
	size_t by_rows = (room - sizeof(struct ofi_srv_hdr)) / ((size_t)dim * 4);
	size_t by_ids = (oc->msg_size - sizeof(struct ofi_msg_hdr) - sizeof(struct rdps_wire_rows)) / 8;

	return (uint32_t)(by_rows < by_ids ? by_rows : by_ids);
}

static bool can_request(struct ofi_conn *oc)
{
	return oc->nreqs < OFI_PULL_WINDOW && oc->g->ans_busy < OFI_ANSWER_SLOTS && can_send(oc);
}

/* Asks the server for rows [row, row + m) of pull p: 0, or -EAGAIN (no
 * room now), or -errno (the connection broke). */
static int request_rows(struct ofi_conn *oc, uint32_t p, uint32_t row, uint32_t m)
{
	struct ofi_pull *pl = &oc->pend[p];
	struct rdps_wire_rows rows = { .table = pl->table, .n = m };
	struct ofi_msg_hdr h;
	uint64_t tag;
	uint32_t s;
	char *b;
	int ret;

	if (!can_request(oc))
		return -EAGAIN;
	/* The answer's receive first: it may come before our send completes. */
	ret = ofi_answer_post(oc, p, row, m, &tag);
	if (ret == -EAGAIN)
		return ret;
	if (ret < 0)
		return ofi_conn_fail(oc, -EIO, "posting a receive for rows failed: %s",
				     ofi_strerror(ret));
	s = slot_take(oc);
	b = slot_buf(oc, s);
	hdr_init(oc, &h, RDPS_REQ_PULL, (uint32_t)(sizeof(rows) + (size_t)m * 8));
	h.tag = tag;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), &rows, sizeof(rows));
	memcpy(b + sizeof(h) + sizeof(rows), pl->ids + row, (size_t)m * 8);
	return post_send(oc, s, sizeof(h) + h.len, 0);
}

static bool rows_to_post(const struct ofi_conn *oc)
{
	return oc->pcur < oc->npend;
}

static int issue_requests(struct ofi_conn *oc)
{
	while (rows_to_post(oc)) {
		struct ofi_pull *pl = &oc->pend[oc->pcur];
		uint32_t m;
		int ret;

		if (pl->next == pl->n) {
			oc->pcur++;
			continue;
		}
		m = rows_per_request(oc, oc->base.tables[pl->table].dim);
		if (m > pl->n - pl->next)
			m = pl->n - pl->next;
		if (pl->err) {
			pl->next = pl->n; /* failed: its other rows are not asked for */
			continue;
		}
		ret = request_rows(oc, oc->pcur, pl->next, m);
		if (ret == -EAGAIN)
			return 0;
		if (ret)
			return ret;
		pl->next += m;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* One-sided pulls                                                        */

static int post_read(struct ofi_conn *oc, void *buf, size_t len, uint64_t raddr, uint64_t key,
		     uint64_t seq, uint64_t flags)
{
	void *desc = ofi_desc(oc->bounce_mr);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = raddr, .len = len, .key = key };
	struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				  .addr = oc->srv, .rma_iov = &rma, .rma_iov_count = 1,
				  .context = OFI_CCTX(OFI_OP_READ, oc->index & 0xffffu, seq) };
	struct ofi_post_wait pw = { 0 };
	int ret;

	while ((ret = ofi_posted(oc, fi_readmsg(oc->g->e.ep, &msg, flags), &pw,
				 "posting an RMA READ failed: %s")) > 0)
		flags &= ~FI_MORE; /* what came before goes out now */
	if (!ret) {
		oc->tx_out++;
		oc->g->tx_out++;
	}
	return ret;
}

/* Room in the ring and the bounce buffer for a READ of len bytes: its
 * bounce position, or UINT64_MAX. */
static uint64_t bounce_take(struct ofi_conn *oc, uint64_t len)
{
	uint64_t pos = oc->b_tail;

	/* Rows of a READ are contiguous: skip the ring's tail if short. */
	if (pos % oc->bounce_size + len > oc->bounce_size)
		pos += oc->bounce_size - pos % oc->bounce_size;
	if (pos + len - oc->b_head > oc->bounce_size)
		return UINT64_MAX;
	return pos;
}

struct read_run {
	uint64_t raddr, key;
	uint32_t len;
};

/* A ring entry for rows [row, row + nrows) of pull p at bounce pos. */
static void ring_add(struct ofi_conn *oc, struct read_run *run, uint32_t p, uint32_t row,
		     uint32_t nrows, uint64_t pos, uint16_t tries)
{
	const struct ofi_pull *pl = &oc->pend[p];
	const struct rdps_table_desc *t = &oc->base.tables[pl->table];

	oc->reads[oc->rd_tail % OFI_READ_RING] = (struct ofi_read){
		.seq = oc->rd_tail, .bend = pos + (uint64_t)nrows * t->stride, .pull = p,
		.row = row, .nrows = nrows, .boff = (uint32_t)(pos % oc->bounce_size),
		.tries = tries };
	run->raddr = t->remote_addr + (pl->ids[row] - t->lo) * t->stride;
	run->key = t->rkey;
	run->len = (uint32_t)(nrows * t->stride);
	oc->rd_tail++;
	oc->b_tail = pos + (uint64_t)nrows * t->stride;
}

/*
 * Posts READs as far as the provider's queue, the read ring and the bounce
 * buffer have room, back to back (every READ but the last with FI_MORE:
 * the provider may ring its doorbell once): first the torn rows waiting
 * for a re-read (those torn too often are asked for two-sided), then the
 * pending pulls' rows.
 */
static int issue_reads(struct ofi_conn *oc)
{
	struct read_run run[OFI_READS_PER_POST];
	uint32_t nrd = 0, max;

	if (oc->rd_head == oc->rd_tail)
		oc->b_head = oc->b_tail = 0; /* empty: start at the buffer's start */
	max = oc->g->tx_out >= oc->g->e.tx_size ? 0 : (uint32_t)(oc->g->e.tx_size - oc->g->tx_out);
	if (max > OFI_READS_PER_POST)
		max = OFI_READS_PER_POST;
	if (max > OFI_READ_RING - (oc->rd_tail - oc->rd_head))
		max = (uint32_t)(OFI_READ_RING - (oc->rd_tail - oc->rd_head));
	while (nrd < max && oc->rq_head != oc->rq_tail) {
		struct ofi_reread *q = &oc->rq[oc->rq_head % OFI_REREAD_QUEUE];
		const struct ofi_pull *pl = &oc->pend[q->pull];
		uint64_t pos;

		if (pl->err) {
			oc->rq_head++; /* its pull failed already */
			continue;
		}
		if (q->tries >= OFI_REREAD_FALLBACK) {
			/* Torn again and again (a row updated all the time):
			 * the server reads it under its lock. */
			int ret = request_rows(oc, q->pull, q->row, 1);

			if (ret == -EAGAIN)
				break;
			if (ret)
				return ret;
			oc->fallbacks++;
			oc->rq_head++;
			continue;
		}
		pos = bounce_take(oc, oc->base.tables[pl->table].stride);
		if (pos == UINT64_MAX)
			break;
		ring_add(oc, &run[nrd++], q->pull, q->row, 1, pos, q->tries);
		oc->rq_head++;
	}
	while (nrd < max && rows_to_post(oc)) {
		struct ofi_pull *pl = &oc->pend[oc->pcur];
		uint64_t stride = oc->base.tables[pl->table].stride, pos;
		uint32_t i = pl->next, nrun = 1, off;

		if (pl->next == pl->n) {
			oc->pcur++;
			continue;
		}
		if (pl->err) {
			pl->next = pl->n; /* failed: its other rows are not read */
			continue;
		}
		pos = bounce_take(oc, stride);
		if (pos == UINT64_MAX)
			break; /* the bounce buffer is full: wait for completions */
		off = (uint32_t)(pos % oc->bounce_size);
		while (i + nrun < pl->n && nrun < OFI_MAX_RUN_ROWS &&
		       pl->ids[i + nrun] == pl->ids[i + nrun - 1] + 1 &&
		       (nrun + 1) * stride <= oc->g->e.max_rma &&
		       off + (nrun + 1) * stride <= oc->bounce_size &&
		       pos + (nrun + 1) * stride - oc->b_head <= oc->bounce_size)
			nrun++;
		ring_add(oc, &run[nrd++], oc->pcur, i, nrun, pos, 0);
		pl->next += nrun;
	}
	for (uint32_t k = 0; k < nrd; k++) {
		uint64_t seq = oc->rd_tail - nrd + k;
		const struct ofi_read *rd = &oc->reads[seq % OFI_READ_RING];
		int ret = post_read(oc, oc->bounce + rd->boff, run[k].len, run[k].raddr, run[k].key,
				    seq, k + 1 < nrd ? FI_MORE : 0);

		if (ret)
			return ret;
	}
	return 0;
}

/* Checks and copies out the rows of the done READs at the ring's head, in
 * order, and frees their bounce space; a torn row is queued to be read
 * again (if the queue is full, the harvest stops at it until the queue
 * drains). */
static void harvest_reads(struct ofi_conn *oc)
{
	for (; oc->rd_head < oc->rd_tail; oc->rd_head++) {
		struct ofi_read *rd = &oc->reads[oc->rd_head % OFI_READ_RING];
		struct ofi_pull *pl = &oc->pend[rd->pull];
		const struct rdps_table_desc *t = &oc->base.tables[pl->table];

		if (!rd->done)
			break;
		for (; rd->checked < rd->nrows; rd->checked++) {
			uint32_t r = rd->row + rd->checked;
			const char *row = oc->bounce + rd->boff + (size_t)rd->checked * t->stride;

			if (pl->err)
				break;
			if (rdps_row_retired(row)) {
				char why[160];

				snprintf(why, sizeof(why), "table '%s' was dropped (its rows are "
					 "retired)", t->name);
				pull_fail(oc, pl, -ENOENT, why);
				break;
			}
			if (oc->consistency == RDPS_READ_VALIDATED &&
			    !rdps_row_valid(row, t->dim, rdps_row_tag(pl->row_key, pl->ids[r]))) {
				if (oc->rq_tail - oc->rq_head == OFI_REREAD_QUEUE)
					return; /* resumed at this row */
				oc->rq[oc->rq_tail++ % OFI_REREAD_QUEUE] =
					(struct ofi_reread){ rd->pull, r, (uint16_t)(rd->tries + 1) };
				oc->base.rereads++;
				continue;
			}
			memcpy(pl->out + (size_t)r * t->dim, row + RDPS_ROW_DATA_OFFSET,
			       (size_t)t->dim * 4);
		}
		oc->b_head = rd->bend;
	}
}

/* Something to do for the pull: a completion or message of this
 * connection came (a READ done, an answer, credits), or there is room to
 * post what waits (the endpoint's queue is shared with the client's other
 * connections). */
static bool pull_can_step(struct ofi_conn *oc)
{
	bool ring_room = oc->rd_tail - oc->rd_head < OFI_READ_RING && ofi_tx_room(oc);

	if (oc->events != oc->wait_events)
		return true;
	if (oc->rq_head != oc->rq_tail) {
		const struct ofi_reread *q = &oc->rq[oc->rq_head % OFI_REREAD_QUEUE];

		return q->tries >= OFI_REREAD_FALLBACK
			       ? can_request(oc)
			       : ring_room &&
					 bounce_take(oc, oc->base.tables[oc->pend[q->pull].table].stride) !=
						 UINT64_MAX;
	}
	if (!rows_to_post(oc))
		return false;
	if (!oc->one_sided)
		return can_request(oc);
	return ring_room &&
	       bounce_take(oc, oc->base.tables[oc->pend[oc->pcur].table].stride) != UINT64_MAX;
}

static bool pull_done(const struct ofi_conn *oc)
{
	return !rows_to_post(oc) && oc->rd_head == oc->rd_tail && oc->rq_head == oc->rq_tail &&
	       !oc->nreqs;
}

static int pull_run(struct ofi_conn *oc)
{
	int ret = 0;

	while (!ret) {
		if (oc->one_sided) {
			harvest_reads(oc);
			if (oc->broken)
				return -EIO;
			ret = issue_reads(oc);
		} else {
			ret = issue_requests(oc);
		}
		if (ret || pull_done(oc))
			break;
		oc->wait_events = oc->events;
		ret = ofi_poll_until(oc, pull_can_step, oc->one_sided
				     ? "RMA READ completions" : "the rows of pull requests");
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Ops                                                                    */

/* Whether the rows of a table fit this connection's messages and buffers:
 * 0, or -ENOENT / -EMSGSIZE with the reason (in err). */
static int table_fits(struct ofi_conn *oc, uint32_t table, char *err, size_t errlen)
{
	const struct rdps_table_desc *d = &oc->base.tables[table];
	bool fits;

	if (!d->dim)
		return -ENOENT;
	fits = sizeof(struct ofi_msg_hdr) + sizeof(struct rdps_wire_rows) + 8 +
		       (size_t)d->dim * 4 <= oc->msg_size &&
	       rows_per_request(oc, d->dim); /* a torn row's fallback, two-sided pulls */
	if (oc->one_sided)
		fits = fits && d->stride <= oc->bounce_size;
	if (fits)
		return 0;
	snprintf(err, errlen, "%s: table '%s' rows of dim %u do not fit the provider's messages "
		 "of %zu bytes (RDPS_OFI_MSG_BYTES raises them)", oc->base.peer, d->name, d->dim,
		 oc->msg_size);
	return -EMSGSIZE;
}

int ofi_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
		  float *out)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (!oc->g)
		return -EPERM; /* an observer: control requests only */
	if (table >= c->num_tables)
		return -ENOENT;
	if (oc->npend == RDPS_ARRAY_SIZE(oc->pend))
		return -EBUSY;
	if ((ret = table_fits(oc, table, c->errmsg, sizeof(c->errmsg))))
		return ret;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] < c->tables[table].lo || ids[i] >= c->tables[table].hi) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: id %llu is outside the server's rows of table '%s'", c->peer,
				 (unsigned long long)ids[i], c->tables[table].name);
			return -ERANGE;
		}
	oc->pend[oc->npend++] = (struct ofi_pull){
		table, n, 0, ids, out, rdps_row_table_key(table, c->tables[table].name), 0 };
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
	ret = pull_run(oc);
	if (!ret && (rows_to_post(oc) || oc->rq_head != oc->rq_tail))
		ret = ofi_conn_fail(oc, -EPROTO, "%s", "pull rows left unposted (a bug)");
	/* A pull that failed on its own (a dropped table, a refusal) says so;
	 * the connection lives on. */
	for (uint32_t i = 0; !ret && i < oc->npend; i++)
		if (oc->pend[i].err)
			ret = oc->pend[i].err;
	oc->npend = oc->pcur = 0;
	if (!oc->broken)
		oc->rq_head = oc->rq_tail = 0;
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
	if (!oc->g)
		return -EPERM; /* an observer: control requests only */
	if (table >= c->num_tables)
		return -ENOENT;
	if (oc->npend)
		return -EBUSY;
	if ((ret = table_fits(oc, table, c->errmsg, sizeof(c->errmsg))))
		return ret;
	dim = c->tables[table].dim;
	per_msg = (uint32_t)((oc->msg_size - sizeof(struct ofi_msg_hdr) -
			      sizeof(struct rdps_wire_rows)) / (8 + (size_t)dim * 4));
	for (uint32_t pos = 0; pos < n;) {
		uint32_t k, msgs = (n - pos + per_msg - 1) / per_msg;

		if (!can_send(oc) &&
		    (ret = ofi_poll_until(oc, can_send, "server credits and a free push buffer")))
			return ret;
		/* As many messages as credits, buffers and queue room allow,
		 * back to back. */
		k = msgs;
		if (k > oc->credits)
			k = oc->credits;
		if (k > oc->nslots - oc->slots_busy)
			k = oc->nslots - oc->slots_busy;
		if (k > oc->g->e.tx_size - oc->g->tx_out)
			k = (uint32_t)(oc->g->e.tx_size - oc->g->tx_out);
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

/* A flush's first half: the message, after every push sent so far. */
static int flush_post(struct ofi_conn *oc)
{
	struct ofi_msg_hdr h;
	uint32_t s;
	int ret;

	if (oc->npend)
		return -EBUSY;
	if (!oc->g)
		return 0; /* an observer pushes nothing */
	/* A flush says how many push messages came before it: the server
	 * acknowledges it once it handled that many, whatever the order. */
	if (!can_send(oc) && (ret = ofi_poll_until(oc, can_send, "server credits for a flush")))
		return ret;
	s = slot_take(oc);
	hdr_init(oc, &h, RDPS_REQ_FLUSH, 0);
	h.tag = ++oc->flushes;
	h.pushes = oc->pushes_sent;
	memcpy(slot_buf(oc, s), &h, sizeof(h));
	return post_send(oc, s, sizeof(h), 0);
}

/* ... and its second: the acknowledgement, and what the server refused. */
static int flush_wait(struct ofi_conn *oc)
{
	int ret;

	if (!oc->g)
		return 0;
	ret = ofi_poll_until(oc, flush_acked, "the flush acknowledgement");
	if (ret)
		return ret;
	if (oc->flush_failed) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server refused %u push message(s) since the last flush (see its log)",
			 oc->flush_failed);
		oc->flush_failed = 0;
		snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: %s", oc->base.peer, why);
		return -EIO;
	}
	return 0;
}

int ofi_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len, void *reply,
	     size_t reply_len, int timeout_ms)
{
	struct ofi_conn *oc = to_ofi_conn(c);
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
	ret = flush_post(oc);
	return ret ? ret : flush_wait(oc);
}

/* The control connection's call in two halves (a sample asked of several
 * servers at once); a flush's too (every server's flush posted before
 * any is waited for). */
int ofi_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms)
{
	struct ofi_conn *oc = to_ofi_conn(c);
	int ret;

	if (oc->broken)
		return -ENOTCONN;
	if (type == RDPS_REQ_FLUSH)
		return flush_post(oc);
	if (!oc->ctl->ops->call_send)
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
	if (type == RDPS_REQ_FLUSH)
		return flush_wait(oc);
	if (!oc->ctl->ops->call_recv)
		return -EINVAL;
	ret = oc->ctl->ops->call_recv(oc->ctl, type, reply, reply_len, timeout_ms);
	c->reply_len = oc->ctl->reply_len;
	if (ret)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", oc->ctl->errmsg);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Set-up                                                                 */

void ofi_close(struct rdps_conn *c)
{
	struct ofi_conn *oc;

	if (!c)
		return;
	oc = to_ofi_conn(c);
	/* The control connection first: the server's session closes, it
	 * sends us nothing more. */
	if (oc->ctl)
		oc->ctl->ops->close(oc->ctl);
	oc->ctl = NULL;
	ofi_group_leave(oc); /* frees oc, now or once its operations end */
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
		int ret;

		if (!oc->base.tables[t].dim)
			continue; /* an empty slot */
		if ((ret = table_fits(oc, t, err, errlen)))
			return ret;
	}
	return 0;
}

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The connection's registered buffers: push buffers and (one-sided) READ
 * targets, a share of the client's budget for all its servers. */
static int conn_buffers(struct ofi_conn *oc, char *err, size_t errlen)
{
	uint32_t servers = oc->ctl->num_servers ? oc->ctl->num_servers : 1;
	int ret;

	oc->nslots = (uint32_t)clamp_size(OFI_SEND_BUDGET / servers, OFI_SEND_SLOTS_MIN,
					  OFI_SEND_SLOTS);
	ret = ofi_alloc_registered(&oc->g->e, (size_t)oc->nslots * oc->msg_size, FI_SEND,
				   &oc->sendbuf, &oc->send_mr, err, errlen, "push buffers");
	if (ret || !oc->one_sided)
		return ret;
	oc->bounce_size = RDPS_ALIGN_UP(clamp_size(OFI_BOUNCE / servers, OFI_BOUNCE_MIN,
						   OFI_BOUNCE), 4096);
	return ofi_alloc_registered(&oc->g->e, oc->bounce_size, FI_READ, &oc->bounce,
				    &oc->bounce_mr, err, errlen, "pull buffer");
}

/* Joins the client's endpoint and binds it to the control connection's
 * session: addresses exchanged, first credits. */
static int ep_bind(struct ofi_conn *oc, const struct rdps_conn_params *p, char *err,
		   size_t errlen)
{
	static int logged; /* the two-sided note, once per process */
	struct ofi_bind_req req = { .magic = OFI_BIND_MAGIC };
	struct ofi_bind_rep rep;
	struct ofi_group *g;
	char node[64];
	size_t rep_len;
	int ret;

	ret = ofi_group_join(oc, p, local_node(oc, node, sizeof(node)), err, errlen);
	if (ret)
		return ret;
	g = oc->g;
	req.addrlen = (uint32_t)g->e.addrlen;
	memcpy(req.addr, g->e.addr, g->e.addrlen);
	snprintf(req.prov, sizeof(req.prov), "%s", g->e.prov);
	req.conn = oc->index;
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
	if (strcmp(rep.prov, g->e.prov)) {
		snprintf(err, errlen, "%s uses libfabric provider %s, this client %s: give both the "
			 "same --ofi-provider", oc->base.peer, rep.prov, g->e.prov);
		return -EPROTONOSUPPORT;
	}
	ret = fi_av_insert(g->e.av, rep.addr, 1, &oc->srv, 0, NULL);
	if (ret != 1) {
		oc->srv = FI_ADDR_NOTAVAIL;
		snprintf(err, errlen, "%s: its endpoint address is not usable here: %s",
			 oc->base.peer, ofi_strerror(ret < 0 ? ret : -FI_EINVAL));
		return ret < 0 ? ret : -EINVAL;
	}
	oc->session = rep.session;
	oc->gen = rep.gen;
	oc->credits = rep.credits;
	oc->cookie = ofi_cookie(p->secret, oc->ctl->session);
	oc->srv_msg_size = rep.msg_size;
	oc->msg_size = g->e.msg_size < rep.msg_size ? g->e.msg_size : rep.msg_size;
	oc->one_sided = g->e.rma && (rep.flags & OFI_BIND_RMA);
	if (!oc->one_sided && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		rdps_info("ofi (%s): pulls are two-sided, served by the servers' CPUs over FI_MSG: %s",
			  g->e.prov, g->e.rma ? "the server exposes no region for RMA reads"
					      : g->e.why_two_sided);
	ret = conn_buffers(oc, err, errlen);
	if (!ret)
		ret = check_tables(oc, err, errlen);
	if (ret)
		return ret;
	rdps_dbg("%s: ofi endpoint bound: provider %s (%s), session %u, %u credits, messages of "
		 "%zu bytes, %s pulls", oc->base.peer, g->e.prov, g->e.dev, oc->session,
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
	oc->srv = FI_ADDR_NOTAVAIL;
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
