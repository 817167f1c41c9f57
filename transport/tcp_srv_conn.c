// SPDX-License-Identifier: MIT
/*
 * TCP server: one connection's state. Its receive buffer (frames being
 * read), its send buffer (replies not yet sent), the server's two budgets
 * they count against (tcp_srv.h), the queues a connection waits in when a
 * budget or its client stops it, and the read/frame loop that hands whole
 * frames to tcp_srv_frames.c.
 *
 * Memory a peer can make the server hold is bounded: before admission, a
 * hello's bytes; after it, every buffer byte past the TCP_BUF_OWN a
 * connection keeps counts against a budget, held before the buffer grows (a
 * frame's payload when its header announces it, a request's largest reply
 * before the request is taken). A connection that does not fit waits, out
 * of the epoll set, until another releases; one frame or reply larger than
 * a whole budget is refused naming the budget. Emptied buffers stay with
 * their connection for its next frames (steady traffic allocates nothing),
 * counted, until some connection waits: then idle ones are freed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "tcp_priv.h"
#include "tcp_srv.h"
#include "wire.h"

void tcp_stat_bad_frame(struct tcp_server *ts)
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

/* ---------------------------------------------------------------------- */
/* Budgets                                                                 */

bool tcp_budget_take(struct tcp_server *ts, int kind, size_t n, int mode)
{
	struct tcp_budget *b = &ts->budget[kind];
	uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	uint64_t limit = mode == TCP_TAKE_SOFT ? b->limit / 2 : b->limit;

	if (mode == TCP_TAKE_FORCE) {
		__atomic_fetch_add(&b->used, n, __ATOMIC_RELAXED);
		return true;
	}
	do {
		if (n > limit || cur > limit - n)
			return false;
	} while (!__atomic_compare_exchange_n(&b->used, &cur, cur + n, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

/* Wakes the workers whose connections wait for a budget: the releasing
 * thread may be another's (their epoll waits on their inbox's eventfd). */
static void budget_wake(struct tcp_server *ts, const struct tcp_worker *self)
{
	uint64_t one = 1;

	for (uint32_t i = 0; i < ts->nworkers; i++) {
		struct tcp_worker *w = &ts->workers[i];

		if (w == self || !(link_queued(&w->paused[0]) || link_queued(&w->paused[1])))
			continue; /* racy read of another worker's queues: a hint only */
		__atomic_store_n(&w->budget_wake, true, __ATOMIC_RELEASE);
		if (write(w->efd, &one, sizeof(one)) < 0)
			rdps_dbg("server: waking thread %u: %s", w->index, strerror(errno));
	}
}

void tcp_budget_put(struct tcp_server *ts, int kind, size_t n)
{
	if (!n)
		return;
	__atomic_fetch_sub(&ts->budget[kind].used, n, __ATOMIC_RELAXED);
	if (__atomic_load_n(&ts->budget_waiters, __ATOMIC_RELAXED))
		budget_wake(ts, NULL);
}

/* The capacity a buffer of cap grows to for need bytes: doubling while
 * small (few reallocations), then exactly (rounded to 64 KiB), so a large
 * frame or reply holds no more of its budget than it uses. */
static size_t grown_cap(size_t cap, size_t need)
{
	size_t n = cap ? cap : 4096;

	if (need > (1u << 20))
		return RDPS_ALIGN_UP(need, (size_t)64 << 10);
	while (n < need)
		n *= 2;
	return n;
}

/* The bytes of a buffer of cap that count against its budget: all but the
 * first TCP_BUF_OWN, which every connection may keep (bounded by the
 * connection cap instead). */
static size_t counted(size_t cap)
{
	return cap > TCP_BUF_OWN ? cap - TCP_BUF_OWN : 0;
}

static void buf_free(struct tcp_worker *w, struct tcp_sconn *sc, int kind)
{
	uint8_t **buf = kind == TCP_BUDGET_TX ? &sc->tx : &sc->rx;
	size_t *cap = kind == TCP_BUDGET_TX ? &sc->tx_cap : &sc->rx_cap;

	free(*buf);
	*buf = NULL;
	tcp_budget_put(w->ts, kind, counted(*cap));
	*cap = 0;
}

/*
 * Grows sc's buffer of kind to need bytes, its growth held against the
 * budget first. 0; -ENOBUFS when the budget has no room now (the caller
 * waits: pause_for()); -E2BIG when need alone is more than the whole budget
 * allows; -ENOMEM. mode: TCP_TAKE_HARD, _SOFT (within half the budget:
 * what a connection whose client has not read its replies yet may take, so
 * such clients never hold the half the others go on with), or _FORCE (the
 * bytes a reply must have, an error or a deferred reply, and a hello's).
 */
static int buf_grow(struct tcp_worker *w, struct tcp_sconn *sc, int kind, size_t need,
		    int mode)
{
	uint8_t **buf = kind == TCP_BUDGET_TX ? &sc->tx : &sc->rx;
	size_t *cap = kind == TCP_BUDGET_TX ? &sc->tx_cap : &sc->rx_cap;
	size_t ncap, delta;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = grown_cap(*cap, need);
	delta = counted(ncap) - counted(*cap);
	if (mode != TCP_TAKE_FORCE && counted(ncap) > w->ts->budget[kind].limit)
		return -E2BIG;
	if (!tcp_budget_take(w->ts, kind, delta, mode))
		return -ENOBUFS;
	p = realloc(*buf, ncap);
	if (!p) {
		tcp_budget_put(w->ts, kind, delta);
		return -ENOMEM;
	}
	*buf = p;
	*cap = ncap;
	return 0;
}

/* An emptied buffer stays for the connection's next frame (steady traffic
 * allocates nothing), counted, unless it is very large or connections wait
 * for its budget: then it goes back at once. */
static void buf_emptied(struct tcp_worker *w, struct tcp_sconn *sc, int kind)
{
	size_t cap = kind == TCP_BUDGET_TX ? sc->tx_cap : sc->rx_cap;

	if (cap > TCP_BUF_OWN && (cap > TCP_BUF_KEEP ||
				  __atomic_load_n(&w->ts->budget_waiters, __ATOMIC_RELAXED)))
		buf_free(w, sc, kind);
}

/* Frees the emptied buffers w's connections keep (see buf_emptied): asked
 * of every worker when a connection starts waiting for a budget, so idle
 * connections never hold what a busy one waits for. */
static bool reclaim_idle(struct tcp_worker *w)
{
	bool freed = false;

	for (uint32_t i = 0; i < w->nslots; i++) {
		struct tcp_sconn *sc = w->conns[i];

		if (!sc)
			continue;
		if (sc->tx_cap > TCP_BUF_OWN && sc->tx_len == 0) {
			buf_free(w, sc, TCP_BUDGET_TX);
			freed = true;
		}
		if (sc->rx_cap > TCP_BUF_OWN && sc->rx_len == 0) {
			buf_free(w, sc, TCP_BUDGET_RX);
			freed = true;
		}
	}
	return freed;
}

/* One line a second at most while connections wait for a budget: what an
 * operator needs to see to raise it (or find the clients that do not read). */
static void budget_wait_log(struct tcp_worker *w, struct tcp_sconn *sc, int kind, size_t need)
{
	struct tcp_budget *b = &w->ts->budget[kind];
	uint64_t now = rdps_now_ns(), last = __atomic_load_n(&w->ts->budget_log_ns[kind],
							       __ATOMIC_RELAXED);
	char a[32], l[32], u[32];

	if (last && now - last < TCP_LOG_EVERY_NS)
		return;
	__atomic_store_n(&w->ts->budget_log_ns[kind], now, __ATOMIC_RELAXED);
	rdps_warn("server %u: client %s waits: its %s needs %s more, and the connections hold "
		  "%s of the %s %s allows (%s); it goes on once others drain",
		  w->ts->p.server_id, sc->peer,
		  kind == TCP_BUDGET_TX ? "next reply" : "frame being received",
		  rdps_bytes_str(need, a, sizeof(a)),
		  rdps_bytes_str(__atomic_load_n(&b->used, __ATOMIC_RELAXED), u, sizeof(u)),
		  rdps_bytes_str(b->limit, l, sizeof(l)), b->flag,
		  kind == TCP_BUDGET_TX ? "clients read their replies slowly, or not at all"
					: "clients send large frames at once");
}

/* sc waits for room in a budget: out of the epoll set, on its worker's
 * queue for that budget (see tcp_serve_waiting). */
static void pause_for(struct tcp_worker *w, struct tcp_sconn *sc, int kind, size_t need)
{
	uint64_t one = 1;

	if (sc->waiting)
		return;
	/* Idle connections give back the buffers they keep, on their own
	 * threads (this one's now; if that made room, sc is retried at once:
	 * tcp_serve_waiting retries only after a release). */
	if (reclaim_idle(w))
		__atomic_store_n(&w->budget_wake, true, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < w->ts->nworkers; i++) {
		struct tcp_worker *o = &w->ts->workers[i];

		if (o == w || __atomic_exchange_n(&o->reclaim, true, __ATOMIC_ACQ_REL))
			continue;
		if (write(o->efd, &one, sizeof(one)) < 0)
			rdps_dbg("server: waking thread %u: %s", o->index, strerror(errno));
	}
	sc->waiting = (uint8_t)(kind == TCP_BUDGET_TX ? TCP_WAIT_TX : TCP_WAIT_RX);
	sc->drained = false;
	if (!link_queued(&w->paused[0]) && !link_queued(&w->paused[1]))
		__atomic_fetch_add(&w->ts->budget_waiters, 1, __ATOMIC_RELAXED);
	link_append(&w->paused[kind], &sc->paused);
	budget_wait_log(w, sc, kind, need);
}

static void unpause(struct tcp_worker *w, struct tcp_sconn *sc)
{
	if (!sc->waiting)
		return;
	link_remove(&sc->paused);
	sc->waiting = TCP_WAIT_NONE;
	if (!link_queued(&w->paused[0]) && !link_queued(&w->paused[1]))
		__atomic_fetch_sub(&w->ts->budget_waiters, 1, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------- */

/* Whether sc may take another request now: not closing, not waiting for a
 * budget, and its client reads its replies (under the per-connection mark). */
static bool sconn_may_take(const struct tcp_sconn *sc)
{
	return !sc->closing && !sc->waiting && sc->tx_len - sc->tx_off < TCP_TX_HIGH;
}

/*
 * Sets the timer (in the epoll set, so a caller polling the epoll
 * descriptor wakes too) to the next deadline: the listener's return after
 * a descriptor shortage, the oldest handshake's timeout, a held log line;
 * or at once when connections wait in the ready queue (only progress() may
 * serve them).
 */
void tcp_timer_arm(struct tcp_worker *w)
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
	if (__atomic_load_n(&w->ts->budget_waiters, __ATOMIC_RELAXED) &&
	    w->stall_scan_ns + TCP_LOG_EVERY_NS < next)
		next = w->stall_scan_ns + TCP_LOG_EVERY_NS;
	if (link_queued(&w->ready) || __atomic_load_n(&w->budget_wake, __ATOMIC_ACQUIRE))
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
 * Arms sc's events for its state: readable while it may take requests (and
 * is not waiting for a budget), writable while replies are unsent; queued
 * in "ready" when it may take frames it has already read, or is to be
 * closed, and no event will come for that (progress() serves the ready
 * queue before it returns).
 */
int sconn_update(struct tcp_worker *w, struct tcp_sconn *sc)
{
	size_t unsent = sc->tx_len - sc->tx_off;
	bool take = sconn_may_take(sc);
	int ret;

	if (((take && sc->stalled) || (sc->closing && !unsent)) && !link_queued(&sc->ready))
		link_append(&w->ready, &sc->ready);
	ret = sconn_arm(w, sc, take, unsent > 0);
	if (!w->in_progress)
		tcp_timer_arm(w); /* e.g. a deferred reply: progress() must run */
	return ret;
}

void sconn_close(struct tcp_worker *w, struct tcp_sconn *sc)
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
	unpause(w, sc);
	link_remove(&sc->hs);
	link_remove(&sc->ready);
	buf_free(w, sc, TCP_BUDGET_RX); /* wakes those waiting for its bytes */
	buf_free(w, sc, TCP_BUDGET_TX);
	free(sc);
	if (!w->in_progress)
		tcp_timer_arm(w);
}

/* Appends a frame, returns a pointer to its payload (len bytes), or NULL.
 * Its bytes were held with the request (tcp_frame_reply_bound); a reply
 * that must go out anyway (an error, a deferred reply) takes them now. */
void *tcp_tx_frame(struct tcp_sconn *sc, uint8_t type, int32_t status, uint32_t len)
{
	struct tcp_worker *w = sc->owner;
	struct rdps_wire_hdr h;
	void *p;

	if (buf_grow(w, sc, TCP_BUDGET_TX, sc->tx_len + sizeof(h) + len, TCP_TAKE_FORCE))
		return NULL;
	if (sc->tx_len == sc->tx_off)
		sc->tx_moved_ns = rdps_now_ns(); /* its client had read everything */
	rdps_wire_hdr_init(&h, type, len, status);
	memcpy(sc->tx + sc->tx_len, &h, sizeof(h));
	p = sc->tx + sc->tx_len + sizeof(h);
	sc->tx_len += sizeof(h) + len;
	return p;
}

int tcp_tx_error(struct tcp_sconn *sc, uint8_t type, int status, const char *msg)
{
	size_t n = strnlen(msg, RDPS_WIRE_ERRMSG_MAX - 8);
	size_t padded = RDPS_ALIGN_UP(n ? n : 1, 8);
	char *p = tcp_tx_frame(sc, type | RDPS_WIRE_REPLY, status, (uint32_t)padded);

	if (!p)
		return -ENOMEM;
	memset(p, 0, padded);
	memcpy(p, msg, n);
	return 0;
}

/* Sends what it can without blocking. */
int sconn_flush(struct tcp_worker *w, struct tcp_sconn *sc)
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
		sc->tx_moved_ns = rdps_now_ns();
	}
	if (sc->tx_off == sc->tx_len && sc->tx_len) {
		sc->tx_off = sc->tx_len = 0;
		/* Its client reads: first in line for the room it made. */
		sc->drained = sc->waiting == TCP_WAIT_TX;
		buf_emptied(w, sc, TCP_BUDGET_TX);
	}
	return sconn_update(w, sc);
}

/* Closes sc after a fatal error, or once a closing connection's replies
 * are out. */
void sconn_settle(struct tcp_worker *w, struct tcp_sconn *sc, int ret)
{
	if (ret || (sc->closing && sc->tx_len == sc->tx_off))
		sconn_close(w, sc);
}

/* A frame refused on its header: answered with why, and its payload, which
 * is never buffered, skipped as it arrives (the connection stays in step). */
static int refuse_header(struct tcp_worker *w, struct tcp_sconn *sc,
			 const struct rdps_wire_hdr *h, int status, const char *why)
{
	sc->discard = h->len;
	return tcp_refuse(w->ts, sc, h->type, status, why);
}

/* Skips what is left of a refused frame's payload from rx. */
static void discard_rx(struct tcp_sconn *sc)
{
	size_t n = sc->rx_len < sc->discard ? sc->rx_len : sc->discard;

	memmove(sc->rx, sc->rx + n, sc->rx_len - n);
	sc->rx_len -= n;
	sc->discard -= n;
}

/*
 * Makes room for a frame whose header is at rx[0] and whose payload has
 * not all come: its size is checked against what its type may carry, then
 * held against the request budget. 0 (room made, or a wait began),
 * or -errno to close the connection.
 */
static int frame_room(struct tcp_worker *w, struct tcp_sconn *sc, const struct rdps_wire_hdr *h)
{
	size_t need = sizeof(*h) + h->len;
	char why[256], a[32], b[32];
	int ret;

	if (need <= sc->rx_cap)
		return 0;
	ret = buf_grow(w, sc, TCP_BUDGET_RX, need, sc->hello ? TCP_TAKE_HARD : TCP_TAKE_FORCE);
	if (ret == -ENOBUFS) {
		pause_for(w, sc, TCP_BUDGET_RX, need - sc->rx_cap);
		return 0;
	}
	if (ret == -E2BIG) {
		snprintf(why, sizeof(why), "a %s frame of %s is larger than the %s all requests "
			 "being received may take (%s)", rdps_req_name(h->type),
			 rdps_bytes_str(need, a, sizeof(a)),
			 rdps_bytes_str(w->ts->budget[TCP_BUDGET_RX].limit, b, sizeof(b)),
			 w->ts->budget[TCP_BUDGET_RX].flag);
		/* The bytes already read are the frame's: skip them too. */
		sc->rx_len -= sizeof(*h);
		memmove(sc->rx, sc->rx + sizeof(*h), sc->rx_len);
		ret = refuse_header(w, sc, h, -EMSGSIZE, why);
		discard_rx(sc);
		return ret;
	}
	return ret;
}

/* Parses complete frames from rx. Returns -errno to close the conn. */
static int sconn_process(struct tcp_worker *w, struct tcp_sconn *sc)
{
	size_t off = 0;
	int ret = 0;

	sc->stalled = false;
	if (sc->discard)
		discard_rx(sc);
	while (!sc->discard && sc->rx_len - off >= sizeof(struct rdps_wire_hdr)) {
		struct rdps_wire_hdr h;
		const uint8_t *payload;
		char why[256];
		size_t bound;

		if (!sconn_may_take(sc)) {
			/* No readable event will come for these bytes. */
			sc->stalled = !sc->closing;
			break;
		}
		memcpy(&h, sc->rx + off, sizeof(h));
		ret = rdps_wire_check_hdr(&h, why, sizeof(why));
		if (ret) {
			rdps_warn("server %u: client %s: %s; closing the connection",
				  w->ts->p.server_id, sc->peer, why);
			tcp_stat_bad_frame(w->ts);
			/* Tell a peer of another version why, then close. */
			if (ret == -EPROTO && h.magic == RDPS_WIRE_MAGIC)
				tcp_tx_error(sc, h.type, ret, why);
			sc->closing = true;
			ret = 0;
			break;
		}
		if (!sc->hello && !tcp_handshake_frame(&h)) {
			rdps_warn("server %u: client %s: a frame of type %u (%s) announcing %u bytes "
				  "before the handshake completed (only a %zu-byte hello, then a "
				  "%d-byte authentication, may come first); closing the connection",
				  w->ts->p.server_id, sc->peer, h.type,
				  h.type == RDPS_WIRE_AUTH ? "authentication" : rdps_req_name(h.type),
				  h.len, sizeof(struct rdps_wire_hello), RDPS_MAC_LEN);
			tcp_stat_bad_frame(w->ts);
			sc->closing = true;
			break;
		}
		if (h.len > tcp_frame_max_len(sc, &h)) {
			/* Refused on the header: its payload is skipped, never held. */
			snprintf(why, sizeof(why), "a %s request of %u bytes%s; at most %u",
				 rdps_req_name(h.type), h.len,
				 sc->observer ? " from an observer" : "", tcp_frame_max_len(sc, &h));
			off += sizeof(h);
			ret = refuse_header(w, sc, &h, -EMSGSIZE, why);
			if (ret)
				break;
			memmove(sc->rx, sc->rx + off, sc->rx_len - off);
			sc->rx_len -= off;
			off = 0;
			discard_rx(sc);
			continue;
		}
		if (sc->rx_len - off < sizeof(h) + h.len)
			break; /* room is made below, with the frame at rx[0] */
		if (off % 8) {
			/* Only a misbehaving peer sends frames of odd lengths;
			 * realign so ids and gradients are read aligned. */
			memmove(sc->rx, sc->rx + off, sc->rx_len - off);
			sc->rx_len -= off;
			off = 0;
		}
		payload = sc->rx + off + sizeof(h);
		/* The reply's bytes are held before the request is taken. */
		bound = tcp_frame_reply_bound(w->ts, &h, payload);
		ret = buf_grow(w, sc, TCP_BUDGET_TX, sc->tx_len + bound +
			       (size_t)sc->deferred * TCP_DEFERRED_REPLY,
			       !sc->hello ? TCP_TAKE_FORCE
			       : sc->tx_len > sc->tx_off ? TCP_TAKE_SOFT : TCP_TAKE_HARD);
		if (ret == -ENOBUFS) {
			pause_for(w, sc, TCP_BUDGET_TX, bound);
			sc->stalled = true;
			ret = 0;
			break;
		}
		if (ret == -E2BIG) {
			char a[32], b[32];

			snprintf(why, sizeof(why), "its reply could take %s, more than the %s all "
				 "replies held for clients may take (%s): ask for fewer rows at once",
				 rdps_bytes_str(bound, a, sizeof(a)), w->ts->budget[TCP_BUDGET_TX].flag,
				 rdps_bytes_str(w->ts->budget[TCP_BUDGET_TX].limit, b, sizeof(b)));
			ret = tcp_refuse(w->ts, sc, h.type, -EMSGSIZE, why);
		} else if (!ret) {
			ret = tcp_handle_frame(w->ts, sc, &h, payload);
		}
		if (link_queued(&sc->hs))
			tcp_handshake_step(w, sc);
		if (ret)
			break;
		off += sizeof(h) + h.len;
	}
	if (off) {
		memmove(sc->rx, sc->rx + off, sc->rx_len - off);
		sc->rx_len -= off;
	}
	if (!ret && !sc->closing && !sc->discard && sc->rx_len >= sizeof(struct rdps_wire_hdr) &&
	    !sc->waiting) {
		struct rdps_wire_hdr h;

		memcpy(&h, sc->rx, sizeof(h));
		if (sc->rx_len < sizeof(h) + h.len && (sc->hello || tcp_handshake_frame(&h)))
			ret = frame_room(w, sc, &h);
	}
	if (!ret && !sc->rx_len)
		buf_emptied(w, sc, TCP_BUDGET_RX);
	return ret;
}

int sconn_read(struct tcp_worker *w, struct tcp_sconn *sc)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		/* Before admission, no more than the handshake needs. */
		size_t room, chunk = sc->hello ? TCP_RX_CHUNK : TCP_RX_HANDSHAKE;
		ssize_t n;
		int ret;

		if (sc->waiting || sc->closing)
			return 0;
		/* Read ahead a chunk if the budget has room; else into what
		 * the buffer has (a frame's room was made when its header came). */
		ret = buf_grow(w, sc, TCP_BUDGET_RX, sc->rx_len + chunk,
			       sc->hello ? TCP_TAKE_HARD : TCP_TAKE_FORCE);
		if (ret && ret != -ENOBUFS && ret != -E2BIG)
			return ret;
		room = sc->rx_cap - sc->rx_len;
		if (!sc->hello && room > chunk)
			room = chunk;
		if (!room) {
			pause_for(w, sc, TCP_BUDGET_RX, chunk);
			return sconn_update(w, sc);
		}
		n = recv(sc->fd, sc->rx + sc->rx_len, room, MSG_DONTWAIT);
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
			if (errno == EAGAIN) {
				if (!sc->rx_len)
					buf_emptied(w, sc, TCP_BUDGET_RX);
				return 0;
			}
			rdps_warn("server %u: client %s: %s", w->ts->p.server_id, sc->peer,
				  strerror(errno));
			return -errno;
		}
		sc->rx_len += (size_t)n;
		ret = sconn_process(w, sc);
		if (ret)
			return ret;
		if (!sconn_may_take(sc))
			return sconn_update(w, sc);
	}
	return 0;
}

