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

import sys
from pathlib import Path

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, run_ldp, run_native

PROGRAM = Path(__file__).parent / "programs" / "passed_fd.py"


@pytest.mark.parametrize("role", ["parent", "sibling"])
@pytest.mark.parametrize("fs", ["memory", "loopback"])
def test_a_passed_fd_is_usable_by_a_receiver_that_is_not_below_its_opener(tmp_path, fs, role):
    if fs == "memory" and LDP_MODE == "embedded":
        pytest.skip("the embedded mode's memory example is a tree per process: a sibling's "
                    "writes are not its parent's, natively they are")
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
        # passthrough=no: the loopback serves the file through its read and write (a page
        # cache), not as the lower file itself
        got = run_ldp(LOOPBACK, [lower], [sys.executable, PROGRAM, mnt, role], mnt,
                      options={"passthrough": "no"}, timeout=120)
    assert got.returncode == 0, got.stderr
    want_lines, got_lines = want.stdout.splitlines(), got.stdout.splitlines()
    for i, (w, g) in enumerate(zip(want_lines, got_lines)):
        assert g == w, f"step {i} ({w.split()[0]}): native {w!r}, mount {g!r}\n{got.stderr}"
    assert len(got_lines) == len(want_lines), got.stdout + got.stderr
    if fs == "loopback":
        assert (lower / "f").read_bytes() == (native / "f").read_bytes()


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
    assert "no open file the server knows" not in got.stderr
    if fs == "loopback":
        assert (lower / "f").read_bytes() == (native / "f").read_bytes()
