"""A program's own byte-range locks on a cached file (docs/cache.md: the cache's own
ordering never takes a lock a program can collide with). Whole-file POSIX locks
(`lockf(fd, F_LOCK, 0)`: Python's fcntl.lockf, Java's FileChannel.lock(), many
databases) cover every byte of the file, so a write must neither wait on the
process's own lock nor on another process's: advisory locks never block I/O.

Each program runs natively and under ldpfuse with a short limit: a hang fails."""

import pytest

import sys

from conftest import FS_FIXTURES, LDP_MODE, LOOPBACK, MEMORY, need

HANG_LIMIT = 30

FS = [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})]
FS_IDS = ["memory", "loopback-no-passthrough"]

OWN_LOCK = r'''
import fcntl, os
D = os.environ["D"]
fd = os.open(f"{D}/f", os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)              # l_len 0: the whole file, every offset
print(os.write(fd, b"hello world\n"))
os.ftruncate(fd, 6)
print(os.pwrite(fd, b"there\n", 6), os.pread(fd, 100, 0))
with open(f"{D}/f", "a") as f:              # stdio through another description
    f.write("more\n")
print(open(f"{D}/f").read(), end="")
fcntl.lockf(fd, fcntl.LOCK_UN)
os.close(fd)
'''

OTHERS_LOCK = r'''
import fcntl, os, sys
D = os.environ["D"]
with open(f"{D}/f", "w") as f:
    f.write("start\n")
fd = os.open(f"{D}/f", os.O_RDWR)    # before the fork: one cache in the embedded mode too
r, w = os.pipe()
done_r, done_w = os.pipe()
pid = os.fork()
if pid == 0:                                 # holds a whole-file lock until told
    fd = os.open(f"{D}/f", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    os.write(w, b"x")
    os.read(done_r, 1)
    os._exit(0)
os.read(r, 1)
print(os.pwrite(fd, b"written while locked\n", 6))   # advisory: never waits
os.ftruncate(fd, 27)
print(os.pread(fd, 100, 0))
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError as e:
    print("lock held by the other process:", e.errno)
os.write(done_w, b"x")
os.waitpid(pid, 0)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("lock free once it exits")
'''


@pytest.mark.parametrize("fs,options", FS, ids=FS_IDS)
def test_write_under_the_process_own_whole_file_lock_returns(ws, fs, options):
    ws.compare_py(OWN_LOCK, fs=fs, options=options, timeout=HANG_LIMIT)


@pytest.mark.parametrize("fs,options", FS, ids=FS_IDS)
def test_write_while_another_process_holds_a_whole_file_lock_returns(ws, fs, options):
    ws.compare_py(OTHERS_LOCK, fs=fs, options=options, timeout=HANG_LIMIT)


