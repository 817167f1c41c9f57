/* SPDX-License-Identifier: MIT */
/*
 * Internal: the verbs backend (libibverbs + librdmacm, RC queue pairs), split
 * by concern as rdma-core's providers are:
 *
 *   verbs_cm.c         rdma_cm address/route resolution, event waits,
 *                      registered buffers, the listener
 *   verbs_client.c     a client connection: one-sided pulls, pushes, flush
 *   verbs_recv_pool.c  the server's shared receive slots and push credits
 *   verbs_server.c     the server: listener, connection requests, async
 *                      events, control connections, thread 0's progress
 *   verbs_worker.c     a server thread: its own CQ, shared receive queue and
 *                      sessions, their teardown, its progress
 *   verbs_srv_cq.c     the server's completions, and the credits and
 *                      acknowledgements they make it send
 *   verbs.c            the ops table and what the backend tells its callers
 *
 * Pulls are one-sided RDMA READs of registered shards. Pushes are SENDs into
 * receive buffers ("slots") the server keeps posted on one shared receive
 * queue; a client may only send while it holds a credit, and the server
 * never has more credits out than slots posted (verbs_recv_pool.c), so a
 * SEND never finds the queue empty. The handshake, barriers and stats run
 * over a TCP connection (tcp.c); each queue pair is bound to that
 * connection: it is created with the connection's one-use session token and
 * torn down with it.
 */
#ifndef RDPS_TRANSPORT_VERBS_H
#define RDPS_TRANSPORT_VERBS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdps/auth.h"
#include "rdps/transport.h"
#include "retire.h"

#define VERBS_MSG_SIZE (64u << 10)     /* one push message / receive slot */
/* Credit/ack receives a client keeps posted per connection: the server
 * has at most VERBS_SRV_SQ_DEPTH sends out to it, and each receive is
 * posted again as it completes. */
#define VERBS_CLIENT_RECVS (2 * VERBS_SRV_SQ_DEPTH)
#define VERBS_SQ_DEPTH 512             /* client send queue, at most ... */
#define VERBS_SQ_DEPTH_MIN 64          /* ... and at least (a shared CQ's share) */
#define VERBS_SEND_SLOTS 16            /* client push buffers per connection, at most ... */
#define VERBS_SEND_SLOTS_MIN 4         /* ... and at least */
#define VERBS_SEND_BUDGET 64           /* ... VERBS_SEND_BUDGET / servers between them */
#define VERBS_BOUNCE (8u << 20)        /* READ targets of a client (all its servers') ... */
#define VERBS_BOUNCE_MIN (128u << 10)  /* ... a connection's share, at least */
#define VERBS_READS_PER_POST 256       /* work requests per post list */
#define VERBS_READ_RING VERBS_SQ_DEPTH /* READs outstanding, at most */
#define VERBS_REREAD_FALLBACK 16       /* re-reads of a torn row before a two-sided read */
#define VERBS_REREAD_QUEUE 256         /* torn rows waiting for their re-read */
#define VERBS_GROUP_CONNS 65535        /* connections of one client, at most */
/* Every work request whose sequence number is a multiple of this is
 * signaled (and the last of each READ list, and every flush): a completion
 * frees the queue entries up to it, so a full send queue always holds a
 * signaled request (<= depth), and a push buffer's SEND is followed by one
 * before the buffer is wanted again (<= push buffers). */
#define VERBS_SIGNAL_EVERY 16
#define VERBS_MAX_RUN_ROWS 1024        /* rows per coalesced READ */
#define VERBS_INITIATOR_DEPTH 16       /* READs in flight per QP */
#define VERBS_CM_MAGIC 0x32504452u     /* "RDP2": the session-bound request */
#define VERBS_QP_MAC_LEN 16            /* truncated HMAC proving the secret */
#define VERBS_QP_MAC_LABEL "rdps-qp-v1"
/* Receiver-not-ready retries before a SEND fails (7 would retry forever).
 * Credits make RNR impossible between well-behaved peers; bounded, a peer
 * that breaks the protocol gets an error instead of a hang. */
