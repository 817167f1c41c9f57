// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// ctest-timeout: 900
// needs-rdps-tool
/*
 * Multi-host on one machine: three network namespaces (two server hosts,
 * one trainer host) joined by veth pairs to a bridge inside the third, with
 * addresses in 10.231.N.0/24 that exist only inside them. One real mpirun
 * (rdps launch --backend mpi) starts 2 servers + 2 trainers, each rank
 * entering its host's namespace through a wrapper; the job must train to the
 * same test MRR as the same job under rdps launch --backend local.
 *
 * Tolerance: two asynchronous trainers interleave their pushes differently
 * on every run, so no two runs are bit-identical, local or not, and a loaded
 * machine spreads them more. The mpirun job's MRR must lie within max(4 sd,
 * 0.02) of the mean of three local runs, while an untrained model scores
 * ~0.0003 and 250 steps instead of 1000 give ~0.016: a job that lost a
 * trainer, or whose trainers and servers disagree on the partition, is far
 * outside.
 *
 * Needs root (netns) and mpirun (openmpi-bin); skips otherwise.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps_test.h"

static char *dir, *data, *part, *netns_log;

/* Namespace commands: their output goes to DIR/netns.log. */
#define sh(...) rdps_test_sh(netns_log, __VA_ARGS__)
static char ns[3][32];
static int subnet;
static bool have_ns;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void make_namespaces(void)
{
	int pid = (int)getpid();

	subnet = pid % 250 + 1;
	for (int i = 0; i < 3; i++)
		snprintf(ns[i], sizeof(ns[i]), "rdps%d%c", pid, 'a' + i);
	have_ns = true;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sh("ip netns add %s && ip -n %s link set lo up", ns[i], ns[i]), 0,
			     "cannot create netns %s (see %s/netns.log)", ns[i], dir);
	/* The bridge lives in the trainer host's namespace: nothing in the
	 * root namespace (no firewall or bridge-netfilter in the path). */
	cr_assert_eq(sh("ip -n %s link add br0 type bridge && ip -n %s addr add 10.231.%d.3/24 dev br0 && "
			"ip -n %s link set br0 up",
			ns[2], ns[2], subnet, ns[2]), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sh("ip -n %s link add eth0 type veth peer name p%d netns %s && "
				"ip -n %s link set p%d master br0 up && "
				"ip -n %s addr add 10.231.%d.%d/24 dev eth0 && ip -n %s link set eth0 up",
				ns[i], i, ns[2], ns[2], i, ns[i], subnet, i + 1, ns[i]), 0,
			     "veth for %s (see %s/netns.log)", ns[i], dir);
}

static void remove_namespaces(void)
{
	if (!have_ns)
		return;
	/* Deleting a namespace removes its veth ends (and their peers). */
	for (int i = 0; i < 3; i++)
		sh("ip netns del %s || true", ns[i]);
	have_ns = false;
}

