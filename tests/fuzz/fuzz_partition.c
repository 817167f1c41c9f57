// SPDX-License-Identifier: MIT
/*
 * fuzz_partition: the partition-directory reader (partition/pdir.c) and the
 * blob loader (partition/loader.c) on arbitrary files.
 *
 * Input: one flag byte, then up to six sections separated by FUZZ_SEP,
 * written (when present) into a private tmpfs directory as partition.json,
 * part-0.trp, part-1.trp, valid.trp, test.trp and idmap.bin (the names the
 * seed partition.json uses; the fuzzer may point the json elsewhere).
 * Flag bit 0: before writing, fix up the checksums of every blob section of
 * at least 64 bytes (payload_xxh3 over the bytes after the header, then
 * header_xxh3), so mutations get past the two XXH3 checks and reach the
 * header, size and id checks behind them. Flag bit 1: force the pread path
 * instead of io_uring.
 *
 * Drives: rdps_loader_load (kind 0: any kind) on each blob file, then
 * rdps_partition_open (jansson parse, every field check, ranges, parts) and,
 * if it opens, rdps_partition_load_train for the first parts,
 * rdps_partition_load_split for valid and test, rdps_partition_load_idmap.
 *
 * Asserts: failures return a negative errno with a reason in err (except
 * -ENOMEM) and leave nothing allocated; a loaded blob's header equals the
 * file's, its size and payload checksum are right; an opened partition has
 * 1 <= k <= num_entities, ranges from 0 to num_entities, non-decreasing,
 * part sizes matching the ranges and part triples summing to num_train, and
 * rdps_partition_owner agrees with the ranges; loaded triples are in range
 * (heads in their part), and the id map is a permutation with its inverse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fuzz_common.h"
#include "rdps/partition.h"

#define NFILES 6
#define MAX_TRAIN_PARTS 4

static const char *const files[NFILES] = { "partition.json", "part-0.trp", "part-1.trp",
					   "valid.trp",      "test.trp",   "idmap.bin" };

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	FUZZ_CHECK(fuzz_workdir() != NULL);
	return 0;
}

static void write_blob(const char *dir, const char *name, const uint8_t *sec, size_t len,
		       int fix)
{
	struct rdps_blob_header h;
	uint8_t *copy;

	if (!fix || len < sizeof(h)) {
		fuzz_write_file(dir, name, sec, len);
		return;
	}
	copy = malloc(len);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, sec, len);
	memcpy(&h, copy, sizeof(h));
	h.payload_xxh3 = XXH3_64bits(copy + sizeof(h), len - sizeof(h));
	h.header_xxh3 = XXH3_64bits(&h, offsetof(struct rdps_blob_header, header_xxh3));
	memcpy(copy, &h, sizeof(h));
	fuzz_write_file(dir, name, copy, len);
	free(copy);
}

static void check_blob(const char *dir, const char *name, const uint8_t *sec, size_t len,
		       const struct rdps_loader_opts *o)
{
	struct rdps_blob b;
	char path[512], err[512] = "";
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ret = rdps_loader_load(path, 0, o, &b, err, sizeof(err));
	fuzz_note("load %s: %d %s", name, ret, err);
	if (ret) {
		FUZZ_CHECK(ret < 0 && !b.data);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
		return;
	}
	/* The file on disk is sec, fixed up or not: compare with the file's
	 * own header through what the loader returned. */
	FUZZ_CHECK(len >= sizeof(b.hdr));
	FUZZ_CHECK(!memcmp(b.hdr.magic, RDPS_BLOB_MAGIC, 8));
	FUZZ_CHECK(b.hdr.version == RDPS_BLOB_VERSION);
	FUZZ_CHECK(b.hdr.record_size && b.hdr.payload_bytes == b.hdr.count * b.hdr.record_size);
	FUZZ_CHECK(b.hdr.payload_bytes == len - sizeof(b.hdr));
	if (b.hdr.payload_bytes) {
		FUZZ_CHECK(b.data != NULL);
		FUZZ_CHECK(XXH3_64bits(b.data, b.hdr.payload_bytes) == b.hdr.payload_xxh3);
		FUZZ_CHECK(!memcmp(b.data, sec + sizeof(b.hdr), b.hdr.payload_bytes));
	} else {
		FUZZ_CHECK(XXH3_64bits(NULL, 0) == b.hdr.payload_xxh3);
	}
	rdps_loader_blob_free(&b);
	FUZZ_CHECK(!b.data);
}

