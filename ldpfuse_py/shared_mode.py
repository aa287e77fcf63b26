"""``--mode shared``: one file system process for the whole command tree.

The launcher itself becomes the file system process: it builds the Operations objects
(the embedded backend's code, with this interpreter as its host), listens on an abstract
unix socket (nothing is left on disk), forks the command, and answers every process of the
tree (native/server/) until the command and all its descendants have ended. It is
a child subreaper, so descendants that outlive the command are still waited for. Its exit
status is the command's (a command killed by a signal kills it with the same signal), and
a kill of it reaches the command even while its FS thread is stuck (forward_signals).
A method that never returns does not keep it either: op_timeout after the command tree
has ended (at once if a call has already timed out behind it), a serving thread still in
a method is left behind and the launcher exits with the command's status, without the
file system's destroy() (its thread is the stuck one).
"""
import errno
import os
import signal

OP_TIMEOUT = 60.0   # seconds; the preload's default too (backend/channel.c)


def op_timeout():
    """How long an operation may take (-o op_timeout, LDPFUSE_OP_TIMEOUT); 0: for ever."""
    try:
        return max(float(os.environ.get("LDPFUSE_OP_TIMEOUT") or OP_TIMEOUT), 0.0)
    except ValueError:
        return OP_TIMEOUT


def subreaper():
    """Descendants that outlive their parents come back to this process, which stays their
    ancestor: the server serves only the command's processes (native/server/peers.c)."""
    from . import _embedded

    try:
        _embedded.subreaper()
    except OSError:
        pass  # descendants that outlive their parents are then adopted by init, and not served


def start_command(argv_exec, env, reap_descendants=True):
    """The command in a child of this process, which becomes its subreaper (descendants
    that outlive it come back here) if reap_descendants; the child's signal dispositions
    are the defaults a shell gives, and a command that cannot run exits 127 (126 when it
    exists) with one line.
    Returns its pid."""
    from . import supervisor

    if supervisor.wanted(env) and supervisor.start(env):
        argv_exec = supervisor.command(argv_exec)
    if reap_descendants:
        subreaper()
    pid = os.fork()
    if pid == 0:
        try:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT):
                signal.signal(sig, signal.SIG_DFL)
            os.execvpe(argv_exec[0], argv_exec, env)
        except OSError as e:
            os.write(2, f"ldpfuse-run: cannot run {argv_exec[0]}: {e.strerror}\n".encode())
            os._exit(127 if e.errno == errno.ENOENT else 126)   # the shell's statuses
        os._exit(127)
    return pid


_listeners = []


def run(argv_exec, env, die):
    """Serve the command and exit as it did."""
    exit_as(wait(start(argv_exec, env, die)))


def start(argv_exec, env, die):
    """Build the file system objects, start the command and the server; returns the
    command's pid. Called on the main thread, or on another one (a fusepy script's
    FUSE())."""
    listener = listen(env)
    env["LDPFUSE_MODE"] = "shared"
    try:
        thread_safe = build(env)
    except RuntimeError as e:
        die(f"the file system could not start: {e}")
    from . import workers

    objects = _runtime_objects()
    refused = workers.check(env, objects)
    if refused:
        die(refused)
    if workers.wanted(env) > 1:
        # N instances answer side by side (native/server/workers.c): a thread per client;
        # started before any thread of the server's (forks of this process, if the class
        # says workers_safe = "fork")
        try:
            workers.start(env, objects)
        except RuntimeError as e:
            die(f"-o workers={workers.wanted(env)}: {e}")
        thread_safe = True
    pid = start_command(argv_exec, env)
    serve(listener, thread_safe)
    forward_signals(pid)
    return pid


def _runtime_objects():
    from . import _runtime

    return _runtime.mounted_objects()


