/* SPDX-License-Identifier: MIT */
/*
 * Filtered ranking: a tiny graph whose ranks are computed by hand (filter,
 * ties, raw ranking, per relation), chunked candidates == one chunk,
 * reduction of partial states == the whole, threads == one thread, the true
 * entity scored exactly like a candidate, a brute-force check on random data
 * (relations add up to the whole), the triple set, and DGL-KE style output.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/trainer.h"

static struct rdps_model *make_model(const char *name, uint32_t dim, float gamma)
{
	struct rdps_model_params mp;
	struct rdps_model *m = NULL;

	rdps_model_params_init(&mp);
	mp.name = name;
	mp.hidden_dim = dim;
	mp.gamma = gamma;
	cr_assert_eq(rdps_model_create(&m, &mp), 0);
	return m;
}

/* Gathers the rows of the test triples and sets them. */
static void set_rows(struct rdps_eval *ev, const struct rdps_model *m,
		     const struct rdps_triple *test, size_t n, const float *ent,
		     const float *rel)
{
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	float *h = malloc((n + 1) * ed * 4), *t = malloc((n + 1) * ed * 4);
	float *r = malloc((n + 1) * rd * 4);

	for (size_t i = 0; i < n; i++) {
		memcpy(h + i * ed, ent + (size_t)test[i].h * ed, ed * 4);
		memcpy(t + i * ed, ent + (size_t)test[i].t * ed, ed * 4);
		memcpy(r + i * rd, rel + (size_t)test[i].r * rd, rd * 4);
	}
	cr_assert_eq(rdps_eval_set_rows(ev, h, r, t), 0);
	free(h), free(r), free(t);
}

/*
 * DistMult, hidden_dim 1, so score(h, r, t) = h * r * t.
 * Entities: v = [1, 2, 3, 4, 5, 3] (entity 5 ties with entity 2).
 * Relations: r0 = 1, r1 = -1. Tests T1 = (0, r0, 2), T2 = (3, r1, 1).
 * Train (filter) triples: (0, r0, 4), (1, r0, 2).
 *
 * Query 0, T1 tail (0, r0, ?): scores v = [1,2,3,4,5,3], true 3 (entity 2).
 *   filtered: skip 2 (true), 4 ((0,r0,4) is known): higher {3}, equal {5}
 *   -> gt 1, eq 1. raw: higher {3, 4}, equal {5} -> gt 2, eq 1.
 * Query 1, T2 tail (3, r1, ?): scores -4v = [-4,-8,-12,-16,-20,-12], true
 *   -8 (entity 1): higher {0} -> gt 1, eq 0 (filter changes nothing).
 * Query 2, T1 head (?, r0, 2): scores 3v = [3,6,9,12,15,9], true 3
 *   (entity 0). filtered: skip 0, 1 ((1,r0,2) is known): higher {2,3,4,5}
 *   -> gt 4. raw: higher {1,2,3,4,5} -> gt 5.
 * Query 3, T2 head (?, r1, 1): scores -2v = [-2,-4,-6,-8,-10,-6], true -8
 *   (entity 3): higher {0,1,2,5} -> gt 4.
 *
 * Filtered, pessimistic (DGL-KE, rank = 1 + gt + eq): ranks 3, 2, 5, 5:
 *   MRR = (1/3 + 1/2 + 1/5 + 1/5) / 4 = 0.308333..., MR = 15/4 = 3.75,
 *   HITS@1 = 0, HITS@3 = 2/4, HITS@10 = 1.
 * Optimistic (1 + gt): ranks 2, 2, 5, 5: MRR 0.35, MR 3.5.
 * Mean (1 + gt + eq/2): ranks 2.5, 2, 5, 5: MR 3.625.
 * Raw pessimistic: ranks 4, 2, 6, 5: MR 4.25.
 */
static const float tiny_ent[] = { 1, 2, 3, 4, 5, 3 };
static const float tiny_rel[] = { 1, -1 };
static const struct rdps_triple tiny_test[] = { { 0, 0, 2 }, { 3, 1, 1 } };
static const struct rdps_triple tiny_train[] = { { 0, 0, 4 }, { 1, 0, 2 } };

