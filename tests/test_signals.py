"""Signals and the interposer (issue 4, item 7): a handler that touches the
mount while the interrupted code is inside a mount operation must neither
deadlock nor see errors.  tests/programs/signal_reentry.c, built natively."""

from pathlib import Path

import pytest

from conftest import LOOPBACK, MEMORY, need, run_native

SOURCE = Path(__file__).resolve().parent / "programs" / "signal_reentry.c"


@pytest.fixture(scope="module")
def signal_reentry(tmp_path_factory):
    need("gcc")
    exe = tmp_path_factory.mktemp("bin") / "signal_reentry"
    r = run_native(["gcc", "-O1", "-Wall", "-o", exe, SOURCE])
    assert r.returncode == 0, r.describe()
    return exe


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
