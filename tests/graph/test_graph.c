// SPDX-License-Identifier: MIT
// ctest-timeout: 600
/*
 * DistGraph (rdps/graph.h) on 2 servers that each load their part of a
 * graph partition, on every transport in RDPS_TEST_TRANSPORTS (default tcp,
 * inproc, and ofi where libfabric's tcp;ofi_rxm runs; verbs in the
 * soft-RoCE guest):
 *
 * - the graph's shape, every node's in-degree and every edge's endpoints,
 *   type and original id, against the dataset's files through idmap.npy;
 *   node data (features, labels, masks) likewise;
 * - sampling both ways (by request, and by reading the CSR rows): every
 *   picked edge is an in-edge of its seed as the dataset has it, no edge
 *   twice for a seed, min(degree, fanout) edges per seed, and the two ways
 *   pick the same edges from the same seed;
 * - the distribution: 6000 samples of 4 of a node's 12 in-edges, by each
 *   way, against the uniform distribution over the 66 pairs of edges
 *   (chi-square; which pairs come together is what "without replacement"
 *   must get right, not only how often each edge comes), and the two ways
 *   against each other from independent seeds. Control: a window of 4
 *   consecutive edges from a uniform start has uniform marginals but fails
 *   the pair test by far;
 * - errors before work: fanout 0 or too large, a seed outside the graph,
 *   writes to the graph's read-only tables, and hostile sample requests
 *   sent straight to a server (a seed it does not hold, too many picks,
 *   tables that are not a graph's), each next to the same request made
 *   valid, which succeeds.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/npy.h"
#include "rdps/common.h"
#include "kvstore/client_internal.h"
#include "kvstore/graph_sample.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "rdps_test.h"
#include "tests/integration/transport_params.h"

#define SERVERS 2
#define N 240
#define E 2400
#define F 6
#define HUB 7        /* 60 distinct in-neighbours */
#define HUB_DEG 60
#define TWELVE 11    /* exactly 12 in-edges: the distribution test's node */

static char err[640];

/* ---------------------------------------------------------------------- */
/* The dataset                                                             */

struct graph_data {
	int64_t edges[2 * E], etypes[E], labels[N];
	float feat[N * F];
	uint8_t mask[3][N];
	int64_t *idmap;        /* new -> original */
	int64_t old2new[N];
	uint64_t indeg[N];     /* original ids */
};

static void npy(const char *d, const char *name, const char *descr, const void *data,
		uint64_t rows, uint64_t cols)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s.npy", d, name);
	cr_assert_eq(rdps_npy_write(path, descr, data, rows, cols, err, sizeof(err)), 0, "%s",
		     err);
}

static void make_graph(struct graph_data *g, const char *d)
{
	static const char *const masks[3] = { "train_mask", "val_mask", "test_mask" };
	uint64_t x = 11;
	char path[700];
	int i = 0;
	FILE *f;

	cr_assert_eq(mkdir(d, 0755), 0);
	/* the hub: 60 distinct sources; node TWELVE: 12 */
	for (int k = 0; k < HUB_DEG; k++, i++) {
		g->edges[2 * i] = (k * 3 + 1) % N;
		g->edges[2 * i + 1] = HUB;
	}
	for (int k = 0; k < 12; k++, i++) {
		g->edges[2 * i] = (k * 17 + 40) % N;
		g->edges[2 * i + 1] = TWELVE;
	}
	for (; i < E; i++) {
		int64_t dst;

		do {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			dst = (int64_t)((x >> 20) % N);
		} while (dst == HUB || dst == TWELVE);
		/* two communities and some noise; parallel edges allowed */
		g->edges[2 * i] = (int64_t)((x >> 40) % (N / 2)) + (i % 5 ? dst / (N / 2) * (N / 2)
									      : 0);
		g->edges[2 * i + 1] = dst;
	}
	for (i = 0; i < E; i++) {
		g->etypes[i] = i % 3;
		g->indeg[g->edges[2 * i + 1]]++;
	}
	for (int v = 0; v < N; v++) {
		for (int k = 0; k < F; k++)
			g->feat[v * F + k] = (float)v + 0.125f * (float)k;
		g->labels[v] = v % 5;
		for (int m = 0; m < 3; m++)
			g->mask[m][v] = (uint8_t)(v % 10 < 8 ? m == 0 : v % 10 == 8 ? m == 1 : m == 2);
	}
	npy(d, "edges", "<i8", g->edges, E, 2);
	npy(d, "etypes", "<i8", g->etypes, E, 0);
	npy(d, "features", "<f4", g->feat, N, F);
	npy(d, "labels", "<i8", g->labels, N, 0);
	for (int m = 0; m < 3; m++)
		npy(d, masks[m], "|u1", g->mask[m], N, 0);
	snprintf(path, sizeof(path), "%s/graph.json", d);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "{\"name\": \"test\", \"num_nodes\": %d, \"num_edges\": %d, "
		   "\"num_classes\": 5, \"num_etypes\": 3, \"feat_dim\": %d}\n", N, E, F);
	fclose(f);
}

