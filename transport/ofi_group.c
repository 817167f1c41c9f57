// SPDX-License-Identifier: MIT
/*
 * ofi backend, client side: a client's one endpoint (ofi.h: a group),
 * shared by its connections to every server. The group owns the endpoint,
 * its completion queue and address vector (every server in it), the
 * control receives (OFI_CTL_RECVS_PER_CONN more per connection that
 * joins: credits and flush acknowledgements of any server land in any of
 * them, each message naming its connection) and the answer slots of
 * two-sided pulls (tagged receives, one per request in flight). A
 * connection owns its READ targets and push buffers, registered on the
 * group's domain.
 *
 * Completions are read by whichever connection waits, and each is handed
 * to the connection its context names (ofi.h: kind, connection, value): a
 * wait on one server's READs also takes in another's credits. A failed
 * operation breaks its own connection only.
 *
 * A connection that closes with operations in flight (its READs still
 * target its buffers) waits for them up to OFI_CLOSE_WAIT_MS; past that it
 * stays in the group, closed, until they complete or the group's endpoint
 * closes, and its index is not given to another connection meanwhile.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "ofi.h"
#include "spin.h"
#include "tcp.h"

int ofi_conn_fail(struct ofi_conn *oc, int ret, const char *fmt, const char *detail)
{
	char what[400];

	oc->broken = true;
	snprintf(what, sizeof(what), fmt, detail);
	snprintf(oc->base.errmsg, sizeof(oc->base.errmsg), "%s: %s", oc->base.peer, what);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Receives and answer slots                                              */

static char *recv_buf(struct ofi_group *g, uint64_t i)
{
	return g->recv_chunks[i / OFI_CTL_RECVS_PER_CONN] +
	       (i % OFI_CTL_RECVS_PER_CONN) * OFI_CTL_RECV_SIZE;
}

static int post_recv(struct ofi_group *g, uint64_t i)
{
	return (int)fi_recv(g->e.ep, recv_buf(g, i), OFI_CTL_RECV_SIZE,
			    ofi_desc(g->recv_mrs[i / OFI_CTL_RECVS_PER_CONN]), FI_ADDR_UNSPEC,
			    OFI_CCTX(OFI_OP_RECV, 0, i));
}

/* One chunk of control receives more, posted. */
static int grow_recvs(struct ofi_group *g, char *err, size_t errlen)
{
	uint32_t k = g->nrecv_chunks;
	char **chunks = realloc(g->recv_chunks, (k + 1) * sizeof(*chunks));
	struct fid_mr **mrs;
	int ret;

	if (!chunks)
		return -ENOMEM;
	g->recv_chunks = chunks;
	mrs = realloc(g->recv_mrs, (k + 1) * sizeof(*mrs));
	if (!mrs)
		return -ENOMEM;
	g->recv_mrs = mrs;
	ret = ofi_alloc_registered(&g->e, (size_t)OFI_CTL_RECVS_PER_CONN * OFI_CTL_RECV_SIZE,
				   FI_RECV, &chunks[k], &mrs[k], err, errlen, "receive buffers");
	if (ret)
		return ret;
	g->nrecv_chunks++;
	for (uint32_t i = 0; i < OFI_CTL_RECVS_PER_CONN; i++) {
		ret = post_recv(g, (uint64_t)k * OFI_CTL_RECVS_PER_CONN + i);
		if (ret == -FI_EAGAIN)
			return 0; /* the receive queue is full: more wait as unexpected */
		if (ret) {
			snprintf(err, errlen, "posting a receive failed: %s", ofi_strerror(ret));
			return ret;
		}
	}
	return 0;
}

int ofi_answer_post(struct ofi_conn *oc, uint32_t pull, uint32_t row, uint32_t nrows,
		    uint64_t *tag)
{
	struct ofi_group *g = oc->g;
	uint32_t i;
	ssize_t r;

	if (g->ans_busy == OFI_ANSWER_SLOTS)
		return -EAGAIN;
	for (i = 0; g->ans[i].oc; i++)
		;
	/* The slot's index in the low byte: a tag names one slot. */
	*tag = (++g->next_tag << 8) | i;
	r = fi_trecv(g->e.ep, g->ansbuf + (size_t)i * g->ans_size, g->ans_size,
		     ofi_desc(g->ans_mr), FI_ADDR_UNSPEC, *tag, 0, OFI_CCTX(OFI_OP_ANSWER, 0, i));
	if (r == -FI_EAGAIN)
		return -EAGAIN;
	if (r)
		return (int)r;
	g->ans[i] = (struct ofi_answer){ oc, *tag, pull, row, nrows, true };
	g->ans_busy++;
	oc->nreqs++;
	return (int)i;
}

