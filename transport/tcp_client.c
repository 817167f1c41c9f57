// SPDX-License-Identifier: MIT
/*
 * TCP backend, client side: length-prefixed binary frames (wire.h) on one
 * connection per client per server, nonblocking sockets with poll()
 * deadlines, so no wait is unbounded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "sock.h"
#include "tcp.h"
#include "tcp_priv.h"
#include "tcp_push.h"
#include "wire.h"

#define TCP_MAX_PENDING_PULLS RDPS_TRANSPORT_POST_DEPTH
#define TCP_PUSH_RING 4096              /* unacknowledged pushes */

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
	int call_out;                      /* type of a sent call not yet answered, or -1 */
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
	tc->base.ops = rdps_transport_tcp();
	tc->fd = fd;
	tc->call_out = -1;
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

int tcp_connect(const struct rdps_conn_params *p, struct rdps_conn **out,
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

void tcp_close(struct rdps_conn *c)
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
	/* A call's reply is next on the stream: nothing else until it is read. */
	if (tc->call_out >= 0)
		return -EBUSY;
	return 0;
}

int tcp_pull_post(struct rdps_conn *c, uint32_t table,
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

int tcp_pull_wait(struct rdps_conn *c)
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

/* Sends gradients straight from the caller's rows (index: which row of
 * grads goes with ids[i]; NULL: row i), with no copy (tcp_push.c). */
int tcp_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
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

int tcp_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
	     const float *grads, uint32_t n)
{
	return tcp_push_gather(c, table, ids, grads, NULL, n);
}

int tcp_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	    uint32_t n)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(tc->timeout_ms);
	struct rdps_wire_hdr h;
	int ret;

	if ((ret = check_usable(tc)))
		return ret;
	if (table >= c->num_tables || !c->tables[table].dim)
		return -ENOENT;
	if (tc->npend)
		return -EBUSY;
	if (rdps_tcp_push_len(n, c->tables[table].dim) > RDPS_WIRE_MAX_FRAME)
		return -EMSGSIZE;
	ret = rdps_tcp_rows_send(tc->fd, RDPS_REQ_SET, table, c->tables[table].dim, ids, rows,
				 NULL, n, deadline);
	if (ret)
		return conn_fail(tc, ret, "sending rows");
	/* Acknowledgements of earlier pushes may come first. */
	return read_reply(tc, RDPS_REQ_SET, &h, deadline, "the set reply");
}

int tcp_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms)
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
	if (!rdps_wire_call_len_ok(type, req_len))
		return -EINVAL;
	c->reply_len = 0;
	snprintf(what, sizeof(what), "the %s reply", rdps_req_name((int)type));
	rdps_wire_hdr_init(&h, (uint8_t)type, (uint32_t)req_len, 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ (void *)req, req_len };
	ret = rdps_sock_sendv(tc->fd, iov, req_len ? 2 : 1, deadline);
	if (ret)
		return conn_fail(tc, ret, what);
	tc->call_out = (int)type;
	return 0;
}

int tcp_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(timeout_ms > 0 ? timeout_ms : tc->timeout_ms);
	struct rdps_wire_hdr h;
	char what[64];
	int ret;

	if (tc->broken)
		return -ENOTCONN;
	if (tc->call_out != (int)type)
		return -EINVAL; /* no such call sent */
	tc->call_out = -1;
	snprintf(what, sizeof(what), "the %s reply", rdps_req_name((int)type));
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
		/* A sample's reply is as long as the edges it found. */
		if (!reply || (type == RDPS_REQ_SAMPLE ? h.len > reply_len : h.len != reply_len)) {
			tc->broken = true;
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: %s reply of unexpected size %u", c->peer,
				 rdps_req_name((int)type), h.len);
			return -EPROTO;
		}
		ret = rdps_sock_recv(tc->fd, reply, h.len, deadline);
		if (ret)
			return conn_fail(tc, ret, what);
		c->reply_len = h.len;
	}
	/* A flush also reports a failed earlier push. */
	if (type == RDPS_REQ_FLUSH)
		return take_push_err(tc);
	return 0;
}

int tcp_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
	     void *reply, size_t reply_len, int timeout_ms)
{
	int ret = tcp_call_send(c, type, req, req_len, timeout_ms);

	return ret ? ret : tcp_call_recv(c, type, reply, reply_len, timeout_ms);
}

int rdps_tcp_bind(struct rdps_conn *c, const void *req, size_t req_len, void *rep,
		  size_t rep_cap, size_t *rep_len)
{
	struct tcp_conn *tc = to_tcp_conn(c);
	uint64_t deadline = deadline_after(tc->timeout_ms);
	struct rdps_wire_hdr h;
	struct iovec iov[2];
	int ret;

	*rep_len = 0;
	if ((ret = check_usable(tc)))
		return ret;
	if (req_len > RDPS_WIRE_BIND_MAX)
		return -EMSGSIZE;
	rdps_wire_hdr_init(&h, RDPS_WIRE_BIND, (uint32_t)req_len, 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ (void *)req, req_len };
	ret = rdps_sock_sendv(tc->fd, iov, req_len ? 2 : 1, deadline);
	if (ret)
		return conn_fail(tc, ret, "the endpoint binding");
	ret = read_reply(tc, RDPS_WIRE_BIND, &h, deadline, "the endpoint binding");
	if (ret)
		return ret;
	if (h.len > rep_cap) {
		tc->broken = true;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: endpoint binding reply of %u bytes",
			 c->peer, h.len);
		return -EPROTO;
	}
	ret = rdps_sock_recv(tc->fd, rep, h.len, deadline);
	if (ret)
		return conn_fail(tc, ret, "the endpoint binding");
	*rep_len = h.len;
	return 0;
}

/* ====================================================================== */
/* Fuzzing                                                                */

int rdps_tcp_fuzz_client(int fd, const struct rdps_conn_params *p, struct rdps_conn **out,
			 char *err, size_t errlen)
{
	/* Exactly tcp_connect(), on a socket the fuzzer plays the server of. */
	return conn_from_fd(fd, p, out, err, errlen);
}
