"""A process that holds or keeps a file's page cache and opens the name again (vfs/pagecache.c,
pcache_open and pcache_local): the new open reads the file as it is now when it changed behind
the mount (its attributes are no longer those the cache was filled against, and no change
through the mount explains them), while the holders keep theirs, as kernel FUSE's open drops a
page cache whose file changed. Unchanged, the cache is used again; for a class that keeps
Operations' open and release, in the default mode, with no request at all.

The opens are the shell's own redirections (`read x < f`): one process holds fd 3 (or kept
the cache at its close) and opens the name again."""

import subprocess

import pytest

from conftest import LDP_MODE, LOOPBACK, base_env, ldpfuse_run_argv
from test_stats import rows

# A class that keeps Operations' open and release: its files are a lower directory's, read
# at each call (its state lives outside the mount, and changes behind it).
LOWER_FS = '''
import os
from ldpfuse_py import FuseOSError, Operations

class Lower(Operations):
    def __init__(self, root):
        self.root = root

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self.root + path)
        except OSError as e:
            raise FuseOSError(e.errno)
        return dict(st_mode=st.st_mode, st_size=st.st_size, st_nlink=st.st_nlink, st_ino=st.st_ino,
                    st_uid=st.st_uid, st_gid=st.st_gid, st_mtime=st.st_mtime_ns / 1e9)

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self.root + path)

    def read(self, path, size, offset, fh):
        with open(self.root + path, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def write(self, path, data, offset, fh):
        with open(self.root + path, "r+b") as f:
            f.seek(offset)
            return f.write(data)

    def truncate(self, path, length, fh=None):
        os.truncate(self.root + path, length)
'''


def run(tmp_path, script, fs="loopback", options=(), mode=None, flags=()):
    lower = tmp_path / "lower"
    if fs == "loopback":
        spec = [LOOPBACK, str(lower), "-o", "passthrough=no"]
    else:
        (tmp_path / "lowerfs.py").write_text(LOWER_FS)
        spec = [f"{tmp_path / 'lowerfs.py'}:Lower", str(lower)]
    mode = mode or LDP_MODE
    argv = ldpfuse_run_argv() + ["--mode", mode, *flags, "--mountpoint", str(tmp_path / "mnt")]
    for o in options:
        argv += ["-o", o]
    argv += spec + ["--", "sh", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")


@pytest.fixture
def lower(tmp_path):
    d = tmp_path / "lower"
    d.mkdir()
    (d / "f").write_text("first\n")
    return d


# the attributes the second open finds: asked at once (attr_timeout=0), or after the
# attribute cache's answer ran out (1 s)
FRESH = [pytest.param(["attr_timeout=0"], "", id="attr_timeout=0"),
         pytest.param([], "sleep 1.3; ", id="after-attr_timeout")]


@pytest.mark.parametrize("fs", ["loopback", "lower"])
@pytest.mark.parametrize("options, wait", FRESH)
def test_an_open_of_a_held_file_changed_behind_the_mount_reads_it_anew(tmp_path, lower, fs, options, wait):
    """The shell holds fd 3 of f (its page cache), the lower file is rewritten natively (the
    shell's own echo, outside the mount), and the shell opens f again. At 0997b38 the new
    open reused the held cache and read 'first'."""
    m = tmp_path / "mnt"
    r = run(tmp_path, f"exec 3< {m}/f; read a <&3; echo second > {lower}/f; touch -d 2001-01-01 {lower}/f; "
                      f"{wait}read b < {m}/f; echo \"$a $b\"", fs=fs, options=options)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first second\n", r.stderr


@pytest.mark.parametrize("fs", ["loopback", "lower"])
@pytest.mark.parametrize("options, wait", FRESH)
def test_a_reopen_after_the_last_close_of_a_file_changed_behind_the_mount_reads_it_anew(
        tmp_path, lower, fs, options, wait):
    """The shell opened, read and closed f (the default mode keeps the cache of the class that
    keeps Operations' open past the close; the server keeps the loopback's), then the file
    changed behind the mount: the next open reads it anew."""
    m = tmp_path / "mnt"
    r = run(tmp_path, f"read a < {m}/f; echo second > {lower}/f; touch -d 2001-01-01 {lower}/f; "
                      f"{wait}read b < {m}/f; echo \"$a $b\"", fs=fs, options=options)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first second\n", r.stderr


@pytest.mark.parametrize("fs", ["loopback", "lower"])
def test_a_reopen_after_a_change_through_the_mount_reads_it(tmp_path, lower, fs):
    """Another process writes f through the mount between two opens of the shell's."""
    m = tmp_path / "mnt"
    r = run(tmp_path, f"read a < {m}/f; sh -c 'echo third > {m}/f'; read b < {m}/f; "
                      f"exec 3< {m}/f; read c <&3; sh -c 'echo fourth > {m}/f'; read d < {m}/f; "
                      f"echo \"$a $b $c $d\"", fs=fs)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first third third fourth\n", r.stderr
    assert (lower / "f").read_text() == "fourth\n"


def test_reopens_of_an_unchanged_file_ask_nothing(tmp_path, lower):
    """The default mode, a class that keeps Operations' open and release: the process's
    first open of f asks the server, the next ones (its cache kept past each close, the file
    unchanged) ask nothing, and their closes say nothing."""
    m = tmp_path / "mnt"
    log = tmp_path / "log"
    r = run(tmp_path, f"for i in 1 2 3 4 5 6 7 8 9 10; do read a < {m}/f; echo $a; done", fs="lower",
            mode="shared", flags=["--stats", "--log-file", str(log)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\n" * 10, r.stderr
    table = rows(log.read_text())
    opens = sum(table[k][0] for k in ("open", "create/open") if k in table)
    # the first open (a lookup and open in one), and at most one more: the process's first
    # request has no table of changes yet, so that cache is not kept
    assert opens <= 2, table
    assert table.get("release", (0,))[0] <= 2, table


def test_a_class_that_defines_open_is_asked_at_each_open(tmp_path, lower):
    """The loopback defines open and release: each open reaches them (its cache is still
    used again, with no hand-over)."""
    m = tmp_path / "mnt"
    log = tmp_path / "log"
    r = run(tmp_path, f"for i in 1 2 3 4 5 6 7 8 9 10; do read a < {m}/f; echo $a; done",
            mode="shared", flags=["--stats", "--log-file", str(log)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\n" * 10, r.stderr
    table = rows(log.read_text())
    assert sum(table[k][0] for k in ("open", "create/open") if k in table) == 10, table