static void answer_free(struct ofi_group *g, uint32_t i)
{
	struct ofi_conn *oc = g->ans[i].oc;

	if (oc)
		oc->nreqs--;
	memset(&g->ans[i], 0, sizeof(g->ans[i]));
	g->ans_busy--;
}

/* ---------------------------------------------------------------------- */
/* Completions                                                            */

static void conn_free(struct ofi_conn *oc);

/* A closed connection whose last operation ended leaves for good. */
static void zombie_check(struct ofi_group *g, struct ofi_conn *oc)
{
	if (!oc->closed || oc->tx_out || oc->nreqs)
		return;
	g->conns[oc->index & 0xffffu] = NULL;
	conn_free(oc);
}

/* The connection a context names, live or closed. */
static struct ofi_conn *conn_of(struct ofi_group *g, void *ctx)
{
	uint32_t i = OFI_CCTX_CONN(ctx);

	return i < g->nconns ? g->conns[i] : NULL;
}

/* A control message from a server: credits or a flush acknowledgement. */
static int control_msg(struct ofi_group *g, const char *buf, size_t len)
{
	struct ofi_srv_hdr h;
	struct ofi_conn *oc;

	if (len < sizeof(h))
		return 0; /* from no server of ours: dropped */
	memcpy(&h, buf, sizeof(h));
	oc = (h.conn & 0xffffu) < g->nconns ? g->conns[h.conn & 0xffffu] : NULL;
	/* The connection the index had when the server was bound to it. */
	if (!oc || oc->closed || oc->index != h.conn || oc->session != h.session)
		return 0;
	return ofi_conn_server_msg(oc, &h);
}

/* One completion (err: its error entry, else NULL). Returns the error of
 * the connection it broke, and which (*who). */
static int completion(struct ofi_group *g, void *ctx, size_t len,
		      const struct fi_cq_err_entry *err, struct ofi_conn **who)
{
	struct ofi_conn *oc = conn_of(g, ctx);
	uint64_t v = OFI_CCTX_VAL(ctx);
	char text[256];
	int ret = 0;

	*who = NULL;
	if (err)
		ofi_cq_errtext(g->e.cq, err, text, sizeof(text));
	switch (OFI_CTX_KIND(ctx)) {
	case OFI_OP_READ:
	case OFI_OP_SEND:
		g->tx_out--;
		if (!oc)
			return 0;
		oc->tx_out--;
		if (oc->closed) {
			zombie_check(g, oc);
			return 0;
		}
		*who = oc;
		if (err)
			return ofi_conn_fail(oc, -EIO, OFI_CTX_KIND(ctx) == OFI_OP_READ
					     ? "an RMA READ failed: %s" : "a send failed: %s", text);
		if (OFI_CTX_KIND(ctx) == OFI_OP_READ)
			ofi_conn_read_done(oc, v);
		else
			ofi_conn_send_done(oc, (uint32_t)v);
		return oc->broken ? -EIO : 0;
	case OFI_OP_RECV:
		if (err && err->err == FI_ECANCELED)
			return 0; /* the endpoint closes */
		if (!err)
			ret = control_msg(g, recv_buf(g, v), len);
		else
			rdps_warn("ofi: a receive failed: %s", text);
		if (post_recv(g, v))
			rdps_err("ofi: cannot post a receive again");
		return ret;
	case OFI_OP_ANSWER: {
		struct ofi_answer a;

		if (v >= OFI_ANSWER_SLOTS || !g->ans[v].oc)
			return 0;
		a = g->ans[v];
		oc = a.oc;
		answer_free(g, (uint32_t)v);
		if (oc->closed) {
			zombie_check(g, oc);
			return 0;
		}
		*who = oc;
		if (err)
			return ofi_conn_fail(oc, -EIO, "receiving rows failed: %s", text);
		return ofi_conn_answer(oc, &a, g->ansbuf + v * g->ans_size, len);
	}
	default:
		rdps_err("ofi: completion of an unknown operation %p", ctx);
		return 0;
	}
}

