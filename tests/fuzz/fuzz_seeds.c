// SPDX-License-Identifier: MIT
/*
 * fuzz_seeds: writes the seed corpus of every fuzz target into
 * CORPUS/<target>/ (the repo's copy is tests/fuzz/corpus/) and, given
 * DICT, the wire targets' dictionaries. Run by hand after a wire or file
 * format change (the seeds carry RDPS_WIRE_VERSION in every header):
 *   build-fuzz/fuzz_seeds tests/fuzz/corpus tests/fuzz/dict
 *
 * Seeds are built with the library's own encoders where it has them
 * (rdps_wire_hdr_init, rdps_wire_build_welcome, rdps_auth_mac through the
 * harness's fuzz_handshake_bytes, rdps_partition_build and the blob writer,
 * rdps_graph_partition_build) so they stay valid as the formats evolve.
 * MACs assume the fuzz build's deterministic rdps_random_bytes
 * (FUZZ_RANDOM_BYTE). Requests name the fuzzed servers' tables and graph
 * (fuzz_server.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/npy.h"
#include "fuzz_common.h"
#include "fuzz_server.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "rdps/transport.h"
#include "transport/wire.h"

#define SERVER_ID 1 /* of fuzz_handshake's client */

/* A growing byte buffer. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *data, size_t len)
{
	if (!len)
		return;
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 256;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void put_u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put_str(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void frame(struct buf *b, uint8_t type, int32_t status, const void *payload,
		  uint32_t len)
{
	struct rdps_wire_hdr h;

	rdps_wire_hdr_init(&h, type, len, status);
	put(b, &h, sizeof(h));
	if (len)
		put(b, payload, len);
}

static const char *out_root;

static void save(const char *target, const char *name, const struct buf *b)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_root, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", out_root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b->p, 1, b->len, f) != b->len || fclose(f)) {
		fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void reset(struct buf *b)
{
	b->len = 0;
}

/* ---------------------------------------------------------------------- */
/* Requests of every kind (fuzz_frames streams, fuzz_requests records)      */

static struct rdps_secret secret;

/* One request: its type and payload. */
struct req {
	uint8_t type;
	struct buf p;
};

static void req_rows(struct req *r, uint8_t type, uint32_t table, uint32_t dim,
		     const uint64_t *ids, uint32_t n, float grad)
{
	struct rdps_wire_rows rows = { .table = table, .n = n };

	memset(r, 0, sizeof(*r));
	r->type = type;
	put(&r->p, &rows, sizeof(rows));
	put(&r->p, ids, n * sizeof(uint64_t));
	if (type != RDPS_REQ_PULL) {
		for (uint32_t i = 0; i < n * dim; i++) {
			float g = grad * (float)(i + 1);

			put(&r->p, &g, sizeof(g));
		}
		if (r->p.len % 8)
			put(&r->p, "\0\0\0\0", 4);
	}
}

static void req_raw(struct req *r, uint8_t type, const void *payload, uint32_t len)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	if (len)
		put(&r->p, payload, len);
}

static void req_table(struct req *r, uint32_t op, uint32_t id, const char *name,
		      uint64_t rows, uint32_t elems, uint32_t dtype, uint32_t optimizer)
{
	struct rdps_table_req tr = { .op = op, .table_id = id, .num_rows = rows, .elems = elems,
				     .dtype = dtype, .init = RDPS_INIT_UNIFORM,
				     .init_range = 0.5f, .seed = 3, .optimizer = optimizer,
				     .lr = 0.05f };

	if (dtype != RDPS_DTYPE_F32)
		tr.init = RDPS_INIT_ZEROS;
	snprintf(tr.name, sizeof(tr.name), "%s", name);
	req_raw(r, RDPS_REQ_TABLE, &tr, sizeof(tr));
}

/* A sample request (transport.h): flags, groups (the header's fanout
 * their largest), slots, excluded edge ids. */
static void req_sample_groups(struct req *r, uint32_t flags, const struct rdps_sample_group *g,
			      uint32_t ng, const uint64_t *slots, const uint64_t *excl,
			      uint32_t nexcl)
{
	bool out = flags & RDPS_SAMPLE_F_OUT;
	struct rdps_sample_req sr = { .indptr_table = out ? FUZZ_T_OUTPTR : FUZZ_T_INDPTR,
				      .edges_table = out ? FUZZ_T_OUTEDGES : FUZZ_T_EDGES,
				      .seed = 42, .flags = flags, .num_groups = ng,
				      .num_exclude = nexcl };

	for (uint32_t i = 0; i < ng; i++) {
		sr.n += g[i].count;
		if (g[i].fanout > sr.fanout)
			sr.fanout = g[i].fanout;
	}
	memset(r, 0, sizeof(*r));
	r->type = RDPS_REQ_SAMPLE;
	put(&r->p, &sr, sizeof(sr));
	put(&r->p, g, ng * sizeof(*g));
	put(&r->p, slots, sr.n * sizeof(uint64_t));
	put(&r->p, excl, nexcl * sizeof(uint64_t));
}

/* Up to fanout in-edges of each seed, uniformly: one group. */
static void req_sample(struct req *r, uint32_t fanout, const uint64_t *seeds, uint32_t n)
{
	struct rdps_sample_group g = { .fanout = fanout, .count = n,
				       .prob_table = RDPS_SAMPLE_NO_PROB };

	req_sample_groups(r, 0, &g, 1, seeds, NULL, 0);
}

static void req_state(struct req *r, uint32_t op, uint32_t table, uint32_t fpr,
		      const uint64_t *ids, uint32_t n)
{
	struct rdps_state_req st = { .table = table, .n = n, .op = op, .floats_per_row = fpr };

	memset(r, 0, sizeof(*r));
	r->type = RDPS_REQ_STATE;
	put(&r->p, &st, sizeof(st));
	put(&r->p, ids, n * sizeof(uint64_t));
	if (op == RDPS_STATE_WRITE)
		for (uint32_t i = 0; i < n * fpr; i++) {
			float v = 0.5f * (float)(i + 1);

			put(&r->p, &v, sizeof(v));
		}
}

#define MAX_REQS 96

/* A valid request of every kind for server id (rows [lo, hi) of the
 * entity table, nodes of its part of the graph), and some the core
 * refuses: table FUZZ_NUM_TABLES made (server 0: in the first free slot),
 * looked up, given another optimizer, pushed to, read, written, its
 * optimizer state read and written, dropped; samples of every path (all
 * in-edges, fanout <= 64 of more, fanout > 64 of more, out-edges, with
 * replacement, weighted by float32 and float64 edge data, excluded edges,
 * groups of two fanouts; the damaged node: -EIO; weights of out-edges and
 * weights not on this server: refused); optimizer state read and written
 * (entity: Adagrad, one float a row), and refused (SGD keeps none, a
 * read-only table, a wrong floats per row); a non-finite push (-EDOM);
 * writes to a graph table (read-only: -EPERM); an endpoint binding (not
 * over tcp); an unknown kind; a checkpoint. Returns the count. */
