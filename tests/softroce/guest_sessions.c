// SPDX-License-Identifier: MIT
/*
 * Session binding of the verbs backend (inside the soft-RoCE guest, run by
 * verbs.sh): a queue pair exists only for a live, authenticated control
 * connection, one per connection, and the two live and die together.
 *
 * The tests play the client by hand: the real TCP handshake (tcp.c) gives
 * a session token; a bare rdma_cm connection request carries whatever token
 * and proof the test chooses, and the server's answer (ESTABLISHED, or
 * REJECTED with its reason) is read from the CM event.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest_common.h"
#include "rdps/common.h"
#include "rdps_test.h"
#include "transport/tcp.h"
#include "transport/verbs.h"

static struct guest_server gs;
static const char secret_text[] = "sessions-secret-0123456789";

static void start(void)
{
	guest_server_start(&gs, 64, 8, NULL);
}

static void start_with_secret(void)
{
	guest_server_start(&gs, 64, 8, secret_text);
}

static void stop(void)
{
	guest_server_stop(&gs);
}

/* The control connection of client 0 (of 1): the real handshake. */
static struct rdps_conn *control(const struct rdps_secret *secret)
{
	struct rdps_conn_params cp = { .host = guest_host(), .port = (uint16_t)gs.port,
				       .server_id = 0, .client_id = 0, .num_clients = 1,
				       .timeout_ms = 20000, .secret = secret };
	struct rdps_conn *c;
	char err[512];

