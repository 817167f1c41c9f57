// SPDX-License-Identifier: MIT
/* rdps_partition_build: dataset -> partition directory (see rdps/partition.h). */
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <metis.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "coarsen.h"
#include "internal.h"
#include "rdps/common.h"
#include "rdps/partition.h"

_Static_assert(sizeof(idx_t) == 4, "Debian's METIS uses 32-bit idx_t");

#define RD_BATCH 65536 /* triples per read of the temporary file */

/* A graph being filled from the train triples. */
struct csr {
	idx_t *adjncy;  /* neighbours */
	idx_t *pos;     /* fill cursors */
};


struct build {
	const struct rdps_partition_opts *o;
	char *err;
	size_t errlen;
	struct rdps_dataset *ds;
	uint32_t n;             /* entities */
	uint32_t nrel;          /* relations */
	struct rdps_pt_outdir od;
	char *tpath;            /* temporary binary copy of train */
	FILE *tf;
	char *spath[RDPS_SPLIT_COUNT]; /* temporary binary valid/test */
	FILE *sf[RDPS_SPLIT_COUNT];
	uint64_t ntrain;
	uint64_t nsplit[RDPS_SPLIT_COUNT];
	uint64_t adj_entries;   /* sum of degrees without self-loops */
	uint32_t *deg;          /* adjacency entries per entity (no self-loops) */
	uint32_t *heads;        /* train triples headed by the entity */
	uint32_t *part;         /* part of original entity id */
	uint32_t *old2new;
	uint32_t *new2old;
	uint64_t *ranges;       /* k + 1 */
	uint64_t *part_triples;
	uint64_t *part_local;
	uint64_t *part_sum;     /* payload checksums */
	uint64_t local, cut;
	long pre_metis_rss_kib;
	uint32_t clusters;      /* vertices of the graph METIS saw, if coarsened */
	struct rdps_blob_writer **w;
	struct rdps_blob_writer *split_w;
	struct csr *csr;        /* graph being filled */
	uint64_t t0;
};

const char *rdps_partition_method_name(enum rdps_partition_method m)
{
	switch (m) {
	case RDPS_PARTITION_METIS:
		return "metis";
	case RDPS_PARTITION_RANDOM:
		return "random";
	}
	return NULL;
}

const char *rdps_coarsen_name(enum rdps_coarsen c)
{
	switch (c) {
	case RDPS_COARSEN_AUTO:
		return "auto";
	case RDPS_COARSEN_ON:
		return "on";
	case RDPS_COARSEN_OFF:
		return "off";
	}
	return NULL;
}

int rdps_coarsen_parse(const char *name, enum rdps_coarsen *c)
{
	for (int i = RDPS_COARSEN_AUTO; i <= RDPS_COARSEN_OFF; i++)
		if (!strcmp(name, rdps_coarsen_name((enum rdps_coarsen)i))) {
			*c = (enum rdps_coarsen)i;
			return 0;
		}
	return -EINVAL;
}

int rdps_partition_method_parse(const char *name, enum rdps_partition_method *m)
{
	if (!strcmp(name, "metis"))
		*m = RDPS_PARTITION_METIS;
	else if (!strcmp(name, "random"))
		*m = RDPS_PARTITION_RANDOM;
	else
		return -EINVAL;
	return 0;
}

static double secs(const struct build *b)
{
	return (double)(rdps_now_ns() - b->t0) / 1e9;
}

/* The process's peak resident set so far (0 if getrusage fails). */
static long peak_rss_kib(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_maxrss;
}

static int train_batch(void *ctx, const uint32_t *ids, size_t n)
{
	struct build *b = ctx;

	if (fwrite(ids, 3 * sizeof(uint32_t), n, b->tf) != n)
		return rdps_pt_fail(b->err, b->errlen, -EIO, "%s: write failed", b->tpath);
	for (size_t i = 0; i < n; i++) {
		uint32_t h = ids[3 * i], t = ids[3 * i + 2];

		b->heads[h]++;
		if (h != t) {
			b->deg[h]++;
			b->deg[t]++;
			b->adj_entries += 2;
		}
	}
	if ((b->ntrain += n) % (1u << 22) < n)
		rdps_info("partition: read %llu train triples (%.1f s)",
			  (unsigned long long)b->ntrain, secs(b));
	return 0;
}