static struct rdps_eval *tiny_eval(struct rdps_model *m, bool filtered,
				   enum rdps_eval_ties ties, unsigned threads)
{
	struct rdps_triple_set *f = NULL;
	struct rdps_eval *ev = NULL;

	if (filtered) {
		cr_assert_eq(rdps_triple_set_create(&f, 4), 0);
		cr_assert_eq(rdps_triple_set_add(f, tiny_train, 2), 2);
		cr_assert_eq(rdps_triple_set_add(f, tiny_test, 2), 2);
	}
	struct rdps_eval_params p = { .model = m, .test = tiny_test, .n_test = 2,
				      .filter = f, .n_entities = 6,
				      .num_threads = threads, .ties = ties };
	cr_assert_eq(rdps_eval_create(&ev, &p), 0);
	rdps_triple_set_destroy(f); /* read at create only */
	set_rows(ev, m, tiny_test, 2, tiny_ent, tiny_rel);
	return ev;
}

Test(eval, tiny_graph_by_hand)
{
	struct rdps_model *m = make_model("DistMult", 1, 1.0f);
	struct rdps_eval *ev = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	struct rdps_eval_metrics x;
	uint32_t gt[4], eq[4];

	cr_assert_eq(rdps_eval_num_queries(ev), 4);
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	rdps_eval_get_counts(ev, gt, eq);
	cr_assert(gt[0] == 1 && eq[0] == 1, "q0 gt %u eq %u", gt[0], eq[0]);
	cr_assert(gt[1] == 1 && eq[1] == 0, "q1 gt %u eq %u", gt[1], eq[1]);
	cr_assert(gt[2] == 4 && eq[2] == 0, "q2 gt %u eq %u", gt[2], eq[2]);
	cr_assert(gt[3] == 4 && eq[3] == 0, "q3 gt %u eq %u", gt[3], eq[3]);
	rdps_eval_finish(ev, &x);
	cr_assert_eq(x.count, 4);
	cr_assert_float_eq(x.mrr, (1.0 / 3 + 0.5 + 0.2 + 0.2) / 4, 1e-12);
	cr_assert_float_eq(x.mr, 3.75, 1e-12);
	cr_assert_float_eq(x.hits1, 0.0, 1e-12);
	cr_assert_float_eq(x.hits3, 0.5, 1e-12);
	cr_assert_float_eq(x.hits10, 1.0, 1e-12);
	rdps_eval_destroy(ev);

	ev = tiny_eval(m, true, RDPS_EVAL_TIES_OPTIMISTIC, 1);
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	rdps_eval_finish(ev, &x);
	cr_assert_float_eq(x.mrr, 0.35, 1e-12);
	cr_assert_float_eq(x.mr, 3.5, 1e-12);
	cr_assert_float_eq(x.hits1, 0.0, 1e-12);
	cr_assert_float_eq(x.hits3, 0.5, 1e-12);
	rdps_eval_destroy(ev);

	ev = tiny_eval(m, true, RDPS_EVAL_TIES_MEAN, 1);
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	rdps_eval_finish(ev, &x);
	cr_assert_float_eq(x.mr, 3.625, 1e-12);
	cr_assert_float_eq(x.mrr, (1 / 2.5 + 0.5 + 0.2 + 0.2) / 4, 1e-12);
	rdps_eval_destroy(ev);

	ev = tiny_eval(m, false, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	rdps_eval_finish(ev, &x);
	cr_assert_float_eq(x.mr, 4.25, 1e-12);
	cr_assert_float_eq(x.mrr, (0.25 + 0.5 + 1.0 / 6 + 0.2) / 4, 1e-12);
	rdps_eval_destroy(ev);
	rdps_model_destroy(m);
}

/*
 * Sampled evaluation on the tiny graph (filtered, pessimistic): each query
 * ranked against its own candidate ids only.
 *   q0 (T1 tail, true score 3) against {1, 4, 5}: 2 < 3, 4 filtered, 5 ties
 *      -> gt 0, eq 1.
 *   q1 (T2 tail, true -8) against {0, 3}: -4 higher, -16 lower -> gt 1.
 *   q2 (T1 head, true 3) against {1, 2}: 1 filtered, 9 higher -> gt 1.
 *   q3 (T2 head, true -8, entity 3) against {3, 5}: 3 is the true entity,
 *      -6 higher -> gt 1.
 * All ids at once give the counts of add_candidates.
 */
static void add_sampled(struct rdps_eval *ev, size_t q, const uint32_t *ids, uint32_t n)
{
	float rows[6];

	for (uint32_t i = 0; i < n; i++)
		rows[i] = tiny_ent[ids[i]];
	cr_assert_eq(rdps_eval_add_sampled(ev, q, 1, ids, rows, n), 0, "query %zu", q);
}

Test(eval, sampled_candidates_by_hand)
{
	static const uint32_t c0[] = { 1, 4, 5 }, c1[] = { 0, 3 }, c2[] = { 1, 2 }, c3[] = { 3, 5 };
	static const uint32_t all[] = { 0, 1, 2, 3, 4, 5 }, unsorted[] = { 3, 1 };
	struct rdps_model *m = make_model("DistMult", 1, 1.0f);
	struct rdps_eval *ev = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	uint32_t gt[4], eq[4];
	struct rdps_eval_metrics x;

	add_sampled(ev, 0, c0, 3);
	add_sampled(ev, 1, c1, 2);
	add_sampled(ev, 2, c2, 2);
	add_sampled(ev, 3, c3, 2);
	rdps_eval_get_counts(ev, gt, eq);
	cr_assert(gt[0] == 0 && eq[0] == 1, "q0 gt %u eq %u", gt[0], eq[0]);
	cr_assert(gt[1] == 1 && eq[1] == 0, "q1 gt %u eq %u", gt[1], eq[1]);
	cr_assert(gt[2] == 1 && eq[2] == 0, "q2 gt %u eq %u", gt[2], eq[2]);
	cr_assert(gt[3] == 1 && eq[3] == 0, "q3 gt %u eq %u", gt[3], eq[3]);
	rdps_eval_finish(ev, &x);
	cr_assert_float_eq(x.mr, 2.0, 1e-12);
	cr_assert_eq(rdps_eval_add_sampled(ev, 0, 1, unsorted, tiny_ent, 2), -EINVAL);
	cr_assert_eq(rdps_eval_add_sampled(ev, 3, 2, all, tiny_ent, 6), -EINVAL);
	rdps_eval_destroy(ev);

	ev = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	cr_assert_eq(rdps_eval_add_sampled(ev, 0, 4, all, tiny_ent, 6), 0);
	rdps_eval_finish(ev, &x);
	cr_assert_float_eq(x.mr, 3.75, 1e-12, "every id: the full ranking");
	rdps_eval_destroy(ev);
	rdps_model_destroy(m);
}

Test(eval, tiny_graph_in_chunks_and_reduced)
{
	struct rdps_model *m = make_model("DistMult", 1, 1.0f);
	struct rdps_eval *a = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 2);
	struct rdps_eval *b = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	uint32_t gt[4], eq[4];
	struct rdps_eval_metrics x;

	/* a: ids 3..5 then 0..1 (out of order); b: id 2 only */
	cr_assert_eq(rdps_eval_add_candidates(a, 3, tiny_ent + 3, 3), 0);
	cr_assert_eq(rdps_eval_add_candidates(a, 0, tiny_ent, 2), 0);
	cr_assert_eq(rdps_eval_add_candidates(b, 2, tiny_ent + 2, 1), 0);
	rdps_eval_get_counts(b, gt, eq);
	cr_assert_eq(rdps_eval_add_counts(a, gt, eq), 0);
	rdps_eval_finish(a, &x);
	cr_assert_float_eq(x.mr, 3.75, 1e-12);
	cr_assert_float_eq(x.hits3, 0.5, 1e-12);
	/* out of range */
	cr_assert_eq(rdps_eval_add_candidates(a, 5, tiny_ent, 2), -EINVAL);
	rdps_eval_destroy(a);
	rdps_eval_destroy(b);
	rdps_eval_destroy(NULL);
	rdps_model_destroy(m);
}

