// SPDX-License-Identifier: MIT
/* rdps train: DGL-KE's dglke_train / dglke_dist_train, same flag names. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rdps/auth.h"
#include "rdps/common.h"
#include "rdps/kvstore.h"
#include "rdps/train.h"
#include "rdps/transport.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps train --data DIR (--standalone | --ip_config FILE --partition PDIR) [options]\n"
"\n"
"Trains knowledge-graph embeddings. Standalone: one process, an in-process store.\n"
"Distributed: every trainer (--rank of --num_trainers) samples from its part of\n"
"the partition and pulls/pushes rows on the servers of --ip_config (start them\n"
"with rdps server --partition PDIR --model_name ... --hidden_dim ...).\n"
"Flags named as in DGL-KE mean what they mean there; single-dash forms work too.\n"
"Trainers of one job meet at a start barrier before training: each says what it waits\n"
"for, one whose data does not load tells the others, and all refuse (naming the option\n"
"and the trainers) unless every one has the same --model_name, --hidden_dim, --gamma,\n"
"-adv, -a, -rc, -rn, --batch_size, --neg_sample_size, --neg_chunk_size, --max_step,\n"
"--resume, --test, --valid, --eval_per_relation and data (the same partition).\n"
"\n"
"data and job:\n"
"  --data DIR                 dataset: train.txt valid.txt test.txt entities.dict relations.dict\n"
"  --partition PDIR           its partition (rdps partition); trainer r trains on part r %% k\n"
"  --standalone               no servers: an in-process store\n"
"  --ip_config FILE           servers of the job (DGL-KE format)\n"
"  --rank N                   this trainer (default 0)\n"
"  --num_trainers N           trainer processes in the job (default 1)\n"
"  --num_thread N             threads (clients) per trainer (default 1)\n"
"  --transport NAME           auto (default), tcp, verbs\n"
"  --read-consistency MODE    validated (default) or relaxed one-sided reads (verbs)\n"
"  --timeout SEC              bound on each wait: for a server to accept or answer\n"
"                             (default 60), and for the job's other trainers at the\n"
"                             start barrier (default 600); a trainer that waits longer\n"
"                             fails, naming the wait and the trainers it waited for.\n"
"                             Later barriers (after training, evaluation reduces) wait\n"
"                             for the longer of this and 600 s: trainers get there as\n"
"                             far apart as their work runs\n"
"  --keep_servers             do not shut the servers down at the end\n"
"  --reconnect SEC            wait this long for a lost server to come back (restarted\n"
"                             from its checkpoint) before failing (default 120; 0: fail)\n"
"  --secret-file PATH         the job's shared secret (default: $RDPS_SECRET)\n"
"model:\n"
"  --model_name NAME          %s (default TransE_l2)\n"
"  --hidden_dim N             embedding size (default 400)\n"
"  --gamma F                  margin (default 12.0)\n"
"  -adv, --neg_adversarial_sampling   self-adversarial negative weighting\n"
"  -a, --adversarial_temperature F    (default 1.0)\n"
"  -rc, --regularization_coef F       (default 2e-6)\n"
"  -rn, --regularization_norm F       (default 3)\n"
"training:\n"
"  --batch_size N             positives per step (default 1024)\n"
"  --neg_sample_size N        negatives per chunk (default 256)\n"
"  --neg_chunk_size N         positives sharing negatives (default neg_sample_size)\n"
"  --max_step N               steps of each thread (default 80000)\n"
"  --lr F                     learning rate of the standalone store (default 0.01;\n"
"                             distributed: the servers' --lr)\n"
"  --optimizer NAME           standalone store: adagrad_row (default), adagrad, sgd\n"
"  --log_interval N           steps between progress lines (default 1000)\n"
"  --seed N                   sampling and initialisation seed (default 0)\n"
"  --sync                     flush every push before the next pull (deterministic)\n"
"  --checkpoint-dir DIR       record each thread's step and sampler state there every\n"
"                             log_interval steps (the tables are the servers' to\n"
"                             checkpoint: rdps server --checkpoint-dir)\n"
"  --resume                   continue from the steps recorded in --checkpoint-dir\n"
"evaluation and output:\n"
"  --test                     filtered MRR, MR, Hits@1/3/10 on test.txt\n"
"  --valid                    the same on valid.txt\n"
"  --eval_per_relation        with --test/--valid, also a table after those lines: per\n"
"                             relation, its triples, MRR, MR, HITS@1/3/10, tail-side\n"
"                             and head-side MRR (every trainer of the job needs it)\n"
"  --save_path DIR            write <dataset>_<model>_entity.npy, ..._relation.npy\n"
"                             (rows in entities.dict/relations.dict order), the dicts\n"
"                             and config.json\n"
"  -h, --help                 this text\n",
		rdps_model_names());
}

static int num(const char *flag, const char *arg, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(arg, &end);
	if (errno || *end || end == arg || *out < lo || *out > hi) {
		fprintf(stderr, "rdps train: %s '%s' is not a number in [%g, %g]\n", flag, arg, lo, hi);
		return -1;
	}
	return 0;
}

/* The per-relation table of one split (mode "Test" or "Valid", rel its
 * sums): relations with triples in that split, by id. MRR etc. over both
 * sides as the overall lines; "triples" counts the split's triples (one
 * tail query each). */
