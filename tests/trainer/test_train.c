// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * The training job: it learns (MRR far above an untrained model), the
 * distributed job over TCP matches standalone, the per-relation sums cover
 * every test triple (standalone and reduced over trainers), and bad input
 * gives clear errors (unknown model, hidden_dim not matching the servers'
 * tables, a partition of another dataset, a damaged entities.dict or a
 * truncated train.txt named with its line, --eval_per_relation on some
 * trainers only, refused at the start).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps/train.h"
#include "rdps_test.h"

static char *dir;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void make_dataset(const char *name, uint64_t seed)
{
	struct rdps_synth_opts so;
	struct rdps_dataset_stats st;
	char err[512], *out = path(name);

	rdps_dataset_synth_defaults(&so);
	so.num_entities = 1000;
	so.num_relations = 12;
	so.num_triples = 12000;
	so.num_communities = 8;
	so.num_valid = 200;
	so.num_test = 200;
	so.seed = seed;
	cr_assert_eq(rdps_dataset_synth(out, &so, &st, err, sizeof(err)), 0, "%s", err);
	free(out);
}

static void setup(void)
{
	struct rdps_wordnet_opts wo;
	struct rdps_dataset_stats st;
	char err[512], *wn;

	dir = rdps_test_tmpdir("train");
	cr_assert(dir);
	make_dataset("kg", 1);
	/* Learning is checked on the WordNet graph: the synthetic one puts
	 * tails at random within a community, which no model can rank. */
	wn = path("wn");
	rdps_dataset_wordnet_defaults(&wo);
	cr_assert_eq(rdps_dataset_wordnet(wn, &wo, &st, err, sizeof(err)), 0, "%s", err);
	free(wn);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

static void small_opts(struct rdps_train_opts *o, const char *data)
{
	rdps_train_opts_init(o);
	o->data_dir = data;
	o->standalone = true;
	o->model.name = "TransE_l2";
	o->model.hidden_dim = 100;
	o->model.gamma = 6.0f;
	o->model.adv = true;
	o->model.reg_coef = 1e-7f;
	o->batch_size = 256;
	o->neg_sample_size = 64;
	o->lr = 0.1f;
	o->log_interval = 0;
	o->test = true;
	o->timeout_ms = 20000;
}

TestSuite(train, .init = setup, .fini = teardown, .timeout = 180);

/* The per-relation test sums of r (WordNet: 18 relations) cover every one
 * of the n test triples once per side and add up to the overall metrics. */
static void check_relations(const struct rdps_train_result *r, const char *data, uint64_t n)
{
	struct rdps_eval_sums all = { 0 };
	struct rdps_eval_metrics m;
	struct rdps_dataset *ds;
	uint64_t tails = 0, heads = 0;
	char err[512];

	cr_assert_not_null(r->test_rel);
	cr_assert_null(r->valid_rel, "valid was not evaluated");
	cr_assert_eq(r->num_relations, 18);
	cr_assert_eq(rdps_dataset_open(data, &ds, err, sizeof(err)), 0, "%s", err);
	for (uint32_t k = 0; k < r->num_relations; k++) {
		const struct rdps_train_relation_sums *s = &r->test_rel[k];

		cr_assert_str_eq(r->relation_names[k], rdps_dataset_relation_name(ds, k));

		cr_assert_eq(s->tail.count, s->head.count, "relation %u: one query per side", k);
		cr_assert_leq(s->tail.hits1, s->tail.hits3);
		cr_assert_leq(s->head.hits3, s->head.hits10);
		tails += s->tail.count;
		heads += s->head.count;
		rdps_eval_sums_add(&all, &s->tail);
		rdps_eval_sums_add(&all, &s->head);
	}
	rdps_dataset_close(ds);
	cr_assert(tails == n && heads == n, "per-relation counts %llu + %llu, %llu test triples",
		  (unsigned long long)tails, (unsigned long long)heads, (unsigned long long)n);
	rdps_eval_metrics_from_sums(&all, &m);
	cr_assert_eq(m.count, r->test.count);
	cr_assert_float_eq(m.mrr, r->test.mrr, 1e-9);
	cr_assert_float_eq(m.mr, r->test.mr, 1e-9);
	cr_assert_float_eq(m.hits10, r->test.hits10, 1e-12);
}

Test(train, standalone_learns)
{
	struct rdps_train_opts o;
	struct rdps_train_result before, after;
	char err[1024], *data = path("wn");

	small_opts(&o, data);
	o.max_step = 0;
	cr_assert_eq(rdps_train_run(&o, &before, err, sizeof(err)), 0, "%s", err);
	o.batch_size = 1024;
	o.max_step = 500;
	o.num_thread = 2;
	o.eval_per_relation = true;
	cr_assert_eq(rdps_train_run(&o, &after, err, sizeof(err)), 0, "%s", err);
	cr_assert(before.have_test && after.have_test);
	cr_assert_null(before.test_rel, "no per-relation sums unless asked");
	cr_assert_eq(after.test.count, 10000, "5000 test triples x 2 sides");
	cr_log_info("MRR untrained %.4f, trained %.4f (Hits@10 %.3f)", before.test.mrr,
		    after.test.mrr, after.test.hits10);
	cr_assert_gt(after.test.mrr, before.test.mrr + 0.05, "training did not learn: %.4f -> %.4f",
		     before.test.mrr, after.test.mrr);
	check_relations(&after, data, 5000);
	rdps_train_result_free(&after);
	cr_assert_null(after.test_rel);
	free(data);
}

/*
 * The evaluation filter holds train + valid + test whichever split is
 * evaluated (DGL-KE's EvalDataset), not only the splits evaluated.
 *
 * Five entities e0..e4, relations r0 and r1:
 *   train  (e0 r1 e1) (e1 r1 e2) (e2 r1 e3) (e3 r1 e4) (e4 r0 e4) (e0 r0 e3)
 *   valid  (e0 r0 e2) (e3 r0 e1)
 *   test   (e0 r0 e1)
 * DistMult with gamma -2 draws its rows from U(-(gamma + 2) / dim, ...): all
 * zero, so with max_step 0 every candidate ties with the true entity and a
 * pessimistic (DGL-KE) rank is 1 + the candidates the filter leaves.
 *
 * Test, tail (e0 r0 ?), true e1: skip e1, e3 (train), e2 (valid): e0 and e4
 *   are left, rank 3 (without valid in the filter also e2: rank 4).
 * Test, head (? r0 e1), true e0: skip e0, e3 (valid): rank 4 (without valid
 *   5). MRR (1/3 + 1/4) / 2 = 7/24, MR 3.5 (without: MRR 0.225, MR 4.5).
 * Valid (e0 r0 e2): tail skips e2, e3 (train), e1 (test): rank 3 (without
 *   test in the filter 4); head skips e0 only: rank 5.
 * Valid (e3 r0 e1): tail skips e1 only: rank 5; head skips e3, e0 (test):
 *   rank 4 (without test 5).
 *   MRR (1/3 + 1/5 + 1/5 + 1/4) / 4 = 59/240, MR 17/4.
 */
static void write_filter_dataset(const char *d)
{
	static const char *const files[][2] = {
		{ "entities.dict", "0\te0\n1\te1\n2\te2\n3\te3\n4\te4\n" },
		{ "relations.dict", "0\tr0\n1\tr1\n" },
		{ "train.txt", "e0\tr1\te1\ne1\tr1\te2\ne2\tr1\te3\ne3\tr1\te4\ne4\tr0\te4\n"
			       "e0\tr0\te3\n" },
		{ "valid.txt", "e0\tr0\te2\ne3\tr0\te1\n" },
		{ "test.txt", "e0\tr0\te1\n" },
	};

	cr_assert_eq(mkdir(d, 0755), 0, "%s", d);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		free(rdps_test_write(d, files[i][0], files[i][1]));
}

static void filter_opts(struct rdps_train_opts *o, const char *data, bool test, bool valid)
{
	small_opts(o, data);
	o->model.name = "DistMult";
	o->model.hidden_dim = 4;
	o->model.gamma = -2.0f;
	o->model.adv = false;
	o->max_step = 0;
	o->batch_size = 4;
	o->neg_sample_size = 2;
	o->test = test;
	o->valid = valid;
}

Test(train, filter_holds_train_valid_and_test_whichever_split_is_evaluated)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("filter5");

	write_filter_dataset(data);
	/* --test alone: the valid triples filter the test queries too */
	filter_opts(&o, data, true, false);
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.have_test && !r.have_valid);
	cr_assert_eq(r.test.count, 2);
	cr_assert_float_eq(r.test.mr, 3.5, 1e-12, "MR %g (4.5: valid not in the filter)", r.test.mr);
	cr_assert_float_eq(r.test.mrr, 7.0 / 24, 1e-12, "MRR %.6f", r.test.mrr);
	cr_assert_float_eq(r.test.hits3, 0.5, 1e-12);
	/* --valid alone: the test triples filter the valid queries */
	filter_opts(&o, data, false, true);
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.have_valid && !r.have_test);
	cr_assert_eq(r.valid.count, 4);
	cr_assert_float_eq(r.valid.mr, 17.0 / 4, 1e-12, "MR %g (4.75: test not in the filter)",
			   r.valid.mr);
	cr_assert_float_eq(r.valid.mrr, 59.0 / 240, 1e-12, "MRR %.6f", r.valid.mrr);
	/* both: the same ranks */
	filter_opts(&o, data, true, true);
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(r.test.mr, 3.5, 1e-12);
	cr_assert_float_eq(r.valid.mr, 17.0 / 4, 1e-12);
	free(data);
}

