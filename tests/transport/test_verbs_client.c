// SPDX-License-Identifier: MIT
/*
 * The verbs client's data path (transport/verbs_client.c: post lists,
 * selective signaling, the ring of READs, gathered pushes) on this host
 * without an RDMA device, against a model of the provider's send queue:
 *
 * - a work request holds its queue entry until a completion of it or of a
 *   later request is polled (mlx5 frees entries up to the CQE's counter;
 *   unsignaled requests complete silently), so a post that finds all depth
 *   entries held fails (ENOMEM, as mlx5 and rxe): an overrun;
 * - requests execute some time after the post, in order, a random number
 *   per poll: a SEND's buffer is read then, not at the post (inline sends
 *   excepted), and a READ places the server's row then;
 * - the server's side is a table of rows with checksums: a SEND's push is
 *   summed into it, and credits come back as receive completions with
 *   immediate data as verbs_srv_cq.c sends them.
 *
 * The model stands in for the device through the context's ops, as
 * test_verbs_cq.c does for the server; the code under test is the
 * client's own. A wait that no completion can ever end (nothing posted is
 * signaled) makes the model fail the poll: the client reports an error.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "rdps/kvstore.h"
#include "transport/verbs.h"
#include "transport/wire.h"

#define ROWS 3000
#define DIM 40
#define MAXQ 8192 /* work requests the model keeps track of at once */
#define QPN 77    /* the model QP's number */

static struct model {
	uint32_t depth;               /* send queue entries */
	struct ibv_send_wr wr[MAXQ];  /* posted, oldest first (copies) */
	struct ibv_sge sge[MAXQ];
	char inl[MAXQ][64];           /* inline data, copied at the post */
	uint64_t posted, executed, freed; /* counts of work requests */
	struct ibv_wc cq[MAXQ];       /* completions not yet polled */
	uint32_t cq_head, cq_tail;
	uint32_t recvs_posted;        /* client receives available */
	uint64_t recv_next;           /* wr_id of the oldest posted receive */
	uint32_t credits_out;         /* granted to the client, not yet used */
	uint32_t empty_polls;
	int overruns, hopeless, unsignaled_max, run;
	uint64_t sends, reads, signaled;
	uint64_t refills;             /* READ lists posted while READs were in flight */
	float table[ROWS * DIM];      /* what the server applied (sums) */
	char *region;                 /* rows with checksums, as a shard */
	size_t stride;
	uint64_t torn_id;             /* id whose READs come back torn ... */
	uint32_t torn_times;          /* ... this many times */
	uint32_t tore;                /* times it did */
	uint64_t reread_lists;        /* lists with a 1-row READ of torn_id and other READs */
	uint64_t ctl_pulls;           /* two-sided reads over the control connection */
} m;

static int model_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	if (wr->opcode == IBV_WR_RDMA_READ && m.posted > m.executed &&
	    m.wr[(m.posted - 1) % MAXQ].opcode == IBV_WR_RDMA_READ)
		m.refills++;
	/* A re-read of the torn row in the same list as other READs: the
	 * ring goes on around it. */
	if (m.torn_times && wr->opcode == IBV_WR_RDMA_READ) {
		bool reread = false, others = false;

		for (const struct ibv_send_wr *w = wr; w; w = w->next) {
			bool one = w->sg_list->length == m.stride &&
				   w->wr.rdma.remote_addr == (uintptr_t)m.region + m.torn_id * m.stride;

			reread |= one && m.tore;
			others |= !one;
		}
		m.reread_lists += reread && others;
	}
	for (; wr; wr = wr->next) {
		uint32_t q = (uint32_t)(m.posted % MAXQ);

		if (m.posted - m.freed >= m.depth) {
			m.overruns++;
			*bad = wr;
			return ENOMEM;
		}
		cr_assert_lt(m.posted - m.executed, MAXQ);
		cr_assert_eq(wr->num_sge, 1);
		m.wr[q] = *wr;
		m.sge[q] = *wr->sg_list;
		m.wr[q].sg_list = &m.sge[q];
		if (wr->send_flags & IBV_SEND_INLINE) {
			cr_assert_leq(wr->sg_list->length, sizeof(m.inl[q]));
			memcpy(m.inl[q], (void *)(uintptr_t)wr->sg_list->addr, wr->sg_list->length);
		}
		/* Unsignaled requests in a row: what a completion frees. */
		m.run = wr->send_flags & IBV_SEND_SIGNALED ? 0 : m.run + 1;
		if (m.run > m.unsignaled_max)
			m.unsignaled_max = m.run;
		m.posted++;
	}
	return 0;
}

