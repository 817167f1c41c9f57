// SPDX-License-Identifier: MIT
/*
 * rdps bench pull: pull latency (p50/p99/p99.9) and throughput against the
 * limit of the same path, measured in the same run.
 *
 * Servers run in this process (one thread each, rdps_server_create +
 * rdps_server_run) over the real transport on --host; clients are
 * rdps_client handles in other threads. Limits:
 *   tcp    a raw TCP ping-pong (TCP_NODELAY, own server thread on --host)
 *          with the request and reply sizes of the rdps pull on the wire;
 *   verbs  perftest on the same RDMA device: ib_read_lat of the bytes one
 *          pull READs (one row's stride; n rows' strides for clustered ids,
 *          which rdps coalesces), and for random ids, which are n separate
 *          READs, ib_read_lat of one row plus (n-1) / ib_read_bw's message
 *          rate at the row size;
 *   ofi    fi_pingpong (libfabric-bin) on the same provider: one way of a
 *          message of the request's size (the ids message of a two-sided
 *          pull) plus one way of a message of the bytes the pull reads (n
 *          row strides), each half the mean round trip of a ping-pong of
 *          that size; libfabric's tools give means only, so the ratio is
 *          the mean over it (ratio_p50: the p50 over it).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/bench.h"

#define MAX_LIST 16
#define MAX_CLIENTS 32

struct pull_opts {
	const char *transport;
	const char *host;
	uint16_t port;
	uint32_t servers;
	uint64_t table_rows;
	uint64_t dims[MAX_LIST];
	int ndims;
	uint64_t batches[MAX_LIST];
	int nbatches;
	bool ids_random, ids_clustered;
	int modes[2];
	int nmodes;
	uint64_t max_iters;
	double seconds;
	uint64_t warmup;
	uint32_t clients;           /* the most of client_counts */
	uint64_t client_counts[MAX_LIST]; /* throughput runs: 1, then these */
	int ncounts;
	uint32_t server_threads;
	double tput_seconds;
	bool tput, limits;
	const char *cdf_path;
	const char *ib_dev;
	int gid_index;
	uint64_t perftest_iters;
	uint64_t limit_rounds;
	const char *ofi_provider;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench pull [options]\n"
"\n"
"Pull latency (p50/p99/p99.9) for batches of rows, dims, random and clustered\n"
"(consecutive) ids, and pull throughput with 1 client and each count of --clients,\n"
"each beside its limit measured in the same run and as a ratio (figure / limit).\n"
"Servers run in this process (--num_server_threads threads each) over the real\n"
"transport on --host.\n"
"Limits: tcp - a raw TCP ping-pong (TCP_NODELAY) of the same request and reply\n"
"sizes to --host, one server thread per connection; throughput: as many\n"
"connections as clients, all at once; verbs - ib_read_lat / ib_read_bw (perftest)\n"
"on the RDMA device that serves --host, for the bytes a pull reads; ofi -\n"
"fi_pingpong (libfabric-bin) on the same provider: one way of the request's\n"
"size plus one way of the bytes a pull reads (its mean: the ratio is the mean's);\n"
"throughput: n rows per that round trip, one client only.\n"
"\n"
"Output: one JSON object per measurement on stdout (bench \"pull\": latency,\n"
"\"pull_tput\": throughput), a human table on stderr.\n"
"\n"
"  --transport tcp|verbs|ofi  (default tcp)\n"
"  --ofi-provider NAME        the libfabric provider of --transport ofi (default:\n"
"                             efa, or FI_PROVIDER's; e.g. 'tcp;ofi_rxm'), also\n"
"                             fi_pingpong's -p\n"
"  --host ADDR                server address (default 127.0.0.1; in the soft-RoCE\n"
"                             guest the rxe address, 10.99.0.1)\n"
"  --port N                   base port (default: derived from the pid)\n"
"  --servers N                servers (default 1)\n"
"  --num_server_threads N     threads per server (default 1)\n"
"  --table-rows N             rows of each table (default 100k; k/M suffixes)\n"
"  --dims LIST                row widths in floats (default 100,400)\n"
"  --batches LIST             rows per pull (default 1,16,256,4096)\n"
"  --ids random|clustered|both   (default both)\n"
"  --read-consistency validated|relaxed|both   verbs read mode(s) (default validated)\n"
"  --iters N                  most samples per configuration (default 20000)\n"
"  --seconds S                time per latency configuration (default 1)\n"
"  --warmup N                 unmeasured pulls first (default 50)\n"
"  --clients LIST             client counts of the throughput runs, after the\n"
"                             one-client run (default 2); each its own rdps\n"
"                             clients (threads) and as many limit connections\n"
"  --tput-seconds S           time per throughput configuration (default 1)\n"
"  --no-tput                  latency only\n"
"  --no-limit                 do not measure the limits\n"
"  --cdf FILE                 append latency CDFs (label quantile us) for plots\n"
"  --ib-dev NAME, --gid-index N   perftest's -d / -x (default: the device and\n"
"                             RoCE v2 GID of --host)\n"
"  --perftest-iters N, --limit-iters N   most perftest or fi_pingpong iterations\n"
"                             per size (default 1000)\n"
"  --limit-rounds N           single-row latency: N rounds of an rdps sample\n"
"                             then the limit's (TCP: ping-pong samples, pooled\n"
"                             as rdps's; verbs: an ib_read_lat run, ofi: a\n"
"                             fi_pingpong run, median of the rounds), default\n"
"                             3: this machine's speed\n"
"                             drifts within seconds, a TCG guest's more\n"
"  -h, --help                 this text\n");
}

