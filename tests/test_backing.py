"""Backing trees (issue 33, docs/backing.md): a directory the class declares backed by a
lower directory is served by the preload itself, in the calling process with its own
rights, for every operation the class did not ask to see; no path leads out of the lower
directory; what the class asks to see still reaches its methods. The shared mode (the
launcher builds the objects and tells the command's processes what they declared)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import LOOPBACK, NOBODY, as_nobody, base_env, ldpfuse_run_argv

pytestmark = pytest.mark.skipif(os.environ.get("LDPFUSE_TEST_MODE", "shared") != "shared",
                                reason="backing trees are the shared mode's (docs/backing.md)")

HERE = os.path.dirname(os.path.abspath(__file__))


def ldp(tmp, fs, fs_args, script, *options, timeout=60):
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--trace", "--log-file", str(tmp / "trace.log"),
                                 *options, "--mountpoint", str(tmp / "mnt"), fs, *map(str, fs_args),
                                 "--", "sh", "-c", script]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=base_env(), cwd=str(tmp))
    log = (tmp / "trace.log").read_text() if (tmp / "trace.log").exists() else ""
    return r, log


def class_calls(log):
    "The class's methods the trace saw called, but for init and destroy."
    calls = []
    for line in log.splitlines():
        if line.startswith("ldpfuse[") and "(" in line:
            op = line.split("] ", 1)[1].split("(", 1)[0]
            if op not in ("init", "destroy"):
                calls.append(op)
    return calls


SCRIPT = """
cd mnt
echo one > f
cat f
mkdir d
echo two > d/g
mv d/g d/h
ln -s h d/l
cat d/l
chmod 600 f
touch -d @1000000000 f
stat -c '%n %s %a %Y' f d/h
ls d
rm d/h d/l
rmdir d
ls -a
cat missing 2>/dev/null || echo missing
"""
WANT = "one\ntwo\nf 4 600 1000000000\nd/h 4 644 {mtime}\nh\nl\n.\n..\nf\nmissing\n"


def test_a_backed_loopback_does_names_and_attributes_without_calling_the_class(tmp_path):
    """create, lookup (found and missing), mkdir, rename, symlink, readlink, chmod, utimens,
    stat, readdir, unlink and rmdir under a backed tree: the same results as natively, and
    the class is asked nothing."""
    native = tmp_path / "native"
    native.mkdir()
    want = subprocess.run(["sh", "-c", SCRIPT.replace("cd mnt", f"cd {native}")], capture_output=True,
                          text=True, env=base_env())
    lower = tmp_path / "lower"
    lower.mkdir()
    r, log = ldp(tmp_path, LOOPBACK, [lower], SCRIPT)
    assert r.returncode == 0, r.stderr
    # d/h's mtime is its creation time: the same line shape as natively
    assert r.stdout.splitlines()[:3] == want.stdout.splitlines()[:3], r.stdout
    assert [line.split()[:3] for line in r.stdout.splitlines()[3:4]] == \
        [line.split()[:3] for line in want.stdout.splitlines()[3:4]]
    assert r.stdout.splitlines()[4:] == want.stdout.splitlines()[4:], r.stdout
    assert class_calls(log) == [], log
    assert sorted(os.listdir(lower)) == ["f"]
    assert (lower / "f").read_text() == "one\n"
    assert oct(os.stat(lower / "f").st_mode & 0o777) == "0o600"


def test_backing_no_sends_every_operation_to_the_class(tmp_path):
    """-o backing=no: the same script through the loopback's methods (the test above can
    fail: the trace sees the class's calls when the tree is not backed)."""
    lower = tmp_path / "lower"
    lower.mkdir()
    r, log = ldp(tmp_path, LOOPBACK, [lower], SCRIPT, "-o", "backing=no")
    assert r.returncode == 0, r.stderr
    calls = set(class_calls(log))
    assert {"create", "mkdir", "rename", "symlink", "unlink", "rmdir", "chmod", "readdir"} <= calls, calls


