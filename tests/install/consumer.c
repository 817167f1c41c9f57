/* SPDX-License-Identifier: MIT */
/*
 * A program of a librdps user, built by tests/install/run.sh against the
 * installed library only (pkg-config, then CMake's find_package): a client
 * of one server started as
 *
 *   rdps server --table entity:1000:16 --optimizer sgd --lr 1 --init zeros
 *
 * It pulls rows BASE..BASE+3 (zeros), pushes gradients, flushes, pulls
 * again and checks every value: SGD with lr 1 subtracts the gradient, so a
 * push of -1 adds exactly 1 (all values here are exact in float). Then a
 * barrier, an allreduce (one client: the sum is the value) and a pull out
 * of range. Two runs against one server use different BASE rows.
 *
 * usage: consumer IP_CONFIG BASE      exit 0 if every check held
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdps/rdps.h>

#define DIM 16
#define ROWS 1000

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "consumer: FAIL %s:%d: ", __FILE__,   \
				__LINE__);                                    \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			failures++;                                           \
		}                                                             \
	} while (0)

/* Row i of rows must be v(j) for every column j. */
static void check_row(const float *rows, int i, uint64_t id, float (*v)(int))
{
	for (int j = 0; j < DIM; j++)
		CHECK(rows[i * DIM + j] == v(j), "row %llu column %d: %g, expected %g",
		      (unsigned long long)id, j, rows[i * DIM + j], v(j));
}

static float zero(int j) { (void)j; return 0.0f; }
static float one(int j) { (void)j; return 1.0f; }
static float two(int j) { (void)j; return 2.0f; }
static float quarters(int j) { return 0.25f * (float)(j + 1); }

int main(int argc, char **argv)
{
	struct rdps_client_params p = {
		.transport = "tcp",
		.client_id = 0,
		.num_clients = 1,
		.timeout_ms = 20000,
		.quiet = true,
	};
	struct rdps_client *c = NULL;
	struct rdps_table_info ent;
	char err[512];
	float rows[4 * DIM], grads[2 * DIM];
	double v[2] = { 1.5, -2.0 };
	uint64_t base, ids[4];
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: consumer IP_CONFIG BASE\n");
		return 2;
	}
	p.ip_config = argv[1];
	base = strtoull(argv[2], NULL, 10);
	for (int i = 0; i < 4; i++)
		ids[i] = base + (uint64_t)i;

	rc = rdps_client_create(&p, &c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "consumer: FAIL rdps_client_create: %s (%s)\n", err,
			rdps_strerror(rc));
		return 1;
	}
	CHECK(strcmp(rdps_client_transport(c), "tcp") == 0, "transport %s",
	      rdps_client_transport(c));
	CHECK(rdps_client_num_servers(c) == 1, "%u servers", rdps_client_num_servers(c));
	rc = rdps_client_table(c, "entity", &ent);
	CHECK(rc == 0, "rdps_client_table(entity): %s", rdps_strerror(rc));
	if (rc)
		goto out;
	CHECK(ent.dim == DIM && ent.num_rows == ROWS, "entity is %llu x %u",
	      (unsigned long long)ent.num_rows, ent.dim);

	/* Fresh rows: zeros. */
	rc = rdps_client_pull(c, ent.id, ids, 4, rows);
	CHECK(rc == 0, "pull: %s", rdps_client_errmsg(c));
	for (int i = 0; i < 4; i++)
		check_row(rows, i, ids[i], zero);

	/* base+1: -1 once; base+2: -1 twice (two pushes); base+3: -(j+1)/4. */
	for (int j = 0; j < DIM; j++) {
		grads[j] = -1.0f;
		grads[DIM + j] = -1.0f;
	}
	rc = rdps_client_push(c, ent.id, &ids[1], grads, 2);
	CHECK(rc == 0, "push: %s", rdps_client_errmsg(c));
	rc = rdps_client_push(c, ent.id, &ids[2], grads, 1);
	CHECK(rc == 0, "push: %s", rdps_client_errmsg(c));
	for (int j = 0; j < DIM; j++)
		grads[j] = -quarters(j);
	rc = rdps_client_push(c, ent.id, &ids[3], grads, 1);
	CHECK(rc == 0, "push: %s", rdps_client_errmsg(c));
	rc = rdps_client_flush(c);
	CHECK(rc == 0, "flush: %s", rdps_client_errmsg(c));

	memset(rows, 0xff, sizeof(rows));
	rc = rdps_client_pull(c, ent.id, ids, 4, rows);
	CHECK(rc == 0, "pull: %s", rdps_client_errmsg(c));
	check_row(rows, 0, ids[0], zero);
	check_row(rows, 1, ids[1], one);
	check_row(rows, 2, ids[2], two);
	check_row(rows, 3, ids[3], quarters);

	rc = rdps_client_barrier(c);
	CHECK(rc == 0, "barrier: %s", rdps_client_errmsg(c));
	rc = rdps_client_allreduce(c, v, 2);
	CHECK(rc == 0 && v[0] == 1.5 && v[1] == -2.0, "allreduce: %d (%s), %g %g", rc,
	      rdps_client_errmsg(c), v[0], v[1]);

	ids[0] = ROWS;
	rc = rdps_client_pull(c, ent.id, ids, 1, rows);
	CHECK(rc == -ERANGE, "pull of row %d: %d, expected -ERANGE", ROWS, rc);

out:
	rdps_client_destroy(c);
	if (failures)
		return 1;
	printf("consumer: ok: librdps %s, rows %llu..%llu pulled, pushed and pulled back\n",
	       RDPS_VERSION_STRING, (unsigned long long)base, (unsigned long long)base + 3);
	return 0;
}
