#!/usr/bin/env bash
# The test command: installs what is missing, builds (warnings are errors),
# runs every suite through ctest and prints each Criterion suite's summary.
# Extra arguments go to ctest (e.g. -L softroce, -LE slow, -R cluster).
#
# Then, once more under ASan+UBSan, the suites that drive servers and
# clients (kvstore, integration, graph, the Python API): a second tree
# (build-asan, -DRDPS_SANITIZE=ON) that builds only what they run. It runs
# by default when no ctest arguments are given (the CI run); RDPS_ASAN=1
# runs it with them too, RDPS_ASAN=0 skips it. The summary at the end shows
# both runs.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
build=${RDPS_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${RDPS_BUILD_TYPE:-Release}" \
	-DRDPS_WERROR=ON ${RDPS_CMAKE_ARGS:-}
cmake --build "$build"

asan=${RDPS_ASAN_BUILD_DIR:-build-asan}
# ctest's names of the suites that run again under the sanitizers.
asan_suites='^(kvstore/|integration/|graph/|python/api$)'
run_asan=${RDPS_ASAN:-}
[ -n "$run_asan" ] || { [ $# -eq 0 ] && run_asan=1 || run_asan=0; }

# One line per suite: its name and Criterion's synthesis.
criterion_summaries() {
	local log=$1/Testing/Temporary/LastTest.log
	[ -f "$log" ] || return 0
	awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /Synthesis:/{sub(/^.*\[====\] /,""); printf "%-34s %s\n", name, $0}' "$log"
}

# ctest's verdict lines of a run (its output saved in $1).
ctest_verdict() {
	sed -n '/tests passed/p; /^Total Test time/p; /The following tests FAILED/,$p' "$1"
}

rc=0
(cd "$build" && ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@") 2>&1 |
	tee "$build/ctest.out" || rc=$?

asan_rc=0
if [ "$run_asan" = 1 ]; then
	echo
	echo "== ASan+UBSan: $asan_suites in $asan =="
	start=$SECONDS
	# Not -Werror here: GCC's flow warnings (-Warray-bounds and the like)
	# see the instrumented code and report paths the main build (which
	# keeps -Werror) proves impossible.
	cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDPS_WERROR=OFF \
		-DRDPS_SANITIZE=ON ${RDPS_CMAKE_ARGS:-}
	# The suites' executables (<module>_test_<name>), the tool their
	# servers run as, and librdps.so for Python: not the whole tree.
	mapfile -t targets < <(ninja -C "$asan" -t targets all |
		sed -n 's/^\(\(kvstore\|integration\|graph\)_test_[a-z0-9_]*\): .*/\1/p' | sort -u)
	cmake --build "$asan" --target rdps rdps_shared "${targets[@]}"
	# Under the sanitizers the suites run 2-3 times slower: more time each.
	# A 16 MiB quarantine (ASan's default is 256 MiB): suites assert their
	# servers' peak RSS against the budgets (integration/test_hardening,
	# test_exposed), and freed buffers held out of reuse would count as the
	# server's; use-after-free of the last 16 MiB freed is still caught.
	(cd "$asan" &&
		ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16} \
		UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		ctest --output-on-failure --timeout 1800 -j "$(nproc)" -R "$asan_suites") 2>&1 |
		tee "$asan/ctest.out" || asan_rc=$?
	echo "ASan+UBSan pass: $((SECONDS - start)) s (build and suites)"
fi

echo
echo "== Criterion summaries ($build) =="
criterion_summaries "$build"
if [ "$run_asan" = 1 ]; then
	echo
	echo "== Criterion summaries, ASan+UBSan ($asan) =="
	criterion_summaries "$asan"
fi
echo
echo "== ctest ($build) =="
ctest_verdict "$build/ctest.out"
if [ "$run_asan" = 1 ]; then
	echo
	echo "== ctest, ASan+UBSan ($asan, $asan_suites) =="
	ctest_verdict "$asan/ctest.out"
fi
[ "$rc" = 0 ] && [ "$asan_rc" = 0 ]
