// SPDX-License-Identifier: MIT
/* rdps bench: the perf/ microbenchmarks, one subcommand per kind. Each
 * prints one JSON object per measurement on stdout and a human table on
 * stderr, every figure beside its limit measured in the same run. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "perf/bench.h"
#include "rdps/common.h"

static const struct rdps_command kinds[] = {
	{ "pull", rdps_bench_pull, "pull latency and throughput vs TCP ping-pong / ib_read_lat" },
	{ "push", rdps_bench_push, "pushes/s and gradient GB/s per optimizer, server apply rate" },
	{ "train", rdps_bench_train, "pos triples/s standalone and distributed, step shares, kernels" },
	{ "load", rdps_bench_load, "partition loading: io_uring loader vs pread vs memcpy" },
	{ "zmq", rdps_bench_zmq, "ZeroMQ REQ/REP baseline vs rdps TCP pulls" },
	{ "rowcheck", rdps_bench_rowcheck, "row validation cost: checksum vs seqlock vs FaRM vs none" },
	{ "fma", rdps_bench_fma, "peak FMA GFLOP/s of one thread: the model kernels' limit" },
	{ "sample", rdps_bench_sample, "neighbour sampling edges/s, by RPC and by reads, vs the same path" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rdps bench <kind> [options]   (rdps bench <kind> --help for details)\n\n"
		   "kinds:\n");
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(kinds); i++)
		fprintf(f, "  %-8s %s\n", kinds[i].name, kinds[i].summary);
	fprintf(f, "\nJSON lines go to stdout, the human table to stderr. perf/run.sh runs the\n"
		   "suite and writes perf/report.md.\n");
}

int rdps_cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(kinds); i++)
		if (!strcmp(argv[1], kinds[i].name))
			return kinds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "rdps bench: unknown kind '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
