"""A served file's fd passed over a unix socket (SCM_RIGHTS) to a process of the command
that does not descend from its opener (its parent, or a sibling), compared step by step with
the same program on a native directory (tests/programs/passed_fd.py): the receiver reads,
writes, appends, truncates, stats and closes through it, a child it forks uses it too, a
read-only fd refuses a write (EBADF), and what it wrote is in the file system afterwards.

The shared mode: the sender's preload says which fd goes (the server keeps that open file
description), the receiver's preload claims it, and the server lets it use the handle once
the kernel (kcmp) says the receiver holds that very description (server/handles.c,
interpose/pass_fd.c). The embedded mode: the received fd is taken as an exec'd one is, a
handle of the receiver's own opened at its first use. On 3fef61b the receiver's fd was the
bare page-cache memfd in both modes: its writes never reached the file system (stat by name
said 12 bytes, the loopback's lower file kept its old bytes).

The memory example runs in the shared mode only: in the embedded mode every process builds
its own tree, so a sibling's writes are not its parent's (docs/processes-and-modes.md)."""

import os
import sys
from pathlib import Path

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, run_ldp, run_native

PROGRAM = Path(__file__).parent / "programs" / "passed_fd.py"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "server_probes.py")


def same_steps_as_native(tmp_path, fs, role):
    """passed_fd.py's steps with this role natively and in the mount (the memory example,
    or the loopback with passthrough=no: the file served through its read and write, a
    page cache, not as the lower file itself), compared step by step, and the lower
    file's bytes with native's; the mount's stderr."""
    native = tmp_path / "native"
    native.mkdir()
    want = run_native([sys.executable, PROGRAM, native, role], timeout=60)
    assert want.returncode == 0, want.stderr
    lower = tmp_path / "lower"
    lower.mkdir()
    mnt = tmp_path / "mnt"
    if fs == "memory":
        got = run_ldp(MEMORY, [], [sys.executable, PROGRAM, mnt, role], mnt, timeout=120)
    else:
        got = run_ldp(LOOPBACK, [lower], [sys.executable, PROGRAM, mnt, role], mnt,
                      options={"passthrough": "no"}, timeout=120)
    assert got.returncode == 0, got.stderr
    want_lines, got_lines = want.stdout.splitlines(), got.stdout.splitlines()
    for i, (w, g) in enumerate(zip(want_lines, got_lines)):
        assert g == w, f"step {i} ({w.split()[0]}): native {w!r}, mount {g!r}\n{got.stderr}"
    assert len(got_lines) == len(want_lines), got.stdout + got.stderr
    if fs == "loopback":
        assert (lower / "f").read_bytes() == (native / "f").read_bytes()
    return got.stderr


@pytest.mark.parametrize("role", ["parent", "sibling"])
@pytest.mark.parametrize("fs", ["memory", "loopback"])
def test_a_passed_fd_is_usable_by_a_receiver_that_is_not_below_its_opener(tmp_path, fs, role):
    if fs == "memory" and LDP_MODE == "embedded":
        pytest.skip("the embedded mode's memory example is a tree per process: a sibling's "
                    "writes are not its parent's, natively they are")
    same_steps_as_native(tmp_path, fs, role)


@pytest.mark.parametrize("role", ["closed", "exited"])
@pytest.mark.parametrize("fs", ["memory", "loopback"])
def test_a_passed_fd_its_sender_let_go_of_before_the_receive_is_usable(tmp_path, fs, role):
    """The usual pattern: send the fd, close it at once (or end), the receiver's recvmsg
    comes later. The shared server keeps the handle (it lingers) until the receiver's
    claim and close, then releases it; on 6f8b6bc the sender's close released it, the
    claim found nothing and the receiver's writes went to a bare memfd (the loopback's
    lower file and a stat by name kept the old 12 bytes). The embedded mode has no server:
    the receiver takes the fd as an exec'd one (a handle of its own), which the loopback
    checks there too."""
    if fs == "memory" and LDP_MODE == "embedded":
        pytest.skip("the embedded mode's memory example is a tree per process: the opener's "
                    "file is not its parent's, natively it is")
    stderr = same_steps_as_native(tmp_path, fs, role)
    assert "no open file the server knows" not in stderr


