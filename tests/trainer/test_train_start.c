// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * The start of a distributed job, with rdps server and rdps train processes
 * over TCP on loopback: a trainer whose peer never starts fails within about
 * its --timeout, saying beforehand what it waits for and then which trainer
 * did not arrive; a trainer whose data does not load makes the others fail
 * at once naming it; --test given to only one of two trainers is refused by
 * both before any training step, naming --test. The control runs the same
 * job with both trainers and the same options: it starts and trains.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps_test.h"

/* Every process here finishes in seconds; waits past this are failures. */
#define PROC_WAIT_MS 60000

static char *dir, *data, *part;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void setup(void)
{
	dir = rdps_test_tmpdir("train-start");
	cr_assert(dir);
	data = path("kg");
	part = path("kg-part");
	rdps_test_synth_kg(data, 1000, 12, 12000, 0, part, 2);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
	free(data);
	free(part);
}

TestSuite(train_start, .init = setup, .fini = teardown, .timeout = 240);

/* A job: two servers of the partition on free loopback ports. */
struct job {
	const char *name;
	char *ipc;
	pid_t srv[2];
	char *srv_log[2];
};

/* Waits (bounded) until server pid says it listens: 0, or -1 if it exited
 * first (its port was taken meanwhile: the caller picks others). */
static int server_listening(pid_t pid, const char *log)
{
	for (int i = 0; i < 500; i++) {
		char *text = rdps_test_slurp(log);
		int up = text && strstr(text, "listening on"), st;

		free(text);
		if (up)
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(20000);
	}
	cr_assert_fail("server did not start listening in 10 s: %s", log);
	return -1;
}

static void job_servers(struct job *jb, const char *name)
{
	char text[64], file[64];

	jb->name = name;
	snprintf(file, sizeof(file), "%s-ip_config.txt", name);
	for (int attempt = 0;; attempt++) {
		int port = rdps_test_free_ports(2), up = 0;

		cr_assert_gt(port, 0);
		snprintf(text, sizeof(text), "127.0.0.1 %d 2\n", port);
		free(jb->ipc);
		jb->ipc = rdps_test_write(dir, file, text);
		cr_assert(jb->ipc);
		for (int s = 0; s < 2; s++) {
			char sid[8];
			char *argv[] = { RDPS_BIN, "server", "--ip_config", jb->ipc, "--server_id",
					 sid, "--transport", "tcp", "--partition", part,
					 "--model_name", "TransE_l2", "--hidden_dim", "16", "--quiet",
					 NULL };

			snprintf(sid, sizeof(sid), "%d", s);
			free(jb->srv_log[s]);
			cr_assert(asprintf(&jb->srv_log[s], "%s/%s-server%d-%d.log", dir, name, s,
					   attempt) > 0);
			jb->srv[s] = rdps_test_spawn(argv, jb->srv_log[s]);
			cr_assert_gt(jb->srv[s], 0);
		}
		/* The trainers' --timeout bounds their wait for a server too:
		 * start them once both servers listen. */
		for (int s = 0; s < 2; s++)
			up += !server_listening(jb->srv[s], jb->srv_log[s]);
		if (up == 2)
			return;
		/* another suite took a port between the check and the bind */
		cr_assert_lt(attempt, 3, "servers could not bind: %s", jb->srv_log[0]);
		for (int s = 0; s < 2; s++) {
			int st;

			kill(jb->srv[s], SIGTERM);
			rdps_test_wait(jb->srv[s], 10000, &st);
		}
	}
}

static void job_end(struct job *jb)
{
	int st;

	for (int s = 0; s < 2; s++) {
		kill(jb->srv[s], SIGTERM);
		rdps_test_wait(jb->srv[s], 10000, &st);
		free(jb->srv_log[s]);
	}
	free(jb->ipc);
}

/* Starts trainer rank of 2 on data with the options in extra (NULL-ended);
 * its output goes to DIR/NAME-trainerR.log (*log, malloc'd). */
