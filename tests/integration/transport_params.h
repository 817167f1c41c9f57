/* SPDX-License-Identifier: MIT */
/* Criterion parameters of the suites that run over every transport listed
 * in RDPS_TEST_TRANSPORTS (default tcp, inproc, and ofi where libfabric
 * has an RMA provider: ofi_env.h). */
#ifndef RDPS_TEST_TRANSPORT_PARAMS_H
#define RDPS_TEST_TRANSPORT_PARAMS_H

#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi_env.h"

#define RDPS_TEST_MAX_TRANSPORTS 8

struct transport_param {
	char name[16];
};

static inline void rdps_test_free_transport_params(struct criterion_test_params *crp)
{
	cr_free(crp->params);
}

static inline struct criterion_test_params rdps_test_transport_params(void)
{
	const char *env = getenv("RDPS_TEST_TRANSPORTS");
	char buf[128], *save = NULL, *tok;
	struct transport_param *params =
		cr_malloc(RDPS_TEST_MAX_TRANSPORTS * sizeof(*params));
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s",
		 env && *env ? env : rdps_test_ofi_available() ? "tcp,inproc,ofi" : "tcp,inproc");
	for (tok = strtok_r(buf, ",", &save); tok && n < RDPS_TEST_MAX_TRANSPORTS;
	     tok = strtok_r(NULL, ",", &save))
		snprintf(params[n++].name, sizeof(params[0].name), "%s", tok);
	return cr_make_param_array(struct transport_param, params, n,
				   rdps_test_free_transport_params);
}

#endif
