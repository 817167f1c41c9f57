// SPDX-License-Identifier: MIT
/* rdps bench: an in-process cluster. Each server is created with
 * rdps_server_create() and served by its own thread over the real transport
 * (tcp or verbs), so a benchmark's clients talk to it exactly as to an
 * `rdps server` process. rdps_server_run() starts a server's other threads
 * (--num_server_threads) itself, so the servers' threads are found as the
 * threads of this process that appear while the cluster starts, and their
 * CPU time is read through their thread CPU clocks. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf/bench.h"
#include "rdps/ipconfig.h"
#include "rdps/server.h"

#define MAX_TIDS 256

struct bench_cluster {
	struct rdps_ipconfig ipc;
	char transport[16];
	uint32_t num_servers;
	struct rdps_server *servers[RDPS_MAX_SERVERS];
	pthread_t threads[RDPS_MAX_SERVERS];
	bool started[RDPS_MAX_SERVERS];
	pid_t tids[MAX_TIDS];  /* the servers' threads (kernel thread ids) */
	uint32_t ntids;
};

/* The kernel thread ids of this process, at most max (-errno if unreadable). */
static int list_tids(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < max)
		if (e->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

static bool in_list(const pid_t *tids, int n, pid_t t)
{
	for (int i = 0; i < n; i++)
		if (tids[i] == t)
			return true;
	return false;
}

/* Records the threads that are not in before[0..nbefore) as the servers',
 * waiting up to a second for want of them (rdps_server_run starts a
 * server's workers a moment after its thread starts). */
static void find_server_threads(struct bench_cluster *cl, const pid_t *before, int nbefore,
				uint32_t want)
{
	uint64_t deadline = rdps_now_ns() + 1000000000ull;
	pid_t now[MAX_TIDS];

	for (;;) {
		struct timespec ts = { 0, 5 * 1000000L };
		int n = list_tids(now, MAX_TIDS);

		cl->ntids = 0;
		for (int i = 0; i < n; i++)
			if (!in_list(before, nbefore, now[i]) && cl->ntids < MAX_TIDS)
				cl->tids[cl->ntids++] = now[i];
		if (n < 0 || cl->ntids >= want || rdps_now_ns() > deadline)
			return;
		nanosleep(&ts, NULL);
	}
}

/* The CPU clock of thread tid of this process (glibc's
 * MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as pthread_getcpuclockid). */
static clockid_t tid_cpu_clock(pid_t tid)
{
	return (clockid_t)(int)((~(unsigned)tid << 3) | 6u);
}

static void *server_main(void *arg)
{
	struct rdps_server *s = arg;
	int ret = rdps_server_run(s);

	if (ret < 0)
		rdps_err("bench: server stopped: %s", rdps_strerror(ret));
	return NULL;
}

int bench_cluster_start(const struct bench_cluster_opts *o, struct bench_cluster **out,
			char *err, size_t errlen)
{
	struct rdps_server_config cfg;
	struct bench_cluster *cl;
	char text[RDPS_HOST_MAX + 64], why[512];
	pid_t before[MAX_TIDS];
	int ret, nbefore;

	*out = NULL;
	if (!o->num_servers || o->num_servers > 64 || !o->num_tables ||
	    o->num_tables > RDPS_MAX_TABLES) {
		snprintf(err, errlen, "need 1..64 servers and 1..%d tables", RDPS_MAX_TABLES);
		return -EINVAL;
	}
	if (!strcmp(o->transport, "verbs")) {
		/* auto picks verbs only if a device serves the route: reuse its
		 * test so the message says exactly what is missing. */
		const struct rdps_transport_ops *ops =
			rdps_transport_select("auto", o->host, why, sizeof(why));

		if (!ops || strcmp(ops->name, "verbs")) {
			snprintf(err, errlen,
				 "--transport verbs needs an RDMA device serving %s, and there is none "
				 "(%s); on a host without RDMA run the verbs benchmarks in the soft-RoCE "
				 "guest (perf/run.sh does: tests/softroce/perf-guest.sh)",
				 o->host, why);
			return -ENODEV;
		}
	} else if (!rdps_transport_find(o->transport)) {
		snprintf(err, errlen, "unknown transport '%s' (known: %s)", o->transport,
			 rdps_transport_names());
		return -EINVAL;
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	snprintf(cl->transport, sizeof(cl->transport), "%s", o->transport);
	snprintf(text, sizeof(text), "%s %u %u\n", o->host, o->port, o->num_servers);
	ret = rdps_ipconfig_parse("bench", text, &cl->ipc, err, errlen);
	if (ret)
		goto err_free;
	memset(&cfg, 0, sizeof(cfg));
	cfg.transport = o->transport;
	cfg.ipc = &cl->ipc;
	cfg.num_tables = o->num_tables;
	cfg.num_threads = o->server_threads ? o->server_threads : 1;
	cfg.seed = 1;
	/* The benchmark's own servers, on the address it was given (the
	 * guest's rxe address for a remote client): no secret to prove. */
	cfg.allow_unauthenticated = true;
	for (uint32_t t = 0; t < o->num_tables; t++) {
		struct rdps_server_table_config *tc = &cfg.tables[t];

		snprintf(tc->name, sizeof(tc->name), "%s", o->tables[t].name);
		tc->num_rows = o->tables[t].rows;
		tc->dim = o->tables[t].dim;
		tc->init = RDPS_INIT_UNIFORM;
		tc->init_range = 0.1f;
		tc->optimizer = o->tables[t].optimizer;
		tc->lr = o->tables[t].lr;
	}
	cl->num_servers = o->num_servers;
	nbefore = list_tids(before, MAX_TIDS);
	for (uint32_t s = 0; s < o->num_servers; s++) {
		cfg.server_id = s;
		ret = rdps_server_create(&cfg, &cl->servers[s], err, errlen);
		if (ret)
			goto err_stop;
	}
	for (uint32_t s = 0; s < o->num_servers; s++) {
		ret = -pthread_create(&cl->threads[s], NULL, server_main, cl->servers[s]);
		if (ret) {
			snprintf(err, errlen, "cannot start a server thread: %s", rdps_strerror(ret));
			goto err_stop;
		}
		cl->started[s] = true;
	}
	find_server_threads(cl, before, nbefore > 0 ? nbefore : 0, o->num_servers * cfg.num_threads);
	*out = cl;
	return 0;

err_stop:
	bench_cluster_stop(cl);
	return ret;
err_free:
	free(cl);
	return ret;
}

int bench_cluster_client(struct bench_cluster *cl, uint32_t client_id, uint32_t num_clients,
			 int read_consistency, struct rdps_client **out, char *err,
			 size_t errlen)
{
	struct rdps_client_params p = {
		.servers = &cl->ipc,
		.transport = cl->transport,
		.client_id = client_id,
		.num_clients = num_clients,
		.timeout_ms = 60000,
		.read_consistency = read_consistency,
		.quiet = true,
	};

	return rdps_client_create(&p, out, err, errlen);
}

uint64_t bench_cluster_cpu_ns(const struct bench_cluster *cl)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < cl->ntids; i++) {
		struct timespec ts;

		/* A thread that has ended counts no more. */
		if (!clock_gettime(tid_cpu_clock(cl->tids[i]), &ts))
			sum += (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	return sum;
}

uint32_t bench_cluster_threads(const struct bench_cluster *cl)
{
	return cl->ntids;
}

void bench_cluster_stop(struct bench_cluster *cl)
{
	if (!cl)
		return;
	for (uint32_t s = 0; s < cl->num_servers; s++)
		if (cl->servers[s])
			rdps_server_stop(cl->servers[s]);
	for (uint32_t s = 0; s < cl->num_servers; s++)
		if (cl->started[s])
			pthread_join(cl->threads[s], NULL);
	for (uint32_t s = 0; s < cl->num_servers; s++)
		rdps_server_destroy(cl->servers[s]);
	rdps_ipconfig_free(&cl->ipc);
	free(cl);
}
