/* SPDX-License-Identifier: MIT */
/*
 * Saved embeddings (rdps/saved.h): a save path written by hand (config.json,
 * the two .npy tables, the dicts) loads into the model it describes, in
 * rdps' and in DGL-KE's config.json spelling; id maps, triple files and
 * lists map names and ids; every bad input is refused with the file and the
 * line or field named, and the same input without the fault loads (the
 * control that the refusal is about that fault).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/saved.h"
#include "rdps/trainer.h"
#include "rdps_test.h"

static char *dir;

static void setup(void)
{
	dir = rdps_test_tmpdir("saved");
	cr_assert_not_null(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(saved, .init = setup, .fini = teardown, .timeout = 60);

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

/* Asserts f fails with ret and an err holding want. */
#define expect_err(call, want_ret, want_text)                                            \
	do {                                                                             \
		char err_[512] = "";                                                     \
		int r_ = (int)(call);                                                    \
		cr_assert_eq(r_, (want_ret), "%s: returned %d (%s)", #call, r_, err_);   \
		cr_assert(strstr(err_, (want_text)), "%s: error '%s' lacks '%s'", #call, \
			  err_, (want_text));                                            \
	} while (0)

/* ------------------------------------------------------------------------ */

Test(saved, idmap_loads_and_looks_up)
{
	struct rdps_idmap *m;
	char err[256], *p;
	uint32_t id = 99;

	put("e.dict", "1\tb\n0\ta c\n\n2\tc\r\n");
	p = path("e.dict");
	cr_assert_eq(rdps_idmap_load(p, 0, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_idmap_count(m), 3);
	cr_assert_str_eq(rdps_idmap_name(m, 0), "a c");
	cr_assert_str_eq(rdps_idmap_name(m, 2), "c");
	cr_assert_null(rdps_idmap_name(m, 3));
	cr_assert_eq(rdps_idmap_lookup(m, "c", &id), 0);
	cr_assert_eq(id, 2);
	cr_assert_eq(rdps_idmap_lookup(m, "a", &id), -ENOENT);
	cr_assert_str_eq(rdps_idmap_path(m), p);
	rdps_idmap_destroy(m);
	free(p);

	/* DGL-KE's udd maps use the data's delimiter */
	put("c.dict", "0,\"Beijing\"\n1,\"China\"\n");
	p = path("c.dict");
	cr_assert_eq(rdps_idmap_load(p, ',', &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_idmap_lookup(m, "\"China\"", &id), 0);
	cr_assert_eq(id, 1);
	rdps_idmap_destroy(m);
	free(p);
}

Test(saved, idmap_errors_name_the_file_and_line)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "0\ta\n1\tb\n0\tc\n", "bad.dict:3: id 0 again (also on line 1)" },
		{ "0\ta\n2\tb\n", "bad.dict: no line has id 1 (ids must be 0..1, each once)" },
		{ "0\ta\n1\ta\n", "bad.dict:2: name 'a' again (also id 0)" },
		{ "0\ta\nx\tb\n", "bad.dict:2: bad id 'x'" },
		{ "0\ta\n1\tb\tc\n", "bad.dict:2: more than 2 fields" },
		{ "0\ta\n1\n", "bad.dict:2: 1 field where 2 are expected (tab-separated)" },
		{ "0\ta\n1\t\n", "bad.dict:2: field 2 is empty" },
	};
	struct rdps_idmap *m = NULL;
	char *p = path("bad.dict");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put("bad.dict", cases[i].text);
		expect_err(rdps_idmap_load(p, '\t', &m, err_, sizeof(err_)), -EINVAL,
			   cases[i].want);
		cr_assert_null(m);
	}
	/* control: a good file at the same path loads */
	put("bad.dict", "0\ta\n1\tb\n");
	{
		char err[256];

		cr_assert_eq(rdps_idmap_load(p, '\t', &m, err, sizeof(err)), 0, "%s", err);
		rdps_idmap_destroy(m);
	}
	free(p);
	p = path("missing.dict");
	expect_err(rdps_idmap_load(p, '\t', &m, err_, sizeof(err_)), -ENOENT,
		   "cannot open ");
	free(p);
}

/* ------------------------------------------------------------------------ */
/* A save path by hand: DistMult, hidden_dim 2, four entities, two relations. */

