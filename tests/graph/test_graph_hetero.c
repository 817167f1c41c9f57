// SPDX-License-Identifier: MIT
// ctest-timeout: 600
/*
 * A heterogeneous graph (rdps_graph_partition_build_input: 3 node types,
 * one featureless; 4 canonical edge types, relations both ways and a self
 * relation; node and edge data of float32, int32, bfloat16, uint8 and
 * int16 in 1 to 3 dimensions) on 2 servers, on every transport of
 * RDPS_TEST_TRANSPORTS (tcp, inproc, ofi; verbs in the soft-RoCE guest):
 *
 * - the schema and the type maps (homo <-> per-type ids both ways, parts)
 *   against the partition's idmap;
 * - every row of every data, byte for byte, against the input through the
 *   idmap (nodes) and the edges' original ids (edges);
 * - every edge's endpoints and type against the input;
 * - typed sampling with a fanout per etype (-1 all, 0 none), over in- and
 *   out-edges: the two ways pick the same edges for a seed, every edge is
 *   an edge of the seed of that etype in that direction, min(fanout,
 *   degree) distinct edges per (seed, etype); with replacement exactly
 *   fanout per slot with edges; weighted by an edge data (zero weights
 *   never picked); excluded edges never picked (and every other one is).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "rdps_test.h"
#include "tests/integration/transport_params.h"

#define SERVERS 2
enum { TA, TB, TC, NT };
enum { R_AB, R_BA, R_AA, R_CA, NR };
static const uint64_t nn[NT] = { 50, 30, 20 };
static const uint64_t ne[NR] = { 160, 160, 120, 40 };
static const char *const tname[NT] = { "A", "B", "C" };
static const char *const rname[NR] = { "r1", "r1_rev", "link", "to" };
static const int rsrc[NR] = { TA, TB, TA, TC }, rdst[NR] = { TB, TA, TA, TA };

static char err[640];
static char *tmp, *pdir;

struct input {
	int64_t src[NR][200], dst[NR][200];
	float a_feat[50][3];
	int32_t a_year[50];
	uint16_t a_bf[50][2];
	uint8_t c_img[20][2][2];
	float ca_w[40];
	int16_t ca_t[40][3];
	int64_t *idmap;   /* new homo -> per-type input id */
	uint64_t N, E;
};
static struct input *I;

