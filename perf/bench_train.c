// SPDX-License-Identifier: MIT
/*
 * rdps bench train: the training job's speed.
 *
 *  kernel       rdps_model_step() in a loop, one thread, per model, at
 *               hidden_dim 400, 200 negatives, batch 1024 (defaults), against
 *               issue 5's goal of 20k positive triples/s per core, and for
 *               the models whose step is three matrix products (the DOT and
 *               L2 pair forms), its GFLOP/s against the core's peak FMA rate
 *               (rdps bench fma's, measured before and after the kernels);
 *  standalone   `rdps train --standalone` (a child process) on the dataset,
 *               with as many threads as the distributed trainers have in
 *               all; per thread against the kernel's rate of this run;
 *  distributed  2 `rdps server` + 2 `rdps train` processes over TCP on a
 *               2-way partition of the dataset, against standalone;
 *  curve        standalone runs of increasing --max_step with --test: loss
 *               against time from their progress lines, test MRR at the end
 *               of each run (the training curve of perf/report.md).
 *
 * Throughput and the shares of step time in pull, compute and push come from
 * the trainers' progress lines ("step ... pull X ms compute Y ms push Z ms",
 * thread 0's interval means; distributed also "net N ms hidden H ms"), read
 * line by line as they are printed; the split of a step (sample, gather,
 * kernel, optimizer, network blocked, network time and the part of it
 * hidden by the step pipeline) from each trainer's "step split" line.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf/bench.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps/trainer.h"

#define MAX_LIST 16
#define KERNEL_GOAL 20000.0 /* positive triples/s per core (issue 5) */

struct train_opts {
	const char *data, *workdir, *model;
	uint64_t hidden_dim, batch, neg, max_step, log_interval;
	uint64_t threads;          /* standalone (0: 2 x trainer_threads) */
	uint64_t trainer_threads;  /* per distributed trainer */
	double gamma, lr;
	bool adv;
	bool no_pipeline;   /* the trainers' serial step */
	bool ph_kernel, ph_standalone, ph_distributed, ph_curve;
	uint64_t curve_steps[MAX_LIST];
	int ncurve;
	const char *kernel_models;
	uint64_t kernel_dim, kernel_neg, kernel_batch;
	double kernel_seconds;
	uint16_t port;
	uint64_t synth_entities, synth_triples;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench train [options]\n"
"\n"
"Training speed. Phases (--phases, default kernel,standalone,distributed):\n"
"  kernel       rdps_model_step in a loop, one thread, per model (hidden_dim 400,\n"
"               neg 200, batch 1024) vs the goal of 20k pos triples/s per core\n"
"  standalone   rdps train --standalone: pos triples/s, shares of step time in\n"
"               pull / compute / push\n"
"  distributed  2 rdps servers + 2 trainers over TCP on 127.0.0.1 (k=2 partition)\n"
"  curve        standalone runs of --curve-steps with --test: loss vs time and\n"
"               test MRR at the end of each run\n"
"The kernel phase also measures the core's peak FMA rate (as rdps bench fma, on\n"
"the unit the kernels run on) and gives GFLOP/s for the models whose step is\n"
"three products of a chunk's queries and negatives (TransE_l2, DistMult,\n"
"ComplEx, SimplE: 6 x neg x entity row width flops per positive triple).\n"
"Standalone per thread is compared with the kernel's rate (same model, dim, neg\n"
"and batch), distributed with standalone (same threads in all). Each trainer's\n"
"'step split' line (sample, gather, kernel, optimizer, network, net, hidden ms\n"
"per step) is a \"train_split\" line.\n"
"Output: JSON lines (bench \"fma\", \"kernel\", \"train\", \"train_split\",\n"
"\"train_log\", \"train_eval\") on stdout, a table on stderr. Child processes\n"
"are this executable.\n"
"\n"
"  --data DIR             dataset (raw layout); default: a synthetic graph made\n"
"                         in --workdir (--synth-entities, --synth-triples)\n"
"  --workdir DIR          (default /tmp/rdps-bench-train)\n"
"  --phases LIST          kernel,standalone,distributed,curve\n"
"  --model_name NAME      (default TransE_l2)\n"
"  --hidden_dim N         (default 400)\n"
"  --gamma F              (default 12)\n"
"  --lr F                 (default 0.1)\n"
"  -adv, --adv            self-adversarial negatives\n"
"  --no_pipeline          the trainers' serial step (default: their step pipeline)\n"
"  --batch_size N         (default 1024)\n"
"  --neg_sample_size N    (default 256)\n"
"  --max_step N           steps per thread of the standalone/distributed runs\n"
"                         (default 1000)\n"
"  --log_interval N       (default 100)\n"
"  --trainer_threads N    threads of each distributed trainer (default 1)\n"
"  --num_thread N         standalone threads (default 2 x --trainer_threads: the\n"
"                         distributed trainers' total, which the distributed\n"
"                         rate is compared with; curve runs use it too)\n"
"  --curve-steps LIST     (default 500,1000,2000)\n"
"  --kernel-models LIST   (default all: TransE_l1,TransE_l2,DistMult,ComplEx,RotatE,RESCAL,\n"
"                         TransR,SimplE)\n"
"  --kernel-dim N, --kernel-neg N, --kernel-batch N   (default 400, 200, 1024)\n"
"  --kernel-seconds S     per model (default 2)\n"
"  --port N               distributed servers' base port (default: from the pid)\n"
"  --synth-entities N, --synth-triples N   (default 20k, 400k)\n"
"  -h, --help             this text\n");
}

/* ---------------------------------------------------------------------- */
/* Model kernel                                                            */

