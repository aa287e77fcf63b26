# Memory: a complete file system held in Python objects.
#
# Shows how a file system that owns its data implements fusepy's API: a tree
# of inodes (a directory maps names to inodes, a file holds a bytearray, a
# symlink holds its target), so hard links share one inode and a renamed or
# unlinked file stays reachable through its open handle (fh). Every error is
# the errno Linux gives for the same call: ENOENT, ENOTDIR, EEXIST, EISDIR,
# ENOTEMPTY, EINVAL, ENODATA. Appends cost O(1) amortised: the bytearray
# grows in place, it is never copied per write.
#
# Run it (one tree for every process of the command: the default shared mode;
# with --mode embedded each process would build its own):
#
#   ldpfuse-run --mountpoint /mnt/m examples/memory.py:Memory -- python3 script.py

import os
import time
from errno import (
    EACCES, EBUSY, EEXIST, EFBIG, EINVAL, EISDIR, ELOOP, ENODATA, ENOENT, ENOTDIR, ENOTEMPTY,
    EOPNOTSUPP, EPERM,
)
from stat import (
    S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK,
)

from ldpfuse_py import FuseOSError, Operations, fuse_get_context

XATTR_CREATE = getattr(os, "XATTR_CREATE", 1)
XATTR_REPLACE = getattr(os, "XATTR_REPLACE", 2)
UNCHANGED_IDS = (-1, 0xFFFFFFFF)  # chown's "leave it": -1, or as an unsigned id_t
BLOCK_SIZE = 4096
MAX_FILE_SIZE = 16 * 2**30  # what statfs says the tree holds: a larger file is EFBIG


class Inode:
    "What every kind of file has: the fields of struct stat and xattrs."

    __slots__ = ("ino", "mode", "nlink", "uid", "gid", "rdev",
                 "atime", "mtime", "ctime", "xattrs")

    def __init__(self, ino, mode, uid, gid, now):
        self.ino = ino
        self.mode = mode
        self.nlink = 1
        self.uid = uid
        self.gid = gid
        self.rdev = 0
        self.atime = self.mtime = self.ctime = now
        self.xattrs = None  # dict name -> bytes, made on first setxattr

    def size(self):
        return 0


class File(Inode):
    __slots__ = ("data",)

    def __init__(self, ino, mode, uid, gid, now):
        super().__init__(ino, mode, uid, gid, now)
        self.data = bytearray()

    def size(self):
        return len(self.data)


class Directory(Inode):
    "entries: name -> Inode; parent: the Directory that '..' names."

    __slots__ = ("entries", "parent")

    def __init__(self, ino, mode, uid, gid, now, parent=None):
        super().__init__(ino, mode, uid, gid, now)
        self.nlink = 2  # its entry in the parent, and '.'; +1 per subdirectory
        self.entries = {}
        self.parent = parent if parent is not None else self

    def size(self):
        return BLOCK_SIZE


class Symlink(Inode):
    __slots__ = ("target",)

    def __init__(self, ino, mode, uid, gid, now, target):
        super().__init__(ino, mode, uid, gid, now)
        self.target = target

    def size(self):
        return len(os.fsencode(self.target))