# Locks between unrelated processes of the command (issue 26): a holder started by sh takes
# a lock and says so; the checker, another process, tries it. The kernel's rules hold: a
# POSIX lock goes at the close of any fd of the file, a flock only at the last close of its
# open file description, both at the holder's death; a blocked F_SETLKW wait ends with EINTR
# when a signal handler runs.
BETWEEN = r'''
import fcntl, os, signal, subprocess, sys, time
D = os.environ["D"]
with open(f"{D}/f", "w") as f:
    f.write("data\n")
HOLDER = """
import fcntl, os, sys
D, how = sys.argv[1], sys.argv[2]
fd = os.open(D + "/f", os.O_RDWR)
if how == "flock":
    fcntl.flock(fd, fcntl.LOCK_EX)
else:
    fcntl.lockf(fd, fcntl.LOCK_EX)
dup = os.dup(fd)
print("held", flush=True)
for line in sys.stdin:
    if line.strip() == "close-dup":
        os.close(dup)
    elif line.strip() == "close-other":
        os.close(os.open(D + "/f", os.O_RDONLY))
    print("done", flush=True)
"""

def holder(how):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, D, how], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "held\n"
    return p

def tell(p, what):
    p.stdin.write(what + "\n"); p.stdin.flush()
    assert p.stdout.readline() == "done\n"

def free(how):
    fd = os.open(f"{D}/f", os.O_RDWR)
    try:
        if how == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return "free"
    except OSError as e:
        return "held (%s)" % ("EAGAIN" if e.errno == 11 else e.errno)
    finally:
        os.close(fd)

import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
SYS_flock = {"x86_64": 73, "aarch64": 32}[platform.machine()]
for how in ("flock", "lockf"):
    p = holder(how)
    print(how, "while held:", free(how))
    if how == "flock":      # syscall(SYS_flock) goes through the wrapper too
        fd = os.open(f"{D}/f", os.O_RDWR)
        r = libc.syscall(SYS_flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("syscall(SYS_flock) while held:", r, os.strerror(ctypes.get_errno()) if r else "")
        os.close(fd)
    tell(p, "close-dup")
    print(how, "after closing a dup:", free(how))
    tell(p, "close-other")
    print(how, "after closing another fd of the file:", free(how))
    p.kill(); p.wait()
    print(how, "after the holder's death:", free(how))

# F_SETLKW waits, and a signal's handler ends the wait (EINTR, Python raises from it)
p = holder("lockf")
class Woken(Exception):
    pass
def woken(*a):
    raise Woken()
signal.signal(signal.SIGALRM, woken)
fd = os.open(f"{D}/f", os.O_RDWR)
signal.setitimer(signal.ITIMER_REAL, 0.3)
t0 = time.monotonic()
try:
    fcntl.lockf(fd, fcntl.LOCK_EX)
    print("lockf did not wait")
except Woken:
    print("the wait ended by the signal", time.monotonic() - t0 < 5)
p.kill(); p.wait()
fcntl.lockf(fd, fcntl.LOCK_EX)
print("then taken")
os.close(fd)
# F_GETLK names the holder
p = holder("lockf")
import struct
arg = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
fd2 = os.open(f"{D}/f", os.O_RDWR)
res = fcntl.fcntl(fd2, fcntl.F_GETLK, arg)
l_type, _, _, _, l_pid = struct.unpack("hhqqi", res)
print("F_GETLK: write-locked by the holder", l_type == fcntl.F_WRLCK and l_pid == p.pid)
p.kill(); p.wait()
'''

BETWEEN_FS = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
BETWEEN_IDS = ["loopback", "loopback-cached", "memory"]


@pytest.mark.parametrize("fs,options", BETWEEN_FS, ids=BETWEEN_IDS)
def test_flock_and_lockf_exclude_other_processes_of_the_command(ws, fs, options):
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the embedded mode gives each process its own memory tree: the holder's "
                    "file is not the checker's")
    ws.compare_py(BETWEEN, fs=fs, options=options, timeout=HANG_LIMIT, check_tree=False)


FLOCK1 = r'''
echo x > "$D/f"
flock "$D/f" sleep 2 &
sleep 0.5
flock -n "$D/f" echo "taken while held" || echo "flock -n: held by the other"
flock -w 10 "$D/f" echo "flock -w: taken once the other let go"
wait
'''


@pytest.mark.parametrize("fs,options", BETWEEN_FS[1:2], ids=BETWEEN_IDS[1:2])
def test_flock_1_waits_for_another_flock_1(ws, fs, options):
    need("flock")
    ws.compare_sh(FLOCK1, fs=fs, options=options, timeout=HANG_LIMIT, check_tree=False)


