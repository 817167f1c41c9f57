// SPDX-License-Identifier: MIT
/* The WordNet dataset (needs Debian's wordnet-base) and partitioning it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helpers.h"
#include "rdps/partition.h"

#define WORDNET_DIR "/usr/share/wordnet"

static char *dir;
static char err[512];

static void setup(void)
{
	th_quiet();
	if (access(WORDNET_DIR "/data.noun", R_OK))
		cr_skip_test("wordnet-base is not installed (" WORDNET_DIR "/data.noun)");
	if (!dir) /* parameterized tests may run init twice */
		dir = th_mkdtemp();
	err[0] = '\0';
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

TestSuite(wordnet, .init = setup, .fini = teardown);

static char *build(const char *name, uint64_t seed, struct rdps_dataset_stats *st)
{
	struct rdps_wordnet_opts o;
	char *out = th_path(dir, name);

	rdps_dataset_wordnet_defaults(&o);
	o.seed = seed;
	cr_assert_eq(rdps_dataset_wordnet(out, &o, st, err, sizeof(err)), 0, "%s", err);
	return out;
}

Test(wordnet, wn18_sized_and_valid)
{
	struct rdps_dataset_stats st;
	char *out = build("wn", 0, &st);
	struct rdps_dataset *ds;
	uint32_t id;
	uint64_t total;

	cr_assert_eq(st.num_entities, 40943);
	cr_assert_eq(st.num_relations, 18);
	cr_assert_eq(st.num_triples[RDPS_SPLIT_VALID], 5000);
	cr_assert_eq(st.num_triples[RDPS_SPLIT_TEST], 5000);
	total = st.num_triples[0] + st.num_triples[1] + st.num_triples[2];
	cr_assert(total > 140000 && total < 180000, "%llu triples", (unsigned long long)total);
	/* The reader accepts it, including "valid/test entities occur in train". */
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		cr_assert_eq(rdps_dataset_scan(ds, (enum rdps_split)s, NULL, NULL, err, sizeof(err)),
			     (int64_t)st.num_triples[s], "%s", err);
	cr_assert_eq(rdps_dataset_relation_id(ds, "_hypernym", &id), 0);
	cr_assert_eq(rdps_dataset_relation_id(ds, "_member_of_domain_usage", &id), 0);
	/* "entity" (noun synset 00001740) has hyponyms in the core. */
	cr_assert_eq(rdps_dataset_entity_id(ds, "00001740.n", &id), 0);
	cr_assert_eq(id, 0, "dict is ordered by part of speech, then offset");
	rdps_dataset_close(ds);
	free(out);
}

Test(wordnet, split_depends_only_on_seed)
{
	struct rdps_dataset_stats st;
	char *a = build("a", 1, &st), *b = build("b", 1, &st), *c = build("c", 2, &st);
	struct rdps_triples ta, tb, tc;
	struct rdps_dataset *da, *db, *dc;

	cr_assert_eq(rdps_dataset_open(a, &da, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_open(b, &db, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_open(c, &dc, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_load(da, RDPS_SPLIT_TEST, &ta, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_load(db, RDPS_SPLIT_TEST, &tb, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_dataset_load(dc, RDPS_SPLIT_TEST, &tc, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(memcmp(ta.ids, tb.ids, ta.count * 12), 0, "same seed, different test set");
	cr_assert_neq(memcmp(ta.ids, tc.ids, ta.count * 12), 0, "seed ignored");
	/* The core (the entity dict) does not depend on the seed. */
	cr_assert_eq(rdps_dataset_num_entities(da), rdps_dataset_num_entities(dc));
	cr_assert_str_eq(rdps_dataset_entity_name(da, 12345), rdps_dataset_entity_name(dc, 12345));
	rdps_dataset_triples_free(&ta);
	rdps_dataset_triples_free(&tb);
	rdps_dataset_triples_free(&tc);
	rdps_dataset_close(da);
	rdps_dataset_close(db);
	rdps_dataset_close(dc);
	free(a);
	free(b);
	free(c);
}

Test(wordnet, missing_wordnet_dir)
{
	struct rdps_wordnet_opts o;
	struct rdps_dataset_stats st;
	char *out = th_path(dir, "wn");

	rdps_dataset_wordnet_defaults(&o);
	o.wordnet_dir = dir;
	cr_assert_eq(rdps_dataset_wordnet(out, &o, &st, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "data.noun: not found"), "%s", err);
	cr_assert_eq(th_count_entries(dir), 0);
	free(out);
}

/* Acceptance: on WordNet, METIS keeps clearly more triples local than random. */
Test(wordnet, metis_beats_random_k2_k4, .timeout = 120)
{
	struct rdps_dataset_stats st;
	char *data = build("wn", 0, &st);
	static const uint32_t ks[] = { 2, 4 };

	for (size_t i = 0; i < 2; i++) {
		struct rdps_partition_opts o = { .data_dir = data, .k = ks[i], .force = 1 };
		struct rdps_partition_result rm, rr;
		struct rdps_partition *p;
		char *pdir = th_path(dir, "p");

		o.out_dir = pdir;
		o.method = RDPS_PARTITION_RANDOM;
		cr_assert_eq(rdps_partition_build(&o, &rr, err, sizeof(err)), 0, "%s", err);
		o.method = RDPS_PARTITION_METIS;
		cr_assert_eq(rdps_partition_build(&o, &rm, err, sizeof(err)), 0, "%s", err);
		cr_log_info("wordnet k=%u: local-triple fraction metis %.4f, random %.4f", ks[i],
			    rm.local_triple_fraction, rr.local_triple_fraction);
		/* random keeps about 1/k local */
		cr_assert_float_eq(rr.local_triple_fraction, 1.0 / ks[i], 0.02);
		cr_assert_gt(rm.local_triple_fraction, rr.local_triple_fraction + 0.25);
		cr_assert_gt(rm.local_triple_fraction, 0.85);
		/* partition.json reports the same number */
		cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
		cr_assert_float_eq(rdps_partition_get_info(p)->local_triple_fraction,
				   rm.local_triple_fraction, 1e-12);
		cr_assert_eq(rdps_partition_get_info(p)->method, RDPS_PARTITION_METIS);
		rdps_partition_close(p);
		free(pdir);
	}
	free(data);
}
