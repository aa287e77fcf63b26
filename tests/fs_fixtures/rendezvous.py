"""A thread_safe file system for tests/test_shared_channel.py: reading ``/wait`` blocks
until some caller has read ``/release`` (or 20 seconds have passed), then answers
``released`` (or ``timedout``). Two threads of one process can only meet here if the
second one's request reaches the file system while the first one's is still waiting."""

import errno
import stat
import threading

from ldpfuse_py import FuseOSError, Operations

ROOT = dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)


class Rendezvous(Operations):
    thread_safe = True

    def __init__(self):
        self.released = threading.Event()

    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        if path in ("/wait", "/release"):
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=9)
        raise FuseOSError(errno.ENOENT)

    def read(self, path, size, offset, fh):
        if path == "/release":
            self.released.set()
            data = b"release\n\n"
        else:
            data = b"released\n" if self.released.wait(20) else b"timedout\n"
        return data[offset:offset + size]
