"""fusepy and mfusepy file systems behave as under `python script.py` and kernel FUSE.

The scripts in tests/fusepy_scripts/ are written in the shape of fusepy's and
mfusepy's own examples (their idioms included). Each test names the fusepy
convention it pins: how the script runs, when FUSE() returns, what the compat
layer exports, and the one-line refusals of wrong answers.
"""

import errno
import os
import sys
from pathlib import Path

import pytest

from conftest import LDP_MODE, base_env, ldpfuse_run_argv, need, run

SCRIPTS = Path(__file__).resolve().parent / "fusepy_scripts"
TIMEOUT = 90


def ldp(ws, *fs, cmd, options=(), mode=None, env=None, cwd=None):
    """ldpfuse-run [--mode M] [options] FS... -- CMD, from the test's tmp dir."""
    argv = ldpfuse_run_argv()
    mode = mode or LDP_MODE
    argv += ["--mode", mode]
    argv += [str(o) for o in options] + [str(a) for a in fs] + ["--"] + [str(c) for c in cmd]
    return run(argv, timeout=TIMEOUT, cwd=cwd or ws.tmp, env=env or base_env(HOME=ws.home))


def one_line(r):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.describe()
    return lines[0]


# -- the script runs as `python script.py ARGS`

def test_memory_example_with_builtins_idiom_keeps_what_is_written(ws):
    # fusepy's memory.py: `if not hasattr(__builtins__, 'bytes'): bytes = str`
    py = ("import sys; m = sys.argv[1]\n"
          "open(m + '/a', 'w').write('hi\\n')\n"
          "with open(m + '/a', 'a') as f: f.write('there\\n')\n"
          "print(open(m + '/a').read(), end='')\n"
          "print(sorted(__import__('os').listdir(m)))\n")
    r = ldp(ws, SCRIPTS / "memory_builtins.py", ws.mnt, options=["--log-file", ws.tmp / "log"],
            cmd=[sys.executable, "-c", py, ws.mnt])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "hi\nthere\n['a']\n", r.describe()


