# SPDX-License-Identifier: MIT
"""The package as 'cmake --install' ships it: under PREFIX/<RDPS_PYTHON_DIR>
(Debian's python3: lib/python3.X/dist-packages), loading PREFIX's
librdps.so.0 with nothing set (no RDPS_LIBRARY, no LD_LIBRARY_PATH, run
outside the checkout), so that a standalone job and a job on PREFIX/bin/rdps
servers started without tables (rdps launch --exec) both work."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, write_ip_config

SCRIPT = r"""
import sys, torch, rdps, rdps.distributed as dist
print("FILE", rdps.__file__)
print("LIB", rdps.library_path)
dist.initialize()
t = dist.DistTensor((6, 2), torch.float64, name="t")
t[[5, 0]] = torch.tensor([[1.5, 2.5], [3.5, 4.5]])
print("ROWS", t[[0, 5]].tolist(), dist.get_transport(), dist.get_num_trainers())
dist.finalize()
"""


def python_dir(build):
    cache = open(os.path.join(build, "CMakeCache.txt")).read()
    m = re.search(r"^RDPS_PYTHON_DIR:PATH=(.*)$", cache, re.M)
    assert m, "RDPS_PYTHON_DIR is not in the build's cache"
    return m.group(1)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RDPS_") and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def test_installed_package_uses_the_installed_library(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    site = prefix / python_dir(BUILD)
    for f in ("__init__.py", "_ffi.py", "_installed.py", "distributed/__init__.py",
              "distributed/optim.py"):
        assert (site / "rdps" / f).is_file(), "not installed: rdps/%s" % f
    lib = prefix / "lib" / "librdps.so.0"
    assert lib.exists()

    env = clean_env(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd="/", env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FILE %s" % (site / "rdps" / "__init__.py") in r.stdout, r.stdout
    assert os.path.realpath(r.stdout.split("LIB ")[1].split()[0]) == os.path.realpath(lib), \
        r.stdout
    assert "ROWS [[3.5, 4.5], [1.5, 2.5]] inproc 1" in r.stdout, r.stdout

    # The installed tool runs a job of the installed package.
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    ipc = write_ip_config(tmp_path, 1)
    r = subprocess.run([str(prefix / "bin" / "rdps"), "launch", "--ip_config", ipc, "--exec",
                        "--transport", "tcp", "--", sys.executable, str(script)], cwd="/",
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[trainer 0] ROWS [[3.5, 4.5], [1.5, 2.5]] tcp 1" in r.stdout, r.stdout


def test_library_search_order(tmp_path):
    """$RDPS_LIBRARY first; a wrong one is an ImportError naming it."""
    env = clean_env(PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"),
                    RDPS_LIBRARY=str(tmp_path / "nowhere.so"))
    r = subprocess.run([sys.executable, "-c", "import rdps"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "nowhere.so ($RDPS_LIBRARY)" in r.stderr, r.stderr
    # Without it, the source tree's package takes the build tree's library.
    if os.path.realpath(BUILD) != os.path.realpath(os.path.join(os.path.dirname(__file__),
                                                                "..", "..", "build")):
        pytest.skip("the build tree is not <checkout>/build")
    env.pop("RDPS_LIBRARY")
    r = subprocess.run([sys.executable, "-c", "import rdps; print(rdps.library_path)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert os.path.realpath(r.stdout.strip()) == os.path.realpath(
        os.path.join(BUILD, "librdps.so.0"))


def test_pip_install_from_the_checkout(tmp_path):
    """pip install ./python into a fresh venv (over Debian's python, as a
    user's), offline from the wheels deploy/install-venv.sh keeps: CMake
    builds librdps and the rdps tool, and the venv's package loads its own
    library (no RDPS_LIBRARY, run outside the checkout)."""
    wheelhouse = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "wheelhouse")
    if not os.path.isdir(wheelhouse):
        if os.environ.get("RDPS_REQUIRE_DGL") == "1":
            pytest.fail("no %s: deploy/install-venv.sh makes it" % wheelhouse)
        pytest.skip("no wheelhouse of deploy/install-venv.sh beside %s" % sys.executable)
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    src = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    env = clean_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=wheelhouse, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([str(venv / "bin" / "pip"), "install", src], env=env,
                       capture_output=True, text=True, timeout=840)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True).stdout.strip()
    r = subprocess.run([str(venv / "bin" / "python"), "-c", SCRIPT], cwd="/", env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FILE %s" % os.path.join(site, "rdps", "__init__.py") in r.stdout, r.stdout
    lib = os.path.join(site, "rdps", "lib", "librdps.so.0")
    assert os.path.realpath(r.stdout.split("LIB ")[1].split()[0]) == os.path.realpath(lib)
    assert "ROWS [[3.5, 4.5], [1.5, 2.5]] inproc 1" in r.stdout, r.stdout
    r = subprocess.run([str(venv / "bin" / "rdps"), "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage: rdps" in r.stdout
