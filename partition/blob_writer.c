// SPDX-License-Identifier: MIT
/*
 * Blob writers. The streaming writer takes records as they come (appended,
 * or written in place into its buffer) and hands each filled buffer to
 * io_uring while the caller fills the next: a blob of any size is written
 * with WRITER_BUFS buffers of memory, and the disk works while the caller
 * produces (a checkpoint copying rows out of a shard, stripe by stripe).
 * Without io_uring it writes each buffer with pwrite. The one-shot writer
 * (rdps_loader_write_blob) writes a payload already in memory.
 *
 * Both write path.tmp-XXXXXX, fsync it and rename it to path: path holds
 * the old file or the complete new one, never a partial one.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/partition.h"

#define WRITER_BUFS 4u           /* buffers of a streaming writer */
#define WRITE_CHUNK (2u << 20)   /* one-shot writer: bytes per write */
#define WRITE_QD 16u             /* one-shot writer: writes in flight */

static int write_all(int fd, const void *p, size_t n, off_t off)
{
	const char *c = p;

	while (n) {
		ssize_t w = pwrite(fd, c, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		c += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Streaming writer                                                        */

struct wbuf {
	char *p;             /* cap bytes, page-aligned */
	size_t used;         /* filling: bytes in it; busy: bytes being written */
	uint64_t at;         /* busy: the file offset they go to */
	bool busy;           /* a write of it is in flight */
};

struct rdps_blob_writer {
	char *path;          /* final name */
	char *tmp;           /* temporary name, NULL after commit */
	int fd;
	struct rdps_blob_header hdr;
	XXH3_state_t *xs;
	struct wbuf bufs[WRITER_BUFS];
	unsigned cur;        /* the buffer being filled */
	size_t cap;          /* bytes of each buffer */
	uint64_t at;         /* file offset of the current buffer's first byte */
	bool uring;          /* ring below is set up */
	struct io_uring ring;
	unsigned inflight;
	int failed;          /* a write failed (its -errno); commit refuses */
};

/* Reaps completions: one at least if wait (and any is in flight). A short
 * write (rare: disk full shows as an error) is finished synchronously.
 * -errno if the ring cannot be waited on (nothing more is queued then). */
static int writer_reap(struct rdps_blob_writer *w, bool wait)
{
	struct io_uring_cqe *cqe;

	if (!w->inflight)
		return 0;
	if (wait) {
		int ret = io_uring_wait_cqe(&w->ring, &cqe);

		if (ret < 0 && ret != -EINTR) {
			if (!w->failed)
				w->failed = ret;
			return ret;
		}
	}
	while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
		struct wbuf *b = &w->bufs[io_uring_cqe_get_data64(cqe)];
		int res = cqe->res;

		io_uring_cqe_seen(&w->ring, cqe);
		w->inflight--;
		b->busy = false;
		if (res < 0) {
			if (!w->failed)
				w->failed = res;
		} else if ((size_t)res < b->used && !w->failed) {
			int r = write_all(w->fd, b->p + res, b->used - (size_t)res,
					  (off_t)(b->at + (size_t)res));

			if (r)
				w->failed = r;
		}
		b->used = 0;
	}
	return 0;
}

/* Hands the current buffer to the disk and moves to the next one, waiting
 * for its earlier write if it is still in flight. */
static int writer_flush(struct rdps_blob_writer *w)
{
	struct wbuf *b = &w->bufs[w->cur];
	int ret;

	if (w->failed)
		return w->failed;
	if (!b->used)
		return 0;
	b->at = w->at;
	w->at += b->used;
	if (!w->uring) {
		ret = write_all(w->fd, b->p, b->used, (off_t)b->at);
		b->used = 0;
		if (ret)
			w->failed = ret;
		return ret;
	}
	{
		struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

		if (!sqe) {
			writer_reap(w, true);
			sqe = io_uring_get_sqe(&w->ring);
		}
		if (!sqe)
			return w->failed = -EBUSY;
		io_uring_prep_write(sqe, w->fd, b->p, (unsigned)b->used, b->at);
		io_uring_sqe_set_data64(sqe, w->cur);
		b->busy = true;
		w->inflight++;
		ret = io_uring_submit(&w->ring);
		if (ret < 0)
			return w->failed = ret;
	}
	w->cur = (w->cur + 1) % WRITER_BUFS;
	while (w->bufs[w->cur].busy && !writer_reap(w, true))
		;
	writer_reap(w, false);
	return w->failed;
}

int rdps_loader_writer_create(const char *path, uint32_t kind,
			      uint32_t record_size, uint32_t id_width,
			      uint32_t part, size_t buffer_bytes,
			      struct rdps_blob_writer **out)
{
	struct rdps_blob_writer *w;
	int ret;

	*out = NULL;
	if (!record_size)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->cap = buffer_bytes ? buffer_bytes : (1u << 20);
	if (w->cap < record_size)
		w->cap = record_size;
	w->cap = RDPS_ALIGN_UP(w->cap, (size_t)4096);
	w->path = strdup(path);
	w->xs = XXH3_createState();
	if (!w->path || !w->xs || asprintf(&w->tmp, "%s.tmp-XXXXXX", path) < 0) {
		w->tmp = NULL;
		ret = -ENOMEM;
		goto err_destroy;
	}
	for (unsigned i = 0; i < WRITER_BUFS; i++)
		if (posix_memalign((void **)&w->bufs[i].p, 4096, w->cap)) {
			ret = -ENOMEM;
			goto err_destroy;
		}
	w->fd = mkostemp(w->tmp, O_CLOEXEC);
	if (w->fd < 0) {
		ret = -errno;
		free(w->tmp);
		w->tmp = NULL;
		goto err_destroy;
	}
	fchmod(w->fd, 0644);
	/* No io_uring here (an old kernel, seccomp): pwrite instead. */
	w->uring = !io_uring_queue_init(WRITER_BUFS + 1, &w->ring, 0);
	XXH3_64bits_reset(w->xs);
	memcpy(w->hdr.magic, RDPS_BLOB_MAGIC, sizeof(w->hdr.magic));
	w->hdr.version = RDPS_BLOB_VERSION;
	w->hdr.kind = kind;
	w->hdr.record_size = record_size;
	w->hdr.id_width = id_width;
	w->hdr.part = part;
	w->at = sizeof(w->hdr);
	*out = w;
	return 0;

err_destroy:
	rdps_loader_writer_destroy(w);
	return ret;
}

uint64_t rdps_loader_writer_space(struct rdps_blob_writer *w, uint64_t min, void **at)
{
	struct wbuf *b = &w->bufs[w->cur];

	if (w->failed || !w->tmp || !min || min > w->cap / w->hdr.record_size)
		return 0;
	if ((w->cap - b->used) / w->hdr.record_size < min) {
		if (writer_flush(w))
			return 0;
		b = &w->bufs[w->cur];
	}
	*at = b->p + b->used;
	return (w->cap - b->used) / w->hdr.record_size;
}

int rdps_loader_writer_advance(struct rdps_blob_writer *w, uint64_t n)
{
	struct wbuf *b = &w->bufs[w->cur];
	size_t bytes = (size_t)n * w->hdr.record_size;

	if (w->failed || !w->tmp)
		return w->failed ? w->failed : -EIO;
	if (bytes > w->cap - b->used)
		return -EINVAL;
	XXH3_64bits_update(w->xs, b->p + b->used, bytes);
	b->used += bytes;
	w->hdr.count += n;
	w->hdr.payload_bytes += bytes;
	return b->used == w->cap ? writer_flush(w) : 0;
}

int rdps_loader_writer_append(struct rdps_blob_writer *w, const void *records,
			      uint64_t n)
{
	const char *p = records;

	while (n) {
		void *at;
		uint64_t fit = rdps_loader_writer_space(w, 1, &at), take = n < fit ? n : fit;
		int ret;

		if (!fit)
			return w->failed ? w->failed : -EIO;
		memcpy(at, p, (size_t)take * w->hdr.record_size);
		ret = rdps_loader_writer_advance(w, take);
		if (ret)
			return ret;
		p += (size_t)take * w->hdr.record_size;
		n -= take;
	}
	return 0;
}

uint64_t rdps_loader_writer_count(const struct rdps_blob_writer *w)
{
	return w->hdr.count;
}

int rdps_loader_writer_commit(struct rdps_blob_writer *w, uint64_t *xxh3)
{
	int ret;

	if (w->failed || !w->tmp)
		return w->failed ? w->failed : -EIO;
	ret = writer_flush(w);
	while (w->inflight && !writer_reap(w, true))
		;
	if (!ret)
		ret = w->failed;
	if (ret)
		return ret;
	w->hdr.payload_xxh3 = XXH3_64bits_digest(w->xs);
	w->hdr.header_xxh3 = rdps_blob_header_hash(&w->hdr);
	ret = write_all(w->fd, &w->hdr, sizeof(w->hdr), 0);
	if (!ret && fsync(w->fd))
		ret = -errno;
	/* Closed whatever happened: a failed commit must not pin the
	 * (soon unlinked) file's blocks. */
	if (close(w->fd) && !ret)
		ret = -errno;
	w->fd = -1;
	if (!ret && rename(w->tmp, w->path))
		ret = -errno;
	if (ret) {
		w->failed = ret;
		return ret;
	}
	free(w->tmp);
	w->tmp = NULL;
	if (xxh3)
		*xxh3 = w->hdr.payload_xxh3;
	return 0;
}

void rdps_loader_writer_destroy(struct rdps_blob_writer *w)
{
	if (!w)
		return;
	/* No write may still point into the buffers freed below. */
	while (w->uring && w->inflight && !writer_reap(w, true))
		;
	if (w->uring)
		io_uring_queue_exit(&w->ring);
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp)
		unlink(w->tmp);
	free(w->tmp);
	XXH3_freeState(w->xs);
	for (unsigned i = 0; i < WRITER_BUFS; i++)
		free(w->bufs[i].p);
	free(w->path);
	free(w);
}

/* ---------------------------------------------------------------------- */
/* One-shot blob writer with io_uring (a payload already in memory).       */

/* Writes len bytes of buf at offset 0 of fd with up to WRITE_QD chunk
 * writes in flight, then an fsync through the same ring. After a failure
 * it queues nothing more but reaps what is in flight before returning:
 * no request refers to buf or fd (or holds the file open) afterwards. */
static int write_fsync_uring(struct io_uring *ring, int fd, const char *buf, size_t len)
{
	size_t next = 0, inflight = 0;
	bool fsync_queued = false;
	int failed = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		int ret;

		while (!failed && next < len && inflight < WRITE_QD) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			size_t n = len - next < WRITE_CHUNK ? len - next : WRITE_CHUNK;

			if (!sqe)
				break;
			io_uring_prep_write(sqe, fd, buf + next, (unsigned)n, (uint64_t)next);
			io_uring_sqe_set_data64(sqe, ((uint64_t)next << 1));
			next += n;
			inflight++;
		}
		/* Every write done: now the data is durable only after fsync. */
		if (!failed && next == len && !inflight && !fsync_queued) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

			if (!sqe)
				return -EBUSY;
			io_uring_prep_fsync(sqe, fd, 0);
			io_uring_sqe_set_data64(sqe, 1);
			fsync_queued = true;
			inflight++;
		}
		if (!inflight)
			return failed;
		ret = io_uring_submit_and_wait(ring, 1);
		if (ret < 0 && ret != -EINTR)
			return failed ? failed : ret; /* cannot reap: the ring's exit cancels */
		while (io_uring_peek_cqe(ring, &cqe) == 0) {
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;

			io_uring_cqe_seen(ring, cqe);
			inflight--;
			if (failed)
				continue;
			if (res < 0) {
				failed = res;
				continue;
			}
			if (tag == 1)
				return 0; /* the fsync: everything before it is durable */
			if (!(tag & 1)) {
				size_t off = tag >> 1;
				size_t want = len - off < WRITE_CHUNK ? len - off : WRITE_CHUNK;

				/* A short write is rare (disk full shows as an
				 * error); finish it synchronously. */
				if ((size_t)res < want) {
					int r = write_all(fd, buf + off + res, want - (size_t)res,
							  (off_t)(off + (size_t)res));

					if (r)
						failed = r;
				}
			}
		}
	}
}

