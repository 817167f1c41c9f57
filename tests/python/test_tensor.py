# SPDX-License-Identifier: MIT
"""DistTensor over inproc and tcp (2 servers): made, found again by name,
refused under another shape; rows of every dtype written and read back
exactly (ids unsorted and repeated, over both servers); init_func written
by trainer 0 in chunks; the servers' uniform start; errors (RdpsError
with the C library's message and errno: ids past the rows, another shape
under a name)."""
import errno
import zlib

import numpy as np
import pytest
import torch

import rdps
import rdps.distributed as dist
from rdps.distributed import tensor as tensor_mod


def test_create_reuse_and_mismatch(job):
    t = dist.DistTensor((100, 3), torch.float32, name="feat")
    assert (t.shape, t.dtype, t.name, len(t)) == ((100, 3), torch.float32, "feat", 100)
    assert torch.equal(t[0:100], torch.zeros(100, 3)), "a new tensor starts at zero"
    rows = torch.arange(300, dtype=torch.float32).reshape(100, 3)
    t[0:100] = rows
    calls = []
    again = dist.DistTensor((100, 3), np.float32, name="feat",
                            init_func=lambda s, d: calls.append(s) or torch.ones(s, dtype=d))
    assert again.table_id == t.table_id
    assert torch.equal(again[0:100], rows), "the same name is the same rows"
    assert calls == [], "init_func ran on a tensor that existed"
    for shape, dtype in (((100, 4), torch.float32), ((99, 3), torch.float32),
                         ((100, 3), torch.float64)):
        with pytest.raises(rdps.RdpsError) as e:
            dist.DistTensor(shape, dtype, name="feat")
        assert e.value.errno == errno.EEXIST
        # The servers' message, naming both shapes.
        assert "100 rows x 3 float32" in e.value.message, e.value.message
        assert "%d rows x %d %s" % (shape[0], shape[1], str(dtype).split(".")[1]) in \
            e.value.message, e.value.message
    a, b = dist.DistTensor((10,), torch.int64), dist.DistTensor((10,), torch.int64)
    assert a.name != b.name and a.table_id != b.table_id, "anonymous tensors are distinct"
    a[[3]] = 5
    assert int(b[3]) == 0 and int(a[3]) == 5


DTYPES = [torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool]
SHAPES = [(301, 5), (301,), (301, 2, 3), (301, 7)]


def random_rows(dtype, shape, gen):
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype) * 1e3
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -2**62), min(info.max, 2**62), shape, generator=gen,
                         dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[1])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rows_round_trip(job, dtype, shape):
    gen = torch.Generator().manual_seed(zlib.crc32(("%s %s" % (dtype, shape)).encode()))
    name = "rt_%s_%s" % (str(dtype).split(".")[1], "x".join(map(str, shape)))
    t = dist.DistTensor(shape, dtype, name=name)
    n, want = shape[0], torch.zeros(shape, dtype=dtype)
    # Unsorted ids over both servers, every tenth a repeat: the later row stays.
    ids = torch.randint(0, n, (200,), generator=gen)
    ids[9::10] = ids[4::10]
    values = random_rows(dtype, (200,) + shape[1:], gen)
    for i, v in zip(ids.tolist(), values):
        want[i] = v
    t[ids] = values
    # Read back every row: descending, then shuffled with numpy ids.
    assert torch.equal(t[torch.arange(n - 1, -1, -1)], want.flip(0))
    perm = np.random.default_rng(1).permutation(n)
    got = t[perm]
    assert got.dtype == dtype and tuple(got.shape) == (n,) + shape[1:]
    assert torch.equal(got, want[perm])
    assert torch.equal(t[int(ids[0])], want[int(ids[0])]), "an int index gives one row"
    assert torch.equal(t[[]], want[:0])
    # numpy values, and one row broadcast to several ids
    t[np.array([0, n - 1])] = values[:2].numpy()
    assert torch.equal(t[[0, n - 1]], values[:2])
    t[[1, 2, 3]] = values[0]
    assert torch.equal(t[[1, 2, 3]], values[0].expand((3,) + shape[1:]))


