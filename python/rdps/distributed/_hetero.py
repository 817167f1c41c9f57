# SPDX-License-Identifier: MIT
"""The typed graph of librdps (include/rdps/graph.h) for the Python layer:
schema, type maps, typed data and typed sampling over a struct rdps_graph *
(DistGraph's g._g), as numpy/torch arrays. Low level: DistGraph's
user-facing surface (g.nodes[nt].data, blocks, samplers) is built on it.

    h = GraphHandle(ctx, g._g)
    h.ntypes, h.canonical_etypes            # names, in type-id order
    h.node_data["paper"]["feat"]            # DataSpec: table, dtype, shape
    h.read(h.node_data["paper"]["feat"], per_type_ids)   # torch tensor, exact
    h.map_to_per_ntype(homo_ids)            # (ntype ids, per-type ids)
    s = h.sample(seeds, {("author", "writes", "paper"): 10, ...}, edge_dir="in")
"""
import errno
import json

import numpy as np
import torch

from .._errors import RdpsError
from .._ffi import SAMPLE_MAX_FANOUT, ffi, lib, string

_WAYS = {"rpc": 0, "read": 1, "one-sided": 1}

# rdps's dtype names -> (numpy dtype of the stored bytes, torch dtype)
_TORCH = {"float32": (np.float32, torch.float32), "float64": (np.float64, torch.float64),
          "float16": (np.float16, torch.float16), "bfloat16": (np.int16, torch.bfloat16),
          "int64": (np.int64, torch.int64), "int32": (np.int32, torch.int32),
          "int16": (np.int16, torch.int16), "int8": (np.int8, torch.int8),
          "uint8": (np.uint8, torch.uint8), "bool": (np.bool_, torch.bool),
          "uint16": (np.uint16, None), "uint32": (np.uint32, None), "uint64": (np.uint64, None)}


def _u64(a):
    return ffi.cast("uint64_t *", a.ctypes.data)


