// SPDX-License-Identifier: MIT
/* The training job's files: embeddings (.npy), dicts, config.json and
 * results.json, written by trainer 0 into save_path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/trainer.h"
#include "train_internal.h"

static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out;
	char buf[65536];
	size_t n;
	int ret = 0;

	if (!in)
		return -errno;
	out = fopen(to, "wb");
	if (!out) {
		ret = -errno;
		fclose(in);
		return ret;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			ret = -EIO;
	if (ferror(in))
		ret = -EIO;
	fclose(in);
	if (fclose(out))
		ret = -EIO;
	return ret;
}

/* Pulls a whole table in chunks and writes columns [col, col + cols) of it
 * in original id order. */
static int save_table(struct worker *w, uint32_t table, uint64_t rows, uint32_t dim,
		      uint32_t col, uint32_t cols, const uint32_t *new_to_old, const char *path)
{
	float *all = malloc((rows ? rows : 1) * cols * sizeof(float));
	float *chunk = malloc((size_t)SAVE_CHUNK_ROWS * dim * sizeof(float));
	uint64_t *ids = malloc(SAVE_CHUNK_ROWS * sizeof(uint64_t));
	int ret = 0;

	if (!all || !chunk || !ids) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t c = 0; c < rows && !ret; c += SAVE_CHUNK_ROWS) {
		uint64_t cnt = rows - c < SAVE_CHUNK_ROWS ? rows - c : SAVE_CHUNK_ROWS;

		for (uint64_t i = 0; i < cnt; i++)
			ids[i] = c + i;
		ret = rdps_client_pull(w->c, table, ids, cnt, chunk);
		for (uint64_t i = 0; !ret && i < cnt; i++) {
			uint64_t dst = new_to_old ? new_to_old[c + i] : c + i;

			memcpy(all + dst * cols, chunk + i * dim + col, cols * sizeof(float));
		}
	}
	if (!ret)
		ret = rdps_npy_write_f32(path, all, rows, cols);
out:
	free(all);
	free(chunk);
	free(ids);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* config.json and results.json: JSON as Python's json.dump(indent=4)
 * writes it, numbers as Python prints them (DGL-KE's files are written so).
 */

struct jw {
	FILE *f;
	int depth;
	bool first[4];              /* no member written yet at this depth (0: the
				     * top object, its members indented by 4) */
};

static void jw_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Starts member key at the current depth (key NULL: an array element). */
static void jw_key(struct jw *w, const char *key)
{
	fprintf(w->f, "%s\n%*s", w->first[w->depth] ? "" : ",", 4 * (w->depth + 1), "");
	w->first[w->depth] = false;
	if (key) {
		jw_str(w->f, key);
		fputs(": ", w->f);
	}
}

/* Opens an object or array ('{' or '['): the top one (depth -1), a member
 * (key) or an array element (key NULL). */
static void jw_open(struct jw *w, const char *key, char c)
{
	if (w->depth >= 0)
		jw_key(w, key);
	fputc(c, w->f);
	w->first[++w->depth] = true;
}

static void jw_close(struct jw *w, char c)
{
	if (!w->first[w->depth])
		fprintf(w->f, "\n%*s", 4 * w->depth, "");
	w->depth--;
	fputc(c, w->f);
}

static void jw_string(struct jw *w, const char *key, const char *v)
{
	jw_key(w, key);
	if (v)
		jw_str(w->f, v);
	else
		fputs("null", w->f);
}

static void jw_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	fputs(v ? "true" : "false", w->f);
}

static void jw_int(struct jw *w, const char *key, long long v)
{
	jw_key(w, key);
	fprintf(w->f, "%lld", v);
}

static void jw_double(struct jw *w, const char *key, double v)
{
	char buf[48];

	rdps_eval_format_number(buf, sizeof(buf), v);
	jw_key(w, key);
	fputs(buf, w->f);
}

/* A float option as the user wrote it: the shortest decimal that reads
 * back to the float (0.01, not 0.009999999776), printed as Python prints
 * that number given on DGL-KE's command line. */
