/* SPDX-License-Identifier: MIT */
/*
 * rdps common definitions: logging, error conventions, time.
 *
 * Conventions for the whole project: functions return 0 (or a count) on
 * success and a negative errno on failure; libraries never exit(); programs
 * log. Every handle has a create/destroy pair and destroy accepts NULL.
 */
#ifndef RDPS_COMMON_H
#define RDPS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_VERSION_STRING "0.1.0"

enum rdps_log_level {
	RDPS_LOG_ERROR = 0,
	RDPS_LOG_WARN = 1,
	RDPS_LOG_INFO = 2,
	RDPS_LOG_DEBUG = 3,
};

/* Current threshold; messages above it are dropped before their arguments
 * are evaluated. Set from RDPS_LOG_LEVEL (error|warn|info|debug) at start-up
 * by rdps_log_init() or directly. */
extern int rdps_log_threshold;

/* Reads RDPS_LOG_LEVEL from the environment; call once from main(). */
void rdps_log_init(void);

/* Writes one line "rdps[pid] LEVEL: msg" to stderr. Thread-safe. */
void rdps_log_write(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define rdps_log(level, ...)                                                  \
	do {                                                                  \
		if ((level) <= rdps_log_threshold)                            \
			rdps_log_write((level), __VA_ARGS__);                 \
	} while (0)

#define rdps_err(...) rdps_log(RDPS_LOG_ERROR, __VA_ARGS__)
#define rdps_warn(...) rdps_log(RDPS_LOG_WARN, __VA_ARGS__)
#define rdps_info(...) rdps_log(RDPS_LOG_INFO, __VA_ARGS__)
#define rdps_dbg(...) rdps_log(RDPS_LOG_DEBUG, __VA_ARGS__)

#ifndef container_of
#define container_of(ptr, type, member)                                       \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define RDPS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RDPS_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

/* A counter several threads add to (statistics: relaxed, each add whole). */
#define RDPS_STAT_ADD(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)

#define rdps_likely(x) __builtin_expect(!!(x), 1)
#define rdps_unlikely(x) __builtin_expect(!!(x), 0)

/* Monotonic clock in nanoseconds. */
uint64_t rdps_now_ns(void);

/* Milliseconds left until deadline_ns (>= 0), for poll() timeouts. */
int rdps_ms_until(uint64_t deadline_ns);

/* Grows *buf (malloc'd or NULL) to at least need bytes, keeping contents.
 * Used by batch paths so that steady state allocates nothing. */
int rdps_reserve(void **buf, size_t *cap, size_t need);

/* strerror for our negative errno values (thread-safe, static strings). */
const char *rdps_strerror(int neg_errno);

/* Copies len bytes of in to out (outlen bytes, NUL-terminated, cut at a
 * whole character) with control bytes, backslashes and bytes that are not
 * printable UTF-8 written as \xNN: text from a peer made safe for a log
 * line or a terminal. Returns the length written. rdps_log_write escapes
 * every message this way. */
size_t rdps_escape(const char *in, size_t len, char *out, size_t outlen);

/* "123 B", "1.5 GiB": bytes for a message, in buf (returned). */
const char *rdps_bytes_str(uint64_t bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_COMMON_H */
