// SPDX-License-Identifier: MIT
/*
 * The verbs server at the scale real jobs run (inside the soft-RoCE guest,
 * run by verbs.sh; the ofi server too, over libfabric's verbs;ofi_rxm on
 * rxe, where RDPS_TEST_GUEST_TRANSPORT=ofi): 64 client connections (threads
 * of a few processes)
 * pushing and pulling concurrently over one shared receive queue, the
 * server paused meanwhile, with exact sums at the end; and clients killed
 * with pushes in flight, after
 * which every receive slot is posted again and the server still serves.
 * RDPS_TEST_HOST is the address of the guest's rxe device.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"
#include "rdps/common.h"
#include "rdps_test.h"

#define PROCS 4
#define THREADS 16
#define CLIENTS (PROCS * THREADS)
#define ROWS 4096
#define DIM 16
#define HOT 8          /* rows every client pushes to */
#define BATCH 32       /* rows per push: HOT shared + the client's own */
#define PUSHES 150     /* push messages per client before its flush */

static struct guest_server gs;

static void start(void)
{
	guest_server_start(&gs, ROWS, DIM, NULL);
}

static void stop(void)
{
	guest_server_stop(&gs);
}

TestSuite(scale, .init = start, .fini = stop, .timeout = 900);

/* The rows client c pushes in push p: the hot ones, then its own. */
static void batch_ids(uint32_t c, uint32_t p, uint64_t *ids)
{
	for (uint32_t k = 0; k < BATCH; k++)
		ids[k] = k < HOT ? k : HOT + (c * 61 + p * 7 + k * 13) % (ROWS - HOT);
}

struct shared {
	char error[CLIENTS][256];
	_Atomic uint64_t torn;
	_Atomic uint64_t sessions_seen;
};
static struct shared *sh;

static void *client_thread(void *arg)
{
	uint32_t c = (uint32_t)(uintptr_t)arg;
	struct rdps_client *cl;
	struct rdps_client_params p = { .ip_config = gs.ipc, .transport = guest_transport(),
					.client_id = c,
					.num_clients = CLIENTS, .timeout_ms = 300000,
					.barrier_timeout_ms = 600000, .quiet = true };
	static _Thread_local float g[BATCH * DIM], rows[BATCH * DIM];
	uint64_t ids[BATCH];
	char err[640];

#define FAIL_IF(cond, ...)                                                    \
	do {                                                                  \
		if (cond) {                                                   \
			snprintf(sh->error[c], sizeof(sh->error[c]), __VA_ARGS__); \
			goto out;                                             \
		}                                                             \
	} while (0)
	cl = NULL;
	FAIL_IF(rdps_client_create(&p, &cl, err, sizeof(err)), "client %u: %s", c, err);
	for (int i = 0; i < BATCH * DIM; i++)
		g[i] = -1.0f;
	for (uint32_t k = 0; k < PUSHES; k++) {
		batch_ids(c, k, ids);
		FAIL_IF(rdps_client_push(cl, 0, ids, g, BATCH), "client %u push %u: %s", c, k,
			rdps_client_errmsg(cl));
		/* Pulls while everybody pushes: each row must be whole. */
		if (k % 10 == 0) {
			FAIL_IF(rdps_client_pull(cl, 0, ids, BATCH, rows), "client %u pull: %s", c,
				rdps_client_errmsg(cl));
			for (uint32_t r = 0; r < BATCH; r++)
				for (uint32_t d = 1; d < DIM; d++)
					if (rows[r * DIM + d] != rows[r * DIM])
						atomic_fetch_add(&sh->torn, 1);
		}
	}
	FAIL_IF(rdps_client_flush(cl), "client %u flush: %s", c, rdps_client_errmsg(cl));
	FAIL_IF(rdps_client_barrier(cl), "client %u barrier: %s", c, rdps_client_errmsg(cl));
	if (c == 0) {
		struct rdps_server_stats st;

		FAIL_IF(rdps_client_server_stats(cl, 0, &st), "stats: %s", rdps_client_errmsg(cl));
		atomic_store(&sh->sessions_seen, st.rdma_sessions);
	}
	/* Nobody leaves before client 0 counted the sessions. */
	FAIL_IF(rdps_client_barrier(cl), "client %u barrier: %s", c, rdps_client_errmsg(cl));
out:
	rdps_client_destroy(cl);
	return NULL;
#undef FAIL_IF
}

