// SPDX-License-Identifier: MIT
/* The fuzzed servers, the harness's connections and the reply oracle; see
 * fuzz_server.h. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sanitizer/allocator_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "fuzz_server.h"
#include "kvstore/graph_sample.h"
#include "rdps/common.h"
#include "rdps/graph.h"

#define MAX_PUMP_ROUNDS 100000 /* a server that never settles is a finding */
#define FLIGHT_MS 60000        /* bytes in flight on loopback this long: a finding */
#define STUCK_ROUNDS 2000      /* sends that move nothing before the harness gives up */
#define SETTLE_MS 60000        /* a checkpoint thread still running after this: a finding */
#define SLOW_WINDOW 4096       /* receive window of a client that does not read */
/* Memory the servers may hold besides the budgets: per connection its two
 * buffers' first TCP_BUF_OWN (64 KiB each, outside the budgets) and its
 * struct; a checkpoint's two streaming writers (4 x 2 MiB each) and counts;
 * the job's state (per client of the job: state, token, allreduce vector);
 * small things (welcomes being built, inbox items, error texts). */
#define CONN_BYTES ((size_t)(2 * (64u << 10) + 8192))
#define CKPT_BYTES ((size_t)(2 * 4 * (2u << 20) + (1u << 20)))
#define JOB_BYTES_PER_CLIENT ((size_t)(1 + 8 + 8 * RDPS_ALLREDUCE_MAX + 8))
#define MISC_BYTES ((size_t)(256u << 10))

struct fuzz_server fuzz_servers[FUZZ_NUM_SERVERS];
static struct rdps_secret secret;

/* ---------------------------------------------------------------------- */
/* The graph                                                               */

static uint64_t graph_first[FUZZ_GRAPH_NODES + 1]; /* in-edges of v: [first[v], first[v+1]) */
static uint32_t *graph_dst;                        /* per edge: its destination */
static uint64_t out_first[FUZZ_GRAPH_NODES + 1];   /* out-edges of u: positions */
static uint64_t *out_eid;                          /* per out position: the edge */

uint32_t fuzz_graph_degree(uint32_t v)
{
	if (v == FUZZ_GRAPH_BIG_NODE(v / 20))
		return RDPS_SAMPLE_MAX_FANOUT + 76; /* more than the largest fanout */
	return v % 6;
}

uint64_t fuzz_graph_src(uint64_t e)
{
	return (e * 7 + 3) % FUZZ_GRAPH_NODES;
}

float fuzz_graph_weight(uint64_t e)
{
	return e % 4 == 1 ? 0.0f : (float)(e % 5 + 1) * 0.5f; /* some never picked */
}

static void graph_build(void)
{
	uint64_t e = 0, ne;

	if (graph_dst)
		return;
	for (uint32_t v = 0; v < FUZZ_GRAPH_NODES; v++) {
		graph_first[v] = e;
		e += fuzz_graph_degree(v);
	}
	graph_first[FUZZ_GRAPH_NODES] = ne = e;
	graph_dst = malloc(ne * sizeof(*graph_dst));
	out_eid = malloc(ne * sizeof(*out_eid));
	FUZZ_CHECK(graph_dst && out_eid);
	for (uint32_t v = 0; v < FUZZ_GRAPH_NODES; v++)
		for (uint64_t i = graph_first[v]; i < graph_first[v + 1]; i++)
			graph_dst[i] = v;
	/* Out-edges: source after source (part after part), each's by edge id. */
	e = 0;
	for (uint32_t u = 0; u < FUZZ_GRAPH_NODES; u++) {
		out_first[u] = e;
		for (uint64_t i = 0; i < ne; i++)
			if (fuzz_graph_src(i) == u)
				out_eid[e++] = i;
	}
	out_first[FUZZ_GRAPH_NODES] = e;
}

void fuzz_graph_slot_edges(uint32_t v, bool out, uint64_t *begin, uint64_t *end)
{
	graph_build();
	*begin = out ? out_first[v] : graph_first[v];
	*end = out ? out_first[v + 1] : graph_first[v + 1];
}

uint64_t fuzz_graph_out_edge(uint64_t pos)
{
	graph_build();
	return out_eid[pos];
}

uint64_t fuzz_graph_num_edges(void)
{
	graph_build();
	return graph_first[FUZZ_GRAPH_NODES];
}

uint32_t fuzz_graph_dst(uint64_t e)
{
	graph_build();
	return graph_dst[e];
}

void fuzz_graph_edge_range(uint32_t part, uint64_t *lo, uint64_t *hi)
{
	graph_build();
	*lo = graph_first[part * 20];
	*hi = graph_first[part * 20 + 20];
}

/* This part's rows of the graph's tables, as rdps_graph_part_tables lays
 * them out for a graph of one node and one edge type (rdps/graph.h: a slot
 * is a node). */
struct graph_rows {
	uint64_t node_off[3], edge_off[3], out_off[3];
	int64_t inptr[20 * 2], outptr[20 * 2];
	int64_t *edges, *outedges;
	float *prob;
	double *w64;
	float feat[20 * 3];
	int64_t label[20];
	uint8_t mask[20];
};

static void graph_rows(uint32_t part, struct graph_rows *g)
{
	uint64_t lo, hi, olo = out_first[part * 20], ohi = out_first[part * 20 + 20];

	fuzz_graph_edge_range(part, &lo, &hi);
	for (int i = 0; i < 3; i++) {
		g->node_off[i] = (uint64_t)i * 20;
		g->edge_off[i] = graph_first[i * 20];
		g->out_off[i] = out_first[i * 20];
	}
	g->edges = calloc(hi - lo + 1, 4 * sizeof(int64_t));
	g->prob = calloc(hi - lo + 1, sizeof(float));
	g->w64 = calloc(hi - lo + 1, sizeof(double));
	g->outedges = calloc(ohi - olo + 1, 3 * sizeof(int64_t));
	FUZZ_CHECK(g->edges && g->prob && g->w64 && g->outedges);
	for (uint32_t i = 0; i < 20; i++) {
		uint32_t v = part * 20 + i;

		g->inptr[2 * i] = (int64_t)graph_first[v];
		g->inptr[2 * i + 1] = (int64_t)graph_first[v + 1];
		if (i == 19) {
			/* damaged: past the part's edges */
			g->inptr[2 * i] = (int64_t)hi;
			g->inptr[2 * i + 1] = (int64_t)hi + 2;
		}
		g->outptr[2 * i] = (int64_t)out_first[v];
		g->outptr[2 * i + 1] = (int64_t)out_first[v + 1];
		for (int k = 0; k < 3; k++)
			g->feat[3 * i + k] = (float)v + 0.25f * (float)k;
		g->label[i] = v % 5;
		g->mask[i] = (uint8_t)(v % 3 == 0);
	}
	for (uint64_t e = lo; e < hi; e++) {
		int64_t *r = g->edges + 4 * (e - lo);

		r[0] = (int64_t)fuzz_graph_src(e);
		r[1] = graph_dst[e];
		r[2] = (int64_t)(e % FUZZ_GRAPH_ETYPES);
		r[3] = (int64_t)e;
		g->prob[e - lo] = fuzz_graph_weight(e);
		g->w64[e - lo] = fuzz_graph_weight(e);
	}
	for (uint64_t q = olo; q < ohi; q++) {
		int64_t *r = g->outedges + 3 * (q - olo);
		uint64_t e = out_eid[q];

		r[0] = graph_dst[e];
		r[1] = (int64_t)e;
		r[2] = (int64_t)(e % FUZZ_GRAPH_ETYPES);
	}
}

