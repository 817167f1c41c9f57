// SPDX-License-Identifier: MIT
/* rdps launch --backend slurm: inside an sbatch allocation, write the
 * ip_config from the allocation's nodes, then run srun with S + P tasks per
 * node, every task running rdps launch --role-from-env. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch_run.h"

/* Node names of the allocation: --hosts, or scontrol show hostnames. */
static int slurm_hosts(struct rdps_launch *L)
{
	FILE *f;
	char line[512];
	int st;

	if (L->hosts.n)
		return 0;
	if (!getenv("SLURM_JOB_NODELIST")) {
		fprintf(stderr, "rdps launch --backend slurm: SLURM_JOB_NODELIST is not set: run inside "
			"an allocation (sbatch deploy/slurm/rdps.sbatch), or give --hosts\n");
		return -ENOENT;
	}
	/* Bounded: scontrol asks slurmctld only for a list this short. */
	f = popen("timeout 60 scontrol show hostnames \"$SLURM_JOB_NODELIST\"", "r");
	if (!f) {
		fprintf(stderr, "rdps launch: cannot run scontrol: %s\n", strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, " \t\r\n")] = '\0';
		char *h = line[0] ? rdps_launch_owned_printf(&L->owned, "%s", line) : NULL;

		if (line[0] && (!h || rdps_launch_strv_push(&L->hosts, h)))
			break;
	}
	st = pclose(f);
	if (st != 0 || !L->hosts.n) {
		fprintf(stderr, "rdps launch: 'scontrol show hostnames $SLURM_JOB_NODELIST' failed "
			"(status %d) or listed no node\n", st);
		return -EIO;
	}
	return 0;
}

/* Writes the ip_config: each node's address (resolved here), base_port,
 * --num_servers. */
int rdps_launch_slurm_write_ipconfig(struct rdps_launch *L)
{
	char tmp[PATH_MAX + 8];
	FILE *f;
	int ret = slurm_hosts(L);

	if (ret)
		return ret;
	snprintf(tmp, sizeof(tmp), "%s.tmp", L->ip_config);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "rdps launch: cannot write %s: %s\n", tmp, strerror(errno));
		return -errno;
	}
	fprintf(f, "# written by rdps launch --backend slurm for job %s\n",
		getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "(none)");
	for (int i = 0; i < L->hosts.n; i++) {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
		char name[512], ip[64];
		int rc;

		snprintf(name, sizeof(name), "%s%s", L->hosts.v[i], L->host_suffix ? L->host_suffix : "");
		rc = getaddrinfo(name, NULL, &hints, &res);
		if (rc || getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST)) {
			fprintf(stderr, "rdps launch: node '%s' does not resolve to an IPv4 address (%s)\n",
				name, rc ? gai_strerror(rc) : "getnameinfo");
			if (!rc)
				freeaddrinfo(res);
			fclose(f);
			unlink(tmp);
			return -EHOSTUNREACH;
		}
		freeaddrinfo(res);
		fprintf(f, "%s %u %ld   # %s\n", ip, L->base_port, L->num_servers, name);
	}
	if (fclose(f) || rename(tmp, L->ip_config)) {
		fprintf(stderr, "rdps launch: cannot write %s: %s\n", L->ip_config, strerror(errno));
		return -errno;
	}
	fprintf(stderr, "rdps launch: wrote %s (%d node(s), %ld server(s) each)\n", L->ip_config,
		L->hosts.n, L->num_servers);
	return 0;
}

/* srun --export LIST with RDPS_SECRET and the --env names added (NONE:
 * only they, and Slurm's own variables; ALL: unchanged). NULL on ENOMEM. */
static char *export_with_secret(struct rdps_launch *L, char *list, const char *flag)
{
	char *names = NULL, *out;
	size_t len = 0;
	FILE *f;

	if (!strncmp(list, "ALL", 3))
		return rdps_launch_owned_printf(&L->owned, "%s%s", flag, list);
	f = open_memstream(&names, &len);
	if (!f)
		return NULL;
	if (strcmp(list, "NONE") && *list)
		fputs(list, f);
	if (getenv("RDPS_SECRET") && !strstr(list, "RDPS_SECRET"))
		fprintf(f, "%sRDPS_SECRET", ftell(f) ? "," : "");
	for (int i = 0; i < L->env_names.n; i++)
		fprintf(f, "%s%s", ftell(f) ? "," : "", L->env_names.v[i]);
	if (fclose(f))
		return NULL;
	out = rdps_launch_owned_printf(&L->owned, "%s%s", flag, len ? names : list);
	free(names);
	return out;
}

int rdps_launch_run_slurm(struct rdps_launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct rdps_launch_strv cmd = { 0 }, role = { 0 };
	char *a[3];
	int ret = 0;

	a[0] = rdps_launch_owned_printf(&L->owned, "--nodes=%u", l->num_machines);
	a[1] = rdps_launch_owned_printf(&L->owned, "--ntasks=%u", l->world_size);
	a[2] = rdps_launch_owned_printf(&L->owned, "--ntasks-per-node=%u",
					l->machines[0].num_servers + l->machines[0].num_trainers);
	if (!a[0] || !a[1] || !a[2] || rdps_launch_role_cmd(L, &role)) {
		free(role.v);
		return 1;
	}
	ret |= rdps_launch_strv_push(&cmd, "srun");
	ret |= rdps_launch_strv_push(&cmd, a[0]);
	ret |= rdps_launch_strv_push(&cmd, a[1]);
	ret |= rdps_launch_strv_push(&cmd, a[2]);
	ret |= rdps_launch_strv_push(&cmd, "--distribution=block");
	ret |= rdps_launch_strv_push(&cmd, "--kill-on-bad-exit=1");
	for (int i = 0; i < L->srun_args.n; i++) {
		char *arg = L->srun_args.v[i], *e;

		/* srun exports this environment (RDPS_SECRET with it) unless
		 * told otherwise: then the secret is added to the list by name
		 * (its value stays off the command line). */
		if (!strcmp(arg, "--export") && i + 1 < L->srun_args.n) {
			ret |= rdps_launch_strv_push(&cmd, arg);
			e = export_with_secret(L, L->srun_args.v[++i], "");
			ret |= e ? rdps_launch_strv_push(&cmd, e) : -ENOMEM;
		} else if (!strncmp(arg, "--export=", 9)) {
			e = export_with_secret(L, arg + 9, "--export=");
			ret |= e ? rdps_launch_strv_push(&cmd, e) : -ENOMEM;
		} else {
			ret |= rdps_launch_strv_push(&cmd, arg);
		}
	}
	for (int i = 0; i < role.n; i++)
		ret |= rdps_launch_strv_push(&cmd, role.v[i]);
	ret = ret ? 1 : rdps_launch_exec_or_print(L, &cmd, "srun");
	free(cmd.v);
	free(role.v);
	return ret;
}
