// SPDX-License-Identifier: MIT
/* The training job's run: options, threads, the standalone server, the
 * result (steps: train_step.c; shared state and the start barrier:
 * train_job.c; evaluation: train_eval.c; data: train_data.c; files:
 * train_save.c). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps/server.h"
#include "rdps/train.h"
#include "train_internal.h"

void rdps_train_opts_init(struct rdps_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	rdps_model_params_init(&o->model);
	o->transport = "auto";
	o->num_trainers = 1;
	o->num_proc = 1;
	o->num_thread = 1;
	o->batch_size = 1024;
	o->batch_size_eval = 8;
	o->eval_interval = 10000;
	o->eval_percent = 1.0;
	o->neg_sample_size = 256;
	o->max_step = 80000;
	o->log_interval = 1000;
	o->lr = 0.01f;
	o->optimizer = RDPS_OPT_ADAGRAD_ROW;
	o->shutdown_servers = true;
	o->reconnect_ms = 120000;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	int ret;

	ret = rdps_tj_connect_worker(w);
	if (ret)
		goto out;
	/* Everyone connected, loaded its data and agrees on the job before
	 * anyone trains. */
	ret = rdps_tj_start(w);
	if (ret)
		goto out;
	if (w->t == 0)
		j->t_start = rdps_now_ns();
	ret = rdps_tj_train_loop(w);
	/* For the summary: each thread's own, as its client may go meanwhile. */
	w->rolled_back = rdps_client_rolled_back_rows(w->c);
	w->reconnects = rdps_client_reconnects(w->c);
	if (!ret)
		ret = rdps_tj_collective(w, "the barrier after training", NULL, 0);
	if (w->t == 0 && (!ret || j->interrupted)) {
		double secs = (rdps_now_ns() - j->t_start) / 1e9;
		uint64_t pos = 0;

		for (uint32_t t = 0; t < o->num_thread; t++)
			pos += j->w[t].positives;
		j->res->train_seconds = secs;
		j->res->steps_done = w->done_steps;
		j->res->pos_per_second = secs > 0 ? pos / secs : 0;
		j->res->negatives = w->negatives;
		j->res->pipelined = !o->no_pipeline;
		rdps_tj_step_split(j, &w->run, &j->res->split);
		printf("[trainer %u] training %s: %llu steps (to step %llu) x %u threads in %.1f s, "
		       "%.0f pos triples/s\n", o->rank, ret ? "interrupted" : "done",
		       (unsigned long long)w->done_steps,
		       (unsigned long long)(ret ? w->steps : o->max_step), o->num_thread, secs,
		       j->res->pos_per_second);
		/* Where thread 0's steps went (struct rdps_train_step_split). */
		printf("[trainer %u] step split: sample %.3f ms  gather %.3f ms  kernel %.3f ms  "
		       "optimizer %.3f ms  network %.3f ms  net %.3f ms  hidden %.3f ms  (thread 0's "
		       "mean per step; pipeline %s)\n", o->rank, j->res->split.sample_ms,
		       j->res->split.gather_ms, j->res->split.kernel_ms, j->res->split.optimizer_ms,
		       j->res->split.network_ms, j->res->split.net_ms, j->res->split.hidden_ms,
		       o->no_pipeline ? "off" : "on");
		{
			uint64_t lost = 0, reconnects = 0;

			/* What server restarts cost this trainer (each was
			 * also warned about when it happened). */
			for (uint32_t t = 0; t < o->num_thread; t++) {
				lost += j->w[t].rolled_back;
				reconnects += j->w[t].reconnects;
			}
			if (reconnects)
				printf("[trainer %u] servers restarted or lost during training: %llu "
				       "reconnect(s); %llu pushed rows rolled back or lost\n", o->rank,
				       (unsigned long long)reconnects, (unsigned long long)lost);
		}
		fflush(stdout);
	}
	if (!ret && o->valid) {
		ret = rdps_tj_evaluate(w, &j->valid_eval, "valid", o->eval_per_relation, &j->res->valid,
			       j->res->valid_rel);
		j->res->have_valid = !ret;
	}
	if (!ret && o->test) {
		ret = rdps_tj_evaluate(w, &j->test_eval, "test", o->eval_per_relation, &j->res->test,
			       j->res->test_rel);
		j->res->have_test = !ret;
	}
	/* Every trainer is done with the servers; trainer 0 then saves (the
	 * others need not wait for that) and shuts them down. */
	if (!ret)
		ret = rdps_tj_collective(w, "the final barrier", NULL, 0);
	if (!ret && o->save_path && o->rank == 0 && w->t == 0)
		ret = rdps_tj_save_all(w);
	if (ret && j->interrupted && o->rank == 0 && w->t == 0)
		rdps_tj_save_interrupted(w);
	if (!ret && !o->standalone && o->shutdown_servers && o->rank == 0 && w->t == 0) {
		ret = rdps_client_shutdown_servers(w->c);
		if (ret)
			rdps_tj_fail(j, ret, "shutting the servers down: %s", rdps_client_errmsg(w->c));
	}
