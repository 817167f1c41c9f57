// SPDX-License-Identifier: MIT
/*
 * ofi backend, server side: the endpoint, the registered shards, sessions
 * (one per bound control connection), their teardown, and progress.
 *
 * A session lives as long as its control connection (tcp.c): it is made by
 * the connection's BIND (tcp.h's bind hook: the client's address goes into
 * the address vector, the session gets an index, a generation and its
 * first credits) and closed when the connection closes; when the session
 * fails first (a send to it fails, it overspends its credits), the
 * connection is closed. A closed session keeps its credits until its
 * messages on the way are in (each returns one) or OFI_DRAIN_MS passed,
 * and until the answers it is owed were sent; then its credits are free,
 * its address leaves the vector and its index gets a new generation, so a
 * late message of it is dropped as an orphan.
 *
 * One progress thread serves everything: the control connections (tcp.c
 * run as one worker), the completion queue and the sessions. It spins on
 * the CQ for a while (RDPS_OFI_BUSY_POLL_US) before it sleeps, on the
 * CQ's wait descriptor where the provider has one, else in slices of
 * OFI_IDLE_SLEEP_MS (efa has no wait objects).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "ofi.h"
#include "tcp.h"
#include "wire.h"

static inline struct ofi_server *to_ofi_server(struct rdps_tserver *s)
{
	return container_of(s, struct ofi_server, base);
}

static void retired_reap(struct ofi_server *os);
static void close_retired(void *mr);

static void publish_stats(struct ofi_server *os)
{
	struct rdps_server_stats *st = os->base.stats;

	if (!st)
		return;
	__atomic_store_n(&st->recv_slots, os->pool.nslots, __ATOMIC_RELAXED);
	__atomic_store_n(&st->recv_posted, os->pool.posted, __ATOMIC_RELAXED);
	__atomic_store_n(&st->rdma_sessions, os->live, __ATOMIC_RELAXED);
	__atomic_store_n(&st->pulls_two_sided,
			 os->e.rma ? 0 : os->e.two_sided_why ? (uint64_t)os->e.two_sided_why
							     : RDPS_TWO_SIDED_NO_RMA,
			 __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------- */
/* Sessions                                                               */

void ofi_session_close(struct ofi_server *os, struct ofi_session *ss, const char *why,
		       bool close_control)
{
	if (ss->state != OS_LIVE)
		return;
	os->live--;
	os->closing++;
	ss->state = OS_CLOSING;
	rdps_info("server %u: client %s: ofi session closes: %s", os->p.server_id, ss->peer, why);
	/* Credits never sent can be spent by no message. */
	ofi_pool_unsend(&os->pool, &ss->cr);
	ss->drain_deadline = rdps_now_ns() + OFI_DRAIN_MS * 1000000ull;
	/* tcp.c's connections are closed outside its progress (reap()). */
	ss->close_control = close_control;
}

/* Frees the closing sessions whose messages are in (or whose time is up)
 * and whose answers were sent; closes the control connections sessions
 * asked to close. */
static void reap(struct ofi_server *os)
{
	uint64_t now = rdps_now_ns();

	for (uint32_t i = 0; i < os->hw; i++) {
		struct ofi_session *ss = os->sessions[i];

		if (!ss || ss->state != OS_CLOSING)
			continue;
		if (ss->close_control) {
			ss->close_control = false;
			rdps_tcp_session_close(os->tcp, ss->token);
		}
		if (ss->held || (ss->cr.promised && now < ss->drain_deadline))
			continue;
		ofi_pool_release(&os->pool, &ss->cr);
		fi_av_remove(os->e.av, &ss->addr, 1, 0);
		os->sessions[i] = NULL;
		os->gens[i]++;
		os->closing--;
		free(ss);
	}
	while (os->hw && !os->sessions[os->hw - 1])
		os->hw--;
}

/* The control connection of a session closed (tcp.c's hook, in its
 * progress). */
static void control_closed(void *ctx, uint64_t token)
{
	struct ofi_server *os = ctx;

	for (uint32_t i = 0; i < os->hw; i++) {
		struct ofi_session *ss = os->sessions[i];

		if (ss && ss->token == token) {
			ofi_session_close(os, ss, "its control connection closed", false);
			return;
		}
	}
}

static int free_index(const struct ofi_server *os)
{
	for (uint32_t i = 0; i < OFI_MAX_SESSIONS; i++)
		if (!os->sessions[i])
			return (int)i;
	return -1;
}

