// SPDX-License-Identifier: MIT
/* rdps server / stats / shutdown. */
#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rdps/auth.h"
#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/partition.h"
#include "rdps/server.h"
#include "rdps/trainer.h"

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
"       rdps server --ip_config FILE --server_id N --partition PDIR --model_name M --hidden_dim D\n"
"       rdps server --ip_config FILE --server_id N --graph GDIR [options]\n"
"       rdps server --ip_config FILE --server_id N [options]\n"
"\n"
"Runs one parameter server of a job. Server N listens on the N-th address of\n"
"the ip_config (machines in file order, base_port + j for the j-th server of a\n"
"machine) and holds its contiguous range of every table's rows. With neither\n"
"--table nor --partition it starts with no table: the job's clients make theirs\n"
"(rdps_client_table_create; the Python package's DistTensor and DistEmbedding,\n"
"e.g. under rdps launch --exec).\n"
"\n"
"required:\n"
"  --ip_config FILE       servers of the job, DGL-KE format: 'IP [base_port [num_servers]]'\n"
"                         per line (defaults 30050 and 1); blank lines and # comments ok\n"
"  --server_id N          this server's global index (0-based)\n"
"\n"
"tables (optional):\n"
"  --table NAME:ROWS:DIM  a table of ROWS rows of DIM floats, split evenly over the\n"
"                         servers; repeat for each table (e.g. entity:40943:400)\n"
"  or\n"
"  --partition PDIR       a partition (rdps partition): tables 'entity' and 'relation'\n"
"                         shaped for --model_name/--hidden_dim; machine i of the\n"
"                         ip_config holds part i's entities, split evenly over its\n"
"                         servers (or, with one server per part, server i holds part i)\n"
"  or\n"
"  --graph GDIR           a graph partition (rdps partition of a graph dataset, e.g.\n"
"                         rdps dataset wordnet-nodes or wordnet-hetero, or\n"
"                         rdps.distributed.partition_graph): server i holds part i's\n"
"                         nodes, their in-edges, out-edge lists and data as read-only\n"
"                         tables (graph:meta, graph:indptr, graph:edges, graph:outptr,\n"
"                         graph:outedges, ndata:*, edata:*; rdps/graph.h) that\n"
"                         DistGraph reads and samples, each file checked against the\n"
"                         XXH3 partition.json records; the job needs one server per\n"
"                         part. Clients may make more tables beside them\n"
"  --model_name NAME      model the tables are for (row widths; default TransE_l2)\n"
"  --hidden_dim N         its hidden_dim (default 400); rows start in [-r, r] with\n"
"                         r = (gamma + 2) / hidden_dim (TransR's projection: [-1, 1])\n"
"  --double_ent, --double_rel   DGL-KE's -de / -dr: rows of 2 x hidden_dim (give the\n"
"                         trainers' flags; rdps launch passes them on)\n"
"\n"
"options:\n"
"  --transport NAME       auto (default), tcp, inproc (%s); auto takes verbs\n"
"                         where an InfiniBand or RoCE device serves the address,\n"
"                         ofi where there is an EFA device, else tcp, and says which\n"
"  --ofi-provider NAME    the libfabric provider of --transport ofi (default: efa\n"
"                         where there is an EFA device; e.g. 'tcp;ofi_rxm', any IP\n"
"                         network); clients must use the same (sets RDPS_OFI_PROVIDER)\n"
"  --optimizer NAME       sgd, adagrad_row (default, DGL-KE's), adagrad (element-wise)\n"
"  --lr F                 learning rate applied to pushed gradients (default 0.1)\n"
"  --gamma F              margin of the model; rows start uniform in [-r, r],\n"
"                         r = (gamma + 2) / dim, as DGL-KE (default 12.0)\n"
"  --init uniform|zeros   row initialisation (default uniform)\n"
"  --seed N               initialisation seed (default 0); rows depend on\n"
"                         (seed, table, id) only, not on the number of servers\n"
"  --secret-file PATH     the job's shared secret: clients must prove they hold it\n"
"                         (challenge-response) before any table range or rkey\n"
"                         leaves this server; default: $RDPS_SECRET, else none\n"
"  --checkpoint-dir DIR   write checkpoints of the shards and optimizer state to\n"
"                         DIR/server-N/ckpt-SEQ (atomic; the previous one is kept) on\n"
"                         request (rdps ckpt), every --checkpoint-interval, and on exit\n"
"  --checkpoint-interval SEC   also checkpoint this often (default: only on request)\n"
"  --resume DIR           start from the newest valid checkpoint in DIR (a damaged\n"
"                         one is refused with its reason and the previous one used);\n"
"                         implies --checkpoint-dir DIR\n"
"  --job-timeout SEC      exit when no client of the job has been connected for SEC\n"
"                         seconds (a lease: no server outlives a dead job; default: never)\n"
"  --keep-alive           outlive the job: its shutdown request is ignored and the\n"
"                         next job that attaches to the same tables finds them as the\n"
"                         last one left them (rdps shutdown still stops the server)\n"
"  --max-connections N    connections open at once; more are closed at once, counted\n"
"                         and logged (default: the descriptor limit, ulimit -n, less\n"
"                         a reserve for files and devices of a quarter of it, at most\n"
"                         64; at most 65536): accept() does not run out of descriptors\n"
"  --handshake-timeout SEC   close a connection that has not finished its hello (and\n"
"                         authentication) within SEC seconds (default 10)\n"
"  --max-reply-buffer MB  memory for replies held for clients, all connections\n"
"                         together: a request is taken only once its largest reply\n"
"                         fits (a client that does not read its replies stops\n"
"                         there, and is closed once its replies have not moved for\n"
"                         --reply-stall-timeout while others wait; a request whose\n"
"                         reply could never fit is refused, naming this flag).\n"
"                         Default: 1/16 of RAM, within 64..1024 MB\n"
"  --reply-stall-timeout SEC   see --max-reply-buffer (default 60)\n"
"  --max-request-buffer MB  memory for requests being received, all connections\n"
"                         together: a frame's payload is read only once it fits;\n"
"                         each kind of request is also capped at its largest legal\n"
"                         size on its header (an observer's are empty). Default:\n"
"                         as --max-reply-buffer. Each connection also keeps up to\n"
"                         64 KiB per direction outside both (see --max-connections)\n"
"  --max-table-memory MB  memory all tables may take (rows, optimizer state, locks),\n"
"                         this server's own and those clients make: a table request\n"
"                         past it is refused before anything is allocated, naming\n"
"                         this flag. Default: half of RAM and, for verbs and ofi\n"
"                         without CAP_IPC_LOCK, the locked-memory limit (ulimit -l);\n"
"                         the server's own tables are held to it only when given\n"
"  --nonfinite refuse|accept  pushed gradients holding a NaN or an infinity:\n"
"                         refuse the push, naming table and row, so a diverging\n"
"                         trainer fails at that step (default), or apply them\n"
"                         (rows become non-finite); counted per table in rdps stats\n"
"  --allow-unauthenticated  without a secret, serve clients on other machines too.\n"
"                         By default a server without one serves only clients on\n"
"                         its own machine (protected mode), and says so at start\n"
"  --num_server_threads N threads serving requests (1..64, default 1): each serves\n"
"                         its own connections (tcp: its own epoll set; verbs: its\n"
"                         own completion queue, shared receive queue and push\n"
"                         credits, a new client going to the least busy thread);\n"
"                         pushes to different rows are applied in parallel, each\n"
"                         row by one thread at a time; checkpoints are written by\n"
"                         a thread of their own while pushes go on\n"
"  --quiet                do not print the stats line on exit\n"
"  -h, --help             this text\n"
"\n"
"Who may do what: with a secret, only processes that prove it (the job's\n"
"clients, and rdps stats/ckpt/shutdown given the secret) are served at all.\n"
"Without one (protected mode), only processes on this machine, unless\n"
"--allow-unauthenticated; then observers from other machines may still only\n"
"ask for stats, and a checkpoint or a shutdown comes from the job's clients\n"
"or from this machine. rdps launch makes a secret for every job it starts.\n"
"\n"
"The server exits on SIGTERM/SIGINT or when a client of the job sends a\n"
"shutdown request (rdps shutdown), and prints its request counters.\n",
		rdps_transport_names());
}

