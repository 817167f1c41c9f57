// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdps/kvstore.h"

Test(book, locate_matches_linear_scan)
{
	uint64_t off[] = { 0, 10, 10, 25, 26, 100 }; /* part 1 is empty */
	struct rdps_book b = { 5, off };

	cr_assert_eq(rdps_book_check(&b), 0);
	for (uint64_t id = 0; id < 100; id++) {
		uint32_t want = 0;

		while (!(off[want] <= id && id < off[want + 1]))
			want++;
		cr_assert_eq(rdps_book_part(&b, id), want, "id %lu", (unsigned long)id);
	}
}

Test(book, even_split_and_checks)
{
	uint64_t off[5];
	uint64_t bad[] = { 0, 5, 3 };
	struct rdps_book b = { 2, bad };

	rdps_book_even(10, 4, off);
	cr_assert_eq(off[0], 0);
	cr_assert_eq(off[1], 3);
	cr_assert_eq(off[2], 6);
	cr_assert_eq(off[3], 8);
	cr_assert_eq(off[4], 10);
	cr_assert_eq(rdps_book_check(&b), -EINVAL);
}

Test(layout, stride_is_the_smallest_cacheline_multiple_holding_header_and_data)
{
	for (uint32_t dim = 1; dim < 600; dim++) {
		size_t stride = rdps_row_stride(dim), used = RDPS_ROW_DATA_OFFSET + dim * 4;

		cr_assert_eq(stride % 64, 0);
		cr_assert_geq(stride, used);
		cr_assert_lt(stride - used, 64);
	}
	cr_assert_eq(RDPS_ROW_DATA_OFFSET % 16, 0);
	cr_assert_geq(RDPS_ROW_DATA_OFFSET, RDPS_ROW_CHECK_OFFSET + 8);
	cr_assert_eq(rdps_row_stride(400), 1664);
	cr_assert_eq(rdps_row_stride(12), 64);
}

static struct rdps_shard *make(uint32_t dim, uint64_t lo, uint64_t hi, int opt,
			       int init, uint64_t seed)
{
	struct rdps_shard_params p = {
		.name = "entity", .table_id = 0, .dim = dim, .num_rows = hi > 1000 ? hi : 1000,
		.lo = lo, .hi = hi, .init = init, .init_range = 0.5f, .seed = seed,
		.optimizer = opt, .lr = 0.5f,
	};
	struct rdps_shard *s;

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	return s;
}

