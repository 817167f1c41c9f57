// SPDX-License-Identifier: MIT
/*
 * The TCP transport's server under pipelined requests: a raw client sends
 * several pulls in one write, each with a reply over the server's send
 * high-water mark (it stops taking requests from a connection above it).
 * Every reply must still come, in full and in order: requests the server
 * had already read while paused get no new readable event, so it must
 * resume them itself once its send buffer drains.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rdps/ipconfig.h"
#include "rdps/server.h"
#include "rdps_test.h"
#include "transport/wire.h"

#define WIDE_ROWS 64
#define WIDE_DIM 65536         /* 256 KiB rows (RDPS_MAX_DIM) */
#define PULL_ROWS 36           /* 9 MiB replies: over the 8 MiB high-water mark */
#define PULLS 3

static struct rdps_server *srv;
static struct rdps_ipconfig ipc;
static pthread_t srv_thread;
static int srv_ret, port;

static void *serve(void *arg)
{
	(void)arg;
	srv_ret = rdps_server_run(srv);
	return NULL;
}

static void start(void)
{
	struct rdps_server_config cfg = { .transport = "tcp", .num_tables = 1 };
	char text[64], err[512];

	port = rdps_test_free_ports(1);
	cr_assert_gt(port, 0);
	snprintf(text, sizeof(text), "127.0.0.1 %d\n", port);
	cr_assert_eq(rdps_ipconfig_parse("test", text, &ipc, err, sizeof(err)), 0, "%s", err);
	cfg.ipc = &ipc;
	cfg.tables[0] = (struct rdps_server_table_config){ .num_rows = WIDE_ROWS,
		.dim = WIDE_DIM, .init = RDPS_INIT_UNIFORM, .init_range = 0.5f,
		.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
	snprintf(cfg.tables[0].name, sizeof(cfg.tables[0].name), "wide");
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&srv_thread, NULL, serve, NULL), 0);
}

static void stop(void)
{
	rdps_server_stop(srv);
	pthread_join(srv_thread, NULL);
	rdps_server_destroy(srv);
	rdps_ipconfig_free(&ipc);
}

TestSuite(pipelining, .init = start, .fini = stop, .timeout = 60);

Test(pipelining, pipelined_pulls_over_the_high_water_mark_are_all_answered)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 10 };
	struct rdps_wire_hello hl = { .client_id = 0, .num_clients = 1 };
	struct rdps_wire_hdr h;
	struct {
		struct rdps_wire_hdr h;
		struct rdps_wire_rows rows;
		uint64_t ids[PULL_ROWS];
	} req[PULLS];
	size_t reply = (size_t)PULL_ROWS * WIDE_DIM * 4;
	float *rows = malloc(reply);
	char *welcome;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(rows && s >= 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(rdps_test_wait_port("127.0.0.1", port, 10000), 0);
	cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	rdps_wire_hdr_init(&h, RDPS_REQ_HELLO, sizeof(hl), 0);
	cr_assert_eq(send(s, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
	cr_assert_eq(send(s, &hl, sizeof(hl), MSG_NOSIGNAL), (ssize_t)sizeof(hl));
	cr_assert_eq(rdps_test_recv_all(s, &h, sizeof(h)), 0, "no hello reply");
	cr_assert_eq(h.status, 0);
	welcome = malloc(h.len ? h.len : 1);
	cr_assert_eq(rdps_test_recv_all(s, welcome, h.len), 0);
	free(welcome);

	/* Every pull in one write: the server reads them together. */
	for (int k = 0; k < PULLS; k++) {
		rdps_wire_hdr_init(&req[k].h, RDPS_REQ_PULL,
				   sizeof(req[k].rows) + sizeof(req[k].ids), 0);
		req[k].rows = (struct rdps_wire_rows){ .table = 0, .n = PULL_ROWS };
		for (int i = 0; i < PULL_ROWS; i++)
			req[k].ids[i] = (uint64_t)((i + k) % WIDE_ROWS);
	}
	cr_assert_eq(send(s, req, sizeof(req), MSG_NOSIGNAL), (ssize_t)sizeof(req));

	for (int k = 0; k < PULLS; k++) {
		cr_assert_eq(rdps_test_recv_all(s, &h, sizeof(h)), 0,
			     "reply %d of %d never came (the server stalled)", k + 1, PULLS);
		cr_assert_eq(h.type, RDPS_REQ_PULL | RDPS_WIRE_REPLY);
		cr_assert_eq(h.status, 0);
		cr_assert_eq(h.len, reply);
		cr_assert_eq(rdps_test_recv_all(s, rows, reply), 0, "reply %d cut short", k + 1);
		/* uniform init in [-0.5, 0.5]: not all zero */
		cr_assert(rows[0] != 0.0f || rows[WIDE_DIM - 1] != 0.0f);
	}
	close(s);
	free(rows);
}
