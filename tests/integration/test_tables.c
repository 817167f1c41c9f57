// SPDX-License-Identifier: MIT
// ctest-timeout: 300
/*
 * Tables made by clients (DGL's DistTensor / DistEmbedding), on 2 servers
 * of every transport in RDPS_TEST_TRANSPORTS (default tcp, inproc, and ofi
 * where libfabric's tcp;ofi_rxm runs; verbs in the soft-RoCE guest):
 *
 * - made by several clients at once: one table, the same slot for all; a
 *   later client finds it by name; another shape under the name is an error
 *   naming both shapes;
 * - rows of every dtype written and read back byte for byte (ids unsorted,
 *   repeated, over both servers; rows whose bytes are not whole words);
 * - each optimizer applied to the rows pushed (and only to them), against a
 *   double reference: sgd, adagrad, adagrad_row, adam;
 * - errors: gradients to a table without optimizer, an optimizer for an
 *   int64 table, an id past the rows, dropping the servers' own table;
 *   dropped, a name is free for another shape.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/client.h"
#include "rdps/server.h"
#include "transport_params.h"
#include "rdps_test.h"

#define SERVERS 2

struct job {
	const char *transport;
	struct rdps_ipconfig ipc;
	struct rdps_server *srv[SERVERS];
	pthread_t th[SERVERS];
};

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

static void job_start(struct job *j, const char *transport)
{
	char text[96], err[640];

	j->transport = transport;
	snprintf(text, sizeof(text), "%s %d %d\n", test_host(), rdps_test_free_ports(SERVERS),
		 SERVERS);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < SERVERS; s++) {
		struct rdps_server_config cfg = { .transport = transport, .ipc = &j->ipc,
						  .server_id = s, .num_tables = 1, .num_threads = 2 };

		/* the servers' own table: clients may not drop it */
		cfg.tables[0] = (struct rdps_server_table_config){ .name = "base", .num_rows = 10,
			.dim = 4, .init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->th[s], NULL, serve, j->srv[s]), 0);
	}
}

static struct rdps_client *client(struct job *j, uint32_t id, uint32_t n)
{
	struct rdps_client_params p = { .transport = j->transport, .servers = &j->ipc,
					 .client_id = id, .num_clients = n, .timeout_ms = 30000,
					 .quiet = true };
	struct rdps_client *c;
	char err[640];

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
	}
	rdps_ipconfig_free(&j->ipc);
}

/* ---------------------------------------------------------------------- */


ParameterizedTestParameters(tables, made_by_clients)
{
	return rdps_test_transport_params();
}

ParameterizedTestParameters(tables, rows_of_every_dtype)
{
	return rdps_test_transport_params();
}

ParameterizedTestParameters(tables, optimizers_on_pushed_rows)
{
	return rdps_test_transport_params();
}

ParameterizedTestParameters(tables, errors_and_drop)
{
	return rdps_test_transport_params();
}

ParameterizedTestParameters(tables, optimizer_state_read_and_written)
{
	return rdps_test_transport_params();
}

/* ---------------------------------------------------------------------- */

#define MAKERS 4

struct maker {
	struct job *j;
	uint32_t id;
	struct rdps_table_info info;
	int ret;
	char err[640];
};

static void *make_main(void *arg)
{
	struct maker *m = arg;
	struct rdps_client *c = client(m->j, m->id, MAKERS);
	struct rdps_table_spec spec = { .name = "emb", .num_rows = 1001, .elems = 13,
					.dtype = RDPS_DTYPE_F32, .init_range = 0.5f, .seed = 4 };

	m->ret = rdps_client_table_create(c, &spec, &m->info);
	snprintf(m->err, sizeof(m->err), "%s", rdps_client_errmsg(c));
	m->info.name = NULL; /* the client's own string goes with it */
	rdps_client_destroy(c);
	return NULL;
}

