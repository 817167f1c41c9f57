// SPDX-License-Identifier: MIT
// ctest-labels: faults
/*
 * Checkpoints: a round trip restores rows and optimizer state exactly; a
 * damaged newest checkpoint (bit flip, truncation, missing file) is refused
 * with its reason and the previous one used; an interrupted write (a
 * leftover temporary directory) is never used; a server resumes from its
 * checkpoint and keeps serving.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvstore/checkpoint.h"
#include "rdps/client.h"
#include "rdps/server.h"
#include "rdps_test.h"

#define ROWS 50
#define DIM 6

static char *dir;

static void setup(void)
{
	dir = rdps_test_tmpdir("ckpt");
	cr_assert(dir);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
}

static struct rdps_shard *shard(int opt, uint64_t seed)
{
	struct rdps_shard_params p = { .name = "entity", .dim = DIM, .num_rows = 100, .lo = 20,
				       .hi = 20 + ROWS, .init_range = 0.5f, .seed = seed,
				       .optimizer = opt, .lr = 0.3f };
	struct rdps_shard *s;

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	return s;
}

/* A few pushes so rows and Adagrad state are not the initial ones. */
static void train(struct rdps_shard *s, float scale)
{
	uint64_t ids[4] = { 20, 33, 33, 69 };
	float g[4 * DIM];

	for (int i = 0; i < 4 * DIM; i++)
		g[i] = scale * (float)(i % 7 - 3);
	cr_assert_eq(rdps_shard_apply(s, ids, g, 4), 0);
}

static void snapshot(struct rdps_shard *s, float *rows, float *state)
{
	rdps_shard_export(s, rows, state);
}

TestSuite(checkpoint, .init = setup, .fini = teardown, .timeout = 60);

/* rdps_ckpt_restore() of one shard, for the seq it restored. */
static int restore_seq(uint32_t server_id, struct rdps_shard **s, uint64_t *seq, char *err,
		       size_t errlen)
{
	struct rdps_ckpt_info info;
	int ret = rdps_ckpt_restore(dir, server_id, s, 1, &info, err, errlen);

	if (!ret) {
		*seq = info.seq;
		free(info.job.pushed_rows);
	}
	return ret;
}

Test(checkpoint, round_trip_restores_rows_and_state)
{
	struct rdps_shard *a = shard(RDPS_OPT_ADAGRAD, 1), *b = shard(RDPS_OPT_ADAGRAD, 2);
	float ra[ROWS * DIM], sa[ROWS * DIM], rb[ROWS * DIM], sb[ROWS * DIM];
	uint64_t seq = 0, bytes;
	char err[512];

	train(a, 1.0f);
	cr_assert_eq(rdps_ckpt_write(dir, 3, &a, 1, NULL, 1, 0, &bytes, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(bytes, 2 * ROWS * DIM * 4);
	cr_assert_eq(rdps_ckpt_last_seq(dir, 3), 1);
	cr_assert_eq(restore_seq(3, &b, &seq, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seq, 1);
	snapshot(a, ra, sa);
	snapshot(b, rb, sb);
	cr_assert_arr_eq(ra, rb, sizeof(ra));
	cr_assert_arr_eq(sa, sb, sizeof(sa));
	/* Same state: the next update gives the same rows. */
	train(a, 0.5f);
	train(b, 0.5f);
	snapshot(a, ra, sa);
	snapshot(b, rb, sb);
	cr_assert_arr_eq(ra, rb, sizeof(ra));
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
}

static void damage_seq(uint64_t seq, const char *file, int how)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/server-0/ckpt-%llu/%s", dir, (unsigned long long)seq,
		 file);
	if (how == 0) { /* flip a payload bit */
		unsigned char c;

		fd = open(path, O_RDWR);
		cr_assert_geq(fd, 0, "%s", path);
		cr_assert_eq(pread(fd, &c, 1, 100), 1);
		c ^= 0x10;
		cr_assert_eq(pwrite(fd, &c, 1, 100), 1);
		close(fd);
	} else if (how == 1) {
		cr_assert_eq(truncate(path, 80), 0);
	} else {
		cr_assert_eq(unlink(path), 0);
	}
}

static void damage(const char *file, int how)
{
	damage_seq(2, file, how);
}

static void previous_is_used(int how, const char *file, const char *reason)
{
	struct rdps_shard *a = shard(RDPS_OPT_ADAGRAD_ROW, 1), *b = shard(RDPS_OPT_ADAGRAD_ROW, 9);
	float r1[ROWS * DIM], s1[ROWS], rb[ROWS * DIM], sb[ROWS];
	uint64_t seq;
	char err[512];

	train(a, 1.0f);
	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, NULL, 1, 0, NULL, err, sizeof(err)), 0, "%s", err);
	snapshot(a, r1, s1);
	train(a, 2.0f);
	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, NULL, 2, 0, NULL, err, sizeof(err)), 0, "%s", err);
	damage(file, how);
	cr_assert_eq(restore_seq(0, &b, &seq, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seq, 1, "%s: the damaged checkpoint 2 was used", reason);
	snapshot(b, rb, sb);
	cr_assert_arr_eq(rb, r1, sizeof(rb));
	cr_assert_arr_eq(sb, s1, sizeof(sb));
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
}

