# SPDX-License-Identifier: MIT
"""all_reduce of tensors through the servers, and the gradient averaging
of data-parallel training (what torch's DistributedDataParallel does for
DGL's examples), for a model's dense weights."""
import torch

from .._ffi import OPT_SGD, ffi
from ._context import lib
from . import _context

_ROW = 1024  # floats per row of the accumulator tables


class _Accumulators:
    """Two float32 tables of rows elements, SGD at lr 1 (a push of -x adds
    x), used in turn: a sum is pushed into one, read after a barrier, and
    zeroed by trainer 0 while the next sum goes into the other; it is used
    again only after the next call's first barrier, which trainer 0 passes
    only once it has zeroed it."""

    def __init__(self, ctx, rows):
        from .tensor import DistTensor

        self.tables = [DistTensor((rows, _ROW), torch.float32, "_allreduce%d_%d" % (rows, i))
                       for i in range(2)]
        spec = ffi.new("struct rdps_optimizer_spec *")
        spec.optimizer = OPT_SGD
        spec.lr = 1.0
        for t in self.tables:
            ctx.check(lib.rdps_client_table_set_optimizer(ctx.client, t.table_id, spec),
                      "all_reduce: its table '%s'" % t.name)
        self.ids = torch.arange(rows, dtype=torch.int64)
        self.zeros = torch.zeros((rows, _ROW), dtype=torch.float32)
        self.calls = 0


def all_reduce(tensor, op="sum"):
    """Replaces the float32 tensor by its sum (op="mean": mean) over every
    trainer, as torch.distributed.all_reduce: a collective, every trainer
    calls it in the same order with tensors of the same size, and all get
    the same values. Standalone (one trainer) it leaves the tensor as is.
    Through the servers: each trainer pushes its tensor into a table that
    adds them, a barrier, every trainer reads the sum, a barrier."""
    if op not in ("sum", "mean"):
        raise ValueError("all_reduce: op is 'sum' or 'mean', not %r" % (op,))
    if tensor.dtype != torch.float32:
        raise TypeError("all_reduce: float32 tensors only, not %s" % tensor.dtype)
    ctx = _context._context()
    if ctx.num_trainers == 1:
        return tensor
    n = tensor.numel()
    rows = max(1, -(-n // _ROW))
    acc = ctx.accumulators.get(rows)
    if acc is None:
        acc = ctx.accumulators[rows] = _Accumulators(ctx, rows)
    t = acc.tables[acc.calls % 2]
    acc.calls += 1
    neg = torch.zeros(rows * _ROW, dtype=torch.float32)
    neg[:n] = -tensor.detach().reshape(-1)
    neg = neg.reshape(rows, _ROW)
    ctx.check(lib.rdps_client_push(ctx.client, t.table_id,
                                   ffi.cast("const uint64_t *", acc.ids.data_ptr()),
                                   ffi.cast("const float *", neg.data_ptr()), rows),
              "all_reduce: push")
    _context.barrier()  # flushes, then every trainer's part is in
    total = t[acc.ids].reshape(-1)[:n].reshape(tensor.shape)
    _context.barrier()  # everyone has read it
    if ctx.rank == 0:
        t[acc.ids] = acc.zeros
    if op == "mean":
        total /= ctx.num_trainers
    with torch.no_grad():
        tensor.copy_(total)
    return tensor


def average_gradients(params):
    """Sets the gradient of every parameter to its mean over the trainers
    (zeros for a trainer without one), in one all_reduce: call it after
    loss.backward() and before a local torch optimizer's step(), and every
    trainer takes the same step on the same weights (start them equal: the
    same seed), as with DistributedDataParallel."""
    params = [p for p in params]
    if _context._context().num_trainers == 1:
        return
    sizes = [p.numel() for p in params]
    flat = torch.zeros(sum(sizes), dtype=torch.float32)
    at = 0
    for p, k in zip(params, sizes):
        if p.grad is not None:
            flat[at:at + k] = p.grad.detach().reshape(-1)
        at += k
    all_reduce(flat, "mean")
    at = 0
    for p, k in zip(params, sizes):
        g = flat[at:at + k].reshape(p.shape).to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        at += k
