/* SPDX-License-Identifier: MIT */
/*
 * Internal: the ofi backend (libfabric, reliable-datagram endpoints:
 * FI_EP_RDM), for fabrics without RC queue pairs, rdma_cm or shared receive
 * queues, AWS EFA first (its SRD transport delivers out of order). Split by
 * concern as verbs is:
 *
 *   ofi_setup.c    the provider (fi_getinfo at the newest API the library
 *                  offers), fabric, domain, address vector, completion
 *                  queue, endpoint (its queues sized, efa's device RDMA
 *                  asked for and whether its READs are emulated read back),
 *                  registered buffers, the session cookie
 *   ofi_group.c    a client's endpoint, shared by its connections to every
 *                  server (each server in its address vector): receives,
 *                  answer slots, completions dispatched to connections
 *   ofi_client.c   a client connection: one-sided pulls (FI_RMA reads) or
 *                  two-sided ones, credited FI_MSG pushes, counted flushes
 *   ofi_pool.c     the server's receive slots and push credits
 *   ofi_server.c   the server: listen, bind (sessions), teardown, progress
 *   ofi_srv_cq.c   the server's completions: pushes applied, flushes
 *                  counted, two-sided pulls answered, credits sent
 *   ofi.c          the ops table, what the backend tells its callers, route
 *
 * Set-up: the handshake runs over the authenticated TCP control connection
 * (tcp.c) as for verbs; then the client sends a BIND frame on it with its
 * endpoint address and the connection's index in its group (tcp.h), and
 * the server answers with its own address, the session's index and its
 * first credits. Shards' memory keys travel in the welcome (64-bit rkey).
 * Every client message carries the session's index, generation and cookie
 * (the session token, or with a secret a MAC of it that never crosses the
 * wire), so the server knows whose it is: an RDM endpoint takes messages
 * from any address. Every server message carries the connection's index
 * and the session's, so the client's one endpoint knows which of its
 * connections it is for.
 *
 * One endpoint per client (per rdps_client, i.e. per thread that pulls on
 * its own), not per (client, server) pair: on efa an endpoint is an SRD
 * queue pair with packet pools sized to the device, so 64 processes x S
 * servers would be 64 S queue pairs and GBs pinned per host, and a client
 * would wait on S completion queues in turn.
 *
 * Nothing is assumed about order. A READ's completion says nothing about
 * earlier READs; a push, a flush and a pull request may reach the server in
 * any order. So every operation completes on its own (no selective
 * completion), a connection harvests its READ ring in order only as far as
 * the READs are done, and a flush says how many push messages the client
 * sent before it: the server acknowledges it once it has handled that many
 * of this session's pushes (ofi_srv_cq.c), not when it arrives.
 *
 * Flow control is the verbs backend's (verbs_recv_pool.c, its model
 * verbs_credits.pml): the server's endpoint has one receive queue for all
 * clients, a pool of slots; a credit is a posted slot promised to one
 * session; a client sends (push, flush, pull request) only while it holds
 * a credit, so the server never has more messages on the way than slots
 * posted. Credits come back in CREDIT messages.
 *
 * Pulls are FI_RMA reads of the registered shards where the provider has
 * FI_RMA and FI_READ and its reads are the device's own (efa reports
 * emulated ones: FI_OPT_EFA_EMULATED_READ). Else they are two-sided: the
 * client sends the ids (a credited message), the server reads the rows and
 * answers with a tagged message (the request's tag) that lands in the
 * answer slot the client posted for it: an emulated read costs the
 * server's CPU more than that. A torn row is read again through the ring;
 * one that stays torn is asked for two-sided.
 *
 * Threads: a client's group is one thread's. The server serves from one
 * progress thread; with more server threads, the others drive the
 * provider's progress (emulated operations, handshakes and resends produce
 * no completion the server sees).
 */
#ifndef RDPS_TRANSPORT_OFI_H
#define RDPS_TRANSPORT_OFI_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "rdps/auth.h"
#include "rdps/transport.h"
#include "retire.h"

/* The oldest libfabric API rdps asks for; it asks for the newest the
 * library offers (ofi_api_version()): below 1.18 efa keeps device RDMA
 * off on the first EFA generations (efa_rdm_get_use_device_rdma). */
#define OFI_API_MIN FI_VERSION(1, 17)
/* efa's endpoint options (rdma/fi_ext.h of libfabric 1.18 on; the enum
 * follows FI_OPT_EFA_RNR_RETRY, which 1.17 has): read or set only on efa. */
