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
#include "wire.h"

#define TCP_RX_CHUNK (256u << 10)
/* Before admission only a hello (then an authentication) may come: read
 * that little at a time, so no peer makes the server buffer more. */
#define TCP_RX_HANDSHAKE (sizeof(struct rdps_wire_hdr) + sizeof(struct rdps_wire_hello))
#define TCP_HANDSHAKE_MS 10000          /* default time to be admitted */
#define TCP_FD_RESERVE 64               /* descriptors the default cap leaves free */
#define TCP_MAX_CONNS 65536u            /* default cap, at most */
#define TCP_REPLY_BUF_MIN (64ull << 20) /* default reply budget: RAM / 16 within these */
#define TCP_REPLY_BUF_MAX (1ull << 30)
#define TCP_ACCEPT_BATCH 256            /* accepts per event: connections are served in a flood */
#define TCP_BACKOFF_MIN_MS 50           /* out of descriptors: accept() paused this long, */
#define TCP_BACKOFF_MAX_MS 1000         /* doubling up to this */
#define TCP_LOG_EVERY_NS 1000000000ull  /* rate-limited lines: one a second at most */
#define TCP_KEY_LISTENER 0              /* epoll keys; connections are slot + 1 */
#define TCP_KEY_TIMER UINT64_MAX
#define TCP_KEY_INBOX (UINT64_MAX - 1)
#define TCP_SLOT_BITS 24                /* token: gen << 32 | worker << 24 | slot */

/* Intrusive circular list: the server's queues of connections. */
struct tcp_link {
	struct tcp_link *prev, *next;
};

static void link_init(struct tcp_link *l)
{
	l->prev = l->next = l;
}

static bool link_queued(const struct tcp_link *l)
{
	return l->next != l;
}

static void link_append(struct tcp_link *head, struct tcp_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static void link_remove(struct tcp_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	link_init(l);
}

struct tcp_sconn {
	int fd;
	uint32_t worker, slot, gen; /* its worker's conns[slot] */
	char peer[64];
	bool hello;            /* the core accepted the hello: a client */
	bool observer;
	bool awaiting_auth;    /* challenge sent, AUTH expected next */
	struct rdps_wire_hello pending;         /* the hello under authentication */
	uint8_t server_nonce[RDPS_NONCE_LEN];
	uint64_t session;      /* token given in the welcome */
	bool session_claimed;  /* an RDMA queue pair is bound to it */
	bool closing;          /* close once tx is drained */
	bool reading;          /* EPOLLIN armed */
	bool writing;          /* EPOLLOUT armed */
	bool stalled;          /* frames left in rx when it had to stop taking requests */
	uint32_t client_id, num_clients;
	uint64_t since_ns;     /* accepted at */
	uint64_t deadline_ns;  /* to be admitted by (while on the handshakes queue) */
	bool late_read;        /* read once more at its deadline */
	uint8_t *rx;           /* frames being received; rx[0] is a frame start */
	size_t rx_len, rx_cap;
	uint8_t *tx;           /* replies not yet sent, from tx_off */
	size_t tx_off, tx_len, tx_cap;
	size_t tx_counted;     /* tx_len as counted in the server's tx_total */
	struct tcp_link hs;    /* on the server's handshakes until admitted */
	struct tcp_link paused; /* on the server's paused: stopped by the reply budget */
	struct tcp_link ready; /* on the server's ready: needs progress() (see sconn_update) */
};

/* Events logged at most once a second, with the count of those held back. */
struct tcp_ratelog {
	uint64_t last_ns;      /* when the last line was written (0: never) */
	uint64_t held;         /* events since, not in a line yet */
	char peer[64];         /* the latest event's peer */
};

struct tcp_server;

/* What other threads hand a worker: a connection accepted for it, or the
 * reply to a deferred request of one of its connections. */
struct tcp_inbox_item {
	struct tcp_inbox_item *next;
	bool is_conn;
	int fd;                   /* is_conn: the accepted socket */
	uint64_t since_ns;        /* is_conn: when accepted */
	char peer[64];
	uint64_t token;           /* a reply: */
	uint32_t type;
	int status;
	size_t len;
	uint8_t payload[];
};

/* A thread's share of the server: its own connections, epoll set, timer,
 * queues and part of the reply budget. Only its thread touches them; other
 * threads go through the inbox. Worker 0 also owns the listener. */
struct tcp_worker {
	struct tcp_server *ts;
	uint32_t index;
	int epfd;
	int tfd;                  /* timerfd in the epoll set: the deadlines below */
	int efd;                  /* eventfd in the epoll set: the inbox has items */
	uint64_t timer_ns;        /* when tfd fires (absolute; 0: disarmed or fired) */
	bool in_progress;         /* progress() re-arms the timer before it returns */
	struct tcp_sconn **conns; /* slot -> connection or NULL */
	uint32_t nslots;
	uint32_t nconns;          /* open connections (read by worker 0 to balance) */
	uint32_t next_gen;
	size_t reply_budget;      /* the server's budget / workers */
	size_t tx_total;          /* reply bytes held in every connection's tx */
	struct tcp_link handshakes; /* connections not admitted yet, by deadline */
	struct tcp_link paused;   /* stopped by the reply budget, in the order they stopped */
	struct tcp_link ready;    /* to be served or closed with no event to come */
	pthread_mutex_t inbox_lock;
	struct tcp_inbox_item *inbox, **inbox_tail;
};

struct tcp_server {
	struct rdps_tserver base;
	int lfd;
	struct rdps_listen_params p;
	/* Slots 0..nregions-1 (atomic: tables come and go while workers
	 * serve); a slot whose desc.dim is 0 holds no table. regions_lock
	 * orders their changes with the welcomes built from them. */
	struct rdps_region regions[RDPS_MAX_TABLES];
	uint32_t nregions;
	bool exposed;             /* keep remote_addr/rkey (an RDMA backend's) */
	pthread_mutex_t regions_lock;
	rdps_tcp_session_closed_fn session_closed;
	void *session_ctx;
	rdps_tcp_bind_fn bind;    /* endpoint binding (ofi), or NULL */
	void *bind_ctx;
	/* limits (listen params with the defaults filled in) */
	uint32_t max_conns;
	uint64_t handshake_ns;
	uint32_t nconns;          /* open connections, all workers (atomic) */
	/* worker 0's: the listener */
	struct tcp_ratelog cap_log; /* connections refused over the cap */
	/* accept() out of descriptors: the listener leaves the epoll set */
	bool listening;           /* lfd is in the epoll set */
	uint64_t accept_retry_ns; /* when not: when it returns */
	uint32_t backoff_ms;
	uint64_t starved_ns;      /* start of the shortage (0: none) */
	uint64_t starved_accepts; /* connections accepted during it */
	uint32_t nworkers;
	struct tcp_worker workers[];
};

static inline struct tcp_server *to_tcp_server(struct rdps_tserver *s)
{
	return container_of(s, struct tcp_server, base);
}

static void stat_bad_frame(struct tcp_server *ts)
{
	if (ts->base.stats)
		RDPS_STAT_ADD(ts->base.stats->bad_frames, 1);
}

static int sconn_arm(struct tcp_worker *w, struct tcp_sconn *sc, bool rd, bool wr)
{
	struct epoll_event ev = { .events = (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0),
				  .data.u64 = (uint64_t)sc->slot + 1 };

	if (rd == sc->reading && wr == sc->writing)
		return 0;
	sc->reading = rd;
	sc->writing = wr;
	return epoll_ctl(w->epfd, EPOLL_CTL_MOD, sc->fd, &ev) ? -errno : 0;
}

/* Keeps w->tx_total, the reply bytes held for all connections, in step
 * with sc's buffer (sent bytes count until the buffer empties: they hold
 * memory as long). */
static void tx_sync(struct tcp_worker *w, struct tcp_sconn *sc)
{
	w->tx_total = w->tx_total - sc->tx_counted + sc->tx_len;
	sc->tx_counted = sc->tx_len;
}

static bool over_budget(const struct tcp_worker *w)
{
	return w->tx_total >= w->reply_budget;
}

/* Whether sc may take another request now: not closing, under the
 * per-connection mark, and while all connections together hold more than
 * the reply budget, only if none of its replies waits for its client to
 * read (a slow reader stops; a client that reads goes on, so none starves). */
static bool sconn_may_take(const struct tcp_worker *w, const struct tcp_sconn *sc)
{
	size_t unsent = sc->tx_len - sc->tx_off;

	return !sc->closing && unsent < TCP_TX_HIGH && (!unsent || !over_budget(w));
}

/*
 * Sets the timer (in the epoll set, so a caller polling the epoll
 * descriptor wakes too) to the next deadline: the listener's return after
 * a descriptor shortage, the oldest handshake's timeout, a held log line;
 * or at once when connections wait in the ready queue, or in the paused
 * one with the budget free again (only progress() may serve them).
 */
static void tcp_timer_arm(struct tcp_worker *w)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t next = UINT64_MAX;

	if (!w->index && !w->ts->listening)
		next = w->ts->accept_retry_ns;
	if (link_queued(&w->handshakes)) {
		struct tcp_sconn *sc = container_of(w->handshakes.next, struct tcp_sconn, hs);

		if (sc->deadline_ns < next)
			next = sc->deadline_ns;
	}
	if (!w->index && w->ts->cap_log.held && w->ts->cap_log.last_ns + TCP_LOG_EVERY_NS < next)
		next = w->ts->cap_log.last_ns + TCP_LOG_EVERY_NS;
	if (link_queued(&w->ready) || (link_queued(&w->paused) && !over_budget(w)))
		next = 1; /* an absolute time long past: fires at once */
	if (next == UINT64_MAX)
		next = 0; /* disarmed */
	if (next == w->timer_ns)
		return;
	w->timer_ns = next;
	its.it_value.tv_sec = (time_t)(next / 1000000000ull);
	its.it_value.tv_nsec = (long)(next % 1000000000ull);
	if (timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL))
		w->timer_ns = 0; /* cannot fail on a valid timerfd; progress() polls anyway */
}

