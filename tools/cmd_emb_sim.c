// SPDX-License-Identifier: MIT
/* rdps emb_sim: DGL-KE's dglke_emb_sim on a saved embedding table. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "infer.h"
#include "rdps/common.h"
#include "rdps/saved.h"
#include "rdps/trainer.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps emb_sim --emb_file FILE.npy --format FMT [--data_files FILE...] [options]\n"
"\n"
"DGL-KE's dglke_emb_sim: the most similar pairs of rows of an embedding table (a saved\n"
"<dataset>_<model>_entity.npy or _relation.npy), written best first as DGL-KE's file: a\n"
"line \"left<TAB>right<TAB>score\", then one line per pair.\n"
"\n"
"  --emb_file FILE            the table (2-D float32 .npy)\n"
"  --format FMT               l_r: left and right from two list files; l_*: left from a\n"
"                             list, right every row; *_r: the reverse; *: every row on\n"
"                             both sides (a row is compared with itself too)\n"
"  --data_files FILE...       the lists, one item a line\n"
"  --raw_data                 the lists hold names (looked up in --mfile), and the output\n"
"                             too; without it, row ids\n"
"  --mfile FILE               id<TAB>name map of the table's rows (entities.dict or\n"
"                             relations.dict of the save path)\n"
"  --exec_mode MODE           all (default): top K of every (left, right) pair;\n"
"                             pairwise: the lists pair up (same lengths), top K of those;\n"
"                             batch_left: a top K for each left item\n"
"  --topK K                   results (per left item) (default 10)\n"
"  --sim_func F               cosine (default): x.y / (|x| |y|); l2: -|x - y|_2; l1:\n"
"                             -|x - y|_1; dot: x.y; ext_jaccard: x.y / (|x|^2 + |y|^2 - x.y)\n"
"                             (distances negated, as DGL-KE: higher is more similar)\n"
"  --output FILE              where the result goes (default result.tsv)\n"
"  -h, --help                 this text\n"
"\n"
"Equal scores keep the lower (left, right) index first. --gpu is refused: rdps runs on\n"
"CPUs.\n");
}

enum sim { S_COSINE, S_L2, S_L1, S_DOT, S_JACCARD };
enum mode { M_ALL, M_PAIRWISE, M_BLEFT };

struct sim_job {
	const float *emb;
	uint64_t dim;
	enum sim f;
	const uint32_t *list[2]; /* left, right; NULL = every row */
	size_t n[2];
	const struct rdps_idmap *map; /* names out, or NULL */
	FILE *out;
};

static inline uint32_t at(const struct sim_job *j, int side, size_t i)
{
	return j->list[side] ? j->list[side][i] : (uint32_t)i;
}

static double sim(const struct sim_job *j, size_t i, size_t k)
{
	const float *x = j->emb + at(j, 0, i) * j->dim, *y = j->emb + at(j, 1, k) * j->dim;
	double dot = 0, xx = 0, yy = 0, d = 0;

	for (uint64_t c = 0; c < j->dim; c++) {
		double a = x[c], b = y[c];

		switch (j->f) {
		case S_L2: d += (a - b) * (a - b); break;
		case S_L1: d += fabs(a - b); break;
		default:
			dot += a * b;
			xx += a * a;
			yy += b * b;
			break;
		}
	}
	switch (j->f) {
	case S_COSINE: return dot / (sqrt(xx) * sqrt(yy));
	case S_L2: return -sqrt(d);
	case S_L1: return -d;
	case S_DOT: return dot;
	case S_JACCARD: return dot / (xx + yy - dot);
	}
	return NAN;
}

static void emit(const struct sim_job *j, size_t i, size_t k, double sc)
{
	uint32_t id[2] = { at(j, 0, i), at(j, 1, k) };
	char num[48];

	infer_repr_f32(sc, num, sizeof(num));
	for (int c = 0; c < 2; c++) {
		if (j->map)
			fprintf(j->out, "%s\t", rdps_idmap_name(j->map, id[c]));
		else
			fprintf(j->out, "%u\t", id[c]);
	}
	fprintf(j->out, "%s\n", num);
}

