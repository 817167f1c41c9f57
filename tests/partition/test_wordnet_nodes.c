// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * rdps_dataset_wordnet_nodes (rdps dataset wordnet-nodes): WordNet 3.0 as a
 * node-classification graph. The real one (Debian's wordnet-base) is built
 * once for the suite (ReportHook PRE_ALL, seed 0, 128 features) and every
 * file is checked against the data files read here on their own: WordNet's
 * synset offsets are byte offsets, so a node's line is data + offset. A
 * hand-made WordNet of five synsets pins the edge rules exactly, and serves
 * the error and CLI tests.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "helpers.h"
#include "rdps/dataset.h"

#define WORDNET_DIR "/usr/share/wordnet"
#define NNODES 117659

static const char *const data_files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };
static const char *const all_files[] = {
	"graph.json", "edges.npy", "etypes.npy", "features.npy", "labels.npy", "train_mask.npy",
	"val_mask.npy", "test_mask.npy", "nodes.tsv", "etypes.tsv",
};

static char *dir;
static char err[512];

/* ---- the suite's shared build of the real WordNet ---- */

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	struct rdps_wordnet_nodes_opts o;
	struct rdps_graph_stats st;
	char e[512] = "", *d, *out;
	int ret;

	(void)set;
	th_quiet();
	if (access(WORDNET_DIR "/data.noun", R_OK))
		return;
	d = strdup("/tmp/rdps-wnn-test-XXXXXX");
	if (!d || !mkdtemp(d))
		return;
	setenv("RDPS_WNN_TEST_DIR", d, 1);
	if (asprintf(&out, "%s/wn", d) < 0)
		return;
	rdps_dataset_wordnet_nodes_defaults(&o);
	ret = rdps_dataset_wordnet_nodes(out, &o, &st, e, sizeof(e));
	if (ret)
		setenv("RDPS_WNN_TEST_ERR", e[0] ? e : "failed", 1);
	free(out);
	free(d);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	const char *d = getenv("RDPS_WNN_TEST_DIR");

	(void)stats;
	if (d)
		th_rmtree(strdup(d));
}

static void setup(void)
{
	th_quiet();
	if (!dir)
		dir = th_mkdtemp();
	err[0] = '\0';
}

static void teardown(void)
{
	th_rmtree(dir);
	dir = NULL;
}

TestSuite(wordnet_nodes, .init = setup, .fini = teardown);

/* The shared build's directory (skips the test without wordnet-base). */
static char *real_dir(void)
{
	const char *d = getenv("RDPS_WNN_TEST_DIR"), *e = getenv("RDPS_WNN_TEST_ERR");

	if (!d)
		cr_skip_test("wordnet-base is not installed (" WORDNET_DIR "/data.noun)");
	cr_assert_null(e, "building the dataset failed: %s", e);
	return th_path(d, "wn");
}

