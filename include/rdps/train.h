/* SPDX-License-Identifier: MIT */
/*
 * rdps train: the training job, standalone or distributed (what DGL-KE's
 * dglke_train / dglke_dist_train do).
 *
 * A trainer process runs num_thread threads; each is one client of the job
 * (client id rank * num_thread + thread). Each thread samples positive
 * triples from its share of the trainer's partition, draws chunked
 * negatives, pulls the rows the batch needs (deduplicated, in id order),
 * computes loss and gradients with the model, and pushes the gradients
 * asynchronously; the servers apply their optimizer. Standalone mode runs
 * the same loop against an in-process server (inproc transport).
 *
 * Before training, every client meets at a start barrier (an allreduce on
 * server 0, bounded by timeout_ms): a trainer whose data did not load joins
 * it only to say so, and trainer 0's values of the options that must agree
 * across the job (model, dims, gamma, -adv, regularization, batch and
 * negative sampling, max_step, resume, test/valid/eval_per_relation, the
 * partition) are compared by every trainer; then all refuse alike, naming
 * the option and the trainers that differ. A timed-out wait names what it
 * waited for and the trainers that may be missing.
 *
 * After training: filtered evaluation (each trainer ranks its share of the
 * test triples against every entity, pulled in chunks, skipping those that
 * make a triple of train, valid or test, whichever split is evaluated, as
 * DGL-KE's filter does; the metric sums are
 * reduced with an allreduce, on request those of every relation too, in
 * pieces of RDPS_ALLREDUCE_MAX values), then trainer 0 saves the embeddings
 * as .npy in the original entities.dict / relations.dict order.
 */
#ifndef RDPS_TRAIN_H
#define RDPS_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdps/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rdps_train_opts {
	const char *data_dir;       /* dataset in the raw layout (rdps's --data), or
				     * NULL: found from data_path, dataset, format */
	/* DGL-KE's way to name the data (when data_dir is NULL):
	 *  format "built_in" (NULL): the raw layout in data_path/dataset (or in
	 *    data_path itself if it holds entities.dict and no dataset is given);
	 *  "raw_udd_<order>": data_files (train [valid test]) of names in
	 *    data_path, columns in <order> (hrt, htr, rht, rth, thr, trh);
	 *  "udd_<order>": data_files (entity dict, relation dict, train [valid
	 *    test]), triples of ids.
	 * A udd dataset is imported into a temporary raw layout for the run. */
	const char *data_path;
	const char *dataset;        /* its name (saved files are named by it);
				     * NULL: the last part of the data's path */
	const char *format;
	const char *data_files[6];  /* NULL-terminated */
	const char *delimiter;      /* of the data files (udd formats); NULL: tab */
	const char *partition_dir;  /* partition of that dataset (distributed) */
	const char *save_path;      /* where embeddings, config.json and
				     * results.json go (trainer 0); NULL: none.
				     * Checked (created, writable) before anything
				     * else runs */
	bool no_save_emb;           /* with save_path: results.json only */
	const char *ip_config;      /* servers (distributed) */
	const char *transport;      /* "auto" (NULL), "tcp", "verbs" */
	int read_consistency;       /* enum rdps_read_consistency */
	bool standalone;            /* in-process store, no servers (also when
				     * ip_config is NULL and num_trainers 1) */
	uint32_t rank;              /* this trainer, 0 .. num_trainers-1 */
	uint32_t num_trainers;
	uint32_t num_proc;          /* DGL-KE's processes: num_proc * num_thread
				     * training threads (clients), each with its
				     * own sampler and share of the triples */
	uint32_t num_thread;        /* threads (clients) per trainer (per num_proc) */
	struct rdps_model_params model;
	uint32_t batch_size;        /* positives per step */
	uint32_t neg_sample_size;   /* negatives per chunk */
	uint32_t neg_chunk_size;    /* positives sharing negatives; 0: neg_sample_size */
	bool neg_deg_sample;        /* each chunk also gets chunk-size negatives drawn
				     * in proportion to their degree (the head, or
				     * tail, of a random train triple) */
	uint64_t max_step;          /* steps of each thread */
	uint32_t log_interval;      /* steps between progress lines */
	float lr;                   /* standalone: the in-process server's lr */
	int optimizer;              /* standalone: enum rdps_optimizer */
	uint64_t seed;
	bool sync_push;             /* flush every step's pushes at its end:
				     * deterministic runs */
	bool no_pipeline;           /* the serial step (pull, compute, push);
				     * default: the pipeline, see below */
	bool async_update;          /* DGL-KE's -async_update: pushes overlap the next
				     * step (what rdps does unless sync_push) */
	uint32_t force_sync_interval; /* every this many steps each thread flushes
				     * its pushes and waits for the trainer's other
				     * threads; 0: never (rdps train sets 1000 with
				     * --num_proc > 1 unless given, as DGL-KE) */
	bool test;                  /* evaluate on test */
	bool valid;                 /* evaluate on valid (after training, and every
				     * eval_interval steps) */
	uint64_t eval_interval;     /* with valid: steps between evaluations during
				     * training (DGL-KE's default 10000) */
	double eval_percent;        /* (0, 1]: rank that share of each split, a
				     * fixed random selection (the same on every
				     * trainer) */
	uint64_t neg_sample_size_eval; /* 0: rank against every entity; else
				     * against that many distinct entities drawn
				     * per batch of batch_size_eval triples */
	uint32_t batch_size_eval;   /* triples sharing one drawn candidate set */
	bool neg_deg_sample_eval;   /* a batch's candidates also hold the batch's
				     * true entities (DGL-KE's degree-based
				     * negatives); needs no_eval_filter */
	bool no_eval_filter;        /* raw ranking: only the true entity is skipped */
	bool eval_per_relation;     /* also the sums of each relation (see the
				     * result); every trainer of the job must
				     * set it, or none (checked at the start
				     * barrier: -EINVAL) */
	bool shutdown_servers;      /* trainer 0 stops the servers at the end */
	int timeout_ms;             /* bound on each wait: for a server (0: 60 s),
				     * and for the other trainers at the start
				     * barrier (0: 600 s); later barriers wait
				     * for the longer of this and 600 s */
	const struct rdps_secret *secret; /* the job's shared secret, or NULL */
	int reconnect_ms;           /* reconnect to a lost server for this long (0: fail) */
	const char *checkpoint_dir; /* progress of each thread (step, sampler state),
				     * written every log_interval steps; NULL: none */
	bool resume;                /* continue from the progress in checkpoint_dir */
	bool check_only;            /* check options, data, partition, save path and
				     * ip_config, then return (nothing connects) */
	/* Tracing and tests: called by each training thread right after the
	 * model kernel of step (before the step's pushes; with the pipeline,
	 * step + 1's pull is in flight then). NULL: none. */
	void (*kernel_done)(void *arg, uint32_t thread, uint64_t step);
	void *hook_arg;
	const volatile sig_atomic_t *stop; /* when it becomes non-zero (a signal
				     * handler), training stops: trainer 0 saves
				     * the embeddings reached into save_path and
				     * the run returns -EINTR saying where */
};

