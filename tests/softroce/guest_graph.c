// SPDX-License-Identifier: MIT
/*
 * One-sided neighbour sampling proved one-sided (issue 19), inside the
 * soft-RoCE guest (verbs.sh): two `rdps server --graph PDIR --transport
 * verbs` processes serve the two parts of the WordNet node graph; a client
 * samples 2000 seeds with fanout 10 both ways (RDPS_SAMPLE_READ, RDMA READs
 * of the CSR rows; RDPS_SAMPLE_RPC, the servers pick), which must agree;
 * then both servers are stopped (SIGSTOP):
 *
 * - READ sampling still works and gives exactly the edges it gave before
 *   the pause (and, with another seed, what RPC gives for that seed once
 *   the servers run again);
 * - control: RPC sampling from a client with a 2 s timeout fails with
 *   -ETIMEDOUT while they are stopped (and succeeded just before the
 *   pause), so the servers' CPUs really were doing nothing;
 * - after SIGCONT, RPC sampling works again, and the servers' counters
 *   show they never served a pull.
 *
 * Sampled edges/s of each way are printed ("graph sampling:" lines),
 * informational only (TCG makes them meaningless beyond one run).
 *
 * RDPS_TEST_GRAPH_PARTS names a 2-part partition of `rdps dataset
 * wordnet-nodes` (verbs.sh makes it on the host beforehand); without it
 * the test makes one itself (slower under TCG).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"
#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps_test.h"

#define SERVERS 2
#define SEEDS 2000
#define FANOUT 10
#define ROUNDS 5
#define CTL_TIMEOUT_MS 2000

static pid_t srv[SERVERS];
static char *dir, *ipc, *pdir, *logs[SERVERS];

static void run_tool(char *const argv[], const char *log)
{
	int st;
	pid_t pid = rdps_test_spawn(argv, log);

	cr_assert_eq(rdps_test_wait(pid, 600000, &st), 0, "%s %s timed out", argv[1], argv[2]);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s failed (see %s)", argv[1],
		  argv[2], log);
}

static void start(void)
{
	const char *env = getenv("RDPS_TEST_GRAPH_PARTS");
	char text[128], sid[8];
	int port;

	rdps_log_threshold = RDPS_LOG_ERROR;
	dir = rdps_test_tmpdir("ggraph");
	if (env && *env) {
		pdir = strdup(env);
	} else {
		char *data, *log;

		cr_assert(asprintf(&data, "%s/wn", dir) > 0);
		cr_assert(asprintf(&pdir, "%s/parts", dir) > 0);
		cr_assert(asprintf(&log, "%s/make.log", dir) > 0);
		{
			char *ds[] = { RDPS_BIN, "dataset", "wordnet-nodes", data, NULL };
			char *pt[] = { RDPS_BIN, "partition", "--data", data, "-k", "2", "--out",
				       pdir, "--balance_train", "--balance_edges", NULL };

			run_tool(ds, log);
			run_tool(pt, log);
		}
		free(data);
		free(log);
	}
	port = rdps_test_free_ports(SERVERS);
	snprintf(text, sizeof(text), "%s %d %d\n", guest_host(), port, SERVERS);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	for (int s = 0; s < SERVERS; s++) {
		char *argv[] = { RDPS_BIN, "server", "--ip_config", ipc, "--server_id", sid,
				 "--graph", pdir, "--transport", "verbs", "--quiet", NULL };

		snprintf(sid, sizeof(sid), "%d", s);
		cr_assert(asprintf(&logs[s], "%s/server-%d.log", dir, s) > 0);
		srv[s] = rdps_test_spawn(argv, logs[s]);
	}
	for (int s = 0; s < SERVERS; s++)
		cr_assert_eq(rdps_test_wait_port(guest_host(), port + s, 120000), 0,
			     "server %d did not start (see %s)", s, logs[s]);
}

static void stop(void)
{
	int st;

	for (int s = 0; s < SERVERS; s++)
		if (srv[s] > 0) {
			kill(srv[s], SIGCONT);
			kill(srv[s], SIGTERM);
		}
	for (int s = 0; s < SERVERS; s++) {
		if (srv[s] > 0)
			rdps_test_wait(srv[s], 20000, &st);
		if (getenv("RDPS_TEST_DUMP_LOG") && logs[s]) {
			char *t = rdps_test_slurp(logs[s]);

			fprintf(stderr, "SERVERLOG %d: %s\n", s, t ? t : "");
			free(t);
		}
		free(logs[s]);
		srv[s] = 0;
	}
	rdps_test_rmtree(dir);
	free(dir);
	free(ipc);
	free(pdir);
}

TestSuite(guest_graph, .init = start, .fini = stop, .timeout = 900);

static struct rdps_client *client(uint32_t id, int timeout_ms)
{
	struct rdps_client_params p = { .ip_config = ipc, .transport = "verbs", .client_id = id,
					.num_clients = 2, .timeout_ms = timeout_ms,
					.quiet = true };
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "client %u: %s", id, err);
	return c;
}

/* Sampled edges, and their own storage. */
struct edges {
	uint64_t src[SEEDS * FANOUT], dst[SEEDS * FANOUT], eid[SEEDS * FANOUT];
	int64_t etype[SEEDS * FANOUT];
	size_t n;
};

