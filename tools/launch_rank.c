// SPDX-License-Identifier: MIT
/* rdps launch --role-from-env: what every rank of mpirun or srun runs, and
 * every pod of a Kubernetes Indexed Job (--backend k8s): take the role from
 * the engine's environment and become it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_run.h"
#include "rdps/common.h"

static const char *real_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

int rdps_launch_run_rank(struct rdps_launch *L)
{
	struct rdps_launch_env env;
	struct rdps_launch_role role;
	char err[512], name[32], **argv;

	if (rdps_launch_env_detect(real_getenv, NULL, &env, err, sizeof(err)) ||
	    rdps_launch_env_role(&L->layout, &env, &role, err, sizeof(err))) {
		fprintf(stderr, "rdps launch --role-from-env: %s\n", err);
		return 2;
	}
	if (role.kind == RDPS_ROLE_MACHINE) {
		int rc;

		rdps_info("launch: %s pod %u runs machine %u (%s)", env.source, role.id, role.machine,
			  L->layout.machines[role.machine].host);
		/* No launcher above a pod: each checks before it starts its
		 * processes (an MPI or Slurm rank's launcher has checked). */
		if ((rc = rdps_launch_check_train(L)))
			return rc;
		return rdps_launch_run_local(L, (long)role.machine);
	}
	rdps_launch_role_name(&role, name, sizeof(name));
	if (env.local_rank >= 0)
		rdps_info("launch: %s rank %u (local rank %lld) is %s on machine %u (%s)", env.source,
			  role.rank, (long long)env.local_rank, name, role.machine,
			  L->layout.machines[role.machine].host);
	else
		rdps_info("launch: %s rank %u is %s on machine %u (%s)", env.source, role.rank, name,
			  role.machine, L->layout.machines[role.machine].host);
	if (role.kind == RDPS_ROLE_SERVER) {
		const struct rdps_endpoint *ep = &L->ipc.servers[role.id];
		char why[320];
		int ret = rdps_launch_bind_check(ep->host, ep->port, why, sizeof(why));

		if (ret) {
			fprintf(stderr,
				"rdps launch: %s rank %u is %s, but %s%s (ranks must be placed machine by "
				"machine as rdps launch --print-layout shows)\n",
				env.source, role.rank, name, why,
				ret == -EADDRNOTAVAIL ? ": this rank runs on the wrong host" : "");
			return 1;
		}
	}
	argv = rdps_launch_role_argv(&L->job, &role);
	if (!argv)
		return 1;
	if (L->dry_run) {
		rdps_launch_print_argv(stdout, argv);
		free(argv);
		return 0;
	}
	fflush(NULL);
	execv(argv[0], argv);
	fprintf(stderr, "rdps launch: cannot run %s: %s\n", argv[0], strerror(errno));
	free(argv);
	return 127;
}
