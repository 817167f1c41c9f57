/* SPDX-License-Identifier: MIT */
/*
 * rdps launch's process supervisor: runs the servers and trainers of one
 * machine as children of this process and ends them together. What the
 * local backend and a Kubernetes pod use; the engines (mpirun, srun)
 * supervise their own ranks.
 */
#ifndef RDPS_TOOLS_LAUNCH_SUPERVISOR_H
#define RDPS_TOOLS_LAUNCH_SUPERVISOR_H

#include <stdbool.h>

#include "launch.h"

/* One process to run. */
struct rdps_launch_proc {
	struct rdps_launch_role role; /* server or trainer: its name and its part in the ending */
	char **argv;                  /* what it runs (argv[0] a path); borrowed */
	const char *log_path;         /* also write its output here, or NULL */
};

struct rdps_launch_sup_opts {
	int grace_ms;      /* SIGTERM to SIGKILL delay; how long servers may outlive the trainers */
	bool quiet;        /* do not copy the output to stdout */
	bool keep_servers; /* the servers stay up after the trainers (--keep_servers) */
	const char *log_dir; /* named in the failure line, or NULL */
};

/*
 * Opens the log files, starts procs in order (each in its own process
 * group, its output line by line on stdout prefixed "[server 0] "), and
 * waits until all have exited. The first process to fail, SIGINT, SIGTERM
 * or SIGHUP stops the others (SIGTERM, then SIGKILL after grace); servers
 * still running grace after the last trainer are stopped, unless
 * keep_servers. Blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP while it runs and
 * ignores SIGPIPE. Says on stderr what happened (on failure the last line
 * starts "rdps launch: FAILED:"). Returns rdps launch's exit code: 0, 1 (a process
 * failed, could not start or could not be stopped), or 128 + the signal
 * that interrupted the job.
 */
int rdps_launch_supervise(const struct rdps_launch_proc *procs, int n,
			  const struct rdps_launch_sup_opts *o);

#endif
