# SPDX-License-Identifier: MIT
"""DGL's own samplers, loaders and layers on a DistGraph (real DGL: the
suite's log says which), over inproc (standalone) and tcp (rdps server
--graph processes): blocks are DGL's and hold the graph's real edges,
fanouts, fanout -1, replace, prob (a DistTensor assigned as edata), out-edges
and exclusion behave as DGL documents them, DistEdgeDataLoader's pair graphs and negatives, the DistGraph surface
DGL scripts touch, and the loaders' background samplers."""
import errno
import os
import subprocess
import threading
import time

import numpy as np
import pytest
import torch

from conftest import PYTHON, env_for_children, graph_job, need_dgl

import rdps.distributed as dist
from rdps import RdpsError

dgl = need_dgl()


@pytest.fixture(scope="module", params=["inproc", "tcp"])
def graph(request, wordnet, tmp_path_factory):
    _, parts, ds = wordnet
    with graph_job(request.param, parts, tmp_path_factory, "wordnet",
                   os.path.join(parts, "partition.json")) as g:
        yield g, ds


def real_edges(g, b, ds):
    """Asserts every edge of DGL block b is an edge of the graph, by its
    id and its end nodes; returns (global src, global dst, eid)."""
    src_l, dst_l = b.edges()
    nid_s, nid_d = b.srcdata[dgl.NID], b.dstdata[dgl.NID]
    src, dst, eid = nid_s[src_l], nid_d[dst_l], b.edata[dgl.EID]
    s2, d2 = g.find_edges(eid)
    assert torch.equal(src, s2) and torch.equal(dst, d2)
    return src, dst, eid


def test_neighbor_sampler_gives_dgl_blocks(graph):
    g, ds = graph
    torch.manual_seed(1)
    sampler = dgl.dataloading.NeighborSampler([3, 5])
    seeds = torch.arange(2000, 2600)
    loader = dist.DistNodeDataLoader(g, seeds, sampler, batch_size=200, shuffle=True)
    seen = []
    conv = dgl.nn.SAGEConv(g.ndata["feat"].shape[1], 8, "mean")
    deg = g.in_degrees()
    for input_nodes, out, blocks in loader:
        assert all(isinstance(b, dgl.DGLGraph) and b.is_block for b in blocks)
        assert torch.equal(blocks[-1].dstdata[dgl.NID], out)
        assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes)
        for b, fanout in zip(blocks, [3, 5]):
            b = b.to("cpu")
            nd = b.number_of_dst_nodes()
            # DGL's block layout: the dst nodes are the first src nodes
            assert torch.equal(b.srcdata[dgl.NID][:nd], b.dstdata[dgl.NID])
            _, dst, eid = real_edges(g, b, ds)
            assert len(torch.unique(eid)) == len(eid)
            got = torch.bincount(b.edges()[1], minlength=nd)
            assert torch.equal(got, torch.clamp(deg[b.dstdata[dgl.NID]], max=fanout))
        h = conv(blocks[1], g.ndata["feat"][blocks[1].srcdata[dgl.NID]])
        assert h.shape == (len(out), 8)
        seen.append(out)
    assert sorted(torch.cat(seen).tolist()) == seeds.tolist()


def test_full_neighbors_and_fanout_minus_one(graph):
    g, ds = graph
    seeds = torch.tensor([0, 5, 77, int(torch.argmax(g.in_degrees()))])  # a hub too
    for sampler in (dgl.dataloading.MultiLayerFullNeighborSampler(1),
                    dgl.dataloading.NeighborSampler([-1])):
        _, _, (b,) = sampler.sample_blocks(g, seeds)
        _, dst, eid = real_edges(g, b, ds)
        assert torch.equal(torch.bincount(b.edges()[1], minlength=len(seeds)),
                           g.in_degrees(seeds))
        assert len(torch.unique(eid)) == len(eid)


def test_replace(graph):
    g, ds = graph
    deg = g.in_degrees()
    small = torch.nonzero((deg > 0) & (deg < 3)).reshape(-1)[:50]
    zero = torch.nonzero(deg == 0).reshape(-1)[:5]
    seeds = torch.cat([small, zero])
    _, _, (b,) = dgl.dataloading.NeighborSampler([6], replace=True).sample_blocks(g, seeds)
    real_edges(g, b, ds)
    got = torch.bincount(b.edges()[1], minlength=len(seeds))
    # with replacement: exactly the fanout for every seed with an in-edge,
    # so edges repeat where a seed has fewer
    assert torch.equal(got, torch.where(g.in_degrees(seeds) > 0, 6, 0))


