// SPDX-License-Identifier: MIT
/*
 * rdps launch checks the job's train arguments once, before it starts any
 * server or trainer: it runs "rdps train --check-only" (options, data
 * files, partition, save path; no server contacted) with the command line
 * trainer 0 would get. Without it a typo after '--' started the whole job
 * and ended in every trainer's usage text.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_run.h"
#include "rdps/common.h"

/* Generous: the check may read a large dataset's files on a shared file
 * system. --no_check skips it. */
#define CHECK_TIMEOUT_MS (600 * 1000)
/* What the check prints is meant to be a line or two; more is cut. */
#define CHECK_OUTPUT_MAX 16384

/* "SELF train --check-only" + trainer j's arguments after "EXE train". */
static char **check_argv(struct rdps_launch *L, uint32_t j)
{
	struct rdps_launch_role role;
	char **targv, **argv;
	int n = 0;

	if (rdps_launch_layout_trainer(&L->layout, j, &role))
		return NULL;
	targv = rdps_launch_role_argv(&L->job, &role);
	if (!targv)
		return NULL;
	while (targv[n])
		n++;
	argv = calloc((size_t)n + 2, sizeof(*argv));
	if (argv) {
		argv[0] = L->self;
		argv[1] = "train";
		argv[2] = "--check-only";
		memcpy(argv + 3, targv + 2, (size_t)(n - 2) * sizeof(*argv)); /* strings are L's */
	}
	free(targv);
	return argv;
}

/* Starts argv with its stdout and stderr on a pipe; *fd gets the read end. */
static pid_t spawn(char **argv, int *fd)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		pid = -errno;
		close(fds[0]);
		close(fds[1]);
		return pid;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null >= 0)
			dup2(null, STDIN_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execv(argv[0], argv);
		fprintf(stderr, "rdps launch: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	*fd = fds[0];
	return pid;
}

/* Reads fd to EOF into out (the first max - 1 bytes, NUL-terminated; the
 * rest is drained), until deadline. Returns 0 at EOF or -ETIMEDOUT. */
static int read_output(int fd, char *out, size_t max, size_t *len, bool *cut, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char sink[4096];
		ssize_t r;
		int ms = rdps_ms_until(deadline);

		if (ms <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			return -errno;
		if (!p.revents)
			continue;
		if (*len + 1 < max)
			r = read(fd, out + *len, max - 1 - *len);
		else
			r = read(fd, sink, sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (*len + 1 < max)
			*len += (size_t)r;
		else
			*cut = true;
	}
	out[*len] = '\0';
	return 0;
}

/* Reaps pid by deadline, else kills it. Returns 0 with *st, or -ETIMEDOUT. */
static int reap(pid_t pid, int *st, uint64_t deadline)
{
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (rdps_ms_until(deadline) <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, st, 0); /* SIGKILLed: exits at once */
			return -ETIMEDOUT;
		}
		usleep(10000);
	}
}

int rdps_launch_check_train(struct rdps_launch *L)
{
	return rdps_launch_check_train_as(L, 0);
}

int rdps_launch_check_train_as(struct rdps_launch *L, uint32_t trainer)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)CHECK_TIMEOUT_MS * 1000000ull;
	char **argv, *out = malloc(CHECK_OUTPUT_MAX);
	size_t len = 0;
	bool cut = false;
	int fd = -1, st = 0, ret, rc;
	pid_t pid;

	if (L->dry_run || L->no_check) {
		free(out);
		return 0;
	}
	argv = check_argv(L, trainer);
	if (!argv || !out) {
		fprintf(stderr, "rdps launch: out of memory\n");
		free(argv);
		free(out);
		return 1;
	}
	fprintf(stderr, "rdps launch: checking the train arguments: ");
	rdps_launch_print_argv(stderr, argv);
	pid = spawn(argv, &fd);
	if (pid < 0) {
		fprintf(stderr, "rdps launch: cannot run the check (%s); nothing was started\n",
			strerror((int)-pid));
		free(argv);
		free(out);
		return 1;
	}
	ret = read_output(fd, out, CHECK_OUTPUT_MAX, &len, &cut, deadline);
	close(fd);
	if (!ret)
		ret = reap(pid, &st, deadline);
	else
		reap(pid, &st, 0);
	if (len) {
		fputs(out, stderr);
		if (out[len - 1] != '\n')
			fputc('\n', stderr);
	}
	if (cut)
		fprintf(stderr, "rdps launch: (the check's output was cut after %d bytes)\n",
			CHECK_OUTPUT_MAX - 1);
	rc = 0;
	if (ret == -ETIMEDOUT) {
		fprintf(stderr, "rdps launch: 'rdps train --check-only' did not finish within %d s "
			"(stopped it); nothing was started (--no_check skips the check)\n",
			CHECK_TIMEOUT_MS / 1000);
		rc = 1;
	} else if (ret) {
		fprintf(stderr, "rdps launch: waiting for 'rdps train --check-only': %s; nothing was "
			"started\n", strerror(-ret));
		rc = 1;
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 2) {
		fprintf(stderr, "rdps launch: the train arguments (after '--') do not pass "
			"'rdps train --check-only'; nothing was started\n");
		rc = 2;
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char why[64];

		if (WIFEXITED(st))
			snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(st));
		else
			snprintf(why, sizeof(why), "was killed by SIG%s",
				 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
		fprintf(stderr, "rdps launch: 'rdps train --check-only' %s; nothing was started\n", why);
		rc = 1;
	}
	free(argv);
	free(out);
	return rc;
}
