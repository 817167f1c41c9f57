// SPDX-License-Identifier: MIT
/* rdps_row_checksum with XXH3's AVX2 kernel (this file is built with
 * -mavx2; rowcheck.c calls it only on CPUs that have AVX2). */
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include "rowcheck.h"

uint64_t rdps_row_checksum_avx2(uint64_t tag, uint64_t version, const float *data, uint32_t dim)
{
	return XXH3_64bits(data, (size_t)dim * sizeof(float)) ^ (version * RDPS_ROW_VERSION_MIX) ^
	       rdps_row_tag_mix(tag);
}
