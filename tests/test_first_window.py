"""A small file's data comes with its open's answer (issue 24, server/dispatch.c
fill_first_window): in the default mode, the open that makes a file's page cache fills it
when the file is no bigger than the first read would fetch, so that read asks nothing.
The program sees the same bytes and errors as when it reads them itself."""

import subprocess
import sys

from conftest import LOOPBACK, base_env, ldpfuse_run_argv
from test_stats import rows


def run(tmp_path, cmd, *flags, mode="shared", fs=None, fs_args=None):
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


def test_small_files_are_read_with_their_open(tmp_path):
    m = tmp_path / "mnt"
    log = tmp_path / "trace.log"
    r = run(tmp_path, f"for i in 0 1 2 3 4; do cat {m}/f$i; done", "--stats", "--trace",
            "--log-file", str(log))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"".join(b"%d\n" % i * (i + 1) * 1000 for i in range(5))
    table = rows(log.read_text())      # --log-file: the table goes there too
    assert table["create/open"][0] == 5, table
    assert "read" not in table, table           # no read request: the data came along
    reads = [line for line in log.read_text().splitlines() if "] read(" in line]
    assert len(reads) == 5, reads               # the class's read(), once a file, whole
    for i, line in enumerate(reads):
        assert f"read('/f{i}', {2 * (i + 1) * 1000}, 0," in line, line


def test_a_larger_file_and_an_open_that_cannot_read_are_not_read_at_open(tmp_path):
    m = tmp_path / "mnt"
    log = tmp_path / "trace.log"
    r = run(tmp_path, f"head -c 10 {m}/big >/dev/null; exec 3<>{m}/f1; {sys.executable} -c 'import os; "
            f"os.close(os.open(\"{m}/f0\", os.O_WRONLY)); os.close(os.open(\"{m}/f2\", os.O_RDWR | os.O_TRUNC))'",
            "--stats", "--trace", "--log-file", str(log))
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
