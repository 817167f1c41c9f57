// SPDX-License-Identifier: MIT
/*
 * rdps launch: runs a job's servers and trainers through the engine the
 * user has: forked here (local), one mpirun (mpi), srun inside an sbatch
 * allocation (slurm), or one Kubernetes pod per machine (k8s). This file
 * reads the options, checks them and builds the layout; each launcher is
 * its own file (launch_run.h), the rank layout and the role command lines
 * are in launch_layout.c.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "launch_run.h"
#include "rdps/common.h"
#include "rdps/ipconfig.h"

#define LAUNCH_MAX_PROCS 4096

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps launch [--backend local|mpi|slurm|k8s] --ip_config FILE [options] -- TRAIN_ARGS...\n"
"       rdps launch [--backend ...] --ip_config FILE [options] --exec -- CMD [ARGS...]\n"
"       rdps launch --role-from-env --ip_config FILE [options] -- TRAIN_ARGS...\n"
"       rdps launch --print-layout --ip_config FILE [options]\n"
"\n"
"Runs one job: the servers of the ip_config and the trainers, through an engine\n"
"you already have. TRAIN_ARGS are the rdps train arguments of the job, given\n"
"once: the launcher adds --ip_config, --num_trainers and --rank to each trainer,\n"
"and gives the servers the ones they share with the trainers (--partition\n"
"--model_name --hidden_dim --gamma --lr --optimizer --transport --ofi-provider\n"
"--seed).\n"
"Before it starts anything it checks them once, as trainer 0 would get them,\n"
"with 'rdps train --check-only' (options, data, partition, save path; no server\n"
"is contacted): a bad argument stops it with the check's error.\n"
"\n"
"DGL's launch.py line runs as is (tools/launch_dgl.c): --workspace W --num_trainers T\n"
"--num_samplers S --num_servers 1 --part_config P --ip_config I [--extra_envs K=V...]\n"
"[--num_omp_threads N] \"python3 train_dist.py ...\" becomes --exec with T trainers\n"
"per machine, server m serving part m of P's directory (in W when relative), and\n"
"the command run in W by /bin/sh with RDPS_NUM_SAMPLERS=S (background sampler\n"
"threads), OMP_NUM_THREADS=N and the extra variables; it prints the line it runs.\n"
"\n"
"With --exec, what follows '--' is a command each trainer runs instead of rdps\n"
"train (a Python script on the rdps package: rdps.distributed.initialize() reads\n"
"the job from the environment), found in PATH, with\n"
"  RDPS_IP_CONFIG     the ip_config (absolute path)\n"
"  RDPS_RANK          the trainer's rank, 0 .. RDPS_NUM_TRAINERS-1\n"
"  RDPS_NUM_TRAINERS  trainers of the job\n"
"  RDPS_NUM_SERVERS   servers of the job\n"
"  RDPS_TRANSPORT     the --transport below (default auto)\n"
"  RDPS_MACHINE       the trainer's machine (its line in the ip_config): a graph\n"
"                     job's node_split gives it the part that machine serves\n"
"added to its environment. The servers start with no table (the trainers make\n"
"theirs) and get only --transport and the --server_arg's; there is no 'rdps train\n"
"--check-only' step. The trainers shut the servers down when they are done\n"
"(trainer 0, after a last barrier), as rdps train does.\n"
"e.g.: rdps launch --ip_config ip.txt --num_client_proc 2 --exec -- python3 train.py --epochs 3\n"
"\n"
"backends:\n"
"  local    fork every process here (default). One process failing, or Ctrl-C,\n"
"           stops all of them (SIGTERM, then SIGKILL after --grace); the exit\n"
"           status and the last line say what failed. Output lines are prefixed\n"
"           '[server 0] ', '[trainer 1] '.\n"
"  mpi      print and run one mpirun that starts every process as\n"
"           'rdps launch --role-from-env': one app context per machine, on the\n"
"           machine's host (or --mpi_hosts); no MPI library is used.\n"
"  slurm    inside an sbatch allocation: writes the ip_config (--ip_config FILE,\n"
"           on a shared file system) from SLURM_JOB_NODELIST expanded by\n"
"           'scontrol show hostnames', --num_servers per node, then prints and\n"
"           runs srun with --num_servers + --num_client_proc tasks per node.\n"
"  k8s      in a pod of an Indexed Job: runs the processes of machine\n"
"           JOB_COMPLETION_INDEX as the local backend does (deploy/k8s/).\n"
"\n"
"layout (rdps launch --print-layout shows it): machines are the ip_config's\n"
"lines then the --trainer_hosts; world ranks go machine by machine, servers\n"
"first; trainer j runs on the (j mod Mt)-th machine with trainers, so trainer j\n"
"trains on part j mod k next to that part's servers (deploy/README.md).\n"
"\n"
"job:\n"
"  --ip_config FILE       servers of the job, DGL-KE format 'IP [base_port [num_servers]]'\n"
"  --num_client_proc N    trainer processes per machine, as in DGL-KE (default 1);\n"
"                         trainers in all: N x machines with trainers\n"
"  --num_servers N        servers per machine: checked against the ip_config, or\n"
"                         the count written into it (slurm; default 1)\n"
"  --num_server_threads N threads of each server (1..64, default 1; DGL's knob),\n"
"                         given to rdps server\n"
"  --trainer_hosts H,...  machines that run trainers only; the ip_config's machines\n"
"                         then run servers only\n"
"  --server_arg ARG       one more argument for every server (repeat; e.g.\n"
"                         --server_arg=--init --server_arg=zeros); wins over shared ones\n"
"  --grace SEC            SIGTERM to SIGKILL delay, and how long servers may outlive\n"
"                         the trainers before they are stopped (default 10)\n"
"  --rdps PATH            the rdps binary on every host (default: this one)\n"
"  --exec                 the arguments after '--' are a command each trainer runs\n"
"                         (see above), not rdps train's\n"
"  --transport NAME       with --exec: the servers' and trainers' transport (auto,\n"
"                         tcp, verbs, ofi; default auto); without it, give\n"
"                         --transport in the train arguments\n"
"local and k8s:\n"
"  --machine M            run only machine M's processes (one host of a multi-host job)\n"
"  --log_dir DIR          also write each process's output to DIR/server0.log, ...\n"
"  --quiet                do not copy the processes' output to this terminal\n"
"mpi:\n"
"  --mpirun PATH          (default mpirun)\n"
"  --mpi_arg ARG          one more mpirun argument (repeat; e.g. --mpi_arg=--oversubscribe,\n"
"                         --mpi_arg=--allow-run-as-root)\n"
"  --mpi_hosts H,...      host of each machine for mpirun, when it is not the\n"
"                         ip_config address (one name: every machine)\n"
"  --wrapper PROGRAM      run every rank as 'PROGRAM rdps launch --role-from-env ...'\n"
"slurm:\n"
"  --base_port N          first port of each node's servers (default 30050)\n"
"  --hosts H,...          the nodes, instead of SLURM_JOB_NODELIST\n"
"  --host_suffix S        appended to each node name before resolving (e.g. -ib)\n"
"  --srun_arg ARG         one more srun argument (repeat)\n"
"other:\n"
"  --role-from-env        take this process's role from the launcher's environment\n"
"                         (OMPI_COMM_WORLD_RANK/SIZE, PMIX_RANK, PMI_RANK/PMI_SIZE,\n"
"                         SLURM_PROCID/SLURM_NTASKS, JOB_COMPLETION_INDEX, or\n"
"                         RDPS_RANK/RDPS_WORLD_SIZE) and become it (what mpi, slurm\n"
"                         and k8s run on each rank)\n"
"  --print-layout         print the rank table and exit\n"
"  --dry_run              print the commands and exit (no check)\n"
"  --no_check             do not run 'rdps train --check-only' first (a host that\n"
"                         cannot read the job's data, e.g. where mpirun starts)\n"
"  -h, --help             this text\n"
"\n"
"example: rdps launch --ip_config ip.txt --num_client_proc 2 -- --data wn18\n"
"             --partition wn18-part2 --model_name TransE_l2 --hidden_dim 400 --max_step 4000 --test\n");
}

/* ---------------------------------------------------------------------- */

