"""O_TMPFILE on a mount directory gives an unnamed file, as on ext4 and tmpfs
(native/interpose/tmpfile.c): tests/programs/tmpfile_paths.c writes one,
names it with linkat (AT_EMPTY_PATH and /proc/self/fd/N), and checks O_EXCL
and the errors; Python's tempfile.TemporaryFile tries O_TMPFILE first.
Both are compared with the same runs on a native directory."""


import pytest

from conftest import LOOPBACK, MEMORY, build_program

FS_CASES = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
FS_IDS = ["loopback", "loopback-no-passthrough", "memory"]


@pytest.fixture(scope="module")
def tmpfile_paths(tmp_path_factory):
    return build_program(tmp_path_factory, "tmpfile_paths")


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_o_tmpfile_unnamed_file_and_linkat_match_native(ws, tmpfile_paths, fs, options):
    native, _ = ws.compare(["sh", "-c", f'exec {tmpfile_paths} "$D"'], fs=fs, options=options,
                           mode="shared" if fs == MEMORY else None)
    assert "linkat AT_EMPTY_PATH: ok" in native.stdout and native.stdout.endswith("done\n")


PY_TEMPFILE = r'''
import os, tempfile
D = os.environ["D"]
with tempfile.TemporaryFile(dir=D) as f:
    f.write(b"temporary\n")
    f.seek(0)
    print(f.read(), sorted(os.listdir(D)), os.fstat(f.fileno()).st_nlink)
with tempfile.NamedTemporaryFile(dir=D, prefix="named-") as f:
    f.write(b"x")
    f.flush()
    print(len(os.listdir(D)))
print(sorted(os.listdir(D)))
'''


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_python_temporaryfile_in_mount_matches_native(ws, fs, options):
    ws.compare_py(PY_TEMPFILE, fs=fs, options=options, mode="shared" if fs == MEMORY else None)
