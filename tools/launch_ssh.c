// SPDX-License-Identifier: MIT
/*
 * rdps launch --backend ssh: each machine of the layout runs its own
 * processes under 'rdps launch --ssh-remote --machine M' (launch_remote.c),
 * started over OpenSSH (or forked, for a machine that is this host), and
 * this launcher supervises those sessions as the local backend supervises
 * processes: one machine failing or Ctrl-C stops every machine, the exit
 * names what failed there, output lines are prefixed by machine and role.
 *
 * Per machine, before anything starts:
 *   1. a master connection (ssh -M -N, BatchMode: no prompt ever), ready
 *      when its ControlPath socket exists (OpenSSH makes it after
 *      authenticating); a refused key or an unreachable host ends it, and
 *      its words are reported. Every later session reuses it.
 *   2. a check session: --ssh-remote --remote-check (the workspace, the
 *      servers' ports on that machine, its first trainer's
 *      'rdps train --check-only' on its own copy of the data).
 * Then one session per machine for the job. The secret, the variables and
 * the ip_config travel in the session's stdin (the control stream); the
 * stream stays open, and its end stops that machine's processes. Every ssh
 * here dies with this launcher (PR_SET_PDEATHSIG), which ends the
 * connection, which ends the stream: a killed launcher leaves no process
 * holding ports on any machine.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_run.h"
#include "launch_supervisor.h"
#include "rdps/common.h"

/* Checks read the job's data on every machine, maybe from a shared file
 * system: generous. */
#define CHECK_TIMEOUT_MS (600 * 1000)
#define CHECK_OUTPUT_MAX (64 * 1024)
/* Beyond --ssh_connect_timeout: authentication on a loaded machine. */
#define MASTER_EXTRA_MS (60 * 1000)

/* Ctrl-C (or SIGTERM, SIGHUP) while connecting or checking: nothing has
 * started; stop the masters and the checks, and say so. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

struct ssh_machine {
	uint32_t m;
	const char *host;    /* ssh destination */
	const char *addr;    /* the layout's address */
	bool local;          /* this host: forked, no ssh */
	char ctl[PATH_MAX];  /* ControlPath of the master */
	char log[PATH_MAX];  /* the master's stderr */
	pid_t master;
	struct rdps_launch_strv check, run;
	/* the check's run */
	pid_t pid;
	int out_fd, in_fd;
	size_t in_off, out_len;
	char *out;
	int status;
	bool done;
};

/* "exec 'a' 'b' ..." for the remote shell (owned by L). */
static char *remote_command(struct rdps_launch *L, char **argv)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	fputs("exec ", f);
	rdps_launch_print_argv(f, argv);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	if (n && text[n - 1] == '\n')
		text[n - 1] = '\0';
	if (rdps_launch_strv_push(&L->owned, text)) {
		free(text);
		return NULL;
	}
	return text;
}

/* The machine's launcher: EXE launch --ssh-remote [--remote-check] ... */
static int machine_argv(struct rdps_launch *L, uint32_t m, bool check, struct rdps_launch_strv *out)
{
	char *mbuf = rdps_launch_owned_printf(&L->owned, "%u", m);
	int ret = 0;

	if (!mbuf)
		return -ENOMEM;
	ret |= rdps_launch_strv_push(out, L->exe);
	ret |= rdps_launch_strv_push(out, "launch");
	ret |= rdps_launch_strv_push(out, "--ssh-remote");
	if (check)
		ret |= rdps_launch_strv_push(out, "--remote-check");
	ret |= rdps_launch_strv_push(out, "--machine");
	ret |= rdps_launch_strv_push(out, mbuf);
	ret |= rdps_launch_strv_push(out, "--workspace");
	ret |= rdps_launch_strv_push(out, (char *)L->workspace);
	ret |= rdps_launch_push_job_opts(L, out);
	if (L->log_dir) {
		ret |= rdps_launch_strv_push(out, "--log_dir");
		ret |= rdps_launch_strv_push(out, (char *)L->log_dir);
	}
	if (L->no_check)
		ret |= rdps_launch_strv_push(out, "--no_check");
	ret |= rdps_launch_strv_push(out, "--");
	for (int i = 0; i < L->num_train_args; i++)
		ret |= rdps_launch_strv_push(out, L->train_args[i]);
	return ret ? -ENOMEM : 0;
}

