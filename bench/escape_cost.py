#!/usr/bin/env python3
"""What the safety net (--watch-escapes, docs/escapes.md) costs, on paths outside any mount.

Builds a small C program that times, in one process, N calls of each kind:

  libc-stat    stat() through libc on a file outside the mount (what every program does)
  libc-open    open()+close() through libc on that file
  libc-getppid getppid through libc's syscall() (the kernel's entry and exit alone)
  inline-stat  newfstatat made with an inline `syscall` instruction (Go's runtime, liburing)
  inline-getppid  getppid made inline (a call that names no file)

  dlopen       dlopen()+dlclose() of a library by its path, already loaded (what the
               dlopen wrapper's look for liburing adds to)

and runs it natively, under ldpfuse-run, and under ldpfuse-run --watch-escapes, in
interleaved rounds (native, preload, net, native, ...). With liburing-dev installed, a
fourth column: the same program linked with liburing, which it never calls (the net is
put up for liburing's inline ring calls, docs/escapes.md). Prints the median ns per call
of each and the difference against native.

    python3 bench/escape_cost.py [--rounds 7] [--calls 200000] [--mode shared|embedded]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long raw4(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *path = argv[1];
    long n = atol(argv[2]), i;
    struct stat st;
    double t;
    t = now(); for (i = 0; i < n; i++) stat(path, &st);
    printf("libc-stat %.1f\n", (now() - t) / n);
    t = now(); for (i = 0; i < n; i++) close(open(path, O_RDONLY));
    printf("libc-open %.1f\n", (now() - t) / n);
    t = now(); for (i = 0; i < n; i++) syscall(SYS_getppid);
    printf("libc-getppid %.1f\n", (now() - t) / n);
    long m = n / 20 + 1;    /* trapped calls are slow: fewer of them */
    t = now(); for (i = 0; i < m; i++) raw4(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, 0);
    printf("inline-stat %.1f\n", (now() - t) / m);
    t = now(); for (i = 0; i < m; i++) raw4(SYS_getppid, 0, 0, 0, 0);
    printf("inline-getppid %.1f\n", (now() - t) / m);
    void *keep = dlopen(argv[3], RTLD_NOW);
    if (keep == NULL)
        return 1;
    t = now(); for (i = 0; i < m; i++) dlclose(dlopen(argv[3], RTLD_NOW));
    printf("dlopen %.1f\n", (now() - t) / m);
    return 0;
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--mode", choices=["shared", "embedded"], default="shared")
    args = ap.parse_args()
    run = shutil.which("ldpfuse-run") or os.path.join(os.path.dirname(sys.executable), "ldpfuse-run")
    here = os.path.dirname(os.path.abspath(__file__))
    loop = os.path.join(here, "..", "examples", "loopback.py") + ":Loopback"
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "escape_cost.c"), os.path.join(tmp, "escape_cost")
        with open(src, "w") as f:
            f.write(SOURCE)
        subprocess.run(["gcc", "-O2", "-o", exe, src], check=True)
        uring_exe = exe + "-liburing"
        with_liburing = os.path.exists("/usr/include/liburing.h") and subprocess.run(
            ["gcc", "-O2", "-o", uring_exe, src, "-Wl,--no-as-needed", "-luring"]).returncode == 0
        target = os.path.join(tmp, "outside")
        with open(target, "w") as f:
            f.write("x")
        lower = os.path.join(tmp, "lower")
        os.mkdir(lower)
        library = "/lib/x86_64-linux-gnu/libz.so.1"
        if not os.path.exists(library):
            library = "/lib/x86_64-linux-gnu/libm.so.6"
        cmd = [exe, target, str(args.calls), library]
        pre = [run, "--mode", args.mode, "--mountpoint", os.path.join(tmp, "mnt"), loop, lower, "--"]
        configs = {"native": cmd, "preload": pre + cmd,
                   "preload+net": pre[:1] + ["--watch-escapes"] + pre[1:] + cmd}
        if with_liburing:
            configs["preload+liburing"] = pre + [uring_exe] + cmd[1:]
        env = dict(os.environ)
        env.pop("LDPFUSE_ESCAPES", None)
        samples = {c: {} for c in configs}
        for _ in range(args.rounds):
            for name, argv in configs.items():
                out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout
                for line in out.splitlines():
                    wl, ns = line.split()
                    samples[name].setdefault(wl, []).append(float(ns))
    med = {c: {wl: statistics.median(v) for wl, v in s.items()} for c, s in samples.items()}
    print(f"ns per call, medians of {args.rounds} interleaved rounds (--mode {args.mode})\n")
    uring = "preload+liburing" in med
    print("| call | native | preload | preload + net | net's cost over preload |"
          + (" preload, liburing mapped | its cost over preload |" if uring else ""))
    print("|---|---|---|---|---|" + ("---|---|" if uring else ""))
    for wl in med["native"]:
        n, p, w = med["native"][wl], med["preload"][wl], med["preload+net"][wl]
        line = f"| {wl} | {n:.1f} | {p:.1f} ({p - n:+.1f}) | {w:.1f} ({w - n:+.1f}) | {w - p:+.1f} |"
        if uring:
            u = med["preload+liburing"][wl]
            line += f" {u:.1f} ({u - n:+.1f}) | {u - p:+.1f} |"
        print(line)


if __name__ == "__main__":
    main()
