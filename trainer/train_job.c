// SPDX-License-Identifier: MIT
/* The training job's shared state between its threads and trainers: the
 * first error, a trainer's threads meeting (local sync) and the job's
 * collectives, the start barrier (every trainer arrived, none failed to
 * load its data, the options that make one job agree), time formats. */
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
	/* Threads in rdps_tj_local_sync() stop waiting for one that failed. */
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* Waits until every thread of this trainer got here, so that the server's
 * collectives (bounded by --timeout) measure how far apart the trainers
 * are, not this trainer's own work before them. Returns 0, or the job's
 * error once a thread failed instead of coming (each either comes or fails:
 * its own waits are bounded). */
int rdps_tj_local_sync(struct job *j)
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

int rdps_tj_peer_timeout_ms(const struct rdps_train_opts *o)
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

/* ---------------------------------------------------------------------- */
/* The start barrier: every trainer arrived, none failed to load its data,
 * and the options that make one job agree.                                */

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
	double secs = rdps_tj_peer_timeout_ms(o) / 1000.0;
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
int rdps_tj_start(struct worker *w)
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
	ret = rdps_tj_local_sync(j);
	if (ret)
		return ret;
	if (w->t == 0 && !o->standalone)
		rdps_info("trainer %u: waiting for the job's %u trainers%s at the start barrier "
			  "(up to %g s)", o->rank, o->num_trainers,
			  o->num_thread > 1 ? " (all their threads)" : "", rdps_tj_peer_timeout_ms(o) / 1000.0);
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
	int ret = rdps_tj_local_sync(j);

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