/* A number of MB (1..max) for flag, in bytes in *out. 0, or -EINVAL said. */
static int parse_mb(const char *flag, const char *arg, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long mb = strtoull(arg, &end, 10);

	if (*end || !mb || mb > max || arg[0] == '-') {
		fprintf(stderr, "rdps server: %s '%s' is not a number of MB in 1..%llu\n", flag, arg,
			(unsigned long long)max);
		return -EINVAL;
	}
	*out = (uint64_t)mb << 20;
	return 0;
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

/* Tables 'entity' and 'relation' for a partition: machine i holds part i. */
/* The relation table's row parts as the model keeps them (TransR: the
 * vector and the projection, each with its own start range and Adagrad
 * state). */
static void relation_parts(const struct rdps_model *m, struct rdps_server_table_config *tc)
{
	struct rdps_model_rel_part parts[RDPS_MODEL_REL_PARTS_MAX];
	unsigned n = rdps_model_relation_parts(m, parts);

	tc->num_parts = n > 1 ? n : 0;
	for (unsigned k = 0; n > 1 && k < n && k < RDPS_ROW_PARTS_MAX; k++)
		tc->parts[k] = (struct rdps_row_part){ parts[k].width, parts[k].init_range };
}

static int partition_tables(const char *pdir, const struct rdps_model_params *mp,
			    const struct rdps_ipconfig *ipc, struct rdps_server_config *cfg,
			    uint64_t **ent_off)
{
	const struct rdps_partition_info *pi;
	struct rdps_partition *p;
	struct rdps_model *m;
	uint32_t edim, rdim, S = ipc->num_servers;
	uint64_t *off;
	char err[512];
	int ret;

	ret = rdps_model_create(&m, mp);
	if (ret) {
		fprintf(stderr, "rdps server: unknown --model_name '%s', or --hidden_dim %u%s%s it "
			"cannot take (models: %s)\n", mp->name, mp->hidden_dim,
			mp->double_ent ? " with --double_ent" : "",
			mp->double_rel ? " with --double_rel" : "", rdps_model_names());
		return ret;
	}
	edim = rdps_model_entity_dim(m);
	rdim = rdps_model_relation_dim(m);
	ret = rdps_partition_open(pdir, &p, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps server: %s\n", err);
		rdps_model_destroy(m);
		return ret;
	}
	pi = rdps_partition_get_info(p);
	off = calloc(S + 1, sizeof(uint64_t));
	if (!off) {
		rdps_partition_close(p);
		rdps_model_destroy(m);
		return -ENOMEM;
	}
	if (S == pi->k) {
		memcpy(off, pi->ranges, (S + 1) * sizeof(uint64_t));
	} else if (ipc->num_machines == pi->k) {
		for (uint32_t s = 0; s < S; s++) {
			const struct rdps_endpoint *ep = &ipc->servers[s];
			uint32_t mach = ep->machine, per = 0;
			uint64_t lo = pi->ranges[mach], n = pi->ranges[mach + 1] - lo;

			for (uint32_t q = 0; q < S; q++)
				per += ipc->servers[q].machine == mach;
			off[s] = lo + n * ep->local_index / per;
		}
		off[S] = pi->ranges[pi->k];
	} else {
		fprintf(stderr,
			"rdps server: %s has %u parts, but the ip_config lists %u machine(s) with %u server(s): "
			"partition with -k equal to the number of machines (or of servers)\n",
			pdir, pi->k, ipc->num_machines, S);
		free(off);
		rdps_partition_close(p);
		rdps_model_destroy(m);
		return -EINVAL;
	}
	cfg->num_tables = 2;
	memset(cfg->tables, 0, 2 * sizeof(cfg->tables[0]));
	snprintf(cfg->tables[0].name, sizeof(cfg->tables[0].name), "entity");
	cfg->tables[0].num_rows = pi->num_entities;
	cfg->tables[0].dim = edim;
	cfg->tables[0].offsets = off;
	snprintf(cfg->tables[1].name, sizeof(cfg->tables[1].name), "relation");
	cfg->tables[1].num_rows = pi->num_relations;
	cfg->tables[1].dim = rdim;
	relation_parts(m, &cfg->tables[1]);
	rdps_model_destroy(m);
	*ent_off = off;
	rdps_partition_close(p);
	return 0;
}

/* --graph: part server_id of the graph partition in gdir, as read-only
 * tables (their rows point into *part, kept until the server is gone). */
static int graph_tables(const char *gdir, const struct rdps_ipconfig *ipc, uint32_t server_id,
			struct rdps_server_config *cfg, struct rdps_graph_part **part)
{
	char err[640];
	int ret;

	ret = rdps_graph_part_load(gdir, server_id, part, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps server %u: --graph %s: %s\n", server_id, gdir, err);
		return ret;
	}
	if ((*part)->num_parts != ipc->num_servers) {
		fprintf(stderr, "rdps server %u: --graph %s has %u parts but the ip_config lists %u "
			"server(s): a graph job has one server per part (partition again with "
			"--num_parts %u, or list %u servers)\n", server_id, gdir, (*part)->num_parts,
			ipc->num_servers, ipc->num_servers, (*part)->num_parts);
		rdps_graph_part_free(*part);
		*part = NULL;
		return -EINVAL;
	}
	ret = rdps_graph_part_add_tables(*part, cfg);
	if (ret) {
		rdps_graph_part_free(*part);
		*part = NULL;
	}
	return ret;
}

int rdps_cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ip_config", required_argument, NULL, 'c' },
		{ "server_id", required_argument, NULL, 'i' },
		{ "table", required_argument, NULL, 't' },
		{ "transport", required_argument, NULL, 'T' },
		{ "ofi-provider", required_argument, NULL, 'O' },
		{ "optimizer", required_argument, NULL, 'o' },
		{ "lr", required_argument, NULL, 'l' },
		{ "gamma", required_argument, NULL, 'g' },
		{ "init", required_argument, NULL, 'I' },
		{ "seed", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "partition", required_argument, NULL, 'P' },
		{ "graph", required_argument, NULL, 'G' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "checkpoint-dir", required_argument, NULL, 'k' },
		{ "checkpoint-interval", required_argument, NULL, 'K' },
		{ "resume", required_argument, NULL, 'R' },
		{ "keep-alive", no_argument, NULL, 'A' },
		{ "job-timeout", required_argument, NULL, 'J' },
		{ "model_name", required_argument, NULL, 'M' },
		{ "max-connections", required_argument, NULL, 'C' },
		{ "handshake-timeout", required_argument, NULL, 'H' },
		{ "max-reply-buffer", required_argument, NULL, 'B' },
		{ "max-request-buffer", required_argument, NULL, 'Q' },
		{ "reply-stall-timeout", required_argument, NULL, 'W' },
		{ "max-table-memory", required_argument, NULL, 'X' },
		{ "allow-unauthenticated", no_argument, NULL, 'U' },
		{ "nonfinite", required_argument, NULL, 'Z' },
		{ "hidden_dim", required_argument, NULL, 'D' },
		{ "double_ent", no_argument, NULL, 'E' },
		{ "double_rel", no_argument, NULL, 'F' },
		{ "num_server_threads", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rdps_server_config cfg = { .transport = "auto" };
	struct rdps_ipconfig ipc;
	const char *ip_config = NULL, *transport = "auto";
	int optimizer = RDPS_OPT_ADAGRAD_ROW, init = RDPS_INIT_UNIFORM, opt, ret;
	float lr = 0.1f, gamma = 12.0f;
	bool double_ent = false, double_rel = false;
	long server_id = -1;
	bool quiet = false;
	struct rdps_graph_part *gpart = NULL;
	const char *gdir = NULL;
	const char *pdir = NULL, *model = "TransE_l2", *secret_file = NULL;
	struct rdps_secret secret;
	unsigned long hidden_dim = 400;
	uint64_t *ent_off = NULL;
	char err[512], why[256], *end;
	struct rdps_server_stats st;
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t mb;
	const char *auth_mode;

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
		case 'O':
			if (!*optarg) {
				fprintf(stderr, "rdps server: --ofi-provider needs a provider name (fi_info -l lists them)\n");
				return 2;
			}
			/* The ofi backend reads it (as its other settings). */
			setenv("RDPS_OFI_PROVIDER", optarg, 1);
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
		case 'P':
			pdir = optarg;
			break;
		case 'G':
			gdir = optarg;
			break;
		case 'S':
			secret_file = optarg;
			break;
		case 'k':
			cfg.checkpoint_dir = optarg;
			break;
		case 'K': {
			double sec = strtod(optarg, &end);

			if (*end || !(sec > 0) || sec > 1e6) {
				fprintf(stderr, "rdps server: --checkpoint-interval '%s' is not a positive number of seconds\n", optarg);
				return 2;
			}
			cfg.checkpoint_interval_ms = (int)(sec * 1000);
			break;
		}
		case 'R':
			cfg.checkpoint_dir = optarg;
			cfg.resume = true;
			break;
		case 'A':
			cfg.keep_alive = true;
			break;
		case 'J': {
			double sec = strtod(optarg, &end);

			if (*end || !(sec > 0) || sec > 1e6) {
				fprintf(stderr, "rdps server: --job-timeout '%s' is not a positive number of seconds\n", optarg);
				return 2;
			}
			cfg.job_timeout_ms = (int)(sec * 1000);
			break;
		}
		case 'M':
			model = optarg;
			break;
		case 'N': {
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || !n || n > 64 || optarg[0] == '-') {
				fprintf(stderr, "rdps server: --num_server_threads '%s' is not in 1..64\n",
					optarg);
				return 2;
			}
			cfg.num_threads = (uint32_t)n;
			break;
		}
		case 'C': {
			unsigned long long n = strtoull(optarg, &end, 10);

			if (*end || !n || n > (1u << 24) || optarg[0] == '-') {
				fprintf(stderr, "rdps server: --max-connections '%s' is not in 1..%u\n",
					optarg, 1u << 24);
				return 2;
			}
			cfg.max_connections = (uint32_t)n;
			break;
		}
		case 'H': {
			double sec = strtod(optarg, &end);

			if (*end || !(sec >= 0.001) || sec > 1e6) {
				fprintf(stderr, "rdps server: --handshake-timeout '%s' is not a positive number of seconds\n", optarg);
				return 2;
			}
			cfg.handshake_timeout_ms = (int)(sec * 1000);
			break;
		}
		case 'B':
			if (parse_mb("--max-reply-buffer", optarg, 1ull << 24, &mb))
				return 2;
			cfg.max_reply_buffer = (size_t)mb;
			break;
		case 'Q':
			if (parse_mb("--max-request-buffer", optarg, 1ull << 24, &mb))
				return 2;
			cfg.max_request_buffer = (size_t)mb;
			break;
		case 'X':
			if (parse_mb("--max-table-memory", optarg, 1ull << 30, &mb))
				return 2;
			cfg.max_table_memory = mb;
			break;
		case 'U':
			cfg.allow_unauthenticated = true;
			break;
		case 'W': {
			double sec = strtod(optarg, &end);

			if (*end || !(sec >= 0.001) || sec > 1e6) {
				fprintf(stderr, "rdps server: --reply-stall-timeout '%s' is not a positive number of seconds\n", optarg);
				return 2;
			}
			cfg.reply_stall_ms = (int)(sec * 1000);
			break;
		}
		case 'Z':
			if (!strcmp(optarg, "refuse")) {
				cfg.nonfinite = RDPS_NONFINITE_REFUSE;
			} else if (!strcmp(optarg, "accept")) {
				cfg.nonfinite = RDPS_NONFINITE_ACCEPT;
			} else {
				fprintf(stderr, "rdps server: --nonfinite '%s': want refuse or accept\n",
					optarg);
				return 2;
			}
			break;
		case 'E':
			double_ent = true;
			break;
		case 'F':
			double_rel = true;
			break;
		case 'D':
			hidden_dim = strtoul(optarg, &end, 10);
			if (*end || !hidden_dim || hidden_dim > RDPS_MAX_DIM) {
				fprintf(stderr, "rdps server: --hidden_dim '%s' is not in 1..%d\n", optarg, RDPS_MAX_DIM);
				return 2;
			}
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
	if (!ip_config || server_id < 0) {
		fprintf(stderr, "rdps server: --ip_config and --server_id are required (see rdps server --help)\n");
		return 2;
	}
	if (!!cfg.num_tables + !!pdir + !!gdir > 1) {
		fprintf(stderr, "rdps server: --table, --partition and --graph exclude each other: "
			"give one, or none for a server whose tables its clients make\n");
		return 2;
	}
	ret = rdps_secret_load(secret_file, &secret, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdps server: %s\n", err);
		return 1;
	}
	if (secret.len && secret.len < RDPS_SECRET_MIN_RECOMMENDED)
		rdps_warn("the shared secret has only %zu bytes; use at least %d random bytes",
			  secret.len, RDPS_SECRET_MIN_RECOMMENDED);
	cfg.secret = &secret;
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
		/* What auto chose, and why not the backends it prefers. */
		if (!strcmp(transport, "auto"))
			rdps_info("server %ld: %s", server_id, why);
		cfg.transport = ops->name;
	}
	if (pdir) {
		struct rdps_model_params mp;

		rdps_model_params_init(&mp);
		mp.name = model;
		mp.hidden_dim = (uint32_t)hidden_dim;
		mp.gamma = gamma;
		mp.double_ent = double_ent;
		mp.double_rel = double_rel;
		ret = partition_tables(pdir, &mp, &ipc, &cfg, &ent_off);
		if (ret) {
			rdps_ipconfig_free(&ipc);
			return 1;
		}
	}
	for (uint32_t t = 0; t < cfg.num_tables; t++) {
		cfg.tables[t].init = init;
		/* DGL-KE's emb_init divides by hidden_dim, also for wider rows. */
		cfg.tables[t].init_range = (gamma + 2.0f) /
					   (float)(pdir ? hidden_dim : cfg.tables[t].dim);
		cfg.tables[t].optimizer = optimizer;
		cfg.tables[t].lr = lr;
	}
	if (gdir && (ret = graph_tables(gdir, &ipc, (uint32_t)server_id, &cfg, &gpart))) {
		rdps_ipconfig_free(&ipc);
		return 1;
	}
	cfg.ipc = &ipc;
	cfg.server_id = (uint32_t)server_id;
	ret = rdps_server_create(&cfg, &running, err, sizeof(err));
	free(ent_off);
	if (ret) {
		fprintf(stderr, "rdps server %ld: %s\n", server_id, err);
		rdps_graph_part_free(gpart);
		rdps_ipconfig_free(&ipc);
		return 1;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	auth_mode = secret.len ? "clients must authenticate"
		    : cfg.allow_unauthenticated ? "no authentication (no secret, "
						  "--allow-unauthenticated: any client that "
						  "reaches the port is served)"
		    : "no secret: only clients on this machine are served (protected mode; "
		      "--secret-file, or --allow-unauthenticated, for others)";
	if (gpart)
		rdps_info("server %ld: listening on %s:%u (%s), part %u of %u of the graph in %s "
			  "(%" PRIu64 " nodes, %" PRIu64 " edges), %s",
			  server_id, ipc.servers[server_id].host, ipc.servers[server_id].port,
			  cfg.transport, gpart->part, gpart->num_parts, gdir,
			  gpart->node_ranges[gpart->part + 1] - gpart->node_ranges[gpart->part],
			  gpart->edge_ranges[gpart->part + 1] - gpart->edge_ranges[gpart->part],
			  auth_mode);
	else if (cfg.num_tables)
		rdps_info("server %ld: listening on %s:%u (%s), %u table(s), optimizer %s lr %g, %s",
			  server_id, ipc.servers[server_id].host, ipc.servers[server_id].port,
			  cfg.transport, cfg.num_tables, rdps_optimizer_name(optimizer), lr,
			  auth_mode);
	else
		rdps_info("server %ld: listening on %s:%u (%s), no table yet (its clients make them), %s",
			  server_id, ipc.servers[server_id].host, ipc.servers[server_id].port,
			  cfg.transport,
			  auth_mode);
	{
		char a[32], b[32], c[32], basis[256] = "--max-table-memory";

		if (!cfg.max_table_memory)
			rdps_server_default_table_budget(cfg.transport, basis, sizeof(basis));
		rdps_info("server %ld: tables may take %s (%s), replies held for clients %s "
			  "(--max-reply-buffer), requests being received %s (--max-request-buffer); "
			  "non-finite gradients are %s", server_id,
			  rdps_bytes_str(cfg.max_table_memory ? cfg.max_table_memory
				: rdps_server_default_table_budget(cfg.transport, NULL, 0), a,
				sizeof(a)), basis,
			  cfg.max_reply_buffer ? rdps_bytes_str(cfg.max_reply_buffer, b, sizeof(b))
					       : "1/16 of RAM within 64 MiB..1 GiB",
			  cfg.max_request_buffer ? rdps_bytes_str(cfg.max_request_buffer, c, sizeof(c))
						 : "1/16 of RAM within 64 MiB..1 GiB",
			  cfg.nonfinite == RDPS_NONFINITE_ACCEPT ? "applied (--nonfinite accept)"
								 : "refused");
	}
	if (cfg.checkpoint_interval_ms && !cfg.checkpoint_dir) {
		fprintf(stderr, "rdps server: --checkpoint-interval needs --checkpoint-dir\n");
		rdps_server_destroy(running);
		rdps_graph_part_free(gpart);
		rdps_ipconfig_free(&ipc);
		return 2;
	}
	ret = rdps_server_run(running);
	/* A graceful stop keeps everything applied so far. */
	if (!ret && cfg.checkpoint_dir && rdps_server_checkpoint(running, err, sizeof(err)))
		ret = -EIO;
	rdps_server_get_stats(running, &st);
	rdps_server_destroy(running);
	running = NULL;
	rdps_graph_part_free(gpart); /* the shards held copies; freed after them anyway */
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
"usage: rdps %s --ip_config FILE [--transport NAME] [--ofi-provider NAME] [--timeout SEC]\n"
"\n"
"%s\n"
"It connects as an observer, which does not join the job.\n"
"\n"
"  --ip_config FILE   servers of the job (DGL-KE format)\n"
"  --transport NAME   auto (default), tcp, verbs, ofi\n"
"  --ofi-provider NAME  the libfabric provider of --transport ofi (default: efa)\n"
"  --timeout SEC      bound on connecting and on each reply (default 10)\n"
"  --secret-file PATH the job's shared secret (default: $RDPS_SECRET)\n"
"  -h, --help         this text\n",
		cmd,
		!strcmp(cmd, "stats")  ? "Prints the request counters of every server, one line each."
		: !strcmp(cmd, "ckpt") ? "Asks every server to write a checkpoint now (servers started\n"
					 "with --checkpoint-dir); returns when all are on disk."
				       : "Asks every server of the job to exit; each prints its counters.");
}

