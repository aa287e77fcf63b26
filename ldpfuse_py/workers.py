"""``-o workers=N``: one command served by N instances of the file system class.

The shared mode's server (native/server/workers.c) keeps its page caches, handles and
coherence for the whole command, and sends each call of the class to one of N instances:
its own (built as with one worker) and N - 1 worker processes, each a fresh interpreter
that builds its instance from the same description as the first (the FS spec, its
arguments and -o options, or a fusepy script run up to its FUSE() call), as every process
of the embedded mode does. A class allows it with ``workers_safe = True`` (its instances
may serve side by side: state outside the process, or read-only); ``-o workers_safe``
says so for a class that does not (an unmodified fusepy script). With ``workers_safe =
"fork"`` (``-o workers_safe=fork``) a worker is instead a fork of the launcher made right
after the first instance was built, before the server starts a thread: each worker has
the instance's state built once (an archive indexed once), unless the process has a
thread by then (the class's ``__init__`` started one): a fork of a process with threads
is unsafe, and each worker builds its own, with one line saying why. docs/operations.md.
"""
import os
import sys

ENV = "LDPFUSE_WORKERS"
WORKER_FD = 3   # the worker's end of its socket (workers.c, spawn)


def count(value):
    """-o workers=VALUE: a number of instances, 1 or more, or ``auto`` (the machine's
    cores); ValueError with the message for the user otherwise."""
    if value == "auto":
        return max(os.cpu_count() or 1, 1)
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 64:
        raise ValueError(f"-o workers expects a number of instances from 1 to 64, or auto, got {value!r}")
    return n


def declared(ops):
    """What the class says of its instances serving one command side by side: its
    ``workers_safe`` (False, True, or "fork": a fork of the built instance is one too)."""
    ops = getattr(ops, "ops", ops)              # under --trace, TracedOps
    inner = getattr(ops, "operations", ops)     # a fusepy class, FusepyOps
    return getattr(inner, "workers_safe", False) or getattr(ops, "workers_safe", False)


def allowed(ops):
    """Does the class say its instances may serve one command side by side?"""
    return bool(declared(ops))


FORK = "fork"
SAFE_ENV = "LDPFUSE_WORKERS_SAFE"   # -o workers_safe ("1"), -o workers_safe=fork ("fork")


def forked(env, objects):
    """Are the workers forks of this process's instances (every class, or the user, says
    workers_safe = "fork")?"""
    return env.get(SAFE_ENV) == FORK or (bool(objects) and all(declared(o) == FORK for o in objects))


def check(env, objects):
    """None, or the line refusing -o workers=N for objects whose classes do not allow it."""
    n = wanted(env)
    if n <= 1 or env.get(SAFE_ENV) in ("1", FORK):
        return None
    for ops in objects:
        if not allowed(ops):
            inner = getattr(getattr(ops, "ops", ops), "operations", getattr(ops, "ops", ops))
            name = type(inner).__name__
            return (f"-o workers={n}: {name} does not declare workers_safe = True (that its instances "
                    f"may serve one command side by side, docs/operations.md); -o workers_safe "
                    f"runs it so anyway")
    return None


def wanted(env):
    try:
        return int(env.get(ENV) or 1)
    except ValueError:
        return 1


def start(env, objects=()):
    """The worker processes, each built before this returns (RuntimeError if one could
    not be). Called by the launcher after its own instances (objects) were built, before
    its server starts a thread (shared_mode)."""
    from . import _embedded, _runtime

    n = wanted(env)
    if n <= 1:
        return
    # a fusepy script whose calls run on its FUSE() thread (nothreads): that thread holds
    # the server's loop, so this process's instance cannot answer beside it: N processes
    local = _runtime.fuse_thread_loop() is None
    if forked(env, objects):
        threads = os.listdir("/proc/self/task")
        if len(threads) == 1:
            _embedded.workers_start(n, None, fork_workers(n - 1 if local else n), local)
            return
        names = ", ".join(sorted({type(getattr(getattr(o, "ops", o), "operations", getattr(o, "ops", o))).__name__
                                  for o in objects}))
        _runtime.log_line(f"ldpfuse-run: -o workers={n}: the process has {len(threads)} threads once {names} "
                          f"is built (its module or __init__ started them), and a fork of a process with threads is "
                          f"unsafe: each worker builds its own instance instead (docs/operations.md)")
    child_env = dict(os.environ)
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path.insert(0, {parent!r}); "
            "from ldpfuse_py import workers; workers.serve()")
    argv = [sys.executable, "-c", code]
    _embedded.workers_start(n, argv, [f"{k}={v}" for k, v in child_env.items()], local)


def stop(grace):
    """The workers call their destroy() and end (killed after grace seconds)."""
    if wanted(os.environ) > 1:
        from . import _embedded

        _embedded.workers_stop(float(grace))


def fork_workers(count):
    """count workers forked from this process (single-threaded, its instances built);
    returns the server's end of each one's socket. Each is forked twice, its middle process
    gone at once, as workers.c's spawn does: not a child of the launcher, which waits for
    every child of the command (shared_mode.reap_all)."""
    import socket

    from . import shared_mode

    ends = []
    try:
        for _ in range(count):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ends.append(ours.detach())
            pid = os.fork()
            if pid == 0:
                try:
                    if os.fork() == 0:
                        # only its own end: the others' ends held here would keep their
                        # sockets open after the launcher's end (and so their workers)
                        for fd in ends:
                            os.close(fd)
                        for listener in shared_mode._listeners:
                            listener.close()
                        serve(theirs.detach(), build=False)
                finally:
                    os._exit(0)
            theirs.close()
            while True:
                try:
                    os.waitpid(pid, 0)
                    break
                except InterruptedError:
                    continue
    except BaseException:
        for fd in ends:
            os.close(fd)
        raise
    return ends


def serve(fd=WORKER_FD, build=True):
    """A worker process: build the instance (build False: a fork of the launcher, which
    built it), answer the server's calls on fd until it goes, then the instance's
    destroy()."""
    import atexit
    import signal

    from . import _embedded, _runtime, operations

    # the terminal's Ctrl-C and Ctrl-\ are the command's (the launcher forwards what is
    # sent to it): a worker ends when the launcher does
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)

    if build:
        operations._request_context = _embedded.context
        try:
            _embedded.serve_init()
        except RuntimeError as e:
            _runtime.log_line(f"ldpfuse-run: worker {os.getpid()}: the file system could not start: {e}")
            os._exit(1)

    def loop():
        _embedded.worker_serve(fd)

    fuse_loop = _runtime.fuse_thread_loop()
    if fuse_loop is not None:
        fuse_loop.run_here(loop)    # a fusepy script's calls on its FUSE() thread
    else:
        loop()
    atexit._run_exitfuncs()     # destroy()
    os._exit(0)
