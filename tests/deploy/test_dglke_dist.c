// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// ctest-timeout: 1200
// needs-rdps-tool
/*
 * DGL-KE's distributed workflow, its two command lines with the command
 * names changed (issue 25), across two "machines": network namespaces with
 * a real OpenSSH server each (Debian's openssh-server, started here with a
 * host key and an authorized key made here), the launcher in a third
 * namespace joined to them by a bridge, as a user's laptop or head node:
 *
 *   rdps partition --dataset wn18 -k 2 --data_path WS
 *   rdps dist_train --path WS --ssh_key KEY --ip_config WS/ip_config.txt
 *     --num_client_proc 2 --model TransE_l2 --dataset wn18 --data_path WS ...
 *
 * (WordNet instead of FB15k, few steps.) The job over ssh must train as the
 * same line does when both machines are this host (loopback addresses:
 * forked, no ssh): its test MRR within the spread of four such runs (mean
 * within 4 sd, at least 0.02: asynchronous trainers make every run
 * differ). A machine whose sshd is down and a refused key fail with the
 * machine and the cause named, nothing started; a trainer killed on one
 * machine stops both; the launcher killed with SIGKILL mid-training leaves
 * no process and no listening port on either machine.
 *
 * Needs root (namespaces, sshd) and /usr/sbin/sshd (openssh-server): skips
 * with the reason otherwise; any other failure to start sshd fails.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps_test.h"

#define SSHD "/usr/sbin/sshd"
#define REF_RUNS 4

static char *dir, *ws, *key, *wrong_key, *known_hosts, *ipc, *ip_bin, *setup_log;

/* Setup and checks' shell commands: their output goes to DIR/setup.log. */
#define sh(...) rdps_test_sh(setup_log, __VA_ARGS__)
static char ns[3][32], host[3][32];
static int subnet;
static bool have_ns;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

/* sshd of machine i (namespace i, address 10.233.S.i+1, port 22). */
static void start_sshd(int i)
{
	char conf[256], text[1024], *log;

	snprintf(conf, sizeof(conf), "sshd%d.conf", i);
	snprintf(text, sizeof(text),
		 "ListenAddress %s\nPort 22\nHostKey %s/hostkey\nPidFile %s/sshd%d.pid\n"
		 "AuthorizedKeysFile %s/authorized_keys\nPubkeyAuthentication yes\n"
		 "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
		 "PermitRootLogin prohibit-password\n"
		 /* the test directory is under /tmp (world-writable) */
		 "StrictModes no\nUsePAM no\nLogLevel VERBOSE\n",
		 host[i], dir, dir, i, dir);
	free(rdps_test_write(dir, conf, text));
	snprintf(text, sizeof(text), "sshd%d.log", i);
	log = path(text);
	unlink(log);
	cr_assert_eq(sh("mkdir -p /run/sshd && ip netns exec %s " SSHD " -f %s/%s -E %s", ns[i], dir,
			conf, log), 0, "sshd of machine %d did not start (see %s/setup.log, %s)", i, dir, log);
	free(rdps_test_wait_log(log, "Server listening on", 30000));
	free(log);
}

static void stop_sshd(int i)
{
	sh("[ ! -f %s/sshd%d.pid ] || kill $(cat %s/sshd%d.pid) || true; rm -f %s/sshd%d.pid", dir, i,
	   dir, i, dir, i);
}

/* Processes whose command line holds the test directory, other than the
 * sshd listeners and their sessions; their pids into out. */
static int leftovers(pid_t *out, int max, char *what, size_t whatlen)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	what[0] = '\0';
	while (d && (e = readdir(d))) {
		char p[64], buf[4096];
		pid_t pid = (pid_t)atoi(e->d_name);
		ssize_t len;
		int fd;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
		fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[len] = '\0';
		if (!strstr(buf, dir) || !strncmp(buf, "sshd", 4) || strstr(buf, SSHD))
			continue;
		if (n < max)
			out[n] = pid;
		n++;
		snprintf(what + strlen(what), whatlen - strlen(what), "  %d: %.200s\n", (int)pid, buf);
	}
	if (d)
		closedir(d);
	return n;
}