/* Calls fn on every triple batch of the temporary train copy. */
static int for_each_train(struct build *b, int (*fn)(struct build *, const uint32_t *, size_t))
{
	uint32_t *buf = malloc(RD_BATCH * 3 * sizeof(uint32_t));
	size_t n;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	rewind(b->tf);
	while ((n = fread(buf, 3 * sizeof(uint32_t), RD_BATCH, b->tf)) > 0)
		if ((ret = fn(b, buf, n)))
			break;
	if (!ret && ferror(b->tf))
		ret = rdps_pt_fail(b->err, b->errlen, -EIO, "%s: read error", b->tpath);
	free(buf);
	return ret;
}

/* ---- METIS ---- */

static int fill_batch(struct build *b, const uint32_t *ids, size_t n)
{
	struct csr *g = b->csr;

	for (size_t i = 0; i < n; i++) {
		uint32_t h = ids[3 * i], t = ids[3 * i + 2];

		if (h == t)
			continue;
		g->adjncy[g->pos[h]++] = (idx_t)t;
		g->adjncy[g->pos[t]++] = (idx_t)h;
	}
	return 0;
}

static int cmp_idx(const void *a, const void *b)
{
	idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;

	return (x > y) - (x < y);
}

static int metis_error(struct build *b, int r)
{
	switch (r) {
	case METIS_ERROR_INPUT:
		return rdps_pt_fail(b->err, b->errlen, -EINVAL, "METIS: invalid input");
	case METIS_ERROR_MEMORY:
		return rdps_pt_fail(b->err, b->errlen, -ENOMEM, "METIS: out of memory");
	default:
		return rdps_pt_fail(b->err, b->errlen, -EIO, "METIS: failed (%d)", r);
	}
}

/*
 * The undirected graph of the train triples in g (self-loops dropped),
 * parallel edges (several relations, or both directions, between one pair)
 * merged into one edge whose weight is the number of triples, so that the
 * edge cut METIS minimises counts cut triples. Each vertex's neighbours are
 * sorted and counted first, so the weights take exactly the merged edges'
 * room. Vertex weights: 1 (entities) and the triples it heads.
 */
static int build_graph(struct build *b, struct rdps_pt_graph *g)
{
	struct csr c = { 0 };
	uint64_t w = 0;
	int ret;

	memset(g, 0, sizeof(*g));
	rdps_info("partition: building CSR graph (%u vertices, %llu adjacency entries)",
		  b->n, (unsigned long long)b->adj_entries);
	g->n = b->n;
	g->xadj = malloc(((size_t)b->n + 1) * sizeof(idx_t));
	c.pos = malloc(((size_t)b->n + 1) * sizeof(idx_t));
	g->adjncy = malloc((b->adj_entries ? b->adj_entries : 1) * sizeof(idx_t));
	if (!g->xadj || !c.pos || !g->adjncy) {
		ret = -ENOMEM;
		goto err;
	}
	g->xadj[0] = 0;
	for (uint32_t v = 0; v < b->n; v++)
		g->xadj[v + 1] = g->xadj[v] + (idx_t)b->deg[v];
	memcpy(c.pos, g->xadj, ((size_t)b->n + 1) * sizeof(idx_t));
	c.adjncy = g->adjncy;
	b->csr = &c;
	ret = for_each_train(b, fill_batch);
	b->csr = NULL;
	free(c.pos);
	c.pos = NULL;
	if (ret)
		goto err;
	for (uint32_t v = 0; v < b->n; v++) {
		idx_t s = g->xadj[v], e = g->xadj[v + 1];

		qsort(g->adjncy + s, (size_t)(e - s), sizeof(idx_t), cmp_idx);
		for (idx_t i = s; i < e; i++)
			w += i == s || g->adjncy[i] != g->adjncy[i - 1];
	}
	g->adjwgt = malloc((w ? w : 1) * sizeof(idx_t));
	g->vwgt = malloc((size_t)b->n * 2 * sizeof(idx_t));
	if (!g->adjwgt || !g->vwgt) {
		ret = -ENOMEM;
		goto err;
	}
	w = 0;
	for (uint32_t v = 0; v < b->n; v++) {
		idx_t s = g->xadj[v], e = g->xadj[v + 1];

		g->xadj[v] = (idx_t)w;
		for (idx_t i = s; i < e;) {
			idx_t j = i;

			while (j < e && g->adjncy[j] == g->adjncy[i])
				j++;
			g->adjncy[w] = g->adjncy[i];
			g->adjwgt[w] = j - i;
			w++;
			i = j;
		}
		if (w - (uint64_t)g->xadj[v] > g->max_degree)
			g->max_degree = (uint32_t)(w - (uint64_t)g->xadj[v]);
		g->vwgt[2 * v] = 1;
		g->vwgt[2 * v + 1] = (idx_t)b->heads[v];
	}
	g->xadj[b->n] = (idx_t)w;
	g->entries = w;
	/* The merged edges' room is all the adjacency needs now. */
	{
		idx_t *shrunk = realloc(g->adjncy, (w ? w : 1) * sizeof(idx_t));

		if (shrunk)
			g->adjncy = shrunk;
	}
	rdps_info("partition: %llu distinct undirected edges (%.1f s)",
		  (unsigned long long)w / 2, secs(b));
	return 0;
err:
	free(c.pos);
	rdps_pt_graph_free(g);
	return ret;
}

