"""What a served small file costs its reader in system calls (issue 34, bench/NOTES.md).

A Python reader (Python installs a SIGINT handler, so every guarded section costs an
rt_sigprocmask pair) opens, reads whole and closes each file of the archive example's tar;
strace -c counts the reader's calls. Python itself makes 9 a file (openat, fstat x2, ioctl,
lseek x2, read x2, close); the preload's own are bounded here: one guard for a served file's
open and one for its close (7 and 3 pairs before), no geteuid/getegid per request, the page
cache's memfd moved up in one fcntl, and (the shared mode) no fstat nor fsetxattr of a new
memfd to note its known state: the server notes it as it makes and fills it, the open's answer
carries it.
"""
import io
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import base_env, ldpfuse_run_argv

ARCHIVE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                       "archive.py") + ":Archive"
FILES = 300

READER = r'''
import os, sys
root = sys.argv[1]
names = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
n = 0
for p in names:
    with open(p, "rb") as f:
        n += len(f.read())
print("read", len(names), n)
'''


def make_tar(tmp_path):
    tar = tmp_path / "data.tar"
    total = 0
    with tarfile.open(tar, "w") as t:
        for i in range(FILES):
            data = os.urandom(1024 + 97 * i)
            total += len(data)
            info = tarfile.TarInfo(f"d{i % 7}/f{i:04d}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return tar, total


def counted(path):
    calls = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    return calls


def test_python_reader_of_small_served_files_pays_few_system_calls(tmp_path):
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: the system calls it counts are what this checks")
    tar, total = make_tar(tmp_path)
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    counts = tmp_path / "counts"
    mode = os.environ.get("LDPFUSE_TEST_MODE", "shared")
    argv = ldpfuse_run_argv() + ["--mode", mode, "--mountpoint", str(tmp_path / "mnt"), ARCHIVE, str(tar), "--",
                                 "strace", "-f", "-c", "-o", str(counts), "python3", str(reader),
                                 str(tmp_path / "mnt")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=base_env(), cwd=str(tmp_path))
    assert r.returncode == 0 and f"read {FILES} {total}" in r.stdout, r.stdout + r.stderr
    calls = counted(counts)
    assert calls.get("read", 0) >= 2 * FILES, calls
    # before: 18 rt_sigprocmask (20 embedded), 2 geteuid and 2 getegid, 3 fcntl a file;
    # after 4.4 (8.3 embedded: the reader starts the class too, and its indexing of the tar
    # is counted, ~1,000 of them)
    assert calls.get("rt_sigprocmask", 0) < (12 if mode == "embedded" else 8) * FILES, calls
    assert calls.get("geteuid", 0) < FILES // 2, calls
    assert calls.get("getegid", 0) < FILES // 2, calls
    assert calls.get("fcntl", 0) < (4 if mode == "embedded" else 2) * FILES, calls
    if mode == "shared":
        # the known state of each new memfd: noted by the server, not by the reader (before:
        # one fsetxattr and one more fstat a file)
        assert calls.get("fsetxattr", 0) < FILES // 10, calls


def test_server_keeps_unchanged_small_files_without_reading_their_note(tmp_path):
    """The server's last close of a page cache it made, filled and noted, and no process
    changed since, keeps it without reading the note back (fgetxattr: one a file before)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: the system calls it counts are what this checks")
    if os.environ.get("LDPFUSE_TEST_MODE", "shared") != "shared":
        pytest.skip("the server's page caches are the shared mode's")
    tar, total = make_tar(tmp_path)
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    counts = tmp_path / "counts"
    argv = ["strace", "-f", "-c", "-o", str(counts)] + ldpfuse_run_argv() + [
        "--mode", "shared", "--mountpoint", str(tmp_path / "mnt"), ARCHIVE, str(tar), "--",
        "python3", str(reader), str(tmp_path / "mnt")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=base_env(), cwd=str(tmp_path))
    assert r.returncode == 0 and f"read {FILES} {total}" in r.stdout, r.stdout + r.stderr
    calls = counted(counts)
    assert calls.get("fsetxattr", 0) >= FILES, calls     # each new memfd noted (by the server)
    assert calls.get("fgetxattr", 0) < FILES // 10, calls