/* ---------------------------------------------------------------------- */
/* Limits, measured once per size and reused                               */

#define MAX_LIMITS 64
#define MAX_LIMIT_ROUNDS 16

struct limit_cache {
	uint32_t bytes[MAX_LIMITS];
	struct bench_perftest lat[MAX_LIMITS], bw[MAX_LIMITS];
	bool have_lat[MAX_LIMITS], have_bw[MAX_LIMITS];
	int n;
	struct bench_perftest_opts po;
	char dev[64];
	uint16_t next_port;
	bool failed; /* perftest unusable: stop trying */
	bool ofi;                   /* fi_pingpong instead of perftest */
	struct bench_fipp_opts fo;
};

/* perftest's figures for one size, measured on first use; fresh: measure
 * again now (single-row limits: a TCG guest's speed drifts over minutes, so
 * they are taken right after the figure they stand beside, as the TCP
 * ping-pong is). */
static int perftest_cached(struct limit_cache *lc, const struct pull_opts *o, bool lat,
			   uint32_t bytes, bool fresh, const struct bench_perftest **out)
{
	char err[2048];
	int i, ret;

	for (i = 0; i < lc->n; i++)
		if (lc->bytes[i] == bytes)
			break;
	if (i == lc->n) {
		if (lc->n == MAX_LIMITS)
			return -ENOSPC;
		lc->bytes[lc->n++] = bytes;
	}
	if (!fresh && (lat ? lc->have_lat[i] : lc->have_bw[i])) {
		*out = lat ? &lc->lat[i] : &lc->bw[i];
		return 0;
	}
	if (lc->failed)
		return -EIO;
	if (lc->ofi) {
		struct bench_fipp f;

		/* At least 20 round trips, at most 64 MiB each way. */
		lc->fo.iters = (unsigned)(((64ull << 20) / bytes) < o->perftest_iters ?
					  (64ull << 20) / bytes : o->perftest_iters);
		if (lc->fo.iters < 20)
			lc->fo.iters = 20;
		lc->fo.port = lc->next_port++;
		ret = bench_fi_pingpong(&lc->fo, bytes, &f, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench pull: limit not measured: %s\n", err);
			lc->failed = true;
			return ret;
		}
		bench_fipp_emit(&f, lc->fo.prov, "pull");
		/* One measurement serves both: a mean one way, and its rate. */
		lc->lat[i] = lc->bw[i] = (struct bench_perftest){
			.typical_us = f.oneway_us, .avg_us = f.oneway_us, .p99_us = NAN,
			.p999_us = NAN, .bw_bytes_s = f.bw_bytes_s, .msg_rate = 1e6 / f.oneway_us };
		lc->have_lat[i] = lc->have_bw[i] = true;
		*out = lat ? &lc->lat[i] : &lc->bw[i];
		return 0;
	}
	/* Large messages: fewer iterations (rxe under TCG moves ~100s MB/s). */
	lc->po.iters = (unsigned)(((256ull << 20) / bytes) < o->perftest_iters ?
				  (256ull << 20) / bytes : o->perftest_iters);
	if (lc->po.iters < 50)
		lc->po.iters = 50;
	lc->po.seconds = 2;
	lc->po.port = lc->next_port++;
	ret = bench_perftest(lat ? "ib_read_lat" : "ib_read_bw", &lc->po, bytes,
			     lat ? &lc->lat[i] : &lc->bw[i], err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench pull: limit not measured: %s\n", err);
		lc->failed = true;
		return ret;
	}
	if (lat)
		lc->have_lat[i] = true;
	else
		lc->have_bw[i] = true;
	*out = lat ? &lc->lat[i] : &lc->bw[i];
	return 0;
}

/* The ids message a two-sided ofi pull of n rows sends (struct
 * ofi_msg_hdr, struct rdps_wire_rows, the ids). */
static uint32_t ofi_req_bytes(uint32_t n)
{
	return 40 + 8 + 8 * n;
}

/* Verbs limit of one pull of n rows (us): p50, p99, p99.9; ofi: the mean
 * round trip (fi_pingpong's one way at the request's size plus one way at
 * the bytes read, measured again for a single row), then NaN, NaN. */
