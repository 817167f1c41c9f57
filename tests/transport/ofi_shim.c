// SPDX-License-Identifier: MIT
/*
 * An LD_PRELOAD shim over libfabric (and two libibverbs calls) for the
 * tests of what rdps asks of it: which API version, how many fabrics,
 * domains, endpoints and address vectors per process, how its endpoints'
 * queues are sized, which efa options it sets and reads; it can make a
 * provider look like efa and answer efa's options as efa's own rule does,
 * say that READs are emulated, or that fork support is needed. ofi_shim.h
 * lists the knobs and the counts.
 *
 * libfabric's calls past fi_getinfo and fi_fabric are inline functions
 * calling through the objects' ops tables, so the shim wraps fi_fabric and
 * then each object's table as it is made: the object's ops pointer is
 * pointed at a copy with the shim's functions, which find the provider's
 * own in a table by object.
 */

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include "ofi_shim.h"

#define EMULATED_READ (FI_OPT_EFA_RNR_RETRY + 1)
#define USE_DEVICE_RDMA (FI_OPT_EFA_RNR_RETRY + 4)

static struct rdps_ofi_shim_counts counts;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("default"))) struct rdps_ofi_shim_counts *rdps_ofi_shim_counts(void)
{
	return &counts;
}

__attribute__((visibility("default"))) void rdps_ofi_shim_reset(void)
{
	pthread_mutex_lock(&lock);
	memset(&counts, 0, sizeof(counts));
	pthread_mutex_unlock(&lock);
}

#define COUNT(field, n) __atomic_add_fetch(&counts.field, (n), __ATOMIC_RELAXED)

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static void *real(const char *name, const char *version)
{
	void *f = version ? dlvsym(RTLD_NEXT, name, version) : NULL;

	if (!f)
		f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "ofi_shim: no %s underneath\n", name);
		abort();
	}
	return f;
}

/* ---------------------------------------------------------------------- */
/* Objects and their original ops                                         */

#define MAX_OBJS 4096

static struct {
	const void *obj;
	const void *ops;   /* the provider's table */
	int kind;
	bool device_rdma;  /* efa model: the endpoint's use_device_rdma */
	bool counted;      /* a domain of the provider rdps asked for */
	uint32_t api;      /* the fabric's API version */
} objs[MAX_OBJS];
static int nobjs;

enum { K_FABRIC = 1, K_DOMAIN, K_EP, K_AV, K_CQ };

static int obj_add(const void *obj, const void *ops, int kind, uint32_t api)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nobjs && objs[i].obj != obj; i++)
		;
	if (i == nobjs) {
		if (nobjs == MAX_OBJS) {
			pthread_mutex_unlock(&lock);
			fprintf(stderr, "ofi_shim: too many objects\n");
			abort();
		}
		nobjs++;
	}
	objs[i].obj = obj;
	objs[i].ops = ops;
	objs[i].kind = kind;
	objs[i].api = api;
	objs[i].device_rdma = false;
	objs[i].counted = false;
	pthread_mutex_unlock(&lock);
	return i;
}

static int obj_find(const void *obj)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = nobjs - 1; i >= 0 && objs[i].obj != obj; i--)
		;
	pthread_mutex_unlock(&lock);
	if (i < 0) {
		fprintf(stderr, "ofi_shim: an object the shim did not see made\n");
		abort();
	}
	return i;
}

/* ---------------------------------------------------------------------- */
/* Looking like efa                                                       */

static char *real_prov;        /* the provider's own name, under "efa" */
/* Calls into libfabric under way on this thread: a layered provider (rxm)
 * calls fi_getinfo and fi_fabric again for its core provider, and those
 * are not rdps's (not counted, not masked). */
static __thread int depth;
static const void *newest_av;  /* the address vector counted last */
static uint32_t last_api;      /* of the last fi_getinfo */

static bool as_efa(void)
{
	return env_on("RDPS_OFI_SHIM_AS_EFA");
}

