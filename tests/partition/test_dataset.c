// SPDX-License-Identifier: MIT
/* Dataset reader, import and synthetic generator, and a dataset checked
 * against a partition built from it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"

static char *dir;
static char err[512];

static void setup(void)
{
	th_quiet();
	if (!dir) /* parameterized tests may run init twice */
		dir = th_mkdtemp();
	err[0] = '\0';
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

TestSuite(dataset, .init = setup, .fini = teardown);

/* "rdps dataset wordnet data/wn18" in a fresh checkout: the output's
 * missing parents are made (mkdir -p), as a user expects; a parent that is
 * a file is named. */
Test(dataset, output_parents_are_made)
{
	struct rdps_synth_opts o;
	struct rdps_dataset_stats st;
	char *out = th_path(dir, "a/b/out"), *blocked = th_path(dir, "f/out");
	struct stat sb;

	rdps_dataset_synth_defaults(&o);
	o.num_entities = 100;
	o.num_relations = 4;
	o.num_triples = 400;
	o.num_valid = o.num_test = 10;
	cr_assert_eq(rdps_dataset_synth(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(stat(out, &sb), 0);
	cr_assert(S_ISDIR(sb.st_mode));
	th_write(dir, "f", "a file\n");
	cr_assert_eq(rdps_dataset_synth(blocked, &o, &st, err, sizeof(err)), -ENOTDIR);
	cr_assert(strstr(err, "f/out.tmp-") || strstr(err, "/f: "), "%s", err);
	free(out);
	free(blocked);
}

/* Opens dir and scans every split; returns the first error. */
static int scan_all(void)
{
	struct rdps_dataset *ds;
	int ret = rdps_dataset_open(dir, &ds, err, sizeof(err));

	for (int s = 0; !ret && s < RDPS_SPLIT_COUNT; s++) {
		int64_t n = rdps_dataset_scan(ds, (enum rdps_split)s, NULL, NULL, err, sizeof(err));

		if (n < 0)
			ret = (int)n;
	}
	rdps_dataset_close(ds);
	return ret;
}

Test(dataset, reads_tiny_dataset)
{
	struct rdps_dataset *ds;
	struct rdps_triples t;
	uint32_t id;

	th_tiny_dataset(dir);
	cr_assert_eq(rdps_dataset_open(dir, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_num_entities(ds), 6);
	cr_assert_eq(rdps_dataset_num_relations(ds), 2);
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 4), "e");
	cr_assert_null(rdps_dataset_entity_name(ds, 6));
	cr_assert_eq(rdps_dataset_relation_id(ds, "knows", &id), 0);
	cr_assert_eq(id, 1);
	cr_assert_eq(rdps_dataset_entity_id(ds, "zz", &id), -ENOENT);
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.count, 7);
	cr_assert_eq(t.ids[0], 0);
	cr_assert_eq(t.ids[1], 0);
	cr_assert_eq(t.ids[2], 1);
	cr_assert_eq(t.ids[3 * 6 + 1], 1);
	rdps_dataset_triples_free(&t);
	/* "\r\n" and a blank line are accepted. */
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TEST, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.ids[0], 3);
	cr_assert_eq(t.ids[2], 5);
	rdps_dataset_triples_free(&t);
	rdps_dataset_triples_free(&t);
	rdps_dataset_close(ds);
	rdps_dataset_close(NULL);
}

Test(dataset, wrong_field_count_names_file_and_line)
{
	th_tiny_dataset(dir);
	th_write(dir, "train.txt", "a\tlikes\tb\nb\tlikes\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:2: expected 3 tab-separated fields, found 2"), "%s", err);

	th_write(dir, "train.txt", "a\tlikes\tb\tc\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:1: expected 3 tab-separated fields, found 4"), "%s", err);
}

