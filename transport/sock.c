// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdps/common.h"
#include "sock.h"

static int resolve(const char *host, uint16_t port, int passive,
		   struct addrinfo **res, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_family = AF_UNSPEC,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	char portstr[8];
	int rc;

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(host, portstr, &hints, res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

int rdps_sock_listen(const char *host, uint16_t port, int *fd, char *err,
		     size_t errlen)
{
	struct addrinfo *res, *ai;
	int ret = -EADDRNOTAVAIL, s = -1, one = 1;

	*fd = -1;
	ret = resolve(host, port, 1, &res, err, errlen);
	if (ret)
		return ret;
	for (ai = res; ai; ai = ai->ai_next) {
		s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s < 0) {
			ret = -errno;
			continue;
		}
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(s, ai->ai_addr, ai->ai_addrlen) && !listen(s, 1024))
			break;
		ret = -errno;
		close(s);
		s = -1;
	}
	freeaddrinfo(res);
	if (s < 0) {
		if (ret == -EADDRINUSE)
			snprintf(err, errlen,
				 "port %u on %s is already in use (another server running? see: ss -ltnp 'sport = :%u')",
				 port, host, port);
		else
			snprintf(err, errlen, "cannot listen on %s:%u: %s", host, port,
				 strerror(-ret));
		return ret;
	}
	*fd = s;
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int ms = rdps_ms_until(deadline_ns), rc;

		if (ms == 0 && rdps_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, ms);
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int connect_once(const struct addrinfo *ai, uint64_t deadline, int *fd)
{
	int s, one = 1, soerr = 0, ret;
	socklen_t sl = sizeof(soerr);

	s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
		ret = -errno;
		goto err_close;
	}
	ret = wait_fd(s, POLLOUT, deadline);
	if (ret)
		goto err_close;
	if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = errno;
	if (soerr) {
		ret = -soerr;
		goto err_close;
	}
	*fd = s;
	return 0;
err_close:
	close(s);
	return ret;
}

int rdps_sock_connect(const char *host, uint16_t port, int timeout_ms,
		      int *fd, char *err, size_t errlen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t backoff_us = 10000;
	struct addrinfo *res;
	int ret, said = 0;

	*fd = -1;
	ret = resolve(host, port, 0, &res, err, errlen);
	if (ret)
		return ret;
	for (;;) {
		ret = connect_once(res, deadline, fd);
		if (!ret)
			break;
		if ((ret != -ECONNREFUSED && ret != -ENETUNREACH &&
		     ret != -EHOSTUNREACH) || rdps_now_ns() >= deadline)
			break;
		if (!said++)
			rdps_info("waiting for server %s:%u to accept connections (up to %d s)",
				  host, port, timeout_ms / 1000);
		usleep((useconds_t)backoff_us);
		if (backoff_us < 500000)
			backoff_us *= 2;
	}
	freeaddrinfo(res);
	if (ret)
		snprintf(err, errlen, "cannot connect to %s:%u within %d ms: %s",
			 host, port, timeout_ms, strerror(-ret));
	return ret;
}

int rdps_sock_sendv(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ns)
{
	while (iovcnt > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0) {
			int ret;

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return errno == EPIPE ? -ECONNRESET : -errno;
			ret = wait_fd(fd, POLLOUT, deadline_ns);
			if (ret)
				return ret;
			continue;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int rdps_sock_recv(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		n = wait_fd(fd, POLLIN, deadline_ns);
		if (n)
			return (int)n;
	}
	return 0;
}

void rdps_sock_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	}
	snprintf(buf, len, "%s:%u", host, port);
}

void rdps_sock_peer(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		ss.ss_family = AF_UNSPEC;
	rdps_sock_addr_str((struct sockaddr *)&ss, buf, len);
}

bool rdps_sock_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
	}
	return false;
}
