// SPDX-License-Identifier: MIT
/* rdps eval: DGL-KE's dglke_eval on the embeddings of a save path. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "infer.h"
#include "rdps/common.h"
#include "rdps/kvstore.h"
#include "rdps/saved.h"
#include "rdps/trainer.h"

#define CAND_CHUNK 65536u   /* candidate rows per add_candidates call */
#define PROGRESS_NS 5000000000ull

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps eval --model_path DIR [--data DIR | --data_path DIR [--dataset NAME]] [options]\n"
"\n"
"DGL-KE's dglke_eval: ranks the test triples with the embeddings saved in DIR (by rdps\n"
"train --save_path, or by dglke_train) and prints the lines rdps train --test prints\n"
"(\"Test average MRR : ...\", MR, HITS@1, HITS@3, HITS@10): both the head and the tail of\n"
"each test triple are ranked against every entity, skipping every known triple (train,\n"
"valid and test: DGL-KE's filter); a candidate scoring equal to the true entity ranks\n"
"above it, as in DGL-KE. On a standalone job's save path the numbers are those the job\n"
"printed, digit for digit (the same kernels over the same float32 rows).\n"
"\n"
"save path (model defaults from DIR/config.json):\n"
"  --model_path DIR           config.json, <dataset>_<model>_{entity,relation}.npy and,\n"
"                             if there, entities.dict / relations.dict\n"
"  --model_name NAME          %s\n"
"  --hidden_dim N             embedding size\n"
"  -g, --gamma F              margin\n"
"  -de, --double_ent          DGL-KE's flags: checked against config.json's double_ent /\n"
"  -dr, --double_rel          double_rel (the .npy widths say what the model was)\n"
"data (default: config.json's data_path):\n"
"  --data DIR                 rdps' (and DGL-KE's built-in) layout: train.txt, valid.txt,\n"
"                             test.txt of names, with entities.dict / relations.dict\n"
"  --data_path DIR            DGL-KE's spelling: DIR/NAME with --dataset NAME, else DIR\n"
"  --dataset NAME             see --data_path\n"
"  --format F                 built_in (default: the layout above), raw_udd_ORDER (files\n"
"                             of names) or udd_ORDER (files of ids); ORDER is the column\n"
"                             order, a permutation of hrt (raw_udd_hrt, udd_htr, ...)\n"
"  --data_files FILE...       raw_udd: train valid test; udd: entities relations train\n"
"                             valid test (relative to the data directory); names of a\n"
"                             raw_udd file are looked up in the save path's dicts\n"
"  --delimiter C              field separator of those files (default: tab)\n"
"evaluation:\n"
"  --neg_sample_size_eval N   rank against N entities drawn uniformly (without\n"
"                             replacement) per group of --batch_size_eval test triples\n"
"                             and side, as DGL-KE; default (or -1): every entity\n"
"  --batch_size_eval N        test triples sharing one draw (default 8); with all\n"
"                             entities it changes nothing\n"
"  --eval_percent F           rank a seeded random F of the test triples (default 1)\n"
"  --no_eval_filter           raw ranking: skip only the true entity\n"
"  --seed N                   seed of --eval_percent and --neg_sample_size_eval (default 0)\n"
"  --num_proc N, --num_thread N   threads: N_proc x N_thread (default 1 x 1)\n"
"  -h, --help                 this text\n"
"\n"
"DGL-KE's --gpu and --mix_cpu_gpu are refused (rdps ranks on CPUs), as is\n"
"--neg_deg_sample_eval (negatives are drawn uniformly).\n",
		rdps_model_names());
}

static int num(const char *flag, const char *arg, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(arg, &end);
	if (errno || *end || end == arg || *out < lo || *out > hi) {
		fprintf(stderr, "rdps eval: %s '%s' is not a number in [%g, %g]\n", flag, arg, lo,
			hi);
		return -1;
	}
	return 0;
}

static bool is_dir_with(const char *dir, const char *file)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return stat(p, &st) == 0;
}

