// SPDX-License-Identifier: MIT
/*
 * Persistent servers (--keep-alive): a job ends (its client asks the
 * servers to shut down and leaves), the server stays, and the next job, of
 * another size, attaches to the same tables and finds them as the first
 * job left them; an observer's shutdown (rdps shutdown) still stops it.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/server.h"
#include "rdps_test.h"

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static struct rdps_client *client(struct rdps_ipconfig *ipc, uint32_t id, uint32_t n, bool obs)
{
	struct rdps_client_params p = { .servers = ipc, .transport = "tcp", .client_id = id,
					.num_clients = n, .timeout_ms = 10000, .observer = obs,
					.quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

Test(keepalive, next_job_finds_the_tables_as_left)
{
	struct rdps_ipconfig ipc;
	struct rdps_server_config cfg = { .transport = "tcp", .ipc = &ipc, .num_tables = 1,
					  .keep_alive = true };
	struct rdps_server *srv;
	struct rdps_client *c, *c2;
	pthread_t th;
	char text[64], err[512];
	uint64_t ids[2] = { 3, 8 };
	float g[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];

	snprintf(text, sizeof(text), "127.0.0.1 %d\n", rdps_test_free_ports(1));
	cr_assert_eq(rdps_ipconfig_parse("t", text, &ipc, err, sizeof(err)), 0);
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = 10,
		.dim = 4, .init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD, .lr = 1.0f };
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&th, NULL, serve, srv), 0);

	/* Job 1: one client trains, then asks the servers to stop. */
	c = client(&ipc, 0, 1, false);
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 2), 0);
	cr_assert_eq(rdps_client_shutdown_servers(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	cr_assert(!rdps_server_done(srv), "a keep-alive server obeyed the job's shutdown");

	/* Job 2, of two clients, attaches to the same tables. */
	c = client(&ipc, 0, 2, false);
	c2 = client(&ipc, 1, 2, false);
	cr_assert_eq(rdps_client_pull(c2, 0, ids, 2, out), 0, "%s", rdps_client_errmsg(c2));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(out[i], -g[i], "row %llu[%d] = %g", (unsigned long long)ids[i / 4],
			     i % 4, out[i]);
	rdps_client_destroy(c);
	rdps_client_destroy(c2);

	/* rdps shutdown (an observer) stops it. */
	c = client(&ipc, 0, 1, true);
	cr_assert_eq(rdps_client_shutdown_servers(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	pthread_join(th, NULL);
	cr_assert(rdps_server_done(srv));
	rdps_server_destroy(srv);
	rdps_ipconfig_free(&ipc);
}

/* A lease: a server whose job is gone exits by itself. */
Test(keepalive, job_timeout_ends_a_server_without_clients, .timeout = 30)
{
	struct rdps_ipconfig ipc;
	struct rdps_server_config cfg = { .transport = "tcp", .ipc = &ipc, .num_tables = 1,
					  .job_timeout_ms = 700 };
	struct rdps_server *srv;
	struct rdps_client *c;
	pthread_t th;
	char text[64], err[512];
	uint64_t t0;

	snprintf(text, sizeof(text), "127.0.0.1 %d\n", rdps_test_free_ports(1));
	cr_assert_eq(rdps_ipconfig_parse("t", text, &ipc, err, sizeof(err)), 0);
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = 10,
							   .dim = 4, .lr = 0.1f };
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&th, NULL, serve, srv), 0);
	/* A connected client holds the lease, longer than the timeout ... */
	c = client(&ipc, 0, 1, false);
	usleep(1500000);
	cr_assert(!rdps_server_done(srv), "the server left while its job was connected");
	/* ... and once the job is gone, the server goes too. */
	rdps_client_destroy(c);
	t0 = rdps_now_ns();
	while (!rdps_server_done(srv) && rdps_now_ns() - t0 < 5000000000ull)
		usleep(10000);
	cr_assert(rdps_server_done(srv), "the server outlived its job's lease");
	pthread_join(th, NULL);
	rdps_server_destroy(srv);
	rdps_ipconfig_free(&ipc);
}
