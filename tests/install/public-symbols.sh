#!/bin/sh
# Prints the C API of a set of rdps headers, one "HEADER SYMBOL" a line
# sorted by header and line: every function the headers declare (static
# inline ones excluded: they are not in the library) and every extern
# variable. Functions come from GCC's -aux-info, so a declaration spread
# over lines, or returning a pointer, is found as the compiler sees it.
# usage: public-symbols.sh INCLUDE_DIR   (the directory that holds rdps/)
set -eu
inc=$1
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for h in "$inc"/rdps/*.h; do
	printf '#include "rdps/%s"\n' "$(basename "$h")"
done > "$tmp/all.c"
"$cc" -std=gnu11 -D_GNU_SOURCE -I"$inc" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
# /* PATH/rdps/client.h:82:NC */ extern int rdps_client_create (...);
sed -n -E 's@^/\* (.*/)?rdps/([a-z_0-9]+\.h):([0-9]+):[A-Z]+ \*/ extern .*[ *]([A-Za-z_][A-Za-z_0-9]*) \(.*@\2 \3 \4@p' \
	"$tmp/aux" > "$tmp/list"
for h in "$inc"/rdps/*.h; do
	# extern int rdps_log_threshold;   (variables: not in -aux-info)
	grep -n -E '^extern [^(]*[ *][A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?;' "$h" |
		sed -E "s@^([0-9]+):.*[ *]([A-Za-z_][A-Za-z_0-9]*)(\[[^]]*\])?;.*@$(basename "$h") \1 \2@"
done >> "$tmp/list"
sort -k1,1 -k2,2n "$tmp/list" | awk '{ print $1, $3 }' | uniq