Test(shard, region_is_page_aligned_and_init_reproducible_across_splits)
{
	struct rdps_shard *whole = make(8, 0, 1000, RDPS_OPT_SGD, RDPS_INIT_UNIFORM, 7);
	struct rdps_shard *part = make(8, 400, 600, RDPS_OPT_SGD, RDPS_INIT_UNIFORM, 7);
	struct rdps_shard *other = make(8, 400, 600, RDPS_OPT_SGD, RDPS_INIT_UNIFORM, 8);
	struct rdps_shard_info info;
	float a[8], b[8], c[8];
	int differ = 0;

	rdps_shard_info(part, &info);
	cr_assert_eq((uintptr_t)info.base % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
	cr_assert_eq(info.len % (size_t)sysconf(_SC_PAGESIZE), 0);
	cr_assert_geq(info.len, 200 * info.stride);
	for (uint64_t id = 400; id < 600; id++) {
		rdps_shard_read(whole, &id, 1, a);
		rdps_shard_read(part, &id, 1, b);
		rdps_shard_read(other, &id, 1, c);
		cr_assert_arr_eq(a, b, sizeof(a), "row %lu differs between splits", (unsigned long)id);
		for (int j = 0; j < 8; j++) {
			cr_assert(a[j] >= -0.5f && a[j] <= 0.5f);
			differ += a[j] != c[j];
		}
	}
	cr_assert_gt(differ, 1500, "seed does not change the rows");
	rdps_shard_destroy(whole);
	rdps_shard_destroy(part);
	rdps_shard_destroy(other);
}

Test(shard, ids_out_of_range_are_reported)
{
	struct rdps_shard *s = make(4, 10, 20, RDPS_OPT_SGD, RDPS_INIT_ZEROS, 0);
	uint64_t ids[] = { 10, 19, 20 }, bad = 0;

	cr_assert_eq(rdps_shard_check_ids(s, ids, 2, &bad), 0);
	cr_assert_eq(rdps_shard_check_ids(s, ids, 3, &bad), -ERANGE);
	cr_assert_eq(bad, 20);
	rdps_shard_destroy(s);
}

Test(shard, invalid_params_refused)
{
	struct rdps_shard_params p = { .name = "t", .dim = 0, .num_rows = 10, .hi = 10 };
	struct rdps_shard *s;

	cr_assert_eq(rdps_shard_create(&p, &s), -EINVAL);
	p.dim = 4;
	p.hi = 11;
	cr_assert_eq(rdps_shard_create(&p, &s), -EINVAL);
	p.hi = 10;
	p.optimizer = 9;
	cr_assert_eq(rdps_shard_create(&p, &s), -EINVAL);
	rdps_shard_destroy(NULL);
}

/* Reference optimizers in double precision, with duplicates summed. */
static void reference(int opt, double *w, double *state, uint32_t dim, double lr,
		      const double *g)
{
	if (opt == RDPS_OPT_SGD) {
		for (uint32_t j = 0; j < dim; j++)
			w[j] -= lr * g[j];
	} else if (opt == RDPS_OPT_ADAGRAD_ROW) {
		double sq = 0;

		for (uint32_t j = 0; j < dim; j++)
			sq += g[j] * g[j];
		state[0] += sq / dim;
		for (uint32_t j = 0; j < dim; j++)
			w[j] -= lr * g[j] / (sqrt(state[0]) + 1e-10);
	} else {
		for (uint32_t j = 0; j < dim; j++) {
			state[j] += g[j] * g[j];
			w[j] -= lr * g[j] / (sqrt(state[j]) + 1e-10);
		}
	}
}

static void check_optimizer(int opt)
{
	enum { DIM = 5, ROWS = 6, PUSHES = 4, N = 7 };
	struct rdps_shard *s = make(DIM, 100, 100 + ROWS, opt, RDPS_INIT_UNIFORM, 3);
	double w[ROWS][DIM], st[ROWS][DIM] = { { 0 } };
	float row[DIM];

	for (int r = 0; r < ROWS; r++) {
		uint64_t id = 100 + (uint64_t)r;

		rdps_shard_read(s, &id, 1, row);
		for (int j = 0; j < DIM; j++)
			w[r][j] = row[j];
	}
	for (int p = 0; p < PUSHES; p++) {
		/* Duplicated ids (row 1 three times) must be summed first. */
		uint64_t ids[N] = { 101, 103, 101, 100, 105, 101, 103 };
		float g[N][DIM];
		double sum[ROWS][DIM] = { { 0 } };
		int touched[ROWS] = { 0 };

		for (int i = 0; i < N; i++)
			for (int j = 0; j < DIM; j++) {
				g[i][j] = (float)((i + 1) * (j - 2) + p) * 0.125f;
				sum[ids[i] - 100][j] += g[i][j];
				touched[ids[i] - 100] = 1;
			}
		cr_assert_eq(rdps_shard_apply(s, ids, &g[0][0], N), 0);
		for (int r = 0; r < ROWS; r++)
			if (touched[r])
				reference(opt, w[r], st[r], DIM, 0.5, sum[r]);
	}
	for (int r = 0; r < ROWS; r++) {
		uint64_t id = 100 + (uint64_t)r;

		rdps_shard_read(s, &id, 1, row);
		for (int j = 0; j < DIM; j++)
			cr_assert_float_eq(row[j], w[r][j], 1e-5, "%s row %d col %d: %g vs %g",
					   rdps_optimizer_name(opt), r, j, row[j], w[r][j]);
	}
	rdps_shard_destroy(s);
}

Test(optimizer, sgd)
{
	check_optimizer(RDPS_OPT_SGD);
}

Test(optimizer, adagrad_row)
{
	check_optimizer(RDPS_OPT_ADAGRAD_ROW);
}

Test(optimizer, adagrad_elementwise)
{
	check_optimizer(RDPS_OPT_ADAGRAD);
}

/*
 * Pushes as servers get them: thousands of ids into a table whose rows need
 * two radix passes to sort, unsorted with repeats (each summed, in push
 * order) and sorted (applied as they come), at a width with a vector body
 * and a tail (13) and at DGL-KE's 400; against the double reference.
 */
static void check_optimizer_wide(int opt, uint32_t dim, bool sorted)
{
	enum { ROWS = 5000, N = 3000, PUSHES = 3 };
	const uint64_t lo = 7;
	struct rdps_shard *s = make(dim, lo, lo + ROWS, opt, RDPS_INIT_UNIFORM, 5);
	double *w = calloc((size_t)ROWS * dim, sizeof(double));
	double *st = calloc((size_t)ROWS * dim, sizeof(double));
	double *sum = malloc((size_t)ROWS * dim * sizeof(double));
	float *g = malloc((size_t)N * dim * sizeof(float)), *row = malloc(dim * sizeof(float));
	uint64_t ids[N], x = 99 + dim;
	bool touched[ROWS];

	cr_assert(w && st && sum && g && row);
	for (uint64_t r = 0; r < ROWS; r++) {
		uint64_t id = lo + r;

		rdps_shard_read(s, &id, 1, row);
		for (uint32_t j = 0; j < dim; j++)
			w[r * dim + j] = row[j];
	}
	for (int p = 0; p < PUSHES; p++) {
		memset(sum, 0, (size_t)ROWS * dim * sizeof(double));
		memset(touched, 0, sizeof(touched));
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			/* a third of the ids among 50 rows: many repeats */
			ids[i] = lo + (i % 3 ? (x >> 33) % ROWS : (x >> 33) % 50);
		}
		if (sorted)
			for (int i = 1; i < N; i++)
				for (int k = i; k > 0 && ids[k - 1] > ids[k]; k--) {
					uint64_t t = ids[k];

					ids[k] = ids[k - 1];
					ids[k - 1] = t;
				}
		for (int i = 0; i < N; i++) {
			uint64_t r = ids[i] - lo;

			for (uint32_t j = 0; j < dim; j++) {
				g[(size_t)i * dim + j] = (float)((int)((i * 31 + j * 7 + p) % 17) - 8) / 64.0f;
				sum[r * dim + j] += g[(size_t)i * dim + j];
			}
			touched[r] = true;
		}
		cr_assert_eq(rdps_shard_apply(s, ids, g, N), 0);
		for (uint64_t r = 0; r < ROWS; r++)
			if (touched[r])
				reference(opt, w + r * dim, st + r * dim, dim, 0.5, sum + r * dim);
	}
	for (uint64_t r = 0; r < ROWS; r++) {
		uint64_t id = lo + r;

		rdps_shard_read(s, &id, 1, row);
		for (uint32_t j = 0; j < dim; j++)
			cr_assert_float_eq(row[j], w[r * dim + j], 1e-4, "%s dim %u (%s) row %llu col %u: "
					   "%g vs %g", rdps_optimizer_name(opt), dim,
					   sorted ? "sorted" : "unsorted", (unsigned long long)r, j,
					   row[j], w[r * dim + j]);
	}
	rdps_shard_destroy(s);
	free(w);
	free(st);
	free(sum);
	free(g);
	free(row);
}

