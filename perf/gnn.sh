#!/usr/bin/env bash
# perf/gnn.sh: issue 19's figures on the WordNet node-classification task
# (rdps dataset wordnet-nodes, 2 parts): examples/wordnet_gnn.py's
# GraphSAGE (fanouts 10, 25), RGCN (sparse node embeddings) and the MLP
# baseline, standalone (parts served in the process, inproc) and
# distributed (rdps launch --exec: 2 servers with --graph + 2 trainers,
# tcp), sampling by RPC and by one-sided reads: test accuracy (mean of the
# last 3 epochs), wall time, sampled edges/s. Results: JSON lines in
# perf/results/gnn/, shown by perf/report.py. About 10 minutes here.
#
#   perf/gnn.sh [--epochs N] [--build DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
EPOCHS=20
while (($#)); do
	case $1 in
	--epochs) EPOCHS=${2:?}; shift ;;
	--build) BUILD=$(cd "${2:?}" && pwd); shift ;;
	-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "perf/gnn.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
OUT=$ROOT/perf/results/gnn
mkdir -p "$OUT"
rm -f "$OUT"/gnn.jsonl "$OUT"/*.log
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH=$ROOT/python OPENBLAS_NUM_THREADS=1 RDPS_LIBRARY=$BUILD/librdps.so.0
PY=/usr/bin/python3
EX=$ROOT/examples/wordnet_gnn.py
"$BUILD/rdps" dataset wordnet-nodes "$TMP/wn" >/dev/null
"$BUILD/rdps" partition --data "$TMP/wn" -k 2 --out "$TMP/parts" --balance_train --balance_edges >/dev/null
echo "127.0.0.1 $((32000 + RANDOM % 8000)) 2" >"$TMP/ip.txt"
SECONDS=0
run() { # NAME MODE(standalone|dist) ARGS...
	local name=$1 mode=$2
	shift 2
	echo "== [${SECONDS}s] $name ($mode)"
	if [[ $mode == standalone ]]; then
		$PY "$EX" --part_config "$TMP/parts" --num_epochs "$EPOCHS" --json "$OUT/gnn.jsonl" "$@" \
			>"$OUT/$name-$mode.log" 2>&1
	else
		"$BUILD/rdps" launch --ip_config "$TMP/ip.txt" --num_client_proc 2 --transport tcp --quiet \
			--server_arg=--graph --server_arg="$TMP/parts" --exec -- \
			$PY "$EX" --part_config "$TMP/parts" --num_epochs "$EPOCHS" --json "$OUT/gnn.jsonl" "$@" \
			>"$OUT/$name-$mode.log" 2>&1
	fi
	tail -1 "$OUT/gnn.jsonl"
}
run sage-rpc standalone --model sage --sample rpc
run sage-read standalone --model sage --sample read
run sage-rpc dist --model sage --sample rpc
run sage-read dist --model sage --sample read
run mlp standalone --model mlp
run mlp dist --model mlp
EPOCHS=3 run rgcn-read standalone --model rgcn --sample read
EPOCHS=3 run rgcn-read dist --model rgcn --sample read
echo "perf/gnn.sh: done in ${SECONDS}s; results in $OUT/gnn.jsonl"
