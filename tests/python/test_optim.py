# SPDX-License-Identifier: MIT
"""DistEmbedding with SparseAdagrad / SparseAdam (over inproc and tcp, 2
servers) against torch's own optimizers on a dense copy of the rows:

- each step takes two emb() calls whose ids repeat within and across them
  (the gradients of an id are summed, as torch's indexing backward sums
  them), rows 0..19 from the first step, rows 20..39 from the third, rows
  40..59 never;
- Adagrad: torch.optim.Adagrad on the dense (60, 5) copy; Adam: one
  torch.optim.Adam per row, stepped when the row is touched (DGL's
  SparseAdam counts steps per row; a dense torch.optim.Adam counts them for
  the whole tensor, which rows 20..39 would tell apart);
- after every step the touched rows equal the reference, untouched rows
  their start exactly; an optimizer made again with the same settings (as
  every trainer makes it) keeps the state.
"""
import pytest
import torch

import rdps.distributed as dist

N, DIM, STEPS = 60, 5, 6


def loss_fn(x1, x2, c):
    return ((x1 * c).sum(-1) ** 2).mean() + 0.1 * (x2 ** 3).sum()


def batches(seed):
    gen = torch.Generator().manual_seed(seed)
    for step in range(STEPS):
        hi = 20 if step < 2 else 40
        ids1 = torch.randint(0, hi, (25,), generator=gen)
        ids2 = torch.cat([ids1[:5], torch.randint(0, hi, (10,), generator=gen)])
        yield step, ids1, ids2, torch.randn(DIM, generator=gen)


def check(emb, ref_rows, start, touched, what):
    got = emb.weight[0:N]
    torch.testing.assert_close(got[touched], ref_rows[touched], rtol=1e-5, atol=1e-6,
                               msg=lambda m: "%s, touched rows: %s" % (what, m))
    assert torch.equal(got[~touched], start[~touched]), "%s: an untouched row moved" % what


@pytest.mark.parametrize("flush", [True, False], ids=["flush", "noflush"])
def test_sparse_adagrad_matches_torch_adagrad(job, flush):
    name = "adagrad_%s" % ("f" if flush else "n")
    emb = dist.DistEmbedding(N, DIM, name=name, init_func=dist.uniform_init(0.3, seed=3))
    opt = dist.optim.SparseAdagrad([emb], lr=0.05, flush=flush)
    start = emb.weight[0:N]
    dense = start.clone().requires_grad_(True)
    ref = torch.optim.Adagrad([dense], lr=0.05, eps=1e-10)
    touched = torch.zeros(N, dtype=torch.bool)
    for step, ids1, ids2, c in batches(1):
        if step == 3:  # every trainer makes it: the same settings keep the state
            opt = dist.optim.SparseAdagrad([emb], lr=0.05, flush=flush)
        opt.zero_grad()
        loss_fn(emb(ids1), emb(ids2), c).backward()
        opt.step()
        ref.zero_grad()
        loss_fn(dense[ids1], dense[ids2], c).backward()
        ref.step()
        touched[ids1] = True
        touched[ids2] = True
        if not flush:
            dist.barrier()  # flushes this trainer's pushes
        check(emb, dense.detach(), start, touched, "step %d" % step)
    assert 20 < int(touched.sum()) <= 40


def test_sparse_adam_matches_torch_adam_per_row(job):
    emb = dist.DistEmbedding(N, DIM, name="adam", init_func=dist.uniform_init(0.3, seed=5))
    betas, lr, eps = (0.8, 0.95), 0.01, 1e-6
    opt = dist.optim.SparseAdam([emb], lr=lr, betas=betas, eps=eps)
    start = emb.weight[0:N]
    rows = [torch.nn.Parameter(start[r].clone()) for r in range(N)]
    refs = [torch.optim.Adam([p], lr=lr, betas=betas, eps=eps) for p in rows]
    touched = torch.zeros(N, dtype=torch.bool)
    for step, ids1, ids2, c in batches(2):
        x1, x2 = emb(ids1), emb(ids2)
        opt.zero_grad()  # after the forward pass, as torch allows
        loss_fn(x1, x2, c).backward()
        opt.step()
        dense = torch.stack(rows)
        for p in rows:
            p.grad = None
        loss_fn(dense[ids1], dense[ids2], c).backward()
        now = torch.zeros(N, dtype=torch.bool)
        now[ids1] = True
        now[ids2] = True
        for r in torch.nonzero(now).flatten().tolist():
            refs[r].step()
        touched |= now
        check(emb, torch.stack(rows).detach(), start, touched, "step %d" % step)


def test_what_is_pushed(job):
    emb = dist.DistEmbedding(10, 3, name="traced", init_func=dist.uniform_init(0.5, seed=1))
    opt = dist.optim.SparseAdagrad([emb], lr=0.1)
    start = emb.weight[0:10]
    with torch.no_grad():
        x = emb([1, 2])
    assert not x.requires_grad and emb.trace == [], "rows read without grad are not recorded"
    y = emb([1, 2])
    assert y.requires_grad and len(emb.trace) == 1
    y.sum().backward()
    opt.zero_grad()  # after backward: the gradients are gone, nothing to push
    opt.step()
    assert emb.trace == [], "step forgets what it recorded"
    assert torch.equal(emb.weight[0:10], start)
    emb([3]).sum().backward()
    opt.step()
    moved = (emb.weight[0:10] != start).any(dim=1)
    assert moved.tolist() == [i == 3 for i in range(10)]
    with pytest.raises(TypeError):
        dist.optim.SparseAdam([emb.weight], lr=0.1)


@pytest.mark.parametrize("kind", ["adagrad", "adam"])
def test_save_and_load_bring_the_state_back(job, tmp_path, kind):
    """SparseOptimizer.save/load (DGL's): each trainer writes its share of
    the servers' state to f_RANK and reads it back; the state after load is
    the state saved, bit for bit, whatever steps ran in between."""
    emb = dist.DistEmbedding(N, DIM, name="sl_" + kind, init_func=dist.uniform_init(0.3, seed=5))
    cls = dist.optim.SparseAdagrad if kind == "adagrad" else dist.optim.SparseAdam
    opt = cls([emb], lr=0.05)
    everything = torch.arange(N)

    def step(ids):
        x = emb(ids)
        (x ** 2).sum().backward()
        opt.step()

    step(torch.tensor([1, 5, 9, 5]))
    saved = opt._state(emb, everything)
    per_row = DIM if kind == "adagrad" else 2 * DIM + 1
    assert saved.shape == (N, per_row)
    touched = saved.abs().sum(1) > 0
    assert touched.nonzero().flatten().tolist() == [1, 5, 9], "state where no row was pushed"
    opt.save(str(tmp_path / "opt"))
    assert (tmp_path / "opt_0").exists()
    step(torch.tensor([1, 2, 3]))
    assert not torch.equal(opt._state(emb, everything), saved), "control: the step changed nothing"
    opt.load(str(tmp_path / "opt"))
    assert torch.equal(opt._state(emb, everything), saved)
    # Another shape of state (another optimizer's file) is refused, naming both.
    other = dist.DistEmbedding(N, DIM + 1, name="sl2_" + kind)
    opt2 = cls([other], lr=0.05)
    state = torch.load(str(tmp_path / "opt_0"))
    state["emb_states"] = {other.name: state["emb_states"][emb.name]}
    with pytest.raises(Exception) as e:
        opt2.load_local_state_dict(state)
    assert "the file has" in str(e.value)
