// SPDX-License-Identifier: MIT
/* The backend registry and the "auto" choice. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "rdps/transport.h"

const struct rdps_transport_ops *rdps_transport_tcp(void);
const struct rdps_transport_ops *rdps_transport_inproc(void);
const struct rdps_transport_ops *rdps_transport_verbs(void);
int rdps_verbs_route_device(const char *host, uint16_t port, char *name, size_t namelen);

typedef const struct rdps_transport_ops *(*backend_fn)(void);

static const backend_fn backends[] = {
	rdps_transport_tcp,
	rdps_transport_verbs,
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
	return "tcp, verbs, inproc";
}

/* Counts RDMA devices the kernel exposes. */
static int count_rdma_devices(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
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
		char dev[64];

		if (!count_rdma_devices()) {
			snprintf(why, whylen, "transport: tcp to %s (no RDMA device on this host)", host);
			return rdps_transport_find("tcp");
		}
		/* A device must serve the route to this very address. */
		if (rdps_verbs_route_device(host, 0, dev, sizeof(dev))) {
			snprintf(why, whylen, "transport: tcp to %s (no RDMA device serves the route to it)",
				 host);
			return rdps_transport_find("tcp");
		}
		snprintf(why, whylen, "transport: verbs to %s (RDMA device %s serves the route)", host,
			 dev);
		return rdps_transport_find("verbs");
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
