// SPDX-License-Identifier: MIT
/* Reader of the raw dataset layout (see rdps/dataset.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

#define SCAN_BATCH 4096

static const char *const split_names[RDPS_SPLIT_COUNT] = { "train", "valid", "test" };
static const char *const triple_fields[3] = { "head", "relation", "tail" };

struct rdps_dataset {
	char *dir;
	struct rdps_pt_names ent;   /* id == entities.dict id */
	struct rdps_pt_names rel;   /* id == relations.dict id */
	uint8_t *ent_in_train;      /* bitmap, NULL until train was scanned */
	uint8_t *rel_in_train;
};

const char *rdps_dataset_split_name(enum rdps_split split)
{
	return (unsigned)split < RDPS_SPLIT_COUNT ? split_names[split] : NULL;
}

void rdps_dataset_triples_free(struct rdps_triples *t)
{
	if (!t)
		return;
	free(t->ids);
	t->ids = NULL;
	t->count = 0;
}

struct dict_entry {
	uint64_t id;
	uint64_t off;   /* name offset in a scratch arena */
	uint64_t line;
};

static int cmp_dict_entry(const void *a, const void *b)
{
	const struct dict_entry *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Reads a dict file into t so that t's id equals the file's id. */
static int read_dict(const char *path, const char *what, struct rdps_pt_names *t,
		     char *err, size_t errlen)
{
	static const char *const fields[2] = { "id", "name" };
	struct rdps_pt_lines lr;
	struct dict_entry *ents = NULL;
	size_t nents = 0, cap = 0, acap = 0, alen = 0;
	char *arena = NULL;
	long len;
	int ret;

	ret = rdps_pt_lines_open(&lr, path, err, errlen);
	if (ret)
		return ret;
	while ((len = rdps_pt_lines_next(&lr)) >= 0) {
		char *f[2], *end;
		size_t fl[2];
		unsigned long long id;

		ret = rdps_pt_split_fields(&lr, lr.line, len, 2, f, fl, fields, err, errlen);
		if (ret)
			goto err_free;
		errno = 0;
		id = strtoull(f[0], &end, 10);
		if (*end || errno || f[0][0] < '0' || f[0][0] > '9' || id >= UINT32_MAX - 1) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s:%llu: bad %s id '%s' (want a number)",
					   path, (unsigned long long)lr.lineno, what, f[0]);
			goto err_free;
		}
		if (rdps_reserve((void **)&ents, &cap, (nents + 1) * sizeof(*ents)) ||
		    rdps_reserve((void **)&arena, &acap, alen + fl[1] + 1)) {
			ret = -ENOMEM;
			goto err_free;
		}
		ents[nents].id = id;
		ents[nents].off = alen;
		ents[nents].line = lr.lineno;
		nents++;
		memcpy(arena + alen, f[1], fl[1] + 1);
		alen += fl[1] + 1;
	}
	if (len == -EIO) {
		ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", path);
		goto err_free;
	}
	if (nents)
		qsort(ents, nents, sizeof(*ents), cmp_dict_entry);
	ret = rdps_pt_names_init(t, (uint32_t)nents);
	if (ret)
		goto err_free;
	for (size_t i = 0; i < nents; i++) {
		const char *name = arena + ents[i].off;
		uint32_t id;

		if (ents[i].id != i) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s:%llu: %s id %llu %s (ids must be 0..%zu, each once)",
					   path, (unsigned long long)ents[i].line, what,
					   (unsigned long long)ents[i].id,
					   ents[i].id < i ? "repeats" : "leaves a gap",
					   nents - 1);
			goto err_free_names;
		}
		ret = rdps_pt_names_add(t, name, strlen(name), &id);
		if (ret < 0)
			goto err_free_names;
		if (ret == 0) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s:%llu: duplicate %s name '%s' (also id %u)",
					   path, (unsigned long long)ents[i].line, what,
					   name, id);
			goto err_free_names;
		}
	}
	ret = 0;
	goto err_free;

err_free_names:
	rdps_pt_names_free(t);
