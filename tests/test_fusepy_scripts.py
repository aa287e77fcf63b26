"""fusepy scripts run unchanged: `ldpfuse-run script.py ARG... -- COMMAND`.

The scripts in tests/fusepy_scripts/ use fusepy's documented API only
(`from fuse import FUSE, ...`, `import mfusepy`, `FUSE(ops, mountpoint,
foreground=True, ...)`); the mount point comes from their own FUSE() call.
Expectations come from the native run of the same commands, or from the
data the test wrote.
"""

import errno
import os
import sys
from pathlib import Path

import pytest

from conftest import base_env, ldpfuse_run_argv, need, run

SCRIPTS = Path(__file__).resolve().parent / "fusepy_scripts"
TIMEOUT = 90


def ldp(ws, script, *args, cmd, options=(), env=None):
    """ldpfuse-run [options] SCRIPT ARGS -- CMD, run from the test's tmp dir."""
    argv = ldpfuse_run_argv() + list(options) + [str(SCRIPTS / script)]
    argv += [str(a) for a in args] + ["--"] + [str(c) for c in cmd]
    return run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=env or base_env(HOME=ws.home))


def build_tree(root):
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("alpha\n" * 50)
    (root / "b.bin").write_bytes(bytes(range(256)) * 40)
    (root / "link").symlink_to("docs/a.txt")


COREUTILS_SCRIPT = r"""
cd "$D"
ls -l --time-style=+ docs | tail -n +2 | sed 's/^\(.\{10\}\).* \([^ ]*\)$/\1 \2/'
cat docs/a.txt | wc -c
mkdir new
cp b.bin new/copy.bin
cmp b.bin new/copy.bin && echo same
mv new/copy.bin new/moved.bin
ln -s moved.bin new/l
readlink new/l
echo appended >> docs/a.txt
tail -n 1 docs/a.txt
truncate -s 10 new/moved.bin
stat -c '%s %F' new/moved.bin
rm new/l
ls new
rmdir new 2>&1 || true
rm new/moved.bin
rmdir new
python3 -c 'import os; print(sorted(os.listdir(".")))'
"""


def test_fusepy_loopback_script_runs_coreutils_like_native(ws):
    need("python3")
    ws.populate(build_tree)
    log = ws.tmp / "fs.log"
    native = ws.native_run(["bash", "-eu", ws.write_script("s.sh", COREUTILS_SCRIPT)])
    assert native.returncode == 0, native.describe()
    env = ws.env(ws.mnt, ws.ldp_out)
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt, options=["--log-file", log],
            cmd=["bash", "-eu", ws.tmp / "s.sh"], env=env)
    got = ws.normalize(r.stdout, ws.mnt, ws.ldp_out)
    assert r.returncode == 0, r.describe()
    assert got == native.stdout, r.describe()
    ws.assert_lower_matches_native()
    # the script's logging.basicConfig(DEBUG) + LoggingMixIn: fusepy's lines, in the log
    text = log.read_text()
    assert "DEBUG:fuse.log-mixin:-> getattr" in text
    assert "<- getattr" in text
    assert not ws.mnt.exists(), "the mount point was created on disk"


