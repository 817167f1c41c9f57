// SPDX-License-Identifier: MIT
/*
 * fuzz_frames: the server's frame decoder, end to end, on arbitrary byte
 * streams from clients.
 *
 * Setup (once): two real rdps servers (rdps_server_create, transport tcp,
 * kvstore core) listening on 127.0.0.1, each server 1 of a 2-server job with
 * two small tables ("entity": 64 rows x 4, rows [32, 64) here, Adagrad;
 * "relation": 8 rows x 3, odd dim so pushes carry padding, SGD). The second
 * server has a secret (FUZZ_SECRET). rdps_random_bytes is deterministic in
 * the fuzz build, so seeds carry valid AUTH frames (see fuzz_seeds.c).
 *
 * Input: byte 0 is flags: bit 0 picks the server with the secret; bit 1
 * opens two connections (then bytes 1-2, little-endian, give the length of
 * the first connection's stream, the rest is the second's); bits 4-7 pick
 * the chunk size the harness sends in (0: all at once), with the server
 * polled after every chunk, so frames arrive split at every offset.
 *
 * Drives: everything a client reaches over TCP: accept, sconn_read,
 * sconn_process (header checks, partial frames, realignment), handle_frame,
 * handle_hello, handle_auth, admit, every request type with the server
 * core's checks (job membership, table index, row ids, collectives across
 * the two connections, observers), refusals, deferred replies, sconn_flush
 * and the close of a connection (BYE).
 *
 * Asserts, on everything the server sends back on each connection: only
 * complete, well-formed frames (magic, version, flags 0, length within the
 * limit, stream ending at a frame boundary); a challenge only from the
 * server with a secret, only once, 32 bytes, before any welcome; every
 * success reply has a known request type and status 0, every error reply a
 * negative status and a padded reason of 8..RDPS_WIRE_ERRMSG_MAX bytes; at
 * most one welcome, only after a challenge when the server has a secret,
 * well-formed for the client's own parser (rdps_wire_parse_welcome), flagged
 * authenticated exactly when the server has a secret, with no address or
 * rkey (TCP exposes no memory); no success reply of any other kind before
 * the welcome (no row leaves the server before the handshake), and replies
 * of the right size (pull: whole floats, stats: the stats struct, push,
 * flush, barrier, shutdown: empty, allreduce: 8..512 bytes). The server
 * must also settle: polling ends with no pending events.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "rdps/server.h"
#include "transport/wire.h"

#define SERVER_ID 1
#define NUM_TABLES 2
#define MAX_PUMP_ROUNDS 100000 /* a server that never settles is a finding */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_server {
	struct rdps_ipconfig ipc;
	struct rdps_server *srv;
	uint16_t port;
};

/* One client connection of the harness and what the server sent on it. */
struct fuzz_conn {
	int fd;
	uint8_t *out;   /* bytes received from the server */
	size_t len, cap;
	bool eof;       /* the server closed the connection */
};

static struct rdps_secret secret;
static struct fuzz_server servers[2]; /* [0] no secret, [1] secret */
static const size_t chunk_sizes[16] = { 0,  1,  2,   3,   5,   7,   8,    13,
					16, 17, 24, 100, 255, 512, 1000, 4096 };

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

