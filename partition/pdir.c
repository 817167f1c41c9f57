// SPDX-License-Identifier: MIT
/* Reading a partition directory: partition.json and its binary files. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "rdps/common.h"
#include "rdps/partition.h"

struct rdps_partition {
	char *dir;
	char *json_path;
	json_t *root;                      /* owns the strings info points to */
	struct rdps_partition_info info;
	uint64_t *ranges;
	struct rdps_partition_part *parts;
	const char *file_idmap;
	const char *file_split[RDPS_SPLIT_COUNT];
	const char *file_dict[2];          /* copies of entities.dict, relations.dict */
};

static int field_u64(struct rdps_partition *p, json_t *obj, const char *where,
		     const char *key, uint64_t *v, char *err, size_t errlen)
{
	json_t *j = json_object_get(obj, key);

	if (!j || !json_is_integer(j) || json_integer_value(j) < 0)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field %s%s: %s", p->json_path, where, key,
				    j ? "not a non-negative integer" : "missing");
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int field_str(struct rdps_partition *p, json_t *obj, const char *where,
		     const char *key, const char **v, char *err, size_t errlen)
{
	json_t *j = json_object_get(obj, key);

	if (!j || !json_is_string(j))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field %s%s: %s",
				    p->json_path, where, key, j ? "not a string" : "missing");
	*v = json_string_value(j);
	return 0;
}

/* A file name inside the directory: no '/' and not "." or "..". */
static int check_name(struct rdps_partition *p, const char *field, const char *name,
		      char *err, size_t errlen)
{
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field %s: bad file name '%s'",
				    p->json_path, field, name);
	return 0;
}

static int parse_parts(struct rdps_partition *p, char *err, size_t errlen)
{
	struct rdps_partition_info *in = &p->info;
	json_t *arr = json_object_get(p->root, "partitions");
	uint64_t sum = 0;
	int ret;

	if (!json_is_array(arr) || json_array_size(arr) != in->k)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field partitions: %s (want an array of k=%u entries)",
				    p->json_path, arr ? "wrong type or size" : "missing", in->k);
	p->parts = calloc(in->k, sizeof(*p->parts));
	if (!p->parts)
		return -ENOMEM;
	for (uint32_t i = 0; i < in->k; i++) {
		struct rdps_partition_part *pp = &p->parts[i];
		json_t *o = json_array_get(arr, i);
		const char *sum_hex = NULL;
		char where[40], *end;
		uint64_t idx = 0;

		snprintf(where, sizeof(where), "partitions[%u].", i);
		if (!json_is_object(o))
			return rdps_pt_fail(err, errlen, -EINVAL, "%s: field partitions[%u]: not an object",
					    p->json_path, i);
		if ((ret = field_u64(p, o, where, "index", &idx, err, errlen)) ||
		    (ret = field_str(p, o, where, "file", &pp->file, err, errlen)) ||
		    (ret = field_u64(p, o, where, "num_entities", &pp->num_entities, err, errlen)) ||
		    (ret = field_u64(p, o, where, "num_triples", &pp->num_triples, err, errlen)) ||
		    (ret = field_u64(p, o, where, "local_triples", &pp->local_triples, err, errlen)) ||
		    (ret = field_str(p, o, where, "checksum", &sum_hex, err, errlen)))
			return ret;
		if (idx != i)
			return rdps_pt_fail(err, errlen, -EINVAL, "%s: field %sindex: %" PRIu64 ", expected %u",
					    p->json_path, where, idx, i);
		strcat(where, "file");
		if ((ret = check_name(p, where, pp->file, err, errlen)))
			return ret;
		pp->checksum = strtoull(sum_hex, &end, 16);
		if (strlen(sum_hex) != 16 || *end)
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s: field partitions[%u].checksum: want 16 hex digits",
					    p->json_path, i);
		if (pp->num_entities != in->ranges[i + 1] - in->ranges[i])
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s: field partitions[%u].num_entities: %" PRIu64 " does not match ranges (%" PRIu64 ")",
					    p->json_path, i, pp->num_entities,
					    in->ranges[i + 1] - in->ranges[i]);
		if (pp->local_triples > pp->num_triples)
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s: field partitions[%u].local_triples: more than num_triples",
					    p->json_path, i);
		sum += pp->num_triples;
	}
	if (sum != in->num_triples[RDPS_SPLIT_TRAIN])
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field partitions: triples sum to %" PRIu64 ", num_train is %" PRIu64,
				    p->json_path, sum, in->num_triples[RDPS_SPLIT_TRAIN]);
	in->parts = p->parts;
	return 0;
}