#define OFI_OPT_EFA_EMULATED_READ (FI_OPT_EFA_RNR_RETRY + 1)   /* bool, get */
#define OFI_OPT_EFA_USE_DEVICE_RDMA (FI_OPT_EFA_RNR_RETRY + 4) /* bool, API >= 1.18 */

#define OFI_ADDR_MAX 256               /* endpoint address bytes (EFA: 32, sockaddr_in6: 28) */
#define OFI_PROV_MAX 64                /* provider name, e.g. "tcp;ofi_rxm" */
#define OFI_MSG_SIZE (64u << 10)       /* a push message / receive slot, at most */
#define OFI_EFA_MSG_SIZE 8192u         /* on efa: one eager packet (the MTU is ~8.9 KiB) */
#define OFI_MSG_MIN 1024u              /* RDPS_OFI_MSG_BYTES's range */
#define OFI_MSG_MAX (1u << 20)

/* Client side, per connection (one per server) and per group (client). */
#define OFI_SEND_SLOTS 32              /* push buffers of a connection, at most ... */
#define OFI_SEND_SLOTS_MIN 4           /* ... and at least */
#define OFI_SEND_BUDGET 128            /* ... OFI_SEND_BUDGET / servers between them */
#define OFI_BOUNCE (8u << 20)          /* READ targets of a client (all its servers') ... */
#define OFI_BOUNCE_MIN (128u << 10)    /* ... a connection's share, at least */
#define OFI_CTL_RECV_SIZE 64           /* control receives (credits, acks) */
#define OFI_CTL_RECVS_PER_CONN (OFI_SHARE_MAX + 2) /* posted per connection */
#define OFI_ANSWER_SLOTS 32            /* two-sided answers in flight, per group */
#define OFI_READ_RING 512              /* READs outstanding per connection, at most */
#define OFI_READS_PER_POST 64          /* READs posted back to back with FI_MORE */
#define OFI_MAX_RUN_ROWS 1024          /* rows per coalesced READ */
#define OFI_REREAD_FALLBACK 16         /* re-reads of a torn row before asking two-sided */
#define OFI_REREAD_QUEUE 256           /* torn rows waiting for their re-read */
#define OFI_PULL_WINDOW 16             /* two-sided pull requests in flight per connection */
#define OFI_GROUP_CONNS 4096           /* connections of one group, at most */
#define OFI_CLOSE_WAIT_MS 2000         /* a closing connection waits this long for its ops */

/* Server side. */
#define OFI_POOL_CHUNK 64              /* slots per registered chunk */
#define OFI_POOL_MIN_SLOTS 256         /* the pool at start */
#define OFI_POOL_MAX_SLOTS 8192        /* at most (and the endpoint's rx size) */
#define OFI_SHARE_TARGET 8             /* the pool grows to keep this many credits per session */
#define OFI_SHARE_MAX 32               /* credits one session holds at most */
#define OFI_CTL_SLOTS 1024             /* server control sends (credits, acks) in flight */
#define OFI_MAX_SESSIONS 1024
#define OFI_DRAIN_MS 2000              /* a closed session's credits wait this long for its messages */
#define OFI_BUSY_POLL_US 50            /* RDPS_OFI_BUSY_POLL_US overrides it */
#define OFI_BUSY_POLL_MAX_US 100000
#define OFI_IDLE_SLEEP_MS 1            /* without a wait object (efa 1.17): sleep slices ... */
#define OFI_LINGER_MS 20               /* ... but never this soon after any traffic */
#define OFI_PROGRESS_THREADS_MAX 64

_Static_assert(OFI_CTL_RECVS_PER_CONN >= OFI_SHARE_MAX + 1,
	       "a connection's receives hold every control message a server may have on the way");
_Static_assert(OFI_CTL_SLOTS >= 2 * OFI_SHARE_MAX,
	       "the server's control sends are not starved by one session");
_Static_assert(OFI_ANSWER_SLOTS <= 256, "an answer slot's index fits a tag's low byte");

/*
 * Operation contexts: the kind in the top byte, the rest per kind (the
 * endpoint asks for no FI_CONTEXT mode, so the provider never writes to
 * them). Completions, failed ones too, are classified by context alone.
 * A client's carry the connection's index in its group (16 bits) and a
 * value (40 bits).
 */
