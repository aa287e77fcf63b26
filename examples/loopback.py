# Loopback: mirror a real directory under the mount point.
#
# Shows the passthrough fast path: open() and create() return a Passthrough
# holding a file descriptor of the real file, so every read, write, mmap and
# fstat on it goes straight to the kernel and Python only sees the metadata
# operations (stat, readdir, rename, chmod, xattrs, ...). It also shows the
# fusepy conventions a stacked file system must get right: symlinks are never
# followed (lchown, utimes on the link), hard links keep their inode number,
# times are in nanoseconds (use_ns), and any OSError from os.* reaches the
# calling program with its errno unchanged.
#
# Run it:
#
#   ldpfuse-run --mountpoint /mnt/x examples/loopback.py:Loopback /data -- ls -la /mnt/x
#
# The whole tree is a backing tree (`backing = Backing(root)` below, the shared
# mode): the preload does every create, unlink, lookup, stat, rename, chmod and
# readdir on the real directory itself, in the calling process with its own
# rights, and none of the methods below is called. They serve `-o backing=no`
# (every operation through Python, the path the benchmarks compare) and the
# embedded mode.
#
# With `-o passthrough=no` (which implies backing=no) every read and write goes
# through Python too (os.pread/os.pwrite on the lower fd).
#
#   ldpfuse-run --mountpoint /mnt/x -o passthrough=no \
#       examples/loopback.py:Loopback /data -- cat /mnt/x/f

import os
from errno import EACCES, ENOTDIR, EOPNOTSUPP
from stat import S_IFDIR, S_IFLNK, S_IFREG, S_ISDIR, S_ISLNK

from ldpfuse_py import Backing, FuseOSError, Operations, Passthrough

_PATH_MAX = 4096    # the kernel's limit on one path string, NUL included
_NAME_LEFT = 3072   # what _at leaves for the last step: room for "/proc/self/fd/N/"


class _At(tuple):
    """(dir_fd, name, owned) from Loopback._at; a with-block gives (dir_fd, name)
    and closes dir_fd at its end when it was opened for the one call."""

    __slots__ = ()

    def __enter__(self):
        return self[0], self[1]

    def __exit__(self, *exc):
        if self[2]:
            os.close(self[0])


