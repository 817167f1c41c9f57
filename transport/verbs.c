// SPDX-License-Identifier: MIT
/*
 * verbs backend (libibverbs + librdmacm, RC queue pairs).
 *
 * Pulls are one-sided: every shard is registered with IBV_ACCESS_REMOTE_READ
 * only, the welcome of the handshake carries each region's address and
 * rkey, and a client reads rows with RDMA READs into a registered bounce
 * buffer (consecutive ids coalesced into one READ, a batch posted as one
 * list, only the last work request signaled), then checks each row's
 * seqlock versions (validated mode) and copies it out. The server's CPU does
 * nothing for a pull.
 *
 * Pushes are two-sided: SENDs into receive buffers the server keeps posted
 * on one shared receive queue. A client holds credits (one per buffer it
 * may fill); the server returns them with SEND_WITH_IMM as it re-posts the
 * buffers, so a fast client cannot overrun it. A flush is a SEND processed
 * in order after the client's pushes; its acknowledgement (an immediate)
 * says how many push messages the server refused since the last flush.
 *
 * Set-up: the handshake, barriers, stats and shutdown run over a TCP
 * connection (the tcp backend), then rdma_cm connects the QP on the same
 * address and port (rdma_cm's port space is separate from TCP's). Keeping
 * QP set-up in qp_connect()/session_accept() leaves room for providers
 * without rdma_cm (AWS EFA's SRD QPs), whose QP attributes can travel in the
 * same TCP handshake.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "tcp.h"
#include "wire.h"

#define VERBS_MSG_SIZE (64u << 10)     /* one push message / receive buffer */
#define VERBS_SRQ_DEPTH 512            /* server receive buffers (all clients) */
#define VERBS_MAX_CREDITS 64           /* per client */
#define VERBS_CLIENT_RECVS 128         /* credit/ack receives a client keeps posted */
#define VERBS_SQ_DEPTH 512             /* client send queue */
#define VERBS_SEND_SLOTS 16            /* client push buffers */
#define VERBS_BOUNCE (8u << 20)        /* client READ target */
#define VERBS_READS_PER_POST 256       /* work requests per post list */
#define VERBS_SIGNAL_EVERY 64          /* bound on unsignaled READs in a list */
#define VERBS_MAX_RUN_ROWS 1024        /* rows per coalesced READ */
#define VERBS_MAX_REREADS 10000        /* per torn row before giving up */
#define VERBS_INITIATOR_DEPTH 16       /* READs in flight per QP */
#define VERBS_CM_MAGIC 0x56504452u     /* "RDPV" */

/* Immediate data, server -> client. */
#define IMM_KIND(x) ((x) >> 30)
#define IMM_CREDITS(x) (((x) >> 16) & 0x3fffu)
#define IMM_FAILED(x) ((x) & 0xffffu)
#define IMM_MAKE(kind, credits, failed)                                       \
	(((uint32_t)(kind) << 30) | ((uint32_t)(credits) << 16) | ((failed) > 0xffff ? 0xffff : (failed)))
enum { IMM_CREDIT = 1, IMM_FLUSH_ACK = 2 };

/* First bytes of every client -> server message. */
struct verbs_msg_hdr {
	uint32_t type; /* RDPS_REQ_PUSH or RDPS_REQ_FLUSH */
	uint32_t len;  /* bytes after this header */
};

struct verbs_cm_req {
	uint32_t magic;
	uint32_t client_id;
	uint32_t num_clients;
	uint32_t server_id;
	uint64_t session; /* from the welcome of the (authenticated) TCP connection */
};

struct verbs_cm_rep {
	uint32_t magic;
	uint32_t credits;
};

/* wr_id of client work requests: kind in the top byte, sequence below. */
enum { WR_READ = 1, WR_SEND = 2, WR_RECV = 3 };
#define WR_ID(kind, seq) (((uint64_t)(kind) << 56) | ((seq) & ((1ull << 56) - 1)))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_SEQ(id) ((id) & ((1ull << 56) - 1))