#define VERBS_RNR_RETRY 6
#define VERBS_RETRY 7                  /* transport retries (7 is finite) */

_Static_assert(VERBS_SIGNAL_EVERY <= VERBS_SQ_DEPTH_MIN && VERBS_SIGNAL_EVERY <= VERBS_SEND_SLOTS,
	       "a wait for send queue room or a push buffer must have a signaled request to wait on "
	       "(a connection with fewer push buffers signals as often as it has them)");

/* Server side. */
#define VERBS_POOL_CHUNK 64            /* slots per registered chunk (4 MiB) */
#define VERBS_POOL_MIN_SLOTS 256       /* the pools at start (16 MiB), split among workers */
#define VERBS_POOL_MAX_SLOTS 8192      /* at most (512 MiB), and the device's max_srq_wr */
#define VERBS_SHARE_TARGET 8           /* the pool grows to keep this many credits per session */
#define VERBS_SHARE_MAX 32             /* credits one session holds at most */
#define VERBS_SRV_SQ_DEPTH 16          /* a session's server send queue (credits, acks) */
#define VERBS_SRV_SIGNAL_EVERY 8
#define VERBS_MAX_SESSIONS 1024        /* queue pairs per server, split among workers (sizes the CQs) */
#define VERBS_MAX_THREADS 64           /* server progress threads (workers) */
#define VERBS_DRAIN_BATCH 256          /* completions a worker handles per hold of its lock */
#define VERBS_ROUND_BATCHES 4          /* ... and such batches per progress round */
#define VERBS_DRAIN_MS 2000            /* teardown waits this long for LAST_WQE_REACHED */
/* progress() polls the CQ this long before sleeping on the completion
 * channel; RDPS_VERBS_BUSY_POLL_US overrides it (0: never spin). */
#define VERBS_BUSY_POLL_US 50
#define VERBS_BUSY_POLL_MAX_US 100000

/* Immediate data, server -> client. */
#define IMM_KIND(x) ((x) >> 30)
#define IMM_CREDITS(x) (((x) >> 16) & 0x3fffu)
#define IMM_FAILED(x) ((x) & 0xffffu)
#define IMM_MAKE(kind, credits, failed)                                       \
	(((uint32_t)(kind) << 30) | ((uint32_t)(credits) << 16) | ((failed) > 0xffff ? 0xffff : (failed)))
enum { IMM_CREDIT = 1, IMM_FLUSH_ACK = 2 };

/* First bytes of every client -> server message. */
struct verbs_msg_hdr {
	uint32_t type; /* RDPS_REQ_PUSH or RDPS_REQ_FLUSH */
	uint32_t len;  /* bytes after this header */
};

/* Private data of the RDMA connection request (rdma_cm carries 56 bytes). */
struct verbs_cm_req {
	uint32_t magic;
	uint32_t client_id;
	uint32_t num_clients;
	uint32_t server_id;
	uint64_t session;                 /* from the welcome of the TCP connection */
	uint8_t mac[VERBS_QP_MAC_LEN];    /* with a secret: HMAC(secret, label, session) */
};
_Static_assert(sizeof(struct verbs_cm_req) == 40, "wire layout");

struct verbs_cm_rep {
	uint32_t magic;
	uint32_t credits;                 /* may be 0: credits follow as messages */
};

/*
 * wr_id of every work request: its kind in the top byte, the rest per kind.
 * Completions are classified by wr_id only: a failed completion's opcode is
 * undefined (ibv_poll_cq(3); mlx5 does not write it). A client's carry the
 * connection's index in its group (16 bits) and a sequence number's low
 * 40 bits (the completion's qp_num says whether the connection at that
 * index is still the one).
 */
