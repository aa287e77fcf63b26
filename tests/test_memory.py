"""The in-memory example.  Its state lives in the process that touched the
mount, so every check runs inside one process: one python3, or one bash
using builtins and redirections only.  Each is compared with the same program
on a native directory."""

import pytest

from conftest import LOOPBACK, MEMORY

PY_SCRIPT = r'''
import errno, os, shutil, stat
D = os.environ["D"]
rel = lambda p: os.path.relpath(p, D)

def err(what, fn, *args, **kw):
    try:
        fn(*args, **kw)
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])

def show(path):
    st = os.lstat(path)
    kind = stat.filemode(st.st_mode)
    size = st.st_size if not stat.S_ISDIR(st.st_mode) else "-"
    nlink = st.st_nlink if not stat.S_ISDIR(st.st_mode) else "-"
    print("stat", rel(path), kind, size, nlink)

os.makedirs(f"{D}/a/b/c")
os.makedirs(f"{D}/a/b/c", exist_ok=True)
err("makedirs existing", os.makedirs, f"{D}/a/b")
err("mkdir missing parent", os.mkdir, f"{D}/nope/x")
os.mkdir(f"{D}/m700", 0o700)
show(f"{D}/m700")

with open(f"{D}/a/f", "w") as f:
    f.write("one\n")
with open(f"{D}/a/f", "a") as f:
    f.write("two\n")
fd = os.open(f"{D}/a/f", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"three\n")
os.close(fd)
print("read", open(f"{D}/a/f").read().splitlines())
with open(f"{D}/a/f", "r+") as f:
    f.seek(4)
    f.write("TWO")
print("r+", open(f"{D}/a/f").read().encode())
show(f"{D}/a/f")
with open(f"{D}/sparse", "wb") as f:
    f.seek(5000)
    f.write(b"end")
print("sparse", os.path.getsize(f"{D}/sparse"), open(f"{D}/sparse", "rb").read()[4995:])
big = bytes(range(256)) * 4096
with open(f"{D}/big", "wb") as f:
    for i in range(0, len(big), 1000):
        f.write(big[i:i + 1000])
print("big", open(f"{D}/big", "rb").read() == big, os.path.getsize(f"{D}/big"))

# rename, also over an existing file and an empty directory
open(f"{D}/r1", "w").write("r1\n")
open(f"{D}/r2", "w").write("r2 longer\n")
os.rename(f"{D}/r1", f"{D}/r2")
print("rename over", open(f"{D}/r2").read().encode(), os.path.exists(f"{D}/r1"))
os.mkdir(f"{D}/emptydir")
os.rename(f"{D}/m700", f"{D}/emptydir")
show(f"{D}/emptydir")
err("rename dir over non-empty", os.rename, f"{D}/emptydir", f"{D}/a")
err("rename dir over file", os.rename, f"{D}/emptydir", f"{D}/r2")
err("rename file over dir", os.rename, f"{D}/r2", f"{D}/emptydir")
err("rename missing", os.rename, f"{D}/none", f"{D}/none2")
os.rename(f"{D}/a/b", f"{D}/b_moved")
print("after dir rename", sorted(os.listdir(D)), sorted(os.listdir(f"{D}/b_moved")))
os.rename(f"{D}/b_moved", f"{D}/a/b")

# hard links
os.link(f"{D}/a/f", f"{D}/a/f_hard")
s1, s2 = os.stat(f"{D}/a/f"), os.stat(f"{D}/a/f_hard")
print("link same inode", s1.st_ino == s2.st_ino, s1.st_nlink, s2.st_nlink)
with open(f"{D}/a/f_hard", "a") as f:
    f.write("via hard\n")
print("link shared data", open(f"{D}/a/f").read().splitlines()[-1])
os.unlink(f"{D}/a/f_hard")
print("after unlink", os.stat(f"{D}/a/f").st_nlink)
err("link existing", os.link, f"{D}/a/f", f"{D}/r2")
err("link dir", os.link, f"{D}/a", f"{D}/a_link")

# symlinks
os.symlink("f", f"{D}/a/sym")
os.symlink("../f", f"{D}/a/b/sym_up")
os.symlink("nowhere", f"{D}/dangling")
print("readlink", os.readlink(f"{D}/a/sym"), os.readlink(f"{D}/a/b/sym_up"))
print("through symlink", open(f"{D}/a/b/sym_up").read().splitlines()[0])
show(f"{D}/a/sym")
print("islink", os.path.islink(f"{D}/a/sym"), os.path.exists(f"{D}/dangling"))
err("open dangling", open, f"{D}/dangling")
err("readlink on file", os.readlink, f"{D}/a/f")
err("symlink existing", os.symlink, "x", f"{D}/a/sym")

# chmod, utime
os.chmod(f"{D}/a/f", 0o640)
os.chmod(f"{D}/a/b", 0o750)
show(f"{D}/a/f")
print("dir mode", oct(os.stat(f"{D}/a/b").st_mode))
os.utime(f"{D}/a/f", ns=(1_000_000_001, 1_600_000_000_123_456_789))
st = os.stat(f"{D}/a/f")
print("utime ns", st.st_atime_ns, st.st_mtime_ns)
os.utime(f"{D}/a/sym", ns=(5, 6), follow_symlinks=False)
print("utime nofollow", os.lstat(f"{D}/a/sym").st_mtime_ns, os.stat(f"{D}/a/f").st_mtime_ns)

# xattrs
os.setxattr(f"{D}/a/f", "user.one", b"1")
os.setxattr(f"{D}/a/f", "user.two", b"\x00binary\xff")
print("getxattr", os.getxattr(f"{D}/a/f", "user.two"))
print("listxattr", sorted(os.listxattr(f"{D}/a/f")))
err("xattr create existing", os.setxattr, f"{D}/a/f", "user.one", b"x", os.XATTR_CREATE)
err("xattr replace missing", os.setxattr, f"{D}/a/f", "user.three", b"x", os.XATTR_REPLACE)
os.removexattr(f"{D}/a/f", "user.one")
err("getxattr removed", os.getxattr, f"{D}/a/f", "user.one")
print("listxattr after", sorted(os.listxattr(f"{D}/a/f")))

# truncate
os.truncate(f"{D}/a/f", 3)
print("truncate short", open(f"{D}/a/f", "rb").read())
os.truncate(f"{D}/a/f", 8)
print("truncate long", open(f"{D}/a/f", "rb").read())
with open(f"{D}/a/f", "r+b") as f:
    f.truncate(1)
print("ftruncate", open(f"{D}/a/f", "rb").read())
open(f"{D}/a/f", "w").close()
print("O_TRUNC", os.path.getsize(f"{D}/a/f"))

# walk, copytree, rmtree
for root, dirs, files in os.walk(D):
    dirs.sort()
    print("walk", rel(root), dirs, sorted(files))
with os.scandir(f"{D}/a") as it:
    print("d_ino is st_ino", all(e.inode() == os.lstat(e.path).st_ino for e in it))
shutil.copytree(f"{D}/a", f"{D}/copy", symlinks=True)
for root, dirs, files in os.walk(f"{D}/copy"):
    dirs.sort()
    print("copy", rel(root), dirs, sorted(files))
print("copied link", os.readlink(f"{D}/copy/sym"))
shutil.rmtree(f"{D}/copy")
print("after rmtree", sorted(os.listdir(D)))

# errno checks
err("open missing", open, f"{D}/missing")
err("open O_EXCL existing", os.open, f"{D}/r2", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
err("rmdir non-empty", os.rmdir, f"{D}/a")
err("rmdir file", os.rmdir, f"{D}/r2")
err("unlink dir", os.unlink, f"{D}/a")
err("file as dir", os.stat, f"{D}/r2/x")
err("open dir for write", open, f"{D}/a", "w")
err("listdir file", os.listdir, f"{D}/r2")
err("mkdir existing file", os.mkdir, f"{D}/r2")
fd = os.open(f"{D}/a", os.O_RDONLY | os.O_DIRECTORY)
print("open dir rdonly ok", sorted(os.listdir(fd)))
os.close(fd)
err("O_DIRECTORY on file", os.open, f"{D}/r2", os.O_RDONLY | os.O_DIRECTORY)
err("O_NOFOLLOW on symlink", os.open, f"{D}/a/sym", os.O_RDONLY | os.O_NOFOLLOW)

# unlink while open
fd = os.open(f"{D}/r2", os.O_RDWR)
os.unlink(f"{D}/r2")
print("unlinked exists", os.path.exists(f"{D}/r2"))
os.lseek(fd, 0, os.SEEK_SET)
print("read after unlink", os.read(fd, 100))
os.close(fd)
print("final", sorted(os.listdir(D)))
'''

