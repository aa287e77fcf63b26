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

import pytest

from conftest import LOOPBACK, MEMORY, NOBODY, as_nobody, base_env, ldpfuse_run_argv

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "server_probes.py")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]


def ldp(shared_tmp, fs, *fs_args, cmd, timeout=60, options=("-o", "allow_other")):
    # the shared mode: the embedded mode runs the FS inside the dropped process itself, or,
    # when it cannot load this interpreter, in the launcher (tests/test_embedded_fallback.py).
    # allow_other: the command's processes of another user are served (docs/security.md)
    argv = ldpfuse_run_argv() + ["--mode", "shared", *options, "--mountpoint", str(shared_tmp / "mnt"),
                                 fs, *map(str, fs_args), "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), cwd="/")


def test_another_user_cannot_read_roots_private_files_through_the_loopback(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody("sh", "-c", f"""
        cat {m}/public
        cat {m}/secret || echo refused
        echo x >> {m}/public || echo refused
        rm {m}/secret || echo refused
    """))
    assert r.stdout == "anyone\nrefused\nrefused\nrefused\n", r.stderr
    assert "Permission denied" in r.stderr
    assert (users_lower / "secret").read_text() == "root only\n"
    assert (users_lower / "public").read_text() == "anyone\n"


def test_files_another_user_creates_are_its_own_with_its_umask(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody("sh", "-c", f"""
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
    st = os.stat(users_lower / "open" / "new")
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o640)


def test_supplementary_groups_count(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=["sh", "-c", f"""
        {shlex.join(as_nobody('cat', f'{m}/group', groups='4242'))}
        {shlex.join(as_nobody('cat', f'{m}/group'))} || echo refused
    """])
    assert r.stdout == "group 4242\nrefused\n", r.stderr


def test_a_process_that_drops_its_rights_after_using_the_mount_loses_them(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=[sys.executable, "-c", f"""
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


def test_fuse_get_context_names_the_calling_process(shared_tmp):
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, f"{FIXTURES}:Whoami", cmd=["sh", "-c", f"""
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


def test_a_fifo_in_the_mount_keeps_its_owner_and_mode(shared_tmp, users_lower):
    """The real FIFO that stands for the file system's one has its owner and mode: another
    user is refused at open (before any wait for a peer), as natively."""
    os.mkfifo(users_lower / "private")
    os.chmod(users_lower / "private", 0o600)
    os.mkfifo(users_lower / "open" / "shared")
    os.chmod(users_lower / "open" / "shared", 0o666)
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, users_lower, timeout=30, cmd=as_nobody("sh", "-c", f"""
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


def test_listing_a_directory_needs_read_permission(shared_tmp, users_lower):
    """opendir() and open(dir, O_RDONLY) check read permission with the caller's rights
    (a directory that is searchable but not readable lists for nobody with EACCES, while
    its files stay reachable), the same as on a native directory."""
    native = shared_tmp / "native"
    shutil.copytree(users_lower, native)
    for d in (native, users_lower):
        (d / "hidden").mkdir()
        (d / "hidden" / "f").write_text("reachable\n")
        os.chmod(d / "hidden", 0o711)
    script = "ls {d}/hidden || echo refused; cat {d}/hidden/f; ls {d}/open && echo listed"
    want = native_as_nobody(script.format(d=native))
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody("sh", "-c", script.format(d=shared_tmp / "mnt")))
    assert want.stdout == "refused\nreachable\nlisted\n", want.stderr
    assert r.stdout == want.stdout, r.stderr
    assert r.stderr.replace(str(shared_tmp / "mnt"), "D") == want.stderr.replace(str(native), "D")


def test_a_writer_who_is_not_the_owner_may_set_times_to_now_only(shared_tmp, users_lower):
    """utimensat(UTIME_NOW, UTIME_NOW) is allowed to anyone who may write the file, explicit
    times only to its owner (EPERM), and neither to someone who may not write (EACCES):
    the FS gets times=None for "now" and applies that rule with the caller's rights."""
    native = shared_tmp / "native"
    shutil.copytree(users_lower, native)
    for d in (native, users_lower):
        (d / "shared").write_text("x\n")
        os.chmod(d / "shared", 0o666)
    script = ("touch -c {d}/shared && echo now; touch -c -d 2001-02-03 {d}/shared || echo refused; "
              "touch -c {d}/public || echo refused; "
              "python3 -c 'import os, sys; os.utime(sys.argv[1])' {d}/shared && echo utime")
    want = native_as_nobody(script.format(d=native))
    r = ldp(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody("sh", "-c", script.format(d=shared_tmp / "mnt")))
    assert want.stdout == "now\nrefused\nrefused\nutime\n", want.stderr
    assert r.stdout == want.stdout, r.stderr
    assert r.stderr.replace(str(shared_tmp / "mnt"), "D") == want.stderr.replace(str(native), "D")


def test_embedded_mode_serves_another_user_from_the_launcher_and_says_once_per_process_why(shared_tmp):
    """--mode embedded runs the FS inside each process: one of another user that cannot read
    the installing Python (pyenv or a venv under root's 0700 home) is served by the launcher
    instead, with its own rights, and the log says so once per process, at info level,
    naming the file it cannot read (tests/test_embedded_fallback.py has the rest)."""
    from ldpfuse_py.cli import find_libpython

    lib = find_libpython()
    probe = subprocess.run(as_nobody("test", "-r", lib), cwd="/")
    if probe.returncode == 0:
        pytest.skip(f"{lib} is readable by uid {NOBODY} here: nothing keeps it from the embedded mode")
    m = shared_tmp / "mnt"
    log = shared_tmp / "fs.log"
    log.touch()
    log.chmod(0o666)    # the dropped processes log there too
    (shared_tmp / "a").write_text("a\n")
    (shared_tmp / "b").write_text("b\n")
    argv = ldpfuse_run_argv() + ["--mode", "embedded", "-o", "allow_other", "--log-level", "info", "--log-file", str(log),
                                 "--mountpoint", str(m), LOOPBACK, str(shared_tmp), "--"]
    r = subprocess.run(argv + as_nobody("sh", "-c", f"ls {m} > /dev/null; cat {m}/a {m}/b"),
                       capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a\nb\n" and r.stderr == ""
    lines = [line for line in log.read_text().splitlines() if line.startswith("ldpfuse[")]
    assert len(lines) == 2, lines    # ls and cat: one line each, however many calls they made
    for line in lines:
        assert "served by the launcher" in line and f"(uid {NOBODY}) cannot read {lib}" in line, line


def test_without_allow_other_another_user_of_the_command_is_refused(shared_tmp):
    """Kernel FUSE's rule (issue 22): only the launcher's user is served unless -o allow_other.
    A process of the command that runs as uid 65534 gets EACCES for every call on the mount,
    and nothing is made; the log says why, once per process."""
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, MEMORY, options=(), cmd=["sh", "-c", f"""
        echo root > {m}/f && chmod 644 {m}/f
        {shlex.join(as_nobody('sh', '-c', f'cat {m}/f || echo refused; ls {m} || echo refused; '
                                           f'echo x > {m}/g || echo refused'))}
        cat {m}/f; ls {m}
    """])
    assert r.stdout == "refused\nrefused\nrefused\nroot\nf\n", r.stderr
    assert r.stderr.count("Permission denied") == 3, r.stderr
    assert "serves only the launcher's user unless -o allow_other" in r.stderr


def test_without_allow_other_a_root_process_that_becomes_another_user_is_refused(shared_tmp):
    """A process that connected as root and then dropped to uid 65534 is judged by who it is
    now: without allow_other, refused (EACCES); -o allow_root serves root only, not it."""
    m = shared_tmp / "mnt"
    prog = f"""
import os
open("{m}/f", "w").write("root\\n")
os.chmod("{m}/f", 0o644)
print(open("{m}/f").read(), end="")
os.setgroups([])
os.setgid({NOBODY})
os.setuid({NOBODY})
try:
    open("{m}/f").read()
    print("served")
except PermissionError:
    print("refused")
"""
    for options in ((), ("-o", "allow_root")):
        r = ldp(shared_tmp, MEMORY, options=options, cmd=[sys.executable, "-c", prog])
        assert r.stdout == "root\nrefused\n", (options, r.stderr)