enum {
	WR_READ = 1,     /* client: seq */
	WR_SEND = 2,     /* client: seq */
	WR_RECV = 3,     /* client: receive index */
	WR_SRV_RECV = 4, /* server: pool slot */
	WR_SRV_SEND = 5, /* server: session index, generation, seq */
};
#define WR_ID(kind, seq) (((uint64_t)(kind) << 56) | ((seq) & ((1ull << 56) - 1)))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_SEQ(id) ((id) & ((1ull << 56) - 1))
#define WR_CID(kind, conn, seq) WR_ID(kind, ((uint64_t)(conn) << 40) | ((seq) & ((1ull << 40) - 1)))
#define WR_CONN(id) ((uint32_t)(WR_SEQ(id) >> 40))
#define WR_CSEQ(id) (WR_SEQ(id) & ((1ull << 40) - 1))

/* ---------------------------------------------------------------------- */
/* verbs_cm.c                                                             */

/* Fork support for registered memory where the kernel needs it (before
 * 5.13: ibv_fork_init), once, before the first registration. */
void verbs_fork_init(void);
/* Advice for a failed registration (the memory-lock limit), or "". */
const char *verbs_memlock_hint(int err);
int verbs_set_nonblock(int fd);
/* Waits for the next rdma_cm event on ch, up to deadline. */
int verbs_cm_wait(struct rdma_event_channel *ch, uint64_t deadline, struct rdma_cm_event **ev);
/* Resolves host:port (address, then route) for id. */
int verbs_cm_resolve(struct rdma_cm_id *id, struct rdma_event_channel *ch, const char *host,
		     uint16_t port, int timeout_ms, char *err, size_t errlen);
/* A page-aligned zeroed buffer of len bytes registered with access. */
int verbs_alloc_registered(struct ibv_pd *pd, size_t len, int access, char **buf,
			   struct ibv_mr **mr, char *err, size_t errlen, const char *what);
/* Why a server refused a connection request (reason: a positive errno it
 * sent in the reject's private data). */
const char *verbs_reject_reason(int reason);
/* The MAC a client puts in its connection request (all zero without a secret). */
void verbs_qp_mac(const struct rdps_secret *secret, uint64_t session,
		  uint8_t mac[VERBS_QP_MAC_LEN]);
/* Creates an event channel and an id bound to host:port, ready to listen. */
int verbs_cm_bind(const char *host, uint16_t port, struct rdma_event_channel **ch,
		  struct rdma_cm_id **id, void *ctx, char *err, size_t errlen);
/* The RDMA device that serves the route to host, by name. */
int verbs_route_device(const char *host, uint16_t port, char *name, size_t namelen);
/* The type of service of rdps' RDMA connections: RDPS_TOS (rdps --tos),
 * 0-255, or -1 (the device's default). On a RoCE fabric with PFC the
 * traffic class it maps to must be the lossless one. */
int verbs_tos(void);
/* Sets it on id (rdma_set_option(RDMA_OPTION_ID_TOS)), if one is set:
 * before the route is resolved, or on a listener. 0 or -errno. */
int verbs_set_tos(struct rdma_cm_id *id);
/* The listener's backlog: the kernel's maximum (rdma_ucm's max_backlog,
 * else somaxconn), not 128, so many clients may connect at once. */
int verbs_listen_backlog(void);

/* ---------------------------------------------------------------------- */
/* verbs_group.c and verbs_client.c                                       */

struct verbs_read {         /* one posted READ, in a connection's ring */
	uint64_t seq;           /* its work request */
	uint64_t bend;          /* bounce ring position past its rows */
	uint32_t pull;          /* index in pend[] */
	uint32_t row;           /* first row of the run in that pull */
	uint32_t nrows;
	uint32_t boff;          /* offset in the bounce buffer */
	uint32_t checked;       /* rows checked and copied out (or queued again) */
	uint16_t tries;         /* a re-read: the row's reads so far */
};

struct verbs_pull {
	uint32_t table, n, next; /* rows [0, next) are posted or done */
	const uint64_t *ids;
	float *out;
	uint64_t row_key;        /* rdps_row_table_key of the table: rows' tags */
	int err;                 /* the pull failed (the connection lives): -errno */
};

