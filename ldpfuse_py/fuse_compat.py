"""fusepy's ``fuse`` module (and mfusepy's), for file systems served by ldpfuse-run.

While ldpfuse loads a file system (a fusepy script, or the module of a
``file.py:Class`` / ``module:Class`` spec), ``import fuse`` and ``import mfusepy``
give this module, so a fusepy file system runs unchanged. Nothing named ``fuse``
is installed: outside that moment, and in the program itself, ``import fuse``
still finds the real fusepy if it is installed.

Three parts, in the order a fusepy script meets them:

- the names fusepy exports (``FUSE``, ``Operations``, ``FuseOSError``,
  ``LoggingMixIn``, ``fuse_get_context``, ``ENOTSUP``, ``fuse_exit``,
  ``fuse_file_info``, mfusepy's ``overrides`` and ``log_callback``);
- ``FUSE(operations, mountpoint, **options)``: the mount, for as long as the
  command runs; it returns when the command has ended (``fusepy_script``);
- :class:`FusepyOps`: what libfuse and fusepy's ``FUSE`` class do between the
  kernel and the operations object that matters here: ``raw_fi``, ``ro``,
  ``nothreads``, ``encoding``, operations set to ``None``, and fusepy's known
  bugs done right (a ``str`` from ``read``/``getxattr``), and mfusepy's additions
  (``readdir_with_offset``, ``init_with_config``).
"""

from __future__ import annotations

import errno
import os

import _thread

