/* SPDX-License-Identifier: MIT */
/*
 * rdps launch, inside: what cmd_launch.c (options, checks, dispatch) shares
 * with the launchers, one file each: launch_local.c (fork and supervise,
 * through launch_supervisor.c), launch_mpi.c, launch_slurm.c and
 * launch_rank.c (--role-from-env: what mpirun, srun and a Kubernetes pod
 * run). The layout and the role command lines are in launch.h.
 */
#ifndef RDPS_TOOLS_LAUNCH_RUN_H
#define RDPS_TOOLS_LAUNCH_RUN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "launch.h"
#include "launch_supervisor.h"
#include "rdps/ipconfig.h"

/* A growing NULL-terminated array of borrowed strings. */
struct rdps_launch_strv {
	char **v; /* NULL-terminated once non-empty */
	int n;
};

/* Appends x (borrowed). Returns 0 or -ENOMEM. */
int rdps_launch_strv_push(struct rdps_launch_strv *s, char *x);

/* Splits "a,b,c" (modified in place) onto s. Returns 0 or -ENOMEM. */
int rdps_launch_strv_push_list(struct rdps_launch_strv *s, char *list);

/* printf into a new string that owned keeps (freed by the caller with each
 * of owned's strings); NULL on ENOMEM. */
char *rdps_launch_owned_printf(struct rdps_launch_strv *owned, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prints argv on one line, quoted for a POSIX shell where needed. */
void rdps_launch_print_argv(FILE *f, char *const *argv);

/* One rdps launch run: its options and what was derived from them. */
struct rdps_launch {
	const char *backend;
	bool role_from_env, print_layout, dry_run, quiet, no_check;
	const char *ip_config, *log_dir, *mpirun, *wrapper, *host_suffix;
	char exe[PATH_MAX];      /* rdps binary of the job's processes (--rdps) */
	char self[PATH_MAX];     /* this binary: it checks the train arguments */
	char ipc_path[PATH_MAX]; /* the ip_config, absolute */
	uint32_t P;              /* --num_client_proc */
	long num_servers, machine;
	int grace_ms;
	uint16_t base_port;
	struct rdps_launch_strv trainer_hosts, server_args, mpi_args, mpi_hosts, srun_args, hosts;
	struct rdps_launch_strv owned; /* strings allocated here, freed at the end */
	const char *secret_source;     /* where the job's secret comes from (launch_secret.c) */
	struct rdps_launch_strv env_names; /* --env: variables handed to every process */
	/* --backend ssh (launch_ssh.c) and its machines' side (launch_remote.c) */
	const char *ssh_key, *ssh_user, *workspace;
	long ssh_port;                 /* 0: ssh's own default */
	int ssh_connect_timeout;       /* seconds */
	struct rdps_launch_strv ssh_args, ssh_hosts;
	bool ssh_remote, remote_check; /* --ssh-remote [--remote-check] */
	char remote_dir[PATH_MAX];     /* --ssh-remote: holds the ip_config it was sent */
	rdps_launch_line_fn on_line;   /* sees every output line (rdps dist_train) */
	void *line_ctx;
	char **train_args;             /* after '--' */
	int num_train_args;
	struct rdps_ipconfig ipc;
	struct rdps_launch_layout layout;
	struct rdps_launch_job job;
};

/*
 * Appends the command every rank of an engine runs ("EXE launch
 * --role-from-env --ip_config F ... -- TRAIN_ARGS") to out. Returns 0 or
 * -ENOMEM.
 */
int rdps_launch_role_cmd(struct rdps_launch *L, struct rdps_launch_strv *out);

/*
 * Prints cmd to stderr and execs it (PATH lookup); with --dry_run prints it
 * to stdout instead and returns 0. what ("mpirun", "srun") names the tool in
 * the error. Returns 127 if it could not run.
 */
int rdps_launch_exec_or_print(struct rdps_launch *L, struct rdps_launch_strv *cmd,
			      const char *what);

/*
 * Checks the train arguments once, before anything starts: runs "SELF train
 * --check-only" with trainer 0's command line (the train arguments and what
 * the launcher adds), bounded. Returns 0 if the check passed (or with
 * --dry_run or --no_check, without running it); otherwise the check's
 * output is on stderr with a line saying nothing was started, and the
 * return value is rdps launch's exit code: 2 (the arguments are wrong) or 1
 * (the check could not run).
 */
int rdps_launch_check_train(struct rdps_launch *L);
/* The same with trainer j's command line. */
int rdps_launch_check_train_as(struct rdps_launch *L, uint32_t j);

/* Every server of machine (all, machine < 0) can listen on this host;
 * else says why for each. 0 or -EADDRINUSE. */
int rdps_launch_check_ports(const struct rdps_launch *L, long machine);

/*
 * The job's shared secret, before anything starts: the train arguments'
 * --secret-file (the servers get it too), else RDPS_SECRET from this
 * environment, else 32 random bytes generated here (hex) and put in this
 * process's RDPS_SECRET, which every process of the job inherits or is
 * handed (mpirun -x, srun's exported environment, the ssh backend's control
 * stream): never on a command line. With --role-from-env nothing is
 * generated (the ranks would disagree): a rank without a secret says so.
 * With --machine M of a multi-machine job (the others started separately)
 * the user's secret is required: -EINVAL, said why, unless the servers
 * get --allow-unauthenticated. Returns 0 or -errno (said why).
 */
int rdps_launch_job_secret(struct rdps_launch *L);

/* rdps launch with a line observer (rdps dist_train's summary); argv as
 * rdps_cmd_launch's. Returns its exit code. */
int rdps_launch_main(int argc, char **argv, rdps_launch_line_fn on_line, void *line_ctx);

/* The launchers. Each returns rdps launch's exit code. */

/* Forks machine's processes (all, machine < 0) and supervises them. */
int rdps_launch_run_local(struct rdps_launch *L, long machine);
/* Runs each machine's processes over ssh (or here, for this host's). */
int rdps_launch_run_ssh(struct rdps_launch *L);

/* ---- --backend ssh, the machines' side (launch_remote.c) ---- */

/* The control message for a machine (launch_remote.c says what is in it);
 * malloc'd, *len bytes. NULL on error (errno). */
char *rdps_launch_control_build(const struct rdps_launch *L, size_t *len);
/* --ssh-remote: reads the control message from stdin, sets the secret and
 * the variables, enters --workspace and writes the ip_config it carried
 * (L->ip_config). 0 or -errno (said why). */
int rdps_launch_remote_prepare(struct rdps_launch *L);
/* Removes what prepare wrote. */
void rdps_launch_remote_cleanup(struct rdps_launch *L);
/* --remote-check: this machine's ports and first trainer's arguments;
 * prints a "ready" line. rdps launch's exit code. */
int rdps_launch_remote_check(struct rdps_launch *L);
/* Reads at most max bytes of path (NUL-terminated); NULL (errno) if it
 * cannot, or EFBIG. */
char *rdps_launch_read_file(const char *path, size_t max, size_t *len);

/* Appends "EXE launch" and the options every machine's launcher needs
 * (--num_client_proc, --grace, --trainer_hosts, --server_arg, --exec,
 * --transport) to out. 0 or -ENOMEM. */
int rdps_launch_push_job_opts(struct rdps_launch *L, struct rdps_launch_strv *out);
/* Prints and execs one mpirun: one app context per machine. */
int rdps_launch_run_mpi(struct rdps_launch *L);
/* Inside an allocation: writes the ip_config from the allocation's nodes
 * (before the layout is built; returns 0 or -errno) ... */
int rdps_launch_slurm_write_ipconfig(struct rdps_launch *L);
/* ... then prints and execs srun. */
int rdps_launch_run_slurm(struct rdps_launch *L);
/* --role-from-env: becomes the process the engine's environment names (a
 * Kubernetes pod: its machine's processes, through run_local). */
int rdps_launch_run_rank(struct rdps_launch *L);

#endif
