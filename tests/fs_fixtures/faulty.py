"""File systems with deliberate bugs, for tests/test_faulty_fs.py.

Each serves a root directory holding a file ``f`` (b"hello\\n") and a file
``boom``; one method misbehaves.  The caller must get EIO, the log must name
the method, and the host process must go on and exit normally.
"""

import errno
import stat

from ldpfuse_py import FuseOSError, Operations

DATA = b"hello\n"


class TwoFiles(Operations):
    """The well-behaved base: '/', '/f' and '/boom', read-only."""

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in ("/f", "/boom"):
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1,
                        st_size=len(DATA))
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "f", "boom"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        return DATA[offset:offset + size]


class GetattrRaisesValueError(TwoFiles):
    def getattr(self, path, fh=None):
        if path == "/boom":
            raise ValueError("deliberate ValueError in getattr")
        return super().getattr(path, fh)


class ReadRaisesValueError(TwoFiles):
    def read(self, path, size, offset, fh):
        if path == "/boom":
            raise ValueError("deliberate ValueError in read")
        return super().read(path, size, offset, fh)


class ReaddirRaisesRuntimeError(TwoFiles):
    def readdir(self, path, fh):
        raise RuntimeError("deliberate RuntimeError in readdir")


class ReadReturnsStr(TwoFiles):
    def read(self, path, size, offset, fh):
        if path == "/boom":
            return "a str, not bytes"
        return super().read(path, size, offset, fh)


class GetattrReturnsNone(TwoFiles):
    def getattr(self, path, fh=None):
        if path == "/boom":
            return None
        return super().getattr(path, fh)
