/* SPDX-License-Identifier: MIT */
/*
 * DGL-KE's data conventions, shared by rdps train, rdps partition and
 * rdps dist_train (not installed): where --data_path/--dataset put a
 * dataset and its partition, the --format udd imports, and what to say
 * when a built-in dataset (DGL-KE downloads them; rdps does not) is missing.
 */
#ifndef RDPS_PARTITION_DGLKE_H
#define RDPS_PARTITION_DGLKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/dataset.h"

/* DGL-KE's default --dataset. */
#define RDPS_DGLKE_DEFAULT_DATASET "FB15k"

struct rdps_dglke_data {
	const char *data_path;         /* --data_path */
	const char *dataset;           /* --dataset, or NULL */
	const char *format;            /* --format, or NULL: built_in */
	const char *delimiter;         /* --delimiter, or NULL: tab */
	const char *const *data_files; /* --data_files, NULL-terminated, or NULL */
};

struct rdps_dglke_resolved {
	char dir[4200];        /* the raw layout to read */
	char import_dir[4200]; /* a udd format's temporary import ("" if none) */
	char name[256];        /* the dataset's name (saved files' prefix) */
	struct rdps_dataset_stats import; /* a udd import's counts */
};

/*
 * The raw layout of DGL-KE's data flags. built_in: DATA_PATH/DATASET, or
 * DATA_PATH itself when it holds entities.dict and no --dataset is given,
 * else DATA_PATH/FB15k (DGL-KE's default); a missing dataset is -ENOENT
 * with rdps_dglke_missing_hint's words. raw_udd_<order> / udd_<order>: the
 * --data_files of DATA_PATH imported into a temporary directory under
 * $TMPDIR (remove it with rdps_dglke_release). 0 or -errno with err.
 */
int rdps_dglke_resolve(const struct rdps_dglke_data *d, struct rdps_dglke_resolved *r, char *err,
		       size_t errlen);
void rdps_dglke_release(struct rdps_dglke_resolved *r);
/* Removes an import directory made by rdps_dglke_resolve (and empties the
 * string); "" does nothing. */
void rdps_dglke_remove_import(char *import_dir);

/*
 * Where 'rdps partition --dataset NAME -k K --data_path DIR' writes the
 * partition and rdps dist_train looks for it: PARENT/partition-kK, PARENT
 * the built_in dataset's directory (as rdps_dglke_resolve finds it), or
 * for a udd format DATA_PATH/DATASET (DATA_PATH without --dataset), as
 * DGL-KE's partitions go under data_path/dataset. 0 or -ENAMETOOLONG.
 */
int rdps_dglke_partition_dir(const struct rdps_dglke_data *d, uint32_t k, char *out, size_t len);

/*
 * What to do when DGL-KE's built-in dataset name (FB15k, FB15k-237, wn18,
 * wn18rr, Freebase, wikikg2, biokg, wikikg90M; any case) has no files in
 * dir: which files to put there, or which 'rdps dataset' command makes the
 * nearest local equivalent. Returns false (buf untouched) for other names.
 */
bool rdps_dglke_missing_hint(const char *name, const char *dir, char *buf, size_t len);

#endif
