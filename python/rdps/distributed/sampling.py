# SPDX-License-Identifier: MIT
"""Neighbour sampling of a DistGraph, rdps's way (include/rdps/graph.h):
picked by the seeds' servers ('rpc') or by this client after one-sided
reads of the CSR ('read'), and what DGL's samplers get from it.

Two surfaces:
  - rdps's own: sample_neighbors(g, seeds, fanout, way, seed) ->
    SampledEdges; NeighborSampler and Block, which need no DGL;
  - DGL's: DistGraph.sample_neighbors (what dgl.dataloading's samplers call)
    -> sample_frontier(), a DGL graph, with DGL's options: fanout -1 (every
    in-edge), replace, prob (an edata name), exclude_edges.

Uniform sampling without replacement runs in C (rdps_graph_sample_neighbors);
DGL's options (per-etype fanout dicts, -1, replace, prob as an edge data of
the partition, exclude, edge_dir 'out') run in C too (rdps_graph_sample, the
same two ways). Weights held by a DistTensor assigned as edata at run time
(not in the partition) are the one case picked here, on this client, from
the seeds' whole in-edge lists read as rows of the graph's tables.
"""
import errno

import numpy as np
import torch

from .._errors import RdpsError
from .._ffi import SAMPLE_MAX_FANOUT, ffi
from ._context import lib
from .graph import EID, ETYPE, NID, _ids, _u64, dgl_module

class SampledEdges:
    """Edges sampled for seeds: src, dst, eid and etype (int64 tensors),
    seed after seed, each seed's in increasing edge id."""

    def __init__(self, src, dst, eid, etype):
        self.src, self.dst, self.eid, self.etype = src, dst, eid, etype

    def __len__(self):
        return len(self.src)

    def edges(self):
        return self.src, self.dst


_WAYS = {"rpc": 0, "read": 1, "one-sided": 1}


def check_way(way):
    if way not in _WAYS:
        raise ValueError("sample_neighbors: way must be 'rpc' (the seeds' servers pick) or "
                         "'read' (one-sided reads, no server CPU), not %r" % (way,))
    return _WAYS[way]


def sample_neighbors(g, seeds, fanout, way="rpc", seed=None):
    """Up to fanout in-edges of each seed, uniformly without replacement
    (all of them where a node has fewer), as dgl.distributed.sample_neighbors;
    way 'rpc' asks the servers holding the seeds, 'read' reads the CSR with
    one-sided reads (RDMA READs over verbs and ofi). seed (an int) fixes the
    random choices: the same seed picks the same edges either way; None
    draws one from torch's generator."""
    ctx = g._live()
    nodes = _ids(seeds, "sample_neighbors")
    fanout = int(fanout)
    if not 1 <= fanout <= SAMPLE_MAX_FANOUT:
        raise ValueError("sample_neighbors: fanout %d is not in 1..%d" %
                         (fanout, SAMPLE_MAX_FANOUT))
    if seed is None:
        seed = int(torch.randint(0, 2 ** 62, (1,)))
    cap = len(nodes) * fanout
    src = np.empty(cap, dtype=np.uint64)
    dst = np.empty(cap, dtype=np.uint64)
    eid = np.empty(cap, dtype=np.uint64)
    et = np.empty(cap, dtype=np.int64)
    out = ffi.new("struct rdps_sampled *")
    out.src, out.dst, out.eid = _u64(src), _u64(dst), _u64(eid)
    out.etype = ffi.cast("int64_t *", et.ctypes.data)
    if len(nodes):
        ctx.check(lib.rdps_graph_sample_neighbors(g._g, _u64(nodes), len(nodes), fanout,
                                                  check_way(way), seed & (2 ** 64 - 1), out),
                  "sample_neighbors (%s)" % way)
    m = int(out.num_edges)
    return SampledEdges(*(torch.from_numpy(a[:m].view(np.int64)) for a in (src, dst, eid, et)))


