"""The shared mode's transport (backend/channel.c): every client thread has a channel of its
own (shared memory, a futex, and a socket beside it), so threads of one process do not wait
for each other's requests; requests and answers bigger than a channel's region ride on the
socket whole."""

import hashlib
import os
import subprocess
import sys

from conftest import MEMORY, base_env, ldpfuse_run_argv

RENDEZVOUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "rendezvous.py")


def ldp(tmp_path, fs, cmd, timeout=120):
    argv = ldpfuse_run_argv() + ["--mode", "shared", "--mountpoint", str(tmp_path / "mnt"), fs, "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), start_new_session=True)


def test_threads_of_one_process_do_not_wait_for_each_others_requests(tmp_path):
    """One thread's read blocks in the file system until another thread of the same
    process reads a second file: with one connection per process behind one lock, the
    second read would queue behind the first and the first would time out."""
    m = tmp_path / "mnt"
    prog = f"""
import threading, time
out = []
t = threading.Thread(target=lambda: out.append(open("{m}/wait").read()))
t.start()
time.sleep(0.3)
open("{m}/release").read()
t.join()
print(out[0], end="")
"""
    r = ldp(tmp_path, f"{RENDEZVOUS}:Rendezvous", [sys.executable, "-c", prog])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "released\n"


def test_a_write_and_a_read_bigger_than_the_channel_arrive_whole(tmp_path):
    """3 MiB in one write() through a file the class serves itself, read back in one
    read() by the same process and by another (the region holds 1 MiB)."""
    m = tmp_path / "mnt"
    data = hashlib.sha256(b"seed").digest() * (3 * 1024 * 1024 // 32)
    src = tmp_path / "src"
    src.write_bytes(data)
    prog = f"""
import os, sys
data = open("{src}", "rb").read()
fd = os.open("{m}/big", os.O_WRONLY | os.O_CREAT, 0o644)
assert os.write(fd, data) == len(data)
os.close(fd)
fd = os.open("{m}/big", os.O_RDONLY)
back = os.read(fd, len(data) + 1)
os.close(fd)
print(back == data)
"""
    r = ldp(tmp_path, MEMORY, ["sh", "-c", f"{sys.executable} -c '{prog}' && sha256sum < {m}/big"])
    assert r.returncode == 0, r.stderr
    same, digest = r.stdout.split()[:2]
    assert same == "True"
    assert digest == hashlib.sha256(data).hexdigest()


def test_a_listing_bigger_than_the_channel_arrives_whole(tmp_path):
    """A directory whose readdir answer is over 1 MiB of names lists every entry."""
    m = tmp_path / "mnt"
    names = [f"{i:06d}-" + "n" * 100 for i in range(12000)]
    prog = f"""
import os
for i in range(12000):
    open("{m}/d/%06d-" % i + "n" * 100, "w").close()
print("\\n".join(sorted(os.listdir("{m}/d"))))
"""
    r = ldp(tmp_path, MEMORY, ["sh", "-c", f"mkdir {m}/d && {sys.executable} -c '{prog}' && ls {m}/d | wc -l"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[:12000] == names
    assert lines[12000].strip() == "12000"


def test_threads_reconnect_after_the_program_closes_every_fd(tmp_path):
    """close_range over the channels' sockets (what a child's close_fds does), then dup2
    onto one of their numbers: every thread's next request still gets its answer."""
    m = tmp_path / "mnt"
    prog = f"""
import os, threading
open("{m}/a", "w").write("hi")
go, done, out = threading.Event(), threading.Event(), []
def worker():
    out.append(open("{m}/a").read())
    go.wait()
    out.append(open("{m}/a").read())
    done.set()
t = threading.Thread(target=worker)
t.start()
while not out:
    pass
high = sorted(int(f) for f in os.listdir("/proc/self/fd"))[-2]
os.closerange(3, 1 << 20)
r, w = os.pipe()
os.dup2(r, high)
out.append(open("{m}/a").read())
go.set()
done.wait()
print(" ".join(out))
"""
    r = ldp(tmp_path, MEMORY, [sys.executable, "-c", prog])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["hi", "hi", "hi"]


def test_a_client_killed_in_the_middle_of_a_request_leaves_nothing_held(tmp_path):
    """kill -9 while the server is still answering the process's read: the server finishes,
    sees the client gone, releases its handle, and goes on answering others."""
    m = tmp_path / "mnt"
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "server_probes.py")
    r = ldp(tmp_path, f"{fixtures}:Slow", ["sh", "-c", f"""
        sh -c 'exec 3< {m}/slow; cat <&3' > /dev/null &
        sleep 0.7
        kill -9 $!
        cat {m}/fast
        sleep 2.5
        cat {m}/handles-after
    """])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["fast", "1"]
