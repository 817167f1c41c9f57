// SPDX-License-Identifier: MIT
/* rdps partition: split a dataset into k parts (METIS or random). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rdps/common.h"
#include "rdps/partition.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdps partition --data DIR -k K --out PDIR [--method metis|random]\n"
		"                      [--coarsen auto|on|off] [--seed S] [--force]\n"
		"\n"
		"Partitions the entities of the dataset in DIR (DGL-KE raw layout) into K parts\n"
		"and writes PDIR (temporary dir + rename): partition.json, part-P.trp (train\n"
		"triples of part P, ids relabeled so each part is one contiguous range),\n"
		"valid.trp, test.trp, idmap.bin (new -> original id), and the dicts.\n"
		"\n"
		"  --data DIR        dataset directory\n"
		"  -k, --parts K     number of parts (1..entities)\n"
		"  --out PDIR        partition directory to create\n"
		"  --method M        metis (default; balances entities and triples, minimises\n"
		"                    cut triples) or random (seeded, equal entity counts)\n"
		"  --coarsen C       METIS on a coarsened graph: entities clustered by size-\n"
		"                    constrained label propagation, METIS on the graph of the\n"
		"                    clusters (a fraction of METIS's memory on big graphs;\n"
		"                    a cut about a point of local triples larger, refined on\n"
		"                    the whole graph). auto (default): when the graph has\n"
		"                    more than 2^22 adjacency entries (~2M distinct edges);\n"
		"                    on; off\n"
		"  --seed S          METIS / shuffle seed (default 0)\n"
		"  --force           replace an existing PDIR\n"
		"  -h, --help        this text\n"
		"\n"
		"Prints the local-triple fraction (triples whose head and tail share a part),\n"
		"the edge cut, the part sizes, the time and the peak memory.\n");
}

int rdps_cmd_partition(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "parts", required_argument, NULL, 'k' },
		{ "out", required_argument, NULL, 'o' },
		{ "method", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 's' },
		{ "coarsen", required_argument, NULL, 'c' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdps_partition_opts o = { .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result res;
	char err[512] = "", *end;
	unsigned long long v;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hk:", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			o.data_dir = optarg;
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'k':
			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || *end || optarg[0] == '-' || v == 0 || v > UINT32_MAX) {
				fprintf(stderr, "rdps partition: -k: bad value '%s' (want 1..entities)\n",
					optarg);
				return 2;
			}
			o.k = (uint32_t)v;
			break;
		case 'm':
			if (rdps_partition_method_parse(optarg, &o.method)) {
				fprintf(stderr, "rdps partition: --method: '%s' is not metis or random\n",
					optarg);
				return 2;
			}
			break;
		case 'c':
			if (rdps_coarsen_parse(optarg, &o.coarsen)) {
				fprintf(stderr, "rdps partition: --coarsen: '%s' is not auto, on or off\n",
					optarg);
				return 2;
			}
			break;
		case 's':
			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || *end || optarg[0] == '-' || v > INT64_MAX) {
				fprintf(stderr, "rdps partition: --seed: bad value '%s'\n", optarg);
				return 2;
			}
			o.seed = v;
			break;
		case 'f':
			o.force = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || !o.data_dir || !o.out_dir || !o.k) {
		fprintf(stderr, "rdps partition: --data, -k and --out are required\n\n");
		usage(stderr);
		return 2;
	}
	ret = rdps_partition_build(&o, &res, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps partition: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	printf("partition: %s k=%u method=%s seed=%llu\n", o.out_dir, o.k,
	       rdps_partition_method_name(o.method), (unsigned long long)o.seed);
	if (res.clusters)
		printf("coarsened: METIS partitioned %u clusters of the %llu entities\n",
		       res.clusters, (unsigned long long)res.num_entities);
	printf("local-triple fraction: %.4f (%llu of %llu train triples), edge cut %llu\n",
	       res.local_triple_fraction, (unsigned long long)res.local_triples,
	       (unsigned long long)res.num_train, (unsigned long long)res.edge_cut);
	printf("largest part: %llu entities (%.3f of mean), %llu triples (%.3f of mean)\n",
	       (unsigned long long)res.max_part_entities,
	       (double)res.max_part_entities * o.k / (double)res.num_entities,
	       (unsigned long long)res.max_part_triples,
	       (double)res.max_part_triples * o.k / (double)res.num_train);
	printf("time %.2f s, peak RSS %.1f MiB\n", res.seconds, (double)res.peak_rss_kib / 1024.0);
	return 0;
}
