// SPDX-License-Identifier: MIT
/* The client: its connections to the job's servers (connect, reconnect
 * after a lost connection, what a restart rolled back), errors (tables:
 * client_tables.c; rows: client_rows.c; calls: client_calls.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "rdps/client.h"
#include "rdps/common.h"

int rdps_cl_fail(struct rdps_client *c, int ret, const char *fmt, const char *detail)
{
	snprintf(c->errmsg, sizeof(c->errmsg), fmt, detail);
	return ret;
}

int rdps_cl_conn_fail(struct rdps_client *c, int ret, uint32_t s)
{
	c->failed_server = s;
	snprintf(c->errmsg, sizeof(c->errmsg), "%s",
		 c->conns[s]->errmsg[0] ? c->conns[s]->errmsg : rdps_strerror(ret));
	return ret;
}

/* How connect_retry() treats a failed attempt. */
enum {
	RETRY_ANY_ERROR = 1,   /* not only a lost connection (conn_lost) */
	RETRY_CLAMP_TIMEOUT = 2, /* no attempt outlasts the deadline */
	RETRY_WARN = 4,        /* warn once, at the first failure */
};

/*
 * Connects with cp, retrying with exponential backoff (50 ms to 2 s) until
 * deadline_ns; 0 or the last attempt's error (err says why).
 */
static int connect_retry(struct rdps_client *c, struct rdps_conn_params cp, uint64_t deadline_ns,
			 unsigned flags, struct rdps_conn **out, char *err, size_t errlen)
{
	useconds_t backoff = 50000;
	int ret, timeout_ms = cp.timeout_ms;

	for (;;) {
		if (flags & RETRY_CLAMP_TIMEOUT) {
			int left = rdps_ms_until(deadline_ns);

			cp.timeout_ms = left < timeout_ms ? (left ? left : 1) : timeout_ms;
		}
		ret = c->ops->connect(&cp, out, err, errlen);
		if (!ret || rdps_now_ns() >= deadline_ns ||
		    (!(flags & RETRY_ANY_ERROR) && !rdps_cl_conn_lost(ret)))
			return ret;
		if (flags & RETRY_WARN)
			rdps_warn("%s; retrying for up to %.0f s", err,
				  rdps_ms_until(deadline_ns) / 1000.0);
		flags &= ~(unsigned)RETRY_WARN;
		usleep(backoff);
		if (backoff < 2000000)
			backoff *= 2;
	}
}

/*
 * The first connection to a server. With reconnect_ms, a server that drops
 * the connection mid-handshake or refuses the RDMA connection (it is being
 * killed or restarted: the listener is gone for a moment) is retried with
 * backoff, as a lost connection would be; a refusal that is an answer
 * (authentication, a wrong server id) is not retried. Retries and attempts
 * end within timeout_ms (if shorter than reconnect_ms), as create promises:
 * a server that is not there is reported after the caller's bound.
 */
static int connect_first(struct rdps_client *c, const struct rdps_conn_params *cp,
			 struct rdps_conn **out, char *err, size_t errlen)
{
	int ms = c->reconnect_ms < cp->timeout_ms ? c->reconnect_ms : cp->timeout_ms;

	if (!c->reconnect_ms)
		return c->ops->connect(cp, out, err, errlen);
	return connect_retry(c, *cp, rdps_now_ns() + (uint64_t)ms * 1000000ull,
			     RETRY_WARN | RETRY_CLAMP_TIMEOUT, out, err, errlen);
}

/*
 * The welcome of a (re)connection to server s: compares the rows this
 * client pushed to it with those the server holds, says what a restart
 * rolled back, and counts from the server's number on.
 */
static void welcome_account(struct rdps_client *c, uint32_t s)
{
	const struct rdps_welcome_info *w = &c->conns[s]->welcome;
	uint64_t held = w->rows_held, lost = c->pushed[s] > held ? c->pushed[s] - held : 0;

	if (c->observer)
		return;
	if (w->instance == c->instance[s]) {
		snprintf(c->lost_note, sizeof(c->lost_note),
			 "%llu pushed rows it had not applied were lost", (unsigned long long)lost);
	} else if (w->ckpt_seq) {
		c->rolled_back += lost;
		snprintf(c->lost_note, sizeof(c->lost_note),
			 "it restarted from checkpoint %llu: %llu rows this client pushed to it "
			 "since then were rolled back", (unsigned long long)w->ckpt_seq,
			 (unsigned long long)lost);
		if (lost)
			rdps_warn("server %u restarted from checkpoint %llu written %.1f s before: "
				  "%llu rows this client pushed to it since then were rolled back", s,
				  (unsigned long long)w->ckpt_seq, w->ckpt_age_ms / 1e3,
				  (unsigned long long)lost);
		else if (c->pushed[s])
			rdps_info("server %u restarted from checkpoint %llu written %.1f s before: "
				  "no row this client pushed to it was rolled back", s,
				  (unsigned long long)w->ckpt_seq, w->ckpt_age_ms / 1e3);
	} else {
		c->rolled_back += lost;
		snprintf(c->lost_note, sizeof(c->lost_note),
			 "it restarted without a checkpoint: the %llu rows this client pushed to "
			 "it were lost", (unsigned long long)lost);
		if (lost)
			rdps_warn("server %u restarted without a checkpoint: the %llu rows this client "
				  "pushed to it were lost (its tables are back at their initial values)",
				  s, (unsigned long long)lost);
	}
	c->instance[s] = w->instance;
	c->pushed[s] = held;
}

