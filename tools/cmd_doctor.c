// SPDX-License-Identifier: MIT
/*
 * rdps doctor: a preflight of this host for a job. One line per check,
 * "ok", "WARN" or "FAIL", each failure and warning with its fix; exits 1 if
 * a check failed. What each check looks at is in usage() below.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <liburing.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifdef RDPS_HAVE_EFADV
#include <infiniband/efadv.h>
#endif

#include "commands.h"
#include "launch.h"
#include "rdps/common.h"
#include "rdps/ipconfig.h"
#include "rdps/kvstore.h"
#include "rdps/partition.h"
#include "rdps/trainer.h"
#include "rdps/transport.h"
#include "transport/ofi.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rdps doctor [--ip_config FILE] [--transport auto|tcp|verbs|ofi]\n"
"                   [--ofi-provider NAME]\n"
"                   [--partition PDIR --model_name M --hidden_dim D] [--clients N]\n"
"                   [--servers S] [--timeout SEC]\n"
"\n"
"Checks this host for a job, one line per check: ok, WARN or FAIL with the fix.\n"
"Exits 1 if a check failed (warnings do not). Run it on every host of a job.\n"
"\n"
"  rdma        RDMA devices (/sys/class/infiniband); none is a warning with\n"
"              --transport auto (jobs fall back to TCP), a failure with verbs\n"
"  efa         EFA devices (AWS; driver efa) and whether each does RDMA READ\n"
"              (efadv_query_device): without it the ofi transport's pulls are\n"
"              two-sided, served by the servers' CPUs; a failure with ofi on efa\n"
"  ofi         the reliable-datagram providers libfabric sees (within\n"
"              FI_PROVIDER if set) and which one the ofi transport would take\n"
"              (--ofi-provider, else efa); a failure with ofi if there is none\n"
"  pulls       ofi: whether pulls will be one-sided, and why not: an endpoint\n"
"              is opened as a client's (libfabric API, efa's device RDMA, and\n"
"              whether the provider emulates READs: FI_OPT_EFA_EMULATED_READ)\n"
"  scale       what --clients N clients on this host (each connected to every\n"
"              one of --servers S servers) open and pin: queue pairs or\n"
"              endpoints, registered buffers per connection and per host, and\n"
"              (ofi) the provider's packet buffers of each endpoint\n"
"  port        each device port: state and physical state (ibv_query_port;\n"
"              EFA devices are the ofi transport's and skipped)\n"
"  gid         RoCE: a RoCE v2 GID carrying an IPv4 address (gid_attrs/types);\n"
"              InfiniBand: a non-zero port GID\n"
"  mtu         active MTU against the port's maximum (RoCE: the netdev's MTU)\n"
"  memlock     RLIMIT_MEMLOCK against what verbs registration needs here: a\n"
"              server's shard (from --partition/--model_name/--hidden_dim and\n"
"              the ip_config) plus receive buffers; a trainer's buffers\n"
"  hugepages   huge pages reserved and transparent huge pages (information:\n"
"              rdps registers 4 KiB-aligned memory and needs none)\n"
"  io_uring    io_uring_queue_init works (the partition loader falls back to pread)\n"
"  ports       the ip_config's ports whose address is on this host are free\n"
"  peers       the other hosts of the ip_config: a TCP connection to each\n"
"              machine's first server port, and its connect time\n"
"  clock       this host's clock is NTP-synchronised (adjtimex); the peers'\n"
"              clocks are not read: run rdps doctor on each host\n"
"\n"
"  --ip_config FILE       the job's servers (DGL-KE format)\n"
"  --transport NAME       auto (default), tcp, verbs, ofi: what the job will use\n"
"  --ofi-provider NAME    the libfabric provider of --transport ofi (default: efa\n"
"                         where there is an EFA device; sets RDPS_OFI_PROVIDER)\n"
"  --partition PDIR       with --model_name and --hidden_dim (default TransE_l2, 400):\n"
"                         size the servers' shards for the memlock check\n"
"  --clients N            clients (trainer threads) of the job, for the memlock and\n"
"                         scale checks: a server's receive buffers grow with them,\n"
"                         and the scale check counts them on this host (default 64)\n"
"  --servers S            servers of the job for the scale check (default: the\n"
"                         ip_config's, else 8)\n"
"  --timeout SEC          bound on each peer connection (default 2)\n"
"  -h, --help             this text\n");
}

struct doctor {
	int fails, warns;
	const char *transport;
	const char *ip_config, *partition, *model;
	uint32_t hidden_dim;
	uint32_t clients;   /* of the job, for the memlock and scale checks */
	uint32_t servers;   /* for the scale check (0: the ip_config's, else 8) */
	int timeout_ms;
	struct rdps_ipconfig ipc;
	bool have_ipc;
	int num_ports; /* RDMA ports seen */
	int num_efa;   /* EFA devices seen */
};