def test_prob(graph):
    g, ds = graph
    deg = g.in_degrees()
    seeds = torch.nonzero(deg >= 6).reshape(-1)[:300]
    # weights: the lowest edge id of each seed's in-edges 0, its second
    # 1000, the rest 1
    w = dist.DistTensor((g.num_edges(),), torch.float32, name="test_prob_w",
                        init_func=lambda shape, dtype: torch.ones(shape, dtype=dtype))
    ptr = g._indptr[seeds][:, 0]
    w[ptr] = torch.zeros(len(ptr))
    w[ptr + 1] = torch.full((len(ptr),), 1000.0)
    g.edata["p"] = w
    try:
        torch.manual_seed(3)
        for replace in (False, True):
            s = dgl.dataloading.NeighborSampler([2], prob="p", replace=replace)
            _, _, (b,) = s.sample_blocks(g, seeds)
            _, _, eid = real_edges(g, b, ds)
            assert not np.isin(ptr.numpy(), eid.numpy()).any(), "a zero-weight edge was picked"
            heavy = np.isin((ptr + 1).numpy(), eid.numpy()).mean()
            assert heavy > 0.95, (replace, heavy)
            assert len(eid) == 2 * len(seeds)
    finally:
        del g.edata["p"]


def test_exclude(graph):
    g, ds = graph
    seeds = torch.arange(100, 400)
    deg = g.in_degrees(seeds)
    ptr = g._indptr[seeds]
    # exclude every in-edge but the last of each seed: what remains is picked
    excl = torch.cat([torch.arange(int(a), int(b) - 1) for a, b in ptr.tolist() if b > a])
    fr = g.sample_neighbors(seeds, 3, exclude_edges=excl)
    eid = fr.edata[dgl.EID]
    assert not np.isin(eid.numpy(), excl.numpy()).any()
    assert torch.equal(torch.sort(eid).values,
                       torch.sort(ptr[deg > 0][:, 1] - 1).values), \
        "each seed gets its one edge left, as DGL's exclusion picks among the rest"

def test_out_edges(graph):
    g, ds = graph
    seeds = torch.arange(500, 900)
    fr = g.sample_neighbors(seeds, 2, edge_dir="out")
    src, dst = fr.edges()
    s2, d2 = g.find_edges(fr.edata[dgl.EID])
    assert torch.equal(src, s2) and torch.equal(dst, d2), "real edges, out of the seeds"
    per = torch.bincount(src, minlength=g.num_nodes())[seeds]
    assert torch.equal(per, torch.clamp(g.out_degrees(seeds), max=2))
    _, _, (b,) = dgl.dataloading.NeighborSampler([-1], edge_dir="out").sample_blocks(g, seeds)
    assert b.num_edges() == int(g.out_degrees(seeds).sum())


def test_edge_loader_with_negatives(graph):
    g, ds = graph
    torch.manual_seed(5)
    eids = torch.arange(0, g.num_edges(), 97)
    loader = dist.DistEdgeDataLoader(
        g, eids, dgl.dataloading.MultiLayerNeighborSampler([2, 2]),
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(3), exclude="self",
        batch_size=256, shuffle=True)
    seen = []
    for input_nodes, pos, neg, blocks in loader:
        batch = pos.edata[dgl.EID]
        src, dst = pos.edges()
        s2, d2 = g.find_edges(batch)
        assert torch.equal(pos.ndata[dgl.NID][src], s2) and torch.equal(pos.ndata[dgl.NID][dst], d2)
        assert neg.num_edges() == 3 * pos.num_edges()
        nsrc, _ = neg.edges()
        # Uniform keeps the source of each positive edge, k times
        assert torch.equal(torch.sort(neg.ndata[dgl.NID][nsrc]).values,
                           torch.sort(s2.repeat_interleave(3)).values)
        assert torch.equal(blocks[-1].dstdata[dgl.NID], pos.ndata[dgl.NID])
        for b in blocks:  # exclude='self': the batch's edges are not in its blocks
            assert not np.isin(b.edata[dgl.EID].numpy(), batch.numpy()).any()
        seen.append(batch)
    assert sorted(torch.cat(seen).tolist()) == eids.tolist()


