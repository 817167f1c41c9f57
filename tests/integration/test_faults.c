// SPDX-License-Identifier: MIT
// ctest-labels: faults
// needs-rdps-tool
/*
 * Load and faults: 8 clients push and pull for a fixed time against 2
 * servers; the test checkpoints the servers, kills one with SIGKILL and
 * restarts it from its checkpoint while the clients run. Then:
 *  - every update acknowledged before the checkpoint is in the checkpoint
 *    (updates lost: must be 0);
 *  - after the restart, the exact-sum invariant holds: every row equals its
 *    value at a quiescent point plus the pushes acknowledged since;
 *  - no client hung (each pause and the end are bounded waits).
 * Servers and clients are forked processes (SGD, lr 1, zero init; each push
 * adds 1 to every element of a row, so values are exact counts). The
 * transport is the first of RDPS_TEST_TRANSPORTS (default tcp), the address
 * RDPS_TEST_HOST (default 127.0.0.1); the soft-RoCE suite runs it on verbs,
 * ctest once more on ofi (tests.cmake: integration/test_faults/ofi).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/partition.h"
#include "rdps/server.h"
#include "ofi_env.h"
#include "rdps_test.h"

#define NCLIENTS 8
#define NSERVERS 2
#define ROWS 64
#define DIM 4

struct shared {
	_Atomic uint64_t acked[NCLIENTS][ROWS]; /* pushes flushed by the server */
	_Atomic uint64_t lost[NCLIENTS];        /* pushes lost to the restart */
	_Atomic uint64_t ops[NCLIENTS];
	_Atomic int pause, stop;
	_Atomic int paused[NCLIENTS];
	char error[NCLIENTS][256];
};

static struct shared *sh;
static char *dir, *ckdir;
static struct rdps_ipconfig ipc;
static volatile sig_atomic_t child_stop;
static char transport[16] = "tcp";

/*
 * A server process: `rdps server`, exec'd. Over verbs a process that forks
 * after it used RDMA shares its device contexts with the child (librdmacm
 * caches them), so servers are never plain forks of a test that connected.
 */
static pid_t start_server_log(uint32_t id, bool resume, const char *log)
{
	char *ipc_path, table[64], sid[16], text[RDPS_HOST_MAX + 32] = "", *out;
	char *argv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", sid,
			 "--transport", transport, "--table", table, "--optimizer", "sgd",
			 "--lr", "1", "--init", "zeros", "--quiet", "--checkpoint-dir", ckdir,
			 resume ? "--resume" : NULL, resume ? ckdir : NULL, NULL };
	pid_t pid;

	/* One line per server, in order: the ip_config the test parsed. */
	for (uint32_t s = 0; s < ipc.num_servers; s++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s %u 1\n",
			 ipc.servers[s].host, ipc.servers[s].port);
	ipc_path = rdps_test_write(dir, "ip_config.txt", text);
	argv[3] = ipc_path;
	snprintf(table, sizeof(table), "entity:%d:%d", ROWS, DIM);
	snprintf(sid, sizeof(sid), "%u", id);
	if (log) {
		out = strdup(log);
	} else {
		cr_assert(asprintf(&out, "%s/server%u.log", dir, id) > 0);
	}
	pid = rdps_test_spawn(argv, out);
	cr_assert_eq(rdps_test_wait_port(ipc.servers[id].host, ipc.servers[id].port, 20000), 0,
		     "server %u did not start (log %s)", id, out);
	free(out);
	free(ipc_path);
	return pid;
}

static pid_t start_server(uint32_t id, bool resume)
{
	return start_server_log(id, resume, NULL);
}

