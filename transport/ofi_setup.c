// SPDX-License-Identifier: MIT
/*
 * ofi backend: the provider, and an RDM endpoint with what it needs
 * (fabric, domain, address vector, completion queue), registered buffers,
 * and the small helpers both sides share.
 *
 * Which provider: --ofi-provider (RDPS_OFI_PROVIDER), else efa where
 * libfabric sees an EFA device, else libfabric's choice within FI_PROVIDER
 * (e.g. FI_PROVIDER="tcp;ofi_rxm" over any IP network). Nothing here is
 * specific to one provider but two facts about efa: its messages are best
 * kept to one packet, and whether its READs are the device's own
 * (efadv_query_device) or emulated by the provider through the server's
 * CPU, in which case pulls are two-sided anyway.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <infiniband/verbs.h>
#ifdef RDPS_HAVE_EFADV
#include <infiniband/efadv.h>
#endif

#include "rdps/common.h"
#include "ofi.h"
#include "verbs.h"

const char *ofi_strerror(int ret)
{
	return fi_strerror(ret < 0 ? -ret : ret);
}

void ofi_cq_errtext(struct fid_cq *cq, const struct fi_cq_err_entry *e, char *buf, size_t len)
{
	const char *prov = fi_cq_strerror(cq, e->prov_errno, e->err_data, NULL, 0);

	snprintf(buf, len, "%s (provider error %d: %s)", fi_strerror(e->err), e->prov_errno,
		 prov ? prov : "?");
}

uint64_t ofi_cookie(const struct rdps_secret *secret, uint64_t session)
{
	uint8_t mac[RDPS_MAC_LEN];
	uint64_t v;

	if (!secret || !secret->len)
		return session;
	/* The token travels in clear on the control connection; only a peer
	 * that knows the secret can turn it into messages the server takes. */
	rdps_auth_mac(secret, OFI_COOKIE_LABEL, &session, sizeof(session), NULL, 0, NULL, 0, mac);
	memcpy(&v, mac, sizeof(v));
	return v;
}

size_t ofi_msg_size(const char *prov, size_t max)
{
	const char *env = getenv("RDPS_OFI_MSG_BYTES");
	size_t size = prov && !strcmp(prov, "efa") ? OFI_EFA_MSG_SIZE : OFI_MSG_SIZE;

	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);

		if (*end || v < OFI_MSG_MIN || v > OFI_MSG_MAX)
			rdps_warn("RDPS_OFI_MSG_BYTES=%s is not a size from %u to %u bytes; using %zu",
				  env, OFI_MSG_MIN, OFI_MSG_MAX, size);
		else
			size = (size_t)v;
	}
	return size < max ? size : max;
}

uint64_t ofi_busy_poll_ns(void)
{
	const char *env = getenv("RDPS_OFI_BUSY_POLL_US");
	unsigned long long us;
	char *end;

	if (!env || !*env)
		return OFI_BUSY_POLL_US * 1000ull;
	us = strtoull(env, &end, 10);
	if (*end || us > OFI_BUSY_POLL_MAX_US) {
		rdps_warn("RDPS_OFI_BUSY_POLL_US=%s is not a number of microseconds from 0 to %u; "
			  "using %u", env, OFI_BUSY_POLL_MAX_US, OFI_BUSY_POLL_US);
		return OFI_BUSY_POLL_US * 1000ull;
	}
	return us * 1000ull;
}

/*
 * verbs;ofi_rxm: rxm gives each endpoint one verbs CQ for all its
 * connections, sized (FI_OFI_RXM_MSG_RX_SIZE + FI_OFI_RXM_MSG_TX_SIZE) x
 * FI_UNIVERSE_SIZE entries, with a shared receive context (FI_OFI_RXM_
 * USE_SRX) rx + tx x FI_UNIVERSE_SIZE (rxm_ep_msg_cq_open). With
 * libfabric 1.17's defaults, (128 + 128) x 256 = 65,536: more than soft-
 * RoCE (rxe) takes (max_cqe 32,767), so ibv_create_cq fails with EINVAL
 * ("Unable to create verbs CQ") and so does fi_enable. Nothing in the
 * application's own CQ, wait object, threading or sizes changes that
 * (rxm's CQ is its own). libfabric reads FI_UNIVERSE_SIZE once, when it
 * starts: so, before rdps' first libfabric call, where the provider named
 * takes verbs and FI_UNIVERSE_SIZE is unset, it is set to what fits the
 * smallest max_cqe among the verbs devices (127 on rxe), and only where
 * the defaults would not fit (real HCAs take millions: unchanged).
 *
 * A smaller universe does not limit the peers (rxm connects to as many as
 * the address vector holds); it bounds the completions the CQ can hold at
 * once, and rdps' credits bound those far lower: a server has at most its
 * receive pool (OFI_POOL_MAX_SLOTS) and control sends (OFI_CTL_SLOTS)
 * outstanding, a client its READ ring and push buffers.
 */
