// SPDX-License-Identifier: MIT
/* See rdps_srvproc.h. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps_srvproc.h"
#include "rdps_test.h"
#include "transport/wire.h"

struct srvp srvp;

static const char *host(void)
{
	return srvp.host[0] ? srvp.host : "127.0.0.1";
}

void srvp_start(const char *nofile, bool secret, const char *const *extra)
{
	static char script[96];
	char text[64], *argv[48], *log;
	int n = 0;

	srvp.port = rdps_test_free_ports(1);
	cr_assert_gt(srvp.port, 0);
	srvp.dir = rdps_test_tmpdir("hardening");
	snprintf(text, sizeof(text), "%s %d\n", host(), srvp.port);
	srvp.ipc = rdps_test_write(srvp.dir, "ip_config.txt", text);
	srvp.secret = rdps_test_write(srvp.dir, "secret", SECRET "\n");
	cr_assert(asprintf(&srvp.log, "%s/server.log", srvp.dir) > 0);
	if (nofile) {
		snprintf(script, sizeof(script), "ulimit -n %s && exec \"$0\" \"$@\"", nofile);
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = script;
	}
	argv[n++] = RDPS_BIN;
	argv[n++] = "server";
	argv[n++] = "--ip_config";
	argv[n++] = srvp.ipc;
	argv[n++] = "--server_id";
	argv[n++] = "0";
	argv[n++] = "--transport";
	argv[n++] = "tcp";
	if (secret) {
		argv[n++] = "--secret-file";
		argv[n++] = srvp.secret;
	}
	for (int i = 0; extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	unsetenv("RDPS_SECRET");
	srvp.pid = rdps_test_spawn(argv, srvp.log);
	/* A loaded machine starts a process slowly: a generous bound. */
	if (rdps_test_wait_port(host(), srvp.port, 60000)) {
		log = rdps_test_slurp(srvp.log);
		cr_assert_fail("server did not start:\n%s", log);
	}
}

void srvp_stop(void)
{
	int st;

	if (srvp.pid > 0) {
		kill(srvp.pid, SIGTERM);
		cr_assert_eq(rdps_test_wait(srvp.pid, 30000, &st), 0, "server ignored SIGTERM");
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit status %d", st);
	}
	rdps_test_rmtree(srvp.dir);
	free(srvp.ipc);
	free(srvp.log);
	free(srvp.secret);
	free(srvp.dir);
	memset(&srvp, 0, sizeof(srvp)); /* the host too: each start sets its own */
}

int srvp_raw_connect(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srvp.port) };
	struct timeval tv = { .tv_sec = 10 };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(s, 0, "socket: %s", strerror(errno));
	inet_pton(AF_INET, host(), &a.sin_addr);
	cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0, "connect: %s",
		     strerror(errno));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return s;
}

int srvp_local_port(int s)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
	return ntohs(a.sin_port);
}

void srvp_send_all(int s, const void *buf, size_t len)
{
	cr_assert_eq(send(s, buf, len, MSG_NOSIGNAL), (ssize_t)len, "send: %s", strerror(errno));
}

void srvp_send_hdr(int s, uint8_t type, uint32_t len)
{
	struct rdps_wire_hdr h;

	rdps_wire_hdr_init(&h, type, len, 0);
	srvp_send_all(s, &h, sizeof(h));
}

void srvp_send_hello(int s, uint32_t client_id, uint32_t num_clients, uint32_t flags)
{
	struct rdps_wire_hello hl = { .client_id = client_id, .num_clients = num_clients,
				      .flags = flags };

	srvp_send_hdr(s, RDPS_REQ_HELLO, sizeof(hl));
	srvp_send_all(s, &hl, sizeof(hl));
}

