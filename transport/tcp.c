// SPDX-License-Identifier: MIT
/*
 * TCP backend: length-prefixed binary frames (wire.h) on one connection per
 * client per server. The server is one thread with nonblocking sockets and
 * epoll; replies for a connection go out in request order. The client side
 * uses nonblocking sockets with poll() deadlines, so no wait is unbounded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "sock.h"
#include "tcp.h"
#include "tcp_push.h"
#include "wire.h"

#define TCP_MAX_PENDING_PULLS RDPS_TRANSPORT_POST_DEPTH
#define TCP_PUSH_RING 4096              /* unacknowledged pushes */
#define TCP_TX_HIGH (8u << 20)          /* stop reading a conn above this */
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

static const struct rdps_transport_ops tcp_ops;

/* ====================================================================== */
/* Client                                                                 */

struct tcp_pending_pull {
	float *out;
	uint32_t n, dim;
};

struct tcp_conn {
	struct rdps_conn base;
	int fd;
	int timeout_ms;
	size_t max_inflight;
	size_t inflight;                   /* unacknowledged push bytes */
	uint32_t ring[TCP_PUSH_RING];      /* sizes of unacknowledged pushes */
	uint32_t ring_head, ring_len;
	int push_err;                      /* first failed push, reported later */
	char push_errmsg[RDPS_WIRE_ERRMSG_MAX + 64];
	struct tcp_pending_pull pend[TCP_MAX_PENDING_PULLS];
	uint32_t npend;
	bool broken;                       /* stream out of sync: refuse use */
	uint8_t server_nonce[RDPS_NONCE_LEN]; /* the server's challenge */
};

static inline struct tcp_conn *to_tcp_conn(struct rdps_conn *c)
{
	return container_of(c, struct tcp_conn, base);
}

static uint64_t deadline_after(int ms)
{
	return rdps_now_ns() + (uint64_t)ms * 1000000ull;
}

/* Marks the connection unusable and records why. */
static int conn_fail(struct tcp_conn *tc, int ret, const char *what)
{
	tc->broken = true;
	if (ret == -ETIMEDOUT)
		snprintf(tc->base.errmsg, sizeof(tc->base.errmsg),
			 "%s: timed out after %d ms waiting for %s",
			 tc->base.peer, tc->timeout_ms, what);
	else if (ret == -ECONNRESET)
		snprintf(tc->base.errmsg, sizeof(tc->base.errmsg),
			 "%s: connection closed while waiting for %s (server died?)",
			 tc->base.peer, what);
	else
		snprintf(tc->base.errmsg, sizeof(tc->base.errmsg), "%s: %s while waiting for %s",
			 tc->base.peer, rdps_strerror(ret), what);
	return ret;
}

/* Reads an error reply's text into buf. */
static int read_errmsg(struct tcp_conn *tc, uint32_t len, char *buf,
		       size_t buflen, uint64_t deadline)
{
	char tmp[RDPS_WIRE_ERRMSG_MAX + 8];
	int ret;

	if (len > sizeof(tmp) - 1)
		return -EPROTO;
	ret = rdps_sock_recv(tc->fd, tmp, len, deadline);
	if (ret)
		return ret;
	tmp[len] = '\0';
	snprintf(buf, buflen, "%s: %s", tc->base.peer, tmp);
	return 0;
}

/*
 * Reads frames until a reply of type want arrives (its header in *h, its
 * payload left unread). Push acknowledgements met on the way are consumed.
 * want == 0 reads exactly one push acknowledgement.
 */
static int read_reply(struct tcp_conn *tc, int want, struct rdps_wire_hdr *h,
		      uint64_t deadline, const char *what)
{
	char why[256];
	int ret;

	for (;;) {
		ret = rdps_sock_recv(tc->fd, h, sizeof(*h), deadline);
		if (ret)
			return conn_fail(tc, ret, what);
		ret = rdps_wire_check_hdr(h, why, sizeof(why));
		if (ret) {
			tc->broken = true;
			snprintf(tc->base.errmsg, sizeof(tc->base.errmsg), "%s: %s",
				 tc->base.peer, why);
			return ret;
		}
		if (h->type == (RDPS_REQ_PUSH | RDPS_WIRE_REPLY)) {
			if (!tc->ring_len) {
				tc->broken = true;
				snprintf(tc->base.errmsg, sizeof(tc->base.errmsg),
					 "%s: push acknowledged that was never sent",
					 tc->base.peer);
				return -EPROTO;
			}
			tc->inflight -= tc->ring[tc->ring_head];
			tc->ring_head = (tc->ring_head + 1) % TCP_PUSH_RING;
			tc->ring_len--;
			if (h->status < 0) {
				if (!tc->push_err) {
					tc->push_err = h->status;
					ret = read_errmsg(tc, h->len, tc->push_errmsg,
							  sizeof(tc->push_errmsg), deadline);
				} else {
					char skip[RDPS_WIRE_ERRMSG_MAX + 64];

					ret = read_errmsg(tc, h->len, skip, sizeof(skip),
							  deadline);
				}
				if (ret)
					return conn_fail(tc, ret, what);
			} else if (h->len) {
				tc->broken = true;
				return -EPROTO;
			}
			if (!want)
				return 0;
			continue;
		}
		if (h->type != (want | RDPS_WIRE_REPLY)) {
			tc->broken = true;
			snprintf(tc->base.errmsg, sizeof(tc->base.errmsg),
				 "%s: expected a %s reply, got frame type 0x%x",
				 tc->base.peer, rdps_req_name(want), h->type);
			return -EPROTO;
		}
		if (h->status < 0) {
			ret = read_errmsg(tc, h->len, tc->base.errmsg,
					  sizeof(tc->base.errmsg), deadline);
			if (ret)
				return conn_fail(tc, ret, what);
			return h->status;
		}
		return 0;
	}
}

