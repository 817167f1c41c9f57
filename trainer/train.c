// SPDX-License-Identifier: MIT
/* The training job: sampling, pull/compute/push steps, the start barrier, the
 * run (evaluation: train_eval.c; data: train_data.c; files: train_save.c). */
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

static int peer_timeout_ms(const struct rdps_train_opts *o);

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

void rdps_tj_fail(struct job *j, int ret, const char *fmt, ...)
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

/* Uniform in [0, n) without modulo bias worth caring about (n < 2^32). */
static void shuffle(uint32_t *a, uint64_t n, uint64_t *rng)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t k = ((rdps_tj_xorshift(rng) >> 11) % i);
		uint32_t t = a[i - 1];

		a[i - 1] = a[k];
		a[k] = t;
	}
}

/* Sorts and deduplicates ids[0..n) into out (as u64), returns the count. */
/*
 * The unique ids among parts of a batch, ascending, into out (returns how
 * many), and each id replaced in place by its index in out. The ids are
 * sorted with their positions (id << 32 | position) by a radix sort over
 * the bits ids below max_id need: a few passes, no comparisons, and no
 * search per id afterwards. keys and tmp hold the total count each.
 */
struct id_run {
	uint32_t *ids;
	uint32_t n;
};

static uint32_t unique_ids(struct id_run *runs, int nruns, uint64_t max_id, uint64_t *keys,
			   uint64_t *tmp, uint64_t *out)
{
	uint32_t count[1u << 11], total = 0, m = 0;
	uint32_t bits = max_id ? 64 - (uint32_t)__builtin_clzll(max_id) : 1;

	for (int r = 0; r < nruns; r++)
		for (uint32_t i = 0; i < runs[r].n; i++, total++)
			keys[total] = (uint64_t)runs[r].ids[i] << 32 | total;
	for (uint32_t shift = 32; shift < 32 + bits; shift += 11) {
		uint32_t sum = 0;
		uint64_t *t;

		memset(count, 0, sizeof(count));
		for (uint32_t i = 0; i < total; i++)
			count[(keys[i] >> shift) & 2047]++;
		for (uint32_t d = 0; d < 2048; d++) {
			uint32_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < total; i++)
			tmp[count[(keys[i] >> shift) & 2047]++] = keys[i];
		t = keys;
		keys = tmp;
		tmp = t;
	}
	/* Positions back to (run, index): the runs are short and few. */
	for (uint32_t i = 0; i < total; i++) {
		uint32_t id = (uint32_t)(keys[i] >> 32), pos = (uint32_t)keys[i];
		int r = 0;

		if (!m || out[m - 1] != id)
			out[m++] = id;
		while (pos >= runs[r].n)
			pos -= runs[r++].n;
		runs[r].ids[pos] = m - 1;
	}
	return m;
}

/* ---------------------------------------------------------------------- */

static int step_buf_alloc(struct step_buf *sb, const struct job *j, uint32_t max_ent)
{
	uint32_t B = j->o->batch_size, nchunks = (B + j->chunk - 1) / j->chunk;

	sb->head = malloc(B * sizeof(uint32_t));
	sb->rel = malloc(B * sizeof(uint32_t));
	sb->tail = malloc(B * sizeof(uint32_t));
	sb->neg = malloc((size_t)nchunks * j->negs * sizeof(uint32_t));
	sb->ent_ids = malloc(max_ent * sizeof(uint64_t));
	sb->rel_ids = malloc(B * sizeof(uint64_t));
	sb->ent_rows = aligned_alloc(64, RDPS_ALIGN_UP((size_t)max_ent * j->ent_dim * 4, 64));
	sb->rel_rows = aligned_alloc(64, RDPS_ALIGN_UP((size_t)B * j->rel_dim * 4, 64));
	if (!sb->head || !sb->rel || !sb->tail || !sb->neg || !sb->ent_ids || !sb->rel_ids ||
	    !sb->ent_rows || !sb->rel_rows)
		return -ENOMEM;
	return 0;
}

