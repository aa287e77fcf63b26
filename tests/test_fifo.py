"""FIFOs in a mount, in both modes: the kernel never calls a FUSE file system's open for a
FIFO node, it gives the node a pipe; here each one is a real FIFO (the shared server's, or
in the embedded mode the one in the command's FIFO directory) that the calling process
opens itself. So a signal ends an open that waits for a peer with EINTR, as natively
(tests/programs/fifo_open_alarm.c, the pattern of stress-ng's dup stressor), and two
processes, each with its own instance of the file system in the embedded mode, meet in
one pipe."""

import os
import subprocess

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, base_env, build_program, ldpfuse_run_argv


@pytest.fixture(scope="module")
def fifo_open_alarm(tmp_path_factory):
    return build_program(tmp_path_factory, "fifo_open_alarm")


def ldp(tmp_path, *fs, cmd, timeout=30):
    argv = ldpfuse_run_argv() + ["--mode", LDP_MODE, "--mountpoint", str(tmp_path / "mnt"),
                                 *map(str, fs), "--", *map(str, cmd)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), start_new_session=True)


def file_system(tmp_path, fs):
    if fs == "memory":
        if LDP_MODE == "embedded":
            pytest.skip("the memory example's tree lives in each process in the embedded mode: "
                        "a FIFO one process makes is not in another's")
        return (MEMORY,)
    lower = tmp_path / "lower"
    lower.mkdir()
    return (LOOPBACK, lower)


@pytest.mark.parametrize("fs", ["loopback", "memory"])
@pytest.mark.parametrize("end", ["r", "w"])
def test_a_signal_interrupts_the_open_of_a_fifo_with_no_peer(tmp_path, fifo_open_alarm, fs, end):
    native = tmp_path / "native"
    os.mkfifo(native)
    r = subprocess.run([fifo_open_alarm, native, end], capture_output=True, text=True, timeout=30)
    assert r.stdout == "EINTR handler ran yes\n"
    m = tmp_path / "mnt"
    r = ldp(tmp_path, *file_system(tmp_path, fs),
            cmd=["sh", "-c", f'mkfifo {m}/p && exec "$0" {m}/p {end}', fifo_open_alarm])
    assert (r.returncode, r.stdout) == (0, "EINTR handler ran yes\n"), r.stderr


@pytest.mark.parametrize("fs", ["loopback", "memory"])
def test_a_reader_and_a_writer_exchange_data_through_a_fifo(tmp_path, fs):
    """Two processes (in the embedded mode each runs the file system itself), either one
    first, then the same FIFO again after a rename: one pipe per node."""
    m = tmp_path / "mnt"
    r = ldp(tmp_path, *file_system(tmp_path, fs), cmd=["sh", "-c", f"""
        mkfifo {m}/p
        (seq 1 20000 > {m}/p) &
        cat {m}/p | tail -1
        wait
        cat {m}/p &
        sleep 0.3
        echo reader first > {m}/p
        wait
        mv {m}/p {m}/q
        (echo renamed > {m}/q) &
        cat {m}/q
        wait
        ls {m}
    """])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "20000\nreader first\nrenamed\nq\n", r.stderr


@pytest.mark.parametrize("fs", ["loopback", "memory"])
def test_a_fifo_opened_with_o_nonblock_and_no_reader_is_enxio(tmp_path, fs):
    m = tmp_path / "mnt"
    r = ldp(tmp_path, *file_system(tmp_path, fs), cmd=["python3", "-c", f"""
import os
os.mkfifo("{m}/p")
try:
    os.open("{m}/p", os.O_WRONLY | os.O_NONBLOCK)
except OSError as e:
    print(e.strerror)
fd = os.open("{m}/p", os.O_RDONLY | os.O_NONBLOCK)
print(os.read(fd, 10))
"""])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "No such device or address\nb''\n"


@pytest.fixture(scope="module")
def fifo_open_clone_race(tmp_path_factory):
    return build_program(tmp_path_factory, "fifo_open_clone_race")


def test_a_clone_racing_on_fd_numbers_neither_hangs_nor_breaks_the_fifo_open(tmp_path, fifo_open_clone_race):
    """stress-ng dup's race, 100 times: a clone sharing the fd table dup2()s over the next
    free fd (where the shared mode's new socket is born) while the FIFO opens."""
    m = tmp_path / "mnt"
    r = ldp(tmp_path, *file_system(tmp_path, "loopback"), timeout=120,
            cmd=[fifo_open_clone_race, m / "p", 100])
    assert (r.returncode, r.stdout) == (0, "100 eintr 100 hung 0 other 0\n"), r.stderr


def test_the_fifo_directory_of_the_command_is_gone_after_it(tmp_path):
    if LDP_MODE != "embedded":
        pytest.skip("the embedded mode's launcher makes it; the shared server keeps its own")
    m = tmp_path / "mnt"
    r = ldp(tmp_path, *file_system(tmp_path, "loopback"),
            cmd=["sh", "-c", f'mkfifo {m}/p && (echo x > {m}/p &) && cat {m}/p && '
                             f'echo "$LDPFUSE_FIFO_DIR" && ls "$LDPFUSE_FIFO_DIR" | wc -l'])
    assert r.returncode == 0, r.stderr
    got, where, count = r.stdout.split("\n")[:3]
    assert (got, count) == ("x", "1") and os.path.basename(where).startswith("fifos-")
    # in the command's private directory (docs/security.md), gone with it
    assert not os.path.exists(where) and not os.path.exists(os.path.dirname(where))
