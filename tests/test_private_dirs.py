"""No directory another user can write, and no name another user can take first (issue
32): what ldpfuse keeps on disk for a run is in directories of the run's own, with random
names, and goes when the run has ended, however it ended.

  - the run directory of a launcher killed with kill -9 (which removes nothing) is removed
    by the next launcher of the same user that finds it (2e84571 left it in /tmp for good);
  - FsspecFS's spool has no fixed default name in the temporary directory: uid 65534 made
    `ldpfuse-fsspec-0` there first and root's mount could not start (2e84571: its
    PermissionError); now the spool is in the command's private directory.
"""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import LDP_MODE, MEMORY, NOBODY, base_env, ldpfuse_run_argv


def launch(mnt, fs, *fs_args, cmd):
    return ldpfuse_run_argv() + ["--mode", LDP_MODE, "--mountpoint", str(mnt), fs, *fs_args, "--", *cmd]


@pytest.fixture
def runtime_dir():
    """A private XDG_RUNTIME_DIR with a short path (a run directory's socket names must fit
    below it): run directories of the test's own, which no other launcher on the machine
    (the other mode's run of the suite) sweeps."""
    d = Path(tempfile.mkdtemp(prefix="ldp-"))
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_the_run_directory_of_a_killed_launcher_is_removed_by_the_next_one(tmp_path, runtime_dir):
    env = base_env(XDG_RUNTIME_DIR=str(runtime_dir))
    p = subprocess.Popen(launch(tmp_path / "mnt", MEMORY, cmd=["sh", "-c", 'echo "$LDPFUSE_RUN_DIR"; exec sleep 120']),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 60)
        assert ready, "the command never said where its run directory is"
        run_dir = p.stdout.readline().strip()
        assert run_dir.startswith(f"{runtime_dir}/"), (run_dir, p.poll() is not None and p.stderr.read())
        top = os.path.dirname(run_dir)
        os.kill(p.pid, signal.SIGKILL)      # the launcher: it removes nothing
        p.wait(timeout=30)
        time.sleep(0.2)
        assert os.path.isdir(top), "the killed launcher's directory should still be there"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)    # the command it left
        except ProcessLookupError:
            pass
    r = subprocess.run(launch(tmp_path / "mnt", MEMORY, cmd=["true"]), capture_output=True, text=True,
                       env=env, timeout=90)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(top), f"{top} is left after its launcher died and another ran"


def test_a_runtime_directory_too_deep_for_socket_names_is_passed_over(tmp_path):
    """A private XDG_RUNTIME_DIR whose path leaves no room for the run's socket names (a
    unix socket's name has 108 bytes) is passed over for /tmp: the supervisor's socket
    could not be bound there (2e84571..224ad69: a traceback, and no command)."""
    deep = tmp_path / ("d" * (110 - len(str(tmp_path))))
    deep.mkdir(mode=0o700)
    r = subprocess.run(launch(tmp_path / "mnt", MEMORY, cmd=["sh", "-c", 'echo "$LDPFUSE_RUN_DIR"']),
                       capture_output=True, text=True, env=base_env(XDG_RUNTIME_DIR=str(deep)), timeout=90)
    assert r.returncode == 0 and r.stdout.startswith("/tmp/ldpfuse-"), (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the name is taken first by another user (setpriv): needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_the_fsspec_spool_has_no_name_another_user_can_take_first(shared_tmp):
    pytest.importorskip("fsspec", reason="fsspec is not installed (pip install fsspec)")
    tmp = shared_tmp / "tmp"        # the temporary directory, as /tmp: sticky, everyone's
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    taken = tmp / f"ldpfuse-fsspec-{os.getuid()}"
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    "mkdir", "-m", "700", str(taken)], check=True)
    env = base_env(TMPDIR=tmp)
    env.pop("XDG_RUNTIME_DIR", None)    # the temporary directory would be the default
    m, store = shared_tmp / "mnt", shared_tmp / "store"
    store.mkdir()
    r = subprocess.run(launch(m, "ldpfuse_py.contrib.fsspec:FsspecFS", f"file://{store}",
                              cmd=["sh", "-c", f"echo written > {m}/f && cat {m}/f"]),
                       capture_output=True, text=True, env=env, timeout=120, cwd="/")
    assert (r.returncode, r.stdout) == (0, "written\n"), r.stderr
    assert (store / "f").read_text() == "written\n"
    assert os.listdir(taken) == [] and os.stat(taken).st_uid == NOBODY      # nothing of ours in it
