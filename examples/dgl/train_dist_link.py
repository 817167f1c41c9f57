import rdps.distributed.dgl_compat  # noqa: F401  the one line: dgl.distributed is rdps's
# SPDX-License-Identifier: MIT
"""Distributed unsupervised GraphSAGE (link prediction) written as a DGL
user writes it (the structure of DGL's
examples/distributed/graphsage/train_dist_unsupervised.py):
dgl.dataloading.DistEdgeDataLoader over the training edges with
negative_sampler.Uniform and exclude='self', a dot-product score, binary
cross-entropy of positive against negative pairs, DDP.

    rdps dataset wordnet-nodes wn
    rdps partition --data wn -k 2 --out parts --balance_edges
    python examples/dgl/train_dist_link.py --graph_name wn --ip_config ip.txt \\
        --part_config parts/partition.json                    # standalone
    rdps launch ... --exec -- python examples/dgl/train_dist_link.py ...   # distributed

Reports the loss, sampled edges/s and, on held-out edges of each trainer
(edge_split of the last 10% of edge ids, kept out of training), the AUC of
the scores of true edges against uniform negatives (0.5: chance).
--json FILE appends trainer 0's figures as a JSON line.
"""
import argparse
import json
import os
import time

import dgl
import dgl.nn.pytorch as dglnn
import torch as th
import torch.nn as nn
import torch.nn.functional as F


class SAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_layers):
        super().__init__()
        dims = [in_feats] + [n_hidden] * n_layers
        self.layers = nn.ModuleList(dglnn.SAGEConv(a, b, "mean") for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = F.relu(h)
        return h


class HeldOutSampler(dgl.dataloading.MultiLayerNeighborSampler):
    """A neighbour sampler that never samples the held-out edges."""

    def __init__(self, fanouts, held_out):
        super().__init__(fanouts)
        self.held_out = held_out

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        ex = self.held_out if exclude_eids is None else th.cat([exclude_eids, self.held_out])
        return super().sample_blocks(g, seed_nodes, exclude_eids=ex)


def score(pair_graph, h):
    with pair_graph.local_scope():
        pair_graph.ndata["h"] = h
        pair_graph.apply_edges(dgl.function.u_dot_v("h", "h", "s"))
        return pair_graph.edata["s"].reshape(-1)


def auc(pos, neg):
    """P(score of a true edge > score of a negative), ties half."""
    s = th.cat([pos, neg])
    order = th.argsort(s)
    ranks = th.empty_like(order, dtype=th.float64)
    ranks[order] = th.arange(1, len(s) + 1, dtype=th.float64)
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) /
                 (len(pos) * len(neg)))


def main(args):
    dgl.distributed.initialize(args.ip_config)
    if not args.standalone:
        th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)
    pb = g.get_partition_book()
    held = th.zeros(g.num_edges(), dtype=th.bool)
    held[th.randperm(g.num_edges())[: g.num_edges() // 10]] = True
    train_eids = dgl.distributed.edge_split(~held, pb, force_even=True)
    test_eids = dgl.distributed.edge_split(held, pb, force_even=True)
    print("rank %d: %d train edges, %d held out" % (g.rank(), len(train_eids), len(test_eids)),
          flush=True)
    fanouts = [int(f) for f in args.fan_out.split(",")]
    # The held-out edges never feed a block.
    sampler = HeldOutSampler(fanouts, th.nonzero(held).reshape(-1))
    neg = dgl.dataloading.negative_sampler.Uniform(args.num_negs)
    loader = dgl.dataloading.DistEdgeDataLoader(
        g, train_eids, sampler, negative_sampler=neg, exclude="self",
        batch_size=args.batch_size, shuffle=True, drop_last=False)
    feat = g.ndata["feat"]
    model = SAGE(feat.shape[1], args.num_hidden, len(fanouts))
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
    opt = th.optim.Adam(model.parameters(), lr=args.lr)
    th.manual_seed(args.seed + g.rank())
    stats = {}
    for epoch in range(args.num_epochs):
        tic = time.time()
        steps = edges = 0
        loss_sum = 0.0
        for input_nodes, pos_graph, neg_graph, blocks in loader:
            h = model(blocks, feat[input_nodes])
            ps, ns = score(pos_graph, h), score(neg_graph, h)
            loss = F.binary_cross_entropy_with_logits(
                th.cat([ps, ns]), th.cat([th.ones_like(ps), th.zeros_like(ns)]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            edges += sum(b.num_edges() for b in blocks)
            loss_sum += loss.item()
            if args.max_steps and steps >= args.max_steps:
                break
        g.barrier()
        dt = time.time() - tic
        stats = {"epoch": epoch, "epoch_time": dt, "steps": steps,
                 "loss": loss_sum / max(1, steps), "sampled_edges_per_s": edges / dt}
        print("rank %d epoch %d: loss %.4f, %d steps in %.2f s, %.0f sampled edges/s" %
              (g.rank(), epoch, stats["loss"], steps, dt, stats["sampled_edges_per_s"]),
              flush=True)
    # Held-out edges: their score against negatives, blocks without them.
    m = model.module if hasattr(model, "module") else model
    m.eval()
    ev = dgl.dataloading.DistEdgeDataLoader(
        g, test_eids[: args.eval_edges], sampler, negative_sampler=neg, batch_size=1000)
    pos_s, neg_s = [], []
    with th.no_grad():
        for input_nodes, pos_graph, neg_graph, blocks in ev:
            h = m(blocks, feat[input_nodes])
            pos_s.append(score(pos_graph, h))
            neg_s.append(score(neg_graph, h))
    stats["test_auc"] = auc(th.cat(pos_s), th.cat(neg_s))
    print("rank %d: held-out AUC %.4f" % (g.rank(), stats["test_auc"]), flush=True)
    if args.json and g.rank() == 0:
        stats.update(trainers=int(os.environ.get("WORLD_SIZE", "1")), dgl=dgl.__version__)
        with open(args.json, "a") as f:
            f.write(json.dumps(stats) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed link prediction (DGL's style)")
    parser.add_argument("--graph_name", type=str, default="wn")
    parser.add_argument("--ip_config", type=str, default="ip_config.txt")
    parser.add_argument("--part_config", type=str, required=True)
    parser.add_argument("--num_epochs", type=int, default=1)
    parser.add_argument("--num_hidden", type=int, default=64)
    parser.add_argument("--fan_out", type=str, default="5,10")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--num_negs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval_edges", type=int, default=5000)
    parser.add_argument("--max_steps", type=int, default=0,
                        help="stop each epoch after this many steps (0: the whole epoch)")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--local_rank", type=int, help="torch.distributed's; unused")
    parser.add_argument("--json", type=str, help="append trainer 0's figures to this file")
    args = parser.parse_args()
    if "RDPS_IP_CONFIG" not in os.environ and "DGL_ROLE" not in os.environ:
        args.standalone = True
    main(args)