struct verbs_reread {       /* a torn row waiting for its next read */
	uint32_t pull, row;
	uint16_t tries;
};

struct verbs_conn;

/*
 * What a client's connections on one RDMA device share: the protection
 * domain and one completion queue (sized for every connection the client
 * will make, as far as the device allows: each connection's queues are cut
 * to its share). Per rdps_client (params' shared), one thread's; a
 * connection on another device has a group of its own.
 */
struct verbs_group {
	void **home;                  /* the client's slot that holds it, or NULL */
	struct ibv_context *ctx;      /* its device (rdma_cm's) */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *cc;  /* to sleep on the CQ (NULL: spin only) */
	bool cq_armed;                /* an event is asked for and not yet read */
	uint64_t sleeps;              /* waits that slept on cc */
	uint32_t cqe;                 /* the CQ's entries */
	uint32_t servers;             /* connections it was sized for */
	struct verbs_conn **conns;    /* by index, NULL where free */
	uint32_t nconns;              /* indexes in use are below this */
	uint32_t live;
};

/*
 * A client connection. Send queue accounting is by sequence number: a work
 * request's is sq_posted after it is posted; a completion of a signaled one
 * tells that it and all before it are done (RC completes in order), and
 * only then does the provider reuse their queue entries: at most sq_depth
 * may be posted and not known done. Here (not in verbs_client.c) so that
 * tests/transport/test_verbs_client.c can run it against a model device.
 */
struct verbs_conn {
	struct rdps_conn base;
	struct rdps_conn *ctl;        /* tcp connection: handshake, control, and
				       * the two-sided read of a row torn too often */
	struct verbs_group *g;        /* PD and CQ, shared with the client's others */
	uint32_t index;               /* in g->conns: in wr_ids */
	uint32_t qp_num;              /* its completions' */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char *bounce;                 /* bounce_size bytes, a ring of READ targets */
	struct ibv_mr *bounce_mr;
	size_t bounce_size;
	char *sendbuf;                /* nslots push buffers */
	struct ibv_mr *send_mr;
	uint32_t nslots;
	uint32_t max_inline;
	int timeout_ms;
	int consistency;
	bool broken;
	uint32_t sq_depth;            /* its share of the CQ, VERBS_SQ_DEPTH at most */
	uint32_t signal_every;        /* VERBS_SIGNAL_EVERY, or fewer push buffers
				       * (a test's control breaks it) */
	uint64_t sq_posted, sq_done;  /* sequence numbers of work requests */
	uint64_t wait_seq;            /* what seq_done() waits for */
	uint64_t slot_seq[VERBS_SEND_SLOTS]; /* SEND occupying each slot */
	uint64_t sends;                      /* SENDs posted (slot = sends % nslots) */
	uint32_t credits;
	uint64_t flush_acks;          /* flush acknowledgements received */
	uint64_t flush_want;          /* ... expected once the last flush is done */
	uint32_t flush_failed;        /* push messages the server refused */
	/* pulls: READs run through a ring, refilled as completions come */
	struct verbs_pull pend[RDPS_TRANSPORT_POST_DEPTH];
	uint32_t npend;
	uint32_t pcur;                /* first pull with rows not posted */
	struct verbs_read reads[VERBS_READ_RING];
	uint64_t rd_head, rd_tail;    /* READs harvested, posted */
	uint64_t b_head, b_tail;      /* bounce ring positions freed, allocated */
	struct verbs_reread rq[VERBS_REREAD_QUEUE]; /* torn rows to read again */
	uint32_t rq_head, rq_tail;
	uint64_t fallbacks;           /* torn rows read two-sided */
	struct ibv_send_wr wrs[VERBS_READS_PER_POST];
	struct ibv_sge sges[VERBS_READS_PER_POST];
	struct ibv_send_wr swrs[VERBS_SEND_SLOTS]; /* a list of push SENDs */
	struct ibv_sge ssges[VERBS_SEND_SLOTS];
};