static int admin(int argc, char **argv, const char *cmd)
{
	static const struct option opts[] = {
		{ "ip_config", required_argument, NULL, 'c' },
		{ "transport", required_argument, NULL, 'T' },
		{ "ofi-provider", required_argument, NULL, 'O' },
		{ "timeout", required_argument, NULL, 'w' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *secret_file = NULL;
	struct rdps_secret secret;
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
		case 'O':
			if (!*optarg) {
				fprintf(stderr, "rdps %s: --ofi-provider needs a provider name\n", cmd);
				return 2;
			}
			setenv("RDPS_OFI_PROVIDER", optarg, 1);
			break;
		case 'w':
			p.timeout_ms = (int)(strtod(optarg, &end) * 1000);
			if (*end || p.timeout_ms <= 0) {
				fprintf(stderr, "rdps %s: --timeout '%s' is not a positive number\n", cmd, optarg);
				return 2;
			}
			break;
		case 'S':
			secret_file = optarg;
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
	if (rdps_secret_load(secret_file, &secret, err, sizeof(err))) {
		fprintf(stderr, "rdps %s: %s\n", cmd, err);
		return 1;
	}
	p.secret = &secret;
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
			/* Non-finite gradients, per table by name (the observer's
			 * welcome lists the server's tables). */
			for (uint32_t t = 0; !ret && t < RDPS_MAX_TABLES; t++) {
				struct rdps_table_info ti;

				if (!st.nonfinite_rows[t])
					continue;
				printf("server %u: table '%s': %llu gradient row(s) with a NaN or an "
				       "infinity pushed\n", s,
				       rdps_client_table_info(c, t, &ti) ? "?" : ti.name,
				       (unsigned long long)st.nonfinite_rows[t]);
			}
		} else {
			ret = 0;
		}
		if (ret) {
			fprintf(stderr, "rdps %s: %s\n", cmd, rdps_client_errmsg(c));
			rc = 1;
		}
	}
	if (!strcmp(cmd, "ckpt")) {
		ret = rdps_client_checkpoint(c);
		if (ret) {
			fprintf(stderr, "rdps ckpt: %s\n", rdps_client_errmsg(c));
			rc = 1;
		} else {
			printf("%u server(s) wrote a checkpoint\n", rdps_client_num_servers(c));
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

int rdps_cmd_ckpt(int argc, char **argv)
{
	return admin(argc, argv, "ckpt");
}