int rdps_loader_write_blob(const char *path, uint32_t kind, uint32_t record_size,
			   uint32_t id_width, const void *payload, uint64_t count,
			   uint64_t *xxh3, char *err, size_t errlen)
{
	struct rdps_blob_header hdr;
	size_t bytes = (size_t)count * record_size, len = sizeof(hdr) + bytes;
	struct io_uring ring;
	char *tmp = NULL, *buf = NULL;
	int fd = -1, ret;

	memset(&hdr, 0, sizeof(hdr));
	memcpy(hdr.magic, RDPS_BLOB_MAGIC, sizeof(hdr.magic));
	hdr.version = RDPS_BLOB_VERSION;
	hdr.kind = kind;
	hdr.count = count;
	hdr.record_size = record_size;
	hdr.id_width = id_width;
	hdr.part = RDPS_BLOB_NO_PART;
	hdr.payload_bytes = bytes;
	hdr.payload_xxh3 = XXH3_64bits(payload, bytes);
	hdr.header_xxh3 = rdps_blob_header_hash(&hdr);
	/* One aligned buffer: header then payload, written in big chunks. */
	if (posix_memalign((void **)&buf, 4096, len ? len : 1))
		return rdps_pt_fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), payload, bytes);
	if (asprintf(&tmp, "%s.tmp-XXXXXX", path) < 0) {
		free(buf);
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: cannot create a temporary file: %s",
				   path, strerror(errno));
		goto out;
	}
	ret = io_uring_queue_init(WRITE_QD + 1, &ring, 0);
	if (!ret) {
		ret = write_fsync_uring(&ring, fd, buf, len);
		io_uring_queue_exit(&ring);
	} else {
		/* No io_uring here: the same bytes with pwrite and fsync. */
		ret = write_all(fd, buf, len, 0);
		if (!ret && fsync(fd))
			ret = -errno;
	}
	/* Closed on failure too: a descriptor kept would pin the unlinked
	 * file's blocks, and a full disk would stay full. */
	if (close(fd) && !ret)
		ret = -errno;
	fd = -1;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		rdps_pt_fail(err, errlen, ret, "%s: writing failed: %s", path, strerror(-ret));
		unlink(tmp);
		goto out;
	}
	if (xxh3)
		*xxh3 = hdr.payload_xxh3;
out:
	free(tmp);
	free(buf);
	return ret;
}