err_free:
	free(arena);
	free(ents);
	rdps_pt_lines_close(&lr);
	return ret;
}

int rdps_dataset_open_dicts(const char *dir, const char *entities, const char *relations,
			    struct rdps_dataset **out, char *err, size_t errlen)
{
	struct rdps_dataset *ds;
	char *path;
	int ret;

	*out = NULL;
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->dir = strdup(dir);
	if (!ds->dir) {
		ret = -ENOMEM;
		goto err_close;
	}
	path = entities[0] == '/' ? strdup(entities) : rdps_pt_join(dir, entities);
	ret = path ? read_dict(path, "entity", &ds->ent, err, errlen) : -ENOMEM;
	if (!ret && !ds->ent.n)
		ret = rdps_pt_fail(err, errlen, -EINVAL, "%s: no entries", path);
	free(path);
	if (ret)
		goto err_close;
	path = relations[0] == '/' ? strdup(relations) : rdps_pt_join(dir, relations);
	ret = path ? read_dict(path, "relation", &ds->rel, err, errlen) : -ENOMEM;
	if (!ret && !ds->rel.n)
		ret = rdps_pt_fail(err, errlen, -EINVAL, "%s: no entries", path);
	free(path);
	if (ret)
		goto err_close;
	*out = ds;
	return 0;

err_close:
	rdps_dataset_close(ds);
	return ret;
}

int rdps_dataset_open(const char *dir, struct rdps_dataset **out, char *err,
		      size_t errlen)
{
	return rdps_dataset_open_dicts(dir, "entities.dict", "relations.dict", out, err, errlen);
}

void rdps_dataset_close(struct rdps_dataset *ds)
{
	if (!ds)
		return;
	rdps_pt_names_free(&ds->ent);
	rdps_pt_names_free(&ds->rel);
	free(ds->ent_in_train);
	free(ds->rel_in_train);
	free(ds->dir);
	free(ds);
}

const char *rdps_dataset_dir(const struct rdps_dataset *ds)
{
	return ds->dir;
}

uint32_t rdps_dataset_num_entities(const struct rdps_dataset *ds)
{
	return ds->ent.n;
}

uint32_t rdps_dataset_num_relations(const struct rdps_dataset *ds)
{
	return ds->rel.n;
}

const char *rdps_dataset_entity_name(const struct rdps_dataset *ds, uint32_t id)
{
	return rdps_pt_names_get(&ds->ent, id);
}

const char *rdps_dataset_relation_name(const struct rdps_dataset *ds, uint32_t id)
{
	return rdps_pt_names_get(&ds->rel, id);
}

int rdps_dataset_entity_id(const struct rdps_dataset *ds, const char *name,
			   uint32_t *id)
{
	return rdps_pt_names_find(&ds->ent, name, strlen(name), id);
}

int rdps_dataset_relation_id(const struct rdps_dataset *ds, const char *name,
			     uint32_t *id)
{
	return rdps_pt_names_find(&ds->rel, name, strlen(name), id);
}

static inline int bit_get(const uint8_t *b, uint32_t i)
{
	return (b[i >> 3] >> (i & 7)) & 1;
}

static inline void bit_set(uint8_t *b, uint32_t i)
{
	b[i >> 3] |= (uint8_t)(1u << (i & 7));
}

