# Archive: a read-only view of a zip or tar archive (.tar, .tar.gz, .tar.bz2,
# .tar.xz), without extracting it.
#
# Shows a file system that serves data it computes: the index of the archive
# (names, modes, sizes, times, symlinks, hard links) is read once when the
# file system is built; a file's bytes are read from the archive when the
# program reads them. Every modifying call fails with EROFS, as on a read-only
# mount.
#
# It also shows how to read a compressed tar at any offset. A gzip, bzip2 or
# xz stream can only be decompressed from its start: serving each member by
# decompressing from there would cost, for N members read, N^2/2 members'
# worth of work. So the one pass that reads the index also leaves restart
# points behind it (class Decompressed below): every SPACING bytes of output, a
# copy of the decompressor (zlib's copy(): its 32 KiB window and its state)
# with the offset in the file where its next input starts. A read resumes at
# the last restart point before its offset, or where the previous read stopped
# if that is nearer: it decompresses at most the spacing's bytes it does not
# return, whatever the order of the reads. Past MAX_POINTS points, every other
# one is dropped and the spacing doubles, so the memory stays bounded (3072
# points of about 41 KiB: a tar of up to 192 MiB keeps 64 KiB). bz2 and lzma
# decompressors cannot be copied: there a restart point is only where a new
# stream starts (pbzip2 writes one per block); reads in the archive's order
# stay cheap, others start over. The index and the points are built where the
# object is: once in the default mode (with -o workers=N too: the workers are
# forks of the first instance), in every process that touches the mount in the
# embedded mode (each inflates the whole stream once).
#
# Run it:
#
#   ldpfuse-run --mountpoint /mnt/a examples/archive.py:Archive src.tar.gz -- ls -lR /mnt/a
#   ldpfuse-run --mountpoint /mnt/a examples/archive.py:Archive data.zip -- grep -r TODO /mnt/a
#
# -o spacing=BYTES,max_points=N change those two (bench/NOTES.md measures the
# choice); with --log-level debug each read logs how many bytes it decompressed.

import bisect
import bz2
import errno
import io
import logging
import lzma
import os
import stat
import tarfile
import time
import zipfile
import zlib

from ldpfuse_py import FuseOSError, Operations

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND | os.O_CREAT
SPACING = 64 * 1024     # bytes of output between two restart points, at least
MAX_POINTS = 3072       # restart points kept, at most (about 41 KiB of memory each)
INPUT = 8 * 1024        # compressed bytes fed to a decompressor at a time
log = logging.getLogger("fuse.archive")

# how a compressed file starts -> a new decompressor of its stream
COMPRESSIONS = {
    b"\x1f\x8b": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),  # gzip
    b"BZh": bz2.BZ2Decompressor,
    b"\xfd7zXZ\x00": lzma.LZMADecompressor,
}


class Stored:
    """The bytes of a file read where they are (an uncompressed tar); seek(),
    tell() and read() make it the file object tarfile reads."""

    decompressed = 0

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY)
        self.pos = 0

    def pread(self, size, offset):
        return os.pread(self.fd, size, offset)

    def read(self, size):
        data = self.pread(size, self.pos)
        self.pos += len(data)
        return data

    def seek(self, offset, whence=os.SEEK_SET):
        if whence != os.SEEK_SET:
            raise io.UnsupportedOperation("seek from the start only")
        self.pos = offset
        return offset

    def tell(self):
        return self.pos

    def seekable(self):
        return True


class Decompressed(Stored):
    """The decompressed bytes of a gzip, bzip2 or xz file, read at any offset.

    The decompressor in use (the cursor) last made block, the output from
    block_at. Decompressing past the last restart point leaves a new one every
    `spacing` bytes: the first pass, the one that reads the index, places them
    all. When there are more than max_points, every other one goes and the
    spacing doubles: the memory stays bounded, the spacing is the smallest
    that fits."""

    def __init__(self, path, new_decompressor, spacing, max_points):
        super().__init__(path)
        self.new_decompressor = new_decompressor
        self.spacing = spacing
        self.max_points = max_points
        self.points = [(0, 0, None)]  # (output offset, input offset, decompressor or None: a stream starts)
        self.point_offsets = [0]      # the points' output offsets, to bisect
        self.decompressed = 0         # bytes made, for the debug log
        self._resume(self.points[0])

    def _resume(self, point):
        out, self.input_at, d = point
        self.d = d.copy() if d is not None else self.new_decompressor()
        self.block_at, self.block = out, b""

    def _next_block(self):
        """Decompress the next input; False at the end of the data."""
        self.block_at += len(self.block)
        self.block = b""
        if self.d.eof:  # a stream ended: another may follow (concatenated files)
            if not os.pread(self.fd, 1, self.input_at):
                return False
            self.d = self.new_decompressor()
            self._mark(None)
        data = os.pread(self.fd, INPUT, self.input_at)
        if not data:
            return False  # the file ends inside a stream: a truncated archive
        self.block = self.d.decompress(data)
        self.input_at += len(data)
        if self.d.eof:  # what follows the stream's end was not used
            self.input_at -= len(self.d.unused_data)
        self.decompressed += len(self.block)
        if hasattr(self.d, "copy"):
            self._mark(self.d.copy)
        return True

    def _mark(self, copy):
        """A restart point where the cursor is (copy: how to copy its decompressor,
        None at the start of a stream), if the last one is `spacing` behind."""
        end = self.block_at + len(self.block)
        if end >= self.points[-1][0] + (self.spacing if copy else 1):
            self.points.append((end, self.input_at, copy() if copy else None))
            self.point_offsets.append(end)
        if len(self.points) > self.max_points:
            del self.points[1::2], self.point_offsets[1::2]
            self.spacing *= 2

    def pread(self, size, offset):
        pieces = []
        while size > 0:
            if not self.block_at <= offset < self.block_at + len(self.block):
                if not self._seek_block(offset):
                    break
            i = offset - self.block_at
            piece = self.block[i:i + size]
            pieces.append(piece)
            offset += len(piece)
            size -= len(piece)
        return b"".join(pieces)

    def _seek_block(self, offset):
        """Make the cursor's block hold offset; False if the data ends first."""
        point = self.points[bisect.bisect_right(self.point_offsets, offset) - 1]
        if offset < self.block_at or point[0] > self.block_at + len(self.block):
            self._resume(point)  # behind the cursor, or a restart point is nearer
        while offset >= self.block_at + len(self.block):
            if not self._next_block():
                return False
        return True


