// SPDX-License-Identifier: MIT
/*
 * rdps launch: runs a job's servers and trainers through the engine the
 * user has: forked here (local), one mpirun (mpi), srun inside an sbatch
 * allocation (slurm), or one Kubernetes pod per machine (k8s). The rank
 * layout and the role command lines are in launch_layout.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "launch.h"
#include "rdps/common.h"
#include "rdps/ipconfig.h"

#define LAUNCH_MAX_PROCS 4096

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps launch [--backend local|mpi|slurm|k8s] --ip_config FILE [options] -- TRAIN_ARGS...\n"
"       rdps launch --role-from-env --ip_config FILE [options] -- TRAIN_ARGS...\n"
"       rdps launch --print-layout --ip_config FILE [options]\n"
"\n"
"Runs one job: the servers of the ip_config and the trainers, through an engine\n"
"you already have. TRAIN_ARGS are the rdps train arguments of the job, given\n"
"once: the launcher adds --ip_config, --num_trainers and --rank to each trainer,\n"
"and gives the servers the ones they share with the trainers (--partition\n"
"--model_name --hidden_dim --gamma --lr --optimizer --transport --seed).\n"
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
"  --trainer_hosts H,...  machines that run trainers only; the ip_config's machines\n"
"                         then run servers only\n"
"  --server_arg ARG       one more argument for every server (repeat; e.g.\n"
"                         --server_arg=--init --server_arg=zeros); wins over shared ones\n"
"  --grace SEC            SIGTERM to SIGKILL delay, and how long servers may outlive\n"
"                         the trainers before they are stopped (default 10)\n"
"  --rdps PATH            the rdps binary on every host (default: this one)\n"
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
"  --dry_run              print the commands and exit\n"
"  -h, --help             this text\n"
"\n"
"example: rdps launch --ip_config ip.txt --num_client_proc 2 -- --data wn18\n"
"             --partition wn18-part2 --model_name TransE_l2 --hidden_dim 400 --max_step 4000 --test\n");
}

struct strv {
	char **v;
	int n;
};

static int strv_push(struct strv *s, char *x)
{
	char **n = realloc(s->v, (size_t)(s->n + 2) * sizeof(char *));

	if (!n)
		return -ENOMEM;
	s->v = n;
	s->v[s->n++] = x;
	s->v[s->n] = NULL;
	return 0;
}

/* printf into a new string that L owns; NULL on ENOMEM. */
static char *owned_printf(struct strv *owned, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static char *owned_printf(struct strv *owned, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	if (strv_push(owned, s)) {
		free(s);
		return NULL;
	}
	return s;
}

/* Splits "a,b,c" (modified in place) onto s. */
static int strv_push_list(struct strv *s, char *list)
{
	char *save = NULL;

	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (strv_push(s, p))
			return -ENOMEM;
	return 0;
}

struct launch {
	const char *backend;
	bool role_from_env, print_layout, dry_run, quiet;
	const char *ip_config, *log_dir, *mpirun, *wrapper, *host_suffix;
	char exe[PATH_MAX];
	char ipc_path[PATH_MAX];
	uint32_t P;
	long num_servers, machine;
	int grace_ms;
	uint16_t base_port;
	struct strv trainer_hosts, server_args, mpi_args, mpi_hosts, srun_args, hosts;
	struct strv owned; /* strings allocated here, freed by launch_free */
	char **train_args;
	int num_train_args;
	struct rdps_ipconfig ipc;
	struct rdps_launch_layout layout;
	struct rdps_launch_job job;
};

/* ---------------------------------------------------------------------- */
/* Printing commands */

static void print_quoted(FILE *f, const char *a)
{
	bool plain = *a != '\0';

	for (const char *p = a; *p && plain; p++)
		plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-", *p);
	if (plain) {
		fputs(a, f);
		return;
	}
	fputc('\'', f);
	for (const char *p = a; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputc('\'', f);
}

static void print_argv(FILE *f, char *const *argv)
{
	for (int i = 0; argv[i]; i++) {
		if (i)
			fputc(' ', f);
		print_quoted(f, argv[i]);
	}
	fputc('\n', f);
}

static const char *describe_status(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by SIG%s%s",
			 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?",
			 WCOREDUMP(st) ? " (core dumped)" : "");
	else
		snprintf(buf, len, "stopped (status 0x%x)", st);
	return buf;
}

/* ---------------------------------------------------------------------- */
/* The role processes' common arguments: rdps launch --role-from-env ... */

static int role_cmd(struct launch *L, struct strv *out)
{
	static char pbuf[16], gbuf[32];
	int ret = 0;

	snprintf(pbuf, sizeof(pbuf), "%u", L->P);
	snprintf(gbuf, sizeof(gbuf), "%g", L->grace_ms / 1000.0);
	ret |= strv_push(out, L->exe);
	ret |= strv_push(out, "launch");
	ret |= strv_push(out, "--role-from-env");
	ret |= strv_push(out, "--ip_config");
	ret |= strv_push(out, L->ipc_path);
	ret |= strv_push(out, "--num_client_proc");
	ret |= strv_push(out, pbuf);
	ret |= strv_push(out, "--grace");
	ret |= strv_push(out, gbuf);
	for (int i = 0; i < L->trainer_hosts.n; i++) {
		ret |= strv_push(out, "--trainer_hosts");
		ret |= strv_push(out, L->trainer_hosts.v[i]);
	}
	for (int i = 0; i < L->server_args.n; i++) {
		char *a = owned_printf(&L->owned, "--server_arg=%s", L->server_args.v[i]);

		if (!a)
			return -ENOMEM;
		ret |= strv_push(out, a);
	}
	ret |= strv_push(out, "--");
	for (int i = 0; i < L->num_train_args; i++)
		ret |= strv_push(out, L->train_args[i]);
	return ret ? -ENOMEM : 0;
}

/* ---------------------------------------------------------------------- */
/* local: fork and supervise */

struct proc {
	struct rdps_launch_role role;
	char name[32];
	pid_t pid;
	int fd;           /* read end of its stdout+stderr, -1 at EOF */
	int log_fd;       /* --log_dir file or -1 */
	bool running;
	bool stopped;     /* we signalled it */
	int status;
	size_t len;       /* bytes of a partial line in buf */
	char buf[4096];
};

static void emit(struct launch *L, struct proc *p, const char *line, size_t n)
{
	char out[sizeof(p->buf) + 48];
	int k;

	if (p->log_fd >= 0 &&
	    (write(p->log_fd, line, n) < 0 || write(p->log_fd, "\n", 1) < 0))
		rdps_dbg("launch: writing the log of %s: %s", p->name, strerror(errno));
	if (L->quiet)
		return;
	/* One write per line: lines of different processes do not mix. A line
	 * that already names its process (the trainer's progress lines) keeps
	 * its own prefix. */
	k = snprintf(out, sizeof(out), "[%s] ", p->name);
	if (n >= (size_t)k && !memcmp(line, out, (size_t)k))
		k = 0;
	memcpy(out + k, line, n);
	out[(size_t)k + n] = '\n';
	if (write(STDOUT_FILENO, out, (size_t)k + n + 1) < 0)
		rdps_dbg("launch: stdout: %s", strerror(errno));
}

/* Reads what is there; returns false at EOF. */
static bool drain(struct launch *L, struct proc *p)
{
	for (;;) {
		ssize_t n = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len);
		char *s, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			if (p->len)
				emit(L, p, p->buf, p->len);
			p->len = 0;
			close(p->fd);
			p->fd = -1;
			return false;
		}
		p->len += (size_t)n;
		s = p->buf;
		while ((nl = memchr(s, '\n', p->len - (size_t)(s - p->buf)))) {
			emit(L, p, s, (size_t)(nl - s));
			s = nl + 1;
		}
		p->len -= (size_t)(s - p->buf);
		memmove(p->buf, s, p->len);
		if (p->len == sizeof(p->buf)) { /* a line longer than the buffer */
			emit(L, p, p->buf, p->len);
			p->len = 0;
		}
	}
}