Test(checkpoint, bit_flip_falls_back_to_previous)
{
	previous_is_used(0, "entity.rows", "bit flip");
}

Test(checkpoint, truncation_falls_back_to_previous)
{
	previous_is_used(1, "entity.state", "truncation");
}

Test(checkpoint, missing_manifest_falls_back_to_previous)
{
	previous_is_used(2, "manifest.json", "missing manifest");
}

Test(checkpoint, all_damaged_is_an_error_and_none_is_not_found)
{
	struct rdps_shard *a = shard(RDPS_OPT_SGD, 1);
	uint64_t seq;
	char err[512], path[4096];

	cr_assert_eq(restore_seq(0, &a, &seq, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "no checkpoint"), "%s", err);
	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, NULL, 1, 0, NULL, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/server-0/ckpt-1/entity.rows", dir);
	cr_assert_eq(truncate(path, 10), 0);
	cr_assert_eq(restore_seq(0, &a, &seq, err, sizeof(err)), -EBADMSG);
	cr_assert(strstr(err, "damaged") && strstr(err, "entity.rows"), "%s", err);
	rdps_shard_destroy(a);
}

Test(checkpoint, interrupted_write_is_ignored_and_old_ones_pruned)
{
	struct rdps_shard *a = shard(RDPS_OPT_SGD, 1), *b = shard(RDPS_OPT_SGD, 5);
	uint64_t seq;
	char err[512], path[4096];
	struct stat st;

	for (uint64_t q = 1; q <= 3; q++) {
		train(a, (float)q);
		cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, NULL, q, 0, NULL, err, sizeof(err)), 0, "%s", err);
	}
	snprintf(path, sizeof(path), "%s/server-0/ckpt-1", dir);
	cr_assert_neq(stat(path, &st), 0, "checkpoint 1 should be pruned (keep 2)");
	/* A crash during checkpoint 4 leaves only its temporary directory. */
	snprintf(path, sizeof(path), "%s/server-0/ckpt-4.tmp-999", dir);
	cr_assert_eq(mkdir(path, 0755), 0);
	cr_assert_eq(restore_seq(0, &b, &seq, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seq, 3);
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
}

Test(checkpoint, mismatched_shape_is_refused)
{
	struct rdps_shard *a = shard(RDPS_OPT_SGD, 1), *b = shard(RDPS_OPT_ADAGRAD, 1);
	uint64_t seq;
	char err[512];

	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, NULL, 1, 0, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(restore_seq(0, &b, &seq, err, sizeof(err)), -EBADMSG);
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
}

