"""The page cache of files the FS serves itself (docs/cache.md): filled lazily by
range, written through to the FS at write(), bounded against lying read()s, shared by
every thread of a process.

Most tests run a file system fixture (tests/fs_fixtures/computed.py) whose bytes are
computed, so a 2 GiB file costs nothing to serve and every range can be checked."""

import sys

import pytest

from conftest import FS_FIXTURES, LOOPBACK, MEMORY, build_program, need, run_ldp, run_native

sys.path.insert(0, str(FS_FIXTURES))
from computed import PATTERN, ProcStyle, expected  # noqa: E402

COMPUTED = f"{FS_FIXTURES / 'computed.py'}"
BIG = 2 << 30


def ldp(ws, cls, cmd, **kw):
    return run_ldp(f"{COMPUTED}:{cls}", [], cmd, ws.mnt, cwd=ws.tmp,
                   env=ws.env(ws.mnt, ws.ldp_out), **kw)


PARTIAL_READS = r'''
import os, random, sys
sys.path.insert(0, sys.argv[1])
from computed import expected
D, BIG = os.environ["D"], 2 << 30
fd = os.open(f"{D}/big", os.O_RDONLY)
random.seed(7)
for _ in range(100):
    off = random.randrange(BIG - 5000)
    n = random.choice([1, 64, 4096])
    assert os.pread(fd, n, off) == expected(off, n, BIG), (off, n)
os.lseek(fd, BIG - 100, os.SEEK_SET)
assert os.read(fd, 4096) == expected(BIG - 100, 100, BIG)
assert os.read(fd, 4096) == b""
os.close(fd)
with open(f"{D}/big", "rb") as f:     # Python's buffered reader: read() and readinto()
    assert f.read(100) == expected(0, 100, BIG)
    f.seek(1 << 30)
    assert f.read(10) == expected(1 << 30, 10, BIG)
calls, fetched = map(int, open(f"{D}/reads").read().split())
print("fetched MiB", fetched >> 20)
assert fetched < 64 << 20, f"{fetched} bytes read from the FS for ~400 KiB asked"
print("ok")
'''


def test_partial_reads_of_a_2gib_file_fetch_only_the_ranges_read(ws):
    probe = ws.write_script("probe.py", PARTIAL_READS)
    r = ldp(ws, "Computed", [sys.executable, probe, FS_FIXTURES], timeout=60)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.describe()


@pytest.mark.parametrize("cmd,offset", [("head -c 100", 0), ("tail -c 100", BIG - 100)],
                         ids=["head", "tail"])
def test_head_and_tail_of_a_2gib_file_give_its_bytes(ws, cmd, offset):
    r = ldp(ws, "Computed", ["sh", "-c", f'{cmd} "$D/big" | od -An -tx1'], timeout=60)
    want = run_native(["od", "-An", "-tx1"], input=expected(offset, 100, BIG))
    assert r.returncode == 0, r.describe()
    assert r.stdout == want.stdout, r.describe()


def test_a_read_that_returns_more_than_asked_is_cut_and_logged(ws):
    size = 3 << 20
    r = ldp(ws, "Liar", ["sh", "-c", 'cat "$D/big" | md5sum; head -c 10 "$D/small" | od -An -tx1'],
            options={"size": size}, timeout=60)
    want = run_native(["md5sum"], input=expected(0, size, size))
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines()[0] == want.stdout.strip(), r.describe()
    assert "returned" in r.stderr and "read(/" in r.stderr, r.describe()


