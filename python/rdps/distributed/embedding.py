# SPDX-License-Identifier: MIT
"""DistEmbedding: rows of the servers inside a torch model, as DGL's."""
import torch

from .tensor import DistTensor, as_ids


class DistEmbedding:
    """A distributed embedding (dgl.distributed.DistEmbedding): a float32
    DistTensor of num_embeddings rows of embedding_dim, persistent, named
    (or anonymous, named by creation order), starting at zero or from
    init_func(shape, dtype) (uniform_init(r): drawn by the servers).

    emb(ids) returns the rows as a tensor; while gradients are enabled it
    requires grad and is recorded (ids, rows) for the sparse optimizers
    (rdps.distributed.optim), whose step() pushes the rows' gradients to the
    servers after loss.backward(). Collective, as DistTensor.

        emb = dist.DistEmbedding(num_nodes, 16, name="node_emb",
                                 init_func=dist.uniform_init(0.1))
        opt = dist.SparseAdam([emb], lr=0.01)
        loss = model(emb(batch)).sum()
        opt.zero_grad(); loss.backward(); opt.step()

    The rows are a DistTensor (emb.weight) too: read or write them there.
    """

    def __init__(self, num_embeddings, embedding_dim, name=None, init_func=None,
                 part_policy=None):
        self._tensor = DistTensor((num_embeddings, embedding_dim), torch.float32, name,
                                  init_func=init_func, part_policy=part_policy,
                                  persistent=True)
        self._num_embeddings = int(num_embeddings)
        self._embedding_dim = int(embedding_dim)
        self._trace = []
        self._optimizer = None

    def __call__(self, idx, device=torch.device("cpu")):
        """emb(ids): the rows ids as a tensor on device; while gradients are
        enabled it requires grad and is recorded for the sparse optimizer's
        next step()."""
        ids, scalar = as_ids(idx, self._num_embeddings)
        ids = torch.from_numpy(ids.view("int64"))
        rows = self._tensor[ids].to(device)
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._trace.append((ids, rows))
        return rows[0] if scalar else rows

    def reset_trace(self):
        """Forgets the rows recorded since the last step."""
        self._trace = []

    @property
    def trace(self):
        """The (ids, rows) recorded since the last step, for the sparse optimizers."""
        return self._trace

    @property
    def weight(self):
        """The DistTensor of the rows (read or write them directly)."""
        return self._tensor

    @property
    def name(self):
        """The table's name on the servers."""
        return self._tensor.name

    @property
    def num_embeddings(self):
        """Rows of the embedding."""
        return self._num_embeddings

    @property
    def embedding_dim(self):
        """Floats per row."""
        return self._embedding_dim

    @property
    def optimizer(self):
        """The sparse optimizer set on it (None until one is made)."""
        return self._optimizer

    def __repr__(self):
        return "DistEmbedding(name='%s', num_embeddings=%d, embedding_dim=%d)" % (
            self.name, self._num_embeddings, self._embedding_dim)
