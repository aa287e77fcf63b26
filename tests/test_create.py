"""open(O_CREAT) of a name the process knows nothing about is one request in the shared
mode (the server looks the name up, then creates or opens it: backend.h create_open).
Every answer must still be the kernel's: existing files opened (not emptied), O_EXCL,
symlinks (dangling ones create their target), directories, a missing or non-directory
parent, a symlinked parent, permissions."""

import os

import pytest

from conftest import LOOPBACK, MEMORY

CASES = r"""
import errno, os, stat
d = os.environ["D"]

def try_open(name, flags, mode=0o644):
    try:
        fd = os.open(f"{d}/{name}", flags, mode)
    except OSError as e:
        return errno.errorcode[e.errno]
    data = os.read(fd, 100) if flags & os.O_ACCMODE != os.O_WRONLY else b"-"
    os.close(fd)
    return data

W, C, X, T = os.O_WRONLY, os.O_CREAT, os.O_EXCL, os.O_TRUNC
print("new", try_open("n1", W | C), os.stat(f"{d}/n1").st_size)
print("new excl", try_open("n2", W | C | X), stat.filemode(os.stat(f"{d}/n2").st_mode))
print("existing kept", try_open("f", os.O_RDWR | C))
print("existing excl", try_open("f", W | C | X))
print("existing trunc", try_open("g", W | C | T), os.stat(f"{d}/g").st_size)
print("dir", try_open("dir", W | C), try_open("dir", os.O_RDONLY | C))
print("dir excl", try_open("dir", W | C | X))
print("in missing dir", try_open("nodir/x", W | C))
print("under a file", try_open("f/x", W | C))
print("through dir link", try_open("dirlink/y", W | C), os.path.exists(f"{d}/dir/y"))
print("file link", try_open("link", os.O_RDWR | C))
print("file link excl", try_open("link", W | C | X))
print("file link nofollow", try_open("link", W | C | os.O_NOFOLLOW))
print("dangling link", try_open("dangling", W | C), os.path.exists(f"{d}/target"))
print("trailing slash", try_open("n3/", W | C))
os.umask(0o077)
try_open("n5", W | C, 0o666)
print("umask", stat.filemode(os.stat(f"{d}/n5").st_mode))
print(sorted(os.listdir(d)), sorted(os.listdir(f"{d}/dir")))
"""


def tree(d):
    (d / "f").write_text("keep me\n")
    (d / "g").write_text("empty me\n")
    (d / "dir").mkdir()
    os.symlink("dir", d / "dirlink")
    os.symlink("f", d / "link")
    os.symlink("target", d / "dangling")


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
@pytest.mark.parametrize("options", [{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def test_open_o_creat_gives_the_kernels_answers(ws, fs, options):
    if fs == MEMORY and options:
        pytest.skip("memory.py has no passthrough option: it serves every file itself")
    if fs == MEMORY:
        # the tree is unpacked by tar, then read by Python: one tree for both processes
        seed = ws.start_from(tree, fs)
        script = ws.write_script("cases.py", CASES)
        ws.compare_sh(seed + f'python3 "{script}"\n', fs=fs, mode="shared")
    else:
        ws.populate(tree)
        ws.compare_py(CASES, fs=fs, options=options)
