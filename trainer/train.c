// SPDX-License-Identifier: MIT
/* The training job: sampling, pull/compute/push steps, evaluation, export. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "rdps/client.h"
#include "rdps/common.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps/server.h"
#include "rdps/train.h"

#define EVAL_CHUNK_ROWS 8192u /* candidate rows pulled per evaluation round */
#define SAVE_CHUNK_ROWS 8192u
/* Bound on a wait for the job's other trainers without --timeout: they may
 * lag by the tail of training or a share of the evaluation. */
#define PEER_TIMEOUT_DEFAULT_MS 600000

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

struct job;

struct worker {
	struct job *j;
	uint32_t t;                 /* thread index */
	struct rdps_client *c;
	uint32_t ent_table, rel_table;
	uint64_t rng;
	/* this thread's positives: indices into j->train, reshuffled per epoch */
	uint32_t *order;
	uint64_t norder, cursor;
	/* batch */
	uint32_t *head, *rel, *tail, *neg, *tmp;
	uint64_t *ent_ids, *rel_ids;
	uint32_t n_ent, n_rel;
	float *ent_rows, *rel_rows, *ent_grad, *rel_grad;
	void *scratch;
	size_t scratch_size;
	/* progress */
	uint64_t steps, positives;
	uint64_t negatives;         /* negative slots scored */
	uint64_t done_steps;        /* steps run by this call (after a resume: the rest) */
	uint64_t rolled_back;       /* pushed rows server restarts undid (at training end) */
	uint64_t reconnects;        /* of this thread's client (at training end) */
	double loss_sum;
	uint64_t loss_n;
	uint64_t pull_ns, push_ns, comp_ns;
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

static void job_fail(struct job *j, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int peer_timeout_ms(const struct rdps_train_opts *o);
static int job_collective(struct worker *w, const char *what, double *v, size_t n);
static int evaluate(struct worker *w, const struct rdps_triples *split, const char *name,
		    bool per_rel, struct rdps_eval_metrics *m, struct rdps_train_relation_sums *rel);

static void job_fail(struct job *j, int ret, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&j->lock);
	if (!j->ret) {
		j->ret = ret;
		va_start(ap, fmt);
		vsnprintf(j->err, sizeof(j->err), fmt, ap);
		va_end(ap);
	}
	/* Threads in local_sync() stop waiting for one that failed. */
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* Waits until every thread of this trainer got here, so that the server's
 * collectives (bounded by --timeout) measure how far apart the trainers
 * are, not this trainer's own work before them. Returns 0, or the job's
 * error once a thread failed instead of coming (each either comes or fails:
 * its own waits are bounded). */
static int local_sync(struct job *j)
{
	uint64_t gen;
	int ret;

	pthread_mutex_lock(&j->lock);
	gen = j->sync_gen;
	if (++j->sync_arrived == j->o->num_thread) {
		j->sync_arrived = 0;
		j->sync_gen++;
		pthread_cond_broadcast(&j->cond);
	}
	while (gen == j->sync_gen && !j->ret)
		pthread_cond_wait(&j->cond, &j->lock);
	ret = gen == j->sync_gen ? j->ret : 0;
	pthread_mutex_unlock(&j->lock);
	return ret;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Uniform in [0, n) without modulo bias worth caring about (n < 2^32). */
static inline uint32_t uniform(uint64_t *s, uint64_t n)
{
	return (uint32_t)(((xorshift(s) >> 32) * n) >> 32);
}

static void shuffle(uint32_t *a, uint64_t n, uint64_t *rng)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t k = ((xorshift(rng) >> 11) % i);
		uint32_t t = a[i - 1];

		a[i - 1] = a[k];
		a[k] = t;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts and deduplicates ids[0..n) into out (as u64), returns the count. */
static uint32_t unique_ids(uint32_t *ids, uint32_t n, uint64_t *out)
{
	uint32_t m = 0;

	qsort(ids, n, sizeof(uint32_t), cmp_u32);
	for (uint32_t i = 0; i < n; i++)
		if (!m || out[m - 1] != ids[i])
			out[m++] = ids[i];
	return m;
}

/* Index of id in the sorted unique list. */
static inline uint32_t index_of(const uint64_t *u, uint32_t n, uint32_t id)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (u[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---------------------------------------------------------------------- */

static int worker_alloc(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t B = o->batch_size, nchunks = (B + j->chunk - 1) / j->chunk;
	uint32_t negs = nchunks * j->negs;
	uint32_t max_ent = 2 * B + negs;

	w->head = malloc(B * sizeof(uint32_t));
	w->rel = malloc(B * sizeof(uint32_t));
	w->tail = malloc(B * sizeof(uint32_t));
	w->neg = malloc(negs * sizeof(uint32_t));
	w->tmp = malloc(max_ent * sizeof(uint32_t));
	w->ent_ids = malloc(max_ent * sizeof(uint64_t));
	w->rel_ids = malloc(B * sizeof(uint64_t));
	w->ent_rows = aligned_alloc(64, RDPS_ALIGN_UP((size_t)max_ent * j->ent_dim * 4, 64));
	w->ent_grad = aligned_alloc(64, RDPS_ALIGN_UP((size_t)max_ent * j->ent_dim * 4, 64));
	w->rel_rows = aligned_alloc(64, RDPS_ALIGN_UP((size_t)B * j->rel_dim * 4, 64));
	w->rel_grad = aligned_alloc(64, RDPS_ALIGN_UP((size_t)B * j->rel_dim * 4, 64));
	w->scratch_size = rdps_model_scratch_size(j->model, j->chunk, j->negs, max_ent, B);
	w->scratch = malloc(w->scratch_size);
	if (!w->head || !w->rel || !w->tail || !w->neg || !w->tmp || !w->ent_ids ||
	    !w->rel_ids || !w->ent_rows || !w->ent_grad || !w->rel_rows || !w->rel_grad ||
	    !w->scratch)
		return -ENOMEM;
	/* This thread's share of the trainer's positives. */
	for (uint64_t i = w->t; i < j->train.count; i += j->o->num_thread)
		w->norder++;
	w->order = malloc((w->norder ? w->norder : 1) * sizeof(uint32_t));
	if (!w->order)
		return -ENOMEM;
	for (uint64_t i = w->t, k = 0; i < j->train.count; i += j->o->num_thread)
		w->order[k++] = (uint32_t)i;
	return 0;
}

static void worker_free(struct worker *w)
{
	free(w->head);
	free(w->rel);
	free(w->tail);
	free(w->neg);
	free(w->tmp);
	free(w->ent_ids);
	free(w->rel_ids);
	free(w->ent_rows);
	free(w->ent_grad);
	free(w->rel_rows);
	free(w->rel_grad);
	free(w->scratch);
	free(w->order);
	rdps_client_destroy(w->c);
}

static int connect_worker(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	struct rdps_client_params p = {
		.ip_config = o->standalone ? NULL : o->ip_config,
		.servers = o->standalone ? &j->ipc : NULL,
		.transport = o->standalone ? "inproc" : o->transport,
		.client_id = o->rank * o->num_thread + w->t,
		.num_clients = o->num_trainers * o->num_thread,
		.timeout_ms = o->timeout_ms,
		/* the other trainers, at the start barrier and after it */
		.barrier_timeout_ms = peer_timeout_ms(o),
		.read_consistency = o->read_consistency,
		.quiet = w->t != 0 || o->standalone,
		.secret = o->standalone ? NULL : o->secret,
		.reconnect_ms = o->standalone ? 0 : o->reconnect_ms,
	};
	struct rdps_table_info ent, rel;
	char err[640];
	int ret;

	ret = rdps_client_create(&p, &w->c, err, sizeof(err));
	if (ret == -EADDRINUSE) {
		job_fail(j, ret, "%s (is another trainer running with --rank %u?)", err, o->rank);
		return ret;
	}
	if (ret == -ECONNREFUSED || ret == -ETIMEDOUT || ret == -EHOSTUNREACH ||
	    ret == -ENETUNREACH) {
		job_fail(j, ret, "no server reachable: %s; gave up after --timeout %g s (are the "
			 "servers of %s running?)", err, p.timeout_ms > 0 ? p.timeout_ms / 1000.0 : 60.0,
			 o->ip_config);
		return ret;
	}
	if (ret) {
		job_fail(j, ret, "%s", err);
		return ret;
	}
	if (j->start_failed)
		return 0; /* no data to check the tables against: it only reports */
	if (rdps_client_table(w->c, "entity", &ent) || rdps_client_table(w->c, "relation", &rel)) {
		job_fail(j, -ENOENT, "the servers have no 'entity' and 'relation' tables");
		return -ENOENT;
	}
	if (ent.num_rows != j->num_entities || rel.num_rows != j->num_relations) {
		job_fail(j, -EINVAL,
			 "the servers hold %llu entities and %llu relations, the dataset has %llu and %u "
			 "(servers started for another dataset?)",
			 (unsigned long long)ent.num_rows, (unsigned long long)rel.num_rows,
			 (unsigned long long)j->num_entities, j->num_relations);
		return -EINVAL;
	}
	if (ent.dim != j->ent_dim || rel.dim != j->rel_dim) {
		job_fail(j, -EINVAL,
			 "%s with hidden_dim %u needs entity rows of %u and relation rows of %u floats; "
			 "the servers hold %u and %u (start them with the same --model_name and --hidden_dim)",
			 rdps_model_name(j->model), o->model.hidden_dim, j->ent_dim, j->rel_dim,
			 ent.dim, rel.dim);
		return -EINVAL;
	}
	w->ent_table = ent.id;
	w->rel_table = rel.id;
	return 0;
}

/* Fills the batch: positives, negatives, unique rows and their indices. */
static void build_batch(struct worker *w, struct rdps_batch *b, int neg_head)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t B = o->batch_size, N = j->negs;
	uint32_t nchunks = (B + j->chunk - 1) / j->chunk, n = 0;

	for (uint32_t i = 0; i < B; i++) {
		const uint32_t *tr;

		if (w->cursor == w->norder) {
			shuffle(w->order, w->norder, &w->rng);
			w->cursor = 0;
		}
		tr = j->train.ids + 3 * (uint64_t)w->order[w->cursor++];
		w->head[i] = tr[0];
		w->rel[i] = tr[1];
		w->tail[i] = tr[2];
	}
	for (uint32_t i = 0; i < nchunks * N; i++) {
		const uint32_t *tr;

		if (i % N < o->neg_sample_size) {
			w->neg[i] = uniform(&w->rng, j->num_entities);
			continue;
		}
		/* --neg_deg_sample: the corrupted end of a random positive is an
		 * entity drawn in proportion to its degree (DGL-KE draws the
		 * chunk's own positives, and masks each one's own) */
		tr = j->train.ids + 3 * (uint64_t)uniform(&w->rng, j->train.count);
		w->neg[i] = tr[neg_head ? 0 : 2];
	}
	memcpy(w->tmp, w->head, B * 4);
	memcpy(w->tmp + B, w->tail, B * 4);
	memcpy(w->tmp + 2 * B, w->neg, (size_t)nchunks * N * 4);
	w->n_ent = unique_ids(w->tmp, 2 * B + nchunks * N, w->ent_ids);
	memcpy(w->tmp, w->rel, B * 4);
	w->n_rel = unique_ids(w->tmp, B, w->rel_ids);
	/* Ids become row indices of the pulled (sorted, unique) rows. */
	for (uint32_t i = 0; i < B; i++) {
		w->head[i] = index_of(w->ent_ids, w->n_ent, w->head[i]);
		w->tail[i] = index_of(w->ent_ids, w->n_ent, w->tail[i]);
		w->rel[i] = index_of(w->rel_ids, w->n_rel, w->rel[i]);
	}
	for (uint32_t i = 0; i < nchunks * N; i++, n++)
		w->neg[i] = index_of(w->ent_ids, w->n_ent, w->neg[i]);
	*b = (struct rdps_batch){
		.size = B, .chunk = j->chunk, .neg = N, .neg_head = neg_head,
		.head = w->head, .rel = w->rel, .tail = w->tail, .neg_ent = w->neg,
		.n_ent_rows = w->n_ent, .n_rel_rows = w->n_rel,
	};
}

/* A duration for progress lines: "8.5 s", "12m 05s", "3h 07m". */
static const char *fmt_secs(char *buf, size_t len, double s)
{
	if (!(s >= 0) || s > 1e8)
		snprintf(buf, len, "?");
	else if (s < 60)
		snprintf(buf, len, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm %02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, len, "%dh %02dm", (int)s / 3600, (int)s % 3600 / 60);
	return buf;
}

/* "elapsed 1m 05s  ETA 3.2 s" after done of total units in secs. */
static const char *fmt_eta(char *buf, size_t len, double secs, double done, double total)
{
	char a[32], b[32];

	snprintf(buf, len, "elapsed %s  ETA %s", fmt_secs(a, sizeof(a), secs),
		 done > 0 ? fmt_secs(b, sizeof(b), secs / done * (total - done)) : "?");
	return buf;
}

static void log_progress(struct job *j, uint64_t first, uint64_t step)
{
	const struct rdps_train_opts *o = j->o;
	double secs = (rdps_now_ns() - j->t_start) / 1e9, loss = 0, pull = 0, push = 0, comp = 0;
	uint64_t pos = 0, n = 0, steps = 0;
	char eta[96];

	for (uint32_t t = 0; t < o->num_thread; t++) {
		struct worker *w = &j->w[t];

		pos += __atomic_load_n(&w->positives, __ATOMIC_RELAXED);
		steps += __atomic_load_n(&w->steps, __ATOMIC_RELAXED);
	}
	/* Interval figures from thread 0, which resets them. */
	n = j->w[0].loss_n ? j->w[0].loss_n : 1;
	loss = j->w[0].loss_sum / n;
	pull = j->w[0].pull_ns / 1e6 / n;
	push = j->w[0].push_ns / 1e6 / n;
	comp = j->w[0].comp_ns / 1e6 / n;
	j->res->last_loss = loss;
	j->w[0].loss_sum = 0;
	j->w[0].loss_n = 0;
	j->w[0].pull_ns = j->w[0].push_ns = j->w[0].comp_ns = 0;
	printf("[trainer %u] step %llu/%llu  loss %.4f  %.0f pos/s  pull %.2f ms  compute %.2f ms  "
	       "push %.2f ms  %s\n",
	       o->rank, (unsigned long long)step, (unsigned long long)o->max_step, loss,
	       secs > 0 ? pos / secs : 0.0, pull, comp, push,
	       fmt_eta(eta, sizeof(eta), secs, (double)(step - first),
		       (double)(o->max_step - first)));
	fflush(stdout);
	(void)steps;
}

/* DIR/trainer-R-T.json: this thread's step and sampler state. */
static void progress_path(const struct rdps_train_opts *o, uint32_t t, char *buf, size_t len)
{
	snprintf(buf, len, "%s/trainer-%u-%u.json", o->checkpoint_dir, o->rank, t);
}

/* Written atomically (temporary file, fsync, rename). */
static int save_progress(const struct worker *w, uint64_t step)
{
	char path[4096], tmp[4200];
	json_t *p = json_pack("{s:I, s:s, s:i, s:i}", "step", (json_int_t)step, "rng",
			      "", "rank", (int)w->j->o->rank, "thread", (int)w->t);
	char hex[20];
	FILE *f;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)w->rng);
	json_object_set_new(p, "rng", json_string(hex));
	progress_path(w->j->o, w->t, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || json_dumpf(p, f, JSON_SORT_KEYS) || fflush(f) || fsync(fileno(f)))
		ret = -EIO;
	if (f && fclose(f))
		ret = -EIO;
	if (!ret && rename(tmp, path))
		ret = -errno;
	json_decref(p);
	return ret;
}

static int load_progress(struct worker *w, uint64_t *step)
{
	char path[4096];
	json_error_t je;
	json_t *p, *s, *r;
	int ret = 0;

	progress_path(w->j->o, w->t, path, sizeof(path));
	p = json_load_file(path, 0, &je);
	if (!p) {
		job_fail(w->j, -ENOENT, "--resume: cannot read %s: %s", path, je.text);
		return -ENOENT;
	}
	s = json_object_get(p, "step");
	r = json_object_get(p, "rng");
	if (!json_is_integer(s) || json_integer_value(s) < 0 || !json_is_string(r) ||
	    sscanf(json_string_value(r), "%" SCNx64, &w->rng) != 1 || !w->rng) {
		job_fail(w->j, -EINVAL, "--resume: %s: field step or rng is malformed", path);
		ret = -EINVAL;
	} else {
		*step = (uint64_t)json_integer_value(s);
	}
	json_decref(p);
	return ret;
}

/* One step: sample, pull, compute, push. */
static int train_step(struct worker *w, uint64_t step)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	struct rdps_step_result sr;
	struct rdps_batch b;
	uint64_t t0, t1, t2, t3;
	int ret;

	/* DGL-KE alternates head and tail corruption. */
	build_batch(w, &b, (int)(step & 1));
	t0 = rdps_now_ns();
	ret = rdps_client_pull(w->c, w->ent_table, w->ent_ids, w->n_ent, w->ent_rows);
	if (!ret)
		ret = rdps_client_pull(w->c, w->rel_table, w->rel_ids, w->n_rel, w->rel_rows);
	if (ret) {
		job_fail(j, ret, "pull: %s", rdps_client_errmsg(w->c));
		return ret;
	}
	t1 = rdps_now_ns();
	memset(w->ent_grad, 0, (size_t)w->n_ent * j->ent_dim * 4);
	memset(w->rel_grad, 0, (size_t)w->n_rel * j->rel_dim * 4);
	ret = rdps_model_step(j->model, &b, w->ent_rows, w->rel_rows, w->ent_grad,
			      w->rel_grad, w->scratch, w->scratch_size, &sr);
	if (ret) {
		job_fail(j, ret, "model step failed: %s", rdps_strerror(ret));
		return ret;
	}
	t2 = rdps_now_ns();
	ret = rdps_client_push(w->c, w->ent_table, w->ent_ids, w->ent_grad, w->n_ent);
	if (!ret)
		ret = rdps_client_push(w->c, w->rel_table, w->rel_ids, w->rel_grad, w->n_rel);
	if (!ret && o->sync_push)
		ret = rdps_client_flush(w->c);
	if (ret == -ECONNRESET && o->reconnect_ms) {
		/* A server came back from its checkpoint: this step's
		 * and unacknowledged pushes are lost, training goes on. */
		rdps_warn("trainer %u: %s; continuing", o->rank, rdps_client_errmsg(w->c));
		ret = 0;
	}
	if (ret) {
		job_fail(j, ret, "push: %s", rdps_client_errmsg(w->c));
		return ret;
	}
	t3 = rdps_now_ns();
	w->pull_ns += t1 - t0;
	w->comp_ns += t2 - t1;
	w->push_ns += t3 - t2;
	/* DGL-KE's printed loss leaves out the regularization. */
	w->loss_sum += sr.loss - sr.reg;
	w->loss_n++;
	w->negatives += (uint64_t)((b.size + b.chunk - 1) / b.chunk) * b.neg;
	__atomic_store_n(&w->positives, w->positives + o->batch_size, __ATOMIC_RELAXED);
	return 0;
}

/* --valid with eval_interval: the valid metrics in the middle of training,
 * as DGL-KE prints them ("[0]Valid average MRR: ..."). Every thread of
 * every trainer comes (the reduction needs them all). */
static int validate_during(struct worker *w, uint64_t step)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	struct rdps_eval_metrics m;
	uint64_t t0 = rdps_now_ns();
	int ret = evaluate(w, &j->valid_eval, "valid", false, &m, NULL);

