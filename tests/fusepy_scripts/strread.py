#!/usr/bin/env python
# A fusepy file system with a classic bug: read() returns str. fusepy copies
# the str's internal buffer (garbage); ldpfuse encodes it and logs it once.
import sys
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations

TEXT = 'plain text from a str\n'


class StrRead(Operations):
    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=S_IFDIR | 0o755, st_nlink=2)
        if path == '/boom':
            return dict(st_mode=S_IFREG | 0o444, st_nlink=1, st_size=0)
        if path == '/text':
            return dict(st_mode=S_IFREG | 0o444, st_nlink=1, st_size=len(TEXT))
        raise FuseOSError(ENOENT)

    def read(self, path, size, offset, fh):
        return TEXT[offset:offset + size]

    def open(self, path, flags):
        if path == '/boom':
            # Ctrl-C while the file system runs inside a Python program
            import os
            import signal
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10 ** 7):
                pass
        return 0


if __name__ == '__main__':
    print('mounting on', sys.argv[1])     # must not reach the program's output
    FUSE(StrRead(), sys.argv[1], foreground=True)
    print('unmounted')