/* Makes fd (accepted at since_ns) a connection of worker w, counted in
 * w->nconns and the server's already. On failure the socket is closed. */
int sconn_add(struct tcp_worker *w, int fd, uint64_t since_ns, const char *peer,
	      bool same_host)
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
	sc->owner = w;
	sc->fd = fd;
	sc->worker = w->index;
	sc->slot = slot;
	sc->gen = ++w->next_gen;
	sc->reading = true;
	sc->same_host = same_host;
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

/* Serves frames sc read before it had to stop taking requests, and reads
 * on when it waited for the request budget. */
static int sconn_resume(struct tcp_worker *w, struct tcp_sconn *sc)
{
	int ret = 0;

	while (!ret && sc->stalled && sconn_may_take(sc)) {
		ret = sconn_process(w, sc);
		if (!ret)
			ret = sconn_flush(w, sc);
	}
	return ret;
}

void tcp_close_stalled_readers(struct tcp_worker *w, uint64_t now)
{
	char a[32], b[32];

	if (!__atomic_load_n(&w->ts->budget_waiters, __ATOMIC_RELAXED) ||
	    now - w->stall_scan_ns < TCP_LOG_EVERY_NS)
		return;
	w->stall_scan_ns = now;
	for (uint32_t i = 0; i < w->nslots; i++) {
		struct tcp_sconn *sc = w->conns[i];

		if (!sc || sc->tx_len == sc->tx_off || now - sc->tx_moved_ns < w->ts->tx_stall_ns)
			continue;
		rdps_warn("server %u: client %s left %s of replies unread for %.0f s while other "
			  "clients wait for room in %s (%s); closing its connection",
			  w->ts->p.server_id, sc->peer,
			  rdps_bytes_str(sc->tx_len - sc->tx_off, a, sizeof(a)),
			  (now - sc->tx_moved_ns) / 1e9, w->ts->budget[TCP_BUDGET_TX].flag,
			  rdps_bytes_str(w->ts->budget[TCP_BUDGET_TX].limit, b, sizeof(b)));
		sconn_close(w, sc);
	}
}