/*
 * Per relation on the tiny graph (filtered, pessimistic): relation 0 has T1,
 * tail rank 3 and head rank 5; relation 1 has T2, tail rank 2 and head rank
 * 5. Optimistic: T1's tail rank becomes 2 (entity 5's tie counts for it).
 */
static void check_sums(const struct rdps_eval_sums *s, double rr, double rank,
		       uint64_t h1, uint64_t h3, uint64_t h10, uint64_t count,
		       const char *what)
{
	cr_assert_float_eq(s->sum_rr, rr, 1e-12, "%s: sum_rr %.17g, want %.17g", what,
			   s->sum_rr, rr);
	cr_assert_float_eq(s->sum_rank, rank, 1e-12, "%s: sum_rank %g, want %g", what,
			   s->sum_rank, rank);
	cr_assert(s->hits1 == h1 && s->hits3 == h3 && s->hits10 == h10 && s->count == count,
		  "%s: hits %llu/%llu/%llu count %llu, want %llu/%llu/%llu %llu", what,
		  (unsigned long long)s->hits1, (unsigned long long)s->hits3,
		  (unsigned long long)s->hits10, (unsigned long long)s->count,
		  (unsigned long long)h1, (unsigned long long)h3, (unsigned long long)h10,
		  (unsigned long long)count);
}