static void cluster_progress(void *ctx, uint32_t round, uint64_t moved)
{
	struct build *b = ctx;

	rdps_info("partition: clustering sweep %u moved %llu vertices (%.1f s)", round,
		  (unsigned long long)moved, secs(b));
}

/*
 * Coarsens g (coarsen.c) into clusters METIS can balance: each at most
 * 1/COARSEN_PARTS_SHARE of a part's entities and triples. The graph of the
 * clusters goes into cg; label[v] is v's cluster.
 */
#define COARSEN_PARTS_SHARE 64
#define COARSEN_ROUNDS 10

static int coarsen(struct build *b, const struct rdps_pt_graph *g, uint32_t *label,
		   struct rdps_pt_graph *cg)
{
	struct rdps_pt_cluster_opts co = {
		.rounds = COARSEN_ROUNDS, .seed = b->o->seed ^ 0x636f617273656eull,
		.progress = cluster_progress, .progress_ctx = b,
	};
	uint64_t share = (uint64_t)b->o->k * COARSEN_PARTS_SHARE;
	uint32_t nc;
	int ret;

	co.max_entities = (uint32_t)(b->n / share > 1 ? b->n / share : 1);
	co.max_heads = b->ntrain / share > 1 ? b->ntrain / share : 1;
	rdps_info("partition: clustering %u vertices (label propagation, clusters of at most "
		  "%u entities and %llu triples)", g->n, co.max_entities,
		  (unsigned long long)co.max_heads);
	ret = rdps_pt_cluster(g, &co, label, &nc);
	if (ret)
		return ret;
	ret = rdps_pt_contract(g, label, nc, cg);
	if (ret)
		return ret == -EOVERFLOW
			       ? rdps_pt_fail(b->err, b->errlen, ret, "the coarse graph has more "
					      "adjacency entries than METIS' 32-bit idx_t allows")
			       : ret;
	rdps_info("partition: coarse graph of %u clusters, %llu distinct edges (%.1f s, peak "
		  "RSS %.0f MiB)", nc, (unsigned long long)cg->entries / 2, secs(b),
		  peak_rss_kib() / 1024.0);
	b->clusters = nc;
	return 0;
}

static void refine_progress(void *ctx, uint32_t round, uint64_t moved)
{
	struct build *b = ctx;

	rdps_info("partition: refinement sweep %u moved %llu vertices (%.1f s)", round,
		  (unsigned long long)moved, secs(b));
}

/* METIS's balance on the whole graph: what refinement may not break. */
static int refine(struct build *b, const struct rdps_pt_graph *g)
{
	uint32_t k = b->o->k;
	struct rdps_pt_refine_opts ro = {
		.rounds = COARSEN_ROUNDS, .seed = b->o->seed ^ 0x726566696e65ull,
		.max_entities = (uint64_t)(1.05 * (double)b->n / k) + 1,
		.max_heads = (uint64_t)(1.10 * (double)b->ntrain / k) + 1,
		.progress = refine_progress, .progress_ctx = b,
	};
	uint64_t moved;

	return rdps_pt_refine(g, k, b->part, &ro, &moved);
}

/*
 * METIS on the graph of the train triples; past RDPS_COARSEN_AUTO_ENTRIES
 * (or with coarsen on), on the graph of its clusters instead, each vertex
 * then taking its cluster's part and the parts refined on the whole graph
 * (which stays in memory meanwhile: METIS on the clusters needs far less).
 */
