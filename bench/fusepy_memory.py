#!/usr/bin/env python3
"""fusepy's memory example, the kernel-FUSE baseline of bench/run.py.

An in-memory file system served through kernel FUSE, shaped like fusepy's own
examples/memory.py: a dict of path -> attributes and a dict of path -> data,
one Python call per operation.  Two changes so that the benchmark fixture
fits in it: directories nest (readdir lists a directory's own children, not
every path), and file data is a bytearray written in place (fusepy's
`data[:offset] + data` copies the whole file on every write, quadratic for the
64 MiB fixture file).  No LoggingMixIn: the baseline pays nothing for logging.

    python3 bench/fusepy_memory.py MOUNTPOINT     (stays in the foreground)
    fusermount -u MOUNTPOINT

Needs PyPI's fusepy and Debian's fuse + libfuse2.
"""
import errno
import sys
from collections import defaultdict
from stat import S_IFDIR, S_IFLNK, S_IFREG
from time import time

from fuse import FUSE, FuseOSError, Operations


class Memory(Operations):
    def __init__(self):
        self.files = {}
        self.data = defaultdict(bytearray)
        self.fd = 0
        now = time()
        self.files['/'] = dict(st_mode=(S_IFDIR | 0o755), st_ctime=now,
                               st_mtime=now, st_atime=now, st_nlink=2)

    def chmod(self, path, mode):
        self.files[path]['st_mode'] &= 0o770000
        self.files[path]['st_mode'] |= mode
        return 0

    def chown(self, path, uid, gid):
        self.files[path]['st_uid'] = uid
        self.files[path]['st_gid'] = gid

    def create(self, path, mode):
        now = time()
        self.files[path] = dict(st_mode=(S_IFREG | mode), st_nlink=1,
                                st_size=0, st_ctime=now, st_mtime=now,
                                st_atime=now)
        self.data[path] = bytearray()
        self.fd += 1
        return self.fd

    def getattr(self, path, fh=None):
        if path not in self.files:
            raise FuseOSError(errno.ENOENT)
        return self.files[path]

    def mkdir(self, path, mode):
        now = time()
        self.files[path] = dict(st_mode=(S_IFDIR | mode), st_nlink=2,
                                st_size=0, st_ctime=now, st_mtime=now,
                                st_atime=now)
        self.files[self._parent(path)]['st_nlink'] += 1

    def open(self, path, flags):
        self.fd += 1
        return self.fd

    def read(self, path, size, offset, fh):
        return bytes(self.data[path][offset:offset + size])

    def readdir(self, path, fh):
        prefix = path.rstrip('/') + '/'
        return ['.', '..'] + [p[len(prefix):] for p in self.files
                              if p != '/' and p.startswith(prefix)
                              and '/' not in p[len(prefix):]]

    def readlink(self, path):
        return bytes(self.data[path]).decode()

    def rename(self, old, new):
        self.files[new] = self.files.pop(old)
        if old in self.data:
            self.data[new] = self.data.pop(old)

    def rmdir(self, path):
        self.files.pop(path)
        self.files[self._parent(path)]['st_nlink'] -= 1

    def statfs(self, path):
        return dict(f_bsize=512, f_blocks=4096, f_bavail=2048)

    def symlink(self, target, source):
        self.files[target] = dict(st_mode=(S_IFLNK | 0o777), st_nlink=1,
                                  st_size=len(source))
        self.data[target] = bytearray(source.encode())

    def truncate(self, path, length, fh=None):
        buf = self.data[path]
        if length < len(buf):
            del buf[length:]
        else:
            buf.extend(bytes(length - len(buf)))
        self.files[path]['st_size'] = length

    def unlink(self, path):
        self.files.pop(path)
        self.data.pop(path, None)

    def utimens(self, path, times=None):
        now = time()
        atime, mtime = times if times else (now, now)
        self.files[path]['st_atime'] = atime
        self.files[path]['st_mtime'] = mtime

    def write(self, path, data, offset, fh):
        buf = self.data[path]
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(data)] = data
        self.files[path]['st_size'] = len(buf)
        return len(data)

    @staticmethod
    def _parent(path):
        return path.rsplit('/', 1)[0] or '/'


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: %s MOUNTPOINT' % sys.argv[0])
    FUSE(Memory(), sys.argv[1], foreground=True)
