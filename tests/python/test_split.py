# SPDX-License-Identifier: MIT
"""node_split / edge_split for 1..5 trainers: every set id goes to exactly
one trainer, unset ids to none; force_even runs differ by at most one and
follow id order; masks as numpy, torch (bool or uint8) and a DistTensor.
(The job has one trainer: the number of trainers is set on its context
here; tests/python/test_launch.py splits across two real trainers.)"""
import numpy as np
import pytest
import torch

import rdps.distributed as dist
from rdps.distributed import _context


@pytest.fixture
def trainers(job, monkeypatch):
    def set_n(n):
        monkeypatch.setattr(_context._ctx, "num_trainers", n)
    return set_n


def shares(split, mask, n, **kw):
    return [split(mask, rank=r, **kw) for r in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("force_even", [True, False])
def test_every_set_id_once(trainers, n, force_even):
    trainers(n)
    rng = np.random.default_rng(n)
    mask = rng.random(1003) < 0.3
    mask[[0, 1002]] = True
    want = np.flatnonzero(mask)
    for split in (dist.node_split, dist.edge_split):
        parts = shares(split, mask, n, force_even=force_even)
        assert all(p.dtype == torch.int64 for p in parts)
        got = np.concatenate([p.numpy() for p in parts])
        assert np.array_equal(np.sort(got), want), "not every set id exactly once"
        assert len(np.unique(got)) == len(got)
        if force_even:
            sizes = [len(p) for p in parts]
            assert max(sizes) - min(sizes) <= 1, sizes
            assert np.array_equal(got, want), "runs in id order, trainer 0 first"
        else:
            q, rem = divmod(len(mask), n)
            for r, p in enumerate(parts):  # the trainer's own range of ids
                lo = r * q + min(r, rem)
                hi = lo + q + (r < rem)
                assert np.array_equal(p.numpy(), want[(want >= lo) & (want < hi)])


def test_mask_kinds(trainers):
    trainers(2)
    bits = np.zeros(40, dtype=bool)
    bits[[3, 7, 8, 20, 39]] = True
    want = [[3, 7, 8], [20, 39]]
    t = dist.DistTensor((40,), torch.uint8, name="split_mask")
    t[np.flatnonzero(bits)] = 1
    b = dist.DistTensor((40,), torch.bool, name="split_bmask")
    b[0:40] = torch.from_numpy(bits)
    for mask in (bits, bits.astype(np.uint8), torch.from_numpy(bits),
                 torch.from_numpy(bits.astype(np.uint8)), t, b, bits.tolist()):
        assert [p.tolist() for p in shares(dist.node_split, mask, 2)] == want, type(mask)
    assert dist.node_split(bits).tolist() == want[0], "rank defaults to this trainer's"
    # with a partition book: each trainer's own part's set ids
    pb = dist.GraphPartitionBook([0, 5, 40], [0, 10, 20])
    assert [dist.node_split(bits, pb, rank=r, force_even=False).tolist() for r in (0, 1)] == \
        [[3], [7, 8, 20, 39]]
    # edges by ownership: part p owns edge ids edge_ranges[p]..
    ebits = np.zeros(20, dtype=bool)
    ebits[[1, 9, 10, 11, 19]] = True
    assert [dist.edge_split(ebits, pb, rank=r, force_even=False).tolist() for r in (0, 1)] == \
        [[1, 9], [10, 11, 19]]
    with pytest.raises(ValueError):  # a node mask is not an edge mask
        dist.edge_split(bits, pb, force_even=False)
    with pytest.raises(ValueError):  # a mask of another graph
        dist.node_split(bits[:30], pb, force_even=False)
    with pytest.raises(ValueError):
        dist.node_split(bits, rank=2)


def test_locality_follows_the_launch_layout(trainers):
    """Trainers sit beside the part of their machine (rdps launch places
    trainer r on machine r % machines: parts [0, 1, 0, 1] for 4 trainers
    over 2 machines); each gets ids of that part, whichever way it splits.
    Without the layout (parts by rank blocks: [0, 0, 1, 1]) trainer 1 would
    get part 0's ids: the control."""
    trainers(4)
    n = 1000
    mask = np.zeros(n, dtype=bool)
    mask[::3] = True
    ranges = [0, 500, 1000]
    for layout in ([0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]):
        pb = dist.GraphPartitionBook(ranges, [0, 7, 9], partid=0, trainer_parts=layout)
        for even in (True, False):
            got = [dist.node_split(mask, pb, rank=r, force_even=even).numpy() for r in range(4)]
            assert np.array_equal(np.sort(np.concatenate(got)), np.flatnonzero(mask))
            for r, ids in enumerate(got):
                part = layout[r]
                own = ((ids >= ranges[part]) & (ids < ranges[part + 1])).mean()
                # force_even: runs of equal length, so one may reach a
                # neighbouring part by the parts' imbalance (1 id here)
                assert own == 1.0 if not even else own > 0.98, (layout, even, r, own)
            if even:
                sizes = [len(x) for x in got]
                assert max(sizes) - min(sizes) <= 1
    # the control: the rank-block rule hands trainer 1 part 0's ids
    pb = dist.GraphPartitionBook(ranges, [0, 7, 9], trainer_parts=[0, 0, 1, 1])
    ids = dist.node_split(mask, pb, rank=1).numpy()
    assert (ids < 500).mean() > 0.98
    # force_even=False needs a trainer beside every part
    pb = dist.GraphPartitionBook(ranges, [0, 7, 9], trainer_parts=[0, 0, 0, 0])
    with pytest.raises(ValueError) as e:
        dist.node_split(mask, pb, rank=0, force_even=False)
    assert "part(s) [1]" in str(e.value)
