# SPDX-License-Identifier: MIT
"""rdps from Python: DGL's distributed tensors and embeddings over rdps.

    import rdps.distributed as dist
    dist.initialize()                       # rdps launch --exec's job, or standalone
    emb = dist.DistEmbedding(n, 64, name="entity")
    opt = dist.optim.SparseAdagrad([emb], lr=0.1)

See README.md ("Python") and rdps.distributed.
"""
from ._errors import RdpsError
from ._ffi import library_path

__version__ = "0.1.0"

__all__ = ["RdpsError", "library_path", "__version__"]
