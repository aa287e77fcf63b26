"""tar on the loopback example: archives made from the mount and extracted
into it are the same as with a native directory."""

import os
import subprocess

import pytest

from conftest import need

FIXED = 1_600_000_000  # 2020-09-13, every entry gets it so archives are byte-equal


def build_tree(root):
    os.makedirs(root / "src" / "pkg" / "sub")
    (root / "src" / "README").write_text("read me\n" * 50)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "src" / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 300)
    (root / "src" / "pkg" / "sub" / "empty").write_bytes(b"")
    (root / "src" / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "src" / "run.sh", 0o750)
    os.symlink("pkg/mod.py", root / "src" / "link")
    os.link(root / "src" / "README", root / "src" / "README.hard")
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (FIXED, FIXED), follow_symlinks=False)
        os.utime(dirpath, (FIXED, FIXED))


@pytest.fixture
def tarws(ws):
    need("tar")
    ws.populate(build_tree)
    # An archive made natively, outside both trees, to extract into them.
    ws.src_tar = ws.tmp / "given.tar"
    subprocess.run(["tar", "cf", ws.src_tar, "--sort=name", "-C", ws.native, "src"],
                   check=True)
    return ws


def test_tar_create_from_mount_matches_native(tarws):
    tarws.compare_sh("""
        tar cf "$O/made.tar" --sort=name -C "$D" src
        tar tvf "$O/made.tar"
        sha256sum < "$O/made.tar"
        cd "$D" && tar cf - --sort=name src | sha256sum
    """, env_extra={"GIVEN": tarws.src_tar})


def test_tar_extract_into_mount_matches_native(tarws):
    tarws.compare_sh("""
        mkdir "$D/x"
        tar xf "$GIVEN" -C "$D/x"
        tar xpf "$GIVEN" -C "$D/x" --transform 's/^src/src2/'
        find "$D/x" -mindepth 1 -printf '%P %y %m %n %s %T@\\n' | sort
        tar cf - --sort=name -C "$D/x" src | sha256sum
        diff -r "$D/src" "$D/x/src" && echo same
    """, env_extra={"GIVEN": tarws.src_tar})


def test_tar_archive_inside_mount_lists_like_native(tarws):
    tarws.compare_sh("""
        cd "$D"
        tar cf inside.tar --sort=name src
        tar tvf inside.tar
        tar rf inside.tar --sort=name src/README
        tar tf inside.tar | wc -l
        mkdir again && tar xf inside.tar -C again
        find again -printf '%P %y %m %s\\n' | sort
    """)


def test_tar_gzip_through_child_process_matches_native(tarws):
    need("gzip")
    tarws.compare_sh("""
        cd "$D"
        tar czf src.tgz --sort=name src
        gzip -dc src.tgz | sha256sum
        mkdir z && tar xzf src.tgz -C z
        diff -r src z/src && echo same
    """, tree_ignore=("src.tgz",))


def test_zip_and_unzip_roundtrip_match_native(tarws):
    need("zip")
    need("unzip")
    tarws.compare_sh("""
        cd "$D"
        zip -q -r -X src.zip src
        unzip -l src.zip | awk '{print $1, $4}'
        mkdir unz && cd unz
        unzip -q ../src.zip
        cd ..
        diff -r src unz/src && echo same
        zip -q -d src.zip src/README
        unzip -Z1 src.zip | sort
        unzip -p src.zip src/pkg/mod.py
    """, tree_ignore=("src.zip",))  # holds times the trees do not share