/* Answers the server's challenge: our MAC over its nonce, ours, our hello. */
static int answer_challenge(struct tcp_conn *tc, const struct rdps_conn_params *p,
			    const struct rdps_wire_hello *hello, uint8_t snonce[RDPS_NONCE_LEN],
			    uint64_t deadline, char *err, size_t errlen)
{
	uint8_t mac[RDPS_MAC_LEN];
	struct rdps_wire_hdr h;
	struct iovec iov[2];
	int ret;

	if (!p->secret || !p->secret->len) {
		snprintf(err, errlen,
			 "%s requires a shared secret: set RDPS_SECRET or give --secret-file "
			 "(the same as the server's)", tc->base.peer);
		return -EACCES;
	}
	rdps_auth_mac(p->secret, RDPS_AUTH_CLIENT_LABEL, snonce, RDPS_NONCE_LEN, hello->nonce,
		      RDPS_NONCE_LEN, hello, sizeof(*hello), mac);
	rdps_wire_hdr_init(&h, RDPS_WIRE_AUTH, sizeof(mac), 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ mac, sizeof(mac) };
	ret = rdps_sock_sendv(tc->fd, iov, 2, deadline);
	if (ret) {
		conn_fail(tc, ret, "the authentication");
		snprintf(err, errlen, "%s", tc->base.errmsg);
	}
	return ret;
}

static int tcp_handshake(struct tcp_conn *tc, const struct rdps_conn_params *p,
			 char *err, size_t errlen)
{
	uint64_t deadline = deadline_after(p->timeout_ms);
	struct rdps_wire_hello hello = {
		.client_id = p->client_id,
		.num_clients = p->num_clients,
		.server_id = p->server_id,
		.flags = p->observer ? RDPS_HELLO_OBSERVER : 0,
		.pushed_rows = p->pushed_rows,
	};
	struct rdps_wire_welcome w;
	struct rdps_wire_hdr h;
	struct iovec iov[2];
	char why[256], *buf;
	bool challenged = false;
	int ret;

	ret = rdps_random_bytes(hello.nonce, sizeof(hello.nonce));
	if (ret)
		return ret;
	rdps_wire_hdr_init(&h, RDPS_REQ_HELLO, sizeof(hello), 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ &hello, sizeof(hello) };
	ret = rdps_sock_sendv(tc->fd, iov, 2, deadline);
	if (!ret)
		ret = rdps_sock_recv(tc->fd, &h, sizeof(h), deadline);
	if (ret) {
		conn_fail(tc, ret, "the handshake");
		snprintf(err, errlen, "%s", tc->base.errmsg);
		return ret;
	}
	if (h.magic == RDPS_WIRE_MAGIC && h.version == RDPS_WIRE_VERSION &&
	    h.type == RDPS_WIRE_CHALLENGE) {
		uint8_t snonce[RDPS_NONCE_LEN];

		challenged = true;
		if (h.len != sizeof(snonce))
			return conn_fail(tc, -EPROTO, "a well-formed challenge");
		ret = rdps_sock_recv(tc->fd, snonce, sizeof(snonce), deadline);
		memcpy(tc->server_nonce, snonce, sizeof(snonce));
		if (ret) {
			conn_fail(tc, ret, "the challenge");
			snprintf(err, errlen, "%s", tc->base.errmsg);
			return ret;
		}
		ret = answer_challenge(tc, p, &hello, snonce, deadline, err, errlen);
		if (ret)
			return ret;
		ret = read_reply(tc, RDPS_REQ_HELLO, &h, deadline, "the handshake");
	} else {
		/* Not a challenge: the welcome (or an error) itself. */
		ret = rdps_wire_check_hdr(&h, why, sizeof(why));
		if (!ret && h.type != (RDPS_REQ_HELLO | RDPS_WIRE_REPLY))
			ret = -EPROTO;
		if (ret) {
			snprintf(err, errlen, "%s: unexpected handshake reply: %s", tc->base.peer,
				 why[0] && ret != -EPROTO ? why : "not a welcome");
			return ret;
		}
		if (h.status < 0) {
			ret = read_errmsg(tc, h.len, tc->base.errmsg, sizeof(tc->base.errmsg), deadline);
			ret = ret ? ret : h.status;
		}
	}
	if (ret) {
		/* A server's error reply leaves the stream intact. */
		snprintf(err, errlen, "%s%s", tc->broken ? "" : "refused by ", tc->base.errmsg);
		return ret;
	}
	buf = malloc(h.len ? h.len : 1);
	if (!buf)
		return -ENOMEM;
	ret = rdps_sock_recv(tc->fd, buf, h.len, deadline);
	if (!ret)
		ret = rdps_wire_parse_welcome(buf, h.len, p->server_id, &tc->base, &w, why,
					      sizeof(why));
	else
		snprintf(why, sizeof(why), "%s while reading the welcome", rdps_strerror(ret));
	free(buf);
	if (!ret && p->secret && p->secret->len) {
		uint8_t want[RDPS_MAC_LEN];

		/* No downgrade: a client with a secret talks only to a server
		 * that proves it has the same. */
		if (!challenged || !(w.flags & RDPS_WELCOME_AUTHENTICATED)) {
			snprintf(why, sizeof(why),
				 "the server does not authenticate clients, but this client has a "
				 "secret: refusing (start the server with the same secret)");
			ret = -EACCES;
		} else {
			rdps_auth_mac(p->secret, RDPS_AUTH_SERVER_LABEL, hello.nonce,
				      RDPS_NONCE_LEN, tc->server_nonce, RDPS_NONCE_LEN, &w.session,
				      sizeof(w.session), want);
			if (!rdps_auth_equal(want, w.proof)) {
				snprintf(why, sizeof(why),
					 "the server could not prove it knows the shared secret");
				ret = -EACCES;
			}
		}
	}
	if (ret)
		snprintf(err, errlen, "%s: %s", tc->base.peer, why);
	return ret;
}

