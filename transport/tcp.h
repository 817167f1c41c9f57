/* SPDX-License-Identifier: MIT */
/* Internal: the TCP backend as a building block for RDMA backends, which
 * run their handshake and control requests over it. */
#ifndef RDPS_TRANSPORT_TCP_H
#define RDPS_TRANSPORT_TCP_H

#include "rdps/transport.h"

const struct rdps_transport_ops *rdps_transport_tcp(void);

/* Like tcp's listen(), but the welcome keeps the regions' remote_addr and
 * rkey as given (filled in by the RDMA backend). */
int rdps_tcp_listen_exposed(const struct rdps_listen_params *p,
			    struct rdps_tserver **out, char *err, size_t errlen);

/* Claims the session token of a live, admitted (authenticated if the
 * server has a secret) non-observer connection of client_id, for the one
 * RDMA queue pair that connection may own: a token is claimed at most once.
 * Returns 0 and the job size, -ENOENT (no live connection holds it) or
 * -EALREADY (claimed before). */
int rdps_tcp_session_claim(struct rdps_tserver *s, uint64_t session, uint32_t client_id,
			   uint32_t *num_clients);

/* Called (from progress() or destroy()) when a connection whose token was
 * claimed closes, so the RDMA backend tears down the queue pair bound to
 * it: the two live and die together. */
typedef void (*rdps_tcp_session_closed_fn)(void *ctx, uint64_t session);
void rdps_tcp_set_session_hook(struct rdps_tserver *s, rdps_tcp_session_closed_fn fn,
			       void *ctx);

/* Closes the connection that claimed session (its queue pair is gone). The
 * hook is not called for it. Not from within a request handler. */
void rdps_tcp_session_close(struct rdps_tserver *s, uint64_t session);

/*
 * Endpoint binding (wire.h RDPS_WIRE_BIND), for backends that reach a
 * client through an endpoint address rather than a connection (ofi): an
 * admitted, non-observer connection may bind once; the hook (called from
 * progress(0)) admits the client's request and writes its answer (at most
 * RDPS_WIRE_BIND_MAX bytes) into rep, or returns -errno with a reason in
 * why, which the client gets. A bound connection counts as claimed: the
 * session hook fires when it closes, and rdps_tcp_session_close() closes it.
 */
struct rdps_tcp_bind_who {
	uint64_t session;      /* the connection's token (from the welcome) */
	uint32_t client_id, num_clients;
	const char *peer;      /* "host:port" */
};
typedef int (*rdps_tcp_bind_fn)(void *ctx, const struct rdps_tcp_bind_who *who,
				const void *req, size_t req_len, void *rep, size_t *rep_len,
				char *why, size_t whylen);
void rdps_tcp_set_bind_hook(struct rdps_tserver *s, rdps_tcp_bind_fn fn, void *ctx);

/* Client side: sends the bind request and waits for the answer (its
 * payload into rep, up to rep_cap bytes, its length in *rep_len). 0, or
 * -errno with the server's reason in c->errmsg. */
int rdps_tcp_bind(struct rdps_conn *c, const void *req, size_t req_len, void *rep,
		  size_t rep_cap, size_t *rep_len);

/* The epoll descriptor a caller may poll before calling progress(0). */
int rdps_tcp_server_fd(struct rdps_tserver *s);

/* The socket of a client connection (to watch for a dead server). */
int rdps_tcp_conn_fd(struct rdps_conn *c);

/* For tests and fuzzing (tests/fuzz/fuzz_handshake.c): the client side of
 * connect() over fd, an already connected nonblocking stream socket (e.g.
 * one end of a socketpair whose other end plays the server): runs the real
 * handshake and welcome parsing and returns a connection usable with the
 * tcp ops, or -errno with a reason in err. Takes ownership of fd. */
int rdps_tcp_fuzz_client(int fd, const struct rdps_conn_params *p, struct rdps_conn **out,
			 char *err, size_t errlen);

#endif
