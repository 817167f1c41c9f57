// SPDX-License-Identifier: MIT
/* rdps_dataset_import: DGL-KE raw (names) and udd (ids) layouts -> raw layout. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/dataset.h"

static const char *const out_names[RDPS_SPLIT_COUNT] = { "train.txt", "valid.txt", "test.txt" };

struct imp {
	const struct rdps_import_opts *o;
	char *err;
	size_t errlen;
	int col[3];                    /* input column of head, relation, tail */
	const char *labels[3];         /* what each input column holds */
	struct rdps_pt_names ent, rel; /* raw: built from train */
	struct rdps_dataset *ds;       /* udd: the input dicts */
	uint8_t *ent_seen, *rel_seen;  /* udd: in train */
	FILE *out;
	const char *out_name;
};

/* Input file of split s: the given name, else NAME.txt, else NAME.tsv. */
static char *input_path(const struct rdps_import_opts *o, int s)
{
	char base[32], *p;

	if (o->files[s])
		return o->files[s][0] == '/' ? strdup(o->files[s]) : rdps_pt_join(o->in_dir, o->files[s]);
	snprintf(base, sizeof(base), "%s.txt", rdps_dataset_split_name((enum rdps_split)s));
	p = rdps_pt_join(o->in_dir, base);
	if (p && access(p, F_OK)) {
		char *alt;

		snprintf(base, sizeof(base), "%s.tsv", rdps_dataset_split_name((enum rdps_split)s));
		alt = rdps_pt_join(o->in_dir, base);
		if (alt && !access(alt, F_OK)) {
			free(p);
			return alt;
		}
		free(alt);
	}
	return p;
}

/*
 * Splits line into the 3 fields of a triple at o->delimiter (any string):
 * white space around the line is dropped first (DGL-KE's strip(); not tabs
 * when the delimiter is a tab, whose empty fields are errors), and a field
 * must not be empty or hold a tab (the raw layout's separator).
 */
static int split_triple(struct imp *m, const struct rdps_pt_lines *lr, char *line, long len,
			char **f, size_t *fl)
{
	const char *d = m->o->delimiter && *m->o->delimiter ? m->o->delimiter : "\t";
	size_t dl = strlen(d);
	char *p, *end = line + len;
	int n = 0;

	if (!strcmp(d, "\t"))
		return rdps_pt_split_fields(lr, line, len, 3, f, fl, m->labels, m->err, m->errlen);
	while (line < end && strchr(" \t\r\v\f", *line))
		line++;
	while (end > line && strchr(" \t\r\v\f", end[-1]))
		end--;
	*end = '\0';
	for (p = line;; n++) {
		char *stop = strstr(p, d);

		if (n < 3) {
			f[n] = p;
			fl[n] = stop ? (size_t)(stop - p) : strlen(p);
		}
		if (!stop)
			break;
		*stop = '\0';
		p = stop + dl;
	}
	if (n + 1 != 3)
		return rdps_pt_fail(m->err, m->errlen, -EINVAL,
				    "%s:%llu: expected 3 fields separated by '%s', found %d", lr->path,
				    (unsigned long long)lr->lineno, d, n + 1);
	for (int i = 0; i < 3; i++) {
		if (!fl[i])
			return rdps_pt_fail(m->err, m->errlen, -EINVAL, "%s:%llu: empty %s (field %d)",
					    lr->path, (unsigned long long)lr->lineno, m->labels[i],
					    i + 1);
		if (memchr(f[i], '\t', fl[i]))
			return rdps_pt_fail(m->err, m->errlen, -EINVAL,
					    "%s:%llu: the %s '%s' holds a tab, which the raw layout "
					    "separates fields with", lr->path,
					    (unsigned long long)lr->lineno, m->labels[i], f[i]);
	}
	return 0;
}

static int emit(struct imp *m, const char *h, const char *r, const char *t)
{
	if (fputs(h, m->out) < 0 || fputc('\t', m->out) < 0 || fputs(r, m->out) < 0 ||
	    fputc('\t', m->out) < 0 || fputs(t, m->out) < 0 || fputc('\n', m->out) < 0)
		return rdps_pt_fail(m->err, m->errlen, -EIO, "%s: write failed", m->out_name);
	return 0;
}

