#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""docs/architecture.svg is drawn from docs/architecture.dot by graphviz.

usage: diagram.py check|write [SOURCE_DIR]

write   renders docs/*.dot into the SVG beside each (run it after editing
        a .dot, and commit both).
check   (ctest docs/diagram) renders each .dot again and fails when the
        committed SVG does not show the same thing: the same nodes, edges,
        clusters and text. Coordinates are not compared: text widths come
        from the fonts of the machine that renders, so two machines lay the
        same graph out a few points apart. Without graphviz: exit 77
        (skipped; deploy/install-deps.sh installs it).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def render(dot):
    r = subprocess.run(["dot", "-Tsvg", dot], capture_output=True, text=True)
    if r.returncode:
        sys.exit("diagram: dot -Tsvg %s: %s" % (dot, r.stderr.strip()))
    return r.stdout


def content(svg_text, what):
    """What an SVG shows: each node, edge and cluster (its class and
    title) with its text, in a stable order."""
    try:
        root = ET.fromstring(svg_text)
    except ET.ParseError as e:
        sys.exit("diagram: %s is not an SVG: %s" % (what, e))
    items = []
    for g in root.iter(SVG + "g"):
        cls = g.get("class")
        if cls not in ("node", "edge", "cluster"):
            continue
        title = g.find(SVG + "title")
        texts = [t.text or "" for t in g.iter(SVG + "text")]
        style = sorted(p.get("stroke-dasharray", "") + p.get("stroke", "")
                       for p in g.iter() if p.tag in (SVG + "path", SVG + "polygon", SVG + "ellipse"))
        items.append("%s %s | %s | %s" % (cls, title.text if title is not None else "",
                                          " / ".join(texts), " ".join(style)))
    return sorted(items)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("check", "write"):
        sys.exit(__doc__)
    src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
    dots = sorted(glob.glob(os.path.join(src, "docs", "*.dot")))
    if not dots:
        sys.exit("diagram: no docs/*.dot under %s" % src)
    if not shutil.which("dot"):
        print("diagram: graphviz's dot is not installed (deploy/install-deps.sh installs it)")
        return 77
    bad = 0
    for dot in dots:
        svg = re.sub(r"\.dot$", ".svg", dot)
        fresh = render(dot)
        if sys.argv[1] == "write":
            with open(svg, "w") as f:
                f.write(fresh)
            print("diagram: wrote %s" % svg)
            continue
        if not os.path.exists(svg):
            print("diagram: FAIL: %s has no %s: run tests/docs/diagram.py write" % (dot, svg))
            bad += 1
            continue
        want, have = content(fresh, dot), content(open(svg).read(), svg)
        if want != have:
            print("diagram: FAIL: %s does not show what %s says (run tests/docs/diagram.py "
                  "write and commit it):" % (os.path.relpath(svg, src), os.path.relpath(dot, src)))
            for line in sorted(set(want) - set(have)):
                print("  only in the .dot:  %s" % line)
            for line in sorted(set(have) - set(want)):
                print("  only in the .svg:  %s" % line)
            bad += 1
        else:
            print("diagram: ok: %s shows %s (%d nodes, edges and clusters)" %
                  (os.path.relpath(svg, src), os.path.relpath(dot, src), len(want)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
