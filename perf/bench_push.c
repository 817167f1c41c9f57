// SPDX-License-Identifier: MIT
/*
 * rdps bench push: pushes/s and gradient GB/s applied per optimizer, and the
 * server's apply rate per core, each beside a limit measured in the same run:
 *   tcp    the same bytes streamed one way over raw TCP connections (one per
 *          client, TCP_NODELAY) to a thread that reads and drops them, for the
 *          same time, then one round trip (as the flush);
 *   verbs  perftest ib_send_bw on the same RDMA device, one queue pair per
 *          client, at the size of the SENDs that carry the push (the push's
 *          bytes, at most the backend's push message size, as it reports it);
 *   ofi    fi_pingpong (libfabric-bin) on the same provider at the size of the
 *          messages that carry the push (as verbs): the bytes it moves per
 *          second with one message each way in turn (Debian ships no
 *          fabtests: no fi_msg_bw or fi_rma_bw to stream with).
 *
 * For each number of server threads (--num_server_threads), one in-process
 * cluster holds one table per optimizer. For each optimizer and batch size,
 * every client pushes random ids for --seconds, then flushes (so the time
 * covers applying, not only sending). The servers' counters
 * (rdps_client_server_stats) give the rows they applied; the CPU time of all
 * the servers' threads gives rows applied per core second and its inverse,
 * the server CPU per pushed row.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/bench.h"

#define MAX_LIST 8
#define MAX_CLIENTS 16

struct push_opts {
	const char *transport, *host;
	uint16_t port;
	uint32_t servers, clients;
	uint64_t threads[MAX_LIST]; /* server threads, one cluster each */
	int nthreads;
	uint64_t table_rows, dim;
	uint64_t batches[MAX_LIST];
	int nbatches;
	int opts[3];
	int nopts;
	double seconds;
	bool limits;
	const char *ib_dev;
	int gid_index; /* -2: from --host */
	const char *ofi_provider;
	uint64_t limit_iters; /* fi_pingpong -I */
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench push [options]\n"
"\n"
"Pushes/s and gradient GB/s applied per optimizer (sgd, adagrad_row, adagrad),\n"
"and the server's apply rate per core: rows applied (server counters) over the\n"
"CPU time of the servers' threads, and its inverse, server CPU ns per pushed row.\n"
"Each run pushes random ids for --seconds from every client, then flushes, so\n"
"the time includes applying. Servers run in this process over the real\n"
"transport, with --num_server_threads threads each (one cluster per value).\n"
"Limits: tcp - the same bytes per push streamed over raw TCP connections, one\n"
"per client, to threads that read and drop them (tcp_stream); verbs - perftest\n"
"ib_send_bw on the same device, one queue pair per client, at the size of the\n"
"SENDs that carry a push; ofi - fi_pingpong (libfabric-bin) on the same\n"
"provider at the size of the messages that carry a push: its bytes per second\n"
"with one message each way in turn, over the push's bytes (one pair, however\n"
"many clients).\n"
"Output: JSON lines (bench \"push\") on stdout, a table on stderr.\n"
"\n"
"  --transport tcp|verbs|ofi  (default tcp)\n"
"  --ofi-provider NAME        the libfabric provider of --transport ofi (default:\n"
"                             efa, or FI_PROVIDER's; e.g. 'tcp;ofi_rxm'), also\n"
"                             fi_pingpong's -p\n"
"  --host ADDR                (default 127.0.0.1)\n"
"  --port N                   base port (default: derived from the pid)\n"
"  --servers N                (default 1)\n"
"  --num_server_threads LIST  threads per server, each value its own cluster\n"
"                             (default 1; the transport may grant fewer: the\n"
"                             threads seen are in server_threads_seen)\n"
"  --clients N                pushing clients, one thread each (default 1)\n"
"  --table-rows N             rows per table (default 100k)\n"
"  --dim N                    floats per row (default 400)\n"
"  --batches LIST             rows per push (default 1024)\n"
"  --optimizers LIST          (default sgd,adagrad_row,adagrad)\n"
"  --seconds S                per configuration (default 2)\n"
"  --no-limit                 do not measure the limits\n"
"  --limit-iters N            fi_pingpong's round trips per run (ofi; default\n"
"                             1000)\n"
"  --ib-dev NAME, --gid-index N   perftest's -d / -x (verbs; default: the\n"
"                             device and RoCE v2 GID of --host)\n"
"  -h, --help                 this text\n");
}

