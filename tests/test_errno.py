"""Errors reach the program with the errno the kernel would give: a Python
script prints the errno name of each failing call, on the mount and on a
native directory, and the two lists must be equal."""

import os

import pytest

from conftest import LOOPBACK, MEMORY

SCRIPT = r'''
import errno, os
D = os.environ["D"]

def attempt(what, fn, *args):
    try:
        fn(*args)
        print(f"{what}: ok")
    except OSError as e:
        print(f"{what}: {errno.errorcode[e.errno]}")

os.mkdir(f"{D}/dir")
os.mkdir(f"{D}/dir/sub")
os.mkdir(f"{D}/empty")
with open(f"{D}/file", "w") as f:
    f.write("data\n")

attempt("ENOENT stat", os.stat, f"{D}/missing")
attempt("ENOENT open", os.open, f"{D}/missing", os.O_RDONLY)
attempt("ENOENT open parent", os.open, f"{D}/missing/x", os.O_WRONLY | os.O_CREAT, 0o644)
attempt("ENOENT unlink", os.unlink, f"{D}/missing")
attempt("ENOENT rmdir", os.rmdir, f"{D}/missing")
attempt("ENOENT rename", os.rename, f"{D}/missing", f"{D}/other")
attempt("ENOENT listdir", os.listdir, f"{D}/missing")
attempt("ENOENT chmod", os.chmod, f"{D}/missing", 0o600)
attempt("ENOENT readlink", os.readlink, f"{D}/missing")
attempt("EEXIST mkdir", os.mkdir, f"{D}/dir")
attempt("EEXIST mkdir on file", os.mkdir, f"{D}/file")
attempt("EEXIST O_CREAT|O_EXCL", os.open, f"{D}/file", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
attempt("EEXIST O_CREAT|O_EXCL dir", os.open, f"{D}/dir", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
attempt("EEXIST symlink", os.symlink, "x", f"{D}/file")
attempt("EEXIST link", os.link, f"{D}/file", f"{D}/file")
attempt("ENOTEMPTY rmdir", os.rmdir, f"{D}/dir")
attempt("ENOTEMPTY rename dir over non-empty", os.rename, f"{D}/empty", f"{D}/dir")
attempt("ENOTDIR stat under file", os.stat, f"{D}/file/x")
attempt("ENOTDIR open under file", os.open, f"{D}/file/x", os.O_RDONLY)
attempt("ENOTDIR listdir file", os.listdir, f"{D}/file")
attempt("ENOTDIR rmdir file", os.rmdir, f"{D}/file")
attempt("ENOTDIR O_DIRECTORY", os.open, f"{D}/file", os.O_RDONLY | os.O_DIRECTORY)
attempt("ENOTDIR rename dir over file", os.rename, f"{D}/empty", f"{D}/file")
attempt("ENOTDIR chdir file", os.chdir, f"{D}/file")
attempt("EISDIR open dir O_WRONLY", os.open, f"{D}/dir", os.O_WRONLY)
attempt("EISDIR open dir O_RDWR", os.open, f"{D}/dir", os.O_RDWR)
attempt("EISDIR open dir O_CREAT", os.open, f"{D}/dir", os.O_WRONLY | os.O_CREAT, 0o644)
attempt("EISDIR unlink dir", os.unlink, f"{D}/dir")
attempt("EISDIR rename file over dir", os.rename, f"{D}/file", f"{D}/empty")
attempt("EISDIR python open dir w", open, f"{D}/dir", "w")
fd = os.open(f"{D}/dir", os.O_RDONLY | os.O_DIRECTORY)
attempt("EISDIR read dir fd", os.read, fd, 10)
os.close(fd)
attempt("EINVAL rename dir into itself", os.rename, f"{D}/dir", f"{D}/dir/sub/x")
attempt("EINVAL readlink file", os.readlink, f"{D}/file")
attempt("EBADF write to O_RDONLY", lambda: os.write(os.open(f"{D}/file", os.O_RDONLY), b"x"))
attempt("EBADF read from O_WRONLY", lambda: os.read(os.open(f"{D}/file", os.O_WRONLY), 1))
attempt("ELOOP O_NOFOLLOW", lambda: (os.symlink("file", f"{D}/sym"), os.open(f"{D}/sym", os.O_RDONLY | os.O_NOFOLLOW)))
attempt("ENAMETOOLONG", os.stat, f"{D}/" + "n" * 300)
attempt("ok open file", os.open, f"{D}/file", os.O_RDONLY)
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_errno_names_match_native(ws, fs):
    native, ldp = ws.compare_py(SCRIPT, fs=fs)
    # The script reached its last line, so every case was tried.
    assert native.stdout.rstrip().endswith("ok open file: ok")


def test_rename_from_mount_to_outside_fails_with_exdev(ws):
    """Across the boundary rename(2) and link(2) fail with EXDEV, as between
    two kernel mounts, so mv falls back to copy+unlink."""
    (ws.lower / "f").write_text("moving\n")
    (ws.lower / "g").write_text("linking\n")
    (ws.ldp_out / "in").write_text("coming in\n")
    script = ws.write_script("exdev.py", r'''
import errno, os
D, O = os.environ["D"], os.environ["O"]
for what, fn, args in [("rename out", os.rename, (f"{D}/f", f"{O}/f")),
                       ("rename in", os.rename, (f"{O}/in", f"{D}/in")),
                       ("link out", os.link, (f"{D}/g", f"{O}/g"))]:
    try:
        fn(*args)
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
''')
    r = ws.ldp_run([os.sys.executable, script])
    assert r.returncode == 0, r.describe()
    assert r.stdout.split("\n")[:3] == ["rename out EXDEV", "rename in EXDEV",
                                        "link out EXDEV"], r.describe()
    # Nothing moved.
    assert (ws.lower / "f").read_text() == "moving\n"
    assert (ws.ldp_out / "in").exists() and not (ws.lower / "in").exists()


def test_mv_across_mount_boundary_copies_like_native(ws):
    for d in (ws.native, ws.lower):
        (d / "f").write_text("moving out\n")
        os.makedirs(d / "tree" / "sub")
        (d / "tree" / "sub" / "x").write_text("x\n")
    ws.compare_sh("""
        mv "$D/f" "$O/f"
        mv "$D/tree" "$O/tree"
        cat "$O/f" "$O/tree/sub/x"
        ls "$D"
        echo back > "$O/back"
        mv "$O/back" "$D/back"
        cat "$D/back"
        ls "$O"
    """)