/* --no_eval_filter: raw ranking on the 5-entity graph above, only the true
 * entity skipped: every query leaves 4 tied candidates, rank 5. */
Test(train, no_eval_filter_ranks_raw)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("filter5");

	write_filter_dataset(data);
	filter_opts(&o, data, true, false);
	o.no_eval_filter = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(r.test.mr, 5.0, 1e-12, "MR %g (3.5 filtered)", r.test.mr);
	cr_assert_float_eq(r.test.mrr, 0.2, 1e-12);
	free(data);
}

/* --eval_percent: a fixed share of the split is ranked (200 test triples,
 * a quarter: 50, two queries each). */
Test(train, eval_percent_ranks_that_share)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.max_step = 0;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.test.count, 400, "the control ranks every triple");
	o.eval_percent = 0.25;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.test.count, 100);
	free(data);
}

/*
 * --neg_sample_size_eval S: each query is ranked against S drawn entities,
 * so no rank exceeds S + 1: with S = 5 every Hits@10 counts (an untrained
 * model ranked against all 1000 entities has Hits@10 near 1%). S of at
 * least the entity count is the full ranking, exactly.
 */
Test(train, neg_sample_size_eval_ranks_against_drawn_entities)
{
	struct rdps_train_opts o;
	struct rdps_train_result full, r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.max_step = 0;
	cr_assert_eq(rdps_train_run(&o, &full, err, sizeof(err)), 0, "%s", err);
	cr_assert_lt(full.test.hits10, 0.5, "control: %g", full.test.hits10);
	o.neg_sample_size_eval = 5;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.test.count, 400);
	cr_assert_float_eq(r.test.hits10, 1.0, 1e-12);
	cr_assert_leq(r.test.mr, 6.0);
	cr_assert_gt(r.test.mr, 1.0);
	o.neg_sample_size_eval = 1000;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(r.test.mr, full.test.mr, 1e-9);
	cr_assert_float_eq(r.test.mrr, full.test.mrr, 1e-12);
	free(data);
}

