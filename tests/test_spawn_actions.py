"""posix_spawn()/posix_spawnp() file actions that open paths in a mount: glibc
runs them in the child with private system calls, so native/interpose/spawn.c
opens them in the parent and hands the child dup2 actions in their place.
tests/programs/spawn_actions.c (built natively) spawns cat, wc and sh with
stdin, stdout and stderr on mount files, a relative path after a chdir
action, dup2 and close actions around an open, and opens that must fail;
Python's os.posix_spawn with file_actions is in test_processes.py."""


import pytest

from conftest import LOOPBACK, MEMORY, build_program


@pytest.fixture(scope="module")
def spawn_actions(tmp_path_factory):
    return build_program(tmp_path_factory, "spawn_actions")


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_posix_spawn_opens_stdio_on_mount_files_as_native(ws, spawn_actions, fs, options):
    native, _ = ws.compare(["sh", "-c", f'exec {spawn_actions} "$D"'], fs=fs, options=options,
                           mode="shared" if fs == MEMORY else None)
    assert "wc -l of a relative path after chdir: exit 0" in native.stdout
    assert native.stdout.endswith("done\n")
