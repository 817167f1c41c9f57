// SPDX-License-Identifier: MIT
/* rdps train: DGL-KE's dglke_train / dglke_dist_train, same flag names. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "rdps/auth.h"
#include "rdps/common.h"
#include "rdps/kvstore.h"
#include "rdps/train.h"
#include "rdps/transport.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps train (--data DIR | --data_path DIR [--dataset NAME] [--format F --data_files ...])\n"
"                  [--standalone | --ip_config FILE --partition PDIR] [options]\n"
"\n"
"Trains knowledge-graph embeddings. Standalone: one process, an in-process store.\n"
"Distributed: every trainer (--rank of --num_trainers) samples from its part of\n"
"the partition and pulls/pushes rows on the servers of --ip_config (start them\n"
"with rdps server --partition PDIR --model_name ... --hidden_dim ...).\n"
"DGL-KE's dglke_train flags mean what they mean there (a dglke_train command line\n"
"runs with the command name changed); single-dash forms work too. GPU flags are\n"
"refused with the reason: rdps trains on CPU threads.\n"
"Trainers of one job meet at a start barrier before training: each says what it waits\n"
"for, one whose data does not load tells the others, and all refuse (naming the option\n"
"and the trainers) unless every one has the same --model_name, --hidden_dim, --gamma,\n"
"-adv, -a, -rc, -rn, --batch_size, --neg_sample_size, --neg_chunk_size, --neg_deg_sample,\n"
"--max_step, --resume, --test, --valid, --eval_interval, --eval_percent,\n"
"--neg_sample_size_eval, --batch_size_eval, --neg_deg_sample_eval, --no_eval_filter,\n"
"--eval_per_relation and data (the same partition).\n"
"\n"
"data:\n"
"  --data DIR                 a dataset in rdps's (DGL-KE's raw) layout: train.txt\n"
"                             valid.txt test.txt entities.dict relations.dict\n"
"  --data_path DIR            DGL-KE's: the directory of the dataset (built_in: the\n"
"                             dataset is DIR/NAME of --dataset, or DIR itself when it\n"
"                             holds entities.dict and --dataset is not given)\n"
"  --dataset NAME             its name; the saved files are NAME_<model>_entity.npy ...\n"
"                             (default: the directory's name)\n"
"  --format F                 built_in (default), raw_udd_<order>: --data_files TRAIN\n"
"                             [VALID TEST] of names; udd_<order>: --data_files ENTITIES\n"
"                             RELATIONS TRAIN [VALID TEST], triples of ids. <order> is\n"
"                             the columns: hrt, htr, rht, rth, thr, trh. Read into a\n"
"                             temporary raw layout for the run\n"
"  --data_files F...          files in --data_path (see --format)\n"
"  --delimiter S              field separator of the data files (default tab)\n"
"  --partition PDIR           its partition (rdps partition); trainer r trains on part r %% k\n"
"job:\n"
"  --standalone               no servers: an in-process store (the default without\n"
"                             --ip_config, as dglke_train)\n"
"  --ip_config FILE           servers of the job (DGL-KE format)\n"
"  --rank N                   this trainer (default 0)\n"
"  --num_trainers N           trainer processes in the job (default 1)\n"
"  --num_proc N               DGL-KE's training processes: here threads of this trainer,\n"
"                             each one client with its own sampler and share of the\n"
"                             triples, running --max_step steps (default 1)\n"
"  --num_thread N             threads per --num_proc (default 1): a trainer runs\n"
"                             num_proc x num_thread training threads. DGL-KE's\n"
"                             num_thread are a process's compute threads; rdps's\n"
"                             kernels use one thread each, so each is a trainer thread\n"
"  --transport NAME           auto (default), tcp, verbs, ofi (libfabric: AWS EFA);\n"
"                             auto takes verbs where an InfiniBand or RoCE device\n"
"                             serves the servers' address, ofi where there is an EFA\n"
"                             device, else tcp, and says which\n"
"  --ofi-provider NAME        the libfabric provider of --transport ofi (default: efa\n"
"                             where there is an EFA device; e.g. 'tcp;ofi_rxm'); the\n"
"                             servers must use the same (sets RDPS_OFI_PROVIDER)\n"
"  --tos N                    type of service 0-255 of the RDMA connections (verbs;\n"
"                             RoCE: the traffic class, the lossless one on a PFC\n"
"                             fabric; default: the device's); as the servers' (sets\n"
"                             RDPS_TOS)\n"
"  --read-consistency MODE    validated (default) or relaxed one-sided reads (verbs, ofi)\n"
"  --timeout SEC              bound on each wait: to connect to the servers and for one\n"
"                             to answer (default 60; with no server reachable the\n"
"                             trainer gives up after it), and for the job's other\n"
"                             trainers at the start barrier (default 600); a trainer\n"
"                             that waits longer fails, naming the wait and the trainers\n"
"                             it waited for. Later barriers (after training, evaluation\n"
"                             reduces) wait for the longer of this and 600 s\n"
"  --keep_servers             do not shut the servers down at the end\n"
"  --reconnect SEC            wait this long for a lost server to come back (restarted\n"
"                             from its checkpoint) before failing (default 120; 0: fail)\n"
"  --secret-file PATH         the job's shared secret (default: $RDPS_SECRET)\n"
"model:\n"
"  --model_name NAME          %s (default TransE_l2)\n"
"  --hidden_dim N             embedding size (default 400)\n"
"  -g, --gamma F              margin (default 12.0)\n"
"  -de, --double_ent          entity rows of 2 x hidden_dim (RotatE's, always)\n"
"  -dr, --double_rel          relation rows of 2 x hidden_dim (models that do not double\n"
"                             their rows refuse -de / -dr)\n"
"  -adv, --neg_adversarial_sampling   self-adversarial negative weighting\n"
"  -a, --adversarial_temperature F    (default 1.0)\n"
"  -rc, --regularization_coef F       (default 2e-6)\n"
"  -rn, --regularization_norm F       (default 3)\n"
"  --loss_genre Logsigmoid    the only loss rdps has (DGL-KE's default)\n"
"training:\n"
"  --batch_size N             positives per step (default 1024)\n"
"  --neg_sample_size N        negatives per chunk (default 256)\n"
"  --neg_chunk_size N         positives sharing negatives (default neg_sample_size)\n"
"  --neg_deg_sample           each chunk also gets neg_chunk_size negatives drawn in\n"
"                             proportion to their degree (an end of a random train triple)\n"
"  --max_step N               steps of each thread (default 80000)\n"
"  --lr F                     learning rate of the standalone store (default 0.01;\n"
"                             distributed: the servers' --lr)\n"
"  --optimizer NAME           standalone store: adagrad_row (default), adagrad, sgd\n"
"  -log, --log_interval N     steps between progress lines (with elapsed time and ETA;\n"
"                             default 1000). Thread 0's means per step: pull, compute,\n"
"                             push = time in the pull calls, the model kernel, the push\n"
"                             calls; distributed also net N ms hidden H ms (X%%): N is\n"
"                             the step's network time, measured from posting its pull\n"
"                             until its rows were in plus its pushes, H the part of it\n"
"                             the thread computed instead of waiting (exact when it still\n"
"                             had to wait for the rows; an upper bound when they were\n"
"                             in). At the end, a \"step split\" line: sample, gather,\n"
"                             kernel, optimizer (standalone), network (blocked), net and\n"
"                             hidden ms per step, also in results.json\n"
"  --seed N                   sampling and initialisation seed (default 0)\n"
"  --sync                     flush every step's pushes at its end (deterministic)\n"
"  --async_update             pushes overlap the next step (DGL-KE's flag; rdps's way\n"
"                             unless --sync)\n"
"  --no_pipeline              the serial step: pull, compute, push. By default a thread\n"
"                             samples step k+1 and posts its pull before computing step\n"
"                             k, and pushes step k's gradients once step k+1's rows are\n"
"                             in: step k+1 reads rows without step k's gradients (one\n"
"                             step stale at most). Flushes, evaluation, checkpoints and\n"
"                             the end of training come between steps, nothing in flight\n"
"  --force_sync_interval N    every N steps the trainer's threads flush their pushes and\n"
"                             wait for each other (default: none; 1000 with --num_proc > 1,\n"
"                             as DGL-KE)\n"
"  --checkpoint-dir DIR       record each thread's step and sampler state there every\n"
"                             log_interval steps (the tables are the servers' to\n"
"                             checkpoint: rdps server --checkpoint-dir)\n"
"  --resume                   continue from the steps recorded in --checkpoint-dir\n"
"evaluation (filtered by every train, valid and test triple):\n"
"  --test                     MRR, MR, Hits@1/3/10 on test.txt after training\n"
"  --valid                    the same on valid.txt after training, and every\n"
"                             --eval_interval steps during it\n"
"  --eval_interval N          (default 10000)\n"
"  --eval_percent F           rank a fixed random share F of each split (default 1)\n"
"  --neg_sample_size_eval N   rank against N entities drawn per batch instead of all\n"
"                             (default -1: all)\n"
"  --batch_size_eval N        triples sharing one drawn set (default 8)\n"
"  --neg_deg_sample_eval      a batch's set also holds the batch's true entities\n"
"                             (DGL-KE's degree-based negatives); needs --no_eval_filter\n"
"  --no_eval_filter           raw ranking: only the true entity is left out\n"
"  --eval_per_relation        with --test/--valid, also a table after those lines: per\n"
"                             relation, its triples, MRR, MR, HITS@1/3/10, tail-side\n"
"                             and head-side MRR (every trainer of the job needs it)\n"
"output:\n"
"  --save_path DIR            write <dataset>_<model>_entity.npy, ..._relation.npy\n"
"                             (rows in entities.dict/relations.dict order), the dicts,\n"
"                             config.json (DGL-KE's keys) and results.json (the\n"
"                             metrics); made if missing, checked before training.\n"
"                             SIGINT/SIGTERM saves the embeddings reached there\n"
"  --no_save_emb              only results.json\n"
"  --check-only               check options, data, partition, save path and ip_config\n"
"                             without starting anything: exit 0, or 2 with the error\n"
"  -h, --help                 this text\n",
		rdps_model_names());
}

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line: what is wrong, and where to look. */
static void bad(const char *fmt, ...)
{
	va_list ap;

	fputs("rdps train: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see rdps train --help)\n", stderr);
}

