import rdps.distributed.dgl_compat  # noqa: F401  the one line: dgl.distributed is rdps's
# SPDX-License-Identifier: MIT
"""Distributed RGCN node classification on a heterogeneous graph, written as
a DGL user writes it (the structure of DGL's
examples/pytorch/rgcn/experimental/entity_classify_dist.py on ogbn-mag):
dgl.nn.HeteroGraphConv over every relation, the node type with features
projected, featureless types given learnable dgl.distributed.DistEmbedding
rows trained by dgl.distributed.optim.SparseAdam, the dense weights by DDP.

    rdps dataset wordnet-hetero wnh          # synsets (features, labels) + lemmas
    rdps partition --data wnh -k 2 --out hparts

    python examples/dgl/train_dist_rgcn.py --graph_name wnh --ip_config ip.txt \\
        --part_config hparts/partition.json                   # standalone
    rdps launch --ip_config ip.txt --num_client_proc 2 --transport tcp \\
        --server_arg=--graph --server_arg=hparts --exec -- \\
        python examples/dgl/train_dist_rgcn.py --graph_name wnh --ip_config ip.txt \\
        --part_config hparts/partition.json                   # 2 servers, 2 trainers

--json FILE appends trainer 0's figures (test accuracy, epoch time, sampled
edges/s) as a JSON line.
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


class DistEmbedLayer(nn.Module):
    """Input features of every node type: the 'feat' of a type that has it,
    projected to h_dim; a learnable DistEmbedding row for the others."""

    def __init__(self, g, h_dim, dgl_sparse_emb=True):
        super().__init__()
        self.h_dim = h_dim
        self.proj = nn.ModuleDict()
        self.embeds = {}
        for nt in g.ntypes:
            schemes = g.node_attr_schemes(nt)
            if "feat" in schemes:
                self.proj[nt] = nn.Linear(schemes["feat"].shape[0], h_dim)
            else:
                self.embeds[nt] = dgl.distributed.DistEmbedding(
                    g.num_nodes(nt), h_dim, name=nt + "_emb",
                    init_func=lambda shape, dtype: th.empty(shape, dtype=dtype).uniform_(-0.1, 0.1))

    def forward(self, g, input_nodes):
        out = {}
        for nt, ids in input_nodes.items():
            if nt in self.proj:
                out[nt] = self.proj[nt](g.nodes[nt].data["feat"][ids])
            else:
                out[nt] = self.embeds[nt](ids)
        return out


class EntityClassify(nn.Module):
    def __init__(self, rel_names, h_dim, out_dim, num_layers, dropout):
        super().__init__()
        self.layers = nn.ModuleList()
        dims = [h_dim] * num_layers + [out_dim]
        for a, b in zip(dims, dims[1:]):
            self.layers.append(dglnn.HeteroGraphConv(
                {r: dglnn.GraphConv(a, b, norm="right", allow_zero_in_degree=True)
                 for r in rel_names}, aggregate="sum"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = {k: self.dropout(F.relu(v)) for k, v in h.items()}
        return h


def evaluate(g, embed, model, nids, sampler, batch_size, category):
    loader = dgl.dataloading.DistNodeDataLoader(g, {category: nids}, sampler,
                                                batch_size=batch_size, shuffle=False)
    correct = total = 0
    with th.no_grad():
        for input_nodes, seeds, blocks in loader:
            logits = model(blocks, embed(g, input_nodes))[category]
            labels = g.nodes[category].data["label"][seeds[category]]
            correct += int((logits.argmax(1) == labels).sum())
            total += len(labels)
    return correct, total


def main(args):
    dgl.distributed.initialize(args.ip_config)
    if not args.standalone:
        th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)  # the same dense weights on every trainer
    category = args.category
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.nodes[category].data["train_mask"], pb,
                                           ntype=category, force_even=True)
    test_nid = dgl.distributed.node_split(g.nodes[category].data["test_mask"], pb,
                                          ntype=category, force_even=True)
    print("rank %d: %s; %d train, %d test %s nodes" % (g.rank(), g, len(train_nid),
                                                      len(test_nid), category), flush=True)
    labels = g.nodes[category].data["label"]
    n_classes = int(labels[0:g.num_nodes(category)].max()) + 1
    embed = DistEmbedLayer(g, args.n_hidden)
    model = EntityClassify(g.etypes, args.n_hidden, n_classes, args.n_layers, args.dropout)
    dense = list(model.parameters()) + list(embed.parameters())
    if not args.standalone:
        # relations into types the last layer does not output go unused
        model = th.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
        embed = th.nn.parallel.DistributedDataParallel(embed, find_unused_parameters=True)
    opt = th.optim.Adam(dense, lr=args.lr)
    emb_layer = embed.module if hasattr(embed, "module") else embed
    sparse_opt = dgl.distributed.optim.SparseAdam(list(emb_layer.embeds.values()),
                                                  lr=args.sparse_lr)
    fanouts = [int(f) for f in args.fanout.split(",")]
    sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)
    loader = dgl.dataloading.DistNodeDataLoader(g, {category: train_nid}, sampler,
                                                batch_size=args.batch_size, shuffle=True)
    th.manual_seed(args.seed + g.rank())
    stats = {}
    for epoch in range(args.num_epochs):
        tic = time.time()
        steps = edges = 0
        loss_sum = 0.0
        for input_nodes, seeds, blocks in loader:
            h = embed(g, input_nodes)
            logits = model(blocks, h)[category]
            loss = F.cross_entropy(logits, labels[seeds[category]])
            opt.zero_grad()
            sparse_opt.zero_grad()
            loss.backward()
            opt.step()
            sparse_opt.step()
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
    m = model.module if hasattr(model, "module") else model
    m.eval()
    correct, total = evaluate(g, emb_layer, m, test_nid, sampler, args.batch_size_eval,
                              category)
    if not args.standalone:
        t = th.tensor([correct, total], dtype=th.float64)
        th.distributed.all_reduce(t)
        correct, total = t.tolist()
    stats["test_acc"] = correct / max(1, total)
    print("rank %d: Test accuracy %.4f" % (g.rank(), stats["test_acc"]), flush=True)
    if args.json and g.rank() == 0:
        stats.update(trainers=int(os.environ.get("WORLD_SIZE", "1")), dgl=dgl.__version__)
        with open(args.json, "a") as f:
            f.write(json.dumps(stats) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed RGCN (DGL's style)")
    parser.add_argument("--graph_name", type=str, default="wnh")
    parser.add_argument("--ip_config", type=str, default="ip_config.txt")
    parser.add_argument("--part_config", type=str, required=True)
    parser.add_argument("--category", type=str, default="synset",
                        help="the node type to classify")
    parser.add_argument("--num_epochs", type=int, default=1)
    parser.add_argument("--n_hidden", type=int, default=32)
    parser.add_argument("--n_layers", type=int, default=2)
    parser.add_argument("--fanout", type=str, default="4,4")
    parser.add_argument("--batch_size", type=int, default=500)
    parser.add_argument("--batch_size_eval", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--sparse_lr", type=float, default=0.02)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max_steps", type=int, default=0,
                        help="stop each epoch after this many steps (0: the whole epoch)")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--local_rank", type=int, help="torch.distributed's; unused")
    parser.add_argument("--json", type=str, help="append trainer 0's figures to this file")
    args = parser.parse_args()
    if "RDPS_IP_CONFIG" not in os.environ and "DGL_ROLE" not in os.environ:
        args.standalone = True
    main(args)