/* ---------------------------------------------------------------------- */
/* The job                                                                 */

struct job {
	const char *transport;
	struct rdps_ipconfig ipc;
	struct rdps_graph_part *part[SERVERS];
	struct rdps_server *srv[SERVERS];
	pthread_t th[SERVERS];
};

static struct graph_data *G;
static char *tmp, *pdir;

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static const char *test_host(void)
{
	const char *h = getenv("RDPS_TEST_HOST");

	return h && *h ? h : "127.0.0.1";
}

static void setup(void)
{
	struct rdps_graph_partition_opts o = { .k = SERVERS, .method = RDPS_PARTITION_METIS,
					       .balance_edges = true, .seed = 3 };
	struct rdps_graph_partition_result r;
	char data[600], path[700];
	uint64_t rows, cols;

	rdps_log_threshold = RDPS_LOG_ERROR;
	tmp = rdps_test_tmpdir("graph");
	G = calloc(1, sizeof(*G));
	snprintf(data, sizeof(data), "%s/data", tmp);
	make_graph(G, data);
	pdir = malloc(600);
	snprintf(pdir, 600, "%s/parts", tmp);
	o.data_dir = data;
	o.out_dir = pdir;
	cr_assert_eq(rdps_graph_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/idmap.npy", pdir);
	cr_assert_eq(rdps_npy_read(path, "<i8", (void **)&G->idmap, &rows, &cols, err,
				   sizeof(err)), 0, "%s", err);
	cr_assert_eq(rows, N);
	for (int v = 0; v < N; v++)
		G->old2new[G->idmap[v]] = v;
}

static void teardown(void)
{
	free(G->idmap);
	free(G);
	rdps_test_rmtree(tmp);
	free(tmp);
	free(pdir);
}

static void job_start(struct job *j, const char *transport)
{
	char text[96];

	j->transport = transport;
	snprintf(text, sizeof(text), "%s %d %d\n", test_host(), rdps_test_free_ports(SERVERS),
		 SERVERS);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < SERVERS; s++) {
		struct rdps_server_config cfg = { .transport = transport, .ipc = &j->ipc,
						  .server_id = s, .num_threads = 2 };
		int n;

		cr_assert_eq(rdps_graph_part_load(pdir, s, &j->part[s], err, sizeof(err)), 0, "%s",
			     err);
		n = rdps_graph_part_tables(j->part[s], cfg.tables, RDPS_MAX_TABLES);
		cr_assert_gt(n, 0);
		cfg.num_tables = (uint32_t)n;
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->th[s], NULL, serve, j->srv[s]), 0);
	}
}

