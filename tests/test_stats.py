"""--stats (issue 24): at the end, a table per operation of the calls that reached the file
system, their time in the server and in transport, medians and 99th percentiles."""

import re
import subprocess

import pytest

from conftest import EXAMPLES, LOOPBACK, base_env, ldpfuse_run_argv

ARCHIVE = f"{EXAMPLES / 'archive.py'}:Archive"


def run(tmp_path, *flags, cmd, mode="shared"):
    lower = tmp_path / "lower"
    lower.mkdir(exist_ok=True)
    for i in range(7):
        (lower / f"f{i}").write_text(f"{i}\n")
    argv = ldpfuse_run_argv() + ["--mode", mode, *flags, "--mountpoint", str(tmp_path / "mnt"),
                                 LOOPBACK, str(lower), "-o", "passthrough=no", "--", "sh", "-c", cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")


def rows(stderr):
    """operation -> (calls, [the other columns]) from the table."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ldpfuse-run --stats:"))
    assert lines[start + 1].split()[:2] == ["operation", "calls"], lines[start + 1]
    out = {}
    for line in lines[start + 2:]:
        m = re.match(r"(.+?)\s{2,}(\d+)\s+(.*)$", line)
        if m:
            out[m.group(1).strip()] = (int(m.group(2)), m.group(3).split())
    return out


def micros(cell, unit):
    return float(cell) * (1000 if unit == "ms" else 1)


def test_stats_counts_each_operation_and_splits_server_from_transport(tmp_path):
    m = tmp_path / "mnt"
    r = run(tmp_path, "--stats", cmd=f"for i in 0 1 2 3 4 5 6; do cat {m}/f$i; done")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(f"{i}\n" for i in range(7))
    table = rows(r.stderr)
    # each cat is a fresh process: one lookup + open, which brings the small file's data
    # (server/dispatch.c, fill_first_window: no read request of its own; then EOF from the
    # page cache), one release
    assert table["create/open"][0] == 7, r.stderr
    assert "read" not in table and table["release"][0] == 7, r.stderr
    for name, (calls, cells) in table.items():
        total, p50, p50u, p99, p99u = cells[0], cells[2], cells[3], cells[4], cells[5]
        assert cells[1] == "ms" and micros(p50, p50u) <= micros(p99, p99u), (name, cells)
    # a release follows the open on the same channel in the same process: its transport is known
    assert table["create/open"][1][6] != "-", r.stderr


def test_a_posted_release_does_not_take_the_next_opens_transport(tmp_path):
    """One process reading several files: each release is posted (nobody times it), and the
    open after it told the round trip of the open before: that was counted as the release's
    transport (bench/NOTES.md, 2026-11-27 23:00: 'release 66 us transport' was the opens')."""
    m = tmp_path / "mnt"
    r = run(tmp_path, "--stats", cmd="cat " + " ".join(f"{m}/f{i}" for i in range(7)))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(f"{i}\n" for i in range(7))
    table = rows(r.stderr)
    opens = table.get("open") or table["create/open"]
    assert opens[1][6] != "-", r.stderr
    assert table["release"][0] == 7 and table["release"][1][6] == "-", r.stderr


def test_stats_times_the_class_methods_as_the_server_called_them(tmp_path):
    """A second table: each of the class's methods timed alone where the server called it
    (bench/per_file.py sets them against the same methods in a plain loop). Seven cats of
    small files: the loopback's open(), read() (the first window, with the open) and
    release() seven times each; their names have parentheses, apart from the operations."""
    m = tmp_path / "mnt"
    r = run(tmp_path, "--stats", cmd=f"for i in 0 1 2 3 4 5 6; do cat {m}/f$i; done")
    assert r.returncode == 0 and r.stdout == "".join(f"{i}\n" for i in range(7)), r.stderr
    lines = r.stderr.splitlines()
    start = lines.index("the class's methods as the server called them:")
    assert lines[start + 1].split()[:2] == ["method", "calls"], r.stderr
    methods = {}
    for line in lines[start + 2:]:
        f = line.split()
        if len(f) == 10 and f[0].endswith("()"):     # name, calls, then 4 (value, unit)
            methods[f[0]] = (int(f[1]), micros(f[4], f[5]), micros(f[6], f[7]), f[3], f[9])
    for name in ("open()", "read()", "release()"):
        calls, p50, p99, total_unit, mean_unit = methods[name]
        assert calls == 7 and 0 < p50 <= p99 and total_unit == "ms" and mean_unit == "us", (name, r.stderr)
    assert rows(r.stderr)["release"][0] == 7, r.stderr    # the operations' table is as it was


def test_without_stats_there_is_no_table(tmp_path):
    r = run(tmp_path, cmd=f"cat {tmp_path}/mnt/f0")
    assert r.returncode == 0 and r.stdout == "0\n"
    assert "--stats" not in r.stderr


def test_stats_in_the_embedded_mode_says_what_it_can_count(tmp_path):
    r = run(tmp_path, "--stats", cmd=f"cat {tmp_path}/mnt/f0", mode="embedded")
    assert r.returncode == 0 and r.stdout == "0\n", r.stderr
    assert "ldpfuse-run --stats:" in r.stderr


def test_close_asks_for_flush_only_from_a_class_that_has_one(tmp_path):
    """FUSE's FOPEN_NOFLUSH: the archive example keeps Operations' flush (it does nothing),
    so close() asks the server nothing for it; the loopback's flush is called at each close."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}").write_text(f"{i}\n")
    tar = tmp_path / "a.tar"
    subprocess.run(["tar", "-cf", str(tar), "-C", str(src), "f0", "f1", "f2"], check=True)
    m = tmp_path / "mnt"
    argv = ldpfuse_run_argv() + ["--stats", "--mountpoint", str(m), ARCHIVE, str(tar), "--", "sh", "-c",
                                 f"for i in 0 1 2; do cat {m}/f$i; done"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")
    assert r.returncode == 0 and r.stdout == "0\n1\n2\n", r.stderr
    table = rows(r.stderr)
    assert "flush" not in table and table["release"][0] == 3, r.stderr

    r = run(tmp_path, "--stats", cmd=f"for i in 0 1 2; do cat {m}/f$i; done")
    assert r.returncode == 0 and r.stdout == "0\n1\n2\n", r.stderr
    assert rows(r.stderr)["flush"][0] == 3, r.stderr
