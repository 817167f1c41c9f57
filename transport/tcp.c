// SPDX-License-Identifier: MIT
/*
 * TCP backend: its ops table. The client (tcp_client.c) and the server
 * (tcp_server.c) speak length-prefixed binary frames (wire.h).
 */
#include <stdint.h>
#include <stdio.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "tcp.h"
#include "tcp_priv.h"
#include "wire.h"

static void tcp_query(uint32_t num_clients, uint32_t num_servers,
		      struct rdps_transport_info *out)
{
	/* Replies are buffered per connection up to TCP_TX_HIGH; nothing pinned. */
	*out = (struct rdps_transport_info){ .push_msg_bytes = RDPS_WIRE_MAX_FRAME };
}

static int tcp_route(const char *host, char *via, size_t vialen)
{
	snprintf(via, vialen, "TCP reaches every address");
	return 0;
}

static const struct rdps_transport_ops tcp_ops = {
	.name = "tcp",
	.connect = tcp_connect,
	.close = tcp_close,
	.pull_post = tcp_pull_post,
	.pull_wait = tcp_pull_wait,
	.push = tcp_push,
	.push_gather = tcp_push_gather,
	.call = tcp_call,
	.call_send = tcp_call_send,
	.call_recv = tcp_call_recv,
	.listen = tcp_listen,
	.progress = tcp_progress,
	.reply = tcp_reply,
	.destroy = tcp_destroy,
	.add_region = tcp_add_region,
	.remove_region = tcp_remove_region,
	.set = tcp_set,
	.query = tcp_query,
	.route = tcp_route,
};

const struct rdps_transport_ops *rdps_transport_tcp(void)
{
	return &tcp_ops;
}
