#!/usr/bin/env python3
"""fusepy's loopback example, the kernel-FUSE baseline of bench/run.py.

Mirrors the directory ROOT at MOUNTPOINT through kernel FUSE, one Python call
per operation, the way fusepy's own examples/loopback.py does (same methods,
same os.* calls, same lock around lseek+read/write).  One deliberate
difference: no LoggingMixIn, so the baseline pays nothing for logging.

    python3 bench/fusepy_loopback.py ROOT MOUNTPOINT     (stays in the foreground)
    fusermount -u MOUNTPOINT                             (or umount, as root)

Needs PyPI's fusepy and Debian's fuse + libfuse2.
"""
import errno
import os
import sys
from threading import Lock

from fuse import FUSE, FuseOSError, Operations


class Loopback(Operations):
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.rwlock = Lock()

    def __call__(self, op, path, *args):
        # every path the kernel hands us is relative to the mount: map it below ROOT
        return super().__call__(op, self.root + path, *args)

    def access(self, path, mode):
        if not os.access(path, mode):
            raise FuseOSError(errno.EACCES)

    chmod = os.chmod
    chown = os.chown

    def create(self, path, mode):
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def flush(self, path, fh):
        return os.fsync(fh)

    def fsync(self, path, datasync, fh):
        if datasync != 0:
            return os.fdatasync(fh)
        return os.fsync(fh)

    def getattr(self, path, fh=None):
        st = os.lstat(path)
        return {key: getattr(st, key) for key in (
            'st_atime', 'st_ctime', 'st_gid', 'st_mode', 'st_mtime',
            'st_nlink', 'st_size', 'st_uid')}

    getxattr = None
    listxattr = None

    def link(self, target, source):
        return os.link(self.root + source, target)

    mkdir = os.mkdir
    mknod = os.mknod
    open = os.open

    def read(self, path, size, offset, fh):
        with self.rwlock:
            os.lseek(fh, offset, 0)
            return os.read(fh, size)

    def readdir(self, path, fh):
        return ['.', '..'] + os.listdir(path)

    readlink = os.readlink

    def release(self, path, fh):
        return os.close(fh)

    def rename(self, old, new):
        return os.rename(old, self.root + new)

    rmdir = os.rmdir

    def statfs(self, path):
        stv = os.statvfs(path)
        return {key: getattr(stv, key) for key in (
            'f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail',
            'f_ffree', 'f_files', 'f_flag', 'f_frsize', 'f_namemax')}

    def symlink(self, target, source):
        return os.symlink(source, target)

    def truncate(self, path, length, fh=None):
        with open(path, 'r+') as f:
            f.truncate(length)

    unlink = os.unlink
    utimens = os.utime

    def write(self, path, data, offset, fh):
        with self.rwlock:
            os.lseek(fh, offset, 0)
            return os.write(fh, data)


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: %s ROOT MOUNTPOINT' % sys.argv[0])
    FUSE(Loopback(sys.argv[1]), sys.argv[2], foreground=True)
