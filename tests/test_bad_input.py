"""Bad input to ldpfuse-run: one clear line on stderr that names the bad value, exit
status 2 (127 for a command that does not exist, 126 for one that cannot be executed, as
a shell), and nothing half-started: the command did not run and the mount point was not
created."""

import os

import pytest

from conftest import FS_FIXTURES, LDP_MODE, LOOPBACK, base_env, ldpfuse_run_argv, run, run_native

TIMEOUT = 60


def ldpfuse(ws, *args):
    return run(ldpfuse_run_argv() + [str(a) for a in args], timeout=TIMEOUT,
               cwd=ws.tmp, env=base_env())


def marker_cmd(ws):
    """A command that leaves a marker file when it runs."""
    ws.marker = ws.tmp / "command-ran"
    return ["sh", "-c", f"touch {ws.marker}"]


def assert_refused(ws, r, *mentions):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, r.describe()
    assert len(lines) == 1, "expected one line on stderr:\n" + r.describe()
    for word in mentions:
        assert word in lines[0], f"the error line does not mention {word!r}:\n" + r.describe()
    assert not ws.marker.exists(), "the command ran although the input was bad"
    assert not ws.mnt.exists(), "the mount point was created on disk"


BAD_SPECS = [
    ("missing-file", lambda ws: f"{ws.tmp}/no_such_fs.py:Cls", "no_such_fs.py"),
    ("missing-module", lambda ws: "no_such_package_xyz.module:Cls", "no_such_package_xyz"),
    ("missing-class", lambda ws: f"{LOOPBACK.split(':')[0]}:NoSuchClass", "NoSuchClass"),
    ("empty-class", lambda ws: f"{LOOPBACK.split(':')[0]}:", None),
    ("empty-file", lambda ws: ":Loopback", None),
    ("two-colons", lambda ws: f"{LOOPBACK}:Extra", "Loopback:Extra"),
    ("raises-at-import", lambda ws: f"{FS_FIXTURES / 'raises_at_import.py'}:Never",
     "raises at import on purpose"),
]


@pytest.mark.parametrize("spec,mention", [(c[1], c[2]) for c in BAD_SPECS],
                         ids=[c[0] for c in BAD_SPECS])
def test_bad_fs_spec_exits_2_with_one_line_and_runs_nothing(ws, spec, mention):
    cmd = marker_cmd(ws)
    r = ldpfuse(ws, "--mountpoint", ws.mnt, spec(ws), ws.lower, "--", *cmd)
    assert_refused(ws, r, *([mention] if mention else []))


# (name, launcher arguments before FS as a function of the workspace, what the line names)
BAD_OPTIONS = [
    ("empty-mountpoint", lambda ws: ["--mountpoint", ""], "--mountpoint"),
    ("mountpoint-is-a-file", lambda ws: ["--mountpoint", ws.regular_file], "a-regular-file"),
    ("negative-op-timeout", lambda ws: ["--mountpoint", ws.mnt, "-o", "op_timeout=-1"], "-1"),
    ("nan-attr-timeout", lambda ws: ["--mountpoint", ws.mnt, "-o", "attr_timeout=nan"], "nan"),
    ("unknown-mode", lambda ws: ["--mountpoint", ws.mnt, "--mode", "bogus"], "bogus"),
    ("unknown-flag", lambda ws: ["--mountpoint", ws.mnt, "--no-such-flag"], "--no-such-flag"),
    ("option-the-class-does-not-take", lambda ws: ["--mountpoint", ws.mnt, "-o", "colour=blue"],
     "colour"),
]


@pytest.mark.parametrize("args,mention", [(c[1], c[2]) for c in BAD_OPTIONS],
                         ids=[c[0] for c in BAD_OPTIONS])
def test_bad_launcher_option_exits_2_with_one_line_naming_it(ws, args, mention):
    ws.regular_file = ws.tmp / "a-regular-file"
    ws.regular_file.write_text("not a directory\n")
    cmd = marker_cmd(ws)
    r = ldpfuse(ws, *args(ws), LOOPBACK, ws.lower, "--", *cmd)
    assert_refused(ws, r, mention)


def test_missing_double_dash_exits_2_and_runs_nothing(ws):
    cmd = marker_cmd(ws)
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, *cmd)
    assert_refused(ws, r, "--")


def test_missing_command_after_double_dash_exits_2(ws):
    ws.marker = ws.tmp / "command-ran"
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--")
    assert_refused(ws, r)


@pytest.mark.parametrize("before", [[], ["--mountpoint", "MNT"]], ids=["nothing", "mountpoint-only"])
def test_no_file_system_before_double_dash_says_the_file_system_is_missing(ws, before):
    """`ldpfuse-run -- true` said "FS_ARG is required", when the file system itself is what
    is missing (issue 35, item 5)."""
    cmd = marker_cmd(ws)
    r = ldpfuse(ws, *[ws.mnt if a == "MNT" else a for a in before], "--", *cmd)
    assert_refused(ws, r, "no file system")
    assert "FS_ARG" not in r.stderr, r.describe()


