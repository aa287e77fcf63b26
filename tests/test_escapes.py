"""The safety net for what the wrappers cannot see (issue 11, item 7; docs/escapes.md).

tests/programs/raw_syscalls.c makes openat, read, write, close, newfstatat and getdents64
with inline `syscall` instructions, as Go's runtime or liburing do, in the main thread, a
new thread or a forked child. Under --watch-escapes (or LDPFUSE_ESCAPES=watch) its
output on the mount is the one it gives on a native directory, and the log names each
call once; under --strict the calls fail with EIO and ldpfuse-run names them and exits
nonzero. Statically linked programs are named when they are started, and --strict
refuses to start them."""

import os
import shutil
from pathlib import Path

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, base_env, build_program, ldpfuse_run_argv, missing, need, run, run_native

PROGRAMS = Path(__file__).resolve().parent / "programs"


@pytest.fixture(scope="module")
def raw_syscalls(tmp_path_factory):
    return build_program(tmp_path_factory, "raw_syscalls", "-pthread")


@pytest.fixture(scope="module")
def static_cat(tmp_path_factory):
    """cat of one file, linked statically (libc.a comes with libc6-dev)."""
    need("gcc")
    d = tmp_path_factory.mktemp("static")
    src = d / "static_cat.c"
    src.write_text('#include <stdio.h>\nint main(int c, char **v) {\n'
                   '  FILE *f = fopen(v[1], "r"); char b[256];\n'
                   '  if (!f) { perror(v[1]); return 1; }\n'
                   '  while (fgets(b, sizeof b, f)) fputs(b, stdout);\n  return 0;\n}\n')
    r = run_native(["gcc", "-static", "-O1", "-o", d / "static_cat", src])
    if r.returncode != 0:
        pytest.skip(f"gcc -static does not link here (no libc.a?): {r.stderr.strip()[:200]}")
    return d / "static_cat"


def hello(d):
    (d / "hello").write_text("hello world\n")


def ldp(ws, *flags, cmd, fs=LOOPBACK, mode=None):
    argv = ldpfuse_run_argv() + ["--mountpoint", ws.mnt, *flags]
    mode = mode or (LDP_MODE if LDP_MODE != "shared" else None)
    if mode:
        argv += ["--mode", mode]
    argv += [fs, *([ws.lower] if fs == LOOPBACK else []), "--", *cmd]
    env = base_env()
    env.pop("LDPFUSE_ESCAPES", None)    # the flags say
    return run(argv, timeout=90, cwd=ws.tmp, env=env)


@pytest.mark.parametrize("where", ["main", "thread", "fork"])
def test_raw_system_calls_on_mount_paths_are_served_under_watch_escapes(ws, raw_syscalls, where):
    ws.populate(hello)
    args = [] if where == "main" else [where]
    native = run_native([raw_syscalls, ws.native, *args])
    assert native.returncode == 0, native.describe()
    r = ldp(ws, "--watch-escapes", cmd=[raw_syscalls, ws.mnt, *args])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()
    ws.assert_lower_matches_native()
    for call, path in [("openat", "hello"), ("newfstatat", "hello"), ("getdents64", "")]:
        line = f"made {call} on {os.path.join(ws.mnt, path).rstrip('/')} outside libc: served"
        assert sum(line in x for x in r.stderr.splitlines()) == 1, r.stderr


def test_raw_system_calls_on_a_cached_file_system_are_served(ws, raw_syscalls):
    """memory.py serves its files through the page cache: the raw read and write on the
    virtual fd go through the same code as read() and write()."""
    hello(ws.native)
    native = run_native([raw_syscalls, ws.native])
    script = f'printf "hello world\\n" > "$0/hello" && exec {raw_syscalls} "$0"'
    r = ldp(ws, "--watch-escapes", fs=MEMORY, mode="shared", cmd=["sh", "-c", script, ws.mnt])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()
    assert f"made read on {ws.mnt}/hello outside libc: served" in r.stderr
    assert f"made write on {ws.mnt}/made outside libc: served" in r.stderr


def test_a_raw_rename_whose_second_path_is_in_the_mount_is_served(ws, raw_syscalls):
    """renameat names two paths: one into the mount from outside is the wrapper's (EXDEV,
    as between two file systems), not the kernel's (ENOENT: the mount point is not on disk)."""
    ws.populate(hello)
    outside = ws.tmp / "outside"
    outside.write_text("stays\n")
    r = ldp(ws, "--watch-escapes", cmd=[raw_syscalls, ws.mnt, "rename-into", outside])
    assert (r.returncode, r.stdout) == (1, "renameat: Invalid cross-device link\n"), r.describe()
    assert f"made renameat on {ws.mnt}/moved outside libc: served" in r.stderr
    assert outside.read_text() == "stays\n" and not (ws.lower / "moved").exists()


