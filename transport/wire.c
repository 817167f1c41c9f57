// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdps/common.h"
#include "wire.h"

const char *rdps_req_name(int type)
{
	static const char *const names[RDPS_REQ_MAX] = {
		[RDPS_REQ_HELLO] = "hello",	[RDPS_REQ_PULL] = "pull",
		[RDPS_REQ_PUSH] = "push",	[RDPS_REQ_FLUSH] = "flush",
		[RDPS_REQ_BARRIER] = "barrier", [RDPS_REQ_STATS] = "stats",
		[RDPS_REQ_SHUTDOWN] = "shutdown", [RDPS_REQ_BYE] = "bye",
		[RDPS_REQ_ALLREDUCE] = "allreduce", [RDPS_REQ_CHECKPOINT] = "checkpoint",
		[RDPS_REQ_TABLE] = "table",	[RDPS_REQ_SET] = "set",
		[RDPS_REQ_SAMPLE] = "sample", [RDPS_REQ_STATE] = "state",
	};

	if (type <= 0 || type >= RDPS_REQ_MAX || !names[type])
		return "unknown";
	return names[type];
}

int rdps_wire_check_hdr(const struct rdps_wire_hdr *h, char *why, size_t whylen)
{
	if (h->magic != RDPS_WIRE_MAGIC) {
		snprintf(why, whylen, "bad frame magic 0x%08x (not an rdps peer?)",
			 h->magic);
		return -EPROTO;
	}
	if (h->version != RDPS_WIRE_VERSION) {
		snprintf(why, whylen,
			 "protocol version %u not supported (this side speaks %u)",
			 h->version, RDPS_WIRE_VERSION);
		return -EPROTO;
	}
	if (h->len > RDPS_WIRE_MAX_FRAME) {
		snprintf(why, whylen, "frame length %u over the limit of %u bytes",
			 h->len, RDPS_WIRE_MAX_FRAME);
		return -EMSGSIZE;
	}
	return 0;
}

uint32_t rdps_wire_request_max(uint8_t type, bool observer)
{
	if (observer)
		return 0;
	switch (type) {
	case RDPS_REQ_HELLO:
		return sizeof(struct rdps_wire_hello); /* refused: one per connection */
	case RDPS_REQ_PULL:
	case RDPS_REQ_PUSH:
	case RDPS_REQ_SET:
	case RDPS_REQ_STATE:
		return RDPS_WIRE_MAX_FRAME;
	case RDPS_REQ_TABLE:
		return sizeof(struct rdps_table_req);
	case RDPS_REQ_SAMPLE:
		/* fanout >= 1, so seeds <= RDPS_SAMPLE_MAX_EDGES */
		return sizeof(struct rdps_sample_req) + RDPS_SAMPLE_MAX_EDGES * 8u;
	case RDPS_REQ_ALLREDUCE:
		return RDPS_ALLREDUCE_MAX * 8;
	case RDPS_WIRE_BIND:
		return RDPS_WIRE_BIND_MAX;
	default: /* flush, barrier, stats, shutdown, checkpoint; unknown */
		return 0;
	}
}

