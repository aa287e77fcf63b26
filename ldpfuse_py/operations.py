"""The public API of ldpfuse-py: what a file system written in Python subclasses.

This is fusepy's API (``from fuse import Operations, FuseOSError, ...``) with
the same method names, signatures, defaults and return conventions, so a
fusepy file system runs unchanged. Two small additions belong to ldpfuse:

- ``Passthrough``: returned by ``open()``/``create()`` to serve a file from a
  lower kernel file descriptor, with no Python call for its data (like FUSE
  passthrough in Linux 6.9+).
- ``FileInfo``: the third argument of ``create(path, mode, fi)``, carrying the
  caller's open flags.

Conventions, as in fusepy:

- Every ``path`` is relative to the mount point and starts with ``'/'``; the
  mount point itself is ``'/'``.
- An error is reported by raising ``OSError`` (``FuseOSError(errno.ENOENT)``
  is the short form); the calling program sees that errno. Any other
  exception becomes ``EIO`` and its traceback goes to the log.
- Methods that have nothing to return may return ``None`` or ``0``.
- ``Operations.__call__(op, *args)`` is the single entry point through which
  every operation is dispatched; override it to wrap all operations at once
  (``LoggingMixIn`` does).

This module is imported by the interpreter embedded in every process that
touches a mount, so it imports only what is already loaded at interpreter
start (``os``, ``errno``, ``stat``); ``logging`` is imported the first time
``LoggingMixIn`` logs.
"""

from __future__ import annotations

import errno
import os
from stat import S_IFDIR

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: never imported at run time
    import logging
    from typing import Any, Iterable, Union

    Attrs = dict[str, int | float]
    DirEntry = Union[str, tuple[str, Attrs | None, int]]

__all__ = [
    "Backing",
    "ENOTSUP",
    "FileInfo",
    "FuseOSError",
    "LoggingMixIn",
    "Operations",
    "Passthrough",
    "fuse_get_context",
]

ENOTSUP = errno.ENOTSUP

_DEBUG = 10  # logging.DEBUG, without importing logging


class FuseOSError(OSError):
    """``FuseOSError(errno.ENOENT)``: an OSError whose errno the caller sees."""

    def __init__(self, errno: int) -> None:
        super().__init__(errno, os.strerror(errno))


def fuse_get_context() -> tuple[int, int, int]:
    """Return ``(uid, gid, pid)`` of the process making the current call.

    In the embedded mode the file system runs inside the calling process, so
    this is the current process; in the shared mode it is the client process
    whose request is being answered.
    """
    if _request_context is not None:
        ctx = _request_context()
        if ctx is not None:
            return ctx
    return os.getuid(), os.getgid(), os.getpid()


# set by the shared mode's server (ldpfuse_py.shared_mode) to its per-request context
_request_context: Any = None