static pid_t trainer(struct job *jb, int rank, const char *dataset, char *const extra[],
		     char **log)
{
	char r[8];
	char *argv[48] = { RDPS_BIN, "train", "--data", (char *)dataset, "--partition", part,
			   "--ip_config", jb->ipc, "--transport", "tcp", "--num_trainers", "2",
			   "--rank", r, "--hidden_dim", "16", "--batch_size", "64",
			   "--neg_sample_size", "8", "--max_step", "200", "--log_interval", "50",
			   "--keep_servers" };
	int n = 0;
	pid_t pid;

	snprintf(r, sizeof(r), "%d", rank);
	while (argv[n])
		n++;
	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	cr_assert(asprintf(log, "%s/%s-trainer%d.log", dir, jb->name, rank) > 0);
	pid = rdps_test_spawn(argv, *log);
	cr_assert_gt(pid, 0);
	return pid;
}

/* Waits for a trainer (bounded) and returns its output; *code its exit code. */
static char *finish(pid_t pid, const char *log, int *code)
{
	int st = 0;
	char *text;

	cr_assert_eq(rdps_test_wait(pid, PROC_WAIT_MS, &st), 0,
		     "the trainer was still running after %d s (killed): %s", PROC_WAIT_MS / 1000,
		     log);
	cr_assert(WIFEXITED(st), "the trainer died of signal %d", WTERMSIG(st));
	*code = WEXITSTATUS(st);
	text = rdps_test_slurp(log);
	cr_assert(text, "%s", log);
	return text;
}

/* Control for the others: both trainers, the same options (--test on
 * both), the same data: the job starts and trains, and trainer 0
 * evaluates. */
Test(train_start, both_trainers_with_the_same_options_train)
{
	struct job jb = { 0 };
	char *extra[] = { "--timeout", "30", "--test", NULL };
	char *log[2], *out[2];
	pid_t t[2];
	int code[2];

	job_servers(&jb, "control");
	for (int r = 0; r < 2; r++)
		t[r] = trainer(&jb, r, data, extra, &log[r]);
	for (int r = 0; r < 2; r++) {
		out[r] = finish(t[r], log[r], &code[r]);
		cr_assert_eq(code[r], 0, "trainer %d failed:\n%s", r, out[r]);
		cr_assert(strstr(out[r], "training done: 200 steps"), "%s", out[r]);
	}
	cr_assert(strstr(out[0], "Test average MRR"), "%s", out[0]);
	for (int r = 0; r < 2; r++) {
		free(out[r]);
		free(log[r]);
	}
	job_end(&jb);
}

/* No server listens: the trainer gives up after its --timeout of 2 s and
 * says so (it used to retry for --reconnect's 120 s whatever --timeout said,
 * then report "within 2000 ms"), before PROC_WAIT_MS. */
Test(train_start, no_server_reachable_gives_up_after_the_timeout)
{
	struct job jb = { .name = "noserver" };
	char text[64], *extra[] = { "--timeout", "2", NULL };
	char *log, *out;
	pid_t t0;
	int code;

	snprintf(text, sizeof(text), "127.0.0.1 %d 2\n", rdps_test_free_ports(2));
	jb.ipc = rdps_test_write(dir, "noserver-ip_config.txt", text);
	cr_assert(jb.ipc);
	t0 = trainer(&jb, 0, data, extra, &log);
	out = finish(t0, log, &code);
	cr_log_info("%s", out);
	cr_assert_eq(code, 1, "%s", out);
	cr_assert(strstr(out, "no server reachable: cannot connect to 127.0.0.1:"), "%s", out);
	cr_assert(strstr(out, "gave up after --timeout 2 s"), "%s", out);
	cr_assert_null(strstr(out, "up to 120 s"), "%s", out);
	free(out);
	free(log);
	free(jb.ipc);
}

/* Trainer 1 never starts: trainer 0 says what it waits for, then fails
 * within about its --timeout of 2 s (before PROC_WAIT_MS; the client's
 * barrier default was 10 minutes) naming trainer 1. */
Test(train_start, a_peer_that_never_starts_is_named_after_the_timeout)
{
	struct job jb = { 0 };
	char *extra[] = { "--timeout", "2", NULL };
	char *log, *out;
	pid_t t0;
	int code;

	job_servers(&jb, "alone");
	t0 = trainer(&jb, 0, data, extra, &log);
	out = finish(t0, log, &code);
	cr_log_info("%s", out);
	cr_assert_eq(code, 1, "%s", out);
	cr_assert(strstr(out, "trainer 0: waiting for the job's 2 trainers at the start barrier "
			      "(up to 2 s)"), "%s", out);
	cr_assert(strstr(out, "the start barrier timed out after 2 s (--timeout): trainer 1 of "
			      "the job's 2 did not arrive"), "%s", out);
	cr_assert_null(strstr(out, "step 50/"), "it trained:\n%s", out);
	free(out);
	free(log);
	job_end(&jb);
}

