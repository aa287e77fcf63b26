"""Calls made through libc's syscall() by number reach the mount as the libc
functions of the same name do: openat2, statx, renameat2, faccessat2 and the
rest of the path and fd calls (native/interpose/syscall.c).  Real programs
make them: GNU patch (gnulib's renameat2 is syscall(SYS_renameat2), and patch
defines the function itself), Node.js (libuv's statx), and
tests/programs/raw_syscall_paths.c, built natively.  Each run is compared
with the same command on a native directory."""


import pytest

from conftest import LOOPBACK, MEMORY, build_program, need, run_native


FS_CASES = [(LOOPBACK, {}), (LOOPBACK, {"passthrough": "no"}), (MEMORY, {})]
FS_IDS = ["loopback", "loopback-no-passthrough", "memory"]


def mode_for(fs):
    """The memory example keeps its files in the Python object: several processes see one
    tree only in the shared mode, whatever mode the suite runs in."""
    return "shared" if fs == MEMORY else None


@pytest.fixture(scope="module")
def raw_syscall_paths(tmp_path_factory):
    return build_program(tmp_path_factory, "raw_syscall_paths")


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_syscall_openat2_statx_renameat2_faccessat2_on_mount_paths_match_native(
        ws, raw_syscall_paths, fs, options):
    native, _ = ws.compare(
        ["sh", "-c", f'printf "hello\\n" > "$D/f" && exec {raw_syscall_paths} "$D"'],
        fs=fs, options=options, mode=mode_for(fs))
    # the native run is the reference: it must have made every call and succeeded
    assert "openat2 create: 3" in native.stdout and native.stdout.endswith("done\n")


PATCH_TREE = {
    "src/main.c": "int main(void)\n{\n    return 1;\n}\n",
    "src/util.h": "#define A 1\n#define B 2\n",
    "README": "old readme\n",
}
NEW_TREE = {
    "src/main.c": "int main(void)\n{\n    return 0;\n}\n",
    "src/util.h": "#define A 1\n#define B 3\n#define C 4\n",
    "README": "new readme\nsecond line\n",
}


def build_patch_tree(d):
    for name, text in PATCH_TREE.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)


@pytest.mark.parametrize("fs,options", FS_CASES, ids=FS_IDS)
def test_gnu_patch_applies_and_reverts_in_mount_as_native(ws, fs, options):
    need("patch", "diff")
    old, new = ws.tmp / "old", ws.tmp / "new"
    for root, tree in ((old, PATCH_TREE), (new, NEW_TREE)):
        for name, text in tree.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    diff = run_native(["diff", "-ruN", "old", "new"], cwd=ws.tmp)
    assert diff.returncode == 1, diff.describe()
    (ws.tmp / "change.diff").write_text(diff.stdout)
    prefix = ws.start_from(build_patch_tree, fs)
    ws.compare_sh(prefix + """
        cd "$D"
        patch -b -p1 < ../change.diff
        ls -R | sort
        cat src/main.c src/util.h README
        patch -R -p1 < ../change.diff
        cat src/main.c src/util.h README
        patch --dry-run -p1 < ../change.diff
        rm src/*.orig README.orig
    """, fs=fs, options=options, mode=mode_for(fs))


NODE_SCRIPT = r"""
const fs = require("fs");
const D = process.env.D;
const s = fs.statSync(D + "/f");
console.log("statSync", s.size, s.isFile(), (s.mode & 0o777).toString(8));
console.log("lstatSync dir", fs.lstatSync(D + "/sub").isDirectory());
try { fs.statSync(D + "/missing"); } catch (e) { console.log("missing:", e.code); }
fs.writeFileSync(D + "/sub/w", "written by node\n");
fs.renameSync(D + "/sub/w", D + "/sub/w2");
console.log(fs.readFileSync(D + "/sub/w2", "utf8").trim(), fs.statSync(D + "/sub/w2").size);
console.log(fs.readdirSync(D + "/sub").sort().join(" "));
fs.accessSync(D + "/f", fs.constants.R_OK);
console.log("exists", fs.existsSync(D + "/f"), fs.existsSync(D + "/nope"));
"""


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
def test_node_fs_statsync_sees_mount_files(ws, fs):
    need("node")

    def build(d):
        (d / "f").write_text("twelve bytes")
        (d / "sub").mkdir()
        (d / "f").chmod(0o640)
    prefix = ws.start_from(build, fs)
    script = ws.write_script("stat.js", NODE_SCRIPT)
    ws.compare_sh(prefix + f'node "{script}"\n', fs=fs, mode=mode_for(fs))
