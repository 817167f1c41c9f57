// SPDX-License-Identifier: MIT
/*
 * rdps launch's pure logic: which launcher's environment gives the rank
 * (each set of variables, and their precedence), the rank layout (DGL-KE
 * layout, dedicated trainer hosts, uneven servers per machine), roles from
 * the environment, and the server/trainer command lines. The tool's sources
 * are not a library, so the file under test is compiled in here.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "tools/launch_layout.c"

/* A fake environment: NULL-terminated "NAME=value" strings. */
static const char *fake_getenv(void *ctx, const char *name)
{
	size_t n = strlen(name);

	for (const char *const *e = ctx; *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static int detect(const char *const *vars, struct rdps_launch_env *env, char *err)
{
	return rdps_launch_env_detect(fake_getenv, (void *)vars, env, err, 256);
}

static void expect_env(const char *const *vars, const char *source, int64_t rank, int64_t size,
		       int64_t local, int64_t machine)
{
	struct rdps_launch_env env;
	char err[256];

	cr_assert_eq(detect(vars, &env, err), 0, "%s", err);
	cr_expect_str_eq(env.source, source);
	cr_expect_eq(env.rank, rank, "%s rank %lld", source, (long long)env.rank);
	cr_expect_eq(env.size, size, "%s size %lld", source, (long long)env.size);
	cr_expect_eq(env.local_rank, local, "%s local %lld", source, (long long)env.local_rank);
	cr_expect_eq(env.machine, machine, "%s machine %lld", source, (long long)env.machine);
}

Test(launch_env, open_mpi)
{
	const char *v[] = { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
			    "OMPI_COMM_WORLD_LOCAL_RANK=1", "PMIX_RANK=3", NULL };

	expect_env(v, "Open MPI", 3, 4, 1, -1);
}

Test(launch_env, pmix_takes_its_size_from_slurm_or_ompi)
{
	const char *a[] = { "PMIX_RANK=2", "SLURM_NTASKS=6", "SLURM_LOCALID=0", NULL };
	const char *b[] = { "PMIX_RANK=0", NULL };

	expect_env(a, "PMIx", 2, 6, 0, -1);
	expect_env(b, "PMIx", 0, -1, -1, -1);
}

Test(launch_env, mpich_pmi)
{
	const char *v[] = { "PMI_RANK=5", "PMI_SIZE=8", "MPI_LOCALRANKID=1", NULL };

	expect_env(v, "MPICH (PMI)", 5, 8, 1, -1);
}

Test(launch_env, slurm)
{
	const char *v[] = { "SLURM_PROCID=7", "SLURM_NTASKS=12", "SLURM_LOCALID=1",
			    "SLURM_NODEID=2", "SLURM_JOB_NODELIST=n[1-4]", NULL };

	expect_env(v, "Slurm", 7, 12, 1, -1);
}

Test(launch_env, kubernetes_index_is_a_machine)
{
	const char *v[] = { "JOB_COMPLETION_INDEX=2", "HOSTNAME=rdps-2", NULL };

	expect_env(v, "Kubernetes", -1, -1, -1, 2);
}

Test(launch_env, explicit_override_wins)
{
	const char *v[] = { "RDPS_RANK=1", "RDPS_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0",
			    "OMPI_COMM_WORLD_SIZE=9", NULL };

	expect_env(v, "RDPS_RANK", 1, 2, -1, -1);
}

/* mpirun inside an sbatch allocation: SLURM_PROCID=0 is inherited by every
 * rank, the MPI rank is the one that counts. */
Test(launch_env, mpi_before_an_inherited_slurm_procid)
{
	const char *v[] = { "SLURM_PROCID=0", "SLURM_NTASKS=1", "OMPI_COMM_WORLD_RANK=2",
			    "OMPI_COMM_WORLD_SIZE=4", NULL };

	expect_env(v, "Open MPI", 2, 4, -1, -1);
}

Test(launch_env, none_set)
{
	const char *v[] = { "HOME=/root", NULL };
	struct rdps_launch_env env;
	char err[256];

	cr_assert_eq(detect(v, &env, err), -ENOENT);
	cr_expect(strstr(err, "OMPI_COMM_WORLD_RANK") && strstr(err, "SLURM_PROCID"), "%s", err);
}

Test(launch_env, bad_values_name_the_variable)
{
	const char *a[] = { "OMPI_COMM_WORLD_RANK=x1", NULL };
	const char *b[] = { "SLURM_PROCID=1", "SLURM_NTASKS=-3", NULL };
	const char *c[] = { "PMI_RANK=4", "PMI_SIZE=4", NULL };
	const char *d[] = { "JOB_COMPLETION_INDEX=", NULL };
	struct rdps_launch_env env;
	char err[256];

	cr_assert_eq(detect(a, &env, err), -EINVAL);
	cr_expect(strstr(err, "OMPI_COMM_WORLD_RANK='x1'"), "%s", err);
	cr_assert_eq(detect(b, &env, err), -EINVAL);
	cr_expect(strstr(err, "SLURM_NTASKS='-3'"), "%s", err);
	cr_assert_eq(detect(c, &env, err), -EINVAL);
	cr_expect(strstr(err, "rank 4 is not below the world size 4"), "%s", err);
	cr_assert_eq(detect(d, &env, err), -EINVAL);
	cr_expect(strstr(err, "JOB_COMPLETION_INDEX=''"), "%s", err);
}

/* ---- layout ---- */

static struct rdps_ipconfig ipc;
static struct rdps_launch_layout lay;

static void make(const char *text, char *const *thosts, uint32_t n, uint32_t P)
{
	char err[256];

	cr_assert_eq(rdps_ipconfig_parse("ipc", text, &ipc, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_launch_layout_init(&lay, &ipc, thosts, n, P, err, sizeof(err)), 0, "%s", err);
}

static void fini(void)
{
	rdps_launch_layout_free(&lay);
	rdps_ipconfig_free(&ipc);
}

TestSuite(launch_layout, .fini = fini);

/* Every rank maps to a role and back, each server and trainer once. */
static void check_bijection(void)
{
	uint32_t seen_s = 0, seen_t = 0;

	for (uint32_t r = 0; r < lay.world_size; r++) {
		struct rdps_launch_role a, b;

		cr_assert_eq(rdps_launch_layout_role(&lay, r, &a), 0);
		if (a.kind == RDPS_ROLE_SERVER) {
			cr_assert_eq(rdps_launch_layout_server(&lay, a.id, &b), 0);
			seen_s++;
			/* A server runs on its ip_config machine. */
			cr_assert_eq(a.machine, ipc.servers[a.id].machine);
		} else {
			cr_assert_eq(a.kind, RDPS_ROLE_TRAINER);
			cr_assert_eq(rdps_launch_layout_trainer(&lay, a.id, &b), 0);
			seen_t++;
		}
		cr_assert_eq(b.rank, r, "role %d/%u: rank %u back to %u", a.kind, a.id, r, b.rank);
		cr_assert_eq(b.machine, a.machine);
	}
	cr_assert_eq(seen_s, lay.num_servers);
	cr_assert_eq(seen_t, lay.num_trainers);
	cr_assert_eq(rdps_launch_layout_role(&lay, lay.world_size, &(struct rdps_launch_role){ 0 }), -ERANGE);
}

static void expect_rank(uint32_t r, int kind, uint32_t id, uint32_t machine)
{
	struct rdps_launch_role role;

	cr_assert_eq(rdps_launch_layout_role(&lay, r, &role), 0);
	cr_expect_eq(role.kind, kind, "rank %u kind %d", r, role.kind);
	cr_expect_eq(role.id, id, "rank %u id %u, want %u", r, role.id, id);
	cr_expect_eq(role.machine, machine, "rank %u machine %u", r, role.machine);
}

/* DGL-KE: 2 machines, 1 server each, --num_client_proc 2. Trainers are
 * numbered round-robin over machines, so trainer j trains part j % 2, the
 * part of its own machine's server. */
Test(launch_layout, dglke_two_machines)
{
	make("10.0.0.1 30050 1\n10.0.0.2 30050 1\n", NULL, 0, 2);
	cr_assert_eq(lay.world_size, 6);
	cr_assert_eq(lay.num_trainers, 4);
	expect_rank(0, RDPS_ROLE_SERVER, 0, 0);
	expect_rank(1, RDPS_ROLE_TRAINER, 0, 0);
	expect_rank(2, RDPS_ROLE_TRAINER, 2, 0);
	expect_rank(3, RDPS_ROLE_SERVER, 1, 1);
	expect_rank(4, RDPS_ROLE_TRAINER, 1, 1);
	expect_rank(5, RDPS_ROLE_TRAINER, 3, 1);
	for (uint32_t j = 0; j < 4; j++) {
		struct rdps_launch_role r;

		cr_assert_eq(rdps_launch_layout_trainer(&lay, j, &r), 0);
		cr_expect_eq(r.machine, j % 2, "trainer %u on machine %u", j, r.machine);
	}
	check_bijection();
}

/* The quickstart: one machine with 2 servers and 2 trainers. */
Test(launch_layout, one_machine)
{
	make("127.0.0.1 30050 2\n", NULL, 0, 2);
	cr_assert_eq(lay.world_size, 4);
	expect_rank(0, RDPS_ROLE_SERVER, 0, 0);
	expect_rank(1, RDPS_ROLE_SERVER, 1, 0);
	expect_rank(2, RDPS_ROLE_TRAINER, 0, 0);
	expect_rank(3, RDPS_ROLE_TRAINER, 1, 0);
	check_bijection();
}

/* Uneven servers per machine (allowed by the format). */
Test(launch_layout, uneven_servers)
{
	make("a 30050 2\n# comment\nb 31000 1\nc\n", NULL, 0, 1);
	cr_assert_eq(lay.num_machines, 3);
	cr_assert_eq(lay.world_size, 7);
	expect_rank(0, RDPS_ROLE_SERVER, 0, 0);
	expect_rank(1, RDPS_ROLE_SERVER, 1, 0);
	expect_rank(2, RDPS_ROLE_TRAINER, 0, 0);
	expect_rank(3, RDPS_ROLE_SERVER, 2, 1);
	expect_rank(4, RDPS_ROLE_TRAINER, 1, 1);
	expect_rank(5, RDPS_ROLE_SERVER, 3, 2);
	expect_rank(6, RDPS_ROLE_TRAINER, 2, 2);
	cr_expect_str_eq(lay.machines[2].host, "c");
	check_bijection();
}

/* Dedicated servers: the ip_config machines run servers only, the trainer
 * hosts trainers only (the netns test's layout). */
Test(launch_layout, trainer_hosts)
{
	char *th[] = { "10.231.0.3" };

	make("10.231.0.1 30050 1\n10.231.0.2 30050 1\n", th, 1, 2);
	cr_assert_eq(lay.world_size, 4);
	cr_assert_eq(lay.num_trainer_machines, 1);
	expect_rank(0, RDPS_ROLE_SERVER, 0, 0);
	expect_rank(1, RDPS_ROLE_SERVER, 1, 1);
	expect_rank(2, RDPS_ROLE_TRAINER, 0, 2);
	expect_rank(3, RDPS_ROLE_TRAINER, 1, 2);
	cr_expect_str_eq(lay.machines[2].host, "10.231.0.3");
	check_bijection();
}

Test(launch_layout, bad_client_proc)
{
	char err[256];

	cr_assert_eq(rdps_ipconfig_parse("ipc", "h 1 1\n", &ipc, err, sizeof(err)), 0);
	cr_assert_eq(rdps_launch_layout_init(&lay, &ipc, NULL, 0, 0, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "--num_client_proc"), "%s", err);
}

/* ---- roles from the environment, end to end ---- */

static int env_role(const char *const *vars, struct rdps_launch_role *role, char *err)
{
	struct rdps_launch_env env;
	int ret = detect(vars, &env, err);

	return ret ? ret : rdps_launch_env_role(&lay, &env, role, err, 256);
}

Test(launch_layout, role_from_each_launcher)
{
	const char *ompi[] = { "OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=6", NULL };
	const char *slurm[] = { "SLURM_PROCID=3", "SLURM_NTASKS=6", "SLURM_LOCALID=0", NULL };
	const char *pmi[] = { "PMI_RANK=2", "PMI_SIZE=6", NULL };
	const char *k8s[] = { "JOB_COMPLETION_INDEX=1", NULL };
	struct rdps_launch_role r;
	char err[256];

	make("10.0.0.1 30050 1\n10.0.0.2 30050 1\n", NULL, 0, 2);
	cr_assert_eq(env_role(ompi, &r, err), 0, "%s", err);
	cr_expect(r.kind == RDPS_ROLE_TRAINER && r.id == 1 && r.machine == 1);
	cr_assert_eq(env_role(slurm, &r, err), 0, "%s", err);
	cr_expect(r.kind == RDPS_ROLE_SERVER && r.id == 1 && r.machine == 1);
	cr_assert_eq(env_role(pmi, &r, err), 0, "%s", err);
	cr_expect(r.kind == RDPS_ROLE_TRAINER && r.id == 2 && r.machine == 0);
	cr_assert_eq(env_role(k8s, &r, err), 0, "%s", err);
	cr_expect(r.kind == RDPS_ROLE_MACHINE && r.machine == 1 && r.rank == 3);
}

Test(launch_layout, wrong_world_size_or_pod_index)
{
	const char *ompi[] = { "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=3", NULL };
	const char *k8s[] = { "JOB_COMPLETION_INDEX=2", NULL };
	struct rdps_launch_role r;
	char err[256];

	make("10.0.0.1 30050 1\n10.0.0.2 30050 1\n", NULL, 0, 1);
	cr_assert_eq(env_role(ompi, &r, err), -EINVAL);
	cr_expect(strstr(err, "Open MPI started 3 process(es), but the layout needs 4: 2 server(s) + 2 trainer(s)"),
		  "%s", err);
	cr_assert_eq(env_role(k8s, &r, err), -EINVAL);
	cr_expect(strstr(err, "machine (pod index) 2, but the layout has 2 machine(s)"), "%s", err);
}

/* ---- command lines ---- */

static char *joined(char **argv)
{
	static char buf[2048];
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; argv[i]; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? " " : "", argv[i]);
	return buf;
}

Test(launch_layout, role_command_lines)
{
	char *train[] = { "--data", "d", "-partition=p", "--hidden_dim", "32", "-adv", "--lr=0.2",
			  "--max_step", "10", "-rc", "1e-7", "--transport", "tcp" };
	char *sargs[] = { "--init", "zeros" };
	struct rdps_launch_job job = { .exe = "/bin/rdps", .ip_config = "/ip.txt", .train_args = train,
				       .num_train_args = 13, .server_args = sargs, .num_server_args = 2,
				       .layout = &lay };
	struct rdps_launch_role r;
	char **argv;

	make("h 30050 2\n", NULL, 0, 2);
	rdps_launch_layout_server(&lay, 1, &r);
	argv = rdps_launch_role_argv(&job, &r);
	cr_expect_str_eq(joined(argv), "/bin/rdps server --ip_config /ip.txt --server_id 1 --partition p "
				       "--hidden_dim 32 --lr 0.2 --transport tcp --init zeros");
	free(argv);
	rdps_launch_layout_trainer(&lay, 1, &r);
	argv = rdps_launch_role_argv(&job, &r);
	cr_expect_str_eq(joined(argv), "/bin/rdps train --data d -partition=p --hidden_dim 32 -adv --lr=0.2 "
				       "--max_step 10 -rc 1e-7 --transport tcp --ip_config /ip.txt "
				       "--num_trainers 2 --rank 1");
	free(argv);
}

/* --transport ofi and its provider: servers and trainers must agree. */
Test(launch_layout, servers_get_the_ofi_provider)
{
	char *train[] = { "--data", "d", "--transport", "ofi", "--ofi-provider=tcp;ofi_rxm" };
	struct rdps_launch_job job = { .exe = "/bin/rdps", .ip_config = "/ip.txt", .train_args = train,
				       .num_train_args = 5, .layout = &lay };
	struct rdps_launch_role r;
	char **argv;

	make("h 30050 1\n", NULL, 0, 1);
	rdps_launch_layout_server(&lay, 0, &r);
	argv = rdps_launch_role_argv(&job, &r);
	cr_expect_str_eq(joined(argv), "/bin/rdps server --ip_config /ip.txt --server_id 0 "
				       "--transport ofi --ofi-provider tcp;ofi_rxm");
	free(argv);
}

/* -de / -dr shape the tables: the servers get them (long form). */
Test(launch_layout, servers_get_the_table_shaping_switches)
{
	char *train[] = { "--data", "d", "--model_name", "ComplEx", "-de", "--double_rel",
			  "-adv" };
	struct rdps_launch_job job = { .exe = "/bin/rdps", .ip_config = "/ip.txt", .train_args = train,
				       .num_train_args = 7, .layout = &lay };
	struct rdps_launch_role r;
	char **argv;

	make("h 30050 1\n", NULL, 0, 1);
	rdps_launch_layout_server(&lay, 0, &r);
	argv = rdps_launch_role_argv(&job, &r);
	cr_expect_str_eq(joined(argv), "/bin/rdps server --ip_config /ip.txt --server_id 0 "
				       "--model_name ComplEx --double_ent --double_rel");
	free(argv);
}

Test(launch_layout, launcher_owned_train_flags_are_refused)
{
	char *a[] = { "--data", "d", "--rank", "1" };
	char *b[] = { "-ip_config=x" };
	char *c[] = { "--standalone" };
	char *ok[] = { "--data", "d", "--keep_servers", "--ranking_is_not_rank" };
	char err[256];

	cr_assert_eq(rdps_launch_check_train_args(a, 4, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "'--rank'"), "%s", err);
	cr_assert_eq(rdps_launch_check_train_args(b, 1, err, sizeof(err)), -EINVAL);
	cr_assert_eq(rdps_launch_check_train_args(c, 1, err, sizeof(err)), -EINVAL);
	cr_assert_eq(rdps_launch_check_train_args(ok, 4, err, sizeof(err)), 0, "%s", err);
	cr_expect(rdps_launch_keeps_servers(ok, 4));
	cr_expect(!rdps_launch_keeps_servers(a, 4));
}
