// SPDX-License-Identifier: MIT
/*
 * DGL's launch line (its tools/launch.py) on rdps launch. A user's
 *
 *   launch.py --workspace W --num_trainers T --num_samplers S --num_servers 1
 *             --part_config P --ip_config I [--extra_envs K=V ...]
 *             [--num_omp_threads N] "python3 train_dist.py ARGS"
 *
 * runs as `rdps launch` with the same arguments (and rdps launch's own
 * options, --backend among them, anywhere before the command): it becomes
 *
 *   rdps launch --ip_config I --num_client_proc T --num_servers 1
 *       --server_arg=--graph --server_arg=DIR(P) [own options] --exec --
 *       /usr/bin/env RDPS_NUM_SAMPLERS=S [OMP_NUM_THREADS=N] [K=V ...]
 *       /bin/sh -c 'cd "$1" && eval "exec $2"' rdps-dgl W "python3 train_dist.py ARGS"
 *
 * so it works over every backend. I is DGL's ip_config ('IP [PORT]' per
 * machine), which rdps reads as is (one server per machine); P, when
 * relative, is taken in W as launch.py's servers do. The trainers' script
 * gets the job from rdps launch's environment (rdps.distributed.initialize)
 * and torch.distributed's variables from initialize too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

/* launch.py's options that rdps launch does not have itself. */
static const char *const dgl_only[] = { "--workspace", "--num_trainers", "--num_samplers",
					"--part_config", "--extra_envs", "--num_omp_threads",
					"--graph_format", "--keep_alive", "--server_name" };

/* --name or --name=value: the name's length, and the value (or NULL). */
static bool opt_is(const char *arg, const char *name, const char **value)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n))
		return false;
	if (arg[n] == '=') {
		*value = arg + n + 1;
		return true;
	}
	if (!arg[n]) {
		*value = NULL;
		return true;
	}
	return false;
}

bool rdps_launch_dgl_wants(int argc, char **argv)
{
	const char *v;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		for (size_t k = 0; k < sizeof(dgl_only) / sizeof(dgl_only[0]); k++)
			if (opt_is(argv[i], dgl_only[k], &v))
				return true;
	}
	return false;
}

struct dgl_line {
	const char *workspace, *trainers, *samplers, *servers, *part_config, *omp;
	const char *command;
	char **envs;          /* --extra_envs K=V */
	int num_envs;
	char **own;           /* rdps launch's own options, in order */
	int num_own;
};

/* The value of option i (--name VALUE or --name=VALUE); NULL (and a message)
 * if missing. */
static const char *take(int argc, char **argv, int *i, const char *name, const char *inline_v)
{
	if (inline_v)
		return inline_v;
	if (*i + 1 >= argc - 1) { /* the last element is the command */
		fprintf(stderr, "rdps launch: %s needs a value (and the training command comes "
			"last, as one quoted string)\n", name);
		return NULL;
	}
	return argv[++*i];
}

static int parse(int argc, char **argv, struct dgl_line *d)
{
	const char *v;

	if (argc < 2 || !strncmp(argv[argc - 1], "--", 2)) {
		fprintf(stderr, "rdps launch: with launch.py's options (--workspace, --num_trainers, "
			"--part_config, ...) the training command comes last, as one quoted string, "
			"as launch.py takes it: \"python3 train_dist.py ...\"\n");
		return -EINVAL;
	}
	d->command = argv[argc - 1];
	d->envs = calloc((size_t)argc, sizeof(char *));
	d->own = calloc((size_t)argc, sizeof(char *));
	if (!d->envs || !d->own)
		return -ENOMEM;
	for (int i = 1; i < argc - 1; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		const char *name = NULL;

		if (opt_is(a, "--workspace", &v))
			slot = &d->workspace, name = "--workspace";
		else if (opt_is(a, "--num_trainers", &v))
			slot = &d->trainers, name = "--num_trainers";
		else if (opt_is(a, "--num_samplers", &v))
			slot = &d->samplers, name = "--num_samplers";
		else if (opt_is(a, "--num_servers", &v))
			slot = &d->servers, name = "--num_servers";
		else if (opt_is(a, "--part_config", &v))
			slot = &d->part_config, name = "--part_config";
		else if (opt_is(a, "--num_omp_threads", &v))
			slot = &d->omp, name = "--num_omp_threads";
		if (slot) {
			if (!(*slot = take(argc, argv, &i, name, v)))
				return -EINVAL;
			continue;
		}
		if (opt_is(a, "--extra_envs", &v)) {
			/* launch.py: nargs='+', K=V words up to the next option */
			if (v)
				d->envs[d->num_envs++] = (char *)v;
			while (i + 1 < argc - 1 && strncmp(argv[i + 1], "--", 2))
				d->envs[d->num_envs++] = argv[++i];
			continue;
		}
		if (opt_is(a, "--graph_format", &v) || opt_is(a, "--keep_alive", &v) ||
		    opt_is(a, "--server_name", &v)) {
			fprintf(stderr, "rdps launch: launch.py's %s has no rdps meaning (the servers "
				"serve a partition's CSR both ways; they stop with the job)\n", a);
			return -EINVAL;
		}
		d->own[d->num_own++] = argv[i]; /* rdps launch's own, values included */
	}
	for (int k = 0; k < d->num_envs; k++)
		if (!strchr(d->envs[k], '=') || d->envs[k][0] == '=') {
			fprintf(stderr, "rdps launch: --extra_envs '%s' is not NAME=VALUE\n",
				d->envs[k]);
			return -EINVAL;
		}
	if (!d->part_config) {
		fprintf(stderr, "rdps launch: launch.py's line needs --part_config (the graph "
			"partition the servers serve)\n");
		return -EINVAL;
	}
	if (d->servers && strcmp(d->servers, "1")) {
		fprintf(stderr, "rdps launch: --num_servers %s: rdps serves one part of the graph per "
			"server and machine (DGL's extra servers per machine share the same part; rdps's "
			"server takes the load with --num_server_threads): give --num_servers 1\n",
			d->servers);
		return -EINVAL;
	}
	return 0;
}