Test(optimizer, wide_pushes_unsorted_and_sorted)
{
	for (int opt = RDPS_OPT_SGD; opt <= RDPS_OPT_ADAGRAD; opt++)
		for (uint32_t dim = 13; dim <= 400; dim += 387) {
			check_optimizer_wide(opt, dim, false);
			check_optimizer_wide(opt, dim, true);
		}
}

static char *row_of(struct rdps_shard *s, uint64_t id)
{
	struct rdps_shard_info info;

	rdps_shard_info(s, &info);
	return (char *)info.base + (id - info.lo) * info.stride;
}

/* The tag row id's checksum carries (which table, which row). */
static uint64_t tag_of(struct rdps_shard *s, uint64_t id)
{
	struct rdps_shard_info info;

	rdps_shard_info(s, &info);
	return rdps_row_tag(rdps_row_table_key(info.table_id, info.name), id);
}

static uint64_t version_of(const char *row)
{
	uint64_t v;

	memcpy(&v, row, sizeof(v));
	return v;
}

Test(optimizer, names)
{
	cr_assert_eq(rdps_optimizer_parse("sgd"), RDPS_OPT_SGD);
	cr_assert_eq(rdps_optimizer_parse("Adagrad_Row"), RDPS_OPT_ADAGRAD_ROW);
	cr_assert_eq(rdps_optimizer_parse("adagrad"), RDPS_OPT_ADAGRAD);
	cr_assert_eq(rdps_optimizer_parse("adam"), RDPS_OPT_ADAM);
	cr_assert_eq(rdps_optimizer_parse("none"), RDPS_OPT_NONE);
	cr_assert_eq(rdps_optimizer_parse("adamw"), -EINVAL);
	cr_assert_str_eq(rdps_optimizer_name(RDPS_OPT_ADAM), "adam");
}

/*
 * Adam as DGL's SparseAdam: per row a step count, per element the two
 * moments, bias-corrected; repeated ids summed first; rows not pushed keep
 * their state (a row's t counts its own updates). Against a double
 * reference over 6 pushes, lr 0.05, betas (0.8, 0.95), eps 1e-6.
 */