static void setup(void)
{
	struct rdps_wordnet_opts wo;
	struct rdps_dataset_stats st;
	struct rdps_partition_opts po = { .k = 2, .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result pr;
	char err[512];

	dir = rdps_test_tmpdir("launch-mpi");
	cr_assert(dir);
	netns_log = path("netns.log");
	data = path("wn");
	part = path("wn-part2");
	rdps_dataset_wordnet_defaults(&wo);
	wo.num_valid = 500;
	wo.num_test = 5000; /* fewer make two async runs' MRR differ by eval noise */
	cr_assert_eq(rdps_dataset_wordnet(data, &wo, &st, err, sizeof(err)), 0, "%s", err);
	po.data_dir = data;
	po.out_dir = part;
	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	remove_namespaces();
	rdps_test_rmtree(dir);
	free(dir);
	free(data);
	free(part);
	free(netns_log);
}

TestSuite(launch_mpi, .init = setup, .fini = teardown, .timeout = 800);

#define LOCAL_RUNS 3

#define TRAIN_ARGS                                                                                  \
	"--", "--data", data, "--partition", part, "--model_name", "TransE_l2", "--hidden_dim", "100", \
		"--gamma", "6", "--lr", "0.1", "--batch_size", "1024", "--neg_sample_size", "64", "-adv", \
		"-rc", "1e-7", "--max_step", "1000", "--log_interval", "0", "--test", "--transport", "tcp"

static bool have_tool(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

Test(launch_mpi, three_namespaces_match_the_local_launch)
{
	char *mpi_log = path("mpi.log"), *text;
	char *local_ipc, *ipc, *wrapper, buf[512], thost[32], mpi_hosts[] = "localhost";
	double local_mrr[LOCAL_RUNS], mean = 0, sd = 0, tol, mpi_mrr;
	int port = rdps_test_free_ports(2), st;
	pid_t pid;

	if (geteuid() != 0 || !have_tool("ip") || !have_tool("mpirun"))
		cr_skip_test("needs root, iproute2 and mpirun (openmpi-bin)");

	/* The local job: one machine with both servers, two trainers. */
	snprintf(buf, sizeof(buf), "127.0.0.1 %d 2\n", port);
	local_ipc = rdps_test_write(dir, "local_ip_config.txt", buf);
	for (int r = 0; r < LOCAL_RUNS; r++) {
		char *argv[] = { RDPS_BIN, "launch", "--backend", "local", "--ip_config", local_ipc,
				 "--num_client_proc", "2", TRAIN_ARGS, NULL }, name[32], *local_log;

		snprintf(name, sizeof(name), "local%d.log", r);
		local_log = path(name);
		pid = rdps_test_spawn(argv, local_log);
		cr_assert_eq(rdps_test_wait(pid, 300000, &st), 0, "local run %d did not finish in 300 s", r);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "local run %d failed; see %s", r, local_log);
		local_mrr[r] = rdps_test_log_number(local_log, "Test average MRR : ");
		mean += local_mrr[r] / LOCAL_RUNS;
		free(local_log);
	}
	for (int r = 0; r < LOCAL_RUNS; r++)
		sd += (local_mrr[r] - mean) * (local_mrr[r] - mean) / (LOCAL_RUNS - 1);
	sd = sqrt(sd);

	/* The same job over three hosts: servers on 10.231.N.1 and .2, both
	 * trainers on .3 (rdps launch --print-layout: ranks 0, 1 servers,
	 * ranks 2, 3 trainers). */
	make_namespaces();
	snprintf(buf, sizeof(buf), "10.231.%d.1 30050 1\n10.231.%d.2 30050 1\n", subnet, subnet);
	ipc = rdps_test_write(dir, "ip_config.txt", buf);
	snprintf(thost, sizeof(thost), "10.231.%d.3", subnet);
	snprintf(buf, sizeof(buf),
		 "#!/bin/sh\n# rank -> host namespace, as the launch layout places ranks\n"
		 "case \"$OMPI_COMM_WORLD_RANK\" in\n0) ns=%s ;;\n1) ns=%s ;;\n*) ns=%s ;;\nesac\n"
		 "exec ip netns exec \"$ns\" \"$@\"\n",
		 ns[0], ns[1], ns[2]);
	wrapper = rdps_test_write(dir, "netns-wrapper.sh", buf);
	cr_assert_eq(chmod(wrapper, 0755), 0);
	{
		char *argv[] = { RDPS_BIN, "launch", "--backend", "mpi", "--ip_config", ipc,
				 "--trainer_hosts", thost, "--num_client_proc", "2",
				 "--mpi_hosts", mpi_hosts, "--mpi_arg=--allow-run-as-root",
				 "--mpi_arg=--oversubscribe", "--wrapper", wrapper, TRAIN_ARGS, NULL };

		pid = rdps_test_spawn(argv, mpi_log);
		cr_assert_eq(rdps_test_wait(pid, 300000, &st), 0, "mpirun did not finish in 300 s");
		text = rdps_test_slurp(mpi_log);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the mpirun job failed (status 0x%x):\n%s", st, text);
	}
	/* It really went through mpirun, and each server ran in its namespace. */
	cr_expect(strstr(text, "rdps launch: mpirun --allow-run-as-root --oversubscribe -x RDPS_SECRET -np 1 "
			      "-H localhost:1 "), "%s", text);
	/* The job's secret went by name (-x), its value on no command line. */
	cr_expect(!strstr(text, "RDPS_SECRET="), "%s", text);
	snprintf(buf, sizeof(buf), "listening on 10.231.%d.2:30050", subnet);
	cr_expect(strstr(text, buf), "%s", text);
	cr_expect(strstr(text, "Open MPI rank 3 (local rank 3) is trainer 1 on machine 2"), "%s", text);
	mpi_mrr = rdps_test_log_number(mpi_log, "Test average MRR : ");
	tol = fmax(4 * sd, 0.02);
	cr_log_info("test MRR: local %.4f %.4f %.4f (mean %.4f, sd %.4f); mpirun over 3 namespaces %.4f, "
		    "off by %.4f, tolerance %.4f", local_mrr[0], local_mrr[1], local_mrr[2], mean, sd, mpi_mrr,
		    fabs(mpi_mrr - mean), tol);
	cr_expect_gt(mean, 0.1, "the job did not learn");
	cr_expect_leq(fabs(mpi_mrr - mean), tol, "local %.4f +- %.4f, mpi %.4f", mean, tol, mpi_mrr);
	free(text);
	free(mpi_log);
	free(local_ipc);
	free(ipc);
	free(wrapper);
}
