// SPDX-License-Identifier: MIT
/*
 * rdps bench load: partition loading throughput - the io_uring loader
 * against the same loader forced to plain pread, against a memcpy of the
 * same bytes, in the same run - cold-ish (page cache dropped for the file
 * with posix_fadvise(DONTNEED) before each read) and warm. Also the
 * partitioner's time and peak memory against the CSR graph size.
 *
 * The data: a synthetic graph (rdps_dataset_synth) partitioned with
 * rdps_partition_build, both in --workdir; the loader reads every part file.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf/bench.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"

#define MAX_REPS 32

struct load_opts {
	const char *workdir;
	uint64_t entities, triples, relations, communities, parts, reps;
	enum rdps_partition_method method;
	bool reuse;
	const char *partition; /* an existing partition: load only */
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench load [options]\n"
"\n"
"Partition loading throughput: the io_uring loader (rdps_loader_load, checksum\n"
"verified while reading) vs the same loader forced to pread vs a memcpy of the\n"
"same bytes, cold (posix_fadvise DONTNEED on the file before each read) and\n"
"warm; also the raw reads without checksum. Before that it generates a\n"
"synthetic graph and partitions it, reporting partition time and peak memory\n"
"against the CSR graph size.\n"
"Output: JSON lines (bench \"partition\", \"load\") on stdout, a table on stderr.\n"
"\n"
"  --workdir DIR        where the dataset and partition go (default\n"
"                       /tmp/rdps-bench-load; created)\n"
"  --entities N         (default 1M; k/M/G suffixes)\n"
"  --triples N          (default 10M)\n"
"  --relations N        (default 32)\n"
"  --communities N      (default 64)\n"
"  --parts K            (default 2)\n"
"  --method metis|random   (default metis)\n"
"  --reps N             rounds per cache state (default 3): each round reads\n"
"                       with every method, in an order rotated per round;\n"
"                       the median of each method is reported\n"
"  --reuse              keep an existing dataset in --workdir (the partition\n"
"                       is always rebuilt, to time it)\n"
"  --partition PDIR     load this existing partition instead (no dataset and\n"
"                       no partitioning: the loading figures only)\n"
"  -h, --help           this text\n");
}

static int drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return ret;
}

enum method { M_URING, M_PREAD, M_URING_RAW, M_PREAD_RAW, M_MEMCPY, M_COUNT };
static const char *const method_names[M_COUNT] = {
	"io_uring", "pread", "io_uring_raw", "pread_raw", "memcpy",
};

/* One timed read of every part file with method m; returns seconds. */
static double timed_load(const struct rdps_partition *p, const struct rdps_partition_info *pi,
			 enum method m, bool cold, void *dst, const void *src, size_t total,
			 int *used_uring, char *err, size_t errlen)
{
	struct rdps_loader_opts lo = { .force_pread = m == M_PREAD || m == M_PREAD_RAW };
	char path[4096];
	double secs = 0;

	if (m == M_MEMCPY) {
		uint64_t t0 = rdps_now_ns();

		memcpy(dst, src, total);
		return (rdps_now_ns() - t0) / 1e9;
	}
	for (uint32_t k = 0; k < pi->k; k++) {
		uint64_t t0;
		int ret;

		snprintf(path, sizeof(path), "%s/%s", rdps_partition_dir(p), pi->parts[k].file);
		if (cold && (ret = drop_cache(path))) {
			snprintf(err, errlen, "posix_fadvise %s: %s", path, rdps_strerror(ret));
			return ret;
		}
		t0 = rdps_now_ns();
		if (m == M_URING || m == M_PREAD) {
			struct rdps_blob b;

			ret = rdps_loader_load(path, RDPS_BLOB_TRIPLES, &lo, &b, err, errlen);
			if (!ret) {
				if (m == M_URING)
					*used_uring = b.used_uring;
				rdps_loader_blob_free(&b);
			}
		} else {
			void *buf = NULL;
			size_t len;

			ret = rdps_loader_read_file(path, &lo, &buf, &len, NULL, err, errlen);
			free(buf);
		}
		if (ret)
			return ret;
		secs += (rdps_now_ns() - t0) / 1e9;
	}
	return secs;
}