ParameterizedTest(struct transport_param *tp, tables, made_by_clients, .timeout = 120)
{
	struct job j;
	struct maker m[MAKERS];
	pthread_t th[MAKERS];
	struct rdps_table_spec other = { .name = "emb", .num_rows = 1001, .elems = 12,
					 .dtype = RDPS_DTYPE_F32 };
	struct rdps_table_info info, late;
	struct rdps_client *c, *c2;
	float a[13], b[13];
	uint64_t id = 1000;

	job_start(&j, tp->name);
	for (uint32_t i = 0; i < MAKERS; i++) {
		m[i] = (struct maker){ .j = &j, .id = i };
		cr_assert_eq(pthread_create(&th[i], NULL, make_main, &m[i]), 0);
	}
	for (uint32_t i = 0; i < MAKERS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(m[i].ret, 0, "client %u: %s", i, m[i].err);
		cr_assert_eq(m[i].info.id, m[0].info.id, "client %u got slot %u, client 0 slot %u", i,
			     m[i].info.id, m[0].info.id);
		cr_assert(m[i].info.num_rows == 1001 && m[i].info.elems == 13 &&
			  m[i].info.dtype == RDPS_DTYPE_F32);
	}
	cr_assert_eq(m[0].info.id, 1, "slot 0 is the servers' own table");
	/* A client that came later finds it, rows as the makers left them. */
	c = client(&j, 0, MAKERS);
	cr_assert_eq(rdps_client_table(c, "emb", &late), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(late.id, m[0].info.id);
	c2 = client(&j, 1, MAKERS);
	cr_assert_eq(rdps_client_table(c2, "emb", &info), 0, "%s", rdps_client_errmsg(c2));
	cr_assert_eq(rdps_client_pull(c, late.id, &id, 1, a), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c2, info.id, &id, 1, b), 0, "%s", rdps_client_errmsg(c2));
	cr_assert_arr_eq(a, b, sizeof(a));
	for (int k = 0; k < 13; k++)
		cr_assert(a[k] >= -0.5f && a[k] <= 0.5f && a[k] != 0, "row 1000 starts uniform");
	/* Another shape under the name: refused, both shapes named. */
	cr_assert_eq(rdps_client_table_create(c, &other, &info), -EEXIST);
	cr_assert(strstr(rdps_client_errmsg(c), "1001 rows x 13 float32") &&
		  strstr(rdps_client_errmsg(c), "1001 rows x 12 float32"), "%s",
		  rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_table(c, "nope", &info), -ENOENT);
	rdps_client_destroy(c2);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

ParameterizedTest(struct transport_param *tp, tables, rows_of_every_dtype, .timeout = 120)
{
	static const struct {
		int dtype;
		uint32_t elems;
	} shapes[] = { { RDPS_DTYPE_F32, 5 }, { RDPS_DTYPE_F64, 3 }, { RDPS_DTYPE_I64, 7 },
		       { RDPS_DTYPE_U8, 5 }, { RDPS_DTYPE_U8, 8 }, { RDPS_DTYPE_U8, 1 } };
	enum { ROWS = 301, N = 200 };
	struct job j;
	struct rdps_client *c, *c2;
	uint64_t x = 99;

	job_start(&j, tp->name);
	c = client(&j, 0, 2);
	c2 = client(&j, 1, 2);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		size_t es = rdps_dtype_size(shapes[k].dtype), row = es * shapes[k].elems;
		struct rdps_table_spec spec = { .num_rows = ROWS, .elems = shapes[k].elems,
						.dtype = shapes[k].dtype };
		struct rdps_table_info info, info2;
		unsigned char *want = calloc(ROWS, row), *in = malloc(N * row), *out = malloc(N * row);
		uint64_t ids[N];
		char name[32];

		cr_assert(want && in && out);
		snprintf(name, sizeof(name), "%s_%u", rdps_dtype_name(shapes[k].dtype),
			 shapes[k].elems);
		spec.name = name;
		cr_assert_eq(rdps_client_table_create(c, &spec, &info), 0, "%s", rdps_client_errmsg(c));
		cr_assert(info.dtype == shapes[k].dtype && info.elems == shapes[k].elems);
		/* Unsorted ids over both servers, some twice (the later row stays). */
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			ids[i] = i % 10 == 9 ? ids[i - 5] : (x >> 33) % ROWS;
			for (size_t b = 0; b < row; b++)
				in[i * row + b] = (unsigned char)((x >> (b % 56)) ^ b ^ i);
			memcpy(want + ids[i] * row, in + i * row, row);
		}
		cr_assert_eq(rdps_client_set(c, info.id, ids, in, N), 0, "%s: %s", name,
			     rdps_client_errmsg(c));
		/* Another client reads them back, every row of the table. */
		cr_assert_eq(rdps_client_table(c2, name, &info2), 0, "%s", rdps_client_errmsg(c2));
		for (uint64_t r0 = 0; r0 < ROWS; r0 += N) {
			uint64_t all[N];
			size_t m = ROWS - r0 < N ? ROWS - r0 : N;

			for (size_t i = 0; i < m; i++)
				all[i] = ROWS - 1 - (r0 + i); /* descending: grouped per server */
			cr_assert_eq(rdps_client_get(c2, info2.id, all, m, out), 0, "%s",
				     rdps_client_errmsg(c2));
			for (size_t i = 0; i < m; i++)
				cr_assert_arr_eq(out + i * row, want + all[i] * row, row,
						 "%s row %llu differs", name,
						 (unsigned long long)all[i]);
		}
		cr_log_info("%s: %s, %u rows written, read back byte for byte", tp->name, name, N);
		free(want);
		free(in);
		free(out);
	}
	rdps_client_destroy(c2);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

