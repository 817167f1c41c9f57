// SPDX-License-Identifier: MIT
/*
 * rdps_dataset_wordnet_hetero: WordNet 3.0 as a heterogeneous graph shaped
 * like ogbn-mag (include/rdps/dataset.h has the recipe): synsets with the
 * features, labels and split of wordnet-nodes (built first, into a
 * temporary directory, so the two datasets agree node for node), word
 * lemmas as a featureless type, and typed relations in both directions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/npy.h"
#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

static const char *const wn_files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };

/* wordnet-nodes' 26 pointer types (etypes.tsv) -> a relation group, and
 * whether the group is its own reverse. */
enum grp {
	G_HYPERNYM, G_HYPONYM, G_HOLONYM, G_MERONYM, G_ANTONYM, G_DERIVATION, G_SIMILAR,
	G_DOMAIN, G_DOMAIN_MEMBER, G_RELATED, G_REV_RELATED, NGRP
};

static const struct {
	const char *name;
	int reverse;           /* the group its edges' reverses go to */
	const char *members;   /* the pointer symbols in it */
} groups[NGRP] = {
	[G_HYPERNYM] = { "hypernym", G_HYPONYM, "@ @i" },
	[G_HYPONYM] = { "hyponym", G_HYPERNYM, "~ ~i" },
	[G_HOLONYM] = { "holonym", G_MERONYM, "#m #s #p" },
	[G_MERONYM] = { "meronym", G_HOLONYM, "%m %s %p" },
	[G_ANTONYM] = { "antonym", G_ANTONYM, "!" },
	[G_DERIVATION] = { "derivation", G_DERIVATION, "+" },
	[G_SIMILAR] = { "similar", G_SIMILAR, "& $ ^" },
	[G_DOMAIN] = { "domain", G_DOMAIN_MEMBER, ";c ;r ;u" },
	[G_DOMAIN_MEMBER] = { "domain_member", G_DOMAIN, "-c -r -u" },
	[G_RELATED] = { "related", G_REV_RELATED, "= * > < \\" },
	[G_REV_RELATED] = { "rev_related", G_RELATED, "" },
};

/* wordnet-nodes' etype ids (etypes.tsv order) -> group. */
static const char *const wnn_syms[26] = {
	"@", "~", "@i", "~i", "#m", "%m", "#s", "%s", "#p", "%p", "!", "+", "=",
	"*", ">", "$", "&", "^", "<", "\\", ";c", "-c", ";r", "-r", ";u", "-u",
};

static int group_of(const char *sym)
{
	for (int g = 0; g < NGRP; g++) {
		const char *m = groups[g].members;
		size_t n = strlen(sym);

		while (*m) {
			size_t w = strcspn(m, " ");

			if (w == n && !strncmp(m, sym, n))
				return g;
			m += w;
			while (*m == ' ')
				m++;
		}
	}
	return -1;
}

void rdps_dataset_wordnet_hetero_defaults(struct rdps_wordnet_hetero_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->wordnet_dir = "/usr/share/wordnet";
	o->feat_dim = 128;
}

struct pair {
	uint32_t a, b;
};

static int cmp_pair(const void *x, const void *y)
{
	const struct pair *p = x, *q = y;

	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return (p->b > q->b) - (p->b < q->b);
}

struct pairs {
	struct pair *v;
	size_t n, cap;
};

static int push(struct pairs *p, uint32_t a, uint32_t b)
{
	if (rdps_reserve((void **)&p->v, &p->cap, (p->n + 1) * sizeof(*p->v)))
		return -ENOMEM;
	p->v[p->n++] = (struct pair){ a, b };
	return 0;
}

/* Sorted, repeats dropped. */
static void uniq(struct pairs *p)
{
	size_t w = 0;

	qsort(p->v, p->n, sizeof(*p->v), cmp_pair);
	for (size_t i = 0; i < p->n; i++)
		if (!w || cmp_pair(&p->v[w - 1], &p->v[i]))
			p->v[w++] = p->v[i];
	p->n = w;
}

static int write_pairs(const struct rdps_pt_outdir *od, const char *name, const struct pairs *p,
		       char *err, size_t errlen)
{
	int64_t *a = malloc((p->n + 1) * 2 * sizeof(int64_t));
	char *path = rdps_pt_outdir_path(od, name);
	int ret = -ENOMEM;

	if (a && path) {
		for (size_t i = 0; i < p->n; i++) {
			a[2 * i] = p->v[i].a;
			a[2 * i + 1] = p->v[i].b;
		}
		ret = rdps_npy_write(path, "<i8", a, p->n, 2, err, errlen);
	}
	free(a);
	free(path);
	return ret;
}

