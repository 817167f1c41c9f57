# SPDX-License-Identifier: MIT
"""Converts a partition DGL made into an rdps graph partition (one command):

    python3 -m rdps.from_dgl --from-dgl OUT/graph_name.json --out PARTS

DGL's parts and node ids are kept (rdps.distributed.partition's
convert_dgl_partition); needs DGL, whose .dgl files it reads."""
import sys

from rdps.distributed.partition import main

if __name__ == "__main__":
    sys.exit(main())
