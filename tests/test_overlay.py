"""examples/overlay.py against kernel overlayfs, step by step.

One script of operations (creates, writes and appends to lower files, chmod and
chown of lower files, renames of lower files and directories, unlinks of lower
files, rmdir of lower and merged directories and making them again, symlinks,
hard links, xattrs) runs on copies of one lower tree: under ldpfuse-run with the
overlay example, and in a `mount -t overlay` of the same layout (root only).
Compared: what each step returned (errno names included), the merged tree
(names, types, modes, owners, sizes, contents, symlink targets, user xattrs)
and the upper directory as each left it (whiteouts as 0/0 character devices,
the opaque xattr on opaque directories).
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES, NOBODY, as_nobody, base_env, run_ldp, run_native

OVERLAY = f"{EXAMPLES / 'overlay.py'}:Overlay"
TIMEOUT = 120

# The operations, run in the merged directory (argv[1]); each step's result is
# printed as JSON: "ok", a value, or the errno's name.
SCRIPT = r"""
import errno, json, os, sys
m = sys.argv[1]
os.chdir(m)
steps = []

def step(name, fn, *args):
    try:
        r = fn(*args)
        steps.append([name, "ok" if r is None else r.decode() if isinstance(r, bytes) else r])
    except OSError as e:
        steps.append([name, errno.errorcode[e.errno]])

def write(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, offset=None):
    fd = os.open(path, flags, 0o644)
    try:
        if offset is not None:
            os.lseek(fd, offset, os.SEEK_SET)
        os.write(fd, data)
    finally:
        os.close(fd)

def read(path):
    with open(path, "rb") as f:
        return f.read().decode()

def names(path):
    return sorted(os.listdir(path))

# files
step("create", write, "new.txt", b"a new file\n")
step("append to a lower file", write, "docs/readme.txt", b"appended\n", os.O_WRONLY | os.O_APPEND)
step("write inside a lower file", write, "data/blob.bin", b"XYZ", os.O_WRONLY, 10)
step("read a lower file", read, "data/keep.txt")
step("truncate a lower file", os.truncate, "data/trunc.bin", 5)
step("O_TRUNC a lower file", write, "data/otrunc.txt", b"short\n")
step("chmod a lower file", os.chmod, "bin/tool.sh", 0o700)
step("chown a lower file", os.chown, "data/owned.txt", 4321, 8765)
step("setxattr on a lower file", os.setxattr, "data/keep2.txt", "user.added", b"v")
step("getxattr copied up", os.getxattr, "data/tagged.txt", "user.color")
step("append to a tagged file", write, "data/tagged.txt", b"more\n", os.O_WRONLY | os.O_APPEND)
step("getxattr after copy-up", lambda: os.getxattr("data/tagged.txt", "user.color").decode())
step("utime of a lower file", os.utime, "data/keep3.txt", (1000000000, 1000000000))
# renames
step("rename a lower file", os.rename, "docs/old.txt", "docs/renamed.txt")
step("rename a lower file to another directory", os.rename, "data/moved.bin", "top.bin")
step("rename a lower file over a lower file", os.rename, "data/a.txt", "data/b.txt")
step("rename a lower directory", os.rename, "docs/deep", "deep2")
step("rename a lower empty directory", os.rename, "emptydir2", "emptydir3")
step("mkdir", os.mkdir, "newdir", 0o755)
step("create in it", write, "newdir/inner.txt", b"inner\n")
step("rename an upper directory", os.rename, "newdir", "newdir2")
step("rename an upper directory into a lower one", os.rename, "newdir2", "docs/newdir3")
step("rename an upper directory over a removed lower one", os.rename, "docs/newdir3", "gonedir")
step("mkdir another", os.mkdir, "newdir4", 0o755)
step("rename it over an empty directory of a lower-only one", os.rename, "newdir4", "lowonly/x")
step("the lower-only one's listing", names, "lowonly")
step("listing after renames", names, ".")
# removals
step("unlink a lower file", os.unlink, "data/gone.txt")
step("unlink a lower file again", os.unlink, "data/gone.txt")
step("stat a removed file", lambda: os.stat("data/gone.txt").st_size)
step("unlink a lower symlink", os.unlink, "data/link")
step("unlink a lower directory", os.unlink, "docs")
step("rmdir a lower non-empty directory", os.rmdir, "docs")
step("rmdir a lower empty directory", os.rmdir, "emptydir")
step("mkdir where it was (opaque)", os.mkdir, "emptydir", 0o700)
step("unlink in a merged directory", os.unlink, "olddir/one.txt")
step("unlink the other", os.unlink, "olddir/sub/two.txt")
step("rmdir a lower subdirectory", os.rmdir, "olddir/sub")
step("rmdir a merged directory", os.rmdir, "olddir")
step("stat it", lambda: os.stat("olddir").st_mode)
step("mkdir it again (opaque)", os.mkdir, "olddir", 0o750)
step("create in the opaque one", write, "olddir/fresh.txt", b"fresh\n")
step("the opaque one's listing", names, "olddir")
step("unlink then create a lower file", lambda: (os.unlink("data/recreate.txt"),
                                                  write("data/recreate.txt", b"again\n")) and None)
