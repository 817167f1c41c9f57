/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the training job (train.c, train_eval.c,
 * train_data.c, train_save.c). Not installed.
 *
 * A struct job is one rdps_train_run(); a struct worker one of its
 * threads, each one client of the store. Thread 0 of a trainer does the
 * trainer's single-threaded work (ranking, saving); the others wait for it
 * in the job's collectives.
 */
#ifndef RDPS_TRAINER_TRAIN_INTERNAL_H
#define RDPS_TRAINER_TRAIN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps/ipconfig.h"
#include "rdps/server.h"
#include "rdps/train.h"

#define EVAL_CHUNK_ROWS 8192u /* candidate rows pulled per evaluation round */
#define SAVE_CHUNK_ROWS 8192u
/* Bound on a wait for the job's other trainers without --timeout: they may
 * lag by the tail of training or a share of the evaluation. */
#define PEER_TIMEOUT_DEFAULT_MS 600000

/* One step's batch: sampled, its ids made unique, its rows pulled. */
struct step_buf {
	uint32_t *head, *rel, *tail, *neg; /* row indices into the pulled rows */
	uint64_t *ent_ids, *rel_ids;       /* sorted, unique: what is pulled */
	uint32_t n_ent, n_rel;
	float *ent_rows, *rel_rows;
	struct rdps_batch b;
	uint64_t rng;                      /* the sampler's state before this step */
	uint64_t t_post;                   /* its pull was posted (ns) */
	uint64_t pull_blocked_ns;          /* time in its pull calls */
};

/* Sums of step times (ns) over steps; see struct rdps_train_step_split. */
struct step_times {
	uint64_t steps;
	uint64_t sample, gather, kernel, pull, push; /* pull, push: time in their calls */
	uint64_t pull_flight;       /* a pull's post until its rows were in */
};

struct worker {
	struct job *j;
	uint32_t t;                 /* thread index */
	struct rdps_client *c;
	uint32_t ent_table, rel_table;
	uint64_t rng;
	/* this thread's positives: indices into j->train, reshuffled per epoch */
	uint32_t *order;
	uint64_t norder, cursor;
	/* batches: the step computed and (pipeline) the next one, pulled meanwhile */
	struct step_buf buf[2];
	uint64_t *keys;             /* 2 * nkeys: sorting a batch's ids */
	uint32_t nkeys;
	float *ent_grad, *rel_grad; /* of the step computed (pushes copy them out) */
	void *scratch;
	size_t scratch_size;
	struct rdps_pull_batch *pulls; /* the next step's pulls in flight */
	/* progress */
	uint64_t steps, positives;
	uint64_t negatives;         /* negative slots scored */
	uint64_t done_steps;        /* steps run by this call (after a resume: the rest) */
	uint64_t rolled_back;       /* pushed rows server restarts undid (at training end) */
	uint64_t reconnects;        /* of this thread's client (at training end) */
	double loss_sum;
	uint64_t loss_n;
	struct step_times iv;       /* this log interval's (thread 0: printed, reset) */
	struct step_times run;      /* the whole run's */
	int ret;
	pthread_t thread;
};

struct job {
	const struct rdps_train_opts *o;    /* as run: num_thread covers num_proc, data_dir
					     * resolved */
	const struct rdps_train_opts *user; /* as given (config.json) */
	struct rdps_train_result *res;
	struct rdps_model *model;
	uint32_t ent_dim, rel_dim;
	uint64_t num_entities;
	uint32_t num_relations;
	char dataset_name[128];
	char import_dir[4096];          /* a udd format's temporary directory, or "" */
	char data_dir[4200];            /* the raw layout read, when found from data_path */
	struct rdps_triples train;      /* this trainer's positives */
	struct rdps_triples all_train;  /* every train triple (filter), may alias train */
	struct rdps_triples valid, test;
	struct rdps_triples valid_eval, test_eval; /* the eval_percent share (may alias) */
	struct rdps_triple_set *filter; /* train + valid + test; NULL: raw ranking */
	uint32_t negs;                  /* negatives per chunk (with --neg_deg_sample: more) */
	bool interrupted;               /* o->stop was seen: save what there is */
	uint64_t stop_step;             /* the step thread 0 stopped at */
	char save_note[900];            /* interrupted: where the embeddings went */
	uint32_t *new_to_old;           /* NULL: ids are the original ones */
	uint64_t data_digest;           /* the data every trainer must share */
	bool start_failed;              /* the data did not load: only tell the others */
	struct rdps_ipconfig ipc;       /* standalone: the in-process server */
	struct rdps_server *srv;
	pthread_t srv_thread;
	uint32_t chunk;
	uint64_t t_start;
	pthread_mutex_t lock;
	pthread_cond_t cond;            /* local_sync(), and any failure */
	uint32_t sync_arrived;          /* threads in the current local_sync() */
	uint64_t sync_gen;              /* local_sync() rounds completed */
	int ret;                        /* first error */
	char err[640];
	struct worker *w;
};


