// SPDX-License-Identifier: MIT
/* rdps bench: the limits each figure is compared with, measured in the same
 * run: a raw TCP ping-pong of the same request/reply sizes on the same path,
 * perftest (ib_read_lat, ib_read_bw, ib_send_bw) on the same RDMA device,
 * fi_pingpong (libfabric-bin) on the same libfabric provider, and the core's
 * peak FMA rate (for the model kernels). */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "perf/bench.h"

/* ---------------------------------------------------------------------- */
/* Raw TCP ping-pong                                                       */

#define PP_MAX_CONNS 64
#define PP_BUF_BYTES (80u << 20) /* largest request or reply served */

struct pp_conn {
	struct bench_pingpong *pp;
	int fd;
	pthread_t thread;
	bool started;
};

struct bench_pingpong {
	int lfd;                     /* listening socket */
	struct sockaddr_storage addr; /* where it listens */
	socklen_t addrlen;
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t lock;        /* conns, nconns, stopping */
	struct pp_conn conns[PP_MAX_CONNS];
	int nconns;
	bool stopping;
};

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void *pp_serve(void *arg)
{
	struct pp_conn *c = arg;
	char *buf = bench_alloc(PP_BUF_BYTES);
	uint32_t hdr[2];

	if (!buf)
		return NULL;
	for (;;) {
		if (recv_all(c->fd, hdr, sizeof(hdr)))
			break;
		if (hdr[0] < sizeof(hdr) || hdr[0] > PP_BUF_BYTES || hdr[1] > PP_BUF_BYTES)
			break;
		if (recv_all(c->fd, buf, hdr[0] - sizeof(hdr)) || send_all(c->fd, buf, hdr[1]))
			break;
	}
	free(buf);
	return NULL;
}

static void *pp_accept(void *arg)
{
	struct bench_pingpong *pp = arg;

	for (;;) {
		int fd = accept(pp->lfd, NULL, NULL);
		struct pp_conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* listener shut down */
		}
		set_nodelay(fd);
		pthread_mutex_lock(&pp->lock);
		if (pp->stopping || pp->nconns == PP_MAX_CONNS) {
			pthread_mutex_unlock(&pp->lock);
			close(fd);
			continue;
		}
		c = &pp->conns[pp->nconns];
		c->pp = pp;
		c->fd = fd;
		c->started = !pthread_create(&c->thread, NULL, pp_serve, c);
		if (c->started)
			pp->nconns++;
		else
			close(fd);
		pthread_mutex_unlock(&pp->lock);
	}
}

int bench_pingpong_start(const char *host, struct bench_pingpong **out, char *err,
			 size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct bench_pingpong *pp;
	int ret, one = 1;

	*out = NULL;
	pp = calloc(1, sizeof(*pp));
	if (!pp)
		return -ENOMEM;
	pp->lfd = -1;
	pthread_mutex_init(&pp->lock, NULL);
	ret = getaddrinfo(host, "0", &hints, &ai);
	if (ret) {
		snprintf(err, errlen, "ping-pong: cannot resolve %s: %s", host, gai_strerror(ret));
		ret = -EINVAL;
		goto err_free;
	}
	pp->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pp->lfd < 0) {
		ret = -errno;
		goto err_freeaddr;
	}
	setsockopt(pp->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(pp->lfd, ai->ai_addr, ai->ai_addrlen) || listen(pp->lfd, 64)) {
		ret = -errno;
		snprintf(err, errlen, "ping-pong: cannot listen on %s: %s", host, strerror(errno));
		goto err_close;
	}
	pp->addrlen = sizeof(pp->addr);
	if (getsockname(pp->lfd, (struct sockaddr *)&pp->addr, &pp->addrlen)) {
		ret = -errno;
		goto err_close;
	}
	ret = -pthread_create(&pp->acceptor, NULL, pp_accept, pp);
	if (ret)
		goto err_close;
	pp->acceptor_started = true;
	freeaddrinfo(ai);
	*out = pp;
	return 0;

err_close:
	close(pp->lfd);
err_freeaddr:
	freeaddrinfo(ai);