class Block:
    """One layer's bipartite graph of a mini-batch (DGL's block): the
    destination nodes are the first num_dst_nodes() of the source nodes;
    edges (src, dst) are local indices into them. srcdata[NID] holds the
    source nodes' global ids; edata[EID] and edata[ETYPE] the edges' ids
    and types."""

    def __init__(self, src_nodes, num_dst, esrc, edst, eid, etype):
        self.srcdata = {NID: src_nodes}
        self.dstdata = {NID: src_nodes[:num_dst]}
        self.edata = {EID: eid, ETYPE: etype}
        self._num_dst = num_dst
        self._esrc, self._edst = esrc, edst

    def num_src_nodes(self):
        return len(self.srcdata[NID])

    def num_dst_nodes(self):
        return self._num_dst

    def num_edges(self):
        return len(self._esrc)

    def edges(self):
        return self._esrc, self._edst

    def in_degrees(self):
        """In-degrees of the destination nodes within the block."""
        return torch.bincount(self._edst, minlength=self._num_dst)

    def __repr__(self):
        return "Block(num_src_nodes=%d, num_dst_nodes=%d, num_edges=%d)" % (
            self.num_src_nodes(), self._num_dst, self.num_edges())


def to_block(dst_nodes, sampled):
    """The block of sampled edges into dst_nodes (unique): its source nodes
    are dst_nodes, then the other sources in the order they first occur."""
    dst_nodes = _ids(dst_nodes, "to_block")
    src = sampled.src.numpy()
    cand = np.concatenate([dst_nodes, src])
    uniq, first = np.unique(cand, return_index=True)
    order = np.argsort(first, kind="stable")
    local = np.empty(len(uniq), dtype=np.int64)
    local[order] = np.arange(len(uniq))
    src_nodes = uniq[order]
    if len(uniq) < len(dst_nodes) or not np.array_equal(src_nodes[:len(dst_nodes)], dst_nodes):
        raise ValueError("to_block: the destination nodes repeat an id")
    esrc = local[np.searchsorted(uniq, src)]
    edst = local[np.searchsorted(uniq, sampled.dst.numpy())]
    return Block(torch.from_numpy(src_nodes), len(dst_nodes), torch.from_numpy(esrc),
                 torch.from_numpy(edst), sampled.eid, sampled.etype)


class NeighborSampler:
    """Multi-layer neighbour sampling (dgl.dataloading.NeighborSampler):
    fanouts[i] in-edges per node for layer i (input layer first, as DGL's:
    the last fanout is sampled first, from the seeds). way: 'rpc' or
    'read'. seed fixes the stream of random choices (each call draws the
    next); None: torch's generator."""

    def __init__(self, fanouts, way="rpc", seed=None):
        self.fanouts = [int(f) for f in fanouts]
        if not self.fanouts or any(not 1 <= f <= SAMPLE_MAX_FANOUT for f in self.fanouts):
            raise ValueError("NeighborSampler: fanouts %r: each in 1..%d" %
                             (fanouts, SAMPLE_MAX_FANOUT))
        self.way = way
        check_way(way)
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self.edges_sampled = 0

    def _seed(self):
        if self._rng is None:
            return None
        return int(self._rng.integers(0, 2 ** 62))

    def sample_blocks(self, g, seeds):
        """(input_nodes, output_nodes, blocks): blocks[0] is the input layer's."""
        seeds = torch.from_numpy(_ids(seeds, "sample_blocks"))
        blocks = []
        dst = seeds
        for fanout in reversed(self.fanouts):
            s = sample_neighbors(g, dst, fanout, self.way, self._seed())
            self.edges_sampled += len(s)
            b = to_block(dst, s)
            blocks.insert(0, b)
            dst = b.srcdata[NID]
        return dst, seeds, blocks


# -- DGL's samplers: the frontier --------------------------------------------


def _rng():
    # Drawn from torch's generator: torch.manual_seed makes a run repeat.
    return np.random.default_rng(int(torch.randint(0, 2 ** 62, (1,))))


