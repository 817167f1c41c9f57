// SPDX-License-Identifier: MIT
/*
 * Pushes gathered from the caller's rows (push_gather, no grouping copy):
 * batches whose ids alternate between two servers in runs, with duplicates,
 * wide rows (a TCP frame of more pieces than one sendmsg takes) and odd
 * rows (wire padding). After a flush every row must equal minus the sum of
 * its gradients, exactly (SGD, lr 1, zero tables, gradients multiples of
 * 1/4). Servers run as threads of this process; over tcp and inproc.
 * Also tcp's push_gather itself, on one connection, with a permutation.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/client.h"
#include "rdps/server.h"
#include "rdps_test.h"

#define NUM_SERVERS 2
#define WIDE_ROWS 1000
#define WIDE_DIM 400
#define ODD_ROWS 101
#define ODD_DIM 13
#define N 1201 /* rows per push: odd */
#define ROUNDS 4

struct job {
	char *dir, *ipc_path;
	struct rdps_ipconfig ipc;
	struct rdps_server *srv[NUM_SERVERS];
	pthread_t th[NUM_SERVERS];
};

static void *serve(void *a)
{
	rdps_server_run(a);
	return NULL;
}

static void job_start(struct job *j, const char *transport)
{
	char text[128], err[512];
	int base = rdps_test_free_ports(NUM_SERVERS);

	cr_assert_gt(base, 0);
	j->dir = rdps_test_tmpdir("push_gather");
	snprintf(text, sizeof(text), "127.0.0.1 %d %d\n", base, NUM_SERVERS);
	j->ipc_path = rdps_test_write(j->dir, "ip_config.txt", text);
	cr_assert_eq(rdps_ipconfig_load(j->ipc_path, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < NUM_SERVERS; s++) {
		struct rdps_server_config cfg = { .transport = transport, .ipc = &j->ipc,
						  .server_id = s, .num_tables = 2 };

		cfg.tables[0] = (struct rdps_server_table_config){ .name = "wide",
			.num_rows = WIDE_ROWS, .dim = WIDE_DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cfg.tables[1] = (struct rdps_server_table_config){ .name = "odd",
			.num_rows = ODD_ROWS, .dim = ODD_DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->th[s], NULL, serve, j->srv[s]), 0);
	}
}

static void job_stop(struct job *j)
{
	for (uint32_t s = 0; s < NUM_SERVERS; s++) {
		rdps_server_stop(j->srv[s]);
		pthread_join(j->th[s], NULL);
		rdps_server_destroy(j->srv[s]);
	}
	rdps_ipconfig_free(&j->ipc);
	rdps_test_rmtree(j->dir);
	free(j->ipc_path);
	free(j->dir);
}

/* Runs of 1..4 caller rows go to one server, then the other; ids repeat. */
static uint64_t push_id(uint32_t r, uint32_t i, uint64_t rows)
{
	uint64_t half = rows / 2, k = (uint64_t)i * 37 + r * 11;

	return ((i / (1 + r % 4)) % 2 ? half : 0) + k % half;
}

static float push_grad(uint32_t r, uint32_t i, uint32_t d)
{
	return (float)((int)(i % 9) - 4 + (int)(d % 7) - (int)r) * 0.25f;
}

static void push_and_check(struct rdps_client *c, uint32_t table, uint64_t rows, uint32_t dim)
{
	uint64_t *ids = calloc(N > rows ? N : rows, sizeof(*ids));
	float *g = calloc((size_t)N * dim, sizeof(float));
	float *want = calloc(rows * dim, sizeof(float));
	float *got = calloc(rows * dim, sizeof(float));

	cr_assert(ids && g && want && got);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		for (uint32_t i = 0; i < N; i++) {
			ids[i] = push_id(r, i, rows);
			for (uint32_t d = 0; d < dim; d++) {
				g[(size_t)i * dim + d] = push_grad(r, i, d);
				want[ids[i] * dim + d] -= push_grad(r, i, d);
			}
		}
		cr_assert_eq(rdps_client_push(c, table, ids, g, N), 0, "%s", rdps_client_errmsg(c));
		/* The caller's rows are its own again. */
		memset(g, 0xff, (size_t)N * dim * sizeof(float));
	}
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	for (uint64_t i = 0; i < rows; i++)
		ids[i] = i;
	cr_assert_eq(rdps_client_pull(c, table, ids, rows, got), 0, "%s", rdps_client_errmsg(c));
	for (uint64_t i = 0; i < rows * dim; i++)
		cr_assert_eq(got[i], want[i], "table %u row %llu[%llu] = %g, want %g", table,
			     (unsigned long long)(i / dim), (unsigned long long)(i % dim), got[i],
			     want[i]);
	free(ids);
	free(g);
	free(want);
	free(got);
}