static void *serve(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

/* A whole server over TCP: push, checkpoint on request, stop, resume. */
Test(checkpoint, server_resumes_from_its_checkpoint)
{
	struct rdps_ipconfig ipc;
	struct rdps_server_config cfg = { .transport = "tcp", .ipc = &ipc, .num_tables = 1,
					  .checkpoint_dir = dir };
	struct rdps_client_params cp = { .transport = "tcp", .servers = &ipc, .num_clients = 1,
					 .timeout_ms = 10000, .quiet = true };
	struct rdps_server *srv;
	struct rdps_client *c;
	pthread_t th;
	char text[64], err[640];
	uint64_t ids[3] = { 1, 7, 99 };
	float g[3 * DIM], before[3 * DIM], after[3 * DIM];

	snprintf(text, sizeof(text), "127.0.0.1 %d\n", rdps_test_free_ports(1));
	cr_assert_eq(rdps_ipconfig_parse("t", text, &ipc, err, sizeof(err)), 0);
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = 100,
		.dim = DIM, .init_range = 0.1f, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.1f };
	for (int i = 0; i < 3 * DIM; i++)
		g[i] = (float)(i + 1);
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&th, NULL, serve, srv), 0);
	cr_assert_eq(rdps_client_create(&cp, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 3), 0);
	cr_assert_eq(rdps_client_checkpoint(c), 0, "%s", rdps_client_errmsg(c));
	cr_assert_eq(rdps_client_pull(c, 0, ids, 3, before), 0);
	/* Applied after the checkpoint: lost by the restart below. */
	cr_assert_eq(rdps_client_push(c, 0, ids, g, 3), 0);
	cr_assert_eq(rdps_client_flush(c), 0);
	rdps_client_destroy(c);
	rdps_server_stop(srv);
	pthread_join(th, NULL);
	rdps_server_destroy(srv);

	cfg.resume = true;
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_create(&th, NULL, serve, srv), 0);
	cr_assert_eq(rdps_client_create(&cp, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_client_pull(c, 0, ids, 3, after), 0);
	cr_assert_arr_eq(before, after, sizeof(before), "resumed rows differ from the checkpoint");
	rdps_client_destroy(c);
	rdps_server_stop(srv);
	pthread_join(th, NULL);
	rdps_server_destroy(srv);
	rdps_ipconfig_free(&ipc);
}

static bool ckpt_exists(uint64_t seq)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/server-0/ckpt-%llu", dir, (unsigned long long)seq);
	return !stat(path, &st);
}

/* The shape of the single server's shard below: every row. */
static struct rdps_shard *whole_shard(void)
{
	struct rdps_shard_params p = { .name = "entity", .dim = DIM, .num_rows = ROWS, .lo = 0,
				       .hi = ROWS, .init_range = 0.5f, .seed = 9,
				       .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.3f };
	struct rdps_shard *s;

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	return s;
}

static void train_at(struct rdps_shard *s, float scale)
{
	uint64_t ids[4] = { 0, 13, 13, ROWS - 1 };
	float g[4 * DIM];

	for (int i = 0; i < 4 * DIM; i++)
		g[i] = scale * (float)(i % 5 - 2);
	cr_assert_eq(rdps_shard_apply(s, ids, g, 4), 0);
}

/*
 * A server that fell back past a damaged checkpoint at --resume goes on
 * writing checkpoints: numbered after the newest present (the damaged one),
 * not after the one restored (that name is taken: "Directory not empty"),
 * and the restored one is kept as the fallback instead of the damaged one.
 */