static void step_buf_free(struct step_buf *sb)
{
	free(sb->head);
	free(sb->rel);
	free(sb->tail);
	free(sb->neg);
	free(sb->ent_ids);
	free(sb->rel_ids);
	free(sb->ent_rows);
	free(sb->rel_rows);
}

static int worker_alloc(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t B = o->batch_size, nchunks = (B + j->chunk - 1) / j->chunk;
	uint32_t negs = nchunks * j->negs;
	uint32_t max_ent = 2 * B + negs;

	/* The second batch only with the pipeline: the serial step has one. */
	for (int i = 0; i < (o->no_pipeline ? 1 : 2); i++)
		if (step_buf_alloc(&w->buf[i], j, max_ent))
			return -ENOMEM;
	w->nkeys = max_ent;
	w->keys = malloc(2 * (size_t)max_ent * sizeof(uint64_t));
	w->ent_grad = aligned_alloc(64, RDPS_ALIGN_UP((size_t)max_ent * j->ent_dim * 4, 64));
	w->rel_grad = aligned_alloc(64, RDPS_ALIGN_UP((size_t)B * j->rel_dim * 4, 64));
	w->scratch_size = rdps_model_scratch_size(j->model, j->chunk, j->negs, max_ent, B);
	w->scratch = malloc(w->scratch_size);
	if (!w->keys || !w->ent_grad || !w->rel_grad || !w->scratch)
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
	step_buf_free(&w->buf[0]);
	step_buf_free(&w->buf[1]);
	free(w->keys);
	free(w->ent_grad);
	free(w->rel_grad);
	free(w->scratch);
	free(w->order);
	rdps_client_pull_batch_destroy(w->pulls);
	w->pulls = NULL;
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
		rdps_tj_fail(j, ret, "%s (is another trainer running with --rank %u?)", err, o->rank);
		return ret;
	}
	if (ret == -ECONNREFUSED || ret == -ETIMEDOUT || ret == -EHOSTUNREACH ||
	    ret == -ENETUNREACH) {
		rdps_tj_fail(j, ret, "no server reachable: %s; gave up after --timeout %g s (are the "
			 "servers of %s running?)", err, p.timeout_ms > 0 ? p.timeout_ms / 1000.0 : 60.0,
			 o->ip_config);
		return ret;
	}
	if (ret) {
		rdps_tj_fail(j, ret, "%s", err);
		return ret;
	}
	if (j->start_failed)
		return 0; /* no data to check the tables against: it only reports */
	if (rdps_client_table(w->c, "entity", &ent) || rdps_client_table(w->c, "relation", &rel)) {
		rdps_tj_fail(j, -ENOENT, "the servers have no 'entity' and 'relation' tables");
		return -ENOENT;
	}
	if (ent.num_rows != j->num_entities || rel.num_rows != j->num_relations) {
		rdps_tj_fail(j, -EINVAL,
			 "the servers hold %llu entities and %llu relations, the dataset has %llu and %u "
			 "(servers started for another dataset?)",
			 (unsigned long long)ent.num_rows, (unsigned long long)rel.num_rows,
			 (unsigned long long)j->num_entities, j->num_relations);
		return -EINVAL;
	}
	if (ent.dim != j->ent_dim || rel.dim != j->rel_dim) {
		rdps_tj_fail(j, -EINVAL,
			 "%s with hidden_dim %u needs entity rows of %u and relation rows of %u floats; "
			 "the servers hold %u and %u (start them with the same --model_name and --hidden_dim)",
			 rdps_model_name(j->model), o->model.hidden_dim, j->ent_dim, j->rel_dim,
			 ent.dim, rel.dim);
		return -EINVAL;
	}
	w->ent_table = ent.id;
	w->rel_table = rel.id;
	ret = rdps_client_pull_batch_create(w->c, &w->pulls);
	if (ret)
		rdps_tj_fail(j, ret, "out of memory for the pulls of a step");
	return ret;
}

/* Samples step's positives and negatives into sb (ids, not yet rows);
 * DGL-KE alternates head and tail corruption. */
