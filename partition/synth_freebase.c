// SPDX-License-Identifier: MIT
/*
 * rdps_dataset_synth_like: a Freebase86m-shaped graph scaled by F, streamed
 * (see rdps/dataset.h for the model). Every triple is a pure function of
 * (seed, its index); the memory is a 5 MB block buffer per thread and the
 * communities' law constants (64 bytes each, up to 4096 communities).
 *
 * Where the figures come from:
 *  - Counts: DGL-KE's Freebase (data.dgl.ai/dataset/Freebase.zip): 86,054,151
 *    entities, 14,824 relations, 338,586,276 triples (DGL-KE's README table
 *    of built-in datasets). The split: 304,727,650 train triples (DGL-KE's
 *    examples/freebase/dist_train.sh: "there are 304727650 edges in the
 *    graph" after dglke_partition), 16,929,318 valid and 16,929,308 test
 *    (the Freebase row of the dataset table of SMORE, Ren et al., KDD 2022,
 *    which trains on DGL-KE's Freebase; train + valid + test = 338,586,276,
 *    DGL-KE's total).
 *  - Degree exponent: no degree exponent of DGL-KE's Freebase is published
 *    that we found. alpha = 2.15 is the exponent at which a power law with
 *    minimum degree 1 has Freebase86m's mean degree 2 x 338,586,276 /
 *    86,054,151 = 7.87 (the mean of P(d) ~ d^-alpha, d >= 1, is about
 *    (alpha - 1) / (alpha - 2)). Weights (rank + 1)^-beta with
 *    beta = 1 / (alpha - 1) give that tail exponent.
 *  - Relation exponent: s = 0.7, fitted to FB15k-237's relation frequencies
 *    (Freebase's relations in the benchmark built from it; none is published
 *    for the full graph): in the first 1,263 triples of its test split
 *    (OpenKE's benchmarks/FB15K237/test2id.txt, 176 relations seen) the top
 *    relation has 7.2% of the triples (Zipf s = 0.7 over 237 relations:
 *    6.9%) and the log-log rank-frequency slope over the top 30 ranks is
 *    -0.69.
 *  - Community structure: DGL-KE's METIS partition of Freebase in 4 parts
 *    cuts 19,715,291 of the 304,727,650 train triples (dist_train.sh): 93.5%
 *    stay inside a part. With cross = 0.08 (the second end of 8% of the
 *    triples drawn from the whole graph) METIS in 4 parts keeps 94% local
 *    here (tests/partition/test_synth_freebase.c), random partitioning 25%.
 *    32 communities are our choice (a community is a topic domain; we found
 *    no count of Freebase's to copy); --communities changes it.
 *
 * Exact duplicate triples: the ends and the relation of a triple are drawn
 * independently, so where hubs meet the same triple comes up again: 5.8% of
 * the train lines repeat an earlier one at F = 0.001, 2.2% at F = 0.01 (the
 * relations are 10x more), fewer at larger F. No valid or test triple is a
 * train triple (classes, see gen_triple).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

#define FB_ENTITIES 86054151ull
#define FB_RELATIONS 14824ull
#define FB_TRAIN 304727650ull
#define FB_VALID 16929318ull
#define FB_TEST 16929308ull
#define FB_DEGREE_EXP 2.15
#define FB_RELATION_EXP 0.7
#define FB_CROSS 0.08
#define FB_COMMUNITIES 32

#define MAX_TRIES (1u << 16)
#define COM_TABLE_MAX 4096

/* ---- discrete power law by rejection-inversion ------------------------ */

/* P(k) ~ (k + a)^-s for k in [0, n), 0 < s < 1, 0 < a <= 1. k = 0 gets a
 * box of exactly its weight; k >= 1 the continuous hat h(x) = (x + a)^-s
 * over [k - 1/2, k + 1/2] (convex, so its integral >= h(k)), inverted in
 * closed form; x is accepted with probability h(k) / integral (Hörmann &
 * Derflinger, "Rejection-inversion to generate variates from monotone
 * discrete distributions", 1996). */
struct plaw {
	double s, oms, r_oms; /* s, 1 - s, 1 / (1 - s) */
	double delta;         /* k - x <= delta: inside the accepted part */
	uint64_t n;
	double a, h0, hlo, total;
};

