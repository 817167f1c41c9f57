// SPDX-License-Identifier: MIT
/*
 * rdps dist_train: DGL-KE's dglke_dist_train line, command for command. It
 * translates the line into an rdps launch job over ssh (launch_ssh.c):
 * --path is the workspace on every machine, --ssh_key the key,
 * --ip_config the machines (DGL-KE's "IP PORT NUM_SERVERS" lines),
 * --num_client_proc the trainers per machine, --model DGL-KE's alias of
 * --model_name, and every other flag is a dglke_train flag for rdps train,
 * with the partition that 'rdps partition --dataset NAME -k K --data_path
 * DIR' wrote for the ip_config's K machines. At the end it prints what
 * dglke_dist_train's processes print: the total train time, the test
 * result block and each server's "solved message count".
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "launch_run.h"
#include "partition/dglke.h"
#include "rdps/common.h"
#include "rdps/ipconfig.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps dist_train --ip_config FILE [--path DIR] [--ssh_key FILE] [--num_client_proc N]\n"
"                       [--model NAME] --dataset NAME --data_path DIR [dglke_train flags...]\n"
"                       [launcher options]\n"
"\n"
"DGL-KE's dglke_dist_train: its line runs with the command name changed (the\n"
"example at the end: DGL-KE's distributed tutorial, WordNet for FB15k).\n"
"Each machine of the ip_config runs its servers and --num_client_proc trainers,\n"
"started over ssh (rdps launch --backend ssh: one connection per machine, checked\n"
"before anything starts, one failure or Ctrl-C stops every machine, nothing\n"
"outlives the launcher; a machine that is this host is forked). Every machine\n"
"needs rdps at the same path and the dataset and its partition at the same paths\n"
"(relative ones are relative to --path); the ip_config is sent to each. The job\n"
"gets a secret of its own (rdps launch --help).\n"
"\n"
"dglke_dist_train's flags:\n"
"  --path DIR             the workspace on every machine (default: this directory)\n"
"  --ssh_key FILE         the private key that opens every machine\n"
"  --ip_config FILE       'IP PORT NUM_SERVERS' per machine (DGL-KE's format)\n"
"  --num_client_proc N    trainer processes per machine (default 1)\n"
"  --model NAME           DGL-KE's alias of --model_name\n"
"  every dglke_train flag, with its DGL-KE meaning (rdps train --help): --dataset,\n"
"  --data_path, --format, --data_files, --hidden_dim, --gamma, --lr, --batch_size,\n"
"  --neg_sample_size, --max_step, --log_interval, --test, -adv, -rc, --num_thread, ...\n"
"  The partition is DATA_PATH/DATASET/partition-kK for the ip_config's K machines\n"
"  (what 'rdps partition --dataset NAME -k K --data_path DIR' writes), unless\n"
"  --partition PDIR is given.\n"
"launcher options (rdps launch --help):\n"
"  --ssh_username USER, --ssh_port N, --ssh_hosts H,..., --ssh_arg ARG,\n"
"  --ssh_connect_timeout SEC, --rdps PATH, --grace SEC, --log_dir DIR, --env NAME[=V],\n"
"  --num_servers N, --num_server_threads N, --server_arg ARG, --quiet, --no_check,\n"
"  --dry_run, --print-layout, --backend ssh|local (default ssh)\n"
"\n"
"At the end, as DGL-KE: 'Total train time S seconds' (the slowest trainer's), the\n"
"'Test average ...' block of trainer 0, and each server's 'solved message count'.\n"
"  -h, --help             this text\n"
"\n"
"example: rdps partition --dataset wn18 -k 2 --data_path ~/my_task\n"
"         rdps dist_train --path ~/my_task --ssh_key ~/mctt.pem --ip_config ~/my_task/ip_config.txt \\\n"
"           --num_client_proc 16 --model TransE_l2 --dataset wn18 --data_path ~/my_task \\\n"
"           --hidden_dim 400 --gamma 19.9 --lr 0.25 --batch_size 1000 --neg_sample_size 200 \\\n"
"           --max_step 1000 --log_interval 100 --batch_size_eval 16 --test -adv \\\n"
"           --regularization_coef 1.00E-07 --no_save_emb --num_thread 1\n");
}

/* The launcher's flags dglke_dist_train's line may carry, and what rdps
 * launch calls them. */
static const struct {
	const char *name, *launch;
	bool value;
} launch_flags[] = {
	{ "path", "--workspace", true },
	{ "ssh_key", "--ssh_key", true },
	{ "ip_config", "--ip_config", true },
	{ "num_client_proc", "--num_client_proc", true },
	{ "ssh_username", "--ssh_username", true },
	{ "ssh_port", "--ssh_port", true },
	{ "ssh_hosts", "--ssh_hosts", true },
	{ "ssh_arg", "--ssh_arg", true },
	{ "ssh_connect_timeout", "--ssh_connect_timeout", true },
	{ "rdps", "--rdps", true },
	{ "grace", "--grace", true },
	{ "log_dir", "--log_dir", true },
	{ "env", "--env", true },
	{ "num_servers", "--num_servers", true },
	{ "num_server_threads", "--num_server_threads", true },
	{ "server_arg", "--server_arg", true },
	{ "backend", "--backend", true },
	{ "quiet", "--quiet", false },
	{ "no_check", "--no_check", false },
	{ "dry_run", "--dry_run", false },
	{ "print-layout", "--print-layout", false },
	{ "print_layout", "--print-layout", false },
};

