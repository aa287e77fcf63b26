"""Inode numbers made up for a file system that gives none: the number readdir
reports for an entry (d_ino) is the one stat gives for its path, at the mount
root as well as below it (find, du and tar match entries by them)."""

import sys

from conftest import FS_FIXTURES, run_ldp

SCRIPT = """
import os, sys
for d in (sys.argv[1], sys.argv[1] + '/d'):
    for e in sorted(os.scandir(d), key=lambda e: e.name):
        print(e.name, e.inode() == os.stat(e.path, follow_symlinks=False).st_ino)
"""


def test_readdir_inode_matches_stat_inode_without_st_ino_from_the_fs(tmp_path):
    m = tmp_path / "mnt"
    r = run_ldp(f"{FS_FIXTURES / 'noino.py'}:NoIno", [], [sys.executable, "-c", SCRIPT, m], m)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "a True\nd True\nb True\n", r.describe()
