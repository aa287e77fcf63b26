# Archive: a read-only view of a zip or tar archive (.tar, .tar.gz, .tar.bz2,
# .tar.xz), without extracting it.
#
# Shows a file system that serves data it computes: the index of the archive
# (names, modes, sizes, times, symlinks, hard links) is read once when the
# file system is built; a file's bytes are decompressed when it is opened and
# dropped when it is released. Every modifying call fails with EROFS, as on a
# read-only mount. Each process opens the archive itself (a zip or tar file
# object shared across fork would share its file offset).
#
# Run it:
#
#   ldpfuse-run --mountpoint /mnt/a examples/archive.py:Archive src.tar.gz -- ls -lR /mnt/a
#   ldpfuse-run --mountpoint /mnt/a examples/archive.py:Archive data.zip -- grep -r TODO /mnt/a

import errno
import os
import stat
import tarfile
import time
import zipfile

from ldpfuse_py import FuseOSError, Operations

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND | os.O_CREAT


class Node:
    """One name in the archive: a directory, a regular file or a symlink."""

    __slots__ = ("ino", "mode", "size", "mtime", "uid", "gid", "nlink", "member",
                 "target", "children")

    def __init__(self, ino, mode, mtime, uid, gid):
        self.ino = ino
        self.mode = mode
        self.size = 0
        self.mtime = mtime
        self.uid = uid
        self.gid = gid
        self.nlink = 1
        self.member = None      # the archive entry holding the bytes
        self.target = None      # a symlink's target
        self.children = {} if stat.S_ISDIR(mode) else None


