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
from .._ffi import ffi
from . import _context
from ._context import lib
from ._hetero import _TORCH, GraphHandle
from .partition_book import (DEFAULT_CANONICAL_ETYPE, DEFAULT_ETYPE, DEFAULT_NTYPE,
                             GraphPartitionBook, EdgePartitionPolicy, NodePartitionPolicy)
from .tensor import _DTYPES, DistTensor, as_ids

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


class _GraphData(DistTensor):
    """A node or edge data of the partition (any name, dtype and row shape),
    read-only, indexed by per-type ids: a table of the kvstore's dtype is
    read as DistTensor rows; others (int32, float16, bfloat16, bool, ...)
    are served as their bytes and read back exactly (GraphHandle.read)."""

    @classmethod
    def _of(cls, types, spec):
        self = cls._attach(spec.table)
        self._spec, self._types = spec, types
        self._direct = spec.dtype in ("float32", "float64", "int64", "uint8") and \
            _DTYPES[_TORCH[spec.dtype][1]][0] == self._code
        self._shape = (spec.num_rows,) + tuple(spec.shape)
        self._dtype = _TORCH[spec.dtype][1] or self._dtype
        self._name = spec.name
        return self

    def __getitem__(self, idx):
        ids, scalar = as_ids(idx, self._shape[0])
        if self._direct:
            out = self._rows(ids, self._shape[1:])
        else:
            out = self._types.read(self._spec, ids.view(np.int64))
        return out[0] if scalar else out

    def __setitem__(self, idx, values):
        raise RdpsError(-errno.EPERM, "DistGraph data '%s' is the partition's and read-only "
                        "(assign a DistTensor under another name)" % self._name)


