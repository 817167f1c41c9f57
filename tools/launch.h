/* SPDX-License-Identifier: MIT */
/*
 * rdps launch: the rank layout, roles from the environment, and the command
 * line of each role. Everything here except rdps_launch_bind_check is a pure
 * function of its arguments (the environment is read through a callback), so
 * the suites test it directly (tests/deploy/test_launch_role.c).
 *
 * Rank layout. The job's machines are the ip_config's lines, in file order,
 * followed by the --trainer_hosts (machines that run trainers only). Machine
 * m runs S_m servers (its ip_config num_servers; 0 for a trainer host) and P
 * trainers (P = --num_client_proc, trainer processes per machine as in
 * DGL-KE's dglke_dist_train; 0 on ip_config machines when --trainer_hosts is
 * given: dedicated servers). World ranks go machine by machine, and within a
 * machine servers first:
 *
 *   rank = first_rank(m) + o,  o < S_m: server first_server(m) + o
 *                              o >= S_m: local trainer l = o - S_m
 *
 * Servers keep their ip_config numbering (machine 0's first). Trainers are
 * numbered round-robin over the machines that run trainers (Mt of them):
 * local trainer l of trainer machine t is trainer j = l * Mt + t. rdps train
 * trains trainer j on part j % k, so with a partition in one part per
 * machine (k = M), every trainer samples the part whose entities live on the
 * servers of its own machine, as DGL-KE does.
 *
 * W = sum(S_m) + Mt * P. Open MPI (one app context per machine), srun's block
 * distribution (S + P tasks per node) and one Kubernetes pod per machine all
 * produce this order.
 */
#ifndef RDPS_TOOLS_LAUNCH_H
#define RDPS_TOOLS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/ipconfig.h"

struct rdps_launch_machine {
	char host[RDPS_HOST_MAX]; /* ip_config address or trainer host */
	uint32_t num_servers;     /* S_m */
	uint32_t first_server;    /* global id of its first server */
	uint32_t num_trainers;    /* 0 or P */
	uint32_t trainer_index;   /* t among the machines with trainers */
	uint32_t first_rank;      /* world rank of its first process */
};

struct rdps_launch_layout {
	uint32_t num_machines;
	uint32_t num_servers;          /* sum of S_m */
	uint32_t num_trainers;         /* Mt * P */
	uint32_t trainers_per_machine; /* P */
	uint32_t num_trainer_machines; /* Mt */
	uint32_t world_size;           /* W */
	struct rdps_launch_machine *machines; /* num_machines entries */
};

enum rdps_launch_kind {
	RDPS_ROLE_SERVER = 1,
	RDPS_ROLE_TRAINER = 2,
	RDPS_ROLE_MACHINE = 3, /* every process of one machine (one pod each) */
};

struct rdps_launch_role {
	int kind;         /* enum rdps_launch_kind */
	uint32_t id;      /* server id, trainer rank, or machine index */
	uint32_t machine; /* machine it runs on */
	uint32_t rank;    /* world rank (RDPS_ROLE_MACHINE: its first rank) */
};

/*
 * Builds the layout from the ip_config, n trainer hosts and P trainers per
 * machine (P >= 1). Returns 0, or -EINVAL with a reason in err. Free with
 * rdps_launch_layout_free (accepts a zeroed or half-built layout).
 */
int rdps_launch_layout_init(struct rdps_launch_layout *l, const struct rdps_ipconfig *ipc,
			    char *const *trainer_hosts, uint32_t n, uint32_t P, char *err,
			    size_t errlen);
void rdps_launch_layout_free(struct rdps_launch_layout *l);

/* Role of world rank (< world_size). Returns 0 or -ERANGE. */
int rdps_launch_layout_role(const struct rdps_launch_layout *l, uint32_t rank,
			    struct rdps_launch_role *role);

/* Role of trainer j / server i (inverse of the above). */
int rdps_launch_layout_trainer(const struct rdps_launch_layout *l, uint32_t j,
			       struct rdps_launch_role *role);
int rdps_launch_layout_server(const struct rdps_launch_layout *l, uint32_t i,
			      struct rdps_launch_role *role);

/* "server 1" / "trainer 0" / "machine 2" */
const char *rdps_launch_role_name(const struct rdps_launch_role *role, char *buf, size_t len);

/* ---- Roles from the environment ---- */