static void ro_table(struct rdps_server_table_config *t, const char *name, uint64_t rows,
		     const uint64_t *off, int dtype, uint32_t elems, const void *data)
{
	*t = (struct rdps_server_table_config){
		.num_rows = rows, .offsets = off, .dtype = dtype, .elems = elems,
		.dim = (uint32_t)rdps_dtype_row_words(dtype, elems), .init = RDPS_INIT_ZEROS,
		.optimizer = RDPS_OPT_NONE, .rows = data, .read_only = true,
	};
	snprintf(t->name, sizeof(t->name), "%s", name);
}

/* ---------------------------------------------------------------------- */
/* The servers                                                             */

/* The config tables' optimizer settings as the server made them: an input
 * that changes them is undone (fuzz_input_end). */
static struct rdps_shard_info config_info[FUZZ_NUM_SERVERS][FUZZ_NUM_TABLES];

/* A port the kernel just handed out (the server binds it right after). */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(!bind(fd, (struct sockaddr *)&a, sizeof(a)));
	FUZZ_CHECK(!getsockname(fd, (struct sockaddr *)&a, &al));
	close(fd);
	return ntohs(a.sin_port);
}

static void start_server(int idx)
{
	struct fuzz_server *fs = &fuzz_servers[idx];
	struct rdps_server_config cfg = {
		.transport = "tcp", .num_tables = FUZZ_NUM_TABLES, .seed = 1,
		.tables = {
			{ .name = "entity", .num_rows = 64, .dim = 4, .init = RDPS_INIT_UNIFORM,
			  .init_range = 0.1f, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.1f },
			{ .name = "relation", .num_rows = 8, .dim = 3, .init = RDPS_INIT_ZEROS,
			  .optimizer = RDPS_OPT_SGD, .lr = 0.1f },
		},
		.max_table_memory = FUZZ_TABLE_BUDGET,
		.max_reply_buffer = FUZZ_REPLY_BUDGET,
		.max_request_buffer = FUZZ_REQUEST_BUDGET,
		/* Nothing may depend on time: no deadline passes in a run. */
		.handshake_timeout_ms = 3600 * 1000,
		.reply_stall_ms = 3600 * 1000,
	};
	static struct graph_rows g[2];
	const char *work = fuzz_workdir();
	char text[128], err[512];
	int ret;

	FUZZ_CHECK(work != NULL);
	graph_build();
	if (!g[fs->id].edges)
		graph_rows(fs->id, &g[fs->id]);
	{
		const struct graph_rows *gr = &g[fs->id];
		uint64_t ne = graph_first[FUZZ_GRAPH_NODES], no = out_first[FUZZ_GRAPH_NODES];

		ro_table(&cfg.tables[FUZZ_T_INDPTR], RDPS_GRAPH_INDPTR, FUZZ_GRAPH_NODES,
			 gr->node_off, RDPS_DTYPE_I64, 2, gr->inptr);
		ro_table(&cfg.tables[FUZZ_T_EDGES], RDPS_GRAPH_EDGES, ne, gr->edge_off,
			 RDPS_DTYPE_I64, 4, gr->edges);
		ro_table(&cfg.tables[FUZZ_T_OUTPTR], RDPS_GRAPH_OUTPTR, FUZZ_GRAPH_NODES,
			 gr->node_off, RDPS_DTYPE_I64, 2, gr->outptr);
		ro_table(&cfg.tables[FUZZ_T_OUTEDGES], RDPS_GRAPH_OUTEDGES, no, gr->out_off,
			 RDPS_DTYPE_I64, 3, gr->outedges);
		ro_table(&cfg.tables[FUZZ_T_PROB], RDPS_GRAPH_EDATA_PREFIX "prob", ne,
			 gr->edge_off, RDPS_DTYPE_F32, 1, gr->prob);
		ro_table(&cfg.tables[FUZZ_T_W64], RDPS_GRAPH_EDATA_PREFIX "w64", ne,
			 gr->edge_off, RDPS_DTYPE_F64, 1, gr->w64);
		ro_table(&cfg.tables[FUZZ_T_FEAT], RDPS_GRAPH_NDATA_PREFIX "feat",
			 FUZZ_GRAPH_NODES, gr->node_off, RDPS_DTYPE_F32, 3, gr->feat);
		ro_table(&cfg.tables[FUZZ_T_LABEL], RDPS_GRAPH_NDATA_PREFIX "label",
			 FUZZ_GRAPH_NODES, gr->node_off, RDPS_DTYPE_I64, 1, gr->label);
		ro_table(&cfg.tables[FUZZ_T_MASK], RDPS_GRAPH_NDATA_PREFIX "mask",
			 FUZZ_GRAPH_NODES, gr->node_off, RDPS_DTYPE_U8, 1, gr->mask);
	}
	if (idx == FUZZ_CKPT_SERVER) {
		snprintf(fs->ckpt_dir, sizeof(fs->ckpt_dir), "%s/ckpt-%d", work, idx);
		FUZZ_CHECK(!mkdir(fs->ckpt_dir, 0700) || errno == EEXIST);
		cfg.checkpoint_dir = fs->ckpt_dir;
	}
	cfg.secret = fs->secret ? &secret : NULL;
	cfg.allow_unauthenticated = fs->allow_unauth;
	for (int attempt = 0;; attempt++) {
		fs->port = free_port();
		/* The other server of the job is never started. */
		if (fs->id)
			snprintf(text, sizeof(text), "127.0.0.1 1\n127.0.0.1 %u\n", fs->port);
		else
			snprintf(text, sizeof(text), "127.0.0.1 %u\n127.0.0.1 1\n", fs->port);
		FUZZ_CHECK(!rdps_ipconfig_parse("fuzz", text, &fs->ipc, err, sizeof(err)));
		cfg.ipc = &fs->ipc;
		cfg.server_id = fs->id;
		ret = rdps_server_create(&cfg, &fs->srv, err, sizeof(err));
		if (!ret)
			break;
		rdps_ipconfig_free(&fs->ipc);
		if (ret != -EADDRINUSE || attempt == 10) {
			fprintf(stderr, "fuzz: cannot start a server: %s\n", err);
			abort();
		}
	}
	for (uint32_t t = 0; t < FUZZ_NUM_TABLES; t++)
		rdps_shard_info(rdps_server_shard(fs->srv, t), &config_info[idx][t]);
}