class Backing:
    """A directory of the tree served from a lower directory by the preload itself.

    ``Backing(lower, see=())``, declared by a class as its ``backing`` attribute
    (for the mount's root) or as a dict ``{"/dir": Backing(...), ...}``. Every
    operation on a name under that directory that is not in ``see`` is done by
    the preload on ``lower``, in the calling process, with the caller's own
    rights and no call into Python (fuse-bpf's backing directories; the
    shared mode). ``see`` names the operations the class's methods answer
    instead: ``"all"``, or a set of names from ``OPERATIONS`` (``"open"``: every
    open of an existing file, ``"open_write"``: those for writing or with
    O_TRUNC, ``"readdir"``: opendir, readdir and releasedir). See
    docs/backing.md.

    ``after`` names operations the preload still does itself, after which the
    class's ``after(op, path, result, *args)`` is called: ``"getattr"`` (it may
    adjust the attributes) or a change of ``AFTER`` (it is told, with the
    result; what it raises cannot undo the change). ``hide`` is a list of name
    patterns (``*`` and ``?``), hidden everywhere under the directory: left out
    of listings, ENOENT for any path through them, EACCES for making one.
    docs/backing.md, "After the operation".
    """

    OPERATIONS = ("getattr", "readlink", "mknod", "mkdir", "unlink", "rmdir", "symlink",
                  "rename", "link", "chmod", "chown", "truncate", "open", "open_write",
                  "create", "statfs", "readdir", "access", "utimens", "getxattr",
                  "setxattr", "listxattr", "removexattr")   # native/ldpfuse.h BK_*, in order

    # what a read-only mount (-o ro) sends to the class, which refuses it with EROFS;
    # statfs says ST_RDONLY there, access(W_OK) is EROFS
    CHANGES = ("mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "chmod",
               "chown", "truncate", "open_write", "create", "statfs", "access", "utimens",
               "setxattr", "removexattr")

    # what an after-filter may be told of: the attributes, and the changes
    AFTER = ("getattr", "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link",
             "chmod", "chown", "truncate", "open", "open_write", "create", "utimens",
             "setxattr", "removexattr")

    __slots__ = ("lower", "see", "after", "hide")

    def __init__(self, lower: str, see: Any = (), after: Any = (), hide: Any = ()) -> None:
        lower = os.path.realpath(os.fsdecode(lower))
        if not os.path.isdir(lower):
            raise NotADirectoryError(errno.ENOTDIR, "a backing tree's lower path is not a directory", lower)
        if see == "all":
            see = self.OPERATIONS
        elif isinstance(see, str):
            see = (see,)
        unknown = set(see) - set(self.OPERATIONS)
        if unknown:
            raise ValueError(f"Backing(see=...): unknown operations {sorted(unknown)}; "
                             f"known: {', '.join(self.OPERATIONS)}")
        after = (after,) if isinstance(after, str) else after
        unknown = set(after) - set(self.AFTER)
        if "readdir" in unknown:
            raise ValueError("Backing(after=...): 'readdir': a name left out of a listing must be "
                             "missing for every lookup too, which only the preload can see to: "
                             "hide=('*.secret', ...) hides names everywhere")
        if unknown:
            raise ValueError(f"Backing(after=...): unknown operations {sorted(unknown)}; "
                             f"known: {', '.join(self.AFTER)}")
        both = set(after) & set(see)
        if both:
            raise ValueError(f"Backing: {sorted(both)} both in see= and after=: an operation the "
                             "class sees is its own method's, and told after by its own code")
        hide = (hide,) if isinstance(hide, str) else tuple(hide)
        for pattern in hide:
            if (not isinstance(pattern, str) or not pattern or any(c in pattern for c in "/[]\\")
                    or any(c in pattern for c in "\x00\x1e\x1f") or pattern in (".", "..")):
                raise ValueError(f"Backing(hide=...): {pattern!r}: a pattern is a name with '*' "
                                 "and '?' (no '/', '[', ']' or '\\')")
        self.lower = lower
        self.see = frozenset(see)
        self.after = frozenset(after)
        self.hide = hide

    def mask(self) -> int:
        "The bits of see, as the preload reads them."
        return self.mask_of(self.see)

    @classmethod
    def mask_of(cls, names: Any) -> int:
        "The bits of these operations' names, as the preload reads them."
        return sum(1 << i for i, name in enumerate(cls.OPERATIONS) if name in names)

    def after_mask(self) -> int:
        "The bits of after, as the preload reads them (the same as see's)."
        return self.mask_of(self.after)

    def __repr__(self) -> str:
        return (f"Backing({self.lower!r}, see={sorted(self.see)!r}, after={sorted(self.after)!r}, "
                f"hide={list(self.hide)!r})")


def backing_trees(ops: Any) -> list[tuple[str, Backing]]:
    """[(directory, Backing), ...] that ops declares (its ``backing``), checked."""
    declared = getattr(ops, "backing", None)
    if declared is None:
        return []
    if isinstance(declared, Backing):
        declared = {"/": declared}
    if not isinstance(declared, dict):
        raise TypeError(f"backing must be a Backing or a dict of them, not {type(declared).__name__}")
    trees = []
    for d, b in declared.items():
        if not isinstance(b, Backing) or not isinstance(d, str) or not d.startswith("/"):
            raise TypeError(f"backing: {d!r}: expected '/dir': Backing(...)")
        d = os.path.normpath(d)
        trees.append(("/" if d == "//" else d, b))
    return trees


