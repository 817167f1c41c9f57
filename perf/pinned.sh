#!/usr/bin/env bash
# What a host's trainers open and pin (issue 27): `rdps doctor --clients N
# --servers S` for N = 64 and 256 trainers on a host, S = 16 servers, over
# verbs and over ofi (efa's sizes: the provider is shown to rdps as efa by
# the libfabric shim, tests/transport/ofi_shim.c, over tcp;ofi_rxm). Nothing
# is timed: the figures are computed from the backends' and the provider's
# sizes. Writes RESULTS/pinned.txt (the doctor's scale lines) for
# perf/report.py.
#   perf/pinned.sh BUILD_DIR RESULTS_DIR
set -euo pipefail
BUILD=${1:?build dir}
OUT=${2:?results dir}
mkdir -p "$OUT"
shim=$BUILD/tests/librdps_ofi_shim.so
: >"$OUT/pinned.txt"
for n in 64 256; do
	for s in 16; do
		echo "# verbs clients=$n servers=$s" >>"$OUT/pinned.txt"
		"$BUILD/rdps" doctor --transport verbs --clients "$n" --servers "$s" |
			grep '^ok   scale' >>"$OUT/pinned.txt" || true
		echo "# ofi clients=$n servers=$s" >>"$OUT/pinned.txt"
		if [ -e "$shim" ]; then
			LD_PRELOAD=$shim RDPS_OFI_SHIM_AS_EFA=1 FI_PROVIDER='tcp;ofi_rxm' \
				"$BUILD/rdps" doctor --transport ofi --ofi-provider efa --clients "$n" \
				--servers "$s" | grep '^ok   scale' >>"$OUT/pinned.txt" || true
		fi
	done
done
cat "$OUT/pinned.txt"
