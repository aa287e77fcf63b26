"""A file system method that never returns does not hang the program (-o op_timeout).

In the shared mode a call that gets no answer within op_timeout fails with EIO, one log
line names the method, the path and the timeout, and the program goes on: `cat` of the
stuck file exits nonzero with an I/O error, `cat` of another file still works (a
thread_safe class) or fails the same way (a class served by the one FS thread that is
stuck), the launcher ends with the command's status, and no process is left behind. A
handle a late open() returns after its caller gave up is released. The embedded mode runs
the method in the caller's own thread and cannot bound it (docs/limitations.md): those
variants are skipped there.

Each run has its own subprocess timeout (a hang fails the test); nothing asserts on time.
"""

import os
import re
import sys
import uuid

import pytest

from conftest import FS_FIXTURES, LDP_MODE, run_ldp

FAULTY = FS_FIXTURES / "faulty.py"
TIMEOUT = 2             # -o op_timeout, seconds
RUN_TIMEOUT = 120       # the whole command; a hang fails the test

pytestmark = pytest.mark.skipif(
    LDP_MODE == "embedded",
    reason="the embedded mode runs the method in the caller's own thread: nothing can take "
           "the thread back from a method that never returns, so op_timeout bounds the "
           "shared mode only (docs/limitations.md)")


def marked_env(ws):
    """The test's environment, with a mark every process of the run inherits."""
    mark = uuid.uuid4().hex
    return ws.env(ws.mnt, ws.ldp_out, LDPFUSE_TEST_RUN_MARK=mark), mark


def left_behind(mark):
    """Processes of the run still alive (the launcher, the command, its children)."""
    needle = f"LDPFUSE_TEST_RUN_MARK={mark}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        argv = c.read().replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"{pid}: {argv}")
        except OSError:
            continue    # gone meanwhile, or a zombie's environment
    return found


def run_cmd(ws, cls, shell, fs_args=()):
    env, mark = marked_env(ws)
    r = run_ldp(f"{FAULTY}:{cls}", list(fs_args), ["sh", "-c", shell], ws.mnt,
                options={"op_timeout": TIMEOUT}, cwd=ws.tmp, env=env, timeout=RUN_TIMEOUT)
    assert left_behind(mark) == [], r.describe()
    return r


def statuses(stdout):
    return dict(line.split(" status ") for line in stdout.splitlines() if " status " in line)


STUCK_METHODS = ["read", "getattr", "open"]


@pytest.mark.parametrize("method", STUCK_METHODS)
def test_cat_of_stuck_file_fails_with_eio_and_other_file_still_reads(ws, method):
    """thread_safe: one thread per client, so only the stuck call's caller waits."""
    cls = f"{method.capitalize()}BlocksForeverThreadSafe"
    r = run_cmd(ws, cls, 'cat "$D/stuck"; echo "stuck status $?"; cat "$D/f"; '
                         'echo "f status $?"; exit 3')
    assert r.returncode == 3, r.describe()
    st = statuses(r.stdout)
    assert st["stuck"] != "0", r.describe()
    assert "Input/output error" in r.stderr, r.describe()
    assert st["f"] == "0" and "hello" in r.stdout, r.describe()
    assert re.search(rf"\b{method} /stuck: no answer from the file system in {TIMEOUT} s "
                     rf"\(-o op_timeout\)", r.stderr), r.describe()


@pytest.mark.parametrize("method", STUCK_METHODS)
def test_calls_queued_behind_stuck_fs_thread_time_out_and_launcher_exits(ws, method):
    """Not thread_safe: the one FS thread is stuck for ever, so every later call times
    out too, each within its own deadline; once the command has ended the launcher does
    not wait for the stuck thread: it exits with the command's status."""
    cls = f"{method.capitalize()}BlocksForever"
    r = run_cmd(ws, cls, 'cat "$D/stuck"; echo "stuck status $?"; cat "$D/f"; '
                         'echo "f status $?"; exit 3')
    assert r.returncode == 3, r.describe()
    st = statuses(r.stdout)
    assert st["stuck"] != "0" and st["f"] != "0", r.describe()
    assert re.search(rf"\b{method} /stuck: no answer", r.stderr), r.describe()
    assert re.search(r"/f: no answer from the file system", r.stderr), r.describe()
    assert "exiting without its destroy()" in r.stderr, r.describe()