static void client_main(uint32_t k)
{
	struct rdps_client_params p = { .servers = &ipc, .transport = transport, .client_id = k,
					.num_clients = NCLIENTS + 1, .timeout_ms = 10000,
					.reconnect_ms = 30000, .quiet = true };
	struct rdps_client *c;
	float g[DIM], rows[8 * DIM];
	uint64_t ids[8];
	char err[640];

	for (int j = 0; j < DIM; j++)
		g[j] = -1.0f;
	if (rdps_client_create(&p, &c, err, sizeof(err))) {
		snprintf(sh->error[k], sizeof(sh->error[k]), "%s", err);
		_exit(1);
	}
	for (uint64_t i = 0; !atomic_load(&sh->stop); i++) {
		uint64_t row = (k * 7 + i * 13) % ROWS;
		int ret;

		if (atomic_load(&sh->pause)) {
			atomic_store(&sh->paused[k], 1);
			while (atomic_load(&sh->pause) && !atomic_load(&sh->stop))
				usleep(1000);
			atomic_store(&sh->paused[k], 0);
			continue;
		}
		ret = rdps_client_push(c, 0, &row, g, 1);
		if (!ret)
			ret = rdps_client_flush(c);
		if (!ret) {
			atomic_fetch_add(&sh->acked[k][row], 1);
		} else if (ret == -ECONNRESET) {
			atomic_fetch_add(&sh->lost[k], 1); /* not acknowledged: may be gone */
		} else {
			snprintf(sh->error[k], sizeof(sh->error[k]), "push: %s", rdps_client_errmsg(c));
			_exit(1);
		}
		if (i % 8 == 0) {
			for (int r = 0; r < 8; r++)
				ids[r] = (i + (uint64_t)r * 9) % ROWS;
			if (rdps_client_pull(c, 0, ids, 8, rows)) {
				snprintf(sh->error[k], sizeof(sh->error[k]), "pull: %s",
					 rdps_client_errmsg(c));
				_exit(1);
			}
		}
		atomic_fetch_add(&sh->ops[k], 1);
	}
	rdps_client_destroy(c);
	_exit(0);
}

static void sum_acked(uint64_t *out)
{
	for (int r = 0; r < ROWS; r++) {
		out[r] = 0;
		for (int k = 0; k < NCLIENTS; k++)
			out[r] += atomic_load(&sh->acked[k][r]);
	}
}

