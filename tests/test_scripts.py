"""Scripts stored in the mount run as the kernel runs them: the interpreter named on the
#! line gets the script's own path (so `$0`, autoconf's ./configure and a venv's
bin/pip find what lies beside them), an interpreter that is itself a script in the
mount is followed, to the kernel's depth, and a bad #! line fails as natively."""

import base64
import hashlib
import os
import sys
import zipfile

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, need

FS = [pytest.param(LOOPBACK, id="loopback"), pytest.param(MEMORY, id="memory")]


def shared_only(fs):
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the memory example's files live in each process of the embedded mode: "
                    "a script one process writes is not there for the next")


SCRIPTS = r"""
cd "$D"
mk() { printf '%b' "$2" > "$1"; chmod +x "$1"; }
mk s0 '#!/bin/sh\necho "0=$0 args=$*"\n'
./s0 a b
"$D/s0" c
sh -c './s0 from-sh'
for i in 1 2 3 4 5 6; do mk s$i "#!$D/s$((i-1))\n"; done
for i in 1 4 5 6; do ./s$i x && echo "s$i ok" || echo "s$i rc=$?"; done
mk args '#! /bin/sh  -e  \necho "args: $0 $*"\n'
./args 1 2
mk noline '#!/bin/sh'
./noline && echo "noline ok"
mk long "#!/bin/sh $(printf '%0300d' 0)\n"
./long || echo "long rc=$?"
mk longname "#!/bin/$(printf '%0300d' 0)\necho run by the shell: ENOEXEC\n"
./longname
mk missing '#!/no/such/interpreter\n'
./missing || echo "missing rc=$?"
mk plain 'echo "plain $0"\n'
./plain
printf '#!/bin/sh\necho never\n' > notexec
./notexec || echo "notexec rc=$?"
mkdir -p sub && mk sub/rel '#!/bin/sh\necho "rel $0"\n'
sub/rel
cd sub && ./rel && ../s0 up
"""


@pytest.mark.parametrize("fs", FS)
def test_scripts_in_mount_get_their_own_path_and_kernel_shebang_rules(ws, fs):
    shared_only(fs)
    # s1..s6 name $D on their #! line: the native and the mount's differ in length
    ws.compare_sh(SCRIPTS, fs=fs, tree_ignore=tuple(f"s{i}" for i in range(1, 7)))


CONFIGURE_AC = """\
AC_INIT([hello], [1.0])
AC_CONFIG_SRCDIR([hello.c])
AC_CONFIG_AUX_DIR([build-aux])
AC_PROG_CC
AC_PROG_INSTALL
AC_CHECK_HEADERS([unistd.h])
AC_CONFIG_HEADERS([config.h])
AC_CONFIG_FILES([Makefile])
AC_OUTPUT
"""
MAKEFILE_IN = """\
CC = @CC@
CFLAGS = @CFLAGS@
hello: hello.c config.h
\t$(CC) $(CFLAGS) -o hello hello.c
"""
HELLO_C = """\
#include "config.h"
#include <stdio.h>
int main(void) { printf("%s %s unistd=%d\\n", PACKAGE_NAME, PACKAGE_VERSION, HAVE_UNISTD_H); return 0; }
"""


def autoconf_project(root):
    (root / "proj").mkdir()
    (root / "proj" / "configure.ac").write_text(CONFIGURE_AC)
    (root / "proj" / "Makefile.in").write_text(MAKEFILE_IN)
    (root / "proj" / "hello.c").write_text(HELLO_C)


@pytest.mark.parametrize("fs", FS)
def test_autoconf_configure_and_make_in_mount_like_native(ws, fs):
    """autoconf's ./configure finds its helper files (build-aux/install-sh) from $0."""
    need("autoconf", "automake", "gcc", "make")
    shared_only(fs)
    prefix = ws.start_from(autoconf_project, fs)
    ws.compare_sh(prefix + """
        cd "$D/proj"
        mkdir build-aux
        cp "$(automake --print-libdir)/install-sh" build-aux/
        autoconf
        autoheader
        ./configure --quiet
        make -s
        ./hello
        ls
    """, fs=fs, tree_ignore=("proj/config.log", "proj/config.status", "proj/autom4te.cache",
                             "proj/hello"),    # -g: the binary names its directory
                  timeout=180)


def demo_wheel(directory):
    """A wheel of a one-module package, made here: pip installs it with no index."""
    name, version = "ldpfuse_demo", "1.0"
    files = {
        "ldpfuse_demo.py": b"def hello():\n    return 'hello from the demo wheel'\n",
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{name}-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def test_venv_in_mount_runs_its_pip_like_native(ws):
    """bin/pip's #! line names the venv's python in the mount: the interpreter is in the
    mount too, and is followed there."""
    wheel = demo_wheel(ws.tmp)
    ws.compare_sh(f"""
        cd "$D"
        "$PY" -m venv v
        head -1 v/bin/pip
        v/bin/pip --version | cut -d' ' -f1
        v/bin/pip install -q --no-index "{wheel}"
        v/bin/python -c 'import ldpfuse_demo; print(ldpfuse_demo.hello())'
        v/bin/pip list 2>/dev/null | grep ldpfuse
        v/bin/python -c 'import sys; print(sys.prefix, sys.prefix != sys.base_prefix)'
    """, env_extra={"PY": sys.executable, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                  check_tree=False, timeout=300)   # the venv's files name their directory