enum { OK, WARN, FAIL, SKIP };

static void report(struct doctor *d, int level, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void report(struct doctor *d, int level, const char *check, const char *fmt, ...)
{
	static const char *const tag[] = { "ok  ", "WARN", "FAIL", "skip" };
	va_list ap;

	printf("%s %-10s ", tag[level], check);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	d->fails += level == FAIL;
	d->warns += level == WARN;
}

/* First line of a small sysfs/proc file, newline stripped; "" if absent. */
static const char *read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return buf;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return buf;
}

/* The netdev of the default route, for the soft-RoCE hint. */
static void default_netdev(char *out, size_t len)
{
	FILE *f = fopen("/proc/net/route", "r");
	char line[256], ifname[64];
	unsigned long dest;

	snprintf(out, len, "eth0");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lx", ifname, &dest) == 2 && dest == 0) {
			snprintf(out, len, "%s", ifname);
			break;
		}
	fclose(f);
}

static bool rxe_module_available(void)
{
	struct utsname u;
	char path[512];

	if (uname(&u))
		return false;
	if (!access("/sys/module/rdma_rxe", F_OK))
		return true;
	snprintf(path, sizeof(path), "/lib/modules/%s/kernel/drivers/infiniband/sw/rxe", u.release);
	return !access(path, F_OK);
}

static const char *mtu_name(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	}
	return "?";
}

/* RoCE: the best GID of a port (RoCE v2 with an IPv4-mapped address). */
static void check_gid(struct doctor *d, const char *dev, int port, const char *where, bool eth)
{
	char path[512], type[64], gid[64], ndev[64], best[160] = "";
	bool v2 = false, v2_ipv4 = false;

	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gids/%d", dev, port, i);
		if (!*read_line(path, gid, sizeof(gid)))
			break;
		if (!strcmp(gid, "0000:0000:0000:0000:0000:0000:0000:0000"))
			continue;
		if (!eth) {
			report(d, OK, "gid", "%s: InfiniBand GID %s", where, gid);
			return;
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, i);
		read_line(path, type, sizeof(type));
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev, port, i);
		read_line(path, ndev, sizeof(ndev));
		if (!strcmp(type, "RoCE v2")) {
			v2 = true;
			if (!strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) && !v2_ipv4) {
				v2_ipv4 = true;
				snprintf(best, sizeof(best), "index %d %s on %s", i, gid, ndev);
			}
		}
	}
	if (!eth)
		report(d, FAIL, "gid", "%s: no non-zero GID; fix: bring the port up (subnet manager: opensm)", where);
	else if (v2_ipv4)
		report(d, OK, "gid", "%s: RoCE v2 GID %s", where, best);
	else if (v2)
		report(d, WARN, "gid", "%s: RoCE v2 GIDs but none with an IPv4 address; fix: give the "
		       "port's netdev an IPv4 address (ip addr add A/N dev NETDEV): rdma_cm resolves "
		       "the ip_config's IPv4 addresses", where);
	else
		report(d, FAIL, "gid", "%s: no RoCE v2 GID (only RoCE v1 or none); fix: assign an IP "
		       "address to the netdev, and use a RoCE v2 capable NIC/driver", where);
}

/* An EFA device (AWS): its driver is efa. It serves the ofi transport
 * (libfabric's efa provider), not verbs: no RC queue pairs, no rdma_cm. */
static bool is_efa(const char *dev)
{
	char path[512], link[512];
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/driver", dev);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		const char *base;

		link[n] = '\0';
		base = strrchr(link, '/');
		return !strcmp(base ? base + 1 : link, "efa");
	}
	return !strncmp(dev, "efa", 3);
}

