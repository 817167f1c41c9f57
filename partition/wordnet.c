// SPDX-License-Identifier: MIT
/* rdps_dataset_wordnet: a WN18-style dataset from WordNet 3.0 data files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

/* WN18's 18 relation types and the WordNet pointer symbols they come from. */
static const struct {
	const char *sym;
	const char *name;
} wn_rel[] = {
	{ "@", "_hypernym" },
	{ "~", "_hyponym" },
	{ "@i", "_instance_hypernym" },
	{ "~i", "_instance_hyponym" },
	{ "#m", "_member_holonym" },
	{ "%m", "_member_meronym" },
	{ "#p", "_part_of" },
	{ "%p", "_has_part" },
	{ "+", "_derivationally_related_form" },
	{ "^", "_also_see" },
	{ "$", "_verb_group" },
	{ "&", "_similar_to" },
	{ ";c", "_synset_domain_topic_of" },
	{ "-c", "_member_of_domain_topic" },
	{ ";r", "_synset_domain_region_of" },
	{ "-r", "_member_of_domain_region" },
	{ ";u", "_synset_domain_usage_of" },
	{ "-u", "_member_of_domain_usage" },
};
#define NREL RDPS_ARRAY_SIZE(wn_rel)

/* WN18RR (Dettmers et al., 2018, "Convolutional 2D Knowledge Graph
 * Embeddings") drops these: each is the inverse of a kept relation
 * (_hypernym, _instance_hypernym, _member_meronym, _has_part,
 * _synset_domain_topic_of, _member_of_domain_region,
 * _member_of_domain_usage), so WN18's test triples could be read off their
 * train inverses. */
static const char *const wn18rr_dropped[] = {
	"_hyponym", "_instance_hyponym", "_member_holonym", "_part_of",
	"_member_of_domain_topic", "_synset_domain_region_of", "_synset_domain_usage_of",
};

static bool wn18rr_drops(size_t r)
{
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(wn18rr_dropped); i++)
		if (!strcmp(wn_rel[r].name, wn18rr_dropped[i]))
			return true;
	return false;
}

static const struct {
	const char *file;
	char pos;
} wn_files[] = {
	{ "data.noun", 'n' }, { "data.verb", 'v' }, { "data.adj", 'a' }, { "data.adv", 'r' },
};

struct wn {
	struct rdps_pt_names ent;  /* "OFFSET.P" names, id = first seen */
	uint32_t *trip;            /* 3 per triple */
	size_t ntrip;
	size_t cap;
	uint32_t *order;           /* synset ids in data-file order */
	size_t norder;
	size_t ocap;
	uint32_t per_file[RDPS_ARRAY_SIZE(wn_files)];
	char *err;
	size_t errlen;
};

void rdps_dataset_wordnet_defaults(struct rdps_wordnet_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->wordnet_dir = "/usr/share/wordnet";
	o->cut = RDPS_WORDNET_CUT_WN18;
	o->target_entities = 40943;
	o->num_valid = 5000;
	o->num_test = 5000;
}

static int pos_char(const char *tok, char *pos)
{
	switch (tok[0]) {
	case 'n':
	case 'v':
	case 'r':
		*pos = tok[0];
		break;
	case 'a':
	case 's': /* satellites live in data.adj */
		*pos = 'a';
		break;
	default:
		return -EINVAL;
	}
	return tok[1] ? -EINVAL : 0;
}

static int synset_id(struct wn *w, const char *off, char pos, uint32_t *id)
{
	char name[16];
	char *end;
	unsigned long v = strtoul(off, &end, 10);

	if (*end || end - off != 8)
		return -EINVAL;
	snprintf(name, sizeof(name), "%08lu.%c", v, pos);
	return rdps_pt_names_add(&w->ent, name, 10, id) < 0 ? -ENOMEM : 0;
}

