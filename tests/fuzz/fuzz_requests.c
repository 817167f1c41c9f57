// SPDX-License-Identifier: MIT
/*
 * fuzz_requests: the server's request decoders and its dispatch, driven
 * with requests the harness frames itself, so the fuzzer spends its time
 * in payloads (table requests, samples, rows, collectives, observers' and
 * admins' requests), not in learning framing or the handshake.
 *
 * Setup: the servers of fuzz_server.h (as fuzz_frames).
 *
 * Input: byte 0 picks the server (bit 0 the secret, bit 1 server 0), then
 * records, each acting on one of four connections (op & 3), kind op >> 2
 * (modulo 7):
 *   0 frame     u8 type, u16 len, then len bytes (fewer if the input ends):
 *               one frame of that type (its reply bit cleared: fuzz_frames
 *               sends those) and payload, header well-formed
 *   1 fixed     as frame, with the payload fixed up to be well-formed for
 *               its type: pull/push/set row counts to the length (the
 *               table's row size as the server holds it), a sample's
 *               groups, slot and excluded-id counts, fanouts and flags
 *               (fix_sample), a state request's op, floats per row (the
 *               table's) and row count, a table request's size and name's
 *               end, an allreduce's length, a hello's size; empty for the
 *               others
 *   2 hello     u8 client id, u8 job size, u8 flags (bit 0 observer, bit 1
 *               wrong MAC, bit 2 the other server's id, bit 3 no AUTH
 *               frame), u8 rows pushed: the handshake, with the AUTH frame
 *               a server with the secret asks for
 *   3 close     the client closes the connection
 *   4 open      u8 flags: (re)opens the connection, from elsewhere
 *               (127.0.0.2) if bit 0, leaving its replies unread (a small
 *               receive window) if bit 1
 *   5 read      the connection reads its replies again
 *   6 raw       u16 len, then len bytes sent as they are (partial frames,
 *               a header split across records: what holds budget room);
 *               the connection's replies are then checked as frames only
 * A record on a connection that is not open opens it (from this machine,
 * reading). Every record is sent whole before the next.
 *
 * Asserts, besides fuzz_check_stream's checks of every frame and the
 * servers' memory against their budgets: every request after the
 * handshake is answered exactly once, in order (barriers, allreduces and
 * checkpoints, answered when they complete, in any order), with a reply of
 * its own type; a connection the client did nothing wrong on is never
 * closed by the server; and success replies are exact: a pull's rows are
 * n x the table's row size, a sample's edges are those the model of the
 * graph and rdps_sample_pick say for each slot (fuzz_check_sample: in- or
 * out-edges, fanouts per group, with or without replacement, weights,
 * exclusions), a state read's rows n x its floats per row (a write's
 * empty), a table request's desc names
 * the table asked for (with the shape asked for, when created), an
 * allreduce's sum has the length of the vector sent.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCONNS 4
#define NKINDS 7

enum { K_FRAME, K_FIXED, K_HELLO, K_CLOSE, K_OPEN, K_READ, K_RAW };

/* One frame the client sent after its handshake, and its reply. */
struct expect {
	uint8_t type;
	uint32_t len;
	bool floating;      /* answered when it completes: barrier, allreduce, checkpoint */
	bool silent;        /* no reply: the server closes (an AUTH frame after the hello) */
	bool closes;        /* answered, then the connection closes (a second hello) */
	bool answered;
	/* for exact checks of success replies */
	uint32_t table, n;
	uint8_t *req;       /* sample: the request */
	struct rdps_table_req tr;
	struct rdps_state_req st;
};

struct rconn {
	struct fuzz_conn c;
	bool open;
	int hs;             /* handshake: 0 nothing sent, 1 hello sent, 2 done */
	struct expect *ex;
	uint32_t nex, cap;
	uint32_t next;      /* the next in-order expectation */
	bool stopped;       /* a reply that closes the connection came */
	bool cut;           /* a record went out in part (the server stopped taking
			     * this connection's bytes): the stream is not whole */
	bool raw;           /* raw bytes were sent: replies are checked as frames only */
};

static struct fuzz_server *fs;
static struct rconn rc[NCONNS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	fuzz_servers_start();
	return 0;
}