/* ssh and the options of every connection to sm. */
static int ssh_opts(struct rdps_launch *L, const struct ssh_machine *sm, struct rdps_launch_strv *out)
{
	char *timeout = rdps_launch_owned_printf(&L->owned, "ConnectTimeout=%d", L->ssh_connect_timeout);
	char *port = L->ssh_port ? rdps_launch_owned_printf(&L->owned, "%ld", L->ssh_port) : NULL;
	int ret = 0;

	if (!timeout || (L->ssh_port && !port))
		return -ENOMEM;
	ret |= rdps_launch_strv_push(out, "ssh");
	/* Never a prompt: a key that does not work is an error. */
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "BatchMode=yes");
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, timeout);
	/* A dead peer ends the connection (and so the job) within ~30 s. */
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "ServerAliveInterval=10");
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "ServerAliveCountMax=3");
	/* Fresh instances: accept a host key never seen, refuse a changed one. */
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "StrictHostKeyChecking=accept-new");
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "LogLevel=ERROR");
	if (L->ssh_key) {
		ret |= rdps_launch_strv_push(out, "-i");
		ret |= rdps_launch_strv_push(out, (char *)L->ssh_key);
		ret |= rdps_launch_strv_push(out, "-o");
		ret |= rdps_launch_strv_push(out, "IdentitiesOnly=yes");
	}
	if (port) {
		ret |= rdps_launch_strv_push(out, "-p");
		ret |= rdps_launch_strv_push(out, port);
	}
	if (L->ssh_user) {
		ret |= rdps_launch_strv_push(out, "-l");
		ret |= rdps_launch_strv_push(out, (char *)L->ssh_user);
	}
	for (int i = 0; i < L->ssh_args.n; i++)
		ret |= rdps_launch_strv_push(out, L->ssh_args.v[i]);
	ret |= rdps_launch_strv_push(out, "-S");
	ret |= rdps_launch_strv_push(out, (char *)sm->ctl);
	return ret ? -ENOMEM : 0;
}

/* A session through the master: ssh ... -T HOST 'exec launcher'. */
static int session_argv(struct rdps_launch *L, const struct ssh_machine *sm, bool check,
			struct rdps_launch_strv *out)
{
	struct rdps_launch_strv inner = { 0 };
	char *cmd;
	int ret = machine_argv(L, sm->m, check, &inner);

	if (ret)
		goto out;
	if (sm->local) {
		/* This host: the machine's launcher itself, no shell. */
		for (int i = 0; i < inner.n && !ret; i++)
			ret = rdps_launch_strv_push(out, inner.v[i]);
		goto out;
	}
	cmd = remote_command(L, inner.v);
	ret = !cmd || ssh_opts(L, sm, out);
	ret |= rdps_launch_strv_push(out, "-T");
	ret |= rdps_launch_strv_push(out, "-o");
	ret |= rdps_launch_strv_push(out, "ControlMaster=no");
	ret |= rdps_launch_strv_push(out, (char *)sm->host);
	ret |= rdps_launch_strv_push(out, cmd);
out:
	free(inner.v);
	return ret ? -ENOMEM : 0;
}

static void child_setup(pid_t parent)
{
	/* Its own process group (the terminal's Ctrl-C reaches the launcher,
	 * which stops the job in order), and it dies with the launcher. */
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(128 + SIGTERM);
	signal(SIGPIPE, SIG_DFL);
}

