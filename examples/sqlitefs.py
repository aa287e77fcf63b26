# SQLiteFS: a whole file system stored in one SQLite database file.
#
# Shows a file system whose state is shared by every process of a command,
# and outlives it, with no server: each process that touches the mount opens
# the same database, every operation is one SQLite transaction, and SQLite's
# own locking (WAL mode) keeps concurrent processes consistent. So
#
#   ldpfuse-run --mountpoint /mnt/s examples/sqlitefs.py:SQLiteFS fs.db -- \
#       sh -c 'echo hi > /mnt/s/a; cat /mnt/s/a'
#
# prints hi although `cat` is another process, and a later ldpfuse-run with
# the same fs.db finds /mnt/s/a again. Inodes, directory entries, 64 KiB data
# blocks and xattrs are four tables; hard links, symlinks, rename over an
# existing name and unlink of an open file (in the process that has it open)
# behave as on Linux. Copy the .db file (with sqlite3 .backup) to back it up.
#
# One thing it cannot serve: the sqlite3 program (or any program using the
# same libsqlite3) on a database inside the mount. The program's call into
# SQLite holds SQLite's locks when it opens the file, and the file system's
# own SQLite call in the same process waits for them forever.

import errno
import os
import sqlite3
import stat
import threading
import time

from ldpfuse_py import FuseOSError, Operations, fuse_get_context

BLOCK = 64 * 1024
ROOT = 1
XATTR_CREATE = getattr(os, "XATTR_CREATE", 1)
XATTR_REPLACE = getattr(os, "XATTR_REPLACE", 2)

SCHEMA = """
CREATE TABLE IF NOT EXISTS inode (
    ino INTEGER PRIMARY KEY, mode INTEGER NOT NULL, nlink INTEGER NOT NULL,
    uid INTEGER NOT NULL, gid INTEGER NOT NULL, rdev INTEGER NOT NULL DEFAULT 0,
    size INTEGER NOT NULL DEFAULT 0, atime INTEGER NOT NULL, mtime INTEGER NOT NULL,
    ctime INTEGER NOT NULL, target BLOB);
CREATE TABLE IF NOT EXISTS dentry (
    parent INTEGER NOT NULL, name BLOB NOT NULL, ino INTEGER NOT NULL,
    PRIMARY KEY (parent, name));
CREATE INDEX IF NOT EXISTS dentry_ino ON dentry (ino);
CREATE TABLE IF NOT EXISTS block (
    ino INTEGER NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (ino, idx));
CREATE TABLE IF NOT EXISTS xattr (
    ino INTEGER NOT NULL, name TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (ino, name));
"""


