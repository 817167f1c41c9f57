// SPDX-License-Identifier: MIT
// ctest-timeout: 240
/*
 * A server with several threads (--num_server_threads): 8 clients pushing
 * to the same hot rows through a server of 4 threads leave exact sums (TCP
 * and in-process); a checkpoint written while clients push holds every row
 * whole, as of one moment, and the pushes go on while it is written.
 *
 * Controls: the shards' lock-wait counter shows that two threads applied to
 * one stripe at the same moment (the race the stripes resolve happened),
 * and the server's count of rows pushed while the checkpoint was written
 * shows that pushes did not wait for it.
 *
 * Over verbs (each server thread its own completion queue and receive
 * queue) the tests run where RDPS_TEST_TRANSPORTS names verbs, on the
 * device address RDPS_TEST_HOST: in the soft-RoCE guest (verbs.sh).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvstore/checkpoint.h"
#include "rdps/client.h"
#include "rdps/server.h"
#include "rdps_test.h"

#define CLIENTS 8
#define THREADS 4
#define HOT_ROWS 64
#define HOT_DIM 128
#define PUSHES 150
#define MAX_ROUNDS 20 /* of PUSHES, until two threads met at a stripe */

struct job {
	const char *transport;
	struct rdps_ipconfig ipc;
	struct rdps_server *srv;
	pthread_t srv_thread;
	uint32_t num_clients;
	uint64_t num_rows;
	uint32_t dim, batch, pushes;
	size_t inflight;          /* unacknowledged push bytes per client (0: default) */
	volatile int stop;        /* pushers of the checkpoint test: until set */
	uint64_t pushed[CLIENTS]; /* rows pushed by each pusher */
	char err[CLIENTS][640];
};

struct pusher {
	struct job *j;
	uint32_t id;
};

/* rdma_cm needs a device's address. */
static const char *test_host(void)
{
	const char *h = getenv("RDPS_TEST_HOST");

	return h && *h ? h : "127.0.0.1";
}

/* Verbs tests run only where RDPS_TEST_TRANSPORTS names verbs. */
static void need_verbs(void)
{
	const char *t = getenv("RDPS_TEST_TRANSPORTS");

	if (!t || !strstr(t, "verbs"))
		cr_skip_test("over verbs only where RDPS_TEST_TRANSPORTS names it (the soft-RoCE "
			     "guest)");
}

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static void job_start(struct job *j, const char *transport, uint64_t rows, uint32_t dim,
		      const char *ckpt_dir)
{
	struct rdps_server_config cfg = { .transport = transport, .ipc = &j->ipc, .num_tables = 1,
					  .num_threads = THREADS, .checkpoint_dir = ckpt_dir,
					  .allow_unauthenticated = rdps_test_remote_host() };
	char text[64], err[640];

	j->transport = transport;
	j->num_rows = rows;
	j->dim = dim;
	snprintf(text, sizeof(text), "%s %d\n", test_host(), rdps_test_free_ports(1));
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0);
	/* SGD with lr 1 and gradients of -1: a push adds exactly 1 to its rows. */
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = rows,
		.dim = dim, .init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD, .lr = 1.0f };
	cr_assert_eq(rdps_server_create(&cfg, &j->srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&j->srv_thread, NULL, serve, j->srv), 0);
}

static void job_stop(struct job *j)
{
	rdps_server_stop(j->srv);
	pthread_join(j->srv_thread, NULL);
	rdps_server_destroy(j->srv);
	rdps_ipconfig_free(&j->ipc);
}

static struct rdps_client *connect_client(struct job *j, uint32_t id, bool observer,
					  char *err, size_t errlen)
{
	struct rdps_client_params cp = { .transport = j->transport, .servers = &j->ipc,
					 .client_id = id, .num_clients = j->num_clients,
					 .timeout_ms = 30000, .quiet = true, .observer = observer,
					 .max_inflight_bytes = j->inflight };
	struct rdps_client *c;

	return rdps_client_create(&cp, &c, err, errlen) ? NULL : c;
}

