// SPDX-License-Identifier: MIT
/*
 * TCP server: one request frame, its header checked. Decodes it into a
 * struct rdps_request for the core's handler (checking its body against
 * the tables), reserves the reply in place where the core writes it (pull
 * rows, sampled edges), and queues the reply.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "sock.h"
#include "tcp.h"
#include "tcp_priv.h"
#include "tcp_srv.h"
#include "wire.h"

uint32_t tcp_frame_max_len(const struct tcp_sconn *sc, const struct rdps_wire_hdr *h)
{
	if (h->type == RDPS_WIRE_AUTH)
		return RDPS_MAC_LEN;
	return rdps_wire_request_max(h->type, sc->observer && h->type != RDPS_REQ_HELLO);
}

/* An error reply, at most: what every request may get instead. */
#define ERROR_REPLY (sizeof(struct rdps_wire_hdr) + RDPS_WIRE_ERRMSG_MAX)

size_t tcp_frame_reply_bound(struct tcp_server *ts, const struct rdps_wire_hdr *h,
			     const uint8_t *payload)
{
	const size_t hdr = sizeof(struct rdps_wire_hdr);
	size_t bound = 0;

	switch (h->type) {
	case RDPS_REQ_HELLO: /* the welcome (its table list), or a challenge */
		bound = hdr + rdps_wire_welcome_size(RDPS_MAX_TABLES);
		break;
	case RDPS_WIRE_AUTH:
		bound = hdr + rdps_wire_welcome_size(RDPS_MAX_TABLES);
		break;
	case RDPS_WIRE_BIND:
		bound = hdr + RDPS_WIRE_BIND_MAX;
		break;
	case RDPS_REQ_PULL: {
		struct rdps_wire_rows rows;
		uint32_t nregions = __atomic_load_n(&ts->nregions, __ATOMIC_ACQUIRE);

		if (h->len < sizeof(rows))
			break;
		memcpy(&rows, payload, sizeof(rows));
		if (rows.table < nregions) {
			uint64_t bytes = (uint64_t)rows.n *
					 __atomic_load_n(&ts->regions[rows.table].desc.dim,
							 __ATOMIC_ACQUIRE) * 4;

			/* A larger one is refused (a small error reply). */
			if (bytes <= RDPS_WIRE_MAX_FRAME)
				bound = hdr + (size_t)bytes;
		}
		break;
	}
	case RDPS_REQ_SAMPLE: {
		struct rdps_sample_req sr;
		char why[8];

		if (rdps_wire_check_sample(payload, h->len, why, sizeof(why)))
			break;
		memcpy(&sr, payload, sizeof(sr));
		bound = hdr + rdps_sample_reply_bound(sr.n, sr.fanout);
		break;
	}
	case RDPS_REQ_STATS:
		bound = hdr + sizeof(struct rdps_server_stats);
		break;
	case RDPS_REQ_STATE: {
		struct rdps_state_req sr;
		char why[8];

		if (rdps_wire_check_state(payload, h->len, why, sizeof(why)))
			break;
		memcpy(&sr, payload, sizeof(sr));
		if (sr.op == RDPS_STATE_READ) /* within the frame limit: checked */
			bound = hdr + (size_t)sr.n * sr.floats_per_row * 4;
		break;
	}
	case RDPS_REQ_TABLE:
		bound = hdr + sizeof(struct rdps_table_desc);
		break;
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_ALLREDUCE:
	case RDPS_REQ_CHECKPOINT: /* answered later: held until then */
		bound = TCP_DEFERRED_REPLY;
		break;
	default:
		break;
	}
	return bound > ERROR_REPLY ? bound : ERROR_REPLY;
}

/* One complete frame (header checked). Returns -errno only for fatal
 * per-connection errors (the connection is then closed). */
