"""--trace: one log line per file system operation (pid, operation, path,
arguments, result or errno name, microseconds); --log-level debug: the lines
of LoggingMixIn reach the log. Both checked with real programs."""

import errno
import os
import re
import sys

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv, need, run
from ldpfuse_py import FuseOSError, Operations, Passthrough
from ldpfuse_py.trace import TracedOps, format_call, format_result, open_flags

TIMEOUT = 90
LINE = re.compile(r"^ldpfuse\[(\d+)\] (\w+)\((.*)\) = (.*)  (\d+)us$")


def ldp(ws, *options, cmd, fs=LOOPBACK, fs_args=None):
    if fs == LOOPBACK:
        options += ("-o", "backing=no")     # the class's calls are what is traced
    argv = ldpfuse_run_argv() + ["--mountpoint", str(ws.mnt)] + [str(o) for o in options]
    argv += [fs] + [str(a) for a in (fs_args if fs_args is not None else [ws.lower])]
    argv += ["--"] + [str(c) for c in cmd]
    return run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env())


def trace_lines(text):
    return [m.groups() for m in map(LINE.match, text.splitlines()) if m]


def test_trace_logs_each_operation_with_pid_result_errno_and_time(ws):
    (ws.lower / "f").write_text("traced\n")
    log = ws.tmp / "trace.log"
    r = ldp(ws, "--trace", "--log-file", log, cmd=[
        sys.executable, "-c",
        "import os, sys; M = sys.argv[1]\n"
        "print(os.getpid())\n"
        "print(open(M + '/f').read(), end='')\n"
        "try:\n    os.stat(M + '/missing')\nexcept FileNotFoundError:\n    print('missing')\n"
        "os.mkdir(M + '/d')\n", ws.mnt])
    assert r.returncode == 0, r.describe()
    pid, out, missing = r.stdout.splitlines()
    assert (out, missing) == ("traced", "missing")
    lines = trace_lines(log.read_text())
    assert lines, log.read_text()
    ours = [line for line in lines if line[0] == pid]
    calls = {(op, args.split(",")[0]): result for _, op, args, result, _ in ours}
    assert calls[("getattr", "'/missing'")] == "ENOENT"
    assert ("open", "'/f'") in calls
    assert "O_RDONLY" in [args for _, op, args, _, _ in ours if op == "open"][0]
    assert calls[("mkdir", "'/d'")] == "0"
    assert all(int(us) >= 0 for *_, us in ours)
    assert (ws.lower / "d").is_dir()


def test_trace_goes_to_stderr_without_log_file(ws):
    (ws.lower / "f").write_text("x\n")
    r = ldp(ws, "--trace", cmd=["cat", ws.mnt / "f", ws.mnt / "nope"])
    assert r.returncode == 1, r.describe()
    assert r.stdout == "x\n"
    ops = {(op, args.split(",")[0], res) for _, op, args, res, _ in trace_lines(r.stderr)}
    assert ("getattr", "'/nope'", "ENOENT") in ops, r.stderr


def test_without_trace_nothing_is_logged(ws):
    (ws.lower / "f").write_text("x\n")
    log = ws.tmp / "quiet.log"
    r = ldp(ws, "--log-file", log, cmd=["cat", ws.mnt / "f"])
    assert r.returncode == 0 and r.stdout == "x\n", r.describe()
    assert not log.exists() or trace_lines(log.read_text()) == []


LOGGED_FS = """
import errno, os
from stat import S_IFDIR, S_IFREG
from ldpfuse_py import FuseOSError, LoggingMixIn, Operations

class Logged(LoggingMixIn, Operations):
    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=S_IFDIR | 0o755, st_nlink=2)
        if path == '/f':
            return dict(st_mode=S_IFREG | 0o644, st_nlink=1, st_size=3)
        raise FuseOSError(errno.ENOENT)

    def read(self, path, size, offset, fh):
        return b'abc'[offset:offset + size]
"""


@pytest.mark.parametrize("program", ["cat", "python"])
def test_log_level_debug_shows_logging_mixin_lines(ws, program):
    fs = ws.write_script("logged.py", LOGGED_FS)
    log = ws.tmp / "debug.log"
    cmd = (["cat", ws.mnt / "f"] if program == "cat" else
           [sys.executable, "-c", "import sys; print(open(sys.argv[1]).read())", ws.mnt / "f"])
    r = ldp(ws, "--log-level", "debug", "--log-file", log, cmd=cmd,
            fs=f"{fs}:Logged", fs_args=[])
    assert r.returncode == 0 and r.stdout.strip() == "abc", r.describe()
    text = log.read_text()
    assert re.search(r"fuse\.log-mixin DEBUG: -> getattr /f", text), text
    assert re.search(r"fuse\.log-mixin DEBUG: <- read b'abc'", text), text


