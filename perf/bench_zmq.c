// SPDX-License-Identifier: MIT
/*
 * rdps bench zmq: the baseline a user might pick instead of rdps - a ZeroMQ
 * REQ/REP server (libzmq from Debian) holding the same table, answering the
 * same pulls - built and run beside rdps over TCP in the same run.
 *
 * Request: u32 table, u32 n, n u64 ids (the rdps pull body). Reply: n rows
 * of dim floats, gathered from a dense table by the server thread.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "perf/bench.h"

#define MAX_LIST 16
#define MAX_CLIENTS 16

struct zmq_opts {
	const char *host;
	uint16_t port;
	uint64_t table_rows;
	uint64_t dims[MAX_LIST];
	int ndims;
	uint64_t batches[MAX_LIST];
	int nbatches;
	uint32_t clients;
	uint64_t max_iters;
	double seconds, tput_seconds;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench zmq [options]\n"
"\n"
"Baseline: a ZeroMQ REQ/REP server holding the same table answers the same\n"
"pulls (random ids) as an rdps TCP server, both in this process on --host.\n"
"Compares p50/p99 latency and throughput (1 and --clients clients).\n"
"Goals (issue 6): rdps at least 2x the baseline's throughput and half its p50.\n"
"Output: JSON lines (bench \"zmq\": latency, \"zmq_tput\": throughput; ratio =\n"
"rdps / zmq) on stdout, a table on stderr.\n"
"\n"
"  --host ADDR          (default 127.0.0.1)\n"
"  --port N             base port (default: derived from the pid)\n"
"  --table-rows N       (default 100k)\n"
"  --dims LIST          (default 100,400)\n"
"  --batches LIST       (default 1,16,256,4096)\n"
"  --clients N          (default 2)\n"
"  --iters N            most latency samples per configuration (default 20000)\n"
"  --seconds S          per latency configuration (default 1)\n"
"  --tput-seconds S     per throughput configuration (default 1)\n"
"  -h, --help           this text\n");
}

/* ---------------------------------------------------------------------- */
/* The ZeroMQ server                                                       */

struct zsrv {
	void *ctx;
	void *sock;
	float *tables[MAX_LIST];
	uint32_t dims[MAX_LIST];
	uint32_t ntables;
	uint64_t rows;
	size_t cap;
	char *req, *reply;
	pthread_t thread;
	char endpoint[300];
};

static void *zsrv_main(void *arg)
{
	struct zsrv *z = arg;

	for (;;) {
		int len = zmq_recv(z->sock, z->req, z->cap, 0);
		uint32_t table, n, dim;
		const uint64_t *ids;
		size_t out = 0;

		if (len < 0) {
			if (errno == EINTR)
				continue;
			break; /* ETERM: the context is shutting down */
		}
		memcpy(&table, z->req, 4);
		memcpy(&n, z->req + 4, 4);
		if (len < 8 || table >= z->ntables || (size_t)len != 8 + (size_t)n * 8 ||
		    (size_t)n * z->dims[table] * 4 > z->cap) {
			n = 0; /* malformed: empty reply */
		} else {
			dim = z->dims[table];
			ids = (const uint64_t *)(z->req + 8);
			for (uint32_t i = 0; i < n; i++) {
				uint64_t id = ids[i] < z->rows ? ids[i] : 0;

				memcpy(z->reply + out, z->tables[table] + id * dim, (size_t)dim * 4);
				out += (size_t)dim * 4;
			}
		}
		if (zmq_send(z->sock, z->reply, out, 0) < 0 && errno == ETERM)
			break;
	}
	zmq_close(z->sock);
	return NULL;
}

