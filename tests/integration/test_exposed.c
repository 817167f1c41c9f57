// SPDX-License-Identifier: MIT
// ctest-labels: faults
// ctest-timeout: 900
// needs-rdps-tool
/*
 * A server you can expose (issue 24): build/rdps server processes against
 * requests that crashed them or grew their memory past what they were
 * told to hold, as a hostile or careless client sends them:
 *
 * - table sizes that wrap (2^58 rows; an int64 row of 2^31 + 1 elements)
 *   are refused, the server keeps serving;
 * - tables are held to --max-table-memory before anything is allocated;
 * - replies to clients that do not read stay within --max-reply-buffer,
 *   and a reader is not starved for good (--reply-stall-timeout);
 * - frames being received stay within --max-request-buffer, each request
 *   kind capped on its header (an observer's are empty);
 * - without a secret, only peers on the server's machine are served
 *   (protected mode); observers from elsewhere may not stop it;
 * - non-finite gradients are refused naming table and row, and counted;
 * - names with control bytes are refused, and escaped in the log;
 * - checkpoints stream rows to disk without a copy of the shard, and the
 *   ones a killed server left behind are removed at start.
 *
 * Memory is read from /proc/PID/status (peak RSS since a reset), so each
 * bound holds whatever the machine's speed; waits are bounded generously.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps_srvproc.h"
#include "rdps_test.h"
#include "transport/wire.h"

TestSuite(exposed, .fini = srvp_stop, .timeout = 300);

static void expect_alive(void)
{
	cr_assert_eq(kill(srvp.pid, 0), 0, "the server process is gone");
}

/* Sends a table request on a raw connection of an admitted client; the
 * reply's status, its reason in why. */
static int raw_table(int s, const struct rdps_table_req *tr, char *why, size_t whylen)
{
	srvp_send_hdr(s, RDPS_REQ_TABLE, sizeof(*tr));
	srvp_send_all(s, tr, sizeof(*tr));
	memset(why, 0, whylen);
	return srvp_recv_frame(s, RDPS_REQ_TABLE | RDPS_WIRE_REPLY, why, whylen - 1);
}

/* A table of the library made and its first row set and read back. */
static void expect_tables_served(struct rdps_client *c, const char *name)
{
	struct rdps_table_spec spec = { .name = name, .num_rows = 10, .elems = 3,
					.dtype = RDPS_DTYPE_F32 };
	struct rdps_table_info info;
	float v[3] = { 1, 2, 3 }, back[3];
	uint64_t id = 4;

	cr_assert_eq(rdps_client_table_create(c, &spec, &info), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_set(c, info.id, &id, v, 1), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_get(c, info.id, &id, 1, back), 0, "%s", rdps_client_errmsg(c));
	cr_assert(back[0] == 1 && back[2] == 3);
}

/* ---------------------------------------------------------------------- */

