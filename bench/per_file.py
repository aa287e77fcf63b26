"""Per small file, where the time goes (issue 34): the data loader's tar (10,000 files of
1-32 KiB, bench/data_loader.py) read by bench/per_file.c, which lists the tree and then
stats, opens, reads whole and closes each file, timing each step:

  native   the tar extracted to a directory
  ldp      examples/archive.py under ldpfuse-run (default mode), one column per
           --ldpfuse-run given (e.g. a build before a change and one after; PATH,FILE
           serves FILE's Archive class instead of this tree's example)
  class    the archive class's own getattr, open, read and release called in a plain
           Python loop over the same names (no transport, no cache: the class's floor)
  floor    bench/per_file_floor.c over the extracted files: per file, the kernel calls a
           page cache per served file cannot avoid, across two processes, without Python
           and without the preload (a request and answer over a shared-memory channel,
           memfd_create, the bytes written, the memfd sent and received, the reader's own
           description of it by a kept /proc/self/fd dirfd, its read whole, the closes);
           total is that, cpu the reader's, srv_cpu the server's; its parts (rt, cache,
           path, one, direct: see the C file) are printed under the table

in interleaved rounds; prints medians (us per file) and, with --stats, the request
counts of one run per ldpfuse-run (with the class's methods as the server called them,
against the same methods timed in a plain loop). srv_cpu is the server's CPU time per
file over the files' pass, cpu the reader's own (per_file.c; for class, the loop's): on a
loaded machine they move less than the wall clock; --no-spin turns the client's and the
server's spins off (LDPFUSE_SPIN_US=0, LDPFUSE_SERVER_SPIN_US=0), so that srv_cpu is the
server's work alone (and the floor's channel sleeps on its futex at once: per_file_floor -n).

    python3 bench/per_file.py [--rounds 3] [--files 10000] [--ldpfuse-run PATH]... [--stats] [--per-dir]

--per-dir reads each directory's files right after its listing (per_file.c -d: within
attr_timeout of it, as find or ls -l would), not after the whole tree's.
"""
import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data_loader  # noqa: E402  (make_tar)

ARCHIVE_PY = os.path.join(os.path.dirname(HERE), "examples", "archive.py")
KEYS = ("stat", "open", "read", "close", "total", "srv_cpu", "cpu")


def build(out, name="per_file"):
    exe = os.path.join(out, name)
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, name + ".c")], check=True)
    return exe


def parse(text):
    for line in text.splitlines():
        if line.startswith("RESULT "):
            kv = dict(x.split("=") for x in line.split()[1:])
            return {k: float(v) for k, v in kv.items()}
    return None


