# SPDX-License-Identifier: MIT
"""rdps.distributed.partition_graph with a real DGL heterograph (node and
edge data of every dtype rdps serves, features of several dimensions, a
featureless type, typed relations both ways), served over inproc
(standalone) and tcp (rdps server --graph): every per-type datum exactly as
the input graph has it through DGL's return_mapping, the structure through
the type maps, DGL's <graph_name>.json, typed sampling against the input
(both ways identical; per-etype fanouts; in and out; replace; prob; exclude),
over ofi too (tcp;ofi_rxm on loopback: the one-sided reads are RMA reads),
and DGL's own partitions converted with one command (the same node ids and
parts, the same data). Needs DGL (the venv of deploy/install-venv.sh);
RDPS_REQUIRE_DGL=1 makes its absence a failure, not a skip."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import SRC, TcpServers, env_for_children

import rdps.distributed as dist
from rdps import RdpsError
from rdps.distributed._hetero import GraphHandle
from rdps.distributed.partition import partition_graph


def need_dgl():
    try:
        import dgl  # noqa: F401
    except ImportError:
        if os.environ.get("RDPS_REQUIRE_DGL") == "1":
            raise
        pytest.skip("DGL is not installed (deploy/install-venv.sh)")
    import dgl
    return dgl


NP, NA, NT = 60, 40, 5


def make_graph(dgl):
    gen = torch.Generator().manual_seed(7)
    w_src = torch.randint(0, NA, (300,), generator=gen)
    w_dst = torch.randint(0, NP, (300,), generator=gen)
    c_src = torch.randint(0, NP, (200,), generator=gen)
    c_dst = torch.randint(0, NP, (200,), generator=gen)
    t_src = torch.arange(NP)
    t_dst = torch.randint(0, NT, (NP,), generator=gen)
    g = dgl.heterograph({
        ("author", "writes", "paper"): (w_src, w_dst),
        ("paper", "written_by", "author"): (w_dst, w_src),
        ("paper", "cites", "paper"): (c_src, c_dst),
        ("paper", "has_topic", "topic"): (t_src, t_dst),
    }, num_nodes_dict={"paper": NP, "author": NA, "topic": NT})
    p = g.nodes["paper"].data
    p["feat"] = torch.randn(NP, 4, generator=gen)
    p["label"] = torch.randint(0, 3, (NP,), generator=gen)
    p["year"] = torch.randint(1990, 2020, (NP,), generator=gen, dtype=torch.int32)
    p["emb"] = torch.randn(NP, 2, 3, generator=gen).half()
    p["bf"] = torch.randn(NP, 3, generator=gen).bfloat16()
    p["flag"] = torch.rand(NP, generator=gen) > 0.5
    p["train_mask"] = (torch.arange(NP) % 3 == 0).to(torch.uint8)
    g.nodes["author"].data["x"] = torch.randn(NA, 5, generator=gen, dtype=torch.float64)
    w = torch.rand(300, generator=gen)
    w[::4] = 0  # never picked
    g.edges["writes"].data["w"] = w
    g.edges["writes"].data["ts"] = torch.randint(-500, 500, (300, 2), generator=gen,
                                                 dtype=torch.int16)
    g.edges["cites"].data["since"] = torch.randint(0, 9, (200,), generator=gen)
    return g


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    dgl = need_dgl()
    g = make_graph(dgl)
    out = str(tmp_path_factory.mktemp("hparts") / "hg")
    nids, eids = partition_graph(g, "hg", 2, out, balance_edges=True, return_mapping=True)
    return dgl, g, out, nids, eids


@pytest.fixture(scope="module", params=["inproc", "tcp", "ofi"])
def served(request, parted, tmp_path_factory):
    dgl, g, out, nids, eids = parted
    servers = None
    if request.param == "inproc":
        dist.initialize()
    else:
        # ofi: libfabric's tcp;ofi_rxm on loopback (RMA reads), as the C suites
        os.environ.setdefault("FI_PROVIDER", "tcp;ofi_rxm")
        servers = TcpServers(tmp_path_factory.mktemp("h" + request.param), 2,
                             extra=("--transport", request.param, "--graph", out))
        dist.initialize(servers.ip_config, rank=0, num_trainers=1, transport=request.param)
    try:
        dg = dist.DistGraph("hg", part_config=os.path.join(out, "hg.json"))
        assert dist.get_transport() == request.param
        from rdps.distributed import _context
        h = GraphHandle(_context._context(), dg._g)
        yield h, g, nids, eids
    finally:
        try:
            if dist.is_initialized():
                dist.finalize()
            if servers:
                assert servers.wait() == [0, 0]
        finally:
            if servers:
                servers.kill()


def test_dgl_config_has_dgl_keys(parted):
    dgl, g, out, nids, eids = parted
    with open(os.path.join(out, "hg.json")) as f:
        conf = json.load(f)
    for key in ("graph_name", "num_nodes", "num_edges", "part_method", "num_parts",
                "halo_hops", "node_map", "edge_map", "ntypes", "etypes", "part-0", "part-1"):
        assert key in conf, key
    assert conf["num_nodes"] == g.num_nodes() and conf["num_edges"] == g.num_edges()
    assert conf["ntypes"] == {t: g.get_ntype_id(t) for t in g.ntypes}
    assert conf["etypes"] == {":".join(c): g.get_etype_id(c) for c in g.canonical_etypes}
    # DGL's own reader of the book takes it (RangePartitionBook)
    from dgl.distributed.partition import load_partition_book
    gpb = load_partition_book(os.path.join(out, "hg.json"), 0)[0]
    for t in g.ntypes:
        assert sum(hi - lo for lo, hi in conf["node_map"][t]) == g.num_nodes(t)
        assert len(nids[t]) == g.num_nodes(t)
        assert sorted(nids[t].tolist()) == list(range(g.num_nodes(t)))
    homo = torch.arange(conf["num_nodes"])
    ntype, per = gpb.map_to_per_ntype(homo)
    for i, t in enumerate(g.ntypes):
        assert int((ntype == i).sum()) == g.num_nodes(t)
        assert sorted(per[ntype == i].tolist()) == list(range(g.num_nodes(t)))


def test_every_datum_is_served_exactly(served):
    h, g, nids, eids = served
    assert h.ntypes == list(g.ntypes)
    assert h.canonical_etypes == list(g.canonical_etypes)
    checked = 0
    for t in g.ntypes:
        assert set(h.node_data[t]) == set(g.nodes[t].data.keys())
        for name, spec in h.node_data[t].items():
            got = h.read(spec, torch.arange(g.num_nodes(t)))
            want = g.nodes[t].data[name][nids[t]]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert torch.equal(got, want), "%s/%s" % (t, name)
            checked += 1
    for c in g.canonical_etypes:
        assert set(h.edge_data[c]) == set(g.edges[c].data.keys())
        for name, spec in h.edge_data[c].items():
            got = h.read(spec, torch.arange(g.num_edges(c)))
            want = g.edges[c].data[name][eids[c]]
            assert got.dtype == want.dtype and torch.equal(got, want), "%s/%s" % (c, name)
            checked += 1
    assert checked == 11


def test_structure_through_the_type_maps(served):
    h, g, nids, eids = served
    from rdps.distributed import _context
    ctx = _context._context()
    for c in g.canonical_etypes:
        per = torch.arange(g.num_edges(c))
        homo = h.map_to_homo_eid(per, c)
        et, back = h.map_to_per_etype(homo)
        assert torch.equal(back, per) and bool((et == h.etype_id(c)).all())
        from rdps._ffi import ffi, lib
        a = homo.numpy().astype(np.uint64)
        src = np.empty(len(a), dtype=np.uint64)
        dst = np.empty(len(a), dtype=np.uint64)
        ctx.check(lib.rdps_graph_find_edges(h._g, ffi.cast("uint64_t *", a.ctypes.data), len(a),
                                            ffi.cast("uint64_t *", src.ctypes.data),
                                            ffi.cast("uint64_t *", dst.ctypes.data), ffi.NULL),
                  "find_edges")
        st, sp = h.map_to_per_ntype(src.view(np.int64))
        dt, dp = h.map_to_per_ntype(dst.view(np.int64))
        assert bool((st == h.ntype_id(c[0])).all()) and bool((dt == h.ntype_id(c[2])).all())
        u, v = g.edges(etype=c)
        assert torch.equal(nids[c[0]][sp], u[eids[c]]) and torch.equal(nids[c[2]][dp],
                                                                       v[eids[c]])
    # degrees: all in-etypes of a node
    for t in g.ntypes:
        homo = h.map_to_homo_nid(torch.arange(g.num_nodes(t)), t)
        ind = h.degrees(homo, "in")
        outd = h.degrees(homo, "out")
        zero = torch.zeros(g.num_nodes(t), dtype=torch.int64)
        want_in = sum((g.in_degrees(etype=c)[nids[t]] for c in g.canonical_etypes
                       if c[2] == t), zero)
        want_out = sum((g.out_degrees(etype=c)[nids[t]] for c in g.canonical_etypes
                        if c[0] == t), zero)
        assert torch.equal(ind, torch.as_tensor(want_in)), t
        assert torch.equal(outd, torch.as_tensor(want_out)), t


def real_edges(h, g, nids, eids):
    """homo eid -> (homo src, homo dst) of the input's edges, through the maps."""
    out = {}
    for c in g.canonical_etypes:
        u, v = g.edges(etype=c)
        inv_src = torch.empty_like(nids[c[0]])
        inv_src[nids[c[0]]] = torch.arange(len(nids[c[0]]))
        inv_dst = torch.empty_like(nids[c[2]])
        inv_dst[nids[c[2]]] = torch.arange(len(nids[c[2]]))
        homo = h.map_to_homo_eid(torch.arange(g.num_edges(c)), c)
        hs = h.map_to_homo_nid(inv_src[u[eids[c]]], c[0])
        hd = h.map_to_homo_nid(inv_dst[v[eids[c]]], c[2])
        for e, s, d in zip(homo.tolist(), hs.tolist(), hd.tolist()):
            out[e] = (s, d, h.etype_id(c))
    return out


