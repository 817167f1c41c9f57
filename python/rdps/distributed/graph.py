# SPDX-License-Identifier: MIT
"""DistGraph: a graph held by the servers (dgl.distributed.DistGraph), and
neighbour sampling two ways (include/rdps/graph.h).

    g = dist.DistGraph("wordnet", part_config="parts")   # standalone: served here
    train = dist.node_split(g.ndata["train_mask"], g.get_partition_book())
    sampler = dist.NeighborSampler([10, 25], way="read")  # or "rpc"
    for input_nodes, seeds, blocks in dist.DistNodeDataLoader(g, train, sampler, 1000):
        h = g.ndata["feat"][input_nodes]
        ...

In a job (rdps launch --server_arg=--graph --server_arg=PARTS --exec ...),
server p serves part p; standalone (no ip_config), DistGraph(part_config=)
starts one in-process server per part: the same script runs either way.
"""
import errno
import json
import os

import numpy as np
import torch

from .._errors import RdpsError
from .._ffi import SAMPLE_MAX_FANOUT, ffi, lib, string
from . import _context
from .tensor import DistTensor, as_ids

NID = "_ID"          # DGL's key of a block's global node ids
EID = "_ID"
ETYPE = "etype"

ORIG_ID = "orig_id"  # the edge's row in the dataset's edges.npy (DGL's orig_id)

_NDATA = "ndata:"
_INDPTR = "graph:indptr"
_EDGES = "graph:edges"
_EDGE_COLUMNS = {ETYPE: 2, ORIG_ID: 3}  # of the edge table's (src, dst, type, orig)


def _u64(a):
    return ffi.cast("uint64_t *", a.ctypes.data)


def _ids(nodes, what):
    if isinstance(nodes, torch.Tensor):
        if nodes.is_floating_point() or nodes.dtype == torch.bool:
            raise TypeError("%s: ids must be integers, not %s" % (what, nodes.dtype))
        a = nodes.detach().cpu().numpy()
    else:
        a = np.asarray(nodes)
        if a.size and a.dtype.kind not in "iu":
            raise TypeError("%s: ids must be integers, not %s" % (what, a.dtype))
    a = np.ascontiguousarray(a.reshape(-1), dtype=np.int64)
    if a.size and a.min() < 0:
        raise RdpsError(-errno.ERANGE, "%s: id %d is negative" % (what, int(a.min())))
    return a


def _part_dir(part_config):
    """A partition's directory from DGL's part_config (the JSON file) or the
    directory itself; with its number of parts."""
    d = part_config
    if os.path.isfile(d):
        d = os.path.dirname(os.path.abspath(d))
    path = os.path.join(d, "partition.json")
    try:
        with open(path) as f:
            meta = json.load(f)
    except OSError as e:
        raise RdpsError(-e.errno, "DistGraph: part_config %s: %s" % (path, e.strerror)) from None
    except ValueError as e:
        raise RdpsError(-errno.EINVAL, "DistGraph: part_config %s: %s" % (path, e)) from None
    if meta.get("format") != "rdps-graph-partition":
        raise RdpsError(-errno.EINVAL, "DistGraph: %s is not a graph partition (make one with "
                        "rdps partition --data GRAPHDIR)" % path)
    return d, int(meta["k"])


class GraphPartitionBook:
    """Which part holds which nodes (dgl.distributed.GraphPartitionBook's
    range book): part p holds the contiguous ids [node_ranges[p],
    node_ranges[p+1])."""

    def __init__(self, node_ranges, num_edges):
        self._ranges = np.asarray(node_ranges, dtype=np.int64)
        self._num_edges = num_edges

    def num_partitions(self):
        return len(self._ranges) - 1

    def nid2partid(self, nids):
        nids = _ids(nids, "nid2partid")
        return torch.from_numpy(np.searchsorted(self._ranges, nids, side="right") - 1)

    def partid2nids(self, partid):
        return torch.arange(int(self._ranges[partid]), int(self._ranges[partid + 1]))

    @property
    def node_ranges(self):
        return self._ranges.copy()


class _DataView(dict):
    """g.ndata / g.edata: name -> DistTensor of the graph's node or edge data."""

    def __repr__(self):
        return "{%s}" % ", ".join("'%s': %r" % kv for kv in self.items())


class _EdgeColumn(DistTensor):
    """g.edata[ETYPE] and g.edata[ORIG_ID]: a column of the servers' edge
    table (src, dst, type, original row per edge id), read-only as the
    graph's structure is. t[eids] reads the edges' rows and keeps the
    column: int64, shape (len(eids),)."""

    @classmethod
    def _column(cls, key, col):
        self = cls._attach(_EDGES)
        self._col, self._row_shape = col, self._shape
        self._shape = (self._shape[0],)
        self._name = "%s[%s]" % (_EDGES, key)
        return self

    def __getitem__(self, idx):
        ids, scalar = as_ids(idx, self._shape[0])
        col = self._rows(ids, self._row_shape[1:])[:, self._col].contiguous()
        return col[0] if scalar else col

    def __setitem__(self, idx, values):
        raise RdpsError(-errno.EPERM, "DistGraph edata '%s' is read-only (the graph's "
                        "structure, served as the partition holds it)" % self._name)

    def count_nonzero(self):
        n = 0
        for lo in range(0, self._shape[0], 1 << 20):
            n += int(torch.count_nonzero(self[lo:min(self._shape[0], lo + (1 << 20))]))
        return n


