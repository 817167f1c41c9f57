// SPDX-License-Identifier: MIT
/* The client: routes ids to servers with the range book, groups them per
 * server, and overlaps the per-server requests. Scratch buffers grow to the
 * largest batch seen and are then reused, so steady state allocates
 * nothing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "rdps/client.h"
#include "rdps/common.h"

/* Rows per request: keeps frames well under every backend's limit. */
#define CLIENT_MAX_REQ_BYTES (16u << 20)
#define CLIENT_MAX_REQ_ROWS 65536u
/* Requests posted per server before waiting. */
#define CLIENT_POST_DEPTH RDPS_TRANSPORT_POST_DEPTH

struct rdps_client {
	const struct rdps_transport_ops *ops;
	uint32_t num_servers, num_tables;
	struct rdps_conn **conns;
	struct rdps_table_desc tables[RDPS_MAX_TABLES]; /* lo/hi unused */
	uint64_t *offsets[RDPS_MAX_TABLES];             /* num_servers + 1 each */
	struct rdps_book books[RDPS_MAX_TABLES];
	int barrier_timeout_ms;               /* bound on the collectives now */
	int barrier_timeout_default_ms;       /* from the params */
	bool observer;
	int reconnect_ms;
	struct rdps_conn_params cp;           /* for reconnecting */
	struct rdps_endpoint *eps;            /* num_servers */
	int64_t failed_server;                /* of the last conn_fail, or -1 */
	uint64_t reconnects;
	/* Per server: rows pushed to it, counted as it counts them (set to
	 * what its welcome says it holds at each connection), and the server
	 * process of the last welcome: a reconnect to another is a restart,
	 * whose rollback the difference measures. */
	uint64_t *pushed;
	uint64_t *instance;
	uint64_t rolled_back;                 /* rows server restarts rolled back */
	char lost_note[256];                  /* what the last reconnect lost */
	char errmsg[640];
	struct rdps_ipconfig owned_ipc;
	/* Scratch, grown as needed. */
	uint32_t *srv_of; size_t srv_of_cap;  /* server of each id */
	size_t *start;                        /* num_servers + 1 segment starts */
	size_t *cursor;                       /* num_servers: next row to send */
	uint64_t *ids_sorted; size_t ids_cap;
	uint32_t *perm; size_t perm_cap;      /* sorted position -> input position */
	void *xbuf; size_t xcap;              /* get/set rows repacked */
	bool unflushed;                       /* pushes since the last flush */
	void *transport_shared;               /* the backend's, for all conns (params' shared) */
	struct rdps_pull_batch *busy;         /* the batch with pulls in flight, or NULL */
	struct rdps_pull_batch *own;          /* rdps_client_pull()'s, made at its first call */
};

/* Where route() leaves one request's per-server segments. */
struct route_buf {
	size_t *start;                        /* num_servers + 1 segment starts */
	size_t *cursor;                       /* num_servers: next row to send */
	uint64_t *ids_sorted; size_t ids_cap; /* ids grouped by server (if not already) */
	uint32_t *perm; size_t perm_cap;      /* sorted position -> input position */
};

/* One pull of a batch. */
struct pull_part {
	uint32_t table, dim;
	size_t n;
	float *out;                           /* the caller's rows (input order) */
	const uint64_t *src;                  /* ids in server order */
	float *dst;                           /* rows in server order: out, or rows */
	int grouped;                          /* dst is rows: scatter into out at the end */
	struct route_buf rb;
	float *rows; size_t rows_cap;         /* grouped rows, grown as needed */
};

/* Pulls posted together and completed together (client.h). Its buffers grow
 * to the largest batch seen and are reused. */
struct rdps_pull_batch {
	struct rdps_client *c;
	uint32_t nparts;
	struct pull_part parts[RDPS_PULL_BATCH_MAX];
	uint32_t *posted;                     /* num_servers: posted since the last wait */
	int err;                              /* first transport failure, for finish */
};

static int fail(struct rdps_client *c, int ret, const char *fmt, const char *detail)
{
	snprintf(c->errmsg, sizeof(c->errmsg), fmt, detail);
	return ret;
}

static int conn_fail(struct rdps_client *c, int ret, uint32_t s)
{
	c->failed_server = s;
	snprintf(c->errmsg, sizeof(c->errmsg), "%s",
		 c->conns[s]->errmsg[0] ? c->conns[s]->errmsg : rdps_strerror(ret));
	return ret;
}

/* Table t's range book from the servers' descs (in server order, tiling
 * its rows); 0, or -EPROTO with a reason. */
