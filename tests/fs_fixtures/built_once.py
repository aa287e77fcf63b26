"""Instances that tell where they were built, for tests/test_workers.py (-o workers with
``workers_safe = "fork"``).

``__init__(log)`` appends ``init PID`` to the file log, ``destroy()`` appends ``destroy
PID``; ``/who`` (opened with ``direct_io``: every read reaches the class) reads ``BUILT
SERVED\\n``: the pid of the process whose ``__init__`` built the instance and of the one
serving the read, padded to the size asked.

- ``Fresh``: ``workers_safe = True``: each worker builds its own instance;
- ``Forked``: ``workers_safe = "fork"``: the workers are forks of the launcher, made after
  its instance was built: one ``__init__`` for all;
- ``Threaded``: ``workers_safe = "fork"``, but its ``__init__`` starts a thread: a fork
  would be unsafe, so each worker builds its own, with one line in the log.
"""

import errno
import os
import stat
import threading

from ldpfuse_py import FileInfo, FuseOSError, Operations

SIZE = 4096


class Fresh(Operations):
    workers_safe = True

    def __init__(self, log):
        self.log = log
        self.built = os.getpid()
        self._note("init")

    def _note(self, what):
        with open(self.log, "a") as f:
            f.write(f"{what} {os.getpid()}\n")

    def destroy(self, path):
        self._note("destroy")

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/who":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=SIZE)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "who"]

    def open(self, path, flags):
        return FileInfo(flags, fh=1, direct_io=True)

    def read(self, path, size, offset, fh):
        line = f"{self.built} {os.getpid()}\n".encode()
        return (line * (size // len(line) + 1))[:max(0, min(size, SIZE - offset))]


class Forked(Fresh):
    workers_safe = "fork"


class Threaded(Fresh):
    workers_safe = "fork"

    def __init__(self, log):
        super().__init__(log)
        self.stop = threading.Event()
        threading.Thread(target=self.stop.wait, daemon=True).start()
