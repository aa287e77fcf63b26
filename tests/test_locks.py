"""A program's own byte-range locks on a cached file (docs/cache.md: the cache's own
ordering never takes a lock a program can collide with). Whole-file POSIX locks
(`lockf(fd, F_LOCK, 0)`: Python's fcntl.lockf, Java's FileChannel.lock(), many
databases) cover every byte of the file, so a write must neither wait on the
process's own lock nor on another process's: advisory locks never block I/O.

Each program runs natively and under ldpfuse with a short limit: a hang fails."""

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, need

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

for how in ("flock", "lockf"):
    p = holder(how)
    print(how, "while held:", free(how))
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
