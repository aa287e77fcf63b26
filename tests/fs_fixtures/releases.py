"""``Releases``: a class whose ``release`` is slow, fails or ends its process, for
tests/test_workers.py (-o workers: a worker's release is posted, not waited for).

``__init__(log)``; ``/f0`` .. ``/f63``, ``/slow``, ``/fail``, ``/die`` are served as
``Pids`` serves its files (``direct_io``, a handle this instance alone knows, reads give
``PID\\n``). Its ``release`` appends ``release PID PATH`` to the file log, after:

- ``/slow``: 3 seconds' sleep;
- ``/fail``: none: it raises EIO instead (no line);
- ``/die``: none: in a worker process (not the launcher), the process ends at once.

``destroy()`` appends ``destroy PID``. ``workers_safe``: its instances may serve side by
side.
"""

import errno
import os
import time

from ldpfuse_py import FuseOSError
from pids import Pids

NAMES = [f"f{i}" for i in range(64)] + ["slow", "fail", "die"]


def in_a_worker():
    with open("/proc/self/cmdline", "rb") as f:
        return b"workers.serve()" in f.read()


class Releases(Pids):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def _note(self, line):
        with open(self.log, "a") as f:
            f.write(line + "\n")

    @staticmethod
    def _names():
        return NAMES

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
