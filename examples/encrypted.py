# Encrypted: transparent encryption of file contents over a lower directory,
# with AES-256-GCM from the `cryptography` package (pip install cryptography,
# or ldpfuse-py[examples]).
#
# Shows a stacked file system that serves data through Python: open() returns
# an int handle (not a Passthrough), read()/write() work on the plaintext kept
# for the open file, and flush()/release() encrypt it and write it below. Each
# lower file is MAGIC + a fresh 12-byte nonce + ciphertext + 16-byte tag, so
# a change to the stored bytes is detected (the read fails with EIO) and the
# same plaintext never encrypts twice the same way. Names, sizes (minus the
# 34 bytes of overhead), modes, times and directory layout are not hidden:
# this protects contents, like gocryptfs' -plaintextnames mode.
#
# Make a key once, then run:
#
#   python3 -c 'import os; open("key", "wb").write(os.urandom(32))'
#   ldpfuse-run --mountpoint /mnt/e examples/encrypted.py:Encrypted /data/enc key -- \
#       cp -r ~/notes /mnt/e/
#
# The lower directory then holds only ciphertext; the same command line with
# the same key reads the notes back.

import errno
import os
import stat
import threading

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ldpfuse_py import FuseOSError, Operations

MAGIC = b"LDPFENC1"
NONCE = 12
TAG = 16
OVERHEAD = len(MAGIC) + NONCE + TAG
AAD = b"ldpfuse-py examples/encrypted.py v1"


def encrypt(aead, plaintext):
    nonce = os.urandom(NONCE)
    return MAGIC + nonce + aead.encrypt(nonce, bytes(plaintext), AAD)


def decrypt(aead, stored):
    """Plaintext of a lower file's bytes; an empty file is an empty plaintext."""
    if not stored:
        return b""
    if len(stored) < OVERHEAD or not stored.startswith(MAGIC):
        raise ValueError("not a file of this file system")
    nonce = stored[len(MAGIC):len(MAGIC) + NONCE]
    return aead.decrypt(nonce, stored[len(MAGIC) + NONCE:], AAD)


class OpenFile:
    """The plaintext of one lower file while it is open in this process; every
    handle on the same lower file shares it."""

    __slots__ = ("lower", "data", "dirty", "handles")

    def __init__(self, lower, data):
        self.lower = lower
        self.data = bytearray(data)
        self.dirty = False
        self.handles = 0


