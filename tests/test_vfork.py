"""vfork under the preload (native/interpose/vfork.c): the real vfork when the child
cannot disturb the parent's state, so that a shell's commands cost what they cost
natively. What a vfork child does before exec (chdir and umask, exec of a program in
the mount, from a cwd in the mount, a PATH search through it) behaves as natively, and
the parent's own cwd, umask and view of the mount are untouched afterwards."""


import pytest

from conftest import build_program


def build_tree(root):
    (root / "sub").mkdir()
    (root / "f").write_text("parent's file\n")
    (root / "sub" / "run.sh").write_text('#!/bin/sh\necho "run.sh ran in $(pwd) with $1, umask $(umask)"\n')
    (root / "sub" / "run.sh").chmod(0o755)


@pytest.fixture(scope="module")
def vfork_child(tmp_path_factory):
    return build_program(tmp_path_factory, "vfork_child")


@pytest.fixture(params=[{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def vws(request, ws):
    ws.populate(build_tree)
    ws.options = request.param
    return ws


def test_vfork_child_chdir_umask_exec_leave_parent_state_alone(vws, vfork_child):
    """The child chdirs into the mount, sets its umask and execs; the parent (cwd in
    the mount, then outside) keeps its cwd, umask and relative lookups."""
    vws.compare(["sh", "-c", f'''
        cd "$D"
        {vfork_child} "$D/sub" /bin/pwd
        {vfork_child} "$D/sub" ./run.sh from-mount-cwd
        cd "$O"
        echo outside > f
        {vfork_child} "$D/sub" /bin/pwd
        {vfork_child} "$D/sub" ./run.sh relative
        {vfork_child} "$D/sub" ../sub/run.sh dotdot
        {vfork_child} "$D" "$D/sub/run.sh" absolute
        cat f
    '''], options=vws.options)


def test_dash_runs_programs_in_and_out_of_the_mount_over_vfork(vws):
    """dash vforks for each command; the commands and scripts stored in the mount run."""
    vws.compare(["sh", "-c", '''
        for i in 1 2 3; do cat "$D/f"; done
        "$D/sub/run.sh" direct
        cd "$D/sub" && ./run.sh relative && cd /
        ls "$D" | sort
        cat "$D/f" | wc -c
    '''], options=vws.options)


def test_dash_path_search_through_the_mount_matches_native(vws):
    """A PATH entry in the mount: the search runs in the child, so the shell forks."""
    vws.compare(["sh", "-c", '''
        PATH="$D/no-such-dir:$D/sub:$PATH"
        run.sh via-path
        PATH="$O/mnt-like-name:$PATH" cat "$D/f"
        no-such-command-anywhere || echo "status $?"
    '''], options=vws.options, compare_stderr=False)


def test_dash_exec_of_missing_program_in_mount_fails_127(vws):
    native, ldp = vws.compare(["sh", "-c", '"$D/no-such-program"; echo "status $?"'],
                              options=vws.options, compare_stderr=False)
    assert "not found" in ldp.stderr, ldp.describe()


def test_python_subprocess_with_cwd_in_mount_matches_native(vws):
    vws.compare_py('''
import os, subprocess
D = os.environ["D"]
print(subprocess.run(["pwd"], cwd=D + "/sub", capture_output=True, text=True).stdout, end="")
print(subprocess.run(["ls"], cwd=D, capture_output=True, text=True).stdout, end="")
print(subprocess.run(["./run.sh", "x"], cwd=D + "/sub", capture_output=True, text=True).stdout, end="")
print(subprocess.run([D + "/sub/run.sh", "y"], capture_output=True, text=True).stdout, end="")
print(os.getcwd() == os.environ["PWD"] or os.getcwd())
''', check_tree=False, options=vws.options)


def test_python_subprocess_with_missing_cwd_in_mount_raises_as_natively(vws):
    """The child's chdir is checked by a forked copy of it: the parent gets the
    FileNotFoundError (or NotADirectoryError) that the native chdir gives."""
    vws.compare_py('''
import os, subprocess
D = os.environ["D"]
for cwd in (D + "/nodir", D + "/f", D + "/sub/../sub"):
    try:
        r = subprocess.run(["pwd"], cwd=cwd, capture_output=True, text=True)
        print("status", r.returncode, r.stdout.strip(), r.stderr.strip())
    except OSError as e:
        print(type(e).__name__, e.errno)
''', check_tree=False, options=vws.options)


def test_other_mount_operation_in_vfork_child_is_eio_and_parent_goes_on(vws, vfork_child):
    """Between vfork and exec the child shares the parent's memory: the FS is not
    started there (that would be the parent's state), the call fails with EIO and says
    so, and the parent then uses the mount normally. (Natively the stat succeeds: POSIX
    allows a vfork child only exec and _exit.)"""
    r = vws.ldp_run(["sh", "-c", f'cd "$O" && {vfork_child} --stat "$D/f" && cat "$D/f"'],
                    options=vws.options)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "child status 5\nparent cwd unchanged\nparent umask 022\n" \
                       "parent stat f: No such file or directory\nparent's file\n", r.describe()
    assert "a vfork child used the mount before exec" in r.stderr, r.describe()
