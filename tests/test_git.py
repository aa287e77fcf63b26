"""git on the loopback example: init, add, commit, clone, gc and fsck inside
the mount give the same commits (same hashes: names and dates are fixed) as
in a native directory."""

import os

import pytest

from conftest import LOOPBACK, MEMORY, need

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer", "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_AUTHOR_DATE": "2021-03-04T05:06:07Z", "GIT_COMMITTER_DATE": "2021-03-04T05:06:07Z",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}

# The index holds inode numbers and times: compared through git instead.
GIT_DIRS = ("repo/.git", "clone/.git", "bare.git", "clone2/.git")


def build_tree(root):
    os.makedirs(root / "work" / "src" / "deep")
    (root / "work" / "README.md").write_text("# project\n")
    (root / "work" / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "work" / "src" / "deep" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (root / "work" / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    os.chmod(root / "work" / "tool.sh", 0o755)


@pytest.fixture(params=[pytest.param({}, id="loopback"),
                        pytest.param({"fs": MEMORY, "mode": "shared"}, id="memory-shared")])
def gitws(request, ws):
    """Loopback with build_tree in place, or the memory example in --mode
    shared (git runs many processes) with build_tree unpacked into $D first."""
    need("git")
    ws.fs = request.param.get("fs", LOOPBACK)
    ws.mode = request.param.get("mode")
    ws.prefix = ws.start_from(build_tree, ws.fs)
    return ws


def compare(ws, script):
    return ws.compare_sh(ws.prefix + script, fs=ws.fs, mode=ws.mode, env_extra=GIT_ENV,
                         tree_ignore=GIT_DIRS)


def test_git_init_add_commit_gives_native_hashes(gitws):
    compare(gitws, """
        cd "$D"
        git init -q -b main repo
        cp -a work/. repo/
        cd repo
        git add -A
        git commit -q -m first
        echo more >> README.md
        git mv tool.sh tool
        git commit -q -am second
        git rev-parse HEAD HEAD~1 HEAD^{tree}
        git log --oneline | wc -l
        git status --porcelain
        git fsck --no-progress --strict && echo fsck-ok
        git ls-files -s
    """)


def test_git_clone_inside_mount_is_complete_and_clean(gitws):
    compare(gitws, """
        cd "$D"
        git init -q -b main repo
        cp -a work/. repo/
        git -C repo add -A
        git -C repo commit -q -m first
        for i in 1 2 3 4 5; do
            echo "line $i" >> repo/README.md
            git -C repo commit -q -am "change $i"
        done
        git clone -q repo clone
        git clone -q --no-local repo clone2
        git clone -q --bare repo bare.git
        for r in clone clone2 bare.git; do
            git -C $r fsck --no-progress && echo "$r fsck-ok"
            git -C $r log --oneline | wc -l
            git -C $r rev-parse HEAD
        done
        git -C clone status --porcelain
        git -C clone2 status --porcelain
        # A local clone hard-links the object files.
        find clone/.git/objects -type f -links +1 | wc -l
        diff -r --exclude=.git repo clone && echo same-tree
    """)


def test_git_gc_and_repack_keep_history_like_native(gitws):
    compare(gitws, """
        cd "$D"
        git init -q -b main repo
        cp -a work/. repo/
        cd repo
        git add -A && git commit -q -m first
        for i in $(seq 1 10); do echo "$i" >> README.md; git commit -q -am "c$i"; done
        git gc -q
        git fsck --no-progress --full && echo fsck-ok
        git count-objects -v | grep -E '^(count|in-pack|packs)'
        git log --format='%H %s' | head -3
        git status --porcelain
        git checkout -q -b branch HEAD~3
        cat README.md
        git checkout -q main
        git diff HEAD~2 --stat
    """)
