// SPDX-License-Identifier: MIT
/* Datasets and partitions the multi-process suites train on. */
#include <criterion/criterion.h>

#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps_test.h"

void rdps_test_partition(const char *data, const char *out, uint32_t k, int method)
{
	struct rdps_partition_opts po = { .k = k, .method = method, .data_dir = data,
					  .out_dir = out };
	struct rdps_partition_result pr;
	char err[512];

	cr_assert_eq(rdps_partition_build(&po, &pr, err, sizeof(err)), 0, "%s", err);
}

void rdps_test_synth_kg(const char *out, uint64_t num_entities, uint32_t num_relations,
			uint64_t num_triples, uint64_t seed, const char *part, uint32_t k)
{
	struct rdps_synth_opts so;
	struct rdps_dataset_stats st;
	char err[512];

	rdps_dataset_synth_defaults(&so);
	so.num_entities = num_entities;
	so.num_relations = num_relations;
	so.num_triples = num_triples;
	so.num_communities = 8;
	so.num_valid = 100;
	so.num_test = 100;
	if (seed)
		so.seed = seed;
	cr_assert_eq(rdps_dataset_synth(out, &so, &st, err, sizeof(err)), 0, "%s", err);
	if (part)
		rdps_test_partition(out, part, k, RDPS_PARTITION_RANDOM);
}
