// SPDX-License-Identifier: MIT
/* rdps: one command-line tool, one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "rdps/common.h"

static const struct rdps_command commands[] = {
	{ "server", rdps_cmd_server, "run one parameter server of a job" },
	{ "train", rdps_cmd_train, "train embeddings (standalone or with servers) and evaluate" },
	{ "eval", rdps_cmd_eval, "rank the test triples with saved embeddings (dglke_eval)" },
	{ "predict", rdps_cmd_predict, "top-K triples by score from saved embeddings (dglke_predict)" },
	{ "emb_sim", rdps_cmd_emb_sim, "top-K most similar entities or relations (dglke_emb_sim)" },
	{ "stats", rdps_cmd_stats, "print the request counters of running servers" },
	{ "shutdown", rdps_cmd_shutdown, "ask every server of an ip_config to exit" },
	{ "ckpt", rdps_cmd_ckpt, "ask every server to write a checkpoint now" },
	{ "dataset", rdps_cmd_dataset, "build, import or check a knowledge-graph dataset" },
	{ "partition", rdps_cmd_partition, "split a dataset into k parts (METIS or random)" },
	{ "launch", rdps_cmd_launch, "run a job's servers and trainers (local, ssh, mpi, slurm, k8s)" },
	{ "dist_train", rdps_cmd_dist_train, "DGL-KE's dglke_dist_train line: a job over ssh" },
	{ "doctor", rdps_cmd_doctor, "check this host for a job (RDMA, memlock, ports, peers)" },
	{ "bench", rdps_cmd_bench, "microbenchmarks, each figure beside its limit (perf/)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rdps <command> [options]   (rdps <command> --help for details)\n\n"
		   "commands:\n");
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nenvironment: RDPS_LOG_LEVEL=error|warn|info|debug\n");
}

int main(int argc, char **argv)
{
	rdps_log_init();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("rdps %s\n", RDPS_VERSION_STRING);
		return 0;
	}
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "rdps: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
