// SPDX-License-Identifier: MIT
/*
 * verbs-only behaviour, run inside the soft-RoCE guest (verbs.sh): pulls
 * are one-sided, torn rows are re-read, a dead server is an error and not a
 * hang, a low memory-lock limit is explained, "auto" picks verbs on an RDMA
 * route. RDPS_TEST_HOST is the address of the guest's rxe device.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "guest_common.h"
#include "rdps_test.h"

#define ROWS 4096
#define DIM 64

static char *dir, *ipc, *logpath;
static pid_t server;


static void start_server_opts(const char *optimizer)
{
	char text[128], table[64];
	char *argv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", "0",
			 "--transport", "verbs", "--table", table, "--optimizer",
			 (char *)optimizer, "--lr", "1", "--init", "zeros",
			 /* clients come from the rxe address, not the loopback */
			 "--allow-unauthenticated", NULL };
	int port = rdps_test_free_ports(1);

	dir = rdps_test_tmpdir("verbs");
	snprintf(text, sizeof(text), "%s %d\n", guest_host(), port);
	snprintf(table, sizeof(table), "entity:%d:%d", ROWS, DIM);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	argv[3] = ipc;
	cr_assert(asprintf(&logpath, "%s/server.log", dir) > 0);
	server = rdps_test_spawn(argv, logpath);
	cr_assert_eq(rdps_test_wait_port(guest_host(), port, 20000), 0, "server did not start");
}

static void start_server(void)
{
	start_server_opts("sgd");
}

static void stop_server(void)
{
	int st;

	if (server > 0) {
		kill(server, SIGCONT);
		kill(server, SIGTERM);
		rdps_test_wait(server, 20000, &st);
	}
	rdps_test_rmtree(dir);
	free(ipc);
	free(logpath);
	free(dir);
}


static struct rdps_client *connect_client(uint32_t id, uint32_t n, int timeout_ms, int mode)
{
	struct rdps_client_params p = { .ip_config = ipc, .transport = "verbs", .client_id = id,
					.num_clients = n, .timeout_ms = timeout_ms,
					.read_consistency = mode, .quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

TestSuite(verbs, .init = start_server, .fini = stop_server, .timeout = 240);

static uint64_t ids[ROWS];
static float g[ROWS * DIM], out[ROWS * DIM];

static void push_one_row(void *arg)
{
	struct rdps_client *c2 = connect_client(1, 2, 60000, RDPS_READ_VALIDATED);

	_exit(rdps_client_push(c2, 0, ids, g, 1) || rdps_client_flush(c2) ? 1 : 0);
}

Test(verbs, pulls_are_one_sided_while_the_server_is_paused)
{
	struct rdps_server_stats st;
	struct rdps_client *c;
	int status, go;
	pid_t pusher = guest_fork(&go, push_one_row, NULL);

	for (int i = 0; i < ROWS; i++) {
		ids[i] = (uint64_t)i;
		for (int j = 0; j < DIM; j++)
			g[i * DIM + j] = (float)(i % 97) + 0.25f * j;
	}
	c = connect_client(0, 2, 20000, RDPS_READ_VALIDATED);
	cr_assert_eq(rdps_client_push(c, 0, ids, g, ROWS), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));

	/* Stop the server process: its CPU can do nothing now. */
	cr_assert_eq(kill(server, SIGSTOP), 0);
	usleep(200000);
	for (int round = 0; round < 3; round++) {
		memset(out, 0, sizeof(out));
		cr_assert_eq(rdps_client_pull(c, 0, ids, ROWS, out), 0, "%s", rdps_client_errmsg(c));
		for (int i = 0; i < ROWS * DIM; i++)
			cr_assert_eq(out[i], -g[i], "row %d differs while the server is paused", i / DIM);
	}

