// SPDX-License-Identifier: MIT
/*
 * The verbs server's completion handling (transport/verbs_srv_cq.c) and
 * push credits (transport/verbs_recv_pool.c), on this host without an RDMA
 * device, against a model of what real providers do that soft-RoCE hides:
 *
 * - a failed completion's opcode is undefined (ibv_poll_cq(3)); mlx5 never
 *   writes it, so a flushed SEND may carry IBV_WC_RECV from an older
 *   completion, and a flushed receive IBV_WC_SEND;
 * - many clients share one receive queue, arriving in any interleaving.
 *
 * The model is the provider side of libibverbs' inline calls: ibv_post_send
 * and ibv_post_srq_recv go through the context's ops, so a context whose ops
 * record posts stands in for the device; the code under test is the
 * server's own. The shared receive queue is a FIFO of posted slots; a SEND
 * arriving when it is empty is an overrun (receiver not ready).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "transport/verbs.h"
#include "transport/wire.h"

#define SLOTS 64
#define DIM 4
#define MAX_SESS 4

/* ---------------------------------------------------------------------- */
/* The device model                                                       */

static struct model {
	uint32_t fifo[SLOTS * 4];      /* posted slots, oldest first */
	uint32_t head, tail;
	int on_queue[SLOTS];           /* times each slot is posted right now */
	int double_posts;              /* a slot posted while on the queue */
	int overruns;                  /* a SEND found no posted slot */
	/* sends of the server, per QP: wr_ids and immediates not yet delivered */
	uint64_t sent_wr[MAX_SESS][256];
	uint32_t sent_imm[MAX_SESS][256];
	uint32_t nsent[MAX_SESS], delivered[MAX_SESS];
	/* the server's CQ: completions that appear after some empty polls */
	struct ibv_wc cqe[8];
	uint32_t ncqe, cq_polls, cq_ready_after;
} m;

static int model_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int n = 0;

	(void)cq;
	if (++m.cq_polls <= m.cq_ready_after)
		return 0;
	for (; n < num && m.ncqe; n++) {
		wc[n] = m.cqe[0];
		memmove(m.cqe, m.cqe + 1, --m.ncqe * sizeof(m.cqe[0]));
	}
	return n;
}

static int model_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		uint32_t slot = (uint32_t)WR_SEQ(wr->wr_id);

		cr_assert_eq(WR_KIND(wr->wr_id), WR_SRV_RECV, "a receive posted with wr_id 0x%llx",
			     (unsigned long long)wr->wr_id);
		if (m.on_queue[slot]++)
			m.double_posts++;
		m.fifo[m.tail++ % (SLOTS * 4)] = slot;
	}
	return 0;
}

static int model_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	uint32_t q = qp->qp_num - 100;

	if (q >= MAX_SESS)
		return 0; /* the many-session tests' QPs: sends not followed */
	for (; wr; wr = wr->next) {
		cr_assert_lt(m.nsent[q], 256);
		m.sent_wr[q][m.nsent[q]] = wr->wr_id;
		m.sent_imm[q][m.nsent[q]] = ntohl(wr->imm_data);
		m.nsent[q]++;
	}
	return 0;
}

static struct ibv_context ctx;
static struct ibv_cq srv_cq = { .context = &ctx };
static struct ibv_srq srq;
static struct ibv_mr mr;
static struct ibv_qp qps[MAX_SESS];
static struct rdma_cm_id ids[MAX_SESS];
static struct verbs_session sess[MAX_SESS];
static struct verbs_session *table[MAX_SESS];
static uint16_t gens[MAX_SESS];
static struct verbs_server vs;
static struct verbs_worker w; /* the server's one worker */
static char *slot_mem;

/* What the server core did with the messages it was handed. */
static uint64_t applied[MAX_SESS], flushes[MAX_SESS];
static float applied_sum;

static int handler(void *hctx, struct rdps_request *req)
{
	if (req->client_id >= MAX_SESS)
		return 0; /* the many-session tests' clients: not followed */
	if (req->type == RDPS_REQ_PUSH) {
		applied[req->client_id] += req->n;
		for (uint32_t i = 0; i < req->n * DIM; i++)
			applied_sum += req->grads[i];
	} else if (req->type == RDPS_REQ_FLUSH) {
		flushes[req->client_id]++;
	}
	return 0;
}

