#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Node classification on WordNet 3.0 (rdps dataset wordnet-nodes: synsets,
their pointers as typed edges, the lexicographer file as the label) with a
graph the servers hold: DGL's distributed GraphSAGE and RGCN examples on
rdps.

    rdps dataset wordnet-nodes wn
    rdps partition --data wn -k 2 --out parts --balance_train --balance_edges

standalone (the graph served by in-process servers, one per part):

    /usr/bin/python3 examples/wordnet_gnn.py --part_config parts --model sage

distributed, 2 servers (one per part) and 2 trainers, the same script:

    echo "127.0.0.1 30050 2" > ip.txt
    rdps launch --ip_config ip.txt --num_client_proc 2 --transport tcp \\
        --server_arg=--graph --server_arg=parts \\
        --exec -- /usr/bin/python3 examples/wordnet_gnn.py --part_config parts --model sage

--model sage:  GraphSAGE, mean aggregator, 2 layers, fanouts 10 and 25
               (DGL's examples/distributed/graphsage)
--model rgcn:  RGCN over the 26 pointer types (basis decomposition), its
               input the features and a learnable embedding of every node
               (DistEmbedding + SparseAdagrad, as DGL's ogbn-mag example)
--model mlp:   the features alone, no graph (the baseline a GNN must beat)

Data-parallel as DGL's examples: each trainer keeps the dense weights, their
gradients are averaged over the trainers through the servers
(dist.average_gradients) and every trainer takes the same Adam step; every
trainer takes its share of the training nodes (node_split)
and prints, per epoch, the loss, validation and test accuracy (over all
trainers' nodes), time and sampled edges/s. --json FILE appends the last
epoch's figures as a JSON line (trainer 0), with test_acc_last3, the mean
test accuracy of the last 3 epochs (what tests/python/test_gnn.py compares).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import rdps.distributed as dist


class SAGEConv(nn.Module):
    """h_dst' = W_self h_dst + W_neigh mean(h_src over in-edges)."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc_self = nn.Linear(d_in, d_out)
        self.fc_neigh = nn.Linear(d_in, d_out, bias=False)

    def forward(self, block, h):
        esrc, edst = block.edges()
        nd = block.num_dst_nodes()
        agg = torch.zeros((nd, h.shape[1]), dtype=h.dtype).index_add_(0, edst, h[esrc])
        deg = torch.bincount(edst, minlength=nd).clamp(min=1).unsqueeze(1).to(h.dtype)
        return self.fc_self(h[:nd]) + self.fc_neigh(agg / deg)


class RelGraphConv(nn.Module):
    """h_dst' = W_0 h_dst + mean over in-edges of W_r h_src (r the edge's
    type), W_r = sum_b a_rb V_b (basis decomposition)."""

    def __init__(self, d_in, d_out, num_rels, num_bases):
        super().__init__()
        self.bases = nn.Parameter(torch.empty(num_bases, d_in, d_out))
        self.coef = nn.Parameter(torch.empty(num_rels, num_bases))
        self.loop = nn.Linear(d_in, d_out)
        nn.init.xavier_uniform_(self.bases)
        nn.init.xavier_uniform_(self.coef)

    def forward(self, block, h):
        esrc, edst = block.edges()
        et = block.edata[dist.graph.ETYPE]
        nd = block.num_dst_nodes()
        w = torch.einsum("rb,bio->rio", self.coef, self.bases)     # (rels, in, out)
        agg = torch.zeros((nd, w.shape[2]), dtype=h.dtype)
        # One product per type present: edges x in x out in all (a product
        # per source node and basis would be nodes x bases x in x out).
        order = torch.argsort(et)
        types, counts = torch.unique_consecutive(et[order], return_counts=True)
        at = 0
        for r, c in zip(types.tolist(), counts.tolist()):
            e = order[at:at + c]
            at += c
            agg = agg.index_add(0, edst[e], h[esrc[e]] @ w[r])
        deg = torch.bincount(edst, minlength=nd).clamp(min=1).unsqueeze(1).to(h.dtype)
        return self.loop(h[:nd]) + agg / deg


class GNN(nn.Module):
    def __init__(self, layers, dropout):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


class MLP(nn.Module):
    def __init__(self, d_in, hidden, classes, dropout):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, classes))

    def forward(self, blocks, h):
        return self.net(h)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part_config", required=True,
                    help="the graph partition (its directory or partition.json)")
    ap.add_argument("--model", choices=["sage", "rgcn", "mlp"], default="sage")
    ap.add_argument("--fan_out", default="10,25", help="fanouts, input layer first (10,25)")
    ap.add_argument("--eval_fan_out", default=None, help="fanouts of evaluation (--fan_out)")
    ap.add_argument("--sample", choices=["rpc", "read"], default="rpc",
                    help="rpc: the seeds' servers sample; read: one-sided reads")
    ap.add_argument("--num_hidden", type=int, default=128)
    ap.add_argument("--num_bases", type=int, default=8, help="RGCN bases")
    ap.add_argument("--emb_dim", type=int, default=32, help="RGCN's learnable node embedding")
    ap.add_argument("--num_epochs", type=int, default=5)
    ap.add_argument("--batch_size", type=int, default=1000,
                    help="seeds per step of all trainers together (each takes its share)")
    ap.add_argument("--lr", type=float, default=0.03,
                    help="Adam's lr of the dense weights")
    ap.add_argument("--sparse_lr", type=float, default=0.05,
                    help="SparseAdagrad's lr of RGCN's node embedding (lr/T each)")
    ap.add_argument("--dropout", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="append the results as a JSON line here")
    ap.add_argument("--ip_config", default=None, help="the job's servers ($RDPS_IP_CONFIG)")
    return ap.parse_args(argv)


def fanouts(text):
    try:
        f = [int(x) for x in text.split(",")]
    except ValueError:
        f = []
    if not f or min(f) < 1:
        sys.exit("wordnet_gnn.py: fanouts '%s': give positive integers, e.g. 10,25" % text)
    return f


def dataset_meta(part_config):
    d = part_config if os.path.isdir(part_config) else os.path.dirname(part_config)
    with open(os.path.join(d, "partition.json")) as f:
        meta = json.load(f)
    ds = meta.get("dataset", {})
    return meta["feat_dim"], ds["num_classes"], ds.get("num_etypes", 1)


def main(argv):
    args = parse_args(argv)
    fan = fanouts(args.fan_out)
    eval_fan = fanouts(args.eval_fan_out) if args.eval_fan_out else fan
    feat_dim, classes, num_rels = dataset_meta(args.part_config)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    dist.initialize(args.ip_config)
    rank, ntrainers = dist.get_rank(), dist.get_num_trainers()
    g = dist.DistGraph("wordnet", part_config=args.part_config)
    pb = g.get_partition_book()
    train = dist.node_split(g.ndata["train_mask"], pb)
    val = dist.node_split(g.ndata["val_mask"], pb)
    test = dist.node_split(g.ndata["test_mask"], pb)
    feat, label = g.ndata["feat"], g.ndata["label"]

    emb, sparse_opt = None, None
    d_in = feat_dim
    if args.model == "rgcn":
        emb = dist.DistEmbedding(g.num_nodes(), args.emb_dim, name="wordnet_node_emb",
                                 init_func=dist.uniform_init(0.1, seed=args.seed))
        sparse_opt = dist.SparseAdagrad([emb], lr=args.sparse_lr / dist.get_num_trainers())
        d_in += args.emb_dim
    h = args.num_hidden
    if args.model == "sage":
        model = GNN([SAGEConv(d_in, h), SAGEConv(h, classes)], args.dropout)
    elif args.model == "rgcn":
        model = GNN([RelGraphConv(d_in, h, num_rels, args.num_bases),
                     RelGraphConv(h, classes, num_rels, args.num_bases)], args.dropout)
    else:
        model = MLP(d_in, h, classes, args.dropout)
        fan = eval_fan = [1] * 2  # sampled but unused: the seeds' own features only
    # Data-parallel as DGL's examples (DistributedDataParallel): every
    # trainer starts from the same weights (the same seed), averages the
    # gradients over the trainers (dist.average_gradients, through the
    # servers) and takes the same Adam step. Each takes 1/T of the batch,
    # so a step is the standalone run's step on the same number of seeds.
    batch = max(1, args.batch_size // ntrainers)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # Every trainer takes the same number of steps (the collective needs
    # all of them): node_split gives them sizes within one of each other.
    num_steps = int(dist.allreduce([len(train)])[0]) // ntrainers // batch
    sampler = dist.NeighborSampler(fan, way=args.sample, seed=args.seed * 1000 + rank)
    eval_sampler = dist.NeighborSampler(eval_fan, way=args.sample, seed=args.seed * 1000 + 500 + rank)
    loader = dist.DistNodeDataLoader(g, train, sampler, batch_size=batch, shuffle=True,
                                     seed=args.seed * 1000 + rank)

    def inputs(input_nodes, seeds):
        x = feat[seeds] if args.model == "mlp" else feat[input_nodes]
        if emb is not None:
            x = torch.cat([x, emb(input_nodes)], dim=1)
        return x

    def accuracy(nids):
        model.eval()
        correct = 0
        with torch.no_grad():
            for input_nodes, seeds, blocks in dist.DistNodeDataLoader(
                    g, nids, eval_sampler, batch_size=4 * args.batch_size):
                pred = model(blocks, inputs(input_nodes, seeds)).argmax(1)
                correct += int((pred == label[seeds]).sum())
        model.train()
        c, n = dist.allreduce([correct, len(nids)])
        return c / max(1.0, n)

    if rank == 0:
        print("wordnet_gnn: %s over %s (%s sampling, fanouts %s), %d trainer(s), %d server(s): "
              "%d nodes, %d edges, %d classes; trainer 0 has %d training nodes" %
              (args.model, dist.get_transport(), args.sample, fan, ntrainers,
               dist.get_num_servers(), g.num_nodes(), g.num_edges(), classes, len(train)),
              flush=True)
    t_start = time.time()
    result, test_accs = {}, []
    for epoch in range(args.num_epochs):
        t0, sampled0 = time.time(), sampler.edges_sampled
        loss_sum, steps = 0.0, 0
        for _, (input_nodes, seeds, blocks) in zip(range(num_steps), loader):
            logits = model(blocks, inputs(input_nodes, seeds))
            loss = F.cross_entropy(logits, label[seeds])
            opt.zero_grad()
            if sparse_opt:
                sparse_opt.zero_grad()
            loss.backward()
            dist.average_gradients(model.parameters())
            opt.step()
            if sparse_opt:
                sparse_opt.step()
            loss_sum += float(loss)
            steps += 1
        t_train = time.time() - t0
        edges = sampler.edges_sampled - sampled0
        val_acc, test_acc = accuracy(val), accuracy(test)
        loss_all, steps_all, edges_all = dist.allreduce([loss_sum, steps, edges])
        test_accs.append(test_acc)
        result = {"model": args.model, "sample": args.sample, "transport": dist.get_transport(),
                  "trainers": ntrainers, "epoch": epoch, "loss": loss_all / max(1, steps_all),
                  "val_acc": val_acc, "test_acc": test_acc, "epoch_seconds": t_train,
                  "sampled_edges_per_s": edges_all / t_train if args.model != "mlp" else 0.0,
                  "test_acc_last3": sum(test_accs[-3:]) / len(test_accs[-3:]),
                  "wall_seconds": time.time() - t_start}
        if rank == 0:
            print("epoch %d: loss %.4f, val acc %.4f, test acc %.4f, %.1f s (%d steps), "
                  "%.0f sampled edges/s" % (epoch, result["loss"], val_acc, test_acc, t_train,
                                            steps, result["sampled_edges_per_s"]), flush=True)
    if rank == 0 and args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
    dist.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
