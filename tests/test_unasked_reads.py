"""The file system is asked only for reads a program could make.

A cached fd that becomes stdin (dup2 onto 0, or inherited as 0) is filled whole,
since glibc's stdio reads it past every wrapper; a write-only one cannot be read,
so nothing is filled: `touch -d DATE f` moves its O_WRONLY fd onto 0 (coreutils'
fd_reopen), and each touch read the whole file (a 1 MiB read of the lower file on
the loopback, its atime moved)."""

import sys

from conftest import FS_FIXTURES, run_ldp

COMPUTED = f"{FS_FIXTURES / 'computed.py'}:Computed"

PROBE = r'''
import os
D = os.environ["D"]
fd = os.open(f"{D}/small", os.O_WRONLY)
os.dup2(fd, 0)
os.utime(0, (1, 1))                          # what touch does with it
print(open(f"{D}/reads").read(), end="")     # read() calls and bytes the FS served
'''


def test_write_only_fd_moved_onto_stdin_is_not_read(ws):
    script = ws.write_script("probe.py", PROBE)
    r = run_ldp(COMPUTED, [], [sys.executable, script], ws.mnt, env=ws.env(ws.mnt, ws.ldp_out), timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "0 0\n", r.describe()


def test_read_only_fd_moved_onto_stdin_is_still_filled_for_stdio(ws):
    script = ws.write_script("probe.py", PROBE.replace("os.O_WRONLY", "os.O_RDONLY").replace(
        "os.utime(0, (1, 1))", "import sys; sys.stdin.buffer.read(10)"))
    r = run_ldp(COMPUTED, [], [sys.executable, script], ws.mnt, env=ws.env(ws.mnt, ws.ldp_out), timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "1 4096\n", r.describe()


def test_touch_with_a_date_reads_nothing(ws):
    """The real program, in the shared mode (one file system instance, so the counter
    read by `cat` is the one touch's calls went to)."""
    r = run_ldp(COMPUTED, [], ["sh", "-c", 'touch -d "2001-02-03 04:05:06" "$D/small" && cat "$D/reads"'],
                ws.mnt, env=ws.env(ws.mnt, ws.ldp_out), timeout=60, mode="shared")
    assert r.returncode == 0, r.describe()
    assert r.stdout == "0 0\n", r.describe()