Test(optimizer, adam_as_dgl_sparse_adam)
{
	enum { DIM = 19, ROWS = 9, PUSHES = 6, N = 8 };
	struct rdps_shard_params p = {
		.name = "emb", .dim = DIM, .num_rows = ROWS, .lo = 0, .hi = ROWS,
		.init = RDPS_INIT_UNIFORM, .init_range = 0.5f, .seed = 3,
		.optimizer = RDPS_OPT_ADAM, .lr = 0.05f, .eps = 1e-6f, .beta1 = 0.8f, .beta2 = 0.95f,
	};
	double w[ROWS][DIM], m[ROWS][DIM] = { { 0 } }, v[ROWS][DIM] = { { 0 } };
	int t[ROWS] = { 0 };
	struct rdps_shard *s;
	float row[DIM];

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	cr_assert_eq(rdps_shard_state_floats(s), (uint64_t)ROWS * (2 * DIM + 1));
	for (uint64_t r = 0; r < ROWS; r++) {
		rdps_shard_read(s, &r, 1, row);
		for (int j = 0; j < DIM; j++)
			w[r][j] = row[j];
	}
	for (int k = 0; k < PUSHES; k++) {
		uint64_t ids[N];
		float g[N][DIM];
		double sum[ROWS][DIM] = { { 0 } };
		bool touched[ROWS] = { 0 };

		for (int i = 0; i < N; i++) {
			ids[i] = (uint64_t)((i * 5 + k * 3) % 7); /* rows 7, 8 never */
			for (int j = 0; j < DIM; j++) {
				g[i][j] = (float)((i + 1) * (j - 9) + k) / 16.0f;
				sum[ids[i]][j] += g[i][j];
			}
			touched[ids[i]] = true;
		}
		cr_assert_eq(rdps_shard_apply(s, ids, &g[0][0], N), 0);
		for (int r = 0; r < ROWS; r++) {
			if (!touched[r])
				continue;
			t[r]++;
			for (int j = 0; j < DIM; j++) {
				double bc1 = 1 - pow(0.8, t[r]), bc2 = 1 - pow(0.95, t[r]);

				m[r][j] = 0.8 * m[r][j] + 0.2 * sum[r][j];
				v[r][j] = 0.95 * v[r][j] + 0.05 * sum[r][j] * sum[r][j];
				w[r][j] -= 0.05 * (m[r][j] / bc1) / (sqrt(v[r][j] / bc2) + 1e-6);
			}
		}
	}
	for (uint64_t r = 0; r < ROWS; r++) {
		rdps_shard_read(s, &r, 1, row);
		for (int j = 0; j < DIM; j++)
			cr_assert_float_eq(row[j], w[r][j], 1e-5, "row %llu col %d: %g, want %g (t %d)",
					   (unsigned long long)r, j, row[j], w[r][j], t[r]);
	}
	rdps_shard_destroy(s);
}

/* Rows written (set) are read back as written, valid, with a new version;
 * a table without an optimizer refuses gradients; replacing the optimizer
 * zeroes its state (the next Adagrad step is the first). */
Test(optimizer, set_rows_none_and_replacing_the_optimizer)
{
	enum { DIM = 6, ROWS = 10 };
	struct rdps_shard_params p = {
		.name = "t", .dim = DIM, .num_rows = ROWS, .lo = 0, .hi = ROWS,
		.init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_NONE,
	};
	uint64_t ids[3] = { 4, 2, 4 }, id4 = 4;
	int32_t in[3][DIM], out[DIM];
	float g[DIM], got[DIM];
	struct rdps_shard *s;

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	cr_assert_eq(rdps_shard_state_floats(s), 0);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < DIM; j++)
			in[i][j] = (i + 1) * 1000003 * (j + 1) - 7; /* any 32-bit words */
	rdps_shard_set(s, ids, in, 3);
	rdps_shard_read(s, &id4, 1, (float *)out);
	cr_assert_arr_eq(out, in[2], sizeof(out), "the later row of id 4 stays");
	cr_assert(rdps_row_valid(row_of(s, 4), DIM, tag_of(s, 4)));
	cr_assert_eq(version_of(row_of(s, 4)), 2, "two writes of row 4");
	for (int j = 0; j < DIM; j++)
		g[j] = 1.0f;
	cr_assert_eq(rdps_shard_apply(s, &id4, g, 1), -EPERM, "a table without optimizer");
	/* Adagrad (element-wise), lr 0.5: from zeros, one step of g = 1 gives
	 * -0.5 (sqrt(1) = 1); a second replacement resets the sum. */
	memset(in, 0, sizeof(in));
	rdps_shard_set(s, &id4, in, 1);
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(rdps_shard_set_optimizer(s, RDPS_OPT_ADAGRAD, 0.5f, 0, 0, 0), 0);
		cr_assert_eq(rdps_shard_state_floats(s), (uint64_t)ROWS * DIM);
		rdps_shard_set(s, &id4, in, 1);
		cr_assert_eq(rdps_shard_apply(s, &id4, g, 1), 0);
		rdps_shard_read(s, &id4, 1, got);
		for (int j = 0; j < DIM; j++)
			cr_assert_float_eq(got[j], -0.5f, 1e-6, "round %d: %g", round, got[j]);
	}
	cr_assert_eq(rdps_shard_set_optimizer(s, 9, 0.5f, 0, 0, 0), -EINVAL);
	cr_assert_eq(rdps_shard_set_optimizer(s, RDPS_OPT_ADAM, 0.5f, 0, 1.0f, 0), -EINVAL);
	rdps_shard_destroy(s);
}


