# SPDX-License-Identifier: MIT
"""DGL's distributed API over rdps (dgl.distributed's names and semantics):
the job (initialize, finalize, get_rank, barrier, allreduce), tensors and
embeddings on the servers (DistTensor, DistEmbedding, uniform_init), the
sparse optimizers that the servers apply (SparseAdagrad, SparseAdam),
all_reduce and average_gradients for dense weights, node_split and
edge_split, and graphs on the servers with neighbour sampling (DistGraph,
sample_neighbors, NeighborSampler, DistNodeDataLoader, Block). pydoc3
rdps.distributed.NAME documents each; docs/dgl.md is the guide.

    import rdps.distributed as dist
    dist.initialize()          # $RDPS_IP_CONFIG (rdps launch --exec), else standalone
    emb = dist.DistEmbedding(num_nodes, 64, name="node_emb",
                             init_func=dist.uniform_init(0.1))
    opt = dist.optim.SparseAdagrad([emb], lr=0.1)
    train_ids = dist.node_split(train_mask)
    for batch in ...:
        loss = model(emb(batch)) ...
        opt.zero_grad(); loss.backward(); opt.step()
    dist.finalize()            # also at exit
"""
from . import optim
from ._context import (allreduce, barrier, exit_client, finalize, get_machine, get_num_samplers,
                       get_num_servers, get_num_trainers, get_rank, get_transport, initialize,
                       is_initialized, is_standalone)
from .collective import all_reduce, average_gradients
from .dataloader import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from .embedding import DistEmbedding
from .graph import DistGraph
from .optim import SparseAdagrad, SparseAdam
from .partition import partition_graph
from .partition_book import (EdgePartitionPolicy, GraphPartitionBook, NodePartitionPolicy,
                             PartitionPolicy)
from .sampling import Block, NeighborSampler, sample_neighbors, to_block
from .split import edge_split, node_split
from .tensor import DistTensor, uniform_init

__all__ = ["initialize", "finalize", "exit_client", "is_initialized", "is_standalone",
           "get_rank", "get_num_trainers", "get_num_servers", "get_transport", "get_machine",
           "get_num_samplers", "barrier", "allreduce", "DistTensor", "DistEmbedding",
           "uniform_init", "node_split", "edge_split", "optim", "SparseAdagrad", "SparseAdam",
           "all_reduce", "average_gradients", "DistGraph", "GraphPartitionBook",
           "PartitionPolicy", "NodePartitionPolicy", "EdgePartitionPolicy", "sample_neighbors",
           "NeighborSampler", "Block", "to_block", "DistDataLoader", "DistNodeDataLoader",
           "DistEdgeDataLoader", "partition_graph"]