def test_dist_graph_surface(graph):
    g, ds = graph
    idmap = ds["idmap"]
    assert g.rank() == 0 and g.idtype == torch.int64 and g.device == torch.device("cpu")
    g.barrier()
    assert g.ntypes == ["_N"] and g.etypes == ["_E"] and g.canonical_etypes == [("_N", "_E", "_N")]
    assert g.get_ntype_id("_N") == 0 and g.get_etype_id("_E") == 0
    assert g.nodes["_N"].data["label"] is g.ndata["label"]
    sch = g.node_attr_schemes()
    assert sch["feat"].shape == (ds["features"].shape[1],) and sch["feat"].dtype == torch.float32
    # out-degrees: the dataset's, through the idmap
    want = np.bincount(ds["edges"][:, 0], minlength=len(idmap))[idmap]
    assert np.array_equal(g.out_degrees().numpy(), want)
    assert g.out_degrees(7) == want[7] and g.out_degrees([3, 4]).tolist() == want[[3, 4]].tolist()
    # the partition book: edges by ownership, local ids
    pb = g.get_partition_book()
    er, nr = pb.edge_ranges, pb.node_ranges
    assert er[0] == 0 and er[-1] == g.num_edges() and pb.partid == 0
    _, dst = g.find_edges(torch.arange(g.num_edges()))
    assert torch.equal(pb.eid2partid(torch.arange(g.num_edges())), pb.nid2partid(dst)), \
        "an edge belongs to its destination's part"
    assert torch.equal(pb.partid2eids(1), torch.arange(int(er[1]), int(er[2])))
    assert pb.nid2localnid(torch.tensor([int(nr[1]), int(nr[1]) + 4]), 1).tolist() == [0, 4]
    with pytest.raises(IndexError):
        pb.nid2localnid(torch.tensor([0]), 1)
    pol = g.get_node_partition_policy("_N")
    assert pol.policy_str == "node~_N" and pol.get_size() == g.num_nodes()
    # layer-wise inference: a DistTensor assigned as ndata, rows written back
    h = dist.DistTensor((g.num_nodes(), 4), torch.float32, name="test_h")
    g.ndata["h"] = h
    g.ndata["h"][torch.tensor([1, 2])] = torch.ones(2, 4)
    assert g.ndata["h"][torch.tensor([2])].tolist() == [[1.0] * 4]
    assert "h" in g.node_attr_schemes()
    del g.ndata["h"]
    with pytest.raises(RdpsError) as e:
        g.ndata["label"] = h
    assert e.value.errno == errno.EPERM
    with pytest.raises(ValueError):
        g.ndata["short"] = dist.DistTensor((5, 4), torch.float32, name="test_short")
    # the local part as a DGL graph
    lp = g.local_partition
    inner = lp.ndata["inner_node"].bool()
    assert torch.equal(lp.ndata[dgl.NID][inner], pb.partid2nids(pb.partid))
    ls, ld = lp.edges()
    s2, d2 = g.find_edges(lp.edata[dgl.EID])
    assert torch.equal(lp.ndata[dgl.NID][ls], s2) and torch.equal(lp.ndata[dgl.NID][ld], d2)


def test_background_samplers_overlap(graph):
    """num_samplers threads collate ahead: the same batches as in the loop
    (same seed), made in the sampler threads, the next one ready while the
    loop is busy with the current (the control: without them it is made
    only when asked)."""
    g, _ = graph
    made = []

    class Recording(dgl.dataloading.NeighborSampler):
        def sample_blocks(self, g, seed_nodes, exclude_eids=None):
            made.append((threading.current_thread().name, time.monotonic()))
            return super().sample_blocks(g, seed_nodes, exclude_eids)

    nids = torch.arange(0, 3000)
    runs = {}
    for n in (0, 2):
        made.clear()
        loader = dist.DistNodeDataLoader(g, nids, Recording([2, 2]), batch_size=500,
                                         shuffle=True, seed=9, num_samplers=n)
        out, asked = [], []
        for _, seeds, _ in loader:
            asked.append(time.monotonic())
            out.append(seeds)
            time.sleep(0.2)  # "training"
        runs[n] = (list(made), asked, out)
    (m0, a0, o0), (m2, a2, o2) = runs[0], runs[2]
    assert all(torch.equal(x, y) for x, y in zip(o0, o2)) and len(o0) == len(o2) == 6
    assert all(name.startswith("rdps-sampler") for name, _ in m2)
    assert all(name == threading.current_thread().name for name, _ in m0)
    # with samplers, batch i+1 was started before the loop got batch i
    ahead = sum(m2[i + 1][1] < a2[i] for i in range(len(a2) - 1))
    assert ahead >= len(a2) - 2, (ahead, m2, a2)
    assert sum(m0[i + 1][1] < a0[i] for i in range(len(a0) - 1)) == 0


