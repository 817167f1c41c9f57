// SPDX-License-Identifier: MIT
// ctest-timeout: 300
/*
 * rdps_dataset_wordnet_hetero (rdps dataset wordnet-hetero): the real
 * WordNet 3.0 (Debian's wordnet-base), built once for the suite, against
 * the data files read here on their own:
 *
 * - lemmas: exactly the distinct words of the synsets' lines (lower-cased,
 *   adjective markers cut), 147,306; lemma_of exactly the (word, synset)
 *   senses, 206,941, and has_lemma their reverses;
 * - relations: every pointer between two synsets is an edge of its group
 *   and its reverse an edge of the reverse group, and every edge of a group
 *   is such a pointer or such a reverse (nothing else, nothing missing);
 * - synsets: labels the lexicographer file of each line; features, labels
 *   and masks byte for byte those of rdps dataset wordnet-nodes (same seed
 *   and feat_dim);
 * - it partitions (rdps partition's typed layout), every type and data in.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/npy.h"
#include "helpers.h"
#include "rdps_test.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"

#define WORDNET_DIR "/usr/share/wordnet"

static const char *const data_files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };
static char err[512];

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	struct rdps_wordnet_hetero_opts o;
	struct rdps_wordnet_hetero_stats st;
	struct rdps_wordnet_nodes_opts wo;
	struct rdps_graph_stats gs;
	char e[512] = "", *d, *out;
	int ret;

	(void)set;
	th_quiet();
	if (access(WORDNET_DIR "/data.noun", R_OK))
		return;
	d = strdup("/tmp/rdps-wnh-test-XXXXXX");
	if (!d || !mkdtemp(d))
		return;
	setenv("RDPS_WNH_TEST_DIR", d, 1);
	if (asprintf(&out, "%s/wnh", d) < 0)
		return;
	rdps_dataset_wordnet_hetero_defaults(&o);
	ret = rdps_dataset_wordnet_hetero(out, &o, &st, e, sizeof(e));
	free(out);
	if (!ret) {
		if (asprintf(&out, "%s/wnn", d) < 0)
			return;
		rdps_dataset_wordnet_nodes_defaults(&wo);
		ret = rdps_dataset_wordnet_nodes(out, &wo, &gs, e, sizeof(e));
		free(out);
	}
	if (ret)
		setenv("RDPS_WNH_TEST_ERR", e[0] ? e : "failed", 1);
	free(d);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	const char *d = getenv("RDPS_WNH_TEST_DIR");

	(void)stats;
	if (d)
		th_rmtree(strdup(d));
}

static char *real(const char *sub)
{
	const char *d = getenv("RDPS_WNH_TEST_DIR"), *e = getenv("RDPS_WNH_TEST_ERR");

	if (!d)
		cr_skip_test("wordnet-base is not installed (" WORDNET_DIR "/data.noun)");
	cr_assert_null(e, "building the datasets failed: %s", e);
	return th_path(d, sub);
}

TestSuite(wordnet_hetero, .init = th_quiet, .timeout = 300);

/* ---- the data files, read here on their own ---- */

struct syn {
	uint32_t off;
	int file, lex;
};

struct wn {
	struct syn *s;
	size_t n, cap;
	uint32_t first[5];
	char **words;           /* per sense: the word */
	uint32_t *word_syn;
	size_t nw, wcap;
	/* pointers: src node, symbol, target (file, offset) */
	uint32_t *p_src, *p_off;
	int *p_file;
	char (*p_sym)[3];
	size_t np, pcap;
};

static int file_of(char c)
{
	return c == 'n' ? 0 : c == 'v' ? 1 : c == 'a' || c == 's' ? 2 : c == 'r' ? 3 : -1;
}