/* x^e for x > 0 as exp(e log x); its relative error (about |e log x| ulps,
 * |e log x| < 40 here) is far below what the samplers need. */
static inline double xpow(double x, double e)
{
	return exp(e * log(x));
}

static inline double plaw_hint(const struct plaw *p, double x)
{
	return xpow(x + p->a, p->oms) * p->r_oms;
}

static void plaw_init(struct plaw *p, double s)
{
	double hi;

	memset(p, 0, sizeof(*p));
	p->s = s;
	p->oms = 1 - s;
	p->r_oms = 1 / (1 - s);
	/* The rejected part of bin k is [k - 1/2, theta_k) with
	 * theta_k = Hinv(H(k + 1/2) - h(k)); k - theta_k grows with k and with
	 * a, so its value at k = 1, a = 0 bounds the quick accept for all. */
	hi = xpow(1.5, p->oms) * p->r_oms - 1.0;
	p->delta = 1.0 - xpow(hi * p->oms, p->r_oms) - 1e-9;
}

static void plaw_range(struct plaw *p, uint64_t n, double a)
{
	p->n = n;
	p->a = a;
	p->h0 = xpow(a, -p->s);
	p->hlo = plaw_hint(p, 0.5);
	p->total = p->h0 + (n > 1 ? plaw_hint(p, (double)n - 0.5) - p->hlo : 0);
}

static inline double unif(uint64_t *rng)
{
	return (double)(rdps_pt_splitmix(rng) >> 11) * 0x1p-53;
}

static uint64_t plaw_draw(const struct plaw *p, uint64_t *rng)
{
	if (p->n <= 1)
		return 0;
	for (;;) {
		double u = unif(rng) * p->total, y, x;
		uint64_t k;

		if (u < p->h0)
			return 0;
		y = p->hlo + (u - p->h0);
		x = xpow(y * p->oms, p->r_oms) - p->a;
		k = x < 1.0 ? 1 : (uint64_t)(x + 0.5);
		if (k > p->n - 1)
			k = p->n - 1;
		if ((double)k - x <= p->delta)
			return k;
		if (y >= plaw_hint(p, (double)k + 0.5) - xpow((double)k + p->a, -p->s))
			return k;
	}
}

/* plaw_draw without k = 0 (n >= 2): k in [1, n) by the same weights. */
static uint64_t plaw_draw_rest(const struct plaw *p, uint64_t *rng)
{
	for (;;) {
		double y = p->hlo + unif(rng) * (p->total - p->h0), x;
		uint64_t k;

		x = xpow(y * p->oms, p->r_oms) - p->a;
		k = x < 1.0 ? 1 : (uint64_t)(x + 0.5);
		if (k > p->n - 1)
			k = p->n - 1;
		if ((double)k - x <= p->delta)
			return k;
		if (y >= plaw_hint(p, (double)k + 0.5) - xpow((double)k + p->a, -p->s))
			return k;
	}
}

/* ---- bijection of [0, n): Feistel network with cycle walking ----------- */

struct perm {
	uint64_t n;
	unsigned half;  /* bits per half; 2^(2*half) >= n */
	uint64_t mask;
	uint64_t key[4];
};

static void perm_init(struct perm *p, uint64_t n, uint64_t seed)
{
	p->n = n;
	p->half = 1;
	while ((1ull << (2 * p->half)) < n)
		p->half++;
	p->mask = (1ull << p->half) - 1;
	for (int i = 0; i < 4; i++)
		p->key[i] = rdps_pt_mix(seed, 0x464549ull + (uint64_t)i) | 1;
}

static inline uint64_t perm_round(uint64_t x, uint64_t key, unsigned half)
{
	uint64_t z = (x + key) * 0x9e3779b97f4a7c15ull;

	z ^= z >> 29;
	z *= 0xbf58476d1ce4e5b9ull;
	return z >> (64 - half);
}

static inline uint64_t perm_apply(const struct perm *p, uint64_t x)
{
	do {
		uint64_t l = x >> p->half, r = x & p->mask;

		for (int i = 0; i < 4; i++) {
			uint64_t t = l ^ perm_round(r, p->key[i], p->half);

			l = r;
			r = t;
		}
		x = (l << p->half) | r;
	} while (x >= p->n);
	return x;
}