void fuzz_servers_describe(void)
{
	for (int i = 0; i < FUZZ_NUM_SERVERS; i++) {
		struct fuzz_server *fs = &fuzz_servers[i];

		fs->secret = i & FUZZ_SRV_SECRET;
		fs->id = i & FUZZ_SRV_ZERO ? 0 : 1;
		fs->allow_unauth = !fs->secret && fs->id == 0;
	}
}

void fuzz_servers_start(void)
{
	fuzz_secret(&secret);
	fuzz_servers_describe();
	for (int i = 0; i < FUZZ_NUM_SERVERS; i++)
		start_server(i);
}

/* ---------------------------------------------------------------------- */
/* Memory: what the servers hold, against the budgets                       */

static struct {
	struct fuzz_server *fs;
	size_t heap0;           /* allocated bytes when the input began */
	size_t harness;         /* bytes the harness holds (received replies) */
	size_t peak;            /* the most the servers held past heap0 */
	uint32_t conns;         /* connections opened during the input */
	uint32_t job_clients;   /* the largest job a hello asked for */
	bool tables, ckpt;      /* table or checkpoint requests were sent */
	int threads0;           /* threads before its first checkpoint request */
} in;

static size_t heap_now(void)
{
	return __sanitizer_get_current_allocated_bytes();
}

/* The process's threads, less io_uring's workers (they come and go with
 * the kernel's io-wq): the checkpoint thread is the only other one a
 * request starts. */
static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	FUZZ_CHECK(d != NULL);
	while ((e = readdir(d))) {
		char path[128], comm[32] = "";
		int fd;
		ssize_t r;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone meanwhile */
		r = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (r > 0 && !strncmp(comm, "iou-", 4))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

void fuzz_input_begin(struct fuzz_server *fs)
{
	memset(&in, 0, sizeof(in));
	in.fs = fs;
	in.heap0 = heap_now();
}

static void note_job(uint32_t num_clients)
{
	if (num_clients > in.job_clients)
		in.job_clients = num_clients;
}

void fuzz_scan_requests(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + sizeof(struct rdps_wire_hdr) <= len; i++) {
		struct rdps_wire_hdr h;

		if (p[i] != 'R')
			continue;
		memcpy(&h, p + i, sizeof(h));
		if (h.magic != RDPS_WIRE_MAGIC || h.version != RDPS_WIRE_VERSION)
			continue;
		if (h.type == RDPS_REQ_TABLE)
			in.tables = true;
		if (h.type == RDPS_REQ_CHECKPOINT && !in.ckpt) {
			/* None runs yet: the input before waited for its own. */
			in.ckpt = true;
			in.threads0 = count_threads();
		}
		if (h.type == RDPS_REQ_HELLO && h.len == sizeof(struct rdps_wire_hello) &&
		    i + sizeof(h) + h.len <= len) {
			struct rdps_wire_hello hello;

			memcpy(&hello, p + i + sizeof(h), sizeof(hello));
			note_job(hello.num_clients);
		}
	}
}

/* The servers' memory past the input's start, against what the budgets
 * and the bounded structures allow. */
static void check_memory(void)
{
	size_t held = heap_now(), bound;

	held = held > in.heap0 + in.harness ? held - in.heap0 - in.harness : 0;
	if (held > in.peak)
		in.peak = held;
	bound = FUZZ_REPLY_BUDGET + FUZZ_REQUEST_BUDGET + (size_t)(in.conns + 1) * CONN_BYTES +
		(size_t)in.job_clients * JOB_BYTES_PER_CLIENT + MISC_BYTES;
	if (in.tables)
		bound += FUZZ_TABLE_BUDGET;
	if (in.ckpt)
		bound += CKPT_BYTES + (size_t)in.job_clients * 8;
	if (held > bound) {
		fprintf(stderr, "fuzz: the servers hold %zu bytes more than when the input began, "
			"over the %zu the budgets and bounded state allow (%u connections, a job "
			"of %u clients%s%s)\n", held, bound, in.conns, in.job_clients,
			in.tables ? ", tables made" : "", in.ckpt ? ", checkpoints" : "");
		FUZZ_CHECK(!"server memory past its budgets");
	}
}

/* ---------------------------------------------------------------------- */
/* Connections                                                             */

void fuzz_conn_open(struct fuzz_conn *c, const struct fuzz_server *fs, bool remote,
		    bool reading)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(fs->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in from = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002) };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct pollfd pfd = { .events = POLLOUT };
	socklen_t sl = sizeof(int);
	int soerr = 0, clamp = SLOW_WINDOW, one = 1;

	memset(c, 0, sizeof(*c));
	c->remote = remote;
	c->reading = reading;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FUZZ_CHECK(c->fd >= 0);
	if (remote)
		FUZZ_CHECK(!bind(c->fd, (struct sockaddr *)&from, sizeof(from)));
	/* Before the connect, so the window it offers stays small. A clamp
	 * of the window, not a small buffer: segments a small buffer cannot
	 * take are dropped, and resent only after backed-off timeouts (seconds)
	 * once the client reads. */
	if (!reading)
		FUZZ_CHECK(!setsockopt(c->fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &clamp, sizeof(clamp)));
	/* The backlog completes the connection before the server accepts.
	 * Nonblocking, so libFuzzer's SIGALRM cannot interrupt it half-way. */
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)))
		FUZZ_CHECK(errno == EINPROGRESS || errno == EINTR);
	pfd.fd = c->fd;
	while (poll(&pfd, 1, 5000) < 0)
		FUZZ_CHECK(errno == EINTR);
	FUZZ_CHECK(pfd.revents & POLLOUT);
	FUZZ_CHECK(!getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) && !soerr);
	/* Close with a reset: no TIME_WAIT, so ports never run out. */
	FUZZ_CHECK(!setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	/* As rdps clients: a small frame after one the server has not
	 * answered (a deferred collective) goes out at once, not after the
	 * server's delayed ACK. */
	FUZZ_CHECK(!setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
	sl = sizeof(c->local);
	FUZZ_CHECK(!getsockname(c->fd, (struct sockaddr *)&c->local, &sl));
	c->server_fd = -1;
	in.conns++;
}

/* Whether fd is a socket whose peer is a. */
static bool peer_is(int fd, const struct sockaddr_in *a)
{
	struct sockaddr_in p;
	socklen_t pl = sizeof(p);

	return !getpeername(fd, (struct sockaddr *)&p, &pl) && p.sin_family == AF_INET &&
	       p.sin_port == a->sin_port && p.sin_addr.s_addr == a->sin_addr.s_addr;
}

/* The server's end of c: the descriptor of this process whose peer is c's
 * end (accept() hands out the lowest free numbers: near c's own). -1 while
 * the server has not accepted it (or closed it). */
static int server_end(struct fuzz_conn *c)
{
	if (c->server_fd >= 0 && peer_is(c->server_fd, &c->local))
		return c->server_fd;
	c->server_fd = -1;
	for (int fd = 3; fd < c->fd + 256; fd++) {
		if (fd != c->fd && peer_is(fd, &c->local)) {
			c->server_fd = fd;
			break;
		}
	}
	return c->server_fd;
}

/* Bytes fd sent that its peer has not taken in yet (in flight on the
 * loopback). Bytes not sent for want of the peer's window are not: a peer
 * that does not read stops them for good. */
static int unacked(int fd)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	int outq = 0, unsent = 0;

	/* A connection its peer reset keeps its counts, but nothing flies. */
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) ||
	    ti.tcpi_state != TCP_ESTABLISHED)
		return 0;
	if (ioctl(fd, SIOCOUTQ, &outq) || ioctl(fd, SIOCOUTQNSD, &unsent))
		return 0;
	return outq > unsent ? outq - unsent : 0;
}

