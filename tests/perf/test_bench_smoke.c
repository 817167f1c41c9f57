// SPDX-License-Identifier: MIT
// needs-rdps-tool
// ctest-timeout: 300
/*
 * Smoke run of every `rdps bench` kind with tiny sizes: each exits 0 and
 * prints well-formed JSON lines with the keys perf/run.sh and the report
 * read. No timing assertions (issue 6: goals are reported, never asserted).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps_test.h"

static char *dir;

static void setup(void)
{
	dir = rdps_test_tmpdir("bench-smoke");
	cr_assert(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

/* Runs `rdps bench ARGS` (a shell word list), stdout to dir/out.jsonl and
 * stderr to dir/err.txt; returns the exit status. */
static int run_bench(const char *args)
{
	char cmd[2048], log[1024];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int status = 0;
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "exec '%s' bench %s >'%s/out.jsonl'", RDPS_BIN, args, dir);
	snprintf(log, sizeof(log), "%s/err.txt", dir);
	pid = rdps_test_spawn(argv, log);
	cr_assert(pid > 0);
	cr_assert_eq(rdps_test_wait(pid, 240000, &status), 0, "rdps bench %s timed out", args);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Every stdout line is a JSON object with "bench"; objects of kind `kind`
 * (and, if mode is set, whose "mode" is mode) carry every key of keys
 * (NULL-terminated; a key written "+name" must be a number > 0: a figure the
 * benchmark failed to measure or parse shows up as 0 or null, which no
 * timing-free smoke run should let through). Returns how many such objects
 * were seen. */
static int check_mode_lines(const char *kind, const char *mode, const char *const *keys)
{
	char path[1024], line[8192];
	int seen = 0, lineno = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/out.jsonl", dir);
	f = fopen(path, "r");
	cr_assert(f, "no output file");
	while (fgets(line, sizeof(line), f)) {
		json_error_t e;
		json_t *o = json_loads(line, 0, &e);
		const char *b, *m;

		lineno++;
		cr_assert(o && json_is_object(o), "line %d is not a JSON object: %s (%s)", lineno,
			  line, e.text);
		b = json_string_value(json_object_get(o, "bench"));
		cr_assert(b, "line %d has no \"bench\": %s", lineno, line);
		m = json_string_value(json_object_get(o, "mode"));
		if (!strcmp(b, kind) && (!mode || (m && !strcmp(m, mode)))) {
			for (const char *const *k = keys; *k; k++) {
				bool positive = **k == '+';
				const char *key = *k + positive;
				json_t *v = json_object_get(o, key);

				cr_assert(v, "%s line %d lacks \"%s\": %s", kind, lineno, key, line);
				if (positive)
					cr_assert(json_is_number(v) && json_number_value(v) > 0,
						  "%s line %d: \"%s\" is not a positive number: %s",
						  kind, lineno, key, line);
			}
			seen++;
		}
		json_decref(o);
	}
	fclose(f);
	return seen;
}

static int check_lines(const char *kind, const char *const *keys)
{
	return check_mode_lines(kind, NULL, keys);
}

static void show_err(void)
{
	char path[1024];
	char *text;

	snprintf(path, sizeof(path), "%s/err.txt", dir);
	text = rdps_test_slurp(path);
	if (text)
		cr_log_info("stderr:\n%s", text);
	free(text);
}

TestSuite(bench, .init = setup, .fini = teardown);

Test(bench, pull_tcp)
{
	static const char *const lat[] = { "transport", "rows", "dim", "ids", "+p50_us", "+p99_us",
					   "+p999_us", "+limit_p50_us", "+ratio", NULL };
	static const char *const tput[] = { "transport", "rows", "dim", "+clients", "+server_threads",
					    "+rows_per_s", "+gb_per_s", "+limit_connections",
					    "+limit_rows_per_s", "+ratio", NULL };
	char args[512];
	int rc;

	snprintf(args, sizeof(args),
		 "pull --port %d --table-rows 500 --dims 8 --batches 1,16 --seconds 0.05 "
		 "--tput-seconds 0.05 --iters 200 --clients 2,3 --num_server_threads 2 "
		 "--cdf '%s/cdf.txt'",
		 rdps_test_free_ports(2), dir);
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("pull", lat), 4);    /* 2 batches x random/clustered */
	cr_expect_eq(check_lines("pull_tput", tput), 6); /* 2 batches x 1, 2, 3 clients */
}

Test(bench, pull_verbs_without_device_is_a_clear_error)
{
	char path[1024], args[256];
	char *text;
	int rc;

	snprintf(args, sizeof(args), "pull --transport verbs --port %d --table-rows 100 --dims 8 "
		 "--batches 1", rdps_test_free_ports(2));
	rc = run_bench(args);
	snprintf(path, sizeof(path), "%s/err.txt", dir);
	text = rdps_test_slurp(path);
	cr_assert(text);
	if (rc == 0) {
		/* This host has an RDMA device after all: then it must have measured. */
		cr_expect_gt(check_lines("pull", (const char *const[]){ "p50_us", NULL }), 0);
	} else {
		cr_expect_eq(rc, 1);
		cr_expect(strstr(text, "RDMA device"), "unclear error: %s", text);
	}
	free(text);
}