/* ---- the model ---------------------------------------------------------- */

enum { CLASS_TRAIN = 0, CLASS_VALID = 1, CLASS_TEST = 2 };

struct gen {
	uint64_t n, c, seed;
	uint32_t r;
	uint64_t cross;           /* probability scaled to 2^64 */
	struct plaw ent;          /* entity ranks over [0, n) */
	struct plaw *com;         /* community c's law over its local ranks, if
				     c <= COM_TABLE_MAX (else made per triple) */
	struct plaw rel;          /* relation ranks over [0, r) */
	struct perm eperm, rperm; /* rank -> id */
};

static inline int triple_class(const struct gen *g, uint64_t h, uint64_t q, uint64_t t)
{
	uint64_t z = rdps_pt_mix(rdps_pt_mix(g->seed ^ 0x434c53ull, h) ^ (q << 40), t);

	switch (z >> 61) {
	case 0: return CLASS_VALID;
	case 1: return CLASS_TEST;
	default: return CLASS_TRAIN;
	}
}

/* Community c's members, local ranks j in [0, size): rank j * C + c weighs
 * (j * C + c + 1)^-beta = C^-beta (j + (c + 1) / C)^-beta. */
static void community_law(const struct gen *g, uint64_t c, struct plaw *law)
{
	*law = g->ent;
	plaw_range(law, (g->n - c + g->c - 1) / g->c, (double)(c + 1) / (double)g->c);
}

/* The other end of a triple whose first end e1 is in community c: with
 * probability cross any entity by weight, else a member of c by weight
 * (law com over c's local ranks); never e1 (when e1 is the community's top
 * member, local rank 0, the rest of the law is drawn directly). */
static uint64_t draw_other(const struct gen *g, const struct plaw *com, uint64_t c,
			   uint64_t e1, uint64_t *rng)
{
	uint64_t t;

	if (rdps_pt_splitmix(rng) >= g->cross && com->n > 1) {
		if (e1 == c)
			return plaw_draw_rest(com, rng) * g->c + c;
		for (uint32_t tries = 0; tries < MAX_TRIES; tries++) {
			t = plaw_draw(com, rng) * g->c + c;
			if (t != e1)
				return t;
		}
	}
	do
		t = plaw_draw(&g->ent, rng);
	while (t == e1);
	return t;
}

/*
 * Triple number i (over all splits) of split cls: ranks h, q, t.
 *
 * Entity rank r weighs (r + 1)^-beta and is in community r mod C (local rank
 * j = r / C; its weight is C^-beta (j + (c + 1) / C)^-beta, a power law over
 * the local ranks too). The community is drawn by the weight of its
 * members (a rank by weight, mod C), both ends among its members by weight
 * (the second never the first), or the second with probability cross
 * among all entities by weight, and a coin makes one of them the head: so
 * every end follows the global law, and degrees d^-(1 + 1/beta). Train
 * triple i < N has entity i as an end (and, i < R, relation i). A triple not
 * of its split's class is drawn again in the same community (ends,
 * relation, coin): rejection of whole triples keeps every degree and
 * relation frequency unbiased.
 */
static int gen_triple(const struct gen *g, uint64_t i, int cls, uint64_t *ph,
		      uint64_t *pq, uint64_t *pt)
{
	uint64_t rng = rdps_pt_mix(g->seed ^ 0x545250ull, i), c, e1, e2, q;
	int fixed = cls == CLASS_TRAIN && i < g->n, fixed_q = cls == CLASS_TRAIN && i < g->r;
	struct plaw law;
	const struct plaw *com = &law;

	c = (fixed ? i : plaw_draw(&g->ent, &rng)) % g->c;
	if (g->com)
		com = &g->com[c];
	else
		community_law(g, c, &law);
	for (uint32_t tries = 0; tries < MAX_TRIES; tries++) {
		e1 = fixed ? i : plaw_draw(com, &rng) * g->c + c;
		e2 = draw_other(g, com, c, e1, &rng);
		q = fixed_q ? i : plaw_draw(&g->rel, &rng);
		if (rdps_pt_splitmix(&rng) >> 63) {
			uint64_t x = e1;

			e1 = e2;
			e2 = x;
		}
		if (triple_class(g, e1, q, e2) == cls) {
			*ph = e1;
			*pq = q;
			*pt = e2;
			return 0;
		}
	}
	return -EAGAIN;
}