/*
 * Arms sc's events for its state and files it in the server's queues:
 * "paused" while the reply budget alone stops it; "ready" when it may take
 * requests it has already read, or is to be closed, and no event will come
 * for that (progress() serves the ready queue before it returns).
 */
static int sconn_update(struct tcp_worker *w, struct tcp_sconn *sc)
{
	size_t unsent = sc->tx_len - sc->tx_off;
	bool take, by_budget;
	int ret;

	tx_sync(w, sc);
	take = sconn_may_take(w, sc);
	by_budget = !take && !sc->closing && unsent < TCP_TX_HIGH;
	if (by_budget && !link_queued(&sc->paused))
		link_append(&w->paused, &sc->paused);
	else if (!by_budget && link_queued(&sc->paused))
		link_remove(&sc->paused);
	if (((take && sc->stalled) || (sc->closing && !unsent)) && !link_queued(&sc->ready))
		link_append(&w->ready, &sc->ready);
	ret = sconn_arm(w, sc, take, unsent > 0);
	if (!w->in_progress)
		tcp_timer_arm(w); /* e.g. a deferred reply: progress() must run */
	return ret;
}

static void sconn_close(struct tcp_worker *w, struct tcp_sconn *sc)
{
	if (sc->hello) {
		struct rdps_request req = { .type = RDPS_REQ_BYE,
					    .client_id = sc->client_id,
					    .num_clients = sc->num_clients,
					    .observer = sc->observer,
					    .peer = sc->peer };

		w->ts->p.handle(w->ts->p.ctx, &req);
	}
	if (sc->session_claimed && w->ts->session_closed)
		w->ts->session_closed(w->ts->session_ctx, sc->session);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, sc->fd, NULL);
	close(sc->fd);
	w->conns[sc->slot] = NULL;
	__atomic_fetch_sub(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&w->ts->nconns, 1, __ATOMIC_RELAXED);
	w->tx_total -= sc->tx_counted;
	link_remove(&sc->hs);
	link_remove(&sc->paused);
	link_remove(&sc->ready);
	free(sc->rx);
	free(sc->tx);
	free(sc);
	if (!w->in_progress)
		tcp_timer_arm(w); /* the budget it held may resume others */
}

