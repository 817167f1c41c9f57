// SPDX-License-Identifier: MIT
/* rdps partition: split a dataset into k parts (METIS or random). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "partition/dglke.h"
#include "rdps/common.h"
#include "rdps/partition.h"

#define MAX_DATA_FILES 5

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdps partition --data DIR -k K --out PDIR [--method metis|random]\n"
		"                      [--coarsen auto|on|off] [--seed S] [--force]\n"
		"       rdps partition --dataset NAME -k K --data_path DIR [--format F\n"
		"                      --data_files F... --delimiter S] [options]   (dglke_partition)\n"
		"       rdps partition --data GRAPHDIR -k K --out PDIR [--balance_train]\n"
		"                      [--balance_edges] [--method metis|random] [--seed S] [--force]\n"
		"\n"
		"Partitions the entities of the dataset in DIR (DGL-KE raw layout) into K parts\n"
		"and writes PDIR (temporary dir + rename): partition.json, part-P.trp (train\n"
		"triples of part P, ids relabeled so each part is one contiguous range),\n"
		"valid.trp, test.trp, idmap.bin (new -> original id), and the dicts.\n"
		"\n"
		"  --data DIR        dataset directory\n"
		"  -k, --parts K     number of parts (1..entities; DGL-KE's --num-parts too)\n"
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
		"DGL-KE's dglke_partition line runs with the command name changed. Its\n"
		"partition goes to DIR/NAME/partition-kK (a udd format: DIR[/NAME]/partition-kK;\n"
		"--out overrides), where rdps dist_train looks for it with an ip_config of K\n"
		"machines; a partition rdps made there before is replaced, as dglke_partition\n"
		"overwrites its own.\n"
		"\n"
		"dglke_partition's options:\n"
		"  --data_path DIR   where the datasets are\n"
		"  --dataset NAME    the dataset DIR/NAME (default FB15k, as DGL-KE; DIR itself\n"
		"                    when it holds entities.dict and no NAME is given). rdps\n"
		"                    downloads nothing: a built-in name (FB15k, FB15k-237, wn18,\n"
		"                    wn18rr, Freebase, ...) without its files says which to put\n"
		"                    where, or which 'rdps dataset' command makes the nearest one\n"
		"  -k, --num-parts K the number of parts (= machines)\n"
		"  --format F        built_in (default), raw_udd_<order> (--data_files TRAIN\n"
		"                    [VALID TEST] of names) or udd_<order> (--data_files ENTITIES\n"
		"                    RELATIONS TRAIN [VALID TEST], ids), as rdps train reads them\n"
		"  --data_files F... the files in DIR (see --format)\n"
		"  --delimiter S     their field separator (default tab)\n"
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

/* The KG partition of o, and what it came to. */
static int partition_kg(const struct rdps_partition_opts *o, const struct rdps_dglke_data *dk)
{
	struct rdps_partition_result res;
	char err[512] = "";
	int ret = rdps_partition_build(o, &res, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "rdps partition: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	printf("partition: %s k=%u method=%s seed=%llu\n", o->out_dir, o->k,
	       rdps_partition_method_name(o->method), (unsigned long long)o->seed);
	if (res.clusters)
		printf("coarsened: METIS partitioned %u clusters of the %llu entities\n",
		       res.clusters, (unsigned long long)res.num_entities);
	printf("local-triple fraction: %.4f (%llu of %llu train triples), edge cut %llu\n",
	       res.local_triple_fraction, (unsigned long long)res.local_triples,
	       (unsigned long long)res.num_train, (unsigned long long)res.edge_cut);
	printf("largest part: %llu entities (%.3f of mean), %llu triples (%.3f of mean)\n",
	       (unsigned long long)res.max_part_entities,
	       (double)res.max_part_entities * o->k / (double)res.num_entities,
	       (unsigned long long)res.max_part_triples,
	       (double)res.max_part_triples * o->k / (double)res.num_train);
	printf("time %.2f s, peak RSS %.1f MiB\n", res.seconds, (double)res.peak_rss_kib / 1024.0);
	if (dk->data_path)
		printf("rdps dist_train --data_path %s%s%s finds it with an ip_config of %u machine(s) "
		       "(the same files at the same path on every machine)\n", dk->data_path,
		       dk->dataset ? " --dataset " : "", dk->dataset ? dk->dataset : "", o->k);
	return 0;
}

/* A partition rdps made there before (its partition.json): DGL-KE's
 * partition step overwrites its own output too. */
static bool replaceable(const char *pdir)
{
	char path[4400];
	struct stat st;

	snprintf(path, sizeof(path), "%s/partition.json", pdir);
	if (stat(path, &st))
		return false;
	fprintf(stderr, "rdps partition: replacing the partition in %s\n", pdir);
	return true;
}

/* DGL-KE's --data_files F... (nargs='+') out of argv into files; the rest
 * into args. 0, or 2 (said why). */
static int take_data_files(int argc, char **argv, char **args, int *nargs, const char **files)
{
	*nargs = 0;
	for (int i = 0; i < argc; i++) {
		size_t nf = 0;

		if (strcmp(argv[i], "--data_files")) {
			args[(*nargs)++] = argv[i];
			continue;
		}
		while (i + 1 < argc && argv[i + 1][0] != '-') {
			if (nf == MAX_DATA_FILES) {
				fprintf(stderr, "rdps partition: --data_files takes at most %d files\n",
					MAX_DATA_FILES);
				return 2;
			}
			files[nf++] = argv[++i];
		}
		if (!nf) {
			fprintf(stderr, "rdps partition: --data_files needs file names\n");
			return 2;
		}
	}
	args[*nargs] = NULL;
	return 0;
}