Test(rowcheck, new_rows_are_valid_before_any_push)
{
	struct rdps_shard *u = make(100, 10, 20, RDPS_OPT_ADAGRAD, RDPS_INIT_UNIFORM, 5);
	struct rdps_shard *z = make(3, 0, 4, RDPS_OPT_SGD, RDPS_INIT_ZEROS, 0);
	float out[100];

	for (uint64_t id = 10; id < 20; id++) {
		cr_assert(rdps_row_valid(row_of(u, id), 100, tag_of(u, id)), "row %lu", (unsigned long)id);
		cr_assert_eq(version_of(row_of(u, id)), 0);
		cr_assert_eq(rdps_row_read_validated(row_of(u, id), 100, tag_of(u, id), out), 0);
	}
	for (uint64_t id = 0; id < 4; id++)
		cr_assert(rdps_row_valid(row_of(z, id), 3, tag_of(z, id)), "row %lu", (unsigned long)id);
	rdps_shard_destroy(u);
	rdps_shard_destroy(z);
}

Test(rowcheck, updates_and_imports_keep_rows_valid_and_bump_versions)
{
	enum { DIM = 6 };
	struct rdps_shard *s = make(DIM, 0, 4, RDPS_OPT_ADAGRAD_ROW, RDPS_INIT_ZEROS, 0);
	uint64_t id = 2;
	float g[DIM] = { 1, 1, 1, 1, 1, 1 }, out[DIM], rows[4 * DIM], state[4];
	char *row = row_of(s, 2);

	cr_assert_eq(rdps_shard_apply(s, &id, g, 1), 0);
	cr_assert_eq(rdps_shard_apply(s, &id, g, 1), 0);
	cr_assert_eq(version_of(row), 2);
	cr_assert(rdps_row_valid(row, DIM, tag_of(s, id)));
	cr_assert_eq(rdps_row_read_validated(row, DIM, tag_of(s, id), out), 0);
	cr_assert_lt(out[3], 0.0f);
	for (int i = 0; i < 4 * DIM; i++)
		rows[i] = (float)i;
	for (int i = 0; i < 4; i++)
		state[i] = 1.0f;
	rdps_shard_import(s, rows, state);
	for (uint64_t r = 0; r < 4; r++) {
		cr_assert(rdps_row_valid(row_of(s, r), DIM, tag_of(s, r)), "row %lu", (unsigned long)r);
		cr_assert_eq(rdps_row_read_validated(row_of(s, r), DIM, tag_of(s, r), out), 0);
		cr_assert_arr_eq(out, rows + r * DIM, sizeof(out));
	}
	cr_assert_eq(version_of(row), 3);
	rdps_shard_destroy(s);
}

