"""A small file's data comes with its open's answer (issue 24, server/dispatch.c
fill_first_window): in the default mode, the open that makes a file's page cache fills it
when the file is no bigger than the first read would fetch, so that read asks nothing.
The program sees the same bytes and errors as when it reads them itself. With -o
workers=2 too (issue 34): the instance that opens the file reads it in the same call
(server/workers.c, workers_open)."""

import subprocess
import sys

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv, need
from test_stats import rows

# 1: the launcher's instance alone; 2: it and a worker process (loopback: workers_safe)
workers_too = pytest.mark.parametrize("workers", [1, 2])


def run(tmp_path, cmd, *flags, mode="shared", fs=None, fs_args=None, workers=1):
    if workers > 1:
        flags += ("-o", f"workers={workers}")
    lower = tmp_path / "lower"
    if not lower.exists():
        lower.mkdir()
        for i in range(5):
            (lower / f"f{i}").write_bytes(b"%d\n" % i * (i + 1) * 1000)
        (lower / "big").write_bytes(bytes(range(256)) * 1024)     # 256 KiB: read as asked
    if fs is None:
        fs, fs_args = LOOPBACK, [str(lower), "-o", "passthrough=no"]
    argv = ldpfuse_run_argv() + ["--mode", mode, *flags, "--mountpoint", str(tmp_path / "mnt"),
                                 fs, *fs_args, "--", "sh", "-c", cmd]
    return subprocess.run(argv, capture_output=True, timeout=120, env=base_env(), cwd="/")


@workers_too
def test_small_files_are_read_with_their_open(tmp_path, workers):
    m = tmp_path / "mnt"
    log = tmp_path / "trace.log"
    r = run(tmp_path, f"for i in 0 1 2 3 4; do cat {m}/f$i; done", "--stats", "--trace",
            "--log-file", str(log), workers=workers)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"".join(b"%d\n" % i * (i + 1) * 1000 for i in range(5))
    table = rows(log.read_text())      # --log-file: the table goes there too
    assert table["create/open"][0] == 5, table
    assert "read" not in table, table           # no read request: the data came along
    reads = [line for line in log.read_text().splitlines() if "] read(" in line]
    assert len(reads) == 5, reads               # the class's read(), once a file, whole
    for i, line in enumerate(reads):
        assert f"read('/f{i}', {2 * (i + 1) * 1000}, 0," in line, line


@workers_too
def test_a_larger_file_and_an_open_that_cannot_read_are_not_read_at_open(tmp_path, workers):
    m = tmp_path / "mnt"
    log = tmp_path / "trace.log"
    r = run(tmp_path, f"head -c 10 {m}/big >/dev/null; exec 3<>{m}/f1; {sys.executable} -c 'import os; "
            f"os.close(os.open(\"{m}/f0\", os.O_WRONLY)); os.close(os.open(\"{m}/f2\", os.O_RDWR | os.O_TRUNC))'",
            "--stats", "--trace", "--log-file", str(log), workers=workers)
    assert r.returncode == 0, r.stderr
    reads = [line for line in log.read_text().splitlines() if "] read(" in line]
    # head's own read of big (256 KiB: its first window only); f0 opened write-only, f1
    # read-write (small: read at open), f2 truncated: nothing to read
    assert [line.split("read(")[1].split(",")[0] for line in reads] == ["'/big'", "'/f1'"], reads
    assert rows(log.read_text())["read"][0] == 1, log.read_text()
    assert (tmp_path / "lower" / "f2").read_bytes() == b""


ODD = r'''
import errno, stat
from ldpfuse_py import FuseOSError, Operations

FILES = {"/short": (b"abc", 10), "/boom": (None, 5), "/long": (b"y" * 40, 10), "/ok": (b"fine\n", 5)}


class Odd(Operations):
    "Files whose read() disagrees with their getattr(), or fails."

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path not in FILES:
            raise FuseOSError(errno.ENOENT)
        return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": FILES[path][1]}

    def readdir(self, path, fh):
        return [".", ".."] + [p[1:] for p in FILES]

    def read(self, path, size, offset, fh):
        data = FILES[path][0]
        if data is None:
            raise FuseOSError(errno.EIO)
        return data[offset:]            # /long: more than asked
'''


