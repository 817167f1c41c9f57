/* SPDX-License-Identifier: MIT */
/*
 * rdps transports: one ops table, several backends (tcp, inproc, verbs,
 * ofi). Code above transport/ picks a backend by name and never asks which
 * one it holds.
 *
 * Client side: a connection (struct rdps_conn) to one server. connect()
 * performs the handshake and fills the table descriptors the server exposes
 * (its row range, stride and, for RDMA backends, address and rkey). Pulls are
 * split into pull_post()/pull_wait() so a caller can post to every server
 * before waiting on any. Pushes are asynchronous; flush waits until the
 * server applied every earlier push of this connection.
 *
 * Server side: a transport server (struct rdps_tserver) listens, decodes
 * requests and hands them to the server core's handler; replies go back in
 * request order per connection, except deferred ones (barrier), which the
 * core completes later with reply().
 *
 * All functions return 0 (or a count) on success and a negative errno on
 * failure; on failure a human-readable reason naming the peer is left in
 * conn->errmsg (client) or logged (server).
 */
#ifndef RDPS_TRANSPORT_H
#define RDPS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/auth.h"
#include "rdps/ipconfig.h"
#include "rdps/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rdps's wire format is little-endian and is read in place; big-endian hosts are not supported"
#endif

/* Request kinds, also the frame types on the wire. */
enum rdps_req_type {
	RDPS_REQ_HELLO = 1,    /* handshake: client id, job size */
	RDPS_REQ_PULL = 2,     /* rows of ids */
	RDPS_REQ_PUSH = 3,     /* gradients of ids */
	RDPS_REQ_FLUSH = 4,    /* reply once every earlier push is applied */
	RDPS_REQ_BARRIER = 5,  /* reply once every client of the job arrived */
	RDPS_REQ_STATS = 6,    /* server counters */
	RDPS_REQ_SHUTDOWN = 7, /* server exits after replying */
	RDPS_REQ_BYE = 8,      /* not on the wire: a client connection closed */
	RDPS_REQ_ALLREDUCE = 9, /* sum of every client's vector, to every client */
	RDPS_REQ_CHECKPOINT = 10, /* server writes a checkpoint, then replies */
	RDPS_REQ_TABLE = 11,   /* a client creates, finds or drops a table, or sets
				* its optimizer (struct rdps_table_req) */
	RDPS_REQ_SET = 12,     /* rows written (not gradients): ids, then n * dim words */
	RDPS_REQ_SAMPLE = 13,  /* neighbours of seed nodes sampled by the server that
				* holds them (struct rdps_sample_req) */
	RDPS_REQ_STATE = 14,   /* optimizer state of rows, read or written
				* (struct rdps_state_req): saving a sparse optimizer */
	RDPS_REQ_MAX = 15,
};

/* An optimizer-state request (RDPS_REQ_STATE's payload, also its wire
 * form): the header, n u64 ids (all in the server's range of the table),
 * then for a write n * floats_per_row floats. The reply to a read is n *
 * floats_per_row floats. floats_per_row must be what the table's optimizer
 * keeps (rdps_shard_state_per_row): the server refuses another. Sent over
 * every backend's two-sided call path (state is not in the regions). */
struct rdps_state_req {
	uint32_t table;
	uint32_t n;
	uint32_t op;             /* RDPS_STATE_READ or RDPS_STATE_WRITE */
	uint32_t floats_per_row;
};
_Static_assert(sizeof(struct rdps_state_req) == 16, "wire layout");
enum { RDPS_STATE_READ = 0, RDPS_STATE_WRITE = 1 };

/* Doubles in one allreduce vector. */
#define RDPS_ALLREDUCE_MAX 64

/* The name of a request type ("pull", "push", ...; "unknown" for any other
 * number), for logs. */
const char *rdps_req_name(int type);

enum rdps_read_consistency {
	RDPS_READ_VALIDATED = 0, /* check each row's checksum, re-read torn rows */
	RDPS_READ_RELAXED = 1,   /* accept rows as read */
};

