// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rdps/common.h"

int rdps_log_threshold = RDPS_LOG_INFO;

void rdps_log_init(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("RDPS_LOG_LEVEL");

	if (!v)
		return;
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(names); i++)
		if (!strcasecmp(v, names[i]))
			rdps_log_threshold = (int)i;
}

void rdps_log_write(int level, const char *fmt, ...)
{
	static const char *const tags[] = { "error", "warn", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (level < 0 || level > RDPS_LOG_DEBUG)
		level = RDPS_LOG_ERROR;
	n = snprintf(line, sizeof(line), "rdps[%d] %s: ", (int)getpid(),
		     tags[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write() per line keeps lines of concurrent processes whole. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

uint64_t rdps_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int rdps_ms_until(uint64_t deadline_ns)
{
	uint64_t now = rdps_now_ns();

	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

int rdps_reserve(void **buf, size_t *cap, size_t need)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 4096;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*buf, ncap);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = ncap;
	return 0;
}

const char *rdps_strerror(int neg_errno)
{
	switch (-neg_errno) {
	case 0:
		return "success";
	case EPROTO:
		return "protocol error";
	case ETIMEDOUT:
		return "timed out";
	case ECONNRESET:
		return "connection reset by peer";
	case ERANGE:
		return "id out of range";
	case ENOENT:
		return "not found";
	case EACCES:
		return "authentication failed";
	default:
		return strerror(-neg_errno);
	}
}
