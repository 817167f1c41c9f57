// SPDX-License-Identifier: MIT
/*
 * The ofi backend (transport/ofi*.c) on this host, over libfabric's
 * "tcp;ofi_rxm" provider on loopback (FI_PROVIDER is set to it unless the
 * environment names another RMA-capable provider; the suite is skipped
 * where libfabric has none). A server of the backend runs in a thread of
 * the test with a small handler of its own (a shard of rows with
 * checksums, SGD with lr 1), a client connects to it:
 *
 * - round trip: pushes of many messages (RDPS_OFI_MSG_BYTES small, so each
 *   push is segmented), a flush, then pulls (coalesced runs and scattered
 *   ids, duplicates) equal the sums, one-sided;
 * - the same with pulls forced two-sided (RDPS_OFI_PULLS=msg), the
 *   fallback for providers or EFA devices without READ;
 * - credits: with the server's progress frozen after the bind, a client
 *   pushing one-row messages stops at exactly its credits (control: a
 *   client given more credits than granted runs past them);
 * - a torn row is read again until whole (control: relaxed mode takes it
 *   torn);
 * - flushes are counted: acknowledged only once every push message sent
 *   before them was handled, in whatever order they arrived (control:
 *   acknowledging on arrival fails it);
 * - the receive pool's accounting (ofi_pool.c) keeps free + promised ==
 *   posted + in hand, and refuses a return its session had no credit for;
 * - with a secret, a message whose cookie is not the session token's MAC
 *   is dropped (control: the same client's real cookie works);
 * - an ofi client refused by a TCP server says why.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/kvstore.h"
#include "rdps_test.h"
#include "transport/ofi.h"

#define ROWS 997
#define DIM 13

struct tsrv {
	struct rdps_tserver *ts;
	const struct rdps_transport_ops *ops;
	pthread_t thr;
	volatile int stop, frozen, failed;
	char *rows;                   /* the shard: rows with checksums */
	size_t stride, len;
	struct rdps_region reg;
	struct rdps_server_stats stats;
	volatile uint64_t pushes, flushes, pulls;
	int port;
};

static struct tsrv S;

static float *row_data(struct tsrv *s, uint64_t id)
{
	return (float *)(s->rows + id * s->stride + RDPS_ROW_DATA_OFFSET);
}

/* The table is "entity" in slot 0. */
static uint64_t row_tag(uint64_t id)
{
	return rdps_row_tag(rdps_row_table_key(0, "entity"), id);
}

static void row_seal(struct tsrv *s, uint64_t id)
{
	char *r = s->rows + id * s->stride;
	uint64_t ver, check;

	memcpy(&ver, r, 8);
	ver++;
	memcpy(r, &ver, 8);
	check = rdps_row_checksum(row_tag(id), ver, row_data(s, id), DIM);
	memcpy(r + RDPS_ROW_CHECK_OFFSET, &check, 8);
}

static int handle(void *ctx, struct rdps_request *req)
{
	struct tsrv *s = ctx;

	switch (req->type) {
	case RDPS_REQ_PUSH:
		for (uint32_t i = 0; i < req->n; i++) {
			const float *g = req->grads + (size_t)(req->grad_index ? req->grad_index[i] : i) * DIM;
			float *d = row_data(s, req->ids[i]);

			if (req->ids[i] >= ROWS)
				return -ERANGE;
			for (int j = 0; j < DIM; j++)
				d[j] -= g[j];
			row_seal(s, req->ids[i]);
		}
		__atomic_add_fetch(&s->pushes, 1, __ATOMIC_RELAXED);
		return 0;
	case RDPS_REQ_PULL:
		for (uint32_t i = 0; i < req->n; i++)
			memcpy(req->rows_out + (size_t)i * DIM, row_data(s, req->ids[i]), DIM * 4);
		__atomic_add_fetch(&s->pulls, 1, __ATOMIC_RELAXED);
		return 0;
	case RDPS_REQ_FLUSH:
		__atomic_add_fetch(&s->flushes, 1, __ATOMIC_RELAXED);
		return 0;
	case RDPS_REQ_STATS:
		memcpy(req->reply, &s->stats, sizeof(s->stats));
		req->reply_len = sizeof(s->stats);
		return 0;
	default:
		return 0;
	}
}

static void *serve(void *a)
{
	struct tsrv *s = a;

	while (!s->stop) {
		if (s->frozen) {
			usleep(1000);
			continue;
		}
		if (s->ops->progress(s->ts, 0, 10) < 0) {
			s->failed = 1; /* asserted by server_stop() */
			break;
		}
	}
	return NULL;
}

