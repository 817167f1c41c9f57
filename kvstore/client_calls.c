// SPDX-License-Identifier: MIT
/* The client's two-sided calls: barriers, allreduces, stats, checkpoints,
 * shutdowns, and calls that may be sent again after a reconnect, to one
 * server or to several at once. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "rdps/client.h"
#include "rdps/common.h"

int rdps_client_barrier(struct rdps_client *c)
{
	int ret = rdps_client_flush(c);

	if (ret)
		return ret;
	ret = c->ops->call(c->conns[0], RDPS_REQ_BARRIER, NULL, 0, NULL, 0, c->barrier_timeout_ms);
	if (ret)
		return rdps_cl_conn_fail(c, ret, 0);
	return 0;
}

int rdps_client_allreduce(struct rdps_client *c, double *v, size_t n)
{
	double sum[RDPS_ALLREDUCE_MAX];
	int ret;

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	if (!n || n > RDPS_ALLREDUCE_MAX)
		return -EINVAL;
	ret = c->ops->call(c->conns[0], RDPS_REQ_ALLREDUCE, v, n * sizeof(double), sum,
			   n * sizeof(double), c->barrier_timeout_ms);
	if (ret)
		return rdps_cl_conn_fail(c, ret, 0);
	memcpy(v, sum, n * sizeof(double));
	return 0;
}

int rdps_client_server_stats(struct rdps_client *c, uint32_t server,
			     struct rdps_server_stats *out)
{
	int ret;

	if (server >= c->num_servers)
		return rdps_cl_fail(c, -EINVAL, "no such server%s", "");
	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	ret = c->ops->call(c->conns[server], RDPS_REQ_STATS, NULL, 0, out, sizeof(*out), 0);
	return ret ? rdps_cl_conn_fail(c, ret, server) : 0;
}

int rdps_client_call_idempotent(struct rdps_client *c, uint32_t s, uint32_t type,
				const void *req, size_t req_len, void *reply, size_t reply_cap,
				size_t *reply_len)
{
	int ret;

	if (s >= c->num_servers)
		return rdps_cl_fail(c, -EINVAL, "no such server%s", "");
	for (int attempt = 0;; attempt++) {
		if (rdps_cl_ensure_conns(c))
			return -ENOTCONN;
		ret = c->ops->call(c->conns[s], type, req, req_len, reply, reply_cap, 0);
		if (!ret) {
			*reply_len = c->conns[s]->reply_len;
			return 0;
		}
		ret = rdps_cl_conn_fail(c, ret, s);
		/* One more try after a reconnection: the request changes nothing. */
		if (attempt || rdps_cl_recover(c, ret))
			return ret;
	}
}

int rdps_client_call_many(struct rdps_client *c, uint32_t type, uint32_t n,
			  const uint32_t *servers, void *const *reqs, const size_t *req_lens,
			  void *const *replies, const size_t *reply_caps, size_t *reply_lens)
{
	int ret;

	for (uint32_t i = 0; i < n; i++)
		if (servers[i] >= c->num_servers)
			return rdps_cl_fail(c, -EINVAL, "no such server%s", "");
	if (!c->ops->call_send || !c->ops->call_recv) {
		for (uint32_t i = 0; i < n; i++)
			if ((ret = rdps_client_call_idempotent(c, servers[i], type, reqs[i], req_lens[i],
							       replies[i], reply_caps[i],
							       &reply_lens[i])))
				return ret;
		return 0;
	}
	for (int attempt = 0;; attempt++) {
		uint32_t sent = 0, bad = 0, late = 0;
		uint64_t deadline;

		if (rdps_cl_ensure_conns(c))
			return -ENOTCONN;
		ret = 0;
		/* One deadline for every reply: the servers work at once, so a
		 * call waits one timeout in all, not one per server. */
		deadline = rdps_now_ns() + (uint64_t)c->cp.timeout_ms * 1000000ull;
		for (; sent < n; sent++) {
			ret = c->ops->call_send(c->conns[servers[sent]], type, reqs[sent],
						req_lens[sent], 0);
			if (ret) {
				bad = servers[sent];
				break;
			}
		}
		/* Every reply sent for is read, also after an error: the
		 * connections stay in step. */
		for (uint32_t i = 0; i < sent; i++) {
			struct rdps_conn *conn = c->conns[servers[i]];
			int left = rdps_ms_until(deadline), r;

			/* Past the deadline, a reply already here is still read. */
			r = c->ops->call_recv(conn, type, replies[i], reply_caps[i], left ? left : 1);
			late += r == -ETIMEDOUT;
			if (!r)
				reply_lens[i] = conn->reply_len;
			else if (!ret) {
				ret = r;
				bad = servers[i];
			}
		}
		if (!ret)
			return 0;
		ret = rdps_cl_conn_fail(c, ret, bad);
		if (late && ret == -ETIMEDOUT)
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: no %s reply within %d ms (%u of the %u servers asked at once "
				 "did not answer in time)", c->conns[bad]->peer,
				 rdps_req_name((int)type), c->cp.timeout_ms, late, sent);
		/* Once more after a reconnection: the requests change nothing. */
		if (attempt || rdps_cl_recover(c, ret))
			return ret;
	}
}

int rdps_client_checkpoint(struct rdps_client *c)
{
	int first = 0;

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = c->ops->call(c->conns[s], RDPS_REQ_CHECKPOINT, NULL, 0, NULL, 0, 0);

		if (ret && !first)
			first = rdps_cl_conn_fail(c, ret, s);
	}
	return first;
}

int rdps_client_shutdown_servers(struct rdps_client *c)
{
	/* An observer has pushed nothing (and may not flush). */
	int first = c->observer ? 0 : rdps_client_flush(c);

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = c->ops->call(c->conns[s], RDPS_REQ_SHUTDOWN, NULL, 0, NULL, 0, 0);

		if (ret && !first)
			first = rdps_cl_conn_fail(c, ret, s);
	}
	return first;
}