static int raw_line(struct imp *m, const struct rdps_pt_lines *lr, int split, char **f,
		    size_t *fl)
{
	const char *what[3] = { "entity", "relation", "entity" };
	uint32_t id;
	int ret;

	for (int i = 0; i < 3; i++) {
		int c = m->col[i];
		struct rdps_pt_names *t = i == 1 ? &m->rel : &m->ent;

		if (split == RDPS_SPLIT_TRAIN) {
			ret = rdps_pt_names_add(t, f[c], fl[c], &id);
			if (ret < 0)
				return rdps_pt_fail(m->err, m->errlen, ret, "%s:%llu: %s", lr->path,
						    (unsigned long long)lr->lineno, strerror(-ret));
		} else if (rdps_pt_names_find(t, f[c], fl[c], &id)) {
			return rdps_pt_fail(m->err, m->errlen, -EINVAL,
					    "%s:%llu: %s '%s' does not occur in train", lr->path,
					    (unsigned long long)lr->lineno, what[i], f[c]);
		}
	}
	return emit(m, f[m->col[0]], f[m->col[1]], f[m->col[2]]);
}

static int parse_id(struct imp *m, const struct rdps_pt_lines *lr, const char *s,
		    uint32_t n, const char *what, uint32_t *id)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || s[0] < '0' || s[0] > '9')
		return rdps_pt_fail(m->err, m->errlen, -EINVAL, "%s:%llu: %s id '%s' is not a number",
				    lr->path, (unsigned long long)lr->lineno, what, s);
	if (v >= n)
		return rdps_pt_fail(m->err, m->errlen, -EINVAL,
				    "%s:%llu: %s id %llu out of range (the dict has %u)", lr->path,
				    (unsigned long long)lr->lineno, what, v, n);
	*id = (uint32_t)v;
	return 0;
}

static int udd_line(struct imp *m, const struct rdps_pt_lines *lr, int split, char **f,
		    size_t *fl)
{
	const char *what[3] = { "entity", "relation", "entity" };
	uint32_t id[3];
	int ret;

	(void)fl;
	for (int i = 0; i < 3; i++) {
		uint8_t *seen = i == 1 ? m->rel_seen : m->ent_seen;
		uint32_t n = i == 1 ? rdps_dataset_num_relations(m->ds)
				    : rdps_dataset_num_entities(m->ds);

		ret = parse_id(m, lr, f[m->col[i]], n, what[i], &id[i]);
		if (ret)
			return ret;
		if (split == RDPS_SPLIT_TRAIN)
			seen[id[i] >> 3] |= (uint8_t)(1u << (id[i] & 7));
		else if (!(seen[id[i] >> 3] & (1u << (id[i] & 7))))
			return rdps_pt_fail(m->err, m->errlen, -EINVAL,
					    "%s:%llu: %s id %u does not occur in train", lr->path,
					    (unsigned long long)lr->lineno, what[i], id[i]);
	}
	return emit(m, rdps_dataset_entity_name(m->ds, id[0]),
		    rdps_dataset_relation_name(m->ds, id[1]),
		    rdps_dataset_entity_name(m->ds, id[2]));
}

static int import_split(struct imp *m, struct rdps_pt_outdir *od, int split, uint64_t *count)
{
	struct rdps_pt_lines lr;
	char *path;
	long len;
	int ret;

	if (m->o->train_only && split != RDPS_SPLIT_TRAIN) {
		/* no such file: the split is empty */
		FILE *f = rdps_pt_outdir_fopen(od, out_names[split], m->err, m->errlen);

		return f ? rdps_pt_fclose(f, out_names[split], m->err, m->errlen) : -EIO;
	}
	path = input_path(m->o, split);
	if (!path)
		return -ENOMEM;
	ret = rdps_pt_lines_open(&lr, path, m->err, m->errlen);
	if (ret)
		goto err_free;
	m->out_name = out_names[split];
	m->out = rdps_pt_outdir_fopen(od, out_names[split], m->err, m->errlen);
	if (!m->out) {
		ret = -EIO;
		goto err_close;
	}
	while ((len = rdps_pt_lines_next(&lr)) >= 0) {
		char *f[3];
		size_t fl[3];

		ret = split_triple(m, &lr, lr.line, len, f, fl);
		if (!ret)
			ret = m->o->format == RDPS_IMPORT_RAW ? raw_line(m, &lr, split, f, fl)
							     : udd_line(m, &lr, split, f, fl);
		if (ret)
			break;
		++*count;
	}
	if (!ret && len == -EIO)
		ret = rdps_pt_fail(m->err, m->errlen, -EIO, "%s: read error", path);
	if (ret) {
		fclose(m->out);
	} else {
		ret = rdps_pt_fclose(m->out, out_names[split], m->err, m->errlen);
		if (!ret && split == RDPS_SPLIT_TRAIN && !*count)
			ret = rdps_pt_fail(m->err, m->errlen, -EINVAL, "%s: no triples", path);
	}
	m->out = NULL;
err_close:
	rdps_pt_lines_close(&lr);
err_free:
	free(path);
	return ret;
}