/* verbs_group.c */
/* The group the connection joins on its id's device (params' shared one
 * if it is on that device, else a new one): the PD and CQ its QP uses. */
int verbs_group_join(struct verbs_conn *vc, const struct rdps_conn_params *p, char *err,
		     size_t errlen);
/* Leaves it (its QP is destroyed: no completion of it comes any more);
 * the group goes with its last connection. */
void verbs_group_leave(struct verbs_conn *vc);
/* Polls the group's CQ once, handing each completion to its connection;
 * returns completions polled, or -errno if vc's connection failed. */
int verbs_group_poll(struct verbs_conn *vc);
/* Sleeps on the group's CQ until a completion may be there, ctl_fd (the
 * control connection, or -1) is readable (*ctl_readable) or ms pass. Arms
 * the CQ first and polls once more (a completion before the arm raises no
 * event): returns the completions that found, as verbs_group_poll, or 0
 * after the sleep. Without a completion channel it only yields. */
int verbs_group_sleep(struct verbs_conn *vc, int ctl_fd, int ms, bool *ctl_readable);
/* Handles one completion of vc (verbs_client.c). 0 or -errno. */
int verbs_conn_wc(struct verbs_conn *vc, const struct ibv_wc *wc);
/* Marks the connection broken with a reason; returns ret. */
int verbs_conn_fail(struct verbs_conn *vc, int ret, const char *fmt, const char *detail);

int verbs_connect(const struct rdps_conn_params *p, struct rdps_conn **out, char *err,
		  size_t errlen);
void verbs_close(struct rdps_conn *c);
int verbs_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
		    float *out);
int verbs_pull_wait(struct rdps_conn *c);
int verbs_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const float *grads,
	       uint32_t n);
int verbs_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		      const float *grads, const uint32_t *index, uint32_t n);
int verbs_call_send(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
		  int timeout_ms);
int verbs_call_recv(struct rdps_conn *c, uint32_t type, void *reply, size_t reply_len,
		  int timeout_ms);
int verbs_call(struct rdps_conn *c, uint32_t type, const void *req, size_t req_len,
	       void *reply, size_t reply_len, int timeout_ms);

/* ---------------------------------------------------------------------- */
/* verbs_recv_pool.c: receive slots on one SRQ, and the credits that say
 * who may fill them. Mirrored by the model transport/verbs_credits.pml. */

struct verbs_chunk {
	char *buf;                    /* VERBS_POOL_CHUNK slots of VERBS_MSG_SIZE */
	struct ibv_mr *mr;
};

struct verbs_recv_pool {
	struct ibv_pd *pd;
	struct ibv_srq *srq;
	uint32_t nslots;              /* slots allocated (all posted when idle) */
	uint32_t max_slots;           /* the SRQ's capacity */
	uint32_t posted;              /* slots on the SRQ now */
	uint32_t free_credits;        /* posted slots promised to no session */
	uint32_t promised;            /* credits held by sessions (sum) */
	uint8_t *slot_posted;         /* per slot: 1 while on the SRQ */
	struct verbs_chunk *chunks;   /* nslots / VERBS_POOL_CHUNK */
	uint64_t double_posts;        /* slots a completion returned twice (never) */
};

/* A session's side of the accounting. */
struct verbs_credits {
	uint32_t promised;            /* granted, not yet returned by a completion */
	uint32_t owed;                /* granted, not yet sent to the client */
};

int verbs_pool_create(struct verbs_recv_pool *pool, struct ibv_pd *pd, uint32_t max_slots,
		      char *err, size_t errlen);
void verbs_pool_destroy(struct verbs_recv_pool *pool);
/* Grows the pool to at least want slots (in chunks, up to max_slots). The
 * new slots are posted and their credits are free. 0 or -errno. */
