// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * After training: rdps eval, predict and emb_sim as processes.
 *
 *  - eval on a standalone job's save path prints the job's own Test lines,
 *    digit for digit (TransE_l2, RotatE, ComplEx); raw ranking prints other
 *    lines (the control that the comparison can fail); sampled negatives
 *    covering every entity print the same lines whatever the threads, fewer
 *    negatives rank higher; --eval_percent ranks that share.
 *  - eval's filter is train + valid + test: on a graph written by hand, a
 *    valid triple outranks a test tail; the metrics are the hand-computed
 *    ones, and become those of the train + test filter when valid.txt is
 *    taken away (the control), the same through DGL-KE's raw_udd_htr and
 *    udd_hrt formats with a custom delimiter.
 *  - predict and emb_sim against hand-computed scores and orders on tiny
 *    tables written by hand, in every exec mode, names and ids.
 *  - errors name the file, line or field, and exit 1.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/trainer.h"
#include "rdps_test.h"

static char *dir;

static void setup(void)
{
	dir = rdps_test_tmpdir("after");
	cr_assert_not_null(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(after, .init = setup, .fini = teardown, .timeout = 240);

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void put(const char *name, const char *text)
{
	free(rdps_test_write(dir, name, text));
}

static void put_npy(const char *name, const float *v, uint64_t rows, uint64_t cols)
{
	char *p = path(name);

	cr_assert_eq(rdps_npy_write_f32(p, v, rows, cols), 0);
	free(p);
}

/* Runs build/rdps with args (NULL-terminated, without the binary) in dir;
 * asserts the exit status; returns stdout+stderr. */
static char *rdps_run(int want_status, const char *const *args)
{
	char *argv[64], *logp, *log, *cwd = getcwd(NULL, 0);
	int n = 0, st;
	pid_t pid;

	argv[n++] = RDPS_BIN;
	for (; *args; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	logp = path("run.log");
	unlink(logp);
	cr_assert_eq(chdir(dir), 0);
	pid = rdps_test_spawn(argv, logp);
	cr_assert_eq(chdir(cwd), 0);
	free(cwd);
	cr_assert_eq(rdps_test_wait(pid, 120000, &st), 0, "rdps %s did not finish in 120 s",
		     argv[1]);
	log = rdps_test_slurp(logp);
	cr_assert_not_null(log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == want_status,
		  "rdps %s: status %d, want exit %d:\n%s", argv[1], st, want_status, log);
	free(logp);
	return log;
}

#define RUN(status, ...) rdps_run((status), (const char *const[]){ __VA_ARGS__, NULL })

/* The "Test average ..." lines of a log, in order. */
static char *test_lines(const char *log)
{
	char *out = calloc(1, strlen(log) + 1);
	const char *p = log;

	while (p && *p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p + 1) : strlen(p);

		if (!strncmp(p, "Test average ", 13))
			strncat(out, p, len);
		p = e ? e + 1 : NULL;
	}
	return out;
}

static double metric(const char *lines, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "Test average %s : ", name);
	p = strstr(lines, key);
	cr_assert_not_null(p, "no %s in:\n%s", name, lines);
	return strtod(p + strlen(key), NULL);
}

/* ------------------------------------------------------------------------ */
/* eval on trained save paths                                                */

static void eval_matches_training_with(const char *model, const char *flag1, const char *flag2)
{
	char *kg = path("kg"), *save, *log, *want, *got, *raw;

	rdps_test_synth_kg(kg, 300, 8, 2000, 7, NULL, 0);
	cr_assert(asprintf(&save, "%s/save_%s%s%s", dir, model, flag1, flag2) > 0);
	log = RUN(0, "train", "--data", kg, "--standalone", "--model_name", model, "--hidden_dim",
		  "16", "--max_step", "300", "--batch_size", "64", "--neg_sample_size", "16",
		  "--lr", "0.1", "--num_thread", "2", "--test", "--valid", "--save_path", save,
		  "--log_interval", "0", flag1[0] ? flag1 : "--test", flag2[0] ? flag2 : "--test");
	want = test_lines(log);
	free(log);
	cr_assert_eq(strlen(want) > 0, 1, "training printed no Test lines");

	/* the data comes from config.json's data_path */
	log = RUN(0, "eval", "--model_path", save);
	got = test_lines(log);
	cr_assert_str_eq(got, want, "%s: rdps eval printed\n%s\nthe trainer printed\n%s", model,
			 got, want);
	free(log);
	free(got);

	/* control: another ranking of the same rows prints other lines */
	log = RUN(0, "eval", "--model_path", save, "--data", kg, "--no_eval_filter");
	raw = test_lines(log);
	cr_assert_str_neq(raw, want, "%s: raw ranking printed the filtered lines", model);
	cr_assert_gt(metric(raw, "MR"), metric(want, "MR"));
	free(log);
	free(raw);
	free(want);
	free(save);
	free(kg);
}

static void eval_matches_training(const char *model)
{
	eval_matches_training_with(model, "", "");
}

Test(after, eval_reproduces_the_trainers_transe_l2)
{
	eval_matches_training("TransE_l2");
}

/* TransR saves its relation vectors and projections in two files, as
 * DGL-KE: eval must put them back together. */
Test(after, eval_reproduces_the_trainers_transr)
{
	char *proj;

	eval_matches_training("TransR");
	cr_assert(asprintf(&proj, "%s/save_TransR/kg_TransRprojection.npy", dir) > 0);
	cr_assert_eq(access(proj, R_OK), 0, "no %s", proj);
	free(proj);
}

Test(after, eval_reproduces_the_trainers_simple)
{
	eval_matches_training("SimplE");
}

/* -de -dr: rows of 2 x hidden_dim, said in config.json and used by eval. */
Test(after, eval_reproduces_the_trainers_complex_de_dr)
{
	eval_matches_training_with("ComplEx", "-de", "-dr");
}

Test(after, eval_reproduces_the_trainers_rotate)
{
	eval_matches_training("RotatE");
}

Test(after, eval_reproduces_the_trainers_complex)
{
	eval_matches_training("ComplEx");
}

Test(after, eval_sampled_and_partial)
{
	char *kg = path("kg"), *save = path("save"), *log, *full, *got, *t1, *t3;

	rdps_test_synth_kg(kg, 300, 8, 2000, 3, NULL, 0);
	log = RUN(0, "train", "--data", kg, "--standalone", "--model_name", "DistMult",
		  "--hidden_dim", "16", "--max_step", "300", "--batch_size", "64",
		  "--neg_sample_size", "16", "--lr", "0.1", "--valid", "--save_path", save,
		  "--log_interval", "0");
	free(log);
	log = RUN(0, "eval", "--model_path", save, "--data_path", kg);
	full = test_lines(log);
	free(log);

	/* DGL-KE draws min(N, entities) without replacement: every entity */
	log = RUN(0, "eval", "--model_path", save, "--neg_sample_size_eval", "1000",
		  "--batch_size_eval", "16", "--num_thread", "3");
	got = test_lines(log);
	cr_assert_str_eq(got, full, "sampled over every entity:\n%s\nfull:\n%s", got, full);
	free(log);
	free(got);

	/* 20 of 300: a subset of the candidates, so no rank is worse, and
	 * the same draws whatever the threads */
	log = RUN(0, "eval", "--model_path", save, "--neg_sample_size_eval", "20",
		  "--batch_size_eval", "16");
	t1 = test_lines(log);
	free(log);
	log = RUN(0, "eval", "--model_path", save, "--neg_sample_size_eval", "20",
		  "--batch_size_eval", "16", "--num_proc", "2", "--num_thread", "2");
	t3 = test_lines(log);
	free(log);
	cr_assert_str_eq(t1, t3);
	cr_assert_gt(metric(t1, "MRR"), metric(full, "MRR"));
	cr_assert_lt(metric(t1, "MR"), metric(full, "MR"));
	cr_assert_leq(metric(t1, "MR"), 21.0);
	free(t1);
	free(t3);

	/* --eval_percent: half of the 100 test triples */
	log = RUN(0, "eval", "--model_path", save, "--eval_percent", "0.5");
	cr_assert(strstr(log, "50 test triples (100 queries)"), "%s", log);
	free(log);
	log = RUN(0, "eval", "--model_path", save);
	cr_assert(strstr(log, "100 test triples (200 queries)"), "%s", log);
	free(log);
	free(full);
	free(save);
	free(kg);
}

/* ------------------------------------------------------------------------ */
/* eval's filter by hand                                                     */

/*
 * DistMult, hidden_dim 2, relation r = (1, 0): score(h, r, t) = h0 * t0,
 * entity first coordinates e0..e4 = 1, 2, 3, 0.5, -1.
 *   train (e2 r e1), (e3 r e4); valid (e0 r e2); test (e0 r e1).
 * Tail query (e0, r, ?): true e1 scores 2; e2 scores 3 but (e0 r e2) is a
 *   valid triple: filtered, rank 1; without valid in the filter, rank 2.
 * Head query (?, r, e1): true e0 scores 2; e2 (6) is filtered by train; e1
 *   scores 4: rank 2 (raw: e2 too, rank 3).
 */
static const float F_ENT[5 * 2] = { 1, 0, 2, 0, 3, 0, 0.5f, 0, -1, 0 };
static const float F_REL[1 * 2] = { 1, 0 };

static char *expected(double rr_tail, double rr_head, int rank_tail, int rank_head)
{
	struct rdps_eval_sums s = {
		.sum_rr = rr_tail + rr_head, .sum_rank = rank_tail + rank_head,
		.hits1 = (rank_tail <= 1) + (rank_head <= 1),
		.hits3 = (rank_tail <= 3) + (rank_head <= 3),
		.hits10 = (rank_tail <= 10) + (rank_head <= 10), .count = 2,
	};
	struct rdps_eval_metrics m;
	char *buf = malloc(512);

	rdps_eval_metrics_from_sums(&s, &m);
	rdps_eval_format(buf, 512, "Test", &m);
	return buf;
}

static void filter_graph(void)
{
	char *p;

	p = path("fsave");
	cr_assert_eq(mkdir(p, 0755), 0);
	free(p);
	p = path("fg");
	cr_assert_eq(mkdir(p, 0755), 0);
	free(p);
	put("fsave/config.json", "{\"model_name\": \"DistMult\", \"hidden_dim\": 2, "
				 "\"dataset\": \"fg\", \"gamma\": 12.0}");
	put_npy("fsave/fg_DistMult_entity.npy", F_ENT, 5, 2);
	put_npy("fsave/fg_DistMult_relation.npy", F_REL, 1, 2);
	put("fsave/entities.dict", "0\te0\n1\te1\n2\te2\n3\te3\n4\te4\n");
	put("fsave/relations.dict", "0\tr\n");
	put("fg/entities.dict", "0\te0\n1\te1\n2\te2\n3\te3\n4\te4\n");
	put("fg/relations.dict", "0\tr\n");
	put("fg/train.txt", "e2\tr\te1\ne3\tr\te4\n");
	put("fg/valid.txt", "e0\tr\te2\n");
	put("fg/test.txt", "e0\tr\te1\n");
	/* DGL-KE's raw_udd_htr with ',' and udd_hrt with ';' */
	put("fg/tr.csv", "e2,e1,r\ne3,e4,r\n");
	put("fg/va.csv", "e0,e2,r\n");
	put("fg/te.csv", "e0,e1,r\n");
	put("fg/ent.ids", "0;e0\n1;e1\n2;e2\n3;e3\n4;e4\n");
	put("fg/rel.ids", "0;r\n");
	put("fg/tr.ids", "2;0;1\n3;0;4\n");
	put("fg/va.ids", "0;0;2\n");
	put("fg/te.ids", "0;0;1\n");
}

Test(after, eval_filters_train_valid_and_test)
{
	char *save = path("fsave"), *fg = path("fg"), *log, *got, *valid;
	char *want_full = expected(1.0 / 1, 1.0 / 2, 1, 2);
	char *want_tt = expected(1.0 / 2, 1.0 / 2, 2, 2);
	char *want_raw = expected(1.0 / 2, 1.0 / 3, 2, 3);

	filter_graph();
	cr_assert_str_neq(want_full, want_tt); /* the graph tells the filters apart */

	log = RUN(0, "eval", "--model_path", save, "--data", fg);
	got = test_lines(log);
	cr_assert_str_eq(got, want_full, "got\n%s\nwant\n%s", got, want_full);
	free(got);
	free(log);

	/* DGL-KE's spelling and formats give the same */
	log = RUN(0, "eval", "--model_path", save, "--data_path", dir, "--dataset", "fg");
	got = test_lines(log);
	cr_assert_str_eq(got, want_full, "%s", log);
	free(got);
	free(log);
	log = RUN(0, "eval", "--model_path", save, "--data_path", fg, "--format", "raw_udd_htr",
		  "--delimiter", ",", "--data_files", "tr.csv", "va.csv", "te.csv");
	got = test_lines(log);
	cr_assert_str_eq(got, want_full, "%s", log);
	free(got);
	free(log);
	log = RUN(0, "eval", "--model_path", save, "--data_path", fg, "--format", "udd_hrt",
		  "--delimiter", ";", "--data_files", "ent.ids", "rel.ids", "tr.ids", "va.ids",
		  "te.ids");
	got = test_lines(log);
	cr_assert_str_eq(got, want_full, "%s", log);
	free(got);
	free(log);

	/* raw ranking by hand */
	log = RUN(0, "eval", "--model_path", save, "--data", fg, "--no_eval_filter");
	got = test_lines(log);
	cr_assert_str_eq(got, want_raw, "got\n%s\nwant\n%s", got, want_raw);
	free(got);
	free(log);

	/* control: without valid.txt the filter is train + test, and the
	 * valid triple's tail outranks the test tail */
	valid = path("fg/valid.txt");
	cr_assert_eq(unlink(valid), 0);
	log = RUN(0, "eval", "--model_path", save, "--data", fg);
	got = test_lines(log);
	cr_assert_str_eq(got, want_tt, "got\n%s\nwant\n%s", got, want_tt);
	cr_assert(strstr(log, "valid.txt: the filter holds train and test only"), "%s", log);
	free(got);
	free(log);
	free(valid);
	free(want_full);
	free(want_tt);
	free(want_raw);
	free(save);
	free(fg);
}

/* ------------------------------------------------------------------------ */
/* predict by hand                                                           */

/* TransE_l2, hidden_dim 2, gamma 10: a (0,0) b (1,0) c (0,2) d (3,3);
 * relations r (1,0), s (0,1). */
static const float P_ENT[4 * 2] = { 0, 0, 1, 0, 0, 2, 3, 3 };
static const float P_REL[2 * 2] = { 1, 0, 0, 1 };
static const char *const P_ENAME[4] = { "a", "b", "c", "d" };
static const char *const P_RNAME[2] = { "r", "s" };

static void predict_save_path(void)
{
	char *p = path("psave");

	cr_assert_eq(mkdir(p, 0755), 0);
	free(p);
	put("psave/config.json", "{\"model_name\": \"TransE_l2\", \"hidden_dim\": 2, "
				 "\"gamma\": 10.0, \"dataset\": \"toy\"}");
	put_npy("psave/toy_TransE_l2_entity.npy", P_ENT, 4, 2);
	put_npy("psave/toy_TransE_l2_relation.npy", P_REL, 2, 2);
	put("psave/entities.dict", "0\ta\n1\tb\n2\tc\n3\td\n");
	put("psave/relations.dict", "0\tr\n1\ts\n");
}

/* -|h + r - t|, DGL-KE's score under --score_func none (gamma 0) */
static double p_none(int h, int r, int t)
{
	double x = P_ENT[2 * h] + P_REL[2 * r] - P_ENT[2 * t];
	double y = P_ENT[2 * h + 1] + P_REL[2 * r + 1] - P_ENT[2 * t + 1];

	return -sqrt(x * x + y * y);
}

static double p_logsig(int h, int r, int t)
{
	return -log1p(exp(-(10.0 + p_none(h, r, t))));
}

struct row {
	int a, b, c; /* ids; c = -1 for emb_sim's two columns */
	double score;
};

/* Checks a result file: the header, then rows (names when names != NULL)
 * with scores within float32 rounding. */
static void check_result(const char *file, const char *header, const struct row *want, size_t n,
			 const char *const *ent_names, const char *const *rel_names)
{
	char *p = path(file), *text = rdps_test_slurp(p), *line, *save = NULL;
	size_t i = 0;

	cr_assert_not_null(text, "no %s", p);
	line = strtok_r(text, "\n", &save);
	cr_assert_not_null(line);
	cr_assert_str_eq(line, header);
	for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
		char want_ids[128], *tab;
		double got;

		cr_assert_lt(i, n, "%s: more rows than %zu: '%s'", file, n, line);
		if (want[i].c < 0 && ent_names)
			snprintf(want_ids, sizeof(want_ids), "%s\t%s\t", ent_names[want[i].a],
				 ent_names[want[i].b]);
		else if (want[i].c < 0)
			snprintf(want_ids, sizeof(want_ids), "%d\t%d\t", want[i].a, want[i].b);
		else if (ent_names)
			snprintf(want_ids, sizeof(want_ids), "%s\t%s\t%s\t", ent_names[want[i].a],
				 rel_names[want[i].b], ent_names[want[i].c]);
		else
			snprintf(want_ids, sizeof(want_ids), "%d\t%d\t%d\t", want[i].a, want[i].b,
				 want[i].c);
		cr_assert(!strncmp(line, want_ids, strlen(want_ids)), "%s row %zu: '%s', want '%s...'",
			  file, i, line, want_ids);
		tab = strrchr(line, '\t');
		got = strtod(tab + 1, NULL);
		cr_assert(fabs(got - want[i].score) <= 1e-6 * fmax(1, fabs(want[i].score)),
			  "%s row %zu: score %s, want %.9g", file, i, tab + 1, want[i].score);
	}
	cr_assert_eq(i, n, "%s: %zu rows, want %zu", file, i, n);
	free(text);
	free(p);
}

