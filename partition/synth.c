// SPDX-License-Identifier: MIT
/* rdps_dataset_synth: streamed community graph with relation patterns (see
 * rdps/dataset.h for the model). No per-triple or per-entity state: every
 * triple is a pure function of (seed, index), so memory is constant. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

#define NUM_HUBS 16

enum pattern { PAT_MAP = 0, PAT_INVERSE = 1, PAT_SYMMETRIC = 2, PAT_HUB = 3 };

struct synth {
	uint64_t n;       /* entities */
	uint64_t c;       /* communities */
	uint32_t r;       /* relations */
	uint64_t seed;
	uint64_t perm_a;  /* dict id = (a * x + b) mod n */
	uint64_t perm_b;
	uint64_t noise;   /* noise probability scaled to 2^64 */
};

void rdps_dataset_synth_defaults(struct rdps_synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->num_entities = 10000;
	o->num_relations = 16;
	o->num_triples = 100000;
	o->num_communities = 16;
	o->num_valid = 1000;
	o->num_test = 1000;
	o->noise = 0.02;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static inline uint64_t comm_of(const struct synth *s, uint64_t x)
{
	return x * s->c / s->n;
}

static inline uint64_t comm_start(const struct synth *s, uint64_t c)
{
	return (c * s->n + s->c - 1) / s->c;
}

static inline uint64_t comm_size(const struct synth *s, uint64_t c)
{
	return comm_start(s, c + 1) - comm_start(s, c);
}

/* Community shift of map relation r: every other map relation links to a
 * different community (cross-community edges), the rest stay inside. */
static inline uint64_t map_shift(const struct synth *s, uint32_t r)
{
	if (s->c < 2 || (r / 4) % 2 == 0)
		return 0;
	return 1 + rdps_pt_below(rdps_pt_mix(s->seed ^ 0x5348ull, r), s->c - 1);
}

static inline uint64_t rel_offset(const struct synth *s, uint32_t r)
{
	return rdps_pt_mix(s->seed ^ 0x4f46ull, r);
}

static inline uint32_t relation_of(const struct synth *s, uint64_t x, uint64_t round)
{
	uint64_t base = x < s->r ? x : rdps_pt_below(rdps_pt_mix(s->seed ^ 0x4241ull, x), s->r);

	return (uint32_t)((base + round) % s->r);
}

static uint64_t tail_of(const struct synth *s, uint64_t x, uint32_t r, uint64_t i)
{
	uint64_t c = comm_of(s, x), l = x - comm_start(s, c), g, sz, t;
	uint32_t m;

	if (s->noise && rdps_pt_mix(s->seed ^ 0x4e4full, i) < s->noise) {
		t = rdps_pt_below(rdps_pt_mix(s->seed ^ 0x5441ull, i), s->n);
		return t == x ? (x + 1) % s->n : t;
	}
	switch ((enum pattern)(r % 4)) {
	case PAT_MAP:
		g = (c + map_shift(s, r)) % s->c;
		sz = comm_size(s, g);
		t = comm_start(s, g) + (l + rel_offset(s, r)) % sz;
		break;
	case PAT_INVERSE:
		m = r - 1;
		g = (c + s->c - map_shift(s, m)) % s->c;
		sz = comm_size(s, g);
		t = comm_start(s, g) + (l % sz + sz - rel_offset(s, m) % sz) % sz;
		break;
	case PAT_SYMMETRIC:
		g = c;
		sz = comm_size(s, g);
		t = comm_start(s, g) + (rel_offset(s, r) % sz + sz - l) % sz;
		break;
	case PAT_HUB:
	default:
		g = c;
		sz = comm_size(s, g);
		t = comm_start(s, g) +
		    rdps_pt_below(rdps_pt_mix(s->seed ^ rel_offset(s, r), x),
				  sz < NUM_HUBS ? sz : NUM_HUBS);
		break;
	}
	if (t == x) /* no self-loops: take the next member of the community */
		t = sz > 1 ? comm_start(s, g) + (t - comm_start(s, g) + 1) % sz : (x + 1) % s->n;
	return t;
}

static inline uint64_t dict_id(const struct synth *s, uint64_t x)
{
	return (uint64_t)(((unsigned __int128)s->perm_a * x + s->perm_b) % s->n);
}

static int write_line(FILE *f, char prefix, uint64_t a, uint64_t b, uint64_t c, int triple)
{
	char buf[96], *p = buf;

	if (triple) {
		*p++ = 'e';
		p = rdps_pt_utoa(p, a);
		*p++ = '\t';
		*p++ = 'r';
		p = rdps_pt_utoa(p, b);
		*p++ = '\t';
		*p++ = 'e';
		p = rdps_pt_utoa(p, c);
	} else {
		p = rdps_pt_utoa(p, a);
		*p++ = '\t';
		*p++ = prefix;
		p = rdps_pt_utoa(p, a);
	}
	*p++ = '\n';
	return fwrite(buf, 1, (size_t)(p - buf), f) == (size_t)(p - buf) ? 0 : -EIO;
}

static int write_dict(const struct rdps_pt_outdir *od, const char *name, char prefix,
		      uint64_t n, char *err, size_t errlen)
{
	FILE *f = rdps_pt_outdir_fopen(od, name, err, errlen);
	int ret = 0;

	if (!f)
		return -EIO;
	for (uint64_t i = 0; i < n && !ret; i++)
		ret = write_line(f, prefix, i, 0, 0, 0);
	if (ret) {
		fclose(f);
		return rdps_pt_fail(err, errlen, ret, "%s: write failed", name);
	}
	return rdps_pt_fclose(f, name, err, errlen);
}

static int check_opts(const struct rdps_synth_opts *o, char *err, size_t errlen)
{
	uint64_t n = o->num_entities;

	if (n < 2 || n >= UINT32_MAX)
		return rdps_pt_fail(err, errlen, -EINVAL, "--entities: want 2..%u", UINT32_MAX - 1);
	if (o->num_relations < 1 || o->num_relations > n)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--relations: want 1..entities (%llu)", (unsigned long long)n);
	if (o->num_communities < 1 || o->num_communities > n)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--communities: want 1..entities (%llu)", (unsigned long long)n);
	if (!(o->noise >= 0 && o->noise <= 1))
		return rdps_pt_fail(err, errlen, -EINVAL, "--noise: want 0..1");
	if (o->num_valid > UINT64_MAX / 4 || o->num_test > UINT64_MAX / 4 ||
	    o->num_triples < n + o->num_valid + o->num_test)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--triples: %llu is fewer than entities + valid + test (%llu): every entity heads one train triple",
				    (unsigned long long)o->num_triples,
				    (unsigned long long)(n + o->num_valid + o->num_test));
	if (o->num_triples / o->num_relations > n ||
	    (o->num_triples / o->num_relations == n && o->num_triples % o->num_relations))
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "--triples: %llu is more than entities * relations (%llu): (head, relation) pairs would repeat",
				    (unsigned long long)o->num_triples,
				    (unsigned long long)(n * o->num_relations));
	return 0;
}