int tcp_handle_frame(struct tcp_server *ts, struct tcp_sconn *sc,
		     const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	char why[256] = "";
	struct rdps_request req = {
		.type = h->type, .client_id = sc->client_id,
		.num_clients = sc->num_clients, .observer = sc->observer,
		.peer = sc->peer, .token = tcp_make_token(sc), .errmsg = why, .errlen = sizeof(why),
		.admin = sc->authenticated || sc->loopback,
	};
	struct rdps_server_stats st;
	struct rdps_table_desc desc;
	size_t tx_mark = sc->tx_len;
	int ret;

	if (h->type == RDPS_REQ_HELLO)
		return tcp_handle_hello(ts, sc, h, payload);
	if (h->type == RDPS_WIRE_AUTH)
		return tcp_handle_auth(ts, sc, h, payload);
	if (!sc->hello) {
		rdps_warn("server %u: client %s: sent a %s before the hello; closing",
			  ts->p.server_id, sc->peer, rdps_req_name(h->type));
		tcp_stat_bad_frame(ts);
		return -EPROTO;
	}
	if (h->type == RDPS_WIRE_BIND)
		return tcp_handle_bind(ts, sc, h, payload);
	switch (h->type) {
	case RDPS_REQ_PULL:
	case RDPS_REQ_PUSH:
	case RDPS_REQ_SET: {
		struct rdps_wire_rows rows;
		uint32_t len = h->len, nregions = __atomic_load_n(&ts->nregions, __ATOMIC_ACQUIRE);

		/* Pushes and sets are padded to 8 bytes; accept exactly that
		 * padding. */
		if (h->type != RDPS_REQ_PULL && len >= sizeof(rows)) {
			memcpy(&rows, payload, sizeof(rows));
			if (rows.table < nregions &&
			    (rows.n * (uint64_t)ts->regions[rows.table].desc.dim) % 2)
				len -= 4;
		}
		ret = rdps_wire_check_rows(h->type, payload, len, ts->regions, nregions, why,
					   sizeof(why));
		if (ret)
			return tcp_refuse(ts, sc, h->type, ret, why);
		memcpy(&rows, payload, sizeof(rows));
		req.table = rows.table;
		req.n = rows.n;
		req.ids = (const uint64_t *)(payload + sizeof(rows));
		if (h->type != RDPS_REQ_PULL) {
			/* a set's rows travel where a push's gradients do */
			req.grads = (const float *)(payload + sizeof(rows) + (size_t)rows.n * 8);
		} else {
			uint64_t bytes = (uint64_t)rows.n * ts->regions[rows.table].desc.dim * 4;

			if (bytes > RDPS_WIRE_MAX_FRAME) {
				snprintf(why, sizeof(why),
					 "pull of %u rows would need a %llu-byte reply, over the limit",
					 rows.n, (unsigned long long)bytes);
				return tcp_refuse(ts, sc, h->type, -EMSGSIZE, why);
			}
			req.rows_out = tcp_tx_frame(sc, RDPS_REQ_PULL | RDPS_WIRE_REPLY, 0,
						(uint32_t)bytes);
			if (!req.rows_out)
				return -ENOMEM;
		}
		break;
	}
	case RDPS_REQ_FLUSH:
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_STATS:
	case RDPS_REQ_SHUTDOWN:
	case RDPS_REQ_CHECKPOINT:
		if (h->len) {
			snprintf(why, sizeof(why), "%s request with a %u-byte body",
				 rdps_req_name(h->type), h->len);
			return tcp_refuse(ts, sc, h->type, -EPROTO, why);
		}
		if (h->type == RDPS_REQ_STATS) {
			req.reply = &st;
			req.reply_cap = sizeof(st);
		}
		break;
	case RDPS_REQ_TABLE:
		if (h->len != sizeof(struct rdps_table_req)) {
			snprintf(why, sizeof(why), "table request of %u bytes (want %zu)", h->len,
				 sizeof(struct rdps_table_req));
			return tcp_refuse(ts, sc, h->type, -EPROTO, why);
		}
		req.payload = payload;
		req.payload_len = h->len;
		req.reply = &desc;
		req.reply_cap = sizeof(desc);
		break;
	case RDPS_REQ_SAMPLE: {
		struct rdps_sample_req sr;

		ret = rdps_wire_check_sample(payload, h->len, why, sizeof(why));
		if (ret)
			return tcp_refuse(ts, sc, h->type, ret, why);
		memcpy(&sr, payload, sizeof(sr));
		req.payload = payload;
		req.payload_len = h->len;
		/* The reply is built in place, in a frame of its largest size
		 * that is cut to what the handler wrote. */
		req.reply_cap = rdps_sample_reply_bound(sr.n, sr.fanout);
		req.reply = tcp_tx_frame(sc, RDPS_REQ_SAMPLE | RDPS_WIRE_REPLY, 0,
				     (uint32_t)req.reply_cap);
		if (!req.reply)
			return -ENOMEM;
		break;
	}
	case RDPS_REQ_STATE: {
		struct rdps_state_req sr;

		ret = rdps_wire_check_state(payload, h->len, why, sizeof(why));
		if (ret)
			return tcp_refuse(ts, sc, h->type, ret, why);
		memcpy(&sr, payload, sizeof(sr));
		req.payload = payload;
		req.payload_len = h->len;
		if (sr.op == RDPS_STATE_READ) {
			/* Written in place, as a pull's rows are. */
			req.reply_cap = (size_t)sr.n * sr.floats_per_row * 4;
			req.reply = tcp_tx_frame(sc, RDPS_REQ_STATE | RDPS_WIRE_REPLY, 0,
						 (uint32_t)req.reply_cap);
			if (!req.reply)
				return -ENOMEM;
		}
		break;
	}
	case RDPS_REQ_ALLREDUCE:
		if (!h->len || h->len % 8 || h->len > RDPS_ALLREDUCE_MAX * 8) {
			snprintf(why, sizeof(why), "allreduce of %u bytes (want 8..%d, multiple of 8)",
				 h->len, RDPS_ALLREDUCE_MAX * 8);
			return tcp_refuse(ts, sc, h->type, -EPROTO, why);
		}
		req.payload = payload;
		req.payload_len = h->len;
		break;
	default:
		snprintf(why, sizeof(why), "unknown request type %u", h->type);
		return tcp_refuse(ts, sc, h->type, -EOPNOTSUPP, why);
	}

	ret = ts->p.handle(ts->p.ctx, &req);
	if (ret == RDPS_REPLY_DEFERRED) {
		sc->deferred++; /* its reply's bytes stay held (tcp_frame_reply_bound) */
		return 0;
	}
	if (ret < 0) {
		sc->tx_len = tx_mark; /* drop a reserved pull reply */
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rdps_strerror(ret));
		return tcp_refuse(ts, sc, h->type, ret, why);
	}
	if (h->type == RDPS_REQ_PULL || (h->type == RDPS_REQ_STATE && req.reply))
		return 0; /* rows already in place */
	if (h->type == RDPS_REQ_SAMPLE) {
		struct rdps_wire_hdr rh;

		rdps_wire_hdr_init(&rh, RDPS_REQ_SAMPLE | RDPS_WIRE_REPLY,
				   (uint32_t)req.reply_len, 0);
		memcpy(sc->tx + tx_mark, &rh, sizeof(rh));
		sc->tx_len = tx_mark + sizeof(rh) + req.reply_len;
		return 0;
	}
	if (h->type == RDPS_REQ_STATS || h->type == RDPS_REQ_TABLE) {
		void *p = tcp_tx_frame(sc, h->type | RDPS_WIRE_REPLY, 0, (uint32_t)req.reply_len);

		if (!p)
			return -ENOMEM;
		memcpy(p, req.reply, req.reply_len);
		return 0;
	}
	return tcp_tx_frame(sc, h->type | RDPS_WIRE_REPLY, 0, 0) ? 0 : -ENOMEM;
}