static void setup(void)
{
	memset(&m, 0, sizeof(m));
	memset(&vs, 0, sizeof(vs));
	memset(&w, 0, sizeof(w));
	w.vs = &vs;
	vs.workers = &w;
	vs.nworkers = 1;
	vs.kick_fd = -1;
	pthread_mutex_init(&w.lock, NULL);
	memset(applied, 0, sizeof(applied));
	memset(flushes, 0, sizeof(flushes));
	applied_sum = 0;
	ctx.ops.post_srq_recv = model_post_srq_recv;
	ctx.ops.post_send = model_post_send;
	ctx.ops.poll_cq = model_poll_cq;
	w.cq = &srv_cq;
	srq.context = &ctx;
	mr.lkey = 1;
	slot_mem = aligned_alloc(4096, (size_t)SLOTS * VERBS_MSG_SIZE);
	cr_assert(slot_mem);
	vs.p.handle = handler;
	vs.p.num_regions = 1;
	vs.regions[0].desc.dim = DIM;
	vs.regions[0].desc.lo = 0;
	vs.regions[0].desc.hi = 1000;
	vs.regions[0].desc.num_rows = 1000;
	vs.p.regions = vs.regions;
	w.sessions = table;
	w.gens = gens;
	w.max_sessions = MAX_SESS;
	memset(table, 0, sizeof(table));
	cr_assert_eq(verbs_qp_hash_init(&w, MAX_SESS), 0);
	/* The pool of verbs_pool_create/grow, over the model's queue. */
	w.pool.srq = &srq;
	w.pool.max_slots = SLOTS;
	w.pool.slot_posted = calloc(SLOTS, 1);
	w.pool.chunks = calloc(SLOTS / VERBS_POOL_CHUNK, sizeof(*w.pool.chunks));
	for (uint32_t c = 0; c < SLOTS / VERBS_POOL_CHUNK; c++)
		w.pool.chunks[c] = (struct verbs_chunk){
			slot_mem + (size_t)c * VERBS_POOL_CHUNK * VERBS_MSG_SIZE, &mr };
	w.pool.nslots = SLOTS;
	for (uint32_t s = 0; s < SLOTS; s++) {
		cr_assert_eq(verbs_pool_post(&w.pool, s), 0);
		w.pool.free_credits++;
	}
}

static void teardown(void)
{
	free(w.qp_hash);
	free(w.pool.slot_posted);
	free(w.pool.chunks);
	free(slot_mem);
}

/* A client connects: its session and its first credits. */
static uint32_t admit(uint32_t i)
{
	memset(&sess[i], 0, sizeof(sess[i]));
	qps[i] = (struct ibv_qp){ .context = &ctx, .qp_num = 100 + i };
	ids[i] = (struct rdma_cm_id){ .qp = &qps[i] };
	sess[i].id = &ids[i];
	sess[i].qp_num = 100 + i;
	sess[i].index = i;
	sess[i].gen = gens[i];
	sess[i].client_id = i;
	sess[i].num_clients = MAX_SESS;
	sess[i].state = SS_LIVE;
	snprintf(sess[i].peer, sizeof(sess[i].peer), "model client %u", i);
	return verbs_srv_admit(&w, &sess[i]);
}

/* A message from client i lands in the slot at the head of the SRQ. */
static uint32_t arrive(uint32_t i, uint32_t type, uint32_t rows)
{
	struct verbs_msg_hdr h = { type, 0 };
	struct rdps_wire_rows wr = { 0, rows };
	uint32_t slot;
	char *p;

	if (m.head == m.tail) {
		m.overruns++;
		return UINT32_MAX;
	}
	slot = m.fifo[m.head++ % (SLOTS * 4)];
	cr_assert_eq(m.on_queue[slot], 1);
	m.on_queue[slot]--;
	p = verbs_pool_buf(&w.pool, slot);
	if (type == RDPS_REQ_PUSH) {
		h.len = (uint32_t)(sizeof(wr) + rows * 8 + rows * DIM * 4);
		memcpy(p + sizeof(h), &wr, sizeof(wr));
		for (uint32_t r = 0; r < rows; r++) {
			uint64_t id = r * 7 + i;

			memcpy(p + sizeof(h) + sizeof(wr) + r * 8, &id, 8);
			for (uint32_t d = 0; d < DIM; d++) {
				float g = 1.0f;

				memcpy(p + sizeof(h) + sizeof(wr) + rows * 8 + (r * DIM + d) * 4, &g, 4);
			}
		}
	}
	memcpy(p, &h, sizeof(h));
	return slot;
}

