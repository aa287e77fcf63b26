"""Sanitizers on the cached path (docs/cache.md, "One cache per file") and on the shared
server (native/server/).

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
start-up fails), so its side of a call is not what is checked here.

The server is the extension module the launcher loads: it is built again with
ThreadSanitizer, and with AddressSanitizer + UndefinedBehaviorSanitizer, and the
sanitizer's runtime is preloaded into the launcher's Python (an uninstrumented
interpreter), which then serves many short processes, threads on cached files and
utimens with fractions of a second."""

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


def extension_sources():
    """setup.py's EXTENSION_SOURCES: the files of native/backend/ built into the extension
    module, not into libldpfuse.so (read from setup.py, so the two never disagree)."""
    import ast

    tree = ast.parse((NATIVE.parent / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXTENSION_SOURCES"
                                                for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no EXTENSION_SOURCES")


def preload_sources():
    """What setup.py builds into libldpfuse.so (all of native/ but the extension's files,
    setup.py's EXTENSION_SOURCES)."""
    out = []
    for d in ("", "vfs", "interpose", "backend"):
        for f in sorted((NATIVE / d).glob("*.c")):
            if f.name not in extension_sources():
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


# ---- the shared server (native/server/, in the extension module the launcher loads)

SERVER_SOURCES = [*(NATIVE / "backend" / f for f in extension_sources()),
                  *sorted((NATIVE / "server").glob("*.c"))]

# Many short processes (connections made and gone while the watcher watches them),
# threads of one process on cached files, and times set with fractions of a second
# (utimens carries struct timespec through the wire).
SERVER_WORK = r'''
set -u
"$PROG" "$D" || echo "cache_threads failed"
mkdir "$D/t"
for i in 1 2 3 4 5 6 7 8; do
    echo $i > "$D/t/f$i" &
    touch -d "2001-02-03 04:05:06.789" "$D/t/f$i" 2>/dev/null &
done
wait
for i in 1 2 3 4 5 6 7 8; do touch -m -d "2002-01-01 00:00:00.5" "$D/t/f$i"; done
for round in 1 2 3 4 5 6; do
    for i in $(seq 30); do cat "$D/t/f1" > /dev/null & done
    wait
done
stat -c %y "$D/t/f1"
cat "$D"/t/f* | wc -l
'''


def sanitizer_runtime(name):
    r = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True)
    path = r.stdout.strip()
    if r.returncode != 0 or not Path(path).is_absolute():
        pytest.skip(f"gcc has no {name}")
    return path


def build_server(site, sanitizer, out):
    """The extension module built again with -fsanitize=SANITIZER, into site's package."""
    include = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    objects = []
    for src in SERVER_SOURCES:
        obj = out / f"server_{src.stem}.o"
        r = subprocess.run(["gcc", "-c", f"-fsanitize={sanitizer}", "-g", "-O1", "-fPIC", "-fno-omit-frame-pointer",
                            "-D_GNU_SOURCE", "-pthread", "-fvisibility=hidden", f"-I{include}", "-w",
                            "-o", obj, src], capture_output=True, text=True)
        assert r.returncode == 0, f"{src}: {r.stderr}"
        objects.append(obj)
    module = next((site / "ldpfuse_py").glob("_embedded*.so"))
    r = subprocess.run(["gcc", "-shared", f"-fsanitize={sanitizer}", "-o", module, *objects, "-pthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def run_server(ws, site, program, fs, fs_args, options, env):
    launcher = [sys.executable, "-c",
                f"import sys; sys.path.insert(0, {str(site)!r}); "
                "from ldpfuse_py.cli import main; sys.exit(main())"]
    fs_args = [str(ws.lower) if a == "LOWER" else a for a in fs_args]
    script = ws.write_script("server_work.sh", SERVER_WORK)
    env = dict(env, D=str(ws.mnt), PROG=str(program))
    return run(launcher + ["--mode", "shared", "--mountpoint", ws.mnt, *options, fs, *fs_args,
                           "--", "sh", script], timeout=300, env=env, cwd=ws.tmp)


SERVER_FS = pytest.mark.parametrize("fs,fs_args,options", [
    (MEMORY, [], []),
    (LOOPBACK, ["LOWER"], ["-o", "passthrough=no"]),
], ids=["memory", "loopback-passthrough=no"])


@pytest.fixture(scope="module")
def tsan_server(tsan_build, tmp_path_factory):
    program, site = tsan_build
    build_server(site, "thread", tmp_path_factory.mktemp("tsan_server"))
    return program, site


@SERVER_FS
def test_server_is_thread_sanitizer_clean(ws, tsan_server, fs, fs_args, options):
    """The server's threads (accept, watcher, FS thread or one per connection) under
    ThreadSanitizer, loaded first into the launcher's Python; the clients run the
    instrumented preload library too."""
    program, site = tsan_server
    env = base_env(LD_PRELOAD=sanitizer_runtime("libtsan.so"),
                   TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0")
    r = run_server(ws, site, program, fs, fs_args, options, env)
    assert "WARNING: ThreadSanitizer" not in r.stderr, r.describe()
    assert r.returncode == 0 and r.stdout == "ok\n2002-01-01 00:00:00.500000000 +0000\n8\n", r.describe()


@pytest.fixture(scope="module")
def ubsan_asan_server(tmp_path_factory):
    """The installed package, its extension module built with -fsanitize=address,undefined."""
    need("gcc")
    if not NATIVE.is_dir():
        pytest.skip("the native sources are not beside the tests (an installed copy of the tests)")
    out = tmp_path_factory.mktemp("asan_server")
    where = subprocess.run([sys.executable, "-c", "import ldpfuse_py; print(ldpfuse_py.__file__)"],
                           capture_output=True, text=True, cwd=out, env=base_env())
    assert where.returncode == 0, where.stderr
    shutil.copytree(Path(where.stdout.strip()).parent, out / "site" / "ldpfuse_py",
                    ignore=shutil.ignore_patterns("__pycache__"))
    build_server(out / "site", "address,undefined", out)
    program = out / "cache_threads"
    r = subprocess.run(["gcc", "-O1", "-pthread", "-o", program, THREADS_SOURCE], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return program, out / "site"


@SERVER_FS
def test_server_is_address_and_undefined_behaviour_sanitizer_clean(ws, ubsan_asan_server, fs, fs_args, options):
    """The server under AddressSanitizer and UndefinedBehaviorSanitizer (a misaligned
    struct timespec read in utimens was one), loaded first into the launcher's Python.
    The command's processes run the plain preload library, with the sanitizer's runtime
    after it in LD_PRELOAD (verify_asan_link_order=0): their own code is not checked."""
    program, site = ubsan_asan_server
    env = base_env(LD_PRELOAD=sanitizer_runtime("libasan.so"),
                   ASAN_OPTIONS="detect_leaks=0 halt_on_error=0 verify_asan_link_order=0",
                   UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=0")
    r = run_server(ws, site, program, fs, fs_args, options, env)
    assert "runtime error" not in r.stderr and "ERROR: AddressSanitizer" not in r.stderr, r.describe()
    assert r.returncode == 0 and r.stdout == "ok\n2002-01-01 00:00:00.500000000 +0000\n8\n", r.describe()