static int table_book(struct rdps_client *c, uint32_t t, const struct rdps_table_desc *const *d,
		      char *err, size_t errlen)
{
	uint64_t *off = c->offsets[t];

	if (!off && !(off = c->offsets[t] = calloc(c->num_servers + 1, sizeof(uint64_t))))
		return -ENOMEM;
	off[0] = 0;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		if (strcmp(d[s]->name, d[0]->name) || d[s]->dim != d[0]->dim ||
		    d[s]->num_rows != d[0]->num_rows || d[s]->dtype != d[0]->dtype) {
			snprintf(err, errlen,
				 "%s serves different tables than server 0 (table %u: '%s' %llu x %u vs '%s' %llu x %u)",
				 c->conns[s]->peer, t, d[s]->name, (unsigned long long)d[s]->num_rows,
				 d[s]->dim, d[0]->name, (unsigned long long)d[0]->num_rows, d[0]->dim);
			return -EPROTO;
		}
		if (d[s]->lo != off[s]) {
			snprintf(err, errlen,
				 "%s holds rows [%llu, %llu) of table '%s', expected them to start at %llu",
				 c->conns[s]->peer, (unsigned long long)d[s]->lo,
				 (unsigned long long)d[s]->hi, d[s]->name, (unsigned long long)off[s]);
			return -EPROTO;
		}
		off[s + 1] = d[s]->hi;
	}
	if (off[c->num_servers] != d[0]->num_rows) {
		snprintf(err, errlen, "servers hold rows [0, %llu) of table '%s' of %llu rows",
			 (unsigned long long)off[c->num_servers], d[0]->name,
			 (unsigned long long)d[0]->num_rows);
		return -EPROTO;
	}
	c->tables[t] = *d[0];
	c->books[t].num_parts = c->num_servers;
	c->books[t].off = off;
	if (t >= c->num_tables)
		c->num_tables = t + 1;
	return 0;
}

/* The connections learn table t's descs (one-sided backends read with
 * them), and the client its book. */
static int table_install(struct rdps_client *c, uint32_t t, const struct rdps_table_desc *descs,
			 char *err, size_t errlen)
{
	const struct rdps_table_desc *d[RDPS_MAX_SERVERS];
	int ret;

	for (uint32_t s = 0; s < c->num_servers; s++)
		d[s] = &descs[s];
	ret = table_book(c, t, d, err, errlen);
	if (ret)
		return ret;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		c->conns[s]->tables[t] = descs[s];
		if (t >= c->conns[s]->num_tables)
			c->conns[s]->num_tables = t + 1;
	}
	return 0;
}

static void table_forget(struct rdps_client *c, uint32_t t)
{
	memset(&c->tables[t], 0, sizeof(c->tables[t]));
	for (uint32_t s = 0; s < c->num_servers; s++)
		if (c->conns[s])
			memset(&c->conns[s]->tables[t], 0, sizeof(c->conns[s]->tables[t]));
}

/*
 * The tables of the welcomes. A slot every server fills alike is a table;
 * one no server fills is empty. The servers' own tables (--table,
 * --partition) must agree; a table clients are making right now may be on
 * some servers only: it stays unknown here until asked for by name.
 */
static int check_tables(struct rdps_client *c, char *err, size_t errlen)
{
	uint32_t n = 0;

	for (uint32_t s = 0; s < c->num_servers; s++)
		if (c->conns[s]->num_tables > n)
			n = c->conns[s]->num_tables;
	c->num_tables = 0;
	for (uint32_t t = 0; t < n; t++) {
		const struct rdps_table_desc *d[RDPS_MAX_SERVERS];
		static const struct rdps_table_desc none;
		uint32_t filled = 0;
		bool made_by_clients = false;
		int ret;

		for (uint32_t s = 0; s < c->num_servers; s++) {
			d[s] = t < c->conns[s]->num_tables ? &c->conns[s]->tables[t] : &none;
			filled += d[s]->dim != 0;
			made_by_clients |= d[s]->elems != 0;
		}
		if (!filled)
			continue;
		if (filled < c->num_servers && made_by_clients)
			continue;
		if (filled < c->num_servers) {
			snprintf(err, errlen, "table %u ('%s') is on %u of the %u servers", t,
				 d[0]->dim ? d[0]->name : "?", filled, c->num_servers);
			return -EPROTO;
		}
		ret = table_book(c, t, d, err, errlen);
		if (ret) {
			if (made_by_clients) {
				memset(&c->tables[t], 0, sizeof(c->tables[t]));
				continue;
			}
			return ret;
		}
	}
	return 0;
}

static bool conn_lost(int ret);

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
		    (!(flags & RETRY_ANY_ERROR) && !conn_lost(ret)))
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
			.shared = &c->transport_shared,
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
	ret = check_tables(c, err, errlen);
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
static bool conn_lost(int ret)
{
	return ret == -ECONNRESET || ret == -ENOTCONN || ret == -EPIPE || ret == -ETIMEDOUT ||
	       ret == -EIO || ret == -ECONNREFUSED || ret == -ECONNABORTED;
}

/*
 * Replaces the connection to server s, retrying with backoff until
 * reconnect_ms have passed (a restarted server takes a while to load its
 * checkpoint). The new server must serve the same table ranges.
 */
static int reconnect(struct rdps_client *c, uint32_t s)
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
static int ensure_conns(struct rdps_client *c)
{
	for (uint32_t s = 0; s < c->num_servers; s++) {
		if (c->conns[s])
			continue;
		if (!c->reconnect_ms) {
			snprintf(c->errmsg, sizeof(c->errmsg), "server %u is disconnected", s);
			return -ENOTCONN;
		}
		if (reconnect(c, s))
			return -ENOTCONN;
	}
	return 0;
}

/* After a failure: reconnect the server that failed, if allowed. */
static int recover(struct rdps_client *c, int ret)
{
	int64_t s = c->failed_server;

	if (!c->reconnect_ms || !conn_lost(ret) || s < 0)
		return ret;
	c->failed_server = -1;
	return reconnect(c, (uint32_t)s);
}

uint32_t rdps_client_num_tables(const struct rdps_client *c)
{
	return c->num_tables;
}

uint32_t rdps_client_num_servers(const struct rdps_client *c)
{
	return c->num_servers;
}

int rdps_client_table_info(const struct rdps_client *c, uint32_t id,
			   struct rdps_table_info *info)
{
	if (id >= c->num_tables || !c->tables[id].dim)
		return -ENOENT;
	info->name = c->tables[id].name;
	info->id = id;
	info->dim = c->tables[id].dim;
	info->num_rows = c->tables[id].num_rows;
	info->dtype = (int)c->tables[id].dtype;
	info->elems = c->tables[id].elems ? c->tables[id].elems : c->tables[id].dim;
	info->optimizer = (int)c->tables[id].optimizer;
	return 0;
}

/* One table request to every server, in order (server 0 first: it decides
 * a new table's slot, the others take it); descs[s] gets each reply. */
static int table_call(struct rdps_client *c, struct rdps_table_req *tr,
		      struct rdps_table_desc *descs)
{
	int ret;

	if (ensure_conns(c))
		return -ENOTCONN;
	if (c->observer) {
		snprintf(c->errmsg, sizeof(c->errmsg), "an observer cannot use tables");
		return -EPERM;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		ret = c->ops->call(c->conns[s], RDPS_REQ_TABLE, tr, sizeof(*tr), &descs[s],
				   sizeof(descs[s]), 0);
		if (ret)
			return conn_fail(c, ret, s);
		if (tr->op == RDPS_TABLE_CREATE)
			tr->table_id = descs[0].table_id;
		if (descs[s].table_id != descs[0].table_id || descs[s].table_id >= RDPS_MAX_TABLES) {
			snprintf(c->errmsg, sizeof(c->errmsg), "%s put table '%s' in slot %u, server "
				 "0 in slot %u", c->conns[s]->peer, tr->name, descs[s].table_id,
				 descs[0].table_id);
			return -EPROTO;
		}
	}
	return 0;
}

static int table_named(struct rdps_client *c, const char *name, struct rdps_table_req *tr)
{
	if (!name || !name[0] || strlen(name) >= RDPS_TABLE_NAME_MAX) {
		snprintf(c->errmsg, sizeof(c->errmsg), "a table name of 1 to %d bytes",
			 RDPS_TABLE_NAME_MAX - 1);
		return -EINVAL;
	}
	memset(tr, 0, sizeof(*tr));
	snprintf(tr->name, sizeof(tr->name), "%s", name);
	return 0;
}

int rdps_client_table(struct rdps_client *c, const char *name, struct rdps_table_info *info)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	uint32_t t;
	int ret;

	for (t = 0; t < c->num_tables; t++)
		if (c->tables[t].dim && !strcmp(c->tables[t].name, name))
			return rdps_client_table_info(c, t, info);
	if (c->observer || (ret = table_named(c, name, &tr)))
		return -ENOENT;
	/* Made by a client since this one connected? */
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	tr.op = RDPS_TABLE_LOOKUP;
	ret = table_call(c, &tr, descs);
	t = descs[0].table_id;
	if (!ret)
		ret = table_install(c, t, descs, c->errmsg, sizeof(c->errmsg));
	free(descs);
	return ret ? ret : rdps_client_table_info(c, t, info);
}

int rdps_client_table_create(struct rdps_client *c, const struct rdps_table_spec *spec,
			     struct rdps_table_info *info)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	uint32_t t;
	int ret;

	if ((ret = table_named(c, spec->name, &tr)))
		return ret;
	if (spec->dtype < 0 || spec->dtype >= RDPS_DTYPE_COUNT || !spec->elems ||
	    !spec->num_rows || rdps_dtype_row_words(spec->dtype, spec->elems) > RDPS_MAX_DIM ||
	    (spec->init_range > 0 && spec->dtype != RDPS_DTYPE_F32) || !(spec->init_range >= 0)) {
		snprintf(c->errmsg, sizeof(c->errmsg), "table '%s': %llu rows of %u elements of "
			 "dtype %d%s: not a table (rows and elements above 0, a dtype of "
			 "enum rdps_dtype, rows of at most %d words, a uniform start for float32 "
			 "only)", spec->name, (unsigned long long)spec->num_rows, spec->elems,
			 spec->dtype, spec->init_range > 0 ? " starting uniform" : "",
			 RDPS_MAX_DIM);
		return -EINVAL;
	}
	tr.op = RDPS_TABLE_CREATE;
	tr.table_id = RDPS_TABLE_ANY_ID;
	tr.num_rows = spec->num_rows;
	tr.elems = spec->elems;
	tr.dtype = (uint32_t)spec->dtype;
	tr.init = spec->init_range > 0 ? RDPS_INIT_UNIFORM : RDPS_INIT_ZEROS;
	tr.init_range = spec->init_range > 0 ? spec->init_range : 0;
	tr.seed = spec->seed;
	tr.optimizer = RDPS_OPT_NONE;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = table_call(c, &tr, descs);
	t = descs[0].table_id;
	if (!ret)
		ret = table_install(c, t, descs, c->errmsg, sizeof(c->errmsg));
	free(descs);
	return ret ? ret : rdps_client_table_info(c, t, info);
}

int rdps_client_table_drop(struct rdps_client *c, const char *name)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	int ret;

	if ((ret = table_named(c, name, &tr)))
		return ret;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	tr.op = RDPS_TABLE_DROP;
	/* Pushes of this client to it must not come after it. */
	ret = rdps_client_flush(c);
	if (!ret)
		ret = table_call(c, &tr, descs);
	if (!ret)
		table_forget(c, descs[0].table_id);
	free(descs);
	return ret;
}

int rdps_client_table_set_optimizer(struct rdps_client *c, uint32_t table,
				    const struct rdps_optimizer_spec *o)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	int ret;

	if (table >= c->num_tables || !c->tables[table].dim) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u", table);
		return -ENOENT;
	}
	if ((ret = table_named(c, c->tables[table].name, &tr)))
		return ret;
	tr.op = RDPS_TABLE_SET_OPTIMIZER;
	tr.optimizer = (uint32_t)o->optimizer;
	tr.lr = o->lr;
	tr.eps = o->eps;
	tr.beta1 = o->beta1;
	tr.beta2 = o->beta2;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = rdps_client_flush(c);
	if (!ret)
		ret = table_call(c, &tr, descs);
	if (!ret)
		c->tables[table].optimizer = (uint32_t)o->optimizer;
	free(descs);
	return ret;
}

uint32_t rdps_client_locate(const struct rdps_client *c, uint32_t table, uint64_t id)
{
	return rdps_book_part(&c->books[table], id);
}

/*
 * Finds each id's server and the per-server segments (in rb). If ids already
 * come grouped by server in server order (the common case for sorted
 * batches), the segments are ranges of the caller's arrays and *grouped
 * stays 0; otherwise ids are counting-sorted into rb->ids_sorted with
 * rb->perm.
 */
static int route_into(struct rdps_client *c, struct route_buf *rb, uint32_t table,
		      const uint64_t *ids, size_t n, int *grouped)
{
	const struct rdps_book *b;
	uint64_t rows;
	uint32_t prev = 0;
	size_t bytes;
	int ret, in_order = 1;

	if (table >= c->num_tables) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u (servers have %u)",
			 table, c->num_tables);
		return -ENOENT;
	}
	b = &c->books[table];
	rows = c->tables[table].num_rows;
	bytes = c->srv_of_cap * sizeof(uint32_t);
	ret = rdps_reserve((void **)&c->srv_of, &bytes, n * sizeof(uint32_t));
	if (ret)
		return ret;
	c->srv_of_cap = bytes / sizeof(uint32_t);
	memset(rb->start, 0, (c->num_servers + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		uint32_t s;

		if (rdps_unlikely(ids[i] >= rows)) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "id %llu is out of range for table '%s' of %llu rows",
				 (unsigned long long)ids[i], c->tables[table].name,
				 (unsigned long long)rows);
			return -ERANGE;
		}
		s = c->num_servers == 1 ? 0 : rdps_book_part(b, ids[i]);
		c->srv_of[i] = s;
		rb->start[s + 1]++;
		in_order &= s >= prev;
		prev = s;
	}
	for (uint32_t s = 0; s < c->num_servers; s++)
		rb->start[s + 1] += rb->start[s];
	*grouped = !in_order;
	if (in_order)
		return 0;
	bytes = rb->ids_cap * sizeof(uint64_t);
	if ((ret = rdps_reserve((void **)&rb->ids_sorted, &bytes, n * sizeof(uint64_t))))
		return ret;
	rb->ids_cap = bytes / sizeof(uint64_t);
	bytes = rb->perm_cap * sizeof(uint32_t);
	if ((ret = rdps_reserve((void **)&rb->perm, &bytes, n * sizeof(uint32_t))))
		return ret;
	rb->perm_cap = bytes / sizeof(uint32_t);
	memcpy(rb->cursor, rb->start, c->num_servers * sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		size_t pos = rb->cursor[c->srv_of[i]]++;

		rb->ids_sorted[pos] = ids[i];
		rb->perm[pos] = (uint32_t)i;
	}
	return 0;
}