Test(eval, tiny_graph_per_relation)
{
	struct rdps_model *m = make_model("DistMult", 1, 1.0f);
	struct rdps_eval *ev = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	struct rdps_eval_sums s[3], tail[3], head[3], all, sum = { 0 };
	struct rdps_eval_metrics x;

	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	/* relation 2 has no test triple: zero sums */
	cr_assert_eq(rdps_eval_get_relation_sums(ev, 0, 3, s), 0);
	check_sums(&s[0], 1.0 / 3 + 0.2, 8, 0, 1, 2, 2, "r0");
	check_sums(&s[1], 0.5 + 0.2, 7, 0, 1, 2, 2, "r1");
	check_sums(&s[2], 0, 0, 0, 0, 0, 0, "r2");
	rdps_eval_metrics_from_sums(&s[0], &x);
	cr_assert_float_eq(x.mrr, (1.0 / 3 + 0.2) / 2, 1e-12);
	cr_assert_float_eq(x.mr, 4.0, 1e-12);
	cr_assert_float_eq(x.hits3, 0.5, 1e-12);
	rdps_eval_metrics_from_sums(&s[1], &x);
	cr_assert_float_eq(x.mrr, 0.35, 1e-12);
	cr_assert_float_eq(x.mr, 3.5, 1e-12);
	/* one side at a time */
	cr_assert_eq(rdps_eval_get_relation_sums(ev, RDPS_EVAL_TAIL, 3, tail), 0);
	cr_assert_eq(rdps_eval_get_relation_sums(ev, RDPS_EVAL_HEAD, 3, head), 0);
	check_sums(&tail[0], 1.0 / 3, 3, 0, 1, 1, 1, "r0 tail");
	check_sums(&head[0], 0.2, 5, 0, 0, 1, 1, "r0 head");
	check_sums(&tail[1], 0.5, 2, 0, 1, 1, 1, "r1 tail");
	check_sums(&head[1], 0.2, 5, 0, 0, 1, 1, "r1 head");
	/* the relations (and sides) add up to the overall sums */
	rdps_eval_get_sums(ev, &all);
	for (int r = 0; r < 3; r++) {
		struct rdps_eval_sums both = tail[r];

		rdps_eval_sums_add(&both, &head[r]);
		check_sums(&both, s[r].sum_rr, s[r].sum_rank, s[r].hits1, s[r].hits3,
			   s[r].hits10, s[r].count, "tail + head");
		rdps_eval_sums_add(&sum, &s[r]);
	}
	check_sums(&sum, all.sum_rr, all.sum_rank, all.hits1, all.hits3, all.hits10, all.count,
		   "sum of relations");
	cr_assert_eq(sum.count, 4);
	/* bad arguments leave s untouched */
	s[0].count = 77;
	cr_assert_eq(rdps_eval_get_relation_sums(ev, 0, 1, s), -EINVAL, "relation 1 >= 1");
	cr_assert_eq(rdps_eval_get_relation_sums(ev, 4, 3, s), -EINVAL);
	cr_assert_eq(rdps_eval_get_relation_sums(ev, 0, 3, NULL), -EINVAL);
	cr_assert_eq(rdps_eval_get_relation_sums(NULL, 0, 3, s), -EINVAL);
	cr_assert_eq(s[0].count, 77);
	rdps_eval_destroy(ev);

	/* the tie policy applies as in get_sums */
	ev = tiny_eval(m, true, RDPS_EVAL_TIES_OPTIMISTIC, 1);
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, tiny_ent, 6), 0);
	cr_assert_eq(rdps_eval_get_relation_sums(ev, RDPS_EVAL_TAIL, 2, tail), 0);
	check_sums(&tail[0], 0.5, 2, 0, 1, 1, 1, "optimistic r0 tail");
	check_sums(&tail[1], 0.5, 2, 0, 1, 1, 1, "optimistic r1 tail");
	rdps_eval_destroy(ev);
	rdps_model_destroy(m);
}