def _in_edges(g, seeds):
    """The seeds' whole in-edge lists, read from the graph's tables:
    (eid, src, seg) with seg the index of the edge's seed, seed after seed."""
    if not len(seeds):
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    if seeds.max() >= g.num_nodes():
        raise RdpsError(-errno.ERANGE, "sample_neighbors: seed %d is not below the graph's %d "
                        "nodes" % (int(seeds.max()), g.num_nodes()))
    ptr = g._indptr[torch.from_numpy(seeds)].numpy()
    deg = ptr[:, 1] - ptr[:, 0]
    seg = np.repeat(np.arange(len(seeds)), deg)
    starts = np.repeat(ptr[:, 0] - np.concatenate([[0], np.cumsum(deg)[:-1]]), deg)
    eid = starts + np.arange(len(seg))
    rows = g._edges[torch.from_numpy(eid)].numpy() if len(eid) else np.empty((0, 4), np.int64)
    return eid, rows[:, 0].copy(), seg


def _segments_first_k(seg, key, k):
    """Indices of the k smallest keys of each segment (seg sorted)."""
    order = np.lexsort((key, seg))
    s = seg[order]
    start = np.searchsorted(s, s, side="left")
    rank = np.arange(len(s)) - start
    return np.sort(order[rank < k])


def _pick(g, seeds, eid, src, seg, fanout, replace, prob, excluded):
    """Indices into (eid, src, seg) of the picked edges, DGL's way: fanout
    < 0 every edge; otherwise fanout per seed, uniform or by prob (an
    edata name: weights; zero never picked), with or without
    replacement; excluded edges never."""
    keep = np.ones(len(eid), dtype=bool)
    if excluded is not None:
        keep &= ~np.isin(eid, excluded)
    w = None
    if prob is not None:
        if prob not in g.edata:
            raise KeyError("sample_neighbors: prob %r is not an edata of the graph (it has %s)" %
                           (prob, sorted(g.edata)))
        w = g.edata[prob][torch.from_numpy(eid)].to(torch.float64).numpy().reshape(len(eid))
        if len(w) and (w.min() < 0 or not np.isfinite(w).all()):
            raise ValueError("sample_neighbors: prob %r has a negative or non-finite weight" %
                             (prob,))
        keep &= w > 0
    idx = np.flatnonzero(keep)
    if fanout < 0 or not len(idx):
        return idx
    rng = _rng()
    seg_k = seg[idx]
    if not replace:
        if w is None:
            key = rng.random(len(idx))
        else:  # Efraimidis-Spirakis: the k largest u^(1/w)
            key = -np.log(rng.random(len(idx))) / w[idx]
        return idx[_segments_first_k(seg_k, key, fanout)]
    # With replacement: fanout draws for each seed with an edge.
    nseg = len(seeds)
    counts = np.bincount(seg_k, minlength=nseg)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    has = np.flatnonzero(counts)
    draw_seg = np.repeat(has, fanout)
    if w is None:
        pos = first[draw_seg] + (rng.random(len(draw_seg)) * counts[draw_seg]).astype(np.int64)
        pos = np.minimum(pos, first[draw_seg] + counts[draw_seg] - 1)
    else:
        cw = np.cumsum(w[idx])
        base = np.where(first > 0, cw[first - 1], 0.0)
        tot = cw[first + counts - 1] - base
        target = base[draw_seg] + rng.random(len(draw_seg)) * tot[draw_seg]
        pos = np.searchsorted(cw, target, side="right")
        pos = np.clip(pos, first[draw_seg], first[draw_seg] + counts[draw_seg] - 1)
    return idx[pos]


def _homo_seeds(g, seed_nodes):
    """Seeds as homo ids: a tensor (a graph of one node type: its ids) or a
    dict {ntype: per-type ids}."""
    if not isinstance(seed_nodes, dict):
        if not g.is_homogeneous() and len(g.ntypes) != 1:
            raise RdpsError(-errno.EINVAL, "sample_neighbors: the graph has node types %s: "
                            "give the seeds as {ntype: ids}" % (g.ntypes,))
        return _ids(seed_nodes, "sample_neighbors")
    parts = []
    for nt, ids in seed_nodes.items():
        per = _ids(ids, "sample_neighbors")
        parts.append(g._types.map_to_homo_nid(per, g._ntype(nt)).numpy() if len(per)
                     else per)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _fanouts(g, fanout):
    """{canonical etype: fanout} of an int or a dict keyed by etype."""
    if isinstance(fanout, dict):
        return {g.to_canonical_etype(k): int(v) for k, v in fanout.items()}
    return {cet: int(fanout) for cet in g.canonical_etypes}


