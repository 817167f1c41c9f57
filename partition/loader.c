// SPDX-License-Identifier: MIT
/* Checksummed blob files: io_uring loader with pread fallback, and the
 * streaming writer. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/partition.h"

/* 512 KiB x 8 in flight, each read punted to io-wq (IOSQE_ASYNC): the
 * workers fault in the fresh buffer and copy out of the page cache on the
 * other cores while this thread hashes finished chunks. Inline completion
 * (no IOSQE_ASYNC) runs every copy as task_work on this thread, serially,
 * and was slower than pread cold (0.76x); this layout gave 1.05-1.23x pread
 * cold and 1.37-1.59x warm on a 2-core VM (perf/report.md, "Loading
 * partitions"). */
#define DEFAULT_CHUNK (512u << 10)
#define DEFAULT_QD 8u
#define MAX_QD 256u

static atomic_int uring_warned;

struct chunk_state {
	uint64_t done;  /* bytes of this chunk read so far */
	uint64_t len;   /* bytes in this chunk */
};

struct range_read {
	int fd;
	const char *path;
	uint64_t off;       /* file offset of buf[0] */
	char *buf;
	uint64_t len;
	size_t chunk;
	unsigned qd;
	unsigned sqe_flags; /* IOSQE_ASYNC where the kernel has it */
	XXH3_state_t *xs;   /* NULL: no hashing */
};

static int read_range_pread(struct range_read *r, char *err, size_t errlen)
{
	uint64_t pos = 0;

	while (pos < r->len) {
		uint64_t want = r->len - pos < r->chunk ? r->len - pos : r->chunk;
		uint64_t got = 0;

		while (got < want) {
			ssize_t n = pread(r->fd, r->buf + pos + got, want - got,
					  (off_t)(r->off + pos + got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return rdps_pt_fail(err, errlen, -errno, "%s: read: %s",
						    r->path, strerror(errno));
			if (n == 0)
				return rdps_pt_fail(err, errlen, -EIO,
						    "%s: truncated while reading (file shrank?)",
						    r->path);
			got += (uint64_t)n;
		}
		if (r->xs)
			XXH3_64bits_update(r->xs, r->buf + pos, want);
		pos += want;
	}
	return 0;
}

static void queue_read(struct io_uring *ring, struct range_read *r,
		       struct chunk_state *cs, uint64_t c)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	uint64_t at = c * r->chunk + cs[c].done;

	/* The ring has qd entries and at most qd reads are outstanding, so
	 * an sqe is always available here. */
	io_uring_prep_read(sqe, r->fd, r->buf + at, (unsigned)(cs[c].len - cs[c].done),
			   r->off + at);
	io_uring_sqe_set_flags(sqe, r->sqe_flags);
	io_uring_sqe_set_data64(sqe, c);
}

/*
 * Reads [off, off+len) with up to qd chunk reads in flight. Chunks finish in
 * any order; the hash advances over the contiguous prefix of finished chunks
 * as soon as it grows, so checksumming overlaps the remaining reads.
 */
static int read_range_uring(struct io_uring *ring, struct range_read *r,
			    char *err, size_t errlen)
{
	uint64_t nchunks = (r->len + r->chunk - 1) / r->chunk;
	uint64_t next = 0, hashed = 0;
	unsigned inflight = 0;
	struct chunk_state *cs;
	int ret = 0;

	cs = calloc(nchunks ? nchunks : 1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	for (uint64_t c = 0; c < nchunks; c++)
		cs[c].len = c + 1 < nchunks ? r->chunk : r->len - c * r->chunk;
	while (hashed < nchunks) {
		struct io_uring_cqe *cqe;
		uint64_t c;
		int res;

		while (!ret && next < nchunks && inflight < r->qd) {
			queue_read(ring, r, cs, next++);
			inflight++;
		}
		if (!inflight)
			break;
		res = io_uring_submit_and_wait(ring, 1);
		if (res < 0 && res != -EINTR) {
			ret = rdps_pt_fail(err, errlen, res, "%s: io_uring submit: %s",
					   r->path, strerror(-res));
			break;
		}
		res = io_uring_wait_cqe(ring, &cqe);
		if (res < 0) {
			if (res == -EINTR)
				continue;
			ret = rdps_pt_fail(err, errlen, res, "%s: io_uring wait: %s",
					   r->path, strerror(-res));
			break;
		}
		c = io_uring_cqe_get_data64(cqe);
		res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		inflight--;
		if (ret)
			continue; /* draining after an error */
		if (res == -EINTR || res == -EAGAIN) {
			queue_read(ring, r, cs, c);
			inflight++;
			continue;
		}
		if (res < 0) {
			ret = rdps_pt_fail(err, errlen, res, "%s: read: %s", r->path,
					   strerror(-res));
			continue;
		}
		if (res == 0) {
			ret = rdps_pt_fail(err, errlen, -EIO,
					   "%s: truncated while reading (file shrank?)", r->path);
			continue;
		}
		cs[c].done += (uint64_t)res;
		if (cs[c].done < cs[c].len) { /* short read: ask for the rest */
			queue_read(ring, r, cs, c);
			inflight++;
			continue;
		}
		while (hashed < nchunks && cs[hashed].done == cs[hashed].len) {
			if (r->xs)
				XXH3_64bits_update(r->xs, r->buf + hashed * r->chunk,
						   cs[hashed].len);
			hashed++;
		}
	}
	/* Never free the buffer with reads in flight. */
	while (inflight) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(ring, &cqe) == 0) {
			io_uring_cqe_seen(ring, cqe);
			inflight--;
		} else {
			io_uring_submit(ring);
		}
	}
	free(cs);
	return ret;
}

