// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// needs-rdps-tool
/*
 * rdps launch --backend local on failures: one trainer killed with SIGKILL
 * mid-run stops the job within seconds, the launcher exits non-zero naming
 * the dead process, and no process or bound port is left; Ctrl-C (SIGINT to
 * the launcher) does the same with status 130; a port in use is refused
 * before anything starts.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps_test.h"

static char *dir, *ipc, *data, *part;
static int port;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void setup(void)
{
	char text[64];

	dir = rdps_test_tmpdir("launch");
	cr_assert(dir);
	data = path("kg");
	part = path("kg-part2");
	rdps_test_synth_kg(data, 2000, 12, 20000, 0, part, 2);
	port = rdps_test_free_ports(2);
	cr_assert_gt(port, 0);
	snprintf(text, sizeof(text), "127.0.0.1 %d 2\n", port);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	cr_assert(ipc);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
	free(ipc);
	free(data);
	free(part);
}

TestSuite(launch_local, .init = setup, .fini = teardown, .timeout = 120);

/* A job that trains until stopped: 2 servers, 2 trainers. */
static pid_t start_job(const char *log)
{
	char *argv[] = { RDPS_BIN, "launch", "--ip_config", ipc, "--num_client_proc", "2",
			 "--grace", "3", "--", "--data", data, "--partition", part,
			 "--hidden_dim", "16", "--batch_size", "256", "--neg_sample_size", "16",
			 "--max_step", "100000000", "--log_interval", "50", "--transport", "tcp",
			 NULL };

	return rdps_test_spawn(argv, log);
}

/* The pid the launcher printed for a process ("trainer 1 (pid N): ..."). */
static pid_t pid_of(const char *text, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "rdps launch: %s (pid ", name);
	p = strstr(text, key);
	cr_assert(p, "no '%s' in the launcher's output", key);
	return (pid_t)atoi(p + strlen(key));
}

/* Nothing left: no process of the job, both server ports bindable. */
static void expect_nothing_left(pid_t pids[4])
{
	for (int i = 0; i < 4; i++)
		cr_expect(kill(pids[i], 0) == -1 && errno == ESRCH, "process %d still exists", (int)pids[i]);
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + i)),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		cr_expect_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0, "port %d still bound: %s", port + i,
			     strerror(errno));
		close(s);
	}
}

static void job_pids(const char *text, pid_t pids[4])
{
	pids[0] = pid_of(text, "server 0");
	pids[1] = pid_of(text, "server 1");
	pids[2] = pid_of(text, "trainer 0");
	pids[3] = pid_of(text, "trainer 1");
}

Test(launch_local, sigkill_of_a_trainer_stops_the_job)
{
	char *log = path("kill.log"), *text, want[128];
	pid_t launcher = start_job(log), pids[4];
	uint64_t t0;
	double secs;
	int st;

	cr_assert_gt(launcher, 0);
	/* Mid-run: both trainers have logged progress. */
	free(rdps_test_wait_log(log, "\n[trainer 1] step", 60000));
	text = rdps_test_wait_log(log, "\n[trainer 0] step", 30000);
	job_pids(text, pids);
	free(text);
	cr_assert_eq(kill(pids[3], SIGKILL), 0);
	t0 = rdps_now_ns();
	cr_assert_eq(rdps_test_wait(launcher, 20000, &st), 0, "the launcher did not exit within 20 s");
	secs = (double)(rdps_now_ns() - t0) / 1e9;
	cr_log_info("launcher exited %.2f s after the SIGKILL", secs);
	/* --grace 3: SIGTERM at once, SIGKILL after 3 s at worst. */
	cr_expect_lt(secs, 6.0, "took %.2f s", secs);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x", st);
	text = rdps_test_slurp(log);
	snprintf(want, sizeof(want), "FAILED: trainer 1 (pid %d) killed by SIGKILL; stopped 3 other",
		 (int)pids[3]);
	cr_expect(strstr(text, want), "no '%s' in:\n%s", want, text);
	expect_nothing_left(pids);
	free(text);
	free(log);
}

Test(launch_local, sigint_stops_the_job)
{
	char *log = path("int.log"), *text;
	pid_t launcher = start_job(log), pids[4];
	int st;

	cr_assert_gt(launcher, 0);
	text = rdps_test_wait_log(log, "\n[trainer 1] step", 60000);
	job_pids(text, pids);
	free(text);
	cr_assert_eq(kill(launcher, SIGINT), 0);
	cr_assert_eq(rdps_test_wait(launcher, 20000, &st), 0, "the launcher did not exit within 20 s");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x", st);
	text = rdps_test_slurp(log);
	cr_expect(strstr(text, "interrupted by SIGINT; stopped 4 process(es)"), "%s", text);
	expect_nothing_left(pids);
	free(text);
	free(log);
}

Test(launch_local, port_in_use_is_refused_before_starting)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM, 0), st;
	char *log = path("inuse.log"), *text;
	pid_t launcher;

	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s, 1), 0);
	launcher = start_job(log);
	cr_assert_eq(rdps_test_wait(launcher, 20000, &st), 0);
	close(s);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x", st);
	text = rdps_test_slurp(log);
	cr_expect(strstr(text, "server 1 cannot listen") && strstr(text, "is in use"), "%s", text);
	cr_expect(!strstr(text, "(pid "), "something was started:\n%s", text);
	free(text);
	free(log);
}
