/* SPDX-License-Identifier: MIT */
/*
 * Internal: NumPy .npy files of 1-D and 2-D little-endian C-order arrays of
 * the dtypes rdps stores (float32 "<f4", int64 "<i8", uint8 "|u1"): the
 * graph datasets and partitions. The trainer's float32 writer for saved
 * embeddings is trainer.h's.
 */
#ifndef RDPS_COMMON_NPY_H
#define RDPS_COMMON_NPY_H

#include <stddef.h>
#include <stdint.h>

/* Element size of a descr ("<f4", "<i8", "|u1", "<u1"), 0 if not one of them. */
size_t rdps_npy_elem_size(const char *descr);

/*
 * Reads path: its descr must be want (e.g. "<i8"; "|u1" also takes "<u1");
 * *rows and *cols get its shape (cols 0 for a 1-D array). *data is malloc'd
 * (free()), its bytes as stored. 0, or -errno with "PATH: reason" in err:
 * -EINVAL for another dtype, Fortran order, more than 2 dimensions or a
 * size that disagrees with the file's length.
 */
int rdps_npy_read(const char *path, const char *want, void **data, uint64_t *rows,
		  uint64_t *cols, char *err, size_t errlen);

/* Writes rows (x cols; cols 0: 1-D) elements of descr from data to path
 * (version 1.0 header as numpy writes it; a temporary file renamed into
 * place). 0 or -errno with a reason. */
int rdps_npy_write(const char *path, const char *descr, const void *data, uint64_t rows,
		   uint64_t cols, char *err, size_t errlen);

/* Element size and .npy descr of a dtype name ("float32", "bfloat16",
 * "bool", ...: graph data of any dtype; bfloat16 is stored as "<u2", the
 * name says what it holds): 0 / NULL if unknown. */
size_t rdps_npy_dtype_size(const char *dtype);
const char *rdps_npy_dtype_descr(const char *dtype);
/* The dtype name of a descr ("<f4" -> "float32"), or NULL. */
const char *rdps_npy_descr_dtype(const char *descr);

#define RDPS_NPY_MAX_NDIM 8

/* An array parsed in place from a .npy file's bytes. */
struct rdps_npy {
	char descr[16];
	uint32_t ndim;          /* 0 for a scalar */
	uint64_t shape[RDPS_NPY_MAX_NDIM];
	size_t elem_size;
	const void *data;       /* into the buffer parsed */
	uint64_t data_bytes;
};

/* Parses buf[0..len) (a whole .npy file named path for messages): any
 * descr of rdps_npy_descr_dtype, C order, up to RDPS_NPY_MAX_NDIM
 * dimensions, its length matching its shape. 0 or -EINVAL naming path. */
int rdps_npy_parse(const void *buf, size_t len, const char *path, struct rdps_npy *out,
		   char *err, size_t errlen);

/* rdps_npy_write of a descr of rdps_npy_descr_dtype, also giving the
 * whole file's size and XXH3-64 (either may be NULL). */
int rdps_npy_write_sum(const char *path, const char *descr, const void *data, uint64_t rows,
		       uint64_t cols, uint64_t *bytes, uint64_t *xxh3, char *err, size_t errlen);

#endif
