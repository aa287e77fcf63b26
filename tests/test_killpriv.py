"""ldpfuse clears set-user-ID and set-group-ID bits for every class, as kernel FUSE does for
every fusepy file system (issue 31, item 7; backend/killpriv.c): before a write or a
truncation by a caller that is not root, and at a chown of a file that is not a directory.
The sqlite example stores modes and has no code of its own for it. Real programs, run as
uid 65534 by setpriv, compared step by step with the same script on a native directory."""

import os
import shutil

import pytest

from conftest import EXAMPLES

SQLITEFS = f"{EXAMPLES / 'sqlitefs.py'}:SQLiteFS"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None
                                or shutil.which("perl") is None,
                                reason="acting as another user needs root, setpriv and perl")

AS_NOBODY = "setpriv --reuid=65534 --regid=65534 --clear-groups"

# The other user's writes go through fds the root shell opened (3>>f): it may not reach
# the directory itself. perl truncates the fd it was given (ftruncate).
SETID_CLEARED = rf'''
cd "$D"
touch w t g k m r o
chmod 6777 w t r
chmod 2777 g
chmod 2767 k m
chgrp 65534 m
{AS_NOBODY} sh -c 'echo x >&3' 3>>w
{AS_NOBODY} perl -e 'truncate(STDOUT, 0) or die "truncate: $!"' >>t
{AS_NOBODY} sh -c 'echo x >&3' 3>>g
{AS_NOBODY} sh -c 'echo x >&3' 3>>k
{AS_NOBODY} sh -c 'echo x >&3' 3>>m
echo x >> r
chown 65534:65534 o
chmod 6755 o
{AS_NOBODY} chown 65534:65534 o
stat -c '%n %a %u' w t g k m r o
'''


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_set_id_bits_are_cleared_by_writes_truncations_and_chown_of_another_user(ws, tmp_path, mode):
    db = tmp_path / "fs.db"
    native = ws.native_run(["bash", "-eu", ws.write_script("script.sh", SETID_CLEARED)], None)
    assert native.returncode == 0, native.describe()
    # write: both bits go; truncate: both; group-executable SGID goes; SGID without group
    # execute goes for a writer outside the file's group, stays for one in it; root's
    # write keeps them; chown by the owner: both
    assert native.stdout == "w 777 0\nt 777 0\ng 777 0\nk 767 0\nm 2767 0\nr 6777 0\no 755 65534\n"
    ldp = ws.ldp_run(["bash", "-eu", ws.tmp / "script.sh"], fs=SQLITEFS, fs_args=[db],
                     options={"allow_other": None, "default_permissions": None}, mode=mode)
    assert (ldp.returncode, ldp.stdout) == (native.returncode, native.stdout), ldp.describe()


def test_memory_and_sqlite_examples_make_files_owned_by_the_caller(ws, tmp_path):
    db = tmp_path / "fs.db"
    script = f'cd "$D"; {AS_NOBODY} sh -c "echo x > f; mkdir d; ln -s f l"; stat -c "%n %u %g" f d; stat -c "%n %u" l'
    for fs, args in ((SQLITEFS, [db]), (f"{EXAMPLES / 'memory.py'}:Memory", [])):
        ldp = ws.ldp_run(["sh", "-c", f"chmod 777 \"$D\"; {script}"], fs=fs, fs_args=args,
                         options={"allow_other": None, "default_permissions": None}, mode="shared")
        assert ldp.stdout == "f 65534 65534\nd 65534 65534\nl 65534\n", (fs, ldp.describe())