static int parse(struct rdps_partition *p, char *err, size_t errlen)
{
	struct rdps_partition_info *in = &p->info;
	json_t *ver = json_object_get(p->root, "format_version");
	json_t *ds, *arr, *files, *frac;
	const char *method;
	uint64_t v;
	int ret;

	if (!ver || !json_is_integer(ver))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field format_version: %s",
				    p->json_path, ver ? "not an integer" : "missing");
	if (json_integer_value(ver) != RDPS_PARTITION_FORMAT_VERSION)
		return rdps_pt_fail(err, errlen, -EPROTONOSUPPORT,
				    "%s: field format_version: version %lld is not supported (this build reads version %d; re-run rdps partition)",
				    p->json_path, (long long)json_integer_value(ver),
				    RDPS_PARTITION_FORMAT_VERSION);
	in->format_version = RDPS_PARTITION_FORMAT_VERSION;
	ds = json_object_get(p->root, "dataset");
	if (!json_is_object(ds))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field dataset: %s",
				    p->json_path, ds ? "not an object" : "missing");
	if ((ret = field_str(p, ds, "dataset.", "name", &in->dataset_name, err, errlen)) ||
	    (ret = field_str(p, ds, "dataset.", "path", &in->dataset_path, err, errlen)) ||
	    (ret = field_u64(p, ds, "dataset.", "train_bytes", &in->dataset_bytes[0], err, errlen)) ||
	    (ret = field_u64(p, ds, "dataset.", "valid_bytes", &in->dataset_bytes[1], err, errlen)) ||
	    (ret = field_u64(p, ds, "dataset.", "test_bytes", &in->dataset_bytes[2], err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "num_entities", &in->num_entities, err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "num_relations", &in->num_relations, err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "num_train", &in->num_triples[0], err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "num_valid", &in->num_triples[1], err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "num_test", &in->num_triples[2], err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "k", &v, err, errlen)) ||
	    (ret = field_str(p, p->root, "", "method", &method, err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "seed", &in->seed, err, errlen)) ||
	    (ret = field_u64(p, p->root, "", "edge_cut", &in->edge_cut, err, errlen)))
		return ret;
	if (in->num_entities == 0 || in->num_entities > UINT32_MAX - 1 ||
	    in->num_relations == 0 || in->num_relations > UINT32_MAX - 1)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field num_entities/num_relations: out of range",
				    p->json_path);
	if (v == 0 || v > in->num_entities)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field k: %" PRIu64 " (want 1..num_entities)", p->json_path, v);
	in->k = (uint32_t)v;
	if (rdps_partition_method_parse(method, &in->method))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field method: unknown '%s'",
				    p->json_path, method);
	frac = json_object_get(p->root, "local_triple_fraction");
	if (!json_is_number(frac) || json_number_value(frac) < 0 ||
	    json_number_value(frac) > 1)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field local_triple_fraction: %s", p->json_path,
				    frac ? "not a number in 0..1" : "missing");
	in->local_triple_fraction = json_number_value(frac);
	arr = json_object_get(p->root, "ranges");
	if (!json_is_array(arr) || json_array_size(arr) != (size_t)in->k + 1)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field ranges: %s (want k+1=%u offsets)", p->json_path,
				    arr ? "wrong type or size" : "missing", in->k + 1);
	p->ranges = calloc((size_t)in->k + 1, sizeof(uint64_t));
	if (!p->ranges)
		return -ENOMEM;
	for (uint32_t i = 0; i <= in->k; i++) {
		json_t *j = json_array_get(arr, i);

		if (!json_is_integer(j) || json_integer_value(j) < 0 ||
		    (i && (uint64_t)json_integer_value(j) < p->ranges[i - 1]))
			return rdps_pt_fail(err, errlen, -EINVAL,
					    "%s: field ranges[%u]: not a non-decreasing offset",
					    p->json_path, i);
		p->ranges[i] = (uint64_t)json_integer_value(j);
	}
	if (p->ranges[0] != 0 || p->ranges[in->k] != in->num_entities)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s: field ranges: must start at 0 and end at num_entities (%" PRIu64 ")",
				    p->json_path, in->num_entities);
	in->ranges = p->ranges;
	files = json_object_get(p->root, "files");
	if (!json_is_object(files))
		return rdps_pt_fail(err, errlen, -EINVAL, "%s: field files: %s",
				    p->json_path, files ? "not an object" : "missing");
	if ((ret = field_str(p, files, "files.", "idmap", &p->file_idmap, err, errlen)) ||
	    (ret = field_str(p, files, "files.", "valid", &p->file_split[RDPS_SPLIT_VALID], err, errlen)) ||
	    (ret = field_str(p, files, "files.", "test", &p->file_split[RDPS_SPLIT_TEST], err, errlen)) ||
	    (ret = check_name(p, "files.idmap", p->file_idmap, err, errlen)) ||
	    (ret = check_name(p, "files.valid", p->file_split[RDPS_SPLIT_VALID], err, errlen)) ||
	    (ret = check_name(p, "files.test", p->file_split[RDPS_SPLIT_TEST], err, errlen)))
		return ret;
	/* The dict copies were listed from the first version on; read them
	 * leniently all the same (their default names) since only the dataset
	 * check uses them. */
	for (int i = 0; i < 2; i++) {
		static const char *const key[2] = { "entities", "relations" };
		static const char *const def[2] = { "entities.dict", "relations.dict" };
		json_t *f = json_object_get(files, key[i]);

		p->file_dict[i] = json_is_string(f) ? json_string_value(f) : def[i];
		if ((ret = check_name(p, i ? "files.relations" : "files.entities", p->file_dict[i],
				      err, errlen)))
			return ret;
	}
	return parse_parts(p, err, errlen);
}

