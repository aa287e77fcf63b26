"""POSIX corner cases that programs (and conformance suites) rely on, compared with
a native directory: a path pointer the program never mapped is EFAULT, not a crash of
the program inside the preload library; a name over NAME_MAX is ENAMETOOLONG for every
call, not ENOENT from the file system."""

import os
import sys
import shutil

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, build_program, need

def one_tree(fs):
    """The mode for a script of several commands: the memory example keeps its tree in the
    process that serves it, so the commands must share one (the shared mode)."""
    return "shared" if fs == MEMORY else None


# ctypes calls libc directly, so the pointer reaches the wrapper exactly as given.
SCRIPT = r'''
import ctypes, errno, os
D = os.environ["D"]
libc = ctypes.CDLL(None, use_errno=True)
BAD = ctypes.c_void_p(0xdeadc0de)
NULL = ctypes.c_void_p(0)
os.chdir(D)
with open("file", "w") as f:
    f.write("data\n")
os.mkdir("dir")

def attempt(what, fn, *args):
    ctypes.set_errno(0)
    r = fn(*args)
    e = ctypes.get_errno()
    print(f"{what}: {r if r >= 0 else errno.errorcode[e]}")

for name, ptr in (("unmapped", BAD), ("NULL", NULL)):
    attempt(f"chmod {name}", libc.chmod, ptr, 0o644)
    attempt(f"open {name}", libc.open, ptr, os.O_RDONLY)
    attempt(f"mkdir {name}", libc.mkdir, ptr, 0o755)
    attempt(f"unlink {name}", libc.unlink, ptr)
    attempt(f"rmdir {name}", libc.rmdir, ptr)
    attempt(f"rename {name} from", libc.rename, ptr, b"file2")
    attempt(f"rename {name} to", libc.rename, b"file", ptr)
    attempt(f"truncate {name}", libc.truncate, ptr, ctypes.c_long(0))
    attempt(f"symlink {name} target", libc.symlink, ptr, b"link")
    attempt(f"chown {name}", libc.chown, ptr, -1, -1)

# a small integer as a path (page 0), as a thread's first path call: nothing is remembered yet
import threading
def first_call_of_a_thread():
    attempt("chmod page zero, new thread", libc.chmod, ctypes.c_void_p(0x100), 0o644)
    attempt("open page zero, new thread", libc.open, ctypes.c_void_p(0x1a4), os.O_RDONLY)
t = threading.Thread(target=first_call_of_a_thread)
t.start()
t.join()

# a path that ends on the last byte before an unmapped page is still read whole
mm = ctypes.CDLL(None).mmap
mm.restype = ctypes.c_void_p
mm.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
page = mm(None, 8192, 3, 0x22, -1, 0)
ctypes.CDLL(None).munmap(ctypes.c_void_p(page + 4096), ctypes.c_size_t(4096))
tail = page + 4096 - 5
ctypes.memmove(tail, b"file\0", 5)
attempt("chmod path at a page end", libc.chmod, ctypes.c_void_p(tail), 0o600)
print(oct(os.stat("file").st_mode & 0o777))

long = b"x" * 256
attempt("unlink long name", libc.unlink, long)
attempt("rmdir long name", libc.rmdir, long)
attempt("chmod long name", libc.chmod, long, 0o644)
attempt("rename long from", libc.rename, long, b"file2")
attempt("rename long to", libc.rename, b"file", long)
attempt("link long to", libc.link, b"file", long)
attempt("mkdir long", libc.mkdir, long, 0o755)
attempt("open long O_CREAT", libc.open, long, os.O_WRONLY | os.O_CREAT, 0o644)
attempt("unlink long in dir", libc.unlink, b"dir/" + long)
attempt("max name create", libc.mkdir, b"y" * 255, 0o755)
attempt("max name rmdir", libc.rmdir, b"y" * 255)
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_bad_pointers_and_long_names_fail_as_natively(ws, fs):
    native, _ = ws.compare_py(SCRIPT, fs=fs)
    assert "chmod unmapped: EFAULT" in native.stdout
    assert "chmod page zero, new thread: EFAULT" in native.stdout
    assert "unlink long name: ENAMETOOLONG" in native.stdout


def test_zstd_rm_removes_the_source_in_the_mount(ws):
    """zstd --rm deletes its input with remove(), which glibc implements with its own
    unlink, past the unlink wrapper: the input must be gone from the mount."""
    need("zstd")
    ws.populate(lambda d: (d / "data.txt").write_text("some text\n" * 1000))
    ws.compare_sh('cd "$D"\nzstd -q --rm data.txt\nls\nzstd -dc data.txt.zst | wc -l\n')


REMOVE = r'''
import ctypes, errno, os
D = os.environ["D"]
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir(f"{D}/dir")
open(f"{D}/file", "w").close()
os.mkdir(f"{D}/full")
open(f"{D}/full/x", "w").close()
for name in ("file", "dir", "full", "missing", "file/"):
    ctypes.set_errno(0)
    r = libc.remove(f"{D}/{name}".encode())
    print(name, r if r == 0 else errno.errorcode[ctypes.get_errno()])
