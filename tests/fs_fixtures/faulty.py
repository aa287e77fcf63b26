"""File systems with deliberate bugs, for tests/test_faulty_fs.py.

Each serves a root directory holding a file ``f`` (b"hello\\n") and a file
``boom``; one method misbehaves.  The caller must get EIO, the log must name
the method, and the host process must go on and exit normally.
"""

import errno
import stat
import threading
import time

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


# ---- methods that do not return (tests/test_op_timeout.py): on the path /stuck, one
# method waits for ever; a thread_safe twin lets the other files be served meanwhile.

class TwoFilesAndStuck(TwoFiles):
    """'/f', '/boom' and '/stuck'; the subclasses block on '/stuck'. /stuck says it is
    larger than what an open reads along for a small file (server/dispatch.c,
    fill_first_window), so that its read() is the program's own."""

    STUCK_SIZE = 256 << 10

    def getattr(self, path, fh=None):
        if path == "/stuck":
            return dict(super().getattr("/f", fh), st_size=self.STUCK_SIZE)
        return super().getattr(path, fh)

    def readdir(self, path, fh):
        return super().readdir(path, fh) + ["stuck"]


def block_forever():
    threading.Event().wait()


class ReadBlocksForever(TwoFilesAndStuck):
    def read(self, path, size, offset, fh):
        if path == "/stuck":
            block_forever()
        return super().read(path, size, offset, fh)


class GetattrBlocksForever(TwoFilesAndStuck):
    def getattr(self, path, fh=None):
        if path == "/stuck":
            block_forever()
        return super().getattr(path, fh)


class OpenBlocksForever(TwoFilesAndStuck):
    def open(self, path, flags):
        if path == "/stuck":
            block_forever()
        return super().open(path, flags)


class ReadBlocksForeverThreadSafe(ReadBlocksForever):
    thread_safe = True


class GetattrBlocksForeverThreadSafe(GetattrBlocksForever):
    thread_safe = True


class OpenBlocksForeverThreadSafe(OpenBlocksForever):
    thread_safe = True


class OpenReturnsLate(TwoFilesAndStuck):
    """open('/stuck') answers after `delay` seconds (longer than the test's op_timeout);
    '/handles' lists the file handles open now, other than the reader's own."""

    def __init__(self, delay="5"):
        self.delay = float(delay)
        self.open_fhs = set()
        self.next_fh = 1

    def getattr(self, path, fh=None):
        if path == "/handles":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=0)
        return super().getattr(path, fh)

    def readdir(self, path, fh):
        return super().readdir(path, fh) + ["handles"]

    def open(self, path, flags):
        if path == "/stuck":
            time.sleep(self.delay)
        self.next_fh += 1
        self.open_fhs.add(self.next_fh)
        return self.next_fh

    def read(self, path, size, offset, fh):
        if path == "/handles":
            text = "".join(f"{n}\n" for n in sorted(self.open_fhs - {fh}))
            return text.encode()[offset:offset + size]
        return super().read(path, size, offset, fh)

    def release(self, path, fh):
        self.open_fhs.discard(fh)
        return 0


class ReadBlocksForeverWithWritable(ReadBlocksForever):
    """ReadBlocksForever, plus a writable '/w'; read('/stuck') first creates the real
    file `marker`, so that a test knows when the FS thread is stuck."""

    def __init__(self, marker):
        self.marker = marker
        self.data = b""

    def getattr(self, path, fh=None):
        if path == "/w":
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=len(self.data))
        return super().getattr(path, fh)

    def read(self, path, size, offset, fh):
        if path == "/stuck":
            open(self.marker, "w").close()
        if path == "/w":
            return self.data[offset:offset + size]
        return super().read(path, size, offset, fh)

    def truncate(self, path, length, fh=None):
        self.data = self.data[:length]

    def write(self, path, data, offset, fh):
        self.data = self.data[:offset] + data
        return len(data)


def block_forever_in_c():
    """Wait for ever inside C code that never returns to the interpreter, as a C library
    stuck on a lock does: a second lock of a plain pthread mutex (ctypes releases the
    GIL); signals do not end the wait, and Python's handlers never run meanwhile."""
    import ctypes

    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)     # PTHREAD_MUTEX_INITIALIZER is all zeros
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


class ReadBlocksForeverInC(TwoFilesAndStuck):
    """read('/stuck') first creates the real file `marker` (the test then knows the FS
    thread is stuck), then blocks for ever in C code."""

    def __init__(self, marker):
        self.marker = marker

    def read(self, path, size, offset, fh):
        if path == "/stuck":
            open(self.marker, "w").close()
            block_forever_in_c()
        return super().read(path, size, offset, fh)


class ReadStuckUntilReleased(TwoFilesAndStuck):
    """read('/stuck') creates `dir`/stuck (the test then knows the FS thread is in it) and
    waits until `dir`/release exists or `seconds` have passed; then it creates
    `dir`/returned, or `dir`/returned-by-itself if nobody released it, and returns.
    Directories can be made in the root (mkdir), to see which calls were run."""

    def __init__(self, dir, seconds):
        self.dir = dir
        self.seconds = float(seconds)
        self.dirs = set()

    def getattr(self, path, fh=None):
        if path in self.dirs:
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        return super().getattr(path, fh)

    def mkdir(self, path, mode):
        self.dirs.add(path)

    def read(self, path, size, offset, fh):
        if path == "/stuck":
            import os

            open(os.path.join(self.dir, "stuck"), "w").close()
            release = os.path.join(self.dir, "release")
            end = time.monotonic() + self.seconds
            while not os.path.exists(release) and time.monotonic() < end:
                time.sleep(0.02)
            returned = "returned" if os.path.exists(release) else "returned-by-itself"
            open(os.path.join(self.dir, returned), "w").close()
        return super().read(path, size, offset, fh)
