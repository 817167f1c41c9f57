// SPDX-License-Identifier: MIT
/* rdps launch: fork the processes of one machine and supervise them (see
 * launch_supervisor.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_run.h"
#include "launch_supervisor.h"
#include "rdps/common.h"

struct proc {
	struct rdps_launch_role role;
	char **argv;      /* borrowed from the caller */
	char name[32];
	pid_t pid;
	int fd;           /* read end of its stdout+stderr, -1 at EOF */
	int log_fd;       /* log file or -1 */
	bool running;
	bool stopped;     /* we signalled it */
	int status;
	size_t len;       /* bytes of a partial line in buf */
	char buf[4096];
};

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

static void emit(const struct rdps_launch_sup_opts *o, struct proc *p, const char *line, size_t n)
{
	char out[sizeof(p->buf) + 48];
	int k;

	if (p->log_fd >= 0 &&
	    (write(p->log_fd, line, n) < 0 || write(p->log_fd, "\n", 1) < 0))
		rdps_dbg("launch: writing the log of %s: %s", p->name, strerror(errno));
	if (o->quiet)
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
static bool drain(const struct rdps_launch_sup_opts *o, struct proc *p)
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
				emit(o, p, p->buf, p->len);
			p->len = 0;
			close(p->fd);
			p->fd = -1;
			return false;
		}
		p->len += (size_t)n;
		s = p->buf;
		while ((nl = memchr(s, '\n', p->len - (size_t)(s - p->buf)))) {
			emit(o, p, s, (size_t)(nl - s));
			s = nl + 1;
		}
		p->len -= (size_t)(s - p->buf);
		memmove(p->buf, s, p->len);
		if (p->len == sizeof(p->buf)) { /* a line longer than the buffer */
			emit(o, p, p->buf, p->len);
			p->len = 0;
		}
	}
}

static int start_proc(struct proc *p, const sigset_t *oldmask, pid_t self)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	fflush(NULL);
	p->pid = fork();
	if (p->pid < 0) {
		int ret = -errno;

		close(fds[0]);
		close(fds[1]);
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
		execv(p->argv[0], p->argv);
		fprintf(stderr, "rdps launch: cannot run %s: %s\n", p->argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(p->pid, p->pid); /* also here: no race with the first signal */
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->fd = fds[0];
	p->running = true;
	fprintf(stderr, "rdps launch: %s (pid %d): ", p->name, (int)p->pid);
	rdps_launch_print_argv(stderr, p->argv);
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

static int open_logs(const struct rdps_launch_proc *procs, struct proc *ps, int n)
{
	for (int i = 0; i < n; i++) {
		if (!procs[i].log_path)
			continue;
		ps[i].log_fd = open(procs[i].log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (ps[i].log_fd < 0) {
			fprintf(stderr, "rdps launch: cannot write %s: %s\n", procs[i].log_path,
				strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static void close_fds(struct proc *ps, int n)
{
	for (int i = 0; i < n; i++) {
		if (ps[i].log_fd >= 0)
			close(ps[i].log_fd);
		if (ps[i].fd >= 0)
			close(ps[i].fd);
	}
}

int rdps_launch_supervise(const struct rdps_launch_proc *procs, int n,
			  const struct rdps_launch_sup_opts *o)
{
	enum { RUNNING, DRAINING, STOPPING, KILLING } phase = RUNNING;
	sigset_t mask, oldmask;
	struct proc *ps, *failed = NULL;
	struct pollfd *pfd;
	int sfd, live = 0, open_fds = 0, interrupted = 0, nkilled = 0, stuck = 0, rc;
	uint64_t deadline = 0;
	pid_t self = getpid();
	char buf[96];

	ps = calloc((size_t)n, sizeof(*ps));
	pfd = calloc((size_t)n + 1, sizeof(*pfd));
	if (!ps || !pfd) {
		fprintf(stderr, "rdps launch: out of memory\n");
		free(ps);
		free(pfd);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		ps[i].role = procs[i].role;
		ps[i].argv = procs[i].argv;
		rdps_launch_role_name(&ps[i].role, ps[i].name, sizeof(ps[i].name));
		ps[i].fd = ps[i].log_fd = -1;
	}
	if (open_logs(procs, ps, n)) {
		close_fds(ps, n);
		free(pfd);
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
		close_fds(ps, n);
		free(pfd);
		free(ps);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < n; i++) {
		int ret = start_proc(&ps[i], &oldmask, self);

		if (ret) {
			fprintf(stderr, "rdps launch: cannot start %s: %s\n", ps[i].name, strerror(-ret));
			failed = &ps[i];
			ps[i].status = -1;
			phase = STOPPING;
			deadline = rdps_now_ns() + (uint64_t)o->grace_ms * 1000000ull;
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
			if (ps[i].fd >= 0 && !drain(o, &ps[i]))
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
			deadline = rdps_now_ns() + (uint64_t)o->grace_ms * 1000000ull;
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
			deadline = rdps_now_ns() + (uint64_t)o->grace_ms * 1000000ull;
		}
		for (int i = 0; i < n; i++)
			trainers_left += ps[i].running && ps[i].role.kind == RDPS_ROLE_TRAINER;
		now = rdps_now_ns();
		if (phase == RUNNING && !trainers_left && live && !o->keep_servers) {
			/* Trainer 0 shut the servers down; give them grace. */
			phase = DRAINING;
			deadline = now + (uint64_t)o->grace_ms * 1000000ull;
		} else if (phase == DRAINING && now >= deadline) {
			fprintf(stderr, "rdps launch: %d server(s) still running %g s after the trainers "
				"finished; stopping them\n", live, o->grace_ms / 1000.0);
			for (int i = 0; i < n; i++)
				signal_proc(&ps[i], SIGTERM);
			phase = STOPPING;
			deadline = now + (uint64_t)o->grace_ms * 1000000ull;
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
		if (o->log_dir)
			fprintf(stderr, "; logs in %s", o->log_dir);
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
	close_fds(ps, n);
	close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	free(pfd);
	free(ps);
	return rc;
}
