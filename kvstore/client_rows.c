// SPDX-License-Identifier: MIT
/* The client's rows: ids routed to servers with the range book and grouped
 * per server, pulls (batched, overlapped over servers), pushes and
 * flushes, rows of any dtype (get/set). Scratch buffers grow to the largest
 * batch seen and are then reused, so steady state allocates nothing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "rdps/client.h"
#include "rdps/common.h"

uint32_t rdps_client_locate(const struct rdps_client *c, uint32_t table, uint64_t id)
{
	return rdps_book_part(&c->books[table], id);
}

/*
 * Finds each id's server and the per-server segments (in rb). If ids already
 * come grouped by server in server order (the common case for sorted
 * batches), the segments are ranges of the caller's arrays and *grouped
 * stays 0; otherwise ids are counting-sorted into rb->ids_sorted with
 * rb->perm.
 */
static int route_into(struct rdps_client *c, struct route_buf *rb, uint32_t table,
		      const uint64_t *ids, size_t n, int *grouped)
{
	const struct rdps_book *b;
	uint64_t rows;
	uint32_t prev = 0;
	size_t bytes;
	int ret, in_order = 1;

	if (table >= c->num_tables) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u (servers have %u)",
			 table, c->num_tables);
		return -ENOENT;
	}
	b = &c->books[table];
	rows = c->tables[table].num_rows;
	bytes = c->srv_of_cap * sizeof(uint32_t);
	ret = rdps_reserve((void **)&c->srv_of, &bytes, n * sizeof(uint32_t));
	if (ret)
		return ret;
	c->srv_of_cap = bytes / sizeof(uint32_t);
	memset(rb->start, 0, (c->num_servers + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		uint32_t s;

		if (rdps_unlikely(ids[i] >= rows)) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "id %llu is out of range for table '%s' of %llu rows",
				 (unsigned long long)ids[i], c->tables[table].name,
				 (unsigned long long)rows);
			return -ERANGE;
		}
		s = c->num_servers == 1 ? 0 : rdps_book_part(b, ids[i]);
		c->srv_of[i] = s;
		rb->start[s + 1]++;
		in_order &= s >= prev;
		prev = s;
	}
	for (uint32_t s = 0; s < c->num_servers; s++)
		rb->start[s + 1] += rb->start[s];
	*grouped = !in_order;
	if (in_order)
		return 0;
	bytes = rb->ids_cap * sizeof(uint64_t);
	if ((ret = rdps_reserve((void **)&rb->ids_sorted, &bytes, n * sizeof(uint64_t))))
		return ret;
	rb->ids_cap = bytes / sizeof(uint64_t);
	bytes = rb->perm_cap * sizeof(uint32_t);
	if ((ret = rdps_reserve((void **)&rb->perm, &bytes, n * sizeof(uint32_t))))
		return ret;
	rb->perm_cap = bytes / sizeof(uint32_t);
	memcpy(rb->cursor, rb->start, c->num_servers * sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		size_t pos = rb->cursor[c->srv_of[i]]++;

		rb->ids_sorted[pos] = ids[i];
		rb->perm[pos] = (uint32_t)i;
	}
	return 0;
}

/* route_into() the client's own scratch (c->start, c->cursor, c->ids_sorted,
 * c->perm), as pushes use it. */
static int route(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		 size_t n, int *grouped)
{
	struct route_buf rb = { c->start, c->cursor, c->ids_sorted, c->ids_cap, c->perm,
				c->perm_cap };
	int ret = route_into(c, &rb, table, ids, n, grouped);

	c->ids_sorted = rb.ids_sorted;
	c->ids_cap = rb.ids_cap;
	c->perm = rb.perm;
	c->perm_cap = rb.perm_cap;
	return ret;
}

static size_t chunk_rows(uint32_t dim)
{
	size_t r = CLIENT_MAX_REQ_BYTES / ((size_t)dim * 4 + 8);

	return r < CLIENT_MAX_REQ_ROWS ? r : CLIENT_MAX_REQ_ROWS;
}

