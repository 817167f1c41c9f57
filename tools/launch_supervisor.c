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
	char name[96];    /* "server 0", "machine 1 (10.0.0.2)" */
	const char *label; /* the prefix of a machine's lines, or NULL */
	bool trains;      /* a trainer, or a machine with trainers */
	pid_t pid;
	int fd;           /* read end of its stdout+stderr, -1 at EOF */
	int log_fd;       /* log file or -1 */
	/* Control stream (rdps_launch_proc.control): the write end of its
	 * stdin, -1 once closed; what is left to write. */
	int ctl_fd;
	const char *ctl;
	size_t ctl_len, ctl_off;
	bool controlled;  /* stopping it starts by closing ctl_fd */
	bool termed;      /* got SIGTERM after its stop request */
	bool running;
	bool stopped;     /* we signalled it */
	int status;
	size_t len;       /* bytes of a partial line in buf */
	char buf[4096];
	char last_line[256];   /* its last non-empty line */
	char failed_line[320]; /* what its own launcher said failed */
};

#define FAILED_TAG "rdps launch: FAILED: "

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

/* Remembers what a failure line will quote: the last line, and what a
 * machine's own launcher said failed. */
static void note_line(struct proc *p, const char *line, size_t n)
{
	size_t tag = strlen(FAILED_TAG);

	if (!n)
		return;
	snprintf(p->last_line, sizeof(p->last_line), "%.*s", (int)n, line);
	if (n > tag && !memcmp(line, FAILED_TAG, tag)) {
		/* "trainer 1 (pid 42) exited with status 1; stopped 2 other ...":
		 * the part before the first "; " */
		const char *end = memmem(line + tag, n - tag, "; ", 2);

		snprintf(p->failed_line, sizeof(p->failed_line), "%.*s",
			 (int)(end ? (size_t)(end - line) - tag : n - tag), line + tag);
	}
}

/* The prefix of a line: "[server 0] ", or for a machine "[LABEL] ", which
 * merges with the process its line names: "[LABEL server 0] ". Returns
 * how many bytes of line the prefix replaces. */
static size_t prefix(const struct proc *p, const char *line, size_t n, char *out, size_t len,
		     int *k)
{
	const char *close;

	if (!p->label) {
		*k = snprintf(out, len, "[%s] ", p->name);
		/* A line that already names its process (the trainer's progress
		 * lines) keeps its own prefix. */
		if (n >= (size_t)*k && !memcmp(line, out, (size_t)*k))
			*k = 0;
		return 0;
	}
	close = n > 1 && line[0] == '[' ? memchr(line, ']', n < 40 ? n : 40) : NULL;
	if (close && close + 1 < line + n && close[1] == ' ') {
		*k = snprintf(out, len, "[%s ", p->label);
		return 1; /* "[server 0] x" -> "[LABEL server 0] x" */
	}
	*k = snprintf(out, len, "[%s] ", p->label);
	return 0;
}

