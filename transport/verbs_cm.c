// SPDX-License-Identifier: MIT
/* verbs backend: rdma_cm resolution and events, registered buffers, the
 * listener, and the MAC that binds a queue pair to its session. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "verbs.h"

/*
 * Registered memory and fork: before Linux 5.13 a forked child shares the
 * parent's registered pages copy-on-write, so whichever writes first gets
 * a new page the device never sees: the parent's pushes and READ targets
 * go stale silently (verbs), or the provider aborts at the fork (efa).
 * Python trainers fork DataLoader workers. libibverbs says whether fork
 * support is needed and not on (ibv_is_fork_initialized); then it is
 * turned on before anything is registered (ibv_fork_init: registered
 * pages are not inherited by a child). Kernels from 5.13 copy them at
 * fork, and nothing is needed.
 */
static void fork_init_once(void)
{
	int ret;

	if (ibv_is_fork_initialized() != IBV_FORK_DISABLED)
		return;
	ret = ibv_fork_init();
	if (ret)
		rdps_warn("this kernel needs fork support for registered memory and "
			  "ibv_fork_init failed (%s): a process that forks (DataLoader workers) "
			  "may corrupt its RDMA buffers; set RDMAV_FORK_SAFE=1 before it starts",
			  strerror(ret));
	else
		rdps_dbg("fork support for registered memory on (ibv_fork_init: kernel before "
			 "5.13)");
}

void verbs_fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fork_init_once);
}

const char *verbs_memlock_hint(int err)
{
	if (err == ENOMEM || err == EPERM || err == EAGAIN)
		return " (the memory-lock limit is probably too low: run 'ulimit -l unlimited', "
		       "set LimitMEMLOCK=infinity for a systemd service, or add "
		       "'* - memlock unlimited' to /etc/security/limits.conf)";
	return "";
}

int verbs_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

int verbs_cm_wait(struct rdma_event_channel *ch, uint64_t deadline, struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int ms;

		if (!rdma_get_cm_event(ch, ev))
			return 0;
		if (errno != EAGAIN)
			return -errno;
		ms = rdps_ms_until(deadline);
		if (!ms)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
	}
}

int verbs_tos(void)
{
	static int tos = -2;
	const char *env;
	char *end;
	long v;

	if (tos != -2)
		return tos;
	env = getenv("RDPS_TOS");
	tos = -1;
	if (!env || !*env)
		return tos;
	v = strtol(env, &end, 0);
	if (*end || v < 0 || v > 255) {
		rdps_warn("RDPS_TOS=%s is not a type of service from 0 to 255; the RDMA "
			  "connections keep the device's default", env);
		return tos;
	}
	tos = (int)v;
	return tos;
}

int verbs_set_tos(struct rdma_cm_id *id)
{
	int tos = verbs_tos();
	uint8_t v;

	if (tos < 0)
		return 0;
	v = (uint8_t)tos;
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof(v))) {
		int ret = -errno;

		rdps_warn("setting the RDMA connection's type of service to %d failed: %s", tos,
			  strerror(-ret));
		return ret;
	}
	return 0;
}

int verbs_listen_backlog(void)
{
	static const char *const files[] = { "/proc/sys/net/rdma_ucm/max_backlog",
					     "/proc/sys/net/core/somaxconn" };

	/* The kernel clamps a listener's backlog to rdma_ucm's max_backlog:
	 * ask for that much (or somaxconn where it is not readable), so 256
	 * clients connecting at once are not refused. */
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(files); i++) {
		FILE *f = fopen(files[i], "r");
		int v = 0;

		if (!f)
			continue;
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
		if (v > 0)
			return v;
	}
	return 1024;
}

int verbs_cm_resolve(struct rdma_cm_id *id, struct rdma_event_channel *ch, const char *host,
		     uint16_t port, int timeout_ms, char *err, size_t errlen)
{
	uint64_t deadline = rdps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	struct rdma_cm_event *ev;
	char portstr[8];
	int ret, step;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res)) {
		snprintf(err, errlen, "cannot resolve '%s'", host);
		return -EHOSTUNREACH;
	}
	ret = rdma_resolve_addr(id, NULL, res->ai_addr, timeout_ms) ? -errno : 0;
	freeaddrinfo(res);
	for (step = 0; !ret && step < 2; step++) {
		enum rdma_cm_event_type want = step ? RDMA_CM_EVENT_ROUTE_RESOLVED
						    : RDMA_CM_EVENT_ADDR_RESOLVED;

		ret = verbs_cm_wait(ch, deadline, &ev);
		if (ret)
			break;
		if (ev->event != want) {
			snprintf(err, errlen, "%s:%u: %s (status %d): no RDMA route to this address",
				 host, port, rdma_event_str(ev->event), ev->status);
			ret = -EHOSTUNREACH;
		}
		rdma_ack_cm_event(ev);
		/* The type of service shapes the route (RoCE: the traffic
		 * class): set before resolving it. */
		if (!ret && !step)
			ret = verbs_set_tos(id);
		if (!ret && !step)
			ret = rdma_resolve_route(id, timeout_ms) ? -errno : 0;
	}
	if (ret && !err[0])
		snprintf(err, errlen, "%s:%u: resolving the RDMA route: %s", host, port,
			 rdps_strerror(ret));
	return ret;
}

