"""Where the mount ends: a sibling whose name extends the mount point's, `..`
out of the mount, relative paths after cd, symlinks that leave the mount,
and spellings of the same path (`//`, `/./`).  Each compared with native."""

import os

import sys

import pytest

from conftest import LOOPBACK, MEMORY, assert_same_tree


def build_tree(root):
    os.makedirs(root / "a" / "b")
    (root / "a" / "f").write_text("in a\n")
    (root / "top").write_text("top\n")


@pytest.fixture
def bws(ws):
    ws.populate(build_tree)
    return ws


def test_sibling_whose_name_extends_mount_is_untouched(bws):
    """/mnt/x is mounted; /mnt/xy is a real directory and stays one."""
    native_xy = bws.tmp / "nativexy"
    mnt_xy = bws.tmp / "mntxy"
    for d in (native_xy, mnt_xy):
        d.mkdir()
        (d / "real.txt").write_text("real sibling\n")
        (d / "top").write_text("sibling top, not the mount's\n")
    bws.compare_sh("""
        X="${D}xy"
        cat "$X/real.txt" "$X/top"
        echo written > "$X/written"
        mkdir "$X/newdir"
        ls "$X"
        ls "$D"
        cat "$D/top"
        cd "$X" && pwd && cat top
    """)
    assert_same_tree(native_xy, mnt_xy)
    assert not (bws.lower / "written").exists()


def test_dotdot_escapes_mount_to_real_parent(bws):
    bws.compare_sh("""
        OUT="$(basename "$O")"
        echo esc1 > "$D/../$OUT/esc1"
        cat "$O/esc1"
        echo esc2 > "$D/a/b/../../../$OUT/esc2"
        cat "$O/esc2"
        [ "$(stat -c %i "$D/..")" = "$(stat -c %i "$T")" ] && echo "parent is the real parent"
        [ "$(stat -c %i "$D/a/..")" = "$(stat -c %i "$D")" ] && echo "a/.. is the mount root"
        cd "$D/a/b"
        cat ../f ../../top
        cat "../../../$OUT/esc1"
        cd ../../..
        pwd
        cd "$D/a"; cd ../..; pwd
    """, env_extra={"T": bws.tmp})


def test_relative_paths_after_cd_into_mount_match_native(bws):
    bws.compare_sh("""
        cd "$D/a"
        pwd
        /bin/pwd
        realpath . f ../top
        cat f ./f b/../f ../a/f
        echo rel > b/new
        ls b
        cat b/new
        mkdir c
        cd c
        pwd
        /bin/pwd
        echo deeper > ../c/file
        cat file
        cd ../..
        ls a
        "$PY" -c 'import os; print(os.getcwd()); print(sorted(os.listdir(".")))'
        cd /
        cd "$D"
        ls
    """, env_extra={"PY": os.sys.executable})


def test_symlinks_in_mount_pointing_outside_match_native(bws):
    bws.compare_sh("""
        OUT="$(basename "$O")"
        echo target > "$O/target"
        mkdir "$O/outdir"
        echo in-outdir > "$O/outdir/file"
        ln -s "$O/target" "$D/abs_out"
        ln -s "../$OUT/target" "$D/rel_out"
        ln -s "$O/outdir" "$D/abs_dir"
        ln -s "../../$OUT/outdir" "$D/a/rel_dir"
        ln -s "$D/a/f" "$D/abs_in"
        cat "$D/abs_out" "$D/rel_out" "$D/abs_dir/file" "$D/a/rel_dir/file" "$D/abs_in"
        readlink -f "$D/abs_out" "$D/rel_out" "$D/abs_dir/file" "$D/a/rel_dir" "$D/abs_in"
        echo appended >> "$D/abs_out"
        cat "$O/target"
        echo created > "$D/abs_dir/created"
        cat "$O/outdir/created"
        ls "$D/abs_dir/" "$D/a/rel_dir/"
        stat -L -c '%F %s' "$D/abs_out" "$D/abs_dir"
        stat -c '%F' "$D/abs_out" "$D/abs_dir"
        cd "$D/abs_dir"
        pwd
        pwd -P
        cat file
    """)