/* Polls until no process of the job is left, up to timeout_ms. */
static void expect_nothing_left(int timeout_ms)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char what[8192];
	pid_t pids[64];
	int n;

	while ((n = leftovers(pids, 64, what, sizeof(what))) && rdps_now_ns() < deadline)
		usleep(100000);
	cr_expect_eq(n, 0, "%d process(es) left:\n%s", n, what);
	/* and no server port listening on either machine */
	for (int i = 0; i < 2; i++)
		cr_expect_eq(sh("! ip netns exec %s ss -Hltn | grep -q \":30050 \"", ns[i]), 0,
			     "a server still listens on %s:30050", host[i]);
}

static void make_namespaces(void)
{
	int pid = (int)getpid();

	subnet = pid % 250 + 1;
	for (int i = 0; i < 3; i++) {
		snprintf(ns[i], sizeof(ns[i]), "rdpsd%d%c", pid, 'a' + i);
		snprintf(host[i], sizeof(host[i]), "10.233.%d.%d", subnet, i + 1);
	}
	have_ns = true;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sh("ip netns add %s && ip -n %s link set lo up", ns[i], ns[i]), 0,
			     "cannot create netns %s (see %s/setup.log)", ns[i], dir);
	/* The launcher's namespace holds the bridge: nothing in the root one. */
	cr_assert_eq(sh("ip -n %s link add br0 type bridge && ip -n %s addr add %s/24 dev br0 && "
			"ip -n %s link set br0 up", ns[2], ns[2], host[2], ns[2]), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sh("ip -n %s link add eth0 type veth peer name p%d netns %s && "
				"ip -n %s link set p%d master br0 up && "
				"ip -n %s addr add %s/24 dev eth0 && ip -n %s link set eth0 up",
				ns[i], i, ns[2], ns[2], i, ns[i], host[i], ns[i]), 0,
			     "veth for %s (see %s/setup.log)", ns[i], dir);
}

static void setup(void)
{
	struct rdps_wordnet_opts wo;
	struct rdps_dataset_stats st;
	char err[512], text[256], *data, *argv[] = { RDPS_BIN, "partition", "--dataset", "wn18", "-k",
						    "2", "--data_path", NULL, NULL };
	char *log;
	pid_t pid;
	int status;

	unsetenv("RDPS_SECRET");
	if (geteuid() != 0)
		cr_skip_test("needs root: network namespaces and sshd");
	if (access(SSHD, X_OK))
		cr_skip_test("needs " SSHD " (Debian's openssh-server; deploy/install-deps.sh installs it)");
	ip_bin = !access("/usr/sbin/ip", X_OK) ? "/usr/sbin/ip" : !access("/sbin/ip", X_OK) ? "/sbin/ip"
											   : "/bin/ip";
	if (access(ip_bin, X_OK) || access("/usr/bin/ssh", X_OK) || access("/usr/bin/ssh-keygen", X_OK))
		cr_skip_test("needs iproute2 and openssh-client");
	dir = rdps_test_tmpdir("dglke-dist");
	cr_assert(dir);
	setup_log = path("setup.log");
	ws = path("my_task");
	key = path("id_ed25519");
	wrong_key = path("other_ed25519");
	known_hosts = path("known_hosts");
	cr_assert_eq(mkdir(ws, 0755), 0);
	cr_assert_eq(sh("ssh-keygen -q -t ed25519 -N \"\" -f %s && ssh-keygen -q -t ed25519 -N \"\" -f %s "
			"&& ssh-keygen -q -t ed25519 -N \"\" -f %s/hostkey && cp %s.pub %s/authorized_keys",
			key, wrong_key, dir, key, dir), 0, "ssh-keygen failed (see %s/setup.log)", dir);
	make_namespaces();
	start_sshd(0);
	start_sshd(1);
	snprintf(text, sizeof(text), "%s 30050 1\n%s 30050 1\n", host[0], host[1]);
	ipc = rdps_test_write(ws, "ip_config.txt", text);
	/* WordNet in my_task/wn18 (fewer test triples: a quicker evaluation),
	 * then DGL-KE's partition line. */
	data = path("my_task/wn18");
	rdps_dataset_wordnet_defaults(&wo);
	wo.num_valid = 500;
	wo.num_test = 1000;
	cr_assert_eq(rdps_dataset_wordnet(data, &wo, &st, err, sizeof(err)), 0, "%s", err);
	free(data);
	argv[7] = ws;
	log = path("partition.log");
	pid = rdps_test_spawn(argv, log);
	cr_assert_eq(rdps_test_wait(pid, 120000, &status), 0, "rdps partition did not finish in 120 s");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rdps partition failed:\n%s",
		  rdps_test_slurp(log));
	snprintf(text, sizeof(text), "%s/wn18/partition-k2/partition.json", ws);
	cr_assert_eq(access(text, R_OK), 0, "DGL-KE's partition line wrote no %s", text);
	free(log);
}

