// SPDX-License-Identifier: MIT
/*
 * ofi backend, server side: the receive slots every client's messages land
 * in, posted on the endpoint's one receive queue (an RDM endpoint receives
 * from every peer on it, as a shared receive queue would), and the credits
 * that say who may fill them.
 *
 * The rules are verbs_recv_pool.c's, whose protocol transport/
 * verbs_credits.pml checks: a credit is a posted slot promised to one
 * session; free_credits + promised == slots posted + slots being handled
 * (taken off the queue, not yet posted again), so the clients together
 * never have more messages on the way than the queue has receives. A
 * session's credits come back one per handled message; the server gives
 * them out again up to each session's share of the pool, which divides it
 * by the job's size, not by the sessions connected so far. A gone
 * session's credits come back once its messages are in, or its drain time
 * ran out (ofi_server.c).
 *
 * Without an endpoint (pool->e NULL) the pool only counts: the tests drive
 * its accounting directly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "ofi.h"

int ofi_pool_create(struct ofi_pool *pool, struct ofi_ep *e, size_t slot_size,
		    uint32_t max_slots)
{
	memset(pool, 0, sizeof(*pool));
	pool->e = e;
	pool->slot_size = slot_size;
	max_slots -= max_slots % OFI_POOL_CHUNK;
	pool->max_slots = max_slots;
	pool->slot_posted = calloc(max_slots ? max_slots : 1, 1);
	pool->chunks = calloc(max_slots / OFI_POOL_CHUNK + 1, sizeof(*pool->chunks));
	if (!pool->slot_posted || !pool->chunks)
		return -ENOMEM;
	return 0;
}

void ofi_pool_destroy(struct ofi_pool *pool)
{
	/* The endpoint is closed first: no receive refers to a buffer. */
	for (uint32_t i = 0; pool->chunks && i < pool->nslots / OFI_POOL_CHUNK; i++) {
		if (pool->chunks[i].mr)
			fi_close(&pool->chunks[i].mr->fid);
		free(pool->chunks[i].buf);
	}
	free(pool->chunks);
	free(pool->slot_posted);
	memset(pool, 0, sizeof(*pool));
}

int ofi_pool_post(struct ofi_pool *pool, uint32_t slot)
{
	/* Two receives on one buffer would let one message overwrite another. */
	if (pool->slot_posted[slot]) {
		pool->double_posts++;
		return -EALREADY;
	}
	if (pool->e) {
		ssize_t ret = fi_recv(pool->e->ep, ofi_pool_buf(pool, slot), pool->slot_size,
				      ofi_pool_desc(pool, slot), FI_ADDR_UNSPEC,
				      OFI_CTX(OFI_OP_SRV_RECV, slot));

		if (ret)
			return (int)ret;
	}
	pool->slot_posted[slot] = 1;
	pool->posted++;
	return 0;
}

int ofi_pool_taken(struct ofi_pool *pool, uint32_t slot)
{
	if (slot >= pool->nslots || !pool->slot_posted[slot])
		return -EPROTO;
	pool->slot_posted[slot] = 0;
	pool->posted--;
	return 0;
}

int ofi_pool_grow(struct ofi_pool *pool, uint32_t want, char *err, size_t errlen)
{
	if (want > pool->max_slots)
		want = pool->max_slots;
	while (pool->nslots < want) {
		struct ofi_chunk *ch = &pool->chunks[pool->nslots / OFI_POOL_CHUNK];
		size_t len = (size_t)OFI_POOL_CHUNK * pool->slot_size;
		uint32_t first = pool->nslots;
		int ret;

		if (pool->e) {
			/* Received into, and (two-sided pulls) sent from. */
			ret = ofi_alloc_registered(pool->e, len, FI_RECV | FI_SEND, &ch->buf,
						   &ch->mr, err, errlen, "receive buffers");
		} else {
			ch->buf = calloc(1, len);
			ret = ch->buf ? 0 : -ENOMEM;
		}
		if (ret)
			return ret;
		pool->nslots += OFI_POOL_CHUNK;
		for (uint32_t s = first; s < pool->nslots; s++) {
			ret = ofi_pool_post(pool, s);
			if (ret) {
				snprintf(err, errlen, "posting a receive buffer failed: %s",
					 ofi_strerror(ret));
				return ret;
			}
			pool->free_credits++;
		}
	}
	return 0;
}

uint32_t ofi_pool_share(const struct ofi_pool *pool, uint32_t sessions)
{
	uint32_t share = sessions ? pool->nslots / sessions : pool->nslots;

	if (share > OFI_SHARE_MAX)
		share = OFI_SHARE_MAX;
	return share ? share : 1;
}

uint32_t ofi_pool_grant(struct ofi_pool *pool, struct ofi_credits *c, uint32_t share)
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

int ofi_pool_return(struct ofi_pool *pool, struct ofi_credits *c, bool reposted)
{
	/* A credit still owed never reached the client: none of its messages
	 * can be spending it. */
	if (c->promised <= c->owed)
		return -EPROTO;
	c->promised--;
	pool->promised--;
	/* A slot that could not be posted again is no credit for anyone. */
	if (reposted)
		pool->free_credits++;
	return 0;
}

void ofi_pool_unsend(struct ofi_pool *pool, struct ofi_credits *c)
{
	pool->free_credits += c->owed;
	pool->promised -= c->owed;
	c->promised -= c->owed;
	c->owed = 0;
}

void ofi_pool_release(struct ofi_pool *pool, struct ofi_credits *c)
{
	pool->free_credits += c->promised;
	pool->promised -= c->promised;
	c->promised = 0;
	c->owed = 0;
}