static void check_rdma(struct doctor *d)
{
	struct ibv_device **list;
	int n = 0;
	bool need = !strcmp(d->transport, "verbs");

	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		char nd[64];

		default_netdev(nd, sizeof(nd));
		report(d, need ? FAIL : !strcmp(d->transport, "auto") ? WARN : OK, "rdma",
		       "no RDMA device (%s)%s; fix: soft-RoCE on this "
		       "NIC: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev %s%s",
		       access("/sys/class/infiniband", F_OK) ? "no /sys/class/infiniband: no RDMA driver loaded"
							     : "/sys/class/infiniband is empty",
		       need ? "" : !strcmp(d->transport, "ofi") ? ", none needed by --transport ofi "
				   "over another provider than efa" : ", jobs use TCP", nd,
		       rxe_module_available() ? "" : " (this kernel has no rdma_rxe module: install a "
						      "distribution kernel, e.g. linux-image-amd64)");
		report(d, SKIP, "port", "no RDMA device");
		report(d, SKIP, "gid", "no RDMA device");
		report(d, SKIP, "mtu", "no RDMA device");
		if (list)
			ibv_free_device_list(list);
		return;
	}
	{
		char names[256] = "";
		size_t len = 0;

		for (int i = 0; i < n; i++)
			len += (size_t)snprintf(names + len, len < sizeof(names) ? sizeof(names) - len : 0,
						"%s%s", i ? ", " : "", ibv_get_device_name(list[i]));
		report(d, OK, "rdma", "%d device(s): %s", n, names);
	}
	for (int i = 0; i < n; i++) {
		const char *dev = ibv_get_device_name(list[i]);
		struct ibv_context *ctx;
		struct ibv_device_attr da;

		if (is_efa(dev))
			continue; /* check_efa() */
		ctx = ibv_open_device(list[i]);
		if (!ctx || ibv_query_device(ctx, &da)) {
			report(d, FAIL, "port", "%s: cannot open the device (%s); fix: check permissions "
			       "on /dev/infiniband/uverbs* and that the driver module is loaded", dev,
			       strerror(errno));
			if (ctx)
				ibv_close_device(ctx);
			continue;
		}
		for (int p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			char where[128], path[512], phys[64];
			bool eth;

			snprintf(where, sizeof(where), "%s port %d", dev, p);
			if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
				report(d, FAIL, "port", "%s: ibv_query_port failed (%s)", where, strerror(errno));
				continue;
			}
			d->num_ports++;
			eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
			snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/phys_state", dev, p);
			read_line(path, phys, sizeof(phys));
			if (pa.state == IBV_PORT_ACTIVE)
				report(d, OK, "port", "%s: ACTIVE (%s, %s)", where, eth ? "Ethernet/RoCE" : "InfiniBand",
				       phys[0] ? phys : "phys_state unknown");
			else
				report(d, FAIL, "port", "%s: %s (%s); fix: %s", where, ibv_port_state_str(pa.state),
				       phys[0] ? phys : "phys_state unknown",
				       eth ? "bring its netdev up (ip link set NETDEV up) and check the cable/switch"
					   : "check the cable and that a subnet manager runs (opensm)");
			check_gid(d, dev, p, where, eth);
			if (pa.active_mtu >= pa.max_mtu)
				report(d, OK, "mtu", "%s: active %s = max", where, mtu_name(pa.active_mtu));
			else
				report(d, WARN, "mtu", "%s: active %s < max %s; fix: %s", where,
				       mtu_name(pa.active_mtu), mtu_name(pa.max_mtu),
				       eth ? "raise the netdev MTU (ip link set NETDEV mtu 9000, jumbo frames on "
					     "the switch too): RoCE uses the largest IB MTU below it"
					   : "set the subnet manager's MTU (opensm partitions.conf mtu=5)");
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
}

/* Appends text to buf (len bytes), "; " between items, cut to fit. */
static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 3 >= len)
		return;
	if (used)
		used += (size_t)snprintf(buf + used, len - used, "; ");
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* Whether the ofi transport would look for efa: no provider named. */
static bool ofi_wants_efa(void)
{
	const char *prov = getenv("RDPS_OFI_PROVIDER"), *fip = getenv("FI_PROVIDER");

	if (prov && *prov)
		return !strcmp(prov, "efa");
	return !fip || !*fip || strstr(fip, "efa");
}

static void check_efa(struct doctor *d)
{
	const char *use = getenv("FI_EFA_USE_DEVICE_RDMA");
	bool need = !strcmp(d->transport, "ofi") && ofi_wants_efa();
	char good[512] = "", bad[768] = "";
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		const char *dev = ibv_get_device_name(list[i]);
#ifdef RDPS_HAVE_EFADV
		struct efadv_device_attr a;
		struct ibv_context *ctx;
		int ret = -1;
#endif

		if (!is_efa(dev))
			continue;
		d->num_efa++;
#ifdef RDPS_HAVE_EFADV
		memset(&a, 0, sizeof(a));
		ctx = ibv_open_device(list[i]);
		if (ctx)
			ret = efadv_query_device(ctx, &a, sizeof(a));
		if (!ctx || ret)
			append(bad, sizeof(bad), "%s: cannot query it (%s): RDMA READ unknown", dev,
			       strerror(ctx ? ret : errno));
		else if (a.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)
			append(good, sizeof(good), "%s (RDMA READ, up to %u bytes)", dev, a.max_rdma_size);
		else
			append(bad, sizeof(bad), "%s: no RDMA READ", dev);
		if (ctx)
			ibv_close_device(ctx);
#else
		append(bad, sizeof(bad), "%s: RDMA READ could not be checked (rdps was built without "
		       "rdma-core's infiniband/efadv.h)", dev);
#endif
	}
	if (list)
		ibv_free_device_list(list);
	if (!d->num_efa) {
		if (need)
			report(d, FAIL, "efa", "no EFA device, and no other libfabric provider named; fix: "
			       "an EFA-capable instance type launched with an EFA interface (and the EFA "
			       "kernel driver: the AWS EFA installer), or --ofi-provider NAME for "
			       "another fabric");
		else
			report(d, SKIP, "efa", "no EFA device");
		return;
	}
	if (use && (!strcmp(use, "0") || !strcasecmp(use, "false") || !strcasecmp(use, "no")))
		append(bad, sizeof(bad), "FI_EFA_USE_DEVICE_RDMA=%s turns RDMA READ off", use);
	if (bad[0])
		report(d, WARN, "efa", "%s%s%s; the ofi transport's pulls are then two-sided, served by "
		       "the servers' CPUs over FI_MSG (its servers log why); fix: for one-sided pulls "
		       "an instance type whose EFA does RDMA READ (p4d, p5, trn1 and later), with "
		       "FI_EFA_USE_DEVICE_RDMA unset or 1", good, good[0] ? "; " : "", bad);
	else
		report(d, OK, "efa", "%d device(s): %s", d->num_efa, good);
}

