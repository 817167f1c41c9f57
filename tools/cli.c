// SPDX-License-Identifier: MIT
/* Command-line helpers shared by the rdps subcommands (see cli.h). */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Longer names get no suggestion: the distance table stays on the stack. */
#define CLI_NAME_MAX 64

/* The name in arg after one or two dashes, n its length up to '=' (NULL
 * if arg is not an option); *value: whether "=value" follows. */
static const char *arg_name(const char *arg, size_t *n, bool *value)
{
	const char *name;

	if (arg[0] != '-' || !arg[1] || !strcmp(arg, "--"))
		return NULL;
	name = arg + (arg[1] == '-' ? 2 : 1);
	*n = strcspn(name, "=");
	*value = name[*n] == '=';
	return name;
}

/* Case and '-' versus '_' do not count: --Num-Client-Proc is --num_client_proc. */
static int fold(char c)
{
	return c == '-' ? '_' : tolower((unsigned char)c);
}

static unsigned min3(unsigned a, unsigned b, unsigned c)
{
	unsigned m = a < b ? a : b;

	return m < c ? m : c;
}

/* Optimal string alignment distance of a[0..n) and b[0..m), both at most
 * CLI_NAME_MAX: each insertion, deletion, substitution, or swap of two
 * adjacent characters (the commonest typo, "max_stpe") costs 1. */
static unsigned distance(const char *a, size_t n, const char *b, size_t m)
{
	unsigned d[CLI_NAME_MAX + 1][CLI_NAME_MAX + 1];

	for (size_t i = 0; i <= n; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			unsigned v = min3(d[i - 1][j] + 1, d[i][j - 1] + 1,
					  d[i - 1][j - 1] + (fold(a[i - 1]) != fold(b[j - 1])));

			if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) &&
			    fold(a[i - 2]) == fold(b[j - 1]) && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

const char *rdps_cli_closest(const struct option *opts, const char *arg)
{
	const char *name, *best = NULL;
	unsigned best_d = 0;
	size_t n;
	bool value;

	if (!(name = arg_name(arg, &n, &value)) || n == 0 || n > CLI_NAME_MAX)
		return NULL;
	for (const struct option *o = opts; o->name; o++) {
		size_t m = strlen(o->name), longer = n > m ? n : m;
		unsigned d;

		if (m > CLI_NAME_MAX)
			continue;
		d = distance(name, n, o->name, m);
		if (d > 3 || 3 * (size_t)d > longer)
			continue;
		if (!best || d < best_d) {
			best = o->name;
			best_d = d;
		}
	}
	return best;
}

/* Same option to getopt: it does not call a prefix of aliases ambiguous. */
static bool same_option(const struct option *a, const struct option *b)
{
	return a->has_arg == b->has_arg && a->flag == b->flag && a->val == b->val;
}

const char *rdps_cli_explain(const struct option *opts, const char *arg, char *buf, size_t len)
{
	const struct option *match = NULL;
	const char *name, *close;
	int k;
	size_t n;
	bool value, ambiguous = false;

	if (!(name = arg_name(arg, &n, &value))) {
		snprintf(buf, len, "unexpected argument '%s'", arg);
		return buf;
	}
	/* getopt's matching: an exact name, else a prefix of one option (or
	 * of aliases of one option). */
	for (const struct option *o = opts; o->name && n; o++) {
		if (strncmp(o->name, name, n))
			continue;
		if (!o->name[n]) {
			match = o;
			ambiguous = false;
			break;
		}
		if (!match)
			match = o;
		else if (!same_option(match, o))
			ambiguous = true;
	}
	if (ambiguous) {
		k = snprintf(buf, len, "ambiguous option '%s' (", arg);
		for (const struct option *o = opts; o->name; o++) {
			bool alias = false;

			if (strncmp(o->name, name, n))
				continue;
			for (const struct option *p = opts; p < o; p++)
				alias |= !strncmp(p->name, name, n) && same_option(p, o);
			if (alias || k < 0 || (size_t)k >= len)
				continue;
			k += snprintf(buf + k, len - (size_t)k, "%s--%s", o == match ? "" : ", ", o->name);
		}
		if (k >= 0 && (size_t)k < len)
			snprintf(buf + k, len - (size_t)k, ")");
		return buf;
	}
	if (match && value && match->has_arg == no_argument)
		snprintf(buf, len, "option '--%s' takes no value", match->name);
	else if (match && !value && match->has_arg == required_argument)
		snprintf(buf, len, "option '--%s' needs a value", match->name);
	else if (match)
		snprintf(buf, len, "bad option '%s'", arg);
	else if ((close = rdps_cli_closest(opts, arg)))
		snprintf(buf, len, "unknown option '%s' (did you mean --%s?)", arg, close);
	else
		snprintf(buf, len, "unknown option '%s'", arg);
	return buf;
}

int rdps_cli_choice(const char *cmd, const char *flag, const char *arg,
		    const char *const *names, size_t n)
{
	char list[512] = "";

	for (size_t i = 0; i < n; i++)
		if (!strcmp(arg, names[i]))
			return (int)i;
	for (size_t i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 !i ? "" : i + 1 < n ? ", " : " or ", names[i]);
	fprintf(stderr, "rdps %s: %s '%s' is not %s\n", cmd, flag, arg, list);
	return -1;
}

int rdps_cli_long(const char *cmd, const char *flag, const char *arg, long lo, long hi,
		  long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || *end || end == arg || v < lo || v > hi) {
		fprintf(stderr, "rdps %s: %s '%s' is not a whole number in %ld..%ld\n", cmd, flag,
			arg, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}
