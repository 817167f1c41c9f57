/* SPDX-License-Identifier: MIT */
/* The rdps wire format (shared by every stream-based backend and by the
 * handshake of RDMA backends). Little-endian, fixed-width, read in place. */
#ifndef RDPS_TRANSPORT_WIRE_H
#define RDPS_TRANSPORT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/auth.h"
#include "rdps/transport.h"

#define RDPS_WIRE_MAGIC 0x53504452u /* "RDPS" */
#define RDPS_WIRE_VERSION 3 /* 2: push counts in the hello, server state in the welcome;
			     * 3: non-finite counts in the stats */
#define RDPS_WIRE_MAX_FRAME (64u << 20) /* payload bytes */
#define RDPS_WIRE_REPLY 0x80            /* type bit of replies */
#define RDPS_WIRE_ERRMSG_MAX 400

/* Every frame: header, then len payload bytes. Replies carry the request
 * type | RDPS_WIRE_REPLY and status 0 or -errno (then the payload is the
 * reason, text without NUL). */
struct rdps_wire_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t len;
	int32_t status;
};
_Static_assert(sizeof(struct rdps_wire_hdr) == 16, "wire layout");

/* Pull and push payloads start with this; then n u64 ids; push then has
 * n * dim f32 gradients. */
struct rdps_wire_rows {
	uint32_t table;
	uint32_t n;
};
_Static_assert(sizeof(struct rdps_wire_rows) == 8, "wire layout");

struct rdps_wire_hello {
	uint32_t client_id;
	uint32_t num_clients;
	uint32_t server_id;  /* the server the client believes it reached */
	uint32_t flags;      /* RDPS_HELLO_* */
	uint64_t pushed_rows; /* rows this client pushed to this server so far */
	uint8_t nonce[RDPS_NONCE_LEN]; /* the client's challenge to the server */
};
#define RDPS_HELLO_OBSERVER 0x1u /* not a client of the job */
_Static_assert(sizeof(struct rdps_wire_hello) == 56, "wire layout");

/*
 * Authentication (servers with a secret): the server answers a hello with
 * CHALLENGE (payload: its nonce); the client sends AUTH (payload: its MAC);
 * only then the welcome (or an -EACCES error) follows. These frame types
 * are the handshake's own, not request kinds.
 */
#define RDPS_WIRE_CHALLENGE 0x20
#define RDPS_WIRE_AUTH 0x21
/*
 * Endpoint binding (backends whose data path has endpoint addresses rather
 * than connections: ofi): after the welcome, an admitted client sends BIND
 * (payload: what its backend needs, e.g. its endpoint address); the reply
 * carries the server backend's answer (its endpoint address, the session's
 * first credits), or an error. One per connection; tcp.h's hooks.
 */
#define RDPS_WIRE_BIND 0x22
#define RDPS_WIRE_BIND_MAX 1024 /* payload bytes, each way */
#define RDPS_AUTH_CLIENT_LABEL "rdps-auth-client-v1"
#define RDPS_AUTH_SERVER_LABEL "rdps-auth-server-v1"

struct rdps_wire_welcome {
	uint32_t server_id;
	uint32_t num_servers;
	uint32_t num_tables;
	uint32_t flags;        /* RDPS_WELCOME_* */
	uint64_t session;      /* binds RDMA connections to this connection */
	uint64_t instance;     /* struct rdps_welcome_info, field by field */
	uint64_t rows_held;
	uint64_t ckpt_seq;
	uint64_t ckpt_age_ms;
	uint64_t reserved;
	uint8_t proof[RDPS_MAC_LEN]; /* the server's MAC, if authenticated */
	/* then num_tables struct rdps_table_desc */
};
#define RDPS_WELCOME_AUTHENTICATED 0x1u
_Static_assert(sizeof(struct rdps_wire_welcome) == 96, "wire layout");

/* Payload of a push reply: how many request bytes it acknowledges. */
struct rdps_wire_ack {
	uint32_t bytes;
	uint32_t reserved;
};

static inline void rdps_wire_hdr_init(struct rdps_wire_hdr *h, uint8_t type,
				      uint32_t len, int32_t status)
{
	h->magic = RDPS_WIRE_MAGIC;
	h->version = RDPS_WIRE_VERSION;
	h->type = type;
	h->flags = 0;
	h->len = len;
	h->status = status;
}

/* Checks magic, version and length of a received header. Returns 0, or
 * -EPROTO/-EMSGSIZE with a reason in why. */
int rdps_wire_check_hdr(const struct rdps_wire_hdr *h, char *why, size_t whylen);

/* The largest payload a request frame of type may carry once the
 * handshake is done, checked on its header before any of it is buffered:
 * empty for the requests without a body, the exact size of fixed ones, the
 * frame limit for rows, and 0 for unknown types. An observer may ask only
 * for stats, a checkpoint or a shutdown: its frames are all empty. */
uint32_t rdps_wire_request_max(uint8_t type, bool observer);

/* Checks a state request's header against its length (the server checks
 * the table, its state per row and the ids). 0, or -EPROTO with a reason. */
int rdps_wire_check_state(const void *payload, size_t len, char *why, size_t whylen);

/* Whether a request of type and len may go over a backend's two-sided
 * call path (call/call_send): the kinds that have one, of a size they may
 * have (the server checks the rest). */
bool rdps_wire_call_len_ok(uint32_t type, size_t len);

/* Validates the body of a pull/push request against the exposed regions:
 * table index, n, exact length. Returns 0 or -errno with a reason. */
/* Checks a sample request's header against its length and the limits
 * (RDPS_SAMPLE_MAX_FANOUT, RDPS_SAMPLE_MAX_EDGES); the tables and seeds are
 * the server's to check. 0, or -EPROTO / -EINVAL with a reason in why. */
int rdps_wire_check_sample(const void *payload, size_t len, char *why, size_t whylen);

int rdps_wire_check_rows(int type, const void *payload, uint32_t len,
			 const struct rdps_region *regions, uint32_t nregions,
			 char *why, size_t whylen);

/* Validates a welcome (from a server) and copies its tables into c.
 * Checks every table's shape; returns 0 or -EPROTO with a reason. */
int rdps_wire_parse_welcome(const void *payload, uint32_t len,
			    uint32_t expect_server, struct rdps_conn *c,
			    struct rdps_wire_welcome *w, char *why, size_t whylen);

/* Size of the welcome for n regions, and the encoder. */
size_t rdps_wire_welcome_size(uint32_t nregions);
void rdps_wire_build_welcome(void *buf, uint32_t server_id,
			     uint32_t num_servers,
			     const struct rdps_region *regions, uint32_t n);

#endif
