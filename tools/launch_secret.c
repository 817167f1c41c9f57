// SPDX-License-Identifier: MIT
/*
 * rdps launch: every job carries a shared secret (include/rdps/auth.h), so
 * its servers accept only the job's own processes and an admin holding it.
 * The user's (--secret-file in the train arguments, or RDPS_SECRET) wins;
 * otherwise one is made here per job. It travels in the environment, which
 * ps does not show (only the process's owner and root can read
 * /proc/PID/environ), never on a command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch_run.h"
#include "rdps/auth.h"
#include "rdps/common.h"

#define SECRET_BYTES 32

int rdps_launch_job_secret(struct rdps_launch *L)
{
	const char *file = L->job.exec ? NULL
			   : rdps_launch_train_opt(L->train_args, L->num_train_args, "secret-file");
	const char *env = getenv("RDPS_SECRET");
	uint8_t raw[SECRET_BYTES];
	char hex[2 * SECRET_BYTES + 1];
	int ret;

	if (file) {
		L->secret_source = "--secret-file";
		rdps_info("launch: the job's secret is %s's (--secret-file, also given to the servers)",
			  file);
		return 0;
	}
	if (env && *env) {
		L->secret_source = "RDPS_SECRET";
		if (L->ssh_remote) /* it came in the control stream */
			rdps_dbg("launch: the job's secret came in the control stream");
		else
			rdps_info("launch: the job's secret is RDPS_SECRET of this environment");
		return 0;
	}
	if (L->role_from_env || L->ssh_remote) {
		/* A rank cannot make one: its peers would make others. */
		fprintf(stderr, "rdps launch %s: no RDPS_SECRET in this process's environment and no "
			"--secret-file: its servers run without authentication (rdps launch hands one "
			"to every rank; a Kubernetes Job takes it from a Secret, "
			"deploy/k8s/rdps-job.yaml)\n", L->ssh_remote ? "--ssh-remote" : "--role-from-env");
		return 0;
	}
	if (L->machine >= 0 && L->layout.num_machines > 1) {
		/* One machine of a job whose others are started separately
		 * (by hand, by another tool): a secret made here would be
		 * this machine's alone. */
		for (int i = 0; i < L->server_args.n; i++)
			if (!strcmp(L->server_args.v[i], "--allow-unauthenticated")) {
				L->secret_source = "none";
				return 0;
			}
		fprintf(stderr, "rdps launch: --machine %ld runs one machine of a %u-machine job whose "
			"other machines are started separately, so they cannot share a secret made "
			"here: give every machine's launcher the same one, RDPS_SECRET in its "
			"environment (e.g. from 'openssl rand -hex 32') or --secret-file F in the train "
			"arguments (--server_arg=--allow-unauthenticated: a job without authentication); "
			"nothing was started\n", L->machine, L->layout.num_machines);
		return -EINVAL;
	}
	ret = rdps_random_bytes(raw, sizeof(raw));
	if (ret) {
		fprintf(stderr, "rdps launch: cannot make the job's secret (getrandom: %s)\n",
			strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	if (setenv("RDPS_SECRET", hex, 1)) {
		ret = -errno;
		fprintf(stderr, "rdps launch: setenv RDPS_SECRET: %s\n", strerror(errno));
		return ret;
	}
	L->secret_source = "generated";
	rdps_info("launch: generated the job's secret (%d random bytes), handed to every process "
		  "in RDPS_SECRET; to reach the job's servers from outside (rdps stats), set "
		  "RDPS_SECRET before rdps launch", SECRET_BYTES);
	return 0;
}
