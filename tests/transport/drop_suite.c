// SPDX-License-Identifier: MIT
/*
 * A table dropped while another client may still read it one-sidedly
 * (servers of the public API in threads, clients of the public API): the
 * server retires the table's region (transport/retire.h) instead of
 * deregistering it, so the late reader's pull fails with a clean error
 * naming the table, and its connection, other tables included, goes on.
 * (On main the READ hit a deregistered key: a remote access error failed
 * the whole connection, and the other table's pull with it.)
 *
 * Over ofi (libfabric's tcp;ofi_rxm on loopback) here; over verbs where
 * RDPS_TEST_TRANSPORTS names it, on RDPS_TEST_HOST (the soft-RoCE guest:
 * tests/softroce/verbs.sh).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/client.h"
#include "rdps/server.h"
#include "rdps_test.h"
#include "tests/integration/ofi_env.h"

#define SERVERS 2
#define ROWS 500
#define DIM 8

struct job {
	const char *transport;
	struct rdps_ipconfig ipc;
	struct rdps_server *srv[SERVERS];
	pthread_t thr[SERVERS];
};

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static const char *test_host(void)
{
	const char *h = getenv("RDPS_TEST_HOST");

	return h && *h ? h : "127.0.0.1";
}

/* verbs where RDPS_TEST_TRANSPORTS says so, else ofi (or skip). */
static const char *rdma_transport(void)
{
	const char *t = getenv("RDPS_TEST_TRANSPORTS");

	if (t && !strncmp(t, "verbs", 5))
		return "verbs";
	if (!rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA reads here");
	return "ofi";
}

static void job_start(struct job *j)
{
	char text[256] = "", err[640];
	int port = rdps_test_free_ports(SERVERS);

	memset(j, 0, sizeof(*j));
	j->transport = rdma_transport();
	for (int s = 0; s < SERVERS; s++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s %d\n", test_host(),
			 port + s);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < SERVERS; s++) {
		/* In the guest the clients come from the rxe address, not the
		 * loopback: served without a secret only when allowed. */
		struct rdps_server_config cfg = { .transport = j->transport, .ipc = &j->ipc,
						  .server_id = s, .num_tables = 1,
						  .allow_unauthenticated = true };

		cfg.tables[0] = (struct rdps_server_table_config){
			.name = "entity", .num_rows = ROWS, .dim = DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->thr[s], NULL, serve, j->srv[s]), 0);
	}
}

static void job_stop(struct job *j)
{
	for (int s = 0; s < SERVERS; s++) {
		rdps_server_stop(j->srv[s]);
		pthread_join(j->thr[s], NULL);
		rdps_server_destroy(j->srv[s]);
	}
	rdps_ipconfig_free(&j->ipc);
}

static struct rdps_client *client(struct job *j, uint32_t id)
{
	struct rdps_client_params cp = { .transport = j->transport, .servers = &j->ipc,
					 .client_id = id, .num_clients = 2, .timeout_ms = 30000,
					 .quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&cp, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

Test(drop, a_late_read_of_a_dropped_table_fails_that_pull_not_the_connection, .timeout = 180)
{
	struct rdps_table_spec spec = { .name = "dropme", .num_rows = ROWS, .elems = DIM,
					.dtype = RDPS_DTYPE_F32, .init_range = 0.5f, .seed = 3 };
	static uint64_t ids[ROWS];
	static float out[ROWS * DIM], g[ROWS * DIM];
	struct rdps_table_info ta, tb, te;
	struct rdps_client *a, *b;
	struct job j;
	int ret;

	job_start(&j);
	a = client(&j, 0);
	b = client(&j, 1);
	cr_assert_eq(rdps_client_table_create(a, &spec, &ta), 0, "%s", rdps_client_errmsg(a));
	cr_assert_eq(rdps_client_table(b, "dropme", &tb), 0, "%s", rdps_client_errmsg(b));
	cr_assert_eq(rdps_client_table(b, "entity", &te), 0, "%s", rdps_client_errmsg(b));
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = (i * 7) % ROWS;
	cr_assert_eq(rdps_client_pull(b, tb.id, ids, ROWS, out), 0, "%s", rdps_client_errmsg(b));
	/* A drops the table; B has not let go of it. */
	cr_assert_eq(rdps_client_table_drop(a, "dropme"), 0, "%s", rdps_client_errmsg(a));
	ret = rdps_client_pull(b, tb.id, ids, ROWS, out);
	cr_log_info("a pull of the dropped table: %d: %s", ret, rdps_client_errmsg(b));
	cr_assert_eq(ret, -ENOENT, "a pull of the dropped table gave %d: %s", ret,
		     rdps_client_errmsg(b));
	cr_assert(strstr(rdps_client_errmsg(b), "'dropme'"), "the error names no table: %s",
		  rdps_client_errmsg(b));
	/* B's connections go on: its other table, pushes and flushes. */
	for (uint64_t i = 0; i < ROWS * DIM; i++)
		g[i] = -1.0f;
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	cr_assert_eq(rdps_client_push(b, te.id, ids, g, ROWS), 0, "%s", rdps_client_errmsg(b));
	cr_assert_eq(rdps_client_flush(b), 0, "%s", rdps_client_errmsg(b));
	cr_assert_eq(rdps_client_pull(b, te.id, ids, ROWS, out), 0,
		     "the other table's pull after the drop: %s", rdps_client_errmsg(b));
	for (uint64_t i = 0; i < ROWS * DIM; i++)
		cr_assert_eq(out[i], 1.0f, "entity row %llu = %g", (unsigned long long)(i / DIM),
			     out[i]);
	rdps_client_destroy(b);
	rdps_client_destroy(a);
	job_stop(&j);
}
