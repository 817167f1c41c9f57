// SPDX-License-Identifier: MIT
/*
 * rdps_dataset_wordnet_nodes: WordNet 3.0 as a node-classification graph
 * (include/rdps/dataset.h has the recipe; docs/dgl.md's WordNet section the
 * figures). Memory: the nodes, their glosses and first lemmas (about 15 MB
 * for WordNet 3.0) and the pointers (12 bytes each); features are made one
 * row at a time while features.npy is written.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

/* The lexicographer files of lexnames(5WN): label = index. */
static const char *const lexnames[] = {
	"adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
	"noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
	"noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
	"noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon",
	"noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
	"noun.shape", "noun.state", "noun.substance", "noun.time", "verb.body",
	"verb.change", "verb.cognition", "verb.communication", "verb.competition",
	"verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
	"verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
	"adj.ppl",
};
#define NLEX RDPS_ARRAY_SIZE(lexnames)

/* Every pointer symbol of wninput(5WN); edge type = index. "\\" is a
 * pertainym in data.adj ("pertains to noun") and "derived from adjective" in
 * data.adv: one symbol, one type. */
static const struct {
	const char *sym;
	const char *name;
} ptr_types[] = {
	{ "@", "hypernym" },
	{ "~", "hyponym" },
	{ "@i", "instance_hypernym" },
	{ "~i", "instance_hyponym" },
	{ "#m", "member_holonym" },
	{ "%m", "member_meronym" },
	{ "#s", "substance_holonym" },
	{ "%s", "substance_meronym" },
	{ "#p", "part_holonym" },
	{ "%p", "part_meronym" },
	{ "!", "antonym" },
	{ "+", "derivationally_related_form" },
	{ "=", "attribute" },
	{ "*", "entailment" },
	{ ">", "cause" },
	{ "$", "verb_group" },
	{ "&", "similar_to" },
	{ "^", "also_see" },
	{ "<", "participle_of_verb" },
	{ "\\", "pertainym" },
	{ ";c", "domain_topic" },
	{ "-c", "member_of_domain_topic" },
	{ ";r", "domain_region" },
	{ "-r", "member_of_domain_region" },
	{ ";u", "domain_usage" },
	{ "-u", "member_of_domain_usage" },
};
#define NTYPE RDPS_ARRAY_SIZE(ptr_types)

static const char *const wn_files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };
#define NFILE RDPS_ARRAY_SIZE(wn_files)

static const char *const split_names[RDPS_SPLIT_COUNT] = { "train", "val", "test" };

struct node {
	uint32_t offset;   /* byte offset in its data file */
	uint32_t lemma;    /* first word: offset in the arena */
	uint64_t gloss;    /* gloss: offset in the arena */
	uint32_t gloss_len;
	uint8_t lex;       /* lexicographer file number */
	char sstype;       /* n v a s r */
};

struct rawptr {
	uint32_t src;      /* node id */
	uint32_t dst_off;  /* target offset in data file dst_file */
	uint8_t dst_file;
	uint8_t type;
};

struct edge {
	uint32_t src;
	uint32_t dst;
	uint32_t type;
};

struct wnn {
	struct node *nodes;
	size_t n, ncap;
	char *arena;
	size_t alen, acap;
	struct rawptr *ptr;
	size_t nptr, pcap;
	uint32_t first[NFILE + 1]; /* node ids of file f: [first[f], first[f+1]) */
	uint64_t ptrs_in[NFILE];   /* pointers read per file */
	uint64_t lexical;          /* pointers between word senses */
	char version[16];
	char *err;
	size_t errlen;
};

void rdps_dataset_wordnet_nodes_defaults(struct rdps_wordnet_nodes_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->wordnet_dir = "/usr/share/wordnet";
	o->feat_dim = 128;
}

static int file_of_pos(const char *tok)
{
	if (!tok[0] || tok[1])
		return -1;
	switch (tok[0]) {
	case 'n': return 0;
	case 'v': return 1;
	case 'a': case 's': return 2;
	case 'r': return 3;
	default: return -1;
	}
}