int ofi_group_poll(struct ofi_conn *oc)
{
	struct ofi_group *g = oc->g;
	struct fi_cq_msg_entry ev[32];
	struct ofi_conn *who;
	ssize_t n = fi_cq_read(g->e.cq, ev, 32);

	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		if (fi_cq_readerr(g->e.cq, &err, 0) < 0)
			return ofi_conn_fail(oc, -EIO, "%s", "reading a failed completion failed");
		completion(g, err.op_context, 0, &err, &who);
		return oc->broken ? -EIO : 1;
	}
	if (n < 0)
		return ofi_conn_fail(oc, -EIO, "polling the completion queue failed: %s",
				     ofi_strerror((int)n));
	for (ssize_t i = 0; i < n; i++)
		completion(g, ev[i].op_context, ev[i].len, NULL, &who);
	return oc->broken ? -EIO : (int)n;
}

/* ---------------------------------------------------------------------- */
/* Waits                                                                  */

/* Spins while completions come and for rdps_client_spin_ns() after the
 * last (latency), then sleeps on the CQ's descriptor where the provider
 * has one and fi_trywait allows it (a thread that spins for good starves
 * what shares its core, servers included); without one it yields. */
int ofi_poll_until(struct ofi_conn *oc, bool (*done)(struct ofi_conn *), const char *what)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)oc->timeout_ms * 1000000ull;
	uint64_t spin = rdps_client_spin_ns(), idle_since = 0;
	struct ofi_group *g = oc->g;
	unsigned idle = 0;

	while (!done(oc)) {
		/* (No control connection: closing; a negative fd is ignored.) */
		struct pollfd pfd[2] = { { .fd = -1, .events = POLLIN },
					 { .fd = g->e.cq_fd, .events = POLLIN } };
		int n = ofi_group_poll(oc), nfds = 1, ms = 0;
		uint64_t now;

		if (n < 0)
			return n;
		if (n) {
			idle = 0;
			continue;
		}
		/* Look at the clock and the control connection only now and
		 * then. */
		if (++idle % 64)
			continue;
		now = rdps_now_ns();
		if (idle == 64)
			idle_since = now;
		if (now >= deadline) {
			char why[200];

			snprintf(why, sizeof(why), "timed out after %d ms waiting for %s",
				 oc->timeout_ms, what);
			return ofi_conn_fail(oc, -ETIMEDOUT, "%s", why);
		}
		if (now - idle_since < spin && idle % 4096)
			continue;
		/* Long idle: sleep on the CQ's descriptor where there is one. */
		if (now - idle_since >= spin && g->e.cq_fd >= 0) {
			struct fid *f = &g->e.cq->fid;

			if (fi_trywait(g->e.fabric, &f, 1) == FI_SUCCESS) {
				uint64_t left_ms = (deadline - now) / 1000000ull + 1;

				nfds = 2;
				ms = left_ms < RDPS_CLIENT_SLEEP_MS ? (int)left_ms
								    : RDPS_CLIENT_SLEEP_MS;
			}
		}
		/* Outside a control call the server never writes to the
		 * control connection: readable means closed, i.e. dead. */
		pfd[0].fd = oc->ctl ? rdps_tcp_conn_fd(oc->ctl) : -1;
		if (poll(pfd, (nfds_t)nfds, ms) > 0 && pfd[0].revents) {
			char why[200];

			snprintf(why, sizeof(why),
				 "the server closed its control connection (it died?) while waiting for %s",
				 what);
			return ofi_conn_fail(oc, -ECONNRESET, "%s", why);
		}
		if (nfds == 1)
			sched_yield();
	}
	return 0;
}

/* The server died: outside a control call it never writes to the control
 * connection, so readable means closed. */
static int ctl_closed(struct ofi_conn *oc, const char *what)
{
	struct pollfd pfd = { .fd = oc->ctl ? rdps_tcp_conn_fd(oc->ctl) : -1, .events = POLLIN };
	char why[200];

	if (!oc->ctl || poll(&pfd, 1, 0) <= 0)
		return 0;
	snprintf(why, sizeof(why),
		 "the server closed its control connection (it died?) while waiting for %s", what);
	return ofi_conn_fail(oc, -ECONNRESET, "%s", why);
}