class Passthrough:
    """Returned by ``open()`` or ``create()``: serve this file from a kernel fd.

    ``Passthrough(fd, fh=0)``. ``fd`` is an open file descriptor of a real
    file (usually ``os.open()`` of the file in a lower directory), opened with
    the flags the caller asked for. ldpfuse takes ownership of it: it becomes
    the caller's file descriptor, and all data I/O on it (read, write, pread,
    mmap, lseek, fstat, fsync, sendfile, ...) goes to the kernel with no
    Python call and no copy. ldpfuse gives it the caller's ``O_CLOEXEC``
    setting (``os.open`` always sets it).

    The file system must not close ``fd`` or use it afterwards, and
    ``release()``/``flush()`` are not called for passthrough files. ``fh`` is
    the handle that other calls naming this open file receive, as the int an
    ``open()`` returns would be.
    """

    __slots__ = ("fd", "fh")

    def __init__(self, fd: int, fh: int = 0) -> None:
        self.fd = fd
        self.fh = fh

    def __repr__(self) -> str:
        return f"Passthrough(fd={self.fd}, fh={self.fh})"

    @classmethod
    def open(cls, path: str, flags: int, mode: int = 0o777, fh: int = 0) -> Passthrough:
        """``Passthrough(os.open(path, flags, mode), fh)``, opened directly where the
        program's new fd belongs. Files a file system opens for itself are moved to high
        fd numbers (so a shell's ``exec 3>f`` cannot land on them), and a plain
        ``os.open`` given to ``Passthrough`` is moved back down: this saves that trip."""
        global _passthrough_open
        if _passthrough_open is None:
            try:
                from ._embedded import passthrough_open as _passthrough_open
            except ImportError:
                _passthrough_open = os.open
        return cls(_passthrough_open(path, flags, mode), fh)


_passthrough_open: Any = None


class FileInfo:
    """The third argument of ``create(path, mode, fi)``, FUSE's fuse_file_info.

    It is passed when ``create`` accepts three positional parameters
    (fusepy's signature is ``create(self, path, mode, fi=None)``).

    - ``flags``: the caller's open flags, as given: ``O_CREAT``, ``O_EXCL``,
      ``O_TRUNC``, ``O_RDWR``, ... are all in it.
    - ``fh``: the file handle; ``create`` may set it instead of returning it
      (fusepy's ``raw_fi`` convention).
    - ``direct_io``: set to True to have every read of this file call the file
      system at the offset and size asked, past the page cache (FUSE's
      ``direct_io``: live files, procfs style, streams); see docs/cache.md.
    - ``keep_cache``: FUSE's flag to keep cached data from a previous open.

    ``open`` may also return a FileInfo (``return FileInfo(fh=h, direct_io=True)``)
    to set these flags for the file it opens.
    """

    __slots__ = ("flags", "fh", "direct_io", "keep_cache")

    def __init__(self, flags: int = 0, fh: int = 0, direct_io: bool = False,
                 keep_cache: bool = False) -> None:
        self.flags = flags
        self.fh = fh
        self.direct_io = direct_io
        self.keep_cache = keep_cache

    def __repr__(self) -> str:
        return (
            f"FileInfo(flags={self.flags:#o}, fh={self.fh}, "
            f"direct_io={self.direct_io}, keep_cache={self.keep_cache})"
        )


