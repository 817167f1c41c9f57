// SPDX-License-Identifier: MIT
/*
 * rdps launch --ssh-remote: one machine of an ssh job (launch_ssh.c), run
 * by the user's ssh session on that machine (or forked, for a machine that
 * is the launcher's own host). What must not be on its command line comes
 * on stdin, the session's control stream:
 *
 *   rdps-launch-control 1
 *   secret HEX | secret -        the job's RDPS_SECRET, hex ('-': none)
 *   env NAME HEX                 each variable passed to the job (0 or more)
 *   ip_config N                  then the ip_config's N bytes of text
 *   end
 *
 * after which stdin stays open for the job's life: its end (the launcher
 * stopping the job, dying, or the connection dropping) stops this
 * machine's processes, so none outlives the launcher holding ports.
 * --remote-check checks this machine instead (its servers' ports, its first
 * trainer's 'rdps train --check-only') and exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch_run.h"
#include "rdps/common.h"

#define CONTROL_MAGIC "rdps-launch-control 1\n"
/* Bounds: an ip_config of 4096 servers is ~130 kB. */
#define CONTROL_MAX (4u << 20)
#define CONTROL_TIMEOUT_MS (120 * 1000)

/* Variables the launcher sets for each process itself. */
static const char *const own_vars[] = { "RDPS_SECRET", "RDPS_RANK", "RDPS_WORLD_SIZE",
					"RDPS_LOCAL_RANK", "RDPS_IP_CONFIG", "RDPS_NUM_TRAINERS",
					"RDPS_NUM_SERVERS", "RDPS_TRANSPORT" };

static bool is_own_var(const char *name, size_t len)
{
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(own_vars); i++)
		if (strlen(own_vars[i]) == len && !strncmp(own_vars[i], name, len))
			return true;
	return false;
}

static void put_hex(FILE *f, const char *s)
{
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
}

static void put_env(FILE *f, const char *name, size_t len, const char *value)
{
	fprintf(f, "env %.*s ", (int)len, name);
	put_hex(f, value);
	fputc('\n', f);
}

char *rdps_launch_control_build(const struct rdps_launch *L, size_t *len)
{
	extern char **environ;
	const char *secret = getenv("RDPS_SECRET");
	char *text = NULL, *ipc;
	size_t n = 0, ipc_len = 0;
	FILE *f;

	/* Read here, sent whole: the machines need no copy of it. */
	ipc = rdps_launch_read_file(L->ipc_path, CONTROL_MAX, &ipc_len);
	if (!ipc)
		return NULL;
	f = open_memstream(&text, &n);
	if (!f) {
		free(ipc);
		return NULL;
	}
	fputs(CONTROL_MAGIC, f);
	/* A --secret-file is read by each process on its machine. */
	if (secret && *secret && strcmp(L->secret_source ? L->secret_source : "", "--secret-file")) {
		fputs("secret ", f);
		put_hex(f, secret);
		fputc('\n', f);
	} else {
		fputs("secret -\n", f);
	}
	/* The job's settings: every RDPS_* variable of this environment but
	 * those set per process, and each --env. */
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');

		if (eq && !strncmp(*e, "RDPS_", 5) && !is_own_var(*e, (size_t)(eq - *e)))
			put_env(f, *e, (size_t)(eq - *e), eq + 1);
	}
	for (int i = 0; i < L->env_names.n; i++) {
		const char *name = L->env_names.v[i], *v = getenv(name);

		if (v && strncmp(name, "RDPS_", 5))
			put_env(f, name, strlen(name), v);
	}
	fprintf(f, "ip_config %zu\n", ipc_len);
	fwrite(ipc, 1, ipc_len, f);
	fputs("end\n", f);
	free(ipc);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}

