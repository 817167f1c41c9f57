// SPDX-License-Identifier: MIT
/* DGL-KE's data conventions (partition/dglke.h). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dglke.h"
#include "rdps/common.h"

static bool is_dataset(const char *dir)
{
	char path[4300];

	snprintf(path, sizeof(path), "%s/entities.dict", dir);
	return !access(path, F_OK);
}

/* The column order of a udd format: the letters h, r, t once each. */
static bool valid_order(const char *order)
{
	return strlen(order) == 3 && strchr(order, 'h') && strchr(order, 'r') && strchr(order, 't');
}

static void base_name(const char *path, char *out, size_t len)
{
	char tmp[4200];

	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(out, len, "%s", basename(tmp));
}

void rdps_dglke_remove_import(char *import_dir)
{
	static const char *const files[] = { "entities.dict", "relations.dict", "train.txt",
					     "valid.txt", "test.txt" };
	char path[4300];

	if (!import_dir[0])
		return;
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/data/%s", import_dir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/data", import_dir);
	rmdir(path);
	rmdir(import_dir);
	import_dir[0] = '\0';
}

void rdps_dglke_release(struct rdps_dglke_resolved *r)
{
	rdps_dglke_remove_import(r->import_dir);
}

/* The built_in dataset's directory and name. */
static void builtin_dir(const struct rdps_dglke_data *d, char *dir, size_t len, char *name,
			size_t namelen)
{
	if (d->dataset || !is_dataset(d->data_path)) {
		const char *ds = d->dataset ? d->dataset : RDPS_DGLKE_DEFAULT_DATASET;

		snprintf(dir, len, "%s/%s", d->data_path, ds);
		snprintf(name, namelen, "%s", ds);
	} else {
		snprintf(dir, len, "%s", d->data_path);
		base_name(d->data_path, name, namelen);
	}
}

int rdps_dglke_resolve(const struct rdps_dglke_data *d, struct rdps_dglke_resolved *r, char *err,
		       size_t errlen)
{
	const char *format = d->format && *d->format ? d->format : "built_in";
	size_t nfiles = 0;
	int ret;

	memset(r, 0, sizeof(*r));
	while (d->data_files && d->data_files[nfiles])
		nfiles++;
	if (!d->data_path) {
		snprintf(err, errlen, "give the dataset: DGL-KE's --data_path DIR [--dataset NAME]");
		return -EINVAL;
	}
	if (!strcmp(format, "built_in")) {
		char hint[1024];

		if (nfiles) {
			snprintf(err, errlen, "--data_files lists the files of --format raw_udd_<order> "
				 "or udd_<order>; the built_in format reads the dataset directory "
				 "--data_path/--dataset");
			return -EINVAL;
		}
		builtin_dir(d, r->dir, sizeof(r->dir), r->name, sizeof(r->name));
		if (is_dataset(r->dir))
			return 0;
		if (rdps_dglke_missing_hint(r->name, r->dir, hint, sizeof(hint)))
			snprintf(err, errlen, "%s is not there: %s", r->dir, hint);
		else
			snprintf(err, errlen, "%s is not a dataset: no entities.dict in it (rdps does not "
				 "download datasets: make one with rdps dataset wordnet or rdps dataset "
				 "import%s)", r->dir, d->dataset ? "" : ", or name it with --dataset");
		return -ENOENT;
	}
	{
		bool raw = !strncmp(format, "raw_udd_", 8);
		const char *order = format + (raw ? 8 : 4);
		const char *tmpdir = getenv("TMPDIR");
		struct rdps_import_opts io = { .format = raw ? RDPS_IMPORT_RAW : RDPS_IMPORT_UDD,
					       .in_dir = d->data_path, .order = order,
					       .delimiter = d->delimiter };
		size_t first = raw ? 0 : 2;

		if ((!raw && strncmp(format, "udd_", 4)) || !valid_order(order)) {
			snprintf(err, errlen, "--format %s: not built_in, raw_udd_<order> or "
				 "udd_<order> (order: hrt, htr, rht, rth, thr or trh)", format);
			return -EINVAL;
		}
		/* DGL-KE's counts: [entities relations] train [valid test] */
		if (nfiles != first + 1 && nfiles != first + 3) {
			snprintf(err, errlen, "--format %s needs --data_files %s (%zu given)", format,
				 raw ? "TRAIN [VALID TEST]" : "ENTITIES RELATIONS TRAIN [VALID TEST]",
				 nfiles);
			return -EINVAL;
		}
		if (!raw) {
			io.entity_file = d->data_files[0];
			io.relation_file = d->data_files[1];
		}
		for (size_t s = 0; s < RDPS_SPLIT_COUNT; s++)
			io.files[s] = first + s < nfiles ? d->data_files[first + s] : NULL;
		io.train_only = nfiles == first + 1;
		snprintf(r->import_dir, sizeof(r->import_dir), "%s/rdps-data-XXXXXX",
			 tmpdir && *tmpdir ? tmpdir : "/tmp");
		if (!mkdtemp(r->import_dir)) {
			ret = -errno;
			snprintf(err, errlen, "--format %s: cannot make a temporary directory %s: %s",
				 format, r->import_dir, strerror(-ret));
			r->import_dir[0] = '\0';
			return ret;
		}
		snprintf(r->dir, sizeof(r->dir), "%s/data", r->import_dir);
		ret = rdps_dataset_import(r->dir, &io, &r->import, err, errlen);
		if (ret) {
			char why[1024];

			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "--format %s: %s", format, why);
			rdps_dglke_release(r);
			return ret;
		}
		if (d->dataset)
			snprintf(r->name, sizeof(r->name), "%s", d->dataset);
		else
			base_name(d->data_path, r->name, sizeof(r->name));
	}
	return 0;
}