/* A connection on a connected socket: the handshake, and every failure
 * named in err. Takes fd (closed on failure). */
static int conn_from_fd(int fd, const struct rdps_conn_params *p, struct rdps_conn **out,
			char *err, size_t errlen)
{
	struct tcp_conn *tc;
	int ret;

	*out = NULL;
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	tc->base.ops = &tcp_ops;
	tc->fd = fd;
	tc->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 60000;
	tc->max_inflight = p->max_inflight_bytes ? p->max_inflight_bytes : (64u << 20);
	snprintf(tc->base.peer, sizeof(tc->base.peer), "server %u (%s:%u)", p->server_id,
		 p->host ? p->host : "?", p->port);
	err[0] = '\0';
	ret = tcp_handshake(tc, p, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "%s",
				 tc->base.errmsg[0] ? tc->base.errmsg : rdps_strerror(ret));
		close(fd);
		free(tc);
		return ret;
	}
	*out = &tc->base;
	return 0;
}

static int tcp_connect(const struct rdps_conn_params *p, struct rdps_conn **out,
		       char *err, size_t errlen)
{
	int fd, ret;

	*out = NULL;
	ret = rdps_sock_connect(p->host, p->port, p->timeout_ms > 0 ? p->timeout_ms : 60000, &fd,
				err, errlen);
	if (ret)
		return ret;
	return conn_from_fd(fd, p, out, err, errlen);
}

static void tcp_close(struct rdps_conn *c)
{
	struct tcp_conn *tc;

	if (!c)
		return;
	tc = to_tcp_conn(c);
	if (tc->fd >= 0)
		close(tc->fd);
	free(tc);
}

int rdps_tcp_conn_fd(struct rdps_conn *c)
{
	return to_tcp_conn(c)->fd;
}

static int check_usable(struct tcp_conn *tc)
{
	if (tc->broken)
		return -ENOTCONN;
	return 0;
}

static int tcp_pull_post(struct rdps_conn *c, uint32_t table,
			 const uint64_t *ids, uint32_t n, float *out)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	struct rdps_wire_rows rows = { .table = table, .n = n };
	struct rdps_wire_hdr h;
	struct iovec iov[3];
	uint64_t len = sizeof(rows) + (uint64_t)n * 8;
	int ret;

	if ((ret = check_usable(tc)))
		return ret;
	if (table >= c->num_tables)
		return -ENOENT;
	if (tc->npend == TCP_MAX_PENDING_PULLS)
		return -EBUSY;
	if (len > RDPS_WIRE_MAX_FRAME ||
	    (uint64_t)n * c->tables[table].dim * 4 > RDPS_WIRE_MAX_FRAME)
		return -EMSGSIZE;
	rdps_wire_hdr_init(&h, RDPS_REQ_PULL, (uint32_t)len, 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ &rows, sizeof(rows) };
	iov[2] = (struct iovec){ (void *)ids, (size_t)n * 8 };
	ret = rdps_sock_sendv(tc->fd, iov, 3, deadline_after(tc->timeout_ms));
	if (ret)
		return conn_fail(tc, ret, "sending a pull");
	tc->pend[tc->npend++] = (struct tcp_pending_pull){ out, n, c->tables[table].dim };
	return 0;
}

static int tcp_pull_wait(struct rdps_conn *c)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(tc->timeout_ms);
	int first = 0;

	for (uint32_t i = 0; i < tc->npend; i++) {
		struct tcp_pending_pull *pp = &tc->pend[i];
		struct rdps_wire_hdr h;
		int ret;

		if (tc->broken)
			break;
		ret = read_reply(tc, RDPS_REQ_PULL, &h, deadline, "pulled rows");
		if (!ret) {
			if (h.len != (uint64_t)pp->n * pp->dim * 4) {
				tc->broken = true;
				snprintf(c->errmsg, sizeof(c->errmsg),
					 "%s: pull reply of %u bytes for %u rows of dim %u",
					 c->peer, h.len, pp->n, pp->dim);
				ret = -EPROTO;
			} else {
				ret = rdps_sock_recv(tc->fd, pp->out, h.len, deadline);
				if (ret)
					conn_fail(tc, ret, "pulled rows");
			}
		}
		if (ret && !first)
			first = ret;
	}
	tc->npend = 0;
	if (!first && tc->broken)
		first = -ENOTCONN;
	return first;
}

static int take_push_err(struct tcp_conn *tc)
{
	int ret = tc->push_err;

	if (ret) {
		tc->push_err = 0;
		snprintf(tc->base.errmsg, sizeof(tc->base.errmsg), "%s", tc->push_errmsg);
	}
	return ret;
}

static int tcp_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
			   const float *grads, const uint32_t *index, uint32_t n)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(tc->timeout_ms);
	struct rdps_wire_hdr h;
	uint64_t len;
	int ret;

	if ((ret = check_usable(tc)))
		return ret;
	if (table >= c->num_tables)
		return -ENOENT;
	if (tc->npend)
		return -EBUSY;
	len = rdps_tcp_push_len(n, c->tables[table].dim);
	if (len > RDPS_WIRE_MAX_FRAME)
		return -EMSGSIZE;
	if ((ret = take_push_err(tc)))
		return ret;
	/* Bound what the server has not acknowledged yet. */
	while (tc->ring_len && (tc->ring_len == TCP_PUSH_RING ||
				tc->inflight + len > tc->max_inflight)) {
		ret = read_reply(tc, 0, &h, deadline, "push acknowledgements");
		if (ret)
			return ret;
	}
	ret = rdps_tcp_push_send(tc->fd, table, c->tables[table].dim, ids, grads, index, n,
				 deadline);
	if (ret)
		return conn_fail(tc, ret, "sending a push");
	tc->ring[(tc->ring_head + tc->ring_len) % TCP_PUSH_RING] = (uint32_t)len;
	tc->ring_len++;
	tc->inflight += len;
	return 0;
}