enum {
	OFI_OP_READ = 1,     /* client: connection, READ ring sequence number */
	OFI_OP_ANSWER = 2,   /* client: answer slot (a tagged receive) */
	OFI_OP_SEND = 3,     /* client: connection, push buffer */
	OFI_OP_RECV = 4,     /* client: control receive of the group */
	OFI_OP_SRV_RECV = 5, /* server: pool slot */
	OFI_OP_SRV_CTL = 6,  /* server: control send buffer */
	OFI_OP_SRV_ROWS = 7, /* server: pool slot, answering a two-sided pull */
};
#define OFI_CTX(kind, v) ((void *)(uintptr_t)(((uint64_t)(kind) << 56) | ((v) & ((1ull << 56) - 1))))
#define OFI_CTX_KIND(c) ((int)((uint64_t)(uintptr_t)(c) >> 56))
#define OFI_CTX_VAL(c) ((uint64_t)(uintptr_t)(c) & ((1ull << 56) - 1))
#define OFI_CCTX(kind, conn, v) OFI_CTX(kind, ((uint64_t)(conn) << 40) | ((v) & ((1ull << 40) - 1)))
#define OFI_CCTX_CONN(c) ((uint32_t)(OFI_CTX_VAL(c) >> 40))
#define OFI_CCTX_VAL(c) (OFI_CTX_VAL(c) & ((1ull << 40) - 1))

/* ---------------------------------------------------------------------- */
/* Wire formats (little-endian, read in place)                            */

/* First bytes of every client -> server message. */
struct ofi_msg_hdr {
	uint32_t type;    /* RDPS_REQ_PUSH, RDPS_REQ_FLUSH or RDPS_REQ_PULL */
	uint32_t len;     /* bytes after this header */
	uint32_t session; /* the server's index of the session (bind reply) */
	uint32_t gen;     /* ... and its generation */
	uint64_t cookie;  /* ofi_cookie(): the sender holds the session */
	uint64_t tag;     /* flush: its number (1, 2, ...); pull: the tag of its answer */
	uint64_t pushes;  /* flush: push messages this client sent before it */
};
_Static_assert(sizeof(struct ofi_msg_hdr) == 40, "wire layout");
/* Then: push and pull: struct rdps_wire_rows, n u64 ids (8-aligned: 48),
 * push n * dim f32 gradients. Flush: nothing. */

enum { OFI_S_CREDIT = 1, OFI_S_FLUSH_ACK = 2, OFI_S_ROWS = 3 };

/* First bytes of every server -> client message: credits and flush
 * acknowledgements (untagged), answers to pull requests (tagged with the
 * request's tag). */
struct ofi_srv_hdr {
	uint32_t kind;    /* OFI_S_* */
	uint32_t credits; /* granted by this message */
	uint64_t tag;     /* flush ack: the flush's number; rows: the request's tag */
	int32_t status;   /* rows: 0, or -errno and the payload is the reason */
	uint32_t count;   /* flush ack: push messages refused since the last ack;
			   * rows: rows that follow (count * dim f32) */
	uint32_t conn;    /* the connection's index in its client's group (bind) */
	uint32_t session; /* the session's index on the server */
};
_Static_assert(sizeof(struct ofi_srv_hdr) == 32, "wire layout");

#define OFI_BIND_MAGIC 0x3249464fu  /* "OFI2" */
#define OFI_BIND_RMA 0x1u           /* server: shards registered for remote reads */
#define OFI_COOKIE_LABEL "rdps-ofi-v1"

/* The BIND frame's payload (tcp.h), client -> server. */
struct ofi_bind_req {
	uint32_t magic;
	uint32_t addrlen;             /* bytes of addr */
	char prov[OFI_PROV_MAX];      /* the client's provider */
	uint8_t addr[OFI_ADDR_MAX];   /* its endpoint's address (fi_getname) */
	uint32_t conn;                /* the connection's index in the client's group */
	uint32_t reserved;
};
_Static_assert(sizeof(struct ofi_bind_req) == 336, "wire layout");

/* ... and the answer. */
struct ofi_bind_rep {
	uint32_t magic;
	uint32_t flags;               /* OFI_BIND_* */
	uint32_t session;             /* index and generation the client's messages carry */
	uint32_t gen;
	uint32_t credits;             /* first credits (may be 0: more follow as messages) */
	uint32_t msg_size;            /* the server's receive slots: messages of at most this */
	uint32_t addrlen;
	uint32_t reserved;
	char prov[OFI_PROV_MAX];
	uint8_t addr[OFI_ADDR_MAX];   /* the server's endpoint address */
};
_Static_assert(sizeof(struct ofi_bind_rep) == 352, "wire layout");
_Static_assert(sizeof(struct ofi_bind_rep) <= 1024 && sizeof(struct ofi_bind_req) <= 1024,
	       "a bind fits RDPS_WIRE_BIND_MAX");

/* ---------------------------------------------------------------------- */
/* ofi_setup.c                                                            */