def test_a_raw_inotify_add_watch_on_the_mount_is_answered_as_libc_s(ws, raw_syscalls):
    """Go's fsnotify makes inotify_add_watch inline: on a mount path it gets the wrapper's
    watch (tests/test_notify.py), not the kernel's ENOENT for a file that exists."""
    ws.populate(hello)
    native = run_native([raw_syscalls, ws.native, "watch"])
    assert (native.returncode, native.stdout) == (0, "inotify_add_watch: a watch\n"), native.describe()
    r = ldp(ws, "--watch-escapes", cmd=[raw_syscalls, ws.mnt, "watch"])
    assert (r.returncode, r.stdout) == (0, "inotify_add_watch: a watch\n"), r.describe()
    assert f"made inotify_add_watch on {ws.mnt}/hello outside libc: served" in r.stderr


def test_without_the_net_raw_system_calls_do_not_see_the_mount(ws, raw_syscalls):
    """What the net is for: no wrapper sees an inline system call."""
    ws.populate(hello)
    r = ldp(ws, cmd=[raw_syscalls, ws.mnt])
    assert r.returncode == 1
    assert "openat: No such file or directory\n" in r.stdout
    assert "outside libc" not in r.stderr


def test_the_environment_turns_the_net_on_as_the_flag_does(ws, raw_syscalls):
    """LDPFUSE_ESCAPES=watch in the launcher's environment: how the suite runs with the
    net on (LDPFUSE_ESCAPES=watch python -m pytest)."""
    ws.populate(hello)
    native = run_native([raw_syscalls, ws.native])
    r = ws.ldp_run([raw_syscalls, ws.mnt], env_extra={"LDPFUSE_ESCAPES": "watch"})
    assert r.stdout == native.stdout.replace(str(ws.native), "$D"), r.describe()


def test_strict_fails_raw_calls_on_the_mount_with_eio_and_names_them_at_the_end(ws, raw_syscalls):
    ws.populate(hello)
    r = ldp(ws, "--strict", cmd=[raw_syscalls, ws.mnt])
    assert r.returncode == 1, r.describe()
    assert "openat: Input/output error\n" in r.stdout
    assert "newfstatat: Input/output error\n" in r.stdout
    assert f"made openat on {ws.mnt}/hello outside libc: refused with EIO (--strict)" in r.stderr
    assert "ldpfuse-run: --strict: " in r.stderr
    assert f"raw_syscalls: openat on {ws.mnt}/hello: refused with EIO (--strict)" in r.stderr
    assert not (ws.lower / "made").exists()


def test_strict_passes_a_program_without_escapes(ws):
    """Only escapes make --strict fail: libc's calls are served as ever."""
    ws.populate(hello)
    r = ldp(ws, "--strict", cmd=["sh", "-c", f"cat {ws.mnt}/hello; ls {ws.mnt}"])
    assert (r.returncode, r.stdout, r.stderr) == (0, "hello world\nhello\n", ""), r.describe()


def test_a_static_program_started_by_the_command_is_served_by_default(ws, static_cat):
    """Supervision is the default (docs/supervisor.md): the static program reads the mount,
    and nothing is said about it."""
    ws.populate(hello)
    r = ldp(ws, cmd=["sh", "-c", f"{static_cat} {ws.mnt}/hello; echo status $?"])
    assert r.stdout == "hello world\nstatus 0\n", r.describe()
    assert "statically linked" not in r.stderr, r.describe()


def test_a_static_program_started_by_the_command_is_named_when_not_supervised(ws, static_cat):
    ws.populate(hello)
    r = ldp(ws, "--no-supervise", cmd=["sh", "-c", f"{static_cat} {ws.mnt}/hello; echo status $?"])
    assert r.stdout == "status 1\n", r.describe()
    assert f"{static_cat} is statically linked: ldpfuse cannot be loaded into it" in r.stderr
    assert r.stderr.count("statically linked") == 1, r.stderr


def test_strict_refuses_to_start_a_static_program(ws, static_cat):
    ws.populate(hello)
    r = ldp(ws, "--strict", "--no-supervise", cmd=["sh", "-c", f"{static_cat} {ws.mnt}/hello; echo status $?"])
    assert r.stdout == "status 126\n", r.describe()     # sh: Operation not permitted
    assert "Operation not permitted" in r.stderr
    assert "--strict refuses to run it" in r.stderr
    assert r.returncode == 1
    assert f"sh: execve on {static_cat} (statically linked): refused with EPERM" in r.stderr


def test_strict_refuses_a_static_command_before_starting_it(ws, static_cat):
    ws.populate(hello)
    r = ldp(ws, "--strict", "--no-supervise", cmd=[static_cat, f"{ws.mnt}/hello"])
    assert r.returncode == 126, r.describe()
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--strict refuses to run it" in r.stderr, r.stderr