/* Retries sc, which waited for room in budget kind. */
static int retry_paused(struct tcp_worker *w, struct tcp_sconn *sc, int kind)
{
	int ret;

	unpause(w, sc);
	if (kind == TCP_BUDGET_TX) {
		sc->stalled = true;
		return sconn_resume(w, sc);
	}
	ret = sconn_process(w, sc); /* makes the frame's room */
	if (!ret && !sc->waiting)
		ret = sconn_update(w, sc); /* reads again */
	return ret;
}

/*
 * What no event will announce: connections waiting for a budget, retried
 * in the order they stopped (one that still does not fit goes to the back):
 * first those whose clients read every reply while they waited (the room
 * is theirs: a client that reads goes on), then those with no reply unsent,
 * then the others (a client that does not read waits); and the ready queue
 * (frames read before a pause at TCP_TX_HIGH, connections to close).
 */
void tcp_serve_waiting(struct tcp_worker *w)
{
	uint64_t now = rdps_now_ns();

	if (__atomic_exchange_n(&w->reclaim, false, __ATOMIC_ACQ_REL))
		reclaim_idle(w);
	/* Only when budget was released (or once a second: a release on
	 * another thread may have missed a connection pausing meanwhile).
	 * A retry re-arms the connection's reads, and bytes it could not
	 * take keep it readable: retried at every call, it spun. */
	if (!__atomic_exchange_n(&w->budget_wake, false, __ATOMIC_ACQ_REL) &&
	    now - w->retry_ns < TCP_LOG_EVERY_NS)
		goto ready;
	w->retry_ns = now;
	for (int kind = 0; kind < 2; kind++) {
		for (int pass = 0; pass < 3; pass++) {
			struct tcp_link *l = w->paused[kind].next, *end = &w->paused[kind];

			/* Entries retried go to the back: stop at the last one
			 * queued before this pass. */
			end = end->prev;
			while (l != &w->paused[kind]) {
				struct tcp_sconn *sc = container_of(l, struct tcp_sconn, paused);
				bool last = l == end;

				l = l->next;
				int rank = sc->drained ? 0 : sc->tx_len > sc->tx_off ? 2 : 1;

				if (rank == pass) {
					int ret, rounds = 0;

					/* One whose replies drained again as it went on
					 * goes on again, before others take its room. */
					do
						ret = retry_paused(w, sc, kind);
					while (!ret && sc->waiting && sc->drained && ++rounds < 64);
					sconn_settle(w, sc, ret);
				}
				if (last)
					break;
			}
		}
	}
ready:
	while (link_queued(&w->ready)) {
		struct tcp_sconn *sc = container_of(w->ready.next, struct tcp_sconn, ready);

		link_remove(&sc->ready);
		sconn_settle(w, sc, sconn_resume(w, sc));
	}
}
