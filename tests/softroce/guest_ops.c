// SPDX-License-Identifier: MIT
/*
 * What the verbs backend asks of the device (inside the soft-RoCE guest,
 * run by verbs.sh under the verbs shim: tests/softroce/verbs_shim.c, an
 * LD_PRELOAD library whose counts a process writes at exit to
 * RDPS_VERBS_SHIM_OUT/<pid>, and the test's own through dlsym):
 *
 * - a server under a stream of pushes arms its completion queue only to
 *   sleep on it, not every round (main armed it at every progress round:
 *   about once per push under TCG);
 * - --tos: the clients' and the server's rdma_cm ids get the type of
 *   service; the listener's backlog is the kernel's maximum, not 128;
 * - fork support where the kernel needs it (the shim says so):
 *   ibv_fork_init once, before the first registration; and a client that
 *   forks after connecting (as a trainer forks DataLoader workers) goes on
 *   pushing and pulling with exact sums, over verbs and over ofi.
 * RDPS_TEST_HOST is the address of the guest's rxe device.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"
#include "rdps/common.h"
#include "rdps_test.h"

#define ROWS 1024
#define DIM 16

static long long shim_count(const char *name)
{
	long long (*fn)(const char *) =
		(long long (*)(const char *))dlsym(RTLD_DEFAULT, "rdps_verbs_shim_count");

	cr_assert(fn, "run under the verbs shim (LD_PRELOAD=librdps_verbs_shim.so): verbs.sh");
	return fn(name);
}

/* A count the server process wrote at exit (its shim file in dir). */
static long long server_count(const char *dir, pid_t pid, const char *name)
{
	char path[512], *text, key[64];
	const char *at;
	long long v = -1;

	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	text = rdps_test_slurp(path);
	cr_assert(text, "the server wrote no shim counts to %s", path);
	snprintf(key, sizeof(key), "%s ", name);
	at = strstr(text, key);
	if (at)
		v = strtoll(at + strlen(key), NULL, 10);
	free(text);
	return v;
}

static char *shim_dir(void)
{
	char *d = rdps_test_tmpdir("vshim");

	cr_assert(d);
	setenv("RDPS_VERBS_SHIM_OUT", d, 1);
	return d;
}

Test(ops, a_server_under_a_stream_of_pushes_arms_its_cq_only_to_sleep, .timeout = 600)
{
	enum { PUSHES = 3000 };
	struct guest_server gs;
	struct rdps_client *c;
	char *dir = shim_dir();
	float g[DIM];
	long long arms;
	pid_t pid;

	/* The server spins up to 100 ms before it sleeps: pushes back to back
	 * never let it (a client under TCG sends one every few dozen us). */
	setenv("RDPS_VERBS_BUSY_POLL_US", "100000", 1);
	guest_server_start(&gs, ROWS, DIM, NULL);
	pid = gs.pid;
	c = guest_client(&gs, 0, 1, 120000);
	for (int d = 0; d < DIM; d++)
		g[d] = -1.0f;
	for (int i = 0; i < PUSHES; i++) {
		uint64_t id = (uint64_t)i % ROWS;

		cr_assert_eq(rdps_client_push(c, 0, &id, g, 1), 0, "%s", rdps_client_errmsg(c));
	}
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	guest_server_stop(&gs); /* rmtree of its dir: the shim's is ours */
	arms = server_count(dir, pid, "cq_arms");
	cr_log_info("%d push messages: the server armed its CQs %lld times", PUSHES, arms);
	cr_assert_geq(arms, 1);
	cr_assert_lt(arms, PUSHES / 10, "the server armed its CQs %lld times for %d messages",
		     arms, PUSHES);
	rdps_test_rmtree(dir);
	free(dir);
	unsetenv("RDPS_VERBS_BUSY_POLL_US");
}

static int kernel_backlog(void)
{
	static const char *const files[] = { "/proc/sys/net/rdma_ucm/max_backlog",
					     "/proc/sys/net/core/somaxconn" };

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(files); i++) {
		FILE *f = fopen(files[i], "r");
		int v = 0;

		if (!f)
			continue;
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
		if (v > 0)
			return v;
	}
	return 1024;
}

