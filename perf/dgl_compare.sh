#!/usr/bin/env bash
# DGL's own distributed training against rdps, the same GraphSAGE job
# (issue 26): examples/dgl/train_dist_sage.py, run once as plain DGL (its
# first line, `import rdps.distributed.dgl_compat`, removed: DGL's
# DistGraph, DGL's servers, DGL's sampling) and once on rdps (the line kept),
# with the same graph (rdps dataset wordnet-nodes), the same partitions (DGL's
# partition_graph, METIS; rdps's copy converted from it, so both serve the
# same nodes per part), fanouts, batch size, epochs, 2 servers + 2 trainers.
#
# Two "machines" as DGL runs them: network namespaces joined by a veth pair
# (10.213.0.1, 10.213.0.2), each with its own /dev/shm (DGL's servers and
# trainers on one machine share the partition through shared memory named
# by the graph: two machines on one host would collide). Machine m runs
# server m (part m) and trainer m, for DGL and for rdps alike (rdps over tcp,
# sampling by RPC: what runs here; RDMA is measured elsewhere).
#
# Reports epoch time, sampled edges/s, feature bytes/s and test accuracy side
# by side, and rdps/DGL; appends them to perf/results/dgl-compare.jsonl.
# Timings mean something only on an idle machine. --smoke: 3 steps, to check
# the set-up (figures meaningless). Needs root (namespaces) and the venv of
# deploy/install-venv.sh (DGL).
#
#   perf/dgl_compare.sh [--work DIR] [--epochs N] [--fan_out 10,25]
#                       [--batch_size 1000] [--only dgl|rdps] [--smoke]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${RDPS_BUILD_DIR:-$src/build}
py=${RDPS_VENV:-/opt/rdps-venv}/bin/python
work=$build/dgl-compare
epochs=3
fan_out=10,25
batch=1000
only=
smoke=0
while [ $# -gt 0 ]; do
	case $1 in
	--work) work=$2; shift 2 ;;
	--epochs) epochs=$2; shift 2 ;;
	--fan_out) fan_out=$2; shift 2 ;;
	--batch_size) batch=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--smoke) smoke=1; shift ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "dgl_compare: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "dgl_compare: needs root (network namespaces)" >&2; exit 1; }
[ -x "$py" ] || { echo "dgl_compare: no $py: run deploy/install-venv.sh" >&2; exit 1; }
[ -x "$build/rdps" ] || { echo "dgl_compare: no $build/rdps: build first" >&2; exit 1; }
mkdir -p "$work"
export PYTHONPATH=$src/python RDPS_LIBRARY=$build/librdps.so.0 DGLBACKEND=pytorch
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
steps=()
[ "$smoke" = 1 ] && { epochs=1; steps=(--max_steps 3); }
common=(--graph_name wn --num_epochs "$epochs" --fan_out "$fan_out" --batch_size "$batch"
	"${steps[@]}")

# ---- data and partitions (kept between runs) ----
if [ ! -f "$work/wn/graph.json" ]; then
	"$build/rdps" dataset wordnet-nodes "$work/wn" --force >/dev/null
fi
if [ ! -f "$work/dglparts/wn.json" ]; then
	echo "dgl_compare: DGL partitions the graph (METIS, 2 parts)"
	"$py" - "$work" <<'EOF'
import sys, numpy as np, torch, dgl
w = sys.argv[1]
d = lambda n: np.load("%s/wn/%s.npy" % (w, n))
e = d("edges")
g = dgl.graph((torch.from_numpy(e[:, 0]), torch.from_numpy(e[:, 1])),
              num_nodes=len(d("labels")))
g.ndata["feat"] = torch.from_numpy(d("features"))
g.ndata["label"] = torch.from_numpy(d("labels"))
for m in ("train_mask", "val_mask", "test_mask"):
    g.ndata[m] = torch.from_numpy(d(m))
dgl.distributed.partition_graph(g, "wn", 2, "%s/dglparts" % w, part_method="metis",
                                balance_ntypes=g.ndata["train_mask"], balance_edges=True)
EOF
	rm -rf "$work/rparts"
fi
if [ ! -f "$work/rparts/partition.json" ]; then
	"$py" -m rdps.from_dgl --from-dgl "$work/dglparts/wn.json" --out "$work/rparts"
fi
sed 1d examples/dgl/train_dist_sage.py >"$work/train_dgl.py"   # the one line removed

# ---- two machines ----
ns=(rdpsdgl0 rdpsdgl1)
ip=(10.213.0.1 10.213.0.2)
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup
for i in 0 1; do ip netns add "${ns[$i]}"; ip -n "${ns[$i]}" link set lo up; done
ip link add rdpsdglv0 type veth peer name rdpsdglv1
for i in 0 1; do
	ip link set "rdpsdglv$i" netns "${ns[$i]}"
	ip -n "${ns[$i]}" addr add "${ip[$i]}/24" dev "rdpsdglv$i"
	ip -n "${ns[$i]}" link set "rdpsdglv$i" up
done