class SQLiteFS(Operations):
    """Serve the file system stored in the SQLite database ``db`` (created if new)."""

    use_ns = True

    def __init__(self, db):
        self.db_path = os.path.abspath(db)
        self.conn = None
        self.conn_pid = None
        self.lock = threading.RLock()
        self.open_count = {}        # ino -> open handles in this process
        os.register_at_fork(after_in_child=self._after_fork)
        with self.lock:
            self._setup()

    # ---- the database, one connection per process
    def _after_fork(self):
        self.lock = threading.RLock()
        self.open_count = dict(self.open_count)

    def _db(self):
        if self.conn_pid != os.getpid():
            # a connection must not cross fork: the child opens its own (and never
            # closes the parent's, whose locks are the parent's)
            self.conn = sqlite3.connect(self.db_path, timeout=60, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn_pid = os.getpid()
        return self.conn

    def _setup(self):
        db = self._db()
        db.executescript(SCHEMA)
        now = time.time_ns()
        db.execute("INSERT OR IGNORE INTO inode (ino, mode, nlink, uid, gid, atime, mtime, ctime)"
                   " VALUES (?, ?, 2, ?, ?, ?, ?, ?)",
                   (ROOT, stat.S_IFDIR | 0o755, os.getuid(), os.getgid(), now, now, now))

    def __call__(self, op, path, *args):
        # one operation at a time per process (threads share the connection); a
        # modifying operation is one transaction, so other processes see all of it
        with self.lock:
            db = self._db()
            if op in _READ_ONLY:
                return super().__call__(op, path, *args)
            db.execute("BEGIN IMMEDIATE")
            try:
                result = super().__call__(op, path, *args)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

    # ---- helpers
    def _row(self, ino):
        row = self.conn.execute("SELECT mode, nlink, uid, gid, rdev, size, atime, mtime, ctime,"
                                " target FROM inode WHERE ino = ?", (ino,)).fetchone()
        if row is None:
            raise FuseOSError(errno.ENOENT)
        return row

    def _lookup(self, path):
        ino = ROOT
        for part in path.split("/"):
            if not part:
                continue
            if not stat.S_ISDIR(self._row(ino)[0]):
                raise FuseOSError(errno.ENOTDIR)
            row = self.conn.execute("SELECT ino FROM dentry WHERE parent = ? AND name = ?",
                                    (ino, os.fsencode(part))).fetchone()
            if row is None:
                raise FuseOSError(errno.ENOENT)
            ino = row[0]
        return ino

    def _split(self, path):
        """(parent ino, name bytes) of path; the parent must be a directory."""
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head or "/")
        if not stat.S_ISDIR(self._row(parent)[0]):
            raise FuseOSError(errno.ENOTDIR)
        return parent, os.fsencode(name)

    def _child(self, parent, name):
        row = self.conn.execute("SELECT ino FROM dentry WHERE parent = ? AND name = ?",
                                (parent, name)).fetchone()
        return row[0] if row else None

    def _new_inode(self, parent, name, mode, rdev=0, target=None, nlink=1):
        if self._child(parent, name) is not None:
            raise FuseOSError(errno.EEXIST)
        now = time.time_ns()
        uid, gid, _ = fuse_get_context()  # the caller owns what it makes, as in the kernel
        cur = self.conn.execute(
            "INSERT INTO inode (mode, nlink, uid, gid, rdev, size, atime, mtime, ctime, target)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mode, nlink, uid, gid, rdev, len(target or b""), now, now, now, target))
        ino = cur.lastrowid
        self.conn.execute("INSERT INTO dentry (parent, name, ino) VALUES (?, ?, ?)",
                          (parent, name, ino))
        self._touch(parent)
        return ino

    def _touch(self, ino, *, data=True):
        now = time.time_ns()
        if data:
            self.conn.execute("UPDATE inode SET mtime = ?, ctime = ? WHERE ino = ?", (now, now, ino))
        else:
            self.conn.execute("UPDATE inode SET ctime = ? WHERE ino = ?", (now, ino))

    def _drop_link(self, ino):
        """One name fewer; the inode goes with its last name unless open here."""
        self.conn.execute("UPDATE inode SET nlink = nlink - 1, ctime = ? WHERE ino = ?",
                          (time.time_ns(), ino))
        if self._row(ino)[1] <= 0 and not self.open_count.get(ino):
            self._purge(ino)

    def _purge(self, ino):
        for table in ("inode", "block", "xattr"):
            self.conn.execute(f"DELETE FROM {table} WHERE ino = ?", (ino,))

    def _is_ancestor(self, ino, of):
        """Is directory ino one of the directories above `of` (or `of` itself)?"""
        while True:
            if of == ino:
                return True
            if of == ROOT:
                return False
            row = self.conn.execute("SELECT parent FROM dentry WHERE ino = ?", (of,)).fetchone()
            if row is None:
                return False
            of = row[0]

    # ---- metadata
    def getattr(self, path, fh=None):
        ino = fh if fh else self._lookup(path)
        mode, nlink, uid, gid, rdev, size, atime, mtime, ctime, _ = self._row(ino)
        return {"st_ino": ino, "st_mode": mode, "st_nlink": nlink, "st_uid": uid,
                "st_gid": gid, "st_rdev": rdev, "st_size": size,
                "st_blocks": (size + 511) // 512, "st_blksize": BLOCK,
                "st_atime": atime, "st_mtime": mtime, "st_ctime": ctime}

    def access(self, path, amode):
        self._lookup(path)
        return 0

    def readdir(self, path, fh):
        ino = self._lookup(path)
        if not stat.S_ISDIR(self._row(ino)[0]):
            raise FuseOSError(errno.ENOTDIR)
        rows = self.conn.execute(
            "SELECT d.name, d.ino, i.mode FROM dentry d JOIN inode i ON i.ino = d.ino"
            " WHERE d.parent = ?", (ino,)).fetchall()
        return [".", ".."] + [(os.fsdecode(name), {"st_ino": child, "st_mode": mode}, 0)
                              for name, child, mode in rows]

    def mkdir(self, path, mode):
        parent, name = self._split(path)
        self._new_inode(parent, name, stat.S_IFDIR | (mode & 0o7777), nlink=2)
        self.conn.execute("UPDATE inode SET nlink = nlink + 1 WHERE ino = ?", (parent,))

    def mknod(self, path, mode, dev):
        parent, name = self._split(path)
        self._new_inode(parent, name, mode if stat.S_IFMT(mode) else stat.S_IFREG | mode, dev)

    def symlink(self, target, source):
        # fusepy's order: symlink(the new link's path, what it points to)
        parent, name = self._split(target)
        self._new_inode(parent, name, stat.S_IFLNK | 0o777, target=os.fsencode(source))

    def readlink(self, path):
        mode, *_, target = self._row(self._lookup(path))
        if not stat.S_ISLNK(mode):
            raise FuseOSError(errno.EINVAL)
        return os.fsdecode(target)

    def link(self, target, source):
        # fusepy's order: link(the new name, the existing file)
        ino = self._lookup(source)
        if stat.S_ISDIR(self._row(ino)[0]):
            raise FuseOSError(errno.EPERM)
        parent, name = self._split(target)
        if self._child(parent, name) is not None:
            raise FuseOSError(errno.EEXIST)
        self.conn.execute("INSERT INTO dentry (parent, name, ino) VALUES (?, ?, ?)",
                          (parent, name, ino))
        self.conn.execute("UPDATE inode SET nlink = nlink + 1 WHERE ino = ?", (ino,))
        self._touch(ino, data=False)
        self._touch(parent)

    def unlink(self, path):
        parent, name = self._split(path)
        ino = self._child(parent, name)
        if ino is None:
            raise FuseOSError(errno.ENOENT)
        if stat.S_ISDIR(self._row(ino)[0]):
            raise FuseOSError(errno.EISDIR)
        self.conn.execute("DELETE FROM dentry WHERE parent = ? AND name = ?", (parent, name))
        self._touch(parent)
        self._drop_link(ino)

    def rmdir(self, path):
        parent, name = self._split(path)
        ino = self._child(parent, name)
        if ino is None:
            raise FuseOSError(errno.ENOENT)
        if not stat.S_ISDIR(self._row(ino)[0]):
            raise FuseOSError(errno.ENOTDIR)
        if self.conn.execute("SELECT 1 FROM dentry WHERE parent = ? LIMIT 1", (ino,)).fetchone():
            raise FuseOSError(errno.ENOTEMPTY)
        self.conn.execute("DELETE FROM dentry WHERE parent = ? AND name = ?", (parent, name))
        self.conn.execute("UPDATE inode SET nlink = nlink - 1 WHERE ino = ?", (parent,))
        self._touch(parent)
        self._purge(ino)

    def rename(self, old, new):
        old_parent, old_name = self._split(old)
        new_parent, new_name = self._split(new)
        ino = self._child(old_parent, old_name)
        if ino is None:
            raise FuseOSError(errno.ENOENT)
        is_dir = stat.S_ISDIR(self._row(ino)[0])
        if is_dir and self._is_ancestor(ino, new_parent):
            raise FuseOSError(errno.EINVAL)
        existing = self._child(new_parent, new_name)
        if existing == ino:
            return 0
        if existing is not None:
            existing_dir = stat.S_ISDIR(self._row(existing)[0])
            if is_dir and not existing_dir:
                raise FuseOSError(errno.ENOTDIR)
            if existing_dir and not is_dir:
                raise FuseOSError(errno.EISDIR)
            if existing_dir:
                self.rmdir(new)
            else:
                self.unlink(new)
        self.conn.execute("UPDATE dentry SET parent = ?, name = ? WHERE parent = ? AND name = ?",
                          (new_parent, new_name, old_parent, old_name))
        if is_dir and old_parent != new_parent:
            self.conn.execute("UPDATE inode SET nlink = nlink - 1 WHERE ino = ?", (old_parent,))
            self.conn.execute("UPDATE inode SET nlink = nlink + 1 WHERE ino = ?", (new_parent,))
        self._touch(old_parent)
        self._touch(new_parent)
        self._touch(ino, data=False)

    def chmod(self, path, mode):
        ino = self._lookup(path)
        old = self._row(ino)[0]
        self.conn.execute("UPDATE inode SET mode = ? WHERE ino = ?",
                          (stat.S_IFMT(old) | (mode & 0o7777), ino))
        self._touch(ino, data=False)

    def chown(self, path, uid, gid):
        ino = self._lookup(path)
        if uid not in (-1, 0xFFFFFFFF):
            self.conn.execute("UPDATE inode SET uid = ? WHERE ino = ?", (uid, ino))
        if gid not in (-1, 0xFFFFFFFF):
            self.conn.execute("UPDATE inode SET gid = ? WHERE ino = ?", (gid, ino))
        self._touch(ino, data=False)

    def utimens(self, path, times=None):
        ino = self._lookup(path)
        now = time.time_ns()
        atime, mtime = times if times else (now, now)
        self.conn.execute("UPDATE inode SET atime = ?, mtime = ?, ctime = ? WHERE ino = ?",
                          (int(atime), int(mtime), now, ino))

    def statfs(self, path):
        (files,) = self.conn.execute("SELECT count(*) FROM inode").fetchone()
        (used,) = self.conn.execute("SELECT coalesce(sum(size), 0) FROM inode").fetchone()
        total = max(1 << 30, used * 2)
        return {"f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": total // BLOCK,
                "f_bfree": (total - used) // BLOCK, "f_bavail": (total - used) // BLOCK,
                "f_files": files + 1_000_000, "f_ffree": 1_000_000, "f_favail": 1_000_000,
                "f_namemax": 255}

    # ---- xattrs
    def setxattr(self, path, name, value, options, position=0):
        ino = self._lookup(path)
        if not name.startswith(("user.", "trusted.")):
            # system.posix_acl_* would have to change the mode bits (cp -a sets
            # permissions that way when it can): without ACL support, say so and
            # programs fall back to chmod
            raise FuseOSError(errno.ENOTSUP)
        exists = self.conn.execute("SELECT 1 FROM xattr WHERE ino = ? AND name = ?",
                                   (ino, name)).fetchone()
        if options & XATTR_CREATE and exists:
            raise FuseOSError(errno.EEXIST)
        if options & XATTR_REPLACE and not exists:
            raise FuseOSError(errno.ENODATA)
        self.conn.execute("INSERT OR REPLACE INTO xattr (ino, name, value) VALUES (?, ?, ?)",
                          (ino, name, bytes(value)))
        self._touch(ino, data=False)

    def getxattr(self, path, name, position=0):
        row = self.conn.execute("SELECT value FROM xattr WHERE ino = ? AND name = ?",
                                (self._lookup(path), name)).fetchone()
        if row is None:
            raise FuseOSError(errno.ENODATA)
        return row[0]

    def listxattr(self, path):
        return [name for (name,) in self.conn.execute(
            "SELECT name FROM xattr WHERE ino = ?", (self._lookup(path),))]

    def removexattr(self, path, name):
        ino = self._lookup(path)
        cur = self.conn.execute("DELETE FROM xattr WHERE ino = ? AND name = ?", (ino, name))
        if cur.rowcount == 0:
            raise FuseOSError(errno.ENODATA)

    # ---- data: the handle is the inode number, so a renamed or unlinked open file
    # stays reachable through it
    def create(self, path, mode, fi=None):
        parent, name = self._split(path)
        ino = self._child(parent, name)
        if ino is None:
            ino = self._new_inode(parent, name, stat.S_IFREG | (mode & 0o7777))
        elif fi is not None and fi.flags & os.O_EXCL:
            raise FuseOSError(errno.EEXIST)
        elif fi is not None and fi.flags & os.O_TRUNC:
            self._truncate(ino, 0)
        self.open_count[ino] = self.open_count.get(ino, 0) + 1
        return ino

    def open(self, path, flags):
        ino = self._lookup(path)
        if stat.S_ISDIR(self._row(ino)[0]) and flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EISDIR)
        if flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR):
            self._truncate(ino, 0)
        self.open_count[ino] = self.open_count.get(ino, 0) + 1
        return ino

    def release(self, path, fh):
        left = self.open_count.get(fh, 1) - 1
        if left > 0:
            self.open_count[fh] = left
            return 0
        self.open_count.pop(fh, None)
        row = self.conn.execute("SELECT nlink FROM inode WHERE ino = ?", (fh,)).fetchone()
        if row is not None and row[0] <= 0:
            self._purge(fh)
        return 0

    def read(self, path, size, offset, fh):
        file_size = self._row(fh)[5]
        end = min(offset + size, file_size)
        if offset >= end:
            return b""
        first, last = offset // BLOCK, (end - 1) // BLOCK
        blocks = dict(self.conn.execute(
            "SELECT idx, data FROM block WHERE ino = ? AND idx BETWEEN ? AND ?",
            (fh, first, last)))
        out = bytearray()
        for idx in range(first, last + 1):
            data = blocks.get(idx, b"")
            out += data.ljust(BLOCK, b"\0") if idx < last else data
        start = offset - first * BLOCK
        return bytes(out[start:start + (end - offset)]).ljust(end - offset, b"\0")

    def write(self, path, data, offset, fh):
        pos, view = offset, memoryview(data)
        while view:
            idx, at = divmod(pos, BLOCK)
            take = min(len(view), BLOCK - at)
            row = self.conn.execute("SELECT data FROM block WHERE ino = ? AND idx = ?",
                                    (fh, idx)).fetchone()
            block = bytearray(row[0] if row else b"")
            if len(block) < at:
                block += b"\0" * (at - len(block))
            block[at:at + take] = view[:take]
            self.conn.execute("INSERT OR REPLACE INTO block (ino, idx, data) VALUES (?, ?, ?)",
                              (fh, idx, bytes(block)))
            pos += take
            view = view[take:]
        now = time.time_ns()
        self.conn.execute("UPDATE inode SET size = max(size, ?), mtime = ?, ctime = ?"
                          " WHERE ino = ?", (offset + len(data), now, now, fh))
        return len(data)

    def truncate(self, path, length, fh=None):
        self._truncate(fh if fh else self._lookup(path), length)

    def _truncate(self, ino, length):
        if stat.S_ISDIR(self._row(ino)[0]):
            raise FuseOSError(errno.EISDIR)
        last = (length - 1) // BLOCK if length else -1
        self.conn.execute("DELETE FROM block WHERE ino = ? AND idx > ?", (ino, last))
        if length % BLOCK:
            row = self.conn.execute("SELECT data FROM block WHERE ino = ? AND idx = ?",
                                    (ino, last)).fetchone()
            if row is not None and len(row[0]) > length % BLOCK:
                self.conn.execute("UPDATE block SET data = ? WHERE ino = ? AND idx = ?",
                                  (row[0][:length % BLOCK], ino, last))
        now = time.time_ns()
        self.conn.execute("UPDATE inode SET size = ?, mtime = ?, ctime = ? WHERE ino = ?",
                          (length, now, now, ino))

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0


# operations that only read: no write transaction for them
_READ_ONLY = {"getattr", "access", "readdir", "readlink", "read", "statfs", "getxattr",
              "listxattr", "opendir", "releasedir", "flush", "fsync", "init", "destroy"}
