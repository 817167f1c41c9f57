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

#endif