int rdps_client_pull_batch_create(struct rdps_client *c, struct rdps_pull_batch **out)
{
	struct rdps_pull_batch *b = calloc(1, sizeof(*b));
	uint32_t ns = c->num_servers;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	b->c = c;
	b->posted = calloc(ns, sizeof(*b->posted));
	if (!b->posted)
		goto err_free;
	for (uint32_t i = 0; i < RDPS_PULL_BATCH_MAX; i++) {
		struct route_buf *rb = &b->parts[i].rb;

		rb->start = calloc(ns + 1, sizeof(size_t));
		rb->cursor = calloc(ns, sizeof(size_t));
		if (!rb->start || !rb->cursor)
			goto err_free;
	}
	*out = b;
	return 0;

err_free:
	rdps_client_pull_batch_destroy(b);
	return -ENOMEM;
}

/* Posts the batch's rows not yet posted, up to CLIENT_POST_DEPTH requests
 * per server since its last wait; parts in the order they were started. The
 * first failure stops posting and is kept for finish. */
static void batch_post(struct rdps_pull_batch *b)
{
	struct rdps_client *c = b->c;

	for (uint32_t s = 0; s < c->num_servers && !b->err; s++) {
		for (uint32_t i = 0; i < b->nparts && !b->err; i++) {
			struct pull_part *p = &b->parts[i];
			size_t chunk = chunk_rows(p->dim), end = p->rb.start[s + 1];

			while (b->posted[s] < CLIENT_POST_DEPTH && p->rb.cursor[s] < end) {
				size_t pos = p->rb.cursor[s], m = end - pos;
				int ret;

				if (m > chunk)
					m = chunk;
				ret = c->ops->pull_post(c->conns[s], p->table, p->src + pos,
							(uint32_t)m, p->dst + pos * p->dim);
				if (ret) {
					b->err = rdps_cl_conn_fail(c, ret, s);
					break;
				}
				b->posted[s]++;
				p->rb.cursor[s] += m;
			}
		}
	}
}

/* Waits for every server with posted pulls (all of them, even after a
 * failure: a connection is left with none pending). */
static void batch_wait(struct rdps_pull_batch *b)
{
	struct rdps_client *c = b->c;

	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret;

		if (!b->posted[s])
			continue;
		b->posted[s] = 0;
		ret = c->ops->pull_wait(c->conns[s]);
		if (ret && !b->err)
			b->err = rdps_cl_conn_fail(c, ret, s);
	}
}

static bool batch_all_posted(const struct rdps_pull_batch *b)
{
	for (uint32_t i = 0; i < b->nparts; i++)
		for (uint32_t s = 0; s < b->c->num_servers; s++)
			if (b->parts[i].rb.cursor[s] < b->parts[i].rb.start[s + 1])
				return false;
	return true;
}

/* Waits, posts the next rounds and waits again until every row is in. */
static void batch_complete(struct rdps_pull_batch *b)
{
	for (;;) {
		batch_wait(b);
		if (b->err || batch_all_posted(b))
			return;
		batch_post(b);
	}
}

static void batch_reset(struct rdps_pull_batch *b)
{
	b->nparts = 0;
	b->err = 0;
	if (b->c->busy == b)
		b->c->busy = NULL;
}

void rdps_client_pull_batch_destroy(struct rdps_pull_batch *b)
{
	if (!b)
		return;
	if (b->c && b->c->busy == b) {
		batch_wait(b); /* the transports must not write into freed rows */
		batch_reset(b);
	}
	for (uint32_t i = 0; i < RDPS_PULL_BATCH_MAX; i++) {
		struct pull_part *p = &b->parts[i];

		free(p->rb.start);
		free(p->rb.cursor);
		free(p->rb.ids_sorted);
		free(p->rb.perm);
		free(p->rows);
	}
	free(b->posted);
	free(b);
}

