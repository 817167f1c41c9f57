# SPDX-License-Identifier: MIT
"""The partition book of a DistGraph (dgl.distributed.GraphPartitionBook's
range book) and its partition policies.

rdps relabels a graph so that part p holds the contiguous node ids
[node_ranges[p], node_ranges[p+1]) and, for those nodes' in-edges, the
contiguous edge ids [edge_ranges[p], edge_ranges[p+1]): every lookup is a
binary search, as DGL's RangePartitionBook."""
import numpy as np
import torch

DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_E"
DEFAULT_CANONICAL_ETYPE = (DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE)
NODE_PART_POLICY = "node"
EDGE_PART_POLICY = "edge"
POLICY_DELIMITER = "~"


def _ids_np(ids, what):
    if isinstance(ids, torch.Tensor):
        a = ids.detach().cpu().numpy()
    else:
        a = np.asarray(ids)
    if a.size and a.dtype.kind not in "iu":
        raise TypeError("%s: ids must be integers, not %s" % (what, a.dtype))
    return np.ascontiguousarray(a.reshape(-1), dtype=np.int64)


class GraphPartitionBook:
    """Which part holds which nodes and edges.

    node_ranges, edge_ranges: num_partitions + 1 offsets; partid: the part
    this process's machine serves (its trainers sample and split around
    it); trainer_parts: the part of every trainer of the job, by rank
    (node_split and edge_split hand each trainer ids of its part)."""

    def __init__(self, node_ranges, edge_ranges, partid=0, trainer_parts=None, types=None):
        self._nranges = np.asarray(node_ranges, dtype=np.int64)
        self._eranges = np.asarray(edge_ranges, dtype=np.int64)
        if len(self._nranges) != len(self._eranges) or len(self._nranges) < 2:
            raise ValueError("GraphPartitionBook: %d node and %d edge offsets" %
                             (len(self._nranges), len(self._eranges)))
        self._partid = int(partid)
        self._trainer_parts = list(trainer_parts) if trainer_parts is not None else None
        # The graph's types (rdps.distributed._hetero.GraphHandle, under the
        # client's lock) for a DistGraph's book; None: one node and one edge
        # type, ids as they are.
        self._types = types
        self._typed_ranges = {}

    # -- DGL's GraphPartitionBook ------------------------------------------
    def num_partitions(self):
        return len(self._nranges) - 1

    @property
    def partid(self):
        """The part of this process's machine."""
        return self._partid

    def metadata(self):
        """[{'machine_id', 'num_nodes', 'num_edges'}] per part, as DGL's."""
        return [{"machine_id": p, "num_nodes": int(self._nranges[p + 1] - self._nranges[p]),
                 "num_edges": int(self._eranges[p + 1] - self._eranges[p])}
                for p in range(self.num_partitions())]

    def _homo(self):
        return self._types is None or (len(self._types.ntypes) == 1 and
                                       len(self._types.canonical_etypes) == 1)

    def _check_type(self, t, default, what):
        if self._types is not None:
            if t is None:
                return
            if default == DEFAULT_NTYPE:
                if t not in self._types.ntypes and not (t == DEFAULT_NTYPE and self._homo()):
                    raise KeyError("%s: no node type %r (the graph's: %s)" %
                                   (what, t, self._types.ntypes))
            else:
                self.to_canonical_etype(t)
            return
        if t not in (None, default, DEFAULT_CANONICAL_ETYPE):
            raise KeyError("%s: the graph has one type, %r, not %r" % (what, default, t))

    def _lookup(self, ranges, ids, what, total):
        a = _ids_np(ids, what)
        if a.size and (a.min() < 0 or a.max() >= total):
            bad = a[(a < 0) | (a >= total)][0]
            raise IndexError("%s: id %d is not in 0..%d" % (what, int(bad), total - 1))
        return torch.from_numpy(np.searchsorted(ranges, a, side="right") - 1)

    def typed_ranges(self, edge, t):
        """num_partitions + 1 offsets of type t's per-type ids in each part
        (a type's nodes of part p have the per-type ids [r[p], r[p+1]):
        per-type ids count part after part). The whole id space without
        types (or for the one type of a homogeneous graph)."""
        if self._homo() or t is None:
            return self._eranges if edge else self._nranges
        key = (edge, self.to_canonical_etype(t) if edge else t)
        if key not in self._typed_ranges:
            self._check_type(t, DEFAULT_ETYPE if edge else DEFAULT_NTYPE, "typed_ranges")
            counts = [hi - lo for lo, hi in self._types.type_ranges(edge, key[1])]
            self._typed_ranges[key] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self._typed_ranges[key]

    def nid2partid(self, nids, ntype=DEFAULT_NTYPE):
        self._check_type(ntype, DEFAULT_NTYPE, "nid2partid")
        r = self.typed_ranges(False, ntype)
        return self._lookup(r, nids, "nid2partid", int(r[-1]))

    def eid2partid(self, eids, etype=DEFAULT_ETYPE):
        self._check_type(etype, DEFAULT_ETYPE, "eid2partid")
        r = self.typed_ranges(True, etype)
        return self._lookup(r, eids, "eid2partid", int(r[-1]))

    def _part(self, partid, what):
        p = int(partid)
        if not 0 <= p < self.num_partitions():
            raise IndexError("%s: part %d is not in 0..%d" % (what, p,
                                                              self.num_partitions() - 1))
        return p

    def partid2nids(self, partid, ntype=DEFAULT_NTYPE):
        """Part partid's nodes (of ntype: per-type ids)."""
        self._check_type(ntype, DEFAULT_NTYPE, "partid2nids")
        p = self._part(partid, "partid2nids")
        r = self.typed_ranges(False, ntype)
        return torch.arange(int(r[p]), int(r[p + 1]))

    def partid2eids(self, partid, etype=DEFAULT_ETYPE):
        self._check_type(etype, DEFAULT_ETYPE, "partid2eids")
        p = self._part(partid, "partid2eids")
        r = self.typed_ranges(True, etype)
        return torch.arange(int(r[p]), int(r[p + 1]))

    def _to_local(self, ranges, ids, partid, what):
        p = self._part(partid, what)
        a = _ids_np(ids, what)
        lo, hi = int(ranges[p]), int(ranges[p + 1])
        if a.size and (a.min() < lo or a.max() >= hi):
            bad = a[(a < lo) | (a >= hi)][0]
            raise IndexError("%s: id %d is not in part %d (%d..%d)" % (what, int(bad), p, lo,
                                                                       hi - 1))
        return torch.from_numpy(a - lo)

    def nid2localnid(self, nids, partid, ntype=DEFAULT_NTYPE):
        """Node ids of part partid (of ntype: per-type ids) as offsets within
        the part's nodes (of that type)."""
        self._check_type(ntype, DEFAULT_NTYPE, "nid2localnid")
        return self._to_local(self.typed_ranges(False, ntype), nids, partid, "nid2localnid")

    def eid2localeid(self, eids, partid, etype=DEFAULT_ETYPE):
        self._check_type(etype, DEFAULT_ETYPE, "eid2localeid")
        return self._to_local(self.typed_ranges(True, etype), eids, partid, "eid2localeid")

    @property
    def ntypes(self):
        return list(self._types.ntypes) if self._types is not None else [DEFAULT_NTYPE]

    @property
    def etypes(self):
        return list(self._types.etypes) if self._types is not None else [DEFAULT_ETYPE]

    @property
    def canonical_etypes(self):
        if self._types is not None:
            return list(self._types.canonical_etypes)
        return [DEFAULT_CANONICAL_ETYPE]

    def to_canonical_etype(self, etype):
        if self._types is None:
            self._check_type(etype, DEFAULT_ETYPE, "to_canonical_etype")
            return DEFAULT_CANONICAL_ETYPE
        cets = self._types.canonical_etypes
        if isinstance(etype, tuple):
            if tuple(etype) in cets:
                return tuple(etype)
        else:
            found = [c for c in cets if c[1] == etype]
            if len(found) == 1:
                return found[0]
            if etype in (DEFAULT_ETYPE,) and len(cets) == 1:
                return cets[0]
            if len(found) > 1:
                raise KeyError("edge type %r is ambiguous: %s" % (etype, found))
        raise KeyError("no edge type %r (the graph's: %s)" % (etype, cets))

    def is_homogeneous(self):
        return self._homo()

    def map_to_per_ntype(self, ids):
        if self._types is not None:
            return self._types.map_to_per_ntype(ids)
        a = torch.as_tensor(_ids_np(ids, "map_to_per_ntype"))
        return torch.zeros_like(a), a

    def map_to_per_etype(self, ids):
        if self._types is not None:
            return self._types.map_to_per_etype(ids)
        a = torch.as_tensor(_ids_np(ids, "map_to_per_etype"))
        return torch.zeros_like(a), a

    def map_to_homo_nid(self, ids, ntype):
        self._check_type(ntype, DEFAULT_NTYPE, "map_to_homo_nid")
        if self._types is not None and not self._homo():
            return self._types.map_to_homo_nid(ids, ntype)
        return torch.as_tensor(_ids_np(ids, "map_to_homo_nid"))

    def map_to_homo_eid(self, ids, etype):
        self._check_type(etype, DEFAULT_ETYPE, "map_to_homo_eid")
        if self._types is not None and not self._homo():
            return self._types.map_to_homo_eid(ids, self.to_canonical_etype(etype))
        return torch.as_tensor(_ids_np(ids, "map_to_homo_eid"))

    # -- rdps ------------------------------------------------------------------
    @property
    def node_ranges(self):
        return self._nranges.copy()

    @property
    def edge_ranges(self):
        return self._eranges.copy()

    @property
    def trainer_parts(self):
        """The part of each trainer (index: rank), or None where unknown
        (then trainer r counts as part r * parts // trainers)."""
        return None if self._trainer_parts is None else list(self._trainer_parts)

    def __repr__(self):
        return "GraphPartitionBook(parts=%d, partid=%d, nodes=%d, edges=%d)" % (
            self.num_partitions(), self._partid, self._nranges[-1], self._eranges[-1])