static void run_process(void *arg)
{
	uint32_t proc = (uint32_t)(uintptr_t)arg;
	pthread_t th[THREADS];

	for (uint32_t t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, client_thread, (void *)(uintptr_t)(proc * THREADS + t));
	for (uint32_t t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
}

Test(scale, sixty_four_clients_push_and_pull_with_exact_sums)
{
	static float expect[ROWS], got[ROWS * DIM];
	struct rdps_server_stats st;
	pid_t pids[PROCS];
	int go[PROCS], status;
	uint64_t ids[BATCH], *all;
	struct rdps_client *c;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	for (uint32_t p = 0; p < PROCS; p++)
		pids[p] = guest_fork(&go[p], run_process, (void *)(uintptr_t)p);
	for (uint32_t p = 0; p < PROCS; p++)
		guest_release(go[p]);
	/* Once pushes flow, pause the server for 8 s: clients keep sending
	 * while it applies nothing, so only the credits stand between them and
	 * an overrun of its receive queue (the RNR retries run out in about 4 s:
	 * 6 of rdma_cm's default 655 ms timer). */
	do {
		usleep(200000);
		guest_server_stats(&gs, &st);
	} while (st.rows_pushed < (uint64_t)CLIENTS * PUSHES * BATCH / 8);
	cr_assert_eq(kill(gs.pid, SIGSTOP), 0);
	sleep(8);
	cr_assert_eq(kill(gs.pid, SIGCONT), 0);
	cr_log_info("server paused 8 s after %llu of %llu rows", (unsigned long long)st.rows_pushed,
		    (unsigned long long)CLIENTS * PUSHES * BATCH);
	for (uint32_t p = 0; p < PROCS; p++) {
		cr_assert_eq(rdps_test_wait(pids[p], 800000, &status), 0, "process %u hung", p);
		cr_assert(WIFEXITED(status) && !WEXITSTATUS(status), "process %u: status %d", p,
			  status);
	}
	{
		int failed = 0, first = -1;

		/* Every client's reason, then one verdict: the first failure
		 * is often another's consequence (a barrier left). */
		for (uint32_t i = 0; i < CLIENTS; i++)
			if (sh->error[i][0]) {
				cr_log_error("%s", sh->error[i]);
				if (first < 0 || strstr(sh->error[first], "barrier"))
					first = (int)i;
				failed++;
			}
		cr_assert_eq(failed, 0, "%d of %d clients failed, e.g. %s", failed, CLIENTS,
			     first >= 0 ? sh->error[first] : "");
	}
	cr_assert_eq(atomic_load(&sh->torn), 0, "%llu torn elements in validated pulls",
		     (unsigned long long)atomic_load(&sh->torn));
	cr_assert_eq(atomic_load(&sh->sessions_seen), CLIENTS, "the server had %llu RDMA sessions",
		     (unsigned long long)atomic_load(&sh->sessions_seen));

	/* Exact sums: every push of -1 added exactly 1. */
	for (uint32_t cl = 0; cl < CLIENTS; cl++)
		for (uint32_t k = 0; k < PUSHES; k++) {
			batch_ids(cl, k, ids);
			for (uint32_t r = 0; r < BATCH; r++)
				expect[ids[r]] += 1.0f;
		}
	all = malloc(ROWS * sizeof(*all));
	for (uint32_t r = 0; r < ROWS; r++)
		all[r] = r;
	c = guest_client(&gs, 0, 1, 60000);
	cr_assert_eq(rdps_client_pull(c, 0, all, ROWS, got), 0, "%s", rdps_client_errmsg(c));
	for (uint32_t r = 0; r < ROWS; r++)
		for (uint32_t d = 0; d < DIM; d++)
			cr_assert_eq(got[r * DIM + d], expect[r], "row %u: %g, want %g", r,
				     got[r * DIM + d], expect[r]);
	rdps_client_destroy(c);
	guest_server_stats(&gs, &st);
	cr_assert_eq(st.rows_pushed, (uint64_t)CLIENTS * PUSHES * BATCH);
	if (!strcmp(guest_transport(), "verbs")) {
		/* The pause drained the shared queue to its limit: the SRQ
		 * limit event came and was logged. */
		char *log = rdps_test_slurp(gs.log);

		cr_assert(log && strstr(log, "receive buffers ran low"),
			  "no SRQ-limit line in the server log");
		free(log);
	}
	cr_log_info("64 clients over %s: %llu rows pushed, pool of %llu receive buffers (%llu "
		    "posted), hot rows at %g", guest_transport(), (unsigned long long)st.rows_pushed,
		    (unsigned long long)st.recv_slots, (unsigned long long)st.recv_posted, expect[0]);
	free(all);
	munmap(sh, sizeof(*sh));
}

/* ---------------------------------------------------------------------- */

struct kill_shared {
	_Atomic uint64_t sent; /* rows pushed by the victim (sent, not flushed) */
};

static struct kill_shared *ks;

/* Pushes to rows [0, 100) without ever flushing, until killed. */
static void victim(void *arg)
{
	struct rdps_client *c = guest_client(&gs, 1, 2, 60000);
	uint64_t ids[200];
	static float g[200 * DIM];

	(void)arg;
	for (int i = 0; i < 200; i++)
		ids[i] = (uint64_t)(i % 100);
	for (int i = 0; i < 200 * DIM; i++)
		g[i] = -1.0f;
	for (;;) {
		if (rdps_client_push(c, 0, ids, g, 200))
			_exit(3);
		atomic_fetch_add(&ks->sent, 200);
	}
}

/* Waits until every receive slot is posted and no RDMA session is left;
 * returns how long that took (ms). */
static double wait_slots_back(struct rdps_server_stats *st, int round)
{
	uint64_t t0 = rdps_now_ns();

	for (;;) {
		guest_server_stats(&gs, st);
		if (st->rdma_sessions == 0 && st->recv_posted == st->recv_slots)
			return (rdps_now_ns() - t0) / 1e6;
		cr_assert_lt(rdps_now_ns() - t0, 30000000000ull,
			     "kill %d: after 30 s, %llu RDMA sessions, %llu of %llu receive buffers "
			     "posted", round, (unsigned long long)st->rdma_sessions,
			     (unsigned long long)st->recv_posted, (unsigned long long)st->recv_slots);
		usleep(200000);
	}
}

Test(scale, clients_killed_with_pushes_in_flight_leave_every_slot_posted)
{
	struct rdps_server_stats st;
	uint64_t in_flight_kills = 0;
	double slowest = 0, slowest_start = 0, going;
	uint64_t ids[100];
	float g[100 * DIM], got[100 * DIM];
	struct rdps_client *c;

	ks = mmap(NULL, sizeof(*ks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(ks != MAP_FAILED);
	for (int round = 0; round < 10; round++) {
		int go, status;
		uint64_t sent_at_stop, sent_at_kill;
		pid_t pid;

		uint64_t t_go;

		atomic_store(&ks->sent, 0);
		pid = guest_fork(&go, victim, NULL);
		guest_release(go);
		t_go = rdps_now_ns();
		/* Let it get going. */
		while (atomic_load(&ks->sent) < 4000) {
			cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "the pushing client died");
			usleep(1000);
		}
		going = (rdps_now_ns() - t_go) / 1e6;
		slowest_start = going > slowest_start ? going : slowest_start;
		/* Stop the server: what the victim sends from now on lands in
		 * receive slots whose completions wait in the CQ, unapplied. */
		cr_assert_eq(kill(gs.pid, SIGSTOP), 0);
		sent_at_stop = atomic_load(&ks->sent);
		usleep((useconds_t)(100000 + rand() % 200000));
		sent_at_kill = atomic_load(&ks->sent);
		kill(pid, SIGKILL);
		rdps_test_wait(pid, 10000, &status);
		usleep(100000);
		cr_assert_eq(kill(gs.pid, SIGCONT), 0);
		{
			double ms = wait_slots_back(&st, round);

			slowest = ms > slowest ? ms : slowest;
		}
		/* Control: the victim died with pushes the server had not
		 * handled yet, so its teardown had their slots to recover. */
		if (sent_at_kill > sent_at_stop)
			in_flight_kills++;
	}
	cr_log_info("10 kills, %llu with pushes in flight; pool %llu buffers, all posted (at the "
		    "latest %.0f ms after the server resumed); each next client pushed 4000 rows "
		    "%.0f ms after it started at the latest", (unsigned long long)in_flight_kills,
		    (unsigned long long)st.recv_slots, slowest, slowest_start);
	cr_assert_gt(in_flight_kills, 0, "no kill caught pushes in flight: the test proved nothing");

	/* The server still serves: exact on rows the victims never touched. */
	c = guest_client(&gs, 0, 1, 60000);
	for (int i = 0; i < 100; i++)
		ids[i] = 100 + (uint64_t)i;
	for (int i = 0; i < 100 * DIM; i++)
		g[i] = -1.0f;
	for (int k = 0; k < 50; k++)
		cr_assert_eq(rdps_client_push(c, 0, ids, g, 100), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 100, got), 0, "%s", rdps_client_errmsg(c));
	for (int i = 0; i < 100 * DIM; i++)
		cr_assert_eq(got[i], 50.0f, "row %d: %g after 50 pushes", 100 + i / DIM, got[i]);
	rdps_client_destroy(c);
	munmap(ks, sizeof(*ks));
}
