"""--mode embedded never fails a process that cannot run the file system itself (issues 10
and 11): a process of another user that may not read the interpreter, a Python program of
another build, are served by the launcher's one instance over the shared mode's wire, with
their own rights, instead of getting EIO. The launcher builds that instance only when
such a process first connects. Each test names the mode it runs in (--mode embedded)."""

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import LOOPBACK, NOBODY, as_nobody, base_env, ldpfuse_run_argv

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fs_fixtures", "server_probes.py")
BOOTLOG = f"{FIXTURES}:BootLog"
SERVED = "served by the launcher's file system instance"

def nobody_can_read(path):
    r = subprocess.run(as_nobody("test", "-r", path), env=base_env())
    return r.returncode == 0


def interpreter_hidden_from_nobody():
    """The test venv's libpython is not readable by uid 65534 (pyenv under root's 0700
    home): its processes cannot run the file system themselves."""
    import sysconfig

    lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
    return os.geteuid() == 0 and shutil.which("setpriv") and not nobody_can_read(lib)


def start(shared_tmp, fs, *fs_args, cmd, log_level="info"):
    # allow_other: the launcher serves the command's processes of another user (docs/security.md)
    argv = ldpfuse_run_argv() + ["--mode", "embedded", "-o", "allow_other", "--log-level", log_level,
                                 "--mountpoint", str(shared_tmp / "mnt"), fs, *map(str, fs_args), "--", *cmd]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=base_env(), cwd="/")


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def served_lines(err):
    """{pid: [why, ...]} of the log lines saying a process is served by the launcher."""
    lines = {}
    for line in err.splitlines():
        m = re.match(r"ldpfuse\[(\d+)\]: --mode embedded: " + re.escape(SERVED) + r".*?: (.*)$", line)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a command as another user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_another_user_reads_creates_and_is_refused_in_embedded_mode(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    code, out, err = finish(start(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody("sh", "-c", f"""
        cat {m}/public
        umask 027
        echo made > {m}/open/made && cat {m}/open/made
        cat {m}/secret || echo refused
        echo x >> {m}/public || echo refused
        rm {m}/secret || echo refused
    """)))
    assert code == 0, err
    assert out == "anyone\nmade\nrefused\nrefused\nrefused\n", err
    assert "Input/output error" not in err
    assert err.count("Permission denied") == 3, err
    made = os.stat(users_lower / "open" / "made")
    assert (made.st_uid, made.st_gid, made.st_mode & 0o777) == (NOBODY, NOBODY, 0o640)
    assert (users_lower / "secret").read_text() == "root only\n"
    assert (users_lower / "public").read_text() == "anyone\n"
    if interpreter_hidden_from_nobody():
        served = served_lines(err)
        assert served, err
        # once per process, saying why
        assert all(len(whys) == 1 for whys in served.values()), err
        assert all(f"uid {NOBODY}" in whys[0] and "cannot read" in whys[0] for whys in served.values()), err


@pytest.mark.skipif(not interpreter_hidden_from_nobody(),
                    reason="needs root, setpriv, and an interpreter uid 65534 cannot read "
                           "(a pyenv Python under /root)")
def test_processes_served_by_the_launcher_share_its_one_instance(shared_tmp):
    m = shared_tmp / "mnt"
    log = shared_tmp / "boots"
    p = start(shared_tmp, BOOTLOG, log, cmd=["sh", "-c", f"""
        cat {m}/pid
        {shlex.join(as_nobody('cat', f'{m}/pid'))}
        {shlex.join(as_nobody('sh', '-c', f'cat {m}/pid'))}
    """])
    code, out, err = finish(p)
    assert code == 0, err
    own, first, second = out.split()
    assert int(first) == int(second) == p.pid, (out, err)     # the launcher's instance
    assert int(own) != p.pid
    # the root cat built its own; the launcher built one, once, for both
    assert sorted(log.read_text().split()) == sorted([own, str(p.pid)]), err


def test_an_embedded_run_that_needs_no_launcher_builds_no_instance_there(shared_tmp):
    m = shared_tmp / "mnt"
    log = shared_tmp / "boots"
    p = start(shared_tmp, BOOTLOG, log, cmd=["sh", "-c", f"cat {m}/pid; cat {m}/pid"])
    code, out, err = finish(p)
    assert code == 0, err
    pids = out.split()
    assert len(pids) == 2 and p.pid not in map(int, pids), (out, err)
    assert sorted(log.read_text().split()) == sorted(pids)
    assert SERVED not in err


@pytest.mark.skipif(not interpreter_hidden_from_nobody(),
                    reason="needs root, setpriv, and an interpreter uid 65534 cannot read "
                           "(a pyenv Python under /root)")
def test_the_programs_a_served_process_starts_are_served_too(shared_tmp, users_lower):
    m = shared_tmp / "mnt"
    code, out, err = finish(start(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody(
        "sh", "-c", f"test -r {m}/public && cat {m}/public")))
    assert code == 0, err
    assert out == "anyone\n"
    served = served_lines(err)
    assert len(served) == 2, err
    whys = sorted(w[0] for w in served.values())
    assert whys[0].startswith("as the process that started it: "), err
    assert whys[1].startswith("this process (uid 65534) cannot read"), err


DEBIAN_PYTHON = "/usr/bin/python3.11"


@pytest.mark.skipif(not os.path.exists(DEBIAN_PYTHON), reason=f"{DEBIAN_PYTHON} is not installed "
                    "(apt-get install python3.11: Debian's own build)")
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_debians_python_of_the_same_version_uses_the_mount(shared_tmp, users_lower, user):
    if user == "nobody" and not (os.geteuid() == 0 and shutil.which("setpriv")):
        pytest.skip("starting a command as another user needs root and setpriv")
    m = shared_tmp / "mnt"
    script = (f"open('{m}/open/by-python', 'w').write('written\\n');"
              f"print(open('{m}/open/by-python').read(), end='');"
              f"print(open('{m}/public').read(), end='')")
    cmd = [DEBIAN_PYTHON, "-c", script]
    code, out, err = finish(start(shared_tmp, LOOPBACK, users_lower, cmd=as_nobody(*cmd) if user == "nobody" else cmd))
    assert code == 0, err
    assert out == "written\nanyone\n", err
    owner = os.stat(users_lower / "open" / "by-python").st_uid
    assert owner == (NOBODY if user == "nobody" else 0)


def test_a_venv_in_the_mount_starts_from_the_mount(shared_tmp):
    """The venv's python reads its pyvenv.cfg in the mount before its interpreter runs:
    it cannot host the file system then, and is served by the launcher (it stopped with
    'Fatal Python error: error evaluating path' when it got EIO)."""
    import sys

    users_lower = shared_tmp / "lower"
    users_lower.mkdir()
    r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(users_lower / "venv")],
                       capture_output=True, text=True, env=base_env())
    assert r.returncode == 0, r.stderr
    m = shared_tmp / "mnt"
    code, out, err = finish(start(shared_tmp, LOOPBACK, users_lower, cmd=[
        f"{m}/venv/bin/python", "-c", "import sys; print(sys.prefix); print(open(sys.prefix + '/pyvenv.cfg').read() != '')"]))
    assert code == 0, err
    assert out == f"{m}/venv\nTrue\n", err
    served = served_lines(err)
    assert len(served) == 1 and "interpreter is not running" in list(served.values())[0][0], err


@pytest.mark.skipif(not interpreter_hidden_from_nobody(),
                    reason="needs root, setpriv, and an interpreter uid 65534 cannot read "
                           "(a pyenv Python under /root)")
def test_a_fusepy_scripts_embedded_run_has_no_launcher_to_serve_and_says_so(shared_tmp, users_lower):
    """A fusepy script's embedded run execs the command from FUSE(): no launcher is left
    to serve, so another user's process gets EIO and one line on stderr saying why."""
    m = shared_tmp / "mnt"
    script = Path(__file__).resolve().parent / "fusepy_scripts" / "loopback.py"
    argv = ldpfuse_run_argv() + ["--mode", "embedded", str(script), str(users_lower), str(m), "--",
                                 *as_nobody("sh", "-c", f"cat {m}/public; cat {m}/public")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env(), cwd="/")
    assert r.stdout == ""
    assert r.stderr.count("Input/output error") == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("ldpfuse[")]
    assert len(lines) == 2, r.stderr     # one per cat
    for line in lines:
        assert f"(uid {NOBODY}) cannot read" in line and "fail with EIO" in line, line
        assert "the default shared mode" in line, line
