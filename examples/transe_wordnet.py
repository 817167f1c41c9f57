#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""TransE on WordNet (WN18) in PyTorch, its embeddings in rdps.

The entity and relation embeddings are DistEmbeddings trained with
SparseAdagrad, as a DGL user writes them with dgl.distributed; the same
script runs standalone (servers inside this process) and distributed:

    build/rdps dataset wordnet data/wn18
    PYTHONPATH=python /usr/bin/python3 examples/transe_wordnet.py --data data/wn18
    printf '127.0.0.1 30050 2\\n' > ip_config.txt
    PYTHONPATH=python build/rdps launch --ip_config ip_config.txt --num_client_proc 2 \\
        --exec -- /usr/bin/python3 examples/transe_wordnet.py --data data/wn18

Each trainer takes its share of the training triples (edge_split of a mask
of all of them), samples batches of it with negatives shared by the batch
(the batch's heads or tails replaced by uniformly drawn entities, as
DGL-KE's chunked sampler with one chunk), and scores them with TransE_l2,
gamma - ||h + r - t||, under DGL-KE's logsigmoid loss. After each epoch the
trainers rank a fixed sample of the test triples against every entity,
filtered by every train, valid and test triple (DGL-KE's filtered ranking,
both sides), each trainer a share of the sample, summed with allreduce; trainer 0
prints MRR and Hits@10. The last line is the final figures as JSON.
"""
import argparse
import json
import os
import sys
import time

# One BLAS thread per trainer (a job's trainers share the machine's cores);
# torch's own threads are set below.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

import rdps.distributed as dist


def read_dataset(path):
    def dict_file(name):
        ids = {}
        with open(os.path.join(path, name)) as f:
            for line in f:
                i, key = line.rstrip("\n").split("\t")
                ids[key] = int(i)
        return ids

    ents, rels = dict_file("entities.dict"), dict_file("relations.dict")

    def triples(name):
        out = []
        with open(os.path.join(path, name)) as f:
            for line in f:
                h, r, t = line.rstrip("\n").split("\t")
                out.append((ents[h], rels[r], ents[t]))
        return np.array(out, dtype=np.int64)

    return len(ents), len(rels), triples("train.txt"), triples("valid.txt"), triples("test.txt")


def l2_dist(a, b):
    """||a_i - b_j|| for every pair (what torch.cdist gives, through a
    matrix product: much faster, forward and backward)."""
    sq = (a * a).sum(-1, keepdim=True) + (b * b).sum(-1)[None, :] - 2 * a @ b.T
    return sq.clamp_min(1e-12).sqrt()


class TransE(torch.nn.Module):
    """TransE_l2 on DistEmbeddings: the rows of a batch's ids are read from
    the servers in forward() and recorded for the sparse optimizer."""

    def __init__(self, ent, rel, gamma):
        super().__init__()
        self.ent, self.rel, self.gamma = ent, rel, gamma

    def forward(self, heads, rels, tails, negs, corrupt_head):
        n = len(heads)
        rows = self.ent(torch.cat([heads, tails, negs]))  # one read for all entities
        h, t, neg = rows[:n], rows[n:2 * n], rows[2 * n:]
        r = self.rel(rels)
        pos = self.gamma - torch.norm(h + r - t, p=2, dim=-1)
        if corrupt_head:  # ||neg + (r - t)||
            negs = self.gamma - l2_dist(t - r, neg)
        else:             # ||(h + r) - neg||
            negs = self.gamma - l2_dist(h + r, neg)
        return pos, negs


def evaluate(ent_w, rel_w, gamma, sample, known_tails, known_heads, batch=64):
    """Filtered ranks of both ends of each triple of sample, against every
    entity: (sum of 1/rank, hits@10 count, ranks counted)."""
    rr = hits = n = 0.0
    for lo in range(0, len(sample), batch):
        tri = sample[lo:lo + batch]
        h, r, t = (torch.from_numpy(tri[:, k]) for k in range(3))
        for side in ("tail", "head"):
            if side == "tail":
                scores = gamma - l2_dist(ent_w[h] + rel_w[r], ent_w)
                true, known = t, [known_tails[(a, b)] for a, b in zip(tri[:, 0], tri[:, 1])]
            else:
                scores = gamma - l2_dist(ent_w[t] - rel_w[r], ent_w)
                true, known = h, [known_heads[(b, c)] for b, c in zip(tri[:, 1], tri[:, 2])]
            own = scores[torch.arange(len(tri)), true].clone()
            for i, ids in enumerate(known):  # the filter: other true triples
                scores[i, ids] = -float("inf")
            rank = 1 + (scores > own[:, None]).sum(dim=1).double()
            rr += float((1.0 / rank).sum())
            hits += float((rank <= 10).sum())
            n += len(tri)
    return rr, hits, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="WN18 from 'rdps dataset wordnet DIR'")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--gamma", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--neg_sample_size", type=int, default=256)
    ap.add_argument("--eval_sample", type=int, default=1000,
                    help="test triples ranked after each epoch (0: all)")
    ap.add_argument("--no_adv", dest="adv", action="store_false",
                    help="plain mean over the negatives instead of DGL-KE's -adv "
                    "(self-adversarial weights softmax(score * temperature))")
    ap.add_argument("--adv_temperature", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per trainer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num_servers", type=int, default=2,
                    help="standalone only: servers inside this process")
    args = ap.parse_args()

    dist.initialize(num_servers=args.num_servers)
    rank, ntrainers = dist.get_rank(), dist.get_num_trainers()
    torch.manual_seed(args.seed * 1000 + rank)
    torch.set_num_threads(args.threads)
    n_ent, n_rel, train, valid, test = read_dataset(args.data)

    # DGL-KE's start: U[-r, r] with r = (gamma + 2) / dim, drawn by the servers.
    init = dist.uniform_init((args.gamma + 2.0) / args.dim, seed=args.seed)
    ent = dist.DistEmbedding(n_ent, args.dim, name="wn18_entity", init_func=init)
    rel = dist.DistEmbedding(n_rel, args.dim, name="wn18_relation", init_func=init)
    opt = dist.optim.SparseAdagrad([ent, rel], lr=args.lr)
    model = TransE(ent, rel, args.gamma)

    mine = dist.edge_split(torch.ones(len(train), dtype=torch.bool)).numpy()
    triples = torch.from_numpy(train[mine])
    rng = np.random.default_rng(12345)
    sample = test[rng.permutation(len(test))[:args.eval_sample or len(test)]]
    my_sample = sample[dist.edge_split(np.ones(len(sample), dtype=bool)).numpy()]
    known_tails, known_heads = {}, {}
    for h, r, t in np.concatenate([train, valid, test]).tolist():
        known_tails.setdefault((h, r), []).append(t)
        known_heads.setdefault((r, t), []).append(h)
    if rank == 0:
        print("trainer %d of %d (%s, %d server(s)): %d entities, %d relations, %d of %d "
              "train triples here" % (rank, ntrainers, dist.get_transport(),
                                      dist.get_num_servers(), n_ent, n_rel, len(triples),
                                      len(train)), flush=True)

    # Every trainer takes as many steps per epoch (the shares differ by one).
    steps = (len(train) // ntrainers + args.batch_size - 1) // args.batch_size
    figures = {}
    t0 = time.time()
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(triples))
        total = 0.0
        for step in range(steps):
            idx = perm[(step * args.batch_size) % len(perm):][:args.batch_size]
            h, r, t = triples[idx, 0], triples[idx, 1], triples[idx, 2]
            neg = torch.randint(0, n_ent, (args.neg_sample_size,))
            pos, negs = model(h, r, t, neg, corrupt_head=step % 2 == 1)
            neg_loss = F.logsigmoid(-negs)
            if args.adv:  # DGL-KE's -adv: harder negatives weigh more
                w = torch.softmax(negs.detach() * args.adv_temperature, dim=-1)
                neg_loss = (neg_loss * w).sum(-1)
            loss = -(F.logsigmoid(pos).mean() + neg_loss.mean()) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss)
        dist.barrier()  # every trainer's epoch is in before evaluating
        with torch.no_grad():
            ent_w, rel_w = ent.weight[0:n_ent], rel.weight[0:n_rel]
            rr, hits, n = evaluate(ent_w, rel_w, args.gamma, my_sample, known_tails,
                                   known_heads)
        loss_sum, rr, hits, n = dist.allreduce([total / steps, rr, hits, n])
        figures = {"epoch": epoch, "loss": loss_sum / ntrainers, "mrr": rr / n,
                   "hits10": hits / n, "ranked": int(n), "trainers": ntrainers,
                   "transport": dist.get_transport(), "seconds": round(time.time() - t0, 1)}
        if rank == 0:
            print("epoch %d  loss %.4f  filtered test MRR %.4f  Hits@10 %.4f  (%d ranks, "
                  "%.1f s)" % (epoch, figures["loss"], figures["mrr"], figures["hits10"],
                               n, time.time() - t0), flush=True)
    if rank == 0:
        print("RESULT " + json.dumps(figures), flush=True)
    dist.finalize()


if __name__ == "__main__":
    sys.exit(main())