/* Puts the real name back into info for libfabric's own call; returns
 * what to restore. */
static char *unmask(struct fi_info *info)
{
	char *shown = NULL;

	if (info && info->fabric_attr && info->fabric_attr->prov_name && real_prov &&
	    !strcmp(info->fabric_attr->prov_name, "efa")) {
		shown = info->fabric_attr->prov_name;
		info->fabric_attr->prov_name = real_prov;
	}
	return shown;
}

static void remask(struct fi_info *info, char *shown)
{
	if (shown)
		info->fabric_attr->prov_name = shown;
}

/* Whether an object is of the provider rdps asked for (counted), not of
 * one that provider layers over (rxm's tcp domains and endpoints). */
static bool counted(const struct fi_info *info)
{
	const char *p = info && info->fabric_attr ? info->fabric_attr->prov_name : NULL;

	return !p || !strcmp(p, "efa") || strstr(p, "ofi_rxm");
}

/* efa_rdm_get_use_device_rdma's rule, for a device as the knobs say. */
static bool efa_default_device_rdma(uint32_t api)
{
	bool hw = !env_on("RDPS_OFI_SHIM_NO_RDMA");

	if (FI_VERSION_GE(api, FI_VERSION(1, 18)))
		return hw;
	return !env_on("RDPS_OFI_SHIM_OLD_EFA") && hw;
}

/* ---------------------------------------------------------------------- */
/* Endpoints                                                              */

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	int i = obj_find(fid);
	const struct fi_ops_ep *ops = objs[i].ops;

	if (level == FI_OPT_ENDPOINT && optname == EMULATED_READ) {
		bool emulated;

		COUNT(emulated_read_asks, 1);
		if (env_on("RDPS_OFI_SHIM_EMULATED_READ"))
			emulated = true;
		else if (as_efa())
			emulated = !objs[i].device_rdma;
		else
			return ops->getopt(fid, level, optname, optval, optlen);
		if (*optlen < sizeof(bool))
			return -FI_ETOOSMALL;
		*(bool *)optval = emulated;
		*optlen = sizeof(bool);
		COUNT(emulated_read_yes, emulated);
		return 0;
	}
	return ops->getopt(fid, level, optname, optval, optlen);
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	int i = obj_find(fid);
	const struct fi_ops_ep *ops = objs[i].ops;

	if (level == FI_OPT_ENDPOINT && optname == USE_DEVICE_RDMA && as_efa()) {
		bool on;

		if (optlen != sizeof(bool))
			return -FI_EINVAL;
		on = *(const bool *)optval;
		COUNT(device_rdma_asks, on);
		/* efa takes it from API 1.18 on only. */
		if (!FI_VERSION_GE(objs[i].api, FI_VERSION(1, 18))) {
			COUNT(device_rdma_refused, 1);
			return -FI_ENOPROTOOPT;
		}
		if (on && env_on("RDPS_OFI_SHIM_NO_RDMA")) {
			COUNT(device_rdma_refused, 1);
			return -FI_EOPNOTSUPP;
		}
		objs[i].device_rdma = on;
		return 0;
	}
	return ops->setopt(fid, level, optname, optval, optlen);
}

/* ---------------------------------------------------------------------- */
/* Completion queues, address vectors, domains                            */

static ssize_t cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	const struct fi_ops_cq *ops = objs[obj_find(cq)].ops;

	COUNT(cq_reads, 1);
	return ops->read(cq, buf, count);
}

static int av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		     uint64_t flags, void *context)
{
	int i = obj_find(av);
	const struct fi_ops_av *ops = objs[i].ops;
	int ret = ops->insert(av, addr, count, fi_addr, flags, context);

	if (ret > 0 && objs[i].counted) {
		COUNT(av_inserts, (uint64_t)ret);
		if (av == newest_av)
			COUNT(av_inserts_newest, (uint64_t)ret);
	}
	return ret;
}

static uint32_t api_of(const void *obj)
{
	return objs[obj_find(obj)].api;
}

