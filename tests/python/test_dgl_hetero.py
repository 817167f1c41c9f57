# SPDX-License-Identifier: MIT
"""A heterogeneous DistGraph through DGL's surface, with real DGL, over
inproc (standalone) and tcp: a DGL heterograph partitioned by
partition_graph (2 parts), then g.ntypes / etypes / canonical_etypes,
get_ntype_id / get_etype_id, num_nodes(nt), g.nodes[nt].data and
g.edges[et].data exact against the input through the mapping, per-type
partition policies and node_split, sample_neighbors with a fanout dict and
dict seeds (a heterograph frontier of real typed edges), DGL's
NeighborSampler giving heterogeneous blocks that HeteroGraphConv consumes,
DistNodeDataLoader with a dict of nids, and DistEdgeDataLoader with a dict
of eids and negatives."""
import os

import pytest
import torch

from conftest import graph_job, need_dgl

import rdps.distributed as dist
from rdps import RdpsError

dgl = need_dgl()

NP, NA, NT = 300, 200, 7
CETS = [("author", "writes", "paper"), ("paper", "written_by", "author"),
        ("paper", "cites", "paper"), ("paper", "has_topic", "topic")]


def make_graph():
    gen = torch.Generator().manual_seed(11)
    w_src = torch.randint(0, NA, (900,), generator=gen)
    w_dst = torch.randint(0, NP, (900,), generator=gen)
    c_src = torch.randint(0, NP, (700,), generator=gen)
    c_dst = torch.randint(0, NP, (700,), generator=gen)
    g = dgl.heterograph({
        CETS[0]: (w_src, w_dst), CETS[1]: (w_dst, w_src), CETS[2]: (c_src, c_dst),
        CETS[3]: (torch.arange(NP), torch.randint(0, NT, (NP,), generator=gen))},
        num_nodes_dict={"paper": NP, "author": NA, "topic": NT})
    p = g.nodes["paper"].data
    p["feat"] = torch.randn(NP, 6, generator=gen)
    p["label"] = torch.randint(0, 4, (NP,), generator=gen)
    p["train_mask"] = torch.rand(NP, generator=gen) < 0.6
    g.nodes["author"].data["h"] = torch.randn(NA, 3, generator=gen).to(torch.float16)
    g.edges["cites"].data["w"] = torch.rand(700, generator=gen)
    g.edges["writes"].data["year"] = torch.randint(1990, 2020, (900,), generator=gen,
                                                   dtype=torch.int32)
    return g


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    g = make_graph()
    out = str(tmp_path_factory.mktemp("hetero") / "parts")
    nmap, emap = dist.partition_graph(g, "mag", 2, out, part_method="random",
                                      return_mapping=True)
    return g, out, nmap, emap


@pytest.fixture(scope="module", params=["inproc", "tcp"])
def graph(request, parted, tmp_path_factory):
    g0, out, nmap, emap = parted
    with graph_job(request.param, out, tmp_path_factory, "mag",
                   os.path.join(out, "mag.json")) as g:
        yield g, g0, nmap, emap


def inverse(m):
    inv = torch.empty_like(m)
    inv[m] = torch.arange(len(m))
    return inv


def test_types_and_data(graph):
    g, g0, nmap, emap = graph
    assert sorted(g.ntypes) == ["author", "paper", "topic"]
    assert sorted(g.canonical_etypes) == sorted(CETS)
    assert sorted(g.etypes) == sorted(c[1] for c in CETS)
    for nt in g0.ntypes:
        assert g.num_nodes(nt) == g0.num_nodes(nt)
        assert g.ntypes[g.get_ntype_id(nt)] == nt
    for cet in CETS:
        assert g.num_edges(cet[1]) == g0.num_edges(cet)
        assert g.canonical_etypes[g.get_etype_id(cet)] == cet
        assert g.to_canonical_etype(cet[1]) == cet
    assert g.num_nodes() == g0.num_nodes() and g.num_edges() == g0.num_edges()
    # every datum exact through the mapping (new per-type id -> input id)
    for nt in g0.ntypes:
        ids = torch.arange(g.num_nodes(nt))
        for name, want in g0.nodes[nt].data.items():
            got = g.nodes[nt].data[name][ids]
            assert got.dtype == want.dtype and torch.equal(got, want[nmap[nt]]), (nt, name)
    for cet in CETS:
        ids = torch.arange(g.num_edges(cet))
        for name, want in g0.edges[cet].data.items():
            got = g.edges[cet].data[name][ids]
            assert got.dtype == want.dtype and torch.equal(got, want[emap[cet]]), (cet, name)
    assert g.node_attr_schemes("author")["h"].dtype == torch.float16
    with pytest.raises(RdpsError):
        g.ndata  # several node types: g.nodes[nt].data
    # the structure: find_edges with a type gives per-type ids
    s, d = g.find_edges(torch.arange(g.num_edges("cites")), etype="cites")
    s0, d0 = g0.find_edges(emap[CETS[2]], etype="cites")
    inv = inverse(nmap["paper"])
    assert torch.equal(s, inv[s0]) and torch.equal(d, inv[d0])


