"""Signals and the interposer (issue 4, item 7): a handler that touches the
mount while the interrupted code is inside a mount operation must neither
deadlock nor see errors.  tests/programs/signal_reentry.c, built natively."""


import pytest

from conftest import LOOPBACK, MEMORY, build_program


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
