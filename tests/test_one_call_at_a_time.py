"""A class that is not thread_safe is called one operation at a time, in both modes (issue
24: "a class that is not thread-safe still runs one call at a time"), as fusepy's
FUSE(nothreads=True) calls it; a thread_safe one is called from several threads at once.
In the embedded mode every thread of the program calls the process's own instance: under
the GIL alone, their calls would interleave wherever a method lets go of it."""

import sys

import pytest

from conftest import FS_FIXTURES, base_env, ldpfuse_run_argv
from conftest import run as run_in_session

OVERLAP = FS_FIXTURES / "overlap.py"

THREADS = """
import sys, threading
m = sys.argv[1]
ts = [threading.Thread(target=lambda i=i: open(f"{m}/f{i}").read()) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(open(f"{m}/most").read(), end="")
"""

# a fork while another thread is inside a slow read: the child's own calls must not wait
# for a thread it does not have
FORK_DURING_CALL = """
import os, sys, threading, time
m = sys.argv[1]
t = threading.Thread(target=lambda: open(f"{m}/f0").read())
t.start()
time.sleep(0.05)
pid = os.fork()
if pid == 0:
    os._exit(0 if open(f"{m}/f1").read() == "x\\n" else 1)
_, status = os.waitpid(pid, 0)
t.join()
print(os.waitstatus_to_exitcode(status))
"""

# the same, while the other thread is still starting the file system (SlowStart's
# __init__ takes 1 s): in the embedded mode the child has neither that thread nor the
# loader's lock it holds, and must not wait for them (issue 31, item 6)
FORK_DURING_START = FORK_DURING_CALL.replace("time.sleep(0.05)", "time.sleep(0.3)")


def run(tmp_path, cls, mode, program):
    argv = ldpfuse_run_argv() + ["--mode", mode, "--mountpoint", str(tmp_path / "mnt"),
                                 f"{OVERLAP}:{cls}", "--", sys.executable, "-c", program, str(tmp_path / "mnt")]
    return run_in_session(argv, timeout=60, env=base_env())     # a hang kills the whole group


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_class_that_is_not_thread_safe_is_called_one_operation_at_a_time(tmp_path, mode):
    r = run(tmp_path, "Overlap", mode, THREADS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\n", r.stderr


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_thread_safe_class_is_called_from_several_threads_at_once(tmp_path, mode):
    r = run(tmp_path, "OverlapThreadSafe", mode, THREADS)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 1, r.stdout + r.stderr


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_child_forked_while_another_thread_is_in_a_call_can_call_at_once(tmp_path, mode):
    r = run(tmp_path, "Overlap", mode, FORK_DURING_CALL)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0\n", r.stderr


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_a_child_forked_while_another_thread_starts_the_file_system_can_call_at_once(tmp_path, mode):
    r = run(tmp_path, "SlowStart", mode, FORK_DURING_START)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0\n", r.stderr
