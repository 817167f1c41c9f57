// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * Pull batches (rdps_client_pull_start/finish) against 2 TCP servers: an
 * entity and a relation pull in flight together give exactly what
 * row-by-row pulls give (unsorted ids over both servers, repeats, two
 * requests per server), again with the batch's buffers reused; while a
 * batch is in flight the client refuses what would break it, with a
 * reason, and is usable again after finish (or after destroying the batch).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "rdps/client.h"
#include "rdps_test.h"

#define ENT_ROWS 611
#define ENT_DIM 1031 /* 4124-byte rows: 4500 rows per server are two requests */
#define ENT_N 9000
#define REL_ROWS 13
#define REL_DIM 8
#define REL_N 40

static char *dir, logs[2][512];
static pid_t srv[2];
static struct rdps_client *c;
static struct rdps_table_info ent, rel;
static float *ent_truth, *rel_truth;

static void setup(void)
{
	char text[128], sid[2][8], *ipc;
	struct rdps_client_params p = { .transport = "tcp", .num_clients = 1, .quiet = true,
					.timeout_ms = 20000 };
	int base = rdps_test_free_ports(2);
	char err[512];

	dir = rdps_test_tmpdir("pull_batch");
	cr_assert(dir && base > 0);
	snprintf(text, sizeof(text), "127.0.0.1 %d 2\n", base);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	cr_assert(ipc);
	for (int s = 0; s < 2; s++) {
		char *argv[] = { RDPS_BIN, "server", "--ip_config", ipc, "--server_id", sid[s],
				 "--transport", "tcp", "--table", "entity:611:1031", "--table",
				 "relation:13:8", "--init", "uniform", "--seed", "7", NULL };

		snprintf(sid[s], sizeof(sid[s]), "%d", s);
		snprintf(logs[s], sizeof(logs[s]), "%s/server%d.log", dir, s);
		srv[s] = rdps_test_spawn(argv, logs[s]);
		cr_assert_gt(srv[s], 0);
	}
	p.ip_config = ipc;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	free(ipc);
	cr_assert_eq(rdps_client_table(c, "entity", &ent), 0);
	cr_assert_eq(rdps_client_table(c, "relation", &rel), 0);
	cr_assert(ent.dim == ENT_DIM && rel.dim == REL_DIM);
	ent_truth = malloc(sizeof(float) * ENT_ROWS * ENT_DIM);
	rel_truth = malloc(sizeof(float) * REL_ROWS * REL_DIM);
	cr_assert(ent_truth && rel_truth);
	for (uint64_t id = 0; id < ENT_ROWS; id++)
		cr_assert_eq(rdps_client_pull(c, ent.id, &id, 1, ent_truth + id * ENT_DIM), 0, "%s",
			     rdps_client_errmsg(c));
	for (uint64_t id = 0; id < REL_ROWS; id++)
		cr_assert_eq(rdps_client_pull(c, rel.id, &id, 1, rel_truth + id * REL_DIM), 0, "%s",
			     rdps_client_errmsg(c));
}