/* Grows the pool so that the session's share is free at once (as
 * verbs_server.c does): OFI_SHARE_TARGET credits for every session of the
 * job while the pool may grow, and one chunk more if the free ones fall
 * short of a share. */
static void pool_make_room(struct ofi_server *os, uint32_t num_clients)
{
	uint32_t sharers = ofi_srv_sharers(os), want;
	char why[256];

	if (sharers < os->live + 1)
		sharers = os->live + 1;
	if (sharers < num_clients)
		sharers = num_clients;
	want = sharers * OFI_SHARE_TARGET;
	for (int step = 0; step < 2; step++) {
		if (os->pool.nslots < want && ofi_pool_grow(&os->pool, want, why, sizeof(why)) &&
		    !os->grow_failed_logged) {
			os->grow_failed_logged = true;
			rdps_warn("server %u: the receive pool stays at %u buffers for %u clients: %s",
				  os->p.server_id, os->pool.nslots, sharers, why);
		}
		if (os->pool.free_credits >= ofi_pool_share(&os->pool, sharers))
			break;
		want = os->pool.nslots + 1;
	}
}

/* tcp.c's bind hook: a client's endpoint joins, under its control
 * connection's session. */
static int bind_session(void *ctx, const struct rdps_tcp_bind_who *who, const void *reqp,
			size_t req_len, void *repp, size_t *rep_len, char *why, size_t whylen)
{
	struct ofi_server *os = ctx;
	struct ofi_bind_req req;
	struct ofi_bind_rep rep = { .magic = OFI_BIND_MAGIC };
	struct ofi_session *ss;
	fi_addr_t addr;
	int idx, ret;

	if (req_len != sizeof(req)) {
		snprintf(why, whylen, "malformed endpoint binding (another rdps version?)");
		return -EPROTO;
	}
	memcpy(&req, reqp, sizeof(req));
	req.prov[sizeof(req.prov) - 1] = '\0';
	if (req.magic != OFI_BIND_MAGIC || !req.addrlen || req.addrlen > OFI_ADDR_MAX) {
		snprintf(why, whylen, "malformed endpoint binding (another rdps version?)");
		return -EPROTO;
	}
	if (strcmp(req.prov, os->e.prov)) {
		snprintf(why, whylen, "the client uses libfabric provider %s, this server %s: give "
			 "both the same --ofi-provider", req.prov, os->e.prov);
		return -EPROTONOSUPPORT;
	}
	/* Every client of the job needs one credit at least, for good. */
	if (who->num_clients > os->pool.max_slots) {
		snprintf(why, whylen, "a job of %u clients needs a receive buffer each, and this "
			 "server's endpoint holds %u", who->num_clients, os->pool.max_slots);
		return -EUSERS;
	}
	idx = free_index(os);
	if (idx < 0) {
		snprintf(why, whylen, "all %d ofi sessions of this server are in use", OFI_MAX_SESSIONS);
		return -EUSERS;
	}
	ret = fi_av_insert(os->e.av, req.addr, 1, &addr, 0, NULL);
	if (ret != 1) {
		snprintf(why, whylen, "the client's endpoint address is not usable here: %s",
			 ofi_strerror(ret < 0 ? ret : -FI_EINVAL));
		return -EADDRNOTAVAIL;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		fi_av_remove(os->e.av, &addr, 1, 0);
		return -ENOMEM;
	}
	ss->index = (uint32_t)idx;
	ss->gen = os->gens[idx];
	ss->addr = addr;
	ss->token = who->session;
	ss->cookie = ofi_cookie(os->p.secret, who->session);
	ss->conn = req.conn;
	ss->seq = os->next_seq++;
	ss->client_id = who->client_id;
	ss->num_clients = who->num_clients;
	snprintf(ss->peer, sizeof(ss->peer), "%s (client %u, ofi)", who->peer, who->client_id);
	pool_make_room(os, who->num_clients);
	os->sessions[idx] = ss;
	if ((uint32_t)idx >= os->hw)
		os->hw = (uint32_t)idx + 1;
	os->live++;
	/* What the fair share allows now; the rest follows as credit
	 * messages once other sessions return theirs. */
	rep.credits = ofi_pool_grant(&os->pool, &ss->cr,
				     ofi_pool_share(&os->pool, ofi_srv_sharers(os)));
	ss->cr.owed = 0; /* they travel in the reply */
	rep.flags = os->e.rma ? OFI_BIND_RMA : 0;
	rep.session = ss->index;
	rep.gen = ss->gen;
	rep.msg_size = (uint32_t)os->pool.slot_size;
	rep.addrlen = (uint32_t)os->e.addrlen;
	memcpy(rep.addr, os->e.addr, os->e.addrlen);
	snprintf(rep.prov, sizeof(rep.prov), "%s", os->e.prov);
	memcpy(repp, &rep, sizeof(rep));
	*rep_len = sizeof(rep);
	rdps_dbg("server %u: client %s: ofi session %u, %u credits (pool %u)", os->p.server_id,
		 ss->peer, ss->index, rep.credits, os->pool.nslots);
	publish_stats(os);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Progress                                                               */

/*
 * A provider does work that no completion tells of: a handshake, a resend
 * after receiver-not-ready, an emulated READ served to a client, a copy
 * through shm. Only calls into the provider (fi_cq_read) do that work, so
 * the server never naps while the provider may have some:
 * - with a wait object, it sleeps on it only once fi_trywait says nothing
 *   is left to progress by hand; when fi_trywait says otherwise it
 *   progresses at once (not after a nap);
 * - without one (efa of libfabric 1.17, or efa with shm), it keeps
 *   progressing for OFI_LINGER_MS after any traffic (completions, control
 *   connections), and all along while clients are connected that may read
 *   the shards one-sidedly (a READ the provider serves is no completion),
 *   yielding the CPU between rounds; it naps in OFI_IDLE_SLEEP_MS slices
 *   only when idle.
 * The other server threads (thread > 0) only drive the provider's progress
 * (a read of no entries), so that it goes on while thread 0 applies a push.
 */

/* Spins on the CQ up to budget_ns for completions; returns how many were
 * handled (0: none came) or -EIO. */
static int busy_poll(struct ofi_server *os, uint64_t budget_ns)
{
	uint64_t end = rdps_now_ns() + budget_ns;

	for (unsigned spins = 1;; spins++) {
		int n = ofi_srv_drain_cq(os, 256);

		if (n)
			return n;
		if (!budget_ns || (spins % 16 == 0 && rdps_now_ns() >= end))
			return 0;
	}
}

/* Whether to keep progressing: traffic was seen within the linger
 * window, or (without a wait object) clients may be reading the shards,
 * which the server learns of from no completion at all. */
static bool lingering(const struct ofi_server *os)
{
	if (os->e.cq_fd < 0 && os->e.rma && __atomic_load_n(&os->live, __ATOMIC_RELAXED))
		return true;
	return rdps_now_ns() - __atomic_load_n(&os->last_traffic_ns, __ATOMIC_RELAXED) <
	       OFI_LINGER_MS * 1000000ull;
}

static void traffic(struct ofi_server *os)
{
	__atomic_store_n(&os->last_traffic_ns, rdps_now_ns(), __ATOMIC_RELAXED);
}

/* How long thread 0 may sleep now (ms), and on which descriptors (*nfds:
 * 1 the control connections only, 2 the CQ's wait descriptor too). */
static int sleep_plan(struct ofi_server *os, int timeout_ms, int *nfds)
{
	struct fid *f = &os->e.cq->fid;

	*nfds = 1;
	if (!timeout_ms)
		return 0;
	if (os->e.cq_fd >= 0) {
		/* Safe to sleep only when libfabric says so; else progress
		 * again now. */
		if (fi_trywait(os->e.fabric, &f, 1) != FI_SUCCESS)
			return 0;
		*nfds = 2;
		return timeout_ms;
	}
	/* No wait object: keep progressing a while after any traffic. */
	if (lingering(os))
		return 0;
	__atomic_add_fetch(&os->naps, 1, __ATOMIC_RELAXED);
	return timeout_ms < OFI_IDLE_SLEEP_MS ? timeout_ms : OFI_IDLE_SLEEP_MS;
}

/* A thread other than 0: the provider's progress only (fi_cq_read of no
 * entries takes none), as often as thread 0 would. */
static int progress_only(struct ofi_server *os, int timeout_ms)
{
	uint64_t end = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	do {
		ssize_t r = fi_cq_read(os->e.cq, NULL, 0);

		if (r < 0 && r != -FI_EAGAIN && r != -FI_EAVAIL)
			return -EIO;
		if (!lingering(os)) {
			struct pollfd pfd = { .fd = os->e.cq_fd, .events = POLLIN };

			/* Idle: sleep as thread 0 does (its descriptor is only
			 * watched here, its completions are thread 0's). */
			if (os->e.cq_fd >= 0)
				poll(&pfd, 1, timeout_ms < 50 ? timeout_ms : 50);
			else
				poll(NULL, 0, OFI_IDLE_SLEEP_MS);
			break;
		}
		sched_yield();
	} while (rdps_now_ns() < end);
	return 0;
}

int ofi_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms)
{
	struct ofi_server *os = to_ofi_server(s);
	struct pollfd pfd[2] = { { .fd = rdps_tcp_server_fd(os->tcp), .events = POLLIN },
				 { .fd = os->e.cq_fd, .events = POLLIN } };
	int n = 0, nfds, ms, ret;

	if (thread >= os->base.progress_threads)
		return -EINVAL;
	if (thread)
		return progress_only(os, timeout_ms);
	os->tcp->stats = os->base.stats;
	/* Sessions waiting for their drain must not wait past the deadline. */
	if (os->closing && timeout_ms > 50)
		timeout_ms = 50;
	if (timeout_ms && os->busy_poll_ns) {
		ret = busy_poll(os, os->busy_poll_ns);
		if (ret < 0)
			return ret;
		if (ret) {
			n += ret;
			timeout_ms = 0;
		}
	}
	ms = sleep_plan(os, timeout_ms, &nfds);
	if (poll(pfd, (nfds_t)nfds, ms) < 0 && errno != EINTR)
		return -errno;
	if (!ms && timeout_ms && !n)
		sched_yield(); /* progressing without a sleep: let others run */
	if (pfd[0].revents) {
		ret = os->tcp->ops->progress(os->tcp, 0, 0);
		if (ret < 0)
			return ret;
		n += ret;
	}
	for (int b = 0; b < 4; b++) {
		ret = ofi_srv_drain_cq(os, 256);
		if (ret < 0)
			return ret;
		n += ret;
		ofi_srv_regrant(os);
		if (ret < 256)
			break;
	}
	if (n)
		traffic(os);
	reap(os);
	retired_reap(os);
	publish_stats(os);
	return n;
}

