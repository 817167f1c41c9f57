// SPDX-License-Identifier: MIT
// needs-rdps-tool
// ctest-timeout: 300
/*
 * The step pipeline (rdps/train.h): it learns as well as the serial step
 * on the WordNet graph (test MRR within 0.01, both far above an untrained
 * model), and it really overlaps: while step k's kernel has not finished,
 * the server already served step k+1's pulls (the serial step, the
 * control, has posted none then).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps/train.h"
#include "rdps_test.h"

static char *dir;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void setup(void)
{
	dir = rdps_test_tmpdir("pipeline");
	cr_assert(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

TestSuite(pipeline, .init = setup, .fini = teardown, .timeout = 240);

static void wn_opts(struct rdps_train_opts *o, const char *data)
{
	rdps_train_opts_init(o);
	o->data_dir = data;
	o->standalone = true;
	o->model.name = "TransE_l2";
	o->model.hidden_dim = 100;
	o->model.gamma = 6.0f;
	o->model.adv = true;
	o->model.reg_coef = 1e-7f;
	o->batch_size = 1024;
	o->neg_sample_size = 64;
	o->lr = 0.1f;
	o->log_interval = 0;
	o->test = true;
	o->timeout_ms = 20000;
}

/*
 * One thread, standalone: both runs draw the same batches (sampling comes
 * before the pull in both orders), so they differ only by the pipeline's
 * staleness. 4000 steps are past the steep part of the curve (at 2000,
 * MRR ~0.31 and still rising, the two were 0.006 apart).
 */
Test(pipeline, same_mrr_as_the_serial_step_on_wordnet)
{
	struct rdps_wordnet_opts wo;
	struct rdps_dataset_stats st;
	struct rdps_train_opts o;
	struct rdps_train_result untrained, serial, piped;
	char err[1024], *data = path("wn");

	rdps_dataset_wordnet_defaults(&wo);
	cr_assert_eq(rdps_dataset_wordnet(data, &wo, &st, err, sizeof(err)), 0, "%s", err);
	wn_opts(&o, data);
	o.max_step = 0;
	cr_assert_eq(rdps_train_run(&o, &untrained, err, sizeof(err)), 0, "%s", err);
	o.max_step = 4000;
	o.no_pipeline = true;
	cr_assert_eq(rdps_train_run(&o, &serial, err, sizeof(err)), 0, "%s", err);
	o.no_pipeline = false;
	cr_assert_eq(rdps_train_run(&o, &piped, err, sizeof(err)), 0, "%s", err);
	cr_log_info("test MRR: untrained %.4f, serial %.4f, pipelined %.4f", untrained.test.mrr,
		    serial.test.mrr, piped.test.mrr);
	cr_assert(!serial.pipelined && piped.pipelined);
	cr_assert_eq(piped.steps_done, 4000);
	cr_assert_eq(piped.test.count, 10000);
	cr_assert_gt(serial.test.mrr, untrained.test.mrr + 0.2, "the serial run did not learn");
	cr_assert_lt(fabs(piped.test.mrr - serial.test.mrr), 0.01, "serial %.4f, pipelined %.4f",
		     serial.test.mrr, piped.test.mrr);
	free(data);
}

/* ---------------------------------------------------------------------- */

#define PAUSE_STEP 5 /* the step whose kernel the hook holds */

struct probe {
	struct rdps_client *obs; /* observer: the server's counters */
	uint64_t want;           /* pulls served if step PAUSE_STEP + 1's were */
	int wait_ms;             /* how long the hook waits for them */
	uint64_t seen;           /* pulls served while the kernel was held */
	uint64_t calls;          /* kernels seen */
	int err;
};

/* Holds step PAUSE_STEP's kernel (a slow kernel) until the server has
 * served step PAUSE_STEP + 1's pulls, or wait_ms passed. */
static void kernel_done(void *arg, uint32_t thread, uint64_t step)
{
	struct probe *p = arg;
	uint64_t deadline = rdps_now_ns() + (uint64_t)p->wait_ms * 1000000ull;
	struct rdps_server_stats st;

	p->calls++;
	if (thread != 0 || step != PAUSE_STEP)
		return;
	do {
		p->err = rdps_client_server_stats(p->obs, 0, &st);
		if (p->err)
			return;
		p->seen = st.requests[RDPS_REQ_PULL];
		if (p->seen >= p->want)
			return;
		usleep(2000);
	} while (rdps_now_ns() < deadline);
}