/* Reads one frame of type (header and payload); returns its status. */
int srvp_recv_frame(int s, uint8_t type, void *buf, size_t cap)
{
	struct rdps_wire_hdr h;
	char tmp[4096];

	cr_assert_eq(rdps_test_recv_all(s, &h, sizeof(h)), 0, "no frame of type 0x%x came", type);
	cr_assert_eq(h.magic, RDPS_WIRE_MAGIC);
	cr_assert_eq(h.type, type, "frame type 0x%x, want 0x%x", h.type, type);
	if (!buf) {
		buf = tmp;
		cap = sizeof(tmp);
	}
	cr_assert_leq(h.len, cap, "frame of %u bytes", h.len);
	cr_assert_eq(rdps_test_recv_all(s, buf, h.len), 0, "frame of type 0x%x cut short", type);
	return h.status;
}

/* The server closed s (end of stream or reset), within the 10 s timeout. */
void srvp_expect_closed(int s, const char *what)
{
	char c;
	ssize_t n = recv(s, &c, 1, 0);

	cr_assert(n == 0 || (n < 0 && errno == ECONNRESET),
		  "%s: the server kept the connection open (recv: %zd, %s)", what, n,
		  n < 0 ? strerror(errno) : "data");
}

/* A field of /proc/PID/status in kB ("VmRSS:", "VmHWM:"). */
long srvp_proc_kb(pid_t pid, const char *field)
{
	char path[64], *text, *p;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	text = rdps_test_slurp(path);
	cr_assert(text, "cannot read %s", path);
	p = strstr(text, field);
	if (p)
		kb = strtol(p + strlen(field), NULL, 10);
	free(text);
	cr_assert_gt(kb, 0, "%s has no %s", path, field);
	return kb;
}

/* Resets the peak RSS (VmHWM) of pid to its current RSS. */
void srvp_reset_peak(pid_t pid)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	f = fopen(path, "w");
	cr_assert(f, "cannot open %s: %s", path, strerror(errno));
	fputs("5", f);
	cr_assert_eq(fclose(f), 0, "%s: %s", path, strerror(errno));
}

int srvp_count_lines(const char *log, const char *needle)
{
	int n = 0;

	for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Waits (up to 30 s) until the server's log holds needle; returns the log. */
char *srvp_wait_log(const char *needle)
{
	char *log = NULL;

	for (uint64_t end = rdps_now_ns() + 30000000000ull; rdps_now_ns() < end;) {
		free(log);
		log = rdps_test_slurp(srvp.log);
		if (log && strstr(log, needle))
			return log;
		usleep(10000);
	}
	cr_assert_fail("server log lacks '%s':\n%.4000s", needle, log ? log : "");
	return NULL;
}

void srvp_expect_log_peer(int port, const char *what)
{
	char needle[160];

	snprintf(needle, sizeof(needle), "client %s:%d: %s", host(), port, what);
	free(srvp_wait_log(needle));
}

int srvp_make_client(uint32_t id, uint32_t n, bool observer, bool secret,
		       struct rdps_client **out, char *err, size_t errlen)
{
	struct rdps_secret s = { .len = strlen(SECRET) };
	struct rdps_client_params p = { .ip_config = srvp.ipc, .transport = "tcp", .client_id = id,
					.num_clients = n, .timeout_ms = 30000, .quiet = true,
					.observer = observer, .secret = secret ? &s : NULL };

	memcpy(s.key, SECRET, s.len);
	return rdps_client_create(&p, out, err, errlen);
}

struct rdps_client *srvp_client(uint32_t id, uint32_t n, bool observer, bool secret)
{
	struct rdps_client *c;
	char err[640];

	cr_assert_eq(srvp_make_client(id, n, observer, secret, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

struct rdps_server_stats srvp_stats_of(struct rdps_client *c)
{
	struct rdps_server_stats st;

	cr_assert_eq(rdps_client_server_stats(c, 0, &st), 0, "%s", rdps_client_errmsg(c));
	return st;
}

/* Pushes and pulls one row of the 'entity' table (dim 4, sgd lr 1, zeros). */
void srvp_expect_served(struct rdps_client *c, uint64_t id)
{
	float g[4] = { 1, 2, 3, 4 }, before[4], after[4];

	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, before), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_push(c, 0, &id, g, 1), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, after), 0, "%s", rdps_client_errmsg(c));
	cr_assert_float_eq(after[3], before[3] - 4.0f, 1e-5);
}