/* The open connections as one array, as fuzz_server's calls take them
 * (rc[i].c are not adjacent), and back. Returns the count; *self (if not
 * NULL) is where connection i went. */
static int gather(struct fuzz_conn *cs, int *idx, int i, int *self)
{
	int n = 0;

	for (int k = 0; k < NCONNS; k++)
		if (rc[k].open) {
			if (k == i && self)
				*self = n;
			cs[n] = rc[k].c;
			idx[n++] = k;
		}
	return n;
}

static void scatter(const struct fuzz_conn *cs, const int *idx, int n)
{
	for (int k = 0; k < n; k++)
		rc[idx[k]].c = cs[k];
}

static void pump_all(void)
{
	struct fuzz_conn cs[NCONNS];
	int idx[NCONNS], n = gather(cs, idx, -1, NULL);

	fuzz_pump(fs, cs, n);
	scatter(cs, idx, n);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x, y;

	memcpy(&x, a, 8);
	memcpy(&y, b, 8);
	return x < y ? -1 : x > y;
}

static uint32_t table_dim(uint32_t t)
{
	struct rdps_shard *sh = t < RDPS_MAX_TABLES ? rdps_server_shard(fs->srv, t) : NULL;
	struct rdps_shard_info si;

	if (!sh)
		return 0;
	rdps_shard_info(sh, &si);
	return si.dim;
}

static void expect_add(struct rconn *r, const struct expect *e)
{
	if (r->nex == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->ex = realloc(r->ex, r->cap * sizeof(*r->ex));
		FUZZ_CHECK(r->ex != NULL);
	}
	r->ex[r->nex++] = *e;
}

/* What the server owes for one frame sent after the handshake. */
static void expect_frame(struct rconn *r, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct expect e = { .type = type, .len = len };

	e.floating = type == RDPS_REQ_BARRIER || type == RDPS_REQ_ALLREDUCE ||
		     type == RDPS_REQ_CHECKPOINT;
	/* A hello of its size, or shorter, is a second hello: refused, then
	 * closed; an AUTH of its size closes at once. Longer ones are refused
	 * on their header (their caps). */
	e.closes = type == RDPS_REQ_HELLO && len <= sizeof(struct rdps_wire_hello);
	e.silent = type == RDPS_WIRE_AUTH && len <= RDPS_MAC_LEN;
	if ((type == RDPS_REQ_PULL || type == RDPS_REQ_PUSH || type == RDPS_REQ_SET) &&
	    len >= sizeof(struct rdps_wire_rows)) {
		struct rdps_wire_rows rows;

		memcpy(&rows, p, sizeof(rows));
		e.table = rows.table;
		e.n = rows.n;
	}
	if (type == RDPS_REQ_SAMPLE) {
		e.req = malloc(len + 1);
		FUZZ_CHECK(e.req != NULL);
		memcpy(e.req, p, len);
	}
	if (type == RDPS_REQ_TABLE && len == sizeof(e.tr))
		memcpy(&e.tr, p, sizeof(e.tr));
	if (type == RDPS_REQ_STATE && len >= sizeof(e.st))
		memcpy(&e.st, p, sizeof(e.st));
	expect_add(r, &e);
}

