"""A file system method that never returns does not hang the program (-o op_timeout).

In the shared mode a call that gets no answer within op_timeout fails with EIO, one log
line names the method, the path and the timeout, and the program goes on: `cat` of the
stuck file exits nonzero with an I/O error, `cat` of another file still works (a
thread_safe class) or fails too, and soon (a class served by the one FS thread that is
stuck), the launcher ends with the command's status, and no process is left behind; a
kill of the launcher still reaches the command. A
handle a late open() returns after its caller gave up is released. The embedded mode runs
the method in the caller's own thread and cannot bound it (docs/limitations.md): those
variants are skipped there.

Each run has its own subprocess timeout (a hang fails the test); nothing asserts on time.
"""

import os
import re
import signal
import sys
import uuid

import pytest

from conftest import FS_FIXTURES, LDP_MODE, run_ldp

FAULTY = FS_FIXTURES / "faulty.py"
TIMEOUT = 2             # -o op_timeout, seconds
RUN_TIMEOUT = 120       # the whole command; a hang fails the test

shared_mode_only = pytest.mark.skipif(
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


def run_fs(ws, cls, fs_args, cmd, timeout=RUN_TIMEOUT, mode=None, env_extra=None):
    """cmd under faulty.py's cls with op_timeout=TIMEOUT; no process of the run is left."""
    env, mark = marked_env(ws)
    env.update(env_extra or {})
    r = run_ldp(f"{FAULTY}:{cls}", list(fs_args), cmd, ws.mnt,
                options={"op_timeout": TIMEOUT}, cwd=ws.tmp, env=env, timeout=timeout,
                mode=mode)
    assert left_behind(mark) == [], r.describe()
    return r


def run_cmd(ws, cls, shell, fs_args=(), timeout=RUN_TIMEOUT, mode=None):
    return run_fs(ws, cls, fs_args, ["sh", "-c", shell], timeout=timeout, mode=mode)


def run_probe(ws, cls, fs_args, source, *args):
    """The Python program `source` (given args) under cls, as run_fs."""
    return run_fs(ws, cls, fs_args, [sys.executable, ws.write_script("probe.py", source), *args])


def statuses(stdout):
    return dict(line.split(" status ") for line in stdout.splitlines() if " status " in line)


STUCK_METHODS = ["read", "getattr", "open"]


@shared_mode_only
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


@shared_mode_only
@pytest.mark.parametrize("method", STUCK_METHODS)
def test_calls_queued_behind_stuck_fs_thread_time_out_and_launcher_exits(ws, method):
    """Not thread_safe: the one FS thread is stuck for ever, so every later call fails
    too (soon: a call has timed out behind it, and it has finished nothing since); once
    the command has ended the launcher does not wait for the stuck thread: it exits with
    the command's status."""
    cls = f"{method.capitalize()}BlocksForever"
    r = run_cmd(ws, cls, 'cat "$D/stuck"; echo "stuck status $?"; cat "$D/f"; '
                         'echo "f status $?"; exit 3')
    assert r.returncode == 3, r.describe()
    st = statuses(r.stdout)
    assert st["stuck"] != "0" and st["f"] != "0", r.describe()
    # the method's call is logged (the shell's open may time out first, as create/open)
    assert re.search(rf"\b{method} /stuck: (no answer|the file system is still in a method)",
                     r.stderr), r.describe()
    assert re.search(r"/f: the file system is still in a method", r.stderr), r.describe()
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


@shared_mode_only
def test_handle_of_late_open_is_released_and_server_serves_again(ws):
    """open('/stuck') answers after 8 s, its caller gave up at 2 s and lives on: the
    server releases the handle nobody will close, and serves normally again."""
    r = run_probe(ws, "OpenReturnsLate", ["8"], PROBE_LATE_OPEN, "10")
    assert r.returncode == 0, r.describe()
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


@shared_mode_only
def test_write_too_big_for_channel_does_not_wait_for_stuck_server(ws):
    """A write bigger than the channel's region goes in pieces of the region's size (the
    server reads no body off the socket): behind a stuck FS thread the writer gives up
    at op_timeout, or sooner once the FS thread is seen stuck, like any call."""
    marker = ws.tmp / "fs-thread-is-stuck"
    r = run_probe(ws, "ReadBlocksForeverWithWritable", [marker], PROBE_BIG_WRITE, marker)
    assert r.returncode == 0, r.describe()
    lines = r.stdout.splitlines()
    assert "write EIO" in lines and "cat 1" in lines, r.describe()
    assert re.search(r"\bwrite /w: (no answer|the file system is still in a method)", r.stderr), r.describe()


PROBE_CALLS_BEHIND_STUCK = r'''
import errno, os, subprocess, sys, time
D, dir = os.environ["D"], sys.argv[1]
cat = subprocess.Popen(["cat", f"{D}/stuck"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists(f"{dir}/stuck"):           # the FS thread is in read('/stuck')
    time.sleep(0.02)
t0 = time.monotonic()
for i in range(5):
    t = time.monotonic()
    try:
        os.stat(f"{D}/nope{i}")
        result = "answered"
    except OSError as e:
        result = errno.errorcode[e.errno]
    print(f"call {i} {result} {time.monotonic() - t:.2f} s")
print(f"5 calls {time.monotonic() - t0:.2f} s")
print("returned by itself" if os.path.exists(f"{dir}/returned-by-itself") else "still stuck")
open(f"{dir}/release", "w").close()
while not os.path.exists(f"{dir}/returned") and not os.path.exists(f"{dir}/returned-by-itself"):
    time.sleep(0.02)
print("cat", cat.wait())
print("f", open(f"{D}/f").read().strip())
try:
    os.stat(f"{D}/nope9")
except OSError as e:
    print("nope9", errno.errorcode[e.errno])
'''
STUCK_SECONDS = 4 * TIMEOUT     # read('/stuck') returns by itself then, if not released


@shared_mode_only
def test_calls_behind_stuck_fs_thread_fail_fast_until_it_answers_again(ws):
    """Not thread_safe: read('/stuck') holds the FS thread. The program's first call behind
    it times out at op_timeout; from then on the FS thread counts as stuck (it has
    finished nothing since), and each later call fails with EIO after a short wait
    instead of its own op_timeout: the 5 calls end before the method returns by itself
    (4 x op_timeout; one op_timeout each would take 5). Once it returns, calls are
    answered again."""
    r = run_probe(ws, "ReadStuckUntilReleased", [ws.tmp, STUCK_SECONDS], PROBE_CALLS_BEHIND_STUCK, ws.tmp)
    assert r.returncode == 0, r.describe()
    lines = r.stdout.splitlines()
    assert [line.split()[2] for line in lines if line.startswith("call ")] == ["EIO"] * 5, \
        r.describe()
    assert "still stuck" in lines, r.describe()
    assert "f hello" in lines and "nope9 ENOENT" in lines, r.describe()
    assert re.search(r"getattr /nope\d: the file system is still in a method", r.stderr), \
        r.describe()


PROBE_MKDIR_BEHIND_STUCK = r'''
import errno, os, subprocess, sys, time
D, dir = os.environ["D"], sys.argv[1]
cat = subprocess.Popen(["cat", f"{D}/stuck"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists(f"{dir}/stuck"):
    time.sleep(0.02)
for name in ("d0", "d1"):           # each the first request of a fresh connection
    try:
        os.mkdir(f"{D}/{name}")
        print(name, "made")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
open(f"{dir}/release", "w").close()
while not os.path.exists(f"{dir}/returned") and not os.path.exists(f"{dir}/returned-by-itself"):
    time.sleep(0.02)
cat.wait()
os.stat(f"{D}/f")                   # the FS thread has served what was queued before this
print("after", [name for name in ("d0", "d1") if os.path.exists(f"{D}/{name}")])
'''


@shared_mode_only
def test_call_given_up_behind_stuck_fs_thread_is_never_run(ws):
    """A mkdir that got EIO while it waited behind the stuck FS thread is not made once
    the method returns: the program was told it failed."""
    r = run_probe(ws, "ReadStuckUntilReleased", [ws.tmp, STUCK_SECONDS], PROBE_MKDIR_BEHIND_STUCK, ws.tmp)
    assert r.returncode == 0, r.describe()
    lines = r.stdout.splitlines()
    assert "d0 EIO" in lines and "d1 EIO" in lines, r.describe()
    assert "after []" in lines, r.describe()


@shared_mode_only
def test_thread_safe_class_is_never_taken_for_stuck(ws):
    """thread_safe: one thread per client, so a stuck method holds up only its caller:
    after the stuck read timed out, other calls are still answered."""
    r = run_cmd(ws, "ReadBlocksForeverThreadSafe",
                'cat "$D/stuck"; for i in 1 2 3; do cat "$D/f" || exit 1; done; exit 3')
    assert r.returncode == 3 and r.stdout.count("hello") == 3, r.describe()
    assert "still in a method" not in r.stderr, r.describe()


# The command sends the signal to its parent, the launcher, once the FS thread is stuck in
# C code (Python's own handlers could not run there): `cat` of the stuck file waits in the
# background, and the command sleeps far longer than the run may take.
SIGNAL_THE_LAUNCHER = '''
{reader} &
while [ ! -e "$MARKER" ]; do sleep 0.1; done
{trap}kill -{sig} $PPID
{wait}
'''
SLEEP_LONG = 600        # the command's own sleep; the run's timeout is far shorter
SIGNALLED_RUN_TIMEOUT = 60


def signal_the_launcher(ws, sig, trap=False, mode=None, reader='cat "$D/stuck"'):
    marker = ws.tmp / "fs-thread-is-stuck"
    shell = SIGNAL_THE_LAUNCHER.format(
        reader=reader, sig=sig,
        trap=(f"sleep {SLEEP_LONG} & trap 'kill $!; echo got {sig}; exit 7' {sig}\n"
              if trap else ""),
        wait="wait $!" if trap else f"exec sleep {SLEEP_LONG}")
    return run_fs(ws, "ReadBlocksForeverInC", [marker], ["sh", "-c", shell],
                  timeout=SIGNALLED_RUN_TIMEOUT, mode=mode, env_extra={"MARKER": str(marker)})


@shared_mode_only
@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP"])
def test_signal_to_launcher_reaches_command_while_fs_thread_is_stuck_in_c(ws, sig):
    """Not thread_safe, the FS thread (the launcher's main thread) stuck in C code: a kill
    of the launcher still reaches the command, which dies of it, and the launcher exits
    as the command did (by the same signal: a shell says 128 + its number) instead of
    waiting for the command's long sleep."""
    r = signal_the_launcher(ws, sig)
    assert r.returncode == -getattr(signal, f"SIG{sig}"), r.describe()
    assert re.search(r"\bread /stuck: no answer", r.stderr), r.describe()


@shared_mode_only
def test_command_that_traps_forwarded_sigterm_gives_launcher_its_status(ws):
    r = signal_the_launcher(ws, "TERM", trap=True)
    assert r.returncode == 7 and "got TERM" in r.stdout, r.describe()


def test_signal_to_embedded_launcher_reaches_command_while_its_server_is_stuck(ws):
    """--mode embedded: a process that cannot run the file system itself (a Python program
    that reads the mount while its interpreter starts: PYTHONPATH there) is served by the
    launcher, whose main thread then serves it and gets stuck the same way; the launcher
    still forwards the signal."""
    reader = f'PYTHONPATH="$D" {sys.executable} -c \'open("{ws.mnt}/stuck").read()\''
    r = signal_the_launcher(ws, "TERM", mode="embedded", reader=reader)
    assert r.returncode == -signal.SIGTERM, r.describe()
    assert re.search(r"\bread /stuck: no answer", r.stderr), r.describe()


@shared_mode_only
def test_op_timeout_must_be_a_number(ws):
    r = run_ldp(f"{FAULTY}:TwoFiles", [], ["true"], ws.mnt,
                options={"op_timeout": "soon"}, cwd=ws.tmp, timeout=RUN_TIMEOUT)
    assert r.returncode == 2, r.describe()
    assert "-o op_timeout expects a number of seconds" in r.stderr, r.describe()
