// SPDX-License-Identifier: MIT
/*
 * In-process backend: client and server in one process (standalone mode and
 * tests). A connection calls the server core's handler directly, under the
 * server's lock; a deferred request (barrier) waits on a condition variable
 * until the core completes it. Servers are found by "host:port" in a
 * process-wide registry.
 *
 * Threads: the callers' threads are the server's. With num_threads > 1,
 * pulls and pushes (never deferred) skip the lock: up to num_threads of
 * them run the handler at once (a semaphore), holding the server's data
 * lock for reading so that destroy() waits for them.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "wire.h"

static const struct rdps_transport_ops inproc_ops;

struct inproc_waiter {
	uint64_t token;
	bool done;
	int status;
	char msg[256];
	void *reply;         /* the request's reply buffer */
	size_t reply_cap, reply_len;
	struct inproc_waiter *next;
};

struct inproc_server {
	struct rdps_tserver base;
	struct rdps_listen_params p;
	struct rdps_region regions[RDPS_MAX_TABLES];
	struct rdps_secret secret;     /* copied: clients must hold the same */
	char key[RDPS_HOST_MAX + 8];
	pthread_mutex_t lock;          /* serialises handler calls */
	pthread_cond_t cond;           /* deferred completions, shutdown */
	pthread_rwlock_t data_lock;    /* concurrent rows requests (read) vs destroy */
	sem_t data_slots;              /* num_threads rows requests at once */
	struct inproc_waiter *waiters; /* deferred requests in progress */
	uint64_t next_token;
	unsigned refs;                 /* the listener + connections */
	bool closed;
	struct inproc_server *next;    /* registry list */
};