/*
 * --neg_deg_sample_eval adds a batch's true entities (of the side ranked)
 * to its drawn candidates, so --batch_size_eval decides how many: with one
 * drawn entity (S = 1) and no filter a rank is at most 2 without them, and
 * with them too when a batch is one triple (its own truth is skipped: the
 * very same ranks); batches of 50 put 49 more candidates before queries.
 */
Test(train, neg_deg_sample_eval_adds_the_batch_s_entities)
{
	struct rdps_train_opts o;
	struct rdps_train_result base, r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.max_step = 0;
	o.neg_sample_size_eval = 1;
	o.no_eval_filter = true;
	o.batch_size_eval = 1;
	cr_assert_eq(rdps_train_run(&o, &base, err, sizeof(err)), 0, "%s", err);
	cr_assert_leq(base.test.mr, 2.0);
	o.neg_deg_sample_eval = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(r.test.mr, base.test.mr, 1e-12, "batches of one: the same ranks");
	o.batch_size_eval = 50;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(r.test.mr, 2.0, "MR %g: the batch's entities were not ranked", r.test.mr);
	/* DGL-KE's rule: degree-drawn negatives are not filtered */
	o.no_eval_filter = false;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--neg_deg_sample_eval needs --no_eval_filter"), "%s", err);
	free(data);
}

