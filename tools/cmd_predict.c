// SPDX-License-Identifier: MIT
/* rdps predict: DGL-KE's dglke_predict on the embeddings of a save path. */
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
"usage: rdps predict --model_path DIR --format FMT --data_files FILE... [options]\n"
"\n"
"DGL-KE's dglke_predict: scores (head, relation, tail) triples with the embeddings saved\n"
"in DIR (by rdps train --save_path, or dglke_train) and writes the top K, best first,\n"
"as DGL-KE's file: a line \"head<TAB>rel<TAB>tail<TAB>score\", then one line per triple.\n"
"\n"
"  --model_path DIR           config.json, the .npy tables and (rdps) the dicts\n"
"  --format FMT               which of head, relation, tail come from a list file (h, r,\n"
"                             t) and which are every entity / relation (*): h_r_t,\n"
"                             h_r_*, h_*_t, *_r_t, h_*_*, *_r_*, *_*_t\n"
"  --data_files FILE...       the lists, in h, r, t order, one item a line\n"
"  --raw_data                 the lists hold names, and the output too; without it, ids\n"
"  --entity_mfile FILE        entity id<TAB>name map (default DIR/entities.dict)\n"
"  --rel_mfile FILE           relation map (default DIR/relations.dict)\n"
"  --exec_mode MODE           all (default): top K of every combination of the lists;\n"
"                             triplet_wise: the lists are N triples (same lengths), top K\n"
"                             of them; batch_head / batch_rel / batch_tail: a top K for\n"
"                             each head / relation / tail\n"
"  --topK K                   results (per batch element) (default 10)\n"
"  --score_func F             none (default): the model's score without its margin (DGL-KE\n"
"                             scores with gamma 0: TransE -||h+r-t||, RotatE likewise);\n"
"                             logsigmoid: log(sigmoid(score)) with the trained gamma\n"
"  --output FILE              where the result goes (default result.tsv)\n"
"  -h, --help                 this text\n"
"\n"
"Equal scores keep the lower index of the combination (h, then r, then t) first.\n"
"RotatE keeps its trained rotation under --score_func none (DGL-KE's gamma 0 would also\n"
"rescale the phases). --gpu is refused: rdps scores on CPUs.\n");
}

enum mode { M_ALL, M_TRIPLET, M_BHEAD, M_BREL, M_BTAIL };

struct pred {
	const struct rdps_saved *s;
	const uint32_t *list[3]; /* h, r, t; NULL = every id */
	size_t n[3];
	const struct rdps_idmap *map[2]; /* entity, relation: names out; NULL: ids */
	bool logsig;
	double margin;          /* subtracted under score_func none */
	FILE *out;
};

static inline uint32_t at(const struct pred *p, int k, size_t i)
{
	return p->list[k] ? p->list[k][i] : (uint32_t)i;
}

static double score(const struct pred *p, size_t i, size_t j, size_t k)
{
	double x = rdps_saved_score(p->s, at(p, 0, i), at(p, 1, j), at(p, 2, k));

	if (!p->logsig)
		return x - p->margin;
	/* log(sigmoid(x)), without overflow on either side */
	return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

static void emit(const struct pred *p, size_t i, size_t j, size_t k, double sc)
{
	uint32_t id[3] = { at(p, 0, i), at(p, 1, j), at(p, 2, k) };
	char num[48];

	infer_repr_f32(sc, num, sizeof(num));
	for (int c = 0; c < 3; c++) {
		const struct rdps_idmap *m = p->map[c == 1];

		if (m)
			fprintf(p->out, "%s\t", rdps_idmap_name(m, id[c]));
		else
			fprintf(p->out, "%u\t", id[c]);
	}
	fprintf(p->out, "%s\n", num);
}

static void run(const struct pred *p, enum mode mode, struct infer_topk *tk)
{
	size_t nh = p->n[0], nr = p->n[1], nt = p->n[2];

	switch (mode) {
	case M_TRIPLET:
		for (size_t i = 0; i < nh; i++)
			infer_topk_push(tk, score(p, i, i, i), i);
		for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++) {
			size_t i = tk->items[q].idx;

			emit(p, i, i, i, tk->items[q].score);
		}
		break;
	case M_ALL:
		for (size_t i = 0; i < nh; i++)
			for (size_t j = 0; j < nr; j++)
				for (size_t k = 0; k < nt; k++)
					infer_topk_push(tk, score(p, i, j, k), ((uint64_t)i * nr + j) * nt + k);
		for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++) {
			uint64_t x = tk->items[q].idx;

			emit(p, x / nt / nr, x / nt % nr, x % nt, tk->items[q].score);
		}
		break;
	case M_BHEAD:
		for (size_t i = 0; i < nh; i++) {
			infer_topk_reset(tk);
			for (size_t j = 0; j < nr; j++)
				for (size_t k = 0; k < nt; k++)
					infer_topk_push(tk, score(p, i, j, k), (uint64_t)j * nt + k);
			for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
				emit(p, i, tk->items[q].idx / nt, tk->items[q].idx % nt,
				     tk->items[q].score);
		}
		break;
	case M_BREL:
		for (size_t j = 0; j < nr; j++) {
			infer_topk_reset(tk);
			for (size_t i = 0; i < nh; i++)
				for (size_t k = 0; k < nt; k++)
					infer_topk_push(tk, score(p, i, j, k), (uint64_t)i * nt + k);
			for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
				emit(p, tk->items[q].idx / nt, j, tk->items[q].idx % nt,
				     tk->items[q].score);
		}
		break;
	case M_BTAIL:
		for (size_t k = 0; k < nt; k++) {
			infer_topk_reset(tk);
			for (size_t i = 0; i < nh; i++)
				for (size_t j = 0; j < nr; j++)
					infer_topk_push(tk, score(p, i, j, k), (uint64_t)i * nr + j);
			for (size_t q = 0, c = infer_topk_sort(tk); q < c; q++)
				emit(p, tk->items[q].idx / nr, tk->items[q].idx % nr, k,
				     tk->items[q].score);
		}
		break;
	}
}

