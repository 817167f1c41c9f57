/* SPDX-License-Identifier: MIT */
/* Helpers of the verbs suites run inside the soft-RoCE guest: a verbs
 * server process, clients, helper processes forked before any verbs use. */
#ifndef RDPS_GUEST_COMMON_H
#define RDPS_GUEST_COMMON_H

#include <stdint.h>
#include <sys/types.h>

#include "rdps/client.h"

struct guest_server {
	pid_t pid;
	int port;
	char *dir, *ipc, *log, *secret_path;
};

/* The rxe device's address (RDPS_TEST_HOST). */
const char *guest_host(void);

/* The transport of the guest's servers and clients: "verbs", or "ofi"
 * where RDPS_TEST_GUEST_TRANSPORT says so (libfabric's verbs;ofi_rxm on
 * rxe: FI_PROVIDER). */
const char *guest_transport(void);

/* Starts `rdps server` over guest_transport() with one table entity:rows:dim (SGD, lr
 * 1, zeros: every push of -1 adds exactly 1) and waits for its port; with
 * RDPS_TEST_SERVER_THREADS server threads (default 1).
 * secret: NULL or the shared secret's text. */
void guest_server_start(struct guest_server *gs, uint32_t rows, uint32_t dim,
			const char *secret);
void guest_server_stop(struct guest_server *gs);

/* A client of the server over guest_transport() (asserts on failure). */
struct rdps_client *guest_client(const struct guest_server *gs, uint32_t id, uint32_t n,
				 int timeout_ms);

/* The server's counters, through an observer connection. */
void guest_server_stats(const struct guest_server *gs, struct rdps_server_stats *st);

/* librdmacm caches device contexts per process, and a child forked after
 * the parent touched verbs would reuse the parent's: helpers are forked
 * before the test's own clients exist and wait on a pipe (*go) until
 * guest_release(). */
pid_t guest_fork(int *go, void (*body)(void *), void *arg);
void guest_release(int go);

#endif