Test(after, predict_by_hand)
{
	char *save = path("psave"), *log;
	static const char hdr[] = "head\trel\ttail\tscore";

	predict_save_path();

	/* all, names: heads {a, b} x rels {r, s} x tails {b, c, d}; the three
	 * scores of -1 (a s c, b r b, b s b) keep their combination order */
	put("h.list", "a\nb\n");
	put("r.list", "r\ns\n");
	put("t.list", "b\nc\nd\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "h_r_t", "--data_files", "h.list",
		  "r.list", "t.list", "--raw_data", "--topK", "4", "--output", "all.tsv");
	cr_assert(strstr(log, "Inference Done\nThe result is saved in all.tsv"), "%s", log);
	free(log);
	{
		const struct row want[] = { { 0, 0, 1, p_none(0, 0, 1) }, { 0, 1, 2, -1 },
					    { 1, 0, 1, -1 }, { 1, 1, 1, -1 } };

		cr_assert_float_eq(p_none(0, 1, 2), -1.0, 0);
		check_result("all.tsv", hdr, want, 4, P_ENAME, P_RNAME);
	}

	/* triplet_wise, ids, logsigmoid with the trained gamma: (a s c) and
	 * (b r b) tie at log(sigmoid(9)); (d r a) is log(sigmoid(5)) */
	put("h.ids", "0\n1\n3\n");
	put("r.ids", "1\n0\n0\n");
	put("t.ids", "2\n1\n0\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "h_r_t", "--data_files", "h.ids",
		  "r.ids", "t.ids", "--exec_mode", "triplet_wise", "--score_func", "logsigmoid",
		  "--topK", "5", "--output", "tw.tsv");
	free(log);
	{
		const struct row want[] = { { 0, 1, 2, p_logsig(0, 1, 2) },
					    { 1, 0, 1, p_logsig(1, 0, 1) },
					    { 3, 0, 0, p_logsig(3, 0, 0) } };

		cr_assert_float_eq(want[0].score, -log1p(exp(-9.0)), 1e-12);
		cr_assert_float_eq(want[2].score, -log1p(exp(-5.0)), 1e-12);
		check_result("tw.tsv", hdr, want, 3, NULL, NULL);
	}

	/* batch_head over every tail: d+s = (3,4) is nearest d (1), then c;
	 * a+s = (0,1) ties a and c at 1 */
	put("h2.ids", "3\n0\n");
	put("r2.ids", "1\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "h2.ids", "r2.ids", "--exec_mode", "batch_head", "--topK", "2", "--output",
		  "bh.tsv");
	free(log);
	{
		const struct row want[] = { { 3, 1, 3, -1 }, { 3, 1, 2, p_none(3, 1, 2) },
					    { 0, 1, 0, -1 }, { 0, 1, 2, -1 } };

		check_result("bh.tsv", hdr, want, 4, NULL, NULL);
	}

	/* batch_tail, names, every head: for tail b (a r b) is exact; for a,
	 * (a r a) at 1 */
	put("r3.list", "r\n");
	put("t3.list", "b\na\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "*_r_t", "--data_files",
		  "r3.list", "t3.list", "--raw_data", "--exec_mode", "batch_tail", "--topK", "1",
		  "--output", "bt.tsv");
	free(log);
	{
		const struct row want[] = { { 0, 0, 1, 0 }, { 0, 0, 0, -1 } };

		check_result("bt.tsv", hdr, want, 2, P_ENAME, P_RNAME);
	}

	/* batch_rel: a to c under each relation */
	put("h4.ids", "0\n");
	put("t4.ids", "2\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "h_*_t", "--data_files",
		  "h4.ids", "t4.ids", "--exec_mode", "batch_rel", "--output", "br.tsv");
	free(log);
	{
		const struct row want[] = { { 0, 0, 2, -sqrt(5.0) }, { 0, 1, 2, -1 } };

		check_result("br.tsv", hdr, want, 2, NULL, NULL);
	}
	free(save);
}