step("rmdir a lower directory, create a file there", lambda: (os.rmdir("dir2"),
                                                             write("dir2", b"a file now\n")) and None)
# symlinks, hard links, nodes
step("symlink", os.symlink, "docs/renamed.txt", "ln")
step("readlink", os.readlink, "ln")
step("read through it", read, "ln")
step("rename a lower symlink", os.rename, "data/link2", "data/link3")
step("hard link to a lower file", os.link, "data/keep.txt", "data/keep-link.txt")
step("link count", lambda: os.stat("data/keep-link.txt").st_nlink)
step("hard link to a directory", os.link, "data", "data-link")
step("mkfifo", os.mkfifo, "fifo", 0o640)
step("mknod a whiteout", os.mknod, "wh", 0o20000, 0)
step("mknod a whiteout over a lower file", os.mknod, "data/keep.txt", 0o20000, 0)
# errors
step("mkdir an existing lower directory", os.mkdir, "data")
step("create over a lower file exclusively", write, "data/keep.txt", b"x",
     os.O_WRONLY | os.O_CREAT | os.O_EXCL)
step("rename a file over a lower directory", os.rename, "new.txt", "data")
step("rmdir a file", os.rmdir, "new.txt")
step("open a missing lower name", read, "data/nothing")
step("listing of the root", names, ".")
step("listing of data", names, "data")
print(json.dumps(steps))
"""

# What a tree holds: for each path, its type, mode, owner, size, content, link
# target, user xattrs, and (for the upper directory) the overlay's marks.
DESCRIBE = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
tree = {}
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        e = {"mode": oct(st.st_mode), "owner": [st.st_uid, st.st_gid]}
        if stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                e["sha256"] = hashlib.sha256(f.read()).hexdigest()
            e["size"] = st.st_size
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            e["rdev"] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
        try:
            xattrs = os.listxattr(p, follow_symlinks=False)
        except OSError:
            xattrs = []
        e["xattrs"] = {n: os.getxattr(p, n, follow_symlinks=False).decode(errors="replace")
                       for n in sorted(xattrs)
                       if n.startswith("user.") or n == "trusted.overlay.opaque"}
        tree[rel] = e
print(json.dumps(tree, sort_keys=True))
"""


def make_lower(root):
    """The lower tree the script changes (the same bytes for both runs)."""
    for d in ("docs/deep/er", "data", "bin", "emptydir", "emptydir2", "olddir/sub", "dir2",
              "lowonly/x"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "docs" / "readme.txt").write_text("read me\n" * 50)
    (root / "docs" / "old.txt").write_text("old name\n")
    (root / "docs" / "deep" / "er" / "deepest.txt").write_text("deep\n")
    (root / "data" / "blob.bin").write_bytes(bytes(range(256)) * 64)
    (root / "data" / "moved.bin").write_bytes(b"\x00\x01moved" * 100)
    for name in ("keep", "keep2", "keep3", "gone", "recreate", "a", "b", "owned", "tagged"):
        (root / "data" / f"{name}.txt").write_text(f"{name}\n")
    (root / "data" / "trunc.bin").write_bytes(b"0123456789" * 10)
    (root / "data" / "otrunc.txt").write_text("a long line to be cut\n" * 10)
    os.setxattr(root / "data" / "tagged.txt", "user.color", b"blue")
    os.chown(root / "data" / "owned.txt", 1234, 5678)
    os.chown(root / "data" / "tagged.txt", 2345, 6789)
    (root / "data" / "link").symlink_to("keep.txt")
    (root / "data" / "link2").symlink_to("../docs/readme.txt")
    (root / "bin" / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    os.chmod(root / "bin" / "tool.sh", 0o755)
    (root / "olddir" / "one.txt").write_text("one\n")
    (root / "lowonly" / "y.txt").write_text("y\n")
    (root / "olddir" / "sub" / "two.txt").write_text("two\n")
    os.chmod(root / "docs" / "deep", 0o750)
    os.chmod(root / "olddir", 0o775)
    # a removed lower directory that an upper directory is renamed onto
    (root / "gonedir").mkdir()
    # deeper than the 4 directory fds gnulib's fts keeps: rm -r goes back up by ".."
    (root / "tall/a/b/c/d/e/f/g").mkdir(parents=True)
    (root / "tall/a/b/c/d/e/f/g/leaf.txt").write_text("leaf\n")


def describe(root):
    r = run_native([sys.executable, "-c", DESCRIBE, root], env=base_env())
    assert r.returncode == 0, r.describe()
    return json.loads(r.stdout)


def layout(base):
    "lower, upper, work and merged directories under base, the lower tree made."
    dirs = {name: base / name for name in ("lower", "upper", "work", "merged")}
    for d in dirs.values():
        d.mkdir(parents=True)
    make_lower(dirs["lower"])
    return dirs


def need_root():
    if os.geteuid() != 0:
        pytest.skip("kernel overlayfs is mounted by the test, which needs root "
                    "(and the lower tree has files of other owners)")


def kernel_overlay_run(base, script):
    """The script in a kernel overlayfs mount of base's layout: (its output, merged tree,
    upper tree)."""
    dirs = layout(base)
    opts = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
    mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, dirs["merged"]],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t overlay failed (no overlayfs here?): {mounted.stderr.strip()}")
    try:
        r = run_native([*command(script), dirs["merged"]], env=base_env())
        assert r.returncode == 0, r.describe()
        merged = describe(dirs["merged"])
    finally:
        subprocess.run(["umount", dirs["merged"]], check=True)
    return r.stdout, merged, describe(dirs["upper"])