/* ---- reading the output on its own ---- */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert(f, "open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

struct npy {
	char *file;
	void *data;
	uint64_t rows, cols; /* cols 0: 1-D */
};

/* Reads a .npy v1.0 file and checks its header against descr and shape
 * (cols 0: 1-D; rows UINT64_MAX: any). */
static void npy_load(const char *d, const char *name, const char *descr, uint64_t rows,
		     uint64_t cols, struct npy *a)
{
	char *p = th_path(d, name), *h, *s, want[64];
	size_t len, hl, item = descr[2] == '8' ? 8 : descr[2] == '4' ? 4 : 1;

	a->file = slurp(p, &len);
	cr_assert(len >= 10 && !memcmp(a->file, "\x93NUMPY\x01\x00", 8), "%s: not .npy 1.0", p);
	hl = (unsigned char)a->file[8] | (size_t)(unsigned char)a->file[9] << 8;
	cr_assert_eq((10 + hl) % 64, 0, "%s: header of %zu bytes not 64-aligned", p, 10 + hl);
	cr_assert_eq(a->file[10 + hl - 1], '\n');
	h = strndup(a->file + 10, hl);
	snprintf(want, sizeof(want), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	cr_assert(!strncmp(h, want, strlen(want)), "%s: header %s", p, h);
	s = h + strlen(want);
	a->rows = strtoull(s, &s, 10);
	if (cols) {
		cr_assert(!strncmp(s, ", ", 2), "%s: header %s", p, h);
		a->cols = strtoull(s + 2, &s, 10);
		cr_assert(!strncmp(s, "), }", 4), "%s: header %s", p, h);
	} else {
		a->cols = 0;
		cr_assert(!strncmp(s, ",), }", 5), "%s: header %s (want 1-D)", p, h);
	}
	if (rows != UINT64_MAX)
		cr_assert_eq(a->rows, rows, "%s: %llu rows, want %llu", p,
			     (unsigned long long)a->rows, (unsigned long long)rows);
	cr_assert_eq(a->cols, cols, "%s: %llu columns, want %llu", p, (unsigned long long)a->cols,
		     (unsigned long long)cols);
	cr_assert_eq(len - 10 - hl, a->rows * (cols ? cols : 1) * item, "%s: %zu data bytes", p,
		     len - 10 - hl);
	a->data = a->file + 10 + hl;
	free(h);
	free(p);
}

struct node_row {
	uint32_t offset;
	char pos;      /* n v a s r */
	int file;      /* data file index */
	char lexname[24];
	char lemma[96];
};

static int file_of(char pos)
{
	return pos == 'n' ? 0 : pos == 'v' ? 1 : pos == 'a' || pos == 's' ? 2 : pos == 'r' ? 3 : -1;
}

/* nodes.tsv: a header line, then "id offset pos lexname lemma" for 0..n-1. */
static struct node_row *read_nodes(const char *d, size_t *n)
{
	char *p = th_path(d, "nodes.tsv"), line[256];
	FILE *f = fopen(p, "r");
	struct node_row *r = NULL;
	size_t cap = 0, i = 0;

	cr_assert(f, "open %s", p);
	cr_assert(fgets(line, sizeof(line), f));
	cr_assert_str_eq(line, "node_id\tsynset_offset\tpos\tlexname\tfirst_lemma\n");
	while (fgets(line, sizeof(line), f)) {
		unsigned long id, off;
		char pos;

		if (i == cap) {
			cap = cap ? 2 * cap : 1024;
			r = realloc(r, cap * sizeof(*r));
			cr_assert(r);
		}
		cr_assert_eq(sscanf(line, "%lu\t%8lu\t%c\t%23s\t%95s", &id, &off, &pos, r[i].lexname,
				    r[i].lemma), 5, "nodes.tsv: %s", line);
		cr_assert_eq(id, i, "nodes.tsv: id %lu on row %zu", id, i);
		r[i].offset = (uint32_t)off;
		r[i].pos = pos;
		r[i].file = file_of(pos);
		cr_assert_geq(r[i].file, 0, "nodes.tsv: pos '%c'", pos);
		i++;
	}
	fclose(f);
	free(p);
	*n = i;
	return r;
}

/* etypes.tsv: symbols by id. */
static int read_etypes(const char *d, char sym[][4], char name[][40])
{
	char *p = th_path(d, "etypes.tsv"), line[128];
	FILE *f = fopen(p, "r");
	int n = 0;

	cr_assert(f);
	cr_assert(fgets(line, sizeof(line), f));
	cr_assert_str_eq(line, "etype_id\tsymbol\tname\n");
	while (fgets(line, sizeof(line), f)) {
		int id;

		cr_assert_lt(n, 32);
		cr_assert_eq(sscanf(line, "%d\t%3s\t%39s", &id, sym[n], name[n]), 3, "%s", line);
		cr_assert_eq(id, n);
		n++;
	}
	fclose(f);
	free(p);
	return n;
}

/* ---- the data files, read here ---- */

struct wn_data {
	char *buf[4];
	size_t len[4];
};

static void wn_load(const char *wdir, struct wn_data *w)
{
	for (int i = 0; i < 4; i++) {
		char *p = th_path(wdir, data_files[i]);

		w->buf[i] = slurp(p, &w->len[i]);
		free(p);
	}
}

static void wn_free(struct wn_data *w)
{
	for (int i = 0; i < 4; i++)
		free(w->buf[i]);
}

/* The line of synset (file, offset): a malloc'd copy without "\n". */
static char *synset_line(const struct wn_data *w, int file, uint32_t off)
{
	const char *s = w->buf[file] + off, *e;
	char want[16];

	cr_assert_lt(off, w->len[file]);
	cr_assert(off == 0 || w->buf[file][off - 1] == '\n', "%s: %08u is not a line start",
		  data_files[file], off);
	snprintf(want, sizeof(want), "%08u ", off);
	cr_assert(!strncmp(s, want, 9), "%s: no synset at %08u", data_files[file], off);
	e = strchr(s, '\n');
	return strndup(s, e ? (size_t)(e - s) : strlen(s));
}

/* The gloss of a line: after "| ", trailing blanks cut. */
static char *gloss_of(const char *line)
{
	const char *g = strchr(line, '|');
	size_t n;

	cr_assert(g);
	g++;
	while (*g == ' ')
		g++;
	n = strlen(g);
	while (n && (g[n - 1] == ' ' || g[n - 1] == '\t'))
		n--;
	return strndup(g, n);
}

/* The recipe, written again: lower-cased alphanumeric runs, XXH3 mod dim,
 * counts over their L2 norm. */
static void recipe(const char *g, uint32_t dim, float *row)
{
	double *c = calloc(dim, sizeof(double)), norm = 0;
	char tok[1024];
	size_t n = 0;

	for (const char *p = g;; p++) {
		if (*p && isalnum((unsigned char)*p)) {
			cr_assert_lt(n, sizeof(tok));
			tok[n++] = (char)tolower((unsigned char)*p);
			continue;
		}
		if (n)
			c[XXH3_64bits(tok, n) % dim] += 1;
		n = 0;
		if (!*p)
			break;
	}
	for (uint32_t j = 0; j < dim; j++)
		norm += c[j] * c[j];
	norm = sqrt(norm);
	for (uint32_t j = 0; j < dim; j++)
		row[j] = norm > 0 ? (float)(c[j] / norm) : 0.0f;
	free(c);
}

static json_t *read_json(const char *d)
{
	char *p = th_path(d, "graph.json");
	json_error_t je;
	json_t *j = json_load_file(p, 0, &je);

	cr_assert(j, "%s:%d: %s", p, je.line, je.text);
	free(p);
	return j;
}

static long long jint(json_t *j, const char *path)
{
	char buf[128], *save = NULL, *k;
	json_t *v = j;

	snprintf(buf, sizeof(buf), "%s", path);
	for (k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
		v = json_object_get(v, k);
	cr_assert(json_is_integer(v), "graph.json: %s is not an integer", path);
	return json_integer_value(v);
}

struct edge {
	int64_t src, dst, type;
};

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	return (x->type > y->type) - (x->type < y->type);
}

struct key {
	uint64_t k; /* file << 32 | offset */
	uint32_t id;
};

static int cmp_key(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	return x->k < y->k ? -1 : x->k > y->k;
}

/* ====================================================================== */

/* Nodes: 117,659 synsets (82,115 nouns, 13,767 verbs, 18,156 adjectives,
 * 3,621 adverbs) in file order; nodes.tsv and labels.npy agree with each
 * synset's line (offset, type, lexicographer file, first word); graph.json
 * has the counts. */
Test(wordnet_nodes, nodes_and_labels_match_data_files)
{
	static const char *lex[45] = {
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
	static const uint32_t per_file[4] = { 82115, 13767, 18156, 3621 };
	/* Checked by hand in the data files: offset, type, lexicographer file,
	 * first word (data.adj's "(p)" marker dropped). */
	static const struct {
		uint32_t off;
		char pos;
		int label;
		const char *lemma;
	} hand[] = {
		{ 2084071, 'n', 5, "dog" },           /* noun.animal */
		{ 1904948, 'v', 38, "walk" },         /* verb.motion */
		{ 1960929, 'v', 38, "swim" },         /* verb.motion */
		{ 1740, 'n', 3, "entity" },           /* noun.Tops */
		{ 1740, 'r', 2, "a_cappella" },       /* adv.all, same offset as entity */
		{ 2599940, 'a', 1, "academic" },      /* adj.pert */
		{ 3147282, 'a', 44, "avenged" },      /* adj.ppl */
		{ 24619, 's', 0, "used_to" },         /* adj.all, "used_to(p)" */
	};
	char *d = real_dir();
	struct wn_data w;
	struct node_row *r;
	struct npy lab;
	size_t n, found = 0;
	uint32_t count[4] = { 0 };
	uint64_t per_class[45] = { 0 };
	json_t *j, *cls;
	const int64_t *y;

	wn_load(WORDNET_DIR, &w);
	r = read_nodes(d, &n);
	cr_assert_eq(n, NNODES);
	npy_load(d, "labels.npy", "<i8", n, 0, &lab);
	y = lab.data;
	for (size_t i = 0; i < n; i++) {
		char *line = synset_line(&w, r[i].file, r[i].offset), *save = NULL, *t;
		unsigned lexnum;

		if (i)
			cr_assert(r[i].file > r[i - 1].file ||
				  (r[i].file == r[i - 1].file && r[i].offset > r[i - 1].offset),
				  "node %zu out of file order", i);
		count[r[i].file]++;
		strtok_r(line, " ", &save);
		t = strtok_r(NULL, " ", &save);
		lexnum = (unsigned)atoi(t);
		cr_assert_lt(lexnum, 45);
		cr_assert_eq(y[i], (int64_t)lexnum, "node %zu (%08u %c): label %lld, data file %u", i,
			     r[i].offset, r[i].pos, (long long)y[i], lexnum);
		cr_assert_str_eq(r[i].lexname, lex[lexnum], "node %zu", i);
		per_class[lexnum]++;
		t = strtok_r(NULL, " ", &save);
		cr_assert_eq(t[0], r[i].pos, "node %zu: type %s, nodes.tsv %c", i, t, r[i].pos);
		strtok_r(NULL, " ", &save);
		t = strtok_r(NULL, " ", &save);
		{
			size_t ll = strlen(r[i].lemma);

			cr_assert(!strncmp(t, r[i].lemma, ll) &&
				  (!t[ll] || (r[i].file == 2 && (!strcmp(t + ll, "(a)") ||
								 !strcmp(t + ll, "(p)") ||
								 !strcmp(t + ll, "(ip)")))),
				  "node %zu: first word %s, nodes.tsv %s", i, t, r[i].lemma);
		}
		free(line);
	}
	for (int f = 0; f < 4; f++)
		cr_assert_eq(count[f], per_file[f], "%s: %u synsets, want %u", data_files[f],
			     count[f], per_file[f]);
	/* every synset line of the files is a node */
	for (int f = 0; f < 4; f++) {
		uint32_t lines = 0;

		for (const char *p = w.buf[f]; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
			lines += isdigit((unsigned char)*p) != 0;
		cr_assert_eq(lines, per_file[f], "%s: %u synset lines", data_files[f], lines);
	}
	for (size_t k = 0; k < RDPS_ARRAY_SIZE(hand); k++)
		for (size_t i = 0; i < n; i++)
			if (r[i].offset == hand[k].off && r[i].pos == hand[k].pos) {
				cr_assert_eq(y[i], hand[k].label, "%08u %c: label %lld, want %d",
					     hand[k].off, hand[k].pos, (long long)y[i], hand[k].label);
				cr_assert_str_eq(r[i].lemma, hand[k].lemma);
				found++;
			}
	cr_assert_eq(found, RDPS_ARRAY_SIZE(hand));

	j = read_json(d);
	cr_assert_eq(jint(j, "num_nodes"), NNODES);
	cr_assert_eq(jint(j, "num_classes"), 45);
	cr_assert_eq(jint(j, "feat_dim"), 128);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "source"),
							   "wordnet_version")), "3.0");
	cls = json_object_get(j, "classes");
	cr_assert_eq(json_array_size(cls), 45);
	for (size_t l = 0; l < 45; l++) {
		json_t *c = json_array_get(cls, l);

		cr_assert_str_eq(json_string_value(json_object_get(c, "name")), lex[l]);
		cr_assert_eq((uint64_t)jint(c, "nodes"), per_class[l], "class %s", lex[l]);
		cr_assert_gt(per_class[l], 0, "class %s is empty", lex[l]);
		cr_assert_eq(jint(c, "train") + jint(c, "val") + jint(c, "test"), jint(c, "nodes"));
	}
	json_decref(j);
	free(lab.file);
	free(r);
	wn_free(&w);
	free(d);
}