@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_typed_sampling_against_the_input(served, edge_dir):
    h, g, nids, eids = served
    real = real_edges(h, g, nids, eids)
    seeds = h.map_to_homo_nid(torch.arange(NP), "paper")
    fan = {("author", "writes", "paper"): 3, ("paper", "cites", "paper"): -1,
           ("paper", "written_by", "author"): 2, ("paper", "has_topic", "topic"): 1}
    rpc = h.sample(seeds, fan, edge_dir=edge_dir, way="rpc", seed=11)
    rd = h.sample(seeds, fan, edge_dir=edge_dir, way="read", seed=11)
    for a, b in ((rpc.src, rd.src), (rpc.dst, rd.dst), (rpc.eid, rd.eid), (rpc.etype, rd.etype)):
        assert np.array_equal(a, b)
    assert len(rpc) > 0
    per = {}
    for s, d, e, et, si in zip(rpc.src, rpc.dst, rpc.eid, rpc.etype, rpc.seed):
        assert real[e] == (s, d, et), (e, s, d, et)
        seed = int(seeds[si])
        assert (d if edge_dir == "in" else s) == seed
        per.setdefault((seed, et), []).append(e)
    for (seed, et), es in per.items():
        c = h.canonical_etypes[et]
        f = fan[c]
        assert len(set(es)) == len(es)
        deg = sum(1 for e, (s, d, t) in real.items()
                  if t == et and (d if edge_dir == "in" else s) == seed)
        assert len(es) == (deg if f < 0 else min(f, deg)), (seed, c)
    # with replacement: exactly fanout of each slot that has edges
    r = h.sample(seeds, {("author", "writes", "paper"): 7}, edge_dir=edge_dir, replace=True,
                 way="rpc", seed=3)
    r2 = h.sample(seeds, {("author", "writes", "paper"): 7}, edge_dir=edge_dir, replace=True,
                  way="read", seed=3)
    assert np.array_equal(r.eid, r2.eid)
    if edge_dir == "in":
        has = sum(1 for v in seeds.tolist()
                  if any(d == v and t == h.etype_id("writes") for s, d, t in real.values()))
        assert len(r) == 7 * has


