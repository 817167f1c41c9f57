// SPDX-License-Identifier: MIT
/*
 * TCP backend, server side: nonblocking sockets and epoll, replies of a
 * connection in request order.
 *
 * Threads: num_threads workers, each with its own connections, epoll set,
 * timer and share of the reply budget; progress(thread) serves worker
 * thread's. Worker 0 also accepts, and hands each connection to the worker
 * with the fewest; a connection stays on its worker for life, so its
 * requests are handled in order by one thread (a flush needs nothing
 * more). Other threads reach a worker through its inbox (a list behind a
 * mutex, and an eventfd in its epoll set): connections handed over, and
 * replies to deferred requests (a barrier completed by another worker's
 * client, a checkpoint written by its own thread).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "sock.h"
#include "tcp.h"
#include "tcp_priv.h"
#include "tcp_srv.h"
#include "wire.h"

static void tcp_timers(struct tcp_worker *w)
{
	uint64_t now = rdps_now_ns();

	if (!w->index && !w->ts->listening && now >= w->ts->accept_retry_ns) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TCP_KEY_LISTENER };

		if (!epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ts->lfd, &ev))
			w->ts->listening = true;
		else
			w->ts->accept_retry_ns = now + (uint64_t)w->ts->backoff_ms * 1000000ull;
	}
	tcp_expire_handshakes(w, now);
	tcp_close_stalled_readers(w, now);
	if (!w->index && w->ts->cap_log.held && now - w->ts->cap_log.last_ns >= TCP_LOG_EVERY_NS)
		tcp_cap_log_write(w->ts, now);
}

/* The defaults of struct rdps_listen_params' limits. */
static uint32_t default_max_conns(void)
{
	struct rlimit rl;
	rlim_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return TCP_MAX_CONNS;
	/* Leave descriptors for checkpoint files, RDMA devices, the epoll and
	 * timer: a quarter of the limit, at most TCP_FD_RESERVE. */
	n = rl.rlim_cur - (rl.rlim_cur / 4 < TCP_FD_RESERVE ? rl.rlim_cur / 4 : TCP_FD_RESERVE);
	if (n < 1)
		n = 1;
	return n < TCP_MAX_CONNS ? (uint32_t)n : TCP_MAX_CONNS;
}

/* The default of both budgets: 1/16 of the machine's memory, within
 * 64 MiB .. 1 GiB (one largest frame always fits). */
static size_t default_budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t b = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 16 : 0;

	if (b < TCP_REPLY_BUF_MIN)
		b = TCP_REPLY_BUF_MIN;
	if (b > TCP_REPLY_BUF_MAX)
		b = TCP_REPLY_BUF_MAX;
	return (size_t)b;
}

static void worker_fini(struct tcp_worker *w)
{
	if (w->tfd >= 0)
		close(w->tfd);
	if (w->efd >= 0)
		close(w->efd);
	if (w->epfd >= 0)
		close(w->epfd);
	pthread_mutex_destroy(&w->inbox_lock);
}

static int worker_init(struct tcp_server *ts, uint32_t index)
{
	struct tcp_worker *w = &ts->workers[index];
	struct epoll_event tev = { .events = EPOLLIN, .data.u64 = TCP_KEY_TIMER };
	struct epoll_event iev = { .events = EPOLLIN, .data.u64 = TCP_KEY_INBOX };

	w->ts = ts;
	w->index = index;
	link_init(&w->handshakes);
	link_init(&w->paused[TCP_BUDGET_TX]);
	link_init(&w->paused[TCP_BUDGET_RX]);
	link_init(&w->ready);
	pthread_mutex_init(&w->inbox_lock, NULL);
	w->inbox_tail = &w->inbox;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->epfd < 0 || w->tfd < 0 || w->efd < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->tfd, &tev) ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->efd, &iev))
		return -errno;
	return 0;
}

