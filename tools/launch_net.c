// SPDX-License-Identifier: MIT
/* rdps launch / doctor: can this host bind a server's address and port? */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch.h"

int rdps_launch_bind_check(const char *host, uint16_t port, char *why, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char portstr[8];
	int s, one = 1, ret, rc;

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc) {
		snprintf(why, len, "'%s' does not resolve (%s)", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	s = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		ret = -errno;
		snprintf(why, len, "socket: %s", strerror(errno));
		freeaddrinfo(res);
		return ret;
	}
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ret = bind(s, res->ai_addr, res->ai_addrlen) ? -errno : 0;
	close(s);
	freeaddrinfo(res);
	if (ret == -EADDRINUSE)
		snprintf(why, len, "%s:%u is in use", host, port);
	else if (ret == -EADDRNOTAVAIL)
		snprintf(why, len, "%s is not an address of this host", host);
	else if (ret)
		snprintf(why, len, "bind %s:%u: %s", host, port, strerror(-ret));
	else
		snprintf(why, len, "%s:%u is free", host, port);
	return ret;
}