Test(dataset, empty_names)
{
	th_tiny_dataset(dir);
	th_write(dir, "train.txt", "a\tlikes\tb\n\tlikes\tb\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:2: empty head"), "%s", err);

	th_write(dir, "train.txt", "a\t\tb\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:1: empty relation"), "%s", err);

	th_write(dir, "entities.dict", "0\ta\n1\t\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "entities.dict:2: empty name"), "%s", err);
}

Test(dataset, unknown_names)
{
	th_tiny_dataset(dir);
	th_write(dir, "train.txt", "a\tlikes\tb\na\thates\tb\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:2: unknown relation 'hates'"), "%s", err);

	th_write(dir, "train.txt", "a\tlikes\tzed\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "train.txt:1: unknown entity 'zed'"), "%s", err);
}

Test(dataset, valid_test_entity_missing_from_train)
{
	th_tiny_dataset(dir);
	th_write(dir, "train.txt", "a\tlikes\tb\nb\tknows\tc\n");
	th_write(dir, "valid.txt", "a\tlikes\tc\n");
	th_write(dir, "test.txt", "a\tlikes\tb\n\nb\tlikes\tf\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "test.txt:3: entity 'f' does not occur in train.txt"), "%s", err);

	th_write(dir, "valid.txt", "a\tknows\tb\nd\tlikes\ta\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "valid.txt:2: entity 'd' does not occur in train.txt"), "%s", err);
}

Test(dataset, bad_dicts)
{
	th_tiny_dataset(dir);
	th_write(dir, "relations.dict", "0\tlikes\n0\tknows\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "relations.dict:2: relation id 0 repeats"), "%s", err);

	th_write(dir, "relations.dict", "0\tlikes\n1\tlikes\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "relations.dict:2: duplicate relation name 'likes'"), "%s", err);

	th_write(dir, "relations.dict", "0\tlikes\nx\tknows\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "relations.dict:2: bad relation id 'x'"), "%s", err);

	th_write(dir, "relations.dict", "1\tlikes\n2\tknows\n");
	cr_assert_eq(scan_all(), -EINVAL);
	cr_assert(strstr(err, "relations.dict:1: relation id 1 leaves a gap"), "%s", err);
}

Test(dataset, dict_ids_in_any_order)
{
	struct rdps_dataset *ds;

	th_tiny_dataset(dir);
	th_write(dir, "relations.dict", "1\tknows\n0\tlikes\n");
	cr_assert_eq(rdps_dataset_open(dir, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_dataset_relation_name(ds, 0), "likes");
	rdps_dataset_close(ds);
}

Test(dataset, missing_file_is_named)
{
	struct rdps_dataset *ds;

	th_tiny_dataset(dir);
	th_write(dir, "entities.dict", "");
	cr_assert_eq(rdps_dataset_open(dir, &ds, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "entities.dict: no entries"), "%s", err);
	th_tiny_dataset(dir);
	cr_assert_eq(rdps_dataset_open(dir, &ds, err, sizeof(err)), 0);
	{
		char *p = th_path(dir, "valid.txt");

		unlink(p);
		free(p);
	}
	cr_assert_eq(rdps_dataset_scan(ds, RDPS_SPLIT_VALID, NULL, NULL, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "valid.txt: No such file"), "%s", err);
	rdps_dataset_close(ds);
}

/* ---- import ---- */

Test(dataset, import_raw_builds_dicts)
{
	struct rdps_import_opts o = { .format = RDPS_IMPORT_RAW };
	struct rdps_dataset_stats st;
	char *in = th_path(dir, "in"), *out = th_path(dir, "out");
	struct rdps_dataset *ds;

	mkdir(in, 0755);
	th_write(in, "train.tsv", "x\tr1\ty\r\ny\tr2\tz\n");
	th_write(in, "valid.tsv", "x\tr2\tz\n");
	th_write(in, "test.tsv", "z\tr1\tx\n");
	o.in_dir = in;
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.num_entities, 3);
	cr_assert_eq(st.num_relations, 2);
	cr_assert_eq(st.num_triples[0], 2);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 2), "z");
	cr_assert_eq(rdps_dataset_scan(ds, RDPS_SPLIT_TEST, NULL, NULL, err, sizeof(err)), 1, "%s", err);
	rdps_dataset_close(ds);
	free(in);
	free(out);
}

Test(dataset, import_raw_htr_and_missing_entity)
{
	struct rdps_import_opts o = { .format = RDPS_IMPORT_RAW, .order = "htr" };
	struct rdps_dataset_stats st;
	char *in = th_path(dir, "in"), *out = th_path(dir, "out");
	struct rdps_dataset *ds;

	mkdir(in, 0755);
	th_write(in, "train.txt", "x\ty\tr1\n");
	th_write(in, "valid.txt", "x\ty\tr1\n");
	th_write(in, "test.txt", "x\ty\tr1\ny\tq\tr1\n");
	o.in_dir = in;
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "test.txt:2: entity 'q' does not occur in train"), "%s", err);
	cr_assert_not(th_exists(dir, "out"));
	cr_assert_eq(th_count_entries(dir), 1, "temporary output left behind");

	th_write(in, "test.txt", "y\tx\tr1\n");
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rdps_dataset_relation_name(ds, 0), "r1");
	rdps_dataset_close(ds);
	/* OUT exists now: refused without force, replaced with it. */
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -EEXIST);
	o.force = 1;
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(th_count_entries(dir), 2);
	free(in);
	free(out);
}