static int parse_offset(const char *tok, uint32_t *off)
{
	uint32_t v = 0;
	int i;

	for (i = 0; tok[i]; i++) {
		if (tok[i] < '0' || tok[i] > '9' || i == 8)
			return -EINVAL;
		v = v * 10 + (uint32_t)(tok[i] - '0');
	}
	if (i != 8)
		return -EINVAL;
	*off = v;
	return 0;
}

static int arena_add(struct wnn *w, const char *s, size_t len, uint64_t *at)
{
	if (rdps_reserve((void **)&w->arena, &w->acap, w->alen + len + 1))
		return -ENOMEM;
	memcpy(w->arena + w->alen, s, len);
	w->arena[w->alen + len] = '\0';
	*at = w->alen;
	w->alen += len + 1;
	return 0;
}

/* "WordNet 3.0 Copyright ..." in a license line: the version. */
static void header_version(struct wnn *w, const char *line)
{
	const char *p = strstr(line, "WordNet ");
	size_t n = 0;

	if (w->version[0] || !p)
		return;
	p += 8;
	while ((p[n] >= '0' && p[n] <= '9') || (n && p[n] == '.'))
		n++;
	if (n && n < sizeof(w->version))
		memcpy(w->version, p, n);
}

static int parse_line(struct wnn *w, const struct rdps_pt_lines *lr, size_t file)
{
	char *save = NULL, *tok, *bar = strchr(lr->line, '|'), *gloss, *gend;
	struct node *nd;
	unsigned long v, nwords, nptr;
	uint64_t at;
	char *end;

#define NEXT() strtok_r(NULL, " ", &save)
#define BAD(fmt, ...) rdps_pt_fail(w->err, w->errlen, -EINVAL, "%s:%llu: " fmt, lr->path, \
				   (unsigned long long)lr->lineno, ##__VA_ARGS__)
	if (!bar)
		return BAD("no gloss ('|')");
	gloss = bar + 1;
	while (*gloss == ' ')
		gloss++;
	gend = gloss + strlen(gloss);
	while (gend > gloss && (gend[-1] == ' ' || gend[-1] == '\t'))
		gend--;
	*bar = '\0';
	if (rdps_reserve((void **)&w->nodes, &w->ncap, (w->n + 1) * sizeof(*w->nodes)))
		return -ENOMEM;
	nd = &w->nodes[w->n];
	memset(nd, 0, sizeof(*nd));
	tok = strtok_r(lr->line, " ", &save);
	if (!tok || parse_offset(tok, &nd->offset))
		return BAD("bad synset offset");
	if (w->n > w->first[file] && nd->offset <= w->nodes[w->n - 1].offset)
		return BAD("synset %08u after %08u: offsets not ascending", nd->offset,
			   w->nodes[w->n - 1].offset);
	tok = NEXT();
	v = tok ? strtoul(tok, &end, 10) : 0;
	if (!tok || *end || end == tok)
		return BAD("bad lexicographer file number");
	if (v >= NLEX)
		return BAD("lexicographer file %lu: lexnames(5WN) has 0..%zu", v, NLEX - 1);
	nd->lex = (uint8_t)v;
	tok = NEXT();
	if (!tok || file_of_pos(tok) != (int)file)
		return BAD("synset type '%s' in %s", tok ? tok : "", wn_files[file]);
	nd->sstype = tok[0];
	tok = NEXT();
	nwords = tok ? strtoul(tok, &end, 16) : 0;
	if (!tok || *end || !nwords)
		return BAD("bad word count");
	for (unsigned long i = 0; i < 2 * nwords; i++) {
		if (!(tok = NEXT()))
			return BAD("word list cut short");
		if (i == 0) {
			size_t len = strlen(tok);

			/* data.adj's syntactic markers: word(a), word(p), word(ip) */
			if (file == 2 && len > 3 && tok[len - 1] == ')') {
				if (!strcmp(tok + len - 3, "(a)") || !strcmp(tok + len - 3, "(p)"))
					len -= 3;
				else if (len > 4 && !strcmp(tok + len - 4, "(ip)"))
					len -= 4;
			}
			if (arena_add(w, tok, len, &at))
				return -ENOMEM;
			if (at > UINT32_MAX)
				return -EOVERFLOW;
			nd->lemma = (uint32_t)at;
		}
	}
	tok = NEXT();
	nptr = tok ? strtoul(tok, &end, 10) : 0;
	if (!tok || *end || end == tok)
		return BAD("bad pointer count");
	for (unsigned long i = 0; i < nptr; i++) {
		char *f[4];
		size_t t;
		int df;

		for (int j = 0; j < 4; j++)
			if (!(f[j] = NEXT()))
				return BAD("pointer %lu of %lu cut short", i + 1, nptr);
		for (t = 0; t < NTYPE; t++)
			if (!strcmp(f[0], ptr_types[t].sym))
				break;
		if (t == NTYPE)
			return BAD("unknown pointer symbol '%s'", f[0]);
		if ((df = file_of_pos(f[2])) < 0)
			return BAD("bad pointer part of speech '%s'", f[2]);
		if (rdps_reserve((void **)&w->ptr, &w->pcap, (w->nptr + 1) * sizeof(*w->ptr)))
			return -ENOMEM;
		if (parse_offset(f[1], &w->ptr[w->nptr].dst_off))
			return BAD("bad pointer offset '%s'", f[1]);
		if (strlen(f[3]) != 4 || strspn(f[3], "0123456789abcdefABCDEF") != 4)
			return BAD("bad pointer source/target '%s'", f[3]);
		w->ptr[w->nptr].src = (uint32_t)w->n;
		w->ptr[w->nptr].dst_file = (uint8_t)df;
		w->ptr[w->nptr].type = (uint8_t)t;
		w->nptr++;
		w->ptrs_in[file]++;
		w->lexical += strcmp(f[3], "0000") != 0;
	}
	if (arena_add(w, gloss, (size_t)(gend - gloss), &nd->gloss))
		return -ENOMEM;
	nd->gloss_len = (uint32_t)(gend - gloss);
	w->n++;
	return 0;
#undef NEXT
#undef BAD
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	return (x->type > y->type) - (x->type < y->type);
}