static void jw_float(struct jw *w, const char *key, float v)
{
	char tmp[32];

	for (int prec = 1; prec <= 9; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)v);
		if (strtof(tmp, NULL) == v)
			break;
	}
	jw_double(w, key, strtod(tmp, NULL));
}

/* Opens path's temporary sibling for a JSON object. */
static int jw_begin(struct jw *w, const char *path, char *tmp, size_t len)
{
	snprintf(tmp, len, "%s.tmp", path);
	*w = (struct jw){ .f = fopen(tmp, "w"), .depth = -1 };
	if (!w->f)
		return -errno;
	jw_open(w, NULL, '{');
	return 0;
}

/* Closes the object, fsyncs and renames it over path. */
static int jw_end(struct jw *w, const char *path, const char *tmp)
{
	int ret = 0;

	jw_close(w, '}');
	if (ferror(w->f) || fflush(w->f) || fsync(fileno(w->f)))
		ret = -EIO;
	if (fclose(w->f))
		ret = -EIO;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* DGL-KE's config.json (its keys first, those dglke_eval and dglke_predict
 * read: model, emb_size, gamma, double_ent, double_rel, ...), then rdps's. */
static int save_config(struct job *j, const char *path)
{
	const struct rdps_train_opts *o = j->o, *u = j->user;
	const struct rdps_model_params *mp = &o->model;
	char tmp[4200];
	struct jw w;
	int ret = jw_begin(&w, path, tmp, sizeof(tmp));

	if (ret)
		return ret;
	jw_string(&w, "dataset", j->dataset_name);
	jw_string(&w, "model", rdps_model_name(j->model));
	jw_int(&w, "emb_size", mp->hidden_dim);
	jw_int(&w, "max_train_step", (long long)o->max_step);
	jw_int(&w, "batch_size", o->batch_size);
	jw_int(&w, "neg_sample_size", o->neg_sample_size);
	jw_float(&w, "lr", o->lr);
	jw_float(&w, "gamma", mp->gamma);
	/* RotatE doubles its entities always (DGL-KE needs -de for it) */
	jw_bool(&w, "double_ent", mp->double_ent || j->ent_dim == 2 * mp->hidden_dim);
	jw_bool(&w, "double_rel", mp->double_rel);
	jw_bool(&w, "neg_adversarial_sampling", mp->adv);
	jw_float(&w, "adversarial_temperature", mp->adv_temp);
	jw_float(&w, "regularization_coef", mp->reg_coef);
	if (mp->reg_norm == (float)(int)mp->reg_norm)
		jw_int(&w, "regularization_norm", (int)mp->reg_norm); /* DGL-KE's is an int */
	else
		jw_float(&w, "regularization_norm", mp->reg_norm);
	jw_string(&w, "emap_file", "entities.dict");
	jw_string(&w, "rmap_file", "relations.dict");
	/* rdps's */
	jw_string(&w, "model_name", rdps_model_name(j->model));
	jw_int(&w, "hidden_dim", mp->hidden_dim);
	jw_int(&w, "max_step", (long long)o->max_step);
	jw_string(&w, "data_path", u->data_path ? u->data_path : o->data_dir);
	jw_string(&w, "format", u->format ? u->format : "built_in");
	jw_open(&w, "data_files", '[');
	for (int i = 0; u->data_files[i]; i++)
		jw_string(&w, NULL, u->data_files[i]);
	jw_close(&w, ']');
	jw_string(&w, "delimiter", u->delimiter ? u->delimiter : "\t");
	jw_int(&w, "neg_chunk_size", j->chunk);
	jw_bool(&w, "neg_deg_sample", o->neg_deg_sample);
	jw_int(&w, "emb_size_entity", j->ent_dim);
	jw_int(&w, "emb_size_relation", j->rel_dim);
	jw_int(&w, "n_entities", (long long)j->num_entities);
	jw_int(&w, "n_relations", j->num_relations);
	jw_string(&w, "id_order", "entities.dict / relations.dict ids");
	jw_int(&w, "num_trainers", o->num_trainers);
	jw_int(&w, "num_proc", u->num_proc);
	jw_int(&w, "num_thread", u->num_thread);
	jw_int(&w, "seed", (long long)o->seed);
	return jw_end(&w, path, tmp);
}

