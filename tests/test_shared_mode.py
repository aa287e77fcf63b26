"""--mode shared (issue 6): one file system process serves every process of the
command tree. The rest of the suite also runs in this mode (LDPFUSE_TEST_MODE=shared,
see .ci/run); these tests pin what only the shared mode does."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import LOOPBACK, MEMORY, base_env, ldpfuse_run_argv


def shared(tmp_path, fs, *fs_args, cmd, timeout=60, **kw):
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--mountpoint", str(tmp_path / "mnt"),
                                 fs, *map(str, fs_args), "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), **kw)


def test_memory_state_is_shared_by_every_process_of_the_command(tmp_path):
    m = tmp_path / "mnt"
    r = shared(tmp_path, MEMORY, cmd=["sh", "-c", f"""
        echo hi > {m}/a
        cat {m}/a
        mkdir {m}/d && (cd {m}/d && echo nested > f)
        sh -c 'cat {m}/d/f; ls {m}'
        {sys.executable} -c 'import os; print(sorted(os.listdir("{m}")))'
    """])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hi\nnested\na\nd\n['a', 'd']\n"


def test_exit_status_is_the_commands(tmp_path):
    assert shared(tmp_path, MEMORY, cmd=["sh", "-c", "exit 3"]).returncode == 3
    r = shared(tmp_path, MEMORY, cmd=["sh", "-c", "kill -TERM $$"])
    assert r.returncode == -signal.SIGTERM


def test_server_waits_for_descendants_that_outlive_the_command(tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    m = tmp_path / "mnt"
    r = shared(tmp_path, LOOPBACK, lower,
               cmd=["sh", "-c", f"(sleep 1; echo late > {m}/late) > /dev/null 2>&1 & exit 0"])
    assert r.returncode == 0, r.stderr
    # the launcher returned only after the background writer was done, through the mount
    assert (lower / "late").read_text() == "late\n"


def test_clients_get_eio_at_once_when_the_server_dies(tmp_path):
    m = tmp_path / "mnt"
    script = f"""
        echo before > {m}/a && cat {m}/a
        kill -KILL $PPID
        sleep 0.2
        if cat {m}/a 2> {tmp_path}/err; then echo "read after death"; fi
        mv {tmp_path}/err {tmp_path}/err.txt
    """
    start = time.monotonic()
    proc = subprocess.Popen(ldpfuse_run_argv() + ["--mode", "shared", "--mountpoint", str(m),
                                                  MEMORY, "--", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=base_env())
    out, _ = proc.communicate(timeout=60)
    # the launcher (the server) was killed: that is the status the caller sees
    assert proc.returncode == -signal.SIGKILL
    assert out.startswith("before\n")
    deadline = time.monotonic() + 30
    while not (tmp_path / "err.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "Input/output error" in (tmp_path / "err.txt").read_text()
    assert time.monotonic() - start < 30


def test_passthrough_files_arrive_as_lower_fds(tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "f").write_text("lower bytes\n")
    m = tmp_path / "mnt"
    # the fd the program holds is the lower file itself (the server passed it over)
    r = shared(tmp_path, LOOPBACK, lower, cmd=[sys.executable, "-c", f"""
import os
fd = os.open("{m}/f", os.O_RDONLY)
print(os.readlink(f"/proc/self/fd/{{fd}}"), os.read(fd, 100).decode(), end="")
"""])
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{lower}/f lower bytes\n"


def test_fuse_get_context_names_the_calling_process(tmp_path):
    fs = tmp_path / "ctx.py"
    fs.write_text(
        "import errno, stat\n"
        "from ldpfuse_py import Operations, FuseOSError, fuse_get_context\n"
        "class Ctx(Operations):\n"
        "    def getattr(self, path, fh=None):\n"
        "        if path == '/':\n"
        "            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)\n"
        "        if path == '/pid':\n"
        "            return dict(st_mode=stat.S_IFREG | 0o444, st_size=fuse_get_context()[2])\n"
        "        raise FuseOSError(errno.ENOENT)\n")
    m = tmp_path / "mnt"
    r = shared(tmp_path, f"{fs}:Ctx", cmd=[sys.executable, "-c",
               f"import os; print(os.getpid() == os.stat('{m}/pid').st_size)"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True\n"


def test_no_process_is_left_behind(tmp_path):
    r = shared(tmp_path, MEMORY, cmd=["sh", "-c", "echo $PPID"])
    assert r.returncode == 0, r.stderr
    server = int(r.stdout)
    with pytest.raises(ProcessLookupError):
        os.kill(server, 0)


COUNTED = '''
import os
from ldpfuse_py import Operations


class Counted(Operations):
    """Writes a line to LOG each time an instance is built, and serves one file."""

    def __init__(self, log):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": 0o40755, "st_nlink": 2}
        if path == "/f":
            return {"st_mode": 0o100644, "st_nlink": 1, "st_size": 3}
        raise OSError(2, "")

    def read(self, path, size, offset, fh):
        return b"hi\\n"[offset:offset + size]
'''


def test_the_launcher_builds_the_class_once(tmp_path):
    # ldpfuse-run builds the instance to check the class before the command starts, and
    # the server serves with that one: an archive or a store is not indexed twice
    fs = tmp_path / "counted.py"
    fs.write_text(COUNTED)
    log = tmp_path / "built"
    r = shared(tmp_path, f"{fs}:Counted", log, cmd=["cat", str(tmp_path / "mnt" / "f")])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hi\n"
    assert len(log.read_text().split()) == 1, log.read_text()
