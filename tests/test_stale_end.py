"""Writes past a page cache's stale end, compared with the same processes natively.

A process's cache may end before the file does: in the embedded mode each process has a
cache of its own, which another process's appends and writes past the end never reach;
in both modes a change behind the mount (the loopback's lower file written directly) is
not in the cache a process holds. A write of that process past its cache's end then
extends the cache over bytes that are the file system's: the range between the old end
and the write must read as the file system's bytes (those of the other process, or the
zeros of a real gap), never as zeros the cache made up, and must never be written back
as zeros (docs/cache.md: grew_past_end). At 5c21ec9 a plain write, pwrite, writev,
pwritev, ftruncate or truncate up, posix_fallocate, copy_file_range or sendfile into the
file left that range as zeros in the writer's cache (the O_APPEND case alone was closed),
and so did stdio's own write of an fwrite past the end after an fseek (at 73d1939 still: one
larger than the stream's buffer, which glibc writes into the memfd itself); pwritev2's
RWF_APPEND wrote at the offset given, where the kernel appends.

Differential, fsx's idea: seeded random sequences of operations of several processes
(each with an fd of its own, opened by itself: a cache of its own in the embedded mode),
and of a writer behind the mount for the loopback, run on a file in the mount and on the
same bytes natively, every result printed with its step, the two outputs compared.
"""

import os
import sys

import pytest

from conftest import EXAMPLES, LOOPBACK, MEMORY, build_program

SQLITEFS = f"{EXAMPLES / 'sqlitefs.py'}:SQLiteFS"

SEEDS = int(os.environ.get("LDPFUSE_STALE_END_SEEDS", "6"))
OPS = int(os.environ.get("LDPFUSE_STALE_END_OPS", "150"))