/* A lemma as WordNet's index files spell it: lower-cased, without
 * data.adj's syntactic marker ("(a)", "(p)", "(ip)"). */
static size_t normalize(char *w, size_t file)
{
	size_t len = strlen(w);

	if (file == 2 && len > 3 && w[len - 1] == ')') {
		if (!strcmp(w + len - 3, "(a)") || !strcmp(w + len - 3, "(p)"))
			len -= 3;
		else if (len > 4 && !strcmp(w + len - 4, "(ip)"))
			len -= 4;
	}
	for (size_t i = 0; i < len; i++)
		if (w[i] >= 'A' && w[i] <= 'Z')
			w[i] = (char)(w[i] - 'A' + 'a');
	w[len] = '\0';
	return len;
}

/* Every synset's words: (lemma, synset) senses and the lemma names. */
static int read_senses(const char *dir, struct rdps_pt_names *lemmas, struct pairs *senses,
		       uint64_t *nsyn, char *err, size_t errlen)
{
	uint32_t node = 0;
	int ret = 0;

	for (size_t f = 0; f < 4 && !ret; f++) {
		char *path = rdps_pt_join(dir, wn_files[f]);
		struct rdps_pt_lines lr;
		long len;

		if (!path)
			return -ENOMEM;
		ret = rdps_pt_lines_open(&lr, path, err, errlen);
		free(path);
		if (ret)
			return ret;
		while ((len = rdps_pt_lines_next(&lr)) >= 0) {
			char *save = NULL, *tok, *end;
			unsigned long nwords;

			if (lr.line[0] == ' ')
				continue; /* license header */
			tok = strtok_r(lr.line, " ", &save);
			for (int i = 0; i < 3 && tok; i++)
				tok = strtok_r(NULL, " ", &save);
			nwords = tok ? strtoul(tok, &end, 16) : 0;
			if (!nwords) {
				ret = rdps_pt_fail(err, errlen, -EINVAL, "%s:%llu: bad word count",
						   lr.path, (unsigned long long)lr.lineno);
				break;
			}
			for (unsigned long i = 0; i < nwords; i++) {
				char *w = strtok_r(NULL, " ", &save);
				uint32_t id;
				size_t n;

				if (!w || !strtok_r(NULL, " ", &save)) { /* word, lex_id */
					ret = rdps_pt_fail(err, errlen, -EINVAL, "%s:%llu: word list "
							   "cut short", lr.path,
							   (unsigned long long)lr.lineno);
					break;
				}
				n = normalize(w, f);
				if (rdps_pt_names_add(lemmas, w, n, &id) < 0 ||
				    push(senses, id, node)) {
					ret = -ENOMEM;
					break;
				}
			}
			node++;
			if (ret)
				break;
		}
		if (!ret && len == -EIO)
			ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", lr.path);
		rdps_pt_lines_close(&lr);
	}
	*nsyn = node;
	uniq(senses); /* a word twice in a synset, in two spellings */
	return ret;
}

static int copy_npy(const struct rdps_pt_outdir *od, const char *from_dir, const char *from,
		    const char *to, const char *descr, char *err, size_t errlen)
{
	char path[4096], *out = rdps_pt_outdir_path(od, to);
	uint64_t rows, cols;
	void *data = NULL;
	int ret;

	if (!out)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", from_dir, from);
	ret = rdps_npy_read(path, descr, &data, &rows, &cols, err, errlen);
	if (!ret)
		ret = rdps_npy_write(out, descr, data, rows, cols, err, errlen);
	free(data);
	free(out);
	return ret;
}