	if (ret || w->t != 0)
		return ret;
	j->res->valid_evals++;
	if (o->rank == 0) {
		char v[5][48];

		rdps_eval_format_number(v[0], sizeof(v[0]), m.mrr);
		rdps_eval_format_number(v[1], sizeof(v[1]), m.mr);
		rdps_eval_format_number(v[2], sizeof(v[2]), m.hits1);
		rdps_eval_format_number(v[3], sizeof(v[3]), m.hits3);
		rdps_eval_format_number(v[4], sizeof(v[4]), m.hits10);
		printf("[trainer %u] step %llu/%llu: validation\n[0]Valid average MRR: %s\n"
		       "[0]Valid average MR: %s\n[0]Valid average HITS@1: %s\n"
		       "[0]Valid average HITS@3: %s\n[0]Valid average HITS@10: %s\n"
		       "validation take %.3f seconds:\n", o->rank, (unsigned long long)step,
		       (unsigned long long)o->max_step, v[0], v[1], v[2], v[3], v[4],
		       (rdps_now_ns() - t0) / 1e9);
		fflush(stdout);
	}
	return 0;
}

static bool stop_requested(const struct rdps_train_opts *o)
{
	return o->stop && *o->stop;
}

static int train_loop(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t every = o->log_interval ? o->log_interval : 1000;
	uint64_t first = 0;
	int ret;

	if (o->resume && (ret = load_progress(w, &first)))
		return ret;
	if (o->resume && w->t == 0)
		rdps_info("trainer %u: resuming at step %llu of %llu", o->rank,
			  (unsigned long long)first, (unsigned long long)o->max_step);
	/* A thread without triples (more threads than triples) still keeps
	 * the step count: the syncs and validations below need every thread. */
	for (uint64_t step = first; step < o->max_step && !__atomic_load_n(&j->ret, __ATOMIC_RELAXED);
	     step++) {
		if (stop_requested(o)) {
			pthread_mutex_lock(&j->lock);
			if (!j->interrupted)
				j->stop_step = __atomic_load_n(&j->w[0].steps, __ATOMIC_RELAXED);
			j->interrupted = true;
			pthread_mutex_unlock(&j->lock);
			job_fail(j, -EINTR, "interrupted during training");
			return -EINTR;
		}
		if (w->norder && (ret = train_step(w, step)))
			return ret;
		__atomic_store_n(&w->steps, step + 1, __ATOMIC_RELAXED);
		if (w->t == 0 && o->log_interval && (step + 1) % o->log_interval == 0)
			log_progress(j, first, step + 1);
		if (o->checkpoint_dir && ((step + 1) % every == 0 || step + 1 == o->max_step) &&
		    (ret = save_progress(w, step + 1))) {
			job_fail(j, ret, "cannot write progress into %s: %s", o->checkpoint_dir,
				 rdps_strerror(ret));
			return ret;
		}
		w->done_steps++;
		/* DGL-KE's --force_sync_interval: the trainer's threads (its
		 * processes there) wait for each other, their pushes applied. */
		if (o->force_sync_interval && (step + 1) % o->force_sync_interval == 0) {
			ret = rdps_client_flush(w->c);
			if (ret) {
				job_fail(j, ret, "push: %s", rdps_client_errmsg(w->c));
				return ret;
			}
			ret = local_sync(j);
			if (ret)
				return ret;
			if (w->t == 0)
				j->res->forced_syncs++;
		}
		/* as DGL-KE: at every multiple of eval_interval but the last step
		 * (the valid metrics after training come next) */
		if (o->valid && o->eval_interval && (step + 1) % o->eval_interval == 0 && step > 1 &&
		    step + 1 < o->max_step && (ret = validate_during(w, step + 1)))
			return ret;
	}
	return 0;
}

/* Pulls rows of ids (u32) into out, in bounded pieces. */
static int pull_ids(struct worker *w, uint32_t table, const uint32_t *ids, uint64_t n,
		    uint32_t dim, float *out, uint64_t *buf)
{
	for (uint64_t pos = 0; pos < n;) {
		uint64_t m = n - pos < EVAL_CHUNK_ROWS ? n - pos : EVAL_CHUNK_ROWS;
		int ret;

		for (uint64_t i = 0; i < m; i++)
			buf[i] = ids[pos + i];
		ret = rdps_client_pull(w->c, table, buf, m, out + pos * dim);
		if (ret)
			return ret;
		pos += m;
	}
	return 0;
}

/* A struct rdps_eval_sums as the doubles of an allreduce (counts are exact
 * below 2^53). */