print(sorted(os.listdir(D)))
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_remove_removes_files_and_empty_directories(ws, fs):
    native, _ = ws.compare_py(REMOVE, fs=fs)
    assert "file 0" in native.stdout


PATHCONF = r'''
import errno, os
D = os.environ["D"]
open(f"{D}/file", "w").close()
for what in ("PC_NAME_MAX", "PC_PATH_MAX", "PC_PIPE_BUF"):
    print(what, os.pathconf(D, what), os.pathconf(f"{D}/file", what))
    with open(f"{D}/file") as f:
        print(what, "fd", os.fpathconf(f.fileno(), what))
try:
    os.pathconf(f"{D}/missing", "PC_NAME_MAX")
except OSError as e:
    print("missing:", errno.errorcode[e.errno])
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_pathconf_answers_for_paths_in_the_mount(ws, fs):
    native, _ = ws.compare_py(PATHCONF, fs=fs)
    assert "missing: ENOENT" in native.stdout


DOT_NAMES = r'''
cd "$D"
mkdir -p a/b
rmdir a/b/. || true
rmdir a/b/.. || true
mv a/b/. c || true
python3 -c 'import os; os.rename("a/b/..", "c")' 2>&1 | tail -1 || true
python3 -c 'import os; os.unlink("a/b/.")' 2>&1 | tail -1 || true
rmdir a/x/. || true
ls -R
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_removing_or_renaming_dot_and_dotdot_is_refused(ws, fs):
    """rmdir "a/b/." is EINVAL and "a/b/.." ENOTEMPTY, rename of either EBUSY, unlink
    EISDIR, as the kernel refuses them: the directory itself is never removed."""
    native, _ = ws.compare_sh(DOT_NAMES, fs=fs, mode=one_tree(fs))
    assert "Invalid argument" in native.stderr
    assert "a/b:" in native.stdout


# A relative name of PATH_MAX - 1 bytes in $p (15 directories of NAME_MAX bytes and a file),
# its directories made.
PATH_MAX_NAME = r'''
name=$(printf 'n%.0s' $(seq 255))
p=$name
for i in $(seq 14); do p=$p/$name; done
p=$p/$(printf 'f%.0s' $(seq 255))
echo ${#p}
mkdir -p "${p%/*}"
'''