static int write_json(const struct rdps_pt_outdir *od, const struct rdps_wordnet_hetero_opts *o,
		      const struct rdps_wordnet_hetero_stats *st, const uint64_t *per_group,
		      char *err, size_t errlen)
{
	FILE *f = rdps_pt_outdir_fopen(od, "graph.json", err, errlen);

	if (!f)
		return -EIO;
	fprintf(f, "{\n  \"name\": \"wordnet-hetero\",\n  \"num_classes\": %u,\n  \"feat_dim\": %u,\n"
		   "  \"seed\": %llu,\n", st->num_classes, o->feat_dim,
		(unsigned long long)o->seed);
	fprintf(f, "  \"ntypes\": [\n"
		   "    {\"name\": \"synset\", \"num_nodes\": %llu, \"data\": {\"feat\": "
		   "\"synset-feat.npy\", \"label\": \"synset-label.npy\", \"train_mask\": "
		   "\"synset-train_mask.npy\", \"val_mask\": \"synset-val_mask.npy\", "
		   "\"test_mask\": \"synset-test_mask.npy\"}},\n"
		   "    {\"name\": \"lemma\", \"num_nodes\": %llu, \"data\": {}}\n  ],\n",
		(unsigned long long)st->num_synsets, (unsigned long long)st->num_lemmas);
	fprintf(f, "  \"etypes\": [\n");
	for (int g = 0; g < NGRP; g++)
		fprintf(f, "    {\"src\": \"synset\", \"name\": \"%s\", \"dst\": \"synset\", "
			   "\"edges\": \"edges-%s.npy\", \"num_edges\": %llu},\n", groups[g].name,
			groups[g].name, (unsigned long long)per_group[g]);
	fprintf(f, "    {\"src\": \"lemma\", \"name\": \"lemma_of\", \"dst\": \"synset\", "
		   "\"edges\": \"edges-lemma_of.npy\", \"num_edges\": %llu},\n"
		   "    {\"src\": \"synset\", \"name\": \"has_lemma\", \"dst\": \"lemma\", "
		   "\"edges\": \"edges-has_lemma.npy\", \"num_edges\": %llu}\n  ],\n",
		(unsigned long long)st->num_senses, (unsigned long long)st->num_senses);
	fprintf(f, "  \"relations\": \"WordNet's pointers between two synsets, grouped: "
		   "hypernym (@ @i) and hyponym (~ ~i), holonym (#m #s #p) and meronym (%%m %%s "
		   "%%p), domain (;c ;r ;u) and domain_member (-c -r -u), related (= * > < \\\\) and "
		   "rev_related are each other's reverse: every edge of one has its reverse in the "
		   "other; antonym (!), derivation (+) and similar (& $ ^) hold both directions; "
		   "(src, dst) unique per type\",\n");
	fprintf(f, "  \"lemmas\": \"the words of the synsets' data lines, lower-cased, without "
		   "data.adj's (a) (p) (ip) markers (lemmas.tsv); lemma_of: lemma -> each synset "
		   "it is a word of, has_lemma the reverse\",\n");
	fprintf(f, "  \"synsets\": \"rdps dataset wordnet-nodes' nodes, features, labels and "
		   "split (same feat_dim and seed), node for node (synsets.tsv)\",\n");
	fprintf(f, "  \"splits\": {\"train\": %llu, \"val\": %llu, \"test\": %llu},\n"
		   "  \"wordnet_dir\": ", (unsigned long long)st->num_split[0],
		(unsigned long long)st->num_split[1], (unsigned long long)st->num_split[2]);
	{
		const char *p = o->wordnet_dir;

		fputc('"', f);
		for (; *p; p++) {
			if (*p == '"' || *p == '\\')
				fputc('\\', f);
			fputc(*p, f);
		}
		fputs("\"\n}\n", f);
	}
	return rdps_pt_fclose(f, "graph.json", err, errlen);
}

int rdps_dataset_wordnet_hetero(const char *out_dir, const struct rdps_wordnet_hetero_opts *o,
				struct rdps_wordnet_hetero_stats *st, char *err, size_t errlen)
{
	struct rdps_wordnet_nodes_opts wo;
	struct rdps_graph_stats gs;
	struct rdps_pt_outdir od = { 0 };
	struct rdps_pt_names lemmas = { 0 };
	struct pairs senses = { 0 }, rel[NGRP] = { { 0 } }, rev = { 0 };
	uint64_t per_group[NGRP] = { 0 }, nsyn = 0, rows, cols;
	int64_t *edges = NULL, *types = NULL;
	char *tmp = NULL, path[4096];
	FILE *f;
	int ret;

