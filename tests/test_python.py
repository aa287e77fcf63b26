"""A Python program doing ordinary file work on the loopback example prints
what it prints natively: open, os.listdir, os.stat, shutil.copytree, pathlib,
os.walk, scandir, mmap, fcntl locks.  Runs on both loopback data paths."""


import sys

import pytest

SCRIPT = r'''
import errno, fcntl, mmap, os, pathlib, shutil, stat, sys
D, O = os.environ["D"], os.environ["O"]
rel = lambda p: os.path.relpath(p, D)

with open(f"{D}/a.txt", "w") as f:
    f.write("alpha\n" * 100)
with open(f"{D}/a.txt", "a") as f:
    f.write("end\n")
with open(f"{D}/a.txt") as f:
    text = f.read()
    print("read", len(text), f.tell(), text[-10:].encode())
with open(f"{D}/a.txt", "r+b") as f:
    f.seek(6)
    f.write(b"BETA")
    f.seek(0)
    print("r+b", f.read(20))
with open(f"{D}/a.txt", "rb") as f:
    print("lines", sum(1 for _ in f))
try:
    open(f"{D}/a.txt", "x")
except FileExistsError as e:
    print("x mode", errno.errorcode[e.errno])

os.makedirs(f"{D}/tree/x/y", exist_ok=True)
for i in range(5):
    pathlib.Path(D, "tree", "x", f"f{i}").write_text(str(i) * i)
os.symlink("x/f3", f"{D}/tree/link")
print("listdir", sorted(os.listdir(D)), sorted(os.listdir(f"{D}/tree/x")))
st = os.stat(f"{D}/a.txt")
print("stat", st.st_size, stat.filemode(st.st_mode), st.st_nlink)
lst = os.lstat(f"{D}/tree/link")
print("lstat", stat.filemode(lst.st_mode), lst.st_size, os.readlink(f"{D}/tree/link"))
print("exists", os.path.exists(f"{D}/tree/link"), os.path.isdir(f"{D}/tree"),
      os.path.isfile(f"{D}/tree"), os.path.exists(f"{D}/nope"))

shutil.copytree(f"{D}/tree", f"{D}/tree2", symlinks=True)
shutil.copytree(f"{D}/tree", f"{O}/tree_out")
shutil.copy2(f"{D}/a.txt", f"{D}/a2.txt")
shutil.copyfile(f"{O}/tree_out/x/f4", f"{D}/from_out")
for root, dirs, files in os.walk(D):
    dirs.sort()
    print("walk", rel(root), dirs, sorted(files))
for root, dirs, files in os.walk(D, topdown=False):
    print("walk-up", rel(root), sorted(dirs), sorted(files))

p = pathlib.Path(D, "p.bin")
p.write_bytes(b"\0" * 10000 + b"xyz")
print("pathlib", p.read_bytes()[-5:], p.stat().st_size, p.exists(), p.is_file(), p.is_dir())
print("glob", sorted(x.name for x in pathlib.Path(D).glob("*.txt")))
print("rglob", sorted(str(x.relative_to(D)) for x in pathlib.Path(D).rglob("f*")))
(pathlib.Path(D) / "tree2").rename(pathlib.Path(D) / "tree3")
print("iterdir", sorted(x.name for x in pathlib.Path(D, "tree3").iterdir()))

with open(f"{D}/p.bin", "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    print("mmap", len(m), m[10000:10003])
    m[0:4] = b"MMAP"
    m.flush()
    m.close()
with open(f"{D}/p.bin", "rb") as f:
    print("after mmap", f.read(6))
with open(f"{D}/p.bin", "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    print("mmap ro", m.find(b"xyz"))
    m.close()

with os.scandir(D) as it:
    print("scandir", sorted((e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in it))
with os.scandir(f"{D}/tree") as it:
    # d_ino from readdir is st_ino from stat, as on every Linux file system
    print("d_ino is st_ino", all(e.inode() == os.lstat(e.path).st_ino for e in it))

fd = os.open(f"{D}/lock", os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("lockf ok")
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("flock ok")
fd2 = os.open(f"{D}/lock", os.O_RDWR)
try:
    fcntl.flock(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("second flock acquired")
except OSError as e:
    print("second flock", errno.errorcode[e.errno])
fcntl.flock(fd, fcntl.LOCK_UN)
fcntl.flock(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("second flock after unlock ok")
rec = fcntl.fcntl(fd, fcntl.F_GETFL)
print("getfl", rec & (os.O_ACCMODE | os.O_APPEND))
os.close(fd2)
os.close(fd)

os.truncate(f"{D}/a.txt", 10)
print("truncate", pathlib.Path(D, "a.txt").read_bytes())
os.replace(f"{D}/a2.txt", f"{D}/a.txt")
print("replace", os.path.getsize(f"{D}/a.txt"), os.path.exists(f"{D}/a2.txt"))
shutil.rmtree(f"{D}/tree3")
os.remove(f"{D}/from_out")
print("final", sorted(os.listdir(D)))
'''


@pytest.mark.parametrize("options", [{}, {"passthrough": "no"}],
                         ids=["passthrough", "no-passthrough"])
def test_python_file_api_matches_native(ws, options):
    ws.compare_py(SCRIPT, options=options)


@pytest.mark.parametrize("options", [{}, {"passthrough": "no"}],
                         ids=["passthrough", "no-passthrough"])
def test_python_whose_stdout_the_shell_opened_in_the_mount(ws, options):
    # python3 asks isatty(1) of the inherited mount fd before its interpreter runs: the
    # embedded backend must not give up on the process for good at that call.
    py = sys.executable
    ws.compare_sh(f'{py} -c "print(123)" > "$D/out"\n'
                  f'{py} -c "import sys; sys.stdout.write(\'456\\n\')" >> "$D/out"\n'
                  f'echo 789 | {py} -c "import sys; print(sys.stdin.read().strip())" >> "$D/out"\n'
                  'cat "$D/out"\n', options=options)
