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

/* Checks that session is the token of a live, admitted (authenticated if
 * the server has a secret) connection of client_id; returns 0 and its job
 * size, or -ENOENT. RDMA backends bind their queue pairs with it. */
int rdps_tcp_session_find(struct rdps_tserver *s, uint64_t session, uint32_t client_id,
			  uint32_t *num_clients);

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