/* Appends a frame, returns a pointer to its payload (len bytes), or NULL. */
static void *tx_frame(struct tcp_sconn *sc, uint8_t type, int32_t status, uint32_t len)
{
	struct rdps_wire_hdr h;
	void *p;

	if (rdps_reserve((void **)&sc->tx, &sc->tx_cap, sc->tx_len + sizeof(h) + len))
		return NULL;
	rdps_wire_hdr_init(&h, type, len, status);
	memcpy(sc->tx + sc->tx_len, &h, sizeof(h));
	p = sc->tx + sc->tx_len + sizeof(h);
	sc->tx_len += sizeof(h) + len;
	return p;
}

static int tx_error(struct tcp_sconn *sc, uint8_t type, int status, const char *msg)
{
	size_t n = strnlen(msg, RDPS_WIRE_ERRMSG_MAX - 8);
	size_t padded = RDPS_ALIGN_UP(n ? n : 1, 8);
	char *p = tx_frame(sc, type | RDPS_WIRE_REPLY, status, (uint32_t)padded);

	if (!p)
		return -ENOMEM;
	memset(p, 0, padded);
	memcpy(p, msg, n);
	return 0;
}

/* Sends what it can without blocking. */
static int sconn_flush(struct tcp_worker *w, struct tcp_sconn *sc)
{
	while (sc->tx_off < sc->tx_len) {
		ssize_t n = send(sc->fd, sc->tx + sc->tx_off, sc->tx_len - sc->tx_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		sc->tx_off += (size_t)n;
	}
	if (sc->tx_off == sc->tx_len)
		sc->tx_off = sc->tx_len = 0;
	return sconn_update(w, sc);
}

/* Closes sc after a fatal error, or once a closing connection's replies
 * are out. */
static void sconn_settle(struct tcp_worker *w, struct tcp_sconn *sc, int ret)
{
	if (ret || (sc->closing && sc->tx_len == sc->tx_off))
		sconn_close(w, sc);
}

static void count_error(struct tcp_server *ts, int type)
{
	if (ts->base.stats && type > 0 && type < 16)
		RDPS_STAT_ADD(ts->base.stats->errors[type], 1);
}

/* Logs and answers an error for a request whose framing was intact. */
static int refuse(struct tcp_server *ts, struct tcp_sconn *sc, int type,
		  int status, const char *why)
{
	rdps_warn("server %u: client %s: %s request refused: %s",
		  ts->p.server_id, sc->peer, rdps_req_name(type), why);
	count_error(ts, type);
	return tx_error(sc, (uint8_t)type, status, why);
}

static uint64_t make_token(const struct tcp_sconn *sc)
{
	return ((uint64_t)sc->gen << 32) | ((uint64_t)sc->worker << TCP_SLOT_BITS) | sc->slot;
}

/* The hello is genuine (authenticated, or no secret): let the core admit
 * the client, then send the welcome, with the server's proof if asked. */
static int admit(struct tcp_server *ts, struct tcp_sconn *sc, bool authenticated)
{
	const struct rdps_wire_hello *hello = &sc->pending;
	char why[256] = "";
	struct rdps_request req = { .type = RDPS_REQ_HELLO, .peer = sc->peer,
				    .errmsg = why, .errlen = sizeof(why) };
	struct rdps_wire_welcome w;
	uint8_t *p;
	int ret;

	req.client_id = hello->client_id;
	req.num_clients = hello->num_clients;
	req.observer = hello->flags & RDPS_HELLO_OBSERVER;
	req.pushed_rows = hello->pushed_rows;
	ret = ts->p.handle(ts->p.ctx, &req);
	if (ret < 0) {
		refuse(ts, sc, RDPS_REQ_HELLO, ret, why[0] ? why : rdps_strerror(ret));
		sc->closing = true;
		return 0;
	}
	ret = rdps_random_bytes(&sc->session, sizeof(sc->session));
	if (ret)
		return ret;
	sc->hello = true;
	sc->observer = req.observer;
	sc->client_id = hello->client_id;
	sc->num_clients = hello->num_clients;
	/* The tables as they are now (clients may have made some). */
	pthread_mutex_lock(&ts->regions_lock);
	p = tx_frame(sc, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, 0,
		     (uint32_t)rdps_wire_welcome_size(ts->nregions));
	if (p)
		rdps_wire_build_welcome(p, ts->p.server_id, ts->p.num_servers, ts->regions,
					ts->nregions);
	pthread_mutex_unlock(&ts->regions_lock);
	if (!p)
		return -ENOMEM;
	memcpy(&w, p, sizeof(w));
	w.session = sc->session;
	w.instance = req.welcome.instance;
	w.rows_held = req.welcome.rows_held;
	w.ckpt_seq = req.welcome.ckpt_seq;
	w.ckpt_age_ms = req.welcome.ckpt_age_ms;
	if (authenticated) {
		w.flags |= RDPS_WELCOME_AUTHENTICATED;
		rdps_auth_mac(ts->p.secret, RDPS_AUTH_SERVER_LABEL, hello->nonce, RDPS_NONCE_LEN,
			      sc->server_nonce, RDPS_NONCE_LEN, &w.session, sizeof(w.session),
			      w.proof);
	}
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int handle_hello(struct tcp_server *ts, struct tcp_sconn *sc,
			const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	char why[256] = "";
	uint8_t *p;
	int ret;

	if (sc->hello || sc->awaiting_auth) {
		refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, "second hello on one connection");
		sc->closing = true;
		return 0;
	}
	if (h->len != sizeof(sc->pending)) {
		snprintf(why, sizeof(why), "hello of %u bytes, want %zu", h->len,
			 sizeof(sc->pending));
		refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, why);
		sc->closing = true;
		return 0;
	}
	memcpy(&sc->pending, payload, sizeof(sc->pending));
	if (sc->pending.server_id != ts->p.server_id) {
		snprintf(why, sizeof(why),
			 "client expected server %u at this address, this is server %u (ip_configs differ?)",
			 sc->pending.server_id, ts->p.server_id);
		refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, why);
		sc->closing = true;
		return 0;
	}
	if (!ts->p.secret || !ts->p.secret->len)
		return admit(ts, sc, false);
	/* Nothing about the job leaves before the client proves the secret. */
	ret = rdps_random_bytes(sc->server_nonce, sizeof(sc->server_nonce));
	if (ret)
		return ret;
	p = tx_frame(sc, RDPS_WIRE_CHALLENGE, 0, RDPS_NONCE_LEN);
	if (!p)
		return -ENOMEM;
	memcpy(p, sc->server_nonce, RDPS_NONCE_LEN);
	sc->awaiting_auth = true;
	return 0;
}

