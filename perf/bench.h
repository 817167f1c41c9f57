/* SPDX-License-Identifier: MIT */
/*
 * rdps bench: the shared harness of the perf/ benchmarks (rdps bench <kind>).
 *
 * Every benchmark is a thin driver over these pieces:
 *  - a latency recorder: timestamps go into an array preallocated before the
 *    measured loop; percentiles are computed after it (perftest's
 *    run_iter_lat / print_report_lat split);
 *  - a JSON-line writer (one object per measurement, on stdout) and a human
 *    table (on stderr), so `rdps bench ... > results.jsonl` keeps both apart;
 *  - an in-process cluster: servers created with rdps_server_create(), each
 *    served by its own thread over the real transport, and clients for them;
 *  - the limits measured in the same run: a raw TCP ping-pong of given
 *    request/reply sizes (TCP_NODELAY) and perftest's ib_read_lat /
 *    ib_read_bw spawned as processes on the same RDMA device;
 *  - child processes with their output read line by line (rdps train).
 *
 * Internal to the rdps tool. Functions return 0 (or a count) or -errno, with
 * a reason in err where they take one; only the drivers print.
 */
#ifndef RDPS_PERF_BENCH_H
#define RDPS_PERF_BENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/kvstore.h"

/* Entry points of `rdps bench <kind>`; argv[0] is the kind. Exit codes as
 * the tool's commands: 0 ok, 1 failure, 2 usage error. */
int rdps_bench_pull(int argc, char **argv);
int rdps_bench_push(int argc, char **argv);
int rdps_bench_train(int argc, char **argv);
int rdps_bench_load(int argc, char **argv);
int rdps_bench_zmq(int argc, char **argv);
int rdps_bench_rowcheck(int argc, char **argv);
int rdps_bench_fma(int argc, char **argv);
int rdps_bench_sample(int argc, char **argv);

/* ---------------------------------------------------------------------- */
/* Latency recorder                                                        */

struct bench_lat {
	uint64_t *ns; /* cap samples, allocated once */
	size_t cap;   /* capacity */
	size_t n;     /* samples recorded */
};

struct bench_pct {
	size_t n;       /* samples */
	double min_us;
	double mean_us;
	double p50_us;
	double p99_us;
	double p999_us;
	double max_us;
};

int bench_lat_init(struct bench_lat *l, size_t cap);
void bench_lat_free(struct bench_lat *l);

static inline void bench_lat_reset(struct bench_lat *l)
{
	l->n = 0;
}

/* Records one sample (dropped silently once the array is full). */
static inline void bench_lat_add(struct bench_lat *l, uint64_t ns)
{
	if (l->n < l->cap)
		l->ns[l->n++] = ns;
}

static inline bool bench_lat_full(const struct bench_lat *l)
{
	return l->n == l->cap;
}

/* Sorts the samples in place and fills out (all NaN when there are none). */
void bench_lat_summary(struct bench_lat *l, struct bench_pct *out);

/* Value at quantile q (0..1) of samples sorted by bench_lat_summary, in us. */
double bench_lat_quantile_us(const struct bench_lat *l, double q);

/* Appends the CDF of sorted samples to f as "label quantile latency_us"
 * lines, points evenly spaced in quantile (and the extreme tail). */
void bench_lat_write_cdf(const struct bench_lat *l, FILE *f, const char *label);

/* ---------------------------------------------------------------------- */
/* JSON lines                                                              */

struct bench_json {
	char buf[4096];
	size_t len;
};

/* Starts {"bench":"NAME" ... */
void bench_json_begin(struct bench_json *j, const char *bench);
void bench_json_str(struct bench_json *j, const char *key, const char *val);
/* A number; NaN and infinities become null (a limit that was not measured). */
void bench_json_num(struct bench_json *j, const char *key, double v);
void bench_json_int(struct bench_json *j, const char *key, uint64_t v);
void bench_json_bool(struct bench_json *j, const char *key, bool v);
/* Closes the object and writes it as one line to stdout (flushed). */
void bench_json_end(struct bench_json *j);

