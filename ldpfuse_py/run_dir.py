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

The launcher removes it when the command has ended. A launcher that was killed (kill -9)
cannot: its top directory holds `launcher`, its pid and start time, and the next launcher
of the same user removes every such directory whose launcher is no longer running.
"""
import os
import stat
import tempfile

_made = []


# Unix sockets are bound in the run's directory (the supervisor's `supervisor.sock`, the
# stand-ins `s-<16 hex>` of sockets bound in a mount: native/interpose/socket.c), and a
# socket's name has 108 bytes: "/ldpfuse-XXXXXXXX/<32 hex>/s-<16 hex>" takes 69 of them.
_SUN_PATH = 108
_RUN_DIR_NAMES = 69


def _private_base():
    """$XDG_RUNTIME_DIR if it is this user's own 0700 directory whose path leaves room for
    the run's socket names, else /tmp."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/") and len(os.fsencode(runtime)) + _RUN_DIR_NAMES < _SUN_PATH:
        try:
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
                return runtime
        except OSError:
            pass
    return "/tmp"


def _start_time(pid):
    """The start time of process pid (clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _launcher_line():
    """`launcher`'s line: our pid, start time and pid namespace (a launcher in another
    namespace sharing /tmp has pids we cannot look up)."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "?"
    return f"{os.getpid()} {_start_time(os.getpid())} {ns}"


def _sweep(base):
    """Remove the run directories in base of this user whose launcher has died: each names
    its launcher (pid, start time, pid namespace) in `launcher`; one without it (being
    made, or an older version's) or from another pid namespace is left."""
    import shutil

    try:
        names = [n for n in os.listdir(base) if n.startswith("ldpfuse-")]
    except OSError:
        return
    for name in names:
        top = os.path.join(base, name)
        try:
            st = os.lstat(top)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(top, "launcher"), os.O_RDONLY | os.O_NOFOLLOW)
            try:
                pid, started, ns = os.read(fd, 128).decode().split()
            finally:
                os.close(fd)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if ns == _launcher_line().split()[2] and _start_time(pid) != started:
            shutil.rmtree(top, ignore_errors=True)


def make(env, allow_other):
    """Make the run's directory and name it in env (LDPFUSE_RUN_DIR, and LDPFUSE_OWNER_UID:
    whose it is). Returns its path, or None (logged) if it cannot be made: the processes
    then use /tmp/ldpfuse-UID, checked for its owner."""
    base = _private_base()
    _sweep(base)
    try:
        top = tempfile.mkdtemp(prefix="ldpfuse-", dir=base)
        fd = os.open(os.path.join(top, "launcher"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, f"{_launcher_line()}\n".encode())
        finally:
            os.close(fd)
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
