# SPDX-License-Identifier: MIT
"""The package's cffi declarations (ABI mode: cffi lays the structs out
from them, nothing checks them against the headers at import) against the
C compiler's view of include/rdps/*.h: every struct the package declares
has the headers' size, and every field its offset and size; the constants
it copies have the headers' values. (The server config is declared up to
its tables only, the package setting nothing after them: those fields'
offsets are compared, and the buffer it allocates must hold the struct.)"""
import os
import subprocess

import pytest

from conftest import SRC

from rdps import _ffi


def struct_names():
    return [name for name in _ffi.ffi.list_types()[1] if name.startswith("rdps_")]


def test_structs_and_constants_match_the_headers(tmp_path):
    ffi = _ffi.ffi
    lines, expect = [], []
    for name in struct_names():
        t = ffi.typeof("struct %s" % name)
        if t.fields is None:  # opaque (struct rdps_client)
            continue
        c_name = name
        if name == "rdps_server_config_head":
            # the fields before the tables of struct rdps_server_config, in
            # a buffer of at least its size
            c_name = "rdps_server_config"
            lines.append('printf("server config fits: %%d\\n", sizeof(struct %s) <= %d);'
                         % (c_name, _ffi.SERVER_CONFIG_BYTES))
            expect.append("server config fits: 1")
        else:
            lines.append('printf("struct %s %%zu\\n", sizeof(struct %s));' % (name, name))
            expect.append("struct %s %d" % (name, ffi.sizeof(t)))
        for field, ft in t.fields:
            lines.append('printf("%s.%s %%zu %%zu\\n", offsetof(struct %s, %s), '
                         'sizeof(((struct %s *)0)->%s));' % (c_name, field, c_name, field,
                                                             c_name, field))
            expect.append("%s.%s %d %d" % (c_name, field, ft.offset, ffi.sizeof(ft.type)))
    consts = {"RDPS_DTYPE_F32": _ffi.DTYPE_F32, "RDPS_DTYPE_F64": _ffi.DTYPE_F64,
              "RDPS_DTYPE_I64": _ffi.DTYPE_I64, "RDPS_DTYPE_U8": _ffi.DTYPE_U8,
              "RDPS_OPT_SGD": _ffi.OPT_SGD, "RDPS_OPT_ADAGRAD_ROW": _ffi.OPT_ADAGRAD_ROW,
              "RDPS_OPT_ADAGRAD": _ffi.OPT_ADAGRAD, "RDPS_OPT_ADAM": _ffi.OPT_ADAM,
              "RDPS_OPT_NONE": _ffi.OPT_NONE, "RDPS_INIT_UNIFORM": _ffi.INIT_UNIFORM,
              "RDPS_INIT_ZEROS": _ffi.INIT_ZEROS, "RDPS_TABLE_NAME_MAX": _ffi.TABLE_NAME_MAX,
              "RDPS_SAMPLE_MAX_FANOUT": _ffi.SAMPLE_MAX_FANOUT,
              "RDPS_PARTITION_METIS": _ffi.PARTITION_METIS,
              "RDPS_PARTITION_RANDOM": _ffi.PARTITION_RANDOM,
              "RDPS_SAMPLE_RPC": _ffi.SAMPLE_RPC, "RDPS_SAMPLE_READ": _ffi.SAMPLE_READ}
    for c, v in consts.items():
        lines.append('printf("%s %%d\\n", (int)%s);' % (c, c))
        expect.append("%s %d" % (c, v))
    assert len(expect) > 50, "too few declarations compared: %d" % len(expect)
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <rdps/rdps.h>\n"
                   "int main(void)\n{\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(SRC, "include"), "-o", str(exe),
                        str(src)], capture_output=True, text=True)
    if r.returncode and "not found" in r.stderr:
        pytest.skip("no C compiler: %s" % r.stderr)
    assert r.returncode == 0, r.stderr
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    diff = [(e, g) for e, g in zip(expect, got) if e != g]
    assert not diff, "cffi (left) and the C compiler (right) disagree: %s" % diff[:10]
