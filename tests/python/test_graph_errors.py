# SPDX-License-Identifier: MIT
"""DistGraph's errors: standalone without a partition, or after tensors;
rdps server --graph with the wrong number of servers or other tables."""
import errno
import subprocess

import pytest
import torch

from conftest import RDPS

import rdps.distributed as dist
from rdps import RdpsError


def test_standalone_graph_errors(wordnet, tmp_path):
    _, parts, _ = wordnet
    dist.initialize()
    try:
        with pytest.raises(RdpsError) as e:
            dist.DistGraph("wordnet")
        assert e.value.errno == errno.EINVAL and "part_config" in str(e.value)
        with pytest.raises(RdpsError) as e:
            dist.DistGraph("wordnet", part_config=str(tmp_path))
        assert "partition.json" in str(e.value)
        dist.DistTensor((10, 2), torch.float32, "before")
        with pytest.raises(RdpsError) as e:
            dist.DistGraph("wordnet", part_config=parts)
        assert e.value.errno == errno.EBUSY and "first" in str(e.value)
    finally:
        dist.finalize()


def test_server_graph_errors(wordnet, tmp_path):
    _, parts, _ = wordnet
    ipc = tmp_path / "ip.txt"
    ipc.write_text("127.0.0.1 30999 3\n")
    r = subprocess.run([RDPS, "server", "--ip_config", str(ipc), "--server_id", "0",
                        "--transport", "tcp", "--graph", parts], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "has 2 parts but the ip_config lists 3" in r.stderr, r.stderr
    r = subprocess.run([RDPS, "server", "--ip_config", str(ipc), "--server_id", "0",
                        "--graph", parts, "--table", "x:10:2"], capture_output=True, text=True)
    assert r.returncode == 2 and "exclude each other" in r.stderr
