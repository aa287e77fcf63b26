"""inotify on mount paths (native/vfs/notify.c, docs/limitations.md). The kernel does
not see the mount, so the events of a watch on a mount path are made by the preload
from what the file system answers, and delivered through the program's inotify fd
(a pipe fed by a thread, once the fd has a watch on a mount path), with the
watches on real paths still the kernel's: `tail -f` follows a file another process
appends to, and a Python program's ctypes inotify sees its events, as natively.

Before, inotify_add_watch on a mount path answered EOPNOTSUPP and tail polled once a
second (or, where the mount point exists on disk, watched the hidden file)."""

import sys

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, need

# tail -f of a file in $D while another process of the command appends lines to it: each
# line's delay from its append to its arrival in tail's output, in ms.
FOLLOW = r'''
echo one >> "$D/log"
tail -f "$D/log" > "$O/seen" 2> "$O/tail.err" &
pid=$!
for i in $(seq 200); do grep -q one "$O/seen" && break; sleep 0.05; done
for n in 1 2 3 4 5 6 7 8; do
  t0=$(date +%s%N)
  sh -c "echo line$n >> '$D/log'"
  until grep -q "line$n" "$O/seen"; do sleep 0.002; done
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 ))" >> "$O/delays"
done
kill $pid
cat "$O/seen" "$O/tail.err"
'''

FOLLOW_FS = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
FOLLOW_IDS = ["loopback", "loopback-cached", "memory"]


