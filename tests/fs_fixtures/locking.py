# A memory file system with fusepy's lock(path, fh, cmd, lock) and mfusepy's
# flock(path, fh, op): each call is one line in the log file given as the first
# argument, and the class decides: it refuses write locks and flocks on names that
# end in ".denied" (a lock held elsewhere, as a network file system would say), and
# its F_GETLK reports a write lock held by pid 4242 on names that end in ".remote".
import ctypes
import errno
import fcntl
import importlib.util
import os
from pathlib import Path

from ldpfuse_py import FuseOSError

_spec = importlib.util.spec_from_file_location(
    "memory_example", Path(__file__).resolve().parents[2] / "examples" / "memory.py")
_memory = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_memory)


class c_flock(ctypes.Structure):
    _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short),
                ("l_start", ctypes.c_longlong), ("l_len", ctypes.c_longlong),
                ("l_pid", ctypes.c_int)]


TYPES = {fcntl.F_RDLCK: "RDLCK", fcntl.F_WRLCK: "WRLCK", fcntl.F_UNLCK: "UNLCK"}
CMDS = {fcntl.F_GETLK: "F_GETLK", fcntl.F_SETLK: "F_SETLK", fcntl.F_SETLKW: "F_SETLKW"}


class Locking(_memory.Memory):
    thread_safe = False

    def __init__(self, log):
        super().__init__()
        self.log_path = log

    def note(self, line):
        with open(self.log_path, "a") as f:
            f.write(line + "\n")

    def lock(self, path, fh, cmd, lock):
        fl = c_flock.from_address(lock)
        self.note(f"lock {path} {CMDS.get(cmd, cmd)} {TYPES.get(fl.l_type, fl.l_type)} "
                  f"start={fl.l_start} len={fl.l_len} pid={'set' if fl.l_pid > 0 else fl.l_pid}")
        if cmd == fcntl.F_GETLK:
            if path.endswith(".remote"):
                fl.l_type, fl.l_pid = fcntl.F_WRLCK, 4242
            else:
                fl.l_type = fcntl.F_UNLCK
            return 0
        if path.endswith(".denied") and fl.l_type == fcntl.F_WRLCK:
            raise FuseOSError(errno.EAGAIN)
        return 0

    def flock(self, path, fh, op):
        names = [n for bit, n in ((fcntl.LOCK_SH, "LOCK_SH"), (fcntl.LOCK_EX, "LOCK_EX"),
                                  (fcntl.LOCK_UN, "LOCK_UN"), (fcntl.LOCK_NB, "LOCK_NB")) if op & bit]
        self.note(f"flock {path} {'|'.join(names)}")
        if path.endswith(".denied") and op & fcntl.LOCK_EX:
            raise FuseOSError(errno.EWOULDBLOCK)
        return 0