#define SUMS_DOUBLES 6

static void sums_to_doubles(const struct rdps_eval_sums *s, double *v)
{
	v[0] = s->sum_rr;
	v[1] = s->sum_rank;
	v[2] = (double)s->hits1;
	v[3] = (double)s->hits3;
	v[4] = (double)s->hits10;
	v[5] = (double)s->count;
}

static void sums_from_doubles(const double *v, struct rdps_eval_sums *s)
{
	*s = (struct rdps_eval_sums){ v[0], v[1], (uint64_t)v[2], (uint64_t)v[3],
				      (uint64_t)v[4], (uint64_t)v[5] };
}

/* Allreduce of any length: pieces of RDPS_ALLREDUCE_MAX values (every
 * client of the job calls it with the same n). */
static int allreduce_long(struct rdps_client *c, double *v, size_t n)
{
	for (size_t pos = 0; pos < n; pos += RDPS_ALLREDUCE_MAX) {
		size_t m = n - pos < RDPS_ALLREDUCE_MAX ? n - pos : RDPS_ALLREDUCE_MAX;
		int ret = rdps_client_allreduce(c, v + pos, m);

		if (ret)
			return ret;
	}
	return 0;
}

/* Per-relation sums of ev into rv: relation r's tail sums at
 * rv[2 * SUMS_DOUBLES * r], its head sums right after; side is scratch for
 * num_relations sums. */
static int relation_doubles(const struct rdps_eval *ev, uint32_t num_relations,
			    struct rdps_eval_sums *side, double *rv)
{
	static const unsigned sides[2] = { RDPS_EVAL_TAIL, RDPS_EVAL_HEAD };

	for (int k = 0; k < 2; k++) {
		int ret = rdps_eval_get_relation_sums(ev, sides[k], num_relations, side);

		if (ret)
			return ret;
		for (uint32_t r = 0; r < num_relations; r++)
			sums_to_doubles(&side[r], rv + ((size_t)2 * r + k) * SUMS_DOUBLES);
	}
	return 0;
}

/* Progress of an evaluation: a line at every tenth of the work. */
struct eval_progress {
	const char *name;
	const char *unit;           /* what done and total count */
	uint64_t total;
	uint64_t t0;
	unsigned next;              /* next tenth to report */
};

static void eval_progress(const struct job *j, struct eval_progress *p, uint64_t done)
{
	char eta[96];

	if (!p->total || done * 10 < (uint64_t)p->next * p->total)
		return;
	while (p->next <= 10 && done * 10 >= (uint64_t)p->next * p->total)
		p->next++;
	printf("[trainer %u] evaluating %s: %3.0f%% (%llu/%llu %s)  %s\n", j->o->rank, p->name,
	       100.0 * done / p->total, (unsigned long long)done, (unsigned long long)p->total,
	       p->unit, fmt_eta(eta, sizeof(eta), (rdps_now_ns() - p->t0) / 1e9, (double)done,
				(double)p->total));
	fflush(stdout);
}

/* Floyd's draw of k distinct ids below n into out (k <= n), in the order
 * drawn; seen is a bitmap of n bits, all clear, left clear. */
static void draw_distinct(uint64_t *rng, uint64_t n, uint64_t k, uint8_t *seen, uint32_t *out)
{
	uint64_t m = 0;

	for (uint64_t i = n - k; i < n; i++) {
		uint32_t t = uniform(rng, i + 1);

		if (seen[t >> 3] & (1u << (t & 7)))
			t = (uint32_t)i;
		seen[t >> 3] |= (uint8_t)(1u << (t & 7));
		out[m++] = t;
	}
	for (uint64_t i = 0; i < m; i++)
		seen[out[i] >> 3] &= (uint8_t)~(1u << (out[i] & 7));
}

/*
 * DGL-KE's sampled evaluation (--neg_sample_size_eval S): the queries of
 * one side, in batches of batch_size_eval triples, each batch ranked against
 * S distinct entities drawn for it (with --neg_deg_sample_eval also the
 * batch's true entities of that side: DGL-KE's degree-based negatives).
 * q0: the side's first query; h_or_t: the side's true entities.
 */
static int eval_sampled_side(struct worker *w, struct rdps_eval *ev, size_t q0,
			     const uint32_t *truth, uint64_t n, uint64_t *rng, uint8_t *seen,
			     uint32_t *ids, float *cand, uint64_t *buf, struct eval_progress *pr,
			     uint64_t *done)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint64_t S = o->neg_sample_size_eval, G = o->batch_size_eval;
	int ret = 0;

	for (uint64_t i0 = 0; !ret && i0 < n; i0 += G) {
		uint64_t g = n - i0 < G ? n - i0 : G, k = S;

		if (stop_requested(o))
			return -EINTR;
		draw_distinct(rng, j->num_entities, S, seen, ids);
		for (uint64_t i = 0; i < k; i++)
			seen[ids[i] >> 3] |= (uint8_t)(1u << (ids[i] & 7));
		for (uint64_t i = 0; o->neg_deg_sample_eval && i < g; i++) {
			uint32_t e = truth[i0 + i];

			if (!(seen[e >> 3] & (1u << (e & 7)))) {
				seen[e >> 3] |= (uint8_t)(1u << (e & 7));
				ids[k++] = e;
			}
		}
		for (uint64_t i = 0; i < k; i++)
			seen[ids[i] >> 3] &= (uint8_t)~(1u << (ids[i] & 7));
		qsort(ids, k, sizeof(*ids), cmp_u32);
		ret = pull_ids(w, w->ent_table, ids, k, j->ent_dim, cand, buf);
		if (!ret)
			ret = rdps_eval_add_sampled(ev, q0 + i0, g, ids, cand, (uint32_t)k);
		*done += g;
		eval_progress(j, pr, *done);
	}
	return ret;
}

/* Ranks this trainer's share of split (thread 0 only) and reduces the
 * sums over every client of the job (all threads); with per_rel also the
 * sums of each relation, which thread 0 stores into rel (num_relations
 * entries). Against every entity, streamed in chunks, or (with
 * neg_sample_size_eval) against drawn ones; j->filter skips true triples. */
static int evaluate(struct worker *w, const struct rdps_triples *split, const char *name,
		    bool per_rel, struct rdps_eval_metrics *m, struct rdps_train_relation_sums *rel)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	struct rdps_eval_sums sums = { 0 };
	struct rdps_eval *ev = NULL;
	struct rdps_triple *share = NULL;
	struct rdps_eval_sums *side = NULL;
	uint32_t *h = NULL, *r = NULL, *t = NULL, *ids = NULL;
	float *hr = NULL, *rr = NULL, *tr = NULL, *cand = NULL;
	uint64_t *buf = NULL, n = 0;
	uint8_t *seen = NULL;
	bool sampled = o->neg_sample_size_eval && o->neg_sample_size_eval < j->num_entities;
	uint64_t cand_rows = sampled ? o->neg_sample_size_eval + o->batch_size_eval
				     : EVAL_CHUNK_ROWS;
	size_t nrv = per_rel ? (size_t)j->num_relations * 2 * SUMS_DOUBLES : 0;
	double v[SUMS_DOUBLES + 1], *rv = NULL;
	char what[64];
	int ret = 0;

	/* Every client reduces the per-relation vector; thread 0 fills it. */
	if (per_rel) {
		rv = calloc(nrv ? nrv : 1, sizeof(double));
		if (!rv) {
			ret = -ENOMEM;
			goto reduce;
		}
	}
	if (w->t == 0) {
		uint64_t t0 = rdps_now_ns();

		for (uint64_t i = o->rank; i < split->count; i += o->num_trainers)
			n++;
		share = malloc((n ? n : 1) * sizeof(*share));
		h = malloc((n ? n : 1) * 4);
		r = malloc((n ? n : 1) * 4);
		t = malloc((n ? n : 1) * 4);
		hr = malloc((n ? n : 1) * j->ent_dim * 4);
		tr = malloc((n ? n : 1) * j->ent_dim * 4);
		rr = malloc((n ? n : 1) * j->rel_dim * 4);
		cand = malloc((size_t)cand_rows * j->ent_dim * 4);
		buf = malloc((cand_rows > EVAL_CHUNK_ROWS ? cand_rows : EVAL_CHUNK_ROWS) *
			     sizeof(uint64_t));
		if (sampled) {
			ids = malloc(cand_rows * sizeof(*ids));
			seen = calloc(j->num_entities / 8 + 1, 1);
		}
		if (per_rel)
			side = malloc((j->num_relations ? j->num_relations : 1) * sizeof(*side));
		if (!share || !h || !r || !t || !hr || !tr || !rr || !cand || !buf ||
		    (per_rel && !side) || (sampled && (!ids || !seen))) {
			ret = -ENOMEM;
			goto reduce;
		}
		n = 0;
		for (uint64_t i = o->rank; i < split->count; i += o->num_trainers, n++) {
			share[n] = (struct rdps_triple){ split->ids[3 * i], split->ids[3 * i + 1],
							 split->ids[3 * i + 2] };
			h[n] = share[n].h;
			r[n] = share[n].r;
			t[n] = share[n].t;
		}
		if (n) {
			struct rdps_eval_params ep = {
				.model = j->model, .test = share, .n_test = n, .filter = j->filter,
				.n_entities = (uint32_t)j->num_entities,
				.num_threads = o->num_thread,
				.ties = RDPS_EVAL_TIES_PESSIMISTIC, /* DGL-KE: score >= true */
				.sides = RDPS_EVAL_BOTH,
			};
			struct eval_progress pr = { .name = name, .t0 = t0 };

			ret = rdps_eval_create(&ev, &ep);
			if (!ret)
				ret = pull_ids(w, w->ent_table, h, n, j->ent_dim, hr, buf);
			if (!ret)
				ret = pull_ids(w, w->ent_table, t, n, j->ent_dim, tr, buf);
			if (!ret)
				ret = pull_ids(w, w->rel_table, r, n, j->rel_dim, rr, buf);
			if (!ret)
				ret = rdps_eval_set_rows(ev, hr, rr, tr);
			if (sampled) {
				/* a seed of its own: the split and the rank pick it */
				uint64_t rng = (o->seed + 1) * 0x9e3779b97f4a7c15ull ^
					       XXH3_64bits(name, strlen(name)) ^
					       (o->rank + 1ull) * 0xbf58476d1ce4e5b9ull, done = 0;

				rng = rng ? rng : 1;
				pr.unit = "queries";
				pr.total = 2 * n;
				if (!ret)
					ret = eval_sampled_side(w, ev, 0, t, n, &rng, seen, ids, cand,
								buf, &pr, &done);
				if (!ret)
					ret = eval_sampled_side(w, ev, n, h, n, &rng, seen, ids, cand,
								buf, &pr, &done);
			}
			/* Candidates stream through in chunks: no trainer holds the
			 * whole entity table. */
			pr.unit = "entities";
			pr.total = sampled ? 0 : j->num_entities;
			for (uint64_t c = 0; !ret && !sampled && c < j->num_entities;
			     c += EVAL_CHUNK_ROWS) {
				uint64_t cnt = j->num_entities - c < EVAL_CHUNK_ROWS
						       ? j->num_entities - c
						       : EVAL_CHUNK_ROWS;

				if (stop_requested(o)) {
					ret = -EINTR;
					break;
				}
				for (uint64_t i = 0; i < cnt; i++)
					buf[i] = c + i;
				ret = rdps_client_pull(w->c, w->ent_table, buf, cnt, cand);
				if (!ret)
					ret = rdps_eval_add_candidates(ev, (uint32_t)c, cand,
								       (uint32_t)cnt);
				eval_progress(j, &pr, c + cnt);
			}
			if (!ret)
				rdps_eval_get_sums(ev, &sums);
			if (!ret && per_rel &&
			    (ret = relation_doubles(ev, j->num_relations, side, rv)))
				job_fail(j, ret, "evaluation on %s: a relation id is not below %u",
					 name, j->num_relations);
		}
		if (!ret)
			rdps_info("trainer %u: ranked %llu %s triples in %.1f s", o->rank,
				  (unsigned long long)n, name, (rdps_now_ns() - t0) / 1e9);
	}