static void run(const struct sim_job *j, enum mode mode, struct infer_topk *tk)
{
	size_t nl = j->n[0], nr = j->n[1];

	switch (mode) {
	case M_PAIRWISE:
		for (size_t i = 0; i < nl; i++)
			infer_topk_push(tk, sim(j, i, i), i);
		for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
			emit(j, tk->items[q].idx, tk->items[q].idx, tk->items[q].score);
		break;
	case M_ALL:
		for (size_t i = 0; i < nl; i++)
			for (size_t k = 0; k < nr; k++)
				infer_topk_push(tk, sim(j, i, k), (uint64_t)i * nr + k);
		for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
			emit(j, tk->items[q].idx / nr, tk->items[q].idx % nr, tk->items[q].score);
		break;
	case M_BLEFT:
		for (size_t i = 0; i < nl; i++) {
			infer_topk_reset(tk);
			for (size_t k = 0; k < nr; k++)
				infer_topk_push(tk, sim(j, i, k), k);
			for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
				emit(j, i, tk->items[q].idx, tk->items[q].score);
		}
		break;
	}
}

int rdps_cmd_emb_sim(int argc, char **argv)
{
	enum { O_MFILE = 256, O_EMB, O_FORMAT, O_FILES, O_RAW, O_EXEC, O_TOPK, O_SIM, O_OUTPUT,
	       O_GPU, O_HELP };
	static const struct option opts[] = {
		{ "mfile", required_argument, NULL, O_MFILE },
		{ "emb_file", required_argument, NULL, O_EMB },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "data_files", required_argument, NULL, O_FILES },
		{ "raw_data", no_argument, NULL, O_RAW },
		{ "exec_mode", required_argument, NULL, O_EXEC },
		{ "topK", required_argument, NULL, O_TOPK },
		{ "topk", required_argument, NULL, O_TOPK },
		{ "sim_func", required_argument, NULL, O_SIM },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "gpu", required_argument, NULL, O_GPU },
		{ "help", no_argument, NULL, O_HELP },
		{ "h", no_argument, NULL, O_HELP },
		{ 0 },
	};
	static const char *const modes[] = { [M_ALL] = "all", [M_PAIRWISE] = "pairwise",
					     [M_BLEFT] = "batch_left" };
	static const char *const sims[] = { [S_COSINE] = "cosine", [S_L2] = "l2", [S_L1] = "l1",
					    [S_DOT] = "dot", [S_JACCARD] = "ext_jaccard" };
	static const char *const formats[] = { "l_r", "l_*", "*_r", "*" };
	const char *mfile = NULL, *emb_file = NULL, *format = NULL, *output = "result.tsv";
	const char *files[INFER_MAX_FILES];
	struct sim_job j = { .f = S_COSINE };
	struct rdps_idmap *map = NULL;
	uint32_t *lists[2] = { NULL, NULL };
	struct infer_topk tk = { 0 };
	float *emb = NULL;
	uint64_t rows = 0;
	enum mode mode = M_ALL;
	bool raw = false;
	char err[1024];
	long topk = 10;
	int opt, nfiles = 0, want, ret, rc = 1, k;

	optind = 1;
	while ((opt = getopt_long_only(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case O_MFILE: mfile = optarg; break;
		case O_EMB: emb_file = optarg; break;
		case O_FORMAT: format = optarg; break;
		case O_FILES:
			nfiles = infer_nargs("emb_sim", argc, argv, files);
			if (nfiles < 0)
				return 2;
			break;
		case O_RAW: raw = true; break;
		case O_EXEC:
			k = rdps_cli_choice("emb_sim", "--exec_mode", optarg, modes, RDPS_ARRAY_SIZE(modes));
			if (k < 0)
				return 2;
			mode = (enum mode)k;
			break;
		case O_TOPK:
			if (rdps_cli_long("emb_sim", "--topK", optarg, 1, 100000000, &topk))
				return 2;
			break;
		case O_SIM:
			k = rdps_cli_choice("emb_sim", "--sim_func", optarg, sims, RDPS_ARRAY_SIZE(sims));
			if (k < 0)
				return 2;
			j.f = (enum sim)k;
			break;
		case O_OUTPUT: output = optarg; break;
		case O_GPU:
			if (strcmp(optarg, "-1")) {
				fprintf(stderr, "rdps emb_sim: --gpu %s: rdps runs on CPUs\n", optarg);
				return 2;
			}
			break;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps emb_sim: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!emb_file || !format) {
		fprintf(stderr, "rdps emb_sim: --emb_file FILE and --format FMT are required\n");
		return 2;
	}
	if (rdps_cli_choice("emb_sim", "--format", format, formats, RDPS_ARRAY_SIZE(formats)) < 0)
		return 2;
	want = !strcmp(format, "l_r") ? 2 : !strcmp(format, "*") ? 0 : 1;
	if (nfiles != want) {
		fprintf(stderr, "rdps emb_sim: --format %s needs %d list file%s in --data_files (%d "
			"given)\n", format, want, want == 1 ? "" : "s", nfiles);
		return 2;
	}
	if (raw && !mfile) {
		fprintf(stderr, "rdps emb_sim: --raw_data needs --mfile (the id<TAB>name map of "
			"the table's rows)\n");
		return 2;
	}
	ret = rdps_npy_read_f32(emb_file, &emb, &rows, &j.dim);
	if (ret) {
		fprintf(stderr, "rdps emb_sim: %s: %s\n", emb_file,
			ret == -EINVAL ? "not a 2-D little-endian float32 C-order .npy"
				       : strerror(-ret));
		return 1;
	}
	if (!rows || !j.dim || rows > UINT32_MAX) {
		fprintf(stderr, "rdps emb_sim: %s has shape (%llu, %llu)\n", emb_file,
			(unsigned long long)rows, (unsigned long long)j.dim);
		goto out;
	}
	j.emb = emb;
	if (mfile) {
		if (rdps_idmap_load(mfile, '\t', &map, err, sizeof(err))) {
			fprintf(stderr, "rdps emb_sim: %s\n", err);
			goto out;
		}
		if (rdps_idmap_count(map) != rows) {
			fprintf(stderr, "rdps emb_sim: --mfile %s has %u names but %s has %llu rows\n",
				mfile, rdps_idmap_count(map), emb_file, (unsigned long long)rows);
			goto out;
		}
	}
	if (raw)
		j.map = map;
	for (int side = 0, f = 0; side < 2; side++) {
		bool listed = side ? !strcmp(format, "l_r") || !strcmp(format, "*_r")
				   : format[0] == 'l';

		j.n[side] = rows;
		if (!listed)
			continue;
		if (rdps_id_list_read(files[f++], j.map, (uint32_t)rows, "row", &lists[side],
				      &j.n[side], err, sizeof(err)) < 0) {
			fprintf(stderr, "rdps emb_sim: %s\n", err);
			goto out;
		}
		j.list[side] = lists[side];
	}
	if (mode == M_PAIRWISE && j.n[0] != j.n[1]) {
		fprintf(stderr, "rdps emb_sim: --exec_mode pairwise needs as many left as right "
			"items (%zu, %zu)\n", j.n[0], j.n[1]);
		goto out;
	}
	j.out = infer_output_open("emb_sim", output, "left\tright\tscore\n");
	if (!j.out)
		goto out;
	if (infer_topk_init(&tk, (size_t)topk)) {
		fprintf(stderr, "rdps emb_sim: out of memory for --topK %ld\n", topk);
		goto out;
	}
	run(&j, mode, &tk);
	rc = 0;
out:
	if (infer_output_close("emb_sim", output, j.out))
		rc = 1;
	else if (!rc)
		infer_done(output);
	infer_topk_free(&tk);
	free(lists[0]);
	free(lists[1]);
	rdps_idmap_destroy(map);
	free(emb);
	return rc;
}
