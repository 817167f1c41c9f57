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

static uint64_t header_hash(const struct rdps_blob_header *h)
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
	if (h->header_xxh3 != header_hash(h)) {
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

/* ---------------------------------------------------------------------- */

struct rdps_blob_writer {
	char *path;          /* final name */
	char *tmp;           /* temporary name, NULL after commit */
	int fd;
	struct rdps_blob_header hdr;
	XXH3_state_t *xs;
	char *buf;
	size_t used;
	size_t cap;
	int failed;          /* a write failed; commit refuses */
};

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

static int writer_flush(struct rdps_blob_writer *w)
{
	off_t at = (off_t)(sizeof(w->hdr) + w->hdr.payload_bytes - w->used);
	int ret;

	if (!w->used)
		return 0;
	ret = write_all(w->fd, w->buf, w->used, at);
	if (ret) {
		w->failed = 1;
		return ret;
	}
	w->used = 0;
	return 0;
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
	w->path = strdup(path);
	w->buf = malloc(w->cap);
	w->xs = XXH3_createState();
	if (!w->path || !w->buf || !w->xs || asprintf(&w->tmp, "%s.tmp-XXXXXX", path) < 0) {
		w->tmp = NULL;
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
	XXH3_64bits_reset(w->xs);
	memcpy(w->hdr.magic, RDPS_BLOB_MAGIC, sizeof(w->hdr.magic));
	w->hdr.version = RDPS_BLOB_VERSION;
	w->hdr.kind = kind;
	w->hdr.record_size = record_size;
	w->hdr.id_width = id_width;
	w->hdr.part = part;
	*out = w;
	return 0;

err_destroy:
	rdps_loader_writer_destroy(w);
	return ret;
}

int rdps_loader_writer_append(struct rdps_blob_writer *w, const void *records,
			      uint64_t n)
{
	const char *p = records;
	uint64_t bytes = n * w->hdr.record_size;
	int ret;

	if (w->failed || !w->tmp)
		return -EIO;
	XXH3_64bits_update(w->xs, p, bytes);
	w->hdr.count += n;
	while (bytes) {
		size_t take = w->cap - w->used;

		if (take > bytes)
			take = bytes;
		memcpy(w->buf + w->used, p, take);
		w->used += take;
		w->hdr.payload_bytes += take;
		p += take;
		bytes -= take;
		if (w->used == w->cap && (ret = writer_flush(w)))
			return ret;
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
		return -EIO;
	ret = writer_flush(w);
	if (ret)
		return ret;
	w->hdr.payload_xxh3 = XXH3_64bits_digest(w->xs);
	w->hdr.header_xxh3 = header_hash(&w->hdr);
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
		w->failed = 1;
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
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp)
		unlink(w->tmp);
	free(w->tmp);
	XXH3_freeState(w->xs);
	free(w->buf);
	free(w->path);
	free(w);
}

/* ---------------------------------------------------------------------- */
/* One-shot blob writer with io_uring (checkpoints).                       */

#define WRITE_CHUNK (2u << 20)
#define WRITE_QD 16u

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
	hdr.header_xxh3 = header_hash(&hdr);
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