static int parse_u64(const char *flag, const char *arg, unsigned long long lo,
		     unsigned long long hi, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(arg, &end, 10);
	if (errno || *end || arg[0] == '-' || *v < lo || *v > hi) {
		fprintf(stderr, "rdps partition: %s: bad value '%s'\n", flag, arg);
		return -1;
	}
	return 0;
}

int rdps_cmd_partition(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "parts", required_argument, NULL, 'k' },
		{ "num-parts", required_argument, NULL, 'k' },
		{ "num_parts", required_argument, NULL, 'k' },
		{ "data_path", required_argument, NULL, 'P' },
		{ "dataset", required_argument, NULL, 'N' },
		{ "format", required_argument, NULL, 'F' },
		{ "delimiter", required_argument, NULL, 'D' },
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
	struct rdps_dglke_data dk = { 0 };
	struct rdps_dglke_resolved dr = { 0 };
	const char *files[MAX_DATA_FILES + 1] = { NULL };
	bool balance_train = false, balance_edges = false;
	char err[512] = "", pdir[4300], **args;
	unsigned long long v;
	int opt, ret = 2, nargs;

	args = calloc((size_t)argc + 1, sizeof(*args));
	if (!args)
		return 1;
	if (take_data_files(argc, argv, args, &nargs, files))
		goto out;
	if (files[0])
		dk.data_files = files;
	optind = 1;
	while ((opt = getopt_long(nargs, args, "hk:", opts, NULL)) != -1) {
		switch (opt) {
		case 'd': o.data_dir = optarg; break;
		case 'o': o.out_dir = optarg; break;
		case 'P': dk.data_path = optarg; break;
		case 'N': dk.dataset = optarg; break;
		case 'F': dk.format = optarg; break;
		case 'D': dk.delimiter = optarg; break;
		case 'k':
			if (parse_u64("-k", optarg, 1, UINT32_MAX, &v))
				goto out;
			o.k = (uint32_t)v;
			break;
		case 'm':
			if (rdps_partition_method_parse(optarg, &o.method)) {
				fprintf(stderr, "rdps partition: --method: '%s' is not metis or random\n",
					optarg);
				goto out;
			}
			break;
		case 'T': balance_train = true; break;
		case 'E': balance_edges = true; break;
		case 'c':
			if (rdps_coarsen_parse(optarg, &o.coarsen)) {
				fprintf(stderr, "rdps partition: --coarsen: '%s' is not auto, on or off\n",
					optarg);
				goto out;
			}
			break;
		case 's':
			if (parse_u64("--seed", optarg, 0, INT64_MAX, &v))
				goto out;
			o.seed = v;
			break;
		case 'f': o.force = 1; break;
		case 'h': usage(stdout); ret = 0; goto out;
		default: usage(stderr); goto out;
		}
	}
	if (optind != nargs) {
		fprintf(stderr, "rdps partition: unexpected argument '%s'\n", args[optind]);
		goto out;
	}
	if ((dk.format || dk.data_files || dk.delimiter || dk.dataset) && !dk.data_path) {
		fprintf(stderr, "rdps partition: --dataset, --format, --data_files and --delimiter go "
			"with DGL-KE's --data_path DIR\n");
		goto out;
	}
	if (dk.data_path && o.data_dir) {
		fprintf(stderr, "rdps partition: give --data DIR or DGL-KE's --data_path DIR "
			"[--dataset NAME], not both\n");
		goto out;
	}
	if (!(o.data_dir || dk.data_path) || !o.k || (!o.out_dir && !dk.data_path)) {
		fprintf(stderr, "rdps partition: --data, -k and --out are required (or DGL-KE's "
			"--dataset NAME -k K --data_path DIR)\n\n");
		usage(stderr);
		goto out;
	}
	if (dk.data_path) {
		/* dglke_partition's line: the dataset of --data_path/--dataset,
		 * the partition where rdps dist_train looks for it. */
		ret = rdps_dglke_resolve(&dk, &dr, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps partition: %s\n", err);
			ret = ret == -ENOENT ? 1 : 2;
			goto out;
		}
		o.data_dir = dr.dir;
		if (!o.out_dir) {
			if (rdps_dglke_partition_dir(&dk, o.k, pdir, sizeof(pdir))) {
				fprintf(stderr, "rdps partition: the partition's path is too long\n");
				ret = 2;
				goto out;
			}
			o.out_dir = pdir;
			o.force |= replaceable(pdir);
		}
	}
	{
		char gj[4096];
		struct stat st;

		snprintf(gj, sizeof(gj), "%s/graph.json", o.data_dir);
		if (!stat(gj, &st)) {
			ret = partition_graph(&o, balance_train, balance_edges);
			goto out;
		}
		if (balance_train || balance_edges) {
			fprintf(stderr, "rdps partition: --balance_train and --balance_edges are for "
				"graph datasets (%s has no graph.json)\n", o.data_dir);
			ret = 2;
			goto out;
		}
	}
	ret = partition_kg(&o, &dk);
out:
	rdps_dglke_release(&dr);
	free(args);
	return ret;
}
