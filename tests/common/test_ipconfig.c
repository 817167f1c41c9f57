// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/ipconfig.h"
#include "rdps_test.h"

Test(ipconfig, dglke_format_with_defaults)
{
	struct rdps_ipconfig c;
	char err[256];
	const char *text = "# cluster\n"
			   "\n"
			   "10.0.0.1 40000 2   # two servers\n"
			   "10.0.0.2\n"
			   "  10.0.0.3 50000\t\r\n";

	cr_assert_eq(rdps_ipconfig_parse("ipc", text, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.num_machines, 3);
	cr_assert_eq(c.num_servers, 4);
	cr_assert_str_eq(c.servers[0].host, "10.0.0.1");
	cr_assert_eq(c.servers[0].port, 40000);
	cr_assert_eq(c.servers[1].port, 40001);
	cr_assert_eq(c.servers[1].local_index, 1);
	cr_assert_str_eq(c.servers[2].host, "10.0.0.2");
	cr_assert_eq(c.servers[2].port, RDPS_DEFAULT_BASE_PORT);
	cr_assert_eq(c.servers[2].machine, 1);
	cr_assert_eq(c.servers[3].port, 50000);
	rdps_ipconfig_free(&c);
}

static void expect_error(const char *text, const char *needle)
{
	struct rdps_ipconfig c;
	char err[256];
	int ret = rdps_ipconfig_parse("my_ip.txt", text, &c, err, sizeof(err));

	cr_assert_lt(ret, 0, "'%s' was accepted", text);
	cr_assert(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
}

Test(ipconfig, errors_name_file_and_line)
{
	expect_error("127.0.0.1\n127.0.0.1 port\n", "my_ip.txt:2: bad base_port 'port'");
	expect_error("127.0.0.1 30050 0\n", "my_ip.txt:1: bad num_servers '0'");
	expect_error("\n\n127.0.0.1 30050 2 extra\n", "my_ip.txt:3:");
	expect_error("127.0.0.1 70000\n", "my_ip.txt:1: bad base_port");
	expect_error("127.0.0.1 65535 2\n", "my_ip.txt:1: ports 65535..65536");
	expect_error("127.0.0.1 -5\n", "my_ip.txt:1: bad base_port");
	expect_error("# only a comment\n\n", "no server listed");
}

Test(ipconfig, load_from_file)
{
	char *dir = rdps_test_tmpdir("ipc"), *path, err[256];
	struct rdps_ipconfig c;

	cr_assert(dir);
	path = rdps_test_write(dir, "ip_config.txt", "127.0.0.1 31000 3");
	cr_assert_eq(rdps_ipconfig_load(path, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.num_servers, 3);
	cr_assert_eq(c.servers[2].port, 31002);
	rdps_ipconfig_free(&c);
	cr_assert_eq(rdps_ipconfig_load("/nonexistent/ip.txt", &c, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "/nonexistent/ip.txt"), "%s", err);
	free(path);
	rdps_test_rmtree(dir);
	free(dir);
}
