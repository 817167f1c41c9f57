#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Writes a section-3 man page for every function of the C API (the public
# headers include/rdps/*.h), as liburing and rdma-core ship theirs: NAME,
# SYNOPSIS (#include <rdps/rdps.h> and the prototype), DESCRIPTION (the
# comment above the declaration), RETURN VALUE (the comment's sentences
# about what it returns, else the header's convention for int functions),
# SEE ALSO (the header's other functions). The headers are the reference;
# header2man3.awk only lays them out.
#
# Which functions there are comes from the compiler (-aux-info, as
# tests/install/public-symbols.sh reads them), so a declaration the awk
# script cannot place is an error, not a missing page. A function without
# a comment of its own takes the comment of the declarations it is grouped
# with (no blank line between them); one with none at all fails the build,
# naming the header and line.
#
# Run at build time (CMakeLists.txt, target rdps_man3); STAMP is touched
# when every page was written.
#
# usage: rdps-man3.sh CC INCLUDE_DIR OUT_DIR VERSION STAMP
set -eu

if [ $# -ne 5 ]; then
	echo "usage: rdps-man3.sh CC INCLUDE_DIR OUT_DIR VERSION STAMP" >&2
	exit 2
fi
cc=$1
inc=$2
out=$3
version=$4
stamp=$5
rm -f "$stamp"
awkf=$(dirname "$0")/header2man3.awk
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for h in "$inc"/rdps/*.h; do
	printf '#include "rdps/%s"\n' "$(basename "$h")"
done > "$tmp/all.c"
# -aux-info: "/* PATH/rdps/client.h:80:NC */ extern int rdps_client_create (...);"
# (NC: a prototype here, NF: a definition: the headers' static inlines).
$cc -std=gnu11 -D_GNU_SOURCE -I"$inc" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
sed -n -E 's@^/\* (.*/)?rdps/([a-z_0-9]+\.h):([0-9]+):N[CF] \*/ .*[ *]([A-Za-z_][A-Za-z_0-9]*) \(.*@\2 \3 \4@p' \
	"$tmp/aux" | sort -u -k1,1 -k2,2n > "$tmp/functions"
if [ ! -s "$tmp/functions" ]; then
	echo "rdps-man3.sh: $cc -aux-info found no function in $inc/rdps" >&2
	exit 1
fi

mkdir -p "$out"
# Pages of functions that are gone would still be installed.
rm -f "$out"/*.3
for h in $(awk '{ print $1 }' "$tmp/functions" | sort -u); do
	awk -v header="$h" -v version="$version" -v out="$out" \
		-v list="$(awk -v h="$h" '$1 == h { printf "%s %s\n", $2, $3 }' "$tmp/functions")" \
		-f "$awkf" "$inc/rdps/$h"
done
n=$(find "$out" -name '*.3' | wc -l)
want=$(wc -l < "$tmp/functions")
if [ "$n" -ne "$want" ]; then
	echo "rdps-man3.sh: wrote $n pages for $want functions" >&2
	exit 1
fi
touch "$stamp"
