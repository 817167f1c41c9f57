// SPDX-License-Identifier: MIT
/*
 * fuzz_dataset: the raw-layout dataset reader (partition/dataset.c) on
 * arbitrary dict and triple files.
 *
 * Input: up to five sections separated by FUZZ_SEP, written (when present)
 * as entities.dict, relations.dict, train.txt, valid.txt and test.txt into
 * a private tmpfs directory; missing sections leave their file absent. The
 * reader has no in-memory entry point, so the files are real (on /dev/shm).
 *
 * Drives: rdps_dataset_open (both dict readers: field splitting, id parsing,
 * the 0..n-1 permutation check, duplicate names, the name index), then
 * rdps_dataset_load of train, valid and test (line reader, CRLF and blank
 * lines, name lookups, the in-train checks of valid/test), and the id/name
 * accessors.
 *
 * Asserts: failures return a negative errno with a reason in err (except
 * -ENOMEM) and leave no triples; on success every name maps back to its id
 * and every loaded id is below the dict sizes; valid/test triples only use
 * entities and relations that occur in train.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rdps/dataset.h"

#define NFILES 5

static const char *const files[NFILES] = { "entities.dict", "relations.dict", "train.txt",
					   "valid.txt", "test.txt" };

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	FUZZ_CHECK(fuzz_workdir() != NULL);
	return 0;
}

static void check_names(const struct rdps_dataset *ds)
{
	uint32_t ne = rdps_dataset_num_entities(ds), nr = rdps_dataset_num_relations(ds);
	uint32_t id;

	FUZZ_CHECK(ne > 0 && nr > 0);
	for (uint32_t i = 0; i < ne; i++) {
		const char *name = rdps_dataset_entity_name(ds, i);

		FUZZ_CHECK(name && name[0]);
		FUZZ_CHECK(!rdps_dataset_entity_id(ds, name, &id) && id == i);
	}
	for (uint32_t i = 0; i < nr; i++) {
		const char *name = rdps_dataset_relation_name(ds, i);

		FUZZ_CHECK(name && name[0]);
		FUZZ_CHECK(!rdps_dataset_relation_id(ds, name, &id) && id == i);
	}
	FUZZ_CHECK(!rdps_dataset_entity_name(ds, ne));
	FUZZ_CHECK(!rdps_dataset_relation_name(ds, nr));
}

/* Bitmaps of the entities and relations seen in train. */
struct seen {
	uint8_t *ent, *rel;
};

static void check_triples(const struct rdps_dataset *ds, const struct rdps_triples *t,
			  enum rdps_split split, struct seen *seen)
{
	uint32_t ne = rdps_dataset_num_entities(ds), nr = rdps_dataset_num_relations(ds);

	FUZZ_CHECK(t->count == 0 || t->ids);
	for (uint64_t i = 0; i < t->count; i++) {
		const uint32_t *x = &t->ids[3 * i];

		FUZZ_CHECK(x[0] < ne && x[1] < nr && x[2] < ne);
		if (split == RDPS_SPLIT_TRAIN) {
			seen->ent[x[0] / 8] |= (uint8_t)(1u << (x[0] % 8));
			seen->ent[x[2] / 8] |= (uint8_t)(1u << (x[2] % 8));
			seen->rel[x[1] / 8] |= (uint8_t)(1u << (x[1] % 8));
		} else {
			FUZZ_CHECK(seen->ent[x[0] / 8] & (1u << (x[0] % 8)));
			FUZZ_CHECK(seen->ent[x[2] / 8] & (1u << (x[2] % 8)));
			FUZZ_CHECK(seen->rel[x[1] / 8] & (1u << (x[1] % 8)));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_workdir();
	const uint8_t *sec[NFILES];
	size_t seclen[NFILES], n;
	struct rdps_dataset *ds;
	struct seen seen = { 0 };
	char err[512];
	int ret;

	n = fuzz_split(data, size, sec, seclen, NFILES);
	for (size_t i = 0; i < NFILES; i++) {
		if (i < n)
			fuzz_write_file(dir, files[i], sec[i], seclen[i]);
		else
			fuzz_remove_file(dir, files[i]);
	}
	err[0] = '\0';
	ret = rdps_dataset_open(dir, &ds, err, sizeof(err));
	if (ret) {
		fuzz_note("open: %d %s", ret, err);
		FUZZ_CHECK(ret < 0 && !ds);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
		return 0;
	}
	check_names(ds);
	seen.ent = calloc(rdps_dataset_num_entities(ds) / 8 + 1, 1);
	seen.rel = calloc(rdps_dataset_num_relations(ds) / 8 + 1, 1);
	FUZZ_CHECK(seen.ent && seen.rel);
	for (int s = RDPS_SPLIT_TRAIN; s < RDPS_SPLIT_COUNT; s++) {
		struct rdps_triples t = { 0 };

		err[0] = '\0';
		ret = rdps_dataset_load(ds, (enum rdps_split)s, &t, err, sizeof(err));
		fuzz_note("%s: %d %s (%llu triples)", rdps_dataset_split_name((enum rdps_split)s),
			  ret, err, (unsigned long long)t.count);
		if (ret) {
			FUZZ_CHECK(ret < 0 && !t.ids && !t.count);
			FUZZ_CHECK(ret == -ENOMEM || err[0]);
			/* valid/test need a readable train. */
			if (s == RDPS_SPLIT_TRAIN)
				break;
			continue;
		}
		check_triples(ds, &t, (enum rdps_split)s, &seen);
		rdps_dataset_triples_free(&t);
	}
	free(seen.ent);
	free(seen.rel);
	rdps_dataset_close(ds);
	return 0;
}