/* ---- output -------------------------------------------------------------- */

static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static inline char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 24;

	while (v >= 100) {
		uint64_t q = v / 100;

		n -= 2;
		memcpy(tmp + n, digits2 + 2 * (v - q * 100), 2);
		v = q;
	}
	if (v >= 10) {
		n -= 2;
		memcpy(tmp + n, digits2 + 2 * v, 2);
	} else {
		tmp[--n] = (char)('0' + v);
	}
	memcpy(p, tmp + n, (size_t)(24 - n));
	return p + 24 - n;
}

/* A file written with write(2) from caller-formatted buffers. */
struct out {
	int fd;
	const char *name;
	uint64_t bytes;
};

static int out_write(struct out *o, const char *buf, size_t len, char *err, size_t errlen)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = write(o->fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			return rdps_pt_fail(err, errlen, -e, "%s: write failed: %s", o->name,
					    strerror(e));
		}
		off += (size_t)w;
	}
	o->bytes += len;
	return 0;
}

static int out_open(struct out *o, const struct rdps_pt_outdir *od, const char *name,
		    char *err, size_t errlen)
{
	char *path = rdps_pt_outdir_path(od, name);

	o->name = name;
	o->bytes = 0;
	o->fd = -1;
	if (!path)
		return rdps_pt_fail(err, errlen, -ENOMEM, "out of memory");
	o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	free(path);
	if (o->fd < 0)
		return rdps_pt_fail(err, errlen, -errno, "%s: %s", name, strerror(errno));
	return 0;
}

/* Closes o (fsync first unless ret already failed); returns ret or the
 * first error. */
static int out_close(struct out *o, int ret, char *err, size_t errlen)
{
	if (o->fd < 0)
		return ret;
	if (!ret && fsync(o->fd))
		ret = rdps_pt_fail(err, errlen, -errno, "%s: fsync: %s", o->name, strerror(errno));
	if (close(o->fd) && !ret)
		ret = rdps_pt_fail(err, errlen, -errno, "%s: close: %s", o->name, strerror(errno));
	o->fd = -1;
	return ret;
}

/* "8.5 s", "12m 05s", "3h 07m" as the trainer's progress lines. */
static const char *fmt_secs(char *buf, size_t len, double s)
{
	if (!(s >= 0) || s > 1e8)
		snprintf(buf, len, "?");
	else if (s < 60)
		snprintf(buf, len, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm %02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, len, "%dh %02dm", (int)s / 3600, (int)s % 3600 / 60);
	return buf;
}

static uint64_t sum_digits(uint64_t n) /* sum of digits(x) for x in [0, n) */
{
	uint64_t sum = 0, lo = 0, hi = 10;

	for (unsigned d = 1; lo < n; d++, lo = hi, hi *= 10)
		sum += d * ((n < hi ? n : hi) - lo);
	return sum;
}

/* ---- options ------------------------------------------------------------- */

void rdps_dataset_synth_like_defaults(struct rdps_synth_like_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->like = RDPS_SYNTH_FREEBASE86M;
	o->scale = 0.001;
	o->cross = -1;
}

static uint64_t scaled(double f, uint64_t count)
{
	return (uint64_t)floor(f * (double)count + 0.5);
}

int rdps_dataset_synth_like_plan(const struct rdps_synth_like_opts *o,
				 struct rdps_synth_like_plan *p, char *err, size_t errlen)
{
	uint64_t t = 0, de, dr;