static int tcp_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		    const float *grads, uint32_t n)
{
	return tcp_push_gather(c, table, ids, grads, NULL, n);
}

static int tcp_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		    void *reply, size_t reply_len, int timeout_ms)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(timeout_ms > 0 ? timeout_ms : tc->timeout_ms);
	struct rdps_wire_hdr h;
	struct iovec iov[2];
	char what[64];
	int ret;

	if ((ret = check_usable(tc)))
		return ret;
	if (tc->npend)
		return -EBUSY;
	if (type != RDPS_REQ_FLUSH && type != RDPS_REQ_BARRIER && type != RDPS_REQ_STATS &&
	    type != RDPS_REQ_SHUTDOWN && type != RDPS_REQ_ALLREDUCE && type != RDPS_REQ_CHECKPOINT)
		return -EINVAL;
	if (req_len % 8 || req_len > RDPS_ALLREDUCE_MAX * 8)
		return -EINVAL;
	snprintf(what, sizeof(what), "the %s reply", rdps_req_name((int)type));
	rdps_wire_hdr_init(&h, (uint8_t)type, (uint32_t)req_len, 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ (void *)req, req_len };
	ret = rdps_sock_sendv(tc->fd, iov, req_len ? 2 : 1, deadline);
	if (ret)
		return conn_fail(tc, ret, what);
	if (timeout_ms > 0) {
		int saved = tc->timeout_ms;

		tc->timeout_ms = timeout_ms; /* for the message only */
		ret = read_reply(tc, (int)type, &h, deadline, what);
		tc->timeout_ms = saved;
	} else {
		ret = read_reply(tc, (int)type, &h, deadline, what);
	}
	if (ret)
		return ret;
	if (h.len) {
		if (!reply || h.len != reply_len) {
			tc->broken = true;
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: %s reply of unexpected size %u", c->peer,
				 rdps_req_name((int)type), h.len);
			return -EPROTO;
		}
		ret = rdps_sock_recv(tc->fd, reply, h.len, deadline);
		if (ret)
			return conn_fail(tc, ret, what);
	}
	/* A flush also reports a failed earlier push. */
	if (type == RDPS_REQ_FLUSH)
		return take_push_err(tc);
	return 0;
}

/* ====================================================================== */
/* Server                                                                 */

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
	uint32_t slot, gen;
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

struct tcp_server {
	struct rdps_tserver base;
	int lfd, epfd;
	int tfd;                  /* timerfd in the epoll set: the deadlines below */
	uint64_t timer_ns;        /* when tfd fires (absolute; 0: disarmed or fired) */
	bool in_progress;         /* progress() re-arms the timer before it returns */
	struct rdps_listen_params p;
	struct rdps_region regions[RDPS_MAX_TABLES];
	struct tcp_sconn **conns; /* slot -> connection or NULL */
	uint32_t nslots;
	uint32_t nconns;          /* open connections */
	uint32_t next_gen;
	void *welcome;
	size_t welcome_len;
	rdps_tcp_session_closed_fn session_closed;
	void *session_ctx;
	/* limits (listen params with the defaults filled in) */
	uint32_t max_conns;
	uint64_t handshake_ns;
	size_t reply_budget;
	size_t tx_total;          /* reply bytes held in every connection's tx */
	struct tcp_link handshakes; /* connections not admitted yet, by deadline */
	struct tcp_link paused;   /* stopped by the reply budget, in the order they stopped */
	struct tcp_link ready;    /* to be served or closed with no event to come */
	struct tcp_ratelog cap_log; /* connections refused over the cap */
	/* accept() out of descriptors: the listener leaves the epoll set */
	bool listening;           /* lfd is in the epoll set */
	uint64_t accept_retry_ns; /* when not: when it returns */
	uint32_t backoff_ms;
	uint64_t starved_ns;      /* start of the shortage (0: none) */
	uint64_t starved_accepts; /* connections accepted during it */
};

static inline struct tcp_server *to_tcp_server(struct rdps_tserver *s)
{
	return container_of(s, struct tcp_server, base);
}

static void stat_bad_frame(struct tcp_server *ts)
{
	if (ts->base.stats)
		ts->base.stats->bad_frames++;
}

static int sconn_arm(struct tcp_server *ts, struct tcp_sconn *sc, bool rd, bool wr)
{
	struct epoll_event ev = { .events = (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0),
				  .data.u64 = (uint64_t)sc->slot + 1 };

	if (rd == sc->reading && wr == sc->writing)
		return 0;
	sc->reading = rd;
	sc->writing = wr;
	return epoll_ctl(ts->epfd, EPOLL_CTL_MOD, sc->fd, &ev) ? -errno : 0;
}

/* Keeps ts->tx_total, the reply bytes held for all connections, in step
 * with sc's buffer (sent bytes count until the buffer empties: they hold
 * memory as long). */
static void tx_sync(struct tcp_server *ts, struct tcp_sconn *sc)
{
	ts->tx_total = ts->tx_total - sc->tx_counted + sc->tx_len;
	sc->tx_counted = sc->tx_len;
}

static bool over_budget(const struct tcp_server *ts)
{
	return ts->tx_total >= ts->reply_budget;
}

/* Whether sc may take another request now: not closing, under the
 * per-connection mark, and while all connections together hold more than
 * the reply budget, only if none of its replies waits for its client to
 * read (a slow reader stops; a client that reads goes on, so none starves). */
