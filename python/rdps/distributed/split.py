# SPDX-License-Identifier: MIT
"""node_split / edge_split: a trainer's share of a set of nodes or edges,
near the data it samples around (the part on its own machine)."""
import numpy as np
import torch

from . import _context
from .tensor import DistTensor


def _mask(elements):
    if isinstance(elements, DistTensor):
        if len(elements.shape) != 1:
            raise ValueError("node_split: a mask is one-dimensional, not %s" %
                             (elements.shape,))
        chunk = 1 << 22
        parts = [elements[lo:min(len(elements), lo + chunk)].numpy()
                 for lo in range(0, len(elements), chunk)]
        m = np.concatenate(parts)
    elif isinstance(elements, torch.Tensor):
        m = elements.detach().cpu().numpy()
    else:
        m = np.asarray(elements)
    if m.ndim != 1:
        raise ValueError("node_split: a mask is one-dimensional, not of shape %s" % (m.shape,))
    return m != 0


def _even_offsets(n, k):
    """k+1 offsets splitting n into k parts whose sizes differ by at most one
    (the first n % k parts one larger), as DGL's."""
    q, r = divmod(n, k)
    sizes = np.full(k, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _own_runs(ids, ranges, parts, rank):
    """Trainer rank's share of the set ids of a graph: the ids cut into
    len(parts) runs whose lengths differ by at most one, run j going to the
    j-th trainer in (part, rank) order, so that each part's trainers take
    the runs over that part's ids (a part is a contiguous id range)."""
    order = sorted(range(len(parts)), key=lambda r: (parts[r], r))
    off = _even_offsets(len(ids), len(parts))
    j = order.index(rank)
    return ids[off[j]:off[j + 1]]


def _part_share(ids, ranges, parts, rank):
    """The set ids of trainer rank's part, cut evenly among that part's
    trainers (in rank order)."""
    part = parts[rank]
    mates = [r for r in range(len(parts)) if parts[r] == part]
    own = ids[(ids >= ranges[part]) & (ids < ranges[part + 1])]
    off = _even_offsets(len(own), len(mates))
    i = mates.index(rank)
    return own[off[i]:off[i + 1]]


def _split(elements, partition_book, rank, force_even, what, edges, typ=None):
    mask = _mask(elements)
    n = _context.get_num_trainers()
    if rank is None:
        rank = _context.get_rank()
    if not 0 <= rank < n:
        raise ValueError("%s: rank %d is not in 0..%d" % (what, rank, n - 1))
    ids = np.flatnonzero(mask)
    if partition_book is not None:
        # a type's ids (per-type ids count part after part) or all ids
        ranges = partition_book.typed_ranges(edges, typ)
        k = len(ranges) - 1
        if len(mask) != ranges[-1]:
            raise ValueError("%s: the mask has %d elements, the graph %d %s" %
                             (what, len(mask), ranges[-1], "edges" if edges else "nodes"))
        parts = partition_book.trainer_parts
        if parts is None or len(parts) != n:
            parts = [r * k // n for r in range(n)]
        if force_even:
            mine = _own_runs(ids, ranges, parts, rank)
        else:
            missing = sorted(set(range(k)) - set(parts))
            if missing:
                raise ValueError("%s: force_even=False gives each trainer its own part's %s, "
                                 "but no trainer runs beside part(s) %s: their %s would go to "
                                 "nobody" % (what, "edges" if edges else "nodes", missing,
                                             "edges" if edges else "nodes"))
            mine = _part_share(ids, ranges, parts, rank)
        return torch.from_numpy(mine.astype(np.int64))
    if force_even:
        # The set elements in id order, cut into equal runs.
        off = _even_offsets(len(ids), n)
        mine = ids[off[rank]:off[rank + 1]]
    else:
        # The set elements among the ids of the trainer's own range (the
        # id space cut into equal ranges): sizes may differ.
        off = _even_offsets(len(mask), n)
        mine = ids[(ids >= off[rank]) & (ids < off[rank + 1])]
    return torch.from_numpy(mine.astype(np.int64))


def node_split(nodes, partition_book=None, ntype="_N", rank=None, force_even=True,
               node_trainer_ids=None):
    """The ids of the set elements of the boolean mask nodes (numpy, torch,
    or a 1-D DistTensor of uint8/bool) that this trainer takes, as
    dgl.distributed.node_split: every set id goes to exactly one trainer.

    With a partition_book (DistGraph.get_partition_book()), each trainer
    takes nodes of the part on its own machine (the part its machine's
    server holds: rdps launch says which machine a trainer runs on; without
    a launcher trainer r counts as part r * parts // trainers'):
    force_even=True (DGL's default): the set ids in order, cut into runs
    whose lengths differ by at most one, handed out part by part (a part is
    a range of ids, so a run lies in its trainer's part but where the parts
    hold unequal shares of the set ids); force_even=False: exactly the set
    ids of the trainer's part, cut evenly among the part's trainers (every
    part needs a trainer).

    Without one: force_even=True cuts the set ids in increasing order into
    get_num_trainers() runs (trainer r takes run r); force_even=False takes
    the set ids in trainer r's range of the id space (len(nodes) cut into
    equal ranges), which may be uneven. ntype: the node type whose
    per-type ids the mask covers (a heterogeneous graph's); node_trainer_ids
    is accepted for DGL's signature and ignored.
    """
    return _split(nodes, partition_book, rank, force_even, "node_split", edges=False,
                  typ=ntype)


def edge_split(edges, partition_book=None, etype="_E", rank=None, force_even=True,
               edge_trainer_ids=None):
    """node_split for a mask of edges: with a partition_book, by edge
    ownership (a part owns its nodes' in-edges, a contiguous range of edge
    ids)."""
    return _split(edges, partition_book, rank, force_even, "edge_split", edges=True,
                  typ=etype)
