// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * End-to-end: 2 servers + 3 clients. Every client pushes known gradients
 * (SGD, lr 1, zero-initialised tables) with duplicated ids and unsorted
 * batches; after flush + barrier every row must equal minus the sum of all
 * gradients ever pushed for it, exactly (gradients are multiples of 1/4, so
 * float sums are exact in any order). One suite, parametrised over
 * transports: RDPS_TEST_TRANSPORTS (default "tcp,inproc", and ofi where
 * libfabric has its tcp;ofi_rxm provider: ofi_env.h); tcp, verbs and ofi
 * run servers and clients as separate processes, inproc as threads of one
 * process.
 * RDPS_TEST_HOST sets the servers' address (default 127.0.0.1). With
 * RDPS_TEST_REMOTE_PORT the servers already run elsewhere (another host) at
 * that base port, started with the arguments of server_args(); only the
 * clients run here, and client 0 shuts the servers down.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/server.h"
#include "ofi_env.h"
#include "rdps_test.h"

#define NUM_SERVERS 2
#define NUM_CLIENTS 3
#define ENT_ROWS 997  /* prime: uneven split */
#define ENT_DIM 13    /* odd: pushes need wire padding */
#define REL_ROWS 13
#define REL_DIM 8
#define ROUNDS 20
#define ENT_BATCH 64
#define REL_BATCH 5

struct cluster {
	char *dir, *ipc;
	const char *transport;
};

static uint64_t ent_id(uint32_t k, int r, int i)
{
	/* Every 8th id repeats its predecessor: duplicates within a push. */
	if (i % 8 == 7)
		i--;
	return ((uint64_t)k * 7919 + (uint64_t)r * 131 + (uint64_t)i * 37) % ENT_ROWS;
}

static float ent_grad(uint32_t k, int r, int i, int j)
{
	return (float)((int)(k + 1) * (i % 5 + 1) + j % 3 - r % 4) * 0.25f;
}

static uint64_t rel_id(uint32_t k, int r, int i)
{
	return (k + (uint64_t)r + (uint64_t)i * 3) % REL_ROWS;
}

static float rel_grad(uint32_t k, int r, int i, int j)
{
	return (float)((int)k - i + j - r % 3) * 0.5f;
}

/* What every row must hold at the end. */
static void expected(float *ent, float *rel)
{
	memset(ent, 0, sizeof(float) * ENT_ROWS * ENT_DIM);
	memset(rel, 0, sizeof(float) * REL_ROWS * REL_DIM);
	for (uint32_t k = 0; k < NUM_CLIENTS; k++)
		for (int r = 0; r < ROUNDS; r++) {
			for (int i = 0; i < ENT_BATCH; i++)
				for (int j = 0; j < ENT_DIM; j++)
					ent[ent_id(k, r, i) * ENT_DIM + j] -= ent_grad(k, r, i, j);
			for (int i = 0; i < REL_BATCH; i++)
				for (int j = 0; j < REL_DIM; j++)
					rel[rel_id(k, r, i) * REL_DIM + j] -= rel_grad(k, r, i, j);
		}
}

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			snprintf(why, whylen, __VA_ARGS__);                   \
			goto out;                                             \
		}                                                             \
	} while (0)