/* Counts reduced from another process (add_counts) give the same
 * per-relation sums; an evaluator of one side has none on the other. */
Test(eval, tiny_graph_per_relation_after_add_counts)
{
	struct rdps_model *m = make_model("DistMult", 1, 1.0f);
	struct rdps_eval *a = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	struct rdps_eval *b = tiny_eval(m, true, RDPS_EVAL_TIES_PESSIMISTIC, 1);
	struct rdps_eval_sums s[2];
	struct rdps_triple_set *f;
	struct rdps_eval *tail_only;
	uint32_t gt[4], eq[4];

	/* a ranks ids 0..2, b ids 3..5; a gets b's counts */
	cr_assert_eq(rdps_eval_add_candidates(a, 0, tiny_ent, 3), 0);
	cr_assert_eq(rdps_eval_add_candidates(b, 3, tiny_ent + 3, 3), 0);
	cr_assert_eq(rdps_eval_get_relation_sums(a, 0, 2, s), 0);
	cr_assert_eq(s[0].hits1, 1, "before the reduction T1's tail query ranks first");
	rdps_eval_get_counts(b, gt, eq);
	cr_assert_eq(rdps_eval_add_counts(a, gt, eq), 0);
	cr_assert_eq(rdps_eval_get_relation_sums(a, 0, 2, s), 0);
	check_sums(&s[0], 1.0 / 3 + 0.2, 8, 0, 1, 2, 2, "reduced r0");
	check_sums(&s[1], 0.5 + 0.2, 7, 0, 1, 2, 2, "reduced r1");
	rdps_eval_destroy(a);
	rdps_eval_destroy(b);

	cr_assert_eq(rdps_triple_set_create(&f, 4), 0);
	cr_assert_eq(rdps_triple_set_add(f, tiny_train, 2), 2);
	cr_assert_eq(rdps_triple_set_add(f, tiny_test, 2), 2);
	struct rdps_eval_params p = { .model = m, .test = tiny_test, .n_test = 2, .filter = f,
				      .n_entities = 6, .sides = RDPS_EVAL_TAIL };
	cr_assert_eq(rdps_eval_create(&tail_only, &p), 0);
	rdps_triple_set_destroy(f);
	set_rows(tail_only, m, tiny_test, 2, tiny_ent, tiny_rel);
	cr_assert_eq(rdps_eval_add_candidates(tail_only, 0, tiny_ent, 6), 0);
	cr_assert_eq(rdps_eval_get_relation_sums(tail_only, 0, 2, s), 0);
	check_sums(&s[0], 1.0 / 3, 3, 0, 1, 1, 1, "tail-only r0");
	check_sums(&s[1], 0.5, 2, 0, 1, 1, 1, "tail-only r1");
	cr_assert_eq(rdps_eval_get_relation_sums(tail_only, RDPS_EVAL_HEAD, 2, s), 0);
	cr_assert(s[0].count == 0 && s[1].count == 0 && s[0].sum_rr == 0);
	rdps_eval_destroy(tail_only);
	rdps_model_destroy(m);
}

