// SPDX-License-Identifier: MIT
/* Byte counts of a TCP socket from the kernel's struct tcp_info (linux/tcp.h:
 * glibc's netinet/tcp.h stops before them, and the two cannot be included
 * together); see fuzz_server.c's in_flight. */
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <linux/tcp.h>

#include "fuzz_server.h"

int fuzz_tcp_bytes(int fd, uint64_t *sent, uint64_t *received)
{
	struct tcp_info ti = { 0 };
	socklen_t tl = sizeof(ti);

	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof(ti.tcpi_bytes_retrans) ||
	    ti.tcpi_state != 1 /* TCP_ESTABLISHED (netinet/tcp.h) */)
		return -1;
	/* Each byte once: retransmissions are counted in tcpi_bytes_sent too. */
	*sent = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans;
	*received = ti.tcpi_bytes_received;
	return 0;
}
