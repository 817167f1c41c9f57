// SPDX-License-Identifier: MIT
/*
 * What the ofi backend asks of libfabric, seen through the shim
 * (ofi_shim.c, LD_PRELOAD; ctest transport/ofi_shim), over libfabric's
 * tcp;ofi_rxm on loopback: servers of the public API in threads of this
 * process, clients of the public API (rdps_client), so the suite builds
 * against any rdps and what it asserts is the library's behaviour:
 *
 * - a client opens ONE endpoint (fabric, domain, address vector) for all
 *   its servers, each server in its vector; two clients (threads pulling
 *   on their own) two;
 * - the endpoint's queues are sized for what rdps keeps in flight, not the
 *   provider's defaults;
 * - the API asked for is the newest the library offers: on an efa (the
 *   shim's model) of the first generation, device RDMA is asked for from
 *   API 1.18, READs are not emulated, pulls are one-sided (the servers'
 *   CPUs serve none); below 1.18 READs are emulated, and pulls are
 *   two-sided, the server's stats say why, sums exact either way;
 * - a provider that says its READs are emulated gets two-sided pulls;
 * - efa's environment: shm off, and fork safety where the kernel needs it
 *   (FI_EFA_FORK_SAFE, and libibverbs' ibv_fork_init once);
 * - pulls against an idle server take no 1 ms naps (counted: the shim
 *   counts a server's poll() of one descriptor for 1 ms), with the
 *   control that they need the server's progress (a stopped server
 *   serves none);
 * - a send the provider refuses for good (its queue stays full) fails after
 *   the client's timeout, saying what it waited for, and the wait sleeps
 *   rather than spins.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/server.h"
#include "rdps_test.h"
#include "ofi_shim.h"

/* libfabric's version macros (rdma/fabric.h), without its headers. */
#define FI_VERSION(major, minor) (((major) << 16) | (minor))
#define FI_MAJOR(version) ((version) >> 16)
#define FI_MINOR(version) ((version) & 0xFFFF)

#define ROWS 1000
#define DIM 16
#define SERVERS 3

static struct rdps_ofi_shim_counts *shim(void)
{
	rdps_ofi_shim_counts_fn *fn = (rdps_ofi_shim_counts_fn *)dlsym(RTLD_DEFAULT,
								      "rdps_ofi_shim_counts");

	cr_assert(fn, "run under the shim: LD_PRELOAD=librdps_ofi_shim.so (ctest transport/ofi_shim)");
	return fn();
}

static void shim_reset(void)
{
	rdps_ofi_shim_reset_fn *fn = (rdps_ofi_shim_reset_fn *)dlsym(RTLD_DEFAULT,
								     "rdps_ofi_shim_reset");

	cr_assert(fn);
	fn();
}

struct job {
	struct rdps_ipconfig ipc;
	uint32_t nservers;
	struct rdps_server *srv[SERVERS];
	pthread_t thr[SERVERS];
};

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

/* libfabric's tcp;ofi_rxm on loopback, or skip. */
static void need_provider(void)
{
	setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
	setenv("RDPS_OFI_PROVIDER", "tcp;ofi_rxm", 1);
	(void)shim();
}