int verbs_pool_grow(struct verbs_recv_pool *pool, uint32_t want, char *err, size_t errlen);
static inline void *verbs_pool_buf(const struct verbs_recv_pool *pool, uint32_t slot)
{
	return pool->chunks[slot / VERBS_POOL_CHUNK].buf +
	       (size_t)(slot % VERBS_POOL_CHUNK) * VERBS_MSG_SIZE;
}
/* A completion handed slot back: it is off the SRQ. -EPROTO if it was not
 * posted (a completion seen twice). */
int verbs_pool_taken(struct verbs_recv_pool *pool, uint32_t slot);
/* Posts slot again. 0 or -errno. */
int verbs_pool_post(struct verbs_recv_pool *pool, uint32_t slot);
/* Credits per session when the pool is shared by this many sessions (the
 * job's size, or the sessions connected if more): the fair share. */
uint32_t verbs_pool_share(const struct verbs_recv_pool *pool, uint32_t sessions);
/* Gives c credits up to share from the free ones; returns how many. */
uint32_t verbs_pool_grant(struct verbs_recv_pool *pool, struct verbs_credits *c,
			  uint32_t share);
/* A completion consumed one of c's credits; reposted: its slot is on the
 * SRQ again. -EPROTO if c held none: the peer sent without a credit. */
int verbs_pool_return(struct verbs_recv_pool *pool, struct verbs_credits *c, bool reposted);
/* A session is gone and drained: its unused credits are free again. */
void verbs_pool_release(struct verbs_recv_pool *pool, struct verbs_credits *c);

/* ---------------------------------------------------------------------- */
/* verbs_server.c, verbs_worker.c and verbs_srv_cq.c                      */

/*
 * Server threads (rdps server --num_server_threads N). Each of the N
 * progress threads runs one worker: its own completion queue, completion
 * channel and shared receive queue (its own pool of slots and credits),
 * and the sessions the listener gave it (the least busy worker takes each
 * new one), so a worker applies its sessions' pushes without meeting the
 * others: the shards' row stripes keep one writer per row.
 *
 * Thread 0 also serves the listener (rdma_cm events), the control
 * connections (tcp.c, run as one worker there) and the device's async
 * events; what it does to a worker's sessions (admit one, start a
 * teardown) it does under that worker's lock, which the worker holds
 * while it handles a bounded batch of completions. Only thread 0 destroys
 * rdma_cm ids and queue pairs (rdma_destroy_id waits for the listener's
 * events of the id to be acknowledged, which thread 0 does), and only it
 * closes control connections: a worker asks for both through its dead list
 * and the session's close_control flag.
 */
enum { SS_CONNECTING, SS_LIVE, SS_CLOSING, SS_DEAD };

struct verbs_worker;

struct verbs_session {
	struct verbs_worker *w;    /* the worker that serves it (fixed) */
	struct rdma_cm_id *id;
	uint32_t qp_num;
	uint32_t index;            /* in w->sessions */
	uint16_t gen;              /* of that index, in send wr_ids */
	int state;                 /* SS_* */
	uint32_t client_id, num_clients;
	uint64_t token;            /* its control connection's session token */
	uint64_t seq;              /* sessions in the order they began (retired regions) */
	char peer[64];
	struct verbs_credits cr;
	uint32_t failed;           /* push messages refused since the last flush */
	uint32_t acks_owed;        /* flush acknowledgements not sent yet */
	uint64_t sq_posted, sq_done;
	bool drain_ready;          /* LAST_WQE_REACHED seen, or its wait ran out */
	uint64_t drain_deadline;
	bool close_control;        /* its control connection is to be closed (thread 0) */
	struct verbs_session *next_dead; /* on w->dead once reaped */
	/* On the worker's queues (verbs_srv_cq.c): below its share of credits
	 * (VERBS_Q_GRANT), with credits or acknowledgements to send
	 * (VERBS_Q_SEND). */
	struct verbs_session *q_next[2], *q_prev[2];
	bool queued[2];
};

enum { VERBS_Q_GRANT = 0, VERBS_Q_SEND = 1 };

/* A FIFO of sessions, linked through the sessions. */
struct verbs_squeue {
	struct verbs_session *head, *tail;
	uint32_t len;
};