Test(dataset, import_udd_ids)
{
	struct rdps_import_opts o = { .format = RDPS_IMPORT_UDD };
	struct rdps_dataset_stats st;
	char *in = th_path(dir, "in"), *out = th_path(dir, "out");
	struct rdps_dataset *ds;
	struct rdps_triples t;

	mkdir(in, 0755);
	th_write(in, "entities.dict", "0\tx\n1\ty\n2\tz\n");
	th_write(in, "relations.dict", "0\tr\n");
	th_write(in, "train.txt", "0\t0\t1\n1\t0\t2\n");
	th_write(in, "valid.txt", "2\t0\t0\n");
	th_write(in, "test.txt", "0\t0\t7\n");
	o.in_dir = in;
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "test.txt:1: entity id 7 out of range"), "%s", err);
	th_write(in, "test.txt", "0\t0\t2\n");
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_VALID, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.ids[0], 2);
	cr_assert_eq(t.ids[2], 0);
	rdps_dataset_triples_free(&t);
	rdps_dataset_close(ds);
	free(in);
	free(out);
}

/* DGL-KE's raw_udd_<order> with --delimiter: the order letters say what
 * each column holds (rth: relation, tail, head), a multi-character
 * delimiter splits, white space around a line goes (DGL-KE's strip()),
 * ids are numbered head before tail by first appearance; a name holding a
 * tab is refused (the raw layout separates with it). */
Test(dataset, import_raw_with_a_delimiter_and_any_order)
{
	struct rdps_import_opts o = { .format = RDPS_IMPORT_RAW, .order = "rth", .delimiter = "::" };
	struct rdps_dataset_stats st;
	char *in = th_path(dir, "in"), *out = th_path(dir, "out");
	struct rdps_dataset *ds;
	struct rdps_triples t;

	mkdir(in, 0755);
	th_write(in, "tr.csv", "likes::bob smith::alice\n  knows::carol::bob smith \r\n");
	th_write(in, "va.csv", "knows::alice::carol\n");
	th_write(in, "te.csv", "likes::carol::alice\n");
	o.in_dir = in;
	o.files[0] = "tr.csv";
	o.files[1] = "va.csv";
	o.files[2] = "te.csv";
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.num_entities, 3);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	/* line 1: head alice (id 0), tail "bob smith" (1); line 2: head bob */
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 0), "alice");
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 1), "bob smith");
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 2), "carol");
	cr_assert_str_eq(rdps_dataset_relation_name(ds, 1), "knows");
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert(t.count == 2 && t.ids[3] == 1 && t.ids[4] == 1 && t.ids[5] == 2);
	rdps_dataset_triples_free(&t);
	rdps_dataset_close(ds);
	/* a field count off, and a tab inside a name */
	o.force = 1;
	th_write(in, "te.csv", "likes::carol\n");
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "te.csv:1: expected 3 fields separated by '::', found 2"), "%s", err);
	th_write(in, "te.csv", "likes::car\tol::alice\n");
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "te.csv:1: the tail 'car\tol' holds a tab"), "%s", err);
	free(in);
	free(out);
}