struct inproc_conn {
	struct rdps_conn base;
	struct inproc_server *srv;
	uint32_t client_id, num_clients;
	bool observer;
	int timeout_ms;
	int pull_status;               /* first error of posted pulls */
	bool hello;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_cond; /* CLOCK_MONOTONIC, see registry_init */
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static struct inproc_server *registry;

static inline struct inproc_conn *to_inproc_conn(struct rdps_conn *c)
{
	return container_of(c, struct inproc_conn, base);
}

static inline struct inproc_server *to_inproc_server(struct rdps_tserver *s)
{
	return container_of(s, struct inproc_server, base);
}

static void deadline_ts(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int init_cond(pthread_cond_t *c)
{
	pthread_condattr_t a;
	int ret;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	ret = pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
	return -ret;
}

static int init_cond(pthread_cond_t *c);

static void registry_init(void)
{
	/* Deadlines are monotonic, so the condition variable must be too. */
	if (init_cond(&registry_cond))
		abort();
}

static void server_put(struct inproc_server *is)
{
	bool last;

	pthread_mutex_lock(&registry_lock);
	last = --is->refs == 0;
	pthread_mutex_unlock(&registry_lock);
	if (!last)
		return;
	pthread_cond_destroy(&is->cond);
	pthread_mutex_destroy(&is->lock);
	pthread_rwlock_destroy(&is->data_lock);
	sem_destroy(&is->data_slots);
	free(is);
}

/* Calls the handler with the server locked; waits for a deferred reply. */
static int call_handler(struct inproc_conn *ic, struct rdps_request *req, int timeout_ms)
{
	struct inproc_server *is = ic->srv;
	struct inproc_waiter w = { 0 };
	struct timespec dl;
	int ret;

	pthread_mutex_lock(&is->lock);
	if (is->closed) {
		pthread_mutex_unlock(&is->lock);
		snprintf(ic->base.errmsg, sizeof(ic->base.errmsg), "%s: server shut down",
			 ic->base.peer);
		return -ECONNRESET;
	}
	req->client_id = ic->client_id;
	req->num_clients = ic->num_clients;
	req->observer = ic->observer;
	req->admin = true; /* in this process */
	req->peer = "inproc";
	req->token = w.token = ++is->next_token;
	w.reply = req->reply;
	w.reply_cap = req->reply_cap;
	/* Registered before the call: the core may complete it from inside. */
	w.next = is->waiters;
	is->waiters = &w;
	ret = is->p.handle(is->p.ctx, req);
	if (ret == RDPS_REPLY_DEFERRED) {
		deadline_ts(&dl, timeout_ms);
		while (!w.done && !is->closed) {
			if (pthread_cond_timedwait(&is->cond, &is->lock, &dl) == ETIMEDOUT)
				break;
		}
		if (w.done) {
			ret = w.status;
			req->reply_len = w.reply_len;
			if (ret < 0)
				snprintf(req->errmsg, req->errlen, "%s", w.msg);
		} else {
			ret = is->closed ? -ECONNRESET : -ETIMEDOUT;
			snprintf(req->errmsg, req->errlen, "%s after %d ms waiting for the %s reply",
				 is->closed ? "server shut down" : "timed out", timeout_ms,
				 rdps_req_name((int)req->type));
		}
	}
	for (struct inproc_waiter **pp = &is->waiters; *pp; pp = &(*pp)->next)
		if (*pp == &w) {
			*pp = w.next;
			break;
		}
	if (ret < 0 && is->base.stats && req->type < 16)
		RDPS_STAT_ADD(is->base.stats->errors[req->type], 1);
	pthread_mutex_unlock(&is->lock);
	return ret;
}

/* A pull or push with several server threads: in parallel with others. */
static int call_rows_handler(struct inproc_conn *ic, struct rdps_request *req)
{
	struct inproc_server *is = ic->srv;
	int ret;

	pthread_rwlock_rdlock(&is->data_lock);
	if (is->closed) {
		pthread_rwlock_unlock(&is->data_lock);
		snprintf(ic->base.errmsg, sizeof(ic->base.errmsg), "%s: server shut down",
			 ic->base.peer);
		return -ECONNRESET;
	}
	req->client_id = ic->client_id;
	req->num_clients = ic->num_clients;
	req->observer = ic->observer;
	req->admin = true; /* in this process */
	req->peer = "inproc";
	while (sem_wait(&is->data_slots) && errno == EINTR)
		;
	ret = is->p.handle(is->p.ctx, req);
	sem_post(&is->data_slots);
	if (ret < 0 && is->base.stats && req->type < 16)
		RDPS_STAT_ADD(is->base.stats->errors[req->type], 1);
	pthread_rwlock_unlock(&is->data_lock);
	return ret;
}

static int fail(struct inproc_conn *ic, int ret, const char *why)
{
	snprintf(ic->base.errmsg, sizeof(ic->base.errmsg), "%s: %s", ic->base.peer,
		 why && why[0] ? why : rdps_strerror(ret));
	return ret;
}

static int inproc_connect(const struct rdps_conn_params *p, struct rdps_conn **out,
			  char *err, size_t errlen)
{
	struct inproc_server *is;
	struct inproc_conn *ic;
	char key[RDPS_HOST_MAX + 8], why[256] = "";
	struct rdps_request req = { .type = RDPS_REQ_HELLO, .errmsg = why,
				    .errlen = sizeof(why) };
	int timeout = p->timeout_ms > 0 ? p->timeout_ms : 60000, ret;
	struct timespec dl;

	*out = NULL;
	pthread_once(&registry_once, registry_init);
	snprintf(key, sizeof(key), "%s:%u", p->host, p->port);
	deadline_ts(&dl, timeout);
	pthread_mutex_lock(&registry_lock);
	for (;;) {
		for (is = registry; is && strcmp(is->key, key); is = is->next)
			;
		if (is || pthread_cond_timedwait(&registry_cond, &registry_lock, &dl) ==
				  ETIMEDOUT)
			break;
	}
	if (is)
		is->refs++;
	pthread_mutex_unlock(&registry_lock);
	if (!is) {
		snprintf(err, errlen, "no in-process server at %s within %d ms", key, timeout);
		return -ECONNREFUSED;
	}
	ic = calloc(1, sizeof(*ic));
	if (!ic) {
		server_put(is);
		return -ENOMEM;
	}
	ic->base.ops = &inproc_ops;
	ic->srv = is;
	ic->client_id = p->client_id;
	ic->num_clients = p->num_clients;
	ic->observer = p->observer;
	ic->timeout_ms = timeout;
	snprintf(ic->base.peer, sizeof(ic->base.peer), "server %u (inproc %s)",
		 p->server_id, key);
	{
		/* One process, one memory: the secrets are compared directly. */
		size_t cl = p->secret ? p->secret->len : 0;
		uint8_t a[RDPS_MAC_LEN], b[RDPS_MAC_LEN];

		if (is->secret.len || cl) {
			bool same = false;

			if (is->secret.len && cl) {
				/* Fixed-length MACs compare in constant time. */
				rdps_auth_mac(&is->secret, "inproc", "", 0, "", 0, "", 0, a);
				rdps_auth_mac(p->secret, "inproc", "", 0, "", 0, "", 0, b);
				same = rdps_auth_equal(a, b);
			}
			if (!same) {
				snprintf(err, errlen, "%s: authentication failed: %s", ic->base.peer,
					 !cl ? "the server requires a shared secret"
					     : !is->secret.len ? "the server does not authenticate clients, but this client has a secret"
							       : "the shared secrets differ");
				ret = -EACCES;
				goto err_free;
			}
		}
	}
	if (is->p.server_id != p->server_id) {
		snprintf(err, errlen, "%s: the server at this address is server %u",
			 ic->base.peer, is->p.server_id);
		ret = -EPROTO;
		goto err_free;
	}
	req.pushed_rows = p->pushed_rows;
	ret = call_handler(ic, &req, timeout);
	if (ret < 0) {
		snprintf(err, errlen, "refused by %s: %s", ic->base.peer,
			 why[0] ? why : rdps_strerror(ret));
		goto err_free;
	}
	ic->hello = true;
	ic->base.welcome = req.welcome;
	ic->base.server_id = is->p.server_id;
	ic->base.num_servers = is->p.num_servers;
	pthread_mutex_lock(&registry_lock);
	ic->base.num_tables = is->p.num_regions;
	for (uint32_t i = 0; i < is->p.num_regions; i++)
		ic->base.tables[i] = is->regions[i].desc;
	pthread_mutex_unlock(&registry_lock);
	*out = &ic->base;
	return 0;

err_free:
	server_put(is);
	free(ic);
	return ret;
}

static void inproc_close(struct rdps_conn *c)
{
	struct inproc_conn *ic;

	if (!c)
		return;
	ic = to_inproc_conn(c);
	if (ic->hello) {
		struct rdps_request req = { .type = RDPS_REQ_BYE };

		pthread_mutex_lock(&ic->srv->lock);
		if (!ic->srv->closed) {
			req.client_id = ic->client_id;
			req.num_clients = ic->num_clients;
			req.observer = ic->observer;
			req.admin = true;
			req.peer = "inproc";
			ic->srv->p.handle(ic->srv->p.ctx, &req);
		}
		pthread_mutex_unlock(&ic->srv->lock);
	}
	server_put(ic->srv);
	free(ic);
}

static int rows_request(struct inproc_conn *ic, uint32_t type, uint32_t table,
			const uint64_t *ids, uint32_t n, const float *grads,
			const uint32_t *index, float *out)
{
	char why[256] = "";
	struct rdps_request req = { .type = type, .table = table, .n = n, .ids = ids,
				    .grads = grads, .grad_index = index, .rows_out = out,
				    .errmsg = why, .errlen = sizeof(why) };
	int ret;

	if (table >= ic->base.num_tables || !ic->base.tables[table].dim) {
		snprintf(why, sizeof(why), "unknown table %u", table);
		return fail(ic, -ENOENT, why);
	}
	if (ic->srv->base.num_threads > 1)
		ret = call_rows_handler(ic, &req);
	else
		ret = call_handler(ic, &req, ic->timeout_ms);
	return ret < 0 ? fail(ic, ret, why) : 0;
}

static int inproc_pull_post(struct rdps_conn *c, uint32_t table,
			    const uint64_t *ids, uint32_t n, float *out)
{
	struct inproc_conn *ic = to_inproc_conn(c);
	int ret = rows_request(ic, RDPS_REQ_PULL, table, ids, n, NULL, NULL, out);

	if (ret && !ic->pull_status)
		ic->pull_status = ret;
	return 0;
}

static int inproc_pull_wait(struct rdps_conn *c)
{
	struct inproc_conn *ic = to_inproc_conn(c);
	int ret = ic->pull_status;

	ic->pull_status = 0;
	return ret;
}

static int inproc_push(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
		       const float *grads, uint32_t n)
{
	return rows_request(to_inproc_conn(c), RDPS_REQ_PUSH, table, ids, n, grads, NULL, NULL);
}

/* The server's optimizer reads the caller's rows where they are. */
static int inproc_push_gather(struct rdps_conn *c, uint32_t table, const uint64_t *ids,
			      const float *grads, const uint32_t *index, uint32_t n)
{
	return rows_request(to_inproc_conn(c), RDPS_REQ_PUSH, table, ids, n, grads, index, NULL);
}

/* Rows written: the rows (dim words each) go where a push's gradients do. */
static int inproc_set(struct rdps_conn *c, uint32_t table, const uint64_t *ids, const void *rows,
		      uint32_t n)
{
	return rows_request(to_inproc_conn(c), RDPS_REQ_SET, table, ids, n, rows, NULL, NULL);
}

static int inproc_call(struct rdps_conn *c, uint32_t type, const void *rq, size_t rq_len,
		       void *reply, size_t reply_len, int timeout_ms)
{
	struct inproc_conn *ic = to_inproc_conn(c);
	char why[256] = "";
	struct rdps_request req = { .type = type, .reply = reply, .reply_cap = reply_len,
				    .payload = rq, .payload_len = rq_len,
				    .errmsg = why, .errlen = sizeof(why) };
	int ret;

	if (!rdps_wire_call_len_ok(type, rq_len))
		return -EINVAL;
	if (type == RDPS_REQ_STATE) {
		ret = rdps_wire_check_state(rq, rq_len, why, sizeof(why));
		if (ret)
			return fail(ic, ret, why);
	} else if (type == RDPS_REQ_SAMPLE) {
		/* The caller sized reply for the most edges its seeds may have. */
		ret = rdps_wire_check_sample(rq, rq_len, why, sizeof(why));
		if (ret)
			return fail(ic, ret, why);
		if (reply_len < rdps_sample_reply_bound(((const struct rdps_sample_req *)rq)->n,
							((const struct rdps_sample_req *)rq)->fanout))
			return -EINVAL;
	}
	c->reply_len = 0;
	ret = call_handler(ic, &req, timeout_ms > 0 ? timeout_ms : ic->timeout_ms);
	if (ret < 0)
		return fail(ic, ret, why);
	if ((type == RDPS_REQ_STATS || type == RDPS_REQ_ALLREDUCE || type == RDPS_REQ_TABLE ||
	     type == RDPS_REQ_STATE) && req.reply_len != reply_len)
		return fail(ic, -EPROTO, "reply of unexpected size");
	c->reply_len = req.reply_len;
	return 0;
}

/* A table clients made: new connections see it (the client layer tells
 * its existing ones). Same process: no remote access descriptors. */
static int inproc_add_region(struct rdps_tserver *s, struct rdps_region *r)
{
	struct inproc_server *is = to_inproc_server(s);
	uint32_t t = r->desc.table_id;

	if (t >= RDPS_MAX_TABLES || !r->desc.dim)
		return -EINVAL;
	r->desc.remote_addr = r->desc.rkey = 0;
	pthread_mutex_lock(&registry_lock);
	is->regions[t] = *r;
	if (t >= is->p.num_regions)
		is->p.num_regions = t + 1;
	pthread_mutex_unlock(&registry_lock);
	return 0;
}

static void inproc_remove_region(struct rdps_tserver *s, uint32_t table_id)
{
	struct inproc_server *is = to_inproc_server(s);

	if (table_id >= RDPS_MAX_TABLES)
		return;
	pthread_mutex_lock(&registry_lock);
	memset(&is->regions[table_id], 0, sizeof(is->regions[table_id]));
	pthread_mutex_unlock(&registry_lock);
}

static int inproc_listen(const struct rdps_listen_params *p, struct rdps_tserver **out,
			 char *err, size_t errlen)
{
	struct inproc_server *is, *o;
	int ret;

	*out = NULL;
	if (p->num_regions > RDPS_MAX_TABLES || !p->handle)
		return -EINVAL;
	is = calloc(1, sizeof(*is));
	if (!is)
		return -ENOMEM;
	is->base.ops = &inproc_ops;
	is->p = *p;
	memcpy(is->regions, p->regions, p->num_regions * sizeof(*p->regions));
	is->p.regions = is->regions;
	if (p->secret)
		is->secret = *p->secret;
	is->p.secret = NULL;
	/* Same process, same memory: no remote access descriptors. */
	for (uint32_t i = 0; i < p->num_regions; i++) {
		is->regions[i].desc.remote_addr = 0;
		is->regions[i].desc.rkey = 0;
	}
	pthread_once(&registry_once, registry_init);
	snprintf(is->key, sizeof(is->key), "%s:%u", p->host, p->port);
	is->refs = 1;
	/* Recursive: the core may complete a deferred request (reply) from
	 * inside a handler that already holds the lock. */
	{
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&is->lock, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	is->base.num_threads = p->num_threads ? p->num_threads : 1;
	is->base.progress_threads = 1; /* requests run on the callers' threads */
	ret = init_cond(&is->cond);
	if (ret)
		goto err_free;
	pthread_rwlock_init(&is->data_lock, NULL);
	if (sem_init(&is->data_slots, 0, is->base.num_threads)) {
		ret = -errno;
		pthread_rwlock_destroy(&is->data_lock);
		goto err_destroy_cond;
	}
	pthread_mutex_lock(&registry_lock);
	for (o = registry; o && strcmp(o->key, is->key); o = o->next)
		;
	if (o) {
		pthread_mutex_unlock(&registry_lock);
		snprintf(err, errlen, "in-process address %s is already in use", is->key);
		ret = -EADDRINUSE;
		goto err_destroy_sem;
	}
	is->next = registry;
	registry = is;
	pthread_cond_broadcast(&registry_cond);
	pthread_mutex_unlock(&registry_lock);
	*out = &is->base;
	return 0;

err_destroy_sem:
	sem_destroy(&is->data_slots);
	pthread_rwlock_destroy(&is->data_lock);
err_destroy_cond:
	pthread_cond_destroy(&is->cond);
err_free:
	pthread_mutex_destroy(&is->lock);
	free(is);
	return ret;
}

static int inproc_progress(struct rdps_tserver *s, uint32_t thread, int timeout_ms)
{
	struct inproc_server *is = to_inproc_server(s);
	struct timespec dl;

	/* Requests run on the callers' threads; the server thread only waits. */
	deadline_ts(&dl, timeout_ms);
	pthread_mutex_lock(&is->lock);
	pthread_cond_timedwait(&is->cond, &is->lock, &dl);
	pthread_mutex_unlock(&is->lock);
	return 0;
}

/* Called by the core from inside a handler (lock held, recursive) or from
 * another thread. */
static int inproc_reply(struct rdps_tserver *s, uint64_t token, uint32_t type, int status,
			const void *payload, size_t len)
{
	struct inproc_server *is = to_inproc_server(s);
	struct inproc_waiter *w;
	int ret = -ENOTCONN;

	pthread_mutex_lock(&is->lock);
	for (w = is->waiters; w; w = w->next) {
		if (w->token != token)
			continue;
		w->done = true;
		w->status = status;
		if (status < 0) {
			snprintf(w->msg, sizeof(w->msg), "%.*s", (int)(payload ? len : 0),
				 payload ? (const char *)payload : "");
		} else if (len && w->reply && len <= w->reply_cap) {
			memcpy(w->reply, payload, len);
			w->reply_len = len;
		}
		ret = 0;
		break;
	}
	pthread_cond_broadcast(&is->cond);
	pthread_mutex_unlock(&is->lock);
	return ret;
}

static void inproc_destroy(struct rdps_tserver *s, int timeout_ms)
{
	struct inproc_server *is, **pp;

	if (!s)
		return;
	is = to_inproc_server(s);
	pthread_mutex_lock(&registry_lock);
	for (pp = &registry; *pp; pp = &(*pp)->next)
		if (*pp == is) {
			*pp = is->next;
			break;
		}
	pthread_mutex_unlock(&registry_lock);
	pthread_rwlock_wrlock(&is->data_lock); /* rows requests in the handler end */
	pthread_mutex_lock(&is->lock);
	is->closed = true;
	pthread_cond_broadcast(&is->cond);
	pthread_mutex_unlock(&is->lock);
	pthread_rwlock_unlock(&is->data_lock);
	server_put(is);
}

static void inproc_query(uint32_t num_clients, struct rdps_transport_info *out)
{
	/* Clients read the shards' memory directly, in this process. */
	*out = (struct rdps_transport_info){ .push_msg_bytes = SIZE_MAX, .one_sided_pulls = true };
}

static int inproc_route(const char *host, char *via, size_t vialen)
{
	snprintf(via, vialen, "in-process only, never chosen by auto");
	return -EOPNOTSUPP;
}

static const struct rdps_transport_ops inproc_ops = {
	.name = "inproc",
	.connect = inproc_connect,
	.close = inproc_close,
	.pull_post = inproc_pull_post,
	.pull_wait = inproc_pull_wait,
	.push = inproc_push,
	.push_gather = inproc_push_gather,
	.set = inproc_set,
	.call = inproc_call,
	.listen = inproc_listen,
	.progress = inproc_progress,
	.reply = inproc_reply,
	.destroy = inproc_destroy,
	.add_region = inproc_add_region,
	.remove_region = inproc_remove_region,
	.query = inproc_query,
	.route = inproc_route,
};

const struct rdps_transport_ops *rdps_transport_inproc(void)
{
	return &inproc_ops;
}
