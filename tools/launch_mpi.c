// SPDX-License-Identifier: MIT
/* rdps launch --backend mpi: one mpirun, one app context per machine, every
 * rank running rdps launch --role-from-env (no MPI library is used). */
#include <stdio.h>
#include <stdlib.h>

#include "launch_run.h"

int rdps_launch_run_mpi(struct rdps_launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct rdps_launch_strv cmd = { 0 }, role = { 0 };
	int ret = 0;

	if (L->mpi_hosts.n && L->mpi_hosts.n != 1 && (uint32_t)L->mpi_hosts.n != l->num_machines) {
		fprintf(stderr, "rdps launch: --mpi_hosts lists %d host(s), the layout has %u machine(s) "
			"(give one per machine, or one for all)\n", L->mpi_hosts.n, l->num_machines);
		return 2;
	}
	if (rdps_launch_role_cmd(L, &role)) {
		free(role.v);
		return 1;
	}
	ret |= rdps_launch_strv_push(&cmd, (char *)L->mpirun);
	for (int i = 0; i < L->mpi_args.n; i++)
		ret |= rdps_launch_strv_push(&cmd, L->mpi_args.v[i]);
	if (getenv("RDPS_LOG_LEVEL")) {
		ret |= rdps_launch_strv_push(&cmd, "-x");
		ret |= rdps_launch_strv_push(&cmd, "RDPS_LOG_LEVEL");
	}
	/* -x NAME: mpirun takes the value from this environment, so the
	 * secret is on no command line (rdps_launch_job_secret). */
	if (getenv("RDPS_SECRET")) {
		ret |= rdps_launch_strv_push(&cmd, "-x");
		ret |= rdps_launch_strv_push(&cmd, "RDPS_SECRET");
	}
	for (int i = 0; i < L->env_names.n; i++) {
		ret |= rdps_launch_strv_push(&cmd, "-x");
		ret |= rdps_launch_strv_push(&cmd, L->env_names.v[i]);
	}
	/* One app context per machine: ranks are numbered in context order,
	 * which is the layout's machine order. */
	for (uint32_t m = 0; m < l->num_machines && !ret; m++) {
		const struct rdps_launch_machine *mc = &l->machines[m];
		const char *host = L->mpi_hosts.n ? L->mpi_hosts.v[L->mpi_hosts.n == 1 ? 0 : m] : mc->host;
		uint32_t np = mc->num_servers + mc->num_trainers;
		char *a = rdps_launch_owned_printf(&L->owned, "%u", np);
		char *b = rdps_launch_owned_printf(&L->owned, "%s:%u", host, np);

		if (!a || !b) {
			ret = 1;
			break;
		}
		if (m)
			ret |= rdps_launch_strv_push(&cmd, ":");
		ret |= rdps_launch_strv_push(&cmd, "-np");
		ret |= rdps_launch_strv_push(&cmd, a);
		ret |= rdps_launch_strv_push(&cmd, "-H");
		ret |= rdps_launch_strv_push(&cmd, b);
		if (L->wrapper)
			ret |= rdps_launch_strv_push(&cmd, (char *)L->wrapper);
		for (int i = 0; i < role.n; i++)
			ret |= rdps_launch_strv_push(&cmd, role.v[i]);
	}
	ret = ret ? 1 : rdps_launch_exec_or_print(L, &cmd, "mpirun");
	free(cmd.v);
	free(role.v);
	return ret;
}