static int parse_line(struct wn *w, const struct rdps_pt_lines *lr, size_t file)
{
	char pos = wn_files[file].pos;
	char *save = NULL, *tok[4];
	char *bar = strchr(lr->line, '|');
	unsigned long nwords, nptr;
	uint32_t head;
	int ret;

#define NEXT() strtok_r(NULL, " ", &save)
#define BAD(what) rdps_pt_fail(w->err, w->errlen, -EINVAL, "%s:%llu: bad %s", lr->path, \
			       (unsigned long long)lr->lineno, what)
	if (bar)
		*bar = '\0';
	tok[0] = strtok_r(lr->line, " ", &save);
	tok[1] = NEXT(); /* lex_filenum */
	tok[2] = NEXT(); /* ss_type */
	tok[3] = NEXT(); /* w_cnt, hex */
	if (!tok[0] || !tok[1] || !tok[2] || !tok[3])
		return BAD("synset line");
	if (synset_id(w, tok[0], pos, &head))
		return BAD("synset offset");
	if (rdps_reserve((void **)&w->order, &w->ocap, (w->norder + 1) * sizeof(uint32_t)))
		return -ENOMEM;
	w->order[w->norder++] = head;
	w->per_file[file]++;
	nwords = strtoul(tok[3], NULL, 16);
	for (unsigned long i = 0; i < 2 * nwords; i++)
		if (!NEXT())
			return BAD("word list");
	tok[0] = NEXT();
	if (!tok[0])
		return BAD("pointer count");
	nptr = strtoul(tok[0], NULL, 10);
	for (unsigned long i = 0; i < nptr; i++) {
		char tpos;
		uint32_t tail;
		size_t r;

		for (int j = 0; j < 4; j++)
			if (!(tok[j] = NEXT()))
				return BAD("pointer");
		for (r = 0; r < NREL; r++)
			if (!strcmp(tok[0], wn_rel[r].sym))
				break;
		if (r == NREL)
			continue; /* antonyms, entailment, ...: not in WN18 */
		if (pos_char(tok[2], &tpos))
			return BAD("pointer part of speech");
		ret = synset_id(w, tok[1], tpos, &tail);
		if (ret)
			return ret == -ENOMEM ? ret : BAD("pointer offset");
		if (tail == head)
			continue;
		if (rdps_reserve((void **)&w->trip, &w->cap, (w->ntrip + 1) * 3 * sizeof(uint32_t)))
			return -ENOMEM;
		w->trip[3 * w->ntrip] = head;
		w->trip[3 * w->ntrip + 1] = (uint32_t)r;
		w->trip[3 * w->ntrip + 2] = tail;
		w->ntrip++;
	}
	return 0;
#undef NEXT
#undef BAD
}