static int partition_metis(struct build *b)
{
	struct rdps_pt_graph g, cg = { 0 }, *mg = &g;
	idx_t nv, ncon = 2, nparts = (idx_t)b->o->k, objval = 0;
	idx_t options[METIS_NOPTIONS], *part = NULL;
	real_t ubvec[2] = { 1.05f, 1.10f };
	uint32_t *label = NULL;
	bool coarse;
	int ret, r;

	if (b->adj_entries > INT32_MAX)
		return rdps_pt_fail(b->err, b->errlen, -EOVERFLOW,
				    "graph has %llu adjacency entries, more than METIS' 32-bit idx_t allows",
				    (unsigned long long)b->adj_entries);
	ret = build_graph(b, &g);
	if (ret)
		return ret;
	coarse = b->o->coarsen == RDPS_COARSEN_ON ||
		 (b->o->coarsen == RDPS_COARSEN_AUTO && g.entries > RDPS_COARSEN_AUTO_ENTRIES &&
		  b->o->k > 1);
	if (coarse) {
		label = malloc(((size_t)b->n ? b->n : 1) * sizeof(uint32_t));
		ret = label ? coarsen(b, &g, label, &cg) : -ENOMEM;
		if (ret)
			goto err_free;
		mg = &cg;
	}
	nv = (idx_t)mg->n;
	part = malloc(((size_t)mg->n ? mg->n : 1) * sizeof(idx_t));
	if (!part) {
		ret = -ENOMEM;
		goto err_free;
	}
	METIS_SetDefaultOptions(options);
	options[METIS_OPTION_SEED] = (idx_t)((b->o->seed ^ (b->o->seed >> 32)) & 0x7fffffff);
	options[METIS_OPTION_NUMBERING] = 0;
	b->pre_metis_rss_kib = peak_rss_kib();
	rdps_info("partition: METIS_PartGraphKway k=%u on %u %s, balancing entities and triples "
		  "(peak RSS so far %.0f MiB)", b->o->k, mg->n, coarse ? "clusters" : "vertices",
		  b->pre_metis_rss_kib / 1024.0);
	r = METIS_PartGraphKway(&nv, &ncon, mg->xadj, mg->adjncy, mg->vwgt, NULL, mg->adjwgt,
				&nparts, NULL, ubvec, options, &objval, part);
	if (r != METIS_OK) {
		ret = metis_error(b, r);
		goto err_free;
	}
	rdps_info("partition: METIS done, edge cut %lld (%.1f s, peak RSS %.0f MiB)",
		  (long long)objval, secs(b), peak_rss_kib() / 1024.0);
	for (uint32_t v = 0; v < b->n; v++)
		b->part[v] = (uint32_t)part[coarse ? label[v] : v];
	ret = coarse ? refine(b, &g) : 0;
err_free:
	free(part);
	free(label);
	rdps_pt_graph_free(&cg);
	rdps_pt_graph_free(&g);
	return ret;
}

static int partition_random(struct build *b)
{
	uint32_t *perm = malloc((size_t)b->n * sizeof(uint32_t));
	uint64_t s = b->o->seed;

	if (!perm)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n; i++)
		perm[i] = i;
	for (uint32_t i = b->n; i > 1; i--) {
		uint32_t j = (uint32_t)rdps_pt_below(rdps_pt_splitmix(&s), i);
		uint32_t tmp = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = tmp;
	}
	for (uint32_t i = 0; i < b->n; i++)
		b->part[perm[i]] = (uint32_t)((uint64_t)i * b->o->k / b->n);
	free(perm);
	return 0;
}

/* ---- relabel and write ---- */

static int relabel(struct build *b)
{
	uint32_t k = b->o->k;
	uint64_t *next = calloc(k, sizeof(uint64_t));

	if (!next)
		return -ENOMEM;
	for (uint32_t v = 0; v < b->n; v++)
		b->ranges[b->part[v] + 1]++;
	for (uint32_t p = 0; p < k; p++) {
		b->ranges[p + 1] += b->ranges[p];
		next[p] = b->ranges[p];
	}
	for (uint32_t v = 0; v < b->n; v++) {
		uint32_t nid = (uint32_t)next[b->part[v]]++;

		b->old2new[v] = nid;
		b->new2old[nid] = v;
	}
	free(next);
	return 0;
}

static int assign_batch(struct build *b, const uint32_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t h = ids[3 * i], r = ids[3 * i + 1], t = ids[3 * i + 2];
		uint32_t p = b->part[h];
		uint32_t rec[3] = { b->old2new[h], r, b->old2new[t] };
		int ret;

		if (b->part[t] == p) {
			b->local++;
			b->part_local[p]++;
		} else {
			b->cut++;
		}
		b->part_triples[p]++;
		ret = rdps_loader_writer_append(b->w[p], rec, 1);
		if (ret)
			return rdps_pt_fail(b->err, b->errlen, ret,
					    "part %u: write failed: %s", p, strerror(-ret));
	}
	return 0;
}

