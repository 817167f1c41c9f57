// SPDX-License-Identifier: MIT
/*
 * fuzz_seeds: writes the seed corpus of every fuzz target into
 * OUT/<target>/ (the repo's copy is tests/fuzz/corpus/). Run by hand after a
 * wire or file format change: build-fuzz/fuzz_seeds tests/fuzz/corpus
 *
 * Seeds are built with the library's own encoders where it has them
 * (rdps_wire_build_welcome, rdps_auth_mac, rdps_partition_build and the blob
 * writer) so they stay valid as the formats evolve. MACs assume the fuzz
 * build's deterministic rdps_random_bytes (FUZZ_RANDOM_BYTE).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "rdps/partition.h"
#include "rdps/transport.h"
#include "transport/wire.h"

#define SERVER_ID 1

/* A growing byte buffer. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *data, size_t len)
{
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
/* fuzz_frames: client byte streams                                        */

static struct rdps_secret secret;

static struct rdps_wire_hello make_hello(uint32_t client, uint32_t nclients, uint32_t flags)
{
	struct rdps_wire_hello h = { .client_id = client, .num_clients = nclients,
				     .server_id = SERVER_ID, .flags = flags };

	memset(h.nonce, 0x11, sizeof(h.nonce));
	return h;
}

/* hello, and with a secret the AUTH frame the fuzz build's server accepts. */
static void handshake(struct buf *b, const struct rdps_wire_hello *h, int with_secret,
		      int good_mac)
{
	uint8_t snonce[RDPS_NONCE_LEN], mac[RDPS_MAC_LEN];

	frame(b, RDPS_REQ_HELLO, 0, h, sizeof(*h));
	if (!with_secret)
		return;
	for (size_t i = 0; i < sizeof(snonce); i++)
		snonce[i] = FUZZ_RANDOM_BYTE(i);
	rdps_auth_mac(&secret, RDPS_AUTH_CLIENT_LABEL, snonce, sizeof(snonce), h->nonce,
		      sizeof(h->nonce), h, sizeof(*h), mac);
	if (!good_mac)
		mac[0] ^= 1;
	frame(b, RDPS_WIRE_AUTH, 0, mac, sizeof(mac));
}

static void rows_req(struct buf *b, uint8_t type, uint32_t table, uint32_t dim,
		     const uint64_t *ids, uint32_t n)
{
	struct rdps_wire_rows r = { .table = table, .n = n };
	struct buf p = { 0 };

	put(&p, &r, sizeof(r));
	put(&p, ids, n * sizeof(uint64_t));
	if (type == RDPS_REQ_PUSH) {
		for (uint32_t i = 0; i < n * dim; i++) {
			float g = 0.25f * (float)(i + 1);

			put(&p, &g, sizeof(g));
		}
		if (p.len % 8)
			put(&p, "\0\0\0\0", 4);
	}
	frame(b, type, 0, p.p, (uint32_t)p.len);
	free(p.p);
}

/* Every request kind on tables entity (dim 4, rows [32, 64) on server 1)
 * and relation (dim 3, rows [4, 8)). */
static void requests(struct buf *b)
{
	static const uint64_t ent[2] = { 32, 63 }, rel[2] = { 4, 7 };
	double vec[2] = { 1.5, -2.0 };

	rows_req(b, RDPS_REQ_PULL, 0, 4, ent, 2);
	rows_req(b, RDPS_REQ_PUSH, 0, 4, ent, 2);
	rows_req(b, RDPS_REQ_PULL, 1, 3, rel, 2);
	rows_req(b, RDPS_REQ_PUSH, 1, 3, rel, 1);
	frame(b, RDPS_REQ_FLUSH, 0, NULL, 0);
	frame(b, RDPS_REQ_STATS, 0, NULL, 0);
	frame(b, RDPS_REQ_ALLREDUCE, 0, vec, sizeof(vec));
	frame(b, RDPS_REQ_BARRIER, 0, NULL, 0);
}

