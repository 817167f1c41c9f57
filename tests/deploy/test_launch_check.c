// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// needs-rdps-tool
/*
 * rdps launch refuses a bad command line before it starts anything: a
 * misspelled launch option gets a did-you-mean in one line instead of the
 * help text.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

	dir = rdps_test_tmpdir("launchcheck");
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

TestSuite(launch_check, .init = setup, .fini = teardown, .timeout = 120);

/* Runs argv to the end (bounded) with its output in dir/log; returns the
 * output, *status its wait status. */
static char *run(char **argv, const char *log, int *status)
{
	char *logp = path(log), *text;

	cr_assert_eq(rdps_test_wait(rdps_test_spawn(argv, logp), 60000, status), 0,
		     "%s %s did not exit within 60 s", argv[1], argv[2]);
	text = rdps_test_slurp(logp);
	cr_assert(text);
	free(logp);
	return text;
}

static int lines(const char *text)
{
	int n = 0;

	for (const char *p = text; *p; p++)
		n += *p == '\n';
	return n;
}

Test(launch_check, misspelled_launch_option_gets_a_did_you_mean)
{
	char *a[] = { RDPS_BIN, "launch", "--ip_confg", ipc, "--", "--data", data, "--partition", part,
		      NULL };
	char *b[] = { RDPS_BIN, "launch", "--ip_config", ipc, "--num-client-proc", "2", "--",
		      "--data", data, "--partition", part, NULL };
	char *text;
	int st;

	text = run(a, "typo.log", &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x", st);
	cr_expect(strstr(text, "rdps launch: unknown option '--ip_confg' (did you mean --ip_config?)\n"),
		  "%s", text);
	/* The error, not buried: a usage line, not the help text. */
	cr_expect_leq(lines(text), 5, "%d lines:\n%s", lines(text), text);
	cr_expect(!strstr(text, "(pid "), "something was started:\n%s", text);
	free(text);

	text = run(b, "dashes.log", &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x", st);
	cr_expect(strstr(text, "unknown option '--num-client-proc' (did you mean --num_client_proc?)"),
		  "%s", text);
	free(text);
}