/* Element types of tables (rows of elems elements of a dtype). */
enum rdps_dtype {
	RDPS_DTYPE_F32 = 0,
	RDPS_DTYPE_F64 = 1,
	RDPS_DTYPE_I64 = 2,
	RDPS_DTYPE_U8 = 3,
	RDPS_DTYPE_COUNT = 4,
};

/* Bytes of an element (0 for an unknown dtype). */
size_t rdps_dtype_size(int dtype);
/* "float32", "float64", "int64", "uint8", or NULL. */
const char *rdps_dtype_name(int dtype);
/* The dtype of a name (also "float", "double", "long", as numpy and torch
 * spell them), or -EINVAL. */
int rdps_dtype_parse(const char *name);

/* The 32-bit words a row of elems elements of dtype takes (the row's data
 * is padded to whole words): what rows move as on the wire. 64 bits wide,
 * so it never wraps (an int64 row of 2^31 + 1 elements is 2^32 + 2 words,
 * not 2): compare it with RDPS_MAX_DIM before narrowing it. */
static inline uint64_t rdps_dtype_row_words(int dtype, uint32_t elems)
{
	return ((uint64_t)rdps_dtype_size(dtype) * elems + 3) / 4;
}

/* One table as a server exposes it (also its wire form, 96 bytes). A
 * slot whose dim is 0 holds no table (dropped, or not made on this
 * server yet). */
struct rdps_table_desc {
	char name[RDPS_TABLE_NAME_MAX];
	uint32_t table_id;    /* index in the job's table list */
	uint32_t dim;         /* 32-bit words per row (floats of a float32 table) */
	uint64_t num_rows;    /* rows of the whole table */
	uint64_t lo, hi;      /* this server's global id range */
	uint32_t stride;      /* bytes between rows in the region */
	uint32_t optimizer;   /* enum rdps_optimizer */
	uint64_t remote_addr; /* region base for one-sided reads (0 if none; ofi:
			       * 0 where the provider addresses a region by offset) */
	uint64_t rkey;        /* remote key for one-sided reads (0 if none): 64 bits,
			       * as libfabric's keys are (verbs' fit in the low 32) */
	uint32_t dtype;       /* enum rdps_dtype (tables of servers' configs: float32) */
	uint32_t elems;       /* elements per row (0: dim, a float32 table's) */
};
_Static_assert(sizeof(struct rdps_table_desc) == 96, "wire layout");

/* A table request (RDPS_REQ_TABLE's payload, also its wire form). */
enum rdps_table_op {
	RDPS_TABLE_CREATE = 1,        /* create, or find one of the same shape */
	RDPS_TABLE_LOOKUP = 2,        /* find by name */
	RDPS_TABLE_DROP = 3,          /* by name */
	RDPS_TABLE_SET_OPTIMIZER = 4, /* by name */
};

#define RDPS_TABLE_ANY_ID UINT32_MAX /* create: let server 0 choose the id */

struct rdps_table_req {
	uint32_t op;                  /* enum rdps_table_op */
	uint32_t table_id;            /* create: RDPS_TABLE_ANY_ID (server 0), or
				       * the id server 0 chose (the others) */
	char name[RDPS_TABLE_NAME_MAX];
	uint64_t num_rows;
	uint32_t elems;               /* elements per row */
	uint32_t dtype;               /* enum rdps_dtype */
	uint32_t init;                /* enum rdps_init */
	float init_range;
	uint64_t seed;
	uint32_t optimizer;           /* enum rdps_optimizer */
	float lr, eps, beta1, beta2;
	uint32_t reserved;
};
_Static_assert(sizeof(struct rdps_table_req) == 96, "wire layout");

/*
 * A neighbour-sampling request (RDPS_REQ_SAMPLE's payload; also its wire
 * form; rdps/graph.h says what the tables hold): the header, num_groups
 * struct rdps_sample_group, n u64 slot ids (group after group, count each,
 * each in the server's range of the ptr table), then num_exclude u64 edge
 * ids in increasing order that are never picked. For each slot the server
 * picks among its edges [begin, end) as rdps_sample_pick() does from
 * (seed, slot, direction), so a client that reads the same rows
 * one-sidedly picks the same edges. The reply: u32 count[n] (padded to 8
 * bytes), then per picked edge, slot after slot, in increasing position:
 * u64 the edge's other node (in: source; out: destination), u64 edge id,
 * i64 edge type.
 */
