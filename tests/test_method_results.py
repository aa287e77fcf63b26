"""What a method's result becomes (docs/operations.md, "Results"), with a file
system whose methods answer outside the rules (tests/fs_fixtures/hostile.py):
an errno outside 1..4095, ints past any C type, the wrong type, listings that are
a string or a dict or hold impossible names, and exceptions that are not
Exceptions (SystemExit, BaseException, KeyboardInterrupt). Each gives the caller
EIO and the log one line naming the method; a real -errno stays what it is; the
host and the shared launcher go on serving."""

import pytest

from conftest import FS_FIXTURES, LDP_MODE, run_ldp

HOSTILE = f"{FS_FIXTURES / 'hostile.py'}:Hostile"

PROBE = r'''
import errno, os, sys
D = os.environ["D"]
def show(what, f):
    try:
        r = f()
        print(what, "ok", sorted(r) if isinstance(r, list) else r)
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))
for w in [w for w in sys.argv[1].split(",") if w]:
    show("mkdir " + w, lambda: os.mkdir(f"{D}/ret_{w}"))
    show("unlink " + w, lambda: os.unlink(f"{D}/ret_{w}"))
    show("chmod " + w, lambda: os.chmod(f"{D}/ret_{w}", 0o600))
    show("open " + w, lambda: os.close(os.open(f"{D}/ret_{w}", os.O_RDONLY)))
for w in ["str", "bytes", "dict", "ints", "slash", "nul", "empty", "none", "good"]:
    show("readdir " + w, lambda: os.listdir(f"{D}/d_{w}"))
    show("listxattr " + w, lambda: os.listxattr(f"{D}/x_{w}"))
show("still serving", lambda: os.listdir(D))
'''

BAD_INTS_AND_TYPES = ["m5000", "mhuge", "huge", "str", "float", "list"]
RAISES = ["exit", "base"] + (["kbd"] if LDP_MODE == "shared" else [])


def probe(ws, results):
    script = ws.write_script("probe.py", PROBE)
    log = ws.tmp / "ldpfuse.log"
    r = run_ldp(HOSTILE, [], ["python3", script, ",".join(results)], ws.mnt, log_file=log,
                env=ws.env(ws.mnt, ws.ldp_out), timeout=60)
    assert r.returncode == 0, r.describe()
    return r.stdout.splitlines(), log.read_text()


def test_out_of_range_ints_and_wrong_types_are_eio_with_a_log_line(ws):
    lines, log = probe(ws, BAD_INTS_AND_TYPES + ["enospc"])
    for w in BAD_INTS_AND_TYPES:
        for op in ("mkdir", "unlink", "chmod", "open"):
            assert f"{op} {w} EIO" in lines, (op, w, lines)
    for op in ("mkdir", "unlink", "chmod", "open"):
        assert f"{op} enospc ENOSPC" in lines        # fusepy's -errno convention holds
    assert "unlink(/ret_m5000) returned -5000, not -errno (1..4095): EIO" in log
    assert "mkdir(/ret_mhuge) returned an int out of range: EIO" in log
    assert "chmod(/ret_str) returned str, expected None or an int status: EIO" in log
    assert "still serving ok ['ok']" in lines


def test_listings_that_are_not_lists_of_names_are_eio(ws):
    lines, log = probe(ws, [])
    for w in ["str", "bytes", "dict", "ints", "nul", "empty", "none"]:
        assert f"readdir {w} EIO" in lines
        assert f"listxattr {w} EIO" in lines
    assert "readdir slash EIO" in lines     # a name with '/': kernel FUSE answers EIO
    assert "listxattr slash ok ['.', '..', 'a/b', 'ok']" in lines   # an xattr name may hold '/'
    assert "readdir good ok ['ok']" in lines
    assert "readdir(/d_slash) returned a name with '/': EIO" in log
    assert "listxattr(/x_dict) returned dict, expected a list of names: EIO" in log


def test_base_exceptions_raised_by_methods_end_neither_host_nor_launcher(ws):
    """SystemExit, BaseException and (in the shared launcher, where it can only be the
    file system's own) KeyboardInterrupt: EIO, a traceback in the log, and the mount
    still serves. In the embedded mode a Python program's KeyboardInterrupt is handed
    back to it (a Ctrl-C during the call): test_kbd_in_a_non_python_host covers it."""
    lines, log = probe(ws, RAISES)
    for w in RAISES:
        for op in ("mkdir", "unlink", "chmod", "open"):
            assert f"{op} {w} EIO" in lines, (op, w, lines)
    assert "mkdir('/ret_base') raised, the caller gets EIO" in log
    assert lines[-1] == "still serving ok ['ok']"


def test_keyboard_interrupt_raised_by_a_method_in_a_non_python_host_is_eio(ws):
    log = ws.tmp / "ldpfuse.log"
    r = run_ldp(HOSTILE, [], ["sh", "-c", 'mkdir "$D/ret_kbd"; echo "mkdir: $?"; ls "$D"'], ws.mnt,
                log_file=log, env=ws.env(ws.mnt, ws.ldp_out), timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "mkdir: 1\nok\n", r.describe()
    assert "Input/output error" in r.stderr
    assert "mkdir('/ret_kbd') raised, the caller gets EIO" in log.read_text()
