/* SPDX-License-Identifier: MIT */
/* Socket helpers shared by backends that speak over TCP (the tcp backend,
 * and RDMA backends' handshakes). Every wait is bounded by a deadline. */
#ifndef RDPS_TRANSPORT_SOCK_H
#define RDPS_TRANSPORT_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Binds a nonblocking listening socket to host:port with SO_REUSEADDR.
 * A busy port gives -EADDRINUSE and a reason naming it. */
int rdps_sock_listen(const char *host, uint16_t port, int *fd, char *err,
		     size_t errlen);

/* Connects to host:port (nonblocking socket, TCP_NODELAY), retrying
 * refused connections until timeout_ms has passed, so clients may start
 * before servers. */
int rdps_sock_connect(const char *host, uint16_t port, int timeout_ms,
		      int *fd, char *err, size_t errlen);

/* Sends every byte of iov before deadline_ns (monotonic). Returns 0,
 * -ETIMEDOUT, -ECONNRESET/-EPIPE or -errno. */
int rdps_sock_sendv(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ns);

/* Receives exactly len bytes before deadline_ns. Returns 0, -ETIMEDOUT,
 * -ECONNRESET (peer closed) or -errno. */
int rdps_sock_recv(int fd, void *buf, size_t len, uint64_t deadline_ns);

/* "host:port" of the peer. */
void rdps_sock_peer(int fd, char *buf, size_t len);

/* "host:port" of an address (e.g. the one accept() returned); "?:0" for
 * families other than IPv4 and IPv6. */
struct sockaddr;
void rdps_sock_addr_str(const struct sockaddr *sa, char *buf, size_t len);

/* Whether an address is this machine's loopback (127.0.0.0/8, ::1, or
 * IPv4 loopback mapped into IPv6): a peer there runs on this machine. */
bool rdps_sock_is_loopback(const struct sockaddr *sa);

#endif