Test(eval, dglke_output)
{
	struct rdps_eval_metrics x = { .mrr = 0.30833333333333335, .mr = 3.75,
				       .hits1 = 0.0, .hits3 = 0.5, .hits10 = 1.0,
				       .count = 4 };
	char buf[512];
	int n = rdps_eval_format(buf, sizeof(buf), "Test", &x);

	cr_assert_eq(n, (int)strlen(buf));
	cr_assert_str_eq(buf, "Test average MRR : 0.30833333333333335\n"
			      "Test average MR : 3.75\n"
			      "Test average HITS@1 : 0.0\n"
			      "Test average HITS@3 : 0.5\n"
			      "Test average HITS@10 : 1.0\n");
	x.mr = 12.0;
	x.mrr = 1e-05;
	rdps_eval_format(buf, sizeof(buf), "Valid", &x);
	cr_assert_not_null(strstr(buf, "Valid average MRR : 1e-05\n"));
	cr_assert_not_null(strstr(buf, "Valid average MR : 12.0\n"));
}

Test(eval, triple_set)
{
	struct rdps_triple_set *s;
	struct rdps_triple t[3000];

	cr_assert_eq(rdps_triple_set_create(&s, 0), 0);
	for (uint32_t i = 0; i < 3000; i++)
		t[i] = (struct rdps_triple){ i % 1000, i % 7, i / 3 };
	cr_assert_eq(rdps_triple_set_add(s, t, 3000), 3000);
	cr_assert_eq(rdps_triple_set_add(s, t, 1500), 0);
	cr_assert_eq(rdps_triple_set_count(s), 3000);
	for (uint32_t i = 0; i < 3000; i++) {
		cr_assert(rdps_triple_set_contains(s, i % 1000, i % 7, i / 3));
		cr_assert(!rdps_triple_set_contains(s, i % 1000, 7, i / 3));
	}
	cr_assert_eq(rdps_triple_set_items(s)[42].t, 14);
	rdps_triple_set_destroy(s);
	rdps_triple_set_destroy(NULL);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) / 16777216.0) * 2 - 1;
}

/*
 * Random graph, every model: (1) entity E + k duplicates entity k, so the
 * true entity's duplicate must tie exactly (same arithmetic for the true
 * entity and candidates); (2) chunks + threads == one chunk, one thread;
 * (3) split tests, summed sums == all tests; (4) ranks agree with a
 * double-precision brute force except where a candidate is within 1e-3 of
 * the true score.
 */