static void sample_batch(struct worker *w, struct step_buf *sb, uint64_t step)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t B = o->batch_size, N = j->negs;
	uint32_t nchunks = (B + j->chunk - 1) / j->chunk;
	int neg_head = (int)(step & 1);

	sb->rng = w->rng;
	for (uint32_t i = 0; i < B; i++) {
		const uint32_t *tr;

		if (w->cursor == w->norder) {
			shuffle(w->order, w->norder, &w->rng);
			w->cursor = 0;
		}
		tr = j->train.ids + 3 * (uint64_t)w->order[w->cursor++];
		sb->head[i] = tr[0];
		sb->rel[i] = tr[1];
		sb->tail[i] = tr[2];
	}
	for (uint32_t i = 0; i < nchunks * N; i++) {
		const uint32_t *tr;

		if (i % N < o->neg_sample_size) {
			sb->neg[i] = rdps_tj_uniform(&w->rng, j->num_entities);
			continue;
		}
		/* --neg_deg_sample: the corrupted end of a random positive is an
		 * entity drawn in proportion to its degree (DGL-KE draws the
		 * chunk's own positives, and masks each one's own) */
		tr = j->train.ids + 3 * (uint64_t)rdps_tj_uniform(&w->rng, j->train.count);
		sb->neg[i] = tr[neg_head ? 0 : 2];
	}
	sb->b = (struct rdps_batch){
		.size = B, .chunk = j->chunk, .neg = N, .neg_head = neg_head,
		.head = sb->head, .rel = sb->rel, .tail = sb->tail, .neg_ent = sb->neg,
	};
}

/* The rows sb's batch needs (sorted, unique ids), and its ids turned into
 * indices of those rows. */
