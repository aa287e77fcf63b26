"""The differential checker (tests/programs/differential.c, fsx's idea for every way of
reading a file): seeded random sequences of one API family run in lockstep on a 4 MiB
file served by the file system itself (a page cache: docs/cache.md) and on the same
bytes natively, every result compared at once. Families: stdio (the fseek family,
fread, fgetc/getc, fgets, getline/getdelim, ungetc, ftell/fgetpos, fscanf, fflush,
streams of several buffer sizes), syscalls (read/pread/readv/preadv/preadv2/lseek),
mmap, copy (sendfile, splice, copy_file_range into the mount and to a native file),
child (a forked and exec'd child, with and without LD_PRELOAD, reading the inherited fd
between the parent's reads), aio (aio_read, lio_listio: glibc's helper threads pread past
the wrappers), hints (readahead, posix_fadvise, preadv2 with RWF flags), pass (the fd
sent over a Unix socket with SCM_RIGHTS to a preloaded process, a bare one and the
process itself), mremap (mappings grown) and uring (io_uring reads through a ring made
with syscall(), as libuv makes its own; and through liburing's own ring, whose system
calls are inline, with the safety net off: linked, and loaded by dlopen).

Each seed opens the file anew and the mount keeps no idle cache
(LDPFUSE_CACHE_KEEP_MB=0), so every seed starts on a cache of holes: the bug this pins
(issue 31) was glibc's fseek reading an aligned block from the memfd's holes past every
wrapper, zeros in place of the data.

20 seeds x 10,000 ops for every family on every configuration (issue 31's standard), the
seeds cut into one run of the checker a core (LDPFUSE_DIFFERENTIAL_JOBS), all in one
mount. What keeps that within a few minutes a mode: the children of the child family
live through a seed (each inherits the fd once across fork and exec, then reads at the
parent's command; one in a thousand of its reads is still a child forked and exec'd for
it alone); the families that open the file anew (pass, uring, mremap) do so about 25
times a seed, as many fresh caches in all as the shorter runs had, where each costs a 4
MiB fill; the mapping families compare the served mapping with the native bytes read
once (the native file is still mapped, for mmap's and mremap's results).
LDPFUSE_DIFFERENTIAL_SEEDS and LDPFUSE_DIFFERENTIAL_OPS change the counts
(docs/testing.md), and docs/cache.md says what the last long run found."""

import os
import random
import tarfile

import pytest

from conftest import EXAMPLES, LOOPBACK, MEMORY, build_program, missing

ARCHIVE = f"{EXAMPLES / 'archive.py'}:Archive"
SIZE = 4 << 20
SEEDS = int(os.environ.get("LDPFUSE_DIFFERENTIAL_SEEDS", "20"))
OPS_ALL = os.environ.get("LDPFUSE_DIFFERENTIAL_OPS")
FAMILIES = ["stdio", "syscalls", "mmap", "copy", "child", "aio", "hints", "pass", "mremap", "uring"]
OPS = {family: int(OPS_ALL or 10000) for family in FAMILIES}
# checkers at once, each on a part of the seeds (one a core: the suite runs one test at a time)
JOBS = int(os.environ.get("LDPFUSE_DIFFERENTIAL_JOBS", min(len(os.sched_getaffinity(0)), 4)))
CONFIGS = {  # name: (fs, options)
    "memory": (MEMORY, {}),
    "archive": (ARCHIVE, {}),
    "loopback-no-passthrough": (LOOPBACK, {"passthrough": "no"}),
}


@pytest.fixture(scope="module")
def differential(tmp_path_factory):
    return build_program(tmp_path_factory, "differential")