class Operations:
    """Subclass this and override the operations your file system supports.

    Every default below is fusepy's: a read-only empty file system whose root
    is a directory. When in doubt about what an operation should do, read the
    man page of the system call of the same name.
    """

    # When True, getattr() returns st_atime/st_mtime/st_ctime as int
    # nanoseconds and utimens() receives (atime_ns, mtime_ns) ints; when
    # False they are float seconds.
    use_ns = False

    # When True, the POSIX ACL xattrs (system.posix_acl_access/default) reach
    # getxattr/setxattr/removexattr and the file system keeps the mode in step
    # with them (FUSE's posix_acl option); when False they are refused with
    # EOPNOTSUPP, and programs fall back to chmod, as over kernel FUSE.
    posix_acl = False

    # When True, the class says its open() only pins the file (it checks nothing
    # and changes nothing, but keeps the file reachable through the handle: an
    # unlinked file stays readable) and its release() only unpins it. A process
    # that read a file may then keep the handle of that read-only open past its
    # close, while it keeps the file's page cache, and open the file again for
    # reading, unchanged, with no request: release() runs when the hold ends
    # (docs/operations.md, open_only_pins).
    open_only_pins = False

    def __call__(self, op: str, *args: Any) -> Any:
        if not hasattr(self, op):
            raise FuseOSError(errno.EFAULT)
        return getattr(self, op)(*args)

    def access(self, path: str, amode: int) -> int | None:
        return 0

    # An operation set to None is not implemented (fusepy's convention):
    # ldpfuse treats it as absent.
    # bmap (block mapping for block-device file systems) is never called.
    bmap = None

    def chmod(self, path: str, mode: int) -> int | None:
        raise FuseOSError(errno.EROFS)

    def chown(self, path: str, uid: int, gid: int) -> int | None:
        raise FuseOSError(errno.EROFS)

    def create(
        self, path: str, mode: int, fi: FileInfo | None = None
    ) -> int | Passthrough:
        """Create and open a file; return a file handle (int) or a Passthrough.

        ``fi`` is a FileInfo holding the caller's open flags when this method
        accepts three positional parameters.
        """
        raise FuseOSError(errno.EROFS)

    def destroy(self, path: str) -> None:
        "Called on file system destruction. Path is always /"
        pass

    def flush(self, path: str, fh: int) -> int | None:
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int | None:
        """Not called: ldpfuse grows a file by fallocate() itself, through truncate();
        other modes (punching holes) fail with EOPNOTSUPP, as over kernel FUSE when
        the file system lacks fallocate."""
        raise FuseOSError(errno.EOPNOTSUPP)

    def flock(self, path: str, fh: int, op: int) -> int | None:
        """Offered every flock() on a file the file system serves (op: LOCK_SH or
        LOCK_EX with LOCK_NB, or LOCK_UN), after the command's own lock is held; an
        error refuses it. ENOSYS: the command's locks alone (docs/operations.md)."""
        raise FuseOSError(errno.ENOSYS)

    def fsync(self, path: str, datasync: int, fh: int) -> int | None:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int | None:
        return 0

    def getattr(self, path: str, fh: int | None = None) -> Attrs:
        """Return a dict with the keys of struct stat (st_mode, st_size, ...).

        st_atime, st_mtime and st_ctime are float seconds, or int nanoseconds
        when ``use_ns`` is True. On Linux a directory's st_nlink counts its
        subdirectories plus 2.
        """
        if path != "/":
            raise FuseOSError(errno.ENOENT)
        return dict(st_mode=(S_IFDIR | 0o755), st_nlink=2)

    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        raise FuseOSError(ENOTSUP)

    def init(self, path: str) -> None:
        """Called on file system initialization. (Path is always /)

        Use it instead of __init__ if you start threads on initialization.
        """
        pass

    def init_with_config(self, conn_info: Any, config_3: Any) -> None:
        """mfusepy's init: called instead of init() when overridden, with a
        fuse_conn_info and (FUSE 2 conventions) None for the FUSE 3 config."""
        pass

    def ioctl(
        self, path: str, cmd: int, arg: Any, fip: Any, flags: int, data: Any
    ) -> int | None:
        raise FuseOSError(errno.ENOTTY)

    def link(self, target: str, source: str) -> int | None:
        "creates a hard link `target -> source` (e.g. ln source target)"
        raise FuseOSError(errno.EROFS)

    def listxattr(self, path: str) -> Iterable[str]:
        return []

    # lock(path, fh, cmd, lock): offered every record lock (fcntl, lockf) on a file
    # the file system serves, lock the address of a struct flock (docs/operations.md).
    # None: the command's locks alone, as kernel FUSE without FUSE_POSIX_LOCKS.
    lock = None

    def mkdir(self, path: str, mode: int) -> int | None:
        raise FuseOSError(errno.EROFS)

    def mknod(self, path: str, mode: int, dev: int) -> int | None:
        raise FuseOSError(errno.EROFS)

    def open(self, path: str, flags: int) -> int | Passthrough:
        "Return a file handle (int), or a Passthrough to serve a kernel fd."
        return 0

    def opendir(self, path: str) -> int:
        "Returns a numerical file handle."
        return 0

    def poll(self, path: str, fh: int, ph: Any, reventsp: Any) -> int:
        "Not called: poll() on a file is answered by the kernel (always ready)."
        raise FuseOSError(errno.ENOSYS)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        "Returns the bytes requested (fewer at end of file)."
        raise FuseOSError(errno.EIO)

    def readdir(self, path: str, fh: int) -> Iterable[DirEntry]:
        """Return the names in the directory, '.' and '..' included.

        Each entry is a name, or a (name, attrs, offset) tuple where attrs is
        a dict as from getattr (st_ino and st_mode are enough to give d_ino
        and d_type) or None, and offset is 0.
        """
        return [".", ".."]

    def readdir_with_offset(self, path: str, offset: int, fh: int) -> Iterable[DirEntry]:
        """mfusepy's readdir with a resume offset: used instead of readdir() when
        overridden, called once with offset 0 for the whole listing."""
        return [".", ".."]

    def readlink(self, path: str) -> str:
        raise FuseOSError(errno.ENOENT)

    def release(self, path: str, fh: int) -> int | None:
        return 0

    def releasedir(self, path: str, fh: int) -> int | None:
        return 0

    def removexattr(self, path: str, name: str) -> int | None:
        raise FuseOSError(ENOTSUP)

    def rename(self, old: str, new: str) -> int | None:
        raise FuseOSError(errno.EROFS)

    def rmdir(self, path: str) -> int | None:
        raise FuseOSError(errno.EROFS)

    def setxattr(
        self, path: str, name: str, value: bytes, options: int, position: int = 0
    ) -> int | None:
        "options: 0, os.XATTR_CREATE or os.XATTR_REPLACE"
        raise FuseOSError(ENOTSUP)

    def statfs(self, path: str) -> dict[str, int]:
        "Returns a dict with the keys of struct statvfs (f_bsize, f_blocks, ...)."
        return {}

    def symlink(self, target: str, source: str) -> int | None:
        "creates a symlink `target -> source` (e.g. ln -s source target)"
        raise FuseOSError(errno.EROFS)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int | None:
        raise FuseOSError(errno.EROFS)

    def unlink(self, path: str) -> int | None:
        raise FuseOSError(errno.EROFS)

    def utimens(
        self, path: str, times: tuple[int | float, int | float] | None = None
    ) -> int | None:
        "times is an (atime, mtime) tuple. If None use current time."
        return 0

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        "Returns the number of bytes written."
        raise FuseOSError(errno.EROFS)