class Loopback(Operations):
    """Serve the directory ``root`` at the mount point.

    ``passthrough`` is 'yes' (files are served by the kernel) or 'no' (data
    goes through read()/write() below); it arrives as a string from
    ``-o passthrough=...``. ``backing`` is 'yes' (the preload serves the whole
    tree from root, docs/backing.md) or 'no' (every operation through the
    methods below); by default, what passthrough is. ``see``: the operations
    of a backed tree that still go to the methods ('create,unlink'); ``after``:
    those the preload does and then tells ``after()`` below of ('getattr,unlink').
    """

    use_ns = True
    posix_acl = True  # the lower file system keeps ACLs and modes in step
    workers_safe = True  # its state is the lower tree's: -o workers=N (docs/operations.md)

    def __init__(self, root, passthrough="yes", backing=None, see="", after=""):
        self.root = os.path.realpath(root)
        if not S_ISDIR(os.stat(self.root).st_mode):  # fail now, not at each call
            raise NotADirectoryError(ENOTDIR, "loopback root is not a directory", root)
        if passthrough in ("yes", True):
            self.passthrough = True
        elif passthrough in ("no", False):
            self.passthrough = False
        else:
            raise ValueError(f"passthrough must be 'yes' or 'no', not {passthrough!r}")
        if backing is None:
            backing = self.passthrough
        if backing not in ("yes", "no", True, False):
            raise ValueError(f"backing must be 'yes' or 'no', not {backing!r}")
        # -o see=create,unlink: those operations still go to the methods below (what a
        # filter in Python costs: bench/NOTES.md)
        see = [name for name in see.split(",") if name] if isinstance(see, str) else see
        # -o after=getattr,unlink: the preload does them, then calls after() below (what an
        # after-filter in Python costs: bench/NOTES.md; examples/audit.py uses it)
        after = [name for name in after.split(",") if name] if isinstance(after, str) else after
        self.backing = Backing(self.root, see=see, after=after) if backing in ("yes", True) else None
        # '/a/b' -> root + '/a/b', the same as os.path.join(root, 'a/b'),
        # without the join; '' when root is '/' so that '/a' stays '/a'.
        self._prefix = self.root.rstrip("/")
        self._root_fd = None

    def _lower(self, path):
        "The real path behind a mount path ('/' is root itself)."
        if path == "/":
            return self.root
        return self._prefix + path

    def _at(self, path):
        """(dir_fd, name) for an os.* call on the real file behind path, as a
        with-block: ``with self._at(path) as (d, p): os.stat(p, dir_fd=d)``.

        The real path, with dir_fd None; or, when root + path is longer than
        the kernel takes (PATH_MAX), a name relative to a directory on the
        way: a program may name a file by a relative path of PATH_MAX - 1
        bytes from a deep working directory, which the real path behind it
        exceeds. That directory is opened for this one call (following
        symlinks on the way, as the whole path would) and closed at the
        block's end."""
        lower = self._lower(path)
        if len(lower) < 1024 or len(os.fsencode(lower)) < _PATH_MAX:
            return _At((None, lower, False))
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        rest, d = os.fsencode(path.lstrip("/")), self._root_fd
        while len(rest) >= _NAME_LEFT:  # names are <= NAME_MAX: a '/' lies in every window
            cut = rest.rindex(b"/", 0, _NAME_LEFT)
            try:
                nd = os.open(rest[:cut], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
            finally:
                if d != self._root_fd:
                    os.close(d)
            rest, d = rest[cut + 1:], nd
        return _At((d, os.fsdecode(rest), d != self._root_fd))

    def _xattr_path(self, d, p):
        "A path for os.*xattr (which have no dir_fd) to the file named by (d, p)."
        return p if d is None else f"/proc/self/fd/{d}/{p}"

    def after(self, op, path, result, *args):
        "Told after an operation named in -o after=...: nothing changes (docs/backing.md)."
        return None

    # Metadata

    def getattr(self, path, fh=None):
        if fh is not None and not self.passthrough:
            st = os.fstat(fh)  # the open file, even after unlink
        else:
            with self._at(path) as (d, p):
                st = os.stat(p, dir_fd=d, follow_symlinks=False)
        return {
            "st_mode": st.st_mode,
            "st_ino": st.st_ino,
            "st_dev": st.st_dev,
            "st_nlink": st.st_nlink,
            "st_uid": st.st_uid,
            "st_gid": st.st_gid,
            "st_rdev": st.st_rdev,
            "st_size": st.st_size,
            "st_blksize": st.st_blksize,
            "st_blocks": st.st_blocks,
            "st_atime": st.st_atime_ns,
            "st_mtime": st.st_mtime_ns,
            "st_ctime": st.st_ctime_ns,
        }

    def access(self, path, amode):
        # effective ids: the caller's rights (the shared mode's server thread runs with
        # the caller's effective uid and groups; its real uid stays the launcher's)
        with self._at(path) as (d, p):
            if not os.access(p, amode, dir_fd=d, effective_ids=True):
                raise FuseOSError(EACCES)

    def chmod(self, path, mode):
        # path names the object itself: ldpfuse resolves symlinks that are to
        # be followed. A symlink's mode cannot change on Linux (lchmod fails
        # with EOPNOTSUPP); os.chmod would change its target instead.
        with self._at(path) as (d, p):
            if S_ISLNK(os.stat(p, dir_fd=d, follow_symlinks=False).st_mode):
                raise FuseOSError(EOPNOTSUPP)
            os.chmod(p, mode, dir_fd=d)

    def chown(self, path, uid, gid):
        with self._at(path) as (d, p):
            os.chown(p, uid, gid, dir_fd=d, follow_symlinks=False)

    def utimens(self, path, times=None):
        with self._at(path) as (d, p):
            if times is None:
                os.utime(p, dir_fd=d, follow_symlinks=False)
            else:
                os.utime(p, ns=times, dir_fd=d, follow_symlinks=False)

    def statfs(self, path):
        with self._at(path) as (d, p):
            sv = os.statvfs(self._xattr_path(d, p))  # statvfs has no *at form
        return {
            "f_bsize": sv.f_bsize,
            "f_frsize": sv.f_frsize,
            "f_blocks": sv.f_blocks,
            "f_bfree": sv.f_bfree,
            "f_bavail": sv.f_bavail,
            "f_files": sv.f_files,
            "f_ffree": sv.f_ffree,
            "f_favail": sv.f_favail,
            "f_flag": sv.f_flag,
            "f_namemax": sv.f_namemax,
        }

    # Extended attributes, on the link itself when path is a symlink.
    # A missing attribute raises OSError(ENODATA) from os.getxattr.

    def getxattr(self, path, name, position=0):
        with self._at(path) as (d, p):
            return os.getxattr(self._xattr_path(d, p), name, follow_symlinks=False)

    def setxattr(self, path, name, value, options, position=0):
        with self._at(path) as (d, p):
            os.setxattr(self._xattr_path(d, p), name, value, options, follow_symlinks=False)

    def listxattr(self, path):
        with self._at(path) as (d, p):
            return os.listxattr(self._xattr_path(d, p), follow_symlinks=False)

    def removexattr(self, path, name):
        with self._at(path) as (d, p):
            os.removexattr(self._xattr_path(d, p), name, follow_symlinks=False)

    # Names

    def readdir(self, path, fh):
        # One scandir per directory: d_ino and d_type come from the kernel's
        # getdents, no stat per entry.
        entries = [".", ".."]
        with self._at(path) as (d, p):
            fd = None if d is None else os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
        try:
            it = os.scandir(p if fd is None else fd)
        finally:
            if fd is not None:
                os.close(fd)  # scandir works on its own dup of it
        with it:
            for entry in it:
                if entry.is_symlink():
                    kind = S_IFLNK
                elif entry.is_dir(follow_symlinks=False):
                    kind = S_IFDIR
                elif entry.is_file(follow_symlinks=False):
                    kind = S_IFREG
                else:
                    kind = 0  # fifo, socket, device: the reader stats it
                entries.append((entry.name, {"st_ino": entry.inode(), "st_mode": kind}, 0))
        return entries

    def readlink(self, path):
        with self._at(path) as (d, p):
            return os.readlink(p, dir_fd=d)

    def mknod(self, path, mode, dev):
        with self._at(path) as (d, p):
            os.mknod(p, mode, dev, dir_fd=d)

    def mkdir(self, path, mode):
        with self._at(path) as (d, p):
            os.mkdir(p, mode, dir_fd=d)

    def rmdir(self, path):
        with self._at(path) as (d, p):
            os.rmdir(p, dir_fd=d)

    def unlink(self, path):
        with self._at(path) as (d, p):
            os.unlink(p, dir_fd=d)

    def rename(self, old, new):
        with self._at(old) as (d, p), self._at(new) as (d2, p2):
            os.rename(p, p2, src_dir_fd=d, dst_dir_fd=d2)

    def link(self, target, source):
        "ln source target: target is the new name, source the existing file."
        with self._at(source) as (d, p), self._at(target) as (d2, p2):
            os.link(p, p2, src_dir_fd=d, dst_dir_fd=d2)

    def symlink(self, target, source):
        "ln -s source target: source is the link's content, stored as is."
        with self._at(target) as (d, p):
            os.symlink(source, p, dir_fd=d)

    def truncate(self, path, length, fh=None):
        if fh is not None and not self.passthrough:
            os.ftruncate(fh, length)
            return
        with self._at(path) as (d, p):
            if d is None:
                os.truncate(p, length)
                return
            fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC, dir_fd=d)  # truncate has no *at form
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)

    # Files. With passthrough the fd becomes the caller's file descriptor and
    # read/write/flush/release below are never called for it.

    def open(self, path, flags):
        with self._at(path) as (d, p):
            if self.passthrough:
                return Passthrough.open(p, flags) if d is None else Passthrough(os.open(p, flags, dir_fd=d))
            return self._open_for_cache(p, flags, dir_fd=d)

    def create(self, path, mode, fi=None):
        # fi.flags holds the caller's flags: O_RDWR must stay O_RDWR (a
        # write-only create breaks sqlite), O_EXCL must stay O_EXCL.
        flags = fi.flags if fi is not None else os.O_WRONLY | os.O_TRUNC
        with self._at(path) as (d, p):
            if self.passthrough:
                if d is None:
                    return Passthrough.open(p, flags | os.O_CREAT, mode)
                return Passthrough(os.open(p, flags | os.O_CREAT, mode, dir_fd=d))
            return self._open_for_cache(p, flags | os.O_CREAT, mode, dir_fd=d)

    @staticmethod
    def _open_for_cache(lower, flags, mode=0o777, dir_fd=None):
        """The fd behind a handle whose data ldpfuse moves with read()/write().

        As libfuse's passthrough examples do under the kernel's writeback
        cache: ldpfuse reads a write-only file to fill its cache, so
        O_WRONLY becomes O_RDWR when permissions allow; and it writes at
        explicit offsets, which O_APPEND would override (pwrite on an
        O_APPEND fd appends), so O_APPEND is dropped.
        """
        flags &= ~os.O_APPEND
        if flags & os.O_ACCMODE == os.O_WRONLY:
            try:
                return os.open(lower, (flags & ~os.O_ACCMODE) | os.O_RDWR, mode, dir_fd=dir_fd)
            except PermissionError:
                pass  # write-only by permission: reads of it will fail
        return os.open(lower, flags, mode, dir_fd=dir_fd)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        # Data written with pwrite is already in the kernel: nothing to do
        # on close. (fusepy's loopback fsyncs here, which costs a disk flush
        # per close.)
        return 0

    def fsync(self, path, datasync, fh):
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)

    def release(self, path, fh):
        if not self.passthrough:  # a passthrough fd belongs to the caller
            os.close(fh)

    def opendir(self, path):
        # Opening checks read permission on the directory, with the caller's rights,
        # as the kernel does for open(dir, O_RDONLY) and opendir().
        with self._at(path) as (d, p):
            os.close(os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d))
        return 0

    def releasedir(self, path, fh):
        return 0