static void setup(void)
{
	struct rdps_graph_array an[3], cn[1], ce[2];
	struct rdps_graph_ntype_input nts[NT];
	struct rdps_graph_etype_input ets[NR];
	struct rdps_graph_input in = { .name = "het", .num_ntypes = NT, .ntypes = nts,
				       .num_etypes = NR, .etypes = ets };
	struct rdps_graph_partition_opts o = { .k = SERVERS, .method = RDPS_PARTITION_METIS,
					       .balance_edges = true, .seed = 9 };
	struct rdps_graph_partition_result r;
	uint64_t x = 17, rows, cols;
	char path[700];

	rdps_log_threshold = RDPS_LOG_ERROR;
	tmp = rdps_test_tmpdir("ghet");
	I = calloc(1, sizeof(*I));
	for (int e = 0; e < NR; e++)
		for (uint64_t i = 0; i < ne[e]; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			if (e == R_BA) { /* the reverse of r1 */
				I->src[e][i] = I->dst[R_AB][i];
				I->dst[e][i] = I->src[R_AB][i];
				continue;
			}
			I->src[e][i] = (int64_t)((x >> 33) % nn[rsrc[e]]);
			I->dst[e][i] = (int64_t)((x >> 13) % nn[rdst[e]]);
		}
	for (int v = 0; v < 50; v++) {
		for (int k = 0; k < 3; k++)
			I->a_feat[v][k] = (float)v + 0.5f * (float)k;
		I->a_year[v] = 1990 + v;
		I->a_bf[v][0] = (uint16_t)(0x3f80 + v);
		I->a_bf[v][1] = (uint16_t)(0xbf80 + v);
	}
	for (int v = 0; v < 20; v++)
		for (int k = 0; k < 4; k++)
			I->c_img[v][k / 2][k % 2] = (uint8_t)(v * 4 + k);
	for (int i = 0; i < 40; i++) {
		I->ca_w[i] = i % 4 ? (float)(i % 7 + 1) : 0.0f; /* every 4th: never picked */
		for (int k = 0; k < 3; k++)
			I->ca_t[i][k] = (int16_t)(i * 10 - k);
	}
	an[0] = (struct rdps_graph_array){ "feat", "float32", 2, { 50, 3 }, I->a_feat };
	an[1] = (struct rdps_graph_array){ "year", "int32", 1, { 50 }, I->a_year };
	an[2] = (struct rdps_graph_array){ "bf", "bfloat16", 2, { 50, 2 }, I->a_bf };
	cn[0] = (struct rdps_graph_array){ "img", "uint8", 3, { 20, 2, 2 }, I->c_img };
	ce[0] = (struct rdps_graph_array){ "w", "float32", 1, { 40 }, I->ca_w };
	ce[1] = (struct rdps_graph_array){ "t", "int16", 2, { 40, 3 }, I->ca_t };
	for (int t = 0; t < NT; t++)
		nts[t] = (struct rdps_graph_ntype_input){ .name = tname[t], .num_nodes = nn[t] };
	nts[TA].num_data = 3;
	nts[TA].data = an;
	nts[TC].num_data = 1;
	nts[TC].data = cn;
	for (int e = 0; e < NR; e++)
		ets[e] = (struct rdps_graph_etype_input){ .src = tname[rsrc[e]], .name = rname[e],
							  .dst = tname[rdst[e]],
							  .num_edges = ne[e], .src_ids = I->src[e],
							  .dst_ids = I->dst[e] };
	ets[R_CA].num_data = 2;
	ets[R_CA].data = ce;
	pdir = malloc(600);
	snprintf(pdir, 600, "%s/parts", tmp);
	o.out_dir = pdir;
	cr_assert_eq(rdps_graph_partition_build_input(&in, &o, &r, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/idmap.npy", pdir);
	cr_assert_eq(rdps_npy_read(path, "<i8", (void **)&I->idmap, &rows, &cols, err,
				   sizeof(err)), 0, "%s", err);
	I->N = rows;
	I->E = r.num_edges;
	cr_assert_eq(rows, 100);
}

static void teardown(void)
{
	free(I->idmap);
	free(I);
	rdps_test_rmtree(tmp);
	free(tmp);
	free(pdir);
}

TestSuite(graph_hetero, .init = setup, .fini = teardown, .timeout = 600);

struct job {
	struct rdps_ipconfig ipc;
	struct rdps_graph_part *part[SERVERS];
	struct rdps_server *srv[SERVERS];
	pthread_t th[SERVERS];
	struct rdps_client *c;
	struct rdps_graph *g;
};

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static void job_start(struct job *j, const char *transport)
{
	const char *h = getenv("RDPS_TEST_HOST");
	struct rdps_client_params p = { .transport = transport, .servers = &j->ipc,
					 .num_clients = 1, .timeout_ms = 30000, .quiet = true };
	char text[96];

	snprintf(text, sizeof(text), "%s %d %d\n", h && *h ? h : "127.0.0.1",
		 rdps_test_free_ports(SERVERS), SERVERS);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < SERVERS; s++) {
		struct rdps_server_config cfg = { .transport = transport, .ipc = &j->ipc,
						  .server_id = s, .num_threads = 2 };

		cr_assert_eq(rdps_graph_part_load(pdir, s, &j->part[s], err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(rdps_graph_part_add_tables(j->part[s], &cfg), 0);
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->th[s], NULL, serve, j->srv[s]), 0);
	}
	cr_assert_eq(rdps_client_create(&p, &j->c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_graph_open(j->c, &j->g), 0, "%s", rdps_client_errmsg(j->c));
}

static void job_stop(struct job *j)
{
	rdps_graph_close(j->g);
	rdps_client_destroy(j->c);
	for (uint32_t s = 0; s < SERVERS; s++)
		rdps_server_stop(j->srv[s]);
	for (uint32_t s = 0; s < SERVERS; s++) {
		pthread_join(j->th[s], NULL);
		rdps_server_destroy(j->srv[s]);
		rdps_graph_part_free(j->part[s]);
	}
	rdps_ipconfig_free(&j->ipc);
}

/* Per-type new id -> homo id, and the input's per-type id of a homo id. */
static uint64_t homo_of(struct job *j, uint32_t t, uint64_t per)
{
	uint64_t h;

	cr_assert_eq(rdps_graph_map_to_homo_nid(j->g, t, &per, 1, &h), 0, "%s",
		     rdps_client_errmsg(j->c));
	return h;
}

/* Every edge (homo id order): src, dst, type, original per-etype id. */
static int64_t *edge_rows(struct job *j)
{
	struct rdps_table_info te;
	int64_t *rows = malloc(I->E * 4 * sizeof(int64_t));
	uint64_t *ids = malloc(I->E * sizeof(uint64_t));

	cr_assert_eq(rdps_client_table(j->c, RDPS_GRAPH_EDGES, &te), 0);
	for (uint64_t e = 0; e < I->E; e++)
		ids[e] = e;
	cr_assert_eq(rdps_client_get(j->c, te.id, ids, I->E, rows), 0, "%s",
		     rdps_client_errmsg(j->c));
	free(ids);
	return rows;
}

ParameterizedTestParameters(graph_hetero, schema_maps_data_and_structure_match_the_input)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph_hetero,
		  schema_maps_data_and_structure_match_the_input)
{
	struct job j = { 0 };
	struct rdps_graph_data_info di;
	int64_t *rows;
	uint32_t s_t, d_t;

	job_start(&j, tp->name);
	cr_assert_eq(rdps_graph_num_ntypes(j.g), NT);
	cr_assert_eq(rdps_graph_num_etypes(j.g), NR);
	for (int t = 0; t < NT; t++) {
		cr_assert_str_eq(rdps_graph_ntype_name(j.g, (uint32_t)t), tname[t]);
		cr_assert_eq(rdps_graph_num_nodes_of(j.g, (uint32_t)t), nn[t]);
	}
	for (int e = 0; e < NR; e++) {
		cr_assert_str_eq(rdps_graph_etype_name(j.g, (uint32_t)e, &s_t, &d_t), rname[e]);
		cr_assert(s_t == (uint32_t)rsrc[e] && d_t == (uint32_t)rdst[e]);
		cr_assert_eq(rdps_graph_etype_id(j.g, rname[e]), e);
	}
	cr_assert_eq(rdps_graph_etype_id(j.g, "A:link:A"), R_AA);
	cr_assert_eq(rdps_graph_ntype_id(j.g, "nope"), -ENOENT);
	/* type maps both ways, against idmap's per-type ids */
	for (uint64_t h = 0; h < I->N; h++) {
		int32_t t;
		uint64_t per, back;
		uint32_t p, q;

		cr_assert_eq(rdps_graph_map_to_per_ntype(j.g, &h, 1, &t, &per), 0);
		cr_assert_eq(rdps_graph_map_to_homo_nid(j.g, (uint32_t)t, &per, 1, &back), 0);
		cr_assert_eq(back, h);
		cr_assert_eq(rdps_graph_nid2partid(j.g, &h, 1, &p), 0);
		for (q = 0; q < SERVERS; q++) {
			uint64_t lo, hi;

			rdps_graph_ntype_range(j.g, (uint32_t)t, q, &lo, &hi);
			if (h >= lo && h < hi)
				break;
		}
		cr_assert_eq(p, q, "node %llu: part %u, its type's range says %u",
			     (unsigned long long)h, p, q);
	}
	/* node data, byte for byte */
	for (int t = 0; t < NT; t++)
		for (uint32_t i = 0; rdps_graph_data(j.g, 0, (uint32_t)t, i, &di) == 0; i++) {
			struct rdps_table_info ti;
			const char *src = !strcmp(di.name, "feat") ? (const char *)I->a_feat
					: !strcmp(di.name, "year") ? (const char *)I->a_year
					: !strcmp(di.name, "bf") ? (const char *)I->a_bf
								   : (const char *)I->c_img;
			uint64_t ids[50];
			char *buf = malloc(50 * 256);

			cr_assert_eq(rdps_client_table(j.c, di.table, &ti), 0, "%s", di.table);
			for (uint64_t v = 0; v < nn[t]; v++)
				ids[v] = v;
			cr_assert_eq(rdps_client_get(j.c, ti.id, ids, nn[t], buf), 0, "%s",
				     rdps_client_errmsg(j.c));
			for (uint64_t v = 0; v < nn[t]; v++) {
				uint64_t orig = (uint64_t)I->idmap[homo_of(&j, (uint32_t)t, v)];

				cr_assert_arr_eq(buf + v * di.row_bytes, src + orig * di.row_bytes,
						 di.row_bytes, "%s of %s %llu", di.name, tname[t],
						 (unsigned long long)v);
			}
			free(buf);
		}
	/* edges: endpoints and type; edge data through the original ids */
	rows = edge_rows(&j);
	for (uint64_t y = 0; y < I->E; y++) {
		int32_t st, dt, et;
		uint64_t sp, dp, ep;
		int64_t *r = rows + 4 * y;

		cr_assert_eq(rdps_graph_map_to_per_etype(j.g, &y, 1, &et, &ep), 0);
		cr_assert_eq(r[2], et);
		cr_assert_eq(rdps_graph_map_to_per_ntype(j.g, (uint64_t *)&r[0], 1, &st, &sp), 0);
		cr_assert_eq(rdps_graph_map_to_per_ntype(j.g, (uint64_t *)&r[1], 1, &dt, &dp), 0);
		cr_assert(st == rsrc[et] && dt == rdst[et]);
		cr_assert_eq(I->idmap[r[0]], I->src[et][r[3]], "edge %llu's source",
			     (unsigned long long)y);
		cr_assert_eq(I->idmap[r[1]], I->dst[et][r[3]], "edge %llu's destination",
			     (unsigned long long)y);
		if (et == R_CA) {
			struct rdps_table_info tw, tt;
			float w;
			int16_t tv[3];

			cr_assert_eq(rdps_graph_data(j.g, 1, R_CA, 0, &di), 0);
			cr_assert_eq(rdps_client_table(j.c, di.table, &tw), 0);
			cr_assert_eq(rdps_graph_data(j.g, 1, R_CA, 1, &di), 0);
			cr_assert_eq(rdps_client_table(j.c, di.table, &tt), 0);
			cr_assert_eq(rdps_client_get(j.c, tw.id, &ep, 1, &w), 0);
			cr_assert_eq(rdps_client_get(j.c, tt.id, &ep, 1, tv), 0);
			cr_assert_eq(w, I->ca_w[r[3]]);
			cr_assert_arr_eq(tv, I->ca_t[r[3]], sizeof(tv));
		}
	}
	free(rows);
	job_stop(&j);
}

/* Edges of seed h of etype e in a direction, from the edge rows. */
static uint64_t degree(const int64_t *rows, uint64_t h, int e, bool out)
{
	uint64_t d = 0;

	for (uint64_t y = 0; y < I->E; y++)
		d += rows[4 * y + 2] == e && (uint64_t)rows[4 * y + (out ? 0 : 1)] == h;
	return d;
}

static void check_picks(const int64_t *rows, const uint64_t *seeds, size_t n,
			const int32_t *fan, bool out, bool replace,
			const struct rdps_sample_result *r)
{
	static uint32_t count[100][NR];

	memset(count, 0, sizeof(count));
	for (size_t m = 0; m < r->num_edges; m++) {
		const int64_t *e = rows + 4 * r->eid[m];
		uint64_t seed = seeds[r->seed_index[m]];

		cr_assert((uint64_t)e[0] == r->src[m] && (uint64_t)e[1] == r->dst[m] &&
			  e[2] == r->etype[m] && r->type[m] == r->etype[m],
			  "pick %zu (edge %llu) is not that edge", m, (unsigned long long)r->eid[m]);
		cr_assert_eq(out ? r->src[m] : r->dst[m], seed);
		if (!replace && m && r->seed_index[m] == r->seed_index[m - 1] &&
		    r->etype[m] == r->etype[m - 1])
			cr_assert_gt(r->eid[m], r->eid[m - 1], "repeat or order");
		count[r->seed_index[m]][r->etype[m]]++;
	}
	for (size_t i = 0; i < n; i++)
		for (int e = 0; e < NR; e++) {
			uint64_t d = degree(rows, seeds[i], e, out);
			uint64_t want = !fan[e] ? 0 : fan[e] < 0 ? d
				      : replace ? (d ? (uint64_t)fan[e] : 0)
				      : d < (uint64_t)fan[e] ? d : (uint64_t)fan[e];

			cr_assert_eq(count[i][e], want, "seed %llu etype %d: %u picks, want %llu",
				     (unsigned long long)seeds[i], e, count[i][e],
				     (unsigned long long)want);
		}
}

static void same(const struct rdps_sample_result *a, const uint64_t *src, const uint64_t *eid,
		 size_t n)
{
	cr_assert_eq(a->num_edges, n, "the ways picked %zu and %zu edges", n, a->num_edges);
	cr_assert_arr_eq(a->src, src, n * 8);
	cr_assert_arr_eq(a->eid, eid, n * 8);
}

ParameterizedTestParameters(graph_hetero, typed_sampling_both_ways_in_and_out)
{
	return rdps_test_transport_params();
}

ParameterizedTest(struct transport_param *tp, graph_hetero, typed_sampling_both_ways_in_and_out)
{
	struct job j = { 0 };
	static const int32_t fan[NR] = { 2, -1, 3, 1 };
	uint64_t seeds[100], *src = malloc(4000 * 8), *eid = malloc(4000 * 8), zero = 0;
	const struct rdps_sample_result *r;
	int64_t *rows;

	job_start(&j, tp->name);
	rows = edge_rows(&j);
	for (uint64_t v = 0; v < I->N; v++)
		seeds[v] = v;
	for (int out = 0; out < 2; out++)
		for (int replace = 0; replace < 2; replace++) {
			struct rdps_sample_spec sp = { .fanouts = fan, .out = out, .replace = replace,
						       .way = RDPS_SAMPLE_RPC, .seed = 42 };
			size_t n;

			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0, "%s",
				     rdps_client_errmsg(j.c));
			check_picks(rows, seeds, I->N, fan, out, replace, r);
			n = r->num_edges;
			memcpy(src, r->src, n * 8);
			memcpy(eid, r->eid, n * 8);
			sp.way = RDPS_SAMPLE_READ;
			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0, "%s",
				     rdps_client_errmsg(j.c));
			same(r, src, eid, n);
			cr_log_info("%s: %s-edges%s: %zu picks, both ways alike", tp->name,
				    out ? "out" : "in", replace ? " with replacement" : "", n);
		}
	/* weighted by 'w' of C->A: zero weights never picked */
	for (int out = 0; out < 2; out++) {
		static const int32_t f1[NR] = { 0, 0, 0, 1 };
		struct rdps_sample_spec sp = { .fanouts = f1, .out = out, .prob = "w",
					       .way = RDPS_SAMPLE_RPC, .seed = 7 };
		size_t n, got = 0;

		for (uint64_t round = 0; round < 20; round++) {
			sp.seed = round;
			sp.way = RDPS_SAMPLE_RPC;
			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0, "%s",
				     rdps_client_errmsg(j.c));
			n = r->num_edges;
			memcpy(eid, r->eid, n * 8);
			for (size_t m = 0; m < n; m++)
				cr_assert_neq(I->ca_w[rows[4 * eid[m] + 3]], 0.0f,
					      "a zero-weight edge picked");
			got += n;
			sp.way = RDPS_SAMPLE_READ;
			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0, "%s",
				     rdps_client_errmsg(j.c));
			cr_assert_eq(r->num_edges, n);
			cr_assert_arr_eq(r->eid, eid, n * 8);
		}
		cr_assert_gt(got, 0);
	}
	/* excluded edges: never picked, every other one is (fanout -1) */
	{
		static const int32_t all[NR] = { -1, -1, -1, -1 };
		uint64_t ex[50];
		struct rdps_sample_spec sp = { .fanouts = all, .exclude = ex, .num_exclude = 50,
					       .seed = 1 };

		for (int i = 0; i < 50; i++)
			ex[i] = (uint64_t)(i * 13) % I->E;
		for (int out = 0; out < 2; out++)
			for (int way = 0; way < 2; way++) {
				sp.out = out;
				sp.way = way;
				cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0, "%s",
					     rdps_client_errmsg(j.c));
				cr_assert_eq(r->num_edges, I->E - 50);
				for (size_t m = 0; m < r->num_edges; m++)
					for (int i = 0; i < 50; i++)
						cr_assert_neq(r->eid[m], ex[i]);
			}
		/* the same with a fanout: a choice, RPC and READ alike */
		sp.fanouts = fan;
		for (int out = 0; out < 2; out++) {
			size_t n;

			sp.out = out;
			sp.way = RDPS_SAMPLE_RPC;
			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0);
			n = r->num_edges;
			memcpy(src, r->src, n * 8);
			memcpy(eid, r->eid, n * 8);
			for (size_t m = 0; m < n; m++)
				for (int i = 0; i < 50; i++)
					cr_assert_neq(eid[m], ex[i]);
			sp.way = RDPS_SAMPLE_READ;
			cr_assert_eq(rdps_graph_sample(j.g, seeds, I->N, &sp, &r), 0);
			same(r, src, eid, n);
		}
	}
	/* errors before work */
	{
		int32_t bad[NR] = { 2, -2, 0, 0 };
		struct rdps_sample_spec sp = { .fanouts = bad, .seed = 1 };
		uint64_t far = I->N;

		cr_assert_eq(rdps_graph_sample(j.g, seeds, 1, &sp, &r), -EINVAL);
		cr_assert(strstr(rdps_client_errmsg(j.c), "B:r1_rev:A"), "%s",
			  rdps_client_errmsg(j.c));
		bad[1] = 0;
		sp.prob = "w"; /* r1 has no 'w' */
		cr_assert_eq(rdps_graph_sample(j.g, seeds, 1, &sp, &r), -EINVAL);
		cr_assert(strstr(rdps_client_errmsg(j.c), "A:r1:B"), "%s", rdps_client_errmsg(j.c));
		sp.prob = NULL;
		cr_assert_eq(rdps_graph_sample(j.g, &far, 1, &sp, &r), -ERANGE);
		sp.exclude = &far;
		sp.num_exclude = 1;
		far = I->E;
		cr_assert_eq(rdps_graph_sample(j.g, &zero, 1, &sp, &r), -ERANGE);
		/* a graph of several etypes has no untyped sampler */
		{
			uint64_t s1[4], d1[4];
			struct rdps_sampled o = { .src = s1, .dst = d1 };

			cr_assert_eq(rdps_graph_sample_neighbors(j.g, &zero, 1, 4, RDPS_SAMPLE_RPC,
								 1, &o), -EINVAL);
		}
	}
	free(rows);
	free(src);
	free(eid);
	job_stop(&j);
}