def test_initialize_with_an_ip_config_outside_a_launcher_runs_standalone(tmp_path):
    """As DGL's: a script given --ip_config but not started by the launcher
    runs standalone at once (it used to wait 60 s for servers that are not
    there, then fail). Control: told it is distributed, it does wait for
    them (and fails, naming them)."""
    ipc = tmp_path / "ip_config.txt"
    ipc.write_text("127.0.0.1 1 2\n")  # nobody listens on port 1
    script = ("import rdps.distributed as dist, time\n"
              "t = time.monotonic(); dist.initialize(%r, timeout=3)\n"
              "print('STANDALONE', dist.is_standalone(), dist.get_num_servers(),"
              " round(time.monotonic() - t, 1))\n" % str(ipc))
    env = env_for_children()
    for k in ("RDPS_IP_CONFIG", "RDPS_RANK", "RDPS_NUM_TRAINERS", "RDPS_DIST_MODE"):
        env.pop(k, None)
    t = time.monotonic()
    r = subprocess.run([PYTHON, "-c", script], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "STANDALONE True 1" in r.stdout and "runs standalone" in r.stderr
    assert time.monotonic() - t < 60
    env["RDPS_DIST_MODE"] = "distributed"
    r = subprocess.run([PYTHON, "-c", script], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "127.0.0.1:1" in r.stderr, r.stderr


def test_one_line_makes_dgl_distributed_rdps(tmp_path):
    script = ("import rdps.distributed.dgl_compat\n"
              "import dgl, rdps.distributed.dglapi as api\n"
              "from dgl.distributed import DistGraph, node_split, partition_graph\n"
              "from dgl.distributed.optim import SparseAdam\n"
              "print(dgl.distributed is api, DistGraph.__module__, SparseAdam.__module__,\n"
              "      dgl.dataloading.DistNodeDataLoader.__module__,\n"
              "      dgl.distributed.DistEmbedding.__module__, dgl.__version__)\n")
    r = subprocess.run([PYTHON, "-c", script], env=env_for_children(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:5] == ["True", "rdps.distributed.graph", "rdps.distributed.optim",
                                    "rdps.distributed.dataloader",
                                    "rdps.distributed.embedding"], r.stdout
    assert r.stdout.split()[5] == dgl.__version__
    assert "rdps.distributed.partition" in subprocess.run(
        [PYTHON, "-c", "import rdps.distributed.dgl_compat, dgl; "
         "print(dgl.distributed.partition_graph.__module__)"], env=env_for_children(),
        capture_output=True, text=True, timeout=120).stdout


def test_both_sample_ways_give_the_same_blocks(graph):
    """DGL's sampler on rdps's two ways: the seeds' servers pick (rpc) or this
    client reads the CSR one-sidedly and picks (read): for the same torch
    seed, the same blocks (the C picks follow one random stream)."""
    g, ds = graph
    seeds = torch.arange(7000, 7400)
    sampler = dgl.dataloading.NeighborSampler([{"_E": 4}, 3], replace=False)
    got = {}
    for way in ("rpc", "read"):
        g._sample_way = way
        try:
            torch.manual_seed(21)
            _, _, blocks = sampler.sample_blocks(g, seeds)
        finally:
            g._sample_way = "rpc"
        got[way] = [b.edata[dgl.EID] for b in blocks]
        for b in blocks:
            real_edges(g, b, ds)
    assert all(torch.equal(a, b) for a, b in zip(got["rpc"], got["read"]))
    torch.manual_seed(22)
    _, _, other = sampler.sample_blocks(g, seeds)
    assert not torch.equal(other[1].edata[dgl.EID], got["rpc"][1]), "the seed matters"