class DistGraph:
    """The graph the servers hold (dgl.distributed.DistGraph).

    graph_name is for DGL's signature (a job serves one graph). In a job the
    servers serve it (rdps server --graph); standalone, part_config (the
    partition's directory or its partition.json) is loaded into in-process
    servers, one per part, before any tensor is made.
    """

    def __init__(self, graph_name, gpb=None, part_config=None):
        ctx = _context._context()
        self._name = graph_name
        if ctx.standalone and ctx.part_config is None:
            if part_config is None:
                raise RdpsError(-errno.EINVAL, "DistGraph '%s': standalone (no ip_config), "
                                "give part_config (the graph partition's directory, rdps "
                                "partition --data GRAPHDIR)" % graph_name)
            d, k = _part_dir(part_config)
            _context._serve_graph(ctx, d, k)
        out = ffi.new("struct rdps_graph **")
        ctx.check(lib.rdps_graph_open(ctx.client, out), "DistGraph '%s'" % graph_name)
        self._g = out[0]
        ctx.graphs.append(self._g)
        self._ctx = ctx
        k = int(lib.rdps_graph_num_parts(self._g))
        lo, hi = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        ranges = [0]
        for p in range(k):
            lib.rdps_graph_part_nodes(self._g, p, lo, hi)
            ranges.append(int(hi[0]))
        self._gpb = GraphPartitionBook(ranges, self.num_edges())
        self.ndata = _DataView()
        info = ffi.new("struct rdps_table_info *")
        for t in range(int(lib.rdps_client_num_tables(ctx.client))):
            if lib.rdps_client_table_info(ctx.client, t, info) < 0:
                continue
            name = string(info.name)
            if name.startswith(_NDATA):
                self.ndata[name[len(_NDATA):]] = DistTensor._attach(name)
        self.edata = _DataView()
        for key, col in _EDGE_COLUMNS.items():
            self.edata[key] = _EdgeColumn._column(key, col)

    def _live(self):
        ctx = _context._context()
        if ctx is not self._ctx:
            raise RdpsError(-errno.ENOTCONN, "DistGraph '%s' belongs to a job this process "
                            "left (finalize)" % self._name)
        return ctx

    # -- structure --------------------------------------------------------
    def num_nodes(self, ntype=None):
        return int(lib.rdps_graph_num_nodes(self._g))

    def num_edges(self, etype=None):
        return int(lib.rdps_graph_num_edges(self._g))

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def num_parts(self):
        return self._gpb.num_partitions()

    def get_partition_book(self):
        return self._gpb

    def in_degrees(self, v=None):
        """In-degrees of nodes v (all nodes if None), as an int64 tensor."""
        ctx = self._live()
        nodes = np.arange(self.num_nodes(), dtype=np.int64) if v is None else _ids(v, "in_degrees")
        deg = np.empty(len(nodes), dtype=np.uint64)
        if len(nodes):
            ctx.check(lib.rdps_graph_in_degrees(self._g, _u64(nodes), len(nodes), _u64(deg)),
                      "in_degrees")
        return torch.from_numpy(deg.view(np.int64))

    def find_edges(self, edges, etype=None):
        """(src, dst) of edge ids edges, as int64 tensors (and find_edges'
        types with etype=True: (src, dst, etype))."""
        ctx = self._live()
        eids = _ids(edges, "find_edges")
        src = np.empty(len(eids), dtype=np.uint64)
        dst = np.empty(len(eids), dtype=np.uint64)
        et = np.empty(len(eids), dtype=np.int64)
        if len(eids):
            ctx.check(lib.rdps_graph_find_edges(self._g, _u64(eids), len(eids), _u64(src),
                                                _u64(dst), ffi.cast("int64_t *", et.ctypes.data)),
                      "find_edges")
        out = (torch.from_numpy(src.view(np.int64)), torch.from_numpy(dst.view(np.int64)))
        return out + (torch.from_numpy(et),) if etype is True else out

    def __repr__(self):
        return "DistGraph('%s', num_nodes=%d, num_edges=%d, parts=%d, ndata=%s, edata=%s)" % (
            self._name, self.num_nodes(), self.num_edges(), self.num_parts,
            sorted(self.ndata), sorted(self.edata))


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


def _way(way):
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
                                                  _way(way), seed & (2 ** 64 - 1), out),
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
        _way(way)
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


class DistNodeDataLoader:
    """Mini-batches of seed nodes with their blocks
    (dgl.dataloading.DistNodeDataLoader): yields (input_nodes, seeds,
    blocks) for batches of batch_size of nids, shuffled each epoch when
    shuffle (seeded by seed when given)."""

    def __init__(self, g, nids, sampler, batch_size, shuffle=False, drop_last=False, seed=None):
        self.g = g
        self.nids = torch.as_tensor(_ids(nids, "DistNodeDataLoader"))
        self.sampler = sampler
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError("DistNodeDataLoader: batch_size must be >= 1")
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._gen = torch.Generator()
        self._gen.manual_seed(seed if seed is not None else int(torch.randint(0, 2 ** 62, (1,))))

    def __len__(self):
        n = len(self.nids)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        ids = self.nids[torch.randperm(len(self.nids), generator=self._gen)] \
            if self.shuffle else self.nids
        for i in range(len(self)):
            batch = ids[i * self.batch_size:(i + 1) * self.batch_size]
            yield self.sampler.sample_blocks(self.g, batch)