static void start_server(struct fuzz_server *fs, const struct rdps_secret *sec)
{
	struct rdps_server_config cfg = {
		.transport = "tcp", .server_id = SERVER_ID, .num_tables = NUM_TABLES,
		.seed = 1, .secret = sec,
		.tables = {
			{ .name = "entity", .num_rows = 64, .dim = 4, .init = RDPS_INIT_UNIFORM,
			  .init_range = 0.1f, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.1f },
			{ .name = "relation", .num_rows = 8, .dim = 3, .init = RDPS_INIT_ZEROS,
			  .optimizer = RDPS_OPT_SGD, .lr = 0.1f },
		},
	};
	char text[128], err[512];
	int ret;

	for (int attempt = 0;; attempt++) {
		fs->port = free_port();
		/* Server 0 is never started; the fuzzed server is 1. */
		snprintf(text, sizeof(text), "127.0.0.1 1\n127.0.0.1 %u\n", fs->port);
		FUZZ_CHECK(!rdps_ipconfig_parse("fuzz", text, &fs->ipc, err, sizeof(err)));
		cfg.ipc = &fs->ipc;
		ret = rdps_server_create(&cfg, &fs->srv, err, sizeof(err));
		if (!ret)
			return;
		rdps_ipconfig_free(&fs->ipc);
		if (ret != -EADDRINUSE || attempt == 10) {
			fprintf(stderr, "fuzz_frames: cannot start a server: %s\n", err);
			abort();
		}
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	fuzz_secret(&secret);
	start_server(&servers[0], NULL);
	start_server(&servers[1], &secret);
	return 0;
}

static void conn_open(struct fuzz_conn *c, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	struct pollfd pfd = { .events = POLLOUT };
	socklen_t sl = sizeof(int);
	int soerr = 0;

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FUZZ_CHECK(c->fd >= 0);
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
}

/* Reads what the server sent so far; true if anything arrived. */
static bool conn_drain(struct fuzz_conn *c)
{
	bool got = false;

	while (c->fd >= 0 && !c->eof) {
		ssize_t n;

		if (c->cap - c->len < 65536) {
			c->cap = c->cap ? 2 * c->cap : 1 << 17;
			c->out = realloc(c->out, c->cap);
			FUZZ_CHECK(c->out != NULL);
		}
		n = recv(c->fd, c->out + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n > 0) {
			c->len += (size_t)n;
			got = true;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->eof = true; /* closed (FIN or reset) by the server */
		} else if (errno == EAGAIN) {
			break;
		}
	}
	return got;
}

/* Polls the server and drains the connections until nothing moves. */
static void pump(struct rdps_server *srv, struct fuzz_conn *conns, int nconns)
{
	for (int round = 0;; round++) {
		bool moved = false;
		int n = rdps_server_poll(srv, 0);

		FUZZ_CHECK(n >= 0);
		for (int i = 0; i < nconns; i++)
			moved |= conn_drain(&conns[i]);
		if (!n && !moved)
			return;
		FUZZ_CHECK(round < MAX_PUMP_ROUNDS);
	}
}

static void feed(struct rdps_server *srv, struct fuzz_conn *conns, int nconns,
		 struct fuzz_conn *c, const uint8_t *p, size_t len, size_t chunk)
{
	size_t off = 0;

	while (off < len && !c->eof) {
		size_t want = chunk && chunk < len - off ? chunk : len - off;
		ssize_t n = send(c->fd, p + off, want, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			break; /* reset by the server */
		if (n > 0)
			off += (size_t)n;
		pump(srv, conns, nconns);
	}
	pump(srv, conns, nconns);
}

/* The oracle: everything the server sent on one connection. */
static void check_stream(const struct fuzz_conn *c, bool with_secret)
{
	bool challenged = false, welcomed = false;
	size_t off = 0;

	while (c->len - off >= sizeof(struct rdps_wire_hdr)) {
		const uint8_t *payload = c->out + off + sizeof(struct rdps_wire_hdr);
		struct rdps_wire_hdr h;
		uint8_t base;

		memcpy(&h, c->out + off, sizeof(h));
		FUZZ_CHECK(h.magic == RDPS_WIRE_MAGIC && h.version == RDPS_WIRE_VERSION);
		FUZZ_CHECK(h.flags == 0 && h.len <= RDPS_WIRE_MAX_FRAME);
		FUZZ_CHECK(c->len - off - sizeof(h) >= h.len);
		off += sizeof(h) + h.len;
		if (h.type == RDPS_WIRE_CHALLENGE) {
			FUZZ_CHECK(with_secret && !challenged && !welcomed);
			FUZZ_CHECK(h.status == 0 && h.len == RDPS_NONCE_LEN);
			challenged = true;
			continue;
		}
		FUZZ_CHECK(h.type & RDPS_WIRE_REPLY);
		FUZZ_CHECK(h.status <= 0);
		if (h.status < 0) {
			/* Errors echo whatever type was asked for. */
			FUZZ_CHECK(h.len >= 8 && h.len % 8 == 0 && h.len <= RDPS_WIRE_ERRMSG_MAX);
			continue;
		}
		base = h.type & (uint8_t)~RDPS_WIRE_REPLY;
		if (base == RDPS_REQ_HELLO) {
			struct rdps_wire_welcome w;
			struct rdps_conn *rc = calloc(1, sizeof(*rc));
			char why[256];

			FUZZ_CHECK(rc != NULL);
			FUZZ_CHECK(!welcomed && (!with_secret || challenged));
			FUZZ_CHECK(h.len == rdps_wire_welcome_size(NUM_TABLES));
			FUZZ_CHECK(!rdps_wire_parse_welcome(payload, h.len, SERVER_ID, rc, &w, why,
							    sizeof(why)));
			FUZZ_CHECK(!!(w.flags & RDPS_WELCOME_AUTHENTICATED) == with_secret);
			FUZZ_CHECK(rc->num_tables == NUM_TABLES);
			for (uint32_t i = 0; i < rc->num_tables; i++)
				FUZZ_CHECK(!rc->tables[i].remote_addr && !rc->tables[i].rkey);
			free(rc);
			welcomed = true;
			continue;
		}
		FUZZ_CHECK(welcomed);
		switch (base) {
		case RDPS_REQ_PULL:
			FUZZ_CHECK(h.len % 4 == 0);
			break;
		case RDPS_REQ_PUSH:
		case RDPS_REQ_FLUSH:
		case RDPS_REQ_BARRIER:
		case RDPS_REQ_SHUTDOWN:
			FUZZ_CHECK(h.len == 0);
			break;
		case RDPS_REQ_STATS:
			FUZZ_CHECK(h.len == sizeof(struct rdps_server_stats));
			break;
		case RDPS_REQ_ALLREDUCE:
			FUZZ_CHECK(h.len >= 8 && h.len % 8 == 0 && h.len <= RDPS_ALLREDUCE_MAX * 8);
			break;
		default:
			FUZZ_CHECK(!"success reply of an unknown request type");
		}
	}
	FUZZ_CHECK(off == c->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_conn conns[2];
	const uint8_t *stream[2];
	size_t len[2], chunk;
	struct fuzz_server *fs;
	int nconns, flags;

	if (size < 1)
		return 0;
	flags = data[0];
	fs = &servers[flags & 1];
	chunk = chunk_sizes[flags >> 4];
	data++;
	size--;
	if (flags & 2 && size >= 2) {
		size_t first = (size_t)data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (first > size)
			first = size;
		nconns = 2;
		stream[0] = data;
		len[0] = first;
		stream[1] = data + first;
		len[1] = size - first;
	} else {
		nconns = 1;
		stream[0] = data;
		len[0] = size;
	}
	for (int i = 0; i < nconns; i++)
		conn_open(&conns[i], fs->port);
	for (int i = 0; i < nconns; i++)
		feed(fs->srv, conns, nconns, &conns[i], stream[i], len[i], chunk);
	/* Leave one at a time: the other may get a failed collective. */
	for (int i = 0; i < nconns; i++) {
		close(conns[i].fd);
		conns[i].fd = -1;
		pump(fs->srv, conns, nconns);
	}
	for (int i = 0; i < nconns; i++) {
		check_stream(&conns[i], flags & 1);
		free(conns[i].out);
	}
	return 0;
}