def open_tar_data(path, spacing, max_points):
    """The bytes of the tar at path: Decompressed if it is compressed, else Stored."""
    with open(path, "rb") as f:
        magic = f.read(6)
    for start, new_decompressor in COMPRESSIONS.items():
        if magic.startswith(start):
            return Decompressed(path, new_decompressor, spacing, max_points)
    return Stored(path)


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

    # read-only after __init__: -o workers=N may serve one command from N instances, and
    # each worker may be a fork of the first, which indexed the archive once
    # (docs/operations.md): what a fork shares with it is safe to share, since reads go
    # through os.pread (Stored, Decompressed: no shared file offset) and a zip is read
    # through a ZipFile of the process's own (_contents)
    workers_safe = "fork"

    def __init__(self, path, spacing=SPACING, max_points=MAX_POINTS):
        self.path = os.path.realpath(path)
        st = os.stat(self.path)
        self.uid, self.gid = os.getuid(), os.getgid()
        self.default_mtime = st.st_mtime
        self.inodes = 0
        self.root = self._node(stat.S_IFDIR | 0o755, st.st_mtime)
        self.tar = self.data = None     # a tar's TarFile and its bytes (Stored or Decompressed)
        if zipfile.is_zipfile(self.path):
            with zipfile.ZipFile(self.path) as z:
                self._index_zip(z)
        else:
            self.data = open_tar_data(self.path, int(spacing), max(2, int(max_points)))
            try:
                self.tar = tarfile.open(fileobj=self.data, mode="r:")
                self._index_tar(self.tar)
            except (tarfile.ReadError, EOFError, OSError, zlib.error, lzma.LZMAError) as e:
                raise ValueError(f"{path} is neither a zip nor a tar archive ({e})") from None
        self._count_links(self.root)
        self.zip = None         # (pid, ZipFile) of this process
        self.handles = {}       # fh -> file object of an open file
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

    def _contents(self, node):
        """A file object of node's bytes. A tar member is read through the
        tar's data when the program reads it (tarfile's extractfile() seeks in
        self.data); a zip member is inflated whole, by a ZipFile of this
        process (one shared across fork would share its file offset)."""
        if self.tar is not None:
            return self.tar.extractfile(node.member)
        if self.zip is None or self.zip[0] != os.getpid():
            self.zip = (os.getpid(), zipfile.ZipFile(self.path))
        return io.BytesIO(self.zip[1].read(node.member))

    # ---- operations
    def getattr(self, path, fh=None):
        return self._attrs(self._lookup(path))

    @staticmethod
    def _attrs(node):
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
        # each entry's attributes in full, as getattr gives them: ldpfuse keeps them as
        # FUSE's readdirplus does, so `ls -l`, find and a data loader's stat after the
        # listing ask nothing more (docs/operations.md)
        return [".", ".."] + [(name, self._attrs(c), 0) for name, c in node.children.items()]

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
        self.handles[fh] = self._contents(node) if node.member is not None else io.BytesIO()
        return fh

    def read(self, path, size, offset, fh):
        f = self.handles[fh]
        made = self.data.decompressed if self.data else 0
        f.seek(offset)
        data = f.read(size)
        if self.data and log.isEnabledFor(logging.DEBUG):
            log.debug("read %s: %d bytes at %d, %d bytes decompressed", path, len(data), offset,
                      self.data.decompressed - made)
        return data

    def release(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": os.stat(self.path).st_size // 4096 + 1,
                "f_bfree": 0, "f_bavail": 0, "f_files": self.inodes, "f_ffree": 0,
                "f_favail": 0, "f_flag": os.ST_RDONLY, "f_namemax": 255}

    def utimens(self, path, times=None):
        raise FuseOSError(errno.EROFS)