static struct rdps_client *client(struct job *j)
{
	struct rdps_client_params p = { .transport = j->transport, .servers = &j->ipc,
					 .client_id = 0, .num_clients = 1, .timeout_ms = 30000,
					 .quiet = true };
	struct rdps_client *c;

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static void job_stop(struct job *j)
{
	for (uint32_t s = 0; s < SERVERS; s++)
		rdps_server_stop(j->srv[s]);
	for (uint32_t s = 0; s < SERVERS; s++) {
		pthread_join(j->th[s], NULL);
		rdps_server_destroy(j->srv[s]);
		rdps_graph_part_free(j->part[s]);
	}
	rdps_ipconfig_free(&j->ipc);
}

/* ---------------------------------------------------------------------- */


TestSuite(graph, .init = setup, .fini = teardown, .timeout = 600);

/* ---------------------------------------------------------------------- */

/* Edge rows (src, dst, type, original id) of every edge id. */
static int64_t *all_edge_rows(struct rdps_client *c)
{
	struct rdps_table_info t;
	int64_t *rows = malloc((size_t)E * 4 * sizeof(*rows));
	uint64_t *ids = malloc((size_t)E * sizeof(*ids));

	cr_assert_eq(rdps_client_table(c, RDPS_GRAPH_EDGES, &t), 0);
	for (uint64_t e = 0; e < E; e++)
		ids[e] = E - 1 - e; /* backwards: both servers, out of order */
	cr_assert_eq(rdps_client_get(c, t.id, ids, E, rows), 0, "%s", rdps_client_errmsg(c));
	/* into edge-id order */
	{
		int64_t *fwd = malloc((size_t)E * 4 * sizeof(*fwd));

		for (uint64_t e = 0; e < E; e++)
			memcpy(fwd + 4 * ids[e], rows + 4 * e, 4 * sizeof(*rows));
		free(rows);
		rows = fwd;
	}
	free(ids);
	return rows;
}

ParameterizedTestParameters(graph, structure_and_data_match_the_dataset)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph, structure_and_data_match_the_dataset)
{
	struct job j = { 0 };
	struct rdps_client *c;
	struct rdps_graph *g;
	static uint64_t nodes[N], deg[N], src[E], dst[E], eids[E];
	static int64_t ety[E], lab[N];
	static float feat[N * F];
	static uint8_t mask[N];
	static int seen[E];
	int64_t *rows;
	uint64_t lo, hi, prev = 0;

	job_start(&j, tp->name);
	c = client(&j);
	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_graph_num_nodes(g), N);
	cr_assert_eq(rdps_graph_num_edges(g), E);
	cr_assert_eq(rdps_graph_num_parts(g), SERVERS);
	for (uint32_t p = 0; p < SERVERS; p++) {
		rdps_graph_part_nodes(g, p, &lo, &hi);
		cr_assert_eq(lo, prev);
		cr_assert_gt(hi, lo, "part %u is empty", p);
		prev = hi;
	}
	cr_assert_eq(prev, N);
	for (uint64_t v = 0; v < N; v++)
		nodes[v] = (v * 97) % N; /* a permutation: both servers interleaved */
	cr_assert_eq(rdps_graph_in_degrees(g, nodes, N, deg), 0, "%s", rdps_client_errmsg(c));
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(deg[i], G->indeg[G->idmap[nodes[i]]], "in-degree of node %llu",
			     (unsigned long long)nodes[i]);
	/* every edge: its original, mapped; each original once */
	rows = all_edge_rows(c);
	for (uint64_t e = 0; e < E; e++)
		eids[e] = e;
	cr_assert_eq(rdps_graph_find_edges(g, eids, E, src, dst, ety), 0, "%s",
		     rdps_client_errmsg(c));
	for (uint64_t e = 0; e < E; e++) {
		int64_t orig = rows[4 * e + 3];

		cr_assert(orig >= 0 && orig < E);
		cr_assert_eq(seen[orig]++, 0, "original edge %lld twice", (long long)orig);
		cr_assert_eq(src[e], (uint64_t)G->old2new[G->edges[2 * orig]], "edge %llu source",
			     (unsigned long long)e);
		cr_assert_eq(dst[e], (uint64_t)G->old2new[G->edges[2 * orig + 1]]);
		cr_assert_eq(ety[e], G->etypes[orig]);
		cr_assert_eq(rows[4 * e] , (int64_t)src[e]);
	}
	/* node data */
	{
		struct rdps_table_info tf, tl, tm;

		cr_assert_eq(rdps_client_table(c, "ndata:feat", &tf), 0);
		cr_assert_eq(rdps_client_table(c, "ndata:label", &tl), 0);
		cr_assert_eq(rdps_client_table(c, "ndata:val_mask", &tm), 0);
		cr_assert(tf.dtype == RDPS_DTYPE_F32 && tf.elems == F && tl.dtype == RDPS_DTYPE_I64 &&
			  tm.dtype == RDPS_DTYPE_U8);
		cr_assert_eq(rdps_client_get(c, tf.id, nodes, N, feat), 0);
		cr_assert_eq(rdps_client_get(c, tl.id, nodes, N, lab), 0);
		cr_assert_eq(rdps_client_get(c, tm.id, nodes, N, mask), 0);
		for (uint64_t i = 0; i < N; i++) {
			int64_t o = G->idmap[nodes[i]];

			cr_assert_eq(memcmp(feat + i * F, G->feat + o * F, F * sizeof(float)), 0);
			cr_assert_eq(lab[i], G->labels[o]);
			cr_assert_eq(mask[i], G->mask[1][o]);
		}
	}
	free(rows);
	rdps_graph_close(g);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

