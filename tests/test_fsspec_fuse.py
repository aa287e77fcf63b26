"""fsspec's FUSE front end (fsspec.fuse, fusepy style), from PyPI, unmodified.

`ldpfuse-run -m fsspec.fuse URL SOURCE_PATH MOUNTPOINT -- COMMAND`, as its docs
say `python3 -m fsspec.fuse URL SOURCE_PATH MOUNTPOINT`: a local directory and
an fsspec memory file system, used by real programs.
"""

import sys

import pytest

from conftest import LDP_MODE, base_env, ldpfuse_run_argv, run

pytest.importorskip("fsspec", reason="fsspec is not installed (pip install '.[test]')")

TIMEOUT = 90


def fsspec_fuse(ws, *args, cmd, mode=None):
    argv = ldpfuse_run_argv()
    mode = mode or LDP_MODE
    argv += ["--mode", mode]
    argv += ["--log-file", ws.tmp / "ldpfuse.log", "-m", "fsspec.fuse", *args, "--"] + cmd
    return run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env(HOME=ws.home))


READ = r"""
cd "$1"
find . | sort
find . -type f | sort | xargs md5sum
wc -l docs/a.txt
"""


def test_fsspec_local_directory_reads_like_native(ws):
    src = ws.tmp / "src"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "a.txt").write_text("alpha\n" * 100)
    (src / "b.bin").write_bytes(bytes(range(256)) * 300)
    script = ws.write_script("read.sh", READ)
    native = run(["sh", script, src], timeout=60, env=base_env())
    assert native.returncode == 0, native.describe()
    r = fsspec_fuse(ws, "file", str(src), ws.mnt, cmd=["sh", script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == native.stdout, r.describe()


def test_fsspec_memory_file_system_is_written_and_read_by_programs(ws):
    # one memory file system for the whole command: the shared mode
    src = ws.tmp / "nums"
    src.write_text("".join(f"{i}\n" for i in range(5000)))
    r = fsspec_fuse(ws, "memory://", "/", ws.mnt, mode="shared", cmd=[
        "sh", "-c", f"cd {ws.mnt} && mkdir d && echo hi > d/f && cat d/f && "
                    f"cp {src} d/nums && cmp d/nums {src} && echo same && "
                    f"ls d && stat -c '%s %F' d/nums"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == f"hi\nsame\nf\nnums\n{src.stat().st_size} regular file\n", r.describe()


def test_fsspec_memory_file_system_in_one_python_process(ws):
    py = ("import os, sys; m = sys.argv[1]\n"
          "os.mkdir(m + '/d')\n"
          "with open(m + '/d/f', 'wb') as f: f.write(b'x' * 100000)\n"
          "print(os.listdir(m + '/d'), os.path.getsize(m + '/d/f'), open(m + '/d/f', 'rb').read() == b'x' * 100000)\n")
    r = fsspec_fuse(ws, "memory://", "/", ws.mnt, cmd=[sys.executable, "-c", py, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "['f'] 100000 True\n", r.describe()