static int model_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next)
		m.recvs_posted++;
	return 0;
}

static void cq_push(struct ibv_wc wc)
{
	cr_assert_lt(m.cq_tail - m.cq_head, MAXQ);
	m.cq[m.cq_tail++ % MAXQ] = wc;
}

/* The server answers a message with a credit (and a flush with its ack). */
static void server_reply(uint32_t kind)
{
	cr_assert_gt(m.recvs_posted, 0, "the client had no receive posted");
	m.recvs_posted--;
	cq_push((struct ibv_wc){ .wr_id = WR_ID(WR_RECV, m.recv_next++ % VERBS_CLIENT_RECVS),
				 .qp_num = QPN, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV,
				 .wc_flags = IBV_WC_WITH_IMM,
				 .imm_data = htonl(IMM_MAKE(kind, 1, 0)) });
}

static void execute(uint32_t q)
{
	const struct ibv_send_wr *wr = &m.wr[q];
	const char *src = wr->send_flags & IBV_SEND_INLINE ? m.inl[q]
							     : (const char *)(uintptr_t)wr->sg_list->addr;

	if (wr->opcode == IBV_WR_RDMA_READ) {
		char *dst = (char *)(uintptr_t)wr->sg_list->addr;
		uint64_t first = (wr->wr.rdma.remote_addr - (uintptr_t)m.region) / m.stride;

		memcpy(dst, (char *)(uintptr_t)wr->wr.rdma.remote_addr, wr->sg_list->length);
		/* A row placed while the server wrote it: torn, torn_times. */
		if (m.tore < m.torn_times && m.torn_id >= first &&
		    m.torn_id < first + wr->sg_list->length / m.stride) {
			float *f = (float *)(dst + (m.torn_id - first) * m.stride +
					     RDPS_ROW_DATA_OFFSET);

			f[DIM / 2] += 1.0f;
			m.tore++;
		}
		m.reads++;
	} else {
		struct verbs_msg_hdr h;
		struct rdps_wire_rows rows;

		cr_assert_eq(wr->opcode, IBV_WR_SEND);
		cr_assert_gt(m.credits_out, 0, "a SEND without a credit");
		m.credits_out--;
		memcpy(&h, src, sizeof(h));
		cr_assert_eq(sizeof(h) + h.len, wr->sg_list->length);
		if (h.type == RDPS_REQ_PUSH) {
			const char *p = src + sizeof(h);

			memcpy(&rows, p, sizeof(rows));
			p += sizeof(rows);
			cr_assert_eq(h.len, sizeof(rows) + (size_t)rows.n * (8 + DIM * 4));
			for (uint32_t i = 0; i < rows.n; i++) {
				uint64_t id;

				memcpy(&id, p + (size_t)i * 8, 8);
				cr_assert_lt(id, ROWS);
				for (uint32_t d = 0; d < DIM; d++) {
					float g;

					memcpy(&g, p + (size_t)rows.n * 8 + ((size_t)i * DIM + d) * 4, 4);
					m.table[id * DIM + d] += g;
				}
			}
			m.credits_out++;
			server_reply(IMM_CREDIT);
		} else {
			cr_assert_eq(h.type, RDPS_REQ_FLUSH);
			m.credits_out++;
			server_reply(IMM_FLUSH_ACK);
		}
		m.sends++;
	}
	if (wr->send_flags & IBV_SEND_SIGNALED) {
		cq_push((struct ibv_wc){ .wr_id = wr->wr_id, .qp_num = QPN, .status = IBV_WC_SUCCESS,
					 .opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
										  : IBV_WC_SEND });
		m.signaled++;
	}
}

