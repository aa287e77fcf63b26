"""A C program (tests/programs/libc_walk.c) that uses the libc functions
whose syscalls glibc makes internally (stdio, opendir/readdir, scandir, glob,
nftw, fts, realpath, mkstemp) and the fd calls that reach the kernel another
way (dup2, sendfile, copy_file_range, mmap).  Built natively once; run on a
native directory, on loopback (both data paths) and on memory (it is a
single process), and the outputs compared."""


import pytest

from conftest import LOOPBACK, MEMORY, build_program


@pytest.fixture(scope="module")
def libc_walk(tmp_path_factory):
    return build_program(tmp_path_factory, "libc_walk")


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_libc_stdio_dirstreams_walkers_match_native(ws, libc_walk, fs, options):
    native, _ = ws.compare(["sh", "-c", f'exec {libc_walk} "$D"'],
                           fs=fs, options=options)
    assert "FAILED" not in native.stdout and native.stdout.endswith("done\n")