/* What an endpoint is opened for: its queues are sized from it. */
struct ofi_ep_want {
	bool server;
	uint32_t index;               /* spreads processes over a host's devices
				       * (efa: its devices are domains; the server id or
				       * client id, taken modulo their number) */
	size_t tx, rx;                /* operations in flight at most */
	uint32_t av;                  /* peers */
};

/* One endpoint and what it needs: a client group's, or a server's. */
struct ofi_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	int cq_fd;                    /* the CQ's wait descriptor, or -1 (efa has none) */
	bool rma;                     /* one-sided pulls: FI_RMA reads (see why_two_sided) */
	bool emulated_read;           /* the provider said its READs are emulated */
	char why_two_sided[240];      /* if !rma: why, for the log, stats and doctor */
	int two_sided_why;            /* ... as enum rdps_two_sided_why */
	uint32_t api;                 /* the libfabric API asked for */
	int device_rdma;              /* efa: FI_OPT_EFA_USE_DEVICE_RDMA set (1), refused
				       * (-errno), not asked (0) */
	uint64_t mr_mode;             /* the domain's FI_MR_* bits */
	uint64_t next_key;            /* requested keys, without FI_MR_PROV_KEY */
	size_t msg_size;              /* largest message this side sends or receives */
	size_t max_rma;               /* largest READ */
	size_t tx_size, rx_size;      /* the endpoint's queues, as sized */
	uint32_t ndomains;            /* domains (devices) of the provider seen */
	char prov[OFI_PROV_MAX];      /* fabric_attr->prov_name */
	char dev[64];                 /* domain_attr->name */
	uint8_t addr[OFI_ADDR_MAX];   /* this endpoint's address */
	size_t addrlen;
};

/* The libfabric API version rdps asks for: the library's own
 * (fi_version()), at least OFI_API_MIN. */
uint32_t ofi_api_version(void);
/* The provider to ask for: RDPS_OFI_PROVIDER (rdps's --ofi-provider) if
 * set, else "efa" if libfabric sees an EFA device, else "" (libfabric's
 * choice) if FI_PROVIDER narrows it; why says which and why. -ENODEV
 * (with the fix in why) when none of these holds. */
int ofi_provider_pick(char *name, size_t len, char *why, size_t whylen);
/* Whether libfabric's efa provider sees an EFA device (its domain's name
 * into dev). */
bool ofi_efa_present(char *dev, size_t len);
/* Whether the provider ofi_provider_pick() names has RDM endpoints with
 * RMA reads (the tests' check; declared again in tests/integration/
 * ofi_env.h, which keeps libfabric's headers out of the suites). */
bool ofi_rma_provider_available(void);
/* Of the fi_info list, the entry whose domain is the index-th distinct
 * domain name (index modulo their number; the list's first when there is
 * one); *ndomains gets their number. */
struct fi_info *ofi_pick_domain(struct fi_info *list, uint32_t index, uint32_t *ndomains);
/* Opens an RDM endpoint of the wanted provider, bound to node (an IP
 * address the provider may bind to, or NULL), with its queues sized for
 * w. Pulls are one-sided if the provider and device allow it, its READs
 * are not emulated and RDPS_OFI_PULLS is not "msg". 0, or -errno with a
 * reason in err. */
int ofi_ep_open(struct ofi_ep *e, const char *node, const struct ofi_ep_want *w, char *err,
		size_t errlen);
/* Closes what ofi_ep_open made (any part of it). Accepts a zeroed ep. */
void ofi_ep_close(struct ofi_ep *e);
/* Whether pulls from this host would be one-sided, and why not (rdps
 * doctor): opens a client's endpoint and closes it. 1 (one-sided), 0
 * (two-sided: why), or -errno (no endpoint: why). */
int ofi_pull_probe(uint32_t index, char *why, size_t whylen);

/* A client endpoint's queues and what the provider keeps for them (rdps
 * doctor --clients): its default sizes, rdps's for servers servers, and
 * the bytes of its packet buffers at either ((tx + rx) x the largest
 * eager message: efa registers a pool of MTU-sized packets per queue
 * entry). */
struct ofi_queues {
	char prov[OFI_PROV_MAX], dev[64];
	size_t tx_def, rx_def;        /* the provider's */
	size_t tx, rx;                /* rdps's */
	size_t pkt;                   /* bytes per packet buffer */
};
int ofi_queue_probe(uint32_t servers, struct ofi_queues *q, char *why, size_t whylen);
/* Registers len bytes at buf for access (FI_SEND, FI_RECV, FI_READ,
 * FI_REMOTE_READ), binding it to the endpoint where the provider wants it.
 * 0 or -errno with a reason naming what in err. */
