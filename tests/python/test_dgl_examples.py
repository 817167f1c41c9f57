# SPDX-License-Identifier: MIT
"""examples/dgl/: DGL-style scripts (dgl.distributed, dgl.dataloading,
dgl.nn; one line added at the top) on WordNet's node-classification task
(2 parts), with real DGL: standalone (given --ip_config but not launched:
runs in-process, as DGL's) and under rdps launch --exec with 2 machines of
one server and two trainers each (rdps launch places trainer r on machine
r % 2: trainers 1 and 3 sit beside part 1): DDP over gloo (torch.distributed's
variables set by initialize), each trainer's training nodes in the part of
its own machine, layer-wise inference into DistTensors assigned as ndata.
Link prediction (DistEdgeDataLoader, negatives) on the same graph, and RGCN
on rdps dataset wordnet-hetero (HeteroGraphConv, DistEmbedding + SparseAdam
for the featureless lemmas), both ways too."""
import json
import os
import re
import subprocess

import pytest

from conftest import PYTHON, RDPS, SRC, env_for_children, free_base_port, need_dgl

SAGE = os.path.join(SRC, "examples", "dgl", "train_dist_sage.py")
LINK = os.path.join(SRC, "examples", "dgl", "train_dist_link.py")
RGCN = os.path.join(SRC, "examples", "dgl", "train_dist_rgcn.py")
FAST = ["--num_epochs", "1", "--fan_out", "5,10", "--batch_size", "1000"]


def clean_env():
    env = env_for_children()
    for k in list(env):
        if k.startswith("RDPS_") and k not in ("RDPS_LIBRARY", "RDPS_BIN", "RDPS_BUILD_DIR",
                                               "RDPS_REQUIRE_DGL"):
            env.pop(k)
        if k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k)
    return env


def last_json(path):
    with open(path) as f:
        return json.loads(f.read().splitlines()[-1])


