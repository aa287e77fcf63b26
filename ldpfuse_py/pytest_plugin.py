"""pytest plugin: the ``ldpfuse`` fixture (registered through the ``pytest11``
entry point: installing ldpfuse-py is enough, no conftest needed).

    def test_cat(ldpfuse, tmp_path):
        (tmp_path / "lower").mkdir()
        (tmp_path / "lower" / "f").write_text("hi")
        m = ldpfuse.mount("examples/loopback.py:Loopback", tmp_path / "lower")
        r = m.run(["cat", m / "f"])
        assert r.stdout == "hi"

``ldpfuse.mount(fs, *fs_args, **options)`` returns a :class:`Mount` at a fresh
mount point under the test's temporary directory (it is not created on disk).
``fs`` is what ldpfuse-run takes (``"file.py:Class"``, ``"package.module:Class"``,
``"fusepy_script.py"``), or:

- a class: loaded in each process from the file that defines it
  (``inspect.getsourcefile(cls)``), so it must be defined at the top level of
  a file; a test module works (it is imported again in each process);
- an instance: pickled, and unpickled in each process. Each process gets its
  own copy made from the state the instance had when ``mount()`` was called;
  nothing a command does comes back into the test's object. Its class must be
  defined at the top level of a file, and everything it holds picklable
  (no locks, open files or sockets: make them in ``init()``).

``Mount.run(cmd)`` runs a command under ldpfuse-run and returns a
``subprocess.CompletedProcess`` (text output; ``check=True`` raises
``CalledProcessError``); ``Mount.python(code)`` runs a Python snippet there
(the mount point is in ``sys.argv[1]`` and ``$MOUNT``); ``Mount.log()`` is the
ldpfuse log of the runs (tracebacks, ``trace=True`` lines). ``ldpfuse.run(cmd,
m1, m2)`` runs one command with several mounts.
"""

from __future__ import annotations

import inspect
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

__all__ = ["LdpFuse", "Mount", "ldpfuse", "load_pickled"]

StrPath = Union[str, "os.PathLike[str]"]
DEFAULT_TIMEOUT = 120.0


def ldpfuse_run_argv() -> list[str]:
    beside = Path(sys.executable).parent / "ldpfuse-run"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ldpfuse-run")
    if found:
        return [found]
    return [sys.executable, "-m", "ldpfuse_py.cli"]