static void job_start(struct job *j, uint32_t nservers)
{
	char text[256] = "", err[640];
	int port = rdps_test_free_ports((int)nservers);

	memset(j, 0, sizeof(*j));
	j->nservers = nservers;
	for (uint32_t s = 0; s < nservers; s++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "127.0.0.1 %d\n",
			 port + (int)s);
	cr_assert_eq(rdps_ipconfig_parse("t", text, &j->ipc, err, sizeof(err)), 0, "%s", err);
	for (uint32_t s = 0; s < nservers; s++) {
		struct rdps_server_config cfg = { .transport = "ofi", .ipc = &j->ipc,
						  .server_id = s, .num_tables = 1 };

		/* SGD with lr 1: a push of g subtracts g. */
		cfg.tables[0] = (struct rdps_server_table_config){
			.name = "entity", .num_rows = ROWS, .dim = DIM, .init = RDPS_INIT_ZEROS,
			.optimizer = RDPS_OPT_SGD, .lr = 1.0f };
		cr_assert_eq(rdps_server_create(&cfg, &j->srv[s], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(pthread_create(&j->thr[s], NULL, serve, j->srv[s]), 0);
	}
}

static void job_stop(struct job *j)
{
	for (uint32_t s = 0; s < j->nservers; s++) {
		rdps_server_stop(j->srv[s]);
		pthread_join(j->thr[s], NULL);
		rdps_server_destroy(j->srv[s]);
	}
	rdps_ipconfig_free(&j->ipc);
}

static struct rdps_client *client_t(struct job *j, uint32_t id, uint32_t n, int timeout_ms)
{
	struct rdps_client_params cp = { .transport = "ofi", .servers = &j->ipc, .client_id = id,
					 .num_clients = n, .timeout_ms = timeout_ms, .quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&cp, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static struct rdps_client *client(struct job *j, uint32_t id, uint32_t n)
{
	return client_t(j, id, n, 30000);
}

/* Pushes -(id % 7 + 1) to every row once, flushes, pulls them all (runs
 * and scattered), compares: exact sums over every server. */
static void round_trip(struct rdps_client *c)
{
	static uint64_t ids[ROWS];
	static float g[ROWS * DIM], out[ROWS * DIM];

	for (uint64_t i = 0; i < ROWS; i++) {
		ids[i] = (i * 389) % ROWS;
		for (int d = 0; d < DIM; d++)
			g[i * DIM + d] = -(float)(ids[i] % 7 + 1);
	}
	cr_assert_eq(rdps_client_push(c, 0, ids, g, ROWS), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, ROWS, out), 0, "%s", rdps_client_errmsg(c));
	for (uint64_t i = 0; i < ROWS; i++)
		for (int d = 0; d < DIM; d++)
			cr_assert_eq(out[i * DIM + d], (float)(ids[i] % 7 + 1), "row %llu[%d] = %g",
				     (unsigned long long)ids[i], d, out[i * DIM + d]);
}

/* Rows the servers' CPUs sent (two-sided pulls). */
static uint64_t rows_served(struct job *j)
{
	uint64_t rows = 0;

	for (uint32_t s = 0; s < j->nservers; s++) {
		struct rdps_server_stats st;

		rdps_server_get_stats(j->srv[s], &st);
		rows += st.rows_pulled;
	}
	return rows;
}

/* The first server's stats: why its pulls are two-sided (0: one-sided). */
static uint64_t stats_why(struct job *j)
{
	struct rdps_server_stats st;

	rdps_server_get_stats(j->srv[0], &st);
	return st.pulls_two_sided;
}

TestSuite(ofi_shim, .timeout = 120);

Test(ofi_shim, a_client_opens_one_endpoint_for_all_its_servers)
{
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c, *c2;
	struct job j;

	need_provider();
	job_start(&j, SERVERS);
	shim_reset(); /* the servers' endpoints are made: count the client's */
	c = client(&j, 0, 2);
	k = shim();
	cr_log_info("client of %d servers: %llu fabric(s), %llu domain(s), %llu endpoint(s), "
		    "%llu address vector(s), %llu address(es) inserted", SERVERS,
		    (unsigned long long)k->fabrics, (unsigned long long)k->domains,
		    (unsigned long long)k->endpoints, (unsigned long long)k->avs,
		    (unsigned long long)k->av_inserts);
	cr_assert_eq(k->endpoints, 1, "%llu endpoints for %d servers",
		     (unsigned long long)k->endpoints, SERVERS);
	cr_assert_eq(k->domains, 1);
	cr_assert_eq(k->avs, 1);
	cr_assert_eq(k->av_inserts_newest, SERVERS, "every server in the one address vector");
	round_trip(c);
	cr_assert_eq(rows_served(&j), 0, "one-sided pulls were served by a server's CPU");
	/* A second client (another thread's): an endpoint of its own. */
	c2 = client(&j, 1, 2);
	cr_assert_eq(k->endpoints, 2);
	rdps_client_destroy(c2);
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(ofi_shim, the_endpoint_queues_are_sized_for_what_is_in_flight)
{
	struct fi_info_sizes { uint64_t tx, rx; } def;
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c;
	struct job j;

	need_provider();
	job_start(&j, 1);
	k = shim();
	/* The server's endpoint was made last: its receive queue is its pool. */
	def.tx = k->ep_tx_size;
	def.rx = k->ep_rx_size;
	cr_log_info("server endpoint: tx %llu rx %llu", (unsigned long long)def.tx,
		    (unsigned long long)def.rx);
	shim_reset();
	c = client(&j, 0, 1);
	cr_log_info("client endpoint (1 server): tx %llu rx %llu",
		    (unsigned long long)k->ep_tx_size, (unsigned long long)k->ep_rx_size);
	/* Not the provider's defaults (rxm's are 64k-1 for both, tcp;ofi_rxm
	 * in libfabric 1.17): a client of one server keeps a READ ring and
	 * push buffers out, and a few dozen receives. */
	cr_assert_gt(k->ep_tx_size, 0);
	cr_assert_leq(k->ep_tx_size, 4096, "tx queue of %llu entries: the provider's default?",
		      (unsigned long long)k->ep_tx_size);
	cr_assert_leq(k->ep_rx_size, 1024, "rx queue of %llu entries: the provider's default?",
		      (unsigned long long)k->ep_rx_size);
	cr_assert_neq(k->ep_rx_size, def.rx, "client and server queues alike: nothing sized");
	round_trip(c);
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(ofi_shim, efa_api_1_18_gets_device_rdma_and_one_sided_pulls_on_p4d)
{
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c;
	struct job j;

	need_provider();
	setenv("RDPS_OFI_SHIM_AS_EFA", "1", 1);
	setenv("RDPS_OFI_SHIM_OLD_EFA", "1", 1); /* p4d: part 0xefa0 */
	setenv("RDPS_OFI_SHIM_VERSION", "1.22", 1); /* a library newer than 1.17 */
	setenv("RDPS_OFI_PROVIDER", "efa", 1);
	job_start(&j, 1);
	c = client(&j, 0, 1);
	k = shim();
	cr_log_info("API asked %u.%u; device RDMA asked %llu, refused %llu; emulated READ asked "
		    "%llu, yes %llu", FI_MAJOR(k->api_max), FI_MINOR(k->api_max),
		    (unsigned long long)k->device_rdma_asks,
		    (unsigned long long)k->device_rdma_refused,
		    (unsigned long long)k->emulated_read_asks,
		    (unsigned long long)k->emulated_read_yes);
	cr_assert_eq(k->api_max, FI_VERSION(1, 22), "asked API %u.%u, not the library's newest",
		     FI_MAJOR(k->api_max), FI_MINOR(k->api_max));
	cr_assert_geq(k->device_rdma_asks, 2, "FI_OPT_EFA_USE_DEVICE_RDMA not asked for");
	cr_assert_eq(k->device_rdma_refused, 0);
	cr_assert_geq(k->emulated_read_asks, 2, "FI_OPT_EFA_EMULATED_READ never read back");
	cr_assert_eq(k->emulated_read_yes, 0);
	round_trip(c);
	cr_assert_eq(rows_served(&j), 0, "one-sided pulls were served by the server's CPU");
	cr_assert_eq(stats_why(&j), 0, "the server's stats say its pulls are two-sided");
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(ofi_shim, efa_below_api_1_18_emulates_reads_on_p4d_so_pulls_are_two_sided)
{
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c;
	struct job j;

	need_provider();
	setenv("RDPS_OFI_SHIM_AS_EFA", "1", 1);
	setenv("RDPS_OFI_SHIM_OLD_EFA", "1", 1);
	setenv("RDPS_OFI_PROVIDER", "efa", 1);
	/* The library here is 1.17: efa keeps device RDMA off on p4d. */
	job_start(&j, 1);
	c = client(&j, 0, 1);
	k = shim();
	cr_assert_lt(k->api_max, FI_VERSION(1, 18));
	cr_assert_geq(k->emulated_read_yes, 1, "efa said its READs are emulated: never asked");
	round_trip(c);
	cr_assert_eq(rows_served(&j), ROWS, "%llu rows served by the server's CPU: "
		     "emulated READs went on (two-sided pulls serve all %d)",
		     (unsigned long long)rows_served(&j), ROWS);
	cr_assert_eq(stats_why(&j), RDPS_TWO_SIDED_EMULATED, "stats say %llu",
		     (unsigned long long)stats_why(&j));
	cr_log_info("stats: pulls two-sided: %s", rdps_two_sided_why_str(stats_why(&j)));
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(ofi_shim, a_provider_that_emulates_reads_gets_two_sided_pulls)
{
	struct rdps_client *c;
	struct job j;

	need_provider();
	setenv("RDPS_OFI_SHIM_EMULATED_READ", "1", 1); /* tcp;ofi_rxm's are, in fact */
	job_start(&j, SERVERS);
	c = client(&j, 0, 1);
	cr_assert_geq(shim()->emulated_read_yes, 1);
	round_trip(c);
	cr_assert_eq(rows_served(&j), ROWS);
	cr_assert_eq(stats_why(&j), RDPS_TWO_SIDED_EMULATED);
	rdps_client_destroy(c);
	job_stop(&j);
}

Test(ofi_shim, efa_environment_shm_off_and_fork_safe_where_needed)
{
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c;
	struct job j;

	need_provider();
	setenv("RDPS_OFI_SHIM_FORK", "disabled", 1); /* a kernel before 5.13 */
	unsetenv("FI_EFA_ENABLE_SHM_TRANSFER");
	unsetenv("FI_EFA_FORK_SAFE");
	job_start(&j, 1);
	c = client(&j, 0, 1);
	k = shim();
	cr_log_info("at the first fi_domain: FI_EFA_ENABLE_SHM_TRANSFER=%s FI_EFA_FORK_SAFE=%s",
		    k->env_shm, k->env_fork_safe);
	cr_assert_str_eq(k->env_shm, "0", "shm stays on (no wait object on efa with it)");
	cr_assert_str_eq(k->env_fork_safe, "1", "efa aborts at a fork without it");
	/* libibverbs' fork support (verbs;ofi_rxm and the verbs backend), once. */
	cr_assert_eq(k->fork_init, 1, "ibv_fork_init called %llu times",
		     (unsigned long long)k->fork_init);
	rdps_client_destroy(c);
	job_stop(&j);
}

static void idle_pulls(bool no_wait)
{
	enum { PULLS = 60, GAP_US = 30000 };
	struct rdps_ofi_shim_counts *k;
	struct rdps_client *c;
	uint64_t lat[PULLS], naps;
	float out[DIM];
	struct job j;

	need_provider();
	if (no_wait)
		setenv("RDPS_OFI_SHIM_NO_WAIT", "1", 1);
	job_start(&j, 1);
	c = client_t(&j, 0, 1, 5000);
	k = shim();
	/* One row at a time, the server idle in between (past any linger):
	 * each READ is served by the server's progress (rxm over tcp does
	 * RMA through the target's provider). */
	__atomic_store_n(&k->naps, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < PULLS; i++) {
		uint64_t id = (uint64_t)i * 13 % ROWS, t0;

		usleep(GAP_US);
		t0 = rdps_now_ns();
		cr_assert_eq(rdps_client_pull(c, 0, &id, 1, out), 0, "%s", rdps_client_errmsg(c));
		lat[i] = rdps_now_ns() - t0;
	}
	naps = __atomic_load_n(&k->naps, __ATOMIC_RELAXED);
	for (int a = 0; a < PULLS; a++) /* sort for the percentiles (log only) */
		for (int b = a + 1; b < PULLS; b++)
			if (lat[b] < lat[a]) {
				uint64_t t = lat[a];

				lat[a] = lat[b];
				lat[b] = t;
			}
	cr_log_info("%d pulls of one row against an idle server: p50 %.0f us, p90 %.0f us, "
		    "slowest %.0f %.0f %.0f us (the first one makes rxm's connection); server "
		    "naps %llu", PULLS, lat[PULLS / 2] / 1e3, lat[PULLS * 9 / 10] / 1e3,
		    lat[PULLS - 3] / 1e3, lat[PULLS - 2] / 1e3, lat[PULLS - 1] / 1e3,
		    (unsigned long long)naps);
	cr_assert_eq(naps, 0, "the server napped %llu times (1 ms each) while pulls waited",
		     (unsigned long long)naps);
	/* The control: the READs needed the server's progress. With its
	 * thread stopped (its connections still open), a pull waits in vain. */
	rdps_server_stop(j.srv[0]);
	pthread_join(j.thr[0], NULL);
	{
		uint64_t id = 7;
		int ret = rdps_client_pull(c, 0, &id, 1, out);

		cr_assert_neq(ret, 0, "a pull completed with the server's progress stopped: "
			      "the provider progresses on its own, and the test measures nothing");
		cr_log_info("control: with the server stopped the pull failed: %s",
			    rdps_client_errmsg(c));
	}
	rdps_client_destroy(c);
	rdps_server_destroy(j.srv[0]);
	rdps_ipconfig_free(&j.ipc);
}

/* A wait object (tcp;ofi_rxm's): the server sleeps on it, and when
 * fi_trywait says the provider has work, it progresses at once. */
Test(ofi_shim, pulls_against_an_idle_server_take_no_naps)
{
	idle_pulls(false);
}

/* None (efa of libfabric 1.17): while clients are connected that may read
 * one-sidedly (which the server learns of from no completion), it keeps
 * progressing. */
Test(ofi_shim, without_a_wait_object_pulls_against_an_idle_server_take_no_naps)
{
	idle_pulls(true);
}

/* A provider whose queue stays full (rxm while its connection is being
 * made; a stuck device): the client's push or flush fails after its
 * timeout, naming the wait and its length, and the waiting thread sleeps
 * on the completion queue once it has spun RDPS_CLIENT_SPIN_US (200 us). */
Test(ofi_shim, a_send_the_provider_refuses_for_good_times_out_saying_what_it_waited_for)
{
	rdps_ofi_shim_sends_full_fn *full =
		(rdps_ofi_shim_sends_full_fn *)dlsym(RTLD_DEFAULT, "rdps_ofi_shim_sends_full");
	static uint64_t ids[ROWS];
	static float g[ROWS * DIM];
	struct timespec c0, c1;
	struct rdps_client *c;
	struct job j;
	uint64_t t0, wall;
	double cpu;
	int ret;

	need_provider();
	cr_assert(full);
	job_start(&j, 1);
	c = client_t(&j, 0, 1, 1500);
	round_trip(c); /* connected, and the path works */
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	shim_reset();
	full(true);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	t0 = rdps_now_ns();
	ret = rdps_client_push(c, 0, ids, g, ROWS);
	if (!ret)
		ret = rdps_client_flush(c);
	wall = rdps_now_ns() - t0;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	full(false);
	cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
	cr_log_info("refused sends %llu; failed after %.2f s using %.3f s of CPU: %s",
		    (unsigned long long)shim()->sends_refused, (double)wall * 1e-9, cpu,
		    rdps_client_errmsg(c));
	/* Control: the provider did refuse the client's sends. */
	cr_assert_gt(shim()->sends_refused, 0, "no send was refused: the wait was not exercised");
	cr_assert_neq(ret, 0, "a push and flush whose sends were all refused succeeded");
	cr_assert(strstr(rdps_client_errmsg(c),
			 "timed out after 1500 ms waiting for room in the provider's queue"),
		  "the error does not say what was waited for and how long: %s",
		  rdps_client_errmsg(c));
	/* Bounded by the timeout (generous: CI's cores are shared). */
	cr_assert_geq(wall, 1400000000ull, "failed after %.2f s, before its 1.5 s timeout",
		      (double)wall * 1e-9);
	cr_assert_lt(wall, 60000000000ull, "failed only after %.2f s", (double)wall * 1e-9);
	/* A spinner uses the whole 1.5 s (RDPS_CLIENT_SPIN_US=10000000 shows
	 * it); a sleeper a few ms. */
	cr_assert_lt(cpu, 0.25 * (double)wall * 1e-9,
		     "the waiting thread used %.3f s of CPU in %.2f s: it spun", cpu,
		     (double)wall * 1e-9);
	rdps_client_destroy(c);
	job_stop(&j);
}

/* ---------------------------------------------------------------------- */
/* rdps doctor on an EFA host (the shim's model)                          */

/* Runs rdps doctor with args (under the shim, inherited); its output. */
static char *doctor(const char *const *args)
{
	char *argv[24] = { RDPS_BIN, "doctor" }, *dir = rdps_test_tmpdir("doctor"), log[512], *out;
	int n = 2, st;
	pid_t pid;

	for (int i = 0; args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s/doctor.log", dir);
	pid = rdps_test_spawn(argv, log);
	cr_assert_eq(rdps_test_wait(pid, 60000, &st), 0, "rdps doctor did not finish in 60 s");
	out = rdps_test_slurp(log);
	rdps_test_rmtree(dir);
	free(dir);
	cr_assert(out);
	return out;
}

/* The line of one check. */
static char *line_of(const char *out, const char *check, char *buf, size_t len)
{
	char key[32];
	const char *l;

	snprintf(key, sizeof(key), " %-10s ", check);
	l = strstr(out, key);
	cr_assert(l, "no %s line in:\n%s", check, out);
	while (l > out && l[-1] != '\n')
		l--;
	snprintf(buf, len, "%.*s", (int)strcspn(l, "\n"), l);
	return buf;
}

Test(ofi_shim, doctor_on_a_p4d_with_libfabric_below_1_18_says_pulls_are_two_sided_and_why)
{
	const char *args[] = { "--transport", "ofi", "--ofi-provider", "efa", NULL };
	char line[1024], *out;

	need_provider();
	setenv("RDPS_OFI_SHIM_AS_EFA", "1", 1);
	setenv("RDPS_OFI_SHIM_OLD_EFA", "1", 1);
	out = doctor(args);
	line_of(out, "pulls", line, sizeof(line));
	cr_log_info("%s", line);
	cr_assert(!strncmp(line, "WARN pulls      two-sided", 25), "%s", line);
	cr_assert(strstr(line, "emulates RMA reads") && strstr(line, "API 1.18"), "%s", line);
	cr_assert(strstr(line, "fix: a libfabric of API 1.18 or newer"), "%s", line);
	free(out);
}

Test(ofi_shim, doctor_on_a_p4d_with_libfabric_1_22_says_pulls_are_one_sided)
{
	const char *args[] = { "--transport", "ofi", "--ofi-provider", "efa", NULL };
	char line[1024], *out;

	need_provider();
	setenv("RDPS_OFI_SHIM_AS_EFA", "1", 1);
	setenv("RDPS_OFI_SHIM_OLD_EFA", "1", 1);
	setenv("RDPS_OFI_SHIM_VERSION", "1.22", 1);
	out = doctor(args);
	line_of(out, "pulls", line, sizeof(line));
	cr_log_info("%s", line);
	cr_assert(!strncmp(line, "ok   pulls      one-sided", 25), "%s", line);
	cr_assert(strstr(line, "API 1.22") && strstr(line, "device RDMA asked for and on"), "%s",
		  line);
	free(out);
}

Test(ofi_shim, doctor_counts_what_clients_open_and_pin)
{
	const char *ofi[] = { "--transport", "ofi", "--ofi-provider", "efa", "--clients", "256",
			      "--servers", "16", NULL };
	const char *verbs[] = { "--transport", "verbs", "--clients", "256", "--servers", "16", NULL };
	char line[1024], *out;

	need_provider();
	setenv("RDPS_OFI_SHIM_AS_EFA", "1", 1);
	out = doctor(ofi);
	line_of(out, "scale", line, sizeof(line));
	cr_log_info("%s", line);
	cr_assert(strstr(line, "256 clients x 16 servers: 256 endpoints on this host"), "%s", line);
	cr_assert(strstr(line, "per connection") && strstr(line, "packet buffers"), "%s", line);
	free(out);
	out = doctor(verbs);
	line_of(out, "scale", line, sizeof(line));
	cr_log_info("%s", line);
	cr_assert(strstr(line, "4096 queue pairs on this host") &&
		  strstr(line, "one PD and CQ per client"), "%s", line);
	free(out);
}