static int handle_auth(struct tcp_server *ts, struct tcp_sconn *sc,
		       const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	uint8_t want[RDPS_MAC_LEN];

	if (!sc->awaiting_auth || h->len != RDPS_MAC_LEN) {
		rdps_warn("server %u: client %s: unexpected authentication frame; closing",
			  ts->p.server_id, sc->peer);
		stat_bad_frame(ts);
		return -EPROTO;
	}
	sc->awaiting_auth = false;
	rdps_auth_mac(ts->p.secret, RDPS_AUTH_CLIENT_LABEL, sc->server_nonce, RDPS_NONCE_LEN,
		      sc->pending.nonce, RDPS_NONCE_LEN, &sc->pending, sizeof(sc->pending), want);
	if (!rdps_auth_equal(want, payload)) {
		if (ts->base.stats)
			RDPS_STAT_ADD(ts->base.stats->auth_failures, 1);
		refuse(ts, sc, RDPS_REQ_HELLO, -EACCES,
		       "authentication failed: the client's shared secret differs from the server's");
		sc->closing = true;
		return 0;
	}
	return admit(ts, sc, true);
}

/* An endpoint binding (tcp.h): once per admitted client connection, to
 * the backend's hook; its answer or its reason goes back. */
static int handle_bind(struct tcp_server *ts, struct tcp_sconn *sc,
		       const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	struct rdps_tcp_bind_who who = { .session = sc->session, .client_id = sc->client_id,
					 .num_clients = sc->num_clients, .peer = sc->peer };
	uint8_t rep[RDPS_WIRE_BIND_MAX];
	size_t rep_len = 0;
	char why[256] = "";
	void *p;
	int ret;

	if (!ts->bind)
		snprintf(why, sizeof(why), "this server's transport binds no endpoints (is it "
			 "running with another --transport than the client?)");
	else if (sc->observer)
		snprintf(why, sizeof(why), "an observer connection binds no endpoint");
	else if (sc->session_claimed)
		snprintf(why, sizeof(why), "this connection is bound already (one endpoint per "
			 "control connection)");
	else if (h->len > RDPS_WIRE_BIND_MAX)
		snprintf(why, sizeof(why), "bind request of %u bytes (at most %d)", h->len,
			 RDPS_WIRE_BIND_MAX);
	if (why[0]) {
		rdps_warn("server %u: client %s: endpoint binding refused: %s", ts->p.server_id,
			  sc->peer, why);
		return tx_error(sc, RDPS_WIRE_BIND, -EPROTO, why);
	}
	ret = ts->bind(ts->bind_ctx, &who, payload, h->len, rep, &rep_len, why, sizeof(why));
	if (ret < 0 || rep_len > sizeof(rep)) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rdps_strerror(ret < 0 ? ret : -EOVERFLOW));
		rdps_warn("server %u: client %s: endpoint binding refused: %s", ts->p.server_id,
			  sc->peer, why);
		return tx_error(sc, RDPS_WIRE_BIND, ret < 0 ? ret : -EOVERFLOW, why);
	}
	sc->session_claimed = true;
	p = tx_frame(sc, RDPS_WIRE_BIND | RDPS_WIRE_REPLY, 0, (uint32_t)rep_len);
	if (!p)
		return -ENOMEM;
	memcpy(p, rep, rep_len);
	return 0;
}

/* One complete frame (header checked). Returns -errno only for fatal
 * per-connection errors (the connection is then closed). */
