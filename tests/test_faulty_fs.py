"""A buggy method in the user's file system: the caller gets EIO (Python
OSError errno 5), the log gets a line naming the method, and the host
program goes on and exits normally."""

import re
import sys

import pytest

from conftest import FS_FIXTURES, run_ldp

PROBE = r'''
import errno, os, sys
D = os.environ["D"]

def attempt(what, fn):
    try:
        fn()
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))

def read(name):
    with open(f"{D}/{name}", "rb") as f:
        return f.read()

attempt("stat boom", lambda: os.stat(f"{D}/boom"))
attempt("read boom", lambda: read("boom"))
attempt("listdir", lambda: os.listdir(D))
attempt("read f", lambda: read("f"))
print("host still running")
'''

CASES = [
    # (class, the line of the probe that must fail with EIO, method named in the log)
    ("GetattrRaisesValueError", "stat boom", "getattr"),
    ("ReadRaisesValueError", "read boom", "read"),
    ("ReaddirRaisesRuntimeError", "listdir", "readdir"),
    ("ReadReturnsStr", "read boom", "read"),
    ("GetattrReturnsNone", "stat boom", "getattr"),
]


@pytest.mark.parametrize("cls,failing,method", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("log_to", ["stderr", "log-file"])
def test_faulty_method_gives_eio_and_log_names_method(ws, cls, failing, method, log_to):
    probe = ws.write_script("probe.py", PROBE)
    log_file = ws.tmp / "ldpfuse.log" if log_to == "log-file" else None
    r = run_ldp(f"{FS_FIXTURES / 'faulty.py'}:{cls}", [], [sys.executable, probe],
                ws.mnt, log_file=log_file, cwd=ws.tmp,
                env=ws.env(ws.mnt, ws.ldp_out))
    assert r.returncode == 0, r.describe()
    lines = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines()
                 if line != "host still running")
    assert lines[failing] == "EIO", r.describe()
    # The methods that are not broken keep working.
    assert lines["read f"] == "ok", r.describe()
    if failing != "listdir":
        assert lines["listdir"] == "ok", r.describe()
    assert r.stdout.rstrip().endswith("host still running"), r.describe()
    log = log_file.read_text() if log_file else r.stderr
    assert re.search(rf"\b{method}\b", log), \
        f"the log does not name {method!r}:\n{log}\n{r.describe()}"
    if log_file:
        assert "Traceback" not in r.stderr, \
            "with --log-file the traceback goes to the file, not stderr"
