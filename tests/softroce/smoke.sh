#!/usr/bin/env bash
# ctest softroce/smoke: two soft-RoCE guests as two hosts; ib_read_lat and
# rping from guest b (client) to guest a (server). See smoke-guest.sh.
#   smoke.sh [OUT_DIR]     (default: ./softroce-smoke)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-$PWD/softroce-smoke}

rc=0
# 75 s leaves room under the ctest TIMEOUT for the harness to kill a wedged
# guest and report it itself; a healthy run takes about 15 s.
bash "$HERE/guest.sh" pair --script-a "$HERE/smoke-guest.sh" --script-b "$HERE/smoke-guest.sh" \
	--out "$OUT" --timeout 75 || rc=$?
# The figure people look for; TCG makes it a sanity number, not a benchmark.
grep -h '^smoke: ' "$OUT/b.log" 2>/dev/null | grep -v 'role=' || true
exit "$rc"