static void teardown(void)
{
	char what[8192];
	pid_t pids[64];
	int n;

	if (!dir)
		return;
	/* Whatever a failed test left: nothing may outlive the suite. */
	n = leftovers(pids, 64, what, sizeof(what));
	for (int i = 0; i < n && i < 64; i++)
		kill(pids[i], SIGKILL);
	stop_sshd(0);
	stop_sshd(1);
	if (have_ns)
		for (int i = 0; i < 3; i++)
			sh("ip netns del %s || true", ns[i]);
	have_ns = false;
	rdps_test_rmtree(dir);
	free(dir);
	free(ws);
	free(key);
	free(wrong_key);
	free(known_hosts);
	free(ipc);
	free(setup_log);
	dir = NULL;
}

TestSuite(dglke_dist, .init = setup, .fini = teardown, .timeout = 900);

/* The seed's dist_train line (WordNet, few steps); max_step and the key vary. */
#define DIST_TRAIN_LINE(IPC, KEY, STEPS)                                                            \
	RDPS_BIN, "dist_train", "--path", ws, "--ssh_key", KEY, "--ip_config", IPC,                   \
		"--num_client_proc", "2", "--model", "TransE_l2", "--dataset", "wn18", "--data_path", ws, \
		"--hidden_dim", "64", "--gamma", "6", "--lr", "0.25", "--batch_size", "1000",            \
		"--neg_sample_size", "200", "--max_step", STEPS, "--log_interval", "100",                \
		"--batch_size_eval", "16", "--test", "-adv", "--regularization_coef", "1.00E-07",       \
		"--no_save_emb", "--num_thread", "1", "--transport", "tcp", "--grace", "5"

/* Runs argv in namespace i (ip netns exec), output to log. */
static pid_t spawn_in_ns(int i, char **argv, int argc, const char *log)
{
	char **full = calloc((size_t)argc + 8, sizeof(*full));
	int k = 0;
	pid_t pid;

	cr_assert(full);
	full[k++] = ip_bin;
	full[k++] = "netns";
	full[k++] = "exec";
	full[k++] = ns[i];
	for (int a = 0; a < argc; a++)
		full[k++] = argv[a];
	full[k] = NULL;
	pid = rdps_test_spawn(full, log);
	free(full);
	return pid;
}

/* dist_train's summary line (at the start of a line: not the prefixed
 * copy trainer 0's own output makes). */
#define SUMMARY_MRR "\nTest average MRR : "

#define SSH_OPTS "--ssh_arg=-Fnone", ssh_known