# machine I CMD...: runs CMD in machine I's namespace with its own /dev/shm,
# gloo on the veth (the host name resolves to loopback), bounded in time.
limit=$([ "$smoke" = 1 ] && echo 300 || echo 3600)
machine() {
	local i=$1; shift
	ip netns exec "${ns[$i]}" timeout -k 10 "$limit" unshare -m \
		sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
		env GLOO_SOCKET_IFNAME="rdpsdglv$i" "$@"
}

run_dgl() {
	printf '%s 30050\n%s 30050\n' "${ip[0]}" "${ip[1]}" >"$work/ip_dgl.txt"
	rm -f "$work/dgl.json"
	local pids=()
	for i in 0 1; do
		machine "$i" env DGL_DIST_MODE=distributed DGL_NUM_SAMPLER=0 DGL_NUM_CLIENT=2 \
			DGL_CONF_PATH="$work/dglparts/wn.json" DGL_IP_CONFIG="$work/ip_dgl.txt" \
			DGL_NUM_SERVER=1 DGL_GRAPH_FORMAT=csc \
			sh -c "DGL_ROLE=server DGL_SERVER_ID=$i \"\$0\" \"\$@\" >'$work/dgl-server$i.log' 2>&1 &
				sleep 5
				DGL_ROLE=client MASTER_ADDR=${ip[0]} MASTER_PORT=29511 RANK=$i WORLD_SIZE=2 \
				LOCAL_RANK=0 \"\$0\" \"\$@\" >'$work/dgl-trainer$i.log' 2>&1; wait" \
			"$py" "$work/train_dgl.py" --ip_config "$work/ip_dgl.txt" \
			--part_config "$work/dglparts/wn.json" --json "$work/dgl.json" "${common[@]}" &
		pids+=($!)
	done
	local rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ "$rc" = 0 ] && [ -f "$work/dgl.json" ] ||
		{ echo "dgl_compare: DGL's run failed; logs: $work/dgl-*.log" >&2; tail -n 5 "$work"/dgl-*.log >&2; return 1; }
}

run_rdps() {
	printf '%s 30060 1\n%s 30060 1\n' "${ip[0]}" "${ip[1]}" >"$work/ip_rdps.txt"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
	rm -f "$work/rdps.json"
	local pids=()
	for i in 0 1; do
		machine "$i" env RDPS_SECRET="$work/secret" \
			sh -c "\"\$0\" server --ip_config '$work/ip_rdps.txt' --server_id $i --transport tcp \
				--graph '$work/rparts' >'$work/rdps-server$i.log' 2>&1 &
				RDPS_IP_CONFIG='$work/ip_rdps.txt' RDPS_RANK=$i RDPS_NUM_TRAINERS=2 \
				RDPS_NUM_SERVERS=2 RDPS_TRANSPORT=tcp RDPS_MACHINE=$i \
				'$py' '$src/examples/dgl/train_dist_sage.py' --ip_config '$work/ip_rdps.txt' \
				--part_config '$work/rparts/partition.json' --json '$work/rdps.json' $* \
				>'$work/rdps-trainer$i.log' 2>&1; wait" "$build/rdps" &
		pids+=($!)
	done
	local rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ "$rc" = 0 ] && [ -f "$work/rdps.json" ] ||
		{ echo "dgl_compare: rdps's run failed; logs: $work/rdps-*.log" >&2; tail -n 5 "$work"/rdps-*.log >&2; return 1; }
}

[ "$only" = rdps ] || { echo "dgl_compare: DGL's distributed training"; run_dgl; }
[ "$only" = dgl ] || { echo "dgl_compare: rdps"; run_rdps "${common[*]}"; }

"$py" - "$work" "$smoke" "$epochs" "$fan_out" "$batch" <<'EOF'
import json, os, sys, time
w, smoke, epochs, fan_out, batch = sys.argv[1:]
def last(name):
    p = os.path.join(w, name)
    return json.loads(open(p).read().splitlines()[-1]) if os.path.exists(p) else None
dgl, rdps = last("dgl.json"), last("rdps.json")
rows = [("epoch time (s, last epoch)", "epoch_time", "%.2f"),
        ("sampled edges/s", "sampled_edges_per_s", "%.0f"),
        ("feature bytes/s", "feature_bytes_per_s", "%.3g"),
        ("test accuracy", "test_acc", "%.4f")]
print("%-28s %14s %14s %10s" % ("GraphSAGE, 2 servers + 2 trainers", "DGL", "rdps", "rdps/DGL"))
for label, k, f in rows:
    a = dgl[k] if dgl else None
    b = rdps[k] if rdps else None
    ratio = ""
    if a and b:
        ratio = "%.2fx" % ((a / b) if k == "epoch_time" else (b / a))
    print("%-28s %14s %14s %10s" % (label, f % a if a is not None else "-",
                                     f % b if b is not None else "-", ratio))
if smoke == "1":
    print("(--smoke: 3 steps, figures meaningless)")
else:
    line = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "epochs": int(epochs),
            "fan_out": fan_out, "batch_size": int(batch), "dgl": dgl, "rdps": rdps}
    with open("perf/results/dgl-compare.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
EOF