static void gather_ids(struct worker *w, struct step_buf *sb)
{
	uint32_t B = sb->b.size, nneg = (B + sb->b.chunk - 1) / sb->b.chunk * sb->b.neg;

	struct id_run ent[3] = { { sb->head, B }, { sb->tail, B }, { sb->neg, nneg } };
	struct id_run rel[1] = { { sb->rel, B } };

	sb->n_ent = unique_ids(ent, 3, w->j->num_entities - 1, w->keys, w->keys + w->nkeys,
			       sb->ent_ids);
	sb->n_rel = unique_ids(rel, 1, w->j->num_relations - 1, w->keys, w->keys + w->nkeys,
			       sb->rel_ids);
	sb->b.n_ent_rows = sb->n_ent;
	sb->b.n_rel_rows = sb->n_rel;
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
const char *rdps_tj_fmt_eta(char *buf, size_t len, double secs, double done, double total)
{
	char a[32], b[32];

	snprintf(buf, len, "elapsed %s  ETA %s", fmt_secs(a, sizeof(a), secs),
		 done > 0 ? fmt_secs(b, sizeof(b), secs / done * (total - done)) : "?");
	return buf;
}

/* Means per step of t (struct rdps_train_step_split says what each is). */
static void step_split(const struct job *j, const struct step_times *t,
		       struct rdps_train_step_split *out)
{
	double n = t->steps ? (double)t->steps * 1e6 : 1e6; /* ns sums -> ms per step */

	*out = (struct rdps_train_step_split){
		.sample_ms = t->sample / n,
		.gather_ms = t->gather / n,
		.kernel_ms = t->kernel / n,
	};
	if (j->o->standalone) {
		/* the in-process store: pulls copy rows, pushes apply them */
		out->gather_ms += t->pull / n;
		out->optimizer_ms = t->push / n;
		return;
	}
	out->network_ms = (t->pull + t->push) / n;
	out->net_ms = (t->pull_flight + t->push) / n;
	out->hidden_ms = t->pull_flight > t->pull ? (t->pull_flight - t->pull) / n : 0;
}

/*
 * "... pull P ms  compute C ms  push Q ms": thread 0's means per step over
 * the interval of the time in its pull calls, the model kernel and its push
 * calls. Distributed, then "net N ms  hidden H ms (X%)": N is the step's
 * network time, measured from the call posting its pull until the rows were
 * in, plus its pushes; H how long of it the thread computed instead of
 * waiting (rdps_train_step_split's net_ms, hidden_ms).
 */
static void log_progress(struct job *j, uint64_t first, uint64_t step)
{
	const struct rdps_train_opts *o = j->o;
	double secs = (rdps_now_ns() - j->t_start) / 1e9, loss, n;
	struct worker *w0 = &j->w[0];
	struct rdps_train_step_split sp;
	uint64_t pos = 0;
	char eta[96], net[96] = "";

	for (uint32_t t = 0; t < o->num_thread; t++)
		pos += __atomic_load_n(&j->w[t].positives, __ATOMIC_RELAXED);
	/* Interval figures from thread 0, which resets them. */
	n = w0->iv.steps ? (double)w0->iv.steps * 1e6 : 1e6;
	loss = w0->loss_sum / (w0->loss_n ? (double)w0->loss_n : 1.0);
	step_split(j, &w0->iv, &sp);
	if (!o->standalone)
		snprintf(net, sizeof(net), "net %.2f ms  hidden %.2f ms (%.0f%%)  ", sp.net_ms,
			 sp.hidden_ms, sp.net_ms > 0 ? 100 * sp.hidden_ms / sp.net_ms : 0.0);
	printf("[trainer %u] step %llu/%llu  loss %.4f  %.0f pos/s  pull %.2f ms  compute %.2f ms  "
	       "push %.2f ms  %s%s\n",
	       o->rank, (unsigned long long)step, (unsigned long long)o->max_step, loss,
	       secs > 0 ? pos / secs : 0.0, w0->iv.pull / n, w0->iv.kernel / n, w0->iv.push / n,
	       net, rdps_tj_fmt_eta(eta, sizeof(eta), secs, (double)(step - first),
				    (double)(o->max_step - first)));
	fflush(stdout);
	j->res->last_loss = loss;
	w0->loss_sum = 0;
	w0->loss_n = 0;
	memset(&w0->iv, 0, sizeof(w0->iv));
}

/* DIR/trainer-R-T.json: this thread's step and sampler state. */
static void progress_path(const struct rdps_train_opts *o, uint32_t t, char *buf, size_t len)
{
	snprintf(buf, len, "%s/trainer-%u-%u.json", o->checkpoint_dir, o->rank, t);
}

/* Written atomically (temporary file, fsync, rename). */
static int save_progress(const struct worker *w, uint64_t step, uint64_t rng)
{
	char path[4096], tmp[4200];
	json_t *p = json_pack("{s:I, s:s, s:i, s:i}", "step", (json_int_t)step, "rng",
			      "", "rank", (int)w->j->o->rank, "thread", (int)w->t);
	char hex[20];
	FILE *f;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)rng);
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
		rdps_tj_fail(w->j, -ENOENT, "--resume: cannot read %s: %s", path, je.text);
		return -ENOENT;
	}
	s = json_object_get(p, "step");
	r = json_object_get(p, "rng");
	if (!json_is_integer(s) || json_integer_value(s) < 0 || !json_is_string(r) ||
	    sscanf(json_string_value(r), "%" SCNx64, &w->rng) != 1 || !w->rng) {
		rdps_tj_fail(w->j, -EINVAL, "--resume: %s: field step or rng is malformed", path);
		ret = -EINVAL;
	} else {
		*step = (uint64_t)json_integer_value(s);
	}
	json_decref(p);
	return ret;
}

/* Both sums of step times: the interval's (progress lines) and the run's. */
#define ADD_TIME(w, field, ns) do { (w)->iv.field += (ns); (w)->run.field += (ns); } while (0)

/*
 * Samples step into sb and posts its entity and relation pulls together;
 * returns without waiting for them (fetch_finish() does). Every sampling
 * happens before its pull is posted, so both step orders draw the same
 * batches.
 */