static void resolve_opts(const struct rdps_loader_opts *o, size_t *chunk,
			 unsigned *qd, int *force_pread)
{
	*chunk = o && o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
	if (*chunk < 4096)
		*chunk = 4096;
	if (*chunk > (1u << 30))
		*chunk = 1u << 30;
	*chunk &= ~(size_t)4095;
	*qd = o && o->queue_depth ? o->queue_depth : DEFAULT_QD;
	if (*qd > MAX_QD)
		*qd = MAX_QD;
	*force_pread = o ? o->force_pread : 0;
}

/* Reads [off, off+len) of fd into buf, hashing into xs. *used_uring tells
 * which path ran. */
static int read_range(int fd, const char *path, uint64_t off, void *buf,
		      uint64_t len, const struct rdps_loader_opts *o,
		      XXH3_state_t *xs, int *used_uring, char *err, size_t errlen)
{
	struct range_read r = { .fd = fd, .path = path, .off = off, .buf = buf,
				.len = len, .xs = xs };
	struct io_uring ring;
	int force_pread, ret;

	resolve_opts(o, &r.chunk, &r.qd, &force_pread);
	*used_uring = 0;
	if (len == 0)
		return 0;
	if (!force_pread) {
		unsigned qd = r.qd;
		uint64_t nchunks = (len + r.chunk - 1) / r.chunk;

		if (nchunks < qd)
			qd = (unsigned)nchunks;
		r.qd = qd;
		ret = io_uring_queue_init(qd, &ring, 0);
		if (ret == 0) {
			/* IOSQE_ASYNC came in 5.6, FAST_POLL in 5.7 */
			if (ring.features & IORING_FEAT_FAST_POLL)
				r.sqe_flags = IOSQE_ASYNC;
			*used_uring = 1;
			ret = read_range_uring(&ring, &r, err, errlen);
			io_uring_queue_exit(&ring);
			return ret;
		}
		if (!atomic_exchange(&uring_warned, 1))
			rdps_warn("loader: io_uring unavailable (%s); using pread",
				  strerror(-ret));
	}
	return read_range_pread(&r, err, errlen);
}

/*
 * The buffer a file is read into. From 2 MiB on it is backed by huge pages
 * where the kernel has them (transparent huge pages, "madvise" included):
 * every 4 KiB page of a fresh buffer faults when the read first writes it,
 * and on a virtual machine a fault costs microseconds (measured: reading a
 * 57 MB part file from the page cache ran at 0.35 GB/s, most of it in page
 * faults, against 9.6 GB/s for dd into a reused buffer).
 */
#define HUGE_PAGE (2u << 20)

static int alloc_buf(void **buf, uint64_t len)
{
	size_t align = len >= HUGE_PAGE ? HUGE_PAGE : 4096;
	size_t sz;

	if (len > SIZE_MAX - HUGE_PAGE)
		return -ENOMEM;
	sz = RDPS_ALIGN_UP(len ? len : 1, align);
	if (posix_memalign(buf, align, sz))
		return -ENOMEM;
	if (align == HUGE_PAGE)
		madvise(*buf, sz, MADV_HUGEPAGE); /* advice: small pages work too */
	return 0;
}

