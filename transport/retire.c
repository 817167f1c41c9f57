// SPDX-License-Identifier: MIT
/* A dropped table's region, retired (retire.h has why). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "retire.h"

void rdps_region_retire_rows(const struct rdps_region *r)
{
	uint64_t rows = r->desc.hi - r->desc.lo, zero = 0;

	if (!r->base || !r->desc.stride)
		return;
	if (rows > r->len / r->desc.stride)
		rows = r->len / r->desc.stride;
	for (uint64_t i = 0; i < rows; i++) {
		char *row = (char *)r->base + i * r->desc.stride;

		/* A READ may see either word first: both say the row is no
		 * table's any more (the check never matches). */
		__atomic_store_n((uint64_t *)(row + RDPS_ROW_CHECK_OFFSET), zero, __ATOMIC_RELAXED);
		__atomic_store_n((uint64_t *)row, (uint64_t)RDPS_ROW_RETIRED, __ATOMIC_RELAXED);
	}
}

int rdps_retire_add(struct rdps_retire_list *l, void *mr, uint64_t seq)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 8;
		struct rdps_retired *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct rdps_retired){ mr, seq };
	return 0;
}

uint32_t rdps_retire_reap(struct rdps_retire_list *l, uint64_t min_live_seq,
			  void (*dereg)(void *mr))
{
	uint32_t kept = 0, freed = 0;

	for (uint32_t i = 0; i < l->n; i++) {
		if (l->v[i].seq <= min_live_seq) {
			dereg(l->v[i].mr);
			freed++;
		} else {
			l->v[kept++] = l->v[i];
		}
	}
	l->n = kept;
	return freed;
}

void rdps_retire_free(struct rdps_retire_list *l, void (*dereg)(void *mr))
{
	rdps_retire_reap(l, UINT64_MAX, dereg);
	free(l->v);
	memset(l, 0, sizeof(*l));
}
