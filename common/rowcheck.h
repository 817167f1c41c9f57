/* SPDX-License-Identifier: MIT */
/* Internal: the builds of rdps_row_checksum (rowcheck.c picks one). */
#ifndef RDPS_COMMON_ROWCHECK_H
#define RDPS_COMMON_ROWCHECK_H

#include <stdint.h>

/* Mixes the version into the data's hash (odd: a bijection). */
#define RDPS_ROW_VERSION_MIX 0x9e3779b97f4a7c15ull

/* Mixes which row it is (table key ^ id) into the checksum: splitmix64's
 * finalizer, a bijection whose output bits each depend on every input
 * bit, so rows of neighbouring ids or of two tables differ in ~32 bits
 * of their masks (two multiplies: free next to hashing the data). */
static inline uint64_t rdps_row_tag_mix(uint64_t tag)
{
	uint64_t z = tag + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t rdps_row_checksum_generic(uint64_t tag, uint64_t version, const float *data,
				   uint32_t dim);
uint64_t rdps_row_checksum_avx2(uint64_t tag, uint64_t version, const float *data,
				uint32_t dim);

#endif
