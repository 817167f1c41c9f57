// SPDX-License-Identifier: MIT
/*
 * TCP server: the listener (worker 0's). Accepts in batches, refuses
 * connections over the cap (one log line a second), backs off while the
 * process is out of descriptors, and hands each connection to the worker
 * with the fewest.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps/transport.h"
#include "sock.h"
#include "tcp.h"
#include "tcp_priv.h"
#include "tcp_srv.h"
#include "wire.h"

/* One line a second at most for connections refused over the cap. */
void tcp_cap_log_write(struct tcp_server *ts, uint64_t now)
{
	rdps_warn("server %u: refused %llu connection(s) at the cap of %u open connections "
		  "(--max-connections), the latest from %s",
		  ts->p.server_id, (unsigned long long)ts->cap_log.held, ts->max_conns,
		  ts->cap_log.peer);
	ts->cap_log.held = 0;
	ts->cap_log.last_ns = now;
}

static void refuse_over_cap(struct tcp_server *ts, const struct sockaddr_storage *ss)
{
	uint64_t now = rdps_now_ns();

	if (ts->base.stats)
		RDPS_STAT_ADD(ts->base.stats->conns_refused, 1);
	ts->cap_log.held++;
	rdps_sock_addr_str((const struct sockaddr *)ss, ts->cap_log.peer, sizeof(ts->cap_log.peer));
	if (!ts->cap_log.last_ns || now - ts->cap_log.last_ns >= TCP_LOG_EVERY_NS)
		tcp_cap_log_write(ts, now);
}

/* accept() is out of descriptors (or memory): rather than spin on a
 * listener that stays readable, leave it out of the epoll set for a while,
 * 50 ms doubling to 1 s, and serve the connections open meanwhile. One
 * line per shortage. */
static void accept_pause(struct tcp_server *ts, int err)
{
	uint64_t now = rdps_now_ns();

	if (ts->listening && !epoll_ctl(ts->workers[0].epfd, EPOLL_CTL_DEL, ts->lfd, NULL))
		ts->listening = false;
	if (!ts->starved_ns) {
		struct rlimit rl;
		char lim[32] = "?";

		if (!getrlimit(RLIMIT_NOFILE, &rl))
			snprintf(lim, sizeof(lim), rl.rlim_cur == RLIM_INFINITY ? "unlimited" : "%llu",
				 (unsigned long long)rl.rlim_cur);
		rdps_warn("server %u: cannot accept connections: %s, with %u connection(s) open "
			  "and RLIMIT_NOFILE %s; retrying every %d..%d ms, serving the open ones "
			  "(raise ulimit -n or lower --max-connections)",
			  ts->p.server_id, strerror(err), __atomic_load_n(&ts->nconns, __ATOMIC_RELAXED), lim, TCP_BACKOFF_MIN_MS,
			  TCP_BACKOFF_MAX_MS);
		ts->starved_ns = now;
		ts->starved_accepts = 0;
		ts->backoff_ms = TCP_BACKOFF_MIN_MS;
	} else if (ts->backoff_ms < TCP_BACKOFF_MAX_MS) {
		ts->backoff_ms = ts->backoff_ms * 2 < TCP_BACKOFF_MAX_MS ? ts->backoff_ms * 2
									 : TCP_BACKOFF_MAX_MS;
	}
	ts->accept_retry_ns = now + (uint64_t)ts->backoff_ms * 1000000ull;
}

/* The backlog is empty: a shortage, if any, is over. */
static void accept_drained(struct tcp_server *ts)
{
	if (!ts->starved_ns)
		return;
	rdps_info("server %u: accepting connections again after %.1f s short of descriptors "
		  "(%llu accepted meanwhile, %u open)", ts->p.server_id,
		  (rdps_now_ns() - ts->starved_ns) / 1e9,
		  (unsigned long long)ts->starved_accepts, __atomic_load_n(&ts->nconns, __ATOMIC_RELAXED));
	ts->starved_ns = 0;
}

