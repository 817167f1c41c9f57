# SPDX-License-Identifier: MIT
"""Partitioning a DGL graph for rdps (dgl.distributed.partition_graph), and
converting DGL's own partitions.

    import rdps.distributed as dist
    dist.partition_graph(g, "mag", 2, "parts", balance_edges=True)
    g = dist.DistGraph("mag", part_config="parts/mag.json")

partition_graph takes a DGLGraph, homogeneous or heterogeneous, with node
and edge data of any name, dtype and shape, and writes an rdps graph
partition (include/rdps/graph.h: partition.json with the XXH3 of every
file, the parts' .npy files; what `rdps server --graph DIR` serves) plus
DGL's <graph_name>.json, with the keys DGL writes (graph_name, num_nodes,
num_edges, part_method, num_parts, halo_hops, node_map, edge_map, ntypes,
etypes, part-i), so code that reads DGL's config finds what it expects.
The ids are DGL's RangePartitionBook's: homo ids part after part and type
after type, per-type ids part after part. What differs from DGL: the parts
hold no halo (the servers sample; num_hops is recorded, not used), and
part-i names rdps's files, not .dgl ones.

A partition DGL made converts with one command, keeping DGL's node ids and
parts (edge ids are renumbered inside each part and etype; the edges'
DGL ids are their "original" ids):

    python3 -m rdps.from_dgl --from-dgl OUT/graph.json --out PARTS

`rdps partition --data GRAPHDIR` stays the CLI for datasets on disk.
"""
import argparse
import errno
import json
import os
import sys

import numpy as np

from .._errors import RdpsError
from .._ffi import ERRLEN, PARTITION_METIS, PARTITION_RANDOM, ffi, lib, string

__all__ = ["partition_graph", "convert_dgl_partition", "load_mapping"]

_METHODS = {"metis": PARTITION_METIS, "random": PARTITION_RANDOM}

# torch dtype name -> rdps's name of it (rdps/partition.h)
_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16",
           "bfloat16": "bfloat16", "int64": "int64", "int32": "int32", "int16": "int16",
           "int8": "int8", "uint8": "uint8", "bool": "bool"}


class _Keep:
    """cffi objects and arrays that must live as long as the C call."""

    def __init__(self):
        self.objs = []

    def __call__(self, x):
        self.objs.append(x)
        return x

    def str(self, s):
        return self(ffi.new("char[]", s.encode("utf-8")))


