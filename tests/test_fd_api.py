"""File-descriptor-level work from one Python process: *at calls with a
directory fd, fwalk, fchdir, pread/pwrite, readv/writev, dup/dup2 and shared
offsets, O_APPEND/O_TRUNC, sendfile, copy_file_range, fallocate, mmap of a
file with no lower fd (memory) and of a lower file (loopback), tempfile.
One process, so it runs on the memory example too; compared with native."""

import pytest

from conftest import LOOPBACK, MEMORY

SCRIPT = r'''
import errno, mmap, os, stat, tempfile
D = os.environ["D"]

def attempt(what, fn, *args, **kw):
    try:
        r = fn(*args, **kw)
        print(what, "ok", r if isinstance(r, (int, bytes, str, list)) else "")
    except OSError as e:
        print(what, errno.errorcode[e.errno])

os.makedirs(f"{D}/d/sub")
dfd = os.open(f"{D}/d", os.O_RDONLY | os.O_DIRECTORY)
fd = os.open("rel.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=dfd)
os.write(fd, b"relative to a dir fd\n")
os.close(fd)
print("stat dir_fd", os.stat("rel.txt", dir_fd=dfd).st_size,
      oct(os.stat("rel.txt", dir_fd=dfd).st_mode))
os.mkdir("made", 0o755, dir_fd=dfd)
os.symlink("rel.txt", "sym", dir_fd=dfd)
print("readlink dir_fd", os.readlink("sym", dir_fd=dfd))
os.rename("rel.txt", "renamed.txt", src_dir_fd=dfd, dst_dir_fd=dfd)
os.link("renamed.txt", "linked.txt", src_dir_fd=dfd, dst_dir_fd=dfd)
print("nlink", os.stat("linked.txt", dir_fd=dfd).st_nlink)
os.unlink("linked.txt", dir_fd=dfd)
os.chmod("renamed.txt", 0o600, dir_fd=dfd)
os.utime("renamed.txt", ns=(10**18, 2 * 10**18), dir_fd=dfd)
st = os.stat("renamed.txt", dir_fd=dfd)
print("chmod/utime dir_fd", oct(st.st_mode), st.st_mtime_ns)
attempt("access dir_fd", os.access, "renamed.txt", os.R_OK, dir_fd=dfd)
attempt("rmdir dir_fd", os.rmdir, "made", dir_fd=dfd)
print("listdir fd", sorted(os.listdir(dfd)))
with os.scandir(dfd) as it:
    print("scandir fd", sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it))
for root, dirs, files, rootfd in os.fwalk(D):
    dirs.sort()
    print("fwalk", os.path.relpath(root, D), dirs, sorted(files),
          stat.S_ISDIR(os.fstat(rootfd).st_mode))
cwd = os.open(".", os.O_RDONLY)
os.fchdir(dfd)
print("fchdir", os.path.relpath(os.getcwd(), D), sorted(os.listdir(".")),
      open("renamed.txt").read().strip())
os.fchdir(cwd)
os.close(cwd)
os.close(dfd)

# pread/pwrite, readv/writev, lseek
fd = os.open(f"{D}/io", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.writev(fd, [b"abc", b"defgh", b"\n"])
os.pwrite(fd, b"XY", 2)
print("pread", os.pread(fd, 5, 1), "offset", os.lseek(fd, 0, os.SEEK_CUR))
os.lseek(fd, 0, os.SEEK_SET)
a, b = bytearray(4), bytearray(10)
print("readv", os.readv(fd, [a, b]), bytes(a), bytes(b))
print("seek end", os.lseek(fd, 0, os.SEEK_END), "beyond", os.lseek(fd, 100, os.SEEK_SET))
os.write(fd, b"!")
print("size after write past end", os.fstat(fd).st_size)
os.ftruncate(fd, 6)
os.fsync(fd)
os.fdatasync(fd)
print("ftruncate", os.pread(fd, 100, 0))

# dup shares the offset; O_APPEND; F_SETFL
d2 = os.dup(fd)
os.lseek(fd, 1, os.SEEK_SET)
print("dup offset", os.lseek(d2, 0, os.SEEK_CUR))
d3 = os.dup2(fd, 50)
print("dup2", d3, os.pread(d3, 3, 0))
os.close(d2)
os.close(d3)
os.close(fd)
fd = os.open(f"{D}/io", os.O_WRONLY | os.O_APPEND)
os.lseek(fd, 0, os.SEEK_SET)
os.write(fd, b"+app")
fl = __import__("fcntl").fcntl(fd, __import__("fcntl").F_GETFL)
print("append flag", bool(fl & os.O_APPEND))
os.close(fd)
print("after append", open(f"{D}/io", "rb").read())
fd = os.open(f"{D}/io", os.O_WRONLY | os.O_TRUNC)
os.close(fd)
print("O_TRUNC size", os.stat(f"{D}/io").st_size)

# sendfile, copy_file_range, fallocate
with open(f"{D}/src", "wb") as f:
    f.write(bytes(range(256)) * 100)
s = os.open(f"{D}/src", os.O_RDONLY)
t = os.open(f"{D}/sent", os.O_WRONLY | os.O_CREAT, 0o644)
print("sendfile", os.sendfile(t, s, 0, 1 << 20))
os.close(t)
t = os.open(f"{D}/cfr", os.O_WRONLY | os.O_CREAT, 0o644)
print("copy_file_range", os.copy_file_range(s, t, 1 << 20, offset_src=100))
os.close(t)
os.close(s)
print("copies", open(f"{D}/sent", "rb").read() == bytes(range(256)) * 100,
      open(f"{D}/cfr", "rb").read() == (bytes(range(256)) * 100)[100:])
fd = os.open(f"{D}/alloc", os.O_RDWR | os.O_CREAT, 0o644)
attempt("posix_fallocate", os.posix_fallocate, fd, 0, 8192)
print("fallocate size", os.fstat(fd).st_size)
os.close(fd)

# mmap: read, write back through a shared mapping, private copy
with open(f"{D}/map", "wb") as f:
    f.write(b"0123456789" * 1000)
with open(f"{D}/map", "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    print("mmap read", m[:10], len(m))
    m[0:5] = b"HELLO"
    m.flush()
    m.close()
    p = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE)
    p[0:1] = b"P"
    p.close()
print("mmap written", open(f"{D}/map", "rb").read(12))
fd = os.open(f"{D}/map", os.O_RDWR)
m = mmap.mmap(fd, 0)
os.close(fd)
m[-3:] = b"END"
m.close()
print("mmap after fd closed", open(f"{D}/map", "rb").read()[-5:])

# tempfile
with tempfile.NamedTemporaryFile(dir=D, prefix="tmp_", delete=True) as tf:
    tf.write(b"temporary")
    tf.flush()
    print("named tmp", os.fstat(tf.fileno()).st_size, oct(os.stat(tf.name).st_mode))
td = tempfile.mkdtemp(dir=D, prefix="tmpdir_")
print("mkdtemp", oct(os.stat(td).st_mode))
os.rmdir(td)
with tempfile.TemporaryFile(dir=D) as tf:
    tf.write(b"anonymous")
    tf.seek(0)
    print("TemporaryFile", tf.read())
print("final", sorted(os.listdir(D)))
'''


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_fd_level_python_calls_match_native(ws, fs, options):
    native, _ = ws.compare_py(SCRIPT, fs=fs, options=options)
    assert native.stdout.rstrip().splitlines()[-1].startswith("final")


SIZE_SCRIPT = r'''
import os
D = os.environ["D"]
fd = os.open(f"{D}/growing", os.O_WRONLY | os.O_CREAT, 0o644)
for chunk in (b"abc", b"defgh"):
    os.write(fd, chunk)
    print("fstat", os.fstat(fd).st_size, "stat", os.stat(f"{D}/growing").st_size)
os.ftruncate(fd, 2)
print("after ftruncate: stat", os.stat(f"{D}/growing").st_size)
with open(f"{D}/growing", "rb") as r:
    print("second open reads", r.read())
os.close(fd)
print("after close: stat", os.stat(f"{D}/growing").st_size)
'''


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_stat_by_path_sees_writes_of_still_open_fd_in_same_process(ws, fs, options):
    """Natively (and over kernel FUSE) a write is visible to stat(path) and
    to a second open at once, before the writer closes its fd."""
    ws.compare_py(SIZE_SCRIPT, fs=fs, options=options)