/* Bytes fd sent that its peer, peer_fd (the other end, in this process),
 * has not received yet: in flight on the loopback. From the two ends' byte
 * counts, not from ACKs: a receiver delays its ACKs (40 ms and more), and
 * bytes it holds are not in flight; waiting for the ACK of every reply
 * made an input of 70 requests take 5 s. Without the peer's end (not
 * accepted yet), the bytes not acked. */
static uint64_t in_flight_bytes(int fd, int peer_fd)
{
	uint64_t sent, received, peer_sent, peer_received;

	if (fuzz_tcp_bytes(fd, &sent, &received))
		return 0; /* reset, closed: nothing flies */
	if (fuzz_tcp_bytes(peer_fd, &peer_sent, &peer_received))
		return (uint64_t)unacked(fd);
	return sent > peer_received ? sent - peer_received : 0;
}

static bool in_flight(struct fuzz_conn *conns, int nconns)
{
	for (int i = 0; i < nconns; i++) {
		struct fuzz_conn *c = &conns[i];

		if (c->fd < 0 || c->eof)
			continue;
		/* Replies to a client that does not read stay where they
		 * are: only a reader's are waited for. */
		if (in_flight_bytes(c->fd, server_end(c)) ||
		    (c->reading && in_flight_bytes(server_end(c), c->fd)))
			return true;
	}
	return false;
}

static bool pump_moved(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		       int timeout_ms);

void fuzz_conn_shut(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		    struct fuzz_conn *c)
{
	uint64_t t0 = rdps_now_ns();
	int sfd;

	if (c->fd < 0)
		return;
	/* The server's end, once it accepted (unless it closed it already). */
	while ((sfd = server_end(c)) < 0 && !c->eof) {
		FUZZ_CHECK(rdps_now_ns() - t0 < (uint64_t)FLIGHT_MS * 1000000ull);
		pump_moved(fs, conns, nconns, 1);
		c->reading = true;
		fuzz_conn_drain(c);
	}
	close(c->fd);
	c->fd = -1;
	/* Until the server saw the reset and closed its end. */
	while (sfd >= 0 && peer_is(sfd, &c->local)) {
		FUZZ_CHECK(rdps_now_ns() - t0 < (uint64_t)FLIGHT_MS * 1000000ull);
		pump_moved(fs, conns, nconns, 1);
	}
	fuzz_pump(fs, conns, nconns);
}

void fuzz_conn_close(struct fuzz_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	in.harness -= c->cap;
	free(c->out);
	c->out = NULL;
	c->len = c->cap = 0;
}

/* Whether the peer of fd reset the connection: it is closed, not half
 * closed (a FIN leaves it in CLOSE_WAIT). A read may report a reset as
 * the end of the stream (the kernel marks a reset socket done), and a
 * send may have taken its error first. */
static bool closed_by_reset(int fd)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);

	return !getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) && ti.tcpi_state == TCP_CLOSE;
}

bool fuzz_conn_drain(struct fuzz_conn *c)
{
	bool got = false;

	while (c->fd >= 0 && !c->eof && c->reading) {
		ssize_t n;

		if (c->cap - c->len < 65536) {
			size_t ncap = c->cap ? 2 * c->cap : 1 << 17;

			c->out = realloc(c->out, ncap);
			FUZZ_CHECK(c->out != NULL);
			in.harness += ncap - c->cap;
			c->cap = ncap;
		}
		n = recv(c->fd, c->out + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n > 0) {
			c->len += (size_t)n;
			got = true;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->eof = true; /* closed (FIN or reset) by the server */
			c->reset |= n < 0 || closed_by_reset(c->fd);
			got = true;
		} else if (errno == EAGAIN) {
			break;
		}
	}
	return got;
}

static bool pump_moved(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		       int timeout_ms)
{
	uint64_t waited_since = 0;
	bool any = false;

	for (int round = 0, busy = 0;; round++) {
		bool moved = false;
		int n = rdps_server_poll(fs->srv, round ? 0 : timeout_ms);

		FUZZ_CHECK(n >= 0);
		for (int i = 0; i < nconns; i++)
			moved |= fuzz_conn_drain(&conns[i]);
		check_memory();
		if (n || moved) {
			any = true;
			waited_since = 0;
			/* Rounds with events: a server that never settles. */
			FUZZ_CHECK(++busy < MAX_PUMP_ROUNDS);
			continue;
		}
		if (!in_flight(conns, nconns))
			return any;
		/* Segments the kernel has not delivered yet: wait for them. */
		if (!waited_since)
			waited_since = rdps_now_ns();
		FUZZ_CHECK(rdps_now_ns() - waited_since < (uint64_t)FLIGHT_MS * 1000000ull);
		usleep(200);
	}
}

void fuzz_pump(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns)
{
	pump_moved(fs, conns, nconns, 0);
}

/* Every client reads from now on; true if one did not. */
static bool all_read(struct fuzz_conn *conns, int nconns)
{
	bool changed = false;

	for (int i = 0; i < nconns; i++) {
		changed |= !conns[i].reading;
		conns[i].reading = true;
	}
	return changed;
}

size_t fuzz_send(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns,
		 struct fuzz_conn *c, const uint8_t *p, size_t len, size_t chunk)
{
	size_t off = 0;
	int stuck = 0;