def test_no_path_leads_out_of_the_lower_directory(tmp_path):
    """Symlinks among the directories that point out of the lower tree (absolute and
    relative) are not followed by the preload: a class with no methods of its own answers
    for them (ENOENT), and the directory outside is neither read nor written."""
    lower = tmp_path / "lower"
    outside = tmp_path / "outside"
    lower.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("outside\n")
    os.symlink(str(outside), lower / "abs")
    os.symlink("../outside", lower / "rel")
    os.mkdir(lower / "sub")
    os.symlink("../../outside", lower / "sub" / "up")
    os.symlink("../sub", lower / "sub" / "in")      # one that stays inside is followed
    (lower / "sub" / "f").write_text("inside\n")
    script = """
for p in abs rel sub/up; do
  cat mnt/$p/secret 2>/dev/null || echo "no read $p"
  (echo x > mnt/$p/new) 2>/dev/null || echo "no write $p"
  rm mnt/$p/secret 2>/dev/null || echo "no unlink $p"
done
cat mnt/sub/in/f
cat mnt/sub/../../outside/secret 2>/dev/null || echo "dotdot is the kernel's"
"""
    r, _ = ldp(tmp_path, f"{HERE}/fs_fixtures/backed.py:Bare", [lower], script)
    assert r.stdout.splitlines()[:9] == [f"no {what} {p}" for p in ("abs", "rel", "sub/up")
                                          for what in ("read", "write", "unlink")], r.stdout + r.stderr
    assert r.stdout.splitlines()[9] == "inside"
    assert sorted(os.listdir(outside)) == ["secret"]
    assert (outside / "secret").read_text() == "outside\n"


def test_what_the_class_asks_to_see_reaches_it(tmp_path):
    """Backing(lower, see={"create", "unlink"}): the class's create refuses names ending
    in .bad and its unlink keeps .keep files; everything else is the preload's."""
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "a.keep").write_text("kept\n")
    script = """
echo x > mnt/ok && echo made ok
(echo x > mnt/no.bad) 2>/dev/null || echo refused bad
rm mnt/a.keep 2>/dev/null || echo kept
rm mnt/ok && echo removed ok
cat mnt/a.keep
"""
    r, log = ldp(tmp_path, f"{HERE}/fs_fixtures/backed.py:Picky", [lower], script)
    assert r.stdout == "made ok\nrefused bad\nkept\nremoved ok\nkept\n", r.stderr
    assert sorted(os.listdir(lower)) == ["a.keep"]
    calls = class_calls(log)
    assert set(calls) == {"create", "unlink"}, log


def test_a_change_one_process_makes_is_seen_by_the_next_at_once(tmp_path):
    """The attribute caches: a size, a mode and a name changed by one process (the
    preload, on the lower tree) are what the next process sees, within attr_timeout."""
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "f").write_text("1\n")
    script = """
stat -c '%s %a' mnt/f
echo 22 >> mnt/f; chmod 640 mnt/f
stat -c '%s %a' mnt/f
mv mnt/f mnt/g
stat -c %s mnt/f 2>/dev/null || echo gone
stat -c %s mnt/g
"""
    r, _ = ldp(tmp_path, LOOPBACK, [lower], script)
    assert r.stdout == "2 644\n5 640\ngone\n5\n", r.stderr