/* ---- what DGL-KE prints at the end ---- */

struct summary {
	double train_max;       /* slowest trainer's total train time */
	uint32_t trainers;      /* trainers that printed one */
	struct rdps_launch_strv results; /* "Test average ..." / "Valid average ..." */
	struct rdps_launch_strv servers; /* "server N: solved message count: ..." */
};

/* The line without the launchers' "[HOST trainer 0] " prefix. */
static const char *unprefixed(const char *line, size_t *len)
{
	const char *close = *len > 1 && line[0] == '[' ? memchr(line, ']', *len < 64 ? *len : 64) : NULL;

	if (close && close + 1 < line + *len && close[1] == ' ') {
		*len -= (size_t)(close + 2 - line);
		return close + 2;
	}
	return line;
}

static void keep(struct rdps_launch_strv *v, const char *line, size_t len)
{
	char *s = strndup(line, len);

	if (s && rdps_launch_strv_push(v, s))
		free(s);
}

static void on_line(void *ctx, const struct rdps_launch_role *role, const char *line, size_t len)
{
	static const char train[] = "Total train time ";
	struct summary *sum = ctx;

	(void)role;
	line = unprefixed(line, &len);
	if (len > sizeof(train) && !memcmp(line, train, sizeof(train) - 1)) {
		double s = atof(line + sizeof(train) - 1);

		sum->trainers++;
		if (s > sum->train_max)
			sum->train_max = s;
	} else if ((len > 14 && !memcmp(line, "Test average ", 13)) ||
		   (len > 15 && !memcmp(line, "Valid average ", 14))) {
		keep(&sum->results, line, len);
	} else if (len > 8 && !memcmp(line, "server ", 7) && memmem(line, len, ": solved message count:", 23)) {
		keep(&sum->servers, line, len);
	}
}

static void print_summary(const struct summary *sum)
{
	bool test = false, valid = false;

	fflush(stdout);
	if (sum->trainers)
		printf("Total train time %.3f seconds\n", sum->train_max);
	for (int i = 0; i < sum->results.n; i++)
		valid |= !strncmp(sum->results.v[i], "Valid", 5);
	for (int i = 0; i < sum->results.n; i++)
		test |= !strncmp(sum->results.v[i], "Test", 4);
	for (int pass = 0; pass < 2; pass++) {
		const char *mode = pass ? "Test" : "Valid";

		if (!(pass ? test : valid))
			continue;
		printf("-------------- %s result --------------\n", mode);
		for (int i = 0; i < sum->results.n; i++)
			if (!strncmp(sum->results.v[i], mode, strlen(mode)))
				printf("%s\n", sum->results.v[i]);
		printf("-----------------------------------------\n");
	}
	for (int i = 0; i < sum->servers.n; i++)
		printf("%s\n", sum->servers.v[i]);
	fflush(stdout);
}

static void free_strv(struct rdps_launch_strv *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
}

/* ---- the translation ---- */

/* Where the partition of the train arguments' dataset is for k machines. */
static int partition_arg(char **targs, int n, const char *ipc_path, struct rdps_launch_strv *owned,
			 struct rdps_launch_strv *out)
{
	struct rdps_dglke_data d = {
		.data_path = rdps_launch_train_opt(targs, n, "data_path"),
		.dataset = rdps_launch_train_opt(targs, n, "dataset"),
		.format = rdps_launch_train_opt(targs, n, "format"),
	};
	struct rdps_ipconfig ipc;
	char err[512], pdir[4300], *p;
	struct stat st;

	if (rdps_launch_train_opt(targs, n, "partition") || rdps_launch_train_opt(targs, n, "data"))
		return 0; /* rdps's own flags: the user said where */
	if (!d.data_path) {
		fprintf(stderr, "rdps dist_train: give the dataset: --dataset NAME --data_path DIR "
			"(see rdps dist_train --help)\n");
		return -EINVAL;
	}
	if (rdps_ipconfig_load(ipc_path, &ipc, err, sizeof(err))) {
		fprintf(stderr, "rdps dist_train: %s\n", err);
		return -EINVAL;
	}
	if (rdps_dglke_partition_dir(&d, ipc.num_machines, pdir, sizeof(pdir))) {
		rdps_ipconfig_free(&ipc);
		return -ENAMETOOLONG;
	}
	if (stat(pdir, &st))
		fprintf(stderr, "rdps dist_train: note: no partition %s here; each machine needs one: "
			"'rdps partition --dataset %s -k %u --data_path %s' makes it%s\n", pdir,
			d.dataset ? d.dataset : RDPS_DGLKE_DEFAULT_DATASET, ipc.num_machines, d.data_path,
			" (then copy the dataset directory to every machine)");
	rdps_ipconfig_free(&ipc);
	p = strdup(pdir);
	if (!p || rdps_launch_strv_push(owned, p)) {
		free(p);
		return -ENOMEM;
	}
	return rdps_launch_strv_push(out, "--partition") || rdps_launch_strv_push(out, p) ? -ENOMEM : 0;
}