int verbs_alloc_registered(struct ibv_pd *pd, size_t len, int access, char **buf,
			   struct ibv_mr **mr, char *err, size_t errlen, const char *what)
{
	int ret = posix_memalign((void **)buf, 4096, len);

	if (ret) {
		*buf = NULL;
		snprintf(err, errlen, "allocating the %s (%zu KiB) failed", what, len >> 10);
		return -ret;
	}
	memset(*buf, 0, len);
	*mr = ibv_reg_mr(pd, *buf, len, access);
	if (!*mr) {
		ret = errno;
		snprintf(err, errlen, "registering the %s (%zu KiB) failed: %s%s", what,
			 len >> 10, strerror(ret), verbs_memlock_hint(ret));
		free(*buf);
		*buf = NULL;
		return -ret;
	}
	return 0;
}

const char *verbs_reject_reason(int reason)
{
	switch (reason) {
	case ENOENT:
		return "no live control connection of this client holds the session token "
		       "(forged, or its connection closed)";
	case EALREADY:
		return "the session token was used before (one queue pair per control connection)";
	case EACCES:
		return "the proof of the shared secret is wrong";
	case EUSERS:
		return "the server cannot give this job's clients a receive buffer each, or serves "
		       "its maximum number of RDMA sessions (see its log)";
	case EPROTO:
		return "malformed connection request";
	default:
		return strerror(reason);
	}
}

void verbs_qp_mac(const struct rdps_secret *secret, uint64_t session,
		  uint8_t mac[VERBS_QP_MAC_LEN])
{
	uint8_t full[RDPS_MAC_LEN];

	memset(mac, 0, VERBS_QP_MAC_LEN);
	if (!secret || !secret->len)
		return;
	/* The token travels in clear on the control connection; only a peer
	 * that also knows the secret can turn it into a queue pair. */
	rdps_auth_mac(secret, VERBS_QP_MAC_LABEL, &session, sizeof(session), NULL, 0, NULL, 0,
		      full);
	memcpy(mac, full, VERBS_QP_MAC_LEN);
}

int verbs_cm_bind(const char *host, uint16_t port, struct rdma_event_channel **ch,
		  struct rdma_cm_id **id, void *ctx, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *res;
	char portstr[8];
	int ret;

	*ch = rdma_create_event_channel();
	if (!*ch) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the RDMA CM (%s): is rdma_ucm loaded and "
			 "/dev/infiniband/rdma_cm present?", strerror(-ret));
		return ret;
	}
	if ((ret = verbs_set_nonblock((*ch)->fd)))
		return ret;
	if (rdma_create_id(*ch, id, ctx, RDMA_PS_TCP))
		return -errno;
	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res)) {
		snprintf(err, errlen, "cannot resolve '%s'", host);
		return -EHOSTUNREACH;
	}
	ret = rdma_bind_addr(*id, res->ai_addr) ? -errno : 0;
	freeaddrinfo(res);
	if (ret) {
		snprintf(err, errlen, "cannot bind RDMA CM to %s:%u: %s", host, port,
			 ret == -EADDRINUSE ? "port already in use" : strerror(-ret));
		return ret;
	}
	if (!(*id)->verbs) {
		snprintf(err, errlen, "%s is not the address of an RDMA device (use --transport tcp)",
			 host);
		return -ENODEV;
	}
	/* Connections made through the listener take its type of service. */
	if ((ret = verbs_set_tos(*id))) {
		snprintf(err, errlen, "cannot set the type of service %d (--tos) on %s: %s",
			 verbs_tos(), host, strerror(-ret));
		return ret;
	}
	return 0;
}

int verbs_route_device(const char *host, uint16_t port, char *name, size_t namelen)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	char err[256] = "";
	int ret;

	if (!ch)
		return -errno;
	ret = verbs_set_nonblock(ch->fd);
	if (!ret)
		ret = rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? -errno : 0;
	if (!ret)
		ret = verbs_cm_resolve(id, ch, host, port, 1000, err, sizeof(err));
	if (!ret && (!id->verbs || !id->verbs->device))
		ret = -ENODEV;
	if (!ret)
		snprintf(name, namelen, "%s", ibv_get_device_name(id->verbs->device));
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return ret;
}