ParameterizedTestParameters(graph, sampled_edges_exist_once_fanout_respected_same_both_ways)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph,
		  sampled_edges_exist_once_fanout_respected_same_both_ways)
{
	static const uint32_t fanouts[] = { 1, 3, 10, 59, 60, 1000 };
	enum { SEEDS = 2 * N + 5 };
	struct job j = { 0 };
	struct rdps_client *c;
	struct rdps_graph *g;
	static uint64_t seeds[SEEDS], deg[SEEDS];
	int64_t *rows;
	uint64_t *buf[2][3];
	int64_t *tbuf[2];

	job_start(&j, tp->name);
	c = client(&j);
	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	rows = all_edge_rows(c);
	/* every node twice, in a scattered order, and the hub more */
	for (size_t i = 0; i < SEEDS; i++)
		seeds[i] = i < 2 * N ? (i * 53) % N : (uint64_t)G->old2new[HUB];
	cr_assert_eq(rdps_graph_in_degrees(g, seeds, SEEDS, deg), 0);
	for (int w = 0; w < 2; w++) {
		for (int k = 0; k < 3; k++)
			buf[w][k] = malloc(SEEDS * 1000 * sizeof(uint64_t));
		tbuf[w] = malloc(SEEDS * 1000 * sizeof(int64_t));
	}
	for (size_t f = 0; f < sizeof(fanouts) / sizeof(fanouts[0]); f++) {
		uint32_t fo = fanouts[f];
		struct rdps_sampled out[2];

		for (int w = 0; w < 2; w++) {
			out[w] = (struct rdps_sampled){ .src = buf[w][0], .dst = buf[w][1],
							.eid = buf[w][2], .etype = tbuf[w] };
			cr_assert_eq(rdps_graph_sample_neighbors(g, seeds, SEEDS, fo,
								 w ? RDPS_SAMPLE_READ : RDPS_SAMPLE_RPC,
								 1234 + f, &out[w]),
				     0, "%s", rdps_client_errmsg(c));
		}
		cr_assert_eq(out[0].num_edges, out[1].num_edges);
		for (size_t m = 0, i = 0; i < SEEDS; i++) {
			uint64_t want = deg[i] < fo ? deg[i] : fo, have = 0;
			uint64_t prev_eid = 0;

			for (; m < out[0].num_edges && out[0].dst[m] == seeds[i] && have < want;
			     m++, have++) {
				uint64_t e = out[0].eid[m];

				/* an in-edge of the seed, as the dataset has it */
				cr_assert_lt(e, E);
				cr_assert_eq((uint64_t)rows[4 * e + 1], seeds[i]);
				cr_assert_eq(out[0].src[m], (uint64_t)rows[4 * e]);
				cr_assert_eq(out[0].etype[m], rows[4 * e + 2]);
				cr_assert_eq(G->edges[2 * rows[4 * e + 3] + 1], G->idmap[seeds[i]]);
				/* increasing ids: none twice */
				cr_assert(!have || e > prev_eid, "edge %llu twice or out of order for "
					  "seed %zu", (unsigned long long)e, i);
				prev_eid = e;
				/* the other way picked the same */
				cr_assert_eq(out[1].eid[m], e);
				cr_assert_eq(out[1].src[m], out[0].src[m]);
				cr_assert_eq(out[1].dst[m], out[0].dst[m]);
				cr_assert_eq(out[1].etype[m], out[0].etype[m]);
			}
			cr_assert_eq(have, want, "seed %zu (node %llu, degree %llu): %llu edges for "
				     "fanout %u", i, (unsigned long long)seeds[i],
				     (unsigned long long)deg[i], (unsigned long long)have, fo);
			if (i + 1 == SEEDS)
				cr_assert_eq(m, out[0].num_edges);
		}
	}
	for (int w = 0; w < 2; w++) {
		for (int k = 0; k < 3; k++)
			free(buf[w][k]);
		free(tbuf[w]);
	}
	free(rows);
	rdps_graph_close(g);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

#define TRIALS 6000
#define PAIRS 66 /* C(12, 2) */
/* chi-square, 65 degrees of freedom: P(X > 110) ~ 3e-4 */
#define CHI2_LIMIT 110.0

static int pair_index(int a, int b)
{
	/* a < b < 12 */
	return a * 12 - a * (a + 1) / 2 + (b - a - 1);
}

/* Counts of each pair of the 12 positions across samples of 4. */
static void add_pairs(const uint64_t *pos, int k, uint64_t *pairs)
{
	for (int a = 0; a < k; a++)
		for (int b = a + 1; b < k; b++)
			pairs[pair_index((int)pos[a], (int)pos[b])]++;
}

static double chi2_uniform(const uint64_t *pairs)
{
	double expect = TRIALS * 6.0 / PAIRS, x = 0;

	for (int p = 0; p < PAIRS; p++)
		x += (pairs[p] - expect) * (pairs[p] - expect) / expect;
	return x;
}

static double chi2_two(const uint64_t *a, const uint64_t *b)
{
	double x = 0;

	for (int p = 0; p < PAIRS; p++)
		if (a[p] + b[p])
			x += ((double)a[p] - b[p]) * ((double)a[p] - b[p]) / (double)(a[p] + b[p]);
	return x;
}

ParameterizedTestParameters(graph, picks_are_uniform_subsets_alike_both_ways)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph, picks_are_uniform_subsets_alike_both_ways)
{
	struct job j = { 0 };
	struct rdps_client *c;
	struct rdps_graph *g;
	uint64_t node = (uint64_t)G->old2new[TWELVE], deg, begin = UINT64_MAX;
	static uint64_t pairs[2][PAIRS], ctl_pairs[PAIRS], single[2][12], ctl_single[12];
	uint64_t src[4], dst[4], eid[4], x = 99;
	double chi[2], chi_both, chi_ctl, chi_ctl_single = 0;

	job_start(&j, tp->name);
	c = client(&j);
	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_graph_in_degrees(g, &node, 1, &deg), 0);
	cr_assert_eq(deg, 12);
	for (int w = 0; w < 2; w++) {
		for (uint64_t t = 0; t < TRIALS; t++) {
			struct rdps_sampled out = { .src = src, .dst = dst, .eid = eid };
			uint64_t pos[4];

			/* independent seeds for the two ways */
			cr_assert_eq(rdps_graph_sample_neighbors(g, &node, 1, 4,
								 w ? RDPS_SAMPLE_READ : RDPS_SAMPLE_RPC,
								 (uint64_t)w * TRIALS + t, &out),
				     0, "%s", rdps_client_errmsg(c));
			cr_assert_eq(out.num_edges, 4);
			if (begin == UINT64_MAX) {
				/* the node's first in-edge id: its range [begin, begin + 12) */
				uint64_t nb, ptr[2];
				struct rdps_table_info ti;

				cr_assert_eq(rdps_client_table(c, RDPS_GRAPH_INDPTR, &ti), 0);
				cr_assert_eq(rdps_client_get(c, ti.id, &node, 1, ptr), 0);
				nb = ptr[0];
				begin = nb;
			}
			for (int k = 0; k < 4; k++) {
				pos[k] = eid[k] - begin;
				cr_assert_lt(pos[k], 12);
				single[w][pos[k]]++;
			}
			add_pairs(pos, 4, pairs[w]);
		}
		chi[w] = chi2_uniform(pairs[w]);
	}
	chi_both = chi2_two(pairs[0], pairs[1]);
	/* Control: 4 consecutive positions (cyclically) from a uniform start:
	 * each position comes equally often, the pairs do not. */
	for (uint64_t t = 0; t < TRIALS; t++) {
		uint64_t pos[4];
		uint64_t s0;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		s0 = (x >> 33) % 12;
		for (int k = 0; k < 4; k++)
			pos[k] = (s0 + (uint64_t)k) % 12;
		for (int a = 1; a < 4; a++) /* sort */
			for (int b = a; b > 0 && pos[b - 1] > pos[b]; b--) {
				uint64_t tmpv = pos[b];

				pos[b] = pos[b - 1];
				pos[b - 1] = tmpv;
			}
		for (int k = 0; k < 4; k++)
			ctl_single[pos[k]]++;
		add_pairs(pos, 4, ctl_pairs);
	}
	chi_ctl = chi2_uniform(ctl_pairs);
	for (int p = 0; p < 12; p++) {
		double e = TRIALS * 4.0 / 12;

		chi_ctl_single += (ctl_single[p] - e) * (ctl_single[p] - e) / e;
	}
	cr_log_info("%s: chi-square over 66 pairs: rpc %.1f, read %.1f, rpc vs read %.1f; "
		    "control (windows) %.1f (its marginals %.1f)", tp->name, chi[0], chi[1],
		    chi_both, chi_ctl, chi_ctl_single);
	cr_assert_lt(chi[0], CHI2_LIMIT, "rpc picks are not uniform: chi-square %.1f", chi[0]);
	cr_assert_lt(chi[1], CHI2_LIMIT, "read picks are not uniform: chi-square %.1f", chi[1]);
	cr_assert_lt(chi_both, CHI2_LIMIT, "the two ways differ: chi-square %.1f", chi_both);
	cr_assert_lt(chi_ctl_single, 30.0, "control's marginals should look uniform");
	cr_assert_gt(chi_ctl, 10 * CHI2_LIMIT, "the pair test cannot tell windows from subsets "
		     "(chi-square %.1f)", chi_ctl);
	rdps_graph_close(g);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

