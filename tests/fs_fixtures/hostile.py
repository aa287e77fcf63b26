"""A file system whose methods answer outside the rules, for tests/test_method_results.py.

The name asked for picks the answer: `mkdir`, `unlink`, `chmod` and `open` of
`/ret_<what>` return RESULTS[what] (or raise it, for an exception class);
`readdir` of `/d_<what>` returns LISTINGS[what]; `listxattr` of `/x_<what>`
returns LISTINGS[what]. Every other name behaves: `/` and `/d_*` are directories,
`/ok` and `/ret_*` and `/x_*` are empty files, and `mkdir /fine` works."""

import errno
import stat

from ldpfuse_py import FuseOSError, Operations

RESULTS = {
    "m5000": -5000,             # not an errno
    "mhuge": -(2 ** 70),        # past any C integer
    "huge": 2 ** 70,
    "str": "0",
    "float": -2.0,
    "list": [0],
    "kbd": KeyboardInterrupt,
    "exit": SystemExit,
    "base": BaseException,
    "enospc": -errno.ENOSPC,    # the old fusepy convention: a real errno, kept
}

LISTINGS = {
    "str": "abc",
    "bytes": b"abc",
    "dict": {"a": 1},
    "ints": [1, 2],
    "slash": [".", "..", "a/b", "ok"],
    "nul": [".", "..", "a\0b", "ok"],
    "empty": [".", "..", "", "ok"],
    "none": None,
    "good": [".", "..", "ok"],
}


def answer(path):
    what = RESULTS[path.split("_", 1)[1]]
    if isinstance(what, type) and issubclass(what, BaseException):
        raise what()
    return what


class Hostile(Operations):
    def getattr(self, path, fh=None):
        if path == "/" or path.startswith("/d_") or path == "/fine":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/ok" or path.startswith("/ret_") or path.startswith("/x_"):
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=0)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        if path.startswith("/d_"):
            return LISTINGS[path[3:]]
        return [".", "..", "ok"]

    def listxattr(self, path):
        if path.startswith("/x_"):
            return LISTINGS[path[3:]]
        return []

    def mkdir(self, path, mode):
        return answer(path) if path.startswith("/ret_") else 0

    def unlink(self, path):
        return answer(path)

    def chmod(self, path, mode):
        return answer(path)

    def open(self, path, flags):
        return answer(path) if path.startswith("/ret_") else 0

    def read(self, path, size, offset, fh):
        return b""