struct verbs_worker {
	struct verbs_server *vs;
	uint32_t index;                /* progress thread */
	pthread_mutex_t lock;          /* all below, and the sessions' state */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct verbs_recv_pool pool;
	struct verbs_session **sessions; /* by index, NULL where free */
	uint16_t *gens;                /* per index: bumped when freed */
	uint32_t max_sessions;
	uint32_t hw;                   /* indexes in use are below this */
	uint32_t live;                 /* sessions not closing (they hold credits) */
	uint32_t closing;
	uint32_t sharers;              /* verbs_srv_sharers(), kept as sessions come and go */
	/* Sessions by QP number (open addressing, linear probing): a receive
	 * completion names its QP, and a scan of every session per completion
	 * grew with the job. */
	struct verbs_session **qp_hash;
	uint32_t qp_hash_mask;
	uint64_t qp_lookups, qp_probes; /* for the tests: probes per lookup */
	/* Sessions that need the regrant's attention, in the order they came
	 * to need it (round robin without walking every session per batch). */
	struct verbs_squeue q[2];
	uint64_t regrant_visits;       /* sessions the regrant looked at (tests) */
	uint64_t orphans;              /* completions of unknown queue pairs */
	uint64_t srq_low_logged_ns;
	bool srq_armed;                /* the SRQ limit is armed (re-armed once the pool
					* recovered, not at every event) */
	uint64_t srq_arms;             /* ibv_modify_srq(IBV_SRQ_LIMIT) calls */
	bool cq_armed;                 /* the CQ is armed for an event (only before a sleep) */
	uint64_t cq_arms;              /* ibv_req_notify_cq calls */
	bool grow_failed_logged;
	struct verbs_session *dead;    /* reaped, for thread 0 to destroy */
	/* for stats and the listener's choice, read without the lock */
	uint32_t pub_slots, pub_posted, pub_live;
};

struct verbs_server {
	struct rdps_tserver base;
	struct rdps_tserver *tcp;      /* handshake, barrier, stats, shutdown */
	struct rdps_listen_params p;
	struct rdps_region regions[RDPS_MAX_TABLES];
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mrs[RDPS_MAX_TABLES];
	struct verbs_worker *workers;
	uint32_t nworkers;
	int kick_fd;                   /* eventfd: wakes thread 0 (control closes) */
	int ctl_close_pending;         /* a session asks for close_control (atomic) */
	int fatal;                     /* a device or queue error: progress fails (atomic) */
	uint64_t busy_poll_ns;         /* spin on a CQ this long before sleeping */
	uint64_t next_seq;             /* the next session's number (thread 0) */
	struct rdps_retire_list retired; /* dropped tables' regions (retire.h; thread 0) */
};

/* Starts the teardown of a session (under w->lock); its control
 * connection is closed too (by thread 0) unless it is the reason.
 * Idempotent. */
void verbs_session_close(struct verbs_worker *w, struct verbs_session *ss, const char *why,
			 bool close_control);
/* Sessions the worker's pool is shared by: those connected, or its part
 * of the largest job size they declared if more (every client of the job
 * will come, and the listener spreads them evenly). Kept in w->sharers:
 * verbs_srv_sharers_update() recounts it when a session comes or goes. */
uint32_t verbs_srv_sharers(const struct verbs_worker *w);
void verbs_srv_sharers_update(struct verbs_worker *w);
/* The table of sessions by QP number, for max_sessions sessions (0 or
 * -ENOMEM), and its use. */
int verbs_qp_hash_init(struct verbs_worker *w, uint32_t max_sessions);
void verbs_qp_hash_put(struct verbs_worker *w, struct verbs_session *ss);
void verbs_qp_hash_del(struct verbs_worker *w, struct verbs_session *ss);
struct verbs_session *verbs_qp_hash_get(struct verbs_worker *w, uint32_t qp_num);
/* A session leaves the worker's queues (it is reaped). */
void verbs_srv_unqueue(struct verbs_worker *w, struct verbs_session *ss);
/* Arms w's CQ for an event, unless armed, and looks at it once more (a
 * completion that came before the arm raises none). Returns true if the
 * CQ is armed and was empty: sleeping on the channel is safe. */