/* Edges: exactly the pointers of the data files between two different
 * synsets, each (src, dst, type) once, endpoints and types in range; the
 * type table; dog's hypernym and part meronym, swim's two lexical "+"
 * pointers to one synset giving one edge, unicycle's pointer to itself
 * giving none; graph.json's counts. */
Test(wordnet_nodes, edges_are_the_pointers)
{
	static const struct {
		const char *sym, *name;
	} named[] = {
		{ "@", "hypernym" }, { "~", "hyponym" }, { "!", "antonym" },
		{ "+", "derivationally_related_form" }, { "%p", "part_meronym" },
		{ "#m", "member_holonym" }, { "&", "similar_to" }, { "\\", "pertainym" },
		{ "*", "entailment" }, { ";c", "domain_topic" },
	};
	char *d = real_dir(), sym[32][4], name[32][40];
	struct wn_data w;
	struct node_row *r;
	struct npy ea, ta;
	struct key *keys;
	struct edge *want = NULL, *got;
	size_t n, nwant = 0, cap = 0, raw = 0, selfl = 0, dups;
	const int64_t *ev, *tv;
	int ntype = read_etypes(d, sym, name);
	uint64_t per_type[32] = { 0 };
	json_t *j, *et;

	cr_assert_eq(ntype, 26);
	for (size_t k = 0; k < RDPS_ARRAY_SIZE(named); k++) {
		int t;

		for (t = 0; t < ntype && strcmp(sym[t], named[k].sym); t++)
			;
		cr_assert_lt(t, ntype, "no edge type for '%s'", named[k].sym);
		cr_assert_str_eq(name[t], named[k].name);
	}
	for (int a = 0; a < ntype; a++)
		for (int b = a + 1; b < ntype; b++)
			cr_assert_str_neq(sym[a], sym[b]);

	wn_load(WORDNET_DIR, &w);
	r = read_nodes(d, &n);
	keys = malloc(n * sizeof(*keys));
	for (size_t i = 0; i < n; i++)
		keys[i] = (struct key){ (uint64_t)r[i].file << 32 | r[i].offset, (uint32_t)i };
	qsort(keys, n, sizeof(*keys), cmp_key);
	for (size_t i = 0; i < n; i++) {
		char *line = synset_line(&w, r[i].file, r[i].offset), *save = NULL;
		unsigned long nw, np;

		*strchr(line, '|') = '\0';
		strtok_r(line, " ", &save);
		strtok_r(NULL, " ", &save);
		strtok_r(NULL, " ", &save);
		nw = strtoul(strtok_r(NULL, " ", &save), NULL, 16);
		for (unsigned long k = 0; k < 2 * nw; k++)
			strtok_r(NULL, " ", &save);
		np = strtoul(strtok_r(NULL, " ", &save), NULL, 10);
		for (unsigned long k = 0; k < np; k++) {
			char *s = strtok_r(NULL, " ", &save), *off = strtok_r(NULL, " ", &save);
			char *pos = strtok_r(NULL, " ", &save);
			struct key q = { (uint64_t)file_of(pos[0]) << 32 | strtoul(off, NULL, 10), 0 };
			struct key *hit = bsearch(&q, keys, n, sizeof(*keys), cmp_key);
			int t;

			strtok_r(NULL, " ", &save);
			raw++;
			for (t = 0; t < ntype && strcmp(sym[t], s); t++)
				;
			cr_assert_lt(t, ntype, "pointer symbol '%s' has no edge type", s);
			cr_assert(hit, "%08u %c: pointer to %s %s: no node", r[i].offset, r[i].pos,
				  off, pos);
			if (hit->id == i) {
				selfl++;
				continue;
			}
			if (nwant == cap) {
				cap = cap ? 2 * cap : 1 << 16;
				want = realloc(want, cap * sizeof(*want));
			}
			want[nwant++] = (struct edge){ (int64_t)i, hit->id, t };
		}
		free(line);
	}
	qsort(want, nwant, sizeof(*want), cmp_edge);
	dups = nwant;
	{
		size_t u = 0;

		for (size_t i = 0; i < nwant; i++)
			if (!u || cmp_edge(&want[i], &want[u - 1]))
				want[u++] = want[i];
		nwant = u;
	}
	dups -= nwant;
	cr_assert_eq(raw, 377592, "WordNet 3.0 has 377,592 pointers, read %zu", raw);

	npy_load(d, "edges.npy", "<i8", UINT64_MAX, 2, &ea);
	npy_load(d, "etypes.npy", "<i8", ea.rows, 0, &ta);
	ev = ea.data;
	tv = ta.data;
	got = malloc(ea.rows * sizeof(*got));
	for (uint64_t i = 0; i < ea.rows; i++) {
		cr_assert(ev[2 * i] >= 0 && ev[2 * i] < (int64_t)n && ev[2 * i + 1] >= 0 &&
			  ev[2 * i + 1] < (int64_t)n, "edge %llu: %lld -> %lld out of range",
			  (unsigned long long)i, (long long)ev[2 * i], (long long)ev[2 * i + 1]);
		cr_assert(tv[i] >= 0 && tv[i] < ntype, "edge %llu: type %lld",
			  (unsigned long long)i, (long long)tv[i]);
		cr_assert_neq(ev[2 * i], ev[2 * i + 1], "edge %llu is a self-loop",
			      (unsigned long long)i);
		got[i] = (struct edge){ ev[2 * i], ev[2 * i + 1], tv[i] };
		per_type[tv[i]]++;
	}
	qsort(got, ea.rows, sizeof(*got), cmp_edge);
	for (uint64_t i = 1; i < ea.rows; i++)
		cr_assert(cmp_edge(&got[i - 1], &got[i]), "duplicate edge %lld -> %lld type %lld",
			  (long long)got[i].src, (long long)got[i].dst, (long long)got[i].type);
	cr_assert_eq(ea.rows, nwant, "%llu edges, the data files give %zu",
		     (unsigned long long)ea.rows, nwant);
	for (size_t i = 0; i < nwant; i++)
		cr_assert(!cmp_edge(&got[i], &want[i]),
			  "edge %zu: %lld -> %lld type %lld, the data files give %lld -> %lld type %lld",
			  i, (long long)got[i].src, (long long)got[i].dst, (long long)got[i].type,
			  (long long)want[i].src, (long long)want[i].dst, (long long)want[i].type);

	/* by hand: dog (02084071 n) -@-> canine (02083346 n), -%p-> flag
	 * (02158846 n); swim (01960929 v) has "+ 00442115 n 0102" and "+ 00442115
	 * n 0101": one edge; unicycle (04509417 n) "+ 04509417 n 0101": none */
	{
		struct key q;
		uint32_t dog, canine, flag, swim, swimming, unicycle;
		int hyper = -1, part = -1, deriv = -1, m = 0;

#define ID(var, f, off) q.k = (uint64_t)(f) << 32 | (off); \
	var = ((struct key *)bsearch(&q, keys, n, sizeof(*keys), cmp_key))->id
		ID(dog, 0, 2084071);
		ID(canine, 0, 2083346);
		ID(flag, 0, 2158846);
		ID(swim, 1, 1960929);
		ID(swimming, 0, 442115);
		ID(unicycle, 0, 4509417);
#undef ID
		for (int t = 0; t < ntype; t++) {
			hyper = strcmp(sym[t], "@") ? hyper : t;
			part = strcmp(sym[t], "%p") ? part : t;
			deriv = strcmp(sym[t], "+") ? deriv : t;
		}
		for (uint64_t i = 0; i < ea.rows; i++) {
			m += got[i].src == dog && got[i].dst == canine && got[i].type == hyper;
			m += got[i].src == dog && got[i].dst == flag && got[i].type == part;
			m += (got[i].src == swim && got[i].dst == swimming && got[i].type == deriv) * 10;
			cr_assert(got[i].src != unicycle || got[i].dst != unicycle);
		}
		cr_assert_eq(m, 12, "dog's hypernym, dog's part and swim's one derivation edge: %d", m);
	}

	j = read_json(d);
	cr_assert_eq(jint(j, "num_edges"), (long long)nwant);
	cr_assert_eq(jint(j, "num_etypes"), 26);
	cr_assert_eq(jint(j, "source.pointers_read"), (long long)raw);
	cr_assert_eq(jint(j, "edges.self_loops_dropped"), (long long)selfl);
	cr_assert_eq(jint(j, "edges.duplicates_dropped"), (long long)dups);
	et = json_object_get(j, "edge_types");
	cr_assert_eq(json_array_size(et), 26);
	for (int t = 0; t < ntype; t++) {
		json_t *o = json_array_get(et, (size_t)t);

		cr_assert_str_eq(json_string_value(json_object_get(o, "symbol")), sym[t]);
		cr_assert_str_eq(json_string_value(json_object_get(o, "name")), name[t]);
		cr_assert_eq((uint64_t)jint(o, "edges"), per_type[t], "type %s", sym[t]);
		cr_assert_gt(per_type[t], 0, "no edge of type %s", sym[t]);
	}
	json_decref(j);
	free(got);
	free(want);
	free(keys);
	free(ea.file);
	free(ta.file);
	free(r);
	wn_free(&w);
	free(d);
}

