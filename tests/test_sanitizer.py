"""Thread sanitizer on the cached path (docs/cache.md, "One cache per file").

The preload library is built again from native/ with gcc's -fsanitize=thread, put into
a copy of the installed package, and tests/programs/cache_threads.c (threads opening,
writing, reading, renaming and closing cached files at once), built with the sanitizer
too, runs under it. Any report from ThreadSanitizer fails the test.

The wrappers (native/interpose/) and the libc resolver (native/real.c) are built without
instrumentation: the sanitizer's runtime calls mmap, open and read while it starts, before
instrumented code may run, and those calls land in our wrappers. The VFS core, the page
cache and the clients of the backends, where the threads meet, are instrumented.

The clients run in the shared mode: the embedded mode starts CPython inside the
instrumented process, which this build of the sanitizer cannot host (the interpreter's
start-up fails), so its side of a call is not what is checked here."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LOOPBACK, MEMORY, REPO, base_env, need, run

NATIVE = REPO / "native"
THREADS_SOURCE = Path(__file__).resolve().parent / "programs" / "cache_threads.c"
TSAN_FLAGS = ["-fsanitize=thread", "-g", "-O1", "-fPIC", "-fno-optimize-sibling-calls",
              "-D_GNU_SOURCE", "-pthread", "-w"]


def preload_sources():
    """What setup.py builds into libldpfuse.so (all of native/ but the extension's files,
    setup.py's EXTENSION_SOURCES)."""
    out = []
    for d in ("", "vfs", "interpose", "backend"):
        for f in sorted((NATIVE / d).glob("*.c")):
            if f.name not in ("embedded.c", "server.c", "signal_forward.c"):
                out.append(f)
    return out


@pytest.fixture(scope="module")
def tsan_build(tmp_path_factory):
    need("gcc")
    if not NATIVE.is_dir():
        pytest.skip("the native sources are not beside the tests (an installed copy of the tests)")
    out = tmp_path_factory.mktemp("tsan")
    program = out / "cache_threads"
    r = subprocess.run(["gcc", *TSAN_FLAGS, "-o", program, THREADS_SOURCE], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"gcc cannot build with -fsanitize=thread here: {r.stderr.strip()[-300:]}")
    alone = subprocess.run([program, "/nonexistent"], capture_output=True, text=True)
    if "ThreadSanitizer" in alone.stderr and "FATAL" in alone.stderr:
        pytest.skip(f"ThreadSanitizer cannot run on this machine: {alone.stderr.strip()[-300:]}")
    objects = []
    for src in preload_sources():
        rel = src.relative_to(NATIVE)
        plain = rel.parts[0] == "interpose" or rel.name == "real.c"
        flags = [f for f in TSAN_FLAGS if f != "-fsanitize=thread"] if plain else TSAN_FLAGS
        obj = out / ("_".join(rel.parts) + ".o")
        r = subprocess.run(["gcc", "-c", *flags, "-o", obj, src], capture_output=True, text=True)
        assert r.returncode == 0, f"{src}: {r.stderr}"
        objects.append(obj)
    # the installed package (the checkout's ldpfuse_py/ has no built modules)
    where = subprocess.run([sys.executable, "-c", "import ldpfuse_py; print(ldpfuse_py.__file__)"],
                           capture_output=True, text=True, cwd=out, env=base_env())
    assert where.returncode == 0, where.stderr
    package = out / "site" / "ldpfuse_py"
    shutil.copytree(Path(where.stdout.strip()).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run(["gcc", "-shared", "-fsanitize=thread", "-o", package / "libldpfuse.so",
                        *objects, "-ldl", "-pthread"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return program, out / "site"


@pytest.mark.parametrize("fs,fs_args,options", [
    (MEMORY, [], []),
    (LOOPBACK, ["LOWER"], ["-o", "passthrough=no"]),
], ids=["memory", "loopback-passthrough=no"])
def test_threads_on_cached_files_are_thread_sanitizer_clean(ws, tsan_build, fs, fs_args, options):
    program, site = tsan_build
    fs_args = [str(ws.lower) if a == "LOWER" else a for a in fs_args]
    launcher = [sys.executable, "-c",
                f"import sys; sys.path.insert(0, {str(site)!r}); "
                "from ldpfuse_py.cli import main; sys.exit(main())"]
    env = base_env(TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0")
    r = run(launcher + ["--mode", "shared", "--mountpoint", ws.mnt, *options, fs, *fs_args,
                        "--", program, ws.mnt], timeout=300, env=env, cwd=ws.tmp)
    assert "WARNING: ThreadSanitizer" not in r.stderr, r.describe()
    assert r.returncode == 0 and r.stdout == "ok\n", r.describe()