def run_c(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    res = parse(r.stdout)
    if res is None:
        raise SystemExit(f"{argv[0]} failed: {r.stderr.strip()[-500:]}")
    return res, r.stderr


def class_loop(tar, names):
    """us per file of the class's getattr + open + read(size + 1) + release, in this
    process: wall clock (total) and this thread's CPU time (cpu)."""
    fs = archive(tar)
    t0, c0 = time.perf_counter(), time.thread_time()
    for p in names:
        st = fs.getattr(p)
        fh = fs.open(p, os.O_RDONLY)
        fs.read(p, st["st_size"] + 1, 0, fh)
        fs.release(p, fh)
    c1, t1 = time.thread_time(), time.perf_counter()
    return {"total": (t1 - t0) * 1e6 / len(names), "cpu": (c1 - c0) * 1e6 / len(names)}


def archive(tar):
    spec = importlib.util.spec_from_file_location("archive_example", ARCHIVE_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Archive(tar)


def class_methods(tar, names):
    """The loop's methods timed one by one (perf_counter_ns around each call), in the order
    the server calls them (open, getattr, read of the size, release): the lines to set
    against --stats' table of the class's methods as the server called them."""
    fs = archive(tar)
    times = {m: [] for m in ("open", "getattr", "read", "release")}
    clock = time.perf_counter_ns
    for p in names:
        a = clock()
        fh = fs.open(p, os.O_RDONLY)
        b = clock()
        st = fs.getattr(p)
        c = clock()
        fs.read(p, st["st_size"], 0, fh)
        d = clock()
        fs.release(p, fh)
        e = clock()
        for m, t in zip(times, (b - a, c - b, d - c, e - d)):
            times[m].append(t)
    lines = ["the class's methods in a plain loop (perf_counter_ns around each):",
             f"{'method':8s} {'calls':>6s} {'total':>9s} {'p50':>8s} {'mean':>8s}"]
    for m, t in times.items():
        lines.append(f"{m:8s} {len(t):6d} {sum(t) / 1e6:7.1f}ms {statistics.median(t) / 1e3:6.2f}us "
                     f"{sum(t) / len(t) / 1e3:6.2f}us")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--ldpfuse-run", action="append", default=[])
    ap.add_argument("--stats", action="store_true", help="print one --stats table per ldpfuse-run")
    ap.add_argument("--per-dir", action="store_true", help="each directory's files after its listing")
    ap.add_argument("--no-spin", action="store_true", help="LDPFUSE_SPIN_US=0 LDPFUSE_SERVER_SPIN_US=0 for the ldp runs, per_file_floor -n for the floor")
    args = ap.parse_args()
    ldps = args.ldpfuse_run or [shutil.which("ldpfuse-run")]
    if not all(ldps):
        raise SystemExit("ldpfuse-run not found: give --ldpfuse-run PATH")
    examples = [(x.split(",", 1) + [ARCHIVE_PY])[1] + ":Archive" for x in ldps]
    ldps = [x.split(",", 1)[0] for x in ldps]
    tmp = tempfile.mkdtemp(prefix="ldpfuse-perfile-", dir="/var/tmp")
    try:
        tar, ext, mnt = (os.path.join(tmp, n) for n in ("data.tar", "extracted", "mnt"))
        data_loader.make_tar(tar, args.files)
        with tarfile.open(tar) as t:
            t.extractall(ext)
            names = ["/" + m.name for m in t.getmembers() if m.isfile()]
        exe = build(tmp)
        floor_exe = build(tmp, "per_file_floor")
        env = dict(os.environ, LDPFUSE_SPIN_US="0", LDPFUSE_SERVER_SPIN_US="0") if args.no_spin else None
        flag = ["-d"] if args.per_dir else []
        cols = ["native"] + [f"ldp{i}" for i in range(len(ldps))] + ["class", "floor"]
        res = {c: [] for c in cols}
        for rnd in range(args.rounds):
            order = cols[rnd % len(cols):] + cols[:rnd % len(cols)]
            for c in order:
                if c == "native":
                    r, _ = run_c([exe, *flag, ext])
                elif c == "class":
                    r = class_loop(tar, names)
                elif c == "floor":
                    r, _ = run_c([floor_exe, *(["-n"] if args.no_spin else []), ext])
                    r["total"] = r["floor"]
                else:
                    i = int(c[3:])
                    r, _ = run_c([ldps[i], "--mountpoint", mnt, examples[i], tar, "--", exe, *flag, mnt], env)
                res[c].append(r)
                print(f"[round {rnd + 1}] {c:7s} " + " ".join(f"{k}={r[k]:.2f}" for k in KEYS if k in r),
                      flush=True)
        print(f"\nPer file, us (medians of {args.rounds} interleaved rounds; {args.files} files of 1-32 KiB)")
        print(f"{'':8s}" + "".join(f"{k:>9s}" for k in KEYS) + f"{'listing':>10s}")
        for c in cols:
            row = f"{c:8s}"
            for k in KEYS + ("list_us",):
                v = [r[k] for r in res[c] if k in r]
                cell = f"{statistics.median(v) / (args.files if k == 'list_us' else 1):.2f}" if v else "-"
                row += f"{cell:>{10 if k == 'list_us' else 9}s}"
            print(row)
        print("floor's parts: " + " ".join(f"{k}={statistics.median(r[k] for r in res['floor']):.2f}"
                                           for k in ("rt", "cache", "path", "one", "direct")))
        for i, ldp in enumerate(ldps):
            print(f"ldp{i} = {ldp} serving {examples[i]}")
        if args.stats:
            print("\n" + class_methods(tar, names))
            for i, ldp in enumerate(ldps):
                _, err = run_c([ldp, "--stats", "--mountpoint", mnt, examples[i], tar, "--", exe, *flag, mnt], env)
                print(f"\n--stats of ldp{i}:\n{err}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
