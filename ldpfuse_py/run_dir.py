"""The command's private directory (docs/security.md, native/run_dir.h).

What ldpfuse keeps on disk for a run (the stand-ins of unix sockets bound in a mount,
FIFOs, the append lock, the --strict record) lives in a directory made for the run with a
random name, never at a fixed name in /tmp that another user could make first. It is made
under $XDG_RUNTIME_DIR when that is a private directory of this user, else under the
system's temporary directory (not TMPDIR, which may be in a mount):

    ldpfuse-XXXXXXXX/         0700; 0711 with -o allow_other
        <32 random hex>/      0700; 01733 with -o allow_other: the command's other users
                              make entries, none lists or removes another's
                              (LDPFUSE_RUN_DIR)

The launcher removes it when the command has ended.
"""
import os
import stat
import tempfile

_made = []


def _private_base():
    """$XDG_RUNTIME_DIR if it is this user's own 0700 directory, else /tmp."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
                return runtime
        except OSError:
            pass
    return "/tmp"


def make(env, allow_other):
    """Make the run's directory and name it in env (LDPFUSE_RUN_DIR, and LDPFUSE_OWNER_UID:
    whose it is). Returns its path, or None (logged) if it cannot be made: the processes
    then use /tmp/ldpfuse-UID, checked for its owner."""
    try:
        top = tempfile.mkdtemp(prefix="ldpfuse-", dir=_private_base())
        inner = os.path.join(top, os.urandom(16).hex())
        os.mkdir(inner, 0o700)
        if allow_other:
            os.chmod(top, 0o711)
            os.chmod(inner, 0o1733)
    except OSError as e:
        from ._runtime import log_line

        log_line(f"ldpfuse-run: cannot make the command's private directory ({e.strerror}): "
                 f"using /tmp/ldpfuse-{os.geteuid()}")
        return None
    _made.append(top)
    env["LDPFUSE_RUN_DIR"] = inner
    env["LDPFUSE_OWNER_UID"] = str(os.geteuid())
    return inner


def remove():
    """Remove what make() made (at the launcher's exit)."""
    if not _made:
        return
    import shutil

    for top in _made:
        shutil.rmtree(top, ignore_errors=True)
    _made.clear()