def test_a_read_that_ignores_offset_ends_at_the_files_size(ws):
    size = 1 << 20
    r = ldp(ws, "IgnoresOffset", ["sh", "-c", 'cat "$D/big" | wc -c'],
            options={"size": size}, timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.stdout.strip() == str(size), r.describe()


def test_a_file_with_st_size_0_is_read_to_the_fs_end(ws):
    probe = ws.write_script("probe.py", 'import os\n'
                            'print(len(open(os.environ["D"] + "/status", "rb").read()))\n')
    r = ldp(ws, "ProcStyle", ["sh", "-c", f'cat "$D/status" | md5sum; wc -l < "$D/status"; '
                                          f'head -n 2 "$D/status"; "{sys.executable}" {probe}'])
    want = run_native(["md5sum"], input=ProcStyle.DATA)
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == [want.stdout.strip(), "1000", "line 00000", "line 00001",
                                     str(len(ProcStyle.DATA))], r.describe()


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_echo_into_a_full_fs_fails_at_write(ws, shell):
    need(shell)
    r = ldp(ws, "Full", [shell, "-c", 'echo hi > "$D/f"'])
    assert r.returncode != 0, r.describe()
    assert "No space left on device" in r.stderr or "I/O error" in r.stderr, r.describe()


def test_python_write_on_a_full_fs_raises_enospc(ws):
    probe = ws.write_script("probe.py", r'''
import errno, os
fd = os.open(os.environ["D"] + "/f", os.O_WRONLY | os.O_CREAT, 0o644)
try:
    os.write(fd, b"hello")
    print("write succeeded")
except OSError as e:
    print(errno.errorcode[e.errno])
os.close(fd)
''')
    r = ldp(ws, "Full", [sys.executable, probe])
    assert r.returncode == 0 and r.stdout == "ENOSPC\n", r.describe()


APPENDS = """
for w in 1 2 3 4; do
    ( for i in $(seq 1 50); do echo "$w $i" >> "$D/log"; done ) &
done
wait
wc -l < "$D/log"
for w in 1 2 3 4; do grep -c "^$w " "$D/log"; done
sort -n -k1 -k2 "$D/log" | md5sum
"""

# The memory example keeps its files in one process: only --mode shared gives the
# four writers one file. The loopback shares its lower directory in either mode.
APPEND_CASES = [(MEMORY, {}, "shared"), (LOOPBACK, {"passthrough": "no"}, None)]
# one process: the memory example in the suite's mode too
ONE_PROCESS = [(LOOPBACK, {"passthrough": "no"}, None), (MEMORY, {}, None)]
ONE_PROCESS_IDS = ["no-passthrough", "memory"]


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_appends_from_four_shell_processes_keep_every_line(ws, shell, fs, options, mode):
    need(shell)
    ws.compare([shell, "-c", APPENDS], fs=fs, options=options, mode=mode, check_tree=False)


# Eight processes race on a file nobody holds, sixty times: each round's first opener
# makes the shared cache (a fresh memfd) while the others open it too and append.
FRESH_RACES = """
for r in $(seq 1 60); do
    for w in 1 2 3 4 5 6 7 8; do echo "$w" >> "$D/race.$r" & done
    wait
done
for f in "$D"/race.*; do wc -l < "$f"; done | sort | uniq -c
cat "$D"/race.* | sort | uniq -c
"""


@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_appends_racing_on_a_fresh_cache_keep_every_line_once(ws, fs, options, mode):
    need("bash")
    ws.compare(["bash", "-c", FRESH_RACES], fs=fs, options=options, mode=mode, check_tree=False)


# The first opener of a file (its cache fresh) notes what is known to have reached the
# FS; here its fsetxattr is held back (strace) while a second process appends a line and
# notes that. The first's late note must not replace the second's: its close would then
# take the line for one written past the wrappers and append it again.
LATE_FIRST_NOTE = """
: > "$D/f"
strace -f -qq -o /dev/null -e trace=fsetxattr -e inject=fsetxattr:delay_enter=1500000 \
    bash -c ': >> "$D/f"' &
sleep 0.5
echo line >> "$D/f"
wait
cat "$D/f"
"""


@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_a_late_note_of_a_fresh_cache_does_not_append_a_line_again(ws, fs, options, mode):
    need("bash")
    need_strace()
    ws.compare(["bash", "-c", LATE_FIRST_NOTE], fs=fs, options=options, mode=mode, check_tree=False)


# sed writes 2 MiB to an O_APPEND stdout through stdio (glibc's own write(), past the
# wrappers) and waits for the end of its input while another process appends a line: at
# sed's exit its bytes are appended at the FS's end, after that line, in 1 MiB chunks. The
# cache's copy of them, now in the wrong place, must be dropped only after the last chunk
# was read from it (else the second MiB reaches the file as zeros).
STDIO_APPEND_PAST_ANOTHER = """
: > "$D/f"
{ seq -f '%015g' 1 131072; sleep 1.5; } | sed '' >> "$D/f" &
sleep 0.7
echo other >> "$D/f"
wait
wc -c < "$D/f"
tr -cd '\\000' < "$D/f" | wc -c
sort "$D/f" | md5sum
"""


@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_stdio_appends_passed_on_after_another_process_appended_write_no_zeros(ws, fs, options, mode):
    need("sed")
    ws.compare(["sh", "-c", STDIO_APPEND_PAST_ANOTHER], fs=fs, options=options, mode=mode,
               check_tree=False)


# A stdio stream appends more than its buffer (glibc writes it itself, past the wrappers),
# then the same process appends a line through another fd, then closes the stream: the
# stream's bytes were written first and must all be there, the line after them.
STDIO_THEN_WRITE_APPENDS = r'''
import ctypes, os
D = os.environ["D"]
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with open(f"{D}/f", "w") as f:
    f.write("start\n")
fp = libc.fopen(f"{D}/f".encode(), b"a")
libc.fwrite(b"A" * 9999 + b"\n", 1, 10000, fp)
fd = os.open(f"{D}/f", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"other\n")
os.close(fd)
libc.fclose(fp)
data = open(f"{D}/f", "rb").read()
print(len(data), data.count(b"A"), data.count(0), data.endswith(b"A\nother\n"))
'''


@pytest.mark.parametrize("fs,options,mode", ONE_PROCESS, ids=ONE_PROCESS_IDS)
def test_an_append_after_stdio_appends_lands_after_them(ws, fs, options, mode):
    ws.compare_py(STDIO_THEN_WRITE_APPENDS, fs=fs, options=options, mode=mode, check_tree=False)


# Another process appends to a file this one holds (in the embedded mode, through a cache
# of its own): a read at the old end finds the file grew. The page that held the old end
# was filled, with zeros past it: the appended bytes there must be read from the FS, not
# taken from the cache (a read would return the zeros, and a writable mapping's write-back
# would write them into the file).
APPENDED_BY_ANOTHER_PROCESS = r'''
import mmap, os, subprocess, sys
D = os.environ["D"]
with open(f"{D}/f", "wb") as f:
    f.write(b"x" * 100)
fd = os.open(f"{D}/f", os.O_RDWR)
print(os.pread(fd, 10, 0))
subprocess.run([sys.executable, "-c", f"open({D!r} + '/f', 'ab').write(b'y' * (1 << 20))"], check=True)
print(os.pread(fd, 10, 100))
m = mmap.mmap(fd, 0)
print(len(m), m[4090:4100], m[-4:])
m[0:1] = b"z"
m.close()
os.close(fd)
data = open(f"{D}/f", "rb").read()
print(len(data), data.count(0), data[:2])
'''


@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_a_file_grown_by_another_process_reads_its_new_bytes_past_the_old_end(ws, fs, options, mode):
    ws.compare_py(APPENDED_BY_ANOTHER_PROCESS, fs=fs, options=options, mode=mode, check_tree=False)


# A process appends through an O_RDWR fd it keeps while other processes append between its
# lines, then reads the file back through that fd. Its appends land past the lines of the
# others, which its cache never got (in the embedded mode a cache of its own): they must be
# read from the FS, not taken for zeros (at 7992107 the embedded mode read NULs there).
APPENDS_READ_BACK = r'''
import os, subprocess
D = os.environ["D"]
p = f"{D}/log"
fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(3):
    os.write(fd, b"mine %d\n" % i)
    subprocess.run(["sh", "-c", f'for j in 1 2 3; do echo "other {i} $j" >> "{p}"; done'], check=True)
os.write(fd, b"mine end\n")
data = os.pread(fd, 1 << 16, 0)
print(data.decode().replace("\0", "<NUL>"))
os.close(fd)
print(open(p, "rb").read() == data)
'''


@pytest.mark.parametrize("fs,options,mode", APPEND_CASES, ids=["memory-shared", "no-passthrough"])
def test_appends_of_others_read_back_through_the_appenders_fd_are_no_zeros(ws, fs, options, mode):
    ws.compare_py(APPENDS_READ_BACK, fs=fs, options=options, mode=mode, check_tree=False)


# One process holds an O_APPEND fd of slow.log; another's `>>` open looks the file up,
# then stays 0.6 s in the class's open (a thread per connection: the first goes on),
# meanwhile the first appends a line and closes. The second's page cache, made after
# that, must hold the file's end, not the size its lookup saw: at 7992107 it was made that
# size, and the second's line landed past a gap of zeros where the first's line is, which
# every later reader of the kept cache read (four shells appending under -o workers=2: 1
# run in 30; here every run in the shared mode).
SLOW_OPENS = f"{FS_FIXTURES / 'slow_opens.py'}:SlowOpens"
APPEND_DURING_AN_OPEN = r'''
import os, subprocess, time
D = os.environ["D"]
p = f"{D}/slow.log"
fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b"first\n")
sh = subprocess.Popen(["sh", "-c", f'echo second >> "{p}"'])
time.sleep(0.3)
os.write(fd, b"third\n")
os.close(fd)
assert sh.wait() == 0
data = open(p, "rb").read()
print(sorted(data.split(b"\n")), data.count(0))
print(data.hex())
'''


def test_a_line_appended_during_anothers_open_is_no_zeros_through_its_cache(ws):
    script = ws.write_script("script.py", APPEND_DURING_AN_OPEN)
    native = ws.native_run([sys.executable, script])
    assert native.returncode == 0, native.describe()
    r = ws.ldp_run([sys.executable, script], fs=SLOW_OPENS, fs_args=[ws.lower])
    assert r.returncode == 0, r.describe()
    lines, view = r.stdout.splitlines(), bytes.fromhex(r.stdout.splitlines()[-1])
    # the lines natively (their order is the sleeps'), and through the mount what the FS got
    assert lines[:-1] == native.stdout.splitlines()[:-1], r.describe() + "\nnative:\n" + native.stdout
    assert view == (ws.lower / "slow.log").read_bytes()


CACHED = [(LOOPBACK, {"passthrough": "no"}, None), (MEMORY, {}, "shared")]
CACHED_IDS = ["no-passthrough", "memory-shared"]


@pytest.mark.parametrize("fs,options,mode", CACHED, ids=CACHED_IDS)
def test_tar_x_keeps_mtimes_of_written_files(ws, fs, options, mode):
    need("tar")
    seed = ws.tmp / "seed"
    seed.mkdir()
    for i in range(3):
        (seed / f"f{i}").write_bytes(PATTERN[: 1000 * (i + 1)])
    run_native(["touch", "-d", "2001-02-03 04:05:06", *(seed / f"f{i}" for i in range(3))])
    archive = ws.tmp / "a.tar"
    r = run_native(["tar", "cf", archive, "-C", seed, "."])
    assert r.returncode == 0, r.describe()
    ws.compare(["sh", "-c", f'tar xf {archive} -C "$D" && stat -c "%Y %s %n" "$D"/f*'],
               fs=fs, options=options, mode=mode, check_tree=False)


@pytest.mark.parametrize("fs,options,mode", CACHED, ids=CACHED_IDS)
def test_truncate_and_metadata_of_an_open_file_hold_after_close(ws, fs, options, mode):
    ws.compare(["sh", "-c", """
        printf 0123456789 > "$D/t"
        exec 3>>"$D/t"
        truncate -s 4 "$D/t"
        echo x >&3
        chmod 600 "$D/t"
        touch -d '2002-03-04 05:06:07' "$D/t"
        exec 3>&-
        cat "$D/t"; stat -c '%s %a %Y' "$D/t"
        exec 4<>"$D/t"
        truncate -s 2 "$D/t"
        exec 4>&-
        cat "$D/t"; echo; stat -c '%s' "$D/t"
    """], fs=fs, options=options, mode=mode, check_tree=False)


def need_strace():
    need("strace")
    if run_native(["strace", "-qq", "-o", "/dev/null", "true"]).returncode != 0:
        pytest.skip("strace cannot trace here (ptrace refused): the delay cannot be injected")


# truncate(path) of a file open here: the open fd sees the new size and bytes at once.
TRUNCATE_PATH_OF_AN_OPEN_FILE = r'''
import os
D = os.environ["D"]
with open(f"{D}/f", "wb") as f:
    f.write(b"0123456789" * 1000)
fd = os.open(f"{D}/f", os.O_RDWR)
print(os.pread(fd, 10, 0))                      # this process holds those pages
os.truncate(f"{D}/f", 2)
print(os.fstat(fd).st_size, os.stat(f"{D}/f").st_size, os.pread(fd, 10, 0))
os.truncate(f"{D}/f", 6000)
print(os.fstat(fd).st_size, os.pread(fd, 4, 0), os.pread(fd, 4, 5000))
os.close(fd)
print(open(f"{D}/f", "rb").read()[:4], os.stat(f"{D}/f").st_size)
'''


@pytest.mark.parametrize("fs,options,mode", ONE_PROCESS, ids=ONE_PROCESS_IDS)
def test_truncate_by_name_of_an_open_file_reaches_its_cache(ws, fs, options, mode):
    ws.compare_py(TRUNCATE_PATH_OF_AN_OPEN_FILE, fs=fs, options=options, mode=mode, check_tree=False)


# A thread's pwrite() is held back (strace) at its fill of the page it writes into, in the
# cache's lock, while another thread opens the file with O_TRUNC. Whichever of the two the
# file system saw first, the open fds see the file as it is: the FS's truncation and the
# cache's must not fall on either side of the write (the write kept by the FS and cut
# from the cache, or the reverse).
WRITE_AROUND_O_TRUNC = r'''
import os, threading, time
D = os.environ["D"]
with open(f"{D}/f", "wb") as f:
    f.write(b"0123456789" * 1000)
fd = os.open(f"{D}/f", os.O_RDWR)
t = threading.Thread(target=os.pwrite, args=(fd, b"new", 8192))
t.start()
time.sleep(0.5)
fd2 = os.open(f"{D}/f", os.O_WRONLY | os.O_TRUNC)
t.join()
seen = os.fstat(fd).st_size, os.pread(fd, 20000, 0)
os.close(fd2)
os.close(fd)
data = open(f"{D}/f", "rb").read()
print("open fds see the file:", seen == (len(data), data), "size:", len(data) in (0, 8195))
'''


@pytest.mark.parametrize("fs,options,mode", ONE_PROCESS, ids=ONE_PROCESS_IDS)
def test_a_write_racing_an_o_trunc_open_is_seen_as_the_file_keeps_it(ws, fs, options, mode):
    need_strace()
    script = ws.write_script("script.py", WRITE_AROUND_O_TRUNC)
    ws.compare(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=pwrite64",
                "-e", "inject=pwrite64:delay_enter=1500000", sys.executable, script],
               fs=fs, options=options, mode=mode, check_tree=False)


