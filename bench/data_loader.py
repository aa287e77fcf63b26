"""The data-loader workload of issue 24: read every file of a 10,000-file tar (1-32 KiB
each) with 1 and with 4 forked workers, as a training loop's data loader does, through

  native        the tar extracted to a directory (the floor)
  rat-fuse      ratarmount over kernel FUSE (its users' way today; needs /dev/fuse, root)
  rat-ldp       ratarmount run unmodified under ldpfuse-run (default mode)
  archive-ldp   examples/archive.py under ldpfuse-run (default mode)

in interleaved rounds; prints the median seconds of the read phase (the workers' listing
and reads; the mount's start is not counted) and the ratios.

    python3 bench/data_loader.py [--rounds 3] [--files 10000] [--ldpfuse-run PATH]
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ARCHIVE = os.path.join(os.path.dirname(HERE), "examples", "archive.py") + ":Archive"

READER = r'''
import os, sys, time
root, workers = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
names = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
def work(part):
    n = 0
    for p in part:
        with open(p, "rb") as f:
            n += len(f.read())
    return n
if workers == 1:
    total = work(names)
else:
    pids, rfds = [], []
    for w in range(workers):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(wfd, str(work(names[w::workers])).encode())
            os._exit(0)
        os.close(wfd)
        pids.append(pid)
        rfds.append(r)
    total = 0
    for pid, r in zip(pids, rfds):
        total += int(os.read(r, 64) or b"0")
        os.close(r)
        os.waitpid(pid, 0)
print(f"RESULT files={len(names)} bytes={total} secs={time.perf_counter() - t0:.4f}")
'''


def make_tar(path, files, seed=42):
    rnd = random.Random(seed)
    total = 0
    with tarfile.open(path, "w") as tar:
        for i in range(files):
            size = rnd.randint(1024, 32 * 1024)
            data = rnd.randbytes(size)
            info = tarfile.TarInfo(f"d{i % 100:02d}/f{i:05d}.bin")
            info.size = size
            info.mtime = 1700000000
            import io
            tar.addfile(info, io.BytesIO(data))
            total += size
    return total


def parse(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            kv = dict(x.split("=") for x in line.split()[1:])
            return int(kv["files"]), int(kv["bytes"]), float(kv["secs"])
    return None


def run_one(cfg, workers, ctx):
    reader = [sys.executable, ctx["reader"]]
    if cfg == "native":
        argv = reader + [ctx["extracted"], str(workers)]
    elif cfg == "rat-ldp":
        argv = [ctx["ldp"], ctx["ratarmount"], ctx["tar"], ctx["mnt"], "--"] + reader + [ctx["mnt"], str(workers)]
    elif cfg == "archive-ldp":
        argv = [ctx["ldp"], "--mountpoint", ctx["mnt"], ARCHIVE, ctx["tar"], "--"] + reader + [ctx["mnt"], str(workers)]
    elif cfg == "rat-fuse":
        os.makedirs(ctx["fuse_mnt"], exist_ok=True)
        m = subprocess.run([ctx["ratarmount"], ctx["tar"], ctx["fuse_mnt"]], capture_output=True, text=True, timeout=300)
        if m.returncode != 0:
            return None, f"ratarmount over FUSE failed: {m.stderr.strip()[-300:]}"
        try:
            argv = reader + [ctx["fuse_mnt"], str(workers)]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        finally:
            subprocess.run(["fusermount", "-u", ctx["fuse_mnt"]], capture_output=True)
        res = parse(r.stdout)
        return res, None if res else (r.stderr.strip()[-300:] or "no result")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    res = parse(r.stdout)
    return res, None if res else (r.stderr.strip()[-300:] or "no result")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--ldpfuse-run", default=shutil.which("ldpfuse-run"))
    ap.add_argument("--only", default="", help="comma-separated configurations")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ldpfuse-loader-", dir="/var/tmp")
    try:
        ctx = {"tar": os.path.join(tmp, "data.tar"), "extracted": os.path.join(tmp, "extracted"),
               "mnt": os.path.join(tmp, "mnt"), "fuse_mnt": os.path.join(tmp, "fuse"),
               "reader": os.path.join(tmp, "reader.py"), "ldp": args.ldpfuse_run,
               "ratarmount": shutil.which("ratarmount") or os.path.join(os.path.dirname(sys.executable), "ratarmount")}
        with open(ctx["reader"], "w") as f:
            f.write(READER)
        total = make_tar(ctx["tar"], args.files)
        with tarfile.open(ctx["tar"]) as t:
            t.extractall(ctx["extracted"])
        # ratarmount's index, made once (as a user's second mount finds it)
        subprocess.run([ctx["ldp"], ctx["ratarmount"], ctx["tar"], ctx["mnt"], "--", "true"], capture_output=True)
        configs = ["native", "rat-fuse", "rat-ldp", "archive-ldp"]
        if args.only:
            configs = [c for c in configs if c in args.only.split(",")]
        if not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None:
            print("rat-fuse: skipped (no /dev/fuse or fusermount: apt-get install fuse)")
            configs = [c for c in configs if c != "rat-fuse"]
        times = {(c, w): [] for c in configs for w in (1, 4)}
        failures = {}
        for rnd in range(args.rounds):
            for w in (1, 4):
                for c in configs:
                    res, err = run_one(c, w, ctx)
                    if res is None or res[0] != args.files or res[1] != total:
                        failures[(c, w)] = err or f"read {res[:2] if res else None}, expected {args.files} files, {total} bytes"
                        continue
                    times[(c, w)].append(res[2])
                    print(f"[round {rnd + 1}] {c:12s} {w} worker(s): {res[2]:.3f} s", flush=True)
        print(f"\nData loader: {args.files} files of 1-32 KiB ({total / 2**20:.0f} MiB) in one tar; "
              f"medians of {args.rounds} interleaved rounds, seconds (x = speed relative to native)")
        nat = {w: statistics.median(times[("native", w)]) for w in (1, 4) if times.get(("native", w))}
        print(f"{'configuration':14s} {'1 worker':>18s} {'4 workers':>18s}")
        for c in configs:
            cells = []
            for w in (1, 4):
                t = times[(c, w)]
                if not t:
                    cells.append("failed".rjust(18))
                    continue
                m = statistics.median(t)
                ratio = f"x{nat[w] / m:.2f}" if w in nat else ""
                cells.append(f"{m:8.3f} {ratio:>9s}")
            print(f"{c:14s} {cells[0]:>18s} {cells[1]:>18s}")
        for (c, w), err in failures.items():
            print(f"failed: {c}, {w} worker(s): {err}")
    finally:
        subprocess.run(["fusermount", "-u", os.path.join(tmp, "fuse")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
