# SPDX-License-Identifier: MIT
"""node_split / edge_split: a trainer's share of a set of nodes or edges."""
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


def _split(elements, partition_book, rank, force_even, what):
    mask = _mask(elements)
    n = _context.get_num_trainers()
    if rank is None:
        rank = _context.get_rank()
    if not 0 <= rank < n:
        raise ValueError("%s: rank %d is not in 0..%d" % (what, rank, n - 1))
    ids = np.flatnonzero(mask)
    if partition_book is not None and not force_even:
        # A graph's nodes: each trainer takes set nodes of its own part (the
        # part whose server is local to it: trainers r * parts // n), the
        # part's set nodes cut evenly among the part's trainers.
        ranges = partition_book.node_ranges
        k = len(ranges) - 1
        if len(mask) != ranges[-1]:
            raise ValueError("%s: the mask has %d elements, the graph %d nodes" %
                             (what, len(mask), ranges[-1]))
        if n < k:
            raise ValueError("%s: %d trainers for %d parts: with force_even=False every "
                             "part needs a trainer" % (what, n, k))
        part = rank * k // n
        mates = [r for r in range(n) if r * k // n == part]
        own = ids[(ids >= ranges[part]) & (ids < ranges[part + 1])]
        off = _even_offsets(len(own), len(mates))
        i = mates.index(rank)
        return torch.from_numpy(own[off[i]:off[i + 1]].astype(np.int64))
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

    force_even=True: the set ids in increasing order, cut into
    get_num_trainers() runs whose lengths differ by at most one (trainer r
    takes run r). force_even=False: the set ids in trainer r's range of the
    id space (len(nodes) cut into equal ranges), which may be uneven; with
    a partition_book (DistGraph.get_partition_book()), the set nodes of the
    trainer's own part (trainer r's part is r * parts // trainers; the part's
    set nodes cut evenly among its trainers), so that each trainer samples
    around the nodes its local server holds. A graph's ids are relabeled so
    that each part is one range: force_even=True keeps most of a trainer's
    nodes in one part too. ntype and node_trainer_ids are accepted for DGL's
    signature and ignored.
    """
    return _split(nodes, partition_book, rank, force_even, "node_split")


def edge_split(edges, partition_book=None, etype="_E", rank=None, force_even=True,
               edge_trainer_ids=None):
    """node_split for a mask of edges."""
    return _split(edges, partition_book, rank, force_even, "edge_split")