reduce:
	if (ret == -EINTR) {
		pthread_mutex_lock(&j->lock);
		if (!j->interrupted)
			j->stop_step = __atomic_load_n(&j->w[0].steps, __ATOMIC_RELAXED);
		j->interrupted = true;
		pthread_mutex_unlock(&j->lock);
		job_fail(j, ret, "interrupted during the evaluation on %s", name);
	} else if (ret) {
		job_fail(j, ret, "evaluation on %s: %s", name,
			 ret == -ENOMEM ? "out of memory" : rdps_client_errmsg(w->c));
	}
	sums_to_doubles(&sums, v);
	/* How many clients reduce per relation next: all of them or none, or
	 * the collectives would not pair up. */
	v[SUMS_DOUBLES] = per_rel;
	if (!ret) {
		/* the other threads waited here (locally) while thread 0 ranked */
		snprintf(what, sizeof(what), "reducing the %s metrics", name);
		ret = job_collective(w, what, v, SUMS_DOUBLES + 1);
	}
	if (!ret && v[SUMS_DOUBLES] != 0 &&
	    v[SUMS_DOUBLES] != (double)o->num_trainers * o->num_thread) {
		ret = -EINVAL;
		job_fail(j, ret, "--eval_per_relation was given to some trainers of the job and "
			 "not to others (give it to all or none)");
	}
	if (!ret) {
		sums_from_doubles(v, &sums);
		rdps_eval_metrics_from_sums(&sums, m);
	}
	if (!ret && per_rel) {
		snprintf(what, sizeof(what), "reducing the %s metrics per relation", name);
		ret = job_collective(w, what, rv, nrv);
	}
	if (!ret && per_rel && w->t == 0) {
		for (uint32_t k = 0; k < j->num_relations; k++) {
			sums_from_doubles(rv + (size_t)2 * k * SUMS_DOUBLES, &rel[k].tail);
			sums_from_doubles(rv + ((size_t)2 * k + 1) * SUMS_DOUBLES, &rel[k].head);
		}
	}
	rdps_eval_destroy(ev);
	free(side);
	free(rv);
	free(share);
	free(h);
	free(r);
	free(t);
	free(hr);
	free(rr);
	free(tr);
	free(cand);
	free(buf);
	free(ids);
	free(seen);
	return ret;
}

static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out;
	char buf[65536];
	size_t n;
	int ret = 0;

	if (!in)
		return -errno;
	out = fopen(to, "wb");
	if (!out) {
		ret = -errno;
		fclose(in);
		return ret;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			ret = -EIO;
	if (ferror(in))
		ret = -EIO;
	fclose(in);
	if (fclose(out))
		ret = -EIO;
	return ret;
}

/* Pulls a whole table in chunks and writes it in original id order. */
static int save_table(struct worker *w, uint32_t table, uint64_t rows, uint32_t dim,
		      const uint32_t *new_to_old, const char *path)
{
	float *all = malloc((rows ? rows : 1) * dim * sizeof(float));
	float *chunk = malloc((size_t)SAVE_CHUNK_ROWS * dim * sizeof(float));
	uint64_t *ids = malloc(SAVE_CHUNK_ROWS * sizeof(uint64_t));
	int ret = 0;

	if (!all || !chunk || !ids) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t c = 0; c < rows && !ret; c += SAVE_CHUNK_ROWS) {
		uint64_t cnt = rows - c < SAVE_CHUNK_ROWS ? rows - c : SAVE_CHUNK_ROWS;

		for (uint64_t i = 0; i < cnt; i++)
			ids[i] = c + i;
		ret = rdps_client_pull(w->c, table, ids, cnt, chunk);
		for (uint64_t i = 0; !ret && i < cnt; i++) {
			uint64_t dst = new_to_old ? new_to_old[c + i] : c + i;

			memcpy(all + dst * dim, chunk + i * dim, dim * sizeof(float));
		}
	}
	if (!ret)
		ret = rdps_npy_write_f32(path, all, rows, dim);
out:
	free(all);
	free(chunk);
	free(ids);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* config.json and results.json: JSON as Python's json.dump(indent=4)
 * writes it, numbers as Python prints them (DGL-KE's files are written so).
 */

struct jw {
	FILE *f;
	int depth;
	bool first[4];              /* no member written yet at this depth (0: the
				     * top object, its members indented by 4) */
};

static void jw_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Starts member key at the current depth (key NULL: an array element). */
static void jw_key(struct jw *w, const char *key)
{
	fprintf(w->f, "%s\n%*s", w->first[w->depth] ? "" : ",", 4 * (w->depth + 1), "");
	w->first[w->depth] = false;
	if (key) {
		jw_str(w->f, key);
		fputs(": ", w->f);
	}
}

/* Opens an object or array ('{' or '['): the top one (depth -1), a member
 * (key) or an array element (key NULL). */
static void jw_open(struct jw *w, const char *key, char c)
{
	if (w->depth >= 0)
		jw_key(w, key);
	fputc(c, w->f);
	w->first[++w->depth] = true;
}

static void jw_close(struct jw *w, char c)
{
	if (!w->first[w->depth])
		fprintf(w->f, "\n%*s", 4 * w->depth, "");
	w->depth--;
	fputc(c, w->f);
}

static void jw_string(struct jw *w, const char *key, const char *v)
{
	jw_key(w, key);
	if (v)
		jw_str(w->f, v);
	else
		fputs("null", w->f);
}

static void jw_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	fputs(v ? "true" : "false", w->f);
}

static void jw_int(struct jw *w, const char *key, long long v)
{
	jw_key(w, key);
	fprintf(w->f, "%lld", v);
}

static void jw_double(struct jw *w, const char *key, double v)
{
	char buf[48];

	rdps_eval_format_number(buf, sizeof(buf), v);
	jw_key(w, key);
	fputs(buf, w->f);
}

/* A float option as the user wrote it: the shortest decimal that reads
 * back to the float (0.01, not 0.009999999776), printed as Python prints
 * that number given on DGL-KE's command line. */
static void jw_float(struct jw *w, const char *key, float v)
{
	char tmp[32];

	for (int prec = 1; prec <= 9; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)v);
		if (strtof(tmp, NULL) == v)
			break;
	}
	jw_double(w, key, strtod(tmp, NULL));
}

/* Opens path's temporary sibling for a JSON object. */
static int jw_begin(struct jw *w, const char *path, char *tmp, size_t len)
{
	snprintf(tmp, len, "%s.tmp", path);
	*w = (struct jw){ .f = fopen(tmp, "w"), .depth = -1 };
	if (!w->f)
		return -errno;
	jw_open(w, NULL, '{');
	return 0;
}

/* Closes the object, fsyncs and renames it over path. */
static int jw_end(struct jw *w, const char *path, const char *tmp)
{
	int ret = 0;

	jw_close(w, '}');
	if (ferror(w->f) || fflush(w->f) || fsync(fileno(w->f)))
		ret = -EIO;
	if (fclose(w->f))
		ret = -EIO;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* DGL-KE's config.json (its keys first, those dglke_eval and dglke_predict
 * read: model, emb_size, gamma, double_ent, double_rel, ...), then rdps's. */
static int save_config(struct job *j, const char *path)
{
	const struct rdps_train_opts *o = j->o, *u = j->user;
	const struct rdps_model_params *mp = &o->model;
	char tmp[4200];
	struct jw w;
	int ret = jw_begin(&w, path, tmp, sizeof(tmp));

	if (ret)
		return ret;
	jw_string(&w, "dataset", j->dataset_name);
	jw_string(&w, "model", rdps_model_name(j->model));
	jw_int(&w, "emb_size", mp->hidden_dim);
	jw_int(&w, "max_train_step", (long long)o->max_step);
	jw_int(&w, "batch_size", o->batch_size);
	jw_int(&w, "neg_sample_size", o->neg_sample_size);
	jw_float(&w, "lr", o->lr);
	jw_float(&w, "gamma", mp->gamma);
	/* as the tables are laid out (RotatE doubles its entities always) */
	jw_bool(&w, "double_ent", j->ent_dim == 2 * mp->hidden_dim);
	jw_bool(&w, "double_rel", j->rel_dim == 2 * mp->hidden_dim);
	jw_bool(&w, "neg_adversarial_sampling", mp->adv);
	jw_float(&w, "adversarial_temperature", mp->adv_temp);
	jw_float(&w, "regularization_coef", mp->reg_coef);
	if (mp->reg_norm == (float)(int)mp->reg_norm)
		jw_int(&w, "regularization_norm", (int)mp->reg_norm); /* DGL-KE's is an int */
	else
		jw_float(&w, "regularization_norm", mp->reg_norm);
	jw_string(&w, "emap_file", "entities.dict");
	jw_string(&w, "rmap_file", "relations.dict");
	/* rdps's */
	jw_string(&w, "model_name", rdps_model_name(j->model));
	jw_int(&w, "hidden_dim", mp->hidden_dim);
	jw_int(&w, "max_step", (long long)o->max_step);
	jw_string(&w, "data_path", u->data_path ? u->data_path : o->data_dir);
	jw_string(&w, "format", u->format ? u->format : "built_in");
	jw_open(&w, "data_files", '[');
	for (int i = 0; u->data_files[i]; i++)
		jw_string(&w, NULL, u->data_files[i]);
	jw_close(&w, ']');
	jw_string(&w, "delimiter", u->delimiter ? u->delimiter : "\t");
	jw_int(&w, "neg_chunk_size", j->chunk);
	jw_bool(&w, "neg_deg_sample", o->neg_deg_sample);
	jw_int(&w, "emb_size_entity", j->ent_dim);
	jw_int(&w, "emb_size_relation", j->rel_dim);
	jw_int(&w, "n_entities", (long long)j->num_entities);
	jw_int(&w, "n_relations", j->num_relations);
	jw_string(&w, "id_order", "entities.dict / relations.dict ids");
	jw_int(&w, "num_trainers", o->num_trainers);
	jw_int(&w, "num_proc", u->num_proc);
	jw_int(&w, "num_thread", u->num_thread);
	jw_int(&w, "seed", (long long)o->seed);
	return jw_end(&w, path, tmp);
}

static void jw_metrics(struct jw *w, const char *key, const struct rdps_eval_metrics *m)
{
	jw_open(w, key, '{');
	jw_double(w, "MRR", m->mrr);
	jw_double(w, "MR", m->mr);
	jw_double(w, "HITS@1", m->hits1);
	jw_double(w, "HITS@3", m->hits3);
	jw_double(w, "HITS@10", m->hits10);
	jw_int(w, "queries", (long long)m->count);
	jw_close(w, '}');
}

