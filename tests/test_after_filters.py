"""After-filters and hidden names of backing trees (issue 33, docs/backing.md "After the
operation"): Backing(after=..., hide=...). The preload (the shared mode) or the class's
own methods (the embedded mode, ldpfuse_py/after.py) do each operation; the class is told
of the ones it names after them, with their result. Differential: the same script on the
mount and on a native copy of the lower tree without the hidden names, in both modes."""
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import EXAMPLES, LDP_MODE, base_env, run_ldp, run_native

HERE = os.path.dirname(os.path.abspath(__file__))
AUDIT = f"{EXAMPLES / 'audit.py'}:Audit"
FIXTURES = f"{HERE}/fs_fixtures/after_filters.py"


def tree(root, secrets=True):
    "The lower tree; without secrets, what the view must look like."
    os.makedirs(root / "d" / "e")
    (root / "a.txt").write_text("a\n")
    (root / "d" / "e" / "f.txt").write_text("f\n")
    os.symlink("a.txt", root / "link")
    os.symlink("b.secret", root / "tosecret")   # natively, without it: a dangling link
    if secrets:
        (root / "b.secret").write_text("secret b\n")
        (root / "d" / "c.secret").write_text("secret c\n")
        os.makedirs(root / "x.secret")
        (root / "x.secret" / "inner").write_text("secret inner\n")
        (root / "d" / "e" / ".secret").write_text("dot secret\n")


SCRIPT = r"""
cd "$1" || exit 9
ls -a; ls -a d d/e
find . | sort
cat b.secret 2>&1; echo "cat $?"
cat d/c.secret 2>&1; echo "cat $?"
stat -c %n x.secret/inner 2>&1; echo "stat $?"
ls x.secret 2>&1; echo "ls $?"
cd x.secret 2>/dev/null && echo "cd in" || echo "cd refused"
[ -e b.secret ] && echo exists || echo missing
rm b.secret 2>&1; echo "rm $?"
rmdir x.secret 2>&1; echo "rmdir $?"
mv d/c.secret d/moved 2>&1; echo "mv $?"
chmod 600 b.secret 2>&1; echo "chmod $?"
ln b.secret hard 2>&1; echo "ln $?"
mv a.txt a2.txt && ls
cat link 2>&1; echo "cat link $?"
cat tosecret 2>&1; echo "cat tosecret $?"
readlink tosecret
echo new > new.txt && cat new.txt
mkdir -p d/g && echo g > d/g/h && find d | sort
python3 -c 'import os; print(sorted(os.listdir(".")), sorted(e.name for e in os.scandir("d")))'
du -a . | awk '{print $2}' | sort
"""


def test_hidden_names_are_missing_everywhere_as_in_the_tree_without_them(tmp_path):
    """hide=('*.secret',): listings (ls, find, scandir, du), lookups, stat, open, cd, rm,
    rmdir, mv, chmod and ln of hidden names (a file, a directory, one in a subdirectory,
    a dot name) answer as a native tree without them does, step by step; the hidden lower
    files are untouched."""
    native = tmp_path / "native"
    tree(native, secrets=False)
    want = run_native(["sh", "-c", SCRIPT, "sh", str(native)])
    lower = tmp_path / "lower"
    tree(lower)
    got = run_ldp(AUDIT, [lower], ["sh", "-c", SCRIPT, "sh", str(tmp_path / "mnt")], tmp_path / "mnt",
                  options={"hide": "*.secret"})
    assert got.returncode == want.returncode == 0, got.stderr
    assert got.stdout == want.stdout, got.stderr
    assert (lower / "b.secret").read_text() == "secret b\n"
    assert (lower / "d" / "c.secret").read_text() == "secret c\n"
    assert (lower / "x.secret" / "inner").read_text() == "secret inner\n"
    assert stat.S_IMODE(os.stat(lower / "b.secret").st_mode) == 0o644
    assert not (lower / "hard").exists() and not (lower / "d" / "moved").exists()


MAKE_HIDDEN = r"""
import errno, os, sys
os.chdir(sys.argv[1])
W = os.O_CREAT | os.O_WRONLY
for what, f in (("create", lambda: os.open("new.secret", W, 0o644)), ("mkdir", lambda: os.mkdir("dir.secret")),
                ("symlink", lambda: os.symlink("a.txt", "sym.secret")), ("rename", lambda: os.rename("a.txt", "a.secret")),
                ("link", lambda: os.link("a.txt", "hard.secret")), ("create over", lambda: os.open("b.secret", W, 0o644)),
                ("mkdir below", lambda: os.mkdir("d/x.secret")), ("create in", lambda: os.open("x.secret/new", W, 0o644)),
                ("rename from", lambda: os.rename("b.secret", "zzz"))):
    try:
        f()
        print(what, "made")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
print(*sorted(os.listdir(".")))
"""


