"""``--mode embedded``: each process runs the file system itself; the launcher serves those
that cannot.

A process that touches a mount starts CPython inside itself (native/backend/loader.c).
Some cannot: a process of another user that may not read the interpreter (a venv under
root's 0700 home), a Python program of another minor version, or of ours before its
interpreter runs (a venv in the mount), a program where libpython cannot be loaded. Those
are served by the launcher instead, as in the shared mode (native/backend/shared.c to
native/server/, with the caller's rights), and share the launcher's one instance of the file
system.

So the launcher starts the command as its child rather than exec it, and listens on the
shared mode's socket (LDPFUSE_SOCKET), but builds its file system objects and starts the
server only when the first such process connects: a run where every process hosts the
file system itself pays a fork, a listening socket and a poll (bench/embedded_launcher.py),
not an instance. Until then it waits for the command only, and exits as it did
(descendants that outlive it are not waited for, as when it exec'd the command); once it
serves, it serves until the command and every descendant have ended, as the shared mode
does. It is the command's subreaper from the start: a process whose parent ended stays
below the launcher, which is how the server tells the command's processes
(native/server/peers.c). Under --strict it waits for every descendant from the
start, then names the escapes (escapes.finish).

It also makes the command's FIFO directory (LDPFUSE_FIFO_DIR, native/backend/fifo_dir.h):
a FIFO node of a mount is, for every process, a real FIFO there that the process opens
itself, so processes meet in one pipe and a signal interrupts the open as natively. The
directory is removed when the launcher exits.
"""
import os
import select

from . import shared_mode


def run(argv_exec, env, record=None):
    """Start the command, serve on demand, exit as the command did."""
    listener = shared_mode.listen(env)
    fifo_dir = _make_fifo_dir(env)
    every_descendant = record is not None
    # the subreaper from the start (orphans stay below us: the server serves only the
    # command's processes), though until it serves it waits for the command only
    pid = shared_mode.start_command(argv_exec, env)
    shared_mode.forward_signals(pid)
    if every_descendant:
        status = _Waiter(pid).serve_on_demand(listener, env)
        from . import escapes

        status = escapes.finish(record, status)
    else:
        status = _serve_on_demand(pid, listener, env)
    _remove_fifo_dir(fifo_dir)
    shared_mode.exit_as(status)


def _make_fifo_dir(env):
    """The command's private FIFO directory, named in env (None, logged, if it cannot be
    made: FIFOs in the mount are then opened by the file system's open). 01733, as /tmp
    but not listable: every user's processes of the command make FIFOs in it, none removes
    another's, and a process ignores a FIFO that neither it, root, this user nor the file's
    owner in the FS made."""
    # in the command's private directory (run_dir.py), else /tmp (not TMPDIR: that may be
    # in a mount)
    base = env.get("LDPFUSE_RUN_DIR") or "/tmp"
    path = f"{base}/fifos-{os.urandom(8).hex()}"
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o1733)
    except OSError as e:
        from ._runtime import log_line

        log_line(f"ldpfuse-run: cannot make the FIFO directory {path} ({e.strerror}): a FIFO "
                 f"in the mount is opened by the file system's open")
        return None
    env["LDPFUSE_FIFO_DIR"] = path
    return path


def _remove_fifo_dir(path):
    if path is None:
        return
    try:
        for name in os.listdir(path):
            try:
                os.unlink(os.path.join(path, name))
            except OSError:
                pass
        os.rmdir(path)
    except OSError:
        pass    # FIFOs another user's process made: left, as /tmp's own files are


def _client_before(listener, ended):
    """Wait until a client connects to listener (True) or the fd ended is readable (False:
    the processes it stands for have ended), whichever comes first."""
    poller = select.poll()
    poller.register(listener.fileno(), select.POLLIN)
    poller.register(ended, select.POLLIN)
    while True:
        try:
            ready = {fd for fd, _ in poller.poll()}
        except InterruptedError:
            continue
        return listener.fileno() in ready


def _serve_on_demand(pid, listener, env):
    """Wait for the command; if a process connects first, serve until every process has
    ended. Returns the command's wait status."""
    try:
        ended = os.pidfd_open(pid)
    except (AttributeError, OSError):
        ended = None    # no pidfd (Linux < 5.3): serve from the start
    if ended is not None:
        if not _client_before(listener, ended):
            return _wait_for(pid)
        os.close(ended)
    if not _start_serving(listener, env):
        return _wait_for(pid)
    return shared_mode.wait(pid)


def _start_serving(listener, env):
    """Build the launcher's instance and serve listener; False (logged) if it cannot start."""
    try:
        thread_safe = shared_mode.build(env)
    except RuntimeError as e:
        from ._runtime import log_line

        log_line(f"ldpfuse-run: the file system could not start in the launcher, for the "
                 f"processes that cannot run it themselves: their mount operations fail "
                 f"with EIO: {e}")
        listener.close()    # they get EIO at once, and from now on
        return False
    shared_mode.serve(listener, thread_safe)
    return True


def _wait_for(pid):
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


class _Waiter:
    """--strict: reaps the command and every descendant (we are their subreaper) on a
    thread from the start, and says so on a pipe: one byte when the command has ended, one
    when every process has."""

    def __init__(self, pid):
        import threading

        self.pid = pid
        self.status = None
        self.stop = None        # called when every process has ended, once serving
        self.lock = threading.Lock()
        self.all_ended = False
        self.read_end, self.write_end = os.pipe2(os.O_CLOEXEC)
        threading.Thread(target=self._reap, name="ldpfuse-wait", daemon=True).start()

    def _reap(self):
        self.status = shared_mode.reap_all(self.pid)
        with self.lock:
            self.all_ended = True
            stop = self.stop
        os.write(self.write_end, b"a")
        if stop:
            stop()

    def serve_on_demand(self, listener, env):
        """Wait for every process; if one connects first, serve until then. Returns the
        command's wait status."""
        if not _client_before(listener, self.read_end):
            return self.status
        if _start_serving(listener, env):
            from . import _embedded

            with self.lock:
                self.stop = _embedded.serve_stop
                ended = self.all_ended
            if ended:
                _embedded.serve_stop()
            shared_mode.serve_until_stopped()
        else:
            os.read(self.read_end, 1)
        return self.status