static int all_requests(uint32_t id, struct req *r)
{
	uint64_t e0 = id ? 32 : 0, r0 = id ? 4 : 0, n0 = id * 20;
	uint64_t ent[2] = { e0, e0 + 31 }, rel[2] = { r0, r0 + 3 };
	uint64_t nodes[2] = { n0 + 1, n0 + 5 }, big = FUZZ_GRAPH_BIG_NODE(id), bad = n0 + 19;
	uint64_t eids[2], elo, ehi, seeds[3] = { n0 + 3, big, n0 + 0 };
	uint32_t made = id ? FUZZ_NUM_TABLES : RDPS_TABLE_ANY_ID;
	double vec[2] = { 1.5, -2.0 };
	uint8_t bind[16] = { 1 };
	float nan = __builtin_nanf("");
	int n = 0;

	fuzz_graph_edge_range(id, &elo, &ehi);
	eids[0] = elo;
	eids[1] = ehi - 1;
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_ENTITY, 4, ent, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PUSH, FUZZ_T_ENTITY, 4, ent, 2, 0.25f);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_RELATION, 3, rel, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PUSH, FUZZ_T_RELATION, 3, rel, 1, 0.25f);
	req_rows(&r[n++], RDPS_REQ_SET, FUZZ_T_ENTITY, 4, ent, 1, 1.0f);
	req_rows(&r[n++], RDPS_REQ_SET, FUZZ_T_RELATION, 3, rel, 1, 1.0f);
	req_rows(&r[n++], RDPS_REQ_PUSH, FUZZ_T_ENTITY, 4, ent, 1, nan);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_INDPTR, 4, nodes, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_EDGES, 8, eids, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_FEAT, 3, nodes, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_LABEL, 2, nodes, 2, 0);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_MASK, 1, nodes, 1, 0);
	req_rows(&r[n++], RDPS_REQ_SET, FUZZ_T_FEAT, 3, nodes, 1, 1.0f);
	req_raw(&r[n++], RDPS_REQ_FLUSH, NULL, 0);
	req_raw(&r[n++], RDPS_REQ_STATS, NULL, 0);
	req_sample(&r[n++], 4, seeds, 3);
	req_sample(&r[n++], 100, &big, 1);
	req_sample(&r[n++], RDPS_SAMPLE_MAX_FANOUT, &big, 1);
	req_sample(&r[n++], 2, &bad, 1);
	{
		uint64_t sl[4] = { n0 + 3, big, n0 + 19, n0 + 2 }, ex[3];
		struct rdps_sample_group g[2] = {
			{ .fanout = 3, .count = 2, .prob_table = RDPS_SAMPLE_NO_PROB },
			{ .fanout = 1, .count = 2, .prob_table = RDPS_SAMPLE_NO_PROB },
		};
		struct rdps_sample_group wf = { .fanout = 5, .count = 2, .prob_table = FUZZ_T_PROB,
						.prob_dtype = RDPS_DTYPE_F32 };
		struct rdps_sample_group wd = { .fanout = 40, .count = 2, .prob_table = FUZZ_T_W64,
						.prob_dtype = RDPS_DTYPE_F64 };
		uint64_t b, e;

		/* out-edges (the damaged node's too: its out-edges are whole) */
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_OUT, g, 2, sl, NULL, 0);
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_OUT | RDPS_SAMPLE_F_REPLACE, g, 2, sl,
				  NULL, 0);
		/* in-edges with replacement, weighted, excluding some */
		g[1].count = 1; /* seeds: 3 */
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_REPLACE, g, 2, seeds, NULL, 0);
		g[1].count = 2;
		req_sample_groups(&r[n++], 0, &wf, 1, seeds, NULL, 0);
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_REPLACE, &wd, 1, seeds, NULL, 0);
		fuzz_graph_slot_edges((uint32_t)big, false, &b, &e);
		ex[0] = b + 1;
		ex[1] = b + 2;
		ex[2] = e - 1;
		req_sample_groups(&r[n++], 0, &wd, 1, &seeds[1], ex, 3);
		req_sample_groups(&r[n++], 0, g, 1, &seeds[1], ex, 3);
		/* all but the last of n0 + 3's 3 in-edges excluded: a pick that
		 * is not mapped past the exclusions is one of them */
		fuzz_graph_slot_edges((uint32_t)sl[0], false, &b, &e);
		ex[0] = b;
		ex[1] = b + 1;
		req_sample_groups(&r[n++], 0, g, 1, sl, ex, 2);
		fuzz_graph_slot_edges((uint32_t)sl[0], true, &b, &e);
		ex[0] = fuzz_graph_out_edge(b);
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_OUT, g, 1, sl, ex, 1);
		/* refused: weights of out-edges; weights not on this server */
		req_sample_groups(&r[n++], RDPS_SAMPLE_F_OUT, &wf, 1, sl, NULL, 0);
		wf.prob_shift = -(int64_t)fuzz_graph_num_edges();
		req_sample_groups(&r[n++], 0, &wf, 1, seeds, NULL, 0);
	}
	req_state(&r[n++], RDPS_STATE_READ, FUZZ_T_ENTITY, 1, ent, 2);
	req_state(&r[n++], RDPS_STATE_WRITE, FUZZ_T_ENTITY, 1, ent, 2);
	req_state(&r[n++], RDPS_STATE_READ, FUZZ_T_ENTITY, 1, ent, 1);
	req_state(&r[n++], RDPS_STATE_READ, FUZZ_T_RELATION, 1, rel, 1); /* SGD: none */
	req_state(&r[n++], RDPS_STATE_READ, FUZZ_T_INDPTR, 1, nodes, 1); /* read-only */
	req_state(&r[n++], RDPS_STATE_WRITE, FUZZ_T_ENTITY, 3, ent, 1);  /* not its 1 */
	req_table(&r[n++], RDPS_TABLE_CREATE, made, "fz", 16, 3, RDPS_DTYPE_F32,
		  RDPS_OPT_ADAGRAD_ROW);
	req_table(&r[n++], RDPS_TABLE_LOOKUP, 0, "fz", 0, 0, 0, 0);
	req_table(&r[n++], RDPS_TABLE_SET_OPTIMIZER, 0, "fz", 0, 0, 0, RDPS_OPT_ADAM);
	{
		uint64_t lo = id ? 8 : 0, ids[2] = { lo, lo + 7 };

		/* the made table's slot: 7 on both servers (the first free) */
		req_rows(&r[n++], RDPS_REQ_PUSH, FUZZ_NUM_TABLES, 3, ids, 2, 0.5f);
		req_rows(&r[n++], RDPS_REQ_SET, FUZZ_NUM_TABLES, 3, ids, 1, 2.0f);
		req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_NUM_TABLES, 3, ids, 2, 0);
		/* Adam: 2 x 3 + 1 floats of state a row */
		req_state(&r[n++], RDPS_STATE_WRITE, FUZZ_NUM_TABLES, 7, ids, 2);
		req_state(&r[n++], RDPS_STATE_READ, FUZZ_NUM_TABLES, 7, ids, 2);
	}
	req_table(&r[n++], RDPS_TABLE_CREATE, id ? made + 1 : made, "fz-int", 10, 3,
		  RDPS_DTYPE_I64, RDPS_OPT_NONE);
	req_table(&r[n++], RDPS_TABLE_CREATE, id ? made + 2 : made, "fz-huge", 1u << 20, 1024,
		  RDPS_DTYPE_F32, RDPS_OPT_SGD); /* over the table budget */
	req_table(&r[n++], RDPS_TABLE_SET_OPTIMIZER, 0, "entity", 0, 0, 0, RDPS_OPT_SGD);
	req_table(&r[n++], RDPS_TABLE_DROP, 0, "fz", 0, 0, 0, 0);
	req_table(&r[n++], RDPS_TABLE_DROP, 0, "entity", 0, 0, 0, 0);
	req_raw(&r[n++], RDPS_REQ_ALLREDUCE, vec, sizeof(vec));
	req_raw(&r[n++], RDPS_REQ_BARRIER, NULL, 0);
	req_raw(&r[n++], RDPS_REQ_CHECKPOINT, NULL, 0);
	req_raw(&r[n++], RDPS_WIRE_BIND, bind, sizeof(bind));
	req_raw(&r[n++], 0x33, NULL, 0);
	return n;
}