static int cmp_trip(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	for (int i = 0; i < 3; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

/* ---- min-heap of (degree, tie, entity) with lazy deletion ---- */
struct heap_item {
	uint32_t deg;
	uint32_t tie;
	uint32_t e;
};

struct heap {
	struct heap_item *a;
	size_t n;
	size_t cap;
};

static int item_less(const struct heap_item *x, const struct heap_item *y)
{
	if (x->deg != y->deg)
		return x->deg < y->deg;
	if (x->tie != y->tie)
		return x->tie < y->tie;
	return x->e < y->e;
}

static int heap_push(struct heap *h, struct heap_item it)
{
	size_t i;

	if (rdps_reserve((void **)&h->a, &h->cap, (h->n + 1) * sizeof(*h->a)))
		return -ENOMEM;
	for (i = h->n++; i > 0 && item_less(&it, &h->a[(i - 1) / 2]); i = (i - 1) / 2)
		h->a[i] = h->a[(i - 1) / 2];
	h->a[i] = it;
	return 0;
}

static struct heap_item heap_pop(struct heap *h)
{
	struct heap_item top = h->a[0], last = h->a[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && item_less(&h->a[c + 1], &h->a[c]))
			c++;
		if (!item_less(&h->a[c], &last))
			break;
		h->a[i] = h->a[c];
		i = c;
	}
	if (h->n)
		h->a[i] = last;
	return top;
}

static uint32_t uf_find(uint32_t *par, uint32_t x)
{
	while (par[x] != x) {
		par[x] = par[par[x]];
		x = par[x];
	}
	return x;
}

/*
 * Marks alive[] the dense core: peel lowest-degree entities until target
 * remain (0 = no peeling), then keep the largest connected component.
 */
static int dense_core(struct wn *w, uint32_t target, uint8_t *alive)
{
	uint32_t n = w->ent.n;
	uint32_t *deg = calloc(n, sizeof(uint32_t)), *tie = malloc(n * sizeof(uint32_t));
	uint32_t *xinc = calloc((size_t)n + 1, sizeof(uint32_t));
	uint32_t *inc = malloc(w->ntrip * 2 * sizeof(uint32_t) + 1);
	uint8_t *dead_t = calloc(w->ntrip + 1, 1);
	uint32_t *par = NULL, *size = NULL, nalive = n, best = 0;
	struct heap h = { 0 };
	int ret = -ENOMEM;

	if (!deg || !tie || !xinc || !inc || !dead_t)
		goto err_free;
	for (size_t i = 0; i < w->ntrip; i++) {
		deg[w->trip[3 * i]]++;
		deg[w->trip[3 * i + 2]]++;
	}
	for (uint32_t e = 0; e < n; e++) {
		const char *name = rdps_pt_names_get(&w->ent, e);

		xinc[e + 1] = xinc[e] + deg[e];
		tie[e] = (uint32_t)XXH3_64bits(name, strlen(name));
		alive[e] = 1;
	}
	{
		uint32_t *pos = malloc((size_t)n * sizeof(uint32_t));

		if (!pos)
			goto err_free;
		memcpy(pos, xinc, (size_t)n * sizeof(uint32_t));
		for (size_t i = 0; i < w->ntrip; i++) {
			inc[pos[w->trip[3 * i]]++] = (uint32_t)i;
			inc[pos[w->trip[3 * i + 2]]++] = (uint32_t)i;
		}
		free(pos);
	}
	if (target && target < n) {
		for (uint32_t e = 0; e < n; e++)
			if (heap_push(&h, (struct heap_item){ deg[e], tie[e], e }))
				goto err_free;
		while (nalive > target && h.n) {
			struct heap_item it = heap_pop(&h);

			if (!alive[it.e] || it.deg != deg[it.e])
				continue; /* stale entry */
			alive[it.e] = 0;
			nalive--;
			for (uint32_t j = xinc[it.e]; j < xinc[it.e + 1]; j++) {
				uint32_t t = inc[j], o;

				if (dead_t[t])
					continue;
				dead_t[t] = 1;
				o = w->trip[3 * t] == it.e ? w->trip[3 * t + 2] : w->trip[3 * t];
				if (alive[o] && heap_push(&h, (struct heap_item){ --deg[o], tie[o], o }))
					goto err_free;
			}
		}
	}
	par = malloc((size_t)n * sizeof(uint32_t));
	size = calloc(n, sizeof(uint32_t));
	if (!par || !size)
		goto err_free;
	for (uint32_t e = 0; e < n; e++)
		par[e] = e;
	for (size_t i = 0; i < w->ntrip; i++) {
		uint32_t a = w->trip[3 * i], b = w->trip[3 * i + 2];

		if (alive[a] && alive[b])
			par[uf_find(par, a)] = uf_find(par, b);
	}
	for (uint32_t e = 0; e < n; e++)
		if (alive[e] && ++size[uf_find(par, e)] > size[best])
			best = uf_find(par, e);
	for (uint32_t e = 0; e < n; e++)
		if (alive[e] && uf_find(par, e) != best)
			alive[e] = 0;
	ret = 0;
err_free:
	free(h.a);
	free(size);
	free(par);
	free(dead_t);
	free(inc);
	free(xinc);
	free(tie);
	free(deg);
	return ret;
}

/*
 * Marks alive[] WN18's entities (rdps_wn18_synset_bits), then drops those left
 * without a triple (of a relation keep[] allows). The bits index synsets in
 * file order, which only holds for WordNet 3.0: other editions are refused.
 */
static int wn18_cut(struct wn *w, const char *dir, const bool *keep, uint8_t *alive, char *err,
		    size_t errlen)
{
	uint32_t nset = 0, nlinked = 0;

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(wn_files); i++)
		if (w->per_file[i] != rdps_wn18_synsets_per_file[i])
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s/%s: %u synsets, WordNet 3.0 has %u: WN18's entities are known for WordNet 3.0 only (use --cut core for another edition)",
					    dir, wn_files[i].file, w->per_file[i],
					    rdps_wn18_synsets_per_file[i]);
	for (size_t i = 0; i < w->norder; i++)
		if (rdps_wn18_synset_bits[i / 64] >> (i % 64) & 1) {
			alive[w->order[i]] = 2; /* in WN18, no triple seen yet */
			nset++;
		}
	for (size_t i = 0; i < w->ntrip; i++) {
		uint32_t h = w->trip[3 * i], t = w->trip[3 * i + 2];

		if (alive[h] && alive[t] && keep[w->trip[3 * i + 1]])
			alive[h] = alive[t] = 1;
	}
	for (uint32_t e = 0; e < w->ent.n; e++) {
		if (alive[e] == 2)
			alive[e] = 0;
		nlinked += alive[e];
	}
	if (nset != rdps_wn18_num_entities)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: %u WN18 synsets found, want %u (damaged data files?)", dir,
				    nset, rdps_wn18_num_entities);
	rdps_info("wordnet: WN18 cut: %u synsets, %u of them without a triple of the cut's relations "
		  "here dropped", nset, nset - nlinked);
	return 0;
}