int64_t rdps_dataset_scan(struct rdps_dataset *ds, enum rdps_split split,
			  rdps_triple_fn fn, void *ctx, char *err, size_t errlen)
{
	uint32_t batch[3 * SCAN_BATCH];
	uint8_t *ent_seen = NULL, *rel_seen = NULL;
	struct rdps_pt_lines lr;
	size_t nb = 0;
	int64_t count = 0;
	char fname[16];
	char *path;
	long len;
	int ret;

	if ((unsigned)split >= RDPS_SPLIT_COUNT)
		return -EINVAL;
	if (split != RDPS_SPLIT_TRAIN && !ds->ent_in_train) {
		int64_t n = rdps_dataset_scan(ds, RDPS_SPLIT_TRAIN, NULL, NULL, err, errlen);

		if (n < 0)
			return n;
	}
	snprintf(fname, sizeof(fname), "%s.txt", split_names[split]);
	path = rdps_pt_join(ds->dir, fname);
	if (!path)
		return -ENOMEM;
	ret = rdps_pt_lines_open(&lr, path, err, errlen);
	if (ret)
		goto err_free_path;
	if (split == RDPS_SPLIT_TRAIN) {
		ent_seen = calloc((ds->ent.n + 7) / 8, 1);
		rel_seen = calloc((ds->rel.n + 7) / 8, 1);
		if (!ent_seen || !rel_seen) {
			ret = -ENOMEM;
			goto err_close;
		}
	}
	while ((len = rdps_pt_lines_next(&lr)) >= 0) {
		char *f[3];
		size_t fl[3];
		uint32_t *t = &batch[3 * nb];

		ret = rdps_pt_split_fields(&lr, lr.line, len, 3, f, fl, triple_fields,
					   err, errlen);
		if (ret)
			goto err_close;
		for (int i = 0; i < 3; i++) {
			const struct rdps_pt_names *names = i == 1 ? &ds->rel : &ds->ent;

			if (rdps_pt_names_find(names, f[i], fl[i], &t[i])) {
				ret = rdps_pt_fail(err, errlen, -EINVAL,
						   "%s:%llu: unknown %s '%s' (not in %s)",
						   path, (unsigned long long)lr.lineno,
						   i == 1 ? "relation" : "entity", f[i],
						   i == 1 ? "relations.dict" : "entities.dict");
				goto err_close;
			}
		}
		if (ent_seen) {
			bit_set(ent_seen, t[0]);
			bit_set(ent_seen, t[2]);
			bit_set(rel_seen, t[1]);
		} else {
			for (int i = 0; i < 3; i++) {
				const uint8_t *seen = i == 1 ? ds->rel_in_train : ds->ent_in_train;

				if (!bit_get(seen, t[i])) {
					ret = rdps_pt_fail(err, errlen, -EINVAL,
							   "%s:%llu: %s '%s' does not occur in train.txt",
							   path, (unsigned long long)lr.lineno,
							   i == 1 ? "relation" : "entity", f[i]);
					goto err_close;
				}
			}
		}
		count++;
		if (++nb == SCAN_BATCH) {
			if (fn && (ret = fn(ctx, batch, nb)))
				goto err_close;
			nb = 0;
		}
	}
	if (len == -EIO) {
		ret = rdps_pt_fail(err, errlen, -EIO, "%s: read error", path);
		goto err_close;
	}
	if (nb && fn && (ret = fn(ctx, batch, nb)))
		goto err_close;
	if (ent_seen) {
		free(ds->ent_in_train);
		free(ds->rel_in_train);
		ds->ent_in_train = ent_seen;
		ds->rel_in_train = rel_seen;
		ent_seen = rel_seen = NULL;
	}
	ret = 0;
err_close:
	free(ent_seen);
	free(rel_seen);
	rdps_pt_lines_close(&lr);
err_free_path:
	free(path);
	return ret ? ret : count;
}

struct load_ctx {
	struct rdps_triples *t;
	size_t cap;
};

static int load_batch(void *ctx, const uint32_t *ids, size_t n)
{
	struct load_ctx *c = ctx;

	if (rdps_reserve((void **)&c->t->ids, &c->cap,
			 (c->t->count + n) * 3 * sizeof(uint32_t)))
		return -ENOMEM;
	memcpy(c->t->ids + 3 * c->t->count, ids, n * 3 * sizeof(uint32_t));
	c->t->count += n;
	return 0;
}

int rdps_dataset_load(struct rdps_dataset *ds, enum rdps_split split,
		      struct rdps_triples *out, char *err, size_t errlen)
{
	struct load_ctx c = { .t = out };
	int64_t n;

	out->ids = NULL;
	out->count = 0;
	n = rdps_dataset_scan(ds, split, load_batch, &c, err, errlen);
	if (n < 0) {
		rdps_dataset_triples_free(out);
		return (int)n;
	}
	return 0;
}
