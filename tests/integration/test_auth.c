// SPDX-License-Identifier: MIT
// ctest-labels: faults
// needs-rdps-tool
/*
 * Shared-secret authentication: a client with the wrong secret (or none)
 * gets no row, no table range and no rkey; both sides say why; a client
 * with a secret refuses a server that cannot prove it; the right secret
 * works. Over the network (a server process: the first of
 * RDPS_TEST_TRANSPORTS, tcp by default, ofi in integration/test_auth/ofi)
 * and in-process.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
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
#include "rdps/server.h"
#include "ofi_env.h"
#include "rdps_test.h"
#include "transport/wire.h"

#define SECRET "correct horse battery staple 42"

static char *dir, *ipc, *logpath, *secret_path;
static int port;
static pid_t server;
static char tbuf[16];
static const char *transport = "tcp";

static void start(const char *secret_file)
{
	char text[64];
	char *argv[16] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", "0",
			   "--transport", NULL, "--table", "entity:100:4", NULL };

	transport = rdps_test_net_transport(tbuf, sizeof(tbuf));
	if (!transport)
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	argv[7] = (char *)transport;

	port = rdps_test_free_ports(1);
	dir = rdps_test_tmpdir("auth");
	snprintf(text, sizeof(text), "127.0.0.1 %d\n", port);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	secret_path = rdps_test_write(dir, "secret", SECRET "\n");
	argv[3] = ipc;
	if (secret_file) {
		argv[10] = "--secret-file";
		argv[11] = secret_path;
	}
	cr_assert(asprintf(&logpath, "%s/server.log", dir) > 0);
	unsetenv("RDPS_SECRET");
	server = rdps_test_spawn(argv, logpath);
	/* Ready first, with a bound a loaded machine meets; then the answer. */
	cr_assert_eq(rdps_test_wait_port("127.0.0.1", port, 60000), 0, "server did not listen");
}

static void start_with_secret(void)
{
	start("yes");
}

static void start_without_secret(void)
{
	start(NULL);
}

static void stop(void)
{
	int st;

	kill(server, SIGTERM);
	rdps_test_wait(server, 30000, &st);
	rdps_test_rmtree(dir);
	free(ipc);
	free(logpath);
	free(secret_path);
	free(dir);
}

static int try_client(const char *secret, char *err, size_t errlen, struct rdps_client **out)
{
	struct rdps_secret s = { .len = secret ? strlen(secret) : 0 };
	struct rdps_client_params p = { .ip_config = ipc, .transport = transport, .client_id = 0,
					.num_clients = 1, .timeout_ms = 60000, .quiet = true,
					.secret = &s };

	if (secret)
		memcpy(s.key, secret, s.len);
	return rdps_client_create(&p, out, err, errlen);
}

static char *server_log(const char *needle)
{
	char *log = NULL;

	for (int i = 0; i < 200; i++) {
		free(log);
		log = rdps_test_slurp(logpath);
		if (log && strstr(log, needle))
			break;
		usleep(10000);
	}
	return log;
}

TestSuite(auth, .timeout = 240);

Test(auth, right_secret_works, .init = start_with_secret, .fini = stop)
{
	struct rdps_client *c;
	char err[640];
	uint64_t id = 5;
	float row[4];

	cr_assert_eq(try_client(SECRET, err, sizeof(err), &c), 0, "%s", err);
	cr_assert_eq(rdps_client_pull(c, 0, &id, 1, row), 0, "%s", rdps_client_errmsg(c));
	rdps_client_destroy(c);
}

Test(auth, wrong_secret_is_refused_on_both_sides, .init = start_with_secret, .fini = stop)
{
	struct rdps_client *c = NULL;
	struct rdps_server_stats st;
	char err[640], *log;

	cr_assert_eq(try_client("not the secret", err, sizeof(err), &c), -EACCES);
	cr_assert_null(c);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
	log = server_log("authentication failed");
	cr_assert(log && strstr(log, "authentication failed") && strstr(log, "client 127.0.0.1:"),
		  "server log: %s", log);
	free(log);
	/* The refusal is counted (an observer with the right secret asks). */
	{
		struct rdps_secret s = { .len = strlen(SECRET) };
		struct rdps_client_params p = { .ip_config = ipc, .transport = transport,
						.num_clients = 1, .timeout_ms = 5000, .quiet = true,
						.observer = true, .secret = &s };

		memcpy(s.key, SECRET, s.len);
		cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(rdps_client_server_stats(c, 0, &st), 0);
		cr_assert_eq(st.auth_failures, 1);
		rdps_client_destroy(c);
	}
}