# A class with fusepy's lock and mfusepy's flock is offered every lock (as kernel FUSE offers
# them to a file system that takes them), after the command's own lock is held: it sees the
# calls, its refusal is the caller's error, its F_GETLK answer is the caller's, and a
# blocking request it refuses waits until a signal's handler ends it (EINTR).
CLASS_LOCKS = r'''
import fcntl, os, signal, struct, sys
D = os.environ["D"]
for name in ("plain", "x.denied", "y.remote"):
    with open(f"{D}/{name}", "w") as f:
        f.write("data\n")
fd = os.open(f"{D}/plain", os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)
fcntl.lockf(fd, fcntl.LOCK_UN, 10, 0)
fcntl.flock(fd, fcntl.LOCK_SH)
os.close(fd)
fd = os.open(f"{D}/x.denied", os.O_RDWR)
for what, call in (("lockf", lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                   ("flock", lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))):
    try:
        call()
        print(what, "taken")
    except OSError as e:
        print(what, "refused by the class:", os.strerror(e.errno))
class Woken(Exception):
    pass
def woken(*a):
    raise Woken()
signal.signal(signal.SIGALRM, woken)
signal.setitimer(signal.ITIMER_REAL, 0.3)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX)
    print("the blocking lockf returned")
except Woken:
    print("the blocking lockf waited until the signal")
fcntl.lockf(fd, fcntl.LOCK_SH)
print("a read lock is taken")
os.close(fd)
fd = os.open(f"{D}/y.remote", os.O_RDWR)
res = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)))
print("F_GETLK: write-locked", res[0] == fcntl.F_WRLCK, "by", res[4])
os.close(fd)
# a process killed while it holds locks through the class
with open(f"{D}/dead", "w") as f:
    f.write("data\n")
pid = os.fork()
if pid == 0:
    fd = os.open(f"{D}/dead", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.kill(os.getpid(), signal.SIGKILL)
os.waitpid(pid, 0)
'''


def test_a_class_with_lock_and_flock_sees_and_decides_the_calls(ws):
    log = ws.tmp / "locks.log"
    r = ws.ldp_run([sys.executable, ws.write_script("class_locks.py", CLASS_LOCKS)],
                   fs=f"{FS_FIXTURES}/locking.py:Locking", fs_args=[log], timeout=HANG_LIMIT)
    assert r.returncode == 0, r.describe()
    assert r.stdout == ("lockf refused by the class: Resource temporarily unavailable\n"
                        "flock refused by the class: Resource temporarily unavailable\n"
                        "the blocking lockf waited until the signal\n"
                        "a read lock is taken\n"
                        "F_GETLK: write-locked True by 4242\n"), r.describe()
    calls = log.read_text().splitlines()
    assert calls[:9] == [
        "lock /plain F_SETLK WRLCK start=0 len=10 pid=set",
        "lock /plain F_SETLK UNLCK start=0 len=10 pid=set",
        "flock /plain LOCK_SH|LOCK_NB",
        "lock /plain F_SETLK UNLCK start=0 len=0 pid=set",    # the close (libfuse's flush)
        "flock /plain LOCK_UN",                               # the last close (release)
        "lock /x.denied F_SETLK WRLCK start=0 len=0 pid=set",
        "flock /x.denied LOCK_EX|LOCK_NB",
        "lock /x.denied F_SETLK WRLCK start=0 len=0 pid=set",  # the blocking one, asked again
        "lock /x.denied F_SETLK WRLCK start=0 len=0 pid=set",
    ], calls
    rest = [c for c in calls[9:] if c != "lock /x.denied F_SETLK WRLCK start=0 len=0 pid=set"]
    dead = ["lock /dead F_SETLK WRLCK start=0 len=0 pid=set", "flock /dead LOCK_EX|LOCK_NB"]
    if LDP_MODE != "embedded":
        # the server lets go of a dead process's locks, as the kernel does; in the embedded
        # mode the class that held them died with the process
        dead += ["lock /dead F_SETLK UNLCK start=0 len=0 pid=set", "flock /dead LOCK_UN"]
    assert rest == ["lock /x.denied F_SETLK RDLCK start=0 len=0 pid=set",
                    "lock /x.denied F_SETLK UNLCK start=0 len=0 pid=set",
                    "lock /y.remote F_GETLK WRLCK start=0 len=0 pid=set"] + dead, calls
