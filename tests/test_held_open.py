"""Held handles (vfs/pagecache.c, OPEN_HOLD): a class that keeps its own open and release but
says they only pin the file (`open_only_pins = True`, the memory example) lets a process that
read a file keep that read-only open's handle past its close, while it keeps the file's page
cache; a re-open for reading of the unchanged file takes the handle with no request, and the
class's release runs when the hold ends (unlink or rename of the name by the process, a change
through the mount or behind it, eviction, exit).

What must not change: a file unlinked while open stays readable through every fd and its name
is gone; a change by another process through the mount is read by the next open; every open
the class saw is released before destroy; a write open's handle is never held; a class that
does not say so (fusepy's contract) sees every open."""

import sys

import pytest

from conftest import EXAMPLES, LDP_MODE, LDP_TIMEOUT, MEMORY, base_env, ldpfuse_run_argv, run
from test_stats import rows

# The memory example, counting the opens and releases it answers; its handles in use are
# the root's xattr user.handles. destroy() writes "opens releases handles-left" to OUT.
COUNTED = f'''
import importlib.util, os
spec = importlib.util.spec_from_file_location("memory_example", {str(EXAMPLES / "memory.py")!r})
memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory)

class Counted(memory.Memory):
    def __init__(self, out, pins="1"):
        super().__init__()
        self.out = out
        self.open_only_pins = pins == "1"
        self.opens = self.releases = 0

    def open(self, path, flags):
        fh = super().open(path, flags)
        self.opens += 1
        return fh

    def create(self, path, mode, fi=None):
        fh = super().create(path, mode, fi)
        self.opens += 1
        return fh

    def release(self, path, fh):
        self.releases += 1
        return super().release(path, fh)

    def getxattr(self, path, name, position=0):
        if path == "/" and name == "user.handles":
            return str(len(self._handles)).encode()
        return super().getxattr(path, name, position)

    def destroy(self, path):
        with open(self.out, "a") as f:
            f.write(f"{{self.opens}} {{self.releases}} {{len(self._handles)}}\\n")
'''