#define OFI_RXM_MSG_SIZE_DEF 128       /* FI_OFI_RXM_MSG_TX/RX_SIZE's default */
#define OFI_RXM_SRX_SIZE_DEF 4096      /* ... FI_OFI_RXM_MSG_RX_SIZE's with a shared rx */
#define OFI_UNIVERSE_DEF_MAX 1024      /* the largest FI_UNIVERSE_SIZE default (1.17: 256) */

static char universe_note[160];

static bool names_verbs(const char *prov)
{
	return prov && *prov && *prov != '^' && strstr(prov, "verbs");
}

static size_t env_size(const char *name, size_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return def;
	n = strtoull(v, &end, 10);
	return *end || !n ? def : (size_t)n;
}

static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") ||
		     !strcasecmp(v, "on") || !strcasecmp(v, "y"));
}

/* The smallest max_cqe of the verbs devices, or 0 if none answers. */
static int verbs_min_max_cqe(char *dev, size_t devlen)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int min = 0;

	for (int i = 0; list && list[i]; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr a;

		if (!ctx)
			continue;
		if (!ibv_query_device(ctx, &a) && a.max_cqe > 0 && (!min || a.max_cqe < min)) {
			min = a.max_cqe;
			snprintf(dev, devlen, "%s", ibv_get_device_name(list[i]));
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	return min;
}

static void universe_fit(void)
{
	const char *named = getenv("RDPS_OFI_PROVIDER"), *fip = getenv("FI_PROVIDER");
	const char *env = getenv("FI_UNIVERSE_SIZE");
	bool srx = env_true("FI_OFI_RXM_USE_SRX");
	size_t tx = env_size("FI_OFI_RXM_MSG_TX_SIZE", OFI_RXM_MSG_SIZE_DEF);
	size_t rx = env_size("FI_OFI_RXM_MSG_RX_SIZE", srx ? OFI_RXM_SRX_SIZE_DEF
							   : OFI_RXM_MSG_SIZE_DEF);
	size_t fixed = srx ? rx : 0, per = srx ? tx : tx + rx, fit;
	char dev[64] = "?", num[24];
	int max_cqe;

	if (!names_verbs(named && *named ? named : fip))
		return;
	if (env && *env) {
		snprintf(universe_note, sizeof(universe_note), "FI_UNIVERSE_SIZE=%s (set outside)",
			 env);
		return;
	}
	max_cqe = verbs_min_max_cqe(dev, sizeof(dev));
	if (max_cqe <= 0 || (size_t)max_cqe <= fixed + per)
		return; /* no device, or too small for even one peer: the error says so */
	fit = ((size_t)max_cqe - fixed) / per;
	if (fit >= OFI_UNIVERSE_DEF_MAX)
		return;
	snprintf(num, sizeof(num), "%zu", fit);
	setenv("FI_UNIVERSE_SIZE", num, 0);
	snprintf(universe_note, sizeof(universe_note),
		 "FI_UNIVERSE_SIZE=%zu, so that rxm's verbs CQ (%zu + %zu x %zu entries) fits %s's "
		 "max_cqe %d", fit, fixed, per, fit, dev, max_cqe);
	rdps_dbg("ofi: %s", universe_note);
}

/*
 * efa's environment, before libfabric reads it:
 * - shm off (FI_EFA_ENABLE_SHM_TRANSFER=0, as aws-ofi-nccl does): with its
 *   shm peer endpoint efa has no wait object, and shm's copies are
 *   progress no completion tells of; processes of one host then talk
 *   through the device, which loops back.
 * - fork safety (FI_EFA_FORK_SAFE=1) where the kernel does not copy
 *   registered pages at fork (before 5.13: libibverbs says fork support
 *   must be asked for): trainers fork DataLoader workers, and efa aborts at
 *   a fork without it.
 * A value the user set is kept.
 */
static void efa_env(void)
{
	/* Fork support is needed unless the kernel copies registered pages
	 * at fork (5.13 on). */
	bool fork_needed = ibv_is_fork_initialized() != IBV_FORK_UNNEEDED;

	/* libfabric's verbs providers register through libibverbs too. */
	verbs_fork_init();
	if (setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 0))
		rdps_dbg("ofi: cannot set FI_EFA_ENABLE_SHM_TRANSFER");
	if (fork_needed && setenv("FI_EFA_FORK_SAFE", "1", 0))
		rdps_dbg("ofi: cannot set FI_EFA_FORK_SAFE");
}