/* An observer's: stats, checkpoint and shutdown (admins only), a pull
 * (refused), a stats with a body (over an observer's cap of 0 bytes:
 * refused on its header, its payload skipped). */
static int observer_requests(struct req *r)
{
	static const uint64_t id[1] = { 33 };
	uint8_t body[24] = { 0 };
	int n = 0;

	req_raw(&r[n++], RDPS_REQ_STATS, NULL, 0);
	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_ENTITY, 4, id, 1, 0);
	req_raw(&r[n++], RDPS_REQ_STATS, body, sizeof(body));
	req_raw(&r[n++], RDPS_REQ_CHECKPOINT, NULL, 0);
	req_state(&r[n++], RDPS_STATE_READ, FUZZ_T_ENTITY, 1, id, 1);
	req_raw(&r[n++], RDPS_REQ_STATS, NULL, 0);
	req_raw(&r[n++], RDPS_REQ_SHUTDOWN, NULL, 0);
	return n;
}

/* Requests refused on their headers (each over its kind's cap, its
 * payload skipped) and by the core, with valid ones between: the
 * connection must stay in step. */
static int refused_requests(uint32_t id, struct req *r)
{
	static uint8_t zeros[600];
	uint64_t ids[1] = { id ? 5 : 40 };
	double vec[1] = { 3.0 };
	int n = 0;

	req_rows(&r[n++], RDPS_REQ_PULL, FUZZ_T_ENTITY, 4, ids, 1, 0); /* not this server's */
	req_rows(&r[n++], RDPS_REQ_PULL, 9, 4, ids, 1, 0);            /* unknown table */
	req_raw(&r[n++], RDPS_REQ_FLUSH, vec, sizeof(vec));          /* body on a flush */
	req_raw(&r[n++], RDPS_REQ_TABLE, zeros, 200);                /* over its 96 */
	req_raw(&r[n++], RDPS_REQ_STATS, NULL, 0);
	req_raw(&r[n++], RDPS_REQ_ALLREDUCE, zeros, 520);            /* over 512 */
	req_raw(&r[n++], RDPS_REQ_ALLREDUCE, vec, 4);                /* odd */
	req_raw(&r[n++], RDPS_REQ_CHECKPOINT, zeros, 8);
	req_raw(&r[n++], RDPS_REQ_SAMPLE, zeros, 40);                /* no groups */
	req_raw(&r[n++], RDPS_REQ_STATE, zeros, 12);                 /* short */
	{
		static const uint64_t bad[2] = { 0, 1 };

		req_state(&r[n], RDPS_STATE_READ, FUZZ_T_ENTITY, 1, bad, 2);
		r[n].p.p[8] = 7;                                     /* op 7 */
		n++;
	}
	req_raw(&r[n++], RDPS_REQ_TABLE, zeros, 96);                 /* op 0 */
	req_raw(&r[n++], RDPS_REQ_STATS, NULL, 0);
	return n;
}

static void reqs_free(struct req *r, int n)
{
	for (int i = 0; i < n; i++)
		free(r[i].p.p);
}

/* ---------------------------------------------------------------------- */
/* fuzz_frames: client byte streams                                        */

static void put_frame(struct buf *b, const struct req *r)
{
	frame(b, r->type, 0, r->p.p, (uint32_t)r->p.len);
}

/* The handshake bytes a client sends to server sv (fuzz_server.h's index),
 * through the harness's own helper (valid MACs). */
static void put_handshake(struct buf *b, int sv, const struct rdps_wire_hello *h, int bad_mac)
{
	uint8_t *p = NULL;
	size_t len = 0;

	fuzz_handshake_bytes(&fuzz_servers[sv], h, bad_mac, &p, &len);
	put(b, p, len);
	free(p);
}

/* The frames flag byte for server sv: bit 0 secret, bit 2 server 0. */
static uint8_t sv_flags(int sv)
{
	return (uint8_t)((sv & FUZZ_SRV_SECRET ? 1 : 0) | (sv & FUZZ_SRV_ZERO ? 4 : 0));
}

static const char *const sv_names[FUZZ_NUM_SERVERS] = { "s1-plain", "s1-secret", "s0-plain",
							"s0-secret" };