/* The margin DGL-KE's gamma 0 leaves out of the score ("gamma - dist"). */
static double margin_of(const struct rdps_model *m)
{
	static const char *const with_margin[] = { "TransE_l1", "TransE_l2", "RotatE", "TransR" };

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(with_margin); i++)
		if (!strcmp(rdps_model_name(m), with_margin[i]))
			return rdps_model_params(m)->gamma;
	return 0;
}

int rdps_cmd_predict(int argc, char **argv)
{
	enum { O_MODEL_PATH = 256, O_FORMAT, O_FILES, O_RAW, O_EXEC, O_TOPK, O_SCORE, O_OUTPUT,
	       O_EMAP, O_RMAP, O_DATA_PATH, O_GPU, O_HELP };
	static const struct option opts[] = {
		{ "model_path", required_argument, NULL, O_MODEL_PATH },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "data_files", required_argument, NULL, O_FILES },
		{ "raw_data", no_argument, NULL, O_RAW },
		{ "exec_mode", required_argument, NULL, O_EXEC },
		{ "topK", required_argument, NULL, O_TOPK },
		{ "topk", required_argument, NULL, O_TOPK },
		{ "score_func", required_argument, NULL, O_SCORE },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "entity_mfile", required_argument, NULL, O_EMAP },
		{ "rel_mfile", required_argument, NULL, O_RMAP },
		{ "data_path", required_argument, NULL, O_DATA_PATH },
		{ "gpu", required_argument, NULL, O_GPU },
		{ "help", no_argument, NULL, O_HELP },
		{ "h", no_argument, NULL, O_HELP },
		{ 0 },
	};
	static const char *const modes[] = { [M_ALL] = "all", [M_TRIPLET] = "triplet_wise",
					     [M_BHEAD] = "batch_head", [M_BREL] = "batch_rel",
					     [M_BTAIL] = "batch_tail" };
	static const char *const formats[] = { "h_r_t", "h_r_*", "h_*_t", "*_r_t",
					       "h_*_*", "*_r_*", "*_*_t" };
	const char *model_path = NULL, *format = NULL, *output = "result.tsv", *mfile[2] = { 0 };
	const char *files[INFER_MAX_FILES], *data_path = NULL;
	struct pred p = { 0 };
	struct rdps_idmap *own[2] = { NULL, NULL };
	uint32_t *lists[3] = { NULL, NULL, NULL };
	struct rdps_saved *s = NULL;
	struct infer_topk tk = { 0 };
	enum mode mode = M_ALL;
	bool raw = false;
	char err[1024];
	long topk = 10;
	int opt, nfiles = 0, want = 0, rc = 1, choice;

	optind = 1;
	while ((opt = getopt_long_only(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case O_MODEL_PATH: model_path = optarg; break;
		case O_FORMAT: format = optarg; break;
		case O_FILES:
			nfiles = infer_nargs("predict", argc, argv, files);
			if (nfiles < 0)
				return 2;
			break;
		case O_RAW: raw = true; break;
		case O_EXEC:
			choice = rdps_cli_choice("predict", "--exec_mode", optarg, modes,
						 RDPS_ARRAY_SIZE(modes));
			if (choice < 0)
				return 2;
			mode = (enum mode)choice;
			break;
		case O_TOPK:
			if (rdps_cli_long("predict", "--topK", optarg, 1, 100000000, &topk))
				return 2;
			break;
		case O_SCORE:
			if (!strcmp(optarg, "logsigmoid"))
				p.logsig = true;
			else if (strcmp(optarg, "none")) {
				fprintf(stderr, "rdps predict: --score_func '%s' is not none or "
					"logsigmoid\n", optarg);
				return 2;
			}
			break;
		case O_OUTPUT: output = optarg; break;
		case O_EMAP: mfile[0] = optarg; break;
		case O_RMAP: mfile[1] = optarg; break;
		case O_DATA_PATH: data_path = optarg; break;
		case O_GPU:
			if (strcmp(optarg, "-1")) {
				fprintf(stderr, "rdps predict: --gpu %s: rdps scores on CPUs\n", optarg);
				return 2;
			}
			break;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps predict: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!model_path || !format) {
		fprintf(stderr, "rdps predict: --model_path DIR and --format FMT are required\n");
		return 2;
	}
	if (rdps_cli_choice("predict", "--format", format, formats, RDPS_ARRAY_SIZE(formats)) < 0)
		return 2;
	for (int k = 0; k < 3; k++)
		want += format[2 * k] != '*';
	if (nfiles != want) {
		fprintf(stderr, "rdps predict: --format %s needs %d list file%s in --data_files (%d "
			"given)\n", format, want, want == 1 ? "" : "s", nfiles);
		return 2;
	}
	if (rdps_saved_open(model_path, NULL, &s, err, sizeof(err))) {
		fprintf(stderr, "rdps predict: %s\n", err);
		return 1;
	}
	p.s = s;
	p.margin = margin_of(rdps_saved_model(s));
	if (raw) {
		for (int k = 0; k < 2; k++) {
			const struct rdps_idmap *m = k ? rdps_saved_relations(s) : rdps_saved_entities(s);
			uint32_t rows = k ? rdps_saved_num_relations(s) : rdps_saved_num_entities(s);

			if (mfile[k]) {
				char *path = NULL;

				if (data_path && mfile[k][0] != '/' &&
				    asprintf(&path, "%s/%s", data_path, mfile[k]) < 0)
					path = NULL;
				if (rdps_idmap_load(path ? path : mfile[k], '\t', &own[k], err,
						    sizeof(err))) {
					free(path);
					fprintf(stderr, "rdps predict: %s\n", err);
					goto out;
				}
				free(path);
				m = own[k];
				if (rdps_idmap_count(m) != rows) {
					fprintf(stderr, "rdps predict: %s has %u names but the saved %s "
						"table has %u rows\n", rdps_idmap_path(m),
						rdps_idmap_count(m), k ? "relation" : "entity", rows);
					goto out;
				}
			}
			if (!m) {
				fprintf(stderr, "rdps predict: --raw_data needs %s names: give %s (%s "
					"has no %s)\n", k ? "relation" : "entity",
					k ? "--rel_mfile" : "--entity_mfile", model_path,
					k ? "relations.dict" : "entities.dict");
				goto out;
			}
			p.map[k] = m;
		}
	}
	for (int k = 0, f = 0; k < 3; k++) {
		uint32_t rows = k == 1 ? rdps_saved_num_relations(s) : rdps_saved_num_entities(s);

		p.n[k] = rows;
		if (format[2 * k] == '*')
			continue;
		if (rdps_id_list_read(files[f++], p.map[k == 1], rows, k == 1 ? "relation" : "entity",
				      &lists[k], &p.n[k], err, sizeof(err)) < 0) {
			fprintf(stderr, "rdps predict: %s\n", err);
			goto out;
		}
		p.list[k] = lists[k];
	}
	if (mode == M_TRIPLET && (p.n[0] != p.n[1] || p.n[0] != p.n[2])) {
		fprintf(stderr, "rdps predict: --exec_mode triplet_wise needs as many heads, "
			"relations and tails (%zu, %zu, %zu)\n", p.n[0], p.n[1], p.n[2]);
		goto out;
	}
	if ((double)p.n[0] * (double)p.n[1] * (double)p.n[2] > 9e18) {
		fprintf(stderr, "rdps predict: %zu x %zu x %zu combinations are too many\n", p.n[0],
			p.n[1], p.n[2]);
		goto out;
	}
	p.out = infer_output_open("predict", output, "head\trel\ttail\tscore\n");
	if (!p.out)
		goto out;
	if (infer_topk_init(&tk, (size_t)topk)) {
		fprintf(stderr, "rdps predict: out of memory for --topK %ld\n", topk);
		goto out;
	}
	run(&p, mode, &tk);
	rc = 0;
out:
	if (infer_output_close("predict", output, p.out))
		rc = 1;
	else if (!rc)
		infer_done(output);
	infer_topk_free(&tk);
	for (int k = 0; k < 3; k++)
		free(lists[k]);
	rdps_idmap_destroy(own[0]);
	rdps_idmap_destroy(own[1]);
	rdps_saved_close(s);
	return rc;
}
