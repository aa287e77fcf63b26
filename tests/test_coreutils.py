"""coreutils, findutils, diffutils and sed, compared with the same commands
on a native directory.  Each test runs on the loopback example with its
passthrough data path, with passthrough=no (the data goes through the file
system's read/write), and on the memory example in --mode shared."""

import os
import sys

import pytest

from conftest import LOOPBACK, MEMORY, need


def build_tree(root):
    """A small tree with the shapes coreutils care about."""
    os.makedirs(root / "a" / "b" / "c")
    os.makedirs(root / "empty")
    (root / "f.txt").write_text("hello\nworld\n")
    (root / "zero").write_bytes(b"")
    (root / "a" / "lines").write_text("pear\napple\nfoo bar\nbanana\nfoo\n")
    (root / "a" / "b" / "big.bin").write_bytes(
        bytes(range(256)) * 600 + b"tail")  # 153604 bytes, not page aligned
    (root / "a" / "b" / "c" / "deep.txt").write_text("deep\n")
    (root / "script.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "script.sh", 0o755)
    (root / "secret").write_text("s\n")
    os.chmod(root / "secret", 0o600)
    os.symlink("f.txt", root / "link_to_f")
    os.symlink("a/b", root / "link_to_dir")
    os.symlink("missing", root / "dangling")
    os.link(root / "f.txt", root / "hard_f")


DATA_PATHS = [
    pytest.param({"options": {}}, id="passthrough"),
    pytest.param({"options": {"passthrough": "no"}}, id="no-passthrough"),
    # The in-memory example with its state in one server process for the
    # whole command (--mode shared), so a multi-process script can use it.
    pytest.param({"fs": MEMORY, "mode": "shared"}, id="memory-shared"),
]


@pytest.fixture(params=DATA_PATHS)
def loop(request, ws):
    """The workspace with build_tree in place, and how to mount it.

    Loopback: build_tree is made in the native and the lower directory.
    Memory: the mount starts empty, so both runs begin by unpacking a seed
    tree into $D (the native run too, to stay comparable)."""
    ws.fs = request.param.get("fs", LOOPBACK)
    ws.mode = request.param.get("mode")
    ws.options = request.param.get("options", {})
    # (cp -a through ACL xattrs is what test_cp_a_then_diff_r_matches_native checks)
    ws.prefix = ws.start_from(build_tree, ws.fs)
    return ws


def seed_file(loop, name, data):
    """Put a file into the starting tree of both runs."""
    roots = (loop.native, loop.lower) if loop.fs == LOOPBACK else (loop.tmp / "seed",)
    for root in roots:
        (root / name).write_bytes(data)


def compare(loop, script, **kw):
    return loop.compare_sh(loop.prefix + script, fs=loop.fs, mode=loop.mode,
                           options=loop.options, **kw)


def test_ls_la_matches_native_names_modes_sizes_links(loop):
    # --time-style=+ prints no time; -n prints numeric owners.
    compare(loop, """
        ls -lAn --time-style=+ "$D" "$D/a" "$D/a/b" | grep -v "^total"
        ls -ldn --time-style=+ "$D" "$D/a/." "$D/a/b/c/.."
        ls -1 "$D"
        ls -R "$D"
        ls -ld "$D/link_to_dir/" "$D/empty" | cut -c1-10
    """)


def test_cp_a_then_diff_r_matches_native(loop):
    compare(loop, """
        cp -a "$D/a" "$D/a_copy"
        diff -r "$D/a" "$D/a_copy" && echo same-inside
        cp -a "$D/." "$O/out_copy"
        diff -r --no-dereference "$D" "$O/out_copy" && echo same-out
        cp -a "$O/out_copy/a" "$D/back_in"
        diff -r "$O/out_copy/a" "$D/back_in" && echo same-back
        cp "$D/a/b/big.bin" "$D/big_plain"
        cmp "$D/a/b/big.bin" "$D/big_plain" && echo cmp-ok
        cd "$D" && find a_copy back_in big_plain -printf '%p %m %n %y\n' | sort
    """)


def test_mv_renames_files_and_directories_like_native(loop):
    compare(loop, """
        mv "$D/f.txt" "$D/g.txt"
        mv "$D/a/lines" "$D/empty/"
        mv "$D/a/b" "$D/moved_b"
        echo new > "$D/replace_me"
        mv -f "$D/zero" "$D/replace_me"
        mv "$D/secret" "$O/secret_out"
        mv "$O/secret_out" "$D/secret_back"
        ls -R "$D"
        cat "$D/g.txt" "$D/hard_f"
        stat -c '%s %h %a %n' "$D/replace_me" "$D/secret_back" "$D/g.txt"
    """)


def test_rm_rf_removes_tree_like_native(loop):
    compare(loop, """
        rm -rf "$D/a"
        rm -f "$D/dangling" "$D/link_to_dir"
        rm -rf "$D/does-not-exist"
        ls -A "$D"
        rm "$D/zero" && echo removed
        rm "$D/zero" || echo "rm missing: $?"
        rmdir "$D/empty" && echo rmdir-ok
    """)


def test_find_sorted_output_matches_native(loop):
    compare(loop, """
        find "$D" | sort
        find "$D" -type f -name '*.txt' | sort
        find "$D" -type l | sort
        find "$D" -mindepth 1 -printf '%P %y %Y %m %n\\n' | sort
        find "$D" -type f -printf '%P %s\\n' | sort
        find -L "$D" -type f | sort
        find "$D" -empty | sort
    """)


def test_du_apparent_size_matches_native(loop):
    compare(loop, """
        du -s --apparent-size "$D"
        du -ab --apparent-size "$D" | sort -k2
        du -sb "$D/a/b/big.bin"
    """)


def test_stat_format_matches_native(loop):
    compare(loop, """
        cd "$D"
        for f in * a a/b a/b/big.bin; do stat -c '%s %h %F %a %n' "$f"; done
        stat -L -c '%s %F %n' link_to_f link_to_dir
        stat -c '%N' link_to_f dangling
    """)


def test_touch_d_sets_nanosecond_times_like_native(loop):
    compare(loop, """
        touch -d '2020-01-02 03:04:05.123456789' "$D/f.txt"
        stat -c '%y %x' "$D/f.txt"
        touch -m -d '2001-02-03 04:05:06.000000001' "$D/a/lines"
        touch -a -d '1999-12-31 23:59:59.999999999' "$D/a/lines"
        stat -c '%y %x' "$D/a/lines"
        touch -d '2010-10-10 10:10:10.5' "$D/new_file"
        stat -c '%y %s' "$D/new_file"
        touch -h -d '2011-11-11 11:11:11.111111111' "$D/link_to_f"
        stat -c '%y' "$D/link_to_f"
        stat -c '%y' "$D/f.txt"
        touch -r "$D/f.txt" "$D/zero"
        stat -c '%y' "$D/zero"
    """)


def test_ln_hard_link_shares_inode_and_counts_links(loop):
    compare(loop, """
        ln "$D/a/lines" "$D/lines_link"
        if [ "$(stat -c %i "$D/a/lines")" = "$(stat -c %i "$D/lines_link")" ]; then
            echo same-inode
        else
            echo different-inodes
        fi
        stat -c '%h %n' "$D/a/lines" "$D/lines_link" "$D/f.txt" "$D/hard_f"
        echo appended >> "$D/lines_link"
        cat "$D/a/lines"
        rm "$D/lines_link"
        stat -c '%h %n' "$D/a/lines"
        ln "$D/f.txt" "$D/hard_f" || echo "ln over existing: $?"
    """)


def test_ln_s_and_readlink_match_native(loop):
    compare(loop, """
        ln -s f.txt "$D/rel_link"
        ln -s "$D/a/lines" "$D/abs_link"
        ln -s ../f.txt "$D/a/up_link"
        readlink "$D/rel_link" "$D/abs_link" "$D/a/up_link" "$D/dangling"
        readlink -f "$D/rel_link" "$D/a/up_link" "$D/link_to_dir/c"
        cat "$D/rel_link" "$D/abs_link" "$D/a/up_link"
        ln -sf zero "$D/rel_link"
        readlink "$D/rel_link"
        cat "$D/dangling" || echo "dangling: $?"
    """)


def test_chmod_changes_modes_like_native(loop):
    compare(loop, """
        chmod 600 "$D/f.txt"
        chmod u+x,g-r,o= "$D/a/lines"
        chmod -R go-rwx "$D/a"
        chmod 1777 "$D/empty"
        chmod 644 "$D/link_to_f"
        stat -c '%a %A %n' "$D/f.txt" "$D/hard_f" "$D/a/lines" "$D/a" "$D/a/b" "$D/empty"
        chmod 755 "$D/dangling" || echo "chmod dangling: $?"
    """, compare_stderr=True)


def test_cat_head_wc_read_like_native(loop):
    compare(loop, """
        cat "$D/f.txt" "$D/a/lines"
        cat "$D/a/b/big.bin" | sha256sum
        sha256sum < "$D/a/b/big.bin"
        head -n 2 "$D/a/lines"
        head -c 300 "$D/a/b/big.bin" | od -An -tx1 | tail -n 2
        tail -c 10 "$D/a/b/big.bin" | od -c
        wc "$D/f.txt" "$D/a/lines" "$D/a/b/big.bin" "$D/zero"
        cat "$D/zero" "$D/link_to_f"
        cat "$D/nope" || echo "cat missing: $?"
        cat "$D/a" || echo "cat dir: $?"
    """)


def test_sort_o_in_place_matches_native(loop):
    compare(loop, """
        sort -o "$D/a/lines" "$D/a/lines"
        cat "$D/a/lines"
        sort -r "$D/a/lines" -o "$D/a/lines"
        cat "$D/a/lines"
        stat -c '%s %a' "$D/a/lines"
    """)


def test_sed_i_edits_in_place_like_native(loop):
    need("sed")
    compare(loop, """
        sed -i 's/foo/bar/g' "$D/a/lines"
        cat "$D/a/lines"
        sed -i.bak '1d' "$D/a/lines"
        cat "$D/a/lines" "$D/a/lines.bak"
        sed -i --follow-symlinks 's/hello/HELLO/' "$D/link_to_f"
        cat "$D/f.txt"
        readlink "$D/link_to_f"
        sed -i 's/world/WORLD/' "$D/link_to_f"
        cat "$D/link_to_f"
        readlink "$D/link_to_f" || echo "no longer a symlink: $?"
        stat -c '%a %h %n' "$D/a/lines" "$D/f.txt" "$D/hard_f"
    """)


def test_mkdir_p_and_rmdir_match_native(loop):
    compare(loop, """
        mkdir -p "$D/x/y/z"
        mkdir -m 700 "$D/x/private"
        mkdir "$D/x" || echo "mkdir existing: $?"
        stat -c '%a %F %n' "$D/x" "$D/x/y/z" "$D/x/private"
        rmdir "$D/x" || echo "rmdir non-empty: $?"
        rmdir -p "$D/x/y/z" 2>/dev/null || true
        ls -A "$D/x"
    """)


def test_large_file_dd_cp_truncate_match_native(loop):
    block = bytes((i * 31 + 7) % 256 for i in range(1 << 16))
    # 24 MiB, each 64 KiB block different
    seed_file(loop, "large", b"".join(block[i % 256:] + block[:i % 256] for i in range(24 * 16)))
    compare(loop, """
        dd if="$D/large" of="$D/large.dd" bs=1M status=none
        dd if="$D/large" of="$D/part" bs=4096 skip=3 count=100 status=none
        dd if=/dev/zero of="$D/large.dd" bs=1 count=1 seek=5000000 conv=notrunc status=none
        cp "$D/large" "$O/large.out"
        cp "$O/large.out" "$D/large.back"
        sha256sum "$D/large" "$D/large.dd" "$D/part" "$D/large.back" "$O/large.out"
        truncate -s 10M "$D/large.back"
        truncate -s +1M "$D/part"
        stat -c '%s %n' "$D/large.back" "$D/part"
        tail -c 100 "$D/large.back" | od -An -tx1 | head -2
        cmp "$D/large" "$D/large.dd" || true
    """)


def test_grep_r_find_exec_xargs_match_native(loop):
    compare(loop, """
        grep -rn foo "$D" | sort
        grep -rl hello "$D" | sort
        grep -rc . "$D/a" | sort
        find "$D" -type f -name '*.txt' -exec wc -c {} + | sort
        find "$D" -type f -print0 | sort -z | xargs -0 cat | md5sum
        find "$D" -name lines -execdir sh -c 'pwd; cat lines | wc -l' \\;
    """)


def test_cp_a_and_tar_keep_xattrs_like_native(loop):
    need("tar")
    compare(loop, """
        "$PY" -c '
import os, sys
D = os.environ["D"]
os.setxattr(D + "/f.txt", "user.color", b"blue")
os.setxattr(D + "/a", "user.kind", b"directory attr")
'
        cp -a "$D/f.txt" "$D/f.copy"
        cp -a "$D/a" "$O/a.copy"
        tar cf "$O/x.tar" --xattrs -C "$D" f.txt
        mkdir "$D/untar"
        tar xf "$O/x.tar" --xattrs --xattrs-include='user.*' -C "$D/untar"
        rm "$O/x.tar"  # holds the file's mtime, which differs between the trees
        "$PY" -c '
import os
import sys
D, O = os.environ["D"], os.environ["O"]
for p in (D + "/f.copy", O + "/a.copy", D + "/untar/f.txt", D + "/a"):
    print(os.path.relpath(p, os.path.dirname(D)).split("/", 1)[1],
          {n: os.getxattr(p, n) for n in sorted(os.listxattr(p))})
'
    """, env_extra={"PY": sys.executable})


def test_chown_and_chown_h_match_native(loop):
    if os.geteuid() != 0:
        pytest.skip("chown to another owner needs root")
    compare(loop, """
        chown 1234:5678 "$D/f.txt"
        chown -h 4321:8765 "$D/link_to_f"
        chgrp 999 "$D/a"
        chown -R 2000 "$D/a/b"
        stat -c '%u %g %n' "$D/f.txt" "$D/hard_f" "$D/a" "$D/a/b" "$D/a/b/big.bin"
        stat -c '%u %g %n' "$D/link_to_f"
        stat -L -c '%u %g %n' "$D/link_to_f"
    """)


def test_temp_files_in_mount_for_sort_heredoc_mktemp_match_native(loop):
    """Programs that put their temporary files in the mount: sort spilling
    to -T, bash here-documents under TMPDIR (created, unlinked, then read),
    mktemp, split and tee."""
    compare(loop, """
        mkdir "$D/tmp"
        seq 1 200000 | sed 's/^\\(.*\\)\\(.\\)$/\\2\\1/' > "$D/nums"
        sort -S 64K -T "$D/tmp" "$D/nums" | md5sum
        sort -n -S 64K -T "$D/tmp" --parallel=2 "$D/nums" | tail -2
        ls -A "$D/tmp"
        TMPDIR="$D/tmp" bash -c 'cat <<EOF
here-document through a temporary file in the mount
EOF'
        t=$(mktemp -p "$D/tmp" made.XXXXXX)
        echo temp > "$t"
        stat -c '%a %s' "$t"
        rm "$t"
        split -l 50000 -d "$D/nums" "$D/tmp/part."
        ls "$D/tmp"
        cat "$D"/tmp/part.* | cmp - "$D/nums" && echo split-joined
        echo teed | tee "$D/tmp/t1" "$D/tmp/t2" > /dev/null
        cat "$D/tmp/t1" "$D/tmp/t2"
    """)
