"""Running a fusepy script the way ``python script.py ARGS`` (or ``python -m module ARGS``)
runs it, with its ``FUSE()`` call lasting as long as the command.

fusepy's ``FUSE(operations, mountpoint, ...)`` blocks in libfuse's loop until the file
system is unmounted, then returns, and the script's code after it (``with`` blocks,
``finally``, cleanup) runs. Here the mount is the command: ``FUSE()``

1. publishes its call (the operations and options) to whoever runs the script, then
2. sits in a :class:`MountLoop`, running on its own thread the operations that must run
   there (``nothreads=True``: libfuse's single-threaded loop calls every operation on the
   thread that called ``FUSE()``; sqlite3 connections, for one, insist on it), until
3. the command ends (the file system's ``destroy`` is called: see
   ``FusepyOps._unmount``, which then waits, at most FINISH_SECONDS, for the script's code
   after ``FUSE()``), and then returns.

"The command ends" is where each backend calls ``destroy``: the shared mode's launcher
after the command and its descendants have ended (``shared_mode.wait`` runs the exit
hooks), a process with its own instance when it exits (``be_destroy``, or ``atexit`` in a
Python program). Nothing here depends on which thread calls the operations.

Where the script runs:

- in the launcher (``ldpfuse-run``), on its main thread, as ``python script.py`` would.
  Its ``FUSE()`` calls the launcher back (``launch``): ``--mode embedded`` execs the
  command there and then; ``--mode shared`` starts the command and serves it from this
  process (with ``nothreads``, from the ``FUSE()`` call's own thread: the server's loop
  is handed to it once, not each call: ``shared_mode.serve_until_stopped``), and
  ``FUSE()`` returns when the command has ended;
- in every other process that builds the file system (``--mode embedded``), on a thread
  of its own (:func:`start_script`), since the process's own thread must go back to the
  program as soon as the operations exist. The thread is the file system's own (its I/O
  never re-enters the mount: ``_embedded.guard_this_thread``). It is started with
  ``_thread`` and nothing imports ``threading`` before the script does, so in ldpfuse's
  own interpreter the script's thread is the one ``threading`` calls the main thread
  (ratarmount refuses to start with other threads about).
"""

from __future__ import annotations

import _thread
import builtins
import os
import sys
import types
from collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

# how long the end of the command waits for the script's code after FUSE() to finish
FINISH_SECONDS = 30.0


class ScriptExit(Exception):
    """The script ended (SystemExit or an exception) before calling FUSE()."""


class MountLoop:
    """The loop a ``FUSE()`` call sits in until the command ends: runs on the calling
    thread the operations handed to it with :meth:`run_here`."""

    def __init__(self) -> None:
        self.thread = _thread.get_ident()
        self.pending: deque = deque()
        self.wake = _thread.allocate_lock()
        self.wake.acquire()
        self.ended = False
        # calls made before serve() starts wait for it (the launcher's server can be asked
        # before its FUSE() call gets there)
        self.serving = True
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # the FUSE() thread does not exist in a forked child: calls run where they arrive
        self.serving = False
        self.thread = None

    def run_here(self, func: Callable[..., Any], *args: Any) -> Any:
        """``func(*args)`` on the FUSE() thread (or right here, when it does not serve)."""
        if not self.serving or _thread.get_ident() == self.thread:
            return func(*args)
        done = _thread.allocate_lock()
        done.acquire()
        box: list = [done, None, None]
        self.pending.append((func, args, box))
        self._poke()
        while not done.acquire(timeout=0.1):
            if not self.serving:
                self._drain()  # the loop has ended meanwhile: what is left runs here
        if box[2] is not None:
            exc, box[2] = box[2], None
            raise exc
        return box[1]

    def _poke(self) -> None:
        try:
            self.wake.release()
        except RuntimeError:
            pass  # already woken: the loop drains everything pending

    def serve(self) -> None:
        """Run what arrives until :meth:`end`; signals are handled meanwhile."""
        self.serving = True
        try:
            while True:
                self.wake.acquire()
                self._drain()
                if self.ended:
                    return
        finally:
            self.serving = False
            self._drain()  # a call that arrived as the loop ended

    def _drain(self) -> None:
        while self.pending:
            func, args, box = self.pending.popleft()
            try:
                box[1] = func(*args)
            except BaseException as e:  # handed to the caller's thread
                box[2] = e
            box[0].release()

    def end(self) -> None:
        self.ended = True
        self._poke()