struct push_worker {
	struct bench_worker base; /* first: run by bench_run_workers; count: pushes */
	struct rdps_client *c; /* rdps client, or */
	int fd;                /* raw TCP stream (the limit) */
	void *buf;             /* its message buffer */
	uint32_t msg;          /* its message bytes */
	uint32_t table, n, dim;
	uint64_t table_rows;
	uint64_t *ids;
	float *grads;
	double seconds;
};

static void *push_main(void *arg)
{
	struct push_worker *w = arg;
	uint64_t seed = (uint64_t)(uintptr_t)w * 0x9e3779b97f4a7c15ull, t0, deadline, now;

	if (!bench_worker_wait(&w->base))
		return NULL;
	t0 = now = rdps_now_ns();
	deadline = t0 + (uint64_t)(w->seconds * 1e9);
	while (now < deadline) {
		if (!w->c) {
			/* Reply 0: the limit server reads the message, answers nothing. */
			w->base.ret = bench_pingpong_once(w->fd, w->buf, w->msg, 0);
			if (w->base.ret)
				break;
			w->base.count++;
			now = rdps_now_ns();
			continue;
		}
		bench_fill_ids(w->ids, w->n, w->table_rows, false, &seed);
		w->base.ret = rdps_client_push(w->c, w->table, w->ids, w->grads, w->n);
		if (w->base.ret)
			break;
		w->base.count++;
		now = rdps_now_ns();
	}
	/* The time includes applying: flush waits for the servers (the limit:
	 * one round trip, answered after every earlier message was read). */
	if (!w->base.ret)
		w->base.ret = w->c ? rdps_client_flush(w->c) : bench_pingpong_once(w->fd, w->buf, 8, 8);
	w->base.ns = rdps_now_ns() - t0;
	return NULL;
}

/* Bytes of one push of n rows on the wire: frame header, rows header, ids,
 * gradients (padded to 8), as the TCP transport sends it. */
static uint32_t push_bytes(uint32_t n, uint32_t dim)
{
	return (uint32_t)(16 + 8 + (uint64_t)n * 8 + RDPS_ALIGN_UP((uint64_t)n * dim * 4, 8));
}

static int server_rows_pushed(struct rdps_client *c, uint32_t servers, uint64_t *rows)
{
	*rows = 0;
	for (uint32_t s = 0; s < servers; s++) {
		struct rdps_server_stats st;
		int ret = rdps_client_server_stats(c, s, &st);

		if (ret)
			return ret;
		*rows += st.rows_pushed;
	}
	return 0;
}

/* What the clusters of one run share: the options, the pushing workers and
 * their buffers, and the limit (its connections or perftest's settings). */
struct push_run {
	struct push_opts o;
	bool verbs;
	uint64_t max_batch;
	struct push_worker w[MAX_CLIENTS];  /* rdps clients */
	struct push_worker lw[MAX_CLIENTS]; /* the limit's raw TCP streams */
	struct bench_pingpong *pp;          /* tcp: their reader */
	struct bench_perftest_opts po;      /* verbs: ib_send_bw (po.dev NULL: none) */
	bool ofi;                           /* ofi: fi_pingpong (fo.prov NULL: none) */
	struct bench_fipp_opts fo;
	char dev[64];
	bool limit_failed;                  /* perftest failed once: not again */
	uint32_t limit_msg;                 /* ofi: fi_pingpong's size, last run */
};