int rdps_client_pull_start(struct rdps_client *c, struct rdps_pull_batch *b, uint32_t table,
			   const uint64_t *ids, size_t n, float *out)
{
	struct pull_part *p;
	int ret;

	if (b->c != c)
		return rdps_cl_fail(c, -EINVAL, "pull batch of another client%s", "");
	if (c->busy && c->busy != b)
		return rdps_cl_fail(c, -EBUSY, "another pull batch is in flight on this client: "
			    "finish it first%s", "");
	if (!b->nparts && rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return rdps_cl_fail(c, -EINVAL, "a pull of more than 2^32 rows%s", "");
	if (b->nparts == RDPS_PULL_BATCH_MAX) {
		snprintf(c->errmsg, sizeof(c->errmsg), "a pull batch holds at most %u pulls: "
			 "finish it first", RDPS_PULL_BATCH_MAX);
		return -ENOSPC;
	}
	p = &b->parts[b->nparts];
	ret = route_into(c, &p->rb, table, ids, n, &p->grouped);
	if (ret)
		return ret;
	p->table = table;
	p->dim = c->tables[table].dim;
	p->n = n;
	p->out = out;
	p->src = ids;
	p->dst = out;
	if (p->grouped) {
		size_t bytes = p->rows_cap * sizeof(float);

		ret = rdps_reserve((void **)&p->rows, &bytes, n * p->dim * sizeof(float));
		if (ret)
			return ret;
		p->rows_cap = bytes / sizeof(float);
		p->src = p->rb.ids_sorted;
		p->dst = p->rows;
	}
	memcpy(p->rb.cursor, p->rb.start, c->num_servers * sizeof(size_t));
	b->nparts++;
	c->busy = b;
	/* After a failure, finish reads the whole batch again (or reports it). */
	if (!b->err)
		batch_post(b);
	return 0;
}

int rdps_client_pull_finish(struct rdps_client *c, struct rdps_pull_batch *b)
{
	int ret;

	if (b->c != c)
		return rdps_cl_fail(c, -EINVAL, "pull batch of another client%s", "");
	if (!b->nparts)
		return 0;
	batch_complete(b);
	/* A pull is idempotent: after a reconnect, read the batch again. */
	for (int tries = 0; b->err && tries < 3 && c->reconnect_ms && rdps_cl_conn_lost(b->err); tries++) {
		if (rdps_cl_recover(c, b->err))
			break;
		b->err = 0;
		for (uint32_t i = 0; i < b->nparts; i++)
			memcpy(b->parts[i].rb.cursor, b->parts[i].rb.start,
			       c->num_servers * sizeof(size_t));
		batch_post(b);
		batch_complete(b);
	}
	ret = b->err;
	for (uint32_t i = 0; !ret && i < b->nparts; i++) {
		const struct pull_part *p = &b->parts[i];

		if (!p->grouped)
			continue;
		for (size_t k = 0; k < p->n; k++)
			memcpy(p->out + (size_t)p->rb.perm[k] * p->dim, p->rows + k * p->dim,
			       p->dim * sizeof(float));
	}
	batch_reset(b);
	return ret;
}

int rdps_client_pull(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     size_t n, float *out)
{
	int ret;

	if (c->busy)
		return rdps_cl_fail(c, -EBUSY, "a pull batch is in flight on this client: "
			    "finish it first%s", "");
	if (!c->own && (ret = rdps_client_pull_batch_create(c, &c->own)))
		return ret;
	ret = rdps_client_pull_start(c, c->own, table, ids, n, out);
	if (ret)
		return ret; /* nothing was started */
	return rdps_client_pull_finish(c, c->own);
}

/* A connection carrying pushes was lost: reconnect, and say what that cost. */
static int lost_pushes(struct rdps_client *c, int ret, uint32_t s)
{
	if (!c->reconnect_ms || !rdps_cl_conn_lost(ret))
		return ret;
	if (rdps_cl_reconnect(c, s))
		return ret;
	snprintf(c->errmsg, sizeof(c->errmsg), "reconnected to server %u; %s", s, c->lost_note);
	return -ECONNRESET;
}

int rdps_client_push(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		     const float *grads, size_t n)
{
	const uint64_t *src = ids;
	const uint32_t *index = NULL;
	const float *g = grads;
	uint32_t dim;
	size_t chunk;
	int grouped, ret;

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	ret = route(c, table, ids, n, &grouped);
	if (ret)
		return ret;
	dim = c->tables[table].dim;
	chunk = chunk_rows(dim);
	c->unflushed = true;
	if (grouped) {
		/* The backend reads each row where the caller keeps it. */
		src = c->ids_sorted;
		index = c->perm;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		for (size_t pos = c->start[s]; pos < c->start[s + 1];) {
			size_t m = c->start[s + 1] - pos;

			if (m > chunk)
				m = chunk;
			if (index)
				ret = c->ops->push_gather(c->conns[s], table, src + pos, g,
							  index + pos, (uint32_t)m);
			else
				ret = c->ops->push(c->conns[s], table, src + pos, g + pos * dim,
						   (uint32_t)m);
			if (ret)
				return lost_pushes(c, rdps_cl_conn_fail(c, ret, s), s);
			c->pushed[s] += m;
			pos += m;
		}
	}
	return 0;
}

int rdps_client_flush(struct rdps_client *c)
{
	int first = 0;

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	c->unflushed = false;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		int ret = c->ops->call(c->conns[s], RDPS_REQ_FLUSH, NULL, 0, NULL, 0, 0);

		if (ret)
			ret = lost_pushes(c, rdps_cl_conn_fail(c, ret, s), s);
		if (ret && !first)
			first = ret;
	}
	return first;
}

