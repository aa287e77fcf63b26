"""After-filters and hidden names of backing trees: ``Backing(lower, after=..., hide=...)``.

An operation a class asks to be told of *after* it is done by whatever serves it (the
preload on the lower tree, native/vfs/backing.c, or the class's own method when the
operation reaches it: the embedded mode, a path the preload hands back); then the class's
``after(op, path, result, *args)`` is called with its result:

- ``"getattr"``: ``result`` is the attributes (a dict, as ``getattr`` returns); ``after``
  returns ``None`` (unchanged) or a dict of what to change: the permission bits of
  ``st_mode``, ``st_uid``, ``st_gid``, the three times. Any other key changed (the type,
  the size...) is EIO and a log line. What it raises is the stat's answer (nothing was
  changed).
- a change (``create``, ``unlink``, ``rename``, ``open_write``, ``mkdir``...): ``result``
  is 0 or ``-errno``; ``args`` the second name (``rename``: the new name, ``link``: the
  existing file, ``symlink``: the link's content, xattrs: the attribute's name). Its
  answer is ignored, and what it raises goes to the log: the operation is done, and the
  program gets its result.

Hidden names (``hide``: patterns with ``*`` and ``?``, matched against each name of a path
as bytes, as the preload matches them): left out of ``readdir``; any operation on a path
through one is ENOENT, making one (create, mknod, mkdir, symlink, the new name of a
rename or link) is EACCES. The preload leaves them out of its listings and hands every
path through one to the class, whose calls go through :class:`Filtered` (here), in both
modes: one place decides what a hidden name answers. docs/backing.md.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import stat

from . import _runtime
from .operations import Backing, FuseOSError, backing_trees

__all__ = ["Filtered", "told", "filtered_trees"]

# what an after-filter of getattr may change; the rest is the lower file's
_MAY_CHANGE = ("st_uid", "st_gid", "st_atime", "st_mtime", "st_ctime")
# operations whose path is a name they make
_MAKES = ("create", "mknod", "mkdir", "symlink", "link")
_OPEN_WRITE = os.O_WRONLY | os.O_RDWR | os.O_TRUNC


def _user(ops):
    "The file system's own object under ldpfuse's wrappers (Filtered, --trace, fusepy's)."
    for _ in range(4):
        kind = type(ops).__name__
        if kind in ("Filtered", "TracedOps"):
            ops = ops.__dict__["ops"]
        elif kind == "FusepyOps":
            ops = ops.operations
        else:
            break
    return ops


def filtered_trees(ops):
    "The trees of ops (unwrapped) that declare after-filters or hidden names."
    return [(d, b) for d, b in backing_trees(_user(ops)) if b.after or b.hide]


def _hidden(b, name):
    data = os.fsencode(name) if isinstance(name, str) else bytes(name)
    return any(fnmatch.fnmatchcase(data, os.fsencode(p)) for p in b.hide)


def _refuse(b, rel, makes):
    """ENOENT for a path through a hidden name, EACCES for making one (makes: the last
    name is made by the call)."""
    names = [n for n in rel.split("/") if n]
    for i, name in enumerate(names):
        if _hidden(b, name):
            raise FuseOSError(errno.EACCES if makes and i == len(names) - 1 else errno.ENOENT)


def _ns(value):
    return value if isinstance(value, int) else int(round(value * 1e9))


def adjusted(user, path, attrs):
    """attrs as the class's after("getattr", ...) changes them (a new dict), or attrs."""
    got = user.after("getattr", path, dict(attrs))
    if got is None:
        return attrs
    if not isinstance(got, dict):
        raise TypeError(f"after('getattr', {path!r}) returned {type(got).__name__}, expected a dict or None")
    out = dict(attrs)
    for key, value in got.items():
        if key == "st_mode":
            if stat.S_IFMT(value ^ attrs.get("st_mode", 0)):
                raise ValueError(f"after('getattr', {path!r}) changed the file type in st_mode")
        elif key not in _MAY_CHANGE and (key not in attrs or value != attrs[key]):
            raise ValueError(f"after('getattr', {path!r}) changed {key}: an after-filter may change "
                             f"st_mode's permission bits, {', '.join(_MAY_CHANGE)}")
        out[key] = value
    return out


def tell(user, op, path, result, args=()):
    """The class's after() of a change: what it raises is logged, never the program's."""
    try:
        user.after(op, path, result, *args)
    except BaseException as e:
        import traceback

        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        _runtime.log_line(f"ldpfuse[{os.getpid()}]: after({op!r}, {path!r}) raised; the operation is done "
                          f"and the program gets its result:\n{text}")


_KEYS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size",
         "st_blksize", "st_blocks", "st_atime", "st_mtime", "st_ctime")