static void teardown(void)
{
	int st;

	if (c) {
		cr_assert_eq(rdps_client_shutdown_servers(c), 0, "%s", rdps_client_errmsg(c));
		rdps_client_destroy(c);
	}
	for (int s = 0; s < 2; s++) {
		cr_assert_eq(rdps_test_wait(srv[s], 10000, &st), 0, "server %d did not exit", s);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server %d failed", s);
	}
	free(ent_truth);
	free(rel_truth);
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(pull_batch, .init = setup, .fini = teardown, .timeout = 120);

static void check_rows(const float *got, const float *truth, const uint64_t *ids, size_t n,
		       uint32_t dim, const char *what)
{
	for (size_t i = 0; i < n; i++)
		cr_assert(!memcmp(got + i * dim, truth + ids[i] * dim, dim * sizeof(float)),
			  "%s: row %zu (id %llu) differs", what, i, (unsigned long long)ids[i]);
}

Test(pull_batch, entity_and_relation_in_flight_together)
{
	uint64_t *eids = malloc(sizeof(uint64_t) * ENT_N), rids[REL_N];
	float *erows = malloc(sizeof(float) * ENT_N * ENT_DIM);
	float rrows[REL_N * REL_DIM], grad[REL_DIM] = { 0 };
	struct rdps_pull_batch *b;

	cr_assert(eids && erows);
	cr_assert_eq(rdps_client_pull_batch_create(c, &b), 0);
	for (int round = 0; round < 2; round++) { /* the second reuses the buffers */
		for (size_t i = 0; i < ENT_N; i++) /* both servers, interleaved, repeats */
			eids[i] = (i * 389 + (size_t)round * 17) % ENT_ROWS;
		for (size_t i = 0; i < REL_N; i++)
			rids[i] = (REL_ROWS - 1 - i * 5 - (size_t)round) % REL_ROWS;
		memset(erows, 0xff, sizeof(float) * ENT_N * ENT_DIM);
		memset(rrows, 0xff, sizeof(rrows));
		cr_assert_eq(rdps_client_pull_start(c, b, ent.id, eids, ENT_N, erows), 0, "%s",
			     rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_pull_start(c, b, rel.id, rids, REL_N, rrows), 0, "%s",
			     rdps_client_errmsg(c));
		/* In flight: no other pull, and no push on these connections. */
		cr_assert_eq(rdps_client_pull(c, rel.id, rids, 1, grad), -EBUSY);
		cr_assert(strstr(rdps_client_errmsg(c), "in flight"), "%s", rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_push(c, rel.id, rids, grad, 1), -EBUSY);
		cr_assert_eq(rdps_client_pull_finish(c, b), 0, "%s", rdps_client_errmsg(c));
		check_rows(erows, ent_truth, eids, ENT_N, ENT_DIM, "entity");
		check_rows(rrows, rel_truth, rids, REL_N, REL_DIM, "relation");
	}
	/* Finished: the client takes pulls and pushes again (zero gradients
	 * leave the rows as they are), and an empty finish is nothing. */
	cr_assert_eq(rdps_client_pull_finish(c, b), 0);
	cr_assert_eq(rdps_client_push(c, rel.id, rids, grad, 1), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, rel.id, rids, REL_N, rrows), 0, "%s",
		     rdps_client_errmsg(c));
	rdps_client_pull_batch_destroy(b);
	free(eids);
	free(erows);
}

Test(pull_batch, misuse_is_refused_with_a_reason)
{
	struct rdps_pull_batch *b, *b2;
	uint64_t ids[4] = { 3, 610, 0, 300 }, bad = ENT_ROWS;
	float rows[5][4 * ENT_DIM];

	cr_assert_eq(rdps_client_pull_batch_create(c, &b), 0);
	cr_assert_eq(rdps_client_pull_batch_create(c, &b2), 0);
	for (int k = 0; k < RDPS_PULL_BATCH_MAX; k++)
		cr_assert_eq(rdps_client_pull_start(c, b, ent.id, ids, 4, rows[k]), 0, "%s",
			     rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull_start(c, b, ent.id, ids, 4, rows[4]), -ENOSPC);
	cr_assert(strstr(rdps_client_errmsg(c), "at most 4 pulls"), "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull_start(c, b2, ent.id, ids, 4, rows[4]), -EBUSY);
	cr_assert(strstr(rdps_client_errmsg(c), "another pull batch"), "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull_finish(c, b), 0, "%s", rdps_client_errmsg(c));
	for (int k = 0; k < RDPS_PULL_BATCH_MAX; k++)
		check_rows(rows[k], ent_truth, ids, 4, ENT_DIM, "entity");

	/* A bad id fails its start; the pull started before stays in flight
	 * and completes. */
	memset(rows, 0, sizeof(rows));
	cr_assert_eq(rdps_client_pull_start(c, b2, rel.id, ids, 1, rows[0]), 0);
	cr_assert_eq(rdps_client_pull_start(c, b2, ent.id, &bad, 1, rows[1]), -ERANGE);
	cr_assert(strstr(rdps_client_errmsg(c), "id 611 is out of range for table 'entity'"), "%s",
		  rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull_start(c, b2, 9, ids, 1, rows[1]), -ENOENT);
	cr_assert_eq(rdps_client_pull_finish(c, b2), 0, "%s", rdps_client_errmsg(c));
	check_rows(rows[0], rel_truth, ids, 1, REL_DIM, "relation");

	/* A batch destroyed in flight leaves no pull pending. */
	cr_assert_eq(rdps_client_pull_start(c, b2, ent.id, ids, 4, rows[0]), 0);
	rdps_client_pull_batch_destroy(b2);
	cr_assert_eq(rdps_client_pull(c, ent.id, ids, 4, rows[1]), 0, "%s", rdps_client_errmsg(c));
	check_rows(rows[1], ent_truth, ids, 4, ENT_DIM, "entity");
	rdps_client_pull_batch_destroy(b);
	rdps_client_pull_batch_destroy(NULL);
}
