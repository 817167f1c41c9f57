/* SPDX-License-Identifier: MIT */
/* The integration suites over --transport ofi on this host: libfabric's
 * "tcp;ofi_rxm" provider on loopback, unless FI_PROVIDER names another. */
#ifndef RDPS_TEST_OFI_ENV_H
#define RDPS_TEST_OFI_ENV_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* transport/ofi_setup.c (declared here rather than through transport/
 * ofi.h: libfabric's headers define macros, e.g. count_of, that the
 * suites use as names). */
bool ofi_rma_provider_available(void);

/* Sets FI_PROVIDER to "tcp;ofi_rxm" unless it is set (the servers the
 * test starts inherit it), and says whether libfabric has a reliable-
 * datagram provider with RMA reads within it. */
static inline bool rdps_test_ofi_available(void)
{
	setenv("FI_PROVIDER", "tcp;ofi_rxm", 0);
	return ofi_rma_provider_available();
}

/* The transport a suite that runs servers as processes uses: the first of
 * RDPS_TEST_TRANSPORTS if it is a network backend (tcp, verbs, ofi),
 * else tcp. Over ofi, sets FI_PROVIDER (above) and returns NULL where
 * libfabric has no provider for it (the caller skips). */
static inline const char *rdps_test_net_transport(char *buf, size_t len)
{
	const char *env = getenv("RDPS_TEST_TRANSPORTS");
	size_t n = env ? strcspn(env, ",") : 0;

	if (!n || n >= len)
		return "tcp";
	memcpy(buf, env, n);
	buf[n] = '\0';
	if (strcmp(buf, "tcp") && strcmp(buf, "verbs") && strcmp(buf, "ofi"))
		return "tcp";
	if (!strcmp(buf, "ofi") && !rdps_test_ofi_available())
		return NULL;
	return buf;
}

#endif