/* Features: every row is the recipe computed here from the synset's gloss
 * in its data file; dog's row also from its gloss typed out by hand. */
Test(wordnet_nodes, features_follow_the_recipe)
{
	static const char dog_gloss[] =
		"a member of the genus Canis (probably descended from the common wolf) that "
		"has been domesticated by man since prehistoric times; occurs in many breeds; "
		"\"the dog barked all night\"";
	char *d = real_dir();
	struct wn_data w;
	struct node_row *r;
	struct npy fa;
	float row[128];
	const float *x;
	size_t n;
	int seen_dog = 0;

	wn_load(WORDNET_DIR, &w);
	r = read_nodes(d, &n);
	npy_load(d, "features.npy", "<f4", n, 128, &fa);
	x = fa.data;
	for (size_t i = 0; i < n; i++) {
		char *line = synset_line(&w, r[i].file, r[i].offset), *g = gloss_of(line);
		double ss = 0;

		recipe(g, 128, row);
		for (int k = 0; k < 128; k++) {
			cr_assert(fabsf(x[i * 128 + k] - row[k]) <= 1e-6f,
				  "node %zu (%08u %c) feature %d: %g, recipe %g (gloss \"%s\")", i,
				  r[i].offset, r[i].pos, k, x[i * 128 + k], row[k], g);
			ss += (double)x[i * 128 + k] * x[i * 128 + k];
		}
		cr_assert(fabs(ss - 1) < 1e-5, "node %zu: |x|^2 = %g", i, ss);
		if (r[i].offset == 2084071 && r[i].pos == 'n') {
			recipe(dog_gloss, 128, row);
			cr_assert_eq(memcmp(row, &x[i * 128], sizeof(row)), 0,
				     "dog's features differ from its gloss typed by hand");
			seen_dog = 1;
		}
		free(g);
		free(line);
	}
	cr_assert(seen_dog);
	free(fa.file);
	free(r);
	wn_free(&w);
	free(d);
}