def load_pickled(pickle_path: str, module_name: str = "", module_file: str = "") -> Any:
    """The FS "class" the fixture gives ldpfuse-run for an instance: unpickles it.
    The module that defines its class is loaded from its file, under its own name,
    when this process cannot import it (test modules usually cannot)."""
    if module_name and module_name not in sys.modules and module_file:
        import importlib.util

        from .fs_loader import FusepyImports

        try:
            found = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            spec = importlib.util.spec_from_file_location(module_name, module_file)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {module_file} as {module_name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            sys.path.insert(0, os.path.dirname(module_file))
            try:
                with FusepyImports():
                    spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
            finally:
                sys.path.remove(os.path.dirname(module_file))
    with open(pickle_path, "rb") as f:
        return pickle.load(f)


class Mount:
    """One file system at one mount point, ready to run commands under."""

    def __init__(self, owner: LdpFuse, spec: str, fs_args: Sequence[str], mountpoint: Path,
                 options: Mapping[str, Any], log_level: str | None, trace: bool,
                 mode: str | None = None) -> None:
        self.owner = owner
        self.spec = spec
        self.fs_args = [os.fspath(a) for a in fs_args]
        self.mountpoint = mountpoint
        self.options = {k: str(v) for k, v in options.items()}
        self.log_level = log_level
        self.trace = trace
        self.mode = mode
        self.log_file = mountpoint.parent / f"{mountpoint.name}.log"

    # a Mount is usable where a path is: m / "f", os.fspath(m), str(m)
    def __fspath__(self) -> str:
        return str(self.mountpoint)

    def __truediv__(self, name: StrPath) -> Path:
        return self.mountpoint / name

    def __str__(self) -> str:
        return str(self.mountpoint)

    @property
    def path(self) -> Path:
        return self.mountpoint

    def prefix(self) -> list[str]:
        """ldpfuse-run's argv for this mount, up to and including '--'."""
        argv = ldpfuse_run_argv() + ["--mountpoint", str(self.mountpoint),
                                     "--log-file", str(self.log_file)]
        for key, value in self.options.items():
            argv += ["-o", f"{key}={value}"]
        if self.log_level:
            argv += ["--log-level", self.log_level]
        if self.trace:
            argv += ["--trace"]
        if self.mode:
            argv += ["--mode", self.mode]
        return argv + [self.spec, *self.fs_args, "--"]

    def run(self, cmd: Sequence[StrPath] | str, **kw: Any) -> subprocess.CompletedProcess:
        """Run ``cmd`` (an argv list, or a string for ``sh -c``) with this mount."""
        return self.owner.run(cmd, self, **kw)

    def python(self, code: str, *args: StrPath, **kw: Any) -> subprocess.CompletedProcess:
        """Run a Python snippet with this mount; ``sys.argv[1]`` is the mount point."""
        return self.run([sys.executable, "-c", textwrap.dedent(code), str(self.mountpoint),
                         *[os.fspath(a) for a in args]], **kw)

    def log(self) -> str:
        """What ldpfuse logged for this mount so far ('' if nothing)."""
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __repr__(self) -> str:
        return f"Mount({self.spec!r} at {str(self.mountpoint)!r})"


class LdpFuse:
    """The ``ldpfuse`` fixture's object: makes mounts and runs commands under them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def spec_of(self, fs: Any) -> tuple[str, list[str]]:
        """(FS spec, extra leading FS arguments) for a spec string, class or instance."""
        if isinstance(fs, (str, os.PathLike)):
            return self._absolute_spec(os.fspath(fs)), []
        if inspect.isclass(fs):
            return f"{self._defining_file(fs)}:{fs.__name__}", []
        cls = type(fs)
        module_file = self._defining_file(cls)
        path = self.workdir / f"fs-{self.count}.pickle"
        try:
            data = pickle.dumps(fs)
        except Exception as e:
            raise TypeError(f"ldpfuse.mount() of a {cls.__name__} instance: it must pickle "
                            f"(each process gets a copy): {type(e).__name__}: {e}") from None
        path.write_bytes(data)
        return "ldpfuse_py.pytest_plugin:load_pickled", [str(path), cls.__module__, module_file]

    @staticmethod
    def _absolute_spec(spec: str) -> str:
        """A file spec relative to the test's working directory (where pytest runs), made
        absolute: the commands run in the fixture's own temporary directory."""
        target, sep, cls = spec.rpartition(":")
        if not sep or not cls.isidentifier():
            target, sep, cls = spec, "", ""
        if target and not os.path.isabs(target) and (target.endswith(".py") or os.sep in target):
            return os.path.abspath(target) + sep + cls
        return spec

    @staticmethod
    def _is_script(spec: str) -> bool:
        from .fs_loader import is_script_spec

        return is_script_spec(spec)

    @staticmethod
    def _defining_file(cls: type) -> str:
        if "." in cls.__qualname__ or "<locals>" in cls.__qualname__:
            raise TypeError(f"ldpfuse.mount(): {cls.__qualname__} must be defined at the top "
                            f"level of a file, so that each process can load it")
        source = inspect.getsourcefile(cls)
        if source is None:
            raise TypeError(f"ldpfuse.mount(): no source file for {cls.__qualname__}")
        return os.path.abspath(source)

    def mount(self, fs: Any, *fs_args: StrPath, mountpoint: StrPath | None = None,
              log_level: str | None = None, trace: bool = False, mode: str | None = None,
              **options: Any) -> Mount:
        """A file system (spec, class or instance) with its arguments; ``options``
        become ``-o key=value``; ``mode="shared"`` serves every process of a command
        from one file system process. The mount point need not and should not exist."""
        spec, lead = self.spec_of(fs)
        self.count += 1
        point = Path(mountpoint) if mountpoint is not None else self.workdir / f"mnt{self.count}"
        # an argument naming an existing path relative to the test's working directory is
        # made absolute, as ldpfuse-run does (the commands run in the fixture's directory)
        args = [os.path.abspath(a) if not os.path.isabs(a) and os.path.exists(a) else a
                for a in map(os.fspath, fs_args)]
        if not args and not lead and self._is_script(spec):
            # a fusepy script alone: it takes its mount point as `script.py MOUNTPOINT`
            # (sys.argv[1]) as under FUSE; the mount is where ldpfuse-run puts it
            args = [str(point.absolute())]
        return Mount(self, spec, [*lead, *args], point.absolute(), options,
                     log_level, trace, mode)

    __call__ = mount

    def run(self, cmd: Sequence[StrPath] | str, *mounts: Mount, input: str | None = None,
            timeout: float = DEFAULT_TIMEOUT, check: bool = False, cwd: StrPath | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``cmd`` with every mount given (nested ldpfuse-run), in its own session;
        on timeout the whole process group is killed and TimeoutExpired raised."""
        if isinstance(cmd, str):
            cmd = ["sh", "-c", cmd]
        argv: list[str] = []
        for m in mounts:
            argv += m.prefix()
        argv += [os.fspath(c) for c in cmd]
        full_env = dict(os.environ if env is None else env)
        if mounts:
            full_env["MOUNT"] = str(mounts[0].mountpoint)
        proc = subprocess.Popen(argv, cwd=cwd or self.workdir, env=full_env, text=True,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
        result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check:
            result.check_returncode()
        return result


# A process that touches a mount of an instance imports this module for load_pickled
# only: it does not pay for importing pytest.
if "pytest" in sys.modules:
    import pytest

    @pytest.fixture
    def ldpfuse(tmp_path: Path) -> LdpFuse:
        """Mount file systems at temporary mount points and run commands under them:
        ``ldpfuse.mount(fs, *args, **options).run(cmd)``; see ldpfuse_py.pytest_plugin."""
        return LdpFuse(tmp_path / "ldpfuse")
