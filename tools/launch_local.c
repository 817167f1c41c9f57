// SPDX-License-Identifier: MIT
/* rdps launch --backend local (and each Kubernetes pod): the processes of
 * one machine, or of every machine, forked here and supervised. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "launch_run.h"
#include "launch_supervisor.h"

/* The roles of machine (or all, machine < 0) in start order: servers
 * first, so their listeners come up while trainers load data. Returns how
 * many; ps has room for every process of the layout. */
static int collect_roles(const struct rdps_launch_layout *l, long machine,
			 struct rdps_launch_proc *ps)
{
	int k = 0;

	for (uint32_t s = 0; s < l->num_servers; s++) {
		rdps_launch_layout_server(l, s, &ps[k].role);
		if (machine < 0 || ps[k].role.machine == (uint32_t)machine)
			k++;
	}
	for (uint32_t j = 0; j < l->num_trainers; j++) {
		rdps_launch_layout_trainer(l, j, &ps[k].role);
		if (machine < 0 || ps[k].role.machine == (uint32_t)machine)
			k++;
	}
	return k;
}

int rdps_launch_check_ports(const struct rdps_launch *L, long machine)
{
	int bad = 0;

	for (uint32_t s = 0; s < L->layout.num_servers; s++) {
		const struct rdps_endpoint *ep = &L->ipc.servers[s];
		struct rdps_launch_role role;
		char why[320];
		int ret;

		rdps_launch_layout_server(&L->layout, s, &role);
		if (machine >= 0 && role.machine != (uint32_t)machine)
			continue;
		ret = rdps_launch_bind_check(ep->host, ep->port, why, sizeof(why));
		if (ret == -EADDRINUSE)
			fprintf(stderr, "rdps launch: server %u cannot listen: %s (servers of another job? "
				"'rdps shutdown --ip_config %s' stops them; or change its base_port)\n",
				s, why, L->ip_config);
		else if (ret == -EADDRNOTAVAIL && L->ssh_remote)
			fprintf(stderr, "rdps launch: server %u cannot listen on this machine: %s (ssh "
				"reached another machine than the ip_config's line %u names: check the "
				"ip_config, or --ssh_hosts)\n", s, why, ep->machine + 1);
		else if (ret == -EADDRNOTAVAIL)
			fprintf(stderr, "rdps launch: server %u cannot listen here: %s (this backend runs "
				"every process on this host; use --machine M, or --backend ssh/mpi/slurm)\n",
				s, why);
		else if (ret)
			fprintf(stderr, "rdps launch: server %u: %s\n", s, why);
		bad |= ret != 0;
	}
	return bad ? -EADDRINUSE : 0;
}

/* --log_dir: DIR/server0.log, DIR/trainer1.log, ... (owned by L). */
static int log_paths(struct rdps_launch *L, struct rdps_launch_proc *ps, int n)
{
	if (!L->log_dir)
		return 0;
	if (mkdir(L->log_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rdps launch: cannot create --log_dir %s: %s\n", L->log_dir, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		ps[i].log_path = rdps_launch_owned_printf(&L->owned, "%s/%s%u.log", L->log_dir,
							  ps[i].role.kind == RDPS_ROLE_SERVER ? "server" : "trainer",
							  ps[i].role.id);
		if (!ps[i].log_path) {
			fprintf(stderr, "rdps launch: out of memory\n");
			return -ENOMEM;
		}
	}
	return 0;
}

int rdps_launch_run_local(struct rdps_launch *L, long machine)
{
	const struct rdps_launch_sup_opts o = {
		.grace_ms = L->grace_ms, .quiet = L->quiet, .log_dir = L->log_dir,
		.keep_servers = rdps_launch_keeps_servers(L->train_args, L->num_train_args),
		.stop_at_stdin_eof = L->ssh_remote, .on_line = L->on_line, .line_ctx = L->line_ctx,
	};
	struct rdps_launch_proc *ps = calloc(L->layout.world_size, sizeof(*ps));
	int n = 0, rc = 1;

	if (!ps) {
		fprintf(stderr, "rdps launch: out of memory\n");
		return 1;
	}
	n = collect_roles(&L->layout, machine, ps);
	for (int i = 0; i < n; i++) {
		ps[i].argv = rdps_launch_role_argv(&L->job, &ps[i].role);
		if (!ps[i].argv) {
			fprintf(stderr, "rdps launch: out of memory\n");
			goto out;
		}
	}
	if (L->dry_run) {
		for (int i = 0; i < n; i++) {
			char name[32];

			printf("%s: ", rdps_launch_role_name(&ps[i].role, name, sizeof(name)));
			rdps_launch_print_argv(stdout, ps[i].argv);
		}
		rc = 0;
		goto out;
	}
	if (!n) {
		fprintf(stderr, "rdps launch: machine %ld runs no process\n", machine);
		rc = 2;
		goto out;
	}
	if (rdps_launch_check_ports(L, machine) || log_paths(L, ps, n))
		goto out;
	rc = rdps_launch_supervise(ps, n, &o);
out:
	for (int i = 0; i < n; i++)
		free(ps[i].argv);
	free(ps);
	return rc;
}