static struct ibv_wc recv_wc(uint32_t i, uint32_t slot, enum ibv_wc_status st,
			     enum ibv_wc_opcode opcode)
{
	struct verbs_msg_hdr h;

	memcpy(&h, verbs_pool_buf(&w.pool, slot), sizeof(h));
	return (struct ibv_wc){ .wr_id = WR_ID(WR_SRV_RECV, slot), .status = st,
				.opcode = opcode, .qp_num = 100 + i,
				.byte_len = (uint32_t)sizeof(h) + h.len };
}

/* inflight: messages the queue took whose completions were not handled. */
static void check_conserved_inflight(uint32_t inflight)
{
	uint32_t promised = 0;

	for (uint32_t i = 0; i < w.hw; i++)
		if (table[i])
			promised += table[i]->cr.promised;
	cr_assert_eq(w.pool.promised, promised);
	cr_assert_eq(w.pool.free_credits + w.pool.promised, w.pool.posted,
		     "credits (%u free + %u promised) differ from slots posted (%u)",
		     w.pool.free_credits, w.pool.promised, w.pool.posted);
	cr_assert_eq(w.pool.posted, m.tail - m.head + inflight);
}

static void check_conserved(void)
{
	check_conserved_inflight(0);
}

TestSuite(verbs_cq, .init = setup, .fini = teardown, .timeout = 30);

/*
 * A session's queue pair fails with pushes and credit messages in flight.
 * Its completions arrive as mlx5 writes them: the flushed sends with a
 * stale IBV_WC_RECV opcode, the flushed receive with IBV_WC_SEND. Every
 * slot must end up posted exactly once and every push applied once.
 */
Test(verbs_cq, failed_completions_are_classified_by_wr_id_not_opcode)
{
	uint32_t got = admit(0), slots[SLOTS], n;

	/* The job has MAX_SESS clients: its share of the pool from the start. */
	cr_assert_eq(got, SLOTS / MAX_SESS, "granted %u credits, want the job's share %u", got,
		     SLOTS / MAX_SESS);
	n = got * 3 / 4;
	for (uint32_t k = 0; k < n; k++)
		slots[k] = arrive(0, RDPS_REQ_PUSH, 5);
	for (uint32_t k = 0; k < n; k++) {
		struct ibv_wc wc = recv_wc(0, slots[k], IBV_WC_SUCCESS, IBV_WC_RECV);

		verbs_srv_completion(&w, &wc);
	}
	verbs_srv_regrant(&w);
	cr_assert_eq(applied[0], 5 * n);
	/* Over half a share came back: the server sent it as a credit message. */
	cr_assert_gt(m.nsent[0], 0, "no credit message after %u credits came back", n);

	/* The QP fails: a message was being received, the sends are flushed. */
	{
		uint32_t slot = arrive(0, RDPS_REQ_PUSH, 5);
		struct ibv_wc wc = recv_wc(0, slot, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);

		verbs_srv_completion(&w, &wc);
	}
	for (uint32_t k = 0; k < m.nsent[0]; k++) {
		struct ibv_wc wc = { .wr_id = m.sent_wr[0][k], .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = IBV_WC_RECV, .qp_num = 100 };

		verbs_srv_completion(&w, &wc);
	}
	cr_assert_eq(m.double_posts, 0, "%d slot(s) posted twice: two receives share a buffer",
		     m.double_posts);
	cr_assert_eq(w.pool.double_posts, 0, "%llu completion(s) taken for a posted slot",
		     (unsigned long long)w.pool.double_posts);
	cr_assert_eq(applied[0], 5 * n, "the flushed push must not be applied");
	cr_assert_eq(w.pool.posted, SLOTS, "%u of %u slots posted", w.pool.posted, SLOTS);
	check_conserved();
}

/*
 * Clients that send whenever they hold a credit, in random interleavings,
 * never find the shared queue empty, however many share the pool and
 * whenever they join, and each gets credits as it joins; at the end every
 * slot is posted and every credit is accounted for. Control: clients that ignore their credits (the server
 * still busy) overrun it, so the model does catch an overrun.
 */
