"""A thread_safe file system that shows whether a handle is released while a call through it
is still running (tests/test_security.py): read() waits up to 3 s for the handle's
release() and says whether it came. Kernel FUSE never releases a file while an operation
on it is in flight (the file's last reference goes only after it); a file system whose fh is
an fd (the loopback) would otherwise read through a number the release closed and another
open has since reused."""

import errno
import stat
import threading
import time

from ldpfuse_py import FuseOSError, Operations


class ReleaseRace(Operations):
    thread_safe = True

    def __init__(self):
        self.lock = threading.Lock()
        self.next_fh = 1
        self.released = {}

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/f":
            now = time.time()
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=4, st_atime=now, st_mtime=now,
                        st_ctime=now)
        raise FuseOSError(errno.ENOENT)

    def open(self, path, flags):
        with self.lock:
            fh = self.next_fh
            self.next_fh += 1
            self.released[fh] = threading.Event()
        return fh

    def read(self, path, size, offset, fh):
        gone = self.released[fh].wait(3)
        return b"released-while-reading" if gone else b"data"

    def release(self, path, fh):
        self.released[fh].set()
        return 0
