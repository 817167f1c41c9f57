// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// needs-rdps-tool
/*
 * rdps launch gives every job a secret without being asked (issue 24): the
 * servers of a plain 'rdps launch -- TRAIN_ARGS' refuse a client that does
 * not hold it, every process of the job has the same one in its
 * environment, and no command line (ps) shows it. The engines get it by
 * name only: mpirun -x RDPS_SECRET, srun's --export list. A --secret-file of
 * the train arguments is the job's secret instead, given to the servers too.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/common.h"
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

	/* The job's secret must come from rdps launch, not from here. */
	unsetenv("RDPS_SECRET");
	dir = rdps_test_tmpdir("launch-secret");
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

TestSuite(launch_secret, .init = setup, .fini = teardown, .timeout = 120);

static pid_t pid_of(const char *text, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "rdps launch: %s (pid ", name);
	p = strstr(text, key);
	cr_assert(p, "no '%s' in the launcher's output", key);
	return (pid_t)atoi(p + strlen(key));
}

/* /proc/PID/FILE (NUL-separated) with the NULs made spaces. */
static char *proc_file(pid_t pid, const char *file, size_t *len)
{
	char p[64], *buf = calloc(1, 1 << 16);
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	fd = open(p, O_RDONLY);
	cr_assert(fd >= 0 && buf, "%s: %s", p, strerror(errno));
	n = read(fd, buf, (1 << 16) - 1);
	close(fd);
	cr_assert_geq(n, 0);
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	*len = (size_t)n;
	return buf;
}

/* The value of RDPS_SECRET in pid's environment (malloc'd) or NULL. */
static char *secret_of(pid_t pid)
{
	size_t n;
	char *env = proc_file(pid, "environ", &n), *p = strstr(env, "RDPS_SECRET="), *v = NULL;

	if (p) {
		p += strlen("RDPS_SECRET=");
		v = strndup(p, strcspn(p, " "));
	}
	free(env);
	return v;
}