/* The reference of one optimizer step on row w (dim), state st. */
static void ref_step(int opt, double *w, double *st, int *t, uint32_t dim, double lr,
		     const double *g)
{
	if (opt == RDPS_OPT_SGD) {
		for (uint32_t k = 0; k < dim; k++)
			w[k] -= lr * g[k];
	} else if (opt == RDPS_OPT_ADAGRAD) {
		for (uint32_t k = 0; k < dim; k++) {
			st[k] += g[k] * g[k];
			w[k] -= lr * g[k] / (sqrt(st[k]) + 1e-10);
		}
	} else if (opt == RDPS_OPT_ADAGRAD_ROW) {
		double sq = 0;

		for (uint32_t k = 0; k < dim; k++)
			sq += g[k] * g[k];
		st[0] += sq / dim;
		for (uint32_t k = 0; k < dim; k++)
			w[k] -= lr * g[k] / (sqrt(st[0]) + 1e-10);
	} else {
		double bc1, bc2;

		(*t)++;
		bc1 = 1 - pow(0.9, *t);
		bc2 = 1 - pow(0.999, *t);
		for (uint32_t k = 0; k < dim; k++) {
			st[k] = 0.9 * st[k] + 0.1 * g[k];
			st[dim + k] = 0.999 * st[dim + k] + 0.001 * g[k] * g[k];
			w[k] -= lr * (st[k] / bc1) / (sqrt(st[dim + k] / bc2) + 1e-8);
		}
	}
}

