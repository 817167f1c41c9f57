/* SPDX-License-Identifier: MIT */
/* Internal to the TCP backend: what its client and server files share with
 * the ops table (tcp.c). */
#ifndef RDPS_TRANSPORT_TCP_PRIV_H
#define RDPS_TRANSPORT_TCP_PRIV_H

#include "rdps/transport.h"

#define TCP_TX_HIGH (8u << 20)          /* a server stops reading a conn above this */
#define TCP_MAX_THREADS 64              /* server workers */

/* tcp_client.c */
int tcp_connect(const struct rdps_conn_params *p, struct rdps_conn **out, char *err,
		size_t errlen);
void tcp_close(struct rdps_conn *c);
int tcp_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
		  float *out);
int tcp_pull_wait(struct rdps_conn *c);
int tcp_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const float *grads,
	     uint32_t n);
int tcp_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		    const float *grads, const uint32_t *index, uint32_t n);
int tcp_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms);
int tcp_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms);
int tcp_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
	     void *reply, size_t reply_len, int timeout_ms);

/* tcp_server.c */
int tcp_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
	       size_t errlen);
int tcp_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms);
int tcp_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
	      const void *payload, size_t len);
void tcp_destroy(struct rdps_tserver *s, int timeout_ms);
int tcp_add_region(struct rdps_tserver *s, struct rdps_region *r);
int tcp_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	    uint32_t n);
void tcp_remove_region(struct rdps_tserver *s, uint32_t table_id);

#endif