/* What a launcher told this process; -1 where it said nothing. */
struct rdps_launch_env {
	const char *source; /* "Open MPI", "PMIx", "MPICH (PMI)", "Slurm", "Kubernetes", "RDPS_RANK" */
	int64_t rank;       /* world rank */
	int64_t size;       /* world size */
	int64_t local_rank; /* rank on its node */
	int64_t machine;    /* machine index (Kubernetes: the pod's completion index) */
};

/* Environment lookup: returns the value of name or NULL. */
typedef const char *(*rdps_launch_getenv_fn)(void *ctx, const char *name);

/*
 * Reads the first launcher that set its variables, in this order (an MPI job
 * started inside a Slurm allocation also inherits SLURM_PROCID, so MPI comes
 * first):
 *   RDPS_RANK, RDPS_WORLD_SIZE, RDPS_LOCAL_RANK        (explicit override)
 *   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK           (Open MPI mpirun)
 *   PMIX_RANK (+ OMPI_COMM_WORLD_SIZE or SLURM_NTASKS) (PMIx: srun --mpi=pmix, prrte)
 *   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID                (MPICH Hydra, Intel MPI)
 *   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID (srun)
 *   JOB_COMPLETION_INDEX                               (Kubernetes Indexed Job:
 *                                                       the pod is machine INDEX)
 * Returns 0, -ENOENT if none is set, or -EINVAL naming the variable whose
 * value is not a non-negative integer (or a rank >= size).
 */
int rdps_launch_env_detect(rdps_launch_getenv_fn get, void *ctx, struct rdps_launch_env *env,
			   char *err, size_t errlen);

/*
 * The role of this process: the layout's role of env->rank after checking
 * env->size == world_size, or RDPS_ROLE_MACHINE for env->machine when the
 * launcher gives a machine (Kubernetes). Returns 0 or -EINVAL with a reason.
 */
int rdps_launch_env_role(const struct rdps_launch_layout *l, const struct rdps_launch_env *env,
			 struct rdps_launch_role *role, char *err, size_t errlen);

/* ---- Command lines ---- */

struct rdps_launch_job {
	const char *exe;             /* the rdps binary */
	const char *ip_config;       /* path passed to every process */
	char *const *train_args;     /* the job's rdps train arguments */
	int num_train_args;
	char *const *server_args;    /* extra rdps server arguments (--server_arg) */
	int num_server_args;
	const struct rdps_launch_layout *layout;
	bool exec;                   /* --exec: train_args are a command each trainer
				      * runs; servers start without tables */
	const char *transport;       /* --exec's --transport, or NULL (auto) */
};

/*
 * Checks the job's train arguments: the launcher sets --ip_config, --rank
 * and --num_trainers itself and refuses them (and --standalone). Returns 0
 * or -EINVAL with the reason.
 */
int rdps_launch_check_train_args(char *const *args, int n, char *err, size_t errlen);

/* The value of train option name ("secret-file": --secret-file F or
 * --secret-file=F, last one wins), or NULL. */
const char *rdps_launch_train_opt(char *const *args, int n, const char *name);

/* True if the train arguments contain --keep_servers. */
bool rdps_launch_keeps_servers(char *const *args, int n);

/*
 * The argv (NULL-terminated, malloc'd array; strings borrowed from job or
 * in the array's own allocation) that runs role (server or trainer):
 *   server i:  EXE server --ip_config F --server_id i [shared] [server_args]
 *   trainer j: EXE train [train_args] --ip_config F --num_trainers T --rank j
 * where [shared] are the train arguments servers also need, with the same
 * names: --partition --model_name --hidden_dim --gamma --lr --optimizer
 * --transport --ofi-provider --seed --secret-file. With job->exec, train_args are a command:
 *   server i:  EXE server --ip_config F --server_id i [--transport T] [server_args]
 *   trainer j: /usr/bin/env RDPS_IP_CONFIG=F RDPS_RANK=j RDPS_NUM_TRAINERS=T
 *              RDPS_NUM_SERVERS=S RDPS_TRANSPORT=T' [train_args]
 * (env finds the command in PATH). Free with free(). Returns NULL on ENOMEM.
 */
char **rdps_launch_role_argv(const struct rdps_launch_job *job, const struct rdps_launch_role *role);

/* ---- Network ---- */

/*
 * Tries to bind a TCP socket (SO_REUSEADDR, as servers do) to host:port.
 * Returns 0 if it could, -EADDRINUSE, -EADDRNOTAVAIL (not an address of
 * this host), or -EHOSTUNREACH if host does not resolve; why gets a phrase.
 */
int rdps_launch_bind_check(const char *host, uint16_t port, char *why, size_t len);

#endif