char *rdps_launch_read_file(const char *path, size_t max, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(max + 1);
	size_t n = 0;

	if (!f || !buf) {
		if (f)
			fclose(f);
		free(buf);
		return NULL;
	}
	n = fread(buf, 1, max + 1, f);
	fclose(f);
	if (n > max) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* ---- the machine's side ---- */

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes n hex digits at s into a NUL-terminated string; NULL if bad. */
static char *unhex(const char *s, size_t n)
{
	char *out;

	if (n % 2)
		return NULL;
	out = malloc(n / 2 + 1);
	for (size_t i = 0; out && i < n / 2; i++) {
		int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(out);
			return NULL;
		}
		out[i] = (char)(hi << 4 | lo);
	}
	if (out)
		out[n / 2] = '\0';
	return out;
}

/*
 * Parses a complete control message in buf; applies the secret and the
 * variables and returns the ip_config's text (*ipc, *ipc_len, pointing into
 * buf). -EAGAIN: incomplete; -EINVAL: not a control message (why).
 */
static int parse_control(char *buf, size_t len, const char **ipc, size_t *ipc_len, bool apply,
			 char *why, size_t whylen)
{
	char *p = buf, *end = buf + len;
	size_t magic = strlen(CONTROL_MAGIC);

	if (memcmp(buf, CONTROL_MAGIC, len < magic ? len : magic)) {
		snprintf(why, whylen, "stdin does not start with '%.*s' (this option is what rdps "
			 "launch --backend ssh runs on each machine, not a command for users)",
			 (int)magic - 1, CONTROL_MAGIC);
		return -EINVAL;
	}
	if (len < magic)
		return -EAGAIN;
	p += magic;
	for (;;) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *sp;

		if (!nl)
			return -EAGAIN;
		*nl = '\0';
		sp = strchr(p, ' ');
		if (!strncmp(p, "secret ", 7)) {
			if (apply && strcmp(p + 7, "-")) {
				char *s = unhex(p + 7, strlen(p + 7));

				if (!s || setenv("RDPS_SECRET", s, 1)) {
					free(s);
					snprintf(why, whylen, "bad secret line");
					return -EINVAL;
				}
				free(s);
			}
		} else if (!strncmp(p, "env ", 4) && sp && (sp = strchr(p + 4, ' '))) {
			char *v = unhex(sp + 1, strlen(sp + 1));

			*sp = '\0';
			if (!v || !p[4] || (apply && setenv(p + 4, v, 1))) {
				free(v);
				snprintf(why, whylen, "bad env line for '%s'", p + 4);
				return -EINVAL;
			}
			*sp = ' ';
			free(v);
		} else if (!strncmp(p, "ip_config ", 10)) {
			char *e;
			unsigned long long n = strtoull(p + 10, &e, 10);

			*nl = '\n';
			if (*e != '\n' || n > CONTROL_MAX) {
				snprintf(why, whylen, "bad ip_config length");
				return -EINVAL;
			}
			if ((size_t)(end - (nl + 1)) < n + 4)
				return -EAGAIN;
			*ipc = nl + 1;
			*ipc_len = (size_t)n;
			if (memcmp(nl + 1 + n, "end\n", 4)) {
				snprintf(why, whylen, "no 'end' after the ip_config");
				return -EINVAL;
			}
			return 0;
		} else {
			snprintf(why, whylen, "unknown line '%.40s'", p);
			return -EINVAL;
		}
		*nl = '\n';
		p = nl + 1;
	}
}

