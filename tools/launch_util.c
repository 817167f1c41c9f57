// SPDX-License-Identifier: MIT
/* rdps launch: argument vectors, printing commands, and the one command
 * line every rank of mpirun or srun runs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_run.h"

int rdps_launch_strv_push(struct rdps_launch_strv *s, char *x)
{
	char **n = realloc(s->v, (size_t)(s->n + 2) * sizeof(char *));

	if (!n)
		return -ENOMEM;
	s->v = n;
	s->v[s->n++] = x;
	s->v[s->n] = NULL;
	return 0;
}

char *rdps_launch_owned_printf(struct rdps_launch_strv *owned, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	if (rdps_launch_strv_push(owned, s)) {
		free(s);
		return NULL;
	}
	return s;
}

int rdps_launch_strv_push_list(struct rdps_launch_strv *s, char *list)
{
	char *save = NULL;

	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (rdps_launch_strv_push(s, p))
			return -ENOMEM;
	return 0;
}

static void print_quoted(FILE *f, const char *a)
{
	bool plain = *a != '\0';

	for (const char *p = a; *p && plain; p++)
		plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-", *p);
	if (plain) {
		fputs(a, f);
		return;
	}
	fputc('\'', f);
	for (const char *p = a; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputc('\'', f);
}

void rdps_launch_print_argv(FILE *f, char *const *argv)
{
	for (int i = 0; argv[i]; i++) {
		if (i)
			fputc(' ', f);
		print_quoted(f, argv[i]);
	}
	fputc('\n', f);
}

int rdps_launch_push_job_opts(struct rdps_launch *L, struct rdps_launch_strv *out)
{
	char *pbuf = rdps_launch_owned_printf(&L->owned, "%u", L->P);
	char *gbuf = rdps_launch_owned_printf(&L->owned, "%g", L->grace_ms / 1000.0);
	int ret = 0;

	if (!pbuf || !gbuf)
		return -ENOMEM;
	ret |= rdps_launch_strv_push(out, "--num_client_proc");
	ret |= rdps_launch_strv_push(out, pbuf);
	ret |= rdps_launch_strv_push(out, "--grace");
	ret |= rdps_launch_strv_push(out, gbuf);
	for (int i = 0; i < L->trainer_hosts.n; i++) {
		ret |= rdps_launch_strv_push(out, "--trainer_hosts");
		ret |= rdps_launch_strv_push(out, L->trainer_hosts.v[i]);
	}
	for (int i = 0; i < L->server_args.n; i++) {
		char *a = rdps_launch_owned_printf(&L->owned, "--server_arg=%s", L->server_args.v[i]);

		if (!a)
			return -ENOMEM;
		ret |= rdps_launch_strv_push(out, a);
	}
	if (L->job.exec)
		ret |= rdps_launch_strv_push(out, "--exec");
	if (L->job.exec && L->job.transport) {
		ret |= rdps_launch_strv_push(out, "--transport");
		ret |= rdps_launch_strv_push(out, (char *)L->job.transport);
	}
	return ret ? -ENOMEM : 0;
}

int rdps_launch_role_cmd(struct rdps_launch *L, struct rdps_launch_strv *out)
{
	int ret = 0;

	ret |= rdps_launch_strv_push(out, L->exe);
	ret |= rdps_launch_strv_push(out, "launch");
	ret |= rdps_launch_strv_push(out, "--role-from-env");
	ret |= rdps_launch_strv_push(out, "--ip_config");
	ret |= rdps_launch_strv_push(out, L->ipc_path);
	ret |= rdps_launch_push_job_opts(L, out);
	ret |= rdps_launch_strv_push(out, "--");
	for (int i = 0; i < L->num_train_args; i++)
		ret |= rdps_launch_strv_push(out, L->train_args[i]);
	return ret ? -ENOMEM : 0;
}

int rdps_launch_exec_or_print(struct rdps_launch *L, struct rdps_launch_strv *cmd, const char *what)
{
	fprintf(stderr, "rdps launch: ");
	rdps_launch_print_argv(stderr, cmd->v);
	if (L->dry_run) {
		rdps_launch_print_argv(stdout, cmd->v);
		return 0;
	}
	fflush(NULL);
	execvp(cmd->v[0], cmd->v);
	fprintf(stderr, "rdps launch: cannot run %s: %s (is %s installed? %s)\n", cmd->v[0],
		strerror(errno), what,
		!strcmp(what, "mpirun") ? "apt-get install openmpi-bin" : "run inside an sbatch allocation");
	return 127;
}