int rdps_client_create(const struct rdps_client_params *p,
		       struct rdps_client **out, char *err, size_t errlen)
{
	const struct rdps_ipconfig *ipc = p->servers;
	struct rdps_client *c;
	char why[256];
	int ret;

	*out = NULL;
	if (!p->num_clients || p->client_id >= p->num_clients) {
		snprintf(err, errlen, "client id %u must be below the number of clients %u",
			 p->client_id, p->num_clients);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (!ipc) {
		if (!p->ip_config) {
			snprintf(err, errlen, "no ip_config given");
			ret = -EINVAL;
			goto err_free;
		}
		ret = rdps_ipconfig_load(p->ip_config, &c->owned_ipc, err, errlen);
		if (ret)
			goto err_free;
		ipc = &c->owned_ipc;
	}
	c->ops = rdps_transport_select(p->transport, ipc->servers[0].host, why, sizeof(why));
	if (!c->ops) {
		snprintf(err, errlen, "%s", why);
		ret = -EINVAL;
		goto err_free_ipc;
	}
	if (!p->quiet)
		rdps_info("client %u: %s", p->client_id, why);
	c->num_servers = ipc->num_servers;
	c->observer = p->observer;
	c->reconnect_ms = p->reconnect_ms;
	c->failed_server = -1;
	c->eps = malloc(ipc->num_servers * sizeof(*c->eps));
	if (!c->eps) {
		ret = -ENOMEM;
		goto err_free_ipc;
	}
	memcpy(c->eps, ipc->servers, ipc->num_servers * sizeof(*c->eps));
	c->barrier_timeout_ms = p->barrier_timeout_ms > 0 ? p->barrier_timeout_ms : 600000;
	c->barrier_timeout_default_ms = c->barrier_timeout_ms;
	c->conns = calloc(c->num_servers, sizeof(*c->conns));
	c->start = calloc(c->num_servers + 1, sizeof(*c->start));
	c->cursor = calloc(c->num_servers, sizeof(*c->cursor));
	c->pushed = calloc(c->num_servers, sizeof(*c->pushed));
	c->instance = calloc(c->num_servers, sizeof(*c->instance));
	if (!c->conns || !c->start || !c->cursor || !c->pushed || !c->instance) {
		ret = -ENOMEM;
		goto err_destroy;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		struct rdps_conn_params cp = {
			.host = ipc->servers[s].host, .port = ipc->servers[s].port,
			.server_id = s, .client_id = p->client_id,
			.num_clients = p->num_clients,
			.timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 60000,
			.max_inflight_bytes = p->max_inflight_bytes,
			.read_consistency = p->read_consistency,
			.observer = p->observer,
			.secret = p->secret,
		};

		if (!s) {
			c->cp = cp;
			c->cp.host = NULL; /* per server, from eps */
		}
		ret = connect_first(c, &cp, &c->conns[s], err, errlen);
		if (ret)
			goto err_destroy;
		c->instance[s] = c->conns[s]->welcome.instance; /* nothing pushed yet */
		welcome_account(c, s);
	}
	ret = rdps_cl_check_tables(c, err, errlen);
	if (ret)
		goto err_destroy;
	*out = c;
	return 0;

err_destroy:
	rdps_client_destroy(c);
	return ret;
err_free_ipc:
	rdps_ipconfig_free(&c->owned_ipc);
	free(c->eps);
err_free:
	free(c);
	return ret;
}

void rdps_client_set_barrier_timeout(struct rdps_client *c, int timeout_ms)
{
	c->barrier_timeout_ms = timeout_ms > 0 ? timeout_ms : c->barrier_timeout_default_ms;
}

void rdps_client_destroy(struct rdps_client *c)
{
	if (!c)
		return;
	for (uint32_t s = 0; c->conns && s < c->num_servers; s++)
		if (c->conns[s])
			c->ops->close(c->conns[s]);
	for (uint32_t t = 0; t < RDPS_MAX_TABLES; t++)
		free(c->offsets[t]);
	free(c->conns);
	free(c->start);
	free(c->cursor);
	free(c->pushed);
	free(c->instance);
	free(c->srv_of);
	free(c->ids_sorted);
	free(c->perm);
	free(c->eps);
	free(c->xbuf);
	rdps_client_pull_batch_destroy(c->own); /* never left in flight */
	rdps_ipconfig_free(&c->owned_ipc);
	free(c);
}

/* Errors after which the connection is gone (not a refused request). */
bool rdps_cl_conn_lost(int ret)
{
	return ret == -ECONNRESET || ret == -ENOTCONN || ret == -EPIPE || ret == -ETIMEDOUT ||
	       ret == -EIO || ret == -ECONNREFUSED || ret == -ECONNABORTED;
}

/*
 * Replaces the connection to server s, retrying with backoff until
 * reconnect_ms have passed (a restarted server takes a while to load its
 * checkpoint). The new server must serve the same table ranges.
 */
int rdps_cl_reconnect(struct rdps_client *c, uint32_t s)
{
	uint64_t t0 = rdps_now_ns(), deadline = t0 + (uint64_t)c->reconnect_ms * 1000000ull;
	struct rdps_conn_params cp = c->cp;
	char err[640] = "";
	int ret;

	rdps_warn("%s; reconnecting for up to %d s", c->errmsg, c->reconnect_ms / 1000);
	c->ops->close(c->conns[s]);
	c->conns[s] = NULL;
	cp.host = c->eps[s].host;
	cp.port = c->eps[s].port;
	cp.server_id = s;
	cp.pushed_rows = c->pushed[s];
	ret = connect_retry(c, cp, deadline, RETRY_ANY_ERROR | RETRY_CLAMP_TIMEOUT, &c->conns[s],
			    err, sizeof(err));
	if (ret) {
		snprintf(c->errmsg, sizeof(c->errmsg), "server %u did not come back within %d ms: %s",
			 s, c->reconnect_ms, err);
		return ret;
	}
	for (uint32_t t = 0; t < c->num_tables; t++) {
		const struct rdps_table_desc *d = &c->conns[s]->tables[t];

		if (!c->tables[t].dim)
			continue;
		if (c->conns[s]->num_tables <= t || d->dim != c->tables[t].dim ||
		    d->lo != c->offsets[t][s] || d->hi != c->offsets[t][s + 1]) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "server %u came back with other tables than before", s);
			c->ops->close(c->conns[s]);
			c->conns[s] = NULL;
			return -EPROTO;
		}
	}
	c->reconnects++;
	rdps_info("reconnected to server %u after %.1f s", s, (rdps_now_ns() - t0) / 1e9);
	welcome_account(c, s);
	return 0;
}

