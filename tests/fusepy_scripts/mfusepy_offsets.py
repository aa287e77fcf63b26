#!/usr/bin/env python3
# The shape of mfusepy's examples/readdir_with_offset.py and
# memory_nullpath.py: a directory of 1000 files listed by
# readdir_with_offset (readdir keeps Operations' default), init_with_config
# and the @overrides decorator, and mfusepy's ENOATTR for a missing extended
# attribute.
import argparse
import errno
import logging
import stat as stat_module
from typing import Optional

import mfusepy as fuse

log = logging.getLogger('readdir with offset')


class ReaddirWithOffset(fuse.Operations):
    use_ns = True

    def __init__(self):
        self._file_count = 1000
        self.initialised = False

    @fuse.overrides(fuse.Operations)
    def init_with_config(self, conn_info: Optional[fuse.fuse_conn_info], config_3: Optional[fuse.fuse_config]) -> None:
        if config_3:
            config_3.use_ino = True
        self.initialised = True

    @fuse.overrides(fuse.Operations)
    def getattr(self, path: str, fh: Optional[int] = None):
        if not self.initialised:
            raise fuse.FuseOSError(errno.EIO)
        if path == '/':
            return {'st_mode': stat_module.S_IFDIR | 0o755, 'st_nlink': 2, 'st_size': 4096}
        if path.strip('/').isdigit():
            return {'st_mode': stat_module.S_IFREG | 0o644, 'st_nlink': 1, 'st_size': 0}
        raise fuse.FuseOSError(errno.ENOENT)

    @fuse.overrides(fuse.Operations)
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        if name == 'user.kind':
            return b'numbered'
        raise fuse.FuseOSError(fuse.ENOATTR)

    @fuse.overrides(fuse.Operations)
    def listxattr(self, path: str):
        return ['user.kind']

    @fuse.overrides(fuse.Operations)
    def readdir_with_offset(self, path: str, offset: int, fh: int) -> fuse.ReadDirResult:
        log.debug('readdir path=%s, offset=%d', path, offset)
        if path != '/':
            raise fuse.FuseOSError(errno.ENOENT)
        entry_id = 1
        if offset == 0 or entry_id >= offset:
            yield ('.', {'st_mode': stat_module.S_IFDIR | 0o755}, entry_id)
        entry_id += 1
        if offset == 0 or entry_id >= offset:
            yield ('..', {'st_mode': stat_module.S_IFDIR | 0o755}, entry_id)
        entry_id += 1
        for i in range(max(0, offset - 2), self._file_count):
            yield f'{i:04d}', {'st_mode': stat_module.S_IFREG | 0o644}, entry_id + i


def cli(args=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('mount')
    args = parser.parse_args(args)
    fuse.FUSE(ReaddirWithOffset(), args.mount, foreground=True)


if __name__ == '__main__':
    cli()
