// SPDX-License-Identifier: MIT
/*
 * The row checksum of validated one-sided reads (layout: rdps/kvstore.h):
 * XXH3 of the row's data, mixed with its version and with which row of
 * which table it is. Every server writes and
 * every client checks one per row moved, so it is built twice: here for
 * any x86-64, and in rowcheck_avx2.c with AVX2 (XXH3's wider kernel, the
 * same hash); the first call picks one for the CPU.
 */
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "rdps/kvstore.h"
#include "rowcheck.h"

uint64_t rdps_row_checksum_generic(uint64_t tag, uint64_t version, const float *data,
				   uint32_t dim)
{
	return XXH3_64bits(data, (size_t)dim * sizeof(float)) ^ (version * RDPS_ROW_VERSION_MIX) ^
	       rdps_row_tag_mix(tag);
}

uint64_t rdps_row_table_key(uint32_t table_id, const char *name)
{
	size_t n = strnlen(name, RDPS_TABLE_NAME_MAX);

	/* Seeded once per table, not per row: the seeded XXH3's cost does
	 * not matter here. */
	return XXH3_64bits_withSeed(name, n, 0x7264707300000000ull | table_id);
}

typedef uint64_t checksum_fn(uint64_t tag, uint64_t version, const float *data, uint32_t dim);

/* Picked at the first call rather than by an ifunc resolver: a resolver
 * runs during relocation, before sanitizers' runtimes are up (the fuzz
 * builds crashed in it), and the indirect call costs nothing next to
 * hashing a row. */
static checksum_fn *checksum_impl;

static checksum_fn *pick_checksum(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") ? rdps_row_checksum_avx2
					      : rdps_row_checksum_generic;
}

uint64_t rdps_row_checksum(uint64_t tag, uint64_t version, const float *data, uint32_t dim)
{
	checksum_fn *fn = __atomic_load_n(&checksum_impl, __ATOMIC_RELAXED);

	if (!fn) {
		fn = pick_checksum();
		__atomic_store_n(&checksum_impl, fn, __ATOMIC_RELAXED);
	}
	return fn(tag, version, data, dim);
}

bool rdps_row_valid(const void *row, uint32_t dim, uint64_t tag)
{
	const char *r = row;
	uint64_t version, check;

	memcpy(&version, r, sizeof(version));
	memcpy(&check, r + RDPS_ROW_CHECK_OFFSET, sizeof(check));
	return rdps_row_checksum(tag, version, (const float *)(r + RDPS_ROW_DATA_OFFSET), dim) ==
	       check;
}