int ofi_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
	      const void *payload, size_t len)
{
	struct ofi_server *os = to_ofi_server(s);

	return os->tcp->ops->reply(os->tcp, token, type, status, payload, len);
}

static void close_mr(struct fid_mr **mr)
{
	if (*mr)
		fi_close(&(*mr)->fid);
	*mr = NULL;
}

void ofi_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct ofi_server *os;

	if (!s)
		return;
	os = to_ofi_server(s);
	if (os->tcp) {
		rdps_tcp_set_session_hook(os->tcp, NULL, NULL);
		rdps_tcp_set_bind_hook(os->tcp, NULL, NULL);
		os->tcp->ops->destroy(os->tcp, timeout_ms);
	}
	/* The endpoint first: no operation refers to a buffer any more. */
	if (os->e.ep) {
		fi_close(&os->e.ep->fid);
		os->e.ep = NULL;
	}
	for (uint32_t i = 0; os->sessions && i < os->hw; i++)
		free(os->sessions[i]);
	ofi_pool_destroy(&os->pool);
	close_mr(&os->ctl_mr);
	for (uint32_t t = 0; t < RDPS_MAX_TABLES; t++)
		close_mr(&os->mrs[t]);
	rdps_retire_free(&os->retired, close_retired);
	ofi_ep_close(&os->e);
	free(os->ctl_buf);
	free(os->sessions);
	free(os->gens);
	free(os->rows_pending);
	free(os->answer_len);
	free(os->answer_tag);
	free(os->pull_ids);
	free(os);
}

