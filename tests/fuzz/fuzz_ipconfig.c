// SPDX-License-Identifier: MIT
/*
 * fuzz_ipconfig: rdps_ipconfig_parse on arbitrary text.
 *
 * Drives: the whole ip_config parser (line splitting, '#' comments, field
 * tokenizing, port and count parsing, the server limit), with the input as
 * one NUL-terminated string (an embedded NUL ends it, as for the loader,
 * which refuses such files before parsing).
 *
 * Asserts: a failure leaves a reason in err (except -ENOMEM) and no servers;
 * a success lists 1..RDPS_MAX_SERVERS servers with NUL-terminated non-empty
 * hosts shorter than RDPS_HOST_MAX, ports 1..65535, machine indices that
 * start at 0 and grow by at most one, local indices counting from 0 on each
 * machine with consecutive ports, and num_machines equal to the last
 * machine index + 1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rdps/ipconfig.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdps_ipconfig cfg;
	char err[256];
	char *text;
	int ret;

	/* An exact-size copy, so ASan sees any read past the terminator. */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(err, 0, sizeof(err));
	ret = rdps_ipconfig_parse("fuzz", text, &cfg, err, sizeof(err));
	free(text);
	fuzz_note("parse: %d %s (%u servers)", ret, err, cfg.num_servers);
	if (ret) {
		FUZZ_CHECK(ret < 0);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
		FUZZ_CHECK(!cfg.servers && !cfg.num_servers);
		return 0;
	}
	FUZZ_CHECK(cfg.num_servers >= 1 && cfg.num_servers <= RDPS_MAX_SERVERS);
	FUZZ_CHECK(cfg.servers != NULL);
	for (uint32_t i = 0; i < cfg.num_servers; i++) {
		const struct rdps_endpoint *ep = &cfg.servers[i];
		size_t hl = strnlen(ep->host, RDPS_HOST_MAX);

		FUZZ_CHECK(hl > 0 && hl < RDPS_HOST_MAX);
		FUZZ_CHECK(!strpbrk(ep->host, " \t\r\n#"));
		FUZZ_CHECK(ep->port >= 1);
		if (i == 0) {
			FUZZ_CHECK(ep->machine == 0 && ep->local_index == 0);
			continue;
		}
		if (ep->machine == cfg.servers[i - 1].machine) {
			FUZZ_CHECK(ep->local_index == cfg.servers[i - 1].local_index + 1);
			FUZZ_CHECK(ep->port == cfg.servers[i - 1].port + 1);
			FUZZ_CHECK(!strcmp(ep->host, cfg.servers[i - 1].host));
		} else {
			FUZZ_CHECK(ep->machine == cfg.servers[i - 1].machine + 1);
			FUZZ_CHECK(ep->local_index == 0);
		}
	}
	FUZZ_CHECK(cfg.num_machines == cfg.servers[cfg.num_servers - 1].machine + 1);
	rdps_ipconfig_free(&cfg);
	FUZZ_CHECK(!cfg.servers && !cfg.num_servers);
	return 0;
}