	for (int i = 0; i < nconns; i++)
		conns[i].settled = false;
	while (off < len && !c->eof && c->fd >= 0) {
		size_t want = chunk && chunk < len - off ? chunk : len - off;
		ssize_t n = send(c->fd, p + off, want, MSG_NOSIGNAL | MSG_DONTWAIT);
		bool moved;

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			/* Reset by the server. The send took the reset's
			 * error: the next read sees an end of stream. */
			c->reset |= errno == ECONNRESET;
			break;
		}
		if (n > 0)
			off += (size_t)n;
		moved = pump_moved(fs, conns, nconns, 0);
		if (n > 0 || moved) {
			stuck = 0;
			continue;
		}
		/* The server takes nothing more of this connection: it may
		 * wait for room that unread replies hold, or for a frame
		 * another connection left half-sent (a budget a client may
		 * hold for as long as it likes). */
		if (all_read(conns, nconns))
			continue;
		if (++stuck == STUCK_ROUNDS)
			break;
		pump_moved(fs, conns, nconns, 1);
	}
	fuzz_pump(fs, conns, nconns);
	return off;
}

void fuzz_settle(struct fuzz_server *fs, struct fuzz_conn *conns, int nconns)
{
	uint64_t t0 = rdps_now_ns();

	all_read(conns, nconns);
	fuzz_pump(fs, conns, nconns);
	/* A checkpoint is written by a thread of its own, which answers its
	 * requests when it is done. */
	while (in.ckpt && count_threads() > in.threads0) {
		if (rdps_now_ns() - t0 > (uint64_t)SETTLE_MS * 1000000ull)
			FUZZ_CHECK(!"a checkpoint thread still runs after 60 s");
		pump_moved(fs, conns, nconns, 5);
	}
	fuzz_pump(fs, conns, nconns);
	for (int i = 0; i < nconns; i++)
		conns[i].settled = true;
}

/* ---------------------------------------------------------------------- */
/* Frames the harness sends                                                */

void fuzz_frame_bytes(uint8_t type, const void *payload, uint32_t len, uint8_t **buf,
		      size_t *blen)
{
	struct rdps_wire_hdr h;

	*buf = realloc(*buf, *blen + sizeof(h) + len);
	FUZZ_CHECK(*buf != NULL);
	rdps_wire_hdr_init(&h, type, len, 0);
	memcpy(*buf + *blen, &h, sizeof(h));
	if (len)
		memcpy(*buf + *blen + sizeof(h), payload, len);
	*blen += sizeof(h) + len;
}

struct rdps_wire_hello fuzz_hello(uint32_t server_id, uint32_t client, uint32_t nclients,
				  uint32_t flags)
{
	struct rdps_wire_hello h = { .client_id = client, .num_clients = nclients,
				     .server_id = server_id, .flags = flags };

	memset(h.nonce, 0x11, sizeof(h.nonce));
	return h;
}

void fuzz_handshake_bytes(const struct fuzz_server *fs, const struct rdps_wire_hello *h,
			  bool bad_mac, uint8_t **buf, size_t *len)
{
	uint8_t snonce[RDPS_NONCE_LEN], mac[RDPS_MAC_LEN];
	struct rdps_secret s;

	fuzz_frame_bytes(RDPS_REQ_HELLO, h, sizeof(*h), buf, len);
	if (!fs->secret)
		return;
	fuzz_secret(&s);
	/* The server's challenge comes from the wrapped rdps_random_bytes. */
	for (size_t i = 0; i < sizeof(snonce); i++)
		snonce[i] = FUZZ_RANDOM_BYTE(i);
	rdps_auth_mac(&s, RDPS_AUTH_CLIENT_LABEL, snonce, sizeof(snonce), h->nonce,
		      sizeof(h->nonce), h, sizeof(*h), mac);
	if (bad_mac)
		mac[0] ^= 1;
	fuzz_frame_bytes(RDPS_WIRE_AUTH, mac, sizeof(mac), buf, len);
}

/* ---------------------------------------------------------------------- */
/* Between inputs                                                          */

static bool same_settings(const struct rdps_shard_info *a, const struct rdps_shard_info *b)
{
	return a->optimizer == b->optimizer && a->lr == b->lr && a->eps == b->eps &&
	       a->beta1 == b->beta1 && a->beta2 == b->beta2;
}

/* Drops the tables clients made and restores the config tables'
 * optimizers, as a client of a job of one would. */
static void restore_tables(struct fuzz_server *fs)
{
	const struct rdps_shard_info *orig = config_info[fs - fuzz_servers];
	struct rdps_wire_hello hello = fuzz_hello(fs->id, 0, 1, 0);
	uint8_t *buf = NULL;
	size_t len = 0, off = 0;
	struct fuzz_conn c;
	int want = 0, got = 0;

	for (uint32_t t = 0; t < RDPS_MAX_TABLES; t++) {
		struct rdps_shard *sh = rdps_server_shard(fs->srv, t);
		struct rdps_table_req tr = { 0 };
		struct rdps_shard_info si;

		if (!sh)
			continue;
		rdps_shard_info(sh, &si);
		if (t < FUZZ_NUM_TABLES && same_settings(&si, &orig[t]))
			continue;
		snprintf(tr.name, sizeof(tr.name), "%s", si.name);
		if (t < FUZZ_NUM_TABLES) {
			tr.op = RDPS_TABLE_SET_OPTIMIZER;
			tr.optimizer = (uint32_t)orig[t].optimizer;
			tr.lr = orig[t].lr;
			tr.eps = orig[t].eps;
			tr.beta1 = orig[t].beta1;
			tr.beta2 = orig[t].beta2;
		} else {
			tr.op = RDPS_TABLE_DROP;
		}
		if (!want)
			fuzz_handshake_bytes(fs, &hello, false, &buf, &len);
		fuzz_frame_bytes(RDPS_REQ_TABLE, &tr, sizeof(tr), &buf, &len);
		want++;
	}
	if (!want)
		return;
	fuzz_conn_open(&c, fs, false, true);
	FUZZ_CHECK(fuzz_send(fs, &c, 1, &c, buf, len, 0) == len);
	/* Every table request answered with success. */
	for (int spins = 0; got < want; spins++) {
		while (c.len - off >= sizeof(struct rdps_wire_hdr)) {
			struct rdps_wire_hdr h;

			memcpy(&h, c.out + off, sizeof(h));
			if (c.len - off - sizeof(h) < h.len)
				break;
			off += sizeof(h) + h.len;
			if (h.type == (RDPS_REQ_TABLE | RDPS_WIRE_REPLY)) {
				if (h.status)
					fprintf(stderr, "fuzz: restoring a table: %.*s\n", (int)h.len,
						c.out + off - h.len);
				FUZZ_CHECK(h.status == 0);
				got++;
			}
		}
		FUZZ_CHECK(!c.eof && spins < 60000);
		if (got < want)
			pump_moved(fs, &c, 1, 1);
	}
	fuzz_conn_shut(fs, &c, 1, &c);
	fuzz_conn_close(&c);
	free(buf);
	fuzz_pump(fs, NULL, 0);
	for (uint32_t t = FUZZ_NUM_TABLES; t < RDPS_MAX_TABLES; t++)
		FUZZ_CHECK(rdps_server_shard(fs->srv, t) == NULL);
}