static int listen_common(const struct rdps_listen_params *p, struct rdps_tserver **out,
			 char *err, size_t errlen, bool exposed)
{
	struct tcp_server *ts;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TCP_KEY_LISTENER };
	uint32_t nworkers = p->num_threads ? p->num_threads : 1;
	char a[32], b[32];
	int ret;

	*out = NULL;
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle || p->handshake_timeout_ms < 0)
		return -EINVAL;
	if (nworkers > TCP_MAX_THREADS) {
		snprintf(err, errlen, "%u server threads asked for, at most %d", nworkers,
			 TCP_MAX_THREADS);
		return -EINVAL;
	}
	ts = calloc(1, sizeof(*ts) + nworkers * sizeof(ts->workers[0]));
	if (!ts)
		return -ENOMEM;
	ts->lfd = -1;
	for (uint32_t i = 0; i < nworkers; i++)
		ts->workers[i].epfd = ts->workers[i].tfd = ts->workers[i].efd = -1;
	ts->base.ops = rdps_transport_tcp();
	ts->base.num_threads = ts->base.progress_threads = ts->nworkers = nworkers;
	ts->p = *p;
	ts->max_conns = p->max_connections ? p->max_connections : default_max_conns();
	ts->handshake_ns = (uint64_t)(p->handshake_timeout_ms ? p->handshake_timeout_ms
							   : TCP_HANDSHAKE_MS) * 1000000ull;
	ts->tx_stall_ns = (uint64_t)(p->reply_stall_ms > 0 ? p->reply_stall_ms : TCP_TX_STALL_MS) *
			  1000000ull;
	ts->budget[TCP_BUDGET_TX] = (struct tcp_budget){
		.limit = p->max_reply_buffer ? p->max_reply_buffer : default_budget(),
		.flag = "--max-reply-buffer",
	};
	ts->budget[TCP_BUDGET_RX] = (struct tcp_budget){
		.limit = p->max_request_buffer ? p->max_request_buffer : default_budget(),
		.flag = "--max-request-buffer",
	};
	memcpy(ts->regions, p->regions, p->num_regions * sizeof(*p->regions));
	ts->nregions = p->num_regions;
	ts->exposed = exposed;
	ts->p.regions = ts->regions;
	pthread_mutex_init(&ts->regions_lock, NULL);
	for (uint32_t i = 0; !exposed && i < p->num_regions; i++) {
		ts->regions[i].desc.remote_addr = 0; /* no one-sided access over TCP */
		ts->regions[i].desc.rkey = 0;
	}
	for (uint32_t i = 0; i < nworkers; i++) {
		ret = worker_init(ts, i);
		if (ret) {
			snprintf(err, errlen, "server thread %u: no epoll, timer or eventfd: %s", i,
				 rdps_strerror(ret));
			goto err_workers;
		}
	}
	ret = rdps_sock_listen(p->host, p->port, &ts->lfd, err, errlen);
	if (ret)
		goto err_workers;
	if (epoll_ctl(ts->workers[0].epfd, EPOLL_CTL_ADD, ts->lfd, &ev)) {
		ret = -errno;
		goto err_close_listener;
	}
	ts->listening = true;
	rdps_dbg("server %u: %u thread(s), at most %u connections, %.1f s to finish a handshake, "
		 "%s of replies and %s of requests held at most", p->server_id, nworkers,
		 ts->max_conns, ts->handshake_ns / 1e9,
		 rdps_bytes_str(ts->budget[TCP_BUDGET_TX].limit, a, sizeof(a)),
		 rdps_bytes_str(ts->budget[TCP_BUDGET_RX].limit, b, sizeof(b)));
	*out = &ts->base;
	return 0;

err_close_listener:
	close(ts->lfd);
err_workers:
	for (uint32_t i = 0; i < nworkers; i++)
		if (ts->workers[i].ts)
			worker_fini(&ts->workers[i]);
	pthread_mutex_destroy(&ts->regions_lock);
	free(ts);
	return ret;
}

int tcp_listen(const struct rdps_listen_params *p, struct rdps_tserver **out,
	       char *err, size_t errlen)
{
	return listen_common(p, out, err, errlen, false);
}

int rdps_tcp_listen_exposed(const struct rdps_listen_params *p,
			    struct rdps_tserver **out, char *err, size_t errlen)
{
	return listen_common(p, out, err, errlen, true);
}

/* The session functions serve RDMA backends, which run one worker from
 * their own thread. */
static struct tcp_sconn *session_conn(struct tcp_server *ts, uint64_t session)
{
	struct tcp_worker *w = &ts->workers[0];

	for (uint32_t i = 0; i < w->nslots; i++) {
		struct tcp_sconn *sc = w->conns[i];

		if (sc && sc->hello && !sc->observer && sc->session == session)
			return sc;
	}
	return NULL;
}

int rdps_tcp_session_claim(struct rdps_tserver *s, uint64_t session, uint32_t client_id,
			   uint32_t *num_clients)
{
	struct tcp_sconn *sc = session_conn(to_tcp_server(s), session);

	/* The token is random, 64 bits, and only ever sent to its client. */
	if (!sc || sc->closing || sc->client_id != client_id)
		return -ENOENT;
	if (sc->session_claimed)
		return -EALREADY;
	sc->session_claimed = true;
	*num_clients = sc->num_clients;
	return 0;
}

void rdps_tcp_set_session_hook(struct rdps_tserver *s, rdps_tcp_session_closed_fn fn,
			       void *ctx)
{
	struct tcp_server *ts = to_tcp_server(s);

	ts->session_closed = fn;
	ts->session_ctx = ctx;
}