struct split_tmp {
	struct build *b;
	int split;
};

static int split_tmp_batch(void *ctx, const uint32_t *ids, size_t n)
{
	struct split_tmp *st = ctx;
	struct build *b = st->b;

	if (fwrite(ids, 3 * sizeof(uint32_t), n, b->sf[st->split]) != n)
		return rdps_pt_fail(b->err, b->errlen, -EIO, "%s: write failed",
				    b->spath[st->split]);
	return 0;
}

static int split_batch(struct build *b, const uint32_t *ids, size_t n)
{
	uint32_t rec[3 * 256];

	while (n) {
		size_t m = n < 256 ? n : 256;

		for (size_t i = 0; i < m; i++) {
			rec[3 * i] = b->old2new[ids[3 * i]];
			rec[3 * i + 1] = ids[3 * i + 1];
			rec[3 * i + 2] = b->old2new[ids[3 * i + 2]];
		}
		if (rdps_loader_writer_append(b->split_w, rec, m))
			return rdps_pt_fail(b->err, b->errlen, -EIO, "write failed");
		ids += 3 * m;
		n -= m;
	}
	return 0;
}

static char *part_file(uint32_t p)
{
	char *s;

	if (asprintf(&s, "part-%u.trp", p) < 0)
		return NULL;
	return s;
}

static int write_parts(struct build *b)
{
	uint32_t k = b->o->k;
	size_t bufsz = (256u << 20) / k;
	int ret = 0;

	if (bufsz > (1u << 20))
		bufsz = 1u << 20;
	if (bufsz < (64u << 10))
		bufsz = 64u << 10;
	b->w = calloc(k, sizeof(*b->w));
	if (!b->w)
		return -ENOMEM;
	for (uint32_t p = 0; p < k && !ret; p++) {
		char *name = part_file(p);
		char *path = name ? rdps_pt_outdir_path(&b->od, name) : NULL;

		ret = path ? rdps_loader_writer_create(path, RDPS_BLOB_TRIPLES, 12, 4, p,
							bufsz, &b->w[p])
			   : -ENOMEM;
		if (ret)
			rdps_pt_fail(b->err, b->errlen, ret, "%s: %s", path ? path : "part",
				     strerror(-ret));
		free(path);
		free(name);
	}
	if (!ret) {
		rdps_info("partition: writing %u part files", k);
		ret = for_each_train(b, assign_batch);
	}
	for (uint32_t p = 0; p < k && !ret; p++) {
		ret = rdps_loader_writer_commit(b->w[p], &b->part_sum[p]);
		if (ret)
			rdps_pt_fail(b->err, b->errlen, ret, "part %u: commit failed: %s", p,
				     strerror(-ret));
	}
	for (uint32_t p = 0; p < k; p++)
		rdps_loader_writer_destroy(b->w[p]);
	free(b->w);
	b->w = NULL;
	return ret;
}

static int write_split(struct build *b, enum rdps_split split, const char *file)
{
	char *path = rdps_pt_outdir_path(&b->od, file);
	uint32_t *buf = malloc(RD_BATCH * 3 * sizeof(uint32_t));
	size_t n;
	int ret;

	if (!path || !buf) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = rdps_loader_writer_create(path, RDPS_BLOB_TRIPLES, 12, 4, RDPS_BLOB_NO_PART,
					0, &b->split_w);
	if (ret) {
		rdps_pt_fail(b->err, b->errlen, ret, "%s: %s", path, strerror(-ret));
		goto err_free;
	}
	rewind(b->sf[split]);
	while ((n = fread(buf, 3 * sizeof(uint32_t), RD_BATCH, b->sf[split])) > 0)
		if ((ret = split_batch(b, buf, n)))
			goto err_destroy;
	if (ferror(b->sf[split])) {
		ret = rdps_pt_fail(b->err, b->errlen, -EIO, "%s: read error", b->spath[split]);
		goto err_destroy;
	}
	ret = rdps_loader_writer_commit(b->split_w, NULL);
	if (ret)
		rdps_pt_fail(b->err, b->errlen, ret, "%s: %s", path, strerror(-ret));
err_destroy:
	rdps_loader_writer_destroy(b->split_w);
	b->split_w = NULL;
err_free:
	free(buf);
	free(path);
	return ret;
}