ParameterizedTestParameters(graph, bad_calls_and_hostile_requests_are_refused)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph, bad_calls_and_hostile_requests_are_refused)
{
	struct job j = { 0 };
	struct rdps_client *c;
	struct rdps_graph *g;
	struct rdps_table_info ti, te, tf;
	uint64_t node = 0, src[8], dst[8], lo, hi, other;
	struct rdps_sampled out = { .src = src, .dst = dst };
	struct {
		struct rdps_sample_req h;
		struct rdps_sample_group gr;
		uint64_t seeds[1];
	} rq;
	static char reply[1 << 16];
	size_t len;
	int64_t row[4] = { 0 };
	float grad[F] = { 0 };

	job_start(&j, tp->name);
	c = client(&j);
	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_table(c, RDPS_GRAPH_INDPTR, &ti), 0);
	cr_assert_eq(rdps_client_table(c, RDPS_GRAPH_EDGES, &te), 0);
	cr_assert_eq(rdps_client_table(c, "ndata:feat", &tf), 0);
	/* the calls */
	cr_assert_eq(rdps_graph_sample_neighbors(g, &node, 1, 0, RDPS_SAMPLE_RPC, 1, &out), -EINVAL);
	cr_assert_eq(rdps_graph_sample_neighbors(g, &node, 1, RDPS_SAMPLE_MAX_FANOUT + 1,
						 RDPS_SAMPLE_READ, 1, &out), -EINVAL);
	node = N;
	cr_assert_eq(rdps_graph_sample_neighbors(g, &node, 1, 4, RDPS_SAMPLE_RPC, 1, &out), -ERANGE);
	cr_assert(strstr(rdps_client_errmsg(c), "240"), "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_graph_in_degrees(g, &node, 1, src), -ERANGE);
	node = 0;
	cr_assert_eq(rdps_graph_sample_neighbors(g, &node, 1, 8, RDPS_SAMPLE_RPC, 1, &out), 0);
	/* the read-only tables */
	cr_assert_eq(rdps_client_set(c, te.id, &node, row, 1), -EPERM);
	cr_assert(strstr(rdps_client_errmsg(c), "read-only"), "%s", rdps_client_errmsg(c));
	{
		/* refused at once (in-process) or at the flush */
		int pr = rdps_client_push(c, tf.id, &node, grad, 1);

		if (!pr)
			pr = rdps_client_flush(c);
		cr_assert_lt(pr, 0);
		/* (RDMA backends report refused pushes by count; the server logs why) */
		cr_assert(strstr(rdps_client_errmsg(c), "read-only") ||
			  strstr(rdps_client_errmsg(c), "refused"), "%s", rdps_client_errmsg(c));
	}
	rdps_client_destroy(c);
	c = client(&j); /* a push error may leave its connection closed */
	/* hostile requests straight to server 0, each next to its valid twin */
	rdps_graph_part_nodes(g, 0, &lo, &hi);
	rdps_graph_part_nodes(g, 1, &other, &hi);
	rdps_graph_close(g);
	cr_assert_eq(rdps_graph_open(c, &g), 0);
	rq.h = (struct rdps_sample_req){ .indptr_table = ti.id, .edges_table = te.id, .fanout = 4,
					 .n = 1, .seed = 5, .num_groups = 1 };
	rq.gr = (struct rdps_sample_group){ .fanout = 4, .count = 1,
					    .prob_table = RDPS_SAMPLE_NO_PROB };
	rq.seeds[0] = lo;
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), 0, "%s",
		     rdps_client_errmsg(c));
	cr_assert_geq(len, 8);
	rq.seeds[0] = other; /* server 1's node */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -ERANGE);
	cr_assert(strstr(rdps_client_errmsg(c), "not on this server"), "%s",
		  rdps_client_errmsg(c));
	rq.seeds[0] = lo;
	rq.h.edges_table = tf.id; /* not a graph's */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.h.edges_table = te.id;
	rq.h.fanout = RDPS_SAMPLE_MAX_FANOUT + 1;
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.h.fanout = 4;
	rq.gr.fanout = 5; /* a group's fanout above the header's (the reply's bound) */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.gr.fanout = 4;
	rq.gr.prob_table = tf.id; /* weights from a table that is not an edge data */
	rq.gr.prob_dtype = RDPS_DTYPE_F32;
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.gr.prob_table = RDPS_SAMPLE_NO_PROB;
	rq.gr.prob_dtype = 0;
	rq.h.flags = 0x80; /* an unknown flag */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.h.flags = RDPS_SAMPLE_F_OUT; /* out-edges over the in-edge tables */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.h.flags = 0;
	rq.gr.count = 2; /* the group holds more slots than the request */
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), -EINVAL);
	rq.gr.count = 1;
	rq.h.n = 2; /* says two seeds, carries one */
	cr_assert_lt(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), 0);
	rdps_client_destroy(c);
	/* the servers still serve */
	c = client(&j);
	rq.h.n = 1;
	cr_assert_eq(rdps_client_call_idempotent(c, 0, RDPS_REQ_SAMPLE, &rq, sizeof(rq), reply,
						 sizeof(reply), &len), 0, "%s",
		     rdps_client_errmsg(c));
	rdps_graph_close(g);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