/* Node id of (file, offset), or UINT32_MAX. */
static uint32_t find_node(const struct wnn *w, size_t file, uint32_t off)
{
	uint32_t lo = w->first[file], hi = w->first[file + 1];

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (w->nodes[mid].offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < w->first[file + 1] && w->nodes[lo].offset == off ? lo : UINT32_MAX;
}

static size_t file_of_node(const struct wnn *w, uint32_t id)
{
	size_t f = 0;

	while (f + 1 < NFILE && id >= w->first[f + 1])
		f++;
	return f;
}

/* Is there an edge src -> dst (any type)? edges sorted by cmp_edge. */
static int has_pair(const struct edge *e, size_t n, uint32_t src, uint32_t dst)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e[mid].src < src || (e[mid].src == src && e[mid].dst < dst))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && e[lo].src == src && e[lo].dst == dst;
}

/* The header of a version 1.0 .npy file, as numpy 1.24 writes it: the dict
 * (with room for the first axis to grow to 21 digits), spaces, "\n", the
 * total a multiple of 64. cols 0: a 1-D array. */
static int npy_header(char *buf, size_t len, const char *descr, uint64_t rows, uint64_t cols)
{
	char dict[192], shape[64];
	int dl, rl, pad, total;

	rl = snprintf(shape, sizeof(shape), "%llu", (unsigned long long)rows);
	if (cols)
		snprintf(shape, sizeof(shape), "(%llu, %llu)", (unsigned long long)rows,
			 (unsigned long long)cols);
	else
		snprintf(shape, sizeof(shape), "(%llu,)", (unsigned long long)rows);
	dl = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }%*s",
		      descr, shape, rl < 21 ? 21 - rl : 0, "");
	pad = 64 - (6 + 2 + 2 + dl + 1) % 64;
	total = 6 + 2 + 2 + dl + pad + 1;
	if ((size_t)total > len || total - 10 > 65535)
		return -ENOSPC;
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, (size_t)dl);
	memset(buf + 10 + dl, ' ', (size_t)pad);
	buf[total - 1] = '\n';
	return total;
}