class _Locked:
    """A GraphHandle whose calls hold the client's lock (its results may
    point into the graph until the next call)."""

    def __init__(self, h):
        self._h = h

    def __getattr__(self, name):
        v = getattr(self._h, name)
        if not callable(v):
            return v

        def call(*args, **kwargs):
            with lib.lock:
                return v(*args, **kwargs)
        return call


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
            return _TypeView(g._ndata[g._ntype(t)])
        return _TypeView(g._edata[g.to_canonical_etype(t)])

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
        self._local = None
        with lib.lock:
            self._types = _Locked(GraphHandle(ctx, self._g))
        t = self._types
        self._homogeneous = len(t.ntypes) == 1 and len(t.canonical_etypes) == 1
        self._gpb = self._partition_book()
        # Data views per node type and canonical etype (g.nodes[t].data,
        # g.edges[t].data; g.ndata/g.edata with one type).
        self._ndata = {}
        for nt in t.ntypes:
            v = self._ndata[nt] = _DataView(self, "ndata", t.num_nodes(nt))
            for name, spec in t.node_data[nt].items():
                v._set_own(name, _GraphData._of(t, spec))
        self._edata = {}
        for cet in t.canonical_etypes:
            v = self._edata[cet] = _DataView(self, "edata", t.num_edges(cet))
            for name, spec in t.edge_data[cet].items():
                v._set_own(name, _GraphData._of(t, spec))
        if self._homogeneous:
            # The edge table's columns over homo edge ids (= the one etype's).
            for key, col in _EDGE_COLUMNS.items():
                if key not in self._edata[t.canonical_etypes[0]]:
                    self._edata[t.canonical_etypes[0]]._set_own(key, _EdgeColumn._column(key, col))

    @property
    def ndata(self):
        """Node data of a graph of one node type (else g.nodes[ntype].data)."""
        if len(self._ndata) != 1:
            raise RdpsError(-errno.EINVAL, "DistGraph '%s' has node types %s: use "
                            "g.nodes[ntype].data" % (self._name, self.ntypes))
        return next(iter(self._ndata.values()))

    @property
    def edata(self):
        """Edge data of a graph of one edge type (else g.edges[etype].data)."""
        if len(self._edata) != 1:
            raise RdpsError(-errno.EINVAL, "DistGraph '%s' has edge types %s: use "
                            "g.edges[etype].data" % (self._name, self.canonical_etypes))
        return next(iter(self._edata.values()))

    def _partition_book(self):
        """The partition book, with this machine's part and every trainer's."""
        ctx = self._ctx
        k = int(lib.rdps_graph_num_parts(self._g))
        nranges = [int(x) for x in self._types.schema["node_ranges"]]
        eranges = [int(x) for x in self._types.schema["edge_ranges"]]
        n, rank = ctx.num_trainers, ctx.rank
        fallback = rank * k // n
        if ctx.machine is None:
            # No launcher said where this trainer runs: trainer r counts as
            # part r * k // n's (node_split's rule without a layout).
            return GraphPartitionBook(nranges, eranges, fallback,
                                      [r * k // n for r in range(n)], types=self._types)
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
        return GraphPartitionBook(nranges, eranges, parts[rank], parts, types=self._types)

    def _live(self):
        ctx = _context._context()
        if ctx is not self._ctx:
            raise RdpsError(-errno.ENOTCONN, "DistGraph '%s' belongs to a job this process "
                            "left (finalize)" % self._name)
        return ctx

    # -- types ------------------------------------------------------------
    @property
    def ntypes(self):
        return list(self._types.ntypes)

    @property
    def etypes(self):
        return list(self._types.etypes)

    @property
    def canonical_etypes(self):
        return list(self._types.canonical_etypes)

    def is_homogeneous(self):
        return self._homogeneous

    def _ntype(self, ntype):
        """The node type named (None: the graph's only one)."""
        if ntype is None or (ntype == DEFAULT_NTYPE and len(self._ndata) == 1):
            if len(self._ndata) != 1:
                raise RdpsError(-errno.EINVAL, "DistGraph '%s' has node types %s: name one" %
                                (self._name, self.ntypes))
            return next(iter(self._ndata))
        if ntype not in self._ndata:
            raise KeyError("DistGraph '%s' has no node type %r (its: %s)" %
                           (self._name, ntype, self.ntypes))
        return ntype

    def _check_ntype(self, ntype):
        self._ntype(ntype)

    def _check_etype(self, etype):
        if etype is not None:
            self.to_canonical_etype(etype)

    def to_canonical_etype(self, etype):
        """(src type, name, dst type) of etype (a name, unique among the
        graph's, or a canonical triple)."""
        if etype is None or (etype in (DEFAULT_ETYPE, DEFAULT_CANONICAL_ETYPE) and
                             len(self._edata) == 1):
            if len(self._edata) != 1:
                raise RdpsError(-errno.EINVAL, "DistGraph '%s' has edge types %s: name one" %
                                (self._name, self.canonical_etypes))
            return next(iter(self._edata))
        return self._gpb.to_canonical_etype(etype)

    def get_ntype_id(self, ntype):
        return int(self._types.ntype_id(self._ntype(ntype)))

    def get_etype_id(self, etype):
        return int(self._types.etype_id(self.to_canonical_etype(etype)))

    @property
    def nodes(self):
        return _TypesView(self, True)

    @property
    def edges(self):
        return _TypesView(self, False)

    def get_node_partition_policy(self, ntype=DEFAULT_NTYPE):
        return NodePartitionPolicy(self._gpb, self._ntype(ntype))

    def get_edge_partition_policy(self, etype=DEFAULT_ETYPE):
        cet = self.to_canonical_etype(etype)
        return EdgePartitionPolicy(self._gpb, DEFAULT_ETYPE if self._homogeneous else cet)

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

    def node_attr_schemes(self, ntype=None):
        v = self._ndata[self._ntype(ntype)]
        return {k: Scheme(tuple(t.shape[1:]), t.dtype) for k, t in v.items()}

    def edge_attr_schemes(self, etype=None):
        v = self._edata[self.to_canonical_etype(etype)]
        return {k: Scheme(tuple(t.shape[1:]), t.dtype) for k, t in v.items()}

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
        """Nodes of the graph, or of ntype."""
        if ntype is None:
            return int(lib.rdps_graph_num_nodes(self._g))
        return int(self._types.num_nodes(self._ntype(ntype)))

    def num_edges(self, etype=None):
        """Edges of the graph, or of etype."""
        if etype is None:
            return int(lib.rdps_graph_num_edges(self._g))
        return int(self._types.num_edges(self.to_canonical_etype(etype)))

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
        """Out-degrees of nodes u (homo ids; all if None), as an int64 tensor
        (an int for an int u)."""
        self._live()
        scalar = isinstance(u, (int, np.integer))
        nodes = np.arange(self.num_nodes(), dtype=np.int64) if u is None \
            else _ids(u, "out_degrees")
        out = self._types.degrees(nodes, "out")
        return int(out[0]) if scalar else out

    def find_edges(self, edges, etype=None):
        """(src, dst) of edge ids edges, as int64 tensors: homo ids, or with
        etype (a type of a heterogeneous graph) per-etype edge ids and
        per-type node ids; with etype=True, rdps's: (src, dst, type column)."""
        ctx = self._live()
        typed = etype not in (None, True) and not self._homogeneous
        if typed:
            cet = self.to_canonical_etype(etype)
            eids = self._types.map_to_homo_eid(_ids(edges, "find_edges"), cet).numpy()
        else:
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
        if typed:
            out = (self._types.map_to_per_ntype(out[0])[1], self._types.map_to_per_ntype(out[1])[1])
        return out + (torch.from_numpy(et),) if etype is True else out

    def edge_subgraph(self, edges, relabel_nodes=True, store_ids=True):
        """The DGL graph of edges (DGL's DistGraph.edge_subgraph; a dict
        {etype: per-etype ids} for a heterogeneous graph): with
        relabel_nodes, only their end nodes (ndata[NID] their ids in this
        graph), else every node; edata[EID] the edge ids."""
        dgl = dgl_module("DistGraph.edge_subgraph")
        if not isinstance(edges, dict):
            edges = {self.to_canonical_etype(None): edges}
        want = {self.to_canonical_etype(k): torch.from_numpy(_ids(v, "edge_subgraph"))
                for k, v in edges.items()}
        data = {}
        for cet in self.canonical_etypes:
            eids = want.get(cet, torch.empty(0, dtype=torch.int64))
            data[cet] = self.find_edges(eids, None if self._homogeneous else cet) + (eids,)
        if self._homogeneous:
            (src, dst, eids), = data.values()
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
        sg = dgl.heterograph({cet: (s, d) for cet, (s, d, _) in data.items()},
                             {nt: self.num_nodes(nt) for nt in self.ntypes})
        if store_ids:
            for cet, (_, _, eids) in data.items():
                sg.edges[cet].data[EID] = eids
        if relabel_nodes:
            sg = dgl.compact_graphs(sg)
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
        if self._homogeneous:
            return "DistGraph('%s', num_nodes=%d, num_edges=%d, parts=%d, ndata=%s, edata=%s)" % (
                self._name, self.num_nodes(), self.num_edges(), self.num_parts,
                sorted(self.ndata), sorted(self.edata))
        return "DistGraph('%s', num_nodes=%s, num_edges=%s, parts=%d)" % (
            self._name, {nt: self.num_nodes(nt) for nt in self.ntypes},
            {cet: self.num_edges(cet) for cet in self.canonical_etypes}, self.num_parts)