class Encrypted(Operations):
    """Serve ``lower`` with its file contents encrypted under the 32-byte key in
    ``keyfile``."""

    use_ns = True

    def __init__(self, lower, keyfile):
        self.root = os.path.realpath(lower)
        if not os.path.isdir(self.root):
            raise NotADirectoryError(f"{lower} is not a directory")
        with open(keyfile, "rb") as f:
            key = f.read()
        if len(key) != 32:
            raise ValueError(f"{keyfile} must hold 32 bytes (an AES-256 key), it holds {len(key)}")
        self.aead = AESGCM(key)
        self.lock = threading.RLock()
        self.files = {}         # lower path -> OpenFile
        self.handles = {}       # fh -> OpenFile
        self.next_fh = 1
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self):
        self.lock = threading.RLock()

    def __call__(self, op, path, *args):
        with self.lock:
            return super().__call__(op, path, *args)

    def _lower(self, path):
        return self.root + path

    # ---- contents
    def _load(self, lower):
        try:
            with open(lower, "rb") as f:
                stored = f.read()
        except IsADirectoryError:
            raise FuseOSError(errno.EISDIR) from None
        try:
            return decrypt(self.aead, stored)
        except (InvalidTag, ValueError):
            # wrong key, or the stored bytes were changed: never serve them
            raise FuseOSError(errno.EIO) from None

    def _store(self, f):
        data = encrypt(self.aead, f.data) if f.data else b""
        fd = os.open(f.lower, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        f.dirty = False

    def _handle(self, lower):
        f = self.files.get(lower)
        if f is None:
            f = self.files[lower] = OpenFile(lower, self._load(lower))
        f.handles += 1
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = f
        return fh

    def open(self, path, flags):
        lower = self._lower(path)
        if not os.path.exists(lower):
            raise FuseOSError(errno.ENOENT)
        fh = self._handle(lower)
        if flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR):
            self.handles[fh].data.clear()
            self.handles[fh].dirty = True
        return fh

    def create(self, path, mode, fi=None):
        lower = self._lower(path)
        excl = os.O_EXCL if fi is not None and fi.flags & os.O_EXCL else 0
        os.close(os.open(lower, os.O_WRONLY | os.O_CREAT | excl, mode))
        fh = self._handle(lower)  # new and empty, or made meanwhile by another process
        if fi is not None and fi.flags & os.O_TRUNC:
            self.files[lower].data.clear()
            self.files[lower].dirty = True
        return fh

    def read(self, path, size, offset, fh):
        return bytes(self.handles[fh].data[offset:offset + size])

    def write(self, path, data, offset, fh):
        f = self.handles[fh]
        if offset > len(f.data):
            f.data.extend(b"\0" * (offset - len(f.data)))
        f.data[offset:offset + len(data)] = data
        f.dirty = True
        return len(data)

    def truncate(self, path, length, fh=None):
        f = self.handles.get(fh) if fh else self.files.get(self._lower(path))
        if f is None:  # not open here: decrypt, cut, encrypt
            lower = self._lower(path)
            f = OpenFile(lower, self._load(lower))
            self._resize(f, length)
            self._store(f)
            return 0
        self._resize(f, length)
        return 0

    @staticmethod
    def _resize(f, length):
        if length < len(f.data):
            del f.data[length:]
        else:
            f.data.extend(b"\0" * (length - len(f.data)))
        f.dirty = True

    def flush(self, path, fh):
        f = self.handles[fh]
        if f.dirty:
            self._store(f)
        return 0

    def fsync(self, path, datasync, fh):
        return self.flush(path, fh)

    def release(self, path, fh):
        f = self.handles.pop(fh)
        if f.dirty and os.path.lexists(f.lower):
            self._store(f)
        f.handles -= 1
        if f.handles == 0 and self.files.get(f.lower) is f:
            del self.files[f.lower]
        return 0

    # ---- metadata: the lower directory's, with the plaintext size
    def getattr(self, path, fh=None):
        lower = self._lower(path)
        st = os.lstat(lower)
        attrs = {key: getattr(st, key) for key in (
            "st_ino", "st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size",
            "st_blocks", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}
        for key in ("atime", "mtime", "ctime"):
            attrs[f"st_{key}"] = attrs.pop(f"st_{key}_ns")
        if stat.S_ISREG(st.st_mode):
            f = self.handles.get(fh) if fh else self.files.get(lower)
            attrs["st_size"] = len(f.data) if f is not None else max(0, st.st_size - OVERHEAD)
        return attrs

    def access(self, path, amode):
        if not os.access(self._lower(path), amode, follow_symlinks=False):
            raise FuseOSError(errno.EACCES)
        return 0

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._lower(path))

    def readlink(self, path):
        return os.readlink(self._lower(path))

    def mkdir(self, path, mode):
        os.mkdir(self._lower(path), mode)

    def mknod(self, path, mode, dev):
        os.mknod(self._lower(path), mode, dev)

    def rmdir(self, path):
        os.rmdir(self._lower(path))

    def unlink(self, path):
        os.unlink(self._lower(path))

    def symlink(self, target, source):
        os.symlink(source, self._lower(target))

    def link(self, target, source):
        os.link(self._lower(source), self._lower(target))

    def rename(self, old, new):
        os.rename(self._lower(old), self._lower(new))
        moved = {lower: f for lower, f in self.files.items()
                 if lower == self._lower(old) or lower.startswith(self._lower(old) + "/")}
        for lower, f in moved.items():
            del self.files[lower]
            f.lower = self._lower(new) + lower[len(self._lower(old)):]
            self.files[f.lower] = f

    def chmod(self, path, mode):
        if os.path.islink(self._lower(path)):  # a symlink's mode cannot change on Linux
            raise FuseOSError(errno.EOPNOTSUPP)
        os.chmod(self._lower(path), mode)

    def chown(self, path, uid, gid):
        os.lchown(self._lower(path), uid, gid)

    def utimens(self, path, times=None):
        if times is None:  # now
            os.utime(self._lower(path), follow_symlinks=False)
        else:
            os.utime(self._lower(path), ns=times, follow_symlinks=False)

    def statfs(self, path):
        sv = os.statvfs(self._lower(path))
        return {key: getattr(sv, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}
