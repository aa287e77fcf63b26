#!/usr/bin/env python3
"""What the supervisor (the default; docs/supervisor.md) costs.

1. Per call, in a statically linked C program (the kind the supervisor exists for),
   N calls of each kind, timed inside the program:

     getppid       a call the filter lets through (no path: never trapped)
     stat-outside  stat() of a file outside the mount: trapped, read, compared, continued
     open-outside  open()+close() of that file (the open trapped, the close not)
     stat-mount    stat() of a file in the mount: trapped and served (memory.py)

   natively (no ldpfuse: the mount's call fails with ENOENT, timed all the same) and under
   ldpfuse-run (which supervises it), in interleaved rounds; medians in ns per call.

2. A `make` of a small C project outside the mount (a generated one: N .c files, a
   header each, one program), from clean, natively, under ldpfuse-run, and under
   ldpfuse-run with every process supervised (LDPFUSE_SUPERVISE=all: the launcher's
   command and so all its descendants carry the filter; none touches the mount), in
   interleaved rounds; medians of wall time and the ratios.

    python3 bench/supervise_cost.py [--rounds 7] [--calls 20000] [--files 16] [--mode shared|embedded]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *outside = argv[1], *inside = argv[3];
    long n = atol(argv[2]), i;
    struct stat st;
    double t;
    t = now(); for (i = 0; i < n; i++) getppid();
    printf("getppid %.1f\n", (now() - t) / n);
    t = now(); for (i = 0; i < n; i++) stat(outside, &st);
    printf("stat-outside %.1f\n", (now() - t) / n);
    t = now(); for (i = 0; i < n; i++) close(open(outside, O_RDONLY));
    printf("open-outside %.1f\n", (now() - t) / n);
    t = now(); for (i = 0; i < n; i++) stat(inside, &st);
    printf("stat-mount %.1f\n", (now() - t) / n);
    return 0;
}
"""


def ldpfuse_run():
    beside = os.path.join(os.path.dirname(sys.executable), "ldpfuse-run")
    return [beside] if os.path.exists(beside) else [sys.executable, "-m", "ldpfuse_py.cli"]


def parse(out):
    return {k: float(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}


def project(d, files):
    """A small C project: `files` units with a header each, and a Makefile."""
    os.makedirs(d)
    for i in range(files):
        with open(f"{d}/u{i}.h", "w") as f:
            f.write(f"#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\nint u{i}(int);\n")
        with open(f"{d}/u{i}.c", "w") as f:
            f.write(f'#include "u{i}.h"\nint u{i}(int x) {{ char b[64]; snprintf(b, sizeof b, "%d", x);'
                    f" return (int)strlen(b) + x * {i + 1}; }}\n")
    with open(f"{d}/main.c", "w") as f:
        f.write("".join(f'#include "u{i}.h"\n' for i in range(files)))
        f.write("int main(void) { int s = 0;\n" + "".join(f"  s += u{i}(s);\n" for i in range(files)) +
                '  printf("%d\\n", s); return 0; }\n')
    objs = " ".join(f"u{i}.o" for i in range(files))
    with open(f"{d}/Makefile", "w") as f:
        f.write(f"prog: main.o {objs}\n\t$(CC) -o $@ $^\n%.o: %.c %.h\n\t$(CC) -O1 -c $<\n"
                f"main.o: main.c\n\t$(CC) -O1 -c $<\nclean:\n\trm -f prog *.o\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--mode", default="shared")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="supervise-cost-")
    try:
        exe = os.path.join(tmp, "calls")
        with open(exe + ".c", "w") as f:
            f.write(SOURCE)
        r = subprocess.run(["gcc", "-static", "-O2", "-o", exe, exe + ".c"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gcc -static failed (libc.a?): {r.stderr}")
        outside = os.path.join(tmp, "outside")
        open(outside, "w").close()
        mnt = os.path.join(tmp, "mnt")
        memory = os.path.join(ROOT, "examples", "memory.py") + ":Memory"
        launcher = ldpfuse_run() + ["--mode", a.mode, "--mountpoint", mnt]
        env = dict(os.environ)
        env.pop("LDPFUSE_SUPERVISE", None)
        calls = {"native": [], "supervised": []}
        for _ in range(a.rounds):
            for name in calls:
                # the mount's file is made by the same process first (memory.py starts empty)
                prog = [exe, outside, str(a.calls), f"{mnt}/f"]
                if name == "native":
                    cmd = prog
                else:
                    cmd = launcher + [memory, "--", "/bin/busybox", "sh", "-c",
                                      f'echo x > {mnt}/f && exec "$@"', "sh", *prog]
                    if not shutil.which("busybox"):
                        cmd = launcher + [memory, "--", "sh", "-c",
                                          f'echo x > {mnt}/f && exec "$@"', "sh", *prog]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
                if out.returncode != 0:
                    sys.exit(f"{name}: {out.stderr}")
                calls[name].append(parse(out.stdout))
        print(f"per call, ns (median of {a.rounds} rounds, {a.calls} calls each, --mode {a.mode})")
        print(f"{'call':<14}{'native':>10}{'supervised':>12}{'difference':>12}")
        for key in ("getppid", "stat-outside", "open-outside", "stat-mount"):
            nat = statistics.median(r[key] for r in calls["native"])
            sup = statistics.median(r[key] for r in calls["supervised"])
            note = "  (native: ENOENT)" if key == "stat-mount" else ""
            print(f"{key:<14}{nat:>10.1f}{sup:>12.1f}{sup - nat:>+12.1f}{note}")

        src = os.path.join(tmp, "project")
        project(src, a.files)
        times = {"native": [], "ldpfuse": [], "supervised-all": []}
        for _ in range(a.rounds):
            for name in times:
                subprocess.run(["make", "-s", "-C", src, "clean"], check=True, capture_output=True)
                cmd = ["make", "-s", "-C", src]
                env_run = dict(env)
                if name != "native":
                    cmd = launcher + [memory, "--"] + cmd
                if name == "supervised-all":
                    env_run["LDPFUSE_SUPERVISE"] = "all"
                t = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, env=env_run, timeout=600)
                times[name].append(time.perf_counter() - t)
                if out.returncode != 0:
                    sys.exit(f"make ({name}): {out.stderr}")
        nat = statistics.median(times["native"])
        ldp = statistics.median(times["ldpfuse"])
        print()
        print(f"make of {a.files + 1} C files from clean, s (median of {a.rounds} rounds)")
        print(f"{'run':<16}{'median':>9}{'vs native':>11}{'vs ldpfuse':>12}")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:<16}{m:>9.3f}{m / nat:>10.3f}x{m / ldp:>11.3f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