/* Pushes +1 to batch rows at a time: every hot row in the first test
 * (each client in its own order), random rows in the second (until stop). */
static void *push_main(void *arg)
{
	struct pusher *p = arg;
	struct job *j = p->j;
	char *err = j->err[p->id];
	struct rdps_client *c = connect_client(j, p->id, false, err, 640);
	uint64_t *ids = malloc(j->batch * sizeof(uint64_t)), x = p->id * 7919 + 1, waits;
	float *g = malloc((size_t)j->batch * j->dim * sizeof(float));

	if (!c || !ids || !g) {
		if (!err[0])
			snprintf(err, 640, "client %u: no memory", p->id);
		goto out;
	}
	for (size_t i = 0; i < (size_t)j->batch * j->dim; i++)
		g[i] = -1.0f;
	for (uint32_t round = 0; round < MAX_ROUNDS; round++) {
		for (uint32_t n = 0; j->pushes ? n < j->pushes : !j->stop; n++) {
			for (uint32_t i = 0; i < j->batch; i++) {
				if (j->pushes) {
					/* a permutation of the hot rows */
					ids[i] = (i * (2 * p->id + 1) + n) % j->num_rows;
				} else {
					x = x * 6364136223846793005ull + 1442695040888963407ull;
					ids[i] = (x >> 33) % j->num_rows;
				}
			}
			if (rdps_client_push(c, 0, ids, g, j->batch)) {
				snprintf(err, 640, "client %u: push: %s", p->id, rdps_client_errmsg(c));
				goto out;
			}
			__atomic_store_n(&j->pushed[p->id], j->pushed[p->id] + j->batch,
					 __ATOMIC_RELAXED);
		}
		if (!j->pushes)
			break;
		/* Every push of the round applied: all read the same count,
		 * and none pushes again before all have read it. */
		if (rdps_client_barrier(c)) {
			snprintf(err, 640, "client %u: barrier: %s", p->id, rdps_client_errmsg(c));
			goto out;
		}
		waits = rdps_shard_lock_waits(rdps_server_shard(j->srv, 0));
		if (rdps_client_barrier(c)) {
			snprintf(err, 640, "client %u: barrier: %s", p->id, rdps_client_errmsg(c));
			goto out;
		}
		if (waits)
			break;
	}
	if (rdps_client_flush(c))
		snprintf(err, 640, "client %u: flush: %s", p->id, rdps_client_errmsg(c));
out:
	free(ids);
	free(g);
	rdps_client_destroy(c);
	return NULL;
}

static void start_pushers(struct job *j, pthread_t *th, struct pusher *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		p[i] = (struct pusher){ j, i };
		cr_assert_eq(pthread_create(&th[i], NULL, push_main, &p[i]), 0);
	}
}

static void join_pushers(struct job *j, pthread_t *th, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(j->err[i][0], '\0', "%s", j->err[i]);
	}
}

