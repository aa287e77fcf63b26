"""File systems that probe how the shared mode's server calls a class, for
tests/test_shared_server.py and tests/test_credentials.py.

``SqliteTree`` keeps its files in an in-memory sqlite3 database whose connection is made in
``__init__`` (sqlite3 refuses to be used from another thread): it works only if every call
comes from the thread that built it.  ``Slow`` (thread_safe) answers ``/slow`` after
``delay`` seconds and ``/fast`` at once, and counts open handles in ``/handles``.
``Whoami`` answers any ``/whoami*`` with ``fuse_get_context()`` of the reader.
``PerProcess`` asks for the embedded mode; ``/pid`` holds the pid of the process that
built the object; ``BootLog`` also logs which processes started one (tests/test_embedded_fallback.py).
``ThreadSafeLoopback`` is the loopback example declared thread_safe. ``ReleaseLog`` is the
memory example that logs its flush, release and destroy calls, one line each, to the file
its argument names (tests/test_passed_fds.py).
"""

import errno
import importlib.util
import os
import sqlite3
import stat
import threading
import time

from ldpfuse_py import FuseOSError, Operations, fuse_get_context

ROOT = dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)


def regular(size, mode=0o444):
    return dict(st_mode=stat.S_IFREG | mode, st_nlink=1, st_size=size)


class SqliteTree(Operations):
    def __init__(self):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE TABLE f (path TEXT PRIMARY KEY, data BLOB)")
        self.fh = 0

    def _data(self, path):
        row = self.db.execute("SELECT data FROM f WHERE path = ?", (path,)).fetchone()
        if row is None:
            raise FuseOSError(errno.ENOENT)
        return bytes(row[0])

    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        return regular(len(self._data(path)), 0o644)

    def readdir(self, path, fh):
        return [".", ".."] + [p[1:] for (p,) in self.db.execute("SELECT path FROM f ORDER BY path")]

    def create(self, path, mode, fi=None):
        self.db.execute("INSERT OR REPLACE INTO f VALUES (?, ?)", (path, b""))
        self.fh += 1
        return self.fh

    def open(self, path, flags):
        self._data(path)
        self.fh += 1
        return self.fh

    def read(self, path, size, offset, fh):
        return self._data(path)[offset:offset + size]

    def write(self, path, data, offset, fh):
        old = self._data(path)
        new = old[:offset].ljust(offset, b"\0") + data + old[offset + len(data):]
        self.db.execute("UPDATE f SET data = ? WHERE path = ?", (new, path))
        return len(data)

    def truncate(self, path, length, fh=None):
        old = self._data(path)
        self.db.execute("UPDATE f SET data = ? WHERE path = ?", (old[:length].ljust(length, b"\0"), path))

    def unlink(self, path):
        self._data(path)
        self.db.execute("DELETE FROM f WHERE path = ?", (path,))


class Slow(Operations):
    thread_safe = True
    FILES = {"/slow": b"slow\n", "/fast": b"fast\n"}

    def __init__(self, delay="2"):
        self.delay = float(delay)
        self.lock = threading.Lock()
        self.open_handles = 0

    def _handles(self):
        return f"{self.open_handles}\n".encode()

    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        if path in self.FILES:
            return regular(len(self.FILES[path]))
        if path.startswith("/handles"):
            return regular(0)       # procfs style: read until nothing comes
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "slow", "fast", "handles"]

    def open(self, path, flags):
        self.getattr(path)
        with self.lock:
            self.open_handles += 1
        return 1

    def release(self, path, fh):
        with self.lock:
            self.open_handles -= 1

    def read(self, path, size, offset, fh):
        if path == "/slow" and offset == 0:
            time.sleep(self.delay)
        data = self._handles() if path.startswith("/handles") else self.FILES[path]
        return data[offset:offset + size]


class Whoami(Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        if path.startswith("/whoami"):
            return regular(0)
        raise FuseOSError(errno.ENOENT)

    def read(self, path, size, offset, fh):
        uid, gid, pid = fuse_get_context()
        return f"{uid} {gid} {pid}\n".encode()[offset:offset + size]


class PerProcess(Operations):
    ldpfuse_mode = "embedded"

    def __init__(self):
        self.pid = f"{os.getpid()}\n".encode()

    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        if path == "/pid":
            return regular(len(self.pid))
        raise FuseOSError(errno.ENOENT)

    def read(self, path, size, offset, fh):
        return self.pid[offset:offset + size]


class Indirect(Operations):
    """Names map to lower files through a table (`lower`: a directory holding `A` and `B`):
    `/a` -> A, `/b` -> B at first; rename changes the table, never a lower name. An open
    that reused an old decision would open the wrong lower file."""

    def __init__(self, lower):
        self.lower = lower
        self.table = {"/a": "A", "/b": "B"}

    def getattr(self, path, fh=None):
        if path == "/":
            return ROOT
        if path not in self.table:
            raise FuseOSError(errno.ENOENT)
        st = os.stat(os.path.join(self.lower, self.table[path]))
        return regular(st.st_size)

    def readdir(self, path, fh):
        return [".", ".."] + [p[1:] for p in self.table]

    def rename(self, old, new):
        if old not in self.table:
            raise FuseOSError(errno.ENOENT)
        self.table[new] = self.table.pop(old)

    def open(self, path, flags):
        if path not in self.table:
            raise FuseOSError(errno.ENOENT)
        from ldpfuse_py import Passthrough
        return Passthrough.open(os.path.join(self.lower, self.table[path]), flags)


class BootLog(PerProcess):
    """PerProcess that appends the pid of each process that starts it (its init()) to the
    file `log`: which processes built an instance of their own."""

    def __init__(self, log):
        super().__init__()
        self.log = log

    def init(self, path):
        with open(self.log, "a") as f:
            f.write(self.pid.decode())


def _example(name):
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "examples", name + ".py")
    spec = importlib.util.spec_from_file_location("example_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ThreadSafeLoopback(_example("loopback").Loopback):
    """The loopback example, declared thread_safe: the server answers each connection on a
    thread of its own, kept for the next connection when it ends."""

    thread_safe = True


class ReleaseLog(_example("memory").Memory):
    """The memory example; its flush, release and destroy calls are lines of the file log."""

    def __init__(self, log):
        super().__init__()
        self.log = log

    def _note(self, what):
        with open(self.log, "a") as f:
            f.write(what + "\n")

    def flush(self, path, fh):
        self._note("flush " + path)
        return super().flush(path, fh)

    def release(self, path, fh):
        self._note("release " + path)
        return super().release(path, fh)

    def destroy(self, path):
        self._note("destroy")
