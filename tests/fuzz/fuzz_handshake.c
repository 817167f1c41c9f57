// SPDX-License-Identifier: MIT
/*
 * fuzz_handshake: the client side of the TCP transport against a fuzzed
 * server.
 *
 * Input: one flag byte, then the byte stream "the server" sends. Flag bit 0:
 * the client has the job's secret (FUZZ_SECRET), so it must see a challenge,
 * answer it and check the server's proof; bit 1: the client is an observer;
 * bit 2: after a successful handshake, skip the requests below.
 *
 * Drives: (1) rdps_wire_parse_welcome directly on the stream bytes; (2) the
 * real client handshake (tcp_handshake via rdps_tcp_fuzz_client) over a
 * socketpair whose other end already holds the stream followed by EOF, so
 * no wait depends on time: hello, challenge/auth, error replies,
 * read_errmsg, the welcome and its proof; (3) if it connects, a pull of two
 * rows, a push, flush, stats, barrier and allreduce on that connection, so
 * read_reply, push acknowledgements, pull replies and error replies parse
 * the rest of the stream.
 *
 * Asserts: a refused handshake returns a negative errno, no connection and
 * a reason in err; an accepted welcome has only well-formed tables (ids in
 * order, 1 <= dim <= RDPS_MAX_DIM, lo <= hi <= num_rows, stride large
 * enough) and names server 1 (the one the client asked for); a client with
 * a secret never connects unless the server sent a challenge first; failed
 * requests return a negative errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "rdps/transport.h"
#include "transport/tcp.h"
#include "transport/wire.h"

#define SERVER_ID 1
#define MAX_OP_DIM 4096 /* larger tables: handshake only (socket buffers) */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rdps_secret secret;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	fuzz_secret(&secret);
	return 0;
}

static void check_tables(const struct rdps_conn *c)
{
	FUZZ_CHECK(c->server_id == SERVER_ID);
	FUZZ_CHECK(c->num_tables <= RDPS_MAX_TABLES);
	for (uint32_t i = 0; i < c->num_tables; i++) {
		const struct rdps_table_desc *t = &c->tables[i];

		FUZZ_CHECK(memchr(t->name, '\0', sizeof(t->name)) != NULL);
		if (!t->dim)
			continue; /* an empty slot (a table clients dropped, or will make) */
		FUZZ_CHECK(t->table_id == i);
		FUZZ_CHECK(t->dim <= RDPS_MAX_DIM);
		FUZZ_CHECK(t->dtype < RDPS_DTYPE_COUNT);
		FUZZ_CHECK(!t->elems || rdps_dtype_row_words((int)t->dtype, t->elems) == t->dim);
		FUZZ_CHECK(t->lo <= t->hi && t->hi <= t->num_rows);
		FUZZ_CHECK(t->stride >= rdps_row_stride(t->dim));
		FUZZ_CHECK(memchr(t->name, '\0', sizeof(t->name)) != NULL);
	}
}

/* (1) The welcome parser alone, on an exact-size copy (ASan sees overreads). */
static void parse_direct(const uint8_t *data, size_t size)
{
	struct rdps_wire_welcome w;
	struct rdps_conn *c;
	char why[256] = "";
	uint8_t *copy;
	int ret;

	if (size > UINT32_MAX)
		return;
	copy = malloc(size ? size : 1);
	c = calloc(1, sizeof(*c));
	FUZZ_CHECK(copy && c);
	memcpy(copy, data, size);
	ret = rdps_wire_parse_welcome(copy, (uint32_t)size, SERVER_ID, c, &w, why, sizeof(why));
	if (ret) {
		FUZZ_CHECK(ret == -EPROTO && why[0]);
	} else {
		FUZZ_CHECK(size == rdps_wire_welcome_size(w.num_tables));
		check_tables(c);
	}
	free(copy);
	free(c);
}

/* (3) Requests whose replies come from the rest of the stream. */
static void run_requests(struct rdps_conn *c)
{
	const struct rdps_transport_ops *ops = c->ops;
	const struct rdps_table_desc *t = &c->tables[0];
	struct rdps_server_stats st;
	double vec[2] = { 1.0, 2.0 }, sum[2];
	int ret;

	if (c->num_tables && t->lo < t->hi && t->dim <= MAX_OP_DIM) {
		uint64_t ids[2] = { t->lo, t->hi - 1 };
		float *buf = calloc(2 * (size_t)t->dim, sizeof(float));

		FUZZ_CHECK(buf != NULL);
		ret = ops->pull_post(c, 0, ids, 2, buf);
		if (!ret)
			ret = ops->pull_wait(c);
		fuzz_note("pull: %d %s", ret, ret ? c->errmsg : "");
		FUZZ_CHECK(ret <= 0);
		ret = ops->push(c, 0, ids, buf, 1);
		fuzz_note("push: %d %s", ret, ret ? c->errmsg : "");
		FUZZ_CHECK(ret <= 0);
		free(buf);
	}
	ret = ops->call(c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0);
	fuzz_note("flush: %d %s", ret, ret ? c->errmsg : "");
	FUZZ_CHECK(ret <= 0);
	ret = ops->call(c, RDPS_REQ_STATS, NULL, 0, &st, sizeof(st), 0);
	fuzz_note("stats: %d %s", ret, ret ? c->errmsg : "");
	FUZZ_CHECK(ret <= 0);
	ret = ops->call(c, RDPS_REQ_BARRIER, NULL, 0, NULL, 0, 0);
	fuzz_note("barrier: %d %s", ret, ret ? c->errmsg : "");
	FUZZ_CHECK(ret <= 0);
	ret = ops->call(c, RDPS_REQ_ALLREDUCE, vec, sizeof(vec), sum, sizeof(sum), 0);
	fuzz_note("allreduce: %d %s", ret, ret ? c->errmsg : "");
	FUZZ_CHECK(ret <= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdps_conn_params p = {
		.host = "fuzz", .port = 1, .server_id = SERVER_ID, .client_id = 0,
		.num_clients = 2, .timeout_ms = 2000,
	};
	struct rdps_conn *c;
	char err[512] = "";
	size_t off = 0;
	int sv[2], ret, flags;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	parse_direct(data, size);

	/* (2) The stream, then EOF, is waiting before the client starts. */
	FUZZ_CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv));
	while (off < size) {
		ssize_t n = write(sv[1], data + off, size - off);

		if (n <= 0)
			break; /* longer than the socket buffer: the rest is cut */
		off += (size_t)n;
	}
	FUZZ_CHECK(!shutdown(sv[1], SHUT_WR));
	p.secret = flags & 1 ? &secret : NULL;
	p.observer = flags & 2;
	ret = rdps_tcp_fuzz_client(sv[0], &p, &c, err, sizeof(err));
	if (ret) {
		fuzz_note("handshake refused (%d): %s", ret, err);
		FUZZ_CHECK(ret < 0 && !c);
		FUZZ_CHECK(err[0]);
	} else {
		fuzz_note("connected: %u tables, session %llx", c->num_tables,
			  (unsigned long long)c->session);
		struct rdps_wire_hdr h;

		check_tables(c);
		if (p.secret) {
			FUZZ_CHECK(size >= sizeof(h));
			memcpy(&h, data, sizeof(h));
			FUZZ_CHECK(h.type == RDPS_WIRE_CHALLENGE);
		}
		if (!(flags & 4))
			run_requests(c);
		c->ops->close(c);
	}
	close(sv[1]);
	return 0;
}
