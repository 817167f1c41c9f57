// SPDX-License-Identifier: MIT
/* rdps server / stats / shutdown. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/server.h"

static struct rdps_server *running;

static void on_signal(int sig)
{
	(void)sig;
	if (running)
		rdps_server_stop(running);
}

static void server_usage(FILE *f)
{
	fprintf(f,
"usage: rdps server --ip_config FILE --server_id N --table NAME:ROWS:DIM [...] [options]\n"
"\n"
"Runs one parameter server of a job. Server N listens on the N-th address of\n"
"the ip_config (machines in file order, base_port + j for the j-th server of a\n"
"machine) and holds its contiguous range of every table's rows.\n"
"\n"
"required:\n"
"  --ip_config FILE       servers of the job, DGL-KE format: 'IP [base_port [num_servers]]'\n"
"                         per line (defaults 30050 and 1); blank lines and # comments ok\n"
"  --server_id N          this server's global index (0-based)\n"
"  --table NAME:ROWS:DIM  a table of ROWS rows of DIM floats, split evenly over the\n"
"                         servers; repeat for each table (e.g. entity:40943:400)\n"
"\n"
"options:\n"
"  --transport NAME       auto (default), tcp, inproc (%s)\n"
"  --optimizer NAME       sgd, adagrad_row (default, DGL-KE's), adagrad (element-wise)\n"
"  --lr F                 learning rate applied to pushed gradients (default 0.1)\n"
"  --gamma F              margin of the model; rows start uniform in [-r, r],\n"
"                         r = (gamma + 2) / dim, as DGL-KE (default 12.0)\n"
"  --init uniform|zeros   row initialisation (default uniform)\n"
"  --seed N               initialisation seed (default 0); rows depend on\n"
"                         (seed, table, id) only, not on the number of servers\n"
"  --quiet                do not print the stats line on exit\n"
"  -h, --help             this text\n"
"\n"
"The server exits on SIGTERM/SIGINT or when a client of the job sends a\n"
"shutdown request (rdps shutdown), and prints its request counters.\n",
		rdps_transport_names());
}

/* NAME:ROWS:DIM */
static int parse_table(const char *arg, struct rdps_server_table_config *t)
{
	const char *c1 = strchr(arg, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	char *end;
	unsigned long long rows;
	unsigned long dim;

	if (!c1 || !c2 || c1 == arg || (size_t)(c1 - arg) >= RDPS_TABLE_NAME_MAX)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	memcpy(t->name, arg, (size_t)(c1 - arg));
	errno = 0;
	rows = strtoull(c1 + 1, &end, 10);
	if (errno || end != c2 || c1[1] == '-')
		return -EINVAL;
	dim = strtoul(c2 + 1, &end, 10);
	if (errno || *end || dim == 0 || dim > RDPS_MAX_DIM || c2[1] == '-')
		return -EINVAL;
	t->num_rows = rows;
	t->dim = (uint32_t)dim;
	return 0;
}

static int parse_float(const char *s, float *out)
{
	char *end;

	errno = 0;
	*out = strtof(s, &end);
	return errno || *end || end == s ? -EINVAL : 0;
}

int rdps_cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ip_config", required_argument, NULL, 'c' },
		{ "server_id", required_argument, NULL, 'i' },
		{ "table", required_argument, NULL, 't' },
		{ "transport", required_argument, NULL, 'T' },
		{ "optimizer", required_argument, NULL, 'o' },
		{ "lr", required_argument, NULL, 'l' },
		{ "gamma", required_argument, NULL, 'g' },
		{ "init", required_argument, NULL, 'I' },
		{ "seed", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rdps_server_config cfg = { .transport = "auto" };
	struct rdps_ipconfig ipc;
	const char *ip_config = NULL, *transport = "auto";
	int optimizer = RDPS_OPT_ADAGRAD_ROW, init = RDPS_INIT_UNIFORM, opt, ret;
	float lr = 0.1f, gamma = 12.0f;
	long server_id = -1;
	bool quiet = false;
	char err[512], why[256], *end;
	struct rdps_server_stats st;
	struct sigaction sa = { .sa_handler = on_signal };

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			ip_config = optarg;
			break;
		case 'i':
			server_id = strtol(optarg, &end, 10);
			if (*end || server_id < 0) {
				fprintf(stderr, "rdps server: --server_id '%s' is not a non-negative integer\n", optarg);
				return 2;
			}
			break;
		case 't':
			if (cfg.num_tables == RDPS_MAX_TABLES) {
				fprintf(stderr, "rdps server: at most %d tables\n", RDPS_MAX_TABLES);
				return 2;
			}
			if (parse_table(optarg, &cfg.tables[cfg.num_tables])) {
				fprintf(stderr, "rdps server: --table '%s': want NAME:ROWS:DIM, e.g. entity:40943:400 (name < %d chars, 1 <= DIM <= %d)\n",
					optarg, RDPS_TABLE_NAME_MAX, RDPS_MAX_DIM);
				return 2;
			}
			cfg.num_tables++;
			break;
		case 'T':
			transport = optarg;
			break;
		case 'o':
			optimizer = rdps_optimizer_parse(optarg);
			if (optimizer < 0) {
				fprintf(stderr, "rdps server: unknown --optimizer '%s' (sgd, adagrad_row, adagrad)\n", optarg);
				return 2;
			}
			break;
		case 'l':
			if (parse_float(optarg, &lr) || lr < 0) {
				fprintf(stderr, "rdps server: --lr '%s' is not a non-negative number\n", optarg);
				return 2;
			}
			break;
		case 'g':
			if (parse_float(optarg, &gamma)) {
				fprintf(stderr, "rdps server: --gamma '%s' is not a number\n", optarg);
				return 2;
			}
			break;
		case 'I':
			if (!strcmp(optarg, "uniform"))
				init = RDPS_INIT_UNIFORM;
			else if (!strcmp(optarg, "zeros"))
				init = RDPS_INIT_ZEROS;
			else {
				fprintf(stderr, "rdps server: --init must be uniform or zeros\n");
				return 2;
			}
			break;
		case 's':
			cfg.seed = strtoull(optarg, &end, 10);
			if (*end) {
				fprintf(stderr, "rdps server: --seed '%s' is not an integer\n", optarg);
				return 2;
			}
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			server_usage(stdout);
			return 0;
		default:
			server_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!ip_config || server_id < 0 || !cfg.num_tables) {
		fprintf(stderr, "rdps server: --ip_config, --server_id and at least one --table are required (see rdps server --help)\n");
		return 2;
	}
	ret = rdps_ipconfig_load(ip_config, &ipc, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps server: %s\n", err);
		return 1;
	}
	if ((uint64_t)server_id >= ipc.num_servers) {
		fprintf(stderr, "rdps server: --server_id %ld, but %s lists %u server(s)\n",
			server_id, ip_config, ipc.num_servers);
		rdps_ipconfig_free(&ipc);
		return 2;
	}
	{
		const struct rdps_transport_ops *ops =
			rdps_transport_select(transport, ipc.servers[server_id].host, why, sizeof(why));

		if (!ops) {
			fprintf(stderr, "rdps server: %s\n", why);
			rdps_ipconfig_free(&ipc);
			return 2;
		}
		cfg.transport = ops->name;
	}
	for (uint32_t t = 0; t < cfg.num_tables; t++) {
		cfg.tables[t].init = init;
		cfg.tables[t].init_range = (gamma + 2.0f) / (float)cfg.tables[t].dim;
		cfg.tables[t].optimizer = optimizer;
		cfg.tables[t].lr = lr;
	}
	cfg.ipc = &ipc;
	cfg.server_id = (uint32_t)server_id;
	ret = rdps_server_create(&cfg, &running, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps server %ld: %s\n", server_id, err);
		rdps_ipconfig_free(&ipc);
		return 1;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rdps_info("server %ld: listening on %s:%u (%s), %u table(s), optimizer %s lr %g",
		  server_id, ipc.servers[server_id].host, ipc.servers[server_id].port,
		  cfg.transport, cfg.num_tables, rdps_optimizer_name(optimizer), lr);
	ret = rdps_server_run(running);
	rdps_server_get_stats(running, &st);
	rdps_server_destroy(running);
	running = NULL;
	if (!quiet)
		rdps_server_print_stats(&st, (uint32_t)server_id, stdout);
	fflush(stdout);
	rdps_ipconfig_free(&ipc);
	return ret ? 1 : 0;
}

/* ---------------------------------------------------------------------- */

static void admin_usage(FILE *f, const char *cmd)
{
	fprintf(f,
"usage: rdps %s --ip_config FILE [--transport NAME] [--timeout SEC]\n"
"\n"
"%s\n"
"It connects as an observer, which does not join the job.\n"
"\n"
"  --ip_config FILE   servers of the job (DGL-KE format)\n"
"  --transport NAME   auto (default), tcp, inproc\n"
"  --timeout SEC      bound on connecting and on each reply (default 10)\n"
"  -h, --help         this text\n",
		cmd,
		!strcmp(cmd, "stats")
			? "Prints the request counters of every server, one line each."
			: "Asks every server of the job to exit; each prints its counters.");
}

static int admin(int argc, char **argv, const char *cmd)
{
	static const struct option opts[] = {
		{ "ip_config", required_argument, NULL, 'c' },
		{ "transport", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rdps_client_params p = { .transport = "auto", .num_clients = 1,
					.timeout_ms = 10000, .observer = true,
					.quiet = true };
	struct rdps_client *c;
	char err[640], *end;
	int opt, ret, rc = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			p.ip_config = optarg;
			break;
		case 'T':
			p.transport = optarg;
			break;
		case 'w':
			p.timeout_ms = (int)(strtod(optarg, &end) * 1000);
			if (*end || p.timeout_ms <= 0) {
				fprintf(stderr, "rdps %s: --timeout '%s' is not a positive number\n", cmd, optarg);
				return 2;
			}
			break;
		case 'h':
			admin_usage(stdout, cmd);
			return 0;
		default:
			admin_usage(stderr, cmd);
			return 2;
		}
	}
	if (!p.ip_config || optind < argc) {
		admin_usage(stderr, cmd);
		return 2;
	}
	ret = rdps_client_create(&p, &c, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps %s: %s\n", cmd, err);
		return 1;
	}
	for (uint32_t s = 0; s < rdps_client_num_servers(c); s++) {
		if (!strcmp(cmd, "stats")) {
			struct rdps_server_stats st;

			ret = rdps_client_server_stats(c, s, &st);
			if (!ret)
				rdps_server_print_stats(&st, s, stdout);
		} else {
			ret = 0;
		}
		if (ret) {
			fprintf(stderr, "rdps %s: %s\n", cmd, rdps_client_errmsg(c));
			rc = 1;
		}
	}
	if (!strcmp(cmd, "shutdown")) {
		ret = rdps_client_shutdown_servers(c);
		if (ret) {
			fprintf(stderr, "rdps shutdown: %s\n", rdps_client_errmsg(c));
			rc = 1;
		} else {
			printf("asked %u server(s) to shut down\n", rdps_client_num_servers(c));
		}
	}
	rdps_client_destroy(c);
	return rc;
}

int rdps_cmd_stats(int argc, char **argv)
{
	return admin(argc, argv, "stats");
}

int rdps_cmd_shutdown(int argc, char **argv)
{
	return admin(argc, argv, "shutdown");
}
