#!/bin/sh
# Installs every Debian 12 package rdps needs to build, test, benchmark and run
# its soft-RoCE guest suite. Idempotent: installs only what is missing.
# Run as root (or with sudo available).
# The Python package (python/rdps) uses Debian's python3 with
# python3-numpy, python3-torch, python3-cffi and python3-pytest; its tests that
# need DGL run in the venv deploy/install-venv.sh makes over it (PyPI's DGL);
# libopenblas0-pthread gives numpy and torch a fast BLAS (Debian's default,
# the reference BLAS, makes the example's matrix products ~10x slower).
set -eu

PKGS="build-essential cmake ninja-build pkg-config git
libcriterion-dev liburing-dev libmetis-dev libjansson-dev libxxhash-dev libssl-dev
libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
libfabric-dev libfabric-bin
iproute2 procps psmisc kmod cpio python3
spin
wordnet-base
qemu-system-x86 busybox-static linux-image-amd64
openmpi-bin
gnuplot-nox libzmq3-dev graphviz
groff-base man-db
clang libclang-rt-14-dev
python3-numpy python3-torch python3-cffi python3-pytest libopenblas0-pthread
python3-venv python3-pip python3-scipy python3-networkx python3-tqdm python3-psutil python3-requests"

SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
	SUDO=sudo
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
else
	echo "install-deps: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing
	echo "install-deps: packages done"
fi

"$(dirname "$0")/install-venv.sh"