/* The newest endpoint of the provider rdps asked for (a client's, when it
 * connects after its servers started), its provider's message table, and
 * whether its sends find the provider's queue full. */
static struct fid_ep *newest_ep;
static const struct fi_ops_msg *newest_msg;
static bool sends_full;

__attribute__((visibility("default"))) void rdps_ofi_shim_sends_full(bool on)
{
	__atomic_store_n(&sends_full, on, __ATOMIC_RELEASE);
}

static ssize_t ep_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	if (ep == newest_ep && __atomic_load_n(&sends_full, __ATOMIC_ACQUIRE)) {
		COUNT(sends_refused, 1);
		return -FI_EAGAIN;
	}
	return newest_msg->sendmsg(ep, msg, flags);
}

static int dom_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
			void *context)
{
	int i = obj_find(domain);
	const struct fi_ops_domain *ops = objs[i].ops;
	uint32_t api = objs[i].api;
	char *shown = unmask(info);
	int ret;

	depth++;
	ret = ops->endpoint(domain, info, ep, context);
	depth--;

	remask(info, shown);
	if (ret)
		return ret;
	if (counted(info)) {
		COUNT(endpoints, 1);
		__atomic_store_n(&counts.ep_tx_size, info->tx_attr ? info->tx_attr->size : 0,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&counts.ep_rx_size, info->rx_attr ? info->rx_attr->size : 0,
				 __ATOMIC_RELAXED);
	}
	{
		struct fi_ops_ep *mine = malloc(sizeof(*mine));
		int k;

		*mine = *(*ep)->ops;
		k = obj_add(*ep, (*ep)->ops, K_EP, api);
		objs[k].device_rdma = efa_default_device_rdma(api);
		mine->getopt = ep_getopt;
		mine->setopt = ep_setopt;
		(*ep)->ops = mine;
	}
	if (counted(info) && (*ep)->msg) {
		struct fi_ops_msg *mine = malloc(sizeof(*mine));

		/* (Every counted endpoint of a process has one provider.) */
		*mine = *(*ep)->msg;
		newest_msg = (*ep)->msg;
		mine->sendmsg = ep_sendmsg;
		(*ep)->msg = mine;
		__atomic_store_n(&newest_ep, *ep, __ATOMIC_RELEASE);
	}
	return 0;
}

static int dom_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		       void *context)
{
	int d = obj_find(domain);
	const struct fi_ops_domain *ops = objs[d].ops;
	int ret = ops->av_open(domain, attr, av, context);

	if (!ret) {
		struct fi_ops_av *mine = malloc(sizeof(*mine));

		if (objs[d].counted) {
			COUNT(avs, 1);
			newest_av = *av;
		}
		int k;

		*mine = *(*av)->ops;
		k = obj_add(*av, (*av)->ops, K_AV, api_of(domain));
		objs[k].counted = objs[d].counted;
		mine->insert = av_insert;
		(*av)->ops = mine;
	}
	return ret;
}

static int dom_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		       void *context)
{
	int d = obj_find(domain);
	const struct fi_ops_domain *ops = objs[d].ops;
	int ret;

	/* efa of libfabric 1.17: no wait objects. */
	if (objs[d].counted && attr && attr->wait_obj != FI_WAIT_NONE &&
	    env_on("RDPS_OFI_SHIM_NO_WAIT"))
		return -FI_ENOSYS;
	ret = ops->cq_open(domain, attr, cq, context);

	if (!ret) {
		struct fi_ops_cq *mine = malloc(sizeof(*mine));

		if (objs[d].counted)
			COUNT(cqs, 1);
		*mine = *(*cq)->ops;
		obj_add(*cq, (*cq)->ops, K_CQ, api_of(domain));
		mine->read = cq_read;
		(*cq)->ops = mine;
	}
	return ret;
}

static void copy_env(char *dst, size_t len, const char *name)
{
	const char *v = getenv(name);

	snprintf(dst, len, "%s", v ? v : "(unset)");
}