def told(ops, index, path, result, path2, attrs):
    """The preload did operation Backing.OPERATIONS[index] on a backed name (native/vfs/
    backing.c): tell the class. For getattr (attrs: the lower file's, a tuple in _KEYS'
    order, times in ns) the answer is (mode, uid, gid, atime_ns, mtime_ns, ctime_ns), or
    None for no change; an exception is the stat's answer."""
    op = Backing.OPERATIONS[index] if 0 <= index < len(Backing.OPERATIONS) else ""
    # only what a tree of the path asks to be told of (a request says what the calling
    # process did: a process of the command that asks for anything else is not heard)
    filtered = ops
    while type(filtered).__name__ == "TracedOps":
        filtered = filtered.__dict__["ops"]
    b, rel = filtered._tree(path) if type(filtered).__name__ == "Filtered" else (None, "")
    if b is None or op not in b.after or (b.hide and any(_hidden(b, n) for n in rel.split("/") if n)):
        return None
    if type(ops).__name__ == "TracedOps":
        # --trace: one line, as for a method: after('unlink', '/f', 0) = None  3us
        import time

        start = time.perf_counter_ns()
        outcome = "None"
        try:
            answer = _told(ops, op, path, result, path2, attrs)
            outcome = "None" if answer is None else f"{{st_mode={answer[0]:#o}, st_uid={answer[1]}, st_gid={answer[2]}, ...}}"
            return answer
        except BaseException as e:
            outcome = f"{type(e).__name__}: {e}"
            raise
        finally:
            shown = (path, result if attrs is None else "attrs") + (() if path2 is None else (path2,))
            ops._line("after", op, shown, outcome, start)
    return _told(ops, op, path, result, path2, attrs)


def _told(ops, op, path, result, path2, attrs):
    user = _user(ops)
    if op != "getattr":
        tell(user, op, path, result, () if path2 is None else (path2,))
        return None
    use_ns = bool(getattr(ops, "use_ns", False))
    d = dict(zip(_KEYS, attrs))
    if not use_ns:
        for key in ("st_atime", "st_mtime", "st_ctime"):
            d[key] = d[key] / 1e9
    out = adjusted(user, path, d)
    if out is d:
        return None
    times = tuple(attrs[10 + i] if out[k] == d[k] else _ns(out[k])
                  for i, k in enumerate(("st_atime", "st_mtime", "st_ctime")))
    return (out["st_mode"], out["st_uid"], out["st_gid"]) + times


class Filtered:
    """A class's operations with its trees' after-filters and hidden names, for the calls
    that reach its methods (the embedded mode; the shared mode's calls the preload hands
    back): the same answers as the preload gives for what it does itself."""

    def __init__(self, ops, trees):
        user = _user(ops)
        if any(b.after for _, b in trees) and not callable(getattr(user, "after", None)):
            raise TypeError(f"{type(user).__name__} declares Backing(after=...) but has no "
                            "after(op, path, result, *args) method")
        self.__dict__["ops"] = ops
        self.__dict__["_user"] = user
        # longest directory first: the first that holds a path is its tree
        self.__dict__["_trees"] = sorted(trees, key=lambda t: -len(t[0]))

    def __getattr__(self, name):
        return getattr(self.__dict__["ops"], name)

    def _tree(self, path):
        for d, b in self._trees:
            if d == "/" or path == d or path.startswith(d + "/"):
                return b, path[len(d):] if d != "/" else path
        return None, ""

    def __call__(self, op, path, *args):
        b, rel = self._tree(path) if isinstance(path, str) else (None, "")
        if b is not None and b.hide and op not in ("init", "destroy"):
            _refuse(b, rel, op in _MAKES)
        if op in ("rename", "link") and args and isinstance(args[0], str):
            b2, rel2 = self._tree(args[0])      # the other name, maybe in another tree
            if b2 is not None and b2.hide:
                _refuse(b2, rel2, op == "rename")
        if b is None or op in ("init", "destroy"):
            return self.ops(op, path, *args)
        after = b.after
        name = op
        if op == "open":
            flags = getattr(args[0], "flags", args[0]) if args else 0     # raw_fi: a FileInfo
            name = "open_write" if isinstance(flags, int) and flags & _OPEN_WRITE and "open_write" in after else "open"
        if not after or (name not in after and op != "getattr"):
            r = self.ops(op, path, *args)
            return self._unlisted(b, r) if op == "readdir" and b.hide else r
        if op == "getattr":
            r = self.ops(op, path, *args)
            if "getattr" not in after or not isinstance(r, dict):
                return r
            return adjusted(self._user, path, r)
        # the second name: rename's new one, link's existing file (link(target, source)), a
        # symlink's content, an xattr's name
        second = (args[0],) if op in ("rename", "link", "symlink", "setxattr", "removexattr") else ()
        try:
            r = self.ops(op, path, *args)
        except OSError as e:
            tell(self._user, name, path, -(e.errno or errno.EIO), second)
            raise
        except BaseException:
            tell(self._user, name, path, -errno.EIO, second)
            raise
        tell(self._user, name, path, r if isinstance(r, int) and r < 0 else 0, second)
        return r

    def _unlisted(self, b, entries):
        "readdir's answer without the hidden names (a list: the C side reads it once)."
        if isinstance(entries, int):
            return entries
        kept = []
        for e in entries:
            name = e if isinstance(e, (str, bytes)) else e[0] if isinstance(e, tuple) and e else e
            if isinstance(name, (str, bytes)) and name not in (".", "..", b".", b"..") and _hidden(b, name):
                continue
            kept.append(e)
        return kept