def _as_numpy(x, what):
    """A tensor (or array) as a C-contiguous numpy array and rdps's dtype name."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the package
        torch = None
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        name = str(t.dtype).replace("torch.", "")
        if name not in _DTYPES:
            raise RdpsError(-errno.EINVAL, "%s: dtype %s is not one rdps serves (%s)" %
                            (what, t.dtype, ", ".join(sorted(_DTYPES))))
        if name == "bfloat16":  # numpy has none: its bytes, named by the JSON
            return np.ascontiguousarray(t.view(torch.int16).numpy().view(np.uint16)), name
        return np.ascontiguousarray(t.numpy()), name
    a = np.ascontiguousarray(np.asarray(x))
    name = a.dtype.name
    if name not in _DTYPES and name not in ("uint16", "uint32", "uint64"):
        raise RdpsError(-errno.EINVAL, "%s: dtype %s is not one rdps serves" % (what, a.dtype))
    return a, name


def _arrays(keep, data, what):
    """struct rdps_graph_array[] of a DGL data view (name -> tensor)."""
    names = list(data.keys())
    arr = keep(ffi.new("struct rdps_graph_array[]", max(1, len(names))))
    for i, name in enumerate(names):
        a, dt = _as_numpy(data[name], "%s data '%s'" % (what, name))
        if a.ndim < 1 or a.ndim > 8:
            raise RdpsError(-errno.EINVAL, "%s data '%s': %d dimensions (want 1..8)" %
                            (what, name, a.ndim))
        keep(a)
        arr[i].name = keep.str(str(name))
        arr[i].dtype = keep.str(dt)
        arr[i].ndim = a.ndim
        for k, d in enumerate(a.shape):
            arr[i].shape[k] = d
        arr[i].data = ffi.cast("void *", a.ctypes.data) if a.size else ffi.NULL
    return arr, len(names)


def _i64(keep, x):
    a = keep(np.ascontiguousarray(np.asarray(x), dtype=np.int64))
    return ffi.cast("int64_t *", a.ctypes.data) if a.size else ffi.NULL


def _graph_input(keep, g, graph_name, balance_ntypes, node_data=None, edge_data=None,
                 edges=None):
    """struct rdps_graph_input of a DGLGraph (or of its parts: node_data[nt],
    edge_data[c], edges[c] = (src, dst) given instead of g's)."""
    ntypes = list(g.ntypes) if hasattr(g, "ntypes") else g["ntypes"]
    cetypes = list(g.canonical_etypes) if hasattr(g, "canonical_etypes") else g["etypes"]
    if balance_ntypes is not None and not isinstance(balance_ntypes, dict):
        if len(ntypes) != 1:
            raise RdpsError(-errno.EINVAL, "partition_graph: balance_ntypes of a graph of %d "
                            "node types must be a dict {ntype: classes}" % len(ntypes))
        balance_ntypes = {ntypes[0]: balance_ntypes}
    nts = keep(ffi.new("struct rdps_graph_ntype_input[]", len(ntypes)))
    for i, nt in enumerate(ntypes):
        nts[i].name = keep.str(nt)
        data = node_data[nt] if node_data is not None else g.nodes[nt].data
        nts[i].num_nodes = g.num_nodes(nt) if node_data is None else g["num_nodes"][nt]
        nts[i].data, nts[i].num_data = _arrays(keep, data, "node type '%s':" % nt)
        if balance_ntypes is not None and nt in balance_ntypes:
            b, _ = _as_numpy(balance_ntypes[nt], "balance_ntypes['%s']" % nt)
            nts[i].balance = _i64(keep, b.astype(np.int64))
    ets = keep(ffi.new("struct rdps_graph_etype_input[]", len(cetypes)))
    for i, c in enumerate(cetypes):
        src, et, dst = c
        ets[i].src, ets[i].name, ets[i].dst = keep.str(src), keep.str(et), keep.str(dst)
        if edges is not None:
            u, v = edges[c]
        else:
            u, v = g.edges(etype=c, order="eid")
        u, _ = _as_numpy(u, "edges")
        v, _ = _as_numpy(v, "edges")
        ets[i].num_edges = len(u)
        ets[i].src_ids, ets[i].dst_ids = _i64(keep, u), _i64(keep, v)
        data = edge_data[c] if edge_data is not None else g.edges[c].data
        ets[i].data, ets[i].num_data = _arrays(keep, data, "edge type %s:" % (c,))
    gi = keep(ffi.new("struct rdps_graph_input *"))
    gi.name = keep.str(graph_name)
    gi.num_ntypes, gi.ntypes = len(ntypes), nts
    gi.num_etypes, gi.etypes = len(cetypes), ets
    gi.meta_json = keep.str(json.dumps({"name": graph_name, "from": "dgl"}))
    return gi


def _check_out_path(out_path):
    """0 if out_path is new or empty, 1 if it holds an rdps graph partition
    (replaced whole), else an error: the builder replaces the directory."""
    if not os.path.exists(out_path):
        return 0
    if not os.path.isdir(out_path):
        raise RdpsError(-errno.ENOTDIR, "partition_graph: out_path %s is not a directory" %
                        out_path)
    if not os.listdir(out_path):
        return 1
    try:
        with open(os.path.join(out_path, "partition.json")) as f:
            if json.load(f).get("format") == "rdps-graph-partition":
                return 1
    except (OSError, ValueError):
        pass
    raise RdpsError(-errno.EEXIST, "partition_graph: out_path %s is not empty and holds no rdps "
                    "graph partition (it is replaced whole): give a new or empty directory" %
                    out_path)


def _build(gi, num_parts, out_path, method, balance_edges, seed, trainers, assignment=None):
    keep = _Keep()
    o = keep(ffi.new("struct rdps_graph_partition_opts *"))
    o.out_dir = keep.str(out_path)
    o.k = int(num_parts)
    o.method = method
    o.balance_edges = bool(balance_edges)
    o.seed = int(seed)
    o.force = _check_out_path(out_path)
    o.trainers_per_part = max(1, int(trainers))
    if assignment is not None:
        a = keep(np.ascontiguousarray(assignment, dtype=np.uint32))
        o.assignment = ffi.cast("uint32_t *", a.ctypes.data)
    res = ffi.new("struct rdps_graph_partition_result *")
    err = ffi.new("char[]", ERRLEN)
    ret = lib.rdps_graph_partition_build_input(gi, o, res, err, ERRLEN)
    if ret:
        raise RdpsError(ret, "partition_graph: %s" % (string(err) or os.strerror(-ret)))
    return res


def _write_dgl_config(out_path, graph_name, part_method, num_hops):
    """DGL's <graph_name>.json, from rdps's partition.json."""
    with open(os.path.join(out_path, "partition.json")) as f:
        meta = json.load(f)
    k = meta["k"]
    nts, ets = meta["ntypes"], meta["etypes"]
    cname = ["%s:%s:%s" % (e["src"], e["name"], e["dst"]) for e in ets]
    conf = {
        "graph_name": graph_name,
        "num_nodes": meta["num_nodes"],
        "num_edges": meta["num_edges"],
        "part_method": part_method,
        "num_parts": k,
        "halo_hops": num_hops,
        "node_map": {t["name"]: t["node_map"] for t in nts},
        "edge_map": {c: e["edge_map"] for c, e in zip(cname, ets)},
        "ntypes": {t["name"]: i for i, t in enumerate(nts)},
        "etypes": {c: i for i, c in enumerate(cname)},
    }
    for p in range(k):
        conf["part-%d" % p] = {"node_feats": "part-%d-nd" % p, "edge_feats": "part-%d-ed" % p,
                               "part_graph": "part-%d-edges.npy" % p}
    conf["rdps"] = {"partition": "partition.json", "format_version": meta["format_version"],
                    "note": "the parts are rdps's (.npy files, checksummed in partition.json); "
                            "no halo: the servers sample"}
    tmp = os.path.join(out_path, ".%s.json.tmp" % graph_name)
    with open(tmp, "w") as f:
        json.dump(conf, f, indent=4)
    os.replace(tmp, os.path.join(out_path, "%s.json" % graph_name))


def _npy(path):
    return np.load(path, mmap_mode="r")


def load_mapping(part_dir):
    """(orig_nids, orig_eids) of a partition: new per-type id -> the input's
    per-type id, as tensors (a graph of one type each) or dicts {ntype:
    tensor} and {canonical etype: tensor} (DGL's return_mapping)."""
    import torch

    with open(os.path.join(part_dir, "partition.json")) as f:
        meta = json.load(f)
    k = meta["k"]
    idmap = _npy(os.path.join(part_dir, "idmap.npy"))
    edge_lo = meta["edge_ranges"]
    edges = [_npy(os.path.join(part_dir, "part-%d-edges.npy" % p)) for p in range(k)]
    nids, eids = {}, {}
    for t in meta["ntypes"]:
        nids[t["name"]] = torch.from_numpy(np.concatenate(
            [np.asarray(idmap[lo:hi]) for lo, hi in t["node_map"]]).astype(np.int64))
    for e in meta["etypes"]:
        c = (e["src"], e["name"], e["dst"])
        eids[c] = torch.from_numpy(np.concatenate(
            [np.asarray(edges[p][lo - edge_lo[p]:hi - edge_lo[p], 3])
             for p, (lo, hi) in enumerate(e["edge_map"])]).astype(np.int64))
    if len(nids) == 1 and len(eids) == 1:
        return next(iter(nids.values())), next(iter(eids.values()))
    return nids, eids


def partition_graph(g, graph_name, num_parts, out_path, num_hops=1, part_method="metis",
                    balance_ntypes=None, balance_edges=False, return_mapping=False,
                    num_trainers_per_machine=1, objtype="cut", graph_formats=None, seed=0):
    """Partitions DGLGraph g into num_parts parts in out_path, as
    dgl.distributed.partition_graph does (the module's docstring says what
    differs). part_method: "metis" (balanced on each node type, or on the
    classes of balance_ntypes, and with balance_edges on in-edges) or
    "random". num_trainers_per_machine > 1 (METIS): node and edge data
    "trainer_id" as DGL's. return_mapping: also returns (orig_nids,
    orig_eids), DGL's. objtype "cut" only; graph_formats is DGL's storage
    choice (rdps stores what it serves)."""
    if part_method not in _METHODS:
        raise RdpsError(-errno.EINVAL, "partition_graph: part_method %r (want 'metis' or "
                        "'random')" % (part_method,))
    if objtype != "cut":
        raise RdpsError(-errno.EINVAL, "partition_graph: objtype %r: rdps's METIS minimises "
                        "the edge cut ('cut')" % (objtype,))
    if not hasattr(g, "canonical_etypes") or not hasattr(g, "ntypes"):
        raise TypeError("partition_graph: g must be a DGLGraph, not %s" % type(g).__name__)
    keep = _Keep()
    gi = _graph_input(keep, g, graph_name, balance_ntypes)
    _build(gi, num_parts, out_path, _METHODS[part_method], balance_edges, seed,
           num_trainers_per_machine)
    _write_dgl_config(out_path, graph_name, part_method, num_hops)
    if return_mapping:
        return load_mapping(out_path)
    return None


def convert_dgl_partition(part_config, out_path):
    """A partition dgl.distributed.partition_graph wrote (its JSON) -> an
    rdps partition in out_path with the same parts and node ids. Needs DGL
    (it reads DGL's .dgl files)."""
    import dgl
    import torch
    from dgl.distributed import load_partition

    with open(part_config) as f:
        conf = json.load(f)
    k, name = conf["num_parts"], conf["graph_name"]
    ntypes = sorted(conf.get("ntypes", {"_N": 0}), key=lambda t: conf["ntypes"][t]) \
        if "ntypes" in conf else ["_N"]
    etypes = sorted(conf.get("etypes", {"_N:_E:_N": 0}), key=lambda c: conf["etypes"][c]) \
        if "etypes" in conf else ["_N:_E:_N"]
    cetypes = [tuple(c.split(":")) for c in etypes]
    ncount = {t: sum(hi - lo for lo, hi in conf["node_map"][t]) for t in ntypes}
    parts_src = {c: [] for c in cetypes}
    node_feats = {t: {} for t in ntypes}
    edge_feats = {c: {} for c in cetypes}
    for p in range(k):
        local, nf, ef, gpb, _, _, _ = load_partition(part_config, p)
        inner = local.edata["inner_edge"].bool()
        u, v = local.edges()
        nid = local.ndata[dgl.NID]
        src, dst, eid = nid[u[inner]], nid[v[inner]], local.edata[dgl.EID][inner]
        etype_ids, per_eid = gpb.map_to_per_etype(eid)
        _, per_src = gpb.map_to_per_ntype(src)
        _, per_dst = gpb.map_to_per_ntype(dst)
        for i, c in enumerate(cetypes):
            m = etype_ids == i
            parts_src[c].append((per_eid[m], per_src[m], per_dst[m]))
        for key, val in nf.items():
            t, dname = key.split("/", 1) if "/" in key else (ntypes[0], key)
            node_feats[t].setdefault(dname, []).append(val)
        for key, val in ef.items():
            c = key.split("/", 1)[0] if "/" in key else etypes[0]
            dname = key.split("/", 1)[1] if "/" in key else key
            c = tuple(c.split(":")) if ":" in c else next(x for x in cetypes if x[1] == c)
            edge_feats[c].setdefault(dname, []).append(val)
    edges, edata = {}, {}
    for c in cetypes:
        e = torch.cat([x[0] for x in parts_src[c]]) if parts_src[c] else torch.zeros(0)
        order = torch.argsort(e)
        edges[c] = (torch.cat([x[1] for x in parts_src[c]])[order],
                    torch.cat([x[2] for x in parts_src[c]])[order])
        edata[c] = {n: torch.cat(vs) for n, vs in edge_feats[c].items()}
    ndata = {t: {n: torch.cat(vs) for n, vs in node_feats[t].items()} for t in ntypes}
    # every node keeps DGL's part: per-type ids are part after part
    assignment = np.concatenate([np.repeat(np.arange(k, dtype=np.uint32),
                                           [hi - lo for lo, hi in conf["node_map"][t]])
                                 for t in ntypes])
    keep = _Keep()
    spec = {"ntypes": ntypes, "etypes": cetypes, "num_nodes": ncount}
    gi = _graph_input(keep, spec, name, None, node_data=ndata, edge_data=edata, edges=edges)
    method = conf.get("part_method", "metis")
    _build(gi, k, out_path, _METHODS.get(method, PARTITION_METIS), False, 0, 1,
           assignment=assignment)
    _write_dgl_config(out_path, name, method, conf.get("halo_hops", 1))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python3 -m rdps.from_dgl",
        description="Converts a partition DGL made (dgl.distributed.partition_graph's "
                    "output: its JSON and part directories) into an rdps graph partition "
                    "with the same parts and node ids, which rdps server --graph and "
                    "DistGraph(part_config=) read.")
    ap.add_argument("--from-dgl", required=True, metavar="JSON",
                    help="DGL's partition config (OUT/<graph_name>.json)")
    ap.add_argument("--out", required=True, metavar="DIR", help="the rdps partition to write")
    a = ap.parse_args(argv)
    try:
        convert_dgl_partition(a.from_dgl, a.out)
    except (RdpsError, OSError, ValueError, KeyError) as e:
        print("rdps.from_dgl: %s" % e, file=sys.stderr)
        return 1
    with open(os.path.join(a.out, "partition.json")) as f:
        meta = json.load(f)
    print("converted %s: %d parts, %d nodes, %d edges -> %s" %
          (a.from_dgl, meta["k"], meta["num_nodes"], meta["num_edges"], a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