# Run natively ($D a plain directory) and through the memory example: the same lines.
DIFF_SCRIPT = r'''
import errno, os, subprocess, sys
D = os.environ["D"]

def rd(p):
    with open(p, "rb") as f:
        return f.read()

def attempt(what, fn, *args):
    try:
        r = fn(*args)
        print(what, "ok", r if isinstance(r, bytes) else "")
    except OSError as e:
        print(what, errno.errorcode[e.errno])

def other(code, *args):
    "Another process's change (the embedded mode's tree is this process's own: here)"
    if os.environ["MODE"] == "shared":
        subprocess.run([sys.executable, "-c", code, *args], check=True)
    else:
        exec(code.replace("sys.argv", "ARGV"), {"ARGV": ["-c", *args]})

f, g, h = f"{D}/f", f"{D}/g", f"{D}/h"
with open(f, "w") as w:
    w.write("one\n")
print("1", rd(f), rd(f), rd(f))       # open, read, close: then re-opens of the unchanged file
fd = os.open(f, os.O_RDONLY)          # takes the handle the last close held
fd2 = os.open(f, os.O_RDONLY)
os.unlink(f)
attempt("re-open of the unlinked name", rd, f)
print("fd reads", os.pread(fd, 100, 0), os.fstat(fd).st_nlink, os.fstat(fd).st_size)
os.close(fd)
print("fd2 reads", os.pread(fd2, 100, 0), os.fstat(fd2).st_nlink)
os.close(fd2)
attempt("after the last close", rd, f)

# the name made again: another file
with open(f, "w") as w:
    w.write("two\n")
print("2", rd(f), rd(f))
# another process writes it through the mount: the next open reads its change
other("import sys; open(sys.argv[1], 'w').write('three, longer\\n')", f)
print("3", rd(f))
other("import sys; open(sys.argv[1], 'r+').write('THREE')", f)
print("4", rd(f))
# another process unlinks it, or makes another file under the name
rd(f)
other("import os, sys; os.unlink(sys.argv[1])", f)
attempt("unlinked by another process", rd, f)
with open(f, "w") as w:
    w.write("five\n")
rd(f)
other("import os, sys; open(sys.argv[2], 'w').write('six\\n'); os.rename(sys.argv[2], sys.argv[1])", f, h)
print("6", rd(f))

# renamed: read under its new name, nothing under the old
os.rename(f, g)
attempt("old name", rd, f)
print("7", rd(g), rd(g))
# another file renamed over the held one
with open(h, "w") as w:
    w.write("h\n")
print("8", rd(h), rd(g))
os.rename(h, g)
print("9", rd(g))
# a write open between re-opens, and a truncation by name
with open(g, "r+b") as w:
    w.write(b"H!")
print("10", rd(g))
os.truncate(g, 1)
print("11", rd(g))
# hard links: read through one name, that name unlinked, the other reads the file
with open(f, "w") as w:
    w.write("linked\n")
os.link(f, h)
print("12", rd(f), rd(h))
os.unlink(f)
attempt("unlinked link", rd, f)
print("13", rd(h), os.stat(h).st_nlink)
# other flags: a re-open with O_NOFOLLOW or O_NONBLOCK reads the same
fd = os.open(h, os.O_RDONLY | os.O_NOFOLLOW)
print("14", os.read(fd, 100))
os.close(fd)
fd = os.open(h, os.O_RDONLY | os.O_NONBLOCK)
print("15", os.read(fd, 100))
os.close(fd)
# a forked child re-opens and closes what its parent holds; the parent reads on
rd(h)
pid = os.fork()
if pid == 0:
    ok = rd(h) == b"linked\n" and rd(h) == b"linked\n"
    os._exit(0 if ok else 1)
print("16 child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), rd(h))
'''


def run_counted(tmp_path, cmd, mode=None, pins="1", flags=(), env=None):
    (tmp_path / "counted.py").write_text(COUNTED)
    out = tmp_path / "destroy.txt"
    argv = ldpfuse_run_argv() + ["--mode", mode or LDP_MODE, *flags, "--mountpoint", str(tmp_path / "mnt"),
                                 f"{tmp_path / 'counted.py'}:Counted", str(out), pins, "--", *cmd]
    r = run(argv, env=env or base_env(), timeout=LDP_TIMEOUT)
    return r, out


def balanced(out):
    """Every destroy line: as many releases as opens, no handle left."""
    lines = out.read_text().splitlines()
    assert lines, "destroy() never ran"
    for line in lines:
        opens, releases, left = map(int, line.split())
        assert (opens, left) == (releases, 0), lines
    return lines


def test_memory_example_matches_native(ws):
    """The memory example (open_only_pins) and a native directory, step by step."""
    native, ldp = ws.compare_py(DIFF_SCRIPT, fs=MEMORY, env_extra={"MODE": LDP_MODE})
    assert "fd reads b'one\\n' 0 4" in native.stdout


@pytest.mark.parametrize("pins", ["1", "0"])
def test_counted_class_matches_native_and_balances_at_destroy(ws, pins):
    """The same steps through a class that counts what it answers, with and without
    open_only_pins: the same lines as natively, and at destroy every open released."""
    (ws.tmp / "counted.py").write_text(COUNTED)
    out = ws.tmp / "destroy.txt"
    script = ws.write_script("script.py", DIFF_SCRIPT)
    native = ws.native_run([sys.executable, script], env_extra={"MODE": LDP_MODE})
    assert native.returncode == 0, native.describe()
    ldp = ws.ldp_run([sys.executable, script], fs=f"{ws.tmp / 'counted.py'}:Counted", fs_args=[out, pins],
                     env_extra={"MODE": LDP_MODE})
    report = "\n=== native ===\n" + native.describe() + "\n=== ldpfuse ===\n" + ldp.describe()
    assert (ldp.returncode, ldp.stdout, ldp.stderr) == (native.returncode, native.stdout, native.stderr), report
    balanced(out)