static const struct rdps_transport_ops verbs_ops;

static const char *memlock_hint(int err)
{
	if (err == ENOMEM || err == EPERM || err == EAGAIN)
		return " (the memory-lock limit is probably too low: run 'ulimit -l unlimited', "
		       "set LimitMEMLOCK=infinity for a systemd service, or add "
		       "'* - memlock unlimited' to /etc/security/limits.conf)";
	return "";
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* Waits for the next rdma_cm event on ch, up to deadline. */
static int cm_wait(struct rdma_event_channel *ch, uint64_t deadline,
		   struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int ms;

		if (!rdma_get_cm_event(ch, ev))
			return 0;
		if (errno != EAGAIN)
			return -errno;
		ms = rdps_ms_until(deadline);
		if (!ms)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
	}
}

/* Resolves host:port for rdma_cm. */
static int cm_resolve(struct rdma_cm_id *id, struct rdma_event_channel *ch,
		      const char *host, uint16_t port, int timeout_ms,
		      char *err, size_t errlen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	struct rdma_cm_event *ev;
	char portstr[8];
	int ret, step;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res)) {
		snprintf(err, errlen, "cannot resolve '%s'", host);
		return -EHOSTUNREACH;
	}
	ret = rdma_resolve_addr(id, NULL, res->ai_addr, timeout_ms) ? -errno : 0;
	freeaddrinfo(res);
	for (step = 0; !ret && step < 2; step++) {
		enum rdma_cm_event_type want = step ? RDMA_CM_EVENT_ROUTE_RESOLVED
						    : RDMA_CM_EVENT_ADDR_RESOLVED;

		ret = cm_wait(ch, deadline, &ev);
		if (ret)
			break;
		if (ev->event != want) {
			snprintf(err, errlen, "%s:%u: %s (status %d): no RDMA route to this address",
				 host, port, rdma_event_str(ev->event), ev->status);
			ret = -EHOSTUNREACH;
		}
		rdma_ack_cm_event(ev);
		if (!ret && !step)
			ret = rdma_resolve_route(id, timeout_ms) ? -errno : 0;
	}
	if (ret && !err[0])
		snprintf(err, errlen, "%s:%u: resolving the RDMA route: %s", host, port,
			 rdps_strerror(ret));
	return ret;
}