Test(rowcheck, any_changed_byte_of_version_check_or_data_is_detected)
{
	enum { DIM = 40 };
	struct rdps_shard *s = make(DIM, 0, 1, RDPS_OPT_SGD, RDPS_INIT_UNIFORM, 9);
	struct rdps_shard_info info;
	float out[DIM];
	char *row = row_of(s, 0), *img;
	uint64_t tag = tag_of(s, 0);

	rdps_shard_info(s, &info);
	img = malloc(info.stride);
	cr_assert(img);
	for (size_t off = 0; off < RDPS_ROW_DATA_OFFSET + DIM * 4; off++) {
		memcpy(img, row, info.stride);
		img[off] ^= 0x10;
		cr_assert_not(rdps_row_valid(img, DIM, tag), "byte %zu changed, still valid", off);
		cr_assert_eq(rdps_row_read_validated(img, DIM, tag, out), -EAGAIN, "byte %zu", off);
	}
	/* The padding after the data is not covered (no one reads it). */
	memcpy(img, row, info.stride);
	img[info.stride - 1] ^= 0x10;
	cr_assert(rdps_row_valid(img, DIM, tag));
	/* A row no shard ever wrote (zeroed memory) is not valid either. */
	memset(img, 0, info.stride);
	cr_assert_not(rdps_row_valid(img, DIM, tag));
	free(img);
	rdps_shard_destroy(s);
}

/*
 * A row's checksum says which row of which table it is: an image of row
 * id + 1 read where row id was expected (a READ that hit an address or key
 * reused since: another row, another table's, a dropped table's slot made
 * again) is not accepted, though it is whole. The control: every row
 * here holds zeros at version 0, so the images are equal but for the check
 * word, and a rule without the tag (main's: XXH3 of the data xor the
 * version's mask) cannot tell them apart.
 */
Test(rowcheck, a_row_of_another_id_or_table_is_not_accepted)
{
	enum { DIM = 8 };
	struct rdps_shard_params p = { .name = "entity", .table_id = 0, .dim = DIM,
				       .num_rows = 10, .lo = 0, .hi = 10,
				       .init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD,
				       .lr = 1.0f };
	struct rdps_shard *a, *b, *c;

	cr_assert_eq(rdps_shard_create(&p, &a), 0);
	p.table_id = 1; /* another slot, same name and rows */
	cr_assert_eq(rdps_shard_create(&p, &b), 0);
	p.table_id = 0;
	p.name = "entity2"; /* the slot made again under another name */
	cr_assert_eq(rdps_shard_create(&p, &c), 0);
	for (uint64_t id = 0; id + 1 < 10; id++) {
		cr_assert(rdps_row_valid(row_of(a, id), DIM, tag_of(a, id)));
		cr_assert_not(rdps_row_valid(row_of(a, id + 1), DIM, tag_of(a, id)),
			      "row %llu's image taken for row %llu", (unsigned long long)id + 1,
			      (unsigned long long)id);
		cr_assert_not(rdps_row_valid(row_of(b, id), DIM, tag_of(a, id)),
			      "table 1's row %llu taken for table 0's", (unsigned long long)id);
		cr_assert_not(rdps_row_valid(row_of(c, id), DIM, tag_of(a, id)),
			      "row %llu of the table made again in the slot taken for the old one's",
			      (unsigned long long)id);
		/* The control: same version and data. */
		cr_assert_eq(memcmp(row_of(a, id + 1), row_of(a, id), RDPS_ROW_CHECK_OFFSET), 0);
		cr_assert_eq(memcmp(row_of(a, id + 1) + RDPS_ROW_DATA_OFFSET,
				    row_of(a, id) + RDPS_ROW_DATA_OFFSET, DIM * 4), 0);
	}
	rdps_shard_destroy(a);
	rdps_shard_destroy(b);
	rdps_shard_destroy(c);
}

/* TransR's relation rows: a vector and a matrix that DGL-KE keeps as two
 * arrays. Each part starts in its own range and has its own row-wise
 * Adagrad state: a gradient in one part does not shrink the other's steps. */