ParameterizedTest(struct transport_param *tp, tables, optimizers_on_pushed_rows, .timeout = 120)
{
	static const int opts[] = { RDPS_OPT_SGD, RDPS_OPT_ADAGRAD, RDPS_OPT_ADAGRAD_ROW,
				    RDPS_OPT_ADAM };
	enum { ROWS = 97, DIM = 9, N = 40, STEPS = 5 };
	struct job j;
	struct rdps_client *c;

	job_start(&j, tp->name);
	c = client(&j, 0, 1);
	for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++) {
		struct rdps_table_spec spec = { .num_rows = ROWS, .elems = DIM,
						.dtype = RDPS_DTYPE_F32, .init_range = 0.3f,
						.seed = 11 };
		struct rdps_optimizer_spec os = { .optimizer = opts[o], .lr = 0.05f };
		struct rdps_table_info info;
		double w[ROWS][DIM], st[ROWS][2 * DIM] = { { 0 } };
		int t[ROWS] = { 0 };
		float rows[ROWS * DIM], g[N * DIM];
		uint64_t all[ROWS], ids[N];
		char name[32];

		snprintf(name, sizeof(name), "opt_%s", rdps_optimizer_name(opts[o]));
		spec.name = name;
		cr_assert_eq(rdps_client_table_create(c, &spec, &info), 0, "%s", rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_table_set_optimizer(c, info.id, &os), 0, "%s",
			     rdps_client_errmsg(c));
		/* The same settings again (every trainer asks): state kept. */
		for (uint64_t r = 0; r < ROWS; r++)
			all[r] = r;
		cr_assert_eq(rdps_client_pull(c, info.id, all, ROWS, rows), 0);
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < DIM; k++)
				w[r][k] = rows[r * DIM + k];
		for (int step = 0; step < STEPS; step++) {
			double sum[ROWS][DIM] = { { 0 } };
			bool touched[ROWS] = { 0 };

			cr_assert_eq(rdps_client_table_set_optimizer(c, info.id, &os), 0);
			for (int i = 0; i < N; i++) {
				/* rows 0..59 only, some twice; 60..96 never */
				ids[i] = (uint64_t)((i * 7 + step * 13) % 60);
				touched[ids[i]] = true;
				for (int k = 0; k < DIM; k++) {
					g[i * DIM + k] = (float)((i + 1) * (k - 4) + step) / 32.0f;
					sum[ids[i]][k] += g[i * DIM + k];
				}
			}
			cr_assert_eq(rdps_client_push(c, info.id, ids, g, N), 0, "%s",
				     rdps_client_errmsg(c));
			for (int r = 0; r < ROWS; r++)
				if (touched[r])
					ref_step(opts[o], w[r], st[r], &t[r], DIM, 0.05, sum[r]);
		}
		cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_pull(c, info.id, all, ROWS, rows), 0);
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < DIM; k++)
				cr_assert_float_eq(rows[r * DIM + k], w[r][k], 2e-5,
						   "%s: row %d col %d: %g, want %g", name, r, k,
						   rows[r * DIM + k], w[r][k]);
		cr_log_info("%s: %s over %d pushes matches the reference", tp->name, name, STEPS);
	}
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

