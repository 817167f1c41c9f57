/* SPDX-License-Identifier: MIT */
/*
 * The real rdps servers fuzz_frames and fuzz_requests talk to, the client
 * connections of the harness, and the oracle of everything the servers
 * send back. Built only in the clang fuzz configuration.
 *
 * Four servers (rdps_server_create, transport tcp, kvstore core) listen on
 * 127.0.0.1, picked by two bits: FUZZ_SRV_SECRET (the job's secret,
 * FUZZ_SECRET) and FUZZ_SRV_ZERO (server 0 of the 2-server job, where
 * clients create tables with RDPS_TABLE_ANY_ID; else server 1). The server
 * 0 without a secret runs with allow_unauthenticated (peers from elsewhere
 * are served, but are not admins); the server 1 without one is in protected
 * mode. Each holds the same tables (its half of their rows):
 *
 *   0 "entity"         64 x 4 float32, Adagrad
 *   1 "relation"        8 x 3 float32, SGD (odd dim: pushes carry padding)
 *   2 graph:indptr     int64 x 2 per in-slot   } a small graph as rdps server
 *   3 graph:edges      int64 x 4 per edge      } --graph serves one (read-only,
 *   4 graph:outptr     int64 x 2 per out-slot  } rdps/graph.h; fuzz_graph_*)
 *   5 graph:outedges   int64 x 3 per out-edge
 *   6 "edata:prob"     float32 per edge (weights)
 *   7 "edata:w64"      float64 per edge
 *   8 "ndata:feat"     float32 x 3
 *   9 "ndata:label"    int64 x 1
 *  10 "ndata:mask"     uint8 x 1
 *
 * so every request type reaches real code: TABLE (create, lookup, drop,
 * set_optimizer against a table budget), SET, SAMPLE (graph_sample.c over
 * the graph), observers' STATS/SHUTDOWN/CHECKPOINT (admin or not), and
 * CHECKPOINT: server 0 with the secret (FUZZ_CKPT_SERVER) writes them into
 * a directory of its own, with the writer thread (tens of ms an input: the
 * others refuse them at once, so most inputs stay fast). The budgets are
 * small (FUZZ_*_BUDGET), so inputs reach their limits.
 *
 * A peer "from elsewhere" is modelled: the fuzz build links with
 * -Wl,--wrap=rdps_sock_is_same_host, and connections the harness makes from
 * 127.0.0.2 (fuzz_conn_open with remote) count as not loopback.
 *
 * Between inputs (fuzz_input_end) the harness puts the servers back: it
 * drops the tables clients made and restores the configured optimizers
 * (over the wire, as a client), so an input's result does not depend on
 * the ones before it.
 */
#ifndef RDPS_FUZZ_SERVER_H
#define RDPS_FUZZ_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "rdps/server.h"
#include "transport/wire.h"

#define FUZZ_SRV_SECRET 1u
#define FUZZ_SRV_ZERO 2u
#define FUZZ_NUM_SERVERS 4
#define FUZZ_CKPT_SERVER (FUZZ_SRV_SECRET | FUZZ_SRV_ZERO) /* the one with checkpoints */

/* The config's tables (above) and their slots. */
#define FUZZ_T_ENTITY 0
#define FUZZ_T_RELATION 1
#define FUZZ_T_INDPTR 2
#define FUZZ_T_EDGES 3
#define FUZZ_T_OUTPTR 4
#define FUZZ_T_OUTEDGES 5
#define FUZZ_T_PROB 6
#define FUZZ_T_W64 7
#define FUZZ_T_FEAT 8
#define FUZZ_T_LABEL 9
#define FUZZ_T_MASK 10
#define FUZZ_NUM_TABLES 11

/* The graph: one node type and one edge type, so a slot is a node. Nodes
 * [0, 20) are server 0's, [20, 40) server 1's; node v has
 * fuzz_graph_degree(v) in-edges, their ids part after part, node after
 * node, and edge e comes from fuzz_graph_src(e) (its out-edges are held
 * by the source's part, by edge id). One node per part has more in-edges
 * than the largest fanout. The last node of each part is damaged: its
 * in-edge offsets point past the part's edges (the server answers -EIO, "a
 * corrupt graph part"). Edge weights: edata:prob (float32) and edata:w64
 * (float64), fuzz_graph_weight(e), zero for some edges. */