Test(dglke_dist, the_tutorial_lines_run_over_ssh_as_they_train_here)
{
	char ref_ipc_text[128], *ref_ipc, *log, *text, ssh_known[PATH_MAX + 48], name[64];
	double ref[REF_RUNS], mean = 0, sd = 0, tol, mrr;
	int port = rdps_test_free_ports(1), st;
	pid_t pid;

	snprintf(ssh_known, sizeof(ssh_known), "--ssh_arg=-oUserKnownHostsFile=%s", known_hosts);
	/* The reference: the same line with both machines this host. */
	cr_assert_gt(port, 0);
	snprintf(ref_ipc_text, sizeof(ref_ipc_text), "127.0.0.1 %d 1\n127.0.0.2 %d 1\n", port, port);
	ref_ipc = rdps_test_write(ws, "ip_config_here.txt", ref_ipc_text);
	for (int r = 0; r < REF_RUNS; r++) {
		char *argv[] = { DIST_TRAIN_LINE(ref_ipc, key, "300"), NULL };

		snprintf(name, sizeof(name), "here%d.log", r);
		log = path(name);
		pid = rdps_test_spawn(argv, log);
		cr_assert_eq(rdps_test_wait(pid, 300000, &st), 0, "run %d here did not finish in 300 s", r);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run %d here failed:\n%s", r,
			  rdps_test_slurp(log));
		ref[r] = rdps_test_log_number(log, SUMMARY_MRR);
		mean += ref[r] / REF_RUNS;
		free(log);
	}
	for (int r = 0; r < REF_RUNS; r++)
		sd += (ref[r] - mean) * (ref[r] - mean) / (REF_RUNS - 1);
	sd = sqrt(sd);
	/* Over ssh: the launcher in its own namespace, a machine in each other. */
	{
		char *argv[] = { DIST_TRAIN_LINE(ipc, key, "300"), SSH_OPTS, NULL };

		log = path("ssh.log");
		pid = spawn_in_ns(2, argv, (int)(sizeof(argv) / sizeof(argv[0])) - 1, log);
		cr_assert_eq(rdps_test_wait(pid, 300000, &st), 0, "the ssh job did not finish in 300 s");
		text = rdps_test_slurp(log);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the ssh job failed (status 0x%x):\n%s",
			  st, text);
	}
	/* It went through sshd to both machines, whose processes ran there. */
	snprintf(name, sizeof(name), "[%s] rdps launch: machine 1 is ready", host[1]);
	cr_expect(strstr(text, name), "no '%s':\n%s", name, text);
	snprintf(name, sizeof(name), "listening on %s:30050", host[1]);
	cr_expect(strstr(text, name), "no '%s':\n%s", name, text);
	snprintf(name, sizeof(name), "[%s trainer 3] step 300/300", host[1]);
	cr_expect(strstr(text, name), "no '%s':\n%s", name, text);
	/* What DGL-KE prints at the end. */
	cr_expect(strstr(text, "\nTotal train time "), "%s", text);
	cr_expect(strstr(text, "\n-------------- Test result --------------\nTest average MRR : "), "%s",
		  text);
	cr_expect(strstr(text, "\nserver 0: solved message count: "), "%s", text);
	cr_expect(strstr(text, "\nserver 1: solved message count: "), "%s", text);
	free(text);
	mrr = rdps_test_log_number(log, SUMMARY_MRR);
	tol = fmax(4 * sd, 0.02);
	cr_log_info("test MRR: here %.4f %.4f %.4f %.4f (mean %.4f, sd %.4f); over ssh %.4f, off by "
		    "%.4f, tolerance %.4f", ref[0], ref[1], ref[2], ref[3], mean, sd, mrr,
		    fabs(mrr - mean), tol);
	cr_expect_gt(mean, 0.2, "the runs here did not learn (mean MRR %.4f)", mean);
	cr_expect_leq(fabs(mrr - mean), tol, "over ssh %.4f, here %.4f +- %.4f (4 sd, at least 0.02)",
		      mrr, mean, tol);
	expect_nothing_left(30000);
	free(log);
	free(ref_ipc);
}

