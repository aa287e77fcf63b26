"""A file's page cache outlives its last close while the file is unchanged (issue 24, item
1): reading it again, in a new process, does not call the class's read(); a change through
the mount or behind it (the lower file) is read anew. The shared mode's server keeps them."""

import re
import subprocess

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv


def run(tmp_path, script, env_extra=None):
    lower = tmp_path / "lower"
    log = tmp_path / "trace.log"
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--trace", "--log-file", str(log),
                                 "--mountpoint", str(tmp_path / "mnt"),
                                 LOOPBACK, str(lower), "-o", "passthrough=no", "--", "sh", "-c", script]
    env = base_env(**(env_extra or {}))
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd="/")
    r.stderr += log.read_text() if log.exists() else ""
    return r


def reads(log):
    """The class's read() calls (--trace): made for the program's read, or by the open
    that brought a small file's data along (server/dispatch.c, fill_first_window)."""
    return len(re.findall(r"^ldpfuse\[\d+\] read\(", log, re.M))


@pytest.fixture
def lower(tmp_path):
    d = tmp_path / "lower"
    d.mkdir()
    (d / "f").write_text("first\n")
    return d


def test_an_unchanged_file_is_read_from_the_kept_cache(tmp_path, lower):
    m = tmp_path / "mnt"
    r = run(tmp_path, f"cat {m}/f; cat {m}/f; cat {m}/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\n" * 3
    assert reads(r.stderr) == 1, r.stderr


def test_a_file_changed_behind_the_mount_is_read_anew(tmp_path, lower):
    m = tmp_path / "mnt"
    # the same size, another mtime: only the attributes tell
    r = run(tmp_path, f"cat {m}/f; echo second > {lower}/f; touch -d '2001-01-01' {lower}/f; cat {m}/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\nsecond\n"
    assert reads(r.stderr) == 2, r.stderr


def test_a_file_changed_through_the_mount_is_read_anew(tmp_path, lower):
    m = tmp_path / "mnt"
    r = run(tmp_path, f"cat {m}/f; echo third > {m}/f; cat {m}/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\nthird\n"


def test_keeping_can_be_turned_off(tmp_path, lower):
    m = tmp_path / "mnt"
    r = run(tmp_path, f"cat {m}/f; cat {m}/f", env_extra={"LDPFUSE_CACHE_KEEP_MB": "0"})
    assert r.returncode == 0 and r.stdout == "first\n" * 2, r.stderr
    assert reads(r.stderr) == 2, r.stderr