/* Registers one shard for remote reads (where the provider reads), and
 * says where it is. */
static int expose_region(struct ofi_server *os, struct rdps_region *r, struct fid_mr **mr,
			 char *err, size_t errlen)
{
	int ret;

	r->desc.remote_addr = 0;
	r->desc.rkey = 0;
	if (!os->e.rma)
		return 0;
	ret = ofi_mr_reg(&os->e, r->base, r->len, FI_REMOTE_READ, mr, err, errlen, r->desc.name);
	if (ret)
		return ret;
	/* Without FI_MR_VIRT_ADDR a READ addresses a region by offset. */
	r->desc.remote_addr = os->e.mr_mode & FI_MR_VIRT_ADDR ? (uintptr_t)r->base : 0;
	r->desc.rkey = fi_mr_key(*mr);
	if (r->desc.rkey == FI_KEY_NOTAVAIL) {
		snprintf(err, errlen, "provider %s gives no 64-bit key for table '%s' "
			 "(FI_MR_RAW is not supported)", os->e.prov, r->desc.name);
		fi_close(&(*mr)->fid);
		*mr = NULL;
		return -ENOTSUP;
	}
	return 0;
}

int ofi_add_region(struct rdps_tserver *s, struct rdps_region *r)
{
	struct ofi_server *os = container_of(s, struct ofi_server, base);
	uint32_t t = r->desc.table_id;
	struct fid_mr *mr = NULL;
	char err[256] = "";
	int ret;

	if (t >= RDPS_MAX_TABLES || !r->desc.dim)
		return -EINVAL;
	ret = expose_region(os, r, &mr, err, sizeof(err));
	if (ret) {
		rdps_warn("server %u: table '%s': %s", os->p.server_id, r->desc.name,
			  err[0] ? err : rdps_strerror(ret));
		return ret;
	}
	ret = os->tcp->ops->add_region(os->tcp, r);
	if (ret) {
		if (mr)
			fi_close(&mr->fid);
		return ret;
	}
	/* dim last: a thread checking a message reads it first */
	__atomic_store_n(&os->regions[t].desc.dim, 0, __ATOMIC_RELEASE);
	if (os->mrs[t])
		fi_close(&os->mrs[t]->fid);
	os->mrs[t] = mr;
	os->regions[t].base = r->base;
	os->regions[t].len = r->len;
	{
		struct rdps_table_desc d = r->desc;

		d.dim = 0;
		os->regions[t].desc = d;
	}
	__atomic_store_n(&os->regions[t].desc.dim, r->desc.dim, __ATOMIC_RELEASE);
	if (t >= __atomic_load_n(&os->p.num_regions, __ATOMIC_ACQUIRE))
		__atomic_store_n(&os->p.num_regions, t + 1, __ATOMIC_RELEASE);
	return 0;
}

