"""A program's own byte-range locks on a cached file (docs/cache.md: the cache's own
ordering never takes a lock a program can collide with). Whole-file POSIX locks
(`lockf(fd, F_LOCK, 0)`: Python's fcntl.lockf, Java's FileChannel.lock(), many
databases) cover every byte of the file, so a write must neither wait on the
process's own lock nor on another process's: advisory locks never block I/O.

Each program runs natively and under ldpfuse with a short limit: a hang fails."""

import pytest

from conftest import LOOPBACK, MEMORY

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
