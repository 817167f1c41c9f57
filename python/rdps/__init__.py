# SPDX-License-Identifier: MIT
"""rdps from Python: DGL's distributed tensors and embeddings over rdps.

    import rdps.distributed as dist
    dist.initialize()                       # rdps launch --exec's job, or standalone
    emb = dist.DistEmbedding(n, 64, name="entity")
    opt = dist.optim.SparseAdagrad([emb], lr=0.1)

rdps.distributed is the API (pydoc3 rdps.distributed); the guide for DGL
users is docs/dgl.md in the checkout (share/doc/rdps/docs/dgl.md where rdps
is installed). Errors of the C library are RdpsError (errno, message).
"""
from ._errors import RdpsError
from ._ffi import library_path

__version__ = "0.1.0"

__all__ = ["RdpsError", "library_path", "__version__"]