int rdps_loader_read_file(const char *path, const struct rdps_loader_opts *o,
			  void **buf, size_t *len, uint64_t *xxh3, char *err,
			  size_t errlen)
{
	XXH3_state_t *xs = NULL;
	struct stat st;
	int fd, used, ret;

	*buf = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto err_close;
	}
	ret = alloc_buf(buf, (uint64_t)st.st_size);
	if (ret)
		goto err_close;
	if (xxh3) {
		xs = XXH3_createState();
		if (!xs) {
			ret = -ENOMEM;
			goto err_free;
		}
		XXH3_64bits_reset(xs);
	}
	ret = read_range(fd, path, 0, *buf, (uint64_t)st.st_size, o, xs, &used, err,
			 errlen);
	if (ret)
		goto err_free;
	if (xxh3)
		*xxh3 = XXH3_64bits_digest(xs);
	*len = (size_t)st.st_size;
	XXH3_freeState(xs);
	close(fd);
	return 0;

err_free:
	XXH3_freeState(xs);
	free(*buf);
	*buf = NULL;
err_close:
	close(fd);
	return ret;
}

uint64_t rdps_blob_header_hash(const struct rdps_blob_header *h)
{
	return XXH3_64bits(h, offsetof(struct rdps_blob_header, header_xxh3));
}

int rdps_loader_load(const char *path, uint32_t kind,
		     const struct rdps_loader_opts *o, struct rdps_blob *out,
		     char *err, size_t errlen)
{
	struct rdps_blob_header *h = &out->hdr;
	XXH3_state_t *xs;
	struct stat st;
	uint64_t sum;
	ssize_t n;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto err_close;
	}
	n = pread(fd, h, sizeof(*h), 0);
	if (n < 0) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto err_close;
	}
	if ((size_t)n < sizeof(*h)) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: truncated: %zd bytes, shorter than the %zu-byte header",
				   path, n, sizeof(*h));
		goto err_close;
	}
	if (memcmp(h->magic, RDPS_BLOB_MAGIC, sizeof(h->magic))) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field magic: not an rdps blob file", path);
		goto err_close;
	}
	if (h->header_xxh3 != rdps_blob_header_hash(h)) {
		ret = rdps_pt_fail(err, errlen, -EBADMSG,
				   "%s: field header_xxh3: header checksum mismatch (corrupt header)",
				   path);
		goto err_close;
	}
	if (h->version != RDPS_BLOB_VERSION) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field version: blob version %u is not supported (this build reads %u)",
				   path, h->version, RDPS_BLOB_VERSION);
		goto err_close;
	}
	if (kind && h->kind != kind) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field kind: %u, expected %u", path, h->kind, kind);
		goto err_close;
	}
	if (!h->record_size || h->count > UINT64_MAX / h->record_size ||
	    h->payload_bytes != h->count * h->record_size) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field payload_bytes: %llu != count %llu * record_size %u",
				   path, (unsigned long long)h->payload_bytes,
				   (unsigned long long)h->count, h->record_size);
		goto err_close;
	}
	if ((uint64_t)st.st_size < sizeof(*h) + h->payload_bytes) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: truncated: %lld bytes, header says %llu",
				   path, (long long)st.st_size,
				   (unsigned long long)(sizeof(*h) + h->payload_bytes));
		goto err_close;
	}
	if ((uint64_t)st.st_size > sizeof(*h) + h->payload_bytes) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: %lld bytes, header says %llu (trailing data)",
				   path, (long long)st.st_size,
				   (unsigned long long)(sizeof(*h) + h->payload_bytes));
		goto err_close;
	}
	ret = alloc_buf(&out->data, h->payload_bytes);
	if (ret)
		goto err_close;
	xs = XXH3_createState();
	if (!xs) {
		ret = -ENOMEM;
		goto err_free;
	}
	XXH3_64bits_reset(xs);
	ret = read_range(fd, path, sizeof(*h), out->data, h->payload_bytes, o, xs,
			 &out->used_uring, err, errlen);
	sum = XXH3_64bits_digest(xs);
	XXH3_freeState(xs);
	if (ret)
		goto err_free;
	if (sum != h->payload_xxh3) {
		ret = rdps_pt_fail(err, errlen, -EBADMSG,
				   "%s: field payload_xxh3: checksum mismatch (file %016llx, data %016llx): corrupt payload",
				   path, (unsigned long long)h->payload_xxh3,
				   (unsigned long long)sum);
		goto err_free;
	}
	close(fd);
	return 0;

err_free:
	free(out->data);
	out->data = NULL;
err_close:
	close(fd);
	return ret;
}

void rdps_loader_blob_free(struct rdps_blob *b)
{
	if (!b)
		return;
	free(b->data);
	memset(b, 0, sizeof(*b));
}
