# SPDX-License-Identifier: MIT
"""DistTensor: a table of the servers seen as a tensor, as DGL's
(dgl.distributed.DistTensor), and uniform_init, an init_func the servers
run themselves. docs/dgl.md has a whole script."""
import errno
import math

import numpy as np
import torch

from .._errors import RdpsError
from .._ffi import DTYPE_F32, DTYPE_F64, DTYPE_I64, DTYPE_U8, TABLE_NAME_MAX, ffi, string
from ._context import lib
from . import _context

# torch dtype -> (rdps dtype, torch dtype the rows are stored as)
_DTYPES = {
    torch.float32: (DTYPE_F32, torch.float32),
    torch.float64: (DTYPE_F64, torch.float64),
    torch.int64: (DTYPE_I64, torch.int64),
    torch.uint8: (DTYPE_U8, torch.uint8),
    torch.bool: (DTYPE_U8, torch.uint8),  # masks: stored as uint8, read as bool
}
_NAMES = {"float32": torch.float32, "float": torch.float32, "float64": torch.float64,
          "double": torch.float64, "int64": torch.int64, "long": torch.int64,
          "uint8": torch.uint8, "bool": torch.bool}


def torch_dtype(dtype):
    """torch.float32, np.float32, np.dtype('float32'), 'float32' -> torch.float32."""
    if isinstance(dtype, torch.dtype):
        t = dtype
    elif isinstance(dtype, str) and dtype in _NAMES:
        t = _NAMES[dtype]
    else:
        try:
            t = _NAMES.get(np.dtype(dtype).name)
        except TypeError:
            t = None
    if t not in _DTYPES:
        raise TypeError("DistTensor: dtype %r: rdps tables hold float32, float64, int64 or "
                        "uint8 (and bool, as uint8)" % (dtype,))
    return t


def as_ids(idx, num_rows):
    """Row ids (an index of the first dimension) as a contiguous uint64 array,
    and the shape they index: a tensor/array/list of ints (any order,
    repeats allowed), a slice or range, or an int."""
    scalar = False
    if isinstance(idx, slice):
        ids = np.arange(*idx.indices(num_rows), dtype=np.int64)
    elif isinstance(idx, range):
        ids = np.asarray(idx, dtype=np.int64)
    elif isinstance(idx, (int, np.integer)):
        scalar = True
        i = int(idx)
        ids = np.array([i + num_rows if i < 0 else i], dtype=np.int64)
    else:
        if isinstance(idx, torch.Tensor):
            if idx.is_floating_point() or idx.dtype == torch.bool or idx.is_complex():
                raise TypeError("DistTensor: ids must be integers, not %s" % idx.dtype)
            ids = idx.detach().cpu().numpy()
        else:
            ids = np.asarray(idx)
            if ids.size == 0:
                ids = ids.astype(np.int64)
            if ids.dtype.kind not in "iu":
                raise TypeError("DistTensor: ids must be integers, not %s" % ids.dtype)
        if ids.ndim == 0:
            scalar = True
        ids = np.ascontiguousarray(ids.reshape(-1), dtype=np.int64)
    if len(ids) and ids.min() < 0:
        raise RdpsError(-errno.ERANGE, "id %d is negative (rows are 0..%d)" %
                        (int(ids.min()), num_rows - 1))
    return ids.view(np.uint64), scalar


def _uint64_ptr(ids):
    return ffi.cast("const uint64_t *", ids.ctypes.data)


class uniform_init:
    """init_func drawing rows uniform in [-r, r]. DistTensor and
    DistEmbedding recognise it and let the servers draw the rows (by seed,
    table and id: the same on any number of servers, no rows sent); called
    as a plain init_func(shape, dtype) it draws them with torch.

        emb = dist.DistEmbedding(n, 64, name="emb", init_func=dist.uniform_init(0.1))

    r > 0 (ValueError otherwise); seed picks the stream (default 0)."""

    def __init__(self, r, seed=0):
        if not r > 0:
            raise ValueError("uniform_init: r must be > 0")
        self.r = float(r)
        self.seed = int(seed)

    def __call__(self, shape, dtype):
        """A tensor of shape and dtype drawn uniform in [-r, r] with torch
        (what a DistTensor of another dtype than float32 gets)."""
        return torch.empty(shape, dtype=dtype).uniform_(-self.r, self.r)

    def __repr__(self):
        return "uniform_init(%g, seed=%d)" % (self.r, self.seed)


# Rows rank 0 writes per rdps_client_set() call when running an init_func.
_INIT_CHUNK_BYTES = 8 << 20


