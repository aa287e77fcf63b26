"""The supervisor: programs the preload cannot reach, served from outside (issue 26, item 1;
docs/supervisor.md).

busybox-static and Go programs (CGO_ENABLED=0, statically linked; and with cgo, linked
dynamically, whose runtime still makes its own system calls) run under ldpfuse-run with no
flag (supervision is the default: issue 35) on a loopback and a memory mount, and must print
what they print on a native directory, leave the same tree in the lower directory, and see
what preloaded programs wrote (and the reverse), with their working directory in the mount
too (a shell's `cd`, their own chdir, `tar -C`, `go build` in a module there). With
--no-supervise they do not see the mount at all (the control), and under --strict what the
supervisor does not serve fails with EIO and is named at the end."""

import os
import shutil
from pathlib import Path

import pytest

from conftest import (LDP_MODE, LOOPBACK, MEMORY, base_env, ldpfuse_run_argv, missing, need, run,
                      run_native)

PROGRAMS = Path(__file__).resolve().parent / "programs"
BOTH = [pytest.param(LOOPBACK, id="loopback"), pytest.param(MEMORY, id="memory")]


def user_notification():
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as f:
            return "user_notif" in f.read().split()
    except OSError:
        return False


def kernel_at_least(major, minor):
    release = os.uname().release.split("-")[0].split(".")
    try:
        return (int(release[0]), int(release[1])) >= (major, minor)
    except (IndexError, ValueError):
        return False


@pytest.fixture(autouse=True)
def supervisable():
    if not user_notification():
        pytest.skip("the kernel has no seccomp user notification (SECCOMP_RET_USER_NOTIF): "
                    "nothing can be supervised here")
    if not kernel_at_least(5, 14):
        pytest.skip(f"Linux {os.uname().release} < 5.14: no SECCOMP_ADDFD_FLAG_SEND, which the "
                    "supervisor needs to hand a supervised program its fds")


def statically_linked(path):
    with open(path, "rb") as f:
        head = f.read(64)
        phoff = int.from_bytes(head[32:40], "little")
        phentsize = int.from_bytes(head[54:56], "little")
        phnum = int.from_bytes(head[56:58], "little")
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") != 3 for i in range(phnum))


@pytest.fixture(scope="module")
def busybox():
    need("busybox")
    path = shutil.which("busybox")
    if not statically_linked(path):
        missing("busybox-static (the busybox on PATH is dynamically linked)")
    return path


def go_toolchain():
    return shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if os.access(p, os.X_OK)), None)


def build_go(tmp_path_factory, cgo):
    go = go_toolchain()
    if go is None:
        missing("go (not on PATH nor in /usr/local/go)")
    if cgo:
        need("gcc")
    d = tmp_path_factory.mktemp("go")
    env = base_env(HOME=d, GOCACHE=d / "cache", GOPATH=d / "path", GOTOOLCHAIN="local",
                   GOFLAGS="-mod=mod", CGO_ENABLED="1" if cgo else "0")
    exe = d / ("go_walk_cgo" if cgo else "go_walk_static")
    r = run([go, "build", "-o", exe, "."], timeout=300, cwd=PROGRAMS / "go_walk", env=env)
    assert r.returncode == 0, r.describe()
    assert statically_linked(exe) != cgo, f"{exe}: cgo={cgo} but statically_linked={statically_linked(exe)}"
    return exe


@pytest.fixture(scope="module")
def go_static(tmp_path_factory):
    return build_go(tmp_path_factory, cgo=False)


@pytest.fixture(scope="module")
def go_cgo(tmp_path_factory):
    return build_go(tmp_path_factory, cgo=True)




def hello(d):
    (d / "hello").write_text("hello world\n")
    (d / "sub").mkdir()
    (d / "sub" / "inner").write_text("inner\n")


