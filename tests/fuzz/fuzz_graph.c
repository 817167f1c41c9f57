// SPDX-License-Identifier: MIT
/*
 * fuzz_graph: the graph partition loader (rdps_graph_part_load, what
 * rdps server --graph reads) on arbitrary files.
 *
 * Input: byte 0 picks the part to load (its low 2 bits) and, with bit 2,
 * has the harness record every file's size and XXH3 in partition.json's
 * "files" after writing them (so mutated files get past the checksums to
 * the parsers; without it they are refused as damaged), then sections
 * separated by FUZZ_SEP, each "NAME\n" followed by the file's bytes,
 * written into a private tmpfs directory emptied first (names of letters,
 * digits, '.', '_' and '-', not starting with '.'; other bytes dropped).
 * The harness knows no file of the format: the seeds are whole partition
 * directories as the writer makes them (fuzz_seeds packs every file), so
 * the target follows the format as it changes.
 *
 * Drives: rdps_graph_part_load (partition.json through jansson, the
 * schema of node and edge types, the files' sizes and XXH3, the .npy
 * reader, every shape and range check, the in- and out-slot checks, node
 * and edge data) and, when it loads, rdps_graph_part_tables (the tables a
 * server is made with).
 *
 * Asserts: a failure returns a negative errno with a reason in err and
 * leaves *out alone; a loaded part gives tables a server can hold: named,
 * of a known dtype, rows of 1..RDPS_MAX_DIM words, read-only, offsets a
 * partition of the rows (0 .. num_rows, non-decreasing) over num_parts
 * servers, this part's rows all there (every byte is read: ASan sees an
 * allocation shorter than the table says); graph:indptr's in-slots are
 * ranges of this part's rows of graph:edges, each edge in exactly one
 * slot, a slot's edges all of one destination, a node of this part, their
 * sources nodes of the graph; graph:outptr's out-slots tile this part's
 * rows of graph:outedges in order, each out-edge into a node of the graph,
 * an edge id of the graph, increasing within its slot (what sampling
 * reads, and what the server would otherwise answer with -EIO).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "fuzz_common.h"
#include "rdps/graph.h"

#define MAX_FILES 64
#define MAX_NAME 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[300];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *work;

	fuzz_quiet_logs();
	work = fuzz_workdir();
	FUZZ_CHECK(work != NULL);
	snprintf(dir, sizeof(dir), "%s/part", work);
	return 0;
}

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d) {
		FUZZ_CHECK(errno == ENOENT);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			fuzz_remove_file(dir, e->d_name);
	closedir(d);
	FUZZ_CHECK(!rmdir(dir));
}

/* Rows of a table as a server holds them: offsets a partition of its rows
 * over the job's servers, this part's all readable. */
static void check_table(const struct rdps_server_table_config *t, uint32_t part,
			uint32_t parts, uint64_t *lo, uint64_t *hi)
{
	size_t bytes;
	uint8_t sum = 0;

	FUZZ_CHECK(memchr(t->name, '\0', sizeof(t->name)) && t->name[0]);
	FUZZ_CHECK(t->dtype >= 0 && t->dtype < RDPS_DTYPE_COUNT && t->elems >= 1);
	FUZZ_CHECK(rdps_dtype_row_words(t->dtype, t->elems) <= RDPS_MAX_DIM);
	FUZZ_CHECK(t->read_only && t->offsets);
	FUZZ_CHECK(t->offsets[0] == 0 && t->offsets[parts] == t->num_rows);
	for (uint32_t p = 0; p < parts; p++)
		FUZZ_CHECK(t->offsets[p] <= t->offsets[p + 1]);
	*lo = t->offsets[part];
	*hi = t->offsets[part + 1];
	bytes = (size_t)(*hi - *lo) * t->elems * rdps_dtype_size(t->dtype);
	FUZZ_CHECK(!bytes || t->rows);
	for (size_t i = 0; i < bytes; i++)
		sum ^= ((const uint8_t *)t->rows)[i];
	fuzz_note("table '%s': rows [%llu, %llu) of %llu, %u x %s (xor %02x)", t->name,
		  (unsigned long long)*lo, (unsigned long long)*hi,
		  (unsigned long long)t->num_rows, t->elems, rdps_dtype_name(t->dtype), sum);
}