def test_a_program_that_closes_every_fd_still_reaches_the_tree(tmp_path):
    """close_range over the lower directory's fd: the preload opens it again (it never
    uses a number the program may have reused), and a dup2 onto it is the program's."""
    lower = tmp_path / "lower"
    lower.mkdir()
    code = """
import os
os.stat("mnt")
os.listdir("mnt")
os.closerange(3, 1 << 16)
fd = os.open("/dev/null", os.O_RDONLY)
for n in range(3, 1024):
    try:
        os.dup2(fd, n)
    except OSError:
        break
open("mnt/after", "w").write("x")
print(sorted(os.listdir("mnt")))
"""
    r, _ = ldp(tmp_path, LOOPBACK, [lower], f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    assert r.stdout == "['after']\n", r.stderr
    assert (lower / "after").read_text() == "x"


# A program that looks at names in subdirectories often enough for its process to keep
# their directories open (vfs/backing_dirs.c keeps them from its 8th walk), then lets
# another process of the command (B, a child) change them, and looks again.
KEPT_DIRS = """
import os, subprocess, sys
root, b_script = sys.argv[1], sys.argv[2]
os.chdir(root)
def look(p):
    try:
        st = os.stat(p)
        with open(p) as f:
            return "%s %d %r" % (p, st.st_size, f.read())
    except OSError as e:
        return "%s %s" % (p, os.strerror(e.errno))
for _ in range(20):
    before = [look(p) for p in ("a/b/f", "x/b/f")]
print(*before, sep="\\n")
subprocess.run(["sh", "-c", b_script], check=True)
print(*[look(p) for p in ("a/b/f", "x/b/f", "c/b/f", "old")], sep="\\n")
"""

B_RENAMES = """
mv a c && mkdir -p a/b && printf 'the new f, longer\\n' > a/b/f
mv x/b/f old && rmdir x/b && mkdir x/b && printf 'x again\\n' > x/b/f
"""


def test_a_directory_another_process_renames_or_removes_is_not_used_from_before(tmp_path):
    """Process A looks at a/b/f and x/b/f many times (its process keeps a/b and x/b open);
    process B of the same command renames a to c and makes a new a/b/f, removes x/b and
    makes it again with another x/b/f. A's next stat and open see the new files, as
    natively (the same program on a native directory), not the ones its kept directories
    hold."""
    def tree(root):
        for d in ("a/b", "x/b"):
            os.makedirs(root / d)
        (root / "a/b/f").write_text("old f\n")
        (root / "x/b/f").write_text("old x\n")
    native = tmp_path / "native"
    tree(native)
    want = subprocess.run([sys.executable, "-c", KEPT_DIRS, str(native), B_RENAMES], capture_output=True,
                          text=True, env=base_env())
    assert want.returncode == 0, want.stderr
    lower = tmp_path / "lower"
    tree(lower)
    r, log = ldp(tmp_path, LOOPBACK, [lower],
                 " ".join(map(shlex.quote, [sys.executable, "-c", KEPT_DIRS, str(tmp_path / "mnt"), B_RENAMES])))
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout
    assert "a/b/f 18 'the new f, longer\\n'" in r.stdout and "c/b/f 6 'old f\\n'" in r.stdout
    assert class_calls(log) == [], log


SWAP = """
import os, subprocess, sys
root, b_script = sys.argv[1], sys.argv[2]
os.chdir(root)
def look(p):
    try:
        with open(p) as f:
            return "%s %d %r" % (p, os.stat(p).st_size, f.read())
    except OSError as e:
        return "%s %s" % (p, os.strerror(e.errno))
for _ in range(20):
    before = [look(p) for p in ("sub/d/f", "sub/e/f")]
print(*before, sep="\\n")
subprocess.run(["sh", "-c", b_script], check=True)
print(*[look(p) for p in ("sub/d/f", "sub/e/f")], sep="\\n")
for p in ("sub/d/new", "sub/e/new"):
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError as e:
        print(p, os.strerror(e.errno))
"""


def test_a_symlink_swapped_in_for_a_kept_directory_does_not_lead_out(tmp_path):
    """A keeps sub/d and sub/e open; B (the same command) moves them aside and puts
    symlinks out of the lower tree in their place (absolute and relative). A's next
    lookups through them are not the preload's: the class (no methods: ENOENT) answers,
    and the directory outside is neither read nor written."""
    lower = tmp_path / "lower"
    outside = tmp_path / "outside"
    for d in ("sub/d", "sub/e"):
        os.makedirs(lower / d)
        (lower / d / "f").write_text("inside\n")
    outside.mkdir()
    (outside / "f").write_text("outside, secret\n")
    b = f"mv sub/d sub/d.old && ln -s {shlex.quote(str(outside))} sub/d && mv sub/e sub/e.old && ln -s ../../outside sub/e"
    r, _ = ldp(tmp_path, f"{HERE}/fs_fixtures/backed.py:Bare", [lower],
               " ".join(map(shlex.quote, [sys.executable, "-c", SWAP, str(tmp_path / "mnt"), b])))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:4] == [
        "sub/d/f 7 'inside\\n'", "sub/e/f 7 'inside\\n'",
        "sub/d/f No such file or directory", "sub/e/f No such file or directory"], r.stdout + r.stderr
    # the class's create (Operations' default) refuses
    assert [line.split(" ", 1)[0] for line in lines[4:]] == ["sub/d/new", "sub/e/new"], r.stdout
    assert sorted(os.listdir(outside)) == ["f"]
    assert os.readlink(lower / "sub/d") == str(outside)