# every call busybox makes below is its own (its applets run in the shell's process or a
# fork of it): cat, ls, find, sed -i (mkstemp + rename), cp -r out of the mount, ln -s and
# readlink, chmod and stat, mv, rm -r; $O is outside the mount (continued calls). The
# working directory in the mount: BUSYBOX_CWD_SCRIPT
BUSYBOX_SCRIPT = r"""
set -e
echo one > "$D/a"
echo two >> "$D/a"
cat "$D/a"
cat < "$D/a"
mkdir -p "$D/d/e"
cp "$D/a" "$D/d/e/b"
mv "$D/d/e/b" "$D/d/c"
ls -1 "$D" "$D/d"
find "$D" | sort
stat -c '%n %s %F %a' "$D/a" "$D/d" "$D/d/c"
sed -i s/one/uno/ "$D/a"
cat "$D/a"
wc -c "$D/a"
ln -s a "$D/l"
readlink "$D/l"
cat "$D/l"
chmod 600 "$D/a"
stat -c %a "$D/a"
[ -f "$D/a" ] && [ -d "$D/d" ] && [ ! -e "$D/none" ] && echo tests
cp -r "$D/d" "$O/copy"
find "$O/copy" | sort
head -c 3 "$D/a"; echo
rm -r "$D/d"
rm "$D/l"
ls -1 "$D"
"""


@pytest.mark.parametrize("fs", BOTH)
def test_busybox_static_reads_writes_and_lists_the_mount_as_a_native_directory(ws, busybox, fs):
    if fs == LOOPBACK:
        ws.populate(hello)
    ws.compare([busybox, "sh", "-c", BUSYBOX_SCRIPT], fs=fs)


def test_a_static_program_exec_d_by_a_preloaded_shell_is_supervised(ws, busybox):
    """dash loads the preload; its execve of busybox installs the filter (the launcher's
    command here is not the static program)."""
    ws.populate(hello)
    ws.compare(["sh", "-c", f'{busybox} cat "$D/hello" "$D/sub/inner"; {busybox} ls "$D"; '
                            f'{busybox} sh -c \'echo x > "$D/new"\'; cat "$D/new"'])


@pytest.mark.parametrize("how", ["posix_spawn", "posix_spawnp"])
def test_a_static_program_started_with_posix_spawn_is_supervised(ws, busybox, how):
    """glibc's posix_spawn execs in its child from inside libc: the preload spawns the
    supervisor's exec-as role instead, whose exec installs the filter (a bare name for
    posix_spawnp, found in PATH)."""
    ws.populate(hello)
    program = busybox if how == "posix_spawn" else "busybox"
    script = (f"import os, sys\n"
              f"d = os.environ['D']\n"
              f"for args in (['cat', d + '/hello'], ['ls', d]):\n"
              f"    pid = os.{how}({program!r}, ['busybox', *args], dict(os.environ))\n"
              f"    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)\n")
    ws.compare_py(script)


EMBEDDED_MEMORY = ("--mode embedded: each process has a memory file system of its own (the supervisor's "
                   "for supervised ones), so the preloaded and the supervised programs of the script "
                   "see different trees (docs/processes-and-modes.md)")


# the working directory in the mount (issue 31 item 5, issue 35 item 2): busybox's own
# `cd` (a chdir the supervisor answers and keeps), relative names from there, a child forked
# there that makes its first call after its parent left, `cd ..` out of the mount and back, pwd, a preloaded program started from there (ls: it inherits the
# directory), tar -C into and out of the mount, cp -a; $O is outside the mount
BUSYBOX_CWD_SCRIPT = r"""
set -e
cd "$D"
echo rel > x
cat x hello
ls
mkdir -p t/u && cd t/u && echo deep > y && cd ../..
cat t/u/y
busybox pwd | sed "s|^$D|D|"
/bin/ls -1 . t
cd sub && cat inner && cd ..
(sleep 0.3; cat hello > forked) & cd /; wait; cd "$D"; cat forked
cd .. && ls -1 "$(basename "$D")" && cd "$D"
busybox tar -cf "$O/from.tar" hello sub t
busybox tar -tf "$O/from.tar" | sort
mkdir "$O/src" && echo s > "$O/src/s" && busybox tar -C "$O" -cf "$O/src.tar" src
busybox tar -C "$D/t" -xf "$O/src.tar"
cat t/src/s
busybox cp -a sub t/copied && ls -1 t/copied && cat t/copied/inner
busybox cp -a "$D/t" "$O/t-out" && find "$O/t-out" | sort | sed "s|^$O|O|"
rm -r t x
ls -1
"""