/* The split: each node in exactly one mask, floor(0.8 N) train, floor(0.1
 * N) val, the rest test, as graph.json says; every class in train. */
Test(wordnet_nodes, split_80_10_10)
{
	char *d = real_dir();
	struct npy m[3], lab;
	const uint8_t *mk[3];
	uint64_t cnt[3] = { 0 }, train_class[45] = { 0 };
	const int64_t *y;
	json_t *j;

	npy_load(d, "train_mask.npy", "|u1", NNODES, 0, &m[0]);
	npy_load(d, "val_mask.npy", "|u1", NNODES, 0, &m[1]);
	npy_load(d, "test_mask.npy", "|u1", NNODES, 0, &m[2]);
	npy_load(d, "labels.npy", "<i8", NNODES, 0, &lab);
	y = lab.data;
	for (int s = 0; s < 3; s++)
		mk[s] = m[s].data;
	for (size_t i = 0; i < NNODES; i++) {
		int in = 0;

		for (int s = 0; s < 3; s++) {
			cr_assert(mk[s][i] <= 1, "mask %d node %zu: %u", s, i, mk[s][i]);
			in += mk[s][i];
			cnt[s] += mk[s][i];
		}
		cr_assert_eq(in, 1, "node %zu is in %d splits", i, in);
		if (mk[0][i])
			train_class[y[i]]++;
	}
	cr_assert_eq(cnt[0], NNODES * 8 / 10);
	cr_assert_eq(cnt[1], NNODES / 10);
	cr_assert_eq(cnt[2], NNODES - NNODES * 8 / 10 - NNODES / 10);
	for (int l = 0; l < 45; l++)
		cr_assert_gt(train_class[l], 0, "class %d has no train node", l);
	/* a shuffle, not blocks: the first and last tenth of the ids are ~80% train */
	for (int part = 0; part < 10; part++) {
		uint64_t t = 0, lo = (uint64_t)NNODES * part / 10, hi = (uint64_t)NNODES * (part + 1) / 10;

		for (uint64_t i = lo; i < hi; i++)
			t += mk[0][i];
		cr_assert(fabs((double)t / (double)(hi - lo) - 0.8) < 0.02,
			  "ids %llu..%llu: %.3f train", (unsigned long long)lo,
			  (unsigned long long)hi, (double)t / (double)(hi - lo));
	}
	j = read_json(d);
	cr_assert_eq(jint(j, "splits.train"), (long long)cnt[0]);
	cr_assert_eq(jint(j, "splits.val"), (long long)cnt[1]);
	cr_assert_eq(jint(j, "splits.test"), (long long)cnt[2]);
	cr_assert_eq(jint(j, "seed"), 0);
	json_decref(j);
	for (int s = 0; s < 3; s++)
		free(m[s].file);
	free(lab.file);
	free(d);
}

