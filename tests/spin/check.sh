#!/usr/bin/env bash
# ctest spin/verbs_credits: checks transport/verbs_credits.pml exhaustively
# with spin. The configurations must verify with 0 errors; each control
# (a known-bad variant of the protocol) must make spin find the violation it
# names, so the model is shown able to fail. One summary line per run.
#   check.sh [MODEL] [OUT_DIR]   (default: the repository's model, ./spin-out)
# Exits 77 (skipped) when spin is not installed. See tests/spin/README.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODEL=${1:-$HERE/../../transport/verbs_credits.pml}
OUT=${2:-$PWD/spin-out}
CC=${CC:-cc}

if ! command -v spin >/dev/null 2>&1; then
	echo "spin: not installed (Debian package 'spin', see deploy/install-deps.sh); skipped"
	exit 77
fi
command -v "$CC" >/dev/null 2>&1 || { echo "spin: no C compiler ($CC) for pan" >&2; exit 1; }
[ -r "$MODEL" ] || { echo "spin: cannot read the model $MODEL" >&2; exit 1; }
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
mkdir -p "$OUT"

failed=0

# run NAME EXPECT FLAGS...: EXPECT is "pass" (0 errors) or a fixed string
# that pan's first error line must contain.
run() {
	local name=$1 expect=$2
	shift 2
	local dir=$OUT/$name verdict line states depth elapsed
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$MODEL" "$dir/verbs_credits.pml"
	# -DSAFETY: assertions and end states only; -DCOLLAPSE: exhaustive, smaller
	# stored states (no -DBITSTATE: nothing is left unexplored). -O0: pan.c
	# compiles in a seventh of the time -O2 takes, more than it loses here.
	if ! (cd "$dir" && spin -a "$@" verbs_credits.pml >spin.log 2>&1 &&
	      "$CC" -O0 -DSAFETY -DCOLLAPSE -o pan pan.c >cc.log 2>&1); then
		printf 'spin: %-22s FAIL  cannot build the verifier (see %s/spin.log, cc.log)\n' \
			"$name" "$dir"
		failed=1
		return
	fi
	# -m: search depth bound (the deepest path is ~1,400 steps); -n: no
	# unreached-code listing.
	(cd "$dir" && ./pan -m100000 -n >pan.log 2>&1) || true
	line=$(grep -m1 -E '^pan:1: ' "$dir/pan.log" || true)
	states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.log")
	depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' "$dir/pan.log" | head -1)
	elapsed=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' "$dir/pan.log")
	if ! grep -q 'errors: ' "$dir/pan.log"; then
		verdict="FAIL  pan did not finish (see $dir/pan.log)"
		failed=1
	elif grep -q 'max search depth too small' "$dir/pan.log"; then
		verdict="FAIL  search truncated at depth 100000 (raise -m)"
		failed=1
	elif [ "$expect" = pass ]; then
		if grep -q 'errors: 0$' "$dir/pan.log"; then
			verdict="PASS  0 errors"
		else
			verdict="FAIL  ${line#pan:1: }; replay: cd $dir && spin -t $* verbs_credits.pml"
			failed=1
		fi
	elif [ -n "$line" ] && [[ "$line" == *"$expect"* ]]; then
		verdict="PASS  control found: ${line#pan:1: }"
	elif [ -n "$line" ]; then
		verdict="FAIL  control found another error: ${line#pan:1: } (wanted: $expect)"
		failed=1
	else
		verdict="FAIL  control found no error (wanted: $expect)"
		failed=1
	fi
	printf 'spin: %-22s %s; %s states, depth %s, %s s [%s]\n' "$name" "$verdict" \
		"${states:-?}" "${depth:-?}" "${elapsed:-?}" "${*:-defaults}"
}

# The protocol. main: S=4 slots, 3 clients joining at any time, any one may
# die at any point (or none). replace: 2 clients and a third that replaces
# the dead one, all meeting at a barrier before disconnecting (a session
# count above the job's, while the dead one is torn down). wide: S=10, share
# capped at MAXC=4 (credit messages wait for 2 owed), 2 rounds each.
run main pass
run replace pass -DNCLIENTS=2 -DREPLACE -DBARRIER
run wide pass -DS=10 -DMAXC=4 -DNCLIENTS=2 -DBARRIER -DROUNDS=2

# Controls: each must fail as named.
run old_fixed_credits 'assertion violated (posted>0)' -DOLD_FIXED_CREDITS
run destroy_before_drain 'assertion violated (lost==0)' -DDESTROY_BEFORE_DRAIN
run skip_last_wqe 'assertion violated (lost==0)' -DSKIP_LAST_WQE
run grant_before_repost 'assertion violated (held<=posted)' -DGRANT_BEFORE_REPOST -DNCLIENTS=2 -DBARRIER
run share_by_live 'invalid end state' -DSHARE_BY_LIVE -DBARRIER
run no_requeue 'invalid end state' -DNO_REQUEUE

if [ "$failed" != 0 ]; then
	echo "spin: FAILED; outputs in $OUT (tests/spin/README.md says how to read a trail)"
fi
exit "$failed"