def test_memory_example_in_shared_mode_serves_sh_and_cat(ws):
    r = ldp(ws, SCRIPTS / "memory_builtins.py", ws.mnt, mode="shared",
            options=["--log-file", ws.tmp / "log"],
            cmd=["sh", "-c", f"echo hi > {ws.mnt}/a; cat {ws.mnt}/a; wc -c < {ws.mnt}/a"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "hi\n3\n", r.describe()


def test_script_sees_main_argv_and_builtins_as_python_gives_them(ws):
    probe = ws.write_script("probe.py", (
        "import sys, builtins\n"
        "from fuse import FUSE, Operations\n"
        "facts = [__name__, sys.argv[0] == __file__, sys.argv[1:],\n"
        "         __builtins__ is builtins, sys.modules['__main__'].__dict__ is globals(),\n"
        "         sys.path[0] == __import__('os').path.dirname(__file__)]\n"
        "class Facts(Operations):\n"
        "    def getattr(self, path, fh=None):\n"
        "        if path == '/':\n"
        "            return dict(st_mode=0o40755, st_nlink=2)\n"
        "        return dict(st_mode=0o100444, st_nlink=1, st_size=len(repr(facts)) + 1)\n"
        "    def read(self, path, size, offset, fh):\n"
        "        return (repr(facts) + '\\n').encode()[offset:offset + size]\n"
        "FUSE(Facts(), sys.argv[1], foreground=True)\n"))
    r = ldp(ws, probe, ws.mnt, "extra arg", cmd=["cat", ws.mnt / "facts"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == f"['__main__', True, [{str(ws.mnt)!r}, 'extra arg'], True, True, True]\n", \
        r.describe()


def test_m_module_runs_as_python_dash_m(ws):
    pkg = ws.tmp / "modules"
    pkg.mkdir()
    (pkg / "memfs_mod.py").write_text((SCRIPTS / "memory_builtins.py").read_text())
    py = ("import sys; m = sys.argv[1]\n"
          "open(m + '/x', 'w').write('from -m\\n'); print(open(m + '/x').read(), end='')\n")
    # the process using the mount works elsewhere: the module is still found where
    # `python -m` found it, in the launcher's directory
    r = ldp(ws, "-m", "memfs_mod", ws.mnt, options=["--log-file", ws.tmp / "log"],
            cmd=["sh", "-c", f'cd / && exec {sys.executable} -c "$0" {ws.mnt}', py], cwd=pkg)
    assert r.returncode == 0, r.describe()
    assert r.stdout == "from -m\n", r.describe()
    r = ldp(ws, "-m", "no_such_module_here", ws.mnt, cmd=["true"], cwd=pkg)
    assert r.returncode == 2 and "no_such_module_here" in one_line(r), r.describe()


# -- FUSE() returns when the command ends

def test_with_block_around_fuse_stays_open_until_the_command_ends(ws):
    # ratarmount's shape: an sqlite3 index opened in a with block around
    # FUSE(nothreads=True); it is used by every operation, and closed after
    record = ws.tmp / "record"
    py = ("import os, sys; m, record = sys.argv[1:]\n"
          "print(sorted(os.listdir(m)), open(m + '/beta.txt').read(), end='')\n"
          "print(len(open(m + '/alpha.txt', 'rb').read()), os.path.exists(record))\n")
    # one process uses the mount: it is the one that serves it in either mode
    r = ldp(ws, SCRIPTS / "sqlite_index.py", record, ws.mnt,
            cmd=[sys.executable, "-c", py, ws.mnt, record])
    assert r.returncode == 0, r.describe()
    # while the command ran, nothing after FUSE() had run in the process serving it
    assert r.stdout == "['alpha.txt', 'beta.txt'] beta\n18 False\n", r.describe()
    assert record.read_text().splitlines() == ["FUSE returned", "index closed", "finally"]


def test_fuse_called_from_a_thread_serves_the_command(ws):
    r = ldp(ws, SCRIPTS / "fuse_in_thread.py", ws.mnt,
            cmd=["sh", "-c", f"cat {ws.mnt}/file; ls {ws.mnt}"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "served from a thread\nfile\n", r.describe()


def test_exit_status_is_the_commands_after_the_script_ends(ws):
    r = ldp(ws, SCRIPTS / "sqlite_index.py", ws.tmp / "record", ws.mnt,
            cmd=["sh", "-c", f"cat {ws.mnt}/beta.txt; exit 7"])
    assert r.returncode == 7, r.describe()
    assert r.stdout == "beta\n", r.describe()


# -- what mfusepy adds

def test_readdir_with_offset_lists_every_entry(ws):
    r = ldp(ws, SCRIPTS / "mfusepy_offsets.py", ws.mnt,
            cmd=["sh", "-c", f"ls {ws.mnt} | wc -l; ls {ws.mnt} | tail -1; stat -c %F {ws.mnt}/0999"])
    assert r.returncode == 0, r.describe()
    assert r.stdout == "1000\n0999\nregular empty file\n", r.describe()


def test_enoattr_is_the_errno_of_a_missing_xattr_and_ls_la_is_quiet(ws):
    py = ("import os, sys; p = sys.argv[1] + '/0001'\n"
          "print(os.getxattr(p, 'user.kind'))\n"
          "try:\n    os.getxattr(p, 'user.none')\n"
          "except OSError as e:\n    print(e.errno)\n")
    r = ldp(ws, SCRIPTS / "mfusepy_offsets.py", ws.mnt,
            cmd=["sh", "-c", f"{sys.executable} -c \"$0\" {ws.mnt} && ls -la {ws.mnt} | wc -l", py])
    assert r.returncode == 0, r.describe()
    assert r.stdout == f"b'numbered'\n{errno.ENODATA}\n1003\n", r.describe()
    assert r.stderr == "", r.describe()


def test_use_ino_false_gives_the_mounts_inode_numbers(ws):
    need("find")
    r = ldp(ws, SCRIPTS / "same_inodes.py", ws.mnt,
            cmd=["sh", "-c", f"find {ws.mnt} | sort; stat -c %i {ws.mnt}/a {ws.mnt}/b | sort -u | wc -l"])
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines() == [str(ws.mnt), f"{ws.mnt}/a", f"{ws.mnt}/a/c",
                                     f"{ws.mnt}/a/c/f", f"{ws.mnt}/b", "2"], r.describe()
    assert r.stderr == "", r.describe()
    r = ldp(ws, SCRIPTS / "same_inodes.py", ws.mnt, "use_ino",
            cmd=["stat", "-c", "%i", ws.mnt / "a", ws.mnt / "b"])
    assert r.returncode == 0 and r.stdout == "7\n7\n", r.describe()


def test_ioctl_reaches_the_file_systems_ioctl_with_the_callers_buffer_in_both_modes(ws):
    # fusepy's examples/ioctl.py: M_IOWR adds one to the caller's number in place
    py = ("import errno, fcntl, os, struct, sys, termios; m = sys.argv[1]\n"
          "open(m + '/test', 'w').close()\n"
          "fd = os.open(m + '/test', os.O_RDONLY)\n"
          "M_IOWR = (3 << 30) | (4 << 16) | (ord('M') << 8) | 1\n"
          "buf = bytearray(struct.pack('<I', 100))\n"
          "try:\n    fcntl.ioctl(fd, M_IOWR, buf, True); print(struct.unpack('<I', buf)[0])\n"
          "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
          "try:\n    fcntl.ioctl(fd, termios.TCGETS, bytes(64))\n"
          "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
          "print(os.isatty(fd), os.isatty(1))\n"
          # immutable bytes: a copy goes in, the answer is a new bytes object
          "print(struct.unpack('<I', fcntl.ioctl(fd, M_IOWR, struct.pack('<I', 7)))[0])\n"
          # FICLONE's arg is an fd, not an address, whatever its _IOC_SIZE says
          "FICLONE = (1 << 30) | (4 << 16) | (0x94 << 8) | 9\n"
          "try:\n    fcntl.ioctl(fd, FICLONE, fd)\n"
          "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
          "fcntl.ioctl(fd, M_IOWR, buf, True); print(struct.unpack('<I', buf)[0])\n")
    r = ldp(ws, SCRIPTS / "ioctl_counter.py", ws.mnt, options=["--log-file", ws.tmp / "log"],
            cmd=[sys.executable, "-c", py, ws.mnt])
    assert r.returncode == 0, r.describe()
    # --mode shared: the caller's 4 bytes go to the server and back (W_IOCTL)
    assert r.stdout == "101\nENOTTY\nFalse False\n8\nENOTTY\n102\n", r.describe()
    assert "does not answer" not in r.stderr, r.describe()


# -- wrong answers are named at once

def test_getattr_without_st_mode_is_eio_and_a_misspelt_key_is_named(ws):
    log = ws.tmp / "log"
    r = ldp(ws, SCRIPTS / "wrong_getattr.py", ws.mnt, options=["--log-file", log],
            cmd=["sh", "-c", f"stat -c %s {ws.mnt}/misspelt; stat {ws.mnt}/nomode; echo $?"])
    assert r.stdout.splitlines()[0] == "0", r.describe()
    assert r.stdout.splitlines()[-1] == "1", r.describe()
    assert "Input/output error" in r.stderr, r.describe()
    text = log.read_text()
    assert "getattr(/misspelt) returned keys that are not struct stat's, ignored: 'size'" in text
    assert "getattr(/nomode) returned no file type in st_mode (no st_mode key): EIO" in text


def test_class_that_is_not_an_operations_is_refused_in_one_line(ws):
    fs = ws.write_script("notops.py", "class NotOps:\n    def getattr(self, path, fh=None):\n"
                                      "        return {}\n")
    marker = ws.tmp / "ran"
    r = ldp(ws, f"{fs}:NotOps", options=["--mountpoint", ws.mnt], cmd=["touch", marker])
    assert r.returncode == 2 and "NotOps is not an Operations subclass" in one_line(r), r.describe()
    assert not marker.exists()
    script = ws.write_script("notops_script.py", "import sys\nfrom fuse import FUSE\n"
                                                 "class NotOps: pass\n"
                                                 "FUSE(NotOps(), sys.argv[1])\n")
    r = ldp(ws, script, ws.mnt, cmd=["touch", marker])
    assert r.returncode == 2 and "FUSE() needs an Operations object" in one_line(r), r.describe()
    assert not marker.exists()


def test_unwritable_log_file_is_refused_in_one_line(ws):
    marker = ws.tmp / "ran"
    r = ldp(ws, SCRIPTS / "memory_builtins.py", ws.mnt,
            options=["--log-file", ws.tmp / "no" / "such" / "dir" / "log"], cmd=["touch", marker])
    assert r.returncode == 2 and "cannot write the log file" in one_line(r), r.describe()
    assert not marker.exists()


# -- -o as FUSE takes it

def test_o_ro_without_value_and_after_the_fs_spec(ws):
    (ws.lower / "f").write_text("kept\n")
    loopback = Path(__file__).resolve().parent.parent / "examples" / "loopback.py"
    for where in ("before", "after"):
        spec = [f"{loopback}:Loopback", ws.lower]
        options = ["--mountpoint", ws.mnt]
        if where == "before":
            options += ["-o", "ro"]
        else:
            spec += ["-o", "ro"]
        r = ldp(ws, *spec, options=options,
                cmd=["sh", "-c", f"cat {ws.mnt}/f; echo x > {ws.mnt}/f; "
                                 f"touch {ws.mnt}/new; stat -f -c %a {ws.mnt} >/dev/null"])
        assert r.stdout == "kept\n", r.describe()
        assert r.stderr.count("Read-only file system") == 2, r.describe()
        assert sorted(os.listdir(ws.lower)) == ["f"] and (ws.lower / "f").read_text() == "kept\n"
    r = ldp(ws, SCRIPTS / "memory_builtins.py", ws.mnt, options=["-o", "ro"],
            cmd=["sh", "-c", f"touch {ws.mnt}/a"])
    assert r.returncode == 1 and "Read-only file system" in r.stderr, r.describe()


@pytest.mark.parametrize("option", ["size=5", "x"])
def test_o_other_than_ro_is_still_refused_for_scripts(ws, option):
    r = ldp(ws, SCRIPTS / "memory_builtins.py", ws.mnt, options=["-o", option], cmd=["true"])
    assert r.returncode == 2 and "-o" in one_line(r), r.describe()


# -- the loop a FUSE() call sits in (unit)

def test_mount_loop_runs_handed_calls_on_its_own_thread_until_it_ends():
    import _thread
    import threading

    from ldpfuse_py.fusepy_script import MountLoop

    box = {}

    def fuse_thread():
        box["loop"] = MountLoop()
        box["ident"] = _thread.get_ident()
        started.set()
        box["loop"].serve()

    started = threading.Event()
    t = threading.Thread(target=fuse_thread)
    t.start()
    started.wait(10)
    loop = box["loop"]
    assert loop.run_here(_thread.get_ident) == box["ident"]
    with pytest.raises(OSError) as e:
        loop.run_here(os.stat, "/no/such/path/here")
    assert e.value.errno == errno.ENOENT
    results = []
    workers = [threading.Thread(target=lambda: results.append(loop.run_here(_thread.get_ident)))
               for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert results == [box["ident"]] * 8
    loop.end()
    t.join(10)
    assert not t.is_alive()
    # after the end, calls run where they are made
    assert loop.run_here(_thread.get_ident) == _thread.get_ident()
