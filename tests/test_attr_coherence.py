"""stat(path) after a change made through an fd shows the change at once, as the kernel
gives it under FUSE: tests/programs/attr_after_change.c loops 1,000 times per call
(ftruncate, pwrite, fallocate, fchmod, fchown, futimens), per open mode (O_RDONLY for the
attribute calls, O_RDWR for all) and with the fd closed before the second stat or still
open: stat, open, change, [close], stat. Its output natively is the reference.

The files are passthrough on the loopback and served (a page cache) on the loopback with
`passthrough=no` and on the memory example. In the child variant another process makes
the change and the first one stats after it, told by a pipe (never by wait(), which
forgets every answer): the shared mode's caches hear of every change at once; the
embedded mode's processes each have their own file system and hear of another's change
after attr_timeout (docs/processes-and-modes.md), so that variant is the shared mode's.
Data another process writes through a passthrough fd it has not closed yet is told at its
close (docs/passthrough.md): that case is left out of the child variant and pinned by its
own test, expected to fail until it is told at once as kernel FUSE tells it."""

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, build_program

N = 1000
# attr_timeout=30: an answer kept from before the change would still be used at the
# second stat, however slow the machine
LONG = {"attr_timeout": "30"}
CONFIGS = [(LOOPBACK, LONG), (LOOPBACK, {"passthrough": "no", **LONG}), (MEMORY, LONG)]
IDS = ["loopback-passthrough", "loopback-served", "memory"]


@pytest.fixture(scope="module")
def attr_after_change(tmp_path_factory):
    return build_program(tmp_path_factory, "attr_after_change")


@pytest.mark.parametrize("fs,options", CONFIGS, ids=IDS)
def test_stat_after_a_change_through_an_fd_shows_it(ws, attr_after_change, fs, options):
    native, _ = ws.compare(["sh", "-c", f'exec {attr_after_change} "$D" {N}'], fs=fs, options=options)
    assert native.stdout.endswith("done\n") and "stale" not in native.stdout, native.describe()


@pytest.mark.parametrize("fs,options", CONFIGS, ids=IDS)
def test_stat_after_another_process_changed_through_an_fd_shows_it(ws, attr_after_change, fs, options):
    if LDP_MODE == "embedded":
        pytest.skip("embedded mode: each process has its own file system and caches, and hears "
                    "of another's change after attr_timeout (docs/processes-and-modes.md)")
    native, _ = ws.compare(["sh", "-c", f'exec {attr_after_change} "$D" {N} child'], fs=fs, options=options)
    assert native.stdout.endswith("done\n") and "stale" not in native.stdout, native.describe()



def test_a_vfork_child_closing_a_passthrough_fd_leaves_its_parent_telling_changes(ws, attr_after_change):
    """A program that holds a read-only passthrough fd still vforks (dash running a script
    from the mount); the child's close of that fd is its own, and the parent's fchmod
    through it is still told."""
    ws.compare(["sh", "-c", f'exec {attr_after_change} "$D" 200 vfork'], fs=LOOPBACK, options=LONG)


@pytest.mark.parametrize("options", [
    pytest.param({"backing": "no", **LONG}, marks=pytest.mark.xfail(
        strict=True, reason="a passthrough file the class opened: its data written past the "
        "server is told to other processes at its last close (docs/passthrough.md), not at "
        "each write as kernel FUSE does")),
    LONG], ids=["class-opened", "backed"])
def test_data_another_process_writes_through_a_passthrough_fd_still_open(ws, attr_after_change, options):
    """On a backing tree (docs/backing.md) no process keeps a name's attributes, so another
    process sees data written through an fd still open at its next stat, as over FUSE."""
    if LDP_MODE == "embedded":
        pytest.skip("embedded mode: each process has its own file system and caches, and hears "
                    "of another's change after attr_timeout (docs/processes-and-modes.md)")
    ws.compare(["sh", "-c", f'exec {attr_after_change} "$D" 200 child-all'], fs=LOOPBACK, options=options)
