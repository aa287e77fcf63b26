"""Shared fixtures for the real-program suite.

Every test here runs a real program twice: once natively in a plain
directory, once under ``ldpfuse-run`` on a mount point that does not exist on
disk, and compares what the two runs printed after the directory names are
replaced by placeholders (``$D`` for the working directory, ``$O`` for a
directory outside the mount, ``$T`` for the test's tmp dir).  For the loopback
example the lower directory is compared with the native directory afterwards,
so a write that went to the wrong place shows up even if the program's output
looked right.

Every command runs with a timeout and in its own session, so a hung program
is killed with its children and the test fails instead of hanging.

Development hook: with ``LDPFUSE_TESTS_FAKE_MOUNT=bind`` (root only) the
"mount" is a kernel bind mount of the lower directory in a private mount
namespace (an empty directory for the memory example) and commands run
without ldpfuse-run.  The comparisons must then pass: it checks the native
halves and the comparison logic without the tool.  Tests of the tool's own
behaviour (bad input, faulty file systems, logs) fail in that mode.
"""

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FS_FIXTURES = Path(__file__).resolve().parent / "fs_fixtures"
# LDPFUSE_TEST_MODE=embedded runs the whole suite again with --mode embedded (.ci/run does
# both); shared, the default mode, is exercised by giving no --mode at all
LDP_MODE = os.environ.get("LDPFUSE_TEST_MODE", "shared")
LOOPBACK = f"{EXAMPLES / 'loopback.py'}:Loopback"
# LDPFUSE_TEST_BACKING=no runs the loopback with -o backing=no (every operation through
# its Python methods), =yes (the default) with its tree backed (docs/backing.md)
LOOPBACK_BACKING = os.environ.get("LDPFUSE_TEST_BACKING", "")
# LDPFUSE_TEST_WORKERS=N: every shared-mode run_ldp() of a class that allows it (the
# loopback and archive examples) with -o workers=N (tests/test_workers.py)
TEST_WORKERS = os.environ.get("LDPFUSE_TEST_WORKERS", "")
MEMORY = f"{EXAMPLES / 'memory.py'}:Memory"

# Per-command limits in seconds.  Generous: the first operation on a mount
# starts an interpreter in every process that touches it, and CI has 2 cores.
# After a few commands have hung, the rest get a short limit, so a tool that
# hangs everywhere fails the suite in minutes, not hours.  A test that probes
# for a deadlock passes its own short timeout; its hangs do not count.
NATIVE_TIMEOUT = 60
LDP_TIMEOUT = 90
HUNG_LIMIT = 3
AFTER_HANGS_TIMEOUT = 20
_hangs = 0

FAKE_MOUNT = os.environ.get("LDPFUSE_TESTS_FAKE_MOUNT", "")


@dataclass
class Result:
    argv: list
    returncode: int
    stdout: str
    stderr: str

    def describe(self):
        return (f"$ {shlex.join(map(str, self.argv))}\n"
                f"exit {self.returncode}\n"
                f"--- stdout ---\n{self.stdout}"
                f"--- stderr ---\n{self.stderr}")


