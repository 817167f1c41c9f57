// SPDX-License-Identifier: MIT
/*
 * verbs backend, server side: the receive slots every client's pushes land
 * in, posted on one shared receive queue, and the credits that say who may
 * fill them.
 *
 * The rule that makes an overrun impossible: a credit is a posted slot
 * promised to one session. free_credits + promised == slots posted (plus the
 * one being handled, between verbs_pool_taken and verbs_pool_post), so the
 * clients together can never have more SENDs on the way than the SRQ has
 * receives. A session's credits come back one per completion of its
 * messages; verbs_srv_cq.c gives them out again up to each session's fair
 * share, and returns a gone session's unused credits only after its queue
 * pair is drained (no completion of it can come later). The share divides
 * the pool by the job's size, not by the sessions connected so far: a
 * session never holds credits a later one needs (otherwise a late client
 * could starve while the early ones, idle at a barrier, sit on theirs; the
 * model found that deadlock). The model transport/verbs_credits.pml checks
 * this protocol exhaustively.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "verbs.h"

int verbs_pool_create(struct verbs_recv_pool *pool, struct ibv_pd *pd, uint32_t max_slots,
		      char *err, size_t errlen)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = max_slots, .max_sge = 1 } };

	memset(pool, 0, sizeof(*pool));
	pool->pd = pd;
	max_slots -= max_slots % VERBS_POOL_CHUNK;
	pool->slot_posted = calloc(max_slots, 1);
	pool->chunks = calloc(max_slots / VERBS_POOL_CHUNK, sizeof(*pool->chunks));
	if (!pool->slot_posted || !pool->chunks)
		return -ENOMEM;
	pool->srq = ibv_create_srq(pd, &sa);
	if (!pool->srq) {
		int ret = -errno;

		snprintf(err, errlen, "creating the shared receive queue (%u buffers) failed: %s",
			 max_slots, strerror(-ret));
		return ret;
	}
	/* The provider may round up; never post more than we asked for. */
	pool->max_slots = max_slots;
	return 0;
}

void verbs_pool_destroy(struct verbs_recv_pool *pool)
{
	if (pool->srq)
		ibv_destroy_srq(pool->srq);
	for (uint32_t i = 0; pool->chunks && i < pool->nslots / VERBS_POOL_CHUNK; i++) {
		if (pool->chunks[i].mr)
			ibv_dereg_mr(pool->chunks[i].mr);
		free(pool->chunks[i].buf);
	}
	free(pool->chunks);
	free(pool->slot_posted);
	memset(pool, 0, sizeof(*pool));
}

int verbs_pool_post(struct verbs_recv_pool *pool, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)verbs_pool_buf(pool, slot),
			       .length = VERBS_MSG_SIZE,
			       .lkey = pool->chunks[slot / VERBS_POOL_CHUNK].mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_SRV_RECV, slot), .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	int ret;

	/* Two receives on one buffer would let one push overwrite another. */
	if (pool->slot_posted[slot]) {
		pool->double_posts++;
		return -EALREADY;
	}
	ret = ibv_post_srq_recv(pool->srq, &wr, &bad);
	if (ret)
		return -ret;
	pool->slot_posted[slot] = 1;
	pool->posted++;
	return 0;
}

int verbs_pool_taken(struct verbs_recv_pool *pool, uint32_t slot)
{
	if (slot >= pool->nslots || !pool->slot_posted[slot])
		return -EPROTO;
	pool->slot_posted[slot] = 0;
	pool->posted--;
	return 0;
}

int verbs_pool_grow(struct verbs_recv_pool *pool, uint32_t want, char *err, size_t errlen)
{
	if (want > pool->max_slots)
		want = pool->max_slots;
	while (pool->nslots < want) {
		struct verbs_chunk *ch = &pool->chunks[pool->nslots / VERBS_POOL_CHUNK];
		uint32_t first = pool->nslots;
		int ret;

		ret = verbs_alloc_registered(pool->pd, (size_t)VERBS_POOL_CHUNK * VERBS_MSG_SIZE,
					     IBV_ACCESS_LOCAL_WRITE, &ch->buf, &ch->mr, err, errlen,
					     "receive buffers");
		if (ret)
			return ret;
		pool->nslots += VERBS_POOL_CHUNK;
		for (uint32_t s = first; s < pool->nslots; s++) {
			ret = verbs_pool_post(pool, s);
			if (ret) {
				snprintf(err, errlen, "posting a receive buffer failed: %s",
					 strerror(-ret));
				return ret;
			}
			pool->free_credits++;
		}
	}
	return 0;
}

uint32_t verbs_pool_share(const struct verbs_recv_pool *pool, uint32_t sessions)
{
	uint32_t share = sessions ? pool->nslots / sessions : pool->nslots;

	if (share > VERBS_SHARE_MAX)
		share = VERBS_SHARE_MAX;
	return share ? share : 1;
}

uint32_t verbs_pool_grant(struct verbs_recv_pool *pool, struct verbs_credits *c,
			  uint32_t share)
{
	uint32_t g;

	if (c->promised >= share)
		return 0;
	g = share - c->promised;
	if (g > pool->free_credits)
		g = pool->free_credits;
	pool->free_credits -= g;
	pool->promised += g;
	c->promised += g;
	c->owed += g;
	return g;
}

int verbs_pool_return(struct verbs_recv_pool *pool, struct verbs_credits *c, bool reposted)
{
	if (!c->promised)
		return -EPROTO;
	c->promised--;
	pool->promised--;
	/* A slot that could not be posted again is no credit for anyone. */
	if (reposted)
		pool->free_credits++;
	return 0;
}

void verbs_pool_release(struct verbs_recv_pool *pool, struct verbs_credits *c)
{
	pool->free_credits += c->promised;
	pool->promised -= c->promised;
	c->promised = 0;
	c->owed = 0;
}
