// SPDX-License-Identifier: MIT
/* The backend registry and the "auto" choice. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "rdps/transport.h"

const struct rdps_transport_ops *rdps_transport_tcp(void);
const struct rdps_transport_ops *rdps_transport_inproc(void);

typedef const struct rdps_transport_ops *(*backend_fn)(void);

static const backend_fn backends[] = {
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
	return "tcp, inproc";
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
		int ndev = count_rdma_devices();

		ops = rdps_transport_find("verbs");
		if (!ndev || !ops) {
			snprintf(why, whylen, "transport: tcp to %s (%s)", host,
				 !ndev ? "no RDMA device on this host"
				       : "this build has no verbs backend");
			return rdps_transport_find("tcp");
		}
		snprintf(why, whylen, "transport: verbs to %s (%d RDMA device(s))", host, ndev);
		return ops;
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