struct rdps_sample_req {
	uint32_t indptr_table;  /* int64 x 2 per slot: graph:indptr (in), graph:outptr (out) */
	uint32_t edges_table;   /* graph:edges (in: 4 x int64), graph:outedges (out: 3) */
	uint32_t fanout;        /* the most picks of any group's slot: bounds the reply */
	uint32_t n;             /* slots after the groups */
	uint64_t seed;          /* of the random choices */
	uint32_t flags;         /* RDPS_SAMPLE_F_* */
	uint32_t num_groups;    /* 1 .. RDPS_SAMPLE_MAX_GROUPS */
	uint32_t num_exclude;   /* edge ids after the slots */
	uint32_t reserved;      /* 0 */
};
_Static_assert(sizeof(struct rdps_sample_req) == 40, "wire layout");

#define RDPS_SAMPLE_F_OUT 1u     /* out-edges (graph:outptr, graph:outedges) */
#define RDPS_SAMPLE_F_REPLACE 2u /* exactly fanout picks, with replacement */

/* Slots sampled alike: one etype's, with its fanout and weights. */
struct rdps_sample_group {
	uint32_t fanout;        /* 1 .. the header's fanout */
	uint32_t count;         /* slots of the group */
	uint32_t prob_table;    /* weights: a read-only table of one float per edge
				 * (in-edges only), or RDPS_SAMPLE_NO_PROB */
	uint32_t prob_dtype;    /* enum rdps_dtype of its rows: float32 or float64 */
	int64_t prob_shift;     /* edge id - prob_shift is the edge's row in it */
};
_Static_assert(sizeof(struct rdps_sample_group) == 24, "wire layout");

#define RDPS_SAMPLE_NO_PROB 0xffffffffu
#define RDPS_SAMPLE_MAX_GROUPS 64u
#define RDPS_SAMPLE_MAX_FANOUT 1024u
#define RDPS_SAMPLE_MAX_EDGES (1u << 20) /* n * fanout of one request, at most */
#define RDPS_SAMPLE_EDGE_BYTES 24u      /* other node, edge id, type */

/* Bytes of a sample reply for n seeds and this fanout, at most. */
static inline size_t rdps_sample_reply_bound(uint32_t n, uint32_t fanout)
{
	return (((size_t)n * 4 + 7) & ~(size_t)7) +
	       (size_t)n * fanout * RDPS_SAMPLE_EDGE_BYTES;
}

/* Server counters, as returned by a stats request (also its wire form). */
struct rdps_server_stats {
	uint64_t requests[16];   /* served per enum rdps_req_type */
	uint64_t errors[16];     /* refused per enum rdps_req_type */
	uint64_t rows_pulled;    /* rows sent by the server's CPU */
	uint64_t rows_pushed;    /* gradient rows applied */
	uint64_t bytes_in;       /* request payload bytes */
	uint64_t bytes_out;      /* reply payload bytes */
	uint64_t connections;    /* accepted so far */
	uint64_t bad_frames;     /* connections closed for malformed input */
	uint64_t auth_failures;  /* clients refused for a wrong secret */
	uint64_t conns_refused;  /* closed at once: over the connection cap, or no descriptors */
	uint64_t handshake_timeouts; /* closed for not finishing the handshake in time */
	uint64_t recv_slots;     /* RDMA: receive buffers of the shared pool */
	uint64_t recv_posted;    /* RDMA: ... posted now (recv_slots when no push is in flight) */
	uint64_t rdma_sessions;  /* RDMA: queue pairs bound to clients now */
	uint64_t rolled_back_rows; /* pushed rows a restore from a checkpoint undid */
	uint64_t ckpt_rows_during; /* rows pushed while the last checkpoint was written
				    * (appliers do not wait for checkpoints) */
	uint64_t nonfinite_pushes; /* pushes refused for a NaN or an infinity */
	uint64_t reserved;
	uint64_t nonfinite_rows[RDPS_MAX_TABLES]; /* per table slot: gradient rows holding a NaN or an
				      * infinity pushed to it (refused, or applied
				      * with --nonfinite accept) */
};
_Static_assert(sizeof(struct rdps_server_stats) == 896, "wire layout");