/* rdps stats against the job's servers, with the given secret or none. */
static int stats(const char *secret, const char *log)
{
	char *argv[] = { RDPS_BIN, "stats", "--ip_config", ipc, NULL };
	pid_t pid;
	int st;

	if (secret)
		setenv("RDPS_SECRET", secret, 1);
	pid = rdps_test_spawn(argv, log);
	unsetenv("RDPS_SECRET");
	cr_assert_eq(rdps_test_wait(pid, 60000, &st), 0, "rdps stats did not finish in 60 s");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(launch_secret, every_job_has_one_in_the_environment_only)
{
	char *log = path("job.log"), *stats_log = path("stats.log"), *text, *secret;
	char *argv[] = { RDPS_BIN, "launch", "--ip_config", ipc, "--num_client_proc", "2",
			 "--grace", "3", "--", "--data", data, "--partition", part,
			 "--hidden_dim", "16", "--batch_size", "256", "--neg_sample_size", "16",
			 "--max_step", "100000000", "--log_interval", "50", "--transport", "tcp",
			 NULL };
	const char *names[] = { "server 0", "server 1", "trainer 0", "trainer 1" };
	pid_t launcher = rdps_test_spawn(argv, log), pids[5];
	int st;

	cr_assert_gt(launcher, 0);
	/* The trainers authenticated: they train. */
	free(rdps_test_wait_log(log, "\n[trainer 1] step", 60000));
	text = rdps_test_wait_log(log, "\n[trainer 0] step", 30000);
	cr_expect(strstr(text, "generated the job's secret"), "%s", text);
	pids[0] = launcher;
	for (int i = 0; i < 4; i++)
		pids[i + 1] = pid_of(text, names[i]);
	free(text);
	secret = secret_of(pids[1]);
	cr_assert(secret, "server 0 has no RDPS_SECRET in its environment");
	cr_expect_eq(strlen(secret), 64, "'%s'", secret);
	for (int i = 0; i < 5; i++) {
		/* /proc/PID/environ is the launcher's environment at exec, before
		 * it set the secret: only its children's show it. */
		char *other = i ? secret_of(pids[i]) : NULL, *cmd;
		size_t n;

		cr_expect(!i || (other && !strcmp(other, secret)), "pid %d: RDPS_SECRET '%s', server 0's '%s'",
			  (int)pids[i], other ? other : "(none)", secret);
		cmd = proc_file(pids[i], "cmdline", &n);
		cr_expect(!strstr(cmd, secret), "the secret is on pid %d's command line: %s", (int)pids[i], cmd);
		free(cmd);
		free(other);
	}
	/* A client without it is refused; with it, served. */
	cr_expect_neq(stats(NULL, stats_log), 0, "rdps stats without the secret was served:\n%s",
		      (text = rdps_test_slurp(stats_log)));
	cr_expect_eq(stats(secret, stats_log), 0, "rdps stats with the job's secret failed:\n%s",
		     (text = rdps_test_slurp(stats_log)));
	cr_assert_eq(kill(launcher, SIGINT), 0);
	cr_assert_eq(rdps_test_wait(launcher, 30000, &st), 0, "the launcher did not exit within 30 s");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x", st);
	free(secret);
	free(log);
	free(stats_log);
}

/* Runs rdps launch with args (a --dry_run) and returns its output. */
static char *dry_run(char *const argv[], const char *name)
{
	char *log = path(name), *text;
	pid_t pid = rdps_test_spawn(argv, log);
	int st;

	cr_assert_eq(rdps_test_wait(pid, 60000, &st), 0);
	text = rdps_test_slurp(log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x:\n%s", st, text);
	free(log);
	return text;
}

Test(launch_secret, engines_get_it_by_name)
{
	char *slurm_ipc = path("slurm_ip_config.txt"), *text;
	char *mpi[] = { RDPS_BIN, "launch", "--backend", "mpi", "--ip_config", ipc, "--dry_run",
			"--", "--data", data, "--partition", part, NULL };
	char *slurm[] = { RDPS_BIN, "launch", "--backend", "slurm", "--ip_config", slurm_ipc,
			  "--hosts", "127.0.0.1", "--srun_arg=--export=NONE", "--dry_run", "--",
			  "--data", data, "--partition", part, NULL };
	char *slurm2[] = { RDPS_BIN, "launch", "--backend", "slurm", "--ip_config", slurm_ipc,
			   "--hosts", "127.0.0.1", "--srun_arg=--export", "--srun_arg=PATH,HOME",
			   "--dry_run", "--", "--data", data, "--partition", part, NULL };

	text = dry_run(mpi, "mpi.log");
	cr_expect(strstr(text, " -x RDPS_SECRET "), "%s", text);
	cr_expect(!strstr(text, "RDPS_SECRET="), "%s", text);
	free(text);
	text = dry_run(slurm, "slurm.log");
	cr_expect(strstr(text, " --export=RDPS_SECRET "), "%s", text);
	free(text);
	text = dry_run(slurm2, "slurm2.log");
	cr_expect(strstr(text, " --export PATH,HOME,RDPS_SECRET "), "%s", text);
	free(text);
	free(slurm_ipc);
}

Test(launch_secret, a_secret_file_is_the_jobs_and_the_servers)
{
	char *file = rdps_test_write(dir, "secret", "0123456789abcdef0123456789abcdef\n"), *text;
	char *argv[] = { RDPS_BIN, "launch", "--ip_config", ipc, "--dry_run", "--", "--data", data,
			 "--partition", part, "--secret-file", file, NULL };

	text = dry_run(argv, "file.log");
	cr_expect(strstr(text, "server 0: ") && strstr(strstr(text, "server 0: "), "--secret-file"),
		  "%s", text);
	cr_expect(!strstr(text, "generated the job's secret"), "%s", text);
	free(text);
	free(file);
}

/* --machine M of a job whose machines are launched separately: a secret
 * made by one launcher would be its machine's alone, so the user's is
 * required (the softroce launch test gives both guests one). */
Test(launch_secret, one_machine_of_many_needs_the_users_secret)
{
	char *two = rdps_test_write(dir, "two.txt", "127.0.0.1 30050 1\n127.0.0.2 30050 1\n"), *text, *log;
	char *argv[] = { RDPS_BIN, "launch", "--machine", "1", "--ip_config", two, "--dry_run", "--",
			 "--data", data, "--partition", part, NULL };
	pid_t pid;
	int st;

	log = path("machine.log");
	pid = rdps_test_spawn(argv, log);
	cr_assert_eq(rdps_test_wait(pid, 60000, &st), 0);
	text = rdps_test_slurp(log);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x:\n%s", st, text);
	cr_expect(strstr(text, "--machine 1 runs one machine of a 2-machine job") &&
		  strstr(text, "RDPS_SECRET") && strstr(text, "nothing was started"), "%s", text);
	cr_expect(!strstr(text, "trainer 1: "), "%s", text);
	free(text);
	free(log);
	setenv("RDPS_SECRET", "the-same-on-every-machine-0123456789", 1);
	text = dry_run(argv, "machine2.log");
	unsetenv("RDPS_SECRET");
	cr_expect(strstr(text, "trainer 1: ") && strstr(text, "the job's secret is RDPS_SECRET"), "%s", text);
	free(text);
	free(two);
}
