# Audit: a view of a real directory that hides some names, can present every file as
# read-only, and keeps an audit trail of the changes programs make, with after-filters.
#
# Shows Backing(after=..., hide=...) (docs/backing.md, "After the operation"): the preload
# still does every operation on the real directory itself, in the calling process with its
# own rights; the class is called only *after* the operations it names (a round trip
# each in the default mode), and never for the others. Here:
#
#   - hide=('*.secret',): names matching a pattern are not in listings and are missing
#     for every lookup, stat, open, unlink...; making one is refused (EACCES). The preload
#     does this itself, no Python call per listing;
#   - after getattr (-o readonly=yes): stat shows every file without its write bits (what
#     a program *sees*; to refuse writes too, see open_write with Backing(see=...));
#   - after create, unlink, rename, mkdir, rmdir, open_write, truncate, chmod: one line
#     per change in the trail (-o trail=FILE), with its result: what the class raises
#     there goes to the log, the change stays done and the program gets its result.
#
# Run it:
#
#   ldpfuse-run --mountpoint /tmp/a -o trail=/tmp/trail.log -o hide='*.secret' \
#       examples/audit.py:Audit /data -- sh -c 'ls /tmp/a; echo x > /tmp/a/new; rm /tmp/a/new'
#   cat /tmp/trail.log
#
# In the embedded mode (no backing trees there) the loopback's methods serve every
# operation, and the same filters apply to their results (ldpfuse_py/after.py).

import os
import stat

from ldpfuse_py import Backing

from loopback import Loopback

CHANGES = ("create", "unlink", "rename", "mkdir", "rmdir", "open_write", "truncate", "chmod",
           "symlink", "link")


class Audit(Loopback):
    """A loopback of ``root`` with hidden names (``hide``: patterns, ',' between them),
    files presented read-only (``readonly='yes'``) and a trail of changes (``trail``: a
    file the launcher opens for appending; nothing when not given)."""

    def __init__(self, root, hide="*.secret", readonly="no", trail=""):
        super().__init__(root)
        if readonly not in ("yes", "no"):
            raise ValueError(f"readonly must be 'yes' or 'no', not {readonly!r}")
        self.readonly = readonly == "yes"
        patterns = [p for p in hide.split(",") if p]
        after = CHANGES + (("getattr",) if self.readonly else ())
        self.backing = Backing(self.root, after=after if trail or self.readonly else (), hide=patterns)
        # opened here, by whoever builds the object (the launcher in the default mode): the
        # callers need no right on it
        self._trail = os.open(trail, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600) if trail else None

    def after(self, op, path, result, *args):
        if op == "getattr":
            if self.readonly and stat.S_ISREG(result["st_mode"]):
                return {"st_mode": result["st_mode"] & ~0o222}
            return None
        if self._trail is not None:
            what = " ".join([op, path, *map(str, args), "ok" if result == 0 else os.strerror(-result)])
            os.write(self._trail, (what + "\n").encode("utf-8", "surrogateescape"))
        return None