static void env_once(void)
{
	efa_env();
	universe_fit();
}

/* Before libfabric's first call in the process (it reads its environment
 * then). */
static void ofi_env_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, env_once);
}

uint32_t ofi_api_version(void)
{
	uint32_t v = fi_version();

	/* The newest API the library offers: below 1.18 efa keeps device
	 * RDMA off on its first generations, so READs would be emulated. */
	return FI_VERSION_GE(v, OFI_API_MIN) ? v : OFI_API_MIN;
}

static struct fi_info *base_hints(const char *prov, bool rma)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	/* Tagged: a two-sided pull's answer lands in the slot posted for it. */
	h->caps = FI_MSG | FI_TAGGED | (rma ? FI_RMA | FI_READ | FI_REMOTE_READ : 0);
	/* Contexts are tagged integers (ofi.h): no FI_CONTEXT mode. */
	h->mode = 0;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	/* A client connection is one thread's (getinfo() asks more for a
	 * server). */
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov && *prov) {
		h->fabric_attr->prov_name = strdup(prov);
		if (!h->fabric_attr->prov_name) {
			fi_freeinfo(h);
			return NULL;
		}
	}
	return h;
}

/* Is there an RDM endpoint of this provider at all? */
static bool provider_present(const char *prov, char *dev, size_t devlen)
{
	struct fi_info *h, *info = NULL;
	bool ok;

	ofi_env_init();
	h = base_hints(prov, false);
	if (!h)
		return false;
	ok = !fi_getinfo(ofi_api_version(), NULL, NULL, 0, h, &info) && info;
	if (ok && dev)
		snprintf(dev, devlen, "%s", info->domain_attr->name ? info->domain_attr->name : "?");
	fi_freeinfo(info);
	fi_freeinfo(h);
	return ok;
}

static int getinfo(const char *prov, const char *node, bool rma, bool server,
		   struct fi_info **info);

bool ofi_rma_provider_available(void)
{
	char prov[OFI_PROV_MAX], why[320];
	struct fi_info *info = NULL;

	if (ofi_provider_pick(prov, sizeof(prov), why, sizeof(why)) ||
	    getinfo(prov, NULL, true, false, &info))
		return false;
	fi_freeinfo(info);
	return true;
}

bool ofi_efa_present(char *dev, size_t len)
{
	return provider_present("efa", dev, len);
}

int ofi_provider_pick(char *name, size_t len, char *why, size_t whylen)
{
	const char *env = getenv("RDPS_OFI_PROVIDER"), *fip = getenv("FI_PROVIDER");
	char dev[64];

	ofi_env_init();
	if (env && *env) {
		snprintf(name, len, "%s", env);
		snprintf(why, whylen, "provider %s (--ofi-provider)", env);
		return 0;
	}
	if (provider_present("efa", dev, sizeof(dev))) {
		snprintf(name, len, "efa");
		snprintf(why, whylen, "provider efa (EFA device %s)", dev);
		return 0;
	}
	if (fip && *fip) {
		name[0] = '\0';
		snprintf(why, whylen, "libfabric's choice within FI_PROVIDER=%s", fip);
		return 0;
	}
	snprintf(why, whylen, "libfabric sees no EFA device, and no provider was named: give "
		 "--ofi-provider NAME (fi_info -l lists them; 'tcp;ofi_rxm' runs over any IP "
		 "network) or set FI_PROVIDER");
	return -ENODEV;
}

/* fi_getinfo for an RDM endpoint, bound to node where the provider takes
 * an IP address for one (sockaddr providers), else anywhere (efa). */
static int getinfo(const char *prov, const char *node, bool rma, bool server,
		   struct fi_info **info)
{
	struct fi_info *h;
	int ret = -FI_ENODATA;

