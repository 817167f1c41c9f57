// SPDX-License-Identifier: MIT
/* Helpers of the verbs suites run inside the soft-RoCE guest. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"
#include "rdps/common.h"
#include "rdps_test.h"

const char *guest_transport(void)
{
	const char *t = getenv("RDPS_TEST_GUEST_TRANSPORT");

	return t && !strcmp(t, "ofi") ? "ofi" : "verbs";
}

const char *guest_host(void)
{
	const char *h = getenv("RDPS_TEST_HOST");

	cr_assert(h && *h, "RDPS_TEST_HOST must name the rxe device's address");
	return h;
}

void guest_server_start(struct guest_server *gs, uint32_t rows, uint32_t dim,
			const char *secret)
{
	char text[128], table[64], threads[16];
	const char *nthreads = getenv("RDPS_TEST_SERVER_THREADS");
	char *argv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", "0",
			 "--transport", (char *)guest_transport(), "--table", table, "--optimizer", "sgd",
			 "--lr", "1", "--init", "zeros", "--num_server_threads", threads,
			 NULL, NULL, NULL };

	memset(gs, 0, sizeof(*gs));
	gs->port = rdps_test_free_ports(1);
	gs->dir = rdps_test_tmpdir("guest");
	snprintf(text, sizeof(text), "%s %d\n", guest_host(), gs->port);
	snprintf(table, sizeof(table), "entity:%u:%u", rows, dim);
	snprintf(threads, sizeof(threads), "%s", nthreads && *nthreads ? nthreads : "1");
	gs->ipc = rdps_test_write(gs->dir, "ip_config.txt", text);
	argv[3] = gs->ipc;
	if (secret) {
		gs->secret_path = rdps_test_write(gs->dir, "secret", secret);
		argv[18] = "--secret-file";
		argv[19] = gs->secret_path;
	}
	/* Without a secret, the clients (this guest's, from the rxe device's
	 * address) are served as this machine's: protected mode's default. */
	cr_assert(asprintf(&gs->log, "%s/server.log", gs->dir) > 0);
	gs->pid = rdps_test_spawn(argv, gs->log);
	cr_assert_eq(rdps_test_wait_port(guest_host(), gs->port, 20000), 0, "server did not start");
}

void guest_server_stop(struct guest_server *gs)
{
	int st;

	if (gs->pid > 0) {
		int ret;

		kill(gs->pid, SIGCONT);
		kill(gs->pid, SIGTERM);
		ret = rdps_test_wait(gs->pid, 20000, &st);
		/* A server that died on its own, or hung, says so. */
		if (ret)
			fprintf(stderr, "guest server %d: no exit 20 s after SIGTERM (killed)\n",
				(int)gs->pid);
		else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM)
			fprintf(stderr, "guest server %d: died of signal %d\n", (int)gs->pid,
				WTERMSIG(st));
		else if (WIFEXITED(st) && WEXITSTATUS(st))
			fprintf(stderr, "guest server %d: exit status %d\n", (int)gs->pid,
				WEXITSTATUS(st));
	}
	if (getenv("RDPS_TEST_DUMP_LOG") && gs->log) {
		char *t = rdps_test_slurp(gs->log);

		fprintf(stderr, "SERVERLOG %s\n", t ? t : "");
		free(t);
	}
	if (gs->dir)
		rdps_test_rmtree(gs->dir);
	free(gs->ipc);
	free(gs->log);
	free(gs->secret_path);
	free(gs->dir);
	memset(gs, 0, sizeof(*gs));
}

static void load_secret(const struct guest_server *gs, struct rdps_secret *s)
{
	char err[256];

	memset(s, 0, sizeof(*s));
	if (gs->secret_path)
		cr_assert_eq(rdps_secret_load(gs->secret_path, s, err, sizeof(err)), 0, "%s", err);
}

struct rdps_client *guest_client(const struct guest_server *gs, uint32_t id, uint32_t n,
				 int timeout_ms)
{
	struct rdps_secret s;
	struct rdps_client_params p = { .ip_config = gs->ipc, .transport = guest_transport(),
					.client_id = id, .num_clients = n,
					.timeout_ms = timeout_ms, .quiet = true, .secret = &s };
	struct rdps_client *c;
	char err[640];

	load_secret(gs, &s);
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "client %u: %s", id, err);
	return c;
}

void guest_server_stats(const struct guest_server *gs, struct rdps_server_stats *st)
{
	struct rdps_secret s;
	/* Generous: over verbs;ofi_rxm on the guest's 2 emulated vCPUs, 64
	 * pushing clients keep the server's rxe work in the kernel for tens
	 * of seconds between two rounds of its control connections (the
	 * 64-client test passes in 240 s; with 20 s its observer timed out). */
	struct rdps_client_params p = { .ip_config = gs->ipc, .transport = guest_transport(),
					.num_clients = 1, .timeout_ms = 300000, .quiet = true,
					.observer = true, .secret = &s };
	struct rdps_client *c;
	char err[640];

	load_secret(gs, &s);
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "observer: %s", err);
	cr_assert_eq(rdps_client_server_stats(c, 0, st), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
}

pid_t guest_fork(int *go, void (*body)(void *), void *arg)
{
	int fds[2];
	pid_t pid;
	char c;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			_exit(2);
		body(arg);
		_exit(0);
	}
	close(fds[0]);
	*go = fds[1];
	return pid;
}

void guest_release(int go)
{
	cr_assert_eq(write(go, "x", 1), 1);
	close(go);
}