# With the shared server every process holds the same cache. A reader's fill is held back
# (strace) between reading the old bytes from the FS and storing them while a second
# process opens the file with O_TRUNC: the old bytes must not come back into the cache
# after the truncation (the reader then sees them at its next read and fstat).
FILL_AROUND_O_TRUNC = r"""
printf '%010d' $(seq 1 1000) > "$D/f"
strace -f -qq -o /dev/null -e trace=pwrite64 -e inject=pwrite64:delay_enter=1500000 \
    python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
print(len(os.read(fd, 10)) in (0, 10))       # before or after the truncation
for _ in range(50):                          # until the other process truncated it
    if os.stat(sys.argv[1]).st_size == 0:
        break
    time.sleep(0.1)
print(os.fstat(fd).st_size, os.pread(fd, 10, 0))
' "$D/f" &
sleep 0.5
: > "$D/f"
wait
wc -c < "$D/f"
"""


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "no-passthrough"])
def test_a_fill_racing_an_o_trunc_open_in_another_process_puts_no_old_bytes_back(ws, fs, options):
    need_strace()
    ws.compare(["sh", "-c", FILL_AROUND_O_TRUNC], fs=fs, options=options, mode="shared",
               check_tree=False)


PYTHON_IO = r'''
import mmap, os
D = os.environ["D"]
fd = os.open(f"{D}/p", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"abcdefgh" * 1000)
os.pwrite(fd, b"XY", 4094)              # across a page boundary
os.ftruncate(fd, 6000)
print(os.pread(fd, 8, 4090), os.fstat(fd).st_size)
os.writev(fd, [b"one", b"two"])
os.lseek(fd, 0, os.SEEK_SET)
print(os.read(fd, 8), os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE))
m = mmap.mmap(fd, 6006)
m[0:4] = b"MMAP"
m.close()
os.close(fd)
with open(f"{D}/p", "rb") as f:
    data = f.read()
print(len(data), data[:8], data[4090:4098], data[-6:])
with open(f"{D}/q", "w") as f:            # stdio-style buffered text through Python
    f.write("line\n" * 3000)
print(os.path.getsize(f"{D}/q"), open(f"{D}/q").read().count("\n"))
'''


