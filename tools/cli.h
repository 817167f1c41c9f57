/* SPDX-License-Identifier: MIT */
/*
 * Command-line helpers shared by the rdps subcommands: why getopt refused
 * an argument, in one line, and the option a mistyped one probably meant.
 * Pure functions of their arguments (tests/integration/test_cli.c).
 */
#ifndef RDPS_TOOLS_CLI_H
#define RDPS_TOOLS_CLI_H

#include <getopt.h>
#include <stddef.h>

/*
 * The name of the long option in opts (a getopt_long table ending in a
 * zeroed entry) closest to arg ("--ip_confg", "-max_stpe", "--lr=0.1": one
 * or two dashes, anything from '=' on ignored), or NULL if none is close.
 * Closeness is the edit distance (insertions, deletions, substitutions and
 * swaps of adjacent characters) with case and '-' versus '_' not counting;
 * close is at most 3 edits and at most a third of the longer of the two
 * names (so no guess for one- or two-letter names). Ties go to the first
 * in the table. The name is opts' (no dashes).
 */
const char *rdps_cli_closest(const struct option *opts, const char *arg);

/*
 * Why getopt_long() or getopt_long_only() refused arg, the argument it
 * stopped at, as one phrase for "rdps CMD: <phrase>": set opterr = 0, and
 * on '?' (or ':') pass argv[optind - 1] (getopt_long with short options
 * in a cluster, "-xy", stops inside one: pass the argument it started at).
 *   unknown option '--ip_confg' (did you mean --ip_config?)
 *   unknown option '--foo'
 *   ambiguous option '--mpi' (--mpirun, --mpi_arg, --mpi_hosts)
 *   option '--ip_config' needs a value
 *   option '--quiet' takes no value
 *   unexpected argument 'foo'           (arg is not an option)
 * Writes it into buf (len bytes, cut to fit) and returns buf.
 */
const char *rdps_cli_explain(const struct option *opts, const char *arg, char *buf, size_t len);

/*
 * The index of arg in names[0..n), or -1 after printing one line,
 * "rdps CMD: FLAG 'arg' is not a, b or c", to stderr.
 */
int rdps_cli_choice(const char *cmd, const char *flag, const char *arg,
		    const char *const *names, size_t n);

/* arg as a whole number in [lo, hi] into *out: 0, or -1 after printing
 * "rdps CMD: FLAG 'arg' is not a whole number in lo..hi". */
int rdps_cli_long(const char *cmd, const char *flag, const char *arg, long lo, long hi,
		  long *out);

#endif
