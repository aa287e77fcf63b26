#!/usr/bin/env python
# FUSE() called from a thread the script starts, the main thread joining it
# (as fsspec.fuse.run(foreground=False) and GUI front ends do).
import sys
import threading
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations

TEXT = b'served from a thread\n'


class OneFile(Operations):
    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=(S_IFDIR | 0o755), st_nlink=2)
        if path == '/file':
            return dict(st_mode=(S_IFREG | 0o444), st_nlink=1, st_size=len(TEXT))
        raise FuseOSError(ENOENT)

    def readdir(self, path, fh):
        return ['.', '..', 'file']

    def read(self, path, size, offset, fh):
        return TEXT[offset:offset + size]


if __name__ == '__main__':
    th = threading.Thread(target=lambda: FUSE(OneFile(), sys.argv[1], foreground=True))
    th.start()
    th.join()