int ofi_posted(struct ofi_conn *oc, ssize_t r, struct ofi_post_wait *pw, const char *what)
{
	struct ofi_group *g = oc->g;
	uint64_t now;
	int ret;

	if (!r)
		return 0;
	if (r != -FI_EAGAIN)
		return ofi_conn_fail(oc, -EIO, what, ofi_strerror((int)r));
	if (!pw->deadline) {
		pw->since = rdps_now_ns();
		pw->deadline = pw->since + (uint64_t)oc->timeout_ms * 1000000ull;
	}
	ret = ofi_group_poll(oc);
	if (ret < 0)
		return ret;
	if (ret || ++pw->spins % 64)
		return 1;
	now = rdps_now_ns();
	if (now >= pw->deadline) {
		char why[160];

		snprintf(why, sizeof(why), "timed out after %d ms waiting for room in the "
			 "provider's queue (it stayed full)", oc->timeout_ms);
		return ofi_conn_fail(oc, -ETIMEDOUT, what, why);
	}
	if (now - pw->since < rdps_client_spin_ns()) {
		if (pw->spins % 1024 == 0 && (ret = ctl_closed(oc, "room in the provider's queue")))
			return ret;
		return 1;
	}
	/* The queue stays full (rxm: the connection to this server is still
	 * being made): sleep on the CQ where libfabric allows it, as waits
	 * do, rather than spin (64 clients spinning here starved the server
	 * that was to accept their connections). */
	{
		struct pollfd pfd[2] = { { .fd = oc->ctl ? rdps_tcp_conn_fd(oc->ctl) : -1,
					   .events = POLLIN },
					 { .fd = g->e.cq_fd, .events = POLLIN } };
		struct fid *f = &g->e.cq->fid;
		int nfds = 1, ms = 0;

		if (g->e.cq_fd >= 0 && fi_trywait(g->e.fabric, &f, 1) == FI_SUCCESS) {
			uint64_t left_ms = (pw->deadline - now) / 1000000ull + 1;

			nfds = 2;
			ms = left_ms < 10 ? (int)left_ms : 10;
		}
		if (poll(pfd, (nfds_t)nfds, ms) > 0 && pfd[0].revents &&
		    (ret = ctl_closed(oc, "room in the provider's queue")))
			return ret;
		if (nfds == 1)
			sched_yield();
	}
	return 1;
}

/* ---------------------------------------------------------------------- */
/* Joining and leaving                                                    */

static void close_mr(struct fid_mr **mr)
{
	if (*mr)
		fi_close(&(*mr)->fid);
	*mr = NULL;
}

/* Frees a connection's own buffers and itself (no operation refers to
 * them any more, or the endpoint is closed). */
static void conn_free(struct ofi_conn *oc)
{
	close_mr(&oc->bounce_mr);
	close_mr(&oc->send_mr);
	free(oc->bounce);
	free(oc->sendbuf);
	free(oc);
}

static void group_destroy(struct ofi_group *g)
{
	/* The endpoint first: nothing refers to the buffers any more. */
	if (g->e.ep) {
		fi_close(&g->e.ep->fid);
		g->e.ep = NULL;
	}
	for (uint32_t i = 0; i < g->nconns; i++)
		if (g->conns[i])
			conn_free(g->conns[i]); /* closed ones with operations left */
	for (uint32_t k = 0; k < g->nrecv_chunks; k++) {
		close_mr(&g->recv_mrs[k]);
		free(g->recv_chunks[k]);
	}
	close_mr(&g->ans_mr);
	ofi_ep_close(&g->e);
	if (g->home)
		*g->home = NULL;
	free(g->recv_chunks);
	free(g->recv_mrs);
	free(g->ansbuf);
	free(g->conns);
	free(g);
}

void ofi_group_want(uint32_t num_servers, uint32_t index, struct ofi_ep_want *w)
{
	/* The endpoint's queues: two connections' worth of READs and pushes
	 * (a client waits on one server at a time; a full queue only makes a
	 * post wait for completions), every connection's control receives and
	 * the answer slots. On efa each entry holds an MTU-sized packet. */
	*w = (struct ofi_ep_want){
		.index = index,
		.tx = (size_t)(OFI_READ_RING + OFI_SEND_SLOTS) * (num_servers < 2 ? 1 : 2),
		.rx = (size_t)OFI_CTL_RECVS_PER_CONN * num_servers + OFI_ANSWER_SLOTS,
		.av = num_servers + 4,
	};
}