/* libfabric's tcp;ofi_rxm (or FI_PROVIDER's) with RMA, or skip. */
static void need_provider(void)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	int ret;

	setenv("FI_PROVIDER", "tcp;ofi_rxm", 0);
	cr_assert(h);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_REMOTE_READ;
	ret = fi_getinfo(ofi_api_version(), NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	fi_freeinfo(info);
	if (ret)
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
}

static struct rdps_secret secret; /* empty: no authentication */

static void server_start(const char *transport)
{
	struct rdps_listen_params lp = { .host = "127.0.0.1", .server_id = 0, .num_servers = 1,
					 .regions = &S.reg, .num_regions = 1, .handle = handle,
					 .ctx = &S, .secret = &secret };
	char err[512];

	memset(&S, 0, sizeof(S));
	S.ops = rdps_transport_find(transport);
	cr_assert(S.ops);
	S.stride = rdps_row_stride(DIM);
	S.len = RDPS_ALIGN_UP(ROWS * S.stride, 4096);
	cr_assert_eq(posix_memalign((void **)&S.rows, 4096, S.len), 0);
	memset(S.rows, 0, S.len);
	for (uint64_t id = 0; id < ROWS; id++) {
		for (int j = 0; j < DIM; j++)
			row_data(&S, id)[j] = (float)id;
		row_seal(&S, id);
	}
	S.reg = (struct rdps_region){ .base = S.rows, .len = S.len };
	snprintf(S.reg.desc.name, sizeof(S.reg.desc.name), "entity");
	S.reg.desc.dim = DIM;
	S.reg.desc.num_rows = ROWS;
	S.reg.desc.lo = 0;
	S.reg.desc.hi = ROWS;
	S.reg.desc.stride = (uint32_t)S.stride;
	S.port = rdps_test_free_ports(1);
	lp.port = (uint16_t)S.port;
	cr_assert_eq(S.ops->listen(&lp, &S.ts, err, sizeof(err)), 0, "%s", err);
	S.ts->stats = &S.stats;
	cr_assert_eq(pthread_create(&S.thr, NULL, serve, &S), 0);
}

static void server_stop(void)
{
	S.frozen = 0;
	S.stop = 1;
	pthread_join(S.thr, NULL);
	S.ops->destroy(S.ts, 100);
	free(S.rows);
	cr_assert(!S.failed, "the server's progress failed");
}

static struct rdps_conn *client(uint32_t num_clients, int read_consistency)
{
	struct rdps_conn_params p = { .host = "127.0.0.1", .port = (uint16_t)S.port,
				      .client_id = 0, .num_clients = num_clients,
				      .timeout_ms = 20000, .read_consistency = read_consistency,
				      .secret = &secret };
	struct rdps_conn *c;
	char err[512];

