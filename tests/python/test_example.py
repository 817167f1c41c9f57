# SPDX-License-Identifier: MIT
"""examples/transe_wordnet.py, unchanged, standalone (servers in the
process, inproc) and distributed (rdps launch --exec: 2 servers, 2
trainers, tcp), 4 epochs each on WN18 (rdps dataset wordnet): both reach
the same filtered test MRR within 0.05 and Hits@10 within 0.08 (the
distributed trainers' pushes interleave, so the runs differ a little: seen
0.317..0.339 against 0.329..0.331), and both learned (MRR above 0.15; the
untrained model's is about 0.0003)."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import PYTHON, RDPS, SRC, env_for_children, write_ip_config

EXAMPLE = os.path.join(SRC, "examples", "transe_wordnet.py")
ARGS = ["--epochs", "4", "--eval_sample", "500", "--seed", "1"]
MRR_TOL, HITS_TOL, MRR_FLOOR = 0.05, 0.08, 0.15


def result(output):
    lines = [l for l in output.splitlines() if l.startswith("RESULT ")]
    assert lines, "no RESULT line in:\n" + output
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def wn18(tmp_path_factory):
    if not os.path.isdir("/usr/share/wordnet"):
        pytest.skip("WordNet 3.0 (wordnet-base) is not installed: deploy/install-deps.sh")
    d = str(tmp_path_factory.mktemp("wn") / "wn18")
    r = subprocess.run([RDPS, "dataset", "wordnet", d], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_standalone_and_distributed_reach_the_same_quality(wn18, tmp_path):
    env = env_for_children()
    for k in ("RDPS_IP_CONFIG", "RDPS_RANK", "RDPS_NUM_TRAINERS", "RDPS_TRANSPORT"):
        env.pop(k, None)
    r = subprocess.run([PYTHON, EXAMPLE, "--data", wn18, *ARGS], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    alone = result(r.stdout)
    assert (alone["trainers"], alone["transport"]) == (1, "inproc")

    ipc = write_ip_config(tmp_path, 2)
    r = subprocess.run([RDPS, "launch", "--ip_config", ipc, "--num_client_proc", "2", "--exec",
                        "--transport", "tcp", "--log_dir", str(tmp_path / "logs"), "--quiet",
                        "--", PYTHON, EXAMPLE, "--data", wn18, *ARGS], env=env,
                       capture_output=True, text=True, timeout=300)
    log = (tmp_path / "logs" / "trainer0.log").read_text()
    assert r.returncode == 0, r.stderr + log
    dist = result(log)
    assert (dist["trainers"], dist["transport"]) == (2, "tcp")

    print("standalone: MRR %.4f Hits@10 %.4f (%.1f s); distributed: MRR %.4f Hits@10 %.4f "
          "(%.1f s)" % (alone["mrr"], alone["hits10"], alone["seconds"], dist["mrr"],
                        dist["hits10"], dist["seconds"]))
    assert alone["ranked"] == dist["ranked"] == 1000
    assert alone["mrr"] > MRR_FLOOR and dist["mrr"] > MRR_FLOOR, (alone, dist)
    assert abs(alone["mrr"] - dist["mrr"]) <= MRR_TOL, (alone, dist)
    assert abs(alone["hits10"] - dist["hits10"]) <= HITS_TOL, (alone, dist)