def test_prob_and_exclude(served):
    h, g, nids, eids = served
    seeds = h.map_to_homo_nid(torch.arange(NP), "paper")
    writes = ("author", "writes", "paper")
    w = h.read(h.edge_data[writes]["w"], torch.arange(g.num_edges(writes)))
    homo = h.map_to_homo_eid(torch.arange(g.num_edges(writes)), writes)
    zero = set(homo[w == 0].tolist())
    assert zero
    for way in ("rpc", "read"):
        s = h.sample(seeds, {writes: 2}, prob="w", way=way, seed=5)
        assert len(s) > 0 and not zero & set(s.eid.tolist())
    a = h.sample(seeds, {writes: 2}, prob="w", way="rpc", seed=5)
    b = h.sample(seeds, {writes: 2}, prob="w", way="read", seed=5)
    assert np.array_equal(a.eid, b.eid)
    # out-edges weighted: picked by the client, same rule
    aut = h.map_to_homo_nid(torch.arange(NA), "author")
    o = h.sample(aut, {writes: 2}, edge_dir="out", prob="w", way="rpc", seed=5)
    assert len(o) > 0 and not zero & set(o.eid.tolist())
    # exclude: the edges picked first are never picked again, both ways
    first = h.sample(seeds, {writes: -1}, way="rpc", seed=1)
    ex = first.eid[::2]
    for way in ("rpc", "read"):
        for d in ("in", "out"):
            src = seeds if d == "in" else aut
            s = h.sample(src, {writes: -1}, edge_dir=d, exclude=ex, way=way, seed=1)
            assert not set(ex.tolist()) & set(s.eid.tolist())
            assert len(s) == len(first) - len(set(ex.tolist()))
    with pytest.raises(RdpsError, match="prob 'nope'"):
        h.sample(seeds, {writes: 2}, prob="nope")


