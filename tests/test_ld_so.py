"""ld.so is never handed a mount path it would open itself (issue 35): the kernel does not
see the mount, so each such open or stat is answered ENOENT by luck (or by a real
directory under the mount point). Each program runs under `strace -f -e trace=%file`,
natively and in the mount: the outputs must be the same, and in the mount no system call
may name a mount path, but the exec of a program stored there (execve/execveat, made by
the exec wrapper with the path as argv[0]).

- a program in the mount with an $ORIGIN RPATH, and one with an absolute RUNPATH into the
  mount (a build tree's), run directly, from a shell and by posix_spawn;
- LD_LIBRARY_PATH into the mount when the libraries are the system's (cargo's
  target/debug/deps), and a program outside the mount whose libraries are there; the
  program sees LD_LIBRARY_PATH as it was given;
- `cargo build` of a small crate with a build script in the mount;
- dlopen with RTLD_NOLOAD of a library in the mount, before and after it is loaded.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, need

FS = [pytest.param(LOOPBACK, id="loopback"), pytest.param(MEMORY, id="memory")]

# The trace of each run, beside (not in) its $O: the trees of $O are compared.
TRACE = 'strace -f -e trace=%file -o "$O/../trace-$(basename "$O").txt"'


def skip_embedded_memory(fs):
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the memory example's files live in each process of the embedded mode: "
                    "what gcc writes is not there for the next process")


def mount_lines(ws):
    """The lines of the mount run's trace that name the mount point, but its execs."""
    trace = ws.tmp / f"trace-{ws.ldp_out.name}.txt"
    assert trace.exists(), "strace wrote no trace"
    mnt = str(ws.mnt)
    return [line for line in trace.read_text(errors="replace").splitlines()
            if mnt in line and "execve(" not in line and "execveat(" not in line]


def assert_no_mount_path(ws):
    lines = mount_lines(ws)
    assert not lines, (f"{len(lines)} system calls named a mount path, e.g.:\n" +
                       "\n".join(lines[:15]))


BUILD = r"""
cd "$D"
mkdir -p lib deps
printf 'const char *greeting(void) { return "hello from libgreet"; }\n' > greet.c
printf 'const char *greeting(void);\nconst char *twice(void) { return greeting(); }\n' > twice.c
printf '#include <stdio.h>\nconst char *twice(void);\nint main(void) { puts(twice()); return 0; }\n' > app.c
gcc -shared -fPIC -o lib/libgreet.so greet.c
gcc -shared -fPIC -o lib/libtwice.so twice.c -Llib -lgreet -Wl,-rpath,'$ORIGIN'
gcc -o lib/app app.c -Llib -ltwice -Wl,-rpath,'$ORIGIN'
gcc -o lib/app_abs app.c -Llib -ltwice -Wl,-rpath,"$D/lib"
gcc -o app_path app.c -Llib -ltwice -Wl,-rpath-link,lib
cp app_path "$O/app_outside"
"""

RUN = BUILD + TRACE + r""" bash -c '
./lib/app || echo "origin: status $?"
"$D/lib/app" || echo "origin, absolute: status $?"
./lib/app_abs || echo "absolute runpath: status $?"
(cd lib && ./app) || echo "origin from its directory: status $?"
"$PY" -c "import os, sys
pid = os.posix_spawn(\"$D/lib/app\", [\"app\"], dict(os.environ))
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))" || echo "posix_spawn: status $?"
LD_LIBRARY_PATH="$D/deps:$D/nothere:deps" /bin/true || echo "system libraries: status $?"
LD_LIBRARY_PATH="$D/deps" ls "$D/deps" || echo "ls: status $?"
LD_LIBRARY_PATH="$D/deps:/usr/lib" bash -c "echo \"LD_LIBRARY_PATH=\$LD_LIBRARY_PATH\"; env | grep -c -e LDPFUSE_LIBRARY -e LD_AUDIT"
LD_LIBRARY_PATH="$D/lib" ./app_path || echo "library path: status $?"
LD_LIBRARY_PATH="$D/lib" "$O/app_outside" || echo "outside: status $?"
LD_LIBRARY_PATH="$D/deps" "$PY" -c "import os, sys
pid = os.posix_spawn(\"/bin/echo\", [\"echo\", \"spawned\"], dict(os.environ))
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))" || echo "posix_spawn echo: status $?"
'
"""


