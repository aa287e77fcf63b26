"""``Pids``: each instance tells which process it is, for tests/test_workers.py (-o workers).

``/f0`` .. ``/f63`` are opened with ``direct_io`` (every read reaches the class) under a
handle this instance alone knows (its own counter: another instance's read of it fails
EBADF); each read gives ``PID\\n`` (the serving process's pid) padded to the size asked,
up to the file's 4096 bytes; a read of ``/hang`` never returns (an hour).
``workers_safe``: its instances may serve side by side.
"""

import errno
import os
import stat
import time

from ldpfuse_py import FileInfo, FuseOSError, Operations

SIZE = 4096


class Pids(Operations):
    workers_safe = True

    def __init__(self):
        self.next = 1000
        self.handles = {}

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path[1:] in self._names():
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=SIZE)
        raise FuseOSError(errno.ENOENT)

    @staticmethod
    def _names():
        return [f"f{i}" for i in range(64)] + ["hang"]

    def readdir(self, path, fh):
        return [".", ".."] + self._names()

    def open(self, path, flags):
        self.next += 1
        self.handles[self.next] = path
        return FileInfo(flags, fh=self.next, direct_io=True)

    def read(self, path, size, offset, fh):
        if self.handles.get(fh) != path:
            raise FuseOSError(errno.EBADF)   # not a handle this instance gave
        if path == "/hang":
            time.sleep(3600)
        line = f"{os.getpid()}\n".encode()
        return (line * (size // len(line) + 1))[:max(0, min(size, SIZE - offset))]

    def release(self, path, fh):
        if self.handles.pop(fh, None) is None:
            raise FuseOSError(errno.EBADF)
        return 0
