# shellcheck shell=bash
# Helpers for scripts that run inside a soft-RoCE guest (see guest.sh). Source
# it with:  . "$RDPS_SOFTROCE_DIR/guest-lib.sh"
#
# Rendezvous between the two guests: there is no shared file system between
# them (each has its own results share), so a client simply retries its
# connect until a deadline (rdps_retry); the server side just starts listening.
# Servers should themselves run under `timeout` so that a dead peer turns into
# a failed script rather than a guest killed by the harness timeout.

# rdps_gid_index [DEV] [IPV4]: prints the GID table index of the RoCE v2 GID
# for IPV4 (default $RDPS_GUEST_ADDR) on DEV (default rxe0), port 1 - the value
# for perftest's -x and ibv_*_pingpong's -g. The table fills asynchronously
# after the address or the rxe link appears, so this waits up to 10 s.
rdps_gid_index() {
	local dev=${1:-rxe0} ip=${2:-$RDPS_GUEST_ADDR} want a b c d i line
	IFS=. read -r a b c d <<<"$ip"
	# sysfs spells ::ffff:a.b.c.d as 0000:...:ffff:aabb:ccdd.
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
	for ((i = 0; i < 100; i++)); do
		# One grep over the whole table: a shell loop over its 1024 entries
		# takes seconds under TCG.
		while IFS=: read -r line; do
			line=${line##*/}
			if [[ $(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$line" 2>/dev/null) == "RoCE v2" ]]; then
				echo "$line"
				return 0
			fi
		done < <(grep -lx "$want" /sys/class/infiniband/"$dev"/ports/1/gids/* 2>/dev/null)
		sleep 0.1
	done
	echo "rdps_gid_index: no RoCE v2 GID for $ip on $dev" >&2
	return 1
}

# rdps_retry SECONDS CMD...: runs CMD until it succeeds or SECONDS have passed
# (then returns CMD's last status). Wrap CMD in `timeout` if a single attempt
# can hang.
rdps_retry() {
	local limit=$1 st=0 end
	shift
	end=$((SECONDS + limit))
	while :; do
		st=0
		"$@" && return 0 || st=$?
		((SECONDS < end)) || break
		sleep 0.5
	done
	echo "rdps_retry: gave up after ${limit}s: $* (status $st)" >&2
	return "$st"
}
