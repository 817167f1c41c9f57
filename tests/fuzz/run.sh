#!/bin/bash
# Runs the libFuzzer targets for a bounded time each, two at a time, and
# replays the saved reproducers (tests/fuzz/crashes/<target>/*). Exits
# non-zero if any target crashed, hit a sanitizer report or a FUZZ_CHECK, or
# a reproducer still fails. Exits 77 (skip) if clang cannot build them.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
#
# Targets: frames requests handshake ipconfig dataset partition graph
# (default: all). Each runs with a fixed -seed (FUZZ_SEED, default 1) and at
# most a fixed number of inputs (runs_of below, about what 20 s execute on
# CI's 2 loaded cores; FUZZ_RUNS overrides it for all), so a run's mutations
# are the same from one CI run to the next, a faster machine does not go
# further than the runs checked here, and a known-good tree fails only
# where an oracle says so; SECONDS only bounds a slow machine. New inputs found go to
# BUILD_DIR/corpus/<target> (the repo's corpus is read only); crash
# artifacts and logs to BUILD_DIR/logs. Set FUZZ_JOBS=1 to run one target at
# a time.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
secs=${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frames requests handshake ipconfig dataset partition graph)
jobs=${FUZZ_JOBS:-2}
seed=${FUZZ_SEED:-1}

# Inputs per target: the servers' targets run a few hundred to a few
# thousand a second, the parsers' tens of thousands.
runs_of() {
	if [ -n "${FUZZ_RUNS:-}" ]; then
		echo "$FUZZ_RUNS"
		return
	fi
	case $1 in
	frames) echo 4000 ;;
	requests) echo 2000 ;;
	graph) echo 20000 ;;
	partition) echo 80000 ;;
	*) echo 150000 ;;
	esac
}

if ! command -v "${CC_FUZZ:-clang}" >/dev/null 2>&1; then
	echo "fuzz: ${CC_FUZZ:-clang} not found; skipping" >&2
	exit 77
fi
if ! "$here/build.sh" "$build" >"$build.build.log" 2>&1; then
	cat "$build.build.log" >&2
	echo "fuzz: build failed" >&2
	exit 1
fi
mkdir -p "$build/logs"
# libinfinipath (pulled in by libfabric) writes a NAME.80s-PID,HOST.btr
# backtrace into the working directory when a target aborts.
export IPATH_NO_BACKTRACE=1

run_one() {
	local t=$1 bin=$build/fuzz_$1 log=$build/logs/$1.log rc=0 dict=() opts=()
	mkdir -p "$build/corpus/$t"
	[ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
	# The servers' budgets are a few MiB (fuzz_server.h): one allocation
	# past 64 MiB is a finding (the largest legal one is a job's allreduce
	# vectors, 32 MiB for RDPS_MAX_CLIENTS clients).
	case $t in frames | requests) opts=(-malloc_limit_mb=64) ;; esac
	nice "$bin" -runs="$(runs_of "$t")" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 \
		-seed="$seed" -artifact_prefix="$build/logs/$t-" "${dict[@]}" "${opts[@]}" \
		"$build/corpus/$t" "$here/corpus/$t" >"$log" 2>&1 || rc=$?
	# Replays of the saved reproducers: each must now pass.
	for r in "$here/crashes/$t"/*; do
		[ -f "$r" ] || continue
		if ! "$bin" "$r" >>"$log" 2>&1; then
			echo "fuzz: $t: reproducer $(basename "$r") still fails" >>"$log"
			rc=1
		fi
	done
	local execs cov
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ $rc -eq 0 ]; then
		echo "fuzz: $t: ok, ${execs:-?} of $(runs_of "$t") executions (at most ${secs}s), ${cov:-cov: ?}"
	else
		echo "fuzz: $t: FAILED (exit $rc), see $log"
		grep -m1 -A30 'ERROR: \|FUZZ CHECK FAILED\|runtime error\|still fails' "$log" | head -40
	fi
	return $rc
}

fail=0
pids=()
for t in "${targets[@]}"; do
	run_one "$t" &
	pids+=($!)
	if [ ${#pids[@]} -ge "$jobs" ]; then
		wait "${pids[0]}" || fail=1
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || fail=1
done
exit $fail