/* --neg_deg_sample: each chunk scores neg_chunk_size more negatives. */
Test(train, neg_deg_sample_adds_negatives)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.test = false;
	o.max_step = 10;
	o.batch_size = 256;
	o.neg_sample_size = 64;
	o.neg_chunk_size = 128;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.negatives, 10 * 2 * 64, "%llu", (unsigned long long)r.negatives);
	o.neg_deg_sample = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.negatives, 10 * 2 * (64 + 128), "%llu", (unsigned long long)r.negatives);
	free(data);
}

/* --num_proc: that many training threads per --num_thread, each with its
 * own progress (sampler) file; DGL-KE's force_sync_interval of 1000 then;
 * --force_sync_interval: a sync every that many steps. */
Test(train, num_proc_and_force_sync_interval)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *ck = path("np"), *f2 = path("np/trainer-0-3.json");

	small_opts(&o, data);
	o.test = false;
	o.max_step = 20;
	o.num_proc = 2;
	o.num_thread = 2;
	o.checkpoint_dir = ck;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(access(f2, R_OK), 0, "4 threads: thread 3's progress");
	cr_assert_eq(r.forced_syncs, 0);
	o.force_sync_interval = 5;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.forced_syncs, 4);
	o.num_proc = 0;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	free(data);
	free(ck);
	free(f2);
}

/* --async_update is rdps's way (pushes overlap the next step); with --sync
 * it is a contradiction. */
Test(train, async_update)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.test = false;
	o.max_step = 5;
	o.async_update = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.steps_done, 5);
	o.sync_push = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--async_update and --sync"), "%s", err);
	free(data);
}

/* --valid with --eval_interval: validations during training, at every
 * multiple of it before the last step (20 and 40 of 50). */
Test(train, eval_interval_validates_during_training)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.test = false;
	o.valid = true;
	o.max_step = 50;
	o.num_thread = 2;
	o.eval_interval = 20;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.valid_evals, 2);
	cr_assert(r.have_valid);
	o.eval_interval = 10000; /* DGL-KE's default: none in 50 steps */
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.valid_evals, 0);
	free(data);
}

/* DGL-KE's --data_path DIR --dataset NAME (the built_in layout), the saved
 * files named by --dataset, and --no_save_emb (results.json only). */
Test(train, data_path_dataset_and_no_save_emb)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *save = path("saved-ds"), *npy = path("saved-ds/mykg_TransE_l2_entity.npy");
	char *results = path("saved-ds/results.json"), *text;

	small_opts(&o, NULL);
	o.data_path = dir;
	o.dataset = "kg";
	o.max_step = 2;
	o.save_path = save;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.test.count, 400, "it read DIR/kg");
	o.dataset = "mykg";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "/mykg is not a dataset"), "%s", err);
	/* --data names the directory, --dataset the files */
	o.data_dir = path("kg");
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(access(npy, R_OK), 0, "%s", npy);
	cr_assert_eq(unlink(npy), 0);
	cr_assert_eq(unlink(results), 0);
	o.no_save_emb = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_neq(access(npy, F_OK), 0, "--no_save_emb saved the embeddings");
	text = rdps_test_slurp(results);
	cr_assert(text && strstr(text, "\"Test\": {"), "%s", text);
	free(text);
	free((char *)o.data_dir);
	free(save);
	free(npy);
	free(results);
}