ParameterizedTest(struct transport_param *tp, tables, errors_and_drop, .timeout = 120)
{
	struct job j;
	struct rdps_client *c;
	struct rdps_table_spec lab = { .name = "labels", .num_rows = 50, .elems = 1,
				       .dtype = RDPS_DTYPE_I64 };
	struct rdps_table_spec feat = { .name = "feat", .num_rows = 50, .elems = 4,
					.dtype = RDPS_DTYPE_F32 };
	struct rdps_optimizer_spec sgd = { .optimizer = RDPS_OPT_SGD, .lr = 1 };
	struct rdps_table_info il, ifeat, again;
	uint64_t id = 3, bad = 50;
	float g[4] = { 1, 1, 1, 1 }, row[4];
	int64_t v = 7;

	job_start(&j, tp->name);
	c = client(&j, 0, 1);
	cr_assert_eq(rdps_client_table_create(c, &lab, &il), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_table_create(c, &feat, &ifeat), 0, "%s", rdps_client_errmsg(c));
	/* Gradients to a table without optimizer: refused (now, or at the
	 * flush, as pushes are asynchronous), saying why (the one-sided
	 * backends' flush counts refused messages; the server logs why). */
	{
		int r = rdps_client_push(c, ifeat.id, &id, g, 1);

		if (!r)
			r = rdps_client_flush(c);
		cr_assert_neq(r, 0, "a push to a table without optimizer was taken");
		cr_assert(strstr(rdps_client_errmsg(c), "has no optimizer") ||
			  strstr(rdps_client_errmsg(c), "refused 1 push"), "%s",
			  rdps_client_errmsg(c));
	}
	cr_assert_eq(rdps_client_table_set_optimizer(c, il.id, &sgd), -EINVAL);
	cr_assert(strstr(rdps_client_errmsg(c), "int64"), "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_set(c, il.id, &bad, &v, 1), -ERANGE);
	cr_assert_eq(rdps_client_get(c, il.id, &bad, 1, &v), -ERANGE);
	cr_assert_eq(rdps_client_table_drop(c, "base"), -EPERM);
	cr_assert(strstr(rdps_client_errmsg(c), "cannot drop"), "%s", rdps_client_errmsg(c));
	/* Dropped: gone on every server; the name takes another shape. */
	cr_assert_eq(rdps_client_table_drop(c, "feat"), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_table(c, "feat", &again), -ENOENT);
	cr_assert_eq(rdps_client_table_drop(c, "feat"), -ENOENT);
	feat.elems = 6;
	cr_assert_eq(rdps_client_table_create(c, &feat, &again), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(again.elems, 6);
	cr_assert_eq(rdps_client_table_set_optimizer(c, again.id, &sgd), 0, "%s",
		     rdps_client_errmsg(c));
	{
		float g6[6] = { -1, -1, -1, -1, -1, -1 }, r6[6];

		cr_assert_eq(rdps_client_push(c, again.id, &id, g6, 1), 0, "%s",
			     rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
		cr_assert_eq(rdps_client_pull(c, again.id, &id, 1, r6), 0);
		for (int k = 0; k < 6; k++)
			cr_assert_eq(r6[k], 1.0f, "a fresh table: zeros, plus one push");
	}
	(void)row;
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */

/* The optimizer state of rows (saving a sparse optimizer): read after
 * pushes on both servers, written back, refused where there is none. */
ParameterizedTest(struct transport_param *tp, tables, optimizer_state_read_and_written,
		  .timeout = 120)
{
	enum { ROWS = 40, D = 3 };
	struct rdps_table_spec spec = { .name = "st", .num_rows = ROWS, .elems = D,
					.dtype = RDPS_DTYPE_F32 };
	struct rdps_optimizer_spec ada = { .optimizer = RDPS_OPT_ADAGRAD, .lr = 0.1f };
	uint64_t ids[4] = { 33, 2, 21, 2 }, all[ROWS];
	float g[4 * D], st[ROWS * D], back[ROWS * D];
	struct rdps_table_info info;
	struct rdps_client *c;
	uint32_t per_row;
	struct job j;

	job_start(&j, tp->name);
	c = client(&j, 0, 1);
	cr_assert_eq(rdps_client_table_create(c, &spec, &info), 0, "%s", rdps_client_errmsg(c));
	/* No optimizer, no state. */
	cr_assert_eq(rdps_client_state_get(c, info.id, ids, 1, st), -EINVAL);
	cr_assert(strstr(rdps_client_errmsg(c), "no optimizer state"), "%s",
		  rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_table_set_optimizer(c, info.id, &ada), 0, "%s",
		     rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_state_floats(c, info.id, &per_row), 0);
	cr_assert_eq(per_row, D);
	for (int k = 0; k < 4 * D; k++)
		g[k] = (float)(k + 1) / 4.0f;
	cr_assert_eq(rdps_client_push(c, info.id, ids, g, 4), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	for (int r = 0; r < ROWS; r++)
		all[r] = (uint64_t)(ROWS - 1 - r); /* unsorted, over both servers */
	cr_assert_eq(rdps_client_state_get(c, info.id, all, ROWS, st), 0, "%s",
		     rdps_client_errmsg(c));
	/* Adagrad's sum of squares: row 2 got two gradients, summed first. */
	for (int r = 0; r < ROWS; r++) {
		uint64_t id = all[r];

		for (int k = 0; k < D; k++) {
			double want = 0, gsum = 0;

			for (int i = 0; i < 4; i++)
				if (ids[i] == id)
					gsum += g[i * D + k];
			want = gsum * gsum;
			cr_assert_float_eq(st[r * D + k], want, 1e-4, "row %llu[%d]: %g, want %g",
					   (unsigned long long)id, k, st[r * D + k], want);
		}
	}
	/* Written back as a load does, and read again. */
	for (int k = 0; k < ROWS * D; k++)
		st[k] = (float)k;
	cr_assert_eq(rdps_client_state_set(c, info.id, all, ROWS, st), 0, "%s",
		     rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_state_get(c, info.id, all, ROWS, back), 0, "%s",
		     rdps_client_errmsg(c));
	cr_assert_eq(memcmp(st, back, sizeof(st)), 0, "the state written is not read back");
	rdps_client_destroy(c);
	job_stop(&j);
}