static void jw_relations(struct jw *w, const char *key, const struct job *j,
			 const struct rdps_train_relation_sums *rel)
{
	const struct rdps_train_result *res = j->res;

	jw_open(w, key, '[');
	for (uint32_t r = 0; r < res->num_relations; r++) {
		struct rdps_eval_sums both = rel[r].tail;
		struct rdps_eval_metrics m, mt, mh;

		if (!rel[r].tail.count && !rel[r].head.count)
			continue;
		rdps_eval_sums_add(&both, &rel[r].head);
		rdps_eval_metrics_from_sums(&both, &m);
		rdps_eval_metrics_from_sums(&rel[r].tail, &mt);
		rdps_eval_metrics_from_sums(&rel[r].head, &mh);
		jw_open(w, NULL, '{');
		jw_int(w, "id", r);
		jw_string(w, "relation", res->relation_names[r]);
		jw_int(w, "triples", (long long)(rel[r].tail.count ? rel[r].tail.count
								   : rel[r].head.count));
		jw_double(w, "MRR", m.mrr);
		jw_double(w, "MR", m.mr);
		jw_double(w, "HITS@1", m.hits1);
		jw_double(w, "HITS@3", m.hits3);
		jw_double(w, "HITS@10", m.hits10);
		jw_double(w, "tail MRR", mt.mrr);
		jw_double(w, "head MRR", mh.mrr);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* <save_path>/results.json: the final metrics (as printed), per relation if
 * computed, and what the training did. */
static int save_results(struct job *j, const char *path)
{
	const struct rdps_train_opts *o = j->o;
	const struct rdps_train_result *res = j->res;
	char tmp[4200];
	struct jw w;
	int ret = jw_begin(&w, path, tmp, sizeof(tmp));

	if (ret)
		return ret;
	jw_string(&w, "dataset", j->dataset_name);
	jw_string(&w, "model", rdps_model_name(j->model));
	if (res->have_valid)
		jw_metrics(&w, "Valid", &res->valid);
	if (res->have_test)
		jw_metrics(&w, "Test", &res->test);
	if (res->have_valid && res->valid_rel)
		jw_relations(&w, "Valid per relation", j, res->valid_rel);
	if (res->have_test && res->test_rel)
		jw_relations(&w, "Test per relation", j, res->test_rel);
	jw_bool(&w, "filtered", j->filter != NULL);
	jw_int(&w, "neg_sample_size_eval",
	       o->neg_sample_size_eval && o->neg_sample_size_eval < j->num_entities
		       ? (long long)o->neg_sample_size_eval : (long long)j->num_entities);
	jw_double(&w, "eval_percent", o->eval_percent);
	jw_int(&w, "steps", (long long)res->steps_done);
	jw_int(&w, "max_step", (long long)o->max_step);
	jw_int(&w, "threads", o->num_thread);
	jw_int(&w, "num_trainers", o->num_trainers);
	jw_double(&w, "train_seconds", res->train_seconds);
	jw_double(&w, "pos_per_second", res->pos_per_second);
	jw_double(&w, "last_loss", res->last_loss);
	return jw_end(&w, path, tmp);
}

/* Trainer 0, thread 0: results.json (if results), then (unless
 * no_save_emb) the embeddings, the dicts and config.json, into save_path
 * (checked before training). err says what went wrong. */
static int save_files(struct worker *w, bool results, char *err, size_t errlen)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char path[4096], from[4096];
	bool pulled = false;
	int ret = 0;

	if (mkdir(o->save_path, 0755) && errno != EEXIST) {
		ret = -errno;
		snprintf(err, errlen, "cannot create --save_path %s: %s", o->save_path,
			 strerror(-ret));
		return ret;
	}
	if (results) {
		snprintf(path, sizeof(path), "%s/results.json", o->save_path);
		ret = save_results(j, path);
	}
	if (!ret && !o->no_save_emb) {
		snprintf(path, sizeof(path), "%s/%s_%s_entity.npy", o->save_path, j->dataset_name,
			 rdps_model_name(j->model));
		pulled = true;
		ret = save_table(w, w->ent_table, j->num_entities, j->ent_dim, j->new_to_old, path);
	}
	if (!ret && !o->no_save_emb) {
		snprintf(path, sizeof(path), "%s/%s_%s_relation.npy", o->save_path,
			 j->dataset_name, rdps_model_name(j->model));
		ret = save_table(w, w->rel_table, j->num_relations, j->rel_dim, NULL, path);
	}
	for (int i = 0; !ret && !o->no_save_emb && i < 2; i++) {
		const char *f = i ? "relations.dict" : "entities.dict";

		pulled = false;
		snprintf(from, sizeof(from), "%s/%s", o->data_dir, f);
		snprintf(path, sizeof(path), "%s/%s", o->save_path, f);
		ret = copy_file(from, path);
	}
	if (!ret && !o->no_save_emb) {
		snprintf(path, sizeof(path), "%s/config.json", o->save_path);
		ret = save_config(j, path);
	}
	/* a table's rows come from the servers: a failed pull says why there */
	if (ret)
		snprintf(err, errlen, "saving %s: %s", path,
			 pulled && ret != -EIO && ret != -ENOMEM ? rdps_client_errmsg(w->c)
								 : rdps_strerror(ret));
	return ret;
}

static int save_all(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char err[600];
	int ret = save_files(w, true, err, sizeof(err));

	if (ret)
		job_fail(j, ret, "%s", err);
	else
		rdps_info("trainer %u: %s saved in %s", o->rank,
			  o->no_save_emb ? "results.json" : "embeddings, config.json and results.json",
			  o->save_path);
	return ret;
}

/* Stopped by o->stop: trainer 0 saves the embeddings reached and says
 * where in j->save_note. */
static void save_interrupted(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	char err[600];

	if (!o->save_path || o->no_save_emb) {
		snprintf(j->save_note, sizeof(j->save_note), "nothing saved (%s)",
			 o->save_path ? "--no_save_emb" : "no --save_path");
		return;
	}
	/* this thread's pushes are in; the others' unacknowledged ones may not be */
	rdps_client_flush(w->c);
	if (save_files(w, false, err, sizeof(err)))
		snprintf(j->save_note, sizeof(j->save_note), "the embeddings could not be saved: %s",
			 err);
	else
		snprintf(j->save_note, sizeof(j->save_note),
			 "the embeddings reached are saved in %s (%s_%s_entity.npy and "
			 "_relation.npy, the dicts, config.json)", o->save_path, j->dataset_name,
			 rdps_model_name(j->model));
}

/* ---------------------------------------------------------------------- */
/* The start barrier: every trainer arrived, none failed to load its data,
 * and the options that make one job agree.                                */

static int peer_timeout_ms(const struct rdps_train_opts *o)
{
	return o->timeout_ms > 0 ? o->timeout_ms : PEER_TIMEOUT_DEFAULT_MS;
}

/* After the start, trainers reach each barrier as far apart as their
 * training and evaluation run: --timeout bounds that only if it is longer
 * than the default. */
static int later_timeout_ms(const struct rdps_train_opts *o)
{
	return o->timeout_ms > PEER_TIMEOUT_DEFAULT_MS ? o->timeout_ms : PEER_TIMEOUT_DEFAULT_MS;
}

enum opt_kind { OPT_BOOL, OPT_NUM, OPT_MODEL, OPT_DIGEST };

/*
 * Options every trainer of the job must share, checked before training:
 * the model and its loss (trainers push gradients into the same tables, so
 * they must compute them alike: model, dims, gamma, adversarial weighting,
 * regularization), the sampling that sizes a step and how many steps there
 * are (batch, negatives, chunk, max_step, resume: one job's schedule, and
 * trainer 0's config.json states them for the job), the evaluation (its
 * reductions pair up only if every trainer runs the same ones) and the data
 * (the same partition: ids are relabeled by it). Per-trainer choices may
 * differ: paths, transport, threads (the servers refuse a different job
 * size), seed, log and checkpoint settings, lr/optimizer (standalone only).
 */
enum {
	JO_MODEL, JO_DIM, JO_GAMMA, JO_ADV, JO_ADV_TEMP, JO_REG_COEF, JO_REG_NORM, JO_BATCH,
	JO_NEG, JO_CHUNK, JO_NEG_DEG, JO_MAX_STEP, JO_RESUME, JO_TEST, JO_VALID, JO_EVAL_INTERVAL,
	JO_EVAL_PERCENT, JO_NEG_EVAL, JO_BATCH_EVAL, JO_NEG_DEG_EVAL, JO_NO_FILTER, JO_PER_REL,
	JO_DATA, NUM_JOB_OPTS
};

static const struct {
	const char *flag;
	enum opt_kind kind;
	int needs;      /* the option this one only matters with, or -1 */
} job_opts[NUM_JOB_OPTS] = {
	[JO_MODEL] = { "--model_name", OPT_MODEL, -1 },
	[JO_DIM] = { "--hidden_dim", OPT_NUM, -1 },
	[JO_GAMMA] = { "--gamma", OPT_NUM, -1 },
	[JO_ADV] = { "--neg_adversarial_sampling", OPT_BOOL, -1 },
	[JO_ADV_TEMP] = { "--adversarial_temperature", OPT_NUM, JO_ADV },
	[JO_REG_COEF] = { "--regularization_coef", OPT_NUM, -1 },
	[JO_REG_NORM] = { "--regularization_norm", OPT_NUM, JO_REG_COEF },
	[JO_BATCH] = { "--batch_size", OPT_NUM, -1 },
	[JO_NEG] = { "--neg_sample_size", OPT_NUM, -1 },
	[JO_CHUNK] = { "--neg_chunk_size", OPT_NUM, -1 },
	[JO_NEG_DEG] = { "--neg_deg_sample", OPT_BOOL, -1 },
	[JO_MAX_STEP] = { "--max_step", OPT_NUM, -1 },
	[JO_RESUME] = { "--resume", OPT_BOOL, -1 },
	[JO_TEST] = { "--test", OPT_BOOL, -1 },
	[JO_VALID] = { "--valid", OPT_BOOL, -1 },
	[JO_EVAL_INTERVAL] = { "--eval_interval", OPT_NUM, JO_VALID },
	[JO_EVAL_PERCENT] = { "--eval_percent", OPT_NUM, -1 },
	[JO_NEG_EVAL] = { "--neg_sample_size_eval", OPT_NUM, -1 },
	[JO_BATCH_EVAL] = { "--batch_size_eval", OPT_NUM, JO_NEG_EVAL },
	[JO_NEG_DEG_EVAL] = { "--neg_deg_sample_eval", OPT_BOOL, -1 },
	[JO_NO_FILTER] = { "--no_eval_filter", OPT_BOOL, -1 },
	[JO_PER_REL] = { "--eval_per_relation", OPT_BOOL, -1 },
	[JO_DATA] = { "the data (--partition, or --data without one)", OPT_DIGEST, -1 },
};

/*
 * The two vectors of the start barrier (RDPS_ALLREDUCE_MAX doubles each).
 * Sets of trainer ranks travel as a count, a sum of ranks (which names a
 * lone member) and a bitmap of the first ranks, 52 per double: each rank
 * adds its own power of two once, so the sums stay exact.
 *
 *   arrive: [0] 1 per client, [1] trainers whose data failed to load, [2]
 *           the sum of their ranks, [3..3+N) trainer 0's option values
 *           (client 0 alone adds them: a broadcast), then their bitmap.
 *   differ: [0..N) trainers whose option k differs from trainer 0's,
 *           [N..2N) the sum of their ranks, then the bitmap of trainers that
 *           differ in any option.
 */
#define A_FAILED 1
#define A_FAILED_SUM 2
#define A_OPTS 3
#define A_BITS (A_OPTS + NUM_JOB_OPTS)
#define D_SUM NUM_JOB_OPTS
#define D_BITS (2 * NUM_JOB_OPTS)
#define RANK_BITS 52
_Static_assert(A_BITS < RDPS_ALLREDUCE_MAX && D_BITS < RDPS_ALLREDUCE_MAX,
	       "the start vectors fit in one allreduce");

static void rankset_add(double *bits, size_t words, uint32_t rank)
{
	if (rank / RANK_BITS < words)
		bits[rank / RANK_BITS] += ldexp(1.0, (int)(rank % RANK_BITS));
}

static bool rankset_has(const double *bits, size_t words, uint32_t rank)
{
	if (rank / RANK_BITS >= words)
		return false;
	return ((uint64_t)bits[rank / RANK_BITS] >> (rank % RANK_BITS)) & 1;
}

/* "trainer 3", "trainers 1-3, 7", "trainers 0-99 and 4 more": the ranks
 * below n whose bit is set; count is the size of the whole set (a lone
 * member is named by sum even past the bitmap). */
static void fmt_ranks(char *buf, size_t cap, const double *bits, size_t words, uint32_t n,
		      uint64_t count, double sum)
{
	uint64_t shown = 0;
	size_t len;

	if (count == 1) {
		snprintf(buf, cap, "trainer %.0f", sum);
		return;
	}
	len = (size_t)snprintf(buf, cap, "trainers ");
	for (uint32_t r = 0; r < n && len < cap; r++) {
		uint32_t end = r;

		if (!rankset_has(bits, words, r))
			continue;
		while (end + 1 < n && rankset_has(bits, words, end + 1))
			end++;
		len += (size_t)snprintf(buf + len, cap - len, end > r ? "%s%u-%u" : "%s%u",
					shown ? ", " : "", r, end);
		shown += end - r + 1;
		r = end;
	}
	if (shown < count && len < cap)
		snprintf(buf + len, cap - len, "%s%llu more", shown ? " and " : "",
			 (unsigned long long)(count - shown));
}

/* This trainer's values of job_opts[], exact in a double. */
static void job_opt_values(const struct job *j, double *v)
{
	const struct rdps_train_opts *o = j->o;
	const struct rdps_model_params *m = &o->model;
	enum rdps_model_kind kind = 0;

	rdps_model_lookup(rdps_model_name(j->model), &kind);
	v[JO_MODEL] = kind;
	v[JO_DIM] = m->hidden_dim;
	v[JO_GAMMA] = m->gamma;
	v[JO_ADV] = m->adv;
	v[JO_ADV_TEMP] = m->adv ? m->adv_temp : 0;          /* unused without -adv */
	v[JO_REG_COEF] = m->reg_coef;
	v[JO_REG_NORM] = m->reg_coef > 0 ? m->reg_norm : 0; /* unused without -rc */
	v[JO_BATCH] = o->batch_size;
	v[JO_NEG] = o->neg_sample_size;
	v[JO_CHUNK] = j->chunk;                  /* as used: neg_chunk_size or its default */
	v[JO_NEG_DEG] = o->neg_deg_sample;
	v[JO_MAX_STEP] = (double)o->max_step;    /* below 2^53: the CLI takes up to 1e15 */
	v[JO_RESUME] = o->resume;
	v[JO_TEST] = o->test;
	v[JO_VALID] = o->valid;
	/* the evaluation: its collectives (during training too) pair up, and
	 * the job's metrics mean one thing */
	v[JO_EVAL_INTERVAL] = o->valid ? (double)o->eval_interval : 0;
	v[JO_EVAL_PERCENT] = o->eval_percent;
	v[JO_NEG_EVAL] = o->neg_sample_size_eval < j->num_entities ? (double)o->neg_sample_size_eval
								   : 0;
	v[JO_BATCH_EVAL] = v[JO_NEG_EVAL] ? o->batch_size_eval : 0;
	v[JO_NEG_DEG_EVAL] = o->neg_deg_sample_eval;
	v[JO_NO_FILTER] = o->no_eval_filter;
	v[JO_PER_REL] = o->eval_per_relation && (o->test || o->valid);
	v[JO_DATA] = (double)(j->data_digest >> 12); /* 52 bits: exact */
}

/* A value of option k for a message. */
static void fmt_opt(char *buf, size_t cap, size_t k, double v)
{
	switch (job_opts[k].kind) {
	case OPT_BOOL:
		snprintf(buf, cap, "%s", v != 0 ? "given" : "not given");
		break;
	case OPT_NUM:
		snprintf(buf, cap, "%.9g", v);
		break;
	case OPT_MODEL: {
		/* the name of kind v, found through the list of names */
		char names[256], *save = NULL;
		enum rdps_model_kind kind;

		snprintf(buf, cap, "model %.0f", v);
		snprintf(names, sizeof(names), "%s", rdps_model_names());
		for (char *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
			if (!rdps_model_lookup(t, &kind) && (double)kind == v) {
				snprintf(buf, cap, "%s", t);
				break;
			}
		break;
	}
	case OPT_DIGEST:
		snprintf(buf, cap, "digest %013llx", (unsigned long long)v);
		break;
	}
}

/* Why the start barrier failed, naming what it waited for. */
static void start_barrier_failed(struct worker *w, int ret)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	const char *why = rdps_client_errmsg(w->c), *left = strstr(why, "client ");
	double secs = peer_timeout_ms(o) / 1000.0;
	unsigned int client;
	char others[64];
	size_t len;

	if (ret == -ETIMEDOUT && o->num_trainers > 1) {
		/* No collective completes without every trainer, so the ones that
		 * came cannot tell each other apart from the missing: name the
		 * candidates. */
		if (o->num_trainers == 2) {
			job_fail(j, ret, "the start barrier timed out after %g s (--timeout): "
				 "trainer %u of the job's 2 did not arrive (not started, still "
				 "loading its data, or unable to reach server 0: see its log)",
				 secs, 1 - o->rank);
			return;
		}
		len = (size_t)snprintf(others, sizeof(others), "trainers ");
		if (o->rank > 0)
			len += (size_t)snprintf(others + len, sizeof(others) - len,
						o->rank > 1 ? "0-%u" : "%u", o->rank - 1);
		if (o->rank + 1 < o->num_trainers)
			snprintf(others + len, sizeof(others) - len,
				 o->rank + 2 < o->num_trainers ? "%s%u-%u" : "%s%u",
				 o->rank ? ", " : "", o->rank + 1, o->num_trainers - 1);
		job_fail(j, ret, "the start barrier timed out after %g s (--timeout): not all "
			 "of the job's %u trainers arrived; this one (trainer %u) did, the "
			 "missing are among %s (not started, still loading their data, or "
			 "unable to reach server 0: see their logs)", secs, o->num_trainers,
			 o->rank, others);
	} else if (left && sscanf(left, "client %u left", &client) == 1 &&
		   client < o->num_trainers * o->num_thread) {
		/* The server fails a barrier when one of its clients leaves. */
		job_fail(j, ret, "the start barrier failed: trainer %u arrived and left again "
			 "(it gave up waiting or failed: see its log), so the job's %u trainers "
			 "never all met (%s)", client / o->num_thread, o->num_trainers, why);
	} else {
		job_fail(j, ret, "the start barrier failed while waiting for the job's %u "
			 "trainers: %s", o->num_trainers, why);
	}
}

/* The options of this trainer that differ from trainer 0's (given in a),
 * reduced over the job, into a message; 0 if every trainer agrees. */
static int compare_options(struct worker *w, const double *a)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	double d[RDPS_ALLREDUCE_MAX] = { 0 }, mine[NUM_JOB_OPTS];
	size_t words = RDPS_ALLREDUCE_MAX - D_BITS, len = 0;
	uint64_t ndiff = 0;
	char msg[1024], ranks[256], v0[64], v[64];
	bool differ = false;
	int ret;

	job_opt_values(j, mine);
	for (size_t k = 0; w->t == 0 && k < NUM_JOB_OPTS; k++) {
		if (mine[k] == a[A_OPTS + k])
			continue;
		d[k] = 1;
		d[D_SUM + k] = o->rank;
		differ = true;
	}
	if (differ)
		rankset_add(d + D_BITS, words, o->rank);
	ret = rdps_client_allreduce(w->c, d, RDPS_ALLREDUCE_MAX);
	if (ret) {
		job_fail(j, ret, "comparing the job's options at the start barrier: %s",
			 rdps_client_errmsg(w->c));
		return ret;
	}
	for (uint32_t r = 0; r < o->num_trainers; r++)
		ndiff += rankset_has(d + D_BITS, words, r);
	msg[0] = '\0';
	for (size_t k = 0; k < NUM_JOB_OPTS && len < sizeof(msg); k++) {
		uint64_t n = (uint64_t)d[k];

		/* an option that only matters with another: that one is named */
		if (!n || (job_opts[k].needs >= 0 && d[job_opts[k].needs] > 0))
			continue;
		/* The bitmap lists trainers differing in any option (when it
		 * holds every rank): it names those of option k when they are
		 * all of them. */
		if (n == 1 || (n == ndiff && o->num_trainers <= words * RANK_BITS))
			fmt_ranks(ranks, sizeof(ranks), d + D_BITS, words, o->num_trainers, n,
				  d[D_SUM + k]);
		else
			snprintf(ranks, sizeof(ranks), "%llu trainers", (unsigned long long)n);
		fmt_opt(v0, sizeof(v0), k, a[A_OPTS + k]);
		fmt_opt(v, sizeof(v), k, mine[k]);
		if (len)
			len += (size_t)snprintf(msg + len, sizeof(msg) - len, "; ");
		if (len >= sizeof(msg))
			break;
		if (job_opts[k].kind == OPT_BOOL)
			len += (size_t)snprintf(msg + len, sizeof(msg) - len,
						"%s is %s to trainer 0 but %s to %s", job_opts[k].flag,
						v0, a[A_OPTS + k] != 0 ? "not" : "is", ranks);
		else if (job_opts[k].kind == OPT_DIGEST)
			len += (size_t)snprintf(msg + len, sizeof(msg) - len,
						"%s differs between trainer 0 and %s",
						job_opts[k].flag, ranks);
		else if (mine[k] != a[A_OPTS + k])
			len += (size_t)snprintf(msg + len, sizeof(msg) - len,
						"%s is %s on trainer 0 but differs on %s (%s here)",
						job_opts[k].flag, v0, ranks, v);
		else
			len += (size_t)snprintf(msg + len, sizeof(msg) - len,
						"%s is %s on trainer 0 but differs on %s",
						job_opts[k].flag, v0, ranks);
	}
	if (!msg[0])
		return 0;
	job_fail(j, -EINVAL, "options that must be the same on every trainer of the job differ, so "
		 "none starts training: %s", msg);
	return -EINVAL;
}