/* ---- train_job.c: state shared by the job's threads and trainers ---- */

/* Records the job's first error (ret, message) and wakes the threads
 * waiting for each other: all stop. */
void rdps_tj_fail(struct job *j, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A barrier or (v non-NULL) an allreduce of n doubles over every client of
 * the job, once this trainer's threads are all there; what names it in
 * errors. 0 or the job's error. */
int rdps_tj_collective(struct worker *w, const char *what, double *v, size_t n);

/* "elapsed 1m 05s  ETA 3.2 s" after done of total units in secs. */
const char *rdps_tj_fmt_eta(char *buf, size_t len, double secs, double done, double total);

/* Waits until every thread of this trainer is here (or the job failed):
 * 0 or the job's error. */
int rdps_tj_local_sync(struct job *j);

/* How long a wait for the job's other trainers may take (--timeout, or
 * PEER_TIMEOUT_DEFAULT_MS). */
int rdps_tj_peer_timeout_ms(const struct rdps_train_opts *o);

/* The start barrier: every trainer arrived, none failed to load its data,
 * and the options that make one job agree (a trainer that differs is named
 * with the option). 0 or the job's error. */
int rdps_tj_start(struct worker *w);

/* ---- train_step.c: a thread's steps ---- */

/* The thread's batches, keys and scratch; freed by worker_free (also
 * half-made). */
int rdps_tj_worker_alloc(struct worker *w);
void rdps_tj_worker_free(struct worker *w);

/* The thread's client of the store and its tables. 0 or the job's error. */
int rdps_tj_connect_worker(struct worker *w);

/* The step split (per step, in ms) of summed step times. */
void rdps_tj_step_split(const struct job *j, const struct step_times *t,
			struct rdps_train_step_split *out);

/* The progress file of thread t (resume). */
void rdps_tj_progress_path(const struct rdps_train_opts *o, uint32_t t, char *buf, size_t len);

/* Trains until max_step (or o->stop): pulls, steps, pushes, progress,
 * validation during training. 0, -EINTR or the job's error. */
int rdps_tj_train_loop(struct worker *w);

/* Every thread: ranks this trainer's share of split (thread 0) and reduces
 * the metrics over the job into m; with per_rel the sums of each relation
 * into rel (thread 0). 0, -EINTR (o->stop) or the job's error. */
int rdps_tj_evaluate(struct worker *w, const struct rdps_triples *split, const char *name,
		     bool per_rel, struct rdps_eval_metrics *m,
		     struct rdps_train_relation_sums *rel);

/* Trainer 0, thread 0, after the final barrier: results.json and (unless
 * no_save_emb) the embeddings, dicts and config.json. 0 or the error (also
 * the job's). */
int rdps_tj_save_all(struct worker *w);

/* Trainer 0, thread 0, after o->stop: the embeddings reached, and where
 * they went in j->save_note. */
void rdps_tj_save_interrupted(struct worker *w);

/* The job's data: DGL-KE's data options to a raw layout in e->data_dir (a
 * udd format imported into j->import_dir, removed by remove_import), the
 * dataset or partition loaded, then the filter and eval shares. 0 or
 * -errno with err. */
int rdps_tj_resolve_data(struct job *j, struct rdps_train_opts *e, char *err, size_t errlen);
void rdps_tj_remove_import(struct job *j);
int rdps_tj_load_data(struct job *j, char *err, size_t errlen);
int rdps_tj_prepare_eval(struct job *j, char *err, size_t errlen);

/* save_path made (unless check_only) and writable, on trainer 0. */
int rdps_tj_check_save_path(const struct rdps_train_opts *o, char *err, size_t errlen);

static inline uint64_t rdps_tj_xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Uniform in [0, n) without modulo bias worth caring about (n < 2^32). */
static inline uint32_t rdps_tj_uniform(uint64_t *s, uint64_t n)
{
	return (uint32_t)(((rdps_tj_xorshift(s) >> 32) * n) >> 32);
}

/* qsort order of uint32_t. */
static inline int rdps_tj_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The run was asked to stop (a signal). */
static inline bool rdps_tj_stop_requested(const struct rdps_train_opts *o)
{
	return o->stop && *o->stop;
}

#endif /* RDPS_TRAINER_TRAIN_INTERNAL_H */