BASH_SCRIPT = r'''
cd "$D"
echo one > f
echo two >> f
while IFS= read -r line; do echo "got $line"; done < f
[ -f f ] && echo "f is a file"
[ -d f ] || echo "f is not a directory"
[ -e nope ] || echo "nope does not exist"
[ -s f ] && echo "f is not empty"
printf '%s-%d\n' abc 42 > g
read -r first < g
echo "first: $first"
printf 'x\ny\nz\n' >> g
mapfile -t lines < g
echo "g has ${#lines[@]} lines, last ${lines[2]}"
echo *
echo ?
for name in *; do [ -f "$name" ] && echo "file $name"; done
pwd
cd ..
cd "$D"
pwd
: > f
[ -s f ] || echo "f is now empty"
exec 3> h
echo via-fd-3 >&3
echo again >&3
exec 3>&-
read -r x < h
echo "h: $x"
exec 4< g
read -r a <&4
read -r b <&4
exec 4<&-
echo "fd 4 read: $a $b"
echo 'echo "sourced with $# args: $*"' > lib.sh
source lib.sh one two
. ./lib.sh three
content=$(< g)
echo "command substitution read ${#content} chars"
exec 5<> rw
echo "read-write fd" >&5
exec 5>&-
read -r rwline < rw
echo "$rwline"
[[ rw -nt /dev/null ]] && echo "rw is newer than /dev/null"
[[ -r rw && -w rw && ! -x rw ]] && echo "rw is rw-, not x"
shopt -s nullglob
files=(*.sh)
echo "glob *.sh: ${files[*]}"
none=(*.none)
echo "nullglob: ${#none[@]}"
echo > "$D/no/such" || echo "redirect into missing dir failed"
cd "$D/no" || echo "cd into missing dir failed"
echo end
'''