B_CHMODS = """
chmod 000 a && chmod 700 x/b
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_a_directory_another_process_closes_is_not_searched_through_what_was_kept(shared_tmp):
    """Run as a user without root's rights: A keeps a/b and x/b open, B of the same command
    takes the search right off a (chmod 000) and gives x/b to its owner alone (still
    itself). A's next stat of a/b/f is EACCES and x/b/f is still read, as natively: the
    kept a/b is not a way around a."""
    def tree(root):
        for d in ("a/b", "x/b"):
            os.makedirs(root / d)
        (root / "a/b/f").write_text("old f\n")
        (root / "x/b/f").write_text("old x\n")
        for dirpath, dirs, files in os.walk(root):
            for n in dirs + files:
                os.chown(os.path.join(dirpath, n), NOBODY, NOBODY)
        os.chown(root, NOBODY, NOBODY)
    native = shared_tmp / "native"
    tree(native)
    prog = [sys.executable, "-c", KEPT_DIRS]
    want = subprocess.run(as_nobody(*prog, str(native), B_CHMODS), capture_output=True, text=True,
                          env=base_env())
    assert want.returncode == 0, want.stderr
    assert "a/b/f Permission denied" in want.stdout, want.stdout
    lower = shared_tmp / "lower"
    tree(lower)
    cmd = " ".join(map(shlex.quote, as_nobody(*prog, str(shared_tmp / "mnt"), B_CHMODS)))
    r, _ = ldp(shared_tmp, LOOPBACK, [lower], cmd, "-o", "allow_other")
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout


DROPS = """
import os, sys
os.chdir(sys.argv[1])
def look(p):
    try:
        return "%s %d" % (p, os.stat(p).st_size)
    except OSError as e:
        return "%s %s" % (p, os.strerror(e.errno))
for _ in range(20):
    before = look("a/b/f")
print(before)
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
print(look("a/b/f"))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_a_process_that_drops_its_rights_walks_again(shared_tmp):
    """Root keeps a/b open (a is 0700, root's), then setuid()s to nobody: its next stat
    of a/b/f is EACCES, as natively (-o allow_other, so the tree still serves it): the
    directory root walked to is not nobody's way past a."""
    def tree(root):
        os.makedirs(root / "a/b")
        (root / "a/b/f").write_text("f\n")
        os.chmod(root / "a", 0o700)
    native = shared_tmp / "native"
    tree(native)
    want = subprocess.run([sys.executable, "-c", DROPS, str(native)], capture_output=True, text=True,
                          env=base_env())
    assert want.stdout == "a/b/f 2\na/b/f Permission denied\n", want.stdout + want.stderr
    lower = shared_tmp / "lower"
    tree(lower)
    r, _ = ldp(shared_tmp, LOOPBACK, [lower],
               " ".join(map(shlex.quote, [sys.executable, "-c", DROPS, str(shared_tmp / "mnt")])),
               "-o", "allow_other")
    assert r.stdout == want.stdout, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_another_user_is_refused_without_allow_other_and_has_its_own_rights_with_it(shared_tmp):
    """Without allow_other another user of the command goes to the server, which refuses it
    as over kernel FUSE; with it, the preload serves it with its own rights (a 0600 file of
    root's stays unreadable, a file it makes is its own)."""
    os.chmod(shared_tmp, 0o755)
    lower = shared_tmp / "lower"
    lower.mkdir()
    (lower / "secret").write_text("root only\n")
    os.chmod(lower / "secret", 0o600)
    (lower / "open").mkdir(mode=0o777)
    os.chmod(lower / "open", 0o777)
    m = shared_tmp / "mnt"
    nobody = " ".join(map(shlex.quote, as_nobody("sh", "-c", f"ls {m}/open && echo listed; "
                                                       f"cat {m}/secret || echo refused; "
                                                       f"echo n > {m}/open/mine && stat -c %u {m}/open/mine")))
    r, _ = ldp(shared_tmp, LOOPBACK, [lower], nobody)
    assert "listed" not in r.stdout and "allow_other" in r.stderr, r.stdout + r.stderr
    r, _ = ldp(shared_tmp, LOOPBACK, [lower], nobody, "-o", "allow_other")
    assert r.stdout == f"listed\nrefused\n{NOBODY}\n", r.stderr
    assert os.stat(lower / "open" / "mine").st_uid == NOBODY