/* In-slots: ranges of this part's edges, each edge in one slot, a slot's
 * edges into one node of this part, from nodes of the graph. */
static void check_in_slots(const struct rdps_graph_part *p, uint32_t part,
			   const struct rdps_server_table_config *ip,
			   const struct rdps_server_table_config *ed, uint64_t ilo, uint64_t ihi,
			   uint64_t elo, uint64_t ehi)
{
	const int64_t *rows = ip->rows, *edges = ed->rows;
	uint8_t *seen = calloc(ehi - elo + 1, 1);

	FUZZ_CHECK(seen != NULL);
	FUZZ_CHECK(ip->dtype == RDPS_DTYPE_I64 && ip->elems == 2);
	FUZZ_CHECK(ed->dtype == RDPS_DTYPE_I64 && ed->elems == 4);
	for (uint64_t v = ilo; v < ihi; v++) {
		int64_t b = rows[2 * (v - ilo)], e = rows[2 * (v - ilo) + 1];

		FUZZ_CHECK(b <= e && b >= (int64_t)elo && e <= (int64_t)ehi);
		for (int64_t j = b; j < e; j++) {
			const int64_t *r = edges + 4 * (uint64_t)(j - (int64_t)elo);

			FUZZ_CHECK(!seen[j - (int64_t)elo]++);
			FUZZ_CHECK(r[1] == edges[4 * (uint64_t)(b - (int64_t)elo) + 1]);
			FUZZ_CHECK(r[1] >= (int64_t)p->node_ranges[part] &&
				   r[1] < (int64_t)p->node_ranges[part + 1]);
			FUZZ_CHECK(r[0] >= 0 && (uint64_t)r[0] < p->num_nodes);
			FUZZ_CHECK(r[2] >= 0 && r[3] >= 0);
		}
	}
	for (uint64_t j = 0; j < ehi - elo; j++)
		FUZZ_CHECK(seen[j]); /* every edge in a slot */
	free(seen);
}

/* Out-slots: they tile this part's out-edges in order; each out-edge into
 * a node of the graph, an edge of the graph, increasing in its slot. */
static void check_out_slots(const struct rdps_graph_part *p,
			    const struct rdps_server_table_config *op,
			    const struct rdps_server_table_config *oe, uint64_t olo, uint64_t ohi,
			    uint64_t oelo, uint64_t oehi)
{
	const int64_t *rows = op->rows, *outs = oe->rows;
	int64_t at = (int64_t)oelo;

	FUZZ_CHECK(op->dtype == RDPS_DTYPE_I64 && op->elems == 2);
	FUZZ_CHECK(oe->dtype == RDPS_DTYPE_I64 && oe->elems == 3);
	for (uint64_t v = olo; v < ohi; v++) {
		int64_t b = rows[2 * (v - olo)], e = rows[2 * (v - olo) + 1];

		FUZZ_CHECK(b == at && e >= b && e <= (int64_t)oehi);
		for (int64_t x = b; x < e; x++) {
			const int64_t *o = outs + 3 * (uint64_t)(x - (int64_t)oelo);

			FUZZ_CHECK(o[0] >= 0 && (uint64_t)o[0] < p->num_nodes);
			FUZZ_CHECK(o[1] >= 0 && (uint64_t)o[1] < p->num_edges && o[2] >= 0);
			FUZZ_CHECK(x == b || o[1] > o[-2]);
		}
		at = e;
	}
	FUZZ_CHECK(at == (int64_t)oehi);
}

/* Records every file of the directory in partition.json's "files" it
 * names, with its size and XXH3, as the writer does. */
