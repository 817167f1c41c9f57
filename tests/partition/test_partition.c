// SPDX-License-Identifier: MIT
/* rdps_partition_build and the partition directory reader. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
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

TestSuite(partition, .init = setup, .fini = teardown);

static char *make_synth_c(const char *name, uint64_t n, uint64_t t, uint32_t communities,
			  uint32_t relations)
{
	struct rdps_synth_opts o;
	struct rdps_dataset_stats st;
	char *d = th_path(dir, name);

	rdps_dataset_synth_defaults(&o);
	o.num_entities = n;
	o.num_relations = relations;
	o.num_triples = t;
	o.num_communities = communities;
	o.num_valid = 300;
	o.num_test = 200;
	o.seed = 3;
	cr_assert_eq(rdps_dataset_synth(d, &o, &st, err, sizeof(err)), 0, "%s", err);
	return d;
}

static char *make_synth(const char *name, uint64_t n, uint64_t t)
{
	return make_synth_c(name, n, t, 8, 8);
}

static int cmp_u32x3(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	for (int i = 0; i < 3; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

/* Partition data_dir into pdir, load everything back and compare with the
 * dataset under the id map. */
static void check_round_trip_c(const char *data, const char *pdir, uint32_t k,
			       enum rdps_partition_method m, int force_pread,
			       enum rdps_coarsen coarsen)
{
	struct rdps_partition_opts po = { .data_dir = data, .out_dir = pdir, .k = k,
					  .method = m, .seed = 11, .coarsen = coarsen };
	struct rdps_loader_opts lo = { .force_pread = force_pread, .chunk_bytes = 16384 };
	struct rdps_partition_result res;
	const struct rdps_partition_info *in;
	struct rdps_partition *p;
	struct rdps_dataset *ds;
	struct rdps_triples orig, got = { 0 }, part;
	uint32_t *n2o, *o2n;
	uint64_t local = 0;

