"""rsync -a into and out of a mount, compared with native.  rsync's receiver
walks a destination path one component at a time from a real directory fd
("/", then "tmp", ..., then the mount point's name with openat(dirfd, name,
O_PATH|O_NOFOLLOW)): a real directory fd whose relative path leads into the
mount (vfs/mount.c, real_dirfd_into_mount)."""

import os
import shutil

import pytest

from conftest import LOOPBACK, MEMORY, need

SCRIPT = r"""
rsync -a "$S/" "$D/copy/"
rsync -a "$D/copy/" "$O/back/"
for d in "$D/copy" "$O/back"; do
    (cd "$d" && find . -printf '%P %y %m %s %TY-%Tm-%Td %l\n' | sort)
done
cmp "$S/big" "$D/copy/big" && cmp "$S/big" "$O/back/big"
# an update: a changed file, a new one, one deleted (--delete), a second run that has nothing to do
echo changed > "$S/a/f"
touch -d '2021-05-06 07:08:09' "$S/a/f"
echo new > "$S/a/new"
rm "$S/a/b/g"
rsync -a --delete --itemize-changes "$S/" "$D/copy/" | sort
rsync -a --delete --itemize-changes "$S/" "$D/copy/" | sort
rsync -a --delete "$D/copy/" "$O/back/"
cat "$D/copy/a/f" "$O/back/a/new"
(cd "$O/back" && find . -printf '%P %y %m %s %TY-%Tm-%Td %l\n' | sort)
"""


def build_source(src):
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "f").write_text("one\n")
    (src / "a" / "f").chmod(0o600)
    (src / "a" / "b" / "g").write_text("two\n")
    (src / "a" / "l").symlink_to("f")
    (src / "big").write_bytes(bytes(range(256)) * 4096)
    (src / "a" / "b").chmod(0o750)


@pytest.mark.parametrize("fs,options", [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}),
                                        (MEMORY, {})],
                         ids=["loopback", "loopback-no-passthrough", "memory"])
def test_rsync_archive_into_and_out_of_mount_matches_native(ws, fs, options):
    need("rsync")
    src = ws.tmp / "src"      # $S: outside both the mount and the native directory

    def fresh_source():
        shutil.rmtree(src, ignore_errors=True)
        build_source(src)
        for p in [*sorted(src.rglob("*"), reverse=True), src]:
            os.utime(p, (1600000000, 1600000000), follow_symlinks=False)
    fresh_source()
    env = {"S": src}
    native = ws.native_run(["bash", "-eu", ws.write_script("rsync.sh", SCRIPT)], env)
    assert native.returncode == 0, native.describe()
    fresh_source()
    ldp = ws.ldp_run(["bash", "-eu", ws.tmp / "rsync.sh"], fs=fs, options=options, env_extra=env,
                     mode="shared" if fs == MEMORY else None)
    report = "\n=== native ===\n" + native.describe() + "\n=== ldpfuse ===\n" + ldp.describe()
    assert (ldp.returncode, ldp.stdout, ldp.stderr) == (native.returncode, native.stdout,
                                                         native.stderr), report
    assert "*deleting   a/b/g" in native.stdout and native.stdout.count("big f 644 1048576") == 3