out:
	w->ret = ret;
	/* Leaving closes this client's connections: the others' collectives
	 * then fail at once instead of waiting for a timeout. */
	rdps_client_pull_batch_destroy(w->pulls);
	w->pulls = NULL;
	rdps_client_destroy(w->c);
	w->c = NULL;
	return NULL;
}

static void *server_main(void *arg)
{
	rdps_server_run(arg);
	return NULL;
}

static int start_standalone_server(struct job *j)
{
	const struct rdps_train_opts *o = j->o;
	struct rdps_server_config cfg = { .transport = "inproc", .server_id = 0, .num_tables = 2,
					  .seed = o->seed };
	float r = rdps_model_emb_init(j->model);
	char err[512];
	int ret;

	ret = rdps_ipconfig_parse("standalone", "standalone 1 1", &j->ipc, err, sizeof(err));
	if (ret)
		return ret;
	cfg.ipc = &j->ipc;
	cfg.tables[0] = (struct rdps_server_table_config){
		.name = "entity", .num_rows = j->num_entities, .dim = j->ent_dim,
		.init = RDPS_INIT_UNIFORM, .init_range = r, .optimizer = o->optimizer, .lr = o->lr };
	cfg.tables[1] = (struct rdps_server_table_config){
		.name = "relation", .num_rows = j->num_relations, .dim = j->rel_dim,
		.init = RDPS_INIT_UNIFORM, .init_range = r, .optimizer = o->optimizer, .lr = o->lr };
	{
		/* TransR: vector and projection start apart and keep their
		 * own row-wise Adagrad state, as DGL-KE's two arrays. */
		struct rdps_model_rel_part parts[RDPS_MODEL_REL_PARTS_MAX];
		unsigned n = rdps_model_relation_parts(j->model, parts);

		for (unsigned k = 0; n > 1 && k < n && k < RDPS_ROW_PARTS_MAX; k++)
			cfg.tables[1].parts[k] = (struct rdps_row_part){ parts[k].width,
									 parts[k].init_range };
		cfg.tables[1].num_parts = n > 1 ? n : 0;
	}
	ret = rdps_server_create(&cfg, &j->srv, err, sizeof(err));
	if (ret) {
		rdps_tj_fail(j, ret, "in-process store: %s", err);
		return ret;
	}
	ret = -pthread_create(&j->srv_thread, NULL, server_main, j->srv);
	if (ret) {
		rdps_server_destroy(j->srv);
		j->srv = NULL;
	}
	return ret;
}

void rdps_train_result_free(struct rdps_train_result *res)
{
	if (!res)
		return;
	free(res->relation_names);
	free(res->test_rel);
	free(res->valid_rel);
	res->relation_names = NULL;
	res->test_rel = NULL;
	res->valid_rel = NULL;
	res->num_relations = 0;
}

