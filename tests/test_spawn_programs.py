"""Programs stored in the mount started with posix_spawn and posix_spawnp (CPython's
os.posix_spawn*, what test_posix_spawnp does): glibc's child runs a private execve that
no wrapper sees, so the program is found (posix_spawnp's search of PATH entries in the
mount) and handed to the kernel before the spawn."""

import sys

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY

SPAWN = r'''
import os, shutil, stat, sys
D = os.environ["D"]
os.makedirs(f"{D}/bin", exist_ok=True)
with open(f"{D}/bin/greet", "w") as f:
    f.write('#!/bin/sh\necho "greet $0 $*"\n')
shutil.copy("/bin/echo", f"{D}/bin/say")
for name in ("greet", "say"):
    os.chmod(f"{D}/bin/{name}", 0o755)
with open(f"{D}/bin/plain", "w") as f:
    f.write("not executable\n")
env = dict(os.environ, PATH=f"{D}/bin:" + os.environ["PATH"])

def spawn(how, prog, *args):
    try:
        pid = how(prog, [prog, *args], env)
        print(how.__name__, prog.replace(D, "$D"), "status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
    except OSError as e:
        print(how.__name__, prog.replace(D, "$D"), "error", e.errno, flush=True)

spawn(os.posix_spawnp, "greet", "a", "b")
spawn(os.posix_spawnp, "say", "c")
spawn(os.posix_spawn, f"{D}/bin/greet", "d")
spawn(os.posix_spawn, f"{D}/bin/say", "e")
spawn(os.posix_spawnp, "plain")
spawn(os.posix_spawn, f"{D}/bin/plain")
spawn(os.posix_spawnp, "no-such-program")
spawn(os.posix_spawnp, "true")
os.chdir(D)
spawn(os.posix_spawn, "bin/greet", "relative")
'''


@pytest.mark.parametrize("fs", [pytest.param(LOOPBACK, id="loopback"), pytest.param(MEMORY, id="memory")])
def test_posix_spawn_and_spawnp_run_programs_stored_in_mount_like_native(ws, fs):
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the memory example's files live in each process of the embedded mode: "
                    "the spawned child would not see what its parent wrote")
    ws.compare_py(SPAWN, fs=fs)
