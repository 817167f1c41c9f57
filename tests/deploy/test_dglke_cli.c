// SPDX-License-Identifier: MIT
// ctest-labels: deploy
// needs-rdps-tool
/*
 * DGL-KE's distributed workflow lines, without a cluster (issue 25):
 * dglke_partition's line writes the partition where dist_train looks;
 * DGL-KE's built-in dataset names, absent, say which files to put where or
 * which rdps dataset command makes the nearest one (and that command then
 * works); --format raw_udd_<order> partitions as rdps train reads it;
 * dglke_dist_train's flags become the launch the user meant.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps_test.h"

static char *dir;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void setup(void)
{
	dir = rdps_test_tmpdir("dglke-cli");
	cr_assert(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(dglke_cli, .init = setup, .fini = teardown, .timeout = 240);

/* Runs argv; returns its exit status and output (malloc'd) in *out. */
static int run(char *const argv[], char **out)
{
	static int n;
	char name[32], *log;
	pid_t pid;
	int st;

	snprintf(name, sizeof(name), "run%d.log", n++);
	log = path(name);
	pid = rdps_test_spawn(argv, log);
	cr_assert_eq(rdps_test_wait(pid, 180000, &st), 0, "%s %s did not finish in 180 s", argv[0], argv[1]);
	*out = rdps_test_slurp(log);
	free(log);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(dglke_cli, builtin_names_say_what_to_do_and_the_advice_works)
{
	char *ws = path("my_task"), *text, pj[512];
	char *fb[] = { RDPS_BIN, "partition", "--dataset", "FB15k", "-k", "2", "--data_path", ws, NULL };
	char *fb237[] = { RDPS_BIN, "train", "--dataset", "FB15k-237", "--data_path", ws, "--check-only", NULL };
	char *rr[] = { RDPS_BIN, "partition", "--dataset", "wn18rr", "-k", "2", "--data_path", ws, NULL };
	char *make[] = { RDPS_BIN, "dataset", "wordnet", "--cut", "wn18rr", NULL, NULL };
	int rc;

	cr_assert_eq(mkdir(ws, 0755), 0);
	rc = run(fb, &text);
	cr_expect_eq(rc, 1, "%s", text);
	cr_expect(strstr(text, "https://data.dgl.ai/dataset/FB15k.zip") && strstr(text, "/my_task/FB15k (entities.dict"),
		  "%s", text);
	cr_expect(strstr(text, "'rdps dataset wordnet ") && strstr(text, "/my_task/wn18', then --dataset wn18"),
		  "%s", text);
	free(text);
	rc = run(fb237, &text);
	cr_expect_eq(rc, 2, "%s", text);
	cr_expect(strstr(text, "FB15k-237.zip") && strstr(text, "'rdps dataset wordnet --cut wn18rr "), "%s", text);
	free(text);
	rc = run(rr, &text);
	cr_expect_eq(rc, 1, "%s", text);
	cr_expect(strstr(text, "'rdps dataset wordnet --cut wn18rr ") && strstr(text, "/my_task/wn18rr'"), "%s", text);
	free(text);
	/* The advice, followed: then DGL-KE's partition line works. */
	make[5] = path("my_task/wn18rr");
	rc = run(make, &text);
	cr_assert_eq(rc, 0, "%s", text);
	cr_expect(strstr(text, "11 relations") && strstr(text, "valid 3034, test 3134"), "%s", text);
	free(text);
	rc = run(rr, &text);
	cr_assert_eq(rc, 0, "%s", text);
	cr_expect(strstr(text, "/my_task/wn18rr/partition-k2 k=2") &&
		  strstr(text, "rdps dist_train --data_path") && strstr(text, "--dataset wn18rr finds it"),
		  "%s", text);
	free(text);
	snprintf(pj, sizeof(pj), "%s/wn18rr/partition-k2/partition.json", ws);
	cr_expect_eq(access(pj, R_OK), 0);
	/* DGL-KE's partition step overwrites its output: so does this one. */
	rc = run(rr, &text);
	cr_expect_eq(rc, 0, "%s", text);
	cr_expect(strstr(text, "replacing the partition in"), "%s", text);
	free(text);
	free(make[5]);
	free(ws);
}

Test(dglke_cli, a_udd_format_partitions_as_rdps_train_reads_it)
{
	char *kg = path("kg"), *part = path("kg/partition-k2"), *ipc, *text, ipc_text[64];
	char *argv[] = { RDPS_BIN, "partition", "--format", "raw_udd_hrt", "--data_files", "train.txt",
			 "valid.txt", "test.txt", "--num-parts", "2", "--data_path", kg, NULL };
	int rc;

	/* Triples of names in train/valid/test.txt: a raw_udd_hrt input. */
	rdps_test_synth_kg(kg, 1000, 8, 6000, 3, NULL, 0);
	rc = run(argv, &text);
	cr_assert_eq(rc, 0, "%s", text);
	cr_expect(strstr(text, "/kg/partition-k2 k=2"), "%s", text);
	free(text);
	snprintf(ipc_text, sizeof(ipc_text), "127.0.0.1 %d 1\n127.0.0.2 %d 1\n", 30050, 30050);
	ipc = rdps_test_write(dir, "ip_config.txt", ipc_text);
	{
		char *check[] = { RDPS_BIN, "train", "--check-only", "--format", "raw_udd_hrt",
				  "--data_files", "train.txt", "valid.txt", "test.txt", "--data_path", kg,
				  "--partition", part, "--ip_config", ipc, "--num_trainers", "2", "--rank", "1",
				  NULL };

		rc = run(check, &text);
		cr_expect_eq(rc, 0, "rdps train does not accept the partition of the same files:\n%s", text);
		free(text);
	}
	free(ipc);
	free(kg);
	free(part);
}

Test(dglke_cli, dist_train_flags_become_the_launch)
{
	char *ws = path("ws"), *ipc, *text, want[600];
	char *argv[] = { RDPS_BIN, "dist_train", "--path", ws, "--ip_config", NULL, "--num_client_proc", "3",
			 "--model", "DistMult", "--dataset", "wn18", "--data_path", ws, "--hidden_dim", "8",
			 "-adv", "--test", "--dry_run", NULL };
	int rc;

	cr_assert_eq(mkdir(ws, 0755), 0);
	ipc = rdps_test_write(ws, "ip_config.txt", "127.0.0.1 30050 1\n127.0.0.2 30050 1\n127.0.0.3 30050 1\n");
	argv[5] = ipc;
	rc = run(argv, &text);
	cr_assert_eq(rc, 0, "%s", text);
	/* Every machine its launcher, in the workspace, with --model_name and
	 * the partition for the ip_config's 3 machines. */
	for (int m = 0; m < 3; m++) {
		snprintf(want, sizeof(want),
			 "machine %d (127.0.0.%d, this host): %s launch --ssh-remote --machine %d --workspace %s "
			 "--num_client_proc 3 --grace 10 -- --model_name DistMult --dataset wn18 --data_path %s "
			 "--hidden_dim 8 -adv --test --partition %s/wn18/partition-k3\n",
			 m, m + 1, RDPS_BIN, m, ws, ws, ws);
		cr_expect(strstr(text, want), "no\n%s\nin:\n%s", want, text);
	}
	cr_expect(strstr(text, "note: no partition") && strstr(text, "-k 3 --data_path"), "%s", text);
	free(text);
	free(ipc);
	free(ws);
}

/* What each machine of an ssh job runs reads the job from stdin: anything
 * else is refused, saying what it is, before anything starts. */
Test(dglke_cli, the_machine_side_refuses_what_is_not_its_control_stream)
{
	char *junk = rdps_test_write(dir, "junk", "hello\n"), *text, cmd[1024];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int rc;

	snprintf(cmd, sizeof(cmd), "exec %s launch --ssh-remote --machine 0 -- --data x < %s", RDPS_BIN, junk);
	rc = run(argv, &text);
	cr_expect_eq(rc, 2, "%s", text);
	cr_expect(strstr(text, "stdin does not start with 'rdps-launch-control 1"), "%s", text);
	free(text);
	snprintf(cmd, sizeof(cmd), "printf 'rdps-launch-control 1\\nsecret -\\nip_config 400\\n' | exec %s launch "
		 "--ssh-remote --machine 0 -- --data x", RDPS_BIN);
	rc = run(argv, &text);
	cr_expect_eq(rc, 2, "%s", text);
	cr_expect(strstr(text, "stdin ended before the control message did"), "%s", text);
	free(text);
	snprintf(cmd, sizeof(cmd), "exec %s launch --ssh-remote -- --data x < /dev/null", RDPS_BIN);
	rc = run(argv, &text);
	cr_expect_eq(rc, 2, "%s", text);
	cr_expect(strstr(text, "--machine M is required"), "%s", text);
	free(text);
	free(junk);
}
