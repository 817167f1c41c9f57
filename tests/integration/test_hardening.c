// SPDX-License-Identifier: MIT
// ctest-labels: faults
// ctest-timeout: 300
// needs-rdps-tool
/*
 * The TCP server (build/rdps server processes) against hostile and
 * overloaded peers: frames announced before authentication are refused on
 * their header, handshakes time out, connections are capped, replies queued
 * for slow readers are bounded by a budget, and running out of descriptors
 * neither spins nor locks clients out. Each case checks the server's log
 * names the peer and that clients are still served.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps_srvproc.h"
#include "rdps_test.h"
#include "transport/wire.h"

static const char *const small_table[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros", NULL };

TestSuite(hardening, .fini = srvp_stop, .timeout = 240);

/* ---------------------------------------------------------------------- */

#define BIG_FRAME (64u << 20)   /* announced */
#define BIG_SENT (32u << 20)    /* of it actually sent, per connection */
#define ATTACKERS 8
#define PREAUTH_BOUND_KB (32 * 1024) /* growth of the server's peak RSS */

Test(hardening, frames_announced_before_authentication_are_refused_on_their_header)
{
	static const uint8_t kinds[4] = { RDPS_REQ_HELLO, RDPS_REQ_PULL, RDPS_WIRE_AUTH,
					  RDPS_REQ_PUSH };
	int s[ATTACKERS], port[ATTACKERS];
	char *chunk = calloc(1, MiB);
	struct rdps_server_stats st;
	struct rdps_client *c;
	long rss0, hwm;

	cr_assert(chunk);
	srvp_start(NULL, true, small_table);
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");
	for (int i = 0; i < ATTACKERS; i++) {
		uint8_t kind = kinds[i % 4];

		s[i] = srvp_raw_connect();
		port[i] = srvp_local_port(s[i]);
		/* Half announce a huge first frame; half do the hello, take
		 * the challenge, then announce one instead of the 32-byte MAC. */
		if (i % 4 >= 2) {
			uint8_t nonce[RDPS_NONCE_LEN];

			srvp_send_hello(s[i], 0, 1, 0);
			srvp_recv_frame(s[i], RDPS_WIRE_CHALLENGE, nonce, sizeof(nonce));
		}
		srvp_send_hdr(s[i], kind, BIG_FRAME - 16);
		/* Send most of it, until the server hangs up. */
		for (size_t sent = 0; sent < BIG_SENT; sent += MiB)
			if (send(s[i], chunk, MiB, MSG_NOSIGNAL) != (ssize_t)MiB)
				break;
	}
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	cr_log_info("%d connections announced %u MiB frames before authentication: server "
		    "peak RSS %ld kB, %ld kB over %ld kB before (bound %d kB)", ATTACKERS,
		    BIG_FRAME >> 20, hwm, hwm - rss0, rss0, PREAUTH_BOUND_KB);
	cr_assert_lt(hwm - rss0, PREAUTH_BOUND_KB,
		     "the server's peak RSS grew from %ld kB to %ld kB: it buffered frames of "
		     "unauthenticated peers", rss0, hwm);
	for (int i = 0; i < ATTACKERS; i++) {
		srvp_expect_closed(s[i], "a huge frame before authentication");
		close(s[i]);
		srvp_expect_log_peer(port[i], "a frame of type");
	}
	free(chunk);

	c = srvp_client(0, 1, false, true);
	srvp_expect_served(c, 7);
	st = srvp_stats_of(c);
	cr_assert_eq(st.bad_frames, ATTACKERS, "bad_frames %llu",
		     (unsigned long long)st.bad_frames);
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

Test(hardening, idle_handshakes_time_out)
{
	static const char *const args[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    "--handshake-timeout", "1", NULL };
	uint8_t nonce[RDPS_NONCE_LEN];
	struct rdps_server_stats st;
	struct rdps_client *c;
	int idle, half, idle_port, half_port;

	srvp_start(NULL, true, args);
	/* Control: a client that finishes its handshake at once. */
	c = srvp_client(0, 1, false, true);
	idle = srvp_raw_connect();
	idle_port = srvp_local_port(idle);
	half = srvp_raw_connect();
	half_port = srvp_local_port(half);
	srvp_send_hello(half, 0, 1, 0);
	srvp_recv_frame(half, RDPS_WIRE_CHALLENGE, nonce, sizeof(nonce));

	srvp_expect_closed(idle, "a connection that sent nothing");
	srvp_expect_closed(half, "a connection that never answered the challenge");
	close(idle);
	close(half);
	srvp_expect_log_peer(idle_port, "no handshake after");
	srvp_expect_log_peer(half_port, "no handshake after");
	free(srvp_wait_log("challenged, no authentication came"));
	free(srvp_wait_log("nothing received"));

	/* The control is older than the timeout now and still served, on the
	 * same connection. */
	srvp_expect_served(c, 3);
	cr_assert_eq(rdps_client_reconnects(c), 0);
	st = srvp_stats_of(c);
	cr_assert_eq(st.handshake_timeouts, 2, "handshake_timeouts %llu",
		     (unsigned long long)st.handshake_timeouts);
	rdps_client_destroy(c);
}

/* A hello that came in time but found the server busy (stopped here) is
 * not timed out: its authentication gets time of its own. */
Test(hardening, a_hello_that_waited_for_a_busy_server_is_given_time_to_authenticate)
{
	static const char *const args[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    "--handshake-timeout", "1", NULL };
	struct rdps_wire_hello hl = { .client_id = 0, .num_clients = 1 };
	struct rdps_secret secret = { .len = strlen(SECRET) };
	uint8_t snonce[RDPS_NONCE_LEN], mac[RDPS_MAC_LEN];
	struct rdps_server_stats st;
	struct rdps_client *obs;
	int s;

	srvp_start(NULL, true, args);
	memcpy(secret.key, SECRET, secret.len);
	s = srvp_raw_connect();
	/* Its handshake is a round trip after s connected: s is accepted. */
	obs = srvp_client(0, 1, true, true);
	cr_assert_eq(kill(srvp.pid, SIGSTOP), 0);
	cr_assert_eq(rdps_random_bytes(hl.nonce, sizeof(hl.nonce)), 0);
	srvp_send_hdr(s, RDPS_REQ_HELLO, sizeof(hl));
	srvp_send_all(s, &hl, sizeof(hl));
	usleep(1500000); /* past the deadline while the server cannot read */
	cr_assert_eq(kill(srvp.pid, SIGCONT), 0);

	cr_assert_eq(srvp_recv_frame(s, RDPS_WIRE_CHALLENGE, snonce, sizeof(snonce)), 0);
	rdps_auth_mac(&secret, RDPS_AUTH_CLIENT_LABEL, snonce, sizeof(snonce), hl.nonce,
		      sizeof(hl.nonce), &hl, sizeof(hl), mac);
	srvp_send_hdr(s, RDPS_WIRE_AUTH, sizeof(mac));
	srvp_send_all(s, mac, sizeof(mac));
	cr_assert_eq(srvp_recv_frame(s, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0,
		     "the welcome");
	st = srvp_stats_of(obs);
	cr_assert_eq(st.handshake_timeouts, 0);
	close(s);
	rdps_client_destroy(obs);
}

/* ---------------------------------------------------------------------- */

#define CAP 4
#define BURST 30

/* Sums the counts of the cap's log lines ("refused N connection(s)"). */
static long refused_in_log(const char *log, int *lines)
{
	const char *needle = "refused ";
	long sum = 0;

	*lines = 0;
	for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle)) {
		char *end;
		long n = strtol(p + strlen(needle), &end, 10);

		if (!strncmp(end, " connection(s) at the cap", 25)) {
			sum += n;
			(*lines)++;
		}
	}
	return sum;
}

