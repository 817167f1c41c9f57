// SPDX-License-Identifier: MIT
/* Helpers shared by the fuzz targets; see fuzz_common.h. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "rdps/common.h"

/* Replaces rdps_random_bytes in the fuzz build (-Wl,--wrap): nonces and
 * session tokens become a fixed pattern, so seeds carry valid MACs and every
 * input replays the same way. */
int __wrap_rdps_random_bytes(void *buf, size_t n);

int __wrap_rdps_random_bytes(void *buf, size_t n)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++)
		p[i] = FUZZ_RANDOM_BYTE(i);
	return 0;
}

/* A peer "from elsewhere" (fuzz_server.h): connections from 127.0.0.2 are
 * not on the servers' machine (-Wl,--wrap=rdps_sock_is_same_host, the
 * accept path's question), so the harness reaches protected mode and
 * observers that are not admins without a second machine. */
bool __real_rdps_sock_is_same_host(int fd, const struct sockaddr *sa);
bool __wrap_rdps_sock_is_same_host(int fd, const struct sockaddr *sa);

bool __wrap_rdps_sock_is_same_host(int fd, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET &&
	    ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(0x7f000002))
		return false;
	return __real_rdps_sock_is_same_host(fd, sa);
}

_Noreturn void fuzz_fail(const char *file, int line, const char *what)
{
	int err = errno;

	fprintf(stderr, "==%d== FUZZ CHECK FAILED at %s:%d: %s (errno: %s)\n", (int)getpid(),
		file, line, what, strerror(err));
	abort();
}

void fuzz_quiet_logs(void)
{
	rdps_log_threshold = RDPS_LOG_ERROR;
	if (getenv("RDPS_LOG_LEVEL"))
		rdps_log_init();
}

void fuzz_note(const char *fmt, ...)
{
	static int verbose = -1;
	va_list ap;

	if (verbose < 0)
		verbose = getenv("RDPS_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void fuzz_secret(struct rdps_secret *s)
{
	memset(s, 0, sizeof(*s));
	s->len = sizeof(FUZZ_SECRET) - 1;
	memcpy(s->key, FUZZ_SECRET, s->len);
}

size_t fuzz_split(const uint8_t *data, size_t len, const uint8_t **sec, size_t *seclen,
		  size_t max)
{
	size_t n = 0, start = 0, i = 0;

	while (n + 1 < max && i + FUZZ_SEP_LEN <= len) {
		if (!memcmp(data + i, FUZZ_SEP, FUZZ_SEP_LEN)) {
			sec[n] = data + start;
			seclen[n++] = i - start;
			i += FUZZ_SEP_LEN;
			start = i;
		} else {
			i++;
		}
	}
	sec[n] = data + start;
	seclen[n++] = len - start;
	return n;
}

static char workdir[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* The work directory and everything in it (targets make directories of
 * their own there: checkpoints, partitions). */
static void remove_workdir(void)
{
	nftw(workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes the work directories of processes that died without running
 * their atexit handler (a crash: libFuzzer exits with _Exit). */
static void remove_stale_workdirs(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int pid;
		char path[512], cmd[600];

		if (sscanf(e->d_name, "rdps-fuzz-%d-", &pid) != 1 || pid <= 0 ||
		    !kill(pid, 0) || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
		if (system(cmd))
			fprintf(stderr, "fuzz: could not remove %s\n", path);
	}
	closedir(d);
}

const char *fuzz_workdir(void)
{
	const char *base;
	struct stat st;

	if (workdir[0])
		return workdir;
	base = !stat("/dev/shm", &st) && S_ISDIR(st.st_mode) ? "/dev/shm" : getenv("TMPDIR");
	if (!base)
		base = "/tmp";
	remove_stale_workdirs(base);
	snprintf(workdir, sizeof(workdir), "%s/rdps-fuzz-%d-XXXXXX", base, (int)getpid());
	if (!mkdtemp(workdir)) {
		workdir[0] = '\0';
		return NULL;
	}
	atexit(remove_workdir);
	return workdir;
}

void fuzz_write_file(const char *dir, const char *name, const void *data, size_t len)
{
	const char *p = data;
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fuzz_fail(__FILE__, __LINE__, path);
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fuzz_fail(__FILE__, __LINE__, "write to the work directory");
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

void fuzz_remove_file(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}