static int start_proc(struct launch *L, struct proc *p, const sigset_t *oldmask, pid_t self)
{
	char **argv = rdps_launch_role_argv(&L->job, &p->role);
	int fds[2];

	if (!argv)
		return -ENOMEM;
	if (pipe2(fds, O_CLOEXEC)) {
		free(argv);
		return -errno;
	}
	fflush(NULL);
	p->pid = fork();
	if (p->pid < 0) {
		int ret = -errno;

		close(fds[0]);
		close(fds[1]);
		free(argv);
		return ret;
	}
	if (p->pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		/* Its own process group: the terminal's Ctrl-C reaches the
		 * launcher only, which then stops everyone in order. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != self)
			_exit(128 + SIGTERM);
		if (null >= 0)
			dup2(null, STDIN_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		execv(argv[0], argv);
		fprintf(stderr, "rdps launch: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(p->pid, p->pid); /* also here: no race with the first signal */
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->fd = fds[0];
	p->running = true;
	fprintf(stderr, "rdps launch: %s (pid %d): ", p->name, (int)p->pid);
	print_argv(stderr, argv);
	free(argv);
	return 0;
}

static void signal_proc(struct proc *p, int sig)
{
	if (!p->running)
		return;
	p->stopped = true;
	if (kill(-p->pid, sig) && errno == ESRCH)
		kill(p->pid, sig);
}

/* Collects the processes of machine (or all, machine < 0) in start order:
 * servers first, so their listeners come up while trainers load data. */
static int collect_roles(struct launch *L, long machine, struct proc **out, int *n)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct proc *ps = calloc(l->world_size, sizeof(*ps));
	int k = 0;

	if (!ps)
		return -ENOMEM;
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
	for (int i = 0; i < k; i++) {
		rdps_launch_role_name(&ps[i].role, ps[i].name, sizeof(ps[i].name));
		ps[i].fd = ps[i].log_fd = -1;
	}
	*out = ps;
	*n = k;
	return 0;
}

