"""What a process keeps about passthrough files (issue 24): while it has one open for
writing, only that file's name bypasses its attribute cache (its size moves as the kernel
writes, renames included); and the lower file an open chose is opened again with no round
trip, also right after the file was written and closed, yet never once the name changed."""

import subprocess
import sys

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv
from test_stats import rows


def run_py(tmp_path, script, *args, mode=None, stats=False):
    lower = tmp_path / "lower"
    lower.mkdir(exist_ok=True)
    (tmp_path / "script.py").write_text(script)
    argv = ldpfuse_run_argv()
    if mode:
        argv += ["--mode", mode]
    if stats:
        argv += ["--stats"]
    argv += ["--mountpoint", str(tmp_path / "mnt"), LOOPBACK, str(lower), "--",
             sys.executable, str(tmp_path / "script.py"), str(tmp_path / "mnt"), *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    return r


WRITER = r'''
import os, sys
m = sys.argv[1]
with open(f"{m}/other", "w") as f:
    f.write("x" * 10)
f = open(f"{m}/growing", "wb", buffering=0)
for i in range(20):
    f.write(b"y" * 100)
    if i == 10:
        os.rename(f"{m}/growing", f"{m}/renamed")
    name = "renamed" if i >= 10 else "growing"
    assert os.stat(f"{m}/{name}").st_size == 100 * (i + 1), (i, os.stat(f"{m}/{name}"))
    for _ in range(5):
        assert os.stat(f"{m}/other").st_size == 10
f.close()
assert os.stat(f"{m}/renamed").st_size == 2000
assert not os.path.exists(f"{m}/growing")
print("ok")
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_file_being_written_shows_its_size_under_its_names(tmp_path, mode):
    r = run_py(tmp_path, WRITER, mode=mode)
    assert r.stdout == "ok\n"
    assert (tmp_path / "lower" / "renamed").stat().st_size == 2000


def test_other_names_stay_cached_while_a_file_is_being_written(tmp_path):
    r = run_py(tmp_path, WRITER, mode="shared", stats=True)
    assert r.stdout == "ok\n"
    # the growing file's 20 stats reach the server; the other file's 100 do not (once
    # each attr_timeout at most): before, any writer open turned the cache off
    getattrs = rows(r.stderr).get("getattr", (0,))[0]
    assert getattrs < 20 + 30, r.stderr


REOPEN = r'''
import os, sys
m = sys.argv[1]
for i in range(30):
    with open(f"{m}/log", "ab") as f:
        f.write(b"%d\n" % i)
    with open(f"{m}/log", "rb") as f:
        assert f.read().splitlines()[-1] == b"%d" % i, i
    fd = os.open(f"{m}/log", os.O_RDWR | os.O_CREAT, 0o644)
    assert os.fstat(fd).st_size == len(b"".join(b"%d\n" % j for j in range(i + 1)))
    os.close(fd)
print("ok")
'''


def test_a_file_just_written_is_opened_again_without_a_round_trip(tmp_path):
    r = run_py(tmp_path, REOPEN, mode="shared", stats=True)
    assert r.stdout == "ok\n"
    assert (tmp_path / "lower" / "log").read_bytes() == b"".join(b"%d\n" % i for i in range(30))
    table = rows(r.stderr)
    opens = sum(table.get(op, (0,))[0] for op in ("open", "create/open", "create"))
    # 90 opens of one name in three ways: each way asks the server once, not once per
    # write-and-close (before: one lookup and open each time, about 60)
    assert opens <= 10, r.stderr


RENAMED_OVER = r'''
import os, subprocess, sys
m = sys.argv[1]
for name, text in (("x", "old\n"), ("y", "new\n")):
    with open(f"{m}/{name}", "w") as f:
        f.write(text)
for _ in range(2):      # the second open is a decided one
    with open(f"{m}/x") as f:
        assert f.read() == "old\n"
    fd = os.open(f"{m}/x", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
# another process, through the mount: y over x
subprocess.run(["mv", f"{m}/y", f"{m}/x"], check=True)
with open(f"{m}/x") as f:
    got = f.read()
assert got == "new\n", got
fd = os.open(f"{m}/x", os.O_RDWR | os.O_CREAT, 0o644)
assert os.read(fd, 10) == b"new\n"
os.close(fd)
# and removes it: O_CREAT makes a new, empty one
subprocess.run(["rm", f"{m}/x"], check=True)
fd = os.open(f"{m}/x", os.O_RDWR | os.O_CREAT, 0o644)
assert os.fstat(fd).st_size == 0
os.close(fd)
with open(f"{m}/x") as f:
    assert f.read() == ""
print("ok")
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_decided_open_follows_another_process_renaming_over_the_name(tmp_path, mode):
    r = run_py(tmp_path, RENAMED_OVER, mode=mode)
    assert r.stdout == "ok\n"
    assert (tmp_path / "lower" / "x").read_bytes() == b""
    assert not (tmp_path / "lower" / "y").exists()
