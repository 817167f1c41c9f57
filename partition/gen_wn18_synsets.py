#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Regenerates partition/wn18_synsets.c: which WordNet 3.0 synsets are WN18's entities.

WN18 (Bordes et al., 2013) names its 40,943 entities by the byte offset of the synset
in Princeton's WordNet 3.0 data files, without the part of speech. Its selection rule
is not reproducible from WordNet alone (a third of its entities have a single WN18
relation), so rdps ships the membership as one bit per synset, in data-file order
(data.noun, data.verb, data.adj, data.adv): that order and the synset counts are the
same in every copy of WordNet 3.0, while byte offsets are not (Debian's wordnet-base
patches a few lines, shifting the offsets after them).

Usage: gen_wn18_synsets.py ENTITY2ID WORDNET_DIR > partition/wn18_synsets.c
  ENTITY2ID   WN18's entity list, one "OFFSET<TAB>ID" per line after a count line
              (e.g. benchmarks/WN18/entity2id.txt of thunlp/OpenKE)
  WORDNET_DIR the data.{noun,verb,adj,adv} files (/usr/share/wordnet)

Offsets are matched to the local files as follows: Princeton offset X of part of
speech P is the local synset at X + shift(P, X), where shift is found by aligning the
WN18 offsets that match one synset only (Debian 1:3.0-37: verbs between the patched
lines 612841 and 2423762 are 18 bytes later, adjectives after 1680836 one byte later).
An offset that matches synsets of two parts of speech is given to the one with more
WN18 relations to the unambiguous entities (ties: noun, verb, adjective, adverb).
"""
import collections
import sys

FILES = (("data.noun", "n"), ("data.verb", "v"), ("data.adj", "a"), ("data.adv", "r"))
# The 18 WN18 relations, as WordNet pointer symbols (partition/wordnet.c wn_rel[]).
WN18_SYMBOLS = {"@", "~", "@i", "~i", "#m", "%m", "#p", "%p", "+", "^", "$", "&",
                ";c", "-c", ";r", "-r", ";u", "-u"}
SHIFTS = (0, 1, -1, 18, -18)


def read_wordnet(wndir):
    order = []  # (pos, offset) in file order
    ptrs = {}
    for name, pos in FILES:
        with open(f"{wndir}/{name}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                t = line.split(" | ")[0].split()
                key = (pos, int(t[0]))
                nwords = int(t[3], 16)
                i = 4 + 2 * nwords
                out = set()
                for _ in range(int(t[i])):
                    sym, off, tpos = t[i + 1], int(t[i + 2]), t[i + 3]
                    if sym in WN18_SYMBOLS:
                        out.add(("a" if tpos == "s" else tpos, off))
                    i += 4
                order.append(key)
                ptrs[key] = out
    return order, ptrs


def fit_shifts(offsets, synsets):
    """Piecewise-constant shift per part of speech, from offsets with one match."""
    points = collections.defaultdict(list)
    for x in offsets:
        hits = [(p, d) for p in "nvar" for d in SHIFTS if (p, x + d) in synsets]
        if len(hits) == 1:
            points[hits[0][0]].append((x, hits[0][1]))
    pieces = {}
    for p, pts in points.items():
        pts.sort()
        runs = []  # [first x, last x, shift]
        for x, d in pts:
            if runs and runs[-1][2] == d:
                runs[-1][1] = x
            else:
                runs.append([x, x, d])
        pieces[p] = runs
    return pieces


def shifts_of(pieces, p, x):
    """The shift of the run holding x; both neighbours' in a gap between runs."""
    runs = pieces.get(p, [[0, 0, 0]])
    if x <= runs[0][1]:
        return {runs[0][2]}
    for a, b in zip(runs, runs[1:]):
        if x <= a[1]:
            return {a[2]}
        if x < b[0]:
            return {a[2], b[2]}
    return {runs[-1][2]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        lines = f.read().split("\n")
    count = int(lines[0])
    offsets = [int(l.split("\t")[0]) for l in lines[1:] if l.strip()]
    if len(offsets) != count:
        sys.exit(f"{sys.argv[1]}: {len(offsets)} entities, header says {count}")
    order, ptrs = read_wordnet(sys.argv[2])
    synsets = set(order)
    pieces = fit_shifts(offsets, synsets)
    cands = {}
    for x in offsets:
        cands[x] = [(p, x + d) for p in "nvar" for d in sorted(shifts_of(pieces, p, x))
                    if (p, x + d) in synsets]
        if not cands[x]:
            sys.exit(f"WN18 offset {x:08d}: no synset in {sys.argv[2]}")
    sure = {c[0] for c in cands.values() if len(c) == 1}
    nbr = collections.defaultdict(set)
    for k, out in ptrs.items():
        for t in out:
            nbr[k].add(t)
            nbr[t].add(k)
    members = set(sure)
    for c in cands.values():
        if len(c) > 1:
            members.add(max(c, key=lambda k: (len(nbr[k] & sure), -"nvar".index(k[0]))))
    if len(members) != count:
        sys.exit(f"{len(members)} synsets for {count} offsets")
    counts = [sum(1 for k in order if k[0] == p) for _, p in FILES]
    words = [0] * ((len(order) + 63) // 64)
    for i, k in enumerate(order):
        if k in members:
            words[i // 64] |= 1 << (i % 64)
    shifts = "; ".join(f"{p} " + ", ".join(f"{d:+d} from {a}" for a, _, d in runs)
                       for p, runs in sorted(pieces.items()) if len(runs) > 1)
    print("// SPDX-License-Identifier: MIT")
    print("/* Generated by partition/gen_wn18_synsets.py; do not edit.")
    print(f" * WN18's {count} entities as one bit per WordNet 3.0 synset in data-file")
    print(f" * order (noun, verb, adj, adv). Local offset - WN18 offset: {shifts or '0'}. */")
    print('#include "internal.h"')
    print()
    print("const uint32_t rdps_wn18_synsets_per_file[4] = { " +
          ", ".join(str(c) for c in counts) + " };")
    print(f"const uint32_t rdps_wn18_num_entities = {count};")
    print(f"const uint64_t rdps_wn18_synset_bits[{len(words)}] = {{")
    for i in range(0, len(words), 4):
        print("\t" + " ".join(f"0x{w:016x}ull," for w in words[i:i + 4]))
    print("};")


if __name__ == "__main__":
    main()