def _exclude(g, exclude_edges):
    if exclude_edges is None:
        return None
    if isinstance(exclude_edges, dict):
        parts = []
        for et, ids in exclude_edges.items():
            per = _ids(ids, "exclude_edges")
            cet = g.to_canonical_etype(et)
            parts.append(per if g.is_homogeneous() or not len(per)
                         else g._types.map_to_homo_eid(per, cet).numpy())
        ex = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    else:
        ex = _ids(exclude_edges, "exclude_edges")
    ex = np.unique(ex)
    return ex if len(ex) else None


def _assigned_prob(g, prob):
    """True if prob names a DistTensor assigned as edata (not the
    partition's data, which the C sampler weights by)."""
    if prob is None or not g.is_homogeneous():
        return False
    return prob in g.edata._added


def sample_edges(g, seed_nodes, fanout, edge_dir="in", prob=None, exclude_edges=None,
                 replace=False):
    """DGL's sample_neighbors options on rdps's sampling: the picked edges
    (homo ids) of seed_nodes as numpy arrays (src, dst, eid, canonical etype
    id)."""
    if edge_dir not in ("in", "out"):
        raise ValueError("sample_neighbors: edge_dir is 'in' or 'out', not %r" % (edge_dir,))
    seeds = _homo_seeds(g, seed_nodes)
    fan = _fanouts(g, fanout)
    excluded = _exclude(g, exclude_edges)
    if not len(seeds) or all(f == 0 for f in fan.values()):
        e = np.empty(0, dtype=np.int64)
        return e, e, e, e
    if _assigned_prob(g, prob):
        if edge_dir != "in":
            raise RdpsError(-errno.EOPNOTSUPP, "sample_neighbors: prob %r is a DistTensor "
                            "assigned as edata: weighted out-edge sampling needs it in the "
                            "partition (partition_graph with g.edata[%r])" % (prob, prob))
        f = next(iter(fan.values()))
        e2, s2, seg = _in_edges(g, seeds)
        i = _pick(g, seeds, e2, s2, seg, f, replace, prob, excluded)
        return s2[i], seeds[seg[i]], e2[i], np.zeros(len(i), dtype=np.int64)
    s = g._types.sample(seeds, fan, edge_dir=edge_dir, replace=replace, prob=prob,
                        exclude=excluded, way=g.sample_way)
    return s.src, s.dst, s.eid, s.etype


def sample_frontier(g, seed_nodes, fanout, edge_dir="in", prob=None, exclude_edges=None,
                    replace=False):
    """The frontier DGL's samplers build blocks from (what
    dgl.distributed.sample_neighbors returns): a DGL graph of every node of
    g with the picked edges of seed_nodes, edata[EID] their ids; for a
    heterogeneous graph a heterograph in per-type ids."""
    dgl = dgl_module("sample_neighbors")
    src, dst, eid, et = sample_edges(g, seed_nodes, fanout, edge_dir, prob, exclude_edges,
                                     replace)
    if g.is_homogeneous():
        fr = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=g.num_nodes())
        fr.edata[EID] = torch.from_numpy(eid)
        return fr
    t = g._types
    ps = t.map_to_per_ntype(src)[1] if len(src) else torch.empty(0, dtype=torch.int64)
    pd = t.map_to_per_ntype(dst)[1] if len(dst) else torch.empty(0, dtype=torch.int64)
    pe = t.map_to_per_etype(eid)[1] if len(eid) else torch.empty(0, dtype=torch.int64)
    et = torch.from_numpy(et)
    data, eids = {}, {}
    for i, cet in enumerate(g.canonical_etypes):
        m = et == i
        data[cet] = (ps[m], pd[m])
        eids[cet] = pe[m]
    fr = dgl.heterograph(data, {nt: g.num_nodes(nt) for nt in g.ntypes})
    for cet, e in eids.items():
        fr.edges[cet].data[EID] = e
    return fr