Test(bench, push)
{
	static const char *const keys[] = { "optimizer", "rows", "dim", "+server_threads",
					    "+server_threads_seen", "+pushes_per_s", "+gb_per_s",
					    "+server_rows_applied", "+apply_rows_per_core_s",
					    "+server_ns_per_row", "limit", "+limit_pushes_per_s",
					    "+ratio", NULL };
	char args[256];
	int rc;

	snprintf(args, sizeof(args), "push --port %d --table-rows 500 --dim 8 --batches 16 "
		 "--seconds 0.05 --clients 2 --num_server_threads 1,2", rdps_test_free_ports(2));
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	/* (sgd, adagrad_row, adagrad) x 1 and 2 server threads */
	cr_expect_eq(check_lines("push", keys), 6);
}

/* The ofi transport over libfabric's tcp;ofi_rxm on loopback (any host has
 * it), each figure beside fi_pingpong (libfabric-bin) on the same provider. */
Test(bench, pull_push_ofi)
{
	static const char *const lat[] = { "transport", "provider", "rows", "dim", "ids", "+p50_us",
					   "+mean_us", "limit", "limit_stat", "+limit_p50_us",
					   "+limit_req_bytes", "+limit_reply_bytes", "+ratio",
					   "+ratio_p50", NULL };
	static const char *const tput[] = { "transport", "provider", "rows", "+clients",
					    "+rows_per_s", "limit", "+limit_rows_per_s", "+ratio", NULL };
	static const char *const push[] = { "transport", "provider", "optimizer", "+pushes_per_s",
					    "+server_rows_applied", "limit",
					    "+limit_fi_pingpong_bytes", "+limit_pushes_per_s", "+ratio",
					    NULL };
	static const char *const fipp[] = { "provider", "for", "+bytes", "+iters", "+oneway_us",
					    "+rtt_us", "+gb_per_s", NULL };
	char args[512];
	int rc;

	if (access("/usr/bin/fi_pingpong", X_OK))
		cr_skip_test("libfabric-bin is not installed (/usr/bin/fi_pingpong)");
	snprintf(args, sizeof(args),
		 "pull --transport ofi --ofi-provider 'tcp;ofi_rxm' --port %d --table-rows 500 "
		 "--dims 8 --batches 1,16 --ids random --seconds 0.05 --tput-seconds 0.05 "
		 "--iters 200 --clients 1 --limit-rounds 1 --limit-iters 20",
		 rdps_test_free_ports(2));
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("pull", lat), 2);      /* 2 batches, random ids */
	cr_expect_eq(check_lines("pull_tput", tput), 2); /* 2 batches x 1 client */
	cr_expect_gt(check_lines("fi_pingpong", fipp), 0);
	snprintf(args, sizeof(args),
		 "push --transport ofi --ofi-provider 'tcp;ofi_rxm' --port %d --table-rows 500 "
		 "--dim 8 --batches 16 --optimizers sgd --seconds 0.05 --limit-iters 20",
		 rdps_test_free_ports(2));
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("push", push), 1);
	cr_expect_eq(check_lines("fi_pingpong", fipp), 1);
}

Test(bench, zmq)
{
	static const char *const lat[] = { "rows", "dim", "+zmq_p50_us", "+rdps_p50_us", "+ratio", NULL };
	static const char *const tput[] = { "rows", "dim", "clients", "+zmq_rows_per_s",
					    "+rdps_rows_per_s", "+ratio", NULL };
	char args[256];
	int rc, port = rdps_test_free_ports(60);

	snprintf(args, sizeof(args), "zmq --port %d --table-rows 500 --dims 8 --batches 1,16 "
		 "--seconds 0.05 --tput-seconds 0.05 --iters 200 --clients 2", port);
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("zmq", lat), 2);
	cr_expect_eq(check_lines("zmq_tput", tput), 4);
}

Test(bench, load)
{
	static const char *const part[] = { "+seconds", "+peak_rss_mib", "+csr_mib", "+peak_over_csr",
					    NULL };
	static const char *const load[] = { "method", "cache", "+bytes", "+gb_per_s",
					    "+limit_gb_per_s", "+ratio", NULL };
	char args[512];
	int rc;

	snprintf(args, sizeof(args), "load --workdir '%s/load' --entities 500 --triples 1500 "
		 "--relations 4 --communities 4 --reps 1", dir);
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("partition", part), 1);
	cr_expect_eq(check_lines("load", load), 9); /* 4 methods x cold/warm + memcpy */
}