/* What a server's welcome says about its state, for a client that comes
 * back to it: whether it is still the process the client pushed to, and
 * how much of the client's pushes it holds. */
struct rdps_welcome_info {
	uint64_t instance;     /* random per server process: another one is a restart */
	uint64_t rows_held;    /* rows of this client's pushes in the server's tables */
	uint64_t ckpt_seq;     /* the checkpoint the server was restored from (0: none) */
	uint64_t ckpt_age_ms;  /* its age when restored (ms since it was written) */
};

/* ---------------------------------------------------------------------- */
/* Client side                                                            */

struct rdps_conn_params {
	const char *host;          /* server address as in ip_config */
	uint16_t port;
	uint32_t server_id;        /* global index expected at this address */
	uint32_t client_id;        /* 0..num_clients-1 */
	uint32_t num_clients;      /* clients in the job (barrier size) */
	int timeout_ms;            /* bound on every wait, and on connecting */
	size_t max_inflight_bytes; /* unacknowledged push bytes before push blocks */
	int read_consistency;      /* enum rdps_read_consistency */
	bool observer;             /* admin connection: not a client of the job */
	const struct rdps_secret *secret; /* the job's shared secret, or NULL */
	uint64_t pushed_rows;      /* rows this client pushed to this server before */
};

struct rdps_conn {
	const struct rdps_transport_ops *ops;
	uint32_t server_id, num_servers;
	uint32_t num_tables;
	struct rdps_table_desc tables[RDPS_MAX_TABLES];
	char peer[RDPS_HOST_MAX + 16]; /* "server N (host:port)" */
	char errmsg[512];              /* reason of the last failure */
	uint64_t session;              /* the server's token for this connection */
	uint64_t rereads;              /* torn rows read again (validated mode) */
	struct rdps_welcome_info welcome; /* the server's state, from the handshake */
	size_t reply_len;              /* payload bytes of the last call's reply */
};

/* ---------------------------------------------------------------------- */
/* Server side                                                            */

/* A table's shard as exposed by a server. */
struct rdps_region {
	struct rdps_table_desc desc; /* remote_addr/rkey filled by the backend */
	void *base;                  /* rows, desc.stride apart */
	size_t len;                  /* bytes, page multiple */
};

/* A decoded request, handed to the server core's handler. */
struct rdps_request {
	uint32_t type;         /* enum rdps_req_type */
	uint32_t client_id;    /* from the connection's hello */
	uint32_t num_clients;  /* from the connection's hello */
	bool observer;         /* not a client of the job (stats, checkpoint, shutdown) */
	bool admin;            /* the peer proved the secret, or runs on the server's
				* machine (a server without one): may stop the server
				* or make it write a checkpoint as an observer */
	const char *peer;      /* "host:port" of the client, for logs */
	uint64_t token;        /* identifies the request for a deferred reply */
	/* pull and push */
	uint32_t table;        /* index into the listen regions (checked) */
	uint32_t n;            /* ids */
	const uint64_t *ids;   /* global ids (not yet range-checked) */
	const float *grads;    /* push: n * dim floats */
	const uint32_t *grad_index; /* push: grads of ids[i] at row grad_index[i]
				     * (in-process gathers; NULL: row i) */
	float *rows_out;       /* pull: n * dim floats to fill */
	/* allreduce: the client's vector */
	const void *payload;
	size_t payload_len;
	/* hello: the client's count, and the handler's answer for the welcome */
	uint64_t pushed_rows;  /* rows the client says it pushed to this server */
	struct rdps_welcome_info welcome; /* set by the handler */
	/* control replies (stats) */
	void *reply;           /* buffer of reply_cap bytes */
	size_t reply_cap;
	size_t reply_len;      /* set by the handler */
	/* errors: the handler writes a reason here when it returns < 0 */
	char *errmsg;
	size_t errlen;
};

/* Handler return values besides 0 (reply now) and -errno (reply an error). */
#define RDPS_REPLY_DEFERRED 1 /* the core calls ops->reply(token) later */

