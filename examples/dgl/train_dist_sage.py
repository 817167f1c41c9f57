import rdps.distributed.dgl_compat  # noqa: F401  the one line: dgl.distributed is rdps's
# SPDX-License-Identifier: MIT
"""Distributed GraphSAGE node classification written as a DGL user writes it
(DGL's dgl.distributed, dgl.dataloading and dgl.nn; the structure of DGL's
examples/distributed/graphsage), running on rdps because of the line above.
Without it, the same script is a DGL script.

    rdps dataset wordnet-nodes wn
    rdps partition --data wn -k 2 --out parts --balance_train --balance_edges

standalone (as DGL: not started by a launcher, the graph served in-process):

    python examples/dgl/train_dist_sage.py --graph_name wn --ip_config ip.txt \\
        --part_config parts/partition.json

distributed (2 servers, 2 trainers; rdps.distributed.initialize sets
torch.distributed's variables, so DDP runs over gloo):

    rdps launch --ip_config ip.txt --num_client_proc 2 --transport tcp \\
        --server_arg=--graph --server_arg=parts --exec -- \\
        python examples/dgl/train_dist_sage.py --graph_name wn --ip_config ip.txt \\
        --part_config parts/partition.json

Prints per epoch the loss, time, sampled edges/s and feature bytes/s, then
the test accuracy of layer-wise inference over the whole graph (each layer
written into a DistTensor assigned as g.ndata, as DGL's example does).
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


class DistSAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        self.n_hidden, self.n_classes = n_hidden, n_classes
        dims = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(dglnn.SAGEConv(a, b, "mean") for a, b in zip(dims, dims[1:]))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h

    def inference(self, g, x, batch_size, device):
        """Layer by layer over every node: each layer's output for all nodes
        in a DistTensor (g.ndata['h'] ...), read back as the next input."""
        nodes = dgl.distributed.node_split(th.ones(g.num_nodes(), dtype=th.bool),
                                           g.get_partition_book(), force_even=True)
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            y = dgl.distributed.DistTensor(
                (g.num_nodes(), self.n_classes if last else self.n_hidden), th.float32,
                "h_last" if last else "h%d" % i, persistent=True)
            g.ndata["h_last" if last else "h%d" % i] = y
            sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
            loader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler,
                                                        batch_size=batch_size, shuffle=False,
                                                        drop_last=False)
            for input_nodes, output_nodes, blocks in loader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h = layer(block, h)
                if not last:
                    h = F.relu(h)
                y[output_nodes] = h.cpu()
            x = y
            g.barrier()
        return y


def evaluate(pred, labels, nids):
    return (pred[nids].argmax(1) == labels[nids]).float().sum().item(), len(nids)


def run(args, device, g):
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    local = (pb.nid2partid(train_nid) == pb.partid).float().mean().item()
    print("rank %d: part %d of %d, %d train nodes (%.3f of them in its part), %d test" %
          (g.rank(), pb.partid, pb.num_partitions(), len(train_nid), local, len(test_nid)),
          flush=True)
    fanouts = [int(f) for f in args.fan_out.split(",")]
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DistNodeDataLoader(g, train_nid, sampler,
                                                batch_size=args.batch_size, shuffle=True,
                                                drop_last=False)
    feat, labels = g.ndata["feat"], g.ndata["label"]
    n_classes = int(th.max(labels[0:g.num_nodes()])) + 1
    model = DistSAGE(feat.shape[1], args.num_hidden, n_classes, len(fanouts), args.dropout)
    model = model.to(device)
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
    opt = th.optim.Adam(model.parameters(), lr=args.lr)
    row_bytes = feat.shape[1] * 4
    stats = {}
    for epoch in range(args.num_epochs):
        tic = time.time()
        edges = feat_bytes = steps = 0
        loss_sum = 0.0
        sample_time = 0.0
        t_s = time.time()
        for step, (input_nodes, seeds, blocks) in enumerate(loader):
            sample_time += time.time() - t_s
            blocks = [b.to(device) for b in blocks]
            x = feat[input_nodes].to(device)
            y = labels[seeds].to(device)
            loss = F.cross_entropy(model(blocks, x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            edges += sum(b.num_edges() for b in blocks)
            feat_bytes += len(input_nodes) * row_bytes
            loss_sum += loss.item()
            steps += 1
            if args.max_steps and steps >= args.max_steps:
                break
            t_s = time.time()
        g.barrier()
        dt = time.time() - tic
        stats = {"epoch": epoch, "epoch_time": dt, "steps": steps,
                 "loss": loss_sum / max(1, steps), "sampled_edges_per_s": edges / dt,
                 "feature_bytes_per_s": feat_bytes / dt, "sample_time": sample_time}
        print("rank %d epoch %d: loss %.4f, %d steps in %.2f s, %.0f sampled edges/s, "
              "%.1f MB/s of features" % (g.rank(), epoch, stats["loss"], steps, dt,
                                         stats["sampled_edges_per_s"],
                                         stats["feature_bytes_per_s"] / 1e6), flush=True)
    module = model.module if hasattr(model, "module") else model
    module.eval()
    with th.no_grad():
        pred = module.inference(g, feat, args.batch_size_eval, device)
    correct, total = evaluate(pred, labels, test_nid)
    if not args.standalone:
        t = th.tensor([correct, total], dtype=th.float64)
        th.distributed.all_reduce(t)
        correct, total = t.tolist()
    stats["test_acc"] = correct / total
    stats["local_train_fraction"] = local
    print("rank %d: Test accuracy %.4f" % (g.rank(), stats["test_acc"]), flush=True)
    return stats


def main(args):
    dgl.distributed.initialize(args.ip_config)
    if not args.standalone:
        th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print("rank %d: %s" % (g.rank(), g), flush=True)
    th.manual_seed(args.seed + g.rank())
    stats = run(args, th.device("cpu"), g)
    if args.json and g.rank() == 0:
        stats.update(trainers=int(os.environ.get("WORLD_SIZE", "1")), dgl=dgl.__version__)
        with open(args.json, "a") as f:
            f.write(json.dumps(stats) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed GraphSAGE (DGL's style)")
    parser.add_argument("--graph_name", type=str, default="wn")
    parser.add_argument("--ip_config", type=str, default="ip_config.txt")
    parser.add_argument("--part_config", type=str, required=True)
    parser.add_argument("--num_epochs", type=int, default=1)
    parser.add_argument("--num_hidden", type=int, default=64)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max_steps", type=int, default=0,
                        help="stop each epoch after this many steps (0: the whole epoch)")
    parser.add_argument("--standalone", action="store_true",
                        help="no torch.distributed (set when not started by a launcher)")
    parser.add_argument("--local_rank", type=int, help="torch.distributed's; unused")
    parser.add_argument("--json", type=str, help="append trainer 0's figures to this file")
    args = parser.parse_args()
    if "RDPS_IP_CONFIG" not in os.environ and "DGL_ROLE" not in os.environ:
        args.standalone = True
    main(args)