/* Validates valid/test (names, entities seen in train) and keeps their ids
 * in temporary files, so the name index can be freed before METIS runs. */
static int stash_splits(struct build *b)
{
	static const char *const tmp_names[RDPS_SPLIT_COUNT] = { NULL, ".valid.u32", ".test.u32" };

	for (int s = RDPS_SPLIT_VALID; s <= RDPS_SPLIT_TEST; s++) {
		struct split_tmp st = { .b = b, .split = s };
		int64_t n;

		b->spath[s] = rdps_pt_outdir_path(&b->od, tmp_names[s]);
		if (!b->spath[s])
			return -ENOMEM;
		b->sf[s] = fopen(b->spath[s], "w+");
		if (!b->sf[s])
			return rdps_pt_fail(b->err, b->errlen, -errno, "%s: %s", b->spath[s],
					    strerror(errno));
		n = rdps_dataset_scan(b->ds, (enum rdps_split)s, split_tmp_batch, &st, b->err,
				      b->errlen);
		if (n < 0)
			return (int)n;
		if (fflush(b->sf[s]))
			return rdps_pt_fail(b->err, b->errlen, -errno, "%s: %s", b->spath[s],
					    strerror(errno));
		b->nsplit[s] = (uint64_t)n;
	}
	return 0;
}

static int write_idmap(struct build *b)
{
	struct rdps_blob_writer *w;
	char *path = rdps_pt_outdir_path(&b->od, "idmap.bin");
	int ret;

	if (!path)
		return -ENOMEM;
	ret = rdps_loader_writer_create(path, RDPS_BLOB_IDMAP, 4, 4, RDPS_BLOB_NO_PART,
					0, &w);
	if (!ret) {
		ret = rdps_loader_writer_append(w, b->new2old, b->n);
		if (!ret)
			ret = rdps_loader_writer_commit(w, NULL);
		rdps_loader_writer_destroy(w);
	}
	if (ret)
		rdps_pt_fail(b->err, b->errlen, ret, "%s: %s", path, strerror(-ret));
	free(path);
	return ret;
}

static int copy_dicts(struct build *b)
{
	static const char *const names[] = { "entities.dict", "relations.dict" };
	int ret = 0;

	for (size_t i = 0; i < RDPS_ARRAY_SIZE(names) && !ret; i++) {
		char *src = rdps_pt_join(b->o->data_dir, names[i]);
		char *dst = rdps_pt_outdir_path(&b->od, names[i]);

		ret = src && dst ? rdps_pt_copy_file(src, dst, b->err, b->errlen) : -ENOMEM;
		free(src);
		free(dst);
	}
	return ret;
}