static bool sconn_may_take(const struct tcp_server *ts, const struct tcp_sconn *sc)
{
	size_t unsent = sc->tx_len - sc->tx_off;

	return !sc->closing && unsent < TCP_TX_HIGH && (!unsent || !over_budget(ts));
}

/*
 * Sets the timer (in the epoll set, so a caller polling the epoll
 * descriptor wakes too) to the next deadline: the listener's return after
 * a descriptor shortage, the oldest handshake's timeout, a held log line;
 * or at once when connections wait in the ready queue, or in the paused
 * one with the budget free again (only progress() may serve them).
 */
static void tcp_timer_arm(struct tcp_server *ts)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t next = UINT64_MAX;

	if (!ts->listening)
		next = ts->accept_retry_ns;
	if (link_queued(&ts->handshakes)) {
		struct tcp_sconn *sc = container_of(ts->handshakes.next, struct tcp_sconn, hs);

		if (sc->deadline_ns < next)
			next = sc->deadline_ns;
	}
	if (ts->cap_log.held && ts->cap_log.last_ns + TCP_LOG_EVERY_NS < next)
		next = ts->cap_log.last_ns + TCP_LOG_EVERY_NS;
	if (link_queued(&ts->ready) || (link_queued(&ts->paused) && !over_budget(ts)))
		next = 1; /* an absolute time long past: fires at once */
	if (next == UINT64_MAX)
		next = 0; /* disarmed */
	if (next == ts->timer_ns)
		return;
	ts->timer_ns = next;
	its.it_value.tv_sec = (time_t)(next / 1000000000ull);
	its.it_value.tv_nsec = (long)(next % 1000000000ull);
	if (timerfd_settime(ts->tfd, TFD_TIMER_ABSTIME, &its, NULL))
		ts->timer_ns = 0; /* cannot fail on a valid timerfd; progress() polls anyway */
}

/*
 * Arms sc's events for its state and files it in the server's queues:
 * "paused" while the reply budget alone stops it; "ready" when it may take
 * requests it has already read, or is to be closed, and no event will come
 * for that (progress() serves the ready queue before it returns).
 */
static int sconn_update(struct tcp_server *ts, struct tcp_sconn *sc)
{
	size_t unsent = sc->tx_len - sc->tx_off;
	bool take, by_budget;
	int ret;

	tx_sync(ts, sc);
	take = sconn_may_take(ts, sc);
	by_budget = !take && !sc->closing && unsent < TCP_TX_HIGH;
	if (by_budget && !link_queued(&sc->paused))
		link_append(&ts->paused, &sc->paused);
	else if (!by_budget && link_queued(&sc->paused))
		link_remove(&sc->paused);
	if (((take && sc->stalled) || (sc->closing && !unsent)) && !link_queued(&sc->ready))
		link_append(&ts->ready, &sc->ready);
	ret = sconn_arm(ts, sc, take, unsent > 0);
	if (!ts->in_progress)
		tcp_timer_arm(ts); /* e.g. a deferred reply: progress() must run */
	return ret;
}

static void sconn_close(struct tcp_server *ts, struct tcp_sconn *sc)
{
	if (sc->hello) {
		struct rdps_request req = { .type = RDPS_REQ_BYE,
					    .client_id = sc->client_id,
					    .num_clients = sc->num_clients,
					    .observer = sc->observer,
					    .peer = sc->peer };

		ts->p.handle(ts->p.ctx, &req);
	}
	if (sc->session_claimed && ts->session_closed)
		ts->session_closed(ts->session_ctx, sc->session);
	epoll_ctl(ts->epfd, EPOLL_CTL_DEL, sc->fd, NULL);
	close(sc->fd);
	ts->conns[sc->slot] = NULL;
	ts->nconns--;
	ts->tx_total -= sc->tx_counted;
	link_remove(&sc->hs);
	link_remove(&sc->paused);
	link_remove(&sc->ready);
	free(sc->rx);
	free(sc->tx);
	free(sc);
	if (!ts->in_progress)
		tcp_timer_arm(ts); /* the budget it held may resume others */
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
static int sconn_flush(struct tcp_server *ts, struct tcp_sconn *sc)
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
	return sconn_update(ts, sc);
}

/* Closes sc after a fatal error, or once a closing connection's replies
 * are out. */
static void sconn_settle(struct tcp_server *ts, struct tcp_sconn *sc, int ret)
{
	if (ret || (sc->closing && sc->tx_len == sc->tx_off))
		sconn_close(ts, sc);
}