static int fab_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
		      void *context)
{
	const struct fi_ops_fabric *ops = objs[obj_find(fabric)].ops;
	char *shown = unmask(info);
	int ret;

	depth++;
	ret = ops->domain(fabric, info, dom, context);
	depth--;

	remask(info, shown);
	if (ret)
		return ret;
	if (counted(info) && __atomic_add_fetch(&counts.domains, 1, __ATOMIC_RELAXED) == 1) {
		copy_env(counts.env_shm, sizeof(counts.env_shm), "FI_EFA_ENABLE_SHM_TRANSFER");
		copy_env(counts.env_fork_safe, sizeof(counts.env_fork_safe), "FI_EFA_FORK_SAFE");
	}
	{
		struct fi_ops_domain *mine = malloc(sizeof(*mine));

		*mine = *(*dom)->ops;
		int k = obj_add(*dom, (*dom)->ops, K_DOMAIN, api_of(fabric));

		objs[k].counted = counted(info);
		mine->endpoint = dom_endpoint;
		mine->av_open = dom_av_open;
		mine->cq_open = dom_cq_open;
		(*dom)->ops = mine;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The exported calls                                                     */

__attribute__((visibility("default"))) uint32_t fi_version(void)
{
	static uint32_t (*fn)(void);
	const char *v = getenv("RDPS_OFI_SHIM_VERSION");
	unsigned maj, min;

	if (v && sscanf(v, "%u.%u", &maj, &min) == 2)
		return FI_VERSION(maj, min);
	if (!fn)
		fn = (uint32_t (*)(void))real("fi_version", "FABRIC_1.0");
	return fn();
}

__attribute__((visibility("default"))) int fi_getinfo(uint32_t version, const char *node,
						       const char *service, uint64_t flags,
						       const struct fi_info *hints,
						       struct fi_info **info)
{
	static int (*fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
			 struct fi_info **);
	static uint32_t (*ver)(void);
	uint32_t lib;
	int ret;

	if (!fn) {
		fn = (int (*)(uint32_t, const char *, const char *, uint64_t,
			      const struct fi_info *, struct fi_info **))real("fi_getinfo",
									   "FABRIC_1.3");
		ver = (uint32_t (*)(void))real("fi_version", "FABRIC_1.0");
	}
	if (depth)
		return fn(version, node, service, flags, hints, info);
	pthread_mutex_lock(&lock);
	counts.getinfo++;
	if (version > counts.api_max)
		counts.api_max = version;
	if (!counts.api_min || version < counts.api_min)
		counts.api_min = version;
	last_api = version;
	pthread_mutex_unlock(&lock);
	/* The library answers only what it knows. */
	lib = ver();
	depth++;
	if (as_efa() && hints && hints->fabric_attr && hints->fabric_attr->prov_name &&
	    !strcmp(hints->fabric_attr->prov_name, "efa") && getenv("FI_PROVIDER")) {
		/* "efa" asked for: the provider under the mask. */
		struct fi_info *h = fi_dupinfo(hints);

		free(h->fabric_attr->prov_name);
		h->fabric_attr->prov_name = strdup(getenv("FI_PROVIDER"));
		ret = fn(version > lib ? lib : version, node, service, flags, h, info);
		fi_freeinfo(h);
	} else {
		ret = fn(version > lib ? lib : version, node, service, flags, hints, info);
	}
	depth--;
	if (!ret && as_efa()) {
		for (struct fi_info *i = *info; i; i = i->next) {
			if (!i->fabric_attr || !i->fabric_attr->prov_name)
				continue;
			if (!real_prov)
				real_prov = strdup(i->fabric_attr->prov_name);
			free(i->fabric_attr->prov_name);
			i->fabric_attr->prov_name = strdup("efa");
		}
	}
	return ret;
}

__attribute__((visibility("default"))) int fi_fabric(struct fi_fabric_attr *attr,
						     struct fid_fabric **fabric, void *context)
{
	static int (*fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	char *shown = NULL;
	int ret;

	if (!fn)
		fn = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))
			real("fi_fabric", "FABRIC_1.1");
	if (depth)
		return fn(attr, fabric, context);
	if (attr && attr->prov_name && real_prov && !strcmp(attr->prov_name, "efa")) {
		shown = attr->prov_name;
		attr->prov_name = real_prov;
	}
	depth++;
	ret = fn(attr, fabric, context);
	depth--;
	if (shown)
		attr->prov_name = shown;
	if (ret)
		return ret;
	if (!attr || !attr->prov_name || !strcmp(attr->prov_name, "efa") ||
	    strstr(attr->prov_name, "ofi_rxm"))
		COUNT(fabrics, 1);
	{
		struct fi_ops_fabric *mine = malloc(sizeof(*mine));

		*mine = *(*fabric)->ops;
		/* The fabric's API is what fi_getinfo was asked last (the
		 * library may know less: the asked one is what rdps means). */
		obj_add(*fabric, (*fabric)->ops, K_FABRIC, last_api);
		mine->domain = fab_domain;
		(*fabric)->ops = mine;
	}
	return 0;
}

/* A server's nap: one descriptor, 1 ms (ofi_server.c's OFI_IDLE_SLEEP_MS). */
__attribute__((visibility("default"))) int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	static int (*fn)(struct pollfd *, nfds_t, int);

	if (!fn)
		fn = (int (*)(struct pollfd *, nfds_t, int))real("poll", NULL);
	if (nfds == 1 && timeout == 1)
		COUNT(naps, 1);
	return fn(fds, nfds, timeout);
}