/* A table's row as the caller packs it (bytes) and as it travels (words). */
static int row_shape(struct rdps_client *c, uint32_t table, size_t *bytes, uint32_t *words)
{
	const struct rdps_table_desc *d;

	if (table >= c->num_tables || !c->tables[table].dim) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u", table);
		return -ENOENT;
	}
	d = &c->tables[table];
	*words = d->dim;
	*bytes = d->elems ? rdps_dtype_size((int)d->dtype) * d->elems : (size_t)d->dim * 4;
	return 0;
}

static int reserve_xbuf(struct rdps_client *c, size_t bytes)
{
	return rdps_reserve(&c->xbuf, &c->xcap, bytes ? bytes : 1);
}

int rdps_client_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
		    void *out)
{
	size_t bytes;
	uint32_t words;
	int ret = row_shape(c, table, &bytes, &words);

	if (ret)
		return ret;
	/* Rows of whole words land where the caller wants them. */
	if (bytes == (size_t)words * 4)
		return rdps_client_pull(c, table, ids, n, out);
	if ((ret = reserve_xbuf(c, n * words * 4)))
		return ret;
	ret = rdps_client_pull(c, table, ids, n, c->xbuf);
	for (size_t i = 0; !ret && i < n; i++)
		memcpy((char *)out + i * bytes, (char *)c->xbuf + i * words * 4, bytes);
	return ret;
}