class DistTensor:
    """A distributed tensor (dgl.distributed.DistTensor): a table of
    shape[0] rows of prod(shape[1:]) elements on the servers, split evenly
    over them (rdps_client_table_create).

    Collective: every trainer makes it, with the same arguments, in the same
    order. A name already on the servers (made by another trainer, or an
    earlier job of servers that outlive jobs) is that tensor, rows as they
    are; another shape or dtype under it is an RdpsError (EEXIST). name=None
    makes an anonymous tensor, named by the order tensors are made in.

    init_func(shape, dtype) -> tensor gives the initial rows; None: zeros.
    Trainer 0 calls it on chunks of rows (shape (k,) + shape[1:], as DGL
    calls it on each server's part) and writes them, only if it made the
    tensor, then every trainer waits in a barrier. uniform_init(r) (float32)
    is drawn by the servers instead.

    persistent=False: finalize() drops the tensor when the servers stay up
    (initialize(shutdown_servers=False)); persistent=True keeps it for the
    next job. part_policy, is_gdata and attach are accepted for DGL's
    signature and ignored: rows are split evenly over the servers.

    t[ids] returns a torch tensor of len(ids) rows (ids: torch or numpy
    ints, any order, repeats allowed; or a slice, or an int for one row);
    t[ids] = values writes rows (values broadcast to the rows' shape; the
    same id twice: the later row stays).

        labels = dist.DistTensor((n,), torch.int64, name="labels")
        labels[torch.arange(10)] = torch.ones(10, dtype=torch.int64)
        print(labels[0:5])

    dtype: torch.float32, float64, int64, uint8 or bool (stored as uint8),
    or their numpy or string names; anything else is a TypeError. Errors of
    the servers (another shape under the name, a table past the server's
    --max-table-memory, an id past the end) raise rdps.RdpsError with the
    server's message and errno.
    """

    def __init__(self, shape, dtype, name=None, init_func=None, part_policy=None,
                 persistent=False, is_gdata=True, attach=True):
        ctx = _context._context()
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(int(s) for s in shape)
        if len(shape) < 1 or shape[0] < 1 or any(s < 1 for s in shape[1:]):
            raise ValueError("DistTensor: shape %r: need at least one row, and no empty "
                             "dimension" % (shape,))
        self._shape = shape
        self._dtype = torch_dtype(dtype)
        self._code, self._storage = _DTYPES[self._dtype]
        self._elems = int(math.prod(shape[1:]))
        if name is None:
            if persistent:
                raise ValueError("DistTensor: a persistent tensor needs a name")
            name = "_anon_%d" % ctx.anon
            ctx.anon += 1
        if len(name.encode()) >= TABLE_NAME_MAX:
            raise ValueError("DistTensor: name '%s' is too long (at most %d bytes)" %
                             (name, TABLE_NAME_MAX - 1))
        self._name = name
        self._persistent = persistent
        uniform = isinstance(init_func, uniform_init)
        if uniform and self._code != DTYPE_F32:
            uniform = False  # the servers draw float32 only: init_func runs here
        write_init = init_func is not None and not uniform

        spec = ffi.new("struct rdps_table_spec *")
        cname = ffi.new("char[]", name.encode())
        spec.name = cname
        spec.num_rows = shape[0]
        spec.elems = self._elems
        spec.dtype = self._code
        if uniform:
            spec.init_range = init_func.r
            spec.seed = init_func.seed
        info = ffi.new("struct rdps_table_info *")

        made = False
        if write_init:
            # Trainer 0 writes the rows if it makes the tensor: it looks
            # before anyone can make it (the others wait in the barrier).
            if ctx.rank == 0:
                ret = lib.rdps_client_table(ctx.client, cname, info)
                if ret < 0 and ret != -errno.ENOENT:
                    ctx.check(ret, "DistTensor '%s'" % name)
                made = ret == -errno.ENOENT
            _context.barrier()
        ctx.check(lib.rdps_client_table_create(ctx.client, spec, info),
                  "DistTensor '%s'" % name)
        self._id = info.id
        self._ctx = ctx
        if made:
            self._write_init(init_func)
        _context.barrier()
        if not persistent and name not in ctx.transient:
            ctx.transient.append(name)

    @classmethod
    def _attach(cls, name):
        """The tensor of a table the servers already have (a graph's data:
        DistGraph.ndata), shaped by the table: (rows,) for one element a row,
        else (rows, elements). Not collective; never dropped."""
        ctx = _context._context()
        info = ffi.new("struct rdps_table_info *")
        ctx.check(lib.rdps_client_table(ctx.client, name.encode(), info),
                  "DistTensor '%s'" % name)
        codes = {v[0]: k for k, v in _DTYPES.items() if k is not torch.bool}
        self = cls.__new__(cls)
        self._shape = (int(info.num_rows),) if info.elems == 1 else (int(info.num_rows),
                                                                      int(info.elems))
        self._dtype = codes[info.dtype]
        self._code, self._storage = _DTYPES[self._dtype]
        self._elems = int(info.elems)
        self._name = name
        self._persistent = True
        self._id = info.id
        self._ctx = ctx
        return self

    def _write_init(self, init_func):
        row_bytes = max(1, self._elems * torch.empty((), dtype=self._storage).element_size())
        chunk = max(1, _INIT_CHUNK_BYTES // row_bytes)
        for lo in range(0, self._shape[0], chunk):
            hi = min(self._shape[0], lo + chunk)
            rows = init_func((hi - lo,) + self._shape[1:], self._dtype)
            self[lo:hi] = rows

    # -- DGL's metadata ---------------------------------------------------
    @property
    def shape(self):
        """The tensor's shape: (rows,) + the shape of a row."""
        return self._shape

    @property
    def dtype(self):
        """The torch dtype rows are read as (bool for a mask stored as uint8)."""
        return self._dtype

    @property
    def name(self):
        """The table's name on the servers."""
        return self._name

    @property
    def part_policy(self):
        """None: rows are split evenly over the servers (DGL places them by partition)."""
        return None

    @property
    def persistent(self):
        """Whether finalize() leaves the tensor on servers that outlive the job."""
        return self._persistent

    @property
    def table_id(self):
        """The table's index on the servers (rdps_client_* calls)."""
        return self._id

    def __len__(self):
        """The number of rows (shape[0])."""
        return self._shape[0]

    def __repr__(self):
        return "DistTensor(name='%s', shape=%s, dtype=%s)" % (self._name, self._shape,
                                                              self._dtype)

    # -- rows -------------------------------------------------------------
    def _live(self):
        ctx = _context._context()
        if ctx is not self._ctx:
            raise RdpsError(-errno.ENOTCONN, "DistTensor '%s' belongs to a job this process "
                            "left (finalize)" % self._name)
        return ctx

    def _rows(self, ids, row_shape):
        """The table's rows ids (as_ids), each of row_shape, as stored."""
        ctx = self._live()
        out = torch.empty((len(ids),) + tuple(row_shape), dtype=self._storage)
        if len(ids):
            ctx.check(lib.rdps_client_get(ctx.client, self._id, _uint64_ptr(ids), len(ids),
                                          ffi.cast("void *", out.data_ptr())),
                      "DistTensor '%s': get" % self._name)
        return out

    def __getitem__(self, idx):
        """t[ids]: the rows ids (ints, a tensor or array of them, a slice) as a
        new torch tensor, read from their servers in one request each."""
        ids, scalar = as_ids(idx, self._shape[0])
        out = self._rows(ids, self._shape[1:])
        if self._dtype == torch.bool:
            out = out.bool()
        return out[0] if scalar else out

    def __setitem__(self, idx, values):
        """t[ids] = values: writes the rows (values of the rows' shape, or
        one that broadcasts to it); returns once every server wrote them."""
        ctx = self._live()
        ids, _ = as_ids(idx, self._shape[0])
        if not len(ids):
            return
        rows_shape = (len(ids),) + self._shape[1:]
        if isinstance(values, torch.Tensor):
            v = values.detach().to("cpu", self._storage)
        else:
            v = torch.as_tensor(np.asarray(values)).to(self._storage)
        try:
            if tuple(v.shape) != rows_shape:
                # (n, elems) for rows of shape (a, b), or a row to broadcast
                v = v.reshape(rows_shape) if v.numel() == len(ids) * self._elems \
                    else v.expand(rows_shape)
        except RuntimeError:
            raise ValueError("DistTensor '%s': values of shape %s do not fit %d row(s) of "
                             "shape %s" % (self._name, tuple(v.shape), len(ids),
                                           self._shape[1:])) from None
        v = v.contiguous()
        ctx.check(lib.rdps_client_set(ctx.client, self._id, _uint64_ptr(ids),
                                      ffi.cast("const void *", v.data_ptr()), len(ids)),
                  "DistTensor '%s': set" % self._name)

    def count_nonzero(self):
        """The number of non-zero elements (rows read in chunks), as DGL's."""
        n = 0
        chunk = max(1, _INIT_CHUNK_BYTES // max(1, self._elems))
        for lo in range(0, self._shape[0], chunk):
            n += int(torch.count_nonzero(self[lo:min(self._shape[0], lo + chunk)]))
        return n