static void count_error(struct tcp_server *ts, int type)
{
	if (ts->base.stats && type > 0 && type < 16)
		ts->base.stats->errors[type]++;
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
	return ((uint64_t)sc->gen << 32) | sc->slot;
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
	p = tx_frame(sc, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, 0, (uint32_t)ts->welcome_len);
	if (!p)
		return -ENOMEM;
	memcpy(p, ts->welcome, ts->welcome_len);
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
			ts->base.stats->auth_failures++;
		refuse(ts, sc, RDPS_REQ_HELLO, -EACCES,
		       "authentication failed: the client's shared secret differs from the server's");
		sc->closing = true;
		return 0;
	}
	return admit(ts, sc, true);
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
	switch (h->type) {
	case RDPS_REQ_PULL:
	case RDPS_REQ_PUSH: {
		struct rdps_wire_rows rows;
		uint32_t len = h->len;

		/* Pushes are padded to 8 bytes; accept exactly that padding. */
		if (h->type == RDPS_REQ_PUSH && len >= sizeof(rows)) {
			memcpy(&rows, payload, sizeof(rows));
			if (rows.table < ts->p.num_regions &&
			    (rows.n * (uint64_t)ts->regions[rows.table].desc.dim) % 2)
				len -= 4;
		}
		ret = rdps_wire_check_rows(h->type, payload, len, ts->regions,
					   ts->p.num_regions, why, sizeof(why));
		if (ret)
			return refuse(ts, sc, h->type, ret, why);
		memcpy(&rows, payload, sizeof(rows));
		req.table = rows.table;
		req.n = rows.n;
		req.ids = (const uint64_t *)(payload + sizeof(rows));
		if (h->type == RDPS_REQ_PUSH) {
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
	if (h->type == RDPS_REQ_STATS) {
		void *p = tx_frame(sc, RDPS_REQ_STATS | RDPS_WIRE_REPLY, 0,
				   (uint32_t)req.reply_len);

		if (!p)
			return -ENOMEM;
		memcpy(p, &st, req.reply_len);
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
static void handshake_step(struct tcp_server *ts, struct tcp_sconn *sc)
{
	uint64_t now;

	if (sc->hello) {
		link_remove(&sc->hs);
		return;
	}
	if (!sc->awaiting_auth || (now = rdps_now_ns()) < sc->deadline_ns)
		return;
	sc->deadline_ns = now + ts->handshake_ns;
	link_remove(&sc->hs);
	link_append(&ts->handshakes, &sc->hs); /* the latest deadline: the queue stays sorted */
}

/* Parses complete frames from rx. Returns -errno to close the conn. */
static int sconn_process(struct tcp_server *ts, struct tcp_sconn *sc)
{
	size_t off = 0;
	int ret = 0;

	sc->stalled = false;
	while (sc->rx_len - off >= sizeof(struct rdps_wire_hdr)) {
		struct rdps_wire_hdr h;
		char why[256];

		if (!sconn_may_take(ts, sc)) {
			/* No readable event will come for these bytes. */
			sc->stalled = !sc->closing;
			break;
		}
		memcpy(&h, sc->rx + off, sizeof(h));
		ret = rdps_wire_check_hdr(&h, why, sizeof(why));
		if (ret) {
			rdps_warn("server %u: client %s: %s; closing the connection",
				  ts->p.server_id, sc->peer, why);
			stat_bad_frame(ts);
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
				  ts->p.server_id, sc->peer, h.type,
				  h.type == RDPS_WIRE_AUTH ? "authentication" : rdps_req_name(h.type),
				  h.len, sizeof(struct rdps_wire_hello), RDPS_MAC_LEN);
			stat_bad_frame(ts);
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
		ret = handle_frame(ts, sc, &h, sc->rx + off + sizeof(h));
		tx_sync(ts, sc);
		if (link_queued(&sc->hs))
			handshake_step(ts, sc);
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

static int sconn_read(struct tcp_server *ts, struct tcp_sconn *sc)
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
					  ts->p.server_id, sc->peer, sc->rx_len);
			else
				rdps_dbg("server %u: client %s disconnected",
					 ts->p.server_id, sc->peer);
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			rdps_warn("server %u: client %s: %s", ts->p.server_id, sc->peer,
				  strerror(errno));
			return -errno;
		}
		sc->rx_len += (size_t)n;
		ret = sconn_process(ts, sc);
		if (ret)
			return ret;
		if (!sconn_may_take(ts, sc))
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
		ts->base.stats->conns_refused++;
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

	if (ts->listening && !epoll_ctl(ts->epfd, EPOLL_CTL_DEL, ts->lfd, NULL))
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
			  ts->p.server_id, strerror(err), ts->nconns, lim, TCP_BACKOFF_MIN_MS,
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
		  (unsigned long long)ts->starved_accepts, ts->nconns);
	ts->starved_ns = 0;
}

static int tcp_accept(struct tcp_server *ts)
{
	for (int batch = 0; batch < TCP_ACCEPT_BATCH; batch++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_sconn *sc;
		struct epoll_event ev;
		int fd, one = 1;
		uint32_t slot;

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
		if (ts->nconns >= ts->max_conns) {
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
		for (slot = 0; slot < ts->nslots && ts->conns[slot]; slot++)
			;
		if (slot == ts->nslots) {
			uint32_t n = ts->nslots ? ts->nslots * 2 : 16;
			struct tcp_sconn **c = realloc(ts->conns, n * sizeof(*c));

			if (!c) {
				close(fd);
				return -ENOMEM;
			}
			memset(c + ts->nslots, 0, (n - ts->nslots) * sizeof(*c));
			ts->conns = c;
			ts->nslots = n;
		}
		sc = calloc(1, sizeof(*sc));
		if (!sc) {
			close(fd);
			return -ENOMEM;
		}
		sc->fd = fd;
		sc->slot = slot;
		sc->gen = ++ts->next_gen;
		sc->reading = true;
		sc->since_ns = rdps_now_ns();
		sc->deadline_ns = sc->since_ns + ts->handshake_ns;
		link_init(&sc->hs);
		link_init(&sc->paused);
		link_init(&sc->ready);
		rdps_sock_addr_str((struct sockaddr *)&ss, sc->peer, sizeof(sc->peer));
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)slot + 1;
		if (epoll_ctl(ts->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(sc);
			return -errno;
		}
		ts->conns[slot] = sc;
		ts->nconns++;
		link_append(&ts->handshakes, &sc->hs);
		if (ts->base.stats)
			ts->base.stats->connections++;
		rdps_dbg("server %u: connection from %s", ts->p.server_id, sc->peer);
	}
	return 0; /* more may wait: the listener stays readable */
}

/* Connections that did not finish their handshake in time. */
static void expire_handshakes(struct tcp_server *ts, uint64_t now)
{
	while (link_queued(&ts->handshakes)) {
		struct tcp_sconn *sc = container_of(ts->handshakes.next, struct tcp_sconn, hs);

		if (now < sc->deadline_ns)
			break;
		if (!sc->late_read && !sc->closing) {
			int ret;

			/* Bytes that came in time but wait behind other events
			 * (or a busy server) count: read them first, once. */
			sc->late_read = true;
			ret = sconn_read(ts, sc);
			if (!ret)
				ret = sconn_flush(ts, sc);
			sconn_settle(ts, sc, ret);
			continue; /* admitted, given time to authenticate, or due still */
		}
		rdps_warn("server %u: client %s: no handshake after %.1f s (%s; the limit is "
			  "%.1f s, --handshake-timeout); closing the connection",
			  ts->p.server_id, sc->peer, (now - sc->since_ns) / 1e9,
			  sc->closing ? "refused, its reply not read" :
			  sc->awaiting_auth ? "challenged, no authentication came" :
			  sc->rx_len ? "part of a hello received" : "nothing received",
			  ts->handshake_ns / 1e9);
		if (ts->base.stats)
			ts->base.stats->handshake_timeouts++;
		sconn_close(ts, sc);
	}
}

static void tcp_timers(struct tcp_server *ts)
{
	uint64_t now = rdps_now_ns();

	if (!ts->listening && now >= ts->accept_retry_ns) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TCP_KEY_LISTENER };

		if (!epoll_ctl(ts->epfd, EPOLL_CTL_ADD, ts->lfd, &ev))
			ts->listening = true;
		else
			ts->accept_retry_ns = now + (uint64_t)ts->backoff_ms * 1000000ull;
	}
	expire_handshakes(ts, now);
	if (ts->cap_log.held && now - ts->cap_log.last_ns >= TCP_LOG_EVERY_NS)
		cap_log_write(ts, now);
}

/* Serves frames sc read before it had to stop taking requests. */
static int sconn_resume(struct tcp_server *ts, struct tcp_sconn *sc)
{
	int ret = 0;

	while (!ret && sc->stalled && sconn_may_take(ts, sc)) {
		ret = sconn_process(ts, sc);
		if (!ret)
			ret = sconn_flush(ts, sc);
	}
	return ret;
}

/*
 * What no event will announce: connections the reply budget stopped,
 * resumed in the order they stopped while the budget lasts (one that
 * stops again goes to the back), and the ready queue (frames read before a
 * pause at TCP_TX_HIGH, connections to close).
 */
static void serve_waiting(struct tcp_server *ts)
{
	while (!over_budget(ts) && link_queued(&ts->paused)) {
		struct tcp_sconn *sc = container_of(ts->paused.next, struct tcp_sconn, paused);
		int ret;

		link_remove(&sc->paused);
		ret = sconn_update(ts, sc); /* reads again */
		if (!ret)
			ret = sconn_resume(ts, sc);
		sconn_settle(ts, sc, ret);
	}
	while (link_queued(&ts->ready)) {
		struct tcp_sconn *sc = container_of(ts->ready.next, struct tcp_sconn, ready);

		link_remove(&sc->ready);
		sconn_settle(ts, sc, sconn_resume(ts, sc));
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

static int listen_common(const struct rdps_listen_params *p, struct rdps_tserver **out,
			 char *err, size_t errlen, bool exposed)
{
	struct tcp_server *ts;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TCP_KEY_LISTENER };
	struct epoll_event tev = { .events = EPOLLIN, .data.u64 = TCP_KEY_TIMER };
	int ret;

	*out = NULL;
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle || p->handshake_timeout_ms < 0)
		return -EINVAL;
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	ts->base.ops = &tcp_ops;
	ts->p = *p;
	ts->max_conns = p->max_connections ? p->max_connections : default_max_conns();
	ts->handshake_ns = (uint64_t)(p->handshake_timeout_ms ? p->handshake_timeout_ms
							   : TCP_HANDSHAKE_MS) * 1000000ull;
	ts->reply_budget = p->max_reply_buffer ? p->max_reply_buffer : default_reply_budget();
	link_init(&ts->handshakes);
	link_init(&ts->paused);
	link_init(&ts->ready);
	memcpy(ts->regions, p->regions, p->num_regions * sizeof(*p->regions));
	ts->p.regions = ts->regions;
	for (uint32_t i = 0; !exposed && i < p->num_regions; i++) {
		ts->regions[i].desc.remote_addr = 0; /* no one-sided access over TCP */
		ts->regions[i].desc.rkey = 0;
	}
	ts->welcome_len = rdps_wire_welcome_size(p->num_regions);
	ts->welcome = malloc(ts->welcome_len);
	if (!ts->welcome) {
		ret = -ENOMEM;
		goto err_free;
	}
	rdps_wire_build_welcome(ts->welcome, p->server_id, p->num_servers,
				ts->regions, p->num_regions);
	ret = rdps_sock_listen(p->host, p->port, &ts->lfd, err, errlen);
	if (ret)
		goto err_free_welcome;
	ts->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ts->epfd < 0) {
		ret = -errno;
		goto err_close_listener;
	}
	if (epoll_ctl(ts->epfd, EPOLL_CTL_ADD, ts->lfd, &ev)) {
		ret = -errno;
		goto err_close_epoll;
	}
	ts->listening = true;
	ts->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ts->tfd < 0) {
		ret = -errno;
		goto err_close_epoll;
	}
	if (epoll_ctl(ts->epfd, EPOLL_CTL_ADD, ts->tfd, &tev)) {
		ret = -errno;
		goto err_close_timer;
	}
	rdps_dbg("server %u: at most %u connections, %.1f s to finish a handshake, %zu MiB of "
		 "queued replies", p->server_id, ts->max_conns, ts->handshake_ns / 1e9,
		 ts->reply_budget >> 20);
	*out = &ts->base;
	return 0;