def file_bytes():
    """4 MiB of lines: mostly short, some longer than a stream buffer or a cache window."""
    rng = random.Random(31)
    alphabet = bytes(range(32, 127))
    out = bytearray()
    while len(out) < SIZE:
        n = rng.randrange(1, 120) if rng.random() < 0.95 else rng.randrange(5000, 300000)
        chunk = rng.randbytes(min(n, 4096)).translate(bytes(alphabet[b % len(alphabet)] for b in range(256)))
        out += (chunk * (n // len(chunk) + 1))[:n] + b"\n"
    return bytes(out[:SIZE])


@pytest.mark.parametrize("family", list(OPS))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_read_of_a_served_file_matches_the_same_bytes_natively(ws, differential, config, family):
    fs, options = CONFIGS[config]
    data = file_bytes()
    native = ws.tmp / "native-f"
    native.write_bytes(data)
    fs_args = None
    if fs == LOOPBACK:
        (ws.lower / "f").write_bytes(data)
        prepare = ""
    elif fs == ARCHIVE:
        archive = ws.tmp / "f.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(native, arcname="f")
        fs_args = [archive]
        prepare = ""
    else:
        prepare = "export DIFFERENTIAL_CREATE=1\n"    # the checker writes it: in the embedded
        #                                              # mode a memory file system is the process's
    # copy_file_range's destination: in the mount where it can be written (the archive is
    # read-only: there the copy meets another file system, EXDEV as over kernel FUSE)
    scratch = "" if fs == ARCHIVE else ' "$D/scratch"'
    ops = OPS[family]
    script = prepare + checkers(family, SEEDS, ops, scratch)
    r = ws.ldp_run(["sh", "-c", script], fs=fs, fs_args=fs_args, options=options,
                   env_extra={"PROG": differential, "NATIVE": native, "LDPFUSE_CACHE_KEEP_MB": "0"},
                   timeout=120 + SEEDS * ops * 0.002)
    if family == "uring" and r.returncode == 3 and "the family cannot run here" in r.stdout:
        pytest.skip(f"the kernel refuses io_uring here: {r.stdout.strip()}")
    assert r.returncode == 0 and sorted(r.stdout.splitlines()) == sorted(
        f"ok {family} {n} {ops}" for _, n in parts(SEEDS)), r.describe()


def parts(seeds):
    """The seeds cut into JOBS runs: (first seed, seeds) each."""
    jobs = max(1, min(JOBS, seeds))
    cuts = [1 + seeds * i // jobs for i in range(jobs + 1)]
    return [(a, b - a) for a, b in zip(cuts, cuts[1:])]


def checkers(family, seeds, ops, scratch):
    """A shell script that runs the checker on each part of the seeds at once and fails
    if any of them fails."""
    lines = [f'"$PROG" {family} "$D/f" "$NATIVE" {first} {n} {ops}{scratch} & p{i}=$!'
             for i, (first, n) in enumerate(parts(seeds))]
    waits = [f'wait $p{i} || rc=$?' for i in range(len(lines))]
    return "\n".join(["rc=0", *lines, *waits, "exit $rc"]) + "\n"


@pytest.mark.parametrize("escapes", ["watch", "strict"])
def test_a_ring_made_with_inline_calls_reads_no_hole_under_the_safety_net(ws, differential, escapes):
    """liburing makes its system calls inline (Debian's 2.3 imports no syscall() from
    libc): no wrapper sees them, the safety net does. Under --watch-escapes each submission
    fills every cached fd whole first (interpose/uring.c); --strict refuses the ring."""
    data = file_bytes()
    native = ws.tmp / "native-f"
    native.write_bytes(data)
    seeds, ops = min(SEEDS, 5), min(OPS["uring"], 1000)
    script = f'export DIFFERENTIAL_CREATE=1\nexec "$PROG" uring "$D/f" "$NATIVE" 1 {seeds} {ops}\n'
    r = ws.ldp_run(["sh", "-c", script], fs=MEMORY,
                   env_extra={"PROG": differential, "NATIVE": native, "LDPFUSE_CACHE_KEEP_MB": "0",
                              "DIFFERENTIAL_INLINE": "1", "LDPFUSE_ESCAPES": escapes},
                   timeout=120 + seeds * ops // 100)
    if escapes == "strict":
        assert r.returncode == 3 and "io_uring_setup: ENOSYS" in r.stdout, r.describe()
        return
    if r.returncode == 3 and "the family cannot run here" in r.stdout:
        pytest.skip(f"the kernel refuses io_uring here: {r.stdout.strip()}")
    assert r.returncode == 0 and r.stdout == f"ok uring {seeds} {ops}\n", r.describe()


@pytest.fixture(scope="module")
def differential_liburing(tmp_path_factory):
    """The checker with liburing's ring: linked with -luring, and one that dlopens it."""
    if not os.path.exists("/usr/include/liburing.h"):
        missing("liburing-dev (/usr/include/liburing.h)")
    return {"linked": build_program(tmp_path_factory, "differential", "-DDIFFERENTIAL_LIBURING",
                                    "-DDIFFERENTIAL_LIBURING_LINKED", libs=["-luring"]),
            "dlopen": build_program(tmp_path_factory, "differential", "-DDIFFERENTIAL_LIBURING")}


@pytest.mark.parametrize("how", ["linked", "dlopen", "dlopen-in-a-thread"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_liburing_ring_reads_no_hole_with_the_net_off(ws, differential_liburing, config, how):
    """liburing (Debian 12's 2.3) makes io_uring_setup/enter/register inline: no wrapper
    sees them, and the safety net is off by default. A process that maps liburing, at its
    start or through a dlopen made while a served file is open (by the ring's thread, or by
    another one: the running threads are armed too), gets the net for the ring's calls only
    (interpose/escape.c, ESCAPES_RING): each submission fills every cached fd whole first.
    Before, the ring read the memfd's holes: zeros."""
    fs, options = CONFIGS[config]
    data = file_bytes()
    native = ws.tmp / "native-f"
    native.write_bytes(data)
    fs_args = None
    prepare = ""
    if fs == LOOPBACK:
        (ws.lower / "f").write_bytes(data)
    elif fs == ARCHIVE:
        archive = ws.tmp / "f.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(native, arcname="f")
        fs_args = [archive]
    else:
        prepare = "export DIFFERENTIAL_CREATE=1\n"
    seeds, ops = min(SEEDS, 5), min(OPS["uring"], 1000)
    script = prepare + f'exec "$PROG" uring "$D/f" "$NATIVE" 1 {seeds} {ops}\n'
    r = ws.ldp_run(["sh", "-c", script], fs=fs, fs_args=fs_args, options=options,
                   env_extra={"PROG": differential_liburing[how.split("-")[0]], "NATIVE": native,
                              "LDPFUSE_CACHE_KEEP_MB": "0",
                              **({"DIFFERENTIAL_DLOPEN_THREAD": "1"} if how == "dlopen-in-a-thread" else {})},
                   timeout=120 + seeds * ops // 100)
    if r.returncode == 3 and "the family cannot run here" in r.stdout:
        pytest.skip(f"the kernel refuses io_uring here: {r.stdout.strip()}")
    assert r.returncode == 0 and r.stdout == f"ok uring {seeds} {ops}\n", r.describe()