PROBE_LATE_OPEN = r'''
import errno, os, sys, time
D = os.environ["D"]
try:
    open(f"{D}/stuck", "rb").read()
    print("stuck ok")
except OSError as e:
    print("stuck", errno.errorcode[e.errno])
time.sleep(float(sys.argv[1]))      # the late open() returns meanwhile
print("handles", repr(open(f"{D}/handles").read()))
print("f", open(f"{D}/f").read().strip())
'''


def test_handle_of_late_open_is_released_and_server_serves_again(ws):
    """open('/stuck') answers after 8 s, its caller gave up at 2 s and lives on: the
    server releases the handle nobody will close, and serves normally again."""
    probe = ws.write_script("probe.py", PROBE_LATE_OPEN)
    env, mark = marked_env(ws)
    r = run_ldp(f"{FAULTY}:OpenReturnsLate", ["8"], [sys.executable, probe, "10"], ws.mnt,
                options={"op_timeout": TIMEOUT}, cwd=ws.tmp, env=env, timeout=RUN_TIMEOUT)
    assert r.returncode == 0, r.describe()
    assert left_behind(mark) == [], r.describe()
    lines = r.stdout.splitlines()
    assert "stuck EIO" in lines, r.describe()
    assert "handles ''" in lines, f"the late open's handle was not released\n{r.describe()}"
    assert "f hello" in lines, r.describe()
    assert re.search(r"\bopen /stuck: no answer", r.stderr), r.describe()


PROBE_BIG_WRITE = r'''
import errno, os, subprocess, sys, time
D, marker = os.environ["D"], sys.argv[1]
f = open(f"{D}/w", "r+b", buffering=0)     # opened while the FS still answers
cat = subprocess.Popen(["cat", f"{D}/stuck"])
while not os.path.exists(marker):           # the FS thread is now in read('/stuck')
    time.sleep(0.05)
try:
    f.write(b"x" * (4 << 20))               # bigger than the channel: it rides the socket
    print("write ok")
except OSError as e:
    print("write", errno.errorcode[e.errno])
print("cat", cat.wait())
'''


def test_write_too_big_for_channel_does_not_wait_for_stuck_server(ws):
    """A write body bigger than the channel's region goes on the socket, which nobody
    reads while the FS thread is stuck: the writer gives up at op_timeout too."""
    probe = ws.write_script("probe.py", PROBE_BIG_WRITE)
    marker = ws.tmp / "fs-thread-is-stuck"
    env, mark = marked_env(ws)
    r = run_ldp(f"{FAULTY}:ReadBlocksForeverWithWritable", [marker],
                [sys.executable, probe, marker], ws.mnt, options={"op_timeout": TIMEOUT},
                cwd=ws.tmp, env=env, timeout=RUN_TIMEOUT)
    assert r.returncode == 0, r.describe()
    assert left_behind(mark) == [], r.describe()
    lines = r.stdout.splitlines()
    assert "write EIO" in lines and "cat 1" in lines, r.describe()
    assert re.search(r"\bwrite /w: no answer", r.stderr), r.describe()


def test_op_timeout_must_be_a_number(ws):
    r = run_ldp(f"{FAULTY}:TwoFiles", [], ["true"], ws.mnt,
                options={"op_timeout": "soon"}, cwd=ws.tmp, timeout=RUN_TIMEOUT)
    assert r.returncode == 2, r.describe()
    assert "-o op_timeout expects a number of seconds" in r.stderr, r.describe()