static FILE *npy_open(const struct rdps_pt_outdir *od, const char *name, const char *descr,
		      uint64_t rows, uint64_t cols, char *err, size_t errlen)
{
	char hdr[256];
	int hl = npy_header(hdr, sizeof(hdr), descr, rows, cols);
	FILE *f;

	if (hl < 0) {
		rdps_pt_fail(err, errlen, hl, "%s: shape too large for a .npy header", name);
		return NULL;
	}
	f = rdps_pt_outdir_fopen(od, name, err, errlen);
	if (f && fwrite(hdr, 1, (size_t)hl, f) != (size_t)hl) {
		rdps_pt_fail(err, errlen, -EIO, "%s: write failed", name);
		fclose(f);
		return NULL;
	}
	return f;
}

static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Hashed bag of words of gloss g[len] into row[dim] (see dataset.h); cnt is
 * dim counters, tok a buffer of len bytes. */
static void featurize(const char *g, size_t len, uint32_t dim, uint32_t *cnt, char *tok,
		      float *row)
{
	double ss = 0;

	memset(cnt, 0, dim * sizeof(*cnt));
	for (size_t i = 0; i < len;) {
		size_t n = 0;

		if (!is_alnum(g[i])) {
			i++;
			continue;
		}
		for (; i < len && is_alnum(g[i]); i++)
			tok[n++] = g[i] >= 'A' && g[i] <= 'Z' ? (char)(g[i] - 'A' + 'a') : g[i];
		cnt[XXH3_64bits(tok, n) % dim]++;
	}
	for (uint32_t j = 0; j < dim; j++)
		ss += (double)cnt[j] * cnt[j];
	ss = ss > 0 ? sqrt(ss) : 1;
	for (uint32_t j = 0; j < dim; j++)
		row[j] = (float)(cnt[j] / ss);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

struct counts {
	uint64_t per_type[NTYPE];
	uint64_t per_type_rev[NTYPE];      /* edges of the type whose reverse pair exists */
	uint64_t per_class[NLEX][RDPS_SPLIT_COUNT + 1]; /* [split], [3] all */
	uint64_t self_loops, duplicates, with_reverse, isolated, empty_glosses;
	uint32_t num_classes, classes_present;
};

static int write_json(const struct rdps_pt_outdir *od, const struct wnn *w,
		      const struct rdps_wordnet_nodes_opts *o, const struct rdps_graph_stats *st,
		      const struct counts *c, char *err, size_t errlen)
{
	FILE *f = rdps_pt_outdir_fopen(od, "graph.json", err, errlen);

	if (!f)
		return -EIO;
	fprintf(f, "{\n  \"name\": \"wordnet-nodes\",\n");
	fprintf(f, "  \"num_nodes\": %llu,\n  \"num_edges\": %llu,\n  \"num_classes\": %u,\n",
		(unsigned long long)st->num_nodes, (unsigned long long)st->num_edges,
		c->num_classes);
	fprintf(f, "  \"classes_present\": %u,\n", c->classes_present);
	fprintf(f, "  \"num_etypes\": %zu,\n  \"feat_dim\": %u,\n  \"seed\": %llu,\n", NTYPE,
		o->feat_dim, (unsigned long long)o->seed);
	fprintf(f, "  \"splits\": {\"train\": %llu, \"val\": %llu, \"test\": %llu},\n",
		(unsigned long long)st->num_split[0], (unsigned long long)st->num_split[1],
		(unsigned long long)st->num_split[2]);
	fprintf(f, "  \"edges\": {\n"
		   "    \"direction\": \"src is the synset whose data line holds the pointer, dst its target\",\n"
		   "    \"reverse_edges_added\": false,\n"
		   "    \"with_reverse_pair\": %llu,\n"
		   "    \"self_loops_dropped\": %llu,\n"
		   "    \"duplicates_dropped\": %llu,\n"
		   "    \"isolated_nodes\": %llu\n  },\n",
		(unsigned long long)c->with_reverse, (unsigned long long)c->self_loops,
		(unsigned long long)c->duplicates, (unsigned long long)c->isolated);
	fprintf(f, "  \"edge_types\": [\n");
	for (size_t t = 0; t < NTYPE; t++) {
		fprintf(f, "    {\"id\": %zu, \"symbol\": ", t);
		json_str(f, ptr_types[t].sym);
		fprintf(f, ", \"name\": \"%s\", \"edges\": %llu, \"with_reverse_pair\": %llu}%s\n",
			ptr_types[t].name, (unsigned long long)c->per_type[t],
			(unsigned long long)c->per_type_rev[t], t + 1 < NTYPE ? "," : "");
	}
	fprintf(f, "  ],\n  \"classes\": [\n");
	for (uint32_t l = 0; l < c->num_classes; l++)
		fprintf(f, "    {\"id\": %u, \"name\": \"%s\", \"nodes\": %llu, \"train\": %llu, \"val\": %llu, \"test\": %llu}%s\n",
			l, lexnames[l], (unsigned long long)c->per_class[l][3],
			(unsigned long long)c->per_class[l][0], (unsigned long long)c->per_class[l][1],
			(unsigned long long)c->per_class[l][2], l + 1 < c->num_classes ? "," : "");
	fprintf(f, "  ],\n  \"features\": {\n"
		   "    \"dtype\": \"float32\",\n"
		   "    \"recipe\": \"the gloss (text after '| ', examples included, trailing spaces cut) split into maximal runs of ASCII letters and digits, lower-cased; each token adds 1 to bucket XXH3_64bits(token) mod feat_dim (xxHash 0.8, seed 0); counts divided by their L2 norm (double, stored as float32); no token: a zero row\",\n"
		   "    \"empty_glosses\": %llu\n  },\n",
		(unsigned long long)c->empty_glosses);
	fprintf(f, "  \"split\": \"node ids shuffled by Fisher-Yates driven by splitmix64 from the seed: the first floor(0.8 N) train, the next floor(0.1 N) val, the rest test\",\n");
	fprintf(f, "  \"files\": {\"edges\": \"edges.npy\", \"etypes\": \"etypes.npy\", \"features\": \"features.npy\", \"labels\": \"labels.npy\", \"train_mask\": \"train_mask.npy\", \"val_mask\": \"val_mask.npy\", \"test_mask\": \"test_mask.npy\", \"nodes\": \"nodes.tsv\", \"etype_names\": \"etypes.tsv\"},\n");
	fprintf(f, "  \"source\": {\n    \"wordnet_version\": ");
	json_str(f, w->version[0] ? w->version : "unknown");
	fprintf(f, ",\n    \"dir\": ");
	json_str(f, o->wordnet_dir);
	fprintf(f, ",\n    \"files\": [\n");
	for (size_t i = 0; i < NFILE; i++)
		fprintf(f, "      {\"name\": \"%s\", \"synsets\": %u, \"pointers\": %llu}%s\n",
			wn_files[i], w->first[i + 1] - w->first[i],
			(unsigned long long)w->ptrs_in[i], i + 1 < NFILE ? "," : "");
	fprintf(f, "    ],\n    \"pointers_read\": %zu,\n    \"lexical_pointers\": %llu\n  }\n}\n",
		w->nptr, (unsigned long long)w->lexical);
	return rdps_pt_fclose(f, "graph.json", err, errlen);
}

static int write_tsvs(const struct rdps_pt_outdir *od, const struct wnn *w, char *err,
		      size_t errlen)
{
	FILE *f = rdps_pt_outdir_fopen(od, "nodes.tsv", err, errlen);
	int ret;

	if (!f)
		return -EIO;
	fprintf(f, "node_id\tsynset_offset\tpos\tlexname\tfirst_lemma\n");
	for (size_t i = 0; i < w->n; i++)
		fprintf(f, "%zu\t%08u\t%c\t%s\t%s\n", i, w->nodes[i].offset, w->nodes[i].sstype,
			lexnames[w->nodes[i].lex], w->arena + w->nodes[i].lemma);
	if ((ret = rdps_pt_fclose(f, "nodes.tsv", err, errlen)))
		return ret;
	f = rdps_pt_outdir_fopen(od, "etypes.tsv", err, errlen);
	if (!f)
		return -EIO;
	fprintf(f, "etype_id\tsymbol\tname\n");
	for (size_t t = 0; t < NTYPE; t++)
		fprintf(f, "%zu\t%s\t%s\n", t, ptr_types[t].sym, ptr_types[t].name);
	return rdps_pt_fclose(f, "etypes.tsv", err, errlen);
}

static int write_arrays(const struct rdps_pt_outdir *od, const struct wnn *w, uint32_t dim,
			const struct edge *e, size_t ne, const uint8_t *split, char *err,
			size_t errlen)
{
	uint32_t *cnt = malloc(dim * sizeof(*cnt)), maxlen = 1;
	float *row = malloc(dim * sizeof(*row));
	char *tok = NULL;
	FILE *f = NULL;
	int ret = -ENOMEM;

	for (size_t i = 0; i < w->n; i++)
		if (w->nodes[i].gloss_len > maxlen)
			maxlen = w->nodes[i].gloss_len;
	tok = malloc(maxlen);
	if (!cnt || !row || !tok)
		goto out;
	ret = -EIO;
	if (!(f = npy_open(od, "edges.npy", "<i8", ne, 2, err, errlen)))
		goto out;
	for (size_t i = 0; i < ne; i++) {
		int64_t v[2] = { e[i].src, e[i].dst };

		fwrite(v, sizeof(v), 1, f);
	}
	if ((ret = rdps_pt_fclose(f, "edges.npy", err, errlen)))
		goto out_closed;
	ret = -EIO;
	if (!(f = npy_open(od, "etypes.npy", "<i8", ne, 0, err, errlen)))
		goto out;
	for (size_t i = 0; i < ne; i++) {
		int64_t v = e[i].type;

		fwrite(&v, sizeof(v), 1, f);
	}
	if ((ret = rdps_pt_fclose(f, "etypes.npy", err, errlen)))
		goto out_closed;
	ret = -EIO;
	if (!(f = npy_open(od, "labels.npy", "<i8", w->n, 0, err, errlen)))
		goto out;
	for (size_t i = 0; i < w->n; i++) {
		int64_t v = w->nodes[i].lex;

		fwrite(&v, sizeof(v), 1, f);
	}
	if ((ret = rdps_pt_fclose(f, "labels.npy", err, errlen)))
		goto out_closed;
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		char name[32];

		snprintf(name, sizeof(name), "%s_mask.npy", split_names[s]);
		ret = -EIO;
		if (!(f = npy_open(od, name, "|u1", w->n, 0, err, errlen)))
			goto out;
		for (size_t i = 0; i < w->n; i++)
			fputc(split[i] == s, f);
		if ((ret = rdps_pt_fclose(f, name, err, errlen)))
			goto out_closed;
	}
	ret = -EIO;
	if (!(f = npy_open(od, "features.npy", "<f4", w->n, dim, err, errlen)))
		goto out;
	for (size_t i = 0; i < w->n; i++) {
		featurize(w->arena + w->nodes[i].gloss, w->nodes[i].gloss_len, dim, cnt, tok, row);
		fwrite(row, sizeof(*row), dim, f);
	}
	ret = rdps_pt_fclose(f, "features.npy", err, errlen);
	goto out_closed;
out:
	if (f)
		fclose(f);
out_closed:
	free(tok);
	free(row);
	free(cnt);
	return ret;
}