static int open_logs(struct launch *L, struct proc *ps, int n)
{
	if (!L->log_dir)
		return 0;
	if (mkdir(L->log_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rdps launch: cannot create --log_dir %s: %s\n", L->log_dir, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s%u.log", L->log_dir,
			 ps[i].role.kind == RDPS_ROLE_SERVER ? "server" : "trainer", ps[i].role.id);
		ps[i].log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (ps[i].log_fd < 0) {
			fprintf(stderr, "rdps launch: cannot write %s: %s\n", path, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* Every server of the processes must be able to listen here. */
static int check_server_ports(struct launch *L, struct proc *ps, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		const struct rdps_endpoint *ep;
		char why[320];
		int ret;

		if (ps[i].role.kind != RDPS_ROLE_SERVER)
			continue;
		ep = &L->ipc.servers[ps[i].role.id];
		ret = rdps_launch_bind_check(ep->host, ep->port, why, sizeof(why));
		if (ret == -EADDRINUSE)
			fprintf(stderr, "rdps launch: server %u cannot listen: %s (servers of another job? "
				"'rdps shutdown --ip_config %s' stops them; or change its base_port)\n",
				ps[i].role.id, why, L->ip_config);
		else if (ret == -EADDRNOTAVAIL)
			fprintf(stderr, "rdps launch: server %u cannot listen here: %s (this backend runs "
				"every process on this host; use --machine M, or --backend mpi/slurm)\n",
				ps[i].role.id, why);
		else if (ret)
			fprintf(stderr, "rdps launch: server %u: %s\n", ps[i].role.id, why);
		bad |= ret != 0;
	}
	return bad ? -EADDRINUSE : 0;
}

static int run_local(struct launch *L, long machine)
{
	enum { RUNNING, DRAINING, STOPPING, KILLING } phase = RUNNING;
	bool keep = rdps_launch_keeps_servers(L->train_args, L->num_train_args);
	sigset_t mask, oldmask;
	struct proc *ps, *failed = NULL;
	struct pollfd *pfd;
	int n, sfd, live = 0, open_fds = 0, interrupted = 0, nkilled = 0, stuck = 0, rc;
	uint64_t deadline = 0;
	pid_t self = getpid();
	char buf[96];

	if (collect_roles(L, machine, &ps, &n))
		return 1;
	if (L->dry_run) {
		for (int i = 0; i < n; i++) {
			char **argv = rdps_launch_role_argv(&L->job, &ps[i].role);

			printf("%s: ", ps[i].name);
			if (argv)
				print_argv(stdout, argv);
			free(argv);
		}
		free(ps);
		return 0;
	}
	if (!n) {
		fprintf(stderr, "rdps launch: machine %ld runs no process\n", machine);
		free(ps);
		return 2;
	}
	if (check_server_ports(L, ps, n) || open_logs(L, ps, n)) {
		for (int i = 0; i < n; i++)
			if (ps[i].log_fd >= 0)
				close(ps[i].log_fd);
		free(ps);
		return 1;
	}
	pfd = calloc((size_t)n + 1, sizeof(*pfd));
	if (!pfd) {
		fprintf(stderr, "rdps launch: out of memory\n");
		free(ps);
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		fprintf(stderr, "rdps launch: signalfd: %s\n", strerror(errno));
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		free(pfd);
		free(ps);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < n; i++) {
		int ret = start_proc(L, &ps[i], &oldmask, self);

		if (ret) {
			fprintf(stderr, "rdps launch: cannot start %s: %s\n", ps[i].name, strerror(-ret));
			failed = &ps[i];
			ps[i].status = -1;
			phase = STOPPING;
			deadline = rdps_now_ns() + (uint64_t)L->grace_ms * 1000000ull;
			break;
		}
		live++;
		open_fds++;
	}
	if (phase == STOPPING)
		for (int i = 0; i < n; i++)
			signal_proc(&ps[i], SIGTERM);

	while (live || open_fds) {
		int k = 0, timeout = -1, trainers_left = 0;
		uint64_t now;

		pfd[k++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (int i = 0; i < n; i++)
			if (ps[i].fd >= 0)
				pfd[k++] = (struct pollfd){ .fd = ps[i].fd, .events = POLLIN };
		if (deadline)
			timeout = rdps_ms_until(deadline);
		if (!live) /* every process reaped: its output is all in the pipe */
			timeout = 0;
		if (poll(pfd, (nfds_t)k, timeout) < 0 && errno != EINTR) {
			fprintf(stderr, "rdps launch: poll: %s\n", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++)
			if (ps[i].fd >= 0 && !drain(L, &ps[i]))
				open_fds--;
		if (!live && open_fds) { /* EOF pending after reaping: bounded */
			for (int i = 0; i < n; i++)
				if (ps[i].fd >= 0) {
					close(ps[i].fd);
					ps[i].fd = -1;
					open_fds--;
				}
		}
		for (;;) {
			struct signalfd_siginfo si;
			ssize_t r = read(sfd, &si, sizeof(si));

			if (r != sizeof(si))
				break;
			if (si.ssi_signo == SIGCHLD)
				continue;
			if (phase == STOPPING || phase == KILLING) {
				/* A second Ctrl-C: no more grace. */
				deadline = rdps_now_ns();
				continue;
			}
			interrupted = (int)si.ssi_signo;
			fprintf(stderr, "rdps launch: got SIG%s; stopping %d process(es)\n",
				sigabbrev_np(interrupted) ? sigabbrev_np(interrupted) : "?", live);
			for (int i = 0; i < n; i++)
				signal_proc(&ps[i], SIGTERM);
			phase = STOPPING;
			deadline = rdps_now_ns() + (uint64_t)L->grace_ms * 1000000ull;
		}
		for (;;) {
			int st;
			pid_t pid = waitpid(-1, &st, WNOHANG);
			struct proc *p = NULL;

			if (pid <= 0)
				break;
			for (int i = 0; i < n; i++)
				if (ps[i].pid == pid)
					p = &ps[i];
			if (!p)
				continue;
			p->running = false;
			p->status = st;
			live--;
			rdps_info("launch: %s (pid %d) %s", p->name, (int)pid, describe_status(st, buf, sizeof(buf)));
			if (st == 0 || p->stopped || failed || interrupted)
				continue;
			/* The first failure stops the job. */
			failed = p;
			fprintf(stderr, "rdps launch: %s (pid %d) %s; stopping the other %d process(es)\n",
				p->name, (int)pid, describe_status(st, buf, sizeof(buf)), live);
			for (int i = 0; i < n; i++)
				signal_proc(&ps[i], SIGTERM);
			phase = STOPPING;
			deadline = rdps_now_ns() + (uint64_t)L->grace_ms * 1000000ull;
		}
		for (int i = 0; i < n; i++)
			trainers_left += ps[i].running && ps[i].role.kind == RDPS_ROLE_TRAINER;
		now = rdps_now_ns();
		if (phase == RUNNING && !trainers_left && live && !keep) {
			/* Trainer 0 shut the servers down; give them --grace. */
			phase = DRAINING;
			deadline = now + (uint64_t)L->grace_ms * 1000000ull;
		} else if (phase == DRAINING && now >= deadline) {
			fprintf(stderr, "rdps launch: %d server(s) still running %g s after the trainers "
				"finished; stopping them\n", live, L->grace_ms / 1000.0);
			for (int i = 0; i < n; i++)
				signal_proc(&ps[i], SIGTERM);
			phase = STOPPING;
			deadline = now + (uint64_t)L->grace_ms * 1000000ull;
		} else if (phase == STOPPING && live && now >= deadline) {
			for (int i = 0; i < n; i++)
				if (ps[i].running) {
					fprintf(stderr, "rdps launch: %s (pid %d) still running after SIGTERM; "
						"sending SIGKILL\n", ps[i].name, (int)ps[i].pid);
					signal_proc(&ps[i], SIGKILL);
					nkilled++;
				}
			phase = KILLING;
			deadline = now + 5000ull * 1000000ull;
		} else if (phase == KILLING && live && now >= deadline) {
			for (int i = 0; i < n; i++)
				if (ps[i].running) {
					fprintf(stderr, "rdps launch: %s (pid %d) did not exit 5 s after SIGKILL "
						"(uninterruptible sleep?); giving up on it\n",
						ps[i].name, (int)ps[i].pid);
					stuck++;
				}
			break;
		}
	}

	rc = 0;
	if (stuck) {
		fprintf(stderr, "rdps launch: FAILED: %d process(es) could not be stopped\n", stuck);
		rc = 1;
	} else if (failed) {
		int others = 0;

		for (int i = 0; i < n; i++)
			others += &ps[i] != failed && ps[i].stopped;
		if (failed->status == -1)
			fprintf(stderr, "rdps launch: FAILED: could not start %s", failed->name);
		else
			fprintf(stderr, "rdps launch: FAILED: %s (pid %d) %s", failed->name, (int)failed->pid,
				describe_status(failed->status, buf, sizeof(buf)));
		fprintf(stderr, "; stopped %d other process(es)", others);
		if (nkilled)
			fprintf(stderr, ", %d of them with SIGKILL", nkilled);
		if (L->log_dir)
			fprintf(stderr, "; logs in %s", L->log_dir);
		fputc('\n', stderr);
		rc = 1;
	} else if (interrupted) {
		fprintf(stderr, "rdps launch: interrupted by SIG%s; stopped %d process(es)\n",
			sigabbrev_np(interrupted) ? sigabbrev_np(interrupted) : "?", n);
		rc = 128 + interrupted;
	} else {
		uint32_t ns = 0, nt = 0;

		for (int i = 0; i < n; i++) {
			ns += ps[i].role.kind == RDPS_ROLE_SERVER;
			nt += ps[i].role.kind == RDPS_ROLE_TRAINER;
		}
		fprintf(stderr, "rdps launch: %u server(s) and %u trainer(s) finished\n", ns, nt);
	}
	for (int i = 0; i < n; i++) {
		if (ps[i].log_fd >= 0)
			close(ps[i].log_fd);
		if (ps[i].fd >= 0)
			close(ps[i].fd);
	}
	close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	free(pfd);
	free(ps);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* role from the environment: become one process of the layout */

static const char *real_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

static int run_role_from_env(struct launch *L)
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
		rdps_info("launch: %s pod %u runs machine %u (%s)", env.source, role.id, role.machine,
			  L->layout.machines[role.machine].host);
		return run_local(L, (long)role.machine);
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
		print_argv(stdout, argv);
		free(argv);
		return 0;
	}
	fflush(NULL);
	execv(argv[0], argv);
	fprintf(stderr, "rdps launch: cannot run %s: %s\n", argv[0], strerror(errno));
	free(argv);
	return 127;
}

/* ---------------------------------------------------------------------- */
/* mpi and slurm: build one command, print it, exec it */

static int exec_or_print(struct launch *L, struct strv *cmd, const char *what)
{
	fprintf(stderr, "rdps launch: ");
	print_argv(stderr, cmd->v);
	if (L->dry_run) {
		print_argv(stdout, cmd->v);
		return 0;
	}
	fflush(NULL);
	execvp(cmd->v[0], cmd->v);
	fprintf(stderr, "rdps launch: cannot run %s: %s (is %s installed? %s)\n", cmd->v[0],
		strerror(errno), what, !strcmp(what, "mpirun") ? "apt-get install openmpi-bin" : "run inside an sbatch allocation");
	return 127;
}

static int run_mpi(struct launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct strv cmd = { 0 }, role = { 0 };
	int ret = 0;

	if (L->mpi_hosts.n && L->mpi_hosts.n != 1 && (uint32_t)L->mpi_hosts.n != l->num_machines) {
		fprintf(stderr, "rdps launch: --mpi_hosts lists %d host(s), the layout has %u machine(s) "
			"(give one per machine, or one for all)\n", L->mpi_hosts.n, l->num_machines);
		return 2;
	}
	if (role_cmd(L, &role))
		return 1;
	ret |= strv_push(&cmd, (char *)L->mpirun);
	for (int i = 0; i < L->mpi_args.n; i++)
		ret |= strv_push(&cmd, L->mpi_args.v[i]);
	if (getenv("RDPS_LOG_LEVEL")) {
		ret |= strv_push(&cmd, "-x");
		ret |= strv_push(&cmd, "RDPS_LOG_LEVEL");
	}
	/* One app context per machine: ranks are numbered in context order,
	 * which is the layout's machine order. */
	for (uint32_t m = 0; m < l->num_machines; m++) {
		const struct rdps_launch_machine *mc = &l->machines[m];
		const char *host = L->mpi_hosts.n ? L->mpi_hosts.v[L->mpi_hosts.n == 1 ? 0 : m] : mc->host;
		uint32_t np = mc->num_servers + mc->num_trainers;
		char *a = owned_printf(&L->owned, "%u", np), *b = owned_printf(&L->owned, "%s:%u", host, np);

		if (!a || !b)
			return 1;
		if (m)
			ret |= strv_push(&cmd, ":");
		ret |= strv_push(&cmd, "-np");
		ret |= strv_push(&cmd, a);
		ret |= strv_push(&cmd, "-H");
		ret |= strv_push(&cmd, b);
		if (L->wrapper)
			ret |= strv_push(&cmd, (char *)L->wrapper);
		for (int i = 0; i < role.n; i++)
			ret |= strv_push(&cmd, role.v[i]);
	}
	ret = ret ? 1 : exec_or_print(L, &cmd, "mpirun");
	free(cmd.v);
	free(role.v);
	return ret;
}

/* Node names of the allocation: --hosts, or scontrol show hostnames. */
static int slurm_hosts(struct launch *L)
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
		char *h = line[0] ? owned_printf(&L->owned, "%s", line) : NULL;

		if (line[0] && (!h || strv_push(&L->hosts, h)))
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
static int slurm_write_ipconfig(struct launch *L)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

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

static int run_slurm(struct launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct strv cmd = { 0 }, role = { 0 };
	char *a[3];
	int ret = 0;

	a[0] = owned_printf(&L->owned, "--nodes=%u", l->num_machines);
	a[1] = owned_printf(&L->owned, "--ntasks=%u", l->world_size);
	a[2] = owned_printf(&L->owned, "--ntasks-per-node=%u",
			    l->machines[0].num_servers + l->machines[0].num_trainers);
	if (!a[0] || !a[1] || !a[2] || role_cmd(L, &role))
		return 1;
	ret |= strv_push(&cmd, "srun");
	ret |= strv_push(&cmd, a[0]);
	ret |= strv_push(&cmd, a[1]);
	ret |= strv_push(&cmd, a[2]);
	ret |= strv_push(&cmd, "--distribution=block");
	ret |= strv_push(&cmd, "--kill-on-bad-exit=1");
	for (int i = 0; i < L->srun_args.n; i++)
		ret |= strv_push(&cmd, L->srun_args.v[i]);
	for (int i = 0; i < role.n; i++)
		ret |= strv_push(&cmd, role.v[i]);
	ret = ret ? 1 : exec_or_print(L, &cmd, "srun");
	free(cmd.v);
	free(role.v);
	return ret;
}

/* ---------------------------------------------------------------------- */

static void print_layout(const struct launch *L)
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

static void launch_free(struct launch *L)
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
	enum { O_BACKEND = 256, O_ROLE, O_LAYOUT, O_DRY, O_QUIET, O_IPC, O_NCP, O_NSRV, O_THOSTS,
	       O_SARG, O_GRACE, O_RDPS, O_MACHINE, O_LOGDIR, O_MPIRUN, O_MPIARG, O_MPIHOSTS,
	       O_WRAPPER, O_BASEPORT, O_HOSTS, O_SUFFIX, O_SRUNARG, O_HELP };
	static const struct option opts[] = {
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "role-from-env", no_argument, NULL, O_ROLE },
		{ "role_from_env", no_argument, NULL, O_ROLE },
		{ "print-layout", no_argument, NULL, O_LAYOUT },
		{ "print_layout", no_argument, NULL, O_LAYOUT },
		{ "dry_run", no_argument, NULL, O_DRY },
		{ "dry-run", no_argument, NULL, O_DRY },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "ip_config", required_argument, NULL, O_IPC },
		{ "num_client_proc", required_argument, NULL, O_NCP },
		{ "num_servers", required_argument, NULL, O_NSRV },
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
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct launch L = { .backend = "local", .P = 1, .num_servers = -1, .machine = -1,
			    .grace_ms = 10000, .mpirun = "mpirun", .base_port = RDPS_DEFAULT_BASE_PORT };
	char err[640];
	double v;
	int opt, rc = 2;
	bool bad = false;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case O_BACKEND: L.backend = optarg; break;
		case O_ROLE: L.role_from_env = true; break;
		case O_LAYOUT: L.print_layout = true; break;
		case O_DRY: L.dry_run = true; break;
		case O_QUIET: L.quiet = true; break;
		case O_IPC: L.ip_config = optarg; break;
		case O_NCP: bad |= parse_num("--num_client_proc", optarg, 1, 4096, &v) != 0; L.P = (uint32_t)v; break;
		case O_NSRV: bad |= parse_num("--num_servers", optarg, 1, RDPS_MAX_SERVERS, &v) != 0; L.num_servers = (long)v; break;
		case O_THOSTS: bad |= strv_push_list(&L.trainer_hosts, optarg) != 0; break;
		case O_SARG: bad |= strv_push(&L.server_args, optarg) != 0; break;
		case O_GRACE: bad |= parse_num("--grace", optarg, 0, 3600, &v) != 0; L.grace_ms = (int)(v * 1000); break;
		case O_RDPS: snprintf(L.exe, sizeof(L.exe), "%s", optarg); break;
		case O_MACHINE: bad |= parse_num("--machine", optarg, 0, 1e6, &v) != 0; L.machine = (long)v; break;
		case O_LOGDIR: L.log_dir = optarg; break;
		case O_MPIRUN: L.mpirun = optarg; break;
		case O_MPIARG: bad |= strv_push(&L.mpi_args, optarg) != 0; break;
		case O_MPIHOSTS: bad |= strv_push_list(&L.mpi_hosts, optarg) != 0; break;
		case O_WRAPPER: L.wrapper = optarg; break;
		case O_BASEPORT: bad |= parse_num("--base_port", optarg, 1, 65535, &v) != 0; L.base_port = (uint16_t)v; break;
		case O_HOSTS: bad |= strv_push_list(&L.hosts, optarg) != 0; break;
		case O_SUFFIX: L.host_suffix = optarg; break;
		case O_SRUNARG: bad |= strv_push(&L.srun_args, optarg) != 0; break;
		case O_HELP: usage(stdout); launch_free(&L); return 0;
		default: usage(stderr); launch_free(&L); return 2;
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
	if (!L.print_layout && !L.num_train_args) {
		fprintf(stderr, "rdps launch: no train arguments: end the launch options with '--' and "
			"give the job's rdps train arguments (--data, --partition, --model_name, ...)\n");
		goto out;
	}
	if (rdps_launch_check_train_args(L.train_args, L.num_train_args, err, sizeof(err))) {
		fprintf(stderr, "rdps launch: %s\n", err);
		goto out;
	}
	if (!L.exe[0]) {
		ssize_t n = readlink("/proc/self/exe", L.exe, sizeof(L.exe) - 1);

		if (n <= 0) {
			fprintf(stderr, "rdps launch: cannot find this binary (/proc/self/exe): give --rdps PATH\n");
			goto out;
		}
		L.exe[n] = '\0';
	}
	if (!strcmp(L.backend, "slurm") && !L.role_from_env) {
		if (L.trainer_hosts.n) {
			fprintf(stderr, "rdps launch: --trainer_hosts does not apply to slurm: every node runs "
				"--num_servers servers and --num_client_proc trainers\n");
			goto out;
		}
		if (L.num_servers < 0)
			L.num_servers = 1;
		rc = 1;
		if (slurm_hosts(&L) || slurm_write_ipconfig(&L))
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
					  .layout = &L.layout };
	if (L.print_layout) {
		print_layout(&L);
		rc = 0;
	} else if (L.role_from_env) {
		rc = run_role_from_env(&L);
	} else if (!strcmp(L.backend, "mpi")) {
		rc = run_mpi(&L);
	} else if (!strcmp(L.backend, "slurm")) {
		rc = run_slurm(&L);
	} else {
		rc = run_local(&L, L.machine);
	}
out:
	launch_free(&L);
	return rc;
}
