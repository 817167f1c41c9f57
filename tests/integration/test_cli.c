// SPDX-License-Identifier: MIT
/*
 * tools/cli.c, the subcommands' shared option helpers: the closest option
 * to a mistyped one (each kind of typo, what is too far to guess, ties),
 * and the one-line reason getopt refused an argument, including through
 * getopt_long and getopt_long_only themselves (the calling convention
 * cli.h documents). The tool's sources are not a library, so the file
 * under test is compiled in here.
 */
#include <criterion/criterion.h>
#include <getopt.h>
#include <string.h>

#include "tools/cli.c"

enum { O_IPC = 256, O_NCP, O_ROLE, O_QUIET, O_GRACE, O_MPIRUN, O_MPIARG, O_MPIHOSTS, O_LR, O_STEP,
       O_A, O_ADV };

static const struct option opts[] = {
	{ "ip_config", required_argument, NULL, O_IPC },
	{ "num_client_proc", required_argument, NULL, O_NCP },
	{ "role-from-env", no_argument, NULL, O_ROLE },
	{ "role_from_env", no_argument, NULL, O_ROLE },
	{ "quiet", no_argument, NULL, O_QUIET },
	{ "grace", required_argument, NULL, O_GRACE },
	{ "mpirun", required_argument, NULL, O_MPIRUN },
	{ "mpi_arg", required_argument, NULL, O_MPIARG },
	{ "mpi_hosts", required_argument, NULL, O_MPIHOSTS },
	{ "lr", required_argument, NULL, O_LR },
	{ "max_step", required_argument, NULL, O_STEP },
	{ "a", required_argument, NULL, O_A },
	{ "adv", no_argument, NULL, O_ADV },
	{ 0 },
};

static void expect_closest(const char *arg, const char *want)
{
	const char *got = rdps_cli_closest(opts, arg);

	if (want)
		cr_expect(got && !strcmp(got, want), "'%s': want %s, got %s", arg, want, got ? got : "NULL");
	else
		cr_expect_null(got, "'%s': want no suggestion, got %s", arg, got);
}

Test(cli_suggest, each_kind_of_typo_finds_the_option)
{
	expect_closest("--ip_confg", "ip_config");          /* a letter dropped */
	expect_closest("--num_client_procs", "num_client_proc"); /* one added */
	expect_closest("--grase", "grace");                 /* one replaced */
	expect_closest("--max_stpe", "max_step");           /* two swapped: one edit */
	expect_closest("--amx_stpe", "max_step");           /* two swaps */
	expect_closest("-max_stpe", "max_step");            /* getopt_long_only style */
	expect_closest("--max_stpe=100", "max_step");       /* the value is not the name */
	expect_closest("--lrr=0.1", "lr");
}

Test(cli_suggest, case_and_dash_do_not_count)
{
	expect_closest("--num-client-proc", "num_client_proc");
	expect_closest("--num-clinet-porc", "num_client_proc"); /* 2 swaps, not 2 + 2 dashes */
	expect_closest("--IP_Config", "ip_config");
	expect_closest("--MAX_STEP", "max_step");
	expect_closest("--Role_From_Env", "role-from-env"); /* the first of the aliases */
}

Test(cli_suggest, too_far_is_no_guess)
{
	expect_closest("--data", NULL);                     /* another command's option */
	expect_closest("--ip", NULL);                       /* 7 edits */
	expect_closest("--grXcX", NULL);                    /* 2 edits in 5 letters */
	expect_closest("--nXm_cXiXnt_pXoc", NULL);          /* 4 edits: never */
	expect_closest("--num_cXiXnt_pXoc", "num_client_proc"); /* 3 in 15: yes */
	expect_closest("--b", NULL);                        /* one-letter names: no guess */
	expect_closest("--lf", NULL);                       /* 1 edit of 2 letters */
	expect_closest("max_step", NULL);                   /* not an option at all */
	expect_closest("--", NULL);
	expect_closest("-", NULL);
}

Test(cli_suggest, ties_go_to_the_first_in_the_table)
{
	static const struct option t[] = {
		{ "seed", required_argument, NULL, 1 },
		{ "send", required_argument, NULL, 2 },
		{ 0 },
	};

	/* "sed" is one deletion from both. */
	cr_expect_str_eq(rdps_cli_closest(t, "--sed"), "seed");
}

