"""Programs whose allocator makes a system call while it starts: jemalloc (rustc, cargo,
many servers) calls syscall(SYS_open) from inside its first malloc, holding its init lock.
The preload's syscall() wrapper must answer that call without ld.so or malloc, or the
program hangs for ever, in both modes and whether or not it touches a mount."""

import os
import shutil
from pathlib import Path

import pytest

from conftest import LDP_MODE, MEMORY, build_program, need


@pytest.fixture(scope="module")
def jemalloc_reader(tmp_path_factory):
    if not any(Path(d, "libjemalloc.so").exists()
               for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib")):
        need("jemalloc-config")     # Debian's libjemalloc-dev has both
    return build_program(tmp_path_factory, "jemalloc_reader", "-ljemalloc")


def cargo():
    """cargo on PATH, or where rustup puts it."""
    found = shutil.which("cargo") or shutil.which(str(Path.home() / ".cargo/bin/cargo"))
    if found is None:
        need("cargo")
    return found


def build_note(root):
    (root / "note").write_text("first line\nsecond line\n")


def test_jemalloc_program_reads_file_in_mount_like_native(ws, jemalloc_reader):
    ws.populate(build_note)
    ws.compare(["sh", "-c", f'"{jemalloc_reader}" "$D/note"'])


def test_jemalloc_program_outside_mount_starts_like_native(ws, jemalloc_reader):
    """The first malloc is before any mount path is seen: the hang did not need one."""
    ws.compare(["sh", "-c", f'"{jemalloc_reader}" /dev/null; echo "rc $?"'], fs=MEMORY)


CARGO_SCRIPT = """
cd "$D"
"$CARGO" new -q --vcs none hello
cd hello
"$CARGO" build -q --offline
./target/debug/hello
ls target/debug/hello
"""


@pytest.mark.parametrize("fs", ["loopback", "memory"])
def test_cargo_builds_and_runs_crate_in_mount_like_native(ws, fs):
    """cargo and rustc are jemalloc programs; the crate, its target/ and the binary are in
    the mount. The memory file system keeps its files in one process: shared mode only."""
    if fs == "memory" and LDP_MODE == "embedded":
        pytest.skip("the memory example's files live in each process of the embedded mode, "
                    "so a file cargo writes is not there for rustc")
    spec = MEMORY if fs == "memory" else None
    # the workspace's HOME is empty: rustup's proxies find the toolchains by RUSTUP_HOME
    env = {"CARGO": cargo(), "PATH": f"{Path(cargo()).parent}:{os.environ['PATH']}",
           "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup"))}
    kw = {"fs": spec} if spec else {"tree_ignore": ("hello/target",)}
    ws.compare_sh(CARGO_SCRIPT, env_extra=env, timeout=120, **kw)
