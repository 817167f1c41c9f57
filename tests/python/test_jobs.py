# SPDX-License-Identifier: MIT
"""Servers that outlive a job (initialize(shutdown_servers=False)): at
finalize() the job's non-persistent tensors are dropped, persistent ones
(and DistEmbeddings) stay, rows and all, for the next job on the same
servers; that job's finalize() (trainer 0) shuts the servers down."""
import errno

import pytest
import torch

import rdps
import rdps.distributed as dist

from conftest import TcpServers


def test_persistent_tensors_outlive_the_job(tmp_path):
    servers = TcpServers(tmp_path, 2)
    try:
        dist.initialize(servers.ip_config, transport="tcp", shutdown_servers=False)
        keep = dist.DistTensor((20, 3), torch.float32, name="keep", persistent=True)
        keep[[0, 19]] = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
        tmp = dist.DistTensor((20, 3), torch.float32, name="tmp")
        tmp[[1]] = 9.0
        emb = dist.DistEmbedding(10, 2, name="emb", init_func=dist.uniform_init(0.1, seed=2))
        rows = emb.weight[0:10]
        dist.finalize()
        assert [p.poll() for p in servers.procs] == [None, None], "the servers stopped"

        dist.initialize(servers.ip_config, transport="tcp")
        again = dist.DistTensor((20, 3), torch.float32, name="keep", persistent=True)
        assert torch.equal(again[[0, 19]], torch.tensor([[1.0, 2, 3], [4, 5, 6]]))
        assert torch.equal(dist.DistEmbedding(10, 2, name="emb").weight[0:10], rows)
        # dropped: the name is free for another shape, and starts at zero
        other = dist.DistTensor((5,), torch.int64, name="tmp")
        assert torch.equal(other[0:5], torch.zeros(5, dtype=torch.int64))
        with pytest.raises(rdps.RdpsError) as e:
            dist.DistTensor((21, 3), torch.float32, name="keep")
        assert e.value.errno == errno.EEXIST
        dist.finalize()
        assert servers.wait() == [0, 0]
    finally:
        if dist.is_initialized():
            dist.finalize()
        servers.kill()
