// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "rdps/kvstore.h"

int rdps_book_check(const struct rdps_book *b)
{
	if (!b->num_parts || !b->off || b->off[0] != 0)
		return -EINVAL;
	for (uint32_t i = 0; i < b->num_parts; i++)
		if (b->off[i + 1] < b->off[i])
			return -EINVAL;
	return 0;
}

void rdps_book_even(uint64_t n, uint32_t k, uint64_t *off)
{
	uint64_t q = n / k, r = n % k;

	off[0] = 0;
	for (uint32_t i = 0; i < k; i++)
		off[i + 1] = off[i] + q + (i < r ? 1 : 0);
}

static const char *const optimizer_names[] = {
	[RDPS_OPT_SGD] = "sgd",
	[RDPS_OPT_ADAGRAD_ROW] = "adagrad_row",
	[RDPS_OPT_ADAGRAD] = "adagrad",
	[RDPS_OPT_ADAM] = "adam",
	[RDPS_OPT_NONE] = "none",
};

int rdps_optimizer_parse(const char *name)
{
	for (int i = 0; i < (int)(sizeof(optimizer_names) / sizeof(optimizer_names[0])); i++)
		if (!strcasecmp(name, optimizer_names[i]))
			return i;
	if (!strcasecmp(name, "row_adagrad"))
		return RDPS_OPT_ADAGRAD_ROW;
	return -EINVAL;
}

const char *rdps_optimizer_name(int opt)
{
	if (opt < 0 || opt > RDPS_OPT_NONE)
		return "unknown";
	return optimizer_names[opt];
}
