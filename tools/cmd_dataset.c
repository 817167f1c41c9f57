// SPDX-License-Identifier: MIT
/* rdps dataset: build, import and check knowledge-graph datasets. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

#define ERRLEN 512

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdps dataset wordnet OUT [--wordnet-dir DIR] [--cut wn18|core]\n"
		"                    [--entities N] [--valid N] [--test N] [--seed S] [--force]\n"
		"       rdps dataset synth OUT --entities N --relations R --triples T\n"
		"                    --communities C [--valid N] [--test N] [--noise P]\n"
		"                    [--seed S] [--force]\n"
		"       rdps dataset synth OUT --like freebase86m --scale F [--communities C]\n"
		"                    [--noise P] [--threads N] [--seed S] [--force]\n"
		"       rdps dataset import OUT --format raw|udd --input DIR [--order hrt|htr]\n"
		"                    [--train FILE] [--valid FILE] [--test FILE] [--force]\n"
		"       rdps dataset wordnet-nodes OUT [--wordnet-dir DIR] [--feat-dim N]\n"
		"                    [--seed S] [--force]\n"
		"       rdps dataset wordnet-hetero OUT [--wordnet-dir DIR] [--feat-dim N]\n"
		"                    [--seed S] [--force]\n"
		"       rdps dataset check DIR\n"
		"\n"
		"wordnet, synth and import write DGL-KE's raw layout into OUT: train.txt,\n"
		"valid.txt, test.txt (head<TAB>relation<TAB>tail names), entities.dict and\n"
		"relations.dict (id<TAB>name); wordnet-nodes writes a node-classification\n"
		"graph. OUT appears only when complete (temporary dir + rename).\n"
		"\n"
		"wordnet   WN18 from WordNet 3.0 (wordnet-base): synsets named OFFSET.POS\n"
		"          (e.g. 00001740.n), WN18's 18 relations, seeded split (5000/5000).\n"
		"          --cut wn18 (default): WN18's own 40,943 synsets (~151k triples);\n"
		"          --cut core: a dense core of --entities synsets (default 40943),\n"
		"          for WordNet editions other than 3.0.\n"
		"synth     community graph with learnable relation patterns, streamed\n"
		"          (10M entities / 100M triples fit in < 1 GiB). Numbers take k/M/G.\n"
		"          Defaults: valid/test 1000 each, noise 0.02.\n"
		"synth --like freebase86m --scale F\n"
		"          a graph shaped like DGL-KE's Freebase (86,054,151 entities,\n"
		"          14,824 relations, train 304,727,650, valid 16,929,318, test\n"
		"          16,929,308 triples) with each count times F, F in (0, 1] (at\n"
		"          least 0.0000338: one relation). Entity degrees follow a power\n"
		"          law (exponent 2.15; hubs spread over the ids), relation\n"
		"          frequencies a Zipf law (exponent 0.7). Entities are in\n"
		"          --communities C (default 32) that hold both ends of all but a\n"
		"          fraction --noise P (default 0.08) of the triples, whose second\n"
		"          end comes from the whole graph. Every entity and relation\n"
		"          occurs in train; no valid or test triple is a train triple.\n"
		"          Streamed in constant memory by --threads N (default: the\n"
		"          CPUs, at most 16); the same --seed gives the same bytes for\n"
		"          any N. Before writing it fails if OUT exists (without --force)\n"
		"          or its file system has less room than the estimate (about\n"
		"          10.4 GB at F = 1: 8.8 GB of triples, 1.6 GB of dicts). Progress\n"
		"          lines give the elapsed time and an ETA.\n"
		"import    raw: three files of names (dicts are built); udd: entities.dict,\n"
		"          relations.dict and three files of ids. Files default to\n"
		"          train.txt/valid.txt/test.txt (or .tsv); --order is the column order.\n"
		"wordnet-nodes\n"
		"          WordNet 3.0 (wordnet-base) as a node-classification task: the\n"
		"          117,659 synsets are the nodes (ids in file order: noun, verb, adj,\n"
		"          adv), every pointer between two synsets a typed edge src -> dst\n"
		"          (26 pointer symbols: @ hypernym, ~ hyponym, ! antonym, ...; lexical\n"
		"          pointers become edges of their synsets; self-loops and repeated\n"
		"          (src, dst, type) dropped; no reverse edges added: WordNet stores\n"
		"          most inverses itself), the lexicographer file (45 classes,\n"
		"          noun.animal, verb.motion, ...) the label, a hashed bag of words\n"
		"          of the gloss the features (--feat-dim N buckets, default 128:\n"
		"          lower-cased ASCII letter/digit tokens, XXH3 mod N, counts then\n"
		"          L2-normalised), a seeded 80/10/10 split of the nodes. Writes\n"
		"          graph.json (counts, edge types, classes, recipe, source),\n"
		"          edges.npy (int64 E x 2), etypes.npy (int64 E), features.npy\n"
		"          (float32 N x feat_dim), labels.npy (int64 N), train_mask.npy,\n"
		"          val_mask.npy, test_mask.npy (uint8 N), nodes.tsv, etypes.tsv;\n"
		"          the same --seed and --feat-dim give the same bytes.\n"
		"wordnet-hetero\n"
		"          WordNet 3.0 as a heterogeneous graph shaped like ogbn-mag: node\n"
		"          type synset (wordnet-nodes' nodes, features, labels and split,\n"
		"          node for node), featureless node type lemma (the synsets' words,\n"
		"          lower-cased), edge types in both directions: hypernym/hyponym,\n"
		"          holonym/meronym, domain/domain_member, related/rev_related,\n"
		"          antonym, derivation, similar (pointers grouped), lemma_of and\n"
		"          has_lemma. Writes the typed layout rdps partition reads:\n"
		"          graph.json, synset-*.npy, edges-TYPE.npy, synsets.tsv, lemmas.tsv.\n"
		"check     validate a dataset directory and print its counts.\n"
		"\n"
		"  --feat-dim N  wordnet-nodes: feature buckets, 1..65536 (default 128)\n"
		"  --seed S     split / generator seed (default 0)\n"
		"  --force      replace an existing OUT\n"
		"  -h, --help   this text\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned long long x;
	uint64_t mul = 1;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		goto bad;
	x = strtoull(s, &end, 10);
	if (errno)
		goto bad;
	if (*end && !end[1]) {
		switch (*end) {
		case 'k': case 'K': mul = 1000ull; break;
		case 'm': case 'M': mul = 1000000ull; break;
		case 'g': case 'G': mul = 1000000000ull; break;
		default: goto bad;
		}
	} else if (*end) {
		goto bad;
	}
	if (x > max / mul)
		goto bad;
	*v = x * mul;
	return 0;
bad:
	fprintf(stderr, "rdps dataset: %s: bad value '%s' (want an integer <= %llu)\n", opt, s,
		(unsigned long long)max);
	return -EINVAL;
}

static void print_stats(const char *out, const struct rdps_dataset_stats *st)
{
	printf("%s: %llu entities, %llu relations, train %llu, valid %llu, test %llu\n", out,
	       (unsigned long long)st->num_entities, (unsigned long long)st->num_relations,
	       (unsigned long long)st->num_triples[0], (unsigned long long)st->num_triples[1],
	       (unsigned long long)st->num_triples[2]);
}

enum {
	OPT_WORDNET_DIR = 256, OPT_ENTITIES, OPT_RELATIONS, OPT_TRIPLES, OPT_COMMUNITIES,
	OPT_VALID, OPT_TEST, OPT_TRAIN, OPT_NOISE, OPT_SEED, OPT_FORCE, OPT_FORMAT,
	OPT_INPUT, OPT_ORDER, OPT_CUT, OPT_LIKE, OPT_SCALE, OPT_THREADS, OPT_FEAT_DIM,
};

static const struct option long_opts[] = {
	{ "wordnet-dir", required_argument, NULL, OPT_WORDNET_DIR },
	{ "entities", required_argument, NULL, OPT_ENTITIES },
	{ "relations", required_argument, NULL, OPT_RELATIONS },
	{ "triples", required_argument, NULL, OPT_TRIPLES },
	{ "communities", required_argument, NULL, OPT_COMMUNITIES },
	{ "valid", required_argument, NULL, OPT_VALID },
	{ "test", required_argument, NULL, OPT_TEST },
	{ "train", required_argument, NULL, OPT_TRAIN },
	{ "noise", required_argument, NULL, OPT_NOISE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "input", required_argument, NULL, OPT_INPUT },
	{ "order", required_argument, NULL, OPT_ORDER },
	{ "cut", required_argument, NULL, OPT_CUT },
	{ "like", required_argument, NULL, OPT_LIKE },
	{ "scale", required_argument, NULL, OPT_SCALE },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "feat-dim", required_argument, NULL, OPT_FEAT_DIM },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Options of all three generators; each command rejects what it does not take. */
