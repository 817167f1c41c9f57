// SPDX-License-Identifier: MIT
/* tcp backend: a push frame gathered from the caller's rows (tcp_push.h). */
#include <limits.h>
#include <sys/uio.h>

#include "sock.h"
#include "tcp_push.h"
#include "wire.h"

/* Pieces per sendmsg: under IOV_MAX, and a small stack array. */
#define TCP_PUSH_IOV 256
_Static_assert(TCP_PUSH_IOV <= IOV_MAX, "one sendmsg");

uint64_t rdps_tcp_push_len(uint32_t n, uint32_t dim)
{
	uint64_t len = sizeof(struct rdps_wire_rows) + (uint64_t)n * 8 + (uint64_t)n * dim * 4;

	return (len + 7) & ~7ull;
}

int rdps_tcp_push_send(int fd, uint32_t table, uint32_t dim, const uint64_t *ids,
		       const float *grads, const uint32_t *index, uint32_t n,
		       uint64_t deadline_ns)
{
	return rdps_tcp_rows_send(fd, RDPS_REQ_PUSH, table, dim, ids, grads, index, n,
				  deadline_ns);
}

int rdps_tcp_rows_send(int fd, uint8_t type, uint32_t table, uint32_t dim, const uint64_t *ids,
		       const void *data, const uint32_t *index, uint32_t n, uint64_t deadline_ns)
{
	const float *grads = data;
	static const uint32_t zero_pad;
	const uint64_t len = rdps_tcp_push_len(n, dim);
	const size_t row = (size_t)dim * 4;
	struct rdps_wire_rows rows = { .table = table, .n = n };
	struct iovec iov[TCP_PUSH_IOV];
	struct rdps_wire_hdr h;
	int cnt = 3, ret;

	rdps_wire_hdr_init(&h, type, (uint32_t)len, 0);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ &rows, sizeof(rows) };
	iov[2] = (struct iovec){ (void *)ids, (size_t)n * 8 };
	for (uint32_t i = 0; i < n;) {
		const float *src = grads + (size_t)(index ? index[i] : i) * dim;
		uint32_t run = 1;

		/* One piece per run of rows adjacent in the caller's array. */
		while (i + run < n && (!index || index[i + run] == index[i] + run))
			run++;
		if (cnt == TCP_PUSH_IOV) {
			/* The kernel copies each piece; later ones are still
			 * the caller's until this returns. */
			if ((ret = rdps_sock_sendv(fd, iov, cnt, deadline_ns)))
				return ret;
			cnt = 0;
		}
		iov[cnt++] = (struct iovec){ (void *)src, (size_t)run * row };
		i += run;
	}
	if (len != sizeof(rows) + (uint64_t)n * 8 + (uint64_t)n * row) {
		if (cnt == TCP_PUSH_IOV) {
			if ((ret = rdps_sock_sendv(fd, iov, cnt, deadline_ns)))
				return ret;
			cnt = 0;
		}
		iov[cnt++] = (struct iovec){ (void *)&zero_pad, 4 };
	}
	return rdps_sock_sendv(fd, iov, cnt, deadline_ns);
}