int ofi_mr_reg(struct ofi_ep *e, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
	       char *err, size_t errlen, const char *what);
/* A page-aligned zeroed buffer of len bytes, registered. */
int ofi_alloc_registered(struct ofi_ep *e, size_t len, uint64_t access, char **buf,
			 struct fid_mr **mr, char *err, size_t errlen, const char *what);
/* The descriptor of a local buffer's registration (NULL if none needed). */
static inline void *ofi_desc(struct fid_mr *mr)
{
	return mr ? fi_mr_desc(mr) : NULL;
}
/* The cookie a session's messages carry: with a secret a MAC of the
 * session token (only holders of the secret can compute it), else the
 * token itself. */
uint64_t ofi_cookie(const struct rdps_secret *secret, uint64_t session);
/* A readable text for a libfabric error (negative or positive). */
const char *ofi_strerror(int ret);
/* A failed completion's text: libfabric's and the provider's. */
void ofi_cq_errtext(struct fid_cq *cq, const struct fi_cq_err_entry *e, char *buf, size_t len);
/* Largest push message: RDPS_OFI_MSG_BYTES if set (OFI_MSG_MIN..OFI_MSG_MAX),
 * else OFI_EFA_MSG_SIZE on efa, OFI_MSG_SIZE elsewhere; never above max. */
size_t ofi_msg_size(const char *prov, size_t max);
/* The server's busy-poll budget: RDPS_OFI_BUSY_POLL_US or OFI_BUSY_POLL_US. */
uint64_t ofi_busy_poll_ns(void);

/* ---------------------------------------------------------------------- */
/* ofi_group.c and ofi_client.c                                           */

struct ofi_read {           /* one posted READ, in a connection's ring */
	uint64_t seq;           /* its ring sequence number */
	uint64_t bend;          /* bounce ring position past its rows */
	uint32_t pull;          /* index in pend[] */
	uint32_t row;           /* first row of the run in that pull */
	uint32_t nrows;
	uint32_t boff;          /* offset in the bounce buffer */
	uint32_t checked;       /* rows checked and copied out (or queued again) */
	uint16_t tries;         /* a re-read: the row's reads so far */
	bool done;              /* its completion came (completions come in any order) */
};

struct ofi_pull {
	uint32_t table, n, next; /* rows [0, next) are posted or done */
	const uint64_t *ids;
	float *out;
	uint64_t row_key;        /* rdps_row_table_key of the table: rows' tags */
	int err;                 /* the pull failed (the connection lives): -errno */
};

struct ofi_reread {         /* a torn row waiting for its next read */
	uint32_t pull, row;
	uint16_t tries;
};

struct ofi_conn;

/* An answer slot: a tagged receive posted for one two-sided request. */
struct ofi_answer {
	struct ofi_conn *oc;    /* whose (NULL: free) */
	uint64_t tag;
	uint32_t pull, row, nrows;
	bool posted;            /* the receive is on the endpoint */
};

/* A client's endpoint and what its connections share. One thread's. */
struct ofi_group {
	struct ofi_ep e;
	void **home;                  /* the client's slot that holds it (params'
				       * shared), or NULL: the connection's own */
	struct ofi_conn **conns;      /* by index; closed ones with operations
				       * in flight stay (zombie) until they end */
	uint32_t nconns;              /* indexes in use are below this */
	uint32_t live;                /* connections not closed */
	/* control receives: OFI_CTL_RECVS_PER_CONN more per connection */
	char **recv_chunks;
	struct fid_mr **recv_mrs;
	uint32_t nrecv_chunks;
	/* answer slots, tagged receives for two-sided pulls */
	char *ansbuf;
	struct fid_mr *ans_mr;
	size_t ans_size;
	struct ofi_answer ans[OFI_ANSWER_SLOTS];
	uint32_t ans_busy;
	uint64_t next_tag;
	uint32_t tx_out;              /* sends and READs posted, not completed */
	uint32_t api;                 /* for the log */
};

/* A client connection. Here (not in ofi_client.c) so that tests/transport/
 * test_ofi.c can look at its counts. */
