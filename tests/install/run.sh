#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What "cmake --install" ships, checked from the outside: installs the build
# into a fresh prefix P and uses only what is under P.
#
#   package  the files (library and its links, headers, rdps.pc, the CMake
#            package, bin/rdps, a man page per command of "P/bin/rdps
#            --help", docs); every man page formats without a groff warning
#            and has a NAME line whatis can read; a C client built with
#            "pkg-config --cflags --libs rdps" (PKG_CONFIG_PATH=P/lib/pkgconfig)
#            and one built by a CMake project (find_package(rdps),
#            rdps::rdps) both pull, push and pull back exact values from a
#            "P/bin/rdps server" on loopback (SGD, lr 1, zeros: a push of -1
#            adds 1), run with LD_LIBRARY_PATH=P/lib.
#   man      a section-3 page per exported function (cmake/rdps-man3.sh):
#            every function librdps.so.0 exports has P/share/man/man3/F.3,
#            with NAME, SYNOPSIS (#include <rdps/rdps.h> and its prototype),
#            DESCRIPTION from its header's comment (none "Not described"),
#            each formats without a groff warning and has a whatis entry;
#            "MANPATH=P/share/man man 3 rdps_client_pull" shows the page.
#            Control: the static inline rdps_row_stride has a page too (the
#            headers are read, not the library), verbs_connect has none.
#   abi      librdps.so.0 (SONAME, symbol version RDPS_0.1) exports exactly
#            what P/include/rdps/*.h declare (tests/install/public-symbols.sh);
#            control: rdps_client_create is exported, rdps_pt_fail and
#            verbs_connect are not, though the build's static modules define
#            them (so the version script hid them).
#
# usage: run.sh package|abi|man BUILD_DIR WORK_DIR   (ctest: install/package, install/abi, install/man)
set -u