Test(bench, train)
{
	static const char *const fma[] = { "isa", "+bits", "+chains", "+gflop_per_s", NULL };
	static const char *const kernel[] = { "model", "hidden_dim", "+pos_per_s", "+ratio",
					      "+flops_per_pos", "+gflop_per_s",
					      "+fma_peak_gflop_per_s", "+vs_fma_peak", NULL };
	static const char *const standalone[] = { "+threads", "+pos_per_s", "+pos_per_s_per_thread",
						  "pull_share", "+compute_share", "push_share",
						  "+step_kernel_ms", "+kernel_pos_per_s", "+vs_kernel",
						  NULL };
	static const char *const distributed[] = { "+threads", "+pos_per_s", "+pos_per_s_per_thread",
						   "+compute_share", "+step_kernel_ms",
						   "+step_network_ms", "+step_net_ms",
						   "+standalone_pos_per_s", "+vs_standalone", NULL };
	static const char *const split[] = { "trainer", "+kernel_ms", "+step_ms", "+kernel_pos_per_s",
					     "hidden_ms", NULL };
	static const char *const net[] = { "+network_ms", "+net_ms", NULL };
	static const char *const eval[] = { "steps", "train_s", "+pos_per_s", "+mrr", "hits10", NULL };
	static const char *const log[] = { "run", "+t_s", "+step", "+loss", NULL };
	char args[1024];
	int rc;

	/* Standalone runs 2 threads (the 2 distributed trainers' total) at the
	 * kernel's dim, neg and batch, big enough that every part of a step
	 * lasts a printed microsecond. */
	snprintf(args, sizeof(args),
		 "train --workdir '%s/train' --synth-entities 300 --synth-triples 3000 "
		 "--phases kernel,standalone,distributed,curve --hidden_dim 32 --batch_size 64 "
		 "--neg_sample_size 16 --max_step 20 --log_interval 10 "
		 "--curve-steps 10,20 --kernel-dim 32 --kernel-neg 16 --kernel-batch 64 "
		 "--kernel-seconds 0.02 --kernel-models TransE_l2,DistMult --port %d",
		 dir, rdps_test_free_ports(2));
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("fma", fma), 1);
	cr_expect_eq(check_lines("kernel", kernel), 2);
	cr_expect_eq(check_mode_lines("train", "standalone", standalone), 1);
	cr_expect_eq(check_mode_lines("train", "distributed", distributed), 1);
	cr_expect_eq(check_lines("train_split", split), 3); /* standalone, 2 trainers */
	cr_expect_eq(check_mode_lines("train_split", "distributed", net), 2);
	cr_expect_eq(check_lines("train_eval", eval), 2);
	cr_expect_gt(check_lines("train_log", log), 0);
}

Test(bench, fma)
{
	static const char *const keys[] = { "isa", "+bits", "+chains", "+threads", "+gflop_per_s",
					    "+median_gflop_per_s", "kernel_isa", NULL };
	int rc = run_bench("fma --isa kernel --seconds 0.005 --rounds 2");

	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("fma", keys), 1);
	rc = run_bench("fma --seconds 0.005 --rounds 2");
	cr_assert_eq(rc, 0);
	cr_expect_gt(check_lines("fma", keys), 0); /* every unit this CPU has */
}

Test(bench, rowcheck)
{
	static const char *const keys[] = { "side", "scheme", "dim", "rows", "+stride", "+ns_per_row",
					    "+vs_relaxed", "+vs_seqlock", NULL };
	int rc = run_bench("rowcheck --dims 8,100 --rows 4 --rounds 2 --slice-us 50");

	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	/* 2 dims x (read, write sgd, write adagrad_row) x 4 schemes */
	cr_expect_eq(check_lines("rowcheck", keys), 24);
}

Test(bench, sample)
{
	static const char *const keys[] = { "transport", "way", "+fanout", "+servers", "+seeds",
					    "+edges_per_batch", "+edges_per_s", "+seeds_per_s",
					    "+batch_us", "limit", "+limit_edges_per_s",
					    "+limit_seeds_per_s", "+limit_batch_us", "+ratio", NULL };
	char args[512];
	int rc;

	if (access("/usr/share/wordnet/data.noun", R_OK))
		cr_skip_test("wordnet-base is not installed (/usr/share/wordnet/data.noun)");
	/* WordNet's node graph built in the workdir (a few seconds), 2 parts. */
	snprintf(args, sizeof(args), "sample --port %d --workdir '%s/sample' --fanouts 2,5 "
		 "--batch 100 --round-batches 3 --rounds 2 --warmup 1", rdps_test_free_ports(2), dir);
	rc = run_bench(args);
	if (rc)
		show_err();
	cr_assert_eq(rc, 0);
	cr_expect_eq(check_lines("sample", keys), 4); /* rpc, read x 2 fanouts */
}

Test(bench, help_of_every_kind)
{
	static const char *const kinds[] = { "pull", "push", "train", "load", "zmq", "rowcheck",
					     "fma", "sample" };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char args[64];

		snprintf(args, sizeof(args), "%s --help", kinds[i]);
		cr_expect_eq(run_bench(args), 0, "rdps bench %s --help", kinds[i]);
	}
}