void rdps_tcp_set_bind_hook(struct rdps_tserver *s, rdps_tcp_bind_fn fn, void *ctx)
{
	struct tcp_server *ts = to_tcp_server(s);

	ts->bind = fn;
	ts->bind_ctx = ctx;
}

void rdps_tcp_session_close(struct rdps_tserver *s, uint64_t session)
{
	struct tcp_server *ts = to_tcp_server(s);
	struct tcp_sconn *sc = session_conn(ts, session);

	if (!sc || !sc->session_claimed)
		return;
	sc->session_claimed = false; /* the caller knows: no hook */
	sconn_flush(&ts->workers[0], sc);
	sconn_close(&ts->workers[0], sc);
}

int rdps_tcp_server_fd(struct rdps_tserver *s)
{
	return to_tcp_server(s)->workers[0].epfd;
}

/* The worker whose thread runs now (set while it is in progress()). */
static __thread struct tcp_worker *tcp_current;

/* A reply in the thread of the connection's worker. */
static int reply_local(struct tcp_worker *w, uint64_t token, uint32_t type, int status,
		       const void *payload, size_t len)
{
	uint32_t slot = (uint32_t)token & ((1u << TCP_SLOT_BITS) - 1);
	uint32_t gen = (uint32_t)(token >> 32);
	struct tcp_sconn *sc = slot < w->nslots ? w->conns[slot] : NULL;
	int ret;

	if (!sc || sc->gen != gen)
		return -ENOTCONN; /* the client went away meanwhile */
	if (sc->deferred)
		sc->deferred--; /* its bytes were held since the request */
	/* An error's payload is its reason. */
	if (status < 0) {
		char why[RDPS_WIRE_ERRMSG_MAX];

		snprintf(why, sizeof(why), "%.*s", (int)(payload ? len : 0),
			 payload ? (const char *)payload : "");
		ret = tcp_tx_error(sc, (uint8_t)type, status, why[0] ? why : rdps_strerror(status));
	} else {
		void *p = tcp_tx_frame(sc, (uint8_t)type | RDPS_WIRE_REPLY, 0, (uint32_t)len);

		ret = p ? 0 : -ENOMEM;
		if (p && len)
			memcpy(p, payload, len);
	}
	/* This may run inside the handler of another request of the same
	 * connection: never close here, let progress() do it. */
	if (!ret)
		ret = sconn_flush(w, sc);
	if (ret) {
		sc->closing = true;
		sconn_update(w, sc); /* queued for progress() to close */
	}
	return ret;
}

/* Takes what other threads handed this worker. */
static void inbox_drain(struct tcp_worker *w)
{
	struct tcp_inbox_item *it;
	uint64_t wakeups;

	if (read(w->efd, &wakeups, sizeof(wakeups)) < 0)
		wakeups = 0; /* EAGAIN: the list tells */
	pthread_mutex_lock(&w->inbox_lock);
	it = w->inbox;
	w->inbox = NULL;
	w->inbox_tail = &w->inbox;
	pthread_mutex_unlock(&w->inbox_lock);
	while (it) {
		struct tcp_inbox_item *next = it->next;

		if (it->is_conn)
			sconn_add(w, it->fd, it->since_ns, it->peer, it->same_host);
		else
			reply_local(w, it->token, it->type, it->status, it->payload, it->len);
		free(it);
		it = next;
	}
}

int tcp_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms)
{
	struct tcp_server *ts = to_tcp_server(s);
	struct tcp_worker *w;
	struct epoll_event evs[64];
	int n, ret = 0;

	if (thread >= ts->nworkers)
		return -EINVAL;
	w = &ts->workers[thread];
	n = epoll_wait(w->epfd, evs, 64, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	w->in_progress = true;
	tcp_current = w;
	for (int i = 0; i < n && !ret; i++) {
		struct tcp_sconn *sc;
		uint64_t key = evs[i].data.u64;
		int cret = 0;

		if (key == TCP_KEY_LISTENER) {
			ret = tcp_accept(ts);
			continue;
		}
		if (key == TCP_KEY_INBOX) {
			inbox_drain(w);
			continue;
		}
		if (key == TCP_KEY_TIMER) {
			uint64_t ticks;

			/* The deadlines are checked below whatever woke us. */
			if (read(w->tfd, &ticks, sizeof(ticks)) < 0)
				ticks = 0;
			w->timer_ns = 0;
			continue;
		}
		sc = key - 1 < w->nslots ? w->conns[key - 1] : NULL;
		if (!sc)
			continue;
		/* One waiting for a budget is out of the read set, but epoll
		 * reports a reset anyway: its client is gone (left open, it
		 * would be reported at every call). */
		if ((evs[i].events & (EPOLLHUP | EPOLLERR)) && sc->waiting)
			cret = -ECONNRESET;
		else if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !sc->closing)
			cret = sconn_read(w, sc);
		if (!cret)
			cret = sconn_flush(w, sc);
		/* Frames read before a pause get no new readable event: once
		 * the connection may take them, sconn_update() queued it in
		 * ready, which tcp_serve_waiting() serves below. */
		sconn_settle(w, sc, cret);
	}
	if (!ret) {
		tcp_timers(w);
		tcp_serve_waiting(w);
	}
	tcp_current = NULL;
	w->in_progress = false;
	tcp_timer_arm(w);
	return ret ? ret : n;
}