static int write_json(struct build *b, double fraction)
{
	char real[PATH_MAX], base[PATH_MAX], hex[17];
	json_t *root, *ranges, *parts, *files;
	char *path;
	int ret = -ENOMEM;

	if (!realpath(b->o->data_dir, real))
		snprintf(real, sizeof(real), "%s", b->o->data_dir);
	snprintf(base, sizeof(base), "%s", real);
	root = json_object();
	ranges = json_array();
	parts = json_array();
	files = json_pack("{s:s, s:s, s:s, s:s, s:s}", "idmap", "idmap.bin",
			  "valid", "valid.trp", "test", "test.trp",
			  "entities", "entities.dict", "relations", "relations.dict");
	if (!root || !ranges || !parts || !files)
		goto err_free;
	for (uint32_t p = 0; p <= b->o->k; p++)
		if (json_array_append_new(ranges, json_integer((json_int_t)b->ranges[p])))
			goto err_free;
	for (uint32_t p = 0; p < b->o->k; p++) {
		char *name = part_file(p);
		json_t *o;

		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)b->part_sum[p]);
		o = name ? json_pack("{s:I, s:s, s:I, s:I, s:I, s:s}", "index", (json_int_t)p,
				     "file", name,
				     "num_entities", (json_int_t)(b->ranges[p + 1] - b->ranges[p]),
				     "num_triples", (json_int_t)b->part_triples[p],
				     "local_triples", (json_int_t)b->part_local[p],
				     "checksum", hex)
			 : NULL;
		free(name);
		if (!o || json_array_append_new(parts, o))
			goto err_free;
	}
	/* The sizes of the split files fingerprint the dataset cheaply, so a
	 * trainer can tell a partition of another dataset. */
	json_int_t split_bytes[RDPS_SPLIT_COUNT] = { 0 };

	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		char fp[PATH_MAX + 32];
		struct stat sst;

		snprintf(fp, sizeof(fp), "%s/%s.txt", real, rdps_dataset_split_name((enum rdps_split)s));
		if (!stat(fp, &sst))
			split_bytes[s] = (json_int_t)sst.st_size;
	}
	if (json_object_set_new(root, "format_version", json_integer(RDPS_PARTITION_FORMAT_VERSION)) ||
	    json_object_set_new(root, "dataset",
				json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", basename(base), "path", real,
					  "train_bytes", split_bytes[0], "valid_bytes", split_bytes[1],
					  "test_bytes", split_bytes[2])) ||
	    json_object_set_new(root, "num_entities", json_integer(b->n)) ||
	    json_object_set_new(root, "num_relations", json_integer(b->nrel)) ||
	    json_object_set_new(root, "num_train", json_integer((json_int_t)b->ntrain)) ||
	    json_object_set_new(root, "num_valid", json_integer((json_int_t)b->nsplit[RDPS_SPLIT_VALID])) ||
	    json_object_set_new(root, "num_test", json_integer((json_int_t)b->nsplit[RDPS_SPLIT_TEST])) ||
	    json_object_set_new(root, "k", json_integer(b->o->k)) ||
	    json_object_set_new(root, "method", json_string(rdps_partition_method_name(b->o->method))) ||
	    json_object_set_new(root, "coarsened_clusters", json_integer(b->clusters)) ||
	    json_object_set_new(root, "seed", json_integer((json_int_t)b->o->seed)) ||
	    json_object_set_new(root, "id_width", json_integer(4)) ||
	    json_object_set_new(root, "triple_owner", json_string("head")) ||
	    json_object_set_new(root, "ranges", ranges) ||
	    json_object_set_new(root, "edge_cut", json_integer((json_int_t)b->cut)) ||
	    json_object_set_new(root, "local_triple_fraction", json_real(fraction)) ||
	    json_object_set_new(root, "partitions", parts) ||
	    json_object_set_new(root, "files", files) ||
	    json_object_set_new(root, "created_by", json_string("rdps " RDPS_VERSION_STRING))) {
		ranges = parts = files = NULL; /* set_new took them even on failure */
		goto err_free;
	}
	ranges = parts = files = NULL;
	path = rdps_pt_outdir_path(&b->od, "partition.json");
	if (!path)
		goto err_free;
	ret = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	if (ret)
		rdps_pt_fail(b->err, b->errlen, ret, "%s: write failed", path);
	free(path);
err_free:
	json_decref(files);
	json_decref(parts);
	json_decref(ranges);
	json_decref(root);
	return ret;
}