/*
 * The start barrier, before any training: waits (bounded by --timeout) for
 * every client of the job, learns whether a trainer failed to load its data
 * (it joins only to say so) and trainer 0's values of the options that must
 * agree, then reduces which trainers differ from them. Every trainer gets
 * the same sums, so all refuse alike, each naming the option and trainers.
 */
static int job_start(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	double a[RDPS_ALLREDUCE_MAX] = { 0 };
	size_t words = RDPS_ALLREDUCE_MAX - A_BITS;
	char ranks[256];
	int ret;

	a[0] = 1;
	if (w->t == 0 && j->start_failed) {
		a[A_FAILED] = 1;
		a[A_FAILED_SUM] = o->rank;
		rankset_add(a + A_BITS, words, o->rank);
	}
	if (w->t == 0 && o->rank == 0 && !j->start_failed)
		job_opt_values(j, a + A_OPTS);
	ret = local_sync(j);
	if (ret)
		return ret;
	if (w->t == 0 && !o->standalone)
		rdps_info("trainer %u: waiting for the job's %u trainers%s at the start barrier "
			  "(up to %g s)", o->rank, o->num_trainers,
			  o->num_thread > 1 ? " (all their threads)" : "", peer_timeout_ms(o) / 1000.0);
	ret = rdps_client_allreduce(w->c, a, RDPS_ALLREDUCE_MAX);
	if (ret) {
		start_barrier_failed(w, ret);
		return ret;
	}
	if (a[A_FAILED] > 0) {
		fmt_ranks(ranks, sizeof(ranks), a + A_BITS, words, o->num_trainers,
			  (uint64_t)a[A_FAILED], a[A_FAILED_SUM]);
		job_fail(j, -ECANCELED, "%s could not load the data (see %s log); no trainer starts "
			 "training", ranks, a[A_FAILED] > 1 ? "their" : "its");
		return -ECANCELED;
	}
	if (w->t == 0 && !o->standalone)
		rdps_info("trainer %u: all %u trainers arrived", o->rank, o->num_trainers);
	rdps_client_set_barrier_timeout(w->c, later_timeout_ms(o));
	return compare_options(w, a);
}

/* A barrier or (v non-NULL) an allreduce of the job after the start, once
 * this trainer's threads are all there; what names it in errors. */