void fuzz_input_end(struct fuzz_server *fs)
{
	fuzz_pump(fs, NULL, 0);
	restore_tables(fs);
	fuzz_note("servers held at most %zu bytes more than at the input's start, %zd at its end",
		  in.peak, (ssize_t)(heap_now() - in.heap0));
}

/* ---------------------------------------------------------------------- */
/* The oracle                                                              */

enum reply_rule {
	RULE_NEVER,   /* no success reply over TCP (not on the wire, or refused) */
	RULE_WELCOME, /* the welcome (checked with the handshake) */
	RULE_EMPTY,
	RULE_ROWS,    /* whole 32-bit words */
	RULE_STATS,   /* struct rdps_server_stats */
	RULE_VECTOR,  /* the sum: 1..RDPS_ALLREDUCE_MAX doubles */
	RULE_TABLE,   /* one struct rdps_table_desc */
	RULE_SAMPLE,  /* counts, then edges (rdps_sample_reply_bound's layout) */
	RULE_STATE,   /* a read's n x floats_per_row floats; a write's: empty */
};

/*
 * Every request kind's rule. No default: with -Werror=switch (the fuzz
 * build's flags) a kind added to enum rdps_req_type does not build here
 * until it has one, so the oracle never meets a kind it does not know.
 */
static enum reply_rule reply_rule(enum rdps_req_type t)
{
	switch (t) {
	case RDPS_REQ_HELLO:
		return RULE_WELCOME;
	case RDPS_REQ_PULL:
		return RULE_ROWS;
	case RDPS_REQ_PUSH:
	case RDPS_REQ_FLUSH:
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_SHUTDOWN:
	case RDPS_REQ_CHECKPOINT: /* written, or an error */
	case RDPS_REQ_SET:
		return RULE_EMPTY;
	case RDPS_REQ_STATS:
		return RULE_STATS;
	case RDPS_REQ_ALLREDUCE:
		return RULE_VECTOR;
	case RDPS_REQ_TABLE:
		return RULE_TABLE;
	case RDPS_REQ_SAMPLE:
		return RULE_SAMPLE;
	case RDPS_REQ_STATE:
		return RULE_STATE;
	case RDPS_REQ_BYE: /* a closed connection, never a frame */
	case RDPS_REQ_MAX:
		return RULE_NEVER;
	}
	return RULE_NEVER;
}
_Static_assert(sizeof(struct rdps_server_stats) == 896, "the stats reply of wire version 3");

static const char *const config_names[FUZZ_NUM_TABLES] = {
	"entity", "relation", RDPS_GRAPH_INDPTR, RDPS_GRAPH_EDGES, RDPS_GRAPH_OUTPTR,
	RDPS_GRAPH_OUTEDGES, RDPS_GRAPH_EDATA_PREFIX "prob", RDPS_GRAPH_EDATA_PREFIX "w64",
	RDPS_GRAPH_NDATA_PREFIX "feat", RDPS_GRAPH_NDATA_PREFIX "label",
	RDPS_GRAPH_NDATA_PREFIX "mask",
};

static void check_desc(const struct rdps_table_desc *d)
{
	FUZZ_CHECK(memchr(d->name, '\0', sizeof(d->name)) != NULL);
	FUZZ_CHECK(d->name[0] != '\0');
	for (const char *p = d->name; *p; p++)
		FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f); /* refused at create */
	FUZZ_CHECK(d->table_id < RDPS_MAX_TABLES);
	FUZZ_CHECK(d->dim >= 1 && d->dim <= RDPS_MAX_DIM);
	FUZZ_CHECK(d->dtype < RDPS_DTYPE_COUNT && d->elems >= 1);
	FUZZ_CHECK(rdps_dtype_row_words((int)d->dtype, d->elems) == d->dim);
	FUZZ_CHECK(d->lo <= d->hi && d->hi <= d->num_rows && d->num_rows >= 1);
	FUZZ_CHECK(d->stride >= rdps_row_stride(d->dim));
	FUZZ_CHECK(!d->remote_addr && !d->rkey); /* TCP exposes no memory */
	if (d->table_id < FUZZ_NUM_TABLES)
		FUZZ_CHECK(!strcmp(d->name, config_names[d->table_id]));
}

/* The edges of one slot in a sample reply, k triples (other node, edge id,
 * type): edges of one node of this server (in: its in-edges, each with its
 * source; out: its out-edges, each with its destination), in increasing
 * position (= edge id; repeats only with replacement). Never the damaged
 * node's in-edges (the server answers -EIO for them). */
static bool slot_edges_ok(const struct fuzz_server *fs, const uint8_t *e, uint32_t k, bool out,
			  bool repeats)
{
	uint64_t prev = 0, ne = fuzz_graph_num_edges();
	uint32_t node = 0;

	for (uint32_t j = 0; j < k; j++, e += RDPS_SAMPLE_EDGE_BYTES) {
		int64_t v[3];
		uint64_t eid;
		uint32_t owner;

		memcpy(v, e, sizeof(v));
		if (v[1] < 0 || (uint64_t)v[1] >= ne)
			return false;
		eid = (uint64_t)v[1];
		owner = out ? (uint32_t)fuzz_graph_src(eid) : graph_dst[eid];
		if (owner / 20 != fs->id || (!out && owner % 20 == 19) ||
		    v[0] != (int64_t)(out ? graph_dst[eid] : fuzz_graph_src(eid)) ||
		    v[2] != (int64_t)(eid % FUZZ_GRAPH_ETYPES))
			return false;
		if (j && (owner != node || eid < prev || (eid == prev && !repeats)))
			return false;
		node = owner;
		prev = eid;
	}
	return true;
}

/* A sample reply for n slots: n counts (padded to 8 bytes), then the
 * edges, slot after slot. true if len and the edges fit that n in one
 * direction. */
static bool sample_fits(const struct fuzz_server *fs, const uint8_t *p, uint32_t len,
			uint32_t n, bool out, bool repeats)
{
	size_t head = ((size_t)n * 4 + 7) & ~(size_t)7, edges = 0, at;

	if (head > len)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k;

		memcpy(&k, p + 4 * i, 4);
		if (k > RDPS_SAMPLE_MAX_FANOUT)
			return false;
		edges += k;
	}
	if (head + edges * RDPS_SAMPLE_EDGE_BYTES != len)
		return false;
	for (uint32_t i = (uint32_t)n * 4; i < head; i++)
		if (p[i])
			return false; /* padding */
	at = head;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k;

		memcpy(&k, p + 4 * i, 4);
		if (!slot_edges_ok(fs, p + at, k, out, repeats))
			return false;
		at += (size_t)k * RDPS_SAMPLE_EDGE_BYTES;
	}
	return true;
}

/* Whether edge id e is among the request's sorted excluded ids. */
static bool excluded(const uint64_t *excl, uint32_t n, uint64_t e)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (excl[mid] < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && excl[lo] == e;
}

