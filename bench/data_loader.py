"""The data-loader workload of issue 24: read every file of a 10,000-file tar (1-32 KiB
each) with 1 and with 4 forked workers, as a training loop's data loader does, through

  native        the tar extracted to a directory (the floor)
  rat-fuse      ratarmount over kernel FUSE (its users' way today; needs /dev/fuse, root)
  rat-ldp       ratarmount run unmodified under ldpfuse-run (default mode)
  archive-ldp   examples/archive.py under ldpfuse-run (default mode)
  ...-w2, -wauto  the same with -o workers=2 / -o workers=auto (issue 34: N instances of the
                class serve the command; ratarmount with -o workers_safe, its user's word;
                the archive example's workers are forks of its first instance)
  archive-ldp-w2-fresh  -o workers=2 with each worker built afresh (the example as a
                subclass that says workers_safe = True: the archive indexed again)

in interleaved rounds; prints the median seconds of the read phase (the workers' listing
and reads; the mount's start is not counted) and the ratios.

With --gz (issue 31) the same files come from the tar compressed with gzip -6 (random
contents: it hardly shrinks, but every byte goes through inflate), through

  native          the tar extracted to a directory
  rat-fuse-gz     ratarmount over kernel FUSE on the .tar.gz
  archive-ldp-gz  examples/archive.py under ldpfuse-run on the .tar.gz (its restart points)

and the mount's start (ratarmount's index is made at its first mount, then read from the
.index.sqlite file beside the archive; the example reads the whole stream at each mount)
is printed besides.

    python3 bench/data_loader.py [--gz] [--rounds 3] [--files 10000] [--ldpfuse-run PATH]

bench/run.py runs it too (`--only loader`, setup() and measure() below) and puts it in
RESULTS.md.
"""
import argparse
import gzip
import io
import os
import random
import shlex
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


CONFIGS = ["native", "rat-fuse", "rat-ldp", "rat-ldp-w2", "rat-ldp-wauto", "archive-ldp", "archive-ldp-w2",
           "archive-ldp-wauto", "archive-ldp-w2-fresh"]
GZ_CONFIGS = ["native", "rat-fuse-gz", "archive-ldp-gz"]
LABELS = {
    "native": "native (the tar extracted)",
    "rat-fuse": "ratarmount over kernel FUSE",
    "rat-ldp": "ratarmount under ldpfuse-run",
    "archive-ldp": "examples/archive.py under ldpfuse-run",
    "archive-ldp-w2": "examples/archive.py under ldpfuse-run -o workers=2",
    "archive-ldp-wauto": "examples/archive.py under ldpfuse-run -o workers=auto",
    "archive-ldp-w2-fresh": "examples/archive.py under ldpfuse-run -o workers=2, each worker built afresh",
    "rat-ldp-w2": "ratarmount under ldpfuse-run -o workers=2",
    "rat-ldp-wauto": "ratarmount under ldpfuse-run -o workers=auto",
    "rat-fuse-gz": "ratarmount over kernel FUSE, .tar.gz",
    "archive-ldp-gz": "examples/archive.py under ldpfuse-run, .tar.gz",
}
WORKERS = (1, 4)