__attribute__((visibility("default"))) enum ibv_fork_status ibv_is_fork_initialized(void)
{
	static enum ibv_fork_status (*fn)(void);
	const char *v = getenv("RDPS_OFI_SHIM_FORK");

	if (v && !strcmp(v, "disabled"))
		return counts.fork_init ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
	if (!fn)
		fn = (enum ibv_fork_status (*)(void))real("ibv_is_fork_initialized", NULL);
	return fn();
}

__attribute__((visibility("default"))) int ibv_fork_init(void)
{
	static int (*fn)(void);

	COUNT(fork_init, 1);
	if (!fn)
		fn = (int (*)(void))real("ibv_fork_init", NULL);
	return fn();
}

/* A process the tests started writes what it saw when it exits. */
__attribute__((destructor)) static void shim_write(void)
{
	const char *dir = getenv("RDPS_OFI_SHIM_OUT");
	char path[4096];
	FILE *f;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "api_max %u\napi_min %u\ngetinfo %llu\nfabrics %llu\ndomains %llu\n"
		"endpoints %llu\navs %llu\nav_inserts %llu\ncqs %llu\ncq_reads %llu\n"
		"device_rdma_asks %llu\ndevice_rdma_refused %llu\nemulated_read_asks %llu\n"
		"emulated_read_yes %llu\nep_tx_size %llu\nep_rx_size %llu\nnaps %llu\n"
		"fork_init %llu\nenv_shm %s\nenv_fork_safe %s\n",
		counts.api_max, counts.api_min, (unsigned long long)counts.getinfo,
		(unsigned long long)counts.fabrics, (unsigned long long)counts.domains,
		(unsigned long long)counts.endpoints, (unsigned long long)counts.avs,
		(unsigned long long)counts.av_inserts, (unsigned long long)counts.cqs,
		(unsigned long long)counts.cq_reads, (unsigned long long)counts.device_rdma_asks,
		(unsigned long long)counts.device_rdma_refused,
		(unsigned long long)counts.emulated_read_asks,
		(unsigned long long)counts.emulated_read_yes,
		(unsigned long long)counts.ep_tx_size, (unsigned long long)counts.ep_rx_size,
		(unsigned long long)counts.naps, (unsigned long long)counts.fork_init,
		counts.env_shm[0] ? counts.env_shm : "-",
		counts.env_fork_safe[0] ? counts.env_fork_safe : "-");
	fclose(f);
}