int rdps_partition_build(const struct rdps_partition_opts *o,
			 struct rdps_partition_result *res, char *err,
			 size_t errlen)
{
	struct build b = { .o = o, .err = err, .errlen = errlen, .t0 = rdps_now_ns() };
	double fraction;
	int64_t n;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!o->data_dir || !o->out_dir)
		return rdps_pt_fail(err, errlen, -EINVAL, "data and out directories are required");
	if (!rdps_partition_method_name(o->method))
		return rdps_pt_fail(err, errlen, -EINVAL, "field method: unknown method %d",
				    (int)o->method);
	if (o->k == 0)
		return rdps_pt_fail(err, errlen, -EINVAL, "field k: must be at least 1");
	if (o->seed > INT64_MAX)
		return rdps_pt_fail(err, errlen, -EINVAL, "field seed: must be below 2^63");
	ret = rdps_dataset_open(o->data_dir, &b.ds, err, errlen);
	if (ret)
		return ret;
	b.n = rdps_dataset_num_entities(b.ds);
	b.nrel = rdps_dataset_num_relations(b.ds);
	if (o->k > b.n) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "field k: %u parts but %s/entities.dict has only %u entities",
				   o->k, o->data_dir, b.n);
		goto err_close;
	}
	ret = rdps_pt_outdir_begin(&b.od, o->out_dir, o->force, err, errlen);
	if (ret)
		goto err_close;
	b.tpath = rdps_pt_outdir_path(&b.od, ".train.u32");
	b.deg = calloc(b.n, sizeof(uint32_t));
	b.heads = calloc(b.n, sizeof(uint32_t));
	b.part = calloc(b.n, sizeof(uint32_t));
	b.old2new = malloc((size_t)b.n * sizeof(uint32_t));
	b.new2old = malloc((size_t)b.n * sizeof(uint32_t));
	b.ranges = calloc((size_t)o->k + 1, sizeof(uint64_t));
	b.part_triples = calloc(o->k, sizeof(uint64_t));
	b.part_local = calloc(o->k, sizeof(uint64_t));
	b.part_sum = calloc(o->k, sizeof(uint64_t));
	if (!b.tpath || !b.deg || !b.heads || !b.part || !b.old2new || !b.new2old ||
	    !b.ranges || !b.part_triples || !b.part_local || !b.part_sum) {
		ret = -ENOMEM;
		goto err_free;
	}
	b.tf = fopen(b.tpath, "w+");
	if (!b.tf) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", b.tpath, strerror(errno));
		goto err_free;
	}
	setvbuf(b.tf, NULL, _IOFBF, 1 << 20);
	rdps_info("partition: reading %s/train.txt (%u entities, %u relations)",
		  o->data_dir, b.n, b.nrel);
	n = rdps_dataset_scan(b.ds, RDPS_SPLIT_TRAIN, train_batch, &b, err, errlen);
	if (n < 0) {
		ret = (int)n;
		goto err_free;
	}
	if (fflush(b.tf)) {
		ret = rdps_pt_fail(err, errlen, -errno, "%s: %s", b.tpath, strerror(errno));
		goto err_free;
	}
	if (!b.ntrain) {
		ret = rdps_pt_fail(err, errlen, -EINVAL, "%s/train.txt: no triples",
				   o->data_dir);
		goto err_free;
	}
	rdps_info("partition: %llu train triples read (%.1f s)",
		  (unsigned long long)b.ntrain, secs(&b));
	/* Check valid/test before the expensive step, then drop the names. */
	ret = stash_splits(&b);
	if (ret)
		goto err_free;
	rdps_dataset_close(b.ds);
	b.ds = NULL;
	if (o->k == 1)
		ret = 0; /* everything in part 0 (b.part is zeroed) */
	else if (o->method == RDPS_PARTITION_METIS)
		ret = partition_metis(&b);
	else
		ret = partition_random(&b);
	free(b.deg);
	b.deg = NULL;
	free(b.heads);
	b.heads = NULL;
	if (ret)
		goto err_free;
	ret = relabel(&b);
	if (ret)
		goto err_free;
	ret = write_parts(&b);
	if (ret)
		goto err_free;
	fclose(b.tf);
	b.tf = NULL;
	unlink(b.tpath);
	rdps_info("partition: writing valid/test and id map (%.1f s)", secs(&b));
	ret = write_split(&b, RDPS_SPLIT_VALID, "valid.trp");
	if (!ret)
		ret = write_split(&b, RDPS_SPLIT_TEST, "test.trp");
	for (int s = RDPS_SPLIT_VALID; !ret && s <= RDPS_SPLIT_TEST; s++) {
		fclose(b.sf[s]);
		b.sf[s] = NULL;
		unlink(b.spath[s]);
	}
	if (!ret)
		ret = write_idmap(&b);
	if (!ret)
		ret = copy_dicts(&b);
	if (ret)
		goto err_free;
	fraction = (double)b.local / (double)b.ntrain;
	ret = write_json(&b, fraction);
	if (ret)
		goto err_free;
	ret = rdps_pt_outdir_commit(&b.od, err, errlen);
	if (ret)
		goto err_free;

	res->num_entities = b.n;
	res->num_train = b.ntrain;
	res->local_triples = b.local;
	res->local_triple_fraction = fraction;
	res->edge_cut = b.cut;
	for (uint32_t p = 0; p < o->k; p++) {
		if (b.part_triples[p] > res->max_part_triples)
			res->max_part_triples = b.part_triples[p];
		if (b.ranges[p + 1] - b.ranges[p] > res->max_part_entities)
			res->max_part_entities = b.ranges[p + 1] - b.ranges[p];
	}
	res->seconds = secs(&b);
	res->peak_rss_kib = peak_rss_kib();
	res->pre_metis_rss_kib = b.pre_metis_rss_kib;
	res->clusters = b.clusters;
	ret = 0;

err_free:
	if (b.tf)
		fclose(b.tf);
	free(b.tpath);
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++) {
		if (b.sf[s])
			fclose(b.sf[s]);
		free(b.spath[s]);
	}
	free(b.deg);
	free(b.heads);
	free(b.part);
	free(b.old2new);
	free(b.new2old);
	free(b.ranges);
	free(b.part_triples);
	free(b.part_local);
	free(b.part_sum);
	rdps_pt_outdir_end(&b.od);
err_close:
	rdps_dataset_close(b.ds);
	return ret;
}