def test_init_func_written_by_trainer0_in_chunks(job, monkeypatch):
    # Small chunks: the rows take several writes.
    monkeypatch.setattr(tensor_mod, "_INIT_CHUNK_BYTES", 1000)
    shapes, count = [], [0]

    def init(shape, dtype):
        shapes.append(shape)
        lo = count[0]
        count[0] += shape[0]
        return torch.arange(lo * 4, (lo + shape[0]) * 4, dtype=torch.float64).reshape(shape)

    t = dist.DistTensor((257, 2, 2), torch.float64, name="init_chunks", init_func=init)
    assert len(shapes) > 3 and all(s[1:] == (2, 2) for s in shapes)
    assert sum(s[0] for s in shapes) == 257
    assert torch.equal(t[0:257], torch.arange(257 * 4, dtype=torch.float64).reshape(257, 2, 2))


def test_uniform_init_drawn_by_the_servers(job):
    init = dist.uniform_init(0.25, seed=7)
    t = dist.DistTensor((1000, 8), torch.float32, name="uni", init_func=init)
    rows = t[0:1000]
    assert float(rows.abs().max()) <= 0.25 and float(rows.abs().min()) > 0
    assert abs(float(rows.mean())) < 0.01 and 0.13 < float(rows.std()) < 0.16  # U: r/sqrt(3)
    # The same seed in another tensor: the same rows (by seed, table, id);
    # another seed: others.
    same = dist.DistTensor((1000, 8), torch.float32, name="uni",
                           init_func=dist.uniform_init(0.25, seed=7))
    assert torch.equal(same[0:1000], rows)
    # An init_func of another dtype than float32 is run here instead.
    ints = dist.DistTensor((10,), torch.float64, name="uni64", init_func=init)
    assert float(ints[0:10].abs().max()) <= 0.25 and float(ints[0:10].abs().min()) > 0


def test_count_nonzero_and_ids_errors(job):
    t = dist.DistTensor((50,), torch.uint8, name="mask")
    t[[1, 5, 5, 49]] = 1
    assert t.count_nonzero() == 3
    with pytest.raises(TypeError):
        t[torch.tensor([0.5])]
    with pytest.raises(TypeError):
        dist.DistTensor((5,), torch.int32, name="i32")
    with pytest.raises(ValueError):
        dist.DistTensor((5,), torch.int64, name="x" * 40)
    with pytest.raises(ValueError):
        t[[1, 2]] = torch.ones(3, dtype=torch.uint8)


def test_rows_out_of_range(job):
    t = dist.DistTensor((10, 2), torch.int64, name="small")
    for f in (lambda: t[[3, 10]], lambda: t.__setitem__([10], 1),
              lambda: dist.DistEmbedding(10, 2, name="small_emb")([2, 11])):
        with pytest.raises(rdps.RdpsError) as e:
            f()
        assert e.value.errno == errno.ERANGE
        # rdps_client_errmsg's text, as the client library wrote it
        assert "out of range for table 'small" in e.value.message, e.value.message
        assert "ERANGE" in str(e.value)
    with pytest.raises(rdps.RdpsError) as e:
        t[[-1]]
    assert e.value.errno == errno.ERANGE and "negative" in e.value.message
    with pytest.raises(rdps.RdpsError) as e:
        dist.initialize()
    assert e.value.errno == errno.EALREADY


def test_shapes_that_wrap_are_refused(job):
    """A tensor of 2^58 rows wrapped the server's size to 0 bytes and wrote
    past the allocation (standalone, the interpreter segfaulted; under a
    job, server 0 died); an int64 row of 2^31 + 1 elements wrapped to 2
    words. Both are errors naming the limit, and the job goes on."""
    with pytest.raises(rdps.RdpsError) as e:
        dist.DistTensor((2 ** 58, 1), torch.float32, name="huge")
    assert e.value.errno in (errno.EOVERFLOW, errno.ENOSPC), e.value
    assert "64-bit sizes" in e.value.message or "--max-table-memory" in e.value.message, \
        e.value.message
    with pytest.raises(rdps.RdpsError) as e:
        dist.DistTensor((1, 2 ** 31 + 1), torch.int64, name="wide")
    assert e.value.errno == errno.EINVAL and "words" in e.value.message, e.value.message
    t = dist.DistTensor((4, 2), torch.float32, name="after_huge")
    t[[1]] = torch.tensor([[1.5, -2.0]])
    assert t[[1]].tolist() == [[1.5, -2.0]]