/* Learnable: a nearest-centroid classifier (cosine, centroids of the train
 * features) beats the majority class on test by a clear margin (measured:
 * 21.2% against 12.1%), and so does the vote of a test node's train
 * neighbours' labels (69.4%): the graph carries the label too. */
Test(wordnet_nodes, learnable)
{
	char *d = real_dir();
	struct npy fa, lab, tr, te, ea;
	const float *x;
	const int64_t *y, *ev;
	const uint8_t *trm, *tem;
	double (*cen)[128] = calloc(45, sizeof(*cen));
	uint64_t ntrain[45] = { 0 }, ntest = 0, right = 0, vote_right = 0, maj_n = 0;
	uint64_t *deg, *adj, *pos;
	int maj = 0;

	npy_load(d, "features.npy", "<f4", NNODES, 128, &fa);
	npy_load(d, "labels.npy", "<i8", NNODES, 0, &lab);
	npy_load(d, "train_mask.npy", "|u1", NNODES, 0, &tr);
	npy_load(d, "test_mask.npy", "|u1", NNODES, 0, &te);
	npy_load(d, "edges.npy", "<i8", UINT64_MAX, 2, &ea);
	x = fa.data;
	y = lab.data;
	trm = tr.data;
	tem = te.data;
	ev = ea.data;
	for (size_t i = 0; i < NNODES; i++) {
		if (!trm[i])
			continue;
		ntrain[y[i]]++;
		for (int k = 0; k < 128; k++)
			cen[y[i]][k] += x[i * 128 + k];
	}
	for (int l = 0; l < 45; l++) {
		double nn = 0;

		for (int k = 0; k < 128; k++)
			nn += cen[l][k] * cen[l][k];
		nn = sqrt(nn);
		for (int k = 0; k < 128; k++)
			cen[l][k] /= nn > 0 ? nn : 1;
		if (ntrain[l] > ntrain[maj])
			maj = l;
	}
	/* out-neighbours, CSR */
	deg = calloc(NNODES + 1, sizeof(*deg));
	pos = calloc(NNODES + 1, sizeof(*pos));
	adj = malloc(ea.rows * sizeof(*adj));
	for (uint64_t e = 0; e < ea.rows; e++)
		deg[ev[2 * e] + 1]++;
	for (size_t i = 0; i < NNODES; i++)
		deg[i + 1] += deg[i];
	memcpy(pos, deg, (NNODES + 1) * sizeof(*pos));
	for (uint64_t e = 0; e < ea.rows; e++)
		adj[pos[ev[2 * e]]++] = (uint64_t)ev[2 * e + 1];
	for (size_t i = 0; i < NNODES; i++) {
		double best = -2;
		int arg = 0;
		uint32_t votes[45] = { 0 }, bv = 0;
		int va = -1;

		if (!tem[i])
			continue;
		ntest++;
		maj_n += y[i] == maj;
		for (int l = 0; l < 45; l++) {
			double s = 0;

			for (int k = 0; k < 128; k++)
				s += cen[l][k] * x[i * 128 + k];
			if (s > best) {
				best = s;
				arg = l;
			}
		}
		right += arg == y[i];
		for (uint64_t a = deg[i]; a < deg[i + 1]; a++)
			if (trm[adj[a]] && ++votes[y[adj[a]]] > bv) {
				bv = votes[y[adj[a]]];
				va = (int)y[adj[a]];
			}
		vote_right += va == y[i];
	}
	{
		double acc = (double)right / (double)ntest, base = (double)maj_n / (double)ntest;
		double vote = (double)vote_right / (double)ntest;

		cr_log_info("nearest centroid %.3f, neighbour vote %.3f, majority (%d) %.3f", acc,
			    vote, maj, base);
		cr_assert(acc > base + 0.05 && acc > 1.5 * base,
			  "nearest centroid %.3f against the majority class's %.3f", acc, base);
		cr_assert(vote > 0.5, "neighbour vote %.3f", vote);
	}
	free(adj);
	free(pos);
	free(deg);
	free(cen);
	free(fa.file);
	free(lab.file);
	free(tr.file);
	free(te.file);
	free(ea.file);
	free(d);
}

/* Same seed: byte-identical files; another seed: other masks, the rest but
 * graph.json (which records the seed and the split counts per class) the same. */