def test_partition_book_and_policies(graph):
    g, g0, nmap, emap = graph
    pb = g.get_partition_book()
    assert pb.ntypes == g.ntypes and pb.canonical_etypes == g.canonical_etypes
    for nt in g.ntypes:
        pol = g.get_node_partition_policy(nt)
        assert pol.get_size() == g.num_nodes(nt) and pol.type_name == nt
        ids = torch.arange(g.num_nodes(nt))
        parts = pb.nid2partid(ids, nt)
        for p in range(2):
            assert torch.equal(pb.partid2nids(p, nt), ids[parts == p])
        homo = pb.map_to_homo_nid(ids, nt)
        t, per = pb.map_to_per_ntype(homo)
        assert (t == g.get_ntype_id(nt)).all() and torch.equal(per, ids)
        assert torch.equal(pb.nid2partid(homo, None), parts)
    pol = g.get_edge_partition_policy(("paper", "cites", "paper"))
    assert pol.get_size() == g.num_edges("cites")
    # node_split of a type's mask: each set id once, by per-type ids
    mask = g.nodes["paper"].data["train_mask"][torch.arange(NP)]
    got = dist.node_split(mask, pb, ntype="paper")
    assert torch.equal(torch.sort(got).values, torch.nonzero(mask).reshape(-1))


def test_typed_sampling_and_blocks(graph):
    g, g0, nmap, emap = graph
    inv = {nt: inverse(nmap[nt]) for nt in g0.ntypes}
    seeds = {"paper": torch.arange(0, 120), "author": torch.arange(0, 50)}
    fan = {"writes": 3, "written_by": 2, "cites": -1, "has_topic": 0}
    fr = g.sample_neighbors(seeds, fan)
    assert sorted(fr.canonical_etypes) == sorted(CETS)
    for cet in CETS:
        s, d = fr.edges(etype=cet)
        eid = fr.edges[cet].data[dgl.EID]
        # real edges of that type, into the seeds of the dst type
        s0, d0 = g0.find_edges(emap[cet][eid], etype=cet)
        assert torch.equal(inv[cet[0]][s0], s) and torch.equal(inv[cet[2]][d0], d), cet
        want = {"writes": 3, "written_by": 2, "cites": None, "has_topic": 0}[cet[1]]
        indeg = g0.in_degrees(nmap[cet[2]][seeds[cet[2]]], etype=cet) \
            if cet[2] in seeds else None
        if indeg is not None:
            per = torch.bincount(d, minlength=g.num_nodes(cet[2]))[seeds[cet[2]]]
            cap = indeg if want is None else torch.clamp(indeg, max=want)
            assert torch.equal(per, cap), cet
    # DGL's sampler: heterogeneous blocks a HeteroGraphConv consumes
    sampler = dgl.dataloading.NeighborSampler([{"writes": 2, "written_by": 2, "cites": 3,
                                                "has_topic": 1}] * 2)
    loader = dist.DistNodeDataLoader(g, {"paper": torch.arange(NP)}, sampler, batch_size=64,
                                     shuffle=True)
    conv = dgl.nn.HeteroGraphConv({c[1]: dgl.nn.GraphConv(5, 4, allow_zero_in_degree=True)
                                   for c in CETS}, aggregate="sum")
    seen = []
    for input_nodes, out, blocks in loader:
        assert isinstance(input_nodes, dict) and set(out) == {"paper"}
        b = blocks[0]
        assert b.is_block and sorted(b.canonical_etypes) == sorted(CETS)
        x = {nt: torch.randn(len(input_nodes[nt]), 5) for nt in b.srctypes}
        h = conv(b, x)
        assert h["paper"].shape[0] == b.num_dst_nodes("paper")
        assert torch.equal(blocks[-1].dstdata[dgl.NID]["paper"], out["paper"])
        seen.append(out["paper"])
    assert sorted(torch.cat(seen).tolist()) == list(range(NP))


def test_edge_loader_dict(graph):
    g, g0, nmap, emap = graph
    eids = {"cites": torch.arange(g.num_edges("cites"))}
    loader = dist.DistEdgeDataLoader(
        g, eids, dgl.dataloading.NeighborSampler([2]),
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(2), batch_size=100,
        shuffle=True)
    n = 0
    for input_nodes, pos, neg, blocks in loader:
        e = pos.edges["cites"].data[dgl.EID]
        assert neg.num_edges("cites") == 2 * len(e)
        s, d = pos.edges(etype="cites")
        s2, d2 = g.find_edges(e, etype="cites")
        assert torch.equal(pos.ndata[dgl.NID]["paper"][s], s2)
        assert torch.equal(pos.ndata[dgl.NID]["paper"][d], d2)
        n += len(e)
    assert n == g.num_edges("cites")