/* An option error (opts as run: num_thread counts num_proc's too). */
static int check_opts(const struct rdps_train_opts *o, char *err, size_t errlen)
{
	if (!o->standalone && !o->ip_config) {
		snprintf(err, errlen, "give --ip_config: %u trainers need servers", o->num_trainers);
		return -EINVAL;
	}
	if (!o->num_trainers || o->rank >= o->num_trainers) {
		snprintf(err, errlen, "--rank %u must be below --num_trainers %u", o->rank,
			 o->num_trainers);
		return -EINVAL;
	}
	if (o->resume && !o->checkpoint_dir) {
		snprintf(err, errlen, "--resume needs --checkpoint-dir (where the progress was saved)");
		return -EINVAL;
	}
	if (o->checkpoint_dir && !o->resume && !o->check_only && mkdir(o->checkpoint_dir, 0755) &&
	    errno != EEXIST) {
		snprintf(err, errlen, "cannot create --checkpoint-dir %s: %s", o->checkpoint_dir,
			 strerror(errno));
		return -errno;
	}
	if (o->standalone && o->num_trainers != 1) {
		snprintf(err, errlen, "--standalone runs one trainer (use --num_thread for more threads)");
		return -EINVAL;
	}
	if (!o->num_thread || o->num_thread > 256 || !o->batch_size || !o->neg_sample_size) {
		snprintf(err, errlen, "--num_proc x --num_thread must be 1..256, --batch_size and "
			 "--neg_sample_size positive");
		return -EINVAL;
	}
	if (!o->batch_size_eval || !(o->eval_percent > 0 && o->eval_percent <= 1)) {
		snprintf(err, errlen, "--batch_size_eval must be positive and --eval_percent in (0, 1]");
		return -EINVAL;
	}
	if (o->valid && !o->eval_interval) {
		snprintf(err, errlen, "--eval_interval must be positive");
		return -EINVAL;
	}
	if (o->neg_deg_sample_eval && !o->no_eval_filter) {
		/* DGL-KE asserts the same */
		snprintf(err, errlen, "--neg_deg_sample_eval needs --no_eval_filter (as in DGL-KE: "
			 "negatives drawn by degree are not filtered)");
		return -EINVAL;
	}
	if (o->async_update && o->sync_push) {
		snprintf(err, errlen, "--async_update and --sync contradict each other (pushes "
			 "overlap the next step, or are waited for)");
		return -EINVAL;
	}
	if (o->neg_sample_size_eval > UINT32_MAX / 2 || o->batch_size_eval > UINT32_MAX / 2) {
		snprintf(err, errlen, "--neg_sample_size_eval and --batch_size_eval must be below 2^31");
		return -EINVAL;
	}
	/* Every thread's progress must be there before anything connects, and the
	 * error names the first missing one (not whichever thread lost a race). */
	for (uint32_t t = 0; o->resume && t < o->num_thread; t++) {
		char path[4096];

		rdps_tj_progress_path(o, t, path, sizeof(path));
		if (access(path, R_OK)) {
			int e = errno;

			snprintf(err, errlen, "--resume: cannot read %s: %s", path, strerror(e));
			return -ENOENT;
		}
	}
	return 0;
}