Test(exposed, table_sizes_that_wrap_are_refused)
{
	static const char *const args[] = { NULL };
	struct rdps_table_spec huge = { .name = "huge", .num_rows = 1ull << 58, .elems = 1,
					.dtype = RDPS_DTYPE_F32 };
	struct rdps_table_spec wide = { .name = "wide", .num_rows = 10,
					.elems = (1u << 31) + 1, .dtype = RDPS_DTYPE_I64 };
	struct rdps_table_req tr = { .op = RDPS_TABLE_CREATE, .table_id = RDPS_TABLE_ANY_ID,
				     .name = "wide", .num_rows = 10, .elems = (1u << 31) + 1,
				     .dtype = RDPS_DTYPE_I64, .init = RDPS_INIT_ZEROS,
				     .optimizer = RDPS_OPT_NONE };
	struct rdps_table_info info;
	struct rdps_client *c;
	char why[512];
	int s, ret;

	srvp_start(NULL, false, args);
	c = srvp_client(0, 2, false, false);
	/* 2^58 rows of 64-byte strides: 2^64 bytes, 0 once wrapped. */
	ret = rdps_client_table_create(c, &huge, &info);
	cr_assert_lt(ret, 0, "a table of 2^58 rows was made");
	cr_assert(strstr(rdps_client_errmsg(c), "do not fit in 64-bit sizes"), "%s",
		  rdps_client_errmsg(c));
	expect_alive();
	/* An int64 row of 2^31 + 1 elements is 2^32 + 2 words, not 2: the
	 * client refuses it, and so does the server when sent raw. */
	cr_assert_eq(rdps_client_table_create(c, &wide, &info), -EINVAL);
	s = srvp_raw_connect();
	srvp_send_hello(s, 1, 2, 0);
	cr_assert_eq(srvp_recv_frame(s, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
	ret = raw_table(s, &tr, why, sizeof(why));
	cr_assert_eq(ret, -EINVAL, "the server made an int64 table of 2^31 + 1 elements a row "
		     "(%d: %s)", ret, why);
	cr_assert(strstr(why, "this is 4294967298"), "%s", why);
	close(s);
	expect_alive();
	expect_tables_served(c, "small");
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

Test(exposed, tables_are_held_to_the_table_budget)
{
	static const char *const args[] = { "--max-table-memory", "64", NULL };
	/* 1.5 GiB of rows in one 96-byte request */
	struct rdps_table_spec big = { .name = "big", .num_rows = 6000, .elems = 65536,
				       .dtype = RDPS_DTYPE_F32 };
	struct rdps_optimizer_spec adam = { .optimizer = RDPS_OPT_ADAM, .lr = 0.01f };
	struct rdps_table_info info, t0;
	struct rdps_client *c;
	char name[32];
	long rss0, hwm;
	int made = 0, ret;

	srvp_start(NULL, false, args);
	c = srvp_client(0, 1, false, false);
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");
	ret = rdps_client_table_create(c, &big, &info);
	cr_assert_eq(ret, -ENOSPC, "a 1.5 GiB table on a 64 MiB budget: %d (%s)", ret,
		     rdps_client_errmsg(c));
	cr_assert(strstr(rdps_client_errmsg(c), "--max-table-memory") &&
		  strstr(rdps_client_errmsg(c), "64.0 MiB"), "%s", rdps_client_errmsg(c));
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	cr_assert_lt(hwm - rss0, 16 * 1024, "refusing it took %ld kB", hwm - rss0);
	/* 4 MiB tables until the budget is spent: the last one is refused. */
	for (;;) {
		struct rdps_table_spec t = { .name = name, .num_rows = 1024, .elems = 1024,
					     .dtype = RDPS_DTYPE_F32 };

		snprintf(name, sizeof(name), "t%d", made);
		ret = rdps_client_table_create(c, &t, made ? &info : &t0);
		if (ret)
			break;
		cr_assert_lt(++made, 64);
	}
	cr_assert_eq(ret, -ENOSPC, "%s", rdps_client_errmsg(c));
	/* Each takes 6 MiB: 4.1 MiB of rows, rounded to 2 MiB huge pages. */
	cr_assert(made >= 8 && made <= 15, "%d tables of 4 MiB on a 64 MiB budget", made);
	cr_log_info("%d tables of 4 MiB fit the 64 MiB budget; the next: %s", made,
		    rdps_client_errmsg(c));
	/* Adam's state is twice the rows: refused while the budget is spent. */
	cr_assert_eq(rdps_client_table_set_optimizer(c, t0.id, &adam), -ENOSPC);
	cr_assert(strstr(rdps_client_errmsg(c), "optimizer adam"), "%s", rdps_client_errmsg(c));
	/* Dropped tables give their bytes back. */
	for (int i = 1; i <= 4; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		cr_assert_eq(rdps_client_table_drop(c, name), 0, "%s", rdps_client_errmsg(c));
	}
	cr_assert_eq(rdps_client_table_set_optimizer(c, t0.id, &adam), 0, "%s",
		     rdps_client_errmsg(c));
	expect_alive();
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

#define WIDE_ROWS 2048
#define WIDE_DIM 4096            /* 16 KiB rows: a pull of all is 32 MiB */
#define NOT_READING 16
#define SLACK_KB (24 * 1024)     /* the server's own growth besides the budget */

static void pull_all(int s)
{
	static struct {
		struct rdps_wire_hdr h;
		struct rdps_wire_rows rows;
		uint64_t ids[WIDE_ROWS];
	} req;

	rdps_wire_hdr_init(&req.h, RDPS_REQ_PULL, sizeof(req) - sizeof(req.h), 0);
	req.rows = (struct rdps_wire_rows){ 0, WIDE_ROWS };
	for (int j = 0; j < WIDE_ROWS; j++)
		req.ids[j] = (uint64_t)j;
	srvp_send_all(s, &req, sizeof(req));
}

/* Pulls taken by the server, once they stop growing (10 stats, 100 ms
 * apart, all the same; up to 60 s). */
static uint64_t pulls_settled(struct rdps_client *obs)
{
	uint64_t pulls = UINT64_MAX;
	int still = 0;

	for (int i = 0; i < 600 && still < 10; i++) {
		uint64_t now = srvp_stats_of(obs).requests[RDPS_REQ_PULL];

		still = now == pulls ? still + 1 : 0;
		pulls = now;
		usleep(100000);
	}
	cr_assert_eq(still, 10, "the server kept taking pulls for a minute");
	return pulls;
}

Test(exposed, replies_to_clients_that_do_not_read_stay_within_the_budget)
{
	static const char *const args[] = { "--table", "wide:2048:4096", "--optimizer", "sgd",
					    "--init", "zeros", "--max-reply-buffer", "32", NULL };
	struct rdps_client *obs, *c;
	int s[NOT_READING];
	uint64_t pulls, ids[4] = { 0, 1, 2047, 5 };
	long rss0, hwm;
	float *rows;

	srvp_start(NULL, false, args);
	obs = srvp_client(0, 1, true, false);
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");
	for (int i = 0; i < NOT_READING; i++) {
		s[i] = srvp_raw_connect();
		srvp_send_hello(s[i], (uint32_t)i + 1, NOT_READING + 1, 0);
		cr_assert_eq(srvp_recv_frame(s[i], RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
		pull_all(s[i]); /* a 32 MiB reply each, never read */
	}
	pulls = pulls_settled(obs);
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	cr_log_info("%d clients asking 32 MiB each, not reading: %llu taken, peak RSS %ld kB "
		    "over %ld kB", NOT_READING, (unsigned long long)pulls, hwm - rss0, rss0);
	cr_assert_lt(hwm - rss0, 32 * 1024 + SLACK_KB,
		     "the server's peak RSS grew by %ld kB for %llu replies of 32 MiB no client "
		     "reads (budget 32 MiB)", hwm - rss0, (unsigned long long)pulls);
	cr_assert_lt(pulls, NOT_READING, "control: every pull was taken");
	for (int i = 0; i < NOT_READING; i++)
		close(s[i]);
	/* Gone, they give the budget back: a client that reads is served. */
	c = srvp_client(0, 1, false, false);
	rows = calloc(4, WIDE_DIM * sizeof(float));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 4, rows), 0, "%s", rdps_client_errmsg(c));
	free(rows);
	rdps_client_destroy(c);
	rdps_client_destroy(obs);
}

Test(exposed, a_client_left_behind_by_one_that_does_not_read_is_served_after_the_stall_timeout)
{
	static const char *const args[] = { "--table", "wide:2048:4096", "--optimizer", "sgd",
					    "--init", "zeros", "--max-reply-buffer", "32",
					    "--reply-stall-timeout", "3", NULL };
	uint64_t ids[WIDE_ROWS];
	struct rdps_client *c;
	char *log;
	float *rows;
	int hog;

	srvp_start(NULL, false, args);
	hog = srvp_raw_connect();
	srvp_send_hello(hog, 1, 2, 0);
	cr_assert_eq(srvp_recv_frame(hog, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
	pull_all(hog);
	/* The hog holds the whole budget: this pull waits for it. */
	c = srvp_client(0, 2, false, false);
	rows = malloc((size_t)WIDE_ROWS * WIDE_DIM * sizeof(float));
	for (int j = 0; j < WIDE_ROWS; j++)
		ids[j] = (uint64_t)j;
	cr_assert_eq(rdps_client_pull(c, 0, ids, WIDE_ROWS, rows), 0, "%s",
		     rdps_client_errmsg(c));
	log = srvp_wait_log("unread for");
	/* Control: the reader did wait for the hog's budget. */
	cr_assert(strstr(log, "waits: its next reply needs"), "the reader never waited:\n%s", log);
	cr_assert(strstr(log, "--max-reply-buffer"), "%s", log);
	free(log);
	/* Closed: what the kernel had of its reply comes, then the end. */
	{
		static char sink[1 << 16];
		ssize_t n;

		while ((n = recv(hog, sink, sizeof(sink), 0)) > 0)
			;
		cr_assert(n == 0 || errno == ECONNRESET, "the hog's connection is open (%s)",
			  n < 0 ? strerror(errno) : "");
	}
	close(hog);
	free(rows);
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

#define SENDERS 16
#define ANNOUNCED (64u << 20)     /* a push frame of this much payload ... */
#define SENT (60u << 20)          /* ... of which this much is sent */

Test(exposed, frames_being_received_stay_within_the_request_budget)
{
	static const char *const args[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					    "--lr", "1", "--init", "zeros",
					    "--max-request-buffer", "64", NULL };
	char *chunk = calloc(1, MiB), why[512];
	size_t sent[SENDERS] = { 0 }, total = 0;
	struct rdps_client *c;
	int s[SENDERS], obs;
	long rss0, hwm;

	srvp_start(NULL, false, args);
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");
	for (int i = 0; i < SENDERS; i++) {
		struct rdps_wire_rows rows = { 0, 1 };

		s[i] = srvp_raw_connect();
		srvp_send_hello(s[i], (uint32_t)i + 1, SENDERS + 1, 0);
		cr_assert_eq(srvp_recv_frame(s[i], RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
		srvp_send_hdr(s[i], RDPS_REQ_PUSH, ANNOUNCED);
		srvp_send_all(s[i], &rows, sizeof(rows));
		fcntl(s[i], F_SETFL, fcntl(s[i], F_GETFL) | O_NONBLOCK);
	}
	/* Every sender sends what the server takes, until none could send
	 * for 2 s (the server stopped reading) or all sent SENT. */
	for (uint64_t idle_since = rdps_now_ns(); rdps_now_ns() - idle_since < 2000000000ull;) {
		bool moved = false, left = false;

		for (int i = 0; i < SENDERS; i++) {
			ssize_t n;

			if (sent[i] >= SENT)
				continue;
			left = true;
			n = send(s[i], chunk, SENT - sent[i] < MiB ? SENT - sent[i] : MiB,
				 MSG_NOSIGNAL);
			if (n > 0) {
				sent[i] += (size_t)n;
				total += (size_t)n;
				moved = true;
			}
		}
		if (!left)
			break;
		if (moved)
			idle_since = rdps_now_ns();
		else
			usleep(10000);
	}
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	cr_log_info("%d clients sent %zu MiB of 64 MiB frames: the server's peak RSS grew by "
		    "%ld kB", SENDERS, total >> 20, hwm - rss0);
	cr_assert_gt(total, 96 * MiB, "control: the senders sent %zu MiB only", total >> 20);
	cr_assert_lt(hwm - rss0, 64 * 1024 + SLACK_KB,
		     "the server's peak RSS grew by %ld kB for %zu MiB of frames not complete "
		     "(budget 64 MiB)", hwm - rss0, total >> 20);
	/* An observer's requests are empty: a 1 MiB stats frame is refused
	 * on its header, its payload skipped, the connection kept. */
	obs = srvp_raw_connect();
	srvp_send_hello(obs, 0, 1, RDPS_HELLO_OBSERVER);
	cr_assert_eq(srvp_recv_frame(obs, RDPS_REQ_HELLO | RDPS_WIRE_REPLY, NULL, 0), 0);
	srvp_send_hdr(obs, RDPS_REQ_STATS, MiB);
	cr_assert_eq(srvp_recv_frame(obs, RDPS_REQ_STATS | RDPS_WIRE_REPLY, why, sizeof(why) - 1),
		     -EMSGSIZE);
	cr_assert(strstr(why, "from an observer; at most 0"), "%s", why);
	srvp_send_all(obs, chunk, MiB);
	srvp_send_hdr(obs, RDPS_REQ_STATS, 0);
	cr_assert_eq(srvp_recv_frame(obs, RDPS_REQ_STATS | RDPS_WIRE_REPLY, NULL, 0), 0);
	close(obs);
	for (int i = 0; i < SENDERS; i++)
		close(s[i]);
	c = srvp_client(0, SENDERS + 1, false, false);
	srvp_expect_served(c, 3);
	rdps_client_destroy(c);
	free(chunk);
}

/* ---------------------------------------------------------------------- */

/* This test's own network namespace, with a veth pair whose one end is at
 * addr (the kernel may lack the dummy driver): a peer there is not on the
 * loopback. */
static void own_network(const char *addr)
{
	char cmd[256];

	if (unshare(CLONE_NEWNET))
		cr_skip_test("no network namespace of its own (unshare: %s): needs root",
			     strerror(errno));
	snprintf(cmd, sizeof(cmd), "ip link set lo up && ip link add rdps0 type veth peer name "
		 "rdps1 && ip addr add %s/24 dev rdps0 && ip link set rdps0 up && "
		 "ip link set rdps1 up", addr);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(exposed, without_a_secret_only_this_machine_is_served)
{
	static const char *const plain[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					     "--lr", "1", "--init", "zeros", NULL };
	const char *open_args[] = { "--table", "entity:100:4", "--optimizer", "sgd", "--lr", "1",
				    "--init", "zeros", "--allow-unauthenticated",
				    "--checkpoint-dir", NULL, NULL };
	struct rdps_client *c, *obs;
	char err[640], *log, *ckdir;
	int ret;

	own_network("10.77.0.1");
	snprintf(srvp.host, sizeof(srvp.host), "10.77.0.1");
	srvp_start(NULL, false, plain);
	free(srvp_wait_log("protected mode"));
	ret = srvp_make_client(0, 1, false, false, &c, err, sizeof(err));
	cr_assert_eq(ret, -EACCES, "a client from 10.77.0.1 was served without a secret (%d: %s)",
		     ret, err);
	cr_assert(strstr(err, "protected mode") && strstr(err, "--allow-unauthenticated"), "%s",
		  err);
	log = srvp_wait_log("hello request refused");
	free(log);
	srvp_stop();

	/* The operator's choice: others too, but observers from elsewhere may
	 * not stop the server or make it write. */
	snprintf(srvp.host, sizeof(srvp.host), "10.77.0.1");
	ckdir = rdps_test_tmpdir("exposed-ckpt");
	open_args[10] = ckdir;
	srvp_start(NULL, false, open_args);
	c = srvp_client(0, 1, false, false);
	srvp_expect_served(c, 1);
	obs = srvp_client(0, 1, true, false);
	srvp_stats_of(obs);
	cr_assert_eq(rdps_client_shutdown_servers(obs), -EACCES, "%s", rdps_client_errmsg(obs));
	cr_assert(strstr(rdps_client_errmsg(obs), "on its machine"), "%s", rdps_client_errmsg(obs));
	cr_assert_eq(rdps_client_checkpoint(obs), -EACCES, "%s", rdps_client_errmsg(obs));
	/* The job's own client may (the end of a job stops its servers). */
	cr_assert_eq(rdps_client_checkpoint(c), 0, "%s", rdps_client_errmsg(c));
	expect_alive();
	rdps_client_destroy(obs);
	rdps_client_destroy(c);
	srvp_stop();
	rdps_test_rmtree(ckdir);
	free(ckdir);

	/* With a secret: whoever proves it, from anywhere, an observer too. */
	snprintf(srvp.host, sizeof(srvp.host), "10.77.0.1");
	srvp_start(NULL, true, plain);
	c = srvp_client(0, 1, false, true);
	srvp_expect_served(c, 2);
	rdps_client_destroy(c);
	obs = srvp_client(0, 1, true, true);
	cr_assert_eq(rdps_client_shutdown_servers(obs), 0, "%s", rdps_client_errmsg(obs));
	rdps_client_destroy(obs);
}

/* ---------------------------------------------------------------------- */

Test(exposed, non_finite_gradients_are_refused_naming_table_and_row)
{
	static const char *const refuse[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					      "--lr", "1", "--init", "zeros", NULL };
	static const char *const accept[] = { "--table", "entity:100:4", "--optimizer", "sgd",
					      "--lr", "1", "--init", "zeros", "--nonfinite",
					      "accept", NULL };
	uint64_t ids[2] = { 9, 7 };
	float g[8] = { 1, 1, 1, 1, 0, 0, NAN, 0 }, rows[8];
	struct rdps_server_stats st;
	struct rdps_client *c;
	int ret;

	srvp_start(NULL, false, refuse);
	c = srvp_client(0, 1, false, false);
	ret = rdps_client_push(c, 0, ids, g, 2);
	if (!ret)
		ret = rdps_client_flush(c);
	cr_assert_eq(ret, -EDOM, "a push with a NaN: %d (%s)", ret, rdps_client_errmsg(c));
	cr_assert(strstr(rdps_client_errmsg(c), "table 'entity'") &&
		  strstr(rdps_client_errmsg(c), "row 7") &&
		  strstr(rdps_client_errmsg(c), "NaN"), "%s", rdps_client_errmsg(c));
	/* The whole push was refused: row 9 (finite) unchanged too. */
	cr_assert_eq(rdps_client_pull(c, 0, ids, 2, rows), 0, "%s", rdps_client_errmsg(c));
	for (int k = 0; k < 8; k++)
		cr_assert(rows[k] == 0.0f, "row %llu[%d] = %g after a refused push",
			  (unsigned long long)ids[k / 4], k % 4, rows[k]);
	st = srvp_stats_of(c);
	cr_assert_eq(st.nonfinite_rows[0], 1);
	cr_assert_eq(st.nonfinite_pushes, 1);
	/* Finite pushes go on. */
	g[6] = 2;
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 2), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
	{
		char *argv[] = { RDPS_BIN, "stats", "--ip_config", srvp.ipc, NULL }, *out, path[4200];
		int status;

		snprintf(path, sizeof(path), "%s/stats.out", srvp.dir);
		cr_assert_eq(rdps_test_wait(rdps_test_spawn(argv, path), 60000, &status), 0);
		out = rdps_test_slurp(path);
		cr_assert(out && strstr(out, "table 'entity': 1 gradient row(s) with a NaN or an "
					"infinity pushed"), "%s", out ? out : "");
		free(out);
	}
	srvp_stop();

	srvp_start(NULL, false, accept);
	c = srvp_client(0, 1, false, false);
	g[6] = INFINITY;
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 2), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 2, rows), 0, "%s", rdps_client_errmsg(c));
	cr_assert(isinf(rows[6]), "--nonfinite accept: row 7 is %g", rows[6]);
	st = srvp_stats_of(c);
	cr_assert_eq(st.nonfinite_rows[0], 1);
	cr_assert_eq(st.nonfinite_pushes, 0);
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

Test(exposed, names_with_control_bytes_are_refused_and_escaped_in_the_log)
{
	static const char *const args[] = { NULL };
	struct rdps_table_spec bad = { .name = "bad\x1b[31mname", .num_rows = 4, .elems = 1,
				       .dtype = RDPS_DTYPE_F32 };
	struct rdps_table_info info;
	struct rdps_client *c;
	char *log;

	srvp_start(NULL, false, args);
	c = srvp_client(0, 1, false, false);
	cr_assert_eq(rdps_client_table_create(c, &bad, &info), -EINVAL);
	cr_assert(strstr(rdps_client_errmsg(c), "control byte (0x1b) at offset 3"), "%s",
		  rdps_client_errmsg(c));
	/* An unknown name with a forged log line in it. */
	cr_assert_eq(rdps_client_table(c, "x\nrdps[1] error: forged", &info), -ENOENT);
	log = srvp_wait_log("forged");
	cr_assert(strstr(log, "x\\x0ardps[1] error: forged"), "not escaped:\n%s", log);
	cr_assert(!strstr(log, "\nrdps[1] error: forged"), "a forged line in the log:\n%s", log);
	cr_assert(!strchr(log, '\x1b'), "an escape byte in the log:\n%s", log);
	free(log);
	rdps_client_destroy(c);
}

/* ---------------------------------------------------------------------- */

Test(exposed, checkpoints_stream_rows_without_a_copy_of_the_shard)
{
	const char *base[] = { "--table", "entity:50000:512", "--optimizer", "adagrad", "--lr",
			       "0.1", "--checkpoint-dir", NULL, NULL };
	struct rdps_client *c;
	long rss0, hwm;
	char *dir = rdps_test_tmpdir("exposed-ckpt");
	uint64_t id = 4321;
	float g[512], before[512], after[512];

	base[7] = dir;
	srvp_start(NULL, false, base);
	c = srvp_client(0, 1, false, false);
	for (int k = 0; k < 512; k++)
		g[k] = (float)k / 512.0f;
	cr_assert_eq(rdps_client_push(c, 0, &id, g, 1), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_flush(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, before), 0, "%s", rdps_client_errmsg(c));
	srvp_reset_peak(srvp.pid);
	rss0 = srvp_proc_kb(srvp.pid, "VmRSS:");
	cr_assert_eq(rdps_client_checkpoint(c), 0, "%s", rdps_client_errmsg(c));
	hwm = srvp_proc_kb(srvp.pid, "VmHWM:");
	/* 50000 rows of 512 floats and as much Adagrad state: ~200 MB that a
	 * copy-out would have needed once more (and the blob writer again). */
	cr_log_info("a checkpoint of ~200 MB of rows and state: peak RSS grew by %ld kB",
		    hwm - rss0);
	cr_assert_lt(hwm - rss0, 48 * 1024, "writing a checkpoint of ~200 MB grew the server's "
		     "peak RSS by %ld kB", hwm - rss0);
	rdps_client_destroy(c);
	srvp_stop();
	/* It restores: the row pushed is there. */
	base[6] = "--resume";
	srvp_start(NULL, false, base);
	c = srvp_client(0, 1, false, false);
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, after), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(memcmp(before, after, sizeof(before)), 0, "the restored row differs");
	rdps_client_destroy(c);
	srvp_stop();
	rdps_test_rmtree(dir);
	free(dir);
}

Test(exposed, checkpoints_a_killed_server_left_are_removed_at_start)
{
	const char *args[] = { "--table", "entity:100:4", "--checkpoint-dir", NULL, NULL };
	char *dir = rdps_test_tmpdir("exposed-stale"), path[4200], *log;
	pid_t gone = fork();
	struct stat st;

	if (!gone)
		_exit(0);
	cr_assert_eq(waitpid(gone, NULL, 0), gone);
	/* One of a process that is gone, one of a process that runs (this). */
	snprintf(path, sizeof(path), "%s/server-0/ckpt-5.tmp-%d", dir, (int)gone);
	{
		char cmd[4400];

		snprintf(cmd, sizeof(cmd), "mkdir -p %s/server-0/ckpt-5.tmp-%d "
			 "%s/server-0/ckpt-6.tmp-%d && echo x > %s/server-0/ckpt-5.tmp-%d/entity.rows",
			 dir, (int)gone, dir, (int)getpid(), dir, (int)gone);
		cr_assert_eq(system(cmd), 0, "%s", cmd);
	}
	args[3] = dir;
	srvp_start(NULL, false, args);
	log = srvp_wait_log("that did not finish");
	cr_assert(strstr(log, "ckpt-5.tmp-"), "%s", log);
	free(log);
	free(srvp_wait_log("which still runs"));
	cr_assert_neq(stat(path, &st), 0, "%s is still there", path);
	snprintf(path, sizeof(path), "%s/server-0/ckpt-6.tmp-%d", dir, (int)getpid());
	cr_assert_eq(stat(path, &st), 0, "%s (of a process that runs) was removed", path);
	srvp_stop();
	rdps_test_rmtree(dir);
	free(dir);
}
