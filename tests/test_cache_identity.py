"""A page cache is the file's, not its name's (docs/cache.md, "One cache per file").

A process keeps an old file open; another process removes the name and puts a
new file there (sqlite's -wal and -shm, an editor's save, `mv new f`). When the
first process opens the name again it must read the new file, while its old fd
still reads the old one, as natively: a cache found by the name is used only if
the file's inode number is the one it was made for. The same when the first
process itself makes the new file with O_CREAT after the name was removed."""

import pytest

from conftest import LOOPBACK, MEMORY

SCRIPT = r'''
import os, subprocess
D = os.environ["D"]
with open(f"{D}/f", "w") as f:
    f.write("old\n")
with open(f"{D}/g", "w") as f:
    f.write("old g\n")
fd1 = os.open(f"{D}/f", os.O_RDONLY)
fdg = os.open(f"{D}/g", os.O_RDONLY)
print(os.read(fd1, 100), os.read(fdg, 100))
subprocess.run(["sh", "-c", 'rm "$D/f" "$D/g"; echo new-file > "$D/new"; mv "$D/new" "$D/f"'], check=True)
fd2 = os.open(f"{D}/f", os.O_RDONLY)
print(os.read(fd2, 100), os.pread(fd1, 100, 0), os.stat(f"{D}/f").st_size)
fd3 = os.open(f"{D}/g", os.O_RDWR | os.O_CREAT, 0o644)      # a new, empty g
print(os.read(fd3, 100), os.pread(fdg, 100, 0))
os.write(fd3, b"new g\n")
print(os.pread(fd3, 100, 0), os.pread(fdg, 100, 0))
'''


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "loopback-no-passthrough"])
def test_a_name_given_to_a_new_file_by_another_process_opens_the_new_file(ws, fs, options):
    native, _ = ws.compare_py(SCRIPT, fs=fs, options=options, mode="shared" if fs == MEMORY else None)
    assert "b'new-file\\n' b'old\\n' 9" in native.stdout
