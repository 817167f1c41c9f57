#!/bin/sh
# The Python venv of rdps (run by deploy/install-deps.sh; idempotent, about a
# second when present): $RDPS_VENV (default /opt/rdps-venv, one per machine
# whatever the checkout), made over Debian's /usr/bin/python3 with
# --system-site-packages, so that Debian's python3-torch (1.13), numpy, cffi,
# scipy... are its packages, plus the pinned PyPI packages of
# deploy/python-requirements.txt (DGL, the build backend of
# python/pyproject.toml), installed with --no-deps --require-hashes: pip never
# pulls PyPI's torch. Their wheels stay in $RDPS_VENV/wheelhouse, so that
# 'pip install ./python' builds offline:
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/rdps-venv/wheelhouse /opt/rdps-venv/bin/pip install ./python
# The tests that need DGL (ctest -R python) run with $RDPS_VENV/bin/python.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
venv=${RDPS_VENV:-/opt/rdps-venv}
req=$here/python-requirements.txt
stamp=$venv/rdps-requirements.txt

SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "install-venv: run as root or install sudo" >&2; exit 1; }
	SUDO=sudo
fi

if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp" &&
	"$venv/bin/python" -c 'import importlib.metadata as m; m.version("dgl"); m.version("scikit-build-core")' \
		>/dev/null 2>&1; then
	echo "install-venv: $venv present ($(sed -n 's/^\([a-z-]*==[^ ]*\).*/\1/p' "$req" | tr '\n' ' '))"
	exit 0
fi

if [ ! -x /usr/bin/python3 ]; then
	echo "install-venv: /usr/bin/python3 (Debian's python3) is missing" >&2
	exit 1
fi
echo "install-venv: making $venv over /usr/bin/python3 (--system-site-packages)"
$SUDO /usr/bin/python3 -m venv --system-site-packages "$venv"
$SUDO mkdir -p "$venv/wheelhouse"
# Every file checked against the hashes of the requirements.
$SUDO "$venv/bin/pip" download -q --no-deps --require-hashes --only-binary=:all: \
	-d "$venv/wheelhouse" -r "$req"
$SUDO "$venv/bin/pip" install -q --no-index --find-links "$venv/wheelhouse" --no-deps \
	--require-hashes -r "$req"
# Fails here, not in the tests, if DGL does not run on this torch.
DGLBACKEND=pytorch "$venv/bin/python" -c 'import torch, dgl; print("install-venv: DGL", dgl.__version__, "on torch", torch.__version__)'
$SUDO cp "$req" "$stamp"