int rdps_partition_open(const char *dir, struct rdps_partition **out, char *err,
			size_t errlen)
{
	struct rdps_partition *p;
	json_error_t je;
	int ret;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->dir = strdup(dir);
	p->json_path = rdps_pt_join(dir, "partition.json");
	if (!p->dir || !p->json_path) {
		ret = -ENOMEM;
		goto err_close;
	}
	p->root = json_load_file(p->json_path, JSON_REJECT_DUPLICATES, &je);
	if (!p->root) {
		if (json_error_code(&je) == json_error_cannot_open_file)
			ret = rdps_pt_fail(err, errlen, -ENOENT, "%s: %s", p->json_path, je.text);
		else
			ret = rdps_pt_fail(err, errlen, -EINVAL, "%s:%d: %s", p->json_path,
					   je.line, je.text);
		goto err_close;
	}
	if (!json_is_object(p->root)) {
		ret = rdps_pt_fail(err, errlen, -EINVAL, "%s: not a JSON object", p->json_path);
		goto err_close;
	}
	ret = parse(p, err, errlen);
	if (ret)
		goto err_close;
	*out = p;
	return 0;

err_close:
	rdps_partition_close(p);
	return ret;
}

void rdps_partition_close(struct rdps_partition *p)
{
	if (!p)
		return;
	json_decref(p->root);
	free(p->parts);
	free(p->ranges);
	free(p->json_path);
	free(p->dir);
	free(p);
}

const struct rdps_partition_info *rdps_partition_get_info(const struct rdps_partition *p)
{
	return &p->info;
}

const char *rdps_partition_dir(const struct rdps_partition *p)
{
	return p->dir;
}

