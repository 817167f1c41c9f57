// SPDX-License-Identifier: MIT
/* rdps launch: rank layout, roles from the environment, role command lines.
 * Pure functions (see launch.h); the tests include this file directly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

int rdps_launch_layout_init(struct rdps_launch_layout *l, const struct rdps_ipconfig *ipc,
			    char *const *trainer_hosts, uint32_t n, uint32_t P, char *err,
			    size_t errlen)
{
	uint32_t M = ipc->num_machines + n, rank = 0, t = 0;

	memset(l, 0, sizeof(*l));
	if (P == 0 || P > 4096) {
		snprintf(err, errlen, "--num_client_proc %u: want 1..4096 trainer processes per machine", P);
		return -EINVAL;
	}
	l->machines = calloc(M, sizeof(*l->machines));
	if (!l->machines) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->num_machines = M;
	l->trainers_per_machine = P;
	for (uint32_t s = 0; s < ipc->num_servers; s++) {
		const struct rdps_endpoint *ep = &ipc->servers[s];
		struct rdps_launch_machine *m = &l->machines[ep->machine];

		if (!m->num_servers) {
			snprintf(m->host, sizeof(m->host), "%s", ep->host);
			m->first_server = s;
		}
		m->num_servers++;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct rdps_launch_machine *m = &l->machines[ipc->num_machines + i];

		if (!trainer_hosts[i][0] || strlen(trainer_hosts[i]) >= sizeof(m->host)) {
			snprintf(err, errlen, "--trainer_hosts: bad host name '%s'", trainer_hosts[i]);
			rdps_launch_layout_free(l);
			return -EINVAL;
		}
		snprintf(m->host, sizeof(m->host), "%s", trainer_hosts[i]);
		m->first_server = ipc->num_servers;
	}
	for (uint32_t i = 0; i < M; i++) {
		struct rdps_launch_machine *m = &l->machines[i];
		/* With trainer hosts, the ip_config's machines are servers only. */
		bool trains = n ? i >= ipc->num_machines : true;

		m->first_rank = rank;
		if (trains) {
			m->num_trainers = P;
			m->trainer_index = t++;
		}
		rank += m->num_servers + m->num_trainers;
	}
	l->num_servers = ipc->num_servers;
	l->num_trainer_machines = t;
	l->num_trainers = t * P;
	l->world_size = rank;
	return 0;
}

void rdps_launch_layout_free(struct rdps_launch_layout *l)
{
	if (!l)
		return;
	free(l->machines);
	memset(l, 0, sizeof(*l));
}

int rdps_launch_layout_role(const struct rdps_launch_layout *l, uint32_t rank,
			    struct rdps_launch_role *role)
{
	for (uint32_t i = 0; i < l->num_machines; i++) {
		const struct rdps_launch_machine *m = &l->machines[i];
		uint32_t o;

		if (rank < m->first_rank || rank >= m->first_rank + m->num_servers + m->num_trainers)
			continue;
		o = rank - m->first_rank;
		role->machine = i;
		role->rank = rank;
		if (o < m->num_servers) {
			role->kind = RDPS_ROLE_SERVER;
			role->id = m->first_server + o;
		} else {
			role->kind = RDPS_ROLE_TRAINER;
			role->id = (o - m->num_servers) * l->num_trainer_machines + m->trainer_index;
		}
		return 0;
	}
	return -ERANGE;
}

int rdps_launch_layout_trainer(const struct rdps_launch_layout *l, uint32_t j,
			       struct rdps_launch_role *role)
{
	uint32_t t, lo;

	if (j >= l->num_trainers)
		return -ERANGE;
	t = j % l->num_trainer_machines;
	lo = j / l->num_trainer_machines;
	for (uint32_t i = 0; i < l->num_machines; i++) {
		const struct rdps_launch_machine *m = &l->machines[i];

		if (m->num_trainers && m->trainer_index == t) {
			role->kind = RDPS_ROLE_TRAINER;
			role->id = j;
			role->machine = i;
			role->rank = m->first_rank + m->num_servers + lo;
			return 0;
		}
	}
	return -ERANGE;
}