/* DGL-KE's udd_<order> format: dicts of its own names, triples of ids in
 * the order h, t, r, fields separated by '|'. */
Test(train, udd_format_with_a_delimiter)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *d = path("udd");

	cr_assert_eq(mkdir(d, 0755), 0);
	free(rdps_test_write(d, "ents.tsv", "0\ta\n1\tb\n2\tc\n3\td\n"));
	free(rdps_test_write(d, "rels.tsv", "0\tlikes\n1\tknows\n"));
	free(rdps_test_write(d, "tr.txt", "0|1|0\n1|2|0\n2|3|1\n3|0|1\n0|2|1\n"));
	free(rdps_test_write(d, "va.txt", "1|3|1\n"));
	free(rdps_test_write(d, "te.txt", "2|0|0\n"));
	small_opts(&o, NULL);
	o.data_path = d;
	o.format = "udd_htr";
	o.delimiter = "|";
	o.data_files[0] = "ents.tsv";
	o.data_files[1] = "rels.tsv";
	o.data_files[2] = "tr.txt";
	o.data_files[3] = "va.txt";
	o.data_files[4] = "te.txt";
	o.model.hidden_dim = 8;
	o.batch_size = 4;
	o.neg_sample_size = 2;
	o.max_step = 3;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.test.count, 2);
	/* the order read as written: 'h|r|t' makes relation ids of tails */
	o.format = "udd_hrt";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "tr.txt:1: relation id 1 out of range") ||
		  strstr(err, "tr.txt:2: relation id 2 out of range"), "%s", err);
	o.format = "udd_hxt";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--format udd_hxt"), "%s", err);
	free(d);
}

/* -de / -dr: RotatE's entity rows are doubled (DGL-KE requires -de for
 * it); DistMult doubles nothing and refuses -dr. */
Test(train, double_ent_and_double_rel)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.test = false;
	o.max_step = 1;
	o.model.name = "RotatE";
	o.model.hidden_dim = 8;
	o.model.double_ent = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	o.model.name = "DistMult";
	o.model.double_ent = false;
	o.model.double_rel = true;
	cr_assert_neq(rdps_train_run(&o, &r, err, sizeof(err)), 0);
	cr_assert(strstr(err, "-dr"), "%s", err);
	free(data);
}

Test(train, unknown_model_is_refused)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg");

	small_opts(&o, data);
	o.model.name = "TransQ";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "TransQ") && strstr(err, "TransE_l2") && strstr(err, "DistMult"),
		  "%s", err);
	free(data);
}

/* Servers (processes) for distributed runs. */
static pid_t start_server(const char *ipc, int id, char *const extra[], const char *log)
{
	char sid[8];
	char *argv[32] = { RDPS_BIN, "server", "--ip_config", (char *)ipc, "--server_id", sid,
			   "--transport", "tcp" };
	int n = 8;

	snprintf(sid, sizeof(sid), "%d", id);
	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	return rdps_test_spawn(argv, log);
}

static char *write_ipc(int nservers, int *port)
{
	char text[64], *p;

	*port = rdps_test_free_ports(nservers);
	snprintf(text, sizeof(text), "127.0.0.1 %d %d\n", *port, nservers);
	p = rdps_test_write(dir, "ip_config.txt", text);
	cr_assert(p);
	return p;
}

Test(train, hidden_dim_not_matching_the_servers_is_refused)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *log = path("server.log");
	int port, st;
	char *ipc = write_ipc(1, &port);
	char *extra[] = { "--table", "entity:1000:16", "--table", "relation:12:16", NULL };
	pid_t srv = start_server(ipc, 0, extra, log);

	small_opts(&o, data);
	o.standalone = false;
	o.ip_config = ipc;
	o.transport = "tcp";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "hidden_dim 100 needs entity rows of 100") && strstr(err, "hold 16"),
		  "%s", err);
	kill(srv, SIGTERM);
	rdps_test_wait(srv, 10000, &st);
	free(data);
	free(log);
	free(ipc);
}