static int handle_frame(struct tcp_server *ts, struct tcp_sconn *sc,
			const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	char why[256] = "";
	struct rdps_request req = {
		.type = h->type, .client_id = sc->client_id,
		.num_clients = sc->num_clients, .observer = sc->observer,
		.peer = sc->peer, .token = make_token(sc), .errmsg = why, .errlen = sizeof(why),
	};
	struct rdps_server_stats st;
	struct rdps_table_desc desc;
	size_t tx_mark = sc->tx_len;
	int ret;

	if (h->type == RDPS_REQ_HELLO)
		return handle_hello(ts, sc, h, payload);
	if (h->type == RDPS_WIRE_AUTH)
		return handle_auth(ts, sc, h, payload);
	if (!sc->hello) {
		rdps_warn("server %u: client %s: sent a %s before the hello; closing",
			  ts->p.server_id, sc->peer, rdps_req_name(h->type));
		stat_bad_frame(ts);
		return -EPROTO;
	}
	if (h->type == RDPS_WIRE_BIND)
		return handle_bind(ts, sc, h, payload);
	switch (h->type) {
	case RDPS_REQ_PULL:
	case RDPS_REQ_PUSH:
	case RDPS_REQ_SET: {
		struct rdps_wire_rows rows;
		uint32_t len = h->len, nregions = __atomic_load_n(&ts->nregions, __ATOMIC_ACQUIRE);

		/* Pushes and sets are padded to 8 bytes; accept exactly that
		 * padding. */
		if (h->type != RDPS_REQ_PULL && len >= sizeof(rows)) {
			memcpy(&rows, payload, sizeof(rows));
			if (rows.table < nregions &&
			    (rows.n * (uint64_t)ts->regions[rows.table].desc.dim) % 2)
				len -= 4;
		}
		ret = rdps_wire_check_rows(h->type, payload, len, ts->regions, nregions, why,
					   sizeof(why));
		if (ret)
			return refuse(ts, sc, h->type, ret, why);
		memcpy(&rows, payload, sizeof(rows));
		req.table = rows.table;
		req.n = rows.n;
		req.ids = (const uint64_t *)(payload + sizeof(rows));
		if (h->type != RDPS_REQ_PULL) {
			/* a set's rows travel where a push's gradients do */
			req.grads = (const float *)(payload + sizeof(rows) + (size_t)rows.n * 8);
		} else {
			uint64_t bytes = (uint64_t)rows.n * ts->regions[rows.table].desc.dim * 4;

			if (bytes > RDPS_WIRE_MAX_FRAME) {
				snprintf(why, sizeof(why),
					 "pull of %u rows would need a %llu-byte reply, over the limit",
					 rows.n, (unsigned long long)bytes);
				return refuse(ts, sc, h->type, -EMSGSIZE, why);
			}
			req.rows_out = tx_frame(sc, RDPS_REQ_PULL | RDPS_WIRE_REPLY, 0,
						(uint32_t)bytes);
			if (!req.rows_out)
				return -ENOMEM;
		}
		break;
	}
	case RDPS_REQ_FLUSH:
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_STATS:
	case RDPS_REQ_SHUTDOWN:
	case RDPS_REQ_CHECKPOINT:
		if (h->len) {
			snprintf(why, sizeof(why), "%s request with a %u-byte body",
				 rdps_req_name(h->type), h->len);
			return refuse(ts, sc, h->type, -EPROTO, why);
		}
		if (h->type == RDPS_REQ_STATS) {
			req.reply = &st;
			req.reply_cap = sizeof(st);
		}
		break;
	case RDPS_REQ_TABLE:
		if (h->len != sizeof(struct rdps_table_req)) {
			snprintf(why, sizeof(why), "table request of %u bytes (want %zu)", h->len,
				 sizeof(struct rdps_table_req));
			return refuse(ts, sc, h->type, -EPROTO, why);
		}
		req.payload = payload;
		req.payload_len = h->len;
		req.reply = &desc;
		req.reply_cap = sizeof(desc);
		break;
	case RDPS_REQ_SAMPLE: {
		struct rdps_sample_req sr;

		ret = rdps_wire_check_sample(payload, h->len, why, sizeof(why));
		if (ret)
			return refuse(ts, sc, h->type, ret, why);
		memcpy(&sr, payload, sizeof(sr));
		req.payload = payload;
		req.payload_len = h->len;
		/* The reply is built in place, in a frame of its largest size
		 * that is cut to what the handler wrote. */
		req.reply_cap = rdps_sample_reply_bound(sr.n, sr.fanout);
		req.reply = tx_frame(sc, RDPS_REQ_SAMPLE | RDPS_WIRE_REPLY, 0,
				     (uint32_t)req.reply_cap);
		if (!req.reply)
			return -ENOMEM;
		break;
	}
	case RDPS_REQ_ALLREDUCE:
		if (!h->len || h->len % 8 || h->len > RDPS_ALLREDUCE_MAX * 8) {
			snprintf(why, sizeof(why), "allreduce of %u bytes (want 8..%d, multiple of 8)",
				 h->len, RDPS_ALLREDUCE_MAX * 8);
			return refuse(ts, sc, h->type, -EPROTO, why);
		}
		req.payload = payload;
		req.payload_len = h->len;
		break;
	default:
		snprintf(why, sizeof(why), "unknown request type %u", h->type);
		return refuse(ts, sc, h->type, -EOPNOTSUPP, why);
	}

	ret = ts->p.handle(ts->p.ctx, &req);
	if (ret == RDPS_REPLY_DEFERRED)
		return 0;
	if (ret < 0) {
		sc->tx_len = tx_mark; /* drop a reserved pull reply */
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rdps_strerror(ret));
		return refuse(ts, sc, h->type, ret, why);
	}
	if (h->type == RDPS_REQ_PULL)
		return 0; /* rows already in place */
	if (h->type == RDPS_REQ_SAMPLE) {
		struct rdps_wire_hdr rh;

		rdps_wire_hdr_init(&rh, RDPS_REQ_SAMPLE | RDPS_WIRE_REPLY,
				   (uint32_t)req.reply_len, 0);
		memcpy(sc->tx + tx_mark, &rh, sizeof(rh));
		sc->tx_len = tx_mark + sizeof(rh) + req.reply_len;
		return 0;
	}
	if (h->type == RDPS_REQ_STATS || h->type == RDPS_REQ_TABLE) {
		void *p = tx_frame(sc, h->type | RDPS_WIRE_REPLY, 0, (uint32_t)req.reply_len);

		if (!p)
			return -ENOMEM;
		memcpy(p, req.reply, req.reply_len);
		return 0;
	}
	return tx_frame(sc, h->type | RDPS_WIRE_REPLY, 0, 0) ? 0 : -ENOMEM;
}

/* Before admission only the handshake's frames, of their exact sizes, may
 * come: anything else is refused on its header, its payload never read. */
static bool handshake_frame(const struct rdps_wire_hdr *h)
{
	return (h->type == RDPS_REQ_HELLO && h->len == sizeof(struct rdps_wire_hello)) ||
	       (h->type == RDPS_WIRE_AUTH && h->len == RDPS_MAC_LEN);
}

/* After a handshake frame: an admitted connection has no deadline any more.
 * A hello read only after its deadline came in time (else the connection
 * would be closed) but waited for a busy server (e.g. writing a checkpoint):
 * its authentication gets a full timeout of its own, once. */
static void handshake_step(struct tcp_worker *w, struct tcp_sconn *sc)
{
	uint64_t now;

	if (sc->hello) {
		link_remove(&sc->hs);
		return;
	}
	if (!sc->awaiting_auth || (now = rdps_now_ns()) < sc->deadline_ns)
		return;
	sc->deadline_ns = now + w->ts->handshake_ns;
	link_remove(&sc->hs);
	link_append(&w->handshakes, &sc->hs); /* the latest deadline: the queue stays sorted */
}