/* DGL-KE's udd_<order> with dicts of other names, and a train file only
 * (DGL-KE's data_files of 3): valid.txt and test.txt are written empty. */
Test(dataset, import_udd_named_dicts_train_only)
{
	struct rdps_import_opts o = { .format = RDPS_IMPORT_UDD, .order = "trh", .delimiter = ",",
				      .entity_file = "e.tsv", .relation_file = "r.tsv",
				      .train_only = 1 };
	struct rdps_dataset_stats st;
	char *in = th_path(dir, "in"), *out = th_path(dir, "out");
	struct rdps_dataset *ds;
	struct rdps_triples t;

	mkdir(in, 0755);
	th_write(in, "e.tsv", "0\tx\n1\ty\n2\tz\n");
	th_write(in, "r.tsv", "0\tr\n1\ts\n");
	th_write(in, "tr.txt", "1,0,0\n2,1,1\n");
	o.in_dir = in;
	o.files[0] = "tr.txt";
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert(st.num_triples[0] == 2 && st.num_triples[1] == 0 && st.num_triples[2] == 0);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &t, err, sizeof(err)), 0, "%s", err);
	/* "2,1,1": tail 2, relation 1, head 1 */
	cr_assert(t.count == 2 && t.ids[3] == 1 && t.ids[4] == 1 && t.ids[5] == 2);
	rdps_dataset_triples_free(&t);
	cr_assert_eq(rdps_dataset_scan(ds, RDPS_SPLIT_TEST, NULL, NULL, err, sizeof(err)), 0);
	rdps_dataset_close(ds);
	o.entity_file = "missing.tsv";
	o.force = 1;
	cr_assert_eq(rdps_dataset_import(out, &o, &st, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "missing.tsv"), "%s", err);
	free(in);
	free(out);
}

/* ---- synth ---- */

static uint64_t file_hash(const char *d, const char *name)
{
	char *p = th_path(d, name);
	FILE *f = fopen(p, "rb");
	uint64_t h = 1469598103934665603ull;
	int c;

	cr_assert(f);
	while ((c = fgetc(f)) != EOF)
		h = (h ^ (uint64_t)c) * 1099511628211ull;
	fclose(f);
	free(p);
	return h;
}

