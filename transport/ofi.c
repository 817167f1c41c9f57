// SPDX-License-Identifier: MIT
/* ofi backend: the ops table, what the backend tells its callers, and its
 * route for "auto". The code is split by concern (ofi.h lists the files). */
#include <errno.h>
#include <stdio.h>

#include "rdps/common.h"

#include "ofi.h"

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void ofi_query(uint32_t num_clients, uint32_t num_servers,
		      struct rdps_transport_info *out)
{
	uint64_t slots = (uint64_t)num_clients * OFI_SHARE_TARGET;
	size_t servers = num_servers ? num_servers : 1, conn, group, msg = OFI_MSG_SIZE;
	char prov[OFI_PROV_MAX], why[320];

	/* The provider's message size where one is picked (efa's: 8 KiB). */
	if (!ofi_provider_pick(prov, sizeof(prov), why, sizeof(why)) && prov[0])
		msg = ofi_msg_size(prov, OFI_MSG_MAX);

	/* The receive pool grows with sessions (ofi_server.c), in chunks. */
	if (slots < OFI_POOL_MIN_SLOTS)
		slots = OFI_POOL_MIN_SLOTS;
	if (slots > OFI_POOL_MAX_SLOTS)
		slots = OFI_POOL_MAX_SLOTS;
	slots = (slots + OFI_POOL_CHUNK - 1) / OFI_POOL_CHUNK * OFI_POOL_CHUNK;
	/* A client's one endpoint (ofi_group.c): its answer slots; per
	 * server its share of push buffers and READ targets (ofi_client.c
	 * conn_buffers) and a page of control receives. */
	group = (size_t)OFI_ANSWER_SLOTS * msg;
	conn = clamp_size(OFI_SEND_BUDGET / servers, OFI_SEND_SLOTS_MIN, OFI_SEND_SLOTS) * msg +
	       RDPS_ALIGN_UP(clamp_size(OFI_BOUNCE / servers, OFI_BOUNCE_MIN, OFI_BOUNCE), 4096) +
	       4096;
	*out = (struct rdps_transport_info){
		.push_msg_bytes = msg,
		.server_pinned_bytes = slots * msg +
				       OFI_CTL_SLOTS * sizeof(struct ofi_srv_hdr),
		.conn_pinned_bytes = conn + group / servers,
		.client_pinned_bytes = conn * servers + group,
		.client_endpoints = 1,
		.one_sided_pulls = true,
		.pins_tables = true,
	};
}

/* "auto" takes ofi where libfabric's efa provider sees an EFA device (a
 * host with InfiniBand or RoCE took verbs before): any other provider is
 * named with --transport ofi --ofi-provider. */
static int ofi_route(const char *host, char *via, size_t vialen)
{
	char dev[64];

	if (!ofi_efa_present(dev, sizeof(dev))) {
		snprintf(via, vialen, "no EFA device (libfabric's efa provider sees none)");
		return -ENODEV;
	}
	snprintf(via, vialen, "EFA device %s (libfabric efa)", dev);
	return 0;
}

static const struct rdps_transport_ops ofi_ops = {
	.name = "ofi",
	.connect = ofi_connect,
	.close = ofi_close,
	.pull_post = ofi_pull_post,
	.pull_wait = ofi_pull_wait,
	.push = ofi_push,
	.push_gather = ofi_push_gather,
	.call = ofi_call,
	.call_send = ofi_call_send,
	.call_recv = ofi_call_recv,
	.listen = ofi_listen,
	.progress = ofi_progress,
	.reply = ofi_reply,
	.destroy = ofi_destroy,
	.add_region = ofi_add_region,
	.remove_region = ofi_remove_region,
	.set = ofi_set,
	.query = ofi_query,
	.route = ofi_route,
};

const struct rdps_transport_ops *rdps_transport_ofi(void)
{
	return &ofi_ops;
}
