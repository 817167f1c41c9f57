// SPDX-License-Identifier: MIT
/* rdps bench harness: latency recorder, JSON lines, human table, options,
 * child processes. See bench.h. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/bench.h"

/* ---------------------------------------------------------------------- */
/* Latency recorder                                                        */

int bench_lat_init(struct bench_lat *l, size_t cap)
{
	l->n = 0;
	l->cap = cap ? cap : 1;
	/* Touched now, so the measured loop never faults a page in. */
	l->ns = bench_alloc(l->cap * sizeof(uint64_t));
	return l->ns ? 0 : -ENOMEM;
}

void bench_lat_free(struct bench_lat *l)
{
	free(l->ns);
	l->ns = NULL;
	l->cap = l->n = 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double bench_lat_quantile_us(const struct bench_lat *l, double q)
{
	size_t i;

	if (!l->n)
		return NAN;
	/* Nearest rank, as perftest's percentiles. */
	i = (size_t)ceil(q * (double)l->n);
	i = i ? i - 1 : 0;
	if (i >= l->n)
		i = l->n - 1;
	return l->ns[i] / 1e3;
}

void bench_lat_summary(struct bench_lat *l, struct bench_pct *out)
{
	double sum = 0;

	out->n = l->n;
	if (!l->n) {
		out->min_us = out->mean_us = out->p50_us = out->p99_us = out->p999_us =
			out->max_us = NAN;
		return;
	}
	qsort(l->ns, l->n, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < l->n; i++)
		sum += (double)l->ns[i];
	out->min_us = l->ns[0] / 1e3;
	out->max_us = l->ns[l->n - 1] / 1e3;
	out->mean_us = sum / (double)l->n / 1e3;
	out->p50_us = bench_lat_quantile_us(l, 0.5);
	out->p99_us = bench_lat_quantile_us(l, 0.99);
	out->p999_us = bench_lat_quantile_us(l, 0.999);
}

void bench_lat_write_cdf(const struct bench_lat *l, FILE *f, const char *label)
{
	static const double tail[] = { 0.995, 0.999, 0.9995, 0.9999, 1.0 };

	if (!l->n || !f)
		return;
	for (int i = 0; i <= 99; i++) {
		double q = i / 100.0;

		fprintf(f, "%s %.4f %.3f\n", label, q, bench_lat_quantile_us(l, q ? q : 1e-9));
	}
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(tail); i++)
		fprintf(f, "%s %.4f %.3f\n", label, tail[i], bench_lat_quantile_us(l, tail[i]));
	fprintf(f, "\n\n"); /* gnuplot data-set separator */
}

/* ---------------------------------------------------------------------- */
/* JSON lines                                                              */