class PartitionPolicy:
    """How rows of a node or edge tensor map to parts
    (dgl.distributed.PartitionPolicy): policy_str 'node~<ntype>' or
    'edge~<etype>'. rdps places a DistTensor's rows evenly over the
    servers whatever its policy; the policy answers which part owns an id,
    as DGL's does."""

    def __init__(self, policy_str, partition_book):
        if policy_str in (NODE_PART_POLICY, EDGE_PART_POLICY):
            policy_str += POLICY_DELIMITER + (DEFAULT_NTYPE if policy_str == NODE_PART_POLICY
                                              else DEFAULT_ETYPE)
        kind, sep, name = policy_str.partition(POLICY_DELIMITER)
        if kind not in (NODE_PART_POLICY, EDGE_PART_POLICY) or not sep:
            raise ValueError("PartitionPolicy: %r is not 'node~TYPE' or 'edge~TYPE'" %
                             (policy_str,))
        self._policy_str = policy_str
        self._is_node = kind == NODE_PART_POLICY
        self._type_name = name
        self._book = partition_book

    @property
    def policy_str(self):
        return self._policy_str

    @property
    def type_name(self):
        return self._type_name

    @property
    def part_id(self):
        return self._book.partid

    @property
    def partition_book(self):
        return self._book

    def is_node(self):
        return self._is_node

    def get_data_name(self, name):
        return "%s:%s" % (self._policy_str, name)

    def to_local(self, id_tensor):
        if self._is_node:
            return self._book.nid2localnid(id_tensor, self.part_id, self._type_name)
        return self._book.eid2localeid(id_tensor, self.part_id, self._typed_name())

    def to_partid(self, id_tensor):
        if self._is_node:
            return self._book.nid2partid(id_tensor, self._type_name)
        return self._book.eid2partid(id_tensor, self._typed_name())

    def get_part_size(self):
        r = self._book.typed_ranges(not self._is_node, self._typed_name())
        return int(r[self.part_id + 1] - r[self.part_id])

    def _typed_name(self):
        t = self._type_name
        if not self._is_node and ":" in t:
            return tuple(t.split(":"))
        return t

    def get_size(self):
        return int(self._book.typed_ranges(not self._is_node, self._typed_name())[-1])


class NodePartitionPolicy(PartitionPolicy):
    def __init__(self, partition_book, ntype=DEFAULT_NTYPE):
        super().__init__(NODE_PART_POLICY + POLICY_DELIMITER + ntype, partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    def __init__(self, partition_book, etype=DEFAULT_ETYPE):
        if isinstance(etype, tuple):
            etype = ":".join(etype)
        super().__init__(EDGE_PART_POLICY + POLICY_DELIMITER + etype, partition_book)