Test(after, predict_errors_name_the_file_and_line)
{
	char *save = path("psave"), *log;

	predict_save_path();
	put("r.list", "r\n");
	put("bad.list", "a\nzz\n");
	log = RUN(1, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "bad.list", "r.list", "--raw_data");
	cr_assert(strstr(log, "bad.list:2: entity 'zz' is not in "), "%s", log);
	cr_assert(strstr(log, "psave/entities.dict"), "%s", log);
	free(log);
	put("bad.ids", "0\n7\n");
	put("r.ids", "0\n");
	log = RUN(1, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "bad.ids", "r.ids");
	cr_assert(strstr(log, "bad.ids:2: entity id 7 is out of range (4 entities: 0..3)"), "%s",
		  log);
	free(log);
	put("h.ids", "0\n1\n");
	log = RUN(1, "predict", "--model_path", save, "--format", "h_r_t", "--data_files", "h.ids",
		  "r.ids", "h.ids", "--exec_mode", "triplet_wise");
	cr_assert(strstr(log, "triplet_wise needs as many heads, relations and tails (2, 1, 2)"),
		  "%s", log);
	free(log);
	log = RUN(2, "predict", "--model_path", save, "--format", "h_r_t", "--data_files", "h.ids",
		  "r.ids");
	cr_assert(strstr(log, "--format h_r_t needs 3 list files in --data_files (2 given)"), "%s",
		  log);
	free(log);
	/* control: the same command with good lists succeeds */
	put("good.ids", "0\n3\n");
	log = RUN(0, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "good.ids", "r.ids");
	free(log);

	/* a config.json without hidden_dim; a table not matching the model */
	put("psave/config.json", "{\"model_name\": \"TransE_l2\", \"dataset\": \"toy\"}");
	log = RUN(1, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "good.ids", "r.ids");
	cr_assert(strstr(log, "psave/config.json: no \"hidden_dim\" (or DGL-KE's \"emb_size\")"),
		  "%s", log);
	free(log);
	put("psave/config.json", "{\"model_name\": \"TransE_l2\", \"hidden_dim\": 3, "
				 "\"dataset\": \"toy\"}");
	log = RUN(1, "predict", "--model_path", save, "--format", "h_r_*", "--data_files",
		  "good.ids", "r.ids");
	cr_assert(strstr(log, "toy_TransE_l2_entity.npy has shape (4, 2), but TransE_l2 with "
			      "hidden_dim 3 has 3-wide entity rows"), "%s", log);
	free(log);
	log = RUN(1, "eval", "--model_path", save);
	cr_assert(strstr(log, "has shape (4, 2), but TransE_l2 with hidden_dim 3"), "%s", log);
	free(log);
	free(save);
}