@pytest.mark.parametrize("fs", BOTH)
def test_busybox_static_with_its_working_directory_in_the_mount(ws, busybox, fs):
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip(EMBEDDED_MEMORY)
    ws.compare([busybox, "sh", "-c", 'mkdir -p "$D/sub" && echo "hello world" > "$D/hello" && '
                                     'echo inner > "$D/sub/inner"\n' + BUSYBOX_CWD_SCRIPT], fs=fs,
               tree_ignore=("from.tar", "src.tar"))     # their headers hold the times of each run


@pytest.mark.parametrize("fs", BOTH)
def test_a_static_program_started_from_a_preloaded_shell_in_the_mount_uses_that_directory(ws, busybox, fs):
    """`bash -c 'cd /mnt/m && busybox-static touch x'` created x outside the mount (issue 31
    item 5): the shell's directory is the preload's, the kernel's is elsewhere."""
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip(EMBEDDED_MEMORY)
    ws.compare_sh(f"""
mkdir -p "$D/sub"; echo "hello world" > "$D/hello"
cd "$D"
{busybox} touch x; {busybox} ls; {busybox} cat hello
cd sub
{busybox} sh -c 'echo made > y; [ "$(pwd)" = "$D/sub" ] && echo pwd-ok; cat ../hello'
cat y; ls ..
""", fs=fs)


@pytest.mark.parametrize("fs", BOTH)
def test_go_programs_with_their_working_directory_in_the_mount(ws, go_static, go_cgo, fs):
    """A static and a cgo Go program walk "." from a working directory in the mount (os.Getwd
    included: the walk's names are relative)."""
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip(EMBEDDED_MEMORY)
    if fs == LOOPBACK:
        ws.populate(hello)
    ws.compare(["bash", "-c", f'set -e; mkdir -p "$D/w"; cd "$D/w"; {go_static} .; {go_cgo} .'], fs=fs)


@pytest.mark.parametrize("fs", BOTH)
def test_a_static_go_program_sees_the_mount_as_a_native_directory(ws, go_static, fs):
    if fs == LOOPBACK:
        ws.populate(hello)
    ws.compare(["sh", "-c", f'exec {go_static} "$D"'], fs=fs)


@pytest.mark.parametrize("fs", BOTH)
def test_a_cgo_go_program_sees_the_mount_as_a_native_directory(ws, go_cgo, fs):
    if fs == LOOPBACK:
        ws.populate(hello)
    ws.compare(["sh", "-c", f'exec {go_cgo} "$D"'], fs=fs)


def test_preloaded_and_supervised_programs_see_each_other_s_writes(ws, busybox):
    """busybox writes (a cached file: its bytes reach the file system at its close), cat and
    Python read; Python writes, busybox reads. With the memory file system in the shared
    mode (one instance for the command); the embedded mode gives every process an instance
    of its own, the supervisor's included, so the loopback stands in for it there."""
    fs = MEMORY if LDP_MODE == "shared" else LOOPBACK
    if fs == LOOPBACK:
        ws.populate(hello)
    ws.compare(["sh", "-c",
                f'{busybox} sh -c \'echo from busybox > "$D/b"; echo more >> "$D/b"\'\n'
                'cat "$D/b"\n'
                'python3 -c "import os,sys; print(open(sys.argv[1]).read(), end=\'\'); '
                'print(os.stat(sys.argv[1]).st_size)" "$D/b"\n'
                'echo from sh > "$D/s"\n'
                f'{busybox} cat "$D/s"\n'
                f'{busybox} stat -c %s "$D/s"\n'],
               fs=fs)


def ldp(ws, *flags, cmd, fs=LOOPBACK):
    argv = ldpfuse_run_argv() + ["--mountpoint", ws.mnt, *flags]
    if LDP_MODE != "shared":
        argv += ["--mode", LDP_MODE]
    argv += [fs, *([ws.lower] if fs == LOOPBACK else []), "--", *cmd]
    env = base_env()
    for key in ("LDPFUSE_ESCAPES", "LDPFUSE_SUPERVISE"):
        env.pop(key, None)      # the flags say
    return run(argv, timeout=90, cwd=ws.tmp, env=env)


