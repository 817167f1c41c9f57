// SPDX-License-Identifier: MIT
/* A training thread's steps: its client and buffers, sampling a batch, the
 * unique ids it pulls, pull / compute / push (serial, or pipelined one step
 * ahead), progress lines and files, validation during training, the loop. */
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

int rdps_tj_worker_alloc(struct worker *w)
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

void rdps_tj_worker_free(struct worker *w)
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

int rdps_tj_connect_worker(struct worker *w)
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
		.barrier_timeout_ms = rdps_tj_peer_timeout_ms(o),
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

/* Means per step of t (struct rdps_train_step_split says what each is). */
void rdps_tj_step_split(const struct job *j, const struct step_times *t,
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
	rdps_tj_step_split(j, &w0->iv, &sp);
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
void rdps_tj_progress_path(const struct rdps_train_opts *o, uint32_t t, char *buf, size_t len)
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
	rdps_tj_progress_path(w->j->o, w->t, path, sizeof(path));
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

	rdps_tj_progress_path(w->j->o, w->t, path, sizeof(path));
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

int rdps_tj_train_loop(struct worker *w)
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
			ret = rdps_tj_local_sync(j);
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
