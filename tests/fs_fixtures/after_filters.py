"""Classes with after-filters for tests/test_after_filters.py (loopbacks of a lower tree)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from loopback import Loopback  # noqa: E402

from ldpfuse_py import Backing, Operations  # noqa: E402


class Raises(Loopback):
    """Told of unlink and mkdir after them, and raises there (the change stays done); its
    getattr filter raises for '/odd' (the stat fails with EIO) and changes st_size for
    '/big' (not an after-filter's to change: EIO)."""

    def __init__(self, root):
        super().__init__(root)
        self.backing = Backing(self.root, after={"unlink", "mkdir", "getattr"})

    def after(self, op, path, result, *args):
        if op == "getattr":
            if path == "/odd":
                raise RuntimeError("a bug in the filter")
            if path == "/big":
                return {"st_size": 1 << 40}
            return None
        raise RuntimeError(f"a bug in the filter, told {op} {path} {result}")


class NoAfter(Operations):
    "Declares an after-filter and has no after method: refused at start."

    def __init__(self, root):
        self.backing = Backing(root, after={"unlink"})
