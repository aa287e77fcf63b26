"""The Python side of the embedded backend (native/backend/embedded.c).

The preload library starts an interpreter in the first process that touches a mount (or
reuses the program's own, when the program is this Python), imports this module and calls
:func:`boot`, which builds one Operations object per mount from what ``ldpfuse-run`` put in
the environment. From then on the C side calls the objects directly; this module is only
used again to log exceptions.

Kept small: it is imported in every process that touches a mount.
"""
import os
import sys

from .fsspec import load_class, parse_options
from .operations import FileInfo, Passthrough

__all__ = ["boot", "log_exception", "Passthrough", "FileInfo"]

SEP = "\x1f"  # separates FS arguments in the environment (they may contain anything else)


def _env_list(name):
    value = os.environ.get(name, "")
    return value.split(SEP) if value else []


def log_line(text):
    """Append to the log (LDPFUSE_LOG_FILE, else stderr); never raises."""
    data = text if text.endswith("\n") else text + "\n"
    data = data.encode("utf-8", "backslashreplace")
    path = os.environ.get("LDPFUSE_LOG_FILE")
    try:
        if path:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        else:
            os.write(2, data)
    except OSError:
        pass


def log_exception(op, path, exc_type, exc, tb):
    """A method raised something other than an OSError: the caller gets EIO, the log
    gets the traceback with the operation and path."""
    import traceback

    text = "".join(traceback.format_exception(exc_type, exc, tb))
    log_line(f"ldpfuse[{os.getpid()}]: {op}({path!r}) raised, the caller gets EIO:\n{text}")


class _LogStream:
    """A file-like object for logging handlers: opens the log per write, so the host
    closing its fds (close_range in a child) cannot break it."""

    def write(self, text):
        log_line(text.rstrip("\n"))

    def flush(self):
        pass


def _configure_logging(host_owns):
    level_name = os.environ.get("LDPFUSE_LOG_LEVEL")
    if not level_name or "logging" not in sys.modules:
        return
    import logging

    handler = logging.StreamHandler(_LogStream())
    handler.setFormatter(logging.Formatter(f"ldpfuse[{os.getpid()}] %(name)s %(levelname)s: %(message)s"))
    # in a Python program, its own root logger is not ours to change
    logger = logging.getLogger("fuse" if host_owns else None)
    logger.addHandler(handler)
    logger.setLevel(level_name.upper())


def _takes_fileinfo(ops):
    """create(path, mode, fi) in fusepy's signature gets a FileInfo (with the open flags)."""
    func = getattr(type(ops), "create", None)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    return code.co_argcount >= 4 or bool(code.co_flags & 0x04)  # 0x04: *args


def boot(host_owns=0):
    """Build the file system objects; returns [(ops, use_ns, create_takes_fi), ...] in the
    order of LDPFUSE_MOUNTPOINTS."""
    mounts = []
    for i in range(int(os.environ.get("LDPFUSE_NMOUNTS", "0"))):
        spec = os.environ[f"LDPFUSE_FS_{i}"]
        args = _env_list(f"LDPFUSE_FS_{i}_ARGS")
        opts = parse_options(_env_list(f"LDPFUSE_FS_{i}_OPTS"))
        try:
            cls = load_class(spec, private_name=f"_ldpfuse_fs_{i}")
            ops = cls(*args, **opts)
            ops("init", "/") if hasattr(ops, "init") else None
        except BaseException as e:
            log_exception("init", spec, type(e), e, e.__traceback__)
            raise RuntimeError(f"{spec}: {type(e).__name__}: {e}") from None
        mounts.append((ops, bool(getattr(ops, "use_ns", False)), _takes_fileinfo(ops)))
    _configure_logging(host_owns)
    if host_owns:
        # the program is this Python: destroy() must run while the interpreter still does
        import atexit

        for ops, _, _ in mounts:
            atexit.register(_destroy, ops)
    return mounts


def _destroy(ops):
    try:
        ops("destroy", "/")
    except BaseException as e:
        log_exception("destroy", "/", type(e), e, e.__traceback__)