class Memory(Operations):
    use_ns = True
    # open() only pins the inode (fh -> inode, so that an unlinked file stays
    # readable) and release() only unpins it: a process that read a file may open
    # it again, unchanged, with no request (docs/operations.md, open_only_pins)
    open_only_pins = True

    def __init__(self):
        self._next_ino = 1
        self._next_fh = 1
        self._handles = {}  # fh -> Inode
        uid, gid, _ = fuse_get_context()
        self.root = Directory(self._new_ino(), S_IFDIR | 0o755, uid, gid, time.time_ns())
        # No lock: the class is not thread_safe, so ldpfuse calls it one
        # operation at a time, in both modes, whatever the program's threads.

    # Tree walking

    def _new_ino(self):
        ino = self._next_ino
        self._next_ino += 1
        return ino

    @staticmethod
    def _names(path):
        return [name for name in path.split("/") if name]

    def _walk(self, names):
        "The Directory reached by following names from the root."
        node = self.root
        for name in names:
            node = node.entries.get(name)
            if node is None:
                raise FuseOSError(ENOENT)
            if not isinstance(node, Directory):
                raise FuseOSError(ENOTDIR)
        return node

    def _lookup(self, path):
        names = self._names(path)
        if not names:
            return self.root
        node = self._walk(names[:-1]).entries.get(names[-1])
        if node is None:
            raise FuseOSError(ENOENT)
        return node

    def _parent(self, path, errno_for_root):
        "(parent Directory, name) of path; path '/' has none."
        names = self._names(path)
        if not names:
            raise FuseOSError(errno_for_root)
        return self._walk(names[:-1]), names[-1]

    def _node(self, path, fh):
        "The inode of an open handle if fh is live, else the one path names."
        if fh is not None:
            node = self._handles.get(fh)
            if node is not None:
                return node
        return self._lookup(path)

    def _file(self, path, fh):
        node = self._node(path, fh)
        if isinstance(node, Directory):
            raise FuseOSError(EISDIR)
        if not isinstance(node, File):
            raise FuseOSError(EINVAL)
        return node

    def _add(self, parent, name, kind, mode, *args):
        "Make a kind(ino, mode, uid, gid, now, *args) inode named name in parent."
        if name in parent.entries:
            raise FuseOSError(EEXIST)
        uid, gid, _ = fuse_get_context()
        now = time.time_ns()
        node = kind(self._new_ino(), mode, uid, gid, now, *args)
        parent.entries[name] = node
        parent.mtime = parent.ctime = now
        return node

    def _open_handle(self, node):
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = node
        return fh

    # Attributes

    def getattr(self, path, fh=None):
        return self._attrs(self._node(path, fh))

    @staticmethod
    def _attrs(node):
        size = node.size()
        return {
            "st_mode": node.mode,
            "st_ino": node.ino,
            "st_nlink": node.nlink,
            "st_uid": node.uid,
            "st_gid": node.gid,
            "st_rdev": node.rdev,
            "st_size": size,
            "st_blksize": BLOCK_SIZE,
            "st_blocks": (size + 511) // 512,
            "st_atime": node.atime,
            "st_mtime": node.mtime,
            "st_ctime": node.ctime,
        }

    def access(self, path, amode):
        node = self._lookup(path)
        amode &= os.R_OK | os.W_OK | os.X_OK
        if not amode:
            return 0  # F_OK: it exists
        uid, gid, _ = fuse_get_context()
        if uid == 0:
            # root may read and write anything, and execute what anyone may
            if amode & os.X_OK and not isinstance(node, Directory) and not node.mode & 0o111:
                raise FuseOSError(EACCES)
            return 0
        if uid == node.uid:
            allowed = (node.mode >> 6) & 7
        elif gid == node.gid or node.gid in os.getgroups():
            allowed = (node.mode >> 3) & 7
        else:
            allowed = node.mode & 7
        if amode & ~allowed:
            raise FuseOSError(EACCES)
        return 0

    def chmod(self, path, mode):
        node = self._lookup(path)
        if isinstance(node, Symlink):
            raise FuseOSError(EOPNOTSUPP)  # as lchmod on Linux
        node.mode = S_IFMT(node.mode) | (mode & 0o7777)
        node.ctime = time.time_ns()

    def chown(self, path, uid, gid):
        node = self._lookup(path)
        if uid not in UNCHANGED_IDS:
            node.uid = uid
        if gid not in UNCHANGED_IDS:
            node.gid = gid
        # no set-ID bits to clear here: ldpfuse calls chmod for that after a chown, a
        # write or a truncation, as kernel FUSE does (docs/operations.md)
        node.ctime = time.time_ns()

    def utimens(self, path, times=None):
        node = self._lookup(path)
        now = time.time_ns()
        if times is None:
            node.atime = node.mtime = now
        else:
            node.atime, node.mtime = times
        node.ctime = now

    def statfs(self, path):
        # Nominal numbers (16 GiB, a million inodes): the tree has no quota.
        blocks = MAX_FILE_SIZE // BLOCK_SIZE
        files = 2**20
        return {
            "f_bsize": BLOCK_SIZE,
            "f_frsize": BLOCK_SIZE,
            "f_blocks": blocks,
            "f_bfree": blocks,
            "f_bavail": blocks,
            "f_files": files,
            "f_ffree": files,
            "f_favail": files,
            "f_flag": 0,
            "f_namemax": 255,
        }

    # Extended attributes

    def getxattr(self, path, name, position=0):
        node = self._lookup(path)
        if node.xattrs is None or name not in node.xattrs:
            raise FuseOSError(ENODATA)
        return node.xattrs[name]

    def setxattr(self, path, name, value, options, position=0):
        node = self._lookup(path)
        if node.xattrs is None:
            node.xattrs = {}
        exists = name in node.xattrs
        if options & XATTR_CREATE and exists:
            raise FuseOSError(EEXIST)
        if options & XATTR_REPLACE and not exists:
            raise FuseOSError(ENODATA)
        node.xattrs[name] = bytes(value)
        node.ctime = time.time_ns()

    def listxattr(self, path):
        node = self._lookup(path)
        return list(node.xattrs) if node.xattrs else []

    def removexattr(self, path, name):
        node = self._lookup(path)
        if node.xattrs is None or name not in node.xattrs:
            raise FuseOSError(ENODATA)
        del node.xattrs[name]
        node.ctime = time.time_ns()

    # Directories

    def mkdir(self, path, mode):
        parent, name = self._parent(path, EEXIST)
        node = self._add(parent, name, Directory, S_IFDIR | (mode & 0o7777))
        node.parent = parent
        parent.nlink += 1  # the new directory's '..'

    def rmdir(self, path):
        parent, name = self._parent(path, EBUSY)
        node = parent.entries.get(name)
        if node is None:
            raise FuseOSError(ENOENT)
        if not isinstance(node, Directory):
            raise FuseOSError(ENOTDIR)
        if node.entries:
            raise FuseOSError(ENOTEMPTY)
        del parent.entries[name]
        node.nlink = 0
        parent.nlink -= 1
        now = time.time_ns()
        node.ctime = parent.mtime = parent.ctime = now

    def opendir(self, path):
        if not isinstance(self._lookup(path), Directory):
            raise FuseOSError(ENOTDIR)
        return 0

    def readdir(self, path, fh):
        node = self._lookup(path)
        if not isinstance(node, Directory):
            raise FuseOSError(ENOTDIR)
        entries = [".", ".."]
        for name, child in node.entries.items():
            # in full, as getattr gives them: kept as FUSE's readdirplus keeps them, so
            # a stat after the listing (ls -l, find) asks nothing
            entries.append((name, self._attrs(child), 0))
        return entries

    # Names

    def mknod(self, path, mode, dev):
        parent, name = self._parent(path, EEXIST)
        kind = S_IFMT(mode)
        perm = mode & 0o7777
        if kind in (0, S_IFREG):
            self._add(parent, name, File, S_IFREG | perm)
        elif kind in (S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK):
            node = self._add(parent, name, Inode, kind | perm)
            if kind in (S_IFCHR, S_IFBLK):
                node.rdev = dev
        elif kind == S_IFDIR:
            raise FuseOSError(EPERM)  # as Linux: directories are made by mkdir
        else:
            raise FuseOSError(EINVAL)

    def symlink(self, target, source):
        "ln -s source target: a link at target whose content is source."
        parent, name = self._parent(target, EEXIST)
        self._add(parent, name, Symlink, S_IFLNK | 0o777, source)

    def readlink(self, path):
        node = self._lookup(path)
        if not isinstance(node, Symlink):
            raise FuseOSError(EINVAL)
        return node.target

    def link(self, target, source):
        "ln source target: target becomes one more name of source's inode."
        node = self._lookup(source)
        if isinstance(node, Directory):
            raise FuseOSError(EPERM)
        parent, name = self._parent(target, EEXIST)
        if name in parent.entries:
            raise FuseOSError(EEXIST)
        parent.entries[name] = node
        node.nlink += 1
        now = time.time_ns()
        node.ctime = parent.mtime = parent.ctime = now

    def unlink(self, path):
        parent, name = self._parent(path, EISDIR)
        node = parent.entries.get(name)
        if node is None:
            raise FuseOSError(ENOENT)
        if isinstance(node, Directory):
            raise FuseOSError(EISDIR)
        del parent.entries[name]
        node.nlink -= 1  # open handles keep the inode alive
        now = time.time_ns()
        node.ctime = parent.mtime = parent.ctime = now

    def rename(self, old, new):
        old_parent, old_name = self._parent(old, EBUSY)
        node = old_parent.entries.get(old_name)
        if node is None:
            raise FuseOSError(ENOENT)
        new_parent, new_name = self._parent(new, EBUSY)
        replaced = new_parent.entries.get(new_name)
        if replaced is node:
            return 0  # same name, or two names of one inode: nothing to do
        if isinstance(node, Directory):
            # new must not be inside the directory being moved
            ancestor = new_parent
            while True:
                if ancestor is node:
                    raise FuseOSError(EINVAL)
                if ancestor is self.root:
                    break
                ancestor = ancestor.parent
        if replaced is not None:
            if isinstance(node, Directory):
                if not isinstance(replaced, Directory):
                    raise FuseOSError(ENOTDIR)
                if replaced.entries:
                    raise FuseOSError(ENOTEMPTY)
            elif isinstance(replaced, Directory):
                raise FuseOSError(EISDIR)

        now = time.time_ns()
        if replaced is not None:
            if isinstance(replaced, Directory):
                replaced.nlink = 0
                new_parent.nlink -= 1
            else:
                replaced.nlink -= 1
            replaced.ctime = now
        del old_parent.entries[old_name]
        new_parent.entries[new_name] = node
        if isinstance(node, Directory) and old_parent is not new_parent:
            node.parent = new_parent
            old_parent.nlink -= 1
            new_parent.nlink += 1
        node.ctime = now
        old_parent.mtime = old_parent.ctime = now
        new_parent.mtime = new_parent.ctime = now

    # Files

    def create(self, path, mode, fi=None):
        flags = fi.flags if fi is not None else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        parent, name = self._parent(path, EISDIR)
        node = parent.entries.get(name)
        if node is None:
            node = self._add(parent, name, File, S_IFREG | (mode & 0o7777))
        elif flags & os.O_EXCL:
            raise FuseOSError(EEXIST)
        elif isinstance(node, Directory):
            raise FuseOSError(EISDIR)
        else:
            node = self._opened(node, flags)
        return self._open_handle(node)

    def open(self, path, flags):
        return self._open_handle(self._opened(self._lookup(path), flags))

    def _opened(self, node, flags):
        "Check open(2)'s flags against an existing inode and apply O_TRUNC."
        writing = flags & os.O_ACCMODE != os.O_RDONLY
        if isinstance(node, Symlink):
            # The caller resolves symlinks before open, as the kernel does for
            # FUSE; a symlink that reaches here was not to be followed.
            raise FuseOSError(ELOOP)
        if isinstance(node, Directory):
            if writing:
                raise FuseOSError(EISDIR)
        elif flags & os.O_DIRECTORY:
            raise FuseOSError(ENOTDIR)
        if flags & os.O_TRUNC and writing and isinstance(node, File) and node.data:
            del node.data[:]
            node.mtime = node.ctime = time.time_ns()
        return node

    def read(self, path, size, offset, fh):
        data = self._file(path, fh).data
        return bytes(memoryview(data)[offset:offset + size])

    def write(self, path, data, offset, fh):
        node = self._file(path, fh)
        if offset + len(data) > MAX_FILE_SIZE:
            raise FuseOSError(EFBIG)
        buf = node.data
        size = len(buf)
        if offset > size:
            buf.extend(bytes(offset - size))  # a hole reads as zeros
            size = offset
        if offset == size:
            buf += data  # grows in place: amortised O(1) per append
        else:
            buf[offset:offset + len(data)] = data
        self._written_by_caller(node)
        return len(data)

    def _written_by_caller(self, node):
        "New data: new times."
        node.mtime = node.ctime = time.time_ns()

    def truncate(self, path, length, fh=None):
        node = self._file(path, fh)
        if length > MAX_FILE_SIZE:
            raise FuseOSError(EFBIG)
        buf = node.data
        if length < len(buf):
            del buf[length:]
        else:
            buf.extend(bytes(length - len(buf)))
        self._written_by_caller(node)

    def release(self, path, fh):
        self._handles.pop(fh, None)  # an unlinked inode goes with its last handle
        return 0