static void run_clients(unsigned seed, uint32_t nclients, bool greedy, int *overruns,
			uint64_t *sent_rows)
{
	uint32_t held[MAX_SESS] = { 0 };
	uint32_t pending_slot[MAX_SESS][SLOTS], npending[MAX_SESS] = { 0 };
	uint32_t joined = 0;

	srand(seed);
	*sent_rows = 0;
	for (int step = 0; step < 4000; step++) {
		int what = rand() % 10;
		uint32_t i = (uint32_t)rand() % nclients;

		if (joined < nclients && (what == 0 || step < 2)) {
			held[joined] = admit(joined);
			/* Those before it may be idle (at a barrier, waiting for
			 * it): it must not depend on their credits coming back. */
			if (!greedy)
				cr_assert_gt(held[joined], 0, "seed %u: client %u joined after %u others "
					     "and got no credit", seed, joined, joined);
			joined++;
			continue;
		}
		if (i >= joined)
			continue;
		if (what < 5 && (held[i] || greedy)) {
			/* Client i sends a push: it arrives at the SRQ. */
			uint32_t slot = arrive(i, RDPS_REQ_PUSH, 2);

			if (slot == UINT32_MAX)
				continue;
			if (held[i])
				held[i]--;
			pending_slot[i][npending[i]++] = slot;
			*sent_rows += 2;
		} else if (what < 8 && !greedy) {
			/* The server polls: one client's oldest completions, in
			 * order (one QP's receives complete in order). */
			for (uint32_t k = 0; k < npending[i]; k++) {
				struct ibv_wc wc = recv_wc(i, pending_slot[i][k], IBV_WC_SUCCESS,
							   IBV_WC_RECV);

				verbs_srv_completion(&w, &wc);
			}
			npending[i] = 0;
			verbs_srv_regrant(&w);
		} else {
			/* Credit messages reach client i. */
			for (; m.delivered[i] < m.nsent[i]; m.delivered[i]++)
				held[i] += IMM_CREDITS(m.sent_imm[i][m.delivered[i]]);
		}
		if (!greedy) {
			uint32_t n = 0;

			for (uint32_t k = 0; k < joined; k++)
				n += npending[k];
			check_conserved_inflight(n);
		}
	}
	*overruns = m.overruns;
	if (greedy)
		return; /* the server never caught up: nothing to drain */
	for (uint32_t i = 0; i < joined; i++)
		for (uint32_t k = 0; k < npending[i]; k++) {
			struct ibv_wc wc = recv_wc(i, pending_slot[i][k], IBV_WC_SUCCESS, IBV_WC_RECV);

			verbs_srv_completion(&w, &wc);
		}
	verbs_srv_regrant(&w);
}

Test(verbs_cq, credits_never_exceed_posted_slots)
{
	for (unsigned seed = 1; seed <= 20; seed++) {
		uint64_t rows, total = 0;
		int overruns;

		teardown();
		setup();
		run_clients(seed, MAX_SESS, false, &overruns, &rows);
		cr_assert_eq(overruns, 0, "seed %u: %d SEND(s) found no posted slot", seed, overruns);
		for (uint32_t i = 0; i < MAX_SESS; i++)
			total += applied[i];
		cr_assert_eq(total, rows, "seed %u: %llu rows applied of %llu sent", seed,
			     (unsigned long long)total, (unsigned long long)rows);
		cr_assert_eq(w.pool.posted, SLOTS);
		check_conserved();
	}
}

Test(verbs_cq, control_clients_ignoring_credits_overrun_the_queue)
{
	uint64_t rows;
	int overruns;

	run_clients(7, MAX_SESS, true, &overruns, &rows);
	cr_assert_gt(overruns, 0, "the model never overran: it could not catch an overrun");
}

/* A flush is acknowledged once, with the pushes before it applied, and the
 * acknowledgement carries the refusals since the last flush. */
Test(verbs_cq, a_flush_is_acknowledged_after_the_pushes_before_it)
{
	uint32_t s1, s2, s3, imm;
	struct ibv_wc wc;

	admit(0);
	s1 = arrive(0, RDPS_REQ_PUSH, 3);
	s2 = arrive(0, RDPS_REQ_PUSH, 3);
	/* A malformed push: it says 3 rows and carries 1. */
	s3 = arrive(0, RDPS_REQ_PUSH, 3);
	{
		struct verbs_msg_hdr h;
		char *p = verbs_pool_buf(&w.pool, s3);

		memcpy(&h, p, sizeof(h));
		h.len -= 2 * (8 + DIM * 4);
		memcpy(p, &h, sizeof(h));
	}
	for (uint32_t s = 0; s < 3; s++) {
		uint32_t slot = s == 0 ? s1 : s == 1 ? s2 : s3;

		wc = recv_wc(0, slot, IBV_WC_SUCCESS, IBV_WC_RECV);
		verbs_srv_completion(&w, &wc);
	}
	wc = recv_wc(0, arrive(0, RDPS_REQ_FLUSH, 0), IBV_WC_SUCCESS, IBV_WC_RECV);
	verbs_srv_completion(&w, &wc);
	verbs_srv_regrant(&w);
	cr_assert_eq(applied[0], 6);
	cr_assert_eq(flushes[0], 1);
	cr_assert_geq(m.nsent[0], 1);
	imm = m.sent_imm[0][m.nsent[0] - 1];
	cr_assert_eq(IMM_KIND(imm), IMM_FLUSH_ACK, "the last message is not the flush ack");
	cr_assert_eq(IMM_FAILED(imm), 1, "the ack reports %u refused pushes, want 1",
		     IMM_FAILED(imm));
	check_conserved();
}