static int job_collective(struct worker *w, const char *what, double *v, size_t n)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	int ret = local_sync(j);

	if (ret)
		return ret;
	ret = v ? allreduce_long(w->c, v, n) : rdps_client_barrier(w->c);
	if (ret == -ETIMEDOUT)
		job_fail(j, ret, "%s: the job's %u trainers did not all arrive within %g s (the "
			 "longer of --timeout and %d s; one is slower or failed: see their logs): %s",
			 what, o->num_trainers, later_timeout_ms(o) / 1000.0,
			 PEER_TIMEOUT_DEFAULT_MS / 1000, rdps_client_errmsg(w->c));
	else if (ret)
		job_fail(j, ret, "%s: %s", what, rdps_client_errmsg(w->c));
	return ret;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	int ret;

	ret = connect_worker(w);
	if (ret)
		goto out;
	/* Everyone connected, loaded its data and agrees on the job before
	 * anyone trains. */
	ret = job_start(w);
	if (ret)
		goto out;
	if (w->t == 0)
		j->t_start = rdps_now_ns();
	ret = train_loop(w);
	/* For the summary: each thread's own, as its client may go meanwhile. */
	w->rolled_back = rdps_client_rolled_back_rows(w->c);
	w->reconnects = rdps_client_reconnects(w->c);
	if (!ret)
		ret = job_collective(w, "the barrier after training", NULL, 0);
	if (w->t == 0 && (!ret || j->interrupted)) {
		double secs = (rdps_now_ns() - j->t_start) / 1e9;
		uint64_t pos = 0;

		for (uint32_t t = 0; t < o->num_thread; t++)
			pos += j->w[t].positives;
		j->res->train_seconds = secs;
		j->res->steps_done = w->done_steps;
		j->res->pos_per_second = secs > 0 ? pos / secs : 0;
		j->res->negatives = w->negatives;
		printf("[trainer %u] training %s: %llu steps (to step %llu) x %u threads in %.1f s, "
		       "%.0f pos triples/s\n", o->rank, ret ? "interrupted" : "done",
		       (unsigned long long)w->done_steps,
		       (unsigned long long)(ret ? w->steps : o->max_step), o->num_thread, secs,
		       j->res->pos_per_second);
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
		ret = evaluate(w, &j->valid_eval, "valid", o->eval_per_relation, &j->res->valid,
			       j->res->valid_rel);
		j->res->have_valid = !ret;
	}
	if (!ret && o->test) {
		ret = evaluate(w, &j->test_eval, "test", o->eval_per_relation, &j->res->test,
			       j->res->test_rel);
		j->res->have_test = !ret;
	}
	/* Every trainer is done with the servers; trainer 0 then saves (the
	 * others need not wait for that) and shuts them down. */
	if (!ret)
		ret = job_collective(w, "the final barrier", NULL, 0);
	if (!ret && o->save_path && o->rank == 0 && w->t == 0)
		ret = save_all(w);
	if (ret && j->interrupted && o->rank == 0 && w->t == 0)
		save_interrupted(w);
	if (!ret && !o->standalone && o->shutdown_servers && o->rank == 0 && w->t == 0) {
		ret = rdps_client_shutdown_servers(w->c);
		if (ret)
			job_fail(j, ret, "shutting the servers down: %s", rdps_client_errmsg(w->c));
	}
out:
	w->ret = ret;
	/* Leaving closes this client's connections: the others' collectives
	 * then fail at once instead of waiting for a timeout. */
	rdps_client_destroy(w->c);
	w->c = NULL;
	return NULL;
}

/* ---------------------------------------------------------------------- */

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
	ret = rdps_server_create(&cfg, &j->srv, err, sizeof(err));
	if (ret) {
		job_fail(j, ret, "in-process store: %s", err);
		return ret;
	}
	ret = -pthread_create(&j->srv_thread, NULL, server_main, j->srv);
	if (ret) {
		rdps_server_destroy(j->srv);
		j->srv = NULL;
	}
	return ret;
}

/* With eval_per_relation: the result's relation names (one block: the
 * pointer array, then the strings) and its per-relation arrays. */
static int alloc_relation_results(struct job *j, const struct rdps_dataset *ds, char *err,
				  size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	struct rdps_train_result *res = j->res;
	uint32_t n = j->num_relations;
	size_t bytes = (size_t)n * sizeof(char *);
	char *p;

	for (uint32_t r = 0; r < n; r++)
		bytes += strlen(rdps_dataset_relation_name(ds, r)) + 1;
	res->relation_names = malloc(bytes ? bytes : 1);
	if (o->test)
		res->test_rel = calloc(n ? n : 1, sizeof(*res->test_rel));
	if (o->valid)
		res->valid_rel = calloc(n ? n : 1, sizeof(*res->valid_rel));
	if (!res->relation_names || (o->test && !res->test_rel) || (o->valid && !res->valid_rel)) {
		snprintf(err, errlen, "out of memory for the metrics of %u relations", n);
		return -ENOMEM;
	}
	p = (char *)(res->relation_names + n);
	for (uint32_t r = 0; r < n; r++) {
		const char *name = rdps_dataset_relation_name(ds, r);
		size_t len = strlen(name) + 1;

		memcpy(p, name, len);
		res->relation_names[r] = p;
		p += len;
	}
	res->num_relations = n;
	return 0;
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

/* Loads triples: from the partition (relabeled) or the dataset. */
static int load_data(struct job *j, char *err, size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	struct rdps_dataset *ds = NULL;
	struct rdps_partition *p = NULL;
	int ret;

	ret = rdps_dataset_open(o->data_dir, &ds, err, errlen);
	if (ret)
		return ret;
	j->num_entities = rdps_dataset_num_entities(ds);
	j->num_relations = rdps_dataset_num_relations(ds);
	if (!j->dataset_name[0]) {
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s", o->data_dir);
		snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", basename(tmp));
	}
	if (o->eval_per_relation && (o->test || o->valid)) {
		ret = alloc_relation_results(j, ds, err, errlen);
		if (ret)
			goto out;
	}
	if (!o->partition_dir) {
		/* Either evaluation needs both other splits: they are in its filter. */
		ret = rdps_dataset_load(ds, RDPS_SPLIT_TRAIN, &j->all_train, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_dataset_load(ds, RDPS_SPLIT_VALID, &j->valid, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_dataset_load(ds, RDPS_SPLIT_TEST, &j->test, err, errlen);
		if (ret)
			goto out;
		/* The trainers of a job must read the same dataset: its counts
		 * stand for it (a trainer's servers check the entity count). */
		{
			uint64_t id[3] = { j->num_entities, j->num_relations, j->all_train.count };

			j->data_digest = XXH3_64bits(id, sizeof(id));
		}
		/* Without a partition, trainers split the triples by rank. */
		if (o->num_trainers == 1) {
			j->train = j->all_train;
		} else {
			uint64_t n = 0;

			j->train.ids = malloc((j->all_train.count / o->num_trainers + 1) * 12);
			if (!j->train.ids) {
				ret = -ENOMEM;
				goto out;
			}
			for (uint64_t i = o->rank; i < j->all_train.count; i += o->num_trainers, n++)
				memcpy(j->train.ids + 3 * n, j->all_train.ids + 3 * i, 12);
			j->train.count = n;
		}
		goto out;
	}
	ret = rdps_partition_open(o->partition_dir, &p, err, errlen);
	if (ret)
		goto out;
	{
		const struct rdps_partition_info *pi = rdps_partition_get_info(p);
		uint32_t part = o->rank % pi->k;

		/* A damaged or edited dataset is named here, file and line, before
		 * its relabeled ids are trusted. */
		ret = rdps_partition_check_dataset(p, o->data_dir, err, errlen);
		if (ret)
			goto out;
		if (pi->num_entities != j->num_entities || pi->num_relations != j->num_relations) {
			snprintf(err, errlen,
				 "%s/partition.json has %llu entities and %llu relations, but %s has "
				 "%llu and %u (the dict copies in %s do not match its partition.json)",
				 o->partition_dir, (unsigned long long)pi->num_entities,
				 (unsigned long long)pi->num_relations, o->data_dir,
				 (unsigned long long)j->num_entities, j->num_relations,
				 o->partition_dir);
			ret = -EINVAL;
			goto out;
		}
		/* The trainers of a job must share the partition: its ranges and
		 * the checksums of its parts stand for it. */
		{
			XXH3_state_t *h = XXH3_createState();

			if (!h) {
				ret = -ENOMEM;
				goto out;
			}
			XXH3_64bits_reset(h);
			XXH3_64bits_update(h, pi->ranges, ((size_t)pi->k + 1) * sizeof(*pi->ranges));
			for (uint32_t q = 0; q < pi->k; q++)
				XXH3_64bits_update(h, &pi->parts[q].checksum, sizeof(pi->parts[q].checksum));
			j->data_digest = XXH3_64bits_digest(h);
			XXH3_freeState(h);
		}
		/* Trainers of one part share its triples. */
		ret = rdps_partition_load_train(p, part, NULL, &j->all_train, err, errlen);
		if (ret)
			goto out;
		if (o->num_trainers > pi->k) {
			uint32_t sharers = 0, me = 0;
			uint64_t n = 0;

			for (uint32_t r = 0; r < o->num_trainers; r++)
				if (r % pi->k == part) {
					if (r == o->rank)
						me = sharers;
					sharers++;
				}
			j->train.ids = malloc((j->all_train.count / sharers + 1) * 12);
			if (!j->train.ids) {
				ret = -ENOMEM;
				goto out;
			}
			for (uint64_t i = me; i < j->all_train.count; i += sharers, n++)
				memcpy(j->train.ids + 3 * n, j->all_train.ids + 3 * i, 12);
			j->train.count = n;
		} else {
			j->train = j->all_train;
		}
		/* The evaluation filter needs every part's triples. */
		if (o->test || o->valid) {
			struct rdps_triples all = { 0 };
			uint64_t total = pi->num_triples[RDPS_SPLIT_TRAIN], n = 0;

			all.ids = malloc(total * 12 + 12);
			for (uint32_t q = 0; all.ids && !ret && q < pi->k; q++) {
				struct rdps_triples tq;

				ret = rdps_partition_load_train(p, q, NULL, &tq, err, errlen);
				if (!ret) {
					memcpy(all.ids + 3 * n, tq.ids, tq.count * 12);
					n += tq.count;
					rdps_dataset_triples_free(&tq);
				}
			}
			all.count = n;
			if (!all.ids)
				ret = -ENOMEM;
			if (ret) {
				free(all.ids);
				goto out;
			}
			if (j->train.ids == j->all_train.ids) {
				/* all_train aliased train: keep train, replace the filter set */
				j->all_train = all;
			} else {
				rdps_dataset_triples_free(&j->all_train);
				j->all_train = all;
			}
		}
		if (!ret && (o->test || o->valid))
			ret = rdps_partition_load_split(p, RDPS_SPLIT_VALID, NULL, &j->valid, err, errlen);
		if (!ret && (o->test || o->valid))
			ret = rdps_partition_load_split(p, RDPS_SPLIT_TEST, NULL, &j->test, err, errlen);
		if (!ret && o->save_path && o->rank == 0)
			ret = rdps_partition_load_idmap(p, NULL, &j->new_to_old, NULL, err, errlen);
		if (!ret)
			rdps_info("trainer %u: part %u of %u: %llu train triples (%llu for this trainer)",
				  o->rank, part, pi->k, (unsigned long long)pi->parts[part].num_triples,
				  (unsigned long long)j->train.count);
	}
out:
	rdps_partition_close(p);
	rdps_dataset_close(ds);
	return ret;
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

		progress_path(o, t, path, sizeof(path));
		if (access(path, R_OK)) {
			int e = errno;

			snprintf(err, errlen, "--resume: cannot read %s: %s", path, strerror(e));
			return -ENOENT;
		}
	}
	return 0;
}

/* Whether dir holds a dataset in the raw layout (its entities.dict). */
static bool is_dataset(const char *dir)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/entities.dict", dir);
	return !access(path, F_OK);
}

/* The column order of a udd format: the letters h, r, t once each. */
static bool valid_order(const char *order)
{
	return strlen(order) == 3 && strchr(order, 'h') && strchr(order, 'r') && strchr(order, 't');
}

/* Removes the temporary raw layout of a udd format. */
static void remove_import(struct job *j)
{
	static const char *const files[] = { "entities.dict", "relations.dict", "train.txt",
					     "valid.txt", "test.txt" };
	char path[4200];

	if (!j->import_dir[0])
		return;
	for (size_t i = 0; i < RDPS_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/data/%s", j->import_dir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/data", j->import_dir);
	rmdir(path);
	rmdir(j->import_dir);
	j->import_dir[0] = '\0';
}

/*
 * DGL-KE's --data_path, --dataset, --format, --data_files and --delimiter
 * to the raw layout the trainer reads (e->data_dir); a udd format is
 * imported into a temporary directory for the run (j->import_dir). Also
 * names the dataset (saved files).
 */
static int resolve_data(struct job *j, struct rdps_train_opts *e, char *err, size_t errlen)
{
	const char *format = e->format && *e->format ? e->format : "built_in";
	size_t nfiles = 0;
	int ret;

	while (nfiles < RDPS_ARRAY_SIZE(e->data_files) && e->data_files[nfiles])
		nfiles++;
	if (!strcmp(format, "built_in")) {
		if (nfiles) {
			snprintf(err, errlen, "--data_files lists the files of --format raw_udd_<order> "
				 "or udd_<order>; the built_in format reads the dataset directory "
				 "--data_path/--dataset");
			return -EINVAL;
		}
		if (!e->data_dir && !e->data_path) {
			snprintf(err, errlen, "give the dataset: --data DIR (the raw layout), or "
				 "DGL-KE's --data_path DIR --dataset NAME");
			return -EINVAL;
		}
		if (!e->data_dir && (e->dataset || !is_dataset(e->data_path))) {
			/* DGL-KE's data_path/dataset, its default dataset FB15k */
			snprintf(j->data_dir, sizeof(j->data_dir), "%s/%s", e->data_path,
				 e->dataset ? e->dataset : "FB15k");
			e->data_dir = j->data_dir;
		} else if (!e->data_dir) {
			e->data_dir = e->data_path; /* the dataset itself, as rdps's --data */
		}
		if (!is_dataset(e->data_dir)) {
			snprintf(err, errlen, "%s is not a dataset: no entities.dict in it (rdps does "
				 "not download DGL-KE's built-in datasets: make one with rdps dataset "
				 "wordnet or rdps dataset import%s)", e->data_dir,
				 e->dataset ? "" : ", or name it with --dataset");
			return -ENOENT;
		}
	} else {
		bool raw = !strncmp(format, "raw_udd_", 8);
		const char *order = format + (raw ? 8 : 4);
		const char *dir = e->data_path ? e->data_path : e->data_dir;
		const char *tmpdir = getenv("TMPDIR");
		struct rdps_import_opts io = { .format = raw ? RDPS_IMPORT_RAW : RDPS_IMPORT_UDD,
					       .in_dir = dir, .order = order,
					       .delimiter = e->delimiter };
		struct rdps_dataset_stats st;
		size_t first = raw ? 0 : 2;

		if ((!raw && strncmp(format, "udd_", 4)) || !valid_order(order)) {
			snprintf(err, errlen, "--format %s: not built_in, raw_udd_<order> or "
				 "udd_<order> (order: hrt, htr, rht, rth, thr or trh)", format);
			return -EINVAL;
		}
		if (!dir) {
			snprintf(err, errlen, "--format %s needs --data_path DIR (where --data_files "
				 "are)", format);
			return -EINVAL;
		}
		/* DGL-KE's counts: [entities relations] train [valid test] */
		if (nfiles != first + 1 && nfiles != first + 3) {
			snprintf(err, errlen, "--format %s needs --data_files %s (%zu given)", format,
				 raw ? "TRAIN [VALID TEST]"
				     : "ENTITIES RELATIONS TRAIN [VALID TEST]", nfiles);
			return -EINVAL;
		}
		if (!raw) {
			io.entity_file = e->data_files[0];
			io.relation_file = e->data_files[1];
		}
		for (size_t s = 0; s < RDPS_SPLIT_COUNT; s++)
			io.files[s] = first + s < nfiles ? e->data_files[first + s] : NULL;
		io.train_only = nfiles == first + 1;
		snprintf(j->import_dir, sizeof(j->import_dir), "%s/rdps-train-XXXXXX",
			 tmpdir && *tmpdir ? tmpdir : "/tmp");
		if (!mkdtemp(j->import_dir)) {
			ret = -errno;
			snprintf(err, errlen, "--format %s: cannot make a temporary directory %s: %s",
				 format, j->import_dir, strerror(-ret));
			j->import_dir[0] = '\0';
			return ret;
		}
		snprintf(j->data_dir, sizeof(j->data_dir), "%s/data", j->import_dir);
		ret = rdps_dataset_import(j->data_dir, &io, &st, err, errlen);
		if (ret) {
			char why[1024];

			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "--format %s: %s", format, why);
			remove_import(j);
			return ret;
		}
		if (e->rank == 0)
			rdps_info("trainer %u: --format %s: %llu entities, %llu relations, %llu train "
				  "triples from %s (read as the raw layout in %s for this run)",
				  e->rank, format, (unsigned long long)st.num_entities,
				  (unsigned long long)st.num_relations,
				  (unsigned long long)st.num_triples[RDPS_SPLIT_TRAIN], dir,
				  j->data_dir);
		e->data_dir = j->data_dir;
		if (!e->dataset) {
			char tmp[4096];

			snprintf(tmp, sizeof(tmp), "%s", dir);
			snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", basename(tmp));
		}
	}
	if (e->dataset)
		snprintf(j->dataset_name, sizeof(j->dataset_name), "%s", e->dataset);
	return 0;
}