typedef int (*rdps_request_handler)(void *ctx, struct rdps_request *req);

struct rdps_listen_params {
	const char *host;                 /* bind address (from ip_config) */
	uint16_t port;
	uint32_t server_id, num_servers;
	const struct rdps_region *regions; /* copied by listen() */
	uint32_t num_regions;
	rdps_request_handler handle;
	void *ctx;
	const struct rdps_secret *secret;  /* clients must prove it; NULL: none */
	bool allow_unauthenticated;        /* without a secret, serve peers beyond
					    * this machine too (else: loopback only) */
	/* Limits against hostile or overloaded peers (stream backends; 0: the
	 * default, as rdps server --help states). */
	uint32_t max_connections;          /* open at once; more are closed at once */
	int handshake_timeout_ms;          /* to be admitted (hello, authentication) */
	size_t max_reply_buffer;           /* reply bytes held for all connections:
					    * a request is taken only once its
					    * largest reply fits beside them */
	int reply_stall_ms;                /* a connection whose replies do not move
					    * this long while others wait for the
					    * reply budget is closed */
	size_t max_request_buffer;         /* request bytes being received, all
					    * connections together: a frame is
					    * read only once it fits */
	uint32_t num_threads;              /* threads to serve requests (0: 1); the
					    * backend may grant fewer, see
					    * struct rdps_tserver */
};

struct rdps_tserver {
	const struct rdps_transport_ops *ops;
	struct rdps_server_stats *stats; /* the core's counters, or NULL; backends
					  * add to them with RDPS_STAT_ADD */
	/* Set by listen(): how many threads may run the handler at once (the
	 * core makes its shards safe for that many writers), and how many the
	 * core must call progress() from, with thread = 0..progress_threads-1
	 * (each serves its own connections). In-process requests run on the
	 * callers' threads: num_threads of them at once, one progress thread. */
	uint32_t num_threads;
	uint32_t progress_threads;
};

/* ---------------------------------------------------------------------- */

/* What a backend tells its callers, so that nothing above transport/ copies
 * its constants (tools size memory with it, benchmarks message sizes). */
struct rdps_transport_info {
	size_t push_msg_bytes;      /* payload of one push message on the wire, at most */
	size_t server_pinned_bytes; /* memory a server registers besides its shards */
	size_t conn_pinned_bytes;   /* memory a client registers per server connection */
	bool one_sided_pulls;       /* pulls read server memory without its CPU */
	bool pins_tables;           /* a server registers (pins) every table's memory */
};

/* Pulls every backend accepts on one connection between two pull_wait()s. */
#define RDPS_TRANSPORT_POST_DEPTH 32u

struct rdps_transport_ops {
	const char *name;

	/* Connects to one server and performs the handshake, retrying refused
	 * connections until p->timeout_ms has passed. On failure returns
	 * -errno and writes a reason into err. */
	int (*connect)(const struct rdps_conn_params *p, struct rdps_conn **out,
		       char *err, size_t errlen);
	/* Closes after sending what is queued. Accepts NULL. */
	void (*close)(struct rdps_conn *c);

	/* Starts reading rows of ids (all within this server's range of the
	 * table) into out (n * dim floats). ids and out must stay valid until
	 * pull_wait() returns. Up to RDPS_TRANSPORT_POST_DEPTH pulls may be
	 * posted before one wait (-EBUSY beyond). */
	int (*pull_post)(struct rdps_conn *c, uint32_t table,
			 const uint64_t *ids, uint32_t n, float *out);
	/* Completes every posted pull. */
	int (*pull_wait)(struct rdps_conn *c);

	/* Sends gradients (n * dim floats) of ids; returns once ids and grads
	 * may be reused. Blocks only while max_inflight_bytes are
	 * unacknowledged. An error of an earlier push is returned here or by
	 * the next flush. */
	int (*push)(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		    const float *grads, uint32_t n);
	/* As push, but the gradient of ids[i] is the row grads + index[i] *
	 * dim of the caller's array (index NULL: row i, as push): the backend
	 * gathers rows straight into the wire or its registered buffers, so
	 * the caller need not group them per server first. */
	int (*push_gather)(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
			   const float *grads, const uint32_t *index, uint32_t n);