Test(checkpoint, checkpoints_after_a_fallback_follow_the_newest)
{
	struct rdps_ipconfig ipc;
	struct rdps_server_config cfg = { .transport = "inproc", .ipc = &ipc, .num_tables = 1,
					  .checkpoint_dir = dir };
	float r1[ROWS * DIM], r3[ROWS * DIM], r4[ROWS * DIM], rb[ROWS * DIM], sb[ROWS];
	struct rdps_shard *b = whole_shard();
	struct rdps_server *srv;
	uint64_t seq;
	char err[640];

	cr_assert_eq(rdps_ipconfig_parse("t", "127.0.0.1 1\n", &ipc, err, sizeof(err)), 0);
	cfg.tables[0] = (struct rdps_server_table_config){ .name = "entity", .num_rows = ROWS,
		.dim = DIM, .init_range = 0.5f, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.3f };
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	train_at(rdps_server_shard(srv, 0), 1.0f);
	cr_assert_eq(rdps_server_checkpoint(srv, err, sizeof(err)), 0, "%s", err);
	snapshot(rdps_server_shard(srv, 0), r1, sb);
	train_at(rdps_server_shard(srv, 0), 2.0f);
	cr_assert_eq(rdps_server_checkpoint(srv, err, sizeof(err)), 0, "%s", err);
	rdps_server_destroy(srv);
	damage_seq(2, "entity.rows", 0);

	cfg.resume = true;
	cr_assert_eq(rdps_server_create(&cfg, &srv, err, sizeof(err)), 0, "%s", err);
	snapshot(rdps_server_shard(srv, 0), rb, sb);
	cr_assert_arr_eq(rb, r1, sizeof(rb), "checkpoint 1 was not the one restored");
	train_at(rdps_server_shard(srv, 0), 3.0f);
	cr_assert_eq(rdps_server_checkpoint(srv, err, sizeof(err)), 0,
		     "first checkpoint after the fallback: %s", err);
	snapshot(rdps_server_shard(srv, 0), r3, sb);
	cr_assert(ckpt_exists(3) && ckpt_exists(1) && !ckpt_exists(2),
		  "kept should be 3 and the restored 1 (2 is damaged): 1 %d, 2 %d, 3 %d",
		  ckpt_exists(1), ckpt_exists(2), ckpt_exists(3));
	train_at(rdps_server_shard(srv, 0), 4.0f);
	cr_assert_eq(rdps_server_checkpoint(srv, err, sizeof(err)), 0,
		     "second checkpoint after the fallback: %s", err);
	snapshot(rdps_server_shard(srv, 0), r4, sb);
	rdps_server_destroy(srv);

	/* Both are restorable: the newest, and the previous once it is damaged. */
	cr_assert_eq(rdps_ckpt_last_seq(dir, 0), 4);
	cr_assert_eq(restore_seq(0, &b, &seq, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seq, 4);
	snapshot(b, rb, sb);
	cr_assert_arr_eq(rb, r4, sizeof(rb));
	damage_seq(4, "entity.state", 1);
	cr_assert_eq(restore_seq(0, &b, &seq, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seq, 3);
	snapshot(b, rb, sb);
	cr_assert_arr_eq(rb, r3, sizeof(rb));
	rdps_shard_destroy(b);
	rdps_ipconfig_free(&ipc);
}

/* Rewrites server 0's manifest of checkpoint seq through edit(). */
static void edit_manifest(uint64_t seq, void (*edit)(json_t *m))
{
	char path[4096];
	json_error_t je;
	json_t *m;

	snprintf(path, sizeof(path), "%s/server-0/ckpt-%llu/manifest.json", dir,
		 (unsigned long long)seq);
	m = json_load_file(path, 0, &je);
	cr_assert(m, "%s: %s", path, je.text);
	edit(m);
	cr_assert_eq(json_dump_file(m, path, JSON_INDENT(2)), 0);
	json_decref(m);
}

static void job_of_four(json_t *m)
{
	json_object_set_new(json_object_get(m, "job"), "num_clients", json_integer(4));
}

static void as_before_push_counts(json_t *m)
{
	json_object_del(m, "job");
	json_object_del(m, "time_unix_ms");
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The manifest keeps the job's push counts and its time in milliseconds;
 * malformed counts make the checkpoint damaged (the previous one is used);
 * a manifest from before push counts restores with the counts unknown.
 */
Test(checkpoint, push_counts_and_time_round_trip)
{
	struct rdps_shard *a = shard(RDPS_OPT_SGD, 1), *b = shard(RDPS_OPT_SGD, 2);
	uint64_t c1[3] = { 5, 0, 7 }, c2[3] = { 6, 1, 9 }, t0, t1;
	struct rdps_ckpt_job j1 = { 3, c1 }, j2 = { 3, c2 };
	struct rdps_ckpt_info info;
	char err[512];

	t0 = wall_ms();
	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, &j1, 1, 0, NULL, err, sizeof(err)), 0, "%s", err);
	t1 = wall_ms();
	cr_assert_eq(rdps_ckpt_write(dir, 0, &a, 1, &j2, 2, 1, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rdps_ckpt_restore(dir, 0, &b, 1, &info, err, sizeof(err)), 0, "%s", err);
	cr_assert(info.seq == 2 && info.job_known && info.job.num_clients == 3);
	cr_assert_arr_eq(info.job.pushed_rows, c2, sizeof(c2));
	free(info.job.pushed_rows);

	edit_manifest(2, job_of_four); /* 4 clients, 3 counts */
	cr_assert_eq(rdps_ckpt_restore(dir, 0, &b, 1, &info, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(info.seq, 1, "malformed counts were accepted");
	cr_assert(info.job_known && info.job.num_clients == 3);
	cr_assert_arr_eq(info.job.pushed_rows, c1, sizeof(c1));
	cr_assert(info.time_unix_ms >= t0 && info.time_unix_ms <= t1,
		  "written at %llu, between %llu and %llu", (unsigned long long)info.time_unix_ms,
		  (unsigned long long)t0, (unsigned long long)t1);
	free(info.job.pushed_rows);

	edit_manifest(1, as_before_push_counts);
	cr_assert_eq(rdps_ckpt_restore(dir, 0, &b, 1, &info, err, sizeof(err)), 0, "%s", err);
	cr_assert(info.seq == 1 && !info.job_known && !info.job.num_clients);
	cr_assert(info.time_unix_ms / 1000 >= t0 / 1000 && info.time_unix_ms / 1000 <= t1 / 1000,
		  "time_unix not used");
	free(info.job.pushed_rows);
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
}