int rdps_wire_check_sample(const void *payload, size_t len, char *why, size_t whylen)
{
	struct rdps_sample_req r;
	struct rdps_sample_group gr;
	uint64_t want, slots = 0;

	if (len < sizeof(r)) {
		snprintf(why, whylen, "sample request of %zu bytes is shorter than its "
			 "%zu-byte header", len, sizeof(r));
		return -EPROTO;
	}
	memcpy(&r, payload, sizeof(r));
	want = sizeof(r) + (uint64_t)r.num_groups * sizeof(gr) + (uint64_t)r.n * 8 +
	       (uint64_t)r.num_exclude * 8;
	if (len != want) {
		snprintf(why, whylen, "sample request for %u slots in %u groups excluding %u "
			 "edges should be %llu bytes, got %zu", r.n, r.num_groups,
			 r.num_exclude, (unsigned long long)want, len);
		return -EPROTO;
	}
	if (!r.n || !r.fanout || r.fanout > RDPS_SAMPLE_MAX_FANOUT ||
	    (uint64_t)r.n * r.fanout > RDPS_SAMPLE_MAX_EDGES || !r.num_groups ||
	    r.num_groups > RDPS_SAMPLE_MAX_GROUPS || r.reserved ||
	    (r.flags & ~(RDPS_SAMPLE_F_OUT | RDPS_SAMPLE_F_REPLACE))) {
		snprintf(why, whylen, "sample request for %u slots in %u groups with fanout %u, "
			 "flags 0x%x (want 1..%u slots, 1..%u groups, fanout 1..%u, slots x "
			 "fanout <= %u, known flags)", r.n, r.num_groups, r.fanout, r.flags,
			 RDPS_SAMPLE_MAX_EDGES, RDPS_SAMPLE_MAX_GROUPS, RDPS_SAMPLE_MAX_FANOUT,
			 RDPS_SAMPLE_MAX_EDGES);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < r.num_groups; i++) {
		memcpy(&gr, (const char *)payload + sizeof(r) + (size_t)i * sizeof(gr),
		       sizeof(gr));
		if (!gr.fanout || gr.fanout > r.fanout || !gr.count ||
		    (gr.prob_table != RDPS_SAMPLE_NO_PROB &&
		     ((r.flags & RDPS_SAMPLE_F_OUT) ||
		      (gr.prob_dtype != RDPS_DTYPE_F32 && gr.prob_dtype != RDPS_DTYPE_F64)))) {
			snprintf(why, whylen, "sample group %u: fanout %u of %u slots, prob table "
				 "%u of dtype %u (want fanout 1..%u, slots, and weights of "
				 "float32/float64 for in-edges only)", i, gr.fanout, gr.count,
				 gr.prob_table, gr.prob_dtype, r.fanout);
			return -EINVAL;
		}
		slots += gr.count;
	}
	if (slots != r.n) {
		snprintf(why, whylen, "sample groups hold %llu slots, the header says %u",
			 (unsigned long long)slots, r.n);
		return -EINVAL;
	}
	return 0;
}

int rdps_wire_check_rows(int type, const void *payload, uint32_t len,
			 const struct rdps_region *regions, uint32_t nregions,
			 char *why, size_t whylen)
{
	struct rdps_wire_rows rows;
	uint64_t want;

	if (len < sizeof(rows)) {
		snprintf(why, whylen, "%s request of %u bytes is shorter than its header",
			 rdps_req_name(type), len);
		return -EPROTO;
	}
	memcpy(&rows, payload, sizeof(rows));
	if (rows.table >= nregions ||
	    !__atomic_load_n(&regions[rows.table].desc.dim, __ATOMIC_ACQUIRE)) {
		snprintf(why, whylen, "unknown table %u (server has %u slots)", rows.table,
			 nregions);
		return -ENOENT;
	}
	want = sizeof(rows) + (uint64_t)rows.n * 8;
	if (type == RDPS_REQ_PUSH || type == RDPS_REQ_SET)
		want += (uint64_t)rows.n * regions[rows.table].desc.dim * 4;
	if (want != len) {
		snprintf(why, whylen,
			 "%s of %u rows of table '%s' should be %llu bytes, got %u",
			 rdps_req_name(type), rows.n, regions[rows.table].desc.name,
			 (unsigned long long)want, len);
		return -EPROTO;
	}
	return 0;
}

size_t rdps_wire_welcome_size(uint32_t nregions)
{
	return sizeof(struct rdps_wire_welcome) +
	       (size_t)nregions * sizeof(struct rdps_table_desc);
}

void rdps_wire_build_welcome(void *buf, uint32_t server_id,
			     uint32_t num_servers,
			     const struct rdps_region *regions, uint32_t n)
{
	struct rdps_wire_welcome w = {
		.server_id = server_id,
		.num_servers = num_servers,
		.num_tables = n,
	};
	char *p = buf;

	memcpy(p, &w, sizeof(w));
	p += sizeof(w);
	for (uint32_t i = 0; i < n; i++, p += sizeof(struct rdps_table_desc))
		memcpy(p, &regions[i].desc, sizeof(struct rdps_table_desc));
}

int rdps_wire_parse_welcome(const void *payload, uint32_t len,
			    uint32_t expect_server, struct rdps_conn *c,
			    struct rdps_wire_welcome *out, char *why, size_t whylen)
{
	struct rdps_wire_welcome w;