/* Parses complete frames from rx. Returns -errno to close the conn. */
static int sconn_process(struct tcp_worker *w, struct tcp_sconn *sc)
{
	size_t off = 0;
	int ret = 0;

	sc->stalled = false;
	while (sc->rx_len - off >= sizeof(struct rdps_wire_hdr)) {
		struct rdps_wire_hdr h;
		char why[256];

		if (!sconn_may_take(w, sc)) {
			/* No readable event will come for these bytes. */
			sc->stalled = !sc->closing;
			break;
		}
		memcpy(&h, sc->rx + off, sizeof(h));
		ret = rdps_wire_check_hdr(&h, why, sizeof(why));
		if (ret) {
			rdps_warn("server %u: client %s: %s; closing the connection",
				  w->ts->p.server_id, sc->peer, why);
			stat_bad_frame(w->ts);
			/* Tell a peer of another version why, then close. */
			if (ret == -EPROTO && h.magic == RDPS_WIRE_MAGIC)
				tx_error(sc, h.type, ret, why);
			sc->closing = true;
			ret = 0;
			break;
		}
		if (!sc->hello && !handshake_frame(&h)) {
			rdps_warn("server %u: client %s: a frame of type %u (%s) announcing %u bytes "
				  "before the handshake completed (only a %zu-byte hello, then a "
				  "%d-byte authentication, may come first); closing the connection",
				  w->ts->p.server_id, sc->peer, h.type,
				  h.type == RDPS_WIRE_AUTH ? "authentication" : rdps_req_name(h.type),
				  h.len, sizeof(struct rdps_wire_hello), RDPS_MAC_LEN);
			stat_bad_frame(w->ts);
			sc->closing = true;
			break;
		}
		if (sc->rx_len - off < sizeof(h) + h.len) {
			/* The frame moves to rx[0] below; make room for it. */
			if (rdps_reserve((void **)&sc->rx, &sc->rx_cap, sizeof(h) + h.len))
				ret = -ENOMEM;
			break;
		}
		if (off % 8) {
			/* Only a misbehaving peer sends frames of odd lengths;
			 * realign so ids and gradients are read aligned. */
			memmove(sc->rx, sc->rx + off, sc->rx_len - off);
			sc->rx_len -= off;
			off = 0;
		}
		ret = handle_frame(w->ts, sc, &h, sc->rx + off + sizeof(h));
		tx_sync(w, sc);
		if (link_queued(&sc->hs))
			handshake_step(w, sc);
		if (ret)
			break;
		off += sizeof(h) + h.len;
	}
	if (off) {
		memmove(sc->rx, sc->rx + off, sc->rx_len - off);
		sc->rx_len -= off;
	}
	return ret;
}

static int sconn_read(struct tcp_worker *w, struct tcp_sconn *sc)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		/* Before admission, no more than the handshake needs. */
		size_t chunk = sc->hello ? TCP_RX_CHUNK : TCP_RX_HANDSHAKE;
		ssize_t n;
		int ret;

		if (rdps_reserve((void **)&sc->rx, &sc->rx_cap, sc->rx_len + chunk))
			return -ENOMEM;
		n = recv(sc->fd, sc->rx + sc->rx_len, sc->hello ? sc->rx_cap - sc->rx_len : chunk,
			 MSG_DONTWAIT);
		if (n == 0) {
			if (sc->rx_len)
				rdps_warn("server %u: client %s disconnected mid-frame (%zu bytes of a frame received)",
					  w->ts->p.server_id, sc->peer, sc->rx_len);
			else
				rdps_dbg("server %u: client %s disconnected",
					 w->ts->p.server_id, sc->peer);
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			rdps_warn("server %u: client %s: %s", w->ts->p.server_id, sc->peer,
				  strerror(errno));
			return -errno;
		}
		sc->rx_len += (size_t)n;
		ret = sconn_process(w, sc);
		if (ret)
			return ret;
		if (!sconn_may_take(w, sc))
			return 0;
	}
	return 0;
}

/* One line a second at most for connections refused over the cap. */
static void cap_log_write(struct tcp_server *ts, uint64_t now)
{
	rdps_warn("server %u: refused %llu connection(s) at the cap of %u open connections "
		  "(--max-connections), the latest from %s",
		  ts->p.server_id, (unsigned long long)ts->cap_log.held, ts->max_conns,
		  ts->cap_log.peer);
	ts->cap_log.held = 0;
	ts->cap_log.last_ns = now;
}

static void refuse_over_cap(struct tcp_server *ts, const struct sockaddr_storage *ss)
{
	uint64_t now = rdps_now_ns();

	if (ts->base.stats)
		RDPS_STAT_ADD(ts->base.stats->conns_refused, 1);
	ts->cap_log.held++;
	rdps_sock_addr_str((const struct sockaddr *)ss, ts->cap_log.peer, sizeof(ts->cap_log.peer));
	if (!ts->cap_log.last_ns || now - ts->cap_log.last_ns >= TCP_LOG_EVERY_NS)
		cap_log_write(ts, now);
}

/* accept() is out of descriptors (or memory): rather than spin on a
 * listener that stays readable, leave it out of the epoll set for a while,
 * 50 ms doubling to 1 s, and serve the connections open meanwhile. One
 * line per shortage. */
static void accept_pause(struct tcp_server *ts, int err)
{
	uint64_t now = rdps_now_ns();

	if (ts->listening && !epoll_ctl(ts->workers[0].epfd, EPOLL_CTL_DEL, ts->lfd, NULL))
		ts->listening = false;
	if (!ts->starved_ns) {
		struct rlimit rl;
		char lim[32] = "?";

		if (!getrlimit(RLIMIT_NOFILE, &rl))
			snprintf(lim, sizeof(lim), rl.rlim_cur == RLIM_INFINITY ? "unlimited" : "%llu",
				 (unsigned long long)rl.rlim_cur);
		rdps_warn("server %u: cannot accept connections: %s, with %u connection(s) open "
			  "and RLIMIT_NOFILE %s; retrying every %d..%d ms, serving the open ones "
			  "(raise ulimit -n or lower --max-connections)",
			  ts->p.server_id, strerror(err), __atomic_load_n(&ts->nconns, __ATOMIC_RELAXED), lim, TCP_BACKOFF_MIN_MS,
			  TCP_BACKOFF_MAX_MS);
		ts->starved_ns = now;
		ts->starved_accepts = 0;
		ts->backoff_ms = TCP_BACKOFF_MIN_MS;
	} else if (ts->backoff_ms < TCP_BACKOFF_MAX_MS) {
		ts->backoff_ms = ts->backoff_ms * 2 < TCP_BACKOFF_MAX_MS ? ts->backoff_ms * 2
									 : TCP_BACKOFF_MAX_MS;
	}
	ts->accept_retry_ns = now + (uint64_t)ts->backoff_ms * 1000000ull;
}