Test(train, partition_of_another_dataset_is_refused)
{
	struct rdps_partition_opts po = { .k = 2, .method = RDPS_PARTITION_RANDOM };
	struct rdps_partition_result pr;
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *other = path("other"), *pdir = path("other-part");

	make_dataset("other", 2);
	po.data_dir = other;
	po.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
	small_opts(&o, data);
	o.standalone = false;
	o.ip_config = "/nonexistent"; /* never reached */
	o.partition_dir = pdir;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL, "%s", err);
	cr_assert(strstr(err, "is a partition of another dataset"), "%s", err);
	free(data);
	free(other);
	free(pdir);
}

/* A copy of dataset src as dst (the five files). */
static void copy_dataset(const char *src, const char *dst)
{
	static const char *const files[] = { "entities.dict", "relations.dict", "train.txt",
					     "valid.txt", "test.txt" };
	char *d = path(dst);

	cr_assert_eq(mkdir(d, 0755), 0);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *from, *to, *text;

		cr_assert(asprintf(&from, "%s/%s/%s", dir, src, files[i]) > 0);
		text = rdps_test_slurp(from);
		cr_assert(text, "%s", from);
		to = rdps_test_write(d, files[i], text);
		cr_assert(to);
		free(text);
		free(from);
		free(to);
	}
	free(d);
}

/* Distributed options over data with the partition pdir; the ip_config is
 * never read unless the data passes its checks. */
static void partition_opts(struct rdps_train_opts *o, const char *data, const char *pdir)
{
	small_opts(o, data);
	o->standalone = false;
	o->ip_config = "/nonexistent/ip_config.txt";
	o->partition_dir = pdir;
}

static char *build_partition(const char *data, const char *name)
{
	struct rdps_partition_opts po = { .k = 2, .method = RDPS_PARTITION_RANDOM };
	struct rdps_partition_result pr;
	char err[512], *pdir = path(name);

	po.data_dir = data;
	po.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
	return pdir;
}

Test(train, damaged_entities_dict_is_named_with_its_line)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *pdir = build_partition(data, "kg-part-dict");
	char *bad = path("kg-bad-dict"), *dict = path("kg-bad-dict/entities.dict"), *text, *p;
	FILE *f;

	/* Control: the dataset itself passes, and the run only fails at the
	 * (missing) ip_config. */
	partition_opts(&o, data, pdir);
	cr_assert_neq(rdps_train_run(&o, &r, err, sizeof(err)), 0);
	cr_assert(strstr(err, "/nonexistent/ip_config.txt"), "%s", err);
	/* A name on line 5 changed (the dict still parses, with the same
	 * counts): only the partition's copy can tell. */
	copy_dataset("kg", "kg-bad-dict");
	text = rdps_test_slurp(dict);
	cr_assert(text);
	p = text;
	for (int l = 1; l < 5; l++)
		p = strchr(p, '\n') + 1;
	p = strchr(p, '\t') + 1;
	cr_assert(p[0] == 'e', "%s", p);
	p[0] = 'x';
	f = fopen(dict, "w");
	cr_assert(f && fputs(text, f) >= 0 && !fclose(f));
	partition_opts(&o, bad, pdir);
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL, "%s", err);
	cr_log_info("%s", err);
	cr_assert(strstr(err, "kg-bad-dict/entities.dict:5 is '4\\tx4'"), "%s", err);
	cr_assert(strstr(err, "damaged"), "%s", err);
	cr_assert_null(strstr(err, "another dataset"), "%s", err);
	free(text);
	free(dict);
	free(bad);
	free(pdir);
	free(data);
}