static void print_layout(const struct rdps_launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;

	printf("%-6s %-8s %-24s %s\n", "rank", "machine", "host", "role");
	for (uint32_t r = 0; r < l->world_size; r++) {
		struct rdps_launch_role role;
		char name[32];

		rdps_launch_layout_role(l, r, &role);
		printf("%-6u %-8u %-24s %s", r, role.machine, l->machines[role.machine].host,
		       rdps_launch_role_name(&role, name, sizeof(name)));
		if (role.kind == RDPS_ROLE_SERVER)
			printf(" (port %u)\n", L->ipc.servers[role.id].port);
		else
			printf(" (--rank %u of %u)\n", role.id, l->num_trainers);
	}
	printf("world size %u: %u server(s) + %u trainer(s) (%u per machine on %u machine(s))\n",
	       l->world_size, l->num_servers, l->num_trainers, l->trainers_per_machine,
	       l->num_trainer_machines);
}

static int parse_num(const char *flag, const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		fprintf(stderr, "rdps launch: %s '%s' is not a number in [%g, %g]\n", flag, s, lo, hi);
		return -1;
	}
	return 0;
}

/* An option getopt refused: one line saying why (a did-you-mean for a
 * typo), the usage line, no 60 lines of help. */
static void bad_option(const struct option *opts, const char *arg)
{
	char why[384];
	const char *close;

	/* getopt_long reads "-ip_config" as the short options -i -p ...: the
	 * name is still the best clue. */
	if (arg[0] == '-' && arg[1] && arg[1] != '-' && arg[2]) {
		close = rdps_cli_closest(opts, arg);
		snprintf(why, sizeof(why), "unknown option '%s'%s%s%s", arg, close ? " (did you mean --" : "",
			 close ? close : "", close ? "?)" : "");
	} else {
		rdps_cli_explain(opts, arg, why, sizeof(why));
	}
	fprintf(stderr, "rdps launch: %s\n"
		"usage: rdps launch [--backend local|mpi|slurm|k8s] --ip_config FILE [options] -- TRAIN_ARGS...\n"
		"       (rdps launch's options before '--', the job's rdps train arguments after it;\n"
		"       rdps launch --help lists them)\n", why);
}