uint32_t rdps_partition_owner(const struct rdps_partition_info *info, uint64_t id)
{
	uint32_t lo = 0, hi = info->k; /* ranges[lo] <= id < ranges[hi] */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (info->ranges[mid] <= id)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Appends one difference ("; "-separated) to the message being built. */
static void add_diff(char *msg, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void add_diff(char *msg, size_t cap, const char *fmt, ...)
{
	size_t len = strlen(msg);
	va_list ap;

	if (len && len + 2 < cap) {
		memcpy(msg + len, "; ", 3);
		len += 2;
	}
	if (len + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(msg + len, cap - len, fmt, ap);
	va_end(ap);
}

/* A dict of the dataset against the partition's copy of it. Returns 1 if it
 * differs (described into msg), 0 if not or if there is no copy to compare. */
static int check_dict(const struct rdps_partition *p, const char *data_dir, int i, char *msg,
		      size_t cap)
{
	static const char *const names[2] = { "entities.dict", "relations.dict" };
	char *mine = rdps_pt_join(data_dir, names[i]), *copy = rdps_pt_join(p->dir, p->file_dict[i]);
	struct rdps_pt_linediff d;
	char why[512];
	int ret = 0;

	if (!mine || !copy) {
		add_diff(msg, cap, "out of memory comparing %s", names[i]);
		ret = 1;
	} else if (access(copy, R_OK)) {
		ret = 0; /* a partition made by hand: the counts are still compared */
	} else if (rdps_pt_diff_lines(mine, copy, &d, why, sizeof(why))) {
		add_diff(msg, cap, "%s", why);
		ret = 1;
	} else if (d.line) {
		unsigned long long l = (unsigned long long)d.line;

		if (d.ended == 1)
			add_diff(msg, cap, "%s ends after line %llu, the copy %s goes on (line %llu: "
				 "'%s'): cut short", mine, l - 1, copy, l, d.b);
		else if (d.ended == 2)
			add_diff(msg, cap, "%s:%llu: '%s' is not in the copy %s, which ends after "
				 "line %llu", mine, l, d.a, copy, l - 1);
		else
			add_diff(msg, cap, "%s:%llu is '%s', the copy %s:%llu has '%s'", mine, l, d.a,
				 copy, l, d.b);
		ret = 1;
	}
	free(mine);
	free(copy);
	return ret;
}

/* A split file of the dataset against the size partition.json recorded.
 * Returns 1 if it differs (described into msg). */
static int check_split(const struct rdps_partition *p, const char *data_dir, int s, char *msg,
		       size_t cap)
{
	uint64_t want = p->info.dataset_bytes[s];
	struct rdps_pt_textinfo ti;
	struct stat st;
	char name[16], why[512], *path;
	int ret = 1;

	snprintf(name, sizeof(name), "%s.txt", rdps_dataset_split_name((enum rdps_split)s));
	path = rdps_pt_join(data_dir, name);
	if (!path) {
		add_diff(msg, cap, "out of memory comparing %s", name);
		return 1;
	}
	if (!stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == want)
		ret = 0; /* the common case reads nothing */
	else if (rdps_pt_text_info(path, &ti, why, sizeof(why)))
		add_diff(msg, cap, "%s", why);
	else if (ti.bytes == want)
		ret = 0;
	else if (ti.bytes < want && !ti.ends_in_newline)
		add_diff(msg, cap, "%s:%llu: the file ends in the middle of this line: cut short "
			 "(%llu bytes, %llu when %s was built)", path, (unsigned long long)ti.lines,
			 (unsigned long long)ti.bytes, (unsigned long long)want, p->dir);
	else
		add_diff(msg, cap, "%s has %llu bytes (%llu lines), %llu when %s was built", path,
			 (unsigned long long)ti.bytes, (unsigned long long)ti.lines,
			 (unsigned long long)want, p->dir);
	free(path);
	return ret;
}

int rdps_partition_check_dataset(const struct rdps_partition *p, const char *data_dir,
				 char *err, size_t errlen)
{
	char msg[1024] = "";
	int splits = 0, dicts = 0;

	for (int i = 0; i < 2; i++)
		dicts += check_dict(p, data_dir, i, msg, sizeof(msg));
	for (int s = 0; s < RDPS_SPLIT_COUNT; s++)
		splits += check_split(p, data_dir, s, msg, sizeof(msg));
	if (!dicts && !splits)
		return 0;
	/* Damage or an edit touches a file or two; a dataset of its own differs
	 * in every split. */
	if (splits == RDPS_SPLIT_COUNT)
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "%s is a partition of another dataset ('%s' at %s): %s", p->dir,
				    p->info.dataset_name, p->info.dataset_path, msg);
	return rdps_pt_fail(err, errlen, -EINVAL,
			    "%s (damaged, or edited after %s was built from it)", msg, p->dir);
}

/* Loads a triples blob, checks its header against expectations and every id
 * against the counts; part != RDPS_BLOB_NO_PART also checks head ownership. */
static int load_triples(const struct rdps_partition *p, const char *file,
			uint32_t part, uint64_t expect_count, uint64_t expect_sum,
			int check_sum, const struct rdps_loader_opts *o,
			struct rdps_triples *out, char *err, size_t errlen)
{
	const struct rdps_partition_info *in = &p->info;
	struct rdps_blob blob;
	char *path = rdps_pt_join(p->dir, file);
	uint64_t lo = 0, hi = in->num_entities;
	const uint32_t *ids;
	int ret;

	out->ids = NULL;
	out->count = 0;
	if (!path)
		return -ENOMEM;
	ret = rdps_loader_load(path, RDPS_BLOB_TRIPLES, o, &blob, err, errlen);
	if (ret)
		goto err_free_path;
	if (blob.hdr.record_size != 12 || blob.hdr.id_width != 4) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field id_width: %u-byte ids in %u-byte records; this build reads 4-byte ids",
				   path, blob.hdr.id_width, blob.hdr.record_size);
		goto err_free_blob;
	}
	if (blob.hdr.count != expect_count || blob.hdr.part != part ||
	    (check_sum && blob.hdr.payload_xxh3 != expect_sum)) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field %s: header does not match partition.json (file from another partitioning?)",
				   path, blob.hdr.count != expect_count ? "count" :
				   blob.hdr.part != part ? "part" : "payload_xxh3");
		goto err_free_blob;
	}
	if (part != RDPS_BLOB_NO_PART) {
		lo = in->ranges[part];
		hi = in->ranges[part + 1];
	}
	ids = blob.data;
	for (uint64_t i = 0; i < blob.hdr.count; i++) {
		const uint32_t *t = ids + 3 * i;

		if (t[0] < lo || t[0] >= hi || t[1] >= in->num_relations ||
		    t[2] >= in->num_entities) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s: triple %" PRIu64 " (%u %u %u) out of range%s",
					   path, i, t[0], t[1], t[2],
					   part != RDPS_BLOB_NO_PART ? " or head not in this part" : "");
			goto err_free_blob;
		}
	}
	out->ids = blob.data;
	out->count = blob.hdr.count;
	free(path);
	return 0;

