// SPDX-License-Identifier: MIT
/*
 * TCP server: the handshake. A hello (of its exact size, before anything
 * else), the challenge and authentication when the server has a secret,
 * the core's admission and the welcome; endpoint binding for backends that
 * need it (ofi); refusals of requests, and the deadline to be admitted by.
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

static void count_error(struct tcp_server *ts, int type)
{
	if (ts->base.stats && type > 0 && type < 16)
		RDPS_STAT_ADD(ts->base.stats->errors[type], 1);
}

/* Logs and answers an error for a request whose framing was intact. */
int tcp_refuse(struct tcp_server *ts, struct tcp_sconn *sc, int type,
	       int status, const char *why)
{
	rdps_warn("server %u: client %s: %s request refused: %s",
		  ts->p.server_id, sc->peer, rdps_req_name(type), why);
	count_error(ts, type);
	return tcp_tx_error(sc, (uint8_t)type, status, why);
}

uint64_t tcp_make_token(const struct tcp_sconn *sc)
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
	req.admin = authenticated || sc->loopback;
	req.pushed_rows = hello->pushed_rows;
	ret = ts->p.handle(ts->p.ctx, &req);
	if (ret < 0) {
		tcp_refuse(ts, sc, RDPS_REQ_HELLO, ret, why[0] ? why : rdps_strerror(ret));
		sc->closing = true;
		return 0;
	}
	ret = rdps_random_bytes(&sc->session, sizeof(sc->session));
	if (ret)
		return ret;
	sc->hello = true;
	sc->observer = req.observer;
	sc->authenticated = authenticated;
	sc->client_id = hello->client_id;
	sc->num_clients = hello->num_clients;
	/* The tables as they are now (clients may have made some). */
	pthread_mutex_lock(&ts->regions_lock);
	p = tcp_tx_frame(sc, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, 0,
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

int tcp_handle_hello(struct tcp_server *ts, struct tcp_sconn *sc,
		     const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	char why[256] = "";
	uint8_t *p;
	int ret;

	if (sc->hello || sc->awaiting_auth) {
		tcp_refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, "second hello on one connection");
		sc->closing = true;
		return 0;
	}
	if (h->len != sizeof(sc->pending)) {
		snprintf(why, sizeof(why), "hello of %u bytes, want %zu", h->len,
			 sizeof(sc->pending));
		tcp_refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, why);
		sc->closing = true;
		return 0;
	}
	memcpy(&sc->pending, payload, sizeof(sc->pending));
	if (sc->pending.server_id != ts->p.server_id) {
		snprintf(why, sizeof(why),
			 "client expected server %u at this address, this is server %u (ip_configs differ?)",
			 sc->pending.server_id, ts->p.server_id);
		tcp_refuse(ts, sc, RDPS_REQ_HELLO, -EPROTO, why);
		sc->closing = true;
		return 0;
	}
	if (!ts->p.secret || !ts->p.secret->len) {
		/* Protected mode: without a secret, nothing tells a job's
		 * process from anyone who reaches the port, so only peers on
		 * this machine are served unless the operator said otherwise. */
		if (!sc->loopback && !ts->p.allow_unauthenticated) {
			snprintf(why, sizeof(why), "server %u has no secret, so it serves only "
				 "clients on its own machine (protected mode): give the job a "
				 "secret (--secret-file or $RDPS_SECRET on every process; rdps "
				 "launch makes one), or start the server with "
				 "--allow-unauthenticated", ts->p.server_id);
			if (ts->base.stats)
				RDPS_STAT_ADD(ts->base.stats->auth_failures, 1);
			tcp_refuse(ts, sc, RDPS_REQ_HELLO, -EACCES, why);
			sc->closing = true;
			return 0;
		}
		return admit(ts, sc, false);
	}
	/* Nothing about the job leaves before the client proves the secret. */
	ret = rdps_random_bytes(sc->server_nonce, sizeof(sc->server_nonce));
	if (ret)
		return ret;
	p = tcp_tx_frame(sc, RDPS_WIRE_CHALLENGE, 0, RDPS_NONCE_LEN);
	if (!p)
		return -ENOMEM;
	memcpy(p, sc->server_nonce, RDPS_NONCE_LEN);
	sc->awaiting_auth = true;
	return 0;
}

int tcp_handle_auth(struct tcp_server *ts, struct tcp_sconn *sc,
		    const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	uint8_t want[RDPS_MAC_LEN];

	if (!sc->awaiting_auth || h->len != RDPS_MAC_LEN) {
		rdps_warn("server %u: client %s: unexpected authentication frame; closing",
			  ts->p.server_id, sc->peer);
		tcp_stat_bad_frame(ts);
		return -EPROTO;
	}
	sc->awaiting_auth = false;
	rdps_auth_mac(ts->p.secret, RDPS_AUTH_CLIENT_LABEL, sc->server_nonce, RDPS_NONCE_LEN,
		      sc->pending.nonce, RDPS_NONCE_LEN, &sc->pending, sizeof(sc->pending), want);
	if (!rdps_auth_equal(want, payload)) {
		if (ts->base.stats)
			RDPS_STAT_ADD(ts->base.stats->auth_failures, 1);
		tcp_refuse(ts, sc, RDPS_REQ_HELLO, -EACCES,
		       "authentication failed: the client's shared secret differs from the server's");
		sc->closing = true;
		return 0;
	}
	return admit(ts, sc, true);
}

/* An endpoint binding (tcp.h): once per admitted client connection, to
 * the backend's hook; its answer or its reason goes back. */
int tcp_handle_bind(struct tcp_server *ts, struct tcp_sconn *sc,
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
		return tcp_tx_error(sc, RDPS_WIRE_BIND, -EPROTO, why);
	}
	ret = ts->bind(ts->bind_ctx, &who, payload, h->len, rep, &rep_len, why, sizeof(why));
	if (ret < 0 || rep_len > sizeof(rep)) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rdps_strerror(ret < 0 ? ret : -EOVERFLOW));
		rdps_warn("server %u: client %s: endpoint binding refused: %s", ts->p.server_id,
			  sc->peer, why);
		return tcp_tx_error(sc, RDPS_WIRE_BIND, ret < 0 ? ret : -EOVERFLOW, why);
	}
	sc->session_claimed = true;
	p = tcp_tx_frame(sc, RDPS_WIRE_BIND | RDPS_WIRE_REPLY, 0, (uint32_t)rep_len);
	if (!p)
		return -ENOMEM;
	memcpy(p, rep, rep_len);
	return 0;
}

/* Before admission only the handshake's frames, of their exact sizes, may
 * come: anything else is refused on its header, its payload never read. */
bool tcp_handshake_frame(const struct rdps_wire_hdr *h)
{
	return (h->type == RDPS_REQ_HELLO && h->len == sizeof(struct rdps_wire_hello)) ||
	       (h->type == RDPS_WIRE_AUTH && h->len == RDPS_MAC_LEN);
}

/* After a handshake frame: an admitted connection has no deadline any more.
 * A hello read only after its deadline came in time (else the connection
 * would be closed) but waited for a busy server (e.g. writing a checkpoint):
 * its authentication gets a full timeout of its own, once. */
void tcp_handshake_step(struct tcp_worker *w, struct tcp_sconn *sc)
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

/* Connections that did not finish their handshake in time. */
void tcp_expire_handshakes(struct tcp_worker *w, uint64_t now)
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