/*
 * RPC sampling asks every server holding seeds at once, so with all of them
 * stopped a call fails after one timeout, not one per server (it waited 2 x
 * 1.5 s before). Two `rdps server --graph` processes over tcp (verbs in
 * the soft-RoCE guest), SIGSTOPped.
 * Control: the same call succeeds just before the stop, and the timeout was
 * waited (the servers really did not answer).
 */
Test(graph, rpc_sampling_waits_one_timeout_for_all_servers)
{
	enum { TIMEOUT_MS = 1500, FANOUT = 4 };
	const char *tenv = getenv("RDPS_TEST_TRANSPORTS");
	char transport[16] = "tcp", text[96], *ipc_path, sid[SERVERS][8], *log[SERVERS];
	struct rdps_client_params p = { .client_id = 0, .num_clients = 1,
					 .timeout_ms = TIMEOUT_MS, .quiet = true };
	struct rdps_ipconfig ipc;
	struct rdps_client *c;
	struct rdps_graph *g;
	static uint64_t seeds[N], src[N * FANOUT], dst[N * FANOUT];
	struct rdps_sampled out = { .src = src, .dst = dst };
	pid_t srv[SERVERS];
	uint64_t t0, waited_ms;
	int ret, st;

	/* verbs in the soft-RoCE guest (RDPS_TEST_TRANSPORTS=verbs), else tcp */
	if (tenv && strstr(tenv, "verbs"))
		snprintf(transport, sizeof(transport), "verbs");
	snprintf(text, sizeof(text), "%s %d %d\n", test_host(), rdps_test_free_ports(SERVERS),
		 SERVERS);
	ipc_path = rdps_test_write(tmp, "ip_config_rpc.txt", text);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < SERVERS; s++) {
		char *argv[] = { RDPS_BIN, "server", "--ip_config", ipc_path, "--server_id", sid[s],
				 "--transport", transport, "--graph", pdir, "--quiet", NULL };

		snprintf(sid[s], sizeof(sid[s]), "%u", s);
		cr_assert(asprintf(&log[s], "%s/rpc-server%u.log", tmp, s) > 0);
		srv[s] = rdps_test_spawn(argv, log[s]);
		cr_assert_eq(rdps_test_wait_port(ipc.servers[s].host, ipc.servers[s].port, 30000), 0,
			     "server %u did not start (log %s)", s, log[s]);
	}
	p.transport = transport;
	p.servers = &ipc;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	for (uint64_t v = 0; v < N; v++)
		seeds[v] = v; /* both parts' nodes */
	cr_assert_eq(rdps_graph_sample_neighbors(g, seeds, N, FANOUT, RDPS_SAMPLE_RPC, 1, &out), 0,
		     "before the stop: %s", rdps_client_errmsg(c));
	cr_assert_gt(out.num_edges, 0);

	for (uint32_t s = 0; s < SERVERS; s++)
		cr_assert_eq(kill(srv[s], SIGSTOP), 0);
	t0 = rdps_now_ns();
	ret = rdps_graph_sample_neighbors(g, seeds, N, FANOUT, RDPS_SAMPLE_RPC, 2, &out);
	waited_ms = (rdps_now_ns() - t0) / 1000000;
	cr_log_info("rpc sampling over %s with both servers stopped: %d after %llu ms: %s",
		    transport, ret, (unsigned long long)waited_ms, rdps_client_errmsg(c));
	cr_assert_eq(ret, -ETIMEDOUT, "with the servers stopped: %d (%s)", ret,
		     rdps_client_errmsg(c));
	cr_assert_geq(waited_ms, TIMEOUT_MS - 100, "did not wait for the servers: %llu ms",
		      (unsigned long long)waited_ms);
	cr_assert_lt(waited_ms, 2 * TIMEOUT_MS - 300,
		     "waited %llu ms: one %d ms timeout per server, not one for all",
		     (unsigned long long)waited_ms, TIMEOUT_MS);
	cr_assert(strstr(rdps_client_errmsg(c), "asked at once"), "%s", rdps_client_errmsg(c));

	rdps_graph_close(g);
	rdps_client_destroy(c);
	for (uint32_t s = 0; s < SERVERS; s++) {
		kill(srv[s], SIGKILL);
		kill(srv[s], SIGCONT);
		cr_assert_eq(rdps_test_wait(srv[s], 10000, &st), 0);
		free(log[s]);
	}
	rdps_ipconfig_free(&ipc);
	free(ipc_path);
}