static void seeds_frames(void)
{
	struct req r[MAX_REQS];
	struct buf b = { 0 }, s = { 0 };
	char name[128];
	int n;

	for (int sv = 0; sv < FUZZ_NUM_SERVERS; sv++) {
		uint32_t id = fuzz_servers[sv].id;
		struct rdps_wire_hello h0 = fuzz_hello(id, 0, 1, 0);
		struct rdps_wire_hello obs = fuzz_hello(id, 0, 1, RDPS_HELLO_OBSERVER);
		struct rdps_wire_hello a = fuzz_hello(id, 0, 2, 0), bh = fuzz_hello(id, 1, 2, 0);
		double vec[1] = { 3.0 };
		uint16_t first;

		/* Every kind, then a shutdown. */
		reset(&b);
		put_u8(&b, sv_flags(sv));
		put_handshake(&b, sv, &h0, 0);
		n = all_requests(id, r);
		for (int i = 0; i < n; i++)
			put_frame(&b, &r[i]);
		reqs_free(r, n);
		frame(&b, RDPS_REQ_SHUTDOWN, 0, NULL, 0);
		snprintf(name, sizeof(name), "%s-all-requests", sv_names[sv]);
		save("frames", name, &b);
		/* The same, sent 7 bytes at a time. */
		b.p[0] |= 0x50;
		snprintf(name, sizeof(name), "%s-chunked-7", sv_names[sv]);
		save("frames", name, &b);

		/* An observer, from this machine and from elsewhere. */
		for (int remote = 0; remote < 2; remote++) {
			reset(&b);
			put_u8(&b, (uint8_t)(sv_flags(sv) | (remote ? 8 : 0)));
			put_handshake(&b, sv, &obs, 0);
			n = observer_requests(r);
			for (int i = 0; i < n; i++)
				put_frame(&b, &r[i]);
			reqs_free(r, n);
			snprintf(name, sizeof(name), "%s-observer%s", sv_names[sv],
				 remote ? "-remote" : "");
			save("frames", name, &b);
		}

		/* A client from elsewhere: refused in protected mode. */
		reset(&b);
		put_u8(&b, (uint8_t)(sv_flags(sv) | 8));
		put_handshake(&b, sv, &h0, 0);
		frame(&b, RDPS_REQ_STATS, 0, NULL, 0);
		snprintf(name, sizeof(name), "%s-remote-client", sv_names[sv]);
		save("frames", name, &b);

		/* Two clients of one job: the collectives complete across them. */
		reset(&s);
		put_handshake(&s, sv, &a, 0);
		frame(&s, RDPS_REQ_ALLREDUCE, 0, vec, sizeof(vec));
		frame(&s, RDPS_REQ_BARRIER, 0, NULL, 0);
		frame(&s, RDPS_REQ_CHECKPOINT, 0, NULL, 0);
		first = (uint16_t)s.len;
		put_handshake(&s, sv, &bh, 0);
		frame(&s, RDPS_REQ_ALLREDUCE, 0, vec, sizeof(vec));
		frame(&s, RDPS_REQ_BARRIER, 0, NULL, 0);
		frame(&s, RDPS_REQ_CHECKPOINT, 0, NULL, 0);
		reset(&b);
		put_u8(&b, (uint8_t)(2 | sv_flags(sv)));
		put(&b, &first, sizeof(first));
		put(&b, s.p, s.len);
		snprintf(name, sizeof(name), "%s-two-clients", sv_names[sv]);
		save("frames", name, &b);

		/* Refusals the server must answer without closing... */
		reset(&b);
		put_u8(&b, sv_flags(sv));
		put_handshake(&b, sv, &h0, 0);
		n = refused_requests(id, r);
		for (int i = 0; i < n; i++)
			put_frame(&b, &r[i]);
		reqs_free(r, n);
		frame(&b, RDPS_REQ_HELLO, 0, &h0, sizeof(h0)); /* second hello: closes */
		snprintf(name, sizeof(name), "%s-refusals", sv_names[sv]);
		save("frames", name, &b);

		if (!(sv & FUZZ_SRV_SECRET))
			continue;
		/* A wrong MAC, and requests without the AUTH. */
		reset(&b);
		put_u8(&b, sv_flags(sv));
		put_handshake(&b, sv, &h0, 1);
		frame(&b, RDPS_REQ_STATS, 0, NULL, 0);
		snprintf(name, sizeof(name), "%s-wrong-mac", sv_names[sv]);
		save("frames", name, &b);
		reset(&b);
		put_u8(&b, sv_flags(sv));
		frame(&b, RDPS_REQ_HELLO, 0, &h0, sizeof(h0));
		frame(&b, RDPS_REQ_STATS, 0, NULL, 0);
		snprintf(name, sizeof(name), "%s-no-auth", sv_names[sv]);
		save("frames", name, &b);
	}

	/* ...and framing errors that close the connection. */
	{
		static const uint64_t id[1] = { 40 };
		struct rdps_wire_hello h0 = fuzz_hello(1, 0, 1, 0);
		struct rdps_wire_hdr h;

		reset(&b);
		put_u8(&b, 0);
		req_rows(&r[0], RDPS_REQ_PULL, 0, 4, id, 1, 0); /* before the hello */
		put_frame(&b, &r[0]);
		reqs_free(r, 1);
		save("frames", "s1-plain-pull-before-hello", &b);
		reset(&b);
		put_u8(&b, 0);
		put_handshake(&b, 0, &h0, 0);
		rdps_wire_hdr_init(&h, RDPS_REQ_STATS, 0, 0);
		h.version = RDPS_WIRE_VERSION - 1;
		put(&b, &h, sizeof(h));
		rdps_wire_hdr_init(&h, RDPS_REQ_PULL, RDPS_WIRE_MAX_FRAME + 1, 0);
		put(&b, &h, sizeof(h));
		save("frames", "s1-plain-bad-version", &b);
		reset(&b);
		put_u8(&b, 0);
		h0.server_id = 0;
		put_handshake(&b, 0, &h0, 0);
		save("frames", "s1-plain-wrong-server", &b);
		/* A frame announced and never finished: holds its room in the
		 * request budget until the client goes. */
		reset(&b);
		put_u8(&b, 0);
		h0.server_id = 1;
		put_handshake(&b, 0, &h0, 0);
		rdps_wire_hdr_init(&h, RDPS_REQ_PUSH, 400000, 0);
		put(&b, &h, sizeof(h));
		put(&b, "\0\0\0\0\1\0\0\0", 8);
		save("frames", "s1-plain-partial-frame", &b);
	}
	free(b.p);
	free(s.p);
}

/* ---------------------------------------------------------------------- */
/* fuzz_requests: records                                                  */

enum { K_FRAME, K_FIXED, K_HELLO, K_CLOSE, K_OPEN, K_READ };

static void rec_op(struct buf *b, int conn, int kind)
{
	put_u8(b, (uint8_t)(conn | kind << 2));
}

static void rec_req(struct buf *b, int conn, int kind, const struct req *r)
{
	uint16_t len = (uint16_t)r->p.len;

	rec_op(b, conn, kind);
	put_u8(b, r->type);
	put(b, &len, sizeof(len));
	put(b, r->p.p, r->p.len);
}

static void rec_hello(struct buf *b, int conn, uint8_t client, uint8_t nclients, uint8_t flags)
{
	rec_op(b, conn, K_HELLO);
	put_u8(b, client);
	put_u8(b, nclients);
	put_u8(b, flags);
	put_u8(b, 0);
}

static void rec_open(struct buf *b, int conn, uint8_t flags)
{
	rec_op(b, conn, K_OPEN);
	put_u8(b, flags);
}