# the archive example as a class whose workers each build their own instance (it says
# workers_safe = "fork": its workers are forks of the first): the before of that
ARCHIVE_FRESH = f'''
import importlib.util
spec = importlib.util.spec_from_file_location("_archive_example", {ARCHIVE.rpartition(":")[0]!r})
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


class ArchiveFresh(example.Archive):
    workers_safe = True
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
            tar.addfile(info, io.BytesIO(data))
            total += size
    return total


def find_ratarmount():
    cand = shutil.which("ratarmount") or os.path.join(os.path.dirname(sys.executable), "ratarmount")
    return cand if os.path.exists(cand) else None


def setup(workdir, files, ldpfuse_run, gz=False):
    """Makes the tar of `files` files in workdir (a new directory), with gz its .tar.gz, its
    extracted copy and the reader program; returns the context measure() takes."""
    os.makedirs(workdir)
    ctx = {"tar": os.path.join(workdir, "data.tar"), "extracted": os.path.join(workdir, "extracted"),
           "mnt": os.path.join(workdir, "mnt"), "fuse_mnt": os.path.join(workdir, "fuse"),
           "reader": os.path.join(workdir, "reader.py"), "ldp": ldpfuse_run,
           "ratarmount": find_ratarmount(), "files": files, "starts": {}}
    with open(ctx["reader"], "w") as f:
        f.write(READER)
    ctx["archive_fresh"] = os.path.join(workdir, "archive_fresh.py")
    with open(ctx["archive_fresh"], "w") as f:
        f.write(ARCHIVE_FRESH)
    ctx["bytes"] = make_tar(ctx["tar"], files)
    with tarfile.open(ctx["tar"]) as t:
        t.extractall(ctx["extracted"])
    if gz:
        ctx["tgz"] = ctx["tar"] + ".gz"
        with open(ctx["tar"], "rb") as src, gzip.open(ctx["tgz"], "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        return ctx
    if ctx["ratarmount"] and ctx["ldp"]:
        # ratarmount's index, made once (as a user's second mount finds it)
        subprocess.run([ctx["ldp"], ctx["ratarmount"], ctx["tar"], ctx["mnt"], "--", "true"],
                       capture_output=True, timeout=900)
    return ctx


def unavailable(ctx):
    """{configuration: why it cannot run here} for those of CONFIGS that cannot."""
    why = {}
    if not ctx["ratarmount"]:
        why["rat-fuse"] = why["rat-ldp"] = why["rat-ldp-w2"] = why["rat-ldp-wauto"] = \
            "ratarmount not installed (pip install ratarmount)"
    if not os.path.exists("/dev/fuse"):
        why.setdefault("rat-fuse", "/dev/fuse does not exist")
    elif shutil.which("fusermount") is None:
        why.setdefault("rat-fuse", "fusermount not found (apt-get install fuse)")
    if not ctx["ldp"]:
        why.setdefault("rat-ldp", "ldpfuse-run not found")
        why["archive-ldp"] = why["archive-ldp-w2"] = why["archive-ldp-wauto"] = why["archive-ldp-w2-fresh"] = \
            "ldpfuse-run not found"
    for c in ("rat-fuse", "archive-ldp"):
        if c in why:
            why[c + "-gz"] = why[c]
    return why


def teardown(workdir):
    subprocess.run(["fusermount", "-u", os.path.join(workdir, "fuse")], capture_output=True)
    shutil.rmtree(workdir, ignore_errors=True)


def parse(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            kv = dict(x.split("=") for x in line.split()[1:])
            return int(kv["files"]), int(kv["bytes"]), float(kv["secs"])
    return None


def command(cfg, workers, ctx):
    """The timed command of cfg (for rat-fuse, the reader run on the FUSE mount)."""
    reader = [sys.executable, ctx["reader"]]
    cfg, _, n = cfg.partition("-w")
    if n:   # -o workers=N: the launcher's own option, before the file system
        n, _, fresh = n.partition("-")
        ldp = [ctx["ldp"], "-o", f"workers={n}"] + (["-o", "workers_safe"] if cfg.startswith("rat") else [])
        return ldp + command(cfg + ("-fresh" if fresh else ""), workers, dict(ctx, ldp=""))[1:]
    if cfg == "native":
        return reader + [ctx["extracted"], str(workers)]
    if cfg == "rat-ldp":
        return [ctx["ldp"], ctx["ratarmount"], ctx["tar"], ctx["mnt"], "--"] + reader + [ctx["mnt"], str(workers)]
    if cfg in ("archive-ldp", "archive-ldp-gz", "archive-ldp-fresh"):
        tar = ctx["tgz"] if cfg.endswith("-gz") else ctx["tar"]
        fs = ctx["archive_fresh"] + ":ArchiveFresh" if cfg.endswith("-fresh") else ARCHIVE
        return [ctx["ldp"], "--mountpoint", ctx["mnt"], fs, tar, "--"] + reader + [ctx["mnt"], str(workers)]
    if cfg in ("rat-fuse", "rat-fuse-gz"):
        return reader + [ctx["fuse_mnt"], str(workers)]
    raise ValueError(cfg)


def run_one(cfg, workers, ctx):
    """(seconds, None) or (None, why it failed): one timed read of every file."""
    try:
        return _run_one(cfg, workers, ctx)
    except subprocess.TimeoutExpired as e:
        return None, f"timed out after {e.timeout:.0f} s: {shlex.join(e.cmd)}"


def _run_one(cfg, workers, ctx):
    argv = command(cfg, workers, ctx)
    t0 = time.perf_counter()
    if cfg in ("rat-fuse", "rat-fuse-gz"):
        tar = ctx["tgz"] if cfg.endswith("-gz") else ctx["tar"]
        os.makedirs(ctx["fuse_mnt"], exist_ok=True)
        m = subprocess.run([ctx["ratarmount"], tar, ctx["fuse_mnt"]], capture_output=True, text=True, timeout=300)
        if m.returncode != 0:
            return None, f"ratarmount over FUSE failed: {m.stderr.strip()[-300:]}"
        start = time.perf_counter() - t0
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        finally:
            subprocess.run(["fusermount", "-u", ctx["fuse_mnt"]], capture_output=True)
    else:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        start = None
    res = parse(r.stdout)
    if res is None:
        return None, r.stderr.strip()[-300:] or "no result"
    if res[:2] != (ctx["files"], ctx["bytes"]):
        return None, f"read {res[0]} files, {res[1]} bytes; expected {ctx['files']} files, {ctx['bytes']} bytes"
    if start is None and cfg != "native":   # ldpfuse-run: its whole run less the reader's
        start = time.perf_counter() - t0 - res[2]
    if start is not None:
        ctx["starts"].setdefault(cfg, []).append(start)
    return res[2], None


def measure(ctx, configs, rounds):
    """Interleaved rounds (each round: 1 worker then 4, every configuration, the starting one
    rotated each round); yields (round, configuration, workers, seconds or None, error)."""
    for rnd in range(1, rounds + 1):
        k = (rnd - 1) % max(1, len(configs))
        for w in WORKERS:
            for c in configs[k:] + configs[:k]:
                secs, err = run_one(c, w, ctx)
                yield rnd, c, w, secs, err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--ldpfuse-run", default=shutil.which("ldpfuse-run"))
    ap.add_argument("--gz", action="store_true", help="the .tar.gz configurations (issue 31)")
    ap.add_argument("--only", default="", help="comma-separated configurations")
    args = ap.parse_args()
    tmp = os.path.join(tempfile.mkdtemp(prefix="ldpfuse-loader-", dir="/var/tmp"), "work")
    try:
        ctx = setup(tmp, args.files, args.ldpfuse_run, gz=args.gz)
        configs = [c for c in (GZ_CONFIGS if args.gz else CONFIGS) if not args.only or c in args.only.split(",")]
        for c, why in unavailable(ctx).items():
            if c in configs:
                print(f"{c}: skipped ({why})")
                configs.remove(c)
        times = {(c, w): [] for c in configs for w in WORKERS}
        failures = {}
        for rnd, c, w, secs, err in measure(ctx, configs, args.rounds):
            if secs is None:
                failures[(c, w)] = err
                continue
            times[(c, w)].append(secs)
            print(f"[round {rnd}] {c:12s} {w} worker(s): {secs:.3f} s", flush=True)
        print(f"\nData loader: {args.files} files of 1-32 KiB ({ctx['bytes'] / 2**20:.0f} MiB) in one "
              f"{'.tar.gz' if args.gz else 'tar'}; "
              f"medians of {args.rounds} interleaved rounds, seconds (x = speed relative to native)")
        nat = {w: statistics.median(times[("native", w)]) for w in WORKERS if times.get(("native", w))}
        print(f"{'configuration':20s} {'1 worker':>18s} {'4 workers':>18s}")
        for c in configs:
            cells = []
            for w in WORKERS:
                t = times[(c, w)]
                if not t:
                    cells.append("failed".rjust(18))
                    continue
                m = statistics.median(t)
                ratio = f"x{nat[w] / m:.2f}" if w in nat else ""
                cells.append(f"{m:8.3f} {ratio:>9s}")
            starts = ctx["starts"].get(c)
            start = f"   start {statistics.median(starts):.2f} s" if starts else ""
            print(f"{c:20s} {cells[0]:>18s} {cells[1]:>18s}{start}")
        if args.gz:
            for w in WORKERS:
                a, b = times.get(("archive-ldp-gz", w)), times.get(("rat-fuse-gz", w))
                if a and b:
                    print(f"{w} worker(s): the archive example takes x{statistics.median(a) / statistics.median(b):.2f} "
                          f"of ratarmount's time over FUSE (issue 31: at most x2)")
        for (c, w), err in failures.items():
            print(f"failed: {c}, {w} worker(s): {err}")
    finally:
        teardown(tmp)
        shutil.rmtree(os.path.dirname(tmp), ignore_errors=True)


if __name__ == "__main__":
    main()
