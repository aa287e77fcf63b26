"""Classes with backing trees for tests/test_backing.py."""
import errno
import os

from ldpfuse_py import Backing, FuseOSError, Operations, Passthrough


class Bare(Operations):
    """The whole tree backed and no method of its own: whatever the preload hands back to
    the class (a symlink among the directories that leads out of the lower tree) gets
    Operations' defaults (getattr: ENOENT)."""

    def __init__(self, lower):
        self.backing = Backing(lower)


class Picky(Operations):
    """Sees create and unlink: refuses to create '*.bad', to unlink '*.keep'."""

    def __init__(self, lower):
        self.lower = os.path.realpath(lower)
        self.backing = Backing(lower, see={"create", "unlink"})

    def create(self, path, mode, fi=None):
        if path.endswith(".bad"):
            raise FuseOSError(errno.EACCES)
        flags = fi.flags if fi is not None else os.O_WRONLY | os.O_TRUNC
        return Passthrough(os.open(self.lower + path, flags | os.O_CREAT, mode))

    def unlink(self, path):
        if path.endswith(".keep"):
            raise FuseOSError(errno.EPERM)
        os.unlink(self.lower + path)


class Unknown(Operations):
    def __init__(self, lower):
        self.backing = Backing(lower, see={"frobnicate"})