Test(dataset, synth_valid_and_deterministic)
{
	struct rdps_synth_opts o;
	struct rdps_dataset_stats st;
	struct rdps_dataset *ds;
	struct rdps_triples t;
	char *a = th_path(dir, "a"), *b = th_path(dir, "b"), *c = th_path(dir, "c");

	rdps_dataset_synth_defaults(&o);
	o.num_entities = 3000;
	o.num_relations = 12;
	o.num_triples = 30000;
	o.num_communities = 10;
	o.num_valid = 500;
	o.num_test = 400;
	o.seed = 7;
	cr_assert_eq(rdps_dataset_synth(a, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.num_triples[0], 29100);
	cr_assert_eq(st.num_triples[1], 500);
	cr_assert_eq(st.num_triples[2], 400);
	cr_assert_eq(rdps_dataset_synth(b, &o, &st, err, sizeof(err)), 0, "%s", err);
	o.seed = 8;
	cr_assert_eq(rdps_dataset_synth(c, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(file_hash(a, "train.txt"), file_hash(b, "train.txt"));
	cr_assert_eq(file_hash(a, "test.txt"), file_hash(b, "test.txt"));
	cr_assert_neq(file_hash(a, "train.txt"), file_hash(c, "train.txt"));

	/* The reader accepts it: every valid/test entity and relation is in
	 * train; no self-loops; triples unique. */
	cr_assert_eq(rdps_dataset_open(a, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_scan(ds, RDPS_SPLIT_VALID, NULL, NULL, err, sizeof(err)), 500, "%s", err);
	cr_assert_eq(rdps_dataset_scan(ds, RDPS_SPLIT_TEST, NULL, NULL, err, sizeof(err)), 400, "%s", err);
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &t, err, sizeof(err)), 0, "%s", err);
	{
		uint8_t *seen = calloc((size_t)3000 * 12, 1);

		for (uint64_t i = 0; i < t.count; i++) {
			const uint32_t *x = &t.ids[3 * i];

			cr_assert_neq(x[0], x[2], "self-loop at %llu", (unsigned long long)i);
			cr_assert_not(seen[x[0] * 12 + x[1]], "(head, relation) repeats");
			seen[x[0] * 12 + x[1]] = 1;
		}
		free(seen);
	}
	rdps_dataset_triples_free(&t);
	rdps_dataset_close(ds);
	free(a);
	free(b);
	free(c);
}

Test(dataset, synth_rejects_impossible_sizes)
{
	struct rdps_synth_opts o;
	struct rdps_dataset_stats st;
	char *a = th_path(dir, "a");

	rdps_dataset_synth_defaults(&o);
	o.num_entities = 100;
	o.num_relations = 2;
	o.num_triples = 500;
	o.num_valid = o.num_test = 10;
	cr_assert_eq(rdps_dataset_synth(a, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--triples"), "%s", err);
	o.num_triples = 150;
	o.num_communities = 101;
	cr_assert_eq(rdps_dataset_synth(a, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--communities"), "%s", err);
	cr_assert_eq(th_count_entries(dir), 0);
	free(a);
}

/* A dataset against a partition built from it: unchanged it passes; a line
 * added to relations.dict and a valid.txt that grew are each named (as
 * damage or an edit); every split different is another dataset. */
Test(dataset, partition_check_names_the_file_that_differs)
{
	struct rdps_partition_opts po = { .k = 2, .method = RDPS_PARTITION_RANDOM };
	struct rdps_partition_result pr;
	struct rdps_partition *p;
	char *data = th_path(dir, "data"), *pdir = th_path(dir, "part");

	cr_assert_eq(mkdir(data, 0755), 0);
	th_tiny_dataset(data);
	po.data_dir = data;
	po.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_partition_check_dataset(p, data, err, sizeof(err)), 0, "%s", err);

	th_write(data, "relations.dict", "0\tlikes\n1\tknows\n2\thates\n");
	cr_assert_eq(rdps_partition_check_dataset(p, data, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "/data/relations.dict:3: '2\\thates' is not in the copy") &&
		  strstr(err, "/part/relations.dict, which ends after line 2") &&
		  strstr(err, "(damaged, or edited after"), "%s", err);
	th_tiny_dataset(data);

	th_write(data, "valid.txt", "a\tlikes\tc\nb\tlikes\tc\n");
	cr_assert_eq(rdps_partition_check_dataset(p, data, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "/data/valid.txt has 20 bytes (2 lines), 10 when") &&
		  strstr(err, "(damaged, or edited after"), "%s", err);

	th_write(data, "train.txt", "a\tlikes\tb\n");
	th_write(data, "test.txt", "a\tlikes\tb\n");
	cr_assert_eq(rdps_partition_check_dataset(p, data, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "is a partition of another dataset ('data' at ") &&
		  strstr(err, "/data/train.txt has") && strstr(err, "/data/test.txt has"), "%s", err);
	rdps_partition_close(p);
	free(data);
	free(pdir);
}