def test_memory_python_single_process_matches_native(ws):
    ws.compare_py(PY_SCRIPT, fs=MEMORY)


def test_memory_bash_builtins_match_native(ws):
    ws.compare_sh(BASH_SCRIPT, fs=MEMORY)


def test_same_single_process_script_on_loopback_matches_native(ws):
    """The memory script is a good all-round check: run it on loopback too."""
    ws.compare_py(PY_SCRIPT)


SYMLINKED_DIR_SCRIPT = r'''
import errno, os
D = os.environ["D"]
os.makedirs(f"{D}/a/b/c")
with open(f"{D}/a/b/c/deep", "w") as f:
    f.write("deep\n")
os.symlink("a/b", f"{D}/rel_to_b")
os.symlink(f"{D}/a/b", f"{D}/abs_to_b")
os.symlink("../rel_to_b/c", f"{D}/a/chain")
for p in ("rel_to_b/c", "rel_to_b/c/deep", "abs_to_b/c/deep", "a/chain/deep",
          "rel_to_b/../b/c", "rel_to_b/c/../c/deep"):
    try:
        st = os.stat(f"{D}/{p}")
        print(p, "dir" if os.path.isdir(f"{D}/{p}") else st.st_size)
    except OSError as e:
        print(p, errno.errorcode[e.errno])
print(sorted(os.listdir(f"{D}/rel_to_b/c")), open(f"{D}/a/chain/deep").read().strip())
with open(f"{D}/rel_to_b/c/new", "w") as f:
    f.write("written through the link\n")
print(sorted(os.listdir(f"{D}/a/b/c")))
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_path_through_symlinked_directory_matches_native(ws, fs):
    """A symlink to a directory in the middle of a path is followed, as the
    kernel does (`rel_to_b/..` is the parent of the target, a/)."""
    ws.compare_py(SYMLINKED_DIR_SCRIPT, fs=fs)


ACL_SCRIPT = r'''
import errno, os
D = os.environ["D"]
# user::rw-, group::r--, other::--- : the ACL that `chmod 640` is.
acl = bytes.fromhex("02000000" "01000600ffffffff" "04000400ffffffff" "20000000ffffffff")
for name, mode in (("file", 0o666), ("dir", 0o777)):
    p = f"{D}/{name}"
    if name == "dir":
        os.mkdir(p, mode)
    else:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, mode))
    os.chmod(p, 0o755)
    try:
        os.setxattr(p, "system.posix_acl_access", acl)
        result = "set"
    except OSError as e:
        result = errno.errorcode[e.errno]
    mode = os.stat(p).st_mode & 0o777
    # Either the ACL is refused, or it is the mode: never stored as bare data.
    # (EOPNOTSUPP and ENOTSUP are one number on Linux; errorcode names it ENOTSUP)
    print(name, "consistent" if result in ("EOPNOTSUPP", "ENOTSUP") or mode == 0o640 else
          f"inconsistent: setxattr {result}, mode {oct(mode)}")
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_posix_acl_xattr_is_refused_or_sets_the_mode(ws, fs):
    """cp -a and sed -i copy permissions by setting system.posix_acl_access;
    kernel FUSE refuses that name (EOPNOTSUPP) unless the file system
    supports ACLs, and ext4 applies it to the mode bits."""
    native, ldp = ws.compare_py(ACL_SCRIPT, fs=fs)
    assert native.stdout == "file consistent\ndir consistent\n"