int rdps_dataset_synth(const char *out_dir, const struct rdps_synth_opts *o,
		       struct rdps_dataset_stats *st, char *err, size_t errlen)
{
	struct synth s = { .n = o->num_entities, .c = o->num_communities,
			   .r = o->num_relations, .seed = o->seed };
	struct rdps_pt_outdir od = { 0 };
	FILE *f[RDPS_SPLIT_COUNT] = { NULL };
	uint64_t rng = o->seed ^ 0x53454cull, pick, left, t0 = rdps_now_ns();
	const char *names[RDPS_SPLIT_COUNT] = { "train.txt", "valid.txt", "test.txt" };
	int ret;

	memset(st, 0, sizeof(*st));
	ret = check_opts(o, err, errlen);
	if (ret)
		return ret;
	s.noise = o->noise >= 1 ? UINT64_MAX : (uint64_t)(o->noise * 18446744073709551616.0);
	s.perm_a = 1 + rdps_pt_below(rdps_pt_mix(o->seed, 0x5045ull), s.n - 1);
	while (gcd(s.perm_a, s.n) != 1)
		s.perm_a = s.perm_a % (s.n - 1) + 1;
	s.perm_b = rdps_pt_below(rdps_pt_mix(o->seed, 0x5046ull), s.n);

	ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen);
	if (ret)
		return ret;
	rdps_info("synth: %llu entities in %llu communities, %u relations, %llu triples",
		  (unsigned long long)s.n, (unsigned long long)s.c, s.r,
		  (unsigned long long)o->num_triples);
	if ((ret = write_dict(&od, "entities.dict", 'e', s.n, err, errlen)) ||
	    (ret = write_dict(&od, "relations.dict", 'r', s.r, err, errlen)))
		goto err_end;
	for (int i = 0; i < RDPS_SPLIT_COUNT; i++) {
		f[i] = rdps_pt_outdir_fopen(&od, names[i], err, errlen);
		if (!f[i]) {
			ret = -EIO;
			goto err_close;
		}
		setvbuf(f[i], NULL, _IOFBF, 4u << 20);
	}
	/* Selection sampling (Knuth's algorithm S) over triples n..T-1 picks
	 * exactly valid + test of them; picks alternate between the two. */
	pick = o->num_valid + o->num_test;
	left = o->num_triples - s.n;
	for (uint64_t i = 0; i < o->num_triples; i++) {
		uint64_t x = i % s.n;
		uint32_t r = relation_of(&s, x, i / s.n);
		uint64_t t = tail_of(&s, x, r, i);
		int split = RDPS_SPLIT_TRAIN;

		if (i >= s.n) {
			if (pick && rdps_pt_below(rdps_pt_splitmix(&rng), left) < pick) {
				uint64_t nv = st->num_triples[RDPS_SPLIT_VALID];
				uint64_t nt = st->num_triples[RDPS_SPLIT_TEST];

				split = nv < o->num_valid && (nv <= nt || nt >= o->num_test)
					? RDPS_SPLIT_VALID : RDPS_SPLIT_TEST;
				pick--;
			}
			left--;
		}
		st->num_triples[split]++;
		if (write_line(f[split], 0, dict_id(&s, x), r, dict_id(&s, t), 1)) {
			ret = rdps_pt_fail(err, errlen, -EIO, "%s: write failed", names[split]);
			goto err_close;
		}
		if ((i + 1) % 10000000 == 0)
			rdps_info("synth: %llu / %llu triples (%.1f s)", (unsigned long long)(i + 1),
				  (unsigned long long)o->num_triples,
				  (double)(rdps_now_ns() - t0) / 1e9);
	}
	for (int i = 0; i < RDPS_SPLIT_COUNT; i++) {
		int r = rdps_pt_fclose(f[i], names[i], err, errlen);

		f[i] = NULL;
		if (r && !ret)
			ret = r;
	}
	if (ret)
		goto err_close;
	ret = rdps_pt_outdir_commit(&od, err, errlen);
	if (ret)
		goto err_close;
	st->num_entities = s.n;
	st->num_relations = s.r;
	rdps_info("synth: wrote %s (%.1f s)", out_dir, (double)(rdps_now_ns() - t0) / 1e9);
err_close:
	for (int i = 0; i < RDPS_SPLIT_COUNT; i++)
		if (f[i])
			fclose(f[i]);
err_end:
	rdps_pt_outdir_end(&od);
	if (ret)
		memset(st, 0, sizeof(*st));
	return ret;
}