	cr_assert_eq(rdps_transport_tcp()->connect(&cp, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

struct bare_qp {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/*
 * Asks for a queue pair with token and mac. Returns 0 (established), or the
 * reason of the server's refusal (a positive errno), or -1 if the request
 * got no answer.
 */
static int bare_connect(struct bare_qp *q, uint64_t token, const uint8_t *mac)
{
	struct verbs_cm_req req = { VERBS_CM_MAGIC, 0, 1, 0, token, { 0 } };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param cp = { .private_data = &req, .private_data_len = sizeof(req),
				      .initiator_depth = 1, .retry_count = 7,
				      .rnr_retry_count = 6 };
	struct rdma_cm_event *ev;
	char err[256] = "";
	int ret;

	if (mac)
		memcpy(req.mac, mac, VERBS_QP_MAC_LEN);
	memset(q, 0, sizeof(*q));
	q->ch = rdma_create_event_channel();
	cr_assert(q->ch);
	cr_assert_eq(verbs_set_nonblock(q->ch->fd), 0);
	cr_assert_eq(rdma_create_id(q->ch, &q->id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(verbs_cm_resolve(q->id, q->ch, guest_host(), (uint16_t)gs.port, 10000, err,
				      sizeof(err)), 0, "%s", err);
	q->pd = ibv_alloc_pd(q->id->verbs);
	q->cq = ibv_create_cq(q->id->verbs, 16, NULL, NULL, 0);
	cr_assert(q->pd && q->cq);
	qa.send_cq = qa.recv_cq = q->cq;
	cr_assert_eq(rdma_create_qp(q->id, q->pd, &qa), 0);
	cr_assert_eq(rdma_connect(q->id, &cp), 0);
	if (verbs_cm_wait(q->ch, rdps_now_ns() + 20000000000ull, &ev))
		return -1;
	if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
		ret = 0;
	} else {
		struct verbs_cm_rep rep = { 0, 0 };

		cr_assert_eq(ev->event, RDMA_CM_EVENT_REJECTED, "%s", rdma_event_str(ev->event));
		cr_assert_geq(ev->param.conn.private_data_len, sizeof(rep));
		memcpy(&rep, ev->param.conn.private_data, sizeof(rep));
		cr_assert_eq(rep.magic, VERBS_CM_MAGIC);
		ret = (int)rep.credits;
	}
	rdma_ack_cm_event(ev);
	return ret;
}

static void bare_close(struct bare_qp *q)
{
	if (q->id && q->id->qp)
		rdma_destroy_qp(q->id);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	if (q->pd)
		ibv_dealloc_pd(q->pd);
	if (q->id)
		rdma_destroy_id(q->id);
	if (q->ch)
		rdma_destroy_event_channel(q->ch);
}

/* Waits for the server to disconnect an established bare queue pair. */
static bool bare_disconnected_within(struct bare_qp *q, int ms)
{
	struct rdma_cm_event *ev;
	bool gone = false;

	while (!gone && !verbs_cm_wait(q->ch, rdps_now_ns() + (uint64_t)ms * 1000000ull, &ev)) {
		gone = ev->event == RDMA_CM_EVENT_DISCONNECTED;
		rdma_ack_cm_event(ev);
	}
	return gone;
}

/* Waits for the server to close a control connection (EOF). */
static bool control_closed_within(struct rdps_conn *c, int ms)
{
	struct pollfd pfd = { .fd = rdps_tcp_conn_fd(c), .events = POLLIN };
	char b;

	return poll(&pfd, 1, ms) == 1 && recv(pfd.fd, &b, 1, MSG_PEEK) == 0;
}

static uint64_t auth_failures(void)
{
	struct rdps_server_stats st;

	guest_server_stats(&gs, &st);
	return st.auth_failures;
}

TestSuite(sessions, .init = start, .fini = stop, .timeout = 180);

Test(sessions, a_forged_token_is_refused)
{
	struct rdps_conn *c = control(NULL);
	struct bare_qp q;
	uint64_t before = auth_failures();

	/* A live control connection exists, but this is not its token. */
	cr_assert_eq(bare_connect(&q, c->session ^ 0x5a5a5a5a5a5a5a5aull, NULL), ENOENT);
	cr_assert_eq(auth_failures(), before + 1);
	bare_close(&q);
	/* Control: its own token opens a queue pair. */
	cr_assert_eq(bare_connect(&q, c->session, NULL), 0);
	bare_close(&q);
	c->ops->close(c);
}

Test(sessions, a_token_opens_one_queue_pair_only)
{
	struct rdps_conn *c = control(NULL);
	struct bare_qp q1, q2;

	cr_assert_eq(bare_connect(&q1, c->session, NULL), 0, "the first use must succeed");
	cr_assert_eq(bare_connect(&q2, c->session, NULL), EALREADY,
		     "a second queue pair with the same token was not refused as reused");
	bare_close(&q2);
	bare_close(&q1);
	c->ops->close(c);
}

Test(sessions, the_token_of_a_closed_connection_is_refused)
{
	struct rdps_conn *c = control(NULL);
	uint64_t token = c->session;
	struct bare_qp q;

	c->ops->close(c);
	usleep(300000); /* the server sees the close */
	cr_assert_eq(bare_connect(&q, token, NULL), ENOENT, "an orphaned token opened a queue pair");
	bare_close(&q);
}

Test(sessions, closing_the_control_connection_closes_its_queue_pair)
{
	struct rdps_conn *c = control(NULL);
	struct rdps_server_stats st;
	struct bare_qp q;

	cr_assert_eq(bare_connect(&q, c->session, NULL), 0);
	guest_server_stats(&gs, &st);
	cr_assert_eq(st.rdma_sessions, 1);
	c->ops->close(c);
	cr_assert(bare_disconnected_within(&q, 10000),
		  "the queue pair outlived its control connection by 10 s");
	bare_close(&q);
}

Test(sessions, a_queue_pair_that_goes_closes_its_control_connection)
{
	struct rdps_conn *c = control(NULL);
	struct bare_qp q;

	cr_assert_eq(bare_connect(&q, c->session, NULL), 0);
	/* Control: the control connection is open while the QP lives. */
	cr_assert(!control_closed_within(c, 500), "closed while its queue pair lives");
	rdma_disconnect(q.id);
	cr_assert(control_closed_within(c, 10000),
		  "the control connection outlived its queue pair by 10 s");
	bare_close(&q);
	c->ops->close(c);
}

TestSuite(sessions_secret, .init = start_with_secret, .fini = stop, .timeout = 180);

/* With a secret, the token alone (it travels in clear) is not enough. */
Test(sessions_secret, a_token_without_the_secrets_proof_is_refused)
{
	struct rdps_secret good = { .len = sizeof(secret_text) - 1 }, bad = good;
	uint8_t mac[VERBS_QP_MAC_LEN];
	struct rdps_conn *c;
	struct bare_qp q;

	memcpy(good.key, secret_text, good.len);
	memcpy(bad.key, secret_text, bad.len);
	bad.key[0] ^= 1;
	c = control(&good);
	verbs_qp_mac(&bad, c->session, mac);
	cr_assert_eq(bare_connect(&q, c->session, mac), EACCES,
		     "a proof made with another secret was accepted");
	bare_close(&q);
	cr_assert_eq(bare_connect(&q, c->session, NULL), EACCES, "no proof was accepted");
	bare_close(&q);
	/* Control: the right proof opens it. */
	verbs_qp_mac(&good, c->session, mac);
	cr_assert_eq(bare_connect(&q, c->session, mac), 0);
	bare_close(&q);
	c->ops->close(c);
}
