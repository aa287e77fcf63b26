#!/usr/bin/env python
# An mfusepy file system: `import mfusepy as fuse`, the overrides decorator,
# type hints, and readdir tuples (name, attrs, offset).
import argparse
import errno
import stat
from typing import Any, Dict, Optional

import mfusepy as fuse

FILES = {'/a.txt': b'alpha\n', '/b.txt': b'bravo bravo\n'}


class Static(fuse.Operations):
    use_ns = True

    @fuse.overrides(fuse.Operations)
    def getattr(self, path: str, fh: Optional[int] = None) -> Dict[str, Any]:
        if path == '/':
            return {'st_mode': stat.S_IFDIR | 0o755, 'st_nlink': 2}
        if path in FILES:
            return {'st_mode': stat.S_IFREG | 0o444, 'st_nlink': 1, 'st_size': len(FILES[path]),
                    'st_mtime': 1_000_000_000 * 10**9 + 5}
        raise fuse.FuseOSError(errno.ENOENT)

    @fuse.overrides(fuse.Operations)
    def readdir(self, path: str, fh: int):
        return ['.', '..'] + [(name[1:], self.getattr(name), 0) for name in FILES]

    @fuse.overrides(fuse.Operations)
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return FILES[path][offset:offset + size]


def cli():
    parser = argparse.ArgumentParser()
    parser.add_argument('mount')
    args = parser.parse_args()
    fuse.FUSE(Static(), args.mount, foreground=True, nothreads=True)


if __name__ == '__main__':
    cli()