bool verbs_worker_arm(struct verbs_worker *w);
/* Re-arms the SRQ's limit once the pool recovered (more than half of it
 * posted again after the limit was reached). Under w->lock. */
void verbs_srq_limit_rearm(struct verbs_worker *w);
/* The worker's part of a job of num_clients sessions. */
uint32_t verbs_srv_job_part(const struct verbs_worker *w, uint32_t num_clients);
/* Enters an accepted session into w's table and gives it its first
 * credits (the fair share, as far as free ones go): they travel in the
 * connection reply. Returns them (verbs_srv_cq.c). */
uint32_t verbs_srv_admit(struct verbs_worker *w, struct verbs_session *ss);
/* Handles one completion of w's CQ (verbs_srv_cq.c). */
void verbs_srv_completion(struct verbs_worker *w, const struct ibv_wc *wc);
/* Polls w's CQ until it is found empty or max completions were handled;
 * returns how many, or -EIO. *empty: found empty, so every completion that
 * was in it when this began has been handled. */
int verbs_srv_drain_cq(struct verbs_worker *w, int max, bool *empty);
/* Gives free credits to sessions below their share and sends what each is
 * owed (credits, flush acknowledgements). */
void verbs_srv_regrant(struct verbs_worker *w);
/* The busy-poll budget: RDPS_VERBS_BUSY_POLL_US if set (0 to
 * VERBS_BUSY_POLL_MAX_US; else a warning and the default), or
 * VERBS_BUSY_POLL_US. */
uint64_t verbs_srv_busy_poll_ns(void);

/* verbs_worker.c */
/* Creates worker index's queues, sized from what the device allows. */
int verbs_worker_init(struct verbs_server *vs, struct verbs_worker *w, uint32_t index,
		      char *err, size_t errlen);
/* Frees what verbs_worker_init made, and its sessions (no thread runs). */
void verbs_worker_fini(struct verbs_worker *w);
/* One round of w's completions: busy-polls up to budget_ns, else sleeps up
 * to timeout_ms on its completion channel (unless sleep is false: thread 0
 * sleeps in its own poll), then handles completions in batches, frees the
 * drained sessions and regrants. Returns completions handled or -errno. */
int verbs_worker_progress(struct verbs_worker *w, int timeout_ms, uint64_t budget_ns,
			  bool sleep);
/* Polls the CQ until completions come (handles them all, returns how
 * many) or budget_ns passes (0); -EIO on a failed poll. Polls once at
 * least. Takes w->lock. */
int verbs_srv_busy_poll(struct verbs_worker *w, uint64_t budget_ns);
/* Publishes w's counts for stats and the listener (under w->lock). */
void verbs_worker_publish(struct verbs_worker *w);
/* Sums every worker's published counts into the server's stats. */
void verbs_server_stats(struct verbs_server *vs);
/* Every completion of the session's QP has been handled (under w->lock):
 * its credits go back, its index is free, and it goes on w->dead. */
void verbs_session_reap(struct verbs_worker *w, struct verbs_session *ss);
/* A session off w->dead: thread 0 destroys its queue pair and id. */
void verbs_session_destroy(struct verbs_session *ss);

int verbs_listen(const struct rdps_listen_params *p, struct rdps_tserver **out, char *err,
		 size_t errlen);
int verbs_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms);
int verbs_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
		const void *payload, size_t len);
void verbs_destroy(struct rdps_tserver *s, int timeout_ms);
int verbs_add_region(struct rdps_tserver *s, struct rdps_region *r);
void verbs_remove_region(struct rdps_tserver *s, uint32_t table_id);
int verbs_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
	      uint32_t n);

const struct rdps_transport_ops *rdps_transport_verbs(void);

#endif