Test(train, truncated_train_txt_is_named_with_its_last_line)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], want[256], *data = path("kg"), *pdir = build_partition(data, "kg-part-cut");
	char *bad = path("kg-cut"), *train = path("kg-cut/train.txt");
	struct stat st;
	unsigned lines = 1;
	char *text;

	copy_dataset("kg", "kg-cut");
	cr_assert_eq(stat(train, &st), 0);
	/* Cut in the middle of a line, as a copy that ran out of space. */
	text = rdps_test_slurp(train);
	cr_assert(text);
	for (off_t i = 0; i < st.st_size / 2; i++)
		lines += text[i] == '\n';
	cr_assert_neq(text[st.st_size / 2 - 1], '\n');
	cr_assert_eq(truncate(train, st.st_size / 2), 0);
	partition_opts(&o, bad, pdir);
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL, "%s", err);
	cr_log_info("%s", err);
	snprintf(want, sizeof(want), "kg-cut/train.txt:%u: the file ends in the middle of this "
		 "line: cut short", lines);
	cr_assert(strstr(err, want), "want '%s' in: %s", want, err);
	cr_assert_null(strstr(err, "another dataset"), "%s", err);
	free(text);
	free(train);
	free(bad);
	free(pdir);
	free(data);
}

Test(train, distributed_matches_standalone)
{
	struct rdps_partition_opts po = { .k = 2, .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result pr;
	struct rdps_train_opts o;
	struct rdps_train_result alone, dist;
	char err[1024], *data = path("wn"), *pdir = path("wn-part"), *logs[2];
	int port, st;
	char *ipc = write_ipc(2, &port);
	char *extra[] = { "--partition", pdir, "--model_name", "TransE_l2", "--hidden_dim", "100",
			  "--gamma", "6", "--lr", "0.1", NULL };
	pid_t srv[2], t1;

	small_opts(&o, data);
	o.batch_size = 1024;
	/* Past the steep part of the curve (MRR ~0.39): at 500 steps (MRR ~0.1,
	 * rising fast) scheduling alone moved the two runs 0.025 apart in CI. */
	o.max_step = 2000;
	o.num_thread = 2;
	/* 18 relations x 12 values: the per-relation reduce takes 4 rounds */
	o.eval_per_relation = true;
	cr_assert_eq(rdps_train_run(&o, &alone, err, sizeof(err)), 0, "%s", err);

	po.data_dir = data;
	po.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
	for (int s = 0; s < 2; s++) {
		cr_assert(asprintf(&logs[s], "%s/server%d.log", dir, s) > 0);
		srv[s] = start_server(ipc, s, extra, logs[s]);
	}
	/* Two trainers of one thread each: as many steps as standalone. */
	o.standalone = false;
	/* --timeout also bounds how far apart the trainers reach each barrier:
	 * the defaults (600 s), as the two share the machine with the rest of
	 * the suite. */
	o.timeout_ms = 0;
	o.ip_config = ipc;
	o.partition_dir = pdir;
	o.transport = "tcp";
	o.num_trainers = 2;
	o.num_thread = 1;
	t1 = fork();
	if (t1 == 0) {
		struct rdps_train_result r1;
		char e1[1024];

		o.rank = 1;
		_exit(rdps_train_run(&o, &r1, e1, sizeof(e1)) ? 1 : 0);
	}
	o.rank = 0;
	cr_assert_eq(rdps_train_run(&o, &dist, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_test_wait(t1, 60000, &st), 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trainer 1 failed");
	for (int s = 0; s < 2; s++) {
		cr_assert_eq(rdps_test_wait(srv[s], 10000, &st), 0, "server %d not shut down", s);
		free(logs[s]);
	}
	cr_log_info("MRR standalone %.4f, distributed %.4f", alone.test.mrr, dist.test.mrr);
	cr_assert(dist.have_test);
	cr_assert_eq(dist.test.count, 10000, "the reduced metrics cover every test triple");
	cr_assert_lt(fabs(dist.test.mrr - alone.test.mrr), 0.02, "standalone %.4f, distributed %.4f",
		     alone.test.mrr, dist.test.mrr);
	/* each trainer ranked half the tests: the reduced sums have them all */
	check_relations(&dist, data, 5000);
	for (uint32_t k = 0; k < dist.num_relations; k++)
		cr_assert_eq(dist.test_rel[k].tail.count, alone.test_rel[k].tail.count,
			     "relation %u", k);
	rdps_train_result_free(&alone);
	rdps_train_result_free(&dist);
	free(data);
	free(pdir);
	free(ipc);
}

Test(train, eval_per_relation_on_some_trainers_only_is_refused)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *log = path("server-perrel.log");
	int port, st;
	char *ipc = write_ipc(1, &port);
	char *extra[] = { "--table", "entity:1000:100", "--table", "relation:12:100", NULL };
	pid_t srv = start_server(ipc, 0, extra, log), t1;

	small_opts(&o, data);
	o.standalone = false;
	o.ip_config = ipc;
	o.transport = "tcp";
	o.num_trainers = 2;
	o.max_step = 10;
	t1 = fork();
	if (t1 == 0) {
		struct rdps_train_result r1;
		char e1[1024];

		o.rank = 1;
		_exit(rdps_train_run(&o, &r1, e1, sizeof(e1)) == -EINVAL &&
			      strstr(e1, "--eval_per_relation") ? 0 : 1);
	}
	o.eval_per_relation = true;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -EINVAL, "%s", err);
	cr_assert(strstr(err, "--eval_per_relation is given to trainer 0 but not to trainer 1"),
		  "%s", err);
	cr_assert_null(r.test_rel, "a failed run leaves nothing to free");
	cr_assert_eq(rdps_test_wait(t1, 60000, &st), 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trainer 1 did not fail the same way");
	kill(srv, SIGTERM);
	rdps_test_wait(srv, 10000, &st);
	free(data);
	free(log);
	free(ipc);
}

Test(train, resume_continues_from_the_saved_step)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("kg"), *ck = path("progress"), *missing = path("none");
	char *file = path("progress/trainer-0-1.json"), *text;

	small_opts(&o, data);
	o.test = false;
	o.num_thread = 2;
	o.max_step = 60;
	o.log_interval = 25;
	o.checkpoint_dir = ck;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.steps_done, 60);
	text = rdps_test_slurp(file);
	cr_assert(text && strstr(text, "\"step\": 60"), "%s", text);
	free(text);
	o.resume = true;
	o.max_step = 100;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.steps_done, 40, "resumed run did %llu steps", (unsigned long long)r.steps_done);
	o.checkpoint_dir = missing;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "trainer-0-0.json"), "%s", err);
	free(data);
	free(ck);
	free(missing);
	free(file);
}

