# SPDX-License-Identifier: MIT
"""Shared fixtures of the Python suites: a job over each transport.

inproc: rdps.distributed.initialize() with no ip_config (standalone: two
servers inside this process). tcp: two 'rdps server --transport tcp'
processes started without tables (the CLI change of issue 18), this
process their only trainer; finalize() (trainer 0) shuts them down.
"""
import contextlib
import os
import random
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("RDPS_BUILD_DIR") or os.path.join(SRC, "build")
RDPS = os.environ.get("RDPS_BIN") or os.path.join(BUILD, "rdps")
PYTHON = sys.executable

if os.path.join(SRC, "python") not in sys.path:
    sys.path.insert(0, os.path.join(SRC, "python"))

os.environ.setdefault("DGLBACKEND", "pytorch")

if os.environ.get("RDPS_SANITIZED") == "1":
    # Under ASan (tests/run.sh's build-asan): DGL's libxsmm SpMM kernels
    # ask aligned_alloc(64, n) for sizes n not a multiple of 64 (C17 allows
    # it; GCC 12's ASan reports it and aborts the test in DGL's code, not
    # ours). DGL's own CPU kernels compute the same messages.
    try:
        import dgl
        dgl.use_libxsmm(False)
    except ImportError:
        pass


def dgl_version():
    """DGL's version, or None when it is not installed."""
    try:
        import dgl
    except ImportError:
        return None
    return dgl.__version__


def _dgl_line():
    v = dgl_version()
    if v is None:
        return "DGL: not installed (python %s)" % sys.executable
    import dgl
    import torch
    return "DGL: %s from %s, torch %s, python %s" % (
        v, os.path.dirname(dgl.__file__), torch.__version__, sys.executable)


def pytest_report_header(config):
    return _dgl_line()


def pytest_terminal_summary(terminalreporter):
    # Also under -q, which drops the header: the log says which DGL ran.
    terminalreporter.write_line("ran against " + _dgl_line())


def need_dgl():
    """Imports DGL for a test that needs it: skipped without it, unless the
    suite runs where DGL must be ($RDPS_REQUIRE_DGL=1: ctest in the venv),
    where its absence fails the test."""
    if os.environ.get("RDPS_REQUIRE_DGL") == "1":
        import dgl
        return dgl
    return pytest.importorskip("dgl")


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port(n):
    """A base port whose n ports from it are free on loopback now, below the
    kernel's ephemeral range (a port from it may be another test's outgoing
    connection by the time a server binds it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    top = lo if lo - 10000 > 1000 + n else 60000
    for _ in range(200):
        base = random.randrange(10000, top - n)
        if all(port_free(base + i) for i in range(n)):
            return base
    raise RuntimeError("no %d free consecutive ports" % n)


def write_ip_config(tmpdir, num_servers):
    path = os.path.join(str(tmpdir), "ip_config.txt")
    with open(path, "w") as f:
        f.write("127.0.0.1 %d %d\n" % (free_base_port(num_servers), num_servers))
    return path


def env_for_children():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(SRC, "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


class TcpServers:
    """num_servers 'rdps server' processes with no table, on loopback."""

    def __init__(self, tmpdir, num_servers=2, extra=()):
        self.ip_config = write_ip_config(tmpdir, num_servers)
        self.logs = []
        self.procs = []
        base = int(open(self.ip_config).read().split()[1])
        for s in range(num_servers):
            log = open(os.path.join(str(tmpdir), "server%d.log" % s), "w+")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [RDPS, "server", "--ip_config", self.ip_config, "--server_id", str(s),
                 "--transport", "tcp", *extra], stdout=log, stderr=subprocess.STDOUT))
        for s in range(num_servers):
            for _ in range(400):
                if self.procs[s].poll() is not None:
                    raise RuntimeError("rdps server %d exited: %s" % (s, self.log(s)))
                try:
                    socket.create_connection(("127.0.0.1", base + s), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)

    def log(self, s):
        self.logs[s].flush()
        self.logs[s].seek(0)
        return self.logs[s].read()

    def wait(self, timeout=30):
        """Exit statuses once every server exited (None for one still up
        after timeout, which is then killed)."""
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                codes.append(None)
        return codes

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


@contextlib.contextmanager
def graph_job(transport, parts, tmp_path_factory, name, part_config=None):
    """This process as the one trainer of a job serving the graph partition
    parts: over inproc (standalone: the parts served in-process) or tcp (2
    rdps server --graph processes, shut down by finalize). Yields the
    DistGraph (part_config: what it is given, default parts)."""
    import rdps.distributed as dist

    servers = None
    if transport != "inproc":
        servers = TcpServers(tmp_path_factory.mktemp("gtcp"), 2, extra=("--graph", parts))
    try:  # servers started are stopped whatever fails, initialize() too
        if servers:
            dist.initialize(servers.ip_config, rank=0, num_trainers=1, transport="tcp")
        else:
            dist.initialize()
        g = dist.DistGraph(name, part_config=part_config or parts)
        assert dist.get_transport() == transport
        yield g
    finally:
        try:
            if dist.is_initialized():
                dist.finalize()
            if servers:
                assert servers.wait() == [0, 0]
        finally:
            if servers:
                servers.kill()


@pytest.fixture(scope="module", params=["inproc", "tcp"])
def job(request, tmp_path_factory):
    """This process as the one trainer of a job of 2 servers over the
    transport; yields the transport's name."""
    import rdps.distributed as dist

    servers = None
    if request.param == "inproc":
        dist.initialize(num_servers=2)
    else:
        servers = TcpServers(tmp_path_factory.mktemp("tcp"))
        dist.initialize(servers.ip_config, rank=0, num_trainers=1, transport="tcp")
    assert dist.get_transport() == request.param
    assert dist.get_num_servers() == 2
    try:
        yield request.param
    finally:
        try:
            if dist.is_initialized():
                dist.finalize()
            if servers:
                codes = servers.wait()
                assert codes == [0, 0], "servers did not exit on finalize's shutdown: %s" % codes
        finally:
            if servers:
                servers.kill()


@pytest.fixture(scope="session")
def wordnet(tmp_path_factory):
    """WordNet 3.0 as rdps dataset wordnet-nodes builds it, partitioned in 2."""
    d = tmp_path_factory.mktemp("wordnet")
    data, parts = str(d / "wn"), str(d / "parts")
    subprocess.run([RDPS, "dataset", "wordnet-nodes", data], check=True, capture_output=True)
    subprocess.run([RDPS, "partition", "--data", data, "-k", "2", "--out", parts,
                    "--balance_train", "--balance_edges"], check=True, capture_output=True)
    import numpy as np

    ds = {n: np.load(os.path.join(data, n + ".npy")) for n in
          ("edges", "etypes", "features", "labels", "train_mask", "val_mask", "test_mask")}
    ds["idmap"] = np.load(os.path.join(parts, "idmap.npy"))
    return data, parts, ds
