"""``--mode embedded``: each process runs the file system itself; the launcher serves those
that cannot.

A process that touches a mount starts CPython inside itself (native/backend/loader.c).
Some cannot: a process of another user that may not read the interpreter (a venv under
root's 0700 home), a Python program of another minor version, a program where libpython
cannot be loaded. Those are served by the launcher instead, as in the shared mode
(native/backend/shared.c to server.c, with the caller's rights), and share the launcher's
one instance of the file system.

So the launcher starts the command as its child rather than exec it, and listens on the
shared mode's socket (LDPFUSE_SOCKET), but builds its file system objects and starts the
server only when the first such process connects: a run where every process hosts the
file system itself pays a fork and a listening socket, not an instance. Until then it
exits as soon as the command has (descendants that outlive it are not waited for, as
when it exec'd the command); once it serves, it serves until the command and every
descendant have ended, as the shared mode does. Under --strict it always waits for every
descendant, then names the escapes (escapes.finish).
"""
import os
import select
import threading

from . import shared_mode


def run(argv_exec, env, record=None):
    """Start the command, serve on demand, exit as the command did."""
    listener = shared_mode.listen(env)
    pid = shared_mode.start_command(argv_exec, env)
    shared_mode.forward_signals(pid)
    waiter = _Waiter(pid)
    status = waiter.serve_on_demand(listener, env, every_descendant=record is not None)
    if record:
        from . import escapes

        status = escapes.finish(record, status)
    shared_mode.exit_as(status)


class _Waiter:
    """Reaps the command and its descendants (we are their subreaper) on a thread, and
    says so on a pipe: one byte when the command has ended, one when every process has."""

    def __init__(self, pid):
        self.pid = pid
        self.status = None
        self.stop = None        # called when every process has ended, once serving
        self.lock = threading.Lock()
        self.all_ended = False
        self.read_end, self.write_end = os.pipe2(os.O_CLOEXEC)
        threading.Thread(target=self._reap, name="ldpfuse-wait", daemon=True).start()

    def _reap(self):
        while True:
            try:
                child, st = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if child == self.pid:
                self.status = st
                os.write(self.write_end, b"c")
        with self.lock:
            self.all_ended = True
            stop = self.stop
        os.write(self.write_end, b"a")
        if stop:
            stop()

    def serve_on_demand(self, listener, env, every_descendant):
        """Wait for the command (and, if every_descendant, for every process); if a process
        connects first, become the server. Returns the command's wait status."""
        poller = select.poll()
        poller.register(listener.fileno(), select.POLLIN)
        poller.register(self.read_end, select.POLLIN)
        while True:
            try:
                ready = {fd for fd, _ in poller.poll()}
            except InterruptedError:
                continue
            if listener.fileno() in ready:
                break
            said = os.read(self.read_end, 1)
            if said == b"a" or not every_descendant:
                return self.status
        try:
            thread_safe = shared_mode.build(env)
        except RuntimeError as e:
            from ._runtime import log_line

            log_line(f"ldpfuse-run: the file system could not start in the launcher, for the "
                     f"processes that cannot run it themselves: their mount operations fail "
                     f"with EIO: {e}")
            listener.close()    # they get EIO at once, and from now on
            return self._until_ended(every_descendant)
        from . import _embedded

        with self.lock:
            self.stop = _embedded.serve_stop
            ended = self.all_ended
        if ended:
            _embedded.serve_stop()
        shared_mode.serve(listener, thread_safe)
        shared_mode.serve_until_stopped()
        return self.status

    def _until_ended(self, every_descendant):
        while True:
            said = os.read(self.read_end, 1)
            if said == b"a" or not every_descendant:
                return self.status
