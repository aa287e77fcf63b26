"""The union backing (native/vfs/union.c): an overlay's merged view read by the preload.

examples/overlay.py declares its layers (ldpfuse_py.Union); in the shared mode the
preload then answers lookups, stat, readlink, access, opens for reading and listings
itself, and the class's methods only the changes. These tests run a script of reads
interleaved with changes on layers that hold every whiteout form (0/0 devices and the
opaque xattr, in the upper and in a lower layer of two; fuse-overlayfs' .wh. files) and
compare, step by step, what it saw: in kernel overlayfs (root), with the union, and with
-o union=no (every operation through Python). The union is the shared mode's, so these
tests ask for it whatever LDPFUSE_TEST_MODE says.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES, NOBODY, as_nobody, base_env, run_ldp, run_native

OVERLAY = f"{EXAMPLES / 'overlay.py'}:Overlay"
TIMEOUT = 120

# Reads of the merged directory (argv[1]), a change now and then; each step's result is
# printed as JSON.
SCRIPT = r"""
import errno, hashlib, json, os, stat, subprocess, sys, tempfile, time
m = sys.argv[1]
os.chdir(m)
steps = []

def step(name, fn, *args):
    try:
        steps.append([name, fn(*args)])
    except OSError as e:
        steps.append([name, errno.errorcode[e.errno]])

