"""Page caches kept past their last close are bounded by RLIMIT_NOFILE as well as by memory,
and an open that meets EMFILE lets go of them and is tried again (issue 31, item 4: under
`ulimit -n 256`, 400 files written through a loopback with `passthrough=no` left the
shared server with no fd for the next open). Real shells and programs, in both modes; the
limit is set before ldpfuse-run, so the server (shared) or the process (embedded) has it."""

import shlex
import sys

import pytest

from conftest import LOOPBACK, base_env, ldpfuse_run_argv
from conftest import run as run_in_session


def run_limited(tmp_path, mode, script):
    lower = tmp_path / "lower"
    lower.mkdir()
    argv = ldpfuse_run_argv() + ["--mode", mode, "--mountpoint", str(tmp_path / "mnt"),
                                 LOOPBACK, str(lower), "-o", "passthrough=no", "--", "bash", "-c", script]
    limited = f"ulimit -n 256 && exec {shlex.join(argv)}"
    return run_in_session(["bash", "-c", limited], timeout=240, env=base_env())


WRITE_400 = "for i in $(seq 400); do echo $i > {m}/f$i || exit 3; done"


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_400_files_written_under_ulimit_256_leave_room_for_the_next_opens(tmp_path, mode):
    m = tmp_path / "mnt"
    script = (WRITE_400.format(m=m) +
              f"; cat {m}/f* | wc -l; echo late > {m}/late && cat {m}/late")
    r = run_limited(tmp_path, mode, script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["400", "late"], r.stderr
    assert (tmp_path / "lower" / "late").read_text() == "late\n"


def test_an_open_that_meets_emfile_lets_go_of_idle_caches_and_succeeds(tmp_path):
    # 100 files held open at once after 400 were written and read: the shared server then
    # holds 100 caches and the class's 100 lower fds; with its idle caches too it meets
    # EMFILE, and must let them go rather than fail the open. (The embedded mode keeps no
    # idle cache; there a process holding a file open pays its own fds for it, the
    # program's, the cache's memfd and the class's lower file.)
    mode = "shared"
    m = tmp_path / "mnt"
    hold = (f"{sys.executable} -c \"import sys; fs = [open(f'{m}/f{{i}}') for i in range(1, 101)]; "
            f"print(sum(int(f.read()) for f in fs))\"")
    script = WRITE_400.format(m=m) + f"; cat {m}/f* > /dev/null && {hold}"
    r = run_limited(tmp_path, mode, script)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{sum(range(1, 101))}\n", r.stderr
