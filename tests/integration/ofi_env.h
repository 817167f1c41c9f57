/* SPDX-License-Identifier: MIT */
/* The integration suites over --transport ofi: libfabric's "tcp;ofi_rxm"
 * provider on loopback, unless FI_PROVIDER names another (the soft-RoCE
 * guest gives "verbs;ofi_rxm": tests/softroce/verbs.sh). */
#ifndef RDPS_TEST_OFI_ENV_H
#define RDPS_TEST_OFI_ENV_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* transport/ofi_setup.c (declared here rather than through transport/
 * ofi.h: libfabric's headers define macros, e.g. count_of, that the
 * suites use as names). */
bool ofi_rma_provider_available(void);

/* Sets FI_PROVIDER to "tcp;ofi_rxm" unless it is set (the servers the
 * test starts inherit it), and says whether libfabric has a reliable-
 * datagram provider with RMA reads within it.
 *
 * It asks in a child process: the suites fork their clients, and a child
 * must not inherit a started libfabric. Over verbs (verbs;ofi_rxm), the
 * provider's start opens the devices (through librdmacm), and a forked
 * child's commands on those descriptors fail with EACCES (the kernel's
 * "uverbs_write: process N changed security contexts after opening file
 * descriptor": fork gives the child new credentials), so every post_send
 * on rxe failed ("Post send failed - -13") and the clients' sends stayed
 * at -FI_EAGAIN.
 *
 * The answer is kept in the environment (RDPS_TEST_OFI_PROBED: "1 " or
 * "0 " and the FI_PROVIDER it is for), so that Criterion's test processes
 * inherit it from the runner (rdps_test_ofi_probe_early below) instead of
 * each starting libfabric once more: seconds apiece in a TCG guest. */
#define RDPS_TEST_OFI_PROBED "RDPS_TEST_OFI_PROBED"

static inline bool rdps_test_ofi_available(void)
{
	const char *fip, *probed;
	char val[160];
	bool answer;
	pid_t pid;
	int st;

	setenv("FI_PROVIDER", "tcp;ofi_rxm", 0);
	fip = getenv("FI_PROVIDER");
	probed = getenv(RDPS_TEST_OFI_PROBED);
	if (probed && (probed[0] == '0' || probed[0] == '1') && probed[1] == ' ' &&
	    !strcmp(probed + 2, fip))
		return probed[0] == '1';
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(ofi_rma_provider_available() ? 0 : 1);
	if (pid < 0)
		return ofi_rma_provider_available(); /* cannot fork: ask here */
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return false;
	answer = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	snprintf(val, sizeof(val), "%d %s", answer, fip);
	setenv(RDPS_TEST_OFI_PROBED, val, 1);
	return answer;
}

/* In Criterion's runner, before it starts the tests: ask once for them
 * all where the suite runs over ofi (RDPS_TEST_TRANSPORTS=ofi...). */
__attribute__((constructor)) static void rdps_test_ofi_probe_early(void)
{
	const char *env = getenv("RDPS_TEST_TRANSPORTS");

	if (env && !strncmp(env, "ofi", 3) && (env[3] == '\0' || env[3] == ','))
		(void)rdps_test_ofi_available();
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