def look(path):
    st = os.lstat(path)
    e = [stat.filemode(st.st_mode), st.st_uid, st.st_gid]
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            e += [st.st_size, st.st_nlink, hashlib.sha256(f.read()).hexdigest()[:16]]
    elif stat.S_ISLNK(st.st_mode):
        e.append(os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        e.append(st.st_nlink == 1)      # a merged directory's count is 1 (the kernel's)
    return e

def tree(top="."):
    out = {}
    for d, dirs, files in os.walk(top):
        for n in sorted(dirs + files):
            p = os.path.join(d, n)
            out[p] = look(p)
    return out

def names(path):
    return sorted(os.listdir(path))

def write(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

def read(path):
    with open(path, "rb") as f:
        return f.read().decode()

step("the tree", tree)
step("stat a name a lower whiteout hides", look, "b.txt")
step("stat a name an upper whiteout hides", look, "a/y.txt")
step("stat below a file", look, "c.txt/x")
step("stat through a symlink to a directory", look, "alink/w.txt")
step("read through a symlink", read, "link")
step("readlink", os.readlink, "link")
step("readlink of a file", os.readlink, "c.txt")
step("listing of the opaque lower directory", names, "d")
step("listing of the opaque upper directory", names, "c")
step("a file that hides a lower directory", look, "e")
step("listing of a file", names, "e")
step("access R_OK of a lower file", os.access, "a/x.txt", os.R_OK)
step("access X_OK of a lower file", os.access, "a/x.txt", os.X_OK)
step("access of a hidden name", os.access, "f.txt", os.F_OK)
step("open a lower directory for reading", lambda: os.close(os.open("a", os.O_RDONLY)))
step("open a hidden name", read, "f.txt")
# changes, each followed by the reads that must see it
step("append to a lower file", write, "a/x.txt", b"more\n", os.O_WRONLY | os.O_APPEND)
step("read it", read, "a/x.txt")
step("read another lower file", read, "h/i/deep.txt")

def appended_by_another(path):
    "Another process appends to path (a copy-up); read it before waiting for that process"
    done = tempfile.mktemp(prefix="appended-")
    child = subprocess.Popen([sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write('more\\n'); "
                              "open(sys.argv[2], 'w').close()", path, done])
    while not os.path.exists(done):     # not waited for: waiting makes the core forget (docs)
        time.sleep(0.01)
    got = read(path)
    child.wait()
    os.unlink(done)
    return got

step("another process appends to it, read before it is waited for", appended_by_another, "h/i/deep.txt")
step("unlink a lower file", os.unlink, "a/sub/z.txt")
step("stat it", look, "a/sub/z.txt")
step("listing after", names, "a/sub")
step("rmdir the emptied lower directory", os.rmdir, "a/sub")
step("stat it", look, "a/sub")
step("mkdir there (opaque)", os.mkdir, "a/sub", 0o755)
step("its listing", names, "a/sub")
step("create in a merged directory", write, "a/new.txt", b"new\n")
step("listing of a", names, "a")
step("rename a lower file", os.rename, "a/w.txt", "g/w2.txt")
step("stat the old name", look, "a/w.txt")
step("read the new name", read, "g/w2.txt")
step("symlink", os.symlink, "a/new.txt", "ln2")
step("read through it", read, "ln2")
step("chmod a lower file", os.chmod, "c.txt", 0o600)
step("stat it", look, "c.txt")
step("the tree after", tree)
print(json.dumps(steps))
"""


def make_layers(base):
    """Two lower layers and an upper one holding the kernel's whiteouts and opaque
    directories; returns (lowers top first, upper, work, merged)."""
    low1, low2, upper, work, merged = (base / n for n in ("low1", "low2", "upper", "work", "merged"))
    for d in (low1, low2, upper, work, merged):
        d.mkdir(parents=True)
    # the bottom layer
    for d in ("a/sub", "c", "d", "e", "h/i"):
        (low2 / d).mkdir(parents=True)
    for f in ("a/x.txt", "a/y.txt", "a/sub/z.txt", "b.txt", "c/c1.txt", "d/d2.txt", "e/e2.txt",
              "f.txt", "h/i/deep.txt"):
        (low2 / f).write_text(f"{f} in low2\n" * 3)
    (low2 / "link").symlink_to("b2.txt")
    (low2 / "b2.txt").write_text("b2\n")
    os.chmod(low2 / "a" / "x.txt", 0o640)
    os.chown(low2 / "h" / "i" / "deep.txt", 1234, 5678)
    # the layer above it: a file over a directory (e), a whiteout (b.txt), an opaque
    # directory (d), a directory merged with the bottom one's (a)
    (low1 / "a").mkdir()
    (low1 / "a" / "w.txt").write_text("w in low1\n")
    (low1 / "a" / "x.txt").write_text("x in low1\n")
    os.chmod(low1 / "a" / "x.txt", 0o751)
    (low1 / "c.txt").write_text("c\n")
    (low1 / "d").mkdir()
    (low1 / "d" / "d1.txt").write_text("d1\n")
    os.setxattr(low1 / "d", "trusted.overlay.opaque", b"y")
    os.mknod(low1 / "b.txt", 0o20000, 0)
    (low1 / "e").write_text("a file now\n")
    (low1 / "alink").symlink_to("a")
    # the upper layer: a merged directory with a whiteout in it, an opaque directory over
    # a lower one, a whiteout at the root, a directory of its own
    (upper / "a").mkdir()
    (upper / "a" / "u.txt").write_text("u\n")
    os.mknod(upper / "a" / "y.txt", 0o20000, 0)
    (upper / "c").mkdir()
    os.setxattr(upper / "c", "trusted.overlay.opaque", b"y")
    (upper / "c" / "new.txt").write_text("new\n")
    os.mknod(upper / "f.txt", 0o20000, 0)
    (upper / "g").mkdir()
    return [low1, low2], upper, work, merged


def need_root():
    if os.geteuid() != 0:
        pytest.skip("the layers hold trusted.overlay.opaque (root only) and the kernel overlayfs "
                    "the test mounts needs root")


def kernel_output(lowers, upper, work, merged, script):
    "The script's output (JSON) in kernel overlayfs mounted on these layers."
    opts = f"lowerdir={':'.join(map(str, lowers))},upperdir={upper},workdir={work}"
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, merged],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mount -t overlay failed (no overlayfs here?): {r.stderr.strip()}")
    try:
        out = run_native([sys.executable, script, merged], env=base_env())
        assert out.returncode == 0, out.describe()
    finally:
        subprocess.run(["umount", merged], check=True)
    return json.loads(out.stdout)


def union_output(lowers, upper, merged, script, union=None):
    "The script's output (JSON) in the example on these layers (-o union=UNION if given)."
    r = run_ldp(OVERLAY, [":".join(map(str, lowers)), upper], [sys.executable, script, merged], merged,
                options={} if union is None else {"union": union}, mode="shared", timeout=TIMEOUT)
    assert r.returncode == 0, r.describe()
    return json.loads(r.stdout)


def kernel_run(base, script):
    lowers, upper, work, merged = make_layers(base)
    return kernel_output(lowers, upper, work, merged, script)


def ldpfuse_run(base, script, union):
    lowers, upper, _, merged = make_layers(base)
    return union_output(lowers, upper, merged, script, union)


def kernel_and_union(tmp_path, name, text, layers):
    """The script (text) in kernel overlayfs and in the example, each on its own copy of the
    layers that layers(base) makes (lower, upper, work, merged): their outputs (JSON)."""
    need_root()
    script = tmp_path / name
    script.write_text(text)
    lower, upper, work, merged = layers(tmp_path / "kernel")
    kernel = kernel_output([lower], upper, work, merged, script)
    lower, upper, _, merged = layers(tmp_path / "union")
    return kernel, union_output([lower], upper, merged, script)


def assert_same_steps(expected, got, what):
    for e, g in zip(expected, got):
        assert g == e, f"step {e[0]!r}: {what[0]} {e[1]!r}, {what[1]} {g[1]!r}"
    assert len(got) == len(expected)


def test_union_reads_what_kernel_overlayfs_reads(tmp_path):
    need_root()
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    kernel = kernel_run(tmp_path / "kernel", script)
    union = ldpfuse_run(tmp_path / "union", script, "yes")
    assert_same_steps(kernel, union, ("kernel overlayfs", "the union"))
    # what the comparison covered: a merged directory, a lower whiteout, an opaque lower one
    first = dict(kernel[0][1])
    assert first["./a"] == ["drwxr-xr-x", 0, 0, True]
    assert "./b.txt" not in first and "./d/d2.txt" not in first and "./d/d1.txt" in first


def test_without_union_the_example_reads_what_kernel_overlayfs_reads(tmp_path):
    need_root()
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    kernel = kernel_run(tmp_path / "kernel", script)
    python = ldpfuse_run(tmp_path / "python", script, "no")
    assert_same_steps(kernel, python, ("kernel overlayfs", "-o union=no"))


# fuse-overlayfs' forms, which kernel overlayfs does not read: the union against the
# example's methods (-o union=no), in the upper layer and in a lower one of two.
WH_SCRIPT = r"""
import json, os, stat, sys
m = sys.argv[1]
out = {}
for d, dirs, files in os.walk(m):
    for n in dirs + files:
        p = os.path.join(d, n)
        st = os.lstat(p)
        out[os.path.relpath(p, m)] = [stat.filemode(st.st_mode), st.st_size]
for p in ("a/gone.txt", "a/.wh.gone.txt", "o/old.txt", "low/hidden.txt", ".wh..wh..opq"):
    out[p] = os.path.lexists(os.path.join(m, p))
print(json.dumps(out, sort_keys=True))
"""


def test_union_reads_fuse_overlayfs_whiteout_files(tmp_path):
    results = {}
    for union in ("yes", "no"):
        base = tmp_path / union
        low1, low2, upper, merged = (base / n for n in ("low1", "low2", "upper", "merged"))
        for d in (low1 / "low", low2 / "a", low2 / "o", low2 / "low", upper / "a", upper / "o"):
            d.mkdir(parents=True)
        for f in (low2 / "a" / "gone.txt", low2 / "a" / "kept.txt", low2 / "o" / "old.txt",
                  low2 / "low" / "hidden.txt", low2 / "low" / "shown.txt"):
            f.write_text(f.name)
        (upper / "a" / ".wh.gone.txt").write_text("")
        (upper / "o" / ".wh..wh..opq").write_text("")
        (upper / "o" / "mine.txt").write_text("mine")
        (low1 / "low" / ".wh.hidden.txt").write_text("")    # a whiteout file in a lower layer
        (low1 / "low" / "top.txt").write_text("top")
        script = tmp_path / "wh.py"
        script.write_text(WH_SCRIPT)
        r = run_ldp(OVERLAY, [f"{low1}:{low2}", upper], [sys.executable, script, merged], merged,
                    options={"union": union}, mode="shared", timeout=TIMEOUT)
        assert r.returncode == 0, r.describe()
        results[union] = json.loads(r.stdout)
    assert results["yes"] == results["no"]
    seen = results["yes"]
    assert seen["a/gone.txt"] is False and seen["o/old.txt"] is False and seen["low/hidden.txt"] is False
    assert seen["a/kept.txt"][1] == len("kept.txt") and "low/shown.txt" in seen and "low/top.txt" in seen


# A class whose read methods fail: with the union, the reads of the merged view never
# reach them (the preload answers); with -o union=no they do, and the command fails.
NO_READS = r"""
import sys
sys.path.insert(0, {examples!r})
from errno import EIO
from overlay import Overlay
from ldpfuse_py import FuseOSError

class NoReads(Overlay):
    def _no(self, *args):
        raise FuseOSError(EIO)
    getattr = readdir = opendir = readlink = access = _no

    def open(self, path, flags):
        if flags & 3 == 0:
            raise FuseOSError(EIO)
        return super().open(path, flags)
"""


@pytest.mark.parametrize("union", ["yes", "no"])
def test_union_reads_never_reach_python(tmp_path, union):
    fs = tmp_path / "noreads.py"
    fs.write_text(NO_READS.format(examples=str(EXAMPLES)))
    lower, upper, merged = tmp_path / "lower", tmp_path / "upper", tmp_path / "merged"
    (lower / "d" / "e").mkdir(parents=True)
    (lower / "d" / "f.txt").write_text("lower\n")
    (lower / "d" / "l").symlink_to("f.txt")
    upper.mkdir()
    (upper / "d").mkdir()
    (upper / "d" / "u.txt").write_text("upper\n")
    cmd = ["sh", "-c", 'cd "$1" && find . | sort && cat d/f.txt d/u.txt d/l && readlink d/l && '
           'ls -l d > /dev/null && test -r d/f.txt && echo ok', "sh", merged]
    r = run_ldp(f"{fs}:NoReads", [lower, upper], cmd, merged, options={"union": union}, mode="shared",
                timeout=TIMEOUT)
    if union == "no":
        assert r.returncode != 0, "the class's failing methods were not called: the test proves nothing"
        return
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == [".", "./d", "./d/e", "./d/f.txt", "./d/l", "./d/u.txt",
                                     "lower", "upper", "lower", "f.txt", "ok"]


# A long-lived process keeps the merged directories it walked (union.c); another process
# of the command then changes them through the class (copy-up at an open for writing,
# whiteouts, an opaque mkdir): the first must read the new state at once, as in the kernel.
KEEPER = r"""
import errno, json, os, subprocess, sys
m = sys.argv[1]
os.chdir(m)
def look(p):
    try:
        st = os.lstat(p)
        data = open(p).read() if os.path.isfile(p) else sorted(os.listdir(p))
        return [oct(st.st_mode), data]
    except OSError as e:
        return errno.errorcode[e.errno]
names = ["d/f.txt", "d/g.txt", "d/sub", "d/sub/s.txt", "d/sub/deeper/t.txt", "d"]
before = [[look(p) for p in names] for _ in range(20)][-1]   # walked often enough to be kept
seen = [before]
# an append alone: the copy-up of d and f.txt is the class's open for writing, no name made
for change in ("echo more >> d/f.txt", "rm d/g.txt && rm -r d/sub && mkdir d/sub && echo new > d/sub/s.txt"):
    subprocess.run(["sh", "-c", change], check=True)
    seen.append([look(p) for p in names])
print(json.dumps(seen))
"""


def test_union_sees_what_another_process_changed(tmp_path):
    def layers(base):
        lower, upper, work, merged = (base / n for n in ("lower", "upper", "work", "merged"))
        (lower / "d" / "sub" / "deeper").mkdir(parents=True)
        for f in ("d/f.txt", "d/g.txt", "d/sub/s.txt", "d/sub/deeper/t.txt"):
            (lower / f).write_text(f + "\n")
        for d in (upper, work, merged):
            d.mkdir()
        return lower, upper, work, merged

    want, got = kernel_and_union(tmp_path, "keeper.py", KEEPER, layers)
    assert got == want
    assert want[1][0][1] == "d/f.txt\nmore\n"
    assert want[2][2] == ["0o40755", ["s.txt"]]


# A process that looks names up over and over in a merged directory learns what its upper
# layer holds (vfs/union_names.c), and from then on asks that layer only for the names it
# has; another process of the command then makes a name the upper layer lacked, whiteouts
# a lower one, makes one again over its whiteout, a name at the root, a directory, and
# changes the mode of the kept directory: each change must be seen at the first look after
# it, as in the kernel.
LEARNER = r"""
import errno, json, os, subprocess, sys
m = sys.argv[1]
os.chdir(m)
def look(p):
    try:
        st = os.lstat(p)
        data = open(p).read() if os.path.isfile(p) else sorted(os.listdir(p))
        return [oct(st.st_mode), data]
    except OSError as e:
        return errno.errorcode[e.errno]
names = ["d/f.txt", "d/g.txt", "d/u.txt", "d/new.txt", "d/.wh.f.txt", "top.txt", "new_top", "d", "."]
seen = []
for change in ("echo new > d/new.txt", "rm d/g.txt", "rm d/f.txt && echo again > d/f.txt",
               "echo t > new_top", "mkdir d/sub && echo s > d/sub/s.txt", "chmod 700 d"):
    for _ in range(20):                     # kept and learned: the names the layers hold
        [look(p) for p in names]
    subprocess.run(["sh", "-c", change], check=True)
    seen.append([look(p) for p in names + ["d/sub/s.txt"]])
print(json.dumps(seen))
"""


def test_union_learned_names_see_another_process_changes(tmp_path):
    def layers(base):
        lower, upper, work, merged = (base / n for n in ("lower", "upper", "work", "merged"))
        (lower / "d").mkdir(parents=True)
        for f in ("d/f.txt", "d/g.txt", "top.txt"):
            (lower / f).write_text(f + "\n")
        (upper / "d").mkdir(parents=True)       # d merged from the start: two layers to learn
        (upper / "d" / "u.txt").write_text("u\n")
        for d in (work, merged):
            d.mkdir()
        return lower, upper, work, merged

    want, got = kernel_and_union(tmp_path, "learner.py", LEARNER, layers)
    assert got == want
    after = want
    assert after[0][3] == ["0o100644", "new\n"] and after[1][1] == "ENOENT"
    assert after[2][0] == ["0o100644", "again\n"] and after[3][6] == ["0o100644", "t\n"]
    assert after[4][9] == ["0o100644", "s\n"]
    assert after[5][7][0] == "0o40700"     # stat of a kept directory: the walk's answer, as true


def test_union_lists_a_directory_its_reader_may_read_but_not_search(shared_tmp):
    """A directory of mode 0600 (read, no search): its names can be listed, and it can be
    opened, as natively (pjdfstest open/06.t); only its entries cannot be reached."""
    need_root()
    lower, upper, merged = (shared_tmp / n for n in ("lower", "upper", "merged"))
    for layer, names in ((lower, ("a", "b")), (upper, ("c",))):
        (layer / "d").mkdir(parents=True)
        for n in names:
            (layer / "d" / n).write_text(n)
        for p in (layer, layer / "d", *(layer / "d").iterdir()):
            os.chown(p, NOBODY, NOBODY)
        os.chmod(layer / "d", 0o600)
    probe = ("import os, sys; d = sys.argv[1] + '/d'; os.close(os.open(d, os.O_RDONLY)); "
             "print(sorted(os.listdir(d)))")
    native = run_native(as_nobody(sys.executable, "-c", probe, lower), env=base_env())
    assert native.stdout == "['a', 'b']\n", native.describe()
    r = run_ldp(OVERLAY, [lower, upper], as_nobody(sys.executable, "-c", probe, merged), merged,
                options={"allow_other": None}, mode="shared", timeout=TIMEOUT)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "['a', 'b', 'c']\n"


def test_union_refuses_a_listing_its_owner_may_not_read(shared_tmp):
    """opendir of a merged directory skips the kernel's check of read permission where the
    caller owns the top directory and its mode lets the owner read (vfs/union_dirs.c
    owner_may_read): an owner without the read bit (mode 0300) is still refused, as
    natively, and one with it (0700) still lists, stat first or not (the walk kept)."""
    need_root()
    lower, upper, merged = (shared_tmp / n for n in ("lower", "upper", "merged"))
    for layer in (lower, upper):
        for d in ("noread", "owned"):
            (layer / d).mkdir(parents=True)
            (layer / d / f"{layer.name}.txt").write_text(layer.name)
            for p in (layer, layer / d, layer / d / f"{layer.name}.txt"):
                os.chown(p, NOBODY, NOBODY)
    os.chmod(upper / "noread", 0o300)
    os.chmod(upper / "owned", 0o700)
    probe = ("import errno, os, sys\n"
             "def ls(d):\n"
             "    try:\n"
             "        return sorted(os.listdir(d))\n"
             "    except OSError as e:\n"
             "        return errno.errorcode[e.errno]\n"
             "m = sys.argv[1]\n"
             "out = [ls(m + '/noread'), ls(m + '/owned')]\n"
             "os.stat(m + '/noread'); os.stat(m + '/owned')\n"
             "print(out + [ls(m + '/noread'), ls(m + '/owned')])\n")
    native = run_native(as_nobody(sys.executable, "-c", probe, upper), env=base_env())
    assert native.stdout == "['EACCES', ['upper.txt'], 'EACCES', ['upper.txt']]\n", native.describe()
    r = run_ldp(OVERLAY, [lower, upper], as_nobody(sys.executable, "-c", probe, merged), merged,
                options={"allow_other": None}, mode="shared", timeout=TIMEOUT)
    assert r.returncode == 0, r.describe()
    assert r.stdout == ("['EACCES', ['lower.txt', 'upper.txt'], 'EACCES', "
                        "['lower.txt', 'upper.txt']]\n")


# A process that walked more merged directories than the old table held (100, each with a
# subdirectory) keeps them across changes made elsewhere through the mount (a create at the
# root, as git's index.lock, moves the count of changes); another process then changes some
# of them and the directories above others: what the keeper reads after each change must
# be the kernel's, at the first look (a kept stack is only as true as its layers' ctimes and
# its parent's walk, vfs/union.c still_true).
WALKER = r"""
import errno, json, os, subprocess, sys
m = sys.argv[1]
os.chdir(m)
def look(p):
    try:
        st = os.lstat(p)
        data = open(p).read() if os.path.isfile(p) else sorted(os.listdir(p))
        return [oct(st.st_mode), data]
    except OSError as e:
        return errno.errorcode[e.errno]
dirs = [f"d{i:03d}" for i in range(100)]
def walk():
    return [[look(f"{d}/f"), look(f"{d}/s"), look(f"{d}/s/g"), look(d)] for d in dirs]
seen = []
for change in ("echo x > lock", "rm lock && echo y > d005/new", "rm d010/f", "rm -r d020/s && mkdir d020/s",
               "echo z > d030/s/new", "chmod 700 d040/s", "mv d050/s/g d050/g2", "echo w > d060/f",
               "rm -r d070 && mkdir d070"):
    for _ in range(3):
        walk()
    subprocess.run(["sh", "-c", change], check=True)
    seen.append(walk())
print(json.dumps(seen))
"""


def test_union_kept_directories_across_changes_elsewhere(tmp_path):
    def layers(base):
        lower, upper, work, merged = (base / n for n in ("lower", "upper", "work", "merged"))
        for i in range(100):
            (lower / f"d{i:03d}" / "s").mkdir(parents=True)
            (lower / f"d{i:03d}" / "f").write_text(f"f{i}\n")
            (lower / f"d{i:03d}" / "s" / "g").write_text(f"g{i}\n")
        for i in range(0, 100, 3):     # a third merged from the start
            (upper / f"d{i:03d}").mkdir(parents=True)
            (upper / f"d{i:03d}" / "u").write_text("u\n")
        for d in (upper, work, merged):
            d.mkdir(exist_ok=True)
        return lower, upper, work, merged

    want, got = kernel_and_union(tmp_path, "walker.py", WALKER, layers)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"after change {i}: " + next(f"d{j:03d}: {a} != {b}" for j, (a, b) in enumerate(zip(g, w)) if a != b)
    assert want[2][10][0] == "ENOENT" and want[3][20][2] == "ENOENT" and want[5][40][1][0] == "0o40700"
    assert want[8][70] == ["ENOENT", "ENOENT", "ENOENT", ["0o40755", []]]