static struct rdps_client *observer(void)
{
	struct rdps_client_params p = { .servers = &ipc, .transport = transport, .num_clients = 1,
					.timeout_ms = 20000, .observer = true, .quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static void pull_all(float *v)
{
	struct rdps_client_params p = { .servers = &ipc, .transport = transport,
					.client_id = NCLIENTS, .num_clients = NCLIENTS + 1,
					.timeout_ms = 20000, .quiet = true };
	struct rdps_client *c;
	uint64_t ids[ROWS];
	char err[640];

	for (int r = 0; r < ROWS; r++)
		ids[r] = (uint64_t)r;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_client_pull(c, 0, ids, ROWS, v), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
}

static void wait_paused(void)
{
	uint64_t deadline = rdps_now_ns() + 20000000000ull;

	for (int k = 0; k < NCLIENTS; k++)
		while (!atomic_load(&sh->paused[k])) {
			cr_assert_lt(rdps_now_ns(), deadline, "client %d hung (did not pause): %s", k,
				     sh->error[k]);
			usleep(2000);
		}
}

Test(faults, kill_and_restart_a_server_under_load, .timeout = 240)
{
	pid_t servers[NSERVERS], clients[NCLIENTS];
	uint64_t s1[ROWS], ak[ROWS], a0[ROWS], a1[ROWS], checked = 0, lost = 0, served = 0, lost_pushes = 0;
	float v0[ROWS * DIM], v1[ROWS * DIM];
	struct rdps_blob ck;
	struct rdps_client *obs;
	char text[64], err[640], path[4096];
	int base = rdps_test_free_ports(NSERVERS), st;

	const char *tenv = getenv("RDPS_TEST_TRANSPORTS"), *henv = getenv("RDPS_TEST_HOST");

	if (tenv && *tenv)
		snprintf(transport, sizeof(transport), "%.*s", (int)strcspn(tenv, ","), tenv);
	if (!strcmp(transport, "ofi") && !rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	dir = rdps_test_tmpdir("faults");
	cr_assert(asprintf(&ckdir, "%s/ckpt", dir) > 0);
	snprintf(text, sizeof(text), "%s %d %d\n", henv && *henv ? henv : "127.0.0.1", base, NSERVERS);
	cr_assert_eq(rdps_ipconfig_parse("faults", text, &ipc, err, sizeof(err)), 0);
	for (uint32_t s = 0; s < NSERVERS; s++)
		servers[s] = start_server(s, false);
	for (uint32_t k = 0; k < NCLIENTS; k++) {
		clients[k] = fork();
		cr_assert_geq(clients[k], 0);
		if (clients[k] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			client_main(k);
		}
	}

	/* Every client connected and pushing (under TCG the 9 verbs
	 * connections take over a second), then load for a while. */
	{
		uint64_t deadline = rdps_now_ns() + 30000000000ull;

		for (int k = 0; k < NCLIENTS; k++)
			while (!atomic_load(&sh->ops[k])) {
				cr_assert(!sh->error[k][0], "client %d failed: %s", k, sh->error[k]);
				cr_assert_lt(rdps_now_ns(), deadline,
					     "client %d did not start within 30 s", k);
				usleep(2000);
			}
	}
	/* Checkpoint under load: everything acknowledged before it is in it. */
	usleep(700000);
	sum_acked(s1);
	obs = observer();
	cr_assert_eq(rdps_client_checkpoint(obs), 0, "%s", rdps_client_errmsg(obs));
	rdps_client_destroy(obs);

	/* The fault: SIGKILL server 1, restart it from its checkpoint. */
	usleep(300000);
	cr_assert_eq(kill(servers[1], SIGKILL), 0);
	cr_assert_eq(rdps_test_wait(servers[1], 5000, &st), 0);
	servers[1] = start_server(1, true);
	/* Acknowledged from now on: applied by the restarted server. */
	sum_acked(ak);

	/* Clients reconnect; then a quiescent point. */
	usleep(1000000);
	atomic_store(&sh->pause, 1);
	wait_paused();
	sum_acked(a0);
	pull_all(v0);
	atomic_store(&sh->pause, 0);
	usleep(1000000);
	atomic_store(&sh->stop, 1);
	for (int k = 0; k < NCLIENTS; k++) {
		cr_assert_eq(rdps_test_wait(clients[k], 30000, &st), 0, "client %d hung", k);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d failed: %s", k,
			  sh->error[k]);
		lost_pushes += atomic_load(&sh->lost[k]);
	}
	sum_acked(a1);
	pull_all(v1);

	/* 1. Acknowledged before the checkpoint: present in it. */
	snprintf(path, sizeof(path), "%s/server-1/ckpt-1/entity.rows", ckdir);
	cr_assert_eq(rdps_loader_load(path, RDPS_BLOB_CKPT_ROWS, NULL, &ck, err, sizeof(err)), 0,
		     "%s", err);
	for (int r = ROWS / 2; r < ROWS; r++) {
		float have = ((const float *)ck.data)[(r - ROWS / 2) * DIM];

		checked += s1[r];
		if (have < (float)s1[r])
			lost += s1[r] - (uint64_t)have;
	}
	rdps_loader_blob_free(&ck);
	/* ... and in the restarted server itself (it resumed from it), while
	 * the server that never died lost nothing at all. (A push whose flush
	 * failed because the other server died may still have been applied
	 * here: the client reported it lost, so it may or may not be in.) */
	for (int r = 0; r < ROWS; r++) {
		uint64_t need = s1[r] + (a0[r] - ak[r]);

		if (r >= ROWS / 2 && v0[r * DIM] < (float)need)
			lost += need - (uint64_t)v0[r * DIM];
		if (r < ROWS / 2)
			cr_assert(v0[r * DIM] >= (float)a0[r] &&
				  v0[r * DIM] <= (float)(a0[r] + lost_pushes),
				  "row %d of the surviving server: %g, acknowledged %llu, reported lost %llu",
				  r, v0[r * DIM], (unsigned long long)a0[r],
				  (unsigned long long)lost_pushes);
	}
	/* 2. After the restart: exact sums. */
	for (int r = 0; r < ROWS; r++)
		for (int j = 0; j < DIM; j++) {
			cr_assert_eq(v1[r * DIM + j], v0[r * DIM + j] + (float)(a1[r] - a0[r]),
				     "row %d: %g, expected %g + %llu", r, v1[r * DIM + j],
				     v0[r * DIM + j], (unsigned long long)(a1[r] - a0[r]));
			(void)j;
		}
	for (int r = 0; r < ROWS; r++)
		checked += a1[r] - a0[r];
	obs = observer();
	for (uint32_t s = 0; s < NSERVERS; s++) {
		struct rdps_server_stats ss;

		cr_assert_eq(rdps_client_server_stats(obs, s, &ss), 0);
		for (int t = 0; t < 16; t++)
			served += ss.requests[t];
	}
	cr_assert_eq(rdps_client_shutdown_servers(obs), 0, "%s", rdps_client_errmsg(obs));
	rdps_client_destroy(obs);
	for (int s = 0; s < NSERVERS; s++)
		rdps_test_wait(servers[s], 10000, &st);
	printf("faults test (%s): requests served %llu, faults injected 1, updates checked %llu, "
	       "updates lost %llu (acknowledged and checkpointed), unacknowledged pushes lost to "
	       "the restart %llu\n",
	       transport, (unsigned long long)served, (unsigned long long)checked,
	       (unsigned long long)lost,
	       (unsigned long long)lost_pushes);
	fflush(stdout);
	cr_assert_eq(lost, 0, "%llu acknowledged, checkpointed updates lost",
		     (unsigned long long)lost);
	cr_assert_gt(checked, 100, "too little load to mean anything");
	rdps_ipconfig_free(&ipc);
	rdps_test_rmtree(dir);
	free(ckdir);
	free(dir);
}

/* A listener on port that accepts and at once closes every connection (a
 * server dying mid-handshake), for ms milliseconds. */
static pid_t start_dropper(int port, int ms)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		uint64_t end = rdps_now_ns() + (uint64_t)ms * 1000000ull;
		int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		inet_pton(AF_INET, ipc.servers[0].host, &a.sin_addr);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64))
			_exit(1);
		while (rdps_now_ns() < end) {
			int c = accept(fd, NULL, NULL);

			if (c >= 0)
				close(c);
			else
				usleep(1000);
		}
		_exit(0);
	}
	cr_assert_eq(rdps_test_wait_port(ipc.servers[0].host, port, 10000), 0, "no dropper");
	return pid;
}