static int model_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	uint64_t pending = m.posted - m.executed;
	int n = 0;

	(void)cq;
	/* Some of what is posted executes, in order. */
	for (uint64_t k = pending ? 1 + (uint64_t)rand() % pending : 0; k; k--)
		execute((uint32_t)(m.executed++ % MAXQ));
	for (int want = 1 + rand() % num; n < want && m.cq_head != m.cq_tail; n++) {
		wc[n] = m.cq[m.cq_head++ % MAXQ];
		/* A send completion frees its entry and all before it. */
		if (WR_KIND(wc[n].wr_id) != WR_RECV)
			m.freed = WR_SEQ(wc[n].wr_id);
	}
	if (n) {
		m.empty_polls = 0;
		return n;
	}
	/* Nothing left to execute or deliver: no completion will ever come. */
	if (m.posted == m.executed && ++m.empty_polls > 1000) {
		m.hopeless++;
		return -1;
	}
	return 0;
}

static struct ibv_context ctx;
static struct ibv_qp qp;
static struct rdma_cm_id cm_id;
static struct ibv_cq cq;
static struct ibv_mr mr;
static struct verbs_conn *vc;
static struct verbs_group grp;
static struct verbs_conn *grp_conns[1];

/* The control connection's two-sided read of a row (the server reads it
 * under its lock): the region's row as written. */
static const uint64_t *ctl_ids;
static float *ctl_out;
static uint32_t ctl_n;

static int ctl_pull_post(struct rdps_conn *c, uint32_t table, const uint64_t *ids, uint32_t n,
			 float *out)
{
	(void)c;
	cr_assert_eq(table, 0);
	ctl_ids = ids;
	ctl_out = out;
	ctl_n = n;
	return 0;
}

static int ctl_pull_wait(struct rdps_conn *c)
{
	(void)c;
	for (uint32_t i = 0; i < ctl_n; i++)
		memcpy(ctl_out + (size_t)i * DIM,
		       m.region + ctl_ids[i] * m.stride + RDPS_ROW_DATA_OFFSET, DIM * 4);
	m.ctl_pulls += ctl_n;
	return 0;
}

static const struct rdps_transport_ops ctl_ops = { .name = "model tcp",
						   .pull_post = ctl_pull_post,
						   .pull_wait = ctl_pull_wait };
static struct rdps_conn ctl_conn;

static void write_row(uint64_t id, const float *data)
{
	char *row = m.region + id * m.stride;
	uint64_t version = 1,
		 check = rdps_row_checksum(rdps_row_tag(rdps_row_table_key(0, "entity"), id), version,
					   data, DIM);


	memcpy(row, &version, 8);
	memcpy(row + RDPS_ROW_CHECK_OFFSET, &check, 8);
	memcpy(row + RDPS_ROW_DATA_OFFSET, data, DIM * 4);
}

static void setup(void)
{
	memset(&m, 0, sizeof(m));
	srand(1);
	m.depth = VERBS_SQ_DEPTH;
	m.stride = rdps_row_stride(DIM);
	m.region = aligned_alloc(64, ROWS * m.stride);
	m.torn_id = UINT64_MAX;
	cr_assert(m.region);
	for (uint64_t id = 0; id < ROWS; id++) {
		float data[DIM];

		for (int d = 0; d < DIM; d++)
			data[d] = (float)(id * 1000 + (uint64_t)d);
		write_row(id, data);
	}
	ctx.ops.post_send = model_post_send;
	ctx.ops.post_recv = model_post_recv;
	ctx.ops.poll_cq = model_poll_cq;
	qp = (struct ibv_qp){ .context = &ctx, .qp_num = QPN };
	cm_id = (struct rdma_cm_id){ .qp = &qp };
	cq = (struct ibv_cq){ .context = &ctx };
	mr.lkey = 1;
	vc = calloc(1, sizeof(*vc));
	cr_assert(vc);
	vc->id = &cm_id;
	grp = (struct verbs_group){ .cq = &cq, .conns = grp_conns, .nconns = 1, .live = 1 };
	grp_conns[0] = vc;
	vc->g = &grp;
	vc->qp_num = QPN;
	vc->bounce_size = VERBS_BOUNCE;
	vc->nslots = VERBS_SEND_SLOTS;
	vc->bounce = aligned_alloc(4096, VERBS_BOUNCE);
	vc->sendbuf = aligned_alloc(4096, (size_t)VERBS_SEND_SLOTS * VERBS_MSG_SIZE);
	cr_assert(vc->bounce && vc->sendbuf);
	vc->bounce_mr = vc->send_mr = &mr;
	vc->max_inline = 64;
	vc->timeout_ms = 10000;
	vc->consistency = RDPS_READ_VALIDATED;
	vc->sq_depth = VERBS_SQ_DEPTH;
	vc->signal_every = VERBS_SIGNAL_EVERY;
	snprintf(vc->base.peer, sizeof(vc->base.peer), "model server");
	ctl_conn = (struct rdps_conn){ .ops = &ctl_ops };
	vc->ctl = &ctl_conn;
	vc->base.num_tables = 1;
	vc->base.tables[0] = (struct rdps_table_desc){
		.name = "entity", .dim = DIM, .num_rows = ROWS, .lo = 0, .hi = ROWS,
		.stride = (uint32_t)m.stride, .remote_addr = (uintptr_t)m.region, .rkey = 7 };
	/* The client's receives, and the credits of its connection reply. */
	m.recvs_posted = VERBS_CLIENT_RECVS;
	vc->credits = m.credits_out = 8;
}