/* The RDM providers libfabric sees, and which one --transport ofi takes. */
static void check_ofi(struct doctor *d)
{
	const char *named = getenv("RDPS_OFI_PROVIDER"), *fip = getenv("FI_PROVIDER");
	bool need = !strcmp(d->transport, "ofi");
	char all[512] = "", take[96] = "";
	bool take_rma = false;
	uint32_t v = fi_version();

	for (int rma = 1; rma >= 0; rma--) {
		struct fi_info *h = fi_allocinfo(), *list = NULL;

		if (!h)
			break;
		h->ep_attr->type = FI_EP_RDM;
		h->caps = FI_MSG | (rma ? FI_RMA | FI_READ | FI_REMOTE_READ : 0);
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
					  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
		if (!fi_getinfo(ofi_api_version(), NULL, NULL, 0, h, &list)) {
			for (struct fi_info *i = list; i; i = i->next) {
				const char *p = i->fabric_attr->prov_name;
				char item[96];

				snprintf(item, sizeof(item), "%s%s", p, rma ? " (RMA)" : "");
				if (strstr(all, p))
					continue; /* listed, with RMA or without */
				append(all, sizeof(all), "%s", item);
				if (!take[0] && ((named && *named) ? !strcmp(p, named)
						 : !strcmp(p, "efa") || (fip && *fip))) {
					snprintf(take, sizeof(take), "%s", p);
					take_rma = rma;
				}
			}
		}
		fi_freeinfo(list);
		fi_freeinfo(h);
	}
	if (!take[0]) {
		report(d, need ? FAIL : all[0] ? OK : SKIP, "ofi",
		       "libfabric %u.%u, reliable-datagram providers%s%s: %s; --transport ofi has none "
		       "to take (%s)%s", FI_MAJOR(v), FI_MINOR(v), fip && *fip ? " within FI_PROVIDER=" : "",
		       fip && *fip ? fip : "", all[0] ? all : "none",
		       named && *named ? "the --ofi-provider named is not among them" : "no efa",
		       need ? "; fix: --ofi-provider NAME of one of them ('tcp;ofi_rxm' runs over any "
			      "IP network), or install the AWS EFA software on an EFA instance" : "");
		return;
	}
	report(d, OK, "ofi", "libfabric %u.%u, reliable-datagram providers%s%s: %s; --transport ofi "
	       "takes %s: %s", FI_MAJOR(v), FI_MINOR(v), fip && *fip ? " within FI_PROVIDER=" : "",
	       fip && *fip ? fip : "", all, take,
	       take_rma ? "one-sided pulls (FI_RMA reads; on efa, where the device does RDMA READ)"
			: "two-sided pulls (no FI_RMA reads: the servers' CPUs serve them)");
}

static bool has_cap_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff & (1ull << 14); /* CAP_IPC_LOCK */
}