struct keyed {
	uint64_t key;  /* part of speech rank << 32 | offset */
	uint32_t id;
};

static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

static uint64_t name_key(const char *name)
{
	static const char order[] = "nvar";

	return ((uint64_t)(strchr(order, name[9]) - order) << 32) | strtoul(name, NULL, 10);
}

static int write_triples(FILE *f, const uint32_t *t, const struct rdps_pt_names *ent,
			 const struct rdps_pt_names *rel)
{
	return fprintf(f, "%s\t%s\t%s\n", rdps_pt_names_get(ent, t[0]),
		       rdps_pt_names_get(rel, t[1]), rdps_pt_names_get(ent, t[2])) < 0
		       ? -EIO : 0;
}

int rdps_dataset_wordnet(const char *out_dir, const struct rdps_wordnet_opts *o,
			 struct rdps_dataset_stats *st, char *err, size_t errlen)
{
	struct wn w = { .err = err, .errlen = errlen };
	struct rdps_pt_names ent_out = { 0 }, rel_out = { 0 };
	struct rdps_pt_outdir od = { 0 };
	struct keyed *keyed = NULL;
	uint32_t *newid = NULL, *relid = NULL, *ecnt = NULL, *rcnt = NULL;
	uint8_t *alive = NULL, *where = NULL;
	uint64_t t0 = rdps_now_ns(), seed = o->seed, want[3];
	bool keep[NREL];
	size_t nkeep = 0, nk = 0, u = 0;
	FILE *f[RDPS_SPLIT_COUNT] = { NULL };
	int ret;