static void random_check(const char *name, uint32_t dim)
{
	enum { E = 97, NREL = 5, NT = 40, NTRAIN = 300 };
	struct rdps_model *m = make_model(name, dim, 6.0f);
	uint32_t ed = rdps_model_entity_dim(m), rd = rdps_model_relation_dim(m);
	float *ent = malloc((size_t)2 * E * ed * 4), *rel = malloc((size_t)NREL * rd * 4);
	struct rdps_triple test[NT], train[NTRAIN];
	struct rdps_triple_set *f;
	struct rdps_eval *one, *many, *half[2];
	uint32_t g1[2 * NT], e1[2 * NT], g2[2 * NT], e2[2 * NT];

	for (size_t k = 0; k < (size_t)E * ed; k++)
		ent[k] = frand() * 0.5f;
	memcpy(ent + (size_t)E * ed, ent, (size_t)E * ed * 4);
	for (size_t k = 0; k < (size_t)NREL * rd; k++)
		rel[k] = frand() * 0.5f;
	for (int i = 0; i < NT + NTRAIN; i++) {
		frand();
		struct rdps_triple x = { (uint32_t)(rng % E), (uint32_t)((rng >> 20) % NREL),
					 (uint32_t)((rng >> 40) % E) };
		if (i < NT)
			test[i] = x;
		else
			train[i - NT] = x;
	}
	cr_assert_eq(rdps_triple_set_create(&f, NT + NTRAIN), 0);
	cr_assert(rdps_triple_set_add(f, train, NTRAIN) >= 0);
	cr_assert(rdps_triple_set_add(f, test, NT) >= 0);

	struct rdps_eval_params p = { .model = m, .test = test, .n_test = NT, .filter = f,
				      .n_entities = 2 * E, .num_threads = 1 };
	cr_assert_eq(rdps_eval_create(&one, &p), 0);
	p.num_threads = 3;
	cr_assert_eq(rdps_eval_create(&many, &p), 0);
	p.n_test = NT / 2;
	cr_assert_eq(rdps_eval_create(&half[0], &p), 0);
	p.test = test + NT / 2;
	cr_assert_eq(rdps_eval_create(&half[1], &p), 0);
	set_rows(one, m, test, NT, ent, rel);
	set_rows(many, m, test, NT, ent, rel);
	set_rows(half[0], m, test, NT / 2, ent, rel);
	set_rows(half[1], m, test + NT / 2, NT / 2, ent, rel);

	cr_assert_eq(rdps_eval_add_candidates(one, 0, ent, 2 * E), 0);
	for (uint32_t c = 0; c < 2 * E; c += 13) {
		uint32_t n = 2 * E - c < 13 ? 2 * E - c : 13;
		cr_assert_eq(rdps_eval_add_candidates(many, c, ent + (size_t)c * ed, n), 0);
	}
	for (int hh = 0; hh < 2; hh++)
		cr_assert_eq(rdps_eval_add_candidates(half[hh], 0, ent, 2 * E), 0);
	rdps_eval_get_counts(one, g1, e1);
	rdps_eval_get_counts(many, g2, e2);
	cr_assert(memcmp(g1, g2, sizeof(g1)) == 0 && memcmp(e1, e2, sizeof(e1)) == 0,
		  "%s: chunked/threaded counts differ", name);

	struct rdps_eval_sums s0, s1, sall;
	struct rdps_eval_metrics mx, my;
	rdps_eval_get_sums(half[0], &s0);
	rdps_eval_get_sums(half[1], &s1);
	rdps_eval_sums_add(&s0, &s1);
	rdps_eval_get_sums(one, &sall);
	rdps_eval_metrics_from_sums(&s0, &mx);
	rdps_eval_finish(one, &my);
	cr_assert_eq(s0.count, sall.count);
	cr_assert_eq(s0.hits10, sall.hits10);
	cr_assert_float_eq(mx.mrr, my.mrr, 1e-12);
	cr_assert_float_eq(mx.mr, my.mr, 1e-12);

	/* (3') per relation: the relations add up to the whole, and the split
	 * tests' per-relation sums add up to those of all tests */
	struct rdps_eval_sums rs[NREL], rel_half[2][NREL], acc = { 0 };
	cr_assert_eq(rdps_eval_get_relation_sums(one, 0, NREL, rs), 0);
	for (int hh = 0; hh < 2; hh++)
		cr_assert_eq(rdps_eval_get_relation_sums(half[hh], RDPS_EVAL_BOTH, NREL,
							 rel_half[hh]), 0);
	for (int k = 0; k < NREL; k++) {
		rdps_eval_sums_add(&acc, &rs[k]);
		rdps_eval_sums_add(&rel_half[0][k], &rel_half[1][k]);
		cr_assert(rel_half[0][k].count == rs[k].count &&
			  rel_half[0][k].hits1 == rs[k].hits1 &&
			  rel_half[0][k].hits3 == rs[k].hits3 &&
			  rel_half[0][k].hits10 == rs[k].hits10, "%s r%d: halves differ", name, k);
		cr_assert_float_eq(rel_half[0][k].sum_rr, rs[k].sum_rr, 1e-9);
		cr_assert_float_eq(rel_half[0][k].sum_rank, rs[k].sum_rank, 1e-9);
	}
	cr_assert(acc.count == sall.count && acc.hits1 == sall.hits1 &&
		  acc.hits3 == sall.hits3 && acc.hits10 == sall.hits10,
		  "%s: relations do not add up", name);
	cr_assert_float_eq(acc.sum_rr, sall.sum_rr, 1e-9);
	cr_assert_float_eq(acc.sum_rank, sall.sum_rank, 1e-9);

	for (int q = 0; q < 2 * NT; q++) {
		const struct rdps_triple *x = &test[q % NT];
		int head = q >= NT;
		uint32_t truth = head ? x->h : x->t;
		const float *r = rel + (size_t)x->r * rd;
		double sp = rdps_model_score(m, ent + (size_t)x->h * ed, r,
					     ent + (size_t)x->t * ed);
		uint32_t gt = 0, eq = 0, near = 0;
		/* the duplicate of the true entity ties exactly */
		cr_assert_geq(e1[q], 1, "%s q%d: duplicate of the true entity did "
			      "not tie", name, q);
		for (uint32_t c = 0; c < 2 * E; c++) {
			if (c == truth ||
			    (head ? rdps_triple_set_contains(f, c, x->r, x->t)
				  : rdps_triple_set_contains(f, x->h, x->r, c)))
				continue;
			const float *cr = ent + (size_t)c * ed;
			double sc = head ? rdps_model_score(m, cr, r, ent + (size_t)x->t * ed)
					 : rdps_model_score(m, ent + (size_t)x->h * ed, r, cr);
			if (c % E == truth % E && c != truth)
				eq++;
			else if (fabs(sc - sp) < 1e-3)
				near++;
			else
				gt += sc > sp;
		}
		cr_assert(g1[q] + e1[q] >= gt + eq && g1[q] + e1[q] <= gt + eq + near,
			  "%s q%d: gt %u eq %u, brute force gt %u eq %u near %u", name,
			  q, g1[q], e1[q], gt, eq, near);
	}
	for (int hh = 0; hh < 2; hh++)
		rdps_eval_destroy(half[hh]);
	rdps_eval_destroy(one);
	rdps_eval_destroy(many);
	rdps_triple_set_destroy(f);
	free(ent), free(rel);
	rdps_model_destroy(m);
}

