# SPDX-License-Identifier: MIT
"""pydoc answers a user: every public name of rdps.distributed, and every
public method and property of its classes, has a docstring, and
`pydoc3 rdps.distributed.NAME` shows it (issue 28).

KNOWN_GAPS are the names of python/rdps/distributed/graph.py that have none
yet: issue 26 rewrites that module (DistGraph, the samplers and loaders), so
they are left to it. An entry that gains a docstring fails this test until
it is taken off the list, so the list only shrinks.
"""
import inspect
import pydoc
import subprocess
import sys

import pytest

import rdps
import rdps.distributed as dist

KNOWN_GAPS = {
    "DistGraph.num_nodes", "DistGraph.num_edges", "DistGraph.number_of_nodes",
    "DistGraph.number_of_edges", "DistGraph.num_parts", "DistGraph.get_partition_book",
    "GraphPartitionBook.num_partitions", "GraphPartitionBook.nid2partid",
    "GraphPartitionBook.partid2nids", "GraphPartitionBook.node_ranges",
    "Block.num_src_nodes", "Block.num_dst_nodes", "Block.num_edges", "Block.edges",
    "DistNodeDataLoader.__len__", "DistNodeDataLoader.__iter__",
}
# Dunder methods a user calls through syntax (t[ids], len(t), emb(ids), ...).
USED_DUNDERS = {"__getitem__", "__setitem__", "__call__", "__len__", "__iter__"}


def public_members(cls):
    """(name, object) of what a user of cls reaches: its public methods and
    properties, and the dunders above, defined by rdps (not object's)."""
    for klass in inspect.getmro(cls):
        if not klass.__module__.startswith("rdps"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") and name not in USED_DUNDERS:
                continue
            if isinstance(value, property):
                yield name, value.fget
            elif inspect.isfunction(value):
                yield name, value


def undocumented():
    out = set()
    for name in dist.__all__:
        obj = getattr(dist, name)
        if not inspect.getdoc(obj):
            out.add(name)
        if inspect.isclass(obj):
            for member, fn in public_members(obj):
                if not (fn.__doc__ or "").strip():
                    out.add("%s.%s" % (name, member))
    return out


def test_every_public_name_has_a_docstring():
    missing = undocumented() - KNOWN_GAPS
    assert not missing, ("no docstring (pydoc shows nothing for them): %s" %
                         ", ".join(sorted(missing)))


def test_known_gaps_are_still_gaps():
    # Control: the list names real gaps; one that gained a docstring is
    # taken off (names issue 26 renamed or moved are gone, not listed).
    present = {g for g in KNOWN_GAPS
               if hasattr(getattr(dist, g.split(".")[0], None), g.split(".")[1])}
    fixed = present - undocumented()
    assert not fixed, "documented now, take them off KNOWN_GAPS: %s" % ", ".join(sorted(fixed))


def test_the_checker_sees_a_missing_docstring():
    # Control: a class of the package's with a method and a property
    # without docstrings is reported, one with them is not.
    class Probe:
        __module__ = "rdps.distributed.probe"

        def method(self):
            return 1

        @property
        def prop(self):
            return 2

        def documented(self):
            """Says what it does."""
            return 3

    found = {m for m, fn in public_members(Probe) if not (fn.__doc__ or "").strip()}
    assert found == {"method", "prop"}


@pytest.mark.parametrize("name,words", [
    ("DistTensor", ["t[ids] returns a torch tensor", "--max-table-memory", "shape",
                    "persistent", "RdpsError"]),
    ("DistEmbedding", ["SparseAdam", "emb.weight", "embedding_dim"]),
    ("SparseAdam", ["step", "flush", "betas"]),
    ("SparseAdagrad", ["eps", "step"]),
    ("initialize", ["ip_config", "standalone", "secret_file"]),
    ("DistGraph", ["part_config"]),
])
def test_pydoc_shows_them(name, words):
    text = pydoc.render_doc(getattr(dist, name), renderer=pydoc.plaintext)
    for w in words:
        assert w in text, "pydoc rdps.distributed.%s does not say '%s'" % (name, w)


def test_pydoc3_command_answers():
    # What a user types: the module's page names the guide and the API.
    r = subprocess.run([sys.executable, "-m", "pydoc", "rdps.distributed.DistTensor"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "class DistTensor" in r.stdout and "__getitem__" in r.stdout
    top = pydoc.render_doc(rdps, renderer=pydoc.plaintext)
    assert "docs/dgl.md" in top
