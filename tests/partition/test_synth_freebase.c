// SPDX-License-Identifier: MIT
// needs-rdps-tool
/* rdps_dataset_synth_like (rdps dataset synth --like freebase86m --scale F):
 * counts, the degree and relation laws, split integrity, community structure
 * (METIS against random), determinism, memory independent of F, the errors
 * before work and the CLI. Scales 0.0005 to 0.002 (43k to 172k entities). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"

/* DGL-KE's Freebase, and the laws the generator promises. */
#define FB_ENTITIES 86054151.0
#define FB_RELATIONS 14824.0
#define FB_TRAIN 304727650.0
#define FB_VALID 16929318.0
#define FB_TEST 16929308.0
#define DEGREE_EXP 2.15
#define RELATION_EXP 0.7

static char *dir;
static char err[512];

static void setup(void)
{
	th_quiet();
	if (!dir)
		dir = th_mkdtemp();
	err[0] = '\0';
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

TestSuite(synth_freebase, .init = setup, .fini = teardown);

static uint64_t rounded(double f, double count)
{
	return (uint64_t)llround(f * count);
}

/* Generates dir/name at scale f; returns its path (malloc'd). */
static char *gen(const char *name, double f, uint64_t seed, unsigned threads,
		 struct rdps_dataset_stats *st)
{
	struct rdps_synth_like_opts o;
	struct rdps_dataset_stats tmp;
	char *out = th_path(dir, name);

	rdps_dataset_synth_like_defaults(&o);
	o.scale = f;
	o.seed = seed;
	o.threads = threads;
	cr_assert_eq(rdps_dataset_synth_like(out, &o, st ? st : &tmp, err, sizeof(err)), 0,
		     "scale %g: %s", f, err);
	return out;
}

/* All three splits, ids as in the dicts. */
struct data {
	struct rdps_dataset *ds;
	uint32_t n, r;
	struct rdps_triples t[RDPS_SPLIT_COUNT];
};

static void load(const char *path, struct data *d)
{
	cr_assert_eq(rdps_dataset_open(path, &d->ds, err, sizeof(err)), 0, "%s", err);
	d->n = rdps_dataset_num_entities(d->ds);
	d->r = rdps_dataset_num_relations(d->ds);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		cr_assert_eq(rdps_dataset_load(d->ds, (enum rdps_split)s, &d->t[s], err, sizeof(err)),
			     0, "%s", err);
}

static void unload(struct data *d)
{
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		rdps_dataset_triples_free(&d->t[s]);
	rdps_dataset_close(d->ds);
}

/* ---------------------------------------------------------------------- */

/* Each count is round(F x Freebase86m's), in the stats, the dicts and the
 * files; 0.00123 rounds some counts up and some down. */
Test(synth_freebase, counts_are_scaled_freebase)
{
	static const double scales[] = { 0.0005, 0.00123 };
	struct rdps_synth_like_opts o;
	struct rdps_synth_like_plan plan;

	for (size_t k = 0; k < RDPS_ARRAY_SIZE(scales); k++) {
		double f = scales[k];
		struct rdps_dataset_stats st;
		char name[32];
		char *path;
		struct rdps_dataset *ds;
		const double want[RDPS_SPLIT_COUNT] = { FB_TRAIN, FB_VALID, FB_TEST };

		snprintf(name, sizeof(name), "s%zu", k);
		path = gen(name, f, 1, 1, &st);
		cr_assert_eq(st.num_entities, rounded(f, FB_ENTITIES), "scale %g", f);
		cr_assert_eq(st.num_relations, rounded(f, FB_RELATIONS), "scale %g", f);
		cr_assert_eq(rdps_dataset_open(path, &ds, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(rdps_dataset_num_entities(ds), rounded(f, FB_ENTITIES), "scale %g", f);
		cr_assert_eq(rdps_dataset_num_relations(ds), rounded(f, FB_RELATIONS), "scale %g", f);
		for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
			int64_t n = rdps_dataset_scan(ds, (enum rdps_split)s, NULL, NULL, err,
						      sizeof(err));

			cr_assert_eq(n, (int64_t)rounded(f, want[s]), "scale %g split %d: %lld (%s)",
				     f, s, (long long)n, err);
			cr_assert_eq(st.num_triples[s], rounded(f, want[s]));
		}
		rdps_dataset_close(ds);
		free(path);
	}
	/* F = 1 is Freebase86m itself (planned, not written). */
	rdps_dataset_synth_like_defaults(&o);
	o.scale = 1.0;
	cr_assert_eq(rdps_dataset_synth_like_plan(&o, &plan, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(plan.num_entities, 86054151);
	cr_assert_eq(plan.num_relations, 14824);
	cr_assert_eq(plan.num_triples[RDPS_SPLIT_TRAIN], 304727650);
	cr_assert_eq(plan.num_triples[RDPS_SPLIT_VALID], 16929318);
	cr_assert_eq(plan.num_triples[RDPS_SPLIT_TEST], 16929308);
	cr_assert_float_eq(plan.degree_exponent, DEGREE_EXP, 1e-12);
	cr_assert_float_eq(plan.relation_exponent, RELATION_EXP, 1e-12);
}

/* Entity degrees (ends of triples in all splits) follow the power law.
 * Each entity's degree is one end of its covering train triple plus the
 * ends drawn by weight; over the latter (degree - 1) the discrete
 * maximum-likelihood exponent for degrees >= 30 (Clauset, Shalizi &
 * Newman's approximation 1 + n / sum ln(d / (dmin - 1/2))) is the chosen
 * one within 0.05 (it comes out 2.16 here), and the tail is heavy: the
 * largest degree is hundreds of times the mean. */
Test(synth_freebase, degrees_follow_the_power_law)
{
	struct data d;
	uint32_t *deg, maxd = 0;
	uint64_t ends = 0, n = 0;
	double sum = 0, alpha;
	const uint32_t dmin = 30;
	char *path = gen("deg", 0.002, 3, 2, NULL);

	load(path, &d);
	deg = calloc(d.n, sizeof(*deg));
	cr_assert(deg);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		for (size_t i = 0; i < d.t[s].count; i++) {
			deg[d.t[s].ids[3 * i]]++;
			deg[d.t[s].ids[3 * i + 2]]++;
			ends += 2;
		}
	for (uint32_t e = 0; e < d.n; e++) {
		cr_assert(deg[e] >= 1, "entity %u is in no triple", e);
		if (deg[e] > maxd)
			maxd = deg[e];
		if (deg[e] - 1 >= dmin) {
			n++;
			sum += log((deg[e] - 1) / (dmin - 0.5));
		}
	}
	alpha = 1.0 + (double)n / sum;
	cr_log_info("degree exponent %.3f over %llu entities of degree - 1 >= %u, max degree %u, mean %.2f",
		    alpha, (unsigned long long)n, dmin, maxd, (double)ends / d.n);
	cr_assert(n > 1000, "only %llu entities of degree - 1 >= %u", (unsigned long long)n, dmin);
	cr_assert(fabs(alpha - DEGREE_EXP) < 0.05, "fitted degree exponent %.3f, want %.2f +- 0.05",
		  alpha, DEGREE_EXP);
	cr_assert(maxd > 300.0 * (double)ends / d.n, "max degree %u is not heavy-tailed (mean %.2f)",
		  maxd, (double)ends / d.n);
	free(deg);
	unload(&d);
	free(path);
}

/* Relation frequencies follow Zipf's law: the log-log rank-frequency slope
 * over all ranks is -s within 0.05, and the top relation's share is
 * 1 / H(R, s) within 5%. */
Test(synth_freebase, relations_follow_zipf)
{
	struct data d;
	uint64_t *cnt, total = 0;
	double mx = 0, my = 0, sxy = 0, sxx = 0, slope, h = 0, top;
	char *path = gen("rel", 0.002, 4, 2, NULL);

	load(path, &d);
	cr_assert_eq(d.r, 30);
	cnt = calloc(d.r, sizeof(*cnt));
	cr_assert(cnt);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		for (size_t i = 0; i < d.t[s].count; i++)
			cnt[d.t[s].ids[3 * i + 1]]++;
	for (uint32_t a = 0; a < d.r; a++) /* descending */
		for (uint32_t b = a + 1; b < d.r; b++)
			if (cnt[b] > cnt[a]) {
				uint64_t x = cnt[a];

				cnt[a] = cnt[b];
				cnt[b] = x;
			}
	for (uint32_t k = 0; k < d.r; k++) {
		cr_assert(cnt[k] > 0, "relation rank %u never occurs", k);
		total += cnt[k];
		mx += log(k + 1.0) / d.r;
		my += log((double)cnt[k]) / d.r;
		h += pow(k + 1.0, -RELATION_EXP);
	}
	for (uint32_t k = 0; k < d.r; k++) {
		sxy += (log(k + 1.0) - mx) * (log((double)cnt[k]) - my);
		sxx += (log(k + 1.0) - mx) * (log(k + 1.0) - mx);
	}
	slope = sxy / sxx;
	top = (double)cnt[0] / (double)total;
	cr_log_info("relations: rank-frequency slope %.3f, top share %.4f (Zipf: %.4f)", slope, top,
		    1 / h);
	cr_assert(fabs(slope + RELATION_EXP) < 0.05, "rank-frequency slope %.3f, want %.2f +- 0.05",
		  slope, -RELATION_EXP);
	cr_assert(fabs(top * h - 1) < 0.05, "top relation's share %.4f, Zipf's %.4f", top, 1 / h);
	free(cnt);
	unload(&d);
	free(path);
}

/* Open addressing set of triples packed into 64 bits (ids < 2^21 here). */
struct tset {
	uint64_t *slot;
	uint64_t mask;
};

static uint64_t pack(const uint32_t *t)
{
	return ((uint64_t)t[0] << 42 | (uint64_t)t[1] << 21 | t[2]) + 1;
}

static uint64_t *tset_find(struct tset *s, uint64_t key)
{
	uint64_t i = (key * 0x9e3779b97f4a7c15ull) >> 20;

	for (i &= s->mask; s->slot[i] && s->slot[i] != key; i = (i + 1) & s->mask)
		;
	return &s->slot[i];
}

/* Every entity and relation occurs in train (so every valid and test one
 * does), no valid or test triple is a train triple, none is in both valid
 * and test, and there are no self-loops. */
Test(synth_freebase, splits_are_sound)
{
	struct data d;
	struct tset train = { 0 }, valid = { 0 };
	uint8_t *ent, *rel;
	char *path = gen("split", 0.001, 5, 2, NULL);

	load(path, &d);
	cr_assert(d.n < (1u << 21) && d.r < (1u << 21));
	ent = calloc(d.n, 1);
	rel = calloc(d.r, 1);
	train.mask = (1u << 21) - 1;
	train.slot = calloc(train.mask + 1, sizeof(uint64_t));
	valid.mask = (1u << 17) - 1;
	valid.slot = calloc(valid.mask + 1, sizeof(uint64_t));
	cr_assert(ent && rel && train.slot && valid.slot);
	for (size_t i = 0; i < d.t[RDPS_SPLIT_TRAIN].count; i++) {
		const uint32_t *t = &d.t[RDPS_SPLIT_TRAIN].ids[3 * i];

		ent[t[0]] = ent[t[2]] = 1;
		rel[t[1]] = 1;
		*tset_find(&train, pack(t)) = pack(t);
		cr_assert_neq(t[0], t[2], "train triple %zu is a self-loop", i);
	}
	for (uint32_t e = 0; e < d.n; e++)
		cr_assert(ent[e], "entity %u (%s) is in no train triple", e,
			  rdps_dataset_entity_name(d.ds, e));
	for (uint32_t r = 0; r < d.r; r++)
		cr_assert(rel[r], "relation %u is in no train triple", r);
	for (int s = RDPS_SPLIT_VALID; s < RDPS_SPLIT_COUNT; s++)
		for (size_t i = 0; i < d.t[s].count; i++) {
			const uint32_t *t = &d.t[s].ids[3 * i];

			cr_assert(ent[t[0]] && ent[t[2]] && rel[t[1]]);
			cr_assert_neq(t[0], t[2], "%s triple %zu is a self-loop",
				      rdps_dataset_split_name((enum rdps_split)s), i);
			cr_assert_eq(*tset_find(&train, pack(t)), 0,
				     "%s triple %zu (%s %s %s) is also in train",
				     rdps_dataset_split_name((enum rdps_split)s), i,
				     rdps_dataset_entity_name(d.ds, t[0]),
				     rdps_dataset_relation_name(d.ds, t[1]),
				     rdps_dataset_entity_name(d.ds, t[2]));
			if (s == RDPS_SPLIT_VALID)
				*tset_find(&valid, pack(t)) = pack(t);
			else
				cr_assert_eq(*tset_find(&valid, pack(t)), 0,
					     "test triple %zu is also in valid", i);
		}
	free(ent);
	free(rel);
	free(train.slot);
	free(valid.slot);
	unload(&d);
	free(path);
}

static const uint32_t *sort_deg;

static int by_degree_desc(const void *a, const void *b)
{
	uint32_t x = sort_deg[*(const uint32_t *)a], y = sort_deg[*(const uint32_t *)b];

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Hubs are spread over the ids: the 100 entities of highest degree have
 * ids all over [0, N), not at one end. */
Test(synth_freebase, hubs_are_spread_over_ids)
{
	struct data d;
	uint32_t *deg, *idx;
	double mean = 0;
	char *path = gen("hubs", 0.001, 6, 1, NULL);

	load(path, &d);
	deg = calloc(d.n, sizeof(*deg));
	idx = malloc(d.n * sizeof(*idx));
	cr_assert(deg && idx);
	for (size_t i = 0; i < d.t[RDPS_SPLIT_TRAIN].count; i++) {
		deg[d.t[RDPS_SPLIT_TRAIN].ids[3 * i]]++;
		deg[d.t[RDPS_SPLIT_TRAIN].ids[3 * i + 2]]++;
	}
	for (uint32_t e = 0; e < d.n; e++)
		idx[e] = e;
	sort_deg = deg;
	qsort(idx, d.n, sizeof(*idx), by_degree_desc);
	for (int k = 0; k < 100; k++)
		mean += idx[k] / 100.0;
	/* ids uniform over [0, N): mean N/2 with sd N / sqrt(12 * 100) */
	cr_assert(fabs(mean / d.n - 0.5) < 0.15, "the hubs' mean id is %.0f of %u", mean, d.n);
	cr_assert(deg[idx[0]] > 5 * deg[idx[99]], "no hubs: %u vs %u", deg[idx[0]], deg[idx[99]]);
	free(idx);
	free(deg);
	unload(&d);
	free(path);
}

/* Community structure: METIS keeps far more triples inside a part than a
 * random partition (DGL-KE's Freebase: 93.5% in 4 parts). */
Test(synth_freebase, metis_finds_the_communities)
{
	struct rdps_partition_opts po = { 0 };
	struct rdps_partition_result metis, rnd;
	char *path = gen("com", 0.001, 7, 2, NULL);
	char *pm = th_path(dir, "pm"), *pr = th_path(dir, "pr");

	po.data_dir = path;
	po.k = 4;
	po.out_dir = pm;
	po.method = RDPS_PARTITION_METIS;
	cr_assert_eq(rdps_partition_build(&po, &metis, err, sizeof(err)), 0, "%s", err);
	po.out_dir = pr;
	po.method = RDPS_PARTITION_RANDOM;
	cr_assert_eq(rdps_partition_build(&po, &rnd, err, sizeof(err)), 0, "%s", err);
	cr_log_info("local triples in 4 parts: METIS %.3f, random %.3f",
		    metis.local_triple_fraction, rnd.local_triple_fraction);
	cr_assert(metis.local_triple_fraction > 0.85, "METIS keeps only %.3f local",
		  metis.local_triple_fraction);
	cr_assert(rnd.local_triple_fraction < 0.35, "random keeps %.3f local",
		  rnd.local_triple_fraction);
	free(pm);
	free(pr);
	free(path);
}

static int same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int same = fa && fb, ca, cb;

	while (same) {
		ca = getc(fa);
		cb = getc(fb);
		if (ca != cb)
			same = 0;
		if (ca == EOF || cb == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* The same seed gives the same bytes, whatever the number of threads;
 * another seed other triples. */
Test(synth_freebase, deterministic_for_a_seed)
{
	static const char *const files[] = { "entities.dict", "relations.dict", "train.txt",
					     "valid.txt", "test.txt" };
	char *a = gen("a", 0.0005, 11, 1, NULL), *b = gen("b", 0.0005, 11, 3, NULL);
	char *c = gen("c", 0.0005, 12, 1, NULL);

	for (size_t k = 0; k < RDPS_ARRAY_SIZE(files); k++) {
		char *fa = th_path(a, files[k]), *fb = th_path(b, files[k]);

		cr_assert(same_file(fa, fb), "%s differs between two runs with seed 11", files[k]);
		free(fa);
		free(fb);
	}
	for (size_t k = 2; k < RDPS_ARRAY_SIZE(files); k++) {
		char *fa = th_path(a, files[k]), *fc = th_path(c, files[k]);

		cr_assert(!same_file(fa, fc), "%s is the same with seeds 11 and 12", files[k]);
		free(fa);
		free(fc);
	}
	free(a);
	free(b);
	free(c);
}

/* Peak RSS (KiB) of a child that generates scale f; with extra_per_entity,
 * it also holds that many bytes per entity (the control: what O(entities)
 * state would look like). */
static long child_rss(const char *name, double f, size_t extra_per_entity)
{
	struct rusage ru;
	int status;
	pid_t pid = fork();

	cr_assert(pid >= 0);
	if (pid == 0) {
		struct rdps_synth_like_opts o;
		struct rdps_dataset_stats st;
		char *out = th_path(dir, name), e[256];
		volatile char *hold = NULL;

		rdps_dataset_synth_like_defaults(&o);
		o.scale = f;
		o.threads = 1;
		if (extra_per_entity) {
			size_t len = (size_t)llround(f * FB_ENTITIES) * extra_per_entity;

			hold = malloc(len);
			if (!hold)
				_exit(3);
			for (size_t i = 0; i < len; i += 512)
				hold[i] = 1;
		}
		_exit(rdps_dataset_synth_like(out, &o, &st, e, sizeof(e)) ? 2 : 0);
	}
	cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child for scale %g failed", f);
	return ru.ru_maxrss;
}

/* Memory does not grow with F: the peak RSS of a child generating 4x the
 * triples stays within 512 KiB of the smaller one's. The control holds 8
 * bytes per entity (a per-entity degree table, say) and must show the
 * growth (1 MiB more at 4x): the measurement sees such state. */
Test(synth_freebase, memory_does_not_grow_with_scale)
{
	long small = child_rss("m1", 0.0005, 0), big = child_rss("m2", 0.002, 0);
	long csmall = child_rss("m3", 0.0005, 8), cbig = child_rss("m4", 0.002, 8);

	cr_log_info("peak RSS: scale 0.0005 %ld KiB, 0.002 %ld KiB; control %ld -> %ld KiB", small,
		    big, csmall, cbig);
	cr_assert(big - small < 512, "peak RSS grew from %ld to %ld KiB with 4x the scale", small,
		  big);
	cr_assert(cbig - csmall > 768, "control: 8 bytes per entity grew RSS by only %ld KiB",
		  cbig - csmall);
}

/* Bad options and an existing output fail before any work; the estimate
 * is close to what is written. */
Test(synth_freebase, errors_before_work)
{
	static const double bad[] = { 0, -0.5, 1.0001, 1e-5, NAN };
	struct rdps_synth_like_opts o;
	struct rdps_synth_like_plan plan;
	struct rdps_dataset_stats st;
	struct stat sb;
	uint64_t bytes = 0;
	char *out = th_path(dir, "out"), *marker = th_path(out, "keep");
	static const char *const files[] = { "entities.dict", "relations.dict", "train.txt",
					     "valid.txt", "test.txt" };

	rdps_dataset_synth_like_defaults(&o);
	for (size_t k = 0; k < RDPS_ARRAY_SIZE(bad); k++) {
		o.scale = bad[k];
		err[0] = '\0';
		cr_assert_eq(rdps_dataset_synth_like(out, &o, &st, err, sizeof(err)), -EINVAL,
			     "scale %g", bad[k]);
		cr_assert(strstr(err, "--scale"), "scale %g: '%s'", bad[k], err);
		cr_assert_neq(stat(out, &sb), 0, "scale %g made %s", bad[k], out);
	}
	o.scale = 0.0005;
	o.cross = 1.5;
	cr_assert_eq(rdps_dataset_synth_like(out, &o, &st, err, sizeof(err)), -EINVAL);
	o.cross = -1;
	o.threads = 65;
	cr_assert_eq(rdps_dataset_synth_like(out, &o, &st, err, sizeof(err)), -EINVAL);
	o.threads = 1;
	cr_assert_eq(th_count_entries(dir), 0, "a failed run left files");

	/* An existing directory: refused without force, its files untouched. */
	cr_assert_eq(mkdir(out, 0755), 0);
	th_write(out, "keep", "x");
	cr_assert_eq(rdps_dataset_synth_like(out, &o, &st, err, sizeof(err)), -EEXIST);
	cr_assert(strstr(err, "--force"), "%s", err);
	cr_assert_eq(th_count_entries(out), 1);
	cr_assert_eq(th_count_entries(dir), 1, "the refused run left a temporary directory");
	o.force = 1;
	cr_assert_eq(rdps_dataset_synth_like(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_neq(stat(marker, &sb), 0, "--force kept the old directory's files");

	/* The space estimate is within 3% of the bytes written. */
	cr_assert_eq(rdps_dataset_synth_like_plan(&o, &plan, err, sizeof(err)), 0, "%s", err);
	for (size_t k = 0; k < RDPS_ARRAY_SIZE(files); k++) {
		char *p = th_path(out, files[k]);

		cr_assert_eq(stat(p, &sb), 0);
		bytes += (uint64_t)sb.st_size;
		free(p);
	}
	cr_assert(fabs((double)plan.bytes / (double)bytes - 1) < 0.03, "estimate %llu, wrote %llu",
		  (unsigned long long)plan.bytes, (unsigned long long)bytes);
	free(marker);
	free(out);
}

/* Runs cmd through sh; returns its exit status, its output in out. */
static int run(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int status;

	cr_assert(p, "popen %s", cmd);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The CLI: --help documents the options; bad combinations exit 2; a file
 * system without room for the estimate fails before anything is written
 * (a 4 MiB tmpfs in a private mount namespace; skipped where unshare is not
 * allowed). */
Test(synth_freebase, cli)
{
	char cmd[1024], out[8192];
	char *mnt = th_path(dir, "mnt");
	int rc;

	rc = run(RDPS_BIN " dataset --help 2>&1", out, sizeof(out));
	cr_assert_eq(rc, 0);
	for (const char *w = "--like\0--scale\0--threads\0--noise\0--communities\0freebase86m\0";
	     *w; w += strlen(w) + 1)
		cr_assert(strstr(out, w), "--help does not mention %s", w);
	snprintf(cmd, sizeof(cmd), RDPS_BIN " dataset synth %s/x --like freebase86m 2>&1", dir);
	cr_assert_eq(run(cmd, out, sizeof(out)), 2, "%s", out);
	snprintf(cmd, sizeof(cmd),
		 RDPS_BIN " dataset synth %s/x --like freebase86m --scale 0.001 --triples 5 2>&1", dir);
	cr_assert_eq(run(cmd, out, sizeof(out)), 2, "%s", out);
	snprintf(cmd, sizeof(cmd), RDPS_BIN " dataset synth %s/x --like freebase86m --scale 2 2>&1",
		 dir);
	cr_assert_eq(run(cmd, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "--scale"), "%s", out);

	cr_assert_eq(mkdir(mnt, 0755), 0);
	snprintf(cmd, sizeof(cmd),
		 "unshare --user --map-root-user --mount sh -c 'mount -t tmpfs -o size=4m tmpfs %s "
		 "|| exit 99; " RDPS_BIN " dataset synth %s/fb --like freebase86m --scale 0.001 2>&1; "
		 "echo rc=$?; ls -A %s' 2>&1",
		 mnt, mnt, mnt);
	rc = run(cmd, out, sizeof(out));
	if (rc == 99 || strstr(out, "unshare:")) {
		free(mnt);
		cr_skip_test("no private mount namespace here: %s", out);
	}
	cr_assert(strstr(out, "needs about"), "%s", out);
	/* rc=1, and ls finds nothing after it */
	cr_assert(strstr(out, "rc=1\n") && !strstr(out, "rc=1\n")[5],
		  "not refused, or files left on the full file system: %s", out);
	free(mnt);
}