#define FUZZ_GRAPH_NODES 40
#define FUZZ_GRAPH_ETYPES 3
#define FUZZ_GRAPH_BIG_NODE(part) ((part) * 20u + 7u)
uint32_t fuzz_graph_degree(uint32_t v);
uint64_t fuzz_graph_src(uint64_t e);
uint32_t fuzz_graph_dst(uint64_t e);
float fuzz_graph_weight(uint64_t e);
/* Slot v's edges: in-edge ids [*begin, *end), or out-edge positions
 * (fuzz_graph_out_edge gives a position's edge id). */
void fuzz_graph_slot_edges(uint32_t v, bool out, uint64_t *begin, uint64_t *end);
uint64_t fuzz_graph_out_edge(uint64_t pos);
/* The edges [*lo, *hi) server part holds (in-edges: by destination). */
void fuzz_graph_edge_range(uint32_t part, uint64_t *lo, uint64_t *hi);
uint64_t fuzz_graph_num_edges(void);

/* Budgets of the fuzzed servers (struct rdps_server_config). */
#define FUZZ_TABLE_BUDGET (4u << 20)
#define FUZZ_REPLY_BUDGET (512u << 10)
#define FUZZ_REQUEST_BUDGET (512u << 10)

struct fuzz_server {
	struct rdps_ipconfig ipc;
	struct rdps_server *srv;
	uint16_t port;
	uint32_t id;          /* server id in the 2-server job */
	bool secret;
	bool allow_unauth;
	char ckpt_dir[300];   /* FUZZ_CKPT_SERVER's; empty for the others */
};

extern struct fuzz_server fuzz_servers[FUZZ_NUM_SERVERS];

/* Bytes a TCP socket sent (each once) and received in order, from the
 * kernel (TCP_INFO): -1 unless it is established. */
int fuzz_tcp_bytes(int fd, uint64_t *sent, uint64_t *received);

/* Starts the four servers (aborts if one cannot start). */
void fuzz_servers_start(void);
/* Fills in what each server is (id, secret, ...) without starting it: for
 * the seed generator. */
void fuzz_servers_describe(void);

/* One client connection of the harness and what the server sent on it. */
struct fuzz_conn {
	int fd;               /* -1: not open */
	int server_fd;        /* the server's end (same process), -1: not known yet */
	struct sockaddr_in local; /* this end's address, the server end's peer */
	uint8_t *out;         /* bytes received from the server */
	size_t len, cap;
	bool eof;             /* the server closed the connection */
	bool reset;           /* ... with a reset (what it had not sent is lost) */
	bool remote;          /* made from 127.0.0.2: a peer from elsewhere */
	bool reading;         /* false: the client leaves its replies unread */
	bool settled;         /* everything the server sent was read (fuzz_settle) */
	bool observer_known;  /* the harness knows whether its hello observes: */
	bool observer;        /* then the oracle checks what an observer gets */
};

/* Opens c to fs (from 127.0.0.2 if remote). A connection that does not
 * read offers a small receive window (TCP_WINDOW_CLAMP), so the server's
 * replies pile up in its own buffers (and budget) soon. */
void fuzz_conn_open(struct fuzz_conn *c, const struct fuzz_server *fs, bool remote,
		    bool reading);
/* The client closes c (a reset: no TIME_WAIT) and the harness waits until
 * the server closed its end (so the job knows the client left); what c
 * received stays for the oracle. conns (nconns) are pumped meanwhile. */
void fuzz_conn_shut(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		    struct fuzz_conn *c);
/* Frees what c received (after fuzz_conn_shut, or closes it first). */
void fuzz_conn_close(struct fuzz_conn *c);
/* Reads what the server sent so far (if c reads); true if anything came. */
bool fuzz_conn_drain(struct fuzz_conn *c);

/* The input in progress: call begin before anything is sent, end after
 * every connection was closed and checked. */
void fuzz_input_begin(struct fuzz_server *fs);
void fuzz_input_end(struct fuzz_server *fs);

/* Scans a whole stream (or frame) before it is sent for the frames that
 * let the servers hold more than the budgets: hellos (the job's state is
 * bounded by its num_clients, not by a budget), table requests (the table
 * budget), checkpoints (the writer's buffers; and fuzz_settle waits for
 * its thread). */
void fuzz_scan_requests(const uint8_t *p, size_t len);

