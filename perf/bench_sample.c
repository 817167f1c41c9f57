// SPDX-License-Identifier: MIT
/*
 * rdps bench sample: sampled edges/s and seeds/s of neighbour sampling
 * (rdps/graph.h) both ways, each beside the limit of its path measured in
 * the same run (issue 19).
 *
 * The graph is a partition of `rdps dataset wordnet-nodes` (built in
 * --workdir, or --graph PDIR), one in-process server per part (as `rdps
 * server --graph`) over the real transport on --host, and one client:
 *   rpc   RDPS_SAMPLE_RPC: one request per server holding seeds, its CPU
 *         picks; limit over tcp: a raw TCP ping-pong (TCP_NODELAY) of the
 *         same request and reply bytes, a connection per server, each
 *         server's request out at once as the client asks them; over the other transports, a pull of the seeds'
 *         indptr rows (one round trip to each of those servers);
 *   read  RDPS_SAMPLE_READ: the client pulls the seeds' indptr rows, picks,
 *         then pulls the picked edges' rows (RDMA READs over verbs and ofi;
 *         tcp serves the reads); limit: the same two pull rounds without the
 *         sampling, rdps_client_get of the seeds' indptr rows then of as
 *         many random edge rows as the batch picks.
 * Batches of random seeds (seeded), the same batches for every way and
 * limit; after a warm-up, rounds of each way's batches then its limit's,
 * the median of the rounds' rates reported.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf/bench.h"
#include "rdps/dataset.h"
#include "rdps/graph.h"
#include "rdps/ipconfig.h"
#include "rdps/partition.h"
#include "rdps/server.h"
#include "rdps/transport.h"

#define MAX_FANOUTS 8
#define MAX_ROUNDS 64
#define MAX_PARTS 64

struct sample_opts {
	const char *transport;
	const char *host;
	uint16_t port;
	uint32_t server_threads;
	const char *graph;       /* an existing partition, or built in workdir */
	const char *workdir;
	const char *wordnet_dir;
	bool reuse;
	uint64_t fanouts[MAX_FANOUTS];
	int nfanouts;
	uint64_t batch;          /* seeds per batch */
	uint64_t round_batches;  /* batches per round */
	uint64_t rounds;
	uint64_t warmup;         /* unmeasured batches of each way and limit */
	bool ways[2];            /* RDPS_SAMPLE_RPC, RDPS_SAMPLE_READ */
	uint64_t seed;
	bool limits;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench sample [options]\n"
"\n"
"Neighbour sampling of a graph held by the servers (rdps/graph.h), both ways:\n"
"sampled edges/s and seeds/s for batches of random seeds at each fanout, each\n"
"beside the limit of its path measured in the same run, and their ratio\n"
"(edges/s / limit edges/s). One in-process server per part of the graph\n"
"partition (as rdps server --graph, --num_server_threads threads each) over the\n"
"real transport on --host, one client.\n"
"Ways and limits:\n"
"  rpc   RDPS_SAMPLE_RPC: one request to each server holding seeds, whose CPU\n"
"        picks. Limit: tcp - a raw TCP ping-pong (TCP_NODELAY) of the same\n"
"        request and reply bytes (16 + 24 + 8 k out, 16 + 4 k + 24 e back for k\n"
"        seeds and e picked edges of a server), a connection per server, every\n"
"        server's request out at once as the client asks them; other transports - a pull of the seeds' indptr rows (one\n"
"        round trip to each server).\n"
"  read  RDPS_SAMPLE_READ: the client pulls the seeds' rows of graph:indptr,\n"
"        picks, then pulls the picked rows of graph:edges (RDMA READs over verbs\n"
"        and ofi; tcp serves the reads). Limit: those two pull rounds without the\n"
"        sampling - rdps_client_get of the seeds' indptr rows, then of as many\n"
"        random graph:edges rows as the batch picks.\n"
"Every way and limit runs the same batches (seeded). After --warmup batches of\n"
"each, --rounds rounds of --round-batches batches of a way then of its limit;\n"
"the median of the rounds' rates is reported (and the rounds' spread).\n"
"\n"
"Output: one JSON object per way and fanout on stdout (bench \"sample\"), a\n"
"human table on stderr.\n"
"\n"
"  --transport NAME           tcp (default), verbs, ofi, inproc\n"
"  --host ADDR                server address (default 127.0.0.1; in the soft-RoCE\n"
"                             guest the rxe address, 10.99.0.1)\n"
"  --port N                   base port: server p listens on N + p (default: a\n"
"                             free one)\n"
"  --num_server_threads N     threads per server (default 1)\n"
"  --graph PDIR               a graph partition (rdps partition of a graph\n"
"                             dataset), one server per part; default: WordNet\n"
"                             (rdps dataset wordnet-nodes) partitioned into 2\n"
"                             parts (METIS, --balance_train --balance_edges) in\n"
"                             --workdir\n"
"  --workdir DIR              where that graph is built (default\n"
"                             /tmp/rdps-bench-sample; created)\n"
"  --wordnet-dir DIR          WordNet's data files (default /usr/share/wordnet,\n"
"                             Debian's wordnet-base)\n"
"  --reuse                    keep a partition already built in --workdir\n"
"  --fanouts LIST             in-edges picked per seed (default 10,25)\n"
"  --batch N                  seeds per batch, random nodes (default 1000)\n"
"  --round-batches N          batches per round (default 20)\n"
"  --rounds N                 measured rounds (default 5, at most 64)\n"
"  --warmup N                 unmeasured batches of each way and limit first,\n"
"                             per fanout (default 5)\n"
"  --ways rpc|read|both       (default both)\n"
"  --seed S                   of the seeds and of the sampling (default 1)\n"
"  --no-limit                 do not measure the limits\n"
"  -h, --help                 this text\n");
}