struct ofi_conn {
	struct rdps_conn base;
	struct rdps_conn *ctl;        /* tcp connection: handshake, bind and control */
	struct ofi_group *g;          /* the client's endpoint */
	uint32_t index;               /* in g->conns: in contexts and server messages */
	bool closed;                  /* closed with operations in flight (zombie) */
	fi_addr_t srv;                /* the server's endpoint in the group's vector */
	uint32_t session, gen;        /* what our messages carry, */
	uint64_t cookie;              /* ... with this */
	size_t msg_size;              /* our messages: at most this (both sides' limit) */
	size_t srv_msg_size;          /* the server's receive slots */
	int timeout_ms;
	int consistency;
	bool broken;
	bool one_sided;
	char *bounce;                 /* bounce_size bytes: READ targets (one-sided) */
	struct fid_mr *bounce_mr;
	size_t bounce_size;
	char *sendbuf;                /* nslots push buffers of msg_size */
	struct fid_mr *send_mr;
	uint32_t nslots;
	bool slot_busy[OFI_SEND_SLOTS];
	uint32_t slots_busy;
	uint32_t slot_next;
	uint32_t credits;
	uint32_t tx_out;              /* this connection's sends and READs in flight */
	uint64_t pushes_sent;         /* push messages sent */
	uint64_t flushes;             /* flushes sent (the latest one's number) */
	uint64_t flush_acked;         /* the latest flush acknowledged */
	uint32_t flush_failed;        /* push messages the server refused */
	/* pulls */
	struct ofi_pull pend[RDPS_TRANSPORT_POST_DEPTH];
	uint32_t npend;
	uint32_t pcur;                /* first pull with rows not posted */
	struct ofi_read reads[OFI_READ_RING];
	uint64_t rd_head, rd_tail;    /* READs harvested, posted */
	uint64_t b_head, b_tail;      /* bounce ring positions freed, allocated */
	struct ofi_reread rq[OFI_REREAD_QUEUE]; /* torn rows to read again */
	uint32_t rq_head, rq_tail;
	uint32_t nreqs;               /* two-sided requests in flight (answer slots) */
	uint64_t fallbacks;           /* torn rows asked for two-sided */
	uint64_t events;              /* completions and messages of this connection */
	uint64_t wait_events;         /* ... when its pull's wait began */
};

/* ofi_group.c */
/* What a client's endpoint asks for (queues, peers), for num_servers. */
void ofi_group_want(uint32_t num_servers, uint32_t index, struct ofi_ep_want *w);
/* The group the connection joins (params' shared one, made at the first
 * connect): its endpoint, and the connection's index and receives. */
int ofi_group_join(struct ofi_conn *oc, const struct rdps_conn_params *p, const char *node,
		   char *err, size_t errlen);
/* The connection leaves its group, which frees it: at once if no
 * operation of it is in flight (waited for up to OFI_CLOSE_WAIT_MS), else
 * at the last one's completion or when the group's endpoint closes; the
 * group goes with its last connection. */
void ofi_group_leave(struct ofi_conn *oc);
/* Reads the group's completion queue once, handing each completion to its
 * connection; returns completions handled, or -errno if oc's connection
 * failed (others' failures are theirs). */
int ofi_group_poll(struct ofi_conn *oc);
/* Polls until done(oc) or the timeout; what names the wait. */
int ofi_poll_until(struct ofi_conn *oc, bool (*done)(struct ofi_conn *), const char *what);
/* Whether the endpoint's transmit queue has room. */
static inline bool ofi_tx_room(const struct ofi_conn *oc)
{
	return oc->g->tx_out < oc->g->e.tx_size;
}
/* Posts one operation's return value r: 0 taken, 1 (-FI_EAGAIN: queue full
 * or, over rxm, the connection still being made; the CQ was progressed:
 * post again), or -errno. */
struct ofi_post_wait {
	uint64_t deadline;            /* 0: not waited yet */
	uint64_t since;               /* the first -FI_EAGAIN */
	unsigned spins;
};
int ofi_posted(struct ofi_conn *oc, ssize_t r, struct ofi_post_wait *pw, const char *what);
/* Marks the connection broken with a reason; returns ret. */
int ofi_conn_fail(struct ofi_conn *oc, int ret, const char *fmt, const char *detail);
/* Takes a free answer slot for a request of oc (rows [row, row + nrows) of
 * pull pull) and posts its tagged receive: its index, or -EAGAIN (none
 * free) or -errno. */
int ofi_answer_post(struct ofi_conn *oc, uint32_t pull, uint32_t row, uint32_t nrows,
		    uint64_t *tag);

/* ofi_client.c: what ofi_group.c hands a connection */
void ofi_conn_read_done(struct ofi_conn *oc, uint64_t seq);
void ofi_conn_send_done(struct ofi_conn *oc, uint32_t slot);
int ofi_conn_server_msg(struct ofi_conn *oc, const struct ofi_srv_hdr *h);
int ofi_conn_answer(struct ofi_conn *oc, const struct ofi_answer *a, const char *buf,
		    size_t len);