int rdps_dataset_wordnet_nodes(const char *out_dir, const struct rdps_wordnet_nodes_opts *o,
			       struct rdps_graph_stats *st, char *err, size_t errlen)
{
	struct wnn w = { .err = err, .errlen = errlen };
	struct rdps_pt_outdir od = { 0 };
	struct counts *c = NULL;
	struct edge *e = NULL;
	uint32_t *perm = NULL;
	uint8_t *split = NULL, *touched = NULL;
	uint64_t t0 = rdps_now_ns(), seed = o->seed;
	size_t ne = 0;
	int ret;

	memset(st, 0, sizeof(*st));
	if (o->feat_dim < 1 || o->feat_dim > RDPS_WORDNET_NODES_MAX_FEAT_DIM)
		return rdps_pt_fail(err, errlen, -EINVAL, "--feat-dim %u: want 1..%u", o->feat_dim,
				    RDPS_WORDNET_NODES_MAX_FEAT_DIM);
	for (size_t i = 0; i < NFILE; i++) {
		char *path = rdps_pt_join(o->wordnet_dir, wn_files[i]);

		if (!path)
			return -ENOMEM;
		if (access(path, R_OK)) {
			ret = -errno;
			rdps_pt_fail(err, errlen, ret,
				     ret == -ENOENT
				     ? "%s: not found (install Debian's wordnet-base package, or pass --wordnet-dir DIR holding WordNet's data.noun, data.verb, data.adj, data.adv)"
				     : "%s: cannot be read", path);
			free(path);
			return ret;
		}
		free(path);
	}
	ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen);
	if (ret)
		return ret;

	for (size_t i = 0; i < NFILE; i++) {
		struct rdps_pt_lines lr;
		char *path = rdps_pt_join(o->wordnet_dir, wn_files[i]);
		long len;

		if (!path) {
			ret = -ENOMEM;
			goto out;
		}
		w.first[i] = (uint32_t)w.n;
		ret = rdps_pt_lines_open(&lr, path, err, errlen);
		if (ret) {
			free(path);
			goto out;
		}
		while ((len = rdps_pt_lines_next(&lr)) >= 0) {
			if (lr.line[0] == ' ') {
				header_version(&w, lr.line);
				continue; /* license header */
			}
			if ((ret = parse_line(&w, &lr, i)))
				break;
		}
		if (!ret && len == -EIO)
			ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", path);
		rdps_pt_lines_close(&lr);
		if (!ret && w.n == w.first[i])
			ret = rdps_pt_fail(err, errlen, -EINVAL, "%s: no synsets", path);
		free(path);
		if (ret)
			goto out;
		w.first[i + 1] = (uint32_t)w.n;
		rdps_info("wordnet-nodes: %s: %u synsets, %zu pointers so far (%.1f s)",
			  wn_files[i], w.first[i + 1] - w.first[i], w.nptr,
			  (double)(rdps_now_ns() - t0) / 1e9);
	}

	/* Pointers to edges: resolved, no self-loops, (src, dst, type) once. */
	c = calloc(1, sizeof(*c));
	e = malloc((w.nptr ? w.nptr : 1) * sizeof(*e));
	touched = calloc(w.n, 1);
	if (!c || !e || !touched) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w.nptr; i++) {
		const struct rawptr *p = &w.ptr[i];
		uint32_t dst = find_node(&w, p->dst_file, p->dst_off);

		if (dst == UINT32_MAX) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s/%s: synset %08u has a '%s' pointer to %08u in %s, which holds no such synset",
					   o->wordnet_dir, wn_files[file_of_node(&w, p->src)],
					   w.nodes[p->src].offset, ptr_types[p->type].sym, p->dst_off,
					   wn_files[p->dst_file]);
			goto out;
		}
		if (dst == p->src) {
			c->self_loops++;
			continue;
		}
		e[ne++] = (struct edge){ p->src, dst, p->type };
	}
	qsort(e, ne, sizeof(*e), cmp_edge);
	{
		size_t u = 0;

		for (size_t i = 0; i < ne; i++)
			if (!u || cmp_edge(&e[i], &e[u - 1]))
				e[u++] = e[i];
		c->duplicates = ne - u;
		ne = u;
	}
	for (size_t i = 0; i < ne; i++) {
		int rev = has_pair(e, ne, e[i].dst, e[i].src);

		c->per_type[e[i].type]++;
		c->per_type_rev[e[i].type] += (uint64_t)rev;
		c->with_reverse += (uint64_t)rev;
		touched[e[i].src] = touched[e[i].dst] = 1;
	}
	rdps_info("wordnet-nodes: %zu synsets, %zu pointers: %zu edges (%llu self-loops, %llu duplicates dropped)",
		  w.n, w.nptr, ne, (unsigned long long)c->self_loops,
		  (unsigned long long)c->duplicates);

	/* The split. */
	perm = malloc(w.n * sizeof(*perm));
	split = malloc(w.n);
	if (!perm || !split) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w.n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = w.n; i > 1; i--) {
		size_t j = (size_t)rdps_pt_below(rdps_pt_splitmix(&seed), i);
		uint32_t tmp = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = tmp;
	}
	st->num_split[RDPS_SPLIT_TRAIN] = w.n * 8 / 10;
	st->num_split[RDPS_SPLIT_VALID] = w.n / 10;
	st->num_split[RDPS_SPLIT_TEST] = w.n - st->num_split[0] - st->num_split[1];
	for (size_t i = 0; i < w.n; i++)
		split[perm[i]] = i < st->num_split[0] ? RDPS_SPLIT_TRAIN
				 : i < st->num_split[0] + st->num_split[1] ? RDPS_SPLIT_VALID
				 : RDPS_SPLIT_TEST;
	for (size_t i = 0; i < w.n; i++) {
		const struct node *nd = &w.nodes[i];
		const char *g = w.arena + nd->gloss;
		int tokens = 0;

		c->per_class[nd->lex][split[i]]++;
		c->per_class[nd->lex][3]++;
		if (nd->lex + 1u > c->num_classes)
			c->num_classes = nd->lex + 1u;
		c->isolated += !touched[i];
		for (uint32_t k = 0; k < nd->gloss_len && !tokens; k++)
			tokens = is_alnum(g[k]);
		c->empty_glosses += !tokens;
	}
	for (uint32_t l = 0; l < c->num_classes; l++)
		c->classes_present += c->per_class[l][3] != 0;

	st->num_nodes = w.n;
	st->num_edges = ne;
	st->num_classes = c->num_classes;
	st->feat_dim = o->feat_dim;
	for (size_t t = 0; t < NTYPE; t++)
		st->num_etypes += c->per_type[t] != 0;
	rdps_info("wordnet-nodes: writing %s: %zu x %u features, %u classes, train %llu, val %llu, test %llu",
		  out_dir, w.n, o->feat_dim, c->num_classes, (unsigned long long)st->num_split[0],
		  (unsigned long long)st->num_split[1], (unsigned long long)st->num_split[2]);
	if ((ret = write_arrays(&od, &w, o->feat_dim, e, ne, split, err, errlen)) ||
	    (ret = write_tsvs(&od, &w, err, errlen)) ||
	    (ret = write_json(&od, &w, o, st, c, err, errlen)) ||
	    (ret = rdps_pt_outdir_commit(&od, err, errlen)))
		goto out;
	rdps_info("wordnet-nodes: wrote %s (%.1f s)", out_dir, (double)(rdps_now_ns() - t0) / 1e9);
out:
	free(split);
	free(perm);
	free(touched);
	free(e);
	free(c);
	free(w.ptr);
	free(w.arena);
	free(w.nodes);
	rdps_pt_outdir_end(&od);
	if (ret)
		memset(st, 0, sizeof(*st));
	return ret;
}
