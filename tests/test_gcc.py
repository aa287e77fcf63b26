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


BIG_C = r"""
/* an object of more than 1 MiB: a large table and many symbols (a string table far past
 * the 128 KiB a page cache reads first) */
#define N 300000
const unsigned NAME_table[N] = {
#include "table.inc"
};
#define F(i) unsigned NAME_f##i(unsigned x) { return NAME_table[(x * i) % N] + i; }
#define F10(i) F(i##0) F(i##1) F(i##2) F(i##3) F(i##4) F(i##5) F(i##6) F(i##7) F(i##8) F(i##9)
#define F100(i) F10(i##0) F10(i##1) F10(i##2) F10(i##3) F10(i##4) F10(i##5) F10(i##6) F10(i##7) F10(i##8) F10(i##9)
F100(1) F100(2) F100(3) F100(4) F100(5) F100(6) F100(7) F100(8) F100(9)
unsigned NAME_sum(void) { unsigned s = 0; for (unsigned i = 0; i < N; i += 977) s += NAME_table[i]; return s + NAME_f567(7); }
"""
BIG_MAIN = r"""
#include <stdio.h>
unsigned alpha_sum(void), beta_sum(void);
int main(void) { printf("%u %u\n", alpha_sum(), beta_sum()); return 0; }
"""


def big_project(root):
    proj = root / "big"
    proj.mkdir()
    (proj / "table.inc").write_text(",\n".join(str((i * 2654435761) % 4294967291) for i in range(300000)))
    for name in ("alpha", "beta"):
        (proj / f"{name}.c").write_text(BIG_C.replace("NAME", name))
    (proj / "main.c").write_text(BIG_MAIN)


def test_objects_over_1_mib_built_and_linked_in_a_memory_mount_are_the_native_bytes(ws):
    """Issue 31: ld and gcc read objects through stdio (fseek then fread); objects past
    128 KiB in a memory mount linked with "corrupt string table index" and readelf -s
    printed nothing, as glibc's fseek read zeros from the page cache's holes. Built with
    `ld -r` then gcc in the mount, every object and the program are the native bytes and
    readelf -s says the same."""
    from conftest import LDP_MODE, MEMORY
    need("gcc", "ld", "readelf", "sha256sum")
    if LDP_MODE == "embedded":
        pytest.skip("a memory file system of the embedded mode lives in each process: gcc's "
                    "children would not see each other's files")
    prefix = ws.start_from(big_project, MEMORY)
    native, _ = ws.compare_sh(prefix + """
        cd "$D/big"
        for n in alpha beta main; do gcc -c -O1 $n.c -o $n.o; done
        ld -r alpha.o beta.o -o ab.o
        gcc -o prog ab.o main.o
        ./prog
        ls -l alpha.o ab.o | awk '{print $5, $9}'
        sha256sum alpha.o beta.o main.o ab.o prog
        readelf -s ab.o | sha256sum
        readelf -s prog | sha256sum
        readelf -S ab.o | sha256sum
        objdump -h ab.o | tail -n +3 | sha256sum
        readelf -s ab.o | grep -c FUNC
    """, fs=MEMORY, timeout=300)
    sizes = [int(line.split()[0]) for line in native.stdout.splitlines()[1:3]]
    assert min(sizes) > 1 << 20, native.stdout
