// SPDX-License-Identifier: MIT
/* The training job's data: DGL-KE's data options to a raw layout, the
 * dataset or partition loaded, the evaluation filter and shares, the save
 * path checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "partition/dglke.h"

#include "rdps/partition.h"
#include "train_internal.h"

/* With eval_per_relation: the result's relation names (one block: the
 * pointer array, then the strings) and its per-relation arrays. */
static int alloc_relation_results(struct job *j, const struct rdps_dataset *ds, char *err,
				  size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	struct rdps_train_result *res = j->res;
	uint32_t n = j->num_relations;
	size_t bytes = (size_t)n * sizeof(char *);
	char *p;

	for (uint32_t r = 0; r < n; r++)
		bytes += strlen(rdps_dataset_relation_name(ds, r)) + 1;
	res->relation_names = malloc(bytes ? bytes : 1);
	if (o->test)
		res->test_rel = calloc(n ? n : 1, sizeof(*res->test_rel));
	if (o->valid)
		res->valid_rel = calloc(n ? n : 1, sizeof(*res->valid_rel));
	if (!res->relation_names || (o->test && !res->test_rel) || (o->valid && !res->valid_rel)) {
		snprintf(err, errlen, "out of memory for the metrics of %u relations", n);
		return -ENOMEM;
	}
	p = (char *)(res->relation_names + n);
	for (uint32_t r = 0; r < n; r++) {
		const char *name = rdps_dataset_relation_name(ds, r);
		size_t len = strlen(name) + 1;

		memcpy(p, name, len);
		res->relation_names[r] = p;
		p += len;
	}
	res->num_relations = n;
	return 0;
}