/* udd: the output dicts are the input dicts, rewritten in id order. */
static int copy_udd_dict(struct imp *m, struct rdps_pt_outdir *od, int rel)
{
	const char *name = rel ? "relations.dict" : "entities.dict";
	uint32_t n = rel ? rdps_dataset_num_relations(m->ds) : rdps_dataset_num_entities(m->ds);
	FILE *f = rdps_pt_outdir_fopen(od, name, m->err, m->errlen);

	if (!f)
		return -EIO;
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%u\t%s\n", i, rel ? rdps_dataset_relation_name(m->ds, i)
					      : rdps_dataset_entity_name(m->ds, i));
	return rdps_pt_fclose(f, name, m->err, m->errlen);
}

int rdps_dataset_import(const char *out_dir, const struct rdps_import_opts *o,
			struct rdps_dataset_stats *st, char *err, size_t errlen)
{
	struct imp m = { .o = o, .err = err, .errlen = errlen };
	struct rdps_pt_outdir od = { 0 };
	const char *order = o->order ? o->order : "hrt";
	int ret;

	memset(st, 0, sizeof(*st));
	if (!o->in_dir)
		return rdps_pt_fail(err, errlen, -EINVAL, "--input: required");
	/* DGL-KE's letters: order[c] is what column c holds */
	if (strlen(order) != 3 || !strchr(order, 'h') || !strchr(order, 'r') || !strchr(order, 't'))
		return rdps_pt_fail(err, errlen, -EINVAL, "--order: '%s' is not hrt, htr, rht, rth, "
				    "thr or trh", order);
	for (int c = 0; c < 3; c++) {
		int k = order[c] == 'h' ? 0 : order[c] == 'r' ? 1 : 2;

		m.col[k] = c;
		m.labels[c] = k == 0 ? "head" : k == 1 ? "relation" : "tail";
	}
	if (o->format == RDPS_IMPORT_UDD) {
		ret = rdps_dataset_open_dicts(o->in_dir,
					      o->entity_file ? o->entity_file : "entities.dict",
					      o->relation_file ? o->relation_file : "relations.dict",
					      &m.ds, err, errlen);
		if (ret)
			return ret;
		m.ent_seen = calloc(rdps_dataset_num_entities(m.ds) / 8 + 1, 1);
		m.rel_seen = calloc(rdps_dataset_num_relations(m.ds) / 8 + 1, 1);
		if (!m.ent_seen || !m.rel_seen) {
			ret = -ENOMEM;
			goto err_free;
		}
	} else if (o->format == RDPS_IMPORT_RAW) {
		if ((ret = rdps_pt_names_init(&m.ent, 1 << 16)) ||
		    (ret = rdps_pt_names_init(&m.rel, 1 << 10)))
			goto err_free;
	} else {
		return rdps_pt_fail(err, errlen, -EINVAL, "--format: unknown format %d", (int)o->format);
	}
	ret = rdps_pt_outdir_begin(&od, out_dir, o->force, err, errlen);
	if (ret)
		goto err_free;
	for (int s = 0; s < RDPS_SPLIT_COUNT && !ret; s++) {
		ret = import_split(&m, &od, s, &st->num_triples[s]);
		if (!ret)
			rdps_info("import: %s: %llu triples", out_names[s],
				  (unsigned long long)st->num_triples[s]);
	}
	if (ret)
		goto err_end;
	if (o->format == RDPS_IMPORT_RAW) {
		ret = rdps_pt_write_dict(&od, "entities.dict", &m.ent, err, errlen);
		if (!ret)
			ret = rdps_pt_write_dict(&od, "relations.dict", &m.rel, err, errlen);
		st->num_entities = m.ent.n;
		st->num_relations = m.rel.n;
	} else {
		ret = copy_udd_dict(&m, &od, 0);
		if (!ret)
			ret = copy_udd_dict(&m, &od, 1);
		st->num_entities = rdps_dataset_num_entities(m.ds);
		st->num_relations = rdps_dataset_num_relations(m.ds);
	}
	if (!ret)
		ret = rdps_pt_outdir_commit(&od, err, errlen);
err_end:
	rdps_pt_outdir_end(&od);
err_free:
	free(m.ent_seen);
	free(m.rel_seen);
	rdps_dataset_close(m.ds);
	rdps_pt_names_free(&m.ent);
	rdps_pt_names_free(&m.rel);
	if (ret)
		memset(st, 0, sizeof(*st));
	return ret;
}