# The driver: spawns WORKERS processes that each open $D/f themselves and obey commands
# read from their stdin; a seeded sequence of commands, each answered on one line. For
# the loopback, a writer behind the mount ("lower") writes the lower file directly (its
# path in LOWER; natively the same file). Every answer is printed as "step who op -> answer".
DRIVER = r'''
import os, random, subprocess, sys
D, SEED, OPS, WORKERS, BEHIND = os.environ["D"], int(sys.argv[1]), int(sys.argv[2]), 2, sys.argv[3]
path = f"{D}/f"
WORKER = r"""
import hashlib, mmap, os, sys, ctypes
path, behind = sys.argv[1], sys.argv[2] == "1"
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
for name in ("fseek", "fwrite", "fread", "fflush", "fclose"):
    getattr(libc, name).argtypes = None
libc.fseek.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fread.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fflush.argtypes = [ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
fd = os.open(path, os.O_RDWR)
afd = os.open(path, os.O_WRONLY | os.O_APPEND)
src = os.open(os.environ["SRC"], os.O_RDONLY)
def pat(tag, n):
    return (tag.encode() * n)[:n]
def readall(off, n):
    out = b""
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return out
def digest(b):
    return "%d:%s:%d" % (len(b), hashlib.md5(b).hexdigest()[:12], b.count(0))
for line in sys.stdin:
    op, *a = line.split()
    a = [int(x) for x in a[:2]] + a[2:]
    try:
        if op == "append":
            r = os.write(afd, pat(a[2], a[0]))
        elif op == "rwfappend":
            # RWF_APPEND: appended whatever the offset, which only says the fd's stays
            r = os.pwritev(fd, [pat(a[2], a[0])], 0, os.RWF_APPEND)
            r = "%d %d" % (r, os.lseek(fd, 0, os.SEEK_CUR))
        elif op == "pwrite":
            r = os.pwrite(fd, pat(a[2], a[1]), a[0])
        elif op == "write":
            os.lseek(fd, a[0], os.SEEK_SET)
            r = os.write(fd, pat(a[2], a[1]))
        elif op == "writev":
            os.lseek(fd, a[0], os.SEEK_SET)
            r = os.writev(fd, [pat(a[2], a[1] // 2), pat(a[2].upper(), a[1] - a[1] // 2)])
        elif op == "pwritev":
            r = os.pwritev(fd, [pat(a[2], a[1] // 3), pat(a[2].upper(), a[1] - a[1] // 3)], a[0])
        elif op == "truncate":
            os.ftruncate(fd, a[0]); r = 0
        elif op == "ptruncate":
            os.truncate(path, a[0]); r = 0
        elif op == "fallocate":
            os.posix_fallocate(fd, a[0], a[1]); r = 0
        elif op == "copy":
            r = os.copy_file_range(src, fd, a[0], 0, a[1])
        elif op == "sendfile":
            os.lseek(fd, a[0], os.SEEK_SET)
            r = os.sendfile(fd, src, 0, a[1])
        elif op == "stdio":
            f = libc.fopen(path.encode(), b"r+")
            libc.fseek(f, a[0], 0)
            w = libc.fwrite(pat(a[2], a[1]), 1, a[1], f)
            libc.fflush(f)
            libc.fseek(f, 0, 0)
            buf = ctypes.create_string_buffer(a[0] + a[1] + 8192)
            n = libc.fread(buf, 1, len(buf), f)
            libc.fclose(f)
            r = "%d %s" % (w, digest(buf.raw[:n]))
        elif op == "pread":
            r = digest(readall(a[0], a[1]))
        elif op == "mmap":
            # a read at the cache's end asks whether the file grew (docs/cache.md): the
            # mapping's length is then the file's in every mode
            os.pread(fd, 1, os.fstat(fd).st_size)
            end = os.fstat(fd).st_size
            if end == 0:
                r = "empty"
            else:
                with mmap.mmap(fd, end, mmap.MAP_SHARED, mmap.PROT_READ) as m:
                    r = digest(m[a[0] % end:a[0] % end + a[1]])
        elif op == "size":
            os.pread(fd, 1, os.fstat(fd).st_size)     # as for mmap
            r = os.fstat(fd).st_size
        elif op == "whole":
            r = digest(readall(0, 1 << 24))
        else:
            r = "?"
    except OSError as e:
        r = "error " + os.strerror(e.errno)
    print(r, flush=True)
"""
src = f"{os.environ['T']}/src"
os.environ["SRC"] = src
if not os.path.exists(src):
    with open(src, "wb") as f:
        f.write(bytes(range(65, 91)) * 4000)
lower = os.environ.get("LOWER_F") if BEHIND == "1" else None
with open(path, "wb") as f:
    f.write(b"a" * 5000)
procs = [subprocess.Popen([sys.executable, "-c", WORKER, path, BEHIND], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, bufsize=1) for _ in range(WORKERS)]
def ask(w, cmd):
    procs[w].stdin.write(cmd + "\n")
    procs[w].stdin.flush()
    return procs[w].stdout.readline().strip()
rng = random.Random(SEED)
end = 5000      # the file's end as the driver knows it: offsets past it, around it
tags = "bcdefghijklmnopqrstuvwxyz"
for step in range(OPS):
    w = rng.randrange(WORKERS)
    tag = tags[step % len(tags)]
    grow = rng.choice(["append", "rwfappend", "pwrite", "write", "writev", "pwritev", "truncate", "ptruncate",
                       "fallocate", "copy", "sendfile", "stdio", "behind"])
    read = rng.choice(["pread", "pread", "mmap", "size", "whole"])
    op = rng.choice([grow, grow, read])
    n = rng.choice([1, 7, 100, 4000, 4096, 5000, 9000, 70000])
    # writes at or past the file's end (a process's cache is not refreshed inside the range
    # it holds: docs/cache.md, the embedded mode), at its end often (sequential writers)
    if op in ("pread", "mmap"):
        off = rng.randrange(end + 4000)
    else:
        off = end + rng.choice([0, 0, rng.randrange(1, 100), rng.randrange(100, 20000)])
    if op == "behind":
        if lower is None:
            op = "pwrite"
        else:
            # the lower file written directly, past every wrapper (natively: the same file)
            appends = rng.random() < 0.5
            fd = os.open(lower, os.O_WRONLY | (os.O_APPEND if appends else 0))
            r = os.write(fd, (tag * n).encode()) if appends else os.pwrite(fd, (tag * n).encode(), off)
            os.close(fd)
            end = max(end, os.stat(lower).st_size)
            print(step, "-", op, off, n, "->", r)
            continue
    if op in ("pread", "mmap"):
        cmd = f"{op} {off} {n}"
    elif op in ("size", "whole"):
        cmd = op
    elif op in ("append", "rwfappend"):
        cmd = f"{op} {n} 0 {tag}"
    elif op in ("truncate", "ptruncate"):
        cmd = f"{op} {off} 0"
    elif op == "copy":
        cmd = f"copy {n} {off}"
    else:
        cmd = f"{op} {off} {n} {tag}"
    r = ask(w, cmd)
    print(step, w, cmd, "->", r, flush=True)
    if op in ("pread", "whole", "size", "mmap"):
        continue
    end = max(end, off + n if op not in ("truncate", "ptruncate") else off)
for p in procs:
    p.stdin.close()
    p.wait()
data = open(path, "rb").read()
print("end", len(data), data.count(0), __import__("hashlib").md5(data).hexdigest())
'''


def cases():
    # attr_timeout=0: a read at a cache's end asks the FS whether the file grew every time
    # (with a timeout it may take the size it was told a moment ago, as kernel FUSE does)
    # (sqlitefs: every process's instance, in the embedded mode, reads and writes one
    # database, whose state changes under the caches of the others)
    out = [(LOOPBACK, {"passthrough": "no", "attr_timeout": "0"}, "loopback"),
           (MEMORY, {"attr_timeout": "0"}, "memory"),
           (SQLITEFS, {"attr_timeout": "0"}, "sqlitefs")]
    return out