def test_a_bad_declaration_is_one_clear_line(tmp_path):
    r, _ = ldp(tmp_path, f"{HERE}/fs_fixtures/backed.py:Unknown", [tmp_path], "true")
    assert r.returncode != 0
    assert "unknown operations ['frobnicate']" in r.stderr


def test_stat_of_names_in_many_directories_costs_one_system_call(tmp_path):
    """filebench spreads its files over thousands of directories and installs signal
    handlers: a backed stat there is one newfstatat, as natively: the name's directory
    kept open (vfs/backing_dirs.c, a table as large as RLIMIT_NOFILE allows: 64 entries
    missed at nearly every call among 300 directories) and no rt_sigprocmask pair around
    it (vfs/backing.c backing_getattr_here). System calls counted by strace -c."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: the system calls it counts are what this checks")
    exe = tmp_path / "backed_stats"
    subprocess.run(["gcc", "-O1", "-Wall", "-o", str(exe), os.path.join(HERE, "programs", "backed_stats.c")],
                   check=True)
    lower = tmp_path / "lower"
    lower.mkdir()
    dirs, rounds = 300, 10
    counts = tmp_path / "counts"
    r, _ = ldp(tmp_path, LOOPBACK, [lower],
               f"strace -f -c -o {counts} {exe} {tmp_path / 'mnt'} {dirs} {rounds}", timeout=120)
    assert r.returncode == 0 and "failed 0" in r.stdout, r.stdout + r.stderr
    calls = {}
    for line in counts.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    stats = dirs * rounds
    assert calls.get("newfstatat", 0) >= stats
    # the first walk of each directory, and again after attr_timeout (1 s) if strace is slow
    assert calls.get("openat2", 0) < stats // 3, calls
    assert calls.get("rt_sigprocmask", 0) < stats // 10, calls


OPENS = r"""
import os, sys
root, dirs, per, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
names = [f"{root}/d{d}/f{f}" for d in range(dirs) for f in range(per)]
for p in range(passes):
    if p == passes - 1:
        try:
            os.stat("/last-pass-starts-here")   # a mark in strace's output
        except OSError:
            pass
    for n in names:
        fd = os.open(n, os.O_RDONLY)
        os.read(fd, 100)
        os.close(fd)
print(len(names))
"""


def test_opens_of_thousands_of_names_look_at_each_once(tmp_path):
    """filebench's web-server opens 4,000 to 50,000 names over and over: a backed open looks
    at a name's type (fstatat) only when this process has not opened it as a regular file
    within attr_timeout (vfs/backing_regular.c). 6,000 names in 300 directories, opened in
    four passes within attr_timeout (30 s): the last pass makes no look at all (the table
    of 4,096 two-way slots it had held ~1,300 of them: ~4,700 looks each pass). Counted with
    strace after a mark."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: the system calls it counts are what this checks")
    lower = tmp_path / "lower"
    dirs, per = 300, 20
    for d in range(dirs):
        (lower / f"d{d}").mkdir(parents=True)
        for f in range(per):
            (lower / f"d{d}" / f"f{f}").write_bytes(b"x")
    prog = tmp_path / "opens.py"
    prog.write_text(OPENS)
    trace = tmp_path / "trace"
    r, _ = ldp(tmp_path, LOOPBACK, [lower],
               f"strace -f -e trace=newfstatat,stat -o {trace} {sys.executable} {prog} {tmp_path / 'mnt'} {dirs} {per} 4",
               "-o", "attr_timeout=30", timeout=300)
    assert r.returncode == 0 and r.stdout == f"{dirs * per}\n", r.stdout + r.stderr
    lines = trace.read_text().splitlines()
    mark = [i for i, line in enumerate(lines) if "/last-pass-starts-here" in line]
    assert mark, lines[-5:]
    looks = [line for line in lines if re.search(r'newfstatat\(\d+, "f\d+"', line)]
    last = [line for line in lines[mark[0]:] if re.search(r'newfstatat\(\d+, "f\d+"', line)]
    assert len(looks) >= dirs * per, looks[:3]     # the first pass looks at every name
    assert len(last) < dirs * per // 50, (len(last), last[:3])


MISSES = r"""
import errno, os, sys
root, n = sys.argv[1], int(sys.argv[2])
def err(call, *a):
    try:
        call(*a)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
out = [err(os.unlink, f"{root}/a/b/missing"), err(os.unlink, f"{root}/a/b/file/x"),
       err(os.unlink, f"{root}/a/gone/x"), err(os.rmdir, f"{root}/a/b/missing"),
       err(os.mkdir, f"{root}/a/gone/d"), err(os.symlink, "t", f"{root}/a/gone/l"),
       err(os.unlink, f"{root}/link/missing"), err(os.unlink, f"{root}/link/file")]
for i in range(n):
    err(os.unlink, f"{root}/a/b/missing{i}")
print(" ".join(out))
"""


def test_a_missing_name_under_a_tree_is_one_system_call_and_the_same_answer(tmp_path):
    """`rm -f` of a name that is not there: a backed unlink (rmdir, mkdir, symlink) that misses
    answers what the kernel answers on the lower tree, in one system call as natively: the
    tree's walk beneath the lower directory followed the symlinks among the directories, so
    the core does not resolve the directories (a newfstatat each) and ask again
    (vfs/backing.c ldp_backing_miss). A symlink among the directories inside the tree still
    leads where it leads natively. Counted by strace -c."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: the system calls it counts are what this checks")
    lower = tmp_path / "lower"
    (lower / "a" / "b").mkdir(parents=True)
    (lower / "a" / "b" / "file").write_text("x")
    os.symlink("a/b", lower / "link")
    prog = tmp_path / "misses.py"
    prog.write_text(MISSES)
    native = subprocess.run([sys.executable, str(prog), str(lower), "0"], capture_output=True, text=True)
    assert native.returncode == 0, native.stderr
    assert native.stdout.split() == ["ENOENT", "ENOTDIR", "ENOENT", "ENOENT", "ENOENT", "ENOENT", "ENOENT", "ok"]
    (lower / "a" / "b" / "file").write_text("x")
    n = 300
    counts = tmp_path / "counts"
    r, _ = ldp(tmp_path, LOOPBACK, [lower],
               f"strace -f -c -o {counts} {sys.executable} {prog} {tmp_path / 'mnt'} {n}", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == native.stdout, r.stderr
    assert not (lower / "a" / "b" / "file").exists()
    calls = {}
    for line in counts.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    assert calls.get("unlinkat", 0) >= n
    # before: two more newfstatat per unlink (a, a/b), 600 here; Python's start makes ~100
    assert calls.get("newfstatat", 0) < n, calls


OPEN_CASES = r"""
import errno, os, stat, sys
root = sys.argv[1]
def p(name):
    return os.path.join(root, name)
