# Overlay: a copy-on-write union of read-only lower directories and one writable upper.
#
# What people use fuse-overlayfs for (a writable view of a read-only dataset or
# source tree, a sandboxed build), where FUSE and mount namespaces are not
# available. It writes its upper directory the way kernel overlayfs does, so
# the same upper (and lower) directories can be mounted with `mount -t overlay`
# afterwards, and the reverse:
#
# - a name is looked up in the upper directory, then in each lower one, top
#   first; the first non-directory wins, directories of one name merge (a
#   listing shows the union, upper entries over lower ones);
# - the first change to a lower file or directory (open for writing, truncate,
#   chmod, chown, utimens, setxattr, link, rename) copies it up first: its
#   data, mode, owner, times and xattrs, its parent directories too;
# - removing a name that a lower directory holds leaves a whiteout in the
#   upper one: a character device 0/0, as the kernel makes it (Linux >= 5.8 lets
#   any user make one); where the caller may not, an empty file `.wh.NAME`
#   beside it, fuse-overlayfs' and aufs' form;
# - a directory made where a whited-out name was is opaque (hides every lower
#   directory of its name): the xattr trusted.overlay.opaque="y" where the
#   caller may set it (CAP_SYS_ADMIN), otherwise an empty file `.wh..wh..opq`
#   in it. Both forms are read in every layer; names starting with `.wh.` are
#   never listed;
# - rename of a directory that is in a lower layer (or merged with one) is
#   EXDEV, as kernel overlayfs without redirect_dir (its default): `mv`
#   copies it then, which is what a program does on EXDEV. A directory made
#   in the upper one renames freely.
#
# Files are served by the kernel: open returns a Passthrough of the lower file
# (reads) or of the upper copy (writes), so no read or write reaches Python.
# Names too, in the shared mode: the class declares its layers (ldpfuse_py.Union),
# and the preload answers lookups, stat, readlink, listings and opens for reading
# of the merged view itself (native/vfs/union.c); Python is asked only where it
# decides: copy-up, whiteouts, creates, renames (-o union=no: everything here).
#
# Run it (LOWER may be a list, top first, as overlayfs' lowerdir=):
#
#   ldpfuse-run --mountpoint /mnt/o examples/overlay.py:Overlay /data/ro:/data/base /data/upper -- make
#
# Every operation runs with the caller's rights, copy-up included (the kernel
# copies up with the mounter's): a caller who may not create in the upper
# directory cannot change a lower file there, and a copy keeps the lower
# file's owner only where the caller may chown (root, or its own file). Inode
# numbers are those of the layer's file: a file's changes at copy-up. See
# docs/overlay.md.

import os
from errno import (
    EACCES, EEXIST, EINVAL, EISDIR, ENAMETOOLONG, ENODATA, ENOENT, ENOTDIR, ENOTEMPTY, ENOTSUP, EOPNOTSUPP,
    EPERM, EXDEV,
)
from stat import S_IFCHR, S_IFDIR, S_IFLNK, S_IFREG, S_IMODE, S_ISCHR, S_ISDIR, S_ISLNK, S_ISREG

from ldpfuse_py import FuseOSError, Operations, Passthrough, Union

UPPER = 0                                  # the upper directory is layer 0, lowers follow
WHITEOUT_PREFIX = ".wh."                   # fuse-overlayfs' whiteout files: .wh.NAME
OPAQUE_FILE = ".wh..wh..opq"               # ... and its opaque-directory marker
OPAQUE_XATTR = "trusted.overlay.opaque"    # kernel overlayfs' opaque directory
PRIVATE_XATTRS = ("trusted.overlay.",)     # the overlay's own: never shown, never set
_PATH_MAX = 4096
_NAME_LEFT = 3072


class _At(tuple):
    "(dir_fd, name, owned): a with-block gives (dir_fd, name), closing an owned dir_fd."

    __slots__ = ()

    def __enter__(self):
        return self[0], self[1]

    def __exit__(self, *exc):
        if self[2]:
            os.close(self[0])


def _is_whiteout(st):
    return S_ISCHR(st.st_mode) and st.st_rdev == 0


def _enoent():
    return FuseOSError(ENOENT)


