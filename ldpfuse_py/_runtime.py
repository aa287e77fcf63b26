"""The Python side of the embedded backend (native/backend/embedded.c).

The preload library starts an interpreter in the first process that touches a mount (or
reuses the program's own, when the program is this Python), imports this module and calls
:func:`boot`, which builds one Operations object per mount from what ``ldpfuse-run`` put in
the environment. From then on the C side calls the objects directly; this module is only
used again to log exceptions.

Kept small: it is imported in every process that touches a mount.
"""
import os
import threading
import sys

from .fs_loader import (MODULE_PREFIX, MOUNT_FLAGS, SCRIPT_PREFIX, check_instance, load_class,
                        parse_options)
from .operations import Operations, FileInfo, Passthrough

__all__ = ["boot", "log_exception", "Passthrough", "FileInfo"]

SEP = "\x1f"  # separates FS arguments in the environment (they may contain anything else)


def _env_list(name):
    value = os.environ.get(name, "")
    return value.split(SEP) if value else []


def log_line(text):
    """Append to the log (LDPFUSE_LOG_FILE, else stderr); never raises."""
    data = text if text.endswith("\n") else text + "\n"
    data = data.encode("utf-8", "backslashreplace")
    path = os.environ.get("LDPFUSE_LOG_FILE")
    try:
        if path:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        else:
            os.write(2, data)
    except OSError:
        pass


def log_exception(op, path, exc_type, exc, tb):
    """A method raised something other than an OSError: the caller gets EIO, the log
    gets the traceback with the operation and path.

    A KeyboardInterrupt on the main thread of a Python program is the program's (Ctrl-C
    arrived while the file system's Python code ran): it is handed back to the program
    by re-raising the signal, so the program's own handler runs as soon as the call
    returns (fusepy swallows it). Anywhere else (ldpfuse's own interpreter, another
    thread: Python delivers signals to the main thread only, the launcher that serves
    the command) it is the file system's own, and is logged like any other exception:
    nothing a method raises ends the program or the launcher (its mount would go)."""
    if (exc_type is not None and issubclass(exc_type, KeyboardInterrupt) and _host_owns
            and threading.current_thread() is threading.main_thread() and not _in_launcher()):
        log_line(f"ldpfuse[{os.getpid()}]: KeyboardInterrupt during {op}({path!r}): "
                 f"the call fails with EIO and the program gets the interrupt")
        try:
            exc._ldpfuse_trip = _InterruptOnRelease()
        except AttributeError:
            pass
        return
    import traceback

    text = "".join(traceback.format_exception(exc_type, exc, tb))
    log_line(f"ldpfuse[{os.getpid()}]: {op}({path!r}) raised, the caller gets EIO:\n{text}")


def _in_launcher():
    """This interpreter is ldpfuse-run's, serving the command's calls (shared mode, or
    the embedded mode's server for processes that cannot run Python)."""
    return "ldpfuse_py.cli" in sys.modules


class _InterruptOnRelease:
    """Hands a KeyboardInterrupt back to the Python program. Re-raising SIGINT from Python
    code would fire at once, inside our own frame, and be lost with it; attached to the
    exception, this object is freed by the C side after the call, outside any Python
    frame, and its __del__ (a C function: no bytecode runs after it) trips SIGINT for the
    program's next bytecode."""

    import _thread

    __del__ = _thread.interrupt_main
    del _thread