def run(argv, *, timeout, cwd=None, env=None, input=None):
    """Run argv in a new session; on timeout kill the whole group and fail."""
    global _hangs
    argv = [str(a) for a in argv]
    if _hangs >= HUNG_LIMIT:
        timeout = min(timeout, AFTER_HANGS_TIMEOUT)
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, start_new_session=True,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:  # a child that left the group may still hold the pipes
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = b"", b"(output lost: a process outside the group kept the pipes)"
        if timeout >= NATIVE_TIMEOUT:
            _hangs += 1
        pytest.fail(f"timed out after {timeout}s: {shlex.join(argv)}\n"
                    f"--- stdout ---\n{out.decode(errors='replace')[-3000:]}\n"
                    f"--- stderr ---\n{err.decode(errors='replace')[-3000:]}")
    return Result(argv, proc.returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"))


def base_env(**extra):
    env = dict(os.environ)
    # Programs must not pick up the developer's configuration.
    env.update(LC_ALL="C", LANG="C", TZ="UTC", GIT_CONFIG_NOSYSTEM="1",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_native(cmd, *, cwd=None, env=None, timeout=NATIVE_TIMEOUT, input=None):
    return run(cmd, timeout=timeout, cwd=cwd, env=env or base_env(), input=input)


def ldpfuse_run_argv():
    """How to start ldpfuse-run: the venv's script, PATH, or the module."""
    beside = Path(sys.executable).parent / "ldpfuse-run"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ldpfuse-run")
    if found:
        return [found]
    try:
        import importlib.util
        if importlib.util.find_spec("ldpfuse_py.cli") is not None:
            return [sys.executable, "-m", "ldpfuse_py.cli"]
    except ImportError:
        pass
    pytest.fail("ldpfuse-run is not installed: run `pip install .` first")


def declares_workers_safe(fs_spec):
    """Does the file of a path/to/file.py:Class spec say `workers_safe = True` or
    `= "fork"` (the examples loopback and archive do)? Read, not imported: a class whose
    instances keep their state in the process (memory.py) would diverge under -o workers."""
    path, _, _ = str(fs_spec).rpartition(":")
    try:
        text = Path(path).read_text() if path.endswith(".py") else ""
        return "    workers_safe = True" in text or '    workers_safe = "fork"' in text
    except OSError:
        return False


def run_ldp(fs_spec, fs_args, cmd, mountpoint, *, options=None, log_file=None,
            log_level=None, cwd=None, env=None, timeout=LDP_TIMEOUT,
            input=None, fake_lower=None, mode=None):
    """Run cmd under `ldpfuse-run --mountpoint mountpoint fs_spec fs_args --`."""
    if FAKE_MOUNT == "bind" and fake_lower is not None:
        Path(mountpoint).mkdir(exist_ok=True)
        bind = ["unshare", "-m", "sh", "-c",
                'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh",
                fake_lower, mountpoint]
        return run(bind + list(cmd), timeout=timeout, cwd=cwd,
                   env=env or base_env(), input=input)
    argv = ldpfuse_run_argv() + ["--mountpoint", str(mountpoint)]
    mode = mode or (LDP_MODE if LDP_MODE != "shared" else None)
    if mode:  # the test's own choice wins over the suite-wide one
        argv += ["--mode", mode]
    options = dict(options or {})
    if TEST_WORKERS and (mode or "shared") == "shared" and "workers" not in options and \
            declares_workers_safe(fs_spec):
        # the suite's runs of classes that allow it served by N instances (issue 34)
        options["workers"] = TEST_WORKERS
    if LOOPBACK_BACKING and str(fs_spec).endswith("loopback.py:Loopback") and \
            "passthrough" not in options:
        options.setdefault("backing", LOOPBACK_BACKING)
    for key, value in options.items():
        argv += ["-o", key if value is None else f"{key}={value}"]     # None: a flag (allow_other)
    if log_level:
        argv += ["--log-level", log_level]
    if log_file:
        argv += ["--log-file", str(log_file)]
    argv += [fs_spec, *map(str, fs_args), "--", *map(str, cmd)]
    return run(argv, timeout=timeout, cwd=cwd, env=env or base_env(),
               input=input)


# Under CI=true (.ci/run) every program a test runs has been installed: one that is
# missing is a broken CI setup, and its test fails instead of skipping without a word.
IN_CI = os.environ.get("CI", "").lower() == "true"


def missing(what):
    """The test cannot run because `what` is not installed: skip, or fail under CI=true."""
    message = (f"{what} is not installed; README.md (Set up) says how to install what the "
               f"tests run")
    if IN_CI:
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


def need(*programs):
    """Skip the test (fail it under CI=true) when a program it runs is not installed."""
    for program in programs:
        if shutil.which(program) is None:
            missing(f"{program} (not on PATH)")


# ---------------------------------------------------------------- trees

PROGRAMS = Path(__file__).resolve().parent / "programs"


def build_program(tmp_path_factory, name, *extra, flags=("-O1", "-Wall"), libs=()):
    """tests/programs/NAME.c compiled (gcc flags + extra, linked with libs) for a module's
    tests: its path."""
    need("gcc")
    exe = tmp_path_factory.mktemp("bin") / name
    r = run_native(["gcc", *flags, *extra, "-o", exe, PROGRAMS / f"{name}.c", *libs])
    assert r.returncode == 0, r.describe()
    return exe


def snapshot(root, ignore=(), link_subst=()):
    """What a tree holds, without times or inode numbers.

    Maps each relative path to (type, permission bits, size, link count,
    sha256 or symlink target).  Directory sizes and link counts are left out:
    they depend on the history of the directory, not on its content.
    """
    root = Path(root)
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if any(rel == i or rel.startswith(i + "/") for i in ignore):
                continue
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                for old, new in sorted(link_subst, key=lambda p: -len(str(p[0]))):
                    target = target.replace(str(old), new)
                tree[rel] = ("symlink", mode, None, None, target)
            elif stat.S_ISDIR(st.st_mode):
                tree[rel] = ("dir", mode, None, None, None)
            elif not stat.S_ISREG(st.st_mode):  # fifo, socket, device: never read
                tree[rel] = (stat.S_IFMT(st.st_mode), mode, None, st.st_nlink, None)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                tree[rel] = ("file", mode, st.st_size, st.st_nlink, digest)
    return tree


def assert_same_tree(native_root, other_root, ignore=(), native_subst=(),
                     other_subst=()):
    """Same names, types, modes, sizes, link counts and contents.  Symlink
    targets are compared after the substitutions (absolute targets name the
    native directory in one tree and the mount point in the other)."""
    a = snapshot(native_root, ignore, native_subst)
    b = snapshot(other_root, ignore, other_subst)
    assert sorted(b) == sorted(a), "different names in the two trees"
    diffs = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert not diffs, f"entries differ (native, other): {diffs}"


# ------------------------------------------------------------ workspace

class Workspace:
    """A native directory, a lower directory and a mount point side by side.

    ``native`` and ``lower`` start with the same content (``populate``);
    ``mnt`` does not exist on disk.  ``native_out``/``ldp_out`` are plain
    directories outside the mount, one per run, exported as ``$O``.
    """

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.native = tmp_path / "native"
        self.lower = tmp_path / "lower"
        self.mnt = tmp_path / "mnt"
        self.native_out = tmp_path / "native_out"
        self.ldp_out = tmp_path / "ldp_out"
        self.home = tmp_path / "home"
        for d in (self.native, self.lower, self.native_out, self.ldp_out,
                  self.home):
            d.mkdir()

    # Content ------------------------------------------------------
    def populate(self, build):
        """Call build(dir) on the native and the lower directory."""
        build(self.native)
        build(self.lower)

    def start_from(self, build, fs):
        """Start both runs with build's tree. For the loopback it is made in the
        native and the lower directory; a file system that starts empty gets it
        unpacked into $D by the returned script prefix (the native run too, so
        both sides stay comparable)."""
        if fs == LOOPBACK:
            self.populate(build)
            return ""
        seed = self.tmp / "seed"
        seed.mkdir()
        build(seed)
        # tar sets modes with chmod; cp -a would go through ACL xattrs.
        return f'tar cf - -C "{seed}" . | tar xpf - -C "$D"\n'

    def write_script(self, name, text):
        path = self.tmp / name
        path.write_text(text)
        return path

    # Normalisation -----------------------------------------------------
    def normalize(self, text, d, o):
        pairs = [(str(d), "$D"), (str(o), "$O"), (str(self.lower), "$LOWER"),
                 (str(self.tmp), "$T")]
        pairs.sort(key=lambda p: -len(p[0]))
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    def env(self, d, o, **extra):
        return base_env(D=d, O=o, HOME=self.home, **extra)

    # Running -------------------------------------------------------------
    def native_run(self, cmd, env_extra=None, timeout=NATIVE_TIMEOUT, input=None):
        env = self.env(self.native, self.native_out, **(env_extra or {}))
        r = run_native(cmd, cwd=self.tmp, env=env, timeout=timeout, input=input)
        return self._normalized(r, self.native, self.native_out)

    def ldp_run(self, cmd, fs=LOOPBACK, fs_args=None, options=None,
                env_extra=None, timeout=LDP_TIMEOUT, input=None, **kw):
        env = self.env(self.mnt, self.ldp_out, **(env_extra or {}))
        if fs_args is None:
            fs_args = [self.lower] if fs == LOOPBACK else []
        fake_lower = self.lower
        if fs != LOOPBACK:
            fake_lower = self.tmp / "fake_memory"
            fake_lower.mkdir(exist_ok=True)
        r = run_ldp(fs, fs_args, cmd, self.mnt, options=options, cwd=self.tmp,
                    env=env, timeout=timeout, input=input,
                    fake_lower=fake_lower, **kw)
        return self._normalized(r, self.mnt, self.ldp_out)

    def _normalized(self, r, d, o):
        return Result(r.argv, r.returncode, self.normalize(r.stdout, d, o),
                      self.normalize(r.stderr, d, o))

    def compare(self, cmd, *, fs=LOOPBACK, options=None, env_extra=None,
                check_tree=True, tree_ignore=(), expect_success=True,
                compare_stderr=True, timeout=LDP_TIMEOUT, input=None, mode=None):
        """Run cmd natively on $D=native and under ldpfuse on $D=mnt; the
        exit status, stdout and stderr must be the same after normalisation
        and, for loopback, the lower tree must equal the native tree."""
        native = self.native_run(cmd, env_extra, input=input,   # a slow command is slow natively too
                                 timeout=max(timeout, NATIVE_TIMEOUT))
        if expect_success:
            assert native.returncode == 0, "native run failed (test bug):\n" + native.describe()
        ldp = self.ldp_run(cmd, fs=fs, options=options, env_extra=env_extra,
                           timeout=timeout, input=input, mode=mode)
        report = ("\n=== native ===\n" + native.describe() +
                  "\n=== ldpfuse ===\n" + ldp.describe())
        assert ldp.returncode == native.returncode, report
        assert ldp.stdout == native.stdout, report
        if compare_stderr:
            assert ldp.stderr == native.stderr, report
        if check_tree and fs == LOOPBACK:
            self.assert_lower_matches_native(tree_ignore)
        return native, ldp

    def assert_lower_matches_native(self, ignore=()):
        # Relative symlinks out of the mount name the out directory too.
        native_subst = [(self.native, "$D"), (self.native_out, "$O"),
                        (self.native_out.name, "$OUT")]
        other_subst = [(self.mnt, "$D"), (self.ldp_out, "$O"),
                       (self.ldp_out.name, "$OUT")]
        assert_same_tree(self.native, self.lower, ignore, native_subst,
                         other_subst)
        assert_same_tree(self.native_out, self.ldp_out, ignore, native_subst,
                         other_subst)

    def compare_sh(self, script, **kw):
        """compare() for a bash script (run with `bash -eu`, $D and $O set)."""
        path = self.write_script("script.sh", script)
        return self.compare(["bash", "-eu", path], **kw)

    def compare_py(self, script, **kw):
        """compare() for a Python script run by the test's interpreter."""
        path = self.write_script("script.py", script)
        return self.compare([sys.executable, path], **kw)


@pytest.fixture
def ws(tmp_path):
    return Workspace(tmp_path)


@pytest.fixture
def lower_dir(ws):
    return ws.lower


@pytest.fixture
def mountpoint(ws):
    """A mount point path that does not exist on disk."""
    assert not ws.mnt.exists()
    return ws.mnt


# ---- commands run as another user (tests/test_credentials.py, test_embedded_fallback.py)
NOBODY = 65534


def as_nobody(*cmd, groups=None):
    """cmd run as uid and gid 65534, with no supplementary groups (or `groups`)."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
            *([f"--groups={groups}"] if groups else ["--clear-groups"]), *cmd]


def launch_argv(mnt, fs, fs_args=(), options=(), mode=LDP_MODE):
    """ldpfuse-run's argv up to its `--`: the command follows."""
    return (ldpfuse_run_argv() + ["--mode", mode, *options, "--mountpoint", str(mnt), fs,
                                  *map(str, fs_args), "--"])


@pytest.fixture
def shared_tmp():
    """A directory every user may reach (pytest's tmp_path is under a 0700 one): the mount
    point and the lower directory must be reachable by the user a command runs as, as
    natively."""
    d = tempfile.mkdtemp(prefix="ldpfuse-users-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def users_lower(shared_tmp):
    """A lower directory for commands of several users: `open/` (mode 0777), root's
    `secret` (0600), `public` (0644) and `group` (0640, gid 4242 when made by root)."""
    d = shared_tmp / "lower"
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "open").mkdir()
    os.chmod(d / "open", 0o777)
    (d / "secret").write_text("root only\n")
    os.chmod(d / "secret", 0o600)
    (d / "public").write_text("anyone\n")
    os.chmod(d / "public", 0o644)
    (d / "group").write_text("group 4242\n")
    if os.geteuid() == 0:
        os.chown(d / "group", 0, 4242)
    os.chmod(d / "group", 0o640)
    return d