static void client_exact_sums(const char *transport)
{
	struct job j;
	struct rdps_client *c;
	struct rdps_table_info wide, odd;
	char err[640];

	job_start(&j, transport);
	{
		struct rdps_client_params p = { .servers = &j.ipc, .transport = transport,
						.client_id = 0, .num_clients = 1,
						.timeout_ms = 30000 };

		cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(rdps_client_table(c, "wide", &wide), 0);
	cr_assert_eq(rdps_client_table(c, "odd", &odd), 0);
	push_and_check(c, wide.id, WIDE_ROWS, WIDE_DIM);
	push_and_check(c, odd.id, ODD_ROWS, ODD_DIM);
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(push_gather, client_pushes_sum_exactly_tcp, .timeout = 120)
{
	client_exact_sums("tcp");
}

Test(push_gather, client_pushes_sum_exactly_inproc, .timeout = 120)
{
	client_exact_sums("inproc");
}

/* tcp's push_gather on one connection: ids in the order of a permutation
 * of the caller's rows, runs of adjacent rows included. */
Test(push_gather, tcp_push_gather_reads_rows_through_the_index, .timeout = 120)
{
	const struct rdps_transport_ops *ops = rdps_transport_find("tcp");
	enum { M = 400 };
	static uint64_t ids[M], all[WIDE_ROWS / 2];
	static uint32_t index[M];
	static float g[M * WIDE_DIM], got[WIDE_ROWS / 2 * WIDE_DIM];
	struct rdps_conn *conn;
	struct job j;
	char err[512];
	uint32_t t;

	cr_assert(ops && ops->push_gather, "tcp has no push_gather");
	job_start(&j, "tcp");
	{
		struct rdps_conn_params cp = { .host = "127.0.0.1", .port = j.ipc.servers[0].port,
					       .server_id = 0, .client_id = 0, .num_clients = 1,
					       .timeout_ms = 30000, .max_inflight_bytes = 1u << 20 };

		cr_assert_eq(ops->connect(&cp, &conn, err, sizeof(err)), 0, "%s", err);
	}
	for (t = 0; t < conn->num_tables && strcmp(conn->tables[t].name, "wide"); t++)
		;
	cr_assert_lt(t, conn->num_tables);
	/* Caller row i holds id i; the push sends them in the order of index:
	 * a stride-7 walk, with every 10th step a run of the next rows. */
	for (uint32_t i = 0; i < M; i++)
		for (uint32_t d = 0; d < WIDE_DIM; d++)
			g[(size_t)i * WIDE_DIM + d] = (float)i + (float)d * 0.25f;
	for (uint32_t k = 0; k < M; k++) {
		index[k] = k % 10 < 3 ? (k / 10 * 10 * 7 + k % 10) % M : (k * 7) % M;
		ids[k] = index[k];
	}
	cr_assert_eq(ops->push_gather(conn, t, ids, g, index, M), 0, "%s", conn->errmsg);
	cr_assert_eq(ops->call(conn, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0), 0, "%s", conn->errmsg);
	for (uint32_t i = 0; i < WIDE_ROWS / 2; i++)
		all[i] = i;
	cr_assert_eq(ops->pull_post(conn, t, all, WIDE_ROWS / 2, got), 0, "%s", conn->errmsg);
	cr_assert_eq(ops->pull_wait(conn), 0, "%s", conn->errmsg);
	{
		static float want[WIDE_ROWS / 2 * WIDE_DIM];

		for (uint32_t k = 0; k < M; k++)
			for (uint32_t d = 0; d < WIDE_DIM; d++)
				want[ids[k] * WIDE_DIM + d] -= g[(size_t)index[k] * WIDE_DIM + d];
		for (uint32_t i = 0; i < WIDE_ROWS / 2 * WIDE_DIM; i++)
			cr_assert_eq(got[i], want[i], "row %u[%u] = %g, want %g", i / WIDE_DIM,
				     i % WIDE_DIM, got[i], want[i]);
	}
	ops->close(conn);
	job_stop(&j);
}
