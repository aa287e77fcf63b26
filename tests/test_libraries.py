"""Programs linked against libraries stored in the mount: DT_NEEDED found through
$ORIGIN (RUNPATH) or LD_LIBRARY_PATH is opened by ld.so itself, before any wrapper is in
place, so the exec hands ld.so those libraries (an LD_AUDIT library, only for such an
exec). The program in the mount, or outside it with LD_LIBRARY_PATH into the mount,
runs as natively; its children inherit nothing of it."""

import sys

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, need

LINKED = r"""
cd "$D"
mkdir -p lib
printf 'const char *greeting(void) { return "hello from libgreet"; }\n' > greet.c
printf 'const char *greeting(void);\nconst char *twice(void) { return greeting(); }\n' > twice.c
cat > app.c <<'C'
#include <stdio.h>
#include <stdlib.h>
const char *twice(void);
int main(void) {
    puts(twice());
    fflush(stdout);
    return system("env | grep -c -e LD_AUDIT -e LDPFUSE_LIBRARY_FDS");
}
C
gcc -shared -fPIC -o lib/libgreet.so greet.c
gcc -shared -fPIC -o lib/libtwice.so twice.c -Llib -lgreet -Wl,-rpath,'$ORIGIN'
gcc -o lib/app app.c -Llib -ltwice -Wl,-rpath,'$ORIGIN'
gcc -o app2 app.c -Llib -ltwice -Wl,-rpath-link,lib
./lib/app || echo "rpath: status $?"
LD_LIBRARY_PATH="$D/lib" ./app2 || echo "library path: status $?"
cp app2 "$O/app3"
LD_LIBRARY_PATH="$D/lib" "$O/app3" || echo "outside: status $?"
./app2 2>&1 | sed 's/^[^:]*: //' || true
cd "$O"    # outside the mount: Python's subprocess gets the real vfork
"$PY" -c 'import os, subprocess, sys
sys.exit(subprocess.run([os.environ["O"] + "/app3"],
                        env=dict(os.environ, LD_LIBRARY_PATH=os.environ["D"] + "/lib")).returncode)' \
    || echo "python subprocess: status $?"
"""


@pytest.mark.parametrize("fs", [pytest.param(LOOPBACK, id="loopback"), pytest.param(MEMORY, id="memory")])
def test_program_linked_against_libraries_in_mount_runs_like_native(ws, fs):
    need("gcc")
    if fs == MEMORY and LDP_MODE == "embedded":
        pytest.skip("the memory example's files live in each process of the embedded mode: "
                    "what gcc writes is not there for the next process")
    ws.compare_sh(LINKED, fs=fs, env_extra={"PY": sys.executable})