int rdps_launch_layout_server(const struct rdps_launch_layout *l, uint32_t s,
			      struct rdps_launch_role *role)
{
	for (uint32_t i = 0; i < l->num_machines; i++) {
		const struct rdps_launch_machine *m = &l->machines[i];

		if (s >= m->first_server && s < m->first_server + m->num_servers) {
			role->kind = RDPS_ROLE_SERVER;
			role->id = s;
			role->machine = i;
			role->rank = m->first_rank + (s - m->first_server);
			return 0;
		}
	}
	return -ERANGE;
}

const char *rdps_launch_role_name(const struct rdps_launch_role *role, char *buf, size_t len)
{
	snprintf(buf, len, "%s %u",
		 role->kind == RDPS_ROLE_SERVER	   ? "server"
		 : role->kind == RDPS_ROLE_TRAINER ? "trainer"
						   : "machine",
		 role->id);
	return buf;
}

/* ---- Roles from the environment ---- */

/* -1 if name is unset; -2 (and err) if set but not a non-negative integer. */
static int64_t env_int(rdps_launch_getenv_fn get, void *ctx, const char *name, char *err,
		       size_t errlen)
{
	const char *v = get(ctx, name);
	char *end;
	unsigned long long x;

	if (!v)
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!*v || *v == '-' || *v == '+' || *end || errno || x > INT32_MAX) {
		snprintf(err, errlen, "%s='%s' is not a non-negative integer", name, v);
		return -2;
	}
	return (int64_t)x;
}

struct env_source {
	const char *source, *rank, *size[3], *local, *machine;
};

/* In order of precedence; see launch.h. */
static const struct env_source env_sources[] = {
	{ "RDPS_RANK", "RDPS_RANK", { "RDPS_WORLD_SIZE" }, "RDPS_LOCAL_RANK", NULL },
	{ "Open MPI", "OMPI_COMM_WORLD_RANK", { "OMPI_COMM_WORLD_SIZE" }, "OMPI_COMM_WORLD_LOCAL_RANK", NULL },
	{ "PMIx", "PMIX_RANK", { "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE" }, "SLURM_LOCALID", NULL },
	{ "MPICH (PMI)", "PMI_RANK", { "PMI_SIZE" }, "MPI_LOCALRANKID", NULL },
	{ "Slurm", "SLURM_PROCID", { "SLURM_NTASKS" }, "SLURM_LOCALID", NULL },
	{ "Kubernetes", NULL, { NULL }, NULL, "JOB_COMPLETION_INDEX" },
};

int rdps_launch_env_detect(rdps_launch_getenv_fn get, void *ctx, struct rdps_launch_env *env,
			   char *err, size_t errlen)
{
	*env = (struct rdps_launch_env){ .rank = -1, .size = -1, .local_rank = -1, .machine = -1 };
	for (size_t i = 0; i < sizeof(env_sources) / sizeof(env_sources[0]); i++) {
		const struct env_source *s = &env_sources[i];
		const char *key = s->rank ? s->rank : s->machine;
		int64_t v;

		if (!get(ctx, key))
			continue;
		env->source = s->source;
		if ((v = env_int(get, ctx, key, err, errlen)) == -2)
			return -EINVAL;
		if (s->rank)
			env->rank = v;
		else
			env->machine = v;
		for (int k = 0; k < 3 && s->size[k]; k++) {
			if ((v = env_int(get, ctx, s->size[k], err, errlen)) == -2)
				return -EINVAL;
			if (v >= 0) {
				env->size = v;
				break;
			}
		}
		if (s->local && (env->local_rank = env_int(get, ctx, s->local, err, errlen)) == -2)
			return -EINVAL;
		if (env->size == 0 || (env->size > 0 && env->rank >= env->size)) {
			snprintf(err, errlen, "%s: rank %lld is not below the world size %lld",
				 s->source, (long long)env->rank, (long long)env->size);
			return -EINVAL;
		}
		return 0;
	}
	snprintf(err, errlen,
		 "no launcher set a rank: expected one of RDPS_RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, "
		 "PMI_RANK, SLURM_PROCID or JOB_COMPLETION_INDEX");
	return -ENOENT;
}