	memset(p, 0, sizeof(*p));
	if (o->like != RDPS_SYNTH_FREEBASE86M)
		return rdps_pt_fail(err, errlen, -EINVAL, "--like: unknown shape %d (want freebase86m)",
				    (int)o->like);
	if (!(o->scale > 0 && o->scale <= 1))
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--scale: %g is not in (0, 1] (1 = Freebase86m's full size)",
				    o->scale);
	if (scaled(o->scale, FB_RELATIONS) < 1)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--scale: %g x 14,824 relations rounds to 0: want at least 0.0000338",
				    o->scale);
	if (o->cross > 1 || (o->cross < 0 && o->cross != -1) || o->cross != o->cross)
		return rdps_pt_fail(err, errlen, -EINVAL, "--noise: %g is not a probability 0..1",
				    o->cross);
	p->num_entities = scaled(o->scale, FB_ENTITIES);
	p->num_relations = (uint32_t)scaled(o->scale, FB_RELATIONS);
	p->num_triples[RDPS_SPLIT_TRAIN] = scaled(o->scale, FB_TRAIN);
	p->num_triples[RDPS_SPLIT_VALID] = scaled(o->scale, FB_VALID);
	p->num_triples[RDPS_SPLIT_TEST] = scaled(o->scale, FB_TEST);
	p->num_communities = o->communities ? o->communities : FB_COMMUNITIES;
	if (p->num_communities > p->num_entities) {
		uint64_t n = p->num_entities;

		memset(p, 0, sizeof(*p));
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--communities: %llu is more than the %llu entities",
				    (unsigned long long)o->communities, (unsigned long long)n);
	}
	p->degree_exponent = FB_DEGREE_EXP;
	p->relation_exponent = FB_RELATION_EXP;
	p->cross = o->cross < 0 ? FB_CROSS : o->cross;
	/* "id\te<id>\n", "id\tr<id>\n"; "e<h>\tr<q>\te<t>\n" with ids spread
	 * evenly over [0, n) by the permutation. */
	de = sum_digits(p->num_entities);
	dr = sum_digits(p->num_relations);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		t += p->num_triples[s];
	p->bytes = 2 * de + 3 * p->num_entities + 2 * dr + 3ull * p->num_relations +
		   (uint64_t)((double)t * (6.0 + 2.0 * (double)de / (double)p->num_entities +
					   (double)dr / (double)p->num_relations));
	return 0;
}

/* ---- the generator ------------------------------------------------------- */

/* Triples formatted per block by one thread; blocks are written in order. */
#define BLOCK_TRIPLES (1u << 17)
#define LINE_MAX_BYTES 40 /* "e<u32>\tr<u32>\te<u32>\n" is at most 36 */
#define BLOCK_BYTES ((size_t)BLOCK_TRIPLES * LINE_MAX_BYTES)
#define MAX_THREADS 64

struct block {
	const struct gen *g;
	int cls;
	uint64_t first, count; /* triple indexes (over all splits) */
	char *buf;
	size_t len;
	int ret;
	uint64_t failed_at;
};

static void *block_run(void *arg)
{
	struct block *b = arg;
	const struct gen *g = b->g;
	char *p = b->buf;

	b->ret = 0;
	for (uint64_t i = b->first; i < b->first + b->count; i++) {
		uint64_t h, q, t;

		if (gen_triple(g, i, b->cls, &h, &q, &t)) {
			b->ret = -EAGAIN;
			b->failed_at = i;
			break;
		}
		*p++ = 'e';
		p = put_u64(p, perm_apply(&g->eperm, h));
		*p++ = '\t';
		*p++ = 'r';
		p = put_u64(p, perm_apply(&g->rperm, q));
		*p++ = '\t';
		*p++ = 'e';
		p = put_u64(p, perm_apply(&g->eperm, t));
		*p++ = '\n';
	}
	b->len = (size_t)(p - b->buf);
	return NULL;
}

static int write_dict(struct out *o, const struct rdps_pt_outdir *od, const char *name,
		      char prefix, uint64_t n, char *buf, char *err, size_t errlen)
{
	int ret = out_open(o, od, name, err, errlen);
	size_t len = 0;

	for (uint64_t i = 0; !ret && i < n; i++) {
		char *p = buf + len;

		p = put_u64(p, i);
		*p++ = '\t';
		*p++ = prefix;
		p = put_u64(p, i);
		*p++ = '\n';
		len = (size_t)(p - buf);
		if (len > BLOCK_BYTES - LINE_MAX_BYTES || i + 1 == n) {
			ret = out_write(o, buf, len, err, errlen);
			len = 0;
		}
	}
	return out_close(o, ret, err, errlen);
}

