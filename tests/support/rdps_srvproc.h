/* SPDX-License-Identifier: MIT */
/*
 * A build/rdps server process that a suite drives over the wire (one at a
 * time, in srvp): started with extra arguments, raw frames sent to it,
 * its log and memory read, clients of the library made to it. Every wait
 * is bounded; failures are Criterion assertions.
 */
#ifndef RDPS_SRVPROC_H
#define RDPS_SRVPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rdps/client.h"

#define SECRET "hardening test secret, 32 bytes" /* the suites' shared secret */
#define MiB (1u << 20)

struct srvp {
	char host[64];                  /* to listen on (set before start; "": 127.0.0.1) */
	char *dir, *ipc, *log, *secret; /* its directory, ip_config, log, secret file */
	int port;
	pid_t pid;
};
extern struct srvp srvp;

/* Starts build/rdps server (server 0 of a 1-server job on srvp.host) with
 * extra arguments (NULL-terminated), under ulimit -n nofile (if not NULL),
 * with the test secret if secret; waits (up to 60 s) until it listens. */
void srvp_start(const char *nofile, bool secret, const char *const *extra);
/* SIGTERM, a clean exit asserted, its directory removed. */
void srvp_stop(void);

/* Raw connections: connected to the server (10 s send/receive timeouts). */
int srvp_raw_connect(void);
int srvp_local_port(int s);
void srvp_send_all(int s, const void *buf, size_t len);
void srvp_send_hdr(int s, uint8_t type, uint32_t len);
void srvp_send_hello(int s, uint32_t client_id, uint32_t num_clients, uint32_t flags);
/* Reads one frame of type (header and payload into buf, or dropped if
 * NULL); returns its status. */
int srvp_recv_frame(int s, uint8_t type, void *buf, size_t cap);
/* The server closed s (end of stream or reset), within the timeout. */
void srvp_expect_closed(int s, const char *what);

/* A field of /proc/PID/status in kB ("VmRSS:", "VmHWM:"). */
long srvp_proc_kb(pid_t pid, const char *field);
/* Resets the peak RSS (VmHWM) of pid to its current RSS. */
void srvp_reset_peak(pid_t pid);

int srvp_count_lines(const char *log, const char *needle);
/* Waits (up to 30 s) until the server's log holds needle; returns the log. */
char *srvp_wait_log(const char *needle);
/* The log names the client at host:port and what. */
void srvp_expect_log_peer(int port, const char *what);

/* Clients of the library (tcp), of a job of n, or observers. */
int srvp_make_client(uint32_t id, uint32_t n, bool observer, bool secret,
		     struct rdps_client **out, char *err, size_t errlen);
struct rdps_client *srvp_client(uint32_t id, uint32_t n, bool observer, bool secret);
struct rdps_server_stats srvp_stats_of(struct rdps_client *c);
/* Pushes and pulls one row of the 'entity' table (dim 4, sgd lr 1, zeros). */
void srvp_expect_served(struct rdps_client *c, uint64_t id);

#endif