/* The directory of part_config (a file in it, or itself), in workspace when
 * relative; malloc'd. */
static char *part_dir(const char *workspace, const char *part_config)
{
	size_t n = strlen(part_config) + (workspace ? strlen(workspace) : 0) + 2;
	char *p = malloc(n), *slash;

	if (!p)
		return NULL;
	if (part_config[0] != '/' && workspace)
		snprintf(p, n, "%s/%s", workspace, part_config);
	else
		snprintf(p, n, "%s", part_config);
	/* <dir>/<name>.json -> <dir>; a directory stays */
	if ((slash = strrchr(p, '/')) && strlen(slash) > 5 && !strcmp(p + strlen(p) - 5, ".json")) {
		if (slash == p)
			slash[1] = '\0';
		else
			*slash = '\0';
	} else if (!slash && strlen(p) > 5 && !strcmp(p + strlen(p) - 5, ".json")) {
		snprintf(p, n, ".");
	}
	return p;
}

int rdps_launch_dgl(int argc, char **argv)
{
	struct dgl_line d = { 0 };
	char **out = NULL, *graph = NULL, *dir = NULL, *samplers = NULL, *omp = NULL;
	int n = 0, ret, rc = 2;
	bool quiet = false;

	if ((ret = parse(argc, argv, &d)))
		goto done;
	dir = part_dir(d.workspace, d.part_config);
	graph = dir ? malloc(strlen(dir) + 16) : NULL;
	samplers = malloc(64);
	omp = malloc(64);
	out = calloc((size_t)(argc + d.num_envs + 32), sizeof(char *));
	if (!dir || !graph || !samplers || !omp || !out) {
		fprintf(stderr, "rdps launch: out of memory\n");
		goto done;
	}
	sprintf(graph, "--server_arg=%s", dir);
	snprintf(samplers, 64, "RDPS_NUM_SAMPLERS=%s", d.samplers ? d.samplers : "0");
	out[n++] = argv[0];
	for (int i = 0; i < d.num_own; i++) {
		out[n++] = d.own[i];
		if (!strcmp(d.own[i], "--quiet"))
			quiet = true;
	}
	if (d.trainers) {
		out[n++] = "--num_client_proc";
		out[n++] = (char *)d.trainers;
	}
	out[n++] = "--server_arg=--graph";
	out[n++] = graph;
	out[n++] = "--exec";
	out[n++] = "--";
	out[n++] = "/usr/bin/env";
	out[n++] = samplers;
	if (d.omp) {
		snprintf(omp, 64, "OMP_NUM_THREADS=%s", d.omp);
		out[n++] = omp;
	}
	for (int i = 0; i < d.num_envs; i++)
		out[n++] = d.envs[i];
	out[n++] = "/bin/sh";
	out[n++] = "-c";
	out[n++] = "cd \"$1\" && eval \"exec $2\"";
	out[n++] = "rdps-dgl";
	out[n++] = (char *)(d.workspace ? d.workspace : ".");
	out[n++] = (char *)d.command;
	out[n] = NULL;
	if (!quiet) {
		fprintf(stderr, "rdps launch: launch.py's line, as rdps runs it: rdps");
		for (int i = 0; i < n; i++)
			fprintf(stderr, strpbrk(out[i], " \"'$&;") ? " '%s'" : " %s", out[i]);
		fputc('\n', stderr);
	}
	rc = rdps_cmd_launch(n, out);
done:
	free(out);
	free(graph);
	free(dir);
	free(samplers);
	free(omp);
	free(d.envs);
	free(d.own);
	return rc;
}