static void teardown(void)
{
	free(vc->bounce);
	free(vc->sendbuf);
	free(vc);
	free(m.region);
}

TestSuite(verbs_client, .init = setup, .fini = teardown, .timeout = 60);

/* Gradients of a permuted batch: row i of grads belongs to ids[i]. */
static void batch(uint32_t round, uint32_t n, uint64_t *ids, float *grads)
{
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = ((uint64_t)i * 7919 + round * 131) % ROWS;
		for (uint32_t d = 0; d < DIM; d++)
			grads[(size_t)i * DIM + d] = (float)((int)(i % 7) - 3 + (int)d % 5) * 0.25f;
	}
}

/*
 * Pushes gathered through a permutation (as the client hands them: ids in
 * server order, gradients where the caller keeps them) arrive whole: the
 * model server's sums are exact. The send queue is never overrun, a
 * completion comes at least every VERBS_SIGNAL_EVERY requests, and far
 * fewer than one per SEND.
 */
Test(verbs_client, gathered_pushes_sum_exactly_and_never_overrun)
{
	enum { N = 4000, ROUNDS = 6 }; /* 11 messages a round */
	static uint64_t ids[N], sorted[N];
	static float grads[N * DIM], want[ROWS * DIM];
	static uint32_t index[N];

	m.depth = vc->sq_depth = 24;
	for (uint32_t r = 0; r < ROUNDS; r++) {
		batch(r, N, ids, grads);
		/* The gather index: every 3rd row first, then the others. */
		for (uint32_t i = 0, k = 0; i < 3; i++)
			for (uint32_t j = i; j < N; j += 3, k++) {
				index[k] = j;
				sorted[k] = ids[j];
			}
		for (uint32_t i = 0; i < N; i++)
			for (uint32_t d = 0; d < DIM; d++)
				want[ids[i] * DIM + d] += grads[(size_t)i * DIM + d];
		cr_assert_eq(verbs_push_gather(&vc->base, 0, sorted, grads, index, N), 0, "%s",
			     vc->base.errmsg);
		/* The caller may reuse its arrays at once. */
		memset(grads, 0xff, sizeof(grads));
	}
	cr_assert_eq(verbs_call(&vc->base, RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0), 0, "%s",
		     vc->base.errmsg);
	cr_assert_eq(m.overruns, 0, "%d post(s) found the send queue full", m.overruns);
	cr_assert_eq(m.hopeless, 0);
	cr_assert_eq(m.posted, m.executed);
	for (uint32_t i = 0; i < ROWS * DIM; i++)
		cr_assert_eq(m.table[i], want[i], "row %u[%u]: %g, want %g", i / DIM, i % DIM,
			     m.table[i], want[i]);
	cr_assert_lt(m.unsignaled_max, VERBS_SIGNAL_EVERY);
	cr_assert_lt(m.signaled * 4, m.sends, "%llu of %llu SENDs signaled",
		     (unsigned long long)m.signaled, (unsigned long long)m.sends);
}