def listen(env):
    """The server's socket (abstract: nothing is left on disk), named to the command in
    env with the run's secret (32 random bytes: a connection that does not send them is
    never served, native/server/peers.c) and this process's pid and start time (a client
    talks only to the server it was given: native/backend/channel.c); open until this
    process exits."""
    import _socket  # not socket.py, nor secrets: 10-20 ms of imports on every embedded run

    name = f"ldpfuse-{os.getpid()}-{os.urandom(8).hex()}"
    listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    listener.bind("\0" + name)
    listener.listen(256)
    _listeners.append(listener)
    env["LDPFUSE_SOCKET"] = name
    env["LDPFUSE_SECRET"] = os.urandom(32).hex()
    env["LDPFUSE_SERVER_PID"] = str(os.getpid())
    env["LDPFUSE_SERVER_START"] = start_time()
    return listener


def start_time():
    """This process's start time (clock ticks since boot, /proc/self/stat's 22nd field):
    with its pid, what names it for as long as it lives and never another process after it
    (a client sends nothing to a socket whose listener is not that process:
    native/backend/channel.c)."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    return stat[stat.rindex(b")") + 2:].split()[19].decode()


def build(env):
    """Build the file system objects here, from the same description the clients get;
    returns whether every class is thread_safe. RuntimeError if one cannot start."""
    for key, value in env.items():
        if key.startswith("LDPFUSE_"):
            os.environ[key] = value
    from . import _embedded, _runtime, operations

    operations._request_context = _embedded.context
    _embedded.serve_init()
    backing_environment(env, _runtime.mounted_objects())
    return all(getattr(ops, "thread_safe", False) for ops in _runtime.mounted_objects())


def backing_environment(env, objects):
    """The backing trees the objects declare (operations.Backing), for the command's
    preload: LDPFUSE_BACKING = "MNT\x1fSEE\x1fDIR\x1fLOWER[\x1fAFTER\x1fHIDE]\x1e..."
    (native/vfs/backing.c)."""
    from .operations import Backing, backing_trees

    records = []
    for i, ops in enumerate(objects):
        ops = getattr(ops, "ops", ops)              # under --trace, TracedOps
        # -o ro (FusepyOps refuses every change with EROFS): the changes go to it
        read_only = bool(getattr(ops, "ro", False))
        ops = getattr(ops, "operations", ops)       # a fusepy class, FusepyOps
        try:
            trees = backing_trees(ops)
        except (TypeError, ValueError) as e:
            raise RuntimeError(str(e)) from None
        for d, b in trees:
            if any(c in s for s in (d, b.lower) for c in "\x1e\x1f"):
                raise RuntimeError(f"backing: {d!r} -> {b.lower!r}: a name with a control character")
            mask = b.mask() | (Backing.mask_of(Backing.CHANGES) if read_only else 0)
            record = f"{i}\x1f{mask}\x1f{d}\x1f{b.lower}"
            if b.after or b.hide:
                # after-filters and hidden names (native/vfs/backing.c): AFTER\x1fHIDE
                record += f"\x1f{b.after_mask() & ~mask}\x1f{'/'.join(b.hide)}"
            records.append(record)
    unions = union_environment(objects)
    if unions:
        env["LDPFUSE_UNION"] = "\x1e".join(unions)
    if records or unions:
        if records:
            env["LDPFUSE_BACKING"] = "\x1e".join(records)
        env["LDPFUSE_BACKING_OWNER"] = str(os.geteuid())     # as server/peers.c's owner


def union_environment(objects):
    """The unions the objects declare (ldpfuse_py.union.Union), for the preload:
    ["MNT\x1fUPPER\x1fLOWER...", ...] (native/vfs/union.c). A read-only mount (-o ro)
    declares none: its methods answer with EROFS where the kernel would."""
    from .union import union_of

    records = []
    for i, ops in enumerate(objects):
        ops = getattr(ops, "ops", ops)              # under --trace, TracedOps
        if getattr(ops, "ro", False):
            continue
        ops = getattr(ops, "operations", ops)       # a fusepy class, FusepyOps
        try:
            u = union_of(ops)
        except TypeError as e:
            raise RuntimeError(str(e)) from None
        if u is not None:
            records.append(u.record(i))
    return records


def serve(listener, thread_safe):
    """Answer the clients of listener (a thread accepts them; wait() serves them)."""
    from . import _embedded

    _embedded.serve_start(listener.fileno(), thread_safe)


def forward_signals(pid):
    """SIGTERM and SIGHUP sent to this process go to the command, and so do SIGINT and
    SIGQUIT sent by a process (kill); the terminal's Ctrl-C and Ctrl-\\ reach the command
    itself (it is in our process group): let the command decide. A C handler does it
    (native/backend/signal_forward.c), at once in any thread: Python's handlers run only
    on the main thread, the FS thread, which a method stuck in C code never gives back.
    Callable from any thread."""
    from . import _embedded

    _embedded.forward_signals(pid)


def wait(pid):
    """Serve until the command and every descendant have ended; returns the command's wait
    status (None if it was never seen)."""
    import threading

    from . import _embedded

    status = []
    served = threading.Event()
    threading.Thread(target=_wait_all, args=(pid, status, _embedded.serve_stop, served),
                     name="ldpfuse-wait", daemon=True).start()
    serve_until_stopped()
    served.set()
    return status[0] if status else None


def serve_until_stopped():
    """This thread answers the calls of a class that is not thread_safe (on the launcher's
    main thread, the one that built the objects: sqlite3 connections made in __init__
    work) until serve_stop(); a fusepy script's with nothreads, whose calls must run on the
    thread of its FUSE() call, is answered from that thread, this one waiting (each call
    handed from one thread to the other cost about 12 us: bench/NOTES.md). Then run the
    exit hooks (the file systems' destroy(), which also ends a fusepy script's FUSE()
    call)."""
    from . import _embedded, _runtime

    def serve():
        while True:
            try:
                _embedded.serve_loop()
                break
            except InterruptedError:
                continue

    loop = _runtime.fuse_thread_loop()
    if loop is not None:
        loop.run_here(serve)
    else:
        serve()
    import atexit

    atexit._run_exitfuncs()     # the FS's destroy(), on the thread that served it
    from . import workers

    workers.stop(op_timeout() or OP_TIMEOUT)    # theirs (-o workers)
    _embedded.serve_cleanup()


def reap_all(pid):
    """Wait for every child, the command pid and the descendants adopted since (we are
    their subreaper), until none is left; returns the command's wait status (None if it
    was never seen)."""
    status = None
    while True:
        try:
            child, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        except InterruptedError:
            continue
        if child == pid:
            status = st


def _wait_all(pid, status, stop, served):
    """Wait for the command and every descendant (we are their subreaper), then stop the
    server; if its thread is still in a method op_timeout later (no client is left to
    answer), end with the command's status all the same; at once if a call has already
    timed out behind that method (fs_thread_stuck: a kill of a stuck run ends it now)."""
    from . import _embedded

    st = reap_all(pid)
    if st is not None:
        status.append(st)
    from . import supervisor

    supervisor.stop()   # what supervised writers closed reaches the file system first
    stop()
    grace = op_timeout()
    stuck = grace and _embedded.fs_thread_stuck()
    if grace and not served.wait(0.1 if stuck else grace):
        from . import _runtime

        when = ("when the command ended, a call having timed out behind it" if stuck else
                f"{grace:g} s after the command ended")
        _runtime.log_line(f"ldpfuse-run: the file system is still in a method (or destroy()) "
                          f"{when} (-o op_timeout): exiting without its destroy()")
        exit_as(status[0] if status else None)


def exit_as(status):
    """End with the command's status: the same exit code, or death by the same signal
    (a shell then reports 128 + the signal's number, 137 for SIGKILL)."""
    from . import run_dir, stats, supervisor

    supervisor.stop()
    stats.report()
    run_dir.remove()
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command dumped its own
        except (ImportError, ValueError, OSError):
            pass
        try:
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                _default_disposition(sig)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)     # a signal whose default is not to end the process
    # no interpreter shutdown: server threads may still sit in accept()
    os._exit(os.waitstatus_to_exitcode(status) if status is not None else 1)


def _default_disposition(sig):
    """SIG_DFL for sig, from any thread (exit_as runs on the wait thread when the FS thread
    is stuck; Python's signal.signal() works on the main thread only)."""
    try:
        signal.signal(sig, signal.SIG_DFL)
    except ValueError:
        import ctypes

        ctypes.CDLL(None).signal(int(sig), 0)   # 0: SIG_DFL