def test_mount_point_comes_from_the_scripts_fuse_call_and_mountpoint_overrides_it(ws):
    (ws.lower / "f").write_text("from the lower dir\n")
    other = ws.tmp / "elsewhere"
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt, options=["--log-file", ws.tmp / "l"],
            cmd=["cat", ws.mnt / "f"])
    assert r.returncode == 0 and r.stdout == "from the lower dir\n", r.describe()
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt,
            options=["--mountpoint", other, "--log-file", ws.tmp / "l"],
            cmd=["sh", "-c", f"cat {other}/f; ls {ws.mnt} 2>&1 >/dev/null | wc -l"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "from the lower dir\n1\n", r.describe()


def test_relative_mount_point_in_the_script_is_relative_to_the_launchers_cwd(ws):
    (ws.lower / "f").write_text("relative\n")
    r = ldp(ws, "loopback.py", ws.lower, "mnt", options=["--log-file", ws.tmp / "l"],
            cmd=["cat", ws.tmp / "mnt" / "f"])
    assert r.returncode == 0 and r.stdout == "relative\n", r.describe()


MEMORY_SNIPPET = r"""
import os, sys
M = sys.argv[1]
with open(M + '/a', 'w') as f:
    f.write('hello memory')
print(open(M + '/a').read())
os.rename(M + '/a', M + '/b')
os.symlink('b', M + '/l')
print(os.readlink(M + '/l'))
os.setxattr(M + '/b', 'user.k', b'v1')
print(os.getxattr(M + '/b', 'user.k'), os.listxattr(M + '/b'))
os.truncate(M + '/b', 5)
print(open(M + '/b', 'rb').read())
os.mkdir(M + '/d')
print(sorted(os.listdir(M)))
os.unlink(M + '/b')
print(os.path.exists(M + '/b'))
"""


def test_fusepy_memory_script_in_one_python_process(ws):
    script = ws.write_script("mem.py", MEMORY_SNIPPET)
    r = ldp(ws, "memory.py", ws.mnt, options=["--log-file", ws.tmp / "l"],
            cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == [
        "hello memory", "b", "b'v1' ['user.k']", "b'hello'", "['b', 'd', 'l']", "False"], r.describe()


def test_memory_scripts_getxattr_str_is_encoded_so_ls_works(ws):
    # fusepy's memory example answers '' for a missing xattr; ls -l asks for
    # security.selinux and ACLs on every name
    log = ws.tmp / "fs.log"
    r = ldp(ws, "memory.py", ws.mnt, options=["--log-file", log],
            cmd=["ls", "-la", ws.mnt])
    assert r.returncode == 0, r.describe() + log.read_text()
    assert r.stderr == ""
    assert "returned str, not bytes" in log.read_text()


def test_fuse_get_context_names_the_calling_process(ws):
    r = ldp(ws, "context.py", ws.mnt, cmd=[
        sys.executable, "-c",
        "import os, sys; M = sys.argv[1]\n"
        "print(open(M + '/pid').read().strip() == str(os.getpid()))\n"
        "print(open(M + '/uid').read().strip() == str(os.getuid()))\n"
        "print(sorted(os.listdir(M)))", ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "True\nTrue\n['gid', 'pid', 'uid']\n", r.describe()


def test_ro_option_makes_writes_fail_with_erofs(ws):
    r = ldp(ws, "context.py", ws.mnt, cmd=[
        sys.executable, "-c",
        "import errno, os, sys; M = sys.argv[1]\n"
        "for call in (lambda: open(M + '/new', 'w'), lambda: os.mkdir(M + '/d'),\n"
        "             lambda: open(M + '/uid', 'r+')):\n"
        "    try:\n"
        "        call()\n"
        "    except OSError as e:\n"
        "        print(errno.errorcode[e.errno])\n"
        "print(bool(os.statvfs(M).f_flag & os.ST_RDONLY))", ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "EROFS\nEROFS\nEROFS\nTrue\n", r.describe()


def test_raw_fi_gives_the_file_system_its_own_file_info(ws):
    script = ws.write_script("raw.py", (
        "import sys; M = sys.argv[1]\n"
        "print(open(M + '/hello').read(), end='')\n"
        "with open(M + '/new', 'w') as f:\n"
        "    f.write('written through fi.fh\\n')\n"
        "print(open(M + '/new').read(), end='')\n"))
    log = ws.tmp / "fs.log"
    r = ldp(ws, "rawfi.py", ws.mnt, options=["--log-file", log],
            cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe() + (log.read_text() if log.exists() else "")
    assert r.stdout == "hello from raw_fi\nwritten through fi.fh\n", r.describe()
    r = ldp(ws, "rawfi.py", ws.mnt, cmd=["cat", ws.mnt / "hello"])
    assert r.stdout == "hello from raw_fi\n", r.describe()


def test_mfusepy_script_with_overrides_and_use_ns(ws):
    r = ldp(ws, "mfusepy_style.py", ws.mnt, cmd=[
        "sh", "-c", f"ls {ws.mnt}; cat {ws.mnt}/b.txt; stat -c '%s %Y' {ws.mnt}/a.txt"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "a.txt\nb.txt\nbravo bravo\n6 1000000000\n", r.describe()


def test_str_from_read_is_encoded_and_logged_and_script_output_stays_out(ws):
    log = ws.tmp / "fs.log"
    r = ldp(ws, "strread.py", ws.mnt, options=["--log-file", log],
            cmd=["cat", ws.mnt / "text"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "plain text from a str\n", r.describe()
    text = log.read_text()
    assert "read('/text') returned str" in text
    # what the script prints (before and after FUSE()) goes to the log
    assert "mounting on" in text and "mounting on" not in r.stdout + r.stderr


def test_keyboard_interrupt_in_fs_code_reaches_the_python_program(ws):
    # fusepy loses a Ctrl-C that arrives while the file system's code runs
    script = ws.write_script("ki.py", (
        "import sys\n"
        "try:\n"
        "    try:\n"
        "        open(sys.argv[1] + '/boom').read()\n"
        "    except OSError as e:\n"
        "        print('open failed', e.errno)\n"
        "    for i in range(1000):\n"
        "        pass\n"
        "    print('the interrupt was lost')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"))
    log = ws.tmp / "fs.log"
    # the file system's code runs inside the Python program: the embedded mode
    r = ldp(ws, "strread.py", ws.mnt, options=["--mode", "embedded", "--log-file", log],
            cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines()[-1] == "interrupted", r.describe()
    # signals stay blocked while FS code runs (a handler must not re-enter it), so the
    # interrupt raised inside open() is delivered when open() returns, and Python sees it
    # in the next FS call made for the program (then it is logged there) or, when there is
    # none before (Python's fstat of the file is answered from the attributes the open's
    # lookup brought), in the program itself; never lost
    text = log.read_text()
    assert "KeyboardInterrupt during" not in text or "'/boom'" in text, text


def test_script_does_not_become_the_programs_main_nor_shadow_its_fuse_module(ws):
    # the program has its own module named fuse (as fusepy would be), imported
    # before and after it touches a mount served by a script doing `from fuse import`
    own = ws.tmp / "own_modules"
    own.mkdir()
    (own / "fuse.py").write_text('WHO = "the program\'s own fuse module"\n')
    (ws.lower / "f").write_text("served\n")
    script = ws.write_script("host.py", (
        "import os, sys\n"
        f"sys.path.insert(0, {str(own)!r})\n"
        "import fuse\n"
        "M = sys.argv[1]\n"
        "print(open(M + '/f').read(), end='')\n"
        "import fuse as again\n"
        "print(fuse.WHO, again is fuse, sys.modules['fuse'] is fuse)\n"
        "print(sys.modules['__main__'].__file__ == __file__, __name__)\n"
        "print('mfusepy' in sys.modules)\n"))
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt, options=["--log-file", ws.tmp / "l"],
            cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == [
        "served", "the program's own fuse module True True", "True __main__", "False"], r.describe()


def test_real_fusepy_in_the_program_is_left_alone(ws):
    try:
        import fuse  # noqa: F401  (the real fusepy, needs libfuse)
    except Exception as e:
        pytest.skip(f"fusepy is not importable here ({type(e).__name__}): nothing to shadow")
    real = os.path.realpath(fuse.__file__)
    script = ws.write_script("host.py", (
        "import os, sys\n"
        "print(open(sys.argv[1] + '/b.txt').read(), end='')\n"
        "import fuse\n"
        "print(os.path.realpath(fuse.__file__))\n"))
    r = ldp(ws, "mfusepy_style.py", ws.mnt, cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == ["bravo bravo", real], r.describe()


def test_fusepy_class_spec_with_top_level_fuse_import_loads(ws):
    # file.py:Class form of a fusepy module: `from fuse import ...` at top level
    (ws.lower / "f").write_text("class form\n")
    argv = ldpfuse_run_argv() + ["--mountpoint", ws.mnt, "--log-file", ws.tmp / "l",
                                 f"{SCRIPTS / 'loopback.py'}:Loopback", ws.lower, "--",
                                 "sh", "-c", f"cat {ws.mnt}/f; ls -l {ws.mnt} >/dev/null"]
    r = run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 0 and r.stdout == "class form\n", r.describe()
    assert r.stderr == "", r.describe()  # getxattr = None: ENOTSUP, not EIO


@pytest.mark.parametrize("script,args,mention", [
    ("usage_error.py", ["only-one"], "usage:"),
    ("memory.py", [], "required"),  # argparse: the following arguments are required
])
def test_script_that_exits_before_fuse_is_bad_input(ws, script, args, mention):
    marker = ws.tmp / "ran"
    r = ldp(ws, script, *args, cmd=["touch", marker])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, r.describe()
    assert len(lines) == 1 and mention in lines[0], r.describe()
    assert not marker.exists()


def test_script_without_fuse_call_and_o_option_are_refused(ws):
    plain = ws.write_script("plain.py", "print('no FUSE here')\n")
    argv = ldpfuse_run_argv() + [str(plain), "--", "true"]
    r = run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 2 and "did not call FUSE" in r.stderr, r.describe()
    r = ldp(ws, "memory.py", ws.mnt, options=["-o", "x=1"], cmd=["true"])
    assert r.returncode == 2 and "-o" in r.stderr, r.describe()
    assert len(r.stderr.strip().splitlines()) == 1, r.describe()


def test_errno_from_fusepy_script_reaches_the_program(ws):
    r = ldp(ws, "context.py", ws.mnt, cmd=[
        sys.executable, "-c",
        "import errno, os, sys\n"
        "try:\n    os.stat(sys.argv[1] + '/missing')\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno])", ws.mnt])
    assert r.returncode == 0 and r.stdout == "ENOENT\n", r.describe()
    assert errno.ENOENT  # the name printed is the errno the FS raised


def test_trace_works_on_a_fusepy_script(ws):
    log = ws.tmp / "trace.log"
    r = ldp(ws, "context.py", ws.mnt, options=["--trace", "--log-file", log],
            cmd=["cat", ws.mnt / "uid", ws.mnt / "nope"])
    assert r.returncode == 1 and r.stdout == f"{os.getuid()}\n", r.describe()
    text = log.read_text()
    assert "getattr('/nope') = ENOENT" in text, text
    assert "read('/uid', " in text, text


def test_scripts_logging_config_leaves_the_python_programs_root_logger_alone(ws):
    (ws.lower / "f").write_text("x\n")
    script = ws.write_script("host.py", (
        "import logging, sys\n"
        "print(open(sys.argv[1] + '/f').read(), end='')\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
        "print(len(logging.getLogger('fuse').handlers) > 0)\n"))
    log = ws.tmp / "fs.log"
    # the script runs inside the Python program (the embedded mode)
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt, options=["--mode", "embedded", "--log-file", log],
            cmd=[sys.executable, script, ws.mnt])
    assert r.returncode == 0, r.describe()
    # the script called logging.basicConfig(level=DEBUG): that serves 'fuse' only
    assert r.stdout == "x\n0 WARNING\nTrue\n", r.describe()
    assert "DEBUG:fuse.log-mixin:-> open /" in log.read_text()


@pytest.mark.parametrize("form", ["script", "class"])
def test_relative_fs_argument_means_the_same_in_a_process_that_changed_directory(ws, form):
    (ws.lower / "f").write_text("found below\n")
    elsewhere = ws.tmp / "elsewhere"
    elsewhere.mkdir()
    cmd = ["sh", "-c", f"cd {elsewhere} && cat {ws.mnt}/f"]
    if form == "script":
        r = ldp(ws, "loopback.py", "lower", "mnt", options=["--log-file", ws.tmp / "l"], cmd=cmd)
    else:
        argv = ldpfuse_run_argv() + ["--mountpoint", "mnt", f"{SCRIPTS / 'loopback.py'}:Loopback",
                                     "lower", "--", *cmd]
        r = run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 0 and r.stdout == "found below\n", r.describe()


GIT_SQLITE_SCRIPT = r"""
cd "$D"
git init -q repo
cd repo
git config user.email t@example.com
git config user.name tester
printf 'one\n' > a.txt
mkdir sub && printf 'two\n' > sub/b.txt
git add . && git commit -qm first
printf 'three\n' >> a.txt
git status --short
git commit -qam second
git log --format=%s
git show HEAD:a.txt
sqlite3 db.sqlite 'CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);'
sqlite3 db.sqlite 'SELECT sum(x) FROM t;'
tar cf "$O/repo.tar" --exclude=.git . && tar tf "$O/repo.tar" | sort
"""


def test_fusepy_loopback_script_runs_git_sqlite3_and_tar_like_native(ws):
    need("git", "sqlite3", "tar")
    script = ws.write_script("gs.sh", GIT_SQLITE_SCRIPT)
    native = ws.native_run(["bash", "-eu", script])
    assert native.returncode == 0, native.describe()
    env = ws.env(ws.mnt, ws.ldp_out)
    r = ldp(ws, "loopback.py", ws.lower, ws.mnt, options=["--log-file", ws.tmp / "fs.log"],
            cmd=["bash", "-eu", script], env=env)
    assert r.returncode == 0, r.describe()
    assert ws.normalize(r.stdout, ws.mnt, ws.ldp_out) == native.stdout, r.describe()
    assert (ws.lower / "repo" / "db.sqlite").exists()


# ---- FusepyOps called directly, as the preload library calls it

from ldpfuse_py import FuseOSError, Operations  # noqa: E402
from ldpfuse_py.fuse_compat import FusepyOps, fuse_file_info  # noqa: E402


class Recorder(Operations):
    def __init__(self):
        self.calls = []

    def __call__(self, op, path, *args):
        self.calls.append((op, path) + args)
        return super().__call__(op, path, *args)

    def open(self, path, fi):
        fi.fh = 77
        return 0

    def read(self, path, size, offset, fi):
        return f"{type(fi).__name__}:{fi.fh}".encode()

    def release(self, path, fi):
        return 0

    def readdir(self, path, fh):
        return [".", "..", "caf\u00e9"]

    getxattr = None
    access = None
    statfs = None


def test_fusepy_ops_raw_fi_hands_the_same_file_info_to_every_call():
    inner = Recorder()
    ops = FusepyOps(inner, raw_fi=True)
    fh = ops("open", "/f", os.O_RDONLY | os.O_APPEND)
    assert isinstance(fh, int) and fh != 77  # ldpfuse's handle, mapped to the FS's fi
    assert ops("read", "/f", 10, 0, fh) == b"fuse_file_info:77"
    fi = inner.calls[0][2]
    assert isinstance(fi, fuse_file_info) and not fi.flags & os.O_APPEND
    ops("release", "/f", fh)
    assert inner.calls[-1][2] is fi
    assert ops.create_takes_fi


def test_fusepy_ops_none_operations_and_ro():
    ops = FusepyOps(Recorder(), ro=True)
    with pytest.raises(FuseOSError) as e:
        ops("getxattr", "/f", "user.x")
    assert e.value.errno == errno.ENOTSUP
    assert ops("access", "/f", os.R_OK) == 0
    for call in (("access", "/f", os.W_OK), ("mkdir", "/d", 0o755), ("open", "/f", os.O_RDWR),
                 ("unlink", "/f"), ("rename", "/a", "/b")):
        with pytest.raises(FuseOSError) as e:
            ops(*call)
        assert e.value.errno == errno.EROFS, call
    assert ops("statfs", "/")["f_flag"] & os.ST_RDONLY


def test_fusepy_ops_encoding_recodes_paths_and_names():
    inner = Recorder()
    ops = FusepyOps(inner, encoding="latin-1")
    # the program's UTF-8 bytes for 'é', as the preload library decodes them
    utf8_path = b"/\xc3\xa9".decode("utf-8", "surrogateescape")
    ops("readdir", utf8_path, 0)
    assert inner.calls[-1][1] == "/\u00c3\u00a9"  # the same bytes, read as latin-1
    names = ops("readdir", "/", 0)
    # 'é' from the FS is one latin-1 byte, handed to the program as that byte
    assert os.fsencode(names[-1]) == b"caf\xe9"


def test_fusepy_ctypes_helpers_are_importable_from_the_compat_module(ws):
    # scripts import these for helpers and type checks; the names load lazily
    fs = ws.write_script("helpers.py", (
        "from fuse import FUSE, Operations, c_stat, c_timespec, set_st_attrs, time_of_timespec\n"
        "import sys, stat\n"
        "class H(Operations):\n"
        "    def getattr(self, path, fh=None):\n"
        "        st = c_stat()\n"
        "        set_st_attrs(st, {'st_mode': stat.S_IFDIR | 0o755, 'st_mtime': 7.25})\n"
        "        return {'st_mode': st.st_mode, 'st_nlink': 2,\n"
        "                'st_mtime': time_of_timespec(st.st_mtimespec)}\n"
        "FUSE(H(), sys.argv[1], foreground=True)\n"))
    argv = ldpfuse_run_argv() + [str(fs), str(ws.mnt), "--", "stat", "-c", "%f %Y", ws.mnt]
    r = run([str(a) for a in argv], timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 0 and r.stdout == "41ed 7\n", r.describe()


def test_fusepy_memory_script_in_shared_mode_is_one_tree_for_every_process(ws):
    log = ws.tmp / "fs.log"
    r = ldp(ws, "memory.py", ws.mnt, options=["--mode", "shared", "--log-file", log],
            cmd=["sh", "-c", f"echo hi > {ws.mnt}/a; cat {ws.mnt}/a; ls {ws.mnt}"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "hi\na\n", r.describe()
    # the script's own logging.basicConfig(DEBUG) still reaches the log in the
    # file system process (the launcher's check run must not have kept it)
    assert "DEBUG:fuse.log-mixin:-> create /a" in log.read_text()


def test_missing_script_is_named_in_one_line(ws):
    argv = ldpfuse_run_argv() + [str(ws.tmp / "no_such_script.py"), "mnt", "--", "true"]
    r = run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 2, r.describe()
    assert r.stderr.count("\n") == 1 and "no_such_script.py" in r.stderr, r.describe()