static int fetch_start(struct worker *w, struct step_buf *sb, uint64_t step)
{
	struct job *j = w->j;
	uint64_t t0 = rdps_now_ns(), t1, t2;
	int ret;

	sample_batch(w, sb, step);
	t1 = rdps_now_ns();
	gather_ids(w, sb);
	t2 = rdps_now_ns();
	ADD_TIME(w, sample, t1 - t0);
	ADD_TIME(w, gather, t2 - t1);
	sb->t_post = t2;
	ret = rdps_client_pull_start(w->c, w->pulls, w->ent_table, sb->ent_ids, sb->n_ent,
				     sb->ent_rows);
	if (!ret)
		ret = rdps_client_pull_start(w->c, w->pulls, w->rel_table, sb->rel_ids, sb->n_rel,
					     sb->rel_rows);
	sb->pull_blocked_ns = rdps_now_ns() - t2;
	if (ret) {
		rdps_tj_fail(j, ret, "pull: %s", rdps_client_errmsg(w->c));
		rdps_client_pull_finish(w->c, w->pulls); /* what was posted */
	}
	return ret;
}

/* Waits for sb's rows; accounts the pull's time in flight and blocked. */
static int fetch_finish(struct worker *w, struct step_buf *sb)
{
	uint64_t t0 = rdps_now_ns(), t1;
	int ret = rdps_client_pull_finish(w->c, w->pulls);

	t1 = rdps_now_ns();
	if (ret) {
		rdps_tj_fail(w->j, ret, "pull: %s", rdps_client_errmsg(w->c));
		return ret;
	}
	sb->pull_blocked_ns += t1 - t0;
	ADD_TIME(w, pull, sb->pull_blocked_ns);
	ADD_TIME(w, pull_flight, t1 - sb->t_post);
	return 0;
}

/* The model kernel on sb's rows into the gradient buffers. */
static int kernel(struct worker *w, struct step_buf *sb, uint64_t step)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	struct rdps_step_result sr;
	uint64_t t0 = rdps_now_ns(), t1;
	int ret;

	memset(w->ent_grad, 0, (size_t)sb->n_ent * j->ent_dim * 4);
	memset(w->rel_grad, 0, (size_t)sb->n_rel * j->rel_dim * 4);
	t1 = rdps_now_ns();
	ADD_TIME(w, gather, t1 - t0);
	ret = rdps_model_step(j->model, &sb->b, sb->ent_rows, sb->rel_rows, w->ent_grad,
			      w->rel_grad, w->scratch, w->scratch_size, &sr);
	ADD_TIME(w, kernel, rdps_now_ns() - t1);
	if (ret) {
		rdps_tj_fail(j, ret, "model step failed: %s", rdps_strerror(ret));
		return ret;
	}
	if (o->kernel_done)
		o->kernel_done(o->hook_arg, w->t, step);
	/* DGL-KE's printed loss leaves out the regularization. */
	w->loss_sum += sr.loss - sr.reg;
	w->loss_n++;
	w->negatives += (uint64_t)((sb->b.size + sb->b.chunk - 1) / sb->b.chunk) * sb->b.neg;
	return 0;
}

/* Pushes sb's gradients (asynchronous; flushed with --sync). */
static int push(struct worker *w, struct step_buf *sb)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint64_t t0 = rdps_now_ns();
	int ret;

	ret = rdps_client_push(w->c, w->ent_table, sb->ent_ids, w->ent_grad, sb->n_ent);
	if (!ret)
		ret = rdps_client_push(w->c, w->rel_table, sb->rel_ids, w->rel_grad, sb->n_rel);
	if (!ret && o->sync_push)
		ret = rdps_client_flush(w->c);
	if (ret == -ECONNRESET && o->reconnect_ms) {
		/* A server came back from its checkpoint: this step's
		 * and unacknowledged pushes are lost, training goes on. */
		rdps_warn("trainer %u: %s; continuing", o->rank, rdps_client_errmsg(w->c));
		ret = 0;
	}
	if (ret) {
		rdps_tj_fail(j, ret, "push: %s", rdps_client_errmsg(w->c));
		return ret;
	}
	ADD_TIME(w, push, rdps_now_ns() - t0);
	w->iv.steps++;
	w->run.steps++;
	__atomic_store_n(&w->positives, w->positives + o->batch_size, __ATOMIC_RELAXED);
	return 0;
}