static void read_wordnet(struct wn *w)
{
	char line[1 << 16];

	memset(w, 0, sizeof(*w));
	for (int f = 0; f < 4; f++) {
		char path[256];
		FILE *fp;

		snprintf(path, sizeof(path), WORDNET_DIR "/%s", data_files[f]);
		fp = fopen(path, "r");
		cr_assert(fp);
		w->first[f] = (uint32_t)w->n;
		while (fgets(line, sizeof(line), fp)) {
			char *save = NULL, *t, *bar = strchr(line, '|');
			unsigned long nw, np;
			uint32_t node = (uint32_t)w->n;

			if (line[0] == ' ')
				continue;
			if (bar)
				*bar = '\0';
			if (w->n == w->cap) {
				w->cap = w->cap ? 2 * w->cap : 1 << 17;
				w->s = realloc(w->s, w->cap * sizeof(*w->s));
			}
			t = strtok_r(line, " ", &save);
			w->s[w->n].off = (uint32_t)strtoul(t, NULL, 10);
			w->s[w->n].lex = atoi(strtok_r(NULL, " ", &save));
			w->s[w->n].file = f;
			strtok_r(NULL, " ", &save);
			nw = strtoul(strtok_r(NULL, " ", &save), NULL, 16);
			for (unsigned long i = 0; i < nw; i++) {
				char *word = strtok_r(NULL, " ", &save);
				size_t len = strlen(word);

				strtok_r(NULL, " ", &save);
				if (f == 2 && len > 3 && word[len - 1] == ')')
					word[strrchr(word, '(') - word] = '\0';
				for (char *c = word; *c; c++)
					if (*c >= 'A' && *c <= 'Z')
						*c = (char)(*c - 'A' + 'a');
				if (w->nw == w->wcap) {
					w->wcap = w->wcap ? 2 * w->wcap : 1 << 18;
					w->words = realloc(w->words, w->wcap * sizeof(char *));
					w->word_syn = realloc(w->word_syn, w->wcap * sizeof(uint32_t));
				}
				w->words[w->nw] = strdup(word);
				w->word_syn[w->nw++] = node;
			}
			np = strtoul(strtok_r(NULL, " ", &save), NULL, 10);
			for (unsigned long i = 0; i < np; i++) {
				char *sym = strtok_r(NULL, " ", &save), *off = strtok_r(NULL, " ", &save);
				char *pos = strtok_r(NULL, " ", &save);

				strtok_r(NULL, " ", &save);
				if (w->np == w->pcap) {
					w->pcap = w->pcap ? 2 * w->pcap : 1 << 19;
					w->p_src = realloc(w->p_src, w->pcap * sizeof(uint32_t));
					w->p_off = realloc(w->p_off, w->pcap * sizeof(uint32_t));
					w->p_file = realloc(w->p_file, w->pcap * sizeof(int));
					w->p_sym = realloc(w->p_sym, w->pcap * sizeof(*w->p_sym));
				}
				w->p_src[w->np] = node;
				w->p_off[w->np] = (uint32_t)strtoul(off, NULL, 10);
				w->p_file[w->np] = file_of(pos[0]);
				snprintf(w->p_sym[w->np], 3, "%s", sym);
				w->np++;
			}
			w->n++;
		}
		fclose(fp);
	}
	w->first[4] = (uint32_t)w->n;
}