static int verbs_limit(struct limit_cache *lc, const struct pull_opts *o, uint32_t n,
		       uint32_t dim, bool clustered, double lim[3], const char **kind)
{
	uint32_t stride = (uint32_t)rdps_row_stride(dim);
	const struct bench_perftest *l, *bw;
	double extra = 0;
	int ret;

	if (lc->ofi) {
		const struct bench_perftest *rq, *rp;

		*kind = "fi_pingpong";
		ret = perftest_cached(lc, o, true, ofi_req_bytes(n), false, &rq);
		if (!ret)
			ret = perftest_cached(lc, o, true, n * stride, n == 1, &rp);
		if (ret)
			return ret;
		lim[0] = rq->avg_us + rp->avg_us;
		lim[1] = lim[2] = NAN;
		return 0;
	}

	if (clustered || n == 1) {
		*kind = "ib_read_lat";
		ret = perftest_cached(lc, o, true, n * stride, n == 1, &l);
	} else {
		*kind = "ib_read_lat+(n-1)/ib_read_bw_rate";
		ret = perftest_cached(lc, o, true, stride, false, &l);
		if (!ret)
			ret = perftest_cached(lc, o, false, stride, false, &bw);
		if (!ret)
			extra = (n - 1) / bw->msg_rate * 1e6;
	}
	if (ret)
		return ret;
	lim[0] = l->typical_us + extra;
	lim[1] = l->p99_us + extra;
	lim[2] = l->p999_us + extra;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Latency                                                                 */

static uint32_t req_bytes(uint32_t n)
{
	return 16 + 8 + 8 * n; /* wire header, rows header, ids */
}

static uint32_t reply_bytes(uint32_t n, uint32_t dim)
{
	return 16 + 4 * n * dim; /* wire header, rows */
}

/* Pull latency samples for seconds; append: add to lat's samples (no reset,
 * no warm-up). */
static int lat_rdps(struct rdps_client *c, uint32_t table, uint64_t table_rows, uint32_t n,
		    bool clustered, const struct pull_opts *o, double seconds, bool append,
		    uint64_t *ids, float *out, struct bench_lat *lat)
{
	uint64_t seed = (0x9e3779b97f4a7c15ull ^ n) + (append ? lat->n : 0), deadline;
	int ret;

	for (uint64_t i = 0; !append && i < o->warmup; i++) {
		bench_fill_ids(ids, n, table_rows, clustered, &seed);
		ret = rdps_client_pull(c, table, ids, n, out);
		if (ret)
			return ret;
	}
	if (!append)
		bench_lat_reset(lat);
	deadline = rdps_now_ns() + (uint64_t)(seconds * 1e9);
	while (!bench_lat_full(lat)) {
		uint64_t t0, t1;

		bench_fill_ids(ids, n, table_rows, clustered, &seed);
		t0 = rdps_now_ns();
		ret = rdps_client_pull(c, table, ids, n, out);
		t1 = rdps_now_ns();
		if (ret)
			return ret;
		bench_lat_add(lat, t1 - t0);
		if (t1 > deadline && lat->n >= 10)
			break;
	}
	return 0;
}

/* Ping-pong latency samples for seconds; append as lat_rdps. */
static int lat_pingpong(int fd, void *buf, uint32_t rq, uint32_t rp, const struct pull_opts *o,
			double seconds, bool append, struct bench_lat *lat)
{
	uint64_t deadline;
	int ret;

	for (uint64_t i = 0; !append && i < o->warmup; i++)
		if ((ret = bench_pingpong_once(fd, buf, rq, rp)))
			return ret;
	if (!append)
		bench_lat_reset(lat);
	deadline = rdps_now_ns() + (uint64_t)(seconds * 1e9);
	while (!bench_lat_full(lat)) {
		uint64_t t0 = rdps_now_ns(), t1;

		ret = bench_pingpong_once(fd, buf, rq, rp);
		t1 = rdps_now_ns();
		if (ret)
			return ret;
		bench_lat_add(lat, t1 - t0);
		if (t1 > deadline && lat->n >= 10)
			break;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Throughput: every client in its own thread, started together            */

struct tput_worker {
	struct bench_worker base; /* first: run by bench_run_workers */
	struct rdps_client *c; /* rdps client, or */
	int fd;                /* ping-pong socket */
	void *buf;             /* ping-pong buffer */
	uint64_t *ids;
	float *out;
	uint32_t table, n;
	uint64_t table_rows;
	uint32_t rq, rp;
	double seconds;
};

static void *tput_main(void *arg)
{
	struct tput_worker *w = arg;
	uint64_t seed = (uint64_t)(uintptr_t)w * 0x9e3779b97f4a7c15ull, t0, now, deadline;

	if (!bench_worker_wait(&w->base))
		return NULL;
	t0 = now = rdps_now_ns();
	deadline = t0 + (uint64_t)(w->seconds * 1e9);
	while (now < deadline) {
		if (w->c) {
			bench_fill_ids(w->ids, w->n, w->table_rows, false, &seed);
			w->base.ret = rdps_client_pull(w->c, w->table, w->ids, w->n, w->out);
		} else {
			w->base.ret = bench_pingpong_once(w->fd, w->buf, w->rq, w->rp);
		}
		if (w->base.ret)
			break;
		w->base.count += w->n;
		now = rdps_now_ns();
	}
	w->base.ns = now - t0;
	return NULL;
}

/* Runs k workers; returns rows/s or a negative errno. */
static double run_tput(struct tput_worker *w, uint32_t k)
{
	return bench_run_rate(w, sizeof(*w), k, tput_main);
}

/* ---------------------------------------------------------------------- */

static int parse_opts(int argc, char **argv, struct pull_opts *o)
{
	enum { O_TRANSPORT = 256, O_HOST, O_PORT, O_SERVERS, O_ROWS, O_DIMS, O_BATCHES, O_IDS,
	       O_CONS, O_ITERS, O_SECONDS, O_WARMUP, O_CLIENTS, O_TSECONDS, O_NOTPUT,
	       O_NOLIMIT, O_CDF, O_IBDEV, O_GID, O_PTITERS, O_LROUNDS, O_THREADS, O_OFIPROV };
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "servers", required_argument, NULL, O_SERVERS },
		{ "num_server_threads", required_argument, NULL, O_THREADS },
		{ "table-rows", required_argument, NULL, O_ROWS },
		{ "dims", required_argument, NULL, O_DIMS },
		{ "batches", required_argument, NULL, O_BATCHES },
		{ "ids", required_argument, NULL, O_IDS },
		{ "read-consistency", required_argument, NULL, O_CONS },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "clients", required_argument, NULL, O_CLIENTS },
		{ "tput-seconds", required_argument, NULL, O_TSECONDS },
		{ "no-tput", no_argument, NULL, O_NOTPUT },
		{ "no-limit", no_argument, NULL, O_NOLIMIT },
		{ "cdf", required_argument, NULL, O_CDF },
		{ "ib-dev", required_argument, NULL, O_IBDEV },
		{ "gid-index", required_argument, NULL, O_GID },
		{ "perftest-iters", required_argument, NULL, O_PTITERS },
		{ "limit-iters", required_argument, NULL, O_PTITERS },
		{ "ofi-provider", required_argument, NULL, O_OFIPROV },
		{ "limit-rounds", required_argument, NULL, O_LROUNDS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int opt, li = 0;

	*o = (struct pull_opts){
		.transport = "tcp", .host = "127.0.0.1", .servers = 1, .table_rows = 100000,
		.dims = { 100, 400 }, .ndims = 2, .batches = { 1, 16, 256, 4096 }, .nbatches = 4,
		.ids_random = true, .ids_clustered = true, .modes = { RDPS_READ_VALIDATED },
		.nmodes = 1, .max_iters = 20000, .seconds = 1, .warmup = 50, .clients = 2,
		.client_counts = { 2 }, .ncounts = 1, .server_threads = 1,
		.tput_seconds = 1, .tput = true, .limits = true, .gid_index = -2,
		.perftest_iters = 1000,
		.limit_rounds = 3,
	};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, &li)) != -1) {
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
		case O_ROWS:
			if (bench_parse_u64(optarg, 1, 1ull << 32, &o->table_rows))
				goto bad;
			break;
		case O_DIMS:
			if ((o->ndims = bench_parse_list(optarg, o->dims, MAX_LIST)) < 0)
				goto bad;
			for (int i = 0; i < o->ndims; i++)
				if (o->dims[i] > 4096)
					goto bad;
			break;
		case O_BATCHES:
			if ((o->nbatches = bench_parse_list(optarg, o->batches, MAX_LIST)) < 0)
				goto bad;
			for (int i = 0; i < o->nbatches; i++)
				if (o->batches[i] > 65536)
					goto bad;
			break;
		case O_IDS:
			o->ids_random = !strcmp(optarg, "random") || !strcmp(optarg, "both");
			o->ids_clustered = !strcmp(optarg, "clustered") || !strcmp(optarg, "both");
			if (!o->ids_random && !o->ids_clustered)
				goto bad;
			break;
		case O_CONS:
			o->nmodes = 0;
			if (!strcmp(optarg, "validated") || !strcmp(optarg, "both"))
				o->modes[o->nmodes++] = RDPS_READ_VALIDATED;
			if (!strcmp(optarg, "relaxed") || !strcmp(optarg, "both"))
				o->modes[o->nmodes++] = RDPS_READ_RELAXED;
			if (!o->nmodes)
				goto bad;
			break;
		case O_ITERS:
			if (bench_parse_u64(optarg, 10, 100000000, &o->max_iters))
				goto bad;
			break;
		case O_SECONDS:
			if (bench_parse_double(optarg, 0.001, 3600, &o->seconds))
				goto bad;
			break;
		case O_WARMUP:
			if (bench_parse_u64(optarg, 0, 1000000, &o->warmup))
				goto bad;
			break;
		case O_CLIENTS:
			if ((o->ncounts = bench_parse_list(optarg, o->client_counts, MAX_LIST)) < 0)
				goto bad;
			o->clients = 1;
			for (int i = 0; i < o->ncounts; i++) {
				if (o->client_counts[i] > MAX_CLIENTS)
					goto bad;
				if (o->client_counts[i] > o->clients)
					o->clients = (uint32_t)o->client_counts[i];
			}
			break;
		case O_THREADS:
			if (bench_parse_u64(optarg, 1, 64, &v))
				goto bad;
			o->server_threads = (uint32_t)v;
			break;
		case O_TSECONDS:
			if (bench_parse_double(optarg, 0.001, 3600, &o->tput_seconds))
				goto bad;
			break;
		case O_NOTPUT: o->tput = false; break;
		case O_NOLIMIT: o->limits = false; break;
		case O_CDF: o->cdf_path = optarg; break;
		case O_IBDEV: o->ib_dev = optarg; break;
		case O_GID:
			if (bench_parse_u64(optarg, 0, 65535, &v))
				goto bad;
			o->gid_index = (int)v;
			break;
		case O_LROUNDS:
			if (bench_parse_u64(optarg, 1, MAX_LIMIT_ROUNDS, &o->limit_rounds))
				goto bad;
			break;
		case O_PTITERS:
			if (bench_parse_u64(optarg, 10, 1000000, &o->perftest_iters))
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
		fprintf(stderr, "rdps bench pull: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	/* The ofi backend reads it, before libfabric's first call. */
	if (o->ofi_provider)
		setenv("RDPS_OFI_PROVIDER", o->ofi_provider, 1);
	return -1; /* go on */
bad:
	fprintf(stderr, "rdps bench pull: bad value '%s' for --%s (see --help)\n", optarg,
		opts[li].name);
	return 2;
}

static const char *mode_name(int m)
{
	return m == RDPS_READ_RELAXED ? "relaxed" : "validated";
}

int rdps_bench_pull(int argc, char **argv)
{
	struct pull_opts o;
	struct bench_cluster_opts co;
	struct bench_cluster *cl = NULL;
	struct bench_pingpong *pp = NULL;
	struct rdps_client *clients[2][MAX_CLIENTS] = { { NULL } };
	struct tput_worker workers[MAX_CLIENTS];
	struct limit_cache *lc = NULL;
	struct bench_lat lat = { 0 }, plat = { 0 };
	uint64_t max_batch = 0, max_dim = 0;
	uint64_t *ids[MAX_CLIENTS] = { NULL };
	float *out[MAX_CLIENTS] = { NULL };
	void *ppbuf[MAX_CLIENTS] = { NULL };
	int ppfd[MAX_CLIENTS];
	FILE *cdf = NULL;
	bool verbs, ofi;
	char err[2048], label[128];
	int ret, rc = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret >= 0)
		return ret;
	verbs = !strcmp(o.transport, "verbs");
	ofi = !strcmp(o.transport, "ofi");
	for (int i = 0; i < MAX_CLIENTS; i++)
		ppfd[i] = -1;
	for (int i = 0; i < o.nbatches; i++)
		max_batch = o.batches[i] > max_batch ? o.batches[i] : max_batch;
	for (int i = 0; i < o.ndims; i++)
		max_dim = o.dims[i] > max_dim ? o.dims[i] : max_dim;
	if (max_batch > o.table_rows) {
		fprintf(stderr, "rdps bench pull: --table-rows %llu is below the largest batch %llu\n",
			(unsigned long long)o.table_rows, (unsigned long long)max_batch);
		return 2;
	}

	co = (struct bench_cluster_opts){ .transport = o.transport, .host = o.host,
					  .port = bench_pick_port(o.port, o.servers), .num_servers = o.servers,
					  .server_threads = o.server_threads, .num_tables = (uint32_t)o.ndims };
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
		fprintf(stderr, "rdps bench pull: %s\n", err[0] ? err : rdps_strerror(ret));
		return 1;
	}
	/* Clients of both read modes are one job: ids 0..C-1 and C..2C-1. */
	for (int m = 0; m < o.nmodes; m++)
		for (uint32_t i = 0; i < o.clients; i++) {
			ret = bench_cluster_client(cl, (uint32_t)m * o.clients + i,
						   (uint32_t)o.nmodes * o.clients, o.modes[m],
						   &clients[m][i], err, sizeof(err));
			if (ret) {
				fprintf(stderr, "rdps bench pull: client: %s\n", err);
				goto out;
			}
		}
	for (uint32_t i = 0; i < o.clients; i++) {
		ids[i] = bench_alloc(max_batch * sizeof(uint64_t));
		out[i] = bench_alloc(max_batch * max_dim * sizeof(float));
		if (!ids[i] || !out[i])
			goto oom;
	}
	if (bench_lat_init(&lat, o.max_iters) || bench_lat_init(&plat, o.max_iters))
		goto oom;
	if (o.cdf_path && !(cdf = fopen(o.cdf_path, "a"))) {
		fprintf(stderr, "rdps bench pull: cannot open %s: %s\n", o.cdf_path, strerror(errno));
		goto out;
	}
	if (o.limits && !verbs && !ofi) {
		ret = bench_pingpong_start(o.host, &pp, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench pull: %s\n", err);
			goto out;
		}
		for (uint32_t i = 0; i < o.clients; i++) {
			ret = bench_pingpong_open(pp, reply_bytes((uint32_t)max_batch, (uint32_t)max_dim) +
						  req_bytes((uint32_t)max_batch), &ppfd[i], &ppbuf[i]);
			if (ret) {
				fprintf(stderr, "rdps bench pull: ping-pong connection: %s\n",
					rdps_strerror(ret));
				goto out;
			}
		}
	}
	if (o.limits && verbs) {
		lc = calloc(1, sizeof(*lc));
		if (!lc)
			goto oom;
		ret = bench_perftest_setup(&lc->po, o.host, o.ib_dev, o.gid_index, lc->dev,
					   sizeof(lc->dev), err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench pull: %s\n", err);
			goto out;
		}
		lc->next_port = (uint16_t)(co.port + 100);
		fprintf(stderr, "rdps bench pull: limits from perftest on %s (gid index %d)\n",
			lc->po.dev, lc->po.gid_index);
	}
	if (o.limits && ofi) {
		lc = calloc(1, sizeof(*lc));
		if (!lc)
			goto oom;
		lc->ofi = true;
		lc->fo = (struct bench_fipp_opts){ .prov = bench_ofi_provider(), .host = o.host,
						   .timeout_s = 120 };
		lc->next_port = (uint16_t)(co.port + 100);
		fprintf(stderr, "rdps bench pull: limits from fi_pingpong -p '%s' -e rdm\n",
			lc->fo.prov);
	}

	if (bench_cluster_threads(cl) < o.servers * o.server_threads)
		fprintf(stderr, "rdps bench pull: %u server thread(s) asked, %u seen (the %s transport "
			"grants fewer)\n", o.servers * o.server_threads, bench_cluster_threads(cl),
			o.transport);
	bench_table_title("pull latency, %s, %u server(s) of %u thread(s), table rows %llu (us; ratio = %s)",
			  o.transport, o.servers, o.server_threads, (unsigned long long)o.table_rows,
			  ofi ? "mean / fi_pingpong's mean round trip, shown as its p50" :
				"p50 / limit p50");
	bench_table_row("%-9s %-9s %5s %4s %-9s %7s %9s %9s %9s | %-10s %9s %9s %9s | %6s",
			"transport", "reads", "rows", "dim", "ids", "samples", "p50", "p99", "p99.9",
			"limit", "p50", "p99", "p99.9", "ratio");
	for (int m = 0; m < o.nmodes; m++)
		for (int d = 0; d < o.ndims; d++)
			for (int b = 0; b < o.nbatches; b++)
				for (int k = 0; k < 2; k++) {
					uint32_t n = (uint32_t)o.batches[b], dim = (uint32_t)o.dims[d];
					bool clustered = k == 1;
					double lim[3] = { NAN, NAN, NAN };
					const char *kind = verbs ? "ib_read_lat" : ofi ? "fi_pingpong" :
							   "tcp_pingpong";
					struct bench_pct pc;
					struct bench_json j;

					if ((clustered && !o.ids_clustered) || (!clustered && !o.ids_random))
						continue;
					/* Single rows: rounds of rdps then the limit (ping-pong
					 * samples, or an ib_read_lat run), so both span the same
					 * stretch of a machine whose speed drifts. */
					uint64_t rounds = n == 1 && (lc || pp) ? o.limit_rounds : 1;
					double rl[3][MAX_LIMIT_ROUNDS];
					uint64_t got = 0;

					for (uint64_t r = 0; r < rounds; r++) {
						double l3[3];

						ret = lat_rdps(clients[m][0], (uint32_t)d, o.table_rows, n,
							       clustered, &o, o.seconds / (double)rounds, r > 0,
							       ids[0], out[0], &lat);
						if (ret) {
							fprintf(stderr, "rdps bench pull: pull failed: %s\n",
								rdps_client_errmsg(clients[m][0]));
							goto out;
						}
						if (pp) {
							ret = lat_pingpong(ppfd[0], ppbuf[0], req_bytes(n),
									   reply_bytes(n, dim), &o,
									   o.seconds / (double)rounds, r > 0,
									   &plat);
							if (ret) {
								fprintf(stderr, "rdps bench pull: ping-pong: %s\n",
									rdps_strerror(ret));
								goto out;
							}
						} else if (lc && n == 1 &&
							   !verbs_limit(lc, &o, n, dim, clustered, l3, &kind) &&
							   isfinite(l3[0]) &&
							   (ofi || (isfinite(l3[1]) && isfinite(l3[2])))) {
							/* (a perftest run that printed no figure
							 * is left out of the median) */
							for (int q = 0; q < 3; q++)
								rl[q][got] = l3[q];
							got++;
						}
					}
					/* (fi_pingpong: a mean only, no tail) */
					for (int q = 0; got && q < (ofi ? 1 : 3); q++)
						lim[q] = bench_median(rl[q], got); /* sorts rl[q] */
					bench_lat_summary(&lat, &pc);
					snprintf(label, sizeof(label), "rdps-%s-%s-n%u-d%u-%s", o.transport,
						 mode_name(o.modes[m]), n, dim, clustered ? "clustered" : "random");
					bench_lat_write_cdf(&lat, cdf, label);
					if (pp) {
						struct bench_pct pl;

						bench_lat_summary(&plat, &pl);
						lim[0] = pl.p50_us;
						lim[1] = pl.p99_us;
						lim[2] = pl.p999_us;
						snprintf(label, sizeof(label), "tcp_pingpong-n%u-d%u-%s", n, dim,
							 clustered ? "clustered" : "random");
						bench_lat_write_cdf(&plat, cdf, label);
					} else if (lc && n > 1) {
						verbs_limit(lc, &o, n, dim, clustered, lim, &kind);
					}
					bench_json_begin(&j, "pull");
					bench_json_str(&j, "transport", o.transport);
					if (ofi)
						bench_json_str(&j, "provider", bench_ofi_provider());
					bench_json_str(&j, "read_consistency", mode_name(o.modes[m]));
					bench_json_int(&j, "servers", o.servers);
					bench_json_int(&j, "server_threads", o.server_threads);
					bench_json_int(&j, "rows", n);
					bench_json_int(&j, "dim", dim);
					bench_json_str(&j, "ids", clustered ? "clustered" : "random");
					bench_json_int(&j, "samples", pc.n);
					bench_json_num(&j, "p50_us", pc.p50_us);
					bench_json_num(&j, "p99_us", pc.p99_us);
					bench_json_num(&j, "p999_us", pc.p999_us);
					bench_json_num(&j, "mean_us", pc.mean_us);
					bench_json_str(&j, "limit", kind);
					if (got) {
						bench_json_int(&j, "limit_rounds", got);
						bench_json_num(&j, "limit_p50_min_us", rl[0][0]);
						bench_json_num(&j, "limit_p50_max_us", rl[0][got - 1]);
					} else if (pp && rounds > 1) {
						bench_json_int(&j, "limit_rounds", rounds);
					}
					bench_json_num(&j, "limit_p50_us", lim[0]);
					bench_json_num(&j, "limit_p99_us", lim[1]);
					bench_json_num(&j, "limit_p999_us", lim[2]);
					if (ofi) {
						/* fi_pingpong's figure is a mean round trip. */
						bench_json_str(&j, "limit_stat", "mean");
						bench_json_int(&j, "limit_req_bytes", ofi_req_bytes(n));
						bench_json_int(&j, "limit_reply_bytes",
							       n * (uint32_t)rdps_row_stride(dim));
						bench_json_num(&j, "ratio", bench_ratio(pc.mean_us, lim[0]));
						bench_json_num(&j, "ratio_p50", bench_ratio(pc.p50_us, lim[0]));
					} else {
						bench_json_num(&j, "ratio", bench_ratio(pc.p50_us, lim[0]));
					}
					bench_json_num(&j, "ratio_p99", bench_ratio(pc.p99_us, lim[1]));
					bench_json_end(&j);
					bench_table_row("%-9s %-9s %5u %4u %-9s %7zu %9.1f %9.1f %9.1f | %-10.10s %9.1f %9.1f %9.1f | %6.2f",
							o.transport, mode_name(o.modes[m]), n, dim,
							clustered ? "clustered" : "random", pc.n, pc.p50_us,
							pc.p99_us, pc.p999_us, kind, lim[0], lim[1], lim[2],
							bench_ratio(ofi ? pc.mean_us : pc.p50_us, lim[0]));
				}

	if (o.tput) {
		bench_table_title("pull throughput, %s, random ids (payload GB/s; ratio = rows/s / limit; %s)",
				  o.transport, ofi ? "ofi limit: n rows per fi_pingpong round trip, one "
				  "client only" : "tcp limit: as many ping-pong connections as clients, at once");
		bench_table_row("%-9s %-9s %5s %4s %7s %12s %8s | %12s %8s | %6s", "transport", "reads",
				"rows", "dim", "clients", "rows/s", "GB/s", "limit rows/s", "GB/s",
				"ratio");
		for (int m = 0; m < o.nmodes; m++)
			for (int d = 0; d < o.ndims; d++)
				for (int b = 0; b < o.nbatches; b++)
					for (int ki = 0; ki <= o.ncounts; ki++) {
						uint32_t k = ki ? (uint32_t)o.client_counts[ki - 1] : 1;
						uint32_t n = (uint32_t)o.batches[b], dim = (uint32_t)o.dims[d];
						double rate, lrate = NAN, lim[3];
						const char *kind = verbs ? "lat_limit_or_ib_read_bw" :
								   ofi ? "fi_pingpong" : "tcp_pingpong";
						struct bench_json j;

						if (ki && k == 1)
							continue; /* measured first */

						for (uint32_t i = 0; i < k; i++)
							workers[i] = (struct tput_worker){
								.c = clients[m][i], .ids = ids[i], .out = out[i],
								.table = (uint32_t)d, .n = n,
								.table_rows = o.table_rows,
								.seconds = o.tput_seconds, .fd = -1 };
						rate = run_tput(workers, k);
						if (rate < 0) {
							fprintf(stderr, "rdps bench pull: throughput run failed: %s\n",
								rdps_strerror((int)rate));
							goto out;
						}
						if (pp) {
							for (uint32_t i = 0; i < k; i++)
								workers[i] = (struct tput_worker){
									.fd = ppfd[i], .buf = ppbuf[i], .n = n,
									.rq = req_bytes(n), .rp = reply_bytes(n, dim),
									.seconds = o.tput_seconds };
							lrate = run_tput(workers, k);
							if (lrate < 0) {
								fprintf(stderr, "rdps bench pull: ping-pong throughput failed: %s\n",
									rdps_strerror((int)lrate));
								goto out;
							}
						} else if (lc && ofi) {
							/* One client: n rows per round trip. More:
							 * not measured (fi_pingpong runs one pair). */
							if (k == 1 &&
							    !verbs_limit(lc, &o, n, dim, false, lim, &kind))
								lrate = n / (lim[0] / 1e6);
							else if (k > 1)
								kind = "fi_pingpong_1_client_only";
						} else if (lc && !verbs_limit(lc, &o, n, dim, false, lim, &kind)) {
							const struct bench_perftest *bw;

							/* Latency-bound per client, at most the
							 * device's READ rate at the row size. */
							lrate = k * n / (lim[0] / 1e6);
							kind = "lat_limit_or_ib_read_bw";
							if (!perftest_cached(lc, &o, false,
									     (uint32_t)rdps_row_stride(dim), false, &bw) &&
							    bw->msg_rate < lrate)
								lrate = bw->msg_rate;
						}
						bench_json_begin(&j, "pull_tput");
						bench_json_str(&j, "transport", o.transport);
						if (ofi)
							bench_json_str(&j, "provider", bench_ofi_provider());
						bench_json_str(&j, "read_consistency", mode_name(o.modes[m]));
						bench_json_int(&j, "servers", o.servers);
						bench_json_int(&j, "server_threads", o.server_threads);
						bench_json_int(&j, "rows", n);
						bench_json_int(&j, "dim", dim);
						bench_json_str(&j, "ids", "random");
						bench_json_int(&j, "clients", k);
						bench_json_num(&j, "rows_per_s", rate);
						bench_json_num(&j, "gb_per_s", rate * dim * 4 / 1e9);
						bench_json_str(&j, "limit", kind);
						bench_json_int(&j, "limit_connections", pp ? k : 0);
						bench_json_num(&j, "limit_rows_per_s", lrate);
						bench_json_num(&j, "limit_gb_per_s", lrate * dim * 4 / 1e9);
						bench_json_num(&j, "ratio", bench_ratio(rate, lrate));
						bench_json_end(&j);
						bench_table_row("%-9s %-9s %5u %4u %7u %12.0f %8.3f | %12.0f %8.3f | %6.2f",
								o.transport, mode_name(o.modes[m]), n, dim, k, rate,
								rate * dim * 4 / 1e9, lrate, lrate * dim * 4 / 1e9,
								bench_ratio(rate, lrate));
					}
	}
	if (verbs) {
		uint64_t rereads = 0;

		for (int m = 0; m < o.nmodes; m++)
			for (uint32_t i = 0; i < o.clients; i++)
				rereads += rdps_client_rereads(clients[m][i]);
		fprintf(stderr, "rdps bench pull: rows re-read after a torn read: %llu\n",
			(unsigned long long)rereads);
	}
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "rdps bench pull: out of memory\n");
out:
	if (cdf)
		fclose(cdf);
	for (uint32_t i = 0; i < MAX_CLIENTS; i++) {
		if (ppfd[i] >= 0)
			close(ppfd[i]);
		free(ppbuf[i]);
		free(ids[i]);
		free(out[i]);
	}
	bench_pingpong_stop(pp);
	for (int m = 0; m < 2; m++)
		for (uint32_t i = 0; i < MAX_CLIENTS; i++)
			rdps_client_destroy(clients[m][i]);
	bench_cluster_stop(cl);
	bench_lat_free(&lat);
	bench_lat_free(&plat);
	free(lc);
	return rc;
}
