/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the libFuzzer targets (tests/fuzz/fuzz_*.c) and of the
 * seed generator. Not part of the library: built only in the clang fuzz
 * configuration (tests/fuzz/CMakeLists.txt).
 *
 * Determinism: the fuzz build links with -Wl,--wrap=rdps_random_bytes, so
 * every nonce and session token the library draws is FUZZ_RANDOM_BYTE(i)
 * (see fuzz_common.c). Seeds can then carry valid authentication MACs
 * (computed by fuzz_seeds with the real rdps_auth_mac and FUZZ_SECRET) and
 * the fuzzer gets past the challenge-response; a crash reproduces exactly.
 */
#ifndef RDPS_FUZZ_COMMON_H
#define RDPS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "rdps/auth.h"

/* The shared secret of the fuzzed servers and clients that have one. */
#define FUZZ_SECRET "rdps-fuzz-shared-secret-0123456789"

/* Byte i of every buffer the wrapped rdps_random_bytes fills. */
#define FUZZ_RANDOM_BYTE(i) ((uint8_t)(0xa5u ^ (uint8_t)((i) * 7u)))

/* Section separator of multi-file inputs (dataset, partition): a line of
 * its own so hand-written seeds stay readable; listed in the dictionaries. */
#define FUZZ_SEP "\n--8<--\n"
#define FUZZ_SEP_LEN (sizeof(FUZZ_SEP) - 1)

/* Aborts (a libFuzzer crash) with the condition and location when cond is
 * false; the fuzz targets' oracle. */
#define FUZZ_CHECK(cond)                                                      \
	do {                                                                  \
		if (!(cond))                                                  \
			fuzz_fail(__FILE__, __LINE__, #cond);                 \
	} while (0)

_Noreturn void fuzz_fail(const char *file, int line, const char *what);

/* Silences library logging (errors only) unless RDPS_LOG_LEVEL is set. */
void fuzz_quiet_logs(void);

/* Prints one line to stderr when RDPS_FUZZ_VERBOSE is set (what an input
 * reached: the reason of a refusal, the counts of a success), for reading
 * a seed or a reproducer; silent while fuzzing. */
void fuzz_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fills s with FUZZ_SECRET. */
void fuzz_secret(struct rdps_secret *s);

/* Splits data at FUZZ_SEP into at most max sections (the last one keeps any
 * further separators). Returns the number of sections (>= 1); sections may
 * be empty. */
size_t fuzz_split(const uint8_t *data, size_t len, const uint8_t **sec, size_t *seclen,
		  size_t max);

/* A private directory "rdps-fuzz-PID-XXXXXX" (under /dev/shm if it exists,
 * else TMPDIR or /tmp), created on first use and removed with its files at
 * exit; those of dead processes (crashes) are removed on the next start.
 * NULL on failure (the caller aborts: the target cannot run). */
const char *fuzz_workdir(void);

/* Writes len bytes to dir/name (replacing it); aborts on I/O errors. */
void fuzz_write_file(const char *dir, const char *name, const void *data, size_t len);

/* Removes dir/name if it exists. */
void fuzz_remove_file(const char *dir, const char *name);

#endif
