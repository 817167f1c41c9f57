#!/usr/bin/env bash
# Runs inside both soft-RoCE guests of the smoke test (guest.sh pair): guest a
# is the server, guest b the client. Checks that verbs (ib_read_lat, RDMA READ
# over RC) and rdma_cm (rping) work between two "hosts".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$RDPS_SOFTROCE_DIR/guest-lib.sh"

gid=$(rdps_gid_index rxe0 "$RDPS_GUEST_ADDR")
echo "smoke: role=$RDPS_GUEST_ROLE addr=$RDPS_GUEST_ADDR peer=$RDPS_PEER_ADDR gid_index=$gid"
# -F: do not fail on perftest's CPU-frequency check, meaningless under TCG.
lat_args=(-d rxe0 -x "$gid" -F -n 1000)

case $RDPS_GUEST_ROLE in
a)
	# Servers are bounded by timeout so a lost client fails the script instead
	# of wedging the guest until the harness kills it.
	timeout 60 ib_read_lat "${lat_args[@]}"
	echo "smoke: ib_read_lat server done"
	timeout 40 rping -s -a "$RDPS_GUEST_ADDR" -C 10 -v
	echo "smoke: rping server done"
	;;
b)
	# Rendezvous: the client retries until the server listens (no shared
	# files between guests).
	rdps_retry 50 timeout 30 ib_read_lat "${lat_args[@]}" "$RDPS_PEER_ADDR" | tee "$RDPS_RESULTS/ib_read_lat.txt"
	# The results row follows the "#bytes ... t_typical[usec]" header.
	awk '/t_typical/ { for (i = 1; i <= NF; i++) if ($i ~ /^t_typical/) col = i; hdr = 1; next }
	     hdr && NF > 2 && $1 ~ /^[0-9]+$/ { printf "smoke: ib_read_lat %s bytes x %s: t_typical %s usec (t_avg %s)\n", $1, $2, $col, $(col + 1); found = 1; exit }
	     END { exit !found }' "$RDPS_RESULTS/ib_read_lat.txt" | tee "$RDPS_RESULTS/summary.txt" ||
		{ echo "smoke: no ib_read_lat result line" >&2; exit 1; }
	rdps_retry 40 timeout 20 rping -c -a "$RDPS_PEER_ADDR" -C 10 -v >"$RDPS_RESULTS/rping.txt" 2>&1 ||
		{ cat "$RDPS_RESULTS/rping.txt"; echo "smoke: rping failed" >&2; exit 1; }
	n=$(grep -c 'ping data' "$RDPS_RESULTS/rping.txt" || true)
	tail -n 2 "$RDPS_RESULTS/rping.txt"
	[[ $n -ge 10 ]] || { echo "smoke: rping: $n of 10 pings" >&2; exit 1; }
	echo "smoke: rping $n pings ok" | tee -a "$RDPS_RESULTS/summary.txt"
	;;
*)
	echo "smoke: unknown role $RDPS_GUEST_ROLE" >&2
	exit 1
	;;
esac
