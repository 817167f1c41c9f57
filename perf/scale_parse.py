#!/usr/bin/env python3
"""perf/scale.sh's parser: one JSON line per partition or training job.

  scale_parse.py partition PARTITION_JSON SECONDS PEAK_KIB METHOD SCALE LOG
  scale_parse.py train LABEL SCALE STEPS PDIR RSS_FILE LOG_PREFIX NETWORK
"""
import json
import re
import sys


def partition(pjson, secs, kib, method, scale, log):
    p = json.load(open(pjson))
    n, t = p["num_entities"], p["num_train"]
    # The CSR graph METIS takes (its upper bound): xadj, two vertex
    # weights, adjncy and adjwgt (a 32-bit word each per direction of a
    # triple).
    csr = 4.0 * (n + 1) + 8.0 * n + 16.0 * t
    peak = float(kib) * 1024
    clusters = p.get("coarsened_clusters", 0)
    print(json.dumps({
        "bench": "scale_partition", "scale": float(scale), "method": method,
        "entities": n, "relations": p["num_relations"], "train": t,
        "valid": p["num_valid"], "test": p["num_test"], "k": p["k"],
        "seconds": float(secs), "peak_rss_mib": peak / 2**20, "csr_mib": csr / 2**20,
        "peak_over_csr": peak / csr, "local_triple_fraction": p["local_triple_fraction"],
        "coarsened_clusters": clusters,
    }))


def first(pattern, text, conv=float):
    m = re.search(pattern, text)
    return conv(m.group(1)) if m else None


def train(label, scale, steps, pdir, rss_file, prefix, network):
    p = json.load(open(pdir + "/partition.json"))
    logs = [open("%s-trainer%d.log" % (prefix, r)).read() for r in (0, 1)]
    slogs = [open("%s-server%d.log" % (prefix, s)).read() for s in (0, 1)]
    out = {"bench": "scale_train", "label": label, "scale": float(scale),
           "network": network, "steps": int(steps), "entities": p["num_entities"],
           "train": p["num_train"]}
    rates, secs = [], []
    for text in logs:
        m = re.search(r"training (?:done|interrupted): \d+ steps .* in ([\d.]+) s, ([\d.]+) pos "
                      r"triples/s", text)
        if m:
            secs.append(float(m.group(1)))
            rates.append(float(m.group(2)))
    if rates:
        out["pos_per_s"] = sum(rates)
        out["train_seconds"] = max(secs)
        pos = 2 * int(steps) * 1024
        if pos:
            out["seconds_per_1m_triples"] = max(secs) / pos * 1e6
    for k, pat in (("mrr", r"Test average MRR : ([\d.]+)"), ("mr", r"Test average MR : ([\d.]+)"),
                   ("hits10", r"Test average HITS@10 : ([\d.]+)")):
        v = first(pat, logs[0])
        if v is not None:
            out[k] = v
    # Rows a server holds: its part's entities, and its share of relations.
    ranges = p["ranges"]
    rows = [ranges[i + 1] - ranges[i] + (p["num_relations"] + 1) // 2 for i in (0, 1)]
    try:
        rss_kib = float(open(rss_file).read().split()[0])
    except (OSError, ValueError, IndexError):
        rss_kib = 0
    dim = 100
    need = dim * 4 + 4  # the row and its row-wise Adagrad state
    out["servers_peak_rss_mib"] = rss_kib / 1024
    if rss_kib:
        out["server_bytes_per_row"] = rss_kib * 1024 / sum(rows)
        out["server_row_bytes_needed"] = need
        out["server_rss_over_need"] = rss_kib * 1024 / (sum(rows) * need)
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "partition" and len(sys.argv) == 8:
        partition(*sys.argv[2:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "train" and len(sys.argv) == 9:
        train(*sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
