"""Signals and the interposer (issue 4, item 7): a handler that touches the
mount while the interrupted code is inside a mount operation must neither
deadlock nor see errors.  tests/programs/signal_reentry.c, built natively."""


import shutil

import pytest

from conftest import LDP_MODE, LOOPBACK, LOOPBACK_BACKING, MEMORY, build_program


@pytest.fixture(scope="module")
def signal_reentry(tmp_path_factory):
    return build_program(tmp_path_factory, "signal_reentry")


# Natively the program takes well under a second.
PROBE_TIMEOUT = 20


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_signal_handler_touching_mount_during_mount_calls(ws, signal_reentry, fs, options):
    native, _ = ws.compare(["sh", "-c", f'exec {signal_reentry} "$D"'], fs=fs,
                           options=options, check_tree=False,
                           timeout=PROBE_TIMEOUT)
    assert "handler ran yes" in native.stdout


@pytest.fixture(scope="module")
def dirs_reentry(tmp_path_factory):
    return build_program(tmp_path_factory, "dirs_reentry", libs=("-lpthread",))


@pytest.mark.parametrize("handler", ["stat", "open"])
def test_signal_handler_touching_mount_while_threads_use_many_directories(ws, dirs_reentry, handler):
    """The backed loopback's kept directories (vfs/backing_dirs.c, no lock: an entry's
    users count is its lock) replaced all the time by 4 threads working in 300
    directories, under a limit of 600 fds (a table of 64), while a SIGALRM handler stats
    (and opens) a file in one of them: no deadlock, no failed call, natively and under
    the mount alike."""
    if handler == "open" and (LDP_MODE == "embedded" or LOOPBACK_BACKING == "no"):
        pytest.skip("a handler's open() of a file with an fd table entry (vfs/file.c "
                    "vfile_new: calloc) deadlocks when it interrupts malloc on its own "
                    "thread; only the backed tree, which keeps no entry, is safe")
    for _ in range(3):
        native, _ = ws.compare(["sh", "-c", f'ulimit -n 600 && exec {dirs_reentry} "$D" {handler}'],
                               check_tree=False, timeout=PROBE_TIMEOUT * 3)
        assert "loop failures 0" in native.stdout
        assert "handler ran yes, handler failures 0" in native.stdout


@pytest.fixture(scope="module")
def thread_exits(tmp_path_factory):
    return build_program(tmp_path_factory, "thread_exits", libs=("-lpthread",))


def test_signal_handler_touching_mount_while_threads_end(ws, thread_exits):
    """A thread that ends frees its malloc caches with signals open, holding its arena's
    lock, after its Python thread state is gone from view: a SIGALRM handler that stats a
    file in the mount there (every 100 us, while 4 threads that each stat it and fill their
    caches are started and joined 400 times) called the class in the embedded mode, whose
    new thread state (calloc) waited forever for that lock. With no attribute cache, every
    stat reaches the file system: no deadlock, no failed call, natively and under the mount
    alike (backend/embedded.c thread_ending)."""
    for _ in range(2):
        native, _ = ws.compare(["sh", "-c", f'exec {thread_exits} "$D"'], options={"attr_timeout": "0"},
                               check_tree=False, timeout=PROBE_TIMEOUT * 3)
        assert "loop failures 0" in native.stdout
        assert "handler ran yes, handler failures 0" in native.stdout


@pytest.fixture(scope="module")
def handler_names(tmp_path_factory):
    return build_program(tmp_path_factory, "handler_names")


def test_signal_handler_changing_names_while_the_program_changes_names(ws, handler_names):
    """The backed loopback's opens, creates, closes, renames, unlinks, mkdirs and rmdirs
    run with signals open (vfs/backing.c CLASS): a SIGALRM handler fired every 50 us that
    itself stats, opens, reads, creates, renames and unlinks files and makes and removes a
    directory in the mount, while the main loop does the same to its own names, must
    neither deadlock (the timeout) nor fail a call nor leave another tree than natively.
    In the embedded mode and with -o backing=no an open allocates an fd table entry
    (vfs/file.c vfile_new: calloc), which a handler's open deadlocks on when it interrupts
    malloc on its own thread: there the handler only stats."""
    what = "stat" if LDP_MODE == "embedded" or LOOPBACK_BACKING == "no" else "names"
    for _ in range(2):
        native, _ = ws.compare(["sh", "-c", f'exec {handler_names} "$D" {what}'],
                               timeout=PROBE_TIMEOUT * 3)
        assert "loop failures 0, listings ok" in native.stdout
        assert "handler ran yes, handler failures 0" in native.stdout
        for d in (ws.native, ws.lower):      # the next round starts from an empty tree
            shutil.rmtree(d / "sub")


def test_signal_handler_stats_merged_names_while_threads_use_many_directories(tmp_path, dirs_reentry):
    """The overlay's stat of a merged name blocks no signal (vfs/union.c
    union_getattr_here; its kept directories take no lock): the program above in the
    merged directory of examples/overlay.py, its SIGALRM handler stat()ing a merged name
    while 4 threads stat, create and unlink in 300 directories, each a kept directory
    replaced all the time under a limit of 600 fds: no deadlock, no failed call, the
    native counts. The union is the shared mode's, whatever LDPFUSE_TEST_MODE says."""
    from conftest import EXAMPLES, run_ldp, run_native
    native_dir, lower, upper, merged = (tmp_path / n for n in ("native", "lower", "upper", "merged"))
    for d in (native_dir, lower, upper):
        d.mkdir()
    cmd = ["sh", "-c", f'ulimit -n 600 && exec {dirs_reentry} "$0" stat']
    native = run_native([*cmd, str(native_dir)], timeout=PROBE_TIMEOUT * 3)
    assert native.returncode == 0, native.describe()
    assert "handler ran yes, handler failures 0" in native.stdout
    ldp = run_ldp(f"{EXAMPLES / 'overlay.py'}:Overlay", [lower, upper], [*cmd, str(merged)], merged,
                  mode="shared", timeout=PROBE_TIMEOUT * 9)
    assert ldp.returncode == 0, ldp.describe()
    assert ldp.stdout == native.stdout, ldp.describe()