def ldpfuse_overlay_run(base, script):
    """The script in examples/overlay.py's merged directory: (its output, merged tree,
    upper tree)."""
    dirs = layout(base)
    log = base / "fs.log"
    r = run_ldp(OVERLAY, [dirs["lower"], dirs["upper"]],
                [*command(script), dirs["merged"]], dirs["merged"], log_file=log,
                timeout=TIMEOUT)
    assert r.returncode == 0, r.describe() + (log.read_text() if log.exists() else "")
    d = run_ldp(OVERLAY, [dirs["lower"], dirs["upper"]],
                [sys.executable, "-c", DESCRIBE, dirs["merged"]], dirs["merged"], timeout=TIMEOUT)
    assert d.returncode == 0, d.describe()
    return r.stdout, json.loads(d.stdout), describe(dirs["upper"])


def both_runs(tmp_path, name, text):
    """The script (text, run as the file name says) in kernel overlayfs and in the example,
    each on its own copy of the layout: (output, merged tree, upper tree) of each."""
    need_root()
    script = tmp_path / name
    script.write_text(text)
    return kernel_overlay_run(tmp_path / "kernel", script), ldpfuse_overlay_run(tmp_path / "ldpfuse", script)


def command(script):
    "How to run a script file: a Python one with the test's Python, a shell one with sh."
    return [sys.executable, script] if script.suffix == ".py" else ["sh", script]


def assert_same_trees(k_merged, o_merged, k_upper, o_upper):
    assert sorted(o_merged) == sorted(k_merged), "different names in the merged trees"
    diffs = {p: (k_merged[p], o_merged[p]) for p in o_merged if o_merged[p] != k_merged[p]}
    assert diffs == {}, f"merged entries differ (kernel, example): {diffs}"
    assert sorted(o_upper) == sorted(k_upper), "different names in the upper directories"
    diffs = {p: (k_upper[p], o_upper[p]) for p in o_upper if o_upper[p] != k_upper[p]}
    assert diffs == {}, f"upper entries differ (kernel, example): {diffs}"


def test_overlay_example_does_what_kernel_overlayfs_does(tmp_path):
    (k_out, k_merged, k_upper), (o_out, o_merged, o_upper) = both_runs(tmp_path, "script.py", SCRIPT)
    k_steps, o_steps = json.loads(k_out), json.loads(o_out)
    # step by step: the first that differs is the one to look at
    for k, o in zip(k_steps, o_steps):
        assert o == k, f"step {k[0]!r}: kernel overlayfs {k[1]!r}, the example {o[1]!r}"
    assert len(o_steps) == len(k_steps)
    assert_same_trees(k_merged, o_merged, k_upper, o_upper)
    # the comparison saw whiteouts and opaque directories, not only files
    assert any(e.get("rdev") == [0, 0] for e in k_upper.values())
    assert any(e["xattrs"].get("trusted.overlay.opaque") == "y" for e in k_upper.values())


# Real programs on the same lower tree: sed -i (a temporary file renamed over a lower
# one), mv of a lower directory (EXDEV: mv copies it, then removes the lower one), rm -r
# of a merged directory, chmod -R over lower directories, cp -a, tar.
PROGRAMS = r"""
set -e
cd "$1"
sed -i 's/read/READ/' docs/readme.txt
touch data/keep.txt
mv docs/deep deep2
rm -r olddir
mkdir olddir
echo x > olddir/x
cp -a bin bin2
ln -s ../data/keep.txt bin/keep
chmod -R go-rx data
mkdir newtar
tar -C data -cf - . | tar -C newtar -xf -
rm -f data/link newtar/link2
echo appended >> data/tagged.txt
find . | LC_ALL=C sort
"""