/* ---- 1. master connections ---- */

static int start_master(struct rdps_launch *L, struct ssh_machine *sm)
{
	struct rdps_launch_strv argv = { 0 };
	pid_t parent = getpid();
	int fd, ret = ssh_opts(L, sm, &argv);

	ret |= rdps_launch_strv_push(&argv, "-M");
	ret |= rdps_launch_strv_push(&argv, "-N");
	ret |= rdps_launch_strv_push(&argv, "-o");
	ret |= rdps_launch_strv_push(&argv, "ControlMaster=yes");
	ret |= rdps_launch_strv_push(&argv, "-o");
	ret |= rdps_launch_strv_push(&argv, "ControlPersist=no");
	ret |= rdps_launch_strv_push(&argv, (char *)sm->host);
	if (ret) {
		free(argv.v);
		return -ENOMEM;
	}
	fd = open(sm->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		free(argv.v);
		return ret;
	}
	rdps_info("launch: machine %u (%s): connecting: %s", sm->m, sm->addr, sm->host);
	fflush(NULL);
	sm->master = fork();
	if (sm->master == 0) {
		int null = open("/dev/null", O_RDONLY);

		child_setup(parent);
		dup2(null, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execvp(argv.v[0], argv.v);
		fprintf(stderr, "cannot run ssh: %s (apt-get install openssh-client)\n", strerror(errno));
		_exit(127);
	}
	ret = sm->master < 0 ? -errno : 0;
	close(fd);
	free(argv.v);
	return ret;
}

/* What a failed connection's ssh said, and what to do about it. */
static void connect_failed(const struct rdps_launch *L, const struct ssh_machine *sm, const char *what)
{
	size_t len = 0;
	char *said = rdps_launch_read_file(sm->log, 4096, &len);
	const char *hint = "";

	while (said && len && (said[len - 1] == '\n' || said[len - 1] == '\r'))
		said[--len] = '\0';
	for (char *p = said; p && *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	if (said && strstr(said, "UNPROTECTED PRIVATE KEY"))
		hint = " (ssh ignores a private key others can read: chmod 600 the --ssh_key file)";
	else if (said && strstr(said, "Permission denied"))
		hint = L->ssh_key ? " (the machine refused the key: is the public half of --ssh_key in "
				    "~/.ssh/authorized_keys of the login user there? --ssh_username)"
				  : " (the machine refused every key ssh offered: give --ssh_key)";
	else if (said && strstr(said, "Connection refused"))
		hint = " (no ssh server listens there: is sshd running? --ssh_port)";
	else if (said && (strstr(said, "timed out") || strstr(said, "No route") ||
			  strstr(said, "unreachable")))
		hint = " (the machine does not answer: address, firewall, security group?)";
	else if (said && (strstr(said, "Host key verification failed") ||
			  strstr(said, "IDENTIFICATION HAS CHANGED")))
		hint = " (its host key is not the one known_hosts has: ssh-keygen -R HOST if the "
		       "machine was replaced)";
	else if (said && strstr(said, "Could not resolve"))
		hint = " (the name does not resolve)";
	fprintf(stderr, "rdps launch: machine %u (%s): cannot connect over ssh to %s%s%s: %s%s%s%s\n",
		sm->m, sm->addr, sm->host, L->ssh_key ? " with key " : "",
		L->ssh_key ? L->ssh_key : "", what, said && *said ? ": " : "",
		said && *said ? said : "", hint);
	free(said);
}

static void stop_master(struct ssh_machine *sm)
{
	int st;

	if (sm->master <= 0)
		return;
	kill(sm->master, SIGTERM);
	for (int i = 0; i < 100 && waitpid(sm->master, &st, WNOHANG) == 0; i++)
		usleep(20000);
	if (waitpid(sm->master, &st, WNOHANG) == 0) {
		kill(sm->master, SIGKILL);
		waitpid(sm->master, &st, 0);
	}
	sm->master = 0;
}

/* Starts every master, waits until each is up or has failed. 0 if all
 * are up. */
static int connect_all(struct rdps_launch *L, struct ssh_machine *sms, uint32_t n)
{
	uint64_t deadline = rdps_now_ns() +
			    ((uint64_t)L->ssh_connect_timeout * 1000 + MASTER_EXTRA_MS) * 1000000ull;
	uint32_t pending = 0, bad = 0;
	bool *up = calloc(n, sizeof(*up));

	if (!up)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		int ret;

		if (sms[i].local) {
			up[i] = true;
			continue;
		}
		ret = start_master(L, &sms[i]);
		if (ret) {
			fprintf(stderr, "rdps launch: machine %u: cannot start ssh: %s\n", sms[i].m,
				strerror(-ret));
			bad++;
			up[i] = true; /* nothing to wait for */
			continue;
		}
		pending++;
	}
	while (pending && !interrupted) {
		for (uint32_t i = 0; i < n; i++) {
			struct stat st;
			int ws;

			if (up[i])
				continue;
			if (waitpid(sms[i].master, &ws, WNOHANG) == sms[i].master) {
				char what[64];

				sms[i].master = 0;
				snprintf(what, sizeof(what), "ssh exited with status %d",
					 WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
				connect_failed(L, &sms[i], what);
				up[i] = true;
				bad++;
				pending--;
			} else if (!stat(sms[i].ctl, &st) && S_ISSOCK(st.st_mode)) {
				rdps_info("launch: machine %u (%s): ssh connection to %s is up", sms[i].m,
					  sms[i].addr, sms[i].host);
				up[i] = true;
				pending--;
			}
		}
		if (pending && rdps_ms_until(deadline) <= 0) {
			for (uint32_t i = 0; i < n; i++)
				if (!up[i]) {
					char what[96];

					stop_master(&sms[i]);
					snprintf(what, sizeof(what), "no connection within %d s",
						 L->ssh_connect_timeout + MASTER_EXTRA_MS / 1000);
					connect_failed(L, &sms[i], what);
					bad++;
				}
			break;
		}
		if (pending)
			usleep(20000);
	}
	free(up);
	return bad ? -EHOSTUNREACH : 0;
}

/* ---- 2. checks, every machine at once ---- */

static int spawn_check(struct ssh_machine *sm)
{
	int out[2], in[2];
	pid_t parent = getpid();

	if (pipe2(out, O_CLOEXEC))
		return -errno;
	if (pipe2(in, O_CLOEXEC)) {
		close(out[0]);
		close(out[1]);
		return -errno;
	}
	fflush(NULL);
	sm->pid = fork();
	if (sm->pid == 0) {
		child_setup(parent);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(out[1], STDERR_FILENO);
		execvp(sm->check.v[0], sm->check.v);
		fprintf(stderr, "cannot run %s: %s\n", sm->check.v[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	if (sm->pid < 0) {
		close(out[0]);
		close(in[1]);
		return -errno;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	sm->out_fd = out[0];
	sm->in_fd = in[1];
	sm->out = malloc(CHECK_OUTPUT_MAX + 1);
	return sm->out ? 0 : -ENOMEM;
}

/* Runs every machine's check; prints what failed. rdps launch's exit code. */
static int check_all(struct rdps_launch *L, struct ssh_machine *sms, uint32_t n, const char *control,
		     size_t control_len)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)CHECK_TIMEOUT_MS * 1000000ull;
	struct pollfd *pfd = calloc(2 * (size_t)n, sizeof(*pfd));
	uint32_t left = 0;
	int rc = 0;

	if (!pfd)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	for (uint32_t i = 0; i < n; i++) {
		int ret;

		sms[i].out_fd = sms[i].in_fd = -1;
		ret = spawn_check(&sms[i]);
		if (ret) {
			fprintf(stderr, "rdps launch: machine %u: cannot run its check: %s\n", sms[i].m,
				strerror(-ret));
			sms[i].done = true;
			sms[i].status = -1;
			continue;
		}
		left++;
	}
	while (left && !interrupted) {
		int k = 0, ms = rdps_ms_until(deadline);

		for (uint32_t i = 0; i < n; i++) {
			if (sms[i].out_fd >= 0)
				pfd[k++] = (struct pollfd){ .fd = sms[i].out_fd, .events = POLLIN };
			if (sms[i].in_fd >= 0)
				pfd[k++] = (struct pollfd){ .fd = sms[i].in_fd, .events = POLLOUT };
		}
		if (ms <= 0)
			break;
		if (k && poll(pfd, (nfds_t)k, ms < 100 ? ms : 100) < 0 && errno != EINTR)
			break;
		if (!k)
			usleep(20000);
		for (uint32_t i = 0; i < n; i++) {
			struct ssh_machine *sm = &sms[i];

			while (sm->in_fd >= 0) {
				ssize_t w = write(sm->in_fd, control + sm->in_off, control_len - sm->in_off);

				if (w > 0)
					sm->in_off += (size_t)w;
				if ((w < 0 && errno != EINTR && errno != EAGAIN) || sm->in_off == control_len) {
					close(sm->in_fd); /* the check needs no more */
					sm->in_fd = -1;
				}
				if (w <= 0)
					break;
			}
			while (sm->out_fd >= 0) {
				char sink[4096];
				bool room = sm->out_len < CHECK_OUTPUT_MAX;
				ssize_t r = read(sm->out_fd, room ? sm->out + sm->out_len : sink,
						 room ? CHECK_OUTPUT_MAX - sm->out_len : sizeof(sink));

				if (r > 0 && room)
					sm->out_len += (size_t)r;
				if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
					close(sm->out_fd);
					sm->out_fd = -1;
				}
				if (r <= 0)
					break;
			}
			if (!sm->done && sm->out_fd < 0 && waitpid(sm->pid, &sm->status, WNOHANG) == sm->pid) {
				sm->done = true;
				left--;
			}
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ssh_machine *sm = &sms[i];
		int code;

		if (!sm->done && sm->pid > 0) {
			kill(sm->pid, SIGKILL);
			waitpid(sm->pid, &sm->status, 0);
			if (!interrupted)
				fprintf(stderr, "rdps launch: machine %u (%s): its check did not finish within "
					"%d s (stopped it)\n", sm->m, sm->addr, CHECK_TIMEOUT_MS / 1000);
			rc = rc ? rc : 1;
		}
		if (sm->out_fd >= 0)
			close(sm->out_fd);
		if (sm->in_fd >= 0)
			close(sm->in_fd);
		if (sm->out)
			sm->out[sm->out_len] = '\0';
		code = sm->status == -1 ? 1 : WIFEXITED(sm->status) ? WEXITSTATUS(sm->status) : 128;
		if (sm->done && code == 0) {
			/* Its last line: "rdps launch: machine M is ready on ..." */
			char *last = sm->out ? strstr(sm->out, "rdps launch: machine ") : NULL;

			if (last)
				fprintf(stderr, "[%s] %.*s\n", sm->addr, (int)strcspn(last, "\n"), last);
			continue;
		}
		if (!sm->done)
			continue;
		/* What it said, each line prefixed by the machine. */
		for (char *line = sm->out; line && *line;) {
			size_t l = strcspn(line, "\n");

			fprintf(stderr, "[%s] %.*s\n", sm->addr, (int)l, line);
			line += l + (line[l] == '\n');
		}
		if (code == 127)
			fprintf(stderr, "rdps launch: machine %u (%s): %s is not there (exit 127): install "
				"rdps at the same path on every machine, or give --rdps PATH\n", sm->m,
				sm->addr, L->exe);
		else if (code == 255)
			fprintf(stderr, "rdps launch: machine %u (%s): the ssh session failed (exit 255)\n",
				sm->m, sm->addr);
		else
			fprintf(stderr, "rdps launch: machine %u (%s): the check failed (exit %d)\n", sm->m,
				sm->addr, code);
		/* 2: the job's arguments or data; anything else: the machine. */
		rc = code == 2 && rc != 1 ? 2 : 1;
	}
	free(pfd);
	return rc;
}

/* ---- 3. the job ---- */

static int run_job(struct rdps_launch *L, struct ssh_machine *sms, uint32_t n, const char *control,
		   size_t control_len)
{
	const struct rdps_launch_sup_opts o = {
		/* A machine's own launcher needs --grace to stop its processes
		 * (then SIGKILL); the session gets that and a margin. */
		.grace_ms = L->grace_ms + 10000, .quiet = L->quiet,
		.keep_servers = rdps_launch_keeps_servers(L->train_args, L->num_train_args),
		.on_line = L->on_line, .line_ctx = L->line_ctx,
	};
	struct rdps_launch_proc *ps = calloc(n, sizeof(*ps));
	int rc;

	if (!ps)
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		const struct rdps_launch_machine *mc = &L->layout.machines[sms[i].m];

		ps[i].role = (struct rdps_launch_role){ .kind = RDPS_ROLE_MACHINE, .id = sms[i].m,
							.machine = sms[i].m, .rank = mc->first_rank };
		ps[i].argv = sms[i].run.v;
		ps[i].label = sms[i].addr;
		ps[i].runs_trainers = mc->num_trainers > 0;
		ps[i].control = control;
		ps[i].control_len = control_len;
	}
	rc = rdps_launch_supervise(ps, (int)n, &o);
	free(ps);
	return rc;
}

/* ---- the backend ---- */

/* The control directories of launchers that were killed (SIGKILL leaves
 * no chance to clean up): /tmp/rdps-ssh-PID-* of a PID that is gone. */
static void remove_stale_dirs(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[PATH_MAX], *end;
		long pid = strncmp(e->d_name, "rdps-ssh-", 9) ? 0 : strtol(e->d_name + 9, &end, 10);
		struct stat st;
		DIR *sub;

		if (pid <= 0 || *end != '-' || !(kill((pid_t)pid, 0) && errno == ESRCH))
			continue; /* not one, or its launcher is still there */
		snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		sub = opendir(path);
		for (struct dirent *f; sub && (f = readdir(sub));) {
			char file[PATH_MAX + 300];

			if (f->d_name[0] == 'm') { /* m0, m0.log, ... */
				snprintf(file, sizeof(file), "%s/%s", path, f->d_name);
				unlink(file);
			}
		}
		if (sub)
			closedir(sub);
		if (!rmdir(path))
			rdps_info("launch: removed %s, left by launcher %ld (gone)", path, pid);
	}
	if (d)
		closedir(d);
}

static bool is_this_host(const char *addr)
{
	char why[320];

	/* An address this host can bind is one of its own. */
	return rdps_launch_bind_check(addr, 0, why, sizeof(why)) == 0;
}

int rdps_launch_run_ssh(struct rdps_launch *L)
{
	const struct rdps_launch_layout *l = &L->layout;
	struct ssh_machine *sms = NULL;
	char dir[64], *control = NULL, cwd[PATH_MAX];
	size_t control_len = 0;
	uint32_t n = l->num_machines;
	bool any_remote = false, have_dir = false, handlers = false;
	struct sigaction old_int, old_term, old_hup;
	int rc = 2;

	if (L->ssh_hosts.n && L->ssh_hosts.n != 1 && (uint32_t)L->ssh_hosts.n != n) {
		fprintf(stderr, "rdps launch: --ssh_hosts lists %d host(s), the layout has %u machine(s) "
			"(give one per machine, or one for all)\n", L->ssh_hosts.n, n);
		return 2;
	}
	if (L->ssh_key && access(L->ssh_key, R_OK)) {
		fprintf(stderr, "rdps launch: --ssh_key %s: %s\n", L->ssh_key, strerror(errno));
		return 2;
	}
	if (!L->workspace) {
		/* Default: this directory, at the same path on every machine. */
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "rdps launch: getcwd: %s (give --workspace)\n", strerror(errno));
			return 2;
		}
		L->workspace = rdps_launch_owned_printf(&L->owned, "%s", cwd);
		if (!L->workspace)
			return 1;
	}
	rc = 1;
	control = rdps_launch_control_build(L, &control_len);
	sms = calloc(n, sizeof(*sms));
	if (!control || !sms) {
		fprintf(stderr, "rdps launch: cannot build the control stream (%s): %s\n", L->ipc_path,
			strerror(errno));
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ssh_machine *sm = &sms[i];

		sm->m = i;
		sm->addr = l->machines[i].host;
		sm->host = L->ssh_hosts.n ? L->ssh_hosts.v[L->ssh_hosts.n == 1 ? 0 : i] : sm->addr;
		sm->local = !L->ssh_hosts.n && is_this_host(sm->addr);
		any_remote |= !sm->local;
	}
	/* Short (a ControlPath must fit a socket address); the PID says whose. */
	snprintf(dir, sizeof(dir), "/tmp/rdps-ssh-%d-XXXXXX", (int)getpid());
	if (any_remote && !L->dry_run) {
		remove_stale_dirs();
		if (!mkdtemp(dir)) {
			fprintf(stderr, "rdps launch: mkdtemp %s: %s\n", dir, strerror(errno));
			goto out;
		}
		have_dir = true;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ssh_machine *sm = &sms[i];

		snprintf(sm->ctl, sizeof(sm->ctl), "%s/m%u", dir, i);
		snprintf(sm->log, sizeof(sm->log), "%s/m%u.log", dir, i);
		if (session_argv(L, sm, true, &sm->check) || session_argv(L, sm, false, &sm->run)) {
			fprintf(stderr, "rdps launch: out of memory\n");
			goto out;
		}
	}
	if (L->dry_run) {
		for (uint32_t i = 0; i < n; i++) {
			printf("machine %u (%s%s): ", i, sms[i].addr, sms[i].local ? ", this host" : "");
			rdps_launch_print_argv(stdout, sms[i].run.v);
		}
		rc = 0;
		goto out;
	}
	{
		struct sigaction sa = { .sa_handler = on_signal };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, &old_int);
		sigaction(SIGTERM, &sa, &old_term);
		sigaction(SIGHUP, &sa, &old_hup);
		handlers = true;
	}
	if (connect_all(L, sms, n) || interrupted) {
		fprintf(stderr, "rdps launch: %snothing was started\n", interrupted ? "interrupted; " : "");
		rc = interrupted ? 128 + interrupted : 1;
		goto out;
	}
	rc = check_all(L, sms, n, control, control_len);
	if (rc || interrupted) {
		fprintf(stderr, "rdps launch: %snothing was started\n", interrupted ? "interrupted; " : "");
		rc = interrupted ? 128 + interrupted : rc;
		goto out;
	}
	/* The supervisor takes the signals from here (signalfd). */
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	handlers = false;
	rc = run_job(L, sms, n, control, control_len);
out:
	for (uint32_t i = 0; sms && i < n; i++) {
		stop_master(&sms[i]);
		if (have_dir) {
			unlink(sms[i].ctl);
			unlink(sms[i].log);
		}
		free(sms[i].check.v);
		free(sms[i].run.v);
		free(sms[i].out);
	}
	if (have_dir)
		rmdir(dir);
	if (handlers) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGHUP, &old_hup, NULL);
	}
	free(sms);
	free(control);
	return rc;
}
