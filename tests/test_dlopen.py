"""Libraries in a mount can be loaded: dlopen() by path (ctypes.CDLL), Python
C extensions imported from a mount directory, and a bare name found along an
LD_LIBRARY_PATH directory in the mount.  The dynamic loader opens and maps
files with its own system calls, so native/interpose/dlopen.c hands it a real
file with the library's bytes (the lower file, the filled page cache, or a
copy).  The library is built by gcc into the mount, then loaded; everything
is compared with the same commands on a native directory."""

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import LOOPBACK, MEMORY, need

FS_CASES = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
FS_IDS = ["loopback", "loopback-no-passthrough", "memory"]

LIB_C = r"""
int twice(int x) { return 2 * x; }
const char *who(void) { return "libtwice"; }
"""

CTYPES_PY = r"""
import ctypes, os
D = os.environ["D"]
lib = ctypes.CDLL(f"{D}/lib/libtwice.so")
print("twice", lib.twice(21))
lib.who.restype = ctypes.c_char_p
print(lib.who().decode())
print("loaded once", ctypes.CDLL(f"{D}/lib/libtwice.so")._handle == lib._handle)
try:
    ctypes.CDLL(f"{D}/lib/missing.so")
except OSError as e:
    print("missing:", str(e).replace(D, "$D"))
class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
info = DlInfo()
ctypes.CDLL(None).dladdr(ctypes.cast(lib.twice, ctypes.c_void_p), ctypes.byref(info))
print("dladdr names", info.dli_fname.decode().replace(D, "$D"), info.dli_sname.decode())
"""

EXT_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *greet(PyObject *self, PyObject *args)
{
    return PyUnicode_FromString("hello from a C extension");
}
static PyMethodDef methods[] = {{"greet", greet, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "hello", NULL, -1, methods};
PyMODINIT_FUNC PyInit_hello(void) { return PyModule_Create(&mod); }
"""


def mode_for(fs):
    """The memory example's tree is one per process except in the shared mode."""
    return "shared" if fs == MEMORY else None


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_ctypes_cdll_loads_library_built_in_mount(ws, fs, options):
    need("gcc")
    src = ws.write_script("twice.c", LIB_C)
    script = ws.write_script("load.py", CTYPES_PY)
    ws.compare_sh(f"""
        mkdir "$D/lib"
        gcc -shared -fPIC -o "$D/lib/libtwice.so" "{src}"
        "$PY" "{script}"
        LD_LIBRARY_PATH="$D/lib" "$PY" -c 'import ctypes; print("by name", ctypes.CDLL("libtwice.so").twice(5))'
    """, fs=fs, options=options, mode=mode_for(fs), env_extra={"PY": sys.executable})


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_python_imports_c_extension_from_mount(ws, fs, options):
    need("gcc")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        pytest.skip(f"no Python.h in {include}: the C extension cannot be built")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    src = ws.write_script("hello.c", EXT_C)
    ws.compare_sh(f"""
        mkdir "$D/pkg"
        gcc -shared -fPIC -I"{include}" -o "$D/pkg/hello{suffix}" "{src}"
        "$PY" -c 'import os, sys; sys.path.insert(0, os.environ["D"] + "/pkg"); import hello; print(hello.greet(), hello.__file__.replace(os.environ["D"], "$D"))'
    """, fs=fs, options=options, mode=mode_for(fs), env_extra={"PY": sys.executable})


DEPS_PY = r"""
import ctypes, os
D = os.environ["D"]
lib = ctypes.CDLL(f"{D}/plugin/libouter.so")
lib.outer.restype = ctypes.c_char_p
print(lib.outer().decode())
# another library of the mount, handed to the loader under a reused fd number
other = ctypes.CDLL(f"{D}/plugin/libother.so")
print("other", other.other(), other._handle != lib._handle)
"""


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_ctypes_cdll_of_a_library_whose_dependencies_are_in_the_mount(ws, fs, options):
    """libouter.so needs libinner.so (its RUNPATH: $ORIGIN/../deps), both in the mount,
    as a Python package's C extension needs the libraries shipped beside it (numpy's
    numpy.libs); then a third library is another library, not one loaded before."""
    need("gcc")
    script = ws.write_script("load_deps.py", DEPS_PY)
    ws.compare_sh(f"""
        mkdir "$D/plugin" "$D/deps"
        cd "$D"
        printf 'const char *inner(void) {{ return "inner, found by outer"; }}\\n' > inner.c
        printf 'const char *inner(void);\\nconst char *outer(void) {{ return inner(); }}\\n' > outer.c
        gcc -shared -fPIC -Wl,-soname,libinner.so -o deps/libinner.so inner.c
        gcc -shared -fPIC -Wl,-soname,libouter.so -o plugin/libouter.so outer.c -Ldeps -linner \\
            -Wl,-rpath,'$ORIGIN/../deps'
        printf 'int other(void) {{ return 7; }}\n' > other.c
        gcc -shared -fPIC -o plugin/libother.so other.c
        "$PY" "{script}"
    """, fs=fs, options=options, mode=mode_for(fs), env_extra={"PY": sys.executable})


# A symbol that is nowhere, looked up before this process made any other dl* call that
# could fail: dlerror() must still say why (ctypes hands its answer to PyErr_SetString).
MISSING_SYMBOL = """
import ctypes
try:
    ctypes.CDLL(None).ldpfuse_no_such_symbol_anywhere
except AttributeError as e:
    print("AttributeError", "ldpfuse_no_such_symbol_anywhere" in str(e))
"""


def test_dlerror_of_the_first_failed_lookup_says_why_as_natively(ws):
    """The preload's dlerror wrapper found libc's own lazily, with a dlsym that succeeded
    and so cleared the error: the first failed lookup of a process read NULL from dlerror()
    and ctypes crashed (ratarmount, which probes libfuse's symbols, died with SIGSEGV)."""
    native = subprocess.run([sys.executable, "-c", MISSING_SYMBOL], capture_output=True, text=True)
    r = ws.ldp_run([sys.executable, "-c", MISSING_SYMBOL], fs=MEMORY)
    assert native.stdout == "AttributeError True\n"
    assert (r.returncode, r.stdout) == (0, native.stdout), r.stderr
