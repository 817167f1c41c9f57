/* SPDX-License-Identifier: MIT */
/*
 * rdps: the whole C API of librdps in one include.
 *
 *   #include <rdps/rdps.h>
 *
 *   cc app.c $(pkg-config --cflags --libs rdps)
 *   # or, in CMake: find_package(rdps 0.1 REQUIRED)
 *   #               target_link_libraries(app PRIVATE rdps::rdps)
 *
 * librdps.so.0 exports exactly the functions (and the one variable,
 * rdps_log_threshold) that the headers below declare, under the symbol
 * version RDPS_0.1; static inline helpers and macros are in the headers
 * themselves. Each header can also be included on its own.
 *
 *   rdps/common.h     logging, error convention, clock, version string
 *   rdps/client.h     a client of the parameter servers: tables, pull and
 *                     push, flush, barrier, allreduce, stats, shutdown
 *   rdps/ipconfig.h   ip_config files (DGL-KE's format)
 *   rdps/auth.h       the job's shared secret
 *   rdps/server.h     a parameter server in this process
 *   rdps/kvstore.h    tables, shards, row layout, range book, optimizers
 *   rdps/transport.h  the transports' ops table and backends by name
 *   rdps/dataset.h    datasets: WordNet, import, synthetic, checks
 *   rdps/partition.h  METIS partitioning, partition files and their loader
 *   rdps/trainer.h    KGE models, filtered evaluation, .npy files
 *   rdps/train.h      the training job (rdps train)
 *   rdps/saved.h      saved embeddings (rdps eval, predict, emb_sim)
 */
#ifndef RDPS_RDPS_H
#define RDPS_RDPS_H

#include "rdps/common.h"
#include "rdps/auth.h"
#include "rdps/ipconfig.h"
#include "rdps/transport.h"
#include "rdps/kvstore.h"
#include "rdps/client.h"
#include "rdps/server.h"
#include "rdps/dataset.h"
#include "rdps/partition.h"
#include "rdps/trainer.h"
#include "rdps/train.h"
#include "rdps/saved.h"
#include "rdps/graph.h"

#endif /* RDPS_RDPS_H */