static int parse_opts(int argc, char **argv, struct push_opts *o)
{
	enum { O_TRANSPORT = 256, O_HOST, O_PORT, O_SERVERS, O_THREADS, O_CLIENTS, O_ROWS, O_DIM,
	       O_BATCHES, O_OPTS, O_SECONDS, O_NOLIMIT, O_IBDEV, O_GID, O_OFIPROV, O_LITERS };
	static const struct option lopts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "servers", required_argument, NULL, O_SERVERS },
		{ "num_server_threads", required_argument, NULL, O_THREADS },
		{ "clients", required_argument, NULL, O_CLIENTS },
		{ "table-rows", required_argument, NULL, O_ROWS },
		{ "dim", required_argument, NULL, O_DIM },
		{ "batches", required_argument, NULL, O_BATCHES },
		{ "optimizers", required_argument, NULL, O_OPTS },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "no-limit", no_argument, NULL, O_NOLIMIT },
		{ "ib-dev", required_argument, NULL, O_IBDEV },
		{ "gid-index", required_argument, NULL, O_GID },
		{ "ofi-provider", required_argument, NULL, O_OFIPROV },
		{ "limit-iters", required_argument, NULL, O_LITERS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int opt, li = 0;

	*o = (struct push_opts){
		.transport = "tcp", .host = "127.0.0.1", .servers = 1, .clients = 1,
		.threads = { 1 }, .nthreads = 1,
		.table_rows = 100000, .dim = 400, .batches = { 1024 }, .nbatches = 1,
		.opts = { RDPS_OPT_SGD, RDPS_OPT_ADAGRAD_ROW, RDPS_OPT_ADAGRAD }, .nopts = 3,
		.seconds = 2, .limits = true, .gid_index = -2, .limit_iters = 1000,
	};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, &li)) != -1) {
		switch (opt) {
		case O_TRANSPORT:
			if (strcmp(optarg, "tcp") && strcmp(optarg, "verbs") && strcmp(optarg, "ofi"))
				goto bad;
			o->transport = optarg;
			break;
		case O_OFIPROV:
			if (!*optarg)
				goto bad;
			o->ofi_provider = optarg;
			break;
		case O_LITERS:
			if (bench_parse_u64(optarg, 10, 1000000, &o->limit_iters))
				goto bad;
			break;
		case O_HOST: o->host = optarg; break;
		case O_PORT:
			if (bench_parse_u64(optarg, 1, 65000, &v))
				goto bad;
			o->port = (uint16_t)v;
			break;
		case O_SERVERS:
			if (bench_parse_u64(optarg, 1, 16, &v))
				goto bad;
			o->servers = (uint32_t)v;
			break;
		case O_THREADS:
			if ((o->nthreads = bench_parse_list(optarg, o->threads, MAX_LIST)) < 0)
				goto bad;
			for (int i = 0; i < o->nthreads; i++)
				if (o->threads[i] > 64)
					goto bad;
			break;
		case O_CLIENTS:
			if (bench_parse_u64(optarg, 1, MAX_CLIENTS, &v))
				goto bad;
			o->clients = (uint32_t)v;
			break;
		case O_ROWS:
			if (bench_parse_u64(optarg, 1, 1ull << 32, &o->table_rows))
				goto bad;
			break;
		case O_DIM:
			if (bench_parse_u64(optarg, 1, 4096, &o->dim))
				goto bad;
			break;
		case O_BATCHES:
			if ((o->nbatches = bench_parse_list(optarg, o->batches, MAX_LIST)) < 0)
				goto bad;
			break;
		case O_OPTS: {
			char tmp[128], *save = NULL, *tok;

			snprintf(tmp, sizeof(tmp), "%s", optarg);
			o->nopts = 0;
			for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				int k = rdps_optimizer_parse(tok);

				if (k < 0 || o->nopts == 3)
					goto bad;
				o->opts[o->nopts++] = k;
			}
			if (!o->nopts)
				goto bad;
			break;
		}
		case O_NOLIMIT: o->limits = false; break;
		case O_IBDEV: o->ib_dev = optarg; break;
		case O_GID:
			if (bench_parse_u64(optarg, 0, 65535, &v))
				goto bad;
			o->gid_index = (int)v;
			break;
		case O_SECONDS:
			if (bench_parse_double(optarg, 0.01, 3600, &o->seconds))
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
		fprintf(stderr, "rdps bench push: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	/* The ofi backend reads it, before libfabric's first call. */
	if (o->ofi_provider)
		setenv("RDPS_OFI_PROVIDER", o->ofi_provider, 1);
	return -1; /* go on */
bad:
	fprintf(stderr, "rdps bench push: bad value '%s' for --%s (see --help)\n", optarg,
		lopts[li].name);
	return 2;
}

/* The limit's connections (tcp) or perftest's settings (verbs). */
static int limit_open(struct push_run *r, uint16_t port)
{
	const struct push_opts *o = &r->o;
	char err[1024];
	int ret;

	if (!o->limits)
		return 0;
	err[0] = 0;
	if (r->ofi) {
		r->fo = (struct bench_fipp_opts){ .prov = bench_ofi_provider(), .host = o->host,
						  .port = (uint16_t)(port + 100),
						  .iters = (unsigned)o->limit_iters, .timeout_s = 120 };
		fprintf(stderr, "rdps bench push: limits from fi_pingpong -p '%s' -e rdm\n",
			r->fo.prov);
		return 0;
	}
	if (r->verbs) {
		ret = bench_perftest_setup(&r->po, o->host, o->ib_dev, o->gid_index, r->dev,
					   sizeof(r->dev), err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench push: %s\n", err);
			return ret;
		}
		r->po.qps = o->clients; /* one queue pair per pushing client, as rdps */
		r->po.port = (uint16_t)(port + 100);
		return 0;
	}
	ret = bench_pingpong_start(o->host, &r->pp, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench push: %s\n", err);
		return ret;
	}
	for (uint32_t i = 0; i < o->clients; i++) {
		ret = bench_pingpong_open(r->pp, push_bytes((uint32_t)r->max_batch, (uint32_t)o->dim),
					  &r->lw[i].fd, &r->lw[i].buf);
		if (ret) {
			fprintf(stderr, "rdps bench push: limit connection: %s\n", rdps_strerror(ret));
			return ret;
		}
	}
	return 0;
}

/* The limit's pushes/s for pushes of n rows, measured now: NAN if it is not
 * measured (--no-limit, perftest unusable), or -errno if the stream failed. */
static double limit_rate(struct push_run *r, uint32_t n)
{
	const struct push_opts *o = &r->o;
	uint32_t sz = push_bytes(n, (uint32_t)o->dim), msg = sz;
	struct rdps_transport_info ti;
	struct bench_perftest pt;
	char err[2048];
	double lrate;
	int ret;

	if (r->pp) {
		for (uint32_t i = 0; i < o->clients; i++) {
			r->lw[i].msg = sz;
			r->lw[i].seconds = o->seconds;
		}
		lrate = bench_run_rate(r->lw, sizeof(r->lw[0]), o->clients, push_main);
		if (lrate < 0)
			fprintf(stderr, "rdps bench push: limit stream: %s\n", rdps_strerror((int)lrate));
		return lrate;
	}
	if (r->ofi) {
		struct bench_fipp f;

		if (!r->fo.prov || r->limit_failed)
			return NAN;
		/* The messages that carry the push are at most this big. */
		rdps_transport_find(o->transport)->query(o->clients, 1, &ti);
		if (msg > ti.push_msg_bytes)
			msg = (uint32_t)ti.push_msg_bytes;
		r->fo.port++;
		ret = bench_fi_pingpong(&r->fo, msg, &f, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench push: limit not measured: %s\n", err);
			r->limit_failed = true;
			return NAN;
		}
		bench_fipp_emit(&f, r->fo.prov, "push");
		r->limit_msg = msg;
		return f.bw_bytes_s / sz;
	}
	if (!r->po.dev || r->limit_failed)
		return NAN;
	/* The SENDs that carry the push are at most this big. */
	rdps_transport_find(o->transport)->query(o->clients, 1, &ti);
	if (msg > ti.push_msg_bytes)
		msg = (uint32_t)ti.push_msg_bytes;
	r->po.port++;
	ret = bench_perftest("ib_send_bw", &r->po, msg, &pt, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench push: limit not measured: %s\n", err);
		r->limit_failed = true;
		return NAN;
	}
	if (pt.bw_bytes_s > 0)
		return pt.bw_bytes_s / sz;
	fprintf(stderr, "rdps bench push: ib_send_bw moved no data at %u bytes; no limit for this "
		"row\n", msg);
	return NAN;
}

/* One configuration: every client pushes batches of n rows to table t for
 * --seconds, then the limit; one JSON line and one table row. */
static int push_one(struct push_run *r, struct bench_cluster *cl, struct rdps_client **clients,
		    uint32_t threads, int t, uint32_t n)
{
	const struct push_opts *o = &r->o;
	uint64_t rows0, rows1, cpu0, cpu1, pushes = 0, ns = 0;
	double secs, cpu_s, applied, per_core, ns_row, lrate;
	uint32_t seen = bench_cluster_threads(cl) / o->servers;
	const char *limit = r->verbs ? "ib_send_bw" : r->ofi ? "fi_pingpong" : "tcp_stream";
	struct bench_json j;
	int ret;

	ret = server_rows_pushed(clients[0], o->servers, &rows0);
	if (ret)
		goto stats_failed;
	cpu0 = bench_cluster_cpu_ns(cl);
	for (uint32_t i = 0; i < o->clients; i++) {
		r->w[i].c = clients[i];
		r->w[i].table = (uint32_t)t;
		r->w[i].n = n;
		r->w[i].dim = (uint32_t)o->dim;
		r->w[i].table_rows = o->table_rows;
		r->w[i].seconds = o->seconds;
	}
	ret = bench_run_workers(r->w, sizeof(r->w[0]), o->clients, push_main, &pushes, &ns);
	if (ret) {
		const char *why = rdps_strerror(ret);

		for (uint32_t i = 0; i < o->clients; i++)
			if (r->w[i].base.ret)
				why = rdps_client_errmsg(clients[i]);
		fprintf(stderr, "rdps bench push: push failed: %s\n", why);
		return ret;
	}
	cpu1 = bench_cluster_cpu_ns(cl);
	ret = server_rows_pushed(clients[0], o->servers, &rows1);
	if (ret)
		goto stats_failed;
	lrate = limit_rate(r, n);
	if (lrate < 0)
		return (int)lrate;
	secs = ns / 1e9;
	cpu_s = cpu1 > cpu0 ? (cpu1 - cpu0) / 1e9 : 0;
	applied = (double)(rows1 - rows0);
	per_core = cpu_s > 0 ? applied / cpu_s : 0;
	ns_row = per_core > 0 ? 1e9 / per_core : NAN;
	bench_json_begin(&j, "push");
	bench_json_str(&j, "transport", o->transport);
	if (r->ofi)
		bench_json_str(&j, "provider", bench_ofi_provider());
	bench_json_str(&j, "optimizer", rdps_optimizer_name(o->opts[t]));
	bench_json_int(&j, "servers", o->servers);
	bench_json_int(&j, "server_threads", threads);
	bench_json_int(&j, "server_threads_seen", seen);
	bench_json_int(&j, "clients", o->clients);
	bench_json_int(&j, "rows", n);
	bench_json_int(&j, "dim", o->dim);
	bench_json_num(&j, "seconds", secs);
	bench_json_num(&j, "pushes_per_s", pushes / secs);
	bench_json_num(&j, "rows_per_s", applied / secs);
	bench_json_num(&j, "gb_per_s", applied * o->dim * 4 / secs / 1e9);
	bench_json_int(&j, "server_rows_applied", rows1 - rows0);
	bench_json_num(&j, "server_cpu_s", cpu_s);
	bench_json_num(&j, "apply_rows_per_core_s", per_core);
	bench_json_num(&j, "apply_gb_per_core_s", per_core * o->dim * 4 / 1e9);
	bench_json_num(&j, "server_ns_per_row", ns_row);
	bench_json_str(&j, "limit", limit);
	bench_json_int(&j, "limit_msg_bytes", push_bytes(n, (uint32_t)o->dim));
	if (r->ofi)
		bench_json_int(&j, "limit_fi_pingpong_bytes", r->limit_msg);
	bench_json_num(&j, "limit_pushes_per_s", lrate);
	bench_json_num(&j, "limit_gb_per_s", lrate * n * o->dim * 4 / 1e9);
	bench_json_num(&j, "ratio", bench_ratio(pushes / secs, lrate));
	bench_json_end(&j);
	bench_table_row("%-12s %6u %3u/%-3u %10.0f %12.0f %8.3f | %12.0f %9.2f %12.0f %8.0f | %-10s %10.0f %8.3f %6.2f",
			rdps_optimizer_name(o->opts[t]), n, threads, seen, pushes / secs,
			applied / secs, applied * o->dim * 4 / secs / 1e9, applied, cpu_s, per_core,
			ns_row, limit, lrate, lrate * n * o->dim * 4 / 1e9,
			bench_ratio(pushes / secs, lrate));
	return 0;
stats_failed:
	fprintf(stderr, "rdps bench push: server stats: %s\n", rdps_client_errmsg(clients[0]));
	return ret;
}

/* A cluster whose servers run `threads` threads each, its clients, and
 * every optimizer x batch on it. */
static int push_cluster(struct push_run *r, uint16_t port, uint32_t threads)
{
	const struct push_opts *o = &r->o;
	struct rdps_client *clients[MAX_CLIENTS] = { NULL };
	struct bench_cluster_opts co;
	struct bench_cluster *cl = NULL;
	char err[1024];
	int ret;

	co = (struct bench_cluster_opts){ .transport = o->transport, .host = o->host, .port = port,
					  .num_servers = o->servers, .server_threads = threads,
					  .num_tables = (uint32_t)o->nopts };
	for (int i = 0; i < o->nopts; i++)
		co.tables[i] = (struct bench_table_spec){ .name = rdps_optimizer_name(o->opts[i]),
							  .rows = o->table_rows, .dim = (uint32_t)o->dim,
							  .optimizer = o->opts[i], .lr = 1e-3f };
	err[0] = 0;
	ret = bench_cluster_start(&co, &cl, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench push: %s\n", err[0] ? err : rdps_strerror(ret));
		return ret;
	}
	if (bench_cluster_threads(cl) < o->servers * threads)
		fprintf(stderr, "rdps bench push: %u server thread(s) asked, %u seen (the %s transport "
			"grants fewer)\n", o->servers * threads, bench_cluster_threads(cl), o->transport);
	for (uint32_t i = 0; i < o->clients; i++) {
		ret = bench_cluster_client(cl, i, o->clients, RDPS_READ_VALIDATED, &clients[i], err,
					   sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench push: client: %s\n", err);
			goto out;
		}
	}
	for (int t = 0; t < o->nopts && !ret; t++)
		for (int b = 0; b < o->nbatches && !ret; b++)
			ret = push_one(r, cl, clients, threads, t, (uint32_t)o->batches[b]);
out:
	for (uint32_t i = 0; i < o->clients; i++)
		rdps_client_destroy(clients[i]);
	bench_cluster_stop(cl);
	return ret;
}

int rdps_bench_push(int argc, char **argv)
{
	struct push_run *r;
	uint16_t port;
	int ret, rc = 1;

	r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "rdps bench push: out of memory\n");
		return 1;
	}
	ret = parse_opts(argc, argv, &r->o);
	if (ret >= 0) {
		free(r);
		return ret;
	}
	r->verbs = !strcmp(r->o.transport, "verbs");
	r->ofi = !strcmp(r->o.transport, "ofi");
	for (int i = 0; i < r->o.nbatches; i++)
		r->max_batch = r->o.batches[i] > r->max_batch ? r->o.batches[i] : r->max_batch;
	for (uint32_t i = 0; i < MAX_CLIENTS; i++)
		r->lw[i].fd = -1;
	for (uint32_t i = 0; i < r->o.clients; i++) {
		r->w[i].ids = bench_alloc(r->max_batch * sizeof(uint64_t));
		r->w[i].grads = bench_alloc(r->max_batch * r->o.dim * sizeof(float));
		if (!r->w[i].ids || !r->w[i].grads) {
			fprintf(stderr, "rdps bench push: out of memory\n");
			goto out;
		}
		for (uint64_t k = 0; k < r->max_batch * r->o.dim; k++)
			r->w[i].grads[k] = (float)((k % 17) - 8) * 1e-3f;
	}
	/* Each cluster on ports of its own (a given --port: the next ones). */
	port = bench_pick_port(r->o.port, r->o.servers * (unsigned)r->o.nthreads);
	if (limit_open(r, port))
		goto out;

	bench_table_title("push, %s, %u server(s), %u client(s), dim %llu (gradient payload GB/s; "
			  "thr: server threads asked/seen)", r->o.transport, r->o.servers,
			  r->o.clients, (unsigned long long)r->o.dim);
	bench_table_row("%-12s %6s %7s %10s %12s %8s | %12s %9s %12s %8s | %-10s %10s %8s %6s",
			"optimizer", "rows", "thr", "pushes/s", "rows/s", "GB/s", "srv applied",
			"srv cpu s", "rows/core-s", "ns/row", "limit", "pushes/s", "GB/s", "ratio");
	for (int i = 0; i < r->o.nthreads; i++) {
		ret = push_cluster(r, (uint16_t)(port + i * r->o.servers), (uint32_t)r->o.threads[i]);
		if (ret)
			goto out;
	}
	rc = 0;
out:
	for (uint32_t i = 0; i < MAX_CLIENTS; i++) {
		free(r->w[i].ids);
		free(r->w[i].grads);
		if (r->lw[i].fd >= 0)
			close(r->lw[i].fd);
		free(r->lw[i].buf);
	}
	bench_pingpong_stop(r->pp);
	free(r);
	return rc;
}
