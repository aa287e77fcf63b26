"""A listing's attributes are kept as getattr's answers (issue 34, vfs/dir.c
keep_entry_attrs): when a class's readdir gives `(name, attrs, offset)` with the
attributes in full (a file type, st_size and st_mtime), a stat of the entries after the
listing asks the file system nothing, as FUSE's readdirplus fills the kernel's cache.
What they give is what getattr gives, and a change made through the mount, by this
process or another one (during the listing too), is seen as without them."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import LDP_MODE, as_nobody, base_env, ldpfuse_run_argv

N = 100

PLUS = r'''
import errno, os, stat, threading, time
from ldpfuse_py import FuseOSError, Operations

N = 100


class Plus(Operations):
    "/d holds N files; readdir gives each one's attributes: in full, in part or none (-o attrs=)."
    thread_safe = True      # a change may be served while a listing sleeps

    def __init__(self, attrs="full", slow_listing="0", dir_mode="755"):
        self.attrs, self.slow, self.dir_mode = attrs, float(slow_listing), int(dir_mode, 8)
        self.lock = threading.Lock()
        self.files = {f"/d/f{i:03d}": [bytearray(b"x" * (i + 1)), 0o644, 1700000000 + i] for i in range(N)}

    def _stat(self, path):
        if path in ("/", "/d"):
            return {"st_mode": stat.S_IFDIR | (self.dir_mode if path == "/d" else 0o755), "st_nlink": 2, "st_size": 4096,
                    "st_mtime": 1600000000, "st_uid": 1234, "st_gid": 5678}
        with self.lock:
            f = self.files.get(path)
            if f is None:
                raise FuseOSError(errno.ENOENT)
            return {"st_mode": stat.S_IFREG | f[1], "st_nlink": 1, "st_size": len(f[0]),
                    "st_mtime": f[2], "st_atime": f[2], "st_ctime": f[2], "st_uid": 1234,
                    "st_gid": 5678, "st_ino": 1000 + int(path[-3:])}

    def getattr(self, path, fh=None):
        return self._stat(path)

    def readdir(self, path, fh):
        if path == "/":
            return [".", "..", "d"]
        names = sorted(p[3:] for p in self.files)
        if self.attrs == "none":
            return [".", ".."] + names
        if self.attrs == "part":
            return [".", ".."] + [(n, {"st_mode": stat.S_IFREG | 0o644, "st_ino": 1}, 0) for n in names]
        out = [".", ".."] + [(n, self._stat("/d/" + n), 0) for n in names]
        time.sleep(self.slow)       # a change made now must not hide behind these
        return out

    def open(self, path, flags):
        self._stat(path)
        return 0

    def read(self, path, size, offset, fh):
        with self.lock:
            return bytes(self.files[path][0][offset:offset + size])

    def write(self, path, data, offset, fh):
        with self.lock:
            f = self.files[path][0]
            f[offset:offset + len(data)] = data
            self.files[path][2] += 1000
            return len(data)

    def truncate(self, path, length, fh=None):
        with self.lock:
            f = self.files[path][0]
            del f[length:]
            f.extend(b"\0" * (length - len(f)))
            self.files[path][2] += 1000

    def chmod(self, path, mode):
        with self.lock:
            self.files[path][1] = mode & 0o7777
'''

# A program that lists /d, then (after a command given as argv[2], run as another process)
# stats every entry and prints what it saw as JSON.
LIST_THEN_STAT = r'''
import json, os, subprocess, sys
d = sys.argv[1]
names = sorted(os.listdir(d))
child = None
if len(sys.argv) > 2:
    # its end is read from a pipe, not waited for: a child waited for makes this process
    # forget every answer it kept (vfs/attrcache.c), which would hide what is tested
    child = subprocess.Popen(sys.argv[2], shell=True, stdout=subprocess.PIPE)
    child.stdout.read()
out = {}
for n in names:
    st = os.stat(os.path.join(d, n))
    out[n] = [st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid, st.st_gid, st.st_ino, st.st_nlink]
if child and child.wait() != 0:
    sys.exit("the change failed")
print(json.dumps(out))
'''


def run(tmp_path, attrs="full", between=None, slow="0", mode=None):
    """(stats of /d/* as the program saw them, calls of getattr on /d/* in the trace)."""
    (tmp_path / "plus.py").write_text(PLUS)
    (tmp_path / "list_then_stat.py").write_text(LIST_THEN_STAT)
    log = tmp_path / f"trace-{attrs}-{slow}.log"
    m = tmp_path / "mnt"
    argv = ldpfuse_run_argv() + ["--trace", "--log-file", str(log), "--mountpoint", str(m),
                                 "-o", f"attrs={attrs}", "-o", f"slow_listing={slow}"]
    mode = mode or LDP_MODE
    if mode != "shared":
        argv += ["--mode", mode]
    argv += [f"{tmp_path / 'plus.py'}:Plus", "--", sys.executable, str(tmp_path / "list_then_stat.py"),
             str(m / "d")] + ([between] if between else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr + log.read_text()
    asked = [line for line in log.read_text().splitlines() if "] getattr('/d/f" in line]
    return json.loads(r.stdout), asked


def test_a_stat_after_a_listing_with_attributes_asks_nothing(tmp_path):
    seen, asked = run(tmp_path, "full")
    assert len(seen) == N
    assert asked == [], asked[:5]       # before: one getattr per file (100)


def test_what_the_listing_gave_is_what_getattr_gives(tmp_path):
    full, _ = run(tmp_path, "full")
    asked_each, asked = run(tmp_path, "none")
    assert len(asked) == N              # no attributes in the listing: each stat asks
    assert full == asked_each
    assert full["f007"][:5] == [0o100644, 8, 1700000007 * 10**9, 1234, 5678]


def test_attributes_given_in_part_are_not_taken_for_getattrs(tmp_path):
    seen, asked = run(tmp_path, "part")
    assert len(asked) == N, asked[:5]   # {st_mode, st_ino} says d_type and d_ino only
    assert seen["f009"][1] == 10


def change(m):
    py = sys.executable
    return (f"{py} -c 'import os; f = open(\"{m}/d/f000\", \"r+b\"); f.write(b\"abcdef\"); f.close(); "
            f"os.truncate(\"{m}/d/f001\", 50); os.chmod(\"{m}/d/f002\", 0o600)'")


def test_a_change_by_another_process_after_the_listing_is_seen(tmp_path):
    if LDP_MODE != "shared":
        pytest.skip("the embedded mode's caches hear of another process's change only after "
                    "attr_timeout (docs/processes-and-modes.md), with or without the listing's")
    seen, asked = run(tmp_path, "full", between=change(tmp_path / "mnt"))
    assert seen["f000"][1] == 6 and seen["f000"][2] == (1700000000 + 1000) * 10**9, seen["f000"]
    assert seen["f001"][1] == 50, seen["f001"]
    assert seen["f002"][0] == 0o100600, seen["f002"]
    # only the changed names were asked again (the changer's own lookups of them too): the
    # rest were kept from the listing
    assert asked and all("'/d/f00" in a and a.split("'/d/f00")[1][0] in "012" for a in asked), asked


def test_a_change_during_the_listing_is_not_hidden(tmp_path):
    """The listing's attributes are a snapshot taken before the class's readdir returns:
    a change another process makes meanwhile must not be covered by them (with the check
    of the server's count of changes taken out of vfs/dir.c, f001 shows its old size)."""
    if LDP_MODE != "shared":
        pytest.skip("in the embedded mode another process's change is seen after attr_timeout")
    m = tmp_path / "mnt"
    py = sys.executable
    # the lister runs in the background and lists while a second process changes f001
    script = tmp_path / "during.sh"
    script.write_text(f"{py} {tmp_path / 'list_then_stat.py'} {m}/d > {tmp_path / 'out.json'} &\n"
                      f"sleep 0.4\n{py} -c 'import os; os.truncate(\"{m}/d/f001\", 77)'\nwait\n")
    (tmp_path / "plus.py").write_text(PLUS)
    (tmp_path / "list_then_stat.py").write_text(LIST_THEN_STAT)
    argv = ldpfuse_run_argv() + ["--mountpoint", str(m), "-o", "slow_listing=1.5",
                                 f"{tmp_path / 'plus.py'}:Plus", "--", "sh", str(script)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["f001"][1] == 77, seen["f001"]


def test_a_change_by_the_lister_itself_is_seen(tmp_path):
    # the same process: its own change forgets the listing's answer in both modes
    m = tmp_path / "mnt"
    (tmp_path / "plus.py").write_text(PLUS)
    prog = tmp_path / "self_change.py"
    prog.write_text(r'''
import os, sys
d = sys.argv[1]
os.listdir(d)
os.truncate(os.path.join(d, "f003"), 99)
with open(os.path.join(d, "f004"), "r+b") as f:
    f.write(b"0123456789")
os.chmod(os.path.join(d, "f005"), 0o640)
print(os.stat(os.path.join(d, "f003")).st_size, os.stat(os.path.join(d, "f004")).st_size,
      oct(os.stat(os.path.join(d, "f005")).st_mode))
''')
    argv = ldpfuse_run_argv() + ["--mountpoint", str(m)]
    if LDP_MODE != "shared":
        argv += ["--mode", LDP_MODE]
    argv += [f"{tmp_path / 'plus.py'}:Plus", "--", sys.executable, str(prog), str(m / "d")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["99", "10", "0o100640"], r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="running the lister as another user (setpriv) needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_a_listing_lends_no_attributes_to_one_who_may_not_search_the_directory(shared_tmp):
    """With default_permissions (implied by allow_other) a stat needs search permission on
    the directory; reading it is enough to list it. /d is r-- for others: uid 65534 lists
    it, and its stat of an entry still fails as natively, listing or not."""
    if LDP_MODE != "shared":
        pytest.skip("default_permissions are the shared server's rules (native/server/permissions.c)")
    (shared_tmp / "plus.py").write_text(PLUS)
    prog = shared_tmp / "list_and_stat.py"
    prog.write_text(r"""
import os, sys
d = sys.argv[1]
print(len(os.listdir(d)))
try:
    os.stat(os.path.join(d, "f001"))
    print("stat ok")
except OSError as e:
    print("stat", e.strerror)
""")
    os.chmod(shared_tmp / "plus.py", 0o644)
    os.chmod(prog, 0o644)
    native = shared_tmp / "native"
    (native / "d").mkdir(parents=True)
    (native / "d" / "f001").write_bytes(b"xy")
    os.chmod(native / "d", 0o754)
    python = shutil.which("python3", path="/usr/bin:/bin")
    want = subprocess.run(as_nobody(python, str(prog), str(native / "d")), capture_output=True,
                          text=True, timeout=60, cwd="/")
    m = shared_tmp / "mnt"
    argv = ldpfuse_run_argv() + ["-o", "allow_other", "--mountpoint", str(m), "-o", "dir_mode=754",
                                 f"{shared_tmp / 'plus.py'}:Plus", "--",
                                 *as_nobody(python, str(prog), str(m / "d"))]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=base_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert want.stdout == "1\nstat Permission denied\n", want.stdout + want.stderr
    assert r.stdout == f"{N}\nstat Permission denied\n", r.stdout + r.stderr