/* Trainer 1's entities.dict is damaged: it names the file and line, and
 * trainer 0 stops at once naming trainer 1 instead of waiting its 30 s
 * --timeout out and guessing. */
Test(train_start, a_peer_whose_data_does_not_load_is_named_at_once)
{
	struct job jb = { 0 };
	char *extra[] = { "--timeout", "30", NULL };
	char *bad = path("kg-bad"), *log[2], *out[2], *dict;
	pid_t t[2];
	int code[2];
	FILE *f;

	/* the dataset with entity 7 renamed */
	cr_assert_eq(mkdir(bad, 0755), 0);
	for (int i = 0; i < 4; i++) {
		static const char *const files[] = { "relations.dict", "train.txt", "valid.txt",
						     "test.txt" };
		char *from, *to;

		cr_assert(asprintf(&from, "%s/%s", data, files[i]) > 0);
		cr_assert(asprintf(&to, "%s/%s", bad, files[i]) > 0);
		cr_assert_eq(link(from, to), 0, "%s", from);
		free(from);
		free(to);
	}
	cr_assert(asprintf(&dict, "%s/entities.dict", bad) > 0);
	f = fopen(dict, "w");
	cr_assert(f);
	for (int e = 0; e < 1000; e++)
		fprintf(f, "%d\t%s%d\n", e, e == 7 ? "x" : "e", e);
	cr_assert_eq(fclose(f), 0);

	job_servers(&jb, "baddata");
	t[0] = trainer(&jb, 0, data, extra, &log[0]);
	t[1] = trainer(&jb, 1, bad, extra, &log[1]);
	for (int r = 0; r < 2; r++) {
		out[r] = finish(t[r], log[r], &code[r]);
		cr_log_info("trainer %d:\n%s", r, out[r]);
		cr_assert_eq(code[r], 1, "trainer %d:\n%s", r, out[r]);
		cr_assert_null(strstr(out[r], "step 50/"), "trainer %d trained:\n%s", r, out[r]);
	}
	cr_assert(strstr(out[1], "kg-bad/entities.dict:8 is '7\\tx7'"), "%s", out[1]);
	cr_assert(strstr(out[0], "trainer 1 could not load the data"), "%s", out[0]);
	for (int r = 0; r < 2; r++) {
		free(out[r]);
		free(log[r]);
	}
	free(dict);
	free(bad);
	job_end(&jb);
}

/* --test on trainer 0 only: both refuse before any training step, naming
 * --test and the trainer that differs (on 747c261 they trained, then
 * failed at the evaluation's collective). */
Test(train_start, test_on_one_trainer_only_is_refused_at_the_start)
{
	struct job jb = { 0 };
	char *with[] = { "--timeout", "30", "--test", NULL };
	char *without[] = { "--timeout", "30", NULL };
	char *log[2], *out[2];
	pid_t t[2];
	int code[2];

	job_servers(&jb, "test1");
	t[0] = trainer(&jb, 0, data, with, &log[0]);
	t[1] = trainer(&jb, 1, data, without, &log[1]);
	for (int r = 0; r < 2; r++) {
		out[r] = finish(t[r], log[r], &code[r]);
		cr_log_info("trainer %d:\n%s", r, out[r]);
		cr_assert_eq(code[r], 1, "trainer %d:\n%s", r, out[r]);
		cr_assert(strstr(out[r], "--test is given to trainer 0 but not to trainer 1"),
			  "trainer %d:\n%s", r, out[r]);
		cr_assert_null(strstr(out[r], "step 50/"), "trainer %d trained:\n%s", r, out[r]);
		cr_assert_null(strstr(out[r], "training done"), "trainer %d trained:\n%s", r, out[r]);
	}
	for (int r = 0; r < 2; r++) {
		free(out[r]);
		free(log[r]);
	}
	job_end(&jb);
}