/* ====================================================================== */
/* Client                                                                 */

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
	char what[256];

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
		char what[160];

		snprintf(what, sizeof(what), "%s failed: %s (verbs status %d, vendor error 0x%x)",
			 kind == WR_READ ? "RDMA READ" : kind == WR_SEND ? "SEND" : "receive",
			 ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
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

			while (vc->consistency == RDPS_READ_VALIDATED &&
			       rdps_row_ver_begin(row) != rdps_row_ver_end(row, t->dim)) {
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

static int verbs_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
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

static int verbs_pull_wait(struct rdps_conn *c)
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

static int verbs_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
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

static int verbs_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
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

static void verbs_close(struct rdps_conn *c)
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

static int alloc_registered(struct ibv_pd *pd, size_t len, int access, char **buf,
			    struct ibv_mr **mr, char *err, size_t errlen, const char *what)
{
	int ret = posix_memalign((void **)buf, 4096, len);

	if (ret)
		return -ret;
	memset(*buf, 0, len);
	*mr = ibv_reg_mr(pd, *buf, len, access);
	if (!*mr) {
		ret = errno;
		snprintf(err, errlen, "registering the %s (%zu KiB) failed: %s%s", what,
			 len >> 10, strerror(ret), memlock_hint(ret));
		return -ret;
	}
	return 0;
}

/* Creates the QP and connects it with rdma_cm. */
static int qp_connect(struct verbs_conn *vc, const struct rdps_conn_params *p,
		      char *err, size_t errlen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)vc->timeout_ms * 1000000ull;
	struct verbs_cm_req req = { VERBS_CM_MAGIC, p->client_id, p->num_clients, p->server_id,
				    vc->ctl->session };
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = VERBS_SQ_DEPTH, .max_recv_wr = VERBS_CLIENT_RECVS,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 256 },
	};
	struct rdma_conn_param cp = {
		.private_data = &req, .private_data_len = sizeof(req),
		.initiator_depth = VERBS_INITIATOR_DEPTH, .responder_resources = 0,
		.retry_count = 7, .rnr_retry_count = 7, /* 7: retry receiver-not-ready forever */
	};
	struct rdma_cm_event *ev;
	struct ibv_device_attr da;
	int ret;

	vc->ch = rdma_create_event_channel();
	if (!vc->ch)
		return -errno;
	if ((ret = set_nonblock(vc->ch->fd)))
		return ret;
	if (rdma_create_id(vc->ch, &vc->id, vc, RDMA_PS_TCP))
		return -errno;
	ret = cm_resolve(vc->id, vc->ch, p->host, p->port, vc->timeout_ms, err, errlen);
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
	ret = alloc_registered(vc->pd, VERBS_BOUNCE, IBV_ACCESS_LOCAL_WRITE, &vc->bounce,
			       &vc->bounce_mr, err, errlen, "pull buffer");
	if (!ret)
		ret = alloc_registered(vc->pd, (size_t)VERBS_SEND_SLOTS * VERBS_MSG_SIZE, 0,
				       &vc->sendbuf, &vc->send_mr, err, errlen, "push buffers");
	if (ret)
		return ret;
	for (uint32_t i = 0; i < VERBS_CLIENT_RECVS; i++)
		if ((ret = post_recv(vc, i)))
			return ret;
	if (rdma_connect(vc->id, &cp))
		return -errno;
	ret = cm_wait(vc->ch, deadline, &ev);
	if (ret) {
		snprintf(err, errlen, "%s: no answer to the RDMA connection request within %d ms",
			 vc->base.peer, vc->timeout_ms);
		return ret;
	}
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		snprintf(err, errlen, "%s: RDMA connection failed: %s (status %d)", vc->base.peer,
			 rdma_event_str(ev->event), ev->status);
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
	if (!vc->credits) {
		snprintf(err, errlen, "%s: the server granted no push credits", vc->base.peer);
		return -EPROTO;
	}
	return 0;
}