/*
 * One slot's expected picks, from the model of the graph (not from the
 * server's tables): its edges (positions [begin, end)), which of them are
 * excluded, their weights (the group's prob table, a row per edge id less
 * prob_shift, all on this server: else the server refuses), how many it
 * must pick (!replace: min(eligible, fanout); replace: fanout if any is
 * eligible), and, as rdps_sample_pick makes them from (seed, slot,
 * direction) for the client's one-sided path too, which.
 */
static void check_slot(const struct fuzz_server *fs, const struct rdps_sample_req *r,
		       const struct rdps_sample_group *g, const uint64_t *excl, uint64_t v,
		       uint32_t k, const uint8_t *edges)
{
	bool out = r->flags & RDPS_SAMPLE_F_OUT, replace = r->flags & RDPS_SAMPLE_F_REPLACE;
	bool weighted = g->prob_table != RDPS_SAMPLE_NO_PROB;
	static uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];
	struct rdps_sample_scratch sc = { 0 };
	uint64_t begin, end, deg, nexcl = 0, eligible = 0, elo, ehi, want;
	uint64_t *xpos;
	double *w;
	int got;

	/* Success: a slot of this server (the damaged one only out). */
	FUZZ_CHECK(v / 20 == fs->id && (out || v % 20 != 19));
	fuzz_graph_slot_edges((uint32_t)v, out, &begin, &end);
	fuzz_graph_edge_range(fs->id, &elo, &ehi);
	deg = end - begin;
	xpos = malloc((deg + 1) * sizeof(*xpos));
	w = malloc((deg + 1) * sizeof(*w));
	FUZZ_CHECK(xpos && w);
	if (weighted)
		FUZZ_CHECK((g->prob_table == FUZZ_T_PROB && g->prob_dtype == RDPS_DTYPE_F32) ||
			   (g->prob_table == FUZZ_T_W64 && g->prob_dtype == RDPS_DTYPE_F64));
	for (uint64_t q = 0; q < deg; q++) {
		uint64_t e = out ? fuzz_graph_out_edge(begin + q) : begin + q;
		bool gone = excluded(excl, r->num_exclude, e);

		if (gone)
			xpos[nexcl++] = q;
		w[q] = 1;
		if (weighted) {
			uint64_t row = e - (uint64_t)g->prob_shift;

			FUZZ_CHECK(row >= elo && row < ehi); /* else -EIO */
			w[q] = fuzz_graph_weight(row);
		}
		eligible += !gone && w[q] > 0;
	}
	want = replace ? (eligible ? g->fanout : 0) : (eligible < g->fanout ? eligible : g->fanout);
	if (k != want)
		fprintf(stderr, "fuzz: sample of slot %llu (%s, fanout %u%s%s): %u edges, want "
			"%llu of %llu eligible\n", (unsigned long long)v, out ? "out" : "in",
			g->fanout, replace ? ", replace" : "", weighted ? ", weighted" : "", k,
			(unsigned long long)want, (unsigned long long)eligible);
	FUZZ_CHECK(k == want);
	got = rdps_sample_pick(r->seed, v, out, deg, g->fanout, replace, weighted ? w : NULL,
			       xpos, nexcl, pos, &sc);
	FUZZ_CHECK(got == (int)k);
	for (uint32_t j = 0; j < k; j++, edges += RDPS_SAMPLE_EDGE_BYTES) {
		uint64_t e = out ? fuzz_graph_out_edge(begin + pos[j]) : begin + pos[j];
		int64_t eid;

		memcpy(&eid, edges + 8, sizeof(eid));
		/* never an excluded edge or one of weight 0 */
		FUZZ_CHECK(!excluded(excl, r->num_exclude, (uint64_t)eid));
		FUZZ_CHECK(w[pos[j]] > 0);
		FUZZ_CHECK((uint64_t)eid == e);
	}
	rdps_sample_scratch_free(&sc);
	free(xpos);
	free(w);
}

void fuzz_check_sample(const struct fuzz_server *fs, const uint8_t *p, uint32_t len,
		       const uint8_t *req, uint32_t req_len)
{
	struct rdps_sample_req r;
	const uint64_t *slots, *excl;
	uint64_t *words;
	char why[256];
	size_t at;
	uint32_t i = 0;

	/* A success only for a request the wire check takes. */
	FUZZ_CHECK(!rdps_wire_check_sample(req, req_len, why, sizeof(why)));
	memcpy(&r, req, sizeof(r));
	FUZZ_CHECK(r.flags & RDPS_SAMPLE_F_OUT ? r.indptr_table == FUZZ_T_OUTPTR &&
						  r.edges_table == FUZZ_T_OUTEDGES
					      : r.indptr_table == FUZZ_T_INDPTR &&
						  r.edges_table == FUZZ_T_EDGES);
	FUZZ_CHECK(sample_fits(fs, p, len, r.n, r.flags & RDPS_SAMPLE_F_OUT,
			       r.flags & RDPS_SAMPLE_F_REPLACE));
	/* aligned copies of the slots and excluded ids */
	words = malloc(((size_t)r.n + r.num_exclude + 1) * 8);
	FUZZ_CHECK(words != NULL);
	memcpy(words, req + sizeof(r) + (size_t)r.num_groups * sizeof(struct rdps_sample_group),
	       ((size_t)r.n + r.num_exclude) * 8);
	slots = words;
	excl = words + r.n;
	for (uint32_t x = 1; x < r.num_exclude; x++)
		FUZZ_CHECK(excl[x - 1] <= excl[x]); /* else refused */
	at = ((size_t)r.n * 4 + 7) & ~(size_t)7;
	for (uint32_t gi = 0; gi < r.num_groups; gi++) {
		struct rdps_sample_group g;

		memcpy(&g, req + sizeof(r) + (size_t)gi * sizeof(g), sizeof(g));
		for (uint32_t c = 0; c < g.count; c++, i++) {
			uint32_t k;

			memcpy(&k, p + 4 * i, 4);
			check_slot(fs, &r, &g, excl, slots[i], k, p + at);
			at += (size_t)k * RDPS_SAMPLE_EDGE_BYTES;
		}
	}
	FUZZ_CHECK(at == len);
	free(words);
}