@pytest.mark.parametrize("fs,options,mode", CACHED, ids=CACHED_IDS)
def test_fd_level_writes_reads_and_mmap_of_a_cached_file_match_native(ws, fs, options, mode):
    ws.compare_py(PYTHON_IO, fs=fs, options=options, mode=mode)


@pytest.fixture(scope="module")
def cache_threads(tmp_path_factory):
    return build_program(tmp_path_factory, "cache_threads", "-pthread")


@pytest.mark.parametrize("fs,options,mode", CACHED, ids=CACHED_IDS)
def test_threads_opening_renaming_and_closing_cached_files_see_their_own_bytes(
        ws, cache_threads, fs, options, mode):
    native, _ = ws.compare(["sh", "-c", f'exec {cache_threads} "$D"'],
                           fs=fs, options=options, mode=mode, check_tree=False)
    assert native.stdout == "ok\n"


COHERENCE = r'''
import os, subprocess, sys
D = os.environ["D"]
with open(f"{D}/shared", "wb") as f:
    f.write(b"old bytes\n" * 1000)
fd = os.open(f"{D}/shared", os.O_RDWR)
print(os.pread(fd, 10, 5000))                      # this process now holds those pages
subprocess.run([sys.executable, "-c", f"""
import os
fd = os.open({D!r} + "/shared", os.O_WRONLY)
os.pwrite(fd, b"NEW BYTES\\n", 5000)
os.close(fd)
"""], check=True)
print(os.pread(fd, 10, 5000))                      # another process's write, seen at once
import mmap
m = mmap.mmap(fd, 10000)
subprocess.run([sys.executable, "-c", f"""
import os, mmap
fd = os.open({D!r} + "/shared", os.O_RDWR)
m = mmap.mmap(fd, 10000)
m[0:6] = b"MAPPED"
m.close()
os.close(fd)
"""], check=True)
print(m[0:10])                                     # MAP_SHARED is coherent between processes
m.close()
os.close(fd)
'''


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "no-passthrough"])
def test_shared_mode_processes_see_each_others_writes_and_mappings_at_once(ws, fs, options):
    ws.compare_py(COHERENCE, fs=fs, options=options, mode="shared", check_tree=False)


