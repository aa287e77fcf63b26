"""What a program waits for when the file system is stuck in a method (the shared mode, a
class that is not thread_safe, so one FS thread serves every call): N calls made one after
another behind it, each in the same process and each in a process of its own.

    python3 bench/stuck_calls.py [--rounds 3] [--calls 5] [--op-timeout 2] LABEL=PATH/TO/ldpfuse-run [...]

The class is tests/fs_fixtures/faulty.py's ReadStuckUntilReleased: `cat` of /stuck puts
the FS thread in read() until the run releases it. Once it is in, the command times the
N calls (a stat of a missing name each: getattr), then releases it and checks that a call
is answered again. Prints, per install (give an older install's ldpfuse-run to compare),
the median over interleaved rounds of the N calls' total wall time, in seconds; calls that
each wait their own op_timeout take N x op_timeout.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from installs import parse as installs_parse, print_medians  # noqa: E402
FS = os.path.join(os.path.dirname(HERE), "tests", "fs_fixtures", "faulty.py") + ":ReadStuckUntilReleased"

ONE_PROCESS = r'''
import os, subprocess, sys, time
mnt, dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
cat = subprocess.Popen(["cat", f"{mnt}/stuck"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists(f"{dir}/stuck"):
    time.sleep(0.01)
t = time.monotonic()
for i in range(n):
    try:
        os.stat(f"{mnt}/nope{i}")
    except OSError:
        pass
print(time.monotonic() - t)
open(f"{dir}/release", "w").close()
cat.wait()
os.stat(f"{mnt}/f")     # answered again, or this run fails
'''

PROCESSES = r'''
mnt=$1 dir=$2 n=$3
cat "$mnt/stuck" >/dev/null 2>&1 &
while [ ! -e "$dir/stuck" ]; do sleep 0.01; done
t=$(date +%s%N)
i=0
while [ $i -lt $n ]; do stat "$mnt/nope$i" >/dev/null 2>&1; i=$((i + 1)); done
us=$(( ($(date +%s%N) - t) / 1000 ))
echo "$((us / 1000000)).$(printf %06d $((us % 1000000)))"
touch "$dir/release"
wait
stat "$mnt/f" >/dev/null
'''


def one_run(ldpfuse_run, how, calls, op_timeout, work):
    state = tempfile.mkdtemp(dir=work)
    mnt = os.path.join(work, "mnt")
    cmd = ([sys.executable, "-c", ONE_PROCESS, mnt, state, str(calls)] if how == "one process"
           else ["sh", "-c", PROCESSES, "sh", mnt, state, str(calls)])
    r = subprocess.run([ldpfuse_run, "--mountpoint", mnt, "-o", f"op_timeout={op_timeout}", FS, state,
                        str(60 + calls * op_timeout), "--", *cmd],
                       capture_output=True, text=True, timeout=300, cwd="/")
    shutil.rmtree(state, ignore_errors=True)
    lines = r.stdout.split()
    return float(lines[-1]) if r.returncode == 0 and lines else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--op-timeout", type=float, default=2)
    p.add_argument("installs", nargs="+", metavar="LABEL=LDPFUSE_RUN")
    a = p.parse_args()
    installs = installs_parse(a.installs)
    rows = ["one process", "a process each"]
    times = {(row, label): [] for row in rows for label, _ in installs}
    work = tempfile.mkdtemp(prefix="ldpfuse-stuck-")
    try:
        for _ in range(a.rounds):
            for label, run in installs:
                for row in rows:
                    s = one_run(run, row, a.calls, a.op_timeout, work)
                    if s is not None:
                        times[(row, label)].append(s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.calls} calls behind a stuck FS thread, op_timeout={a.op_timeout:g} s: median of "
          f"{a.rounds} interleaved rounds, seconds ('failed': a run failed)")
    print_medians(rows, installs, times, a.rounds, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