/* A run over TCP against one server: what the hook saw. */
static void run_probed(bool no_pipeline, int wait_ms, struct probe *p)
{
	char err[1024], sid[] = "0", text[64], *ipc, *log = path(no_pipeline ? "s-serial.log"
									 : "s-piped.log");
	char *data = path("kg");
	int port = rdps_test_free_ports(1), st;
	char *argv[] = { RDPS_BIN, "server", "--ip_config", NULL, "--server_id", sid,
			 "--transport", "tcp", "--table", "entity:1000:16", "--table",
			 "relation:12:16", NULL };
	struct rdps_client_params cp = { .transport = "tcp", .num_clients = 1, .timeout_ms = 20000,
					 .observer = true, .quiet = true };
	struct rdps_train_opts o;
	struct rdps_train_result r;
	pid_t srv;

	snprintf(text, sizeof(text), "127.0.0.1 %d 1\n", port);
	ipc = rdps_test_write(dir, no_pipeline ? "ipc-serial.txt" : "ipc-piped.txt", text);
	cr_assert(ipc);
	argv[3] = ipc;
	srv = rdps_test_spawn(argv, log);
	cp.ip_config = ipc;
	cr_assert_eq(rdps_client_create(&cp, &p->obs, err, sizeof(err)), 0, "%s", err);

	rdps_train_opts_init(&o);
	o.data_dir = data;
	o.ip_config = ipc;
	o.transport = "tcp";
	o.model.name = "TransE_l2";
	o.model.hidden_dim = 16;
	o.batch_size = 64;
	o.neg_sample_size = 8;
	o.max_step = 20;
	o.log_interval = 0;
	o.timeout_ms = 20000;
	o.no_pipeline = no_pipeline;
	o.kernel_done = kernel_done;
	o.hook_arg = p;
	/* One request per pull (1 server, rows far below a request's
	 * bound): steps 0..k pulled 2 (k + 1) times, entity and relation. */
	p->want = 2 * (PAUSE_STEP + 2);
	p->wait_ms = wait_ms;
	cr_assert_eq(rdps_train_run(&o, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.pipelined, !no_pipeline);
	cr_log_info("%s: %llu pulls served while step %d's kernel was held (step %d's %s); "
		    "net %.3f ms, blocked %.3f ms, hidden %.3f ms per step",
		    no_pipeline ? "serial" : "pipelined", (unsigned long long)p->seen, PAUSE_STEP,
		    PAUSE_STEP + 1, p->seen >= p->want ? "were among them" : "were not",
		    r.split.net_ms, r.split.network_ms, r.split.hidden_ms);
	rdps_client_destroy(p->obs);
	p->obs = NULL;
	cr_assert_eq(rdps_test_wait(srv, 10000, &st), 0, "server not shut down");
	free(ipc);
	free(log);
	free(data);
}

Test(pipeline, next_pull_is_served_while_the_kernel_runs)
{
	struct rdps_synth_opts so;
	struct rdps_dataset_stats st;
	struct probe piped = { 0 }, serial = { 0 };
	char err[512], *data = path("kg");

	rdps_dataset_synth_defaults(&so);
	so.num_entities = 1000;
	so.num_relations = 12;
	so.num_triples = 12000;
	so.num_communities = 8;
	so.num_valid = 200;
	so.num_test = 200;
	so.seed = 1;
	cr_assert_eq(rdps_dataset_synth(data, &so, &st, err, sizeof(err)), 0, "%s", err);
	free(data);

	/* Pipelined: step 6's pulls reach the server and are served while
	 * step 5's kernel is held (bounded: 20 s). */
	run_probed(false, 20000, &piped);
	cr_assert_eq(piped.err, 0, "server stats: %s", rdps_strerror(piped.err));
	cr_assert_eq(piped.calls, 20);
	cr_assert_geq(piped.seen, piped.want, "only %llu pulls served during step %d's kernel",
		      (unsigned long long)piped.seen, PAUSE_STEP);
	/* Control: the serial step has pulled steps 0..5 and no more; holding
	 * its kernel as long does not bring step 6's pulls. */
	run_probed(true, 1000, &serial);
	cr_assert_eq(serial.err, 0, "server stats: %s", rdps_strerror(serial.err));
	cr_assert_eq(serial.seen, serial.want - 2, "the serial step served %llu pulls by step %d's "
		     "kernel", (unsigned long long)serial.seen, PAUSE_STEP);
}