/* The serial step (no_pipeline): sample, pull, compute, push. */
static int serial_step(struct worker *w, uint64_t step)
{
	struct step_buf *sb = &w->buf[0];
	int ret;

	if ((ret = fetch_start(w, sb, step)) || (ret = fetch_finish(w, sb)) ||
	    (ret = kernel(w, sb, step)))
		return ret;
	return push(w, sb);
}

/*
 * Step k of the pipeline (train.h): cur holds step k's rows; step k+1 is
 * sampled into next and its pull posted before the kernel, waited for
 * after it, and only then are step k's gradients pushed (a connection
 * takes no push while pulls are posted on it). So step k+1's rows miss
 * step k's gradients: one step stale, never more.
 */
static int pipelined_step(struct worker *w, uint64_t step, struct step_buf *cur,
			  struct step_buf *next)
{
	bool more = step + 1 < w->j->o->max_step;
	int ret;

	if (more && (ret = fetch_start(w, next, step + 1)))
		return ret;
	if ((ret = kernel(w, cur, step))) {
		if (more)
			rdps_client_pull_finish(w->c, w->pulls); /* leave none in flight */
		return ret;
	}
	if (more && (ret = fetch_finish(w, next)))
		return ret;
	return push(w, cur);
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
	int ret = rdps_tj_evaluate(w, &j->valid_eval, "valid", false, &m, NULL);

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

static int train_loop(struct worker *w)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	uint32_t every = o->log_interval ? o->log_interval : 1000;
	bool pipe = !o->no_pipeline && w->norder;
	struct step_buf *cur = &w->buf[0], *next = &w->buf[1];
	uint64_t first = 0;
	int ret;