/* "a/b" or b alone when absolute or a is NULL. */
static char *join(const char *a, const char *b)
{
	char *p;

	if (!a || b[0] == '/')
		return strdup(b);
	return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/* ---------------------------------------------------------------------- */
/* Filter index for sampled evaluation: the filter triples sorted by (h, r)
 * and by (r, t), so a group's queries find theirs without a pass over all. */

struct fidx {
	struct rdps_triple *hr; /* sorted by h, r */
	struct rdps_triple *rt; /* sorted by r, t */
	size_t n;
};

static int cmp_hr(const void *a, const void *b)
{
	const struct rdps_triple *x = a, *y = b;

	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->r < y->r ? -1 : x->r > y->r;
}

static int cmp_rt(const void *a, const void *b)
{
	const struct rdps_triple *x = a, *y = b;

	if (x->r != y->r)
		return x->r < y->r ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* First index in a (sorted by cmp) not below key. */
static size_t lower(const struct rdps_triple *a, size_t n, const struct rdps_triple *key,
		    int (*cmp)(const void *, const void *))
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp(&a[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---------------------------------------------------------------------- */

struct job {
	const struct rdps_saved *s;
	const struct rdps_triple_set *filter; /* NULL: raw ranking */
	const struct fidx *fi;                /* sampled: the filter's index */
	const struct rdps_triple *test;       /* the ranked triples */
	size_t n_test;
	unsigned threads;
	uint32_t neg;                         /* sampled: entities per draw */
	uint32_t group;                       /* sampled: triples per draw */
	uint64_t seed;
	/* sampled: every query's counts, tail queries then head queries (the
	 * full evaluator's order); workers take groups in turn */
	uint32_t *gt, *eq;
	size_t n_groups;
	size_t next;
	int ret;
	char err[256];
	pthread_mutex_t lock;
};

static void rows_of(const struct rdps_saved *s, const struct rdps_triple *t, size_t n, float *h,
		    float *r, float *tl)
{
	const struct rdps_model *m = rdps_saved_model(s);
	size_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	const float *ent = rdps_saved_entity_rows(s), *rel = rdps_saved_relation_rows(s);

	for (size_t i = 0; i < n; i++) {
		memcpy(h + i * ed, ent + (size_t)t[i].h * ed, ed * sizeof(float));
		memcpy(tl + i * ed, ent + (size_t)t[i].t * ed, ed * sizeof(float));
		memcpy(r + i * rd, rel + (size_t)t[i].r * rd, rd * sizeof(float));
	}
}

/* Every entity is a candidate: one evaluator over all test triples (the
 * trainer's own arithmetic and summation order). */
static int eval_all(struct job *j, struct rdps_eval_sums *sums)
{
	const struct rdps_model *m = rdps_saved_model(j->s);
	size_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	uint32_t n_ent = rdps_saved_num_entities(j->s);
	struct rdps_eval_params ep = {
		.model = m, .test = j->test, .n_test = j->n_test, .filter = j->filter,
		.n_entities = n_ent, .num_threads = j->threads,
		.ties = RDPS_EVAL_TIES_PESSIMISTIC, /* DGL-KE: score >= true */
		.sides = RDPS_EVAL_BOTH,
	};
	float *h = malloc(j->n_test * ed * sizeof(float));
	float *t = malloc(j->n_test * ed * sizeof(float));
	float *r = malloc(j->n_test * rd * sizeof(float));
	struct rdps_eval *ev = NULL;
	uint64_t t0 = rdps_now_ns(), last = t0;
	int ret = -ENOMEM;

	if (!h || !t || !r)
		goto out;
	ret = rdps_eval_create(&ev, &ep);
	if (ret)
		goto out;
	rows_of(j->s, j->test, j->n_test, h, r, t);
	ret = rdps_eval_set_rows(ev, h, r, t);
	for (uint32_t c = 0; !ret && c < n_ent; c += CAND_CHUNK) {
		uint32_t cnt = n_ent - c < CAND_CHUNK ? n_ent - c : CAND_CHUNK;
		uint64_t now;

		ret = rdps_eval_add_candidates(ev, c, rdps_saved_entity_rows(j->s) + (size_t)c * ed,
					       cnt);
		now = rdps_now_ns();
		if (now - last >= PROGRESS_NS && c + cnt < n_ent) {
			rdps_info("eval: %u of %u candidate entities (%.0f%%), %.0f s", c + cnt,
				  n_ent, 100.0 * (c + cnt) / n_ent, (now - t0) / 1e9);
			last = now;
		}
	}
	if (!ret)
		rdps_eval_get_sums(ev, sums);
out:
	rdps_eval_destroy(ev);
	free(h);
	free(t);
	free(r);
	return ret;
}

/* splitmix64: the sampler's generator (seeded per group and side, so the
 * draws do not depend on the number of threads). */
static uint64_t next_u64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* k distinct ids of 0..n-1, uniformly (Floyd's algorithm), sorted; seen is
 * an n-bit map, left clear. */
static void draw(uint64_t *rng, uint32_t n, uint32_t k, uint32_t *out, uint8_t *seen)
{
	for (uint32_t i = n - k, c = 0; i < n; i++, c++) {
		uint32_t v = (uint32_t)(next_u64(rng) % ((uint64_t)i + 1));

		if (seen[v >> 3] & (1u << (v & 7)))
			v = i;
		seen[v >> 3] |= (uint8_t)(1u << (v & 7));
		out[c] = v;
	}
	for (uint32_t c = 0; c < k; c++)
		seen[out[c] >> 3] &= (uint8_t)~(1u << (out[c] & 7));
	qsort(out, k, sizeof(*out), cmp_u32);
}

/* One group's side: an evaluator with only the filter triples its queries
 * need, fed the drawn entities as runs of consecutive ids. */
static int eval_group(struct job *j, size_t g, unsigned side, uint32_t *ids, uint8_t *seen,
		      float *h, float *r, float *t, struct rdps_triple_set **fset)
{
	const struct rdps_model *m = rdps_saved_model(j->s);
	size_t ed = rdps_model_entity_dim(m);
	uint32_t n_ent = rdps_saved_num_entities(j->s);
	size_t first = g * j->group;
	size_t n = j->n_test - first < j->group ? j->n_test - first : j->group;
	const struct rdps_triple *test = j->test + first;
	uint64_t rng = j->seed ^ (0x5851f42d4c957f2dull * (2 * g + (side == RDPS_EVAL_HEAD) + 1));
	uint32_t k = j->neg < n_ent ? j->neg : n_ent;
	struct rdps_eval *ev = NULL;
	int ret = 0;

	if (j->filter) {
		rdps_triple_set_destroy(*fset);
		*fset = NULL;
		ret = rdps_triple_set_create(fset, 64);
		for (size_t i = 0; !ret && i < n; i++) {
			struct rdps_triple key = test[i];
			const struct rdps_triple *a = side == RDPS_EVAL_TAIL ? j->fi->hr : j->fi->rt;
			int (*cmp)(const void *, const void *) = side == RDPS_EVAL_TAIL ? cmp_hr : cmp_rt;
			size_t lo, hi;

			lo = lower(a, j->fi->n, &key, cmp);
			for (hi = lo; hi < j->fi->n && !cmp(&a[hi], &key); hi++)
				;
			if (hi > lo) {
				long added = rdps_triple_set_add(*fset, a + lo, hi - lo);

				ret = added < 0 ? (int)added : 0;
			}
		}
		if (ret)
			return ret;
	}
	{
		struct rdps_eval_params ep = {
			.model = m, .test = test, .n_test = n, .filter = j->filter ? *fset : NULL,
			.n_entities = n_ent, .num_threads = 1,
			.ties = RDPS_EVAL_TIES_PESSIMISTIC, .sides = side,
		};

		ret = rdps_eval_create(&ev, &ep);
	}
	if (ret)
		return ret;
	rows_of(j->s, test, n, h, r, t);
	ret = rdps_eval_set_rows(ev, h, r, t);
	if (!ret)
		draw(&rng, n_ent, k, ids, seen);
	for (uint32_t a = 0; !ret && a < k;) {
		uint32_t b = a + 1;

		while (b < k && ids[b] == ids[b - 1] + 1)
			b++;
		ret = rdps_eval_add_candidates(ev, ids[a],
					       rdps_saved_entity_rows(j->s) + (size_t)ids[a] * ed,
					       b - a);
		a = b;
	}
	if (!ret)
		rdps_eval_get_counts(ev, j->gt + (side == RDPS_EVAL_HEAD ? j->n_test : 0) + first,
				     j->eq + (side == RDPS_EVAL_HEAD ? j->n_test : 0) + first);
	rdps_eval_destroy(ev);
	return ret;
}

static void *sampled_worker(void *arg)
{
	struct job *j = arg;
	const struct rdps_model *m = rdps_saved_model(j->s);
	size_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	uint32_t n_ent = rdps_saved_num_entities(j->s);
	uint32_t *ids = malloc((size_t)(j->neg < n_ent ? j->neg : n_ent) * sizeof(uint32_t));
	uint8_t *seen = calloc((size_t)n_ent / 8 + 1, 1);
	float *h = malloc((size_t)j->group * ed * sizeof(float));
	float *t = malloc((size_t)j->group * ed * sizeof(float));
	float *r = malloc((size_t)j->group * rd * sizeof(float));
	struct rdps_triple_set *fset = NULL;
	int ret = (!ids || !seen || !h || !t || !r) ? -ENOMEM : 0;

	for (;;) {
		size_t g;

		pthread_mutex_lock(&j->lock);
		if (ret && !j->ret) {
			j->ret = ret;
			snprintf(j->err, sizeof(j->err), "ranking a group of test triples: %s",
				 rdps_strerror(ret));
		}
		g = j->ret ? j->n_groups : j->next++;
		pthread_mutex_unlock(&j->lock);
		if (g >= j->n_groups)
			break;
		ret = eval_group(j, g, RDPS_EVAL_TAIL, ids, seen, h, r, t, &fset);
		if (!ret)
			ret = eval_group(j, g, RDPS_EVAL_HEAD, ids, seen, h, r, t, &fset);
	}
	rdps_triple_set_destroy(fset);
	free(ids);
	free(seen);
	free(h);
	free(t);
	free(r);
	return NULL;
}

/* Sampled negatives: groups of test triples in parallel; their counts go
 * into one evaluator over every test triple, whose sums then add up the
 * queries in the full evaluation's order (drawing every entity gives the
 * full evaluation's numbers, digit for digit, whatever the threads). */
static int eval_sampled(struct job *j, const struct rdps_triple *all, size_t n_all,
			struct rdps_eval_sums *sums)
{
	struct fidx fi = { 0 };
	struct rdps_eval_params ep = {
		.model = rdps_saved_model(j->s), .test = j->test, .n_test = j->n_test,
		.n_entities = rdps_saved_num_entities(j->s), .num_threads = 1,
		.ties = RDPS_EVAL_TIES_PESSIMISTIC, .sides = RDPS_EVAL_BOTH,
	};
	struct rdps_eval *ev = NULL;
	pthread_t tids[64];
	unsigned nt = j->threads < 64 ? j->threads : 64, started = 0;
	int ret = -ENOMEM;

	j->n_groups = (j->n_test + j->group - 1) / j->group;
	j->gt = calloc(2 * j->n_test, sizeof(*j->gt));
	j->eq = calloc(2 * j->n_test, sizeof(*j->eq));
	if (!j->gt || !j->eq)
		goto out;
	if (j->filter) {
		fi.n = n_all;
		fi.hr = malloc(n_all * sizeof(*fi.hr));
		fi.rt = malloc(n_all * sizeof(*fi.rt));
		if (!fi.hr || !fi.rt)
			goto out;
		memcpy(fi.hr, all, n_all * sizeof(*all));
		memcpy(fi.rt, all, n_all * sizeof(*all));
		qsort(fi.hr, n_all, sizeof(*fi.hr), cmp_hr);
		qsort(fi.rt, n_all, sizeof(*fi.rt), cmp_rt);
		j->fi = &fi;
	}
	pthread_mutex_init(&j->lock, NULL);
	for (unsigned i = 1; i < nt; i++) {
		if (pthread_create(&tids[i], NULL, sampled_worker, j))
			break; /* the threads started (and this one) do the rest */
		started = i;
	}
	sampled_worker(j);
	for (unsigned i = 1; i <= started; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&j->lock);
	ret = j->ret;
	if (!ret)
		ret = rdps_eval_create(&ev, &ep);
	if (!ret)
		ret = rdps_eval_add_counts(ev, j->gt, j->eq);
	if (!ret)
		rdps_eval_get_sums(ev, sums);
	rdps_eval_destroy(ev);
out:
	free(fi.hr);
	free(fi.rt);
	free(j->gt);
	free(j->eq);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* The data: three splits of triples. */

struct data_opts {
	const char *dir;         /* data directory, or NULL */
	const char *format;      /* built_in, raw_udd_ORDER, udd_ORDER */
	const char *files[INFER_MAX_FILES];
	int nfiles;
	char delim;
};

static int load_splits(const struct data_opts *d, const struct rdps_saved *s,
		       struct rdps_triple *split[3], size_t n[3], char *err, size_t errlen)
{
	static const char *const names[3] = { "train.txt", "valid.txt", "test.txt" };
	struct rdps_idmap *own[2] = { NULL, NULL };
	struct rdps_triple_file tf = {
		.delim = d->delim, .num_entities = rdps_saved_num_entities(s),
		.num_relations = rdps_saved_num_relations(s),
	};
	char *paths[3] = { NULL, NULL, NULL };
	bool names_in = true, built_in = !strcmp(d->format, "built_in");
	int ret = 0;

	if (built_in) {
		if (!d->dir) {
			snprintf(err, errlen, "no data: give --data DIR (%s/config.json has no "
				 "data_path)", rdps_saved_dir(s));
			return -EINVAL;
		}
		tf.delim = '\t';
		for (int k = 0; k < 3; k++)
			paths[k] = join(d->dir, names[k]);
	} else {
		const char *order;
		int first;

		if (!strncmp(d->format, "raw_udd_", 8)) {
			order = d->format + 8;
			first = 0;
		} else if (!strncmp(d->format, "udd_", 4)) {
			order = d->format + 4;
			first = 2;
			names_in = false;
		} else {
			snprintf(err, errlen, "--format '%s' is not built_in, raw_udd_{hrt,htr,...} or "
				 "udd_{hrt,htr,...}", d->format);
			return -EINVAL;
		}
		if (strlen(order) != 3 || !strchr(order, 'h') || !strchr(order, 'r') ||
		    !strchr(order, 't')) {
			snprintf(err, errlen, "--format '%s': '%s' is not a column order (a permutation "
				 "of hrt)", d->format, order);
			return -EINVAL;
		}
		if (d->nfiles != first + 3) {
			snprintf(err, errlen, "--format %s needs --data_files %strain valid test for "
				 "evaluation (%d given)", d->format,
				 first ? "entities relations " : "", d->nfiles);
			return -EINVAL;
		}
		tf.order = order;
		for (int k = 0; k < 3; k++)
			paths[k] = join(d->dir, d->files[first + k]);
		/* udd's own id files must agree with the tables */
		for (int k = 0; !names_in && k < 2; k++) {
			char *p = join(d->dir, d->files[k]);
			uint32_t rows = k ? rdps_saved_num_relations(s) : rdps_saved_num_entities(s);

			ret = p ? rdps_idmap_load(p, d->delim, &own[k], err, errlen) : -ENOMEM;
			if (!ret && rdps_idmap_count(own[k]) != rows) {
				snprintf(err, errlen, "%s has %u %s but the saved table has %u rows", p,
					 rdps_idmap_count(own[k]), k ? "relations" : "entities", rows);
				ret = -EINVAL;
			}
			free(p);
			rdps_idmap_destroy(own[k]);
			own[k] = NULL;
			if (ret)
				goto out;
		}
	}
	if (!paths[0] || !paths[1] || !paths[2]) {
		ret = -ENOMEM;
		goto out;
	}
	if (names_in) {
		/* names map through the save path's dicts (the rows' order), or
		 * the data's own when the save path has none (DGL-KE's) */
		tf.ent = rdps_saved_entities(s);
		tf.rel = rdps_saved_relations(s);
		for (int k = 0; k < 2; k++) {
			const char *f = k ? "relations.dict" : "entities.dict";
			uint32_t rows = k ? rdps_saved_num_relations(s) : rdps_saved_num_entities(s);
			char *p;

			if (k ? tf.rel : tf.ent)
				continue;
			if (!d->dir || !is_dir_with(d->dir, f)) {
				snprintf(err, errlen, "names need a map: neither %s nor the data "
					 "directory has %s", rdps_saved_dir(s), f);
				ret = -ENOENT;
				goto out;
			}
			p = join(d->dir, f);
			ret = p ? rdps_idmap_load(p, '\t', &own[k], err, errlen) : -ENOMEM;
			if (!ret && rdps_idmap_count(own[k]) != rows) {
				snprintf(err, errlen, "%s has %u names but the saved table has %u rows",
					 p, rdps_idmap_count(own[k]), rows);
				ret = -EINVAL;
			}
			free(p);
			if (ret)
				goto out;
			if (k)
				tf.rel = own[k];
			else
				tf.ent = own[k];
		}
	}
	for (int k = 0; k < 3; k++) {
		struct stat st;
		long got;

		if (k == 1 && built_in && stat(paths[k], &st)) {
			rdps_warn("eval: no %s: the filter holds train and test only", paths[k]);
			continue;
		}
		got = rdps_triple_file_read(paths[k], &tf, &split[k], &n[k], err, errlen);
		if (got < 0) {
			ret = (int)got;
			goto out;
		}
	}
out:
	rdps_idmap_destroy(own[0]);
	rdps_idmap_destroy(own[1]);
	for (int k = 0; k < 3; k++)
		free(paths[k]);
	return ret;
}

/* The data directory: --data; --data_path (with --dataset appended for the
 * built-in layout, as DGL-KE; its udd files are relative to data_path); or
 * config.json's data_path (itself, or with the dataset name, whichever has
 * the files). */
static char *data_dir(const char *data, const char *data_path, const char *dataset,
		      bool built_in, const struct rdps_saved *s)
{
	const char *cfg = rdps_saved_data_path(s);
	char *p;

	if (data)
		return strdup(data);
	if (data_path)
		return dataset && built_in ? join(data_path, dataset) : strdup(data_path);
	if (!cfg)
		return NULL;
	if (is_dir_with(cfg, "test.txt") || !dataset)
		return strdup(cfg);
	p = join(cfg, dataset);
	return p;
}

int rdps_cmd_eval(int argc, char **argv)
{
	enum { O_MODEL_PATH = 256, O_DATA, O_DATA_PATH, O_DATASET, O_FORMAT, O_FILES, O_DELIM,
	       O_MODEL, O_DIM, O_GAMMA, O_DE, O_DR, O_BATCH, O_NEG, O_PCT, O_NOFILTER, O_SEED,
	       O_NPROC, O_NTHREAD, O_GPU, O_MIX, O_DEG, O_HELP };
	static const struct option opts[] = {
		{ "model_path", required_argument, NULL, O_MODEL_PATH },
		{ "data", required_argument, NULL, O_DATA },
		{ "data_path", required_argument, NULL, O_DATA_PATH },
		{ "dataset", required_argument, NULL, O_DATASET },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "data_files", required_argument, NULL, O_FILES },
		{ "delimiter", required_argument, NULL, O_DELIM },
		{ "model_name", required_argument, NULL, O_MODEL },
		{ "hidden_dim", required_argument, NULL, O_DIM },
		{ "g", required_argument, NULL, O_GAMMA },
		{ "gamma", required_argument, NULL, O_GAMMA },
		{ "de", no_argument, NULL, O_DE },
		{ "double_ent", no_argument, NULL, O_DE },
		{ "dr", no_argument, NULL, O_DR },
		{ "double_rel", no_argument, NULL, O_DR },
		{ "batch_size_eval", required_argument, NULL, O_BATCH },
		{ "neg_sample_size_eval", required_argument, NULL, O_NEG },
		{ "eval_percent", required_argument, NULL, O_PCT },
		{ "no_eval_filter", no_argument, NULL, O_NOFILTER },
		{ "seed", required_argument, NULL, O_SEED },
		{ "num_proc", required_argument, NULL, O_NPROC },
		{ "num_thread", required_argument, NULL, O_NTHREAD },
		{ "gpu", required_argument, NULL, O_GPU },
		{ "mix_cpu_gpu", no_argument, NULL, O_MIX },
		{ "neg_deg_sample_eval", no_argument, NULL, O_DEG },
		{ "help", no_argument, NULL, O_HELP },
		{ "h", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct rdps_saved_opts so = { 0 };
	struct data_opts d = { .format = "built_in", .delim = '\t' };
	const char *model_path = NULL, *data = NULL, *data_path = NULL, *dataset = NULL;
	struct rdps_triple *split[3] = { NULL, NULL, NULL }, *test = NULL;
	size_t n[3] = { 0, 0, 0 }, n_test;
	struct rdps_triple_set *filter = NULL;
	struct rdps_saved *s = NULL;
	struct rdps_eval_sums sums;
	struct rdps_eval_metrics m;
	bool de = false, dr = false, no_filter = false;
	double v, pct = 1.0;
	long neg = -1;
	uint32_t batch = 8, nproc = 1, nthread = 1;
	uint64_t seed = 0, t0;
	char err[1024], out[512], *dir = NULL;
	int opt, ret, rc = 1;

	optind = 1;
	while ((opt = getopt_long_only(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case O_MODEL_PATH: model_path = optarg; break;
		case O_DATA: data = optarg; break;
		case O_DATA_PATH: data_path = optarg; break;
		case O_DATASET: dataset = optarg; break;
		case O_FORMAT: d.format = optarg; break;
		case O_FILES:
			d.nfiles = infer_nargs("eval", argc, argv, d.files);
			if (d.nfiles < 0)
				return 2;
			break;
		case O_DELIM:
			if (!strcmp(optarg, "\\t") || !strcmp(optarg, "\t"))
				d.delim = '\t';
			else if (strlen(optarg) == 1)
				d.delim = optarg[0];
			else {
				fprintf(stderr, "rdps eval: --delimiter must be one character\n");
				return 2;
			}
			break;
		case O_MODEL: so.model_name = optarg; break;
		case O_DIM: if (num("--hidden_dim", optarg, 1, RDPS_MAX_DIM, &v)) return 2; so.hidden_dim = (uint32_t)v; break;
		case O_GAMMA: if (num("--gamma", optarg, -1e9, 1e9, &v)) return 2; so.set_gamma = true; so.gamma = (float)v; break;
		case O_DE: de = true; break;
		case O_DR: dr = true; break;
		case O_BATCH: if (num("--batch_size_eval", optarg, 1, 1 << 24, &v)) return 2; batch = (uint32_t)v; break;
		case O_NEG: if (num("--neg_sample_size_eval", optarg, -1, UINT32_MAX, &v)) return 2; neg = (long)v; break;
		case O_PCT: if (num("--eval_percent", optarg, 1e-9, 1, &v)) return 2; pct = v; break;
		case O_NOFILTER: no_filter = true; break;
		case O_SEED: if (num("--seed", optarg, 0, 9e18, &v)) return 2; seed = (uint64_t)v; break;
		case O_NPROC: if (num("--num_proc", optarg, 1, 64, &v)) return 2; nproc = (uint32_t)v; break;
		case O_NTHREAD: if (num("--num_thread", optarg, 1, 64, &v)) return 2; nthread = (uint32_t)v; break;
		case O_GPU:
			if (strcmp(optarg, "-1")) {
				fprintf(stderr, "rdps eval: --gpu %s: rdps evaluates on CPUs (use "
					"--num_proc / --num_thread for more of them)\n", optarg);
				return 2;
			}
			break;
		case O_MIX:
			fprintf(stderr, "rdps eval: --mix_cpu_gpu: rdps evaluates on CPUs only\n");
			return 2;
		case O_DEG:
			fprintf(stderr, "rdps eval: --neg_deg_sample_eval is not supported: negatives "
				"are drawn uniformly (and DGL-KE allows it only with "
				"--no_eval_filter)\n");
			return 2;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps eval: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!model_path) {
		fprintf(stderr, "rdps eval: --model_path DIR is required (a save path)\n");
		return 2;
	}
	if (data && data_path) {
		fprintf(stderr, "rdps eval: give --data or --data_path, not both\n");
		return 2;
	}
	if (neg == 0) {
		fprintf(stderr, "rdps eval: --neg_sample_size_eval must be positive (or -1: all)\n");
		return 2;
	}
	t0 = rdps_now_ns();
	ret = rdps_saved_open(model_path, &so, &s, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps eval: %s\n", err);
		return 1;
	}
	if ((de && !rdps_saved_double_ent(s)) || (dr && !rdps_saved_double_rel(s))) {
		fprintf(stderr, "rdps eval: %s was given but %s/config.json says %s false (the "
			"saved tables are what training made)\n", de && !rdps_saved_double_ent(s)
			? "-de" : "-dr", model_path, de && !rdps_saved_double_ent(s)
			? "double_ent" : "double_rel");
		goto out;
	}
	if (!dataset && !data && !data_path)
		dataset = rdps_saved_dataset(s);
	dir = data_dir(data, data_path, dataset, !strcmp(d.format, "built_in"), s);
	d.dir = dir;
	ret = load_splits(&d, s, split, n, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps eval: %s\n", err);
		goto out;
	}
	if (!n[2]) {
		fprintf(stderr, "rdps eval: the test file has no triples\n");
		goto out;
	}
	/* --eval_percent: a seeded random subset, kept in file order */
	n_test = pct >= 1 ? n[2] : (size_t)((double)n[2] * pct);
	if (!n_test) {
		fprintf(stderr, "rdps eval: --eval_percent %g of %zu test triples is none\n", pct,
			n[2]);
		goto out;
	}
	test = split[2];
	if (n_test < n[2]) {
		uint32_t *idx = malloc(n[2] * sizeof(*idx));
		uint64_t rng = seed;

		test = malloc(n_test * sizeof(*test));
		if (!idx || !test) {
			free(idx);
			fprintf(stderr, "rdps eval: out of memory\n");
			goto out;
		}
		for (size_t i = 0; i < n[2]; i++)
			idx[i] = (uint32_t)i;
		for (size_t i = 0; i < n_test; i++) {
			size_t k = i + next_u64(&rng) % (n[2] - i);
			uint32_t x = idx[i];

			idx[i] = idx[k];
			idx[k] = x;
		}
		qsort(idx, n_test, sizeof(*idx), cmp_u32);
		for (size_t i = 0; i < n_test; i++)
			test[i] = split[2][idx[i]];
		free(idx);
	}
	if (!no_filter) {
		ret = rdps_triple_set_create(&filter, n[0] + n[1] + n[2]);
		for (int k = 0; !ret && k < 3; k++) {
			long a = rdps_triple_set_add(filter, split[k], n[k]);

			ret = a < 0 ? (int)a : 0;
		}
		if (ret) {
			fprintf(stderr, "rdps eval: building the filter: %s\n", rdps_strerror(ret));
			goto out;
		}
	}
	{
		struct job j = {
			.s = s, .filter = filter, .test = test, .n_test = n_test,
			.threads = nproc * nthread > 64 ? 64 : nproc * nthread, .seed = seed,
			.neg = neg > 0 ? (uint32_t)neg : 0, .group = batch,
		};

		rdps_info("eval: %s, %zu test triples (%zu queries), %s, filter of %zu triples",
			  rdps_model_name(rdps_saved_model(s)), n_test, 2 * n_test,
			  neg > 0 ? "sampled negatives" : "every entity a candidate",
			  filter ? rdps_triple_set_count(filter) : (size_t)0);
		if (neg > 0) {
			struct rdps_triple *all = NULL;
			size_t n_all = 0;

			if (filter) {
				all = (struct rdps_triple *)rdps_triple_set_items(filter);
				n_all = rdps_triple_set_count(filter);
			}
			ret = eval_sampled(&j, all, n_all, &sums);
			if (ret && j.err[0])
				snprintf(err, sizeof(err), "%s", j.err);
		} else {
			ret = eval_all(&j, &sums);
		}
		if (ret) {
			if (!j.err[0])
				snprintf(err, sizeof(err), "ranking: %s", rdps_strerror(ret));
			fprintf(stderr, "rdps eval: %s\n", err);
			goto out;
		}
	}
	rdps_eval_metrics_from_sums(&sums, &m);
	rdps_eval_format(out, sizeof(out), "Test", &m);
	fputs(out, stdout);
	printf("Test takes %.3f seconds\n", (rdps_now_ns() - t0) / 1e9);
	rc = 0;
out:
	if (test != split[2])
		free(test);
	for (int k = 0; k < 3; k++)
		free(split[k]);
	rdps_triple_set_destroy(filter);
	rdps_saved_close(s);
	free(dir);
	return rc;
}
