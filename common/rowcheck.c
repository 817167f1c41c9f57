// SPDX-License-Identifier: MIT
/* The row checksum of validated one-sided reads (layout: rdps/kvstore.h). */
#include <string.h>
#include <xxhash.h>

#include "rdps/kvstore.h"

uint64_t rdps_row_checksum(uint64_t version, const float *data, uint32_t dim)
{
	return XXH3_64bits(data, (size_t)dim * sizeof(float)) ^ (version * 0x9e3779b97f4a7c15ull);
}

bool rdps_row_valid(const void *row, uint32_t dim)
{
	const char *r = row;
	uint64_t version, check;

	memcpy(&version, r, sizeof(version));
	memcpy(&check, r + RDPS_ROW_CHECK_OFFSET, sizeof(check));
	return rdps_row_checksum(version, (const float *)(r + RDPS_ROW_DATA_OFFSET), dim) == check;
}
