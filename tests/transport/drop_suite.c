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
 * And a flush goes to every server before the client waits for any:
 * with one server paused, the other's flush arrives meanwhile (on main the
 * client sent each server's flush only after the previous one's answer).
 *
 * Over ofi (libfabric's tcp;ofi_rxm on loopback) here; over verbs where
 * RDPS_TEST_TRANSPORTS names it, on RDPS_TEST_HOST (the soft-RoCE guest:
 * tests/softroce/verbs.sh).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	/* Servers polled by hand (the flush test), each of which may be
	 * paused: */
	bool by_hand;
	_Atomic bool stop, pause[SERVERS], paused[SERVERS];
};

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

struct hand {
	struct job *j;
	int s;
};

static void *serve_by_hand(void *arg)
{
	struct hand *h = arg;
	struct job *j = h->j;
	int s = h->s;

	free(h);
	while (!atomic_load(&j->stop)) {
		if (atomic_load(&j->pause[s])) {
			atomic_store(&j->paused[s], true);
			usleep(1000);
			continue;
		}
		atomic_store(&j->paused[s], false);
		if (rdps_server_poll(j->srv[s], 10) < 0)
			break;
	}
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

static void job_start(struct job *j, bool by_hand)
{
	char text[256] = "", err[640];
	int port = rdps_test_free_ports(SERVERS);

	memset(j, 0, sizeof(*j));
	j->by_hand = by_hand;
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
		if (by_hand) {
			struct hand *h = malloc(sizeof(*h));

			cr_assert(h);
			*h = (struct hand){ j, (int)s };
			cr_assert_eq(pthread_create(&j->thr[s], NULL, serve_by_hand, h), 0);
		} else {
			cr_assert_eq(pthread_create(&j->thr[s], NULL, serve, j->srv[s]), 0);
		}
	}
}

static void job_stop(struct job *j)
{
	atomic_store(&j->stop, true);
	for (int s = 0; s < SERVERS; s++) {
		atomic_store(&j->pause[s], false);
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

	job_start(&j, false);
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

struct flusher {
	struct rdps_client *c;
	int ret;
};

static void *do_flush(void *arg)
{
	struct flusher *f = arg;

	f->ret = rdps_client_flush(f->c);
	return NULL;
}

static uint64_t flushes(struct job *j, int s)
{
	struct rdps_server_stats st;

	rdps_server_get_stats(j->srv[s], &st);
	return st.requests[RDPS_REQ_FLUSH];
}

Test(flush, goes_to_every_server_before_the_client_waits_for_any, .timeout = 180)
{
	static uint64_t ids[ROWS];
	static float g[ROWS * DIM], out[ROWS * DIM];
	struct rdps_table_info te;
	struct flusher f;
	pthread_t th;
	uint64_t before;
	bool arrived = false;
	struct job j;

	job_start(&j, true);
	f.c = client(&j, 0);
	cr_assert_eq(rdps_client_table(f.c, "entity", &te), 0, "%s", rdps_client_errmsg(f.c));
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	for (uint64_t i = 0; i < ROWS * DIM; i++)
		g[i] = -1.0f;
	/* Rows of both servers, flushed once while both serve. */
	cr_assert_eq(rdps_client_push(f.c, te.id, ids, g, ROWS), 0, "%s", rdps_client_errmsg(f.c));
	cr_assert_eq(rdps_client_flush(f.c), 0, "%s", rdps_client_errmsg(f.c));
	cr_assert_eq(rdps_client_push(f.c, te.id, ids, g, ROWS), 0, "%s", rdps_client_errmsg(f.c));
	/* Server 0 stops serving; the flush must still reach server 1. */
	atomic_store(&j.pause[0], true);
	while (!atomic_load(&j.paused[0]))
		usleep(1000);
	before = flushes(&j, 1);
	cr_assert_eq(pthread_create(&th, NULL, do_flush, &f), 0);
	for (int ms = 0; ms < 10000 && !arrived; ms += 5) {
		usleep(5000);
		arrived = flushes(&j, 1) > before;
	}
	/* Meanwhile the client waits for server 0's answer: spinning at
	 * first, then asleep on its completion queue's wait object (a
	 * waiting client that spins for good takes a core from its trainer
	 * and from servers on the host). A sleeper uses ~1 ms of CPU here,
	 * a spinner 0.4 s on a loaded 2-core host (RDPS_CLIENT_SPIN_US=
	 * 10000000); a bound of 10% of a core cannot fail a sleeper however
	 * loaded the machine (it may miss a spinner starved of CPU). */
	{
		clockid_t clk;
		struct timespec c0, c1;
		double cpu;

		cr_assert_eq(pthread_getcpuclockid(th, &clk), 0);
		clock_gettime(clk, &c0);
		usleep(1500000);
		clock_gettime(clk, &c1);
		cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9;
		cr_log_info("a client waiting 1.5 s for a paused server used %.3f s of CPU", cpu);
		cr_assert_lt(cpu, 0.15, "a client waiting 1.5 s for a paused server used %.3f s of "
			     "CPU: it spins instead of sleeping", cpu);
	}
	atomic_store(&j.pause[0], false);
	pthread_join(th, NULL);
	cr_assert_eq(f.ret, 0, "%s", rdps_client_errmsg(f.c));
	cr_assert(arrived, "server 1 got no flush in 10 s while server 0 was paused: the client "
		  "waited for server 0's answer before it sent server 1's flush");
	cr_assert_eq(rdps_client_pull(f.c, te.id, ids, ROWS, out), 0, "%s",
		     rdps_client_errmsg(f.c));
	for (uint64_t i = 0; i < ROWS * DIM; i++)
		cr_assert_eq(out[i], 2.0f, "row %llu = %g", (unsigned long long)(i / DIM), out[i]);
	rdps_client_destroy(f.c);
	job_stop(&j);
}
