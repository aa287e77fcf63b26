"""Union backing: an overlay's merged view read by the preload itself (native/vfs/union.c).

A class whose mount is a copy-on-write union of an upper directory over lower ones (as
examples/overlay.py) declares it as its ``union`` attribute::

    self.union = Union(upper, [lower1, lower2])      # lowers top first

Then in the shared mode (the default) every operation that only reads the merged view,
``getattr``, ``readlink``, ``access``, ``open`` for reading, ``opendir``/``readdir``/
``releasedir``, is done by the preload in the calling process, on the layers, with the
caller's rights and no call into Python, reading whiteouts and opaque directories in both
the kernel's form (a 0/0 character device, ``trusted.overlay.opaque``) and fuse-overlayfs'
(``.wh.NAME``, ``.wh..wh..opq``). Every other operation (copy-up, creates, whiteouts,
renames) goes to the class's methods, which must answer them, and the read methods too
(the embedded mode, and a caller the mount does not serve here, still calls them).
docs/overlay.md says what a class must keep true for the two sides to agree.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: never imported at run time (operations.py does the same)
    from typing import Any, Sequence


class Union:
    """``Union(upper, lowers)``: the mount's root is ``upper`` over ``lowers`` (top first)."""

    __slots__ = ("upper", "lowers")

    def __init__(self, upper: str, lowers: Sequence[str]) -> None:
        if isinstance(lowers, (str, bytes)):
            raise TypeError("Union(upper, lowers): lowers is a list of directories, top first")
        layers = [os.path.realpath(os.fsdecode(p)) for p in [upper, *lowers]]
        if len(layers) < 2:
            raise ValueError("Union(upper, lowers): no lower directory")
        if len(layers) > 32:
            raise ValueError("Union(upper, lowers): at most 31 lower directories")
        for p in layers:
            if not os.path.isdir(p):
                raise NotADirectoryError(20, "a union's layer is not a directory", p)
            if any(c in p for c in "\x1e\x1f"):
                raise ValueError(f"Union: {p!r}: a name with a control character")
        self.upper, self.lowers = layers[0], layers[1:]

    def record(self, mount_index: int) -> str:
        "The preload's form: MNT\\x1fUPPER\\x1fLOWER..."
        return "\x1f".join([str(mount_index), self.upper, *self.lowers])

    def __repr__(self) -> str:
        return f"Union({self.upper!r}, {self.lowers!r})"


def union_of(ops: Any) -> "Union | None":
    "The Union that ops declares (its ``union``), checked."
    declared = getattr(ops, "union", None)
    if declared is None:
        return None
    if not isinstance(declared, Union):
        raise TypeError(f"union must be a Union, not {type(declared).__name__}")
    return declared