Test(wordnet_nodes, deterministic_for_a_seed)
{
	struct rdps_wordnet_nodes_opts o;
	struct rdps_graph_stats st;
	char *out[3];
	uint64_t seeds[3] = { 7, 7, 8 };

	if (access(WORDNET_DIR "/data.noun", R_OK))
		cr_skip_test("wordnet-base is not installed");
	for (int k = 0; k < 3; k++) {
		char name[8];

		snprintf(name, sizeof(name), "s%d", k);
		out[k] = th_path(dir, name);
		rdps_dataset_wordnet_nodes_defaults(&o);
		o.feat_dim = 16;
		o.seed = seeds[k];
		cr_assert_eq(rdps_dataset_wordnet_nodes(out[k], &o, &st, err, sizeof(err)), 0, "%s",
			     err);
	}
	for (size_t f = 0; f < RDPS_ARRAY_SIZE(all_files); f++) {
		char *p[3];
		size_t len[3];
		int split = strstr(all_files[f], "_mask") || !strcmp(all_files[f], "graph.json");

		for (int k = 0; k < 3; k++) {
			char *path = th_path(out[k], all_files[f]);

			p[k] = slurp(path, &len[k]);
			free(path);
		}
		cr_assert(len[0] == len[1] && !memcmp(p[0], p[1], len[0]),
			  "%s differs between two builds of seed 7", all_files[f]);
		if (split)
			cr_assert(len[0] != len[2] || memcmp(p[0], p[2], len[0]),
				  "%s is the same for seeds 7 and 8", all_files[f]);
		else
			cr_assert(len[0] == len[2] && !memcmp(p[0], p[2], len[0]),
				  "%s depends on the seed", all_files[f]);
		for (int k = 0; k < 3; k++)
			free(p[k]);
	}
	for (int k = 0; k < 3; k++)
		free(out[k]);
}

/* ---- a WordNet of five synsets ---- */

/* Noun 100 "thing" (two words) points to 200 (~), to verb 300 twice (+,
 * from word 1 and word 2: one edge) and to itself (dropped); 200 -@-> 100;
 * verb 300 (with a frame list after its pointers) -+-> noun 100 and -^->
 * the satellite 400; satellite 400 "round(a)" -&-> adverb 100, whose offset
 * is also the noun's. */
static char *mini_wordnet(const char *bad_noun_line)
{
	static const char *text[4] = {
		"  1 This is a license header.  \n"
		"  2 WordNet 3.0 Copyright 2006 by Princeton University.  \n"
		"00000100 03 n 02 thing 0 object 0 004 ~ 00000200 n 0000 + 00000300 v 0101 "
		"+ 00000300 v 0201 + 00000100 n 0102 | a Thing, a THING; 2 things  \n"
		"00000200 05 n 01 stone 0 001 @ 00000100 n 0000 | a stone  \n",
		"00000300 38 v 01 roll 0 002 + 00000100 n 0101 ^ 00000400 s 0000 01 + 02 00 "
		"| move by turning over  \n",
		"00000400 00 s 01 round(a) 0 001 & 00000100 r 0000 | shaped like a circle  \n",
		"00000100 02 r 01 roundly 0 000 | in a round way  \n",
	};
	char *w = th_path(dir, "wordnet");

	cr_assert_eq(mkdir(w, 0755), 0);
	for (int i = 0; i < 4; i++) {
		char *p = th_path(w, data_files[i]);
		FILE *f = fopen(p, "w");

		cr_assert(f);
		fputs(text[i], f);
		if (i == 0 && bad_noun_line)
			fputs(bad_noun_line, f);
		fclose(f);
		free(p);
	}
	return w;
}

Test(wordnet_nodes, mini_wordnet_exact)
{
	static const int64_t want_edges[][3] = {
		{ 0, 1, 1 },   /* thing ~ stone: hyponym */
		{ 0, 2, 11 },  /* thing + roll (twice in the file) */
		{ 1, 0, 0 },   /* stone @ thing: hypernym */
		{ 2, 0, 11 },  /* roll + thing */
		{ 2, 3, 17 },  /* roll ^ round: also_see */
		{ 3, 4, 16 },  /* round & roundly: similar_to */
	};
	static const int64_t want_labels[5] = { 3, 5, 38, 0, 2 };
	static const char *lemmas[5] = { "thing", "stone", "roll", "round", "roundly" };
	struct rdps_wordnet_nodes_opts o;
	struct rdps_graph_stats st;
	char *w = mini_wordnet(NULL), *out = th_path(dir, "mini");
	struct node_row *r;
	struct npy ea, ta, lab, fa;
	float row[4096], mx = 0;
	size_t n;
	json_t *j;

	rdps_dataset_wordnet_nodes_defaults(&o);
	o.wordnet_dir = w;
	o.feat_dim = 4096;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.num_nodes, 5);
	cr_assert_eq(st.num_edges, 6);
	cr_assert_eq(st.num_split[0] + st.num_split[1] + st.num_split[2], 5);
	r = read_nodes(out, &n);
	cr_assert_eq(n, 5);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(r[i].lemma, lemmas[i]);
	cr_assert_eq(r[3].pos, 's');
	cr_assert_eq(r[4].pos, 'r');
	cr_assert_eq(r[4].offset, 100);
	npy_load(out, "edges.npy", "<i8", 6, 2, &ea);
	npy_load(out, "etypes.npy", "<i8", 6, 0, &ta);
	npy_load(out, "labels.npy", "<i8", 5, 0, &lab);
	npy_load(out, "features.npy", "<f4", 5, 4096, &fa);
	for (int e = 0; e < 6; e++) {
		const int64_t *ev = ea.data, *tv = ta.data;

		cr_assert(ev[2 * e] == want_edges[e][0] && ev[2 * e + 1] == want_edges[e][1] &&
			  tv[e] == want_edges[e][2], "edge %d: %lld -> %lld type %lld", e,
			  (long long)ev[2 * e], (long long)ev[2 * e + 1], (long long)tv[e]);
	}
	cr_assert_eq(memcmp(lab.data, want_labels, sizeof(want_labels)), 0);
	/* "a Thing, a THING; 2 things": a 2, thing 2, 2 1, things 1 */
	recipe("a Thing, a THING; 2 things", 4096, row);
	cr_assert_eq(memcmp(row, fa.data, sizeof(row)), 0);
	for (int k = 0; k < 4096; k++)
		mx = ((float *)fa.data)[k] > mx ? ((float *)fa.data)[k] : mx;
	cr_assert(fabsf(mx - 2 / sqrtf(10)) < 1e-6f, "largest feature %g, want 2/sqrt(10)", mx);
	j = read_json(out);
	cr_assert_eq(jint(j, "edges.self_loops_dropped"), 1);
	cr_assert_eq(jint(j, "edges.duplicates_dropped"), 1);
	cr_assert_eq(jint(j, "source.pointers_read"), 8);
	cr_assert_eq(jint(j, "source.lexical_pointers"), 4);
	cr_assert_eq(jint(j, "num_classes"), 39);
	json_decref(j);
	free(ea.file);
	free(ta.file);
	free(lab.file);
	free(fa.file);
	free(r);
	free(out);
	free(w);
}