int rdps_launch_env_role(const struct rdps_launch_layout *l, const struct rdps_launch_env *env,
			 struct rdps_launch_role *role, char *err, size_t errlen)
{
	if (env->rank < 0 && env->machine >= 0) {
		if (env->machine >= l->num_machines) {
			snprintf(err, errlen,
				 "%s: machine (pod index) %lld, but the layout has %u machine(s): run as many pods",
				 env->source, (long long)env->machine, l->num_machines);
			return -EINVAL;
		}
		role->kind = RDPS_ROLE_MACHINE;
		role->id = role->machine = (uint32_t)env->machine;
		role->rank = l->machines[env->machine].first_rank;
		return 0;
	}
	if (env->size >= 0 && env->size != l->world_size) {
		snprintf(err, errlen,
			 "%s started %lld process(es), but the layout needs %u: %u server(s) + %u trainer(s) "
			 "(see rdps launch --print-layout)",
			 env->source, (long long)env->size, l->world_size, l->num_servers, l->num_trainers);
		return -EINVAL;
	}
	if (env->rank < 0 || rdps_launch_layout_role(l, (uint32_t)env->rank, role)) {
		snprintf(err, errlen, "%s: rank %lld is not in the layout's %u processes",
			 env->source ? env->source : "environment", (long long)env->rank, l->world_size);
		return -EINVAL;
	}
	return 0;
}

/* ---- Command lines ---- */

/* The option name of a train argument ("-adv" and "--adv=x" give "adv"),
 * its length, and its inline value (after '=') or NULL. */
static const char *opt_name(const char *arg, size_t *len, const char **value)
{
	const char *eq;

	if (arg[0] != '-' || !arg[1] || (arg[1] == '-' && !arg[2]))
		return NULL;
	arg += arg[1] == '-' ? 2 : 1;
	eq = strchr(arg, '=');
	*len = eq ? (size_t)(eq - arg) : strlen(arg);
	*value = eq ? eq + 1 : NULL;
	return arg;
}

static bool opt_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && !strncmp(name, want, len);
}

int rdps_launch_check_train_args(char *const *args, int n, char *err, size_t errlen)
{
	static const char *const refused[] = { "ip_config", "rank", "num_trainers", "standalone" };

	for (int i = 0; i < n; i++) {
		const char *v, *name;
		size_t len;

		if (!(name = opt_name(args[i], &len, &v)))
			continue;
		for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
			if (opt_is(name, len, refused[k])) {
				snprintf(err, errlen,
					 "'%s' in the train arguments: the launcher sets --ip_config, --rank "
					 "and --num_trainers of every trainer itself (give --ip_config to rdps "
					 "launch, before '--')",
					 args[i]);
				return -EINVAL;
			}
	}
	return 0;
}

bool rdps_launch_keeps_servers(char *const *args, int n)
{
	for (int i = 0; i < n; i++) {
		const char *v, *name;
		size_t len;

		if ((name = opt_name(args[i], &len, &v)) && opt_is(name, len, "keep_servers"))
			return true;
	}
	return false;
}

/* Train options that the servers take too, under the same name; servers
 * get them as "--name value" whichever form the user wrote. */
static const char *const shared_opts[] = { "partition", "model_name", "hidden_dim", "gamma",
					   "lr", "optimizer", "transport", "ofi-provider", "seed" };
static const char *const shared_flags[] = { "--partition", "--model_name", "--hidden_dim", "--gamma",
					    "--lr", "--optimizer", "--transport", "--ofi-provider",
					    "--seed" };
/* ... and switches that shape the tables (DGL-KE's short forms too). */
static const char *const shared_switches[][3] = { { "de", "double_ent", "--double_ent" },
						  { "dr", "double_rel", "--double_rel" } };

/* --exec: a server without tables, or the trainer's command under env with
 * the job's variables (rdps.distributed.initialize reads them). */
