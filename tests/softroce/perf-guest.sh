#!/usr/bin/env bash
# Runs inside a soft-RoCE guest (guest.sh single) for perf/run.sh: rdps pulls
# over verbs on rxe0, with their limits (ib_read_lat / ib_read_bw) measured by
# `rdps bench pull` itself on the same rxe device in the same guest, in both
# read modes; then the same pulls over TCP in the same guest, for comparison;
# then pushes over verbs (limit: ib_send_bw, measured by `rdps bench push`)
# and over TCP (limit: a raw TCP stream) in the same guest, with perf/run.sh's
# push options (issue 15: 1000 rows of dim 400, sgd and row-wise Adagrad, 1
# and 2 server threads; a transport that grants fewer threads says so in
# server_threads_seen).
#
#   perf-guest.sh BUILD_DIR [quick]
#
# Writes into $RDPS_RESULTS: pull-verbs.jsonl / .txt, pull-tcp.jsonl / .txt,
# push-verbs.jsonl / .txt, push-tcp.jsonl / .txt,
# cdf.txt (latency CDFs), ib_send_lat.txt. Absolute figures under TCG mean
# little; the ratios to limits measured in the same guest are the point.
set -euo pipefail
BUILD=${1:?usage: perf-guest.sh BUILD_DIR [quick]}
MODE=${2:-full}
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$RDPS_SOFTROCE_DIR/guest-lib.sh"

out=$RDPS_RESULTS
gid=$(rdps_gid_index rxe0 "$RDPS_GUEST_ADDR")
echo "perf-guest: rxe0 gid index $gid, address $RDPS_GUEST_ADDR, mode $MODE"

if [[ $MODE == quick ]]; then
	common=(--table-rows 2000 --dims 16 --batches 1,16 --seconds 0.2 --tput-seconds 0.2
		--iters 2000 --perftest-iters 100 --clients 2)
	push=(--table-rows 2000 --dim 400 --batches 1000 --seconds 0.2 --optimizers sgd --clients 2
	      --num_server_threads 1,2)
else
	common=(--table-rows 20000 --dims 100,400 --batches 1,16,256,4096 --seconds 1
		--tput-seconds 0.5 --iters 20000 --perftest-iters 1000 --clients 2)
	push=(--table-rows 20000 --dim 400 --batches 256,1000 --seconds 1 --clients 2
	      --optimizers sgd,adagrad_row --num_server_threads 1,2)
fi

echo "== rdps bench pull over verbs (validated and relaxed reads)"
timeout 900 "$BUILD/rdps" bench pull --transport verbs --host "$RDPS_GUEST_ADDR" \
	--ib-dev rxe0 --gid-index "$gid" --read-consistency both --cdf "$out/cdf.txt" \
	"${common[@]}" >"$out/pull-verbs.jsonl" 2> >(tee "$out/pull-verbs.txt" >&2)

echo "== rdps bench pull over tcp in the same guest"
timeout 600 "$BUILD/rdps" bench pull --transport tcp --host "$RDPS_GUEST_ADDR" \
	--cdf "$out/cdf.txt" "${common[@]}" >"$out/pull-tcp.jsonl" 2> >(tee "$out/pull-tcp.txt" >&2)

echo "== rdps bench push over verbs (limit: ib_send_bw) and over tcp (limit: raw stream)"
timeout 600 "$BUILD/rdps" bench push --transport verbs --host "$RDPS_GUEST_ADDR" \
	--ib-dev rxe0 --gid-index "$gid" "${push[@]}" >"$out/push-verbs.jsonl" \
	2> >(tee "$out/push-verbs.txt" >&2)
timeout 600 "$BUILD/rdps" bench push --transport tcp --host "$RDPS_GUEST_ADDR" \
	"${push[@]}" >"$out/push-tcp.jsonl" 2> >(tee "$out/push-tcp.txt" >&2)

# For reference: two-sided SEND latency on the same device (issue 3 quotes it).
echo "== ib_send_lat, 2 bytes"
timeout 60 ib_send_lat -d rxe0 -x "$gid" -F -n 1000 -p 19999 >/dev/null 2>&1 &
srv=$!
rdps_retry 30 timeout 30 ib_send_lat -d rxe0 -x "$gid" -F -n 1000 -p 19999 "$RDPS_GUEST_ADDR" \
	>"$out/ib_send_lat.txt" 2>&1 || echo "perf-guest: ib_send_lat failed (not fatal)"
wait "$srv" || true
echo "perf-guest: done"
