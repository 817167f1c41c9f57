# SPDX-License-Identifier: MIT
"""DistGraph over inproc (standalone: the partition served by in-process
servers) and tcp (rdps server --graph processes): structure and node data
against the dataset's own files (through the partition's idmap), sampling
both ways (identical for a seed, every edge real, no repeats, fanout
respected), blocks, node_split with the partition book, and errors."""
import errno
import numpy as np
import pytest
import torch

from conftest import graph_job

import rdps.distributed as dist
from rdps import RdpsError


@pytest.fixture(scope="module", params=["inproc", "tcp"])
def graph(request, wordnet, tmp_path_factory):
    _, parts, ds = wordnet
    with graph_job(request.param, parts, tmp_path_factory, "wordnet") as g:
        yield g, ds


def edge_set(src, dst, et):
    return set(zip(src.tolist(), dst.tolist(), et.tolist()))


def test_structure_matches_the_dataset(graph):
    g, ds = graph
    idmap = ds["idmap"]  # new id -> the dataset's
    edges, etypes = ds["edges"], ds["etypes"]
    assert g.num_nodes() == len(idmap) == len(ds["labels"])
    assert g.num_edges() == len(edges)
    assert g.num_parts == 2
    ranges = g.get_partition_book().node_ranges
    assert ranges[0] == 0 and ranges[-1] == g.num_nodes() and ranges[1] > 0
    # in-degrees: the dataset's, node by node through the idmap
    deg = g.in_degrees()
    want = np.bincount(edges[:, 1], minlength=len(idmap))[idmap]
    assert np.array_equal(deg.numpy(), want)
    assert g.in_degrees([5, 0, 5]).tolist() == [want[5], want[0], want[5]]
    # every edge once, with its type
    src, dst, et = g.find_edges(torch.arange(g.num_edges()), etype=True)
    got = sorted(zip(idmap[src.numpy()].tolist(), idmap[dst.numpy()].tolist(), et.tolist()))
    assert got == sorted(zip(edges[:, 0].tolist(), edges[:, 1].tolist(), etypes.tolist()))
    # a part's edges are its nodes' in-edges
    assert (dst.numpy()[:10] < ranges[1]).all()


def test_node_data_matches_the_dataset(graph):
    g, ds = graph
    idmap = ds["idmap"]
    assert set(g.ndata) == {"feat", "label", "train_mask", "val_mask", "test_mask"}
    ids = torch.arange(g.num_nodes())
    assert torch.equal(g.ndata["feat"][ids], torch.from_numpy(ds["features"][idmap]))
    assert torch.equal(g.ndata["label"][ids], torch.from_numpy(ds["labels"][idmap]))
    for m in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(g.ndata[m][ids].numpy(), ds[m][idmap].astype(np.uint8)), m
    with pytest.raises(RdpsError) as e:  # the graph's data is read-only
        g.ndata["label"][[0]] = torch.tensor([1])
    assert e.value.errno == errno.EPERM and "read-only" in str(e.value)


def test_edge_data_matches_the_dataset(graph):
    g, ds = graph
    idmap, edges, etypes = ds["idmap"], ds["edges"], ds["etypes"]
    et, orig = g.edata[dist.graph.ETYPE], g.edata[dist.graph.ORIG_ID]
    assert set(g.edata) == {dist.graph.ETYPE, dist.graph.ORIG_ID}
    assert isinstance(et, dist.DistTensor) and et.shape == (g.num_edges(),)
    assert et.dtype == torch.int64 and len(orig) == g.num_edges()
    eids = torch.arange(g.num_edges())
    src, dst, types = g.find_edges(eids, etype=True)
    assert torch.equal(et[eids], types)
    # each edge is the dataset's row orig_id, with that row's type
    o = orig[eids].numpy()
    assert sorted(o.tolist()) == list(range(len(edges)))
    assert np.array_equal(idmap[src.numpy()], edges[o, 0])
    assert np.array_equal(idmap[dst.numpy()], edges[o, 1])
    assert np.array_equal(types.numpy(), etypes[o])
    some = torch.tensor([7, 3, 7, g.num_edges() - 1])
    assert et[some].tolist() == types[some].tolist() and int(et[3]) == int(types[3])
    with pytest.raises(RdpsError) as e:
        et[[0]] = torch.tensor([1])
    assert e.value.errno == errno.EPERM and "read-only" in str(e.value)
    with pytest.raises(RdpsError) as e:
        et[[g.num_edges()]]
    assert e.value.errno == errno.ERANGE