static void close_retired(void *mr)
{
	fi_close(&((struct fid_mr *)mr)->fid);
}

/* The table leaves (in a request's handling, on the progress thread, which
 * applies every push: none is half applied): its rows say so and its region
 * stays registered until the sessions that may know its key are gone
 * (retire.h), so a late READ fails that pull, not the client's connection. */
void ofi_remove_region(struct rdps_tserver *s, uint32_t table_id)
{
	struct ofi_server *os = container_of(s, struct ofi_server, base);

	if (table_id >= RDPS_MAX_TABLES)
		return;
	__atomic_store_n(&os->regions[table_id].desc.dim, 0, __ATOMIC_RELEASE);
	os->tcp->ops->remove_region(os->tcp, table_id);
	if (!os->mrs[table_id])
		return;
	rdps_region_retire_rows(&os->regions[table_id]);
	if (rdps_retire_add(&os->retired, os->mrs[table_id], os->next_seq))
		fi_close(&os->mrs[table_id]->fid);
	os->mrs[table_id] = NULL;
}

/* Closes the retired regions no session that began before their drop can
 * read any more. */
static void retired_reap(struct ofi_server *os)
{
	uint64_t min = UINT64_MAX;

	if (!os->retired.n)
		return;
	for (uint32_t i = 0; i < os->hw; i++)
		if (os->sessions[i] && os->sessions[i]->seq < min)
			min = os->sessions[i]->seq;
	if (rdps_retire_reap(&os->retired, min, close_retired))
		rdps_dbg("server %u: retired table regions closed", os->p.server_id);
}

/* Registers the shards for remote reads, and says where they are. */
static int expose_regions(struct ofi_server *os, char *err, size_t errlen)
{
	for (uint32_t t = 0; t < os->p.num_regions; t++) {
		int ret = expose_region(os, &os->regions[t], &os->mrs[t], err, errlen);

		if (ret)
			return ret;
	}
	return 0;
}