static int verbs_connect(const struct rdps_conn_params *p, struct rdps_conn **out,
			 char *err, size_t errlen)
{
	struct verbs_conn *vc;
	int ret;

	*out = NULL;
	err[0] = '\0';
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		return -ENOMEM;
	vc->base.ops = &verbs_ops;
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

/* ====================================================================== */
/* Server                                                                 */

struct verbs_session {
	struct rdma_cm_id *id;
	uint32_t qp_num;
	uint32_t client_id, num_clients;
	char peer[64];
	uint32_t owed;            /* receive buffers re-posted, credits to return */
	uint32_t failed;          /* push messages refused since the last flush */
	uint32_t sends;           /* for selective signaling */
	bool established;
	struct verbs_session *next;
};

struct verbs_server {
	struct rdps_tserver base;
	struct rdps_tserver *tcp;      /* handshake, barrier, stats, shutdown */
	struct rdps_listen_params p;
	struct rdps_region regions[RDPS_MAX_TABLES];
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mrs[RDPS_MAX_TABLES];
	char *recv_buf;
	struct ibv_mr *recv_mr;
	struct verbs_session *sessions;
	uint32_t credits;              /* per client */
};

static inline struct verbs_server *to_verbs_server(struct rdps_tserver *s)
{
	return container_of(s, struct verbs_server, base);
}

static int post_srq(struct verbs_server *vs, uint32_t i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(vs->recv_buf + (size_t)i * VERBS_MSG_SIZE),
			       .length = VERBS_MSG_SIZE, .lkey = vs->recv_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return -ibv_post_srq_recv(vs->srq, &wr, &bad);
}

static void session_free(struct verbs_server *vs, struct verbs_session *ss)
{
	for (struct verbs_session **pp = &vs->sessions; *pp; pp = &(*pp)->next)
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	if (ss->id) {
		if (ss->id->qp)
			rdma_destroy_qp(ss->id);
		rdma_destroy_id(ss->id);
	}
	free(ss);
}

/* Sends an immediate to a client (credits, flush acknowledgement). */
static int send_imm(struct verbs_server *vs, struct verbs_session *ss, uint32_t imm)
{
	struct ibv_send_wr wr = { .wr_id = 0, .opcode = IBV_WR_SEND_WITH_IMM,
				  .imm_data = htonl(imm) }, *bad;
	int ret;

	/* Signal now and then so the session's send queue drains. */
	if (++ss->sends % 16 == 0)
		wr.send_flags = IBV_SEND_SIGNALED;
	ret = ibv_post_send(ss->id->qp, &wr, &bad);
	if (ret)
		rdps_warn("server %u: client %s: cannot send to it: %s", vs->p.server_id, ss->peer,
			  strerror(ret));
	return -ret;
}

/* Returns true if the event's id was rejected and must be destroyed once
 * the event is acknowledged. */
static bool session_accept(struct verbs_server *vs, struct rdma_cm_event *ev)
{
	struct verbs_cm_req req;
	struct verbs_cm_rep rep = { VERBS_CM_MAGIC, vs->credits };
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC, .srq = vs->srq, .send_cq = vs->cq, .recv_cq = vs->cq,
		.cap = { .max_send_wr = 64, .max_send_sge = 1 },
	};
	/* In a connect request the remote's values arrive swapped:
	 * responder_resources here is the client's initiator depth, the number
	 * of READs it wants in flight against us. Zero would stall every READ. */
	struct rdma_conn_param cp = { .private_data = &rep, .private_data_len = sizeof(rep),
				      .responder_resources = ev->param.conn.responder_resources,
				      .rnr_retry_count = 7 };
	struct ibv_device_attr da;
	struct verbs_session *ss;
	struct sockaddr *sa = rdma_get_peer_addr(ev->id);
	char host[64] = "?";

	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
	if (ev->param.conn.private_data_len < sizeof(req)) {
		rdps_warn("server %u: RDMA connection from %s without an rdps request; rejected",
			  vs->p.server_id, host);
		rdma_reject(ev->id, NULL, 0);
		return true;
	}
	memcpy(&req, ev->param.conn.private_data, sizeof(req));
	if (req.magic != VERBS_CM_MAGIC || req.server_id != vs->p.server_id ||
	    !req.num_clients || req.client_id >= req.num_clients) {
		rdps_warn("server %u: RDMA connection from %s with a malformed request; rejected",
			  vs->p.server_id, host);
		rdma_reject(ev->id, NULL, 0);
		return true;
	}
	/* A queue pair belongs to a live connection that passed the handshake
	 * (and authentication): its random session token proves it. */
	if (rdps_tcp_session_claim(vs->tcp, req.session, req.client_id, &req.num_clients)) {
		rdps_warn("server %u: RDMA connection from %s (client %u) without a valid session; "
			  "rejected", vs->p.server_id, host, req.client_id);
		if (vs->base.stats)
			vs->base.stats->auth_failures++;
		rdma_reject(ev->id, NULL, 0);
		return true;
	}
	if (!cp.responder_resources)
		cp.responder_resources = VERBS_INITIATOR_DEPTH;
	if (!ibv_query_device(ev->id->verbs, &da) && da.max_qp_rd_atom > 0 &&
	    cp.responder_resources > da.max_qp_rd_atom)
		cp.responder_resources = (uint8_t)da.max_qp_rd_atom;
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		rdma_reject(ev->id, NULL, 0);
		return true;
	}
	ss->client_id = req.client_id;
	ss->num_clients = req.num_clients;
	snprintf(ss->peer, sizeof(ss->peer), "%s (client %u, verbs)", host, req.client_id);
	if (rdma_create_qp(ev->id, vs->pd, &qa)) {
		rdps_warn("server %u: client %s: cannot create a queue pair: %s", vs->p.server_id,
			  ss->peer, strerror(errno));
		rdma_reject(ev->id, NULL, 0);
		free(ss);
		return true;
	}
	ss->id = ev->id;
	ss->qp_num = ev->id->qp->qp_num;
	ev->id->context = ss;
	ss->next = vs->sessions;
	vs->sessions = ss;
	if (rdma_accept(ev->id, &cp)) {
		rdps_warn("server %u: client %s: accept failed: %s", vs->p.server_id, ss->peer,
			  strerror(errno));
		ss->id = NULL; /* destroyed by the caller after the ack */
		rdma_destroy_qp(ev->id);
		ev->id->context = NULL;
		session_free(vs, ss);
		return true;
	}
	return false;
}