Test(dglke_dist, a_machine_without_sshd_or_a_refused_key_starts_nothing)
{
	char ssh_known[PATH_MAX + 48], want[160], *log, *text;
	uint64_t t0;
	pid_t pid;
	int st;

	snprintf(ssh_known, sizeof(ssh_known), "--ssh_arg=-oUserKnownHostsFile=%s", known_hosts);
	/* A key the machines do not know. */
	{
		char *argv[] = { DIST_TRAIN_LINE(ipc, wrong_key, "100000"), SSH_OPTS, NULL };

		log = path("wrong_key.log");
		pid = spawn_in_ns(2, argv, (int)(sizeof(argv) / sizeof(argv[0])) - 1, log);
		cr_assert_eq(rdps_test_wait(pid, 180000, &st), 0, "did not finish in 180 s");
		text = rdps_test_slurp(log);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x:\n%s", st, text);
		for (int i = 0; i < 2; i++) {
			snprintf(want, sizeof(want), "machine %d (%s): cannot connect over ssh to %s with key %s",
				 i, host[i], host[i], wrong_key);
			cr_expect(strstr(text, want), "no '%s' in:\n%s", want, text);
		}
		cr_expect(strstr(text, "Permission denied (publickey)") && strstr(text, "refused the key"),
			  "%s", text);
		cr_expect(strstr(text, "nothing was started") && !strstr(text, "(pid "), "%s", text);
		free(text);
		free(log);
		expect_nothing_left(10000);
	}
	/* Machine 1's sshd is down. */
	stop_sshd(1);
	{
		char *argv[] = { DIST_TRAIN_LINE(ipc, key, "100000"), SSH_OPTS, NULL };

		log = path("sshd_down.log");
		t0 = rdps_now_ns();
		pid = spawn_in_ns(2, argv, (int)(sizeof(argv) / sizeof(argv[0])) - 1, log);
		cr_assert_eq(rdps_test_wait(pid, 180000, &st), 0, "did not finish in 180 s");
		text = rdps_test_slurp(log);
		cr_log_info("sshd down: refused after %.2f s", (double)(rdps_now_ns() - t0) / 1e9);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x:\n%s", st, text);
		snprintf(want, sizeof(want), "machine 1 (%s): cannot connect over ssh to %s", host[1],
			 host[1]);
		cr_expect(strstr(text, want), "no '%s' in:\n%s", want, text);
		cr_expect(strstr(text, "Connection refused") && strstr(text, "is sshd running"), "%s", text);
		/* machine 0 was reachable, and still nothing started there */
		snprintf(want, sizeof(want), "machine 0 (%s): cannot connect", host[0]);
		cr_expect(!strstr(text, want), "%s", text);
		cr_expect(strstr(text, "nothing was started") && !strstr(text, "(pid "), "%s", text);
		free(text);
		free(log);
		expect_nothing_left(10000);
	}
}

/* Starts the long job over ssh; returns the launcher, once both machines'
 * trainers train. */
static pid_t start_long_job(const char *log, char **text)
{
	char ssh_known[PATH_MAX + 48], want[96];
	char *argv[] = { DIST_TRAIN_LINE(ipc, key, "100000000"), SSH_OPTS, NULL };
	pid_t pid;

	snprintf(ssh_known, sizeof(ssh_known), "--ssh_arg=-oUserKnownHostsFile=%s", known_hosts);
	pid = spawn_in_ns(2, argv, (int)(sizeof(argv) / sizeof(argv[0])) - 1, log);
	cr_assert_gt(pid, 0);
	snprintf(want, sizeof(want), "[%s trainer 1] step ", host[1]);
	free(rdps_test_wait_log(log, want, 240000));
	snprintf(want, sizeof(want), "[%s trainer 0] step ", host[0]);
	*text = rdps_test_wait_log(log, want, 60000);
	return pid;
}

/* The pid machine i's launcher printed for name ("[HOST] rdps launch:
 * trainer 1 (pid N): ..."). */
static pid_t remote_pid(const char *text, int i, const char *name)
{
	char k[128];
	const char *p;

	snprintf(k, sizeof(k), "[%s] rdps launch: %s (pid ", host[i], name);
	p = strstr(text, k);
	cr_assert(p, "no '%s' in:\n%s", k, text);
	return (pid_t)atoi(p + strlen(k));
}