static char **exec_role_argv(const struct rdps_launch_job *job, const struct rdps_launch_role *role)
{
	size_t max = (size_t)job->num_train_args + (size_t)job->num_server_args + 16;
	size_t text = strlen(job->ip_config) + (job->transport ? strlen(job->transport) : 4) + 192;
	char **argv = calloc(1, max * sizeof(char *) + text);
	char *p = (char *)(argv + max), *end = p + text;
	size_t k = 0;

	if (!argv)
		return NULL;
	if (role->kind == RDPS_ROLE_SERVER) {
		argv[k++] = (char *)job->exe;
		argv[k++] = "server";
		argv[k++] = "--ip_config";
		argv[k++] = (char *)job->ip_config;
		argv[k++] = "--server_id";
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "%u", role->id) + 1;
		if (job->transport) {
			argv[k++] = "--transport";
			argv[k++] = (char *)job->transport;
		}
		for (int i = 0; i < job->num_server_args; i++)
			argv[k++] = (char *)job->server_args[i];
	} else {
		argv[k++] = "/usr/bin/env";
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_IP_CONFIG=%s", job->ip_config) + 1;
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_RANK=%u", role->id) + 1;
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_NUM_TRAINERS=%u", job->layout->num_trainers) + 1;
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_NUM_SERVERS=%u", job->layout->num_servers) + 1;
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_TRANSPORT=%s",
			      job->transport ? job->transport : "auto") + 1;
		/* The trainer's machine (its ip_config line): a graph job's
		 * node_split hands it the part that machine's server holds. */
		argv[k++] = p;
		p += snprintf(p, (size_t)(end - p), "RDPS_MACHINE=%u", role->machine) + 1;
		for (int i = 0; i < job->num_train_args; i++)
			argv[k++] = (char *)job->train_args[i];
	}
	argv[k] = NULL;
	return argv;
}

char **rdps_launch_role_argv(const struct rdps_launch_job *job, const struct rdps_launch_role *role)
{
	/* Worst case: every train argument, the fixed ones, the server args. */
	size_t max = (size_t)job->num_train_args * 2 + (size_t)job->num_server_args + 16;
	char **argv = calloc(1, max * sizeof(char *) + 2 * 16);
	char *num = (char *)(argv + max), *num2 = num + 16;
	size_t k = 0;

	if (job->exec) {
		free(argv);
		return exec_role_argv(job, role);
	}
	if (!argv)
		return NULL;
	argv[k++] = (char *)job->exe;
	if (role->kind == RDPS_ROLE_SERVER) {
		snprintf(num, 16, "%u", role->id);
		argv[k++] = "server";
		argv[k++] = "--ip_config";
		argv[k++] = (char *)job->ip_config;
		argv[k++] = "--server_id";
		argv[k++] = num;
		for (int i = 0; i < job->num_train_args; i++) {
			const char *v, *name;
			size_t len;

			if (!(name = opt_name(job->train_args[i], &len, &v)))
				continue;
			for (size_t s = 0; s < sizeof(shared_switches) / sizeof(shared_switches[0]); s++)
				if (opt_is(name, len, shared_switches[s][0]) ||
				    opt_is(name, len, shared_switches[s][1]))
					argv[k++] = (char *)shared_switches[s][2];
			for (size_t s = 0; s < sizeof(shared_opts) / sizeof(shared_opts[0]); s++) {
				if (!opt_is(name, len, shared_opts[s]))
					continue;
				if (!v && i + 1 < job->num_train_args)
					v = job->train_args[++i];
				if (v) {
					argv[k++] = (char *)shared_flags[s];
					argv[k++] = (char *)v;
				}
				break;
			}
		}
		for (int i = 0; i < job->num_server_args; i++)
			argv[k++] = (char *)job->server_args[i];
	} else {
		snprintf(num, 16, "%u", role->id);
		snprintf(num2, 16, "%u", job->layout->num_trainers);
		argv[k++] = "train";
		for (int i = 0; i < job->num_train_args; i++)
			argv[k++] = (char *)job->train_args[i];
		argv[k++] = "--ip_config";
		argv[k++] = (char *)job->ip_config;
		argv[k++] = "--num_trainers";
		argv[k++] = num2;
		argv[k++] = "--rank";
		argv[k++] = num;
	}
	argv[k] = NULL;
	return argv;
}