int rdps_dglke_partition_dir(const struct rdps_dglke_data *d, uint32_t k, char *out, size_t len)
{
	const char *format = d->format && *d->format ? d->format : "built_in";
	char dir[4200], name[256];
	int n;

	if (!strcmp(format, "built_in"))
		builtin_dir(d, dir, sizeof(dir), name, sizeof(name));
	else if (d->dataset)
		snprintf(dir, sizeof(dir), "%s/%s", d->data_path, d->dataset);
	else
		snprintf(dir, sizeof(dir), "%s", d->data_path);
	n = snprintf(out, len, "%s/partition-k%u", dir, k);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool rdps_dglke_missing_hint(const char *name, const char *dir, char *buf, size_t len)
{
	char tmp[4200], parent[4200];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	snprintf(parent, sizeof(parent), "%s", dirname(tmp));
	if (!strcasecmp(name, "FB15k") || !strcasecmp(name, "FB15k-237")) {
		bool k237 = !strcasecmp(name, "FB15k-237");

		snprintf(buf, len,
			 "DGL-KE downloads %s from https://data.dgl.ai/dataset/%s.zip; rdps downloads "
			 "nothing: unzip it into %s (entities.dict, relations.dict, train.txt, valid.txt, "
			 "test.txt). The nearest dataset this machine can make is WordNet's %s: "
			 "'rdps dataset wordnet%s %s/%s', then --dataset %s",
			 name, name, dir, k237 ? "WN18RR (inverse relations removed, as in FB15k-237)"
					       : "WN18 (published beside FB15k)",
			 k237 ? " --cut wn18rr" : "", parent, k237 ? "wn18rr" : "wn18",
			 k237 ? "wn18rr" : "wn18");
		return true;
	}
	if (!strcasecmp(name, "wn18") || !strcasecmp(name, "wn18rr")) {
		bool rr = !strcasecmp(name, "wn18rr");

		snprintf(buf, len,
			 "make it from WordNet 3.0 (Debian's wordnet-base): 'rdps dataset wordnet%s %s' "
			 "(%s from the same synsets, with rdps's own seeded split; or unzip DGL-KE's "
			 "https://data.dgl.ai/dataset/%s.zip there)",
			 rr ? " --cut wn18rr" : "", dir,
			 rr ? "WN18RR's 40,943 entities and 11 relations" : "WN18's 40,943 entities and 18 relations",
			 name);
		return true;
	}
	if (!strcasecmp(name, "Freebase")) {
		snprintf(buf, len,
			 "DGL-KE's Freebase (https://data.dgl.ai/dataset/Freebase.zip: entity2id.txt, "
			 "relation2id.txt and train/valid/test.txt of ids, head tail relation) is read "
			 "after conversion: dicts as 'id<TAB>name' lines (entities.dict, relations.dict), "
			 "then 'rdps dataset import %s --format udd --order htr --input UNZIPPED_DIR'. "
			 "A graph of its shape can be made here: 'rdps dataset synth %s --like "
			 "freebase86m --scale 0.01' (1%% of its counts)", dir, dir);
		return true;
	}
	if (!strcasecmp(name, "wikikg2") || !strcasecmp(name, "biokg") ||
	    !strcasecmp(name, "wikikg90M")) {
		snprintf(buf, len,
			 "DGL-KE builds %s from OGB's download; rdps reads DGL-KE's raw layout: write "
			 "entities.dict, relations.dict and train/valid/test.txt into %s, or import "
			 "OGB's triples of ids with 'rdps dataset import %s --format udd --input DIR'",
			 name, dir, dir);
		return true;
	}
	return false;
}
