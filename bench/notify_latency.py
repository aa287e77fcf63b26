#!/usr/bin/env python3
"""How long an inotify event on a mount path takes to arrive (native/vfs/notify.c).

A watcher (Python, ctypes inotify, IN_MODIFY on one file) and an appender (another
process of the same command, one line each 50 ms) run under ldpfuse-run; the appender
writes the time of each write(), the watcher the time each IN_MODIFY arrives. Prints the
median and the 90th percentile of arrival - write, per mode and file system, and the same
on a native directory for scale. The issue's bound is 100 ms.

    python bench/notify_latency.py [ROUNDS]
"""
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 40

WATCHER = r'''
import ctypes, os, select, struct, subprocess, sys, time
D, n = sys.argv[1], int(sys.argv[2])
path = os.path.join(D, "log")
open(path, "w").close()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
assert libc.inotify_add_watch(fd, path.encode(), 0x2) >= 0
w = subprocess.Popen([sys.executable, "-c", sys.argv[3], path, str(n)], stdout=subprocess.PIPE, text=True)
seen = []
while len(seen) < n and select.select([fd], [], [], 5)[0]:
    now = time.monotonic()
    buf = os.read(fd, 4096)
    while buf:
        ln = struct.unpack_from("iIII", buf)[3]
        buf = buf[16 + ln:]
        seen.append(now)
wrote = [float(x) for x in w.communicate()[0].split()]
# each write's first event at or after it
out, i = [], 0
for t in wrote:
    while i < len(seen) and seen[i] < t:
        i += 1
    if i < len(seen):
        out.append((seen[i] - t) * 1000)
print(" ".join(f"{x:.2f}" for x in out))
'''

APPENDER = r'''
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    time.sleep(0.05)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    t = time.monotonic()
    os.write(fd, b"line %d\n" % k)
    os.close(fd)
    print(t, flush=True)
'''


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:] or ["failed"]
    return [float(x) for x in r.stdout.split()], None


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        native = tmp / "native"
        native.mkdir()
        rows.append(("native", "-") + (run([sys.executable, "-c", WATCHER, str(native), str(ROUNDS), APPENDER]),))
        for mode in ("shared", "embedded"):
            for name, spec, extra in (("loopback", "examples/loopback.py:Loopback", []),
                                      ("loopback, cached", "examples/loopback.py:Loopback", ["-o", "passthrough=no"]),
                                      ("memory", "examples/memory.py:Memory", [])):
                if mode == "embedded" and name == "memory":
                    continue    # each process has its own tree
                lower = tmp / f"lower-{mode}-{len(rows)}"
                lower.mkdir()
                mnt = tmp / f"mnt-{len(rows)}"
                args = [str(lower)] if "loopback" in name else []
                cmd = (["ldpfuse-run", "--mode", mode, "--mountpoint", str(mnt)] + extra +
                       [str(HERE / spec)] + args +
                       ["--", sys.executable, "-c", WATCHER, str(mnt), str(ROUNDS), APPENDER])
                rows.append((mode, name, run(cmd)))
    print(f"{'mode':10} {'file system':18} {'events':>7} {'median ms':>10} {'p90 ms':>8}")
    for mode, name, (delays, err) in rows:
        if delays is None:
            print(f"{mode:10} {name:18} {'':>7} {err[0]}")
            continue
        d = sorted(delays)
        p90 = d[int(len(d) * 0.9) - 1] if d else float("nan")
        print(f"{mode:10} {name:18} {len(d):>7} {statistics.median(d):>10.2f} {p90:>8.2f}")


if __name__ == "__main__":
    main()
