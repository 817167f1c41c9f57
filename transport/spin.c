// SPDX-License-Identifier: MIT
/* The RDMA clients' spin budget before they sleep (spin.h). */
#include <errno.h>
#include <stdlib.h>

#include "rdps/common.h"
#include "spin.h"

uint64_t rdps_client_spin_ns(void)
{
	static uint64_t cached = UINT64_MAX;
	uint64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	const char *env;
	unsigned long long us = RDPS_CLIENT_SPIN_US;
	char *end;

	if (v != UINT64_MAX)
		return v;
	env = getenv("RDPS_CLIENT_SPIN_US");
	if (env && *env) {
		errno = 0;
		us = strtoull(env, &end, 10);
		if (errno || *end || us > RDPS_CLIENT_SPIN_MAX_US) {
			rdps_warn("RDPS_CLIENT_SPIN_US=%s is not a number of microseconds from 0 to "
				  "%u; using %u", env, RDPS_CLIENT_SPIN_MAX_US, RDPS_CLIENT_SPIN_US);
			us = RDPS_CLIENT_SPIN_US;
		}
	}
	v = us * 1000ull;
	__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	return v;
}
