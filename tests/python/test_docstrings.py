# SPDX-License-Identifier: MIT
"""pydoc answers a user: every public name of rdps.distributed, and every
public method and property of its classes, has a docstring, and
`pydoc3 rdps.distributed.NAME` shows it (issue 28).

KNOWN_GAP_MODULES are those issue 26 wrote and may still be working on
(DistGraph, the partition book and policies, the samplers and loaders): what
they define is left to it. A module of the list that has no gap any more
fails this test until it is taken off, so the list only shrinks. After issue
26b's merge they lack 75 docstrings: DistGraph 19 (barrier, ntypes, etypes,
canonical_etypes, get_ntype_id, get_etype_id, nodes, edges, idtype, device,
node_attr_schemes, edge_attr_schemes, the partition policies, ...),
GraphPartitionBook 16 and the three PartitionPolicy classes 10 each, the
loaders' __len__/__iter__ (6), Block 4 (undocumented() lists them).
"""
import inspect
import pydoc
import subprocess
import sys

import pytest

import rdps
import rdps.distributed as dist

KNOWN_GAP_MODULES = {
    "rdps.distributed.graph", "rdps.distributed.sampling", "rdps.distributed.dataloader",
    "rdps.distributed.partition_book",
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
    """{qualified name: defining module} of what has no docstring."""
    out = {}
    for name in dist.__all__:
        obj = getattr(dist, name)
        if not inspect.getdoc(obj):
            out[name] = getattr(obj, "__module__", "")
        if inspect.isclass(obj):
            for member, fn in public_members(obj):
                if not (fn.__doc__ or "").strip():
                    out["%s.%s" % (name, member)] = fn.__module__
    return out


def test_every_public_name_has_a_docstring():
    missing = sorted(n for n, m in undocumented().items() if m not in KNOWN_GAP_MODULES)
    assert not missing, ("no docstring (pydoc shows nothing for them): %s" %
                         ", ".join(missing))


def test_known_gap_modules_still_have_gaps():
    # Control: each listed module that exists still lacks a docstring
    # somewhere; one documented whole is taken off the list.
    import importlib
    gaps = set(undocumented().values())
    done = []
    for mod in sorted(KNOWN_GAP_MODULES):
        try:
            importlib.import_module(mod)
        except ImportError:
            continue
        if mod not in gaps:
            done.append(mod)
    assert not done, "documented whole now, take them off KNOWN_GAP_MODULES: %s" % done


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
