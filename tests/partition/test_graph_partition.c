// SPDX-License-Identifier: MIT
// ctest-timeout: 120
/*
 * Graph partitions for node classification (rdps_graph_partition_build):
 * every edge lands once, in its destination's part, as an in-edge of the
 * relabeled destination with its relabeled source, type and original id;
 * every node's data follows it; the ranges tile the nodes. On WordNet's
 * node task (k = 4), METIS keeps each balanced constraint within 5% of the
 * mean; control: without --balance_edges the in-edges are not (1.066).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "helpers.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"

static char *dir;
static char err[512];

static void setup(void)
{
	th_quiet();
	dir = th_mkdtemp();
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

TestSuite(graph_partition, .init = setup, .fini = teardown, .timeout = 120);

#define N 300
#define E 2000
#define F 5

static void write_tiny(const char *d, int64_t *edges, int64_t *etypes, float *feat, int64_t *lab,
		       uint8_t *mask[3])
{
	static const char *const masks[3] = { "train_mask", "val_mask", "test_mask" };
	uint64_t x = 5;
	char path[600];
	FILE *f;

	cr_assert_eq(mkdir(d, 0755), 0);
	for (int i = 0; i < E; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		/* three communities of 100 and some noise */
		edges[2 * i] = (int64_t)((x >> 33) % N);
		edges[2 * i + 1] = i % 7 ? edges[2 * i] / 100 * 100 + (int64_t)((x >> 20) % 100)
					 : (int64_t)((x >> 20) % N);
		etypes[i] = (int64_t)(i % 3);
	}
	for (int v = 0; v < N; v++) {
		for (int k = 0; k < F; k++)
			feat[v * F + k] = (float)(v * 10 + k);
		lab[v] = v % 7;
		for (int m = 0; m < 3; m++)
			mask[m][v] = (uint8_t)(v % 10 < 8 ? m == 0 : v % 10 == 8 ? m == 1 : m == 2);
	}
	snprintf(path, sizeof(path), "%s/edges.npy", d);
	cr_assert_eq(rdps_npy_write(path, "<i8", edges, E, 2, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/etypes.npy", d);
	cr_assert_eq(rdps_npy_write(path, "<i8", etypes, E, 0, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/features.npy", d);
	cr_assert_eq(rdps_npy_write(path, "<f4", feat, N, F, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/labels.npy", d);
	cr_assert_eq(rdps_npy_write(path, "<i8", lab, N, 0, err, sizeof(err)), 0, "%s", err);
	for (int m = 0; m < 3; m++) {
		snprintf(path, sizeof(path), "%s/%s.npy", d, masks[m]);
		cr_assert_eq(rdps_npy_write(path, "|u1", mask[m], N, 0, err, sizeof(err)), 0, "%s",
			     err);
	}
	snprintf(path, sizeof(path), "%s/graph.json", d);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "{\"name\": \"tiny\", \"num_nodes\": %d, \"num_edges\": %d}\n", N, E);
	fclose(f);
}

static void *read_npy(const char *pdir, uint32_t p, const char *what, const char *descr,
		      uint64_t *rows)
{
	char path[700];
	uint64_t cols;
	void *data;

	snprintf(path, sizeof(path), "%s/part-%u-%s.npy", pdir, p, what);
	cr_assert_eq(rdps_npy_read(path, descr, &data, rows, &cols, err, sizeof(err)), 0, "%s", err);
	return data;
}

Test(graph_partition, every_edge_and_node_lands_once_where_it_belongs)
{
	static int64_t edges[2 * E], etypes[E], lab[N];
	static float feat[N * F];
	static uint8_t m0[N], m1[N], m2[N];
	uint8_t *mask[3] = { m0, m1, m2 };
	char *data = th_path(dir, "tiny"), *pdir = th_path(dir, "p");
	struct rdps_graph_partition_opts o = { .data_dir = data, .out_dir = pdir, .k = 3,
					       .method = RDPS_PARTITION_METIS, .balance_train = true,
					       .balance_edges = true, .seed = 2 };
	struct rdps_graph_partition_result r;
	static int seen[E];
	int64_t *idmap;
	uint64_t rows, cols, ranges[4] = { 0 }, local = 0;
	char path[700];

	write_tiny(data, edges, etypes, feat, lab, mask);
	cr_assert_eq(rdps_graph_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.num_nodes == N && r.num_edges == E);
	snprintf(path, sizeof(path), "%s/idmap.npy", pdir);
	cr_assert_eq(rdps_npy_read(path, "<i8", (void **)&idmap, &rows, &cols, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(rows, N);
	{
		/* the ranges, from the part sizes (labels: node data 1) */
		for (uint32_t p = 0; p < 3; p++) {
			uint64_t np;
			int64_t *lp = read_npy(pdir, p, "nd-0-1", "<i8", &np);

			ranges[p + 1] = ranges[p] + np;
			free(lp);
		}
		cr_assert_eq(ranges[3], N);
	}
	for (uint32_t p = 0, elo = 0; p < 3; p++) {
		uint64_t np, ne, n4, nf;
		int64_t *inptr = read_npy(pdir, p, "inptr", "<i8", &np);
		int64_t *er = read_npy(pdir, p, "edges", "<i8", &ne);
		int64_t *lp = read_npy(pdir, p, "nd-0-1", "<i8", &n4);
		float *fp = read_npy(pdir, p, "nd-0-0", "<f4", &nf);

		/* one in-slot per node (one etype): [begin, end) of the part's edges */
		cr_assert(np == ranges[p + 1] - ranges[p] && nf == np && n4 == np);
		for (uint64_t i = 0; i < np; i++) {
			uint64_t nid = ranges[p] + i;
			int64_t old = idmap[nid];

			cr_assert_leq(inptr[2 * i], inptr[2 * i + 1]);
			cr_assert_geq(inptr[2 * i], elo);
			cr_assert_leq(inptr[2 * i + 1], elo + ne);
			cr_assert_eq(lp[i], lab[old], "node %llu's label", (unsigned long long)nid);
			cr_assert_arr_eq(fp + i * F, feat + old * F, F * sizeof(float));
			for (int64_t k = inptr[2 * i]; k < inptr[2 * i + 1]; k++) {
				const int64_t *row = er + 4 * (k - elo);
				int64_t x = row[3];

				cr_assert(x >= 0 && x < E);
				cr_assert_eq(seen[x]++, 0, "edge %lld twice", (long long)x);
				cr_assert_eq(row[1], (int64_t)nid);
				cr_assert_eq(edges[2 * x + 1], old, "edge %lld in the wrong node", (long long)x);
				cr_assert_eq(idmap[row[0]], edges[2 * x], "edge %lld's source", (long long)x);
				cr_assert_eq(row[2], etypes[x]);
				local += (uint64_t)row[0] >= ranges[p] && (uint64_t)row[0] < ranges[p + 1];
			}
		}
		for (int m = 0; m < 3; m++) {
			char what[16];
			uint64_t nm;
			uint8_t *mp;

			snprintf(what, sizeof(what), "nd-0-%d", 2 + m);
			mp = read_npy(pdir, p, what, "|u1", &nm);
			for (uint64_t i = 0; i < nm; i++)
				cr_assert_eq(mp[i], mask[m][idmap[ranges[p] + i]]);
			free(mp);
		}
		elo += (uint32_t)ne;
		free(inptr);
		free(er);
		free(lp);
		free(fp);
	}
	for (int x = 0; x < E; x++)
		cr_assert_eq(seen[x], 1, "edge %d in no part", x);
	cr_assert_eq(local, r.local_edges);
	free(idmap);
	free(data);
	free(pdir);
}

/* WordNet's node task, k = 4: each constraint within METIS's 5%. */
Test(graph_partition, metis_balances_each_constraint_on_wordnet)
{
	struct rdps_wordnet_nodes_opts wo;
	struct rdps_graph_stats st;
	char *data = th_path(dir, "wnn"), *pdir = th_path(dir, "p4");
	struct rdps_graph_partition_opts o = { .data_dir = data, .out_dir = pdir, .k = 4,
					       .method = RDPS_PARTITION_METIS, .force = 1 };
	struct rdps_graph_partition_result all, nodes_only, rnd;
	double tol = 1.05 + 1e-3;

	rdps_dataset_wordnet_nodes_defaults(&wo);
	cr_assert_eq(rdps_dataset_wordnet_nodes(data, &wo, &st, err, sizeof(err)), 0, "%s", err);
	o.balance_train = o.balance_edges = true;
	cr_assert_eq(rdps_graph_partition_build(&o, &all, err, sizeof(err)), 0, "%s", err);
	cr_assert_leq((double)all.max_part_nodes * 4 / all.num_nodes, tol);
	cr_assert_leq((double)all.max_part_edges * 4 / all.num_edges, tol);
	cr_assert_leq((double)all.max_part_train * 4 / all.num_train, tol);
	/* Control: balancing nodes alone leaves the in-edges off by more. */
	o.balance_train = o.balance_edges = false;
	cr_assert_eq(rdps_graph_partition_build(&o, &nodes_only, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt((double)nodes_only.max_part_edges * 4 / nodes_only.num_edges, tol,
		     "control: without --balance_edges the in-edges were balanced anyway");
	o.method = RDPS_PARTITION_RANDOM;
	cr_assert_eq(rdps_graph_partition_build(&o, &rnd, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(all.local_edge_fraction, rnd.local_edge_fraction + 0.5);
	cr_log_info("k=4: all constraints: nodes %.3f, in-edges %.3f, training nodes %.3f of the "
		    "mean, local edges %.3f; nodes only: in-edges %.3f; random: local edges %.3f",
		    (double)all.max_part_nodes * 4 / all.num_nodes,
		    (double)all.max_part_edges * 4 / all.num_edges,
		    (double)all.max_part_train * 4 / all.num_train, all.local_edge_fraction,
		    (double)nodes_only.max_part_edges * 4 / nodes_only.num_edges,
		    rnd.local_edge_fraction);
	free(data);
	free(pdir);
}
