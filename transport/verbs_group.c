// SPDX-License-Identifier: MIT
/*
 * verbs backend, client side: what a client's connections on one RDMA
 * device share (verbs.h: a group): the protection domain and one
 * completion queue, instead of a PD and CQ per (client, server) pair.
 *
 * The CQ is sized for every server of the job (the welcome says how many),
 * as far as the device's max_cqe allows; each connection's queue pair is
 * cut to its share (send queue and receives), so the CQ can never overrun
 * however many completions all of them produce at once.
 *
 * Completions are read by whichever connection waits and each is handed to
 * the connection its wr_id names, if that connection's QP is the one that
 * completed (qp_num): rxe keeps a destroyed QP's completions in the CQ, and
 * a closed connection's index may be taken by another by then.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "verbs.h"

int verbs_conn_fail(struct verbs_conn *vc, int ret, const char *fmt, const char *detail)
{
	char what[400];

	vc->broken = true;
	snprintf(what, sizeof(what), fmt, detail);
	snprintf(vc->base.errmsg, sizeof(vc->base.errmsg), "%s: %s", vc->base.peer, what);
	return ret;
}

int verbs_group_poll(struct verbs_conn *vc)
{
	struct verbs_group *g = vc->g;
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(g->cq, 32, wc);

	if (n < 0)
		return verbs_conn_fail(vc, -EIO, "%s", "polling the completion queue failed");
	for (int i = 0; i < n; i++) {
		uint32_t k = WR_CONN(wc[i].wr_id);
		struct verbs_conn *to = k < g->nconns ? g->conns[k] : NULL;

		if (!to || to->qp_num != wc[i].qp_num)
			continue; /* of a connection closed since */
		if (!to->broken)
			verbs_conn_wc(to, &wc[i]);
	}
	return vc->broken ? -EIO : n;
}

int verbs_group_sleep(struct verbs_conn *vc, int ctl_fd, int ms, bool *ctl_readable)
{
	struct verbs_group *g = vc->g;
	struct pollfd pfd[2] = { { .fd = ctl_fd, .events = POLLIN },
				 { .fd = g->cc ? g->cc->fd : -1, .events = POLLIN } };
	int n;

	*ctl_readable = false;
	if (!g->cc) {
		sched_yield();
		return 0;
	}
	if (!g->cq_armed) {
		if (ibv_req_notify_cq(g->cq, 0)) {
			sched_yield();
			return 0;
		}
		g->cq_armed = true;
	}
	/* A completion that came before the arm raises no event. */
	if ((n = verbs_group_poll(vc)))
		return n;
	g->sleeps++;
	if (poll(pfd, 2, ms) < 0 && errno != EINTR)
		return verbs_conn_fail(vc, -errno, "%s", "waiting for completions failed");
	if (pfd[1].revents) {
		struct ibv_cq *cq;
		void *ctx;

		/* Non-blocking: EAGAIN when another wait read it first. */
		if (!ibv_get_cq_event(g->cc, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			g->cq_armed = false;
		}
	}
	*ctl_readable = pfd[0].revents != 0;
	return 0;
}

static void group_free(struct verbs_group *g)
{
	if (g->cq)
		ibv_destroy_cq(g->cq);
	if (g->cc)
		ibv_destroy_comp_channel(g->cc);
	if (g->pd)
		ibv_dealloc_pd(g->pd);
	if (g->home && *g->home == g)
		*g->home = NULL;
	free(g->conns);
	free(g);
}

static int group_create(struct verbs_conn *vc, uint32_t servers, struct verbs_group **out,
			char *err, size_t errlen)
{
	struct ibv_context *ctx = vc->id->verbs;
	struct verbs_group *g = calloc(1, sizeof(*g));
	struct ibv_device_attr da;
	uint64_t want;
	int ret;

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->ctx = ctx;
	g->servers = servers ? servers : 1;
	/* Every connection's send queue and receives, at most. */
	want = (uint64_t)g->servers * (VERBS_SQ_DEPTH + VERBS_CLIENT_RECVS);
	if (!ibv_query_device(ctx, &da) && da.max_cqe > 0 && want > (uint64_t)da.max_cqe)
		want = (uint64_t)da.max_cqe;
	g->cqe = (uint32_t)want;
	g->pd = ibv_alloc_pd(ctx);
	if (!g->pd) {
		ret = -errno;
		snprintf(err, errlen, "%s: allocating a protection domain failed: %s", vc->base.peer,
			 strerror(-ret));
		goto err_free;
	}
	/* Waits spin, then sleep on this channel; without one they spin. */
	g->cc = ibv_create_comp_channel(ctx);
	if (g->cc && verbs_set_nonblock(g->cc->fd)) {
		ibv_destroy_comp_channel(g->cc);
		g->cc = NULL;
	}
	g->cq = ibv_create_cq(ctx, (int)g->cqe, NULL, g->cc, 0);
	if (!g->cq) {
		ret = -errno;
		snprintf(err, errlen, "%s: creating a completion queue of %u entries failed: %s",
			 vc->base.peer, g->cqe, strerror(-ret));
		goto err_free;
	}
	*out = g;
	return 0;

err_free:
	group_free(g);
	return ret;
}

int verbs_group_join(struct verbs_conn *vc, const struct rdps_conn_params *p, char *err,
		     size_t errlen)
{
	struct verbs_group *g = p->shared ? *p->shared : NULL;
	uint32_t i, share;
	int ret;

	/* Another device than the group's: a group of its own. */
	if (g && g->ctx != vc->id->verbs)
		g = NULL;
	if (!g) {
		ret = group_create(vc, vc->ctl->num_servers, &g, err, errlen);
		if (ret)
			return ret;
		if (p->shared && !*p->shared) {
			g->home = p->shared;
			*p->shared = g;
		}
	}
	for (i = 0; i < g->nconns && g->conns[i]; i++)
		;
	if (i == VERBS_GROUP_CONNS) {
		snprintf(err, errlen, "a client has at most %d verbs connections", VERBS_GROUP_CONNS);
		ret = -EMFILE;
		goto err_leave;
	}
	if (i == g->nconns) {
		struct verbs_conn **c = realloc(g->conns, (i + 1) * sizeof(*c));

		if (!c) {
			ret = -ENOMEM;
			goto err_leave;
		}
		g->conns = c;
		g->nconns = i + 1;
	}
	/* The connection's share of the CQ: its send queue and receives. */
	share = g->cqe / (g->servers > g->live + 1 ? g->servers : g->live + 1);
	if (share < VERBS_SQ_DEPTH_MIN + VERBS_CLIENT_RECVS) {
		snprintf(err, errlen, "%s: the RDMA device's completion queues hold %u entries, too "
			 "few for %u servers (each needs %u)", vc->base.peer, g->cqe,
			 g->servers, VERBS_SQ_DEPTH_MIN + VERBS_CLIENT_RECVS);
		ret = -ENOSPC;
		goto err_leave;
	}
	vc->sq_depth = share - VERBS_CLIENT_RECVS;
	if (vc->sq_depth > VERBS_SQ_DEPTH)
		vc->sq_depth = VERBS_SQ_DEPTH;
	g->conns[i] = vc;
	vc->g = g;
	vc->index = i;
	g->live++;
	return 0;

err_leave:
	if (!g->live)
		group_free(g);
	return ret;
}

void verbs_group_leave(struct verbs_conn *vc)
{
	struct verbs_group *g = vc->g;

	if (!g)
		return;
	g->conns[vc->index] = NULL;
	while (g->nconns && !g->conns[g->nconns - 1])
		g->nconns--;
	vc->g = NULL;
	if (!--g->live)
		group_free(g);
}