static int group_create(const struct rdps_conn_params *p, const char *node,
			uint32_t num_servers, struct ofi_group **out, char *err, size_t errlen)
{
	struct ofi_ep_want w;
	struct ofi_group *g = calloc(1, sizeof(*g));
	int ret;

	ofi_group_want(num_servers, p->client_id, &w);
	*out = NULL;
	if (!g)
		return -ENOMEM;
	ret = ofi_ep_open(&g->e, node, &w, err, errlen);
	if (!ret) {
		g->ans_size = g->e.msg_size;
		ret = ofi_alloc_registered(&g->e, (size_t)OFI_ANSWER_SLOTS * g->ans_size, FI_RECV,
					   &g->ansbuf, &g->ans_mr, err, errlen, "answer buffers");
	}
	if (ret) {
		group_destroy(g);
		return ret;
	}
	g->api = g->e.api;
	rdps_dbg("ofi: client %u's endpoint: provider %s (%s, %u of the host), libfabric API "
		 "%u.%u, queues tx %zu rx %zu, %s", p->client_id, g->e.prov, g->e.dev,
		 g->e.ndomains, FI_MAJOR(g->e.api), FI_MINOR(g->e.api), g->e.tx_size,
		 g->e.rx_size, g->e.rma ? "RMA reads" : g->e.why_two_sided);
	*out = g;
	return 0;
}

int ofi_group_join(struct ofi_conn *oc, const struct rdps_conn_params *p, const char *node,
		   char *err, size_t errlen)
{
	struct ofi_group *g = p->shared ? *p->shared : NULL;
	uint32_t i;
	int ret;

	if (!g) {
		ret = group_create(p, node, oc->ctl->num_servers ? oc->ctl->num_servers : 1, &g,
				   err, errlen);
		if (ret)
			return ret;
		g->home = p->shared;
		if (p->shared)
			*p->shared = g;
	}
	/* The first free index (a closed connection's stays taken until its
	 * operations end). */
	for (i = 0; i < g->nconns && g->conns[i]; i++)
		;
	if (i == OFI_GROUP_CONNS) {
		snprintf(err, errlen, "a client has at most %d ofi connections", OFI_GROUP_CONNS);
		ret = -EMFILE;
		goto err_leave;
	}
	if (i == g->nconns) {
		struct ofi_conn **c = realloc(g->conns, (i + 1) * sizeof(*c));

		if (!c) {
			ret = -ENOMEM;
			goto err_leave;
		}
		g->conns = c;
		g->nconns = i + 1;
	}
	g->conns[i] = oc;
	oc->g = g;
	/* The index and how often it was used before: a server's message
	 * for an earlier connection at this index is not this one's. */
	oc->index = i | ((++g->next_tag & 0xffffu) << 16);
	g->live++;
	if (g->nrecv_chunks < g->live && (ret = grow_recvs(g, err, errlen))) {
		/* Out again, nothing of it in flight; the caller frees it. */
		g->conns[i] = NULL;
		g->live--;
		oc->g = NULL;
		goto err_leave;
	}
	return 0;

err_leave:
	if (!g->live)
		group_destroy(g);
	return ret;
}

static bool conn_idle(struct ofi_conn *oc)
{
	return !oc->tx_out && !oc->nreqs;
}

void ofi_group_leave(struct ofi_conn *oc)
{
	struct ofi_group *g = oc->g;

	if (!g) {
		conn_free(oc);
		return;
	}
	/* Its answer slots' receives are cancelled: their completions say so. */
	for (uint32_t i = 0; i < OFI_ANSWER_SLOTS; i++)
		if (g->ans[i].oc == oc && g->ans[i].posted)
			fi_cancel(&g->e.ep->fid, OFI_CCTX(OFI_OP_ANSWER, 0, i));
	if (!conn_idle(oc)) {
		oc->timeout_ms = OFI_CLOSE_WAIT_MS;
		oc->broken = false; /* the wait polls (its failures end it) */
		if (ofi_poll_until(oc, conn_idle, "its operations to end at close"))
			rdps_dbg("%s", oc->base.errmsg);
	}
	if (oc->srv != FI_ADDR_NOTAVAIL)
		fi_av_remove(g->e.av, &oc->srv, 1, 0);
	g->live--;
	if (!g->live) {
		/* The endpoint first; then every connection still in the
		 * group, this one and closed ones, is freed. */
		group_destroy(g);
		return;
	}
	if (!conn_idle(oc)) {
		oc->closed = true; /* freed by its last completion */
		return;
	}
	g->conns[oc->index & 0xffffu] = NULL;
	conn_free(oc);
}
