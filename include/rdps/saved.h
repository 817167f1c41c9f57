/* SPDX-License-Identifier: MIT */
/*
 * rdps saved embeddings: what `rdps train --save_path DIR` (or DGL-KE's
 * dglke_train) leaves in DIR, loaded in one place for the tools that run
 * after training (rdps eval, predict, emb_sim).
 *
 *   config.json                     the model (see rdps_saved_open())
 *   <dataset>_<model>_entity.npy    float32, one row per entity
 *   <dataset>_<model>_relation.npy  float32, one row per relation
 *   entities.dict, relations.dict   "id\tname" per line (rdps copies them
 *                                   there; DGL-KE keeps them with the data)
 *
 * Also the text inputs of those tools: id maps, triple files (DGL-KE's
 * raw_udd_* / udd_* columns and delimiter) and lists of entities or
 * relations, by name or by id.
 *
 * Errors: functions return 0 (or a count) or a negative errno and, when err
 * is not NULL, write one line into err[errlen] naming the file and the line
 * or field ("DIR/config.json: no \"model_name\" (or DGL-KE's \"model\")",
 * "heads.list:3: 'x' is not in DIR/entities.dict").
 *
 * Thread rules: loaded objects are immutable; any number of threads may
 * read them.
 */
#ifndef RDPS_SAVED_H
#define RDPS_SAVED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Id maps                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * An id <-> name map: "id\tname" per line (DGL-KE's entities.dict,
 * relations.dict and --entity_mfile / --rel_mfile / --mfile files). Ids
 * are 0..n-1, each once, in any order; names are non-empty and unique and
 * may hold spaces. A trailing "\r" is dropped; blank lines are skipped.
 */
struct rdps_idmap;

/* delim separates id and name ('\t' if 0; DGL-KE's udd_* files use the
 * data's --delimiter). 0 and *out, or -ENOENT / -errno (file), -EINVAL
 * (naming the line), -ENOMEM. */
int rdps_idmap_load(const char *path, char delim, struct rdps_idmap **out,
		    char *err, size_t errlen);
void rdps_idmap_destroy(struct rdps_idmap *m); /* NULL is fine */

/* The names in the map, and the file it was read from (owned by m). */
uint32_t rdps_idmap_count(const struct rdps_idmap *m);
const char *rdps_idmap_path(const struct rdps_idmap *m);
/* Name of id (owned by m), NULL when id >= count. */
const char *rdps_idmap_name(const struct rdps_idmap *m, uint32_t id);
/* 0 and *id, or -ENOENT. */
int rdps_idmap_lookup(const struct rdps_idmap *m, const char *name,
		      uint32_t *id);

/* ------------------------------------------------------------------------ */
/* A save path                                                               */
/* ------------------------------------------------------------------------ */

/* Command-line values that replace config.json's (DGL-KE's dglke_eval takes
 * them as flags). Zero-initialise: every field then means "config.json's". */
struct rdps_saved_opts {
	const char *model_name; /* NULL: config.json's */
	uint32_t hidden_dim;    /* 0: config.json's */
	bool set_gamma;         /* use gamma instead of config.json's */
	float gamma;
};

struct rdps_saved;

/*
 * Loads the save path dir. config.json fields, each optional unless said
 * (a field of the wrong JSON type is an error naming it):
 *   model_name (DGL-KE: model)     required unless o->model_name
 *   hidden_dim (DGL-KE: emb_size)  required unless o->hidden_dim
 *   gamma                          default 12.0 (DGL-KE's)
 *   dataset                        the .npy prefix; without it, the one
 *                                  *_<model>_entity.npy in dir
 *   data_path                      reported by rdps_saved_data_path()
 *   double_ent, double_rel         named when a width does not match
 *   n_entities, n_relations,       checked against the .npy shapes
 *   emb_size_entity, emb_size_relation
 * Every other field is ignored. The .npy widths must be the model's
 * (rdps_model_dims()); their row counts must match the dicts (when dir has
 * them: entities.dict and relations.dict are loaded if present, both or
 * neither). o may be NULL. 0 and *out, or -errno with err.
 */
int rdps_saved_open(const char *dir, const struct rdps_saved_opts *o,
		    struct rdps_saved **out, char *err, size_t errlen);
void rdps_saved_close(struct rdps_saved *s); /* NULL is fine */

/* The save path, the model config.json names, and its dataset's name
 * (owned by s). */
const char *rdps_saved_dir(const struct rdps_saved *s);
const struct rdps_model *rdps_saved_model(const struct rdps_saved *s);
const char *rdps_saved_dataset(const struct rdps_saved *s);
/* config.json's data_path, NULL when absent. */
const char *rdps_saved_data_path(const struct rdps_saved *s);
/* config.json's double_ent / double_rel (false when absent). */
bool rdps_saved_double_ent(const struct rdps_saved *s);
bool rdps_saved_double_rel(const struct rdps_saved *s);

/* Rows of the saved entity and relation tables. */
uint32_t rdps_saved_num_entities(const struct rdps_saved *s);
uint32_t rdps_saved_num_relations(const struct rdps_saved *s);
/* The tables: num_entities x entity_dim, num_relations x relation_dim. */
const float *rdps_saved_entity_rows(const struct rdps_saved *s);
const float *rdps_saved_relation_rows(const struct rdps_saved *s);
/* The dicts in dir, NULL when dir has none. */
const struct rdps_idmap *rdps_saved_entities(const struct rdps_saved *s);
const struct rdps_idmap *rdps_saved_relations(const struct rdps_saved *s);

/* Score of (h, r, t) by rdps_model_score(). Ids must be in range. */
double rdps_saved_score(const struct rdps_saved *s, uint32_t h, uint32_t r,
			uint32_t t);

/* ------------------------------------------------------------------------ */
/* Text inputs                                                               */
/* ------------------------------------------------------------------------ */

/* How a triple file is read. */
struct rdps_triple_file {
	char delim;                  /* field separator ('\t' if 0) */
	const char *order;           /* columns: a permutation of "hrt";
				      * NULL = "hrt" (DGL-KE's raw_udd_htr
				      * has "htr") */
	const struct rdps_idmap *ent; /* names looked up here; NULL: the
				       * fields are decimal ids */
	const struct rdps_idmap *rel;
	uint32_t num_entities;       /* ids must be below these */
	uint32_t num_relations;
};

/* Reads every triple of path (exactly three fields a line; blank lines
 * skipped) into a malloc'd array (free()). Returns the number of triples
 * (>= 0, also *n) or -errno with err naming "path:line" and the field. */
long rdps_triple_file_read(const char *path, const struct rdps_triple_file *f,
			   struct rdps_triple **out, size_t *n, char *err,
			   size_t errlen);

/* Reads a list: one entity or relation a line, a name looked up in map, or
 * without map a decimal id below count. what names the kind in errors
 * ("entity"). Returns the number of items (also *n), *out malloc'd. */
long rdps_id_list_read(const char *path, const struct rdps_idmap *map,
		       uint32_t count, const char *what, uint32_t **out,
		       size_t *n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_SAVED_H */