/*
 * Control: signaling every k > depth requests fills the queue with
 * requests no completion will ever free; the push cannot finish, and the
 * model sees the hopeless wait (without the room accounting, the posts
 * would overrun the queue instead).
 */
Test(verbs_client, control_signaling_sparser_than_the_queue_never_frees_it)
{
	enum { N = 4000 }; /* 11 messages */
	static uint64_t ids[N];
	static float grads[N * DIM];
	int ret;

	m.depth = vc->sq_depth = 8;
	vc->signal_every = 9;
	m.credits_out = vc->credits = 64;
	batch(0, N, ids, grads);
	ret = verbs_push_gather(&vc->base, 0, ids, grads, NULL, N);
	cr_assert_neq(ret, 0, "the push finished though nothing it posted was signaled");
	cr_assert_gt(m.hopeless, 0);
	cr_assert_eq(m.overruns, 0);
}

/*
 * A pull of many rows in several requests runs through the ring: more
 * READs than the send queue holds, refilled as completions come; every row
 * comes back exactly, in the caller's order, a torn row is read again, and
 * the queue is never overrun.
 */
Test(verbs_client, pulls_refill_the_queue_and_return_every_row)
{
	enum { N = 2400, PULLS = 6 };
	static uint64_t ids[N];
	static float out[N * DIM];

	m.depth = vc->sq_depth = 32;
	m.torn_id = 1234;
	m.torn_times = 1;
	/* Runs of consecutive ids (one READ each) and single ids. */
	for (uint32_t i = 0; i < N; i++)
		ids[i] = i % 13 == 12 ? (uint64_t)i * 7 % ROWS : (uint64_t)(i / 8) * 97 % (ROWS - 8) + i % 8;
	ids[N / 2] = 1234;
	for (uint32_t p = 0; p < PULLS; p++)
		cr_assert_eq(verbs_pull_post(&vc->base, 0, ids + p * (N / PULLS), N / PULLS,
					     out + (size_t)p * (N / PULLS) * DIM),
			     0, "%s", vc->base.errmsg);
	cr_assert_eq(verbs_pull_wait(&vc->base), 0, "%s", vc->base.errmsg);
	for (uint32_t i = 0; i < N; i++)
		for (uint32_t d = 0; d < DIM; d++)
			cr_assert_eq(out[(size_t)i * DIM + d], (float)(ids[i] * 1000 + d),
				     "row %u (id %llu)[%u] = %g", i, (unsigned long long)ids[i], d,
				     out[(size_t)i * DIM + d]);
	/* A pull of a few READs, fewer than signal_every: its list's last
	 * request must be signaled, or nothing would tell they are done. */
	for (uint32_t k = 0; k < 3; k++) {
		uint64_t few[5] = { 10, 20, 30, 40, 50 + k };
		float got[5 * DIM];

		cr_assert_eq(verbs_pull_post(&vc->base, 0, few, 5, got), 0, "%s", vc->base.errmsg);
		cr_assert_eq(verbs_pull_wait(&vc->base), 0, "%s", vc->base.errmsg);
		for (uint32_t i = 0; i < 5; i++)
			cr_assert_eq(got[i * DIM + 1], (float)(few[i] * 1000 + 1));
	}
	cr_assert_eq(m.tore, 1, "the model tore no row");
	cr_assert_eq(vc->base.rereads, 1);
	cr_assert_eq(m.overruns, 0);
	cr_assert_gt(m.reads, 2 * m.depth, "only %llu READs: the ring never wrapped",
		     (unsigned long long)m.reads);
	/* Not stop-and-wait: READs were posted while others were in flight. */
	cr_assert_gt(m.refills, 0, "every READ list waited for the one before to finish");
	cr_assert_eq(m.posted, m.executed);
}

