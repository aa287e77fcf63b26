"""examples/overlay.py next to kernel overlayfs and fuse-overlayfs: what a sandboxed build
in a writable view of a read-only source tree pays (issue 33's overlay workload).

    python3 bench/overlay.py [--rounds 5] [--files 3000] [--ldpfuse-run PATH] [--dir DIR]
                             [--configs native,kernel,...] [--no-make] [--before PATH]

The lower directory is a git repository of FILES small files in 100 directories and a
`build/` of 16 C files with a Makefile. Each round, each configuration gets a fresh upper
(and work) directory over it and runs, timed by the shell inside the merged directory
(mounting and the launcher's start are not counted):

- `git status` (the first in a new view refreshes the index: it is copied up and written),
- `git status` again,
- `find . -type f | wc -l`,
- `make -j2` in build/ (16 compiles and a link: copy-up of build/, creates, writes).

Configurations: `native` (a fresh copy of the lower tree, no overlay), `kernel`
(`mount -t overlay`, root), `fuse-overlayfs` (Debian's, over kernel FUSE: /dev/fuse),
`ldpfuse` (ldpfuse-run with examples/overlay.py, the default mode), `ldpfuse-union=no`
(the same with `-o union=no`: every name through Python), `ldpfuse-embedded`
(`--mode embedded`), `ldpfuse-before` (`--before PATH`: another build's ldpfuse-run, e.g.
a venv of the main branch, default mode, to compare two builds in the same rounds); a
configuration that cannot run here is left out with a message.
Rounds are interleaved; the table gives medians in ms and, for ldpfuse, the ratio
kernel/ldpfuse and fuse-overlayfs/ldpfuse (higher is better for ldpfuse).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OVERLAY = os.path.join(os.path.dirname(HERE), "examples", "overlay.py") + ":Overlay"
STEPS = ("git status", "git status again", "find", "make -j2")

WORKLOAD = r'''
cd "$D"
t0=$(date +%s%N)
git status --porcelain > /dev/null
t1=$(date +%s%N)
git status --porcelain > /dev/null
t2=$(date +%s%N)
find . -type f | wc -l > /dev/null
t3=$(date +%s%N)
make -s -j2 -C build > /dev/null
t4=$(date +%s%N)
test -x build/prog || { echo "no build/prog" >&2; exit 1; }
echo $((t1-t0)) $((t2-t1)) $((t3-t2)) $((t4-t3))
'''

MAKEFILE = """\
OBJS = $(patsubst %.c,%.o,$(wildcard *.c))
prog: $(OBJS)
\tcc -o $@ $(OBJS)
%.o: %.c
\tcc -O1 -c -o $@ $<
"""


def make_lower(lower, files):
    "A git repository of `files` files in 100 directories, and build/ with 16 C files."
    os.makedirs(lower)
    for i in range(files):
        d = os.path.join(lower, f"dir{i % 100:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"file{i}.txt"), "w") as f:
            f.write(f"line {i}\n" * (1 + i % 40))
    build = os.path.join(lower, "build")
    os.makedirs(build)
    for i in range(16):
        with open(os.path.join(build, f"m{i}.c"), "w") as f:
            body = "".join(f"int f{i}_{k}(int x) {{ return x * {k} + {i}; }}\n" for k in range(40))
            f.write(body + (f"int g{i}(void) {{ return f{i}_3(2); }}\n" if i else
                            "".join(f"int g{k}(void);\n" for k in range(1, 16)) +
                            "int main(void) { return g1() * 0; }\n"))
    with open(os.path.join(build, "Makefile"), "w") as f:
        f.write(MAKEFILE)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b", GIT_CONFIG_NOSYSTEM="1")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "tree"]):
        subprocess.run(argv, cwd=lower, env=env, check=True)


def parse(out):
    return [int(x) / 1e6 for x in out.split()[-len(STEPS):]]


def run_workload(argv, env):
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return parse(r.stdout)


class Round:
    "Fresh upper, work and merged directories for one configuration's run."

    def __init__(self, base, name):
        self.dir = tempfile.mkdtemp(prefix=f"{name}-", dir=base)
        self.upper, self.work, self.merged = (os.path.join(self.dir, n) for n in ("upper", "work", "merged"))
        for d in (self.upper, self.work, self.merged):
            os.mkdir(d)

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def native(lower, rnd, env):
    copy = os.path.join(rnd.dir, "copy")
    subprocess.run(["cp", "-a", lower, copy], check=True)
    return run_workload(["sh", "-c", WORKLOAD], dict(env, D=copy))


def kernel(lower, rnd, env):
    opts = f"lowerdir={lower},upperdir={rnd.upper},workdir={rnd.work}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, rnd.merged], check=True)
    try:
        return run_workload(["sh", "-c", WORKLOAD], dict(env, D=rnd.merged))
    finally:
        subprocess.run(["umount", rnd.merged], check=True)


def fuse_overlayfs(lower, rnd, env):
    opts = f"lowerdir={lower},upperdir={rnd.upper},workdir={rnd.work}"
    subprocess.run(["fuse-overlayfs", "-o", opts, rnd.merged], check=True)
    try:
        return run_workload(["sh", "-c", WORKLOAD], dict(env, D=rnd.merged))
    finally:
        subprocess.run(["fusermount3", "-u", rnd.merged], check=True)


def ldpfuse(ldpfuse_run, mode):
    def run(lower, rnd, env):
        argv = [ldpfuse_run, *mode, "--mountpoint", rnd.merged, OVERLAY, lower, rnd.upper,
                "--", "sh", "-c", WORKLOAD]
        return run_workload(argv, dict(env, D=rnd.merged))
    return run


def available(ldpfuse_run, before=None):
    "name -> runner of the configurations that can run here (and why the others cannot)."
    out = {"native": native}
    root = os.geteuid() == 0
    if root:
        out["kernel"] = kernel
    else:
        print("kernel: left out (mount -t overlay needs root)", file=sys.stderr)
    if shutil.which("fuse-overlayfs") and os.path.exists("/dev/fuse") and root:
        out["fuse-overlayfs"] = fuse_overlayfs
    else:
        print("fuse-overlayfs: left out (apt-get install fuse-overlayfs; needs /dev/fuse and root here)",
              file=sys.stderr)
    if ldpfuse_run:
        out["ldpfuse"] = ldpfuse(ldpfuse_run, [])
        # the union off: every name through Python, as before native/vfs/union.c
        out["ldpfuse-union=no"] = ldpfuse(ldpfuse_run, ["-o", "union=no"])
        out["ldpfuse-embedded"] = ldpfuse(ldpfuse_run, ["--mode", "embedded"])
    else:
        print("ldpfuse: left out (ldpfuse-run not found: pip install .)", file=sys.stderr)
    if before:
        out["ldpfuse-before"] = ldpfuse(before, [])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--ldpfuse-run", default=shutil.which("ldpfuse-run"))
    ap.add_argument("--dir", default="/var/tmp", help="where the trees are made (default /var/tmp)")
    ap.add_argument("--configs", help="a comma-separated subset of the configurations (default: all that run)")
    ap.add_argument("--no-make", action="store_true",
                    help="leave the build out (its time is the compiler's): more rounds of the names' steps")
    ap.add_argument("--before", metavar="PATH",
                    help="another build's ldpfuse-run (configuration ldpfuse-before), compared in the same rounds")
    args = ap.parse_args()
    if args.before and not (os.path.isfile(args.before) and os.access(args.before, os.X_OK)):
        sys.exit(f"bench/overlay.py: --before {args.before}: not an executable file")
    global WORKLOAD
    if args.no_make:
        WORKLOAD = WORKLOAD.replace("make -s -j2 -C build > /dev/null", "true").replace(
            'test -x build/prog || { echo "no build/prog" >&2; exit 1; }\n', "")
    base = tempfile.mkdtemp(prefix="ldpfuse-overlay-bench-", dir=args.dir)
    os.chmod(base, 0o755)
    env = dict(os.environ, LC_ALL="C", GIT_CONFIG_NOSYSTEM="1", HOME=base)
    try:
        lower = os.path.join(base, "lower")
        make_lower(lower, args.files)
        configs = available(args.ldpfuse_run, args.before)
        if args.configs:
            wanted = args.configs.split(",")
            unknown = [c for c in wanted if c not in configs]
            if unknown:
                sys.exit(f"bench/overlay.py: --configs: {', '.join(unknown)} cannot run here "
                         f"(these can: {', '.join(configs)})")
            configs = {c: configs[c] for c in wanted}
        samples = {name: [] for name in configs}
        for r in range(args.rounds):
            for name, runner in configs.items():   # interleaved: every configuration each round
                rnd = Round(base, name)
                try:
                    samples[name].append(runner(lower, rnd, env))
                finally:
                    rnd.remove()
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        report(samples, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(samples, args):
    med = {name: [statistics.median(s[i] for s in runs) for i in range(len(STEPS))]
           for name, runs in samples.items()}
    print(f"overlay workload: {args.files} files + build/ (16 C files), medians of {args.rounds} "
          f"interleaved rounds, ms")
    print()
    print("| configuration | " + " | ".join(STEPS) + " | total |")
    print("|---|" + "---|" * (len(STEPS) + 1))
    for name, m in med.items():
        print(f"| {name} | " + " | ".join(f"{x:.1f}" for x in m) + f" | {sum(m):.1f} |")
    for ldp in ("ldpfuse", "ldpfuse-before", "ldpfuse-union=no", "ldpfuse-embedded"):
        if ldp not in med:
            continue
        for ref in ("kernel", "fuse-overlayfs"):
            if ref in med:
                ratios = [r / x for r, x in zip(med[ref], med[ldp])] + [sum(med[ref]) / sum(med[ldp])]
                print(f"| {ref} / {ldp} | " + " | ".join(f"x{r:.2f}" for r in ratios) + " |")
    if "ldpfuse" in med and "ldpfuse-before" in med:
        b, a = med["ldpfuse-before"], med["ldpfuse"]
        ratios = [x / y for x, y in zip(b, a)] + [sum(b) / sum(a)]
        print("| ldpfuse-before / ldpfuse | " + " | ".join(f"x{r:.2f}" for r in ratios) + " |")


if __name__ == "__main__":
    main()
