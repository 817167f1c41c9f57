# SPDX-License-Identifier: MIT
"""The command-line side of Python jobs: 'rdps server' with no table (its
clients make them; --table with --partition is refused), and 'rdps launch
--exec' (the commands it would run, its refusals, its --help)."""
import os
import subprocess

from conftest import RDPS, TcpServers, write_ip_config


def run(*args):
    return subprocess.run([RDPS, *args], capture_output=True, text=True, timeout=60)


def test_server_without_tables(tmp_path):
    servers = TcpServers(tmp_path, 1)
    try:
        r = run("shutdown", "--ip_config", servers.ip_config, "--transport", "tcp")
        assert r.returncode == 0, r.stderr
        assert servers.wait() == [0]
        assert "no table yet (its clients make them)" in servers.log(0)
    finally:
        servers.kill()
    r = run("server", "--ip_config", servers.ip_config, "--server_id", "0",
            "--table", "e:10:4", "--partition", str(tmp_path))
    assert r.returncode == 2 and "exclude each other" in r.stderr, r.stderr
    r = run("server", "--server_id", "0")
    assert r.returncode == 2 and "--ip_config and --server_id are required" in r.stderr
    assert "With neither\n--table nor --partition" in run("server", "--help").stdout


def test_launch_exec_commands(tmp_path):
    ipc = write_ip_config(tmp_path, 2)
    r = run("launch", "--ip_config", ipc, "--num_client_proc", "2", "--exec", "--transport",
            "tcp", "--server_arg=--num_server_threads", "--server_arg=2", "--dry_run", "--",
            "python3", "train.py", "--rank", "7")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    real = os.path.realpath(ipc)
    assert lines[0] == "server 0: %s server --ip_config %s --server_id 0 --transport tcp " \
                       "--num_server_threads 2" % (RDPS, real)
    for j in (0, 1):
        # the command's own arguments pass untouched (no train-argument check)
        assert lines[2 + j] == ("trainer %d: /usr/bin/env RDPS_IP_CONFIG=%s RDPS_RANK=%d "
                                "RDPS_NUM_TRAINERS=2 RDPS_NUM_SERVERS=2 RDPS_TRANSPORT=tcp "
                                "RDPS_MACHINE=0 python3 train.py --rank 7" % (j, real, j))
    r = run("launch", "--ip_config", ipc, "--backend", "mpi", "--exec", "--dry_run", "--",
            "python3", "t.py")
    assert r.returncode == 0 and " --exec -- python3 t.py" in r.stdout, r.stdout + r.stderr
    r = run("launch", "--ip_config", ipc, "--exec", "--")
    assert r.returncode == 2 and "--exec and no command" in r.stderr
    r = run("launch", "--ip_config", ipc, "--transport", "tcp", "--", "--data", "d")
    assert r.returncode == 2 and "--transport goes with --exec" in r.stderr
    assert "RDPS_NUM_TRAINERS" in run("launch", "--help").stdout


def test_launch_py_line_errors(tmp_path):
    """launch.py's flags: what rdps cannot do is refused before anything
    starts, saying why."""
    ipc = write_ip_config(tmp_path, 2)
    base = ["launch", "--workspace", str(tmp_path), "--num_trainers", "1", "--ip_config", ipc]
    r = run(*base, "--part_config", "p/x.json", "--num_servers", "2", "python3 t.py")
    assert r.returncode == 2 and "one part of the graph per server" in r.stderr, r.stderr
    r = run(*base, "python3 t.py")
    assert r.returncode == 2 and "needs --part_config" in r.stderr, r.stderr
    r = run(*base, "--part_config", "p/x.json", "--num_samplers", "1")
    assert r.returncode == 2 and "the training command comes last" in r.stderr, r.stderr
    r = run(*base, "--part_config", "p/x.json", "--extra_envs", "NOVALUE", "python3 t.py")
    assert r.returncode == 2 and "'NOVALUE' is not NAME=VALUE" in r.stderr, r.stderr
    r = run(*base, "--part_config", "p/x.json", "--dry_run", "python3 t.py --a 1")
    assert r.returncode == 0, r.stderr
    assert "--server_arg=%s/p" % tmp_path in r.stderr and "RDPS_NUM_SAMPLERS=0" in r.stdout