/* One client of the job; returns 0 or -1 with a reason in why. */
static int client_body(const struct cluster *cl, uint32_t k, char *why, size_t whylen)
{
	struct rdps_client_params p = { .ip_config = cl->ipc, .transport = cl->transport,
					.client_id = k, .num_clients = NUM_CLIENTS,
					.timeout_ms = 30000, .barrier_timeout_ms = 60000 };
	/* Per call, not static: the inproc variant runs clients as threads. */
	float *ent = calloc(ENT_ROWS * ENT_DIM, sizeof(float));
	float *rel = calloc(REL_ROWS * REL_DIM, sizeof(float));
	float *got = calloc(ENT_ROWS * 2 * ENT_DIM, sizeof(float));
	float *sorted_rows = calloc(ENT_ROWS * ENT_DIM, sizeof(float));
	uint64_t *ids = calloc(ENT_ROWS * 2, sizeof(uint64_t));
	struct rdps_table_info te, tr;
	struct rdps_client *c = NULL;
	float g[ENT_BATCH * ENT_DIM];
	uint64_t bid[ENT_BATCH];
	char err[640];
	int ret = -1;

	why[0] = '\0';
	CHECK(ent && rel && got && sorted_rows && ids, "out of memory");
	CHECK(!rdps_client_create(&p, &c, err, sizeof(err)), "client %u: %s", k, err);
	CHECK(!rdps_client_table(c, "entity", &te) && te.dim == ENT_DIM &&
		      te.num_rows == ENT_ROWS, "client %u: bad entity table", k);
	CHECK(!rdps_client_table(c, "relation", &tr) && tr.dim == REL_DIM,
	      "client %u: bad relation table", k);
	CHECK(rdps_client_table(c, "nope", &tr) == -ENOENT, "unknown table found");
	CHECK(!rdps_client_barrier(c), "client %u: first barrier: %s", k, rdps_client_errmsg(c));
	{
		/* Allreduce: every client gets the sum over all clients. */
		double v[3] = { k + 1.0, 0.5 * k, -1.0 };

		CHECK(!rdps_client_allreduce(c, v, 3), "client %u allreduce: %s", k,
		      rdps_client_errmsg(c));
		CHECK(v[0] == 6.0 && v[1] == 1.5 && v[2] == -3.0,
		      "client %u: allreduce gave %g %g %g", k, v[0], v[1], v[2]);
	}
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < ENT_BATCH; i++) {
			bid[i] = ent_id(k, r, i);
			for (int j = 0; j < ENT_DIM; j++)
				g[i * ENT_DIM + j] = ent_grad(k, r, i, j);
		}
		CHECK(!rdps_client_push(c, te.id, bid, g, ENT_BATCH), "client %u push: %s", k,
		      rdps_client_errmsg(c));
		for (int i = 0; i < REL_BATCH; i++) {
			bid[i] = rel_id(k, r, i);
			for (int j = 0; j < REL_DIM; j++)
				g[i * REL_DIM + j] = rel_grad(k, r, i, j);
		}
		CHECK(!rdps_client_push(c, tr.id, bid, g, REL_BATCH), "client %u push: %s", k,
		      rdps_client_errmsg(c));
		/* A pull while others push: rows may be from any moment (and
		 * two copies of an id from two moments, on one-sided
		 * transports), but each value is a sum of whole gradients:
		 * a multiple of 1/4, never a torn or garbage float. */
		for (int i = 0; i < 16; i++)
			bid[i] = (uint64_t)(ENT_ROWS - 1 - (i * 61 + r) % ENT_ROWS);
		bid[15] = bid[3];
		CHECK(!rdps_client_pull(c, te.id, bid, 16, g), "client %u pull: %s", k,
		      rdps_client_errmsg(c));
		for (int i = 0; i < 16 * ENT_DIM; i++)
			CHECK(g[i] * 4.0f == (float)(int)(g[i] * 4.0f) && g[i] <= 0.0f + 1e6f,
			      "client %u: pulled value %g is not a sum of pushed gradients", k, g[i]);
	}
	CHECK(!rdps_client_barrier(c), "client %u: barrier: %s", k, rdps_client_errmsg(c));

	/* Everything is applied now: compare whole tables, pulled unsorted
	 * with duplicates and pulled in order. */
	expected(ent, rel);
	for (uint64_t i = 0; i < ENT_ROWS; i++) {
		ids[2 * i] = (i * 389 + k) % ENT_ROWS;
		ids[2 * i + 1] = (i * 17) % ENT_ROWS;
	}
	CHECK(!rdps_client_pull(c, te.id, ids, 2 * ENT_ROWS, got), "client %u pull all: %s", k,
	      rdps_client_errmsg(c));
	for (uint64_t i = 0; i < 2 * ENT_ROWS; i++)
		for (int j = 0; j < ENT_DIM; j++)
			CHECK(got[i * ENT_DIM + j] == ent[ids[i] * ENT_DIM + j],
			      "client %u: entity %llu[%d] = %g, expected %g", k,
			      (unsigned long long)ids[i], j, got[i * ENT_DIM + j],
			      ent[ids[i] * ENT_DIM + j]);
	for (uint64_t i = 0; i < ENT_ROWS; i++)
		ids[i] = i;
	CHECK(!rdps_client_pull(c, te.id, ids, ENT_ROWS, sorted_rows), "pull sorted: %s",
	      rdps_client_errmsg(c));
	CHECK(!memcmp(sorted_rows, ent, ENT_ROWS * ENT_DIM * sizeof(float)),
	      "client %u: sorted pull differs", k);
	for (uint64_t i = 0; i < REL_ROWS; i++)
		ids[i] = REL_ROWS - 1 - i;
	CHECK(!rdps_client_pull(c, tr.id, ids, REL_ROWS, got), "pull relations: %s",
	      rdps_client_errmsg(c));
	for (uint64_t i = 0; i < REL_ROWS; i++)
		CHECK(!memcmp(got + i * REL_DIM, rel + ids[i] * REL_DIM, REL_DIM * sizeof(float)),
		      "client %u: relation %llu differs", k, (unsigned long long)ids[i]);
	ids[0] = ENT_ROWS;
	CHECK(rdps_client_pull(c, te.id, ids, 1, got) == -ERANGE, "id past the table accepted");
	CHECK(strstr(rdps_client_errmsg(c), "out of range"), "errmsg: %s", rdps_client_errmsg(c));

	if (k == 0) {
		uint64_t pushed = 0;

		for (uint32_t s = 0; s < NUM_SERVERS; s++) {
			struct rdps_server_stats st;

			CHECK(!rdps_client_server_stats(c, s, &st), "stats: %s", rdps_client_errmsg(c));
			pushed += st.rows_pushed;
		}
		CHECK(pushed == (uint64_t)NUM_CLIENTS * ROUNDS * (ENT_BATCH + REL_BATCH),
		      "servers applied %llu rows, clients pushed %d", (unsigned long long)pushed,
		      NUM_CLIENTS * ROUNDS * (ENT_BATCH + REL_BATCH));
	}
	/* Nobody shuts the servers down while others still read. */
	CHECK(!rdps_client_barrier(c), "client %u: last barrier: %s", k, rdps_client_errmsg(c));
	if (k == 0)
		CHECK(!rdps_client_shutdown_servers(c), "shutdown: %s", rdps_client_errmsg(c));
	ret = 0;