static void print_relations(FILE *f, const char *mode, const char *split,
			    const struct rdps_train_relation_sums *rel,
			    const struct rdps_train_result *res)
{
	int width = (int)strlen("relation");
	uint32_t shown = 0;

	for (uint32_t r = 0; r < res->num_relations; r++) {
		int len = (int)strlen(res->relation_names[r]);

		if (!rel[r].tail.count && !rel[r].head.count)
			continue;
		shown++;
		if (len > width)
			width = len < 40 ? len : 40; /* longer names push their line only */
	}
	fprintf(f, "%s per relation: %u of %u relations have %s triples\n", mode, shown,
		res->num_relations, split);
	fprintf(f, "%6s  %-*s %8s %8s %9s %7s %7s %8s %9s %9s\n", "id", width, "relation", "triples",
		"MRR", "MR", "HITS@1", "HITS@3", "HITS@10", "tail MRR", "head MRR");
	for (uint32_t r = 0; r < res->num_relations; r++) {
		struct rdps_eval_sums both = rel[r].tail;
		struct rdps_eval_metrics m, mt, mh;

		if (!rel[r].tail.count && !rel[r].head.count)
			continue;
		rdps_eval_sums_add(&both, &rel[r].head);
		rdps_eval_metrics_from_sums(&both, &m);
		rdps_eval_metrics_from_sums(&rel[r].tail, &mt);
		rdps_eval_metrics_from_sums(&rel[r].head, &mh);
		fprintf(f, "%6u  %-*s %8llu %8.4f %9.2f %7.4f %7.4f %8.4f %9.4f %9.4f\n", r, width,
			res->relation_names[r],
			(unsigned long long)(rel[r].tail.count ? rel[r].tail.count
							       : rel[r].head.count),
			m.mrr, m.mr, m.hits1, m.hits3, m.hits10, mt.mrr, mh.mrr);
	}
}