def test_logging_mixin_is_silent_by_default(ws):
    fs = ws.write_script("logged.py", LOGGED_FS)
    log = ws.tmp / "default.log"
    r = ldp(ws, "--log-file", log, cmd=["cat", ws.mnt / "f"], fs=f"{fs}:Logged", fs_args=[])
    assert r.returncode == 0 and r.stdout == "abc", r.describe()
    assert not log.exists() or "log-mixin" not in log.read_text()


# ---- the proxy itself, called directly

class Answers(Operations):
    def getattr(self, path, fh=None):
        if path == "/boom":
            raise ValueError("not an OSError")
        raise FuseOSError(errno.EACCES)

    def open(self, path, flags):
        return Passthrough(7, 3) if path == "/p" else 5

    def readdir(self, path, fh):
        yield from [".", "..", "x"]


def test_traced_ops_passes_results_and_exceptions_through_unchanged():
    lines = []
    ops = TracedOps(Answers(), write=lines.append)
    assert ops("open", "/a", os.O_WRONLY | os.O_CREAT) == 5
    assert isinstance(ops("open", "/p", os.O_RDONLY), Passthrough)
    assert ops("readdir", "/", 0) == [".", "..", "x"]
    with pytest.raises(FuseOSError) as e:
        ops("getattr", "/x")
    assert e.value.errno == errno.EACCES
    with pytest.raises(ValueError):
        ops("getattr", "/boom")
    results = [LINE.match(line).group(4) for line in lines]
    assert results == ["5", "Passthrough(fd=7)", "[3 entries]", "EACCES",
                       "EIO (ValueError: 'not an OSError')"]
    assert "O_WRONLY|O_CREAT" in lines[0]


def test_format_helpers():
    assert open_flags(os.O_RDWR | os.O_APPEND | os.O_CLOEXEC) == "O_RDWR|O_APPEND|O_CLOEXEC"
    assert format_call("write", "/f", (b"x" * 10, 4, 2)) == "write('/f', <10 bytes>, 4, fh=2)"
    assert format_result(-errno.ENOENT) == "ENOENT"
    assert format_result({"st_mode": 0o100644, "st_size": 3}) == "{st_mode=0o100644, st_size=3}"
    assert format_result(b"abc") == "<3 bytes>"


# ---- the launcher says when the command cannot see the mount (docs/limitations.md)

def test_launcher_warns_when_the_command_is_statically_linked(ws):
    need("ldd")
    program = None
    for candidate in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "/bin/busybox"):
        if os.path.exists(candidate):
            probe = run(["ldd", candidate], timeout=TIMEOUT, env=base_env())
            if "not a dynamic executable" in probe.stdout + probe.stderr or \
                    "statically linked" in probe.stdout + probe.stderr:
                program = candidate
                break
    if program is None:
        pytest.skip("no statically linked program found on this system (ldd says so of none)")
    r = ldp(ws, "--no-supervise", cmd=[program, "--help"])     # supervised, it sees the mount
    warnings = [line for line in r.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1, r.describe()
    assert "statically linked" in warnings[0] and str(ws.mnt) in warnings[0]


def test_launcher_warns_for_a_set_user_id_program_of_another_user(ws):
    if os.geteuid() != 0:
        pytest.skip("making a set-user-ID program owned by another user needs root")
    import shutil
    prog = ws.tmp / "suid-true"
    shutil.copy2(shutil.which("true"), prog)
    os.chown(prog, 65534, 65534)
    prog.chmod(0o4755)
    r = ldp(ws, cmd=[prog])
    assert r.returncode == 0, r.describe()
    assert "set-user-ID" in r.stderr and "warning:" in r.stderr, r.describe()


def test_launcher_says_nothing_for_an_ordinary_program(ws):
    (ws.lower / "f").write_text("x\n")
    r = ldp(ws, cmd=["cat", ws.mnt / "f"])
    assert r.returncode == 0 and r.stdout == "x\n" and r.stderr == "", r.describe()


def test_a_process_opening_a_file_again_asks_the_file_system_at_most_twice(ws):
    """The default mode keeps a passthrough open's decision (the lower file it chose)
    for attr_timeout, so a process that opens the same file again opens it itself. Its
    first open is answered before the process has the table of change counters, so that
    answer is not kept (and the server does not name the lower file for it); the second
    is, and the rest need no round trip."""
    (ws.lower / "f").write_text("again\n")
    r = ldp(ws, "--trace", cmd=["cat", ws.mnt / "f", ws.mnt / "f", ws.mnt / "f", ws.mnt / "f", ws.mnt / "f"])
    assert r.returncode == 0 and r.stdout == "again\n" * 5, r.describe()
    opens = [args for _, op, args, res, _ in trace_lines(r.stderr) if op == "open" and args.startswith("'/f'")]
    assert len(opens) == 2, r.stderr