/* The first connection: a server that drops it mid-handshake (being
 * restarted) is retried within reconnect_ms; without reconnect_ms it is an
 * error at once, naming the handshake. */
Test(faults, first_connection_retries_a_server_restarting, .timeout = 120)
{
	const char *tenv = getenv("RDPS_TEST_TRANSPORTS"), *henv = getenv("RDPS_TEST_HOST");
	struct rdps_client_params p = { .transport = transport, .num_clients = 1,
					.timeout_ms = 10000, .quiet = true };
	struct rdps_client *c = NULL;
	int port = rdps_test_free_ports(1), st, ret;
	char text[64], err[640];
	uint64_t t0;
	pid_t dropper, client, server;

	if (tenv && *tenv)
		snprintf(transport, sizeof(transport), "%.*s", (int)strcspn(tenv, ","), tenv);
	if (!strcmp(transport, "ofi") && !rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	dir = rdps_test_tmpdir("faults-first");
	cr_assert(asprintf(&ckdir, "%s/ckpt", dir) > 0);
	snprintf(text, sizeof(text), "%s %d 1\n", henv && *henv ? henv : "127.0.0.1", port);
	cr_assert_eq(rdps_ipconfig_parse("faults", text, &ipc, err, sizeof(err)), 0);
	p.servers = &ipc;

	/* No reconnect_ms: the dropped handshake is the error. */
	dropper = start_dropper(port, 3000);
	t0 = rdps_now_ns();
	ret = rdps_client_create(&p, &c, err, sizeof(err));
	cr_assert(ret == -ECONNRESET || ret == -EPIPE, "got %d: %s", ret, err);
	cr_assert(strstr(err, "handshake"), "%s", err);
	cr_assert_lt(rdps_now_ns() - t0, 2000000000ull, "not at once");
	cr_assert_eq(rdps_test_wait(dropper, 10000, &st), 0);

	/* With reconnect_ms: retried until the real server is up. */
	dropper = start_dropper(port, 1500);
	client = fork();
	cr_assert_geq(client, 0);
	if (client == 0) {
		p.reconnect_ms = 30000;
		if (rdps_client_create(&p, &c, err, sizeof(err))) {
			fprintf(stderr, "client: %s\n", err);
			_exit(1);
		}
		_exit(rdps_client_shutdown_servers(c) ? 2 : 0);
	}
	cr_assert_eq(rdps_test_wait(dropper, 10000, &st), 0);
	server = start_server(0, false);
	cr_assert_eq(rdps_test_wait(client, 40000, &st), 0, "the client hung");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client failed (status 0x%x)", st);
	cr_assert_eq(rdps_test_wait(server, 10000, &st), 0, "server not shut down");
	rdps_ipconfig_free(&ipc);
	rdps_test_rmtree(dir);
	free(ckdir);
	free(dir);
}

/* ---------------------------------------------------------------------- */
/* A restart from a checkpoint says what it rolled back.                  */

/* Redirects this process's stderr (the clients' log) to path; returns the
 * saved descriptor for stderr_back(). */
static int stderr_to(const char *path)
{
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);

	cr_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2, "cannot log to %s", path);
	close(fd);
	return saved;
}

