/* SPDX-License-Identifier: MIT */
/*
 * ip_config: the cluster's server list, in DGL-KE's format.
 *
 * One line per machine: "IP [base_port [num_servers]]"; base_port defaults
 * to 30050 and num_servers to 1. Blank lines and '#' comments are ignored.
 * Servers are numbered globally in file order: machine 0's servers first,
 * server j of a machine listens on base_port + j.
 */
#ifndef RDPS_IPCONFIG_H
#define RDPS_IPCONFIG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_DEFAULT_BASE_PORT 30050
#define RDPS_MAX_SERVERS 1024
#define RDPS_HOST_MAX 256

struct rdps_endpoint {
	char host[RDPS_HOST_MAX]; /* address as written in the file */
	uint16_t port;            /* base_port + index within the machine */
	uint32_t machine;         /* line's machine index (0-based) */
	uint32_t local_index;     /* index of this server on its machine */
};

struct rdps_ipconfig {
	uint32_t num_machines;
	uint32_t num_servers;           /* total over all machines */
	struct rdps_endpoint *servers;  /* num_servers entries, global order */
};

/*
 * Parses path into cfg (caller frees with rdps_ipconfig_free). On a bad line
 * returns -EINVAL and writes "FILE:LINE: reason" into err (errlen bytes).
 * Returns -errno if the file cannot be read, -ENOENT if it lists no server.
 */
int rdps_ipconfig_load(const char *path, struct rdps_ipconfig *cfg, char *err,
		       size_t errlen);

/* Same, from a string (name is used in error messages). */
int rdps_ipconfig_parse(const char *name, const char *text,
			struct rdps_ipconfig *cfg, char *err, size_t errlen);

/* Frees what load or parse allocated in cfg and zeroes its counts;
 * accepts NULL. */
void rdps_ipconfig_free(struct rdps_ipconfig *cfg);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_IPCONFIG_H */