	ofi_env_init();
	h = base_hints(prov, rma);
	if (!h)
		return -ENOMEM;
	/* A server's progress thread uses the endpoint while its other
	 * threads register and deregister tables (add_region): the domain
	 * must take calls from several threads at once. */
	if (server)
		h->domain_attr->threading = FI_THREAD_SAFE;
	if (node)
		ret = fi_getinfo(ofi_api_version(), node, NULL, FI_SOURCE, h, info);
	if (ret)
		ret = fi_getinfo(ofi_api_version(), NULL, NULL, 0, h, info);
	fi_freeinfo(h);
	return ret;
}

/* efa: READs are the device's own only where it does RDMA READ; else the
 * provider emulates them through the target's CPU (pulls might as well
 * be two-sided, which say so). */
static void efa_read_check(struct ofi_ep *e)
{
	const char *env = getenv("FI_EFA_USE_DEVICE_RDMA");

	if (env && (!strcmp(env, "0") || !strcasecmp(env, "false") || !strcasecmp(env, "no"))) {
		e->rma = false;
		e->two_sided_why = RDPS_TWO_SIDED_ASKED;
		snprintf(e->why_two_sided, sizeof(e->why_two_sided),
			 "FI_EFA_USE_DEVICE_RDMA=%s turns the device's RDMA READ off", env);
		return;
	}
#ifdef RDPS_HAVE_EFADV
	{
		struct ibv_device **list = ibv_get_device_list(NULL);
		char name[64];
		size_t n;
		bool found = false;

		/* The domain is the device's name with "-rdm" appended. */
		snprintf(name, sizeof(name), "%s", e->dev);
		n = strlen(name);
		if (n > 4 && !strcmp(name + n - 4, "-rdm"))
			name[n - 4] = '\0';
		for (int i = 0; list && list[i]; i++) {
			struct efadv_device_attr a;
			struct ibv_context *ctx;

			if (strcmp(ibv_get_device_name(list[i]), name))
				continue;
			found = true;
			ctx = ibv_open_device(list[i]);
			memset(&a, 0, sizeof(a));
			if (ctx && !efadv_query_device(ctx, &a, sizeof(a)) &&
			    !(a.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)) {
				e->rma = false;
				e->two_sided_why = RDPS_TWO_SIDED_NO_DEVICE_READ;
				snprintf(e->why_two_sided, sizeof(e->why_two_sided),
					 "EFA device %s has no RDMA READ (efadv_query_device: an "
					 "instance type without it; p4d, p5 and trn1 have it)", name);
			}
			if (ctx)
				ibv_close_device(ctx);
		}
		if (list)
			ibv_free_device_list(list);
		if (!found)
			rdps_dbg("ofi: no verbs device named %s: its RDMA READ was not checked", name);
	}
#else
	rdps_dbg("ofi: built without efadv.h: whether EFA device %s does RDMA READ was not "
		 "checked", e->dev);
#endif
}

struct fi_info *ofi_pick_domain(struct fi_info *list, uint32_t index, uint32_t *ndomains)
{
	struct fi_info *pick = list;
	uint32_t n = 0;

	/* Count distinct domain names, in list order (a domain may appear
	 * once per variant of the provider). */
	for (struct fi_info *i = list; i; i = i->next) {
		bool seen = false;

		for (struct fi_info *j = list; j != i && !seen; j = j->next)
			seen = j->domain_attr->name && i->domain_attr->name &&
			       !strcmp(j->domain_attr->name, i->domain_attr->name);
		n += !seen;
	}
	*ndomains = n;
	if (n <= 1)
		return list;
	index %= n;
	for (struct fi_info *i = list; i; i = i->next) {
		bool seen = false;

		for (struct fi_info *j = list; j != i && !seen; j = j->next)
			seen = j->domain_attr->name && i->domain_attr->name &&
			       !strcmp(j->domain_attr->name, i->domain_attr->name);
		if (seen)
			continue;
		if (!index--) {
			pick = i;
			break;
		}
	}
	return pick;
}

/* Takes entry pick out of the list (frees the rest). */
static struct fi_info *keep_one(struct fi_info *list, struct fi_info *pick)
{
	struct fi_info *one = fi_dupinfo(pick);

	fi_freeinfo(list);
	return one;
}

static bool env_false(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
		     !strcasecmp(v, "off") || !strcasecmp(v, "n"));
}

/* efa, before fi_enable: device RDMA for READs (API >= 1.18 takes the
 * option; FI_EFA_USE_DEVICE_RDMA=0 wins over it, so it is not asked then).
 * A refusal is no error: whether READs are emulated is read back after
 * fi_enable, and decides. */