def attempt(label, name, flags, mode=0o644):
    try:
        fd = os.open(p(name), flags, mode)
    except OSError as e:
        print(label, errno.errorcode[e.errno])
        return
    st = os.fstat(fd)
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else "file"
    if kind == "file" and (flags & os.O_ACCMODE) != os.O_RDONLY:
        os.write(fd, label.encode() + b"\n")
    print(label, "ok", kind, oct(st.st_mode & 0o7777))
    os.close(fd)
W, RW, C, X, T = os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_EXCL, os.O_TRUNC
NB, NF, D = os.O_NONBLOCK, os.O_NOFOLLOW, os.O_DIRECTORY
os.umask(0o027)
attempt("create", "new", W | C, 0o666)
attempt("create-again", "new", W | C | T, 0o600)
attempt("excl-existing", "new", W | C | X)
attempt("excl-new", "new2", RW | C | X, 0o640)
attempt("read-known", "new", os.O_RDONLY)
attempt("read-known-again", "new", os.O_RDONLY)
attempt("write-dir", "d", W)
attempt("rdwr-dir", "d", RW)
attempt("create-dir", "d", W | C)
attempt("read-dir", "d", os.O_RDONLY)
attempt("write-link", "link", W | os.O_APPEND)
attempt("write-link-nofollow", "link", W | NF)
attempt("create-dangling", "dangling", W | C, 0o600)
attempt("write-fifo-no-reader", "fifo", W | NB)
attempt("read-fifo", "fifo", os.O_RDONLY | NB)
attempt("write-missing", "missing", W)
attempt("create-in-missing-dir", "nodir/x", W | C)
attempt("write-under-file", "new/x", W | C)
attempt("directory-flag-on-file", "new", os.O_RDONLY | D)
os.chmod(p("ro"), 0o444)
attempt("write-read-only", "ro", W)
attempt("read-read-only", "ro", os.O_RDONLY)
for name in sorted(os.listdir(root)):
    st = os.lstat(p(name))
    body = open(p(name)).read().replace("\n", "|") if stat.S_ISREG(st.st_mode) else ""
    print(name, oct(st.st_mode), body)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="running the opens as another user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_opens_under_a_tree_answer_as_natively(shared_tmp):
    """The opens a tree makes in one system call before the core's lookup (vfs/backing.c
    backing_open_here: for writing, O_CREAT and all; for reading, a name opened a moment
    ago; O_EXCL) answer every case as the kernel does natively on the same tree: a
    directory, a symlink followed or not, a dangling one created through, a FIFO without a
    reader, a missing name or directory, a file in the way, a read-only file, the modes
    under a umask. Run as nobody, so that the rights are a caller's, not root's."""
    prog = shared_tmp / "opens.py"
    prog.write_text(OPEN_CASES)
    for which in ("native", "lower"):
        d = shared_tmp / which
        d.mkdir()
        (d / "d").mkdir()
        (d / "target").write_text("t\n")
        os.symlink("target", d / "link")
        os.symlink("made-through", d / "dangling")
        os.mkfifo(d / "fifo")
        (d / "ro").write_text("r\n")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(d)], check=True)
    native = subprocess.run(as_nobody(sys.executable, str(prog), str(shared_tmp / "native")),
                            capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    (shared_tmp / "mnt").mkdir()
    subprocess.run(["chown", f"{NOBODY}:{NOBODY}", str(shared_tmp / "mnt")], check=True)
    r, _ = ldp(shared_tmp, LOOPBACK, [shared_tmp / "lower"],
               " ".join(shlex.quote(a) for a in as_nobody(sys.executable, str(prog), str(shared_tmp / "mnt"))),
               "-o", "allow_other")
    assert r.returncode == 0, r.stderr
    assert r.stdout == native.stdout, r.stdout + r.stderr
    assert "write-fifo-no-reader ENXIO" in native.stdout and "create-dangling ok file" in native.stdout