int rdps_train_run(const struct rdps_train_opts *uo, struct rdps_train_result *res,
		   char *err, size_t errlen)
{
	struct rdps_train_opts eff = *uo, *o = &eff;
	struct job j = { .o = o, .user = uo, .res = res };
	int ret, load_ret;

	memset(res, 0, sizeof(*res));
	err[0] = '\0';
	/* DGL-KE's processes are threads here: each one client with its own
	 * sampler, as each of DGL-KE's processes has */
	if (!eff.num_proc || eff.num_proc > 256 || eff.num_thread > 256) {
		snprintf(err, errlen, "--num_proc and --num_thread must be 1..256");
		return -EINVAL;
	}
	eff.num_thread *= eff.num_proc;
	eff.num_proc = 1;
	/* no servers named: dglke_train's single-machine training */
	if (!eff.ip_config && eff.num_trainers == 1)
		eff.standalone = true;
	ret = check_opts(o, err, errlen);
	if (ret)
		return ret;
	ret = rdps_tj_check_save_path(o, err, errlen);
	if (ret)
		return ret;
	pthread_mutex_init(&j.lock, NULL);
	pthread_cond_init(&j.cond, NULL);
	ret = rdps_model_create(&j.model, &o->model);
	if (ret) {
		snprintf(err, errlen,
			 ret == -EINVAL ? "invalid model '%s' with hidden_dim %u%s (known models: %s; "
					  "ComplEx needs an even hidden_dim)"
					: "cannot create model '%s' (hidden_dim %u%s): %s",
			 o->model.name, o->model.hidden_dim,
			 o->model.double_ent && o->model.double_rel ? ", -de and -dr"
			 : o->model.double_ent ? " and -de" : o->model.double_rel ? " and -dr" : "",
			 ret == -EINVAL ? rdps_model_names() : rdps_strerror(ret));
		goto out;
	}
	j.ent_dim = rdps_model_entity_dim(j.model);
	j.rel_dim = rdps_model_relation_dim(j.model);
	j.chunk = o->neg_chunk_size ? o->neg_chunk_size : o->neg_sample_size;
	if (j.chunk > o->batch_size)
		j.chunk = o->batch_size;
	/* DGL-KE's --neg_deg_sample doubles the negatives (chunk more by degree) */
	j.negs = o->neg_sample_size + (o->neg_deg_sample ? j.chunk : 0);
	ret = rdps_tj_resolve_data(&j, o, err, errlen);
	if (ret)
		goto out;
	ret = load_ret = rdps_tj_load_data(&j, err, errlen);
	if (!ret)
		ret = load_ret = rdps_tj_prepare_eval(&j, err, errlen);
	if (ret && (o->standalone || o->num_trainers == 1 || o->check_only))
		goto out;
	if (!ret && o->check_only) {
		/* what only the servers can say (tables, other trainers) is left */
		if (!o->standalone) {
			struct rdps_ipconfig ipc;

			ret = rdps_ipconfig_load(o->ip_config, &ipc, err, errlen);
			if (ret)
				goto out;
			rdps_ipconfig_free(&ipc);
		}
		rdps_info("trainer %u: --check-only: %s: %llu entities, %u relations, %llu train "
			  "triples for this trainer; %s (entity rows %u, relation rows %u floats)%s%s",
			  o->rank, o->data_dir, (unsigned long long)j.num_entities, j.num_relations,
			  (unsigned long long)j.train.count, rdps_model_name(j.model), j.ent_dim,
			  j.rel_dim, o->save_path && o->rank == 0 ? "; --save_path " : "",
			  o->save_path && o->rank == 0 ? o->save_path : "");
		goto out;
	}
	if (ret) {
		/* The others would wait for this trainer until their --timeout and
		 * then could not say why: it joins the start barrier to tell them,
		 * and fails with its own reason. */
		rdps_err("trainer %u: %s; telling the job's other trainers at the start barrier",
			 o->rank, err);
		j.start_failed = true;
	}
	if (o->standalone && (ret = start_standalone_server(&j))) {
		snprintf(err, errlen, "%s", j.err[0] ? j.err : rdps_strerror(ret));
		goto out;
	}
	j.w = calloc(o->num_thread, sizeof(*j.w));
	if (!j.w) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t t = 0; t < o->num_thread; t++) {
		struct worker *w = &j.w[t];

		w->j = &j;
		w->t = t;
		w->rng = (o->seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(o->rank * o->num_thread + t) + 1) * 0xbf58476d1ce4e5b9ull;
		if (!w->rng)
			w->rng = 1;
		ret = rdps_tj_worker_alloc(w);
		if (ret) {
			snprintf(err, errlen, "out of memory for the batch buffers");
			goto out_workers;
		}
	}
	for (uint32_t t = 0; t < o->num_thread; t++) {
		ret = -pthread_create(&j.w[t].thread, NULL, worker_main, &j.w[t]);
		if (ret) {
			rdps_tj_fail(&j, ret, "cannot start thread %u", t);
			snprintf(err, errlen, "trainer %u: cannot start thread %u: %s", o->rank, t,
				 rdps_strerror(ret));
			for (uint32_t k = 0; k < t; k++)
				pthread_join(j.w[k].thread, NULL);
			goto out_workers;
		}
	}
	for (uint32_t t = 0; t < o->num_thread; t++)
		pthread_join(j.w[t].thread, NULL);
	ret = load_ret ? load_ret : j.ret; /* err still holds why the data did not load */
	if (!load_ret && ret && j.interrupted)
		snprintf(err, errlen, "trainer %u: interrupted at step %llu of %llu%s%s", o->rank,
			 (unsigned long long)j.stop_step, (unsigned long long)o->max_step,
			 o->rank == 0 ? ": " : " (only trainer 0 saves embeddings)",
			 o->rank == 0 ? j.save_note : "");
	else if (!load_ret && ret)
		snprintf(err, errlen, "trainer %u: %s", o->rank, j.err);
	if (j.interrupted)
		ret = -EINTR;
out_workers:
	for (uint32_t t = 0; t < o->num_thread; t++)
		rdps_tj_worker_free(&j.w[t]);
	free(j.w);
out:
	if (j.srv) {
		rdps_server_stop(j.srv);
		pthread_join(j.srv_thread, NULL);
		rdps_server_destroy(j.srv);
	}
	rdps_ipconfig_free(&j.ipc);
	rdps_triple_set_destroy(j.filter);
	if (j.valid_eval.ids != j.valid.ids)
		rdps_dataset_triples_free(&j.valid_eval);
	if (j.test_eval.ids != j.test.ids)
		rdps_dataset_triples_free(&j.test_eval);
	if (j.train.ids != j.all_train.ids)
		rdps_dataset_triples_free(&j.train);
	rdps_dataset_triples_free(&j.all_train);
	rdps_dataset_triples_free(&j.valid);
	rdps_dataset_triples_free(&j.test);
	free(j.new_to_old);
	rdps_tj_remove_import(&j);
	rdps_model_destroy(j.model);
	pthread_cond_destroy(&j.cond);
	pthread_mutex_destroy(&j.lock);
	if (ret)
		rdps_train_result_free(res);
	return ret;
}