def test_a_program_that_owns_sigsys_keeps_its_handler_and_the_net_survives_a_full_mask(ws):
    """seccomp users: the program's SIGSYS handler is given back by sigaction() and called
    for its own seccomp traps; blocking every signal does not block the net's SIGSYS."""
    need("gcc")
    ws.populate(hello)
    exe = ws.tmp / "sigsys_owner"
    r = run_native(["gcc", "-O1", "-Wall", "-o", exe, PROGRAMS / "sigsys_owner.c"])
    assert r.returncode == 0, r.describe()
    native = run_native([exe, ws.native / "hello"])
    assert native.returncode == 0, native.describe()
    assert "size 12" in native.stdout and "4242 (trapped 1)" in native.stdout
    r = ldp(ws, "--watch-escapes", cmd=[exe, ws.mnt / "hello"])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()


@pytest.mark.parametrize("options", [[], ["-o", "passthrough=no"]], ids=["passthrough", "cached"])
def test_ld_so_loads_a_library_stored_in_the_mount_under_watch_escapes(ws, options):
    """dlopen's opens, reads and mmaps are ld.so's own system calls, outside libc: the net
    serves them (a cached file's pages are filled before ld.so maps them)."""
    need("gcc")
    src = ws.tmp / "answer.c"
    src.write_text("int answer(void) { return 42; }\n")
    for d in (ws.native, ws.lower):
        r = run_native(["gcc", "-shared", "-fPIC", "-o", d / "libanswer.so", src])
        assert r.returncode == 0, r.describe()
    code = 'import ctypes, sys; print(ctypes.CDLL(sys.argv[1] + "/libanswer.so").answer())'
    native = run_native(["python3", "-c", code, ws.native])
    assert native.stdout == "42\n", native.describe()
    r = ldp(ws, "--watch-escapes", *options, cmd=["python3", "-c", code, ws.mnt])
    assert (r.returncode, r.stdout) == (0, "42\n"), r.describe()


@pytest.fixture(scope="module")
def raw_process(tmp_path_factory):
    return build_program(tmp_path_factory, "raw_process")


@pytest.mark.parametrize("what", ["fork", "signals"])
def test_raw_fork_and_raw_signal_calls_behave_as_natively_under_the_net(ws, raw_process, what):
    """A raw fork's child is watched again; a handler installed by a raw rt_sigaction with
    its own trampoline runs and returns; a raw rt_sigprocmask blocks what it asks, and
    blocking every signal does not block the net."""
    ws.populate(hello)
    native = run_native([raw_process, what, ws.native / "hello"])
    assert native.returncode == 0, native.describe()
    r = ldp(ws, "--watch-escapes", cmd=[raw_process, what, ws.mnt / "hello"])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()


def test_io_uring_is_named_under_watch_and_refused_under_strict(ws, raw_process):
    """What a ring submits is out of sight: --watch-escapes says so, --strict answers
    ENOSYS so that the program falls back to calls the net sees."""
    native = run_native([raw_process, "uring"])
    if native.stdout != "io_uring_setup: a ring\n":
        pytest.skip(f"io_uring is not available here: {native.stdout.strip()}")
    r = ldp(ws, "--watch-escapes", cmd=[raw_process, "uring"])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()
    assert "made io_uring_setup on a ring outside libc: served: but what it submits is not seen" in r.stderr
    r = ldp(ws, "--strict", cmd=[raw_process, "uring"])
    assert r.stdout == "io_uring_setup: Function not implemented\n", r.describe()
    assert r.returncode == 0, r.describe()     # a refused ring is not an escape of a mount call


def go_toolchain():
    return shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if os.access(p, os.X_OK)), None)


@pytest.fixture(scope="module")
def go_program(tmp_path_factory):
    """tests/programs/go_files built with cgo: dynamically linked, so ldpfuse is loaded."""
    go = go_toolchain()
    if go is None:
        missing("go (not on PATH nor in /usr/local/go)")
    need("gcc")
    d = tmp_path_factory.mktemp("go")
    env = base_env(HOME=d, GOCACHE=d / "cache", GOPATH=d / "path", GOTOOLCHAIN="local",
                   GOFLAGS="-mod=mod", CGO_ENABLED="1")
    r = run([go, "build", "-o", d / "go_files", "."], timeout=300, cwd=PROGRAMS / "go_files", env=env)
    assert r.returncode == 0, r.describe()
    return d / "go_files"


def test_a_go_program_sees_the_mount_under_watch_escapes(ws, go_program):
    """Go's os package never calls libc's file functions, even with cgo: without the net the
    mount does not exist for it; with it, the program sees what it sees natively, and what
    it writes lands in the lower directory. (--no-supervise: the supervisor, which serves Go
    programs by default, is not what is tested here.)"""
    ws.populate(hello)
    native = run_native([go_program, ws.native])
    assert native.returncode == 0 and "written" not in native.stdout, native.describe()
    r = ldp(ws, "--no-supervise", cmd=[go_program, ws.mnt])
    assert "read: open " in r.stdout and "no such file or directory" in r.stdout, r.describe()
    shutil.rmtree(ws.lower)
    ws.lower.mkdir()
    hello(ws.lower)
    r = ldp(ws, "--watch-escapes", "--no-supervise", cmd=[go_program, ws.mnt])
    assert (r.returncode, r.stdout) == (0, native.stdout), r.describe()
    ws.assert_lower_matches_native()