class Archive(Operations):
    """Serve the archive at ``path`` read-only at the mount point."""

    def __init__(self, path):
        self.path = os.path.realpath(path)
        st = os.stat(self.path)
        self.uid, self.gid = os.getuid(), os.getgid()
        self.default_mtime = st.st_mtime
        self.inodes = 0
        self.root = self._node(stat.S_IFDIR | 0o755, st.st_mtime)
        if zipfile.is_zipfile(self.path):
            self.kind = "zip"
            with zipfile.ZipFile(self.path) as z:
                self._index_zip(z)
        elif tarfile.is_tarfile(self.path):
            self.kind = "tar"
            with tarfile.open(self.path) as t:
                self._index_tar(t)
        else:
            raise ValueError(f"{path} is neither a zip nor a tar archive")
        self._count_links(self.root)
        self.opened = None      # (pid, ZipFile or TarFile) of this process
        self.handles = {}       # fh -> bytes of an open file
        self.next_fh = 1

    # ---- building the index
    def _node(self, mode, mtime, uid=None, gid=None):
        self.inodes += 1
        return Node(self.inodes, mode, mtime, self.uid if uid is None else uid,
                    self.gid if gid is None else gid)

    def _parent_of(self, parts):
        """The directory node holding parts[-1], making missing directories."""
        node = self.root
        for part in parts[:-1]:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = self._node(stat.S_IFDIR | 0o755, self.default_mtime)
            elif child.children is None:
                raise ValueError(f"{'/'.join(parts)}: a parent is not a directory")
            node = child
        return node

    def _place(self, name, make):
        """Put the node make() builds at name (a path inside the archive)."""
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            return None
        parent = self._parent_of(parts)
        old = parent.children.get(parts[-1])
        if old is not None and old.children is not None:
            # a directory entry after its contents: keep the children
            new = make()
            if new.children is not None:
                old.mode, old.mtime, old.uid, old.gid = new.mode, new.mtime, new.uid, new.gid
                return old
        node = parent.children[parts[-1]] = make()
        return node

    def _index_zip(self, z):
        for info in z.infolist():
            mtime = time.mktime(info.date_time + (0, 0, -1))
            unix = info.external_attr >> 16 if info.create_system == 3 else 0
            if info.is_dir():
                mode = stat.S_IFDIR | (stat.S_IMODE(unix) or 0o755)
            elif stat.S_ISLNK(unix):
                mode = stat.S_IFLNK | 0o777
            else:
                mode = stat.S_IFREG | (stat.S_IMODE(unix) or 0o644)
            node = self._place(info.filename, lambda: self._node(mode, mtime))
            if node is None or node.children is not None:
                continue
            if stat.S_ISLNK(mode):
                node.target = z.read(info).decode("utf-8", "surrogateescape")
                node.size = len(os.fsencode(node.target))
            else:
                node.member = info
                node.size = info.file_size

    def _index_tar(self, t):
        by_name = {}
        for m in t.getmembers():
            if m.isdir():
                mode = stat.S_IFDIR | stat.S_IMODE(m.mode)
            elif m.issym():
                mode = stat.S_IFLNK | 0o777
            elif m.isreg():
                mode = stat.S_IFREG | stat.S_IMODE(m.mode)
            elif m.islnk():
                target = by_name.get(m.linkname.rstrip("/").lstrip("./"))
                if target is not None:  # a hard link shares its target's node
                    self._place(m.name, lambda: target)
                continue
            else:
                continue  # devices and fifos are left out of the view
            node = self._place(m.name, lambda: self._node(mode, m.mtime, m.uid, m.gid))
            if node is None:
                continue
            by_name[m.name.rstrip("/").lstrip("./")] = node
            if m.issym():
                node.target = m.linkname
                node.size = len(os.fsencode(m.linkname))
            elif m.isreg():
                node.member = m
                node.size = m.size

    def _count_links(self, root):
        """Directories: 2 + their subdirectories; files: the names they have
        (a tar hard link is a second name for the same node)."""
        names = {}
        stack = [root]
        while stack:
            node = stack.pop()
            node.nlink = 2 + sum(1 for c in node.children.values() if c.children is not None)
            for child in node.children.values():
                if child.children is not None:
                    stack.append(child)
                else:
                    names[id(child)] = names.get(id(child), 0) + 1
                    child.nlink = names[id(child)]

    # ---- looking names up
    def _lookup(self, path):
        node = self.root
        for part in path.split("/"):
            if not part:
                continue
            if node.children is None:
                raise FuseOSError(errno.ENOTDIR)
            node = node.children.get(part)
            if node is None:
                raise FuseOSError(errno.ENOENT)
        return node

    def _archive(self):
        pid = os.getpid()
        if self.opened is None or self.opened[0] != pid:
            handle = zipfile.ZipFile(self.path) if self.kind == "zip" else tarfile.open(self.path)
            self.opened = (pid, handle)
        return self.opened[1]

    def _contents(self, node):
        archive = self._archive()
        if self.kind == "zip":
            return archive.read(node.member)
        f = archive.extractfile(node.member)
        return f.read() if f is not None else b""

    # ---- operations
    def getattr(self, path, fh=None):
        node = self._lookup(path)
        return {
            "st_ino": node.ino, "st_mode": node.mode, "st_nlink": node.nlink,
            "st_size": node.size if node.children is None else 4096,
            "st_uid": node.uid, "st_gid": node.gid,
            "st_atime": node.mtime, "st_mtime": node.mtime, "st_ctime": node.mtime,
        }

    def access(self, path, amode):
        self._lookup(path)
        if amode & os.W_OK:
            raise FuseOSError(errno.EROFS)
        return 0

    def readdir(self, path, fh):
        node = self._lookup(path)
        if node.children is None:
            raise FuseOSError(errno.ENOTDIR)
        return [".", ".."] + [(name, {"st_ino": c.ino, "st_mode": c.mode}, 0)
                              for name, c in node.children.items()]

    def readlink(self, path):
        node = self._lookup(path)
        if node.target is None:
            raise FuseOSError(errno.EINVAL)
        return node.target

    def open(self, path, flags):
        node = self._lookup(path)
        if flags & WRITE_FLAGS:
            raise FuseOSError(errno.EROFS)
        if node.children is not None:
            raise FuseOSError(errno.EISDIR)
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = self._contents(node) if node.member is not None else b""
        return fh

    def read(self, path, size, offset, fh):
        return self.handles[fh][offset:offset + size]

    def release(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": os.stat(self.path).st_size // 4096 + 1,
                "f_bfree": 0, "f_bavail": 0, "f_files": self.inodes, "f_ffree": 0,
                "f_favail": 0, "f_flag": os.ST_RDONLY, "f_namemax": 255}

    def utimens(self, path, times=None):
        raise FuseOSError(errno.EROFS)
