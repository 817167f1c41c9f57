# SPDX-License-Identifier: MIT
"""Errors outside a job: rdps.RdpsError carrying the C library's message
and errno (an ip_config that does not parse, servers that are not there),
and the package's own checks (not initialized, a bad rank, a tensor of a
job this process left). Errors inside one (ids past the rows, another
shape under a name) are in test_tensor.py."""
import errno
import os

import pytest
import torch

import rdps
import rdps.distributed as dist

from conftest import free_base_port


def test_not_initialized():
    assert not dist.is_initialized()
    for f in (dist.get_rank, dist.barrier, lambda: dist.DistTensor((3,), torch.uint8)):
        with pytest.raises(rdps.RdpsError) as e:
            f()
        assert e.value.errno == errno.ENOTCONN and "initialize()" in e.value.message


def test_bad_ip_config(tmp_path):
    path = tmp_path / "ip_config.txt"
    path.write_text("# the servers\n127.0.0.1 notaport 2\n")
    with pytest.raises(rdps.RdpsError) as e:
        dist.initialize(str(path))
    # the C parser's "FILE:LINE: reason"
    assert e.value.errno == errno.EINVAL
    assert e.value.message.startswith("%s:2: bad base_port 'notaport'" % path), e.value.message
    assert not dist.is_initialized()


def test_no_server_there(tmp_path, monkeypatch):
    path = tmp_path / "ip_config.txt"
    path.write_text("127.0.0.1 %d 1\n" % free_base_port(1))
    monkeypatch.setenv("RDPS_IP_CONFIG", str(path))  # as rdps launch --exec sets it
    monkeypatch.setenv("RDPS_TRANSPORT", "tcp")
    with pytest.raises(rdps.RdpsError) as e:
        dist.initialize(timeout=0.5)
    assert e.value.errno in (errno.ETIMEDOUT, errno.ECONNREFUSED)
    assert "127.0.0.1:%s" % path.read_text().split()[1] in e.value.message, e.value.message
    assert not dist.is_initialized()


def test_bad_rank(monkeypatch):
    monkeypatch.setenv("RDPS_RANK", "2")
    monkeypatch.setenv("RDPS_NUM_TRAINERS", "2")
    monkeypatch.setenv("RDPS_IP_CONFIG", os.devnull)
    with pytest.raises(rdps.RdpsError) as e:
        dist.initialize()
    assert e.value.errno == errno.EINVAL and "rank 2" in e.value.message
    monkeypatch.setenv("RDPS_RANK", "x")
    with pytest.raises(rdps.RdpsError) as e:
        dist.initialize()
    assert "$RDPS_RANK" in e.value.message


def test_tensor_of_a_finished_job():
    dist.initialize()
    t = dist.DistTensor((4,), torch.float32, name="gone")
    dist.finalize()
    dist.initialize()
    try:
        with pytest.raises(rdps.RdpsError) as e:
            t[[0]]
        assert e.value.errno == errno.ENOTCONN and "left" in e.value.message
        # a new standalone job has new servers: the name is free again
        assert dist.DistTensor((5,), torch.float64, name="gone").shape == (5,)
    finally:
        dist.finalize()
