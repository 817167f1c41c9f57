# SPDX-License-Identifier: MIT
"""Sparse optimizers of DistEmbeddings (dgl.distributed.optim): the servers
keep the state and apply the updates; step() pushes the gradients."""
import errno
import os
import warnings

import torch

from .._errors import RdpsError
from .._ffi import OPT_ADAGRAD, OPT_ADAM, ffi
from ._context import lib
from . import _context
from .embedding import DistEmbedding


class SparseOptimizer:
    """Base of the sparse optimizers: set on the servers at construction,
    gradients pushed by step().

    Every trainer constructs it with the same settings (the servers keep the
    state when the settings are those a table has already; other settings
    replace the optimizer and zero its state).

    step() sums each embedding's recorded rows' gradients per id (the rows
    an id had in every emb() call since the last step) and pushes one
    gradient per id with rdps_client_push: the servers apply the optimizer
    to those rows only. With flush=True (default) it then waits until the
    servers applied them, so the next read sees them; flush=False lets the
    pushes drain while the next step runs (rdps train's way; a read may then
    miss them).
    """

    _kind = None

    def __init__(self, params, lr, *, flush=True, **settings):
        if isinstance(params, DistEmbedding):
            params = [params]
        params = list(params)
        for emb in params:
            if not isinstance(emb, DistEmbedding):
                raise TypeError("%s: params must be DistEmbeddings, not %s" %
                                (type(self).__name__, type(emb).__name__))
        self._params = params
        self._lr = float(lr)
        self._flush = flush
        self._settings = settings
        ctx = _context._context()
        spec = ffi.new("struct rdps_optimizer_spec *")
        spec.optimizer = self._kind
        spec.lr = self._lr
        for k, v in settings.items():
            setattr(spec, k, v)
        for emb in params:
            ctx.check(lib.rdps_client_table_set_optimizer(ctx.client, emb.weight.table_id, spec),
                      "%s for '%s'" % (type(self).__name__, emb.name))
            emb._optimizer = self

    @property
    def lr(self):
        """The learning rate the servers apply."""
        return self._lr

    @property
    def params(self):
        """The DistEmbeddings it updates."""
        return list(self._params)

    def _state(self, emb, ids, values=None):
        """The optimizer state of emb's rows ids (a float32 tensor of
        len(ids) x floats a row), or writes values there."""
        ctx = _context._context()
        per_row = ffi.new("uint32_t *")
        ctx.check(lib.rdps_client_state_floats(ctx.client, emb.weight.table_id, per_row),
                  "%s: the state of '%s'" % (type(self).__name__, emb.name))
        ids = torch.as_tensor(ids, dtype=torch.int64).contiguous()
        cids = ffi.cast("const uint64_t *", ids.data_ptr())
        if values is None:
            out = torch.empty((len(ids), per_row[0]), dtype=torch.float32)
            ctx.check(lib.rdps_client_state_get(ctx.client, emb.weight.table_id, cids,
                                                len(ids), ffi.cast("float *", out.data_ptr())),
                      "%s: reading the state of '%s'" % (type(self).__name__, emb.name))
            return out
        values = values.to(torch.float32).contiguous()
        if tuple(values.shape) != (len(ids), per_row[0]):
            raise RdpsError(-errno.EINVAL, "%s: the state of '%s' is %d x %d floats here, the "
                            "file has %s (another optimizer or embedding size?)" %
                            (type(self).__name__, emb.name, len(ids), per_row[0],
                             "x".join(str(d) for d in values.shape)))
        ctx.check(lib.rdps_client_state_set(ctx.client, emb.weight.table_id, cids, len(ids),
                                            ffi.cast("const float *", values.data_ptr())),
                  "%s: writing the state of '%s'" % (type(self).__name__, emb.name))
        return None

    def _share(self, emb, rank, world):
        """The rows trainer rank of world saves and loads: an even split."""
        n = emb.num_embeddings
        lo, hi = n * rank // world, n * (rank + 1) // world
        return torch.arange(lo, hi, dtype=torch.int64)

    def local_state_dict(self):
        """This trainer's share of the optimizer state (DGL's layout): the
        settings, and per embedding the ids of the rows this trainer holds
        in the split and their state (one float32 tensor, the floats the
        optimizer keeps a row: Adagrad's sum of squares; Adam's m, v and
        step count side by side)."""
        ctx = _context._context()
        states = {}
        for emb in self._params:
            ids = self._share(emb, ctx.rank, ctx.num_trainers)
            states[emb.name] = {"ids": ids, "states": [self._state(emb, ids)]}
        return {"params": {"lr": self._lr, **self._settings, "kind": type(self).__name__,
                           "world_size": ctx.num_trainers},
                "emb_states": states}

    def load_local_state_dict(self, state):
        """Writes back what local_state_dict returned (any trainer's
        share): each embedding's rows' state, as DGL's. The embeddings
        must be this optimizer's, their state of the same shape (another
        optimizer or embedding size is refused naming both)."""
        for name, emb_state in state["emb_states"].items():
            emb = next((e for e in self._params if e.name == name), None)
            if emb is None:
                raise RdpsError(-errno.ENOENT, "%s: the saved state has embedding '%s', which "
                                "this optimizer does not hold" % (type(self).__name__, name))
            self._state(emb, emb_state["ids"], emb_state["states"][0])

    def save(self, f):
        """Saves this trainer's share of the state to f_RANK (DGL's
        SparseOptimizer.save; every trainer calls it)."""
        ctx = _context._context()
        _context.barrier()
        f = f if isinstance(f, str) else os.fsdecode(f)
        torch.save(self.local_state_dict(), "%s_%d" % (f, ctx.rank))
        _context.barrier()

    def load(self, f):
        """Loads what save(f) wrote (every trainer calls it). With fewer
        trainers than saved, a trainer also loads the files of the ranks
        rank + k * trainers; with more, the new ones find no file and load
        nothing (a warning), as DGL does."""
        ctx = _context._context()
        _context.barrier()
        f = f if isinstance(f, str) else os.fsdecode(f)
        own = "%s_%d" % (f, ctx.rank)
        if not os.path.exists(own):
            warnings.warn("%s: %s not found: this trainer loads nothing" %
                          (type(self).__name__, own))
        else:
            state = torch.load(own)
            self.load_local_state_dict(state)
            old_world = int(state["params"].get("world_size", ctx.num_trainers))
            for r in range(ctx.rank + ctx.num_trainers, old_world, ctx.num_trainers):
                self.load_local_state_dict(torch.load("%s_%d" % (f, r)))
        _context.barrier()

    def zero_grad(self):
        """Clears the gradients of the rows recorded since the last step (as
        torch's zero_grad, it may come before or after the forward pass; the
        rows stay recorded for the next backward)."""
        for emb in self._params:
            for _, rows in emb.trace:
                rows.grad = None

    def step(self):
        """Pushes the gradients of the rows recorded since the last step
        (summed per id) to their servers, which apply the optimizer to
        those rows; with flush=True, returns once they are applied. Raises
        rdps.RdpsError if a server refuses the push (e.g. a NaN or an
        infinity in a gradient, naming the table and row)."""
        ctx = _context._context()
        pushed = False
        with torch.no_grad():
            for emb in self._params:
                trace = [(ids, rows.grad) for ids, rows in emb.trace if rows.grad is not None]
                emb.reset_trace()
                if not trace:
                    continue
                ids = torch.cat([i for i, _ in trace])
                grads = torch.cat([g.reshape(-1, emb.embedding_dim) for _, g in trace])
                uniq, inv = torch.unique(ids, return_inverse=True)
                summed = torch.zeros((len(uniq), emb.embedding_dim), dtype=torch.float32)
                summed.index_add_(0, inv, grads.to(torch.float32))
                uniq = uniq.contiguous()
                ctx.check(lib.rdps_client_push(ctx.client, emb.weight.table_id,
                                               ffi.cast("const uint64_t *", uniq.data_ptr()),
                                               ffi.cast("const float *", summed.data_ptr()),
                                               len(uniq)),
                          "%s: pushing the gradients of '%s'" % (type(self).__name__, emb.name))
                pushed = True
            if pushed and self._flush:
                ctx.check(lib.rdps_client_flush(ctx.client), "%s: flush" % type(self).__name__)


