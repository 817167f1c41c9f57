# SPDX-License-Identifier: MIT
"""dgl.distributed's namespace over rdps: what a DGL script reaches as
dgl.distributed.X once rdps.distributed.dgl_compat is imported (or
directly: `import rdps.distributed.dglapi as dist`).

It is rdps.distributed with DGL's return types where the two differ:
sample_neighbors returns DGL's frontier graph (rdps.distributed's returns
rdps's SampledEdges), and DGL's submodule names (optim, nn) are there.
"""
import sys
import types

from . import optim
from ._context import barrier, exit_client, finalize, initialize, is_initialized
from .dataloader import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from .embedding import DistEmbedding
from .graph import DistGraph
from .optim import SparseAdagrad, SparseAdam
from .partition import partition_graph
from .partition_book import (EdgePartitionPolicy, GraphPartitionBook, NodePartitionPolicy,
                             PartitionPolicy)
from .sampling import sample_frontier
from .split import edge_split, node_split
from .tensor import DistTensor


def sample_neighbors(g, nodes, fanout, edge_dir="in", prob=None, exclude_edges=None,
                     replace=False, etype_sorted=True, output_device=None):
    """dgl.distributed.sample_neighbors: the frontier (a DGL graph of every
    node of g and the sampled in-edges of nodes, edata[dgl.EID] their
    ids), sampled by rdps (see rdps.distributed.sampling)."""
    return sample_frontier(g, nodes, fanout, edge_dir=edge_dir, prob=prob,
                           exclude_edges=exclude_edges, replace=replace)


# dgl.distributed.nn (DistEmbedding) and dgl.distributed.nn.pytorch.
nn = types.ModuleType(__name__ + ".nn", "dgl.distributed.nn over rdps")
nn.DistEmbedding = DistEmbedding
nn.pytorch = types.ModuleType(__name__ + ".nn.pytorch", "dgl.distributed.nn.pytorch over rdps")
nn.pytorch.DistEmbedding = DistEmbedding
sys.modules[nn.__name__] = nn
sys.modules[nn.pytorch.__name__] = nn.pytorch

__all__ = ["initialize", "exit_client", "finalize", "is_initialized", "barrier", "DistGraph",
           "DistTensor", "DistEmbedding", "DistDataLoader", "DistNodeDataLoader",
           "DistEdgeDataLoader", "node_split", "edge_split", "sample_neighbors",
           "GraphPartitionBook", "PartitionPolicy", "NodePartitionPolicy",
           "EdgePartitionPolicy", "SparseAdagrad", "SparseAdam", "optim", "nn",
           "partition_graph"]
