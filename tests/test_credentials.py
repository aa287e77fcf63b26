"""Every operation runs with the calling process's rights (issue 10): a command dropped to
another user cannot do through the mount what it could not do natively, files it creates
are its own and follow its umask, and fuse_get_context() names it. The shared mode's
server switches its fsuid, fsgid and groups per request; these tests need root to start a
command as another user."""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "server_probes.py")
NOBODY = 65534

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]


def as_nobody(*cmd, groups=None):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
            *([f"--groups={groups}"] if groups else ["--clear-groups"]), *cmd]


def ldp(tmp_path, fs, *fs_args, cmd, timeout=60):
    # the shared mode: the embedded mode runs the FS inside the dropped process itself, or,
    # when it cannot load this interpreter, in the launcher (tests/test_embedded_fallback.py)
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--mountpoint", str(tmp_path / "mnt"),
                                 fs, *map(str, fs_args), "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), cwd="/")


@pytest.fixture
def tmp_path():
    """A directory every user may reach (pytest's is under a 0700 one): the mount point
    and the lower directory must be reachable by the user the command runs as, as
    natively."""
    d = tempfile.mkdtemp(prefix="ldpfuse-cred-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def lower(tmp_path):
    d = tmp_path / "lower"
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "open").mkdir()
    os.chmod(d / "open", 0o777)
    (d / "secret").write_text("root only\n")
    os.chmod(d / "secret", 0o600)
    (d / "public").write_text("anyone\n")
    os.chmod(d / "public", 0o644)
    (d / "group").write_text("group 4242\n")
    os.chown(d / "group", 0, 4242)
    os.chmod(d / "group", 0o640)
    return d


def test_another_user_cannot_read_roots_private_files_through_the_loopback(tmp_path, lower):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, LOOPBACK, lower, cmd=as_nobody("sh", "-c", f"""
        cat {m}/public
        cat {m}/secret || echo refused
        echo x >> {m}/public || echo refused
        rm {m}/secret || echo refused
    """))
    assert r.stdout == "anyone\nrefused\nrefused\nrefused\n", r.stderr
    assert "Permission denied" in r.stderr
    assert (lower / "secret").read_text() == "root only\n"
    assert (lower / "public").read_text() == "anyone\n"


def test_files_another_user_creates_are_its_own_with_its_umask(tmp_path, lower):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, LOOPBACK, lower, cmd=as_nobody("sh", "-c", f"""
        cd {m}/open
        umask 027
        echo mine > new
        mkdir dir
        umask 0
        echo all > all
        stat -c '%n %u %g %a' new dir all
        echo x > {m}/not-here || echo refused
    """))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"new {NOBODY} {NOBODY} 640\ndir {NOBODY} {NOBODY} 750\n"
                        f"all {NOBODY} {NOBODY} 666\nrefused\n")
    st = os.stat(lower / "open" / "new")
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o640)


def test_supplementary_groups_count(tmp_path, lower):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, LOOPBACK, lower, cmd=["sh", "-c", f"""
        {shlex.join(as_nobody('cat', f'{m}/group', groups='4242'))}
        {shlex.join(as_nobody('cat', f'{m}/group'))} || echo refused
    """])
    assert r.stdout == "group 4242\nrefused\n", r.stderr


def test_a_process_that_drops_its_rights_after_using_the_mount_loses_them(tmp_path, lower):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, LOOPBACK, lower, cmd=[sys.executable, "-c", f"""
import os
print(open("{m}/secret").read(), end="")
os.setgroups([])
os.setgid({NOBODY})
os.setuid({NOBODY})
try:
    open("{m}/secret").read()
except PermissionError:
    print("refused")
"""])
    assert r.stdout == "root only\nrefused\n", r.stderr


def test_fuse_get_context_names_the_calling_process(tmp_path):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, f"{FIXTURES}:Whoami", cmd=["sh", "-c", f"""
        cat {m}/whoami-root & echo "pid $!"; wait
        {shlex.join(as_nobody('sh', '-c', f'cat {m}/whoami-nobody & echo "pid $!"; wait'))}
    """])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    for group, ids in ((lines[:2], "0 0"), (lines[2:], f"{NOBODY} {NOBODY}")):
        pid = [line[4:] for line in group if line.startswith("pid ")]
        answer = [line for line in group if not line.startswith("pid ")]
        assert answer == [f"{ids} {pid[0]}"], r.stdout