	memset(st, 0, sizeof(*st));
	rdps_dataset_wordnet_nodes_defaults(&wo);
	wo.wordnet_dir = o->wordnet_dir;
	wo.feat_dim = o->feat_dim;
	wo.seed = o->seed;
	wo.force = 1;
	if ((ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen)))
		return ret;
	/* the synsets as wordnet-nodes makes them, inside our temporary dir */
	tmp = rdps_pt_outdir_path(&od, "wordnet-nodes.tmp");
	if (!tmp) {
		ret = -ENOMEM;
		goto out;
	}
	if ((ret = rdps_dataset_wordnet_nodes(tmp, &wo, &gs, err, errlen)))
		goto out;
	st->num_synsets = gs.num_nodes;
	st->num_classes = gs.num_classes;
	memcpy(st->num_split, gs.num_split, sizeof(st->num_split));
	if ((ret = rdps_pt_names_init(&lemmas, 1u << 18)) ||
	    (ret = read_senses(o->wordnet_dir, &lemmas, &senses, &nsyn, err, errlen)))
		goto out;
	if (nsyn != gs.num_nodes) {
		ret = rdps_pt_fail(err, errlen, -EIO, "%s: %llu synsets, wordnet-nodes read %llu "
				   "(the files changed while being read?)", o->wordnet_dir,
				   (unsigned long long)nsyn, (unsigned long long)gs.num_nodes);
		goto out;
	}
	st->num_lemmas = lemmas.n;
	st->num_senses = senses.n;
	/* relations, grouped, with every reverse */
	snprintf(path, sizeof(path), "%s/edges.npy", tmp);
	if ((ret = rdps_npy_read(path, "<i8", (void **)&edges, &rows, &cols, err, errlen)))
		goto out;
	snprintf(path, sizeof(path), "%s/etypes.npy", tmp);
	if ((ret = rdps_npy_read(path, "<i8", (void **)&types, &rows, &cols, err, errlen)))
		goto out;
	for (uint64_t i = 0; i < rows; i++) {
		int g = types[i] >= 0 && types[i] < 26 ? group_of(wnn_syms[types[i]]) : -1;
		uint32_t s = (uint32_t)edges[2 * i], d = (uint32_t)edges[2 * i + 1];

		if (g < 0) {
			ret = rdps_pt_fail(err, errlen, -EIO, "wordnet-nodes' edge %llu has type "
					   "%lld, not one of its 26", (unsigned long long)i,
					   (long long)types[i]);
			goto out;
		}
		if (push(&rel[g], s, d) || push(&rel[groups[g].reverse], d, s)) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (int g = 0; g < NGRP && !ret; g++) {
		char name[64];

		uniq(&rel[g]);
		per_group[g] = rel[g].n;
		st->num_edges += rel[g].n;
		snprintf(name, sizeof(name), "edges-%s.npy", groups[g].name);
		ret = write_pairs(&od, name, &rel[g], err, errlen);
	}
	if (ret)
		goto out;
	/* lemmas both ways */
	if ((ret = write_pairs(&od, "edges-lemma_of.npy", &senses, err, errlen)))
		goto out;
	for (size_t i = 0; i < senses.n; i++)
		if (push(&rev, senses.v[i].b, senses.v[i].a)) {
			ret = -ENOMEM;
			goto out;
		}
	uniq(&rev);
	if ((ret = write_pairs(&od, "edges-has_lemma.npy", &rev, err, errlen)))
		goto out;
	st->num_edges += 2 * senses.n;
	st->num_etypes = NGRP + 2;
	/* synsets' data, node for node */
	if ((ret = copy_npy(&od, tmp, "features.npy", "synset-feat.npy", "<f4", err, errlen)) ||
	    (ret = copy_npy(&od, tmp, "labels.npy", "synset-label.npy", "<i8", err, errlen)) ||
	    (ret = copy_npy(&od, tmp, "train_mask.npy", "synset-train_mask.npy", "|u1", err,
			    errlen)) ||
	    (ret = copy_npy(&od, tmp, "val_mask.npy", "synset-val_mask.npy", "|u1", err,
			    errlen)) ||
	    (ret = copy_npy(&od, tmp, "test_mask.npy", "synset-test_mask.npy", "|u1", err,
			    errlen)))
		goto out;
	{
		char *from = rdps_pt_join(tmp, "nodes.tsv"), *to = rdps_pt_outdir_path(&od,
										 "synsets.tsv");

		ret = from && to ? rdps_pt_copy_file(from, to, err, errlen) : -ENOMEM;
		free(from);
		free(to);
		if (ret)
			goto out;
	}
	f = rdps_pt_outdir_fopen(&od, "lemmas.tsv", err, errlen);
	if (!f) {
		ret = -EIO;
		goto out;
	}
	fprintf(f, "lemma_id\tlemma\n");
	for (uint32_t i = 0; i < lemmas.n; i++)
		fprintf(f, "%u\t%s\n", i, rdps_pt_names_get(&lemmas, i));
	if ((ret = rdps_pt_fclose(f, "lemmas.tsv", err, errlen)) ||
	    (ret = write_json(&od, o, st, per_group, err, errlen)))
		goto out;
	rdps_pt_rmtree(tmp);
	ret = rdps_pt_outdir_commit(&od, err, errlen);
out:
	rdps_pt_outdir_end(&od);
	rdps_pt_names_free(&lemmas);
	free(senses.v);
	free(rev.v);
	for (int g = 0; g < NGRP; g++)
		free(rel[g].v);
	free(edges);
	free(types);
	free(tmp);
	return ret;
}