def _ids(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(np.asarray(x).reshape(-1), dtype=np.int64)
    if a.size and a.min() < 0:
        raise RdpsError(-errno.ERANGE, "id %d is negative" % int(a.min()))
    return a


class DataSpec:
    """One node or edge data of a type, as the servers hold it."""

    def __init__(self, info):
        self.name = string(info.name)
        self.table = string(info.table)
        self.dtype = string(info.dtype)
        self.shape = tuple(int(info.shape[i]) for i in range(info.ndim))  # a row's
        self.row_bytes = int(info.row_bytes)
        self.num_rows = int(info.num_rows)

    def __repr__(self):
        return "DataSpec(%r, table=%r, dtype=%s, shape=%s, rows=%d)" % (
            self.name, self.table, self.dtype, self.shape, self.num_rows)


class Sampled:
    """Picked edges (numpy int64 arrays of homo ids; etype: canonical etype
    id; type: the edge table's type column; seed: the seed's index), seed
    after seed, each seed's etypes in order."""

    def __init__(self, src, dst, eid, etype, type_, seed):
        self.src, self.dst, self.eid, self.etype, self.type, self.seed = (
            src, dst, eid, etype, type_, seed)

    def __len__(self):
        return len(self.src)


class GraphHandle:
    """Typed views of an open struct rdps_graph * of context ctx (whose
    check() raises RdpsError with the client's reason)."""

    def __init__(self, ctx, g):
        self._ctx, self._g = ctx, g
        self.schema = json.loads(string(lib.rdps_graph_schema(g)))
        self.num_parts = int(lib.rdps_graph_num_parts(g))
        self.ntypes = [string(lib.rdps_graph_ntype_name(g, t))
                       for t in range(int(lib.rdps_graph_num_ntypes(g)))]
        src, dst = ffi.new("uint32_t *"), ffi.new("uint32_t *")
        self.canonical_etypes = []
        for e in range(int(lib.rdps_graph_num_etypes(g))):
            name = string(lib.rdps_graph_etype_name(g, e, src, dst))
            self.canonical_etypes.append((self.ntypes[src[0]], name, self.ntypes[dst[0]]))
        self.etypes = [c[1] for c in self.canonical_etypes]
        info = ffi.new("struct rdps_graph_data_info *")
        self.node_data, self.edge_data = {}, {}
        for edge, types, out in ((0, self.ntypes, self.node_data),
                                 (1, self.canonical_etypes, self.edge_data)):
            for t, key in enumerate(types):
                out[key] = {}
                i = 0
                while lib.rdps_graph_data(g, edge, t, i, info) == 0:
                    d = DataSpec(info)
                    out[key][d.name] = d
                    i += 1

    def num_nodes(self, ntype=None):
        if ntype is None:
            return int(lib.rdps_graph_num_nodes(self._g))
        return int(lib.rdps_graph_num_nodes_of(self._g, self.ntype_id(ntype)))

    def num_edges(self, etype=None):
        if etype is None:
            return int(lib.rdps_graph_num_edges(self._g))
        return int(lib.rdps_graph_num_edges_of(self._g, self.etype_id(etype)))

    def ntype_id(self, ntype):
        if isinstance(ntype, int):
            return ntype
        r = lib.rdps_graph_ntype_id(self._g, ntype.encode())
        if r < 0:
            raise RdpsError(-errno.ENOENT, "no node type %r (the graph's: %s)" %
                            (ntype, self.ntypes))
        return r

    def etype_id(self, etype):
        if isinstance(etype, int):
            return etype
        name = ":".join(etype) if isinstance(etype, tuple) else etype
        r = lib.rdps_graph_etype_id(self._g, name.encode())
        if r < 0:
            raise RdpsError(-errno.ENOENT, "no edge type %r, or one shared by several "
                            "canonical etypes (the graph's: %s)" %
                            (etype, self.canonical_etypes))
        return r

    def type_ranges(self, edge, t):
        """[(lo, hi)] per part of type t's homo ids (DGL's node_map/edge_map)."""
        lo, hi = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        f = lib.rdps_graph_etype_range if edge else lib.rdps_graph_ntype_range
        tid = self.etype_id(t) if edge else self.ntype_id(t)
        out = []
        for p in range(self.num_parts):
            f(self._g, tid, p, lo, hi)
            out.append((int(lo[0]), int(hi[0])))
        return out

    def _map_per(self, f, ids, what):
        a = _ids(ids)
        t = np.empty(len(a), dtype=np.int32)
        per = np.empty(len(a), dtype=np.uint64)
        if len(a):
            self._ctx.check(f(self._g, _u64(a), len(a), ffi.cast("int32_t *", t.ctypes.data),
                              _u64(per)), what)
        return torch.from_numpy(t.astype(np.int64)), torch.from_numpy(per.view(np.int64))

    def _map_homo(self, f, tid, ids, what):
        a = _ids(ids)
        out = np.empty(len(a), dtype=np.uint64)
        if len(a):
            self._ctx.check(f(self._g, tid, _u64(a), len(a), _u64(out)), what)
        return torch.from_numpy(out.view(np.int64))

    def map_to_per_ntype(self, ids):
        return self._map_per(lib.rdps_graph_map_to_per_ntype, ids, "map_to_per_ntype")

    def map_to_per_etype(self, ids):
        return self._map_per(lib.rdps_graph_map_to_per_etype, ids, "map_to_per_etype")

    def map_to_homo_nid(self, ids, ntype):
        return self._map_homo(lib.rdps_graph_map_to_homo_nid, self.ntype_id(ntype), ids,
                              "map_to_homo_nid")

    def map_to_homo_eid(self, ids, etype):
        return self._map_homo(lib.rdps_graph_map_to_homo_eid, self.etype_id(etype), ids,
                              "map_to_homo_eid")

    def nid2partid(self, ids):
        a = _ids(ids)
        out = np.empty(len(a), dtype=np.uint32)
        if len(a):
            self._ctx.check(lib.rdps_graph_nid2partid(self._g, _u64(a), len(a),
                                                      ffi.cast("uint32_t *", out.ctypes.data)),
                            "nid2partid")
        return torch.from_numpy(out.astype(np.int64))

    def eid2partid(self, ids):
        a = _ids(ids)
        out = np.empty(len(a), dtype=np.uint32)
        if len(a):
            self._ctx.check(lib.rdps_graph_eid2partid(self._g, _u64(a), len(a),
                                                      ffi.cast("uint32_t *", out.ctypes.data)),
                            "eid2partid")
        return torch.from_numpy(out.astype(np.int64))

    def read(self, spec, ids):
        """Rows ids (per-type ids) of a data as a tensor of its dtype and
        shape, exactly as partitioned."""
        a = _ids(ids)
        info = ffi.new("struct rdps_table_info *")
        self._ctx.check(lib.rdps_client_table(self._ctx.client, spec.table.encode(), info),
                        "data '%s'" % spec.name)
        row = int(info.elems) * {0: 4, 1: 8, 2: 8, 3: 1}[int(info.dtype)]
        buf = np.empty(len(a) * row, dtype=np.uint8)
        if len(a):
            self._ctx.check(lib.rdps_client_get(self._ctx.client, info.id, _u64(a), len(a),
                                                ffi.cast("void *", buf.ctypes.data)),
                            "data '%s'" % spec.name)
        npdt, tdt = _TORCH[spec.dtype]
        arr = buf.view(npdt).reshape((len(a),) + spec.shape)
        if tdt is None:
            return arr
        t = torch.from_numpy(arr.copy())
        return t.view(torch.bfloat16) if spec.dtype == "bfloat16" else t

    def degrees(self, ids, edge_dir="in"):
        a = _ids(ids)
        out = np.empty(len(a), dtype=np.uint64)
        f = lib.rdps_graph_in_degrees if edge_dir == "in" else lib.rdps_graph_out_degrees
        if len(a):
            self._ctx.check(f(self._g, _u64(a), len(a), _u64(out)), "%s_degrees" % edge_dir)
        return torch.from_numpy(out.view(np.int64))

    def sample(self, seeds, fanout, edge_dir="in", replace=False, prob=None, exclude=None,
               way="rpc", seed=None):
        """Neighbours of seeds (homo ids): fanout an int (every etype) or a
        dict {etype: fanout} (-1 all, 0 or absent none); edge_dir "in" or
        "out"; prob the name of an edge data weighting the picks; exclude
        edge ids (homo) never picked; way "rpc" or "read"."""
        if way not in _WAYS:
            raise ValueError("sample: way must be 'rpc' or 'read', not %r" % (way,))
        if edge_dir not in ("in", "out"):
            raise ValueError("sample: edge_dir must be 'in' or 'out', not %r" % (edge_dir,))
        R = len(self.canonical_etypes)
        f = np.zeros(R, dtype=np.int32)
        if isinstance(fanout, dict):
            for k, v in fanout.items():
                f[self.etype_id(k)] = int(v)
        else:
            f[:] = int(fanout)
        if ((f < -1) | (f > SAMPLE_MAX_FANOUT)).any():
            raise ValueError("sample: fanouts %s: each -1 (all), 0 (none) or up to %d" %
                             (f.tolist(), SAMPLE_MAX_FANOUT))
        a = _ids(seeds)
        ex = _ids(exclude) if exclude is not None else np.zeros(0, dtype=np.int64)
        sp = ffi.new("struct rdps_sample_spec *")
        sp.fanouts = ffi.cast("int32_t *", f.ctypes.data)
        sp.out = edge_dir == "out"
        sp.replace = bool(replace)
        keep = ffi.new("char[]", prob.encode()) if prob is not None else ffi.NULL
        sp.prob = keep
        sp.exclude = _u64(ex) if len(ex) else ffi.NULL
        sp.num_exclude = len(ex)
        sp.way = _WAYS[way]
        sp.seed = (int(torch.randint(0, 2 ** 62, (1,))) if seed is None else int(seed)) \
            & (2 ** 64 - 1)
        res = ffi.new("struct rdps_sample_result **")
        if len(a):
            self._ctx.check(lib.rdps_graph_sample(self._g, _u64(a), len(a), sp, res),
                            "sample (%s, %s)" % (way, edge_dir))
            r = res[0]
            m = int(r.num_edges)
        else:
            m = 0

        def arr(ptr, ct, dt):
            if not m:
                return np.zeros(0, dtype=dt)
            return np.frombuffer(ffi.buffer(ffi.cast(ct, ptr), m * np.dtype(dt).itemsize),
                                 dtype=dt).copy()

        if not m:
            z = np.zeros(0, dtype=np.int64)
            return Sampled(z, z, z, z, z, z)
        r = res[0]
        return Sampled(arr(r.src, "uint64_t *", np.int64), arr(r.dst, "uint64_t *", np.int64),
                       arr(r.eid, "uint64_t *", np.int64),
                       arr(r.etype, "int32_t *", np.int32).astype(np.int64),
                       arr(r.type, "int64_t *", np.int64),
                       arr(r.seed_index, "uint32_t *", np.uint32).astype(np.int64))