class Overlay(Operations):
    """Merge ``lowers`` (a ':'-separated list, top first, or a list) under ``upper``.

    A layer's file at a path is ``(layer, os.stat_result)``; layer 0 is the upper
    directory. ``_stack(path)`` is what the path is in the merged view: one entry
    for a non-directory, every directory of that name down to an opaque one for
    a directory (merged when there are two or more).
    """

    use_ns = True
    posix_acl = True  # the layers' file systems keep ACLs and modes in step

    def __init__(self, lowers, upper, union="yes"):
        if isinstance(lowers, str):
            lowers = [p for p in lowers.split(":") if p]
        if not lowers:
            raise ValueError("overlay: no lower directory (LOWER[:LOWER...] UPPER)")
        self.roots = [os.path.realpath(upper)] + [os.path.realpath(p) for p in lowers]
        for root, what in zip(self.roots, ["upper"] + ["lower"] * len(lowers)):
            if not os.path.isdir(root):
                raise NotADirectoryError(ENOTDIR, f"overlay: the {what} directory is not a directory", root)
        self._root_fds = {}
        if union not in ("yes", "no"):
            raise ValueError("overlay: -o union=yes|no")
        if union == "yes":
            # the merged view's reads (lookups, stat, readlink, listings, opens for
            # reading) are the preload's, on these layers (native/vfs/union.c): the
            # methods below answer the changes, and everything in the embedded mode
            # or with -o union=no
            self.union = Union(self.roots[UPPER], self.roots[1:])

    # Paths in a layer (as the loopback's _at: long paths go through a directory fd)

    def _at(self, layer, path):
        root = self.roots[layer]
        real = root + path if path != "/" else root
        if len(real) < 1024 or len(os.fsencode(real)) < _PATH_MAX:
            return _At((None, real, False))
        root_fd = self._root_fd(layer)
        rest, d = os.fsencode(path.lstrip("/")), root_fd
        while len(rest) >= _NAME_LEFT:
            cut = rest.rindex(b"/", 0, _NAME_LEFT)
            try:
                nd = os.open(rest[:cut], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
            finally:
                if d != root_fd:
                    os.close(d)
            rest, d = rest[cut + 1:], nd
        return _At((d, os.fsdecode(rest), d != root_fd))

    def _root_fd(self, layer):
        "An O_PATH fd of the layer's root, opened once."
        fd = self._root_fds.get(layer)
        if fd is None:
            fd = self._root_fds[layer] = os.open(self.roots[layer], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return fd

    @staticmethod
    def _xpath(d, p):
        "A path for os.*xattr (which take no dir_fd)."
        return p if d is None else f"/proc/self/fd/{d}/{p}"

    def _lstat(self, layer, path):
        with self._at(layer, path) as (d, p):
            return os.stat(p, dir_fd=d, follow_symlinks=False)

    def _exists(self, layer, path):
        try:
            self._lstat(layer, path)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno == ENAMETOOLONG:  # .wh.NAME of a name of NAME_MAX - 3 bytes or more
                return False
            raise

    def _remove_whiteout_file(self, path):
        "Remove the .wh. file that hides path (fuse-overlayfs' whiteout): whether there was one."
        with self._at(UPPER, _whiteout_file(path)) as (d, p):
            try:
                os.unlink(p, dir_fd=d)
                return True
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno == ENAMETOOLONG:
                    return False
                raise

    # Lookup

    def _is_opaque(self, layer, path):
        with self._at(layer, path) as (d, p):
            try:
                if os.getxattr(self._xpath(d, p), OPAQUE_XATTR, follow_symlinks=False) == b"y":
                    return True
            except OSError:
                pass
        return self._exists(layer, _join(path, OPAQUE_FILE))

    def _stack(self, path):
        """[(layer, stat), ...] of path, top first; ENOENT, or ENOTDIR when a
        directory on the way is a file."""
        if path == "/":
            return self._root_stack()
        # The upper directory holds it: nothing below can change a non-directory's answer.
        try:
            st = self._lstat(UPPER, path)
            if not S_ISDIR(st.st_mode) and not _is_whiteout(st):
                return [(UPPER, st)]
        except OSError:
            pass
        parent, name = _split(path)
        pstack = self._stack(parent)
        if not S_ISDIR(pstack[0][1].st_mode):
            raise FuseOSError(ENOTDIR)
        stack = self._stack_in([layer for layer, _ in pstack], path)
        if not stack:
            raise _enoent()
        return stack

    def _root_stack(self):
        "Every layer's root merges (as the kernel does, opaque or not)."
        return [(layer, self._lstat(layer, "/")) for layer in range(len(self.roots))]

    def _stack_in(self, layers, path):
        "What path is in these layers of its parent directory (top first): [] when nothing."
        found = []
        for k, layer in enumerate(layers):
            more_below = k + 1 < len(layers)
            try:
                st = self._lstat(layer, path)
            except FileNotFoundError:
                if more_below and self._exists(layer, _whiteout_file(path)):
                    break
                continue
            except NotADirectoryError:
                continue
            if _is_whiteout(st):
                break
            if S_ISDIR(st.st_mode):
                found.append((layer, st))
                if more_below and self._is_opaque(layer, path):
                    break
            else:
                if not found:
                    found.append((layer, st))
                break
        return found

    def _lower_positive(self, path):
        "Whether a lower layer shows path (a removal there leaves a whiteout)."
        if path == "/":
            return True
        parent, _ = _split(path)
        lowers = [layer for layer, _ in self._stack(parent) if layer != UPPER]
        return bool(self._stack_in(lowers, path))

    def _top(self, path):
        return self._stack(path)[0]

    # Copy-up

    def _copy_up(self, path):
        "The upper layer's copy of path (made now if path is only below): its stat."
        layer, st = self._top(path)
        if layer == UPPER:
            return st
        self._copy_up(_split(path)[0])
        self._copy_one(layer, path, st, data=True)
        return self._lstat(UPPER, path)

    def _copy_one(self, layer, path, st, data):
        "Copy one lower file, directory, symlink or node to the upper layer (its parent is there)."
        mode = S_IMODE(st.st_mode)
        with self._at(UPPER, path) as (d, p):
            if S_ISREG(st.st_mode):
                self._copy_file(layer, path, st, d, p, data)
                return
            if S_ISDIR(st.st_mode):
                os.mkdir(p, 0o700, dir_fd=d)
            elif S_ISLNK(st.st_mode):
                with self._at(layer, path) as (ld, lp):
                    os.symlink(os.readlink(lp, dir_fd=ld), p, dir_fd=d)
            else:
                os.mknod(p, st.st_mode & ~0o7777 | 0o600, st.st_rdev, dir_fd=d)
            self._owner(p, st, dir_fd=d)
            if not S_ISLNK(st.st_mode):
                os.chmod(p, mode, dir_fd=d)
            self._copy_xattrs(layer, path, self._xpath(d, p))
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=d, follow_symlinks=False)

    def _copy_file(self, layer, path, st, d, p, data):
        # An unnamed file in the upper directory, linked in when complete: a program
        # never sees half a copy (the kernel copies in its work directory, then renames).
        parent_d, parent_p = d, os.path.dirname(p) or "."
        try:
            fd = os.open(parent_p, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=parent_d)
            tmp = None
        except OSError as e:
            if e.errno not in (EOPNOTSUPP, EISDIR, EINVAL):
                raise
            tmp = os.path.join(parent_p, f"{WHITEOUT_PREFIX}{WHITEOUT_PREFIX}copyup.{os.getpid()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=parent_d)
        try:
            if data and st.st_size:
                with self._at(layer, path) as (ld, lp):
                    src = os.open(lp, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=ld)
                try:
                    _copy_data(src, fd, st.st_size)
                finally:
                    os.close(src)
            self._owner(fd, st)
            os.chmod(fd, S_IMODE(st.st_mode))
            self._copy_xattrs(layer, path, fd)
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            if tmp is None:
                # linkat(AT_SYMLINK_FOLLOW) through /proc (os.link makes it a linkat only
                # when given a dir fd: p may be absolute, which ignores it)
                os.link(f"/proc/self/fd/{fd}", p, dst_dir_fd=self._root_fd(UPPER) if d is None else d,
                        follow_symlinks=True)
            else:
                os.rename(tmp, p, src_dir_fd=parent_d, dst_dir_fd=d)
                tmp = None
        finally:
            os.close(fd)
            if tmp is not None:
                os.unlink(tmp, dir_fd=parent_d)

    @staticmethod
    def _owner(target, st, dir_fd=None):
        "The lower file's owner, where the caller may give it (root; its own file: a no-op)."
        try:
            if isinstance(target, int):
                os.chown(target, st.st_uid, st.st_gid)
            else:
                os.chown(target, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)
        except PermissionError:
            pass

    def _copy_xattrs(self, layer, path, dest):
        "The lower file's xattrs (but the overlay's own) onto dest, a path or an fd."
        with self._at(layer, path) as (d, p):
            src = self._xpath(d, p)
            try:
                names = os.listxattr(src, follow_symlinks=False)
            except OSError:
                return
            for name in names:
                if name.startswith(PRIVATE_XATTRS):
                    continue
                value = os.getxattr(src, name, follow_symlinks=False)
                try:
                    if isinstance(dest, int):
                        os.setxattr(dest, name, value)
                    else:
                        os.setxattr(dest, name, value, follow_symlinks=False)
                except OSError as e:
                    if e.errno not in (EPERM, ENOTSUP, EOPNOTSUPP, EACCES):
                        raise

    # Whiteouts and opaque directories

    def _whiteout(self, path):
        "Hide the lower layers' path: a 0/0 character device, or a .wh.NAME file."
        self._copy_up(_split(path)[0])
        with self._at(UPPER, path) as (d, p):
            try:
                os.mknod(p, S_IFCHR, 0, dir_fd=d)
                return
            except PermissionError:
                pass
        with self._at(UPPER, _whiteout_file(path)) as (d, p):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600, dir_fd=d))

    def _make_opaque(self, path):
        with self._at(UPPER, path) as (d, p):
            try:
                os.setxattr(self._xpath(d, p), OPAQUE_XATTR, b"y", follow_symlinks=False)
                return
            except OSError as e:
                if e.errno not in (EPERM, ENOTSUP, EOPNOTSUPP):
                    raise
        with self._at(UPPER, _join(path, OPAQUE_FILE)) as (d, p):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600, dir_fd=d))

    def _clear_whiteouts(self, path):
        "Remove what only hides lower names from the upper directory path (to rmdir or replace it)."
        with self._at(UPPER, path) as (d, p):
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
        try:
            with os.scandir(fd) as it:
                names = [e.name for e in it
                         if e.name.startswith(WHITEOUT_PREFIX) or _is_whiteout(e.stat(follow_symlinks=False))]
            for name in names:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def _new_name(self, path, check_only=False):
        """Make room for a new name: EEXIST if it shows, its parent copied up, a whiteout
        of it removed. Whether there was one (a directory made there is opaque)."""
        try:
            self._stack(path)
            raise FuseOSError(EEXIST)
        except FuseOSError as e:
            if e.errno != ENOENT:
                raise
        parent, _ = _split(path)
        pstack = self._stack(parent)
        if not S_ISDIR(pstack[0][1].st_mode):
            raise FuseOSError(ENOTDIR)
        if check_only:
            return False
        self._copy_up(parent)
        hidden = False
        try:
            st = self._lstat(UPPER, path)
            if _is_whiteout(st):
                with self._at(UPPER, path) as (d, p):
                    os.unlink(p, dir_fd=d)
                hidden = True
        except FileNotFoundError:
            pass
        return self._remove_whiteout_file(path) or hidden

    # Metadata

    def getattr(self, path, fh=None):
        stack = self._stack(path)
        st = stack[0][1]
        ino = st.st_ino
        if path != "/" and len(stack) > 1 and stack[0][0] == UPPER and stack[1][1].st_dev == st.st_dev:
            # a merged directory's number is its top lower directory's (the kernel's, where
            # the layers share a file system): the same before and after its copy-up, which
            # fts (rm -r, find) checks against what ".." opens
            ino = stack[1][1].st_ino
        return {
            "st_mode": st.st_mode,
            "st_ino": ino,
            "st_dev": st.st_dev,
            # a merged directory's subdirectories are not counted (as the kernel does:
            # 1 tells find and fts not to trust the count)
            "st_nlink": 1 if len(stack) > 1 else st.st_nlink,
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
        layer, _ = self._top(path)
        with self._at(layer, path) as (d, p):
            if not os.access(p, amode, dir_fd=d, effective_ids=True):
                raise FuseOSError(EACCES)

    def _may_change(self, path, writer_ok=False):
        """What the kernel checks before a lower file's copy-up for chmod, chown,
        utimens: the owner or root (or, for times set to now, a writer)."""
        layer, st = self._top(path)
        if layer == UPPER:
            return
        euid = os.geteuid()
        if euid == 0 or euid == st.st_uid:
            return
        if writer_ok:
            with self._at(layer, path) as (d, p):
                if os.access(p, os.W_OK, dir_fd=d, effective_ids=True):
                    return
        raise FuseOSError(EPERM)

    def chmod(self, path, mode):
        self._may_change(path)
        st = self._copy_up(path)
        if S_ISLNK(st.st_mode):
            raise FuseOSError(EOPNOTSUPP)
        with self._at(UPPER, path) as (d, p):
            os.chmod(p, mode, dir_fd=d)

    def chown(self, path, uid, gid):
        self._may_change(path)
        self._copy_up(path)
        with self._at(UPPER, path) as (d, p):
            os.chown(p, uid, gid, dir_fd=d, follow_symlinks=False)

    def utimens(self, path, times=None):
        self._may_change(path, writer_ok=times is None)
        self._copy_up(path)
        with self._at(UPPER, path) as (d, p):
            if times is None:
                os.utime(p, dir_fd=d, follow_symlinks=False)
            else:
                os.utime(p, ns=times, dir_fd=d, follow_symlinks=False)

    def truncate(self, path, length, fh=None):
        layer, st = self._top(path)
        if layer != UPPER:
            self._writable(layer, path)
            self._copy_up_data(path, length > 0)
        with self._at(UPPER, path) as (d, p):
            fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC, dir_fd=d)
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)

    def statfs(self, path):
        sv = os.statvfs(self.roots[UPPER])
        return {key: getattr(sv, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_flag", "f_namemax")}

    # Extended attributes (the overlay's own, trusted.overlay.*, are neither shown nor set)

    def getxattr(self, path, name, position=0):
        if name.startswith(PRIVATE_XATTRS):
            raise FuseOSError(ENODATA)
        layer, _ = self._top(path)
        with self._at(layer, path) as (d, p):
            return os.getxattr(self._xpath(d, p), name, follow_symlinks=False)

    def listxattr(self, path):
        layer, _ = self._top(path)
        with self._at(layer, path) as (d, p):
            names = os.listxattr(self._xpath(d, p), follow_symlinks=False)
        return [n for n in names if not n.startswith(PRIVATE_XATTRS)]

    def setxattr(self, path, name, value, options, position=0):
        if name.startswith(PRIVATE_XATTRS):
            raise FuseOSError(EPERM)
        self._may_change(path, writer_ok=True)
        self._copy_up(path)
        with self._at(UPPER, path) as (d, p):
            os.setxattr(self._xpath(d, p), name, value, options, follow_symlinks=False)

    def removexattr(self, path, name):
        if name.startswith(PRIVATE_XATTRS):
            raise FuseOSError(EPERM)
        self._may_change(path, writer_ok=True)
        self._copy_up(path)
        with self._at(UPPER, path) as (d, p):
            os.removexattr(self._xpath(d, p), name, follow_symlinks=False)

    # Names

    def readlink(self, path):
        layer, _ = self._top(path)
        with self._at(layer, path) as (d, p):
            return os.readlink(p, dir_fd=d)

    def opendir(self, path):
        # read permission on the directory, with the caller's rights (the top one's mode)
        layer, st = self._top(path)
        if not S_ISDIR(st.st_mode):
            raise FuseOSError(ENOTDIR)
        with self._at(layer, path) as (d, p):
            os.close(os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d))
        return 0

    def releasedir(self, path, fh):
        return 0

    def _listing(self, path):
        "{name: (ino, kind)} of the merged directory: upper over lower, whiteouts hiding."
        shown, hidden = {}, set()
        for layer, _ in self._stack(path):
            with self._at(layer, path) as (d, p):
                fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
            try:
                with os.scandir(fd) as it:  # its entries' stat() use fd: closed after them
                    self._merge_entries(it, shown, hidden)
            finally:
                os.close(fd)
        return shown

    @staticmethod
    def _merge_entries(it, shown, hidden):
        "One layer's entries under those of the layers above (shown, hidden: names so far)."
        for e in it:
            name = e.name
            if name.startswith(WHITEOUT_PREFIX):
                if name != OPAQUE_FILE:
                    hidden.add(name[len(WHITEOUT_PREFIX):])
                continue
            if name in shown or name in hidden:
                continue
            if e.is_symlink():
                kind = S_IFLNK
            elif e.is_dir(follow_symlinks=False):
                kind = S_IFDIR
            elif e.is_file(follow_symlinks=False):
                kind = S_IFREG
            elif _is_whiteout(e.stat(follow_symlinks=False)):
                hidden.add(name)
                continue
            else:
                kind = 0  # fifo, socket, device: the reader stats it
            shown[name] = (e.inode(), kind)

    def readdir(self, path, fh):
        entries = [".", ".."]
        for name, (ino, kind) in self._listing(path).items():
            entries.append((name, {"st_ino": ino, "st_mode": kind}, 0))
        return entries

    def mknod(self, path, mode, dev):
        if S_ISCHR(mode) and dev == 0:
            # a whiteout is the overlay's: EPERM (as the kernel, after EEXIST)
            self._new_name(path, check_only=True)
            raise FuseOSError(EPERM)
        self._new_name(path)
        with self._at(UPPER, path) as (d, p):
            os.mknod(p, mode, dev, dir_fd=d)

    def mkdir(self, path, mode):
        over_whiteout = self._new_name(path)
        with self._at(UPPER, path) as (d, p):
            os.mkdir(p, mode, dir_fd=d)
        if over_whiteout:
            self._make_opaque(path)

    def symlink(self, target, source):
        "ln -s source target: source is the link's content."
        self._new_name(target)
        with self._at(UPPER, target) as (d, p):
            os.symlink(source, p, dir_fd=d)

    def link(self, target, source):
        "ln source target: target is the new name, source the existing file."
        layer, st = self._top(source)
        if S_ISDIR(st.st_mode):
            raise FuseOSError(EPERM)
        self._new_name(target)
        self._copy_up(source)
        with self._at(UPPER, source) as (d, p), self._at(UPPER, target) as (d2, p2):
            os.link(p, p2, src_dir_fd=d, dst_dir_fd=d2, follow_symlinks=False)

    def unlink(self, path):
        layer, st = self._top(path)
        if S_ISDIR(st.st_mode):
            raise FuseOSError(EISDIR)
        below = self._lower_positive(path)
        if layer == UPPER:
            with self._at(UPPER, path) as (d, p):
                os.unlink(p, dir_fd=d)
        else:
            self._may_remove(path)
        if below:
            self._whiteout(path)

    def _may_remove(self, path):
        "Removing a lower-only name: write and search on the (merged) parent, as rmdir/unlink."
        parent, _ = _split(path)
        layer, _ = self._top(parent)
        with self._at(layer, parent) as (d, p):
            if not os.access(p, os.W_OK | os.X_OK, dir_fd=d, effective_ids=True):
                raise FuseOSError(EACCES)

    def rmdir(self, path):
        stack = self._stack(path)
        layer, st = stack[0]
        if not S_ISDIR(st.st_mode):
            raise FuseOSError(ENOTDIR)
        if path == "/":
            raise FuseOSError(EPERM)
        if self._listing(path):
            raise FuseOSError(ENOTEMPTY)
        below = self._lower_positive(path)
        if layer == UPPER:
            if len(stack) > 1 or below:
                self._clear_whiteouts(path)
            with self._at(UPPER, path) as (d, p):
                try:
                    os.rmdir(p, dir_fd=d)
                except OSError as e:
                    if e.errno == ENOTEMPTY:
                        self._clear_whiteouts(path)  # fallback .wh. files of an opaque dir
                        os.rmdir(p, dir_fd=d)
                    else:
                        raise
        else:
            self._may_remove(path)
        if below:
            self._whiteout(path)

    def rename(self, old, new):
        if old == new:
            return
        ostack = self._stack(old)
        olayer, ost = ostack[0]
        is_dir = S_ISDIR(ost.st_mode)
        if is_dir and (olayer != UPPER or len(ostack) > 1):
            raise FuseOSError(EXDEV)  # a lower or merged directory: overlayfs without redirect_dir
        nparent, _ = _split(new)
        npstack = self._stack(nparent)
        if not S_ISDIR(npstack[0][1].st_mode):
            raise FuseOSError(ENOTDIR)
        try:
            nstack = self._stack(new)
        except FuseOSError as e:
            if e.errno != ENOENT:
                raise
            nstack = None
        if nstack is not None:
            nlayer, nst = nstack[0]
            if nlayer == olayer == UPPER and nst.st_ino == ost.st_ino and nst.st_dev == ost.st_dev:
                return  # two links of one file: rename does nothing
            if is_dir and not S_ISDIR(nst.st_mode):
                raise FuseOSError(ENOTDIR)
            if not is_dir and S_ISDIR(nst.st_mode):
                raise FuseOSError(EISDIR)
            if is_dir and self._listing(new):
                raise FuseOSError(ENOTEMPTY)
        old_below = self._lower_positive(old)
        if olayer != UPPER:
            self._may_remove(old)
        self._copy_up(old)
        self._copy_up(nparent)
        if nstack is not None and nstack[0][0] == UPPER and S_ISDIR(nstack[0][1].st_mode):
            self._clear_whiteouts(new)  # an empty merged directory: only whiteouts are left
        else:
            try:
                if _is_whiteout(self._lstat(UPPER, new)):
                    with self._at(UPPER, new) as (d, p):
                        os.unlink(p, dir_fd=d)
            except FileNotFoundError:
                pass
        self._remove_whiteout_file(new)
        with self._at(UPPER, old) as (d, p), self._at(UPPER, new) as (d2, p2):
            os.rename(p, p2, src_dir_fd=d, dst_dir_fd=d2)
        if is_dir and any(layer != UPPER for layer, _ in npstack) and not self._is_opaque(UPPER, new):
            # a directory of the upper layer moved into a merged one (or a lower one, merged
            # by its copy-up) hides what the lower layers hold under its new name (the
            # kernel sets it opaque)
            self._make_opaque(new)
        if old_below:
            self._whiteout(old)

    # Files: the kernel serves them (Passthrough); a write copies a lower file up first

    def _writable(self, layer, path):
        with self._at(layer, path) as (d, p):
            if not os.access(p, os.W_OK, dir_fd=d, effective_ids=True):
                raise FuseOSError(EACCES)

    def _copy_up_data(self, path, data):
        layer, st = self._top(path)
        if layer == UPPER:
            return
        self._copy_up(_split(path)[0])
        self._copy_one(layer, path, st, data=data)

    def open(self, path, flags):
        layer, st = self._top(path)
        writes = flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC
        if writes and layer != UPPER and S_ISREG(st.st_mode):
            self._writable(layer, path)
            self._copy_up_data(path, data=not flags & os.O_TRUNC)
            layer = UPPER
        with self._at(layer, path) as (d, p):
            if d is None:
                return Passthrough.open(p, flags)
            return Passthrough(os.open(p, flags, dir_fd=d))

    def create(self, path, mode, fi=None):
        flags = fi.flags if fi is not None else os.O_WRONLY | os.O_TRUNC
        self._new_name(path)
        with self._at(UPPER, path) as (d, p):
            if d is None:
                return Passthrough.open(p, flags | os.O_CREAT, mode)
            return Passthrough(os.open(p, flags | os.O_CREAT, mode, dir_fd=d))


def _split(path):
    "'/a/b' -> ('/a', 'b'); '/a' -> ('/', 'a')."
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def _join(path, name):
    return f"{path}/{name}" if path != "/" else f"/{name}"


def _whiteout_file(path):
    parent, name = _split(path)
    return _join(parent, WHITEOUT_PREFIX + name)


def _copy_data(src, dst, size):
    "All of src into dst: copy_file_range (reflinks, no user-space copy), else read/write."
    offset = 0
    try:
        while offset < size:
            n = os.copy_file_range(src, dst, size - offset)
            if n == 0:
                return
            offset += n
        return
    except OSError as e:
        if e.errno not in (EXDEV, EINVAL, ENOTSUP, EOPNOTSUPP):
            raise
    while True:
        chunk = os.pread(src, 1 << 20, offset)
        if not chunk:
            return
        os.pwrite(dst, chunk, offset)
        offset += len(chunk)
