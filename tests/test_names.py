"""Names and sizes that stress path handling and directory reading: a
directory of 3000 entries (read in several getdents batches), names with
spaces, newlines, UTF-8 and shell metacharacters, 255-byte names, and a
path of more than 3000 bytes.  Compared with native runs."""

import sys

import pytest

from conftest import LOOPBACK, MEMORY

N = 3000
ODD_NAMES = ["name with spaces", "tab\there", "new\nline", "ünïcödé-名前", "$dollar",
             "*star", "quote'\"", "-leading-dash", ".hidden", "..dots", "back\\slash",
             "n" * 255]


def build_big_dir(root):
    big = root / "big"
    big.mkdir()
    for i in range(N):
        (big / f"entry-{i:05d}-{'x' * (i % 40)}").write_bytes(b"")
    odd = root / "odd"
    odd.mkdir()
    for name in ODD_NAMES:
        (odd / name).write_text(name + "\n")


@pytest.fixture(params=[{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def nws(request, ws):
    ws.populate(build_big_dir)
    ws.options = request.param
    return ws


def test_big_directory_listing_matches_native(nws):
    nws.compare_sh("""
        ls "$D/big" | wc -l
        ls "$D/big" | md5sum
        ls -U "$D/big" | sort | md5sum
        ls -la "$D/big" | wc -l
        find "$D/big" -type f | wc -l
        "$PY" -c 'import os, sys; print(len(os.listdir(sys.argv[1])), len(list(os.scandir(sys.argv[1]))))' "$D/big"
        du -s --apparent-size --inodes "$D/big"
        rm "$D"/big/entry-0*5-*
        ls "$D/big" | wc -l
        rm -rf "$D/big"
        ls "$D"
    """, options=nws.options, env_extra={"PY": sys.executable})


def test_odd_names_match_native(nws):
    nws.compare_sh("""
        ls -b "$D/odd"
        find "$D/odd" -type f -print0 | sort -z | xargs -0 cat | md5sum
        for f in "$D"/odd/*; do printf '%s|' "$(basename "$f")"; done; echo
        cp -a "$D/odd" "$D/odd2"
        diff -r "$D/odd" "$D/odd2" && echo same
        mv "$D/odd2/name with spaces" "$D/odd2/ünïcödé-moved"
        ls -b "$D/odd2" | head -3
        touch "$D/odd/$(printf 'n%.0s' $(seq 256))" || echo "256-byte name refused: $?"
    """, options=nws.options)


DEEP = r'''
import errno, os
D = os.environ["D"]
part = "d" * 60
path = D
depth = 0
while True:
    nxt = os.path.join(path, part)
    if len(nxt) - len(D) > 3300:
        break
    os.mkdir(nxt)
    path, depth = nxt, depth + 1
with open(os.path.join(path, "leaf"), "w") as f:
    f.write("deep\n")
print("depth", depth, "relative length", len(path) - len(D))
print("read", open(os.path.join(path, "leaf")).read().strip())
print("stat", os.stat(os.path.join(path, "leaf")).st_size)
walked = sum(1 for _ in os.walk(D))
print("walk", walked)
try:
    os.stat(os.path.join(path, "x" * 10, part * 20))
except OSError as e:
    print("too long", errno.errorcode[e.errno])
os.chdir(path)
print("relative read", open("leaf").read().strip(), len(os.getcwd()) - len(D))
'''


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_deep_path_over_3000_bytes_matches_native(ws, fs):
    ws.compare_py(DEEP, fs=fs)