/* The backlog is empty: a shortage, if any, is over. */
static void accept_drained(struct tcp_server *ts)
{
	if (!ts->starved_ns)
		return;
	rdps_info("server %u: accepting connections again after %.1f s short of descriptors "
		  "(%llu accepted meanwhile, %u open)", ts->p.server_id,
		  (rdps_now_ns() - ts->starved_ns) / 1e9,
		  (unsigned long long)ts->starved_accepts, __atomic_load_n(&ts->nconns, __ATOMIC_RELAXED));
	ts->starved_ns = 0;
}

/* Makes fd (accepted at since_ns) a connection of worker w, counted in
 * w->nconns and the server's already. On failure the socket is closed. */
static int sconn_add(struct tcp_worker *w, int fd, uint64_t since_ns, const char *peer)
{
	struct epoll_event ev;
	struct tcp_sconn *sc;
	uint32_t slot;

	for (slot = 0; slot < w->nslots && w->conns[slot]; slot++)
		;
	if (slot == w->nslots) {
		uint32_t n = w->nslots ? w->nslots * 2 : 16;
		struct tcp_sconn **c = n <= 1u << TCP_SLOT_BITS ? realloc(w->conns, n * sizeof(*c))
							      : NULL;

		if (!c)
			goto err_close;
		memset(c + w->nslots, 0, (n - w->nslots) * sizeof(*c));
		w->conns = c;
		w->nslots = n;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		goto err_close;
	sc->fd = fd;
	sc->worker = w->index;
	sc->slot = slot;
	sc->gen = ++w->next_gen;
	sc->reading = true;
	sc->since_ns = since_ns;
	sc->deadline_ns = since_ns + w->ts->handshake_ns;
	link_init(&sc->hs);
	link_init(&sc->paused);
	link_init(&sc->ready);
	snprintf(sc->peer, sizeof(sc->peer), "%s", peer);
	ev.events = EPOLLIN;
	ev.data.u64 = (uint64_t)slot + 1;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		free(sc);
		goto err_close;
	}
	w->conns[slot] = sc;
	link_append(&w->handshakes, &sc->hs);
	if (!w->in_progress)
		tcp_timer_arm(w);
	rdps_dbg("server %u: connection from %s (thread %u)", w->ts->p.server_id, sc->peer,
		 w->index);
	return 0;

err_close:
	rdps_warn("server %u: client %s: no memory for the connection; closing it",
		  w->ts->p.server_id, peer);
	close(fd);
	__atomic_fetch_sub(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&w->ts->nconns, 1, __ATOMIC_RELAXED);
	return -ENOMEM;
}

static void inbox_put(struct tcp_worker *w, struct tcp_inbox_item *it)
{
	uint64_t one = 1;

	it->next = NULL;
	pthread_mutex_lock(&w->inbox_lock);
	*w->inbox_tail = it;
	w->inbox_tail = &it->next;
	pthread_mutex_unlock(&w->inbox_lock);
	/* Cannot fail short of an overflow of 2^64 - 1 unread wakeups. */
	if (write(w->efd, &one, sizeof(one)) < 0)
		rdps_dbg("server: waking thread %u: %s", w->index, strerror(errno));
}

/* The worker with the fewest connections (worker 0's own first on a tie). */
static struct tcp_worker *pick_worker(struct tcp_server *ts)
{
	struct tcp_worker *best = &ts->workers[0];
	uint32_t least = __atomic_load_n(&best->nconns, __ATOMIC_RELAXED);

	for (uint32_t i = 1; i < ts->nworkers; i++) {
		uint32_t n = __atomic_load_n(&ts->workers[i].nconns, __ATOMIC_RELAXED);

		if (n < least) {
			least = n;
			best = &ts->workers[i];
		}
	}
	return best;
}

