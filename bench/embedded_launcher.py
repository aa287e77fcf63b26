"""What the embedded mode's launcher costs a whole run, now that it stays as the command's
parent to serve the processes that cannot run the file system themselves
(docs/processes-and-modes.md): it forks the command and listens, and builds its own
instance of the class only when such a process connects.

    python3 bench/embedded_launcher.py [--rounds 15] LABEL=PATH/TO/ldpfuse-run [LABEL=...]

Times whole `ldpfuse-run --mode embedded` runs of a loopback mount (launcher start to
exit, as a shell script sees them) for each ldpfuse-run given (give an older install's to
compare), in interleaved rounds; prints medians in ms. Rows: a command that never touches
the mount (`true`), one process that runs the file system itself (`cat`), and, as root
with setpriv, the same `cat` as uid 65534 (served by the launcher when it cannot read the
interpreter). The last row is what serving from the start would add to every run: building
the launcher's instance (shared_mode.build) and starting the server, timed in a fresh
interpreter of each install. Compare installs in venvs that hold the same packages (the
embedded interpreter's sys.path is the venv's).
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
sys.path.insert(0, HERE)
from installs import parse as installs_parse, print_medians  # noqa: E402

LOOPBACK = os.path.join(os.path.dirname(HERE), "examples", "loopback.py") + ":Loopback"

BUILD = r'''
import os, socket, sys, time
from ldpfuse_py import cli, shared_mode
env = dict(os.environ, LDPFUSE_MOUNTPOINTS=sys.argv[1], LDPFUSE_NMOUNTS="1",
           LDPFUSE_FS_0=sys.argv[2], LDPFUSE_FS_0_ARGS=sys.argv[3], LDPFUSE_FS_0_OPTS="")
listener = shared_mode.listen(env)
t = time.perf_counter()
shared_mode.serve(listener, shared_mode.build(env))
print((time.perf_counter() - t) * 1e3)
'''


def timed(argv, env):
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, env=env, timeout=120, cwd="/")
    ms = (time.perf_counter() - t) * 1e3
    return ms if r.returncode == 0 else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("installs", nargs="+", metavar="LABEL=LDPFUSE_RUN")
    a = p.parse_args()
    installs = installs_parse(a.installs)
    work = tempfile.mkdtemp(prefix="ldpfuse-launcher-", dir="/var/tmp")
    os.chmod(work, 0o755)
    lower, mnt = os.path.join(work, "lower"), os.path.join(work, "mnt")
    os.mkdir(lower)
    os.chmod(lower, 0o755)
    with open(os.path.join(lower, "f"), "wb") as f:
        f.write(os.urandom(4096))
    os.chmod(os.path.join(lower, "f"), 0o644)
    env = dict(os.environ)
    rows = {"true (no mount access)": ["true"], "cat (runs the FS itself)": ["cat", f"{mnt}/f"]}
    if os.geteuid() == 0 and shutil.which("setpriv"):
        rows["cat as uid 65534 (served by the launcher)"] = [
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", f"{mnt}/f"]
    times = {(r, label): [] for r in rows for label, _ in installs}
    build = {label: [] for label, _ in installs}
    try:
        for _ in range(a.rounds):
            for label, run in installs:
                for row, cmd in rows.items():
                    ms = timed([run, "--mode", "embedded", "--mountpoint", mnt, LOOPBACK, lower, "--", *cmd], env)
                    if ms is not None:
                        times[(row, label)].append(ms)
                python = os.path.join(os.path.dirname(run), "python")
                r = subprocess.run([python, "-c", BUILD, mnt, LOOPBACK, lower], capture_output=True,
                                   text=True, env=env, timeout=120, cwd="/")
                if r.returncode == 0:
                    build[label].append(float(r.stdout.split()[-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"median of {a.rounds} interleaved rounds, ms per whole run ('failed': the command failed)")
    width = print_medians(rows, installs, times, a.rounds, 1)
    cells = [(f"{statistics.median(build[label]):.2f}" if build[label] else "n/a").rjust(14)
             for label, _ in installs]
    print("building the launcher's instance".ljust(width) + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
