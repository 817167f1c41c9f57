// SPDX-License-Identifier: MIT
/* rdps bench: an in-process cluster. Each server is created with
 * rdps_server_create() and served by its own thread over the real transport
 * (tcp or verbs), so a benchmark's clients talk to it exactly as to an
 * `rdps server` process, and the server thread's CPU time is measurable. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/bench.h"
#include "rdps/ipconfig.h"
#include "rdps/server.h"

struct bench_cluster {
	struct rdps_ipconfig ipc;
	char transport[16];
	uint32_t num_servers;
	struct rdps_server *servers[RDPS_MAX_SERVERS];
	pthread_t threads[RDPS_MAX_SERVERS];
	bool started[RDPS_MAX_SERVERS];
	clockid_t cpu_clock[RDPS_MAX_SERVERS];
	bool have_cpu_clock[RDPS_MAX_SERVERS];
};

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
	int ret;

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
	cfg.seed = 1;
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
		cl->have_cpu_clock[s] = !pthread_getcpuclockid(cl->threads[s], &cl->cpu_clock[s]);
	}
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

uint64_t bench_cluster_server_cpu_ns(const struct bench_cluster *cl, uint32_t s)
{
	struct timespec ts;

	if (s >= cl->num_servers || !cl->have_cpu_clock[s] ||
	    clock_gettime(cl->cpu_clock[s], &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
