// SPDX-License-Identifier: MIT
/* The WordNet dataset (needs Debian's wordnet-base) and partitioning it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
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

static char *build_cut(const char *name, uint64_t seed, enum rdps_wordnet_cut cut,
		       struct rdps_dataset_stats *st)
{
	struct rdps_wordnet_opts o;
	char *out = th_path(dir, name);

	rdps_dataset_wordnet_defaults(&o);
	o.seed = seed;
	o.cut = cut;
	cr_assert_eq(rdps_dataset_wordnet(out, &o, st, err, sizeof(err)), 0, "%s", err);
	return out;
}

static char *build(const char *name, uint64_t seed, struct rdps_dataset_stats *st)
{
	return build_cut(name, seed, RDPS_WORDNET_CUT_WN18, st);
}

/* Triples per relation over all three splits. */
static void relation_counts(struct rdps_dataset *ds, uint64_t *count)
{
	memset(count, 0, 18 * sizeof(*count));
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		struct rdps_triples t;

		cr_assert_eq(rdps_dataset_load(ds, (enum rdps_split)s, &t, err, sizeof(err)), 0,
			     "%s", err);
		for (uint64_t i = 0; i < t.count; i++)
			count[t.ids[3 * i + 1]]++;
		rdps_dataset_triples_free(&t);
	}
}

/*
 * The default cut is WN18's entity set: WN18 has 40,943 entities and 151,442
 * triples; here 4 of its synsets have no WN18 relation left and 0.3% of the
 * triples are missing (WN18 names synsets by offset only, so it merges the
 * few synsets of two parts of speech that share one). The relation mix is
 * WN18's: counts in its train + test files (146,442 triples), scaled to all.
 */
Test(wordnet, wn18_sized_and_valid)
{
	static const struct {
		const char *name;
		double wn18;
	} mix[] = {
		{ "_hypernym", 34796 + 1251 },	    { "_derivationally_related_form", 29715 + 1074 },
		{ "_member_meronym", 7402 + 253 },  { "_has_part", 4816 + 172 },
		{ "_also_see", 1299 + 56 },	    { "_verb_group", 1138 + 39 },
		{ "_instance_hypernym", 2921 + 122 },
	};
	struct rdps_dataset_stats st;
	char *out = build("wn", 0, &st);
	struct rdps_dataset *ds;
	uint64_t count[18];
	uint32_t id;
	uint64_t total;

	cr_assert_eq(st.num_entities, 40939);
	cr_assert_eq(st.num_relations, 18);
	cr_assert_eq(st.num_triples[RDPS_SPLIT_VALID], 5000);
	cr_assert_eq(st.num_triples[RDPS_SPLIT_TEST], 5000);
	total = st.num_triples[0] + st.num_triples[1] + st.num_triples[2];
	cr_assert_eq(total, 150995);
	/* The reader accepts it, including "valid/test entities occur in train". */
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		cr_assert_eq(rdps_dataset_scan(ds, (enum rdps_split)s, NULL, NULL, err, sizeof(err)),
			     (int64_t)st.num_triples[s], "%s", err);
	cr_assert_eq(rdps_dataset_relation_id(ds, "_hypernym", &id), 0);
	cr_assert_eq(rdps_dataset_relation_id(ds, "_member_of_domain_usage", &id), 0);
	relation_counts(ds, count);
	for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
		double want = mix[i].wn18 * 151442 / 146442;

		cr_assert_eq(rdps_dataset_relation_id(ds, mix[i].name, &id), 0);
		cr_assert(fabs((double)count[id] - want) < 0.03 * want + 20,
			  "%s: %llu triples, WN18 about %.0f", mix[i].name,
			  (unsigned long long)count[id], want);
	}
	/* WN18 has 86 _similar_to (few adjectives); the dense core thousands */
	cr_assert_eq(rdps_dataset_relation_id(ds, "_similar_to", &id), 0);
	cr_assert_lt(count[id], 100);
	/* WN18's 00001740 is the verb "breathe" (with hyponyms), not the noun
	 * "entity" (only three hyponyms, not in WN18), the adjective or the adverb
	 * of that offset. The dict is ordered by part of speech, then offset. */
	cr_assert_eq(rdps_dataset_entity_id(ds, "00001740.v", &id), 0);
	cr_assert_neq(rdps_dataset_entity_id(ds, "00001740.n", &id), 0);
	cr_assert_str_eq(rdps_dataset_entity_name(ds, 0), "00001930.n");
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

/* The dense core (any WordNet edition) is sized by target_entities. */
Test(wordnet, core_cut_sized)
{
	struct rdps_dataset_stats st;
	char *out = build_cut("core", 0, RDPS_WORDNET_CUT_CORE, &st);
	struct rdps_dataset *ds;
	uint64_t count[18];
	uint32_t id;

	cr_assert_eq(st.num_entities, 40943);
	cr_assert_eq(st.num_relations, 18);
	cr_assert_eq(rdps_dataset_open(out, &ds, err, sizeof(err)), 0, "%s", err);
	relation_counts(ds, count);
	/* peeling keeps the adjective clusters WN18 does not have */
	cr_assert_eq(rdps_dataset_relation_id(ds, "_similar_to", &id), 0);
	cr_assert_gt(count[id], 1000);
	rdps_dataset_close(ds);
	free(out);
}

/* A WordNet that is not 3.0: the WN18 cut refuses it, naming the file; the
 * core cut takes it. */
Test(wordnet, wn18_cut_needs_wordnet_30)
{
	static const char *files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };
	char *wdir = th_path(dir, "wordnet"), *out = th_path(dir, "wn");
	struct rdps_wordnet_opts o;
	struct rdps_dataset_stats st;

	cr_assert_eq(mkdir(wdir, 0755), 0);
	for (size_t i = 0; i < 4; i++) {
		char *p = th_path(wdir, files[i]);
		FILE *f = fopen(p, "w");

		cr_assert(f);
		fprintf(f, "  1 license header line  \n");
		if (i == 0)
			fprintf(f, "00000100 03 n 01 thing 0 001 ~ 00000200 n 0000 | a thing  \n"
				   "00000200 03 n 01 stone 0 001 @ 00000100 n 0000 | a stone  \n");
		fclose(f);
		free(p);
	}
	rdps_dataset_wordnet_defaults(&o);
	o.wordnet_dir = wdir;
	o.num_valid = 0;
	o.num_test = 0;
	cr_assert_eq(rdps_dataset_wordnet(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "wordnet/data.noun: 2 synsets, WordNet 3.0 has 82115"), "%s", err);
	cr_assert(strstr(err, "--cut core"), "%s", err);
	o.cut = RDPS_WORDNET_CUT_CORE;
	cr_assert_eq(rdps_dataset_wordnet(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.num_entities, 2);
	cr_assert_eq(st.num_triples[RDPS_SPLIT_TRAIN], 2);
	free(out);
	free(wdir);
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