static const float ENT[4 * 2] = { 1, 0, 2, 0.5f, 3, -1, 0.5f, 4 };
static const float REL[2 * 2] = { 1, 0, 0.5f, 2 };

static void put_save_path(const char *config)
{
	put("config.json", config);
	put_npy("toy_DistMult_entity.npy", ENT, 4, 2);
	put_npy("toy_DistMult_relation.npy", REL, 2, 2);
	put("entities.dict", "0\tw\n1\tx\n2\ty\n3\tz\n");
	put("relations.dict", "0\tp\n1\tq\n");
}

static const char GOOD_CONFIG[] =
	"{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 2,"
	" \"gamma\": 12.0, \"n_entities\": 4, \"n_relations\": 2, \"emb_size_entity\": 2,"
	" \"emb_size_relation\": 2, \"double_ent\": false, \"data_path\": \"/data/toy\","
	" \"some_future_field\": [1, 2]}";

Test(saved, open_reads_what_train_writes)
{
	struct rdps_saved *s;
	const struct rdps_idmap *e;
	char err[512];
	uint32_t id;

	put_save_path(GOOD_CONFIG);
	cr_assert_eq(rdps_saved_open(dir, NULL, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_model_name(rdps_saved_model(s)), "DistMult");
	cr_assert_eq(rdps_model_params(rdps_saved_model(s))->hidden_dim, 2);
	cr_assert_str_eq(rdps_saved_dataset(s), "toy");
	cr_assert_str_eq(rdps_saved_data_path(s), "/data/toy");
	cr_assert_eq(rdps_saved_num_entities(s), 4);
	cr_assert_eq(rdps_saved_num_relations(s), 2);
	cr_assert(!memcmp(rdps_saved_entity_rows(s), ENT, sizeof(ENT)));
	cr_assert(!memcmp(rdps_saved_relation_rows(s), REL, sizeof(REL)));
	e = rdps_saved_entities(s);
	cr_assert_not_null(e);
	cr_assert_eq(rdps_idmap_lookup(e, "y", &id), 0);
	cr_assert_eq(id, 2);
	cr_assert_str_eq(rdps_idmap_name(rdps_saved_relations(s), 1), "q");
	/* DistMult by hand: sum h_k r_k t_k; (x, q, z) = 2*.5*.5 + .5*2*4 = 4.5 */
	cr_assert_float_eq(rdps_saved_score(s, 1, 1, 3), 4.5, 1e-12);
	/* (y, p, w) = 3*1*1 + (-1)*0*0 = 3 */
	cr_assert_float_eq(rdps_saved_score(s, 2, 0, 0), 3.0, 1e-12);
	rdps_saved_close(s);
}

/* DGL-KE's own config.json: "model", "emb_size", no dataset (the .npy is
 * found by its suffix), no dicts in the save path. */
Test(saved, open_reads_dglke_config)
{
	struct rdps_saved *s;
	char err[512];
	double d;

	put("config.json", "{\"model\": \"TransE\", \"emb_size\": 2, \"gamma\": 10.0,"
			   " \"double_ent\": false, \"double_rel\": false}");
	put_npy("wn_TransE_entity.npy", ENT, 4, 2);
	put_npy("wn_TransE_relation.npy", REL, 2, 2);
	cr_assert_eq(rdps_saved_open(dir, NULL, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_model_name(rdps_saved_model(s)), "TransE_l2");
	cr_assert_str_eq(rdps_saved_dataset(s), "wn");
	cr_assert_null(rdps_saved_entities(s));
	cr_assert_null(rdps_saved_data_path(s));
	/* TransE_l2 by hand: gamma - |h + r - t|; (w, q, x): (1.5, 2) - (2, .5) */
	d = sqrt(0.5 * 0.5 + 1.5 * 1.5);
	cr_assert_float_eq(rdps_saved_score(s, 0, 1, 1), 10.0 - d, 1e-6);
	rdps_saved_close(s);
}

Test(saved, command_line_values_replace_config_json)
{
	struct rdps_saved_opts o = { .hidden_dim = 2, .set_gamma = true, .gamma = 3 };
	struct rdps_saved *s;
	char err[512];

	/* no hidden_dim in config.json: refused, named, unless given */
	put_save_path("{\"model_name\": \"DistMult\", \"dataset\": \"toy\"}");
	expect_err(rdps_saved_open(dir, NULL, &s, err_, sizeof(err_)), -EINVAL,
		   "config.json: no \"hidden_dim\" (or DGL-KE's \"emb_size\"); give --hidden_dim");
	cr_assert_eq(rdps_saved_open(dir, &o, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(rdps_model_params(rdps_saved_model(s))->gamma, 3.0f, 0);
	rdps_saved_close(s);
}

Test(saved, bad_save_paths_are_named)
{
	static const struct {
		const char *config, *want;
		int ret;
	} cases[] = {
		{ "{\"dataset\": \"toy\", \"hidden_dim\": 2}",
		  "config.json: no \"model_name\" (or DGL-KE's \"model\"); give --model_name", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": \"2\"}",
		  "config.json: \"hidden_dim\" is not an integer", -EINVAL },
		{ "{\"model_name\": 7, \"dataset\": \"toy\", \"hidden_dim\": 2}",
		  "config.json: \"model_name\" is not a string", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 2,"
		  " \"gamma\": \"x\"}", "config.json: \"gamma\" is not a number", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 2,"
		  " \"double_ent\": 1}", "config.json: \"double_ent\" is not true or false", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 2,"
		  " \"n_entities\": 5}",
		  "config.json: \"n_entities\" is 5 but the entity table has rows: 4", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 2,"
		  " \"emb_size_relation\": 4}",
		  "config.json: \"emb_size_relation\" is 4 but the relation table for this model is "
		  "wide: 2", -EINVAL },
		{ "{\"model_name\": \"Nope\", \"dataset\": \"toy\", \"hidden_dim\": 2}",
		  "config.json: model \"Nope\" with hidden_dim 2", -EINVAL },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"other\", \"hidden_dim\": 2}",
		  "other_DistMult_entity.npy: no such file (config.json: dataset \"other\"", -ENOENT },
		{ "{\"model_name\": \"DistMult\", \"dataset\": \"toy\", \"hidden_dim\": 3}",
		  "toy_DistMult_entity.npy has shape (4, 2), but DistMult with hidden_dim 3 has "
		  "3-wide entity rows (config.json: double_ent false, double_rel false)", -EINVAL },
		{ "{\"model_name\": \"DistMult\",", "config.json:1: ", -EINVAL },
	};
	struct rdps_saved *s = NULL;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put_save_path(cases[i].config);
		expect_err(rdps_saved_open(dir, NULL, &s, err_, sizeof(err_)), cases[i].ret,
			   cases[i].want);
		cr_assert_null(s);
	}
	/* a dict that does not match its table */
	put_save_path(GOOD_CONFIG);
	put("relations.dict", "0\tp\n1\tq\n2\tr\n");
	expect_err(rdps_saved_open(dir, NULL, &s, err_, sizeof(err_)), -EINVAL,
		   "relations.dict has 3 names but ");
	/* a table that is not a float32 .npy */
	put_save_path(GOOD_CONFIG);
	put("toy_DistMult_relation.npy", "not numpy");
	expect_err(rdps_saved_open(dir, NULL, &s, err_, sizeof(err_)), -EINVAL,
		   "toy_DistMult_relation.npy is not a 2-D little-endian float32 C-order .npy");
	/* no config.json at all */
	{
		char *p = path("config.json");

		remove(p);
		free(p);
	}
	expect_err(rdps_saved_open(dir, NULL, &s, err_, sizeof(err_)), -ENOENT,
		   "config.json: no such file (is ");
	/* control: the same save path with a good config.json loads */
	put_save_path(GOOD_CONFIG);
	cr_assert_eq(rdps_saved_open(dir, NULL, &s, err, sizeof(err)), 0, "%s", err);
	rdps_saved_close(s);
}

/* ------------------------------------------------------------------------ */

Test(saved, triple_files_by_name_and_by_id)
{
	struct rdps_idmap *e, *r;
	struct rdps_triple *t;
	struct rdps_triple_file tf = { .num_entities = 4, .num_relations = 2 };
	char err[512], *p;
	size_t n;

	put("entities.dict", "0\tw\n1\tx\n2\ty\n3\tz z\n");
	put("relations.dict", "0\tp\n1\tq\n");
	p = path("entities.dict");
	cr_assert_eq(rdps_idmap_load(p, 0, &e, err, sizeof(err)), 0, "%s", err);
	free(p);
	p = path("relations.dict");
	cr_assert_eq(rdps_idmap_load(p, 0, &r, err, sizeof(err)), 0, "%s", err);
	free(p);

	/* DGL-KE's raw_udd_htr with a comma: head, tail, relation */
	put("train.csv", "w,x,p\n\nz z,y,q\r\n");
	tf = (struct rdps_triple_file){ .delim = ',', .order = "htr", .ent = e, .rel = r,
					.num_entities = 4, .num_relations = 2 };
	p = path("train.csv");
	cr_assert_eq(rdps_triple_file_read(p, &tf, &t, &n, err, sizeof(err)), 2, "%s", err);
	cr_assert_eq(n, 2);
	cr_assert(t[0].h == 0 && t[0].r == 0 && t[0].t == 1);
	cr_assert(t[1].h == 3 && t[1].r == 1 && t[1].t == 2);
	free(t);
	put("train.csv", "w,x,p\nw,v,q\n");
	expect_err(rdps_triple_file_read(p, &tf, &t, &n, err_, sizeof(err_)), -ENOENT,
		   "train.csv:2: entity 'v' is not in ");
	put("train.csv", "w,x,p\nw,x\n");
	expect_err(rdps_triple_file_read(p, &tf, &t, &n, err_, sizeof(err_)), -EINVAL,
		   "train.csv:2: 2 fields where 3 are expected");
	free(p);

	/* udd: ids, checked against the table sizes */
	tf = (struct rdps_triple_file){ .num_entities = 4, .num_relations = 2 };
	put("test.txt", "3\t1\t0\n");
	p = path("test.txt");
	cr_assert_eq(rdps_triple_file_read(p, &tf, &t, &n, err, sizeof(err)), 1, "%s", err);
	cr_assert(t[0].h == 3 && t[0].r == 1 && t[0].t == 0);
	free(t);
	put("test.txt", "3\t1\t0\n0\t2\t1\n");
	expect_err(rdps_triple_file_read(p, &tf, &t, &n, err_, sizeof(err_)), -ERANGE,
		   "test.txt:2: relation id 2 is out of range (2 relations: 0..1)");
	put("test.txt", "4\t1\t0\n");
	expect_err(rdps_triple_file_read(p, &tf, &t, &n, err_, sizeof(err_)), -ERANGE,
		   "test.txt:1: entity id 4 is out of range (4 entities: 0..3)");
	put("test.txt", "w\t1\t0\n");
	expect_err(rdps_triple_file_read(p, &tf, &t, &n, err_, sizeof(err_)), -EINVAL,
		   "test.txt:1: entity 'w' is not an id");
	free(p);
	rdps_idmap_destroy(e);
	rdps_idmap_destroy(r);
}

Test(saved, id_lists)
{
	struct rdps_idmap *e;
	uint32_t *ids;
	char err[512], *p, *mp;
	size_t n;

	put("entities.dict", "0\tw\n1\tx\n2\ty\n");
	mp = path("entities.dict");
	cr_assert_eq(rdps_idmap_load(mp, 0, &e, err, sizeof(err)), 0, "%s", err);
	put("heads.list", "y\nw\ny\n");
	p = path("heads.list");
	cr_assert_eq(rdps_id_list_read(p, e, 3, "entity", &ids, &n, err, sizeof(err)), 3, "%s",
		     err);
	cr_assert(n == 3 && ids[0] == 2 && ids[1] == 0 && ids[2] == 2);
	free(ids);
	put("heads.list", "y\nq\n");
	expect_err(rdps_id_list_read(p, e, 3, "entity", &ids, &n, err_, sizeof(err_)), -ENOENT,
		   "heads.list:2: entity 'q' is not in ");
	put("heads.list", "2\n0\n");
	cr_assert_eq(rdps_id_list_read(p, NULL, 3, "entity", &ids, &n, err, sizeof(err)), 2, "%s",
		     err);
	cr_assert(ids[0] == 2 && ids[1] == 0);
	free(ids);
	put("heads.list", "2\n3\n");
	expect_err(rdps_id_list_read(p, NULL, 3, "entity", &ids, &n, err_, sizeof(err_)), -ERANGE,
		   "heads.list:2: entity id 3 is out of range (3 entities: 0..2)");
	put("heads.list", "\n");
	expect_err(rdps_id_list_read(p, NULL, 3, "entity", &ids, &n, err_, sizeof(err_)), -EINVAL,
		   "heads.list: no entity in the file");
	free(p);
	free(mp);
	rdps_idmap_destroy(e);
}
