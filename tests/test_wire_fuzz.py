"""The wire-protocol fuzzer (tests/wire_fuzz.py) against a real shared-mode server, as root
and as uid 65534 (-o allow_other), served by the FS thread (the memory example) and by a
thread per connection (the same class declared thread_safe), for LDPFUSE_FUZZ_SECONDS
each (default 7, 28 s in all: issue 22 asks for a bounded run in CI). Meanwhile a victim process of root reads its own file in a
loop. The server must never crash nor hang: every request the fuzzer does not lose its
connection for is answered, the victim's every read is right, and the command's exit status
stays the command's own (a crashed launcher made it 139).

A failure prints the seed (LDPFUSE_FUZZ_SEED replays it)."""

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MEMORY, NOBODY, base_env, ldpfuse_run_argv

FUZZER = Path(__file__).resolve().parent / "wire_fuzz.py"
SECONDS = float(os.environ.get("LDPFUSE_FUZZ_SECONDS", "7"))
THREAD_SAFE = f"{Path(__file__).resolve().parent / 'programs' / 'thread_safe_memory.py'}:ThreadSafeMemory"
# the fuzzer needs only the standard library, and an interpreter uid 65534 may run
FUZZ_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

VICTIM = """
import sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
n = wrong = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    with open(path) as f:
        wrong += f.read() != "victim\\n"
    n += 1
    time.sleep(0.02)
print("victim", n, wrong)
"""


@pytest.mark.parametrize("fs", [MEMORY, THREAD_SAFE], ids=["fs_thread", "thread_per_connection"])
@pytest.mark.parametrize("who", ["root", "nobody"])
def test_the_server_survives_random_and_mutated_requests(shared_tmp, who, fs):
    if who == "nobody" and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        pytest.skip("fuzzing as uid 65534 needs root and setpriv")
    seed = int(os.environ.get("LDPFUSE_FUZZ_SEED", random.randrange(1 << 30)))
    m = shared_tmp / "mnt"
    victim = shared_tmp / "victim.py"
    victim.write_text(VICTIM)
    fuzz = ["env", "-u", "LD_PRELOAD", FUZZ_PYTHON, str(FUZZER), str(SECONDS), str(seed), "/fz"]
    options = []
    if who == "nobody":
        fuzz = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + fuzz
        options = ["-o", "allow_other"]
    script = (f"mkdir {m}/fz && chmod 777 {m}/fz && echo victim > {m}/victim && "
              f"{{ {' '.join(fuzz)} & }}; {sys.executable} {victim} {m}/victim {SECONDS}; wait $!; "
              f"echo fuzzer $?; cat {m}/victim; exit 3")
    argv = ldpfuse_run_argv() + ["--mode", "shared", *options, "--mountpoint", str(m), fs, "--",
                                 "sh", "-c", script]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS * 4 + 120, env=base_env(), cwd="/")
    report = f"seed {seed}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert r.returncode == 3, report
    assert "fuzzer 0" in r.stdout.splitlines(), report
    summary = re.search(r"^fuzz requests (\d+) answered (\d+) dropped (\d+) hellos (\d+)$", r.stdout, re.M)
    assert summary, report
    requests, answered = int(summary[1]), int(summary[2])
    assert requests > 100 and answered > requests // 2, report
    (v,) = re.findall(r"^victim (\d+) (\d+)$", r.stdout, re.M)
    assert int(v[0]) > 10 and v[1] == "0", report
    assert r.stdout.endswith("victim\n"), report
