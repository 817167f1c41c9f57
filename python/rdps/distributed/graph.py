# SPDX-License-Identifier: MIT
"""DistGraph: a graph held by the servers (dgl.distributed.DistGraph).

    g = dist.DistGraph("wordnet", part_config="parts")   # standalone: served here
    train = dist.node_split(g.ndata["train_mask"], g.get_partition_book())
    sampler = dgl.dataloading.NeighborSampler([10, 25])   # or dist.NeighborSampler
    for input_nodes, seeds, blocks in dist.DistNodeDataLoader(g, train, sampler,
                                                              batch_size=1000):
        h = g.ndata["feat"][input_nodes]
        ...

In a job (rdps launch --server_arg=--graph --server_arg=PARTS --exec ...),
server p serves part p; standalone (no job), DistGraph(part_config=) starts
one in-process server per part: the same script runs either way.

What DGL's samplers call (g.sample_neighbors, g.edge_subgraph) returns DGL
graphs (DGL must be installed for those); the sampling itself is rdps's
(rdps.distributed.sampling).
"""
import collections
import errno
import json
import os

import numpy as np
import torch

from .._errors import RdpsError
from .._ffi import ffi, string
from . import _context
from ._context import lib
from .partition_book import (DEFAULT_CANONICAL_ETYPE, DEFAULT_ETYPE, DEFAULT_NTYPE,
                             GraphPartitionBook, EdgePartitionPolicy, NodePartitionPolicy)
from .tensor import DistTensor, as_ids

NID = "_ID"          # DGL's key of a block's global node ids (dgl.NID)
EID = "_ID"          # dgl.EID
ETYPE = "etype"

ORIG_ID = "orig_id"  # the edge's row in the dataset's edges.npy (DGL's orig_id)

_NDATA = "ndata:"
_INDPTR = "graph:indptr"
_EDGES = "graph:edges"
_EDGE_COLUMNS = {ETYPE: 2, ORIG_ID: 3}  # of the edge table's (src, dst, type, orig)
_SCAN_ROWS = 1 << 20                    # edge rows read per call by whole-graph scans

Scheme = collections.namedtuple("Scheme", ["shape", "dtype"])  # DGL's frame.Scheme


def _u64(a):
    return ffi.cast("uint64_t *", a.ctypes.data)


def _ids(nodes, what):
    if isinstance(nodes, (int, np.integer)):
        nodes = [int(nodes)]
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


def dgl_module(what):
    """DGL, for what needs its objects; an ImportError saying so without."""
    try:
        import dgl
    except ImportError as e:
        raise ImportError("%s makes DGL graphs and needs DGL (deploy/install-venv.sh installs "
                          "the tested version in /opt/rdps-venv): %s" % (what, e)) from None
    return dgl


def _part_dir(part_config):
    """A partition's directory from DGL's part_config (the <graph_name>.json
    file or any file in the directory) or the directory itself; with its
    number of parts."""
    d = os.fspath(part_config)
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


class _DataView(collections.abc.MutableMapping):
    """g.ndata / g.edata: name -> DistTensor. The graph's own data (from
    the partition) is read-only and stays; a DistTensor of one row per
    node (edge) may be added by assignment, as DGL's layer-wise inference
    does, and deleted again."""

    def __init__(self, graph, kind, size):
        self._graph, self._kind, self._size = graph, kind, size
        self._own = {}     # the partition's
        self._added = {}   # assigned by the script

    def _set_own(self, key, t):
        self._own[key] = t

    def __getitem__(self, key):
        if key in self._added:
            return self._added[key]
        return self._own[key]

    def __setitem__(self, key, value):
        if key in self._own:
            raise RdpsError(-errno.EPERM, "DistGraph %s '%s' is the partition's and read-only "
                            "(assign another name)" % (self._kind, key))
        if not isinstance(value, DistTensor):
            raise TypeError("DistGraph %s['%s']: assign a DistTensor (rows on the servers), "
                            "not %s" % (self._kind, key, type(value).__name__))
        if value.shape[0] != self._size:
            raise ValueError("DistGraph %s['%s']: the DistTensor has %d rows, the graph %d %s" %
                             (self._kind, key, value.shape[0], self._size,
                              "nodes" if self._kind == "ndata" else "edges"))
        self._added[key] = value

    def __delitem__(self, key):
        if key in self._own:
            raise RdpsError(-errno.EPERM, "DistGraph %s '%s' is the partition's and cannot be "
                            "deleted" % (self._kind, key))
        del self._added[key]

    def __iter__(self):
        yield from self._own
        yield from (k for k in self._added if k not in self._own)

    def __len__(self):
        return len(self._own) + len(self._added)

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
        for lo in range(0, self._shape[0], _SCAN_ROWS):
            n += int(torch.count_nonzero(self[lo:min(self._shape[0], lo + _SCAN_ROWS)]))
        return n