struct progress {
	uint64_t t0, last, done, total;
};

static void progress_line(struct progress *pg, const char *what, uint64_t now)
{
	double secs = (double)(now - pg->t0) / 1e9;
	char a[32], b[32];

	pg->last = now;
	rdps_info("synth: %s %.1f%% (%llu / %llu triples)  elapsed %s  ETA %s", what,
		  100.0 * (double)pg->done / (double)pg->total, (unsigned long long)pg->done,
		  (unsigned long long)pg->total, fmt_secs(a, sizeof(a), secs),
		  pg->done ? fmt_secs(b, sizeof(b),
				      secs / (double)pg->done * (double)(pg->total - pg->done))
			   : "?");
}

/* One split file: rounds of nthreads blocks made at once, written in order
 * (every triple depends only on the seed and its index, so the bytes do
 * not depend on the number of threads). */
static int write_split(const struct gen *g, struct out *o, const struct rdps_pt_outdir *od,
		       int split, uint64_t base, uint64_t count, struct block *blk,
		       unsigned nthreads, struct progress *pg, char *err, size_t errlen)
{
	static const char *const names[RDPS_SPLIT_COUNT] = { "train.txt", "valid.txt",
							      "test.txt" };
	static const int cls[RDPS_SPLIT_COUNT] = { CLASS_TRAIN, CLASS_VALID, CLASS_TEST };
	pthread_t tid[MAX_THREADS];
	int ret = out_open(o, od, names[split], err, errlen);

	for (uint64_t at = 0; !ret && at < count;) {
		unsigned n = 0, started = 0;

		for (; n < nthreads && at < count; n++) {
			blk[n].g = g;
			blk[n].cls = cls[split];
			blk[n].first = base + at;
			blk[n].count = count - at < BLOCK_TRIPLES ? count - at : BLOCK_TRIPLES;
			at += blk[n].count;
		}
		for (unsigned t = 1; t < n; t++) {
			if (pthread_create(&tid[t], NULL, block_run, &blk[t]))
				break;
			started = t;
		}
		block_run(&blk[0]);
		for (unsigned t = started + 1; t < n; t++) /* no thread: made here */
			block_run(&blk[t]);
		for (unsigned t = 1; t <= started; t++)
			pthread_join(tid[t], NULL);
		for (unsigned t = 0; !ret && t < n; t++) {
			if (blk[t].ret)
				ret = rdps_pt_fail(err, errlen, blk[t].ret,
						   "%s: no triple of its class found for triple %llu",
						   names[split],
						   (unsigned long long)(blk[t].failed_at - base));
			else
				ret = out_write(o, blk[t].buf, blk[t].len, err, errlen);
			pg->done += blk[t].count;
		}
		if (!ret) {
			uint64_t now = rdps_now_ns();

			if (now - pg->last >= 2000000000ull)
				progress_line(pg, names[split], now);
		}
	}
	return out_close(o, ret, err, errlen);
}

int rdps_dataset_synth_like(const char *out_dir, const struct rdps_synth_like_opts *o,
			    struct rdps_dataset_stats *st, char *err, size_t errlen)
{
	struct rdps_synth_like_plan plan;
	struct rdps_pt_outdir od = { 0 };
	struct progress pg = { 0 };
	struct block blk[MAX_THREADS] = { { 0 } };
	struct statvfs vfs;
	struct out out = { .fd = -1 };
	struct gen g = { 0 };
	uint64_t base = 0, need, avail, bytes = 0;
	unsigned nthreads;
	char a[32];
	double secs;
	int ret;