/* The filter holds valid on a partitioned job too (the partition's valid
 * triples were loaded only with --valid): the 5-entity graph above in 2
 * parts, 2 servers with zero rows, one trainer with --test alone. */
Test(train, filter_holds_valid_in_a_distributed_job)
{
	struct rdps_train_opts o;
	struct rdps_train_result r;
	char err[1024], *data = path("filter5d"), *pdir, *logs[2];
	int port, st;
	char *ipc;
	pid_t srv[2];

	write_filter_dataset(data);
	pdir = build_partition(data, "filter5d-part");
	ipc = write_ipc(2, &port);
	for (int s = 0; s < 2; s++) {
		char *extra[] = { "--partition", pdir, "--model_name", "DistMult", "--hidden_dim", "4",
				  "--init", "zeros", NULL };

		cr_assert(asprintf(&logs[s], "%s/filter-server%d.log", dir, s) > 0);
		srv[s] = start_server(ipc, s, extra, logs[s]);
	}
	filter_opts(&o, data, true, false);
	o.standalone = false;
	o.ip_config = ipc;
	o.partition_dir = pdir;
	o.transport = "tcp";
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(r.test.mr, 3.5, 1e-12, "MR %g (4.5: valid not in the filter)", r.test.mr);
	cr_assert_float_eq(r.test.mrr, 7.0 / 24, 1e-12);
	for (int s = 0; s < 2; s++) {
		cr_assert_eq(rdps_test_wait(srv[s], 10000, &st), 0, "server %d not shut down", s);
		free(logs[s]);
	}
	free(data);
	free(pdir);
	free(ipc);
}
