// SPDX-License-Identifier: MIT
/*
 * TCP server: one connection's state. Its receive buffer (frames being
 * read), its send buffer (replies not yet sent), the worker's budgets they
 * count against, the queues a connection waits in when a budget or its
 * client stops it, and the read/frame loop that hands whole frames to
 * tcp_srv_frames.c.
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
int sconn_update(struct tcp_worker *w, struct tcp_sconn *sc)
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
void *tcp_tx_frame(struct tcp_sconn *sc, uint8_t type, int32_t status, uint32_t len)
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
	}
	if (sc->tx_off == sc->tx_len)
		sc->tx_off = sc->tx_len = 0;
	return sconn_update(w, sc);
}

/* Closes sc after a fatal error, or once a closing connection's replies
 * are out. */
void sconn_settle(struct tcp_worker *w, struct tcp_sconn *sc, int ret)
{
	if (ret || (sc->closing && sc->tx_len == sc->tx_off))
		sconn_close(w, sc);
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
		ret = tcp_handle_frame(w->ts, sc, &h, sc->rx + off + sizeof(h));
		tx_sync(w, sc);
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
	return ret;
}

int sconn_read(struct tcp_worker *w, struct tcp_sconn *sc)
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

/* Makes fd (accepted at since_ns) a connection of worker w, counted in
 * w->nconns and the server's already. On failure the socket is closed. */
int sconn_add(struct tcp_worker *w, int fd, uint64_t since_ns, const char *peer)
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
void tcp_serve_waiting(struct tcp_worker *w)
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