static void efa_ask_device_rdma(struct ofi_ep *e)
{
	bool on = true;
	int ret;

	if (strcmp(e->prov, "efa") || !e->rma || env_false("FI_EFA_USE_DEVICE_RDMA") ||
	    !FI_VERSION_GE(e->api, FI_VERSION(1, 18)))
		return;
	ret = (int)fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, OFI_OPT_EFA_USE_DEVICE_RDMA, &on,
			     sizeof(on));
	e->device_rdma = ret ? ret : 1;
	if (ret)
		rdps_dbg("ofi: efa refused device RDMA (FI_OPT_EFA_USE_DEVICE_RDMA): %s",
			 ofi_strerror(ret));
}

/* After fi_enable: whether the provider emulates READs (efa says so;
 * others do not know the option). Emulated, a READ is served by the
 * target's progress loop: pulls go two-sided instead, which costs the
 * server's CPU less. */
static void read_emulation_check(struct ofi_ep *e)
{
	bool emulated = false;
	size_t len = sizeof(emulated);
	int ret;

	if (!e->rma)
		return;
	ret = (int)fi_getopt(&e->ep->fid, FI_OPT_ENDPOINT, OFI_OPT_EFA_EMULATED_READ, &emulated,
			     &len);
	if (ret || !emulated)
		return;
	e->rma = false;
	e->emulated_read = true;
	e->two_sided_why = RDPS_TWO_SIDED_EMULATED;
	snprintf(e->why_two_sided, sizeof(e->why_two_sided),
		 "provider %s emulates RMA reads on %s (FI_OPT_EFA_EMULATED_READ: %s), and a "
		 "two-sided pull costs the server less than an emulated read",
		 e->prov, e->dev,
		 strcmp(e->prov, "efa") ? "the provider says so"
		 : e->device_rdma < 0 ? "the device refused device RDMA"
		 : env_false("FI_EFA_USE_DEVICE_RDMA") ? "FI_EFA_USE_DEVICE_RDMA=0 turns device RDMA off"
		 : e->device_rdma ? "device RDMA was asked for and not granted"
		 : !FI_VERSION_GE(e->api, FI_VERSION(1, 18))
			 ? "libfabric below API 1.18 keeps device RDMA off on this EFA generation"
			 : "the device does no RDMA READ");
}

/* The endpoint's queues: what w needs, as far as the provider goes. */
static void size_queues(struct fi_info *info, const struct ofi_ep_want *w)
{
	if (w->tx && (!info->tx_attr->size || w->tx < info->tx_attr->size))
		info->tx_attr->size = w->tx;
	if (w->rx && (!info->rx_attr->size || w->rx < info->rx_attr->size))
		info->rx_attr->size = w->rx;
}