static void *resume_later(void *arg)
{
	sleep(6);
	kill(*(pid_t *)arg, SIGCONT);
	return NULL;
}

Test(auth, no_secret_is_refused, .init = start_with_secret, .fini = stop)
{
	struct rdps_client *c = NULL;
	pthread_t th;
	char err[640];
	int ret;

	/* A server slowed down as on a loaded machine (stopped for 6 s, more
	 * than a 5 s wait): the answer is still the refusal, not a timeout. */
	cr_assert_eq(kill(server, SIGSTOP), 0);
	cr_assert_eq(pthread_create(&th, NULL, resume_later, &server), 0);
	ret = try_client(NULL, err, sizeof(err), &c);
	pthread_join(th, NULL);
	cr_assert_eq(ret, -EACCES, "%d: %s", ret, err);
	cr_assert(strstr(err, "requires a shared secret") && strstr(err, "RDPS_SECRET"), "%s", err);
}

Test(auth, client_with_secret_refuses_an_unauthenticated_server, .init = start_without_secret,
     .fini = stop)
{
	struct rdps_client *c = NULL;
	char err[640];

	cr_assert_eq(try_client(SECRET, err, sizeof(err), &c), -EACCES);
	cr_assert(strstr(err, "does not authenticate clients"), "%s", err);
}

/* On the wire: before a valid proof the server sends a nonce and then an
 * error, nothing else: no welcome, no table range, no rkey. */
Test(auth, nothing_leaves_before_the_proof, .init = start_with_secret, .fini = stop)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 30 };
	struct rdps_wire_hello hello = { .client_id = 0, .num_clients = 1, .server_id = 0 };
	struct {
		struct rdps_wire_hdr h;
		uint8_t mac[RDPS_MAC_LEN];
	} auth;
	struct rdps_wire_hdr h;
	uint8_t got[4096];
	size_t total = 0;
	ssize_t n;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	rdps_wire_hdr_init(&h, RDPS_REQ_HELLO, sizeof(hello), 0);
	cr_assert_eq(send(s, &h, sizeof(h), 0), sizeof(h));
	cr_assert_eq(send(s, &hello, sizeof(hello), 0), sizeof(hello));
	rdps_wire_hdr_init(&auth.h, RDPS_WIRE_AUTH, RDPS_MAC_LEN, 0);
	memset(auth.mac, 0x5a, sizeof(auth.mac));
	cr_assert_eq(send(s, &auth, sizeof(auth), 0), sizeof(auth));
	while ((n = recv(s, got + total, sizeof(got) - total, 0)) > 0)
		total += (size_t)n;
	close(s);
	/* A challenge frame (header + nonce), then one error frame. */
	cr_assert_geq(total, 2 * sizeof(h) + RDPS_NONCE_LEN);
	memcpy(&h, got, sizeof(h));
	cr_assert_eq(h.type, RDPS_WIRE_CHALLENGE);
	cr_assert_eq(h.len, RDPS_NONCE_LEN);
	memcpy(&h, got + sizeof(h) + RDPS_NONCE_LEN, sizeof(h));
	cr_assert_eq(h.type, RDPS_REQ_HELLO | RDPS_WIRE_REPLY);
	cr_assert_eq(h.status, -EACCES);
	cr_assert_eq(total, 2 * sizeof(h) + RDPS_NONCE_LEN + h.len, "extra bytes followed the refusal");
	cr_assert_null(memmem(got, total, "entity", 6), "a table name leaked");
}

Test(auth_inproc, secrets_checked_in_process)
{
	struct rdps_ipconfig ic;
	struct rdps_secret good = { .len = 8 }, bad = { .len = 8 };
	struct rdps_server_config cfg = { .transport = "inproc", .ipc = &ic, .num_tables = 1,
					  .secret = &good };
	struct rdps_client_params p = { .servers = &ic, .transport = "inproc", .num_clients = 1,
					.timeout_ms = 30000, .quiet = true };
	struct rdps_server *srv;
	struct rdps_client *c = NULL;
	char err[640];

	memcpy(good.key, "12345678", 8);
	memcpy(bad.key, "12345679", 8);
	cr_assert_eq(rdps_ipconfig_parse("t", "auth-inproc 1", &ic, err, sizeof(err)), 0);
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = 10,
							   .dim = 4, .lr = 0.1f };
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	p.secret = &bad;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
	p.secret = NULL;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), -EACCES);
	p.secret = &good;
	cr_assert_eq(rdps_client_create(&p, &c, err, sizeof(err)), 0, "%s", err);
	rdps_client_destroy(c);
	rdps_server_destroy(srv);
	rdps_ipconfig_free(&ic);
}
