// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps_test.h"

char *rdps_test_tmpdir(const char *tag)
{
	char tmpl[256];

	snprintf(tmpl, sizeof(tmpl), "/tmp/rdps-test-%s-XXXXXX", tag);
	if (!mkdtemp(tmpl))
		return NULL;
	return strdup(tmpl);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int rdps_test_rmtree(const char *dir)
{
	if (!dir)
		return 0;
	return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *rdps_test_write(const char *dir, const char *name, const char *text)
{
	char *path;
	FILE *f;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	f = fopen(path, "w");
	if (!f) {
		free(path);
		return NULL;
	}
	fputs(text, f);
	fclose(f);
	return path;
}

static int port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;

	if (s < 0)
		return 0;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* The wildcard address: it conflicts with a listener on any address
	 * (tests in the soft-RoCE guest listen on RDPS_TEST_HOST, not on
	 * 127.0.0.1) and with a connection using the port as its own. */
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(s);
	return ok;
}

/* The ports the kernel gives outgoing connections (and listeners of port
 * 0, as libfabric's tcp provider opens): a test port taken from them may be
 * some other suite's connection by the time its server binds it. */
static void ephemeral_range(int *lo, int *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	*lo = 32768;
	*hi = 60999;
	if (f) {
		if (fscanf(f, "%d %d", lo, hi) != 2) {
			*lo = 32768;
			*hi = 60999;
		}
		fclose(f);
	}
}

int rdps_test_free_ports(int n)
{
	/* Spread concurrent suites (ctest -j) over the range by pid and time. */
	unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
	int lo, hi, from, span;

	/* Below the ephemeral range (or above it, if that leaves more). */
	ephemeral_range(&lo, &hi);
	if (lo - 10000 >= 65535 - hi) {
		from = 10000;
		span = lo - 10000 - n;
	} else {
		from = hi + 1;
		span = 65535 - hi - n;
	}
	if (span < 1000) {
		from = 20000;
		span = 30000;
	}
	for (int attempt = 0; attempt < 1000; attempt++) {
		int base = from + (int)((seed = seed * 1103515245u + 12345u) % (unsigned)span);
		int ok = 1;

		for (int i = 0; i < n && ok; i++)
			ok = port_free(base + i);
		if (ok)
			return base;
	}
	return -EADDRINUSE;
}

pid_t rdps_test_spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		/* A failed assertion ends the test process: take the child with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

int rdps_test_wait(pid_t pid, int timeout_ms, int *status)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0)
			return -errno;
		if (rdps_now_ns() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return -ETIMEDOUT;
		}
		usleep(5000);
	}
}

int rdps_test_wait_port(const char *host, int port, int timeout_ms)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	inet_pton(AF_INET, host, &a.sin_addr);
	while (rdps_now_ns() < deadline) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s >= 0 && !connect(s, (struct sockaddr *)&a, sizeof(a))) {
			close(s);
			return 0;
		}
		if (s >= 0)
			close(s);
		usleep(10000);
	}
	return -ETIMEDOUT;
}

char *rdps_test_port_report(int port, const char *const *logs)
{
	char cmd[160], *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len), *p;

	if (!m)
		return strdup("(no memory for the report)");
	snprintf(cmd, sizeof(cmd), "ss -tanpo '( sport = :%d or dport = :%d )' 2>&1", port, port);
	fprintf(m, "sockets on port %d:\n", port);
	p = popen(cmd, "r");
	if (p) {
		char line[512];

		while (fgets(line, sizeof(line), p))
			fputs(line, m);
		pclose(p);
	}
	for (; logs && *logs; logs++) {
		char *text = rdps_test_slurp(*logs), *tail = text;

		/* The last 2 KiB: enough for a server's start-up and its errors. */
		if (text && strlen(text) > 2048)
			tail = text + strlen(text) - 2048;
		fprintf(m, "---- %s%s\n%s", *logs, text ? "" : " (cannot read)", tail ? tail : "");
		free(text);
	}
	fclose(m);
	return out;
}

char *rdps_test_slurp(const char *path)
{
	return rdps_test_slurp_len(path, NULL);
}

char *rdps_test_slurp_len(const char *path, size_t *out_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	if (!f)
		return NULL;
	do {
		if (rdps_reserve((void **)&buf, &cap, len + 4097)) {
			free(buf);
			fclose(f);
			return NULL;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n);
	buf[len] = '\0';
	fclose(f);
	if (out_len)
		*out_len = len;
	return buf;
}

int rdps_test_recv_all(int s, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(s, p, len, 0);

		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
