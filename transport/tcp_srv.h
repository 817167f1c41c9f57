/* SPDX-License-Identifier: MIT */
/*
 * Internal to the TCP backend's server side: a worker's connections and
 * queues, shared by its files, split by concern as rdma-core splits a
 * provider:
 *   tcp_server.c         listen, workers, progress(), deferred replies,
 *                        regions, session hooks, destroy
 *   tcp_srv_accept.c     the listener: accept, connection cap, descriptor
 *                        shortage back-off, hand-over to a worker
 *   tcp_srv_conn.c       a connection: receive and send buffers, the reply
 *                        and request budgets, reading and framing, queues
 *   tcp_srv_handshake.c  hello, authentication, admission, endpoint binding,
 *                        handshake deadlines, refusals
 *   tcp_srv_frames.c     a request frame: its size rules, decoding into a
 *                        struct rdps_request for the core, its reply
 */
#ifndef RDPS_TRANSPORT_TCP_SRV_H
#define RDPS_TRANSPORT_TCP_SRV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "tcp.h"
#include "wire.h"

#define TCP_RX_CHUNK (256u << 10)
/* Before admission only a hello (then an authentication) may come: read
 * that little at a time, so no peer makes the server buffer more. */
#define TCP_RX_HANDSHAKE (sizeof(struct rdps_wire_hdr) + sizeof(struct rdps_wire_hello))
#define TCP_HANDSHAKE_MS 10000          /* default time to be admitted */
#define TCP_FD_RESERVE 64               /* descriptors the default cap leaves free */
#define TCP_MAX_CONNS 65536u            /* default cap, at most */
#define TCP_REPLY_BUF_MIN (64ull << 20) /* default budgets: RAM / 16 within these */
#define TCP_REPLY_BUF_MAX (1ull << 30)
#define TCP_BUF_OWN (64u << 10)         /* per buffer, outside the budgets (kept when empty) */
#define TCP_BUF_KEEP (8u << 20)         /* an emptied buffer up to this is kept (counted) */
#define TCP_TX_STALL_MS 60000           /* default: replies unread this long while
					 * others wait for the reply budget: closed */
#define TCP_DEFERRED_REPLY (sizeof(struct rdps_wire_hdr) + 512) /* a barrier's, allreduce's
					 * or checkpoint's reply, at most */
#define TCP_ACCEPT_BATCH 256            /* accepts per event: connections are served in a flood */
#define TCP_BACKOFF_MIN_MS 50           /* out of descriptors: accept() paused this long, */
#define TCP_BACKOFF_MAX_MS 1000         /* doubling up to this */
#define TCP_LOG_EVERY_NS 1000000000ull  /* rate-limited lines: one a second at most */
#define TCP_KEY_LISTENER 0              /* epoll keys; connections are slot + 1 */
#define TCP_KEY_TIMER UINT64_MAX
#define TCP_KEY_INBOX (UINT64_MAX - 1)
#define TCP_SLOT_BITS 24                /* token: gen << 32 | worker << 24 | slot */

/* Intrusive circular list: the server's queues of connections. */
struct tcp_link {
	struct tcp_link *prev, *next;
};

static inline void link_init(struct tcp_link *l)
{
	l->prev = l->next = l;
}

static inline bool link_queued(const struct tcp_link *l)
{
	return l->next != l;
}

