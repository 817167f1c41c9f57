/* SPDX-License-Identifier: MIT */
/*
 * What the libfabric shim (ofi_shim.c, an LD_PRELOAD library) saw a
 * process ask of libfabric and answered it. A suite run under the shim
 * reads its own counts through rdps_ofi_shim_counts() (dlsym); a process
 * it started (a server) writes them at exit to RDPS_OFI_SHIM_OUT/<pid> as
 * "name value" lines.
 *
 * The shim's knobs (environment):
 *   RDPS_OFI_SHIM_VERSION=M.N   fi_version() says the library offers API
 *                               M.N (fi_getinfo is asked at most the
 *                               library's own: the shim clamps it)
 *   RDPS_OFI_SHIM_AS_EFA=1      the provider rdps gets looks like efa: its
 *                               prov_name is "efa" (the real one is put
 *                               back for libfabric's own calls), and its
 *                               endpoints answer efa's options as efa's
 *                               rule does (efa_rdm_get_use_device_rdma):
 *                               API >= 1.18: device RDMA where the device
 *                               has it; below, off on the first EFA
 *                               generations; FI_OPT_EFA_USE_DEVICE_RDMA
 *                               taken from API 1.18 on; READs emulated
 *                               where device RDMA is off
 *   RDPS_OFI_SHIM_OLD_EFA=1     ... the device is a first-generation one
 *                               (p4d: vendor part 0xefa0/0xefa1)
 *   RDPS_OFI_SHIM_NO_RDMA=1     ... the device does no RDMA READ
 *   RDPS_OFI_SHIM_EMULATED_READ=1  every endpoint says its READs are
 *                               emulated (FI_OPT_EFA_EMULATED_READ), as
 *                               tcp;ofi_rxm's in fact are
 *   RDPS_OFI_SHIM_NO_WAIT=1     completion queues have no wait object (efa of
 *                               libfabric 1.17)
 *   RDPS_OFI_SHIM_FORK=disabled ibv_is_fork_initialized() says fork
 *                               support is needed and not on (a kernel
 *                               before 5.13)
 * and a call (dlsym "rdps_ofi_shim_sends_full", rdps_ofi_shim_sends_full_fn):
 * while on, fi_sendmsg on the newest endpoint (a client's, opened after its
 * servers') says -FI_EAGAIN, as a provider whose queue stays full does.
 */
#ifndef RDPS_TEST_OFI_SHIM_H
#define RDPS_TEST_OFI_SHIM_H

#include <stdbool.h>
#include <stdint.h>

struct rdps_ofi_shim_counts {
	uint32_t api_max;          /* the newest API fi_getinfo was asked for */
	uint32_t api_min;          /* ... the oldest */
	uint64_t getinfo;          /* fi_getinfo calls */
	uint64_t fabrics;          /* fi_fabric */
	uint64_t domains;          /* fi_domain */
	uint64_t endpoints;        /* fi_endpoint */
	uint64_t avs;              /* fi_av_open */
	uint64_t av_inserts;       /* addresses inserted */
	uint64_t av_inserts_newest; /* ... into the address vector opened last */
	uint64_t cqs;              /* fi_cq_open */
	uint64_t cq_reads;         /* fi_cq_read calls (progress) */
	uint64_t device_rdma_asks; /* fi_setopt(FI_OPT_EFA_USE_DEVICE_RDMA, true) */
	uint64_t device_rdma_refused; /* ... refused (API < 1.18, no RDMA) */
	uint64_t emulated_read_asks;  /* fi_getopt(FI_OPT_EFA_EMULATED_READ) */
	uint64_t emulated_read_yes;   /* ... answered true */
	uint64_t ep_tx_size, ep_rx_size; /* the last fi_endpoint's info queue sizes */
	uint64_t naps;             /* poll() of one descriptor for 1 ms: a server's
				    * nap between progress calls */
	uint64_t fork_init;        /* ibv_fork_init() calls */
	uint64_t sends_refused;    /* fi_sendmsg answered -FI_EAGAIN (sends full) */
	char env_shm[16];          /* FI_EFA_ENABLE_SHM_TRANSFER at the first fi_domain */
	char env_fork_safe[16];    /* FI_EFA_FORK_SAFE then */
};

/* In a process run under the shim: its counts (dlsym(RTLD_DEFAULT,
 * "rdps_ofi_shim_counts") finds it); rdps_ofi_shim_reset() zeroes them. */
typedef struct rdps_ofi_shim_counts *rdps_ofi_shim_counts_fn(void);
typedef void rdps_ofi_shim_reset_fn(void);
typedef void rdps_ofi_shim_sends_full_fn(bool on);

#endif