static int handle_cm(struct verbs_server *vs)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (!rdma_get_cm_event(vs->ch, &ev)) {
		struct verbs_session *ss = ev->id ? ev->id->context : NULL;

		n++;
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			struct rdma_cm_id *id = ev->id;
			bool rejected = session_accept(vs, ev);

			rdma_ack_cm_event(ev);
			if (rejected)
				rdma_destroy_id(id);
			break;
		}
		case RDMA_CM_EVENT_ESTABLISHED:
			if (ss)
				ss->established = true;
			rdma_ack_cm_event(ev);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			rdma_ack_cm_event(ev);
			if (ss && ss != (void *)vs)
				session_free(vs, ss);
			break;
		default:
			rdma_ack_cm_event(ev);
			break;
		}
	}
	return n;
}

static struct verbs_session *session_by_qp(struct verbs_server *vs, uint32_t qp_num)
{
	for (struct verbs_session *ss = vs->sessions; ss; ss = ss->next)
		if (ss->qp_num == qp_num)
			return ss;
	return NULL;
}

/* One received message: apply it through the core's handler. */
static void handle_msg(struct verbs_server *vs, struct verbs_session *ss, const char *buf,
		       uint32_t len)
{
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
		/* Every earlier message of this QP was handled already. */
		req.type = RDPS_REQ_FLUSH;
		vs->p.handle(vs->p.ctx, &req);
		/* This message's own buffer is counted by the caller. */
		send_imm(vs, ss, IMM_MAKE(IMM_FLUSH_ACK, ss->owed, ss->failed));
		ss->owed = 0;
		ss->failed = 0;
		return;
	}
	if (h.type != RDPS_REQ_PUSH) {
		snprintf(why, sizeof(why), "unknown message type %u", h.type);
		ret = -EOPNOTSUPP;
		goto refused;
	}
	ret = rdps_wire_check_rows(RDPS_REQ_PUSH, buf + sizeof(h), h.len, vs->regions,
				   vs->p.num_regions, why, sizeof(why));
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
		vs->base.stats->errors[RDPS_REQ_PUSH]++;
	rdps_warn("server %u: client %s: push refused: %s", vs->p.server_id, ss->peer,
		  why[0] ? why : rdps_strerror(ret));
}

static int drain_cq(struct verbs_server *vs)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	while ((n = ibv_poll_cq(vs->cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			struct verbs_session *ss;

			total++;
			if (wc[i].opcode & IBV_WC_RECV) {
				uint32_t slot = (uint32_t)wc[i].wr_id;

				if (wc[i].status == IBV_WC_SUCCESS &&
				    (ss = session_by_qp(vs, wc[i].qp_num))) {
					handle_msg(vs, ss, vs->recv_buf + (size_t)slot * VERBS_MSG_SIZE,
						   wc[i].byte_len);
					ss->owed++;
					if (ss->owed >= vs->credits / 2 || ss->owed >= 0x3fff) {
						send_imm(vs, ss, IMM_MAKE(IMM_CREDIT, ss->owed, 0));
						ss->owed = 0;
					}
				}
				/* The buffer goes back to the shared queue either way. */
				if (post_srq(vs, slot))
					rdps_err("server %u: cannot re-post a receive buffer",
						 vs->p.server_id);
			} else if (wc[i].status != IBV_WC_SUCCESS &&
				   wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				rdps_warn("server %u: send to a client failed: %s", vs->p.server_id,
					  ibv_wc_status_str(wc[i].status));
			}
		}
	}
	return n < 0 ? -EIO : total;
}