def test_graphsage_standalone_and_launched(wordnet, tmp_path):
    dgl = need_dgl()
    _, parts, _ = wordnet
    conf = os.path.join(parts, "partition.json")
    ipc = tmp_path / "ip_config.txt"
    base = free_base_port(2)
    # two machines (lines) of one server each
    ipc.write_text("127.0.0.1 %d 1\n127.0.0.1 %d 1\n" % (base, base + 1))
    args = [SAGE, "--graph_name", "wn", "--ip_config", str(ipc), "--part_config", conf] + FAST

    r = subprocess.run([PYTHON] + args + ["--json", str(tmp_path / "alone.json")],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs standalone" in r.stderr
    alone = last_json(tmp_path / "alone.json")
    assert alone["trainers"] == 1 and alone["dgl"] == dgl.__version__
    print("standalone:", alone)

    r = subprocess.run([RDPS, "launch", "--ip_config", str(ipc), "--num_client_proc", "2",
                        "--server_arg=--graph", "--server_arg=" + parts, "--log_dir",
                        str(tmp_path / "logs"), "--quiet", "--exec", "--transport", "tcp", "--",
                        PYTHON] + args + ["--json", str(tmp_path / "dist.json"), "--max_steps", "12"],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    logs = "".join((tmp_path / "logs" / f).read_text()
                   for f in sorted(os.listdir(tmp_path / "logs")))
    assert r.returncode == 0, r.stderr + logs
    launched = last_json(tmp_path / "dist.json")
    print("launched:", launched)
    assert launched["trainers"] == 4
    # each trainer takes nodes of its machine's part (without the layout,
    # trainer 1 would take part 0's: rank blocks)
    got = {int(m.group(1)): (int(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"rank (\d): part (\d) of 2, \d+ train nodes \(([0-9.]+) of them in its part\)", logs)}
    assert sorted(got) == [0, 1, 2, 3], logs
    for rank, (part, frac) in got.items():
        assert part == rank % 2 and frac > 0.9, got
    # DDP: every trainer ends with the same model, so the same test accuracy
    accs = re.findall(r"rank \d: Test accuracy ([0-9.]+)", logs)
    assert len(accs) == 4 and len(set(accs)) == 1, accs
    # It learned (45 classes; the majority class is 0.12, an MLP on the
    # features 0.38 after 20 epochs): one epoch (95 steps) standalone, 12
    # steps of 4 trainers launched.
    assert alone["test_acc"] > 0.45, alone
    assert launched["test_acc"] > 0.2, launched
    for s in (alone, launched):
        assert s["sampled_edges_per_s"] > 0 and s["feature_bytes_per_s"] > 0


def two_machines(tmp_path):
    ipc = tmp_path / "ip_config.txt"
    base = free_base_port(2)
    ipc.write_text("127.0.0.1 %d 1\n127.0.0.1 %d 1\n" % (base, base + 1))
    return ipc


def both_ways(tmp_path, script, parts, conf, args, launched_args):
    """The script standalone, then under rdps launch (2 machines of one
    server and one trainer); trainer 0's JSON of each and the logs."""
    ipc = two_machines(tmp_path)
    base = [script, "--ip_config", str(ipc), "--part_config", conf] + args
    r = subprocess.run([PYTHON] + base + ["--json", str(tmp_path / "alone.json")],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    alone = last_json(tmp_path / "alone.json")
    r = subprocess.run([RDPS, "launch", "--ip_config", str(ipc), "--num_client_proc", "1",
                        "--server_arg=--graph", "--server_arg=" + parts, "--log_dir",
                        str(tmp_path / "logs"), "--quiet", "--exec", "--transport", "tcp", "--",
                        PYTHON] + base + launched_args +
                       ["--json", str(tmp_path / "dist.json")],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    logs = "".join((tmp_path / "logs" / f).read_text()
                   for f in sorted(os.listdir(tmp_path / "logs")))
    assert r.returncode == 0, r.stderr + logs
    launched = last_json(tmp_path / "dist.json")
    print("standalone:", alone, "\nlaunched:", launched)
    assert alone["trainers"] == 1 and launched["trainers"] == 2
    return alone, launched, logs


def test_link_prediction(wordnet, tmp_path):
    need_dgl()
    _, parts, _ = wordnet
    alone, launched, logs = both_ways(
        tmp_path, LINK, parts, os.path.join(parts, "partition.json"),
        ["--max_steps", "30"], ["--max_steps", "12"])
    # scores of held-out true edges against uniform negatives (0.5: chance)
    assert alone["test_auc"] > 0.6, alone
    assert launched["test_auc"] > 0.55, launched
    assert len(re.findall(r"rank \d: held-out AUC", logs)) == 2


@pytest.fixture(scope="module")
def wordnet_hetero(tmp_path_factory):
    d = tmp_path_factory.mktemp("wnh")
    data, parts = str(d / "wnh"), str(d / "hparts")
    subprocess.run([RDPS, "dataset", "wordnet-hetero", data], check=True, capture_output=True)
    subprocess.run([RDPS, "partition", "--data", data, "-k", "2", "--out", parts],
                   check=True, capture_output=True)
    return parts


def test_rgcn_on_wordnet_hetero(wordnet_hetero, tmp_path):
    need_dgl()
    parts = wordnet_hetero
    alone, launched, logs = both_ways(
        tmp_path, RGCN, parts, os.path.join(parts, "partition.json"),
        ["--max_steps", "40"], ["--max_steps", "12"])
    # 45 classes (majority 0.12): 40 steps standalone reach ~0.7
    assert alone["test_acc"] > 0.5, alone
    assert launched["test_acc"] > 0.3, launched
    accs = re.findall(r"rank \d: Test accuracy ([0-9.]+)", logs)
    assert len(accs) == 2 and accs[0] == accs[1], accs  # DDP: one model


def test_launch_py_line(wordnet, tmp_path):
    """DGL's launch.py line, given to rdps launch as is: --workspace,
    --num_trainers, --num_samplers, --num_servers, --part_config (relative:
    in the workspace), --ip_config (DGL's 'IP PORT' lines), --extra_envs,
    --num_omp_threads and the training command as one string."""
    dgl = need_dgl()
    _, parts, _ = wordnet
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(parts, ws / "parts")
    base = free_base_port(2)
    ipc = tmp_path / "ip_config.txt"
    ipc.write_text("127.0.0.1 %d\n127.0.0.1 %d\n" % (base, base + 1))  # DGL's format
    line = ["--workspace", str(ws), "--num_trainers", "1", "--num_samplers", "1",
            "--num_servers", "1", "--part_config", "parts/partition.json",
            "--ip_config", str(ipc), "--extra_envs", "RDPS_TEST_EXTRA=yes", "OTHER=1",
            "--num_omp_threads", "1"]
    probe = ("%s -c 'import os; print(\"SEEN\", os.getcwd(), os.environ[\"RDPS_TEST_EXTRA\"], "
             "os.environ[\"OTHER\"], os.environ[\"RDPS_NUM_SAMPLERS\"], "
             "os.environ[\"OMP_NUM_THREADS\"])'" % PYTHON)
    r = subprocess.run([RDPS, "launch"] + line + ["--log_dir", str(tmp_path / "l1"), probe],
                       env=clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "launch.py's line, as rdps runs it" in r.stderr
    for t in (0, 1):
        out = (tmp_path / "l1" / ("trainer%d.log" % t)).read_text()
        assert "SEEN %s yes 1 1 1" % ws in out, out
    # the GraphSAGE example, its command line as a DGL user gives it
    cmd = "%s %s --graph_name wn --ip_config %s --part_config parts/partition.json %s " \
          "--max_steps 8 --json %s" % (PYTHON, SAGE, ipc, " ".join(FAST),
                                       tmp_path / "dist.json")
    r = subprocess.run([RDPS, "launch"] + line + ["--log_dir", str(tmp_path / "l2"), "--quiet",
                                                  "--transport", "tcp", cmd],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    logs = "".join((tmp_path / "l2" / f).read_text() for f in sorted(os.listdir(tmp_path / "l2")))
    assert r.returncode == 0, r.stderr + logs
    s = last_json(tmp_path / "dist.json")
    assert s["trainers"] == 2 and s["dgl"] == dgl.__version__ and s["steps"] == 8
    accs = re.findall(r"rank \d: Test accuracy ([0-9.]+)", logs)
    assert len(accs) == 2 and accs[0] == accs[1], accs
    got = re.findall(r"rank (\d): part (\d) of 2", logs)
    assert sorted(got) == [("0", "0"), ("1", "1")], got
