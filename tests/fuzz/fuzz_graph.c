// SPDX-License-Identifier: MIT
/*
 * fuzz_graph: the graph partition loader (rdps_graph_part_load, what
 * rdps server --graph reads) on arbitrary files.
 *
 * Input: byte 0 picks the part to load (its low 2 bits), then sections
 * separated by FUZZ_SEP, each "NAME\n" followed by the file's bytes,
 * written into a private tmpfs directory emptied first (names of letters,
 * digits, '.', '_' and '-', not starting with '.'; other bytes dropped).
 * The harness knows no file of the format: the seeds are whole partition
 * directories as the writer makes them (fuzz_seeds packs every file), so
 * the target follows the format as it changes.
 *
 * Drives: rdps_graph_part_load (partition.json through jansson, the .npy
 * reader, every shape and range check, the CSR and edge checks) and, when
 * it loads, rdps_graph_part_tables (the tables a server is made with).
 *
 * Asserts: a failure returns a negative errno with a reason in err and
 * leaves *out alone; a loaded part gives tables a server can hold: named,
 * of a known dtype, rows of 1..RDPS_MAX_DIM words, read-only, offsets a
 * partition of the rows (0 .. num_rows, non-decreasing) over num_parts
 * servers, this part's rows all there (every byte is read: ASan sees an
 * allocation shorter than the table says); and graph:indptr's in-edge
 * ranges lie in this part's rows of graph:edges, each edge's destination
 * the node that lists it and its source a node of the graph (what sampling
 * reads, and what the server would otherwise answer with -EIO).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void check_part(const struct rdps_graph_part *p, uint32_t part)
{
	struct rdps_server_table_config *tables = calloc(RDPS_MAX_TABLES, sizeof(*tables));
	const struct rdps_server_table_config *ip = NULL, *ed = NULL;
	uint64_t ilo = 0, ihi = 0, elo = 0, ehi = 0;
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
		}
	}
	if (ip && ed) {
		const int64_t *rows = ip->rows, *edges = ed->rows;

		FUZZ_CHECK(ip->dtype == RDPS_DTYPE_I64 && ip->elems == 2);
		FUZZ_CHECK(ed->dtype == RDPS_DTYPE_I64 && ed->elems == 4);
		for (uint64_t v = ilo; v < ihi; v++) {
			int64_t b = rows[2 * (v - ilo)], e = rows[2 * (v - ilo) + 1];

			FUZZ_CHECK(b <= e && b >= (int64_t)elo && e <= (int64_t)ehi);
			for (int64_t j = b; j < e; j++) {
				const int64_t *r = edges + 4 * (uint64_t)(j - (int64_t)elo);

				FUZZ_CHECK(r[1] == (int64_t)v);
				FUZZ_CHECK(r[0] >= 0 && (uint64_t)r[0] < ip->num_rows);
				FUZZ_CHECK(r[2] >= 0 && r[3] >= 0 && (uint64_t)r[3] < ed->num_rows);
			}
		}
	}
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