static void fmt_bytes(char *buf, size_t len, unsigned long long b)
{
	if (b >= (1ull << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (1ull << 30));
	else if (b >= (1ull << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (1ull << 20));
	else
		snprintf(buf, len, "%llu KiB", b >> 10);
}

/* Largest shard (bytes) a server of the job holds, or 0 if unknown. */
static unsigned long long server_shard_bytes(struct doctor *d, char *why, size_t len)
{
	struct rdps_partition *p;
	const struct rdps_partition_info *pi;
	uint32_t edim, rdim, S;
	unsigned long long best = 0;
	char err[512];

	if (!d->partition || !d->have_ipc)
		return 0;
	if (rdps_model_dims(d->model, d->hidden_dim, &edim, &rdim)) {
		snprintf(why, len, "unknown --model_name %s / --hidden_dim %u", d->model, d->hidden_dim);
		return 0;
	}
	if (rdps_partition_open(d->partition, &p, err, sizeof(err))) {
		snprintf(why, len, "%s", err);
		return 0;
	}
	pi = rdps_partition_get_info(p);
	S = d->ipc.num_servers;
	for (uint32_t s = 0; s < S; s++) {
		uint64_t rows;
		unsigned long long b;

		if (S == pi->k) {
			rows = pi->ranges[s + 1] - pi->ranges[s];
		} else if (d->ipc.num_machines == pi->k) {
			uint32_t m = d->ipc.servers[s].machine, per = 0;

			for (uint32_t q = 0; q < S; q++)
				per += d->ipc.servers[q].machine == m;
			rows = (pi->ranges[m + 1] - pi->ranges[m] + per - 1) / per;
		} else {
			rows = (pi->num_entities + S - 1) / S;
		}
		b = RDPS_ALIGN_UP(rows * rdps_row_stride(edim), 4096) +
		    RDPS_ALIGN_UP((pi->num_relations + S - 1) / S * rdps_row_stride(rdim), 4096);
		if (b > best)
			best = b;
	}
	rdps_partition_close(p);
	return best;
}

static void check_memlock(struct doctor *d)
{
	struct rlimit rl;
	unsigned long long shard, server, trainer, need;
	uint32_t S = d->have_ipc ? d->ipc.num_servers : 1;
	struct rdps_transport_info ti;
	char why[600] = "", a[32], b[32], c[32];
	/* What the job's RDMA backend registers: ofi's on EFA hosts. */
	bool ofi = !strcmp(d->transport, "ofi") || (!strcmp(d->transport, "auto") && d->num_efa);

	if (!strcmp(d->transport, "tcp")) {
		report(d, OK, "memlock", "not needed over TCP");
		return;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		report(d, FAIL, "memlock", "getrlimit: %s", strerror(errno));
		return;
	}
	shard = server_shard_bytes(d, why, sizeof(why));
	/* What the backend registers besides the shards, as it says. */
	rdps_transport_find(ofi ? "ofi" : "verbs")->query(d->clients, S, &ti);
	server = shard + ti.server_pinned_bytes;
	trainer = ti.client_pinned_bytes;
	need = server > trainer ? server : trainer;
	fmt_bytes(a, sizeof(a), need);
	fmt_bytes(b, sizeof(b), rl.rlim_cur);
	fmt_bytes(c, sizeof(c), shard);
	if (rl.rlim_cur == RLIM_INFINITY)
		report(d, OK, "memlock", "unlimited");
	else if (has_cap_ipc_lock())
		report(d, OK, "memlock", "limit %s, but this process has CAP_IPC_LOCK (registration is "
		       "not limited for it)", b);
	else if (rl.rlim_cur >= need)
		report(d, OK, "memlock", "limit %s >= %s needed%s%s", b, a, shard ? "" : " (without the table shard: give --partition)", why);
	else
		report(d, FAIL, "memlock", "limit %s < %s a process registers (server: %s shard + "
		       "receive buffers; trainer: buffers for %u server(s) per thread)%s%s; fix: ulimit -l "
		       "unlimited (limits.conf '* - memlock unlimited', systemd LimitMEMLOCK=infinity, "
		       "docker --ulimit memlock=-1, Kubernetes: IPC_LOCK capability)",
		       b, a, shard ? c : "unknown", S, why[0] ? ": " : "", why);
}

/* The RDMA backend the job would take here: ofi on EFA hosts (or asked
 * for), verbs where there is another RDMA port (or asked for), else none. */
static const char *rdma_backend(const struct doctor *d)
{
	if (!strcmp(d->transport, "ofi") || !strcmp(d->transport, "verbs"))
		return d->transport;
	if (!strcmp(d->transport, "auto"))
		return d->num_efa ? "ofi" : d->num_ports ? "verbs" : NULL;
	return NULL;
}

/* ofi: will pulls be one-sided, and why not. */
static void check_pulls(struct doctor *d)
{
	const char *b = rdma_backend(d);
	char why[400];
	int ret;

	if (!b || strcmp(b, "ofi")) {
		report(d, SKIP, "pulls", "%s", !b ? "no RDMA transport here"
			: "verbs pulls are one-sided RDMA READs (RC queue pairs)");
		return;
	}
	ret = ofi_pull_probe(0, why, sizeof(why));
	if (ret < 0)
		report(d, SKIP, "pulls", "no ofi endpoint could be opened: %s", why);
	else if (ret)
		report(d, OK, "pulls", "one-sided (RMA READs): %s", why);
	else
		report(d, WARN, "pulls", "two-sided, served by the servers' CPUs: %s; fix: %s", why,
		       strstr(why, "API 1.18") ? "a libfabric of API 1.18 or newer (the AWS EFA "
						 "installer's: /opt/amazon/efa), first on LD_LIBRARY_PATH"
		       : strstr(why, "FI_EFA_USE_DEVICE_RDMA") ? "unset FI_EFA_USE_DEVICE_RDMA (or set it to 1)"
		       : strstr(why, "RDPS_OFI_PULLS") ? "unset RDPS_OFI_PULLS"
		       : strstr(why, "no RDMA READ") || strstr(why, "does no RDMA READ")
			       ? "an instance type whose EFA does RDMA READ (p4d, p5, trn1 and later)"
			       : "a provider with RMA reads the device does itself (efa on p4d or "
				 "later)");
}

/* What N clients on this host open and pin for S servers, as the backend
 * (and, for ofi, the provider) sizes it. */
static void check_scale(struct doctor *d)
{
	uint32_t S = d->servers ? d->servers : d->have_ipc ? d->ipc.num_servers : 8;
	const char *b = rdma_backend(d);
	struct rdps_transport_info ti;
	char conn[32], client[32], host[32];

	if (!b) {
		report(d, SKIP, "scale", "no RDMA transport here (nothing is registered over TCP)");
		return;
	}
	rdps_transport_find(b)->query(d->clients, S, &ti);
	fmt_bytes(conn, sizeof(conn), ti.conn_pinned_bytes);
	fmt_bytes(client, sizeof(client), ti.client_pinned_bytes);
	fmt_bytes(host, sizeof(host), (unsigned long long)ti.client_pinned_bytes * d->clients);
	if (!strcmp(b, "verbs")) {
		report(d, OK, "scale", "verbs, %u clients x %u servers: %llu queue pairs on this host "
		       "(one per client and server; one PD and CQ per client); registered %s per "
		       "connection, %s per client, %s on this host", d->clients, S,
		       (unsigned long long)d->clients * S, conn, client, host);
		return;
	}
	{
		struct ofi_queues q;
		char why[320], pkt[32], pkt_def[32], total[32];
		unsigned long long pool, pool_def;

		if (ofi_queue_probe(S, &q, why, sizeof(why))) {
			report(d, OK, "scale", "ofi, %u clients x %u servers: %u endpoints on this host "
			       "(one per client); registered %s per connection, %s per client, %s "
			       "on this host (provider unknown here: %s)", d->clients, S, d->clients,
			       conn, client, host, why);
			return;
		}
		pool = (unsigned long long)(q.tx + q.rx) * q.pkt;
		pool_def = (unsigned long long)(q.tx_def + q.rx_def) * q.pkt;
		fmt_bytes(pkt, sizeof(pkt), pool);
		fmt_bytes(pkt_def, sizeof(pkt_def), pool_def);
		fmt_bytes(total, sizeof(total),
			  ((unsigned long long)ti.client_pinned_bytes + pool) * d->clients);
		report(d, OK, "scale", "ofi (%s on %s), %u clients x %u servers: %u endpoints on "
		       "this host (one per client, every server in its address vector); registered "
		       "%s per connection, %s per client; each endpoint's queues tx %zu rx %zu "
		       "(provider defaults %zu/%zu), its packet buffers ~%s (%s at the defaults); "
		       "%s on this host", q.prov, q.dev, d->clients, S, d->clients, conn, client,
		       q.tx, q.rx, q.tx_def, q.rx_def, pkt, pkt_def, total);
	}
}

static void check_hugepages(struct doctor *d)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256], thp[128];
	unsigned long total = 0, freep = 0, size = 0;

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "HugePages_Total: %lu", &total);
			sscanf(line, "HugePages_Free: %lu", &freep);
			sscanf(line, "Hugepagesize: %lu", &size);
		}
		fclose(f);
	}
	read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp));
	report(d, OK, "hugepages", "%lu of %lu huge pages (%lu kB) free, transparent huge pages %s "
	       "(not needed: rdps registers 4 KiB-aligned memory)", freep, total, size,
	       thp[0] ? thp : "unknown");
}