/*
 * The step pipeline (unless no_pipeline). Each thread keeps two batches
 * (ids, rows) and runs step k as
 *
 *     sample step k+1, post its entity and relation pulls
 *     compute step k (the model kernel)      <- step k+1's pull in flight
 *     wait for step k+1's rows
 *     push step k's gradients (asynchronous: they drain during step k+1)
 *
 * so step k+1's rows are read before step k's gradients are pushed: they
 * miss this thread's last step, and are at most one step stale (step k-1's
 * pushes were sent before, on the same connections). Sampling draws the
 * same batches in both orders. Every flush (sync_push, force_sync_interval,
 * evaluation, checkpoint, the barrier after training) comes between two
 * steps, when no pull is in flight: the last step's pushes are applied
 * before the embeddings are evaluated or saved.
 */

/* Where a step's time went: thread 0's mean per step over the run, in ms.
 * Standalone, rows come from the in-process store (gather) and its
 * optimizer runs in the push (optimizer); distributed, both are network. */
struct rdps_train_step_split {
	double sample_ms;      /* drawing positives and negatives */
	double gather_ms;      /* unique ids, row indices, gradient buffers zeroed
				* (standalone: also the rows pulled) */
	double kernel_ms;      /* the model's loss and gradients */
	double optimizer_ms;   /* standalone: pushes (the store applies them) */
	double network_ms;     /* distributed: blocked in pull calls and pushes */
	/* distributed: the step's network time, measured: its pull from the
	 * call that posted it until its rows were in, plus its pushes. */
	double net_ms;
	/* net_ms - network_ms: how long the thread computed while the pull was
	 * in flight, instead of waiting. Exact when the thread still had to
	 * wait for the rows (the pull needed all that time); when they were
	 * in already, at most this was hidden. 0 without the pipeline. */
	double hidden_ms;
};

/* DGL-KE's defaults where it has one. */
void rdps_train_opts_init(struct rdps_train_opts *o);

/* The filtered metric sums of one relation's test triples, by side. */
struct rdps_train_relation_sums {
	struct rdps_eval_sums tail;     /* queries (h, r, ?); count = its triples */
	struct rdps_eval_sums head;     /* queries (?, r, t) */
};

struct rdps_train_result {
	uint64_t steps_done;            /* steps of thread 0 in this run */
	double train_seconds;
	double pos_per_second;          /* positive triples per second, this trainer */
	double last_loss;               /* mean loss of the last log interval */
	uint64_t negatives;             /* negative entities scored by thread 0 */
	uint64_t forced_syncs;          /* force_sync_interval waits of thread 0 */
	uint64_t valid_evals;           /* evaluations on valid during training */
	bool pipelined;                 /* the step pipeline ran (not no_pipeline) */
	struct rdps_train_step_split split; /* thread 0's step, averaged */
	bool have_test, have_valid;
	struct rdps_eval_metrics test;  /* reduced over all trainers */
	struct rdps_eval_metrics valid;
	/* With o->eval_per_relation and test or valid (else 0 / NULL): entry
	 * r of test_rel / valid_rel (when have_test / have_valid) holds the
	 * sums of relation id r (relations.dict ids; partitions keep them),
	 * reduced over all trainers like the overall metrics; relation_names[r]
	 * is its name. Owned by the result: rdps_train_result_free(). */
	uint32_t num_relations;
	char **relation_names;
	struct rdps_train_relation_sums *test_rel;
	struct rdps_train_relation_sums *valid_rel;
};

/* Runs the job for this trainer. Returns 0, or -errno with a reason in err
 * (bad options, a table not matching the model, a damaged dataset file or a
 * partition of another dataset, a server that failed; -ETIMEDOUT: trainers
 * missing at the start barrier; -EINVAL: options differing across the job;
 * -ECANCELED: another trainer's data did not load). *res is overwritten
 * (free what a previous run left in it first); after an error it holds
 * nothing to free. */
int rdps_train_run(const struct rdps_train_opts *o, struct rdps_train_result *res,
		   char *err, size_t errlen);

/* Frees the per-relation arrays of a result and zeroes them; a result
 * without them (or NULL) is fine. */
void rdps_train_result_free(struct rdps_train_result *res);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_TRAIN_H */