Test(optimizer, row_parts_have_their_own_init_range_and_adagrad_state)
{
	struct rdps_shard_params p = {
		.name = "relation", .dim = 8, .num_rows = 50, .lo = 0, .hi = 50,
		.init = RDPS_INIT_UNIFORM, .seed = 3, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.5f,
		.num_parts = 2, .parts = { { 3, 0.01f }, { 5, 1.0f } },
	};
	struct rdps_shard *s, *whole;
	float rows[50 * 8], after[50 * 8], state[100], g[2 * 8] = { 0 };
	float big1 = 0;
	uint64_t ids[2] = { 7, 7 };

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	rdps_shard_export(s, rows, NULL);
	for (int r = 0; r < 50; r++)
		for (int j = 0; j < 8; j++) {
			float v = fabsf(rows[r * 8 + j]);

			cr_assert_leq(v, j < 3 ? 0.01f : 1.0f, "row %d col %d: %g", r, j, v);
			if (j >= 3 && v > big1)
				big1 = v;
		}
	cr_assert_gt(big1, 0.5f, "the second part never left the first part's range");
	cr_assert_eq(rdps_shard_state_floats(s), 100);
	/* Part 0 gets a big gradient, part 1 a small one (summed over two ids). */
	for (int j = 0; j < 8; j++)
		g[j] = g[8 + j] = j < 3 ? 5.0f : 0.05f;
	cr_assert_eq(rdps_shard_apply(s, ids, g, 2), 0);
	rdps_shard_export(s, after, state);
	cr_assert_float_eq(state[14], 100.0f, 1e-4, "part 0 state: mean of (2*5)^2");
	cr_assert_float_eq(state[15], 0.01f, 1e-6, "part 1 state: mean of (2*0.05)^2");
	for (int j = 0; j < 8; j++) {
		/* Each part's step is lr * g / sqrt(mean g^2) = lr: one state per part. */
		cr_assert_float_eq(rows[7 * 8 + j] - after[7 * 8 + j], 0.5f, 1e-5, "col %d", j);
	}
	/* Control: one part for the whole row, one state: the small part's
	 * step shrinks under the big part's gradient. */
	p.num_parts = 0;
	p.init_range = 0.5f;
	cr_assert_eq(rdps_shard_create(&p, &whole), 0);
	rdps_shard_export(whole, rows, NULL);
	cr_assert_eq(rdps_shard_apply(whole, ids, g, 2), 0);
	rdps_shard_export(whole, after, NULL);
	cr_assert_lt(rows[7 * 8 + 5] - after[7 * 8 + 5], 0.1f);
	rdps_shard_destroy(whole);
	/* Parts must tile the row. */
	p.num_parts = 2;
	p.parts[1].cols = 4;
	cr_assert_eq(rdps_shard_create(&p, &whole), -EINVAL);
	rdps_shard_destroy(s);
}

/* ---------------------------------------------------------------------- */
/* Several threads applying at once (a server with --num_server_threads). */

#include <pthread.h>

enum { APPLIERS = 4, APPLY_ROUNDS = 3000, HOT_ROWS = 16 };

struct applier {
	struct rdps_shard *s;
	unsigned seed;
	uint64_t pushes[HOT_ROWS]; /* of each row, by this thread */
	volatile int *stop;        /* exporters: run until set */
};

/* Pushes of 8 rows out of 16 hot ones, gradient -1 everywhere. */
static void *apply_main(void *arg)
{
	struct applier *a = arg;
	float g[8 * 8];
	uint64_t ids[8];

	for (int i = 0; i < 8 * 8; i++)
		g[i] = -1.0f;
	for (int r = 0; r < APPLY_ROUNDS; r++) {
		/* 8 distinct rows: each row of a push gets gradient -1 once */
		uint64_t pick[HOT_ROWS];

		for (int k = 0; k < HOT_ROWS; k++)
			pick[k] = (uint64_t)k;
		for (int k = 0; k < 8; k++) {
			int j = k + (int)(rand_r(&a->seed) % (HOT_ROWS - k));
			uint64_t t = pick[k];

			pick[k] = pick[j];
			pick[j] = t;
			ids[k] = pick[k];
			a->pushes[ids[k]]++;
		}
		if (rdps_shard_apply(a->s, ids, g, 8))
			return (void *)1;
	}
	return NULL;
}

Test(concurrent, appliers_in_threads_keep_exact_sums)
{
	struct rdps_shard_params p = {
		.name = "entity", .dim = 8, .num_rows = HOT_ROWS, .lo = 0, .hi = HOT_ROWS,
		.init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_SGD, .lr = 1.0f,
	};
	struct applier a[APPLIERS] = { 0 };
	pthread_t th[APPLIERS];
	uint64_t all[HOT_ROWS] = { 0 }, ids[HOT_ROWS];
	float out[HOT_ROWS * 8];
	struct rdps_shard *s;

	int rounds = 0;

	cr_assert_eq(rdps_shard_create(&p, &s), 0);
	rdps_shard_set_concurrent(s, true);
	for (int t = 0; t < APPLIERS; t++) {
		a[t].s = s;
		a[t].seed = 11 + t;
	}
	/* Rounds of threads until two of them met at a stripe (the control
	 * below): on two cores, applies are short enough to miss each other
	 * in a round now and then. */
	do {
		for (int t = 0; t < APPLIERS; t++)
			cr_assert_eq(pthread_create(&th[t], NULL, apply_main, &a[t]), 0);
		for (int t = 0; t < APPLIERS; t++) {
			void *r;

			pthread_join(th[t], &r);
			cr_assert_null(r, "thread %d failed", t);
		}
	} while (!rdps_shard_lock_waits(s) && ++rounds < 50);
	for (int t = 0; t < APPLIERS; t++)
		for (int k = 0; k < HOT_ROWS; k++)
			all[k] += a[t].pushes[k];
	for (int k = 0; k < HOT_ROWS; k++)
		ids[k] = (uint64_t)k;
	rdps_shard_read(s, ids, HOT_ROWS, out);
	for (int k = 0; k < HOT_ROWS; k++)
		for (int d = 0; d < 8; d++)
			cr_assert_eq(out[k * 8 + d], (float)all[k], "row %d: %g, want %llu", k,
				     out[k * 8 + d], (unsigned long long)all[k]);
	/* Control: the threads did meet on the same rows (a lost update was
	 * possible, and the locks prevented it). */
	cr_assert_gt(rdps_shard_lock_waits(s), 0, "no apply ever waited: no race happened");
	cr_log_info("%llu applies waited for a stripe (%d rounds)",
		    (unsigned long long)rdps_shard_lock_waits(s), rounds + 1);
	rdps_shard_destroy(s);
}