static void seeds_requests(void)
{
	struct req r[MAX_REQS];
	struct buf b = { 0 };
	char name[128];
	int n;

	for (int sv = 0; sv < FUZZ_NUM_SERVERS; sv++) {
		uint32_t id = fuzz_servers[sv].id;
		uint64_t big = FUZZ_GRAPH_BIG_NODE(id), e0 = id ? 32 : 0, ents[32];
		double vec[2] = { 0.5, 4.0 };

		for (int i = 0; i < 32; i++)
			ents[i] = e0 + (uint64_t)i;
		/* Every kind, as "fixed" records, then closed. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_hello(&b, 0, 0, 1, 0);
		n = all_requests(id, r);
		for (int i = 0; i < n; i++)
			rec_req(&b, 0, K_FIXED, &r[i]);
		reqs_free(r, n);
		rec_op(&b, 0, K_CLOSE);
		snprintf(name, sizeof(name), "%s-all-kinds", sv_names[sv]);
		save("requests", name, &b);

		/* Refusals, as raw frames. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_hello(&b, 1, 0, 1, 0);
		n = refused_requests(id, r);
		for (int i = 0; i < n; i++)
			rec_req(&b, 1, K_FRAME, &r[i]);
		reqs_free(r, n);
		snprintf(name, sizeof(name), "%s-refusals", sv_names[sv]);
		save("requests", name, &b);

		/* Observers: of this machine, and from elsewhere. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_hello(&b, 0, 0, 1, 1);
		rec_open(&b, 2, 1);
		rec_hello(&b, 2, 0, 1, 1);
		n = observer_requests(r);
		for (int i = 0; i < n; i++) {
			rec_req(&b, 0, K_FRAME, &r[i]);
			rec_req(&b, 2, K_FRAME, &r[i]);
		}
		reqs_free(r, n);
		snprintf(name, sizeof(name), "%s-observers", sv_names[sv]);
		save("requests", name, &b);

		/* Two clients of a job: collectives and checkpoints across
		 * them; the first leaves in a barrier. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_hello(&b, 0, 0, 2, 0);
		rec_hello(&b, 1, 1, 2, 0);
		for (int c = 0; c < 2; c++) {
			req_raw(&r[0], RDPS_REQ_ALLREDUCE, vec, sizeof(vec));
			rec_req(&b, c, K_FIXED, &r[0]);
			reqs_free(r, 1);
			req_raw(&r[0], RDPS_REQ_CHECKPOINT, NULL, 0);
			rec_req(&b, c, K_FIXED, &r[0]);
			reqs_free(r, 1);
		}
		req_raw(&r[0], RDPS_REQ_BARRIER, NULL, 0);
		rec_req(&b, 0, K_FIXED, &r[0]);
		reqs_free(r, 1);
		rec_op(&b, 0, K_CLOSE);
		snprintf(name, sizeof(name), "%s-two-clients", sv_names[sv]);
		save("requests", name, &b);

		/* A client that does not read its replies while it asks for
		 * large ones (rows of 64,000 bytes of a table it makes, more than
		 * the kernel's socket buffers and the reply budget hold; samples
		 * of 1024 edges), and one that reads: the reply budget fills,
		 * the reader goes on. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_open(&b, 0, 2);
		rec_hello(&b, 0, 0, 2, 0);
		rec_hello(&b, 1, 1, 2, 0);
		req_table(&r[0], RDPS_TABLE_CREATE, id ? FUZZ_NUM_TABLES : RDPS_TABLE_ANY_ID, "wide",
			  60, 16000, RDPS_DTYPE_F32, RDPS_OPT_NONE);
		rec_req(&b, 0, K_FIXED, &r[0]);
		reqs_free(r, 1);
		for (int i = 0; i < 28; i++) {
			uint64_t lo = id ? 30 : 0, wide[4] = { lo, lo + 9, lo + 19, lo + 29 };

			req_rows(&r[0], RDPS_REQ_PULL, FUZZ_NUM_TABLES, 16000, wide, 4, 0);
			rec_req(&b, 0, K_FIXED, &r[0]);
			reqs_free(r, 1);
			if (i % 4 == 0) {
				req_sample(&r[0], RDPS_SAMPLE_MAX_FANOUT, &big, 1);
				rec_req(&b, 0, K_FIXED, &r[0]);
				reqs_free(r, 1);
				req_rows(&r[0], RDPS_REQ_PULL, FUZZ_T_ENTITY, 4, ents, 32, 0);
				rec_req(&b, 1, K_FIXED, &r[0]);
				reqs_free(r, 1);
			}
		}
		rec_op(&b, 0, K_READ);
		snprintf(name, sizeof(name), "%s-slow-reader", sv_names[sv]);
		save("requests", name, &b);

		/* Tables: made up to the table budget, dropped, made again. */
		reset(&b);
		put_u8(&b, (uint8_t)sv);
		rec_hello(&b, 0, 0, 1, 0);
		for (int i = 0; i < 3; i++) {
			char tn[16];

			snprintf(tn, sizeof(tn), "big%d", i);
			req_table(&r[0], RDPS_TABLE_CREATE, id ? FUZZ_NUM_TABLES + (uint32_t)i
							       : RDPS_TABLE_ANY_ID,
				  tn, 1000, 400, RDPS_DTYPE_F32, RDPS_OPT_ADAM);
			rec_req(&b, 0, K_FIXED, &r[0]);
			reqs_free(r, 1);
		}
		req_table(&r[0], RDPS_TABLE_DROP, 0, "big0", 0, 0, 0, 0);
		rec_req(&b, 0, K_FIXED, &r[0]);
		reqs_free(r, 1);
		req_table(&r[0], RDPS_TABLE_CREATE, id ? FUZZ_NUM_TABLES : RDPS_TABLE_ANY_ID, "u8",
			  5, 7, RDPS_DTYPE_U8, RDPS_OPT_NONE);
		rec_req(&b, 0, K_FIXED, &r[0]);
		reqs_free(r, 1);
		snprintf(name, sizeof(name), "%s-tables", sv_names[sv]);
		save("requests", name, &b);
	}
	free(b.p);
}

/* ---------------------------------------------------------------------- */
/* Dictionaries of the wire targets: header starts of every frame type at
 * this wire version (written with the seeds, so a version bump updates
 * them). */

static void dict_line(FILE *f, const char *name, const void *bytes, size_t n)
{
	fprintf(f, "%s=\"", name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "\\x%02x", ((const uint8_t *)bytes)[i]);
	fprintf(f, "\"\n");
}

