"""A program that is a CPython of another minor version cannot host the file system's
interpreter (issue 2, item 6; issue 4, item 6; issue 11): in the embedded mode the
launcher serves it instead, and the log says why at info level, once; in the shared mode
it needs no interpreter at all. Both work, never a crash.
No second CPython minor version is installed here, so the host is a C program that exports
Py_IsInitialized/Py_GetVersion the way a 3.12 interpreter does (Debian's own 3.11, another
build of the same minor version, runs in tests/test_embedded_fallback.py)."""

import subprocess

import pytest

from conftest import MEMORY, base_env, build_program, ldpfuse_run_argv


@pytest.fixture(scope="module")
def fake_host(tmp_path_factory):
    return build_program(tmp_path_factory, "fake_python_host", flags=("-rdynamic",))


def run(tmp_path, exe, mode, *options):
    m = tmp_path / "mnt"
    argv = ldpfuse_run_argv() + ["--mode", mode, *options, "--mountpoint", str(m), MEMORY, "--", str(exe), str(m)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env())


def test_python_host_of_another_version_is_served_by_the_launcher_in_embedded_mode(tmp_path, fake_host):
    r = run(tmp_path, fake_host, "embedded", "--log-level", "info")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    lines = [l for l in r.stderr.splitlines() if "Python 3.12.1" in l]
    assert len(lines) == 1, r.stderr
    assert "served by the launcher" in lines[0]


def test_python_host_of_another_version_says_nothing_at_the_default_log_level(tmp_path, fake_host):
    r = run(tmp_path, fake_host, "embedded")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert r.stderr == ""


def test_python_host_of_another_version_works_in_shared_mode(tmp_path, fake_host):
    r = run(tmp_path, fake_host, "shared")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert r.stderr == ""