	if (o->resume && (ret = load_progress(w, &first)))
		return ret;
	if (o->resume && w->t == 0)
		rdps_info("trainer %u: resuming at step %llu of %llu", o->rank,
			  (unsigned long long)first, (unsigned long long)o->max_step);
	/* The pipeline's first step is pulled before the loop; each step then
	 * pulls the next one's rows (pipelined_step). Between two steps no
	 * pull is in flight: flushes, evaluations and barriers may come. */
	if (pipe && first < o->max_step &&
	    ((ret = fetch_start(w, cur, first)) || (ret = fetch_finish(w, cur))))
		return ret;
	/* A thread without triples (more threads than triples) still keeps
	 * the step count: the syncs and validations below need every thread. */
	for (uint64_t step = first; step < o->max_step && !__atomic_load_n(&j->ret, __ATOMIC_RELAXED);
	     step++) {
		if (rdps_tj_stop_requested(o)) {
			pthread_mutex_lock(&j->lock);
			if (!j->interrupted)
				j->stop_step = __atomic_load_n(&j->w[0].steps, __ATOMIC_RELAXED);
			j->interrupted = true;
			pthread_mutex_unlock(&j->lock);
			rdps_tj_fail(j, -EINTR, "interrupted during training");
			return -EINTR;
		}
		if (pipe) {
			struct step_buf *t = cur;

			if ((ret = pipelined_step(w, step, cur, next)))
				return ret;
			cur = next;
			next = t;
		} else if (w->norder && (ret = serial_step(w, step))) {
			return ret;
		}
		__atomic_store_n(&w->steps, step + 1, __ATOMIC_RELAXED);
		if (w->t == 0 && o->log_interval && (step + 1) % o->log_interval == 0)
			log_progress(j, first, step + 1);
		/* The sampler's state for step + 1: with the pipeline, as it
		 * was before step + 1 (in cur) was sampled. */
		if (o->checkpoint_dir && ((step + 1) % every == 0 || step + 1 == o->max_step) &&
		    (ret = save_progress(w, step + 1,
					 pipe && step + 1 < o->max_step ? cur->rng : w->rng))) {
			rdps_tj_fail(j, ret, "cannot write progress into %s: %s", o->checkpoint_dir,
				 rdps_strerror(ret));
			return ret;
		}
		w->done_steps++;
		/* DGL-KE's --force_sync_interval: the trainer's threads (its
		 * processes there) wait for each other, their pushes applied. */
		if (o->force_sync_interval && (step + 1) % o->force_sync_interval == 0) {
			ret = rdps_client_flush(w->c);
			if (ret) {
				rdps_tj_fail(j, ret, "push: %s", rdps_client_errmsg(w->c));
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
	JO_MODEL, JO_DIM, JO_DOUBLE_ENT, JO_DOUBLE_REL, JO_GAMMA, JO_ADV, JO_ADV_TEMP, JO_REG_COEF, JO_REG_NORM, JO_BATCH,
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
	[JO_DOUBLE_ENT] = { "--double_ent", OPT_BOOL, -1 },
	[JO_DOUBLE_REL] = { "--double_rel", OPT_BOOL, -1 },
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
	v[JO_DOUBLE_ENT] = m->double_ent;
	v[JO_DOUBLE_REL] = m->double_rel;
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
			rdps_tj_fail(j, ret, "the start barrier timed out after %g s (--timeout): "
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
		rdps_tj_fail(j, ret, "the start barrier timed out after %g s (--timeout): not all "
			 "of the job's %u trainers arrived; this one (trainer %u) did, the "
			 "missing are among %s (not started, still loading their data, or "
			 "unable to reach server 0: see their logs)", secs, o->num_trainers,
			 o->rank, others);
	} else if (left && sscanf(left, "client %u left", &client) == 1 &&
		   client < o->num_trainers * o->num_thread) {
		/* The server fails a barrier when one of its clients leaves. */
		rdps_tj_fail(j, ret, "the start barrier failed: trainer %u arrived and left again "
			 "(it gave up waiting or failed: see its log), so the job's %u trainers "
			 "never all met (%s)", client / o->num_thread, o->num_trainers, why);
	} else {
		rdps_tj_fail(j, ret, "the start barrier failed while waiting for the job's %u "
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
		rdps_tj_fail(j, ret, "comparing the job's options at the start barrier: %s",
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
	rdps_tj_fail(j, -EINVAL, "options that must be the same on every trainer of the job differ, so "
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
		rdps_tj_fail(j, -ECANCELED, "%s could not load the data (see %s log); no trainer starts "
			 "training", ranks, a[A_FAILED] > 1 ? "their" : "its");
		return -ECANCELED;
	}
	if (w->t == 0 && !o->standalone)
		rdps_info("trainer %u: all %u trainers arrived", o->rank, o->num_trainers);
	rdps_client_set_barrier_timeout(w->c, later_timeout_ms(o));
	return compare_options(w, a);
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

/* A barrier or (v non-NULL) an allreduce of the job after the start, once
 * this trainer's threads are all there; what names it in errors. */
int rdps_tj_collective(struct worker *w, const char *what, double *v, size_t n)
{
	struct job *j = w->j;
	const struct rdps_train_opts *o = j->o;
	int ret = local_sync(j);

	if (ret)
		return ret;
	ret = v ? allreduce_long(w->c, v, n) : rdps_client_barrier(w->c);
	if (ret == -ETIMEDOUT)
		rdps_tj_fail(j, ret, "%s: the job's %u trainers did not all arrive within %g s (the "
			 "longer of --timeout and %d s; one is slower or failed: see their logs): %s",
			 what, o->num_trainers, later_timeout_ms(o) / 1000.0,
			 PEER_TIMEOUT_DEFAULT_MS / 1000, rdps_client_errmsg(w->c));
	else if (ret)
		rdps_tj_fail(j, ret, "%s: %s", what, rdps_client_errmsg(w->c));
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
		step_split(j, &w->run, &j->res->split);
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

		progress_path(o, t, path, sizeof(path));
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
		ret = worker_alloc(w);
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
	rdps_tj_remove_import(&j);
	rdps_model_destroy(j.model);
	pthread_cond_destroy(&j.cond);
	pthread_mutex_destroy(&j.lock);
	if (ret)
		rdps_train_result_free(res);
	return ret;
}