HANDLES_SCRIPT = r'''
import os, sys
D = os.environ["D"]
handles = lambda: int(os.getxattr(D, "user.handles"))

def rd(p):
    with open(p, "rb") as f:
        return f.read()

for name in "abcde":
    with open(f"{D}/{name}", "w") as w:
        w.write(name * 100)
print("written", handles())
for name in "abc":
    rd(f"{D}/{name}")
    rd(f"{D}/{name}")
print("read", handles())
os.unlink(f"{D}/a")
print("unlinked", handles())
os.rename(f"{D}/b", f"{D}/b2")
print("renamed", handles())
fd = os.open(f"{D}/d", os.O_RDWR)
os.close(fd)
print("write open", handles())
fd = os.open(f"{D}/c", os.O_RDONLY)
print("re-opened", handles(), os.read(fd, 3))
os.close(fd)
print("closed", handles())
sys.stdout.flush()
# exec: what the old image held is released before the new one runs
os.execv(sys.executable, [sys.executable, "-c",
         "import os; print('exec', int(os.getxattr(os.environ['D'], 'user.handles')))"])
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_holds_end_with_the_name_and_never_hold_a_write_open(tmp_path, mode):
    """The class's handles in use, seen by the process as it goes: a read-only open's handle
    is held past its close (the default mode: one a file), its release runs when this process
    unlinks or renames the name and before it execs, a write open's is released at its
    close; at destroy, every open released. The embedded mode holds nothing."""
    (tmp_path / "s.py").write_text(HANDLES_SCRIPT)
    env = base_env(D=str(tmp_path / "mnt"))
    r, out = run_counted(tmp_path, [sys.executable, str(tmp_path / "s.py")], mode=mode, env=env)
    assert r.returncode == 0, r.stderr
    held = mode == "shared"
    want = ["written 0", f"read {3 if held else 0}", f"unlinked {2 if held else 0}",
            f"renamed {1 if held else 0}", f"write open {1 if held else 0}",
            "re-opened 1 b'ccc'", f"closed {1 if held else 0}", "exec 0"]
    assert r.stdout.splitlines() == want, r.stderr
    balanced(out)


EVICT_SCRIPT = r'''
import os, subprocess, sys
D = os.environ["D"]

def rd(p):
    with open(p, "rb") as f:
        return f.read()

for i in range(1, 10):
    with open(f"{D}/f{i}", "w") as w:
        w.write(f"{i}\n")
for r in range(2):
    for i in range(1, 10):
        rd(f"{D}/f{i}")
# another process (the default mode; the embedded mode's tree is this process's own)
code = "import os, sys; D = sys.argv[1]; os.unlink(D + '/f9'); os.rename(D + '/f8', D + '/g8')"
if os.environ["MODE"] == "shared":
    subprocess.run([sys.executable, "-c", code, D], check=True)
else:
    exec(code.replace("sys.argv[1]", "D"))
print(rd(f"{D}/f7"), rd(f"{D}/g8"), rd(f"{D}/f7"))
print(os.path.exists(f"{D}/f9"), os.path.exists(f"{D}/f8"))
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_many_files_held_and_evicted_balance_at_destroy(tmp_path, mode):
    """More files than a process keeps (LDPFUSE_CLIENT_KEEP=4), read twice each, some unlinked
    and renamed by another process, then exit with holds: every open released at destroy."""
    (tmp_path / "s.py").write_text(EVICT_SCRIPT)
    r, out = run_counted(tmp_path, [sys.executable, str(tmp_path / "s.py")], mode=mode,
                         env=base_env(LDPFUSE_CLIENT_KEEP="4", D=tmp_path / "mnt", MODE=mode))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "b'7\\n' b'8\\n' b'7\\n'\nFalse False\n", r.stderr
    balanced(out)


