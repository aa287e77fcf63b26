"""A symlink's mode cannot change on Linux: fchmodat(AT_SYMLINK_NOFOLLOW) and
lchmod() on a symlink fail with EOPNOTSUPP (glibc says so before any file
system is asked) and leave the link's target alone.  tar makes these calls
when it restores a symlink.  In a mount the interposer answers the same,
even for a file system whose chmod would follow the link (fusepy's chmod is
given a path and many file systems call os.chmod on it)."""

import pytest

from conftest import EXAMPLES, LOOPBACK, MEMORY

SCRIPT = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
D = os.environ["D"]
AT_FDCWD, AT_SYMLINK_NOFOLLOW = -100, 0x100
open(f"{D}/t", "w").close()
os.chmod(f"{D}/t", 0o644)
os.symlink("t", f"{D}/l")
os.symlink("nowhere", f"{D}/dangling")
for name in ("l", "dangling", "t", "missing"):
    p = f"{D}/{name}".encode()
    for call, r in (("fchmodat", lambda: libc.fchmodat(AT_FDCWD, p, 0o600, AT_SYMLINK_NOFOLLOW)),
                    ("lchmod", lambda: libc.lchmod(p, 0o640))):
        rc = r()
        err = os.strerror(ctypes.get_errno()) if rc else ""
        print(call, name, rc, err, "target mode", oct(os.stat(f"{D}/t").st_mode))
"""

# A loopback whose chmod follows symlinks, as a naive fusepy file system's does.
NAIVE_FS = """
import os, sys
sys.path.insert(0, {examples!r})
from loopback import Loopback

class FollowingChmod(Loopback):
    def __init__(self, root={lower!r}):
        super().__init__(root)

    def chmod(self, path, mode):
        os.chmod(self._lower(path), mode)
"""


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY, "naive"], ids=["loopback", "memory", "following-chmod"])
def test_fchmodat_nofollow_on_symlink_is_eopnotsupp_as_native(ws, fs):
    if fs == "naive":
        source = NAIVE_FS.format(examples=str(EXAMPLES), lower=str(ws.lower))
        fs = f"{ws.write_script('naive_fs.py', source)}:FollowingChmod"
        native, _ = ws.compare_py(SCRIPT, fs=fs)
        ws.assert_lower_matches_native()    # the target kept its mode, as natively
    else:
        native, _ = ws.compare_py(SCRIPT, fs=fs, mode="shared" if fs == MEMORY else None)
    assert "fchmodat l -1 Operation not supported" in native.stdout
