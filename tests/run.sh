#!/usr/bin/env bash
# The test command: installs what is missing, builds (warnings are errors),
# runs every suite through ctest and prints each Criterion suite's summary.
# Extra arguments go to ctest (e.g. -L softroce, -LE slow, -R cluster).
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
build=${RDPS_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${RDPS_BUILD_TYPE:-Release}" \
	-DRDPS_WERROR=ON ${RDPS_CMAKE_ARGS:-}
cmake --build "$build"

cd "$build"
rc=0
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@" || rc=$?

# One line per suite: its name and Criterion's synthesis.
log=Testing/Temporary/LastTest.log
if [ -f "$log" ]; then
	echo
	echo "== Criterion summaries =="
	awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /Synthesis:/{sub(/^.*\[====\] /,""); printf "%-34s %s\n", name, $0}' "$log"
fi
exit "$rc"