	memset(st, 0, sizeof(*st));
	ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen);
	if (ret)
		return ret;
	ret = rdps_pt_names_init(&w.ent, 1 << 17);
	if (ret)
		goto err_free;
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(wn_files); i++) {
		struct rdps_pt_lines lr;
		char *path = rdps_pt_join(o->wordnet_dir, wn_files[i].file);
		long len;

		if (!path) {
			ret = -ENOMEM;
			goto err_free;
		}
		ret = rdps_pt_lines_open(&lr, path, err, errlen);
		if (ret) {
			if (ret == -ENOENT)
				rdps_pt_fail(err, errlen, ret,
					     "%s: not found (install the wordnet-base package or pass --wordnet-dir)",
					     path);
			free(path);
			goto err_free;
		}
		while ((len = rdps_pt_lines_next(&lr)) >= 0) {
			if (lr.line[0] == ' ')
				continue; /* license header */
			if ((ret = parse_line(&w, &lr, i)))
				break;
		}
		if (!ret && len == -EIO)
			ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", path);
		rdps_pt_lines_close(&lr);
		free(path);
		if (ret)
			goto err_free;
		rdps_info("wordnet: %s: %u synsets, %zu pointers so far (%.1f s)",
			  wn_files[i].file, w.ent.n, w.ntrip, (double)(rdps_now_ns() - t0) / 1e9);
	}
	qsort(w.trip, w.ntrip, 3 * sizeof(uint32_t), cmp_trip);
	for (size_t i = 0; i < w.ntrip; i++)
		if (!u || cmp_trip(&w.trip[3 * i], &w.trip[3 * (u - 1)]))
			memmove(&w.trip[3 * u++], &w.trip[3 * i], 3 * sizeof(uint32_t));
	w.ntrip = u;
	rdps_info("wordnet: %u synsets, %zu distinct triples of %zu relation types",
		  w.ent.n, w.ntrip, NREL);

	alive = calloc(w.ent.n ? w.ent.n : 1, 1);
	newid = malloc(((size_t)w.ent.n + 1) * sizeof(uint32_t));
	keyed = malloc(((size_t)w.ent.n + 1) * sizeof(*keyed));
	relid = malloc(NREL * sizeof(uint32_t));
	if (!alive || !newid || !keyed || !relid) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (size_t r = 0; r < NREL; r++)
		keep[r] = o->cut != RDPS_WORDNET_CUT_WN18RR || !wn18rr_drops(r);
	if (o->cut == RDPS_WORDNET_CUT_WN18 || o->cut == RDPS_WORDNET_CUT_WN18RR)
		ret = wn18_cut(&w, o->wordnet_dir, keep, alive, err, errlen);
	else
		ret = dense_core(&w, o->target_entities, alive);
	if (ret)
		goto err_free;
	for (uint32_t e = 0; e < w.ent.n; e++)
		if (alive[e])
			keyed[nk++] = (struct keyed){ name_key(rdps_pt_names_get(&w.ent, e)), e };
	qsort(keyed, nk, sizeof(*keyed), cmp_keyed);
	if ((ret = rdps_pt_names_init(&ent_out, (uint32_t)nk)) ||
	    (ret = rdps_pt_names_init(&rel_out, NREL)))
		goto err_free;
	for (size_t i = 0; i < nk; i++) {
		const char *name = rdps_pt_names_get(&w.ent, keyed[i].id);

		if (rdps_pt_names_add(&ent_out, name, strlen(name), &newid[keyed[i].id]) < 0) {
			ret = -ENOMEM;
			goto err_free;
		}
	}
	/* Keep the triples inside the core, renumbered; relations that occur,
	 * in WN18's order. */
	for (size_t r = 0; r < NREL; r++)
		relid[r] = UINT32_MAX;
	for (size_t i = 0; i < w.ntrip; i++) {
		uint32_t *t = &w.trip[3 * i];

		if (alive[t[0]] && alive[t[2]] && keep[t[1]]) {
			w.trip[3 * nkeep] = newid[t[0]];
			w.trip[3 * nkeep + 1] = t[1];
			w.trip[3 * nkeep + 2] = newid[t[2]];
			relid[t[1]] = 0;
			nkeep++;
		}
	}
	for (size_t r = 0; r < NREL; r++)
		if (relid[r] == 0 &&
		    rdps_pt_names_add(&rel_out, wn_rel[r].name, strlen(wn_rel[r].name), &relid[r]) < 0) {
			ret = -ENOMEM;
			goto err_free;
		}
	for (size_t i = 0; i < nkeep; i++)
		w.trip[3 * i + 1] = relid[w.trip[3 * i + 1]];
	rdps_info("wordnet: %s: %zu entities, %u relations, %zu triples",
		  o->cut == RDPS_WORDNET_CUT_WN18	? "WN18 cut"
		  : o->cut == RDPS_WORDNET_CUT_WN18RR ? "WN18RR cut"
							: "dense core",
		  nk, rel_out.n, nkeep);

	/* Seeded split keeping every entity and relation in train. */
	ecnt = calloc(nk ? nk : 1, sizeof(uint32_t));
	rcnt = calloc(NREL, sizeof(uint32_t));
	where = calloc(nkeep ? nkeep : 1, 1);
	if (!ecnt || !rcnt || !where) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (size_t i = nkeep; i > 1; i--) {
		size_t j = (size_t)rdps_pt_below(rdps_pt_splitmix(&seed), i);
		uint32_t tmp[3];

		memcpy(tmp, &w.trip[3 * (i - 1)], sizeof(tmp));
		memcpy(&w.trip[3 * (i - 1)], &w.trip[3 * j], sizeof(tmp));
		memcpy(&w.trip[3 * j], tmp, sizeof(tmp));
	}
	for (size_t i = 0; i < nkeep; i++) {
		ecnt[w.trip[3 * i]]++;
		ecnt[w.trip[3 * i + 2]]++;
		rcnt[w.trip[3 * i + 1]]++;
	}
	want[RDPS_SPLIT_TRAIN] = 0;
	want[RDPS_SPLIT_VALID] = o->num_valid;
	want[RDPS_SPLIT_TEST] = o->num_test;
	for (size_t i = 0; i < nkeep; i++) {
		const uint32_t *t = &w.trip[3 * i];
		int s = st->num_triples[RDPS_SPLIT_VALID] < want[RDPS_SPLIT_VALID] ? RDPS_SPLIT_VALID
			: st->num_triples[RDPS_SPLIT_TEST] < want[RDPS_SPLIT_TEST] ? RDPS_SPLIT_TEST
			: RDPS_SPLIT_TRAIN;

		if (s != RDPS_SPLIT_TRAIN && ecnt[t[0]] > 1 && ecnt[t[2]] > 1 && rcnt[t[1]] > 1) {
			ecnt[t[0]]--;
			ecnt[t[2]]--;
			rcnt[t[1]]--;
		} else {
			s = RDPS_SPLIT_TRAIN;
		}
		where[i] = (uint8_t)s;
		st->num_triples[s]++;
	}
	if (st->num_triples[RDPS_SPLIT_VALID] < o->num_valid ||
	    st->num_triples[RDPS_SPLIT_TEST] < o->num_test) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "wordnet: only %llu valid and %llu test triples can be held out while keeping every entity in train (asked %llu and %llu)",
				   (unsigned long long)st->num_triples[RDPS_SPLIT_VALID],
				   (unsigned long long)st->num_triples[RDPS_SPLIT_TEST],
				   (unsigned long long)o->num_valid, (unsigned long long)o->num_test);
		goto err_free;
	}
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		char name[16];

		snprintf(name, sizeof(name), "%s.txt", rdps_dataset_split_name((enum rdps_split)s));
		f[s] = rdps_pt_outdir_fopen(&od, name, err, errlen);
		if (!f[s]) {
			ret = -EIO;
			goto err_free;
		}
	}
	for (size_t i = 0; i < nkeep; i++)
		if ((ret = write_triples(f[where[i]], &w.trip[3 * i], &ent_out, &rel_out)))
			break;
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		char name[16];
		int r;

		snprintf(name, sizeof(name), "%s.txt", rdps_dataset_split_name((enum rdps_split)s));
		r = rdps_pt_fclose(f[s], name, err, errlen);
		f[s] = NULL;
		if (!ret)
			ret = r;
	}
	if (ret)
		goto err_free;
	if ((ret = rdps_pt_write_dict(&od, "entities.dict", &ent_out, err, errlen)) ||
	    (ret = rdps_pt_write_dict(&od, "relations.dict", &rel_out, err, errlen)) ||
	    (ret = rdps_pt_outdir_commit(&od, err, errlen)))
		goto err_free;
	st->num_entities = nk;
	st->num_relations = rel_out.n;
	rdps_info("wordnet: wrote %s: train %llu, valid %llu, test %llu (%.1f s)", out_dir,
		  (unsigned long long)st->num_triples[0], (unsigned long long)st->num_triples[1],
		  (unsigned long long)st->num_triples[2], (double)(rdps_now_ns() - t0) / 1e9);

err_free:
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		if (f[s])
			fclose(f[s]);
	free(where);
	free(rcnt);
	free(ecnt);
	free(relid);
	free(keyed);
	free(newid);
	free(alive);
	free(w.trip);
	free(w.order);
	rdps_pt_names_free(&w.ent);
	rdps_pt_names_free(&ent_out);
	rdps_pt_names_free(&rel_out);
	rdps_pt_outdir_end(&od);
	if (ret)
		memset(st, 0, sizeof(*st));
	return ret;
}
