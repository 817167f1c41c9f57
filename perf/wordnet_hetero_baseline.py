# SPDX-License-Identifier: MIT
"""Baselines of rdps dataset wordnet-hetero (README, Datasets): full-graph
training with DGL on one machine, no rdps involved, so distributed runs have
a figure to be compared with.

  - MLP: the synsets' gloss features only (no graph);
  - RGCN: 2 layers of DGL's HeteroGraphConv (a GraphConv per edge type,
    summed), learnable embeddings for the featureless lemmas, the features
    projected for the synsets.

Test accuracy at the epoch of best validation accuracy. Needs DGL (the venv of
deploy/install-venv.sh):

  /opt/rdps-venv/bin/python perf/wordnet_hetero_baseline.py DATASET_DIR [--epochs 60]
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load(d):
    import dgl

    with open(os.path.join(d, "graph.json")) as f:
        meta = json.load(f)
    edges = {}
    for e in meta["etypes"]:
        a = np.load(os.path.join(d, e["edges"]))
        edges[(e["src"], e["name"], e["dst"])] = (torch.from_numpy(a[:, 0]),
                                                 torch.from_numpy(a[:, 1]))
    g = dgl.heterograph(edges, num_nodes_dict={t["name"]: t["num_nodes"]
                                               for t in meta["ntypes"]})
    for t in meta["ntypes"]:
        for name, file in t["data"].items():
            g.nodes[t["name"]].data[name] = torch.from_numpy(np.load(os.path.join(d, file)))
    return g, meta["num_classes"]


class RGCN(nn.Module):
    def __init__(self, g, in_dim, hidden, classes):
        import dgl.nn as dglnn

        super().__init__()
        self.emb = nn.Embedding(g.num_nodes("lemma"), hidden)
        nn.init.normal_(self.emb.weight, std=0.1)
        self.proj = nn.Linear(in_dim, hidden)
        rels = g.canonical_etypes
        self.l1 = dglnn.HeteroGraphConv({c: dglnn.GraphConv(hidden, hidden, norm="right",
                                                            allow_zero_in_degree=True)
                                         for c in rels}, aggregate="sum")
        self.l2 = dglnn.HeteroGraphConv({c: dglnn.GraphConv(hidden, classes, norm="right",
                                                            allow_zero_in_degree=True)
                                         for c in rels}, aggregate="sum")

    def forward(self, g, feat):
        h = {"synset": self.proj(feat), "lemma": self.emb.weight}
        h = {k: F.relu(v) for k, v in self.l1(g, h).items()}
        return self.l2(g, h)["synset"]


def train(model, forward, label, masks, epochs, lr, name):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best = (0.0, 0.0, 0)
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        logits = forward()
        loss = F.cross_entropy(logits[masks[0]], label[masks[0]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = forward().argmax(1)
        acc = [float((pred[m] == label[m]).float().mean()) for m in masks]
        if acc[1] > best[0]:
            best = (acc[1], acc[2], ep)
        if ep % 10 == 9:
            print("%s epoch %d: loss %.3f, val %.4f, test %.4f (%.0f s)" %
                  (name, ep + 1, float(loss), acc[1], acc[2], time.time() - t0), flush=True)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--skip-mlp", action="store_true")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    g, classes = load(a.data)
    s = g.nodes["synset"].data
    feat, label = s["feat"], s["label"]
    masks = [s[m].bool() for m in ("train_mask", "val_mask", "test_mask")]
    mlp = nn.Sequential(nn.Linear(feat.shape[1], a.hidden), nn.ReLU(),
                        nn.Linear(a.hidden, classes))
    t0 = time.time()
    val, test, ep = (0.0, 0.0, 0) if a.skip_mlp else train(mlp, lambda: mlp(feat), label, masks, a.epochs * 4, 0.01, "MLP")
    print("MLP (gloss features only): test accuracy %.4f (val %.4f, epoch %d, %.0f s)" %
          (test, val, ep, time.time() - t0), flush=True)
    model = RGCN(g, feat.shape[1], a.hidden, classes)
    t0 = time.time()
    val, test, ep = train(model, lambda: model(g, feat), label, masks, a.epochs, 0.01, "RGCN")
    print("RGCN (2 layers, %d etypes, lemma embeddings): test accuracy %.4f (val %.4f, "
          "epoch %d, %.0f s)" % (len(g.canonical_etypes), test, val, ep, time.time() - t0))


if __name__ == "__main__":
    main()
