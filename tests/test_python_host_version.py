"""A program that is a CPython of another minor version cannot host the file system's
interpreter (issue 2, item 6; issue 4, item 6): it gets one clear log line naming the way
out and EIO, never a crash; in the shared mode it needs no interpreter and works.
No second CPython is installed here, so the host is a C program that exports
Py_IsInitialized/Py_GetVersion the way a 3.12 interpreter does."""

import subprocess

import pytest

from conftest import MEMORY, base_env, ldpfuse_run_argv, need, run_native
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "programs" / "fake_python_host.c"


@pytest.fixture(scope="module")
def fake_host(tmp_path_factory):
    need("gcc")
    exe = tmp_path_factory.mktemp("bin") / "fake_python_host"
    r = run_native(["gcc", "-rdynamic", "-o", exe, SOURCE])
    assert r.returncode == 0, r.describe()
    return exe


def run(tmp_path, exe, mode):
    m = tmp_path / "mnt"
    argv = ldpfuse_run_argv() + ["--mode", mode, "--mountpoint", str(m), MEMORY, "--", str(exe), str(m)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env())


def test_python_host_of_another_version_gets_eio_and_one_clear_line(tmp_path, fake_host):
    r = run(tmp_path, fake_host, "embedded")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "EIO\n"
    lines = [l for l in r.stderr.splitlines() if "Python 3.12.1" in l]
    assert len(lines) == 1, r.stderr
    assert "--mode shared" in lines[0]


def test_python_host_of_another_version_works_in_shared_mode(tmp_path, fake_host):
    r = run(tmp_path, fake_host, "shared")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert r.stderr == ""