/* Loads triples: from the partition (relabeled) or the dataset. */
int rdps_tj_load_data(struct job *j, char *err, size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	struct rdps_dataset *ds = NULL;
	struct rdps_partition *p = NULL;
	int ret;

	ret = rdps_dataset_open(o->data_dir, &ds, err, errlen);
	if (ret)
		return ret;
	j->num_entities = rdps_dataset_num_entities(ds);
	j->num_relations = rdps_dataset_num_relations(ds);
	if (!j->dataset_name[0]) {
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s", o->data_dir);
		snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", basename(tmp));
	}
	if (o->eval_per_relation && (o->test || o->valid)) {
		ret = alloc_relation_results(j, ds, err, errlen);
		if (ret)
			goto out;
	}
	if (!o->partition_dir) {
		/* Either evaluation needs both other splits: they are in its filter. */
		ret = rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &j->all_train, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_dataset_load(ds, RDPS_SPLIT_VALID, &j->valid, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_dataset_load(ds, RDPS_SPLIT_TEST, &j->test, err, errlen);
		if (ret)
			goto out;
		/* The trainers of a job must read the same dataset: its counts
		 * stand for it (a trainer's servers check the entity count). */
		{
			uint64_t id[3] = { j->num_entities, j->num_relations, j->all_train.count };

			j->data_digest = XXH3_64bits(id, sizeof(id));
		}
		/* Without a partition, trainers split the triples by rank. */
		if (o->num_trainers == 1) {
			j->train = j->all_train;
		} else {
			uint64_t n = 0;

			j->train.ids = malloc((j->all_train.count / o->num_trainers + 1) * 12);
			if (!j->train.ids) {
				ret = -ENOMEM;
				goto out;
			}
			for (uint64_t i = o->rank; i < j->all_train.count; i += o->num_trainers, n++)
				memcpy(j->train.ids + 3 * n, j->all_train.ids + 3 * i, 12);
			j->train.count = n;
		}
		goto out;
	}
	ret = rdps_partition_open(o->partition_dir, &p, err, errlen);
	if (ret)
		goto out;
	{
		const struct rdps_partition_info *pi = rdps_partition_get_info(p);
		uint32_t part = o->rank % pi->k;

		/* A damaged or edited dataset is named here, file and line, before
		 * its relabeled ids are trusted. */
		ret = rdps_partition_check_dataset(p, o->data_dir, err, errlen);
		if (ret)
			goto out;
		if (pi->num_entities != j->num_entities || pi->num_relations != j->num_relations) {
			snprintf(err, errlen,
				 "%s/partition.json has %llu entities and %llu relations, but %s has "
				 "%llu and %u (the dict copies in %s do not match its partition.json)",
				 o->partition_dir, (unsigned long long)pi->num_entities,
				 (unsigned long long)pi->num_relations, o->data_dir,
				 (unsigned long long)j->num_entities, j->num_relations,
				 o->partition_dir);
			ret = -EINVAL;
			goto out;
		}
		/* The trainers of a job must share the partition: its ranges and
		 * the checksums of its parts stand for it. */
		{
			XXH3_state_t *h = XXH3_createState();

			if (!h) {
				ret = -ENOMEM;
				goto out;
			}
			XXH3_64bits_reset(h);
			XXH3_64bits_update(h, pi->ranges, ((size_t)pi->k + 1) * sizeof(*pi->ranges));
			for (uint32_t q = 0; q < pi->k; q++)
				XXH3_64bits_update(h, &pi->parts[q].checksum, sizeof(pi->parts[q].checksum));
			j->data_digest = XXH3_64bits_digest(h);
			XXH3_freeState(h);
		}
		/* Trainers of one part share its triples. */
		ret = rdps_partition_load_train(p, part, NULL, &j->all_train, err, errlen);
		if (ret)
			goto out;
		if (o->num_trainers > pi->k) {
			uint32_t sharers = 0, me = 0;
			uint64_t n = 0;

			for (uint32_t r = 0; r < o->num_trainers; r++)
				if (r % pi->k == part) {
					if (r == o->rank)
						me = sharers;
					sharers++;
				}
			j->train.ids = malloc((j->all_train.count / sharers + 1) * 12);
			if (!j->train.ids) {
				ret = -ENOMEM;
				goto out;
			}
			for (uint64_t i = me; i < j->all_train.count; i += sharers, n++)
				memcpy(j->train.ids + 3 * n, j->all_train.ids + 3 * i, 12);
			j->train.count = n;
		} else {
			j->train = j->all_train;
		}
		/* The evaluation filter needs every part's triples (a raw ranking,
		 * --no_eval_filter as DGL-KE ranks Freebase, none of them). */
		if ((o->test || o->valid) && !o->no_eval_filter) {
			struct rdps_triples all = { 0 };
			uint64_t total = pi->num_triples[RDPS_SPLIT_TRAIN], n = 0;

			all.ids = malloc(total * 12 + 12);
			for (uint32_t q = 0; all.ids && !ret && q < pi->k; q++) {
				struct rdps_triples tq;

				ret = rdps_partition_load_train(p, q, NULL, &tq, err, errlen);
				if (!ret) {
					memcpy(all.ids + 3 * n, tq.ids, tq.count * 12);
					n += tq.count;
					rdps_dataset_triples_free(&tq);
				}
			}
			all.count = n;
			if (!all.ids)
				ret = -ENOMEM;
			if (ret) {
				free(all.ids);
				goto out;
			}
			if (j->train.ids == j->all_train.ids) {
				/* all_train aliased train: keep train, replace the filter set */
				j->all_train = all;
			} else {
				rdps_dataset_triples_free(&j->all_train);
				j->all_train = all;
			}
		}
		if (!ret && (o->test || o->valid))
			ret = rdps_partition_load_split(p, RDPS_SPLIT_VALID, NULL, &j->valid, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_partition_load_split(p, RDPS_SPLIT_TEST, NULL, &j->test, err, errlen);
		if (!ret && o->save_path && o->rank == 0)
			ret = rdps_partition_load_idmap(p, NULL, &j->new_to_old, NULL, err, errlen);
		if (!ret)
			rdps_info("trainer %u: part %u of %u: %llu train triples (%llu for this trainer)",
				  o->rank, part, pi->k, (unsigned long long)pi->parts[part].num_triples,
				  (unsigned long long)j->train.count);
	}
out:
	rdps_partition_close(p);
	rdps_dataset_close(ds);
	return ret;
}

/* Removes the temporary raw layout of a udd format. */
void rdps_tj_remove_import(struct job *j)
{
	rdps_dglke_remove_import(j->import_dir);
}

/*
 * DGL-KE's --data_path, --dataset, --format, --data_files and --delimiter
 * to the raw layout the trainer reads (e->data_dir; partition/dglke.h); a
 * udd format is imported into a temporary directory for the run
 * (j->import_dir). rdps's --data DIR is the raw layout itself. Also names
 * the dataset (saved files).
 */
int rdps_tj_resolve_data(struct job *j, struct rdps_train_opts *e, char *err, size_t errlen)
{
	const char *format = e->format && *e->format ? e->format : "built_in";
	struct rdps_dglke_data d = { .data_path = e->data_path, .dataset = e->dataset,
				     .format = e->format, .delimiter = e->delimiter,
				     .data_files = e->data_files };
	struct rdps_dglke_resolved r;
	int ret;

	if (!strcmp(format, "built_in") && e->data_dir) {
		char path[4300], name[256], tmp[4200], hint[1024];

		snprintf(path, sizeof(path), "%s/entities.dict", e->data_dir);
		if (!access(path, F_OK)) {
			if (e->dataset)
				snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", e->dataset);
			return 0;
		}
		snprintf(tmp, sizeof(tmp), "%s", e->data_dir);
		snprintf(name, sizeof(name), "%s", e->dataset ? e->dataset : basename(tmp));
		if (rdps_dglke_missing_hint(name, e->data_dir, hint, sizeof(hint)))
			snprintf(err, errlen, "%s is not there: %s", e->data_dir, hint);
		else
			snprintf(err, errlen, "%s is not a dataset: no entities.dict in it (make one "
				 "with rdps dataset wordnet or rdps dataset import)", e->data_dir);
		return -ENOENT;
	}
	if (!e->data_path && !strcmp(format, "built_in")) {
		snprintf(err, errlen, "give the dataset: --data DIR (the raw layout), or "
			 "DGL-KE's --data_path DIR --dataset NAME");
		return -EINVAL;
	}
	if (!e->data_path)
		d.data_path = e->data_dir; /* --data DIR --format udd_...: the files' directory */
	ret = rdps_dglke_resolve(&d, &r, err, errlen);
	if (ret)
		return ret;
	snprintf(j->data_dir, sizeof(j->data_dir), "%s", r.dir);
	snprintf(j->import_dir, sizeof(j->import_dir), "%s", r.import_dir);
	e->data_dir = j->data_dir;
	if (r.import_dir[0] && e->rank == 0)
		rdps_info("trainer %u: --format %s: %llu entities, %llu relations, %llu train "
			  "triples from %s (read as the raw layout in %s for this run)",
			  e->rank, format, (unsigned long long)r.import.num_entities,
			  (unsigned long long)r.import.num_relations,
			  (unsigned long long)r.import.num_triples[RDPS_SPLIT_TRAIN], d.data_path,
			  j->data_dir);
	snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", r.name);
	return 0;
}

/*
 * --save_path before any work (trainer 0 writes there, at the end): made if
 * missing (its parent must exist, as DGL-KE's os.mkdir), and a file can be
 * created in it. With check_only nothing is made: the parent is checked.
 */
int rdps_tj_check_save_path(const struct rdps_train_opts *o, char *err, size_t errlen)
{
	struct stat st;
	char probe[4200];
	int fd, ret;

	if (!o->save_path || o->rank != 0)
		return 0;
	if (stat(o->save_path, &st)) {
		char parent[4096];

		if (errno == ENOENT && !o->check_only && !mkdir(o->save_path, 0755))
			goto probe;
		snprintf(parent, sizeof(parent), "%s", o->save_path);
		snprintf(probe, sizeof(probe), "%s", dirname(parent));
		if (errno == ENOENT && o->check_only && !access(probe, W_OK | X_OK))
			return 0;
		ret = -errno;
		snprintf(err, errlen, "--save_path %s cannot be created: %s%s", o->save_path,
			 strerror(-ret), ret == -ENOENT ? " (its parent does not exist)" : "");
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--save_path %s is not a directory", o->save_path);
		return -ENOTDIR;
	}
probe:
	snprintf(probe, sizeof(probe), "%s/.rdps-write-check-XXXXXX", o->save_path);
	fd = mkstemp(probe);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "--save_path %s is not writable: %s (the embeddings and "
			 "metrics would be lost after training)", o->save_path, strerror(-ret));
		return ret;
	}
	close(fd);
	unlink(probe);
	return 0;
}