class ScriptRun:
    """One run of a script (or ``-m`` module) as ``__main__``, and its FUSE() calls."""

    current: ScriptRun | None = None  # the run whose FUSE() calls are being taken

    def __init__(self, path: str | None, argv: list[str], *, module: str | None = None,
                 launch: Callable[[Any], None] | None = None, stdout: Any = None,
                 module_dir: str | None = None) -> None:
        self.path = os.path.abspath(path) if path else None
        self.module = module
        # `python -m` puts its working directory first on sys.path: the launcher's, in
        # every process (a command may have changed directory)
        self.module_dir = module_dir or os.getcwd()
        self.argv = list(argv)
        self.launch = launch
        self.stdout = stdout
        self.calls: list = []
        self.error: BaseException | None = None
        self.published = _thread.allocate_lock()   # released at FUSE() or at the end
        self.published.acquire()
        self.finished = _thread.allocate_lock()    # released when the script has ended
        self.finished.acquire()
        self.thread: int | None = None
        self.saved: dict[str, Any] = {}
        self.forked = False
        self.gave_back = False  # the process's argv, __main__, streams are the program's again
        self.script_argv: list[str] = []
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self.forked = True  # the script's thread is the parent's: nothing here to wait for

    @property
    def name(self) -> str:
        return f"-m {self.module}" if self.module else str(self.path)

    # -- what FUSE() calls
    def publish(self, call: Any) -> None:
        if self.calls:
            # fusepy would mount again after an unmount; here the mount was the command
            raise RuntimeError("ldpfuse-run mounts one file system per script: a second "
                               "FUSE() call has no command to serve")
        self.calls.append(call)
        if self.launch is not None:
            self.launch(call)
        _release(self.published)

    # -- running
    def _main_module(self) -> tuple[Any, types.ModuleType, str]:
        module = types.ModuleType("__main__")
        g = module.__dict__
        g["__builtins__"] = builtins     # as in a real __main__: the module, not its dict
        if self.module is not None:
            import runpy

            try:
                mod_name, spec, code = runpy._get_module_details(self.module)  # type: ignore[attr-defined]
            except ImportError as e:
                raise ScriptExit(str(e)) from None
            g.update(__name__="__main__", __file__=spec.origin, __cached__=spec.cached,
                     __loader__=spec.loader, __package__=spec.parent, __spec__=spec)
            return code, module, spec.origin
        import importlib.machinery

        with open(self.path, "rb") as f:
            source = f.read()
        code = compile(source, self.path, "exec", dont_inherit=True)
        g.update(__file__=self.path, __cached__=None, __package__=None, __spec__=None,
                 __loader__=importlib.machinery.SourceFileLoader("__main__", self.path))
        return code, module, self.path

    def run(self, *, keep_process_state: bool = True) -> None:
        """Run the script on this thread until it ends. ``sys.argv``, ``__main__`` and
        ``sys.path[0]`` become the script's, as ``python script.py`` has them; unless
        ``keep_process_state``, they are given back when FUSE() is called (a Python
        program hosting the file system keeps its own)."""
        from .fs_loader import FusepyImports

        self.thread = _thread.get_ident()
        first_path = self.module_dir if self.module else os.path.dirname(str(self.path))
        self.saved = {"argv": sys.argv, "main": sys.modules.get("__main__"),
                      "out": sys.stdout, "err": sys.stderr, "path0": first_path,
                      "keep": keep_process_state, "imports": FusepyImports()}
        previous, ScriptRun.current = ScriptRun.current, self
        self.saved["imports"].__enter__()
        sys.path.insert(0, first_path)
        if self.stdout is not None:
            sys.stdout = sys.stderr = self.stdout
        try:
            code, module, argv0 = self._main_module()
            sys.argv = self.script_argv = [argv0, *self.argv]
            sys.modules["__main__"] = module
            exec(code, module.__dict__)
        except SystemExit as e:
            if not self.calls:
                c = e.code
                why = (f"exit status {c}" if isinstance(c, int) or c is None else str(c))
                self.error = ScriptExit(f"the script exited ({why}) before calling FUSE()")
        except BaseException as e:
            if not self.calls:
                self.error = e
            else:
                _debug(f"{self.name}: {type(e).__name__}: {e} after FUSE() returned")
        finally:
            if ScriptRun.current is self:
                ScriptRun.current = previous
            self.give_back()
            _release(self.published)
            _release(self.finished)

    def give_back(self) -> None:
        """What the script changed in the process, given back (once) unless it keeps it."""
        saved, self.saved = self.saved, {}
        if not saved:
            return
        saved["imports"].__exit__(None, None, None)
        sys.stdout, sys.stderr = saved["out"], saved["err"]
        if saved["keep"]:
            return
        self.gave_back = True
        try:
            sys.path.remove(saved["path0"])
        except ValueError:
            pass
        sys.argv = saved["argv"]
        if saved["main"] is not None:
            sys.modules["__main__"] = saved["main"]

    def wait_published(self) -> Any:
        """The first FUSE() call; raises what ended the script if it ended before one."""
        self.published.acquire()
        _release(self.published)
        if self.calls:
            return self.calls[0]
        if self.error is not None:
            raise self.error
        raise ScriptExit("the script did not call FUSE(operations, mountpoint, ...)")

    def wait_finished(self, seconds: float = FINISH_SECONDS) -> bool:
        """Wait (bounded) for the script's code after FUSE() to finish. What it prints
        meanwhile goes where its output went before FUSE(), and it sees its own sys.argv,
        even if the program (a Python program hosting it) has had them back."""
        if self.forked or self.thread == _thread.get_ident():
            return True
        program = sys.stdout, sys.stderr, sys.argv
        if self.gave_back:  # the program is exiting: the script has sys back meanwhile
            sys.argv = self.script_argv
            if self.stdout is not None:
                sys.stdout = sys.stderr = self.stdout
        try:
            ok = self.finished.acquire(timeout=seconds)
        finally:
            if self.gave_back:
                sys.stdout, sys.stderr, sys.argv = program
        if ok:
            _release(self.finished)
        return ok


def _release(lock: Any) -> None:
    try:
        lock.release()
    except RuntimeError:
        pass


def _debug(msg: str) -> None:
    import logging

    logging.getLogger("fuse").debug(msg)


def _run_guarded(run: ScriptRun, keep_process_state: bool) -> None:
    try:
        from ._embedded import guard_this_thread
    except ImportError:
        pass
    else:
        guard_this_thread()   # the FS's own thread: its I/O never re-enters the mount
    run.run(keep_process_state=keep_process_state)


def start_script(run: ScriptRun, *, keep_process_state: bool) -> Any:
    """Run the script on a thread of its own; return its first FUSE() call once made."""
    _thread.start_new_thread(_run_guarded, (run, keep_process_state))
    call = run.wait_published()
    if not keep_process_state:
        run.give_back()  # the program's own argv, __main__, stdout; the script waits in FUSE()
    return call