static void exact_sums(const char *transport)
{
	struct job j = { .num_clients = CLIENTS, .batch = HOT_ROWS, .pushes = PUSHES };
	pthread_t th[CLIENTS];
	struct pusher p[CLIENTS];
	struct rdps_server_stats st;
	uint64_t ids[HOT_ROWS], waits = 0, want = 0;
	float *rows = malloc(HOT_ROWS * HOT_DIM * sizeof(float));
	struct rdps_client *c;
	char err[640];

	cr_assert(rows);
	job_start(&j, transport, HOT_ROWS, HOT_DIM, NULL);
	/* Rounds until two threads met at a stripe (on two cores, within the
	 * first few). */
	start_pushers(&j, th, p, CLIENTS);
	join_pushers(&j, th, CLIENTS);
	/* Each push adds 1 to every hot row. */
	for (uint32_t i = 0; i < CLIENTS; i++)
		want += j.pushed[i] / HOT_ROWS;
	waits = rdps_shard_lock_waits(rdps_server_shard(j.srv, 0));
	cr_assert_gt(waits, 0, "control: no two server threads ever applied to one stripe at "
		     "the same moment; the test shows nothing");
	c = connect_client(&j, 0, false, err, sizeof(err));
	cr_assert(c, "%s", err);
	for (uint32_t i = 0; i < HOT_ROWS; i++)
		ids[i] = i;
	cr_assert_eq(rdps_client_pull(c, 0, ids, HOT_ROWS, rows), 0, "%s", rdps_client_errmsg(c));
	for (uint32_t i = 0; i < HOT_ROWS * HOT_DIM; i++)
		cr_assert_eq(rows[i], (float)want, "row %u element %u: %.0f, want %llu (lost updates)",
			     i / HOT_DIM, i % HOT_DIM, rows[i], (unsigned long long)want);
	cr_assert_eq(rdps_client_server_stats(c, 0, &st), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(st.rows_pushed, want * HOT_ROWS, "the server counted %llu rows pushed, want %llu",
		     (unsigned long long)st.rows_pushed, (unsigned long long)(want * HOT_ROWS));
	cr_log_info("%s: %llu pushes of %d rows by %d clients through %d server threads; "
		    "stripe waits %llu", transport, (unsigned long long)want, HOT_ROWS, CLIENTS,
		    THREADS, (unsigned long long)waits);
	rdps_client_destroy(c);
	job_stop(&j);
	free(rows);
}

TestSuite(server_threads, .timeout = 240);

Test(server_threads, tcp_four_threads_eight_clients_exact_sums)
{
	exact_sums("tcp");
}

Test(server_threads, inproc_four_threads_eight_clients_exact_sums)
{
	exact_sums("inproc");
}

Test(server_threads, verbs_four_threads_eight_clients_exact_sums)
{
	need_verbs();
	exact_sums("verbs");
}

#define CK_ROWS 200000
#define CK_DIM 16
#define CK_PUSHERS 4
#define CK_WINDOW (64u << 10)

/* A checkpoint requested while 4 clients push random rows: restored, each
 * row is whole (every element the same count of pushes: no push half in
 * it), and the total lies between the rows pushed before the request and
 * after the reply. */
static void checkpoint_while_pushing(const char *transport)
{
	/* A small window: a client goes on pushing only while the server applies. */
	struct job j = { .num_clients = CK_PUSHERS, .batch = 256, .inflight = CK_WINDOW };
	char *dir = rdps_test_tmpdir("ckthreads"), err[640];
	struct rdps_shard_params sp = { .name = "entity", .dim = CK_DIM, .num_rows = CK_ROWS,
					.lo = 0, .hi = CK_ROWS, .init = RDPS_INIT_ZEROS,
					.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
	struct rdps_server_stats before, after;
	pthread_t th[CK_PUSHERS];
	struct pusher p[CK_PUSHERS];
	struct rdps_ckpt_info info;
	struct rdps_shard *restored;
	struct rdps_client *obs;
	uint64_t total = 0, during = 0, pushed0[CK_PUSHERS], least = 0;
	float *rows;
	int tries;

	cr_assert(dir);
	job_start(&j, transport, CK_ROWS, CK_DIM, dir);
	start_pushers(&j, th, p, CK_PUSHERS);
	/* Every pusher connected (one per server thread) before the observer:
	 * its thread, which takes the checkpoint request, serves a pusher. */
	for (int i = 0, waited = 0; i < CK_PUSHERS; i++)
		while (!__atomic_load_n(&j.pushed[i], __ATOMIC_RELAXED)) {
			cr_assert_lt(waited++, 30000, "pusher %d did not push within 30 s", i);
			usleep(1000);
		}
	obs = connect_client(&j, 0, true, err, sizeof(err));
	cr_assert(obs, "%s", err);
	/* Checkpoints until one was written with pushes applied meanwhile (the
	 * first, unless the pushers had not connected yet). */
	for (tries = 0; tries < 10 && (!during || least < 4 * CK_WINDOW / (CK_DIM * 4)); tries++) {
		cr_assert_eq(rdps_client_server_stats(obs, 0, &before), 0, "%s",
			     rdps_client_errmsg(obs));
		for (int i = 0; i < CK_PUSHERS; i++)
			pushed0[i] = __atomic_load_n(&j.pushed[i], __ATOMIC_RELAXED);
		cr_assert_eq(rdps_client_checkpoint(obs), 0, "%s", rdps_client_errmsg(obs));
		least = UINT64_MAX;
		for (int i = 0; i < CK_PUSHERS; i++) {
			uint64_t n = __atomic_load_n(&j.pushed[i], __ATOMIC_RELAXED) - pushed0[i];

			least = n < least ? n : least;
		}
		cr_assert_eq(rdps_client_server_stats(obs, 0, &after), 0, "%s",
			     rdps_client_errmsg(obs));
		during = after.ckpt_rows_during;
	}
	j.stop = 1;
	join_pushers(&j, th, CK_PUSHERS);
	cr_assert_gt(during, 0, "control: no push was applied while a checkpoint was written "
		     "(%d checkpoints): the appliers waited for it, or nothing pushed", tries);
	/* Each client's pushes went on (beyond its window of unacknowledged
	 * bytes) while the checkpoint was requested and written: none of
	 * them waited for it, whichever server thread serves it. */
	cr_assert_geq(least, 4 * CK_WINDOW / (CK_DIM * 4), "a client pushed only %llu rows while "
		      "the checkpoint was written: its pushes waited for the checkpoint",
		      (unsigned long long)least);

	/* The newest checkpoint is the one just written. */
	cr_assert_eq(rdps_shard_create(&sp, &restored), 0);
	cr_assert_eq(rdps_ckpt_restore(dir, 0, &restored, 1, &info, err, sizeof(err)), 0, "%s",
		     err);
	free(info.job.pushed_rows);
	rows = malloc((size_t)CK_ROWS * CK_DIM * sizeof(float));
	cr_assert(rows);
	rdps_shard_export(restored, rows, NULL);
	for (uint64_t r = 0; r < CK_ROWS; r++) {
		const float *row = rows + r * CK_DIM;

		for (int d = 1; d < CK_DIM; d++)
			cr_assert_eq(row[d], row[0], "row %llu of the checkpoint is torn: element %d "
				     "is %.0f, element 0 %.0f", (unsigned long long)r, d, row[d], row[0]);
		total += (uint64_t)row[0];
	}
	cr_assert(total >= before.rows_pushed && total <= after.rows_pushed,
		  "the checkpoint holds %llu row updates, not within the %llu pushed before the "
		  "request and the %llu after its reply", (unsigned long long)total,
		  (unsigned long long)before.rows_pushed, (unsigned long long)after.rows_pushed);
	cr_log_info("%s: checkpoint of %d rows: %llu row updates in it, %llu pushed before, %llu "
		    "after, %llu while it was written; each client pushed %llu rows or more "
		    "meanwhile", transport, CK_ROWS, (unsigned long long)total,
		    (unsigned long long)before.rows_pushed, (unsigned long long)after.rows_pushed,
		    (unsigned long long)during, (unsigned long long)least);
	free(rows);
	rdps_shard_destroy(restored);
	rdps_client_destroy(obs);
	job_stop(&j);
	rdps_test_rmtree(dir);
	free(dir);
}

Test(server_threads, checkpoint_while_pushing_holds_each_row_as_of_one_moment)
{
	checkpoint_while_pushing("tcp");
}

Test(server_threads, verbs_checkpoint_while_pushing_holds_each_row_as_of_one_moment)
{
	need_verbs();
	checkpoint_while_pushing("verbs");
}