/* Exact checks of a success reply against its request. */
static void check_success(const struct expect *e, const uint8_t *p, uint32_t len)
{
	switch (e->type) {
	case RDPS_REQ_PULL:
		if (e->table < FUZZ_NUM_TABLES)
			FUZZ_CHECK(len == (uint64_t)e->n * table_dim(e->table) * 4);
		break;
	case RDPS_REQ_SAMPLE:
		fuzz_check_sample(fs, p, len, e->req, e->len);
		break;
	case RDPS_REQ_STATE:
		/* A success only for a well-formed request of a table with
		 * state: a read's rows of floats_per_row floats, a write's
		 * nothing. */
		FUZZ_CHECK(e->len >= sizeof(e->st) && e->st.floats_per_row >= 1);
		FUZZ_CHECK(e->len == sizeof(e->st) + (uint64_t)e->st.n * 8 +
					     (e->st.op == RDPS_STATE_WRITE
						      ? (uint64_t)e->st.n * e->st.floats_per_row * 4
						      : 0));
		FUZZ_CHECK(len == (e->st.op == RDPS_STATE_READ
					   ? (uint64_t)e->st.n * e->st.floats_per_row * 4
					   : 0));
		break;
	case RDPS_REQ_ALLREDUCE:
		FUZZ_CHECK(len == e->len);
		break;
	case RDPS_REQ_TABLE: {
		struct rdps_table_desc d;
		char name[RDPS_TABLE_NAME_MAX];

		memcpy(&d, p, sizeof(d));
		memcpy(name, e->tr.name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
		FUZZ_CHECK(!strcmp(d.name, name));
		if (e->tr.op == RDPS_TABLE_CREATE)
			FUZZ_CHECK(d.num_rows == e->tr.num_rows && d.elems == e->tr.elems &&
				   d.dtype == e->tr.dtype);
		if (e->tr.op == RDPS_TABLE_SET_OPTIMIZER)
			FUZZ_CHECK(d.optimizer == e->tr.optimizer);
		break;
	}
	default:
		break;
	}
}

/* Each reply after the welcome, in order (fuzz_check_stream). */
static void on_reply(void *ctx, const struct rdps_wire_hdr *h, const uint8_t *payload)
{
	struct rconn *r = ctx;
	uint8_t type = h->type & (uint8_t)~RDPS_WIRE_REPLY;
	struct expect *e = NULL;

	if (type == RDPS_REQ_BARRIER || type == RDPS_REQ_ALLREDUCE ||
	    type == RDPS_REQ_CHECKPOINT) {
		for (uint32_t i = 0; i < r->nex && !e; i++)
			if (r->ex[i].floating && !r->ex[i].answered && r->ex[i].type == type)
				e = &r->ex[i];
		FUZZ_CHECK(e != NULL); /* a collective's reply: one was asked for */
	} else {
		/* No reply after one that closes the connection. */
		FUZZ_CHECK(!r->stopped);
		while (r->next < r->nex && r->ex[r->next].floating)
			r->next++;
		FUZZ_CHECK(r->next < r->nex); /* every reply answers a request */
		e = &r->ex[r->next++];
		if (h->type != (e->type | RDPS_WIRE_REPLY) || e->silent)
			fprintf(stderr, "fuzz: reply of type 0x%02x (status %d) where the request "
				"of type 0x%02x (%u bytes) is next\n", h->type, h->status, e->type,
				e->len);
		FUZZ_CHECK(h->type == (e->type | RDPS_WIRE_REPLY) && !e->silent);
		r->stopped = e->closes;
	}
	e->answered = true;
	if (!h->status)
		check_success(e, payload, h->len);
}

/* Closes connection i: lets the servers finish first, then checks all it
 * got. */
static void finish(int i)
{
	struct rconn *r = &rc[i];
	struct fuzz_stream_info info;
	struct fuzz_conn cs[NCONNS];
	int idx[NCONNS], n, self = 0;
	bool closed_by_us = false, held_by_other = false;

	if (!r->open)
		return;
	n = gather(cs, idx, i, &self);
	fuzz_settle(fs, cs, n);
	fuzz_conn_shut(fs, cs, n, &cs[self]);
	scatter(cs, idx, n);
	fuzz_note("connection %d closes (%u requests after its handshake; %s):", i, r->nex,
		  r->c.eof ? "the server closed it" : "open");
	fuzz_check_stream(fs, &r->c, r->raw ? NULL : on_reply, r, &info);
	for (uint32_t k = 0; k < r->nex; k++)
		closed_by_us |= r->ex[k].closes || r->ex[k].silent;
	/* A partial frame another client left holds budget room for as long
	 * as that client stays (tests/fuzz/README.md, "Open"): requests may
	 * wait for it. */
	for (int k = 0; k < NCONNS; k++)
		held_by_other |= k != i && rc[k].open && rc[k].raw;
	if (info.welcomed && r->c.settled && !closed_by_us && !r->cut && !r->raw &&
	    !held_by_other) {
		/* Admitted, and nothing it sent closes it: never dropped, and
		 * every request answered (collectives may still wait for
		 * the other clients of their job; checkpoints are done). */
		FUZZ_CHECK(!r->c.eof);
		for (uint32_t k = 0; k < r->nex; k++) {
			if (!r->ex[k].answered && r->ex[k].type != RDPS_REQ_BARRIER &&
			    r->ex[k].type != RDPS_REQ_ALLREDUCE)
				fprintf(stderr, "fuzz: request %u of type 0x%02x (%u bytes) got no "
					"reply\n", k, r->ex[k].type, r->ex[k].len);
			FUZZ_CHECK(r->ex[k].answered || r->ex[k].type == RDPS_REQ_BARRIER ||
				   r->ex[k].type == RDPS_REQ_ALLREDUCE);
		}
	}
	for (uint32_t k = 0; k < r->nex; k++)
		free(r->ex[k].req);
	free(r->ex);
	fuzz_conn_close(&r->c);
	memset(r, 0, sizeof(*r));
	r->c.fd = -1;
}

static void open_conn(int i, bool remote, bool reading)
{
	finish(i);
	fuzz_conn_open(&rc[i].c, fs, remote, reading);
	rc[i].open = true;
}

/* Sends bytes on connection i (frames the caller accounted for). */
static void send_on(int i, const uint8_t *p, size_t len)
{
	struct fuzz_conn cs[NCONNS];
	int idx[NCONNS], n, self = -1;
	size_t sent;

	fuzz_scan_requests(p, len);
	n = gather(cs, idx, i, &self);
	FUZZ_CHECK(self >= 0);
	sent = fuzz_send(fs, cs, n, &cs[self], p, len, 0);
	scatter(cs, idx, n);
	fuzz_note("connection %d: sent %zu of %zu bytes", i, sent, len);
	if (sent < len && !rc[i].c.eof)
		rc[i].cut = true;
}

/* A frame's place in the handshake of connection r: the first hello of
 * its size, and on a server with the secret the AUTH right after it, are
 * the handshake; everything after is a request. */
static void account(struct rconn *r, uint8_t type, const uint8_t *p, uint32_t len)
{
	if (r->hs == 0) {
		if (type == RDPS_REQ_HELLO && len == sizeof(struct rdps_wire_hello)) {
			r->hs = fs->secret ? 1 : 2;
			r->c.observer_known = true;
			r->c.observer = ((const struct rdps_wire_hello *)(const void *)p)->flags &
					RDPS_HELLO_OBSERVER;
		} else {
			r->hs = 3; /* not a hello first: closed unanswered */
		}
		return;
	}
	if (r->hs == 1) {
		r->hs = 2;
		if (type == RDPS_WIRE_AUTH && len == RDPS_MAC_LEN)
			return;
		/* anything else before the AUTH is refused with the hello */
	}
	if (r->hs == 2)
		expect_frame(r, type, p, len);
}

/* Optimizer state floats per row of the table a state request names (0:
 * no such table, or no state). */
static uint32_t table_state(const uint8_t *p)
{
	struct rdps_shard *sh;
	uint32_t t;

	memcpy(&t, p, sizeof(t));
	sh = t < RDPS_MAX_TABLES ? rdps_server_shard(fs->srv, t) : NULL;
	return sh ? rdps_shard_state_per_row(sh) : 0;
}

/* v if it is in 1..max, else folded into it. */
static uint32_t fold(uint32_t v, uint32_t max)
{
	return v >= 1 && v <= max ? v : 1 + v % max;
}

/* A sample request made well-formed (a well-formed one stays as it is): its groups (1..64, each of 1..the
 * header's fanout and at least one slot, weights of float32 or float64),
 * as many slots and excluded ids (sorted) as len holds, slots x fanout
 * within the limit, known flags. The tables and ids are the fuzzer's. */
static uint32_t fix_sample(uint8_t *p, uint32_t len)
{
	const size_t gsz = sizeof(struct rdps_sample_group);
	struct rdps_sample_req sr;
	uint64_t *ids;
	uint32_t room, left;

	if (len < sizeof(sr) + gsz + 8)
		return len;
	memcpy(&sr, p, sizeof(sr));
	sr.flags &= RDPS_SAMPLE_F_OUT | RDPS_SAMPLE_F_REPLACE;
	sr.reserved = 0;
	sr.fanout = fold(sr.fanout, RDPS_SAMPLE_MAX_FANOUT);
	sr.num_groups = fold(sr.num_groups, RDPS_SAMPLE_MAX_GROUPS);
	/* each group at least one slot */
	while (sr.num_groups > 1 && sizeof(sr) + sr.num_groups * (gsz + 8) > len)
		sr.num_groups--;
	room = (uint32_t)((len - sizeof(sr) - sr.num_groups * gsz) / 8);
	if (sr.num_exclude > room - sr.num_groups)
		sr.num_exclude %= room - sr.num_groups + 1;
	sr.n = room - sr.num_exclude;
	if ((uint64_t)sr.n * sr.fanout > RDPS_SAMPLE_MAX_EDGES)
		sr.fanout = RDPS_SAMPLE_MAX_EDGES / sr.n;
	left = sr.n;
	for (uint32_t i = 0; i < sr.num_groups; i++) {
		struct rdps_sample_group g;
		uint32_t rest = sr.num_groups - 1 - i;

		memcpy(&g, p + sizeof(sr) + i * gsz, gsz);
		g.fanout = fold(g.fanout, sr.fanout);
		g.count = rest ? fold(g.count, left - rest) : left;
		left -= g.count;
		if (g.prob_table != RDPS_SAMPLE_NO_PROB)
			g.prob_dtype &= 1; /* float32 or float64 */
		memcpy(p + sizeof(sr) + i * gsz, &g, gsz);
	}
	ids = malloc(((size_t)sr.num_exclude + 1) * 8);
	FUZZ_CHECK(ids != NULL);
	memcpy(ids, p + sizeof(sr) + sr.num_groups * gsz + (size_t)sr.n * 8,
	       (size_t)sr.num_exclude * 8);
	qsort(ids, sr.num_exclude, 8, cmp_u64);
	memcpy(p + sizeof(sr) + sr.num_groups * gsz + (size_t)sr.n * 8, ids,
	       (size_t)sr.num_exclude * 8);
	free(ids);
	memcpy(p, &sr, sizeof(sr));
	return (uint32_t)(sizeof(sr) + sr.num_groups * gsz + ((size_t)sr.n + sr.num_exclude) * 8);
}

/* Makes the payload well-formed for its type (record kind "fixed"). */
static uint32_t fix_up(uint8_t type, uint8_t *p, uint32_t len)
{
	switch (type) {
	case RDPS_REQ_PULL:
	case RDPS_REQ_PUSH:
	case RDPS_REQ_SET: {
		struct rdps_wire_rows rows;
		uint64_t row;

		if (len < sizeof(rows))
			return len;
		memcpy(&rows, p, sizeof(rows));
		row = 8 + (type == RDPS_REQ_PULL ? 0 : 4ull * table_dim(rows.table));
		rows.n = (uint32_t)((len - sizeof(rows)) / row);
		memcpy(p, &rows, sizeof(rows));
		len = (uint32_t)(sizeof(rows) + rows.n * row);
		if (len % 8)
			len += 4; /* pushes and sets are padded to 8 bytes */
		return len;
	}
	case RDPS_REQ_SAMPLE:
		return fix_sample(p, len);
	case RDPS_REQ_STATE: {
		struct rdps_state_req st;
		uint32_t spr = table_state(p);
		uint64_t row;

		if (len < sizeof(st))
			return len;
		memcpy(&st, p, sizeof(st));
		st.op &= 1;
		/* The table's own, where it keeps state (else the fuzzer's). */
		if (spr)
			st.floats_per_row = spr;
		else
			st.floats_per_row %= 64;
		row = 8 + (st.op == RDPS_STATE_WRITE ? 4ull * st.floats_per_row : 0);
		st.n = (uint32_t)((len - sizeof(st)) / row);
		memcpy(p, &st, sizeof(st));
		return (uint32_t)(sizeof(st) + st.n * row);
	}
	case RDPS_REQ_TABLE:
		p[offsetof(struct rdps_table_req, name) + RDPS_TABLE_NAME_MAX - 1] = '\0';
		return sizeof(struct rdps_table_req);
	case RDPS_REQ_ALLREDUCE:
		len = len / 8 * 8;
		if (len > RDPS_ALLREDUCE_MAX * 8)
			len = RDPS_ALLREDUCE_MAX * 8;
		return len ? len : 8;
	case RDPS_REQ_HELLO:
		return sizeof(struct rdps_wire_hello);
	case RDPS_WIRE_AUTH:
		return RDPS_MAC_LEN;
	default:
		return 0;
	}
}

/* The largest payload a record carries (its u16 length). */
#define MAX_PAYLOAD 65535

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t payload[MAX_PAYLOAD + sizeof(struct rdps_table_req) + 8];
	size_t at = 1;

	if (size < 1)
		return 0;
	fs = &fuzz_servers[data[0] & 3];
	fuzz_input_begin(fs);
	for (int i = 0; i < NCONNS; i++) {
		memset(&rc[i], 0, sizeof(rc[i]));
		rc[i].c.fd = -1;
	}
	while (at < size) {
		int i = data[at] & 3, kind = (data[at] >> 2) % NKINDS;
		struct rconn *r = &rc[i];
		uint8_t *buf = NULL;
		size_t blen = 0;

		at++;
		if (kind == K_CLOSE) {
			finish(i);
			continue;
		}
		if (kind == K_OPEN) {
			uint8_t of = at < size ? data[at++] : 0;

			open_conn(i, of & 1, !(of & 2));
			continue;
		}
		if (!r->open)
			open_conn(i, false, true);
		if (kind == K_READ) {
			r->c.reading = true;
			pump_all();
			continue;
		}

		if (kind == K_RAW) {
			size_t len;

			if (size - at < 2) {
				at = size;
				break;
			}
			len = (size_t)data[at] | (size_t)data[at + 1] << 8;
			at += 2;
			if (len > size - at)
				len = size - at;
			if (!r->cut) {
				r->raw = true;
				send_on(i, data + at, len);
			}
			at += len;
			continue;
		}
		if (kind == K_HELLO) {
			uint8_t hf[4] = { 0, 1, 0, 0 };
			struct rdps_wire_hello h;

			for (int k = 0; k < 4 && at < size; k++)
				hf[k] = data[at++];
			h = fuzz_hello(hf[2] & 4 ? !fs->id : fs->id, hf[0], hf[1],
				       hf[2] & 1 ? RDPS_HELLO_OBSERVER : 0);
			h.pushed_rows = hf[3];
			if (hf[2] & 8)
				fuzz_frame_bytes(RDPS_REQ_HELLO, &h, sizeof(h), &buf, &blen);
			else
				fuzz_handshake_bytes(fs, &h, hf[2] & 2, &buf, &blen);
			if (!r->cut) {
				account(r, RDPS_REQ_HELLO, (const uint8_t *)&h, sizeof(h));
				if (blen > sizeof(struct rdps_wire_hdr) + sizeof(h))
					account(r, RDPS_WIRE_AUTH, buf + blen - RDPS_MAC_LEN,
						RDPS_MAC_LEN);
			}
		} else {
			uint8_t type;
			uint32_t len;

			if (size - at < 3) {
				at = size;
				break;
			}
			/* Types with the reply bit would make replies ambiguous;
			 * fuzz_frames sends those. */
			type = data[at] & (uint8_t)~RDPS_WIRE_REPLY;
			len = (uint32_t)data[at + 1] | (uint32_t)data[at + 2] << 8;
			at += 3;
			if (len > size - at)
				len = (uint32_t)(size - at);
			memcpy(payload, data + at, len);
			/* what a fix-up may add reads zeros */
			memset(payload + len, 0, sizeof(struct rdps_table_req) + 8);
			at += len;
			if (kind == K_FIXED)
				len = fix_up(type, payload, len);
			fuzz_frame_bytes(type, payload, len, &buf, &blen);
			if (!r->cut)
				account(r, type, payload, len);
		}
		/* A record cut short left the stream mid-frame: nothing more
		 * goes on this connection until it is opened again. */
		if (!r->cut)
			send_on(i, buf, blen);
		free(buf);
	}
	for (int i = 0; i < NCONNS; i++)
		finish(i);
	fuzz_input_end(fs);
	return 0;
}
