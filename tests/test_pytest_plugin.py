"""The `ldpfuse` pytest fixture: registered through the pytest11 entry point,
usable with no conftest, and running real programs under real mounts."""

import errno
import importlib.metadata
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ldpfuse_py import FuseOSError, Operations

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_TEST = REPO / "examples" / "test_example_fixture.py"
SCRIPTS = Path(__file__).resolve().parent / "fusepy_scripts"


class Counter(Operations):
    """/count holds `start` and each write adds to it (in this process only)."""

    def __init__(self, start=0):
        self.value = int(start)

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == "/count":
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1,
                    "st_size": len(f"{self.value}\n")}
        raise FuseOSError(errno.ENOENT)

    def read(self, path, size, offset, fh):
        return f"{self.value}\n".encode()[offset:offset + size]

    def write(self, path, data, offset, fh):
        self.value = int(data.decode() or 0)
        return len(data)

    def truncate(self, path, length, fh=None):
        pass


class WithLock(Counter):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    eps = importlib.metadata.entry_points(group="pytest11")
    assert any(ep.name == "ldpfuse" and ep.value == "ldpfuse_py.pytest_plugin" for ep in eps), (
        "ldpfuse-py's pytest11 entry point is missing: reinstall the package (pip install .)")


def test_the_documented_example_passes_without_conftest(tmp_path):
    # a directory of its own: no conftest.py on the way, no -p option
    (tmp_path / "test_copy.py").write_text(EXAMPLE_TEST.read_text().replace(
        'EXAMPLES = Path(__file__).resolve().parent', f'EXAMPLES = Path({str(EXAMPLE_TEST.parent)!r})'))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "test_copy.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 passed" in r.stdout, r.stdout


def test_docs_testing_first_example_passes_run_from_the_repository(tmp_path):
    """docs/testing.md's first example, as written (a spec relative to where pytest
    runs), in a test file of its own run from the repository's root."""
    doc = (REPO / "docs" / "testing.md").read_text()
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'ldpfuse.mount("examples/loopback.py:Loopback", lower)' in example
    test_file = tmp_path / "test_doc_example.py"
    test_file.write_text(example)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), str(test_file)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout, r.stdout


def test_an_instance_starts_from_its_state_and_changes_stay_in_the_process(ldpfuse):
    fs = Counter(41)
    m = ldpfuse.mount(fs)
    r = m.python("""
        import sys
        p = sys.argv[1] + '/count'
        before = open(p).read().strip()
        with open(p, 'w') as f:
            f.write('7')
        print(before, open(p).read().strip())
    """)
    assert r.returncode == 0, r.stderr + m.log()
    assert r.stdout == "41 7\n"
    assert fs.value == 41  # the test's object is not the one the command changed
    # each command is a new process: it starts again from the pickled state
    assert m.run(["cat", m / "count"]).stdout == "41\n"


def test_a_class_and_its_arguments(ldpfuse):
    m = ldpfuse.mount(Counter, "5")
    assert m.run(["cat", m / "count"], check=True).stdout == "5\n"
    assert m.run(f"cat {m}/count").stdout == "5\n"  # a string runs under sh -c


def test_check_raises_called_process_error_with_the_output(ldpfuse):
    m = ldpfuse.mount(Counter)
    with pytest.raises(subprocess.CalledProcessError) as e:
        m.run(["cat", m / "nope"], check=True)
    assert "No such file or directory" in e.value.stderr


def test_two_mounts_in_one_command(ldpfuse, tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "f").write_text("from loopback\n")
    a = ldpfuse.mount(Counter, "3")
    b = ldpfuse.mount(f"{REPO / 'examples' / 'loopback.py'}:Loopback", lower)
    r = ldpfuse.run(["sh", "-c", f"cat {a}/count {b}/f; echo $MOUNT"], a, b)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"3\nfrom loopback\n{a}\n"


def test_a_fusepy_script_through_the_fixture(ldpfuse):
    m = ldpfuse.mount(SCRIPTS / "mfusepy_style.py", "ignored-mountpoint")
    r = m.run(["cat", m / "a.txt"])
    assert r.stdout == "alpha\n", r.stderr


def test_a_fusepy_script_alone_gets_the_mount_point_as_its_argument(ldpfuse):
    """fusepy's scripts take `script.py MOUNTPOINT` (sys.argv[1]): mount("script.py") with no
    argument failed with an IndexError in the script (issue 35, item 5)."""
    m = ldpfuse.mount(SCRIPTS / "memory.py")
    r = m.run(["sh", "-c", f'echo hi > {m}/f && cat {m}/f && ls {m}'])
    assert (r.returncode, r.stdout) == (0, "hi\nf\n"), r.stderr + m.log()


def test_what_cannot_be_mounted_says_why(ldpfuse):
    with pytest.raises(TypeError, match="must pickle"):
        ldpfuse.mount(WithLock())

    class Local(Operations):
        pass

    with pytest.raises(TypeError, match="top level"):
        ldpfuse.mount(Local)


def test_options_and_log_level(ldpfuse, tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "f").write_bytes(b"x" * 100)
    m = ldpfuse.mount(f"{REPO / 'examples' / 'loopback.py'}:Loopback", lower,
                      passthrough="no", trace=True)
    r = m.run(["cat", m / "f"])
    assert r.stdout == "x" * 100
    log = m.log()
    # passthrough=no: the data went through read()
    assert "read('/f', " in log, log
    assert os.fspath(m) == str(m.path)


def test_shared_mode_mount_is_one_file_system_for_the_whole_command(ldpfuse):
    m = ldpfuse.mount(f"{REPO / 'examples' / 'memory.py'}:Memory", mode="shared")
    r = m.run(f"mkdir {m}/d && echo kept > {m}/d/f && cat {m}/d/f")
    assert r.returncode == 0 and r.stdout == "kept\n", r.stderr + m.log()