static void check_io_uring(struct doctor *d)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(4, &ring, 0);
	char sysctl[32];

	if (ret == 0) {
		io_uring_queue_exit(&ring);
		report(d, OK, "io_uring", "io_uring_queue_init works (partition loader uses it)");
		return;
	}
	read_line("/proc/sys/kernel/io_uring_disabled", sysctl, sizeof(sysctl));
	report(d, WARN, "io_uring", "io_uring_queue_init: %s (the loader falls back to pread); fix: %s",
	       strerror(-ret),
	       ret == -ENOSYS ? "a kernel >= 5.6" :
	       sysctl[0] && strcmp(sysctl, "0") ? "sysctl kernel.io_uring_disabled=0" :
	       ret == -EPERM ? "allow io_uring in the container's seccomp profile (docker "
			       "--security-opt seccomp=unconfined) or sysctl kernel.io_uring_disabled=0" :
	       ret == -ENOMEM ? "raise the memlock limit (kernels < 5.12 charge rings to it)" :
			       "check the kernel's io_uring support");
}

static void check_ports(struct doctor *d)
{
	char list[512] = "", bad[1024] = "";
	size_t ll = 0, bl = 0;
	int local = 0, inuse = 0, other = 0;

	if (!d->have_ipc) {
		report(d, SKIP, "ports", "no --ip_config");
		return;
	}
	for (uint32_t s = 0; s < d->ipc.num_servers; s++) {
		const struct rdps_endpoint *ep = &d->ipc.servers[s];
		char why[320];
		int ret = rdps_launch_bind_check(ep->host, ep->port, why, sizeof(why));

		if (ret == -EADDRNOTAVAIL)
			continue;
		if (ret == -EHOSTUNREACH) {
			bl += (size_t)snprintf(bad + bl, bl < sizeof(bad) ? sizeof(bad) - bl : 0,
					       "%sserver %u: %s", bl ? "; " : "", s, why);
			other++;
			continue;
		}
		local++;
		if (ll < sizeof(list))
			ll += (size_t)snprintf(list + ll, sizeof(list) - ll, "%s%s:%u", ll ? " " : "", ep->host, ep->port);
		if (ret) {
			bl += (size_t)snprintf(bad + bl, bl < sizeof(bad) ? sizeof(bad) - bl : 0,
					       "%sserver %u: %s", bl ? "; " : "", s, why);
			inuse += ret == -EADDRINUSE;
			other += ret != -EADDRINUSE;
		}
	}
	if (!local && !other)
		report(d, SKIP, "ports", "no server of %s is on this host", d->ip_config);
	else if (!inuse && !other)
		report(d, OK, "ports", "%d local server port(s) free: %s", local, list);
	else
		report(d, FAIL, "ports", "%s; fix: %s", bad,
		       inuse ? "stop what listens there ('ss -ltnp sport = :PORT'; servers of an earlier "
			       "job: rdps shutdown --ip_config FILE) or change the base_port"
			     : "fix the host names of the ip_config");
}

