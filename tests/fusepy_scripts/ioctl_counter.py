#!/usr/bin/env python
# The shape of fusepy's examples/ioctl.py: a memory file system whose ioctl()
# answers one request, M_IOWR = _IOWR('M', 1, uint32_t), by adding one to the
# caller's 32-bit number in place (ctypes.memmove on the `data` address), and
# ENOTTY to every other request. (fusepy's example gets _IOWR from the
# ioctl_opt package; it is computed here.)
import ctypes
import logging
import struct
import sys
from collections import defaultdict
from errno import ENOENT, ENOTTY
from stat import S_IFDIR, S_IFREG
from time import time

from fuse import FUSE, FuseOSError, Operations, LoggingMixIn

if not hasattr(__builtins__, 'bytes'):
    bytes = str


def IOWR(type_, nr, size):
    # _IOC(_IOC_READ | _IOC_WRITE, type, nr, size) on Linux
    return (3 << 30) | (size << 16) | (type_ << 8) | nr


class Ioctl(LoggingMixIn, Operations):
    def __init__(self):
        self.files = {}
        self.data = defaultdict(bytes)
        self.fd = 0
        now = time()
        self.files['/'] = dict(st_mode=(S_IFDIR | 0o755), st_ctime=now,
                               st_mtime=now, st_atime=now, st_nlink=2)

    def create(self, path, mode):
        self.files[path] = dict(st_mode=(S_IFREG | mode), st_nlink=1, st_size=0,
                                st_ctime=time(), st_mtime=time(), st_atime=time())
        self.fd += 1
        return self.fd

    def getattr(self, path, fh=None):
        if path not in self.files:
            raise FuseOSError(ENOENT)
        return self.files[path]

    def ioctl(self, path, cmd, arg, fh, flags, data):
        M_IOWR = IOWR(ord('M'), 1, ctypes.sizeof(ctypes.c_uint32))
        if cmd == M_IOWR:
            inbuf = ctypes.create_string_buffer(4)
            ctypes.memmove(inbuf, data, 4)
            data_in = struct.unpack('<I', inbuf)[0]
            data_out = data_in + 1
            outbuf = struct.pack('<I', data_out)
            ctypes.memmove(data, outbuf, 4)
        else:
            raise FuseOSError(ENOTTY)
        return 0

    def open(self, path, flags):
        self.fd += 1
        return self.fd

    def read(self, path, size, offset, fh):
        return self.data[path][offset:offset + size]

    def readdir(self, path, fh):
        return ['.', '..'] + [x[1:] for x in self.files if x != '/']


if __name__ == '__main__':
    logging.basicConfig(level=logging.DEBUG)
    FUSE(Ioctl(), sys.argv[1], foreground=True)