static void json_raw(struct bench_json *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void json_raw(struct bench_json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->len >= sizeof(j->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		j->len += (size_t)n;
}

static void json_key(struct bench_json *j, const char *key)
{
	json_raw(j, ",\"%s\":", key);
}

void bench_json_begin(struct bench_json *j, const char *bench)
{
	j->len = 0;
	json_raw(j, "{\"bench\":");
	bench_json_str(j, NULL, bench);
}

void bench_json_str(struct bench_json *j, const char *key, const char *val)
{
	if (key)
		json_key(j, key);
	json_raw(j, "\"");
	for (const char *p = val; *p; p++) {
		if (*p == '"' || *p == '\\')
			json_raw(j, "\\%c", *p);
		else if ((unsigned char)*p < 0x20)
			json_raw(j, "\\u%04x", (unsigned char)*p);
		else
			json_raw(j, "%c", *p);
	}
	json_raw(j, "\"");
}

void bench_json_num(struct bench_json *j, const char *key, double v)
{
	json_key(j, key);
	if (isfinite(v))
		json_raw(j, "%.6g", v);
	else
		json_raw(j, "null");
}

void bench_json_int(struct bench_json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	json_raw(j, "%llu", (unsigned long long)v);
}

void bench_json_bool(struct bench_json *j, const char *key, bool v)
{
	json_key(j, key);
	json_raw(j, "%s", v ? "true" : "false");
}

void bench_json_end(struct bench_json *j)
{
	json_raw(j, "}");
	if (j->len >= sizeof(j->buf))
		j->len = sizeof(j->buf) - 1; /* cannot happen with our keys */
	fwrite(j->buf, 1, j->len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

void bench_table_title(const char *fmt, ...)
{
	va_list ap;

	fputc('\n', stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void bench_table_row(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

double bench_ratio(double figure, double limit)
{
	if (!isfinite(figure) || !isfinite(limit) || limit == 0)
		return NAN;
	return figure / limit;
}

/* ---------------------------------------------------------------------- */
/* Options                                                                 */

int bench_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1000; end++; break;
	case 'M': mul = 1000000; end++; break;
	case 'G': mul = 1000000000; end++; break;
	default: break;
	}
	if (*end || (v && mul > UINT64_MAX / v))
		return -EINVAL;
	v *= mul;
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

int bench_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -EINVAL;
	*out = v;
	return 0;
}

int bench_parse_list(const char *s, uint64_t *out, int max)
{
	char tmp[256], *save = NULL, *tok;
	int n = 0;

	if (strlen(s) >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, s, strlen(s) + 1);
	for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max || bench_parse_u64(tok, 1, UINT32_MAX, &out[n]))
			return -EINVAL;
		n++;
	}
	return n ? n : -EINVAL;
}

/* True if host 127.0.0.1 can bind port now (TCP). */
static bool port_free(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return false;
	ok = !bind(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return ok;
}

uint16_t bench_pick_port(uint64_t base, unsigned span)
{
	uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ rdps_now_ns();

	if (base)
		return (uint16_t)base;
	for (int tries = 0; tries < 200; tries++) {
		uint16_t p = (uint16_t)(20000 + bench_rand(&seed) % 20000);
		unsigned i;

		for (i = 0; i < span && port_free((uint16_t)(p + i)); i++)
			;
		if (i == span)
			return p;
	}
	return (uint16_t)(20000 + getpid() % 20000);
}

void bench_fill_ids(uint64_t *ids, size_t n, uint64_t rows, bool clustered, uint64_t *seed)
{
	if (clustered) {
		uint64_t span = rows > n ? rows - n + 1 : 1, start = bench_rand(seed) % span;

		for (size_t i = 0; i < n; i++)
			ids[i] = (start + i) % rows;
		return;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = bench_rand(seed) % rows;
}

void *bench_alloc(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, bytes ? bytes : 1))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

/* ---------------------------------------------------------------------- */
/* Child processes                                                         */

int bench_child_start(char *const argv[], const char *out_path, bool merge_stderr,
		      bool quiet_stderr, struct bench_child *c)
{
	int fds[2];
	pid_t pid;

	c->pid = -1;
	c->out = NULL;
	if (out_path) {
		fds[0] = -1;
		fds[1] = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fds[1] < 0)
			return -errno;
	} else if (pipe2(fds, O_CLOEXEC)) {
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;

		if (fds[0] >= 0)
			close(fds[0]);
		close(fds[1]);
		return -e;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		if (merge_stderr) {
			dup2(fds[1], STDERR_FILENO);
		} else if (quiet_stderr) {
			int dn = open("/dev/null", O_WRONLY);

			if (dn >= 0)
				dup2(dn, STDERR_FILENO);
		}
		if (!strcmp(argv[0], "rdps"))
			execv("/proc/self/exe", argv);
		else
			execvp(argv[0], argv);
		fprintf(stderr, "rdps bench: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	c->pid = pid;
	if (fds[0] < 0)
		return 0;
	c->out = fdopen(fds[0], "r");
	if (!c->out) {
		close(fds[0]);
		bench_child_kill(c);
		return -ENOMEM;
	}
	return 0;
}

int bench_child_wait(struct bench_child *c)
{
	int st;

	if (c->out) {
		/* Drain what is left so the child never blocks on a full pipe. */
		char line[512];

		while (fgets(line, sizeof(line), c->out))
			;
		fclose(c->out);
		c->out = NULL;
	}
	if (c->pid <= 0)
		return -ECHILD;
	while (waitpid(c->pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	c->pid = -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

void bench_child_kill(struct bench_child *c)
{
	if (c->pid > 0)
		kill(c->pid, SIGTERM);
	if (c->out) {
		fclose(c->out);
		c->out = NULL;
	}
	if (c->pid > 0) {
		int st;

		while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
			;
		c->pid = -1;
	}
}

bool bench_worker_wait(struct bench_worker *w)
{
	int go;

	if (!w->go)
		return true;
	/* A spin, not a barrier: a run whose threads did not all start must
	 * still let the started ones go. */
	while (!(go = __atomic_load_n(w->go, __ATOMIC_ACQUIRE)))
		sched_yield();
	return go > 0;
}

int bench_run_workers(void *workers, size_t stride, uint32_t k, void *(*fn)(void *),
		      uint64_t *count, uint64_t *ns)
{
	int go = 0, ret = 0;
	uint32_t started = 0;

	*count = 0;
	*ns = 0;
	for (uint32_t i = 0; i < k; i++) {
		struct bench_worker *w = (struct bench_worker *)((char *)workers + i * stride);

		w->go = &go;
		w->ret = 0;
		w->count = w->ns = 0;
		ret = -pthread_create(&w->thread, NULL, fn, w);
		if (ret)
			break;
		started++;
	}
	__atomic_store_n(&go, ret ? -1 : 1, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < started; i++) {
		struct bench_worker *w = (struct bench_worker *)((char *)workers + i * stride);

		pthread_join(w->thread, NULL);
		w->go = NULL;
		if (w->ret && !ret)
			ret = w->ret;
		*count += w->count;
		*ns = w->ns > *ns ? w->ns : *ns;
	}
	return ret;
}

double bench_run_rate(void *workers, size_t stride, uint32_t k, void *(*fn)(void *))
{
	uint64_t count, ns;
	int ret = bench_run_workers(workers, stride, k, fn, &count, &ns);

	if (ret)
		return ret;
	return ns ? count / (ns / 1e9) : 0;
}