static void jw_metrics(struct jw *w, const char *key, const struct rdps_eval_metrics *m)
{
	jw_open(w, key, '{');
	jw_double(w, "MRR", m->mrr);
	jw_double(w, "MR", m->mr);
	jw_double(w, "HITS@1", m->hits1);
	jw_double(w, "HITS@3", m->hits3);
	jw_double(w, "HITS@10", m->hits10);
	jw_int(w, "queries", (long long)m->count);
	jw_close(w, '}');
}

static void jw_relations(struct jw *w, const char *key, const struct job *j,
			 const struct rdps_train_relation_sums *rel)
{
	const struct rdps_train_result *res = j->res;

	jw_open(w, key, '[');
	for (uint32_t r = 0; r < res->num_relations; r++) {
		struct rdps_eval_sums both = rel[r].tail;
		struct rdps_eval_metrics m, mt, mh;

		if (!rel[r].tail.count && !rel[r].head.count)
			continue;
		rdps_eval_sums_add(&both, &rel[r].head);
		rdps_eval_metrics_from_sums(&both, &m);
		rdps_eval_metrics_from_sums(&rel[r].tail, &mt);
		rdps_eval_metrics_from_sums(&rel[r].head, &mh);
		jw_open(w, NULL, '{');
		jw_int(w, "id", r);
		jw_string(w, "relation", res->relation_names[r]);
		jw_int(w, "triples", (long long)(rel[r].tail.count ? rel[r].tail.count
								   : rel[r].head.count));
		jw_double(w, "MRR", m.mrr);
		jw_double(w, "MR", m.mr);
		jw_double(w, "HITS@1", m.hits1);
		jw_double(w, "HITS@3", m.hits3);
		jw_double(w, "HITS@10", m.hits10);
		jw_double(w, "tail MRR", mt.mrr);
		jw_double(w, "head MRR", mh.mrr);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* <save_path>/results.json: the final metrics (as printed), per relation if
 * computed, and what the training did. */
static int save_results(struct job *j, const char *path)
{
	const struct rdps_train_opts *o = j->o;
	const struct rdps_train_result *res = j->res;
	char tmp[4200];
	struct jw w;
	int ret = jw_begin(&w, path, tmp, sizeof(tmp));

	if (ret)
		return ret;
	jw_string(&w, "dataset", j->dataset_name);
	jw_string(&w, "model", rdps_model_name(j->model));
	if (res->have_valid)
		jw_metrics(&w, "Valid", &res->valid);
	if (res->have_test)
		jw_metrics(&w, "Test", &res->test);
	if (res->have_valid && res->valid_rel)
		jw_relations(&w, "Valid per relation", j, res->valid_rel);
	if (res->have_test && res->test_rel)
		jw_relations(&w, "Test per relation", j, res->test_rel);
	jw_bool(&w, "filtered", j->filter != NULL);
	jw_int(&w, "neg_sample_size_eval",
	       o->neg_sample_size_eval && o->neg_sample_size_eval < j->num_entities
		       ? (long long)o->neg_sample_size_eval : (long long)j->num_entities);
	jw_double(&w, "eval_percent", o->eval_percent);
	jw_int(&w, "steps", (long long)res->steps_done);
	jw_int(&w, "max_step", (long long)o->max_step);
	jw_int(&w, "threads", o->num_thread);
	jw_int(&w, "num_trainers", o->num_trainers);
	jw_double(&w, "train_seconds", res->train_seconds);
	jw_double(&w, "pos_per_second", res->pos_per_second);
	jw_double(&w, "last_loss", res->last_loss);
	/* thread 0's mean step, in ms (rdps_train_step_split) */
	jw_bool(&w, "pipeline", res->pipelined);
	jw_double(&w, "step_sample_ms", res->split.sample_ms);
	jw_double(&w, "step_gather_ms", res->split.gather_ms);
	jw_double(&w, "step_kernel_ms", res->split.kernel_ms);
	jw_double(&w, "step_optimizer_ms", res->split.optimizer_ms);
	jw_double(&w, "step_network_ms", res->split.network_ms);
	jw_double(&w, "step_net_ms", res->split.net_ms);
	jw_double(&w, "step_hidden_ms", res->split.hidden_ms);
	return jw_end(&w, path, tmp);
}

/* Trainer 0, thread 0: results.json (if results), then (unless
 * no_save_emb) the embeddings, the dicts and config.json, into save_path
 * (checked before training). err says what went wrong. */
static int save_files(struct worker *w, bool results, char *err, size_t errlen)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char path[4096], from[4096];
	bool pulled = false;
	int ret = 0;

	if (mkdir(o->save_path, 0755) && errno != EEXIST) {
		ret = -errno;
		snprintf(err, errlen, "cannot create --save_path %s: %s", o->save_path,
			 strerror(-ret));
		return ret;
	}
	if (results) {
		snprintf(path, sizeof(path), "%s/results.json", o->save_path);
		ret = save_results(j, path);
	}
	if (!ret && !o->no_save_emb) {
		snprintf(path, sizeof(path), "%s/%s_%s_entity.npy", o->save_path, j->dataset_name,
			 rdps_model_name(j->model));
		pulled = true;
		ret = save_table(w, w->ent_table, j->num_entities, j->ent_dim, 0, j->ent_dim,
				 j->new_to_old, path);
	}
	if (!ret && !o->no_save_emb) {
		/* One file per array DGL-KE keeps (TransR: _relation, projection). */
		struct rdps_model_rel_part parts[RDPS_MODEL_REL_PARTS_MAX];
		unsigned n = rdps_model_relation_parts(j->model, parts);

		for (unsigned k = 0; !ret && k < n; k++) {
			snprintf(path, sizeof(path), "%s/%s_%s%s.npy", o->save_path,
				 j->dataset_name, rdps_model_name(j->model), parts[k].suffix);
			ret = save_table(w, w->rel_table, j->num_relations, j->rel_dim,
					 parts[k].offset, parts[k].width, NULL, path);
		}
	}
	for (int i = 0; !ret && !o->no_save_emb && i < 2; i++) {
		const char *f = i ? "relations.dict" : "entities.dict";

		pulled = false;
		snprintf(from, sizeof(from), "%s/%s", o->data_dir, f);
		snprintf(path, sizeof(path), "%s/%s", o->save_path, f);
		ret = copy_file(from, path);
	}
	if (!ret && !o->no_save_emb) {
		snprintf(path, sizeof(path), "%s/config.json", o->save_path);
		ret = save_config(j, path);
	}
	/* a table's rows come from the servers: a failed pull says why there */
	if (ret)
		snprintf(err, errlen, "saving %s: %s", path,
			 pulled && ret != -EIO && ret != -ENOMEM ? rdps_client_errmsg(w->c)
								 : rdps_strerror(ret));
	return ret;
}

int rdps_tj_save_all(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char err[600];
	int ret = save_files(w, true, err, sizeof(err));

	if (ret)
		rdps_tj_fail(j, ret, "%s", err);
	else
		rdps_info("trainer %u: %s saved in %s", o->rank,
			  o->no_save_emb ? "results.json" : "embeddings, config.json and results.json",
			  o->save_path);
	return ret;
}

/* Stopped by o->stop: trainer 0 saves the embeddings reached and says
 * where in j->save_note. */
void rdps_tj_save_interrupted(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char err[600];

	if (!o->save_path || o->no_save_emb) {
		snprintf(j->save_note, sizeof(j->save_note), "nothing saved (%s)",
			 o->save_path ? "--no_save_emb" : "no --save_path");
		return;
	}
	/* this thread's pushes are in; the others' unacknowledged ones may not be */
	rdps_client_flush(w->c);
	if (save_files(w, false, err, sizeof(err)))
		snprintf(j->save_note, sizeof(j->save_note), "the embeddings could not be saved: %s",
			 err);
	else
		snprintf(j->save_note, sizeof(j->save_note),
			 "the embeddings reached are saved in %s (%s_%s_entity.npy and "
			 "_relation.npy, the dicts, config.json)", o->save_path, j->dataset_name,
			 rdps_model_name(j->model));
}
