# SPDX-License-Identifier: MIT
"""librdps.so.0 through cffi in ABI mode (no compiler needed at import).

The declarations below mirror include/rdps/*.h: only what the package
calls, and every struct it allocates field for field, so that cffi lays it
out as the C compiler does (tests/python/test_abi.py compares sizes and
offsets with a program compiled against the headers), except the server
config (see server.h below).

The library is found, in this order, at
  1. $RDPS_LIBRARY (a path),
  2. the library the package was installed with (_installed.py, written by
     cmake --install),
  3. the build tree next to the package's source: python/../build/librdps.so.0,
  4. the system's (the dynamic loader's search: librdps.so.0).
"""
import os

import cffi

CDEF = r"""
/* common.h */
extern int rdps_log_threshold;
void rdps_log_init(void);
const char *rdps_strerror(int neg_errno);

/* ipconfig.h */
struct rdps_endpoint {
    char host[256];
    uint16_t port;
    uint32_t machine;
    uint32_t local_index;
};
struct rdps_ipconfig {
    uint32_t num_machines;
    uint32_t num_servers;
    struct rdps_endpoint *servers;
};
int rdps_ipconfig_load(const char *path, struct rdps_ipconfig *cfg, char *err, size_t errlen);
int rdps_ipconfig_parse(const char *name, const char *text, struct rdps_ipconfig *cfg,
                        char *err, size_t errlen);
void rdps_ipconfig_free(struct rdps_ipconfig *cfg);

/* auth.h */
struct rdps_secret {
    uint8_t key[256];
    size_t len;
};
int rdps_secret_load(const char *path, struct rdps_secret *s, char *err, size_t errlen);

/* transport.h */
size_t rdps_dtype_size(int dtype);
const char *rdps_dtype_name(int dtype);
int rdps_dtype_parse(const char *name);

/* kvstore.h */
int rdps_optimizer_parse(const char *name);
const char *rdps_optimizer_name(int opt);
struct rdps_row_part {
    uint32_t cols;
    float init_range;
};

/* client.h */
struct rdps_client_params {
    const char *ip_config;
    const struct rdps_ipconfig *servers;
    const char *transport;
    uint32_t client_id;
    uint32_t num_clients;
    int timeout_ms;
    int barrier_timeout_ms;
    size_t max_inflight_bytes;
    int read_consistency;
    bool quiet;
    const struct rdps_secret *secret;
    int reconnect_ms;
    bool observer;
};
struct rdps_table_info {
    const char *name;
    uint32_t id;
    uint32_t dim;
    uint64_t num_rows;
    int dtype;
    uint32_t elems;
    int optimizer;
};
struct rdps_table_spec {
    const char *name;
    uint64_t num_rows;
    uint32_t elems;
    int dtype;
    float init_range;
    uint64_t seed;
};
struct rdps_optimizer_spec {
    int optimizer;
    float lr;
    float eps;
    float beta1, beta2;
};
struct rdps_client;
int rdps_client_create(const struct rdps_client_params *p, struct rdps_client **out,
                       char *err, size_t errlen);
void rdps_client_set_barrier_timeout(struct rdps_client *c, int timeout_ms);
void rdps_client_destroy(struct rdps_client *c);
int rdps_client_table(struct rdps_client *c, const char *name, struct rdps_table_info *info);
uint32_t rdps_client_num_servers(const struct rdps_client *c);
int rdps_client_push(struct rdps_client *c, uint32_t table, const uint64_t *ids,
                     const float *grads, size_t n);
int rdps_client_flush(struct rdps_client *c);
int rdps_client_barrier(struct rdps_client *c);
int rdps_client_allreduce(struct rdps_client *c, double *v, size_t n);
int rdps_client_shutdown_servers(struct rdps_client *c);
int rdps_client_table_create(struct rdps_client *c, const struct rdps_table_spec *spec,
                             struct rdps_table_info *info);
int rdps_client_table_drop(struct rdps_client *c, const char *name);
int rdps_client_table_set_optimizer(struct rdps_client *c, uint32_t table,
                                    const struct rdps_optimizer_spec *o);
int rdps_client_state_floats(const struct rdps_client *c, uint32_t table, uint32_t *per_row);
int rdps_client_state_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                          float *out);
int rdps_client_state_set(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                          const float *in);
int rdps_client_get(struct rdps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                    void *out);
int rdps_client_set(struct rdps_client *c, uint32_t table, const uint64_t *ids,
                    const void *rows, size_t n);
const char *rdps_client_errmsg(const struct rdps_client *c);
const char *rdps_client_transport(const struct rdps_client *c);

int rdps_client_table_info(const struct rdps_client *c, uint32_t id,
                           struct rdps_table_info *info);
uint32_t rdps_client_num_tables(const struct rdps_client *c);

/* graph.h */
struct rdps_graph_part;
int rdps_graph_part_load(const char *dir, uint32_t part, struct rdps_graph_part **out,
                         char *err, size_t errlen);
void rdps_graph_part_free(struct rdps_graph_part *p);
int rdps_graph_part_add_tables(const struct rdps_graph_part *p, void *cfg);
struct rdps_graph;
int rdps_graph_open(struct rdps_client *c, struct rdps_graph **out);
void rdps_graph_close(struct rdps_graph *g);
uint64_t rdps_graph_num_nodes(const struct rdps_graph *g);
uint64_t rdps_graph_num_edges(const struct rdps_graph *g);
uint32_t rdps_graph_num_parts(const struct rdps_graph *g);
void rdps_graph_part_nodes(const struct rdps_graph *g, uint32_t part, uint64_t *lo,
                           uint64_t *hi);
int rdps_graph_in_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
                          uint64_t *deg);
int rdps_graph_find_edges(struct rdps_graph *g, const uint64_t *eids, size_t n,
                          uint64_t *src, uint64_t *dst, int64_t *etype);
int rdps_sample_way_parse(const char *name);
struct rdps_sampled {
    uint64_t *src, *dst, *eid;
    int64_t *etype;
    size_t num_edges;
};
int rdps_graph_sample_neighbors(struct rdps_graph *g, const uint64_t *seeds, size_t n,
                                uint32_t fanout, int way, uint64_t seed,
                                struct rdps_sampled *out);
/* graph.h: types, maps, data, typed sampling (issue 26) */
const char *rdps_graph_schema(const struct rdps_graph *g);
uint32_t rdps_graph_num_ntypes(const struct rdps_graph *g);
uint32_t rdps_graph_num_etypes(const struct rdps_graph *g);
const char *rdps_graph_ntype_name(const struct rdps_graph *g, uint32_t ntype);
const char *rdps_graph_etype_name(const struct rdps_graph *g, uint32_t etype,
                                  uint32_t *src_ntype, uint32_t *dst_ntype);
int rdps_graph_ntype_id(const struct rdps_graph *g, const char *name);
int rdps_graph_etype_id(const struct rdps_graph *g, const char *name);
uint64_t rdps_graph_num_nodes_of(const struct rdps_graph *g, uint32_t ntype);
uint64_t rdps_graph_num_edges_of(const struct rdps_graph *g, uint32_t etype);
void rdps_graph_ntype_range(const struct rdps_graph *g, uint32_t ntype, uint32_t part,
                            uint64_t *lo, uint64_t *hi);
void rdps_graph_etype_range(const struct rdps_graph *g, uint32_t etype, uint32_t part,
                            uint64_t *lo, uint64_t *hi);
int rdps_graph_map_to_per_ntype(struct rdps_graph *g, const uint64_t *homo, size_t n,
                                int32_t *ntype, uint64_t *per_type);
int rdps_graph_map_to_homo_nid(struct rdps_graph *g, uint32_t ntype, const uint64_t *per_type,
                               size_t n, uint64_t *homo);
int rdps_graph_map_to_per_etype(struct rdps_graph *g, const uint64_t *homo, size_t n,
                                int32_t *etype, uint64_t *per_type);
int rdps_graph_map_to_homo_eid(struct rdps_graph *g, uint32_t etype, const uint64_t *per_type,
                               size_t n, uint64_t *homo);
int rdps_graph_nid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part);
int rdps_graph_eid2partid(struct rdps_graph *g, const uint64_t *homo, size_t n, uint32_t *part);
struct rdps_graph_data_info {
    const char *name;
    const char *table;
    const char *dtype;
    uint32_t ndim;
    const uint64_t *shape;
    uint32_t row_bytes;
    uint64_t num_rows;
};
int rdps_graph_data(const struct rdps_graph *g, int edge, uint32_t type, uint32_t i,
                    struct rdps_graph_data_info *info);
int rdps_graph_out_degrees(struct rdps_graph *g, const uint64_t *nodes, size_t n,
                           uint64_t *deg);
struct rdps_sample_spec {
    const int32_t *fanouts;
    bool out;
    bool replace;
    const char *prob;
    const uint64_t *exclude;
    size_t num_exclude;
    int way;
    uint64_t seed;
};
struct rdps_sample_result {
    const uint64_t *src, *dst, *eid;
    const int32_t *etype;
    const int64_t *type;
    const uint32_t *seed_index;
    size_t num_edges;
};
int rdps_graph_sample(struct rdps_graph *g, const uint64_t *seeds, size_t n,
                      const struct rdps_sample_spec *spec,
                      const struct rdps_sample_result **out);

/* partition.h: graph partitions (issue 26) */
struct rdps_graph_array {
    const char *name;
    const char *dtype;
    uint32_t ndim;
    uint64_t shape[8];
    const void *data;
};
struct rdps_graph_ntype_input {
    const char *name;
    uint64_t num_nodes;
    uint32_t num_data;
    const struct rdps_graph_array *data;
    const int64_t *balance;
};
struct rdps_graph_etype_input {
    const char *src, *name, *dst;
    uint64_t num_edges;
    const int64_t *src_ids, *dst_ids;
    const int64_t *types;
    uint32_t num_data;
    const struct rdps_graph_array *data;
};
struct rdps_graph_input {
    const char *name;
    uint32_t num_ntypes;
    const struct rdps_graph_ntype_input *ntypes;
    uint32_t num_etypes;
    const struct rdps_graph_etype_input *etypes;
    const char *meta_json;
    uint32_t num_classes;
};
struct rdps_graph_partition_opts {
    const char *data_dir;
    const char *out_dir;
    uint32_t k;
    int method;
    bool balance_train;
    bool balance_edges;
    uint64_t seed;
    int force;
    uint32_t trainers_per_part;
    const uint32_t *assignment;
};
struct rdps_graph_partition_result {
    uint64_t num_nodes, num_edges, num_train;
    uint64_t local_edges;
    double local_edge_fraction;
    uint64_t max_part_nodes, max_part_edges, max_part_train;
    double seconds;
    long peak_rss_kib;
};
int rdps_graph_partition_build_input(const struct rdps_graph_input *in,
                                     const struct rdps_graph_partition_opts *o,
                                     struct rdps_graph_partition_result *res, char *err,
                                     size_t errlen);
int rdps_graph_partition_build(const struct rdps_graph_partition_opts *o,
                               struct rdps_graph_partition_result *res, char *err,
                               size_t errlen);

/* server.h: the package makes servers with no table (standalone), so it
 * sets only the fields before the tables; the rest of the config is
 * zeros (defaults) in a buffer of SERVER_CONFIG_BYTES, whatever the
 * layout of the tables and of the fields after them. */
struct rdps_server_config_head {
    const char *transport;
    const struct rdps_ipconfig *ipc;
    uint32_t server_id;
    uint32_t num_tables;
};
struct rdps_server;
int rdps_server_create(const void *cfg, struct rdps_server **out, char *err, size_t errlen);
int rdps_server_run(struct rdps_server *s);
void rdps_server_stop(struct rdps_server *s);
void rdps_server_destroy(struct rdps_server *s);
"""