/* Errors come before any work and leave nothing behind: a bad feat_dim, a
 * missing data file (naming wordnet-base), an existing OUT without force;
 * damaged data (an unknown pointer symbol, a pointer to no synset) names
 * the file and line or synset and leaves no OUT or temporary directory. */
Test(wordnet_nodes, errors)
{
	struct rdps_wordnet_nodes_opts o;
	struct rdps_graph_stats st;
	char *w = mini_wordnet(NULL), *out = th_path(dir, "out"), *none = th_path(dir, "none");
	int entries = th_count_entries(dir);

	rdps_dataset_wordnet_nodes_defaults(&o);
	o.wordnet_dir = w;
	o.feat_dim = 0;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "feat-dim"), "%s", err);
	o.feat_dim = RDPS_WORDNET_NODES_MAX_FEAT_DIM + 1;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -EINVAL);
	o.feat_dim = 8;
	o.wordnet_dir = none;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "wordnet-base") && strstr(err, "data.noun"), "%s", err);
	cr_assert_eq(th_count_entries(dir), entries, "something was written");

	o.wordnet_dir = w;
	cr_assert_eq(mkdir(out, 0755), 0);
	th_write(out, "keep", "x");
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -EEXIST);
	cr_assert(strstr(err, "--force"), "%s", err);
	cr_assert(th_exists(out, "keep"));
	o.force = 1;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), 0, "%s", err);
	cr_assert(!th_exists(out, "keep") && th_exists(out, "graph.json"));
	o.force = 0;
	free(out);

	th_rmtree(w);
	w = mini_wordnet("00000300 03 n 01 odd 0 001 ?x 00000100 n 0000 | odd  \n");
	o.wordnet_dir = w;
	out = th_path(dir, "bad");
	entries = th_count_entries(dir);
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "data.noun:5") && strstr(err, "'?x'"), "%s", err);
	cr_assert_eq(th_count_entries(dir), entries, "OUT or a temporary directory left");

	th_rmtree(w);
	w = mini_wordnet("00000300 03 n 01 odd 0 001 @ 00000999 n 0000 | odd  \n");
	o.wordnet_dir = w;
	cr_assert_eq(rdps_dataset_wordnet_nodes(out, &o, &st, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "00000999") && strstr(err, "no such synset"), "%s", err);
	cr_assert_eq(th_count_entries(dir), entries, "OUT or a temporary directory left");
	free(out);
	free(none);
	th_rmtree(w);
}

/* Runs cmd through sh; returns its exit status, its output in out. */
static int run(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int status;

	cr_assert(p, "popen %s", cmd);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The command: --help; bad options exit 2 before anything; a missing
 * WordNet or an existing OUT exit 1 with the reason; a run prints progress
 * lines and a summary. */
Test(wordnet_nodes, cli)
{
	char *w = mini_wordnet(NULL), cmd[1024], out[8192];

	cr_assert_eq(run(RDPS_BIN " dataset --help 2>&1", out, sizeof(out)), 0);
	cr_assert(strstr(out, "wordnet-nodes") && strstr(out, "--feat-dim"), "%s", out);
	for (const char *bad = "--feat-dim 0\0--feat-dim x\0--feat-dim 65537\0--cut core\0"
			       "--valid 5\0--entities 3\0";
	     *bad; bad += strlen(bad) + 1) {
		snprintf(cmd, sizeof(cmd), RDPS_BIN " dataset wordnet-nodes %s/o --wordnet-dir %s %s 2>&1",
			 dir, w, bad);
		cr_assert_eq(run(cmd, out, sizeof(out)), 2, "%s: %s", bad, out);
	}
	snprintf(cmd, sizeof(cmd), RDPS_BIN " dataset wordnet %s/o --feat-dim 8 2>&1", dir);
	cr_assert_eq(run(cmd, out, sizeof(out)), 2, "%s", out);
	cr_assert(!th_exists(dir, "o"));
	snprintf(cmd, sizeof(cmd), RDPS_BIN " dataset wordnet-nodes %s/o --wordnet-dir %s/none 2>&1",
		 dir, dir);
	cr_assert_eq(run(cmd, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "wordnet-base"), "%s", out);
	snprintf(cmd, sizeof(cmd),
		 RDPS_BIN " dataset wordnet-nodes %s/o --wordnet-dir %s --feat-dim 8 --seed 3 2>&1",
		 dir, w);
	cr_assert_eq(run(cmd, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "wordnet-nodes: data.noun: 2 synsets"), "no progress line: %s", out);
	cr_assert(strstr(out, "5 nodes, 6 edges of 5 types, 39 classes, 8 features, train 4, val 0, test 1"),
		  "%s", out);
	cr_assert_eq(run(cmd, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "already exists"), "%s", out);
	free(w);
}