static void stderr_back(int saved)
{
	dup2(saved, 2);
	close(saved);
}

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Pushes ids (gradient -1: each row gains 1 per element) and counts them
 * into want[] and, for server 1's rows (>= ROWS / 2), into *to_s1. */
static void push_counted(struct rdps_client *c, const uint64_t *ids, size_t n, uint64_t *want,
			 uint64_t *to_s1)
{
	float g[ROWS * 2 * DIM];

	cr_assert_leq(n, (size_t)ROWS * 2);
	for (size_t i = 0; i < n * DIM; i++)
		g[i] = -1.0f;
	cr_assert_eq(rdps_client_push(c, 0, ids, g, n), 0, "%s", rdps_client_errmsg(c));
	for (size_t i = 0; i < n; i++) {
		want[ids[i]]++;
		*to_s1 += ids[i] >= ROWS / 2;
	}
}

/* Every row equals its count of pushes (exact: SGD, lr 1, zero init). */
static void check_rows(struct rdps_client *c, const uint64_t *want, const char *when)
{
	uint64_t ids[ROWS];
	float v[ROWS * DIM];

	for (int r = 0; r < ROWS; r++)
		ids[r] = (uint64_t)r;
	cr_assert_eq(rdps_client_pull(c, 0, ids, ROWS, v), 0, "%s", rdps_client_errmsg(c));
	for (int r = 0; r < ROWS; r++)
		cr_assert_eq(v[r * DIM], (float)want[r], "%s: row %d is %g, want %llu", when, r,
			     v[r * DIM], (unsigned long long)want[r]);
}

/* A flush that finds server 1 gone reconnects and says what was lost. */
static void flush_reconnects(struct rdps_client *c, const char *expect)
{
	int ret = rdps_client_flush(c);

	cr_assert_eq(ret, -ECONNRESET, "flush after the restart: %d (%s)", ret,
		     rdps_client_errmsg(c));
	cr_assert(strstr(rdps_client_errmsg(c), expect), "'%s' does not say '%s'",
		  rdps_client_errmsg(c), expect);
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
}

