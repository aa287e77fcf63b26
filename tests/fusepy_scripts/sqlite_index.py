#!/usr/bin/env python
# A read-only file system over an sqlite3 index, in the shape of ratarmount:
# the index is opened in a `with` block around FUSE(..., nothreads=True)
# (sqlite3 objects may only be used by the thread that made them), and closed
# when FUSE() returns at unmount. The `finally` clause records the order.
#
#     sqlite_index.py RECORD MOUNTPOINT
import contextlib
import sqlite3
import sys
from errno import ENOENT
from stat import S_IFDIR, S_IFREG

from fuse import FUSE, FuseOSError, Operations


class Index(Operations):
    def __init__(self, connection):
        self.db = connection

    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=(S_IFDIR | 0o755), st_nlink=2)
        row = self.db.execute('SELECT length(data) FROM files WHERE name = ?',
                              (path[1:],)).fetchone()
        if row is None:
            raise FuseOSError(ENOENT)
        return dict(st_mode=(S_IFREG | 0o444), st_nlink=1, st_size=row[0])

    def readdir(self, path, fh):
        return ['.', '..'] + [r[0] for r in self.db.execute('SELECT name FROM files ORDER BY name')]

    def read(self, path, size, offset, fh):
        row = self.db.execute('SELECT data FROM files WHERE name = ?', (path[1:],)).fetchone()
        return row[0][offset:offset + size]


def record(line):
    with open(sys.argv[1], 'a') as f:
        f.write(line + '\n')


if __name__ == '__main__':
    connection = sqlite3.connect(':memory:')
    connection.execute('CREATE TABLE files (name TEXT, data BLOB)')
    for name, text in (('alpha.txt', b'alpha\n' * 3), ('beta.txt', b'beta\n')):
        connection.execute('INSERT INTO files VALUES (?, ?)', (name, text))
    try:
        with contextlib.closing(connection):
            FUSE(Index(connection), sys.argv[2], foreground=True, nothreads=True, ro=True)
            record('FUSE returned')
        record('index closed')
    finally:
        record('finally')