static void fix_checksums(void)
{
	char path[400];
	json_error_t je;
	json_t *root, *files, *f;
	const char *name;

	snprintf(path, sizeof(path), "%s/partition.json", dir);
	root = json_load_file(path, 0, &je);
	files = root ? json_object_get(root, "files") : NULL;
	if (!json_is_object(files)) {
		json_decref(root);
		return;
	}
	json_object_foreach(files, name, f) {
		char fp[400], hex[17];
		FILE *in;
		uint8_t *buf;
		long n;

		if (!json_is_object(f) || strchr(name, '/'))
			continue;
		snprintf(fp, sizeof(fp), "%s/%s", dir, name);
		if (!(in = fopen(fp, "rb")))
			continue;
		fseek(in, 0, SEEK_END);
		n = ftell(in);
		rewind(in);
		buf = malloc((size_t)n + 1);
		FUZZ_CHECK(buf && fread(buf, 1, (size_t)n, in) == (size_t)n);
		fclose(in);
		snprintf(hex, sizeof(hex), "%016llx",
			 (unsigned long long)XXH3_64bits(buf, (size_t)n));
		free(buf);
		json_object_set_new(f, "bytes", json_integer(n));
		json_object_set_new(f, "xxh3", json_string(hex));
	}
	FUZZ_CHECK(!json_dump_file(root, path, 0));
	json_decref(root);
}

static void check_part(const struct rdps_graph_part *p, uint32_t part)
{
	struct rdps_server_table_config *tables = calloc(RDPS_MAX_TABLES, sizeof(*tables));
	const struct rdps_server_table_config *ip = NULL, *ed = NULL, *op = NULL, *oe = NULL;
	uint64_t ilo = 0, ihi = 0, elo = 0, ehi = 0, olo = 0, ohi = 0, oelo = 0, oehi = 0;
	int n;

	FUZZ_CHECK(tables != NULL);
	FUZZ_CHECK(p->num_parts >= 1 && part < p->num_parts);
	n = rdps_graph_part_tables(p, tables, RDPS_MAX_TABLES);
	FUZZ_CHECK(n > 0 && n <= RDPS_MAX_TABLES);
	for (int i = 0; i < n; i++) {
		uint64_t lo, hi;

		check_table(&tables[i], part, p->num_parts, &lo, &hi);
		if (!strcmp(tables[i].name, RDPS_GRAPH_INDPTR)) {
			ip = &tables[i];
			ilo = lo;
			ihi = hi;
		} else if (!strcmp(tables[i].name, RDPS_GRAPH_EDGES)) {
			ed = &tables[i];
			elo = lo;
			ehi = hi;
		} else if (!strcmp(tables[i].name, RDPS_GRAPH_OUTPTR)) {
			op = &tables[i];
			olo = lo;
			ohi = hi;
		} else if (!strcmp(tables[i].name, RDPS_GRAPH_OUTEDGES)) {
			oe = &tables[i];
			oelo = lo;
			oehi = hi;
		}
	}
	if (ip && ed)
		check_in_slots(p, part, ip, ed, ilo, ihi, elo, ehi);
	if (op && oe)
		check_out_slots(p, op, oe, olo, ohi, oelo, oehi);
	free(tables);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sec[MAX_FILES];
	size_t seclen[MAX_FILES], nsec;
	static struct rdps_graph_part untouched;
	struct rdps_graph_part *p = &untouched; /* a failure leaves it */
	char err[512] = "";
	uint32_t part;
	int ret;

	if (size < 1)
		return 0;
	part = data[0] & 3;
	empty_dir();
	FUZZ_CHECK(!mkdir(dir, 0700));
	nsec = fuzz_split(data + 1, size - 1, sec, seclen, MAX_FILES);
	for (size_t i = 0; i < nsec; i++) {
		const uint8_t *nl = memchr(sec[i], '\n', seclen[i] < MAX_NAME ? seclen[i] : MAX_NAME);
		char name[MAX_NAME + 1];
		size_t n = 0;

		if (!nl)
			continue;
		for (const uint8_t *c = sec[i]; c < nl; c++)
			if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			    (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')
				name[n++] = (char)*c;
		name[n] = '\0';
		if (!n || name[0] == '.')
			continue;
		fuzz_write_file(dir, name, nl + 1, seclen[i] - (size_t)(nl + 1 - sec[i]));
	}
	if (data[0] & 4)
		fix_checksums();
	ret = rdps_graph_part_load(dir, part, &p, err, sizeof(err));
	fuzz_note("part %u: %d %s", part, ret, ret ? err : "loaded");
	if (ret) {
		FUZZ_CHECK(ret < 0);
		FUZZ_CHECK(ret == -ENOMEM || err[0]);
		FUZZ_CHECK(p == &untouched);
		return 0;
	}
	FUZZ_CHECK(p != NULL && p != &untouched);
	check_part(p, part);
	rdps_graph_part_free(p);
	return 0;
}