# enum rdps_dtype (transport.h)
DTYPE_F32, DTYPE_F64, DTYPE_I64, DTYPE_U8 = 0, 1, 2, 3
# enum rdps_optimizer (kvstore.h)
OPT_SGD, OPT_ADAGRAD_ROW, OPT_ADAGRAD, OPT_ADAM, OPT_NONE = 0, 1, 2, 3, 4
# enum rdps_init (kvstore.h)
INIT_UNIFORM, INIT_ZEROS = 0, 1
# RDPS_TABLE_NAME_MAX (kvstore.h): names are shorter
TABLE_NAME_MAX = 32
# Bytes allocated for a struct rdps_server_config (at least its size:
# tests/python/test_abi.py checks it)
SERVER_CONFIG_BYTES = 1 << 16
ERRLEN = 640
# RDPS_SAMPLE_MAX_FANOUT (transport.h)
SAMPLE_MAX_FANOUT = 1024
# enum rdps_partition_method (partition.h)
PARTITION_METIS, PARTITION_RANDOM = 0, 1
# enum rdps_sample_way (graph.h)
SAMPLE_RPC, SAMPLE_READ = 0, 1

ffi = cffi.FFI()
ffi.cdef(CDEF)

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("RDPS_LIBRARY")
    if env:
        yield env, "$RDPS_LIBRARY"
        return
    try:
        from . import _installed  # written by cmake --install only
    except ImportError:
        _installed = None
    if _installed is not None:
        path = _installed.LIBRARY
        if not os.path.isabs(path):
            path = os.path.normpath(os.path.join(_here, path))
        yield path, "the installed library"
    # python/rdps/_ffi.py -> python/../build/librdps.so.0
    build = os.path.normpath(os.path.join(_here, "..", "..", "build", "librdps.so.0"))
    if os.path.exists(build):
        yield build, "the build tree"
    yield "librdps.so.0", "the system's library path"


def _load():
    tried = []
    for path, where in _candidates():
        try:
            lib = ffi.dlopen(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
            continue
        return lib, path
    raise ImportError("rdps: cannot load librdps.so.0; tried " + "; ".join(tried) +
                      " (build it with 'cmake --build build', or set RDPS_LIBRARY to its path)")


lib, library_path = _load()
lib.rdps_log_init()
if not os.environ.get("RDPS_LOG_LEVEL"):
    lib.rdps_log_threshold = 1  # RDPS_LOG_WARN: a script's output is its own


def string(p):
    """A C string (char *) as str ("" for NULL)."""
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""
