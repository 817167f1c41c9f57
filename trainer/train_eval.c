// SPDX-License-Identifier: MIT
/* The training job's evaluation: ranking a share of a split, against every
 * entity or drawn ones, with progress lines, and the reduction over the job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "rdps/client.h"
#include "rdps/trainer.h"
#include "train_internal.h"

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
	       p->unit, rdps_tj_fmt_eta(eta, sizeof(eta), (rdps_now_ns() - p->t0) / 1e9, (double)done,
				(double)p->total));
	fflush(stdout);
}

/* Floyd's draw of k distinct ids below n into out (k <= n), in the order
 * drawn; seen is a bitmap of n bits, all clear, left clear. */
static void draw_distinct(uint64_t *rng, uint64_t n, uint64_t k, uint8_t *seen, uint32_t *out)
{
	uint64_t m = 0;

	for (uint64_t i = n - k; i < n; i++) {
		uint32_t t = rdps_tj_uniform(rng, i + 1);

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

		if (rdps_tj_stop_requested(o))
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
		qsort(ids, k, sizeof(*ids), rdps_tj_cmp_u32);
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
int rdps_tj_evaluate(struct worker *w, const struct rdps_triples *split, const char *name,
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

				if (rdps_tj_stop_requested(o)) {
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
				rdps_tj_fail(j, ret, "evaluation on %s: a relation id is not below %u",
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
		rdps_tj_fail(j, ret, "interrupted during the evaluation on %s", name);
	} else if (ret) {
		rdps_tj_fail(j, ret, "evaluation on %s: %s", name,
			 ret == -ENOMEM ? "out of memory" : rdps_client_errmsg(w->c));
	}
	sums_to_doubles(&sums, v);
	/* How many clients reduce per relation next: all of them or none, or
	 * the collectives would not pair up. */
	v[SUMS_DOUBLES] = per_rel;
	if (!ret) {
		/* the other threads waited here (locally) while thread 0 ranked */
		snprintf(what, sizeof(what), "reducing the %s metrics", name);
		ret = rdps_tj_collective(w, what, v, SUMS_DOUBLES + 1);
	}
	if (!ret && v[SUMS_DOUBLES] != 0 &&
	    v[SUMS_DOUBLES] != (double)o->num_trainers * o->num_thread) {
		ret = -EINVAL;
		rdps_tj_fail(j, ret, "--eval_per_relation was given to some trainers of the job and "
			 "not to others (give it to all or none)");
	}
	if (!ret) {
		sums_from_doubles(v, &sums);
		rdps_eval_metrics_from_sums(&sums, m);
	}
	if (!ret && per_rel) {
		snprintf(what, sizeof(what), "reducing the %s metrics per relation", name);
		ret = rdps_tj_collective(w, what, rv, nrv);
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
