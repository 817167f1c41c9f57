/* SPDX-License-Identifier: MIT */
/*
 * Saved embeddings (see rdps/saved.h): config.json through jansson, the two
 * .npy tables, the id maps, and the text inputs of the tools that read a
 * save path.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "rdps/common.h"
#include "rdps/saved.h"

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */
/* ------------------------------------------------------------------------ */

struct lines {
	FILE *f;
	const char *path;
	char *line;      /* current line, "\n" / "\r\n" removed */
	size_t cap;
	uint64_t lineno;
};

static int lines_open(struct lines *l, const char *path, char *err, size_t errlen)
{
	memset(l, 0, sizeof(*l));
	l->path = path;
	l->f = fopen(path, "r");
	if (!l->f)
		return fail(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	return 0;
}

/* Next non-blank line: its length, -1 at the end, -EIO on a read error. */
static long lines_next(struct lines *l)
{
	ssize_t n;

	for (;;) {
		errno = 0;
		n = getline(&l->line, &l->cap, l->f);
		if (n < 0)
			return ferror(l->f) ? -EIO : -1;
		l->lineno++;
		if (n && l->line[n - 1] == '\n')
			l->line[--n] = '\0';
		if (n && l->line[n - 1] == '\r')
			l->line[--n] = '\0';
		if (n)
			return (long)n;
	}
}

static void lines_close(struct lines *l)
{
	if (l->f)
		fclose(l->f);
	free(l->line);
	l->f = NULL;
	l->line = NULL;
}

/* Splits the current line at delim into exactly n non-empty fields. */
static int split(struct lines *l, char delim, int n, char **field, char *err, size_t errlen)
{
	char *p = l->line;
	int k = 0;

	for (;;) {
		char *e = strchr(p, delim);

		if (k == n)
			return fail(err, errlen, -EINVAL, "%s:%llu: more than %d fields", l->path,
				    (unsigned long long)l->lineno, n);
		field[k++] = p;
		if (!e)
			break;
		*e = '\0';
		p = e + 1;
	}
	if (k != n)
		return fail(err, errlen, -EINVAL, "%s:%llu: %d field%s where %d are expected%s",
			    l->path, (unsigned long long)l->lineno, k, k == 1 ? "" : "s", n,
			    delim == '\t' ? " (tab-separated)" : "");
	for (k = 0; k < n; k++)
		if (!field[k][0])
			return fail(err, errlen, -EINVAL, "%s:%llu: field %d is empty", l->path,
				    (unsigned long long)l->lineno, k + 1);
	return 0;
}

/* A decimal id below limit. */
static int parse_id(const char *s, uint32_t limit, uint32_t *id)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno)
		return -EINVAL;
	if (v >= limit)
		return -ERANGE;
	*id = (uint32_t)v;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Id maps                                                                   */
/* ------------------------------------------------------------------------ */

struct rdps_idmap {
	char *path;
	char **names;    /* names[id], each malloc'd */
	uint32_t n;
	uint32_t *slots; /* id + 1, 0 = empty; open addressing by name */
	size_t mask;
};

static size_t name_slot(const struct rdps_idmap *m, const char *name)
{
	return (size_t)XXH3_64bits(name, strlen(name)) & m->mask;
}

void rdps_idmap_destroy(struct rdps_idmap *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; m->names && i < m->n; i++)
		free(m->names[i]);
	free(m->names);
	free(m->slots);
	free(m->path);
	free(m);
}

struct map_line {
	uint32_t id;
	uint64_t lineno;
	char *name;
};