def test_a_script_of_fusepy_s_low_level_api_is_refused_in_one_line_naming_fusell(ws):
    """fusepy's fusell (FUSELL, as examples/memoryll.py in fusepy's repository uses it) is not
    supported: one line that names it (issue 35 item 3), not a ModuleNotFoundError."""
    cmd = marker_cmd(ws)
    script = ws.tmp / "memoryll.py"
    script.write_text("import sys\nfrom fusell import FUSELL\n\n"
                      "class Memory(FUSELL):\n    pass\n\n"
                      "if __name__ == '__main__':\n    Memory(sys.argv[1])\n")
    r = ldpfuse(ws, "--mountpoint", ws.mnt, script, ws.mnt, "--", *cmd)
    assert_refused(ws, r, "fusell", "not supported", "docs/from-fusepy.md")


@pytest.mark.parametrize("command", ["no-such-command-ldpfuse-test", "/nonexistent/bin/prog"])
def test_nonexistent_command_exits_127(ws, command):
    ws.marker = ws.tmp / "command-ran"
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--", command)
    assert r.returncode == 127, r.describe()
    assert command in r.stderr, r.describe()


@pytest.mark.parametrize("how", ["by-path", "on-PATH"])
def test_command_that_cannot_be_executed_exits_126_like_bash(ws, how):
    """A file without execute permission: bash says "Permission denied" and exits 126."""
    bindir = ws.tmp / "bin"
    bindir.mkdir()
    script = bindir / "not-executable"
    script.write_text("#!/bin/sh\necho ran\n")
    os.chmod(script, 0o644)
    command = str(script) if how == "by-path" else script.name
    env = base_env(PATH=f"{bindir}:{os.environ['PATH']}")
    native = run(["bash", "-c", f'"{command}"'], timeout=TIMEOUT, cwd=ws.tmp, env=env)
    r = run(ldpfuse_run_argv() + ["--mountpoint", str(ws.mnt), LOOPBACK, str(ws.lower), "--",
                                  command], timeout=TIMEOUT, cwd=ws.tmp, env=env)
    assert native.returncode == 126, native.describe()
    assert r.returncode == 126, r.describe()
    assert "Permission denied" in r.stderr and "ran" not in r.stdout, r.describe()


@pytest.mark.parametrize("status", [0, 1, 3, 42, 255])
def test_exit_status_is_the_commands(ws, status):
    (ws.lower / "f").write_text("the command ran\n")
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--",
                "sh", "-c", f"cat {ws.mnt}/f; exit {status}")
    assert (r.returncode, r.stdout) == (status, "the command ran\n"), r.describe()


def test_command_killed_by_signal_reports_it_like_native(ws):
    cmd = ["sh", "-c", "kill -TERM $$"]
    native = run_native(cmd)
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--", *cmd)
    # exec'd: killed by the same signal; or a waiting launcher: 128+signal,
    # which is what a shell shows in both cases.
    assert r.returncode in (native.returncode, 128 - native.returncode), r.describe()


def test_fs_args_and_options_reach_the_class(ws):
    """The FS_ARG (the lower directory) and `-o passthrough=no` (a keyword
    argument) reach Loopback."""
    (ws.lower / "f").write_text("via option\n")
    r = ldpfuse(ws, "--mountpoint", ws.mnt, "-o", "passthrough=no", LOOPBACK,
                ws.lower, "--", "cat", ws.mnt / "f")
    assert (r.returncode, r.stdout) == (0, "via option\n"), r.describe()


def test_module_colon_class_spec_works(ws):
    """`package.module:Class` is imported by name (here from tests/fs_fixtures
    put on PYTHONPATH)."""
    env = base_env(PYTHONPATH=FS_FIXTURES)
    r = run(ldpfuse_run_argv() + ["--mountpoint", str(ws.mnt), "faulty:TwoFiles", "--",
                                  "cat", str(ws.mnt / "f")],
            timeout=TIMEOUT, cwd=ws.tmp, env=env)
    assert (r.returncode, r.stdout) == (0, "hello\n"), r.describe()


def test_mount_point_need_not_exist_and_is_not_created(ws):
    (ws.lower / "f").write_text("x\n")
    r = ldpfuse(ws, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--",
                "cat", ws.mnt / "f")
    assert (r.returncode, r.stdout) == (0, "x\n"), r.describe()
    assert not ws.mnt.exists()


def test_nested_launcher_at_the_same_mount_point_serves_its_own_file_system(ws):
    """An ldpfuse-run inside another at the same mount point: its command sees the inner
    file system, and the outer command sees its own again afterwards."""
    inner = ws.tmp / "inner"
    inner.mkdir()
    (ws.lower / "f").write_text("outer\n")
    (inner / "f").write_text("inner\n")
    mode = ["--mode", LDP_MODE]
    nested = " ".join(map(str, ldpfuse_run_argv() + mode + ["--mountpoint", ws.mnt, LOOPBACK,
                                                              inner, "--", "cat", ws.mnt / "f"]))
    r = ldpfuse(ws, *mode, "--mountpoint", ws.mnt, LOOPBACK, ws.lower, "--",
                "sh", "-c", f"cat {ws.mnt}/f; {nested}; cat {ws.mnt}/f")
    assert (r.returncode, r.stdout) == (0, "outer\ninner\nouter\n"), r.describe()
