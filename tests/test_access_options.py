"""FUSE's access options on the command line (issue 22; docs/security.md): only the
command's processes of the launcher's user are served unless -o allow_other (root's with
-o allow_root); allow_other turns default_permissions on unless told otherwise; the
options are spelled as FUSE spells them, alone or comma-separated."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import MEMORY, as_nobody, base_env, ldpfuse_run_argv

needs_another_user = [
    pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]

SHOW_POLICY = [sys.executable, "-c", """
import os
print(*(os.environ.get(k, "-") for k in ("LDPFUSE_ALLOW_OTHER", "LDPFUSE_ALLOW_ROOT",
                                         "LDPFUSE_DEFAULT_PERMISSIONS")))
"""]


def ldp(tmp_path, *options, cmd, fs=MEMORY, mode="shared"):
    argv = ldpfuse_run_argv() + ["--mode", mode, *options, "--mountpoint", str(tmp_path / "mnt"), fs, "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")


@pytest.mark.parametrize("options, want", [
    ((), "- - -"),
    (("-o", "allow_other"), "1 - 1"),
    (("-o", "allow_other,default_permissions=no"), "1 - -"),
    (("-o", "default_permissions"), "- - 1"),
    (("-o", "allow_root"), "- 1 -"),
    (("-oallow_other",), "1 - 1"),
])
def test_access_options_reach_the_server_as_fuse_spells_them(tmp_path, options, want):
    r = ldp(tmp_path, *options, cmd=SHOW_POLICY)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want + "\n"


def test_allow_other_and_allow_root_together_is_one_line_and_exit_2(tmp_path):
    r = ldp(tmp_path, "-o", "allow_other,allow_root", cmd=["true"])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "allow_root" in r.stderr


def test_an_access_option_beside_a_class_option_leaves_that_one_to_the_class(tmp_path):
    """-o allow_other,x=1: allow_other is the launcher's, x=1 goes to the class (which
    refuses it by name)."""
    r = ldp(tmp_path, "-o", "allow_other,no_such_option=1", cmd=["true"])
    assert r.returncode == 2
    assert "no_such_option" in r.stderr and "allow_other" not in r.stderr


def test_another_user_of_the_command_is_refused_without_allow_other(tmp_path):
    """As over kernel FUSE without allow_other: EACCES for the other user, the launcher's
    user goes on being served, and the log says why; with allow_other it is served (and
    default_permissions lets it read a 0644 file)."""
    for mark in needs_another_user:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    m = tmp_path / "mnt"
    os.chmod(tmp_path, 0o755)
    script = f"echo root > {m}/f; {' '.join(as_nobody('cat', f'{m}/f'))} || echo refused; cat {m}/f"
    r = ldp(tmp_path, cmd=["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "refused\nroot\n", r.stderr
    assert "Permission denied" in r.stderr and "allow_other" in r.stderr
    r = ldp(tmp_path, "-o", "allow_other", cmd=["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "root\nroot\n", r.stderr


def test_another_users_reader_gets_a_page_cache_of_its_own_and_sees_changes(tmp_path):
    """With allow_other, a read-only open by another user than the launcher's gets a page
    cache of its own, not the shared one it could write into (docs/security.md): it reads
    the file's data, and after the launcher's user rewrites the file (while a process of
    that user holds the shared cache open), its next reads see the new data."""
    for mark in needs_another_user:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    m = tmp_path / "mnt"
    os.chmod(tmp_path, 0o755)
    nobody_cat = " ".join(as_nobody("cat", f"{m}/f"))
    nobody_wc = " ".join(as_nobody("wc", "-c", f"{m}/f"))
    holder = f"{sys.executable} -c 'import sys; f = open(\"{m}/f\"); f.read(); sys.stdin.readline()'"
    script = (f"echo one > {m}/f; mkfifo {tmp_path}/hold; ({holder} < {tmp_path}/hold &); exec 3>{tmp_path}/hold; "
              f"{nobody_cat}; cat {m}/f; echo second line >> {m}/f; {nobody_cat}; {nobody_wc}; "
              f"printf 'x%.0s' $(seq 5000) > {m}/f; {nobody_wc}; echo >&3")
    r = ldp(tmp_path, "-o", "allow_other", cmd=["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"one\none\none\nsecond line\n16 {m}/f\n5000 {m}/f\n", r.stdout + r.stderr