static void emit(const struct rdps_launch_sup_opts *o, struct proc *p, const char *line, size_t n)
{
	char out[sizeof(p->buf) + 160];
	size_t skip;
	int k;

	note_line(p, line, n);
	if (o->on_line)
		o->on_line(o->line_ctx, &p->role, line, n);
	if (p->log_fd >= 0 &&
	    (write(p->log_fd, line, n) < 0 || write(p->log_fd, "\n", 1) < 0))
		rdps_dbg("launch: writing the log of %s: %s", p->name, strerror(errno));
	if (o->quiet)
		return;
	/* One write per line: lines of different processes do not mix. */
	skip = prefix(p, line, n, out, sizeof(out) - sizeof(p->buf) - 1, &k);
	memcpy(out + k, line + skip, n - skip);
	out[(size_t)k + n - skip] = '\n';
	if (write(STDOUT_FILENO, out, (size_t)k + n - skip + 1) < 0)
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
	int fds[2], in[2] = { -1, -1 };

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	if (p->controlled && pipe2(in, O_CLOEXEC)) {
		int ret = -errno;

		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	fflush(NULL);
	p->pid = fork();
	if (p->pid < 0) {
		int ret = -errno;

		close(fds[0]);
		close(fds[1]);
		if (in[0] >= 0) {
			close(in[0]);
			close(in[1]);
		}
		return ret;
	}
	if (p->pid == 0) {
		int null = in[0] >= 0 ? in[0] : open("/dev/null", O_RDONLY);

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
		execvp(p->argv[0], p->argv); /* "ssh": found in PATH */
		fprintf(stderr, "rdps launch: cannot run %s: %s\n", p->argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(p->pid, p->pid); /* also here: no race with the first signal */
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->fd = fds[0];
	if (in[0] >= 0) {
		close(in[0]);
		fcntl(in[1], F_SETFL, O_NONBLOCK);
		p->ctl_fd = in[1];
	}
	p->running = true;
	fprintf(stderr, "rdps launch: %s (pid %d): ", p->name, (int)p->pid);
	rdps_launch_print_argv(stderr, p->argv);
	return 0;
}

static void close_ctl(struct proc *p)
{
	if (p->ctl_fd >= 0) {
		close(p->ctl_fd);
		p->ctl_fd = -1;
	}
}

static void signal_proc(struct proc *p, int sig)
{
	if (!p->running)
		return;
	p->stopped = true;
	/* A controlled process is asked first: its stdin closes. */
	if (sig == SIGTERM && p->controlled && !p->termed) {
		close_ctl(p);
		return;
	}
	if (kill(-p->pid, sig) && errno == ESRCH)
		kill(p->pid, sig);
}

/* Writes what is left of a control stream; keeps it open after. */
static void feed(struct proc *p)
{
	while (p->ctl_fd >= 0 && p->ctl_off < p->ctl_len) {
		ssize_t w = write(p->ctl_fd, p->ctl + p->ctl_off, p->ctl_len - p->ctl_off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) { /* EPIPE: it is gone; its exit says why */
			close_ctl(p);
			return;
		}
		p->ctl_off += (size_t)w;
	}
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
		close_ctl(&ps[i]);
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
	bool had_trainers = false, watch_stdin = o->stop_at_stdin_eof, second_kill = false;
	uint64_t deadline = 0;
	pid_t self = getpid();
	char buf[96];

	ps = calloc((size_t)n, sizeof(*ps));
	pfd = calloc(2 * (size_t)n + 2, sizeof(*pfd));
	if (!ps || !pfd) {
		fprintf(stderr, "rdps launch: out of memory\n");
		free(ps);
		free(pfd);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char role[32];

		ps[i].role = procs[i].role;
		ps[i].argv = procs[i].argv;
		ps[i].label = procs[i].label;
		rdps_launch_role_name(&ps[i].role, role, sizeof(role));
		if (ps[i].label)
			snprintf(ps[i].name, sizeof(ps[i].name), "%s (%s)", role, ps[i].label);
		else
			snprintf(ps[i].name, sizeof(ps[i].name), "%s", role);
		ps[i].trains = ps[i].role.kind == RDPS_ROLE_TRAINER || procs[i].runs_trainers;
		had_trainers |= ps[i].trains;
		ps[i].fd = ps[i].log_fd = ps[i].ctl_fd = -1;
		ps[i].controlled = procs[i].control != NULL;
		ps[i].ctl = procs[i].control;
		ps[i].ctl_len = procs[i].control_len;
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
		for (int i = 0; i < n; i++) {
			if (ps[i].fd >= 0)
				pfd[k++] = (struct pollfd){ .fd = ps[i].fd, .events = POLLIN };
			if (ps[i].ctl_fd >= 0 && ps[i].ctl_off < ps[i].ctl_len)
				pfd[k++] = (struct pollfd){ .fd = ps[i].ctl_fd, .events = POLLOUT };
		}
		if (watch_stdin)
			pfd[k++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
		if (deadline)
			timeout = rdps_ms_until(deadline);
		if (!live) /* every process reaped: its output is all in the pipe */
			timeout = 0;
		if (poll(pfd, (nfds_t)k, timeout) < 0 && errno != EINTR) {
			fprintf(stderr, "rdps launch: poll: %s\n", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (ps[i].fd >= 0 && !drain(o, &ps[i]))
				open_fds--;
			feed(&ps[i]);
		}
		if (watch_stdin && pfd[k - 1].revents) {
			char sink[512];
			ssize_t r = read(STDIN_FILENO, sink, sizeof(sink));

			if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
				/* Whoever started this launcher is gone. */
				watch_stdin = false;
				if (phase == RUNNING || phase == DRAINING) {
					interrupted = SIGHUP;
					fprintf(stderr, "rdps launch: the control stream on stdin ended (the "
						"launcher that started this one is gone); stopping %d "
						"process(es)\n", live);
					for (int i = 0; i < n; i++)
						signal_proc(&ps[i], SIGTERM);
					phase = STOPPING;
					deadline = rdps_now_ns() + (uint64_t)o->grace_ms * 1000000ull;
				}
			}
		}
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
			close_ctl(p);
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
			trainers_left += ps[i].running && ps[i].trains;
		now = rdps_now_ns();
		/* A machine of servers only waits for the trainers elsewhere. */
		if (phase == RUNNING && had_trainers && !trainers_left && live && !o->keep_servers) {
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
			for (int i = 0; i < n; i++) {
				if (!ps[i].running)
					continue;
				if (ps[i].controlled) {
					/* SIGTERM ends an ssh client (and so the session). */
					fprintf(stderr, "rdps launch: %s (pid %d) still running %g s after its "
						"stop request; sending SIGTERM\n", ps[i].name, (int)ps[i].pid,
						o->grace_ms / 1000.0);
					ps[i].termed = true;
					signal_proc(&ps[i], SIGTERM);
					continue;
				}
				fprintf(stderr, "rdps launch: %s (pid %d) still running after SIGTERM; "
					"sending SIGKILL\n", ps[i].name, (int)ps[i].pid);
				signal_proc(&ps[i], SIGKILL);
				nkilled++;
			}
			phase = KILLING;
			deadline = now + 5000ull * 1000000ull;
		} else if (phase == KILLING && live && now >= deadline && !second_kill) {
			/* What got SIGTERM last round gets SIGKILL now. */
			second_kill = true;
			for (int i = 0; i < n; i++)
				if (ps[i].running && ps[i].termed) {
					fprintf(stderr, "rdps launch: %s (pid %d) still running after SIGTERM; "
						"sending SIGKILL\n", ps[i].name, (int)ps[i].pid);
					signal_proc(&ps[i], SIGKILL);
					nkilled++;
				}
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
		/* A machine: what failed there, in its own launcher's words. */
		if (failed->label && failed->failed_line[0])
			fprintf(stderr, ": %s", failed->failed_line);
		else if (failed->label && failed->last_line[0])
			fprintf(stderr, " (its last line: %s)", failed->last_line);
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
		uint32_t ns = 0, nt = 0, nm = 0;

		for (int i = 0; i < n; i++) {
			ns += ps[i].role.kind == RDPS_ROLE_SERVER;
			nt += ps[i].role.kind == RDPS_ROLE_TRAINER;
			nm += ps[i].role.kind == RDPS_ROLE_MACHINE;
		}
		if (nm)
			fprintf(stderr, "rdps launch: %u machine(s) finished\n", nm);
		else
			fprintf(stderr, "rdps launch: %u server(s) and %u trainer(s) finished\n", ns, nt);
	}
	close_fds(ps, n);
	close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	free(pfd);
	free(ps);
	return rc;
}