	if (len < sizeof(w)) {
		snprintf(why, whylen, "welcome of %u bytes is too short", len);
		return -EPROTO;
	}
	memcpy(&w, payload, sizeof(w));
	if (w.num_tables > RDPS_MAX_TABLES ||
	    len != rdps_wire_welcome_size(w.num_tables)) {
		snprintf(why, whylen, "welcome lists %u tables in %u bytes",
			 w.num_tables, len);
		return -EPROTO;
	}
	if (w.server_id != expect_server) {
		snprintf(why, whylen,
			 "the server at this address is server %u, but the ip_config says server %u",
			 w.server_id, expect_server);
		return -EPROTO;
	}
	*out = w;
	c->session = w.session;
	c->welcome = (struct rdps_welcome_info){ .instance = w.instance,
						 .rows_held = w.rows_held,
						 .ckpt_seq = w.ckpt_seq,
						 .ckpt_age_ms = w.ckpt_age_ms };
	c->server_id = w.server_id;
	c->num_servers = w.num_servers;
	c->num_tables = w.num_tables;
	memcpy(c->tables, (const char *)payload + sizeof(w),
	       w.num_tables * sizeof(struct rdps_table_desc));
	for (uint32_t i = 0; i < w.num_tables; i++) {
		struct rdps_table_desc *t = &c->tables[i];

		t->name[RDPS_TABLE_NAME_MAX - 1] = '\0';
		if (t->dim == 0)
			continue; /* an empty slot (dropped, or not made here yet) */
		if (t->table_id != i || t->dim > RDPS_MAX_DIM || t->dtype >= RDPS_DTYPE_COUNT ||
		    (t->elems && rdps_dtype_row_words((int)t->dtype, t->elems) != t->dim) ||
		    t->lo > t->hi || t->hi > t->num_rows ||
		    t->stride < rdps_row_stride(t->dim)) {
			snprintf(why, whylen, "welcome has a malformed table %u ('%s')",
				 i, t->name);
			return -EPROTO;
		}
	}
	return 0;
}

int rdps_wire_check_state(const void *payload, size_t len, char *why, size_t whylen)
{
	struct rdps_state_req r;
	uint64_t want, data;

	if (len < sizeof(r)) {
		snprintf(why, whylen, "state request of %zu bytes is shorter than its %zu-byte "
			 "header", len, sizeof(r));
		return -EPROTO;
	}
	memcpy(&r, payload, sizeof(r));
	if (r.op != RDPS_STATE_READ && r.op != RDPS_STATE_WRITE) {
		snprintf(why, whylen, "state request of unknown operation %u", r.op);
		return -EPROTO;
	}
	/* n < 2^32 and floats_per_row < 2^32: the products fit 64 bits. */
	data = r.op == RDPS_STATE_WRITE ? (uint64_t)r.n * r.floats_per_row * 4 : 0;
	want = sizeof(r) + (uint64_t)r.n * 8 + data;
	if (len != want || (r.op == RDPS_STATE_READ &&
			    (uint64_t)r.n * r.floats_per_row * 4 > RDPS_WIRE_MAX_FRAME)) {
		snprintf(why, whylen, "state %s of %u rows x %u floats: %zu bytes, want %llu%s",
			 r.op == RDPS_STATE_READ ? "read" : "write", r.n, r.floats_per_row, len,
			 (unsigned long long)want, r.op == RDPS_STATE_READ ? " (and a reply within "
			 "the frame limit)" : "");
		return -EPROTO;
	}
	return 0;
}

bool rdps_wire_call_len_ok(uint32_t type, size_t len)
{
	switch (type) {
	case RDPS_REQ_FLUSH:
	case RDPS_REQ_BARRIER:
	case RDPS_REQ_STATS:
	case RDPS_REQ_SHUTDOWN:
	case RDPS_REQ_CHECKPOINT:
		return len == 0;
	case RDPS_REQ_ALLREDUCE:
		return len % 8 == 0 && len <= RDPS_ALLREDUCE_MAX * 8;
	case RDPS_REQ_TABLE:
		return len == sizeof(struct rdps_table_req);
	case RDPS_REQ_SAMPLE:
		return len >= sizeof(struct rdps_sample_req) && len % 8 == 0;
	case RDPS_REQ_STATE:
		return len >= sizeof(struct rdps_state_req) && len % 4 == 0 &&
		       len <= RDPS_WIRE_MAX_FRAME;
	default:
		return false;
	}
}