/*
 * Busy-polling: a push whose completion shows up only after some empty
 * polls is handled by verbs_srv_busy_poll() itself (progress() then does
 * not sleep on the channel); with no budget it polls once and leaves it
 * (progress() would sleep until the channel wakes it). With nothing to
 * come it gives up after its budget.
 */
Test(verbs_cq, busy_poll_handles_completions_that_come_while_it_spins)
{
	uint32_t slot;

	admit(0);
	slot = arrive(0, RDPS_REQ_PUSH, 5);
	m.cqe[m.ncqe++] = recv_wc(0, slot, IBV_WC_SUCCESS, IBV_WC_RECV);
	m.cq_ready_after = 40;
	/* Control: no budget, one poll, nothing yet. */
	cr_assert_eq(verbs_srv_busy_poll(&w, 0), 0);
	cr_assert_eq(m.cq_polls, 1);
	cr_assert_eq(applied[0], 0);
	cr_assert_eq(verbs_srv_busy_poll(&w, 10ull * 1000000000ull), 1);
	cr_assert_eq(applied[0], 5, "the push was not applied by the busy poll");
	cr_assert_gt(m.cq_polls, 40);
	/* Nothing more will come: it returns after its budget (1 ms). */
	cr_assert_eq(verbs_srv_busy_poll(&w, 1000000), 0);
	verbs_srv_regrant(&w);
	check_conserved();
}

Test(verbs_cq, busy_poll_budget_from_the_environment)
{
	unsetenv("RDPS_VERBS_BUSY_POLL_US");
	cr_assert_eq(verbs_srv_busy_poll_ns(), VERBS_BUSY_POLL_US * 1000ull);
	setenv("RDPS_VERBS_BUSY_POLL_US", "0", 1);
	cr_assert_eq(verbs_srv_busy_poll_ns(), 0);
	setenv("RDPS_VERBS_BUSY_POLL_US", "200", 1);
	cr_assert_eq(verbs_srv_busy_poll_ns(), 200000);
	setenv("RDPS_VERBS_BUSY_POLL_US", "20ms", 1);
	cr_assert_eq(verbs_srv_busy_poll_ns(), VERBS_BUSY_POLL_US * 1000ull);
	unsetenv("RDPS_VERBS_BUSY_POLL_US");
}

/* ---------------------------------------------------------------------- */
/* Hot paths that must not grow with the sessions                         */

#define MANY 1000

/*
 * A receive completion finds its session by QP number in a table, not by a
 * scan of every session (main's session_by_qp_num: ~500 comparisons per
 * completion at 1000 sessions): consecutive and scattered QP numbers,
 * removals in between (backward shift), every lookup right, ~1.5 probes.
 */
Test(verbs_hot, sessions_by_qp_number_take_a_probe_or_two)
{
	static struct verbs_session many[MANY];
	struct verbs_worker hw = { 0 };
	uint64_t x = 0x9e3779b97f4a7c15ull;

	cr_assert_eq(verbs_qp_hash_init(&hw, MANY), 0);
	for (uint32_t i = 0; i < MANY; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		/* Half consecutive (one device's), half scattered. */
		many[i].qp_num = i < MANY / 2 ? 0x11c0 + i : (uint32_t)(x >> 40);
		many[i].index = i;
		verbs_qp_hash_put(&hw, &many[i]);
	}
	for (uint32_t i = 0; i < MANY; i++)
		cr_assert_eq(verbs_qp_hash_get(&hw, many[i].qp_num), &many[i], "qp %u", many[i].qp_num);
	for (uint32_t i = 0; i < MANY; i += 3)
		verbs_qp_hash_del(&hw, &many[i]);
	hw.qp_lookups = hw.qp_probes = 0;
	for (uint32_t i = 0; i < MANY; i++)
		cr_assert_eq(verbs_qp_hash_get(&hw, many[i].qp_num), i % 3 ? &many[i] : NULL,
			     "qp %u after removals", many[i].qp_num);
	cr_log_info("%llu lookups, %.2f probes each (a scan: %u sessions)",
		    (unsigned long long)hw.qp_lookups, (double)hw.qp_probes / (double)hw.qp_lookups,
		    MANY * 2 / 3);
	cr_assert_lt(hw.qp_probes, 3 * hw.qp_lookups, "%.2f probes per lookup",
		     (double)hw.qp_probes / (double)hw.qp_lookups);
	free(hw.qp_hash);
}

