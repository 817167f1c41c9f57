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
	struct rdps_launch_role role; /* server, trainer or machine: its name and its part in the ending */
	char **argv;                  /* what it runs (argv[0] a path); borrowed */
	const char *log_path;         /* also write its output here, or NULL */
	const char *label;            /* its output's prefix and name in messages, instead of
				       * the role's name ("server 0"), or NULL */
	bool runs_trainers;           /* a machine with trainers: the job ends with them */
	/*
	 * A control stream: these bytes are written to its stdin, which then
	 * stays open; closing it is how the process is asked to stop (rdps
	 * launch --ssh-remote stops its machine at EOF). SIGTERM follows after
	 * grace, SIGKILL after another. NULL: stdin is /dev/null.
	 */
	const char *control;
	size_t control_len;
};

/* Sees every output line of the job (without its prefix or newline). */
typedef void (*rdps_launch_line_fn)(void *ctx, const struct rdps_launch_role *role,
				    const char *line, size_t len);

struct rdps_launch_sup_opts {
	int grace_ms;      /* SIGTERM to SIGKILL delay; how long servers may outlive the trainers */
	bool quiet;        /* do not copy the output to stdout */
	bool keep_servers; /* the servers stay up after the trainers (--keep_servers) */
	const char *log_dir; /* named in the failure line, or NULL */
	/* End of file (or an error) on this process's stdin stops the job as
	 * SIGHUP does: the launcher at the other end of an ssh session is gone. */
	bool stop_at_stdin_eof;
	rdps_launch_line_fn on_line; /* or NULL */
	void *line_ctx;
};

/*
 * Opens the log files, starts procs in order (each in its own process
 * group, its output line by line on stdout prefixed "[server 0] "; a
 * machine's lines that name their process, "[server 0] x", become
 * "[LABEL server 0] x"), and waits until all have exited. The first process
 * to fail, SIGINT, SIGTERM or SIGHUP stops the others (SIGTERM, or closing
 * a control stream; then SIGKILL after grace); servers still running grace
 * after the last trainer (or machine with trainers) are stopped, unless
 * keep_servers. The failure line names the process and, for a machine, the
 * failure its own launcher reported ("rdps launch: FAILED: ...") or else
 * its last line of output. Blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP while it runs and
 * ignores SIGPIPE. Says on stderr what happened (on failure the last line
 * starts "rdps launch: FAILED:"). Returns rdps launch's exit code: 0, 1 (a process
 * failed, could not start or could not be stopped), or 128 + the signal
 * that interrupted the job.
 */
int rdps_launch_supervise(const struct rdps_launch_proc *procs, int n,
			  const struct rdps_launch_sup_opts *o);

#endif
