#!/usr/bin/env python
# raw_fi=True, as fusepy documents it: open/create/read/write/release receive
# the fuse_file_info itself; the file system keeps its handle in fi.fh and
# may set fi.direct_io / fi.keep_cache.
import sys
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations


class Notes(Operations):
    def __init__(self):
        self.files = {'/hello': b'hello from raw_fi\n'}
        self.handles = {}
        self.next = 100

    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=S_IFDIR | 0o755, st_nlink=2)
        if path not in self.files:
            raise FuseOSError(ENOENT)
        return dict(st_mode=S_IFREG | 0o644, st_nlink=1, st_size=len(self.files[path]))

    def readdir(self, path, fh):
        return ['.', '..'] + [p[1:] for p in self.files]

    def open(self, path, fi):
        if path not in self.files:
            raise FuseOSError(ENOENT)
        self.next += 1
        fi.fh = self.next
        fi.keep_cache = True
        self.handles[fi.fh] = path
        return 0

    def create(self, path, mode, fi):
        self.files[path] = b''
        self.next += 1
        fi.fh = self.next
        self.handles[fi.fh] = path
        return 0

    def read(self, path, size, offset, fi):
        # the handle this file system chose, not a number ldpfuse made up
        return self.files[self.handles[fi.fh]][offset:offset + size]

    def write(self, path, data, offset, fi):
        name = self.handles[fi.fh]
        old = self.files[name]
        self.files[name] = old[:offset].ljust(offset, b'\0') + data + old[offset + len(data):]
        return len(data)

    def truncate(self, path, length, fh=None):
        self.files[path] = self.files[path][:length].ljust(length, b'\0')

    def release(self, path, fi):
        del self.handles[fi.fh]
        return 0


if __name__ == '__main__':
    FUSE(Notes(), sys.argv[1], foreground=True, raw_fi=True, nothreads=True)