LONG_RELATIVE_PATH = r'''
cd "$D"
''' + PATH_MAX_NAME + r'''touch "$p"
chmod 640 "$p"
stat -c %a "$p"
echo data >> "$p"
cat "$p"
ln -s target "${p%/*}/l"
readlink "${p%/*}/l"
mv "$p" "${p%/*}/g"
ls "${p%/*}" | cut -c1-3
touch "${p}x" 2>&1 | sed 's/"[^"]*"/PATH/; s/'"'"'[^'"'"']*'"'"'/PATH/'
rm -r "$name"
ls
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_relative_paths_of_path_max_minus_one_bytes_work(ws, fs):
    """A relative path of PATH_MAX - 1 bytes from a directory in the mount names a file
    (the kernel limits the string, not the path it resolves to); one byte more is
    ENAMETOOLONG. The loopback's real path behind it is longer than PATH_MAX."""
    native, _ = ws.compare_sh(LONG_RELATIVE_PATH, fs=fs, mode=one_tree(fs))
    assert native.stdout.startswith("4095\n640\ndata\ntarget\n")
    assert "File name too long" in native.stdout


# The same from a working directory 3,060 bytes deep in the mount: the resolved path
# (about 7,100 bytes) is past PATH_MAX, and `mkdir -p` and `rm -r` chdir down the
# components, so the working directory itself goes past PATH_MAX; a symlink in the
# middle of such a path is followed, and xattrs reach the file.
DEEP_CWD_LONG_RELATIVE_PATH = r'''
deep=$(for i in $(seq 15); do printf "d%02d%0200d/" $i 0; done)
mkdir -p "$D/$deep"
cd "$D/$deep"
echo ${#deep}
''' + PATH_MAX_NAME + r'''echo data > "$p"
cat "$p"
ln -s "$name" lnk
cat "lnk/${p#*/}"
setfattr -n user.k -v deep "$p" && getfattr --only-values -n user.k "$p"; echo
mv "$p" "${p%/*}/g"
ls "${p%/*}" | cut -c1-3
rm -r "$name" lnk
ls | wc -l
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_relative_paths_of_path_max_minus_one_bytes_work_from_a_deep_directory(ws, fs):
    """pjdfstest's */03 files run from a deep directory: a relative name of PATH_MAX - 1
    bytes from a working directory 3,060 bytes deep in the mount works as natively (the
    FS sees a path of about 7,100 bytes; the loopback walks it below PATH_MAX)."""
    need("setfattr", "getfattr")
    native, _ = ws.compare_sh(DEEP_CWD_LONG_RELATIVE_PATH, fs=fs, mode=one_tree(fs))
    assert native.stdout == "3060\n4095\ndata\ndata\ndeep\ng\n0\n", native.stdout + native.stderr


XATTR_LIMITS = r'''
import errno, os
D = os.environ["D"]
f = f"{D}/f"
open(f, "w").close()
for what, name, value in (("value of 64 KiB + 1", "user.big", b"x" * 65537),
                          ("value of 1000", "user.small", b"x" * 1000),
                          ("name of 256", "user." + "n" * 251, b"v"),
                          ("empty name", "", b"v")):
    try:
        os.setxattr(f, name, value)
        print(what, "set", len(os.getxattr(f, name)))
    except OSError as e:
        print(what, errno.errorcode[e.errno])
for call in (os.getxattr, os.removexattr):
    try:
        call(f, "user." + "n" * 251)
    except OSError as e:
        print(call.__name__, errno.errorcode[e.errno])
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_xattr_names_and_values_over_the_kernel_limits_are_refused(ws, fs):
    """A value over 64 KiB is E2BIG and a name over 255 bytes (or empty) ERANGE, as the
    kernel refuses them before any file system sees them."""
    native, _ = ws.compare_py(XATTR_LIMITS, fs=fs)
    assert "value of 64 KiB + 1 E2BIG" in native.stdout
    assert "name of 256 ERANGE" in native.stdout


SETID_ON_CHOWN = r'''
cd "$D"
touch a b c
chmod 6755 a
chmod 6745 b
chmod 4755 c
chown 65534:65534 a b
chown 0 c
stat -c '%n %a %u %g' a b c
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_chown_clears_set_user_id_and_group_executable_set_group_id(ws, fs):
    """chown of a file clears its set-user-ID bit, and its set-group-ID bit when it is
    group-executable (even by root), as Linux does."""
    native, _ = ws.compare_sh(SETID_ON_CHOWN, fs=fs, mode=one_tree(fs))
    assert "a 755 65534 65534" in native.stdout


SETID_ON_WRITE = r'''
cd "$D"
touch d e
chmod 6777 d e
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo x >&3' 3>>d
echo y >> e
stat -c '%n %a' d e
'''


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="writing as another user needs root and setpriv")
def test_a_write_by_another_user_clears_set_id_bits_in_the_memory_example(ws):
    """Data written by someone other than root clears the set-ID bits (root's own write
    keeps them). Another user's process loads the FS only in the shared mode, and is
    served with -o allow_other."""
    native, _ = ws.compare_sh(SETID_ON_WRITE, fs=MEMORY, mode="shared", options={"allow_other": None})
    assert native.stdout == "d 777\ne 6777\n"