int rdps_cmd_train(int argc, char **argv)
{
	enum { O_DATA = 256, O_PART, O_STANDALONE, O_IPC, O_RANK, O_NTRAIN, O_NTHREAD, O_TRANSPORT,
	       O_CONS, O_TIMEOUT, O_KEEP, O_MODEL, O_DIM, O_GAMMA, O_ADV, O_ADVT, O_RC, O_RN,
	       O_BATCH, O_NEG, O_CHUNK, O_STEPS, O_LR, O_OPT, O_LOGI, O_SEED, O_SYNC, O_TEST,
	       O_VALID, O_PERREL, O_SAVE, O_SECRET, O_RECONNECT, O_CKDIR, O_RESUME, O_HELP };
	static const struct option opts[] = {
		{ "data", required_argument, NULL, O_DATA },
		{ "data_path", required_argument, NULL, O_DATA },
		{ "partition", required_argument, NULL, O_PART },
		{ "standalone", no_argument, NULL, O_STANDALONE },
		{ "ip_config", required_argument, NULL, O_IPC },
		{ "rank", required_argument, NULL, O_RANK },
		{ "num_trainers", required_argument, NULL, O_NTRAIN },
		{ "num_thread", required_argument, NULL, O_NTHREAD },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "read-consistency", required_argument, NULL, O_CONS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "keep_servers", no_argument, NULL, O_KEEP },
		{ "model_name", required_argument, NULL, O_MODEL },
		{ "hidden_dim", required_argument, NULL, O_DIM },
		{ "gamma", required_argument, NULL, O_GAMMA },
		{ "adv", no_argument, NULL, O_ADV },
		{ "neg_adversarial_sampling", no_argument, NULL, O_ADV },
		{ "a", required_argument, NULL, O_ADVT },
		{ "adversarial_temperature", required_argument, NULL, O_ADVT },
		{ "rc", required_argument, NULL, O_RC },
		{ "regularization_coef", required_argument, NULL, O_RC },
		{ "rn", required_argument, NULL, O_RN },
		{ "regularization_norm", required_argument, NULL, O_RN },
		{ "batch_size", required_argument, NULL, O_BATCH },
		{ "neg_sample_size", required_argument, NULL, O_NEG },
		{ "neg_chunk_size", required_argument, NULL, O_CHUNK },
		{ "max_step", required_argument, NULL, O_STEPS },
		{ "lr", required_argument, NULL, O_LR },
		{ "optimizer", required_argument, NULL, O_OPT },
		{ "log_interval", required_argument, NULL, O_LOGI },
		{ "seed", required_argument, NULL, O_SEED },
		{ "sync", no_argument, NULL, O_SYNC },
		{ "test", no_argument, NULL, O_TEST },
		{ "valid", no_argument, NULL, O_VALID },
		{ "eval_per_relation", no_argument, NULL, O_PERREL },
		{ "save_path", required_argument, NULL, O_SAVE },
		{ "secret-file", required_argument, NULL, O_SECRET },
		{ "reconnect", required_argument, NULL, O_RECONNECT },
		{ "checkpoint-dir", required_argument, NULL, O_CKDIR },
		{ "resume", no_argument, NULL, O_RESUME },
		{ "help", no_argument, NULL, O_HELP },
		{ "h", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct rdps_train_opts o;
	struct rdps_train_result res;
	struct rdps_secret secret;
	const char *secret_file = NULL;
	char err[1024], out[512];
	double v;
	int opt, ret;

	rdps_train_opts_init(&o);
	optind = 1;
	while ((opt = getopt_long_only(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case O_DATA: o.data_dir = optarg; break;
		case O_PART: o.partition_dir = optarg; break;
		case O_STANDALONE: o.standalone = true; break;
		case O_IPC: o.ip_config = optarg; break;
		case O_RANK: if (num("--rank", optarg, 0, 1e6, &v)) return 2; o.rank = (uint32_t)v; break;
		case O_NTRAIN: if (num("--num_trainers", optarg, 1, 1e6, &v)) return 2; o.num_trainers = (uint32_t)v; break;
		case O_NTHREAD: if (num("--num_thread", optarg, 1, 256, &v)) return 2; o.num_thread = (uint32_t)v; break;
		case O_TRANSPORT: o.transport = optarg; break;
		case O_CONS:
			if (!strcmp(optarg, "validated"))
				o.read_consistency = RDPS_READ_VALIDATED;
			else if (!strcmp(optarg, "relaxed"))
				o.read_consistency = RDPS_READ_RELAXED;
			else {
				fprintf(stderr, "rdps train: --read-consistency must be validated or relaxed\n");
				return 2;
			}
			break;
		case O_TIMEOUT: if (num("--timeout", optarg, 0.001, 1e6, &v)) return 2; o.timeout_ms = (int)(v * 1000); break;
		case O_KEEP: o.shutdown_servers = false; break;
		case O_MODEL: o.model.name = optarg; break;
		case O_DIM: if (num("--hidden_dim", optarg, 1, RDPS_MAX_DIM, &v)) return 2; o.model.hidden_dim = (uint32_t)v; break;
		case O_GAMMA: if (num("--gamma", optarg, -1e9, 1e9, &v)) return 2; o.model.gamma = (float)v; break;
		case O_ADV: o.model.adv = true; break;
		case O_ADVT: if (num("--adversarial_temperature", optarg, 0, 1e9, &v)) return 2; o.model.adv_temp = (float)v; break;
		case O_RC: if (num("--regularization_coef", optarg, 0, 1e9, &v)) return 2; o.model.reg_coef = (float)v; break;
		case O_RN: if (num("--regularization_norm", optarg, 0, 100, &v)) return 2; o.model.reg_norm = (float)v; break;
		case O_BATCH: if (num("--batch_size", optarg, 1, 1 << 20, &v)) return 2; o.batch_size = (uint32_t)v; break;
		case O_NEG: if (num("--neg_sample_size", optarg, 1, 1 << 20, &v)) return 2; o.neg_sample_size = (uint32_t)v; break;
		case O_CHUNK: if (num("--neg_chunk_size", optarg, 1, 1 << 20, &v)) return 2; o.neg_chunk_size = (uint32_t)v; break;
		case O_STEPS: if (num("--max_step", optarg, 0, 1e15, &v)) return 2; o.max_step = (uint64_t)v; break;
		case O_LR: if (num("--lr", optarg, 0, 1e9, &v)) return 2; o.lr = (float)v; break;
		case O_OPT:
			o.optimizer = rdps_optimizer_parse(optarg);
			if (o.optimizer < 0) {
				fprintf(stderr, "rdps train: unknown --optimizer '%s' (sgd, adagrad_row, adagrad)\n", optarg);
				return 2;
			}
			break;
		case O_LOGI: if (num("--log_interval", optarg, 0, 1e15, &v)) return 2; o.log_interval = (uint32_t)v; break;
		case O_SEED: if (num("--seed", optarg, 0, 9e18, &v)) return 2; o.seed = (uint64_t)v; break;
		case O_SYNC: o.sync_push = true; break;
		case O_TEST: o.test = true; break;
		case O_VALID: o.valid = true; break;
		case O_PERREL: o.eval_per_relation = true; break;
		case O_SAVE: o.save_path = optarg; break;
		case O_SECRET: secret_file = optarg; break;
		case O_CKDIR: o.checkpoint_dir = optarg; break;
		case O_RESUME: o.resume = true; break;
		case O_RECONNECT: if (num("--reconnect", optarg, 0, 1e6, &v)) return 2; o.reconnect_ms = (int)(v * 1000); break;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps train: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.eval_per_relation && !o.test && !o.valid) {
		fprintf(stderr, "rdps train: --eval_per_relation needs --test or --valid\n");
		return 2;
	}
	if (rdps_secret_load(secret_file, &secret, err, sizeof(err))) {
		fprintf(stderr, "rdps train: %s\n", err);
		return 1;
	}
	o.secret = &secret;
	ret = rdps_train_run(&o, &res, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps train: %s\n", err);
		return 1;
	}
	if (o.rank == 0 && res.have_valid) {
		rdps_eval_format(out, sizeof(out), "Valid", &res.valid);
		fputs(out, stdout);
	}
	if (o.rank == 0 && res.have_test) {
		rdps_eval_format(out, sizeof(out), "Test", &res.test);
		fputs(out, stdout);
	}
	/* The tables after every DGL-KE line, which scripts parse as a block. */
	if (o.rank == 0 && res.have_valid && res.valid_rel)
		print_relations(stdout, "Valid", "valid", res.valid_rel, &res);
	if (o.rank == 0 && res.have_test && res.test_rel)
		print_relations(stdout, "Test", "test", res.test_rel, &res);
	rdps_train_result_free(&res);
	return 0;
}