static inline void link_append(struct tcp_link *head, struct tcp_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static inline void link_prepend(struct tcp_link *head, struct tcp_link *l)
{
	link_append(head->next, l);
}

static inline void link_remove(struct tcp_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	link_init(l);
}

struct tcp_worker;

struct tcp_sconn {
	struct tcp_worker *owner; /* its worker */
	int fd;
	uint32_t worker, slot, gen; /* its worker's conns[slot] */
	char peer[64];
	bool hello;            /* the core accepted the hello: a client */
	bool observer;
	bool awaiting_auth;    /* challenge sent, AUTH expected next */
	struct rdps_wire_hello pending;         /* the hello under authentication */
	uint8_t server_nonce[RDPS_NONCE_LEN];
	uint64_t session;      /* token given in the welcome */
	bool session_claimed;  /* an RDMA queue pair is bound to it */
	bool closing;          /* close once tx is drained */
	bool reading;          /* EPOLLIN armed */
	bool writing;          /* EPOLLOUT armed */
	bool stalled;          /* frames left in rx when it had to stop taking requests */
	bool same_host;        /* the peer is on this machine (rdps_sock_is_same_host) */
	bool authenticated;    /* proved the server's secret */
	uint8_t waiting;       /* TCP_WAIT_*: on the worker's paused queue of that budget */
	bool drained;          /* its replies drained while it waited for the budget */
	uint64_t tx_moved_ns;  /* when its replies last moved (sent, or came to none) */
	uint32_t deferred;     /* deferred replies (barrier, ...) still to come */
	size_t discard;        /* payload bytes of a frame refused by its header, to skip */
	uint32_t client_id, num_clients;
	uint64_t since_ns;     /* accepted at */
	uint64_t deadline_ns;  /* to be admitted by (while on the handshakes queue) */
	bool late_read;        /* read once more at its deadline */
	uint8_t *rx;           /* frames being received; rx[0] is a frame start */
	size_t rx_len, rx_cap;
	uint8_t *tx;           /* replies not yet sent, from tx_off */
	size_t tx_off, tx_len, tx_cap;
	struct tcp_link hs;    /* on the server's handshakes until admitted */
	struct tcp_link paused; /* on its worker's paused[waiting - 1]: waits for a budget */
	struct tcp_link ready; /* on the server's ready: needs progress() (see sconn_update) */
};

/*
 * The two memory budgets of a server's connections, all threads together:
 * every byte of every connection's buffers counts (capacity, not use).
 * TX: replies (--max-reply-buffer): a request is taken only once its
 * largest reply fits. RX: requests being received (--max-request-buffer):
 * a frame is read only once it fits. A connection that must wait leaves
 * the epoll set and queues on its worker's paused[kind] until a release
 * makes room (releases on another thread wake the worker).
 */
enum { TCP_BUDGET_TX = 0, TCP_BUDGET_RX = 1 };
enum { TCP_WAIT_NONE = 0, TCP_WAIT_TX = 1, TCP_WAIT_RX = 2 };

struct tcp_budget {
	uint64_t limit;           /* bytes */
	uint64_t used;            /* atomic */
	const char *flag;         /* the option that sets it, for messages */
};

/* Events logged at most once a second, with the count of those held back. */
struct tcp_ratelog {
	uint64_t last_ns;      /* when the last line was written (0: never) */
	uint64_t held;         /* events since, not in a line yet */
	char peer[64];         /* the latest event's peer */
};

struct tcp_server;

/* What other threads hand a worker: a connection accepted for it, or the
 * reply to a deferred request of one of its connections. */
struct tcp_inbox_item {
	struct tcp_inbox_item *next;
	bool is_conn;
	int fd;                   /* is_conn: the accepted socket */
	uint64_t since_ns;        /* is_conn: when accepted */
	bool same_host;           /* is_conn: from this machine */
	char peer[64];
	uint64_t token;           /* a reply: */
	uint32_t type;
	int status;
	size_t len;
	uint8_t payload[];
};

/* A thread's share of the server: its own connections, epoll set, timer,
 * queues and part of the reply budget. Only its thread touches them; other
 * threads go through the inbox. Worker 0 also owns the listener. */
struct tcp_worker {
	struct tcp_server *ts;
	uint32_t index;
	int epfd;
	int tfd;                  /* timerfd in the epoll set: the deadlines below */
	int efd;                  /* eventfd in the epoll set: the inbox has items */
	uint64_t timer_ns;        /* when tfd fires (absolute; 0: disarmed or fired) */
	bool in_progress;         /* progress() re-arms the timer before it returns */
	struct tcp_sconn **conns; /* slot -> connection or NULL */
	uint32_t nslots;
	uint32_t nconns;          /* open connections (read by worker 0 to balance) */
	uint32_t next_gen;
	struct tcp_link handshakes; /* connections not admitted yet, by deadline */
	struct tcp_link paused[2]; /* waiting for a budget (TCP_BUDGET_*), in the order
				    * they stopped */
	bool budget_wake;         /* atomic: another thread released budget */
	bool reclaim;             /* atomic: free the buffers idle connections keep */
	uint64_t retry_ns;        /* when paused connections were last retried */
	uint64_t stall_scan_ns;   /* when connections were last checked for unread replies */
	struct tcp_link ready;    /* to be served or closed with no event to come */
	pthread_mutex_t inbox_lock;
	struct tcp_inbox_item *inbox, **inbox_tail;
};

struct tcp_server {
	struct rdps_tserver base;
	int lfd;
	struct rdps_listen_params p;
	/* Slots 0..nregions-1 (atomic: tables come and go while workers
	 * serve); a slot whose desc.dim is 0 holds no table. regions_lock
	 * orders their changes with the welcomes built from them. */
	struct rdps_region regions[RDPS_MAX_TABLES];
	uint32_t nregions;
	bool exposed;             /* keep remote_addr/rkey (an RDMA backend's) */
	pthread_mutex_t regions_lock;
	rdps_tcp_session_closed_fn session_closed;
	void *session_ctx;
	rdps_tcp_bind_fn bind;    /* endpoint binding (ofi), or NULL */
	void *bind_ctx;
	/* limits (listen params with the defaults filled in) */
	uint32_t max_conns;
	uint64_t handshake_ns;
	uint64_t tx_stall_ns;     /* see TCP_TX_STALL_MS */
	uint32_t nconns;          /* open connections, all workers (atomic) */
	/* worker 0's: the listener */
	struct tcp_ratelog cap_log; /* connections refused over the cap */
	/* accept() out of descriptors: the listener leaves the epoll set */
	bool listening;           /* lfd is in the epoll set */
	uint64_t accept_retry_ns; /* when not: when it returns */
	uint32_t backoff_ms;
	uint64_t starved_ns;      /* start of the shortage (0: none) */
	uint64_t starved_accepts; /* connections accepted during it */
	struct tcp_budget budget[2]; /* TCP_BUDGET_* */
	uint32_t budget_waiters;  /* atomic: workers with connections waiting for one */
	uint64_t budget_log_ns[2]; /* atomic: when a wait was last logged */
	uint32_t nworkers;
	struct tcp_worker workers[];
};

static inline struct tcp_server *to_tcp_server(struct rdps_tserver *s)
{
	return container_of(s, struct tcp_server, base);
}

/* tcp_srv_accept.c */
int tcp_accept(struct tcp_server *ts);
void tcp_cap_log_write(struct tcp_server *ts, uint64_t now);
void tcp_inbox_put(struct tcp_worker *w, struct tcp_inbox_item *it);

/* tcp_srv_conn.c */
int sconn_add(struct tcp_worker *w, int fd, uint64_t since_ns, const char *peer,
	      bool same_host);
int sconn_read(struct tcp_worker *w, struct tcp_sconn *sc);
int sconn_flush(struct tcp_worker *w, struct tcp_sconn *sc);
int sconn_update(struct tcp_worker *w, struct tcp_sconn *sc);
void sconn_settle(struct tcp_worker *w, struct tcp_sconn *sc, int ret);
void sconn_close(struct tcp_worker *w, struct tcp_sconn *sc);
void tcp_serve_waiting(struct tcp_worker *w);
/* Holds n bytes of a budget: within its limit (TCP_TAKE_HARD), within half
 * of it (_SOFT), or past it (_FORCE: the few bytes a reply must have);
 * releases them. */
enum { TCP_TAKE_HARD = 0, TCP_TAKE_SOFT = 1, TCP_TAKE_FORCE = 2 };
bool tcp_budget_take(struct tcp_server *ts, int kind, size_t n, int mode);
void tcp_budget_put(struct tcp_server *ts, int kind, size_t n);
void tcp_timer_arm(struct tcp_worker *w);
/* While connections wait for the reply budget: closes those whose clients
 * left replies unread for tx_stall_ns (they hold what the others wait
 * for). At most once a second. */
void tcp_close_stalled_readers(struct tcp_worker *w, uint64_t now);
void tcp_stat_bad_frame(struct tcp_server *ts);
/* Appends a frame to sc's replies; its payload (len bytes), or NULL. */
void *tcp_tx_frame(struct tcp_sconn *sc, uint8_t type, int32_t status, uint32_t len);
int tcp_tx_error(struct tcp_sconn *sc, uint8_t type, int status, const char *msg);

/* tcp_srv_handshake.c */
bool tcp_handshake_frame(const struct rdps_wire_hdr *h);
void tcp_handshake_step(struct tcp_worker *w, struct tcp_sconn *sc);
void tcp_expire_handshakes(struct tcp_worker *w, uint64_t now);
int tcp_handle_hello(struct tcp_server *ts, struct tcp_sconn *sc,
		     const struct rdps_wire_hdr *h, const uint8_t *payload);
int tcp_handle_auth(struct tcp_server *ts, struct tcp_sconn *sc,
		    const struct rdps_wire_hdr *h, const uint8_t *payload);
int tcp_handle_bind(struct tcp_server *ts, struct tcp_sconn *sc,
		    const struct rdps_wire_hdr *h, const uint8_t *payload);
int tcp_refuse(struct tcp_server *ts, struct tcp_sconn *sc, int type, int status,
	       const char *why);
uint64_t tcp_make_token(const struct tcp_sconn *sc);

/* tcp_srv_frames.c */
int tcp_handle_frame(struct tcp_server *ts, struct tcp_sconn *sc,
		     const struct rdps_wire_hdr *h, const uint8_t *payload);
/* Payload bytes a frame of h's type may have on sc (its largest legal
 * request), checked on the header, before any of it is buffered. */
uint32_t tcp_frame_max_len(const struct tcp_sconn *sc, const struct rdps_wire_hdr *h);
/* The largest reply (header included) the complete frame h, payload may
 * get: held against the reply budget before the frame is taken. */
size_t tcp_frame_reply_bound(struct tcp_server *ts, const struct rdps_wire_hdr *h,
			     const uint8_t *payload);

#endif