static int zsrv_start(struct zsrv *z, const char *host, uint16_t port, char *err, size_t errlen)
{
	int zero = 0;

	z->ctx = zmq_ctx_new();
	if (!z->ctx)
		return -ENOMEM;
	z->sock = zmq_socket(z->ctx, ZMQ_REP);
	if (!z->sock)
		return -errno;
	zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof(zero));
	snprintf(z->endpoint, sizeof(z->endpoint), "tcp://%s:%u", host, port);
	if (zmq_bind(z->sock, z->endpoint)) {
		snprintf(err, errlen, "zmq_bind %s: %s", z->endpoint, zmq_strerror(errno));
		zmq_close(z->sock);
		z->sock = NULL;
		return -EADDRINUSE;
	}
	if (pthread_create(&z->thread, NULL, zsrv_main, z)) {
		zmq_close(z->sock);
		z->sock = NULL;
		return -EAGAIN;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Clients                                                                 */

struct zcli {
	struct bench_worker base; /* first: run by bench_run_workers; count: rows */
	void *sock;               /* zmq REQ socket, or NULL for rdps */
	struct rdps_client *c;
	uint32_t table, n, dim;
	uint64_t table_rows;
	char *req;                /* 8 + n*8 bytes: table, n, ids */
	float *out;
	uint64_t seed;
	double seconds;
	struct bench_lat *lat;    /* latency mode: record here */
	uint64_t max_iters;
};

/* One pull through either system. */
static int one_pull(struct zcli *w)
{
	uint64_t *ids = (uint64_t *)(w->req + 8);

	bench_fill_ids(ids, w->n, w->table_rows, false, &w->seed);
	if (w->c)
		return rdps_client_pull(w->c, w->table, ids, w->n, w->out);
	memcpy(w->req, &w->table, 4);
	memcpy(w->req + 4, &w->n, 4);
	if (zmq_send(w->sock, w->req, 8 + (size_t)w->n * 8, 0) < 0)
		return -errno;
	if (zmq_recv(w->sock, w->out, (size_t)w->n * w->dim * 4, 0) != (int)(w->n * w->dim * 4))
		return -EPROTO;
	return 0;
}

static void *zcli_main(void *arg)
{
	struct zcli *w = arg;
	uint64_t t0, now, deadline;

	/* Threads wait for the common start; a direct call starts at once. */
	if (!bench_worker_wait(&w->base))
		return NULL;
	t0 = now = rdps_now_ns();
	deadline = t0 + (uint64_t)(w->seconds * 1e9);
	w->base.count = 0;
	w->base.ret = 0;
	while (now < deadline || (w->lat && w->lat->n < 10)) {
		uint64_t a = now;

		if ((w->base.ret = one_pull(w)))
			break;
		now = rdps_now_ns();
		w->base.count += w->n;
		if (w->lat) {
			bench_lat_add(w->lat, now - a);
			if (bench_lat_full(w->lat))
				break;
		}
	}
	w->base.ns = now - t0;
	return NULL;
}

static double run_clients(struct zcli *w, uint32_t k)
{
	return bench_run_rate(w, sizeof(*w), k, zcli_main);
}

int rdps_bench_zmq(int argc, char **argv)
{
	enum { O_HOST = 256, O_PORT, O_ROWS, O_DIMS, O_BATCHES, O_CLIENTS, O_ITERS, O_SECONDS,
	       O_TSECONDS };
	static const struct option lopts[] = {
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "table-rows", required_argument, NULL, O_ROWS },
		{ "dims", required_argument, NULL, O_DIMS },
		{ "batches", required_argument, NULL, O_BATCHES },
		{ "clients", required_argument, NULL, O_CLIENTS },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "tput-seconds", required_argument, NULL, O_TSECONDS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct zmq_opts o = {
		.host = "127.0.0.1", .table_rows = 100000, .dims = { 100, 400 }, .ndims = 2,
		.batches = { 1, 16, 256, 4096 }, .nbatches = 4, .clients = 2, .max_iters = 20000,
		.seconds = 1, .tput_seconds = 1,
	};
	struct bench_cluster_opts co;
	struct bench_cluster *cl = NULL;
	struct rdps_client *clients[MAX_CLIENTS] = { NULL };
	void *zsocks[MAX_CLIENTS] = { NULL };
	char *reqs[MAX_CLIENTS] = { NULL };
	float *outs[MAX_CLIENTS] = { NULL };
	struct zcli w[MAX_CLIENTS];
	struct zsrv z = { 0 };
	struct bench_lat lat = { 0 };
	uint64_t v, max_batch = 0, max_dim = 0;
	uint16_t port;
	char err[1024];
	int opt, li = 0, ret, rc = 1, zero = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, &li)) != -1) {
		switch (opt) {
		case O_HOST: o.host = optarg; break;
		case O_PORT:
			if (bench_parse_u64(optarg, 1, 65000, &v))
				goto bad;
			o.port = (uint16_t)v;
			break;
		case O_ROWS:
			if (bench_parse_u64(optarg, 1, 1ull << 30, &o.table_rows))
				goto bad;
			break;
		case O_DIMS:
			if ((o.ndims = bench_parse_list(optarg, o.dims, MAX_LIST)) < 0)
				goto bad;
			break;
		case O_BATCHES:
			if ((o.nbatches = bench_parse_list(optarg, o.batches, MAX_LIST)) < 0)
				goto bad;
			break;
		case O_CLIENTS:
			if (bench_parse_u64(optarg, 1, MAX_CLIENTS, &v))
				goto bad;
			o.clients = (uint32_t)v;
			break;
		case O_ITERS:
			if (bench_parse_u64(optarg, 10, 100000000, &o.max_iters))
				goto bad;
			break;
		case O_SECONDS:
			if (bench_parse_double(optarg, 0.001, 3600, &o.seconds))
				goto bad;
			break;
		case O_TSECONDS:
			if (bench_parse_double(optarg, 0.001, 3600, &o.tput_seconds))
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench zmq: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	for (int i = 0; i < o.nbatches; i++)
		max_batch = o.batches[i] > max_batch ? o.batches[i] : max_batch;
	for (int i = 0; i < o.ndims; i++) {
		if (o.dims[i] > 4096) {
			fprintf(stderr, "rdps bench zmq: dims are 1..4096\n");
			return 2;
		}
		max_dim = o.dims[i] > max_dim ? o.dims[i] : max_dim;
	}
	if (max_batch > o.table_rows) {
		fprintf(stderr, "rdps bench zmq: --table-rows is below the largest batch\n");
		return 2;
	}
	port = bench_pick_port(o.port, 51);

	/* rdps over TCP */
	co = (struct bench_cluster_opts){ .transport = "tcp", .host = o.host, .port = port,
					  .num_servers = 1, .num_tables = (uint32_t)o.ndims };
	for (int i = 0; i < o.ndims; i++) {
		static char names[MAX_LIST][16];

		snprintf(names[i], sizeof(names[i]), "d%llu", (unsigned long long)o.dims[i]);
		co.tables[i] = (struct bench_table_spec){ .name = names[i], .rows = o.table_rows,
							  .dim = (uint32_t)o.dims[i],
							  .optimizer = RDPS_OPT_SGD, .lr = 0.1f };
	}
	err[0] = 0;
	ret = bench_cluster_start(&co, &cl, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench zmq: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	/* The same table in the ZeroMQ server. */
	z.rows = o.table_rows;
	z.ntables = (uint32_t)o.ndims;
	z.cap = 8 + max_batch * (max_dim * 4 > 8 ? max_dim * 4 : 8);
	z.req = bench_alloc(z.cap);
	z.reply = bench_alloc(z.cap);
	if (!z.req || !z.reply)
		goto oom;
	for (int i = 0; i < o.ndims; i++) {
		z.dims[i] = (uint32_t)o.dims[i];
		z.tables[i] = bench_alloc(o.table_rows * o.dims[i] * 4);
		if (!z.tables[i])
			goto oom;
		for (uint64_t k = 0; k < o.table_rows * o.dims[i]; k++)
			z.tables[i][k] = (float)(k % 1000) * 1e-3f;
	}
	ret = zsrv_start(&z, o.host, (uint16_t)(port + 50), err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench zmq: ZeroMQ server: %s\n", err[0] ? err : rdps_strerror(ret));
		goto out;
	}
	for (uint32_t i = 0; i < o.clients; i++) {
		ret = bench_cluster_client(cl, i, o.clients, RDPS_READ_VALIDATED, &clients[i], err,
					   sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench zmq: rdps client: %s\n", err);
			goto out;
		}
		zsocks[i] = zmq_socket(z.ctx, ZMQ_REQ);
		if (!zsocks[i] || zmq_setsockopt(zsocks[i], ZMQ_LINGER, &zero, sizeof(zero)) ||
		    zmq_connect(zsocks[i], z.endpoint)) {
			fprintf(stderr, "rdps bench zmq: zmq client: %s\n", zmq_strerror(errno));
			goto out;
		}
		reqs[i] = bench_alloc(8 + max_batch * 8);
		outs[i] = bench_alloc(max_batch * max_dim * 4);
		if (!reqs[i] || !outs[i])
			goto oom;
	}
	if (bench_lat_init(&lat, o.max_iters))
		goto oom;

	bench_table_title("ZeroMQ REQ/REP baseline vs rdps tcp, random ids (us; ratio = rdps / zmq, goal <= 0.5)");
	bench_table_row("%5s %4s | %9s %9s | %9s %9s | %6s", "rows", "dim", "zmq p50", "p99",
			"rdps p50", "p99", "ratio");
	for (int d = 0; d < o.ndims; d++)
		for (int b = 0; b < o.nbatches; b++) {
			uint32_t n = (uint32_t)o.batches[b], dim = (uint32_t)o.dims[d];
			struct bench_pct pz, pr;
			struct bench_json j;

			for (int sys = 0; sys < 2; sys++) {
				/* Warm-up, then the measured run. */
				for (int pass = 0; pass < 2; pass++) {
					w[0] = (struct zcli){ .sock = sys ? NULL : zsocks[0],
							      .c = sys ? clients[0] : NULL,
							      .table = (uint32_t)d, .n = n, .dim = dim,
							      .table_rows = o.table_rows, .req = reqs[0],
							      .out = outs[0], .seed = 42 + n,
							      .seconds = pass ? o.seconds : o.seconds / 10,
							      .lat = &lat };
					bench_lat_reset(&lat);
					zcli_main(&w[0]);
					if (w[0].base.ret) {
						fprintf(stderr, "rdps bench zmq: %s pull failed: %s\n",
							sys ? "rdps" : "zmq", sys ? rdps_client_errmsg(clients[0]) :
							rdps_strerror(w[0].base.ret));
						goto out;
					}
				}
				bench_lat_summary(&lat, sys ? &pr : &pz);
			}
			bench_json_begin(&j, "zmq");
			bench_json_int(&j, "rows", n);
			bench_json_int(&j, "dim", dim);
			bench_json_str(&j, "ids", "random");
			bench_json_int(&j, "samples", pr.n);
			bench_json_num(&j, "zmq_p50_us", pz.p50_us);
			bench_json_num(&j, "zmq_p99_us", pz.p99_us);
			bench_json_num(&j, "rdps_p50_us", pr.p50_us);
			bench_json_num(&j, "rdps_p99_us", pr.p99_us);
			bench_json_num(&j, "ratio", bench_ratio(pr.p50_us, pz.p50_us));
			bench_json_bool(&j, "goal_met", bench_ratio(pr.p50_us, pz.p50_us) <= 0.5);
			bench_json_end(&j);
			bench_table_row("%5u %4u | %9.1f %9.1f | %9.1f %9.1f | %6.2f", n, dim, pz.p50_us,
					pz.p99_us, pr.p50_us, pr.p99_us, bench_ratio(pr.p50_us, pz.p50_us));
		}

	bench_table_title("throughput, random ids (rows/s; ratio = rdps / zmq, goal >= 2)");
	bench_table_row("%5s %4s %7s | %12s | %12s | %6s", "rows", "dim", "clients", "zmq",
			"rdps", "ratio");
	for (int d = 0; d < o.ndims; d++)
		for (int b = 0; b < o.nbatches; b++)
			for (int ki = 0; ki < (o.clients > 1 ? 2 : 1); ki++) {
				uint32_t k = ki ? o.clients : 1, n = (uint32_t)o.batches[b];
				uint32_t dim = (uint32_t)o.dims[d];
				double rate[2];
				struct bench_json j;

				for (int sys = 0; sys < 2; sys++) {
					for (uint32_t i = 0; i < k; i++)
						w[i] = (struct zcli){ .sock = sys ? NULL : zsocks[i],
								      .c = sys ? clients[i] : NULL,
								      .table = (uint32_t)d, .n = n, .dim = dim,
								      .table_rows = o.table_rows, .req = reqs[i],
								      .out = outs[i], .seed = 7 + i,
								      .seconds = o.tput_seconds };
					rate[sys] = run_clients(w, k);
					if (rate[sys] < 0) {
						fprintf(stderr, "rdps bench zmq: %s throughput run failed: %s\n",
							sys ? "rdps" : "zmq", rdps_strerror((int)rate[sys]));
						goto out;
					}
				}
				bench_json_begin(&j, "zmq_tput");
				bench_json_int(&j, "rows", n);
				bench_json_int(&j, "dim", dim);
				bench_json_str(&j, "ids", "random");
				bench_json_int(&j, "clients", k);
				bench_json_num(&j, "zmq_rows_per_s", rate[0]);
				bench_json_num(&j, "rdps_rows_per_s", rate[1]);
				bench_json_num(&j, "zmq_gb_per_s", rate[0] * dim * 4 / 1e9);
				bench_json_num(&j, "rdps_gb_per_s", rate[1] * dim * 4 / 1e9);
				bench_json_num(&j, "ratio", bench_ratio(rate[1], rate[0]));
				bench_json_bool(&j, "goal_met", bench_ratio(rate[1], rate[0]) >= 2);
				bench_json_end(&j);
				bench_table_row("%5u %4u %7u | %12.0f | %12.0f | %6.2f", n, dim, k, rate[0],
						rate[1], bench_ratio(rate[1], rate[0]));
			}
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "rdps bench zmq: out of memory\n");
out:
	for (uint32_t i = 0; i < MAX_CLIENTS; i++) {
		if (zsocks[i])
			zmq_close(zsocks[i]);
		rdps_client_destroy(clients[i]);
		free(reqs[i]);
		free(outs[i]);
	}
	if (z.ctx) {
		/* Wakes the server thread's zmq_recv with ETERM. */
		zmq_ctx_shutdown(z.ctx);
		if (z.sock)
			pthread_join(z.thread, NULL);
		zmq_ctx_term(z.ctx);
	}
	for (int i = 0; i < MAX_LIST; i++)
		free(z.tables[i]);
	free(z.req);
	free(z.reply);
	bench_lat_free(&lat);
	bench_cluster_stop(cl);
	return rc;
bad:
	fprintf(stderr, "rdps bench zmq: bad value '%s' for --%s (see --help)\n", optarg,
		lopts[li].name);
	return 2;
}