int tcp_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
	      const void *payload, size_t len)
{
	struct tcp_server *ts = to_tcp_server(s);
	uint32_t worker = (uint32_t)(token >> TCP_SLOT_BITS) & 0xff;
	struct tcp_inbox_item *it;
	struct tcp_worker *w;

	if (worker >= ts->nworkers)
		return -ENOTCONN;
	w = &ts->workers[worker];
	if (w == tcp_current)
		return reply_local(w, token, type, status, payload, len);
	/* Another thread (a barrier another worker's client completed, the
	 * checkpoint thread): the connection's own thread sends it. */
	it = malloc(sizeof(*it) + (payload ? len : 0));
	if (!it)
		return -ENOMEM;
	memset(it, 0, sizeof(*it));
	it->token = token;
	it->type = type;
	it->status = status;
	it->len = payload ? len : 0;
	if (it->len)
		memcpy(it->payload, payload, len);
	tcp_inbox_put(w, it);
	return 0;
}

void tcp_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct tcp_server *ts;
	uint64_t deadline;

	if (!s)
		return;
	ts = to_tcp_server(s);
	deadline = rdps_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	/* No progress() runs any more: this thread is every worker's. */
	for (uint32_t k = 0; k < ts->nworkers; k++) {
		struct tcp_worker *w = &ts->workers[k];

		w->in_progress = true; /* no timer to arm any more */
		tcp_current = w;
		inbox_drain(w);
	}
	tcp_current = NULL;
	/* Let queued replies (e.g. the shutdown acknowledgement) go out. */
	for (;;) {
		bool pending = false;

		for (uint32_t k = 0; k < ts->nworkers; k++) {
			struct tcp_worker *w = &ts->workers[k];

			for (uint32_t i = 0; i < w->nslots; i++) {
				struct tcp_sconn *sc = w->conns[i];

				if (sc && sc->tx_len > sc->tx_off) {
					if (sconn_flush(w, sc))
						sconn_close(w, sc);
					else
						pending = true;
				}
			}
		}
		if (!pending || rdps_now_ns() >= deadline)
			break;
		usleep(1000);
	}
	for (uint32_t k = 0; k < ts->nworkers; k++) {
		struct tcp_worker *w = &ts->workers[k];

		for (uint32_t i = 0; i < w->nslots; i++)
			if (w->conns[i])
				sconn_close(w, w->conns[i]);
		free(w->conns);
		worker_fini(w);
	}
	close(ts->lfd);
	pthread_mutex_destroy(&ts->regions_lock);
	free(ts);
}

int tcp_add_region(struct rdps_tserver *s, struct rdps_region *r)
{
	struct tcp_server *ts = to_tcp_server(s);
	uint32_t t = r->desc.table_id;

	if (t >= RDPS_MAX_TABLES || !r->desc.dim)
		return -EINVAL;
	if (!ts->exposed)
		r->desc.remote_addr = r->desc.rkey = 0; /* no one-sided access over TCP */
	pthread_mutex_lock(&ts->regions_lock);
	/* The slot is empty (or another request of the same table is being
	 * refused meanwhile): workers read dim last, so they never take a
	 * half-written slot for a table. */
	__atomic_store_n(&ts->regions[t].desc.dim, 0, __ATOMIC_RELEASE);
	ts->regions[t].base = r->base;
	ts->regions[t].len = r->len;
	{
		struct rdps_table_desc d = r->desc;

		d.dim = 0;
		ts->regions[t].desc = d;
	}
	__atomic_store_n(&ts->regions[t].desc.dim, r->desc.dim, __ATOMIC_RELEASE);
	if (t >= ts->nregions)
		__atomic_store_n(&ts->nregions, t + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ts->regions_lock);
	return 0;
}

void tcp_remove_region(struct rdps_tserver *s, uint32_t table_id)
{
	struct tcp_server *ts = to_tcp_server(s);

	if (table_id >= RDPS_MAX_TABLES)
		return;
	pthread_mutex_lock(&ts->regions_lock);
	__atomic_store_n(&ts->regions[table_id].desc.dim, 0, __ATOMIC_RELEASE);
	memset(ts->regions[table_id].desc.name, 0, sizeof(ts->regions[table_id].desc.name));
	pthread_mutex_unlock(&ts->regions_lock);
}