class SparseAdagrad(SparseOptimizer):
    """Element-wise Adagrad (DGL's SparseAdagrad; torch.optim.Adagrad's
    update): s += g*g; w -= lr * g / (sqrt(s) + eps), on the rows pushed.

    SparseAdagrad(params, lr, eps=1e-10, flush=True): params a DistEmbedding
    or a list of them; flush as SparseOptimizer says."""

    _kind = OPT_ADAGRAD

    def __init__(self, params, lr, eps=1e-10, **kw):
        if not eps > 0:
            raise RdpsError(-errno.EINVAL, "SparseAdagrad: eps must be > 0")
        super().__init__(params, lr, eps=float(eps), **kw)


class SparseAdam(SparseOptimizer):
    """Adam with a step count per row (DGL's SparseAdam; torch.optim.Adam's
    update for a row, counting the steps that row was pushed):
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g*g;
    w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).

    SparseAdam(params, lr, betas=(0.9, 0.999), eps=1e-8, flush=True)."""

    _kind = OPT_ADAM

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, **kw):
        b1, b2 = betas
        if not (0 < b1 < 1 and 0 < b2 < 1 and eps > 0):
            raise RdpsError(-errno.EINVAL, "SparseAdam: betas must be in (0, 1) and eps > 0")
        super().__init__(params, lr, eps=float(eps), beta1=float(b1), beta2=float(b2), **kw)