err_free:
	pthread_mutex_destroy(&pp->lock);
	free(pp);
	if (!err[0])
		snprintf(err, errlen, "ping-pong: %s", rdps_strerror(ret));
	return ret;
}

void bench_pingpong_stop(struct bench_pingpong *pp)
{
	if (!pp)
		return;
	pthread_mutex_lock(&pp->lock);
	pp->stopping = true;
	pthread_mutex_unlock(&pp->lock);
	/* shutdown() wakes the blocked accept() and recv()s. */
	shutdown(pp->lfd, SHUT_RDWR);
	if (pp->acceptor_started)
		pthread_join(pp->acceptor, NULL);
	for (int i = 0; i < pp->nconns; i++)
		shutdown(pp->conns[i].fd, SHUT_RDWR);
	for (int i = 0; i < pp->nconns; i++) {
		pthread_join(pp->conns[i].thread, NULL);
		close(pp->conns[i].fd);
	}
	close(pp->lfd);
	pthread_mutex_destroy(&pp->lock);
	free(pp);
}

int bench_pingpong_connect(struct bench_pingpong *pp)
{
	int fd = socket(pp->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&pp->addr, pp->addrlen)) {
		int e = errno;

		close(fd);
		return -e;
	}
	set_nodelay(fd);
	return fd;
}

int bench_pingpong_open(struct bench_pingpong *pp, size_t buf_bytes, int *fd, void **buf)
{
	*fd = bench_pingpong_connect(pp);
	*buf = bench_alloc(buf_bytes);
	if (*fd < 0)
		return *fd;
	return *buf ? 0 : -ENOMEM;
}

int bench_pingpong_send(int fd, void *buf, uint32_t req_bytes, uint32_t reply_bytes)
{
	uint32_t *hdr = buf;

	hdr[0] = req_bytes;
	hdr[1] = reply_bytes;
	return send_all(fd, buf, req_bytes);
}

int bench_pingpong_recv(int fd, void *buf, uint32_t reply_bytes)
{
	return recv_all(fd, buf, reply_bytes);
}