/* route_into() the client's own scratch (c->start, c->cursor, c->ids_sorted,
 * c->perm), as pushes use it. */
static int route(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		 size_t n, int *grouped)
{
	struct route_buf rb = { c->start, c->cursor, c->ids_sorted, c->ids_cap, c->perm,
				c->perm_cap };
	int ret = route_into(c, &rb, table, ids, n, grouped);

	c->ids_sorted = rb.ids_sorted;
	c->ids_cap = rb.ids_cap;
	c->perm = rb.perm;
	c->perm_cap = rb.perm_cap;
	return ret;
}

static size_t chunk_rows(uint32_t dim)
{
	size_t r = CLIENT_MAX_REQ_BYTES / ((size_t)dim * 4 + 8);

	return r < CLIENT_MAX_REQ_ROWS ? r : CLIENT_MAX_REQ_ROWS;
}

int rdps_client_pull_batch_create(struct rdps_client *c, struct rdps_pull_batch **out)
{
	struct rdps_pull_batch *b = calloc(1, sizeof(*b));
	uint32_t ns = c->num_servers;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	b->c = c;
	b->posted = calloc(ns, sizeof(*b->posted));
	if (!b->posted)
		goto err_free;
	for (uint32_t i = 0; i < RDPS_PULL_BATCH_MAX; i++) {
		struct route_buf *rb = &b->parts[i].rb;

		rb->start = calloc(ns + 1, sizeof(size_t));
		rb->cursor = calloc(ns, sizeof(size_t));
		if (!rb->start || !rb->cursor)
			goto err_free;
	}
	*out = b;
	return 0;

err_free:
	rdps_client_pull_batch_destroy(b);
	return -ENOMEM;
}

/* Posts the batch's rows not yet posted, up to CLIENT_POST_DEPTH requests
 * per server since its last wait; parts in the order they were started. The
 * first failure stops posting and is kept for finish. */
static void batch_post(struct rdps_pull_batch *b)
{
	struct rdps_client *c = b->c;

	for (uint32_t s = 0; s < c->num_servers && !b->err; s++) {
		for (uint32_t i = 0; i < b->nparts && !b->err; i++) {
			struct pull_part *p = &b->parts[i];
			size_t chunk = chunk_rows(p->dim), end = p->rb.start[s + 1];

			while (b->posted[s] < CLIENT_POST_DEPTH && p->rb.cursor[s] < end) {
				size_t pos = p->rb.cursor[s], m = end - pos;
				int ret;

				if (m > chunk)
					m = chunk;
				ret = c->ops->pull_post(c->conns[s], p->table, p->src + pos,
							(uint32_t)m, p->dst + pos * p->dim);
				if (ret) {
					b->err = conn_fail(c, ret, s);
					break;
				}
				b->posted[s]++;
				p->rb.cursor[s] += m;
			}
		}
	}
}

/* Waits for every server with posted pulls (all of them, even after a
 * failure: a connection is left with none pending). */
static void batch_wait(struct rdps_pull_batch *b)
{
	struct rdps_client *c = b->c;

	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret;

		if (!b->posted[s])
			continue;
		b->posted[s] = 0;
		ret = c->ops->pull_wait(c->conns[s]);
		if (ret && !b->err)
			b->err = conn_fail(c, ret, s);
	}
}

static bool batch_all_posted(const struct rdps_pull_batch *b)
{
	for (uint32_t i = 0; i < b->nparts; i++)
		for (uint32_t s = 0; s < b->c->num_servers; s++)
			if (b->parts[i].rb.cursor[s] < b->parts[i].rb.start[s + 1])
				return false;
	return true;
}

/* Waits, posts the next rounds and waits again until every row is in. */
static void batch_complete(struct rdps_pull_batch *b)
{
	for (;;) {
		batch_wait(b);
		if (b->err || batch_all_posted(b))
			return;
		batch_post(b);
	}
}