/* Whether the stream starts with a hello that observes: 1, 0, or -1 if it
 * does not start with a hello (the server then admits nothing). */
int fuzz_stream_observer(const uint8_t *p, size_t len);

/* Polls fs and drains the connections until nothing moves and no byte is
 * in flight between the ends (loopback segments are delivered by softirqs,
 * which a loaded machine defers: a byte sent is not yet readable); checks
 * the server's memory against its budgets (fuzz_input_begin's baseline). */
void fuzz_pump(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns);

/* Sends len bytes on c in chunks (0: as much as the socket takes), pumping
 * after each. If the server takes nothing more while clients leave
 * replies unread, they start reading (the server may wait for the room
 * their replies hold); if it takes nothing while every client reads, that
 * is a finding (a server that stopped serving). Returns the bytes sent
 * (fewer if the server closed the connection). */
size_t fuzz_send(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		 struct fuzz_conn *c, const uint8_t *p, size_t len, size_t chunk);

/* Lets everything finish: every client reads, checkpoints being written
 * end (their replies come), and nothing moves any more. */
void fuzz_settle(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns);

/* What the oracle saw on one connection. */
struct fuzz_stream_info {
	bool welcomed;        /* admitted: a welcome came */
	uint32_t welcome_tables;
};

/*
 * The oracle of everything fs sent on c: only complete, well-formed frames
 * (magic, version, flags 0, length within the limit; the stream ends at a
 * frame boundary unless the server reset the connection); a challenge only from a server with a secret, once, 32
 * bytes, before any welcome; at most one welcome, after the challenge when
 * the server has a secret, valid for the client's own parser, flagged
 * authenticated exactly then, listing the server's own tables first, with
 * no address or rkey; never to a peer from elsewhere at a server in
 * protected mode; no success reply before it (nothing leaves before the
 * handshake); errors with a negative status and a NUL-padded reason of
 * 8..RDPS_WIRE_ERRMSG_MAX bytes; success replies of a request kind with
 * its rule (fuzz_check_reply). Calls each_reply (if not NULL) for every
 * reply after the handshake, in order.
 */
typedef void (*fuzz_reply_fn)(void *ctx, const struct rdps_wire_hdr *h, const uint8_t *payload);
void fuzz_check_stream(const struct fuzz_server *fs, const struct fuzz_conn *c,
		       fuzz_reply_fn each_reply, void *ctx, struct fuzz_stream_info *info);

/*
 * The rule a success reply of request kind type follows (every enum
 * rdps_req_type has one: fuzz_server.c's switch has no default and the
 * fuzz build makes -Wswitch an error, so a new kind does not build here
 * until it has one): the size and layout of its payload as the server
 * builds it. Aborts on a payload that breaks it, or on a success reply of
 * a kind that never succeeds over TCP.
 */
void fuzz_check_reply(const struct fuzz_server *fs, uint8_t type, const uint8_t *payload,
		      uint32_t len);

/* A sample reply of fs to request req (req_len bytes), exactly: the
 * request well-formed, each slot one of this server's, its count what the
 * model of the graph says (fanout, or min(eligible edges, fanout) without
 * replacement; never an excluded edge or one of weight 0), its edges
 * (other node, edge id, type) the ones rdps_sample_pick picks from (seed,
 * slot, direction) with the model's weights and exclusions, in increasing
 * position. */
void fuzz_check_sample(const struct fuzz_server *fs, const uint8_t *payload, uint32_t len,
		       const uint8_t *req, uint32_t req_len);

/* The handshake frames a client sends to fs (hello, and with a secret the
 * AUTH its deterministic challenge asks for; bad_mac flips a bit of it),
 * appended to *buf (realloc'd, *len bytes). */
void fuzz_handshake_bytes(const struct fuzz_server *fs, const struct rdps_wire_hello *h,
			  bool bad_mac, uint8_t **buf, size_t *len);
/* A hello to server server_id (nonce 0x11...). */
struct rdps_wire_hello fuzz_hello(uint32_t server_id, uint32_t client, uint32_t nclients,
				  uint32_t flags);
/* Appends one frame (header of type and len, then payload) to *buf. */
void fuzz_frame_bytes(uint8_t type, const void *payload, uint32_t len, uint8_t **buf,
		      size_t *blen);

#endif
