"""File systems whose file bytes are computed, for tests/test_cache.py and bench/run.py.

``Computed`` serves ``/big`` (2 GiB by default, ``-o size=N``) and ``/small`` (4 KiB):
byte ``i`` of a file is ``PATTERN[i % len(PATTERN)]``, so any range can be produced
without storing the file, and a test can compute what a range must hold.  Every call to
``read`` is counted in ``/reads`` (a small text file: the number of read calls and the
bytes they returned), so a test can tell a partial read from a whole-file copy.

``Liar`` answers every read with more bytes than asked; ``IgnoresOffset`` answers every
read from offset 0; ``ProcStyle`` reports ``st_size`` 0 for a file that holds 10000
bytes; ``Full`` refuses every write with ENOSPC; ``Live`` serves files opened with
``direct_io`` whose bytes change at every read, or never end.
"""

import errno
import stat
import time

from ldpfuse_py import FileInfo, FuseOSError, Operations

PATTERN = bytes(range(256)) * 16 + b"ldpfuse computed file\n"


def expected(offset, size, total):
    """The bytes a computed file of `total` bytes holds at [offset, offset+size)."""
    end = min(offset + size, total)
    if offset >= end:
        return b""
    n = len(PATTERN)
    start = offset % n
    reps = (start + (end - offset)) // n + 1
    return (PATTERN * reps)[start:start + end - offset]


class Computed(Operations):
    def __init__(self, size=str(2 << 30)):
        self.sizes = {"/big": int(size), "/small": 4096}
        self.calls = 0
        self.bytes = 0

    def _counter(self):
        return f"{self.calls} {self.bytes}\n".encode()

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in self.sizes:
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=self.sizes[path])
        if path == "/reads":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=len(self._counter()))
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "big", "small", "reads"]

    def open(self, path, flags):
        if path not in self.sizes and path != "/reads":
            raise FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        if path == "/reads":
            return self._counter()[offset:offset + size]
        data = expected(offset, size, self.sizes[path])
        self.calls += 1
        self.bytes += len(data)
        return data


class Liar(Computed):
    """read() returns twice what was asked."""

    def read(self, path, size, offset, fh):
        return expected(offset, 2 * size + 4096, self.sizes[path])


class IgnoresOffset(Computed):
    """read() always answers from offset 0, a full buffer every time."""

    def read(self, path, size, offset, fh):
        return expected(0, size, 1 << 40)


class ProcStyle(Operations):
    """/status says st_size 0 but holds 10000 bytes, as files in /proc do."""

    DATA = b"".join(b"line %05d\n" % i for i in range(1000))

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/status":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=0)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "status"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        return self.DATA[offset:offset + size]


class Full(Operations):
    """A writable root where every write fails with ENOSPC (files can be created)."""

    def __init__(self):
        self.files = {}

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in self.files:
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=0)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", ".."] + [p[1:] for p in self.files]

    def create(self, path, mode, fi=None):
        self.files[path] = b""
        return 0

    def open(self, path, flags):
        return 0

    def truncate(self, path, length, fh=None):
        return 0

    def read(self, path, size, offset, fh):
        return b""

    def write(self, path, data, offset, fh):
        raise FuseOSError(errno.ENOSPC)


class Live(Operations):
    """Files opened with ``direct_io``, as live files are: ``/clock`` (st_size 0) reads
    ``tick N``, N a new nanosecond clock value at each read at offset 0; ``/endless`` (st_size 0) never
    ends (every read gives all it is asked); ``/log`` keeps what is written to it, each
    write as it came, and ``/writes`` lists the (offset, size) of every write it got."""

    def __init__(self):
        self.tick = b""
        self.log = bytearray()
        self.writes = []

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in ("/clock", "/endless"):
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=0)
        if path == "/log":
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=len(self.log))
        if path == "/writes":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=len(self._writes()))
        raise FuseOSError(errno.ENOENT)

    def _writes(self):
        return "".join(f"{o} {n}\n" for o, n in self.writes).encode()

    def readdir(self, path, fh):
        return [".", "..", "clock", "endless", "log", "writes"]

    def open(self, path, flags):
        if path == "/writes":
            return 0
        return FileInfo(flags, fh=7, direct_io=True)

    def truncate(self, path, length, fh=None):
        del self.log[length:]
        return 0

    def read(self, path, size, offset, fh):
        if path == "/clock":
            if offset == 0:
                self.tick = f"tick {time.monotonic_ns()}\n".encode()
            return self.tick[offset:offset + size]
        if path == "/endless":
            return b"y" * size
        if path == "/writes":
            return self._writes()[offset:offset + size]
        return bytes(self.log[offset:offset + size])

    def write(self, path, data, offset, fh):
        assert fh == 7, fh
        self.writes.append((offset, len(data)))
        self.log[offset:offset + len(data)] = data
        return len(data)