static void batch_reset(struct rdps_pull_batch *b)
{
	b->nparts = 0;
	b->err = 0;
	if (b->c->busy == b)
		b->c->busy = NULL;
}

void rdps_client_pull_batch_destroy(struct rdps_pull_batch *b)
{
	if (!b)
		return;
	if (b->c && b->c->busy == b) {
		batch_wait(b); /* the transports must not write into freed rows */
		batch_reset(b);
	}
	for (uint32_t i = 0; i < RDPS_PULL_BATCH_MAX; i++) {
		struct pull_part *p = &b->parts[i];

		free(p->rb.start);
		free(p->rb.cursor);
		free(p->rb.ids_sorted);
		free(p->rb.perm);
		free(p->rows);
	}
	free(b->posted);
	free(b);
}

int rdps_client_pull_start(struct rdps_client *c, struct rdps_pull_batch *b, uint32_t table,
			   const uint64_t *ids, size_t n, float *out)
{
	struct pull_part *p;
	int ret;

	if (b->c != c)
		return fail(c, -EINVAL, "pull batch of another client%s", "");
	if (c->busy && c->busy != b)
		return fail(c, -EBUSY, "another pull batch is in flight on this client: "
			    "finish it first%s", "");
	if (!b->nparts && ensure_conns(c))
		return -ENOTCONN;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return fail(c, -EINVAL, "a pull of more than 2^32 rows%s", "");
	if (b->nparts == RDPS_PULL_BATCH_MAX) {
		snprintf(c->errmsg, sizeof(c->errmsg), "a pull batch holds at most %u pulls: "
			 "finish it first", RDPS_PULL_BATCH_MAX);
		return -ENOSPC;
	}
	p = &b->parts[b->nparts];
	ret = route_into(c, &p->rb, table, ids, n, &p->grouped);
	if (ret)
		return ret;
	p->table = table;
	p->dim = c->tables[table].dim;
	p->n = n;
	p->out = out;
	p->src = ids;
	p->dst = out;
	if (p->grouped) {
		size_t bytes = p->rows_cap * sizeof(float);

		ret = rdps_reserve((void **)&p->rows, &bytes, n * p->dim * sizeof(float));
		if (ret)
			return ret;
		p->rows_cap = bytes / sizeof(float);
		p->src = p->rb.ids_sorted;
		p->dst = p->rows;
	}
	memcpy(p->rb.cursor, p->rb.start, c->num_servers * sizeof(size_t));
	b->nparts++;
	c->busy = b;
	/* After a failure, finish reads the whole batch again (or reports it). */
	if (!b->err)
		batch_post(b);
	return 0;
}

int rdps_client_pull_finish(struct rdps_client *c, struct rdps_pull_batch *b)
{
	int ret;

	if (b->c != c)
		return fail(c, -EINVAL, "pull batch of another client%s", "");
	if (!b->nparts)
		return 0;
	batch_complete(b);
	/* A pull is idempotent: after a reconnect, read the batch again. */
	for (int tries = 0; b->err && tries < 3 && c->reconnect_ms && conn_lost(b->err); tries++) {
		if (recover(c, b->err))
			break;
		b->err = 0;
		for (uint32_t i = 0; i < b->nparts; i++)
			memcpy(b->parts[i].rb.cursor, b->parts[i].rb.start,
			       c->num_servers * sizeof(size_t));
		batch_post(b);
		batch_complete(b);
	}
	ret = b->err;
	for (uint32_t i = 0; !ret && i < b->nparts; i++) {
		const struct pull_part *p = &b->parts[i];

		if (!p->grouped)
			continue;
		for (size_t k = 0; k < p->n; k++)
			memcpy(p->out + (size_t)p->rb.perm[k] * p->dim, p->rows + k * p->dim,
			       p->dim * sizeof(float));
	}
	batch_reset(b);
	return ret;
}

int rdps_client_pull(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     size_t n, float *out)
{
	int ret;

	if (c->busy)
		return fail(c, -EBUSY, "a pull batch is in flight on this client: "
			    "finish it first%s", "");
	if (!c->own && (ret = rdps_client_pull_batch_create(c, &c->own)))
		return ret;
	ret = rdps_client_pull_start(c, c->own, table, ids, n, out);
	if (ret)
		return ret; /* nothing was started */
	return rdps_client_pull_finish(c, c->own);
}

/* A connection carrying pushes was lost: reconnect, and say what that cost. */
static int lost_pushes(struct rdps_client *c, int ret, uint32_t s)
{
	if (!c->reconnect_ms || !conn_lost(ret))
		return ret;
	if (reconnect(c, s))
		return ret;
	snprintf(c->errmsg, sizeof(c->errmsg), "reconnected to server %u; %s", s, c->lost_note);
	return -ECONNRESET;
}

int rdps_client_push(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     const float *grads, size_t n)
{
	const uint64_t *src = ids;
	const uint32_t *index = NULL;
	const float *g = grads;
	uint32_t dim;
	size_t chunk;
	int grouped, ret;

	if (ensure_conns(c))
		return -ENOTCONN;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	ret = route(c, table, ids, n, &grouped);
	if (ret)
		return ret;
	dim = c->tables[table].dim;
	chunk = chunk_rows(dim);
	c->unflushed = true;
	if (grouped) {
		/* The backend reads each row where the caller keeps it. */
		src = c->ids_sorted;
		index = c->perm;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		for (size_t pos = c->start[s]; pos < c->start[s + 1];) {
			size_t m = c->start[s + 1] - pos;

			if (m > chunk)
				m = chunk;
			if (index)
				ret = c->ops->push_gather(c->conns[s], table, src + pos, g,
							  index + pos, (uint32_t)m);
			else
				ret = c->ops->push(c->conns[s], table, src + pos, g + pos * dim,
						   (uint32_t)m);
			if (ret)
				return lost_pushes(c, conn_fail(c, ret, s), s);
			c->pushed[s] += m;
			pos += m;
		}
	}
	return 0;
}

int rdps_client_flush(struct rdps_client *c)
{
	bool split = c->ops->call_send && c->ops->call_recv;
	int first = 0;

	if (ensure_conns(c))
		return -ENOTCONN;
	c->unflushed = false;
	/* Every server's flush goes out before any is waited for (the
	 * waits then overlap); c->cursor (scratch) marks those that failed. */
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = split ? c->ops->call_send(c->conns[s], RDPS_REQ_FLUSH, NULL, 0, 0) : 0;

		c->cursor[s] = ret != 0;
		if (ret)
			ret = lost_pushes(c, conn_fail(c, ret, s), s);
		if (ret && !first)
			first = ret;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret;

		if (c->cursor[s])
			continue;
		ret = split ? c->ops->call_recv(c->conns[s], RDPS_REQ_FLUSH, NULL, 0, 0)
			    : c->ops->call(c->conns[s], RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0);
		if (ret)
			ret = lost_pushes(c, conn_fail(c, ret, s), s);
		if (ret && !first)
			first = ret;
	}
	return first;
}

int rdps_client_barrier(struct rdps_client *c)
{
	int ret = rdps_client_flush(c);

	if (ret)
		return ret;
	ret = c->ops->call(c->conns[0], RDPS_REQ_BARRIER, NULL, 0, NULL, 0, c->barrier_timeout_ms);
	if (ret)
		return conn_fail(c, ret, 0);
	return 0;
}

int rdps_client_allreduce(struct rdps_client *c, double *v, size_t n)
{
	double sum[RDPS_ALLREDUCE_MAX];
	int ret;

	if (ensure_conns(c))
		return -ENOTCONN;
	if (!n || n > RDPS_ALLREDUCE_MAX)
		return -EINVAL;
	ret = c->ops->call(c->conns[0], RDPS_REQ_ALLREDUCE, v, n * sizeof(double), sum,
			   n * sizeof(double), c->barrier_timeout_ms);
	if (ret)
		return conn_fail(c, ret, 0);
	memcpy(v, sum, n * sizeof(double));
	return 0;
}

int rdps_client_server_stats(struct rdps_client *c, uint32_t server,
			     struct rdps_server_stats *out)
{
	int ret;

	if (server >= c->num_servers)
		return fail(c, -EINVAL, "no such server%s", "");
	if (ensure_conns(c))
		return -ENOTCONN;
	ret = c->ops->call(c->conns[server], RDPS_REQ_STATS, NULL, 0, out, sizeof(*out), 0);
	return ret ? conn_fail(c, ret, server) : 0;
}

int rdps_client_call_idempotent(struct rdps_client *c, uint32_t s, uint32_t type,
				const void *req, size_t req_len, void *reply, size_t reply_cap,
				size_t *reply_len)
{
	int ret;

	if (s >= c->num_servers)
		return fail(c, -EINVAL, "no such server%s", "");
	for (int attempt = 0;; attempt++) {
		if (ensure_conns(c))
			return -ENOTCONN;
		ret = c->ops->call(c->conns[s], type, req, req_len, reply, reply_cap, 0);
		if (!ret) {
			*reply_len = c->conns[s]->reply_len;
			return 0;
		}
		ret = conn_fail(c, ret, s);
		/* One more try after a reconnection: the request changes nothing. */
		if (attempt || recover(c, ret))
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
			return fail(c, -EINVAL, "no such server%s", "");
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

		if (ensure_conns(c))
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
		ret = conn_fail(c, ret, bad);
		if (late && ret == -ETIMEDOUT)
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "%s: no %s reply within %d ms (%u of the %u servers asked at once "
				 "did not answer in time)", c->conns[bad]->peer,
				 rdps_req_name((int)type), c->cp.timeout_ms, late, sent);
		/* Once more after a reconnection: the requests change nothing. */
		if (attempt || recover(c, ret))
			return ret;
	}
}

int rdps_client_fail(struct rdps_client *c, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	return ret;
}

int rdps_client_table_offsets(const struct rdps_client *c, uint32_t table, uint64_t *off)
{
	if (table >= c->num_tables || !c->offsets[table])
		return -ENOENT;
	memcpy(off, c->offsets[table], (c->num_servers + 1) * sizeof(*off));
	return 0;
}

int rdps_client_checkpoint(struct rdps_client *c)
{
	int first = 0;

	if (ensure_conns(c))
		return -ENOTCONN;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = c->ops->call(c->conns[s], RDPS_REQ_CHECKPOINT, NULL, 0, NULL, 0, 0);

		if (ret && !first)
			first = conn_fail(c, ret, s);
	}
	return first;
}

int rdps_client_shutdown_servers(struct rdps_client *c)
{
	/* An observer has pushed nothing (and may not flush). */
	int first = c->observer ? 0 : rdps_client_flush(c);

	if (ensure_conns(c))
		return -ENOTCONN;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = c->ops->call(c->conns[s], RDPS_REQ_SHUTDOWN, NULL, 0, NULL, 0, 0);

		if (ret && !first)
			first = conn_fail(c, ret, s);
	}
	return first;
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

/* ---------------------------------------------------------------------- */
/* Rows of any dtype                                                       */

/* A table's row as the caller packs it (bytes) and as it travels (words). */
static int row_shape(struct rdps_client *c, uint32_t table, size_t *bytes, uint32_t *words)
{
	const struct rdps_table_desc *d;

	if (table >= c->num_tables || !c->tables[table].dim) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u", table);
		return -ENOENT;
	}
	d = &c->tables[table];
	*words = d->dim;
	*bytes = d->elems ? rdps_dtype_size((int)d->dtype) * d->elems : (size_t)d->dim * 4;
	return 0;
}

static int reserve_xbuf(struct rdps_client *c, size_t bytes)
{
	return rdps_reserve(&c->xbuf, &c->xcap, bytes ? bytes : 1);
}

int rdps_client_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
		    void *out)
{
	size_t bytes;
	uint32_t words;
	int ret = row_shape(c, table, &bytes, &words);

	if (ret)
		return ret;
	/* Rows of whole words land where the caller wants them. */
	if (bytes == (size_t)words * 4)
		return rdps_client_pull(c, table, ids, n, out);
	if ((ret = reserve_xbuf(c, n * words * 4)))
		return ret;
	ret = rdps_client_pull(c, table, ids, n, c->xbuf);
	for (size_t i = 0; !ret && i < n; i++)
		memcpy((char *)out + i * bytes, (char *)c->xbuf + i * words * 4, bytes);
	return ret;
}

int rdps_client_set(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		    const void *rows, size_t n)
{
	size_t bytes, row, chunk;
	uint32_t words;
	const uint64_t *src = ids;
	const char *data = rows;
	int grouped, ret = row_shape(c, table, &bytes, &words);

	if (ret)
		return ret;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	if (ensure_conns(c))
		return -ENOTCONN;
	/* The rows travel on the control path: this client's pushes first. */
	if (c->unflushed && (ret = rdps_client_flush(c)))
		return ret;
	ret = route(c, table, ids, n, &grouped);
	if (ret)
		return ret;
	row = (size_t)words * 4;
	if (grouped || bytes != row) {
		/* Grouped by server, each row in whole words (zero-padded). */
		if ((ret = reserve_xbuf(c, n * row)))
			return ret;
		for (size_t i = 0; i < n; i++) {
			char *dst = (char *)c->xbuf + i * row;

			memcpy(dst, data + (size_t)(grouped ? c->perm[i] : i) * bytes, bytes);
			memset(dst + bytes, 0, row - bytes);
		}
		data = c->xbuf;
		if (grouped)
			src = c->ids_sorted;
	}
	chunk = chunk_rows(words);
	for (uint32_t s = 0; s < c->num_servers; s++) {
		for (size_t pos = c->start[s]; pos < c->start[s + 1];) {
			size_t m = c->start[s + 1] - pos;

			if (m > chunk)
				m = chunk;
			ret = c->ops->set(c->conns[s], table, src + pos, data + pos * row, (uint32_t)m);
			if (ret)
				return conn_fail(c, ret, s);
			pos += m;
		}
	}
	return 0;
}