from .fusepy_script import FINISH_SECONDS, MountLoop, ScriptRun
from .operations import (
    ENOTSUP,
    FileInfo,
    FuseOSError,
    LoggingMixIn,
    Operations,
    Passthrough,
    fuse_get_context,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = [
    "ENOTSUP",
    "FUSE",
    "FileInfo",
    "FuseOSError",
    "LoggingMixIn",
    "Operations",
    "Passthrough",
    "fuse_exit",
    "fuse_file_info",
    "fuse_get_context",
    "log_callback",
    "overrides",
    "ENOATTR",
    "ReadDirResult",
    "fuse_config",
    "fuse_conn_info",
    "set_st_attrs",
    "time_of_timespec",
]

# mfusepy's name for the errno of a missing extended attribute (ENODATA on Linux)
ENOATTR = getattr(errno, "ENOATTR", errno.ENODATA)

# mfusepy exposes the libfuse version it found; scripts that branch on it take
# the FUSE 2 path, whose calling conventions are the ones ldpfuse implements.
fuse_version_major = 2
fuse_version_minor = 9

# fusepy's FUSE.OPTIONS (flags passed as -f, -d, -s to libfuse)
OPTIONS = (("foreground", "-f"), ("debug", "-d"), ("nothreads", "-s"))

# FUSE() options and what becomes of them here. Honoured: see FusepyOps and the
# launcher (attr_timeout). Everything else is accepted and ignored.
HONOURED = {"raw_fi", "encoding", "ro", "nothreads", "attr_timeout", "use_ino",
            "allow_other", "allow_root", "default_permissions"}    # docs/security.md


def _debug(msg: str) -> None:
    import logging

    logging.getLogger("fuse").debug(msg)


class fuse_file_info(FileInfo):
    """What a ``raw_fi=True`` file system receives instead of a file handle:
    ``fh``, ``flags``, ``direct_io``, ``keep_cache`` (and fusepy's other fields,
    kept for scripts that set them; ldpfuse does not use them)."""

    __slots__ = ("writepage", "flush", "nonseekable", "lock_owner")

    def __init__(self, flags: int = 0) -> None:
        super().__init__(flags)
        self.writepage = 0
        self.flush = 0
        self.nonseekable = 0
        self.lock_owner = 0


class fuse_conn_info:
    """What ``init_with_config(conn_info, config)`` receives as ``conn_info``: libfuse's
    connection parameters (read-only here: there is no kernel connection to tune)."""

    def __init__(self) -> None:
        self.proto_major = 7
        self.proto_minor = 31
        self.async_read = 0
        self.max_write = 1 << 20
        self.max_readahead = 1 << 17
        self.max_read = 0
        self.capable = 0
        self.want = 0
        self.max_background = 0
        self.congestion_threshold = 0
        self.time_gran = 1


class fuse_config:
    """libfuse 3's ``struct fuse_config``. ldpfuse implements the FUSE 2 calling
    conventions (``fuse_version_major == 2``), so ``init_with_config`` receives None for
    it, as mfusepy does on FUSE 2; the class exists for scripts that name it."""


class FUSE:
    """``FUSE(operations, mountpoint, raw_fi=False, encoding='utf-8', **options)``

    Under ldpfuse-run this is the mount of ``operations`` at ``mountpoint`` for as long
    as the command given after ``--`` runs: as fusepy's, the call returns when the file
    system is unmounted (the command has ended), and the script's code after it runs
    then (see :mod:`ldpfuse_py.fusepy_script`). fusepy's options are accepted:
    ``raw_fi``, ``ro``, ``nothreads`` (every operation on the thread that called
    ``FUSE()``), ``encoding``, ``attr_timeout``, ``use_ino`` and the access options
    ``allow_other``, ``allow_root``, ``default_permissions`` (docs/security.md) are
    honoured; the others (``foreground``, ``fsname``, ...) mean nothing without a kernel
    mount and are ignored (logged at debug level).
    """

    OPTIONS = OPTIONS

    def __init__(self, operations: Any, mountpoint: str, raw_fi: bool = False,
                 encoding: str = "utf-8", **kwargs: Any) -> None:
        run = ScriptRun.current
        if run is None:
            raise RuntimeError(
                "FUSE() mounts for ldpfuse-run; run this script as "
                "`ldpfuse-run SCRIPT.py ARG... -- COMMAND`")
        check_operations(operations)
        self.operations = operations
        self.mountpoint = os.fsdecode(mountpoint) if mountpoint is not None else None
        self.raw_fi = bool(raw_fi)
        self.encoding = encoding
        self.options = dict(kwargs)
        self.use_ns = bool(getattr(operations, "use_ns", False))
        self.run = run
        self.loop = MountLoop()
        try:
            run.publish(self)
        except BaseException:
            self.loop.serving = False
            raise
        self.loop.serve()   # until the command ends

    def ignored_options(self) -> list[str]:
        return sorted(k for k in self.options if k not in HONOURED)

    def wrap(self, ro: bool = False) -> FusepyOps:
        return FusepyOps(self.operations, raw_fi=self.raw_fi, encoding=self.encoding,
                         ro=ro or _true(self.options.get("ro")),
                         nothreads=_true(self.options.get("nothreads")),
                         use_ino=_true(self.options.get("use_ino")), call=self)

    def __repr__(self) -> str:
        return f"FUSE({type(self.operations).__name__}, {self.mountpoint!r}, {self.options})"


def _true(value: Any) -> bool:
    """An option's value as fusepy passes it to libfuse: True, 'true', 1, '1' are set."""
    if isinstance(value, str):
        return value.lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def check_operations(operations: Any) -> None:
    """The object fusepy's FUSE() calls as ``operations(op, path, *args)``: an
    ``Operations`` (or anything with fusepy's ``__call__`` dispatch). Anything else would
    fail at the first operation; it is refused with one line now."""
    if isinstance(operations, Operations):
        return
    if isinstance(operations, type):
        raise TypeError(f"FUSE() needs an instance, got the class {operations.__name__} "
                        f"(write {operations.__name__}())")
    if callable(operations) and callable(getattr(operations, "getattr", None)):
        return  # fusepy's duck typing: a __call__ dispatch and the methods
    raise TypeError(f"FUSE() needs an Operations object (class {type(operations).__name__}"
                    f"(Operations): ...), got a {type(operations).__name__}")


def fuse_exit() -> None:
    """fusepy's fuse_exit() stops the kernel loop. There is none here: the
    mount lasts as long as the command; this is logged and does nothing."""
    _debug("fuse_exit() called: ignored (the mount ends with the command)")


def overrides(parent_class: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """mfusepy's decorator: checks that the method exists in ``parent_class``."""

    def check(method: Callable[..., Any]) -> Callable[..., Any]:
        # fusepy's "not implemented" None (bmap, lock) counts as a method to override
        if not hasattr(parent_class, method.__name__):
            raise AssertionError(f"{method.__name__} does not override a method of {parent_class.__name__}")
        return method

    return check


def log_callback(method: Callable[..., Any]) -> Callable[..., Any]:
    """mfusepy's decorator: log one method's calls at DEBUG on 'fuse.log-mixin'."""
    import functools

    @functools.wraps(method)
    def logged(self: Any, *args: Any) -> Any:
        import logging

        log = logging.getLogger("fuse.log-mixin")
        if not log.isEnabledFor(logging.DEBUG):
            return method(self, *args)
        log.debug("-> %s %s", method.__name__, repr(args))
        ret: Any = "[Unhandled Exception]"
        try:
            ret = method(self, *args)
            return ret
        except OSError as e:
            ret = str(e)
            raise
        finally:
            log.debug("<- %s %s", method.__name__, repr(ret))

    return logged


def time_of_timespec(ts: Any, use_ns: bool = False) -> int | float:
    """fusepy's helper: a c_timespec (or anything with tv_sec/tv_nsec) as seconds or ns."""
    if use_ns:
        return ts.tv_sec * 10 ** 9 + ts.tv_nsec
    return ts.tv_sec + ts.tv_nsec / 1e9


def set_st_attrs(st: Any, attrs: dict, use_ns: bool = False) -> None:
    """fusepy's helper: copy a getattr dict onto a stat-like object."""
    for key, val in attrs.items():
        if key in ("st_atime", "st_mtime", "st_ctime", "st_birthtime"):
            spec = getattr(st, key + "spec", None)
            if spec is None:
                setattr(st, key, val)
                continue
            if use_ns:
                spec.tv_sec, spec.tv_nsec = divmod(int(val), 10 ** 9)
            else:
                spec.tv_sec = int(val)
                spec.tv_nsec = int((val - int(val)) * 10 ** 9)
        elif hasattr(st, key):
            setattr(st, key, val)


def _ctypes_names() -> dict[str, Any]:
    """fusepy's ctypes structures that scripts import for type checks or helpers
    (made on first use: importing ctypes costs milliseconds)."""
    import ctypes

    class c_timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    class c_utimbuf(ctypes.Structure):
        _fields_ = [("actime", c_timespec), ("modtime", c_timespec)]

    class c_stat(ctypes.Structure):  # x86_64 / aarch64-compatible field names
        _fields_ = [("st_dev", ctypes.c_ulonglong), ("st_ino", ctypes.c_ulong),
                    ("st_nlink", ctypes.c_ulong), ("st_mode", ctypes.c_uint),
                    ("st_uid", ctypes.c_uint), ("st_gid", ctypes.c_uint),
                    ("__pad0", ctypes.c_int), ("st_rdev", ctypes.c_ulonglong),
                    ("st_size", ctypes.c_longlong), ("st_blksize", ctypes.c_long),
                    ("st_blocks", ctypes.c_long), ("st_atimespec", c_timespec),
                    ("st_mtimespec", c_timespec), ("st_ctimespec", c_timespec)]

    class c_statvfs(ctypes.Structure):
        _fields_ = [(name, ctypes.c_ulong) for name in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_fsid", "f_flag", "f_namemax")]

    return {"c_timespec": c_timespec, "c_utimbuf": c_utimbuf, "c_stat": c_stat,
            "c_statvfs": c_statvfs}


def __getattr__(name: str) -> Any:
    # fusepy's module-level logger, made on first use (importing logging costs ms)
    if name == "log":
        import logging

        return logging.getLogger("fuse")
    if name == "ReadDirResult":
        # mfusepy's annotation for what readdir returns (names, or (name, attrs or mode,
        # offset) tuples); made on first use: importing typing costs milliseconds
        from typing import Iterable, Tuple, Union

        value = Iterable[Union[str, Tuple[str, dict, int], Tuple[str, int, int]]]
        globals()[name] = value
        return value
    if name in ("c_timespec", "c_utimbuf", "c_stat", "c_statvfs"):
        names = _ctypes_names()
        globals().update(names)
        return names[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------ adapting

# What an operation set to None (fusepy: "not implemented") means, as libfuse
# and the kernel answer when the callback is missing.
_ABSENT_OK = {"access", "flush", "release", "releasedir", "fsync", "fsyncdir",
              "open", "opendir", "init", "destroy"}
_ABSENT_ENOTSUP = {"getxattr", "listxattr", "setxattr", "removexattr"}
# every operation the preload library calls
C_OPS = ("getattr", "readlink", "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename",
         "link", "chmod", "chown", "truncate", "open", "create", "read", "write", "statfs",
         "flush", "release", "fsync", "opendir", "readdir", "releasedir", "access",
         "utimens", "setxattr", "getxattr", "listxattr", "removexattr", "init", "destroy")
_WRITE_OPS = {"mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "chmod",
              "chown", "truncate", "create", "write", "utimens", "setxattr", "removexattr"}
_FI_OPS = {"read", "write", "flush", "release", "fsync", "truncate", "getattr"}
_ACCMODE_WRITE = os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND


def overrides_default(ops: Any, name: str) -> bool:
    """``ops`` has its own ``name`` method (not Operations' default, not mfusepy's
    ``libfuse_ignore`` placeholder, not None)."""
    method = getattr(ops, name, None)
    if method is None or getattr(method, "libfuse_ignore", False):
        return False
    return getattr(type(ops), name, None) is not getattr(Operations, name, None)


def absent_operations(ops: Any) -> list[str]:
    """The operations the preload library calls that ``ops`` sets to None."""
    return [name for name in C_OPS if getattr(ops, name, 0) is None]


def _takes_fileinfo(func: Any) -> bool:
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    argcount = code.co_argcount - (1 if hasattr(func, "__self__") else 0)
    return argcount >= 3 or bool(code.co_flags & 0x04)


class FusepyOps:
    """The operations object the preload library calls for a fusepy file system.

    It passes every call to ``operations(op, path, *args)`` (so an overridden
    ``__call__`` and ``LoggingMixIn`` see everything) after doing what fusepy's
    ``FUSE`` class and libfuse do for the options given:

    - ``raw_fi``: open/create/read/write/flush/release/fsync/truncate/getattr
      receive a :class:`fuse_file_info` (``fh``, ``flags``, ``direct_io``,
      ``keep_cache``) instead of an int handle; the file system sets ``fi.fh``.
    - ``ro``: every modifying operation fails with EROFS, as a read-only mount.
    - ``nothreads``: one operation at a time (a lock, renewed in a forked child).
    - ``encoding``: paths are decoded with it instead of UTF-8.
    - an operation set to None is not implemented: ``access``, ``open``,
      ``flush``, ``release``, ``fsync``... succeed, xattr calls get ENOTSUP,
      ``create`` falls back to ``mknod`` + ``open``, the rest get ENOSYS.
    - ``O_APPEND`` is taken out of the flags ``open``/``create`` receive: ldpfuse
      writes a file's bytes back at their own offsets, and appends itself.
    - a ``str`` returned by ``read`` or ``getxattr`` is encoded (fusepy copies
      its internal representation: garbage) and the first one is logged.
    """

    def __init__(self, operations: Any, *, raw_fi: bool = False, encoding: str = "utf-8",
                 ro: bool = False, nothreads: bool = False, use_ino: bool = True,
                 call: Any = None) -> None:
        self.operations = operations
        self.use_ns = bool(getattr(operations, "use_ns", False))
        self.raw_fi = raw_fi
        self.ro = ro
        self.use_ino = use_ino
        self.encoding = None if encoding.lower().replace("-", "") in ("utf8",) else encoding
        self.absent = set(absent_operations(operations))
        self.create_takes_fi = raw_fi or _takes_fileinfo(getattr(operations, "create", None))
        self.with_offset = overrides_default(operations, "readdir_with_offset")
        self.with_config = overrides_default(operations, "init_with_config")
        self._fis: dict[int, Any] = {}
        self._next_fh = 1
        self._warned: set[str] = set()
        self.call = call        # the FUSE() call, when a script made one
        self._loop = call.loop if call is not None and nothreads else None
        self._lock = None
        if nothreads and self._loop is None:
            self._lock = _thread.RLock()
            os.register_at_fork(after_in_child=self._renew_lock)

    def _renew_lock(self) -> None:
        self._lock = _thread.RLock()

    # -- the entry point the preload library calls
    def __call__(self, op: str, path: str, *args: Any) -> Any:
        if op == "destroy":
            return self._unmount(path)
        if self._loop is not None:   # nothreads: on the thread that called FUSE()
            return self._loop.run_here(self._dispatch, op, path, args)
        lock = self._lock
        if lock is None:
            return self._dispatch(op, path, args)
        with lock:
            return self._dispatch(op, path, args)

    def _unmount(self, path: str) -> Any:
        """The command has ended: ``destroy``, then the script's ``FUSE()`` returns and its
        code after it runs (waited for, bounded, as an unmount waits for the daemon)."""
        try:
            if self._loop is not None:
                return self._loop.run_here(self._dispatch, "destroy", path, ())
            return self._dispatch("destroy", path, ())
        finally:
            call = self.call
            if call is not None:
                call.loop.end()
                if not call.run.wait_finished():
                    from ._runtime import log_line

                    log_line(f"ldpfuse[{os.getpid()}]: {call.run.name}: the script's code after "
                             f"FUSE() did not finish within {FINISH_SECONDS:.0f} s of the "
                             f"command's end: left running")

    def _dispatch(self, op: str, path: str, args: tuple) -> Any:
        if self.encoding:
            path = self._in(path)
            if op in ("rename", "link", "symlink"):
                args = (self._in(args[0]),) + args[1:]
        if self.ro and (op in _WRITE_OPS or (op == "open" and args[0] & _ACCMODE_WRITE)
                        or (op == "access" and args[0] & os.W_OK)):
            raise FuseOSError(errno.EROFS)
        if op in self.absent:
            return self._absent(op, path, args)
        special = getattr(self, "_op_" + op, None)
        if special is not None:
            return special(path, *args)
        if self.raw_fi and op in _FI_OPS:
            args = self._with_fi(op, args)
        return self.operations(op, path, *args)

    # -- encoding
    def _in(self, name: str) -> str:
        return name.encode("utf-8", "surrogateescape").decode(self.encoding or "utf-8",
                                                              "surrogateescape")

    def _out(self, name: Any) -> Any:
        if isinstance(name, str):
            return name.encode(self.encoding or "utf-8", "surrogateescape").decode(
                "utf-8", "surrogateescape")
        return name

    # -- raw_fi: handles are ours, each mapped to the fuse_file_info the FS saw
    def _with_fi(self, op: str, args: tuple) -> tuple:
        # the handle is the last argument of these operations when present
        if not args:
            return args
        fh = args[-1]
        if op in ("getattr", "truncate") and fh is None:
            return args
        fi = self._fis.get(fh)
        if fi is None:
            return args
        if op == "release":
            del self._fis[fh]
        return args[:-1] + (fi,)

    def _register_fi(self, fi: Any, result: Any) -> Any:
        if isinstance(result, Passthrough):
            return result
        if isinstance(result, int) and result < 0:
            return result
        fh = self._next_fh
        self._next_fh += 1
        self._fis[fh] = fi
        if fi.direct_io or fi.keep_cache:
            return FileInfo(fi.flags, fh, bool(fi.direct_io), bool(fi.keep_cache))
        return fh

    def _op_open(self, path: str, flags: int) -> Any:
        # ldpfuse keeps the file's bytes and writes them back at their offsets on
        # flush; a lower fd opened O_APPEND (fusepy's loopback: open = os.open) would
        # put them after the old content. Appends are done by ldpfuse itself.
        flags &= ~os.O_APPEND
        if not self.raw_fi:
            return self.operations("open", path, flags)
        fi = fuse_file_info(flags)
        return self._register_fi(fi, self.operations("open", path, fi))

    def _op_create(self, path: str, mode: int, fi: Any = None) -> Any:
        if fi is not None:
            fi.flags &= ~os.O_APPEND  # as in _op_open
        if self.raw_fi:
            raw = fuse_file_info(fi.flags if fi is not None else os.O_WRONLY | os.O_CREAT)
            return self._register_fi(raw, self.operations("create", path, mode, raw))
        if fi is not None and _takes_fileinfo(getattr(self.operations, "create", None)):
            return self.operations("create", path, mode, fi)
        return self.operations("create", path, mode)

    def _op_read(self, path: str, size: int, offset: int, fh: Any) -> Any:
        args = self._with_fi("read", (size, offset, fh)) if self.raw_fi else (size, offset, fh)
        data = self.operations("read", path, *args)
        if isinstance(data, str):
            data = self._encode_result("read", path, data)[:size]
        return data

    def _op_getxattr(self, path: str, name: str, *args: Any) -> Any:
        value = self.operations("getxattr", path, name, *args)
        if isinstance(value, str):
            value = self._encode_result("getxattr", path, value)
        return value

    def _op_readdir(self, path: str, fh: Any) -> Any:
        if self.with_offset:
            # mfusepy's readdir_with_offset(path, offset, fh): from offset 0, the whole
            # directory (ldpfuse hands programs the listing in pieces itself)
            entries = self.operations("readdir_with_offset", path, 0, fh)
        else:
            entries = self.operations("readdir", path, fh)
        if isinstance(entries, int) or (not self.encoding and self.use_ino
                                        and not self.with_offset):
            return entries
        out = []
        for e in entries:
            if isinstance(e, (tuple, list)):
                name, attrs = self._out(e[0]), (e[1] if len(e) > 1 else None)
                if isinstance(attrs, int):      # mfusepy: the mode alone
                    attrs = {"st_mode": attrs}
                elif isinstance(attrs, dict) and not self.use_ino and "st_ino" in attrs:
                    attrs = {k: v for k, v in attrs.items() if k != "st_ino"}
                out.append((name, attrs, 0))
            else:
                out.append(self._out(e))
        return out

    def _op_getattr(self, path: str, *args: Any) -> Any:
        if self.raw_fi:
            args = self._with_fi("getattr", args)
        st = self.operations("getattr", path, *args)
        if not self.use_ino and isinstance(st, dict) and "st_ino" in st:
            # fusepy's default use_ino=False: inode numbers are the mount's, not the FS's
            st = dict(st)
            del st["st_ino"]
        return st

    def _op_init(self, path: str) -> Any:
        if self.with_config:
            # mfusepy: init_with_config instead of init, called directly; FUSE 2 passes
            # no fuse_config
            return self.operations.init_with_config(fuse_conn_info(), None)
        return self.operations("init", path)

    def _op_readlink(self, path: str) -> Any:
        target = self.operations("readlink", path)
        return self._out(target) if self.encoding else target

    def _op_statfs(self, path: str) -> Any:
        st = self.operations("statfs", path)
        if self.ro and isinstance(st, dict):
            st = dict(st)
            st["f_flag"] = int(st.get("f_flag", 0)) | os.ST_RDONLY
        return st

    def _encode_result(self, op: str, path: str, value: str) -> bytes:
        if op not in self._warned:
            self._warned.add(op)
            from ._runtime import log_line

            log_line(f"ldpfuse[{os.getpid()}]: {op}({path!r}) returned str, not bytes: "
                     f"encoded as {self.encoding or 'utf-8'} (fusepy would copy garbage); "
                     f"return bytes (logged once)")
        return value.encode(self.encoding or "utf-8", "surrogateescape")

    # -- operations set to None
    def _absent(self, op: str, path: str, args: tuple) -> Any:
        if op in _ABSENT_OK:
            return 0
        if op in _ABSENT_ENOTSUP:
            raise FuseOSError(ENOTSUP)
        if op == "statfs":
            return {"f_flag": os.ST_RDONLY} if self.ro else {}
        if op == "create" and "mknod" not in self.absent:
            import stat

            fi = args[1] if len(args) > 1 else None
            flags = fi.flags if fi is not None else os.O_WRONLY
            self.operations("mknod", path, stat.S_IFREG | (args[0] & 0o7777), 0)
            return self._op_open(path, flags & ~(os.O_CREAT | os.O_EXCL))
        raise FuseOSError(errno.ENOSYS)