	cr_assert_eq(rdps_transport_ofi()->connect(&p, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static float grad(uint64_t id, int r, int j)
{
	return (float)((int)(id % 7) + j % 3 - r) * 0.25f;
}

/* Pushes rounds of gradients (duplicates, unsorted), flushes, then pulls
 * every row in two orders and compares with the sums. */
static void round_trip(struct rdps_conn *c)
{
	static float want[ROWS * DIM], got[2 * ROWS * DIM], g[ROWS * DIM];
	static uint64_t ids[2 * ROWS];
	const struct rdps_transport_ops *ops = c->ops;

	for (uint64_t id = 0; id < ROWS; id++)
		for (int j = 0; j < DIM; j++)
			want[id * DIM + j] = (float)id;
	for (int r = 0; r < 5; r++) {
		uint32_t n = 600;

		for (uint32_t i = 0; i < n; i++) {
			ids[i] = (i * 389 + (uint64_t)r * 17) % ROWS;
			if (i % 9 == 8)
				ids[i] = ids[i - 1]; /* a duplicate in one push */
			for (int j = 0; j < DIM; j++) {
				g[i * DIM + j] = grad(ids[i], r, j);
				want[ids[i] * DIM + j] -= grad(ids[i], r, j);
			}
		}
		cr_assert_eq(ops->push(c, 0, ids, g, n), 0, "%s", c->errmsg);
	}
	cr_assert_eq(ops->call(c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0), 0, "%s", c->errmsg);
	/* In order (runs coalesce), then scattered with repeats, as two
	 * posts before one wait. */
	for (uint64_t i = 0; i < ROWS; i++) {
		ids[i] = i;
		ids[ROWS + i] = (i * 61) % ROWS;
	}
	cr_assert_eq(ops->pull_post(c, 0, ids, ROWS, got), 0, "%s", c->errmsg);
	cr_assert_eq(ops->pull_post(c, 0, ids + ROWS, ROWS, got + ROWS * DIM), 0, "%s",
		     c->errmsg);
	cr_assert_eq(ops->pull_wait(c), 0, "%s", c->errmsg);
	for (uint64_t i = 0; i < 2 * ROWS; i++)
		for (int j = 0; j < DIM; j++)
			cr_assert_eq(got[i * DIM + j], want[ids[i] * DIM + j],
				     "row %llu[%d]: %g, want %g", (unsigned long long)ids[i], j,
				     got[i * DIM + j], want[ids[i] * DIM + j]);
	cr_assert_eq(S.flushes, 1);
}

Test(ofi, round_trip_one_sided, .timeout = 60)
{
	struct rdps_conn *c;

	need_provider();
	setenv("RDPS_OFI_MSG_BYTES", "4096", 1); /* 600 rows: 10 messages a push */
	server_start("ofi");
	c = client(1, RDPS_READ_VALIDATED);
	cr_assert(ofi_conn_one_sided(c), "pulls are two-sided over %s",
		  container_of(c, struct ofi_conn, base)->g->e.prov);
	round_trip(c);
	cr_assert_eq(S.pulls, 0, "the server's CPU served a one-sided pull");
	cr_assert_gt(S.pushes, 5, "pushes were not segmented");
	rdps_transport_ofi()->close(c);
	server_stop();
}

Test(ofi, round_trip_two_sided, .timeout = 60)
{
	struct rdps_conn *c;

	need_provider();
	setenv("RDPS_OFI_MSG_BYTES", "4096", 1); /* small answers: many requests */
	setenv("RDPS_OFI_PULLS", "msg", 1);
	server_start("ofi");
	c = client(1, RDPS_READ_VALIDATED);
	cr_assert(!ofi_conn_one_sided(c));
	round_trip(c);
	/* Answers of (4096 - 32) / 52 = 78 rows. */
	cr_assert_eq(S.pulls, (ROWS + 77) / 78 * 2, "the server served %llu pull requests",
		     (unsigned long long)S.pulls);
	rdps_transport_ofi()->close(c);
	server_stop();
}

struct pusher {
	struct rdps_conn *c;
	int n, ret;
};

static void *push_many(void *a)
{
	struct pusher *p = a;
	float g[DIM] = { 1.0f };

	for (int i = 0; i < p->n && !p->ret; i++) {
		uint64_t id = (uint64_t)i % ROWS;

		p->ret = p->c->ops->push(p->c, 0, &id, g, 1);
	}
	if (!p->ret)
		p->ret = p->c->ops->call(p->c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0);
	return NULL;
}

/* Waits (bounded) until the client has sent at least n push messages. */
static void wait_sent(struct ofi_conn *oc, uint64_t n)
{
	for (int i = 0; i < 20000 && __atomic_load_n(&oc->pushes_sent, __ATOMIC_RELAXED) < n; i++)
		usleep(1000);
	cr_assert_geq(oc->pushes_sent, n, "the client sent %llu push messages, not %llu",
		      (unsigned long long)oc->pushes_sent, (unsigned long long)n);
}

static void credits_hold(bool cheat)
{
	struct pusher p = { .n = 300 };
	struct ofi_conn *oc;
	float g[DIM] = { 0 };
	uint64_t id = 0, base, sent, applied;
	pthread_t t;
	uint32_t credits;

	need_provider();
	server_start("ofi");
	/* A job of 20 clients: a share of 256 / 20 = 12 credits, fewer than
	 * the client's 32 push buffers, so credits are what stops it. */
	p.c = client(20, RDPS_READ_VALIDATED);
	oc = container_of(p.c, struct ofi_conn, base);
	/* One push and a flush first: rxm makes its connection on the first
	 * send, with both sides progressing. The flush's acknowledgement
	 * brings back every credit: nothing more is on the way after it. */
	cr_assert_eq(p.c->ops->push(p.c, 0, &id, g, 1), 0, "%s", p.c->errmsg);
	cr_assert_eq(p.c->ops->call(p.c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0), 0, "%s",
		     p.c->errmsg);
	credits = oc->credits;
	cr_assert_eq(credits, 12, "credits %u", credits);
	base = oc->pushes_sent;
	S.frozen = 1;
	usleep(20000); /* the server's thread is out of progress() */
	if (cheat)
		oc->credits = 1000; /* the control: more than the server granted */
	cr_assert_eq(pthread_create(&t, NULL, push_many, &p), 0);
	wait_sent(oc, base + credits);
	/* A client that stopped at its credits stays there for good while
	 * the server grants none: waiting longer only makes this stronger. */
	usleep(300000);
	sent = __atomic_load_n(&oc->pushes_sent, __ATOMIC_RELAXED) - base;
	applied = S.pushes;
	S.frozen = 0;
	pthread_join(t, NULL);
	if (cheat) {
		cr_assert_gt(sent, credits, "the control did not run past its credits");
	} else {
		cr_assert_eq(sent, credits, "sent %llu push messages on %u credits",
			     (unsigned long long)sent, credits);
		cr_assert_eq(applied, 1);
		cr_assert_eq(p.ret, 0, "%s", p.c->errmsg);
		cr_assert_eq(S.pushes, (uint64_t)p.n + 1);
		/* Every slot is back on the queue. */
		cr_assert_eq(S.stats.recv_posted, S.stats.recv_slots);
	}
	rdps_transport_ofi()->close(p.c);
	server_stop();
}

Test(ofi, a_client_sends_only_on_credits, .timeout = 60)
{
	credits_hold(false);
}

Test(ofi, control_a_client_past_its_credits_is_seen, .timeout = 60)
{
	credits_hold(true);
}

struct puller {
	struct rdps_conn *c;
	uint64_t id;
	float out[DIM];
	int ret;
};

static void *pull_one(void *a)
{
	struct puller *p = a;

	p->ret = p->c->ops->pull_post(p->c, 0, &p->id, 1, p->out);
	if (!p->ret)
		p->ret = p->c->ops->pull_wait(p->c);
	return NULL;
}

static void torn_row(int consistency)
{
	struct puller p = { .id = 5 };
	char *r;
	pthread_t t;

	need_provider();
	server_start("ofi");
	p.c = client(1, consistency);
	cr_assert(ofi_conn_one_sided(p.c));
	/* Row 5's checksum no longer matches its data: torn, as a READ that
	 * met an update would see it. */
	r = S.rows + p.id * S.stride;
	row_data(&S, p.id)[3] = -7.0f;
	cr_assert_eq(pthread_create(&t, NULL, pull_one, &p), 0);
	if (consistency == RDPS_READ_VALIDATED) {
		for (int i = 0; i < 20000 && __atomic_load_n(&p.c->rereads, __ATOMIC_RELAXED) < 3; i++)
			usleep(1000);
		cr_assert_geq(p.c->rereads, 3, "the torn row was not read again");
		row_seal(&S, p.id); /* the update ends */
	}
	pthread_join(t, NULL);
	cr_assert_eq(p.ret, 0, "%s", p.c->errmsg);
	cr_assert_eq(p.out[3], -7.0f);
	cr_assert_eq(p.out[0], 5.0f);
	if (consistency == RDPS_READ_RELAXED)
		cr_assert(!rdps_row_valid(r, DIM, row_tag(p.id)) && p.c->rereads == 0,
			  "relaxed mode took the torn row as it was");
	rdps_transport_ofi()->close(p.c);
	server_stop();
}

Test(ofi, torn_rows_are_read_again, .timeout = 60)
{
	torn_row(RDPS_READ_VALIDATED);
}

Test(ofi, control_relaxed_reads_take_a_torn_row, .timeout = 60)
{
	torn_row(RDPS_READ_RELAXED);
}

/*
 * A row torn for good (a row updated all the time, here one whose
 * checksum never matches) does not break the connection: after
 * OFI_REREAD_FALLBACK reads through the ring it is asked for two-sided,
 * and the server's answer (read under its lock) is taken. The pull's
 * other rows come from their READs, and the next pull works. (On main the
 * client read it 10,000 times, then failed the connection.)
 */
Test(ofi, a_row_torn_for_good_is_asked_for_two_sided, .timeout = 60)
{
	uint64_t ids[3] = { 4, 5, 6 }, id = 9;
	float out[3 * DIM], one[DIM];
	struct rdps_conn *c;
	struct ofi_conn *oc;

	need_provider();
	server_start("ofi");
	c = client(1, RDPS_READ_VALIDATED);
	oc = container_of(c, struct ofi_conn, base);
	cr_assert(ofi_conn_one_sided(c));
	row_data(&S, 5)[3] = -7.0f; /* torn, and never sealed again */
	cr_assert_eq(c->ops->pull_post(c, 0, ids, 3, out), 0, "%s", c->errmsg);
	cr_assert_eq(c->ops->pull_wait(c), 0, "%s", c->errmsg);
	cr_assert_eq(c->rereads, OFI_REREAD_FALLBACK, "%llu re-reads",
		     (unsigned long long)c->rereads);
	cr_assert_eq(oc->fallbacks, 1);
	cr_assert_eq(S.pulls, 1, "the server's CPU served %llu requests",
		     (unsigned long long)S.pulls);
	cr_assert_eq(out[DIM + 3], -7.0f, "the server's copy of row 5");
	cr_assert_eq(out[DIM + 0], 5.0f);
	cr_assert_eq(out[0], 4.0f);
	cr_assert_eq(out[2 * DIM], 6.0f);
	cr_assert(!oc->broken);
	cr_assert_eq(c->ops->pull_post(c, 0, &id, 1, one), 0, "%s", c->errmsg);
	cr_assert_eq(c->ops->pull_wait(c), 0, "%s", c->errmsg);
	cr_assert_eq(one[0], 9.0f);
	rdps_transport_ofi()->close(c);
	server_stop();
}

/* A host's devices (efa: one domain each) spread over its processes: the
 * index-th distinct domain, modulo their number, whatever the list's
 * repeats. */
Test(ofi, processes_spread_over_the_hosts_devices)
{
	const char *names[] = { "rdmap16s27-rdm", "rdmap16s27-rdm", "rdmap32s27-rdm",
				"rdmap48s27-rdm", "rdmap32s27-rdm", "rdmap64s27-rdm" };
	struct fi_info *list = NULL, **tail = &list;
	uint32_t n;

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(names); i++) {
		struct fi_info *f = fi_allocinfo();

		cr_assert(f);
		f->domain_attr->name = strdup(names[i]);
		*tail = f;
		tail = &f->next;
	}
	for (uint32_t index = 0; index < 9; index++) {
		static const char *const want[] = { "rdmap16s27-rdm", "rdmap32s27-rdm",
						    "rdmap48s27-rdm", "rdmap64s27-rdm" };
		struct fi_info *pick = ofi_pick_domain(list, index, &n);

		cr_assert_eq(n, 4, "%u distinct devices", n);
		cr_assert_str_eq(pick->domain_attr->name, want[index % 4], "index %u", index);
	}
	cr_assert_eq(ofi_pick_domain(list->next, 0, &n), list->next);
	fi_freeinfo(list);
}

/* Flushes on an unordered transport: a flush that overtook pushes waits
 * for them. */
Test(ofi, flush_waits_for_the_pushes_it_follows)
{
	struct ofi_session ss = { 0 };

	/* Flush 1 follows 3 push messages; it arrives first. */
	ofi_flush_arrived(&ss, 1, 3);
	cr_assert_eq(ss.acks_owed, 0, "acknowledged before any of its pushes");
	ofi_push_handled(&ss, false);
	ofi_push_handled(&ss, true);
	cr_assert_eq(ss.acks_owed, 0, "acknowledged before its third push");
	ofi_push_handled(&ss, false);
	cr_assert_eq(ss.acks_owed, 1);
	cr_assert_eq(ss.ack_tag, 1);
	cr_assert_eq(ss.ack_failed, 1, "the refused push is reported");
	/* Flush 2 after 4 pushes, the 4th already handled: at once. */
	ss.acks_owed = 0;
	ss.ack_failed = 0;
	ofi_push_handled(&ss, false);
	ofi_flush_arrived(&ss, 2, 4);
	cr_assert_eq(ss.acks_owed, 1);
	cr_assert_eq(ss.ack_tag, 2);
	cr_assert_eq(ss.ack_failed, 0);
	/* A late flush of an older number changes nothing. */
	ss.acks_owed = 0;
	ofi_flush_arrived(&ss, 3, 9);
	ofi_flush_arrived(&ss, 2, 4);
	cr_assert_eq(ss.acks_owed, 0);
	cr_assert_eq(ss.flush_tag, 3);
}

/* free + promised == posted + in hand, whatever the order of events. */
static void pool_invariant(const struct ofi_pool *p, uint32_t in_hand)
{
	cr_assert_eq(p->free_credits + p->promised, p->posted + in_hand,
		     "free %u + promised %u != posted %u + in hand %u", p->free_credits,
		     p->promised, p->posted, in_hand);
}

Test(ofi, pool_credits_account_for_every_slot)
{
	struct ofi_pool pool;
	struct ofi_credits a = { 0 }, b = { 0 };
	char err[256];
	uint32_t share, g;

	cr_assert_eq(ofi_pool_create(&pool, NULL, 4096, 512), 0);
	cr_assert_eq(ofi_pool_grow(&pool, 256, err, sizeof(err)), 0, "%s", err);
	pool_invariant(&pool, 0);
	share = ofi_pool_share(&pool, 20);
	cr_assert_eq(share, 12);
	g = ofi_pool_grant(&pool, &a, share);
	cr_assert_eq(g, 12);
	cr_assert_eq(ofi_pool_grant(&pool, &b, share), 12);
	/* a's credits reach it; b's are still owed. */
	a.owed = 0;
	pool_invariant(&pool, 0);
	/* b has none it could have spent. */
	cr_assert_eq(ofi_pool_taken(&pool, 0), 0);
	cr_assert_eq(ofi_pool_return(&pool, &b, false), -EPROTO);
	/* a's message in slot 0: taken, handled, posted again, credit back. */
	pool_invariant(&pool, 1);
	cr_assert_eq(ofi_pool_post(&pool, 0), 0);
	cr_assert_eq(ofi_pool_return(&pool, &a, true), 0);
	pool_invariant(&pool, 0);
	cr_assert_eq(ofi_pool_post(&pool, 0), -EALREADY, "a slot posted twice");
	/* b closes before its credits were sent: they are free at once. */
	ofi_pool_unsend(&pool, &b);
	cr_assert_eq(b.promised, 0);
	pool_invariant(&pool, 0);
	/* a goes away with 11 credits unspent. */
	ofi_pool_release(&pool, &a);
	cr_assert_eq(pool.promised, 0);
	cr_assert_eq(pool.free_credits, pool.nslots);
	pool_invariant(&pool, 0);
	ofi_pool_destroy(&pool);
}

/* With a secret, a session's messages carry a MAC of its token: a peer
 * that saw the token on the control connection, but has not the secret,
 * gets its messages dropped (the control: the real cookie works). */
Test(ofi, a_forged_cookie_is_dropped, .timeout = 60)
{
	struct rdps_conn *c;
	struct ofi_conn *oc;
	float g[DIM] = { 1.0f };
	uint64_t id = 1;
	int ret;

	need_provider();
	secret.len = 16;
	memcpy(secret.key, "0123456789abcdef", 16);
	server_start("ofi");
	c = client(1, RDPS_READ_VALIDATED);
	oc = container_of(c, struct ofi_conn, base);
	cr_assert_neq(oc->cookie, c->session, "the cookie is the token itself");
	cr_assert_eq(c->ops->push(c, 0, &id, g, 1), 0, "%s", c->errmsg);
	cr_assert_eq(c->ops->call(c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0), 0, "%s", c->errmsg);
	cr_assert_eq(S.pushes, 1);
	oc->cookie = c->session; /* what a peer without the secret can send */
	oc->timeout_ms = 1500;
	cr_assert_eq(c->ops->push(c, 0, &id, g, 1), 0, "%s", c->errmsg);
	ret = c->ops->call(c, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0);
	cr_assert_eq(ret, -ETIMEDOUT, "a flush with a forged cookie got %d: %s", ret, c->errmsg);
	cr_assert_eq(S.pushes, 1, "a push with a forged cookie was applied");
	rdps_transport_ofi()->close(c);
	server_stop();
}

/* An ofi client at a server of another transport is told why. */
Test(ofi, a_tcp_server_refuses_the_binding)
{
	struct rdps_conn_params p = { .host = "127.0.0.1", .client_id = 0, .num_clients = 1,
				      .timeout_ms = 10000 };
	struct rdps_conn *c = NULL;
	char err[512];
	int ret;

	need_provider();
	server_start("tcp");
	p.port = (uint16_t)S.port;
	ret = rdps_transport_ofi()->connect(&p, &c, err, sizeof(err));
	cr_assert_lt(ret, 0);
	cr_assert(strstr(err, "binds no endpoints"), "%s", err);
	server_stop();
}
