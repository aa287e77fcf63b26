#!/usr/bin/env python
# Two getattr answers that kernel FUSE and fusepy take without a word:
# /nomode has no st_mode, /misspelt says size= for st_size=.
import sys
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations


class WrongGetattr(Operations):
    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=(S_IFDIR | 0o755), st_nlink=2)
        if path == '/nomode':
            return dict(st_nlink=1, st_size=5)
        if path == '/misspelt':
            return dict(st_mode=(S_IFREG | 0o644), st_nlink=1, size=5)
        raise FuseOSError(ENOENT)

    def readdir(self, path, fh):
        return ['.', '..', 'nomode', 'misspelt']


if __name__ == '__main__':
    FUSE(WrongGetattr(), sys.argv[1], foreground=True)