@pytest.mark.parametrize("fs,options", FOLLOW_FS, ids=FOLLOW_IDS)
@pytest.mark.parametrize("mount_point_on_disk", [False, True], ids=["absent", "on-disk"])
def test_tail_f_shows_lines_appended_by_another_process_at_once(ws, fs, options, mount_point_on_disk):
    need("tail")
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the embedded mode gives each process its own memory tree: the appending "
                    "process's file is not tail's")
    if mount_point_on_disk:
        ws.mnt.mkdir()
        (ws.mnt / "log").write_text("what the mount hides\n")
    script = ws.write_script("follow.sh", FOLLOW)
    native = ws.native_run(["sh", script], timeout=60)
    r = ws.ldp_run(["sh", script], fs=fs, options=options,
                   timeout=60)
    expected = "one\n" + "".join(f"line{n}\n" for n in range(1, 9))
    assert native.stdout == expected, native.describe()
    assert r.returncode == 0 and r.stdout == expected, r.describe()
    delays = sorted(int(x) for x in (ws.ldp_out / "delays").read_text().split())
    # the bound is 100 ms (the median here is ~10 ms in the shared mode, ~35 ms in
    # the embedded one); the assertion is generous against a loaded machine: polling tail
    # would take a second for every line
    assert delays[len(delays) // 2] < 500, delays
    if mount_point_on_disk:
        assert (ws.mnt / "log").read_text() == "what the mount hides\n"


# One inotify fd watching a directory of the mount ($D/w), a file in it, and a real
# directory ($O/real); another process changes them, one step at a time; the events of
# each step are printed sorted (the two watches' order is not the kernel's business).
EVENTS = r'''
import ctypes, os, select, struct, subprocess, sys, time
D, O = os.environ["D"], os.environ["O"]
os.makedirs(f"{D}/w", exist_ok=True)
os.makedirs(f"{O}/real", exist_ok=True)
with open(f"{D}/w/log", "w") as f:
    f.write("start\n")
libc = ctypes.CDLL(None, use_errno=True)
NAMES = {0x2: "MODIFY", 0x4: "ATTRIB", 0x40: "MOVED_FROM", 0x80: "MOVED_TO", 0x100: "CREATE",
         0x200: "DELETE", 0x400: "DELETE_SELF", 0x8000: "IGNORED", 0x40000000: "ISDIR"}
fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
DIR_MASK = 0x2 | 0x40 | 0x80 | 0x100 | 0x200
labels = {}
for label, path, mask in (("w", f"{D}/w", DIR_MASK), ("log", f"{D}/w/log", 0x2 | 0x400),
                          ("real", f"{O}/real", 0x100 | 0x200)):
    wd = libc.inotify_add_watch(fd, path.encode(), mask)
    assert wd >= 0, (path, os.strerror(ctypes.get_errno()))
    labels[wd] = label
print("fd is still an fd of this process:", os.get_inheritable(fd) is False)

def events(want):
    """Read until `want` events came (or 5 s passed), then 150 ms more for stray ones."""
    got, deadline, extra = [], time.monotonic() + 5, None
    while True:
        now = time.monotonic()
        limit = (extra if extra else deadline) - now
        if limit <= 0:
            break
        if select.select([fd], [], [], limit)[0]:
            buf = os.read(fd, 4096)
            while buf:
                wd, mask, cookie, n = struct.unpack_from("iIII", buf)
                name = buf[16:16 + n].rstrip(b"\0").decode()
                buf = buf[16 + n:]
                got.append((labels.get(wd, wd), mask, cookie, name))
        if len(got) >= want and extra is None:
            extra = time.monotonic() + 0.15
    return got

def show(step, evs):
    cookies = {c for _, m, c, _ in evs if m & 0xc0}
    for label, mask, cookie, name in sorted(evs):
        what = "|".join(v for k, v in NAMES.items() if mask & k)
        paired = " (one cookie)" if mask & 0xc0 and len(cookies) == 1 and cookie else ""
        print(f"{step}: {label} {what} {name}{paired}")

def by_another(script):
    subprocess.run(["sh", "-c", script], check=True)

by_another(f"echo x > '{D}/w/new'")
show("create", events(1))
by_another(f"echo more >> '{D}/w/log'")
show("append", events(2))
by_another(f"mkdir '{D}/w/sub'")
show("mkdir", events(1))
by_another(f"mv '{D}/w/new' '{D}/w/renamed'")
show("rename", events(2))
by_another(f"rm '{D}/w/renamed'; rmdir '{D}/w/sub'")
show("remove", events(2))
by_another(f"touch '{O}/real/x'")
show("real", events(1))
log_wd = [wd for wd, label in labels.items() if label == "log"][0]
print("rm_watch", libc.inotify_rm_watch(fd, log_wd))
show("rm_watch", events(1))
by_another(f"rm '{D}/w/log'")
show("unwatched", events(1))
ctypes.set_errno(0)
print("rm_watch again", libc.inotify_rm_watch(fd, log_wd), os.strerror(ctypes.get_errno()))
os.close(fd)
'''


@pytest.mark.parametrize("fs,options", FOLLOW_FS[:2], ids=FOLLOW_IDS[:2])
def test_python_ctypes_inotify_sees_the_mounts_events_beside_a_real_directorys(ws, fs, options):
    ws.compare_py(EVENTS, fs=fs, options=options,
                  check_tree=False)


def test_python_ctypes_inotify_on_a_memory_mount(ws):
    if LDP_MODE == "embedded":
        pytest.skip("the embedded mode gives each process its own memory tree: the changing "
                    "process's tree is not the watcher's")
    native = ws.native_run([sys.executable, ws.write_script("events.py", EVENTS)])
    r = ws.ldp_run([sys.executable, ws.tmp / "events.py"], fs=MEMORY)
    # memory.py gives inode numbers: a rename is told as one (MOVED_FROM, MOVED_TO)
    assert r.returncode == 0, r.describe()
    assert r.stdout == native.stdout, "\n=== native ===\n" + native.describe() + "\n=== ldp ===\n" + r.describe()


WATCH = r'''
import ctypes, errno, os, platform
D = os.environ["D"]
SYS_inotify_add_watch = {"x86_64": 254, "aarch64": 27}[platform.machine()]
IN_MODIFY, IN_ONLYDIR, IN_MASK_CREATE = 0x2, 0x01000000, 0x10000000
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
for name, mask in (("log", IN_MODIFY), ("", IN_MODIFY), ("missing", IN_MODIFY),
                   ("log/x", IN_MODIFY), ("log", IN_MODIFY | IN_ONLYDIR), ("log", 0),
                   ("log", IN_MODIFY | IN_MASK_CREATE)):
    ctypes.set_errno(0)
    r = libc.inotify_add_watch(fd, os.path.join(D, name).encode(), mask)
    print(repr(name), "a watch" if r >= 0 else errno.errorcode[ctypes.get_errno()])
ctypes.set_errno(0)
r = libc.syscall(SYS_inotify_add_watch, fd, os.path.join(D, "log").encode(), IN_MODIFY)
print("syscall() the same watch", r == libc.inotify_add_watch(fd, os.path.join(D, "log").encode(), IN_MODIFY))
ctypes.set_errno(0)
r = libc.inotify_add_watch(1, os.path.join(D, "log").encode(), IN_MODIFY)
print("not an inotify fd", errno.errorcode[ctypes.get_errno()])
'''


def test_inotify_add_watch_on_mount_paths_answers_as_the_kernel(ws):
    ws.populate(lambda d: (d / "log").write_text("one\n"))
    native = ws.native_run([sys.executable, "-c", WATCH])
    r = ws.ldp_run([sys.executable, "-c", WATCH])
    assert native.stdout == ("'log' a watch\n'' a watch\n'missing' ENOENT\n'log/x' ENOTDIR\n"
                             "'log' ENOTDIR\n'log' EINVAL\n'log' EEXIST\n"
                             "syscall() the same watch True\nnot an inotify fd EINVAL\n"), native.describe()
    assert r.stdout == native.stdout, r.describe()


# An event loop that put the inotify fd in its epoll set before adding a watch (sd-event's
# order): the set must wake for the mount's events too.
EPOLL_FIRST = r'''
import ctypes, os, select, struct, subprocess
D = os.environ["D"]
open(f"{D}/log", "w").close()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
ep = select.epoll()
ep.register(fd, select.EPOLLIN)
wd = libc.inotify_add_watch(fd, f"{D}/log".encode(), 0x2)
subprocess.run(["sh", "-c", f"echo x >> '{D}/log'"], check=True)
ready = ep.poll(5)
print("epoll woke for the fd:", [f for f, _ in ready] == [fd])
ev = struct.unpack_from("iIII", os.read(fd, 4096))
print("the event:", ev[0] == wd, hex(ev[1]))
'''


def test_an_epoll_set_made_before_the_first_mount_watch_wakes_for_its_events(ws):
    ws.compare_py(EPOLL_FIRST, check_tree=False)


# Differential: random (seeded) changes of a watched directory of the mount and of a
# watched native directory, made by the watching process itself (so the embedded mode's
# memory tree is the watcher's), the events of each step compared. One change of a file
# must be told as the kernel tells it, whichever look of the library sees it first: one
# write(2) once (a look in the middle of a write sees a new mtime with the old size, or a
# long write's sizes one by one: they were told as several IN_MODIFY), a change in a
# subdirectory not at all, a rename over a name as MOVED_FROM and MOVED_TO. The library's
# events come 5-50 ms after a change (docs/limitations.md): each step is read until
# 300 ms pass without an event. The big write lasts several looks (10 ms) but less than
# the 100 ms after which a file that keeps changing is told anyway (16 MB into the backed
# tree's kernel file; 2 MB through the methods, which take it in parts).
RANDOM_CHANGES = r'''
import ctypes, os, random, select, stat, struct, sys
D, SEED, STEPS, BIG = os.environ["D"], int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
W = f"{D}/w"
os.makedirs(W)
with open(f"{W}/keep", "w") as f:
    f.write("kept\n")
libc = ctypes.CDLL(None, use_errno=True)
NAMES = {0x2: "MODIFY", 0x4: "ATTRIB", 0x40: "MOVED_FROM", 0x80: "MOVED_TO", 0x100: "CREATE",
         0x200: "DELETE", 0x400: "DELETE_SELF", 0x8000: "IGNORED", 0x4000: "Q_OVERFLOW",
         0x40000000: "ISDIR"}
fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
labels = {}
for label, path, mask in (("w", W, 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400),
                          ("keep", f"{W}/keep", 0x2 | 0x4 | 0x400)):
    wd = libc.inotify_add_watch(fd, path.encode(), mask)
    assert wd >= 0, (path, os.strerror(ctypes.get_errno()))
    labels[wd] = label

def drain(quiet=0.3, limit=5.0):
    got, buf = [], b""
    while select.select([fd], [], [], quiet)[0]:
        buf += os.read(fd, 65536)
    while buf:
        wd, mask, cookie, n = struct.unpack_from("iIII", buf)
        name = buf[16:16 + n].rstrip(b"\0").decode()
        buf = buf[16 + n:]
        got.append((labels.get(wd, wd), mask, cookie, name))
    return got

def show(step, what, evs):
    cookies = {c for _, m, c, _ in evs if m & 0xc0}
    print(f"{step} {what}:", " ".join(
        f"{label}:{'|'.join(v for k, v in NAMES.items() if mask & k) or hex(mask)}:{name}"
        + ("(one cookie)" if mask & 0xc0 and len(cookies) == 1 and cookie else "")
        for label, mask, cookie, name in sorted(evs)) or "-")

rnd = random.Random(SEED)
files, dirs, sub_files, fresh, big = {"keep"}, set(), set(), 0, 0
for step in range(STEPS):
    movable = sorted(files - {"keep"})
    ops = ["write", "append", "truncate", "chmod", "create", "create", "mkdir"]
    ops += ["rename", "rename_over", "unlink"] if movable else []
    ops += ["rmdir", "sub_create"] if dirs else []
    ops += ["big_append"] if big < 2 else []
    op = rnd.choice(ops)
    name = rnd.choice(sorted(files))
    p = f"{W}/{name}"
    if op == "write":
        size = os.stat(p).st_size
        f = os.open(p, os.O_WRONLY)
        os.pwrite(f, b"w" * max(1, min(size, rnd.randint(1, 8))), 0)
        os.close(f)
    elif op == "append":
        f = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.write(f, b"a" * rnd.randint(1, 100))
        os.close(f)
    elif op == "big_append":
        big += 1
        f = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.write(f, b"b" * (BIG << 20))     # one write(2), seen by several looks: one IN_MODIFY
        os.close(f)
    elif op == "truncate":
        size = os.stat(p).st_size
        os.truncate(p, rnd.choice([s for s in (0, 3, 50, 200) if s != size]))
    elif op == "chmod":
        mode = stat.S_IMODE(os.stat(p).st_mode)
        os.chmod(p, rnd.choice([m for m in (0o600, 0o640, 0o644, 0o604) if m != mode]))
    elif op == "create":
        fresh += 1
        name = f"f{fresh}"
        f = os.open(f"{W}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        if rnd.random() < 0.6:
            os.write(f, b"c" * rnd.randint(1, 64))
        os.close(f)
        files.add(name)
    elif op == "mkdir":
        fresh += 1
        name = f"d{fresh}"
        os.mkdir(f"{W}/{name}")
        dirs.add(name)
    elif op == "rename":
        name = rnd.choice(movable)
        fresh += 1
        to = f"f{fresh}"
        os.rename(f"{W}/{name}", f"{W}/{to}")
        files.discard(name)
        files.add(to)
        name = f"{name}->{to}"
    elif op == "rename_over":
        name = rnd.choice(movable)
        to = rnd.choice(sorted(files - {name}))
        if to == "keep":
            to = name               # a rename onto itself: nothing to tell
        os.rename(f"{W}/{name}", f"{W}/{to}")
        if to != name:
            files.discard(name)
        name = f"{name}->{to}"
    elif op == "unlink":
        name = rnd.choice(movable)
        os.unlink(f"{W}/{name}")
        files.discard(name)
    elif op == "rmdir":
        name = rnd.choice(sorted(dirs))
        for s in sorted(x for x in sub_files if x.startswith(name + "/")):
            os.unlink(f"{W}/{s}")
            sub_files.discard(s)
        os.rmdir(f"{W}/{name}")
        dirs.discard(name)
    elif op == "sub_create":
        d = rnd.choice(sorted(dirs))
        fresh += 1
        name = f"{d}/s{fresh}"
        with open(f"{W}/{name}", "w") as f:
            f.write("in a subdirectory\n")
        sub_files.add(name)
    show(step, f"{op} {name}", drain())
os.close(fd)
'''

RANDOM_FS = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
RANDOM_BIG_MB = {"loopback": 16, "loopback-cached": 2, "memory": 2}


@pytest.mark.parametrize("fs,options,big", [(fs, o, RANDOM_BIG_MB[i]) for (fs, o), i in
                                            zip(RANDOM_FS, FOLLOW_IDS)], ids=FOLLOW_IDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_changes_give_the_events_of_a_native_directory(ws, fs, options, big, seed):
    script = ws.write_script("changes.py", RANDOM_CHANGES)
    ws.compare([sys.executable, script, str(seed), "30", str(big)], fs=fs, options=options,
               check_tree=False, timeout=180)


# Another process appends a line at a time to a watched file, and first drops the file's
# pages (fsync, POSIX_FADV_DONTNEED), so that its append reads the last page from disk: the
# kernel sets the file's mtime before that read and its size after, and a look in between
# saw a new mtime with the old size, told as one IN_MODIFY, and the size at the next look as
# another (CI's flaky "append: log MODIFY" twice under load; here about 5 appends in 100,
# 2026-11-28). The kernel tells one IN_MODIFY an append.
APPENDS = r'''
import ctypes, os, select, struct, subprocess, sys, time
D, N = os.environ["D"], 80
p = f"{D}/log"
open(p, "w").close()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
assert libc.inotify_add_watch(fd, p.encode(), 0x2) >= 0
w = subprocess.Popen([sys.executable, "-c", r"""
import os, sys
p, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    f = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.fsync(f)
    os.posix_fadvise(f, 0, 0, os.POSIX_FADV_DONTNEED)
    os.write(f, b"line %d\n" % i)
    os.close(f)
    sys.stdin.readline()
""", p, str(N)], stdin=subprocess.PIPE)
counts = {}
for i in range(N):
    # up to 1 s for the first event, then 150 ms for a second one
    got, end = 0, time.monotonic() + 1
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.01)[0]:
            buf = os.read(fd, 4096)
            while buf:
                got += 1
                buf = buf[16 + struct.unpack_from("iIII", buf)[3]:]
            end = min(end, time.monotonic() + 0.15)
    counts[got] = counts.get(got, 0) + 1
    w.stdin.write(b"\n")
    w.stdin.flush()
w.wait()
print("IN_MODIFY events per append:", dict(sorted(counts.items())))
'''


def test_an_append_that_reads_its_last_page_from_disk_is_one_in_modify(ws):
    ws.compare_py(APPENDS, check_tree=False)