Test(dglke_dist, a_trainer_killed_on_one_machine_stops_both)
{
	char *log = path("trainer_killed.log"), *text, want[160], what[8192];
	pid_t launcher = start_long_job(log, &text), victim = remote_pid(text, 1, "trainer 3"), pids[64];
	int st;

	/* The control: the job's processes are visible to the check. */
	cr_assert_geq(leftovers(pids, 64, what, sizeof(what)), 6, "%s", what);
	free(text);
	cr_assert_eq(kill(victim, SIGKILL), 0);
	cr_assert_eq(rdps_test_wait(launcher, 120000, &st), 0, "the launcher did not exit in 120 s");
	text = rdps_test_slurp(log);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x:\n%s", st, text);
	snprintf(want, sizeof(want), "FAILED: machine 1 (%s) (pid ", host[1]);
	cr_expect(strstr(text, want), "no '%s':\n%s", want, text);
	snprintf(want, sizeof(want), "exited with status 1: trainer 3 (pid %d) killed by SIGKILL",
		 (int)victim);
	cr_expect(strstr(text, want), "no '%s':\n%s", want, text);
	free(text);
	expect_nothing_left(60000);
	free(log);
}

Test(dglke_dist, killing_the_launcher_leaves_nothing_on_any_machine)
{
	char *log = path("launcher_killed.log"), *text, what[8192];
	pid_t launcher = start_long_job(log, &text), pids[64];
	int st, n;

	free(text);
	/* The control: servers and trainers on both machines, the machines'
	 * launchers, the ssh sessions: the check sees them. */
	n = leftovers(pids, 64, what, sizeof(what));
	cr_assert_geq(n, 10, "%s", what);
	cr_assert_eq(sh("ip netns exec %s ss -Hltn | grep -q \":30050 \"", ns[1]), 0,
		     "machine 1's server does not listen: the check of ports could not fail");
	cr_assert_eq(kill(launcher, SIGKILL), 0);
	cr_assert_eq(rdps_test_wait(launcher, 10000, &st), 0);
	/* --grace 5: the machines stop their processes within it, SIGKILL after. */
	expect_nothing_left(60000);
	free(log);
}

/* DGL-KE's tutorial runs the launcher on machine 0: that machine's
 * processes are forked (no ssh to itself), machine 1's go over ssh. */
Test(dglke_dist, the_launcher_on_machine_0_forks_its_own_and_reaches_the_other_over_ssh)
{
	char ssh_known[PATH_MAX + 48], want[160], *log = path("on_machine0.log"), *text;
	char *argv[] = { DIST_TRAIN_LINE(ipc, key, "100"), SSH_OPTS, NULL };
	pid_t pid;
	int st;

	snprintf(ssh_known, sizeof(ssh_known), "--ssh_arg=-oUserKnownHostsFile=%s", known_hosts);
	pid = spawn_in_ns(0, argv, (int)(sizeof(argv) / sizeof(argv[0])) - 1, log);
	cr_assert_eq(rdps_test_wait(pid, 300000, &st), 0, "the job did not finish in 300 s");
	text = rdps_test_slurp(log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x:\n%s", st, text);
	snprintf(want, sizeof(want), "rdps launch: machine 0 (%s) (pid ", host[0]);
	cr_expect(strstr(text, want) && strstr(strstr(text, want), "): " RDPS_BIN " launch --ssh-remote"),
		  "machine 0 was not forked here:\n%s", text);
	snprintf(want, sizeof(want), "rdps launch: machine 1 (%s) (pid ", host[1]);
	cr_expect(strstr(text, want) && strstr(strstr(text, want), "): ssh -o BatchMode=yes"),
		  "machine 1 did not go over ssh:\n%s", text);
	cr_expect(strstr(text, "\n-------------- Test result --------------\nTest average MRR : "), "%s", text);
	cr_expect(strstr(text, "\nserver 1: solved message count: "), "%s", text);
	free(text);
	expect_nothing_left(30000);
	free(log);
}