class _LogStream:
    """A file-like object for logging handlers and for what the file system prints:
    opens the log per write, so the host closing its fds (close_range in a child)
    cannot break it."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self):
        self.pending = ""

    def write(self, text):
        n = len(text)
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()  # print() writes a line in pieces: wait for its end
        for line in lines:
            if line.strip():
                log_line(line)
        return n

    def flush(self):
        pass

    def isatty(self):
        return False


def _configure_logging(host_owns):
    """--log-level LEVEL: the file system's log records (LoggingMixIn's 'fuse.log-mixin'
    included) go to the ldpfuse log at that level. In a Python program only the 'fuse'
    logger is configured: the program's root logger is not ours."""
    level_name = os.environ.get("LDPFUSE_LOG_LEVEL")
    if not level_name:
        return
    import logging

    logger = logging.getLogger("fuse" if host_owns else None)
    logger.setLevel(level_name.upper())
    if any(isinstance(getattr(h, "stream", None), _LogStream) for h in logger.handlers):
        return  # a fusepy script's basicConfig() already writes to the log
    handler = logging.StreamHandler(_LogStream())
    handler.setFormatter(logging.Formatter(f"ldpfuse[{os.getpid()}] %(name)s %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    if host_owns:
        logger.propagate = False  # not twice, through the program's handlers too


def _takes_fileinfo(ops):
    """create(path, mode, fi) in fusepy's signature gets a FileInfo (with the open flags)."""
    func = getattr(type(ops), "create", None)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    return code.co_argcount >= 4 or bool(code.co_flags & 0x04)  # 0x04: *args


_host_owns = 0


def _load_script(spec, args, host_owns, ro):
    """A fusepy script (``script:PATH``) or module (``module:NAME``): run it as ``__main__``
    until its FUSE() call, and wrap the call's operations for the options it gave. The
    script's thread then waits in FUSE() until the command ends (fusepy_script)."""
    from .fusepy_script import ScriptRun, start_script

    path = module = module_dir = None
    if spec.startswith(SCRIPT_PREFIX):
        path = os.path.abspath(spec[len(SCRIPT_PREFIX):])
    else:
        module, _, module_dir = spec[len(MODULE_PREFIX):].partition(":")
    live = ScriptRun.current
    if live is not None and live.calls and (live.path, live.module) == (path, module):
        # the launcher of --mode shared: the script runs here already, in its FUSE()
        return live.calls[0].wrap(ro=ro)
    root = logging_state = None
    if host_owns and "logging" in sys.modules:
        import logging

        root = logging.getLogger()
        logging_state = (list(root.handlers), root.level)
    if host_owns:
        # threading, imported by the script's thread first, would take that thread for the
        # program's main thread and make the interpreter's exit wait for it (before atexit,
        # where destroy() lets the script's FUSE() return)
        import threading  # noqa: F401
    run = ScriptRun(path, args, module=module, stdout=_LogStream(), module_dir=module_dir)
    call = start_script(run, keep_process_state=not host_owns)
    if host_owns:
        _keep_root_logger(root, logging_state)
    return call.wrap(ro=ro)


def _keep_root_logger(root, state):
    """A script's logging.basicConfig() in a Python program: its handlers serve the
    'fuse' loggers only, the program's root logger is left as it was."""
    if "logging" not in sys.modules:
        return
    import logging

    if root is None:
        root, state = logging.getLogger(), ([], logging.WARNING)
    handlers, level = state
    added = [h for h in root.handlers if h not in handlers]
    if not added and root.level == level:
        return
    fuse_log = logging.getLogger("fuse")
    for h in added:
        root.removeHandler(h)
        fuse_log.addHandler(h)
    if root.level != level:
        fuse_log.setLevel(root.level)
        root.setLevel(level)


# The instance ldpfuse-run built to check the class before starting the command
# (cli.py), by the description it was built from: this process serves with it instead of
# building a second one (an archive indexed twice at every start of the shared mode)
_checked: dict = {}


def adopt(spec, args, options, ops):
    """The launcher's checked instance of the mount described by (spec, args, -o options),
    for boot() in this process to take as it would have built it."""
    _checked[(spec, SEP.join(args), SEP.join(options))] = ops


def _load(i, spec, args, opts, host_owns):
    ro = "ro" in opts.pop(MOUNT_FLAGS, ())
    if spec.startswith((SCRIPT_PREFIX, MODULE_PREFIX)):
        return _load_script(spec, args, host_owns, ro)
    ops = _checked.pop((spec, os.environ.get(f"LDPFUSE_FS_{i}_ARGS", ""),
                        os.environ.get(f"LDPFUSE_FS_{i}_OPTS", "")), None)
    if ops is None:
        cls = load_class(spec, private_name=f"_ldpfuse_fs_{i}")
        ops = check_instance(cls(*args, **opts), spec)
    from_fusepy = any(getattr(ops, name, 0) is None for name in _NONE_CHECK)
    if from_fusepy or ro or _MFUSEPY_ONLY & _own_methods(ops):
        # fusepy's "set to None: not implemented", mfusepy's readdir_with_offset and
        # init_with_config, a read-only mount
        from .fuse_compat import FusepyOps

        ops = FusepyOps(ops, ro=ro)
    return ops


_MFUSEPY_ONLY = {"readdir_with_offset", "init_with_config"}


def _own_methods(ops):
    own = set()
    for name in _MFUSEPY_ONLY:
        if getattr(type(ops), name, None) is not getattr(Operations, name, None):
            own.add(name)
    return own


# operations the preload library calls that fusepy file systems set to None
_NONE_CHECK = ("getxattr", "listxattr", "setxattr", "removexattr", "access", "flush",
               "release", "releasedir", "fsync", "opendir", "open", "create", "readlink",
               "symlink", "link", "mknod", "chmod", "chown", "utimens", "statfs", "truncate",
               "rename", "mkdir", "rmdir", "unlink", "write", "read", "readdir")


_MOUNTED: list = []


def mounted_objects():
    """The Operations objects boot() built in this process."""
    return [m[0] for m in _MOUNTED]


def fuse_thread_loop():
    """The MountLoop of the one file system this process serves when its calls must run on
    the thread of its script's FUSE() call (fusepy's nothreads: ratarmount's SQLite
    connection belongs to that thread), else None. The server's FS thread can then be
    that thread, and no call is handed from one thread to the other (shared_mode)."""
    objects = mounted_objects()
    if len(objects) != 1:
        return None
    ops = getattr(objects[0], "ops", objects[0])     # under --trace, TracedOps
    return getattr(ops, "_loop", None)


# Operations' methods whose default answers success and does nothing: not called when a
# class keeps them (embedded.c, struct mnt's defaults); open is still called, but a class
# that keeps open and release lets a process re-open an unchanged cached file with no
# request (OPEN_LOCAL, vfs/pagecache.c)
NOT_CALLED_WHEN_DEFAULT = ("flush", "release", "releasedir", "opendir", "fsync", "access", "open")


def boot(host_owns=0):
    """Build the file system objects; returns [(ops, use_ns, create_takes_fi), ...] in the
    order of LDPFUSE_MOUNTPOINTS."""
    global _host_owns
    _host_owns = host_owns
    if not host_owns:
        # ldpfuse's own interpreter: what the file system prints goes to the log, never
        # into the program's output
        sys.stdout = _LogStream()
    trace = os.environ.get("LDPFUSE_TRACE") == "1"
    points = [p for p in os.environ.get("LDPFUSE_MOUNTPOINTS", "").split("\n") if p]
    mounts = []
    for i in range(int(os.environ.get("LDPFUSE_NMOUNTS", "0"))):
        spec = os.environ[f"LDPFUSE_FS_{i}"]
        args = _env_list(f"LDPFUSE_FS_{i}_ARGS")
        opts = parse_options(_env_list(f"LDPFUSE_FS_{i}_OPTS"))
        try:
            ops = _load(i, spec, args, opts, host_owns)
            has_init = hasattr(getattr(ops, "operations", ops), "init")
            use_ns = bool(getattr(ops, "use_ns", False))
            takes_fi = getattr(ops, "create_takes_fi", None)
            if takes_fi is None:
                takes_fi = _takes_fileinfo(ops)
            if getattr(getattr(ops, "operations", ops), "backing", None) is not None:
                # after-filters and hidden names apply to the calls that reach the class
                # too (ldpfuse_py/after.py): the embedded mode, what the preload hands back
                from .after import Filtered, filtered_trees

                trees = filtered_trees(ops)
                if trees:
                    ops = Filtered(ops, trees)
            if trace:
                from .trace import TracedOps

                ops = TracedOps(ops, points[i] if i < len(points) else spec)
            ops("init", "/") if has_init else None
        except BaseException as e:
            log_exception("init", spec, type(e), e, e.__traceback__)
            raise RuntimeError(f"{spec}: {type(e).__name__}: {e}") from None
        # the C side may call bound methods directly when __call__ is Operations' own
        direct = getattr(type(ops), "__call__", None) is Operations.__call__
        # POSIX ACL xattrs reach the class only if it says it handles them
        posix_acl = bool(getattr(getattr(ops, "operations", ops), "posix_acl", False))
        # methods the class keeps as Operations has them (they answer success and do
        # nothing): the C side does not call them, as FUSE's no_open, no_opendir, and
        # libfuse's unset flush and release cost nothing
        defaults = tuple(name for name in NOT_CALLED_WHEN_DEFAULT
                         if direct and getattr(type(ops), name, None) is getattr(Operations, name))
        # a class that is not thread_safe is called one operation at a time (embedded.c)
        thread_safe = bool(getattr(ops, "thread_safe", False))
        # its open only pins the file, its release only unpins it: a re-open for reading
        # of the unchanged file may share a handle the process still holds (operations.md)
        open_pins = bool(getattr(getattr(ops, "operations", ops), "open_only_pins", False))
        mounts.append((ops, use_ns, bool(takes_fi), direct, posix_acl, defaults, thread_safe,
                       open_pins))
    _MOUNTED[:] = mounts
    _configure_logging(host_owns)
    if host_owns:
        # an import the program is in the middle of gets back the names it searches for
        from . import _host_imports

        _host_imports.give_back()
        # the program is this Python: destroy() must run while the interpreter still does
        import atexit

        for m in mounts:
            atexit.register(_destroy, m[0])
    return mounts


def _destroy(ops):
    try:
        ops("destroy", "/")
    except BaseException as e:
        log_exception("destroy", "/", type(e), e, e.__traceback__)