def test_dgl_partition_converts_with_one_command(parted, tmp_path):
    dgl, g, out, nids, eids = parted
    dgl_out = str(tmp_path / "dglparts")
    dgl_nids, dgl_eids = dgl.distributed.partition_graph(
        g, "hg", 2, dgl_out, return_mapping=True)
    rdps_out = str(tmp_path / "conv")
    r = subprocess.run([sys.executable, "-m", "rdps.from_dgl", "--from-dgl",
                        os.path.join(dgl_out, "hg.json"), "--out", rdps_out],
                       env=env_for_children(), capture_output=True, text=True, cwd=SRC)
    assert r.returncode == 0, r.stderr
    assert "converted" in r.stdout and "Warning" not in r.stderr, r.stderr
    with open(os.path.join(dgl_out, "hg.json")) as f:
        dconf = json.load(f)
    with open(os.path.join(rdps_out, "hg.json")) as f:
        rconf = json.load(f)
    assert rconf["node_map"] == dconf["node_map"]  # the same parts and node ids
    if dist.is_initialized():
        dist.finalize()  # a job of the served fixture (which then finds it done)
    dist.initialize()
    try:
        dg = dist.DistGraph("hg", part_config=rdps_out)
        from rdps.distributed import _context
        h = GraphHandle(_context._context(), dg._g)
        for t in g.ntypes:
            for name, spec in h.node_data[t].items():
                got = h.read(spec, torch.arange(g.num_nodes(t)))
                assert torch.equal(got, g.nodes[t].data[name][dgl_nids[t]]), (t, name)
        # edge ids are renumbered inside each part and etype: the partition's
        # original ids are DGL's, whose own mapping leads to the input's
        from rdps.distributed.partition import load_mapping
        _, conv_eids = load_mapping(rdps_out)
        for c in g.canonical_etypes:
            for name, spec in h.edge_data[c].items():
                got = h.read(spec, torch.arange(g.num_edges(c)))
                want = g.edges[c].data[name][dgl_eids[c][conv_eids[c]]]
                assert torch.equal(got, want), (c, name)
    finally:
        dist.finalize()


def test_out_path_is_not_clobbered(parted, tmp_path):
    dgl, g, out, nids, eids = parted
    (tmp_path / "precious.txt").write_text("mine")
    with pytest.raises(RdpsError, match="not empty"):
        partition_graph(g, "hg", 2, str(tmp_path))
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_trainer_ids_as_dgl(parted, tmp_path):
    """num_trainers_per_machine=2: METIS into 4 trainer parts, node data
    trainer_id (edges: their destination's), part = trainer_id // 2."""
    dgl, g, out, nids, eids = parted
    g2 = make_graph(dgl)
    tout = str(tmp_path / "tr")
    partition_graph(g2, "hg", 2, tout, num_trainers_per_machine=2)
    with open(os.path.join(tout, "partition.json")) as f:
        meta = json.load(f)
    for t in meta["ntypes"]:
        assert "trainer_id" in [d["name"] for d in t["data"]], t["name"]
        i = [d["name"] for d in t["data"]].index("trainer_id")
        for p in range(2):
            tid = np.load(os.path.join(tout, "part-%d-%s.npy" % (p, t["data"][i]["file"])))
            assert len(tid) == t["node_map"][p][1] - t["node_map"][p][0]
            assert set((tid // 2).tolist()) <= {p}, (t["name"], p)
    for e in meta["etypes"]:
        assert "trainer_id" in [d["name"] for d in e["data"]]