# A child opens f, sends its fd to the parent and closes it before the parent's recvmsg;
# the parent then receives it, writes and closes it (claimed), or drops the socket with the
# fd still in it (never-received). Each step is a line of the log the FS writes too.
LET_GO = """
import array, os, socket, sys, time
d, log, how = sys.argv[1:]
def note(what):
    with open(log, "a") as out:
        out.write(what + "\\n")
open(d + "/f", "wb").write(b"hello")
a, b = socket.socketpair()
pid = os.fork()
if pid == 0:
    f = os.open(d + "/f", os.O_RDWR)
    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [f]))])
    os.close(f)
    note("sender closed")
    os._exit(0)
os.waitpid(pid, 0)
if how == "claimed":
    msg, anc, flags, addr = b.recvmsg(1, socket.CMSG_LEN(4))
    fd = array.array("i", anc[0][2])[0]
    os.pwrite(fd, b"HELLO", 0)
    os.close(fd)
    note("receiver closed")
    for i in range(500):    # a release is not waited for (as FUSE's): 5 s at most
        seen = open(log).read().split("sender closed")[1]
        if "release /f" in seen:
            break
        time.sleep(0.01)
else:
    b.close()
    note("socket dropped")
note("end")
"""


@pytest.mark.parametrize("how", ["claimed", "never-received"])
def test_a_passed_fd_its_sender_let_go_of_is_released_once_at_the_right_time(tmp_path, how):
    """The class's flush and release of a handle whose fd its opener sent, then closed:
    at the receiver's close once it claimed it; never received, at the command's end, before
    destroy() (it would be 10 s after the sender's close in a longer command). On 6f8b6bc
    the sender's close released it at once: the receiver's close reached no method."""
    if LDP_MODE == "embedded":
        pytest.skip("the embedded mode has no server: a received fd is a handle of the "
                    "receiver's own (released at its close), one never received holds none")
    log = tmp_path / "log"
    mnt = tmp_path / "mnt"
    got = run_ldp(f"{FIXTURES}:ReleaseLog", [log], [sys.executable, "-c", LET_GO, mnt, log, how],
                  mnt, timeout=120)
    assert got.returncode == 0, got.stderr
    lines = log.read_text().splitlines()
    after = lines[lines.index("sender closed") + 1:]
    assert after[-1] == "destroy" and "flush /f" in after and "release /f" in after, lines
    if how == "claimed":
        # the receiver's close (its flush, then its release) ends the handle
        assert after.index("flush /f") < after.index("release /f") < after.index("end"), lines
    else:
        assert after == ["socket dropped", "end", "flush /f", "release /f", "destroy"], lines
    assert lines.count("release /f") == 2, lines     # the creation's, the opener's


# A child opens N files, sends each fd to the parent and closes it; once it has ended the
# parent receives them all, writes through each and closes it.
MANY = """
import array, os, socket, sys, time
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    open(f"{d}/f{i}", "wb").write(b"hello")
a, b = socket.socketpair()
pid = os.fork()
if pid == 0:
    for i in range(n):
        f = os.open(f"{d}/f{i}", os.O_RDWR)
        a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [f]))])
        os.close(f)
    os._exit(0)
os.waitpid(pid, 0)
for i in range(n):
    msg, anc, flags, addr = b.recvmsg(1, socket.CMSG_LEN(4))
    fd = array.array("i", anc[0][2])[0]
    os.pwrite(fd, b"HELLO", 0)
    os.close(fd)
"""


def test_the_handles_left_lingering_by_one_user_are_bounded(tmp_path):
    """At most 64 handles of a user linger for a receiver (server/handles.c,
    LINGER_PER_UID): past that the sender's close releases at once, as before, and the
    receiver's writes through those fds reach no file (one warning): the loopback's lower
    files (passthrough=no: served through its write) have 64 of the 66 writes; natively all
    66 files do. The bound keeps a sender from making the server hold unbounded memory."""
    if LDP_MODE == "embedded":
        pytest.skip("the embedded mode has no server: each receiver opens a handle of its own")
    native = tmp_path / "native"
    native.mkdir()
    want = run_native([sys.executable, "-c", MANY, native, "66"], timeout=60)
    assert want.returncode == 0, want.stderr
    assert sum((native / f"f{i}").read_bytes() == b"HELLO" for i in range(66)) == 66
    lower = tmp_path / "lower"
    lower.mkdir()
    mnt = tmp_path / "mnt"
    got = run_ldp(LOOPBACK, [lower], [sys.executable, "-c", MANY, mnt, "66"], mnt,
                  options={"passthrough": "no"}, timeout=120)
    assert got.returncode == 0, got.stderr
    written = [(lower / f"f{i}").read_bytes() == b"HELLO" for i in range(66)]
    assert written == [True] * 64 + [False] * 2, got.stderr
    assert "no open file the server knows" in got.stderr