	/* A push must wait: its flush cannot be acknowledged while paused.
	 * (The second client's handshake needs the server too.) */
	guest_release(go);
	sleep(2);
	cr_assert_eq(waitpid(pusher, &status, WNOHANG), 0, "a push completed on a paused server");
	cr_assert_eq(kill(server, SIGCONT), 0);
	cr_assert_eq(rdps_test_wait(pusher, 60000, &status), 0, "push never completed");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* The server's CPU served no pull at all. */
	cr_assert_eq(rdps_client_server_stats(c, 0, &st), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(st.requests[RDPS_REQ_PULL], 0, "server handled %llu pulls",
		     (unsigned long long)st.requests[RDPS_REQ_PULL]);
	cr_assert_eq(st.rows_pushed, ROWS + 1);
	rdps_client_destroy(c);
}

/* A writer adds 1 to every element of a few rows, over and over; a
 * consistent row has all elements equal. */
enum { HOT = 8, PUSHES = 4000 };

static void write_hot_rows(void *arg)
{
	struct rdps_client *w = connect_client(1, 2, 30000, RDPS_READ_VALIDATED);
	uint64_t hot[HOT];
	float hg[HOT * DIM];

	for (int i = 0; i < HOT; i++)
		hot[i] = (uint64_t)(i * 3);
	for (int i = 0; i < HOT * DIM; i++)
		hg[i] = -1.0f;
	for (int p = 0; p < PUSHES; p++)
		if (rdps_client_push(w, 0, hot, hg, HOT))
			_exit(1);
	_exit(rdps_client_flush(w) ? 1 : 0);
}

Test(verbs, validated_reads_never_return_torn_rows)
{
	int go;
	pid_t writer = guest_fork(&go, write_hot_rows, NULL);
	struct rdps_client *r = connect_client(0, 2, 30000, RDPS_READ_VALIDATED);
	uint64_t hot[HOT];
	float rows[HOT * DIM];
	long torn = 0, reads = 0;
	int status;

	guest_release(go);
	for (int i = 0; i < HOT; i++)
		hot[i] = (uint64_t)(i * 3);
	while (waitpid(writer, &status, WNOHANG) == 0) {
		cr_assert_eq(rdps_client_pull(r, 0, hot, HOT, rows), 0, "%s", rdps_client_errmsg(r));
		reads++;
		for (int i = 0; i < HOT; i++)
			for (int j = 1; j < DIM; j++)
				torn += rows[i * DIM + j] != rows[i * DIM];
	}
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer failed");
	cr_assert_eq(torn, 0, "%ld torn elements in %ld validated reads", torn, reads);
	cr_log_info("validated: %ld reads during %d pushes, %llu rows re-read", reads, PUSHES,
		    (unsigned long long)rdps_client_rereads(r));
	/* Control: reads did overlap updates, and the check caught them. */
	cr_assert_gt(rdps_client_rereads(r), 0,
		     "no read overlapped an update: the test showed nothing");
	cr_assert_eq(rdps_client_pull(r, 0, hot, HOT, rows), 0);
	cr_assert_eq(rows[0], (float)PUSHES);
	rdps_client_destroy(r);
}

Test(verbs, a_killed_server_is_an_error_not_a_hang)
{
	struct rdps_client *c = connect_client(0, 1, 8000, RDPS_READ_VALIDATED);
	uint64_t t0, elapsed;
	int ret = 0, st;

	for (int i = 0; i < ROWS; i++)
		ids[i] = (uint64_t)((i * 7) % ROWS);
	for (int i = 0; i < 20 && !ret; i++)
		ret = rdps_client_pull(c, 0, ids, ROWS, out);
	cr_assert_eq(ret, 0, "%s", rdps_client_errmsg(c));
	kill(server, SIGKILL);
	rdps_test_wait(server, 5000, &st);
	server = 0;
	t0 = rdps_now_ns();
	for (int i = 0; i < 1000 && !ret; i++)
		ret = rdps_client_pull(c, 0, ids, ROWS, out);
	elapsed = (rdps_now_ns() - t0) / 1000000;
	cr_assert_lt(ret, 0, "pulls from a dead server kept succeeding");
	/* Well inside the 8 s timeout: the dead server is noticed, not waited out. */
	cr_assert_lt(elapsed, 6000, "the error took %llu ms: %s", (unsigned long long)elapsed,
		     rdps_client_errmsg(c));
	cr_assert(strstr(rdps_client_errmsg(c), "server 0"), "%s", rdps_client_errmsg(c));
	cr_log_info("dead server reported after %llu ms: %s", (unsigned long long)elapsed,
		    rdps_client_errmsg(c));
	rdps_client_destroy(c);
}

/* The netdev under the rxe device (the RoCE GID's), or "". */
static void rxe_netdev(char *name, size_t len)
{
	char *s = rdps_test_slurp("/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1");

	name[0] = '\0';
	if (!s)
		s = rdps_test_slurp("/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0");
	if (s)
		snprintf(name, len, "%.*s", (int)strcspn(s, "\n"), s);
	free(s);
}

/* Waits up to ms for text in the server's log. */
static bool log_says(const char *text, int ms)
{
	for (int waited = 0; waited <= ms; waited += 100) {
		char *log = rdps_test_slurp(logpath);
		bool found = log && strstr(log, text);

		free(log);
		if (found)
			return true;
		usleep(100000);
	}
	return false;
}

/* Async events reach the server and are logged: the port of its device goes
 * down and comes back; then it still serves. */
Test(verbs, a_port_going_down_and_up_is_logged)
{
	char dev[64], cmd[160];
	uint64_t id = 5;
	float row[DIM];
	struct rdps_client *c;

	rxe_netdev(dev, sizeof(dev));
	cr_assert(dev[0], "no netdev under rxe0");
	/* Control: nothing of the kind before. */
	cr_assert(!log_says("is down", 0));
	snprintf(cmd, sizeof(cmd), "ip link set %s down", dev);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	cr_assert(log_says("of RDMA device rxe0 is down", 10000), "no port-down line in the log");
	snprintf(cmd, sizeof(cmd), "ip link set %s up", dev);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	cr_assert(log_says("of RDMA device rxe0 is up", 10000), "no port-up line in the log");
	c = connect_client(0, 1, 30000, RDPS_READ_VALIDATED);
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, row), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
}

Test(verbs, auto_picks_verbs_on_an_rdma_route)
{
	struct rdps_client_params p = { .ip_config = ipc, .transport = "auto", .client_id = 0,
					.num_clients = 1, .timeout_ms = 20000 };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_client_transport(c), "verbs");
	rdps_client_destroy(c);
}