int ofi_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
	       size_t errlen)
{
	struct rdps_listen_params lp = *p;
	struct ofi_server *os;
	uint32_t max_slots;
	int ret;

	*out = NULL;
	err[0] = '\0';
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle)
		return -EINVAL;
	os = calloc(1, sizeof(*os));
	if (!os)
		return -ENOMEM;
	os->base.ops = rdps_transport_ofi();
	/* One thread handles completions; the others asked for drive the
	 * provider's progress (the core says that requests are served by
	 * one). */
	os->base.num_threads = 1;
	os->base.progress_threads = p->num_threads > 1 ? p->num_threads : 1;
	if (os->base.progress_threads > OFI_PROGRESS_THREADS_MAX)
		os->base.progress_threads = OFI_PROGRESS_THREADS_MAX;
	os->e.cq_fd = -1;
	os->p = *p;
	os->busy_poll_ns = ofi_busy_poll_ns();
	memcpy(os->regions, p->regions, p->num_regions * sizeof(*p->regions));
	os->p.regions = os->regions;
	{
		/* The receive pool and control sends, and two-sided answers
		 * from the pool's slots; a session per client. */
		struct ofi_ep_want w = { .server = true, .index = p->server_id,
					 .tx = OFI_CTL_SLOTS + OFI_POOL_MAX_SLOTS,
					 .rx = OFI_POOL_MAX_SLOTS, .av = OFI_MAX_SESSIONS };

		ret = ofi_ep_open(&os->e, p->host, &w, err, errlen);
	}
	if (ret)
		goto err_destroy;
	ret = expose_regions(os, err, errlen);
	if (ret)
		goto err_destroy;
	max_slots = os->e.rx_size < OFI_POOL_MAX_SLOTS ? (uint32_t)os->e.rx_size : OFI_POOL_MAX_SLOTS;
	if (max_slots < OFI_POOL_MIN_SLOTS) {
		snprintf(err, errlen, "the %s endpoint's receive queue holds %u messages, rdps needs %u",
			 os->e.prov, max_slots, OFI_POOL_MIN_SLOTS);
		ret = -ENOTSUP;
		goto err_destroy;
	}
	os->sessions = calloc(OFI_MAX_SESSIONS, sizeof(*os->sessions));
	os->gens = calloc(OFI_MAX_SESSIONS, sizeof(*os->gens));
	os->rows_pending = calloc(max_slots, sizeof(*os->rows_pending));
	os->answer_len = calloc(max_slots, sizeof(*os->answer_len));
	os->answer_tag = calloc(max_slots, sizeof(*os->answer_tag));
	os->pull_ids = malloc(os->e.msg_size);
	if (!os->sessions || !os->gens || !os->rows_pending || !os->answer_len ||
	    !os->answer_tag || !os->pull_ids) {
		ret = -ENOMEM;
		goto err_destroy;
	}
	ret = ofi_pool_create(&os->pool, &os->e, os->e.msg_size, max_slots);
	if (!ret)
		ret = ofi_pool_grow(&os->pool, OFI_POOL_MIN_SLOTS, err, errlen);
	if (!ret)
		ret = ofi_alloc_registered(&os->e, (size_t)OFI_CTL_SLOTS * sizeof(struct ofi_srv_hdr),
					   FI_SEND, &os->ctl_buf, &os->ctl_mr, err, errlen,
					   "control buffers");
	if (ret)
		goto err_destroy;
	/* The handshake hands out the regions' keys; BIND makes sessions. */
	lp.regions = os->regions;
	lp.num_threads = 1; /* served from ofi_progress() */
	ret = rdps_tcp_listen_exposed(&lp, &os->tcp, err, errlen);
	if (ret)
		goto err_destroy;
	rdps_tcp_set_session_hook(os->tcp, control_closed, os);
	rdps_tcp_set_bind_hook(os->tcp, bind_session, os);
	rdps_info("server %u: ofi provider %s (%s, %u device(s) on this host), libfabric API "
		  "%u.%u, messages of %zu bytes, %s", p->server_id, os->e.prov, os->e.dev,
		  os->e.ndomains, FI_MAJOR(os->e.api), FI_MINOR(os->e.api), os->e.msg_size,
		  os->e.rma ? "one-sided pulls (FI_RMA reads, the device's own)" : "two-sided pulls");
	if (!os->e.rma)
		rdps_info("server %u: pulls are served by this server's CPU over FI_MSG: %s",
			  p->server_id, os->e.why_two_sided);
	publish_stats(os);
	*out = &os->base;
	return 0;

err_destroy:
	if (!err[0])
		snprintf(err, errlen, "ofi set-up on %s:%u failed: %s", p->host, p->port,
			 rdps_strerror(ret));
	ofi_destroy(&os->base, 0);
	return ret;
}