err_free_blob:
	rdps_loader_blob_free(&blob);
err_free_path:
	free(path);
	return ret;
}

int rdps_partition_load_train(const struct rdps_partition *p, uint32_t part,
			      const struct rdps_loader_opts *o,
			      struct rdps_triples *out, char *err, size_t errlen)
{
	if (part >= p->info.k) {
		out->ids = NULL;
		out->count = 0;
		return rdps_pt_fail(err, errlen, -EINVAL, "part %u: out of range (k=%u)",
				    part, p->info.k);
	}
	return load_triples(p, p->parts[part].file, part, p->parts[part].num_triples,
			    p->parts[part].checksum, 1, o, out, err, errlen);
}

int rdps_partition_load_split(const struct rdps_partition *p,
			      enum rdps_split split,
			      const struct rdps_loader_opts *o,
			      struct rdps_triples *out, char *err, size_t errlen)
{
	if (split != RDPS_SPLIT_VALID && split != RDPS_SPLIT_TEST) {
		out->ids = NULL;
		out->count = 0;
		return rdps_pt_fail(err, errlen, -EINVAL,
				    "split: only valid and test are stored whole (train is per part)");
	}
	return load_triples(p, p->file_split[split], RDPS_BLOB_NO_PART,
			    p->info.num_triples[split], 0, 0, o, out, err, errlen);
}

int rdps_partition_load_idmap(const struct rdps_partition *p,
			      const struct rdps_loader_opts *o,
			      uint32_t **new_to_old, uint32_t **old_to_new,
			      char *err, size_t errlen)
{
	uint64_t n = p->info.num_entities;
	struct rdps_blob blob;
	uint32_t *inv = NULL, *map;
	char *path = rdps_pt_join(p->dir, p->file_idmap);
	int ret;

	*new_to_old = NULL;
	if (old_to_new)
		*old_to_new = NULL;
	if (!path)
		return -ENOMEM;
	ret = rdps_loader_load(path, RDPS_BLOB_IDMAP, o, &blob, err, errlen);
	if (ret)
		goto err_free_path;
	if (blob.hdr.record_size != 4 || blob.hdr.count != n) {
		ret = rdps_pt_fail(err, errlen, -EINVAL,
				   "%s: field count: %" PRIu64 " ids of %u bytes, partition.json has %" PRIu64 " entities",
				   path, blob.hdr.count, blob.hdr.record_size, n);
		goto err_free_blob;
	}
	map = blob.data;
	inv = malloc(n * sizeof(uint32_t));
	if (!inv) {
		ret = -ENOMEM;
		goto err_free_blob;
	}
	memset(inv, 0xff, n * sizeof(uint32_t));
	for (uint64_t i = 0; i < n; i++) {
		if (map[i] >= n || inv[map[i]] != UINT32_MAX) {
			ret = rdps_pt_fail(err, errlen, -EINVAL,
					   "%s: entry %" PRIu64 ": %u is out of range or repeated (not a permutation)",
					   path, i, map[i]);
			goto err_free_inv;
		}
		inv[map[i]] = (uint32_t)i;
	}
	*new_to_old = map;
	if (old_to_new)
		*old_to_new = inv;
	else
		free(inv);
	free(path);
	return 0;

err_free_inv:
	free(inv);
err_free_blob:
	rdps_loader_blob_free(&blob);
err_free_path:
	free(path);
	return ret;
}
