/* SPDX-License-Identifier: MIT */
/* Internal: the builds of rdps_row_checksum (rowcheck.c picks one). */
#ifndef RDPS_COMMON_ROWCHECK_H
#define RDPS_COMMON_ROWCHECK_H

#include <stdint.h>

/* Mixes the version into the data's hash (odd: a bijection). */
#define RDPS_ROW_VERSION_MIX 0x9e3779b97f4a7c15ull

uint64_t rdps_row_checksum_generic(uint64_t version, const float *data, uint32_t dim);
uint64_t rdps_row_checksum_avx2(uint64_t version, const float *data, uint32_t dim);

#endif