static int cmp_map_line(const void *a, const void *b)
{
	const struct map_line *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int rdps_idmap_load(const char *path, char delim, struct rdps_idmap **out, char *err,
		    size_t errlen)
{
	struct rdps_idmap *m = NULL;
	struct map_line *ml = NULL;
	size_t n = 0, cap = 0, slots = 16;
	struct lines l;
	long len;
	int ret;

	*out = NULL;
	ret = lines_open(&l, path, err, errlen);
	if (ret)
		return ret;
	while ((len = lines_next(&l)) >= 0) {
		char *f[2] = { NULL, NULL };
		uint32_t id;

		ret = split(&l, delim ? delim : '\t', 2, f, err, errlen);
		if (ret)
			goto err_free;
		if (parse_id(f[0], UINT32_MAX, &id)) {
			ret = fail(err, errlen, -EINVAL, "%s:%llu: bad id '%s' (want \"id%sname\")",
				   path, (unsigned long long)l.lineno, f[0],
				   !delim || delim == '\t' ? "<TAB>" : (char[2]){ delim, 0 });
			goto err_free;
		}
		if (n == cap) {
			struct map_line *t;

			cap = cap ? 2 * cap : 1024;
			t = realloc(ml, cap * sizeof(*ml));
			if (!t) {
				ret = -ENOMEM;
				goto err_free;
			}
			ml = t;
		}
		ml[n].name = strdup(f[1]);
		if (!ml[n].name) {
			ret = -ENOMEM;
			goto err_free;
		}
		ml[n].id = id;
		ml[n++].lineno = l.lineno;
	}
	if (len == -EIO) {
		ret = fail(err, errlen, -EIO, "%s: read error after line %llu", path,
			   (unsigned long long)l.lineno);
		goto err_free;
	}
	qsort(ml, n, sizeof(*ml), cmp_map_line);
	for (size_t i = 0; i < n; i++) {
		if (ml[i].id == i)
			continue;
		if (ml[i].id < i)
			ret = fail(err, errlen, -EINVAL, "%s:%llu: id %u again (also on line %llu)",
				   path, (unsigned long long)ml[i].lineno, ml[i].id,
				   (unsigned long long)ml[i - 1].lineno);
		else
			ret = fail(err, errlen, -EINVAL,
				   "%s: no line has id %zu (ids must be 0..%zu, each once)", path,
				   i, n - 1);
		goto err_free;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -ENOMEM;
		goto err_free;
	}
	while (slots < 2 * n + 1)
		slots <<= 1;
	m->path = strdup(path);
	m->names = calloc(n ? n : 1, sizeof(*m->names));
	m->slots = calloc(slots, sizeof(*m->slots));
	m->mask = slots - 1;
	if (!m->path || !m->names || !m->slots) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (size_t i = 0; i < n; i++) {
		size_t p = name_slot(m, ml[i].name);

		for (; m->slots[p]; p = (p + 1) & m->mask) {
			uint32_t o = m->slots[p] - 1;

			if (!strcmp(m->names[o], ml[i].name)) {
				ret = fail(err, errlen, -EINVAL,
					   "%s:%llu: name '%s' again (also id %u)", path,
					   (unsigned long long)ml[i].lineno, ml[i].name, o);
				goto err_free;
			}
		}
		m->slots[p] = (uint32_t)i + 1;
		m->names[i] = ml[i].name;
		ml[i].name = NULL;
		m->n = (uint32_t)i + 1;
	}
	free(ml);
	lines_close(&l);
	*out = m;
	return 0;
err_free:
	for (size_t i = 0; i < n; i++)
		free(ml[i].name);
	free(ml);
	rdps_idmap_destroy(m);
	lines_close(&l);
	return ret;
}

uint32_t rdps_idmap_count(const struct rdps_idmap *m)
{
	return m->n;
}

const char *rdps_idmap_path(const struct rdps_idmap *m)
{
	return m->path;
}

const char *rdps_idmap_name(const struct rdps_idmap *m, uint32_t id)
{
	return id < m->n ? m->names[id] : NULL;
}

int rdps_idmap_lookup(const struct rdps_idmap *m, const char *name, uint32_t *id)
{
	for (size_t p = name_slot(m, name); m->slots[p]; p = (p + 1) & m->mask) {
		uint32_t o = m->slots[p] - 1;

		if (!strcmp(m->names[o], name)) {
			*id = o;
			return 0;
		}
	}
	return -ENOENT;
}

/* ------------------------------------------------------------------------ */
/* Save path                                                                 */
/* ------------------------------------------------------------------------ */

struct rdps_saved {
	char *dir;
	char *dataset;            /* .npy prefix */
	char *data_path;          /* config.json's, or NULL */
	bool double_ent, double_rel;
	struct rdps_model *model;
	float *ent, *rel;         /* the tables */
	uint32_t n_ent, n_rel;
	struct rdps_idmap *ent_map, *rel_map; /* NULL when dir has none */
};

void rdps_saved_close(struct rdps_saved *s)
{
	if (!s)
		return;
	rdps_idmap_destroy(s->ent_map);
	rdps_idmap_destroy(s->rel_map);
	free(s->ent);
	free(s->rel);
	rdps_model_destroy(s->model);
	free(s->data_path);
	free(s->dataset);
	free(s->dir);
	free(s);
}

/* The value of key, or else of alt (DGL-KE's name), or NULL; *used names
 * the one found. */
static json_t *cfg_get(json_t *cfg, const char *key, const char *alt, const char **used)
{
	json_t *v = json_object_get(cfg, key);

	*used = key;
	if (!v && alt) {
		v = json_object_get(cfg, alt);
		*used = alt;
	}
	return v;
}

static int cfg_string(const char *path, json_t *cfg, const char *key, const char *alt,
		      const char **out, char *err, size_t errlen)
{
	const char *used;
	json_t *v = cfg_get(cfg, key, alt, &used);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return fail(err, errlen, -EINVAL, "%s: \"%s\" is not a string", path, used);
	*out = json_string_value(v);
	return 0;
}

/* A non-negative integer field; *present false when absent. */
static int cfg_uint(const char *path, json_t *cfg, const char *key, const char *alt,
		    uint64_t max, uint64_t *out, bool *present, char *err, size_t errlen)
{
	const char *used;
	json_t *v = cfg_get(cfg, key, alt, &used);

	*present = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return fail(err, errlen, -EINVAL, "%s: \"%s\" is not an integer in 0..%llu", path,
			    used, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int cfg_bool(const char *path, json_t *cfg, const char *key, bool *out, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(cfg, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return fail(err, errlen, -EINVAL, "%s: \"%s\" is not true or false", path, key);
	*out = json_is_true(v);
	return 0;
}

/* The one file in dir named "*<suffix>": its prefix into *dataset. */
static int find_npy(const char *dir, const char *suffix, char **dataset, char *err,
		    size_t errlen)
{
	size_t sl = strlen(suffix), found = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	*dataset = NULL;
	if (!d)
		return fail(err, errlen, -errno, "cannot read --model_path %s: %s", dir,
			    strerror(errno));
	while ((de = readdir(d))) {
		size_t nl = strlen(de->d_name);

		if (nl <= sl || strcmp(de->d_name + nl - sl, suffix))
			continue;
		if (found++) {
			free(*dataset);
			*dataset = NULL;
			continue;
		}
		*dataset = strndup(de->d_name, nl - sl);
	}
	closedir(d);
	if (found == 1)
		return *dataset ? 0 : -ENOMEM;
	if (found)
		return fail(err, errlen, -EINVAL,
			    "%s has %zu files named *%s and config.json has no \"dataset\" to choose",
			    dir, found, suffix);
	return -ENOENT;
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Reads one table and checks its shape: cols wide, *rows <= UINT32_MAX. */
static int load_table(const char *path, const char *what, const struct rdps_model *m,
		      uint32_t cols, const struct rdps_saved *s, float **out, uint32_t *rows,
		      char *err, size_t errlen)
{
	uint64_t r, c;
	int ret = rdps_npy_read_f32(path, out, &r, &c);

	if (ret == -EINVAL)
		return fail(err, errlen, ret, "%s is not a 2-D little-endian float32 C-order .npy",
			    path);
	if (ret)
		return fail(err, errlen, ret, "cannot read %s: %s", path, strerror(-ret));
	if (c != cols)
		return fail(err, errlen, -EINVAL,
			    "%s has shape (%llu, %llu), but %s with hidden_dim %u has %u-wide %s "
			    "rows (config.json: double_ent %s, double_rel %s)",
			    path, (unsigned long long)r, (unsigned long long)c, rdps_model_name(m),
			    rdps_model_params(m)->hidden_dim, cols, what,
			    s->double_ent ? "true" : "false", s->double_rel ? "true" : "false");
	if (r == 0 || r > UINT32_MAX)
		return fail(err, errlen, -EINVAL, "%s has %llu rows (want 1..%u)", path,
			    (unsigned long long)r, UINT32_MAX);
	*rows = (uint32_t)r;
	return 0;
}

/* The relation rows from one file per array the model saves (TransR:
 * <dataset>_TransR_relation.npy and <dataset>_TransRprojection.npy), put
 * side by side as the model's rows. */
static int load_relations(const char *dir, const char *dataset, const char *model_name,
			  struct rdps_saved *s, uint32_t rel_dim, char *err, size_t errlen)
{
	struct rdps_model_rel_part parts[RDPS_MODEL_REL_PARTS_MAX];
	unsigned n = rdps_model_relation_parts(s->model, parts);
	int ret = 0;

	for (unsigned k = 0; k < n && !ret; k++) {
		char *path = NULL;
		float *part = NULL;
		uint32_t rows;

		if (asprintf(&path, "%s/%s_%s%s.npy", dir, dataset, model_name, parts[k].suffix) < 0)
			return -ENOMEM;
		ret = load_table(path, "relation", s->model, parts[k].width, s,
				 n == 1 ? &s->rel : &part, &rows, err, errlen);
		if (!ret && n == 1)
			s->n_rel = rows;
		if (!ret && n > 1 && k == 0) {
			s->n_rel = rows;
			s->rel = malloc((size_t)rows * rel_dim * sizeof(float));
			if (!s->rel)
				ret = -ENOMEM;
		}
		if (!ret && n > 1 && rows != s->n_rel)
			ret = fail(err, errlen, -EINVAL, "%s has %u rows, the model's first relation "
				   "array %u", path, rows, s->n_rel);
		for (uint32_t r = 0; !ret && n > 1 && r < rows; r++)
			memcpy(s->rel + (size_t)r * rel_dim + parts[k].offset,
			       part + (size_t)r * parts[k].width, parts[k].width * sizeof(float));
		free(part);
		free(path);
	}
	return ret;
}

int rdps_saved_open(const char *dir, const struct rdps_saved_opts *o, struct rdps_saved **out,
		    char *err, size_t errlen)
{
	static const struct rdps_saved_opts none;
	struct rdps_model_params p;
	struct rdps_saved *s;
	const char *name, *dataset, *data_path;
	char *path = NULL, *cfg_path = NULL;
	uint64_t dim = 0, v;
	bool have;
	json_error_t jerr;
	json_t *cfg = NULL;
	uint32_t ent_dim, rel_dim;
	int ret;

	*out = NULL;
	if (!o)
		o = &none;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir)) || asprintf(&cfg_path, "%s/config.json", dir) < 0) {
		ret = -ENOMEM;
		goto err_close;
	}
	cfg = json_load_file(cfg_path, 0, &jerr);
	if (!cfg) {
		if (exists(cfg_path))
			ret = fail(err, errlen, -EINVAL, "%s:%d: %s", cfg_path, jerr.line, jerr.text);
		else
			ret = fail(err, errlen, -ENOENT,
				   "%s: no such file (is %s a save path? rdps train --save_path "
				   "writes one)", cfg_path, dir);
		goto err_close;
	}
	if (!json_is_object(cfg)) {
		ret = fail(err, errlen, -EINVAL, "%s: not a JSON object", cfg_path);
		goto err_close;
	}
	rdps_model_params_init(&p);
	if ((ret = cfg_string(cfg_path, cfg, "model_name", "model", &name, err, errlen)) ||
	    (ret = cfg_string(cfg_path, cfg, "dataset", NULL, &dataset, err, errlen)) ||
	    (ret = cfg_string(cfg_path, cfg, "data_path", NULL, &data_path, err, errlen)) ||
	    (ret = cfg_uint(cfg_path, cfg, "hidden_dim", "emb_size", UINT32_MAX, &dim, &have, err,
			    errlen)) ||
	    (ret = cfg_bool(cfg_path, cfg, "double_ent", &s->double_ent, err, errlen)) ||
	    (ret = cfg_bool(cfg_path, cfg, "double_rel", &s->double_rel, err, errlen)))
		goto err_close;
	if (o->model_name)
		name = o->model_name;
	if (!name) {
		ret = fail(err, errlen, -EINVAL,
			   "%s: no \"model_name\" (or DGL-KE's \"model\"); give --model_name", cfg_path);
		goto err_close;
	}
	if (o->hidden_dim)
		dim = o->hidden_dim;
	else if (!have || !dim) {
		ret = fail(err, errlen, -EINVAL, "%s: %s; give --hidden_dim", cfg_path,
			   have ? "\"hidden_dim\" is 0"
				: "no \"hidden_dim\" (or DGL-KE's \"emb_size\")");
		goto err_close;
	}
	if (o->set_gamma) {
		p.gamma = o->gamma;
	} else {
		json_t *g = json_object_get(cfg, "gamma");

		if (g && !json_is_number(g)) {
			ret = fail(err, errlen, -EINVAL, "%s: \"gamma\" is not a number", cfg_path);
			goto err_close;
		}
		if (g)
			p.gamma = (float)json_number_value(g);
	}
	p.name = name;
	p.hidden_dim = (uint32_t)dim;
	p.double_ent = s->double_ent;
	p.double_rel = s->double_rel;
	ret = rdps_model_create(&s->model, &p);
	if (ret == -EINVAL) {
		ret = fail(err, errlen, ret,
			   "%s: model \"%s\" with hidden_dim %u, gamma %g is not one rdps can "
			   "score (models: %s; ComplEx needs an even hidden_dim)",
			   o->model_name || o->hidden_dim || o->set_gamma ? "the command line and config.json"
									  : cfg_path,
			   name, p.hidden_dim, (double)p.gamma, rdps_model_names());
		goto err_close;
	}
	if (ret)
		goto err_close;
	ent_dim = rdps_model_entity_dim(s->model);
	rel_dim = rdps_model_relation_dim(s->model);
	if (data_path && !(s->data_path = strdup(data_path))) {
		ret = -ENOMEM;
		goto err_close;
	}

	/* The tables: <dataset>_<model>_entity.npy, the model named as
	 * config.json spells it (DGL-KE's "TransE") or as rdps does. */
	{
		const char *mn[2] = { name, rdps_model_name(s->model) };
		const char *used = NULL;

		for (int k = 0; k < 2 && !used; k++) {
			char suffix[96];

			if (k && !strcmp(mn[1], mn[0]))
				break;
			if (!dataset) {
				snprintf(suffix, sizeof(suffix), "_%s_entity.npy", mn[k]);
				ret = find_npy(dir, suffix, &s->dataset, err, errlen);
				if (ret == -ENOENT)
					continue;
				if (ret)
					goto err_close;
				used = mn[k];
				break;
			}
			free(path);
			path = NULL;
			if (asprintf(&path, "%s/%s_%s_entity.npy", dir, dataset, mn[k]) < 0) {
				ret = -ENOMEM;
				goto err_close;
			}
			if (exists(path))
				used = mn[k];
		}
		if (!used) {
			ret = fail(err, errlen, -ENOENT,
				   dataset ? "%s/%s_%s_entity.npy: no such file (config.json: dataset "
					     "\"%s\", model \"%s\")"
					   : "%s: no file named *_%s_entity.npy%s (config.json has no "
					     "\"dataset\")",
				   dir, dataset ? dataset : name, dataset ? name : "",
				   dataset ? dataset : "", name);
			goto err_close;
		}
		if (dataset && !(s->dataset = strdup(dataset))) {
			ret = -ENOMEM;
			goto err_close;
		}
		free(path);
		path = NULL;
		if (asprintf(&path, "%s/%s_%s_entity.npy", dir, s->dataset, used) < 0) {
			ret = -ENOMEM;
			goto err_close;
		}
		ret = load_table(path, "entity", s->model, ent_dim, s, &s->ent, &s->n_ent, err,
				 errlen);
		if (!ret)
			ret = load_relations(dir, s->dataset, used, s, rel_dim, err, errlen);
		if (ret)
			goto err_close;
	}

	/* Cross-checks of what config.json states, when it does. */
	{
		static const char *const keys[4] = { "n_entities", "n_relations", "emb_size_entity",
						     "emb_size_relation" };
		const uint64_t is[4] = { s->n_ent, s->n_rel, ent_dim, rel_dim };

		for (int k = 0; k < 4; k++) {
			ret = cfg_uint(cfg_path, cfg, keys[k], NULL, UINT64_MAX >> 1, &v, &have, err,
				       errlen);
			if (ret)
				goto err_close;
			if (have && v != is[k]) {
				ret = fail(err, errlen, -EINVAL,
					   "%s: \"%s\" is %llu but the %s table %s %llu", cfg_path,
					   keys[k], (unsigned long long)v, k % 2 ? "relation" : "entity",
					   k < 2 ? "has rows:" : "for this model is wide:",
					   (unsigned long long)is[k]);
				goto err_close;
			}
		}
	}

	/* The dicts, when the save path has them (rdps copies them there). */
	for (int k = 0; k < 2; k++) {
		const char *f = k ? "relations.dict" : "entities.dict";
		struct rdps_idmap **m = k ? &s->rel_map : &s->ent_map;
		uint32_t rows = k ? s->n_rel : s->n_ent;

		free(path);
		path = NULL;
		if (asprintf(&path, "%s/%s", dir, f) < 0) {
			ret = -ENOMEM;
			goto err_close;
		}
		if (!exists(path))
			continue;
		ret = rdps_idmap_load(path, '\t', m, err, errlen);
		if (ret)
			goto err_close;
		if (rdps_idmap_count(*m) != rows) {
			ret = fail(err, errlen, -EINVAL,
				   "%s has %u names but %s/%s_*_%s.npy has %u rows", path,
				   rdps_idmap_count(*m), dir, s->dataset, k ? "relation" : "entity",
				   rows);
			goto err_close;
		}
	}
	free(path);
	free(cfg_path);
	json_decref(cfg);
	*out = s;
	return 0;
err_close:
	free(path);
	free(cfg_path);
	json_decref(cfg);
	rdps_saved_close(s);
	return ret;
}

const char *rdps_saved_dir(const struct rdps_saved *s)
{
	return s->dir;
}

const struct rdps_model *rdps_saved_model(const struct rdps_saved *s)
{
	return s->model;
}

const char *rdps_saved_dataset(const struct rdps_saved *s)
{
	return s->dataset;
}

const char *rdps_saved_data_path(const struct rdps_saved *s)
{
	return s->data_path;
}

bool rdps_saved_double_ent(const struct rdps_saved *s)
{
	return s->double_ent;
}

bool rdps_saved_double_rel(const struct rdps_saved *s)
{
	return s->double_rel;
}

uint32_t rdps_saved_num_entities(const struct rdps_saved *s)
{
	return s->n_ent;
}

uint32_t rdps_saved_num_relations(const struct rdps_saved *s)
{
	return s->n_rel;
}

const float *rdps_saved_entity_rows(const struct rdps_saved *s)
{
	return s->ent;
}

const float *rdps_saved_relation_rows(const struct rdps_saved *s)
{
	return s->rel;
}

const struct rdps_idmap *rdps_saved_entities(const struct rdps_saved *s)
{
	return s->ent_map;
}

const struct rdps_idmap *rdps_saved_relations(const struct rdps_saved *s)
{
	return s->rel_map;
}

double rdps_saved_score(const struct rdps_saved *s, uint32_t h, uint32_t r, uint32_t t)
{
	size_t ed = rdps_model_entity_dim(s->model), rd = rdps_model_relation_dim(s->model);

	return rdps_model_score(s->model, s->ent + h * ed, s->rel + r * rd, s->ent + t * ed);
}

/* ------------------------------------------------------------------------ */
/* Text inputs                                                               */
/* ------------------------------------------------------------------------ */

/* One field to an id: a name in map, or a decimal id below count. */
static int field_id(const struct lines *l, const char *s, const struct rdps_idmap *map,
		    uint32_t count, const char *what, uint32_t *id, char *err, size_t errlen)
{
	int ret;

	if (map) {
		if (!rdps_idmap_lookup(map, s, id))
			return 0;
		return fail(err, errlen, -ENOENT, "%s:%llu: %s '%s' is not in %s", l->path,
			    (unsigned long long)l->lineno, what, s, rdps_idmap_path(map));
	}
	ret = parse_id(s, count, id);
	if (ret == -ERANGE)
		return fail(err, errlen, ret, "%s:%llu: %s id %s is out of range (%u %s%s: 0..%u)",
			    l->path, (unsigned long long)l->lineno, what, s, count,
			    strcmp(what, "entity") ? what : "entitie", "s", count - 1);
	if (ret)
		return fail(err, errlen, ret,
			    "%s:%llu: %s '%s' is not an id (names need a map: --raw_data)",
			    l->path, (unsigned long long)l->lineno, what, s);
	return 0;
}

long rdps_triple_file_read(const char *path, const struct rdps_triple_file *f,
			   struct rdps_triple **out, size_t *n, char *err, size_t errlen)
{
	const char *order = f->order ? f->order : "hrt";
	int col[3]; /* col[k]: field holding h (0), r (1), t (2) */
	struct rdps_triple *t = NULL;
	size_t cnt = 0, cap = 0;
	struct lines l;
	long len;
	int ret;

	*out = NULL;
	*n = 0;
	if (strlen(order) != 3 || !strchr(order, 'h') || !strchr(order, 'r') ||
	    !strchr(order, 't'))
		return fail(err, errlen, -EINVAL, "column order '%s' is not a permutation of hrt",
			    order);
	for (int k = 0; k < 3; k++)
		col[k] = (int)(strchr(order, "hrt"[k]) - order);
	ret = lines_open(&l, path, err, errlen);
	if (ret)
		return ret;
	while ((len = lines_next(&l)) >= 0) {
		char *fld[3];
		uint32_t id[3];

		ret = split(&l, f->delim ? f->delim : '\t', 3, fld, err, errlen);
		for (int k = 0; !ret && k < 3; k++)
			ret = field_id(&l, fld[col[k]], k == 1 ? f->rel : f->ent,
				       k == 1 ? f->num_relations : f->num_entities,
				       k == 1 ? "relation" : "entity", &id[k], err, errlen);
		if (ret)
			goto err_free;
		if (cnt == cap) {
			struct rdps_triple *nt;

			cap = cap ? 2 * cap : 4096;
			nt = realloc(t, cap * sizeof(*t));
			if (!nt) {
				ret = -ENOMEM;
				goto err_free;
			}
			t = nt;
		}
		t[cnt++] = (struct rdps_triple){ id[0], id[1], id[2] };
	}
	if (len == -EIO) {
		ret = fail(err, errlen, -EIO, "%s: read error after line %llu", path,
			   (unsigned long long)l.lineno);
		goto err_free;
	}
	lines_close(&l);
	*out = t;
	*n = cnt;
	return (long)cnt;
err_free:
	lines_close(&l);
	free(t);
	return ret;
}

long rdps_id_list_read(const char *path, const struct rdps_idmap *map, uint32_t count,
		       const char *what, uint32_t **out, size_t *n, char *err, size_t errlen)
{
	uint32_t *ids = NULL;
	size_t cnt = 0, cap = 0;
	struct lines l;
	long len;
	int ret;

	*out = NULL;
	*n = 0;
	ret = lines_open(&l, path, err, errlen);
	if (ret)
		return ret;
	while ((len = lines_next(&l)) >= 0) {
		uint32_t id;

		ret = field_id(&l, l.line, map, count, what, &id, err, errlen);
		if (ret)
			goto err_free;
		if (cnt == cap) {
			uint32_t *ni;

			cap = cap ? 2 * cap : 1024;
			ni = realloc(ids, cap * sizeof(*ids));
			if (!ni) {
				ret = -ENOMEM;
				goto err_free;
			}
			ids = ni;
		}
		ids[cnt++] = id;
	}
	if (len == -EIO) {
		ret = fail(err, errlen, -EIO, "%s: read error after line %llu", path,
			   (unsigned long long)l.lineno);
		goto err_free;
	}
	if (!cnt) {
		ret = fail(err, errlen, -EINVAL, "%s: no %s in the file", path, what);
		goto err_free;
	}
	lines_close(&l);
	*out = ids;
	*n = cnt;
	return (long)cnt;
err_free:
	lines_close(&l);
	free(ids);
	return ret;
}