THROUGH_DIRECTORY_LINKS = r'''
cd "$D"
mkdir d
ln -s d l
mkdir l/x
touch l/f
ln -s t l/s
mkfifo l/p
rm l/f
rmdir l/x
rm -f l/missing
touch l/g
mv l/g l/h
ln l/h l/i
chown -h 0:0 l/h
ln -s a b
ln -s b a
mkdir a/t || true
rm a/t || true
mv a/t x || true
ln a/t x || true
chown -h 0 a/t || true
rm nodir/x || true
ls d
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_names_made_and_removed_through_a_symlinked_directory(ws, fs):
    """mkdir, mkfifo, ln, ln -s, mv, chown -h, rm and rmdir of "link/name" (link -> a directory) act in the
    directory, also for a file system that never follows links itself (the memory
    example answers ENOTDIR for them), and a loop of links is ELOOP."""
    native, _ = ws.compare_sh(THROUGH_DIRECTORY_LINKS, fs=fs, mode=one_tree(fs))
    assert native.stdout == "h\ni\np\ns\n"
    assert "Too many levels of symbolic links" in native.stderr


SIZE_AND_LINK_LIMITS = r'''
import errno, os
D = os.environ["D"]
f = f"{D}/f"
open(f, "w").close()
try:
    os.truncate(f, 999999999999999)
    print("truncated to", os.stat(f).st_size)
except OSError as e:
    print("truncate", errno.errorcode[e.errno], os.stat(f).st_size)
os.truncate(f, 0)
for n in (4095, 4096):
    try:
        os.symlink("x" * n, f"{D}/l{n}")
        print("symlink", n, len(os.readlink(f"{D}/l{n}")))
    except OSError as e:
        print("symlink", n, errno.errorcode[e.errno])
'''


def test_size_beyond_the_memory_example_and_link_contents_beyond_path_max(ws):
    """A truncate past what the memory example holds is EFBIG (ext4 also refuses 1 PB),
    and a symlink's content of PATH_MAX bytes is ENAMETOOLONG as the kernel refuses it."""
    native, ldp = ws.native_run([sys.executable, ws.write_script("s.py", SIZE_AND_LINK_LIMITS)]), \
        ws.ldp_run([sys.executable, ws.tmp / "s.py"], fs=MEMORY)
    assert native.stdout == "truncate EFBIG 0\nsymlink 4095 4095\nsymlink 4096 ENAMETOOLONG\n"
    assert ldp.stdout == native.stdout, ldp.stderr


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory):
    return build_program(tmp_path_factory, "small_stack", "-pthread")


# The smallest thread stack each mode serves a program's calls from (docs/limitations.md):
# the library's path buffers are on the caller's stack, and in the embedded mode the file
# system's Python code runs on it too (a thread's first call starts it there).
SMALL_STACK = {"shared": 48 * 1024, "embedded": 96 * 1024}


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_a_thread_with_a_small_stack_uses_the_mount(ws, small_stack, fs):
    """open, write, stat, rename, link, symlink and unlink from a thread whose stack is
    48 KiB (shared mode) or 96 KiB (embedded), as natively. A vpath is 8 KiB and is copied
    only where a link is followed; with 12 KiB ones copied whole, 64 KiB overflowed."""
    size = SMALL_STACK[LDP_MODE]
    native, _ = ws.compare(["sh", "-c", f'exec {small_stack} "$D" {size}'], fs=fs, check_tree=False)
    assert native.stdout == f"stack {size}: ok\n"