def test_a_static_program_sees_the_mount_with_no_flag_and_not_with_no_supervise(ws, busybox):
    """The control: supervision is the default, --no-supervise is what takes it away (and
    --supervise, the old flag, is still accepted)."""
    ws.populate(hello)
    r = ldp(ws, cmd=[busybox, "cat", f"{ws.mnt}/hello"])
    assert (r.returncode, r.stdout) == (0, "hello world\n"), r.describe()
    r = ldp(ws, "--no-supervise", cmd=[busybox, "cat", f"{ws.mnt}/hello"])
    assert r.returncode != 0 and "No such file or directory" in r.stderr, r.describe()
    r = ldp(ws, "--supervise", cmd=[busybox, "cat", f"{ws.mnt}/hello"])
    assert (r.returncode, r.stdout) == (0, "hello world\n"), r.describe()


def test_strict_supervises_a_static_command_and_fails_what_it_cannot_serve_with_eio(ws, busybox):
    """--strict refuses a static command when it is not supervised (--no-supervise);
    supervised, a call the supervisor does not serve (mknod in the mount) fails with EIO,
    and the launcher names it and exits nonzero."""
    ws.populate(hello)
    r = ldp(ws, "--strict", "--no-supervise", cmd=[busybox, "cat", f"{ws.mnt}/hello"])
    assert r.returncode == 126 and "statically linked" in r.stderr, r.describe()
    r = ldp(ws, "--strict", cmd=[busybox, "cat", f"{ws.mnt}/hello"])
    assert (r.returncode, r.stdout) == (0, "hello world\n"), r.describe()
    r = ldp(ws, "--strict", cmd=[busybox, "sh", "-c", f'mkfifo "{ws.mnt}/sub/fifo" && echo made'])
    assert r.returncode != 0 and r.stdout == "", r.describe()
    assert "Input/output error" in r.stderr, r.describe()
    assert "mknod" in r.stderr and "refused with EIO (--strict)" in r.stderr, r.describe()


def test_a_supervised_process_that_became_another_user_is_refused(ws, busybox):
    """The supervisor acts as the launcher's user: a supervised process that changed its uid
    (here to nobody, with setpriv: a file it could read natively) gets EACCES on mount
    paths, never the launcher's rights; outside the mount it is untouched."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the test changes a supervised process's uid to nobody")
    need("setpriv")
    setpriv = shutil.which("setpriv")     # util-linux's: busybox's own has no --reuid
    ws.populate(hello)
    script = (f'{setpriv} --reuid=65534 --regid=65534 --clear-groups {busybox} head -1 /etc/passwd; '
              f'{setpriv} --reuid=65534 --regid=65534 --clear-groups {busybox} cat "{ws.mnt}/hello"')
    r = ldp(ws, cmd=[busybox, "sh", "-c", script])
    assert r.stdout.startswith("root:"), r.describe()     # outside the mount: as natively
    assert "Permission denied" in r.stderr, r.describe()


def test_a_supervised_root_process_without_capabilities_is_refused(ws, busybox):
    """Root with every capability dropped (setpriv --bounding-set=-all, as capsh --drop=all)
    is not the launcher's root: it cannot read another user's 0600 file natively, and the
    supervisor, which would read it with every capability, refuses it (EACCES) instead of
    serving it (issue 32, attack 6: 2e84571 served it by its uid alone)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the test drops a supervised root process's capabilities")
    need("setpriv")
    setpriv = shutil.which("setpriv")
    ws.populate(hello)
    os.chown(ws.lower / "hello", 65534, 65534)
    os.chmod(ws.lower / "hello", 0o600)
    no_caps = f"{setpriv} --inh-caps=-all --bounding-set=-all"
    script = (f'{no_caps} {busybox} cat "{ws.mnt}/hello" || echo refused; '
              f'{busybox} cat "{ws.mnt}/hello"')
    r = ldp(ws, "--supervise", cmd=[busybox, "sh", "-c", script])
    assert r.stdout == "refused\nhello world\n", r.describe()
    assert "Permission denied" in r.stderr, r.describe()