class _TypeView:
    """g.nodes[ntype] / g.edges[etype]: .data is that type's data view."""

    def __init__(self, data):
        self.data = data


class _TypesView:
    def __init__(self, graph, node):
        self._graph, self._node = graph, node

    def __getitem__(self, t):
        g = self._graph
        if self._node:
            g._check_ntype(t)
            return _TypeView(g.ndata)
        g._check_etype(t)
        return _TypeView(g.edata)

    def __call__(self, *args, **kwargs):
        raise TypeError("DistGraph.%s is indexed by type (g.%s[t].data), as DGL's" %
                        (("nodes", "nodes") if self._node else ("edges", "edges")))


class DistGraph:
    """The graph the servers hold (dgl.distributed.DistGraph).

    graph_name is for DGL's signature (a job serves one graph). In a job the
    servers serve it (rdps server --graph); standalone, part_config (DGL's
    <graph_name>.json, or the partition's directory or its partition.json)
    is loaded into in-process servers, one per part, before any tensor is
    made. Every trainer makes it (the first time it learns where the
    others are: a collective).

    sample_way: how sample_neighbors samples: 'rpc' (the seeds' servers
    pick), 'read' (one-sided reads: no server CPU over verbs and ofi) or
    'auto' (default, or $RDPS_SAMPLE_WAY: read over verbs and ofi, rpc
    elsewhere).
    """

    def __init__(self, graph_name, gpb=None, part_config=None, *, sample_way=None):
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
        way = sample_way or os.environ.get("RDPS_SAMPLE_WAY") or "auto"
        if way == "auto":
            way = "read" if ctx.transport in ("verbs", "ofi") else "rpc"
        from .sampling import check_way
        check_way(way)
        self._sample_way = way
        self._indptr = DistTensor._attach(_INDPTR)
        self._edges = DistTensor._attach(_EDGES)
        self._out_degrees = None
        self._local = None
        self._gpb = self._partition_book()
        self.ndata = _DataView(self, "ndata", self.num_nodes())
        info = ffi.new("struct rdps_table_info *")
        for t in range(int(lib.rdps_client_num_tables(ctx.client))):
            if lib.rdps_client_table_info(ctx.client, t, info) < 0:
                continue
            name = string(info.name)
            if name.startswith(_NDATA):
                self.ndata._set_own(name[len(_NDATA):], DistTensor._attach(name))
        self.edata = _DataView(self, "edata", self.num_edges())
        for key, col in _EDGE_COLUMNS.items():
            self.edata._set_own(key, _EdgeColumn._column(key, col))

    def _partition_book(self):
        """The partition book, with this machine's part and every trainer's."""
        ctx = self._ctx
        k = int(lib.rdps_graph_num_parts(self._g))
        lo, hi = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        nranges = [0]
        for p in range(k):
            lib.rdps_graph_part_nodes(self._g, p, lo, hi)
            nranges.append(int(hi[0]))
        # A part's in-edges are contiguous: its edges end where its last
        # node's do.
        last = [nranges[p + 1] - 1 for p in range(k) if nranges[p + 1] > nranges[p]]
        ends = iter(self._indptr[last][:, 1].tolist()) if last else iter(())
        eranges = [0]
        for p in range(k):
            eranges.append(next(ends) if nranges[p + 1] > nranges[p] else eranges[-1])
        n, rank = ctx.num_trainers, ctx.rank
        fallback = rank * k // n
        if ctx.machine is None:
            # No launcher said where this trainer runs: trainer r counts as
            # part r * k // n's (node_split's rule without a layout).
            return GraphPartitionBook(nranges, eranges, fallback,
                                      [r * k // n for r in range(n)])
        # Every trainer's machine, then each machine's trainers spread over
        # the parts its servers hold (in rank order): one allreduce.
        servers = _context.server_machines()[:k]
        if n == 1:
            machines = [ctx.machine]
        else:
            v = [0.0] * n
            v[rank] = float(ctx.machine + 1)
            machines = [int(round(x)) - 1 for x in _context.allreduce(v)]
        parts = []
        for r in range(n):
            own = [p for p, m in enumerate(servers) if m == machines[r]]
            local = sum(1 for q in range(r) if machines[q] == machines[r])
            parts.append(own[local % len(own)] if own else r * k // n)
        return GraphPartitionBook(nranges, eranges, parts[rank], parts)

    def _live(self):
        ctx = _context._context()
        if ctx is not self._ctx:
            raise RdpsError(-errno.ENOTCONN, "DistGraph '%s' belongs to a job this process "
                            "left (finalize)" % self._name)
        return ctx

    # -- types (a homogeneous graph: one node and one edge type) ----------
    @property
    def ntypes(self):
        return [DEFAULT_NTYPE]

    @property
    def etypes(self):
        return [DEFAULT_ETYPE]

    @property
    def canonical_etypes(self):
        return [DEFAULT_CANONICAL_ETYPE]

    def _check_ntype(self, ntype):
        if ntype not in (None, DEFAULT_NTYPE):
            raise KeyError("DistGraph '%s' has one node type, %r, not %r" %
                           (self._name, DEFAULT_NTYPE, ntype))

    def _check_etype(self, etype):
        if etype not in (None, DEFAULT_ETYPE, DEFAULT_CANONICAL_ETYPE):
            raise KeyError("DistGraph '%s' has one edge type, %r, not %r" %
                           (self._name, DEFAULT_ETYPE, etype))

    def to_canonical_etype(self, etype):
        self._check_etype(etype)
        return DEFAULT_CANONICAL_ETYPE

    def get_ntype_id(self, ntype):
        self._check_ntype(ntype)
        return 0

    def get_etype_id(self, etype):
        self._check_etype(etype)
        return 0

    @property
    def nodes(self):
        return _TypesView(self, True)

    @property
    def edges(self):
        return _TypesView(self, False)

    def get_node_partition_policy(self, ntype=DEFAULT_NTYPE):
        self._check_ntype(ntype)
        return NodePartitionPolicy(self._gpb, DEFAULT_NTYPE)

    def get_edge_partition_policy(self, etype=DEFAULT_ETYPE):
        self._check_etype(etype)
        return EdgePartitionPolicy(self._gpb, DEFAULT_ETYPE)

    # -- DGL's DistGraph surface -----------------------------------------
    @property
    def idtype(self):
        return torch.int64

    @property
    def device(self):
        return torch.device("cpu")

    def is_pinned(self):
        return False

    def rank(self):
        """This trainer's rank (dgl's DistGraph.rank)."""
        return _context.get_rank()

    def barrier(self):
        _context.barrier()

    def node_attr_schemes(self):
        return {k: Scheme(tuple(v.shape[1:]), v.dtype) for k, v in self.ndata.items()}

    def edge_attr_schemes(self):
        return {k: Scheme(tuple(v.shape[1:]), v.dtype) for k, v in self.edata.items()}

    @property
    def local_partition(self):
        """The part of this trainer's machine as a DGL graph in local ids,
        as DGL's: the part's nodes first (ndata['inner_node'] 1), then the
        other sources of its in-edges (0); ndata[NID] and edata[EID] the
        global ids; edata['inner_edge'] 1 (a part holds its nodes'
        in-edges). Read from the servers once (the part's edges)."""
        if self._local is None:
            dgl = dgl_module("DistGraph.local_partition")
            p = self._gpb.partid
            nlo, nhi = (int(x) for x in self._gpb.node_ranges[p:p + 2])
            elo, ehi = (int(x) for x in self._gpb.edge_ranges[p:p + 2])
            rows = [self._edges[lo:min(ehi, lo + _SCAN_ROWS)]
                    for lo in range(elo, ehi, _SCAN_ROWS)]
            rows = torch.cat(rows) if rows else torch.empty((0, 4), dtype=torch.int64)
            src, dst = rows[:, 0].contiguous(), rows[:, 1].contiguous()
            inner = torch.arange(nlo, nhi)
            halo = torch.unique(src[(src < nlo) | (src >= nhi)])
            nodes = torch.cat([inner, halo])
            lsrc = torch.where((src >= nlo) & (src < nhi), src - nlo,
                               (nhi - nlo) + torch.searchsorted(halo, src))
            g = dgl.graph((lsrc, dst - nlo), num_nodes=len(nodes))
            g.ndata[NID] = nodes
            g.ndata["inner_node"] = (torch.arange(len(nodes)) < nhi - nlo).to(torch.int32)
            g.edata[EID] = torch.arange(elo, ehi)
            g.edata["inner_edge"] = torch.ones(ehi - elo, dtype=torch.int32)
            self._local = g
        return self._local

    # -- structure --------------------------------------------------------
    def num_nodes(self, ntype=None):
        self._check_ntype(ntype)
        return int(lib.rdps_graph_num_nodes(self._g))

    def num_edges(self, etype=None):
        self._check_etype(etype)
        return int(lib.rdps_graph_num_edges(self._g))

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def num_parts(self):
        return self._gpb.num_partitions()

    def get_partition_book(self):
        return self._gpb

    def in_degrees(self, v=None):
        """In-degrees of nodes v (all nodes if None), as an int64 tensor (an
        int for an int v, as DGL's)."""
        ctx = self._live()
        scalar = isinstance(v, (int, np.integer))
        nodes = np.arange(self.num_nodes(), dtype=np.int64) if v is None else _ids(v, "in_degrees")
        deg = np.empty(len(nodes), dtype=np.uint64)
        if len(nodes):
            ctx.check(lib.rdps_graph_in_degrees(self._g, _u64(nodes), len(nodes), _u64(deg)),
                      "in_degrees")
        out = torch.from_numpy(deg.view(np.int64))
        return int(out[0]) if scalar else out

    def out_degrees(self, u=None):
        """Out-degrees of nodes u (all if None; an int for an int u). The
        partition holds in-edges, so the first call counts every edge's
        source (the edge table read once, 32 bytes an edge) and keeps the
        counts."""
        self._live()
        if self._out_degrees is None:
            deg = np.zeros(self.num_nodes(), dtype=np.int64)
            for lo in range(0, self.num_edges(), _SCAN_ROWS):
                src = self._edges[lo:min(self.num_edges(), lo + _SCAN_ROWS)][:, 0].numpy()
                deg += np.bincount(src, minlength=len(deg))
            self._out_degrees = torch.from_numpy(deg)
        if u is None:
            return self._out_degrees.clone()
        scalar = isinstance(u, (int, np.integer))
        nodes = _ids(u, "out_degrees")
        if nodes.size and nodes.max() >= self.num_nodes():
            raise RdpsError(-errno.ERANGE, "out_degrees: node %d is not below the graph's %d" %
                            (int(nodes.max()), self.num_nodes()))
        out = self._out_degrees[torch.from_numpy(nodes)]
        return int(out[0]) if scalar else out

    def find_edges(self, edges, etype=None):
        """(src, dst) of edge ids edges, as int64 tensors (and with
        etype=True, rdps's: (src, dst, etype))."""
        ctx = self._live()
        if etype is not True:
            self._check_etype(etype)
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

    def edge_subgraph(self, edges, relabel_nodes=True, store_ids=True):
        """The DGL graph of edges (edge ids; DGL's DistGraph.edge_subgraph):
        with relabel_nodes, only their end nodes (ndata[NID] their ids in
        this graph), else every node of the graph; edata[EID] the edge ids."""
        dgl = dgl_module("DistGraph.edge_subgraph")
        if isinstance(edges, dict):
            if len(edges) != 1:
                raise KeyError("DistGraph '%s' has one edge type, not %r" %
                               (self._name, list(edges)))
            (et, edges), = edges.items()
            self._check_etype(et)
        eids = torch.from_numpy(_ids(edges, "edge_subgraph"))
        src, dst = self.find_edges(eids)
        if relabel_nodes:
            nodes, inv = torch.unique(torch.cat([src, dst]), return_inverse=True)
            sg = dgl.graph((inv[:len(src)], inv[len(src):]), num_nodes=len(nodes))
            if store_ids:
                sg.ndata[NID] = nodes
        else:
            sg = dgl.graph((src, dst), num_nodes=self.num_nodes())
        if store_ids:
            sg.edata[EID] = eids
        return sg

    def sample_neighbors(self, seed_nodes, fanout, edge_dir="in", prob=None,
                         exclude_edges=None, replace=False, etype_sorted=True,
                         output_device=None):
        """DGL's DistGraph.sample_neighbors, which DGL's samplers call: the
        frontier, a DGL graph of every node of this graph and the sampled
        in-edges of seed_nodes (edata[EID] their ids). Sampled by rdps
        (rdps.distributed.sampling.sample_frontier: this graph's
        sample_way, see there for fanout -1, replace, prob and exclude)."""
        from .sampling import sample_frontier
        return sample_frontier(self, seed_nodes, fanout, edge_dir=edge_dir, prob=prob,
                               exclude_edges=exclude_edges, replace=replace)

    @property
    def sample_way(self):
        return self._sample_way

    def __repr__(self):
        return "DistGraph('%s', num_nodes=%d, num_edges=%d, parts=%d, ndata=%s, edata=%s)" % (
            self._name, self.num_nodes(), self.num_edges(), self.num_parts,
            sorted(self.ndata), sorted(self.edata))