/* The human table goes to stderr: a title, a header, then rows. */
void bench_table_title(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_table_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* figure / limit, NaN when the limit is missing or zero. */
double bench_ratio(double figure, double limit);

/* The median of v[0..n) (sorts v); NAN if n is 0. */
double bench_median(double *v, size_t n);

/* ---------------------------------------------------------------------- */
/* Option helpers                                                          */

/* Parses "1,16,256" into out[0..max); returns the count or -EINVAL. Accepts
 * k/M suffixes. */
int bench_parse_list(const char *s, uint64_t *out, int max);
/* Parses a number with optional k/M/G suffix into *out, within [lo, hi]. */
int bench_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int bench_parse_double(const char *s, double lo, double hi, double *out);

/* A base port for this run: base if non-zero, else a random one in
 * 20000..39999 such that span consecutive ports are free now (checked by
 * binding them; servers bind a moment later, a race we accept). */
uint16_t bench_pick_port(uint64_t base, unsigned span);

/* xorshift64*: ids for the measured loops without calling into libc. */
static inline uint64_t bench_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Fills ids[0..n) with uniform random ids below rows, or (clustered) with
 * start, start+1, ... for a random start. */
void bench_fill_ids(uint64_t *ids, size_t n, uint64_t rows, bool clustered, uint64_t *seed);

/* Page-aligned, pre-faulted buffer (free()). NULL on failure. */
void *bench_alloc(size_t bytes);

/* The part of a measuring thread the harness runs: embed it first in a
 * worker struct. Workers start together and report what they did. */
struct bench_worker {
	pthread_t thread;
	const int *go;    /* 0: wait, 1: start, -1: abandon (NULL: start at once) */
	uint64_t count;   /* result: rows (or pushes) done */
	uint64_t ns;      /* result: elapsed */
	int ret;          /* result: 0 or -errno */
};

/* First thing in a worker's thread: waits for the common start; false if
 * the run was abandoned (the thread should return at once). */
bool bench_worker_wait(struct bench_worker *w);

/* Runs fn on k workers (an array of structs stride bytes apart, each
 * beginning with a struct bench_worker), all started at once; *count gets
 * the sum of their counts, *ns the longest elapsed. Returns 0, the first
 * worker's error, or -errno if a thread could not start (then none ran). */
int bench_run_workers(void *workers, size_t stride, uint32_t k, void *(*fn)(void *),
		      uint64_t *count, uint64_t *ns);

/* bench_run_workers, as a rate: the summed count per second of the longest
 * elapsed time, or the (negative) error. */
double bench_run_rate(void *workers, size_t stride, uint32_t k, void *(*fn)(void *));

/* ---------------------------------------------------------------------- */
/* In-process cluster                                                      */

struct bench_table_spec {
	const char *name;   /* table name */
	uint64_t rows;
	uint32_t dim;
	int optimizer;      /* enum rdps_optimizer */
	float lr;
};

struct bench_cluster_opts {
	const char *transport;  /* "tcp", "verbs" */
	const char *host;       /* listen and connect address */
	uint16_t port;          /* base port: server s listens on port + s */
	uint32_t num_servers;
	uint32_t server_threads; /* threads per server (0: 1), its num_threads */
	uint32_t num_tables;
	struct bench_table_spec tables[RDPS_MAX_TABLES];
};

struct bench_cluster; /* opaque */

/* Creates num_servers servers on host:port.. and starts one thread per
 * server running rdps_server_run() (which starts the server's other
 * threads). For verbs it first checks that an RDMA device serves the route
 * to host and says so in err if not. Returns once the servers' threads are
 * all running, or after a second if the transport granted fewer than
 * server_threads (bench_cluster_threads tells). */
int bench_cluster_start(const struct bench_cluster_opts *o, struct bench_cluster **out,
			char *err, size_t errlen);

/* A client of the cluster (rdps_client_destroy it). Every client of one
 * cluster must give the same num_clients (the servers' job size). */
int bench_cluster_client(struct bench_cluster *cl, uint32_t client_id, uint32_t num_clients,
			 int read_consistency, struct rdps_client **out, char *err,
			 size_t errlen);

/* CPU time (ns) all the servers' threads have used so far. */
uint64_t bench_cluster_cpu_ns(const struct bench_cluster *cl);

/* Threads the servers run on, all servers together (the threads of this
 * process that appeared while they started). */
uint32_t bench_cluster_threads(const struct bench_cluster *cl);

/* Stops and joins the server threads, destroys the servers. Accepts NULL. */
void bench_cluster_stop(struct bench_cluster *cl);

/* ---------------------------------------------------------------------- */
/* Limits                                                                  */

/* Raw TCP ping-pong: a server thread on host (ephemeral port) that, per
 * request, reads an 8-byte header {u32 req_bytes, u32 reply_bytes}, the rest
 * of the request, and writes reply_bytes; one thread per connection. */
struct bench_pingpong;

int bench_pingpong_start(const char *host, struct bench_pingpong **out, char *err,
			 size_t errlen);
void bench_pingpong_stop(struct bench_pingpong *pp);

/* A connected client socket (TCP_NODELAY), or -errno. */
int bench_pingpong_connect(struct bench_pingpong *pp);

/* A client of pp: *fd connected (as bench_pingpong_connect) and *buf of
 * buf_bytes for its messages. 0 or -errno; the caller closes and frees
 * what was set (*fd >= 0, *buf) either way. */
int bench_pingpong_open(struct bench_pingpong *pp, size_t buf_bytes, int *fd, void **buf);

/* One exchange of req_bytes (>= 8) out and reply_bytes back over fd, using
 * buf (at least max(req, reply) bytes). 0 or -errno. */
int bench_pingpong_once(int fd, void *buf, uint32_t req_bytes, uint32_t reply_bytes);
/* The exchange in two halves (one request out on several connections at
 * once; each connection its own buf). */
int bench_pingpong_send(int fd, void *buf, uint32_t req_bytes, uint32_t reply_bytes);
int bench_pingpong_recv(int fd, void *buf, uint32_t reply_bytes);

/* perftest figures (microseconds, bytes per second, messages per second). */
struct bench_perftest {
	double typical_us; /* ib_read_lat t_typical (its median) */
	double avg_us;
	double p99_us;
	double p999_us;
	double bw_bytes_s; /* ib_read_bw average */
	double msg_rate;   /* ib_read_bw messages/s */
};

struct bench_perftest_opts {
	const char *dev;   /* -d */
	int gid_index;     /* -x, < 0: perftest's default */
	const char *host;  /* server address (same device) */
	uint16_t port;     /* -p, changed per run by the caller */
	unsigned iters;    /* -n (latency tools) */
	unsigned seconds;  /* -D (bandwidth tools: steady state, not ramp-up) */
	unsigned qps;      /* -q (bandwidth tools), 0 or 1: one queue pair */
	int timeout_s;     /* per process */
};

/* Runs `tool` (ib_read_lat or ib_read_bw) server and client on the same
 * device for message size bytes, parses the client's result row. 0 or
 * -errno with the tool's output tail in err. */
int bench_perftest(const char *tool, const struct bench_perftest_opts *o, uint32_t bytes,
		   struct bench_perftest *out, char *err, size_t errlen);

/* Fills po for perftest against host: the device and RoCE v2 GID serving
 * host (bench_rdma_device; its name goes to dev), unless ib_dev / gid_index
 * (>= 0) are given; a 120 s timeout per process and 2 s bandwidth runs. 0 or
 * -errno with the reason in err. */
int bench_perftest_setup(struct bench_perftest_opts *po, const char *host, const char *ib_dev,
			 int gid_index, char *dev, size_t devlen, char *err, size_t errlen);

/* First RDMA device name and the GID index of host's RoCE v2 GID on it
 * (for perftest's -d/-x). 0 or -ENODEV / -ENOENT with a reason. */
int bench_rdma_device(const char *host, char *dev, size_t devlen, int *gid_index, char *err,
		      size_t errlen);

/* fi_pingpong (libfabric-bin): the ofi transport's limit. A ping-pong of
 * FI_EP_RDM messages of one size on one provider, server and client
 * processes; it reports the mean time per message one way (usec/xfer, half
 * a round trip) and the bytes it moved per second (one message in flight).
 * Debian has no fabtests (fi_rma_bw, fi_msg_bw): fi_pingpong is all there
 * is of libfabric's own tools. */
struct bench_fipp_opts {
	const char *prov;  /* -p */
	const char *host;  /* the server's address, for the client */
	uint16_t port;     /* -B / -P control port, changed per run by the caller */
	unsigned iters;    /* -I (0: 1000) */
	int timeout_s;     /* per process (0: 120) */
};

struct bench_fipp {
	uint32_t bytes;    /* -S */
	unsigned iters;
	double oneway_us;  /* usec/xfer: a round trip's mean / 2 */
	double rtt_us;     /* 2 x oneway_us */
	double bw_bytes_s; /* bytes / oneway_us: a message each way in turn */
	double mb_s;       /* its own MB/sec column, as printed */
};

/* The provider the ofi transport takes, by name for fi_pingpong -p:
 * RDPS_OFI_PROVIDER (--ofi-provider), else FI_PROVIDER, else "efa". */
const char *bench_ofi_provider(void);

/* Runs fi_pingpong server and client for message size bytes and parses the
 * client's result row. 0 or -errno with the tool's output tail in err. */
int bench_fi_pingpong(const struct bench_fipp_opts *o, uint32_t bytes, struct bench_fipp *out,
		      char *err, size_t errlen);

/* Its JSON line (bench "fi_pingpong"): provider, what it was for, the size
 * and the figures. */
void bench_fipp_emit(const struct bench_fipp *f, const char *prov, const char *what);

/* ---------------------------------------------------------------------- */
/* The core's own limit: peak FMA rate of one thread                       */

struct bench_fma {
	const char *isa;      /* "avx512f" (512-bit), "avx2+fma" (256-bit), "sse2"
			       * (128-bit, a multiply and an add: no FMA unit) */
	unsigned bits;        /* vector width */
	unsigned chains;      /* independent accumulators (latency x pipes) */
	unsigned rounds;
	double round_s;       /* length of each round */
	double gflop_per_s;   /* best round; an FMA counts 2 flops per lane */
	double median_gflop_per_s;
};

/* The ISA the model kernels run with on this CPU: trainer/model_kernels.h
 * compiles them for x86-64-v3 (AVX2 + FMA, 256-bit) and the baseline
 * (SSE2), picked at load time; "avx2+fma" or "sse2". */
const char *bench_fma_kernel_isa(void);

/* Whether this CPU runs isa ("avx512f", "avx2+fma", "sse2"). */
bool bench_fma_supported(const char *isa);

/* One thread's peak multiply-add rate with isa: rounds of round_s seconds
 * of independent FMA chains on registers (no memory), the best round. 0, or
 * -EINVAL (unknown isa) / -ENOTSUP (not on this CPU). */
int bench_fma_peak(const char *isa, double round_s, unsigned rounds, struct bench_fma *out);

/* Its JSON line (bench "fma") and table row (rdps bench fma's header). */
void bench_fma_emit(const struct bench_fma *f);

/* ---------------------------------------------------------------------- */
/* Child processes                                                         */

struct bench_child {
	pid_t pid;
	FILE *out; /* its stdout (and stderr if merged), line-buffered reads */
};

/* Starts argv (argv[0] "rdps" means this very executable) with stdout on a
 * pipe (c->out), or into the file out_path if non-NULL (c->out is then NULL);
 * stderr goes the same way if merge_stderr, else to /dev/null if
 * quiet_stderr, else is inherited. */
int bench_child_start(char *const argv[], const char *out_path, bool merge_stderr,
		      bool quiet_stderr, struct bench_child *c);
/* Waits for it; returns its exit status (128+signal if killed) or -errno. */
int bench_child_wait(struct bench_child *c);
/* SIGTERM, then wait. */
void bench_child_kill(struct bench_child *c);

#endif /* RDPS_PERF_BENCH_H */