/* TCP connect with a bound; returns 0 (connected), -ECONNREFUSED, -ETIMEDOUT, ... */
static int tcp_probe(const char *host, uint16_t port, int timeout_ms, double *ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV }, *res;
	char portstr[8];
	uint64_t t0 = rdps_now_ns();
	int s, ret, err = 0;
	socklen_t el = sizeof(err);
	struct pollfd pfd;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res))
		return -EHOSTUNREACH;
	s = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		freeaddrinfo(res);
		return -errno;
	}
	ret = connect(s, res->ai_addr, res->ai_addrlen) ? -errno : 0;
	freeaddrinfo(res);
	if (ret == -EINPROGRESS) {
		pfd = (struct pollfd){ .fd = s, .events = POLLOUT };
		ret = poll(&pfd, 1, timeout_ms);
		if (ret == 0)
			ret = -ETIMEDOUT;
		else if (ret < 0)
			ret = -errno;
		else
			ret = getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) ? -errno : -err;
	}
	close(s);
	*ms = (double)(rdps_now_ns() - t0) / 1e6;
	return ret;
}

static void check_peers(struct doctor *d)
{
	char out[1024] = "";
	size_t ol = 0;
	int peers = 0, down = 0;

	if (!d->have_ipc) {
		report(d, SKIP, "peers", "no --ip_config");
		return;
	}
	for (uint32_t s = 0; s < d->ipc.num_servers; s++) {
		const struct rdps_endpoint *ep = &d->ipc.servers[s];
		char why[320];
		double ms = 0;
		int ret;

		/* One probe per remote machine: its first server's port. */
		if (ep->local_index != 0 ||
		    rdps_launch_bind_check(ep->host, ep->port, why, sizeof(why)) != -EADDRNOTAVAIL)
			continue;
		peers++;
		ret = tcp_probe(ep->host, ep->port, d->timeout_ms, &ms);
		if (ret == 0)
			snprintf(why, sizeof(why), "server listening (connect %.2f ms)", ms);
		else if (ret == -ECONNREFUSED)
			snprintf(why, sizeof(why), "refused in %.2f ms: the host (or a firewall) "
				 "answered, no server listening yet", ms);
		else
			snprintf(why, sizeof(why), "%s", ret == -ETIMEDOUT ? "no answer" : strerror(-ret));
		down += ret && ret != -ECONNREFUSED;
		if (ol < sizeof(out))
			ol += (size_t)snprintf(out + ol, sizeof(out) - ol, "%s%s:%u %s", ol ? "; " : "",
					       ep->host, ep->port, why);
	}
	if (!peers)
		report(d, SKIP, "peers", "every machine of %s is this host", d->ip_config);
	else if (!down)
		report(d, OK, "peers", "%s", out);
	else
		report(d, FAIL, "peers", "%s; fix: check the route and firewall to the failing hosts "
		       "(TCP ports of the ip_config, and rdma_cm's for verbs)", out);
}

