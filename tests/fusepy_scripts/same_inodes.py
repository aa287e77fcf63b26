#!/usr/bin/env python
# A file system that returns the same st_ino for every directory (as
# dissect.target's does for some images). With fusepy's default
# use_ino=False inode numbers come from the mount, not from the file system,
# and `find` sees no loop; `same_inodes.py MOUNT use_ino` passes use_ino=True.
import sys
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations

TREE = {'/': ['a', 'b'], '/a': ['c'], '/b': [], '/a/c': []}


class SameInodes(Operations):
    def getattr(self, path, fh=None):
        if path in TREE:
            return dict(st_mode=(S_IFDIR | 0o755), st_nlink=2, st_ino=7)
        if path == '/a/c/f':
            return dict(st_mode=(S_IFREG | 0o644), st_nlink=1, st_size=0, st_ino=7)
        raise FuseOSError(ENOENT)

    def readdir(self, path, fh):
        names = TREE.get(path, [])
        if path == '/a/c':
            names = ['f']
        return ['.', '..'] + names


if __name__ == '__main__':
    FUSE(SameInodes(), sys.argv[1], foreground=True, use_ino=sys.argv[2:] == ['use_ino'])
