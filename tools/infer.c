// SPDX-License-Identifier: MIT
/* Helpers of rdps predict / emb_sim / eval (see infer.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"

int infer_nargs(const char *cmd, int argc, char **argv, const char **files)
{
	int n = 0;

	files[n++] = optarg;
	while (optind < argc && argv[optind][0] != '-') {
		if (n == INFER_MAX_FILES) {
			fprintf(stderr, "rdps %s: --data_files takes at most %d files\n", cmd,
				INFER_MAX_FILES);
			return -1;
		}
		files[n++] = argv[optind++];
	}
	return n;
}

/* a ranks before b */
static inline int better(const struct infer_item *a, const struct infer_item *b)
{
	return a->score > b->score || (a->score == b->score && a->idx < b->idx);
}

int infer_topk_init(struct infer_topk *t, size_t k)
{
	t->items = malloc((k ? k : 1) * sizeof(*t->items));
	t->n = 0;
	t->k = k;
	return t->items ? 0 : -ENOMEM;
}

/* The heap keeps the worst kept item at the root. */
static void sift_down(struct infer_topk *t, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		struct infer_item tmp;

		if (l < t->n && better(&t->items[w], &t->items[l]))
			w = l;
		if (r < t->n && better(&t->items[w], &t->items[r]))
			w = r;
		if (w == i)
			return;
		tmp = t->items[i];
		t->items[i] = t->items[w];
		t->items[w] = tmp;
		i = w;
	}
}

void infer_topk_push(struct infer_topk *t, double score, uint64_t idx)
{
	struct infer_item it = { score, idx };

	if (isnan(score) || !t->k)
		return;
	if (t->n < t->k) {
		size_t i = t->n++;

		/* sift up: the new item climbs while it is worse than its parent */
		while (i && better(&t->items[(i - 1) / 2], &it)) {
			t->items[i] = t->items[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		t->items[i] = it;
		return;
	}
	if (!better(&it, &t->items[0]))
		return;
	t->items[0] = it;
	sift_down(t, 0);
}

static int cmp_best_first(const void *a, const void *b)
{
	const struct infer_item *x = a, *y = b;

	return better(x, y) ? -1 : better(y, x);
}

size_t infer_topk_sort(struct infer_topk *t)
{
	qsort(t->items, t->n, sizeof(*t->items), cmp_best_first);
	return t->n;
}

void infer_topk_reset(struct infer_topk *t)
{
	t->n = 0;
}

void infer_topk_free(struct infer_topk *t)
{
	free(t->items);
	t->items = NULL;
	t->n = t->k = 0;
}

void infer_repr_f32(double v, char *buf, size_t len)
{
	char digits[40];
	int prec, e;

	v = (double)(float)v;
	if (isnan(v) || isinf(v)) {
		snprintf(buf, len, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
		return;
	}
	if (v == 0) {
		snprintf(buf, len, "%s", signbit(v) ? "-0.0" : "0.0");
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(digits, sizeof(digits), "%.*e", prec - 1, v);
		if (strtod(digits, NULL) == v)
			break;
	}
	snprintf(digits, sizeof(digits), "%.*e", prec - 1, v);
	e = atoi(strchr(digits, 'e') + 1);
	if (e < -4 || e > 15) {
		/* Python: mantissa digits, "e-05" / "e+16" */
		*strchr(digits, 'e') = '\0';
		snprintf(buf, len, "%se%c%02d", digits, e < 0 ? '-' : '+', e < 0 ? -e : e);
	} else if (prec - 1 - e > 0) {
		snprintf(buf, len, "%.*f", prec - 1 - e, v);
	} else {
		snprintf(buf, len, "%.0f.0", v);
	}
}

void infer_done(const char *output)
{
	printf("Inference Done\nThe result is saved in %s\n", output);
}

FILE *infer_output_open(const char *cmd, const char *path, const char *header)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "rdps %s: cannot write --output %s: %s\n", cmd, path, strerror(errno));
		return NULL;
	}
	fputs(header, f);
	return f;
}

int infer_output_close(const char *cmd, const char *path, FILE *f)
{
	int bad;

	if (!f)
		return 0;
	bad = fflush(f) || ferror(f);
	bad |= fclose(f) != 0;
	if (bad) {
		fprintf(stderr, "rdps %s: writing %s: %s\n", cmd, path, strerror(errno));
		return -1;
	}
	return 0;
}
