// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// needs-rdps-tool
/*
 * rdps launch refuses a bad command line before it starts anything: a
 * misspelled launch option gets a did-you-mean in one line instead of the
 * help text, and train arguments that 'rdps train --check-only' refuses (a
 * typo, a data directory that is not there) stop the launch with that
 * check's error, no server or trainer started and no port bound. The same
 * job with good arguments (the control) starts all four processes.
 *
 * The contract with rdps train: --check-only parses and validates the
 * options, data files, partition and save path without contacting a
 * server, and exits 0, or 2 with a short error (no usage text).
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

/* The job's train arguments: a short run on the suite's graph. */
#define TRAIN_ARGS(d, p)                                                                           \
	"--data", d, "--partition", p, "--hidden_dim", "16", "--batch_size", "256",                \
	"--neg_sample_size", "16", "--max_step", "20", "--log_interval", "10", "--transport", "tcp"
enum { NUM_TRAIN_ARGS = 16 };

/* rdps launch --ip_config ipc --num_client_proc 2 -- TRAIN, and its output. */
static char *launch(char **train, const char *log, int *st)
{
	char *argv[8 + NUM_TRAIN_ARGS] = { RDPS_BIN, "launch", "--ip_config", ipc,
					   "--num_client_proc", "2", "--" };

	memcpy(argv + 7, train, NUM_TRAIN_ARGS * sizeof(char *));
	return run(argv, log, st);
}

/* What 'rdps train --check-only' says about trainer 0's command line:
 * TRAIN plus what the launcher adds. */
static char *check_only(char **train, const char *log, int *st)
{
	char *argv[10 + NUM_TRAIN_ARGS] = { RDPS_BIN, "train", "--check-only" };

	memcpy(argv + 3, train, NUM_TRAIN_ARGS * sizeof(char *));
	argv[3 + NUM_TRAIN_ARGS] = "--ip_config";
	argv[4 + NUM_TRAIN_ARGS] = ipc;
	argv[5 + NUM_TRAIN_ARGS] = "--num_trainers";
	argv[6 + NUM_TRAIN_ARGS] = "2";
	argv[7 + NUM_TRAIN_ARGS] = "--rank";
	argv[8 + NUM_TRAIN_ARGS] = "0";
	return run(argv, log, st);
}

static void expect_ports_free(void)
{
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + i)),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		cr_expect_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0, "port %d bound: %s", port + i,
			     strerror(errno));
		close(s);
	}
}

/* train is refused by --check-only with an error naming what: the launch
 * prints that error, says nothing was started, and starts nothing. */
static void expect_refused_before_start(char **train, const char *what, const char *tag)
{
	char log[64], line[512], *check, *text, *p, *e;
	int st;

	snprintf(log, sizeof(log), "%s-check.log", tag);
	check = check_only(train, log, &st);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "--check-only: status 0x%x:\n%s", st, check);
	cr_assert(!strstr(check, "usage: rdps train"), "--check-only printed the usage text:\n%s", check);
	/* The line of the check's error that names the culprit. */
	p = strstr(check, what);
	cr_assert(p, "--check-only does not name '%s':\n%s", what, check);
	while (p > check && p[-1] != '\n')
		p--;
	e = strchr(p, '\n');
	snprintf(line, sizeof(line), "%.*s", (int)(e ? e - p : (long)strlen(p)), p);

	snprintf(log, sizeof(log), "%s-launch.log", tag);
	text = launch(train, log, &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "launch: status 0x%x:\n%s", st, text);
	cr_expect(strstr(text, line), "the launch does not print the check's error '%s':\n%s", line, text);
	cr_expect(strstr(text, "nothing was started"), "%s", text);
	cr_expect(!strstr(text, "(pid "), "something was started:\n%s", text);
	cr_expect(!strstr(text, "usage: rdps train"), "the error is buried in usage text:\n%s", text);
	expect_ports_free();
	free(text);
	free(check);
}

Test(launch_check, misspelled_train_argument_starts_nothing)
{
	char *train[] = { TRAIN_ARGS(data, part) };

	train[10] = "--max_stpe";
	expect_refused_before_start(train, "max_stpe", "typo");
}

Test(launch_check, missing_data_starts_nothing)
{
	char *nokg = path("no-such-kg");
	char *train[] = { TRAIN_ARGS(nokg, part) };

	expect_refused_before_start(train, "no-such-kg", "nodata");
	free(nokg);
}

/* The control: the same job, good arguments, passes the check, starts its
 * 2 servers and 2 trainers and finishes. */
Test(launch_check, good_arguments_start_the_job)
{
	char *train[] = { TRAIN_ARGS(data, part) }, *text;
	int st;

	text = check_only(train, "good-check.log", &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "--check-only: status 0x%x:\n%s", st, text);
	free(text);
	text = launch(train, "good-launch.log", &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x:\n%s", st, text);
	cr_expect(strstr(text, "rdps launch: server 0 (pid ") &&
		  strstr(text, "rdps launch: server 1 (pid ") &&
		  strstr(text, "rdps launch: trainer 0 (pid ") &&
		  strstr(text, "rdps launch: trainer 1 (pid "), "%s", text);
	cr_expect(strstr(text, "2 server(s) and 2 trainer(s) finished"), "%s", text);
	free(text);
}