void tcp_inbox_put(struct tcp_worker *w, struct tcp_inbox_item *it)
{
	uint64_t one = 1;

	it->next = NULL;
	pthread_mutex_lock(&w->inbox_lock);
	*w->inbox_tail = it;
	w->inbox_tail = &it->next;
	pthread_mutex_unlock(&w->inbox_lock);
	/* Cannot fail short of an overflow of 2^64 - 1 unread wakeups. */
	if (write(w->efd, &one, sizeof(one)) < 0)
		rdps_dbg("server: waking thread %u: %s", w->index, strerror(errno));
}

/* The worker with the fewest connections (worker 0's own first on a tie). */
static struct tcp_worker *pick_worker(struct tcp_server *ts)
{
	struct tcp_worker *best = &ts->workers[0];
	uint32_t least = __atomic_load_n(&best->nconns, __ATOMIC_RELAXED);

	for (uint32_t i = 1; i < ts->nworkers; i++) {
		uint32_t n = __atomic_load_n(&ts->workers[i].nconns, __ATOMIC_RELAXED);

		if (n < least) {
			least = n;
			best = &ts->workers[i];
		}
	}
	return best;
}

/* Worker 0: accepts, and gives each connection to the least busy worker. */
int tcp_accept(struct tcp_server *ts)
{
	for (int batch = 0; batch < TCP_ACCEPT_BATCH; batch++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_worker *to;
		char peer[64];
		int fd, one = 1;
		bool loopback;

		fd = accept4(ts->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			switch (errno) {
			case EAGAIN:
				accept_drained(ts);
				return 0;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				accept_pause(ts, errno);
				return 0;
			case EINTR:
			case ECONNABORTED:
			/* Errors of the connection, not the listener (accept(2)). */
			case EPERM:
			case EPROTO:
			case ENOPROTOOPT:
			case ENETDOWN:
			case ENETUNREACH:
			case EHOSTDOWN:
			case EHOSTUNREACH:
			case ENONET:
			case EOPNOTSUPP:
				continue;
			default:
				return -errno;
			}
		}
		if (ts->starved_ns) {
			ts->starved_accepts++;
			ts->backoff_ms = TCP_BACKOFF_MIN_MS; /* descriptors are coming back */
		}
		if (__atomic_load_n(&ts->nconns, __ATOMIC_RELAXED) >= ts->max_conns) {
			close(fd);
			refuse_over_cap(ts, &ss);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		{
			/* A client host that vanished without closing is noticed
			 * in about 25 s (and its job's barriers fail). */
			int idle = 10, intvl = 5, cnt = 3;

			setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		}
		rdps_sock_addr_str((struct sockaddr *)&ss, peer, sizeof(peer));
		loopback = rdps_sock_is_loopback((struct sockaddr *)&ss);
		__atomic_fetch_add(&ts->nconns, 1, __ATOMIC_RELAXED);
		if (ts->base.stats)
			RDPS_STAT_ADD(ts->base.stats->connections, 1);
		to = pick_worker(ts);
		/* Counted now, so the next accept balances with it. */
		__atomic_fetch_add(&to->nconns, 1, __ATOMIC_RELAXED);
		if (to == &ts->workers[0]) {
			sconn_add(to, fd, rdps_now_ns(), peer, loopback);
		} else {
			struct tcp_inbox_item *it = calloc(1, sizeof(*it));

			if (!it) {
				close(fd);
				__atomic_fetch_sub(&to->nconns, 1, __ATOMIC_RELAXED);
				__atomic_fetch_sub(&ts->nconns, 1, __ATOMIC_RELAXED);
				continue;
			}
			it->is_conn = true;
			it->loopback = loopback;
			it->fd = fd;
			it->since_ns = rdps_now_ns();
			snprintf(it->peer, sizeof(it->peer), "%s", peer);
			tcp_inbox_put(to, it);
		}
	}
	return 0; /* more may wait: the listener stays readable */
}