int ofi_ep_open(struct ofi_ep *e, const char *node, const struct ofi_ep_want *w, char *err,
		size_t errlen)
{
	const char *pulls = getenv("RDPS_OFI_PULLS");
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_FD };
	struct fi_av_attr ava = { .type = FI_AV_UNSPEC, .count = w->av ? w->av : 4 };
	char prov[OFI_PROV_MAX], why[320];
	struct fi_info *list = NULL;
	bool rma = true;
	int ret;

	memset(e, 0, sizeof(*e));
	e->cq_fd = -1;
	e->next_key = 1;
	e->api = ofi_api_version();
	ret = ofi_provider_pick(prov, sizeof(prov), why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s", why);
		return ret;
	}
	if (pulls && !strcmp(pulls, "msg")) {
		rma = false;
		e->two_sided_why = RDPS_TWO_SIDED_ASKED;
		snprintf(e->why_two_sided, sizeof(e->why_two_sided), "RDPS_OFI_PULLS=msg");
	}
	ret = getinfo(prov, node, rma, w->server, &list);
	if (ret && rma) {
		/* No FI_RMA + FI_READ: pulls go two-sided. */
		ret = getinfo(prov, node, false, w->server, &list);
		if (!ret) {
			rma = false;
			e->two_sided_why = RDPS_TWO_SIDED_NO_RMA;
			snprintf(e->why_two_sided, sizeof(e->why_two_sided),
				 "provider %s has no FI_RMA/FI_READ for RDM endpoints",
				 list->fabric_attr->prov_name);
		}
	}
	if (ret) {
		snprintf(err, errlen, "libfabric has no reliable-datagram endpoint (FI_EP_RDM, "
			 "FI_MSG, FI_TAGGED) for %s: %s (fi_info -l lists the providers)", why,
			 ofi_strerror(ret));
		return ret == -FI_ENODATA ? -ENODEV : ret;
	}
	/* A host's devices (efa: one domain each; p4d has 4, p5 32) are
	 * spread over its processes by their index. */
	e->info = keep_one(list, ofi_pick_domain(list, w->index, &e->ndomains));
	if (!e->info)
		return -ENOMEM;
	e->rma = rma;
	snprintf(e->prov, sizeof(e->prov), "%s", e->info->fabric_attr->prov_name);
	snprintf(e->dev, sizeof(e->dev), "%s",
		 e->info->domain_attr->name ? e->info->domain_attr->name : "?");
	e->mr_mode = e->info->domain_attr->mr_mode;
	size_queues(e->info, w);
	e->tx_size = e->info->tx_attr->size ? e->info->tx_attr->size : 64;
	e->rx_size = e->info->rx_attr->size ? e->info->rx_attr->size : 64;
	e->max_rma = e->info->ep_attr->max_msg_size;
	if (e->max_rma > (1u << 30))
		e->max_rma = 1u << 30;
	e->msg_size = ofi_msg_size(e->prov, e->info->ep_attr->max_msg_size);
	if (e->rma && !strcmp(e->prov, "efa"))
		efa_read_check(e);

	ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL);
	if (!ret)
		ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
	if (ret) {
		snprintf(err, errlen, "opening libfabric's %s (%s) failed: %s", e->prov, e->dev,
			 ofi_strerror(ret));
		return ret;
	}
	cqa.size = w->tx + w->rx + 64;
	/* A wait descriptor where the provider has one (efa 1.17 has none). */
	ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL);
	if (ret) {
		cqa.wait_obj = FI_WAIT_NONE;
		ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL);
	}
	if (ret) {
		cqa.size = 0; /* the provider's default */
		ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL);
	}
	if (ret) {
		snprintf(err, errlen, "opening a completion queue (%s) failed: %s", e->prov,
			 ofi_strerror(ret));
		return ret;
	}
	if (cqa.wait_obj == FI_WAIT_FD && fi_control(&e->cq->fid, FI_GETWAIT, &e->cq_fd))
		e->cq_fd = -1;
	ret = fi_av_open(e->domain, &ava, &e->av, NULL);
	if (!ret)
		ret = fi_endpoint(e->domain, e->info, &e->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(e->ep, &e->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret) {
		efa_ask_device_rdma(e);
		ret = fi_enable(e->ep);
	}
	if (ret) {
		snprintf(err, errlen, "creating a %s endpoint failed: %s%s%s%s", e->prov,
			 ofi_strerror(ret),
			 ret == -FI_EINVAL && names_verbs(e->prov)
				 ? " (rxm sizes its verbs CQ at (FI_OFI_RXM_MSG_RX_SIZE + "
				   "FI_OFI_RXM_MSG_TX_SIZE) x FI_UNIVERSE_SIZE entries: more than the "
				   "device's max_cqe (ibv_devinfo -v)? set FI_UNIVERSE_SIZE lower"
				 : "",
			 universe_note[0] ? "; " : "", universe_note);
		return ret;
	}
	read_emulation_check(e);
	e->addrlen = sizeof(e->addr);
	ret = fi_getname(&e->ep->fid, e->addr, &e->addrlen);
	if (ret) {
		snprintf(err, errlen, "reading the %s endpoint's address failed: %s%s", e->prov,
			 ofi_strerror(ret), ret == -FI_ETOOSMALL ? " (longer than rdps allows)" : "");
		return ret;
	}
	return 0;
}

int ofi_pull_probe(uint32_t index, char *why, size_t whylen)
{
	struct ofi_ep_want w = { .index = index, .tx = 64, .rx = 64, .av = 4 };
	struct ofi_ep e;
	int ret = ofi_ep_open(&e, NULL, &w, why, whylen);

	if (!ret) {
		ret = e.rma;
		if (e.rma)
			snprintf(why, whylen, "provider %s on %s (libfabric API %u.%u): %s", e.prov,
				 e.dev, FI_MAJOR(e.api), FI_MINOR(e.api),
				 strcmp(e.prov, "efa") ? "it has RMA reads and does not say they are "
							 "emulated"
				 : e.device_rdma > 0 ? "device RDMA asked for and on; READs are the "
						       "device's own (FI_OPT_EFA_EMULATED_READ: no)"
						     : "READs are the device's own "
						       "(FI_OPT_EFA_EMULATED_READ: no)");
		else
			snprintf(why, whylen, "%s", e.why_two_sided);
	}
	ofi_ep_close(&e);
	return ret;
}