def test_a_hidden_name_cannot_be_made(tmp_path):
    """Making a name that matches a pattern (create, mkdir, symlink, the new name of a
    rename or link) is EACCES, whether the lower tree has one or not: the program could
    not see what it made. A path through a hidden directory stays ENOENT."""
    lower = tmp_path / "lower"
    tree(lower)
    got = run_ldp(AUDIT, [lower], [sys.executable, "-c", MAKE_HIDDEN, str(tmp_path / "mnt")], tmp_path / "mnt",
                  options={"hide": "*.secret"})
    assert got.stdout.splitlines() == [
        "create EACCES", "mkdir EACCES", "symlink EACCES", "rename EACCES", "link EACCES", "create over EACCES",
        "mkdir below EACCES", "create in ENOENT", "rename from ENOENT", "a.txt d link tosecret"], got.stdout + got.stderr
    assert sorted(os.listdir(lower)) == ["a.txt", "b.secret", "d", "link", "tosecret", "x.secret"]
    assert (lower / "b.secret").read_text() == "secret b\n"


CHANGES = r"""
cd "$1" || exit 9
chmod 644 a.txt
stat -c '%A %n' a.txt d link
echo x > g; echo y >> a.txt; : > a.txt
mv g h; mkdir e; rmdir e; rm h; chmod 640 a.txt
ln -s a.txt sym; ln a.txt hard
cat a.txt; ls
"""


def test_after_filters_adjust_attributes_and_are_told_of_changes(tmp_path):
    """examples/audit.py with -o readonly=yes and a trail: stat shows files without their
    write bits (directories and the link as they are), and the trail has one line per
    change, in order, with its result; the changes themselves are as natively (the lower
    tree's modes are untouched by the filter)."""
    lower = tmp_path / "lower"
    tree(lower, secrets=False)
    trail = tmp_path / "trail.log"
    got = run_ldp(AUDIT, [lower], ["sh", "-c", CHANGES, "sh", str(tmp_path / "mnt")], tmp_path / "mnt",
                  options={"readonly": "yes", "trail": str(trail)})
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    shown = ["-r--r--r-- a.txt",
             stat.filemode(os.lstat(lower / "d").st_mode) + " d", "lrwxrwxrwx link"]
    assert lines[:3] == shown, got.stdout
    assert lines[3:] == ["a.txt", "d", "hard", "link", "sym", "tosecret"], got.stdout
    assert stat.S_IMODE(os.stat(lower / "a.txt").st_mode) == 0o640
    assert trail.read_text().splitlines() == [
        "chmod /a.txt ok", "create /g ok", "open_write /a.txt ok", "open_write /a.txt ok", "rename /g /h ok", "mkdir /e ok",
        "rmdir /e ok", "unlink /h ok", "chmod /a.txt ok", "symlink /sym a.txt ok", "link /hard /a.txt ok"]


def test_what_an_after_filter_raises(tmp_path):
    """A change's after-filter that raises: the change is done and the program gets its
    result (0), the traceback is in the log. A getattr filter that raises, or changes
    st_size (not an after-filter's to change): that stat is EIO, with a log line."""
    lower = tmp_path / "lower"
    lower.mkdir()
    for name in ("f", "odd", "big", "ok"):
        (lower / name).write_text("x\n")
    log = tmp_path / "ldp.log"
    script = """cd "$1" || exit 9
rm f && echo removed; mkdir d && echo made
stat -c %s odd 2>/dev/null || echo "odd failed"
stat -c %s big 2>/dev/null || echo "big failed"
stat -c %s ok
"""
    got = run_ldp(f"{FIXTURES}:Raises", [lower], ["sh", "-c", script, "sh", str(tmp_path / "mnt")],
                  tmp_path / "mnt", log_file=log)
    assert got.stdout == "removed\nmade\nodd failed\nbig failed\n2\n", got.stdout + got.stderr
    assert sorted(os.listdir(lower)) == ["big", "d", "odd", "ok"]
    text = log.read_text()
    assert "after('unlink', '/f') raised; the operation is done" in text, text
    assert "after('mkdir', '/d') raised; the operation is done" in text, text
    assert "a bug in the filter" in text and "changed st_size" in text, text