/* An export (a checkpoint) while threads apply row-wise Adagrad: every row
 * is as of one moment, its value matching its own optimizer state. */
static void *export_main(void *arg)
{
	struct applier *a = arg;
	float rows[HOT_ROWS * 8], state[HOT_ROWS];
	/* value after k updates of gradient -1, lr 0.5: sum 0.5 / sqrt(i) */
	static float want[4 * APPLY_ROUNDS * 8 + 1];
	long bad = 0, moving = 0;
	float prev = -1;

	want[0] = 0;
	for (int k = 1; k <= 4 * APPLY_ROUNDS * 8; k++) {
		float st = (float)k, w = want[k - 1];

		w -= 0.5f * -1.0f / (sqrtf(st) + 1e-10f);
		want[k] = w;
	}
	while (!*a->stop) {
		rdps_shard_export(a->s, rows, state);
		for (int r = 0; r < HOT_ROWS; r++) {
			uint64_t k = (uint64_t)state[r];

			bad += state[r] != (float)k || k > 4 * APPLY_ROUNDS * 8 ||
			       rows[r * 8] != want[k];
			for (int d = 1; d < 8; d++)
				bad += rows[r * 8 + d] != rows[r * 8];
		}
		moving += rows[0] != prev;
		prev = rows[0];
	}
	a->pushes[0] = (uint64_t)bad;
	a->pushes[1] = (uint64_t)moving;
	return NULL;
}

Test(concurrent, an_export_while_threads_apply_has_each_row_as_of_one_moment)
{
	struct rdps_shard_params p = {
		.name = "entity", .dim = 8, .num_rows = HOT_ROWS, .lo = 0, .hi = HOT_ROWS,
		.init = RDPS_INIT_ZEROS, .optimizer = RDPS_OPT_ADAGRAD_ROW, .lr = 0.5f,
	};
	struct applier a[APPLIERS], ex;
	pthread_t th[APPLIERS], exporter;
	volatile int stop;
	struct rdps_shard *s = NULL;

	/* On a loaded machine the exporter may not run while the appliers do:
	 * again (at most 10 times) until exports saw rows move. */
	for (int attempt = 0; attempt < 10 && (!attempt || ex.pushes[1] <= 2); attempt++) {
		rdps_shard_destroy(s);
		memset(a, 0, sizeof(a));
		memset(&ex, 0, sizeof(ex));
		stop = 0;
		cr_assert_eq(rdps_shard_create(&p, &s), 0);
		rdps_shard_set_concurrent(s, true);
		ex.s = s;
		ex.stop = &stop;
		cr_assert_eq(pthread_create(&exporter, NULL, export_main, &ex), 0);
		for (int t = 0; t < APPLIERS; t++) {
			a[t].s = s;
			a[t].seed = 21 + t;
			cr_assert_eq(pthread_create(&th[t], NULL, apply_main, &a[t]), 0);
		}
		for (int t = 0; t < APPLIERS; t++)
			pthread_join(th[t], NULL);
		stop = 1;
		pthread_join(exporter, NULL);
		cr_assert_eq(ex.pushes[0], 0, "%llu rows exported torn or apart from their state",
			     (unsigned long long)ex.pushes[0]);
	}
	/* Control: exports ran while rows moved. */
	cr_assert_gt(ex.pushes[1], 2, "the exports never saw a row change");
	rdps_shard_destroy(s);
}