static uint32_t node_of(const struct wn *w, int f, uint32_t off)
{
	uint32_t lo = w->first[f], hi = w->first[f + 1];

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (w->s[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	cr_assert(lo < w->first[f + 1] && w->s[lo].off == off, "no synset %08u in %s", off,
		  data_files[f]);
	return lo;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* An edges file as sorted (src << 32 | dst) keys. */
static uint64_t *edge_keys(const char *dir, const char *name, uint64_t *n)
{
	char path[700];
	uint64_t cols;
	int64_t *e;
	uint64_t *k;

	snprintf(path, sizeof(path), "%s/edges-%s.npy", dir, name);
	cr_assert_eq(rdps_npy_read(path, "<i8", (void **)&e, n, &cols, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(cols, 2);
	k = malloc((*n + 1) * sizeof(*k));
	for (uint64_t i = 0; i < *n; i++)
		k[i] = (uint64_t)e[2 * i] << 32 | (uint64_t)e[2 * i + 1];
	free(e);
	qsort(k, *n, sizeof(*k), cmp_u64);
	for (uint64_t i = 1; i < *n; i++)
		cr_assert_neq(k[i], k[i - 1], "edges-%s: a repeated edge", name);
	return k;
}

static bool has(const uint64_t *k, uint64_t n, uint32_t s, uint32_t d)
{
	uint64_t key = (uint64_t)s << 32 | d;

	return bsearch(&key, k, n, sizeof(key), cmp_u64) != NULL;
}

/* The groups as the recipe (dataset.h) has them: name, reverse, symbols. */
static const struct {
	const char *name;
	int rev;
	const char *syms[5];
} grp[] = {
	{ "hypernym", 1, { "@", "@i" } },
	{ "hyponym", 0, { "~", "~i" } },
	{ "holonym", 3, { "#m", "#s", "#p" } },
	{ "meronym", 2, { "%m", "%s", "%p" } },
	{ "antonym", 4, { "!" } },
	{ "derivation", 5, { "+" } },
	{ "similar", 6, { "&", "$", "^" } },
	{ "domain", 8, { ";c", ";r", ";u" } },
	{ "domain_member", 7, { "-c", "-r", "-u" } },
	{ "related", 10, { "=", "*", ">", "<", "\\" } },
	{ "rev_related", 9, { NULL } },
};
#define NG (sizeof(grp) / sizeof(grp[0]))

static int group(const char *sym)
{
	for (size_t g = 0; g < NG; g++)
		for (int i = 0; i < 5 && grp[g].syms[i]; i++)
			if (!strcmp(grp[g].syms[i], sym))
				return (int)g;
	return -1;
}

Test(wordnet_hetero, lemmas_and_relations_match_the_data_files)
{
	char *d = real("wnh");
	struct wn w;
	uint64_t *k[NG], n[NG], *lo, nlo, *hl, nhl, matched[NG] = { 0 };
	char path[700], line[4096];
	size_t nlemmas = 0;
	FILE *f;

	read_wordnet(&w);
	cr_assert_eq(w.n, 117659);
	for (size_t g = 0; g < NG; g++)
		k[g] = edge_keys(d, grp[g].name, &n[g]);
	/* every pointer is an edge of its group, its reverse one of the reverse group */
	for (size_t i = 0; i < w.np; i++) {
		uint32_t s = w.p_src[i], t = node_of(&w, w.p_file[i], w.p_off[i]);
		int g = group(w.p_sym[i]);

		cr_assert_geq(g, 0, "unknown symbol %s", w.p_sym[i]);
		if (s == t)
			continue; /* self-loops are dropped */
		cr_assert(has(k[g], n[g], s, t), "pointer %s %u -> %u is no %s edge", w.p_sym[i], s,
			  t, grp[g].name);
		cr_assert(has(k[grp[g].rev], n[grp[g].rev], t, s), "pointer %s %u -> %u: no %s "
			  "edge back", w.p_sym[i], s, t, grp[grp[g].rev].name);
	}
	/* and every edge is one of those: count each group's distinct
	 * (pointer or reversed pointer) pairs against its edges */
	{
		uint64_t *want[NG], nw[NG] = { 0 };

		for (size_t g = 0; g < NG; g++)
			want[g] = malloc((2 * w.np + 1) * sizeof(uint64_t));
		for (size_t i = 0; i < w.np; i++) {
			uint32_t s = w.p_src[i], t = node_of(&w, w.p_file[i], w.p_off[i]);
			int g = group(w.p_sym[i]), r = grp[g].rev;

			if (s == t)
				continue;
			want[g][nw[g]++] = (uint64_t)s << 32 | t;
			want[r][nw[r]++] = (uint64_t)t << 32 | s;
		}
		for (size_t g = 0; g < NG; g++) {
			qsort(want[g], nw[g], sizeof(uint64_t), cmp_u64);
			for (uint64_t i = 0; i < nw[g]; i++)
				matched[g] += !i || want[g][i] != want[g][i - 1];
			cr_assert_eq(matched[g], n[g], "%s: %llu edges, the pointers make %llu",
				     grp[g].name, (unsigned long long)n[g],
				     (unsigned long long)matched[g]);
			free(want[g]);
		}
	}
	/* lemmas: the distinct words; senses both ways */
	snprintf(path, sizeof(path), "%s/lemmas.tsv", d);
	f = fopen(path, "r");
	cr_assert(f);
	cr_assert(fgets(line, sizeof(line), f));
	{
		char **names = calloc(200000, sizeof(char *));

		while (fgets(line, sizeof(line), f)) {
			char *tab = strchr(line, '\t');

			line[strcspn(line, "\n")] = '\0';
			cr_assert(tab);
			cr_assert_eq(strtoul(line, NULL, 10), nlemmas);
			names[nlemmas++] = strdup(tab + 1);
		}
		fclose(f);
		cr_assert_eq(nlemmas, 147306);
		lo = edge_keys(d, "lemma_of", &nlo);
		hl = edge_keys(d, "has_lemma", &nhl);
		cr_assert_eq(nlo, 206941);
		cr_assert_eq(nhl, nlo);
		/* lemma_of edges name their synset's words, and each word once */
		{
			uint64_t *per = calloc(w.n + 1, sizeof(uint64_t));
			size_t wi = 0;

			for (uint64_t j = 0; j < nlo; j++) {
				uint32_t lem = (uint32_t)(lo[j] >> 32), syn = (uint32_t)lo[j];

				cr_assert(has(hl, nhl, syn, lem), "lemma_of %u -> %u has no has_lemma "
					  "back", lem, syn);
				per[syn]++;
			}
			/* the files' senses per synset, distinct words */
			for (uint32_t s = 0; s < w.n; s++) {
				size_t start = wi, distinct = 0;

				while (wi < w.nw && w.word_syn[wi] == s)
					wi++;
				for (size_t a = start; a < wi; a++) {
					bool dup = false;

					for (size_t b = start; b < a; b++)
						dup |= !strcmp(w.words[a], w.words[b]);
					distinct += !dup;
				}
				cr_assert_eq(per[s], distinct, "synset %u: %llu lemmas, its line has "
					     "%zu distinct words", s, (unsigned long long)per[s],
					     distinct);
			}
			free(per);
		}
		/* and by name: a sample of senses, each word's lemma id names it */
		for (size_t i = 0; i < w.nw; i += 97) {
			uint32_t s = w.word_syn[i];
			bool ok = false;

			for (uint64_t j = 0; j < nlo && !ok; j++)
				ok = (uint32_t)lo[j] == s && !strcmp(names[lo[j] >> 32], w.words[i]);
			cr_assert(ok, "synset %u's word '%s' is no lemma_of edge", s, w.words[i]);
		}
		for (size_t i = 0; i < nlemmas; i++)
			free(names[i]);
		free(names);
	}
	/* labels: each line's lexicographer file */
	{
		uint64_t rows, cols;
		int64_t *lab;

		snprintf(path, sizeof(path), "%s/synset-label.npy", d);
		cr_assert_eq(rdps_npy_read(path, "<i8", (void **)&lab, &rows, &cols, err,
					   sizeof(err)), 0, "%s", err);
		cr_assert_eq(rows, w.n);
		for (size_t i = 0; i < w.n; i++)
			cr_assert_eq(lab[i], w.s[i].lex, "synset %zu", i);
		free(lab);
	}
	for (size_t g = 0; g < NG; g++)
		free(k[g]);
	free(lo);
	free(hl);
	free(d);
}

static char *slurp(const char *path, size_t *len)
{
	char *buf = rdps_test_slurp_len(path, len);

	cr_assert(buf, "read %s", path);
	return buf;
}

Test(wordnet_hetero, synsets_are_wordnet_nodes_byte_for_byte_and_it_partitions)
{
	static const char *const pairs[][2] = {
		{ "synset-feat.npy", "features.npy" },
		{ "synset-label.npy", "labels.npy" },
		{ "synset-train_mask.npy", "train_mask.npy" },
		{ "synset-val_mask.npy", "val_mask.npy" },
		{ "synset-test_mask.npy", "test_mask.npy" },
	};
	char *d = real("wnh"), *wnn = real("wnn"), *p = real("parts"), a[700], b[700];
	struct rdps_graph_partition_opts o = { .data_dir = d, .out_dir = p, .k = 2,
					       .method = RDPS_PARTITION_METIS, .balance_train = true,
					       .force = 1 };
	struct rdps_graph_partition_result r;
	json_error_t je;
	json_t *root;

	for (size_t i = 0; i < 5; i++) {
		size_t la, lb;
		char *x, *y;

		snprintf(a, sizeof(a), "%s/%s", d, pairs[i][0]);
		snprintf(b, sizeof(b), "%s/%s", wnn, pairs[i][1]);
		x = slurp(a, &la);
		y = slurp(b, &lb);
		cr_assert(la == lb && !memcmp(x, y, la), "%s differs from wordnet-nodes' %s",
			  pairs[i][0], pairs[i][1]);
		free(x);
		free(y);
	}
	cr_assert_eq(rdps_graph_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.num_nodes, 117659 + 147306);
	cr_assert_eq(r.num_edges, 787800);
	snprintf(a, sizeof(a), "%s/partition.json", p);
	root = json_load_file(a, 0, &je);
	cr_assert(root, "%s", je.text);
	cr_assert_eq(json_array_size(json_object_get(root, "ntypes")), 2);
	cr_assert_eq(json_array_size(json_object_get(root, "etypes")), 13);
	cr_assert_eq(json_array_size(json_object_get(json_array_get(json_object_get(root, "ntypes"),
								     0), "data")), 5);
	cr_assert_eq(json_array_size(json_object_get(json_array_get(json_object_get(root, "ntypes"),
								     1), "data")), 0);
	json_decref(root);
	free(d);
	free(wnn);
	free(p);
}
