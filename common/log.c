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

/* Length of the UTF-8 sequence at p (up to end) if it is valid, minimal
 * and not a C1 control (U+0080..U+009F, which some terminals obey), else 0. */
static size_t utf8_printable(const unsigned char *p, const unsigned char *end)
{
	uint32_t cp;
	size_t n;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1fu;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0fu;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07u;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
		return 0;
	return n;
}

size_t rdps_escape(const char *in, size_t len, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)in, *end = p + len;
	size_t o = 0;

	if (!outlen)
		return 0;
	while (p < end) {
		size_t u = *p >= 0x80 ? utf8_printable(p, end) : 0;

		if (u) {
			if (o + u >= outlen)
				break;
			memcpy(out + o, p, u);
			o += u;
			p += u;
		} else if (*p < 0x20 || *p == 0x7f || *p >= 0x80 || *p == '\\') {
			if (o + 4 >= outlen)
				break;
			snprintf(out + o, 5, "\\x%02x", *p);
			o += 4;
			p++;
		} else {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)*p++;
		}
	}
	out[o] = '\0';
	return o;
}

void rdps_log_write(int level, const char *fmt, ...)
{
	static const char *const tags[] = { "error", "warn", "info", "debug" };
	char msg[1024], line[1024];
	va_list ap;
	int n, m;

	if (level < 0 || level > RDPS_LOG_DEBUG)
		level = RDPS_LOG_ERROR;
	n = snprintf(line, sizeof(line), "rdps[%d] %s: ", (int)getpid(),
		     tags[level]);
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	/* Names and reasons may come from peers: a control byte in them must
	 * not forge a line or move a terminal's cursor (log injection). */
	n += (int)rdps_escape(msg, (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1,
			      line + n, sizeof(line) - (size_t)n - 1);
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

const char *rdps_bytes_str(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u + 1 < RDPS_ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