static void check_info(const struct rdps_partition_info *in)
{
	uint64_t sum = 0;

	FUZZ_CHECK(in->format_version == RDPS_PARTITION_FORMAT_VERSION);
	FUZZ_CHECK(in->num_entities >= 1 && in->num_relations >= 1);
	FUZZ_CHECK(in->k >= 1 && in->k <= in->num_entities);
	FUZZ_CHECK(in->ranges[0] == 0 && in->ranges[in->k] == in->num_entities);
	FUZZ_CHECK(in->local_triple_fraction >= 0 && in->local_triple_fraction <= 1);
	for (uint32_t i = 0; i < in->k; i++) {
		const struct rdps_partition_part *pp = &in->parts[i];

		FUZZ_CHECK(in->ranges[i] <= in->ranges[i + 1]);
		FUZZ_CHECK(pp->num_entities == in->ranges[i + 1] - in->ranges[i]);
		FUZZ_CHECK(pp->local_triples <= pp->num_triples);
		FUZZ_CHECK(pp->file && pp->file[0] && !strchr(pp->file, '/'));
		sum += pp->num_triples;
		/* The owner of a part's first and last entity is that part. */
		if (pp->num_entities) {
			FUZZ_CHECK(rdps_partition_owner(in, in->ranges[i]) == i);
			FUZZ_CHECK(rdps_partition_owner(in, in->ranges[i + 1] - 1) == i);
		}
	}
	FUZZ_CHECK(sum == in->num_triples[RDPS_SPLIT_TRAIN]);
}

static void check_triples(const struct rdps_partition_info *in, const struct rdps_triples *t,
			  uint64_t lo, uint64_t hi, uint64_t count)
{
	FUZZ_CHECK(t->count == count);
	FUZZ_CHECK(t->count == 0 || t->ids);
	for (uint64_t i = 0; i < t->count; i++) {
		const uint32_t *x = &t->ids[3 * i];

		FUZZ_CHECK(x[0] >= lo && x[0] < hi);
		FUZZ_CHECK(x[1] < in->num_relations && x[2] < in->num_entities);
	}
}

static void check_partition(const char *dir, const struct rdps_loader_opts *o)
{
	const struct rdps_partition_info *in;
	struct rdps_partition *p;
	uint32_t *fwd, *inv;
	char err[512] = "";
	int ret;

	ret = rdps_partition_open(dir, &p, err, sizeof(err));
	fuzz_note("open: %d %s", ret, err);
	if (ret) {
		FUZZ_CHECK(ret < 0 && !p);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
		return;
	}
	in = rdps_partition_get_info(p);
	check_info(in);
	for (uint32_t i = 0; i < in->k && i < MAX_TRAIN_PARTS; i++) {
		struct rdps_triples t;

		err[0] = '\0';
		ret = rdps_partition_load_train(p, i, o, &t, err, sizeof(err));
		fuzz_note("train part %u: %d %s", i, ret, err);
		if (ret) {
			FUZZ_CHECK(ret < 0 && !t.ids && !t.count);
			FUZZ_CHECK(ret == -ENOMEM || err[0]);
			continue;
		}
		check_triples(in, &t, in->ranges[i], in->ranges[i + 1], in->parts[i].num_triples);
		rdps_dataset_triples_free(&t);
	}
	for (int s = RDPS_SPLIT_VALID; s <= RDPS_SPLIT_TEST; s++) {
		struct rdps_triples t;

		err[0] = '\0';
		ret = rdps_partition_load_split(p, (enum rdps_split)s, o, &t, err, sizeof(err));
		fuzz_note("split %d: %d %s", s, ret, err);
		if (ret) {
			FUZZ_CHECK(ret < 0 && !t.ids && !t.count);
			FUZZ_CHECK(ret == -ENOMEM || err[0]);
			continue;
		}
		check_triples(in, &t, 0, in->num_entities, in->num_triples[s]);
		rdps_dataset_triples_free(&t);
	}
	err[0] = '\0';
	ret = rdps_partition_load_idmap(p, o, &fwd, &inv, err, sizeof(err));
	fuzz_note("idmap: %d %s", ret, err);
	if (ret) {
		FUZZ_CHECK(ret < 0 && !fwd && !inv);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
	} else {
		for (uint64_t i = 0; i < in->num_entities; i++) {
			FUZZ_CHECK(fwd[i] < in->num_entities);
			FUZZ_CHECK(inv[fwd[i]] == i);
		}
		free(fwd);
		free(inv);
	}
	rdps_partition_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_workdir();
	struct rdps_loader_opts o = { .chunk_bytes = 4096, .queue_depth = 2 };
	const uint8_t *sec[NFILES];
	size_t seclen[NFILES], n;
	int fix;

	if (size < 1)
		return 0;
	fix = data[0] & 1;
	o.force_pread = (data[0] >> 1) & 1;
	n = fuzz_split(data + 1, size - 1, sec, seclen, NFILES);
	for (size_t i = 0; i < NFILES; i++) {
		if (i >= n)
			fuzz_remove_file(dir, files[i]);
		else if (i == 0)
			fuzz_write_file(dir, files[i], sec[i], seclen[i]);
		else
			write_blob(dir, files[i], sec[i], seclen[i], fix);
	}
	for (size_t i = 1; i < n; i++)
		check_blob(dir, files[i], sec[i], seclen[i], &o);
	check_partition(dir, &o);
	return 0;
}