/* This binary: it runs the check, and the job's processes unless --rdps. */
static int find_self(struct rdps_launch *L)
{
	ssize_t n = readlink("/proc/self/exe", L->self, sizeof(L->self) - 1);

	if (n > 0) {
		L->self[n] = '\0';
	} else if (L->exe[0]) {
		snprintf(L->self, sizeof(L->self), "%s", L->exe);
	} else {
		fprintf(stderr, "rdps launch: cannot find this binary (/proc/self/exe): give --rdps PATH\n");
		return -ENOENT;
	}
	if (!L->exe[0])
		snprintf(L->exe, sizeof(L->exe), "%s", L->self);
	return 0;
}

static void launch_free(struct rdps_launch *L)
{
	rdps_launch_layout_free(&L->layout);
	rdps_ipconfig_free(&L->ipc);
	free(L->trainer_hosts.v);
	free(L->server_args.v);
	free(L->mpi_args.v);
	free(L->mpi_hosts.v);
	free(L->srun_args.v);
	free(L->hosts.v);
	for (int i = 0; i < L->owned.n; i++)
		free(L->owned.v[i]);
	free(L->owned.v);
}

int rdps_cmd_launch(int argc, char **argv)
{
	enum { O_BACKEND = 256, O_ROLE, O_LAYOUT, O_DRY, O_NOCHECK, O_QUIET, O_IPC, O_NCP, O_NSRV,
	       O_THOSTS, O_SARG, O_GRACE, O_RDPS, O_MACHINE, O_LOGDIR, O_MPIRUN, O_MPIARG, O_MPIHOSTS,
	       O_WRAPPER, O_BASEPORT, O_HOSTS, O_SUFFIX, O_SRUNARG, O_NSTH, O_EXEC, O_TRANSPORT,
	       O_HELP };
	static const struct option opts[] = {
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "role-from-env", no_argument, NULL, O_ROLE },
		{ "role_from_env", no_argument, NULL, O_ROLE },
		{ "print-layout", no_argument, NULL, O_LAYOUT },
		{ "print_layout", no_argument, NULL, O_LAYOUT },
		{ "dry_run", no_argument, NULL, O_DRY },
		{ "dry-run", no_argument, NULL, O_DRY },
		{ "no_check", no_argument, NULL, O_NOCHECK },
		{ "no-check", no_argument, NULL, O_NOCHECK },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "ip_config", required_argument, NULL, O_IPC },
		{ "num_client_proc", required_argument, NULL, O_NCP },
		{ "num_servers", required_argument, NULL, O_NSRV },
		{ "num_server_threads", required_argument, NULL, O_NSTH },
		{ "trainer_hosts", required_argument, NULL, O_THOSTS },
		{ "server_arg", required_argument, NULL, O_SARG },
		{ "grace", required_argument, NULL, O_GRACE },
		{ "rdps", required_argument, NULL, O_RDPS },
		{ "machine", required_argument, NULL, O_MACHINE },
		{ "log_dir", required_argument, NULL, O_LOGDIR },
		{ "mpirun", required_argument, NULL, O_MPIRUN },
		{ "mpi_arg", required_argument, NULL, O_MPIARG },
		{ "mpi_hosts", required_argument, NULL, O_MPIHOSTS },
		{ "wrapper", required_argument, NULL, O_WRAPPER },
		{ "base_port", required_argument, NULL, O_BASEPORT },
		{ "hosts", required_argument, NULL, O_HOSTS },
		{ "host_suffix", required_argument, NULL, O_SUFFIX },
		{ "srun_arg", required_argument, NULL, O_SRUNARG },
		{ "exec", no_argument, NULL, O_EXEC },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct rdps_launch L = { .backend = "local", .P = 1, .num_servers = -1, .machine = -1,
			    .grace_ms = 10000, .mpirun = "mpirun", .base_port = RDPS_DEFAULT_BASE_PORT };
	char err[640];
	double v;
	int opt, at, rc = 2;
	bool bad = false, exec = false;
	const char *transport = NULL;

	if (rdps_launch_dgl_wants(argc, argv))
		return rdps_launch_dgl(argc, argv); /* translates, then comes back here */
	optind = 1;
	opterr = 0; /* bad_option says it better */
	/* No permutation ('+') and no short option but -h: the element a call
	 * starts at is the one it refuses. */
	while ((at = optind, opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case O_BACKEND: L.backend = optarg; break;
		case O_ROLE: L.role_from_env = true; break;
		case O_LAYOUT: L.print_layout = true; break;
		case O_DRY: L.dry_run = true; break;
		case O_NOCHECK: L.no_check = true; break;
		case O_QUIET: L.quiet = true; break;
		case O_IPC: L.ip_config = optarg; break;
		case O_NCP: bad |= parse_num("--num_client_proc", optarg, 1, 4096, &v) != 0; L.P = (uint32_t)v; break;
		case O_NSRV: bad |= parse_num("--num_servers", optarg, 1, RDPS_MAX_SERVERS, &v) != 0; L.num_servers = (long)v; break;
		case O_THOSTS: bad |= rdps_launch_strv_push_list(&L.trainer_hosts, optarg) != 0; break;
		case O_SARG: bad |= rdps_launch_strv_push(&L.server_args, optarg) != 0; break;
		case O_NSTH:
			/* Checked here, before any process starts. */
			bad |= parse_num("--num_server_threads", optarg, 1, 64, &v) != 0 ||
			       rdps_launch_strv_push(&L.server_args, "--num_server_threads") ||
			       rdps_launch_strv_push(&L.server_args, optarg);
			break;
		case O_GRACE: bad |= parse_num("--grace", optarg, 0, 3600, &v) != 0; L.grace_ms = (int)(v * 1000); break;
		case O_RDPS: snprintf(L.exe, sizeof(L.exe), "%s", optarg); break;
		case O_MACHINE: bad |= parse_num("--machine", optarg, 0, 1e6, &v) != 0; L.machine = (long)v; break;
		case O_LOGDIR: L.log_dir = optarg; break;
		case O_MPIRUN: L.mpirun = optarg; break;
		case O_MPIARG: bad |= rdps_launch_strv_push(&L.mpi_args, optarg) != 0; break;
		case O_MPIHOSTS: bad |= rdps_launch_strv_push_list(&L.mpi_hosts, optarg) != 0; break;
		case O_WRAPPER: L.wrapper = optarg; break;
		case O_BASEPORT: bad |= parse_num("--base_port", optarg, 1, 65535, &v) != 0; L.base_port = (uint16_t)v; break;
		case O_HOSTS: bad |= rdps_launch_strv_push_list(&L.hosts, optarg) != 0; break;
		case O_SUFFIX: L.host_suffix = optarg; break;
		case O_SRUNARG: bad |= rdps_launch_strv_push(&L.srun_args, optarg) != 0; break;
		case O_EXEC: exec = true; break;
		case O_TRANSPORT: transport = optarg; break;
		case O_HELP: usage(stdout); launch_free(&L); return 0;
		default: bad_option(opts, argv[at]); launch_free(&L); return 2;
		}
	}
	if (bad)
		goto out;
	/* Everything after the options ("--" ends them) is the train job. */
	L.train_args = argv + optind;
	L.num_train_args = argc - optind;
	if (strcmp(L.backend, "local") && strcmp(L.backend, "mpi") && strcmp(L.backend, "slurm") &&
	    strcmp(L.backend, "k8s") && strcmp(L.backend, "kubernetes")) {
		fprintf(stderr, "rdps launch: unknown --backend '%s' (local, mpi, slurm, k8s)\n", L.backend);
		goto out;
	}
	if (!strcmp(L.backend, "k8s") || !strcmp(L.backend, "kubernetes"))
		L.role_from_env = true;
	if (!L.ip_config) {
		fprintf(stderr, "rdps launch: --ip_config FILE is required (see rdps launch --help)\n");
		goto out;
	}
	if (transport && !exec) {
		fprintf(stderr, "rdps launch: --transport goes with --exec; an rdps train job gives "
			"--transport in its train arguments (after '--'), which the servers get too\n");
		goto out;
	}
	if (exec && !L.print_layout && !L.num_train_args) {
		fprintf(stderr, "rdps launch: --exec and no command: end the launch options with '--' "
			"and give the command each trainer runs (e.g. -- python3 train.py)\n");
		goto out;
	}
	if (!L.print_layout && !L.num_train_args) {
		fprintf(stderr, "rdps launch: no train arguments: end the launch options with '--' and "
			"give the job's rdps train arguments (--data, --partition, --model_name, ...)\n");
		goto out;
	}
	/* --exec: a command, not rdps train's arguments: nothing to check. */
	if (exec)
		L.no_check = true;
	if (!exec && rdps_launch_check_train_args(L.train_args, L.num_train_args, err, sizeof(err))) {
		fprintf(stderr, "rdps launch: %s\n", err);
		goto out;
	}
	if (find_self(&L))
		goto out;
	if (!strcmp(L.backend, "slurm") && !L.role_from_env) {
		if (L.trainer_hosts.n) {
			fprintf(stderr, "rdps launch: --trainer_hosts does not apply to slurm: every node runs "
				"--num_servers servers and --num_client_proc trainers\n");
			goto out;
		}
		if (L.num_servers < 0)
			L.num_servers = 1;
		rc = 1;
		if (rdps_launch_slurm_write_ipconfig(&L))
			goto out;
	}
	rc = 1;
	if (rdps_ipconfig_load(L.ip_config, &L.ipc, err, sizeof(err))) {
		fprintf(stderr, "rdps launch: %s\n", err);
		goto out;
	}
	if (!realpath(L.ip_config, L.ipc_path))
		snprintf(L.ipc_path, sizeof(L.ipc_path), "%s", L.ip_config);
	rc = 2;
	if (L.num_servers > 0)
		for (uint32_t s = 0; s < L.ipc.num_servers; s++) {
			const struct rdps_endpoint *ep = &L.ipc.servers[s];
			uint32_t per = 0;

			for (uint32_t q = 0; q < L.ipc.num_servers; q++)
				per += L.ipc.servers[q].machine == ep->machine;
			if (per != (uint32_t)L.num_servers) {
				fprintf(stderr, "rdps launch: --num_servers %ld, but machine %u (%s) of %s lists %u "
					"server(s)\n", L.num_servers, ep->machine, ep->host, L.ip_config, per);
				goto out;
			}
		}
	if (rdps_launch_layout_init(&L.layout, &L.ipc, L.trainer_hosts.v, (uint32_t)L.trainer_hosts.n,
				    L.P, err, sizeof(err))) {
		fprintf(stderr, "rdps launch: %s\n", err);
		goto out;
	}
	if (L.layout.world_size > LAUNCH_MAX_PROCS) {
		fprintf(stderr, "rdps launch: %u processes: at most %d\n", L.layout.world_size, LAUNCH_MAX_PROCS);
		goto out;
	}
	if (L.machine >= (long)L.layout.num_machines) {
		fprintf(stderr, "rdps launch: --machine %ld, but the layout has %u machine(s)\n", L.machine,
			L.layout.num_machines);
		goto out;
	}
	L.job = (struct rdps_launch_job){ .exe = L.exe, .ip_config = L.ipc_path,
					  .train_args = L.train_args, .num_train_args = L.num_train_args,
					  .server_args = L.server_args.v, .num_server_args = L.server_args.n,
					  .layout = &L.layout, .exec = exec, .transport = transport };
	if (L.print_layout) {
		print_layout(&L);
		rc = 0;
	} else if (L.role_from_env) {
		rc = rdps_launch_run_rank(&L);
	} else if ((rc = rdps_launch_check_train(&L))) {
		/* it said why */
	} else if (!strcmp(L.backend, "mpi")) {
		rc = rdps_launch_run_mpi(&L);
	} else if (!strcmp(L.backend, "slurm")) {
		rc = rdps_launch_run_slurm(&L);
	} else {
		rc = rdps_launch_run_local(&L, L.machine);
	}
out:
	launch_free(&L);
	return rc;
}