def test_a_read_that_fails_or_disagrees_with_getattr_is_met_by_the_programs_own_read(tmp_path):
    (tmp_path / "odd.py").write_text(ODD)
    m = tmp_path / "mnt"
    cmd = (f"for f in short boom long ok; do {sys.executable} -c 'import sys\ntry:\n"
           f"    print(sys.argv[1], repr(open(sys.argv[1], \"rb\").read()))\n"
           f"except OSError as e:\n    print(sys.argv[1], e.errno)' {m}/$f; done")
    got = {}
    for mode in ("shared", "embedded"):
        r = run(tmp_path, cmd, mode=mode, fs=f"{tmp_path / 'odd.py'}:Odd", fs_args=[])
        assert r.returncode == 0, r.stderr
        got[mode] = r.stdout.decode().replace(str(m), "M")
    # the same in the default mode (read at open) as in the embedded one (read when asked)
    assert got["shared"] == got["embedded"], got
    # a short read is padded with zeros to the size getattr gave (libfuse: "otherwise the
    # rest of the data will be substituted with zeroes"), a long one cut, an error EIO
    assert got["shared"] == ("M/short b'abc" + "\\x00" * 7 + "'\nM/boom 5\nM/long b'yyyyyyyyyy'\n"
                             "M/ok b'fine\\n'\n"), got


# A cache its open filled with the file whole is read with no look at all (issue 34:
# vfs/pagecache.c pcache_brought_whole, pcache_whole_end): the program's reads are the
# kernel's, one system call each, as on a native file. dd reads its input on fd 0 (a dup2
# that fills the cache whole first, unless it is) with read() until 0.
@workers_too
def test_a_small_file_brought_whole_is_read_with_the_native_calls(tmp_path, workers):
    need("strace", "dd")
    native = tmp_path / "native"
    native.mkdir()
    (native / "f2").write_bytes(b"%d\n" % 2 * 3000)
    calls = {}
    for where in ("native", "mount"):
        log = tmp_path / f"{where}.log"
        cmd = f"strace -o {log} dd if=$D/f2 of=/dev/null bs=64k status=none"
        if where == "native":
            r = subprocess.run(["sh", "-c", cmd.replace("$D", str(native))], capture_output=True, timeout=60)
        else:
            r = run(tmp_path, cmd.replace("$D", str(tmp_path / "mnt")), workers=workers)
        assert r.returncode == 0, r.stderr
        text = log.read_text()
        calls[where] = (text.count("lseek("), text.count("read(0,"), text.count("newfstatat(0,"))
    assert calls["mount"] == calls["native"], calls


# ...and a change made after it, by another process, is seen as without it: an append past
# the end the reader met, a truncation under it.
CHANGED_AFTER = r'''
import os, subprocess, sys
d = sys.argv[1]
fd = os.open(d + "/f1", os.O_RDONLY)
out = [len(os.read(fd, 65536)), os.read(fd, 65536)]     # whole, then the end
subprocess.run(["sh", "-c", f"printf tail >> {d}/f1"], check=True)
out += [os.read(fd, 65536), os.pread(fd, 100, 3998), os.read(fd, 10)]
subprocess.run(["truncate", "-s", "3", f"{d}/f1"], check=True)
out += [os.pread(fd, 100, 0), os.read(fd, 100), os.fstat(fd).st_size]
print(out)
'''


@workers_too
def test_a_small_file_brought_whole_sees_later_changes_of_other_processes(tmp_path, workers):
    need("truncate")
    (tmp_path / "changed.py").write_text(CHANGED_AFTER)
    native = tmp_path / "native"
    native.mkdir()
    (native / "f1").write_bytes(b"1\n" * 2000)
    want = subprocess.run([sys.executable, str(tmp_path / "changed.py"), str(native)], capture_output=True,
                          timeout=60)
    assert want.returncode == 0, want.stderr
    assert want.stdout == b"[4000, b'', b'tail', b'1\\ntail', b'', b'1\\n1', b'', 3]\n", want.stdout
    # the default mode only: in the embedded one no process hears of another's truncation
    # (its caches are its own, docs/processes-and-modes.md), with or without this
    r = run(tmp_path, f"{sys.executable} {tmp_path / 'changed.py'} {tmp_path / 'mnt'}", workers=workers)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout
