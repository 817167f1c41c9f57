# SPDX-License-Identifier: MIT
"""A Python job through 'rdps launch --exec' (2 servers started without
tables, 2 trainers running launch_worker.py over tcp): initialize() takes
the job from the environment; trainer 0 alone runs an init_func, once;
rows written by each trainer are seen by both after a barrier; node_split
and edge_split give every set id to exactly one of the two trainers;
SparseAdagrad pushes of both trainers match torch's Adagrad on each one's
rows; allreduce; trainer 0's finalize() shuts the servers down (trainer 1
finalizes at exit). A trainer dying of an exception leaves without the last
barrier: trainer 0's barrier fails at once (ECONNABORTED), not after the
barrier timeout."""
import errno
import json
import os
import subprocess

import numpy as np

from conftest import HERE, PYTHON, RDPS, TcpServers, env_for_children, write_ip_config


def launch(tmp_path, *worker_args):
    ipc = write_ip_config(tmp_path, 2)
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([RDPS, "launch", "--ip_config", ipc, "--num_client_proc", "2",
                        "--log_dir", str(tmp_path / "logs"), "--quiet", "--exec",
                        "--transport", "tcp", "--", PYTHON,
                        os.path.join(HERE, "launch_worker.py"), str(out), *worker_args],
                       env=env_for_children(), capture_output=True, text=True, timeout=200)
    logs = {p: (tmp_path / "logs" / p).read_text()
            for p in sorted(os.listdir(tmp_path / "logs"))}
    return ipc, out, r, logs


def test_python_job_through_launch_exec(tmp_path):
    ipc, out, r, logs = launch(tmp_path)
    assert r.returncode == 0, "launch failed:\n%s\n%s" % (r.stderr, logs)
    assert "2 server(s) and 2 trainer(s) finished" in r.stderr
    for s in (0, 1):
        assert "no table yet" in logs["server%d.log" % s], logs["server%d.log" % s]
        # stopped by trainer 0's finalize(), not by the launcher
        assert "shutdown requested by client 0" in logs["server%d.log" % s]
        assert "server %d (pid" % s in r.stderr and "--table" not in r.stderr
    seen = [json.loads((out / ("rank%d.json" % k)).read_text()) for k in (0, 1)]
    for k, s in enumerate(seen):
        assert s["env"] == {"RDPS_IP_CONFIG": os.path.realpath(ipc), "RDPS_RANK": str(k),
                            "RDPS_NUM_TRAINERS": "2", "RDPS_NUM_SERVERS": "2",
                            "RDPS_TRANSPORT": "tcp"}
        assert (s["rank"], s["num_trainers"], s["num_servers"], s["transport"],
                s["standalone"]) == (k, 2, 2, "tcp", False)
        assert s["init_rows_ok"] and s["same_table"]
        assert s["rows_after_barrier"] == [[0, 0], [1, -1]]
        assert s["adagrad_max_err_own_rows"] < 1e-5, s["adagrad_max_err_own_rows"]
        assert s["allreduce"] == [3.0, 4.0]
    assert sum(c[0] for c in seen[0]["init_calls"]) == 500, "trainer 0 wrote every row, once"
    assert seen[1]["init_calls"] == [], "trainer 1 ran the init_func"
    assert seen[0]["final_rows"] == seen[1]["final_rows"]
    moved = np.any(np.array(seen[0]["final_rows"]) != np.array(seen[0]["start_rows"]), axis=1)
    assert moved.all(), "rows of both trainers were updated"
    mask = (np.arange(1001) % 3 == 0) | (np.arange(1001) % 7 == 0)
    want = np.flatnonzero(mask)
    for key in ("node_split", "edge_split"):
        a, b = seen[0][key], seen[1][key]
        assert sorted(a + b) == want.tolist(), "%s: not every set id exactly once" % key
    assert abs(len(seen[0]["node_split"]) - len(seen[1]["node_split"])) <= 1


def test_a_failing_trainer_leaves_at_once(tmp_path):
    # The trainers are started here, not by rdps launch (which stops the
    # others as soon as one fails, racing with what trainer 0 reports).
    servers = TcpServers(tmp_path, 2)
    out = tmp_path / "out"
    out.mkdir()
    try:
        procs = []
        for rank in (0, 1):
            env = env_for_children()
            env.update(RDPS_IP_CONFIG=servers.ip_config, RDPS_RANK=str(rank),
                       RDPS_NUM_TRAINERS="2", RDPS_TRANSPORT="tcp")
            procs.append(subprocess.Popen(
                [PYTHON, os.path.join(HERE, "launch_worker.py"), str(out), "fail"], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert procs[1].returncode == 1 and "trainer 1 fails on purpose" in outs[1], outs[1]
        assert procs[0].returncode == 0, outs[0]
        seen = json.loads((out / "rank0.json").read_text())
        assert seen["barrier"][0] == errno.ECONNABORTED, seen
        assert "left the job" in seen["barrier"][1], seen
    finally:
        servers.kill()
