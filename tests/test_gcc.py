"""gcc and make on the loopback example: sources, objects and binaries in the
mount.  gcc runs cc1, as and collect2/ld as child processes over vfork."""

import os

import pytest

from conftest import need

HELLO_C = r"""
#include <stdio.h>
#include "util.h"
int main(int argc, char **argv) {
    printf("hello %d %s\n", twice(21), argc > 1 ? argv[1] : "none");
    return 0;
}
"""
UTIL_H = "int twice(int x);\n"
UTIL_C = '#include "util.h"\nint twice(int x) { return 2 * x; }\n'
MAKEFILE = """\
CFLAGS = -O1 -Wall
prog: hello.o util.o
\t$(CC) -o $@ hello.o util.o
hello.o: hello.c util.h
util.o: util.c util.h
clean:
\trm -f prog *.o
.PHONY: clean
"""


def build_tree(root):
    proj = root / "proj"
    proj.mkdir()
    (proj / "hello.c").write_text(HELLO_C)
    (proj / "util.h").write_text(UTIL_H)
    (proj / "util.c").write_text(UTIL_C)
    (proj / "Makefile").write_text(MAKEFILE)
    # make compares times: give the sources the same old time in both trees.
    for name in os.listdir(proj):
        os.utime(proj / name, (1_500_000_000, 1_500_000_000))


@pytest.fixture
def cws(ws):
    need("gcc")
    ws.populate(build_tree)
    return ws


def test_gcc_c_compiles_object_in_mount_like_native(cws):
    cws.compare_sh("""
        cd "$D/proj"
        gcc -c hello.c -o hello.o
        gcc -c -O2 util.c
        ls
        nm hello.o | sort
        gcc -c missing.c 2>&1 || echo "gcc missing: $?"
    """)


def test_gcc_links_binary_outside_mount_from_mount_objects(cws):
    cws.compare_sh("""
        cd "$D/proj"
        gcc -c hello.c util.c
        gcc hello.o util.o -o "$O/hello"
        "$O/hello" arg
        gcc "$D/proj/hello.c" "$D/proj/util.c" -o "$O/hello2"
        "$O/hello2"
    """)


def test_gcc_links_and_runs_binary_inside_mount(cws):
    cws.compare_sh("""
        cd "$D/proj"
        gcc hello.c util.c -o hello
        ./hello inside
        "$D/proj/hello" absolute
    """)


@pytest.mark.parametrize("jobs", ["-j1", "-j2"])
def test_make_builds_and_rebuilds_only_what_changed_like_native(cws, jobs):
    need("make")
    # Parallel jobs finish in any order: compare the set of commands run.
    cws.compare_sh("""
        set -o pipefail
        make -C "$D/proj" $JOBS prog | sort
        make -C "$D/proj" $JOBS prog | sort
        touch "$D/proj/util.c"
        make -C "$D/proj" $JOBS prog | sort
        ls "$D/proj"
        cp "$D/proj/prog" "$O/prog" && "$O/prog" made
        make -C "$D/proj" clean
        ls "$D/proj"
    """, env_extra={"JOBS": jobs})
