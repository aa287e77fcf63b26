"""A file system whose read, write and truncate find the file by its path and ignore fh,
as fusepy's own examples/memory.py does (self.data[path]): with kernel FUSE the path a
method gets for a handle is the path of the file that handle was opened on. The target of
tests/test_security.py's handle-confusion attack: a request that names one's own handle
but another file's path. Files are made by the command (create), owned by their creator."""

import errno
import stat
import time

from ldpfuse_py import FuseOSError, Operations, fuse_get_context


class ByPath(Operations):
    def __init__(self):
        now = time.time()
        uid, gid, _ = fuse_get_context()
        self.attrs = {"/": dict(st_mode=stat.S_IFDIR | 0o777, st_nlink=2, st_uid=uid, st_gid=gid,
                                st_size=0, st_atime=now, st_mtime=now, st_ctime=now)}
        self.data = {}

    def getattr(self, path, fh=None):
        if path not in self.attrs:
            raise FuseOSError(errno.ENOENT)
        a = dict(self.attrs[path])
        if path in self.data:
            a["st_size"] = len(self.data[path])
        return a

    def readdir(self, path, fh):
        return [".", ".."] + [p[1:] for p in self.attrs if p != "/"]

    def create(self, path, mode, fi=None):
        uid, gid, _ = fuse_get_context()
        now = time.time()
        self.attrs[path] = dict(st_mode=stat.S_IFREG | (mode & 0o7777), st_nlink=1, st_uid=uid,
                                st_gid=gid, st_size=0, st_atime=now, st_mtime=now, st_ctime=now)
        self.data[path] = bytearray()
        return 0

    def open(self, path, flags):
        if path not in self.data:
            raise FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        return bytes(self.data[path][offset:offset + size])

    def write(self, path, data, offset, fh):
        buf = self.data[path]
        buf[offset:offset + len(data)] = data
        return len(data)

    def truncate(self, path, length, fh=None):
        buf = self.data[path]
        del buf[length:]
        buf.extend(bytes(length - len(buf)))

    def chmod(self, path, mode):
        self.attrs[path]["st_mode"] = stat.S_IFMT(self.attrs[path]["st_mode"]) | mode

    def utimens(self, path, times=None):
        return 0