static int verbs_progress(struct rdps_tserver *s, int timeout_ms)
{
	struct verbs_server *vs = to_verbs_server(s);
	struct pollfd pfd[3] = {
		{ .fd = rdps_tcp_server_fd(vs->tcp), .events = POLLIN },
		{ .fd = vs->ch->fd, .events = POLLIN },
		{ .fd = vs->cc->fd, .events = POLLIN },
	};
	int n = 0, ret;

	vs->tcp->stats = s->stats;
	if (poll(pfd, 3, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	if (pfd[0].revents) {
		ret = vs->tcp->ops->progress(vs->tcp, 0);
		if (ret < 0)
			return ret;
		n += ret;
	}
	if (pfd[1].revents)
		n += handle_cm(vs);
	if (pfd[2].revents) {
		struct ibv_cq *cq;
		void *ctx;

		if (!ibv_get_cq_event(vs->cc, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
		/* Re-arm before draining so no completion goes unnoticed. */
		ibv_req_notify_cq(vs->cq, 0);
	}
	ret = drain_cq(vs);
	if (ret < 0)
		return ret;
	return n + ret;
}

static int verbs_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
		       const void *payload, size_t len)
{
	struct verbs_server *vs = to_verbs_server(s);

	return vs->tcp->ops->reply(vs->tcp, token, type, status, payload, len);
}

static void verbs_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct verbs_server *vs;

	if (!s)
		return;
	vs = to_verbs_server(s);
	if (vs->tcp)
		vs->tcp->ops->destroy(vs->tcp, timeout_ms);
	while (vs->sessions) {
		if (vs->sessions->id)
			rdma_disconnect(vs->sessions->id);
		session_free(vs, vs->sessions);
	}
	if (vs->srq)
		ibv_destroy_srq(vs->srq);
	if (vs->recv_mr)
		ibv_dereg_mr(vs->recv_mr);
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
	free(vs->recv_buf);
	free(vs);
}

static int bind_listener(struct verbs_server *vs, const struct rdps_listen_params *p,
			 char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *res;
	char portstr[8];
	int ret;

	vs->ch = rdma_create_event_channel();
	if (!vs->ch) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the RDMA CM (%s): is rdma_ucm loaded and "
			 "/dev/infiniband/rdma_cm present?", strerror(-ret));
		return ret;
	}
	if ((ret = set_nonblock(vs->ch->fd)))
		return ret;
	if (rdma_create_id(vs->ch, &vs->listen_id, vs, RDMA_PS_TCP))
		return -errno;
	snprintf(portstr, sizeof(portstr), "%u", p->port);
	if (getaddrinfo(p->host, portstr, &hints, &res)) {
		snprintf(err, errlen, "cannot resolve '%s'", p->host);
		return -EHOSTUNREACH;
	}
	ret = rdma_bind_addr(vs->listen_id, res->ai_addr) ? -errno : 0;
	freeaddrinfo(res);
	if (ret) {
		snprintf(err, errlen, "cannot bind RDMA CM to %s:%u: %s", p->host, p->port,
			 ret == -EADDRINUSE ? "port already in use" : strerror(-ret));
		return ret;
	}
	if (!vs->listen_id->verbs) {
		snprintf(err, errlen, "%s is not the address of an RDMA device (use --transport tcp)",
			 p->host);
		return -ENODEV;
	}
	return 0;
}

