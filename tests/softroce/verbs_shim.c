// SPDX-License-Identifier: MIT
/*
 * An LD_PRELOAD shim over libibverbs and librdmacm for the guest's tests
 * of what the verbs backend asks of the device (guest_ops.c): fork support
 * (ibv_fork_init; ibv_is_fork_initialized can be made to say it is needed,
 * as on kernels before 5.13), the type of service set on rdma_cm ids
 * (rdma_set_option), the listener's backlog (rdma_listen), the SRQ limit
 * armed (ibv_modify_srq with IBV_SRQ_LIMIT) against the limit events that
 * came (ibv_get_async_event), CQs armed (ibv_req_notify_cq, through the
 * context's ops) and the completion vectors CQs were made on.
 *
 * A process writes its counts when it exits to RDPS_VERBS_SHIM_OUT/<pid>
 * ("name value" lines); RDPS_VERBS_SHIM_FORK=disabled fakes the fork
 * status.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static struct {
	uint64_t fork_init, tos_sets, listens, srq_limit_arms, srq_limit_events, cq_arms;
	uint64_t cqs, comp_vector_mask;
	int tos_last, backlog_last, num_comp_vectors;
} k;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define COUNT(f, n) __atomic_add_fetch(&k.f, (n), __ATOMIC_RELAXED)

static void *real(const char *name, const char *version)
{
	void *f = version ? dlvsym(RTLD_NEXT, name, version) : NULL;

	if (!f)
		f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "verbs_shim: no %s underneath\n", name);
		abort();
	}
	return f;
}

__attribute__((visibility("default"))) enum ibv_fork_status ibv_is_fork_initialized(void)
{
	static enum ibv_fork_status (*fn)(void);
	const char *v = getenv("RDPS_VERBS_SHIM_FORK");

	if (v && !strcmp(v, "disabled"))
		return __atomic_load_n(&k.fork_init, __ATOMIC_RELAXED) ? IBV_FORK_ENABLED
								       : IBV_FORK_DISABLED;
	if (!fn)
		fn = (enum ibv_fork_status (*)(void))real("ibv_is_fork_initialized", NULL);
	return fn();
}

__attribute__((visibility("default"))) int ibv_fork_init(void)
{
	static int (*fn)(void);

	COUNT(fork_init, 1);
	if (!fn)
		fn = (int (*)(void))real("ibv_fork_init", "IBVERBS_1.1");
	return fn();
}

__attribute__((visibility("default"))) int rdma_set_option(struct rdma_cm_id *id, int level,
							    int optname, void *optval,
							    size_t optlen)
{
	static int (*fn)(struct rdma_cm_id *, int, int, void *, size_t);

	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_TOS && optlen >= 1) {
		COUNT(tos_sets, 1);
		__atomic_store_n(&k.tos_last, *(uint8_t *)optval, __ATOMIC_RELAXED);
	}
	if (!fn)
		fn = (int (*)(struct rdma_cm_id *, int, int, void *, size_t))
			real("rdma_set_option", "RDMACM_1.0");
	return fn(id, level, optname, optval, optlen);
}

__attribute__((visibility("default"))) int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	static int (*fn)(struct rdma_cm_id *, int);

	COUNT(listens, 1);
	__atomic_store_n(&k.backlog_last, backlog, __ATOMIC_RELAXED);
	if (!fn)
		fn = (int (*)(struct rdma_cm_id *, int))real("rdma_listen", "RDMACM_1.0");
	return fn(id, backlog);
}

__attribute__((visibility("default"))) int ibv_modify_srq(struct ibv_srq *srq,
							   struct ibv_srq_attr *attr, int mask)
{
	static int (*fn)(struct ibv_srq *, struct ibv_srq_attr *, int);

	if (mask & IBV_SRQ_LIMIT)
		COUNT(srq_limit_arms, 1);
	if (!fn)
		fn = (int (*)(struct ibv_srq *, struct ibv_srq_attr *, int))
			real("ibv_modify_srq", "IBVERBS_1.1");
	return fn(srq, attr, mask);
}

__attribute__((visibility("default"))) int ibv_get_async_event(struct ibv_context *ctx,
								struct ibv_async_event *ev)
{
	static int (*fn)(struct ibv_context *, struct ibv_async_event *);
	int ret;

	if (!fn)
		fn = (int (*)(struct ibv_context *, struct ibv_async_event *))
			real("ibv_get_async_event", "IBVERBS_1.1");
	ret = fn(ctx, ev);
	if (!ret && ev->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
		COUNT(srq_limit_events, 1);
	return ret;
}

/* ibv_req_notify_cq is inline: it calls the context's ops, which the shim
 * points at its own (the provider's, per context, kept here). */