static uint64_t seeds[SEEDS];

static int sample(struct rdps_graph *g, int way, uint64_t seed, struct edges *e)
{
	struct rdps_sampled out = { .src = e->src, .dst = e->dst, .eid = e->eid,
				    .etype = e->etype };
	int ret = rdps_graph_sample_neighbors(g, seeds, SEEDS, FANOUT, way, seed, &out);

	e->n = out.num_edges;
	return ret;
}

static void same_edges(const struct edges *a, const struct edges *b, const char *what)
{
	cr_assert_eq(a->n, b->n, "%s: %zu edges against %zu", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		cr_assert(a->src[i] == b->src[i] && a->dst[i] == b->dst[i] &&
			  a->eid[i] == b->eid[i] && a->etype[i] == b->etype[i],
			  "%s: edge %zu differs: %llu->%llu (id %llu, type %lld) against "
			  "%llu->%llu (id %llu, type %lld)", what, i,
			  (unsigned long long)a->src[i], (unsigned long long)a->dst[i],
			  (unsigned long long)a->eid[i], (long long)a->etype[i],
			  (unsigned long long)b->src[i], (unsigned long long)b->dst[i],
			  (unsigned long long)b->eid[i], (long long)b->etype[i]);
}

/* Sampled edges per second of ROUNDS samples of one way (each checked
 * against want). */
static double rate(struct rdps_graph *g, struct rdps_client *c, int way, uint64_t seed,
		   const struct edges *want, struct edges *scratch)
{
	uint64_t t0 = rdps_now_ns(), edges = 0;

	for (int r = 0; r < ROUNDS; r++) {
		cr_assert_eq(sample(g, way, seed, scratch), 0, "%s round %d: %s",
			     way == RDPS_SAMPLE_READ ? "read" : "rpc", r, rdps_client_errmsg(c));
		same_edges(scratch, want, way == RDPS_SAMPLE_READ ? "read again" : "rpc again");
		edges += scratch->n;
	}
	return (double)edges / ((double)(rdps_now_ns() - t0) / 1e9);
}

static char proc_state(pid_t pid)
{
	char path[64], *t, *p;
	char st = '?';

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	t = rdps_test_slurp(path);
	if (t && (p = strrchr(t, ')')) && p[1] == ' ')
		st = p[2];
	free(t);
	return st;
}

static struct edges before, rpc_before, paused, paused43, after, scratch;

Test(guest_graph, read_sampling_works_with_the_servers_stopped)
{
	struct rdps_client *c = client(0, 30000), *ctl = client(1, CTL_TIMEOUT_MS);
	struct rdps_graph *g, *gctl;
	struct rdps_server_stats st;
	uint64_t n, lo, hi, in_part[SERVERS] = { 0 }, stride = 7919, t0, ms;
	double read_run, rpc_run, read_paused;
	int ret, status;

	cr_assert_eq(rdps_graph_open(c, &g), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_graph_open(ctl, &gctl), 0, "%s", rdps_client_errmsg(ctl));
	cr_assert_eq(rdps_graph_num_parts(g), SERVERS);
	n = rdps_graph_num_nodes(g);
	cr_assert_gt(n, SEEDS);
	cr_assert_neq(n % stride, 0);
	/* distinct seeds scattered over both parts */
	for (size_t i = 0; i < SEEDS; i++)
		seeds[i] = (i * stride + 13) % n;
	for (uint32_t p = 0; p < SERVERS; p++) {
		rdps_graph_part_nodes(g, p, &lo, &hi);
		for (size_t i = 0; i < SEEDS; i++)
			in_part[p] += seeds[i] >= lo && seeds[i] < hi;
	}
	cr_assert(in_part[0] > 0 && in_part[1] > 0, "seeds in parts: %llu, %llu",
		  (unsigned long long)in_part[0], (unsigned long long)in_part[1]);

	/* Running: both ways agree. */
	cr_assert_eq(sample(g, RDPS_SAMPLE_READ, 42, &before), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(sample(g, RDPS_SAMPLE_RPC, 42, &rpc_before), 0, "%s", rdps_client_errmsg(c));
	cr_assert_gt(before.n, SEEDS, "only %zu edges sampled", before.n);
	same_edges(&before, &rpc_before, "read against rpc");
	read_run = rate(g, c, RDPS_SAMPLE_READ, 42, &before, &scratch);
	rpc_run = rate(g, c, RDPS_SAMPLE_RPC, 42, &before, &scratch);
	/* The control client's RPC works while the servers run, within its 2 s. */
	cr_assert_eq(sample(gctl, RDPS_SAMPLE_RPC, 42, &scratch), 0, "control before the pause: %s",
		     rdps_client_errmsg(ctl));
	same_edges(&scratch, &before, "control client's rpc");

	/* Stop both servers: their CPUs can do nothing now. */
	for (int s = 0; s < SERVERS; s++) {
		cr_assert_eq(kill(srv[s], SIGSTOP), 0);
		cr_assert_eq(waitpid(srv[s], &status, WUNTRACED), srv[s]);
		cr_assert(WIFSTOPPED(status), "server %d is not stopped", s);
		cr_assert_eq(proc_state(srv[s]), 'T', "server %d: state %c", s,
			     proc_state(srv[s]));
	}

	/* The proof: READ sampling, the same edges as before the pause. */
	cr_assert_eq(sample(g, RDPS_SAMPLE_READ, 42, &paused), 0, "read while paused: %s",
		     rdps_client_errmsg(c));
	same_edges(&paused, &before, "read while paused against read before");
	read_paused = rate(g, c, RDPS_SAMPLE_READ, 42, &before, &scratch);
	/* A seed not used before: checked against RPC once the servers run. */
	cr_assert_eq(sample(g, RDPS_SAMPLE_READ, 43, &paused43), 0, "read while paused: %s",
		     rdps_client_errmsg(c));

	/* Control: what needs a server's CPU times out now. */
	t0 = rdps_now_ns();
	ret = sample(gctl, RDPS_SAMPLE_RPC, 42, &scratch);
	ms = (rdps_now_ns() - t0) / 1000000;
	cr_assert_eq(ret, -ETIMEDOUT, "rpc sampling with the servers stopped returned %d (%s) "
		     "after %llu ms: were they running?", ret, rdps_client_errmsg(ctl),
		     (unsigned long long)ms);
	cr_assert_geq(ms, CTL_TIMEOUT_MS - 100);
	cr_log_info("graph sampling control: rpc with the servers stopped failed after %llu ms: %s",
		    (unsigned long long)ms, rdps_client_errmsg(ctl));
	for (int s = 0; s < SERVERS; s++)
		cr_assert_eq(proc_state(srv[s]), 'T', "server %d was resumed during the test", s);

	for (int s = 0; s < SERVERS; s++) {
		cr_assert_eq(kill(srv[s], SIGCONT), 0);
		cr_assert_eq(waitpid(srv[s], &status, WCONTINUED), srv[s]);
		cr_assert(WIFCONTINUED(status));
	}
	rdps_graph_close(gctl);
	rdps_client_destroy(ctl);

	/* Running again: RPC works, and agrees with what READ read while paused. */
	cr_assert_eq(sample(g, RDPS_SAMPLE_RPC, 42, &after), 0, "rpc after SIGCONT: %s",
		     rdps_client_errmsg(c));
	same_edges(&after, &before, "rpc after the pause");
	cr_assert_eq(sample(g, RDPS_SAMPLE_RPC, 43, &after), 0, "%s", rdps_client_errmsg(c));
	same_edges(&paused43, &after, "read of seed 43 while paused against rpc after");
	cr_assert(paused43.n != before.n ||
		  memcmp(paused43.src, before.src, before.n * sizeof(*before.src)) ||
		  memcmp(paused43.eid, before.eid, before.n * sizeof(*before.eid)),
		  "seeds 42 and 43 picked the same edges: the seed does nothing");

	/* No pull was ever served by a server's CPU; RPC samples were. */
	for (uint32_t s = 0; s < SERVERS; s++) {
		cr_assert_eq(rdps_client_server_stats(c, s, &st), 0, "%s", rdps_client_errmsg(c));
		cr_assert_eq(st.requests[RDPS_REQ_PULL], 0, "server %u served %llu pulls", s,
			     (unsigned long long)st.requests[RDPS_REQ_PULL]);
		cr_assert_geq(st.requests[RDPS_REQ_SAMPLE], 1 + ROUNDS + 1 + 2);
	}

	cr_log_info("graph sampling: %d seeds, fanout %d, %zu edges; running: read %.0f edges/s, "
		    "rpc %.0f edges/s; servers stopped: read %.0f edges/s", SEEDS, FANOUT, before.n,
		    read_run, rpc_run, read_paused);
	rdps_graph_close(g);
	rdps_client_destroy(c);
}
