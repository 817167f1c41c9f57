// SPDX-License-Identifier: MIT
/* rdps partition: split a dataset into k parts (METIS or random). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "rdps/common.h"
#include "rdps/partition.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdps partition --data DIR -k K --out PDIR [--method metis|random]\n"
		"                      [--coarsen auto|on|off] [--seed S] [--force]\n"
		"       rdps partition --data GRAPHDIR -k K --out PDIR [--balance_train]\n"
		"                      [--balance_edges] [--method metis|random] [--seed S] [--force]\n"
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
		"A graph dataset (GRAPHDIR has graph.json: rdps dataset wordnet-nodes, or\n"
		"wordnet-hetero's typed layout of node and edge types) is partitioned for\n"
		"DistGraph instead: METIS balanced on nodes (of each type) and, with\n"
		"--balance_edges, on in-edges and, with --balance_train, on training nodes\n"
		"(each a constraint, as DGL's flags); each part holds its nodes' in-edges,\n"
		"out-edge lists and data, and partition.json the XXH3 of every file\n"
		"(rdps/graph.h). For a DGL graph in Python: rdps.distributed.partition_graph.\n"
		"\n"
		"Prints the local-triple fraction (triples whose head and tail share a part),\n"
		"the edge cut, the part sizes, the time and the peak memory.\n");
}

static int partition_graph(const struct rdps_partition_opts *po, bool balance_train,
			   bool balance_edges)
{
	struct rdps_graph_partition_opts o = {
		.data_dir = po->data_dir, .out_dir = po->out_dir, .k = po->k, .method = po->method,
		.balance_train = balance_train, .balance_edges = balance_edges, .seed = po->seed,
		.force = po->force,
	};
	struct rdps_graph_partition_result r;
	char err[512] = "";
	int ret = rdps_graph_partition_build(&o, &r, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "rdps partition: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	printf("graph partition: %s k=%u method=%s seed=%llu%s%s\n", o.out_dir, o.k,
	       rdps_partition_method_name(o.method), (unsigned long long)o.seed,
	       balance_edges ? " balance_edges" : "", balance_train ? " balance_train" : "");
	printf("local-edge fraction: %.4f (%llu of %llu edges have their source in their "
	       "destination's part)\n", r.local_edge_fraction, (unsigned long long)r.local_edges,
	       (unsigned long long)r.num_edges);
	printf("largest part: %llu nodes (%.3f of mean), %llu in-edges (%.3f), %llu training "
	       "nodes (%.3f)\n", (unsigned long long)r.max_part_nodes,
	       (double)r.max_part_nodes * o.k / (double)r.num_nodes,
	       (unsigned long long)r.max_part_edges,
	       r.num_edges ? (double)r.max_part_edges * o.k / (double)r.num_edges : 0.0,
	       (unsigned long long)r.max_part_train,
	       r.num_train ? (double)r.max_part_train * o.k / (double)r.num_train : 0.0);
	printf("time %.2f s, peak RSS %.1f MiB\n", r.seconds, r.peak_rss_kib / 1024.0);
	return 0;
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
		{ "balance_train", no_argument, NULL, 'T' },
		{ "balance_edges", no_argument, NULL, 'E' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdps_partition_opts o = { .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result res;
	bool balance_train = false, balance_edges = false;
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
		case 'T':
			balance_train = true;
			break;
		case 'E':
			balance_edges = true;
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
	{
		char gj[4096];
		struct stat st;

		snprintf(gj, sizeof(gj), "%s/graph.json", o.data_dir);
		if (!stat(gj, &st))
			return partition_graph(&o, balance_train, balance_edges);
		if (balance_train || balance_edges) {
			fprintf(stderr, "rdps partition: --balance_train and --balance_edges are for "
				"graph datasets (%s has no graph.json)\n", o.data_dir);
			return 2;
		}
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
