/* SPDX-License-Identifier: MIT */
/* Helpers shared by the test suites: temporary directories, free ports,
 * child processes with bounded waits. */
#ifndef RDPS_TEST_H
#define RDPS_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A fresh directory under /tmp (caller frees the string; rdps_test_rmtree). */
char *rdps_test_tmpdir(const char *tag);
int rdps_test_rmtree(const char *dir);

/* Writes text to dir/name; returns the malloc'd path. */
char *rdps_test_write(const char *dir, const char *name, const char *text);

/* A base port such that base..base+n-1 are free on every address now (no
 * listener, no connection using them as their own port). */
int rdps_test_free_ports(int n);

/* Starts argv (argv[0] a path) with stdout+stderr appended to log. */
pid_t rdps_test_spawn(char *const argv[], const char *log);

/* Waits for pid up to timeout_ms. Returns 0 with *status, or -ETIMEDOUT
 * (the process is then killed with SIGKILL and reaped). */
int rdps_test_wait(pid_t pid, int timeout_ms, int *status);

/* Polls until host:port accepts a TCP connection, up to timeout_ms. */
int rdps_test_wait_port(const char *host, int port, int timeout_ms);

/* What a failed connection to port needs said (malloc'd, never NULL): the
 * sockets on it as `ss -tanpo` shows them, and the last lines of each log in
 * logs (NULL-terminated, may be NULL). */
char *rdps_test_port_report(int port, const char *const *logs);

/* Reads a whole file into a malloc'd NUL-terminated string (NULL on error). */
char *rdps_test_slurp(const char *path);
/* The same, with its length (binary files); *len may be NULL. */
char *rdps_test_slurp_len(const char *path, size_t *len);

/* Reads exactly len bytes from socket s: 0, -ECONNRESET at end of stream,
 * or -errno (-EAGAIN when the socket's SO_RCVTIMEO ran out). */
int rdps_test_recv_all(int s, void *buf, size_t len);

/* A synthetic knowledge graph in out (num_entities, num_relations and
 * num_triples, 8 communities, 100 valid and 100 test triples, seed), and
 * its random k-way partition in part (if part is not NULL). Asserts. */
void rdps_test_synth_kg(const char *out, uint64_t num_entities, uint32_t num_relations,
			uint64_t num_triples, uint64_t seed, const char *part, uint32_t k);

/* The k-way partition of the dataset in data into out (METIS or random). */
void rdps_test_partition(const char *data, const char *out, uint32_t k, int method);

#endif