/* Every server connected (a failed reconnect leaves a hole). */
int rdps_cl_ensure_conns(struct rdps_client *c)
{
	for (uint32_t s = 0; s < c->num_servers; s++) {
		if (c->conns[s])
			continue;
		if (!c->reconnect_ms) {
			snprintf(c->errmsg, sizeof(c->errmsg), "server %u is disconnected", s);
			return -ENOTCONN;
		}
		if (rdps_cl_reconnect(c, s))
			return -ENOTCONN;
	}
	return 0;
}

/* After a failure: reconnect the server that failed, if allowed. */
int rdps_cl_recover(struct rdps_client *c, int ret)
{
	int64_t s = c->failed_server;

	if (!c->reconnect_ms || !rdps_cl_conn_lost(ret) || s < 0)
		return ret;
	c->failed_server = -1;
	return rdps_cl_reconnect(c, (uint32_t)s);
}

uint32_t rdps_client_num_servers(const struct rdps_client *c)
{
	return c->num_servers;
}

int rdps_client_fail(struct rdps_client *c, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	return ret;
}

const char *rdps_client_errmsg(const struct rdps_client *c)
{
	return c->errmsg;
}

const char *rdps_client_transport(const struct rdps_client *c)
{
	return c->ops->name;
}

uint64_t rdps_client_rereads(const struct rdps_client *c)
{
	uint64_t n = 0;

	for (uint32_t s = 0; s < c->num_servers; s++)
		n += c->conns[s]->rereads;
	return n;
}

uint64_t rdps_client_reconnects(const struct rdps_client *c)
{
	return c->reconnects;
}

uint64_t rdps_client_rolled_back_rows(const struct rdps_client *c)
{
	return c->rolled_back;
}