@pytest.mark.parametrize("pins, most", [("1", 3), ("0", 11)])
def test_reopens_ask_the_server_only_without_open_only_pins(tmp_path, pins, most):
    """The default mode: ten opens of an unchanged file by one shell, after the one that
    wrote it, reach the class's open once (at most twice: the process's first request has
    no table of changes yet) when it says open_only_pins, ten times when it does not
    (fusepy's contract: every open is asked). At da585d1 it was asked ten times."""
    m = tmp_path / "mnt"
    log = tmp_path / "log"
    r, out = run_counted(tmp_path, ["sh", "-c", f"echo x > {m}/f; for i in 1 2 3 4 5 6 7 8 9 10; "
                                                f"do read a < {m}/f; echo $a; done"],
                         mode="shared", pins=pins, flags=["--stats", "--log-file", str(log)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "x\n" * 10, r.stderr
    table = rows(log.read_text())
    opens = sum(table[k][0] for k in ("open", "create/open") if k in table)
    assert opens <= most if pins == "1" else opens == most, table
    balanced(out)


def test_memory_example_reopens_ask_nothing(tmp_path):
    """The memory example itself, as shipped: its re-opens ask the server nothing."""
    m = tmp_path / "mnt"
    log = tmp_path / "log"
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--stats", "--log-file", str(log),
                                 "--mountpoint", str(m), MEMORY, "--", "sh", "-c",
                                 f"echo x > {m}/f; for i in 1 2 3 4 5 6 7 8 9 10; do read a < {m}/f; done"]
    r = run(argv, env=base_env(), timeout=LDP_TIMEOUT)
    assert r.returncode == 0, r.stderr
    table = rows(log.read_text())
    assert sum(table[k][0] for k in ("open", "create/open") if k in table) <= 2, table
    assert table.get("release", (0,))[0] <= 3, table


CLOSERANGE_SCRIPT = r'''
import os, sys, threading
D = os.environ["D"]

def rd(p):
    with open(p, "rb") as f:
        return f.read()

for name in "ab":
    with open(f"{D}/{name}", "w") as w:
        w.write(name * 3)
    rd(f"{D}/{name}")               # its handle held past the close (the default mode)
with open(f"{D}/c", "w") as w:
    w.write("ccc")                  # not held: a write open
go, out = threading.Event(), []

def worker():
    try:
        out.append(rd(f"{D}/a"))    # this thread's channel made, a held handle taken and held again
        go.wait()
        out.append(rd(f"{D}/a"))
    except OSError as e:
        out.append(e.strerror)

t = threading.Thread(target=worker)
t.start()
while not out:
    pass
try:
    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    os.closerange(3, 1 << 20)       # every fd: the held caches, the channels
    r, _ = os.pipe()
    os.dup2(r, fds[-2])             # another file on a channel's number (the default mode)
    print(rd(f"{D}/a"), rd(f"{D}/b"), rd(f"{D}/c"))
except OSError as e:
    print("main", e.strerror)
finally:
    go.set()
t.join()
print(*out)
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_closing_every_fd_with_held_handles_hangs_nothing(tmp_path, mode):
    """A program closes every fd (close_range) while it holds handles past their close and a
    thread has its own channel, puts a pipe on one of the channels' numbers, then reads on,
    in both threads: every read answered, every open released once. Before, the held
    handles' release went out on a fresh channel that the close then took: the next read
    was EIO (and the program, waiting for its thread, hung)."""
    (tmp_path / "s.py").write_text(CLOSERANGE_SCRIPT)
    env = base_env(D=str(tmp_path / "mnt"), LDPFUSE_OP_TIMEOUT="20")
    r, out = run_counted(tmp_path, [sys.executable, str(tmp_path / "s.py")], mode=mode, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "b'aaa' b'bbb' b'ccc'\nb'aaa' b'aaa'\n", r.stderr
    assert r.stderr == "", r.stderr
    balanced(out)