int rdps_client_set(struct rdps_client *c, uint32_t table, const uint64_t *ids,
		    const void *rows, size_t n)
{
	size_t bytes, row, chunk;
	uint32_t words;
	const uint64_t *src = ids;
	const char *data = rows;
	int grouped, ret = row_shape(c, table, &bytes, &words);

	if (ret)
		return ret;
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	/* The rows travel on the control path: this client's pushes first. */
	if (c->unflushed && (ret = rdps_client_flush(c)))
		return ret;
	ret = route(c, table, ids, n, &grouped);
	if (ret)
		return ret;
	row = (size_t)words * 4;
	if (grouped || bytes != row) {
		/* Grouped by server, each row in whole words (zero-padded). */
		if ((ret = reserve_xbuf(c, n * row)))
			return ret;
		for (size_t i = 0; i < n; i++) {
			char *dst = (char *)c->xbuf + i * row;

			memcpy(dst, data + (size_t)(grouped ? c->perm[i] : i) * bytes, bytes);
			memset(dst + bytes, 0, row - bytes);
		}
		data = c->xbuf;
		if (grouped)
			src = c->ids_sorted;
	}
	chunk = chunk_rows(words);
	for (uint32_t s = 0; s < c->num_servers; s++) {
		for (size_t pos = c->start[s]; pos < c->start[s + 1];) {
			size_t m = c->start[s + 1] - pos;

			if (m > chunk)
				m = chunk;
			ret = c->ops->set(c->conns[s], table, src + pos, data + pos * row, (uint32_t)m);
			if (ret)
				return rdps_cl_conn_fail(c, ret, s);
			pos += m;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Optimizer state (saving and loading a sparse optimizer)                 */

int rdps_client_state_floats(const struct rdps_client *c, uint32_t table, uint32_t *per_row)
{
	const struct rdps_table_desc *d;

	if (table >= c->num_tables || !c->tables[table].dim)
		return -ENOENT;
	d = &c->tables[table];
	switch ((int)d->optimizer) {
	case RDPS_OPT_ADAGRAD_ROW:
		*per_row = 1; /* tables clients make are one part */
		return 0;
	case RDPS_OPT_ADAGRAD:
		*per_row = d->dim;
		return 0;
	case RDPS_OPT_ADAM:
		*per_row = 2 * d->dim + 1;
		return 0;
	default:
		*per_row = 0;
		return 0;
	}
}

/* Reads (in: NULL) or writes the state of ids into out / from in, server
 * by server over the two-sided call path, in requests within the frame
 * limit. */
static int state_move(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
		      float *out, const float *in)
{
	uint32_t spr;
	size_t chunk, row;
	int grouped, ret;

	if ((ret = rdps_client_state_floats(c, table, &spr)))
		return rdps_cl_fail(c, ret, "unknown table%s", "");
	if (!spr)
		return rdps_cl_fail(c, -EINVAL, "table '%s' has no optimizer state (its optimizer "
				    "keeps none)", c->tables[table].name);
	if (!n)
		return 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	if (in && c->unflushed && (ret = rdps_client_flush(c)))
		return ret;
	ret = route(c, table, ids, n, &grouped);
	if (ret)
		return ret;
	row = (size_t)spr * 4;
	chunk = CLIENT_MAX_REQ_BYTES / (8 + row); /* well within every frame limit */
	if (chunk > CLIENT_MAX_REQ_ROWS)
		chunk = CLIENT_MAX_REQ_ROWS;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		for (size_t pos = c->start[s]; pos < c->start[s + 1];) {
			size_t m = c->start[s + 1] - pos, got;
			struct rdps_state_req *r;
			uint64_t *rid;
			float *data;

			if (m > chunk)
				m = chunk;
			/* request (header, ids, rows to write) then the reply's room */
			if ((ret = reserve_xbuf(c, sizeof(*r) + m * 8 + m * row)))
				return ret;
			r = c->xbuf;
			*r = (struct rdps_state_req){ .table = table, .n = (uint32_t)m,
						      .op = in ? RDPS_STATE_WRITE : RDPS_STATE_READ,
						      .floats_per_row = spr };
			rid = (uint64_t *)(r + 1);
			data = (float *)(rid + m);
			for (size_t i = 0; i < m; i++) {
				size_t at = grouped ? c->perm[pos + i] : pos + i;

				rid[i] = grouped ? c->ids_sorted[pos + i] : ids[at];
				if (in)
					memcpy(data + i * spr, in + at * spr, row);
			}
			ret = rdps_client_call_idempotent(c, s, RDPS_REQ_STATE, r,
							  sizeof(*r) + m * 8 + (in ? m * row : 0),
							  in ? NULL : data, in ? 0 : m * row, &got);
			if (ret)
				return ret;
			for (size_t i = 0; !in && i < m; i++)
				memcpy(out + (grouped ? c->perm[pos + i] : pos + i) * spr,
				       data + i * spr, row);
			pos += m;
		}
	}
	return 0;
}

int rdps_client_state_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  float *out)
{
	return state_move(c, table, ids, n, out, NULL);
}

int rdps_client_state_set(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const float *in)
{
	return state_move(c, table, ids, n, NULL, in);
}