int bench_pingpong_once(int fd, void *buf, uint32_t req_bytes, uint32_t reply_bytes)
{
	uint32_t *hdr = buf;
	int ret;

	hdr[0] = req_bytes;
	hdr[1] = reply_bytes;
	ret = send_all(fd, buf, req_bytes);
	if (!ret)
		ret = recv_all(fd, buf, reply_bytes);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* perftest                                                                */

/* Columns of the result row following the header line that contains key. */
static int parse_result_row(FILE *f, const char *key, double *cols, int maxcols, char *tail,
			    size_t taillen)
{
	char line[1024];
	bool header = false;
	int found = 0;

	tail[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		size_t tl = strlen(tail), ll = strlen(line);

		/* Keep the last lines for the error message. */
		if (tl + ll >= taillen) {
			size_t drop = tl + ll - taillen + 1;

			if (drop > tl)
				drop = tl;
			memmove(tail, tail + drop, tl - drop + 1);
		}
		strncat(tail, line, taillen - strlen(tail) - 1);
		if (strstr(line, key)) {
			header = true;
			continue;
		}
		if (header && !found) {
			char *p = line, *end;
			int n = 0;

			while (n < maxcols) {
				double v = strtod(p, &end);

				if (end == p)
					break;
				cols[n++] = v;
				p = end;
			}
			if (n >= 3)
				found = n;
		}
	}
	return found;
}

struct perftest_parse {
	const char *key;
	double *cols;
	int maxcols;
};

static int parse_perftest(FILE *out, void *arg, char *tail, size_t taillen)
{
	struct perftest_parse *pa = arg;

	return parse_result_row(out, pa->key, pa->cols, pa->maxcols, tail, taillen);
}

/* The client of a server just started: one that comes before the server
 * listens fails at once ("Couldn't connect", "failed to connect"), so it
 * is started again every 200 ms until parse() finds its result or 30 s
 * pass. parse() reads the client's output, keeps its last lines in tail,
 * and returns how much it found (0: nothing). Returns that, with the last
 * client's exit in *exit_ret. */
static int client_until_connected(char *const *argv,
				  int (*parse)(FILE *out, void *arg, char *tail, size_t taillen),
				  void *arg, char *tail, size_t taillen, int *exit_ret)
{
	uint64_t deadline = rdps_now_ns() + 30ull * 1000000000ull;
	struct bench_child cli;
	int found = 0, ret;

	do {
		struct timespec ts = { 0, 200 * 1000000L };

		nanosleep(&ts, NULL);
		ret = bench_child_start((char **)argv, NULL, true, false, &cli);
		if (ret)
			break;
		found = parse(cli.out, arg, tail, taillen);
		ret = bench_child_wait(&cli);
	} while (!found && ret && rdps_now_ns() < deadline && strstr(tail, "onnect"));
	*exit_ret = ret;
	return found;
}


int bench_perftest(const char *tool, const struct bench_perftest_opts *o, uint32_t bytes,
		   struct bench_perftest *out, char *err, size_t errlen)
{
	char size[16], iters[16], secs[16], port[8], gid[8], tmo[16], qps[16], ctail[2048];
	char *argv[24];
	struct bench_child srv;
	bool lat = strstr(tool, "lat") != NULL;
	double cols[12];
	int n = 0, ret = -EIO, found = 0;

	snprintf(size, sizeof(size), "%u", bytes);
	snprintf(iters, sizeof(iters), "%u", o->iters);
	snprintf(secs, sizeof(secs), "%u", o->seconds ? o->seconds : 1);
	snprintf(port, sizeof(port), "%u", o->port);
	snprintf(gid, sizeof(gid), "%d", o->gid_index);
	snprintf(tmo, sizeof(tmo), "%d", o->timeout_s);
	argv[n++] = "timeout";
	argv[n++] = "-k";
	argv[n++] = "5";
	argv[n++] = tmo;
	argv[n++] = (char *)tool;
	argv[n++] = "-d";
	argv[n++] = (char *)o->dev;
	if (o->gid_index >= 0) {
		argv[n++] = "-x";
		argv[n++] = gid;
	}
	argv[n++] = "-F"; /* no CPU-frequency check (meaningless in a VM) */
	argv[n++] = "-s";
	argv[n++] = size;
	if (lat) {
		argv[n++] = "-n";
		argv[n++] = iters;
	} else {
		argv[n++] = "-D";
		argv[n++] = secs;
		if (o->qps > 1) {
			snprintf(qps, sizeof(qps), "%u", o->qps);
			argv[n++] = "-q";
			argv[n++] = qps;
		}
	}
	argv[n++] = "-p";
	argv[n++] = port;
	argv[n] = NULL;
	ret = bench_child_start(argv, NULL, true, false, &srv);
	if (ret) {
		snprintf(err, errlen, "cannot start %s: %s", tool, rdps_strerror(ret));
		return ret;
	}
	/* The server listens within a moment; a client that comes too early
	 * fails at once ("Couldn't connect"), so retry until a deadline. */
	argv[n++] = (char *)o->host;
	argv[n] = NULL;
	{
		struct perftest_parse pa = { lat ? "t_typical" : "MsgRate", cols,
					     (int)RDPS_ARRAY_SIZE(cols) };

		found = client_until_connected(argv, parse_perftest, &pa, ctail, sizeof(ctail),
					       &ret);
	}
	/* The server exits after its one run. */
	if (!found)
		bench_child_kill(&srv);
	else
		bench_child_wait(&srv);
	if (!found || (lat && found < 9) || (!lat && found < 5)) {
		snprintf(err, errlen, "%s -s %u gave no result row (exit %d); its output ends:\n%s",
			 tool, bytes, ret, ctail);
		return -EIO;
	}
	if (lat) {
		/* #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9% */
		out->typical_us = cols[4];
		out->avg_us = cols[5];
		out->p99_us = cols[7];
		out->p999_us = cols[8];
	} else {
		/* #bytes #iterations BW_peak BW_average MsgRate[Mpps] */
		out->msg_rate = cols[4] * 1e6;
		out->bw_bytes_s = out->msg_rate * bytes;
	}
	return 0;
}

int bench_rdma_device(const char *host, char *dev, size_t devlen, int *gid_index, char *err,
		      size_t errlen)
{
	struct ibv_device **list;
	struct in_addr a;
	union ibv_gid want;
	int num = 0, ret = -ENOENT;

	list = ibv_get_device_list(&num);
	if (!list || !num) {
		if (list)
			ibv_free_device_list(list);
		snprintf(err, errlen, "no RDMA device on this host (ibv_get_device_list found none)");
		return -ENODEV;
	}
	snprintf(dev, devlen, "%s", ibv_get_device_name(list[0]));
	*gid_index = -1;
	if (inet_pton(AF_INET, host, &a) != 1) {
		ibv_free_device_list(list);
		return 0; /* not IPv4: perftest's default GID */
	}
	/* RoCE v2 GID of an IPv4 address: ::ffff:a.b.c.d */
	memset(&want, 0, sizeof(want));
	want.raw[10] = want.raw[11] = 0xff;
	memcpy(&want.raw[12], &a, 4);
	for (int d = 0; d < num && ret; d++) {
		struct ibv_context *ctx = ibv_open_device(list[d]);
		struct ibv_port_attr pa;

		if (!ctx)
			continue;
		if (!ibv_query_port(ctx, 1, &pa)) {
			for (int i = 0; i < pa.gid_tbl_len; i++) {
				struct ibv_gid_entry e;

				if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0))
					continue;
				if (e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
				    !memcmp(e.gid.raw, want.raw, 16)) {
					snprintf(dev, devlen, "%s", ibv_get_device_name(list[d]));
					*gid_index = i;
					ret = 0;
					break;
				}
			}
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (ret)
		snprintf(err, errlen, "no RoCE v2 GID for %s on any RDMA device", host);
	return ret;
}

int bench_perftest_setup(struct bench_perftest_opts *po, const char *host, const char *ib_dev,
			 int gid_index, char *dev, size_t devlen, char *err, size_t errlen)
{
	int ret = bench_rdma_device(host, dev, devlen, &po->gid_index, err, errlen);

	if (ret && !ib_dev)
		return ret;
	po->dev = ib_dev ? ib_dev : dev;
	if (gid_index >= 0)
		po->gid_index = gid_index;
	po->host = host;
	po->timeout_s = 120;
	po->seconds = 2;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* fi_pingpong (libfabric-bin)                                             */

const char *bench_ofi_provider(void)
{
	const char *named = getenv("RDPS_OFI_PROVIDER"), *fip = getenv("FI_PROVIDER");

	/* As the ofi transport picks (transport/ofi_setup.c): --ofi-provider,
	 * else efa where there is one, else libfabric's choice within
	 * FI_PROVIDER; fi_pingpong needs a name, so efa stands for the first. */
	if (named && *named)
		return named;
	if (fip && *fip)
		return fip;
	return "efa";
}

/* fi_pingpong's result row: "bytes #sent #ack total time MB/sec usec/xfer
 * Mxfers/sec", the counts with k/m suffixes; the last three are numbers. */
static bool parse_fipp_row(FILE *f, double *mb_s, double *usec, char *tail, size_t taillen)
{
	char line[1024];
	bool header = false, found = false;

	tail[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		char *tok[16], *save = NULL, copy[1024];
		size_t tl = strlen(tail), ll = strlen(line);
		int n = 0;

		if (tl + ll >= taillen) {
			size_t drop = tl + ll - taillen + 1;

			if (drop > tl)
				drop = tl;
			memmove(tail, tail + drop, tl - drop + 1);
		}
		strncat(tail, line, taillen - strlen(tail) - 1);
		if (strstr(line, "usec/xfer")) {
			header = true;
			continue;
		}
		if (!header || found)
			continue;
		snprintf(copy, sizeof(copy), "%s", line);
		for (char *t = strtok_r(copy, " \t\n", &save); t && n < 16;
		     t = strtok_r(NULL, " \t\n", &save))
			tok[n++] = t;
		if (n >= 8) {
			char *e1, *e2;

			*mb_s = strtod(tok[n - 3], &e1);
			*usec = strtod(tok[n - 2], &e2);
			found = *e1 == 0 && *e2 == 0 && *usec > 0;
		}
	}
	return found;
}

struct fipp_parse {
	double *mb_s, *usec;
};

static int parse_fipp(FILE *out, void *arg, char *tail, size_t taillen)
{
	struct fipp_parse *pa = arg;

	return parse_fipp_row(out, pa->mb_s, pa->usec, tail, taillen);
}

int bench_fi_pingpong(const struct bench_fipp_opts *o, uint32_t bytes, struct bench_fipp *out,
		      char *err, size_t errlen)
{
	char size[16], iters[16], port[8], tmo[16], ctail[2048];
	char *argv[24];
	struct bench_child srv;
	double mb_s = NAN, usec = NAN;
	bool found = false;
	int n = 0, ret;

	snprintf(size, sizeof(size), "%u", bytes);
	snprintf(iters, sizeof(iters), "%u", o->iters ? o->iters : 1000);
	snprintf(port, sizeof(port), "%u", o->port);
	snprintf(tmo, sizeof(tmo), "%d", o->timeout_s > 0 ? o->timeout_s : 120);
	argv[n++] = "timeout";
	argv[n++] = "-k";
	argv[n++] = "5";
	argv[n++] = tmo;
	argv[n++] = "fi_pingpong";
	argv[n++] = "-p";
	argv[n++] = (char *)o->prov;
	argv[n++] = "-e";
	argv[n++] = "rdm"; /* the ofi transport's endpoints: reliable datagrams */
	argv[n++] = "-S";
	argv[n++] = size;
	argv[n++] = "-I";
	argv[n++] = iters;
	argv[n++] = "-B";
	argv[n++] = port;
	argv[n] = NULL;
	ret = bench_child_start(argv, NULL, true, false, &srv);
	if (ret) {
		snprintf(err, errlen, "cannot start fi_pingpong: %s", rdps_strerror(ret));
		return ret;
	}
	/* The client: -P (the server's control port) instead of -B, and the
	 * server's address. A client that comes before the server listens
	 * fails at once ("failed to connect"): retry until a deadline. */
	argv[n - 2] = "-P";
	argv[n++] = (char *)o->host;
	argv[n] = NULL;
	{
		struct fipp_parse pa = { &mb_s, &usec };

		found = client_until_connected(argv, parse_fipp, &pa, ctail, sizeof(ctail), &ret);
	}
	if (!found)
		bench_child_kill(&srv);
	else
		bench_child_wait(&srv);
	if (!found) {
		snprintf(err, errlen, "fi_pingpong -p '%s' -S %u gave no result row (exit %d); its "
			 "output ends:\n%s", o->prov, bytes, ret, ctail);
		return -EIO;
	}
	*out = (struct bench_fipp){ .bytes = bytes, .iters = o->iters ? o->iters : 1000,
				    .oneway_us = usec, .rtt_us = 2 * usec,
				    .bw_bytes_s = bytes / usec * 1e6, .mb_s = mb_s };
	return 0;
}

void bench_fipp_emit(const struct bench_fipp *f, const char *prov, const char *what)
{
	struct bench_json j;

	bench_json_begin(&j, "fi_pingpong");
	bench_json_str(&j, "provider", prov);
	bench_json_str(&j, "for", what);
	bench_json_int(&j, "bytes", f->bytes);
	bench_json_int(&j, "iters", f->iters);
	bench_json_num(&j, "oneway_us", f->oneway_us);
	bench_json_num(&j, "rtt_us", f->rtt_us);
	bench_json_num(&j, "gb_per_s", f->bw_bytes_s / 1e9);
	bench_json_num(&j, "msgs_per_s", 1e6 / f->oneway_us);
	bench_json_end(&j);
}

/* ---------------------------------------------------------------------- */
/* Peak FMA rate                                                           */

#if defined(__x86_64__)
#include <immintrin.h>

/* FMA_CHAINS independent chains a = a * m + c: enough to keep two FMA pipes
 * busy through a latency of up to 6 cycles (Zen 2-5: 2 pipes, 3-5 cycles;
 * Intel since Haswell: 2 ports, 4-5 cycles), and few enough to stay in the
 * 16 vector registers of AVX2 with m and c. m < 1 and c > 0 keep every
 * accumulator near c / (1 - m) = 1: no overflow, no denormals. */
#define FMA_CHAINS 12
#define FMA_BLOCK 4096 /* iterations between clock reads */

#define FMA_BODY(T, SET1, OP, ADD)                                                  \
	T a[FMA_CHAINS], m = SET1(0.999f), c = SET1(0.001f), s;                     \
	float lanes[sizeof(T) / sizeof(float)], sum = 0;                            \
	for (int k = 0; k < FMA_CHAINS; k++)                                        \
		a[k] = SET1(0.5f + 0.01f * (float)k);                               \
	for (uint64_t i = 0; i < iters; i++) {                                      \
		_Pragma("GCC unroll 12")                                            \
		for (int k = 0; k < FMA_CHAINS; k++)                                \
			a[k] = OP(a[k], m, c);                                      \
	}                                                                           \
	s = a[0];                                                                   \
	for (int k = 1; k < FMA_CHAINS; k++)                                        \
		s = ADD(s, a[k]);                                                   \
	memcpy(lanes, &s, sizeof(lanes));                                           \
	for (size_t l = 0; l < sizeof(lanes) / sizeof(float); l++)                  \
		sum += lanes[l];                                                    \
	return sum

__attribute__((target("avx512f"))) static float fma_avx512(uint64_t iters)
{
	FMA_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(uint64_t iters)
{
	FMA_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps);
}

/* No FMA unit: a multiply and a dependent add, 2 flops per lane. */
static inline __m128 mul_add_sse(__m128 a, __m128 m, __m128 c)
{
	return _mm_add_ps(_mm_mul_ps(a, m), c);
}

static float fma_sse2(uint64_t iters)
{
	FMA_BODY(__m128, _mm_set1_ps, mul_add_sse, _mm_add_ps);
}

const char *bench_fma_kernel_isa(void)
{
	return __builtin_cpu_supports("x86-64-v3") ? "avx2+fma" : "sse2";
}

bool bench_fma_supported(const char *isa)
{
	if (!strcmp(isa, "avx512f"))
		return __builtin_cpu_supports("avx512f");
	if (!strcmp(isa, "avx2+fma"))
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return !strcmp(isa, "sse2");
}

int bench_fma_peak(const char *isa, double round_s, unsigned rounds, struct bench_fma *out)
{
	float (*fn)(uint64_t);
	double rates[64];
	volatile float sink = 0;
	unsigned bits;

	if (!strcmp(isa, "avx512f")) {
		fn = fma_avx512;
		bits = 512;
	} else if (!strcmp(isa, "avx2+fma")) {
		fn = fma_avx2;
		bits = 256;
	} else if (!strcmp(isa, "sse2")) {
		fn = fma_sse2;
		bits = 128;
	} else {
		return -EINVAL;
	}
	if (!bench_fma_supported(isa))
		return -ENOTSUP;
	if (!rounds || rounds > RDPS_ARRAY_SIZE(rates))
		rounds = rounds ? (unsigned)RDPS_ARRAY_SIZE(rates) : 1;
	sink += fn(FMA_BLOCK); /* warm up: wakes the wide units, the clock ramps */
	for (unsigned r = 0; r < rounds; r++) {
		uint64_t t0 = rdps_now_ns(), t1, iters = 0;

		do {
			sink += fn(FMA_BLOCK);
			iters += FMA_BLOCK;
			t1 = rdps_now_ns();
		} while (t1 - t0 < (uint64_t)(round_s * 1e9));
		/* flops = iterations x chains x lanes x 2 */
		rates[r] = (double)iters * FMA_CHAINS * (bits / 32) * 2 / ((t1 - t0) / 1e9) / 1e9;
	}
	*out = (struct bench_fma){ .isa = isa, .bits = bits, .chains = FMA_CHAINS,
				   .rounds = rounds, .round_s = round_s };
	for (unsigned r = 0; r < rounds; r++)
		out->gflop_per_s = rates[r] > out->gflop_per_s ? rates[r] : out->gflop_per_s;
	out->median_gflop_per_s = bench_median(rates, rounds);
	(void)sink;
	return 0;
}
#else
const char *bench_fma_kernel_isa(void)
{
	return "none";
}

bool bench_fma_supported(const char *isa)
{
	return false;
}

int bench_fma_peak(const char *isa, double round_s, unsigned rounds, struct bench_fma *out)
{
	return -ENOTSUP;
}
#endif