/*
 * --save_path before any work (trainer 0 writes there, at the end): made if
 * missing (its parent must exist, as DGL-KE's os.mkdir), and a file can be
 * created in it. With check_only nothing is made: the parent is checked.
 */
static int check_save_path(const struct rdps_train_opts *o, char *err, size_t errlen)
{
	struct stat st;
	char probe[4200];
	int fd, ret;

	if (!o->save_path || o->rank != 0)
		return 0;
	if (stat(o->save_path, &st)) {
		char parent[4096];

		if (errno == ENOENT && !o->check_only && !mkdir(o->save_path, 0755))
			goto probe;
		snprintf(parent, sizeof(parent), "%s", o->save_path);
		snprintf(probe, sizeof(probe), "%s", dirname(parent));
		if (errno == ENOENT && o->check_only && !access(probe, W_OK | X_OK))
			return 0;
		ret = -errno;
		snprintf(err, errlen, "--save_path %s cannot be created: %s%s", o->save_path,
			 strerror(-ret), ret == -ENOENT ? " (its parent does not exist)" : "");
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--save_path %s is not a directory", o->save_path);
		return -ENOTDIR;
	}
probe:
	snprintf(probe, sizeof(probe), "%s/.rdps-write-check-XXXXXX", o->save_path);
	fd = mkstemp(probe);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "--save_path %s is not writable: %s (the embeddings and "
			 "metrics would be lost after training)", o->save_path, strerror(-ret));
		return ret;
	}
	close(fd);
	unlink(probe);
	return 0;
}

/* The evaluation filter (every true triple: train, valid, test, as DGL-KE's
 * EvalDataset), and the eval_percent share of each split: the same fixed
 * selection on every trainer, which then take every num_trainers-th. */
static int prepare_eval(struct job *j, char *err, size_t errlen)
{
	const struct rdps_train_opts *o = j->o;
	const struct rdps_triples *sets[3] = { &j->all_train, &j->valid, &j->test };
	struct rdps_triples *evals[2] = { &j->valid_eval, &j->test_eval };
	int ret = 0;

	if (!o->test && !o->valid)
		return 0;
	if ((o->test && !j->test.count) || (o->valid && !j->valid.count)) {
		snprintf(err, errlen, "--%s: the data has no %s triples", o->test && !j->test.count ?
			 "test" : "valid", o->test && !j->test.count ? "test" : "valid");
		return -EINVAL;
	}
	if (!o->no_eval_filter) {
		ret = rdps_triple_set_create(&j->filter, j->all_train.count + j->valid.count +
							 j->test.count);
		for (int s = 0; !ret && s < 3; s++) {
			long n = rdps_triple_set_add(j->filter,
						     (const struct rdps_triple *)sets[s]->ids,
						     sets[s]->count);

			if (n < 0)
				ret = (int)n;
		}
		if (ret) {
			snprintf(err, errlen, "building the evaluation filter: %s", rdps_strerror(ret));
			return ret;
		}
	}
	for (int s = 0; s < 2; s++) {
		const struct rdps_triples *all = s ? &j->test : &j->valid;
		uint64_t keep = (uint64_t)(all->count * o->eval_percent), rng = 0x5eed + s;
		uint32_t *idx;

		*evals[s] = *all;
		if (o->eval_percent >= 1 || !all->count)
			continue;
		/* a partial shuffle picks keep triples; kept in file order */
		idx = malloc(all->count * sizeof(*idx));
		evals[s]->ids = malloc((keep ? keep : 1) * 12);
		if (!idx || !evals[s]->ids) {
			free(idx);
			free(evals[s]->ids);
			evals[s]->ids = NULL;
			evals[s]->count = 0;
			return -ENOMEM;
		}
		for (uint64_t i = 0; i < all->count; i++)
			idx[i] = (uint32_t)i;
		for (uint64_t i = 0; i < keep; i++) {
			uint64_t k = i + (xorshift(&rng) >> 11) % (all->count - i);
			uint32_t t = idx[i];

			idx[i] = idx[k];
			idx[k] = t;
		}
		qsort(idx, keep, sizeof(*idx), cmp_u32);
		for (uint64_t i = 0; i < keep; i++)
			memcpy(evals[s]->ids + 3 * i, all->ids + 3 * (uint64_t)idx[i], 12);
		evals[s]->count = keep;
		free(idx);
		if (o->rank == 0)
			rdps_info("trainer %u: --eval_percent %g: %llu of the %llu %s triples", o->rank,
				  o->eval_percent, (unsigned long long)keep,
				  (unsigned long long)all->count, s ? "test" : "valid");
	}
	return 0;
}

/* The model's row widths against -de / -dr: a model that does not double
 * its rows for them refuses them (its tables would not be DGL-KE's). */
static int check_double(const struct job *j, char *err, size_t errlen)
{
	const struct rdps_model_params *m = &j->o->model;

	if (m->double_ent && j->ent_dim != 2 * m->hidden_dim) {
		snprintf(err, errlen, "-de/--double_ent: %s with hidden_dim %u has entity rows of %u "
			 "floats, not %u (it does not double them)", rdps_model_name(j->model),
			 m->hidden_dim, j->ent_dim, 2 * m->hidden_dim);
		return -EINVAL;
	}
	if (m->double_rel && j->rel_dim != 2 * m->hidden_dim) {
		snprintf(err, errlen, "-dr/--double_rel: %s with hidden_dim %u has relation rows of "
			 "%u floats, not %u (it does not double them)", rdps_model_name(j->model),
			 m->hidden_dim, j->rel_dim, 2 * m->hidden_dim);
		return -EINVAL;
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
	ret = check_save_path(o, err, errlen);
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
	ret = check_double(&j, err, errlen);
	if (ret)
		goto out;
	j.chunk = o->neg_chunk_size ? o->neg_chunk_size : o->neg_sample_size;
	if (j.chunk > o->batch_size)
		j.chunk = o->batch_size;
	/* DGL-KE's --neg_deg_sample doubles the negatives (chunk more by degree) */
	j.negs = o->neg_sample_size + (o->neg_deg_sample ? j.chunk : 0);
	ret = resolve_data(&j, o, err, errlen);
	if (ret)
		goto out;
	ret = load_ret = load_data(&j, err, errlen);
	if (!ret)
		ret = load_ret = prepare_eval(&j, err, errlen);
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
		ret = worker_alloc(w);
		if (ret) {
			snprintf(err, errlen, "out of memory for the batch buffers");
			goto out_workers;
		}
	}
	for (uint32_t t = 0; t < o->num_thread; t++) {
		ret = -pthread_create(&j.w[t].thread, NULL, worker_main, &j.w[t]);
		if (ret) {
			job_fail(&j, ret, "cannot start thread %u", t);
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
			 o->rank == 0 ? ": " : " (trainer 0 saves the embeddings)",
			 o->rank == 0 ? j.save_note : "");
	else if (!load_ret && ret)
		snprintf(err, errlen, "trainer %u: %s", o->rank, j.err);
	if (j.interrupted)
		ret = -EINTR;
out_workers:
	for (uint32_t t = 0; t < o->num_thread; t++)
		worker_free(&j.w[t]);
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
	remove_import(&j);
	rdps_model_destroy(j.model);
	pthread_cond_destroy(&j.cond);
	pthread_mutex_destroy(&j.lock);
	if (ret)
		rdps_train_result_free(res);
	return ret;
}