Test(ops, tos_goes_on_every_rdma_id_and_the_backlog_is_the_kernels, .timeout = 300)
{
	struct guest_server gs;
	struct rdps_client *c;
	char *dir = shim_dir();
	uint64_t ids[4] = { 1, 2, 3, 4 };
	float g[4 * DIM], out[4 * DIM];
	pid_t pid;

	setenv("RDPS_TOS", "104", 1); /* the server inherits it; the client reads it */
	guest_server_start(&gs, ROWS, DIM, NULL);
	pid = gs.pid;
	c = guest_client(&gs, 0, 1, 60000);
	cr_assert_geq(shim_count("tos_sets"), 1, "the client set no type of service");
	cr_assert_eq(shim_count("tos_last"), 104);
	for (int i = 0; i < 4 * DIM; i++)
		g[i] = -1.0f;
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 4), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 4, out), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(out[0], 1.0f);
	rdps_client_destroy(c);
	guest_server_stop(&gs);
	cr_log_info("server: type of service set %lld times (last %lld), listener backlog %lld "
		    "(kernel max %d)", server_count(dir, pid, "tos_sets"),
		    server_count(dir, pid, "tos_last"), server_count(dir, pid, "backlog_last"),
		    kernel_backlog());
	cr_assert_geq(server_count(dir, pid, "tos_sets"), 1, "the listener got no type of service");
	cr_assert_eq(server_count(dir, pid, "tos_last"), 104);
	cr_assert_eq(server_count(dir, pid, "backlog_last"), kernel_backlog(),
		     "rdma_listen's backlog is not the kernel's maximum");
	unsetenv("RDPS_TOS");
	rdps_test_rmtree(dir);
	free(dir);
}

/* A client that forks after connecting goes on with exact sums (the child
 * exits, as a DataLoader worker may, or lives on: both are checked), and
 * where the kernel needs fork support it was turned on, once. */
static void fork_after_connect(void)
{
	struct guest_server gs;
	struct rdps_client *c;
	uint64_t ids[64];
	float g[64 * DIM], out[64 * DIM];
	pid_t kids[2];
	int st;

	setenv("RDPS_VERBS_SHIM_FORK", "disabled", 1); /* a kernel before 5.13 */
	guest_server_start(&gs, ROWS, DIM, NULL);
	c = guest_client(&gs, 0, 1, 60000);
	cr_assert_eq(shim_count("fork_init"), 1, "ibv_fork_init called %lld times",
		     shim_count("fork_init"));
	for (int i = 0; i < 64; i++)
		ids[i] = (uint64_t)i;
	for (int i = 0; i < 64 * DIM; i++)
		g[i] = -1.0f;
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 64), 0, "%s", rdps_client_errmsg(c));
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		cr_assert_geq(kids[k], 0);
		if (kids[k] == 0) {
			/* A worker writes its own memory, touching every page
			 * the parent has (copy-on-write), then exits or waits. */
			memset(g, 0x7f, sizeof(g));
			memset(out, 0x7f, sizeof(out));
			if (k)
				sleep(3);
			_exit(0);
		}
	}
	for (int round = 0; round < 20; round++)
		cr_assert_eq(rdps_client_push(c, 0, ids, g, 64), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 64, out), 0, "%s", rdps_client_errmsg(c));
	for (int i = 0; i < 64 * DIM; i++)
		cr_assert_eq(out[i], 21.0f, "row %d after the fork: %g, want 21", i / DIM, out[i]);
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(rdps_test_wait(kids[k], 20000, &st), 0);
		cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "child %d: status %d", k, st);
	}
	rdps_client_destroy(c);
	guest_server_stop(&gs);
	unsetenv("RDPS_VERBS_SHIM_FORK");
}

Test(ops, a_fork_after_connect_is_safe, .timeout = 300)
{
	fork_after_connect();
}