int rdps_bench_load(int argc, char **argv)
{
	enum { O_WORKDIR = 256, O_ENT, O_TRI, O_REL, O_COMM, O_PARTS, O_METHOD, O_REPS, O_REUSE,
	       O_PDIR };
	static const struct option lopts[] = {
		{ "workdir", required_argument, NULL, O_WORKDIR },
		{ "entities", required_argument, NULL, O_ENT },
		{ "triples", required_argument, NULL, O_TRI },
		{ "relations", required_argument, NULL, O_REL },
		{ "communities", required_argument, NULL, O_COMM },
		{ "parts", required_argument, NULL, O_PARTS },
		{ "method", required_argument, NULL, O_METHOD },
		{ "reps", required_argument, NULL, O_REPS },
		{ "reuse", no_argument, NULL, O_REUSE },
		{ "partition", required_argument, NULL, O_PDIR },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct load_opts o = {
		.workdir = "/tmp/rdps-bench-load", .entities = 1000000, .triples = 10000000,
		.relations = 32, .communities = 64, .parts = 2, .reps = 3,
		.method = RDPS_PARTITION_METIS,
	};
	struct rdps_synth_opts so;
	struct rdps_dataset_stats st;
	struct rdps_partition_opts po;
	struct rdps_partition_result pr;
	struct rdps_partition *p = NULL;
	const struct rdps_partition_info *pi;
	char data[4096], pdir[4096], err[1024];
	void *src = NULL, *dst = NULL;
	size_t total = 0;
	double limit_gbs[2] = { NAN, NAN }, pread_gbs[2] = { NAN, NAN };
	struct stat sb;
	int opt, li = 0, ret, rc = 1;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, &li)) != -1) {
		switch (opt) {
		case O_WORKDIR: o.workdir = optarg; break;
		case O_ENT: if (bench_parse_u64(optarg, 2, UINT32_MAX, &o.entities)) goto bad; break;
		case O_TRI: if (bench_parse_u64(optarg, 2, 1ull << 36, &o.triples)) goto bad; break;
		case O_REL: if (bench_parse_u64(optarg, 1, 1u << 20, &o.relations)) goto bad; break;
		case O_COMM: if (bench_parse_u64(optarg, 1, UINT32_MAX, &o.communities)) goto bad; break;
		case O_PARTS: if (bench_parse_u64(optarg, 1, 1024, &o.parts)) goto bad; break;
		case O_METHOD:
			if (rdps_partition_method_parse(optarg, &o.method))
				goto bad;
			break;
		case O_REPS: if (bench_parse_u64(optarg, 1, MAX_REPS, &o.reps)) goto bad; break;
		case O_REUSE: o.reuse = true; break;
		case O_PDIR: o.partition = optarg; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench load: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.partition) {
		snprintf(pdir, sizeof(pdir), "%s", o.partition);
		goto load;
	}
	if (mkdir(o.workdir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rdps bench load: cannot create %s: %s\n", o.workdir, strerror(errno));
		return 1;
	}
	snprintf(data, sizeof(data), "%s/kg", o.workdir);
	snprintf(pdir, sizeof(pdir), "%s/part", o.workdir);

	/* The graph. */
	snprintf(err, sizeof(err), "%s/entities.dict", data);
	if (!o.reuse || stat(err, &sb)) {
		uint64_t t0 = rdps_now_ns();
		struct bench_json j;

		rdps_dataset_synth_defaults(&so);
		so.num_entities = o.entities;
		so.num_relations = (uint32_t)o.relations;
		so.num_triples = o.triples;
		so.num_communities = (uint32_t)(o.communities < o.entities ? o.communities : o.entities);
		so.num_valid = so.num_test = o.triples / 1000 < 1000 ? o.triples / 1000 : 1000;
		so.seed = 1;
		so.force = 1;
		ret = rdps_dataset_synth(data, &so, &st, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rdps bench load: synth: %s\n", err);
			return 1;
		}
		bench_json_begin(&j, "synth");
		bench_json_int(&j, "entities", st.num_entities);
		bench_json_int(&j, "triples", st.num_triples[0] + st.num_triples[1] + st.num_triples[2]);
		bench_json_num(&j, "seconds", (rdps_now_ns() - t0) / 1e9);
		bench_json_end(&j);
	}

	/* Partitioning: time and peak memory against the CSR size. */
	po = (struct rdps_partition_opts){ .data_dir = data, .out_dir = pdir, .k = (uint32_t)o.parts,
					   .method = o.method, .seed = 0, .force = 1 };
	ret = rdps_partition_build(&po, &pr, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench load: partition: %s\n", err);
		return 1;
	}
	{
		/* METIS input: xadj (N+1), vwgt (2N, two constraints), adjncy and
		 * adjwgt (2 entries per undirected edge, at most one edge per
		 * triple), all 32-bit: an upper bound of the CSR graph. */
		double csr = 4.0 * (pr.num_entities + 1) + 8.0 * pr.num_entities +
			     16.0 * pr.num_train;
		double peak = pr.peak_rss_kib * 1024.0;
		struct bench_json j;

		bench_json_begin(&j, "partition");
		bench_json_str(&j, "method", rdps_partition_method_name(o.method));
		bench_json_int(&j, "k", o.parts);
		bench_json_int(&j, "entities", pr.num_entities);
		bench_json_int(&j, "triples", pr.num_train);
		bench_json_num(&j, "seconds", pr.seconds);
		bench_json_num(&j, "peak_rss_mib", peak / 1048576);
		bench_json_num(&j, "csr_mib", csr / 1048576);
		bench_json_num(&j, "peak_over_csr", peak / csr);
		bench_json_num(&j, "pre_metis_rss_mib", pr.pre_metis_rss_kib / 1024.0);
		bench_json_num(&j, "local_triple_fraction", pr.local_triple_fraction);
		bench_json_end(&j);
		bench_table_title("partition: %s, k=%llu, %llu entities, %llu train triples",
				  rdps_partition_method_name(o.method), (unsigned long long)o.parts,
				  (unsigned long long)pr.num_entities, (unsigned long long)pr.num_train);
		bench_table_row("time %.2f s, peak RSS %.1f MiB, CSR (bound) %.1f MiB, peak/CSR %.2f, local triples %.4f",
				pr.seconds, peak / 1048576, csr / 1048576, peak / csr,
				pr.local_triple_fraction);
	}

load:
	ret = rdps_partition_open(pdir, &p, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps bench load: %s\n", err);
		return 1;
	}
	pi = rdps_partition_get_info(p);
	for (uint32_t k = 0; k < pi->k; k++) {
		snprintf(err, sizeof(err), "%s/%s", pdir, pi->parts[k].file);
		if (stat(err, &sb)) {
			fprintf(stderr, "rdps bench load: %s: %s\n", err, strerror(errno));
			goto out;
		}
		total += (size_t)sb.st_size;
	}
	src = bench_alloc(total);
	dst = bench_alloc(total);
	if (!src || !dst) {
		fprintf(stderr, "rdps bench load: out of memory for %zu bytes\n", total);
		goto out;
	}
	for (size_t i = 0; i < total; i += 8)
		((char *)src)[i] = (char)i;

	bench_table_title("loading %u part file(s), %.1f MiB (GB/s; median of %llu; limit = memcpy)",
			  pi->k, total / 1048576.0, (unsigned long long)o.reps);
	bench_table_row("%-13s %-5s %9s %9s %9s %9s %10s", "method", "cache", "seconds", "GB/s",
			"memcpy", "ratio", "vs pread");
	/* memcpy first: the limit of both cache states. Then, per cache state,
	 * reps rounds in which every method reads once, in an order rotated
	 * each round: this machine's I/O rate drifts (the disk is a VM's), and
	 * interleaving lets every method see the same drift. */
	for (int cache = 1; cache >= 0; cache--) {
		double t[M_COUNT][MAX_REPS];
		int used_uring = 0;

		if (cache == 1) {
			for (uint64_t r = 0; r < o.reps; r++)
				t[M_MEMCPY][r] = timed_load(p, pi, M_MEMCPY, false, dst, src, total,
							    &used_uring, err, sizeof(err));
			/* Warm: one unmeasured read fills the page cache. */
			if (timed_load(p, pi, M_PREAD_RAW, false, dst, src, total, &used_uring,
				       err, sizeof(err)) < 0)
				goto load_failed;
		}
		for (uint64_t r = 0; r < o.reps; r++)
			for (int i = 0; i < M_MEMCPY; i++) {
				int m = (int)((r + (uint64_t)i) % M_MEMCPY);

				t[m][r] = timed_load(p, pi, (enum method)m, cache == 0, dst, src,
						     total, &used_uring, err, sizeof(err));
				if (t[m][r] < 0)
					goto load_failed;
			}
		for (int m = M_MEMCPY; m >= 0; m--) {
			struct bench_json j;
			double secs, gbs;

			if (m == M_MEMCPY && cache == 0) {
				limit_gbs[0] = limit_gbs[1];
				continue; /* memcpy has no cache state: reuse the warm figure */
			}
			secs = bench_median(t[m], o.reps);
			gbs = secs > 0 ? total / secs / 1e9 : NAN;
			if (m == M_MEMCPY)
				limit_gbs[cache] = gbs;
			if (m == M_PREAD)
				pread_gbs[cache] = gbs;
			bench_json_begin(&j, "load");
			bench_json_str(&j, "method", method_names[m]);
			bench_json_str(&j, "cache", cache ? "warm" : "cold");
			bench_json_int(&j, "files", pi->k);
			bench_json_int(&j, "bytes", total);
			bench_json_int(&j, "reps", o.reps);
			bench_json_num(&j, "seconds", secs);
			bench_json_num(&j, "gb_per_s", gbs);
			if (m == M_URING) /* read_file does not say */
				bench_json_bool(&j, "io_uring_used", used_uring);
			bench_json_str(&j, "limit", "memcpy");
			bench_json_num(&j, "limit_gb_per_s", limit_gbs[cache]);
			bench_json_num(&j, "ratio", bench_ratio(gbs, limit_gbs[cache]));
			bench_json_num(&j, "vs_pread", m == M_URING ? bench_ratio(gbs, pread_gbs[cache]) : NAN);
			bench_json_end(&j);
			bench_table_row("%-13s %-5s %9.4f %9.3f %9.3f %9.3f %10.2f", method_names[m],
					cache ? "warm" : "cold", secs, gbs, limit_gbs[cache],
					bench_ratio(gbs, limit_gbs[cache]),
					m == M_URING ? bench_ratio(gbs, pread_gbs[cache]) : NAN);
		}
	}
	rc = 0;
	goto out;
load_failed:
	fprintf(stderr, "rdps bench load: %s\n", err);
out:
	free(src);
	free(dst);
	rdps_partition_close(p);
	return rc;
bad:
	fprintf(stderr, "rdps bench load: bad value '%s' for --%s (see --help)\n", optarg,
		lopts[li].name);
	return 2;
}
