"""stdio on a cached file reads the file system as lazily as read() does
(docs/cache.md): a stream that only reads is filled by range as glibc's stdio
reads it (native/interpose/stdio_read.c), not whole at fopen.

tests/programs/stdio_reads.c reads a file written by another process through
every stdio read function (fread, fgets, getline, getdelim, fgetc, the getc
macro, fscanf, fgetwc, fseek) and prints what each read: the same as natively;
on "r" streams (cookie streams) and on "r+" ones (glibc's own, which
stdio_read.c fills before each read function).
A 2 GiB computed file's 300th line through fgets costs a few hundred KiB of
FS reads, not 2 GiB (`sed -n 300p` took 10.5 s and 2 GiB of memory before)."""

import sys

import pytest

from conftest import FS_FIXTURES, LOOPBACK, MEMORY, build_program, run_ldp

COMPUTED = f"{FS_FIXTURES / 'computed.py'}:Computed"

WRITE = r'''
set -eu
python3 - "$D/f" <<'PY'
import random, sys
random.seed(3)
text = "".join(random.choice("abcdefq \t") for _ in range(200000))
parts = []
for i in range(3000):
    n = random.choice([0, 1, 10, 80, 300, 5000, 70000]) if i % 97 else 200000
    at = random.randrange(200000 - n + 1)
    parts.append(text[at:at + n] + "\n")
with open(sys.argv[1], "w") as f:
    f.write("".join(parts)[:2_000_000])
PY
"$PROG" "$D/f"
"$PROG" "$D/f" r+
'''


@pytest.fixture(scope="module")
def stdio_reads(tmp_path_factory):
    return build_program(tmp_path_factory, "stdio_reads")


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "loopback-no-passthrough"])
def test_every_stdio_read_function_reads_what_natively(ws, stdio_reads, fs, options):
    # the memory example keeps its files in the process that serves them: one for both
    native, _ = ws.compare_sh(WRITE, fs=fs, options=options, env_extra={"PROG": stdio_reads}, timeout=120,
                              mode="shared" if fs == MEMORY else None)
    assert "ERROR" not in native.stdout and len(native.stdout.splitlines()) == 18


SEVERAL_LINES = r'''
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
from computed import expected
D, BIG = os.environ["D"], 2 << 30
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fgets.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
f = libc.fopen(f"{D}/big".encode(), b"r")
buf = ctypes.create_string_buffer(1 << 20)
libc.ftell.argtypes = [ctypes.c_void_p]
libc.ftell.restype = ctypes.c_long
lines, pos = 0, 0
while lines < 300:
    libc.fgets(buf, len(buf), f)
    end = libc.ftell(f)
    line = buf.raw[:end - pos]          # the bytes may hold NULs: ftell says how many
    assert line == expected(pos, end - pos, BIG), f"wrong bytes at {pos}"
    lines += line.endswith(b"\n")
    pos = end
libc.fclose(f)
calls, fetched = map(int, open(f"{D}/reads").read().split())
print("lines", lines, "fetched < 8 MiB:", fetched < 8 << 20)
'''


def test_300_lines_of_a_2gib_file_through_stdio_read_only_their_range(ws):
    script = ws.write_script("lines.py", SEVERAL_LINES)
    r = run_ldp(COMPUTED, [], [sys.executable, script, FS_FIXTURES], ws.mnt,
                env=ws.env(ws.mnt, ws.ldp_out), timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "lines 300 fetched < 8 MiB: True\n", r.describe()