static void seeds_frames(void)
{
	struct rdps_wire_hello h0 = make_hello(0, 1, 0), obs = make_hello(0, 1, RDPS_HELLO_OBSERVER);
	struct rdps_wire_hello a = make_hello(0, 2, 0), bh = make_hello(1, 2, 0);
	static const uint64_t bad_id[1] = { 5 };
	struct buf b = { 0 }, s = { 0 };
	double vec[1] = { 3.0 };
	uint16_t first;

	for (int sec = 0; sec < 2; sec++) {
		reset(&b);
		put_u8(&b, (uint8_t)sec);
		handshake(&b, &h0, sec, 1);
		requests(&b);
		frame(&b, RDPS_REQ_SHUTDOWN, 0, NULL, 0);
		save("frames", sec ? "secret-all-requests" : "plain-all-requests", &b);
		/* The same, sent 7 bytes at a time. */
		b.p[0] = (uint8_t)(sec | 0x50);
		save("frames", sec ? "secret-chunked-7" : "plain-chunked-7", &b);
	}
	reset(&b);
	put_u8(&b, 1);
	handshake(&b, &h0, 1, 0);
	requests(&b);
	save("frames", "secret-wrong-mac", &b);

	reset(&b);
	put_u8(&b, 1);
	frame(&b, RDPS_REQ_HELLO, 0, &h0, sizeof(h0));
	requests(&b);
	save("frames", "secret-no-auth", &b);

	for (int sec = 0; sec < 2; sec++) {
		reset(&b);
		put_u8(&b, (uint8_t)sec);
		handshake(&b, &obs, sec, 1);
		frame(&b, RDPS_REQ_STATS, 0, NULL, 0);
		requests(&b);
		save("frames", sec ? "secret-observer" : "plain-observer", &b);
	}

	/* Two clients of one job: the collectives complete across them. */
	for (int sec = 0; sec < 2; sec++) {
		reset(&s);
		handshake(&s, &a, sec, 1);
		frame(&s, RDPS_REQ_ALLREDUCE, 0, vec, sizeof(vec));
		frame(&s, RDPS_REQ_BARRIER, 0, NULL, 0);
		first = (uint16_t)s.len;
		handshake(&s, &bh, sec, 1);
		frame(&s, RDPS_REQ_ALLREDUCE, 0, vec, sizeof(vec));
		frame(&s, RDPS_REQ_BARRIER, 0, NULL, 0);
		requests(&s);
		reset(&b);
		put_u8(&b, (uint8_t)(2 | sec));
		put(&b, &first, sizeof(first));
		put(&b, s.p, s.len);
		save("frames", sec ? "secret-two-clients" : "plain-two-clients", &b);
	}

	/* Refusals the server must answer without closing... */
	reset(&b);
	put_u8(&b, 0);
	handshake(&b, &h0, 0, 0);
	rows_req(&b, RDPS_REQ_PULL, 0, 4, bad_id, 1);  /* id outside the shard */
	rows_req(&b, RDPS_REQ_PULL, 7, 4, bad_id, 1);  /* unknown table */
	frame(&b, RDPS_REQ_FLUSH, 0, vec, sizeof(vec)); /* body on a flush */
	frame(&b, 0x33, 0, NULL, 0);                   /* unknown type */
	frame(&b, RDPS_REQ_ALLREDUCE, 0, vec, 4);      /* odd allreduce */
	frame(&b, RDPS_REQ_HELLO, 0, &h0, sizeof(h0)); /* second hello */
	save("frames", "plain-refusals", &b);

	/* ...and framing errors that close the connection. */
	reset(&b);
	put_u8(&b, 0);
	rows_req(&b, RDPS_REQ_PULL, 0, 4, bad_id, 1); /* before the hello */
	save("frames", "plain-pull-before-hello", &b);
	reset(&b);
	put_u8(&b, 0);
	handshake(&b, &h0, 0, 0);
	{
		struct rdps_wire_hdr h;

		rdps_wire_hdr_init(&h, RDPS_REQ_STATS, 0, 0);
		h.version = 2;
		put(&b, &h, sizeof(h));
		rdps_wire_hdr_init(&h, RDPS_REQ_PULL, RDPS_WIRE_MAX_FRAME + 1, 0);
		put(&b, &h, sizeof(h));
	}
	save("frames", "plain-bad-version", &b);
	reset(&b);
	put_u8(&b, 0);
	h0.server_id = 0;
	handshake(&b, &h0, 0, 0);
	save("frames", "plain-wrong-server", &b);
	free(b.p);
	free(s.p);
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

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT_DIR (e.g. tests/fuzz/corpus)\n", argv[0]);
		return 2;
	}
	out_root = argv[1];
	mkdir(out_root, 0755);
	fuzz_quiet_logs();
	fuzz_secret(&secret);
	seeds_frames();
	seeds_handshake();
	seeds_ipconfig();
	seeds_dataset();
	seeds_partition();
	return 0;
}
