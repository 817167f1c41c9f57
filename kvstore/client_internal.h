/* SPDX-License-Identifier: MIT */
/*
 * Internal: what layers built on the client (the graph's sampling,
 * graph/) need of it beyond the public API.
 */
#ifndef RDPS_KVSTORE_CLIENT_INTERNAL_H
#define RDPS_KVSTORE_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rdps/client.h"

/* One request to server s that may be sent again (it changes nothing on
 * the server): after a lost connection, with reconnect_ms, the server is
 * reconnected and asked again. *reply_len gets the reply's bytes. 0, or
 * -errno with the reason in rdps_client_errmsg(). */
int rdps_client_call_idempotent(struct rdps_client *c, uint32_t s, uint32_t type,
				const void *req, size_t req_len, void *reply, size_t reply_cap,
				size_t *reply_len);

/* As rdps_client_call_idempotent, to servers[0..n) at once (request i to
 * servers[i], distinct servers): every request is sent before any reply is
 * awaited where the transport splits its calls (call_send/call_recv), one
 * after the other where it does not; the replies are awaited against one
 * deadline (the client's timeout), not one per server. reply_lens[i] gets
 * reply i's bytes. */
int rdps_client_call_many(struct rdps_client *c, uint32_t type, uint32_t n,
			  const uint32_t *servers, void *const *reqs, const size_t *req_lens,
			  void *const *replies, const size_t *reply_caps, size_t *reply_lens);

/* Sets the reason rdps_client_errmsg() gives; returns ret. */
int rdps_client_fail(struct rdps_client *c, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
