/* SPDX-License-Identifier: MIT */
/*
 * Internal: how long an RDMA client (verbs, ofi) spins on its completion
 * queue after the last completion before it sleeps on the queue's wait
 * object. Spinning answers fastest; spinning for good starves whatever
 * shares the client's cores: trainers' threads, and servers on the same
 * host (64 spinning clients on a 2-core host left the server no CPU for a
 * handshake in 20 s).
 */
#ifndef RDPS_TRANSPORT_SPIN_H
#define RDPS_TRANSPORT_SPIN_H

#include <stdint.h>

#define RDPS_CLIENT_SPIN_US 200          /* the default */
#define RDPS_CLIENT_SPIN_MAX_US 10000000 /* RDPS_CLIENT_SPIN_US's range: 0..this */
#define RDPS_CLIENT_SLEEP_MS 100         /* each sleep, at most (deadlines are checked) */

/* RDPS_CLIENT_SPIN_US from the environment (read once), else the default,
 * in nanoseconds. */
uint64_t rdps_client_spin_ns(void);

#endif
