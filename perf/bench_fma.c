// SPDX-License-Identifier: MIT
/*
 * rdps bench fma: the core's own limit for the model kernels, one thread's
 * peak multiply-add rate: independent chains a = a * m + c on vector
 * registers (no memory traffic), enough of them to cover the FMA latency on
 * every pipe, in rounds; the best round is the peak. The kernels'
 * (trainer/model_kernels.h) widest unit is the one they are compiled for:
 * x86-64-v3 (AVX2 + FMA, 256-bit) on a CPU that has it, else the baseline
 * (SSE2: 128-bit, a multiply and an add). Wider units the CPU has but the
 * kernels do not use (AVX-512) are measured for reference.
 * `rdps bench train` measures the same figure next to its kernels.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "perf/bench.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps bench fma [options]\n"
"\n"
"Peak single-thread FMA rate (GFLOP/s, an FMA counts 2 flops per lane): 12\n"
"independent FMA chains on vector registers in rounds of --seconds, best round.\n"
"The model kernels run on the unit they were compiled for (x86-64-v3: AVX2 +\n"
"FMA, 256-bit; else SSE2, a multiply and an add): that is their limit\n"
"(kernel_isa true); AVX-512, if the CPU has it, is measured for reference.\n"
"Output: JSON lines (bench \"fma\") on stdout, a table on stderr.\n"
"\n"
"  --isa LIST     avx512f, avx2+fma, sse2, kernel (the kernels' own) or all\n"
"                 (default all: those this CPU runs)\n"
"  --seconds S    per round (default 0.2)\n"
"  --rounds N     (default 5)\n"
"  -h, --help     this text\n");
}

void bench_fma_emit(const struct bench_fma *f)
{
	bool kernel = !strcmp(f->isa, bench_fma_kernel_isa());
	struct bench_json j;

	bench_json_begin(&j, "fma");
	bench_json_str(&j, "isa", f->isa);
	bench_json_int(&j, "bits", f->bits);
	bench_json_int(&j, "chains", f->chains);
	bench_json_int(&j, "threads", 1);
	bench_json_int(&j, "rounds", f->rounds);
	bench_json_num(&j, "round_s", f->round_s);
	bench_json_num(&j, "gflop_per_s", f->gflop_per_s);
	bench_json_num(&j, "median_gflop_per_s", f->median_gflop_per_s);
	bench_json_bool(&j, "kernel_isa", kernel);
	bench_json_end(&j);
	bench_table_row("%-9s %5u %7u %12.1f %12.1f  %s", f->isa, f->bits, f->chains,
			f->gflop_per_s, f->median_gflop_per_s, kernel ? "yes" : "");
}

int rdps_bench_fma(int argc, char **argv)
{
	enum { O_ISA = 256, O_SECONDS, O_ROUNDS };
	static const struct option lopts[] = {
		{ "isa", required_argument, NULL, O_ISA },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const char *const all[] = { "avx512f", "avx2+fma", "sse2" };
	const char *isas[8];
	int n = 0, opt, li = 0;
	double seconds = 0.2;
	uint64_t rounds = 5;
	bool want_all = true;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, &li)) != -1) {
		switch (opt) {
		case O_ISA: {
			char tmp[128], *save = NULL, *tok;

			snprintf(tmp, sizeof(tmp), "%s", optarg);
			want_all = false;
			n = 0;
			for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				const char *isa = NULL;

				if (!strcmp(tok, "all")) {
					want_all = true;
					continue;
				}
				if (!strcmp(tok, "kernel"))
					isa = bench_fma_kernel_isa();
				for (size_t i = 0; !isa && i < RDPS_ARRAY_SIZE(all); i++)
					if (!strcmp(tok, all[i]))
						isa = all[i];
				if (!isa || n == (int)RDPS_ARRAY_SIZE(isas))
					goto bad;
				isas[n++] = isa;
			}
			break;
		}
		case O_SECONDS:
			if (bench_parse_double(optarg, 0.001, 60, &seconds))
				goto bad;
			break;
		case O_ROUNDS:
			if (bench_parse_u64(optarg, 1, 64, &rounds))
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps bench fma: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (want_all)
		for (size_t i = 0; i < RDPS_ARRAY_SIZE(all); i++)
			if (bench_fma_supported(all[i]) && n < (int)RDPS_ARRAY_SIZE(isas))
				isas[n++] = all[i];

	bench_table_title("peak FMA rate, one thread (GFLOP/s; the kernels' unit: %s)",
			  bench_fma_kernel_isa());
	bench_table_row("%-9s %5s %7s %12s %12s  %s", "isa", "bits", "chains", "best", "median",
			"kernels' unit");
	for (int i = 0; i < n; i++) {
		struct bench_fma f;
		int ret = bench_fma_peak(isas[i], seconds, (unsigned)rounds, &f);

		if (ret) {
			fprintf(stderr, "rdps bench fma: %s: %s\n", isas[i],
				ret == -ENOTSUP ? "not on this CPU" : rdps_strerror(ret));
			return 1;
		}
		bench_fma_emit(&f);
	}
	return 0;
bad:
	fprintf(stderr, "rdps bench fma: bad value '%s' for --%s (see --help)\n", optarg,
		lopts[li].name);
	return 2;
}