Test(graph, choose_is_floyd_uniform_and_sorted)
{
	uint64_t pos[RDPS_SAMPLE_MAX_FANOUT];
	static uint64_t hits[3000];

	/* all when the degree is at most the fanout */
	cr_assert_eq(rdps_sample_choose(1, 2, 5, 5, pos), 5);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(pos[i], (uint64_t)i);
	cr_assert_eq(rdps_sample_choose(1, 2, 0, 5, pos), 0);
	/* large fanouts use the hash set: distinct, sorted, in range, each
	 * position about equally often */
	for (uint64_t s = 0; s < 200; s++) {
		uint32_t k = rdps_sample_choose(s, 77, 3000, 1000, pos);

		cr_assert_eq(k, 1000);
		for (uint32_t i = 0; i < k; i++) {
			cr_assert_lt(pos[i], 3000);
			cr_assert(!i || pos[i] > pos[i - 1]);
			hits[pos[i]]++;
		}
	}
	{
		double e = 200 * 1000 / 3000.0, x = 0;

		for (int p = 0; p < 3000; p++)
			x += (hits[p] - e) * (hits[p] - e) / e;
		/* 2999 degrees of freedom: mean 2999, sd 77 */
		cr_assert_lt(x, 2999 + 5 * 77, "chi-square %.0f", x);
	}
	/* the same (seed, node) picks the same; another node other edges */
	{
		uint64_t a[8], b[8];

		rdps_sample_choose(9, 10, 100, 8, a);
		rdps_sample_choose(9, 10, 100, 8, b);
		cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
		rdps_sample_choose(9, 11, 100, 8, b);
		cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
	}
}
