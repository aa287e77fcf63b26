"""File systems for tests/test_one_call_at_a_time.py: each read of ``/f0``..``/f7``
takes 0.2 s (a sleep, which lets go of the GIL, as a network read would) and counts how
many calls are inside the class at once; ``/most`` reads the highest count seen."""

import errno
import os
import stat
import threading
import time

from ldpfuse_py import FuseOSError, Operations

NAMES = [f"/f{i}" for i in range(8)]


class Overlap(Operations):
    """Not thread_safe: ldpfuse calls it one operation at a time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        # a fork while another thread is inside `with self.lock` leaves it held in the
        # child: renewed there, as processes-and-modes.md asks of every class
        os.register_at_fork(after_in_child=self._renew_lock)

    def _renew_lock(self):
        self.lock = threading.Lock()

    def __call__(self, op, *args):
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            return super().__call__(op, *args)
        finally:
            with self.lock:
                self.inside -= 1

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in NAMES or path == "/most":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=0)
        raise FuseOSError(errno.ENOENT)

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        if path == "/most":
            data = b"%d\n" % self.most
            return data[offset:offset + size]
        time.sleep(0.2)
        return b"x\n"[offset:offset + size]


class OverlapThreadSafe(Overlap):
    """The same class, thread_safe: its calls may overlap."""
    thread_safe = True


class SlowStart(Overlap):
    """The same class, 1 s to build: a fork made meanwhile finds the file system being
    started by another thread of the process."""

    def __init__(self):
        super().__init__()
        time.sleep(1)