Test(hardening, connections_over_the_cap_are_closed_and_counted)
{
	static const char *const args[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    "--max-connections", "4", NULL };
	int held[CAP], extra, extra_port, lines = 0, failed = 0;
	struct rdps_server_stats st;
	struct rdps_client *obs = NULL;
	uint64_t t0;
	long sum = 0;
	char needle[128], err[640], *log;
	double secs;

	srvp_start(NULL, false, args);
	t0 = rdps_now_ns();
	for (int i = 0; i < CAP; i++) {
		held[i] = srvp_raw_connect();
		srvp_send_hello(held[i], (uint32_t)i, CAP, 0);
		cr_assert_eq(srvp_recv_frame(held[i], RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
	}
	extra = srvp_raw_connect();
	extra_port = srvp_local_port(extra);
	srvp_expect_closed(extra, "the connection over the cap");
	close(extra);
	snprintf(needle, sizeof(needle), "refused 1 connection(s) at the cap of %d open "
		 "connections (--max-connections), the latest from 127.0.0.1:%d", CAP, extra_port);
	free(srvp_wait_log(needle));

	/* The connections under the cap are served. */
	for (int i = 0; i < CAP; i++) {
		struct {
			struct rdps_wire_hdr h;
			struct rdps_wire_rows rows;
			uint64_t id;
		} req = { .rows = { 0, 1 }, .id = (uint64_t)i };
		float row[4];

		rdps_wire_hdr_init(&req.h, RDPS_REQ_PULL, sizeof(req) - sizeof(req.h), 0);
		srvp_send_all(held[i], &req, sizeof(req));
		cr_assert_eq(srvp_recv_frame(held[i], RDPS_REQ_PULL | RDPS_WIRE_REPLY, row,
					sizeof(row)), 0);
	}

	/* A burst is logged at most once a second, with counts. */
	for (int i = 0; i < BURST; i++) {
		extra = srvp_raw_connect();
		srvp_expect_closed(extra, "a connection of the burst over the cap");
		close(extra);
	}
	secs = (rdps_now_ns() - t0) / 1e9;
	for (uint64_t end = rdps_now_ns() + 10000000000ull;
	     sum != 1 + BURST && rdps_now_ns() < end;) {
		log = rdps_test_slurp(srvp.log);
		sum = refused_in_log(log, &lines);
		free(log);
		usleep(10000);
	}
	cr_assert_eq(sum, 1 + BURST, "the log's counts add up to %ld refused, want %d", sum,
		     1 + BURST);
	/* One line for the first, then one a second at most: secs passed. */
	cr_assert_leq(lines, 2 + (int)secs + 1, "%d lines for %d refusals in %.1f s", lines,
		      1 + BURST, secs);

	/* Counted: ask as an observer in a freed slot (attempts that still
	 * met the cap are refused and counted too). */
	close(held[0]);
	while (srvp_make_client(0, 1, true, false, &obs, err, sizeof(err))) {
		cr_assert_lt(++failed, 100, "no connection under the cap: %s", err);
		usleep(20000);
	}
	st = srvp_stats_of(obs);
	cr_assert_eq(st.conns_refused, (uint64_t)(1 + BURST + failed), "conns_refused %llu",
		     (unsigned long long)st.conns_refused);
	rdps_client_destroy(obs);
	for (int i = 1; i < CAP; i++)
		close(held[i]);
}

/* ---------------------------------------------------------------------- */

#define WIDE_ROWS 64
#define WIDE_DIM 65536           /* 256 KiB rows */
#define SLOW_CLIENTS 10
#define SLOW_PULLS 24            /* pipelined by each, never read (for a while) */
#define PULL_ROWS 4              /* 1 MiB replies */
#define BUDGET_MB 8
#define SLOW_BOUND_KB (40 * 1024) /* peak RSS growth: the budget plus a reply each, and slack */

static uint64_t slow_id(int c, int k, int j)
{
	return (uint64_t)(c * 7 + k * PULL_ROWS + j) % WIDE_ROWS;
}

Test(hardening, replies_for_slow_readers_are_bounded_by_the_budget)
{
	static const char *const args[] = { "--table", "wide:64:65536", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    "--max-reply-buffer", "8", NULL };
	size_t reply = (size_t)PULL_ROWS * WIDE_DIM * 4;
	struct {
		struct rdps_wire_hdr h;
		struct rdps_wire_rows rows;
		uint64_t ids[PULL_ROWS];
	} req[SLOW_PULLS];
	struct rdps_server_stats st;
	struct rdps_client *c, *obs;
	uint64_t ids[WIDE_ROWS], pulls = 0;
	int s[SLOW_CLIENTS], still = 0;
	float *buf;
	long rss0, hwm;

	srvp_start(NULL, false, args);
	/* Row r holds r + 1 everywhere. */
	buf = malloc((size_t)WIDE_ROWS * WIDE_DIM * 4);
	cr_assert(buf);
	for (int r = 0; r < WIDE_ROWS; r++) {
		ids[r] = (uint64_t)r;
		for (int k = 0; k < WIDE_DIM; k++)
			buf[(size_t)r * WIDE_DIM + k] = -(float)(r + 1);
	}
	c = srvp_client(0, SLOW_CLIENTS + 1, false, false);
	cr_assert_eq(rdps_client_push(c, 0, ids, buf, WIDE_ROWS), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	obs = srvp_client(0, 1, true, false);
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");

	for (int i = 0; i < SLOW_CLIENTS; i++) {
		s[i] = srvp_raw_connect();
		srvp_send_hello(s[i], (uint32_t)i + 1, SLOW_CLIENTS + 1, 0);
		cr_assert_eq(srvp_recv_frame(s[i], RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
		for (int k = 0; k < SLOW_PULLS; k++) {
			rdps_wire_hdr_init(&req[k].h, RDPS_REQ_PULL,
					   sizeof(req[k]) - sizeof(req[k].h), 0);
			req[k].rows = (struct rdps_wire_rows){ 0, PULL_ROWS };
			for (int j = 0; j < PULL_ROWS; j++)
				req[k].ids[j] = slow_id(i, k, j);
		}
		srvp_send_all(s[i], req, sizeof(req));
	}
	/* Wait until the server stops taking pulls (the observer, with
	 * nothing unsent, is still answered). */
	for (int i = 0; i < 300 && still < 10; i++) {
		uint64_t now;

		usleep(100000);
		st = srvp_stats_of(obs);
		now = st.requests[RDPS_REQ_PULL];
		still = now == pulls ? still + 1 : 0;
		pulls = now;
	}
	cr_assert_eq(still, 10, "the server kept taking pulls from clients that do not read");
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	cr_log_info("%d clients pipelining %d pulls of %zu bytes, not reading: %llu pulls "
		    "served, server peak RSS %ld kB, %ld kB over %ld kB before (bound %d kB)",
		    SLOW_CLIENTS, SLOW_PULLS, reply, (unsigned long long)pulls, hwm, hwm - rss0,
		    rss0, SLOW_BOUND_KB);
	cr_assert_lt(pulls, (uint64_t)SLOW_CLIENTS * SLOW_PULLS,
		     "control: the server answered every pull, no reader was slow");
	cr_assert_lt(hwm - rss0, SLOW_BOUND_KB,
		     "the server's peak RSS grew from %ld kB to %ld kB for %llu replies "
		     "its clients did not read (budget %d MB)", rss0, hwm,
		     (unsigned long long)pulls, BUDGET_MB);

	/* One by one (the others still not reading), each reads all. */
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		for (int k = 0; k < SLOW_PULLS; k++) {
			cr_assert_eq(srvp_recv_frame(s[i], RDPS_REQ_PULL | RDPS_WIRE_REPLY, buf, reply),
				     0, "client %d, pull %d", i, k);
			for (int j = 0; j < PULL_ROWS; j++) {
				float want = (float)(slow_id(i, k, j) + 1);

				for (int x = 0; x < WIDE_DIM; x++)
					if (buf[(size_t)j * WIDE_DIM + x] != want)
						cr_assert_fail("client %d, pull %d, row %d[%d]: "
							       "%g, want %g", i, k, j, x,
							       buf[(size_t)j * WIDE_DIM + x], want);
			}
		}
		close(s[i]);
	}
	st = srvp_stats_of(obs);
	cr_assert_eq(st.requests[RDPS_REQ_PULL], (uint64_t)SLOW_CLIENTS * SLOW_PULLS);
	rdps_client_destroy(obs);
	free(buf);
}

/* ---------------------------------------------------------------------- */

#define NOFILE "64"
#define IDLE 100

Test(hardening, running_out_of_descriptors_backs_off_and_recovers)
{
	static const char *const args[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    /* above the descriptor limit, to reach it */
					    "--max-connections", "1000",
					    "--handshake-timeout", "120", NULL };
	struct rdps_client *c, *late;
	int idle[IDLE], lines;
	char *log;

	srvp_start(NOFILE, false, args);
	c = srvp_client(0, 2, false, false);
	srvp_expect_served(c, 1);
	for (int i = 0; i < IDLE; i++)
		idle[i] = srvp_raw_connect();
	/* The episode (5 s): the existing client is served throughout. */
	for (int i = 0; i < 50; i++) {
		srvp_expect_served(c, 2);
		usleep(100000);
	}
	log = srvp_wait_log("Too many open files"); /* control: the limit was reached */
	lines = srvp_count_lines(log, "\n");
	cr_log_info("%d log lines while %d connections exceeded RLIMIT_NOFILE %s for 5 s",
		    lines, IDLE, NOFILE);
	cr_assert_lt(lines, 20, "%d log lines in the episode; the first ones:\n%.2000s", lines,
		     log);
	cr_assert(strstr(log, "RLIMIT_NOFILE " NOFILE), "%.2000s", log);
	free(log);

	/* Descriptors come back: a new client is accepted and served. */
	for (int i = 0; i < IDLE; i++)
		close(idle[i]);
	late = srvp_client(1, 2, false, false);
	srvp_expect_served(late, 4);
	srvp_expect_served(c, 5);
	rdps_client_destroy(late);
	rdps_client_destroy(c);
	log = srvp_wait_log("accepting connections again");
	cr_assert_lt(srvp_count_lines(log, "\n"), 20, "%.2000s", log);
	free(log);
}

/* With the default cap, derived from the descriptor limit, the server
 * refuses connections before accept() runs out of descriptors. */
Test(hardening, default_cap_follows_the_descriptor_limit)
{
	struct rdps_server_stats st;
	struct rdps_client *c;
	int idle[IDLE], lines = 0;
	long sum = 0;
	char *log = NULL;

	srvp_start(NOFILE, false, small_table);
	/* Its round trip also lets the server see the start-up probe close. */
	c = srvp_client(0, 1, false, false);
	srvp_expect_served(c, 9);
	for (int i = 0; i < IDLE; i++)
		idle[i] = srvp_raw_connect();
	/* 64 - min(64 / 4, 64) = 48 connections, c among them. */
	for (uint64_t end = rdps_now_ns() + 10000000000ull;
	     sum != IDLE - 47 && rdps_now_ns() < end;) {
		free(log);
		usleep(10000);
		log = rdps_test_slurp(srvp.log);
		sum = refused_in_log(log, &lines);
	}
	cr_assert_eq(sum, IDLE - 47, "%ld refused, want %d:\n%.2000s", sum, IDLE - 47, log);
	cr_assert(strstr(log, "at the cap of 48 open connections"), "%.2000s", log);
	cr_assert_null(strstr(log, "Too many open files"), "%.2000s", log);
	free(log);
	st = srvp_stats_of(c);
	cr_assert_eq(st.conns_refused, IDLE - 47, "conns_refused %llu",
		     (unsigned long long)st.conns_refused);
	srvp_expect_served(c, 10);
	for (int i = 0; i < IDLE; i++)
		close(idle[i]);
	rdps_client_destroy(c);
}