LIVE_PROBE = r'''
import os
D = os.environ["D"]
fd = os.open(f"{D}/clock", os.O_RDONLY)
first = os.read(fd, 100)
os.lseek(fd, 0, os.SEEK_SET)
second = os.read(fd, 100)
print(first.decode().strip(), second.decode().strip(), os.pread(fd, 100, 0).decode().strip())
os.close(fd)
with open(f"{D}/endless", "rb") as f:
    print(len(f.read(300000)))
fd = os.open(f"{D}/log", os.O_WRONLY)
os.write(fd, b"abc")
os.pwrite(fd, b"XY", 1)
os.write(fd, b"def")
os.close(fd)
print(open(f"{D}/log", "rb").read().decode(), open(f"{D}/writes").read().split())
'''


def test_direct_io_files_are_read_from_the_fs_at_every_read(ws):
    probe = ws.write_script("probe.py", LIVE_PROBE)
    r = ldp(ws, "Live", ["sh", "-c", f'"{sys.executable}" {probe}; cat "$D/clock"; cat "$D/clock"; '
                                     f'sed -n 1p "$D/clock"; head -c 5000000 "$D/endless" | wc -c'],
            timeout=60)
    assert r.returncode == 0, r.describe()
    lines = r.stdout.splitlines()
    ticks = lines[0].split(" ")[1::2] + [t.split(" ")[1] for t in lines[3:6]]
    assert len(set(ticks)) == 6 and all(t.isdigit() for t in ticks), r.describe()
    assert lines[1:3] == ["300000", "aXYdef ['0', '3', '1', '2', '3', '3']"], r.describe()
    assert lines[6:] == ["5000000"], r.describe()
