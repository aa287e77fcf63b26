"""200 short processes on a loopback mount, next to native: what `make`, shell scripts,
`find -exec` and git hooks pay per process (issue 10's target: >= x0.7 of native in the
default mode).

    python3 bench/short_processes.py [--rounds 5] [--procs 200] [--ldpfuse-run PATH]

A shell runs `cat` on N files of 4 KiB, one process each, and times the loop itself (the
launcher's start is not counted), natively and under ldpfuse-run in each mode, in
interleaved rounds; prints medians in ms per process and the ratio to native (higher is
better). bench/run.py's `firstop` measures the first operation of a fresh process.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPBACK = os.path.join(os.path.dirname(HERE), "examples", "loopback.py") + ":Loopback"

LOOP = r'''
start=$(date +%s%N)
i=0
while [ $i -lt {n} ]; do cat "$D/f$i" > /dev/null; i=$((i+1)); done
end=$(date +%s%N)
echo $(( (end - start) / {n} ))
'''


def run(argv, env):
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{out.stderr}")
    return int(out.stdout.split()[-1]) / 1e6    # ms per process


def make_files(procs, parent="/var/tmp"):
    """A work directory with lower/f0 ... f{procs-1} of 4 KiB; returns (work, lower, mnt)."""
    work = tempfile.mkdtemp(prefix="ldpfuse-procs-", dir=parent)
    lower = os.path.join(work, "lower")
    os.mkdir(lower)
    for i in range(procs):
        with open(os.path.join(lower, f"f{i}"), "wb") as f:
            f.write(os.urandom(4096))
    return work, lower, os.path.join(work, "mnt")


def configs(ldpfuse_run, lower, mnt, procs, modes=("shared (default)", "embedded")):
    """name -> (argv, env) of the loop natively and under ldpfuse-run in each mode."""
    script = LOOP.format(n=procs)
    env = dict(os.environ)
    out = {"native": (["sh", "-c", script], dict(env, D=lower))}
    for name in modes:
        mode = [] if name.endswith("(default)") else ["--mode", name]
        out[name] = ([ldpfuse_run] + mode + ["--mountpoint", mnt, LOOPBACK, lower, "--",
                                             "sh", "-c", script], dict(env, D=mnt))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--procs", type=int, default=200)
    ap.add_argument("--ldpfuse-run", default=shutil.which("ldpfuse-run"))
    a = ap.parse_args()
    work, lower, mnt = make_files(a.procs)
    cfgs = configs(a.ldpfuse_run, lower, mnt, a.procs)
    times = {k: [] for k in cfgs}
    try:
        for _ in range(a.rounds):
            for name, (argv, e) in cfgs.items():
                times[name].append(run(argv, e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    native = statistics.median(times["native"])
    print(f"{a.procs} short processes (cat of a 4 KiB file), medians of {a.rounds} interleaved rounds")
    for name, t in times.items():
        m = statistics.median(t)
        print(f"  {name:18s} {m:7.3f} ms/process  x{native / m:.2f}")


if __name__ == "__main__":
    main()