	memset(st, 0, sizeof(*st));
	ret = rdps_dataset_synth_like_plan(o, &plan, err, errlen);
	if (ret)
		return ret;
	if (o->threads > MAX_THREADS)
		return rdps_pt_fail(err, errlen, -EINVAL, "--threads: want 0..%d", MAX_THREADS);
	nthreads = o->threads;
	if (!nthreads) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		nthreads = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (unsigned)ncpu;
	}
	ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen);
	if (ret)
		return ret;
	/* Room for the plan and a margin: hubs' ids make the real size move a
	 * little around the estimate. */
	need = plan.bytes + plan.bytes / 50 + (1u << 20);
	if (statvfs(od.tmp, &vfs)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: statvfs: %s", od.tmp, strerror(errno));
		goto end;
	}
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (avail < need) {
		ret = rdps_pt_fail(err, errlen, -ENOSPC,
				   "%s: needs about %.3f GB for scale %g, its file system has %.3f GB free",
				   out_dir, (double)need / 1e9, o->scale, (double)avail / 1e9);
		goto end;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		blk[t].buf = malloc(BLOCK_BYTES);
		if (!blk[t].buf) {
			ret = rdps_pt_fail(err, errlen, -ENOMEM, "out of memory");
			goto end;
		}
		/* Touched now: the peak RSS is the same at every scale (lines
		 * get longer with the ids' digits and would fill more of it). */
		memset(blk[t].buf, '\n', BLOCK_BYTES);
	}

	g.n = plan.num_entities;
	g.r = plan.num_relations;
	g.c = plan.num_communities;
	g.seed = rdps_pt_mix(o->seed, 0x46423836ull);
	g.cross = plan.cross >= 1 ? UINT64_MAX : (uint64_t)(plan.cross * 0x1p64);
	plaw_init(&g.ent, 1.0 / (plan.degree_exponent - 1.0));
	plaw_range(&g.ent, g.n, 1.0);
	if (g.c <= COM_TABLE_MAX) {
		g.com = malloc(g.c * sizeof(*g.com));
		if (!g.com) {
			ret = rdps_pt_fail(err, errlen, -ENOMEM, "out of memory");
			goto end;
		}
		for (uint64_t c = 0; c < g.c; c++)
			community_law(&g, c, &g.com[c]);
	}
	plaw_init(&g.rel, plan.relation_exponent);
	plaw_range(&g.rel, g.r, 1.0);
	perm_init(&g.eperm, g.n, g.seed ^ 0x454eull);
	perm_init(&g.rperm, g.r, g.seed ^ 0x524cull);

	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		pg.total += plan.num_triples[s];
	pg.t0 = pg.last = rdps_now_ns();
	rdps_info("synth: freebase86m x %g: %llu entities in %llu communities, %u relations, "
		  "train %llu, valid %llu, test %llu (degree exponent %.2f, relation Zipf %.2f, "
		  "cross-community %.2f), about %.2f GB, %u threads",
		  o->scale, (unsigned long long)g.n, (unsigned long long)g.c, g.r,
		  (unsigned long long)plan.num_triples[0], (unsigned long long)plan.num_triples[1],
		  (unsigned long long)plan.num_triples[2], plan.degree_exponent,
		  plan.relation_exponent, plan.cross, (double)plan.bytes / 1e9, nthreads);
	ret = write_dict(&out, &od, "entities.dict", 'e', g.n, blk[0].buf, err, errlen);
	bytes += out.bytes;
	if (!ret)
		ret = write_dict(&out, &od, "relations.dict", 'r', g.r, blk[0].buf, err, errlen);
	bytes += out.bytes;
	for (int s = 0; !ret && s < RDPS_SPLIT_COUNT; s++) {
		ret = write_split(&g, &out, &od, s, base, plan.num_triples[s], blk, nthreads, &pg,
				  err, errlen);
		base += plan.num_triples[s];
		bytes += out.bytes;
	}
	if (ret)
		goto end;
	ret = rdps_pt_outdir_commit(&od, err, errlen);
	if (ret)
		goto end;
	st->num_entities = g.n;
	st->num_relations = g.r;
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		st->num_triples[s] = plan.num_triples[s];
	secs = (double)(rdps_now_ns() - pg.t0) / 1e9;
	rdps_info("synth: wrote %s: %llu triples, %.3f GB in %s (%.2fM triples/s, %.0f MB/s)",
		  out_dir, (unsigned long long)pg.total, (double)bytes / 1e9,
		  fmt_secs(a, sizeof(a), secs), (double)pg.total / secs / 1e6,
		  (double)bytes / secs / 1e6);
end:
	free(g.com);
	for (unsigned t = 0; t < MAX_THREADS; t++)
		free(blk[t].buf);
	rdps_pt_outdir_end(&od);
	return ret;
}
