// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * rdps doctor on this host: one line per check, a fix on every failure and
 * warning, exit 1 on a failure. Without RDMA hardware it says so and
 * suggests soft-RoCE; --transport ofi without an EFA device or a libfabric
 * provider named fails with what to do, and with one names it; a local
 * ip_config port in use fails the ports check; a remote ip_config machine
 * gets a peers line.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/common.h"
#include "rdps_test.h"

static char *dir;

static void setup(void)
{
	dir = rdps_test_tmpdir("doctor");
	cr_assert(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(doctor, .init = setup, .fini = teardown, .timeout = 60);

/* Runs rdps doctor with args; returns its output, *code its exit status. */
static char *doctor(char *const extra[], int *code)
{
	char *argv[16] = { RDPS_BIN, "doctor" }, log[512];
	int n = 2, st;
	pid_t pid;

	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s/doctor-%d.log", dir, (int)(rdps_now_ns() % 1000000));
	pid = rdps_test_spawn(argv, log);
	cr_assert_eq(rdps_test_wait(pid, 30000, &st), 0, "rdps doctor did not finish in 30 s");
	cr_assert(WIFEXITED(st));
	*code = WEXITSTATUS(st);
	return rdps_test_slurp(log);
}

/* Every WARN/FAIL line carries a fix. */
static void expect_fixes(const char *out)
{
	for (const char *l = out; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (!strncmp(l, "WARN", 4) || !strncmp(l, "FAIL", 4))
			cr_expect(memmem(l, len, "fix: ", 5), "no fix on: %.*s", (int)len, l);
		l = nl ? nl + 1 : NULL;
	}
}

Test(doctor, checks_this_host)
{
	char *none[] = { NULL }, *out;
	int code;

	out = doctor(none, &code);
	cr_log_info("\n%s", out);
	for (const char *c = "rdma\0efa\0ofi\0memlock\0hugepages\0io_uring\0ports\0peers\0clock\0"; *c;
	     c += strlen(c) + 1) {
		char want[32];

		snprintf(want, sizeof(want), " %-10s ", c);
		cr_expect(strstr(out, want), "no '%s' line:\n%s", c, out);
	}
	if (access("/sys/class/infiniband", F_OK) != 0) {
		cr_expect(strstr(out, "WARN rdma       no RDMA device"), "%s", out);
		cr_expect(strstr(out, "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev"), "%s", out);
		cr_expect(strstr(out, "skip port"), "%s", out);
	}
	expect_fixes(out);
	cr_expect(strstr(out, "failure(s)") && strstr(out, "warning(s)"), "%s", out);
	free(out);
}

Test(doctor, verbs_without_a_device_fails)
{
	char *args[] = { "--transport", "verbs", NULL }, *out;
	int code;

	if (access("/sys/class/infiniband", F_OK) == 0)
		cr_skip_test("this host has RDMA devices");
	out = doctor(args, &code);
	cr_expect_eq(code, 1, "%s", out);
	cr_expect(strstr(out, "FAIL rdma       no RDMA device"), "%s", out);
	free(out);
}

/* An EFA device, or else a provider named: without either, --transport ofi
 * fails and says what to do. */
static bool have_efa(void)
{
	char *out;
	int code;
	bool efa;

	out = doctor((char *[]){ NULL }, &code);
	efa = !strstr(out, "skip efa        no EFA device");
	free(out);
	return efa;
}

Test(doctor, ofi_without_efa_or_a_provider_fails)
{
	char *args[] = { "--transport", "ofi", NULL }, *out;
	int code;

	unsetenv("FI_PROVIDER");
	unsetenv("RDPS_OFI_PROVIDER");
	if (have_efa())
		cr_skip_test("this host has an EFA device");
	out = doctor(args, &code);
	cr_expect_eq(code, 1, "%s", out);
	cr_expect(strstr(out, "FAIL efa        no EFA device"), "%s", out);
	cr_expect(strstr(out, "FAIL ofi        libfabric") && strstr(out, "--ofi-provider NAME"),
		  "%s", out);
	cr_expect(!strstr(out, "jobs use TCP"), "%s", out);
	expect_fixes(out);
	free(out);
}

/* With a provider named: which one the transport takes, and how it pulls. */
Test(doctor, ofi_names_the_provider_it_takes)
{
	char *args[] = { "--transport", "ofi", "--ofi-provider", "tcp;ofi_rxm", NULL }, *out;
	int code;

	unsetenv("FI_PROVIDER");
	out = doctor(args, &code);
	if (strstr(out, "FAIL ofi"))
		cr_skip_test("libfabric has no tcp;ofi_rxm provider here:\n%s", out);
	cr_expect(strstr(out, "ok   ofi") && strstr(out, "takes tcp;ofi_rxm: one-sided pulls"),
		  "%s", out);
	cr_expect(!strstr(out, "FAIL efa"), "%s", out);
	expect_fixes(out);
	free(out);
}

Test(doctor, port_in_use_fails_and_peers_are_probed)
{
	int port = rdps_test_free_ports(2), code;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	char text[128], *ipc, *out, want[128];
	/* 192.0.2.0/24 (TEST-NET-1) is never routed: the peer cannot answer. */
	char *args[] = { "--ip_config", NULL, "--timeout", "0.5", NULL };

	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s, 1), 0);
	snprintf(text, sizeof(text), "127.0.0.1 %d 2\n192.0.2.1 %d 1\n", port, port);
	ipc = rdps_test_write(dir, "ip_config.txt", text);
	args[1] = ipc;
	out = doctor(args, &code);
	close(s);
	cr_log_info("\n%s", out);
	cr_expect_eq(code, 1, "%s", out);
	snprintf(want, sizeof(want), "FAIL ports      server 1: 127.0.0.1:%d is in use", port + 1);
	cr_expect(strstr(out, want), "%s", out);
	/* Whether TEST-NET-1 times out or a firewall refuses depends on the
	 * network around the host: the line names the peer either way. */
	snprintf(want, sizeof(want), "peers      192.0.2.1:%d ", port);
	cr_expect(strstr(out, want), "%s", out);
	cr_expect(strstr(out, "no answer") || strstr(out, "refused in"), "%s", out);
	expect_fixes(out);
	free(out);
	free(ipc);
}