int ofi_connect(const struct rdps_conn_params *p, struct rdps_conn **out, char *err,
		size_t errlen);
void ofi_close(struct rdps_conn *c);
int ofi_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
		  float *out);
int ofi_pull_wait(struct rdps_conn *c);
int ofi_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const float *grads,
	     uint32_t n);
int ofi_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		    const float *grads, const uint32_t *index, uint32_t n);
int ofi_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms);
int ofi_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms);
int ofi_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
	     void *reply, size_t reply_len, int timeout_ms);
/* Whether a connection pulls one-sided (tests, logs). */
bool ofi_conn_one_sided(const struct rdps_conn *c);

/* ---------------------------------------------------------------------- */
/* ofi_pool.c: receive slots on the endpoint's one receive queue, and the
 * credits that say who may fill them (the rules of verbs_recv_pool.c). */

struct ofi_chunk {
	char *buf;                    /* OFI_POOL_CHUNK slots of slot_size bytes */
	struct fid_mr *mr;
};

struct ofi_pool {
	struct ofi_ep *e;             /* NULL: accounting only (tests) */
	size_t slot_size;
	uint32_t nslots;              /* slots allocated (all posted when idle) */
	uint32_t max_slots;
	uint32_t posted;              /* slots on the receive queue now */
	uint32_t free_credits;        /* posted slots promised to no session */
	uint32_t promised;            /* credits held by sessions (sum) */
	uint8_t *slot_posted;         /* per slot: 1 while on the queue */
	struct ofi_chunk *chunks;
	uint64_t double_posts;        /* slots a completion returned twice (never) */
};

/* A session's side of the accounting. */
struct ofi_credits {
	uint32_t promised;            /* granted, not yet returned by a completion */
	uint32_t owed;                /* granted, not yet sent to the client */
};

int ofi_pool_create(struct ofi_pool *pool, struct ofi_ep *e, size_t slot_size,
		    uint32_t max_slots);
void ofi_pool_destroy(struct ofi_pool *pool);
/* Grows the pool to at least want slots (in chunks, up to max_slots); the
 * new slots are posted and their credits free. 0 or -errno. */
int ofi_pool_grow(struct ofi_pool *pool, uint32_t want, char *err, size_t errlen);
static inline void *ofi_pool_buf(const struct ofi_pool *pool, uint32_t slot)
{
	return pool->chunks[slot / OFI_POOL_CHUNK].buf + (size_t)(slot % OFI_POOL_CHUNK) *
							       pool->slot_size;
}
static inline void *ofi_pool_desc(const struct ofi_pool *pool, uint32_t slot)
{
	return ofi_desc(pool->chunks[slot / OFI_POOL_CHUNK].mr);
}
/* A completion handed slot back: it is off the queue. -EPROTO if it was
 * not posted (a completion seen twice). */
int ofi_pool_taken(struct ofi_pool *pool, uint32_t slot);
/* Posts slot again. 0 or -errno. */
int ofi_pool_post(struct ofi_pool *pool, uint32_t slot);
/* Credits per session when this many share the pool (the fair share). */
uint32_t ofi_pool_share(const struct ofi_pool *pool, uint32_t sessions);
/* Gives c credits up to share from the free ones; returns how many. */
uint32_t ofi_pool_grant(struct ofi_pool *pool, struct ofi_credits *c, uint32_t share);
/* One of c's messages was handled and its slot is back (reposted) or lost:
 * its credit comes back. -EPROTO if c held none (the peer sent without). */
int ofi_pool_return(struct ofi_pool *pool, struct ofi_credits *c, bool reposted);
/* Credits granted but never sent go back to the free ones (a closing
 * session can no longer use them). */
void ofi_pool_unsend(struct ofi_pool *pool, struct ofi_credits *c);
/* A session is gone and drained: its unused credits are free again. */
void ofi_pool_release(struct ofi_pool *pool, struct ofi_credits *c);

/* ---------------------------------------------------------------------- */
/* ofi_server.c and ofi_srv_cq.c                                          */

enum { OS_LIVE, OS_CLOSING, OS_DEAD };