if [ $# -ne 3 ]; then
	echo "usage: run.sh package|abi|man BUILD_DIR WORK_DIR" >&2
	exit 2
fi
what=$1
build=$(cd "$2" && pwd)
work=$3
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
P=$work/prefix
failures=0
server_pid=""

fail() { echo "install/$what: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "install/$what: ok: $*"; }
# ok_since N MSG: MSG if no check failed since failures was N.
ok_since() {
	local n=$1
	shift
	[ "$failures" -eq "$n" ] && ok "$@"
}
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
	fi
}
trap cleanup EXIT

rm -rf "$work"
mkdir -p "$work"
if ! cmake --install "$build" --prefix "$P" > "$work/install.log" 2>&1; then
	cat "$work/install.log" >&2
	echo "install/$what: FAIL: cmake --install $build --prefix $P" >&2
	exit 1
fi
ok "cmake --install --prefix $P ($(grep -c 'Installing:' "$work/install.log") files)"
version=$("$P/bin/rdps" --version | sed -n 's/^rdps //p')
if [ -z "$version" ]; then
	echo "install/$what: FAIL: $P/bin/rdps --version gives no version" >&2
	exit 1
fi
lib=$P/lib/librdps.so.$version

check_abi() {
	local leaked missing unversioned s a found f0=$failures
	if ! readelf -d "$P/lib/librdps.so" | grep -q 'SONAME.*\[librdps\.so\.0\]'; then
		fail "librdps.so: SONAME is not librdps.so.0: $(readelf -d "$P/lib/librdps.so" | grep SONAME)"
	fi
	[ "$(readlink "$P/lib/librdps.so")" = librdps.so.0 ] || fail "lib/librdps.so does not link to librdps.so.0"
	[ "$(readlink "$P/lib/librdps.so.0")" = "librdps.so.$version" ] ||
		fail "lib/librdps.so.0 does not link to librdps.so.$version"
	# "T rdps_client_create@@RDPS_0.1"; the version node itself is "A RDPS_0.1".
	nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' > "$work/exported.txt"
	unversioned=$(grep -v '@@RDPS_0\.1$' "$work/exported.txt")
	[ -z "$unversioned" ] || fail "exported outside RDPS_0.1: $(tr "\n" " " <<< "$unversioned")"
	sed 's/@.*//' "$work/exported.txt" | sort -u > "$work/exported"
	if ! "$here/public-symbols.sh" "$P/include" > "$work/declared.txt"; then
		fail "public-symbols.sh $P/include"
		return
	fi
	awk '{ print $2 }' "$work/declared.txt" | sort -u > "$work/declared"
	leaked=$(comm -23 "$work/exported" "$work/declared")
	missing=$(comm -13 "$work/exported" "$work/declared")
	[ -z "$leaked" ] || fail "exported but declared in no public header (internal): $(tr "\n" " " <<< "$leaked")"
	[ -z "$missing" ] ||
		fail "declared in include/rdps/ but not exported (add them to cmake/librdps.map): $(tr "\n" " " <<< "$missing")"
	grep -qx rdps_client_create "$work/exported" || fail "control: rdps_client_create not exported"
	for s in rdps_pt_fail verbs_connect; do
		grep -qx "$s" "$work/exported" && fail "internal $s is exported"
		found=""
		for a in "$build"/librdps_*.a; do
			nm --defined-only "$a" 2>/dev/null | grep -q " T $s\$" && found=$a
		done
		[ -n "$found" ] || fail "control: $s is defined by no static module, so its absence proves nothing"
	done
	echo "install/$what: librdps.so.0 exports $(wc -l < "$work/exported") symbols (RDPS_0.1); $P/include/rdps declares $(wc -l < "$work/declared")"
	ok_since "$f0" "librdps.so.0 exports exactly the C API of its headers"
}

check_files() {
	local f cmd n=0 page warn f0=$failures
	for f in "lib/librdps.so.$version" lib/librdps.so.0 lib/librdps.so \
		include/rdps/rdps.h include/rdps/client.h include/rdps/common.h \
		lib/pkgconfig/rdps.pc lib/cmake/rdps/rdpsConfig.cmake \
		lib/cmake/rdps/rdpsConfigVersion.cmake lib/cmake/rdps/rdpsTargets.cmake \
		bin/rdps share/doc/rdps/README.md share/doc/rdps/docs/kge.md share/man/man1/rdps.1; do
		[ -e "$P/$f" ] || fail "not installed: $f"
	done
	for f in "$src"/include/rdps/*.h; do
		[ -e "$P/include/rdps/$(basename "$f")" ] || fail "header not installed: rdps/$(basename "$f")"
	done
	# A page for every command the installed tool lists.
	for cmd in $("$P/bin/rdps" --help | awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
		n=$((n + 1))
		[ -e "$P/share/man/man1/rdps-$cmd.1" ] || fail "no man page rdps-$cmd.1 for 'rdps $cmd'"
	done
	[ "$n" -ge 10 ] || fail "'rdps --help' lists $n commands"
	for page in "$P"/share/man/man1/*.1; do
		warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
		[ -z "$warn" ] || fail "groff -man -ww $(basename "$page"): $warn"
		if command -v lexgrog > /dev/null; then
			lexgrog "$page" > /dev/null 2>&1 || fail "lexgrog $(basename "$page"): no whatis entry"
		fi
		grep -q '^\.SH SYNOPSIS' "$page" || fail "$(basename "$page"): no SYNOPSIS"
	done
	ok_since "$f0" "files, $(find "$P/share/man/man1" -name "*.1" | wc -l) man pages for $n commands"
}

check_man3() {
	local f page n=0 warn out f0=$failures
	local dir=$P/share/man/man3
	nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u \
		> "$work/functions"
	[ -s "$work/functions" ] || fail "librdps.so.0 exports no function"
	while read -r f; do
		n=$((n + 1))
		page=$dir/$f.3
		if [ ! -e "$page" ]; then
			fail "no man page $f(3) for the exported function $f"
			continue
		fi
		grep -q '^\.SH SYNOPSIS' "$page" || fail "$f.3: no SYNOPSIS"
		grep -q '^\.B #include <rdps/rdps.h>' "$page" || fail "$f.3: no #include <rdps/rdps.h>"
		grep -q "fB$(printf '%s' "$f" | sed 's/-/\\\\-/g')\\\\fR(" "$page" || fail "$f.3: no prototype of $f"
		grep -q '^\.SH DESCRIPTION' "$page" || fail "$f.3: no DESCRIPTION"
		grep -q '^Not described:' "$page" && fail "$f.3: $(grep '^Not described:' "$page")"
	done < "$work/functions"
	for page in "$dir"/*.3; do
		warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
		[ -z "$warn" ] || fail "groff -man -ww $(basename "$page"): $warn"
		lexgrog "$page" > /dev/null 2>&1 || fail "lexgrog $(basename "$page"): no whatis entry"
	done
	# Formatted (justified): runs of blanks as one.
	out=$(MANPATH=$P/share/man MANWIDTH=100 man 3 rdps_client_pull 2> "$work/man.err" | tr -s ' ')
	case $out in
	*"rdps_client_pull - "*"#include <rdps/rdps.h>"*"int rdps_client_pull(struct rdps_client *c"*"RETURN VALUE"*) ;;
	*) fail "MANPATH=$P/share/man man 3 rdps_client_pull: $(head -c 600 <<< "$out") $(cat "$work/man.err")" ;;
	esac
	[ "$(MANPATH=$P/share/man man -w 3 rdps_client_pull 2>&1)" = "$dir/rdps_client_pull.3" ] ||
		fail "man -w 3 rdps_client_pull: $(MANPATH=$P/share/man man -w 3 rdps_client_pull 2>&1)"
	[ -e "$dir/rdps_row_stride.3" ] || fail "control: no page for the static inline rdps_row_stride"
	[ -e "$dir/verbs_connect.3" ] && fail "control: a page for the internal verbs_connect"
	[ "$n" -ge 100 ] || fail "librdps.so.0 exports $n functions"
	echo "install/$what: $n exported functions, $(find "$dir" -name '*.3' | wc -l) section-3 pages"
	ok_since "$f0" "a man page per exported function; man 3 rdps_client_pull"
}

# start_server: P/bin/rdps server on a free loopback port; sets ipc.
start_server() {
	local try port
	ipc=$work/ip_config.txt
	for try in 1 2 3 4 5; do
		port=$((20000 + (RANDOM * 7 + $$ + try * 131) % 40000))
		# In use if something accepts there.
		(exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && continue
		printf '127.0.0.1 %d 1\n' "$port" > "$ipc"
		"$P/bin/rdps" server --ip_config "$ipc" --server_id 0 --transport tcp \
			--table entity:1000:16 --optimizer sgd --lr 1 --init zeros \
			> "$work/server.log" 2>&1 &
		server_pid=$!
		for _ in $(seq 100); do
			(exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && return 0
			kill -0 "$server_pid" 2> /dev/null || break
			sleep 0.05
		done
		kill "$server_pid" 2> /dev/null
		wait "$server_pid" 2> /dev/null
		server_pid=""
	done
	cat "$work/server.log" >&2
	return 1
}

# The client built with pkg-config: work/consumer-pc.
build_pc_consumer() {
	local flags f0=$failures
	export PKG_CONFIG_PATH=$P/lib/pkgconfig
	unset PKG_CONFIG_LIBDIR
	[ "$(pkg-config --modversion rdps 2>&1)" = "$version" ] ||
		fail "pkg-config --modversion rdps: $(pkg-config --modversion rdps 2>&1)"
	pkg-config --static --libs rdps > /dev/null 2>&1 ||
		fail "pkg-config --static --libs rdps: $(pkg-config --static --libs rdps 2>&1)"
	if ! flags=$(pkg-config --cflags --libs rdps); then
		fail "pkg-config --cflags --libs rdps"
		return
	fi
	case " $flags " in
	*" -I$P/include "*" -L$P/lib "*) ;;
	*) fail "pkg-config --cflags --libs rdps: '$flags' does not name $P/include and $P/lib" ;;
	esac
	# shellcheck disable=SC2086
	if ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -o "$work/consumer-pc" "$work/consumer.c" $flags \
		> "$work/cc.log" 2>&1; then
		cat "$work/cc.log" >&2
		fail "cc consumer.c \$(pkg-config --cflags --libs rdps)"
		return
	fi
	readelf -d "$work/consumer-pc" | grep -q 'NEEDED.*\[librdps\.so\.0\]' ||
		fail "consumer-pc does not need librdps.so.0"
	LD_LIBRARY_PATH=$P/lib ldd "$work/consumer-pc" | grep -q "librdps.so.0 => $P/lib/librdps.so.0" ||
		fail "consumer-pc does not load $P/lib/librdps.so.0: $(LD_LIBRARY_PATH=$P/lib ldd "$work/consumer-pc" | grep rdps)"
	ok_since "$f0" "pkg-config: cc consumer.c $flags"
}

# The client built by a CMake project: work/cmake-build/consumer.
build_cmake_consumer() {
	local runpath f0
	if ! cmake -S "$here/cmake-consumer" -B "$work/cmake-build" -G Ninja \
		-DCMAKE_PREFIX_PATH="$P" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
		-DRDPS_CONSUMER_SOURCE="$work/consumer.c" > "$work/cmake.log" 2>&1 ||
		! cmake --build "$work/cmake-build" >> "$work/cmake.log" 2>&1; then
		cat "$work/cmake.log" >&2
		fail "CMake consumer (find_package(rdps), rdps::rdps)"
	else
		f0=$failures
		grep -q "rdps $version from $P/lib/cmake/rdps" "$work/cmake.log" ||
			fail "find_package(rdps) did not take $P/lib/cmake/rdps: $(grep 'rdps .* from' "$work/cmake.log")"
		runpath=$(readelf -d "$work/cmake-build/consumer" | grep -E 'RUNPATH|RPATH')
		case "$runpath" in
		*"$P/lib"*) ;;
		*) fail "CMake consumer: rdps::rdps is not $P/lib's library ($runpath)" ;;
		esac
		ok_since "$f0" "CMake: find_package(rdps) from $P/lib/cmake/rdps, target_link_libraries(consumer rdps::rdps)"
	fi
}

check_consumers() {
	# Only P: the program's source is copied out of the checkout.
	cp "$here/consumer.c" "$work/consumer.c"
	build_pc_consumer
	build_cmake_consumer

	if ! start_server; then
		fail "P/bin/rdps server did not start"
		return
	fi
	ok "P/bin/rdps server on $(cat "$ipc")"
	if [ -x "$work/consumer-pc" ]; then
		if LD_LIBRARY_PATH=$P/lib "$work/consumer-pc" "$ipc" 0; then
			ok "pkg-config consumer against the server"
		else
			fail "pkg-config consumer against the server"
		fi
	fi
	if [ -x "$work/cmake-build/consumer" ]; then
		if LD_LIBRARY_PATH=$P/lib "$work/cmake-build/consumer" "$ipc" 100; then
			ok "CMake consumer against the server"
		else
			fail "CMake consumer against the server"
		fi
	fi
	if "$P/bin/rdps" shutdown --ip_config "$ipc" --transport tcp > "$work/shutdown.log" 2>&1; then
		for _ in $(seq 100); do
			kill -0 "$server_pid" 2> /dev/null || break
			sleep 0.05
		done
	fi
	if kill -0 "$server_pid" 2> /dev/null; then
		fail "the server did not exit after rdps shutdown: $(cat "$work/shutdown.log")"
	else
		wait "$server_pid"
		server_pid=""
	fi
}

case $what in
abi) check_abi ;;
man) check_man3 ;;
package)
	check_files
	check_consumers
	;;
*)
	echo "run.sh: unknown check '$what'" >&2
	exit 2
	;;
esac

if [ "$failures" -gt 0 ]; then
	echo "install/$what: $failures check(s) failed (files in $work)" >&2
	exit 1
fi
echo "install/$what: all checks passed"
rm -rf "$work"