static const char *explain(const char *arg)
{
	static char buf[256];

	return rdps_cli_explain(opts, arg, buf, sizeof(buf));
}

Test(cli_explain, says_why_in_one_phrase)
{
	cr_expect_str_eq(explain("--ip_confg"), "unknown option '--ip_confg' (did you mean --ip_config?)");
	cr_expect_str_eq(explain("--data"), "unknown option '--data'");
	cr_expect_str_eq(explain("--mpi"), "ambiguous option '--mpi' (--mpirun, --mpi_arg, --mpi_hosts)");
	cr_expect_str_eq(explain("--ip_config"), "option '--ip_config' needs a value");
	cr_expect_str_eq(explain("--ip"), "option '--ip_config' needs a value"); /* a unique prefix */
	cr_expect_str_eq(explain("--quiet=yes"), "option '--quiet' takes no value");
	cr_expect_str_eq(explain("wn18"), "unexpected argument 'wn18'");
	/* A prefix of two aliases of one option is not ambiguous to getopt. */
	cr_expect_str_eq(explain("--role=x"), "option '--role-from-env' takes no value");
}

Test(cli_explain, cuts_to_the_buffer)
{
	char buf[16];

	cr_expect_str_eq(rdps_cli_explain(opts, "--ip_confg", buf, sizeof(buf)), "unknown option ");
	cr_expect_str_eq(rdps_cli_explain(opts, "--mpi", buf, sizeof(buf)), "ambiguous optio");
}

/* Runs getopt_long(_only) over argv until it refuses something; returns
 * the explanation of argv[optind - 1], as cli.h tells callers to do. */
static const char *refused(char **argv, int argc, bool only)
{
	static char buf[256];
	int opt;

	optind = 0; /* glibc: also resets its internal state */
	opterr = 0;
	while ((opt = only ? getopt_long_only(argc, argv, "", opts, NULL)
			   : getopt_long(argc, argv, "+h", opts, NULL)) != -1)
		if (opt == '?' || opt == ':')
			return rdps_cli_explain(opts, argv[optind - 1], buf, sizeof(buf));
	return NULL;
}

Test(cli_explain, with_getopt_itself)
{
	char *a[] = { "launch", "--quiet", "--ip_confg", "x.txt", "--", "--data", NULL };
	char *b[] = { "train", "-adv", "-max_stpe", "100", NULL };
	char *c[] = { "train", "-lr", "0.1", "--max_step", NULL };
	char *d[] = { "launch", "--mpi", "x", NULL };

	cr_expect_str_eq(refused(a, 6, false), "unknown option '--ip_confg' (did you mean --ip_config?)");
	cr_expect_str_eq(refused(b, 4, true), "unknown option '-max_stpe' (did you mean --max_step?)");
	cr_expect_str_eq(refused(c, 4, true), "option '--max_step' needs a value");
	cr_expect_str_eq(refused(d, 3, false),
			 "ambiguous option '--mpi' (--mpirun, --mpi_arg, --mpi_hosts)");
}

Test(cli_values, choices_and_whole_numbers)
{
	static const char *const modes[] = { "triplet_wise", "all", "batch_head" };
	long v = 7;

	cr_expect_eq(rdps_cli_choice("predict", "--exec_mode", "all", modes, 3), 1);
	cr_expect_eq(rdps_cli_choice("predict", "--exec_mode", "batch_head", modes, 3), 2);
	cr_expect_eq(rdps_cli_choice("predict", "--exec_mode", "al", modes, 3), -1);
	cr_expect_eq(rdps_cli_long("predict", "--topK", "10", 1, 100, &v), 0);
	cr_expect_eq(v, 10);
	cr_expect_eq(rdps_cli_long("predict", "--topK", "0", 1, 100, &v), -1);
	cr_expect_eq(rdps_cli_long("predict", "--topK", "10x", 1, 100, &v), -1);
	cr_expect_eq(rdps_cli_long("predict", "--topK", "", 1, 100, &v), -1);
	cr_expect_eq(v, 10, "a refused value must leave *out alone");
}
