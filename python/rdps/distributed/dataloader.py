# SPDX-License-Identifier: MIT
"""Mini-batch loaders of a DistGraph (dgl.distributed.DistDataLoader,
dgl.dataloading.DistNodeDataLoader and DistEdgeDataLoader).

The node and edge loaders take DGL's sampler objects
(dgl.dataloading.NeighborSampler, MultiLayerFullNeighborSampler, ...,
with negative_sampler=dgl.dataloading.negative_sampler.Uniform(k),
exclude='self' / 'reverse_id' and reverse_eids for edges) and batch them
through DGL's own collators, so they yield DGL's blocks and pair graphs;
the sampler asks the DistGraph for neighbours, and rdps samples them.
rdps's own NeighborSampler (rdps.distributed.NeighborSampler) yields rdps
Blocks and needs no DGL.

With initialize(num_samplers=N) (rdps launch --num_samplers N), N
background threads sample the next mini-batches while the loop trains
(queue_size batches ahead, in order); they share the process's client,
whose calls are serialised (rdps.distributed._context.lib)."""
import collections
import concurrent.futures
import inspect

import torch

from . import _context
from .graph import _ids, dgl_module
from .sampling import NeighborSampler as _RdpsNeighborSampler


def _as_index(dataset):
    if isinstance(dataset, torch.Tensor):
        return dataset
    return None


class DistDataLoader:
    """Batches of dataset (a 1-D tensor of ids, or anything indexable with
    a length) passed through collate_fn, as dgl.distributed.DistDataLoader:
    batch_size items each (the last smaller unless drop_last), in a new
    random order each epoch when shuffle (torch's generator, or a
    generator seeded by seed). num_samplers (default: initialize's)
    background threads collate up to queue_size batches ahead (default
    2 per thread). num_workers and pin_memory (DGL's) are ignored."""

    def __init__(self, dataset, batch_size, shuffle=False, collate_fn=None, drop_last=False,
                 queue_size=None, *, seed=None, num_samplers=None, **ignored):
        for k in ignored:
            if k not in ("num_workers", "pin_memory", "persistent_workers", "use_ddp",
                         "use_uva", "use_prefetch_thread", "use_alternate_streams"):
                raise TypeError("DistDataLoader: unexpected argument %r" % k)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError("DistDataLoader: batch_size must be >= 1, not %d" % self.batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.collate_fn = collate_fn if collate_fn is not None else (lambda x: x)
        self.num_samplers = _context.get_num_samplers() if num_samplers is None \
            else int(num_samplers)
        self.queue_size = int(queue_size) if queue_size else max(2, 2 * self.num_samplers)
        self._gen = None
        if seed is not None:
            self._gen = torch.Generator()
            self._gen.manual_seed(int(seed))

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batches(self):
        n = len(self.dataset)
        order = torch.randperm(n, generator=self._gen) if self.shuffle else torch.arange(n)
        index = _as_index(self.dataset)
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            if index is not None:
                yield index[idx]
            else:
                yield [self.dataset[j] for j in idx.tolist()]

    def __iter__(self):
        if self.num_samplers <= 0:
            for items in self._batches():
                yield self.collate_fn(items)
            return
        ex = concurrent.futures.ThreadPoolExecutor(self.num_samplers,
                                                   thread_name_prefix="rdps-sampler")
        pending = collections.deque()
        try:
            for items in self._batches():
                pending.append(ex.submit(self.collate_fn, items))
                if len(pending) >= self.queue_size:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            ex.shutdown(wait=True, cancel_futures=True)


def _split_kwargs(collator, kwargs):
    names = set(inspect.getfullargspec(collator).args)
    mine = {k: v for k, v in kwargs.items() if k in names}
    rest = {k: v for k, v in kwargs.items() if k not in names}
    return mine, rest


def _check_device(device, what):
    if device is not None and torch.device(device).type != "cpu":
        raise ValueError("%s: mini-batches are made on the CPU (device=%r): move the blocks "
                         "with block.to(device)" % (what, device))


class _RdpsNodeCollator:
    def __init__(self, g, nids, sampler):
        self.g, self.sampler = g, sampler
        self.dataset = torch.from_numpy(_ids(nids, "DistNodeDataLoader"))

    def collate(self, items):
        return self.sampler.sample_blocks(self.g, items)


class DistNodeDataLoader(DistDataLoader):
    """Mini-batches of seed nodes with their blocks
    (dgl.dataloading.DistNodeDataLoader): yields (input_nodes, seeds,
    blocks) for batches of batch_size of nids (a tensor; a dict of node
    type -> tensor for several types). graph_sampler: one of DGL's
    (NeighborSampler, MultiLayerFullNeighborSampler, ...: DGL blocks) or
    rdps's NeighborSampler (rdps Blocks, no DGL needed). Other keywords:
    DistDataLoader's (batch_size, shuffle, drop_last, seed, ...)."""

    def __init__(self, g, nids, graph_sampler, device=None, **kwargs):
        _check_device(device, "DistNodeDataLoader")
        if isinstance(graph_sampler, _RdpsNeighborSampler):
            collator = _RdpsNodeCollator(g, nids, graph_sampler)
            rest = kwargs
        else:
            dgl_module("DistNodeDataLoader with a DGL sampler")
            from dgl.dataloading.dist_dataloader import NodeCollator
            mine, rest = _split_kwargs(NodeCollator, kwargs)
            if isinstance(nids, torch.Tensor) or not isinstance(nids, dict):
                nids = torch.as_tensor(_ids(nids, "DistNodeDataLoader"))
            collator = NodeCollator(g, nids, graph_sampler, **mine)
        self.collator = collator
        super().__init__(collator.dataset, collate_fn=collator.collate, **rest)


class DistEdgeDataLoader(DistDataLoader):
    """Mini-batches of edges (dgl.dataloading.DistEdgeDataLoader), through
    DGL's EdgeCollator: yields (input_nodes, pair_graph, blocks), or
    (input_nodes, pair_graph, negative_pair_graph, blocks) with a
    negative_sampler (dgl.dataloading.negative_sampler.Uniform(k));
    exclude ('self', 'reverse_id' with reverse_eids, 'reverse_types' with
    reverse_etypes) keeps the batch's edges out of its blocks. Needs DGL."""

    def __init__(self, g, eids, graph_sampler, device=None, **kwargs):
        _check_device(device, "DistEdgeDataLoader")
        dgl_module("DistEdgeDataLoader")
        from dgl.dataloading.dist_dataloader import EdgeCollator
        mine, rest = _split_kwargs(EdgeCollator, kwargs)
        if not isinstance(eids, dict):
            eids = torch.as_tensor(_ids(eids, "DistEdgeDataLoader"))
        self.collator = EdgeCollator(g, eids, graph_sampler, **mine)
        super().__init__(self.collator.dataset, collate_fn=self.collator.collate, **rest)