#define MAX_CTX 16
static struct {
	struct ibv_context *ctx;
	int (*req_notify_cq)(struct ibv_cq *, int);
} ctxs[MAX_CTX];

static int req_notify_cq(struct ibv_cq *cq, int solicited)
{
	COUNT(cq_arms, 1);
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i].ctx == cq->context)
			return ctxs[i].req_notify_cq(cq, solicited);
	return -1;
}

static void hook_context(struct ibv_context *ctx)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_CTX; i++) {
		if (ctxs[i].ctx == ctx)
			break;
		if (!ctxs[i].ctx) {
			ctxs[i].ctx = ctx;
			ctxs[i].req_notify_cq = ctx->ops.req_notify_cq;
			ctx->ops.req_notify_cq = req_notify_cq;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

__attribute__((visibility("default"))) struct ibv_cq *ibv_create_cq(struct ibv_context *ctx,
								     int cqe, void *cq_context,
								     struct ibv_comp_channel *ch,
								     int comp_vector)
{
	static struct ibv_cq *(*fn)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	struct ibv_cq *cq;

	if (!fn)
		fn = (struct ibv_cq *(*)(struct ibv_context *, int, void *,
					 struct ibv_comp_channel *, int))
			real("ibv_create_cq", "IBVERBS_1.1");
	cq = fn(ctx, cqe, cq_context, ch, comp_vector);
	if (cq) {
		hook_context(ctx);
		COUNT(cqs, 1);
		if (ch && comp_vector < 64)
			__atomic_or_fetch(&k.comp_vector_mask, 1ull << comp_vector, __ATOMIC_RELAXED);
		__atomic_store_n(&k.num_comp_vectors, ctx->num_comp_vectors, __ATOMIC_RELAXED);
	}
	return cq;
}

/* A count by name, for a test run under the shim (dlsym). */
__attribute__((visibility("default"))) long long rdps_verbs_shim_count(const char *name)
{
	if (!strcmp(name, "fork_init"))
		return (long long)k.fork_init;
	if (!strcmp(name, "tos_sets"))
		return (long long)k.tos_sets;
	if (!strcmp(name, "tos_last"))
		return k.tos_last;
	if (!strcmp(name, "cq_arms"))
		return (long long)k.cq_arms;
	if (!strcmp(name, "cqs"))
		return (long long)k.cqs;
	return -1;
}

__attribute__((destructor)) static void shim_write(void)
{
	const char *dir = getenv("RDPS_VERBS_SHIM_OUT");
	char path[4096];
	FILE *f;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "fork_init %llu\ntos_sets %llu\ntos_last %d\nlistens %llu\nbacklog_last %d\n"
		"srq_limit_arms %llu\nsrq_limit_events %llu\ncq_arms %llu\ncqs %llu\n"
		"comp_vector_mask %llu\nnum_comp_vectors %d\n",
		(unsigned long long)k.fork_init, (unsigned long long)k.tos_sets, k.tos_last,
		(unsigned long long)k.listens, k.backlog_last,
		(unsigned long long)k.srq_limit_arms, (unsigned long long)k.srq_limit_events,
		(unsigned long long)k.cq_arms, (unsigned long long)k.cqs,
		(unsigned long long)k.comp_vector_mask, k.num_comp_vectors);
	fclose(f);
}
