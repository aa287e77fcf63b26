"""Reading an S3 object through FsspecFS, next to s3fs in Python and fsspec.fuse.

    pip install . s3fs 'moto[server]' fusepy      # fusepy only for the kernel FUSE row
    python3 bench/fsspec_read.py                  # 1 GiB object, 3 rounds, ~10 minutes
    python3 bench/fsspec_read.py --size-mib 256 --rounds 2 --random-reads 100

One moto S3 server on 127.0.0.1 holds one object. Each round runs every configuration,
interleaved, each in a fresh process (nothing cached from a previous run):

- `s3fs`: s3fs in Python, no mount: sequential is `fs.open(key).read(1 MiB)` to the end
  (s3fs's own read-ahead cache, 50 MiB blocks); random is `fs.cat_file(key, off, off+4096)`;
- `ldp-embedded`, `ldp-shared`: a Python program under `ldpfuse-run` (`--mode embedded`,
  `--mode shared`) with FsspecFS mounting the bucket: `os.read(fd, 1 MiB)` to the end,
  and `os.pread(fd, 4096, off)`; the page cache asks FsspecFS for missing ranges plus
  readahead (docs/cache.md), each one ranged GET;
- `fsspec.fuse`: the same program on a kernel FUSE mount made by `fsspec.fuse.run`
  (fusepy, libfuse2 and /dev/fuse needed; the row says why when it cannot run).

Only the read loop is timed (inside the program), not interpreter or mount start-up.
Random reads use the same seeded offsets everywhere. The table gives medians, MB/s for
sequential, reads/s for random, and the ratio to s3fs.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
         "AWS_DEFAULT_REGION": "us-east-1"}
MIB = 1 << 20

# The timed program: one workload, one way of reaching the object; prints JSON.
READER = r'''
import json, os, random, sys, time
how, workload, target, size, n, seed = sys.argv[1:7]
size, n = int(size), int(n)
rng = random.Random(int(seed))
offsets = [rng.randrange(0, size // 4096) * 4096 for _ in range(n)]
if how == "s3fs":
    import s3fs
    fs = s3fs.S3FileSystem(endpoint_url=os.environ["BENCH_ENDPOINT"])
    fs.info(target)
    t = time.perf_counter()
    got = 0
    if workload == "seq":
        with fs.open(target, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got += len(b)
    else:
        for off in offsets:
            got += len(fs.cat_file(target, start=off, end=off + 4096))
else:
    fd = os.open(target, os.O_RDONLY)
    t = time.perf_counter()
    got = 0
    if workload == "seq":
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            got += len(b)
    else:
        for off in offsets:
            got += len(os.pread(fd, 4096, off))
    os.close(fd)
print(json.dumps({"seconds": time.perf_counter() - t, "bytes": got}))
'''

# fsspec.fuse in the foreground, until killed.
FUSE_SERVER = r'''
import os, sys
import s3fs
from fsspec.fuse import run
fs = s3fs.S3FileSystem(endpoint_url=os.environ["BENCH_ENDPOINT"])
run(fs, sys.argv[1], sys.argv[2], foreground=True, threads=False)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(workdir):
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(os.path.join(workdir, "moto.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                            env=dict(os.environ, **CREDS), start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
            return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"fsspec_read: moto server did not start (log: {log.name})")
            time.sleep(0.2)


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def upload(endpoint, key, size):
    import s3fs
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, **{"key": "testing", "secret": "testing"})
    fs.mkdir(key.split("/")[0])
    block = random.Random(1).randbytes(8 * MIB)
    with fs.open(key, "wb", block_size=64 * MIB) as f:
        left = size
        while left > 0:
            f.write(block[:min(left, len(block))])
            left -= len(block)
    return fs.info(key)["size"]


def fuse_mount(workdir, endpoint, key):
    """Mount the bucket with fsspec.fuse over kernel FUSE; (proc, mountpoint) or a reason."""
    try:
        import fuse  # noqa: F401  (fusepy, which fsspec.fuse needs)
    except ImportError:
        return None, "fusepy is not installed (pip install fusepy)"
    except OSError as e:
        return None, f"libfuse2 is missing ({e})"
    if not os.path.exists("/dev/fuse"):
        return None, "no /dev/fuse"
    mnt = os.path.join(workdir, "fuse")
    os.makedirs(mnt, exist_ok=True)
    script = os.path.join(workdir, "fuse_server.py")
    with open(script, "w") as f:
        f.write(FUSE_SERVER)
    log = open(os.path.join(workdir, "fuse.log"), "wb")
    proc = subprocess.Popen([sys.executable, script, key.split("/")[0], mnt], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, BENCH_ENDPOINT=endpoint, **CREDS))
    deadline = time.monotonic() + 30
    target = os.path.join(mnt, key.split("/", 1)[1])
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None, f"fsspec.fuse exited (see {log.name})"
        if os.path.ismount(mnt) and os.path.exists(target):
            return (proc, mnt), None
        time.sleep(0.3)
    fuse_unmount(proc, mnt)
    return None, "the FUSE mount did not appear in 30 s"


def fuse_unmount(proc, mnt):
    for cmd in (["fusermount", "-u", mnt], ["umount", "-l", mnt]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, capture_output=True).returncode == 0:
            break
    stop(proc)


def run_reader(argv, env, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(argv)}\n{r.stderr[-2000:]}")
    return json.loads(lines[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    # moto answers a ranged GET of a 1 GiB object in about a second (it reads the object
    # whole), so few random reads already take minutes
    p.add_argument("--random-reads", type=int, default=30)
    p.add_argument("--ldpfuse-run", default=os.path.join(os.path.dirname(sys.executable), "ldpfuse-run"))
    p.add_argument("--no-fuse", action="store_true", help="skip the fsspec.fuse row")
    args = p.parse_args()
    for mod in ("s3fs", "moto"):
        try:
            __import__(mod)
        except ImportError:
            sys.exit(f"fsspec_read: {mod} is not installed (pip install s3fs 'moto[server]')")
    if not os.path.exists(args.ldpfuse_run):
        sys.exit(f"fsspec_read: no ldpfuse-run at {args.ldpfuse_run} (pip install . first)")

    # SIGTERM too unwinds through the finally below: the FUSE mount and moto go away
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = tempfile.mkdtemp(prefix="ldpfuse-fsspec-bench-")
    reader = os.path.join(workdir, "reader.py")
    with open(reader, "w") as f:
        f.write(READER)
    moto, endpoint = start_moto(workdir)
    fuse = None
    try:
        key = "bench/object.bin"
        size = args.size_mib * MIB
        t = time.time()
        assert upload(endpoint, key, size) == size
        print(f"[fsspec_read] uploaded {args.size_mib} MiB to moto in {time.time() - t:.1f}s", flush=True)
        env = dict(os.environ, BENCH_ENDPOINT=endpoint, **CREDS)
        mnt = os.path.join(workdir, "mnt")
        configs = {
            "s3fs": [sys.executable, reader, "s3fs"],
            "ldp-embedded": [args.ldpfuse_run, "--mountpoint", mnt, "--mode", "embedded",
                             "-o", f"endpoint_url={endpoint}", "ldpfuse_py.contrib.fsspec:FsspecFS",
                             "s3://bench", "--", sys.executable, reader, "mount"],
            "ldp-shared": [args.ldpfuse_run, "--mountpoint", mnt, "--mode", "shared",
                           "-o", f"endpoint_url={endpoint}", "ldpfuse_py.contrib.fsspec:FsspecFS",
                           "s3://bench", "--", sys.executable, reader, "mount"],
        }
        targets = {"s3fs": key, "ldp-embedded": os.path.join(mnt, "object.bin"),
                   "ldp-shared": os.path.join(mnt, "object.bin")}
        skipped = {}
        if args.no_fuse:
            skipped["fsspec.fuse"] = "--no-fuse"
        else:
            fuse, why = fuse_mount(workdir, endpoint, key)
            if fuse is None:
                skipped["fsspec.fuse"] = why
            else:
                configs["fsspec.fuse"] = [sys.executable, reader, "mount"]
                targets["fsspec.fuse"] = os.path.join(fuse[1], "object.bin")
        samples = {(c, w): [] for c in configs for w in ("seq", "rand")}
        failures = {}
        for rnd in range(args.rounds):
            for workload in ("seq", "rand"):
                for name, argv in configs.items():
                    if (name, workload) in failures:
                        continue
                    full = argv + [workload, targets[name], str(size), str(args.random_reads), "7"]
                    try:
                        res = run_reader(full, env, timeout=1800)
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        failures[(name, workload)] = str(e).splitlines()[0][:200]
                        print(f"[fsspec_read] {name} {workload} failed: {e}", flush=True)
                        continue
                    expect = size if workload == "seq" else 4096 * args.random_reads
                    if res["bytes"] != expect:
                        failures[(name, workload)] = f"read {res['bytes']} bytes, expected {expect}"
                        continue
                    samples[(name, workload)].append(res["seconds"])
                    print(f"[fsspec_read] round {rnd + 1} {name:13s} {workload:4s} {res['seconds']:.3f}s",
                          flush=True)
        report(args, size, configs, samples, failures, skipped)
    finally:
        if fuse is not None:
            fuse_unmount(*fuse)
        stop(moto)
        shutil.rmtree(workdir, ignore_errors=True)


def report(args, size, configs, samples, failures, skipped):
    print()
    print(f"## {args.size_mib} MiB object on moto (127.0.0.1), medians of {args.rounds} rounds")
    print()
    print("| configuration | sequential MB/s | vs s3fs | random 4 KiB reads/s | vs s3fs |")
    print("|---|---|---|---|---|")
    med = {k: statistics.median(v) for k, v in samples.items() if v}
    base_seq = med.get(("s3fs", "seq"))
    base_rand = med.get(("s3fs", "rand"))
    for name in configs:
        cells = []
        for workload, base, amount in (("seq", base_seq, size / 1e6),
                                       ("rand", base_rand, args.random_reads)):
            t = med.get((name, workload))
            if t is None:
                cells += [f"failed: {failures.get((name, workload), 'no sample')}", ""]
                continue
            cells += [f"{amount / t:.1f}", f"x{base / t:.2f}" if base else ""]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, why in skipped.items():
        print(f"| {name} | not run: {why} | | | |")


if __name__ == "__main__":
    main()