static void check_clock(struct doctor *d)
{
	struct timex tx = { 0 };
	int st = adjtimex(&tx);

	if (st < 0)
		report(d, WARN, "clock", "adjtimex: %s; fix: none needed for training, but logs of "
		       "different hosts only line up with NTP (apt-get install chrony)", strerror(errno));
	else if (st == TIME_ERROR || (tx.status & STA_UNSYNC))
		report(d, WARN, "clock", "not NTP-synchronised (peers' clocks not compared); fix: "
		       "apt-get install chrony (training does not depend on it; logs and timings of "
		       "different hosts do)");
	else
		report(d, OK, "clock", "NTP-synchronised, estimated error %ld us (peers' clocks not "
		       "compared: run rdps doctor on each host)", tx.esterror);
}

int rdps_cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ip_config", required_argument, NULL, 'c' },
		{ "transport", required_argument, NULL, 'T' },
		{ "ofi-provider", required_argument, NULL, 'O' },
		{ "partition", required_argument, NULL, 'P' },
		{ "model_name", required_argument, NULL, 'M' },
		{ "hidden_dim", required_argument, NULL, 'D' },
		{ "timeout", required_argument, NULL, 'w' },
		{ "clients", required_argument, NULL, 'n' },
		{ "servers", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct doctor d = { .transport = "auto", .model = "TransE_l2", .hidden_dim = 400,
			    .timeout_ms = 2000, .clients = 64 };
	char err[512], *end;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': d.ip_config = optarg; break;
		case 'T':
			if (strcmp(optarg, "auto") && strcmp(optarg, "tcp") && strcmp(optarg, "verbs") &&
			    strcmp(optarg, "ofi")) {
				fprintf(stderr, "rdps doctor: --transport must be auto, tcp, verbs or ofi\n");
				return 2;
			}
			d.transport = optarg;
			break;
		case 'O':
			if (!*optarg) {
				fprintf(stderr, "rdps doctor: --ofi-provider needs a provider name "
					"(fi_info -l lists them)\n");
				return 2;
			}
			setenv("RDPS_OFI_PROVIDER", optarg, 1);
			break;
		case 'P': d.partition = optarg; break;
		case 'M': d.model = optarg; break;
		case 'D':
			d.hidden_dim = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !d.hidden_dim || d.hidden_dim > RDPS_MAX_DIM) {
				fprintf(stderr, "rdps doctor: --hidden_dim '%s' is not in 1..%d\n", optarg, RDPS_MAX_DIM);
				return 2;
			}
			break;
		case 'n':
			d.clients = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !d.clients || d.clients > 1u << 20) {
				fprintf(stderr, "rdps doctor: --clients '%s' is not a positive count\n", optarg);
				return 2;
			}
			break;
		case 's':
			d.servers = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !d.servers || d.servers > 1u << 20) {
				fprintf(stderr, "rdps doctor: --servers '%s' is not a positive count\n", optarg);
				return 2;
			}
			break;
		case 'w':
			d.timeout_ms = (int)(strtod(optarg, &end) * 1000);
			if (*end || d.timeout_ms <= 0) {
				fprintf(stderr, "rdps doctor: --timeout '%s' is not a positive number\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdps doctor: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (d.ip_config) {
		if (rdps_ipconfig_load(d.ip_config, &d.ipc, err, sizeof(err))) {
			fprintf(stderr, "rdps doctor: %s\n", err);
			return 2;
		}
		d.have_ipc = true;
	}
	check_rdma(&d);
	check_efa(&d);
	check_ofi(&d);
	check_pulls(&d);
	check_memlock(&d);
	check_scale(&d);
	check_hugepages(&d);
	check_io_uring(&d);
	check_ports(&d);
	check_peers(&d);
	check_clock(&d);
	printf("%d failure(s), %d warning(s)\n", d.fails, d.warns);
	fflush(stdout);
	if (d.have_ipc)
		rdps_ipconfig_free(&d.ipc);
	return d.fails ? 1 : 0;
}
