# SPDX-License-Identifier: MIT
"""One trainer of test_launch.py's job, run by 'rdps launch --exec':
initialize() from the launcher's environment, then collectives across the
trainers; writes what it saw to OUT/rank<R>.json (the test checks it)."""
import json
import os
import sys

import numpy as np
import torch

import rdps
import rdps.distributed as dist

out_dir = sys.argv[1]
seen = {"env": {k: os.environ.get(k) for k in ("RDPS_IP_CONFIG", "RDPS_RANK",
                                               "RDPS_NUM_TRAINERS", "RDPS_NUM_SERVERS",
                                               "RDPS_TRANSPORT")}}
dist.initialize(barrier_timeout=60)  # a job that went wrong fails, not hangs
rank, n = dist.get_rank(), dist.get_num_trainers()

if len(sys.argv) > 2 and sys.argv[2] == "fail":
    # Trainer 1 dies of an exception (once both are in the job): it leaves
    # without the final barrier, so trainer 0's next barrier fails at once
    # (not after barrier_timeout).
    dist.barrier()
    if rank == 1:
        raise RuntimeError("trainer 1 fails on purpose")
    try:
        dist.barrier()
        seen["barrier"] = "passed"
    except rdps.RdpsError as e:
        seen["barrier"] = [e.errno, e.message]
    with open(os.path.join(out_dir, "rank0.json"), "w") as f:
        json.dump(seen, f)
    sys.exit(0)
seen.update(rank=rank, num_trainers=n, num_servers=dist.get_num_servers(),
            transport=dist.get_transport(), standalone=dist.is_standalone())

# Collective creation with an init_func: trainer 0 writes it, once.
calls = []


def init(shape, dtype):
    calls.append(list(shape))
    return torch.arange(shape[0] * 2, dtype=dtype).reshape(shape) + 1000


t = dist.DistTensor((500, 2), torch.int64, name="shared", init_func=init)
seen["init_rows_ok"] = bool(torch.equal(t[0:500], torch.arange(1000).reshape(500, 2) + 1000))
again = dist.DistTensor((500, 2), torch.int64, name="shared", init_func=init)
seen["init_calls"] = calls
seen["same_table"] = again.table_id == t.table_id

# Each trainer writes its row; after a barrier each sees both.
t[[rank]] = torch.tensor([[rank, -rank]])
dist.barrier()
seen["rows_after_barrier"] = t[list(range(n))].tolist()

# A mask in a DistTensor (uint8), made by trainer 0's init_func; each
# trainer's share of its set ids.
mask_np = (np.arange(1001) % 3 == 0) | (np.arange(1001) % 7 == 0)
mask = dist.DistTensor((1001,), torch.uint8, name="train_mask",
                       init_func=lambda s, d: torch.from_numpy(mask_np.astype(np.uint8)))
seen["node_split"] = dist.node_split(mask).tolist()
seen["edge_split"] = dist.edge_split(mask_np, force_even=False).tolist()

# SparseAdagrad with both trainers pushing: each its own rows (r, r+2, ...),
# compared with torch.optim.Adagrad on a dense copy of those rows.
emb = dist.DistEmbedding(40, 4, name="emb", init_func=dist.uniform_init(0.2, seed=9))
opt = dist.optim.SparseAdagrad([emb], lr=0.1)
start = emb.weight[0:40]
dense = start.clone().requires_grad_(True)
ref = torch.optim.Adagrad([dense], lr=0.1)
gen = torch.Generator().manual_seed(rank)
mine = torch.arange(rank, 40, n)
for step in range(5):
    ids = mine[torch.randint(0, len(mine), (30,), generator=gen)]
    c = torch.randn(4, generator=gen)
    opt.zero_grad()
    ((emb(ids) * c).sum(-1) ** 2).sum().backward()
    opt.step()
    ref.zero_grad()
    ((dense[ids] * c).sum(-1) ** 2).sum().backward()
    ref.step()
dist.barrier()
final = emb.weight[0:40]
seen["adagrad_max_err_own_rows"] = float((final[mine] - dense.detach()[mine]).abs().max())
seen["final_rows"] = final.tolist()
seen["start_rows"] = start.tolist()
seen["allreduce"] = dist.allreduce([rank + 1.0, 2.0])

with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
    json.dump(seen, f)
if rank == 0:
    dist.finalize()  # the last barrier, then trainer 0 shuts the servers down
# trainer 1 leaves through finalize() at exit (atexit)