def test_programs_in_the_overlay_example_do_what_they_do_in_kernel_overlayfs(tmp_path):
    (k_out, k_merged, k_upper), (o_out, o_merged, o_upper) = both_runs(tmp_path, "programs.sh", PROGRAMS)
    assert o_out == k_out
    assert_same_trees(k_merged, o_merged, k_upper, o_upper)
    assert k_upper["docs/deep"]["rdev"] == [0, 0]   # mv left a whiteout where the directory was


# A lower directory's inode number through the copy-up of the directories above a new
# file, and rm -r of a tree deeper than fts keeps fds for: it checks that ".." opens the
# directory it stat'ed on the way down (it failed with "fts_read failed: No such file or
# directory" when a copied-up directory took its upper directory's number).
COPY_UP_INODES = r"""
set -e
cd "$1"
dirs="tall tall/a tall/a/b tall/a/b/c/d/e/f tall/a/b/c/d/e/f/g"
before=$(stat -c %i $dirs)
touch tall/a/b/c/d/e/f/g/new.txt
after=$(stat -c %i $dirs)
[ "$before" = "$after" ] && echo "inode numbers kept" || echo "inode numbers changed"
rm -r tall
echo "rm -r: $?"
ls
"""


def test_copied_up_directories_keep_their_inode_numbers_as_in_kernel_overlayfs(tmp_path):
    (k_out, k_merged, k_upper), (o_out, o_merged, o_upper) = both_runs(tmp_path, "inodes.sh", COPY_UP_INODES)
    assert "inode numbers kept" in k_out
    assert o_out == k_out
    assert_same_trees(k_merged, o_merged, k_upper, o_upper)


def test_overlay_reads_fuse_overlayfs_whiteout_files(tmp_path):
    """An upper directory written by fuse-overlayfs as an unprivileged user: `.wh.NAME`
    hides NAME, `.wh..wh..opq` makes its directory opaque; neither is listed."""
    dirs = layout(tmp_path)
    upper = dirs["upper"]
    (upper / "data").mkdir()
    (upper / "data" / ".wh.keep.txt").write_bytes(b"")
    (upper / "olddir").mkdir()
    (upper / "olddir" / ".wh..wh..opq").write_bytes(b"")
    (upper / "olddir" / "mine.txt").write_text("mine\n")
    r = run_ldp(OVERLAY, [dirs["lower"], upper],
                [sys.executable, "-c", "import os, sys; print(sorted(os.listdir(sys.argv[1] + '/data')));"
                 "print(sorted(os.listdir(sys.argv[1] + '/olddir')));"
                 "print(os.path.exists(sys.argv[1] + '/data/keep.txt'))", dirs["merged"]],
                dirs["merged"], timeout=TIMEOUT)
    assert r.returncode == 0, r.describe()
    data = sorted(p.name for p in (dirs["lower"] / "data").iterdir() if p.name != "keep.txt")
    assert r.stdout.splitlines() == [str(data), str(["mine.txt"]), "False"]


def test_overlay_of_a_user_falls_back_to_the_opaque_file(shared_tmp):
    """A caller who may not set trusted.* xattrs (not root) marks an opaque directory
    with `.wh..wh..opq`, as fuse-overlayfs does; its whiteouts are still 0/0 devices
    (Linux >= 5.8 lets anyone make one)."""
    need_root()
    dirs = layout(shared_tmp / "user")
    for d in [shared_tmp / "user"] + [p for p in (shared_tmp / "user").rglob("*")]:
        os.lchown(d, NOBODY, NOBODY)
    cmd = as_nobody(sys.executable, "-c",
                    "import os, sys; m = sys.argv[1]; os.unlink(m + '/olddir/one.txt');"
                    "os.unlink(m + '/olddir/sub/two.txt'); os.rmdir(m + '/olddir/sub');"
                    "os.rmdir(m + '/olddir'); os.mkdir(m + '/olddir'); print(os.listdir(m + '/olddir'))",
                    dirs["merged"])
    r = run_ldp(OVERLAY, [dirs["lower"], dirs["upper"]], cmd, dirs["merged"],
                options={"allow_other": None}, timeout=TIMEOUT)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "[]\n"
    upper = describe(dirs["upper"])
    assert upper["olddir/.wh..wh..opq"]["size"] == 0
    assert "trusted.overlay.opaque" not in upper["olddir"]["xattrs"]
    assert upper["olddir"]["owner"] == [NOBODY, NOBODY]


def test_overlay_refuses_a_missing_layer(tmp_path):
    (tmp_path / "upper").mkdir()
    r = run_ldp(OVERLAY, [tmp_path / "nowhere", tmp_path / "upper"], ["true"], tmp_path / "m",
                timeout=TIMEOUT)
    assert r.returncode != 0
    assert "lower directory is not a directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