out:
	rdps_client_destroy(c);
	free(ent);
	free(rel);
	free(got);
	free(sorted_rows);
	free(ids);
	return ret;
}

static void setup_cluster(struct cluster *cl, const char *transport)
{
	const char *host = getenv("RDPS_TEST_HOST"); /* rdma_cm needs a device address */
	const char *remote = getenv("RDPS_TEST_REMOTE_PORT");
	char text[128];
	int base = remote && *remote ? atoi(remote) : rdps_test_free_ports(NUM_SERVERS);

	cr_assert_gt(base, 0);
	cl->transport = transport;
	cl->dir = rdps_test_tmpdir("cluster");
	cr_assert(cl->dir);
	snprintf(text, sizeof(text), "# test job\n%s %d %d\n", host && *host ? host : "127.0.0.1",
		 base, NUM_SERVERS);
	cl->ipc = rdps_test_write(cl->dir, "ip_config.txt", text);
}

/* Servers and clients as processes, over a network transport. */
static void run_processes(struct cluster *cl)
{
	pid_t servers[NUM_SERVERS], clients[NUM_CLIENTS];
	char logs[NUM_SERVERS][512];

	const char *remote = getenv("RDPS_TEST_REMOTE_PORT");

	/* Clients first: they must wait for servers that are still starting. */
	for (uint32_t k = 0; k < NUM_CLIENTS; k++) {
		clients[k] = fork();
		cr_assert_geq(clients[k], 0);
		if (clients[k] == 0) {
			char why[1024];
			int ret = client_body(cl, k, why, sizeof(why));

			if (ret)
				fprintf(stderr, "%s\n", why);
			_exit(ret ? 1 : 0);
		}
	}
	for (int s = 0; s < NUM_SERVERS && !(remote && *remote); s++) {
		char sid[16];
		char ent[64], rel[64];
		char *argv[] = { RDPS_BIN, "server", "--ip_config", cl->ipc, "--server_id", sid,
				 "--transport", (char *)cl->transport, "--table", ent, "--table", rel,
				 "--optimizer", "sgd", "--lr", "1", "--init", "zeros", NULL };

		snprintf(sid, sizeof(sid), "%d", s);
		snprintf(ent, sizeof(ent), "entity:%d:%d", ENT_ROWS, ENT_DIM);
		snprintf(rel, sizeof(rel), "relation:%d:%d", REL_ROWS, REL_DIM);
		snprintf(logs[s], sizeof(logs[s]), "%s/server%d.log", cl->dir, s);
		servers[s] = rdps_test_spawn(argv, logs[s]);
		cr_assert_gt(servers[s], 0);
	}
	for (uint32_t k = 0; k < NUM_CLIENTS; k++) {
		int st;

		cr_assert_eq(rdps_test_wait(clients[k], 90000, &st), 0, "client %u hung", k);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %u failed", k);
	}
	for (int s = 0; s < NUM_SERVERS && !(remote && *remote); s++) {
		int st;
		char *log;

		cr_assert_eq(rdps_test_wait(servers[s], 10000, &st), 0,
			     "server %d did not exit after the shutdown request", s);
		log = rdps_test_slurp(logs[s]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server %d failed:\n%s", s, log);
		cr_assert(strstr(log, "solved message count"), "server %d log:\n%s", s, log);
		cr_assert(strstr(log, "shutdown 1"), "server %d log:\n%s", s, log);
		free(log);
	}
}

struct thread_arg {
	const struct cluster *cl;
	uint32_t k;
	int ret;
	char why[1024];
	struct rdps_server *srv;
};

static void *client_thread(void *a)
{
	struct thread_arg *t = a;

	t->ret = client_body(t->cl, t->k, t->why, sizeof(t->why));
	return NULL;
}

static void *server_thread(void *a)
{
	struct thread_arg *t = a;

	t->ret = rdps_server_run(t->srv);
	return NULL;
}

/* Servers and clients as threads of this process (in-process transport). */
static void run_threads(struct cluster *cl)
{
	struct thread_arg sa[NUM_SERVERS] = { 0 }, ca[NUM_CLIENTS] = { 0 };
	pthread_t st[NUM_SERVERS], ct[NUM_CLIENTS];
	struct rdps_ipconfig ipc;
	char err[512];

	cr_assert_eq(rdps_ipconfig_load(cl->ipc, &ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t k = 0; k < NUM_CLIENTS; k++) {
		ca[k] = (struct thread_arg){ .cl = cl, .k = k };
		cr_assert_eq(pthread_create(&ct[k], NULL, client_thread, &ca[k]), 0);
	}
	for (uint32_t s = 0; s < NUM_SERVERS; s++) {
		struct rdps_server_config cfg = { .transport = cl->transport, .ipc = &ipc,
						  .server_id = s, .num_tables = 2,
						  .allow_unauthenticated = rdps_test_remote_host() };

		cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity",
			.num_rows = ENT_ROWS, .dim = ENT_DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cfg.tables[1] = (struct rdps_server_table_config){ .name = "relation",
			.num_rows = REL_ROWS, .dim = REL_DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cr_assert_eq(rdps_server_create(&cfg, &sa[s].srv, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&st[s], NULL, server_thread, &sa[s]), 0);
	}
	for (uint32_t k = 0; k < NUM_CLIENTS; k++) {
		pthread_join(ct[k], NULL);
		cr_assert_eq(ca[k].ret, 0, "%s", ca[k].why);
	}
	for (uint32_t s = 0; s < NUM_SERVERS; s++) {
		pthread_join(st[s], NULL);
		cr_assert_eq(sa[s].ret, 0);
		cr_assert(rdps_server_done(sa[s].srv));
		rdps_server_destroy(sa[s].srv);
	}
	rdps_ipconfig_free(&ipc);
}

/* Transports under test, from RDPS_TEST_TRANSPORTS. Criterion runs each
 * test in a child process: parameters live in its shared memory. */
struct transport_param {
	char name[16];
};

static void free_params(struct criterion_test_params *crp)
{
	cr_free(crp->params);
}

ParameterizedTestParameters(cluster, exact_sums)
{
	const char *env = getenv("RDPS_TEST_TRANSPORTS");
	char buf[128], *save = NULL, *tok;
	struct transport_param *params = cr_malloc(8 * sizeof(*params));
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s",
		 env && *env ? env : rdps_test_ofi_available() ? "tcp,inproc,ofi" : "tcp,inproc");
	for (tok = strtok_r(buf, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save))
		snprintf(params[n++].name, sizeof(params[0].name), "%s", tok);
	return cr_make_param_array(struct transport_param, params, n, free_params);
}

ParameterizedTest(struct transport_param *tp, cluster, exact_sums, .timeout = 180)
{
	struct cluster cl;

	cr_log_info("transport %s", tp->name);
	if (!strcmp(tp->name, "ofi") && !rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	setup_cluster(&cl, tp->name);
	if (!strcmp(tp->name, "inproc"))
		run_threads(&cl);
	else
		run_processes(&cl);
	rdps_test_rmtree(cl.dir);
	free(cl.ipc);
	free(cl.dir);
}

/*
 * Wide rows over TCP: pulls of megabytes (9000 ids of 4 KiB rows: the client
 * splits them into several requests per server, all posted before the
 * first wait) must give exactly what row-by-row pulls give, in the caller's
 * order, duplicates included.
 */
#define WIDE_ROWS 611
#define WIDE_DIM 1031 /* odd: 4124-byte rows */

Test(cluster, wide_pulls_match_row_by_row, .timeout = 120)
{
	char *dir = rdps_test_tmpdir("wide"), text[128], sid[2][8], table[64], logs[2][512];
	int base = rdps_test_free_ports(2), st;
	struct rdps_client_params p = { .transport = "tcp", .num_clients = 1, .quiet = true,
					.timeout_ms = 20000 };
	struct rdps_client *c;
	struct rdps_table_info ti;
	const size_t sizes[] = { 1500, 9000 }; /* 9000: two requests per server */
	float *truth = malloc(sizeof(float) * WIDE_ROWS * WIDE_DIM);
	float *got = malloc(sizeof(float) * 9000 * WIDE_DIM);
	uint64_t *ids = malloc(sizeof(uint64_t) * 9000);
	pid_t srv[2];
	char err[512];

	cr_assert(dir && base > 0 && truth && got && ids);
	snprintf(text, sizeof(text), "127.0.0.1 %d 2\n", base);
	p.ip_config = rdps_test_write(dir, "ip_config.txt", text);
	snprintf(table, sizeof(table), "wide:%d:%d", WIDE_ROWS, WIDE_DIM);
	for (int s = 0; s < 2; s++) {
		char *argv[] = { RDPS_BIN, "server", "--ip_config", (char *)p.ip_config,
				 "--server_id", sid[s], "--transport", "tcp", "--table", table,
				 "--init", "uniform", "--seed", "7", NULL };

		snprintf(sid[s], sizeof(sid[s]), "%d", s);
		snprintf(logs[s], sizeof(logs[s]), "%s/server%d.log", dir, s);
		srv[s] = rdps_test_spawn(argv, logs[s]);
		cr_assert_gt(srv[s], 0);
	}
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_client_table(c, "wide", &ti), 0);
	for (uint64_t id = 0; id < WIDE_ROWS; id++)
		cr_assert_eq(rdps_client_pull(c, ti.id, &id, 1, truth + id * WIDE_DIM), 0, "%s",
			     rdps_client_errmsg(c));
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		for (size_t i = 0; i < n; i++) /* both servers, interleaved, repeats */
			ids[i] = (i * 389 + k * 17) % WIDE_ROWS;
		memset(got, 0xff, n * WIDE_DIM * sizeof(float));
		cr_assert_eq(rdps_client_pull(c, ti.id, ids, n, got), 0, "%s", rdps_client_errmsg(c));
		for (size_t i = 0; i < n; i++)
			cr_assert(!memcmp(got + i * WIDE_DIM, truth + ids[i] * WIDE_DIM,
					  WIDE_DIM * sizeof(float)),
				  "pull of %zu rows: row %zu (id %llu) differs", n, i,
				  (unsigned long long)ids[i]);
	}
	cr_assert_eq(rdps_client_shutdown_servers(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	for (int s = 0; s < 2; s++) {
		cr_assert_eq(rdps_test_wait(srv[s], 10000, &st), 0, "server %d did not exit", s);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server %d failed", s);
	}
	free(truth);
	free(got);
	free(ids);
	rdps_test_rmtree(dir);
	free(dir);
}