static int parse_opts(int argc, char **argv, struct sample_opts *o)
{
	enum { O_TRANSPORT = 256, O_HOST, O_PORT, O_THREADS, O_GRAPH, O_WORKDIR, O_WORDNET,
	       O_REUSE, O_FANOUTS, O_BATCH, O_RBATCHES, O_ROUNDS, O_WARMUP, O_WAYS, O_SEED,
	       O_NOLIMIT };
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "num_server_threads", required_argument, NULL, O_THREADS },
		{ "graph", required_argument, NULL, O_GRAPH },
		{ "workdir", required_argument, NULL, O_WORKDIR },
		{ "wordnet-dir", required_argument, NULL, O_WORDNET },
		{ "reuse", no_argument, NULL, O_REUSE },
		{ "fanouts", required_argument, NULL, O_FANOUTS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "round-batches", required_argument, NULL, O_RBATCHES },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "ways", required_argument, NULL, O_WAYS },
		{ "seed", required_argument, NULL, O_SEED },
		{ "no-limit", no_argument, NULL, O_NOLIMIT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int opt, li = 0;

	*o = (struct sample_opts){
		.transport = "tcp", .host = "127.0.0.1", .server_threads = 1,
		.workdir = "/tmp/rdps-bench-sample", .fanouts = { 10, 25 }, .nfanouts = 2,
		.batch = 1000, .round_batches = 20, .rounds = 5, .warmup = 5,
		.ways = { true, true }, .seed = 1, .limits = true,
	};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (opt) {
		case O_TRANSPORT:
			if (!rdps_transport_find(optarg))
				goto bad;
			o->transport = optarg;
			break;
		case O_HOST: o->host = optarg; break;
		case O_PORT:
			if (bench_parse_u64(optarg, 1, 65000, &v))
				goto bad;
			o->port = (uint16_t)v;
			break;
		case O_THREADS:
			if (bench_parse_u64(optarg, 1, 64, &v))
				goto bad;
			o->server_threads = (uint32_t)v;
			break;
		case O_GRAPH: o->graph = optarg; break;
		case O_WORKDIR: o->workdir = optarg; break;
		case O_WORDNET: o->wordnet_dir = optarg; break;
		case O_REUSE: o->reuse = true; break;
		case O_FANOUTS:
			if ((o->nfanouts = bench_parse_list(optarg, o->fanouts, MAX_FANOUTS)) < 0)
				goto bad;
			for (int i = 0; i < o->nfanouts; i++)
				if (o->fanouts[i] > RDPS_SAMPLE_MAX_FANOUT)
					goto bad;
			break;
		case O_BATCH:
			if (bench_parse_u64(optarg, 1, 1000000, &o->batch))
				goto bad;
			break;
		case O_RBATCHES:
			if (bench_parse_u64(optarg, 1, 100000, &o->round_batches))
				goto bad;
			break;
		case O_ROUNDS:
			if (bench_parse_u64(optarg, 1, MAX_ROUNDS, &o->rounds))
				goto bad;
			break;
		case O_WARMUP:
			if (bench_parse_u64(optarg, 0, 1000000, &o->warmup))
				goto bad;
			break;
		case O_WAYS:
			o->ways[RDPS_SAMPLE_RPC] = !strcmp(optarg, "rpc") || !strcmp(optarg, "both");
			o->ways[RDPS_SAMPLE_READ] = !strcmp(optarg, "read") || !strcmp(optarg, "both");
			if (!o->ways[RDPS_SAMPLE_RPC] && !o->ways[RDPS_SAMPLE_READ])
				goto bad;
			break;
		case O_SEED:
			if (bench_parse_u64(optarg, 0, UINT64_MAX, &o->seed))
				goto bad;
			break;
		case O_NOLIMIT: o->limits = false; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench sample: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return -1; /* go on */
bad:
	fprintf(stderr, "rdps bench sample: bad value '%s' for --%s (see --help)\n", optarg,
		opts[li].name);
	return 2;
}

/* ---------------------------------------------------------------------- */
/* The graph: WordNet's nodes in 2 parts, unless --graph names one          */

static int build_graph(const struct sample_opts *o, char *pdir, size_t pdirlen)
{
	struct rdps_wordnet_nodes_opts wo;
	struct rdps_graph_stats gs;
	struct rdps_graph_partition_opts po;
	struct rdps_graph_partition_result pr;
	char data[1024], probe[1100], err[1024] = "";
	struct stat sb;
	uint64_t t0;
	int ret;

	if (o->graph) {
		snprintf(pdir, pdirlen, "%s", o->graph);
		return 0;
	}
	if (mkdir(o->workdir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rdps bench sample: cannot create %s: %s\n", o->workdir,
			strerror(errno));
		return -errno;
	}
	snprintf(data, sizeof(data), "%s/wordnet-nodes", o->workdir);
	snprintf(pdir, pdirlen, "%s/parts", o->workdir);
	snprintf(probe, sizeof(probe), "%s/partition.json", pdir);
	if (o->reuse && !stat(probe, &sb))
		return 0;
	t0 = rdps_now_ns();
	rdps_dataset_wordnet_nodes_defaults(&wo);
	if (o->wordnet_dir)
		wo.wordnet_dir = o->wordnet_dir;
	wo.force = 1;
	ret = rdps_dataset_wordnet_nodes(data, &wo, &gs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench sample: wordnet-nodes: %s\n",
			err[0] ? err : rdps_strerror(ret));
		return ret;
	}
	po = (struct rdps_graph_partition_opts){ .data_dir = data, .out_dir = pdir, .k = 2,
						 .method = RDPS_PARTITION_METIS,
						 .balance_train = true, .balance_edges = true,
						 .force = 1 };
	ret = rdps_graph_partition_build(&po, &pr, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench sample: partition: %s\n", err[0] ? err : rdps_strerror(ret));
		return ret;
	}
	fprintf(stderr, "rdps bench sample: WordNet graph (%llu nodes, %llu edges) in 2 parts in %s "
		"(%.1f s)\n", (unsigned long long)gs.num_nodes, (unsigned long long)gs.num_edges,
		pdir, (rdps_now_ns() - t0) / 1e9);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The job: one server per part, served by a thread each                   */

struct job {
	struct rdps_ipconfig ipc;
	bool have_ipc;
	uint32_t parts;
	struct rdps_graph_part *part[MAX_PARTS];
	struct rdps_server *srv[MAX_PARTS];
	pthread_t th[MAX_PARTS];
	bool started[MAX_PARTS];
};

static void *serve(void *arg)
{
	int ret = rdps_server_run(arg);

	if (ret < 0)
		rdps_err("bench: server stopped: %s", rdps_strerror(ret));
	return NULL;
}

static void job_stop(struct job *j)
{
	for (uint32_t s = 0; s < j->parts; s++)
		if (j->srv[s])
			rdps_server_stop(j->srv[s]);
	for (uint32_t s = 0; s < j->parts; s++) {
		if (j->started[s])
			pthread_join(j->th[s], NULL);
		rdps_server_destroy(j->srv[s]);
		rdps_graph_part_free(j->part[s]);
	}
	if (j->have_ipc)
		rdps_ipconfig_free(&j->ipc);
}

static int job_start(struct job *j, const struct sample_opts *o, const char *pdir)
{
	char err[1024] = "", text[RDPS_HOST_MAX + 64], why[512];
	uint16_t port;
	int ret;

	if (!strcmp(o->transport, "verbs")) {
		/* As bench_cluster_start: say what is missing for verbs. */
		const struct rdps_transport_ops *ops =
			rdps_transport_select("auto", o->host, why, sizeof(why));

		if (!ops || strcmp(ops->name, "verbs")) {
			fprintf(stderr, "rdps bench sample: --transport verbs needs an RDMA device "
				"serving %s, and there is none (%s)\n", o->host, why);
			return -ENODEV;
		}
	}
	ret = rdps_graph_part_load(pdir, 0, &j->part[0], err, sizeof(err));
	if (ret)
		goto fail;
	j->parts = j->part[0]->num_parts;
	if (j->parts > MAX_PARTS) {
		snprintf(err, sizeof(err), "%s has %u parts, at most %d are served here", pdir,
			 j->parts, MAX_PARTS);
		j->parts = 1;
		ret = -EINVAL;
		goto fail;
	}
	for (uint32_t p = 1; p < j->parts; p++)
		if ((ret = rdps_graph_part_load(pdir, p, &j->part[p], err, sizeof(err))))
			goto fail;
	port = bench_pick_port(o->port, j->parts);
	snprintf(text, sizeof(text), "%s %u %u\n", o->host, port, j->parts);
	if ((ret = rdps_ipconfig_parse("bench", text, &j->ipc, err, sizeof(err))))
		goto fail;
	j->have_ipc = true;
	for (uint32_t s = 0; s < j->parts; s++) {
		struct rdps_server_config cfg = { .transport = o->transport, .ipc = &j->ipc,
						  .server_id = s, .num_threads = o->server_threads,
						  .seed = 1,
						  /* its own servers, perhaps on a guest's address */
						  .allow_unauthenticated = true };

		if ((ret = rdps_graph_part_add_tables(j->part[s], &cfg))) {
			snprintf(err, sizeof(err), "part %u: too many tables", s);
			goto fail;
		}
		if ((ret = rdps_server_create(&cfg, &j->srv[s], err, sizeof(err))))
			goto fail;
	}
	for (uint32_t s = 0; s < j->parts; s++) {
		if ((ret = -pthread_create(&j->th[s], NULL, serve, j->srv[s]))) {
			snprintf(err, sizeof(err), "cannot start a server thread: %s",
				 rdps_strerror(ret));
			goto fail;
		}
		j->started[s] = true;
	}
	return 0;
fail:
	fprintf(stderr, "rdps bench sample: %s\n", err[0] ? err : rdps_strerror(ret));
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Batches and what each way and limit does with them                      */

/* One request and reply of the rpc way, as the ping-pong repeats it. */
struct exchange {
	uint32_t req, reply;
	uint32_t server, round;  /* the client asks every server's round-th request at once */
};

struct batches {
	uint64_t n, count;       /* seeds per batch, batches */
	uint64_t *seeds;         /* count x n */
	uint64_t *deg;           /* their in-degrees */
	uint32_t *owner;         /* their servers */
	/* per fanout, filled by batches_plan: */
	uint64_t *picked;        /* edges each batch picks */
	uint64_t total_picked;
	uint64_t *rand_eids;     /* count x n x fanout: random edge ids, picked[b] used */
	struct exchange *xch;    /* count x max_xch */
	uint32_t *nxch;
	uint32_t max_xch;
	uint64_t xch_bytes;      /* both ways, all batches */
	size_t max_msg;          /* the largest request or reply */
};

static void batches_free(struct batches *b)
{
	free(b->seeds);
	free(b->deg);
	free(b->owner);
	free(b->picked);
	free(b->rand_eids);
	free(b->xch);
	free(b->nxch);
}

static int batches_make(struct batches *b, struct rdps_graph *g, const struct sample_opts *o,
			uint64_t max_fanout, uint32_t parts)
{
	uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	uint64_t nodes = rdps_graph_num_nodes(g), lo[MAX_PARTS], hi[MAX_PARTS];
	size_t cells = (size_t)(o->batch * o->round_batches);
	int ret;

	b->n = o->batch;
	b->count = o->round_batches;
	/* At most parts requests per batch, more if a server's seeds exceed a
	 * request's picks (RDPS_SAMPLE_MAX_EDGES). */
	b->max_xch = parts + (uint32_t)(b->n * max_fanout / RDPS_SAMPLE_MAX_EDGES) + 1;
	b->seeds = bench_alloc(cells * sizeof(uint64_t));
	b->deg = bench_alloc(cells * sizeof(uint64_t));
	b->owner = bench_alloc(cells * sizeof(uint32_t));
	b->picked = bench_alloc(b->count * sizeof(uint64_t));
	b->rand_eids = bench_alloc(cells * max_fanout * sizeof(uint64_t));
	b->xch = bench_alloc(b->count * b->max_xch * sizeof(struct exchange));
	b->nxch = bench_alloc(b->count * sizeof(uint32_t));
	if (!b->seeds || !b->deg || !b->owner || !b->picked || !b->rand_eids || !b->xch || !b->nxch)
		return -ENOMEM;
	for (uint32_t p = 0; p < parts; p++)
		rdps_graph_part_nodes(g, p, &lo[p], &hi[p]);
	bench_fill_ids(b->seeds, cells, nodes, false, &rng);
	for (uint64_t i = 0; i < b->count; i++)
		if ((ret = rdps_graph_in_degrees(g, b->seeds + i * b->n, b->n, b->deg + i * b->n)))
			return ret;
	for (size_t i = 0; i < cells; i++) {
		uint32_t p = 0;

		while (p + 1 < parts && b->seeds[i] >= hi[p])
			p++;
		b->owner[i] = p;
	}
	return 0;
}

/* The fanout's picks per batch, random edge ids for the read limit and
 * the rpc way's requests (as graph/dist_graph.c's sample_rpc asks them:
 * a round of one request to each server at once, at most
 * RDPS_SAMPLE_MAX_EDGES / fanout seeds each). */
static void batches_plan(struct batches *b, uint32_t fanout, uint64_t num_edges, uint32_t parts,
			 uint64_t seed)
{
	uint64_t max_seeds = RDPS_SAMPLE_MAX_EDGES / fanout;
	uint64_t rng = seed * 0xbf58476d1ce4e5b9ull + fanout;

	b->total_picked = 0;
	b->xch_bytes = 0;
	b->max_msg = 0;
	for (uint64_t i = 0; i < b->count; i++) {
		const uint64_t *deg = b->deg + i * b->n;
		const uint32_t *own = b->owner + i * b->n;
		uint64_t m = 0;

		b->nxch[i] = 0;
		for (uint32_t s = 0; s < parts; s++) {
			uint64_t k = 0, e = 0;
			uint32_t round = 0;

			for (uint64_t j = 0; j <= b->n; j++) {
				if (j < b->n && own[j] == s) {
					k++;
					e += deg[j] < fanout ? deg[j] : fanout;
				}
				if (k && (k == max_seeds || j == b->n)) {
					struct exchange *x = &b->xch[i * b->max_xch + b->nxch[i]++];

					x->server = s;
					x->round = round++;
					x->req = (uint32_t)(16 + sizeof(struct rdps_sample_req) +
							 sizeof(struct rdps_sample_group) + 8 * k);
					x->reply = (uint32_t)(16 + rdps_sample_reply_bound((uint32_t)k, 0) +
							      e * RDPS_SAMPLE_EDGE_BYTES);
					b->xch_bytes += x->req + x->reply;
					b->max_msg = x->req > b->max_msg ? x->req : b->max_msg;
					b->max_msg = x->reply > b->max_msg ? x->reply : b->max_msg;
					m += e;
					k = e = 0;
				}
			}
		}
		b->picked[i] = m;
		b->total_picked += m;
		bench_fill_ids(b->rand_eids + i * b->n * fanout, m, num_edges, false, &rng);
	}
}

struct bufs {
	struct rdps_sampled out;
	int64_t *rows;           /* indptr rows (2 per seed) or edge rows (4 per edge) */
	int *fds;                /* ping-pong: a connection per server */
	void **ppbufs;
	uint32_t nfds;
};

enum phase { PH_SAMPLE, PH_LIMIT };

/* Runs batches [first, first + count) (modulo the batch count) of a way or
 * of its limit; sampling seeds derive from salt and the batch. Returns the
 * elapsed ns, or -errno with the reason printed. */
static int64_t run_phase(struct rdps_client *c, struct rdps_graph *g, struct batches *b,
			 struct bufs *bf, int way, enum phase ph, uint32_t fanout, uint64_t first,
			 uint64_t count, uint64_t salt, uint32_t indptr_id, uint32_t edges_id)
{
	uint64_t t0 = rdps_now_ns();
	int ret = 0;

	for (uint64_t k = 0; k < count; k++) {
		uint64_t i = (first + k) % b->count;
		const uint64_t *seeds = b->seeds + i * b->n;

		if (ph == PH_SAMPLE) {
			ret = rdps_graph_sample_neighbors(g, seeds, b->n, fanout, way,
							  salt + (first + k) * 0x9e3779b97f4a7c15ull,
							  &bf->out);
			if (!ret && bf->out.num_edges != b->picked[i]) {
				fprintf(stderr, "rdps bench sample: batch %llu: %zu edges sampled, "
					"%llu expected from the in-degrees\n", (unsigned long long)i,
					bf->out.num_edges, (unsigned long long)b->picked[i]);
				return -EPROTO;
			}
		} else if (way == RDPS_SAMPLE_RPC && bf->nfds) {
			const struct exchange *x = b->xch + i * b->max_xch;
			uint32_t rounds = 0;

			/* As the client asks: each round's requests out at once,
			 * then their replies. */
			for (uint32_t e = 0; e < b->nxch[i]; e++)
				rounds = x[e].round + 1 > rounds ? x[e].round + 1 : rounds;
			for (uint32_t r = 0; !ret && r < rounds; r++) {
				for (uint32_t e = 0; !ret && e < b->nxch[i]; e++)
					if (x[e].round == r)
						ret = bench_pingpong_send(bf->fds[x[e].server],
									  bf->ppbufs[x[e].server],
									  x[e].req, x[e].reply);
				for (uint32_t e = 0; !ret && e < b->nxch[i]; e++)
					if (x[e].round == r)
						ret = bench_pingpong_recv(bf->fds[x[e].server],
									  bf->ppbufs[x[e].server],
									  x[e].reply);
			}
			if (ret) {
				fprintf(stderr, "rdps bench sample: ping-pong: %s\n", rdps_strerror(ret));
				return ret;
			}
		} else {
			ret = rdps_client_get(c, indptr_id, seeds, b->n, bf->rows);
			if (!ret && way == RDPS_SAMPLE_READ)
				ret = rdps_client_get(c, edges_id, b->rand_eids + i * b->n * fanout,
						      b->picked[i], bf->rows);
		}
		if (ret) {
			fprintf(stderr, "rdps bench sample: %s failed: %s\n",
				ph == PH_SAMPLE ? "sampling" : "the limit's pull", rdps_client_errmsg(c));
			return ret;
		}
	}
	return (int64_t)(rdps_now_ns() - t0);
}

static const char *way_name(int way)
{
	return way == RDPS_SAMPLE_RPC ? "rpc" : "read";
}

/* min, median, max of v[0..n) (sorted in place). */
static void spread(double *v, size_t n, double out[3])
{
	out[1] = bench_median(v, n);
	out[0] = n ? v[0] : NAN;
	out[2] = n ? v[n - 1] : NAN;
}

int rdps_bench_sample(int argc, char **argv)
{
	struct sample_opts o;
	struct job j = { 0 };
	struct rdps_client *c = NULL;
	struct rdps_graph *g = NULL;
	struct rdps_client_params cp;
	struct rdps_table_info ti, te;
	struct bench_pingpong *pp = NULL;
	struct batches b = { 0 };
	struct bufs bf = { 0 };
	uint64_t max_fanout = 0;
	char pdir[1100], err[1024] = "";
	bool tcp;
	int ret, rc = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret >= 0)
		return ret;
	tcp = !strcmp(o.transport, "tcp");
	for (int i = 0; i < o.nfanouts; i++)
		max_fanout = o.fanouts[i] > max_fanout ? o.fanouts[i] : max_fanout;
	if (o.batch * max_fanout > RDPS_SAMPLE_MAX_EDGES * 64ull) {
		fprintf(stderr, "rdps bench sample: --batch x fanout is too large\n");
		return 2;
	}
	if (build_graph(&o, pdir, sizeof(pdir)))
		return 1;
	if (job_start(&j, &o, pdir))
		goto out;
	cp = (struct rdps_client_params){ .servers = &j.ipc, .transport = o.transport,
					  .client_id = 0, .num_clients = 1, .timeout_ms = 60000,
					  .quiet = true };
	if ((ret = rdps_client_create(&cp, &c, err, sizeof(err)))) {
		fprintf(stderr, "rdps bench sample: client: %s\n", err[0] ? err : rdps_strerror(ret));
		goto out;
	}
	if ((ret = rdps_graph_open(c, &g)) || (ret = rdps_client_table(c, RDPS_GRAPH_INDPTR, &ti)) ||
	    (ret = rdps_client_table(c, RDPS_GRAPH_EDGES, &te))) {
		fprintf(stderr, "rdps bench sample: the graph: %s\n", rdps_client_errmsg(c));
		goto out;
	}
	if ((ret = batches_make(&b, g, &o, max_fanout, j.parts))) {
		fprintf(stderr, "rdps bench sample: batches: %s\n",
			ret == -ENOMEM ? "out of memory" : rdps_client_errmsg(c));
		goto out;
	}
	{
		size_t cap = (size_t)(b.n * max_fanout);

		bf.out.src = bench_alloc(cap * sizeof(uint64_t));
		bf.out.dst = bench_alloc(cap * sizeof(uint64_t));
		bf.out.eid = bench_alloc(cap * sizeof(uint64_t));
		bf.out.etype = bench_alloc(cap * sizeof(int64_t));
		bf.rows = bench_alloc(cap * 4 * sizeof(int64_t) + b.n * 2 * sizeof(int64_t));
		if (!bf.out.src || !bf.out.dst || !bf.out.eid || !bf.out.etype || !bf.rows) {
			fprintf(stderr, "rdps bench sample: out of memory\n");
			goto out;
		}
	}
	if (o.limits && tcp && o.ways[RDPS_SAMPLE_RPC]) {
		/* The largest message of any fanout: the biggest fanout's. */
		batches_plan(&b, (uint32_t)max_fanout, rdps_graph_num_edges(g), j.parts, o.seed);
		if ((ret = bench_pingpong_start(o.host, &pp, err, sizeof(err)))) {
			fprintf(stderr, "rdps bench sample: %s\n", err);
			goto out;
		}
		bf.fds = calloc(j.parts, sizeof(*bf.fds));
		bf.ppbufs = calloc(j.parts, sizeof(*bf.ppbufs));
		if (!bf.fds || !bf.ppbufs) {
			fprintf(stderr, "rdps bench sample: out of memory\n");
			goto out;
		}
		for (; bf.nfds < j.parts; bf.nfds++)
			if ((ret = bench_pingpong_open(pp, b.max_msg, &bf.fds[bf.nfds],
						       &bf.ppbufs[bf.nfds]))) {
				fprintf(stderr, "rdps bench sample: ping-pong connection: %s\n",
					rdps_strerror(ret));
				goto out;
			}
	}

	bench_table_title("neighbour sampling, %s, %u servers (one per part) of %u thread(s), graph of "
			  "%llu nodes and %llu edges; batches of %llu random seeds; median of %llu "
			  "rounds of %llu batches (ratio = edges/s / limit edges/s)",
			  o.transport, j.parts, o.server_threads,
			  (unsigned long long)rdps_graph_num_nodes(g),
			  (unsigned long long)rdps_graph_num_edges(g), (unsigned long long)b.n,
			  (unsigned long long)o.rounds, (unsigned long long)b.count);
	bench_table_row("%-9s %-4s %6s %6s %11s | %12s %10s %9s | %-17s %12s %10s %9s | %6s",
			"transport", "way", "fanout", "seeds", "edges/batch", "edges/s", "seeds/s",
			"us/batch", "limit", "edges/s", "seeds/s", "us/batch", "ratio");
	for (int f = 0; f < o.nfanouts; f++) {
		uint32_t fanout = (uint32_t)o.fanouts[f];

		batches_plan(&b, fanout, rdps_graph_num_edges(g), j.parts, o.seed);
		for (int way = 0; way < 2; way++) {
			double fig[MAX_ROUNDS], lim[MAX_ROUNDS], fs[3], ls[3] = { NAN, NAN, NAN };
			double seeds_total = (double)(b.n * b.count), edges_total = (double)b.total_picked;
			const char *kind = !o.limits ? "none" :
					   way == RDPS_SAMPLE_READ ? "pull_indptr_edges" :
					   tcp ? "tcp_pingpong" : "pull_indptr";
			uint64_t salt = o.seed ^ ((uint64_t)fanout << 32);
			struct bench_json js;
			int64_t ns;

			if (!o.ways[way])
				continue;
			/* Warm-up: the way, then its limit. */
			if (o.warmup &&
			    ((ns = run_phase(c, g, &b, &bf, way, PH_SAMPLE, fanout, 0, o.warmup, salt,
					     ti.id, te.id)) < 0 ||
			     (o.limits && (ns = run_phase(c, g, &b, &bf, way, PH_LIMIT, fanout, 0,
							  o.warmup, salt, ti.id, te.id)) < 0)))
				goto out;
			for (uint64_t r = 0; r < o.rounds; r++) {
				/* Each round: the same batches, fresh sampling seeds. */
				uint64_t first = o.warmup + r * b.count;

				ns = run_phase(c, g, &b, &bf, way, PH_SAMPLE, fanout, first, b.count,
					       salt, ti.id, te.id);
				if (ns < 0)
					goto out;
				fig[r] = ns ? edges_total / (ns / 1e9) : NAN;
				if (!o.limits)
					continue;
				ns = run_phase(c, g, &b, &bf, way, PH_LIMIT, fanout, first, b.count,
					       salt, ti.id, te.id);
				if (ns < 0)
					goto out;
				lim[r] = ns ? edges_total / (ns / 1e9) : NAN;
			}
			spread(fig, o.rounds, fs);
			if (o.limits)
				spread(lim, o.rounds, ls);
			bench_json_begin(&js, "sample");
			bench_json_str(&js, "transport", o.transport);
			bench_json_str(&js, "way", way_name(way));
			bench_json_int(&js, "fanout", fanout);
			bench_json_int(&js, "servers", j.parts);
			bench_json_int(&js, "server_threads", o.server_threads);
			bench_json_int(&js, "nodes", rdps_graph_num_nodes(g));
			bench_json_int(&js, "edges", rdps_graph_num_edges(g));
			bench_json_int(&js, "seeds", b.n);
			bench_json_int(&js, "batches", b.count);
			bench_json_int(&js, "rounds", o.rounds);
			bench_json_num(&js, "edges_per_batch", edges_total / (double)b.count);
			bench_json_num(&js, "edges_per_s", fs[1]);
			bench_json_num(&js, "edges_per_s_min", fs[0]);
			bench_json_num(&js, "edges_per_s_max", fs[2]);
			bench_json_num(&js, "seeds_per_s", fs[1] * seeds_total / edges_total);
			bench_json_num(&js, "batch_us", edges_total / fs[1] / (double)b.count * 1e6);
			bench_json_str(&js, "limit", kind);
			if (o.limits && way == RDPS_SAMPLE_RPC && tcp)
				bench_json_num(&js, "limit_bytes_per_batch",
					       (double)b.xch_bytes / (double)b.count);
			if (o.limits && way == RDPS_SAMPLE_READ)
				bench_json_num(&js, "limit_rows_per_batch",
					       (double)b.n + edges_total / (double)b.count);
			bench_json_num(&js, "limit_edges_per_s", ls[1]);
			bench_json_num(&js, "limit_edges_per_s_min", ls[0]);
			bench_json_num(&js, "limit_edges_per_s_max", ls[2]);
			bench_json_num(&js, "limit_seeds_per_s", ls[1] * seeds_total / edges_total);
			bench_json_num(&js, "limit_batch_us",
				       edges_total / ls[1] / (double)b.count * 1e6);
			bench_json_num(&js, "ratio", bench_ratio(fs[1], ls[1]));
			bench_json_end(&js);
			bench_table_row("%-9s %-4s %6u %6llu %11.0f | %12.0f %10.0f %9.1f | %-17s "
					"%12.0f %10.0f %9.1f | %6.2f",
					o.transport, way_name(way), fanout, (unsigned long long)b.n,
					edges_total / (double)b.count, fs[1],
					fs[1] * seeds_total / edges_total,
					edges_total / fs[1] / (double)b.count * 1e6, kind, ls[1],
					ls[1] * seeds_total / edges_total,
					edges_total / ls[1] / (double)b.count * 1e6,
					bench_ratio(fs[1], ls[1]));
		}
	}
	rc = 0;
out:
	for (uint32_t f = 0; f < bf.nfds; f++) {
		close(bf.fds[f]);
		free(bf.ppbufs[f]);
	}
	free(bf.fds);
	free(bf.ppbufs);
	bench_pingpong_stop(pp);
	free(bf.out.src);
	free(bf.out.dst);
	free(bf.out.eid);
	free(bf.out.etype);
	free(bf.rows);
	batches_free(&b);
	rdps_graph_close(g);
	rdps_client_destroy(c);
	job_stop(&j);
	return rc;
}