err_close_timer:
	close(ts->tfd);
err_close_epoll:
	close(ts->epfd);
err_close_listener:
	close(ts->lfd);
err_free_welcome:
	free(ts->welcome);
err_free:
	free(ts);
	return ret;
}

static int tcp_listen(const struct rdps_listen_params *p, struct rdps_tserver **out,
		      char *err, size_t errlen)
{
	return listen_common(p, out, err, errlen, false);
}

int rdps_tcp_listen_exposed(const struct rdps_listen_params *p,
			    struct rdps_tserver **out, char *err, size_t errlen)
{
	return listen_common(p, out, err, errlen, true);
}

static struct tcp_sconn *session_conn(struct tcp_server *ts, uint64_t session)
{
	for (uint32_t i = 0; i < ts->nslots; i++) {
		struct tcp_sconn *sc = ts->conns[i];

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

void rdps_tcp_session_close(struct rdps_tserver *s, uint64_t session)
{
	struct tcp_server *ts = to_tcp_server(s);
	struct tcp_sconn *sc = session_conn(ts, session);

	if (!sc || !sc->session_claimed)
		return;
	sc->session_claimed = false; /* the caller knows: no hook */
	sconn_flush(ts, sc);
	sconn_close(ts, sc);
}

int rdps_tcp_server_fd(struct rdps_tserver *s)
{
	return to_tcp_server(s)->epfd;
}

static int tcp_progress(struct rdps_tserver *s, int timeout_ms)
{
	struct tcp_server *ts = to_tcp_server(s);
	struct epoll_event evs[64];
	int n, ret = 0;

	n = epoll_wait(ts->epfd, evs, 64, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	ts->in_progress = true;
	for (int i = 0; i < n && !ret; i++) {
		struct tcp_sconn *sc;
		uint64_t key = evs[i].data.u64;
		int cret = 0;

		if (key == TCP_KEY_LISTENER) {
			ret = tcp_accept(ts);
			continue;
		}
		if (key == TCP_KEY_TIMER) {
			uint64_t ticks;

			/* The deadlines are checked below whatever woke us. */
			if (read(ts->tfd, &ticks, sizeof(ticks)) < 0)
				ticks = 0;
			ts->timer_ns = 0;
			continue;
		}
		sc = key - 1 < ts->nslots ? ts->conns[key - 1] : NULL;
		if (!sc)
			continue;
		if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !sc->closing)
			cret = sconn_read(ts, sc);
		if (!cret)
			cret = sconn_flush(ts, sc);
		/* Frames read before a pause get no new readable event: once
		 * the connection may take them, sconn_update() queued it in
		 * ready, which serve_waiting() serves below. */
		sconn_settle(ts, sc, cret);
	}
	if (!ret) {
		tcp_timers(ts);
		serve_waiting(ts);
	}
	ts->in_progress = false;
	tcp_timer_arm(ts);
	return ret ? ret : n;
}

static int tcp_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
		     const void *payload, size_t len)
{
	struct tcp_server *ts = to_tcp_server(s);
	uint32_t slot = (uint32_t)token, gen = (uint32_t)(token >> 32);
	struct tcp_sconn *sc = slot < ts->nslots ? ts->conns[slot] : NULL;
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
		ret = sconn_flush(ts, sc);
	if (ret) {
		sc->closing = true;
		sconn_update(ts, sc); /* queued for progress() to close */
	}
	return ret;
}

static void tcp_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct tcp_server *ts;
	uint64_t deadline;

