// SPDX-License-Identifier: MIT
/*
 * Graph partitions carry the XXH3 of every file (partition.json "files"),
 * checked when a server loads its part (issue 24): a byte changed in each
 * kind of file (features, edges, in-slots, out-slots and out-edges, labels,
 * masks, idmap) is refused, naming the file. Each change keeps the file
 * well-formed and its content in range (a feature's low bit, an edge's
 * source another node, a label another class, a mask flipped, two idmap
 * entries swapped): control, the same damage with its checksum recorded
 * anew loads, as it loaded silently before graph partitions had sums. A
 * file cut short is refused by its size; a partition of format_version 1
 * is refused with the command that rewrites it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/npy.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "rdps_test.h"

#define N 120
#define E 900
#define F 4

static char err[640];
static char *tmp, *pdir;

static void npy(const char *d, const char *name, const char *descr, const void *data,
		uint64_t rows, uint64_t cols)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s.npy", d, name);
	cr_assert_eq(rdps_npy_write(path, descr, data, rows, cols, err, sizeof(err)), 0, "%s",
		     err);
}

static void setup(void)
{
	static int64_t edges[2 * E], etypes[E], labels[N];
	static float feat[N * F];
	static uint8_t mask[3][N];
	static const char *const masks[3] = { "train_mask", "val_mask", "test_mask" };
	struct rdps_graph_partition_opts o = { .k = 2, .method = RDPS_PARTITION_METIS,
					       .balance_edges = true, .seed = 1 };
	struct rdps_graph_partition_result r;
	char data[600], path[700];
	uint64_t x = 3;
	FILE *f;

	rdps_log_threshold = RDPS_LOG_ERROR;
	tmp = rdps_test_tmpdir("gsum");
	snprintf(data, sizeof(data), "%s/data", tmp);
	cr_assert_eq(mkdir(data, 0755), 0);
	for (int i = 0; i < E; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		edges[2 * i] = (int64_t)((x >> 33) % N);
		edges[2 * i + 1] = (int64_t)((x >> 13) % N);
		etypes[i] = i % 3;
	}
	for (int v = 0; v < N; v++) {
		for (int k = 0; k < F; k++)
			feat[v * F + k] = (float)v + 0.25f * (float)k;
		labels[v] = v % 4;
		for (int m = 0; m < 3; m++)
			mask[m][v] = (uint8_t)(v % 5 == m);
	}
	npy(data, "edges", "<i8", edges, E, 2);
	npy(data, "etypes", "<i8", etypes, E, 0);
	npy(data, "features", "<f4", feat, N, F);
	npy(data, "labels", "<i8", labels, N, 0);
	for (int m = 0; m < 3; m++)
		npy(data, masks[m], "|u1", mask[m], N, 0);
	snprintf(path, sizeof(path), "%s/graph.json", data);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "{\"name\": \"sums\", \"num_classes\": 4, \"num_etypes\": 3}\n");
	fclose(f);
	pdir = malloc(600);
	snprintf(pdir, 600, "%s/parts", tmp);
	o.data_dir = data;
	o.out_dir = pdir;
	cr_assert_eq(rdps_graph_partition_build(&o, &r, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	rdps_test_rmtree(tmp);
	free(tmp);
	free(pdir);
}

TestSuite(graph_checksums, .init = setup, .fini = teardown, .timeout = 120);

static char *slurp(const char *path, size_t *len)
{
	char *buf = rdps_test_slurp_len(path, len);

	cr_assert(buf, "read %s", path);
	return buf;
}

static void spit(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* Records path's XXH3 and size in partition.json (what a rewrite would). */
static void record_sum(const char *file)
{
	char path[800], jpath[800], hex[24];
	size_t len;
	char *buf;
	json_error_t je;
	json_t *root, *f;

	snprintf(path, sizeof(path), "%s/%s", pdir, file);
	snprintf(jpath, sizeof(jpath), "%s/partition.json", pdir);
	buf = slurp(path, &len);
	snprintf(hex, sizeof(hex), "%016" PRIx64, (uint64_t)XXH3_64bits(buf, len));
	free(buf);
	root = json_load_file(jpath, 0, &je);
	cr_assert(root, "%s", je.text);
	f = json_object_get(json_object_get(root, "files"), file);
	cr_assert(f, "partition.json lists no %s", file);
	json_object_set_new(f, "xxh3", json_string(hex));
	json_object_set_new(f, "bytes", json_integer((json_int_t)len));
	cr_assert_eq(json_dump_file(root, jpath, JSON_INDENT(1) | JSON_PRESERVE_ORDER), 0);
	json_decref(root);
}

static int load0(void)
{
	struct rdps_graph_part *p = NULL;
	int ret;

	err[0] = '\0';
	ret = rdps_graph_part_load(pdir, 0, &p, err, sizeof(err));
	rdps_graph_part_free(p);
	return ret;
}

