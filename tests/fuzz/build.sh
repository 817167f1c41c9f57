#!/bin/sh
# Builds the libFuzzer targets with clang into BUILD_DIR (default
# build-fuzz at the top of the tree). Usage: tests/fuzz/build.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build-fuzz}
gen=
command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
# shellcheck disable=SC2086
cmake -S "$here" -B "$build" $gen -DCMAKE_C_COMPILER="${CC_FUZZ:-clang}" >/dev/null
cmake --build "$build" -j "${FUZZ_BUILD_JOBS:-2}"