	/* Writes rows (n * dim 32-bit words, not gradients) of ids, all in
	 * this server's range of the table; returns once they are written
	 * (synchronous; not ordered after pushes still in flight on a one-sided
	 * backend: the caller flushes first). */
	int (*set)(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
		   uint32_t n);

	/* Synchronous control request (FLUSH, BARRIER, STATS, SHUTDOWN,
	 * ALLREDUCE, TABLE, SAMPLE) with an optional request payload
	 * (ALLREDUCE's vector, TABLE's struct rdps_table_req; TABLE's reply is
	 * a struct rdps_table_desc; SAMPLE's the header and its seeds);
	 * reply (reply_len bytes) receives the reply's payload (STATS,
	 * ALLREDUCE: exactly reply_len bytes; SAMPLE: up to reply_len, as many
	 * as c->reply_len says). timeout_ms overrides the connection's for
	 * this wait (0: the connection's). */
	int (*call)(struct rdps_conn *c, uint32_t type, const void *req,
		    size_t req_len, void *reply, size_t reply_len, int timeout_ms);
	/* Optional (NULL: only call): call in two halves, so that a client
	 * has a request out at several servers at once. call_send sends the
	 * request (not FLUSH); call_recv(type) waits for its reply as call
	 * does. Nothing else goes on the connection in between (-EBUSY). */
	int (*call_send)(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
			 int timeout_ms);
	int (*call_recv)(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
			 int timeout_ms);

	/* Server: binds host:port and exposes regions. On failure returns
	 * -errno and writes a reason (e.g. the busy port) into err. */
	int (*listen)(const struct rdps_listen_params *p,
		      struct rdps_tserver **out, char *err, size_t errlen);
	/* Serves thread's connections for up to timeout_ms; each thread index
	 * below s->progress_threads is called from one thread, all at once.
	 * Returns the number of events handled, or -errno on a fatal server
	 * error. */
	int (*progress)(struct rdps_tserver *s, uint32_t thread, int timeout_ms);
	/* Completes a deferred request of kind type, from any thread. status 0
	 * (payload is the reply) or -errno (payload is the reason, text). */
	int (*reply)(struct rdps_tserver *s, uint64_t token, uint32_t type,
		     int status, const void *payload, size_t len);
	/* Sends queued replies (bounded by timeout_ms), closes every
	 * connection and the listener. Accepts NULL. */
	void (*destroy)(struct rdps_tserver *s, int timeout_ms);

	/* Server: exposes one more table (r->desc.table_id is its slot, which
	 * may be above the tables exposed so far): a new client's welcome
	 * lists it; RDMA backends register its memory and fill desc's
	 * remote_addr and rkey. From any thread of the server, while the
	 * others serve. 0 or -errno. */
	int (*add_region)(struct rdps_tserver *s, struct rdps_region *r);
	/* Server: the table leaves (RDMA backends deregister its memory); its
	 * slot holds no table afterwards. Clients must not read it any more. */
	void (*remove_region)(struct rdps_tserver *s, uint32_t table_id);

	/* Sizes and capabilities, for a server with num_clients clients. */
	void (*query)(uint32_t num_clients, struct rdps_transport_info *out);
	/* For "auto": 0 if this backend can reach host (writing what serves
	 * the route, e.g. the RDMA device, into via), or -errno. */
	int (*route)(const char *host, char *via, size_t vialen);
};

/* Backend by name ("tcp", "inproc", "verbs", "ofi"); NULL if unknown. */
const struct rdps_transport_ops *rdps_transport_find(const char *name);

/* Resolves "auto" (or a backend name) for connecting to host: "auto"
 * picks the first backend, in order of preference (RDMA first, tcp last),
 * whose route() reaches host, and writes one line saying why into why (may
 * be NULL). Returns the backend or NULL with a reason in why for unknown
 * names. */
const struct rdps_transport_ops *rdps_transport_select(const char *name,
						       const char *host,
						       char *why, size_t whylen);

/* Comma-separated list of known backend names, for --help. */
const char *rdps_transport_names(void);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_TRANSPORT_H */
