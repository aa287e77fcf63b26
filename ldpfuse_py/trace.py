"""``ldpfuse-run --trace``: one log line per file system operation.

    ldpfuse[4242] open("/src/main.c", O_RDONLY) = 3  41us
    ldpfuse[4242] read("/src/main.c", 4096, 0, fh=3) = <1234 bytes>  12us
    ldpfuse[4242] getattr("/src/main.o") = ENOENT  6us

Each line has the process id, the operation, the path and its other arguments in
short form, then the result (an errno name for a failure) and the time the file
system took. The lines go to the ldpfuse log: stderr, or ``--log-file``.

The runtime wraps each mount's operations object in a :class:`TracedOps` only when
``LDPFUSE_TRACE=1`` (set by ``--trace``), so a run without it pays nothing.
"""

from __future__ import annotations

import errno
import os
import time

from . import operations
from .operations import Passthrough

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["TracedOps", "format_call", "format_result"]

_OPEN_FLAGS = [(getattr(os, n), n) for n in (
    "O_CREAT", "O_EXCL", "O_NOCTTY", "O_TRUNC", "O_APPEND", "O_NONBLOCK", "O_DSYNC",
    "O_DIRECT", "O_LARGEFILE", "O_DIRECTORY", "O_NOFOLLOW", "O_NOATIME", "O_CLOEXEC",
    "O_SYNC", "O_PATH", "O_TMPFILE") if hasattr(os, n)]
_ACCESS = [(os.R_OK, "R_OK"), (os.W_OK, "W_OK"), (os.X_OK, "X_OK")]


def open_flags(flags: int) -> str:
    """O_WRONLY|O_CREAT|O_TRUNC, as strace writes them."""
    names = [("O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE")[flags & 3]]
    rest = flags & ~3
    for bit, name in _OPEN_FLAGS:
        if name == "O_SYNC":  # O_SYNC includes O_DSYNC's bit
            if rest & bit == bit:
                names.append(name)
                rest &= ~bit
            continue
        if rest & bit:
            names.append(name)
            rest &= ~bit
    if rest:
        names.append(f"{rest:#o}")
    return "|".join(names)


def access_mode(amode: int) -> str:
    if amode == os.F_OK:
        return "F_OK"
    return "|".join(name for bit, name in _ACCESS if amode & bit) or str(amode)


def short(value: Any, limit: int = 40) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit - 4] + "...'"
    if value is None or isinstance(value, (int, float, bool)):
        return repr(value)
    if isinstance(value, Passthrough):
        return f"Passthrough(fd={value.fd})"
    if hasattr(value, "flags") and hasattr(value, "fh"):  # FileInfo, fuse_file_info
        return f"fi(fh={value.fh}, {open_flags(value.flags)})"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fh(value: Any) -> str:
    return f"fh={short(value)}"


# op -> how its arguments after the path are shown
_ARGS: dict[str, Callable[..., list[str]]] = {
    "open": lambda flags: [open_flags(flags) if isinstance(flags, int) else short(flags)],
    "create": lambda mode, fi=None: [f"{mode:#o}"] + ([short(fi)] if fi is not None else []),
    "read": lambda size, offset, fh: [str(size), str(offset), _fh(fh)],
    "write": lambda data, offset, fh: [short(data), str(offset), _fh(fh)],
    "truncate": lambda length, fh=None: [str(length)] + ([_fh(fh)] if fh is not None else []),
    "getattr": lambda fh=None: [_fh(fh)] if fh is not None else [],
    "chmod": lambda mode: [f"{mode:#o}"],
    "mkdir": lambda mode: [f"{mode:#o}"],
    "mknod": lambda mode, dev: [f"{mode:#o}", str(dev)],
    "access": lambda amode: [access_mode(amode)],
    "flush": lambda fh: [_fh(fh)],
    "release": lambda fh: [_fh(fh)],
    "releasedir": lambda fh: [_fh(fh)],
    "readdir": lambda fh: [_fh(fh)],
    "fsync": lambda datasync, fh: [str(datasync), _fh(fh)],
}


def format_call(op: str, path: str, args: tuple) -> str:
    shown = [short(path, 200)]
    fmt = _ARGS.get(op)
    try:
        shown += fmt(*args) if fmt else [short(a) for a in args]
    except (TypeError, ValueError):
        shown += [short(a) for a in args]
    return f"{op}({', '.join(shown)})"


def format_result(result: Any) -> str:
    if result is None:
        return "0"
    if isinstance(result, int) and not isinstance(result, bool) and result < 0:
        return errno.errorcode.get(-result, str(result))
    if isinstance(result, dict):
        if "st_mode" in result:
            mode = result.get("st_mode", 0)
            parts = [f"st_mode={mode:#o}"]
            if "st_size" in result:
                parts.append(f"st_size={result['st_size']}")
            return "{" + ", ".join(parts) + (", ...}" if len(result) > len(parts) else "}")
        return f"{{{len(result)} keys}}"
    if isinstance(result, list):
        return f"[{len(result)} entries]"
    return short(result)


def errno_name(e: OSError) -> str:
    return errno.errorcode.get(e.errno or 0, str(e.errno)) if e.errno else "EIO"


def _write_log(text: str) -> None:
    from ._runtime import log_line

    log_line(text)


class TracedOps:
    """Wraps an operations object: each call is timed and logged, then its result or
    exception is passed on unchanged (the caller sees exactly what it would have)."""

    def __init__(self, ops: Any, where: str = "", write: Callable[[str], None] = _write_log) -> None:
        self.ops = ops
        self.where = where
        self.write = write
        self.use_ns = getattr(ops, "use_ns", False)

    def __call__(self, op: str, path: str, *args: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            result = self.ops(op, path, *args)
            if op == "readdir" and not isinstance(result, (list, int)):
                result = list(result)  # to count it; the C side takes any iterable
        except OSError as e:
            self._line(op, path, args, errno_name(e), start)
            raise
        except BaseException as e:
            self._line(op, path, args, f"EIO ({type(e).__name__}: {short(str(e), 60)})", start)
            raise
        self._line(op, path, args, format_result(result), start)
        return result

    def _line(self, op: str, path: str, args: tuple, outcome: str, start: int) -> None:
        micros = (time.perf_counter_ns() - start) // 1000
        pid = operations.fuse_get_context()[2]  # the calling process, also in shared mode
        self.write(f"ldpfuse[{pid}] {format_call(op, path, args)} = {outcome}  {micros}us")