/* Reads the control message from stdin, bounded in size and time. */
static int read_control(char **out, size_t *len, char *why, size_t whylen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)CONTROL_TIMEOUT_MS * 1000000ull;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		const char *ipc;
		size_t ipc_len;
		char *copy;
		int ms = rdps_ms_until(deadline), ret;
		ssize_t r;

		if (n) {
			copy = malloc(n);
			if (!copy) {
				free(buf);
				return -ENOMEM;
			}
			memcpy(copy, buf, n);
			ret = parse_control(copy, n, &ipc, &ipc_len, false, why, whylen);
			free(copy);
			if (ret != -EAGAIN) {
				if (ret)
					free(buf);
				else
					*out = buf, *len = n;
				return ret;
			}
		}
		if (ms <= 0) {
			snprintf(why, whylen, "no complete control message on stdin within %d s",
				 CONTROL_TIMEOUT_MS / 1000);
			free(buf);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, ms) < 0 && errno != EINTR) {
			free(buf);
			return -errno;
		}
		if (!p.revents)
			continue;
		if (n == cap) {
			char *b = cap < CONTROL_MAX ? realloc(buf, cap * 2) : NULL;

			if (!b) {
				snprintf(why, whylen, "control message longer than %u bytes", CONTROL_MAX);
				free(buf);
				return -EFBIG;
			}
			buf = b;
			cap *= 2;
		}
		r = read(STDIN_FILENO, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(why, whylen, "stdin ended before the control message did (%zu bytes)", n);
			free(buf);
			return -EPIPE;
		}
		n += (size_t)r;
	}
}

int rdps_launch_remote_prepare(struct rdps_launch *L)
{
	char why[256] = "", *buf = NULL, *path;
	const char *ipc = NULL;
	size_t len = 0, ipc_len = 0;
	const char *tmp = getenv("TMPDIR");
	int fd, ret;

	if (L->machine < 0) {
		fprintf(stderr, "rdps launch --ssh-remote: --machine M is required\n");
		return -EINVAL;
	}
	ret = read_control(&buf, &len, why, sizeof(why));
	if (!ret)
		ret = parse_control(buf, len, &ipc, &ipc_len, true, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "rdps launch --ssh-remote: %s\n", why[0] ? why : strerror(-ret));
		free(buf);
		return ret;
	}
	if (L->workspace && chdir(L->workspace)) {
		ret = -errno;
		fprintf(stderr, "rdps launch: workspace %s: %s on this machine (--workspace: the job's "
			"directory on every machine)\n", L->workspace, strerror(errno));
		free(buf);
		return ret;
	}
	snprintf(L->remote_dir, sizeof(L->remote_dir), "%s/rdps-launch-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(L->remote_dir)) {
		ret = -errno;
		fprintf(stderr, "rdps launch: cannot make a directory for the ip_config (%s): %s\n",
			L->remote_dir, strerror(errno));
		L->remote_dir[0] = '\0';
		free(buf);
		return ret;
	}
	path = rdps_launch_owned_printf(&L->owned, "%s/ip_config.txt", L->remote_dir);
	fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	if (fd < 0 || write(fd, ipc, ipc_len) != (ssize_t)ipc_len || close(fd)) {
		ret = -errno;
		fprintf(stderr, "rdps launch: cannot write %s: %s\n", path ? path : "the ip_config",
			strerror(errno));
		free(buf);
		return ret ? ret : -EIO;
	}
	free(buf);
	L->ip_config = path;
	return 0;
}

void rdps_launch_remote_cleanup(struct rdps_launch *L)
{
	char path[PATH_MAX + 32];

	if (!L->remote_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/ip_config.txt", L->remote_dir);
	unlink(path);
	rmdir(L->remote_dir);
	L->remote_dir[0] = '\0';
}

int rdps_launch_remote_check(struct rdps_launch *L)
{
	const struct rdps_launch_machine *mc = &L->layout.machines[L->machine];
	char host[256] = "?";
	int rc;

	gethostname(host, sizeof(host) - 1);
	if (rdps_launch_check_ports(L, L->machine))
		return 1;
	rc = mc->num_trainers ? rdps_launch_check_train_as(L, mc->trainer_index) : 0;
	if (rc)
		return rc;
	printf("rdps launch: machine %ld is ready on %s (workspace %s): %u server(s) can listen, "
	       "%u trainer(s)%s\n", L->machine, host, L->workspace ? L->workspace : "(home)",
	       mc->num_servers, mc->num_trainers,
	       mc->num_trainers && !L->no_check ? " whose arguments pass the check" : "");
	return 0;
}