/*
 * After a batch of completions the regrant looks at the sessions whose
 * credits came back (or that owe acknowledgements), not at all of them
 * (main's walked every session per batch, and recounted the sharers too):
 * 1000 sessions share 64 slots, each push's completion costs the regrant a
 * visit or two, and credits still go round the waiting sessions in turn.
 */
Test(verbs_hot, the_regrant_visits_the_sessions_that_need_it)
{
	static struct verbs_session many[MANY];
	static struct verbs_session *tab[MANY];
	static uint16_t g[MANY];
	static struct ibv_qp mqps[MANY];
	static struct rdma_cm_id mids[MANY];
	uint64_t visits, calls = 0;
	uint32_t served = 0;

	setup();
	w.sessions = tab;
	w.gens = g;
	w.max_sessions = MANY;
	free(w.qp_hash);
	cr_assert_eq(verbs_qp_hash_init(&w, MANY), 0);
	for (uint32_t i = 0; i < MANY; i++) {
		mqps[i] = (struct ibv_qp){ .context = &ctx, .qp_num = 1000 + i };
		mids[i] = (struct rdma_cm_id){ .qp = &mqps[i] };
		many[i] = (struct verbs_session){ .w = &w, .id = &mids[i], .qp_num = 1000 + i,
						  .index = i, .client_id = i, .num_clients = MANY,
						  .state = SS_LIVE };
		snprintf(many[i].peer, sizeof(many[i].peer), "client %u", i);
		verbs_srv_admit(&w, &many[i]);
	}
	/* 64 slots, 1000 sessions: the first 64 hold one credit each. */
	cr_assert_eq(w.pool.free_credits, 0);
	cr_assert_eq(verbs_srv_sharers(&w), MANY);
	visits = w.regrant_visits;
	for (uint32_t round = 0; round < 300; round++) {
		/* The holder of the oldest credit pushes: its slot's
		 * completion returns the credit, the regrant passes it on. */
		uint32_t i = round % MANY, slot;
		struct verbs_session *next = w.q[VERBS_Q_GRANT].head;
		struct ibv_wc wc;

		if (!many[i].cr.promised)
			continue;
		cr_assert(next && !next->cr.promised, "no session waits for a credit");
		slot = m.fifo[m.head % (SLOTS * 4)];
		{
			struct verbs_msg_hdr h = { RDPS_REQ_FLUSH, 0 };

			m.head++;
			m.on_queue[slot]--;
			memcpy(verbs_pool_buf(&w.pool, slot), &h, sizeof(h));
		}
		wc = (struct ibv_wc){ .wr_id = WR_ID(WR_SRV_RECV, slot), .status = IBV_WC_SUCCESS,
				      .opcode = IBV_WC_RECV, .qp_num = 1000 + i,
				      .byte_len = sizeof(struct verbs_msg_hdr) };
		verbs_srv_completion(&w, &wc);
		verbs_srv_regrant(&w);
		/* Round robin: the credit went to the session that waited
		 * longest, not back to its sender. */
		cr_assert_eq(next->cr.promised, 1, "session %u, first in line, got no credit",
			     next->index);
		cr_assert_eq(many[i].cr.promised, 0);
		calls++;
		served++;
	}
	visits = w.regrant_visits - visits;
	cr_log_info("%llu regrants after a completion each: %.2f sessions visited per regrant "
		    "(main: %u)", (unsigned long long)calls, (double)visits / (double)calls, MANY);
	cr_assert_gt(served, 50);
	cr_assert_leq(visits, 3 * calls, "%llu visits for %llu regrants",
		      (unsigned long long)visits, (unsigned long long)calls);
	w.sessions = table;
	w.gens = gens;
	w.max_sessions = MAX_SESS;
	teardown();
}