Test(verbs_nosrv, low_memlock_limit_is_explained, .timeout = 60)
{
	char *d = rdps_test_tmpdir("memlock"), *ipcp, *logp, *log, text[128], cmd[1024];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int port = rdps_test_free_ports(1), st;

	snprintf(text, sizeof(text), "%s %d\n", guest_host(), port);
	ipcp = rdps_test_write(d, "ip_config.txt", text);
	cr_assert(asprintf(&logp, "%s/out.log", d) > 0);
	/* The unprivileged server must read its ip_config. */
	cr_assert_eq(chmod(d, 0755), 0);
	cr_assert_eq(chmod(ipcp, 0644), 0);
	/* As an unprivileged user (root may lock memory regardless) with a
	 * 64 KiB limit, registering a 100 MB table must fail, with advice. */
	snprintf(cmd, sizeof(cmd),
		 "ulimit -l 64 && exec setpriv --reuid=65534 --regid=65534 --clear-groups "
		 "--inh-caps=-all %s server --ip_config %s --server_id 0 --transport verbs "
		 "--table entity:200000:128",
		 RDPS_BIN, ipcp);
	cr_assert_eq(rdps_test_wait(rdps_test_spawn(argv, logp), 30000, &st), 0);
	log = rdps_test_slurp(logp);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit %d: %s", st, log);
	cr_assert(strstr(log, "memory-lock limit") && strstr(log, "ulimit -l"), "%s", log);
	free(log);
	free(logp);
	free(ipcp);
	rdps_test_rmtree(d);
	free(d);
}

/* Over verbs too: a wrong secret gets no rkey (the welcome that carries
 * them is only sent after the proof), the right one pulls. */
Test(verbs_nosrv, wrong_secret_gets_no_rkey, .timeout = 60)
{
	char *d = rdps_test_tmpdir("vauth"), *ipcp, *sec, *logp, text[128];
	char *argv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", "0",
			 "--transport", "verbs", "--table", "entity:64:8", "--secret-file", NULL,
			 NULL };
	struct rdps_secret good = { .len = 16 }, bad = { .len = 16 };
	struct rdps_client_params p = { .transport = "verbs", .num_clients = 1,
					.timeout_ms = 10000, .quiet = true };
	struct rdps_client *c = NULL;
	int port = rdps_test_free_ports(1), st;
	char err[640];
	uint64_t id = 3;
	float row[8];
	pid_t srv;

	snprintf(text, sizeof(text), "%s %d\n", guest_host(), port);
	ipcp = rdps_test_write(d, "ip_config.txt", text);
	sec = rdps_test_write(d, "secret", "0123456789abcdef");
	cr_assert(asprintf(&logp, "%s/server.log", d) > 0);
	argv[3] = ipcp;
	argv[11] = sec;
	srv = rdps_test_spawn(argv, logp);
	cr_assert_eq(rdps_test_wait_port(guest_host(), port, 20000), 0);
	memcpy(good.key, "0123456789abcdef", 16);
	memcpy(bad.key, "0123456789abcdeX", 16);
	p.ip_config = ipcp;
	p.secret = &bad;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), -EACCES, "%s", err);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
	p.secret = &good;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, row), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	kill(srv, SIGTERM);
	rdps_test_wait(srv, 10000, &st);
	free(ipcp);
	free(sec);
	free(logp);
	rdps_test_rmtree(d);
	free(d);
}