@pytest.mark.parametrize("seed", range(1, SEEDS + 1))
@pytest.mark.parametrize("fs,options,name", cases(), ids=[c[2] for c in cases()])
def test_writes_past_a_stale_cache_end_read_the_file_systems_bytes(ws, fs, options, name, seed):
    """Two processes (and for the loopback a writer behind the mount) grow one file and
    read it back, in lockstep on the mount and natively."""
    if fs == MEMORY and os.environ.get("LDPFUSE_TEST_MODE", "shared") == "embedded":
        pytest.skip("the memory example in the embedded mode is a file system per process: "
                    "another process's file is not this one's")
    script = ws.write_script("driver.py", DRIVER)
    behind = "1" if fs == LOOPBACK else "0"
    cmd = [sys.executable, script, str(seed), str(OPS), behind]
    native = ws.native_run(cmd, env_extra={"T": ws.tmp, "LOWER_F": ws.native / "f"}, timeout=300)
    assert native.returncode == 0, native.describe()
    fs_args = [ws.tmp / "fs.db"] if fs == SQLITEFS else None
    r = ws.ldp_run(cmd, fs=fs, fs_args=fs_args, options=options, timeout=600,
                   env_extra={"T": ws.tmp, "LOWER_F": ws.lower / "f"})
    assert r.returncode == 0, r.describe()
    want, got = native.stdout.splitlines(), r.stdout.splitlines()
    for w, g in zip(want, got):
        assert g == w, f"seed {seed}: first difference\nnative: {w}\nmount:  {g}"
    assert len(got) == len(want), r.describe()


# Real programs: a shell holds the file open (fd 3, read once: a cache that ends at 10
# bytes), another shell appends 20 bytes (its own cache in the embedded mode: fd 3 closed
# for it), then dd writes past the end through the held fd and od reads the file while fd
# 3 is still open (od inherits it: the same cache). At 5c21ec9 the embedded mode's od
# showed the appended bytes as zeros.
DD_PAST_A_STALE_END = r'''
printf 'aaaaaaaaaa' > "$D/f"
exec 3<>"$D/f"
head -c 3 <&3 >/dev/null
sh -c 'printf bbbbbbbbbbbbbbbbbbbb >> "$D/f"' 3<&-
printf XY | dd bs=1 seek=40 conv=notrunc status=none >&3
od -c "$D/f"
exec 3<&-
od -c "$D/f"
'''


def test_dd_past_the_end_of_a_file_another_shell_appended_to_keeps_its_bytes(ws):
    ws.compare(["sh", "-c", DD_PAST_A_STALE_END], options={"passthrough": "no"}, check_tree=False)


# A stream that writes, fsx-like (tests/programs/stdio_writes.c): seeded fseek (SEEK_SET,
# SEEK_CUR, SEEK_END, fsetpos), fwrite below and above the stream's buffer, fread, ftell,
# fflush and reopen on an "r+" stream of a file in the mount and of the same bytes natively,
# while an exec'd process appends to both (a cache of its own in the embedded mode) and, on
# the loopback, the lower file is appended to behind the mount. At 73d1939 a large fwrite
# after an fseek past the stale end left zeros over the other process's bytes.
STDIO_SEEDS = int(os.environ.get("LDPFUSE_STALE_END_STDIO_SEEDS", "8"))
STDIO_OPS = int(os.environ.get("LDPFUSE_STALE_END_STDIO_OPS", "400"))


@pytest.fixture(scope="module")
def stdio_writes(tmp_path_factory):
    return build_program(tmp_path_factory, "stdio_writes")


@pytest.mark.parametrize("fs,options,name", cases(), ids=[c[2] for c in cases()])
def test_a_stream_that_writes_past_a_stale_end_matches_the_same_stream_natively(ws, stdio_writes, fs, options, name):
    """Each seed starts from the same 7,500 bytes in the mount and natively; the program
    prints "same: ..." when every step and the final file matched."""
    if fs == MEMORY and os.environ.get("LDPFUSE_TEST_MODE", "shared") == "embedded":
        pytest.skip("the memory example in the embedded mode is a file system per process: "
                    "another process's file is not this one's")
    fs_args = [ws.tmp / "fs.db"] if fs == SQLITEFS else None
    lower = [str(ws.lower / "f")] if fs == LOOPBACK else []
    script = "\n".join(
        f'cat "$T/seed" > "$D/f" && cp "$T/seed" "$T/native-f" && '
        f'"$P" "$D/f" "$T/native-f" {seed} {STDIO_OPS} {" ".join(lower)} || exit 1'
        for seed in range(1, STDIO_SEEDS + 1))
    (ws.tmp / "seed").write_bytes(bytes(range(48, 123)) * 100)
    r = ws.ldp_run(["sh", "-c", script], fs=fs, fs_args=fs_args, options=options, timeout=600,
                   env_extra={"T": ws.tmp, "P": stdio_writes,
                              **({"STDIO_WRITES_ONE_MEMFD": "1"} if os.environ.get("LDPFUSE_TEST_MODE", "shared") == "shared" else {})})
    assert r.returncode == 0, r.describe()
    assert r.stdout.count("same:") == STDIO_SEEDS, r.describe()