/* Worker 0: accepts, and gives each connection to the least busy worker. */
static int tcp_accept(struct tcp_server *ts)
{
	for (int batch = 0; batch < TCP_ACCEPT_BATCH; batch++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_worker *to;
		char peer[64];
		int fd, one = 1;

		fd = accept4(ts->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			switch (errno) {
			case EAGAIN:
				accept_drained(ts);
				return 0;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				accept_pause(ts, errno);
				return 0;
			case EINTR:
			case ECONNABORTED:
			/* Errors of the connection, not the listener (accept(2)). */
			case EPERM:
			case EPROTO:
			case ENOPROTOOPT:
			case ENETDOWN:
			case ENETUNREACH:
			case EHOSTDOWN:
			case EHOSTUNREACH:
			case ENONET:
			case EOPNOTSUPP:
				continue;
			default:
				return -errno;
			}
		}
		if (ts->starved_ns) {
			ts->starved_accepts++;
			ts->backoff_ms = TCP_BACKOFF_MIN_MS; /* descriptors are coming back */
		}
		if (__atomic_load_n(&ts->nconns, __ATOMIC_RELAXED) >= ts->max_conns) {
			close(fd);
			refuse_over_cap(ts, &ss);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		{
			/* A client host that vanished without closing is noticed
			 * in about 25 s (and its job's barriers fail). */
			int idle = 10, intvl = 5, cnt = 3;

			setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		}
		rdps_sock_addr_str((struct sockaddr *)&ss, peer, sizeof(peer));
		__atomic_fetch_add(&ts->nconns, 1, __ATOMIC_RELAXED);
		if (ts->base.stats)
			RDPS_STAT_ADD(ts->base.stats->connections, 1);
		to = pick_worker(ts);
		/* Counted now, so the next accept balances with it. */
		__atomic_fetch_add(&to->nconns, 1, __ATOMIC_RELAXED);
		if (to == &ts->workers[0]) {
			sconn_add(to, fd, rdps_now_ns(), peer);
		} else {
			struct tcp_inbox_item *it = calloc(1, sizeof(*it));

			if (!it) {
				close(fd);
				__atomic_fetch_sub(&to->nconns, 1, __ATOMIC_RELAXED);
				__atomic_fetch_sub(&ts->nconns, 1, __ATOMIC_RELAXED);
				continue;
			}
			it->is_conn = true;
			it->fd = fd;
			it->since_ns = rdps_now_ns();
			snprintf(it->peer, sizeof(it->peer), "%s", peer);
			inbox_put(to, it);
		}
	}
	return 0; /* more may wait: the listener stays readable */
}

/* Connections that did not finish their handshake in time. */
static void expire_handshakes(struct tcp_worker *w, uint64_t now)
{
	while (link_queued(&w->handshakes)) {
		struct tcp_sconn *sc = container_of(w->handshakes.next, struct tcp_sconn, hs);

		if (now < sc->deadline_ns)
			break;
		if (!sc->late_read && !sc->closing) {
			int ret;

			/* Bytes that came in time but wait behind other events
			 * (or a busy server) count: read them first, once. */
			sc->late_read = true;
			ret = sconn_read(w, sc);
			if (!ret)
				ret = sconn_flush(w, sc);
			sconn_settle(w, sc, ret);
			continue; /* admitted, given time to authenticate, or due still */
		}
		rdps_warn("server %u: client %s: no handshake after %.1f s (%s; the limit is "
			  "%.1f s, --handshake-timeout); closing the connection",
			  w->ts->p.server_id, sc->peer, (now - sc->since_ns) / 1e9,
			  sc->closing ? "refused, its reply not read" :
			  sc->awaiting_auth ? "challenged, no authentication came" :
			  sc->rx_len ? "part of a hello received" : "nothing received",
			  w->ts->handshake_ns / 1e9);
		if (w->ts->base.stats)
			RDPS_STAT_ADD(w->ts->base.stats->handshake_timeouts, 1);
		sconn_close(w, sc);
	}
}

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
	expire_handshakes(w, now);
	if (!w->index && w->ts->cap_log.held && now - w->ts->cap_log.last_ns >= TCP_LOG_EVERY_NS)
		cap_log_write(w->ts, now);
}

/* Serves frames sc read before it had to stop taking requests. */
static int sconn_resume(struct tcp_worker *w, struct tcp_sconn *sc)
{
	int ret = 0;

	while (!ret && sc->stalled && sconn_may_take(w, sc)) {
		ret = sconn_process(w, sc);
		if (!ret)
			ret = sconn_flush(w, sc);
	}
	return ret;
}

/*
 * What no event will announce: connections the reply budget stopped,
 * resumed in the order they stopped while the budget lasts (one that
 * stops again goes to the back), and the ready queue (frames read before a
 * pause at TCP_TX_HIGH, connections to close).
 */
static void serve_waiting(struct tcp_worker *w)
{
	while (!over_budget(w) && link_queued(&w->paused)) {
		struct tcp_sconn *sc = container_of(w->paused.next, struct tcp_sconn, paused);
		int ret;

		link_remove(&sc->paused);
		ret = sconn_update(w, sc); /* reads again */
		if (!ret)
			ret = sconn_resume(w, sc);
		sconn_settle(w, sc, ret);
	}
	while (link_queued(&w->ready)) {
		struct tcp_sconn *sc = container_of(w->ready.next, struct tcp_sconn, ready);

		link_remove(&sc->ready);
		sconn_settle(w, sc, sconn_resume(w, sc));
	}
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

static size_t default_reply_budget(void)
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

static int worker_init(struct tcp_server *ts, uint32_t index, size_t budget)
{
	struct tcp_worker *w = &ts->workers[index];
	struct epoll_event tev = { .events = EPOLLIN, .data.u64 = TCP_KEY_TIMER };
	struct epoll_event iev = { .events = EPOLLIN, .data.u64 = TCP_KEY_INBOX };

	w->ts = ts;
	w->index = index;
	w->reply_budget = budget;
	link_init(&w->handshakes);
	link_init(&w->paused);
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
	size_t budget;
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
	budget = p->max_reply_buffer ? p->max_reply_buffer : default_reply_budget();
	memcpy(ts->regions, p->regions, p->num_regions * sizeof(*p->regions));
	ts->nregions = p->num_regions;
	ts->exposed = exposed;
	ts->p.regions = ts->regions;
	pthread_mutex_init(&ts->regions_lock, NULL);
	for (uint32_t i = 0; !exposed && i < p->num_regions; i++) {
		ts->regions[i].desc.remote_addr = 0; /* no one-sided access over TCP */
		ts->regions[i].desc.rkey = 0;
	}
	/* Each worker holds its share of the replies' budget. */
	for (uint32_t i = 0; i < nworkers; i++) {
		ret = worker_init(ts, i, budget / nworkers);
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
		 "%zu MiB of queued replies", p->server_id, nworkers, ts->max_conns,
		 ts->handshake_ns / 1e9, budget >> 20);
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
	/* An error's payload is its reason. */
	if (status < 0) {
		char why[RDPS_WIRE_ERRMSG_MAX];

		snprintf(why, sizeof(why), "%.*s", (int)(payload ? len : 0),
			 payload ? (const char *)payload : "");
		ret = tx_error(sc, (uint8_t)type, status, why[0] ? why : rdps_strerror(status));
	} else {
		void *p = tx_frame(sc, (uint8_t)type | RDPS_WIRE_REPLY, 0, (uint32_t)len);

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
			sconn_add(w, it->fd, it->since_ns, it->peer);
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
		if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !sc->closing)
			cret = sconn_read(w, sc);
		if (!cret)
			cret = sconn_flush(w, sc);
		/* Frames read before a pause get no new readable event: once
		 * the connection may take them, sconn_update() queued it in
		 * ready, which serve_waiting() serves below. */
		sconn_settle(w, sc, cret);
	}
	if (!ret) {
		tcp_timers(w);
		serve_waiting(w);
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
	inbox_put(w, it);
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