def test_a_fifo_in_the_mount_keeps_its_owner_and_mode(tmp_path, lower):
    """The real FIFO that stands for the file system's one has its owner and mode: another
    user is refused at open (before any wait for a peer), as natively."""
    os.mkfifo(lower / "private")
    os.chmod(lower / "private", 0o600)
    os.mkfifo(lower / "open" / "shared")
    os.chmod(lower / "open" / "shared", 0o666)
    m = tmp_path / "mnt"
    r = ldp(tmp_path, LOOPBACK, lower, timeout=30, cmd=as_nobody("sh", "-c", f"""
        echo x > {m}/private || echo refused
        (echo through > {m}/open/shared) &
        cat {m}/open/shared
        wait
    """))
    assert r.stdout == "refused\nthrough\n", r.stderr
    assert "Permission denied" in r.stderr


def native_as_nobody(script):
    return subprocess.run(as_nobody("sh", "-c", script), capture_output=True, text=True,
                          timeout=60, env=base_env(), cwd="/")


def test_listing_a_directory_needs_read_permission(tmp_path, lower):
    """opendir() and open(dir, O_RDONLY) check read permission with the caller's rights
    (a directory that is searchable but not readable lists for nobody with EACCES, while
    its files stay reachable), the same as on a native directory."""
    native = tmp_path / "native"
    shutil.copytree(lower, native)
    for d in (native, lower):
        (d / "hidden").mkdir()
        (d / "hidden" / "f").write_text("reachable\n")
        os.chmod(d / "hidden", 0o711)
    script = "ls {d}/hidden || echo refused; cat {d}/hidden/f; ls {d}/open && echo listed"
    want = native_as_nobody(script.format(d=native))
    r = ldp(tmp_path, LOOPBACK, lower, cmd=as_nobody("sh", "-c", script.format(d=tmp_path / "mnt")))
    assert want.stdout == "refused\nreachable\nlisted\n", want.stderr
    assert r.stdout == want.stdout, r.stderr
    assert r.stderr.replace(str(tmp_path / "mnt"), "D") == want.stderr.replace(str(native), "D")


def test_a_writer_who_is_not_the_owner_may_set_times_to_now_only(tmp_path, lower):
    """utimensat(UTIME_NOW, UTIME_NOW) is allowed to anyone who may write the file, explicit
    times only to its owner (EPERM), and neither to someone who may not write (EACCES):
    the FS gets times=None for "now" and applies that rule with the caller's rights."""
    native = tmp_path / "native"
    shutil.copytree(lower, native)
    for d in (native, lower):
        (d / "shared").write_text("x\n")
        os.chmod(d / "shared", 0o666)
    script = ("touch -c {d}/shared && echo now; touch -c -d 2001-02-03 {d}/shared || echo refused; "
              "touch -c {d}/public || echo refused; "
              "python3 -c 'import os, sys; os.utime(sys.argv[1])' {d}/shared && echo utime")
    want = native_as_nobody(script.format(d=native))
    r = ldp(tmp_path, LOOPBACK, lower, cmd=as_nobody("sh", "-c", script.format(d=tmp_path / "mnt")))
    assert want.stdout == "now\nrefused\nrefused\nutime\n", want.stderr
    assert r.stdout == want.stdout, r.stderr
    assert r.stderr.replace(str(tmp_path / "mnt"), "D") == want.stderr.replace(str(native), "D")


def test_embedded_mode_serves_another_user_from_the_launcher_and_says_once_per_process_why(tmp_path):
    """--mode embedded runs the FS inside each process: one of another user that cannot read
    the installing Python (pyenv or a venv under root's 0700 home) is served by the launcher
    instead, with its own rights, and the log says so once per process, at info level,
    naming the file it cannot read (tests/test_embedded_fallback.py has the rest)."""
    from ldpfuse_py.cli import find_libpython

    lib = find_libpython()
    probe = subprocess.run(as_nobody("test", "-r", lib), cwd="/")
    if probe.returncode == 0:
        pytest.skip(f"{lib} is readable by uid {NOBODY} here: nothing keeps it from the embedded mode")
    m = tmp_path / "mnt"
    log = tmp_path / "fs.log"
    log.touch()
    log.chmod(0o666)    # the dropped processes log there too
    (tmp_path / "a").write_text("a\n")
    (tmp_path / "b").write_text("b\n")
    argv = ldpfuse_run_argv() + ["--mode", "embedded", "--log-level", "info", "--log-file", str(log),
                                 "--mountpoint", str(m), LOOPBACK, str(tmp_path), "--"]
    r = subprocess.run(argv + as_nobody("sh", "-c", f"ls {m} > /dev/null; cat {m}/a {m}/b"),
                       capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a\nb\n" and r.stderr == ""
    lines = [line for line in log.read_text().splitlines() if line.startswith("ldpfuse[")]
    assert len(lines) == 2, lines    # ls and cat: one line each, however many calls they made
    for line in lines:
        assert "served by the launcher" in line and f"(uid {NOBODY}) cannot read {lib}" in line, line