/* A pull of many rows, one of them torn k times in a row. */
static void pull_with_a_torn_row(uint32_t k, float *out, uint64_t *ids, uint32_t n)
{
	m.depth = vc->sq_depth = 32;
	m.torn_id = 1234;
	m.torn_times = k;
	for (uint32_t i = 0; i < n; i++)
		ids[i] = (uint64_t)(i / 4) * 97 % (ROWS - 4) + i % 4;
	ids[2] = 1234; /* early: most of the pull is still to be posted */
	cr_assert_eq(verbs_pull_post(&vc->base, 0, ids, n, out), 0, "%s", vc->base.errmsg);
	cr_assert_eq(verbs_pull_wait(&vc->base), 0, "%s", vc->base.errmsg);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t d = 0; d < DIM; d++)
			cr_assert_eq(out[(size_t)i * DIM + d], (float)(ids[i] * 1000 + d),
				     "row %u (id %llu)[%u] = %g", i, (unsigned long long)ids[i], d,
				     out[(size_t)i * DIM + d]);
	cr_assert(!vc->broken);
	cr_assert_eq(m.overruns, 0);
	cr_assert_eq(m.posted, m.executed);
}

/*
 * A row torn several times is read again through the ring: its re-reads
 * go out in the same lists as the pull's other READs (the refill does not
 * stop for it, as the old synchronous re-read behind up to 511 READs did),
 * and every row comes back exact.
 */
Test(verbs_client, a_torn_row_is_read_again_through_the_ring)
{
	enum { N = 2400 };
	static uint64_t ids[N];
	static float out[N * DIM];

	pull_with_a_torn_row(5, out, ids, N);
	cr_assert_eq(m.tore, 5);
	cr_assert_eq(vc->base.rereads, 5);
	cr_assert_eq(vc->fallbacks, 0);
	cr_assert_gt(m.reread_lists, 0, "every re-read went out alone: the ring waited for it");
}

/*
 * A row torn for good (K = 1000 times) is read VERBS_REREAD_FALLBACK times,
 * then two-sided over the control connection (the model's server reads
 * it whole): the pull succeeds and the connection lives. (On main: 10,000
 * re-reads, then "a row stayed torn": the connection broken.)
 */
Test(verbs_client, a_row_torn_for_good_is_read_two_sided)
{
	enum { N = 400 };
	static uint64_t ids[N];
	static float out[N * DIM];
	uint64_t id = 10;
	float one[DIM];

	pull_with_a_torn_row(1000, out, ids, N);
	cr_assert_eq(vc->base.rereads, VERBS_REREAD_FALLBACK, "%llu re-reads",
		     (unsigned long long)vc->base.rereads);
	cr_assert_eq(m.tore, VERBS_REREAD_FALLBACK);
	cr_assert_eq(vc->fallbacks, 1);
	cr_assert_eq(m.ctl_pulls, 1);
	m.torn_times = 0;
	cr_assert_eq(verbs_pull_post(&vc->base, 0, &id, 1, one), 0, "%s", vc->base.errmsg);
	cr_assert_eq(verbs_pull_wait(&vc->base), 0, "%s", vc->base.errmsg);
	cr_assert_eq(one[3], 10003.0f);
}

/*
 * A row of a dropped table (the server retired its region: the version
 * word says RDPS_ROW_RETIRED) fails its pull with -ENOENT naming the table;
 * the connection lives, and a pull of the table's other rows still works.
 */
Test(verbs_client, a_retired_row_fails_its_pull_not_the_connection)
{
	uint64_t ids[3] = { 20, 21, 22 }, ok = 30, retired = RDPS_ROW_RETIRED;
	float out[3 * DIM], one[DIM];
	int ret;

	memcpy(m.region + 21 * m.stride, &retired, 8);
	cr_assert_eq(verbs_pull_post(&vc->base, 0, ids, 3, out), 0, "%s", vc->base.errmsg);
	ret = verbs_pull_wait(&vc->base);
	cr_assert_eq(ret, -ENOENT, "pull of a retired row: %d (%s)", ret, vc->base.errmsg);
	cr_assert(strstr(vc->base.errmsg, "'entity' was dropped"), "%s", vc->base.errmsg);
	cr_assert(!vc->broken);
	cr_assert_eq(verbs_pull_post(&vc->base, 0, &ok, 1, one), 0, "%s", vc->base.errmsg);
	cr_assert_eq(verbs_pull_wait(&vc->base), 0, "%s", vc->base.errmsg);
	cr_assert_eq(one[0], 30000.0f);
}
