"""What a run keeps on disk is private (issue 22, item 8; docs/security.md): the stand-ins
of unix sockets bound in a mount, the append lock, the FIFOs and the --strict record live
in a directory made for the run with a random name, 0700, removed when the command ends;
names another user made first at the old fixed places in /tmp are never used."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import LOOPBACK, MEMORY, NOBODY, base_env, ldpfuse_run_argv

BIND_AND_CONNECT = r'''
import os, socket, sys
m = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(f"{m}/sock")
srv.listen(1)
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect(f"{m}/sock")
conn, _ = srv.accept()
cli.sendall(b"through the stand-in")
print(conn.recv(100).decode())
'''


def ldp(tmp_path, fs, *fs_args, cmd, mode=None, extra=(), timeout=60):
    argv = ldpfuse_run_argv() + [*(["--mode", mode] if mode else []), *extra,
                                 "--mountpoint", str(tmp_path / "mnt"), fs, *map(str, fs_args), "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=base_env(), cwd="/")


def test_the_private_directory_is_0700_and_gone_when_the_command_ends(tmp_path):
    r = ldp(tmp_path, MEMORY, cmd=[sys.executable, "-c", """
import os, stat
d = os.environ["LDPFUSE_RUN_DIR"]
for p in (os.path.dirname(d), d):
    st = os.lstat(p)
    print(oct(stat.S_IMODE(st.st_mode)), st.st_uid == os.geteuid(), stat.S_ISDIR(st.st_mode))
print(d)
"""])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["0o700 True True", "0o700 True True"], r.stdout
    run_dir = lines[2]
    assert not os.path.exists(run_dir) and not os.path.exists(os.path.dirname(run_dir))


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_socket_stand_ins_never_use_a_directory_another_user_made_first(tmp_path, mode):
    """/tmp/ldpfuse-sockets-UID made by someone else (the old fixed name) is not used: the
    stand-in is in the run's private directory, and the attacker's directory stays empty."""
    if os.geteuid() != 0:
        pytest.skip("making a directory of another user needs root")
    trap = f"/tmp/ldpfuse-sockets-{os.getuid()}"
    made = not os.path.exists(trap)
    if made:
        os.mkdir(trap, 0o777)
        os.chown(trap, NOBODY, NOBODY)
    try:
        before = sorted(os.listdir(trap))
        r = ldp(tmp_path, MEMORY, mode=mode, cmd=[sys.executable, "-c", BIND_AND_CONNECT, str(tmp_path / "mnt")])
        assert r.returncode == 0, r.stderr
        assert r.stdout == "through the stand-in\n"
        assert sorted(os.listdir(trap)) == before
    finally:
        if made:
            shutil.rmtree(trap, ignore_errors=True)


def test_appends_do_not_wait_for_a_lock_file_another_user_holds(tmp_path):
    """The embedded mode's append lock: a /tmp/.ldpfuse-append-UID that another user made
    and holds a lock on (the old fixed name) holds up nobody's `>>`."""
    if os.geteuid() != 0:
        pytest.skip("making a file of another user needs root")
    import fcntl

    trap = f"/tmp/.ldpfuse-append-{os.geteuid()}"
    made = not os.path.exists(trap)
    if made:
        with open(trap, "w"):
            pass
        os.chown(trap, NOBODY, NOBODY)
    fd = os.open(trap, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)    # every byte: whatever byte the path hashes to
        lower = tmp_path / "lower"
        lower.mkdir()
        r = ldp(tmp_path, LOOPBACK, lower, mode="embedded", extra=["-o", "passthrough=no"], timeout=30,
                cmd=["sh", "-c", f"echo a >> {tmp_path}/mnt/f; echo b >> {tmp_path}/mnt/f; cat {tmp_path}/mnt/f"])
        assert r.returncode == 0, r.stderr
        assert r.stdout == "a\nb\n"
    finally:
        os.close(fd)
        if made:
            os.unlink(trap)


def test_the_strict_record_is_the_users_alone(tmp_path):
    r = ldp(tmp_path, MEMORY, extra=["--strict"], cmd=[sys.executable, "-c", """
import os, stat
st = os.stat(os.environ["LDPFUSE_ESCAPES_LOG"])
print(oct(stat.S_IMODE(st.st_mode)), os.path.dirname(os.environ["LDPFUSE_ESCAPES_LOG"]) == os.environ["LDPFUSE_RUN_DIR"])
"""])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0o600 True\n"