	cr_assert_eq(rdps_partition_build(&po, &res, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	in = rdps_partition_get_info(p);
	cr_assert_eq(in->k, k);
	cr_assert_eq(in->method, m);
	cr_assert_eq(in->num_triples[0], res.num_train);
	cr_assert_float_eq(in->local_triple_fraction, res.local_triple_fraction, 1e-12);
	cr_assert_eq(rdps_dataset_open(data, &ds, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(in->num_entities, rdps_dataset_num_entities(ds));
	cr_assert_eq(rdps_partition_load_idmap(p, &lo, &n2o, &o2n, err, sizeof(err)), 0, "%s", err);

	/* Train: union of the parts, relabeled back, equals train.txt. */
	got.ids = malloc(in->num_triples[0] * 12 + 12);
	for (uint32_t q = 0; q < k; q++) {
		cr_assert_eq(rdps_partition_load_train(p, q, &lo, &part, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(part.count, in->parts[q].num_triples);
		for (uint64_t i = 0; i < part.count; i++) {
			uint32_t *t = &part.ids[3 * i], *o = &got.ids[3 * got.count++];

			cr_assert_eq(rdps_partition_owner(in, t[0]), q);
			if (rdps_partition_owner(in, t[2]) == q)
				local++;
			o[0] = n2o[t[0]];
			o[1] = t[1];
			o[2] = n2o[t[2]];
		}
		rdps_dataset_triples_free(&part);
	}
	cr_assert_eq(local, res.local_triples);
	cr_assert_eq(rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &orig, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(got.count, orig.count);
	qsort(got.ids, got.count, 12, cmp_u32x3);
	qsort(orig.ids, orig.count, 12, cmp_u32x3);
	cr_assert_eq(memcmp(got.ids, orig.ids, orig.count * 12), 0, "train differs");
	rdps_dataset_triples_free(&orig);
	rdps_dataset_triples_free(&got);

	/* Valid and test: same triples in the same order. */
	for (int s = RDPS_SPLIT_VALID; s <= RDPS_SPLIT_TEST; s++) {
		cr_assert_eq(rdps_partition_load_split(p, (enum rdps_split)s, &lo, &part, err, sizeof(err)),
			     0, "%s", err);
		cr_assert_eq(rdps_dataset_load(ds, (enum rdps_split)s, &orig, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(part.count, orig.count);
		for (uint64_t i = 0; i < part.count; i++) {
			cr_assert_eq(part.ids[3 * i], o2n[orig.ids[3 * i]]);
			cr_assert_eq(part.ids[3 * i + 1], orig.ids[3 * i + 1]);
			cr_assert_eq(part.ids[3 * i + 2], o2n[orig.ids[3 * i + 2]]);
		}
		rdps_dataset_triples_free(&part);
		rdps_dataset_triples_free(&orig);
	}
	/* Names come back through the copied dicts. */
	{
		struct rdps_dataset *pds;

		cr_assert_eq(rdps_dataset_open(pdir, &pds, err, sizeof(err)), 0, "%s", err);
		for (uint64_t i = 0; i < in->num_entities; i += 1 + in->num_entities / 50)
			cr_assert_str_eq(rdps_dataset_entity_name(pds, n2o[i]),
					 rdps_dataset_entity_name(ds, n2o[i]));
		cr_assert_eq(rdps_dataset_num_relations(pds), in->num_relations);
		rdps_dataset_close(pds);
	}
	free(n2o);
	free(o2n);
	rdps_dataset_close(ds);
	rdps_partition_close(p);
}

static void check_round_trip(const char *data, const char *pdir, uint32_t k,
			     enum rdps_partition_method m, int force_pread)
{
	check_round_trip_c(data, pdir, k, m, force_pread, RDPS_COARSEN_AUTO);
}

struct rt_case {
	enum rdps_partition_method m;
	uint32_t k;
	int force_pread;
	enum rdps_coarsen coarsen;
};

static struct rt_case rt_cases[] = {
	{ RDPS_PARTITION_METIS, 1, 0, RDPS_COARSEN_AUTO },
	{ RDPS_PARTITION_METIS, 2, 0, RDPS_COARSEN_AUTO },
	{ RDPS_PARTITION_METIS, 5, 1, RDPS_COARSEN_AUTO },
	{ RDPS_PARTITION_METIS, 3, 0, RDPS_COARSEN_ON },
	{ RDPS_PARTITION_RANDOM, 3, 0, RDPS_COARSEN_AUTO },
	{ RDPS_PARTITION_RANDOM, 4, 1, RDPS_COARSEN_AUTO },
};

ParameterizedTestParameters(partition, round_trip)
{
	return cr_make_param_array(struct rt_case, rt_cases, sizeof(rt_cases) / sizeof(rt_cases[0]));
}

ParameterizedTest(struct rt_case *c, partition, round_trip)
{
	char *data = make_synth("data", 4000, 30000);
	char *pdir = th_path(dir, "p");

	check_round_trip_c(data, pdir, c->k, c->m, c->force_pread, c->coarsen);
	free(pdir);
	free(data);
}

Test(partition, tiny_dataset_round_trip_and_ranges)
{
	char *pdir = th_path(dir, "p");
	struct rdps_partition *p;
	const struct rdps_partition_info *in;

	th_tiny_dataset(dir);
	check_round_trip(dir, pdir, 2, RDPS_PARTITION_METIS, 0);
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	in = rdps_partition_get_info(p);
	cr_assert_eq(in->ranges[0], 0);
	cr_assert_eq(in->ranges[2], 6);
	/* Two triangles joined by one edge: METIS cuts only that edge. */
	cr_assert_eq(in->edge_cut, 1);
	cr_assert_float_eq(in->local_triple_fraction, 6.0 / 7.0, 1e-9);
	rdps_partition_close(p);
	free(pdir);
}

Test(partition, metis_beats_random_on_communities)
{
	char *data = make_synth("data", 20000, 150000);
	char *pm = th_path(dir, "pm"), *pr = th_path(dir, "pr");
	struct rdps_partition_opts o = { .data_dir = data, .k = 4 };
	struct rdps_partition_result rm, rr;

	o.out_dir = pm;
	o.method = RDPS_PARTITION_METIS;
	cr_assert_eq(rdps_partition_build(&o, &rm, err, sizeof(err)), 0, "%s", err);
	o.out_dir = pr;
	o.method = RDPS_PARTITION_RANDOM;
	cr_assert_eq(rdps_partition_build(&o, &rr, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(rm.local_triple_fraction, rr.local_triple_fraction + 0.3,
		     "metis %.3f random %.3f", rm.local_triple_fraction, rr.local_triple_fraction);
	/* Balanced on entities and on triples (METIS ubvec 1.05 / 1.10). */
	cr_assert_leq(rm.max_part_entities, 20000 / 4 * 1.06);
	cr_assert_leq(rm.max_part_triples, rm.num_train / 4 * 1.11);
	cr_assert_eq(rr.max_part_entities, 5000);
	cr_assert_gt(rm.peak_rss_kib, 0);
	cr_assert_gt(rm.pre_metis_rss_kib, 0);
	cr_assert_leq(rm.pre_metis_rss_kib, rm.peak_rss_kib);
	cr_assert_eq(rr.pre_metis_rss_kib, 0, "random runs no METIS");
	free(pm);
	free(pr);
	free(data);
}

/* One partitioning in a child process: its result, and its peak RSS. */
static void build_in_child(const struct rdps_partition_opts *o, struct rdps_partition_result *r,
			   long *child_peak_kib)
{
	int fd[2], status;
	struct rusage ru;
	pid_t pid;

	cr_assert_eq(pipe(fd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rdps_partition_result res;
		char e[512];

		close(fd[0]);
		if (rdps_partition_build(o, &res, e, sizeof(e))) {
			fprintf(stderr, "%s\n", e);
			_exit(1);
		}
		_exit(write(fd[1], &res, sizeof(res)) == sizeof(res) ? 0 : 2);
	}
	close(fd[1]);
	cr_assert_eq(read(fd[0], r, sizeof(*r)), (ssize_t)sizeof(*r), "the partitioning failed");
	close(fd[0]);
	cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	*child_peak_kib = ru.ru_maxrss;
}

/*
 * Memory: partitioning a 2.5M-triple graph with coarsening before METIS
 * peaks under 3x the CSR graph METIS would take (its upper bound: xadj,
 * two vertex weights, two 32-bit words per direction of each triple), and
 * keeps nearly as many triples local as METIS on the whole graph (within 3
 * points), far more than random. Control: METIS on the whole graph exceeds the bound, so the
 * graph is large enough to show METIS's own share.
 */
Test(partition, coarsening_keeps_memory_under_three_times_the_graph, .timeout = 120)
{
	char *data = make_synth_c("big", 250000, 2500000, 250, 32);
	char *pc = th_path(dir, "pc"), *pf = th_path(dir, "pf"), *pr = th_path(dir, "pr");
	struct rdps_partition_opts o = { .data_dir = data, .k = 4, .seed = 5 };
	struct rdps_partition_result rc, rf, rr;
	long peak_c, peak_f, peak_r;
	double csr;

	o.out_dir = pc;
	o.coarsen = RDPS_COARSEN_ON;
	build_in_child(&o, &rc, &peak_c);
	o.out_dir = pf;
	o.coarsen = RDPS_COARSEN_OFF;
	build_in_child(&o, &rf, &peak_f);
	o.out_dir = pr;
	o.method = RDPS_PARTITION_RANDOM;
	build_in_child(&o, &rr, &peak_r);
	csr = 4.0 * (rc.num_entities + 1) + 8.0 * rc.num_entities + 16.0 * rc.num_train;
	cr_log_info("peak RSS over the CSR graph (%.1f MiB): coarsened %.2fx (%u clusters, local "
		    "triples %.4f), METIS on the whole graph %.2fx (%.4f), random %.2fx (%.4f)",
		    csr / 1048576, peak_c * 1024.0 / csr, rc.clusters, rc.local_triple_fraction,
		    peak_f * 1024.0 / csr, rf.local_triple_fraction, peak_r * 1024.0 / csr,
		    rr.local_triple_fraction);
	cr_assert_gt(rc.clusters, 0);
	cr_assert_eq(rf.clusters, 0);
	cr_assert_leq(peak_c * 1024.0, 3 * csr, "coarsened: peak RSS %.2fx the CSR graph",
		      peak_c * 1024.0 / csr);
	cr_assert_gt(peak_f * 1024.0, 3 * csr, "control: METIS on the whole graph peaked at only "
		     "%.2fx the CSR graph; this graph shows nothing", peak_f * 1024.0 / csr);
	cr_assert_geq(rc.local_triple_fraction, rf.local_triple_fraction - 0.03);
	cr_assert_gt(rc.local_triple_fraction, rr.local_triple_fraction + 0.3);
	/* Balanced as METIS balances the whole graph. */
	cr_assert_leq(rc.max_part_entities, rc.num_entities / 4 * 1.06);
	cr_assert_leq(rc.max_part_triples, rc.num_train / 4 * 1.11);
	free(pc);
	free(pf);
	free(pr);
	free(data);
}

Test(partition, deterministic_for_a_seed)
{
	char *data = make_synth("data", 3000, 20000);
	char *a = th_path(dir, "a"), *b = th_path(dir, "b");
	struct rdps_partition_opts o = { .data_dir = data, .k = 3, .seed = 5 };
	struct rdps_partition_result r;
	struct rdps_partition *pa, *pb;

	for (int m = 0; m < 2; m++) {
		o.method = (enum rdps_partition_method)m;
		o.force = 1;
		o.out_dir = a;
		cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
		o.out_dir = b;
		cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(rdps_partition_open(a, &pa, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(rdps_partition_open(b, &pb, err, sizeof(err)), 0, "%s", err);
		for (uint32_t q = 0; q < 3; q++)
			cr_assert_eq(rdps_partition_get_info(pa)->parts[q].checksum,
				     rdps_partition_get_info(pb)->parts[q].checksum);
		rdps_partition_close(pa);
		rdps_partition_close(pb);
	}
	free(a);
	free(b);
	free(data);
}

/* After a failed build: no PDIR and no temporary sibling left. */
static void assert_nothing_written(int entries_before)
{
	cr_assert_not(th_exists(dir, "p"), "output directory exists after a failure");
	cr_assert_eq(th_count_entries(dir), entries_before, "temporary files left behind");
}

Test(partition, k_larger_than_entity_count)
{
	struct rdps_partition_opts o = { .k = 7, .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result r;
	char *pdir = th_path(dir, "p");
	int before;

	th_tiny_dataset(dir);
	before = th_count_entries(dir);
	o.data_dir = dir;
	o.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field k: 7 parts but"), "%s", err);
	cr_assert(strstr(err, "only 6 entities"), "%s", err);
	assert_nothing_written(before);
	o.k = 0;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field k"), "%s", err);
	o.k = 6; /* one entity per part is fine */
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	free(pdir);
}

Test(partition, bad_input_leaves_nothing)
{
	struct rdps_partition_opts o = { .k = 2, .method = RDPS_PARTITION_METIS };
	struct rdps_partition_result r;
	char *pdir = th_path(dir, "p");
	int before;

	th_tiny_dataset(dir);
	th_write(dir, "train.txt", "a\tlikes\tb\nb\tlikes\tc\tx\n");
	before = th_count_entries(dir);
	o.data_dir = dir;
	o.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "train.txt:2: expected 3 tab-separated fields, found 4"), "%s", err);
	assert_nothing_written(before);

	th_write(dir, "train.txt", "a\tlikes\tb\n\tlikes\tc\n");
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "train.txt:2: empty head"), "%s", err);
	assert_nothing_written(before);

	th_tiny_dataset(dir);
	th_write(dir, "test.txt", "a\tlikes\tb\nq\tlikes\tb\n");
	th_write(dir, "entities.dict", "0\ta\n1\tb\n2\tc\n3\td\n4\te\n5\tf\n6\tq\n");
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "test.txt:2: entity 'q' does not occur in train.txt"), "%s", err);
	assert_nothing_written(before);
	free(pdir);
}

Test(partition, existing_output_needs_force)
{
	struct rdps_partition_opts o = { .k = 2 };
	struct rdps_partition_result r;
	char *pdir = th_path(dir, "p");

	th_tiny_dataset(dir);
	o.data_dir = dir;
	o.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), -EEXIST);
	cr_assert(strstr(err, "already exists"), "%s", err);
	o.force = 1;
	o.method = RDPS_PARTITION_RANDOM;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(th_count_entries(dir), 6, "old directory not cleaned up");
	free(pdir);
}

/* Builds a partition of the tiny dataset into dir/p and returns its path. */
static char *tiny_partition(void)
{
	struct rdps_partition_opts o = { .k = 2 };
	struct rdps_partition_result r;
	char *pdir = th_path(dir, "p");

	th_tiny_dataset(dir);
	o.data_dir = dir;
	o.out_dir = pdir;
	cr_assert_eq(rdps_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	return pdir;
}

static void rewrite_json(const char *pdir, const char *from, const char *to)
{
	char *path = th_path(pdir, "partition.json"), *text, *at, *out;
	FILE *f = fopen(path, "r");
	long n;

	cr_assert(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	at = strstr(text, from);
	cr_assert(at, "'%s' not in partition.json", from);
	*at = '\0';
	cr_assert(asprintf(&out, "%s%s%s", text, to, at + strlen(from)) > 0);
	f = fopen(path, "w");
	fputs(out, f);
	fclose(f);
	free(out);
	free(text);
	free(path);
}

Test(partition, json_of_another_version)
{
	char *pdir = tiny_partition();
	struct rdps_partition *p = (void *)1;

	rewrite_json(pdir, "\"format_version\": 1", "\"format_version\": 2");
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), -EPROTONOSUPPORT);
	cr_assert_null(p);
	cr_assert(strstr(err, "partition.json: field format_version: version 2 is not supported"),
		  "%s", err);
	rewrite_json(pdir, "\"format_version\": 2", "\"format_versio\": 1");
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field format_version: missing"), "%s", err);
	free(pdir);
}

Test(partition, json_bad_fields)
{
	char *pdir = tiny_partition();
	struct rdps_partition *p;

	rewrite_json(pdir, "\"k\": 2", "\"k\": \"2\"");
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field k: not a non-negative integer"), "%s", err);
	rewrite_json(pdir, "\"k\": \"2\"", "\"k\": 3");
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field ranges"), "%s", err);
	rewrite_json(pdir, "\"k\": 3", "\"k\": 2");
	rewrite_json(pdir, "\"file\": \"part-0.trp\"", "\"file\": \"../part-0.trp\"");
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "field partitions[0].file: bad file name"), "%s", err);
	free(pdir);
}

Test(partition, truncated_part_file)
{
	char *pdir = tiny_partition();
	struct rdps_partition *p;
	struct rdps_triples t;

	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	th_truncate(pdir, "part-1.trp", 4);
	cr_assert_eq(rdps_partition_load_train(p, 1, NULL, &t, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "part-1.trp: truncated"), "%s", err);
	cr_assert_null(t.ids);
	cr_assert_eq(rdps_partition_load_train(p, 0, NULL, &t, err, sizeof(err)), 0, "%s", err);
	rdps_dataset_triples_free(&t);
	cr_assert_eq(rdps_partition_load_train(p, 2, NULL, &t, err, sizeof(err)), -EINVAL);
	th_truncate(pdir, "idmap.bin", 1);
	{
		uint32_t *n2o;

		cr_assert_eq(rdps_partition_load_idmap(p, NULL, &n2o, NULL, err, sizeof(err)), -EINVAL);
		cr_assert(strstr(err, "idmap.bin: truncated"), "%s", err);
	}
	rdps_partition_close(p);
	free(pdir);
}

Test(partition, bit_flipped_part_file)
{
	char *pdir = tiny_partition();
	struct rdps_partition *p;
	struct rdps_triples t;
	struct rdps_loader_opts pr = { .force_pread = 1 };

	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	th_flip_bit(pdir, "part-0.trp", 64 + 4);
	cr_assert_eq(rdps_partition_load_train(p, 0, NULL, &t, err, sizeof(err)), -EBADMSG);
	cr_assert(strstr(err, "part-0.trp: field payload_xxh3: checksum mismatch"), "%s", err);
	cr_assert_eq(rdps_partition_load_train(p, 0, &pr, &t, err, sizeof(err)), -EBADMSG);
	th_flip_bit(pdir, "test.trp", 70);
	cr_assert_eq(rdps_partition_load_split(p, RDPS_SPLIT_TEST, NULL, &t, err, sizeof(err)), -EBADMSG);
	cr_assert(strstr(err, "test.trp"), "%s", err);
	th_flip_bit(pdir, "valid.trp", 20);
	cr_assert_eq(rdps_partition_load_split(p, RDPS_SPLIT_VALID, NULL, &t, err, sizeof(err)), -EBADMSG);
	cr_assert(strstr(err, "valid.trp: field header_xxh3"), "%s", err);
	rdps_partition_close(p);
	free(pdir);
}

Test(partition, part_file_from_another_partitioning)
{
	char *pdir = tiny_partition();
	struct rdps_partition *p;
	struct rdps_triples t;
	char *a = th_path(pdir, "part-0.trp"), *b = th_path(pdir, "part-1.trp");
	char *tmp = th_path(pdir, "swap");

	/* Swap the two part files: checksums are fine, the header is not. */
	cr_assert_eq(rename(a, tmp) || rename(b, a) || rename(tmp, b), 0);
	free(tmp);
	cr_assert_eq(rdps_partition_open(pdir, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_partition_load_train(p, 0, NULL, &t, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "header does not match partition.json"), "%s", err);
	rdps_partition_close(p);
	free(a);
	free(b);
	free(pdir);
}