@pytest.mark.parametrize("fs", FS)
def test_programs_and_library_paths_in_mount_keep_ld_so_out(ws, fs):
    need("gcc", "strace")
    skip_embedded_memory(fs)
    native, _ = ws.compare_sh(RUN, fs=fs, env_extra={"PY": sys.executable},
                              tree_ignore=("lib/app_abs",))    # its RUNPATH names $D
    assert native.stdout.count("hello from libgreet") == 7, native.stdout
    assert_no_mount_path(ws)


NOLOAD = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    void *before = dlopen(argv[1], RTLD_LAZY | RTLD_NOLOAD);
    const char *err = dlerror();
    printf("before: %s, error: %s\n", before ? "loaded" : "not loaded", err ? "yes" : "none");
    void *h = dlopen(argv[1], RTLD_LAZY);
    if (h == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    const char *(*greeting)(void) = (const char *(*)(void))dlsym(h, "greeting");
    puts(greeting());
    void *again = dlopen(argv[1], RTLD_LAZY | RTLD_NOLOAD);
    printf("again: %s\n", again == h ? "the same" : again ? "another" : "not loaded");
    if (again)
        dlclose(again);
    dlclose(h);
    void *missing = dlopen(argv[2], RTLD_LAZY | RTLD_NOLOAD);
    printf("missing: %s\n", missing ? "loaded" : "not loaded");
    err = dlerror();
    printf("missing: %s\n", err ? err : "no error");
    printf("then: %s\n", dlerror() ? "an error" : "no error");
    void *bare = dlopen(argv[2], RTLD_LAZY);
    printf("missing, loaded: %s, %s\n", bare ? "loaded" : "not loaded", dlerror());
    return 0;
}
"""


@pytest.mark.parametrize("fs", FS)
def test_dlopen_rtld_noload_of_a_library_in_mount(ws, fs):
    need("gcc", "strace")
    skip_embedded_memory(fs)
    (ws.tmp / "noload.c").write_text(NOLOAD)
    script = r"""
cd "$D"
printf 'const char *greeting(void) { return "hello from libgreet"; }\n' > greet.c
gcc -shared -fPIC -o libgreet.so greet.c
gcc -o "$O/noload" "$T/noload.c" -ldl
""" + TRACE + r' "$O/noload" "$D/libgreet.so" "$D/nothere.so"' + "\n"
    native, _ = ws.compare_sh(script.replace("$T", str(ws.tmp)), fs=fs)
    assert "before: not loaded, error: none" in native.stdout, native.stdout
    assert "again: the same" in native.stdout, native.stdout
    assert_no_mount_path(ws)


def cargo():
    found = shutil.which("cargo") or shutil.which(str(Path.home() / ".cargo" / "bin" / "cargo"))
    if found is None:
        pytest.skip("cargo is not installed (neither on PATH nor in ~/.cargo/bin): "
                    "the cargo build in the mount is not run")
    return found


CRATE = r"""
mkdir -p "$D/crate/src"
cd "$D/crate"
printf '[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n' > Cargo.toml
printf 'fn main() { println!("cargo:rerun-if-changed=build.rs"); }\n' > build.rs
printf 'fn main() { println!("hello from tiny"); }\n' > src/main.rs
""" + TRACE + r""" cargo build -q --offline
./target/debug/tiny
cargo run -q --offline
"""


@pytest.mark.parametrize("fs", FS)
def test_cargo_build_in_mount_keeps_ld_so_out(ws, fs):
    need("strace")
    found = cargo()
    skip_embedded_memory(fs)
    home = Path.home()
    env = {
        "PATH": f"{Path(found).parent}:{os.environ['PATH']}",
        "CARGO_HOME": os.environ.get("CARGO_HOME", str(home / ".cargo")),
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(home / ".rustup")),
        "CARGO_TERM_COLOR": "never",
    }
    native, _ = ws.compare_sh(CRATE, fs=fs, env_extra=env, check_tree=False, timeout=300)
    assert native.stdout.count("hello from tiny") == 2, native.stdout
    assert_no_mount_path(ws)