@pytest.fixture(scope="module")
def go_env(tmp_path_factory):
    go = go_toolchain()
    if go is None:
        missing("go (not on PATH nor in /usr/local/go)")
    d = tmp_path_factory.mktemp("gobuild")
    env = {"GOCACHE": d / "cache", "GOPATH": d / "path", "GOTOOLCHAIN": "local",
           "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    # the standard library's packages compiled once, here, with time for it: the
    # comparisons then time the builds of the program, natively and in the mount
    r = run([go, "build", "-trimpath", "-o", os.devnull, "."], timeout=900, cwd=PROGRAMS / "go_walk",
            env=base_env(HOME=d, **env))
    assert r.returncode == 0, r.describe()
    return go, env


@pytest.mark.parametrize("fs", BOTH)
def test_go_build_of_sources_in_the_mount_writes_a_program_that_runs(ws, go_env, fs):
    """`go build` (a static Go program, and the compiler and linker it runs) reads the
    sources from the mount and writes the program there; the program, run from the mount,
    is supervised too. The sources are named as files: module mode needs a working
    directory in the mount, which the kernel cannot give (docs/supervisor.md). -trimpath:
    the same bytes as the native build (the source paths differ)."""
    go, env = go_env
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("--mode embedded: each process has a memory file system of its own (the "
                    "supervisor's for supervised ones), so sh's mkdir and cp, go build and sh's exec "
                    "of the program see different trees (docs/processes-and-modes.md)")
    if fs == LOOPBACK:
        ws.populate(hello)
    src = PROGRAMS / "go_walk"
    ws.compare(["sh", "-c", f'mkdir "$D/src" "$D/w" && cp {src}/main.go "$D/src/" && '
                            f'{go} build -trimpath -o "$D/prog" "$D/src/main.go" && ls "$D" && "$D/prog" "$D/w"'],
               fs=fs, env_extra=env, timeout=300)


@pytest.mark.parametrize("fs", BOTH)
def test_go_build_in_a_module_in_the_mount(ws, go_env, fs):
    """`cd` into a module in the mount and `go build` there (it looks for go.mod from its
    working directory, and runs the compiler with the package's directory as its own):
    `go.mod file not found` before (issue 35 item 2). The program it writes runs from there."""
    go, env = go_env
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("--mode embedded: each process has a memory file system of its own (the "
                    "supervisor's for supervised ones), so sh's cp and go build see different "
                    "trees (docs/processes-and-modes.md)")
    if fs == LOOPBACK:
        ws.populate(hello)
    src = PROGRAMS / "go_walk"
    ws.compare(["bash", "-c", f'set -e; mkdir -p "$D/mod/w"; cp {src}/main.go {src}/go.mod "$D/mod/"; cd "$D/mod"; '
                              f'{go} build -trimpath -o prog . && ls && ./prog w'],
               fs=fs, env_extra=env, timeout=300)


@pytest.mark.skipif(LDP_MODE == "embedded",
                    reason="the embedded mode runs the method in the calling thread (the "
                           "supervisor's here): op_timeout bounds the shared mode only "
                           "(docs/limitations.md)")
def test_a_stuck_file_system_fails_a_supervised_call_with_eio_and_serving_goes_on(ws, busybox):
    """getattr of /stuck never returns: the supervised cat gets EIO after op_timeout (it is not
    held for ever), and the next supervised program is served."""
    from conftest import FS_FIXTURES, run_ldp

    env = ws.env(ws.mnt, ws.ldp_out)
    r = run_ldp(f"{FS_FIXTURES / 'faulty.py'}:GetattrBlocksForeverThreadSafe", [],
                ["sh", "-c", f'{busybox} cat "$D/stuck"; echo "stuck $?"; {busybox} cat "$D/f"; echo "f $?"'],
                ws.mnt, options={"op_timeout": 2}, cwd=ws.tmp, env=env, timeout=120)
    assert "stuck 1" in r.stdout and "Input/output error" in r.stderr, r.describe()
    assert "hello\nf 0" in r.stdout, r.describe()