def test_symlink_outside_pointing_into_mount_matches_native(bws):
    """The kernel finds nothing behind such a link: a call that fails with ENOENT
    looks for a symlink on its path that leads into a mount (vfs/outside_link.c)."""
    bws.compare_sh("""
        ln -s "$D/a/f" "$O/link_into_file"
        ln -s "$D/a" "$O/link_into_dir"
        ln -s link_into_dir "$O/link_to_link"
        cat "$O/link_into_file" "$O/link_into_dir/f" "$O/link_to_link/f"
        ls "$O/link_into_dir"
        stat -c '%F' "$O/link_into_file"
        stat -c '%F %s' "$O/link_into_dir/f"
        stat -L -c '%F' "$O/link_into_dir" "$O/link_to_link"
        test -r "$O/link_into_dir/f" && echo readable
        echo created > "$O/link_into_dir/created"
        cat "$D/a/created"
        cat "$O/link_into_dir/missing" || echo "missing: $?"
        cd "$O/link_into_dir" && cat f && pwd
        "$PY" -c 'import os, sys; print(sorted(os.listdir(sys.argv[1])), open(sys.argv[1] + "/f").read())' "$O/link_to_link"
    """, env_extra={"PY": sys.executable})


def test_double_slash_and_dot_components_match_native(bws):
    bws.compare_sh("""
        P="$(dirname "$D")"
        B="$(basename "$D")"
        cat "$D//a///f" "$D/./a/./f" "$D/a/../a/f" "/$D/a/f" "$D/a/b/../f"
        cat "$P/./$B/a/f" "$P//$B/a/f" "$P/home/../$B/a/f" "$D/../$B/top"
        ls "$D//" "$D/." "$D/./" "$D//a//"
        stat -c '%F' "$D//a//" "$D/." "$D/" "$D/a/b/.."
        cat "$D/a/f/" || echo "trailing slash on a file: $?"
        cd "$D//a/./b//"
        pwd
        cat ..//f
    """)


def test_dotdot_after_missing_or_file_component_fails_like_native(bws):
    # The kernel resolves `x/..` only if x is a directory that exists.
    bws.compare_sh("""
        P="$(dirname "$D")"
        B="$(basename "$D")"
        cat "$D/missing/../top" || echo "missing/..: $?"
        cat "$D/top/../top" || echo "file/..: $?"
        cat "$P/missing/../$B/top" 2>&1 | sed "s|/$B/|/mountname/|" || true
    """)


@pytest.mark.parametrize("fs", ["loopback", "memory"])
def test_unclean_spellings_at_every_alignment_match_native(bws, fs):
    # vfs/mount.c checks a path for "//", "/." and a trailing '/' eight bytes at a time:
    # each spelling below lands at every offset within a word (names of 1 to 16 bytes).
    # The memory example sees the path the core made (a backing tree's kernel would
    # resolve an unclean one the same either way); it is one tree for the command's
    # processes only in the shared mode.
    bws.compare_sh("""
        for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
            N=$(printf "%${n}s" | tr ' ' x)
            mkdir "$D/$N" && echo "$n" > "$D/$N/f"
            cat "$D/$N//f" "$D/$N/./f" "$D/$N/../$N/f" "$D//$N/f"
            stat -c '%F %s' "$D/$N/" "$D/$N/." "$D/$N//" "$D/$N/f"
            cat "$D/$N/f/" 2>/dev/null || echo "trailing slash on a file: $n"
            ls -a "$D/$N/.."/ | grep -c x
            echo ".$n" > "$D/$N/.h" && cat "$D/$N/.h" "$D/$N/./.h"
        done
    """, fs=LOOPBACK if fs == "loopback" else MEMORY,
        mode="shared" if fs == "memory" else None)     # one memory tree for every process