static void write_dict(const char *dir, const char *target)
{
	static const struct { const char *name; uint8_t type; } types[] = {
		{ "hello", RDPS_REQ_HELLO }, { "pull", RDPS_REQ_PULL },
		{ "push", RDPS_REQ_PUSH }, { "flush", RDPS_REQ_FLUSH },
		{ "barrier", RDPS_REQ_BARRIER }, { "stats", RDPS_REQ_STATS },
		{ "shutdown", RDPS_REQ_SHUTDOWN }, { "allreduce", RDPS_REQ_ALLREDUCE },
		{ "checkpoint", RDPS_REQ_CHECKPOINT }, { "table", RDPS_REQ_TABLE },
		{ "set", RDPS_REQ_SET }, { "sample", RDPS_REQ_SAMPLE },
		{ "state", RDPS_REQ_STATE },
		{ "challenge", RDPS_WIRE_CHALLENGE }, { "auth", RDPS_WIRE_AUTH },
		{ "bind", RDPS_WIRE_BIND },
	};
	_Static_assert(RDPS_REQ_MAX == 15, "a new request kind: add it to the dictionaries");
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.dict", dir, target);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fprintf(f, "# %s: written by fuzz_seeds for wire version %d: header starts (magic,\n"
		"# version, type, flags) of every frame type and reply, lengths, statuses.\n",
		target, RDPS_WIRE_VERSION);
	if (strcmp(target, "requests")) {
		struct rdps_wire_hdr h;

		dict_line(f, "magic", "RDPS", 4);
		for (size_t i = 0; i < RDPS_ARRAY_SIZE(types); i++) {
			char name[64];

			rdps_wire_hdr_init(&h, types[i].type, 0, 0);
			dict_line(f, types[i].name, &h, 8);
			rdps_wire_hdr_init(&h, types[i].type | RDPS_WIRE_REPLY, 0, 0);
			snprintf(name, sizeof(name), "%s_reply", types[i].name);
			dict_line(f, name, &h, 8);
		}
	}
	{
		uint32_t v[] = { sizeof(struct rdps_wire_hello), RDPS_MAC_LEN,
				 sizeof(struct rdps_table_req), sizeof(struct rdps_server_stats),
				 RDPS_SAMPLE_MAX_FANOUT, FUZZ_NUM_TABLES, RDPS_TABLE_ANY_ID,
				 RDPS_SAMPLE_NO_PROB, sizeof(struct rdps_sample_req),
				 sizeof(struct rdps_sample_group), sizeof(struct rdps_state_req) };
		int32_t st[] = { -EACCES, -EPROTO, -EMSGSIZE };

		for (size_t i = 0; i < RDPS_ARRAY_SIZE(v); i++) {
			char name[32];

			snprintf(name, sizeof(name), "u32_%zu", i);
			dict_line(f, name, &v[i], 4);
		}
		for (size_t i = 0; i < RDPS_ARRAY_SIZE(st); i++) {
			char name[32];

			snprintf(name, sizeof(name), "status_%zu", i);
			dict_line(f, name, &st[i], 4);
		}
	}
	if (!strcmp(target, "requests"))
		fprintf(f, "graph_indptr=\"%s\"\ngraph_edges=\"%s\"\ngraph_outptr=\"%s\"\n"
			"graph_outedges=\"%s\"\nedata=\"%s\"\nentity=\"entity\"\n",
			RDPS_GRAPH_INDPTR, RDPS_GRAPH_EDGES, RDPS_GRAPH_OUTPTR,
			RDPS_GRAPH_OUTEDGES, RDPS_GRAPH_EDATA_PREFIX);
	fclose(f);
}

/* ---------------------------------------------------------------------- */
/* fuzz_handshake: server byte streams                                     */

static void welcome(struct buf *b, int authenticated, const uint8_t snonce[RDPS_NONCE_LEN])
{
	struct rdps_region regions[2];
	struct rdps_wire_welcome w;
	uint8_t cnonce[RDPS_NONCE_LEN];
	size_t len = rdps_wire_welcome_size(2);
	uint8_t *p = calloc(1, len);

	if (!p)
		abort();
	memset(regions, 0, sizeof(regions));
	regions[0].desc = (struct rdps_table_desc){ .table_id = 0, .dim = 4, .num_rows = 64,
						    .lo = 32, .hi = 64,
						    .stride = (uint32_t)rdps_row_stride(4) };
	snprintf(regions[0].desc.name, RDPS_TABLE_NAME_MAX, "entity");
	regions[1].desc = (struct rdps_table_desc){ .table_id = 1, .dim = 3, .num_rows = 8,
						    .lo = 4, .hi = 8,
						    .stride = (uint32_t)rdps_row_stride(3) };
	snprintf(regions[1].desc.name, RDPS_TABLE_NAME_MAX, "relation");
	rdps_wire_build_welcome(p, SERVER_ID, 2, regions, 2);
	memcpy(&w, p, sizeof(w));
	w.session = 0x1234;
	if (authenticated) {
		/* The client's nonce comes from the wrapped rdps_random_bytes. */
		for (size_t i = 0; i < sizeof(cnonce); i++)
			cnonce[i] = FUZZ_RANDOM_BYTE(i);
		w.flags |= RDPS_WELCOME_AUTHENTICATED;
		rdps_auth_mac(&secret, RDPS_AUTH_SERVER_LABEL, cnonce, sizeof(cnonce), snonce,
			      RDPS_NONCE_LEN, &w.session, sizeof(w.session), w.proof);
	}
	memcpy(p, &w, sizeof(w));
	frame(b, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, 0, p, (uint32_t)len);
	free(p);
}

static void error_reply(struct buf *b, uint8_t type, int status, const char *msg)
{
	char text[RDPS_WIRE_ERRMSG_MAX] = "";
	size_t n = strlen(msg), padded = (n + 7) / 8 * 8;

	memcpy(text, msg, n);
	frame(b, type | RDPS_WIRE_REPLY, status, text, (uint32_t)padded);
}

/* Replies to the client's pull (2 rows of dim 4), push, flush, stats,
 * barrier and allreduce (2 doubles), in order. */
