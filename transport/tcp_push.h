/* SPDX-License-Identifier: MIT */
/* Internal: a push frame of the tcp backend, sent straight from the
 * caller's rows (no grouping copy): ids, then gradients gathered by index
 * with writev. The connection's flow control stays with the caller. */
#ifndef RDPS_TRANSPORT_TCP_PUSH_H
#define RDPS_TRANSPORT_TCP_PUSH_H

#include <stdint.h>

/* Payload bytes of a push frame of n rows of dim floats: rows header, ids,
 * gradients, padded to a multiple of 8 (the server reads ids aligned). */
uint64_t rdps_tcp_push_len(uint32_t n, uint32_t dim);

/* Sends one whole push frame on fd before deadline_ns: the gradient of
 * ids[i] is grads + index[i] * dim (index NULL: grads + i * dim). Rows
 * adjacent in grads go out as one piece. The caller checked the frame's
 * size (rdps_tcp_push_len). Returns 0 or -errno as rdps_sock_sendv; on
 * failure part of the frame may have gone out (the stream is lost). */
int rdps_tcp_push_send(int fd, uint32_t table, uint32_t dim, const uint64_t *ids,
		       const float *grads, const uint32_t *index, uint32_t n,
		       uint64_t deadline_ns);

/* The same frame of another rows request (RDPS_REQ_SET: data are rows of
 * dim 32-bit words). */
int rdps_tcp_rows_send(int fd, uint8_t type, uint32_t table, uint32_t dim, const uint64_t *ids,
		       const void *data, const uint32_t *index, uint32_t n, uint64_t deadline_ns);

#endif