static int num(const char *flag, const char *arg, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(arg, &end);
	if (errno || *end || end == arg || *out < lo || *out > hi) {
		bad("%s '%s' is not a number in [%g, %g]", flag, arg, lo, hi);
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

enum {
	O_DATA = 256, O_DATA_PATH, O_DATASET, O_FORMAT, O_DATA_FILES, O_DELIM, O_PART,
	O_STANDALONE, O_IPC, O_RANK, O_NTRAIN, O_NPROC, O_NTHREAD, O_TRANSPORT, O_CONS,
	O_TIMEOUT, O_KEEP, O_MODEL, O_DIM, O_GAMMA, O_DE, O_DR, O_ADV, O_ADVT, O_RC, O_RN,
	O_LOSS, O_PAIRWISE, O_MARGIN, O_BATCH, O_NEG, O_CHUNK, O_NEG_DEG, O_STEPS, O_LR, O_OPT,
	O_LOGI, O_SEED, O_SYNC, O_ASYNC, O_NO_PIPELINE, O_FORCE_SYNC, O_TEST, O_VALID, O_EVAL_INTERVAL,
	O_EVAL_PERCENT, O_BATCH_EVAL, O_NEG_EVAL, O_NEG_DEG_EVAL, O_NO_FILTER, O_PERREL, O_SAVE,
	O_NO_SAVE, O_CHECK, O_SECRET, O_RECONNECT, O_CKDIR, O_RESUME, O_GPU, O_MIX, O_REL_PART,
	O_EDGE_IMP, O_OFI_PROV, O_TOS, O_HELP,
};

static const struct option opts[] = {
	{ "data", required_argument, NULL, O_DATA },
	{ "data_path", required_argument, NULL, O_DATA_PATH },
	{ "dataset", required_argument, NULL, O_DATASET },
	{ "format", required_argument, NULL, O_FORMAT },
	{ "data_files", required_argument, NULL, O_DATA_FILES },
	{ "delimiter", required_argument, NULL, O_DELIM },
	{ "partition", required_argument, NULL, O_PART },
	{ "standalone", no_argument, NULL, O_STANDALONE },
	{ "ip_config", required_argument, NULL, O_IPC },
	{ "rank", required_argument, NULL, O_RANK },
	{ "num_trainers", required_argument, NULL, O_NTRAIN },
	{ "num_proc", required_argument, NULL, O_NPROC },
	{ "num_thread", required_argument, NULL, O_NTHREAD },
	{ "transport", required_argument, NULL, O_TRANSPORT },
	{ "ofi-provider", required_argument, NULL, O_OFI_PROV },
	{ "tos", required_argument, NULL, O_TOS },
	{ "read-consistency", required_argument, NULL, O_CONS },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "keep_servers", no_argument, NULL, O_KEEP },
	{ "model_name", required_argument, NULL, O_MODEL },
	{ "hidden_dim", required_argument, NULL, O_DIM },
	{ "gamma", required_argument, NULL, O_GAMMA },
	{ "g", required_argument, NULL, O_GAMMA },
	{ "double_ent", no_argument, NULL, O_DE },
	{ "de", no_argument, NULL, O_DE },
	{ "double_rel", no_argument, NULL, O_DR },
	{ "dr", no_argument, NULL, O_DR },
	{ "adv", no_argument, NULL, O_ADV },
	{ "neg_adversarial_sampling", no_argument, NULL, O_ADV },
	{ "a", required_argument, NULL, O_ADVT },
	{ "adversarial_temperature", required_argument, NULL, O_ADVT },
	{ "rc", required_argument, NULL, O_RC },
	{ "regularization_coef", required_argument, NULL, O_RC },
	{ "rn", required_argument, NULL, O_RN },
	{ "regularization_norm", required_argument, NULL, O_RN },
	{ "loss_genre", required_argument, NULL, O_LOSS },
	{ "pairwise", no_argument, NULL, O_PAIRWISE },
	{ "pw", no_argument, NULL, O_PAIRWISE },
	{ "margin", required_argument, NULL, O_MARGIN },
	{ "m", required_argument, NULL, O_MARGIN },
	{ "batch_size", required_argument, NULL, O_BATCH },
	{ "neg_sample_size", required_argument, NULL, O_NEG },
	{ "neg_chunk_size", required_argument, NULL, O_CHUNK },
	{ "neg_deg_sample", no_argument, NULL, O_NEG_DEG },
	{ "max_step", required_argument, NULL, O_STEPS },
	{ "lr", required_argument, NULL, O_LR },
	{ "optimizer", required_argument, NULL, O_OPT },
	{ "log_interval", required_argument, NULL, O_LOGI },
	{ "log", required_argument, NULL, O_LOGI },
	{ "seed", required_argument, NULL, O_SEED },
	{ "sync", no_argument, NULL, O_SYNC },
	{ "async_update", no_argument, NULL, O_ASYNC },
	{ "no_pipeline", no_argument, NULL, O_NO_PIPELINE },
	{ "force_sync_interval", required_argument, NULL, O_FORCE_SYNC },
	{ "test", no_argument, NULL, O_TEST },
	{ "valid", no_argument, NULL, O_VALID },
	{ "eval_interval", required_argument, NULL, O_EVAL_INTERVAL },
	{ "eval_percent", required_argument, NULL, O_EVAL_PERCENT },
	{ "batch_size_eval", required_argument, NULL, O_BATCH_EVAL },
	{ "neg_sample_size_eval", required_argument, NULL, O_NEG_EVAL },
	{ "neg_deg_sample_eval", no_argument, NULL, O_NEG_DEG_EVAL },
	{ "no_eval_filter", no_argument, NULL, O_NO_FILTER },
	{ "eval_per_relation", no_argument, NULL, O_PERREL },
	{ "save_path", required_argument, NULL, O_SAVE },
	{ "no_save_emb", no_argument, NULL, O_NO_SAVE },
	{ "check-only", no_argument, NULL, O_CHECK },
	{ "secret-file", required_argument, NULL, O_SECRET },
	{ "reconnect", required_argument, NULL, O_RECONNECT },
	{ "checkpoint-dir", required_argument, NULL, O_CKDIR },
	{ "resume", no_argument, NULL, O_RESUME },
	/* DGL-KE's GPU and other flags rdps cannot honour: refused with why */
	{ "gpu", required_argument, NULL, O_GPU },
	{ "mix_cpu_gpu", no_argument, NULL, O_MIX },
	{ "rel_part", no_argument, NULL, O_REL_PART },
	{ "has_edge_importance", no_argument, NULL, O_EDGE_IMP },
	{ "help", no_argument, NULL, O_HELP },
	{ "h", no_argument, NULL, O_HELP },
	{ 0 },
};

/* The option name matches: exactly, else as the only prefix (getopt's rule:
 * prefixes of several names of one option are not ambiguous). NULL, with
 * *ambiguous set when several options match. */
static const struct option *lookup(const char *name, size_t len, bool *ambiguous)
{
	const struct option *found = NULL;

	*ambiguous = false;
	for (const struct option *o = opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	for (const struct option *o = opts; o->name; o++) {
		if (strncmp(o->name, name, len))
			continue;
		if (found && found->val != o->val)
			*ambiguous = true;
		found = found ? found : o;
	}
	return *ambiguous ? NULL : found;
}

static void unknown_option(const char *arg)
{
	char why[256];

	bad("%s", rdps_cli_explain(opts, arg, why, sizeof(why)));
}

static bool is_int(const char *s)
{
	char *end;

	errno = 0;
	(void)strtol(s, &end, 10);
	return !errno && *s && !*end;
}

/*
 * Before getopt: every option is known (else one line with a did-you-mean),
 * has its value, and DGL-KE's list options (--data_files F..., --gpu ID...)
 * are taken out of the arguments into files and *gpu. Leaves in out[] what
 * getopt reads. 0, or 2 (the error printed).
 */
static int prescan(int argc, char **argv, char **out, int *outc, const char **files,
		   size_t nfiles, long *gpu)
{
	size_t nf = 0;
	int n = 0;

	out[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name = a + 1, *eq;
		const struct option *o;
		bool amb;
		size_t len;

		if (a[0] != '-' || !a[1] || !strcmp(a, "--")) {
			if (!strcmp(a, "--"))
				i++;
			if (i < argc) {
				bad("unexpected argument '%s'", argv[i]);
				return 2;
			}
			break;
		}
		name += name[0] == '-';
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		o = lookup(name, len, &amb);
		if (amb) {
			char list[512];
			size_t l = 0;
			int prev = -1;

			for (const struct option *p = opts; p->name && l < sizeof(list); p++)
				if (!strncmp(p->name, name, len) && p->val != prev) {
					l += (size_t)snprintf(list + l, sizeof(list) - l, "%s--%s",
							      l ? ", " : "", p->name);
					prev = p->val;
				}
			bad("ambiguous option '%s' (could be %s)", a, list);
			return 2;
		}
		if (!o) {
			unknown_option(a);
			return 2;
		}
		if (o->val == O_DATA_FILES || o->val == O_GPU) {
			/* nargs='+': the values that follow */
			int values = 0;

			for (const char *v = eq ? eq + 1 : NULL;; v = argv[++i]) {
				if (v) {
					if (o->val == O_GPU && !is_int(v)) {
						bad("--gpu '%s' is not a GPU id", v);
						return 2;
					}
					if (o->val == O_GPU && *gpu < 0 && strtol(v, NULL, 10) >= 0)
						*gpu = strtol(v, NULL, 10);
					if (o->val == O_DATA_FILES && nf == nfiles) {
						bad("--data_files takes at most %zu files", nfiles);
						return 2;
					}
					if (o->val == O_DATA_FILES)
						files[nf++] = v;
					values++;
				}
				if (i + 1 == argc || (o->val == O_GPU ? !is_int(argv[i + 1])
								    : argv[i + 1][0] == '-'))
					break;
			}
			if (!values) {
				bad("--%s needs %s", o->name, o->val == O_GPU ? "GPU ids" : "file names");
				return 2;
			}
			continue;
		}
		if (o->has_arg == no_argument && eq) {
			bad("--%s takes no value ('%s')", o->name, a);
			return 2;
		}
		out[n++] = argv[i];
		if (o->has_arg == required_argument && !eq) {
			if (i + 1 == argc) {
				bad("--%s needs a value", o->name);
				return 2;
			}
			out[n++] = argv[++i];
		}
	}
	out[n] = NULL;
	*outc = n;
	return 0;
}

static volatile sig_atomic_t stop_signal;

/* The first SIGINT/SIGTERM asks the trainer to stop and save; a second one
 * ends the process at once. */
static void on_signal(int sig)
{
	if (stop_signal) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
}

int rdps_cmd_train(int argc, char **argv)
{
	struct rdps_train_opts o;
	struct rdps_train_result res;
	struct rdps_secret secret;
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	const char *secret_file = NULL;
	char err[1024], out[512], **args;
	bool force_sync_given = false;
	long gpu = -1;
	double v;
	int opt, ret, nargs;

	rdps_train_opts_init(&o);
	args = calloc((size_t)argc + 1, sizeof(*args));
	if (!args)
		return 1;
	ret = prescan(argc, argv, args, &nargs, o.data_files,
		      sizeof(o.data_files) / sizeof(o.data_files[0]) - 1, &gpu);
	if (ret)
		goto out;
	ret = 2;
	if (gpu >= 0) {
		bad("--gpu %ld: rdps trains on CPU threads only, with the embeddings in the "
		    "parameter servers (or the in-process store); drop --gpu or give -1", gpu);
		goto out;
	}
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long_only(nargs, args, ":", opts, NULL)) != -1) {
		switch (opt) {
		case O_DATA: o.data_dir = optarg; break;
		case O_DATA_PATH: o.data_path = optarg; break;
		case O_DATASET: o.dataset = optarg; break;
		case O_FORMAT: o.format = optarg; break;
		case O_DELIM: o.delimiter = optarg; break;
		case O_PART: o.partition_dir = optarg; break;
		case O_STANDALONE: o.standalone = true; break;
		case O_IPC: o.ip_config = optarg; break;
		case O_RANK: if (num("--rank", optarg, 0, 1e6, &v)) goto out; o.rank = (uint32_t)v; break;
		case O_NTRAIN: if (num("--num_trainers", optarg, 1, 1e6, &v)) goto out; o.num_trainers = (uint32_t)v; break;
		case O_NPROC: if (num("--num_proc", optarg, 1, 256, &v)) goto out; o.num_proc = (uint32_t)v; break;
		case O_NTHREAD: if (num("--num_thread", optarg, 1, 256, &v)) goto out; o.num_thread = (uint32_t)v; break;
		case O_TRANSPORT: o.transport = optarg; break;
		case O_OFI_PROV:
			if (!*optarg) {
				fprintf(stderr, "rdps train: --ofi-provider needs a provider name (fi_info -l lists them)\n");
				goto out;
			}
			/* The ofi backend reads it (as its other settings). */
			setenv("RDPS_OFI_PROVIDER", optarg, 1);
			break;
		case O_TOS:
			if (num("--tos", optarg, 0, 255, &v))
				goto out;
			/* The verbs backend reads it (as its other settings). */
			setenv("RDPS_TOS", optarg, 1);
			break;
		case O_CONS:
			if (!strcmp(optarg, "validated")) {
				o.read_consistency = RDPS_READ_VALIDATED;
			} else if (!strcmp(optarg, "relaxed")) {
				o.read_consistency = RDPS_READ_RELAXED;
			} else {
				bad("--read-consistency must be validated or relaxed");
				goto out;
			}
			break;
		case O_TIMEOUT: if (num("--timeout", optarg, 0.001, 1e6, &v)) goto out; o.timeout_ms = (int)(v * 1000); break;
		case O_KEEP: o.shutdown_servers = false; break;
		case O_MODEL: o.model.name = optarg; break;
		case O_DIM: if (num("--hidden_dim", optarg, 1, RDPS_MAX_DIM, &v)) goto out; o.model.hidden_dim = (uint32_t)v; break;
		case O_GAMMA: if (num("--gamma", optarg, -1e9, 1e9, &v)) goto out; o.model.gamma = (float)v; break;
		case O_DE: o.model.double_ent = true; break;
		case O_DR: o.model.double_rel = true; break;
		case O_ADV: o.model.adv = true; break;
		case O_ADVT: if (num("--adversarial_temperature", optarg, 0, 1e9, &v)) goto out; o.model.adv_temp = (float)v; break;
		case O_RC: if (num("--regularization_coef", optarg, 0, 1e9, &v)) goto out; o.model.reg_coef = (float)v; break;
		case O_RN: if (num("--regularization_norm", optarg, 0, 100, &v)) goto out; o.model.reg_norm = (float)v; break;
		case O_LOSS:
			if (strcmp(optarg, "Logsigmoid")) {
				bad("--loss_genre %s: rdps has DGL-KE's Logsigmoid loss only", optarg);
				goto out;
			}
			break;
		case O_PAIRWISE:
			bad("-pw/--pairwise: rdps has DGL-KE's Logsigmoid loss of each triple only");
			goto out;
		case O_MARGIN:
			bad("-m/--margin is the margin of DGL-KE's Hinge loss, which rdps does not "
			    "have (it has Logsigmoid; --gamma is the score's margin)");
			goto out;
		case O_BATCH: if (num("--batch_size", optarg, 1, 1 << 20, &v)) goto out; o.batch_size = (uint32_t)v; break;
		case O_NEG: if (num("--neg_sample_size", optarg, 1, 1 << 20, &v)) goto out; o.neg_sample_size = (uint32_t)v; break;
		case O_CHUNK: if (num("--neg_chunk_size", optarg, 1, 1 << 20, &v)) goto out; o.neg_chunk_size = (uint32_t)v; break;
		case O_NEG_DEG: o.neg_deg_sample = true; break;
		case O_STEPS: if (num("--max_step", optarg, 0, 1e15, &v)) goto out; o.max_step = (uint64_t)v; break;
		case O_LR: if (num("--lr", optarg, 0, 1e9, &v)) goto out; o.lr = (float)v; break;
		case O_OPT:
			o.optimizer = rdps_optimizer_parse(optarg);
			if (o.optimizer < 0) {
				bad("unknown --optimizer '%s' (sgd, adagrad_row, adagrad)", optarg);
				goto out;
			}
			break;
		case O_LOGI: if (num("--log_interval", optarg, 0, 1e15, &v)) goto out; o.log_interval = (uint32_t)v; break;
		case O_SEED: if (num("--seed", optarg, 0, 9e18, &v)) goto out; o.seed = (uint64_t)v; break;
		case O_SYNC: o.sync_push = true; break;
		case O_ASYNC: o.async_update = true; break;
		case O_NO_PIPELINE: o.no_pipeline = true; break;
		case O_FORCE_SYNC:
			/* DGL-KE's -1: never */
			if (num("--force_sync_interval", optarg, -1, 1e9, &v)) goto out;
			o.force_sync_interval = v > 0 ? (uint32_t)v : 0;
			force_sync_given = true;
			break;
		case O_TEST: o.test = true; break;
		case O_VALID: o.valid = true; break;
		case O_EVAL_INTERVAL: if (num("--eval_interval", optarg, 1, 1e15, &v)) goto out; o.eval_interval = (uint64_t)v; break;
		case O_EVAL_PERCENT:
			if (num("--eval_percent", optarg, 1e-9, 1, &v)) goto out;
			o.eval_percent = v;
			break;
		case O_BATCH_EVAL: if (num("--batch_size_eval", optarg, 1, 1 << 24, &v)) goto out; o.batch_size_eval = (uint32_t)v; break;
		case O_NEG_EVAL:
			/* DGL-KE's -1 (its default): every entity */
			if (num("--neg_sample_size_eval", optarg, -1, 1 << 30, &v) || v == 0) {
				if (v == 0)
					bad("--neg_sample_size_eval must be positive, or -1 (every entity)");
				goto out;
			}
			o.neg_sample_size_eval = v > 0 ? (uint64_t)v : 0;
			break;
		case O_NEG_DEG_EVAL: o.neg_deg_sample_eval = true; break;
		case O_NO_FILTER: o.no_eval_filter = true; break;
		case O_PERREL: o.eval_per_relation = true; break;
		case O_SAVE: o.save_path = optarg; break;
		case O_NO_SAVE: o.no_save_emb = true; break;
		case O_CHECK: o.check_only = true; break;
		case O_SECRET: secret_file = optarg; break;
		case O_CKDIR: o.checkpoint_dir = optarg; break;
		case O_RESUME: o.resume = true; break;
		case O_RECONNECT: if (num("--reconnect", optarg, 0, 1e6, &v)) goto out; o.reconnect_ms = (int)(v * 1000); break;
		case O_MIX:
			bad("--mix_cpu_gpu: rdps trains on CPU threads only: the embeddings live in the "
			    "parameter servers (or the in-process store) and every step runs on the CPU; "
			    "drop it");
			goto out;
		case O_REL_PART:
			bad("--rel_part: relation partitioning is DGL-KE's multi-GPU optimisation (each "
			    "GPU keeps its relations); rdps trains on CPU threads against shared "
			    "servers; drop it");
			goto out;
		case O_EDGE_IMP:
			bad("--has_edge_importance: rdps datasets carry no per-triple weights; drop it");
			goto out;
		case O_HELP: usage(stdout); ret = 0; goto out;
		default:
			/* prescan let nothing else through */
			bad("cannot parse '%s'", args[optind - 1]);
			goto out;
		}
	}
	if (o.eval_per_relation && !o.test && !o.valid) {
		bad("--eval_per_relation needs --test or --valid");
		goto out;
	}
	/* DGL-KE synchronises its processes every 1000 steps when it has several */
	if (o.num_proc > 1 && !force_sync_given)
		o.force_sync_interval = 1000;
	if (rdps_secret_load(secret_file, &secret, err, sizeof(err))) {
		fprintf(stderr, "rdps train: %s\n", err);
		ret = o.check_only ? 2 : 1;
		goto out;
	}
	o.secret = &secret;
	if (o.check_only) {
		ret = rdps_train_run(&o, &res, err, sizeof(err));
		if (ret)
			fprintf(stderr, "rdps train: %s\n", err);
		else
			printf("rdps train: --check-only: options, data%s%s%s are fine\n",
			       o.partition_dir ? ", partition" : "", o.save_path ? ", save path" : "",
			       o.ip_config ? ", ip_config" : "");
		ret = ret ? 2 : 0;
		goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	o.stop = &stop_signal;
	ret = rdps_train_run(&o, &res, err, sizeof(err));
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (ret == -EINTR) {
		fprintf(stderr, "rdps train: %s (%s)\n", err,
			stop_signal == SIGTERM ? "SIGTERM" : "SIGINT");
		ret = 128 + (stop_signal ? stop_signal : SIGINT);
		goto out;
	}
	if (ret) {
		fprintf(stderr, "rdps train: %s\n", err);
		ret = 1;
		goto out;
	}
	/* dglke_dist_train's clients print this (rdps dist_train gathers it). */
	if (o.ip_config)
		printf("Total train time %.3f seconds\n", res.train_seconds);
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
	ret = 0;
out:
	free(args);
	return ret;
}