struct ofi_session {
	uint32_t index;               /* in the server's table */
	uint32_t gen;                 /* of that index */
	int state;                    /* OS_* */
	fi_addr_t addr;               /* the client's endpoint */
	uint64_t token;               /* its control connection's session token */
	uint64_t seq;                 /* sessions in the order they began (retire.h) */
	uint64_t cookie;              /* what its messages carry */
	uint32_t conn;                /* the client's index of its connection (ours carry it) */
	uint32_t client_id, num_clients;
	char peer[64];
	struct ofi_credits cr;
	uint32_t held;                /* its slots out of the queue (answers being sent) */
	/* flushes, counted (messages come in any order) */
	uint64_t pushes_handled;      /* push messages applied or refused */
	uint32_t failed;              /* ... refused since the last flush acknowledgement */
	bool flush_pending;           /* a flush waits for pushes still on the way */
	uint64_t flush_tag, flush_pushes;
	uint32_t acks_owed;           /* flush acknowledgements to send */
	uint64_t ack_tag;             /* ... the latest one's number */
	uint32_t ack_failed;          /* ... and its refused count */
	uint64_t drain_deadline;      /* closing: credits back by then, or released */
	bool close_control;           /* its control connection is to be closed */
};

/* The flush logic, on one session (the server core is told about the flush
 * by the caller): a flush of tag that follows pushes push messages. */
void ofi_flush_arrived(struct ofi_session *ss, uint64_t tag, uint64_t pushes);
/* A push message of the session was handled (refused: it failed). */
void ofi_push_handled(struct ofi_session *ss, bool refused);

struct ofi_ctl_slot {
	bool busy;                    /* its send has not completed */
};

struct ofi_server {
	struct rdps_tserver base;
	struct rdps_tserver *tcp;     /* handshake, bind, barrier, stats, shutdown */
	struct rdps_listen_params p;
	struct rdps_region regions[RDPS_MAX_TABLES];
	struct ofi_ep e;
	struct fid_mr *mrs[RDPS_MAX_TABLES];
	struct ofi_pool pool;
	char *ctl_buf;                /* OFI_CTL_SLOTS control messages */
	struct fid_mr *ctl_mr;
	struct ofi_ctl_slot ctl[OFI_CTL_SLOTS];
	uint32_t ctl_next;            /* where the search for a free one starts */
	uint32_t ctl_busy;
	struct ofi_session **sessions; /* by index, NULL where free */
	uint32_t *gens;               /* per index: bumped when freed */
	uint32_t hw;                  /* indexes in use are below this */
	uint32_t live, closing;
	uint32_t regrant_from;        /* round robin over sessions */
	uint64_t *rows_pending;       /* two-sided answers waiting for room to be sent
				       * (session generation, index, slot: as contexts) */
	uint32_t nrows_pending;
	uint32_t *answer_len;         /* per slot: bytes of its two-sided answer */
	uint64_t *answer_tag;         /* per slot: the tag its answer is sent with */
	uint64_t orphans;             /* messages of no live session */
	uint64_t busy_poll_ns;
	uint64_t next_seq;            /* the next session's number */
	struct rdps_retire_list retired; /* dropped tables' regions (retire.h) */
	uint64_t last_traffic_ns;     /* thread 0 handled something then (atomic) */
	uint64_t naps;                /* OFI_IDLE_SLEEP_MS sleeps without a wait object */
	bool grow_failed_logged;
	uint64_t *pull_ids;           /* a two-sided pull's ids, copied out of their slot */
};

/* Server internals shared by ofi_server.c and ofi_srv_cq.c. */
uint32_t ofi_srv_sharers(const struct ofi_server *os);
/* Handles one completion, or a failed one (err: its error entry). */
void ofi_srv_completion(struct ofi_server *os, void *context, size_t len,
			const struct fi_cq_err_entry *err);
/* Reads the CQ until empty or max completions; returns how many or -EIO. */
int ofi_srv_drain_cq(struct ofi_server *os, int max);
/* Gives free credits to sessions below their share and sends what each is
 * owed (credits, flush acknowledgements), and the two-sided answers that
 * found the send queue full. */
void ofi_srv_regrant(struct ofi_server *os);
/* Starts a session's teardown (idempotent); close_control: its control
 * connection is closed too. */
void ofi_session_close(struct ofi_server *os, struct ofi_session *ss, const char *why,
		       bool close_control);
/* Looks up the sender of a message; NULL if it is no live session's. */
struct ofi_session *ofi_srv_session(struct ofi_server *os, const struct ofi_msg_hdr *h);

int ofi_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
	       size_t errlen);
int ofi_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms);
int ofi_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
	      const void *payload, size_t len);
void ofi_destroy(struct rdps_tserver *s, int timeout_ms);
int ofi_add_region(struct rdps_tserver *s, struct rdps_region *r);
void ofi_remove_region(struct rdps_tserver *s, uint32_t table_id);
int ofi_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	    uint32_t n);

const struct rdps_transport_ops *rdps_transport_ofi(void);

#endif