static pid_t kill_and_resume(pid_t server, const char *log)
{
	int st;

	cr_assert_eq(kill(server, SIGKILL), 0);
	cr_assert_eq(rdps_test_wait(server, 5000, &st), 0);
	return start_server_log(1, true, log);
}

/*
 * Two clients push (known rows per server), a checkpoint, more pushes,
 * kill -9 server 1 and restart it from the checkpoint. Each client's
 * rolled-back count is exactly the rows it pushed to server 1 after the
 * checkpoint, the same in the server's log and stats, and the checkpoint's
 * seq and age are logged. Control: a second restart from a checkpoint with
 * no push after it rolls back 0 rows and warns nobody.
 */
Test(faults, restart_reports_the_rows_it_rolled_back, .timeout = 120)
{
	const char *tenv = getenv("RDPS_TEST_TRANSPORTS"), *henv = getenv("RDPS_TEST_HOST");
	struct rdps_client_params p = { .transport = transport, .num_clients = 2,
					.timeout_ms = 10000, .reconnect_ms = 30000, .quiet = true };
	struct rdps_client *c[2];
	struct rdps_server_stats st0, st1;
	uint64_t want[ROWS] = { 0 }, after[2] = { 0 }, ids[ROWS * 2], sink = 0, t_before,
		 t_after, t_ckpt;
	char text[64], err[640], line[256], *slog[2], *clog_path, *slog_path[2], *log, *mf, *at;
	double age_s, age_c;
	pid_t servers[NSERVERS];
	int saved_stderr, st;

	if (tenv && *tenv)
		snprintf(transport, sizeof(transport), "%.*s", (int)strcspn(tenv, ","), tenv);
	if (!strcmp(transport, "ofi") && !rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	dir = rdps_test_tmpdir("faults-rollback");
	cr_assert(asprintf(&ckdir, "%s/ckpt", dir) > 0);
	cr_assert(asprintf(&clog_path, "%s/clients.log", dir) > 0);
	cr_assert(asprintf(&slog_path[0], "%s/server1-a.log", dir) > 0);
	cr_assert(asprintf(&slog_path[1], "%s/server1-b.log", dir) > 0);
	snprintf(text, sizeof(text), "%s %d %d\n", henv && *henv ? henv : "127.0.0.1",
		 rdps_test_free_ports(NSERVERS), NSERVERS);
	cr_assert_eq(rdps_ipconfig_parse("faults", text, &ipc, err, sizeof(err)), 0);
	p.servers = &ipc;
	servers[0] = start_server(0, false);
	servers[1] = start_server(1, false);
	saved_stderr = stderr_to(clog_path);
	for (uint32_t k = 0; k < 2; k++) {
		p.client_id = k;
		if (rdps_client_create(&p, &c[k], err, sizeof(err))) {
			/* CI once saw a connection here time out in the guest:
			 * say what the port and the servers looked like. */
			char *s0, *s1, *why0, *why1;

			cr_assert(asprintf(&s0, "%s/server0.log", dir) > 0);
			cr_assert(asprintf(&s1, "%s/server1.log", dir) > 0);
			why0 = rdps_test_port_report(ipc.servers[0].port,
						     (const char *[]){ s0, NULL });
			why1 = rdps_test_port_report(ipc.servers[1].port,
						     (const char *[]){ s1, clog_path, NULL });
			cr_assert_fail("client %u: %s\n%s%s", k, err, why0, why1);
		}
	}

	/* Before the checkpoint: kept. */
	for (int r = 0; r < ROWS; r++)
		ids[r] = ids[ROWS + r] = (uint64_t)r;
	push_counted(c[0], ids, ROWS * 2, want, &sink);
	push_counted(c[1], (uint64_t[]){ 40, 41, 5, 40 }, 4, want, &sink);
	cr_assert_eq(rdps_client_flush(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
	cr_assert_eq(rdps_client_flush(c[1]), 0, "%s", rdps_client_errmsg(c[1]));
	cr_assert_eq(rdps_client_checkpoint(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
	snprintf(err, sizeof(err), "%s/server-1/ckpt-1/manifest.json", ckdir);
	mf = rdps_test_slurp(err);
	at = mf ? strstr(mf, "\"time_unix_ms\": ") : NULL;
	cr_assert(at && sscanf(at, "\"time_unix_ms\": %" SCNu64, &t_ckpt) == 1,
		  "no time in %s: %s", err, mf);
	{
		uint64_t kept[ROWS];

		memcpy(kept, want, sizeof(kept));
		/* After it: rolled back on server 1, kept on server 0. Batches
		 * mix both servers' rows. */
		for (int i = 0; i < 3; i++) {
			for (int r = 0; r < 42; r++)
				ids[r] = (uint64_t)(r < 10 ? r : ROWS / 2 + (r - 10));
			push_counted(c[0], ids, 42, want, &after[0]);
		}
		push_counted(c[1], (uint64_t[]){ 50, 51, 52, 53, 54, 55, 56, 1, 2, 3, 4 }, 11, want,
			     &after[1]);
		cr_assert_eq(after[0], 3 * 32);
		cr_assert_eq(after[1], 7);
		cr_assert_eq(rdps_client_flush(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
		cr_assert_eq(rdps_client_flush(c[1]), 0, "%s", rdps_client_errmsg(c[1]));
		check_rows(c[0], want, "before the kill");
		for (int r = ROWS / 2; r < ROWS; r++)
			want[r] = kept[r]; /* what the restore brings back */
	}

	/* An age well above 0 s, so that a wrong one shows. */
	usleep(1200000);
	t_before = wall_ms();
	servers[1] = kill_and_resume(servers[1], slog_path[0]);
	t_after = wall_ms();
	flush_reconnects(c[0], "96 rows this client pushed to it since then were rolled back");
	flush_reconnects(c[1], "7 rows this client pushed to it since then were rolled back");
	cr_assert_eq(rdps_client_reconnects(c[0]), 1, "the restart was not seen");
	cr_assert_eq(rdps_client_rolled_back_rows(c[0]), after[0]);
	cr_assert_eq(rdps_client_rolled_back_rows(c[1]), after[1]);
	check_rows(c[0], want, "after the restore");
	cr_assert_eq(rdps_client_server_stats(c[0], 0, &st0), 0);
	cr_assert_eq(rdps_client_server_stats(c[0], 1, &st1), 0);
	cr_assert_eq(st0.rolled_back_rows, 0);
	cr_assert_eq(st1.rolled_back_rows, after[0] + after[1]);

	/* The control: pushes, a checkpoint, no push after it, a restart. */
	for (int r = 0; r < ROWS; r++)
		ids[r] = (uint64_t)r;
	push_counted(c[0], ids, ROWS, want, &sink);
	push_counted(c[1], ids + 20, 30, want, &sink);
	cr_assert_eq(rdps_client_flush(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
	cr_assert_eq(rdps_client_flush(c[1]), 0, "%s", rdps_client_errmsg(c[1]));
	cr_assert_eq(rdps_client_checkpoint(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
	servers[1] = kill_and_resume(servers[1], slog_path[1]);
	flush_reconnects(c[0], "0 rows this client pushed to it since then were rolled back");
	flush_reconnects(c[1], "0 rows this client pushed to it since then were rolled back");
	cr_assert_eq(rdps_client_reconnects(c[0]), 2, "the second restart was not seen");
	cr_assert_eq(rdps_client_rolled_back_rows(c[0]), after[0], "the control rolled back rows");
	cr_assert_eq(rdps_client_rolled_back_rows(c[1]), after[1], "the control rolled back rows");
	check_rows(c[1], want, "after the second restore");
	cr_assert_eq(rdps_client_server_stats(c[0], 1, &st1), 0);
	cr_assert_eq(st1.rolled_back_rows, 0);
	cr_assert_eq(rdps_client_shutdown_servers(c[0]), 0, "%s", rdps_client_errmsg(c[0]));
	rdps_client_destroy(c[0]);
	rdps_client_destroy(c[1]);
	stderr_back(saved_stderr);
	for (int s = 0; s < NSERVERS; s++)
		cr_assert_eq(rdps_test_wait(servers[s], 10000, &st), 0);

	/* The logs say the same numbers. */
	slog[0] = rdps_test_slurp(slog_path[0]);
	slog[1] = rdps_test_slurp(slog_path[1]);
	log = rdps_test_slurp(clog_path);
	cr_assert(slog[0] && slog[1] && log);
	cr_assert(strstr(slog[0], "restored checkpoint 1 of "), "%s", slog[0]);
	cr_assert(strstr(slog[1], "restored checkpoint 2 of "), "%s", slog[1]);
	for (int k = 0; k < 2; k++) {
		snprintf(line, sizeof(line),
			 "client %d reconnected after a restore: %llu of its pushed rows were rolled back",
			 k, (unsigned long long)after[k]);
		cr_assert(strstr(slog[0], line), "server log lacks '%s':\n%s", line, slog[0]);
		snprintf(line, sizeof(line),
			 "client %d reconnected after a restore: none of its pushed rows were rolled back", k);
		cr_assert(strstr(slog[1], line), "server log lacks '%s':\n%s", line, slog[1]);
	}
	snprintf(line, sizeof(line), "from checkpoint 1: %llu pushed rows in all were rolled back",
		 (unsigned long long)(after[0] + after[1]));
	cr_assert(strstr(slog[0], line), "server log lacks '%s':\n%s", line, slog[0]);
	cr_assert(strstr(slog[1], "from checkpoint 2: 0 pushed rows in all were rolled back"),
		  "%s", slog[1]);
	cr_assert_eq(count_of(slog[0], " warn: "), 2, "one warning per client:\n%s", slog[0]);
	cr_assert_eq(count_of(slog[1], " warn: "), 0, "the control warned:\n%s", slog[1]);
	for (int k = 0; k < 2; k++) {
		snprintf(line, sizeof(line),
			 " s before: %llu rows this client pushed to it since then were rolled back",
			 (unsigned long long)after[k]);
		cr_assert_eq(count_of(log, line), 1, "clients' log lacks '%s':\n%s", line, log);
	}
	cr_assert_eq(count_of(log, " warn: server 1 restarted"), 2, "the control warned:\n%s", log);
	cr_assert_eq(count_of(log, "restarted from checkpoint 2 written"), 2, "%s", log);

	/* The age: from the manifest's time to the restore (which happened
	 * between t_before and t_after), the same on both sides ("%.1f s":
	 * within 50 ms). */
	at = strstr(slog[0], "written ");
	cr_assert(at && sscanf(at, "written %lf s before", &age_s) == 1, "%s", slog[0]);
	at = strstr(log, "restarted from checkpoint 1 written ");
	cr_assert(at && sscanf(at, "restarted from checkpoint 1 written %lf", &age_c) == 1, "%s",
		  log);
	cr_assert_eq(age_s, age_c, "server and client disagree on the checkpoint's age");
	cr_assert(age_s * 1000 >= (double)(t_before - t_ckpt) - 60 &&
		  age_s * 1000 <= (double)(t_after - t_ckpt) + 60,
		  "age %.1f s: the restore was %.3f to %.3f s after the checkpoint's time", age_s,
		  (t_before - t_ckpt) / 1e3, (t_after - t_ckpt) / 1e3);
	free(mf);
	free(slog[0]);
	free(slog[1]);
	free(log);
	rdps_ipconfig_free(&ipc);
	rdps_test_rmtree(dir);
	free(slog_path[0]);
	free(slog_path[1]);
	free(clog_path);
	free(ckdir);
	free(dir);
}