/* Flops per positive triple of the models whose step is three products of
 * a chunk's C queries and its N negatives (kge_chunk_pairs in
 * trainer/model_kernels.h: the scores S = Q E^T, then dL/dS E into the
 * queries' gradients and dL/dS^T Q into the negatives'), each N x w
 * multiply-adds per positive for entity rows of w floats: 6 N w flops. The
 * O(w) rest per positive (the query, its positive pair, the norms, the
 * query's backward: about 18 w for TransE_l2 at C = N, 1.5% at N = 200) is
 * not counted. 0 for the other models (L1 and RotatE forms are not
 * multiply-adds; RESCAL and TransR add matrix products of their own). */
static double kernel_flops_per_pos(const char *model, uint64_t neg, uint64_t width)
{
	static const char *const three_products[] = { "TransE_l2", "DistMult", "ComplEx", "SimplE" };

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(three_products); i++)
		if (!strcasecmp(model, three_products[i]))
			return 6.0 * (double)neg * (double)width;
	return 0;
}

static int kernel_rate(const struct train_opts *o, const char *name, double *rate,
		       uint64_t *width, char *err, size_t errlen)
{
	struct rdps_model_params mp;
	struct rdps_model *m = NULL;
	uint32_t B = (uint32_t)o->kernel_batch, N = (uint32_t)o->kernel_neg, chunk = N;
	uint32_t nchunks = (B + chunk - 1) / chunk, n_ent = 2 * B + nchunks * N, n_rel = 18;
	uint32_t *head = NULL, *rel = NULL, *tail = NULL, *neg = NULL;
	float *ent = NULL, *rrows = NULL, *eg = NULL, *rg = NULL;
	void *scratch = NULL;
	size_t ssz;
	uint64_t seed = 12345, busy = 0, steps = 0, deadline;
	struct rdps_batch b;
	int ret;

	rdps_model_params_init(&mp);
	mp.name = name;
	mp.hidden_dim = (uint32_t)o->kernel_dim;
	mp.adv = true;
	ret = rdps_model_create(&m, &mp);
	if (ret) {
		snprintf(err, errlen, "model %s: %s (models: %s)", name, rdps_strerror(ret),
			 rdps_model_names());
		return ret;
	}
	ssz = rdps_model_scratch_size(m, chunk, N, n_ent, n_rel);
	*width = rdps_model_entity_dim(m);
	head = malloc(B * 4);
	rel = malloc(B * 4);
	tail = malloc(B * 4);
	neg = malloc((size_t)nchunks * N * 4);
	ent = bench_alloc((size_t)n_ent * rdps_model_entity_dim(m) * 4);
	eg = bench_alloc((size_t)n_ent * rdps_model_entity_dim(m) * 4);
	rrows = bench_alloc((size_t)n_rel * rdps_model_relation_dim(m) * 4);
	rg = bench_alloc((size_t)n_rel * rdps_model_relation_dim(m) * 4);
	scratch = bench_alloc(ssz);
	if (!head || !rel || !tail || !neg || !ent || !eg || !rrows || !rg || !scratch) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	/* Rows as the trainer sees them: deduplicated, positives first. */
	for (uint32_t i = 0; i < B; i++) {
		head[i] = i;
		tail[i] = B + i;
		rel[i] = (uint32_t)(bench_rand(&seed) % n_rel);
	}
	for (uint32_t i = 0; i < nchunks * N; i++)
		neg[i] = 2 * B + i;
	for (size_t i = 0; i < (size_t)n_ent * rdps_model_entity_dim(m); i++)
		ent[i] = ((float)(bench_rand(&seed) % 2001) - 1000.0f) * rdps_model_emb_init(m) / 1000;
	for (size_t i = 0; i < (size_t)n_rel * rdps_model_relation_dim(m); i++)
		rrows[i] = ((float)(bench_rand(&seed) % 2001) - 1000.0f) * rdps_model_emb_init(m) / 1000;
	deadline = rdps_now_ns() + (uint64_t)(o->kernel_seconds * 1e9);
	while (rdps_now_ns() < deadline || steps < 2) {
		struct rdps_step_result res;
		uint64_t t0;

		b = (struct rdps_batch){ .size = B, .chunk = chunk, .neg = N,
					 .neg_head = (int)(steps & 1), .head = head, .rel = rel,
					 .tail = tail, .neg_ent = neg, .n_ent_rows = n_ent,
					 .n_rel_rows = n_rel };
		/* Gradients are zeroed outside the timed call, as the trainer
		 * does before each step. */
		memset(eg, 0, (size_t)n_ent * rdps_model_entity_dim(m) * 4);
		memset(rg, 0, (size_t)n_rel * rdps_model_relation_dim(m) * 4);
		t0 = rdps_now_ns();
		ret = rdps_model_step(m, &b, ent, rrows, eg, rg, scratch, ssz, &res);
		busy += rdps_now_ns() - t0;
		if (ret) {
			snprintf(err, errlen, "rdps_model_step (%s): %s", name, rdps_strerror(ret));
			goto out;
		}
		steps++;
	}
	*rate = steps * (double)B / (busy / 1e9);
out:
	free(head);
	free(rel);
	free(tail);
	free(neg);
	free(ent);
	free(eg);
	free(rrows);
	free(rg);
	free(scratch);
	rdps_model_destroy(m);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Trainer processes                                                       */

struct train_run {
	double pos_per_s;   /* from "training done" */
	double train_s;
	double pull_ms, comp_ms, push_ms; /* sums of the interval means */
	int nlog;
	/* "step split" line (rdps/train.h, struct rdps_train_step_split) */
	bool have_split, pipeline;
	double sample_ms, gather_ms, kernel_ms, optimizer_ms, network_ms, net_ms, hidden_ms;
	double last_loss;   /* of the last progress line */
	bool have_test;
	double mrr, mr, h1, h3, h10;
};

/* Parses one line of rdps train's output. If label is set, progress lines
 * are also emitted as train_log JSON with the time since t0 (wall, from the
 * process start) and the training time (train_s: positives so far over the
 * cumulative rate the line prints; pos_per_step = batch * threads). */
static void parse_line(const char *line, struct train_run *r, const char *label,
		       uint64_t t0, double pos_per_step)
{
	unsigned tr;
	unsigned long long step, max, steps;
	double loss, rate, pull, comp, push, secs, v, net = NAN, hidden = NAN;
	char pipe[4];
	const char *p;

	if (sscanf(line, "[trainer %u] step %llu/%llu loss %lf %lf pos/s pull %lf ms compute %lf ms push %lf ms",
		   &tr, &step, &max, &loss, &rate, &pull, &comp, &push) == 8) {
		r->pull_ms += pull;
		r->comp_ms += comp;
		r->push_ms += push;
		r->nlog++;
		r->last_loss = loss;
		/* distributed: "  net N ms  hidden H ms (X%)" */
		if ((p = strstr(line, "  net ")) && sscanf(p, " net %lf ms hidden %lf ms", &net,
							     &hidden) != 2)
			net = hidden = NAN;
		if (label) {
			struct bench_json j;

			bench_json_begin(&j, "train_log");
			bench_json_str(&j, "run", label);
			bench_json_num(&j, "t_s", (rdps_now_ns() - t0) / 1e9);
			bench_json_num(&j, "train_s", rate > 0 ? step * pos_per_step / rate : NAN);
			bench_json_int(&j, "step", step);
			bench_json_num(&j, "loss", loss);
			bench_json_num(&j, "pos_per_s", rate);
			bench_json_num(&j, "pull_ms", pull);
			bench_json_num(&j, "compute_ms", comp);
			bench_json_num(&j, "push_ms", push);
			bench_json_num(&j, "net_ms", net);
			bench_json_num(&j, "hidden_ms", hidden);
			bench_json_end(&j);
		}
	} else if (sscanf(line, "[trainer %u] training done: %llu steps", &tr, &steps) == 2 &&
		   (p = strstr(line, " threads in ")) &&
		   sscanf(p, " threads in %lf s, %lf pos triples/s", &secs, &rate) == 2) {
		/* "... N steps (to step M) x T threads in S s, R pos triples/s":
		 * only the tail is parsed, so the middle may grow. */
		r->train_s = secs;
		r->pos_per_s = rate;
	} else if (sscanf(line, "[trainer %u] step split: sample %lf ms gather %lf ms kernel %lf ms "
			  "optimizer %lf ms network %lf ms net %lf ms hidden %lf ms (thread 0's mean "
			  "per step; pipeline %3[a-z])", &tr, &r->sample_ms, &r->gather_ms,
			  &r->kernel_ms, &r->optimizer_ms, &r->network_ms, &r->net_ms,
			  &r->hidden_ms, pipe) == 9) {
		r->have_split = true;
		r->pipeline = !strcmp(pipe, "on");
	} else if (sscanf(line, "Test average MRR : %lf", &v) == 1) {
		r->mrr = v;
		r->have_test = true;
	} else if (sscanf(line, "Test average MR : %lf", &v) == 1) {
		r->mr = v;
	} else if (sscanf(line, "Test average HITS@1 : %lf", &v) == 1) {
		r->h1 = v;
	} else if (sscanf(line, "Test average HITS@3 : %lf", &v) == 1) {
		r->h3 = v;
	} else if (sscanf(line, "Test average HITS@10 : %lf", &v) == 1) {
		r->h10 = v;
	}
}

static int parse_file(const char *path, struct train_run *r)
{
	FILE *f = fopen(path, "r");
	char line[1024];

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		parse_line(line, r, NULL, 0, 0);
	fclose(f);
	return 0;
}

/* Common model/training flags of rdps train, appended to argv at *n. */
struct argbuf {
	char s[24][32];
	int used;
};

static const char *num_arg(struct argbuf *ab, const char *fmt, double v)
{
	char *p = ab->s[ab->used++];

	snprintf(p, 32, fmt, v);
	return p;
}

static void add_train_args(const struct train_opts *o, uint64_t max_step, char **argv, int *n,
			   struct argbuf *ab)
{
	argv[(*n)++] = "--model_name";
	argv[(*n)++] = (char *)o->model;
	argv[(*n)++] = "--hidden_dim";
	argv[(*n)++] = (char *)num_arg(ab, "%.0f", (double)o->hidden_dim);
	argv[(*n)++] = "--gamma";
	argv[(*n)++] = (char *)num_arg(ab, "%g", o->gamma);
	argv[(*n)++] = "--batch_size";
	argv[(*n)++] = (char *)num_arg(ab, "%.0f", (double)o->batch);
	argv[(*n)++] = "--neg_sample_size";
	argv[(*n)++] = (char *)num_arg(ab, "%.0f", (double)o->neg);
	argv[(*n)++] = "--max_step";
	argv[(*n)++] = (char *)num_arg(ab, "%.0f", (double)max_step);
	argv[(*n)++] = "--log_interval";
	argv[(*n)++] = (char *)num_arg(ab, "%.0f", (double)o->log_interval);
	if (o->adv)
		argv[(*n)++] = "-adv";
	if (o->no_pipeline)
		argv[(*n)++] = "--no_pipeline";
}

/* One standalone run; label != NULL emits its progress lines. */
static int run_standalone(const struct train_opts *o, const char *data, uint64_t max_step,
			  bool test, const char *label, struct train_run *r)
{
	char *argv[64];
	struct argbuf ab = { .used = 0 };
	struct bench_child c;
	char line[1024];
	uint64_t t0;
	int n = 0, ret;

	memset(r, 0, sizeof(*r));
	argv[n++] = "rdps";
	argv[n++] = "train";
	argv[n++] = "--data";
	argv[n++] = (char *)data;
	argv[n++] = "--standalone";
	argv[n++] = "--num_thread";
	argv[n++] = (char *)num_arg(&ab, "%.0f", (double)o->threads);
	argv[n++] = "--lr";
	argv[n++] = (char *)num_arg(&ab, "%g", o->lr);
	add_train_args(o, max_step, argv, &n, &ab);
	if (test)
		argv[n++] = "--test";
	argv[n] = NULL;
	t0 = rdps_now_ns();
	ret = bench_child_start(argv, NULL, false, true, &c);
	if (ret)
		return ret;
	while (fgets(line, sizeof(line), c.out))
		parse_line(line, r, label, t0, (double)(o->batch * o->threads));
	ret = bench_child_wait(&c);
	if (ret) {
		fprintf(stderr, "rdps bench train: rdps train --standalone exited %d "
			"(run it by hand to see why)\n", ret);
		return -EIO;
	}
	return 0;
}

static int run_distributed(const struct train_opts *o, const char *data, struct train_run *r0,
			   struct train_run *r1)
{
	struct rdps_partition_opts po;
	struct rdps_partition_result pres;
	struct bench_child srv[2] = { { -1, NULL }, { -1, NULL } }, tr[2] = { { -1, NULL }, { -1, NULL } };
	char pdir[4096], ipc[4096], log[4096], err[1024], line[1024];
	struct argbuf ab[4];
	uint16_t port = bench_pick_port(o->port, 2);
	FILE *f;
	uint64_t t0;
	int ret = 0;

	memset(r0, 0, sizeof(*r0));
	memset(r1, 0, sizeof(*r1));
	snprintf(pdir, sizeof(pdir), "%s/part2", o->workdir);
	po = (struct rdps_partition_opts){ .data_dir = data, .out_dir = pdir, .k = 2,
					   .method = RDPS_PARTITION_METIS, .force = 1 };
	ret = rdps_partition_build(&po, &pres, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench train: partition: %s\n", err);
		return ret;
	}
	snprintf(ipc, sizeof(ipc), "%s/ip_config.txt", o->workdir);
	f = fopen(ipc, "w");
	if (!f)
		return -errno;
	fprintf(f, "127.0.0.1 %u 2\n", port);
	fclose(f);
	for (int s = 0; s < 2; s++) {
		char *argv[48];
		int n = 0;

		ab[s].used = 0;
		argv[n++] = "rdps";
		argv[n++] = "server";
		argv[n++] = "--ip_config";
		argv[n++] = ipc;
		argv[n++] = "--server_id";
		argv[n++] = (char *)num_arg(&ab[s], "%.0f", s);
		argv[n++] = "--partition";
		argv[n++] = pdir;
		argv[n++] = "--transport";
		argv[n++] = "tcp";
		argv[n++] = "--model_name";
		argv[n++] = (char *)o->model;
		argv[n++] = "--hidden_dim";
		argv[n++] = (char *)num_arg(&ab[s], "%.0f", (double)o->hidden_dim);
		argv[n++] = "--gamma";
		argv[n++] = (char *)num_arg(&ab[s], "%g", o->gamma);
		argv[n++] = "--lr";
		argv[n++] = (char *)num_arg(&ab[s], "%g", o->lr);
		argv[n++] = "--quiet";
		argv[n] = NULL;
		snprintf(log, sizeof(log), "%s/server-%d.log", o->workdir, s);
		ret = bench_child_start(argv, log, true, false, &srv[s]);
		if (ret)
			goto out;
	}
	t0 = rdps_now_ns();
	for (int t = 0; t < 2; t++) {
		char *argv[64];
		int n = 0;

		ab[2 + t].used = 0;
		argv[n++] = "rdps";
		argv[n++] = "train";
		argv[n++] = "--data";
		argv[n++] = (char *)data;
		argv[n++] = "--partition";
		argv[n++] = pdir;
		argv[n++] = "--ip_config";
		argv[n++] = ipc;
		argv[n++] = "--transport";
		argv[n++] = "tcp";
		argv[n++] = "--num_trainers";
		argv[n++] = "2";
		argv[n++] = "--rank";
		argv[n++] = t ? "1" : "0";
		argv[n++] = "--num_thread";
		argv[n++] = (char *)num_arg(&ab[2 + t], "%.0f", (double)o->trainer_threads);
		add_train_args(o, o->max_step, argv, &n, &ab[2 + t]);
		argv[n] = NULL;
		snprintf(log, sizeof(log), "%s/trainer-1.log", o->workdir);
		ret = bench_child_start(argv, t ? log : NULL, false, true, &tr[t]);
		if (ret)
			goto out;
	}
	while (fgets(line, sizeof(line), tr[0].out))
		parse_line(line, r0, "distributed", t0, (double)(o->batch * o->trainer_threads));
	for (int t = 0; t < 2; t++) {
		int st = bench_child_wait(&tr[t]);

		if (st && !ret) {
			fprintf(stderr, "rdps bench train: trainer %d exited %d\n", t, st);
			ret = -EIO;
		}
	}
	if (!ret)
		ret = parse_file(log, r1);
out:
	/* Trainer 0 shuts the servers down at the end; on failure, we do. */
	for (int t = 0; t < 2; t++)
		if (tr[t].pid > 0)
			bench_child_kill(&tr[t]);
	for (int s = 0; s < 2; s++) {
		if (srv[s].pid <= 0)
			continue;
		if (ret)
			bench_child_kill(&srv[s]);
		else
			bench_child_wait(&srv[s]);
	}
	return ret;
}

/* The fields of a "train" line every mode has; the caller adds its
 * comparison and ends the line. */
static void train_json(struct bench_json *j, const char *mode, const struct train_opts *o,
		       uint32_t trainers, uint64_t threads, double pos_per_s,
		       const struct train_run *r)
{
	double tot = r->pull_ms + r->comp_ms + r->push_ms;

	bench_json_begin(j, "train");
	bench_json_str(j, "mode", mode);
	bench_json_str(j, "model", o->model);
	bench_json_int(j, "hidden_dim", o->hidden_dim);
	bench_json_int(j, "batch", o->batch);
	bench_json_int(j, "neg", o->neg);
	bench_json_int(j, "trainers", trainers);
	bench_json_int(j, "threads", threads);
	bench_json_num(j, "train_s", r->train_s);
	bench_json_num(j, "pos_per_s", pos_per_s);
	bench_json_num(j, "pos_per_s_per_trainer", pos_per_s / trainers);
	bench_json_num(j, "pos_per_s_per_thread", pos_per_s / (double)threads);
	bench_json_num(j, "pull_share", tot > 0 ? r->pull_ms / tot : NAN);
	bench_json_num(j, "compute_share", tot > 0 ? r->comp_ms / tot : NAN);
	bench_json_num(j, "push_share", tot > 0 ? r->push_ms / tot : NAN);
	bench_json_num(j, "step_ms", r->nlog ? tot / r->nlog : NAN);
	/* trainer 0's thread 0, mean per step over the run (NAN: no split line) */
	bench_json_bool(j, "pipeline", r->have_split ? r->pipeline : !o->no_pipeline);
	bench_json_num(j, "step_sample_ms", r->have_split ? r->sample_ms : NAN);
	bench_json_num(j, "step_gather_ms", r->have_split ? r->gather_ms : NAN);
	bench_json_num(j, "step_kernel_ms", r->have_split ? r->kernel_ms : NAN);
	bench_json_num(j, "step_optimizer_ms", r->have_split ? r->optimizer_ms : NAN);
	bench_json_num(j, "step_network_ms", r->have_split ? r->network_ms : NAN);
	bench_json_num(j, "step_net_ms", r->have_split ? r->net_ms : NAN);
	bench_json_num(j, "step_hidden_ms", r->have_split ? r->hidden_ms : NAN);
	bench_json_num(j, "hidden_share", r->have_split && r->net_ms > 0 ? r->hidden_ms / r->net_ms
									 : NAN);
}

static void train_row(const char *mode, uint32_t trainers, uint64_t threads, double pos_per_s,
		      const struct train_run *r, const char *vs, double ratio)
{
	double tot = r->pull_ms + r->comp_ms + r->push_ms;

	bench_table_row("%-12s %8u %7llu %12.0f %12.0f %8.1f %8.1f %8.1f %9.2f  %s %.2f", mode,
			trainers, (unsigned long long)threads, pos_per_s,
			pos_per_s / (double)threads, tot > 0 ? 100 * r->pull_ms / tot : NAN,
			tot > 0 ? 100 * r->comp_ms / tot : NAN, tot > 0 ? 100 * r->push_ms / tot : NAN,
			r->nlog ? tot / r->nlog : NAN, vs, ratio);
}

/* One trainer's "step split" line as a train_split line: where thread 0's
 * mean step went; kernel_pos_per_s is the batch over the step's kernel time
 * (the kernel's rate inside the job). */
static void emit_split(const char *mode, uint32_t trainer, const struct train_opts *o,
		       const struct train_run *r)
{
	double step = r->sample_ms + r->gather_ms + r->kernel_ms + r->optimizer_ms + r->network_ms;
	struct bench_json j;

	if (!r->have_split)
		return;
	bench_json_begin(&j, "train_split");
	bench_json_str(&j, "mode", mode);
	bench_json_int(&j, "trainer", trainer);
	bench_json_bool(&j, "pipeline", r->pipeline);
	bench_json_num(&j, "sample_ms", r->sample_ms);
	bench_json_num(&j, "gather_ms", r->gather_ms);
	bench_json_num(&j, "kernel_ms", r->kernel_ms);
	bench_json_num(&j, "optimizer_ms", r->optimizer_ms);
	bench_json_num(&j, "network_ms", r->network_ms);
	bench_json_num(&j, "step_ms", step);
	bench_json_num(&j, "net_ms", r->net_ms);
	bench_json_num(&j, "hidden_ms", r->hidden_ms);
	bench_json_num(&j, "hidden_share", r->net_ms > 0 ? r->hidden_ms / r->net_ms : NAN);
	bench_json_num(&j, "kernel_pos_per_s", r->kernel_ms > 0 ? o->batch / (r->kernel_ms / 1e3)
								: NAN);
	bench_json_end(&j);
	bench_table_row("%-12s %7u %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f | %8.3f %8.3f %7.1f%%", mode,
			trainer, r->sample_ms, r->gather_ms, r->kernel_ms, r->optimizer_ms,
			r->network_ms, step, r->net_ms, r->hidden_ms,
			r->net_ms > 0 ? 100 * r->hidden_ms / r->net_ms : NAN);
}

/* The core's peak FMA rate on the kernels' unit, measured before and after
 * the kernels (the best of both: a 2-core machine shared with others only
 * ever lowers it); NAN if not measurable here. */
static double fma_peak(const struct train_opts *o, struct bench_fma *best)
{
	double round = o->kernel_seconds / 10;
	struct bench_fma f;

	round = round < 0.002 ? 0.002 : round > 0.2 ? 0.2 : round;
	if (bench_fma_peak(bench_fma_kernel_isa(), round, 5, &f))
		return NAN;
	if (!best->isa || f.gflop_per_s > best->gflop_per_s) {
		f.rounds += best->rounds;
		*best = f;
	} else {
		best->rounds += f.rounds;
	}
	return best->gflop_per_s;
}

/* Every model of --kernel-models: rate per thread and, where counted, its
 * GFLOP/s against the peak. *ref gets the rate of --model_name if its
 * kernel ran at the training's dim, neg and batch (else stays NAN). */
static int kernel_phase(const struct train_opts *o, double *ref)
{
	char tmp[256], err[1024], *save = NULL, *tok;
	struct bench_fma peak = { 0 };
	struct {
		char model[32];
		double rate, flops;
	} k[16];
	int nk = 0, ret;

	fma_peak(o, &peak);
	snprintf(tmp, sizeof(tmp), "%s", o->kernel_models);
	for (tok = strtok_r(tmp, ",", &save); tok && nk < 16; tok = strtok_r(NULL, ",", &save)) {
		uint64_t width = 0;

		ret = kernel_rate(o, tok, &k[nk].rate, &width, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench train: %s\n", err);
			return ret;
		}
		snprintf(k[nk].model, sizeof(k[nk].model), "%s", tok);
		k[nk].flops = kernel_flops_per_pos(tok, o->kernel_neg, width);
		if (!strcasecmp(tok, o->model) && o->kernel_dim == o->hidden_dim &&
		    o->kernel_neg == o->neg && o->kernel_batch == o->batch)
			*ref = k[nk].rate;
		nk++;
	}
	fma_peak(o, &peak);

	bench_table_title("peak FMA rate, one thread (GFLOP/s; the kernels' unit: %s)",
			  bench_fma_kernel_isa());
	bench_table_row("%-9s %5s %7s %12s %12s  %s", "isa", "bits", "chains", "best", "median",
			"kernels' unit");
	if (peak.isa)
		bench_fma_emit(&peak);
	bench_table_title("model kernel, one thread: rdps_model_step, hidden_dim %llu, neg %llu, "
			  "batch %llu (goal %.0f pos/s per core; GFLOP/s: 6 x neg x row width "
			  "per positive)", (unsigned long long)o->kernel_dim,
			  (unsigned long long)o->kernel_neg, (unsigned long long)o->kernel_batch,
			  KERNEL_GOAL);
	bench_table_row("%-10s %12s %8s %12s %9s %9s", "model", "pos/s", "x goal", "flops/pos",
			"GFLOP/s", "x peak");
	for (int i = 0; i < nk; i++) {
		double gf = k[i].flops > 0 ? k[i].rate * k[i].flops / 1e9 : NAN;
		double pk = peak.isa ? peak.gflop_per_s : NAN;
		struct bench_json j;

		bench_json_begin(&j, "kernel");
		bench_json_str(&j, "model", k[i].model);
		bench_json_int(&j, "hidden_dim", o->kernel_dim);
		bench_json_int(&j, "neg", o->kernel_neg);
		bench_json_int(&j, "batch", o->kernel_batch);
		bench_json_int(&j, "threads", 1);
		bench_json_num(&j, "pos_per_s", k[i].rate);
		bench_json_num(&j, "goal_pos_per_s", KERNEL_GOAL);
		bench_json_num(&j, "ratio", k[i].rate / KERNEL_GOAL);
		bench_json_bool(&j, "goal_met", k[i].rate >= KERNEL_GOAL);
		bench_json_num(&j, "flops_per_pos", k[i].flops > 0 ? k[i].flops : NAN);
		bench_json_num(&j, "gflop_per_s", gf);
		bench_json_str(&j, "fma_isa", peak.isa ? peak.isa : "none");
		bench_json_num(&j, "fma_peak_gflop_per_s", pk);
		bench_json_num(&j, "vs_fma_peak", bench_ratio(gf, pk));
		bench_json_end(&j);
		bench_table_row("%-10s %12.0f %8.2f %12.0f %9.1f %9.2f", k[i].model, k[i].rate,
				k[i].rate / KERNEL_GOAL, k[i].flops, gf, bench_ratio(gf, pk));
	}
	return 0;
}

/* Standalone with o->threads threads, then 2 trainers of
 * o->trainer_threads each; standalone per thread against the kernel's rate
 * (kernel_ref), distributed against standalone when the totals match. */
static int train_phases(const struct train_opts *o, const char *data, double kernel_ref)
{
	uint64_t dthreads = 2 * o->trainer_threads;
	double standalone = NAN;
	struct train_run r, r0, r1;
	struct bench_json j;
	int ret;

	bench_table_title("training, %s dim %llu batch %llu neg %llu, %llu steps (shares of pull/compute/push in %%; "
			  "standalone per thread vs the kernel, distributed vs standalone)",
			  o->model, (unsigned long long)o->hidden_dim, (unsigned long long)o->batch,
			  (unsigned long long)o->neg, (unsigned long long)o->max_step);
	bench_table_row("%-12s %8s %7s %12s %12s %8s %8s %8s %9s  %s", "mode", "trainers", "threads",
			"pos/s", "pos/s/thread", "pull%", "compute%", "push%", "step ms", "ratio");
	memset(&r, 0, sizeof(r));
	memset(&r0, 0, sizeof(r0));
	memset(&r1, 0, sizeof(r1));
	if (o->ph_standalone) {
		double per_thread;

		ret = run_standalone(o, data, o->max_step, false, "standalone", &r);
		if (ret)
			return ret;
		per_thread = r.pos_per_s / (double)o->threads;
		if (o->threads == dthreads)
			standalone = r.pos_per_s;
		train_json(&j, "standalone", o, 1, o->threads, r.pos_per_s, &r);
		bench_json_num(&j, "kernel_pos_per_s", kernel_ref);
		bench_json_num(&j, "vs_kernel", bench_ratio(per_thread, kernel_ref));
		bench_json_end(&j);
		train_row("standalone", 1, o->threads, r.pos_per_s, &r, "per thread / kernel",
			  bench_ratio(per_thread, kernel_ref));
	}
	if (o->ph_distributed) {
		double pos;

		if (o->ph_standalone && o->threads != dthreads)
			fprintf(stderr, "rdps bench train: standalone ran %llu threads, the distributed "
				"trainers %llu in all: no ratio\n", (unsigned long long)o->threads,
				(unsigned long long)dthreads);
		ret = run_distributed(o, data, &r0, &r1);
		if (ret)
			return ret;
		pos = r0.pos_per_s + r1.pos_per_s;
		train_json(&j, "distributed", o, 2, dthreads, pos, &r0);
		bench_json_num(&j, "standalone_pos_per_s", standalone);
		bench_json_num(&j, "vs_standalone", bench_ratio(pos, standalone));
		bench_json_end(&j);
		train_row("distributed", 2, dthreads, pos, &r0, "/ standalone",
			  bench_ratio(pos, standalone));
	}
	bench_table_title("step split, thread 0's mean step (ms; network: blocked in pulls and "
			  "pushes; net: the step's network time; hidden: net - network)");
	bench_table_row("%-12s %7s %8s %8s %8s %8s %8s %8s | %8s %8s %8s", "mode", "trainer",
			"sample", "gather", "kernel", "optim", "network", "step", "net", "hidden",
			"hidden%");
	emit_split("standalone", 0, o, &r);
	emit_split("distributed", 0, o, &r0);
	emit_split("distributed", 1, o, &r1);
	return 0;
}

int rdps_bench_train(int argc, char **argv)
{
	enum { O_DATA = 256, O_WORKDIR, O_PHASES, O_MODEL, O_DIM, O_GAMMA, O_LR, O_ADV, O_BATCH,
	       O_NEG, O_STEPS, O_LOGI, O_THREADS, O_CURVE, O_KMODELS, O_KDIM, O_KNEG, O_KBATCH,
	       O_KSECS, O_PORT, O_SENT, O_STRI, O_NOPIPE, O_TTHREADS };
	static const struct option lopts[] = {
		{ "data", required_argument, NULL, O_DATA },
		{ "workdir", required_argument, NULL, O_WORKDIR },
		{ "phases", required_argument, NULL, O_PHASES },
		{ "model_name", required_argument, NULL, O_MODEL },
		{ "hidden_dim", required_argument, NULL, O_DIM },
		{ "gamma", required_argument, NULL, O_GAMMA },
		{ "lr", required_argument, NULL, O_LR },
		{ "adv", no_argument, NULL, O_ADV },
		{ "no_pipeline", no_argument, NULL, O_NOPIPE },
		{ "batch_size", required_argument, NULL, O_BATCH },
		{ "neg_sample_size", required_argument, NULL, O_NEG },
		{ "max_step", required_argument, NULL, O_STEPS },
		{ "log_interval", required_argument, NULL, O_LOGI },
		{ "num_thread", required_argument, NULL, O_THREADS },
		{ "trainer_threads", required_argument, NULL, O_TTHREADS },
		{ "curve-steps", required_argument, NULL, O_CURVE },
		{ "kernel-models", required_argument, NULL, O_KMODELS },
		{ "kernel-dim", required_argument, NULL, O_KDIM },
		{ "kernel-neg", required_argument, NULL, O_KNEG },
		{ "kernel-batch", required_argument, NULL, O_KBATCH },
		{ "kernel-seconds", required_argument, NULL, O_KSECS },
		{ "port", required_argument, NULL, O_PORT },
		{ "synth-entities", required_argument, NULL, O_SENT },
		{ "synth-triples", required_argument, NULL, O_STRI },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct train_opts o = {
		.workdir = "/tmp/rdps-bench-train", .model = "TransE_l2", .hidden_dim = 400,
		.batch = 1024, .neg = 256, .max_step = 1000, .log_interval = 100, .threads = 0,
		.trainer_threads = 1,
		.gamma = 12, .lr = 0.1, .ph_kernel = true, .ph_standalone = true,
		.ph_distributed = true, .curve_steps = { 500, 1000, 2000 }, .ncurve = 3,
		.kernel_models = "TransE_l1,TransE_l2,DistMult,ComplEx,RotatE,RESCAL,TransR,SimplE",
		.kernel_dim = 400, .kernel_neg = 200, .kernel_batch = 1024, .kernel_seconds = 2,
		.synth_entities = 20000, .synth_triples = 400000,
	};
	char data[4096], err[1024];
	double kernel_ref = NAN;
	uint64_t v;
	int opt, li = 0, ret;

	optind = 1;
	while ((opt = getopt_long_only(argc, argv, "", lopts, &li)) != -1) {
		switch (opt) {
		case O_DATA: o.data = optarg; break;
		case O_WORKDIR: o.workdir = optarg; break;
		case O_PHASES: {
			char tmp[128], *save = NULL, *tok;

			snprintf(tmp, sizeof(tmp), "%s", optarg);
			o.ph_kernel = o.ph_standalone = o.ph_distributed = o.ph_curve = false;
			for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (!strcmp(tok, "kernel"))
					o.ph_kernel = true;
				else if (!strcmp(tok, "standalone"))
					o.ph_standalone = true;
				else if (!strcmp(tok, "distributed"))
					o.ph_distributed = true;
				else if (!strcmp(tok, "curve"))
					o.ph_curve = true;
				else
					goto bad;
			}
			break;
		}
		case O_MODEL: o.model = optarg; break;
		case O_DIM: if (bench_parse_u64(optarg, 1, 65536, &o.hidden_dim)) goto bad; break;
		case O_GAMMA: if (bench_parse_double(optarg, -1e9, 1e9, &o.gamma)) goto bad; break;
		case O_LR: if (bench_parse_double(optarg, 0, 1e9, &o.lr)) goto bad; break;
		case O_ADV: o.adv = true; break;
		case O_NOPIPE: o.no_pipeline = true; break;
		case O_BATCH: if (bench_parse_u64(optarg, 1, 1 << 20, &o.batch)) goto bad; break;
		case O_NEG: if (bench_parse_u64(optarg, 1, 1 << 20, &o.neg)) goto bad; break;
		case O_STEPS: if (bench_parse_u64(optarg, 1, 1ull << 40, &o.max_step)) goto bad; break;
		case O_LOGI: if (bench_parse_u64(optarg, 1, 1ull << 40, &o.log_interval)) goto bad; break;
		case O_THREADS: if (bench_parse_u64(optarg, 1, 256, &o.threads)) goto bad; break;
		case O_TTHREADS: if (bench_parse_u64(optarg, 1, 128, &o.trainer_threads)) goto bad; break;
		case O_CURVE:
			if ((o.ncurve = bench_parse_list(optarg, o.curve_steps, MAX_LIST)) < 0)
				goto bad;
			break;
		case O_KMODELS: o.kernel_models = optarg; break;
		case O_KDIM: if (bench_parse_u64(optarg, 2, 4096, &o.kernel_dim)) goto bad; break;
		case O_KNEG: if (bench_parse_u64(optarg, 1, 1 << 16, &o.kernel_neg)) goto bad; break;
		case O_KBATCH: if (bench_parse_u64(optarg, 1, 1 << 16, &o.kernel_batch)) goto bad; break;
		case O_KSECS: if (bench_parse_double(optarg, 0.001, 3600, &o.kernel_seconds)) goto bad; break;
		case O_PORT:
			if (bench_parse_u64(optarg, 1, 65000, &v))
				goto bad;
			o.port = (uint16_t)v;
			break;
		case O_SENT: if (bench_parse_u64(optarg, 2, UINT32_MAX, &o.synth_entities)) goto bad; break;
		case O_STRI: if (bench_parse_u64(optarg, 2, 1ull << 36, &o.synth_triples)) goto bad; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench train: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	if (!o.threads)
		o.threads = 2 * o.trainer_threads;
	if (o.ph_kernel && kernel_phase(&o, &kernel_ref))
		return 1;
	if (!o.ph_standalone && !o.ph_distributed && !o.ph_curve)
		return 0;

	if (mkdir(o.workdir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rdps bench train: cannot create %s: %s\n", o.workdir, strerror(errno));
		return 1;
	}
	if (o.data) {
		snprintf(data, sizeof(data), "%s", o.data);
	} else {
		struct rdps_synth_opts so;
		struct rdps_dataset_stats st;

		snprintf(data, sizeof(data), "%s/synth", o.workdir);
		rdps_dataset_synth_defaults(&so);
		so.num_entities = o.synth_entities;
		so.num_triples = o.synth_triples;
		so.num_relations = 16;
		so.num_communities = 16;
		so.num_valid = so.num_test = 1000;
		so.seed = 1;
		so.force = 1;
		ret = rdps_dataset_synth(data, &so, &st, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench train: synth: %s\n", err);
			return 1;
		}
	}

	if ((o.ph_standalone || o.ph_distributed) && train_phases(&o, data, kernel_ref))
		return 1;
	if (o.ph_curve) {
		bench_table_title("training curve: standalone runs of increasing length, test MRR at the end of each");
		bench_table_row("%8s %9s %10s %8s %8s %8s", "steps", "train s", "last loss", "MRR",
				"MR", "Hits@10");
		for (int i = 0; i < o.ncurve; i++) {
			struct train_run r;
			struct bench_json j;
			char label[32];

			snprintf(label, sizeof(label), "curve-%llu", (unsigned long long)o.curve_steps[i]);
			ret = run_standalone(&o, data, o.curve_steps[i], true, label, &r);
			if (ret)
				return 1;
			bench_json_begin(&j, "train_eval");
			bench_json_str(&j, "model", o.model);
			bench_json_int(&j, "hidden_dim", o.hidden_dim);
			bench_json_int(&j, "steps", o.curve_steps[i]);
			bench_json_num(&j, "train_s", r.train_s);
			bench_json_num(&j, "pos_per_s", r.pos_per_s);
			bench_json_num(&j, "last_loss", r.last_loss);
			bench_json_num(&j, "mrr", r.have_test ? r.mrr : NAN);
			bench_json_num(&j, "mr", r.have_test ? r.mr : NAN);
			bench_json_num(&j, "hits1", r.have_test ? r.h1 : NAN);
			bench_json_num(&j, "hits3", r.have_test ? r.h3 : NAN);
			bench_json_num(&j, "hits10", r.have_test ? r.h10 : NAN);
			bench_json_end(&j);
			bench_table_row("%8llu %9.1f %10.4f %8.4f %8.1f %8.4f",
					(unsigned long long)o.curve_steps[i], r.train_s, r.last_loss,
					r.mrr, r.mr, r.h10);
		}
	}
	return 0;
bad:
	fprintf(stderr, "rdps bench train: bad value '%s' for --%s (see --help)\n",
		optarg ? optarg : "", lopts[li].name);
	return 2;
}