void fuzz_check_reply(const struct fuzz_server *fs, uint8_t type, const uint8_t *payload,
		      uint32_t len)
{
	enum reply_rule r = type < RDPS_REQ_MAX ? reply_rule((enum rdps_req_type)type)
						: RULE_NEVER;
	bool fits = false;

	switch (r) {
	case RULE_NEVER:
		/* BIND: tcp binds no endpoints; unknown kinds are refused */
		fprintf(stderr, "fuzz: success reply of type %u\n", type);
		FUZZ_CHECK(!"success reply of a request kind that never succeeds over TCP");
		break;
	case RULE_WELCOME:
		break; /* the stream's check */
	case RULE_EMPTY:
		FUZZ_CHECK(len == 0);
		break;
	case RULE_ROWS:
	case RULE_STATE:
		FUZZ_CHECK(len % 4 == 0);
		break;
	case RULE_STATS:
		FUZZ_CHECK(len == sizeof(struct rdps_server_stats));
		break;
	case RULE_VECTOR:
		FUZZ_CHECK(len >= 8 && len % 8 == 0 && len <= RDPS_ALLREDUCE_MAX * 8);
		break;
	case RULE_TABLE: {
		struct rdps_table_desc d;

		FUZZ_CHECK(len == sizeof(d));
		memcpy(&d, payload, sizeof(d));
		check_desc(&d);
		break;
	}
	case RULE_SAMPLE:
		/* The slot count and the direction are the request's: some n
		 * must fit one way (repeats: it may have asked for them). */
		for (uint32_t n = 1; !fits && ((size_t)n * 4 + 7) / 8 * 8 <= len; n++)
			fits = sample_fits(fs, payload, len, n, false, true) ||
			       sample_fits(fs, payload, len, n, true, true);
		FUZZ_CHECK(fits);
		break;
	}
}

static void check_error(const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	size_t n;

	FUZZ_CHECK(h->len >= 8 && h->len % 8 == 0 && h->len <= RDPS_WIRE_ERRMSG_MAX);
	/* A reason, then NUL padding only. */
	n = strnlen((const char *)payload, h->len);
	FUZZ_CHECK(n >= 1 && h->len - n < 8);
	for (size_t i = n; i < h->len; i++)
		FUZZ_CHECK(payload[i] == 0);
}

int fuzz_stream_observer(const uint8_t *p, size_t len)
{
	struct rdps_wire_hdr h;
	struct rdps_wire_hello hello;

	if (len < sizeof(h) + sizeof(hello))
		return -1;
	memcpy(&h, p, sizeof(h));
	if (h.magic != RDPS_WIRE_MAGIC || h.version != RDPS_WIRE_VERSION ||
	    h.type != RDPS_REQ_HELLO || h.len != sizeof(hello))
		return -1;
	memcpy(&hello, p + sizeof(h), sizeof(hello));
	return !!(hello.flags & RDPS_HELLO_OBSERVER);
}

void fuzz_check_stream(const struct fuzz_server *fs, const struct fuzz_conn *c,
		       fuzz_reply_fn each_reply, void *ctx, struct fuzz_stream_info *info)
{
	bool challenged = false, welcomed = false, refused = false;
	struct fuzz_stream_info dummy;
	size_t off = 0;

	if (!info)
		info = &dummy;
	memset(info, 0, sizeof(*info));
	while (c->len - off >= sizeof(struct rdps_wire_hdr)) {
		const uint8_t *payload = c->out + off + sizeof(struct rdps_wire_hdr);
		struct rdps_wire_hdr h;
		uint8_t base;

		memcpy(&h, c->out + off, sizeof(h));
		FUZZ_CHECK(h.magic == RDPS_WIRE_MAGIC && h.version == RDPS_WIRE_VERSION);
		FUZZ_CHECK(h.flags == 0 && h.len <= RDPS_WIRE_MAX_FRAME);
		if (c->len - off - sizeof(h) < h.len) {
			/* A reset drops what the server had not sent yet
			 * (it closed with bytes of ours unread): its stream
			 * may end in a frame; a FIN's never does. */
			FUZZ_CHECK(c->reset);
			off = c->len;
			break;
		}
		/* A refused handshake is the last frame. */
		FUZZ_CHECK(!refused);
		off += sizeof(h) + h.len;
		fuzz_note("  %s 0x%02x, %u bytes, status %d%s%.*s", rdps_req_name(h.type & 0x7f),
			  h.type, h.len, h.status, h.status < 0 ? ": " : "",
			  h.status < 0 ? (int)h.len : 0, (const char *)payload);
		if (h.type == RDPS_WIRE_CHALLENGE) {
			FUZZ_CHECK(fs->secret && !challenged && !welcomed);
			FUZZ_CHECK(h.status == 0 && h.len == RDPS_NONCE_LEN);
			challenged = true;
			continue;
		}
		FUZZ_CHECK(h.type & RDPS_WIRE_REPLY);
		FUZZ_CHECK(h.status <= 0);
		if (h.status < 0) {
			/* Errors echo whatever type was asked for. */
			check_error(&h, payload);
			if (!welcomed)
				refused = true;
			else if (each_reply)
				each_reply(ctx, &h, payload);
			continue;
		}
		base = h.type & (uint8_t)~RDPS_WIRE_REPLY;
		if (base == RDPS_REQ_HELLO) {
			struct rdps_wire_welcome w;
			struct rdps_conn *rc = calloc(1, sizeof(*rc));
			char why[256];

			FUZZ_CHECK(rc != NULL);
			FUZZ_CHECK(!welcomed && (!fs->secret || challenged));
			/* Protected mode: nobody from elsewhere without the secret. */
			FUZZ_CHECK(!c->remote || fs->secret || fs->allow_unauth);
			FUZZ_CHECK(!rdps_wire_parse_welcome(payload, h.len, fs->id, rc, &w, why,
							    sizeof(why)));
			FUZZ_CHECK(!!(w.flags & RDPS_WELCOME_AUTHENTICATED) == fs->secret);
			FUZZ_CHECK(rc->num_tables >= FUZZ_NUM_TABLES);
			FUZZ_CHECK(w.num_servers == 2);
			for (uint32_t i = 0; i < rc->num_tables; i++) {
				FUZZ_CHECK(!rc->tables[i].remote_addr && !rc->tables[i].rkey);
				if (rc->tables[i].dim)
					check_desc(&rc->tables[i]);
			}
			for (uint32_t i = 0; i < FUZZ_NUM_TABLES; i++)
				FUZZ_CHECK(rc->tables[i].dim && rc->tables[i].table_id == i);
			info->welcome_tables = rc->num_tables;
			free(rc);
			welcomed = info->welcomed = true;
			continue;
		}
		/* Nothing but the handshake before the welcome. */
		FUZZ_CHECK(welcomed);
		fuzz_check_reply(fs, base, payload, h.len);
		if (c->observer_known && c->observer) {
			/* An observer gets stats, and shuts down or checkpoints a
			 * server only as an admin (the secret, or this machine). */
			FUZZ_CHECK(base == RDPS_REQ_STATS || base == RDPS_REQ_SHUTDOWN ||
				   base == RDPS_REQ_CHECKPOINT);
			if (base != RDPS_REQ_STATS)
				FUZZ_CHECK(fs->secret || !c->remote);
		}
		if (each_reply)
			each_reply(ctx, &h, payload);
	}
	FUZZ_CHECK(off == c->len || c->reset);
	/* A refused handshake closes the connection (seen if it was read). */
	if (refused && c->settled)
		FUZZ_CHECK(c->eof);
}