static void replies(struct buf *b, int push_error)
{
	float rows[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct rdps_server_stats st = { .connections = 1 };
	double sum[2] = { 2.0, 4.0 };

	frame(b, RDPS_REQ_PULL | RDPS_WIRE_REPLY, 0, rows, sizeof(rows));
	if (push_error)
		error_reply(b, RDPS_REQ_PUSH, -ERANGE, "id 99 of table 'entity' is outside");
	else
		frame(b, RDPS_REQ_PUSH | RDPS_WIRE_REPLY, 0, NULL, 0);
	frame(b, RDPS_REQ_FLUSH | RDPS_WIRE_REPLY, 0, NULL, 0);
	frame(b, RDPS_REQ_STATS | RDPS_WIRE_REPLY, 0, &st, sizeof(st));
	frame(b, RDPS_REQ_BARRIER | RDPS_WIRE_REPLY, 0, NULL, 0);
	frame(b, RDPS_REQ_ALLREDUCE | RDPS_WIRE_REPLY, 0, sum, sizeof(sum));
}

static void seeds_handshake(void)
{
	uint8_t snonce[RDPS_NONCE_LEN];
	struct buf b = { 0 };

	memset(snonce, 0x22, sizeof(snonce));
	reset(&b);
	put_u8(&b, 0);
	welcome(&b, 0, NULL);
	replies(&b, 0);
	save("handshake", "plain-welcome-replies", &b);

	reset(&b);
	put_u8(&b, 0);
	welcome(&b, 0, NULL);
	replies(&b, 1);
	save("handshake", "plain-push-error", &b);

	reset(&b);
	put_u8(&b, 1);
	frame(&b, RDPS_WIRE_CHALLENGE, 0, snonce, sizeof(snonce));
	welcome(&b, 1, snonce);
	replies(&b, 0);
	save("handshake", "secret-welcome-replies", &b);

	reset(&b);
	put_u8(&b, 3);
	frame(&b, RDPS_WIRE_CHALLENGE, 0, snonce, sizeof(snonce));
	welcome(&b, 1, snonce);
	error_reply(&b, RDPS_REQ_PULL, -EPERM, "an observer connection may only ask for stats");
	save("handshake", "secret-observer", &b);

	reset(&b);
	put_u8(&b, 1);
	frame(&b, RDPS_WIRE_CHALLENGE, 0, snonce, sizeof(snonce));
	error_reply(&b, RDPS_REQ_HELLO, -EACCES,
		    "authentication failed: the client's shared secret differs from the server's");
	save("handshake", "secret-refused", &b);

	reset(&b);
	put_u8(&b, 1);
	welcome(&b, 0, NULL);
	save("handshake", "secret-downgrade", &b);

	reset(&b);
	put_u8(&b, 0);
	error_reply(&b, RDPS_REQ_HELLO, -EPROTO,
		    "client expected server 1 at this address, this is server 0");
	save("handshake", "plain-wrong-server", &b);
	free(b.p);
}

/* ---------------------------------------------------------------------- */
/* Text formats                                                            */

static void save_text(const char *target, const char *name, const char *text)
{
	struct buf b = { 0 };

	put_str(&b, text);
	save(target, name, &b);
	free(b.p);
}

static void seeds_ipconfig(void)
{
	save_text("ipconfig", "one-host", "127.0.0.1\n");
	save_text("ipconfig", "ports-and-counts",
		  "# two machines\n10.0.0.1 30050 2\n10.0.0.2 40000 4   # four servers\n");
	save_text("ipconfig", "crlf-tabs", "host-a\t30050\t1\r\n\r\nhost-b 30060\r\n");
	save_text("ipconfig", "bad-port", "10.0.0.1 70000\n");
	save_text("ipconfig", "too-many-fields", "10.0.0.1 1 2 3\n");
}

static const char *const dataset_files[5] = {
	"0\tcat\n1\tdog\n2\tfish\n3\tbig bird\n4\tant\n5\tbee\n",
	"0\teats\n1\tlikes\n",
	("cat\teats\tfish\ndog\tlikes\tcat\nbig bird\teats\tant\nbee\tlikes\tbig bird\n"
	 "fish\teats\tant\nant\tlikes\tbee\ndog\teats\tbee\n"),
	"cat\tlikes\tdog\n",
	"bee\teats\tfish\n",
};

static void dataset_seed(struct buf *b)
{
	for (int i = 0; i < 5; i++) {
		if (i)
			put_str(b, FUZZ_SEP);
		put_str(b, dataset_files[i]);
	}
}

static void seeds_dataset(void)
{
	struct buf b = { 0 };

	dataset_seed(&b);
	save("dataset", "valid-small", &b);
	save_text("dataset", "crlf-blank-lines",
		  "1\tb\r\n\r\n0\ta\r\n" FUZZ_SEP "0\tr\r\n" FUZZ_SEP "a\tr\tb\r\n\r\nb\tr\ta\r\n"
		  FUZZ_SEP "b\tr\ta\n" FUZZ_SEP "a\tr\tb\n");
	save_text("dataset", "unknown-in-valid",
		  "0\ta\n1\tb\n2\tc\n" FUZZ_SEP "0\tr\n" FUZZ_SEP "a\tr\tb\n" FUZZ_SEP
		  "c\tr\ta\n" FUZZ_SEP "\n");
	save_text("dataset", "dict-gap", "0\ta\n2\tb\n" FUZZ_SEP "0\tr\n");
	free(b.p);
}

/* ---------------------------------------------------------------------- */
/* fuzz_partition: a real partition directory, packed                      */

static void write_tree(const char *dir, const char *name, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		abort();
}

static void pack_file(struct buf *b, const char *dir, const char *name)
{
	char path[1024], tmp[65536];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	while ((n = fread(tmp, 1, sizeof(tmp), f)))
		put(b, tmp, n);
	fclose(f);
}

static void seeds_partition(void)
{
	static const char *const names[6] = { "partition.json", "part-0.trp", "part-1.trp",
					      "valid.trp",      "test.trp",   "idmap.bin" };
	static const char *const raw[5] = { "entities.dict", "relations.dict", "train.txt",
					    "valid.txt", "test.txt" };
	char tmpl[] = "/tmp/rdps-fuzz-seeds-XXXXXX", data[1100], out[1100], err[512];
	struct rdps_partition_opts o = { 0 };
	struct rdps_partition_result res;
	struct buf b = { 0 };
	char cmd[1200];

	if (!mkdtemp(tmpl))
		abort();
	snprintf(data, sizeof(data), "%s/data", tmpl);
	snprintf(out, sizeof(out), "%s/part", tmpl);
	mkdir(data, 0755);
	for (int i = 0; i < 5; i++)
		write_tree(data, raw[i], dataset_files[i]);
	o.data_dir = data;
	o.out_dir = out;
	o.k = 2;
	o.method = RDPS_PARTITION_RANDOM;
	o.seed = 7;
	if (rdps_partition_build(&o, &res, err, sizeof(err))) {
		fprintf(stderr, "fuzz_seeds: partition: %s\n", err);
		exit(1);
	}
	for (int fix = 0; fix < 2; fix++) {
		reset(&b);
		put_u8(&b, (uint8_t)('0' + fix));
		for (int i = 0; i < 6; i++) {
			if (i)
				put_str(&b, FUZZ_SEP);
			pack_file(&b, out, names[i]);
		}
		save("partition", fix ? "k2-fixup" : "k2-exact", &b);
	}
	/* pread instead of io_uring. */
	b.p[0] = '3';
	save("partition", "k2-fixup-pread", &b);
	/* Only the json: every blob is missing. */
	reset(&b);
	put_u8(&b, '0');
	pack_file(&b, out, "partition.json");
	save("partition", "json-only", &b);
	free(b.p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	if (system(cmd))
		fprintf(stderr, "fuzz_seeds: could not remove %s\n", tmpl);
}

/* ---------------------------------------------------------------------- */
/* fuzz_graph: a real graph partition directory, every file packed          */

#define GN 12
#define GE 30

static void write_npy(const char *dir, const char *name, const char *descr, const void *data,
		      uint64_t rows, uint64_t cols)
{
	char path[1024], err[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (rdps_npy_write(path, descr, data, rows, cols, err, sizeof(err))) {
		fprintf(stderr, "fuzz_seeds: %s\n", err);
		exit(1);
	}
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of dir, sorted, as "NAME\n" and its bytes, sections apart. */
static void pack_dir(struct buf *b, const char *dir)
{
	char *names[64];
	size_t n = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		abort();
	while ((e = readdir(d)) && n < 64)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_name);
	for (size_t i = 0; i < n; i++) {
		if (i)
			put_str(b, FUZZ_SEP);
		put_str(b, names[i]);
		put_u8(b, '\n');
		pack_file(b, dir, names[i]);
		free(names[i]);
	}
}

/* A heterograph (two node types, three etypes, node and edge data of
 * several dtypes) partitioned from arrays, as Python's partition_graph
 * does: both parts, with and without the harness's checksum fix-up. */
static void seeds_graph_hetero(const char *tmp)
{
	enum { NU = 9, NI = 5, EF = 14, EB = 11 };
	int64_t fs[EF], fd[EF], bs[EB], bd[EB];
	float ufeat[NU * 2], prob[EB];
	uint16_t iscore[NI];
	uint8_t ubool[NU];
	int64_t ulabel[NU];
	struct rdps_graph_array udata[3] = {
		{ .name = "feat", .dtype = "float32", .ndim = 2, .shape = { NU, 2 }, .data = ufeat },
		{ .name = "label", .dtype = "int64", .ndim = 1, .shape = { NU }, .data = ulabel },
		{ .name = "train_mask", .dtype = "bool", .ndim = 1, .shape = { NU }, .data = ubool },
	};
	struct rdps_graph_array idata[1] = {
		{ .name = "score", .dtype = "float16", .ndim = 1, .shape = { NI }, .data = iscore },
	};
	struct rdps_graph_array edata[1] = {
		{ .name = "prob", .dtype = "float32", .ndim = 1, .shape = { EB }, .data = prob },
	};
	struct rdps_graph_ntype_input nts[2] = {
		{ .name = "user", .num_nodes = NU, .num_data = 3, .data = udata },
		{ .name = "item", .num_nodes = NI, .num_data = 1, .data = idata },
	};
	struct rdps_graph_etype_input ets[3] = {
		{ .src = "user", .name = "follows", .dst = "user", .num_edges = EF,
		  .src_ids = fs, .dst_ids = fd },
		{ .src = "user", .name = "buys", .dst = "item", .num_edges = EB, .src_ids = bs,
		  .dst_ids = bd, .num_data = 1, .data = edata },
		{ .src = "item", .name = "bought-by", .dst = "user", .num_edges = EB,
		  .src_ids = bd, .dst_ids = bs },
	};
	struct rdps_graph_input in = { .name = "fuzz-hetero", .num_ntypes = 2, .ntypes = nts,
				       .num_etypes = 3, .etypes = ets, .num_classes = 3 };
	struct rdps_graph_partition_opts o = { 0 };
	struct rdps_graph_partition_result res;
	char out[1100], err[512];
	struct buf b = { 0 };

	for (int i = 0; i < EF; i++) {
		fs[i] = (i * 4 + 1) % NU;
		fd[i] = (i * 5 + 2) % NU;
	}
	for (int i = 0; i < EB; i++) {
		bs[i] = (i * 2) % NU;
		bd[i] = (i * 3 + 1) % NI;
		prob[i] = i % 3 ? 0.5f * (float)i : 0.0f;
	}
	for (int v = 0; v < NU; v++) {
		ufeat[2 * v] = (float)v;
		ufeat[2 * v + 1] = 1.0f / (float)(v + 1);
		ulabel[v] = v % 3;
		ubool[v] = (uint8_t)(v % 2);
	}
	for (int v = 0; v < NI; v++)
		iscore[v] = (uint16_t)(0x3c00 + v); /* 1.0, ... */
	snprintf(out, sizeof(out), "%s/hetero", tmp);
	o.out_dir = out;
	o.k = 2;
	o.method = RDPS_PARTITION_RANDOM;
	o.seed = 3;
	if (rdps_graph_partition_build_input(&in, &o, &res, err, sizeof(err))) {
		fprintf(stderr, "fuzz_seeds: heterograph partition: %s\n", err);
		exit(1);
	}
	for (uint8_t part = 0; part < 2; part++) {
		char name[64];

		reset(&b);
		put_u8(&b, part);
		pack_dir(&b, out);
		snprintf(name, sizeof(name), "hetero-part%u", part);
		save("graph", name, &b);
		b.p[0] |= 4;
		snprintf(name, sizeof(name), "hetero-part%u-fixsums", part);
		save("graph", name, &b);
	}
	free(b.p);
}

static void seeds_graph(void)
{
	static const char *const masks[3] = { "train_mask.npy", "val_mask.npy", "test_mask.npy" };
	char tmpl[] = "/tmp/rdps-fuzz-seeds-XXXXXX", data[1100], out[1100], err[512], cmd[1200];
	int64_t edges[2 * GE], etypes[GE], labels[GN];
	float feat[GN * 2];
	uint8_t mask[3][GN];
	struct rdps_graph_partition_opts o = { 0 };
	struct rdps_graph_partition_result res;
	struct buf b = { 0 };
	FILE *f;

	if (!mkdtemp(tmpl))
		abort();
	snprintf(data, sizeof(data), "%s/data", tmpl);
	snprintf(out, sizeof(out), "%s/part", tmpl);
	mkdir(data, 0755);
	for (int i = 0; i < GE; i++) {
		edges[2 * i] = (i * 5 + 1) % GN;
		edges[2 * i + 1] = (i * 7 + 3) % GN;
		etypes[i] = i % 2;
	}
	for (int v = 0; v < GN; v++) {
		feat[2 * v] = (float)v;
		feat[2 * v + 1] = -(float)v;
		labels[v] = v % 3;
		for (int m = 0; m < 3; m++)
			mask[m][v] = (uint8_t)(v % 3 == m);
	}
	write_npy(data, "edges.npy", "<i8", edges, GE, 2);
	write_npy(data, "etypes.npy", "<i8", etypes, GE, 0);
	write_npy(data, "features.npy", "<f4", feat, GN, 2);
	write_npy(data, "labels.npy", "<i8", labels, GN, 0);
	for (int m = 0; m < 3; m++)
		write_npy(data, masks[m], "|u1", mask[m], GN, 0);
	snprintf(cmd, sizeof(cmd), "%s/graph.json", data);
	f = fopen(cmd, "w");
	if (!f)
		abort();
	fprintf(f, "{\"name\": \"fuzz\", \"num_nodes\": %d, \"num_edges\": %d, "
		"\"num_classes\": 3, \"num_etypes\": 2}\n", GN, GE);
	fclose(f);
	o.data_dir = data;
	o.out_dir = out;
	o.k = 2;
	o.method = RDPS_PARTITION_RANDOM;
	o.seed = 5;
	if (rdps_graph_partition_build(&o, &res, err, sizeof(err))) {
		fprintf(stderr, "fuzz_seeds: graph partition: %s\n", err);
		exit(1);
	}
	for (uint8_t part = 0; part < 2; part++) {
		reset(&b);
		put_u8(&b, part);
		pack_dir(&b, out);
		save("graph", part ? "k2-part1" : "k2-part0", &b);
		/* the harness records the files' sums: mutations reach the
		 * parsers */
		b.p[0] |= 4;
		save("graph", part ? "k2-part1-fixsums" : "k2-part0-fixsums", &b);
	}
	seeds_graph_hetero(tmpl);
	/* Part 2 of 2: refused. */
	b.p[0] = 2;
	save("graph", "k2-part2", &b);
	reset(&b);
	put_u8(&b, 0);
	put_str(&b, "partition.json\n");
	pack_file(&b, out, "partition.json");
	save("graph", "json-only", &b);
	free(b.p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	if (system(cmd))
		fprintf(stderr, "fuzz_seeds: could not remove %s\n", tmpl);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: %s CORPUS_DIR [DICT_DIR] (e.g. tests/fuzz/corpus "
			"tests/fuzz/dict)\n", argv[0]);
		return 2;
	}
	out_root = argv[1];
	mkdir(out_root, 0755);
	fuzz_quiet_logs();
	fuzz_secret(&secret);
	fuzz_servers_describe();
	seeds_frames();
	seeds_requests();
	seeds_handshake();
	seeds_ipconfig();
	seeds_dataset();
	seeds_partition();
	seeds_graph();
	if (argc == 3) {
		write_dict(argv[2], "frames");
		write_dict(argv[2], "handshake");
		write_dict(argv[2], "requests");
	}
	return 0;
}
