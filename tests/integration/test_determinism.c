// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * A deterministic training job (one trainer thread, --sync: every step's
 * pushes are flushed before the next step pulls) gives bit-identical
 * embeddings over every network transport: what a transport pulls and
 * pushes must be exactly what TCP does. The host's counterpart of the
 * soft-RoCE suite's tcp-vs-verbs run (tests/softroce/verbs.sh), same job:
 * tcp against ofi (libfabric's tcp;ofi_rxm on loopback, one-sided pulls),
 * and against ofi with two-sided pulls (RDPS_OFI_PULLS=msg, the fallback
 * for providers or EFA devices without READ). Skipped where libfabric has
 * no such provider. Control: a different trainer seed changes the
 * embeddings, so the comparison does see a difference.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ofi_env.h"
#include "rdps_test.h"

static char *dir;

/* One server and one trainer over transport; embeddings into out-<tag>. */
static void train(const char *transport, const char *tag, const char *seed)
{
	char ipc_text[64], *ipc, kg[512], out[512], slog[512], tlog[512], name[64];
	char *sargv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", "0",
			  "--transport", (char *)transport, "--quiet", "--table", "entity:2000:32",
			  "--table", "relation:16:32", "--gamma", "6", "--lr", "0.1", "--seed", "9",
			  NULL };
	char *targv[] = { RDPS_BIN, "train", "--data", kg, "--ip_config", NULL, "--transport",
			  (char *)transport, "--model_name", "TransE_l2", "--hidden_dim", "32",
			  "--gamma", "6", "--batch_size", "256", "--neg_sample_size", "32",
			  "--max_step", "200", "--log_interval", "0", "--seed", (char *)seed,
			  "--sync", "--save_path", out, NULL };
	pid_t srv, trn;
	int st;

	snprintf(ipc_text, sizeof(ipc_text), "127.0.0.1 %d 1\n", rdps_test_free_ports(1));
	snprintf(name, sizeof(name), "ipc-%s", tag);
	ipc = rdps_test_write(dir, name, ipc_text);
	sargv[3] = targv[5] = ipc;
	snprintf(kg, sizeof(kg), "%s/kg", dir);
	snprintf(out, sizeof(out), "%s/out-%s", dir, tag);
	snprintf(slog, sizeof(slog), "%s/server-%s.log", dir, tag);
	snprintf(tlog, sizeof(tlog), "%s/train-%s.log", dir, tag);
	srv = rdps_test_spawn(sargv, slog);
	trn = rdps_test_spawn(targv, tlog);
	cr_assert_gt(srv, 0);
	cr_assert_gt(trn, 0);
	cr_assert_eq(rdps_test_wait(trn, 120000, &st), 0, "the %s trainer hung", tag);
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "the %s trainer failed:\n%s", tag,
		  rdps_test_slurp(tlog));
	cr_assert_eq(rdps_test_wait(srv, 20000, &st), 0, "the %s server did not exit", tag);
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "the %s server failed:\n%s", tag,
		  rdps_test_slurp(slog));
	free(ipc);
}

/* Whether out-a and out-b hold the same bytes for file. */
static bool same(const char *a, const char *b, const char *file)
{
	char pa[512], pb[512], *x, *y;
	size_t lx, ly;
	FILE *f;
	bool eq;

	snprintf(pa, sizeof(pa), "%s/out-%s/%s", dir, a, file);
	snprintf(pb, sizeof(pb), "%s/out-%s/%s", dir, b, file);
	f = fopen(pa, "rb");
	cr_assert(f, "no %s", pa);
	x = malloc(1 << 20);
	y = malloc(1 << 20);
	lx = fread(x, 1, 1 << 20, f);
	fclose(f);
	f = fopen(pb, "rb");
	cr_assert(f, "no %s", pb);
	ly = fread(y, 1, 1 << 20, f);
	fclose(f);
	cr_assert_gt(lx, 16 * 32 * 4, "%s is too short", pa);
	eq = lx == ly && !memcmp(x, y, lx);
	free(x);
	free(y);
	return eq;
}

Test(determinism, tcp_and_ofi_give_bit_identical_embeddings, .timeout = 300)
{
	if (!rdps_test_ofi_available())
		cr_skip_test("libfabric has no RDM provider with RMA within FI_PROVIDER=%s",
			     getenv("FI_PROVIDER"));
	dir = rdps_test_tmpdir("determinism");
	cr_assert(dir);
	{
		char kg[512];

		snprintf(kg, sizeof(kg), "%s/kg", dir);
		rdps_test_synth_kg(kg, 2000, 16, 20000, 3, NULL, 0);
	}
	train("tcp", "tcp", "5");
	train("ofi", "ofi", "5");
	cr_assert(same("tcp", "ofi", "kg_TransE_l2_entity.npy"),
		  "tcp and ofi entity embeddings differ");
	cr_assert(same("tcp", "ofi", "kg_TransE_l2_relation.npy"),
		  "tcp and ofi relation embeddings differ");
	setenv("RDPS_OFI_PULLS", "msg", 1);
	train("ofi", "ofi-msg", "5");
	unsetenv("RDPS_OFI_PULLS");
	cr_assert(same("tcp", "ofi-msg", "kg_TransE_l2_entity.npy"),
		  "tcp and ofi (two-sided pulls) entity embeddings differ");
	cr_assert(same("tcp", "ofi-msg", "kg_TransE_l2_relation.npy"),
		  "tcp and ofi (two-sided pulls) relation embeddings differ");
	/* The control: another trainer seed, other embeddings. */
	train("tcp", "tcp-seed6", "6");
	cr_assert(!same("tcp", "tcp-seed6", "kg_TransE_l2_entity.npy"),
		  "the comparison sees no difference between two seeds");
	rdps_test_rmtree(dir);
	free(dir);
}