/* The evaluation filter (every true triple: train, valid, test, as DGL-KE's
 * EvalDataset), and the eval_percent share of each split: the same fixed
 * selection on every trainer, which then take every num_trainers-th. */
int rdps_tj_prepare_eval(struct job *j, char *err, size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	const struct rdps_triples *sets[3] = { &j->all_train, &j->valid, &j->test };
	struct rdps_triples *evals[2] = { &j->valid_eval, &j->test_eval };
	int ret = 0;

	if (!o->test && !o->valid)
		return 0;
	if ((o->test && !j->test.count) || (o->valid && !j->valid.count)) {
		snprintf(err, errlen, "--%s: the data has no %s triples", o->test && !j->test.count ?
			 "test" : "valid", o->test && !j->test.count ? "test" : "valid");
		return -EINVAL;
	}
	if (!o->no_eval_filter) {
		ret = rdps_triple_set_create(&j->filter, j->all_train.count + j->valid.count +
							 j->test.count);
		for (int s = 0; !ret && s < 3; s++) {
			long n = rdps_triple_set_add(j->filter,
						     (const struct rdps_triple *)sets[s]->ids,
						     sets[s]->count);

			if (n < 0)
				ret = (int)n;
		}
		if (ret) {
			snprintf(err, errlen, "building the evaluation filter: %s", rdps_strerror(ret));
			return ret;
		}
	}
	for (int s = 0; s < 2; s++) {
		const struct rdps_triples *all = s ? &j->test : &j->valid;
		uint64_t keep = (uint64_t)(all->count * o->eval_percent), rng = 0x5eed + s;
		uint32_t *idx;

		*evals[s] = *all;
		if (o->eval_percent >= 1 || !all->count)
			continue;
		/* a partial shuffle picks keep triples; kept in file order */
		idx = malloc(all->count * sizeof(*idx));
		evals[s]->ids = malloc((keep ? keep : 1) * 12);
		if (!idx || !evals[s]->ids) {
			free(idx);
			free(evals[s]->ids);
			evals[s]->ids = NULL;
			evals[s]->count = 0;
			return -ENOMEM;
		}
		for (uint64_t i = 0; i < all->count; i++)
			idx[i] = (uint32_t)i;
		for (uint64_t i = 0; i < keep; i++) {
			uint64_t k = i + (rdps_tj_xorshift(&rng) >> 11) % (all->count - i);
			uint32_t t = idx[i];

			idx[i] = idx[k];
			idx[k] = t;
		}
		qsort(idx, keep, sizeof(*idx), rdps_tj_cmp_u32);
		for (uint64_t i = 0; i < keep; i++)
			memcpy(evals[s]->ids + 3 * i, all->ids + 3 * (uint64_t)idx[i], 12);
		evals[s]->count = keep;
		free(idx);
		if (o->rank == 0)
			rdps_info("trainer %u: --eval_percent %g: %llu of the %llu %s triples", o->rank,
				  o->eval_percent, (unsigned long long)keep,
				  (unsigned long long)all->count, s ? "test" : "valid");
	}
	return 0;
}
