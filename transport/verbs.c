// SPDX-License-Identifier: MIT
/* verbs backend: the ops table, and what the backend tells its callers.
 * The code is split by concern (verbs.h lists the files). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>

#include "rdps/common.h"

#include "verbs.h"

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void verbs_query(uint32_t num_clients, uint32_t num_servers,
			struct rdps_transport_info *out)
{
	uint64_t slots = (uint64_t)num_clients * VERBS_SHARE_TARGET;
	size_t servers = num_servers ? num_servers : 1, conn;

	/* The receive pool grows with sessions (verbs_server.c), in chunks. */
	if (slots < VERBS_POOL_MIN_SLOTS)
		slots = VERBS_POOL_MIN_SLOTS;
	if (slots > VERBS_POOL_MAX_SLOTS)
		slots = VERBS_POOL_MAX_SLOTS;
	slots = (slots + VERBS_POOL_CHUNK - 1) / VERBS_POOL_CHUNK * VERBS_POOL_CHUNK;
	/* A connection's share of its client's budget (verbs_client.c
	 * conn_buffers): READ targets and push buffers. The PD and CQ are the
	 * client's, one for all its servers; each server is a queue pair. */
	conn = RDPS_ALIGN_UP(clamp_size(VERBS_BOUNCE / servers, VERBS_BOUNCE_MIN, VERBS_BOUNCE),
			     4096) +
	       clamp_size(VERBS_SEND_BUDGET / servers, VERBS_SEND_SLOTS_MIN, VERBS_SEND_SLOTS) *
		       (size_t)VERBS_MSG_SIZE;
	*out = (struct rdps_transport_info){
		.push_msg_bytes = VERBS_MSG_SIZE,
		.server_pinned_bytes = slots * VERBS_MSG_SIZE,
		.conn_pinned_bytes = conn,
		.client_pinned_bytes = conn * servers,
		.client_endpoints = (uint32_t)servers,
		.one_sided_pulls = true,
		.pins_tables = true,
	};
}

/* Any device at all? Resolving a route costs a second when there is none. */
static bool have_rdma_device(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d)))
		any = e->d_name[0] != '.';
	closedir(d);
	return any;
}

static int verbs_route(const char *host, char *via, size_t vialen)
{
	char dev[64];
	int ret;

	if (!have_rdma_device()) {
		snprintf(via, vialen, "no RDMA device on this host");
		return -ENODEV;
	}
	/* A device must serve the route to this very address. */
	ret = verbs_route_device(host, 0, dev, sizeof(dev));
	if (ret) {
		snprintf(via, vialen, "no RDMA device serves the route to it");
		return ret;
	}
	snprintf(via, vialen, "RDMA device %s serves the route", dev);
	return 0;
}

static const struct rdps_transport_ops verbs_ops = {
	.name = "verbs",
	.connect = verbs_connect,
	.close = verbs_close,
	.pull_post = verbs_pull_post,
	.pull_wait = verbs_pull_wait,
	.push = verbs_push,
	.push_gather = verbs_push_gather,
	.call = verbs_call,
	.call_send = verbs_call_send,
	.call_recv = verbs_call_recv,
	.listen = verbs_listen,
	.progress = verbs_progress,
	.reply = verbs_reply,
	.destroy = verbs_destroy,
	.add_region = verbs_add_region,
	.remove_region = verbs_remove_region,
	.set = verbs_set,
	.query = verbs_query,
	.route = verbs_route,
};

const struct rdps_transport_ops *rdps_transport_verbs(void)
{
	return &verbs_ops;
}