Test(eval, random_transe_l1) { random_check("TransE_l1", 19); }
Test(eval, random_transe_l2) { random_check("TransE_l2", 24); }
Test(eval, random_distmult) { random_check("DistMult", 17); }
Test(eval, random_complex) { random_check("ComplEx", 26); }
Test(eval, random_rotate) { random_check("RotatE", 18); }
Test(eval, random_rescal) { random_check("RESCAL", 9); }
Test(eval, random_transr) { random_check("TransR", 10); }
Test(eval, random_simple) { random_check("SimplE", 22); }

Test(eval, bad_params)
{
	struct rdps_model *m = make_model("DistMult", 4, 1.0f);
	struct rdps_triple t = { 0, 0, 9 };
	struct rdps_eval *ev = (struct rdps_eval *)1;
	struct rdps_eval_params p = { .model = m, .test = &t, .n_test = 1, .n_entities = 5 };

	cr_assert_eq(rdps_eval_create(&ev, &p), -EINVAL);
	cr_assert_null(ev);
	t.t = 4;
	cr_assert_eq(rdps_eval_create(&ev, &p), 0);
	/* candidates before set_rows */
	cr_assert_eq(rdps_eval_add_candidates(ev, 0, (float[20]){ 0 }, 5), -EINVAL);
	rdps_eval_destroy(ev);
	rdps_model_destroy(m);
}