int rdps_cmd_dist_train(int argc, char **argv)
{
	struct rdps_launch_strv launch = { 0 }, train = { 0 }, owned = { 0 };
	struct summary sum = { 0 };
	const char *ipc = NULL, *path = NULL, *backend = "ssh";
	char ipc_abs[PATH_MAX], key_abs[PATH_MAX], ws[PATH_MAX];
	int rc = 2, ret = 0;

	ret |= rdps_launch_strv_push(&launch, "launch");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq;
		size_t len, k;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			rc = 0;
			goto out;
		}
		if (strncmp(a, "--", 2) || !a[2]) {
			ret |= rdps_launch_strv_push(&train, argv[i]); /* -adv, values, ... */
			continue;
		}
		eq = strchr(a + 2, '=');
		len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (len == 5 && !strncmp(a + 2, "model", 5)) {
			/* DGL-KE's alias */
			const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;

			if (!v) {
				fprintf(stderr, "rdps dist_train: --model needs a value\n");
				goto out;
			}
			ret |= rdps_launch_strv_push(&train, "--model_name");
			ret |= rdps_launch_strv_push(&train, (char *)v);
			continue;
		}
		for (k = 0; k < RDPS_ARRAY_SIZE(launch_flags); k++)
			if (strlen(launch_flags[k].name) == len && !strncmp(a + 2, launch_flags[k].name, len))
				break;
		if (k == RDPS_ARRAY_SIZE(launch_flags)) {
			ret |= rdps_launch_strv_push(&train, argv[i]); /* rdps train checks it */
			continue;
		}
		if (launch_flags[k].value) {
			const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;

			if (!v) {
				fprintf(stderr, "rdps dist_train: --%s needs a value\n", launch_flags[k].name);
				goto out;
			}
			if (!strcmp(launch_flags[k].name, "ip_config")) {
				ipc = v;
			} else if (!strcmp(launch_flags[k].name, "ssh_key")) {
				/* before the chdir to --path below */
				ret |= rdps_launch_strv_push(&launch, "--ssh_key");
				ret |= rdps_launch_strv_push(&launch, realpath(v, key_abs) ? key_abs : (char *)v);
			}
			else if (!strcmp(launch_flags[k].name, "path"))
				path = v;
			else if (!strcmp(launch_flags[k].name, "backend"))
				backend = v;
			else {
				ret |= rdps_launch_strv_push(&launch, (char *)launch_flags[k].launch);
				ret |= rdps_launch_strv_push(&launch, (char *)v);
			}
		} else {
			ret |= rdps_launch_strv_push(&launch, (char *)launch_flags[k].launch);
		}
	}
	if (ret) {
		rc = 1;
		goto out;
	}
	if (!ipc) {
		fprintf(stderr, "rdps dist_train: --ip_config FILE is required (DGL-KE's 'IP PORT "
			"NUM_SERVERS' lines; see rdps dist_train --help)\n");
		goto out;
	}
	if (realpath(ipc, ipc_abs))
		ipc = ipc_abs;
	/* The line's paths are relative to the workspace, here as on the
	 * machines (when it exists here: the launcher's host may be none). */
	if (path && chdir(path))
		fprintf(stderr, "rdps dist_train: note: --path %s is not a directory here (%s); paths "
			"are taken as given\n", path, strerror(errno));
	else if (path && getcwd(ws, sizeof(ws)))
		path = ws;
	if (partition_arg(train.v, train.n, ipc, &owned, &train))
		goto out;
	ret |= rdps_launch_strv_push(&launch, "--backend");
	ret |= rdps_launch_strv_push(&launch, (char *)backend);
	ret |= rdps_launch_strv_push(&launch, "--ip_config");
	ret |= rdps_launch_strv_push(&launch, (char *)ipc);
	if (path) {
		ret |= rdps_launch_strv_push(&launch, "--workspace");
		ret |= rdps_launch_strv_push(&launch, (char *)path);
	}
	ret |= rdps_launch_strv_push(&launch, "--");
	for (int i = 0; i < train.n; i++)
		ret |= rdps_launch_strv_push(&launch, train.v[i]);
	if (ret) {
		rc = 1;
		goto out;
	}
	rc = rdps_launch_main(launch.n, launch.v, on_line, &sum);
	if (!rc)
		print_summary(&sum);
out:
	free(launch.v);
	free(train.v);
	free_strv(&owned);
	free_strv(&sum.results);
	free_strv(&sum.servers);
	return rc;
}