def test_a_class_without_after_is_refused_at_start(tmp_path):
    got = run_ldp(f"{FIXTURES}:NoAfter", [tmp_path], ["true"], tmp_path / "mnt")
    assert got.returncode != 0
    assert "declares Backing(after=...) but has no after(op, path, result, *args) method" in got.stderr, got.stderr


def test_bad_declarations_are_one_clear_line():
    from ldpfuse_py import Backing

    with pytest.raises(ValueError, match="hide=.*hides names everywhere"):
        Backing("/", after={"readdir"})
    with pytest.raises(ValueError, match="both in see= and after="):
        Backing("/", see={"unlink"}, after={"unlink"})
    with pytest.raises(ValueError, match="a pattern is a name"):
        Backing("/", hide=["a/b"])
    with pytest.raises(ValueError, match="unknown operations"):
        Backing("/", after={"frobnicate"})


REOPEN = r"""
import os, stat, sys
root, side, crowd = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.chdir(root)
if crowd:
    os.mkdir("crowd")
for i in range(crowd):
    os.close(os.open(f"crowd/c{i}", os.O_WRONLY | os.O_CREAT, 0o644))
for _ in range(2):
    for i in range(crowd):      # more names than the small table holds: the big one
        os.close(os.open(f"crowd/c{i}", os.O_RDONLY))
for _ in range(3):
    with open("f") as f:
        f.read()
os.unlink("f")
os.mkdir("f")
os.mkdir("f/inside")
open(side + "/x.secret", "w").close()   # on the mount: in the lower f, where it is hidden
fd = os.open("f", os.O_RDONLY)
print(stat.S_ISDIR(os.fstat(fd).st_mode), sorted(os.listdir(fd)))
os.close(fd)
os.rename("f", "g")
open("f", "w").write("again\n")
print(open("f").read(), end="")
os.rename("f", "h")
os.mkfifo("f")
fd = os.open("f", os.O_RDONLY | os.O_NONBLOCK)
print(stat.S_ISFIFO(os.fstat(fd).st_mode))
os.close(fd)
"""


@pytest.mark.parametrize("crowd", [0, 6000])
def test_a_name_opened_as_a_file_then_replaced_here_is_opened_as_what_it_is(tmp_path, crowd):
    """A backed open of a name this process opened as a regular file a moment ago skips
    the look at its type (vfs/backing_regular.c); the process's own unlink, mkdir and
    rename forget it: the directory made in its place opens as the mount's directory (its
    listing the mount's, without the hidden name the lower directory holds), the FIFO as
    a FIFO, as natively. With a crowd of 6,000 names opened first, the process keeps
    them in its big table, which forgets the same way."""
    native = tmp_path / "native"
    native.mkdir()
    (native / "f").write_text("f\n")
    (tmp_path / "side").mkdir()
    want = run_native([sys.executable, "-c", REOPEN, str(native), str(tmp_path / "side"), str(crowd)])
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "f").write_text("f\n")
    got = run_ldp(AUDIT, [lower], [sys.executable, "-c", REOPEN, str(tmp_path / "mnt"), str(lower / "f"), str(crowd)],
                  tmp_path / "mnt")
    assert want.stdout == "True ['inside']\nagain\nTrue\n", want.stderr
    assert got.stdout == want.stdout, got.stderr


@pytest.mark.skipif(LDP_MODE != "shared", reason="the preload tells the class only in the shared mode "
                    "(in the embedded mode the operation itself is the traced line)")
def test_trace_shows_what_the_class_is_told(tmp_path):
    """--trace: a line per after() call the preload makes, and none for what the class did
    not name (-o after=unlink: the create, the stat and the read are not told)."""
    from conftest import ldpfuse_run_argv

    lower = tmp_path / "lower"
    lower.mkdir()
    argv = ldpfuse_run_argv() + ["--trace", "--log-file", str(tmp_path / "log"), "--mountpoint", str(tmp_path / "mnt"),
                                 "-o", "after=unlink", f"{EXAMPLES / 'loopback.py'}:Loopback", str(lower), "--",
                                 "sh", "-c", f"cd {tmp_path / 'mnt'} && echo x > f && cat f && stat -c %s f && rm f"]
    r = subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=60)
    assert r.stdout == "x\n2\n", r.stderr
    told = [line.split("] ", 1)[1].split("  ")[0] for line in (tmp_path / "log").read_text().splitlines()
            if "] after(" in line]
    assert told == ["after('unlink', '/f', 0) = None"], told
