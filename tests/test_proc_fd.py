"""Each open of a served file is a new open file description of its page cache, opened by
the name "N" in a dirfd of /proc/self/fd the preload keeps (vfs/proc_fd.c). That dirfd is
the preload's, not the program's: a program that closes it, dup2s another directory onto
its number or closes every fd still reads each file's own bytes (not a file named N in
that directory), and a forked child's opens are of its own fds, not its parent's (the
dirfd names one process's /proc/PID/fd)."""

import io
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import EXAMPLES, LDP_MODE, run_ldp

ARCHIVE = f"{EXAMPLES / 'archive.py'}:Archive"


def make_tar(path, files):
    with tarfile.open(path, "w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


TAKEN = """
import fcntl, os, sys
m, decoy, how = sys.argv[1:]
def kept_dir():
    for f in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + f) == "/proc/%d/fd" % os.getpid():
                return int(f)
        except OSError:
            pass
out = [open(m + "/a").read()]
n = kept_dir()
assert n is not None, "no kept /proc/self/fd dirfd"
for i in range(n + 64):
    with open("%s/%d" % (decoy, i), "w") as f:
        f.write("decoy")
d = os.open(decoy, os.O_RDONLY | os.O_DIRECTORY)
if how == "close":
    os.close(n)
    assert fcntl.fcntl(d, fcntl.F_DUPFD, n) == n
elif how == "dup2":
    os.dup2(d, n)
else:
    os.closerange(3, 1 << 20)
    d = os.open(decoy, os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(d, n)
out.append(open(m + "/b").read())
out.append(open(m + "/a").read())
print(" ".join(out))
"""


@pytest.mark.parametrize("how", ["close", "dup2", "closerange"])
def test_the_program_taking_the_kept_dirfd_number_reads_the_files_own_bytes(tmp_path, how):
    if how == "closerange" and LDP_MODE == "embedded":
        pytest.skip("the embedded mode's class lives in the program: closing every fd closes "
                    "the archive it reads")
    tar = tmp_path / "t.tar"
    make_tar(tar, {"a": b"A-bytes", "b": b"B-bytes"})
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    mnt = tmp_path / "mnt"
    r = run_ldp(ARCHIVE, [tar], [sys.executable, "-c", TAKEN, mnt, decoy, how], mnt)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["A-bytes", "B-bytes", "A-bytes"]


FORKED = """
import os, sys
m = sys.argv[1]
fa = open(m + "/a")
pid = os.fork()
if pid == 0:
    fa.close()          # the child's number of a's cache is free: b's may take it
    print("child", open(m + "/b").read(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", fa.read())
"""


def test_a_forked_child_opens_its_own_caches_not_its_parents(tmp_path):
    tar = tmp_path / "t.tar"
    make_tar(tar, {"a": b"A-bytes", "b": b"B-bytes"})
    mnt = tmp_path / "mnt"
    r = run_ldp(ARCHIVE, [tar], [sys.executable, "-c", FORKED, mnt], mnt)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["child B-bytes", "parent A-bytes"]