/* The data of a .npy file: offset of its first byte after the header. */
static size_t data_offset(const char *buf, size_t len)
{
	struct rdps_npy a;

	cr_assert_eq(rdps_npy_parse(buf, len, "x", &a, err, sizeof(err)), 0, "%s", err);
	return (size_t)((const char *)a.data - buf);
}

/* A well-formed, in-range change of file, by kind. */
static void damage(const char *file, char *buf, size_t len)
{
	size_t off = data_offset(buf, len);
	int64_t v;

	if (strstr(file, "nd-0-0")) {            /* a feature's lowest mantissa bit */
		buf[off] ^= 1;
	} else if (strstr(file, "edges.npy") && !strstr(file, "out")) {
		memcpy(&v, buf + off, 8);        /* edge 0's source: another node */
		v = (v + 1) % N;
		memcpy(buf + off, &v, 8);
	} else if (strstr(file, "nd-0-1")) {     /* a label: another class */
		memcpy(&v, buf + off, 8);
		v = (v + 1) % 4;
		memcpy(buf + off, &v, 8);
	} else if (strstr(file, "nd-0-2")) {     /* a mask flipped */
		buf[off] ^= 1;
	} else if (strstr(file, "idmap")) {      /* two entries swapped */
		char t[8];

		memcpy(t, buf + off, 8);
		memcpy(buf + off, buf + off + 8, 8);
		memcpy(buf + off + 8, t, 8);
	} else {                                 /* slots, out-edges: a bit */
		buf[len - 1] ^= 1;
	}
}

Test(graph_checksums, a_changed_byte_in_each_kind_of_file_is_refused_naming_it)
{
	static const char *const files[] = {
		"part-0-nd-0-0.npy",  /* features */
		"part-0-edges.npy",   /* edges */
		"part-0-inptr.npy",   /* in-slots */
		"part-0-outptr.npy",  /* out-slots */
		"part-0-outedges.npy",
		"part-0-nd-0-1.npy",  /* labels */
		"part-0-nd-0-2.npy",  /* train mask */
		"idmap.npy",
	};
	/* the changes that stay well-formed and in range: the controls */
	static const bool in_range[] = { true, true, false, false, false, true, true, true };
	char path[800], jpath[800];
	size_t len, jlen;
	char *orig, *bad, *json0;

	snprintf(jpath, sizeof(jpath), "%s/partition.json", pdir);
	json0 = slurp(jpath, &jlen);
	cr_assert_eq(load0(), 0, "%s", err);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", pdir, files[i]);
		orig = slurp(path, &len);
		bad = malloc(len);
		memcpy(bad, orig, len);
		damage(files[i], bad, len);
		cr_assert(memcmp(bad, orig, len), "%s unchanged", files[i]);
		spit(path, bad, len);
		cr_assert_eq(load0(), -EBADMSG, "%s damaged: %d (%s)", files[i], load0(), err);
		cr_assert(strstr(err, files[i]) && strstr(err, "damaged"), "%s: %s", files[i], err);
		cr_log_info("%s: %s", files[i], err);
		if (in_range[i]) {
			/* control: the same change with its sum recorded loads (as
			 * every such change did before the sums) */
			record_sum(files[i]);
			cr_assert_eq(load0(), 0, "control %s: %s", files[i], err);
			spit(jpath, json0, jlen);
		}
		spit(path, orig, len);
		cr_assert_eq(load0(), 0, "%s restored: %s", files[i], err);
		free(orig);
		free(bad);
	}
	free(json0);
}

Test(graph_checksums, a_cut_file_a_missing_sum_and_an_old_partition_are_refused)
{
	char path[800], jpath[800];
	size_t len, jlen;
	char *orig, *json0;
	json_error_t je;
	json_t *root;

	snprintf(path, sizeof(path), "%s/part-0-edges.npy", pdir);
	snprintf(jpath, sizeof(jpath), "%s/partition.json", pdir);
	orig = slurp(path, &len);
	json0 = slurp(jpath, &jlen);
	spit(path, orig, len - 8);
	cr_assert_eq(load0(), -EBADMSG);
	cr_assert(strstr(err, "part-0-edges.npy") && strstr(err, "cut short"), "%s", err);
	spit(path, orig, len);
	/* no sum recorded for a file */
	root = json_load_file(jpath, 0, &je);
	json_object_del(json_object_get(root, "files"), "part-0-inptr.npy");
	cr_assert_eq(json_dump_file(root, jpath, 0), 0);
	cr_assert_eq(load0(), -EINVAL);
	cr_assert(strstr(err, "part-0-inptr.npy"), "%s", err);
	/* a version 1 partition (before types and sums) */
	json_object_set_new(root, "format_version", json_integer(1));
	cr_assert_eq(json_dump_file(root, jpath, 0), 0);
	cr_assert_eq(load0(), -EPROTONOSUPPORT);
	cr_assert(strstr(err, "format_version 1") && strstr(err, "rdps partition --data") &&
		  strstr(err, "-k 2"), "%s", err);
	json_decref(root);
	spit(jpath, json0, jlen);
	cr_assert_eq(load0(), 0, "%s", err);
	free(orig);
	free(json0);
}