/* ------------------------------------------------------------------------ */
/* emb_sim by hand                                                           */

/* n0 (1,0) n1 (0,1) n2 (3,4) n3 (-2,0) */
static const float S_EMB[4 * 2] = { 1, 0, 0, 1, 3, 4, -2, 0 };
static const char *const S_NAME[4] = { "n0", "n1", "n2", "n3" };

Test(after, emb_sim_by_hand)
{
	static const char hdr[] = "left\tright\tscore";
	char *log;

	put_npy("emb.npy", S_EMB, 4, 2);
	put("m.dict", "0\tn0\n1\tn1\n2\tn2\n3\tn3\n");

	/* cosine, every pair: the four self pairs (1 each, index order), then
	 * n1-n2 (0.8) before n2-n1 */
	log = RUN(0, "emb_sim", "--emb_file", "emb.npy", "--format", "*", "--topK", "5", "--mfile",
		  "m.dict", "--raw_data", "--output", "cos.tsv");
	cr_assert(strstr(log, "Inference Done\nThe result is saved in cos.tsv"), "%s", log);
	free(log);
	{
		const struct row want[] = { { 0, 0, -1, 1 }, { 1, 1, -1, 1 }, { 2, 2, -1, 1 },
					    { 3, 3, -1, 1 }, { 1, 2, -1, 0.8 } };

		check_result("cos.tsv", hdr, want, 5, S_NAME, NULL);
	}

	/* l2, batch_left from n3 (-2,0): itself, then n1 at sqrt(5) */
	put("l.list", "n3\n");
	log = RUN(0, "emb_sim", "--emb_file", "emb.npy", "--format", "l_*", "--data_files",
		  "l.list", "--mfile", "m.dict", "--raw_data", "--sim_func", "l2", "--exec_mode",
		  "batch_left", "--topK", "2", "--output", "l2.tsv");
	free(log);
	{
		const struct row want[] = { { 3, 3, -1, 0 }, { 3, 1, -1, -sqrt(5.0) } };

		check_result("l2.tsv", hdr, want, 2, S_NAME, NULL);
	}

	/* l1, pairwise ids: (0,3) 3, (1,3) 3, (2,0) 6: the tie by index */
	put("left.ids", "0\n1\n2\n");
	put("right.ids", "3\n3\n0\n");
	log = RUN(0, "emb_sim", "--emb_file", "emb.npy", "--format", "l_r", "--data_files",
		  "left.ids", "right.ids", "--sim_func", "l1", "--exec_mode", "pairwise", "--topK",
		  "2", "--output", "l1.tsv");
	free(log);
	{
		const struct row want[] = { { 0, 3, -1, -3 }, { 1, 3, -1, -3 } };

		check_result("l1.tsv", hdr, want, 2, NULL, NULL);
	}

	/* dot: n2 against n0, n1, n3: 3, 4, -6 */
	put("n2.ids", "2\n");
	put("r3.ids", "0\n1\n3\n");
	log = RUN(0, "emb_sim", "--emb_file", "emb.npy", "--format", "l_r", "--data_files",
		  "n2.ids", "r3.ids", "--sim_func", "dot", "--topK", "2", "--output", "dot.tsv");
	free(log);
	{
		const struct row want[] = { { 2, 1, -1, 4 }, { 2, 0, -1, 3 } };

		check_result("dot.tsv", hdr, want, 2, NULL, NULL);
	}

	/* extended Jaccard, every left against n2: 1, 4/22, 3/23, -6/35 */
	log = RUN(0, "emb_sim", "--emb_file", "emb.npy", "--format", "*_r", "--data_files",
		  "n2.ids", "--sim_func", "ext_jaccard", "--topK", "4", "--output", "jac.tsv");
	free(log);
	{
		const struct row want[] = { { 2, 2, -1, 1 }, { 1, 2, -1, 4.0 / 22 },
					    { 0, 2, -1, 3.0 / 23 }, { 3, 2, -1, -6.0 / 35 } };

		check_result("jac.tsv", hdr, want, 4, NULL, NULL);
	}

	/* errors: a name not in the map, a map not matching the table */
	put("bad.list", "n1\nzz\n");
	log = RUN(1, "emb_sim", "--emb_file", "emb.npy", "--format", "l_*", "--data_files",
		  "bad.list", "--mfile", "m.dict", "--raw_data");
	cr_assert(strstr(log, "bad.list:2: row 'zz' is not in m.dict"), "%s", log);
	free(log);
	put("short.dict", "0\tn0\n1\tn1\n2\tn2\n");
	log = RUN(1, "emb_sim", "--emb_file", "emb.npy", "--format", "*", "--mfile", "short.dict",
		  "--raw_data");
	cr_assert(strstr(log, "--mfile short.dict has 3 names but emb.npy has 4 rows"), "%s", log);
	free(log);
	log = RUN(2, "emb_sim", "--emb_file", "emb.npy", "--format", "l_*", "--data_files",
		  "bad.list", "--raw_data");
	cr_assert(strstr(log, "--raw_data needs --mfile"), "%s", log);
	free(log);
}
