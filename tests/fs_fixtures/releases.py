"""``Releases``: a class whose ``release`` is slow, fails or ends its process, for
tests/test_workers.py (-o workers: a worker's release is posted, not waited for).

``__init__(log)``; ``/f0`` .. ``/f63``, ``/slow``, ``/fail``, ``/die`` are opened with
``direct_io`` (every read reaches the class) under a handle this instance alone knows;
each read gives ``PID\\n`` (the serving process's pid) padded to the size asked. Its
``release`` appends ``release PID PATH`` to the file log, after:

- ``/slow``: 3 seconds' sleep;
- ``/fail``: none: it raises EIO instead (no line);
- ``/die``: none: in a worker process (not the launcher), the process ends at once.

``destroy()`` appends ``destroy PID``. ``workers_safe``: its instances may serve side by
side.
"""

import errno
import os
import stat
import time

from ldpfuse_py import FileInfo, FuseOSError, Operations

SIZE = 4096
NAMES = [f"f{i}" for i in range(64)] + ["slow", "fail", "die"]


def in_a_worker():
    with open("/proc/self/cmdline", "rb") as f:
        return b"workers.serve()" in f.read()


class Releases(Operations):
    workers_safe = True

    def __init__(self, log):
        self.log = log
        self.next = 1000
        self.handles = {}

    def _note(self, line):
        with open(self.log, "a") as f:
            f.write(line + "\n")

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path[1:] in NAMES:
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=SIZE)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", ".."] + NAMES

    def open(self, path, flags):
        self.next += 1
        self.handles[self.next] = path
        return FileInfo(flags, fh=self.next, direct_io=True)

    def read(self, path, size, offset, fh):
        if self.handles.get(fh) != path:
            raise FuseOSError(errno.EBADF)   # not a handle this instance gave
        line = f"{os.getpid()}\n".encode()
        return (line * (size // len(line) + 1))[:max(0, min(size, SIZE - offset))]

    def release(self, path, fh):
        if self.handles.pop(fh, None) != path:
            raise FuseOSError(errno.EBADF)
        if path == "/slow":
            time.sleep(3)
        elif path == "/fail":
            raise FuseOSError(errno.EIO)
        elif path == "/die" and in_a_worker():
            os._exit(1)
        self._note(f"release {os.getpid()} {path}")
        return 0

    def destroy(self, path):
        self._note(f"destroy {os.getpid()}")