struct cli {
	const char *wordnet_dir, *format, *input, *order, *cut, *files[RDPS_SPLIT_COUNT];
	const char *like;         /* synth --like NAME */
	double scale;             /* synth --like: --scale F */
	int have_scale;
	uint64_t threads;         /* synth --like: --threads N */
	int have_threads;
	uint64_t feat_dim;        /* wordnet-nodes: --feat-dim N */
	int have_feat_dim;
	const char *valid_str, *test_str; /* import: file names; else counts */
	uint64_t entities, relations, triples, communities, valid, test, seed;
	int have_entities, have_relations, have_triples, have_communities;
	int have_valid, have_test;
	double noise;
	int have_noise, force;
};

static int check_cmd(const char *cmd, struct rdps_dataset_stats *st)
{
	char err[ERRLEN] = "";
	struct rdps_dataset *ds;
	int ret;

	(void)st;
	ret = rdps_dataset_open(cmd, &ds, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps dataset check: %s\n", err);
		return 1;
	}
	printf("%s: %u entities, %u relations", cmd, rdps_dataset_num_entities(ds),
	       rdps_dataset_num_relations(ds));
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		int64_t n = rdps_dataset_scan(ds, (enum rdps_split)s, NULL, NULL, err, sizeof(err));

		if (n < 0) {
			printf("\n");
			fprintf(stderr, "rdps dataset check: %s\n", err);
			rdps_dataset_close(ds);
			return 1;
		}
		printf(", %s %lld", rdps_dataset_split_name((enum rdps_split)s), (long long)n);
	}
	printf("\n");
	rdps_dataset_close(ds);
	return 0;
}

/* The graph datasets take --wordnet-dir, --feat-dim, --seed, --force only. */
static bool graph_opts_only(const char *cmd, const struct cli *c)
{
	if (c->have_entities || c->have_relations || c->have_triples || c->have_communities ||
	    c->have_noise || c->format || c->input || c->order || c->cut || c->files[0] ||
	    c->valid_str || c->test_str || c->like || c->have_scale || c->have_threads) {
		fprintf(stderr, "rdps dataset %s: only --wordnet-dir, --feat-dim, --seed, --force apply\n",
			cmd);
		return false;
	}
	return true;
}

static int wordnet_hetero_cmd(const char *out, const struct cli *c)
{
	struct rdps_wordnet_hetero_opts o;
	struct rdps_wordnet_hetero_stats hs;
	char err[ERRLEN] = "";
	int ret;

	if (!graph_opts_only("wordnet-hetero", c))
		return 2;
	rdps_dataset_wordnet_hetero_defaults(&o);
	if (c->wordnet_dir)
		o.wordnet_dir = c->wordnet_dir;
	if (c->have_feat_dim)
		o.feat_dim = (uint32_t)c->feat_dim;
	o.seed = c->seed;
	o.force = c->force;
	ret = rdps_dataset_wordnet_hetero(out, &o, &hs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps dataset wordnet-hetero: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	printf("%s: %llu synsets (%u classes, %u features; train %llu, val %llu, test %llu), %llu lemmas, %llu edges of %u types (%llu senses each way)\n",
	       out, (unsigned long long)hs.num_synsets, hs.num_classes, o.feat_dim,
	       (unsigned long long)hs.num_split[0], (unsigned long long)hs.num_split[1],
	       (unsigned long long)hs.num_split[2], (unsigned long long)hs.num_lemmas,
	       (unsigned long long)hs.num_edges, hs.num_etypes, (unsigned long long)hs.num_senses);
	return 0;
}

static int wordnet_nodes_cmd(const char *out, const struct cli *c)
{
	struct rdps_wordnet_nodes_opts o;
	struct rdps_graph_stats gs;
	char err[ERRLEN] = "";
	int ret;

	if (!graph_opts_only("wordnet-nodes", c))
		return 2;
	rdps_dataset_wordnet_nodes_defaults(&o);
	if (c->wordnet_dir)
		o.wordnet_dir = c->wordnet_dir;
	if (c->have_feat_dim)
		o.feat_dim = (uint32_t)c->feat_dim;
	o.seed = c->seed;
	o.force = c->force;
	ret = rdps_dataset_wordnet_nodes(out, &o, &gs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps dataset wordnet-nodes: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	printf("%s: %llu nodes, %llu edges of %u types, %u classes, %u features, train %llu, val %llu, test %llu\n",
	       out, (unsigned long long)gs.num_nodes, (unsigned long long)gs.num_edges,
	       gs.num_etypes, gs.num_classes, gs.feat_dim, (unsigned long long)gs.num_split[0],
	       (unsigned long long)gs.num_split[1], (unsigned long long)gs.num_split[2]);
	return 0;
}

int rdps_cmd_dataset(int argc, char **argv)
{
	struct rdps_dataset_stats st;
	struct cli c = { .noise = -1 };
	char err[ERRLEN] = "";
	const char *sub, *out;
	int opt, ret;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
		usage(stdout);
		return 0;
	}
	argc--;
	argv++;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		uint64_t *dst = NULL;
		int *have = NULL;

		switch (opt) {
		case 'h':
			usage(stdout);
			return 0;
		case OPT_WORDNET_DIR: c.wordnet_dir = optarg; break;
		case OPT_FORMAT: c.format = optarg; break;
		case OPT_INPUT: c.input = optarg; break;
		case OPT_ORDER: c.order = optarg; break;
		case OPT_CUT: c.cut = optarg; break;
		case OPT_LIKE: c.like = optarg; break;
		case OPT_THREADS:
			if (parse_u64("--threads", optarg, 64, &c.threads))
				return 2;
			c.have_threads = 1;
			break;
		case OPT_FEAT_DIM:
			if (parse_u64("--feat-dim", optarg, RDPS_WORDNET_NODES_MAX_FEAT_DIM,
				      &c.feat_dim))
				return 2;
			if (!c.feat_dim) {
				fprintf(stderr, "rdps dataset: --feat-dim: want 1..%u\n",
					RDPS_WORDNET_NODES_MAX_FEAT_DIM);
				return 2;
			}
			c.have_feat_dim = 1;
			break;
		case OPT_SCALE: {
			char *end;

			errno = 0;
			c.scale = strtod(optarg, &end);
			if (end == optarg || *end || errno) {
				fprintf(stderr, "rdps dataset: --scale: bad value '%s' (want a fraction in (0, 1])\n",
					optarg);
				return 2;
			}
			c.have_scale = 1;
			break;
		}
		case OPT_TRAIN: c.files[RDPS_SPLIT_TRAIN] = optarg; break;
		case OPT_FORCE: c.force = 1; break;
		case OPT_ENTITIES: dst = &c.entities; have = &c.have_entities; break;
		case OPT_RELATIONS: dst = &c.relations; have = &c.have_relations; break;
		case OPT_TRIPLES: dst = &c.triples; have = &c.have_triples; break;
		case OPT_COMMUNITIES: dst = &c.communities; have = &c.have_communities; break;
		case OPT_SEED:
			if (parse_u64("--seed", optarg, INT64_MAX, &c.seed))
				return 2;
			break;
		case OPT_VALID: c.valid_str = optarg; break;
		case OPT_TEST: c.test_str = optarg; break;
		case OPT_NOISE: {
			char *end;

			c.noise = strtod(optarg, &end);
			if (*end || !(c.noise >= 0 && c.noise <= 1)) {
				fprintf(stderr, "rdps dataset: --noise: want a probability 0..1\n");
				return 2;
			}
			c.have_noise = 1;
			break;
		}
		default:
			usage(stderr);
			return 2;
		}
		if (dst) {
			if (parse_u64(long_opts[opt - OPT_WORDNET_DIR].name, optarg, UINT32_MAX - 1, dst))
				return 2;
			*have = 1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "rdps dataset %s: expected one directory argument\n\n", sub);
		usage(stderr);
		return 2;
	}
	out = argv[optind];
	if (!strcmp(sub, "import")) {
		c.files[RDPS_SPLIT_VALID] = c.valid_str;
		c.files[RDPS_SPLIT_TEST] = c.test_str;
	} else {
		if (c.valid_str && parse_u64("--valid", c.valid_str, UINT32_MAX, &c.valid))
			return 2;
		if (c.test_str && parse_u64("--test", c.test_str, UINT32_MAX, &c.test))
			return 2;
		c.have_valid = !!c.valid_str;
		c.have_test = !!c.test_str;
	}

	if (!strcmp(sub, "check")) {
		return check_cmd(out, &st);
	} else if (!strcmp(sub, "wordnet-nodes")) {
		return wordnet_nodes_cmd(out, &c);
	} else if (!strcmp(sub, "wordnet-hetero")) {
		return wordnet_hetero_cmd(out, &c);
	} else if (!strcmp(sub, "wordnet")) {
		struct rdps_wordnet_opts o;

		if (c.have_relations || c.have_triples || c.have_communities || c.have_noise ||
		    c.format || c.input || c.order || c.files[0] || c.like || c.have_scale ||
		    c.have_threads || c.have_feat_dim) {
			fprintf(stderr, "rdps dataset wordnet: only --wordnet-dir, --cut, --entities, --valid, --test, --seed, --force apply\n");
			return 2;
		}
		rdps_dataset_wordnet_defaults(&o);
		if (c.wordnet_dir)
			o.wordnet_dir = c.wordnet_dir;
		if (c.cut && !strcmp(c.cut, "core")) {
			o.cut = RDPS_WORDNET_CUT_CORE;
		} else if (c.cut && strcmp(c.cut, "wn18")) {
			fprintf(stderr, "rdps dataset wordnet: --cut: '%s', want wn18 or core\n", c.cut);
			return 2;
		}
		if (c.have_entities && o.cut != RDPS_WORDNET_CUT_CORE) {
			fprintf(stderr, "rdps dataset wordnet: --entities sizes the dense core: add --cut core\n");
			return 2;
		}
		if (c.have_entities)
			o.target_entities = (uint32_t)c.entities;
		if (c.have_valid)
			o.num_valid = c.valid;
		if (c.have_test)
			o.num_test = c.test;
		o.seed = c.seed;
		o.force = c.force;
		ret = rdps_dataset_wordnet(out, &o, &st, err, sizeof(err));
	} else if (!strcmp(sub, "synth") && (c.like || c.have_scale)) {
		struct rdps_synth_like_opts o;

		if (c.wordnet_dir || c.cut || c.format || c.input || c.order || c.files[0] ||
		    c.have_feat_dim) {
			fprintf(stderr, "rdps dataset synth: --wordnet-dir/--feat-dim/--format/--input/--order/--train do not apply\n");
			return 2;
		}
		if (!c.like || !c.have_scale) {
			fprintf(stderr, "rdps dataset synth: --like and --scale go together (--like freebase86m --scale F)\n");
			return 2;
		}
		if (strcmp(c.like, "freebase86m")) {
			fprintf(stderr, "rdps dataset synth: --like: '%s', want freebase86m\n", c.like);
			return 2;
		}
		if (c.have_entities || c.have_relations || c.have_triples || c.have_valid || c.have_test) {
			fprintf(stderr, "rdps dataset synth: --like sets the counts (F x Freebase86m's): --entities, --relations, --triples, --valid and --test do not apply\n");
			return 2;
		}
		rdps_dataset_synth_like_defaults(&o);
		o.like = RDPS_SYNTH_FREEBASE86M;
		o.scale = c.scale;
		o.threads = (unsigned)c.threads;
		if (c.have_communities)
			o.communities = c.communities;
		if (c.have_noise)
			o.cross = c.noise;
		o.seed = c.seed;
		o.force = c.force;
		ret = rdps_dataset_synth_like(out, &o, &st, err, sizeof(err));
	} else if (!strcmp(sub, "synth")) {
		struct rdps_synth_opts o;

		if (c.have_threads) {
			fprintf(stderr, "rdps dataset synth: --threads goes with --like\n");
			return 2;
		}
		if (c.wordnet_dir || c.cut || c.format || c.input || c.order || c.files[0] ||
		    c.have_feat_dim) {
			fprintf(stderr, "rdps dataset synth: --wordnet-dir/--feat-dim/--format/--input/--order/--train do not apply\n");
			return 2;
		}
		if (!c.have_entities || !c.have_relations || !c.have_triples || !c.have_communities) {
			fprintf(stderr, "rdps dataset synth: --entities, --relations, --triples and --communities are required\n");
			return 2;
		}
		rdps_dataset_synth_defaults(&o);
		o.num_entities = c.entities;
		o.num_relations = (uint32_t)c.relations;
		o.num_triples = c.triples;
		o.num_communities = (uint32_t)c.communities;
		if (c.have_valid)
			o.num_valid = c.valid;
		if (c.have_test)
			o.num_test = c.test;
		if (c.have_noise)
			o.noise = c.noise;
		o.seed = c.seed;
		o.force = c.force;
		ret = rdps_dataset_synth(out, &o, &st, err, sizeof(err));
	} else if (!strcmp(sub, "import")) {
		struct rdps_import_opts o = { 0 };

		if (c.wordnet_dir || c.cut || c.have_entities || c.have_relations || c.have_triples ||
		    c.have_communities || c.have_noise || c.like || c.have_scale || c.have_threads ||
		    c.have_feat_dim) {
			fprintf(stderr, "rdps dataset import: only --format, --input, --order, --train, --valid, --test, --force apply\n");
			return 2;
		}
		if (!c.format || !c.input) {
			fprintf(stderr, "rdps dataset import: --format raw|udd and --input DIR are required\n");
			return 2;
		}
		if (!strcmp(c.format, "raw")) {
			o.format = RDPS_IMPORT_RAW;
		} else if (!strcmp(c.format, "udd")) {
			o.format = RDPS_IMPORT_UDD;
		} else {
			fprintf(stderr, "rdps dataset import: --format: '%s' is not raw or udd\n", c.format);
			return 2;
		}
		o.in_dir = c.input;
		o.order = c.order;
		memcpy(o.files, c.files, sizeof(o.files));
		o.force = c.force;
		ret = rdps_dataset_import(out, &o, &st, err, sizeof(err));
	} else {
		fprintf(stderr, "rdps dataset: unknown command '%s'\n\n", sub);
		usage(stderr);
		return 2;
	}
	if (ret) {
		fprintf(stderr, "rdps dataset %s: %s\n", sub, err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	print_stats(out, &st);
	return 0;
}
