"""ratarmount (an mfusepy application, from PyPI) mounts archives unmodified.

`ldpfuse-run $(which ratarmount) ARCHIVE MOUNTPOINT -- COMMAND`, as its users
type `ratarmount ARCHIVE MOUNTPOINT`: its console script runs as __main__, its
`with FuseMount(...)` block stays open until the command ends, its sqlite3 index
is used by every operation (FUSE(nothreads=True): on the thread that made it).
The archives' contents are read by real programs and compared with the tree
they were made from.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LDP_MODE, base_env, ldpfuse_run_argv, need, run

pytest.importorskip("ratarmount", reason="ratarmount is not installed (pip install '.[test]')")

TIMEOUT = 120
RATARMOUNT = shutil.which("ratarmount") or str(Path(sys.executable).parent / "ratarmount")


def build_tree(root):
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("alpha\n" * 100)
    (root / "empty").mkdir()
    (root / "b.bin").write_bytes(bytes(range(256)) * 300)
    (root / "docs" / "link").symlink_to("a.txt")


READ = r"""
cd "$1"
find . | sort
find . -type f | sort | xargs md5sum
readlink docs/link
cat docs/link | wc -l
ls -l --time-style=+ docs/a.txt b.bin | awk '{print $1, $5, $NF}'
"""


def archive(ws, kind):
    src = ws.tmp / "src"
    build_tree(src)
    if kind == "tar":
        path = ws.tmp / "tree.tar"
        subprocess.run(["tar", "cf", path, "-C", src, "."], check=True)
    else:
        path = ws.tmp / "tree.zip"
        need("zip")
        subprocess.run(["zip", "-qry", path, "."], cwd=src, check=True)
    return src, path


def ratarmount(ws, *args, cmd, mode=None):
    argv = ldpfuse_run_argv()
    mode = mode or LDP_MODE
    argv += ["--mode", mode]
    argv += ["--log-file", ws.tmp / "ldpfuse.log", RATARMOUNT, *args, "--"] + cmd
    return run(argv, timeout=TIMEOUT, cwd=ws.tmp, env=base_env(HOME=ws.home))


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_ratarmount_archive_reads_like_the_tree_it_was_made_from(ws, kind):
    src, path = archive(ws, kind)
    script = ws.write_script("read.sh", READ)
    native = run(["sh", script, src], timeout=60, env=base_env())
    assert native.returncode == 0, native.describe()
    r = ratarmount(ws, path, ws.mnt, cmd=["sh", script, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == native.stdout, r.describe()


def test_ratarmount_copies_out_with_tar_and_cp(ws):
    src, path = archive(ws, "tar")
    out = ws.tmp / "out"
    r = ratarmount(ws, path, ws.mnt, cmd=[
        "sh", "-c", f'mkdir {out} && tar cf - -C {ws.mnt} . | tar xf - -C {out} && '
                    f'cp -r {ws.mnt}/docs {out}/docs-copy && diff -r {src} {out} | sort'])
    assert r.returncode == 0, r.describe()
    assert r.stdout == f"Only in {out}: docs-copy\n", r.describe()
    assert (out / "docs-copy" / "a.txt").read_text() == "alpha\n" * 100


@pytest.mark.parametrize("foreground", [[], ["-f"]], ids=["background", "foreground"])
def test_ratarmount_with_a_written_sqlite_index(ws, foreground):
    # --index-minimum-file-count 0: the index is an sqlite3 file beside the archive,
    # made and opened by the thread that then calls FUSE(nothreads=True)
    src, path = archive(ws, "tar")
    r = ratarmount(ws, *foreground, "--index-minimum-file-count", "0", path, ws.mnt,
                   cmd=["sh", "-c", f"cat {ws.mnt}/docs/a.txt | wc -c; ls {ws.mnt}"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "600\nb.bin\ndocs\nempty\n", r.describe()
    assert (ws.tmp / "tree.tar.index.sqlite").is_file()
    # a second mount loads the index it wrote
    r = ratarmount(ws, *foreground, "--index-minimum-file-count", "0", path, ws.mnt,
                   cmd=["cmp", ws.mnt / "b.bin", src / "b.bin"])
    assert r.returncode == 0, r.describe()
    assert "Successfully loaded offset dictionary" in (ws.tmp / "ldpfuse.log").read_text()


def test_ratarmount_cleans_up_after_the_command_in_shared_mode(ws):
    # its code after FUSE() runs when the command ends: it removes the mount point
    # directory it created, as after an unmount
    src, path = archive(ws, "tar")
    r = ratarmount(ws, path, ws.mnt, mode="shared", cmd=["cat", ws.mnt / "docs" / "a.txt"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "alpha\n" * 100, r.describe()
    assert "Created mount point" in (ws.tmp / "ldpfuse.log").read_text()
    assert not ws.mnt.exists()


def test_ratarmount_errno_and_exit_status_reach_the_program(ws):
    src, path = archive(ws, "tar")
    r = ratarmount(ws, path, ws.mnt, cmd=[
        "sh", "-c", f"cat {ws.mnt}/missing; touch {ws.mnt}/new; exit 3"])
    assert r.returncode == 3, r.describe()
    assert "No such file or directory" in r.stderr, r.describe()
    # kernel FUSE: create is refused, and touch's fallback utimensat() finds no file
    assert "touch: cannot touch" in r.stderr, r.describe()
    assert ws.mnt.exists() is False or not (ws.mnt / "new").exists()


def test_ratarmount_write_overlay_takes_writes_from_every_process_in_shared_mode(ws):
    # -w DIR: ratarmount's writable mount over a read-only archive (an sqlite3 database of
    # deletions in DIR). One instance must serve the whole command: --mode shared.
    src, path = archive(ws, "tar")
    overlay = ws.tmp / "overlay"
    overlay.mkdir()
    m = ws.mnt
    r = ratarmount(ws, "-w", overlay, path, m, mode="shared", cmd=[
        "sh", "-c", f"echo new > {m}/n.txt && cat {m}/n.txt && echo more >> {m}/docs/a.txt && "
                    f"tail -n 1 {m}/docs/a.txt && rm {m}/b.bin && mv {m}/n.txt {m}/docs/n.txt && "
                    f"cd {m} && find . | sort"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == ("new\nmore\n.\n./docs\n./docs/a.txt\n./docs/link\n./docs/n.txt\n"
                        "./empty\n"), r.describe()
    # what was written is in the overlay directory, on disk
    assert (overlay / "docs" / "n.txt").read_text() == "new\n"
    assert (overlay / "docs" / "a.txt").read_text() == "alpha\n" * 100 + "more\n"


def test_the_ratarmount_line_of_from_fusepy_doc_lists_the_archive(ws):
    """docs/from-fusepy.md's ratarmount line, as written, with its archive and mount point
    replaced by the test's: it lists what the archive holds as `ls -R` lists the tree the
    archive was made from."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "from-fusepy.md").read_text()
    line = next(x for x in doc.splitlines() if x.startswith("ldpfuse-run $(which ratarmount)"))
    line = line.split("  #")[0].strip()
    src, archive_path = archive(ws, "tar")
    mnt = ws.tmp / "mnt"
    script = (line.replace("ldpfuse-run", " ".join(ldpfuse_run_argv()) + f" --mode {LDP_MODE}", 1)
              .replace("$(which ratarmount)", RATARMOUNT)
              .replace("archive.tar", str(archive_path)).replace("/mnt/a", str(mnt)))
    r = run(["sh", "-c", script], timeout=TIMEOUT, cwd=ws.tmp, env=base_env(HOME=ws.home))
    native = run(["ls", "-R", src], timeout=TIMEOUT, cwd=ws.tmp, env=base_env())
    assert r.returncode == 0, r.describe()
    assert r.stdout.replace(str(mnt), "$A") == native.stdout.replace(str(src), "$A"), r.describe()