class _LazyLogger:
    """A class attribute that becomes logging.getLogger(name) on first use.

    Importing logging costs milliseconds in every process that touches a
    mount; this defers it until LoggingMixIn is first called.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.owner = owner
        self.attr = attr

    def __get__(self, obj: object, objtype: type | None = None) -> logging.Logger:
        import logging

        log = logging.getLogger(self.name)
        setattr(self.owner, self.attr, log)  # later lookups skip this
        return log


class LoggingMixIn:
    """Log every operation and its result at DEBUG on logger 'fuse.log-mixin'.

    Put it first in the bases: ``class MyFS(LoggingMixIn, Operations)``.
    Lines look like ``-> getattr / (None,)`` and ``<- getattr {...}``. When
    DEBUG is not enabled nothing is formatted: the cost is one level check.
    """

    log = _LazyLogger("fuse.log-mixin")

    def __call__(self, op: str, path: str, *args: Any) -> Any:
        log = self.log
        try:
            call = super().__call__  # type: ignore[misc]
        except AttributeError:  # used without Operations, as fusepy allows
            call = self._call_method
        if not log.isEnabledFor(_DEBUG):
            return call(op, path, *args)

        log.debug("-> %s %s %s", op, path, repr(args))
        ret: Any = "[Unhandled Exception]"
        try:
            ret = call(op, path, *args)
            return ret
        except OSError as e:
            ret = str(e)
            raise
        finally:
            log.debug("<- %s %s", op, repr(ret))

    def _call_method(self, op: str, *args: Any) -> Any:
        return getattr(self, op)(*args)