static int verbs_listen(const struct rdps_listen_params *p, struct rdps_tserver **out,
			char *err, size_t errlen)
{
	struct rdps_listen_params lp = *p;
	struct verbs_server *vs;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = VERBS_SRQ_DEPTH, .max_sge = 1 } };
	int ret;

	*out = NULL;
	err[0] = '\0';
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle)
		return -EINVAL;
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return -ENOMEM;
	vs->base.ops = &verbs_ops;
	vs->p = *p;
	memcpy(vs->regions, p->regions, p->num_regions * sizeof(*p->regions));
	vs->p.regions = vs->regions;
	vs->credits = VERBS_MAX_CREDITS;
	ret = bind_listener(vs, p, err, errlen);
	if (ret)
		goto err_destroy;
	vs->pd = ibv_alloc_pd(vs->listen_id->verbs);
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
				 strerror(-ret), memlock_hint(-ret));
			goto err_destroy;
		}
		vs->regions[t].desc.remote_addr = (uintptr_t)vs->regions[t].base;
		vs->regions[t].desc.rkey = vs->mrs[t]->rkey;
	}
	ret = alloc_registered(vs->pd, (size_t)VERBS_SRQ_DEPTH * VERBS_MSG_SIZE,
			       IBV_ACCESS_LOCAL_WRITE, &vs->recv_buf, &vs->recv_mr, err, errlen,
			       "receive buffers");
	if (ret)
		goto err_destroy;
	vs->cc = ibv_create_comp_channel(vs->listen_id->verbs);
	if (!vs->cc || set_nonblock(vs->cc->fd)) {
		ret = -errno;
		goto err_destroy;
	}
	vs->cq = ibv_create_cq(vs->listen_id->verbs, VERBS_SRQ_DEPTH + 64 * 64, NULL, vs->cc, 0);
	if (!vs->cq || ibv_req_notify_cq(vs->cq, 0)) {
		ret = -errno;
		goto err_destroy;
	}
	vs->srq = ibv_create_srq(vs->pd, &sa);
	if (!vs->srq) {
		ret = -errno;
		snprintf(err, errlen, "creating the shared receive queue failed: %s", strerror(-ret));
		goto err_destroy;
	}
	for (uint32_t i = 0; i < VERBS_SRQ_DEPTH; i++)
		if ((ret = post_srq(vs, i)))
			goto err_destroy;
	if (rdma_listen(vs->listen_id, 128)) {
		ret = -errno;
		goto err_destroy;
	}
	/* The handshake hands out the regions' addresses and rkeys. */
	lp.regions = vs->regions;
	ret = rdps_tcp_listen_exposed(&lp, &vs->tcp, err, errlen);
	if (ret)
		goto err_destroy;
	*out = &vs->base;
	return 0;

err_destroy:
	if (!err[0])
		snprintf(err, errlen, "verbs set-up on %s:%u failed: %s", p->host, p->port,
			 rdps_strerror(ret));
	verbs_destroy(&vs->base, 0);
	return ret;
}

static const struct rdps_transport_ops verbs_ops = {
	.name = "verbs",
	.connect = verbs_connect,
	.close = verbs_close,
	.pull_post = verbs_pull_post,
	.pull_wait = verbs_pull_wait,
	.push = verbs_push,
	.call = verbs_call,
	.listen = verbs_listen,
	.progress = verbs_progress,
	.reply = verbs_reply,
	.destroy = verbs_destroy,
};

const struct rdps_transport_ops *rdps_transport_verbs(void)
{
	return &verbs_ops;
}

int rdps_verbs_route_device(const char *host, uint16_t port, char *name, size_t namelen)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	char err[256] = "";
	int ret;

	if (!ch)
		return -errno;
	ret = set_nonblock(ch->fd);
	if (!ret)
		ret = rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? -errno : 0;
	if (!ret)
		ret = cm_resolve(id, ch, host, port, 1000, err, sizeof(err));
	if (!ret && (!id->verbs || !id->verbs->device))
		ret = -ENODEV;
	if (!ret)
		snprintf(name, namelen, "%s", ibv_get_device_name(id->verbs->device));
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return ret;
}