def test_sampling_both_ways(graph):
    g, ds = graph
    idmap = ds["idmap"]
    real = edge_set(ds["edges"][:, 0], ds["edges"][:, 1], ds["etypes"])
    deg = g.in_degrees().numpy()
    rng = np.random.default_rng(7)
    seeds = rng.choice(g.num_nodes(), 3000, replace=False)
    seeds = np.concatenate([seeds, [int(np.argmax(deg))]])  # a hub too
    fanout = 5
    rpc = dist.sample_neighbors(g, seeds, fanout, way="rpc", seed=11)
    read = dist.sample_neighbors(g, seeds, fanout, way="read", seed=11)
    for a, b in ((rpc.src, read.src), (rpc.dst, read.dst), (rpc.eid, read.eid),
                 (rpc.etype, read.etype)):
        assert torch.equal(a, b)
    other = dist.sample_neighbors(g, seeds, fanout, way="rpc", seed=12)
    assert not torch.equal(rpc.eid, other.eid)  # the seed matters
    # every edge real, into its seed, no repeats, min(fanout, degree) each
    got = edge_set(idmap[rpc.src.numpy()], idmap[rpc.dst.numpy()], rpc.etype.numpy())
    assert got <= real
    assert len(set(rpc.eid.tolist())) == len(rpc)
    per = {int(s): 0 for s in seeds}
    for d in rpc.dst.tolist():
        per[d] += 1
    assert all(per[int(s)] == min(fanout, deg[s]) for s in seeds)
    src, dst = g.find_edges(rpc.eid)
    assert torch.equal(src, rpc.src) and torch.equal(dst, rpc.dst)


def test_blocks(graph):
    g, ds = graph
    sampler = dist.NeighborSampler([3, 4], way="read", seed=5)
    seeds = torch.arange(100, 400)
    input_nodes, out, blocks = sampler.sample_blocks(g, seeds)
    assert torch.equal(out, seeds) and len(blocks) == 2
    assert torch.equal(blocks[1].dstdata[dist.graph.NID], seeds)
    assert torch.equal(blocks[0].dstdata[dist.graph.NID], blocks[1].srcdata[dist.graph.NID])
    assert torch.equal(blocks[0].srcdata[dist.graph.NID], input_nodes)
    for b in blocks:
        nid = b.srcdata[dist.graph.NID]
        assert len(set(nid.tolist())) == b.num_src_nodes()
        esrc, edst = b.edges()
        assert int(edst.max()) < b.num_dst_nodes() and int(esrc.max()) < b.num_src_nodes()
        src, dst = g.find_edges(b.edata[dist.graph.EID])
        assert torch.equal(nid[esrc], src) and torch.equal(nid[edst], dst)
    assert int(blocks[1].in_degrees().max()) <= 4
    # a loader covers the nodes once per epoch
    loader = dist.DistNodeDataLoader(g, torch.arange(1000), sampler, batch_size=300, shuffle=True,
                                     seed=1)
    seen = torch.cat([s for _, s, _ in loader])
    assert len(loader) == 4 and sorted(seen.tolist()) == list(range(1000))


@pytest.mark.parametrize("trainers", [2, 3, 4])
def test_node_split_with_the_partition_book(graph, monkeypatch, trainers):
    g, ds = graph
    from rdps.distributed import split
    monkeypatch.setattr(split._context, "get_num_trainers", lambda: trainers)
    mask = g.ndata["train_mask"]
    want = np.flatnonzero(ds["train_mask"][ds["idmap"]])
    ranges = g.get_partition_book().node_ranges
    for even in (True, False):
        parts = [dist.node_split(mask, g.get_partition_book(), rank=r, force_even=even).numpy()
                 for r in range(trainers)]
        allids = np.concatenate(parts)
        assert np.array_equal(np.sort(allids), want), (trainers, even)  # each once
        if not even:  # every trainer's nodes are in its own part
            for r, p in enumerate(parts):
                k = r * 2 // trainers
                assert ((p >= ranges[k]) & (p < ranges[k + 1])).all()
        else:
            sizes = [len(p) for p in parts]
            assert max(sizes) - min(sizes) <= 1


def test_sampling_errors(graph):
    g, _ = graph
    with pytest.raises(ValueError):
        dist.sample_neighbors(g, [0], 0)
    with pytest.raises(ValueError):
        dist.sample_neighbors(g, [0], 5, way="sideways")
    for way in ("rpc", "read"):
        with pytest.raises(RdpsError) as e:
            dist.sample_neighbors(g, [0, g.num_nodes()], 5, way=way)
        assert e.value.errno == errno.ERANGE, way
    with pytest.raises(RdpsError) as e:
        g.in_degrees([g.num_nodes()])
    assert e.value.errno == errno.ERANGE
    # still serving after the errors
    assert len(dist.sample_neighbors(g, [0], 2, seed=1)) <= 2