	if (!s)
		return;
	ts = to_tcp_server(s);
	ts->in_progress = true; /* no timer to arm any more */
	deadline = deadline_after(timeout_ms);
	/* Let queued replies (e.g. the shutdown acknowledgement) go out. */
	for (;;) {
		bool pending = false;

		for (uint32_t i = 0; i < ts->nslots; i++) {
			struct tcp_sconn *sc = ts->conns[i];

			if (sc && sc->tx_len > sc->tx_off) {
				if (sconn_flush(ts, sc))
					sconn_close(ts, sc);
				else
					pending = true;
			}
		}
		if (!pending || rdps_now_ns() >= deadline)
			break;
		usleep(1000);
	}
	for (uint32_t i = 0; i < ts->nslots; i++)
		if (ts->conns[i])
			sconn_close(ts, ts->conns[i]);
	free(ts->conns);
	close(ts->tfd);
	close(ts->epfd);
	close(ts->lfd);
	free(ts->welcome);
	free(ts);
}

static void tcp_query(uint32_t num_clients, struct rdps_transport_info *out)
{
	/* Replies are buffered per connection up to TCP_TX_HIGH; nothing pinned. */
	*out = (struct rdps_transport_info){ .push_msg_bytes = RDPS_WIRE_MAX_FRAME };
}

static int tcp_route(const char *host, char *via, size_t vialen)
{
	snprintf(via, vialen, "TCP reaches every address");
	return 0;
}

static const struct rdps_transport_ops tcp_ops = {
	.name = "tcp",
	.connect = tcp_connect,
	.close = tcp_close,
	.pull_post = tcp_pull_post,
	.pull_wait = tcp_pull_wait,
	.push = tcp_push,
	.push_gather = tcp_push_gather,
	.call = tcp_call,
	.listen = tcp_listen,
	.progress = tcp_progress,
	.reply = tcp_reply,
	.destroy = tcp_destroy,
	.query = tcp_query,
	.route = tcp_route,
};

const struct rdps_transport_ops *rdps_transport_tcp(void)
{
	return &tcp_ops;
}

/* ====================================================================== */
/* Fuzzing                                                                */

int rdps_tcp_fuzz_client(int fd, const struct rdps_conn_params *p, struct rdps_conn **out,
			 char *err, size_t errlen)
{
	/* Exactly tcp_connect(), on a socket the fuzzer plays the server of. */
	return conn_from_fd(fd, p, out, err, errlen);
}