void ofi_ep_close(struct ofi_ep *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
	e->cq_fd = -1;
}

static const char *memlock_hint(int err)
{
	if (err == ENOMEM || err == EPERM || err == EAGAIN || err == FI_ENOMEM)
		return " (the memory-lock limit is probably too low: run 'ulimit -l unlimited', "
		       "set LimitMEMLOCK=infinity for a systemd service, or add "
		       "'* - memlock unlimited' to /etc/security/limits.conf)";
	return "";
}

int ofi_mr_reg(struct ofi_ep *e, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
	       char *err, size_t errlen, const char *what)
{
	/* Without FI_MR_PROV_KEY the application picks the keys, unique in the
	 * domain. */
	uint64_t key = e->mr_mode & FI_MR_PROV_KEY ? 0 : e->next_key++;
	int ret;

	*mr = NULL;
	ret = fi_mr_reg(e->domain, buf, len, access, 0, key, 0, mr, NULL);
	if (!ret && (e->mr_mode & FI_MR_ENDPOINT)) {
		ret = fi_mr_bind(*mr, &e->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*mr);
	}
	if (ret) {
		if (*mr)
			fi_close(&(*mr)->fid);
		*mr = NULL;
		snprintf(err, errlen, "registering the %s (%zu KiB) with %s failed: %s%s", what,
			 len >> 10, e->prov, ofi_strerror(ret), memlock_hint(-ret));
	}
	return ret;
}

int ofi_alloc_registered(struct ofi_ep *e, size_t len, uint64_t access, char **buf,
			 struct fid_mr **mr, char *err, size_t errlen, const char *what)
{
	int ret = posix_memalign((void **)buf, 4096, len);

	*mr = NULL;
	if (ret) {
		*buf = NULL;
		snprintf(err, errlen, "allocating the %s (%zu KiB) failed", what, len >> 10);
		return -ret;
	}
	memset(*buf, 0, len);
	/* Local buffers need a registration only where the provider says so. */
	if (!(access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) && !(e->mr_mode & FI_MR_LOCAL))
		return 0;
	ret = ofi_mr_reg(e, *buf, len, access, mr, err, errlen, what);
	if (ret) {
		free(*buf);
		*buf = NULL;
	}
	return ret;
}

int ofi_queue_probe(uint32_t servers, struct ofi_queues *q, char *why, size_t whylen)
{
	struct fi_info *info = NULL;
	struct ofi_ep_want w;
	char prov[OFI_PROV_MAX];
	int ret;

	memset(q, 0, sizeof(*q));
	ret = ofi_provider_pick(prov, sizeof(prov), why, whylen);
	if (ret)
		return ret;
	ret = getinfo(prov, NULL, true, false, &info);
	if (ret)
		ret = getinfo(prov, NULL, false, false, &info);
	if (ret) {
		snprintf(why, whylen, "libfabric has no reliable-datagram endpoint for %s: %s",
			 prov[0] ? prov : "FI_PROVIDER's choice", ofi_strerror(ret));
		return ret == -FI_ENODATA ? -ENODEV : ret;
	}
	ofi_group_want(servers ? servers : 1, 0, &w);
	snprintf(q->prov, sizeof(q->prov), "%s", info->fabric_attr->prov_name);
	snprintf(q->dev, sizeof(q->dev), "%s",
		 info->domain_attr->name ? info->domain_attr->name : "?");
	q->tx_def = info->tx_attr->size;
	q->rx_def = info->rx_attr->size;
	q->tx = q->tx_def && q->tx_def < w.tx ? q->tx_def : w.tx;
	q->rx = q->rx_def && q->rx_def < w.rx ? q->rx_def : w.rx;
	/* efa's packets are one MTU (~8.9 KiB): its eager message size. */
	q->pkt = !strcmp(q->prov, "efa") ? OFI_EFA_MSG_SIZE
					 : ofi_msg_size(q->prov, info->ep_attr->max_msg_size);
	fi_freeinfo(info);
	return 0;
}
