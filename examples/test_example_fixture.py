# How to test a file system with the `ldpfuse` pytest fixture.
#
# Installing ldpfuse-py registers the fixture (pytest11 entry point): no
# conftest.py, no plugin line. Run these tests with
#
#   python3 -m pytest examples/test_example_fixture.py
#
# `ldpfuse.mount(fs, *args, **options)` takes what ldpfuse-run takes (a
# "file.py:Class" spec, a fusepy script) or a class or an instance defined at
# the top level of a file (like Greeting below), and returns a Mount at a
# fresh mount point. `mount.run(cmd)` runs a real program with the file system
# mounted and returns a subprocess.CompletedProcess; `mount.python(code)` runs a
# Python snippet there (the mount point is sys.argv[1]).

import errno
import hashlib
import os
import stat
import sys
from pathlib import Path

from ldpfuse_py import FuseOSError, Operations

EXAMPLES = Path(__file__).resolve().parent


class Greeting(Operations):
    """One read-only file, /greeting, whose text is given to the constructor."""

    def __init__(self, text="hello"):
        self.data = (text + "\n").encode()

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == "/greeting":
            return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": len(self.data)}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "greeting"]

    def read(self, path, size, offset, fh):
        return self.data[offset:offset + size]


def test_a_class_with_arguments(ldpfuse):
    m = ldpfuse.mount(Greeting, "bonjour")
    r = m.run(["cat", m / "greeting"])
    assert r.returncode == 0
    assert r.stdout == "bonjour\n"


def test_an_instance_is_copied_into_each_process(ldpfuse):
    m = ldpfuse.mount(Greeting("from an instance"))
    r = m.run(f"ls {m} && wc -c < {m}/greeting")
    assert r.stdout.split() == ["greeting", str(len("from an instance\n"))]


def test_errors_reach_the_program(ldpfuse):
    m = ldpfuse.mount(Greeting)
    r = m.run(["cat", m / "missing"])
    assert r.returncode == 1
    assert "No such file or directory" in r.stderr
    r = m.python("""
        import errno, sys
        try:
            open(sys.argv[1] + '/greeting', 'w')
        except OSError as e:
            print(errno.errorcode[e.errno])
    """)
    assert r.stdout == "EROFS\n"  # Operations.create's default


def test_loopback_example_with_a_spec(ldpfuse, tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    payload = os.urandom(100_000)
    (lower / "data.bin").write_bytes(payload)
    m = ldpfuse.mount(f"{EXAMPLES / 'loopback.py'}:Loopback", lower)
    r = m.run(["sha256sum", m / "data.bin"], check=True)
    assert r.stdout.split()[0] == hashlib.sha256(payload).hexdigest()
    m.run(["cp", m / "data.bin", m / "copy.bin"], check=True)
    assert (lower / "copy.bin").read_bytes() == payload


def test_memory_example_in_one_python_process(ldpfuse):
    # the memory example keeps its tree in the process: one process, one tree
    m = ldpfuse.mount(f"{EXAMPLES / 'memory.py'}:Memory")
    r = m.python("""
        import os, sys
        M = sys.argv[1]
        os.makedirs(M + '/a/b')
        with open(M + '/a/b/f', 'w') as f:
            f.write('in memory')
        print(sorted(os.listdir(M + '/a/b')), open(M + '/a/b/f').read())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "['f'] in memory\n"


def test_trace_and_log(ldpfuse):
    m = ldpfuse.mount(Greeting, trace=True)
    m.run([sys.executable, "-c", "import os, sys; os.stat(sys.argv[1] + '/nope')", m])
    assert "getattr('/nope') = ENOENT" in m.log()
