// SPDX-License-Identifier: MIT
/* The backend registry and the "auto" choice. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdps/transport.h"

const struct rdps_transport_ops *rdps_transport_tcp(void);
const struct rdps_transport_ops *rdps_transport_inproc(void);
const struct rdps_transport_ops *rdps_transport_verbs(void);
const struct rdps_transport_ops *rdps_transport_ofi(void);

typedef const struct rdps_transport_ops *(*backend_fn)(void);

/* In the order "auto" prefers them: verbs where an InfiniBand or RoCE
 * device serves the route, ofi where there is an EFA device, then TCP. */
static const backend_fn backends[] = {
	rdps_transport_verbs,
	rdps_transport_ofi,
	rdps_transport_tcp,
	rdps_transport_inproc,
};

const struct rdps_transport_ops *rdps_transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		const struct rdps_transport_ops *ops = backends[i]();

		if (!strcmp(ops->name, name))
			return ops;
	}
	return NULL;
}

const char *rdps_transport_names(void)
{
	static char names[64];

	if (!names[0])
		for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 i ? ", " : "", backends[i]()->name);
	return names;
}

const struct rdps_transport_ops *rdps_transport_select(const char *name,
						       const char *host,
						       char *why, size_t whylen)
{
	const struct rdps_transport_ops *ops;
	char tmp[8];

	if (!why) {
		why = tmp;
		whylen = sizeof(tmp);
	}
	if (!name || !strcmp(name, "auto")) {
		char skipped[320] = "";

		for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
			char via[96] = "";
			size_t len = strlen(skipped);

			ops = backends[i]();
			if (ops->route(host, via, sizeof(via))) {
				/* Say why each preferred backend was passed over. */
				if (via[0])
					snprintf(skipped + len, sizeof(skipped) - len, "%s%s: %s",
						 len ? "; " : "", ops->name, via);
				continue;
			}
			snprintf(why, whylen, "transport: %s to %s (%s)", ops->name, host,
				 skipped[0] ? skipped : via);
			return ops;
		}
		snprintf(why, whylen, "no transport reaches %s", host);
		return NULL;
	}
	ops = rdps_transport_find(name);
	if (!ops) {
		snprintf(why, whylen, "unknown transport '%s' (known: auto, %s)", name,
			 rdps_transport_names());
		return NULL;
	}
	snprintf(why, whylen, "transport: %s to %s (requested)", name, host);
	return ops;
}

static const char *const dtype_names[RDPS_DTYPE_COUNT] = {
	[RDPS_DTYPE_F32] = "float32",
	[RDPS_DTYPE_F64] = "float64",
	[RDPS_DTYPE_I64] = "int64",
	[RDPS_DTYPE_U8] = "uint8",
};

size_t rdps_dtype_size(int dtype)
{
	static const size_t size[RDPS_DTYPE_COUNT] = { 4, 8, 8, 1 };

	return dtype >= 0 && dtype < RDPS_DTYPE_COUNT ? size[dtype] : 0;
}

const char *rdps_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < RDPS_DTYPE_COUNT ? dtype_names[dtype] : NULL;
}

int rdps_dtype_parse(const char *name)
{
	static const struct {
		const char *name;
		int dtype;
	} alias[] = { { "float", RDPS_DTYPE_F32 }, { "double", RDPS_DTYPE_F64 },
		      { "long", RDPS_DTYPE_I64 }, { "f4", RDPS_DTYPE_F32 },
		      { "f8", RDPS_DTYPE_F64 }, { "i8", RDPS_DTYPE_I64 }, { "u1", RDPS_DTYPE_U8 } };

	for (int d = 0; d < RDPS_DTYPE_COUNT; d++)
		if (!strcmp(name, dtype_names[d]))
			return d;
	for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
		if (!strcmp(name, alias[i].name))
			return alias[i].dtype;
	return -EINVAL;
}

const char *rdps_two_sided_why_str(uint64_t why)
{
	switch (why) {
	case RDPS_TWO_SIDED_NO_RMA:
		return "the provider has no RMA reads";
	case RDPS_TWO_SIDED_EMULATED:
		return "the provider emulates RMA reads (an emulated read costs the server more)";
	case RDPS_TWO_SIDED_NO_DEVICE_READ:
		return "the device does no RDMA READ";
	case RDPS_TWO_SIDED_ASKED:
		return "asked for (RDPS_OFI_PULLS=msg or FI_EFA_USE_DEVICE_RDMA=0)";
	default:
		return "one-sided";
	}
}
