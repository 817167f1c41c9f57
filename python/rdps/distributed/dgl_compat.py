# SPDX-License-Identifier: MIT
"""The one line a DGL distributed script needs to run on rdps:

    import rdps.distributed.dgl_compat  # first, before `import dgl`

Afterwards, in this process, dgl.distributed is rdps.distributed.dglapi
(DistGraph, DistTensor, DistEmbedding, node_split, the sparse optimizers,
initialize, ... served by rdps), and dgl.dataloading.DistNodeDataLoader /
DistEdgeDataLoader are rdps's, which take DGL's samplers and yield DGL's
blocks. Everything else of DGL (dgl.dataloading's samplers,
negative_sampler, dgl.nn, dgl.create_block, block.to(device)) is DGL's
own, unchanged. Needs DGL installed (ImportError otherwise).

Names already bound before the import (`from dgl.distributed import X`
run earlier) stay DGL's: put the line first.
"""
import sys

import dgl
import dgl.dataloading

from . import dglapi

_MODULES = {
    "dgl.distributed": dglapi,
    "dgl.distributed.optim": dglapi.optim,
    "dgl.distributed.nn": dglapi.nn,
    "dgl.distributed.nn.pytorch": dglapi.nn.pytorch,
}

for _name, _mod in _MODULES.items():
    sys.modules[_name] = _mod
dgl.distributed = dglapi
dgl.dataloading.DistNodeDataLoader = dglapi.DistNodeDataLoader
dgl.dataloading.DistEdgeDataLoader = dglapi.DistEdgeDataLoader

ACTIVE = True
